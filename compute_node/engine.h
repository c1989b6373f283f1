// The compute runtime: a bulk-synchronous engine over the remote store.
//
// Algorithms (algorithms/) are written against this small API, in the style
// of Ligra's edgeMap/vertexMap:
//   ForEachVertex(dir, fn)          dense scan: fn for every vertex, with its
//                                   adjacency in direction dir (pull)
//   ForEachFrontierVertex(dir, f, fn)  sparse: only vertices in frontier f
//                                   (push)
//   ParallelFor(n, fn)              local compute over [0, n)
//   NewState<T>(name, init)         a vertex-property array on the memory
//                                   nodes, double-buffered by superstep
//   BeginSuperstep / EndSuperstep   bracket a superstep (barrier + stats)
//
// Every byte of graph data reaches the engine through transport READs of
// self-describing blocks, batched per work unit; the only index it holds is
// the block directory (RemoteGraph). fn(worker, v, targets, weights) may run
// on several workers at once for different vertices; the pieces of one
// vertex that is split over several blocks are delivered in order, on one
// worker, so per-vertex accumulation needs no synchronization and sums in the
// same order as a CSR loop would.
#ifndef DMG_COMPUTE_NODE_ENGINE_H_
#define DMG_COMPUTE_NODE_ENGINE_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/aligned_buffer.h"
#include "compute_node/frontier.h"
#include "compute_node/memory_budget.h"
#include "compute_node/page_cache.h"
#include "compute_node/remote_graph.h"
#include "compute_node/run_stats.h"
#include "compute_node/worker_pool.h"
#include "store/block_format.h"
#include "transport/transport.h"

namespace dmg::compute {

using store::BlockView;
using store::Weight;

enum class CachePolicy {
  // Graph-aware: scans stream blocks through per-worker batch buffers
  // (bypassing the cache); state arrays stay whole and local when they fit,
  // else are paged; the bound is never exceeded.
  kGraphAware,
  // Baseline: every remote byte (blocks and state) through one LRU cache of
  // 4 KiB pages, no bypass, no prefetch beyond the page — how OS paging of
  // far memory (Fastswap-style) and naive DM caches behave. For comparison.
  kPageLru,
};

struct EngineOptions {
  int threads = 1;
  // Most bytes of blocks READ in one batch (one round trip) by a worker.
  uint64_t batch_bytes = 256 * 1024;
  // Streaming scans keep this many batches per worker posted ahead of the
  // one being computed on (1: no prefetch). Graph-aware only.
  int prefetch_window = 2;
  // The compute node's cache bound (MemoryBudget::kUnlimited: none), or, if
  // cache_fraction > 0, that fraction of the store image's bytes.
  uint64_t cache_bytes = MemoryBudget::kUnlimited;
  double cache_fraction = 0;
  CachePolicy cache_policy = CachePolicy::kGraphAware;
};

class StateArrayBase;
template <typename T>
class StateArray;

class Engine {
 public:
  static absl::StatusOr<std::unique_ptr<Engine>> Create(
      transport::Transport& transport, const EngineOptions& options);
  ~Engine();

  uint64_t num_vertices() const { return graph_.num_vertices(); }
  uint64_t num_arcs() const { return graph_.num_arcs(); }
  bool weighted() const { return graph_.weighted(); }
  int threads() const { return pool_->size(); }
  // False after a transport failure; cleanup then skips remote frees (the
  // memory node reclaims a dead client's regions when its connections close).
  bool healthy() const { return !pool_->failed() && !failed_; }
  const RemoteGraph& graph() const { return graph_; }

  // Calls fn(worker, v, degree) with each vertex's degree in direction d (a
  // vertex split over several blocks gets one call per piece, on one
  // worker), from block headers only: a READ of each block's header and
  // offsets, never its edges.
  template <typename Fn>
  absl::Status ForEachDegree(Direction d, Fn&& fn) {
    return ScanHeaders(
        d, [&](int w, VertexId first, uint32_t count, const uint32_t* offsets) {
          for (uint32_t k = 0; k < count; ++k) {
            fn(w, first + k, offsets[k + 1] - offsets[k]);
          }
        });
  }

  // A vertex-property array on memory node 0, both versions set to initial;
  // resident or paged as the budget allows (see state_array.h).
  template <typename T>
  absl::StatusOr<std::unique_ptr<StateArray<T>>> NewState(
      const std::string& name, T initial);

  MemoryBudget& budget() { return budget_; }
  // Bytes of the cache a resident array may not take (kept for the page
  // cache and its minimum).
  uint64_t MinimumCacheBytes() const;

  void BeginSuperstep(const char* direction, uint64_t frontier_size);
  // Ends the superstep: commits every live state array (its new version goes
  // to buffer superstep() % 2), passes a barrier (fetch-and-add on memory
  // node 0) and records the superstep's figures.
  absl::Status EndSuperstep();
  // Supersteps completed so far.
  int superstep() const { return superstep_; }

  template <typename Fn>
  absl::Status ForEachVertex(Direction d, Fn&& fn) {
    return ScanUnits(d, all_units_[static_cast<int>(d)],
                     [&](int w, const BlockView& b) {
                       for (uint32_t i = 0; i < b.vertex_count(); ++i) {
                         VertexId v = b.first_vertex() + i;
                         fn(w, v, b.targets(v), Weights(b, v));
                       }
                     });
  }

  template <typename Fn>
  absl::Status ForEachFrontierVertex(Direction d, const Frontier& frontier,
                                     Fn&& fn) {
    std::vector<Unit> units = FrontierUnits(d, frontier);
    return ScanFrontierUnits(
        d, units, frontier,
        [&](int w, VertexId v, std::span<const VertexId> targets,
            std::span<const Weight> weights) { fn(w, v, targets, weights); });
  }

  // The work unit worker w is scanning (valid inside ForEachVertex), and how
  // many units a dense scan of direction d has: per-unit partial sums,
  // added in unit order, are independent of thread count and timing.
  uint32_t current_unit(int w) const { return current_unit_[w]; }
  size_t num_units(Direction d) const {
    return all_units_[static_cast<int>(d)].size();
  }

  // fn(worker, begin, end) over a static split of [0, n).
  template <typename Fn>
  void ParallelFor(uint64_t n, Fn&& fn) {
    int t = threads();
    absl::Status s = pool_->Run([&](int w) {
      fn(w, n * w / t, n * (w + 1) / t);
      return absl::OkStatus();
    });
    (void)s;
  }

  // Figures so far; Finish() closes the totals.
  RunStats& stats() { return stats_; }
  void Finish();

  // For StateArray: bulk remote transfers split over the workers.
  WorkerPool& pool() { return *pool_; }
  transport::Transport& transport() { return transport_; }
  void Register(StateArrayBase* array);
  void Unregister(StateArrayBase* array);

 private:
  // A run of directory entries read in one batch; never cuts a split run.
  struct Unit {
    uint32_t first, last;
  };
  Engine(transport::Transport& transport, RemoteGraph graph,
         std::unique_ptr<WorkerPool> pool, const EngineOptions& options);
  absl::Status Init();
  static std::span<const Weight> Weights(const BlockView& b, VertexId v) {
    return b.weighted() ? b.weights(v) : std::span<const Weight>();
  }
  std::vector<Unit> MakeUnits(Direction d,
                              const std::vector<uint32_t>& entries) const;
  std::vector<Unit> FrontierUnits(Direction d, const Frontier& frontier);
  absl::Status ScanUnits(
      Direction d, std::span<const Unit> units,
      const std::function<void(int, const BlockView&)>& per_block);
  // Push scans: each touched block is READ whole, or, when the block
  // headers are cached and the frontier needs little of the block, only the
  // frontier vertices' edge ranges ("adaptive fetch size").
  absl::Status ScanFrontierUnits(
      Direction d, std::span<const Unit> units, const Frontier& frontier,
      const std::function<void(int, VertexId, std::span<const VertexId>,
                               std::span<const Weight>)>& fn);
  // Loads every block's offsets of direction d ("headers before payloads")
  // if the budget has room; false if not (or under page_lru).
  bool EnsureHeaders(Direction d);
  absl::Status ScanHeaders(
      Direction d,
      const std::function<void(int, VertexId, uint32_t, const uint32_t*)>&
          per_block);
  // Reads a unit's blocks (or only their headers and offsets) into worker
  // w's buffer, as many at a time as fit in it (batched READs, or page by
  // page through the cache under page_lru), calling per_block(entry, bytes,
  // length) for each, in order.
  absl::Status FetchBlocks(
      int w, Direction d, const Unit& unit, bool headers_only,
      const std::function<absl::Status(uint32_t, const std::byte*, uint32_t)>&
          per_block);
  PageCache* EnsurePageCache();
  CacheCounters CacheTotals();

  transport::Transport& transport_;
  RemoteGraph graph_;
  std::unique_ptr<WorkerPool> pool_;
  EngineOptions options_;
  std::vector<Unit> all_units_[2];
  std::vector<uint8_t> touched_[2];             // scratch for FrontierUnits
  std::vector<std::vector<uint64_t>> buffers_;  // per worker, 8-aligned
  std::vector<uint32_t> current_unit_;          // per worker
  std::vector<std::vector<std::vector<uint64_t>>> prefetch_buffers_;
  std::atomic<uint64_t> max_outstanding_{0};
  // Cached block offsets per direction: offsets of block i start at
  // header_start_[d][i] in header_offsets_[d].
  std::vector<uint64_t> header_start_[2];
  std::vector<uint32_t> header_offsets_[2];
  int header_state_[2] = {0, 0};  // 0 untried, 1 loaded, -1 no room
  uint64_t header_reservation_ = 0;
  // Hot-block cache (graph-aware, per direction): blocks of the highest
  // average degree, chosen once to fill the space granted (all the
  // direction's blocks when what is left of the budget holds them),
  // admitted when a scan reads them whole for the second time (a one-pass
  // traversal copies nothing in) and kept for the job. A
  // fixed set rather than LRU: a cyclic scan larger than an LRU cache hits
  // nothing; a fixed subset hits in proportion to its size.
  struct BlockCache {
    int state = 0;                   // 0 untried, 1 ready, -1 none
    std::vector<uint8_t> preferred;  // per entry: 0 no, 1 yes, 2 read once
    std::vector<int64_t> slot;       // byte offset in memory, -1 absent
    AlignedBuffer memory;
    std::atomic<uint64_t> used{0};
    uint64_t reserved = 0;
  };
  BlockCache block_cache_[2];
  std::atomic<uint64_t> block_hits_{0}, block_bytes_saved_{0};
  BlockCache* EnsureBlockCache(Direction d);
  // The cached copy of entry i's block, or nullptr.
  const std::byte* CachedBlock(Direction d, uint32_t i) {
    BlockCache& c = block_cache_[static_cast<int>(d)];
    if (c.state != 1) return nullptr;
    int64_t at =
        std::atomic_ref<int64_t>(c.slot[i]).load(std::memory_order_acquire);
    return at < 0 ? nullptr : c.memory.data() + at;
  }
  void MaybeAdmit(Direction d, uint32_t i, const std::byte* block);
  MemoryBudget budget_;
  uint64_t buffer_reservation_ = 0;
  std::unique_ptr<PageCache> page_cache_;
  uint64_t page_cache_reservation_ = 0;
  // page_lru: the store region of each memory node as a page source.
  std::vector<std::unique_ptr<PageSource>> store_pages_;
  CacheCounters step_cache_base_;
  transport::RegionInfo barrier_;
  int superstep_ = 0;
  std::chrono::steady_clock::time_point start_, step_start_;
  transport::OpStats step_base_;
  RunStats stats_;
  std::vector<StateArrayBase*> arrays_;
  bool failed_ = false;
};

}  // namespace dmg::compute

#include "compute_node/state_array.h"

namespace dmg::compute {

template <typename T>
absl::StatusOr<std::unique_ptr<StateArray<T>>> Engine::NewState(
    const std::string& name, T initial) {
  const uint64_t bytes = num_vertices() * sizeof(T);
  // Resident when the whole array fits beside the cache's minimum; paged
  // (through the page cache) otherwise, and always under page_lru.
  bool resident = options_.cache_policy == CachePolicy::kGraphAware &&
                  page_cache_ == nullptr &&
                  budget_.available() >= bytes + MinimumCacheBytes() &&
                  budget_.TryReserve(bytes);
  PageCache* cache = resident ? nullptr : EnsurePageCache();
  if (!resident && cache == nullptr) {
    return absl::ResourceExhaustedError(
        "no room left in the cache for vertex state; raise --cache_mb");
  }
  auto array = std::unique_ptr<StateArray<T>>(
      new StateArray<T>(this, name, num_vertices(), cache));
  array->reserved_ = resident ? bytes : 0;
  if (absl::Status s = array->Allocate(&initial); !s.ok()) return s;
  return array;
}

}  // namespace dmg::compute

#endif  // DMG_COMPUTE_NODE_ENGINE_H_

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
#include "compute_node/frontier.h"
#include "compute_node/remote_graph.h"
#include "compute_node/run_stats.h"
#include "compute_node/worker_pool.h"
#include "store/block_format.h"
#include "transport/transport.h"

namespace dmg::compute {

using store::BlockView;
using store::Weight;

struct EngineOptions {
  int threads = 1;
  // Bytes of blocks READ in one batch (one round trip) by a worker.
  uint64_t batch_bytes = 256 * 1024;
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

  // Degree of every vertex in direction d, from block headers only (a READ of
  // each block's header and offsets, not its edges).
  absl::StatusOr<std::vector<uint32_t>> Degrees(Direction d);

  // A vertex-property array on memory node 0, both versions set to initial.
  template <typename T>
  absl::StatusOr<std::unique_ptr<StateArray<T>>> NewState(
      const std::string& name, T initial);

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
    return ScanUnits(d, units, [&](int w, const BlockView& b) {
      for (uint32_t i = 0; i < b.vertex_count(); ++i) {
        VertexId v = b.first_vertex() + i;
        if (frontier.Contains(v)) fn(w, v, b.targets(v), Weights(b, v));
      }
    });
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
  void AddLocalStateBytes(int64_t bytes);
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

  transport::Transport& transport_;
  RemoteGraph graph_;
  std::unique_ptr<WorkerPool> pool_;
  EngineOptions options_;
  std::vector<Unit> all_units_[2];
  std::vector<uint8_t> touched_[2];             // scratch for FrontierUnits
  std::vector<std::vector<uint64_t>> buffers_;  // per worker, 8-aligned
  transport::RegionInfo barrier_;
  int superstep_ = 0;
  std::chrono::steady_clock::time_point start_, step_start_;
  transport::OpStats step_base_;
  RunStats stats_;
  int64_t local_state_bytes_ = 0;
  std::vector<StateArrayBase*> arrays_;
  bool failed_ = false;
};

}  // namespace dmg::compute

#include "compute_node/state_array.h"

namespace dmg::compute {

template <typename T>
absl::StatusOr<std::unique_ptr<StateArray<T>>> Engine::NewState(
    const std::string& name, T initial) {
  auto array = std::unique_ptr<StateArray<T>>(
      new StateArray<T>(this, name, num_vertices(), initial));
  if (absl::Status s = array->Allocate(); !s.ok()) return s;
  return array;
}

}  // namespace dmg::compute

#endif  // DMG_COMPUTE_NODE_ENGINE_H_

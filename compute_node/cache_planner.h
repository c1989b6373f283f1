// The one place that divides a compute node's cache bound (--cache_mb /
// --cache_fraction) among the things that hold graph data or vertex state.
// The engine asks; the planner reserves from the MemoryBudget and answers.
//
// The policy, in the order the budget is spent:
//  1. Worker block buffers, at job start. Graph-aware: each worker gets one
//     batch buffer plus a prefetch window of them; a batch is at most
//     max_batch_bytes and at least one block, sized to an eighth of the
//     bound (the rest is for state and caches). page_lru: one block each.
//     A bound below buffers + the page minimum is an error.
//  2. Vertex-state arrays, all those a program declared, ordered by their
//     cache hint (per-edge reads before per-vertex before rare, then in
//     declaration order): each stays resident (a whole local copy) while it
//     fits beside the page minimum; the first that does not, and every one
//     after it, is paged, and the page cache takes all that is left.
//     page_lru: every array is paged.
//  3. Per direction, when it is first scanned: its block headers (push
//     scans), if they fit beside the page minimum; then its hot-block cache:
//     all of its blocks if what is left holds them, else half of what is
//     left (the other direction may want the rest). Neither once a page
//     cache exists (it holds what is left), nor under page_lru.
//  4. page_lru: the page cache takes everything after the buffers.
// With no bound everything is granted: buffers of max_batch_bytes, every
// array resident, headers and all blocks of every direction.
#ifndef DMG_COMPUTE_NODE_CACHE_PLANNER_H_
#define DMG_COMPUTE_NODE_CACHE_PLANNER_H_

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "compute_node/memory_budget.h"

namespace dmg::compute {

enum class CachePolicy {
  // Graph-aware: scans stream blocks through per-worker batch buffers,
  // with a hot-block cache; state arrays stay whole and local when they
  // fit, else are paged; the bound is never exceeded.
  kGraphAware,
  // Baseline: every remote byte (blocks and state) through one LRU cache of
  // 4 KiB pages, no bypass, no prefetch beyond the page — how OS paging of
  // far memory (Fastswap-style) and naive DM caches behave. For comparison.
  kPageLru,
  // Baseline: FAM-Graph's design (IPDPS'22): every state array local
  // (a job whose state does not fit the bound cannot run), edges remote
  // with no edge cache: no hot blocks and no block headers kept, so a
  // sparse push READs its members' offsets, then their edges; scans READ
  // their vertex batches through the worker buffers, as graph-aware ones.
  kFam,
};

// The policy's name for flags and statistics: graph_aware | page_lru | fam.
const char* CachePolicyName(CachePolicy policy);

// How a vertex program reads a state array: decides who stays resident
// first when not all of them fit.
enum class CacheHint {
  kPerEdge,    // read once per edge (PageRank's contributions): keep first
  kPerVertex,  // read or written about once per vertex per superstep
  // Written by first-wins claims (BFS's depths) and otherwise read per edge
  // only as "still unset?". Resident after kPerVertex arrays; when paged
  // (graph-aware, one compute node) a bit per element, carved from the
  // bound, answers that question locally, and a claim on a page that is not
  // cached is logged and written element by element at commit instead of
  // fetching the page (StateArrayBase, "Claim filter").
  kClaimed,
  kRare,  // touched seldom (a result written once)
};

struct CacheRequest {
  uint64_t capacity = MemoryBudget::kUnlimited;
  CachePolicy policy = CachePolicy::kGraphAware;
  int threads = 1;
  uint32_t block_size = 16384;
  uint64_t max_batch_bytes = 256 * 1024;
  int prefetch_window = 2;  // graph-aware; 1 = none
};

struct BufferPlan {
  uint64_t batch_bytes = 0;       // most bytes of blocks READ in one batch
  int prefetch_window = 1;        // batches in flight per streaming worker
  uint64_t bytes_per_worker = 0;  // batch_bytes * (prefetch_window + 1)
};

struct StateRequest {
  uint64_t bytes = 0;
  CacheHint hint = CacheHint::kPerVertex;
};

class CachePlanner {
 public:
  static constexpr uint64_t kPageBytes = 4096;
  // Pages every worker may need pinned at once: the page cache's minimum.
  static constexpr uint64_t kMinimumPagesPerWorker = 16;

  CachePlanner(const CacheRequest& request, MemoryBudget& budget)
      : request_(request), budget_(budget) {}

  // Step 1: reserves the worker buffers; an error if the bound is below
  // them plus the page minimum.
  absl::StatusOr<BufferPlan> PlanBuffers();

  // Step 2: for each array, true if resident (its bytes reserved); paged
  // ones go to the page cache. Call again for arrays declared later.
  std::vector<bool> PlaceStates(std::span<const StateRequest> states);

  // Step 4 / for paged arrays: bytes for the page cache (all that is left;
  // with no bound, `unbounded_bytes`), reserved once; later calls return
  // the same. 0 if fewer than 4 pages per worker are left.
  uint64_t PageCacheBytes(uint64_t unbounded_bytes);
  bool has_page_cache() const { return page_cache_bytes_ > 0; }

  // Step 3: bytes reserved for a direction's headers (header_bytes, or 0),
  // and for its hot blocks (<= all_block_bytes; the cache reserves only
  // what its chosen blocks take: call ReturnUnused with the rest).
  uint64_t GrantHeaders(uint64_t header_bytes);
  uint64_t GrantHotBlocks(uint64_t all_block_bytes);
  void ReturnUnused(uint64_t bytes) { budget_.Release(bytes); }

  uint64_t minimum_page_bytes() const {
    return static_cast<uint64_t>(request_.threads) * kMinimumPagesPerWorker *
           kPageBytes;
  }

 private:
  // What is left beside the page minimum.
  uint64_t Spare() const;

  const CacheRequest request_;
  MemoryBudget& budget_;
  uint64_t page_cache_bytes_ = 0;
  bool paged_ = false;  // some state array is paged (or will be)
};

}  // namespace dmg::compute

#endif  // DMG_COMPUTE_NODE_CACHE_PLANNER_H_

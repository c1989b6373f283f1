// The logic of the share kernels (kernels.cu), one vertex or one chunk at a
// time, as plain inline functions that nvcc compiles for the device and any
// C++ compiler for the host. The kernels are thin loops around these; the
// host tests (tests/gpu_kernels_test.cc) drive the same functions on
// generated graphs, so the logic is checked on machines without a GPU.
//
// Conventions: a share is the vertex range [begin, end) of a compute node
// that its GPU processes. Its CSR (one direction) is indexed by the local
// id v - begin; offsets start at 0; targets are global vertex ids. Bitmaps
// over all vertices hold vertex i in bit i % 64 of word i / 64.
//
// Two schedules hand the share's vertices to the GPU's warps:
// - plain: a grid-stride loop over groups of kGroup consecutive indices;
// - NUMA: the share is split by edges into one part per L2 partition
//   ("node", measured by the topology probe), each part is cut into
//   chunks, and a persistent block on an SM of node n takes the next chunk
//   of node n's queue (an atomic counter per node), then other nodes'
//   queues once its own is empty (TakeChunk). A chunk is a run of whole
//   groups, so that a warp's group never spans two chunks.
#ifndef DMG_GPU_KERNEL_BODIES_H_
#define DMG_GPU_KERNEL_BODIES_H_

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

// __host__ __device__ under nvcc; nothing for a host compiler.
#if defined(__CUDACC__)
#define DMG_HD __host__ __device__
#else
#define DMG_HD
#endif

namespace dmg::gpu::bodies {

// Indices (vertices, frontier entries) a warp takes at a time: one a lane.
inline constexpr uint32_t kGroup = 32;
// Degree from which the whole warp works on one vertex: below it a lane
// alone reads the list (short lists waste few of a warp's loads), from it
// the lanes read 32 consecutive targets at a time (coalesced).
inline constexpr uint64_t kWarpFrom = 32;
// Length from which a lane's pull sum runs in four chains, as the CPU
// engine's Gather does (compute::internal::kGatherLanesFrom): same order,
// so a vertex a lane sums alone gets the CPU's float sum bit for bit.
inline constexpr uint64_t kChainsFrom = 8;

DMG_HD inline bool TestBit(const uint64_t* bits, uint64_t i) {
  return ((bits[i >> 6] >> (i & 63)) & 1) != 0;
}

// ---- PageRank, pull ----------------------------------------------------

// Sum of load(targets[k]) for k in [lo, hi), by one thread. load(u) reads
// u's contribution (through the read-only cache on the device).
template <typename T, typename Load>
DMG_HD T PullSum(const uint32_t* targets, uint64_t lo, uint64_t hi,
                 const Load& load) {
  T acc = T{0};
  uint64_t k = lo;
  if (hi - lo >= kChainsFrom) {
    // Four independent chains: the adds of one do not wait for the loads
    // of the others.
    T a0 = T{0}, a1 = T{0}, a2 = T{0}, a3 = T{0};
    for (; k + 4 <= hi; k += 4) {
      a0 += load(targets[k]);
      a1 += load(targets[k + 1]);
      a2 += load(targets[k + 2]);
      a3 += load(targets[k + 3]);
    }
    acc = (a0 + a1) + (a2 + a3);
  }
  for (; k < hi; ++k) acc += load(targets[k]);
  return acc;
}

// One lane's part of a warp's sum over [lo, hi): the targets at lo + lane,
// lo + lane + width, ... (the warp reads `width` consecutive targets per
// step). The warp then adds the parts with WarpTreeSum's order.
template <typename T, typename Load>
DMG_HD T PullLanePart(const uint32_t* targets, uint64_t lo, uint64_t hi,
                      uint32_t lane, uint32_t width, const Load& load) {
  T acc = T{0};
  for (uint64_t k = lo + lane; k < hi; k += width) acc += load(targets[k]);
  return acc;
}

// The butterfly the device does with __shfl_xor_sync, on an array of the
// lanes' parts (host tests; width a power of two): afterwards every entry
// holds the same total, added in the device's order.
template <typename T>
DMG_HD void WarpTreeSum(T* parts, uint32_t width) {
  for (uint32_t offset = width / 2; offset > 0; offset /= 2) {
    // Each lane reads its partner's value from before this step.
    for (uint32_t lane = 0; lane < width; ++lane) {
      if ((lane & offset) == 0) {
        const T a = parts[lane], b = parts[lane ^ offset];
        parts[lane] = a + b;
        parts[lane ^ offset] = b + a;
      }
    }
  }
}

// ---- BFS ---------------------------------------------------------------

// Bottom-up for one unvisited vertex whose in-neighbours are
// targets[lo, hi): the first one (in list order) that is in the frontier,
// or -1. Stopping at the first is what makes bottom-up cheap (GAPBS
// BUStep), and "first in list order" makes the parent deterministic.
DMG_HD inline int64_t FirstParent(const uint32_t* targets, uint64_t lo,
                                  uint64_t hi, const uint64_t* frontier) {
  for (uint64_t k = lo; k < hi; ++k) {
    if (TestBit(frontier, targets[k])) return targets[k];
  }
  return -1;
}

// A warp's bottom-up step over a long list: lane `lane` tests the target
// at window + lane; the warp takes the lowest lane that hit (so the parent
// is FirstParent's) and stops, or moves the window by the warp's width.
DMG_HD inline bool LaneHit(const uint32_t* targets, uint64_t window,
                           uint64_t hi, uint32_t lane,
                           const uint64_t* frontier) {
  const uint64_t k = window + lane;
  return k < hi && TestBit(frontier, targets[k]);
}

// Top-down for frontier vertex u whose out-neighbours are targets[lo, hi):
// every neighbour at lo + first, lo + first + stride, ... that claim(v)
// wins is emitted as emit(v, u). claim(v) is true for exactly one caller
// per vertex and call (the device: atomicOr on the visited bitmap), so
// each vertex is discovered once, with a parent that has an edge to it.
// One thread: first 0, stride 1; a warp: first lane, stride 32.
template <typename Claim, typename Emit>
DMG_HD uint64_t ExpandTopDown(const uint32_t* targets, uint64_t lo, uint64_t hi,
                              uint32_t first, uint32_t stride, uint32_t u,
                              Claim& claim, Emit& emit) {
  uint64_t claimed = 0;
  for (uint64_t k = lo + first; k < hi; k += stride) {
    const uint32_t v = targets[k];
    if (claim(v)) {
      emit(v, u);
      ++claimed;
    }
  }
  return claimed;
}

// The claim's rule on one bitmap word: `before` is the word as the atomic
// OR of `bit` found it; the caller that set the bit won the vertex.
DMG_HD inline bool WonClaim(uint64_t before, uint64_t bit) {
  return (before & bit) == 0;
}

// ---- NUMA schedule -----------------------------------------------------

// The node (L2 partition) of the SM with %smid `smid`: sm_node[smid] from
// the probe; an SM the table does not name goes to smid % nodes, so that
// every SM still drains some queue first.
DMG_HD inline int HomeNode(uint32_t smid, const int* sm_node,
                           uint32_t sm_node_size, int nodes) {
  if (nodes <= 1) return 0;
  if (smid < sm_node_size && sm_node[smid] >= 0 && sm_node[smid] < nodes) {
    return sm_node[smid];
  }
  return static_cast<int>(smid % static_cast<uint32_t>(nodes));
}

// The next chunk for a block on node `home`: from home's queue while it
// lasts, then from home + 1, home + 2, ... (mod nodes); -1 when all are
// drained. Node n's queue is chunks [node_first[n], node_first[n + 1]) and
// counters[n] (zeroed before the launch) counts the takes from it.
// ops.Load(p) reads a counter (a relaxed read: skipping a drained queue
// saves its atomics), ops.FetchAdd(p) adds 1 and returns the old value.
// Each chunk index below the queue's length is returned once, since each
// FetchAdd result is.
template <typename CounterOps>
DMG_HD int64_t TakeChunk(int home, int nodes, const uint32_t* node_first,
                         uint32_t* counters, CounterOps& ops) {
  for (int k = 0; k < nodes; ++k) {
    const int n = (home + k) % nodes;
    const uint32_t length = node_first[n + 1] - node_first[n];
    if (ops.Load(&counters[n]) >= length) continue;
    const uint32_t i = ops.FetchAdd(&counters[n]);
    if (i < length) return static_cast<int64_t>(node_first[n]) + i;
  }
  return -1;
}

// The groups of chunk c: [chunk_begin[c] / kGroup, ceil(chunk_begin[c+1] /
// kGroup)). Chunk boundaries are multiples of kGroup but the last (the
// index space's end), so the groups of two chunks never overlap.
DMG_HD inline uint64_t FirstGroup(const uint32_t* chunk_begin, int64_t c) {
  return chunk_begin[c] / kGroup;
}
DMG_HD inline uint64_t EndGroup(const uint32_t* chunk_begin, int64_t c) {
  return (static_cast<uint64_t>(chunk_begin[c + 1]) + kGroup - 1) / kGroup;
}

// ---- Host side of the NUMA schedule (plans; not compiled for the device)

// Chunks of an index space (local vertices or a frontier's entries) and
// the node that owns each: node n's queue is chunks [node_first[n],
// node_first[n + 1]), chunk c is indices [chunk_begin[c],
// chunk_begin[c + 1]).
struct ChunkPlan {
  std::vector<uint32_t> chunk_begin;  // chunks + 1 entries; [0] == 0
  std::vector<uint32_t> node_first;   // nodes + 1 entries
  uint32_t chunks() const {
    return static_cast<uint32_t>(chunk_begin.size() - 1);
  }
};

// `x` rounded up to a multiple of kGroup, at most `limit`.
inline uint64_t GroupCeil(uint64_t x, uint64_t limit) {
  return std::min(limit, (x + kGroup - 1) / kGroup * kGroup);
}

// Cost of local vertices [0, v): their edges plus one per vertex, so that
// vertices without edges are spread too.
inline uint64_t CostBefore(std::span<const uint64_t> offsets, uint64_t v) {
  return offsets[v] + v;
}

// The first local vertex v with CostBefore(v) >= cost (n when none).
inline uint64_t VertexAtCost(std::span<const uint64_t> offsets, uint64_t cost) {
  uint64_t lo = 0, hi = offsets.size() - 1;  // the answer is in [lo, hi]
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo) / 2;
    if (CostBefore(offsets, mid) >= cost) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return lo;
}

// The share's n = offsets.size() - 1 local vertices cut into `nodes`
// consecutive parts of about equal cost (edges + vertices): nodes + 1
// cuts, each a multiple of kGroup but the last (n). Part n is what node n
// reads the most: its vertices' lists and write their results.
inline std::vector<uint64_t> SplitByEdges(std::span<const uint64_t> offsets,
                                          int nodes) {
  const uint64_t n = offsets.size() - 1;
  const uint64_t total = CostBefore(offsets, n);
  std::vector<uint64_t> cuts(nodes + 1, 0);
  for (int k = 1; k < nodes; ++k) {
    const uint64_t target = total * k / nodes;
    cuts[k] =
        std::max(cuts[k - 1], GroupCeil(VertexAtCost(offsets, target), n));
  }
  cuts[nodes] = n;
  return cuts;
}

// Each part [parts[k], parts[k + 1]) of the local vertices cut into chunks
// of about `chunk_cost` (edges + vertices; at least one group each), node
// k's queue in vertex order.
inline ChunkPlan PlanChunks(std::span<const uint64_t> offsets,
                            std::span<const uint64_t> parts,
                            uint64_t chunk_cost) {
  const uint64_t n = offsets.size() - 1;
  ChunkPlan plan;
  plan.chunk_begin.push_back(0);
  plan.node_first.push_back(0);
  for (size_t k = 0; k + 1 < parts.size(); ++k) {
    uint64_t at = parts[k];
    while (at < parts[k + 1]) {
      const uint64_t by_cost = VertexAtCost(
          offsets, CostBefore(offsets, at) + std::max<uint64_t>(chunk_cost, 1));
      const uint64_t next =
          std::min(parts[k + 1], GroupCeil(std::max(by_cost, at + 1), n));
      plan.chunk_begin.push_back(static_cast<uint32_t>(next));
      at = next;
    }
    plan.node_first.push_back(plan.chunks());
  }
  return plan;
}

// A frontier's plan for top-down: `local` holds the frontier's local ids
// in increasing order; entries of vertices in part k go to node k's queue
// in chunks of `chunk_entries` (a multiple of kGroup). Part boundaries are
// rounded up to whole groups, so up to kGroup - 1 entries at a boundary
// go to the lower node: every entry still lies in exactly one chunk.
inline ChunkPlan PlanFrontier(std::span<const uint32_t> local,
                              std::span<const uint64_t> parts,
                              uint32_t chunk_entries) {
  const uint64_t size = local.size();
  const uint64_t step = GroupCeil(std::max<uint32_t>(chunk_entries, 1), ~0ull);
  ChunkPlan plan;
  plan.chunk_begin.push_back(0);
  plan.node_first.push_back(0);
  uint64_t at = 0;
  for (size_t k = 0; k + 1 < parts.size(); ++k) {
    const uint64_t part_end =
        k + 2 == parts.size()
            ? size
            : GroupCeil(
                  std::lower_bound(local.begin(), local.end(), parts[k + 1]) -
                      local.begin(),
                  size);
    while (at < part_end) {
      at = std::min(part_end, at + step);
      plan.chunk_begin.push_back(static_cast<uint32_t>(at));
    }
    plan.node_first.push_back(plan.chunks());
  }
  return plan;
}

}  // namespace dmg::gpu::bodies

#endif  // DMG_GPU_KERNEL_BODIES_H_

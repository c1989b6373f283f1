// The GPU share kernels (gpu/kernels.h). Three layers:
// - the per-vertex bodies and the NUMA schedule's chunk plans
//   (gpu/kernel_bodies.h) on the host, against simple references written
//   here: a direct double loop for the pull sums, a queue BFS for depths;
// - HostShare (fake_share_kernels.h), a ShareKernels that runs the bodies the
// way kernels.cu's
//   warps and persistent blocks do (groups of 32 lanes, a warp per long
//   list, chunks taken from per-node queues by simulated blocks), driven
//   through the same interface, BFS driver and checks as the device;
// - the device itself, skipped with the reason where no GPU is usable.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gpu/device.h"
#include "gpu/kernel_bodies.h"
#include "gpu/kernels.h"
#include "gtest/gtest.h"
#include "tests/fake_share_kernels.h"

namespace dmg::gpu {
namespace {

using bodies::ChunkPlan;
using bodies::kGroup;
using bodies::kWarpFrom;
using fake::BitmapClaim;
using fake::HostCounters;
using fake::HostShare;
using fake::Pairs;

// ---- graphs ----------------------------------------------------------

struct EdgeList {
  uint64_t n = 0;
  std::vector<std::pair<uint32_t, uint32_t>> edges;  // (source, target)
};

// Kronecker-like (R-MAT, GAPBS's a/b/c): skewed degrees, duplicates and
// self-loops kept (the kernels must take any list).
EdgeList Rmat(int scale, int edge_factor, uint64_t seed) {
  EdgeList g;
  g.n = uint64_t{1} << scale;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> coin(0, 1);
  for (uint64_t e = 0; e < (g.n * edge_factor); ++e) {
    uint32_t u = 0, v = 0;
    for (int bit = 0; bit < scale; ++bit) {
      // Quadrants a, b, c, d of the adjacency matrix: 0.57, 0.19, 0.19,
      // 0.05.
      const double r = coin(rng);
      const bool down = r >= 0.76, right = (r >= 0.57 && r < 0.76) || r >= 0.95;
      u |= (down ? 1u : 0u) << bit;
      v |= (right ? 1u : 0u) << bit;
    }
    g.edges.emplace_back(u, v);
  }
  return g;
}

EdgeList Uniform(uint64_t n, uint64_t m, uint64_t seed) {
  EdgeList g;
  g.n = n;
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<uint32_t> pick(0, n - 1);
  for (uint64_t e = 0; e < m; ++e) g.edges.emplace_back(pick(rng), pick(rng));
  return g;
}

// A hub with `count` edges each way: lists long enough for the warp path
// and for many windows of the bottom-up search.
void AddHub(EdgeList& g, uint32_t hub, uint64_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<uint32_t> pick(0, g.n - 1);
  for (uint64_t e = 0; e < count; ++e) {
    g.edges.emplace_back(hub, pick(rng));
    g.edges.emplace_back(pick(rng), hub);
  }
}

// The adjacency of [begin, end) in `d`, in the edge list's order.
ShareCsr BuildCsr(const EdgeList& g, Direction d, uint64_t begin,
                  uint64_t end) {
  ShareCsr csr;
  csr.begin = begin;
  csr.end = end;
  csr.offsets.assign(end - begin + 1, 0);
  auto owner = [d](const auto& e) {
    return d == Direction::kOut ? e.first : e.second;
  };
  for (const auto& e : g.edges) {
    const uint32_t v = owner(e);
    if (v >= begin && v < end) ++csr.offsets[v - begin + 1];
  }
  for (uint64_t i = 0; i + 1 < csr.offsets.size(); ++i) {
    csr.offsets[i + 1] += csr.offsets[i];
  }
  csr.targets.resize(csr.offsets.back());
  std::vector<uint64_t> at(csr.offsets.begin(), csr.offsets.end() - 1);
  for (const auto& e : g.edges) {
    const uint32_t v = owner(e);
    if (v >= begin && v < end) {
      csr.targets[at[v - begin]++] = d == Direction::kOut ? e.second : e.first;
    }
  }
  return csr;
}

uint64_t MaxDegree(const ShareCsr& csr) {
  uint64_t most = 0;
  for (size_t i = 0; i + 1 < csr.offsets.size(); ++i) {
    most = std::max(most, csr.offsets[i + 1] - csr.offsets[i]);
  }
  return most;
}

// ---- references ---------------------------------------------------------

template <typename T>
std::vector<double> PullReference(const ShareCsr& in,
                                  std::span<const T> contrib) {
  std::vector<double> sums(in.end - in.begin, 0.0);
  for (size_t i = 0; i < sums.size(); ++i) {
    for (uint64_t k = in.offsets[i]; k < in.offsets[i + 1]; ++k) {
      sums[i] += static_cast<double>(contrib[in.targets[k]]);
    }
  }
  return sums;
}

// Sum |a - b| / sum |b|.
template <typename T>
double RelativeL1(std::span<const T> got, const std::vector<double>& want) {
  double diff = 0, total = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff += std::fabs(static_cast<double>(got[i]) - want[i]);
    total += std::fabs(want[i]);
  }
  return total == 0 ? diff : diff / total;
}

std::vector<int32_t> QueueBfs(const ShareCsr& out, uint32_t source) {
  std::vector<int32_t> depth(out.end, -1);
  std::vector<uint32_t> queue = {source};
  depth[source] = 0;
  for (size_t head = 0; head < queue.size(); ++head) {
    const uint32_t u = queue[head];
    for (uint64_t k = out.offsets[u]; k < out.offsets[u + 1]; ++k) {
      const uint32_t v = out.targets[k];
      if (depth[v] < 0) {
        depth[v] = depth[u] + 1;
        queue.push_back(v);
      }
    }
  }
  return depth;
}

// Contributions as PageRank makes them: score / out-degree, 0 for a
// vertex without out-edges.
template <typename T>
std::vector<T> Contributions(const ShareCsr& out, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> score(0.1, 1.0);
  std::vector<T> contrib(out.end);
  for (uint64_t v = 0; v < out.end; ++v) {
    const uint64_t d = out.offsets[v + 1] - out.offsets[v];
    contrib[v] = d == 0
                     ? T{0}
                     : static_cast<T>(score(rng) / out.end) / static_cast<T>(d);
  }
  return contrib;
}

// ---- bodies, one at a time --------------------------------------------

TEST(GpuKernelBodiesTest, PullSumsMatchADirectLoop) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> value(0, 1);
  std::vector<double> contrib(1000);
  for (double& c : contrib) c = value(rng);
  std::vector<uint32_t> targets(3000);
  std::uniform_int_distribution<uint32_t> pick(0, 999);
  for (uint32_t& t : targets) t = pick(rng);
  auto load = [&](uint32_t u) { return contrib[u]; };
  // Every length around the four-chain and warp thresholds, at odd starts.
  for (uint64_t lo : {0, 3, 101}) {
    for (uint64_t len = 0; len < 300; ++len) {
      double want = 0;
      for (uint64_t k = lo; k < lo + len; ++k) want += contrib[targets[k]];
      EXPECT_NEAR(bodies::PullSum<double>(targets.data(), lo, lo + len, load),
                  want, 1e-12 * (1 + want))
          << lo << " " << len;
      double parts[kGroup];
      for (uint32_t lane = 0; lane < kGroup; ++lane) {
        parts[lane] = bodies::PullLanePart<double>(targets.data(), lo, lo + len,
                                                   lane, kGroup, load);
      }
      bodies::WarpTreeSum(parts, kGroup);
      for (uint32_t lane = 0; lane < kGroup; ++lane) {
        ASSERT_EQ(parts[lane], parts[0]) << "every lane holds the total";
      }
      EXPECT_NEAR(parts[0], want, 1e-12 * (1 + want)) << lo << " " << len;
    }
  }
}

TEST(GpuKernelBodiesTest, BottomUpTakesTheFirstParentInTheFrontier) {
  const std::vector<uint32_t> targets = {5, 9, 70, 64, 9, 130, 3};
  std::vector<uint64_t> frontier(3, 0);
  frontier[1] |= uint64_t{1} << (70 - 64);
  frontier[2] |= uint64_t{1} << (130 - 128);
  EXPECT_EQ(bodies::FirstParent(targets.data(), 0, 7, frontier.data()), 70);
  EXPECT_EQ(bodies::FirstParent(targets.data(), 3, 7, frontier.data()), 130);
  EXPECT_EQ(bodies::FirstParent(targets.data(), 3, 5, frontier.data()), -1);
  EXPECT_EQ(bodies::FirstParent(targets.data(), 0, 0, frontier.data()), -1);
  // The warp's window: lanes past the list's end never hit.
  EXPECT_TRUE(bodies::LaneHit(targets.data(), 0, 7, 2, frontier.data()));
  EXPECT_FALSE(bodies::LaneHit(targets.data(), 0, 5, 5, frontier.data()));
  EXPECT_FALSE(bodies::LaneHit(targets.data(), 0, 7, 9, frontier.data()));
}

TEST(GpuKernelBodiesTest, TopDownClaimsEachVertexOnce) {
  const std::vector<uint32_t> targets = {4, 7, 4, 200, 7, 1, 65};
  std::vector<uint64_t> visited(4, 0);
  visited[0] |= uint64_t{1} << 1;  // vertex 1 was visited before
  BitmapClaim claim{&visited};
  Pairs found;
  auto emit = [&](uint32_t v, uint32_t u) { found.emplace_back(v, u); };
  // Two "lanes" of a stride-2 warp, then one thread over the same list.
  uint64_t n =
      bodies::ExpandTopDown(targets.data(), 0, 7, 0, 2, 10, claim, emit);
  n += bodies::ExpandTopDown(targets.data(), 0, 7, 1, 2, 10, claim, emit);
  n += bodies::ExpandTopDown(targets.data(), 0, 7, 0, 1, 11, claim, emit);
  EXPECT_EQ(n, 4u);
  std::sort(found.begin(), found.end());
  EXPECT_EQ(found, (Pairs{{4, 10}, {7, 10}, {65, 10}, {200, 10}}));
}

TEST(GpuKernelBodiesTest, HomeNodesComeFromTheTableOrAreSpread) {
  const std::vector<int> sm_node = {1, 0, -1, 7, 1};
  const uint32_t size = sm_node.size();
  EXPECT_EQ(bodies::HomeNode(0, sm_node.data(), size, 2), 1);
  EXPECT_EQ(bodies::HomeNode(1, sm_node.data(), size, 2), 0);
  EXPECT_EQ(bodies::HomeNode(2, sm_node.data(), size, 2), 0);  // 2 % 2
  EXPECT_EQ(bodies::HomeNode(3, sm_node.data(), size, 2), 1);  // 7 is no node
  EXPECT_EQ(bodies::HomeNode(9, sm_node.data(), size, 2), 1);  // not in table
  EXPECT_EQ(bodies::HomeNode(0, sm_node.data(), size, 1), 0);
  EXPECT_EQ(bodies::HomeNode(5, nullptr, 0, 3), 2);
}

// ---- the NUMA schedule's plans and queues --------------------------------

// Checks that a plan of `size` indices for `nodes` nodes puts every index
// in exactly one chunk and every group in exactly one chunk's groups.
void ExpectCoverage(const ChunkPlan& plan, uint64_t size, int nodes) {
  ASSERT_EQ(plan.node_first.size(), static_cast<size_t>(nodes + 1));
  ASSERT_EQ(plan.node_first.front(), 0u);
  ASSERT_EQ(plan.node_first.back(), plan.chunks());
  ASSERT_EQ(plan.chunk_begin.front(), 0u);
  ASSERT_EQ(plan.chunk_begin.back(), size);
  for (uint32_t c = 0; c < plan.chunks(); ++c) {
    // Non-empty, consecutive chunks: every index in exactly one.
    ASSERT_LT(plan.chunk_begin[c], plan.chunk_begin[c + 1]) << c;
    if (c + 1 < plan.chunks()) {
      ASSERT_EQ(plan.chunk_begin[c + 1] % kGroup, 0u) << c;
    }
  }
  // The groups of the chunks: disjoint, all of [0, ceil(size / kGroup)).
  uint64_t next_group = 0;
  for (uint32_t c = 0; c < plan.chunks(); ++c) {
    ASSERT_EQ(bodies::FirstGroup(plan.chunk_begin.data(), c), next_group);
    next_group = bodies::EndGroup(plan.chunk_begin.data(), c);
  }
  EXPECT_EQ(next_group, (size + kGroup - 1) / kGroup);
}

TEST(GpuNumaScheduleTest, TheShareIsSplitByEdgesIntoOnePartPerNode) {
  EdgeList g = Rmat(13, 8, 3);
  AddHub(g, 17, 5000, 4);
  const ShareCsr in = BuildCsr(g, Direction::kIn, 1000, 7001);
  const uint64_t n = in.end - in.begin;
  const uint64_t total = bodies::CostBefore(in.offsets, n);
  for (int nodes : {1, 2, 3, 5}) {
    const std::vector<uint64_t> cuts = bodies::SplitByEdges(in.offsets, nodes);
    ASSERT_EQ(cuts.size(), static_cast<size_t>(nodes + 1));
    EXPECT_EQ(cuts.front(), 0u);
    EXPECT_EQ(cuts.back(), n);
    // Cut k is the first group boundary where k / nodes of the cost (edges
    // + vertices) lies before it.
    for (int k = 1; k < nodes; ++k) {
      ASSERT_LE(cuts[k - 1], cuts[k]);
      const uint64_t target = total * k / nodes;
      if (cuts[k] < n) {
        EXPECT_EQ(cuts[k] % kGroup, 0u);
        EXPECT_GE(bodies::CostBefore(in.offsets, cuts[k]), target);
      }
      if (cuts[k] > cuts[k - 1] && cuts[k] >= kGroup) {
        EXPECT_LT(
            bodies::CostBefore(in.offsets, (cuts[k] - 1) / kGroup * kGroup),
            target)
            << nodes << " nodes, cut " << k;
      }
    }
  }
  // Without a hub the parts' costs are close.
  const ShareCsr flat =
      BuildCsr(Uniform(20000, 100000, 4), Direction::kIn, 0, 20000);
  const uint64_t flat_total = bodies::CostBefore(flat.offsets, 20000);
  const std::vector<uint64_t> cuts = bodies::SplitByEdges(flat.offsets, 4);
  for (int k = 0; k < 4; ++k) {
    const double cost = bodies::CostBefore(flat.offsets, cuts[k + 1]) -
                        bodies::CostBefore(flat.offsets, cuts[k]);
    EXPECT_NEAR(cost / flat_total, 0.25, 0.01) << k;
  }
}

TEST(GpuNumaScheduleTest, ChunksOfANodeCoverItsPart) {
  EdgeList g = Uniform(5000, 40000, 5);
  AddHub(g, 4321, 3000, 6);
  const ShareCsr in = BuildCsr(g, Direction::kIn, 123, 4999);
  const uint64_t n = in.end - in.begin;
  for (int nodes : {1, 2, 4}) {
    for (uint64_t chunk_cost : {1, 500, 4000, 1000000}) {
      const std::vector<uint64_t> parts =
          bodies::SplitByEdges(in.offsets, nodes);
      const ChunkPlan plan = bodies::PlanChunks(in.offsets, parts, chunk_cost);
      ExpectCoverage(plan, n, nodes);
      for (int k = 0; k < nodes; ++k) {
        EXPECT_EQ(plan.chunk_begin[plan.node_first[k]], parts[k]);
        EXPECT_EQ(plan.chunk_begin[plan.node_first[k + 1]], parts[k + 1]);
      }
      // Each chunk is at most its cost plus a group's rounding, or a group.
      for (uint32_t c = 0; c < plan.chunks(); ++c) {
        const uint64_t a = plan.chunk_begin[c], b = plan.chunk_begin[c + 1];
        const uint64_t cost = bodies::CostBefore(in.offsets, b) -
                              bodies::CostBefore(in.offsets, a);
        if (b - a > kGroup) {
          EXPECT_LE(cost, chunk_cost + kGroup * (MaxDegree(in) + 1));
        }
      }
    }
  }
}

TEST(GpuNumaScheduleTest, AFrontiersEntriesGoToTheirVerticesNodes) {
  std::mt19937_64 rng(8);
  std::vector<uint32_t> local;
  for (uint32_t v = 0; v < 10000; ++v) {
    if (rng() % 3 == 0) local.push_back(v);
  }
  const std::vector<uint64_t> parts = {0, 2048, 2048, 7040, 10000};
  for (uint32_t entries : {1u, 32u, 100u, 4096u}) {
    const ChunkPlan plan = bodies::PlanFrontier(local, parts, entries);
    ExpectCoverage(plan, local.size(), 4);
    // An entry whose vertex is in part k is in node k's chunks, but for
    // fewer than a group at the part's start (rounded to whole groups).
    for (int k = 0; k < 4; ++k) {
      for (uint32_t c = plan.node_first[k]; c < plan.node_first[k + 1]; ++c) {
        for (uint32_t i = plan.chunk_begin[c]; i < plan.chunk_begin[c + 1];
             ++i) {
          EXPECT_GE(local[i], parts[k]) << i;
          if (local[i] >= parts[k + 1]) {
            EXPECT_LT(i - (std::lower_bound(local.begin(), local.end(),
                                            parts[k + 1]) -
                           local.begin()),
                      kGroup);
          }
        }
      }
    }
  }
  const ChunkPlan empty = bodies::PlanFrontier({}, parts, 64);
  ExpectCoverage(empty, 0, 4);
}

// A device's relaxed read of a counter may be stale; the oldest value it
// can see is 0 (the queue looks full), so every take is an atomic.
struct StaleCounters {
  uint32_t Load(uint32_t*) const { return 0; }
  uint32_t FetchAdd(uint32_t* p) const { return (*p)++; }
};

// Simulated persistent blocks on SMs of several nodes, taking chunks in a
// random interleaving: every chunk exactly once, and a block leaves its
// own node's queue only once that queue is drained.
template <typename Ops>
void DrainWithBlocks(const std::vector<int>& sm_node, uint64_t seed) {
  const int nodes = 3;
  const std::vector<uint32_t> node_first = {0, 7, 7, 20};  // node 1: none
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<uint32_t> counters(nodes, 0);
    std::vector<int> taken(20, 0);
    std::vector<int> live;
    for (uint32_t sm = 0; sm < 2 * sm_node.size(); ++sm) live.push_back(sm);
    Ops ops;
    while (!live.empty()) {
      const size_t pick = rng() % live.size();
      const uint32_t smid = live[pick] % sm_node.size();
      const int home =
          bodies::HomeNode(smid, sm_node.data(), sm_node.size(), nodes);
      const bool home_left =
          counters[home] < node_first[home + 1] - node_first[home];
      const int64_t c = bodies::TakeChunk(home, nodes, node_first.data(),
                                          counters.data(), ops);
      if (c < 0) {
        live.erase(live.begin() + pick);
        continue;
      }
      ASSERT_LT(c, 20);
      ++taken[c];
      const bool own = c >= node_first[home] && c < node_first[home + 1];
      EXPECT_TRUE(own || !home_left)
          << "block on node " << home << " took chunk " << c;
    }
    for (int c = 0; c < 20; ++c) EXPECT_EQ(taken[c], 1) << c;
  }
}

TEST(GpuNumaScheduleTest, BlocksOnAllNodesDrainEveryQueueOnce) {
  DrainWithBlocks<HostCounters>({0, 1, 2, 2, -1, 0, 2, 1, 0}, 9);
}

// Blocks leave their node's queue for the others' once it is drained:
// blocks of one node alone drain them all.
TEST(GpuNumaScheduleTest, BlocksOfOneNodeDrainTheOthersToo) {
  DrainWithBlocks<HostCounters>({1, 1, 1}, 11);
  DrainWithBlocks<HostCounters>({0}, 12);
}

TEST(GpuNumaScheduleTest, StaleCounterReadsStillGiveEachChunkOnce) {
  DrainWithBlocks<StaleCounters>({0, 1, 2, 2, -1, 0, 2, 1, 0}, 10);
}

// The same with threads and atomic counters, as on the device.
TEST(GpuNumaScheduleTest, ConcurrentTakersGetEachChunkOnce) {
  const std::vector<uint32_t> node_first = {0, 5000, 5001, 12000};
  std::vector<uint32_t> counters(3, 0);
  std::vector<std::atomic<int>> taken(12000);
  struct AtomicOps {
    uint32_t Load(uint32_t* p) const {
      return std::atomic_ref<uint32_t>(*p).load(std::memory_order_relaxed);
    }
    uint32_t FetchAdd(uint32_t* p) const {
      return std::atomic_ref<uint32_t>(*p).fetch_add(1);
    }
  };
  std::vector<std::thread> blocks;
  for (int b = 0; b < 8; ++b) {
    blocks.emplace_back([&, b] {
      AtomicOps ops;
      for (;;) {
        const int64_t c = bodies::TakeChunk(b % 3, 3, node_first.data(),
                                            counters.data(), ops);
        if (c < 0) return;
        if (c < 12000) taken[c].fetch_add(1);
      }
    });
  }
  for (std::thread& t : blocks) t.join();
  for (size_t c = 0; c < taken.size(); ++c) ASSERT_EQ(taken[c].load(), 1) << c;
}

// ---- the BFS driver both HostShare and the device run under ----------

struct Share {
  uint64_t begin = 0, end = 0;
  std::unique_ptr<ShareKernels> kernels;
};

enum class Steps { kTopDown, kBottomUp, kSwitching };

// A BFS over shares that together cover [0, n): each level asks every
// share for one step and merges the answers (a vertex two shares
// discover goes to the first). parent[source] == source; -1 unreached.
// Checks each share's own promises on the way (a discovered vertex once,
// not visited before; a woken vertex was unvisited).
std::vector<int64_t> RunBfs(std::vector<Share>& shares, uint64_t n,
                            uint32_t source, Steps steps,
                            std::vector<int32_t>* depth) {
  std::vector<int64_t> parent(n, -1);
  depth->assign(n, -1);
  parent[source] = source;
  (*depth)[source] = 0;
  std::vector<uint32_t> frontier = {source};
  for (int32_t level = 0; !frontier.empty(); ++level) {
    const bool bottom_up =
        steps == Steps::kBottomUp ||
        (steps == Steps::kSwitching && frontier.size() * 20 > n);
    std::vector<uint64_t> bits((n + 63) / 64, 0);
    for (uint32_t v : frontier) bits[v >> 6] |= uint64_t{1} << (v & 63);
    std::vector<uint64_t> visited((n + 63) / 64, 0);
    for (uint64_t v = 0; v < n; ++v) {
      if ((*depth)[v] >= 0) visited[v >> 6] |= uint64_t{1} << (v & 63);
    }
    std::vector<uint32_t> next;
    for (Share& s : shares) {
      if (bottom_up) {
        std::vector<int64_t> ps(parent.begin() + s.begin,
                                parent.begin() + s.end);
        uint64_t awakened = 0;
        EXPECT_TRUE(s.kernels->BfsBottomUp(bits, ps, &awakened).ok());
        uint64_t woken = 0;
        for (uint64_t v = s.begin; v < s.end; ++v) {
          if (ps[v - s.begin] == parent[v]) continue;
          EXPECT_EQ(parent[v], -1) << "a visited vertex changed: " << v;
          parent[v] = ps[v - s.begin];
          (*depth)[v] = level + 1;
          next.push_back(v);
          ++woken;
        }
        EXPECT_EQ(awakened, woken);
      } else {
        auto first = std::lower_bound(frontier.begin(), frontier.end(),
                                      static_cast<uint32_t>(s.begin));
        auto last = std::lower_bound(
            frontier.begin(), frontier.end(),
            static_cast<uint32_t>(std::min<uint64_t>(s.end, UINT32_MAX)));
        Pairs found;
        EXPECT_TRUE(
            s.kernels->BfsTopDown(std::span(first, last), visited, &found)
                .ok());
        std::vector<bool> seen(n, false);
        for (const auto& [v, u] : found) {
          EXPECT_FALSE(seen[v]) << "discovered twice by one share: " << v;
          EXPECT_FALSE((visited[v >> 6] >> (v & 63)) & 1)
              << "was visited: " << v;
          seen[v] = true;
          if ((*depth)[v] >= 0) continue;  // another share's first
          parent[v] = u;
          (*depth)[v] = level + 1;
          next.push_back(v);
        }
      }
    }
    std::sort(next.begin(), next.end());
    frontier = std::move(next);
  }
  return parent;
}

// Same depths as the queue BFS; every parent one level up, with an edge.
void ExpectValidBfs(const ShareCsr& out, uint32_t source,
                    const std::vector<int64_t>& parent,
                    const std::vector<int32_t>& depth) {
  const std::vector<int32_t> want = QueueBfs(out, source);
  ASSERT_EQ(depth, want);
  EXPECT_EQ(parent[source], source);
  uint64_t reached = 0;
  for (uint64_t v = 0; v < out.end; ++v) {
    if (depth[v] <= 0) continue;
    ++reached;
    const int64_t u = parent[v];
    ASSERT_GE(u, 0) << v;
    EXPECT_EQ(depth[u], depth[v] - 1) << v;
    auto list_begin = out.targets.begin() + out.offsets[u];
    auto list_end = out.targets.begin() + out.offsets[u + 1];
    EXPECT_NE(std::find(list_begin, list_end, v), list_end)
        << "no edge " << u << " -> " << v;
  }
  EXPECT_GT(reached, out.end / 4) << "the test graph should reach far";
}

// The graphs the kernels are checked on: skewed with a hub (warp lists,
// many windows), uniform (short lists only).
struct TestGraph {
  std::string name;
  EdgeList edges;
};
std::vector<TestGraph> Graphs() {
  EdgeList kron = Rmat(13, 8, 11);
  AddHub(kron, 5, 4000, 12);
  return {{"kron13", std::move(kron)}, {"uniform", Uniform(6000, 30000, 13)}};
}

// The cuts of shares over [0, n): one share, and three uneven ones.
std::vector<std::vector<uint64_t>> ShareCuts(uint64_t n) {
  return {{0, n}, {0, 1000, n / 2 + 7, n}};
}

KernelOptions Options(Schedule schedule) {
  KernelOptions o;
  o.schedule = schedule;
  // Small halves (64 KiB, the least): the targets take several pieces.
  o.staging_bytes = 128 << 10;
  if (schedule == Schedule::kNuma) {
    // As a probe might say: SM ids alternating between two nodes, some
    // SMs unnamed.
    o.nodes = 2;
    for (int sm = 0; sm < 40; ++sm)
      o.sm_node.push_back(sm % 7 == 3 ? -1 : sm % 2);
  }
  return o;
}

using ShareFactory =
    std::function<absl::StatusOr<std::unique_ptr<ShareKernels>>(
        uint64_t n, uint64_t begin, uint64_t end, const KernelOptions&)>;

// Opens and loads the shares of `cuts` (both directions).
std::vector<Share> OpenShares(const EdgeList& g,
                              const std::vector<uint64_t>& cuts,
                              const KernelOptions& options,
                              const ShareFactory& open) {
  std::vector<Share> shares;
  for (size_t k = 0; k + 1 < cuts.size(); ++k) {
    Share s{cuts[k], cuts[k + 1], nullptr};
    auto kernels = open(g.n, s.begin, s.end, options);
    EXPECT_TRUE(kernels.ok()) << kernels.status();
    if (!kernels.ok()) return {};
    s.kernels = *std::move(kernels);
    for (Direction d : {Direction::kIn, Direction::kOut}) {
      const absl::Status st =
          s.kernels->Upload(d, BuildCsr(g, d, s.begin, s.end));
      EXPECT_TRUE(st.ok()) << st;
    }
    shares.push_back(std::move(s));
  }
  return shares;
}

// PageRank's pull sums (float and double) and BFS (three step choices
// from two sources) on every test graph and share cut, for a schedule.
void CheckKernels(Schedule schedule, const ShareFactory& open) {
  for (const TestGraph& tg : Graphs()) {
    const EdgeList& g = tg.edges;
    const ShareCsr out = BuildCsr(g, Direction::kOut, 0, g.n);
    const ShareCsr in = BuildCsr(g, Direction::kIn, 0, g.n);
    const std::vector<float> cf = Contributions<float>(out, 21);
    const std::vector<double> cd = Contributions<double>(out, 22);
    const std::vector<double> want_f = PullReference<float>(in, cf);
    const std::vector<double> want_d = PullReference<double>(in, cd);
    for (const std::vector<uint64_t>& cuts : ShareCuts(g.n)) {
      SCOPED_TRACE(absl::StrCat(tg.name, ", ", cuts.size() - 1, " shares"));
      std::vector<Share> shares = OpenShares(g, cuts, Options(schedule), open);
      ASSERT_EQ(shares.size(), cuts.size() - 1);
      std::vector<float> sf(g.n, -1);
      std::vector<double> sd(g.n, -1);
      for (Share& s : shares) {
        const uint64_t len = s.end - s.begin;
        ASSERT_TRUE(
            s.kernels->PageRankPull(cf, {sf.data() + s.begin, len}).ok());
        ASSERT_TRUE(
            s.kernels->PageRankPull(cd, {sd.data() + s.begin, len}).ok());
      }
      EXPECT_LE(RelativeL1<float>(sf, want_f), 1e-6);
      EXPECT_LE(RelativeL1<double>(sd, want_d), 1e-12);
      for (Steps steps :
           {Steps::kTopDown, Steps::kBottomUp, Steps::kSwitching}) {
        for (uint32_t source : {5u, static_cast<uint32_t>(g.n / 2 + 1)}) {
          SCOPED_TRACE(absl::StrCat("steps ", static_cast<int>(steps),
                                    ", source ", source));
          std::vector<int32_t> depth;
          const std::vector<int64_t> parent =
              RunBfs(shares, g.n, source, steps, &depth);
          ExpectValidBfs(out, source, parent, depth);
        }
      }
    }
  }
}

ShareFactory HostFactory() {
  return [](uint64_t n, uint64_t begin, uint64_t end, const KernelOptions& o)
             -> absl::StatusOr<std::unique_ptr<ShareKernels>> {
    return std::make_unique<HostShare>(n, begin, end, o, begin * 31 + 1);
  };
}

TEST(GpuKernelsHostTest, PlainScheduleMatchesTheReferences) {
  CheckKernels(Schedule::kPlain, HostFactory());
}

TEST(GpuKernelsHostTest, NumaScheduleMatchesTheReferences) {
  CheckKernels(Schedule::kNuma, HostFactory());
}

// Each vertex's sum depends on its list alone, not on who took its group:
// both schedules give the same bits.
TEST(GpuKernelsHostTest, TheSchedulesGiveTheSameSums) {
  const EdgeList g = Graphs()[0].edges;
  const ShareCsr out = BuildCsr(g, Direction::kOut, 0, g.n);
  const std::vector<float> cf = Contributions<float>(out, 31);
  std::vector<float> sums[2];
  for (Schedule schedule : {Schedule::kPlain, Schedule::kNuma}) {
    std::vector<Share> shares =
        OpenShares(g, {0, g.n}, Options(schedule), HostFactory());
    ASSERT_EQ(shares.size(), 1u);
    std::vector<float>& s = sums[static_cast<int>(schedule)];
    s.assign(g.n, 0);
    ASSERT_TRUE(shares[0].kernels->PageRankPull(cf, s).ok());
  }
  EXPECT_EQ(sums[0], sums[1]);
}

TEST(GpuKernelsHostTest, AnotherSharesCsrIsRefused) {
  const EdgeList g = Uniform(100, 300, 2);
  HostShare share(100, 10, 60, KernelOptions{}, 1);
  EXPECT_EQ(share.begin(), 10u);
  EXPECT_EQ(share.end(), 60u);
  EXPECT_EQ(
      share.Upload(Direction::kIn, BuildCsr(g, Direction::kIn, 0, 50)).code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(
      share.Upload(Direction::kIn, BuildCsr(g, Direction::kIn, 10, 60)).ok());
}

// ---- the device --------------------------------------------------------

ShareFactory DeviceFactory() { return ShareKernels::Open; }

TEST(GpuKernelsTest, WithoutAUsableGpuOpenIsAFailedPrecondition) {
  std::string why;
  if (!ListDevices(&why).empty()) GTEST_SKIP() << "a GPU is here";
  const auto kernels = ShareKernels::Open(1000, 0, 1000, KernelOptions{});
  ASSERT_FALSE(kernels.ok());
  EXPECT_EQ(kernels.status().code(), absl::StatusCode::kFailedPrecondition)
      << kernels.status();
  if (!BuiltWithCuda()) {
    EXPECT_EQ(kernels.status().message(), "this dmg was built without CUDA");
  }
}

TEST(GpuKernelsTest, PlainScheduleOnTheDevice) {
  std::string why;
  if (ListDevices(&why).empty()) GTEST_SKIP() << "no GPU: " << why;
  CheckKernels(Schedule::kPlain, DeviceFactory());
}

TEST(GpuKernelsTest, NumaScheduleOnTheDevice) {
  std::string why;
  if (ListDevices(&why).empty()) GTEST_SKIP() << "no GPU: " << why;
  CheckKernels(Schedule::kNuma, DeviceFactory());
}

// The device adds in the bodies' order (a lane's four chains, the warp's
// lanes and butterfly), so its sums are the host emulation's bit for bit:
// a check that the device ran the same logic, not merely close numbers.
TEST(GpuKernelsTest, TheDevicesSumsAreTheBodiesBitForBit) {
  std::string why;
  if (ListDevices(&why).empty()) GTEST_SKIP() << "no GPU: " << why;
  const EdgeList g = Graphs()[0].edges;
  const ShareCsr out = BuildCsr(g, Direction::kOut, 0, g.n);
  const std::vector<float> cf = Contributions<float>(out, 41);
  const std::vector<double> cd = Contributions<double>(out, 42);
  for (Schedule schedule : {Schedule::kPlain, Schedule::kNuma}) {
    const std::vector<uint64_t> cuts = {0, 777, g.n};
    std::vector<Share> host =
        OpenShares(g, cuts, Options(schedule), HostFactory());
    std::vector<Share> device =
        OpenShares(g, cuts, Options(schedule), DeviceFactory());
    ASSERT_EQ(device.size(), 2u);
    for (size_t k = 0; k < 2; ++k) {
      const uint64_t len = cuts[k + 1] - cuts[k];
      std::vector<float> hf(len), df(len);
      std::vector<double> hd(len), dd(len);
      ASSERT_TRUE(host[k].kernels->PageRankPull(cf, hf).ok());
      ASSERT_TRUE(device[k].kernels->PageRankPull(cf, df).ok());
      ASSERT_TRUE(host[k].kernels->PageRankPull(cd, hd).ok());
      ASSERT_TRUE(device[k].kernels->PageRankPull(cd, dd).ok());
      EXPECT_EQ(df, hf) << "share " << k;
      EXPECT_EQ(dd, hd) << "share " << k;
    }
  }
}

TEST(GpuKernelsTest, BadArgumentsAreRefusedOnTheDevice) {
  std::string why;
  if (ListDevices(&why).empty()) GTEST_SKIP() << "no GPU: " << why;
  EXPECT_EQ(ShareKernels::Open(100, 50, 40, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ShareKernels::Open(100, 0, 101, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto kernels = ShareKernels::Open(100, 0, 100, {});
  ASSERT_TRUE(kernels.ok()) << kernels.status();
  std::vector<float> contrib(100), sums(100);
  // Nothing uploaded yet.
  EXPECT_EQ((*kernels)->PageRankPull(contrib, sums).code(),
            absl::StatusCode::kFailedPrecondition);
  // A fill that fails fails the upload with its status.
  std::vector<uint64_t> offsets(101);
  for (uint64_t i = 0; i <= 100; ++i) offsets[i] = 3 * i;
  CsrChunks broken;
  broken.offsets = offsets;
  broken.fill = [](uint64_t, std::span<uint32_t>) {
    return absl::UnavailableError("memory node gone");
  };
  EXPECT_EQ((*kernels)->Upload(Direction::kIn, broken).code(),
            absl::StatusCode::kUnavailable);
  // Sizes that do not fit the share.
  const EdgeList g = Uniform(100, 300, 1);
  ASSERT_TRUE((*kernels)
                  ->Upload(Direction::kIn, BuildCsr(g, Direction::kIn, 0, 100))
                  .ok());
  std::vector<float> short_sums(99);
  EXPECT_EQ((*kernels)->PageRankPull(contrib, short_sums).code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE((*kernels)->PageRankPull(contrib, sums).ok());
  const KernelTimes t = (*kernels)->times();
  EXPECT_GT(t.bytes_to_device, 0u);
  EXPECT_GT(t.bytes_from_device, 0u);
  EXPECT_GT(t.launches, 0u);
}

}  // namespace
}  // namespace dmg::gpu

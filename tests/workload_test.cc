// The workload manager's stage 1 (vertex ranges by edges and vertices) and
// stage 2's work items and the update coordinator's choice, on their own.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <numeric>
#include <thread>

#include "coordinator/update_coordinator.h"
#include "gtest/gtest.h"
#include "workload/partition.h"
#include "workload/steal_policy.h"
#include "workload/work_items.h"

namespace dmg {
namespace {

TEST(PartitionTest, RangesAreGrainAlignedAndCoverEverything) {
  const std::vector<uint64_t> edges(10, 100);  // 10 chunks of 8 vertices
  for (int parts = 1; parts <= 12; ++parts) {
    std::vector<uint64_t> b = workload::SplitRanges(edges, 77, 8, parts);
    ASSERT_EQ(b.size(), static_cast<size_t>(parts) + 1);
    EXPECT_EQ(b.front(), 0u);
    EXPECT_EQ(b.back(), 77u);
    for (size_t k = 1; k < b.size(); ++k) {
      EXPECT_LE(b[k - 1], b[k]);
      if (k + 1 < b.size()) {
        EXPECT_EQ(b[k] % 8, 0u);
      }
    }
  }
}

TEST(PartitionTest, EdgesAndVerticesBalance) {
  // One heavy chunk (a hub) then many light ones: the hub's node gets few
  // vertices, the others many.
  std::vector<uint64_t> edges(100, 10);
  edges[0] = 1000;
  std::vector<uint64_t> b = workload::SplitRanges(edges, 100 * 64, 64, 2, 1.0);
  const double total = 1000 + 99 * 10 + 100 * 64.0;
  double first = 0;
  for (uint64_t c = 0; c < b[1] / 64; ++c) first += edges[c] + 64;
  EXPECT_NEAR(first / total, 0.5, 0.02) << b[1];
  // Without the vertex term the split follows the edges alone.
  std::vector<uint64_t> e = workload::SplitRanges(edges, 100 * 64, 64, 2, 0);
  EXPECT_LT(e[1], b[1]);
}

TEST(PartitionTest, EdgesPerChunkSpreadsBlocksOverTheirVertices) {
  // Two blocks: vertices 0..9 (30 edges), 10..29 (20 edges); chunks of 16.
  std::vector<store::DirectoryEntry> dir(2);
  dir[0].first_vertex = 0;
  dir[0].vertex_count = 10;
  dir[0].first_edge = 0;
  dir[1].first_vertex = 10;
  dir[1].vertex_count = 20;
  dir[1].first_edge = 30;
  std::vector<uint64_t> edges;
  workload::AddEdgesPerChunk(dir, 30, 50, 16, edges);
  ASSERT_EQ(edges.size(), 2u);
  EXPECT_EQ(edges[0], 30u + 20u * 6 / 20);
  EXPECT_EQ(edges[1], 20u * 14 / 20);
}

coordinator::PushStep Step(uint64_t frontier_edges, bool combines = true) {
  coordinator::PushStep s;
  s.vertices = 1 << 20;
  s.frontier_edges = frontier_edges;
  s.compute_nodes = 4;
  s.threads = 2;
  s.value_bytes = 4;
  s.combines = combines;
  s.state_pages = (1 << 20) * 4 / 4096;
  return s;
}

TEST(StealPolicyTest, StealsOnlyWhenOneOwnerKeepsTheOthersWaitingLong) {
  // A skewed step: node 0 holds nearly all of it.
  const std::vector<double> skewed = {800000, 16000};
  EXPECT_TRUE(workload::DecideSteal(skewed).steal);
  // Balanced within the fraction: nothing to gain.
  const std::vector<double> balanced = {1100000, 1000000};
  EXPECT_FALSE(workload::DecideSteal(balanced).steal);
  // Lopsided but tiny (a road network's wavefront): the wait it could save
  // is less than what stealing costs.
  const std::vector<double> tiny = {20000, 100};
  EXPECT_FALSE(workload::DecideSteal(tiny).steal);
  const workload::StealDecision d = workload::DecideSteal(skewed);
  EXPECT_DOUBLE_EQ(d.max_work, 800000);
  EXPECT_DOUBLE_EQ(d.mean_work, 408000);
  // One owner: nobody to steal from.
  const std::vector<double> one = {1e9};
  EXPECT_FALSE(workload::DecideSteal(one).steal);
  // The rule's knobs are honoured.
  workload::StealRule eager;
  eager.min_excess_work = 0;
  eager.min_excess_fraction = 0;
  EXPECT_TRUE(workload::DecideSteal(tiny, eager).steal);
}

coordinator::DirectionStep DirectionAt(uint64_t frontier, uint64_t edges) {
  coordinator::DirectionStep d;
  d.vertices = 1 << 20;
  d.arcs = 32 << 20;
  d.frontier = frontier;
  d.frontier_edges = edges;
  d.pull_block_bytes = 4 * d.arcs + 4 * d.vertices;
  d.edge_bytes = 4;
  d.value_bytes = 8;
  return d;
}

// The fewest frontier edges at which a pull is the cheaper (frontier
// vertices at the graph's average degree).
uint64_t PullFrom(coordinator::DirectionStep d,
                  const coordinator::TransportCost& cost,
                  const coordinator::CostConstants& k = {}) {
  for (uint64_t e = 0; e <= d.arcs; e += d.arcs / 1024) {
    d.frontier_edges = e;
    d.frontier = e / 32;
    if (coordinator::ChooseDirection(d, cost, k).pull) return e;
  }
  return ~uint64_t{0};
}

TEST(DirectionTest, PullsOnlyForLargeFrontiersAndSoonerWhenItIsCheap) {
  coordinator::TransportCost local{0.1, 10000};
  coordinator::TransportCost tcp{40, 1000};
  // A frontier of everything pulls; a tiny one pushes.
  EXPECT_TRUE(
      coordinator::ChooseDirection(DirectionAt(1 << 20, 32 << 20), local).pull);
  EXPECT_FALSE(coordinator::ChooseDirection(DirectionAt(10, 320), local).pull);
  const coordinator::DirectionStep one = DirectionAt(0, 0);
  const uint64_t base = PullFrom(one, local);
  // On one node with cached blocks CPU decides: a pull visits every vertex
  // and arc, a push the frontier's, each ~9x dearer (the fitted
  // constants): about a tenth of the arcs (Ligra's rule says a twentieth).
  coordinator::DirectionStep cpu = one;
  cpu.pull_cached = cpu.push_cached = true;
  const coordinator::CostConstants k;
  const double even = static_cast<double>(one.arcs + one.vertices) *
                      k.pull_ns_per_visit /
                      (k.push_ns_per_visit - k.pull_hit_ns);
  EXPECT_GT(static_cast<double>(PullFrom(cpu, local)), 0.8 * even);
  EXPECT_LT(static_cast<double>(PullFrom(cpu, local)), 1.5 * even);
  // Blocks to READ (and parse) push it up.
  EXPECT_GT(base, PullFrom(cpu, local));
  // Blocks the pull must READ over a slow link push the crossover up...
  EXPECT_GT(PullFrom(one, tcp), base);
  // ...and blocks already cached bring it down.
  coordinator::DirectionStep cached = one;
  cached.pull_cached = true;
  EXPECT_LE(PullFrom(cached, tcp), PullFrom(one, tcp));
  // With several nodes a push also pays the updates' exchange.
  coordinator::DirectionStep nodes = one;
  nodes.compute_nodes = 2;
  EXPECT_LT(PullFrom(nodes, local), base);
  // Every estimate is reported.
  const coordinator::DirectionEstimate e =
      coordinator::ChooseDirection(DirectionAt(1000, 32000), tcp);
  EXPECT_GT(e.push_us, 0);
  EXPECT_GT(e.pull_us, e.push_us);
  EXPECT_DOUBLE_EQ(e.push_bytes, 32000 * 4);
  EXPECT_DOUBLE_EQ(e.pull_bytes, 4.0 * (32 << 20) + 4.0 * (1 << 20));
}

// The refresh choice before a push that reads its targets: a level of a
// road network's BFS on 2 nodes (few arcs cross the cut) reads its lines
// on demand where a round trip is cheap, in bulk where it is not; a
// random graph's step, whose arcs reach other nodes' vertices half the
// time, reads in bulk.
TEST(RefreshTest, DemandWhereFewArcsLeaveTheRangeAndRoundTripsAreCheap) {
  const coordinator::TransportCost local{0.06, 50000};
  const coordinator::TransportCost rdma{3, 10000};
  coordinator::RefreshStep road;
  road.pending_lines = 3800;  // the other node's claims so far
  road.frontier_edges = 1700;
  road.remote_share = 0.002;
  coordinator::RefreshEstimate e = coordinator::ChooseRefresh(road, local);
  EXPECT_TRUE(e.demand);
  EXPECT_NEAR(e.touches, 3.4, 1e-9);
  EXPECT_DOUBLE_EQ(e.bulk_bytes, 3800.0 * 64);
  EXPECT_NEAR(e.demand_bytes, 3.4 * 64, 1e-9);
  EXPECT_TRUE(coordinator::ChooseRefresh(road, rdma).demand);
  // The same step reaching other nodes 5% of the time: bulk on rdma.
  road.remote_share = 0.05;
  EXPECT_FALSE(coordinator::ChooseRefresh(road, rdma).demand);
  // Half the arcs elsewhere, a big frontier: bulk everywhere, and never
  // more touches than pending lines.
  coordinator::RefreshStep random;
  random.pending_lines = 1000;
  random.frontier_edges = 1 << 20;
  random.remote_share = 0.5;
  e = coordinator::ChooseRefresh(random, local);
  EXPECT_FALSE(e.demand);
  EXPECT_DOUBLE_EQ(e.touches, 1000);
  // More workers overlap more demand round trips.
  coordinator::RefreshStep few = road;
  few.remote_share = 0.02;
  few.threads = 1;
  const double one = coordinator::ChooseRefresh(few, rdma).demand_us;
  few.threads = 4;
  EXPECT_NEAR(coordinator::ChooseRefresh(few, rdma).demand_us, one / 4, 1e-9);
}

// First-wins updates may read nothing (stale): a pending remote target is
// taken as unset and its owner refuses it if claimed. Where round trips
// cost (tcp, rdma) a road network's few touches go as updates, an update
// of 8 bytes each way against a round trip or the whole batch; never
// without stale_ok; and a random graph's half a million remote arcs cost
// more as updates that may be refused than the batch of its 1,000 lines.
TEST(RefreshTest, StaleTargetsWhereTouchesAreFewAndRoundTripsDear) {
  const coordinator::TransportCost tcp{40, 800};
  coordinator::RefreshStep road;
  road.pending_lines = 3800;
  road.frontier_edges = 1700;
  road.remote_share = 0.002;
  EXPECT_FALSE(coordinator::ChooseRefresh(road, tcp).stale);
  road.stale_ok = true;
  road.update_bytes = 8;
  coordinator::RefreshEstimate e = coordinator::ChooseRefresh(road, tcp);
  EXPECT_TRUE(e.stale);
  EXPECT_NEAR(e.stale_us, 3.4 * 16 / 800, 1e-9);
  EXPECT_LT(e.stale_us, std::min(e.bulk_us, e.demand_us));
  coordinator::RefreshStep random;
  random.pending_lines = 1000;
  random.frontier_edges = 1 << 20;
  random.remote_share = 0.5;
  random.stale_ok = true;
  random.update_bytes = 8;
  e = coordinator::ChooseRefresh(random, tcp);
  EXPECT_FALSE(e.stale);
  EXPECT_FALSE(e.demand);
}

TEST(RefreshTest, DemandReadsCostAtMostWhatTheBatchCosts) {
  // 1 us a round trip, 100 bytes a microsecond: the batch of 1000 lines
  // costs 1 + 640 us, a line alone 1.64 us: 390 lines before the batch.
  const coordinator::TransportCost cost{1, 100};
  EXPECT_EQ(coordinator::DemandBudget(1000, 64, cost), 390u);
  // Nothing pending, nothing to read; three lines: one alone, then the
  // batch of the other two.
  EXPECT_EQ(coordinator::DemandBudget(0, 64, cost), 0u);
  EXPECT_EQ(coordinator::DemandBudget(3, 64, cost), 1u);
  // Round trips dearer than the bytes (tcp): the batch soon.
  EXPECT_EQ(coordinator::DemandBudget(1000, 64, {40, 1000}), 2u);
  // One pending line: that line alone, whatever the transport.
  EXPECT_EQ(coordinator::DemandBudget(1, 64, {40, 1000}), 1u);
  EXPECT_EQ(coordinator::DemandBudget(1, 64, {0.01, 1e6}), 1u);
}

// With several nodes a push pays for the updates that leave its range as
// measured on the last pushes, not as if arcs spread as the ranges do: a
// road network's 4 ranges keep ~1% of the arcs across, so its pushes stay
// pushes where (N-1)/N had made them pull; the update exchange's second
// round counts only as likely as some node sending an update.
TEST(DirectionTest, APushPaysForTheMeasuredShareOfItsArcsThatLeave) {
  const coordinator::TransportCost local{0.1, 10000};
  coordinator::DirectionStep road = DirectionAt(0, 0);
  road.compute_nodes = 4;
  road.pull_cached = road.push_cached = true;
  const uint64_t spread = PullFrom(road, local);  // not measured: 3/4
  road.remote_share = 0.01;
  road.sent_per_remote = 1;
  const uint64_t measured = PullFrom(road, local);
  EXPECT_GT(measured, spread);
  // Nothing leaves: nothing to send, and no second round.
  coordinator::DirectionStep none = DirectionAt(1000, 32000);
  none.compute_nodes = 4;
  none.pull_cached = none.push_cached = true;
  none.remote_share = 0;
  coordinator::DirectionStep one = none;
  one.compute_nodes = 1;
  one.remote_share = -1;
  const coordinator::DirectionEstimate e0 =
      coordinator::ChooseDirection(none, local);
  EXPECT_DOUBLE_EQ(e0.push_bytes, 0);
  EXPECT_NEAR(e0.push_us, coordinator::ChooseDirection(one, local).push_us / 4,
              1e-9);
  // Every arc leaves and is sent: the unmeasured estimate's (N-1)/N is
  // lower than that.
  coordinator::DirectionStep all = none;
  all.remote_share = 1;
  all.sent_per_remote = 1;
  coordinator::DirectionStep unmeasured = none;
  unmeasured.remote_share = -1;
  EXPECT_GT(coordinator::ChooseDirection(all, local).push_bytes,
            coordinator::ChooseDirection(unmeasured, local).push_bytes);
  // A share the candidate test and combining cut (a tenth sent).
  coordinator::DirectionStep few = all;
  few.sent_per_remote = 0.1;
  EXPECT_NEAR(coordinator::ChooseDirection(few, local).push_bytes,
              2 * 0.1 * 32000 / 4 * 12.0, 1e-6);
}

TEST(DirectionTest, APushThatKeepsBlocksPaysForTheBlocksItTouches) {
  coordinator::TransportCost tcp{40, 1000};
  coordinator::DirectionStep d = DirectionAt(1000, 32000);
  d.push_blocks = 8192;
  d.push_block_bytes = uint64_t{8192} << 14;
  d.push_keeps_blocks = true;
  // 1000 vertices over 8192 blocks touch ~940 of them: whole blocks, not
  // 32000 arcs' worth of edge ranges.
  const double touched = 8192 * (1 - std::exp(-1000.0 / 8192));
  EXPECT_NEAR(coordinator::ChooseDirection(d, tcp).push_bytes,
              touched * (1 << 14), 1);
  // A frontier of everything touches every block once.
  d.frontier = 1 << 20;
  EXPECT_NEAR(coordinator::ChooseDirection(d, tcp).push_bytes,
              8192.0 * (1 << 14), 8192.0 * (1 << 14) * 1e-6);
  // Nothing to read when the cache holds the direction already.
  d.push_cached = true;
  EXPECT_EQ(coordinator::ChooseDirection(d, tcp).push_bytes, 0);
}

TEST(UpdateCoordinatorTest, ManyUpdatesGoInBatches) {
  const coordinator::TransportCost tcp{50, 1000};
  // Atomic pays a barrier and a line read back per touched line: with the
  // engine's constants it loses even for a handful of updates (the sweep
  // in docs/performance-history.md agrees), and more updates only widen the
  // gap.
  const coordinator::UpdateEstimate few =
      coordinator::ChooseUpdates(Step(10), tcp);
  EXPECT_GT(few.atomic_us, few.batch_us);
  EXPECT_FALSE(coordinator::ChooseUpdates(Step(10'000'000), tcp).atomic);
  // Where the choice flips, more updates never flip it back.
  bool was_atomic = true;
  for (uint64_t e = 1; e < (uint64_t{1} << 28); e *= 2) {
    const bool atomic = coordinator::ChooseUpdates(Step(e), tcp).atomic;
    EXPECT_TRUE(was_atomic || !atomic) << e;
    was_atomic = atomic;
  }
}

TEST(UpdateCoordinatorTest, CombiningIsCounted) {
  const coordinator::TransportCost rdma{3, 10000};
  // Many updates onto few vertices combine to at most one entry each.
  coordinator::PushStep s = Step(50'000'000);
  coordinator::UpdateEstimate e = coordinator::ChooseUpdates(s, rdma);
  EXPECT_LE(e.batch_entries, s.vertices * 3.0 / 4 + 1);
  s.combines = false;  // then every update is an entry
  EXPECT_GE(coordinator::ChooseUpdates(s, rdma).batch_entries,
            e.remote_updates - 1);
}

TEST(UpdateCoordinatorTest, SlowRoundTripsFavourBatches) {
  // The same step: a fast fabric affords the atomics' round trips, a slow
  // one does not.
  const coordinator::PushStep s = Step(200'000);
  EXPECT_GT(coordinator::ChooseUpdates(s, {1000, 1000}).atomic_us,
            coordinator::ChooseUpdates(s, {2, 1000}).atomic_us);
}

TEST(UpdateCoordinatorTest, ConstantsParseAndPrintBack) {
  absl::StatusOr<coordinator::CostConstants> k =
      coordinator::ParseCostConstants(" pull_ns=4.5, exchange_us=30");
  ASSERT_TRUE(k.ok()) << k.status();
  const coordinator::CostConstants base;
  EXPECT_EQ(k->pull_ns_per_visit, 4.5);
  EXPECT_EQ(k->exchange_us, 30);
  EXPECT_EQ(k->push_ns_per_visit, base.push_ns_per_visit);  // as the base
  absl::StatusOr<coordinator::CostConstants> back =
      coordinator::ParseCostConstants(coordinator::FormatCostConstants(*k));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(coordinator::FormatCostConstants(*back),
            coordinator::FormatCostConstants(*k));
  EXPECT_TRUE(coordinator::ParseCostConstants("").ok());  // all built in
  for (const char* bad : {"pull_ns", "pull_ns=", "pull_ns=-1", "pull_ns=nan",
                          "pull_ns=inf", "pul_ns=3", "pull_ns=1=2"}) {
    absl::StatusOr<coordinator::CostConstants> r =
        coordinator::ParseCostConstants(bad);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(UpdateCoordinatorTest, TheConstantsMoveTheChoices) {
  const coordinator::TransportCost local{0.1, 40000};
  coordinator::CostConstants cheap_pull, dear_pull;
  cheap_pull.pull_ns_per_visit = 1;
  dear_pull.pull_ns_per_visit = 100;
  coordinator::DirectionStep d = DirectionAt(1 << 20, 8 << 20);
  d.compute_nodes = 2;
  d.frontier = 50'000;
  d.frontier_edges = 4'000'000;
  d.pull_cached = true;
  EXPECT_TRUE(coordinator::ChooseDirection(d, local, cheap_pull).pull);
  EXPECT_FALSE(coordinator::ChooseDirection(d, local, dear_pull).pull);
  // Compare-and-swaps that cost nothing beat an outbox for a few updates
  // when exchanges are dear; each one's CPU tips it back.
  coordinator::CostConstants free_atomics, dear_atomics;
  free_atomics.remote_update_ns = 50;
  dear_atomics.remote_update_ns = 50;
  dear_atomics.atomic_ns = 5000;
  const coordinator::PushStep s = Step(2000);
  EXPECT_LT(coordinator::ChooseUpdates(s, local, free_atomics).atomic_us,
            coordinator::ChooseUpdates(s, local, dear_atomics).atomic_us);
  EXPECT_GT(coordinator::ChooseUpdates(s, local, dear_atomics).atomic_us,
            coordinator::ChooseUpdates(s, local, dear_atomics).batch_us);
}

TEST(WorkItemsTest, EveryMemberOnceInItemsOfOneChunkAndOneOwner) {
  // Owners of 4096-vertex ranges: [0, 8192), [8192, 20480), [20480, ...).
  const std::vector<uint64_t> bounds = {0, 8192, 20480, 40000};
  auto owner_of = [&](store::VertexId v) {
    return static_cast<int>(std::upper_bound(bounds.begin(), bounds.end(), v) -
                            bounds.begin() - 1);
  };
  std::vector<store::VertexId> members;
  for (store::VertexId v = 0; v < 40000; v += (v < 9000 ? 1 : 7)) {
    members.push_back(v);
  }
  const auto items = workload::FrontierItems(members, 4096, 512, 3, owner_of);
  ASSERT_EQ(items.size(), 3u);
  std::vector<int> seen(members.size(), 0);
  for (int owner = 0; owner < 3; ++owner) {
    uint32_t last_end = 0;
    for (const workload::WorkItem& it : items[owner]) {
      ASSERT_LT(it.begin, it.end);
      EXPECT_LE(it.end - it.begin, 512u);
      EXPECT_GE(it.begin, last_end);  // in member order
      last_end = it.end;
      for (uint32_t i = it.begin; i < it.end; ++i) {
        ++seen[i];
        EXPECT_EQ(owner_of(members[i]), owner);
        EXPECT_EQ(members[i] / 4096, members[it.begin] / 4096);
      }
    }
  }
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], 1) << i;
  // Guided claims shrink to single items and never reach zero.
  EXPECT_EQ(workload::GuidedGroup(1000, 4), 62u);
  EXPECT_EQ(workload::GuidedGroup(3, 4), 1u);
  EXPECT_EQ(workload::GuidedGroup(0, 4), 1u);
  EXPECT_EQ(workload::GuidedGroup(100, 0), 25u);
}

}  // namespace
// Claims through shared cursors (Cluster::Claim's fetch-and-add, here in
// memory): however the workers of every node interleave, each item of each
// node runs exactly once, a node's own items are all counted as its own,
// and a node with little work takes the others' leftovers.
TEST(WorkItemsTest, ClaimedItemsRunOnceAcrossNodesAndWorkers) {
  const std::vector<uint64_t> items = {400, 3, 0, 57};
  const int nodes = static_cast<int>(items.size()), workers = 3;
  std::vector<std::atomic<uint64_t>> cursor(nodes);
  std::vector<std::vector<std::atomic<int>>> runs(nodes);
  for (int k = 0; k < nodes; ++k) {
    runs[k] = std::vector<std::atomic<int>>(items[k]);
  }
  std::vector<workload::ClaimTally> tally(nodes * workers);
  std::vector<std::thread> threads;
  for (int me = 0; me < nodes; ++me) {
    for (int w = 0; w < workers; ++w) {
      threads.emplace_back([&, me, w] {
        auto claim = [&](int k, uint64_t n) -> absl::StatusOr<uint64_t> {
          return cursor[k].fetch_add(n);
        };
        auto run = [&](int k, uint64_t i) {
          ++runs[k][i];
          // The owner's items are slow: the others run out first.
          if (k == 0) std::this_thread::yield();
          return absl::OkStatus();
        };
        EXPECT_TRUE(workload::RunClaimedItems(me, items, nodes * workers, claim,
                                              run, tally[me * workers + w])
                        .ok());
      });
    }
  }
  for (std::thread& t : threads) t.join();
  uint64_t own = 0, taken = 0;
  for (const workload::ClaimTally& t : tally) {
    own += t.own;
    taken += t.taken;
  }
  EXPECT_EQ(own + taken, 460u);
  for (int k = 0; k < nodes; ++k) {
    for (uint64_t i = 0; i < items[k]; ++i) {
      EXPECT_EQ(runs[k][i].load(), 1) << "node " << k << " item " << i;
    }
  }
  // An error from a claim or an item stops the loop with it.
  auto failing = [](int, uint64_t) -> absl::StatusOr<uint64_t> {
    return absl::UnavailableError("memory node gone");
  };
  workload::ClaimTally t;
  EXPECT_EQ(workload::RunClaimedItems(
                0, items, 4, failing,
                [](int, uint64_t) { return absl::OkStatus(); }, t)
                .code(),
            absl::StatusCode::kUnavailable);
}

// A budget stops a node's takers at its room, in the items' units, and
// the owners still run every item once.
TEST(WorkItemsTest, TakersStopAtTheirRoomAndOwnersFinishTheRest) {
  const std::vector<uint64_t> items = {100, 0};
  std::atomic<uint64_t> cursor[2] = {0, 0};
  std::vector<std::atomic<int>> runs(items[0]);
  auto claim = [&](int k, uint64_t n) -> absl::StatusOr<uint64_t> {
    return cursor[k].fetch_add(n);
  };
  auto run = [&](int, uint64_t i) {
    ++runs[i];
    return absl::OkStatus();
  };
  workload::ClaimTally owner, taker;
  // Node 0's items are worth 4 units each; node 1 may take 10 units: two
  // items, and a third (which would cross by half an item or more) not.
  workload::TakeBudget budget(10, {4, 0});
  EXPECT_TRUE(
      workload::RunClaimedItems(1, items, 2, claim, run, taker, &budget).ok());
  EXPECT_EQ(taker.taken, 2u);
  EXPECT_DOUBLE_EQ(budget.taken(), 8);
  EXPECT_TRUE(workload::RunClaimedItems(0, items, 2, claim, run, owner).ok());
  EXPECT_EQ(owner.own, 98u);
  for (uint64_t i = 0; i < items[0]; ++i) EXPECT_EQ(runs[i].load(), 1) << i;
  // A room smaller than half an item still lets the first item go.
  workload::TakeBudget tiny(1, {4, 0});
  EXPECT_TRUE(tiny.Allows(0));
  tiny.Took(0);
  EXPECT_FALSE(tiny.Allows(0));
  // No budget: no limit.
  workload::TakeBudget none;
  none.Took(0);
  EXPECT_TRUE(none.Allows(0));
}

// The steal model: the nodes that would finish first take work at the
// taker's price until all end together; stealing pays when that gain
// exceeds the steal's own cost.
TEST(StealPolicyTest, TheModelWeighsTheGainAgainstTheTakersPrice) {
  const std::vector<double> work = {1000, 0};
  // Free taking: both end at half.
  workload::StealPrices same{1, 1, 0, {}, {}};
  EXPECT_NEAR(workload::BalancedFinishNs(work, same), 500, 1e-6);
  // A taker paying 3x: t = 1000 - s, s * 3 = t -> t = 750.
  workload::StealPrices dear{1, 3, 0, {}, {}};
  EXPECT_NEAR(workload::BalancedFinishNs(work, dear), 750, 1e-6);
  // Already balanced: nothing moves.
  const std::vector<double> even = {700, 700, 700};
  EXPECT_NEAR(workload::BalancedFinishNs(even, dear), 700, 1e-6);
  // Gain 250 ns against a fixed cost: steals below it, not above.
  const std::vector<double> skewed = {800000, 16000};
  workload::StealPrices p{1e-3, 3e-3, 0, {}, {}};  // us-scale work in ns
  workload::StealRule any;
  any.min_excess_work = 0;
  const workload::StealDecision cheap = workload::DecideSteal(skewed, p, any);
  EXPECT_TRUE(cheap.steal);
  EXPECT_NEAR(cheap.gain_us, (800 - (800 * 3 + 16) / 4.0) / 1e3, 1e-9);
  // The light node may take what fills its time up to the balanced finish
  // at the taker's price; the heavy one takes nothing.
  const double finish = (800 * 3 + 16) / 4.0;
  ASSERT_EQ(cheap.room.size(), 2u);
  EXPECT_NEAR(cheap.room[1], (finish - 16) / 3e-3, 1e-3);
  EXPECT_EQ(cheap.room[0], 0.0);
  p.fixed_ns = cheap.gain_us * 1e3 * 1.01;
  const workload::StealDecision dearer = workload::DecideSteal(skewed, p, any);
  EXPECT_FALSE(dearer.steal);
  EXPECT_NEAR(dearer.cost_us, cheap.gain_us * 1.01, 1e-9);
  // The rule's gate still holds: within its fraction, no steal at any price.
  const std::vector<double> close = {1100000, 1000000};
  EXPECT_FALSE(workload::DecideSteal(close, same, any).steal);
}

TEST(StealPolicyTest, WhatStaysWithTheOwnerShrinksTheGain) {
  const std::vector<double> work = {1000, 0};
  // Each unit taken saves the owner 1 - 0.5: t = 1000 - 0.5 s, s = t -> t
  // = 1000 / 1.5.
  workload::StealPrices half{1, 1, 0, {0.5, 0}, {}};
  EXPECT_NEAR(workload::BalancedFinishNs(work, half), 1000 / 1.5, 1e-6);
  // The residue is the owner's: the same on the other node changes nothing.
  workload::StealPrices other{1, 1, 0, {0, 0.5}, {}};
  EXPECT_NEAR(workload::BalancedFinishNs(work, other), 500, 1e-6);
  // An owner that keeps all of a taken unit's cost gains nothing, and the
  // step does not steal however uneven it is.
  workload::StealPrices all{1, 1, 0, {1, 0}, {}};
  EXPECT_NEAR(workload::BalancedFinishNs(work, all), 1000, 1e-6);
  workload::StealRule any;
  any.min_excess_work = 0;
  const workload::StealDecision d = workload::DecideSteal(work, all, any);
  EXPECT_FALSE(d.steal);
  EXPECT_NEAR(d.gain_us, 0, 1e-9);
  // Two heavy owners with different residues and an idle third: at the
  // balance point what the two shed (in units) is what the third takes in
  // the time it has, and it lies above the free-taking one (2000 / 3).
  workload::StealPrices mixed{1, 1, 0, {0.25, 0.5, 0}, {}};
  const std::vector<double> three = {1000, 1000, 0};
  const double t = workload::BalancedFinishNs(three, mixed);
  const double shed = (1000 - t) / 0.75 + (1000 - t) / 0.5;
  EXPECT_NEAR(shed, t, 1e-3);
  EXPECT_GT(t, 2000.0 / 3);
}

// Four one-thread nodes on two cores (one host): together they need twice
// the mean share of the cores' time with or without stealing, so a share
// 1.5x the mean gains nothing from it (a taker's time is the owner's
// lost). On one host with four cores, or on four hosts, the same shares
// steal. Where one host's nodes are slowed by its cores and another's are
// not, the step ends with the slowed host, and taking from it gains down
// to the floor of all the work over all the usable cores.
TEST(StealPolicyTest, NodesSharingCoresGainNothingBelowTheirFloor) {
  const std::vector<double> work = {1500, 833, 833, 834};
  workload::StealRule any;
  any.min_excess_work = 0;
  workload::StealPrices p{1, 1.2, 0, {}, {}};
  p.cores = {{0, 0, 0, 0}, {1, 1, 1, 1}, {2}};
  workload::CoreBounds b = workload::SharedCoreBounds(work, p.cores);
  EXPECT_NEAR(b.alone, 2000, 1e-9);
  EXPECT_NEAR(b.floor, 2000, 1e-9);
  const workload::StealDecision shared = workload::DecideSteal(work, p, any);
  EXPECT_FALSE(shared.steal);
  EXPECT_NEAR(shared.gain_us, 0, 1e-12);
  const double finish = workload::BalancedFinishNs(work, p);
  for (const workload::SharedCores& cores :
       {workload::SharedCores{{0, 0, 0, 0}, {1, 1, 1, 1}, {4}},
        workload::SharedCores{{0, 1, 2, 3}, {1, 1, 1, 1}, {1, 1, 1, 1}},
        workload::SharedCores{}}) {
    p.cores = cores;
    b = workload::SharedCoreBounds(work, p.cores);
    EXPECT_LE(b.alone, 1500);
    EXPECT_LE(b.floor, 1000);
    const workload::StealDecision d = workload::DecideSteal(work, p, any);
    EXPECT_TRUE(d.steal);
    EXPECT_NEAR(d.gain_us, (1500 - finish) / 1e3, 1e-9);
  }
  // Two-thread nodes with room on host 0, two one-thread nodes on host 1's
  // one core: alone, host 1 ends at 1667; all of it over 4 + 1 usable
  // cores, 6333 / 5.
  p.cores = {{0, 0, 1, 1}, {2, 2, 1, 1}, {4, 1}};
  b = workload::SharedCoreBounds(work, p.cores);
  EXPECT_NEAR(b.alone, 1667, 1e-9);
  EXPECT_NEAR(b.floor, 6333.0 / 5, 1e-9);
  EXPECT_NEAR(workload::DecideSteal(work, p, any).gain_us,
              (1667 - std::max(finish, 6333.0 / 5)) / 1e3, 1e-9);
  // Malformed (a node missing): no bounds.
  p.cores = {{0, 0}, {1, 1}, {1}};
  b = workload::SharedCoreBounds(work, p.cores);
  EXPECT_EQ(b.alone, 0);
  EXPECT_EQ(b.floor, 0);
}

}  // namespace dmg

// State arrays on their own, without an engine: compute nodes simulated by
// worker pools over the local transport and one memory node, meeting in an
// in-process rendezvous. Checked against plain vectors:
//  - a commit leaves the whole version in its superstep's buffer and the
//    previous one in the other, writing only the lines that buffer lacks;
//  - with several compute nodes, a line another node published is READ
//    when touched, from the open buffer if it changed in this superstep and
//    from the finished version's if before, and one READ serves every
//    worker that touched it (however they race for it);
//  - ReadResult says so when the memory node lost an update.
#include "compute_node/state_array.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "compute_node/memory_budget.h"
#include "compute_node/page_cache.h"
#include "compute_node/unit_scheduler.h"
#include "compute_node/worker_pool.h"
#include "gtest/gtest.h"
#include "memory_node/memory_node.h"
#include "transport/local_transport.h"

namespace dmg::compute {
namespace {

constexpr uint64_t kPage = StateArrayBase::kPageBytes;
constexpr uint64_t kLine = StateArrayBase::kLineBytes;

// Every participant posts a string and gets all posts back, in node order,
// once all have posted (Cluster::Exchange's common parts).
class Rendezvous {
 public:
  explicit Rendezvous(int nodes) : posts_(nodes) {}
  std::vector<std::string> Exchange(int node, std::string mine) {
    std::unique_lock lock(mu_);
    const uint64_t round = round_;
    posts_[node] = std::move(mine);
    if (++arrived_ == static_cast<int>(posts_.size())) {
      result_ = posts_;
      arrived_ = 0;
      ++round_;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return round_ != round; });
    }
    return result_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> posts_, result_;
  int arrived_ = 0;
  uint64_t round_ = 0;
};

// One simulated compute node: its workers (each with an endpoint), the
// scheduler over them, its budget and its superstep count.
class Node {
 public:
  Node(transport::Transport& t, int threads, std::vector<uint64_t> bounds,
       int id, Rendezvous* rendezvous)
      : transport_(t), bounds_(std::move(bounds)), id_(id), meet_(rendezvous) {
    std::vector<std::unique_ptr<transport::Endpoint>> endpoints;
    for (int w = 0; w < threads; ++w) {
      auto ep = t.NewEndpoint();
      EXPECT_TRUE(ep.ok()) << ep.status();
      endpoints.push_back(*std::move(ep));
    }
    pool_ = std::make_unique<WorkerPool>(std::move(endpoints));
    scheduler_ = std::make_unique<UnitScheduler>(*pool_);
  }
  StateContext context() {
    StateContext c;
    c.pool = pool_.get();
    c.scheduler = scheduler_.get();
    c.transport = &transport_;
    c.budget = &budget_;
    c.superstep = &superstep;
    c.healthy = [] { return true; };
    c.bounds = bounds_;
    c.node = id_;
    c.exchange =
        [this](std::string mine) -> absl::StatusOr<std::vector<std::string>> {
      return meet_->Exchange(id_, std::move(mine));
    };
    return c;
  }
  WorkerPool& pool() { return *pool_; }
  // This node's pages of an array of `elem`-byte elements.
  std::pair<uint64_t, uint64_t> OwnPages(uint64_t elem, uint64_t pages) const {
    if (bounds_.empty()) return {0, pages};
    return {bounds_[id_] * elem / kPage,
            id_ + 2 == static_cast<int>(bounds_.size())
                ? pages
                : bounds_[id_ + 1] * elem / kPage};
  }
  int superstep = 0;

 private:
  transport::Transport& transport_;
  std::vector<uint64_t> bounds_;
  int id_;
  Rendezvous* meet_;
  MemoryBudget budget_;
  std::unique_ptr<WorkerPool> pool_;
  std::unique_ptr<UnitScheduler> scheduler_;
};

class StateArrayTest : public ::testing::Test {
 protected:
  StateArrayTest() : transport_({&memory_}) {}
  // The elements of the version after `superstep`, as the memory node
  // holds them.
  std::vector<int64_t> Version(StateArray<int64_t>& a, int superstep) {
    std::vector<int64_t> out(a.size());
    EXPECT_TRUE(a.ReadVersion(superstep, 0, a.size(), out.data()).ok());
    return out;
  }
  // The id of memory-node region `name` (UINT32_MAX: none).
  uint32_t RegionId(const std::string& name) {
    auto regions = transport_.ListRegions(0);
    EXPECT_TRUE(regions.ok()) << regions.status();
    if (!regions.ok()) return UINT32_MAX;
    for (const transport::RegionInfo& r : *regions) {
      if (r.name == name) return r.id;
    }
    return UINT32_MAX;
  }
  uint64_t BytesWritten() { return memory_.served().bytes_written; }
  uint64_t BytesRead() { return memory_.served().bytes_read; }

  memory_node::MemoryNode memory_{0};
  transport::LocalTransport transport_;
};

// One compute node: superstep 1 changes two far-apart elements, superstep 2
// one of them again. Each commit leaves its version whole in its buffer
// (the other keeps the one before), and writes only the lines that buffer
// lacks: the lines changed in this superstep and in the previous one.
TEST_F(StateArrayTest, ACommitWritesItsVersionIntoItsBufferLineByLine) {
  constexpr uint64_t n = 8192;  // 16 pages of 8-byte elements
  Node node(transport_, 2, {}, 0, nullptr);
  StateArray<int64_t> a(node.context(), "a", n, CacheHint::kPerVertex, 7);
  ASSERT_TRUE(a.Materialize(nullptr, 0).ok());
  std::vector<int64_t> want(n, 7);
  EXPECT_EQ(Version(a, 0), want);
  EXPECT_EQ(Version(a, 1), want);

  a.Set(3, 30);
  a.Set(5000, 50);
  uint64_t before = BytesWritten();
  ASSERT_TRUE(a.Commit(1).ok());
  node.superstep = 1;
  EXPECT_EQ(BytesWritten() - before, 2 * kLine);
  const std::vector<int64_t> v0(n, 7);
  want[3] = 30;
  want[5000] = 50;
  EXPECT_EQ(Version(a, 1), want);
  EXPECT_EQ(Version(a, 0), v0) << "buffer 0 still holds version 0";

  a.Set(3, 31);
  before = BytesWritten();
  ASSERT_TRUE(a.Commit(2).ok());
  node.superstep = 2;
  // Line 0 (changed in both supersteps) and element 5000's line (changed in
  // superstep 1, which buffer 0 lacked): nothing else.
  EXPECT_EQ(BytesWritten() - before, 2 * kLine);
  const std::vector<int64_t> v1 = want;
  want[3] = 31;
  EXPECT_EQ(Version(a, 2), want);
  EXPECT_EQ(Version(a, 1), v1) << "buffer 1 still holds version 1";
  auto result = a.ReadResult(2);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(*result, want);
}

// A write-back the memory node lost (here: the version overwritten behind
// the compute node's back) is an error, not a silently different answer.
TEST_F(StateArrayTest, ReadResultSaysWhenTheMemoryNodeLostAnUpdate) {
  constexpr uint64_t n = 4096;
  Node node(transport_, 1, {}, 0, nullptr);
  StateArray<int64_t> a(node.context(), "a", n, CacheHint::kPerVertex, 0);
  ASSERT_TRUE(a.Materialize(nullptr, 0).ok());
  a.Set(100, 1);
  ASSERT_TRUE(a.Commit(1).ok());
  node.superstep = 1;
  ASSERT_TRUE(a.ReadResult(1).ok());
  // Element 100 of buffer 1, written with the value of before the update.
  const uint32_t buffer1 = RegionId("a.1");
  ASSERT_NE(buffer1, UINT32_MAX);
  const int64_t stale = 0;
  ASSERT_TRUE(memory_.ServeWrite(buffer1, 100 * 8, &stale, 8).ok());
  auto result = a.ReadResult(1);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("disagrees"), std::string::npos)
      << result.status();
}

// A paged array (one worker, every page cached): reads of a cached page
// that is not the worker's pinned one are validated reads of the page
// cache, counted as its hits; after a few in a row of one page the pin
// moves there, and the rest of a sequential scan reads the pinned page
// inline. A read off the page now and then (a pull's sources off their
// target's page) does not move the pin away. Values stay the array's.
TEST_F(StateArrayTest, PagedReadsMoveThePinToThePageBeingScanned) {
  constexpr uint64_t kPerPage = kPage / sizeof(int32_t);
  constexpr uint64_t n = 4 * kPerPage;
  Node node(transport_, 1, {}, 0, nullptr);
  PageCache cache(8, 1);
  StateArray<int32_t> a(node.context(), "a", n, CacheHint::kPerVertex, 0);
  ASSERT_TRUE(a.Materialize(&cache, 0).ok());
  for (uint64_t v = 0; v < n; ++v) a.Set(v, static_cast<int32_t>(3 * v + 1));
  // The writes left page 3 pinned; pages 0-2 are cached, not pinned.
  const uint64_t before = cache.counters().hits;
  int64_t wrong = 0;
  for (uint64_t p = 0; p < 3; ++p) {
    for (uint64_t i = 0; i < kPerPage; ++i) {
      const uint64_t v = p * kPerPage + i;
      wrong += a.Get(v) != static_cast<int32_t>(3 * v + 1);
      if (i % 16 == 7) {  // a source on the next page
        const uint64_t u = v + kPerPage;
        wrong += a.Get(u) != static_cast<int32_t>(3 * u + 1);
      }
    }
  }
  EXPECT_EQ(wrong, 0);
  // Per page: the reads before the pin moves, and the 64 off it (a page
  // scanned element by element through validated reads: 1,024 a page).
  EXPECT_LE(cache.counters().hits - before, 3 * (16 + 64 + 16));
  a.ReleasePins();
}

// Two compute nodes, each owning half of the array. What the engine's
// collectives do is done here by hand: the owner publishes its changed
// lines, the other marks them pending.
class TwoNodes : public StateArrayTest {
 protected:
  static constexpr uint64_t n = 8192;  // node 0: [0, 4096), node 1: the rest
  TwoNodes()
      : meet_(2),
        node0_(transport_, 8, {0, 4096, n}, 0, &meet_),
        node1_(transport_, 2, {0, 4096, n}, 1, &meet_),
        a0_(node0_.context(), "a", n, CacheHint::kPerVertex, -1),
        a1_(node1_.context(), "a", n, CacheHint::kPerVertex, -1) {}
  void SetUp() override {
    // Materializing is a collective (the nodes tell each other where their
    // slices are).
    absl::Status s1;
    std::thread other([&] { s1 = a1_.Materialize(nullptr, 0); });
    absl::Status s0 = a0_.Materialize(nullptr, 0);
    other.join();
    ASSERT_TRUE(s0.ok()) << s0;
    ASSERT_TRUE(s1.ok()) << s1;
  }
  // Node 1 sets v to x and publishes; node 0 notes v's line as pending.
  void Publish1(uint64_t v, int64_t x) {
    a1_.Set(v, x);
    std::vector<uint64_t> pages;
    ASSERT_TRUE(a1_.Publish(pages).ok());
    a0_.MarkPending(v * 8 / kLine, 1);
  }
  // Both nodes end the superstep, each committing its own pages.
  void Commit() {
    for (auto [node, a] :
         {std::pair{&node0_, &a0_}, std::pair{&node1_, &a1_}}) {
      const auto [first, last] = node->OwnPages(8, a->pages());
      ASSERT_TRUE(a->Commit(node->superstep + 1, first, last).ok());
      ++node->superstep;
    }
  }

  Rendezvous meet_;
  Node node0_, node1_;
  StateArray<int64_t> a0_, a1_;
};

// A line published in the open superstep comes from its buffer; one
// published in an earlier superstep and not touched since, from the last
// finished version's buffer (the open one may lack it); a line changed
// again in a later superstep from the newer version. Each is READ once.
TEST_F(TwoNodes, PendingLinesAreReadFromTheBufferHoldingTheirVersion) {
  Publish1(5000, 1);  // superstep 1
  Publish1(6000, 2);
  EXPECT_EQ(a0_.pending_lines(), 2u);
  EXPECT_EQ(a0_.Get(0, 5000), 1);  // from the open buffer
  EXPECT_EQ(a0_.pending_lines(), 1u);
  Commit();
  // Superstep 2: 6000's line, untouched, is READ from version 1's buffer;
  // 5000 changes again (the open buffer).
  Publish1(5000, 3);
  const uint64_t before = BytesRead();
  EXPECT_EQ(a0_.Get(0, 6000), 2);
  EXPECT_EQ(a0_.Get(0, 5000), 3);
  EXPECT_EQ(a0_.Get(0, 5001), -1);  // 5000's line: no second READ
  EXPECT_EQ(BytesRead() - before, 2 * kLine);
  EXPECT_EQ(a0_.pending_lines(), 0u);
  Commit();
  auto r0 = a0_.ReadResult(2);
  ASSERT_TRUE(r0.ok()) << r0.status();
  std::vector<int64_t> want(n, -1);
  want[5000] = 3;
  want[6000] = 2;
  EXPECT_EQ(*r0, want);
}

// With lines of the other node's range pending, ReadResult compares the
// rest a line at a time: a pending line's newer value on the memory node
// is no disagreement, a lost update in a line that is not pending is one.
TEST_F(TwoNodes, ReadResultSkipsPendingLinesButNotTheOthers) {
  a0_.Set(10, 4);
  Publish1(5000, 1);  // node 0 never reads it: pending to the end
  Commit();
  EXPECT_EQ(a0_.pending_lines(), 1u);
  auto r0 = a0_.ReadResult(1);
  ASSERT_TRUE(r0.ok()) << r0.status();
  EXPECT_EQ((*r0)[10], 4);
  EXPECT_EQ((*r0)[5000], 1);
  // Element 6000 (node 1's, not pending) changed behind node 0's back.
  const uint32_t buffer1 = RegionId("a.1.1");  // node 1's buffer 1
  ASSERT_NE(buffer1, UINT32_MAX);
  const int64_t lost = 9;
  ASSERT_TRUE(memory_.ServeWrite(buffer1, (6000 - 4096) * 8, &lost, 8).ok());
  auto r1 = a0_.ReadResult(1);
  ASSERT_FALSE(r1.ok());
  EXPECT_NE(r1.status().message().find("disagrees"), std::string::npos)
      << r1.status();
}

// ReadResult of one node's range READs that range alone (the others are
// left at the initial value) and still says when it lost an update there.
TEST_F(TwoNodes, ReadResultOfARangeReadsThatRangeAlone) {
  a1_.Set(5000, 7);
  Publish1(6000, 2);
  Commit();
  const uint64_t before = BytesRead();
  auto r1 = a1_.ReadResult(1, 4096, n);
  ASSERT_TRUE(r1.ok()) << r1.status();
  EXPECT_EQ(BytesRead() - before, (n - 4096) * 8);
  std::vector<int64_t> want(n, -1);
  want[5000] = 7;
  want[6000] = 2;
  EXPECT_EQ(*r1, want);
  const uint32_t buffer1 = RegionId("a.1.1");
  ASSERT_NE(buffer1, UINT32_MAX);
  const int64_t lost = 9;
  ASSERT_TRUE(memory_.ServeWrite(buffer1, (7000 - 4096) * 8, &lost, 8).ok());
  EXPECT_FALSE(a1_.ReadResult(1, 4096, n).ok());
  // Node 0's range is untouched there.
  EXPECT_TRUE(a0_.ReadResult(1, 0, 4096).ok());
}

// A taken block's lines in one batch: FetchPendingOf READs the pending
// lines holding the vertices named or the range given, and no others; the
// values are the published ones.
TEST_F(TwoNodes, FetchPendingOfReadsTheLinesNamedInOneBatch) {
  Publish1(5000, 1);
  Publish1(6000, 2);
  Publish1(7000, 3);
  Publish1(8000, 4);
  EXPECT_EQ(a0_.pending_lines(), 4u);
  const uint64_t bytes = BytesRead();
  const std::vector<store::VertexId> named = {6000, 6001, 8000, 100};
  a0_.FetchPendingOf(0, named, 4990, 5010);
  EXPECT_EQ(BytesRead() - bytes, 3 * kLine);
  EXPECT_EQ(a0_.pending_lines(), 1u);
  const uint64_t after = BytesRead();
  EXPECT_EQ(a0_.Get(0, 5000), 1);
  EXPECT_EQ(a0_.Get(0, 6000), 2);
  EXPECT_EQ(a0_.Get(0, 8000), 4);
  EXPECT_EQ(BytesRead(), after);   // nothing READ again
  EXPECT_EQ(a0_.Get(0, 7000), 3);  // the one left: READ at its touch
  EXPECT_EQ(BytesRead() - after, kLine);
}

// KeepChecks: the armed batch READs the referenced lines; a line outside
// them is still READ when touched (not taken as current), and after the
// budget's touches the rest comes in one batch.
TEST_F(TwoNodes, KeepChecksReadsWhatATakenUnitTouchesOutsideTheBatch) {
  for (int64_t k = 0; k < 6; ++k) Publish1(4096 + 512 * k, k + 1);
  std::vector<uint64_t> referenced((n + 63) / 64, 0);
  referenced[4096 / 64] |= 1;  // vertex 4096
  a0_.FetchAllOnTouch(true, &referenced, 0);
  a0_.KeepChecks(/*rest_budget=*/1);
  const uint64_t bytes = BytesRead();
  EXPECT_EQ(a0_.Get(0, 4096), 1);  // the batch: the referenced line
  EXPECT_EQ(BytesRead() - bytes, kLine);
  EXPECT_EQ(a0_.Get(0, 4096 + 512), 2);  // outside: a line at a touch
  EXPECT_EQ(BytesRead() - bytes, 2 * kLine);
  EXPECT_EQ(a0_.Get(0, 4096 + 1024), 3);  // past the budget: the rest
  EXPECT_EQ(BytesRead() - bytes, 6 * kLine);
  EXPECT_EQ(a0_.pending_lines(), 0u);
  for (int64_t k = 3; k < 6; ++k) EXPECT_EQ(a0_.Get(0, 4096 + 512 * k), k + 1);
  EXPECT_EQ(BytesRead() - bytes, 6 * kLine);
}

// Eight workers touch one pending line at once, each pausing between its
// pending check and its READ (the test hook), so most find it READ by
// another worker by then. Every one must see the value of the open
// superstep, never the finished version's (one superstep old), whichever
// worker READ it; in superstep 1 the finished buffer holds the initial
// value, in superstep 2 version 1's.
TEST_F(TwoNodes, WorkersRacingForAPendingLineAllSeeTheOpenVersion) {
  StateArrayBase::touch_hook_for_test = [] {
    std::this_thread::sleep_for(std::chrono::microseconds(300));
  };
  struct Unhook {
    ~Unhook() { StateArrayBase::touch_hook_for_test = nullptr; }
  } unhook;
  for (int64_t round = 1; round <= 20; ++round) {
    Publish1(5000, round);
    std::atomic<int> wrong{0};
    ASSERT_TRUE(node0_.pool()
                    .Run([&](int w) {
                      if (a0_.Get(w, 5000) != round) ++wrong;
                      return absl::OkStatus();
                    })
                    .ok());
    EXPECT_EQ(wrong.load(), 0) << "round " << round;
    EXPECT_EQ(a0_.Get(0, 5000), round) << "the local copy, round " << round;
    Commit();
  }
}

}  // namespace
}  // namespace dmg::compute

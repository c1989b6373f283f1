// Issue 13, build item 6: a superstep that completes is durable on the
// memory nodes. The progress record (compute_node/progress.h) restores the
// values a program carries exactly as they were at the last complete
// superstep, refuses a record of another computation or a damaged one, and
// fences a compute node of an earlier attempt once another took the job
// over. The tcp server keeps a job's regions after its connections close
// when the job asked (kKeepJob), hands them to the job's next connection,
// and frees them when the time is up.
#include "compute_node/progress.h"

#include <chrono>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "compute_node/frontier.h"
#include "gtest/gtest.h"
#include "memory_node/memory_node.h"
#include "transport/local_transport.h"
#include "transport/tcp_server.h"
#include "transport/tcp_transport.h"

namespace dmg {
namespace {

using compute::Frontier;
using compute::Progress;

constexpr uint64_t kN = 100000;

struct Loop {
  int32_t level = 0;
  double l1 = 0;
  Frontier frontier{kN, 2};
  std::vector<Progress::Carried> Carried() {
    return {{"level", &level, sizeof(level), nullptr},
            {"frontier", nullptr, 0, &frontier},
            {"l1", &l1, sizeof(l1), nullptr}};
  }
};

void Fill(Frontier& f, uint64_t count, uint64_t stride) {
  f.Clear();
  for (uint64_t k = 0; k < count; ++k) f.Add(k % 2, (k * stride + 7) % kN);
  f.Seal();
}

std::vector<transport::RegionInfo> Regions(transport::Transport& t) {
  auto regions = t.ListRegions(0);
  EXPECT_TRUE(regions.ok()) << regions.status();
  std::erase_if(*regions, [](const auto& r) { return r.id == 0; });
  return *regions;
}

class ProgressTest : public ::testing::Test {
 protected:
  memory_node::MemoryNode node_{0};
  transport::LocalTransport transport_{{&node_}};
  std::unique_ptr<transport::Endpoint> ep_ = *transport_.NewEndpoint();
};

TEST_F(ProgressTest, RestoresWhatTheLastCompleteSuperstepCarried) {
  Loop a;
  auto first = std::make_unique<Progress>(transport_, kN, "j");
  ASSERT_TRUE(first->Start(*ep_, 42, a.Carried()).ok());
  // Superstep 1: a sparse frontier (saved as a list); superstep 2: a dense
  // one (saved as a bitmap); superstep 3's values never get recorded.
  a.level = 1;
  a.l1 = 0.25;
  Fill(a.frontier, 10, 977);
  ASSERT_TRUE(first->Record(*ep_, 1).ok());
  a.level = 2;
  a.l1 = 1.0 / 3;
  Fill(a.frontier, 60000, 7);
  const std::vector<store::VertexId> dense = a.frontier.SortedVertices();
  ASSERT_TRUE(first->Record(*ep_, 2).ok());
  a.level = 3;
  first->Abandon();  // the compute node dies
  first.reset();

  Loop b;
  Progress again(transport_, kN, "j");
  std::vector<transport::RegionInfo> left = Regions(transport_);
  again.Adopt(left);
  EXPECT_TRUE(left.empty());  // every region it left was the record's
  absl::StatusOr<int> done = again.TakeOver(*ep_, 42, b.Carried());
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(*done, 2);
  EXPECT_EQ(b.level, 2);
  EXPECT_EQ(b.l1, 1.0 / 3);
  EXPECT_EQ(b.frontier.SortedVertices(), dense);
  EXPECT_EQ(again.epoch(), 2u);
  // It goes on from there: superstep 3, sparse again.
  Fill(b.frontier, 3, 1);
  b.level = 3;
  ASSERT_TRUE(again.Record(*ep_, 3).ok());
}

TEST_F(ProgressTest, ANodeOfTheEarlierAttemptIsFencedOut) {
  Loop a, b;
  Progress old(transport_, kN, "j");
  ASSERT_TRUE(old.Start(*ep_, 7, a.Carried()).ok());
  ASSERT_TRUE(old.Record(*ep_, 1).ok());
  // Another compute node resumes the job while the old one still runs.
  Progress resumed(transport_, kN, "j");
  std::vector<transport::RegionInfo> left = Regions(transport_);
  resumed.Adopt(left);
  ASSERT_EQ(*resumed.TakeOver(*ep_, 7, b.Carried()), 1);
  absl::Status s = old.Record(*ep_, 2);
  EXPECT_TRUE(absl::IsAborted(s)) << s;
  EXPECT_NE(s.message().find("taken over"), std::string::npos) << s;
  EXPECT_TRUE(resumed.Record(*ep_, 2).ok());
  old.Abandon();
}

TEST_F(ProgressTest, RefusesAnotherComputationAndDamagedRecords) {
  Loop a;
  Progress first(transport_, kN, "j");
  ASSERT_TRUE(first.Start(*ep_, 1, a.Carried()).ok());
  Fill(a.frontier, 5, 3);
  ASSERT_TRUE(first.Record(*ep_, 1).ok());
  first.Abandon();
  std::vector<transport::RegionInfo> regions = Regions(transport_);
  {
    Loop b;
    Progress other(transport_, kN, "j");
    std::vector<transport::RegionInfo> left = regions;
    other.Adopt(left);
    absl::StatusOr<int> r = other.TakeOver(*ep_, 2, b.Carried());
    EXPECT_TRUE(absl::IsFailedPrecondition(r.status())) << r.status();
    other.Abandon();
  }
  // A flipped byte in superstep 1's slot, then in its frontier.
  const transport::RegionInfo* record = nullptr;
  const transport::RegionInfo* frontier = nullptr;
  for (const auto& r : regions) {
    if (r.name == "progress") record = &r;
    if (r.name == "progress.frontier.1.1") frontier = &r;
  }
  ASSERT_NE(record, nullptr);
  ASSERT_NE(frontier, nullptr);
  for (const transport::RegionInfo* target : {record, frontier}) {
    const uint64_t at = target == record
                            ? Progress::kSlotAt + Progress::kSlotBytes + 16
                            : Progress::kFrontierHeader + 1;
    uint8_t byte = 0;
    ep_->Read(0, target->id, at, &byte, 1);
    ASSERT_TRUE(ep_->Flush().ok());
    byte ^= 0x40;
    ep_->Write(0, target->id, at, &byte, 1);
    ASSERT_TRUE(ep_->Flush().ok());
    Loop b;
    Progress damaged(transport_, kN, "j");
    std::vector<transport::RegionInfo> left = regions;
    damaged.Adopt(left);
    absl::StatusOr<int> r = damaged.TakeOver(*ep_, 1, b.Carried());
    EXPECT_TRUE(absl::IsDataLoss(r.status())) << r.status();
    damaged.Abandon();
    byte ^= 0x40;  // repaired for the next case
    ep_->Write(0, target->id, at, &byte, 1);
    ASSERT_TRUE(ep_->Flush().ok());
  }
}

TEST_F(ProgressTest, NothingCompleteMeansAFreshStart) {
  Loop a;
  Progress first(transport_, kN, "j");
  ASSERT_TRUE(first.Start(*ep_, 5, a.Carried()).ok());
  first.Abandon();
  Loop b;
  b.level = 99;
  Progress again(transport_, kN, "j");
  std::vector<transport::RegionInfo> left = Regions(transport_);
  again.Adopt(left);
  EXPECT_EQ(*again.TakeOver(*ep_, 5, b.Carried()), 0);
  EXPECT_EQ(b.level, 99);  // nothing restored
  EXPECT_TRUE(again.Start(*ep_, 5, b.Carried()).ok());
}

// A job of several compute nodes: each keeps its own record, and the job
// resumes from the least superstep they recorded, which a node that got one
// further still holds in its other slot.
TEST_F(ProgressTest, ANodeOfSeveralResumesAtTheSuperstepBeforeItsLast) {
  Loop a0, a1;
  Progress n0(transport_, kN, "j", "progress.0");
  Progress n1(transport_, kN, "j", "progress.1");
  ASSERT_TRUE(n0.Start(*ep_, 9, a0.Carried()).ok());
  ASSERT_TRUE(n1.Start(*ep_, 9, a1.Carried()).ok());
  for (int s = 1; s <= 3; ++s) {
    a0.level = a1.level = s;
    Fill(a0.frontier, 5 + s, 11);
    ASSERT_TRUE(n0.Record(*ep_, s).ok());
    if (s < 3) {  // n1 dies in 3
      ASSERT_TRUE(n1.Record(*ep_, s).ok());
    }
  }
  const std::vector<store::VertexId> second = [&] {
    Fill(a0.frontier, 5 + 2, 11);
    return a0.frontier.SortedVertices();
  }();
  n0.Abandon();
  n1.Abandon();
  const std::vector<transport::RegionInfo> regions = Regions(transport_);
  Loop b0, b1;
  Progress r0(transport_, kN, "j", "progress.0");
  Progress r1(transport_, kN, "j", "progress.1");
  std::vector<transport::RegionInfo> left = regions;
  r0.Adopt(left);
  r1.Adopt(left);
  EXPECT_TRUE(left.empty());
  EXPECT_EQ(*r0.Completed(*ep_, 9), 3);
  EXPECT_EQ(*r1.Completed(*ep_, 9), 2);
  ASSERT_EQ(*r0.TakeOver(*ep_, 9, b0.Carried(), 2), 2);
  ASSERT_EQ(*r1.TakeOver(*ep_, 9, b1.Carried(), 2), 2);
  EXPECT_EQ(b0.level, 2);
  EXPECT_EQ(b0.frontier.SortedVertices(), second);
  EXPECT_EQ(b1.level, 2);
  // The next record follows the superstep resumed from.
  EXPECT_TRUE(r0.Record(*ep_, 3).ok());
  r0.Abandon();
  r1.Abandon();
  // Two supersteps back is in neither slot: refused.
  Loop c;
  Progress far(transport_, kN, "j", "progress.0");
  left = regions;
  far.Adopt(left);
  absl::StatusOr<int> r = far.TakeOver(*ep_, 9, c.Carried(), 1);
  EXPECT_TRUE(absl::IsDataLoss(r.status())) << r.status();
  far.Abandon();
}

// A record allocated by an attempt killed before it wrote it is no record.
TEST_F(ProgressTest, ARecordNeverWrittenMeansAFreshStart) {
  absl::StatusOr<transport::RegionInfo> blank =
      transport_.AllocateRegion(0, Progress::kRecordBytes, "progress");
  ASSERT_TRUE(blank.ok());
  Loop b;
  Progress again(transport_, kN, "j");
  std::vector<transport::RegionInfo> left = Regions(transport_);
  again.Adopt(left);
  EXPECT_EQ(*again.Completed(*ep_, 5), 0);
  EXPECT_EQ(*again.TakeOver(*ep_, 5, b.Carried()), 0);
  EXPECT_TRUE(again.Start(*ep_, 5, b.Carried()).ok());
}

// ---- the memory node's side: kept regions ------------------------------

std::unique_ptr<transport::TcpTransport> Connect(uint16_t port,
                                                 const std::string& job) {
  transport::TcpOptions options;
  options.credentials.job = job;
  auto t = transport::TcpTransport::Connect({{"127.0.0.1", port}}, options);
  EXPECT_TRUE(t.ok()) << t.status();
  return *std::move(t);
}

size_t JobRegions(memory_node::MemoryNode& node) {
  return node.ServeList().size() - 1;  // all but the store
}

bool WaitFor(const std::function<bool()>& done) {
  for (int k = 0; k < 400 && !done(); ++k) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

TEST(KeptRegionsTest, AKeptJobsRegionsOutliveItsConnectionsUntilItReturns) {
  memory_node::MemoryNode node(0);
  ASSERT_TRUE(node.LoadStore(AlignedBuffer(4096)).ok());
  auto server = *transport::TcpServer::Start(&node, "127.0.0.1", 0, {});
  {
    auto job = Connect(server->port(), "pr");
    auto kept = job->KeepRegions(60);
    ASSERT_TRUE(kept.ok()) << kept.status();
    EXPECT_EQ(kept->granted_s, 60u);
    EXPECT_EQ(kept->others, 0u);
    ASSERT_TRUE(job->AllocateRegion(0, 4096, "pr.rank.0").ok());
    // A second process of the same job is seen as another one running it.
    auto twin = Connect(server->port(), "pr");
    EXPECT_EQ(twin->KeepRegions(60)->others, 1u);
    // ... until the first one's connections are gone.
    job.reset();
    EXPECT_TRUE(WaitFor([&] { return twin->KeepRegions(60)->others == 0; }));
  }  // the second one dies too
  ASSERT_TRUE(WaitFor([&] { return server->stats().kept_regions == 1; }));
  EXPECT_EQ(JobRegions(node), 1u);
  // Another job sees nothing of it; the job's next process finds it.
  EXPECT_TRUE(Regions(*Connect(server->port(), "other")).empty());
  {
    auto back = Connect(server->port(), "pr");
    std::vector<transport::RegionInfo> regions = Regions(*back);
    ASSERT_EQ(regions.size(), 1u);
    EXPECT_EQ(regions[0].name, "pr.rank.0");
    EXPECT_EQ(server->stats().kept_regions, 0u);  // adopted
    // Done: nothing to keep any more; its regions go when it closes.
    ASSERT_TRUE(back->KeepRegions(0).ok());
  }
  ASSERT_TRUE(WaitFor([&] { return JobRegions(node) == 0; }));
  EXPECT_EQ(server->stats().kept_regions, 0u);
}

TEST(KeptRegionsTest, KeptRegionsAreFreedWhenTheirTimeIsUp) {
  memory_node::MemoryNode node(0);
  ASSERT_TRUE(node.LoadStore(AlignedBuffer(4096)).ok());
  transport::TcpServerOptions options;
  options.limits.max_keep_s = 1;  // whatever a job asks
  auto server = *transport::TcpServer::Start(&node, "127.0.0.1", 0, options);
  {
    auto job = Connect(server->port(), "bfs");
    EXPECT_EQ(job->KeepRegions(3600)->granted_s, 1u);
    ASSERT_TRUE(job->AllocateRegion(0, 1 << 20, "bfs.depth.0").ok());
  }
  ASSERT_TRUE(WaitFor([&] { return server->stats().kept_regions == 1; }));
  // Freed within a second or two of the deadline.
  ASSERT_TRUE(WaitFor([&] { return JobRegions(node) == 0; }));
  EXPECT_EQ(server->stats().kept_regions, 0u);
  EXPECT_EQ(node.bytes_in_use(), 4096u);
}

TEST(KeptRegionsTest, WithoutKeepARegionGoesWithItsConnection) {
  memory_node::MemoryNode node(0);
  ASSERT_TRUE(node.LoadStore(AlignedBuffer(4096)).ok());
  auto server = *transport::TcpServer::Start(&node, "127.0.0.1", 0, {});
  {
    auto job = Connect(server->port(), "cc");
    ASSERT_TRUE(job->AllocateRegion(0, 4096, "cc.label.0").ok());
  }
  ASSERT_TRUE(WaitFor([&] { return JobRegions(node) == 0; }));
  EXPECT_EQ(server->stats().kept_regions, 0u);
}

}  // namespace
}  // namespace dmg

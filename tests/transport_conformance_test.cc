// Transport conformance: the same one-sided semantics from every backend.
// Parameterised by backend ("local", "tcp", and "rdma" where an RDMA device
// exists): READ/WRITE of many sizes and alignments, batches, CAS and FAA
// under contention from threads and (network backends) processes with exact
// final counts, bounds and unknown-region errors, and a memory node that
// dies mid-operation (an error within the timeout, no hang).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "memory_node/memory_node.h"
#include "tests/backend_fixture.h"
#include "transport/local_transport.h"

namespace dmg {
namespace {

using testing::Backend;

class ConformanceTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Backend>> b = Backend::Create(GetParam());
    if (!b.ok() && b.status().code() == absl::StatusCode::kUnavailable) {
      GTEST_SKIP() << b.status().message();
    }
    ASSERT_TRUE(b.ok()) << b.status();
    backend_ = *std::move(b);
  }
  transport::Transport& t() { return backend_->transport(); }
  std::unique_ptr<Backend> backend_;
};

TEST_P(ConformanceTest, ReadWriteManySizesAndAlignments) {
  auto region = t().AllocateRegion(0, 1 << 21, "data");
  ASSERT_TRUE(region.ok()) << region.status();
  auto ep = *t().NewEndpoint();
  std::vector<uint8_t> pattern(1 << 21);
  for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = i * 131 + i / 977;
  ep->Write(0, region->id, 0, pattern.data(), pattern.size());
  ASSERT_TRUE(ep->Flush().ok());
  for (uint32_t size : {1u, 3u, 8u, 64u, 4095u, 65536u, 1u << 20}) {
    for (uint64_t offset : {0ull, 1ull, 7ull, 4093ull}) {
      std::vector<uint8_t> got(size);
      ep->Read(0, region->id, offset, got.data(), size);
      ASSERT_TRUE(ep->Flush().ok());
      ASSERT_TRUE(std::equal(got.begin(), got.end(), pattern.begin() + offset))
          << size << "@" << offset;
    }
  }
}

TEST_P(ConformanceTest, BatchesAreOneRoundTripAndKeepOrder) {
  auto region = t().AllocateRegion(0, 1 << 16, "data");
  ASSERT_TRUE(region.ok());
  auto ep = *t().NewEndpoint();
  for (int depth : {1, 2, 8, 64}) {
    std::vector<uint64_t> values(depth), back(depth);
    for (int i = 0; i < depth; ++i) {
      values[i] = depth * 1000 + i;
      ep->Write(0, region->id, 8 * i, &values[i], 8);
    }
    for (int i = 0; i < depth; ++i) ep->Read(0, region->id, 8 * i, &back[i], 8);
    uint64_t trips = ep->stats().round_trips;
    ASSERT_TRUE(ep->Flush().ok());
    EXPECT_EQ(ep->stats().round_trips, trips + 1);
    EXPECT_EQ(back, values);  // READs see the WRITEs queued before them
  }
  EXPECT_EQ(ep->stats().reads, 75u);
  EXPECT_EQ(ep->stats().writes, 75u);
  EXPECT_EQ(ep->stats().bytes_read, 75u * 8);
}

// What a checkpoint relies on (Progress::Seal): one node applies a batch's
// WRITEs and atomics in the order they were queued.
TEST_P(ConformanceTest, AtomicsTakeEffectInProgramOrder) {
  auto region = t().AllocateRegion(0, 1 << 16, "data");
  ASSERT_TRUE(region.ok());
  auto ep = *t().NewEndpoint();
  for (int round = 0; round < 50; ++round) {
    const uint64_t base = 10 * round;
    uint64_t first = base + 5, third = base + 9, old1 = 0, old2 = 0, back = 0;
    std::vector<uint64_t> bulk(512, base);
    ep->Write(0, region->id, 4096, bulk.data(), bulk.size() * 8);
    ep->Write(0, region->id, 0, &first, 8);
    ep->CompareAndSwap(0, region->id, 0, base + 5, base + 6, &old1);
    ep->FetchAndAdd(0, region->id, 0, 1, &old2);
    ep->Write(0, region->id, 0, &third, 8);
    ep->Read(0, region->id, 0, &back, 8);
    ASSERT_TRUE(ep->Flush().ok());
    EXPECT_EQ(old1, base + 5);  // the CAS saw the WRITE before it
    EXPECT_EQ(old2, base + 6);  // the FAA saw the CAS
    EXPECT_EQ(back, base + 9);  // the WRITE after them won
  }
}

TEST_P(ConformanceTest, SeveralBatchesInFlight) {
  auto region = t().AllocateRegion(0, 1 << 16, "data");
  ASSERT_TRUE(region.ok());
  auto ep = *t().NewEndpoint();
  std::vector<uint64_t> values(64), back(64, 0);
  for (int i = 0; i < 64; ++i) values[i] = 7000 + i;
  // Four batches posted back to back; waiting for the last completes all,
  // in order (a later READ sees an earlier batch's WRITE).
  std::vector<uint64_t> tickets;
  for (int b = 0; b < 4; ++b) {
    for (int i = 16 * b; i < 16 * b + 16; ++i) {
      ep->Write(0, region->id, 8 * i, &values[i], 8);
    }
    tickets.push_back(ep->Post());
  }
  EXPECT_LE(ep->outstanding(), 4u);
  for (int i = 0; i < 64; ++i) ep->Read(0, region->id, 8 * i, &back[i], 8);
  tickets.push_back(ep->Post());
  ASSERT_TRUE(ep->Wait(tickets.back()).ok());
  EXPECT_EQ(ep->outstanding(), 0u);
  EXPECT_EQ(back, values);
  EXPECT_TRUE(ep->Wait(tickets[0]).ok());  // already complete
}

TEST_P(ConformanceTest, WaitForOneBatchLeavesLaterOnesPosted) {
  auto region = t().AllocateRegion(0, 1 << 20, "data");
  ASSERT_TRUE(region.ok());
  auto ep = *t().NewEndpoint();
  std::vector<uint8_t> pattern(1 << 20);
  for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = i * 7 + i / 251;
  ep->Write(0, region->id, 0, pattern.data(), pattern.size());
  ASSERT_TRUE(ep->Flush().ok());
  // Post, Post, Post, then Wait for each in turn: every batch's READs land,
  // whichever batch is waited for first.
  std::vector<std::vector<uint8_t>> got(6, std::vector<uint8_t>(64 << 10));
  std::vector<uint64_t> tickets;
  for (size_t b = 0; b < got.size(); ++b) {
    for (int k = 0; k < 4; ++k) {
      ep->Read(0, region->id, b * (64 << 10) + k * (16 << 10) + b,
               got[b].data() + k * (16 << 10), 16 << 10);
    }
    tickets.push_back(ep->Post());
  }
  EXPECT_EQ(ep->outstanding(), 6u);
  ASSERT_TRUE(ep->Wait(tickets[1]).ok());  // completes batches 0 and 1
  EXPECT_EQ(ep->outstanding(), 4u);
  for (size_t b = 0; b < 2; ++b) {
    ASSERT_TRUE(std::equal(got[b].begin(), got[b].end(),
                           pattern.begin() + b * (64 << 10) + b))
        << b;
  }
  ASSERT_TRUE(ep->Wait(tickets.back()).ok());
  EXPECT_EQ(ep->outstanding(), 0u);
  for (size_t b = 0; b < got.size(); ++b) {
    ASSERT_TRUE(std::equal(got[b].begin(), got[b].end(),
                           pattern.begin() + b * (64 << 10) + b))
        << b;
  }
  EXPECT_EQ(ep->stats().round_trips, 7u);
}

TEST_P(ConformanceTest, ErrorInOneBatchLeavesEarlierBatchesIntact) {
  auto region = t().AllocateRegion(0, 1 << 16, "data");
  ASSERT_TRUE(region.ok());
  auto ep = *t().NewEndpoint();
  std::vector<uint64_t> values(64), first(64, 0), last(64, 0);
  for (int i = 0; i < 64; ++i) values[i] = 5000 + i;
  for (int i = 0; i < 64; ++i) ep->Write(0, region->id, 8 * i, &values[i], 8);
  ASSERT_TRUE(ep->Flush().ok());
  for (int i = 0; i < 64; ++i) ep->Read(0, region->id, 8 * i, &first[i], 8);
  const uint64_t good = ep->Post();
  char buf[16];
  ep->Read(0, region->id, 0, buf, 8);
  ep->Read(0, region->id, (1 << 16) - 4, buf, 8);  // out of bounds
  const uint64_t bad = ep->Post();
  for (int i = 0; i < 64; ++i) ep->Read(0, region->id, 8 * i, &last[i], 8);
  const uint64_t after = ep->Post();
  EXPECT_TRUE(ep->Wait(good).ok());
  EXPECT_EQ(first, values);
  EXPECT_EQ(ep->Wait(bad).code(), absl::StatusCode::kOutOfRange);
  // The batch after the error either completed correctly or failed (tcp
  // drops its connections after an error); it never returns wrong bytes.
  if (ep->Wait(after).ok()) {
    EXPECT_EQ(last, values);
  }
  // And the endpoint works again.
  std::vector<uint64_t> again(64, 0);
  for (int i = 0; i < 64; ++i) ep->Read(0, region->id, 8 * i, &again[i], 8);
  ASSERT_TRUE(ep->Flush().ok());
  EXPECT_EQ(again, values);
}

TEST_P(ConformanceTest, MaxInFlightCountsOnlyWhatOverlapped) {
  auto region = t().AllocateRegion(0, 1 << 20, "data");
  ASSERT_TRUE(region.ok());
  auto ep = *t().NewEndpoint();
  EXPECT_EQ(ep->TakeMaxInFlight(), 0u);  // nothing ran yet
  // One batch at a time is one in flight, on every backend.
  std::vector<char> buf(1 << 20);
  for (int k = 0; k < 3; ++k) {
    ep->Read(0, region->id, 0, buf.data(), 4096);
    ASSERT_TRUE(ep->Flush().ok());
  }
  EXPECT_EQ(ep->TakeMaxInFlight(), 1u);
  EXPECT_EQ(ep->TakeMaxInFlight(), 0u);
  // Four posted before waiting: at most four, and at least one. (A
  // synchronous backend says 1: each ran inside its Post.)
  std::vector<uint64_t> tickets;
  for (int b = 0; b < 4; ++b) {
    ep->Read(0, region->id, b * (256 << 10), buf.data() + b * (256 << 10),
             256 << 10);
    tickets.push_back(ep->Post());
  }
  const uint64_t seen = ep->TakeMaxInFlight();
  EXPECT_GE(seen, 1u);
  EXPECT_LE(seen, 4u);
  if (GetParam() == "local") {
    EXPECT_EQ(seen, 1u);
  }
  ASSERT_TRUE(ep->Wait(tickets.back()).ok());
  EXPECT_LE(ep->TakeMaxInFlight(), 4u);  // what was still in flight then
  EXPECT_EQ(ep->TakeMaxInFlight(), 0u);  // idle since
}

// Small and large WRITEs mixed in one batch (tcp copies the small ones'
// bytes together and sends the large ones from their buffers; the server
// serves a run of WRITEs at once): every byte lands where its WRITE said.
TEST_P(ConformanceTest, MixedWriteSizesInOneBatchLandInOrder) {
  auto region = t().AllocateRegion(0, 1 << 16, "data");
  ASSERT_TRUE(region.ok());
  auto ep = *t().NewEndpoint();
  const std::vector<uint32_t> sizes = {4, 300, 4, 8, 1000, 255, 256, 4, 1, 7};
  std::vector<std::vector<uint8_t>> data;
  uint64_t at = 0;
  std::vector<uint64_t> offsets;
  for (size_t k = 0; k < sizes.size(); ++k) {
    data.emplace_back(sizes[k]);
    for (uint32_t b = 0; b < sizes[k]; ++b) data[k][b] = k * 37 + b;
    offsets.push_back(at);
    ep->Write(0, region->id, at, data[k].data(), sizes[k]);
    at += sizes[k] + 3;  // a gap between
  }
  // The same bytes of the first WRITE again at the end, changed: order.
  std::vector<uint8_t> again = {9, 9, 9, 9};
  ep->Write(0, region->id, 0, again.data(), 4);
  ASSERT_TRUE(ep->Flush().ok());
  data[0] = again;
  for (size_t k = 0; k < sizes.size(); ++k) {
    std::vector<uint8_t> back(sizes[k]);
    ep->Read(0, region->id, offsets[k], back.data(), sizes[k]);
    ASSERT_TRUE(ep->Flush().ok());
    EXPECT_EQ(back, data[k]) << "write " << k;
  }
  // A bad WRITE in a run of them fails the batch naming it.
  uint32_t x = 1;
  for (int k = 0; k < 5; ++k) {
    ep->Write(0, region->id, k == 3 ? (1 << 16) : 4 * k, &x, 4);
  }
  absl::Status s = ep->Flush();
  EXPECT_FALSE(s.ok());
  if (GetParam() == "tcp") {
    EXPECT_NE(s.message().find("operation 3"), std::string::npos) << s;
  }
}

// A region allocated with a fill starts as its pattern, element after
// element (a state array's initial values, set by the memory node).
TEST_P(ConformanceTest, FilledRegionsStartAsTheirPattern) {
  auto ep = *t().NewEndpoint();
  for (uint32_t width : {1u, 2u, 4u, 8u}) {
    const uint64_t pattern = 0x0123456789abcdefull;
    const uint64_t bytes = 200008;  // not a multiple of the fill's pieces
    auto r = t().AllocateFilledRegion(0, bytes, "filled", {width, pattern});
    ASSERT_TRUE(r.ok()) << r.status();
    std::vector<uint8_t> back(bytes);
    ep->Read(0, r->id, 0, back.data(), bytes);
    ASSERT_TRUE(ep->Flush().ok());
    for (uint64_t at = 0; at < bytes; ++at) {
      ASSERT_EQ(back[at], (pattern >> (8 * (at % width))) & 0xff)
          << "width " << width << " byte " << at;
    }
    ASSERT_TRUE(t().FreeRegion(0, r->id).ok());
  }
  // Width 0: zeros, as a plain allocation.
  auto zero = t().AllocateFilledRegion(0, 4096, "zero", {0, 77});
  ASSERT_TRUE(zero.ok());
  std::vector<uint8_t> back(4096, 1);
  ep->Read(0, zero->id, 0, back.data(), back.size());
  ASSERT_TRUE(ep->Flush().ok());
  EXPECT_EQ(back, std::vector<uint8_t>(4096, 0));
  // A width that is not an element size, or that does not divide the
  // region: InvalidArgument, nothing allocated.
  EXPECT_EQ(t().AllocateFilledRegion(0, 4096, "bad", {3, 1}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(t().AllocateFilledRegion(0, 4098, "bad", {4, 1}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(ConformanceTest, BoundsAndUnknownRegionsAreErrors) {
  auto region = t().AllocateRegion(0, 100, "small");
  ASSERT_TRUE(region.ok());
  auto ep = *t().NewEndpoint();
  char buf[200];
  ep->Read(0, region->id, 90, buf, 11);
  EXPECT_EQ(ep->Flush().code(), absl::StatusCode::kOutOfRange);
  ep->Write(0, region->id, 100, buf, 1);
  EXPECT_EQ(ep->Flush().code(), absl::StatusCode::kOutOfRange);
  ep->Read(0, region->id + 100, 0, buf, 1);
  EXPECT_EQ(ep->Flush().code(), absl::StatusCode::kNotFound);
  uint64_t old;
  ep->FetchAndAdd(0, region->id, 4, 1, &old);  // misaligned atomic
  EXPECT_FALSE(ep->Flush().ok());
  ep->Read(0, region->id, ~0ull - 5, buf, 10);  // offset overflow
  EXPECT_EQ(ep->Flush().code(), absl::StatusCode::kOutOfRange);
  ep->Read(7, region->id, 0, buf, 1);  // no such memory node
  EXPECT_FALSE(ep->Flush().ok());
  // The endpoint still works after errors.
  ep->Write(0, region->id, 0, "hello", 5);
  ep->Read(0, region->id, 0, buf, 5);
  ASSERT_TRUE(ep->Flush().ok());
  EXPECT_EQ(std::string(buf, 5), "hello");
  ASSERT_TRUE(t().FreeRegion(0, region->id).ok());
  ep->Read(0, region->id, 0, buf, 1);
  absl::Status after_free = ep->Flush();
  EXPECT_FALSE(after_free.ok());
  // Over RDMA the endpoint still holds the region's key; the NIC rejects the
  // revoked key (a remote access error), which is all one-sided access can
  // know. The other backends ask the memory node, which says NotFound.
  if (GetParam() != "rdma") {
    EXPECT_EQ(after_free.code(), absl::StatusCode::kNotFound);
  }
}

// FAA and CAS-loop increments on two counters; every increment must count.
void Hammer(transport::Transport& t, uint32_t region, int ops) {
  auto ep = *t.NewEndpoint();
  for (int k = 0; k < ops; ++k) {
    uint64_t old;
    ep->FetchAndAdd(0, region, 0, 1, &old);
    ASSERT_TRUE(ep->Flush().ok());
    uint64_t seen = 0;
    ep->Read(0, region, 8, &seen, 8);
    ASSERT_TRUE(ep->Flush().ok());
    while (true) {
      uint64_t prior;
      ep->CompareAndSwap(0, region, 8, seen, seen + 1, &prior);
      ASSERT_TRUE(ep->Flush().ok());
      if (prior == seen) break;
      seen = prior;
    }
  }
}

uint64_t Counter(transport::Transport& t, uint32_t region, int which) {
  auto ep = *t.NewEndpoint();
  uint64_t v = 0;
  ep->Read(0, region, 8 * which, &v, 8);
  EXPECT_TRUE(ep->Flush().ok());
  return v;
}

TEST_P(ConformanceTest, AtomicsUnderThreadContentionAreExact) {
  auto region = t().AllocateRegion(0, 64, "counters");
  ASSERT_TRUE(region.ok());
  const int threads = 4, ops = GetParam() == "rdma" ? 200 : 2000;
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i) {
    pool.emplace_back([&] { Hammer(t(), region->id, ops); });
  }
  for (auto& th : pool) th.join();
  EXPECT_EQ(Counter(t(), region->id, 0), uint64_t(threads) * ops);
  EXPECT_EQ(Counter(t(), region->id, 1), uint64_t(threads) * ops);
}

// Child-process half of the next test: runs only when re-executed with the
// environment set, against the parent's memory node.
TEST(ConformanceChild, Hammer) {
  const char* kind = std::getenv("DMG_CONFORMANCE_CHILD");
  if (kind == nullptr) GTEST_SKIP() << "runs only as a child process";
  auto t = Backend::Connect(kind, std::getenv("DMG_CONFORMANCE_ADDR"));
  ASSERT_TRUE(t.ok()) << t.status();
  Hammer(**t, std::atoi(std::getenv("DMG_CONFORMANCE_REGION")),
         std::atoi(std::getenv("DMG_CONFORMANCE_OPS")));
}

TEST_P(ConformanceTest, AtomicsUnderProcessContentionAreExact) {
  if (GetParam() == "local") GTEST_SKIP() << "local has no other processes";
  auto region = t().AllocateRegion(0, 64, "counters");
  ASSERT_TRUE(region.ok());
  const int processes = 3, ops = GetParam() == "rdma" ? 100 : 1000;
  std::vector<pid_t> children;
  for (int i = 0; i < processes; ++i) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      setenv("DMG_CONFORMANCE_CHILD", GetParam().c_str(), 1);
      setenv("DMG_CONFORMANCE_ADDR", backend_->address().c_str(), 1);
      setenv("DMG_CONFORMANCE_REGION", std::to_string(region->id).c_str(), 1);
      setenv("DMG_CONFORMANCE_OPS", std::to_string(ops).c_str(), 1);
      execl("/proc/self/exe", "child", "--gtest_filter=ConformanceChild.*",
            nullptr);
      _exit(127);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
  EXPECT_EQ(Counter(t(), region->id, 0), uint64_t(processes) * ops);
  EXPECT_EQ(Counter(t(), region->id, 1), uint64_t(processes) * ops);
}

TEST_P(ConformanceTest, PeerDeathIsAnErrorNotAHang) {
  if (GetParam() == "local") GTEST_SKIP() << "local memory cannot die";
  if (!backend_->can_kill()) {
    GTEST_SKIP() << "the memory node is another host's (" << backend_->address()
                 << "): this process cannot kill it";
  }
  auto region = t().AllocateRegion(0, 4096, "data");
  ASSERT_TRUE(region.ok());
  auto ep = *t().NewEndpoint();
  char buf[64];
  ep->Read(0, region->id, 0, buf, 64);
  ASSERT_TRUE(ep->Flush().ok());
  backend_->KillMemoryNode();
  auto start = std::chrono::steady_clock::now();
  ep->Read(0, region->id, 0, buf, 64);
  absl::Status s = ep->Flush();
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  EXPECT_FALSE(s.ok());
  EXPECT_LT(seconds, 10.0);
  EXPECT_NE(s.message().find("memory node"), std::string::npos) << s;
}

INSTANTIATE_TEST_SUITE_P(Backends, ConformanceTest,
                         ::testing::Values("local", "tcp", "rdma"),
                         [](const auto& info) { return info.param; });

TEST(GuardedMemoryDeathTest, StrayPointerFaults) {
  // The mechanism EngineTest.NoDirectAccessToMemoryNodeMemory relies on.
  memory_node::MemoryNode::Options options;
  options.guard_memory = true;
  EXPECT_DEATH(
      {
        memory_node::MemoryNode node(0, options);
        AlignedBuffer buffer(8192);
        volatile std::byte* stray = buffer.data();
        ASSERT_TRUE(node.AddRegion(std::move(buffer), "r").ok());
        std::byte x = stray[100];  // must fault: the region is PROT_NONE
        (void)x;
      },
      "");
  memory_node::MemoryNode node(0, options);
  transport::LocalTransport t({&node});
  auto r = t.AllocateRegion(0, 8192, "r");
  ASSERT_TRUE(r.ok());
  auto ep = *t.NewEndpoint();
  uint64_t v = 42, back = 0;
  ep->Write(0, r->id, 64, &v, 8);
  ep->Read(0, r->id, 64, &back, 8);
  ASSERT_TRUE(ep->Flush().ok());
  EXPECT_EQ(back, 42u);
}

TEST(MemoryNodeTest, CapacityAndRegionTable) {
  memory_node::MemoryNode::Options options;
  options.capacity_bytes = 1000;
  memory_node::MemoryNode node(0, options);
  transport::LocalTransport t({&node});
  auto a = t.AllocateRegion(0, 600, "a");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(t.AllocateRegion(0, 600, "b").status().code(),
            absl::StatusCode::kResourceExhausted);
  auto list = t.ListRegions(0);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].name, "a");
  ASSERT_TRUE(t.FreeRegion(0, a->id).ok());
  EXPECT_TRUE(t.AllocateRegion(0, 900, "c").ok());
  EXPECT_FALSE(t.AllocateRegion(1, 10, "x").ok());  // no node 1
  EXPECT_FALSE(t.AllocateRegion(0, 0, "empty").ok());
}

}  // namespace
}  // namespace dmg

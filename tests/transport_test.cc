// The local transport and the memory node behind it: data moves by copy with
// bounds checks, atomics are atomic under contention, every operation is
// counted, and guarded memory really is inaccessible to stray pointers.
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "memory_node/memory_node.h"
#include "transport/local_transport.h"

namespace dmg {
namespace {

using memory_node::MemoryNode;
using transport::LocalTransport;

TEST(LocalTransportTest, ReadWriteManySizesAndAlignments) {
  MemoryNode node(0);
  LocalTransport t({&node});
  auto region = t.AllocateRegion(0, 1 << 16, "data");
  ASSERT_TRUE(region.ok());
  auto ep = t.NewEndpoint();
  ASSERT_TRUE(ep.ok());
  std::vector<uint8_t> pattern(1 << 16);
  for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = i * 131 + 7;
  (*ep)->Write(0, region->id, 0, pattern.data(), pattern.size());
  ASSERT_TRUE((*ep)->Flush().ok());
  for (uint32_t size : {1u, 3u, 8u, 63u, 4096u, 40000u}) {
    for (uint64_t offset : {0ull, 1ull, 7ull, 4095ull}) {
      std::vector<uint8_t> got(size);
      (*ep)->Read(0, region->id, offset, got.data(), size);
      ASSERT_TRUE((*ep)->Flush().ok());
      EXPECT_TRUE(std::equal(got.begin(), got.end(), pattern.begin() + offset))
          << size << "@" << offset;
    }
  }
  // A batch is one round trip.
  uint64_t trips = (*ep)->stats().round_trips;
  uint8_t a, b;
  (*ep)->Read(0, region->id, 5, &a, 1);
  (*ep)->Read(0, region->id, 6, &b, 1);
  ASSERT_TRUE((*ep)->Flush().ok());
  EXPECT_EQ((*ep)->stats().round_trips, trips + 1);
  EXPECT_EQ(a, pattern[5]);
  EXPECT_EQ(b, pattern[6]);
}

TEST(LocalTransportTest, BoundsAndUnknownRegionsAreErrors) {
  MemoryNode node(0);
  LocalTransport t({&node});
  auto region = t.AllocateRegion(0, 100, "small");
  ASSERT_TRUE(region.ok());
  auto ep = *t.NewEndpoint();
  char buf[200];
  ep->Read(0, region->id, 90, buf, 11);
  EXPECT_EQ(ep->Flush().code(), absl::StatusCode::kOutOfRange);
  ep->Read(0, region->id + 7, 0, buf, 1);
  EXPECT_EQ(ep->Flush().code(), absl::StatusCode::kNotFound);
  ep->Read(3, region->id, 0, buf, 1);
  EXPECT_FALSE(ep->Flush().ok());
  uint64_t old;
  ep->FetchAndAdd(0, region->id, 4, 1, &old);  // misaligned atomic
  EXPECT_FALSE(ep->Flush().ok());
  ep->Read(0, region->id, ~0ull - 5, buf, 10);  // offset overflow
  EXPECT_EQ(ep->Flush().code(), absl::StatusCode::kOutOfRange);
  ASSERT_TRUE(t.FreeRegion(0, region->id).ok());
  ep->Read(0, region->id, 0, buf, 1);
  EXPECT_EQ(ep->Flush().code(), absl::StatusCode::kNotFound);
}

TEST(LocalTransportTest, AtomicsUnderContentionAreExact) {
  MemoryNode node(0);
  LocalTransport t({&node});
  auto region = t.AllocateRegion(0, 64, "counters");
  ASSERT_TRUE(region.ok());
  constexpr int kThreads = 4, kOps = 5000;
  std::vector<std::thread> threads;
  std::vector<uint64_t> cas_wins(kThreads, 0);
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      auto ep = *t.NewEndpoint();
      for (int k = 0; k < kOps; ++k) {
        uint64_t old;
        ep->FetchAndAdd(0, region->id, 0, 1, &old);
        ASSERT_TRUE(ep->Flush().ok());
        // CAS increment of the second counter: retry until it wins.
        uint64_t seen = 0;
        ep->Read(0, region->id, 8, &seen, 8);
        ASSERT_TRUE(ep->Flush().ok());
        while (true) {
          uint64_t prior;
          ep->CompareAndSwap(0, region->id, 8, seen, seen + 1, &prior);
          ASSERT_TRUE(ep->Flush().ok());
          if (prior == seen) break;
          seen = prior;
        }
        ++cas_wins[i];
      }
    });
  }
  for (auto& th : threads) th.join();
  auto ep = *t.NewEndpoint();
  uint64_t counters[2];
  ep->Read(0, region->id, 0, counters, 16);
  ASSERT_TRUE(ep->Flush().ok());
  EXPECT_EQ(counters[0], uint64_t{kThreads} * kOps);
  EXPECT_EQ(counters[1], uint64_t{kThreads} * kOps);
}

TEST(LocalTransportTest, ListAndFreeRegions) {
  MemoryNode node(0);
  LocalTransport t({&node});
  auto a = t.AllocateRegion(0, 10, "a");
  auto b = t.AllocateRegion(0, 20, "b");
  ASSERT_TRUE(a.ok() && b.ok());
  auto list = t.ListRegions(0);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[1].name, "b");
  EXPECT_EQ((*list)[1].length, 20u);
  EXPECT_FALSE(t.AllocateRegion(1, 10, "x").ok());
  EXPECT_FALSE(t.AllocateRegion(0, 0, "empty").ok());
}

TEST(GuardedMemoryDeathTest, StrayPointerFaults) {
  // The mechanism the engine's no-direct-access test relies on.
  MemoryNode::Options options;
  options.guard_memory = true;
  EXPECT_DEATH(
      {
        MemoryNode node(0, options);
        AlignedBuffer buffer(8192);
        volatile std::byte* stray = buffer.data();
        ASSERT_TRUE(node.AddRegion(std::move(buffer), "r").ok());
        std::byte x = stray[100];  // must fault: the region is PROT_NONE
        (void)x;
      },
      "");
  // And the node itself can still serve it.
  MemoryNode node(0, options);
  LocalTransport t({&node});
  auto r = t.AllocateRegion(0, 8192, "r");
  ASSERT_TRUE(r.ok());
  auto ep = *t.NewEndpoint();
  uint64_t v = 42, back = 0;
  ep->Write(0, r->id, 64, &v, 8);
  ep->Read(0, r->id, 64, &back, 8);
  ASSERT_TRUE(ep->Flush().ok());
  EXPECT_EQ(back, 42u);
}

}  // namespace
}  // namespace dmg

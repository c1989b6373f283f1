// The push outboxes: whatever mix of list and dense mode the workers end up
// in, CombineOutboxes gives each target the combine of its updates, sorted
// by target, checked against a std::map fold; outboxes come back empty and
// reusable, and a list switches to dense only past its threshold.
#include "coordinator/outbox.h"

#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <span>
#include <vector>

#include "compute_node/updates.h"
#include "gtest/gtest.h"

namespace dmg::coordinator {
namespace {

using compute::Add;
using compute::Claim;
using compute::Max;
using compute::Min;
using store::VertexId;

template <typename Op, typename T>
std::map<VertexId, T> Fold(
    const std::vector<std::vector<RemoteUpdate<T>>>& in) {
  std::map<VertexId, T> want;
  for (const auto& worker : in) {
    for (const RemoteUpdate<T>& u : worker) {
      auto [it, fresh] = want.try_emplace(u.v, u.x);
      if (!fresh) it->second = Op::Combine(it->second, u.x);
    }
  }
  return want;
}

template <typename Op, typename T>
void CheckRound(std::vector<UpdateOutbox>& boxes, CombineScratch& scratch,
                uint64_t n, const std::vector<uint64_t>& per_worker,
                uint64_t span, std::mt19937_64& rng) {
  std::vector<std::vector<RemoteUpdate<T>>> made(boxes.size());
  for (auto& b : boxes) b.Reset(n);
  for (size_t w = 0; w < boxes.size(); ++w) {
    for (uint64_t k = 0; k < per_worker[w]; ++k) {
      const auto v = static_cast<VertexId>(rng() % span);
      const T x = static_cast<T>(rng() % 1000);
      made[w].push_back({v, x});
      boxes[w].Add<Op, T>(v, x);
    }
  }
  std::map<VertexId, T> want = Fold<Op>(made);
  std::span<const RemoteUpdate<T>> got =
      CombineOutboxes<Op, T>(std::span<UpdateOutbox>(boxes), scratch);
  ASSERT_EQ(got.size(), want.size());
  size_t k = 0;
  for (const auto& [v, x] : want) {
    EXPECT_EQ(got[k].v, v);
    EXPECT_EQ(got[k].x, x) << "vertex " << v;
    ++k;
  }
  for (auto& b : boxes) EXPECT_TRUE(b.empty());
}

TEST(OutboxTest, EveryMixOfListAndDenseCombinesLikeAMapFold) {
  std::mt19937_64 rng(7);
  const uint64_t n = 10000;
  std::vector<UpdateOutbox> boxes(3);
  CombineScratch scratch;
  // Rounds reuse the same outboxes and scratch: sparse and scattered (the
  // stable sort), many over a small span (the span accumulator), one worker
  // dense, all dense, and back to sparse.
  const std::vector<std::vector<uint64_t>> rounds = {
      {5, 0, 7}, {3000, 2000, 10}, {40000, 3, 0}, {30000, 30000, 30000},
      {2, 1, 0}, {0, 0, 0}};
  for (const auto& per_worker : rounds) {
    for (uint64_t span : {uint64_t{n}, uint64_t{200}}) {
      CheckRound<Min, uint32_t>(boxes, scratch, n, per_worker, span, rng);
      CheckRound<Add, uint64_t>(boxes, scratch, n, per_worker, span, rng);
      CheckRound<Max, int32_t>(boxes, scratch, n, per_worker, span, rng);
    }
  }
}

// Scratch that grows between steps must come back zeroed: the heap hands
// out memory other code has written (here: garbage freed just before).
TEST(OutboxTest, GrowingScratchStartsClean) {
  std::mt19937_64 rng(11);
  const uint64_t n = 1 << 18;
  std::vector<UpdateOutbox> boxes(2);
  CombineScratch scratch;
  for (uint64_t span :
       {uint64_t{64}, uint64_t{4096}, uint64_t{60000}, uint64_t{200000}}) {
    for (uint64_t bytes : {span, span * 2, span * 8}) {
      std::vector<uint8_t> junk(bytes, 0xA5);
      asm volatile("" : : "r"(junk.data()) : "memory");
    }
    CheckRound<Min, int64_t>(boxes, scratch, n, {span / 3, span / 3}, span,
                             rng);
  }
}

TEST(OutboxTest, HugeBufferGrowsZeroedWhenAskedTo) {
  HugeBuffer b;
  for (size_t bytes : {size_t{100}, size_t{5000}, size_t{3} << 20}) {
    b.ReserveZeroed(bytes);
    ASSERT_GE(b.bytes(), bytes);
    for (size_t i = 0; i < b.bytes(); ++i) {
      ASSERT_EQ(b.data()[i], std::byte{0}) << bytes << " at " << i;
    }
    std::memset(b.data(), 0xA5, b.bytes());  // dirty, as a careless user
  }
  // Growing with Reserve keeps the first `keep` bytes.
  HugeBuffer c;
  c.Reserve(16);
  std::memset(c.data(), 7, 16);
  c.Reserve(size_t{2} << 20, 16);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(c.data()[i], std::byte{7});
}

TEST(OutboxTest, FirstWinsKeepsTheFirstUpdateOfAListWorker) {
  const uint64_t n = 1000;
  std::vector<UpdateOutbox> boxes(1);
  CombineScratch scratch;
  boxes[0].Reset(n);
  boxes[0].Add<Claim, int32_t>(9, 1);
  boxes[0].Add<Claim, int32_t>(9, 2);
  boxes[0].Add<Claim, int32_t>(4, 3);
  std::span<const RemoteUpdate<int32_t>> got =
      CombineOutboxes<Claim, int32_t>(std::span<UpdateOutbox>(boxes), scratch);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].v, 4u);
  EXPECT_EQ(got[1].v, 9u);
  EXPECT_EQ(got[1].x, 1);
}

TEST(OutboxTest, TurnsDenseOnlyPastAQuarterOfTheDenseSize) {
  const uint64_t n = 1 << 16;
  UpdateOutbox box;
  box.Reset(n);
  // Dense: n * 4 bytes of values + n / 8 of bits; a list entry is 8 bytes.
  const uint64_t dense_bytes = n * 4 + n / 8;
  const uint64_t switch_at = dense_bytes / 4 / 8;
  for (uint64_t k = 0; k + 1 < switch_at; ++k) {
    box.Add<Min, uint32_t>(static_cast<VertexId>(k % n), 1);
  }
  EXPECT_FALSE(box.dense());
  for (uint64_t k = 0; k < 2; ++k) box.Add<Min, uint32_t>(0, 1);
  EXPECT_TRUE(box.dense());
  box.Reset(n);
  EXPECT_FALSE(box.dense());
  EXPECT_TRUE(box.empty());
}

}  // namespace
}  // namespace dmg::coordinator

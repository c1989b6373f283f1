// The claim filter's log (compute_node/claim_log.h) on its own: the bits,
// the bounded log, merging into fetched pages, and the commits' WRITEs
// (runs across unset gaps, the previous commit's sent again but where its
// page was written back).
#include "compute_node/claim_log.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace dmg::compute {
namespace {

constexpr uint64_t kPage = 4096;
constexpr int32_t kInitial = -1;

void Init(ClaimLog& log, uint64_t elements, uint64_t cap) {
  uint64_t initial = 0;
  std::memcpy(&initial, &kInitial, 4);
  log.Init(elements, 4, kPage, cap, initial);
}

// Takes element i and logs x for it, as a claim on an uncached page does.
void Claim(ClaimLog& log, uint64_t i, int32_t x) {
  ASSERT_TRUE(log.Take(i));
  ASSERT_TRUE(log.Log(i, &x));
}

// A commit's WRITEs; pages `written_back` says were sent whole are left
// out of the previous commit's.
std::vector<ClaimLog::Write> Plan(
    ClaimLog& log, const std::function<bool(uint64_t)>& written_back =
                       [](uint64_t) { return false; }) {
  std::vector<ClaimLog::Write> writes;
  log.PlanCommit(written_back,
                 [&](const ClaimLog::Write& w) { writes.push_back(w); });
  return writes;
}

// What the WRITEs put where: element index -> value (4-byte elements).
std::map<uint64_t, int32_t> Apply(const std::vector<ClaimLog::Write>& writes) {
  std::map<uint64_t, int32_t> out;
  for (const ClaimLog::Write& w : writes) {
    EXPECT_EQ(w.offset % 4, 0u);
    EXPECT_EQ(w.length % 4, 0u);
    for (uint64_t b = 0; b < w.length; b += 4) {
      int32_t x;
      std::memcpy(&x, w.bytes + b, 4);
      out[(w.offset + b) / 4] = x;
    }
  }
  return out;
}

TEST(ClaimLogTest, BitsTakeOnceAndStayExact) {
  ClaimLog log;
  Init(log, 100, 16);
  ASSERT_TRUE(log.enabled());
  for (uint64_t i = 0; i < 100; ++i) EXPECT_TRUE(log.Unset(i)) << i;
  // Many takers, one winner per element.
  std::vector<int> wins(100, 0);
  std::vector<std::thread> threads;
  std::vector<std::vector<uint64_t>> won(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (uint64_t i = 0; i < 100; ++i) {
        if (log.Take(i)) won[t].push_back(i);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const auto& w : won) {
    for (uint64_t i : w) ++wins[i];
  }
  for (uint64_t i = 0; i < 100; ++i) {
    EXPECT_EQ(wins[i], 1) << i;
    EXPECT_FALSE(log.Unset(i));
  }
  log.SetUnset(7, true);
  EXPECT_TRUE(log.Unset(7));
  EXPECT_FALSE(log.Unset(8));
}

TEST(ClaimLogTest, TheLogIsBoundedAndMergesIntoFetchedPages) {
  ClaimLog log;
  Init(log, 3000, 3);  // pages of 1024 elements
  const int32_t a = 5, b = 6, c = 7, d = 8;
  EXPECT_TRUE(log.Log(10, &a));
  EXPECT_TRUE(log.Log(1500, &b));
  EXPECT_TRUE(log.Log(20, &c));
  EXPECT_FALSE(log.Log(30, &d)) << "past the cap: the caller pages it in";
  EXPECT_EQ(log.entries(), 3u);
  EXPECT_TRUE(log.Logged(0));
  EXPECT_TRUE(log.Logged(1));
  EXPECT_FALSE(log.Logged(2));
  std::vector<int32_t> page(1024, kInitial);
  std::vector<uint64_t> dirty;
  EXPECT_TRUE(log.Merge(0, reinterpret_cast<std::byte*>(page.data()),
                        [&](uint64_t i) { dirty.push_back(i); }));
  EXPECT_EQ(page[10], 5);
  EXPECT_EQ(page[20], 7);
  EXPECT_EQ(page[11], kInitial);
  std::sort(dirty.begin(), dirty.end());  // in no particular order
  EXPECT_EQ(dirty, (std::vector<uint64_t>{10, 20}));
  EXPECT_FALSE(log.Logged(0));
  // Merged entries keep their slots until the commit.
  EXPECT_EQ(log.entries(), 3u);
  EXPECT_FALSE(log.Log(30, &d));
  EXPECT_EQ(Apply(Plan(log)), (std::map<uint64_t, int32_t>{{1500, 6}}))
      << "merged entries went with their page";
  log.Rotate();
  EXPECT_EQ(log.entries(), 0u);
  EXPECT_TRUE(log.Log(30, &d));
}

TEST(ClaimLogTest, ASuperstepEndSaysWhenTheNextMayFillTheLog) {
  ClaimLog log;
  Init(log, 100000, 100);
  int32_t x = 1;
  for (uint64_t i = 0; i < 30; ++i) ASSERT_TRUE(log.Log(i * 7, &x));
  EXPECT_FALSE(log.EndSuperstep());  // 30 + 30 <= 100
  for (uint64_t i = 0; i < 20; ++i) ASSERT_TRUE(log.Log(5000 + i * 7, &x));
  EXPECT_FALSE(log.EndSuperstep());  // 50 + 30 <= 100
  for (uint64_t i = 0; i < 25; ++i) ASSERT_TRUE(log.Log(9000 + i * 7, &x));
  EXPECT_TRUE(log.EndSuperstep());  // 75 + 30 > 100
  Plan(log);
  log.Rotate();
  EXPECT_FALSE(log.EndSuperstep());
}

TEST(ClaimLogTest, RunsPastTheValueBytesAreWrittenEntryByEntry) {
  ClaimLog log;
  // Cap 4: 32 bytes of run values, room for two runs of 3 elements (12
  // bytes each) but not a third.
  Init(log, 3000, 4);
  auto claim = [&](uint64_t i, int32_t x) { Claim(log, i, x); };
  claim(0, 1);
  claim(2, 2);
  claim(1030, 3);
  claim(1032, 4);
  EXPECT_EQ(Plan(log).size(), 2u);
  log.Rotate();
  // Next commit: the two old runs again (24 bytes) and a new one of 3
  // elements, which no longer fits: two single WRITEs.
  for (uint64_t i : {2000, 2002}) claim(i, static_cast<int32_t>(i));
  const std::vector<ClaimLog::Write> writes = Plan(log);
  EXPECT_EQ(writes.size(), 4u);
  EXPECT_EQ(Apply(writes), (std::map<uint64_t, int32_t>{{0, 1},
                                                        {1, kInitial},
                                                        {2, 2},
                                                        {1030, 3},
                                                        {1031, kInitial},
                                                        {1032, 4},
                                                        {2000, 2000},
                                                        {2002, 2002}}));
}

TEST(ClaimLogTest, CommitsWriteRunsAndSendThePreviousOnesAgain) {
  ClaimLog log;
  Init(log, 3000, 64);
  auto claim = [&](uint64_t i, int32_t x) { Claim(log, i, x); };
  // 10 and 12: one element apart (4 bytes), 11 unset: one run. 20: 28
  // bytes past 12, a run of its own. 30 and 32 with 31 taken (its value is
  // in a frame, not known here): two runs. 1500: page 1.
  claim(10, 100);
  claim(12, 120);
  claim(20, 200);
  claim(30, 300);
  ASSERT_TRUE(log.Take(31));
  claim(32, 320);
  claim(1500, 1500);
  std::vector<ClaimLog::Write> writes = Plan(log);
  ASSERT_EQ(writes.size(), 5u);
  EXPECT_EQ(writes[0].offset, 10u * 4);
  EXPECT_EQ(writes[0].length, 3u * 4);
  const std::map<uint64_t, int32_t> first = Apply(writes);
  EXPECT_EQ(first, (std::map<uint64_t, int32_t>{{10, 100},
                                                {11, kInitial},
                                                {12, 120},
                                                {20, 200},
                                                {30, 300},
                                                {32, 320},
                                                {1500, 1500}}));
  // Cached frames take the values.
  std::vector<int32_t> frame0(1024, kInitial);
  log.Committed([&](uint64_t p) {
    return p == 0 ? reinterpret_cast<std::byte*>(frame0.data()) : nullptr;
  });
  EXPECT_EQ(frame0[12], 120);
  log.Rotate();
  // The previous superstep's lines on page 0: elements 10-32 are bytes
  // 40-131, lines 0-2; none elsewhere.
  EXPECT_EQ(log.PrevLines(0), 0b111u);
  EXPECT_EQ(log.PrevLines(1), uint64_t{1} << (1500 * 4 % kPage / 64));
  EXPECT_EQ(log.PrevLines(2), 0u);
  // The next commit: 11 is claimed now (in the previous run's gap) and
  // 40 is new. Page 1 was written back whole in this superstep: its old
  // run is not sent again; page 0's are (cut at 11, sent with its new
  // value among this commit's).
  claim(11, 110);
  claim(40, 400);
  writes = Plan(log, [](uint64_t p) { return p == 1; });
  const std::map<uint64_t, int32_t> second = Apply(writes);
  EXPECT_EQ(second, (std::map<uint64_t, int32_t>{{10, 100},
                                                 {11, 110},
                                                 {12, 120},
                                                 {20, 200},
                                                 {30, 300},
                                                 {32, 320},
                                                 {40, 400}}));
  log.Committed([](uint64_t) { return nullptr; });
  log.Rotate();
  // The third commit sends the second's claims again, and nothing older.
  EXPECT_EQ(Apply(Plan(log)),
            (std::map<uint64_t, int32_t>{{11, 110}, {40, 400}}));
}

}  // namespace
}  // namespace dmg::compute

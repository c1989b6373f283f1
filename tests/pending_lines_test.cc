// Lazy refresh's bookkeeping (compute_node/pending_lines.h) on its own:
// which buffer a pending line is READ from, and why the bits are cleared
// old first.
#include "compute_node/pending_lines.h"

#include <atomic>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace dmg::compute {
namespace {

using Source = PendingLines::Source;

TEST(PendingLinesTest, AnnouncedNowReadFromTheOpenBufferThenTheFinishedOne) {
  PendingLines p(200);  // 4 words, the last partly used
  EXPECT_EQ(p.words(), 4u);
  p.Mark(60, 10);    // lines 60-69: across a word boundary
  p.Mark(195, 100);  // clipped at the last line
  EXPECT_EQ(p.Count(), 15u);
  EXPECT_EQ(p.Choose(60), Source::kOpen);
  EXPECT_EQ(p.Choose(69), Source::kOpen);
  EXPECT_EQ(p.Choose(70), Source::kNone);
  EXPECT_FALSE(p.IsPending(59));
  EXPECT_TRUE(p.IsPending(199));
  // The superstep ends: what is left comes from the finished version.
  p.EndSuperstep();
  EXPECT_EQ(p.Choose(60), Source::kFinished);
  EXPECT_EQ(p.now(0), 0u);
  // Announced again in the next superstep: the open buffer again.
  p.Mark(61, 1);
  EXPECT_EQ(p.Choose(61), Source::kOpen);
  EXPECT_EQ(p.Choose(62), Source::kFinished);
  // READ: gone from both sets.
  const uint64_t bit = uint64_t{1} << 61;
  p.Clear(0, bit, bit);
  EXPECT_EQ(p.Choose(61), Source::kNone);
  EXPECT_EQ(p.Count(), 14u);
}

// Workers race for a line pending in both sets (`now` and `old`): one READs
// it and clears it, old bit first. Whoever looks at the bits at any moment
// must never be told to READ the finished version while the open one
// holds the line: a kFinished answer may only come from an old bit whose
// now bit was never set.
TEST(PendingLinesTest, ClearingOldFirstNeverSendsAReaderToTheStaleBuffer) {
  for (int round = 0; round < 100; ++round) {
    PendingLines p(64);
    p.Mark(5, 1);
    p.EndSuperstep();  // old set
    p.Mark(5, 1);      // and now set: the open buffer holds the line
    std::atomic<bool> go{false}, stale{false};
    std::thread clearer([&] {
      while (!go.load()) {
      }
      const uint64_t bit = uint64_t{1} << 5;
      p.Clear(0, bit, bit);
    });
    std::thread reader([&] {
      go.store(true);
      for (int k = 0; k < 1000; ++k) {
        if (p.Choose(5) == Source::kFinished) stale.store(true);
      }
    });
    clearer.join();
    reader.join();
    EXPECT_FALSE(stale.load()) << "round " << round;
    EXPECT_EQ(p.Choose(5), Source::kNone);
  }
}

}  // namespace
}  // namespace dmg::compute

// Runs of changed lines and the packing of line flags
// (compute_node/line_runs.h), against a line-by-line reference.
#include "compute_node/line_runs.h"

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace dmg::compute {
namespace {

using Runs = std::vector<std::pair<uint64_t, uint64_t>>;

// The reference: walk the lines one by one; a set line within `gap` of the
// open run's end joins it.
Runs Reference(const std::vector<uint64_t>& words, uint64_t gap) {
  Runs runs;
  for (uint64_t line = 0; line < words.size() * 64; ++line) {
    if (!((words[line / 64] >> (line % 64)) & 1)) continue;
    if (!runs.empty() && line <= runs.back().second + gap) {
      runs.back().second = line + 1;
    } else {
      runs.push_back({line, line + 1});
    }
  }
  return runs;
}

TEST(LineRunsTest, RunsMergeAcrossShortGapsOnly) {
  std::mt19937_64 rng(7);
  for (uint64_t gap : {0, 1, 3, 70}) {
    for (int round = 0; round < 200; ++round) {
      std::vector<uint64_t> words(4);
      for (uint64_t& w : words) {
        // Sparse, dense and empty words.
        const int kind = static_cast<int>(rng() % 3);
        w = kind == 0   ? rng() & rng() & rng()
            : kind == 1 ? ~(rng() & rng())
                        : 0;
      }
      Runs got;
      LineRuns runs(gap, [&](uint64_t b, uint64_t e) {
        got.push_back({b, e});
      });
      for (size_t k = 0; k < words.size(); ++k) runs.Add(64 * k, words[k]);
      runs.Finish();
      EXPECT_EQ(got, Reference(words, gap)) << "gap " << gap;
    }
  }
}

TEST(LineRunsTest, NoBridgeKeepsTheseLinesApartFromTheirNeighbours) {
  Runs got;
  LineRuns runs(3, [&](uint64_t b, uint64_t e) { got.push_back({b, e}); });
  runs.Add(0, uint64_t{1} << 62);         // line 62
  runs.Add(64, 0b101, /*bridge=*/false);  // lines 64 and 66: no bridging
  runs.Add(128, 0b1);                     // line 128
  runs.Finish();
  EXPECT_EQ(got, (Runs{{62, 63}, {64, 65}, {66, 67}, {128, 129}}));
  // A run starting at line 0 is a run like any other.
  got.clear();
  runs.Add(0, 0b11);
  runs.Finish();
  EXPECT_EQ(got, (Runs{{0, 2}}));
}

TEST(LineRunsTest, PackedFlagsAreTheirBitmap) {
  std::mt19937_64 rng(11);
  for (int round = 0; round < 500; ++round) {
    uint8_t flags[64];
    uint64_t want = 0;
    for (int i = 0; i < 64; ++i) {
      flags[i] = (rng() % 4 == 0) ? 1 : 0;
      want |= uint64_t{flags[i]} << i;
    }
    EXPECT_EQ(PackLineFlags(flags), want);
  }
}

}  // namespace
}  // namespace dmg::compute

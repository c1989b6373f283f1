// Stage 1's split between a compute node's CPU threads and its GPU
// (workload/gpu_share.h), with faked calibration timings: the share
// follows the measured rates, is bounded, and refuses what was not
// measured; the cut gives the GPU that share of the range's cost.
#include "workload/gpu_share.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gpu/device.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace dmg::workload {
namespace {

TEST(GpuShareTest, TheShareFollowsTheMeasuredRates) {
  // CPU: 2e8 units in 1 s; GPU: 6e8 units in 1 s -> 3/4 to the GPU.
  GpuShare s = ShareFromCalibration({2e8, 1.0, 6e8, 1.0});
  EXPECT_TRUE(s.reason.empty()) << s.reason;
  EXPECT_DOUBLE_EQ(s.cpu_rate, 2e8);
  EXPECT_DOUBLE_EQ(s.gpu_rate, 6e8);
  EXPECT_NEAR(s.share, 0.75, 1e-12);
  // The same rates from samples of other sizes and times.
  s = ShareFromCalibration({1e6, 0.005, 3e7, 0.05});
  EXPECT_NEAR(s.share, 6e8 / (2e8 + 6e8), 1e-12);
  // A slow GPU (copies dominate) still gets its due...
  s = ShareFromCalibration({1e9, 1.0, 1e8, 1.0});
  EXPECT_NEAR(s.share, 1.0 / 11, 1e-12);
  // ...unless it is not worth its fixed costs.
  s = ShareFromCalibration({1e9, 1.0, 1e7, 1.0});
  EXPECT_EQ(s.share, 0);
  EXPECT_NE(s.reason.find("below"), std::string::npos) << s.reason;
  // A GPU far faster than the CPU leaves the CPU threads a little.
  s = ShareFromCalibration({1e6, 1.0, 1e10, 1.0});
  EXPECT_EQ(s.share, kMaxGpuShare);
}

TEST(GpuShareTest, NothingMeasuredGivesTheGpuNothing) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const Calibration& c :
       {Calibration{1e8, 1.0, 0, 1.0}, Calibration{1e8, 1.0, 1e8, 0},
        Calibration{0, 1.0, 1e8, 1.0}, Calibration{1e8, 1.0, nan, 1.0},
        Calibration{1e8, -1.0, 1e8, 1.0}}) {
    GpuShare s = ShareFromCalibration(c);
    EXPECT_EQ(s.share, 0);
    EXPECT_NE(s.reason.find("measured nothing usable"), std::string::npos)
        << s.reason;
  }
}

// The cost of [a, b) counted vertex by vertex from per-vertex degrees: the
// independent reference for the chunked cut.
double CostOf(const std::vector<uint64_t>& degree, uint64_t a, uint64_t b,
              double alpha) {
  double c = 0;
  for (uint64_t v = a; v < b; ++v) c += double(degree[v]) + alpha;
  return c;
}

TEST(GpuShareTest, TheCutGivesTheGpuItsShareOfTheRangesCost) {
  constexpr uint64_t kGrain = 64, kVertices = 64 * 100 + 17;
  // Skewed degrees: a hub region, then a long light tail.
  std::vector<uint64_t> degree(kVertices);
  for (uint64_t v = 0; v < kVertices; ++v) {
    degree[v] = v < 640 ? 200 : (v % 7) + 1;
  }
  std::vector<uint64_t> chunks((kVertices + kGrain - 1) / kGrain, 0);
  for (uint64_t v = 0; v < kVertices; ++v) chunks[v / kGrain] += degree[v];
  for (auto [begin, end] : {std::pair<uint64_t, uint64_t>{0, kVertices},
                            {1000, 5000},
                            {300, kVertices}}) {
    for (double share : {0.1, 0.25, 0.5, 0.75, 0.9}) {
      SCOPED_TRACE(::testing::Message()
                   << "[" << begin << ", " << end << ") share " << share);
      const uint64_t cut =
          SplitForGpu(chunks, kVertices, kGrain, begin, end, share);
      ASSERT_GE(cut, begin);
      ASSERT_LE(cut, end);
      EXPECT_TRUE(cut == begin || cut == end || cut % kGrain == 0) << cut;
      const double total = CostOf(degree, begin, end, 1.0);
      const double got = CostOf(degree, begin, cut, 1.0) / total;
      // Within one chunk's cost of the share asked.
      double largest_chunk = 0;
      for (uint64_t c = begin / kGrain; c * kGrain < end; ++c) {
        largest_chunk = std::max(largest_chunk,
                                 CostOf(degree, std::max(begin, c * kGrain),
                                        std::min(end, (c + 1) * kGrain), 1.0));
      }
      EXPECT_LE(std::abs(got - share), largest_chunk / total + 1e-9)
          << "cut " << cut << " gives " << got;
    }
  }
  // No share, all of it, an empty range.
  EXPECT_EQ(SplitForGpu(chunks, kVertices, kGrain, 128, 4096, 0), 128u);
  EXPECT_EQ(SplitForGpu(chunks, kVertices, kGrain, 128, 4096, 1), 4096u);
  EXPECT_EQ(SplitForGpu(chunks, kVertices, kGrain, 500, 500, 0.5), 500u);
}

// `dmg run --gpu` where no GPU can be used (this machine, CI): on is
// refused with one line and exit 2, auto runs on the CPU and says so.
TEST(GpuFlagTest, AGpuShareAboveOneIsRefused) {
  testing::CommandResult r =
      testing::RunDmg("run --algo=pagerank --graph=kron:10 --gpu_share=1.5");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  ASSERT_EQ(testing::ErrorLines(r.err).size(), 1u) << r.err;
  EXPECT_NE(r.err.find("--gpu_share=1.5"), std::string::npos) << r.err;
  testing::CommandResult ok = testing::RunDmg(
      "run --algo=pagerank --graph=kron:10 --gpu_share=0.5 --verify");
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
}

TEST(GpuFlagTest, WithoutAGpuOnIsRefusedAndAutoSaysItRunsOnTheCpu) {
  std::string why;
  if (!gpu::ListDevices(&why).empty()) {
    GTEST_SKIP() << "a GPU is here: these are the no-GPU answers";
  }
  testing::TempDir dir;
  testing::CommandResult on =
      testing::RunDmg("run --algo=bfs --graph=kron:10 --gpu=on");
  EXPECT_EQ(on.exit_code, 2);
  ASSERT_EQ(testing::ErrorLines(on.err).size(), 1u) << on.err;
  EXPECT_NE(on.err.find("--gpu=on: no GPU: " + why), std::string::npos)
      << on.err;
  testing::CommandResult bad =
      testing::RunDmg("run --algo=bfs --graph=kron:10 --gpu=yes");
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  testing::CommandResult autod = testing::RunDmg(
      "run --algo=bfs --graph=kron:10 --gpu=auto --verify --summary_json=" +
      dir.file("s.json"));
  EXPECT_EQ(autod.exit_code, 0) << autod.err;
  EXPECT_NE(autod.out.find("verify: OK"), std::string::npos) << autod.out;
  EXPECT_NE(autod.err.find("--gpu=auto: no GPU: " + why +
                           ": the CPU threads run it all"),
            std::string::npos)
      << autod.err;
  EXPECT_NE(testing::Slurp(dir.file("s.json"))
                .find(R"("gpu": {"mode": "auto", "used": false, "note": )"),
            std::string::npos);
  // The default (auto, not given) says it only in --summary_json.
  testing::CommandResult quiet =
      testing::RunDmg("run --algo=bfs --graph=kron:10");
  EXPECT_EQ(quiet.exit_code, 0) << quiet.err;
  EXPECT_EQ(quiet.err.find("--gpu"), std::string::npos) << quiet.err;
}

}  // namespace
}  // namespace dmg::workload

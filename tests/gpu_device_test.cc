// The GPU device list, the probe and `dmg gpu-probe`: what a host without
// a GPU (or a build without CUDA) says, the probe's host helpers, and, on a
// host with a GPU, a small probe of device 0 and the command's JSON.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "gpu/analysis/report.h"
#include "gpu/analysis/topology.h"
#include "gpu/device.h"
#include "gpu/probe.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"
#include "tools/gpu_probe_command.h"

namespace dmg {
namespace {

using gpu::DeviceInfo;
using gpu::LatencyMatrix;
using gpu::ListDevices;
using gpu::ProbeOptions;
using testing::ErrorLines;
using testing::RunDmg;
using testing::Slurp;
using testing::TempDir;

// Device 0, or the reason there is none (for GTEST_SKIP).
bool HaveGpu(std::string* why) { return !ListDevices(why).empty(); }

ProbeOptions SmallProbe() {
  ProbeOptions o;
  o.lines = 64;
  o.dense_lines = 64;
  o.repeats = 1;
  return o;
}

TEST(GpuDeviceTest, AnEmptyListSaysWhy) {
  std::string why;
  const std::vector<DeviceInfo> devices = ListDevices(&why);
  if (!devices.empty()) {
    GTEST_SKIP() << "a GPU is here (" << devices[0].name
                 << "): nothing to say why";
  }
  EXPECT_FALSE(why.empty());
  if (!gpu::BuiltWithCuda()) {
    EXPECT_NE(why.find("built without CUDA"), std::string::npos) << why;
  } else {
    EXPECT_TRUE(why.find("driver") != std::string::npos ||
                why.find("device") != std::string::npos)
        << why;
  }
  // Asked again (the runtime's sticky error cleared), the same answer.
  std::string again;
  EXPECT_TRUE(ListDevices(&again).empty());
  EXPECT_EQ(again, why);
  EXPECT_TRUE(ListDevices().empty());  // no reason asked for
}

TEST(GpuDeviceTest, TheDevicesHaveTheirAttributes) {
  std::string why;
  const std::vector<DeviceInfo> devices = ListDevices(&why);
  if (devices.empty()) GTEST_SKIP() << "no GPU: " << why;
  for (size_t i = 0; i < devices.size(); ++i) {
    const DeviceInfo& d = devices[i];
    EXPECT_EQ(d.index, static_cast<int>(i));
    EXPECT_FALSE(d.name.empty());
    EXPECT_GE(d.major, 7) << d.name;
    EXPECT_GT(d.sms, 0) << d.name;
    EXPECT_GT(d.clock_khz, 0) << d.name;
    EXPECT_GT(d.memory_bytes, 0u) << d.name;
    EXPECT_GT(d.l2_bytes, 0u) << d.name;
    EXPECT_GT(d.PeakGBps(), 0) << d.name;
  }
}

TEST(GpuProbeTest, OptionsOutOfRangeAreRefused) {
  EXPECT_TRUE(gpu::CheckProbeOptions(ProbeOptions{}).ok());
  ProbeOptions o;
  o.lines = 1;
  EXPECT_EQ(gpu::CheckProbeOptions(o).code(),
            absl::StatusCode::kInvalidArgument);
  o = ProbeOptions{};
  o.lines = gpu::kMaxProbeLines + 1;
  EXPECT_FALSE(gpu::CheckProbeOptions(o).ok());
  o = ProbeOptions{};
  o.repeats = 0;
  EXPECT_FALSE(gpu::CheckProbeOptions(o).ok());
  o = ProbeOptions{};
  o.line_bytes = 96;  // not a power of two
  EXPECT_FALSE(gpu::CheckProbeOptions(o).ok());
  o = ProbeOptions{};
  o.buffer_bytes = 4096;  // too few lines to sample 2048 from
  EXPECT_FALSE(gpu::CheckProbeOptions(o).ok());
}

TEST(GpuProbeTest, MediansAreTakenPerCellAndPutInColumnOrder) {
  // 3 repeats x 2 SMs x 3 steps; step i visited column order[i].
  const std::vector<int> order = {2, 0, 1};
  const std::vector<uint32_t> samples = {
      10, 20, 30, 40, 50, 60,  // repeat 0: SM 0 steps, SM 1 steps
      12, 99, 31, 41, 51, 61,  // repeat 1
      11, 21, 32, 42, 52, 62,  // repeat 2
  };
  const LatencyMatrix m = gpu::MedianMatrix(samples, 3, 2, order);
  ASSERT_EQ(m.sms, 2);
  ASSERT_EQ(m.lines, 3);
  // SM 0: step 0 (column 2) median 11, step 1 (column 0) 21, step 2
  // (column 1) 31.
  EXPECT_EQ(m.at(0, 2), 11);
  EXPECT_EQ(m.at(0, 0), 21);
  EXPECT_EQ(m.at(0, 1), 31);
  EXPECT_EQ(m.at(1, 2), 41);
  EXPECT_EQ(m.at(1, 0), 51);
  EXPECT_EQ(m.at(1, 1), 61);
  // An even count takes the middle two's mean.
  const LatencyMatrix two = gpu::MedianMatrix(std::vector<uint32_t>{10, 20}, 2,
                                              1, std::vector<int>{0});
  EXPECT_EQ(two.at(0, 0), 15);
}

TEST(GpuProbeTest, WithoutAGpuTheProbeSaysWhy) {
  std::string why;
  if (HaveGpu(&why)) GTEST_SKIP() << "a GPU is here";
  absl::StatusOr<gpu::ProbeMeasurement> m = gpu::RunProbe(0, SmallProbe());
  ASSERT_FALSE(m.ok());
  const std::string message(m.status().message());
  EXPECT_TRUE(message.find("no GPU") != std::string::npos ||
              message.find("without CUDA") != std::string::npos)
      << message;
}

TEST(GpuProbeTest, DenseHomesFollowTheFasterNode) {
  // SMs 0, 1 on node 0 and SM 2 on node 1; lines 0-1 near node 0, 2-3
  // near node 1 (SM 1 slower throughout: its offset cancels).
  LatencyMatrix dense;
  dense.sms = 3;
  dense.lines = 4;
  dense.cycles = {200, 200, 350, 350,  //
                  230, 230, 380, 380,  //
                  350, 350, 200, 200};
  gpu::Topology t;
  t.nodes = 2;
  t.sm_node = {0, 0, 1};
  EXPECT_EQ(cli::DenseHomes(dense, t), (std::vector<int>{0, 0, 1, 1}));
  t.nodes = 1;
  t.sm_node = {0, 0, 0};
  EXPECT_EQ(cli::DenseHomes(dense, t), (std::vector<int>{0, 0, 0, 0}));
}

TEST(GpuProbeCommandTest, WithoutAGpuItIsOneLineAndExitOne) {
  std::string why;
  if (HaveGpu(&why)) GTEST_SKIP() << "a GPU is here";
  TempDir dir;
  const std::string out = dir.file("topology.json");
  testing::CommandResult r = RunDmg("gpu-probe --output=" + out);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const std::vector<std::string> lines = ErrorLines(r.err);
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_NE(lines[0].find("dmg: error: gpu-probe: no GPU: "), std::string::npos)
      << lines[0];
  EXPECT_FALSE(std::filesystem::exists(out));
  // Without --output too.
  r = RunDmg("gpu-probe");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(ErrorLines(r.err).size(), 1u) << r.err;
}

TEST(GpuProbeCommandTest, BadFlagsAreBadInputWithOrWithoutAGpu) {
  for (const std::string flags :
       {"--probe_lines=1", "--probe_repeats=0", "--gpu_device=-1",
        "--probe_lines=x", "--no_such_flag"}) {
    testing::CommandResult r = RunDmg("gpu-probe " + flags);
    EXPECT_EQ(r.exit_code, 2) << flags << ": " << r.err;
    EXPECT_EQ(ErrorLines(r.err).size(), 1u) << flags << ": " << r.err;
  }
}

TEST(GpuProbeCommandTest, HelpListsItsFlags) {
  for (const std::string args : {"help gpu-probe", "gpu-probe --help"}) {
    testing::CommandResult r = RunDmg(args);
    EXPECT_EQ(r.exit_code, 0) << args;
    for (const char* flag :
         {"--output", "--gpu_device", "--probe_lines", "--probe_repeats"}) {
      EXPECT_NE(r.out.find(flag), std::string::npos) << args << ": " << flag;
    }
  }
  testing::CommandResult r = RunDmg("help");
  EXPECT_NE(r.out.find("gpu-probe"), std::string::npos);
}

// ---- With a GPU ----

TEST(GpuProbeTest, ASmallProbeOfDeviceZero) {
  std::string why;
  if (!HaveGpu(&why)) GTEST_SKIP() << "no GPU: " << why;
  const ProbeOptions o = SmallProbe();
  absl::StatusOr<gpu::ProbeMeasurement> m = gpu::RunProbe(0, o);
  ASSERT_TRUE(m.ok()) << m.status();
  const int sms = static_cast<int>(m->sm_ids.size());
  ASSERT_GT(sms, 0);
  EXPECT_LE(sms, m->device.sms);
  for (const LatencyMatrix* x : {&m->cold, &m->first_hit, &m->second_hit}) {
    EXPECT_EQ(x->sms, sms);
    EXPECT_EQ(x->lines, o.lines);
    ASSERT_EQ(x->cycles.size(), static_cast<size_t>(sms) * o.lines);
    for (double c : x->cycles) EXPECT_GT(c, 0);
  }
  for (const LatencyMatrix* x : {&m->dense_cold, &m->dense_first_hit}) {
    EXPECT_EQ(x->sms, sms);
    EXPECT_EQ(x->lines, o.dense_lines);
    ASSERT_EQ(x->cycles.size(), static_cast<size_t>(sms) * o.dense_lines);
    for (double c : x->cycles) EXPECT_GT(c, 0);
  }
  ASSERT_EQ(m->line_offsets.size(), static_cast<size_t>(o.lines));
  EXPECT_TRUE(std::is_sorted(m->line_offsets.begin(), m->line_offsets.end()));
  // DRAM is slower than an L2 hit.
  double hit = 0;
  for (double c : m->first_hit.cycles) hit += c;
  hit /= m->first_hit.cycles.size();
  EXPECT_GT(m->dram_cycles, 0);
  EXPECT_GT(m->dram_cycles, 0.9 * hit);
  EXPECT_GT(m->gpu_seconds, 0);
  // A device past the last is the user's mistake.
  const int past = static_cast<int>(ListDevices().size());
  EXPECT_EQ(gpu::RunProbe(past, o).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(GpuProbeCommandTest, WithAGpuItWritesTheReport) {
  std::string why;
  if (!HaveGpu(&why)) GTEST_SKIP() << "no GPU: " << why;
  TempDir dir;
  const std::string out = dir.file("topology.json");
  testing::CommandResult r =
      RunDmg("gpu-probe --probe_lines=256 --probe_repeats=1 --output=" + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("NUMA nodes:"), std::string::npos) << r.out;
  absl::StatusOr<gpu::ProbeReport> report =
      gpu::ParseProbeReportJson(Slurp(out));
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_GT(report->sms, 0);
  EXPECT_EQ(report->lines_sampled, 256);
  EXPECT_EQ(report->first_hit_cycles.size(), static_cast<size_t>(report->sms));
  EXPECT_GE(report->topology.nodes, 1);
  EXPECT_GT(report->dram_cycles, 0);
}

}  // namespace
}  // namespace dmg

// What `dmg gpu-probe --output=topology.json` writes: the GPU, the probe's
// cost, its per-SM medians and the topology found (topology.h). Plain data,
// no CUDA types, so the host side builds and is tested without a GPU; the
// CUDA probe fills it and calls ProbeReportJson.
#ifndef DMG_GPU_ANALYSIS_REPORT_H_
#define DMG_GPU_ANALYSIS_REPORT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "gpu/analysis/topology.h"

namespace dmg::gpu {

struct ProbeReport {
  // The GPU (cudaDeviceProp / cudaDeviceGetAttribute).
  std::string gpu_name;
  int compute_major = 0, compute_minor = 0;
  int sm_clock_khz = 0;
  int memory_clock_khz = 0;
  int memory_bus_bits = 0;
  int sms = 0;
  uint64_t l2_bytes = 0;

  // The probe: GPU time it took (all passes, all repeats), lines sampled
  // per SM, their spacing, and how often each pass was repeated.
  double gpu_seconds = 0;
  int lines_sampled = 0;
  uint64_t line_bytes = 0;
  int repeats = 0;

  // Per SM, the median cycles of one dependent load in each pass: cold
  // (after the L2 flush: DRAM), first hit (near or far L2) and second hit
  // (the same walk again: shows whether far lines were copied near).
  std::vector<double> cold_cycles;
  std::vector<double> first_hit_cycles;
  std::vector<double> second_hit_cycles;
  double dram_cycles = 0;  // the median over all cold loads

  Topology topology;              // from the first-hit matrix
  uint64_t interleave_bytes = 0;  // InterleaveGranularity(line homes)
  // Far lines hit again are served near (FarCopy), and the second hit's
  // median over the far cells.
  bool far_copied_to_near = false;
  double far_second_hit_cycles = 0;
};

// Whether a far hit copies the line into the near partition (A100 does):
// per SM, is the second-hit median over the lines the topology calls far
// closer to that SM's first-hit near median than to its first-hit far
// median? `copied` when most SMs say so. Row-wise, so per-SM offsets
// cancel.
struct FarCopy {
  bool copied = false;
  double share = 0;              // of the SMs that saw any far line
  double second_hit_cycles = 0;  // median over the SMs' far medians
};
// InvalidArgument when the matrices' shapes differ from each other or the
// topology's, or the topology has a single node (nothing is far).
absl::StatusOr<FarCopy> DetectFarCopy(const LatencyMatrix& first_hit,
                                      const LatencyMatrix& second_hit,
                                      const Topology& topology);

// The report as a JSON object: snake_case keys in a fixed order, strings
// escaped, non-finite numbers as null. Numbers print in the shortest form
// that reads back to the same double. The text ends with a newline.
std::string ProbeReportJson(const ProbeReport& report);

// Reads ProbeReportJson's output back (a null number reads as NaN).
// InvalidArgument for malformed JSON, a missing key or a wrong type;
// unknown keys are ignored, so later versions may add some.
absl::StatusOr<ProbeReport> ParseProbeReportJson(std::string_view json);

}  // namespace dmg::gpu

#endif  // DMG_GPU_ANALYSIS_REPORT_H_

#include "tools/gpu_probe_command.h"

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "gpu/device.h"
#include "store/image_file.h"
#include "tools/cli.h"

DEFINE_int32(gpu_device, 0, "gpu-probe: the CUDA device to probe (0..N-1)");
DEFINE_int32(probe_lines, 2048,
             "gpu-probe: lines of the 64 MiB buffer each SM's pointer chase "
             "samples (the latency matrix's columns)");
DEFINE_int32(probe_repeats, 3,
             "gpu-probe: times each SM's passes are repeated; the medians "
             "are kept");
DECLARE_string(output);

namespace dmg::cli {
namespace {

double Median(std::vector<double> xs) {
  if (xs.empty()) return std::numeric_limits<double>::quiet_NaN();
  auto mid = xs.begin() + xs.size() / 2;
  std::nth_element(xs.begin(), mid, xs.end());
  return *mid;
}

// Per SM (row), the median over its lines.
std::vector<double> RowMedians(const gpu::LatencyMatrix& m) {
  std::vector<double> out;
  for (int s = 0; s < m.sms; ++s) {
    const auto row = m.cycles.begin() + static_cast<ptrdiff_t>(s) * m.lines;
    out.push_back(Median(std::vector<double>(row, row + m.lines)));
  }
  return out;
}

absl::StatusOr<gpu::ProbeOptions> OptionsFromFlags() {
  gpu::ProbeOptions o;
  o.lines = FLAGS_probe_lines;
  o.repeats = FLAGS_probe_repeats;
  if (absl::Status s = gpu::CheckProbeOptions(o); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--probe_lines/--probe_repeats: ", s.message()));
  }
  if (FLAGS_gpu_device < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--gpu_device must be >= 0 (got ", FLAGS_gpu_device, ")"));
  }
  if (!FLAGS_output.empty() && FLAGS_output != "-") {
    if (absl::Status s = store::CheckOutputPath(FLAGS_output); !s.ok()) {
      return s;
    }
  }
  return o;
}

// The JSON where --output says ("-": stdout).
absl::Status WriteReport(const gpu::ProbeReport& report) {
  const std::string json = gpu::ProbeReportJson(report) + "\n";
  if (FLAGS_output == "-") {
    std::fwrite(json.data(), 1, json.size(), stdout);
    return absl::OkStatus();
  }
  return store::WriteFileAtomically(
      FLAGS_output, std::as_bytes(std::span(json.data(), json.size())));
}

}  // namespace

std::vector<FlagGroup> GpuProbeFlagGroups() {
  FlagGroup flags{"flags",
                  {"output", "gpu_device", "probe_lines", "probe_repeats"}};
  flags.own["output"] = {
      "the topology JSON to write (replaced atomically; '-': stdout, and "
      "the summary goes to stderr; '': the summary only)",
      "''"};
  return {flags};
}

std::vector<int> DenseHomes(const gpu::LatencyMatrix& dense,
                            const gpu::Topology& topology) {
  std::vector<int> homes(dense.lines, 0);
  if (topology.nodes < 2 ||
      topology.sm_node.size() != static_cast<size_t>(dense.sms)) {
    return homes;
  }
  for (int l = 0; l < dense.lines; ++l) {
    std::vector<double> sum(topology.nodes, 0.0);
    std::vector<int> count(topology.nodes, 0);
    for (int s = 0; s < dense.sms; ++s) {
      sum[topology.sm_node[s]] += dense.at(s, l);
      ++count[topology.sm_node[s]];
    }
    double best = std::numeric_limits<double>::infinity();
    for (int n = 0; n < topology.nodes; ++n) {
      if (count[n] > 0 && sum[n] / count[n] < best) {
        best = sum[n] / count[n];
        homes[l] = n;
      }
    }
  }
  return homes;
}

gpu::ProbeReport MakeProbeReport(const gpu::ProbeMeasurement& m,
                                 const gpu::Topology& topology) {
  gpu::ProbeReport r;
  r.gpu_name = m.device.name;
  r.compute_major = m.device.major;
  r.compute_minor = m.device.minor;
  r.sm_clock_khz = m.device.clock_khz;
  r.memory_clock_khz = m.device.memory_clock_khz;
  r.memory_bus_bits = m.device.memory_bus_bits;
  r.sms = m.first_hit.sms;
  r.l2_bytes = m.device.l2_bytes;
  r.gpu_seconds = m.gpu_seconds;
  r.lines_sampled = m.first_hit.lines;
  r.line_bytes = m.options.line_bytes;
  r.repeats = m.options.repeats;
  r.cold_cycles = RowMedians(m.cold);
  r.first_hit_cycles = RowMedians(m.first_hit);
  r.second_hit_cycles = RowMedians(m.second_hit);
  r.dram_cycles = m.dram_cycles;
  r.topology = topology;
  r.interleave_bytes = gpu::InterleaveGranularity(
      DenseHomes(m.dense_first_hit, topology), m.options.line_bytes);
  r.far_second_hit_cycles = std::numeric_limits<double>::quiet_NaN();
  if (topology.nodes > 1) {
    absl::StatusOr<gpu::FarCopy> far =
        gpu::DetectFarCopy(m.first_hit, m.second_hit, topology);
    if (far.ok()) {
      r.far_copied_to_near = far->copied;
      r.far_second_hit_cycles = far->second_hit_cycles;
    } else {
      LOG(WARNING) << "far copy not judged: " << far.status().message();
    }
  }
  return r;
}

std::string ProbeSummary(const gpu::ProbeReport& r,
                         const gpu::ProbeMeasurement& m) {
  const gpu::Topology& t = r.topology;
  std::vector<int> split(t.nodes, 0);
  for (int node : t.sm_node) {
    if (node >= 0 && node < t.nodes) ++split[node];
  }
  std::string text =
      absl::StrFormat("%-18s %d: %s, compute %d.%d, %d SMs, L2 %.1f MiB\n",
                      "GPU", m.device.index, r.gpu_name, r.compute_major,
                      r.compute_minor, r.sms, r.l2_bytes / 1048576.0);
  absl::StrAppendFormat(&text, "%-18s %d (SMs per node: %s)\n",
                        "NUMA nodes:", t.nodes, absl::StrJoin(split, "/"));
  absl::StrAppendFormat(&text,
                        "%-18s near %.0f, far %.0f cycles (%.2fx; threshold "
                        "%.0f, agreement %.3f)\n",
                        "L2 hit:", t.near_cycles, t.far_cycles,
                        t.near_cycles > 0 ? t.far_cycles / t.near_cycles : 0,
                        t.threshold, t.agreement);
  if (t.nodes > 1) {
    absl::StrAppendFormat(
        &text, "%-18s %s (second hit of far lines %.0f)\n",
        "far line copied:", r.far_copied_to_near ? "yes" : "no",
        r.far_second_hit_cycles);
  }
  absl::StrAppendFormat(&text, "%-18s %s\n", "interleave:",
                        r.interleave_bytes == 0
                            ? std::string("none seen (one home)")
                            : absl::StrCat(r.interleave_bytes, " bytes"));
  absl::StrAppendFormat(&text, "%-18s %.0f cycles\n", "DRAM:", r.dram_cycles);
  absl::StrAppendFormat(
      &text, "%-18s %d lines x %d repeats, %.2f s GPU, %.2f s in all\n",
      "probe:", r.lines_sampled, r.repeats, r.gpu_seconds, m.wall_seconds);
  return text;
}

int GpuProbeCommand() {
  absl::StatusOr<gpu::ProbeOptions> options = OptionsFromFlags();
  if (!options.ok()) return ReportError(options.status());
  // No GPU is the host's state, not bad input: exit 1, one line.
  std::string why;
  if (gpu::ListDevices(&why).empty()) {
    return ReportError(absl::UnavailableError("gpu-probe: no GPU: " + why));
  }
  absl::StatusOr<gpu::ProbeMeasurement> m =
      gpu::RunProbe(FLAGS_gpu_device, *options);
  if (!m.ok()) {
    return ReportError(absl::Status(
        m.status().code(), absl::StrCat("gpu-probe: ", m.status().message())));
  }
  if (m->sm_ids.size() != static_cast<size_t>(m->first_hit.sms) ||
      m->sm_ids.empty() || m->sm_ids.back() + 1 != m->first_hit.sms) {
    LOG(WARNING) << "the SM ids are not 0.." << m->first_hit.sms - 1
                 << ": the report's per-SM rows follow the ids in order";
  }
  absl::StatusOr<gpu::Topology> topology = gpu::AnalyzeLatencies(m->first_hit);
  if (!topology.ok()) {
    return ReportError(absl::InternalError(
        absl::StrCat("gpu-probe: the latencies gave no topology: ",
                     topology.status().message())));
  }
  const gpu::ProbeReport report = MakeProbeReport(*m, *topology);
  if (!FLAGS_output.empty()) {
    if (absl::Status s = WriteReport(report); !s.ok()) return ReportError(s);
  }
  std::FILE* out = FLAGS_output == "-" ? stderr : stdout;
  std::fprintf(out, "%s", ProbeSummary(report, *m).c_str());
  if (!FLAGS_output.empty() && FLAGS_output != "-") {
    std::fprintf(out, "wrote %s\n", FLAGS_output.c_str());
  }
  return kExitOk;
}

}  // namespace dmg::cli

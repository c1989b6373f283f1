// `dmg gpu-probe [--output=topology.json] [--gpu_device=N]
// [--probe_lines=2048] [--probe_repeats=3]`: measures the GPU's NUMA
// structure (its L2 partitions; gpu/probe.h) and writes what
// gpu/analysis finds in it as JSON (gpu/analysis/report.h), with a short
// summary on stdout. Exit 0 when the probe ran, 2 on bad flags, 1 when
// there is no GPU (not the user's input: one line saying why) or the probe
// failed.
#ifndef DMG_TOOLS_GPU_PROBE_COMMAND_H_
#define DMG_TOOLS_GPU_PROBE_COMMAND_H_

#include <string>
#include <vector>

#include "gpu/analysis/report.h"
#include "gpu/analysis/topology.h"
#include "gpu/probe.h"
#include "tools/help.h"

namespace dmg::cli {

std::vector<FlagGroup> GpuProbeFlagGroups();
int GpuProbeCommand();

// --- Pieces with no GPU behind them (tested in gpu_device_test). ---------

// The home of each line of a dense run: the node whose SMs see it fastest
// on average (per-SM offsets cancel in the node's mean). All 0 for one
// node.
std::vector<int> DenseHomes(const gpu::LatencyMatrix& dense,
                            const gpu::Topology& topology);

// The report of a measurement and the topology found in it.
gpu::ProbeReport MakeProbeReport(const gpu::ProbeMeasurement& m,
                                 const gpu::Topology& topology);

// The summary `dmg gpu-probe` prints.
std::string ProbeSummary(const gpu::ProbeReport& report,
                         const gpu::ProbeMeasurement& m);

}  // namespace dmg::cli

#endif  // DMG_TOOLS_GPU_PROBE_COMMAND_H_

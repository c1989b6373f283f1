// Stage 1 on a compute node with a GPU: the node's vertex range is split
// between its CPU threads and its GPU in proportion to what each gets
// through, measured in a calibration superstep (each side runs the same
// kind of step on a sample of the range; the GPU's time includes its
// copies), so that both sides finish a superstep together. The GPU takes
// the first part of the range, the CPU threads the rest; cuts fall on
// grain-aligned chunks, as between compute nodes (workload/partition.h).
#ifndef DMG_WORKLOAD_GPU_SHARE_H_
#define DMG_WORKLOAD_GPU_SHARE_H_

#include <cstdint>
#include <span>
#include <string>

#include "workload/partition.h"

namespace dmg::workload {

// What a calibration superstep measured on each side: the cost units (edges
// + alpha * vertices) it processed and the seconds it took.
struct Calibration {
  double cpu_units = 0, cpu_seconds = 0;
  double gpu_units = 0, gpu_seconds = 0;
};

struct GpuShare {
  double cpu_rate = 0;  // cost units per second
  double gpu_rate = 0;
  double share = 0;  // of the range's cost given to the GPU, 0..1
  // Why the GPU gets nothing, when share is 0 ("" otherwise).
  std::string reason;
};

// Shares below this are not worth the GPU's fixed costs (launches, copies
// of the state it reads): the CPU threads keep the whole range.
inline constexpr double kMinGpuShare = 0.02;
// The CPU threads keep at least this (the node's coordination and its
// exchanges with the others run on them).
inline constexpr double kMaxGpuShare = 0.98;

// share = gpu_rate / (cpu_rate + gpu_rate), bounded as above; a side that
// measured nothing usable (no units, no time, not finite) gives share 0
// with the reason.
GpuShare ShareFromCalibration(const Calibration& c);

// The cut in [begin, end) (a multiple of grain, or begin or end) that gives
// [begin, cut) the cost share closest to `share`, from the edges of each
// grain-sized chunk of the whole graph (AddEdgesPerChunk).
uint64_t SplitForGpu(std::span<const uint64_t> edges_per_chunk,
                     uint64_t num_vertices, uint64_t grain, uint64_t begin,
                     uint64_t end, double share, double alpha = kVertexCost);

}  // namespace dmg::workload

#endif  // DMG_WORKLOAD_GPU_SHARE_H_

// The GPU NUMA probe (../shared/notes/gpu-numa.md): per SM, one thread
// pinned to it walks a random pointer chain over a sample of lines with
// ld.global.cg and times each dependent load with clock64(), right after
// an L2 flush (cold: DRAM), again (first hit: near or far L2) and once more
// (second hit: were far lines copied to the near side?). A dense run over
// consecutive lines gives what the interleave granularity is read from.
// The result is plain host data for gpu/analysis/topology.h. Built with
// and without CUDA: without it RunProbe says so, so callers need no #ifdef.
#ifndef DMG_GPU_PROBE_H_
#define DMG_GPU_PROBE_H_

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "gpu/analysis/topology.h"
#include "gpu/device.h"

namespace dmg::gpu {

struct ProbeOptions {
  int lines = 2048;  // K: lines sampled at random from the buffer
  int repeats = 3;   // R: each measurement repeated, medians kept
  // Consecutive lines of the dense run (from the buffer's start): with 128
  // byte lines 1024 of them span 128 KiB, 16 of A100's 8 KiB chunks.
  int dense_lines = 1024;
  uint64_t buffer_bytes = uint64_t{64} << 20;  // the chased buffer
  uint64_t line_bytes = 128;                   // an L2 line
  uint64_t seed = 1;                           // the chains' shuffles
  // Tries per SM when no block of a launch lands on it (the block
  // scheduler is not round-robin): past them the probe fails.
  int placement_tries = 8;
};

// The limits RunProbe checks options against (shared memory holds one
// 4-byte time per step; the dense lines must fit in the buffer).
inline constexpr int kMaxProbeLines = 8192;
inline constexpr int kMaxProbeRepeats = 99;

struct ProbeMeasurement {
  DeviceInfo device;
  ProbeOptions options;  // as run
  // The %smid of each matrix row, ascending (the ids the hardware gives
  // need not be 0..sms-1: they are found by launching blocks first).
  std::vector<int> sm_ids;
  // Byte offset in the buffer of sampled line l (the matrices' columns).
  std::vector<uint64_t> line_offsets;
  // [SM x sampled line] medians over the repeats, SM clock cycles.
  LatencyMatrix cold;        // after the flush: DRAM
  LatencyMatrix first_hit;   // L2, near or far for the SM
  LatencyMatrix second_hit;  // L2 again
  // [SM x dense line]: line l is the buffer's l-th (offset l * line_bytes).
  LatencyMatrix dense_cold;
  LatencyMatrix dense_first_hit;
  double dram_cycles = 0;  // median of `cold`
  // CUDA events from the first chase to the last: the kernels, and the
  // short host round trips between launches (one per SM and repeat).
  double gpu_seconds = 0;
  double wall_seconds = 0;
  // Launches repeated because no block landed on the wanted SM.
  int placement_retries = 0;
};

// Runs the probe on CUDA device `device` (an index ListDevices gave).
// InvalidArgument for options out of range or a device past the last,
// FailedPrecondition without CUDA ("this dmg was built without CUDA"),
// Unavailable without a GPU ("no GPU: " and ListDevices' reason),
// Internal for a CUDA failure (with the runtime's text).
absl::StatusOr<ProbeMeasurement> RunProbe(int device,
                                          const ProbeOptions& options);

// The options' problem, or OK (no CUDA needed: the command checks its
// flags with it before touching a device).
absl::Status CheckProbeOptions(const ProbeOptions& options);

// Medians over the repeats (a host helper, public for the tests):
// `samples` holds `repeats` blocks of sms x steps latencies, each SM's in
// chain order, where step i visited column order[i]. Returns [SM x column].
LatencyMatrix MedianMatrix(std::span<const uint32_t> samples, int repeats,
                           int sms, std::span<const int> order);

}  // namespace dmg::gpu

#endif  // DMG_GPU_PROBE_H_

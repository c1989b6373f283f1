// The probe's host helpers that need no CUDA (built with and without it).
#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gpu/probe.h"

namespace dmg::gpu {

absl::Status CheckProbeOptions(const ProbeOptions& o) {
  if (o.lines < 2 || o.lines > kMaxProbeLines) {
    return absl::InvalidArgumentError(absl::StrCat(
        "probe lines must be 2..", kMaxProbeLines, " (got ", o.lines, ")"));
  }
  if (o.dense_lines < 2 || o.dense_lines > kMaxProbeLines) {
    return absl::InvalidArgumentError(
        absl::StrCat("probe dense lines must be 2..", kMaxProbeLines, " (got ",
                     o.dense_lines, ")"));
  }
  if (o.repeats < 1 || o.repeats > kMaxProbeRepeats) {
    return absl::InvalidArgumentError(absl::StrCat("probe repeats must be 1..",
                                                   kMaxProbeRepeats, " (got ",
                                                   o.repeats, ")"));
  }
  if (o.line_bytes < 16 || (o.line_bytes & (o.line_bytes - 1)) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("probe line bytes must be a power of two >= 16 (got ",
                     o.line_bytes, ")"));
  }
  // Sampling distinct lines at random wants far more lines than samples.
  const uint64_t buffer_lines = o.buffer_bytes / o.line_bytes;
  const uint64_t needed = std::max<uint64_t>(
      4 * static_cast<uint64_t>(o.lines), static_cast<uint64_t>(o.dense_lines));
  if (buffer_lines < needed) {
    return absl::InvalidArgumentError(
        absl::StrCat("the probe buffer (", o.buffer_bytes, " bytes) holds ",
                     buffer_lines, " lines; it needs at least ", needed));
  }
  if (o.placement_tries < 1) {
    return absl::InvalidArgumentError("probe placement tries must be >= 1");
  }
  return absl::OkStatus();
}

LatencyMatrix MedianMatrix(std::span<const uint32_t> samples, int repeats,
                           int sms, std::span<const int> order) {
  const int steps = static_cast<int>(order.size());
  LatencyMatrix m;
  m.sms = sms;
  m.lines = steps;
  m.cycles.assign(static_cast<size_t>(sms) * steps, 0.0);
  const size_t block = static_cast<size_t>(sms) * steps;
  std::vector<uint32_t> values(repeats);
  for (int s = 0; s < sms; ++s) {
    for (int i = 0; i < steps; ++i) {
      for (int r = 0; r < repeats; ++r) {
        values[r] = samples[r * block + static_cast<size_t>(s) * steps + i];
      }
      std::sort(values.begin(), values.end());
      // A median, not a mean: one repeat disturbed by a stray clock
      // interrupt or refresh must not move the cell.
      const double median =
          repeats % 2 == 1
              ? values[repeats / 2]
              : 0.5 * (static_cast<double>(values[repeats / 2 - 1]) +
                       static_cast<double>(values[repeats / 2]));
      m.cycles[static_cast<size_t>(s) * steps + order[i]] = median;
    }
  }
  return m;
}

}  // namespace dmg::gpu

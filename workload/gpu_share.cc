#include "workload/gpu_share.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"

namespace dmg::workload {
namespace {

// A rate from units and seconds, or a reason it is none.
double Rate(double units, double seconds, const char* side,
            std::string* reason) {
  if (!(units > 0) || !(seconds > 0) || !std::isfinite(units) ||
      !std::isfinite(seconds)) {
    *reason = absl::StrFormat(
        "the %s's calibration measured nothing usable (%g units in %g s)", side,
        units, seconds);
    return 0;
  }
  return units / seconds;
}

}  // namespace

GpuShare ShareFromCalibration(const Calibration& c) {
  GpuShare s;
  std::string why;
  s.cpu_rate = Rate(c.cpu_units, c.cpu_seconds, "CPU", &why);
  s.gpu_rate = Rate(c.gpu_units, c.gpu_seconds, "GPU", &why);
  if (s.cpu_rate == 0 || s.gpu_rate == 0) {
    s.reason = why;
    return s;
  }
  const double share = s.gpu_rate / (s.cpu_rate + s.gpu_rate);
  if (share < kMinGpuShare) {
    s.reason = absl::StrFormat(
        "the GPU would take %.1f%% of the work, below the %.0f%% worth its "
        "copies",
        100 * share, 100 * kMinGpuShare);
    return s;
  }
  s.share = std::min(share, kMaxGpuShare);
  return s;
}

uint64_t SplitForGpu(std::span<const uint64_t> edges_per_chunk,
                     uint64_t num_vertices, uint64_t grain, uint64_t begin,
                     uint64_t end, double share, double alpha) {
  end = std::min(end, num_vertices);
  if (begin >= end || !(share > 0)) return begin;
  if (share >= 1) return end;
  grain = std::max<uint64_t>(grain, 1);
  // The cost of [begin, v) for a chunk boundary v; chunks split by begin
  // or end count in proportion to their vertices inside.
  auto chunk_cost = [&](uint64_t c, uint64_t from, uint64_t to) {
    const uint64_t lo = c * grain, hi = std::min(num_vertices, lo + grain);
    const uint64_t a = std::max(lo, from), b = std::min(hi, to);
    if (a >= b || hi <= lo) return 0.0;
    const double edges =
        c < edges_per_chunk.size() ? double(edges_per_chunk[c]) : 0.0;
    return (edges + alpha * double(hi - lo)) * double(b - a) / double(hi - lo);
  };
  double total = 0;
  for (uint64_t c = begin / grain; c * grain < end; ++c) {
    total += chunk_cost(c, begin, end);
  }
  const double want = share * total;
  // Walk the boundaries inside (begin, end); keep the closest to `want`.
  uint64_t best = begin;
  double best_gap = want, done = 0;
  for (uint64_t c = begin / grain; c * grain < end; ++c) {
    done += chunk_cost(c, begin, end);
    const uint64_t cut = std::min(end, (c + 1) * grain);
    const double gap = std::abs(done - want);
    if (gap < best_gap) {
      best_gap = gap;
      best = cut;
    }
  }
  return best;
}

}  // namespace dmg::workload

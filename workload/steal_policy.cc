#include "workload/steal_policy.h"

#include <algorithm>
#include <numeric>

namespace dmg::workload {

StealDecision DecideSteal(std::span<const double> work, const StealRule& rule) {
  StealDecision d;
  if (work.size() < 2) return d;
  d.max_work = *std::max_element(work.begin(), work.end());
  d.mean_work = std::accumulate(work.begin(), work.end(), 0.0) /
                static_cast<double>(work.size());
  const double excess = d.max_work - d.mean_work;
  d.steal = excess >= rule.min_excess_work &&
            excess >= rule.min_excess_fraction * d.mean_work;
  return d;
}

}  // namespace dmg::workload

#include "workload/steal_policy.h"

#include <algorithm>
#include <limits>
#include <numeric>

namespace dmg::workload {

double BalancedFinishNs(std::span<const double> work,
                        const StealPrices& prices) {
  double hi = 0;
  for (double w : work) hi = std::max(hi, w * prices.owner_ns);
  if (prices.owner_ns <= 0 || prices.taker_ns <= 0) return hi;
  // At finish time t, the work the nodes past t shed must equal what the
  // others can take in the time they have left before t: the first falls
  // and the second grows with t, so bisect. An owner past t that saves
  // nothing per unit taken cannot come down to t at all.
  auto surplus = [&](double t) {
    double shed = 0, room = 0;
    for (size_t k = 0; k < work.size(); ++k) {
      const double own_ns = work[k] * prices.owner_ns;
      if (own_ns > t) {
        const double saved = prices.owner_ns - prices.residue(k);
        if (saved <= 0) return std::numeric_limits<double>::infinity();
        shed += (own_ns - t) / saved;
      } else {
        room += (t - own_ns) / prices.taker_ns;
      }
    }
    return shed - room;
  };
  double lo = 0;
  for (int i = 0; i < 64; ++i) {
    const double mid = 0.5 * (lo + hi);
    (surplus(mid) > 0 ? lo : hi) = mid;
  }
  return hi;
}

StealDecision DecideSteal(std::span<const double> work,
                          const StealPrices& prices, const StealRule& rule) {
  StealDecision d;
  if (work.size() < 2) return d;
  const auto heaviest = std::max_element(work.begin(), work.end());
  d.max_work = *heaviest;
  d.residue_ns = prices.residue(static_cast<size_t>(heaviest - work.begin()));
  d.mean_work = std::accumulate(work.begin(), work.end(), 0.0) /
                static_cast<double>(work.size());
  const double excess = d.max_work - d.mean_work;
  const double finish = BalancedFinishNs(work, prices);
  d.gain_us = (d.max_work * prices.owner_ns - finish) / 1e3;
  d.cost_us = prices.fixed_ns / 1e3;
  d.steal = excess >= rule.min_excess_work &&
            excess >= rule.min_excess_fraction * d.mean_work &&
            d.gain_us > d.cost_us;
  if (d.steal) {
    d.work.assign(work.begin(), work.end());
    d.room.assign(work.size(), 0.0);
    for (size_t k = 0; k < work.size(); ++k) {
      d.room[k] =
          std::max(0.0, (finish - work[k] * prices.owner_ns) / prices.taker_ns);
    }
  }
  return d;
}

}  // namespace dmg::workload

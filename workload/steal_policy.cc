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

CoreBounds SharedCoreBounds(std::span<const double> work,
                            const SharedCores& cores) {
  CoreBounds b;
  if (cores.host.size() != work.size() || cores.threads.size() != work.size()) {
    return b;
  }
  const size_t hosts = cores.cores.size();
  std::vector<double> busy(hosts, 0.0), threads(hosts, 0.0);
  for (size_t k = 0; k < work.size(); ++k) {
    const int h = cores.host[k];
    if (h < 0 || static_cast<size_t>(h) >= hosts) return b;
    busy[h] += work[k] * cores.threads[k];
    threads[h] += cores.threads[k];
    b.alone = std::max(b.alone, work[k]);
  }
  double all = 0, usable = 0;
  for (size_t h = 0; h < hosts; ++h) {
    const double c = std::max(1.0, cores.cores[h]);
    b.alone = std::max(b.alone, busy[h] / c);
    all += busy[h];
    usable += std::min(c, threads[h]);
  }
  b.floor = all / std::max(1.0, usable);
  return b;
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
  const CoreBounds bounds = SharedCoreBounds(work, prices.cores);
  d.gain_us = (std::max(d.max_work, bounds.alone) * prices.owner_ns -
               std::max(finish, bounds.floor * prices.owner_ns)) /
              1e3;
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

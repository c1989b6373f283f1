// The GPU NUMA analysis of topology.h: EM for a 1-D Gaussian mixture, BIC
// for its size, and the near/far grouping of SMs and lines. Deterministic:
// every random choice comes from a fixed seed.
#include "gpu/analysis/topology.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace dmg::gpu {
namespace {

constexpr double kLogSqrt2Pi = 0.91893853320467274178;  // ln sqrt(2 pi)
constexpr int kMaxEmIterations = 500;
// EM stops when the mean log-likelihood per point gains less than this.
constexpr double kEmTolerance = 1e-7;
// Restarts from seeded random means besides the one from quantiles: EM
// finds a local optimum, and BIC is only as good as the fits it compares.
constexpr int kRandomRestarts = 3;
// The mixture is fitted on the cells in this many bins over their range
// (BinCells); the EM's cost is bins * k per iteration.
constexpr int kBins = 1024;
// Near, far, a farther node, outliers: more would be noise.
constexpr int kMaxComponents = 4;
// A row's offset is its quantile at this level: low enough to sit inside
// the near peak as long as each SM sees more than ~10% of lines near (up
// to ~8 nodes), high enough to be stable over a few thousand lines.
constexpr double kRowQuantile = 0.10;
// Two SMs belong to one node when their near sets overlap this much
// (Jaccard). Hamming agreement would not do: with N nodes, two different
// nodes still agree on the 1 - 2/N of lines both see far.
constexpr double kSameNodeJaccard = 0.5;
constexpr int kRegroupRounds = 4;

double LogNormal(double x, const Gaussian& g) {
  const double z = (x - g.mean) / g.sd;
  return -kLogSqrt2Pi - std::log(g.sd) - 0.5 * z * z;
}

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(q * v.size()));
  std::nth_element(v.begin(), v.begin() + i, v.end());
  return v[i];
}

// Points with weights: a bin of equal values counts as that many points,
// which lets AnalyzeLatencies fit a few thousand bins, not every cell.
struct Weighted {
  std::vector<double> x;
  std::vector<double> w;
  double n = 0;  // the sum of w
};

Weighted Unweighted(std::span<const double> xs) {
  Weighted p;
  p.x.assign(xs.begin(), xs.end());
  p.w.assign(xs.size(), 1.0);
  p.n = static_cast<double>(xs.size());
  return p;
}

struct Moments {
  double mean = 0;
  double sd = 0;
};

Moments MomentsOf(const Weighted& p) {
  Moments m;
  if (p.n <= 0) return m;
  for (size_t i = 0; i < p.x.size(); ++i) m.mean += p.w[i] * p.x[i];
  m.mean /= p.n;
  double ss = 0;
  for (size_t i = 0; i < p.x.size(); ++i) {
    ss += p.w[i] * (p.x[i] - m.mean) * (p.x[i] - m.mean);
  }
  m.sd = std::sqrt(ss / p.n);
  return m;
}

// One E step plus one M step; returns the log-likelihood of `mix` before
// the update. `resp` is scratch (points * k), weights folded in.
double EmStep(const Weighted& p, std::vector<Gaussian>& mix, double sd_floor,
              std::vector<double>& resp) {
  const size_t k = mix.size();
  double ll = 0;
  // Per component: ln(weight / (sd sqrt(2 pi))) and 1 / sd, so the loop
  // over points takes no logarithm.
  std::vector<double> base(k), inv_sd(k);
  for (size_t j = 0; j < k; ++j) {
    base[j] = mix[j].weight > 0
                  ? std::log(mix[j].weight) - std::log(mix[j].sd) - kLogSqrt2Pi
                  : -std::numeric_limits<double>::infinity();
    inv_sd[j] = 1 / mix[j].sd;
  }
  for (size_t i = 0; i < p.x.size(); ++i) {
    double* r = &resp[i * k];
    double top = -std::numeric_limits<double>::infinity();
    for (size_t j = 0; j < k; ++j) {
      const double z = (p.x[i] - mix[j].mean) * inv_sd[j];
      r[j] = base[j] - 0.5 * z * z;
      top = std::max(top, r[j]);
    }
    double sum = 0;
    for (size_t j = 0; j < k; ++j) sum += (r[j] = std::exp(r[j] - top));
    for (size_t j = 0; j < k; ++j) r[j] *= p.w[i] / sum;
    ll += p.w[i] * (top + std::log(sum));
  }
  for (size_t j = 0; j < k; ++j) {
    double nj = 0, sx = 0;
    for (size_t i = 0; i < p.x.size(); ++i) {
      nj += resp[i * k + j];
      sx += resp[i * k + j] * p.x[i];
    }
    // A component nobody belongs to keeps its place with weight 0; BIC
    // then charges it for nothing gained.
    if (nj < 1e-12 * p.n) {
      mix[j].weight = 0;
      continue;
    }
    const double mean = sx / nj;
    double ss = 0;
    for (size_t i = 0; i < p.x.size(); ++i) {
      ss += resp[i * k + j] * (p.x[i] - mean) * (p.x[i] - mean);
    }
    mix[j] = {nj / p.n, mean, std::max(sd_floor, std::sqrt(ss / nj))};
  }
  return ll;
}

// Runs EM from `mix` to convergence; returns the final log-likelihood.
double RunEm(const Weighted& p, std::vector<Gaussian>& mix, double sd_floor) {
  std::vector<double> resp(p.x.size() * mix.size());
  double prev = -std::numeric_limits<double>::infinity();
  for (int it = 0; it < kMaxEmIterations; ++it) {
    const double ll = EmStep(p, mix, sd_floor, resp);
    if (ll - prev < kEmTolerance * p.n) break;
    prev = ll;
  }
  // The log-likelihood of the parameters as they stand after the last M
  // step (one more E step, its update thrown away).
  std::vector<Gaussian> copy = mix;
  return EmStep(p, copy, sd_floor, resp);
}

// Starts: means at evenly spaced weighted quantiles, then `restarts` sets
// of means drawn from the data (k-means++ style, so they spread out).
std::vector<std::vector<Gaussian>> Starts(const Weighted& p, int k,
                                          uint64_t seed, const Moments& m) {
  std::vector<size_t> order(p.x.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return p.x[a] < p.x[b]; });
  const double sd0 = std::max(m.sd / k, 1e-9);
  std::vector<std::vector<Gaussian>> starts(1);
  double below = 0;
  size_t at = 0;
  for (int j = 0; j < k; ++j) {
    const double target = (j + 0.5) / k * p.n;
    while (at + 1 < order.size() && below + p.w[order[at]] < target) {
      below += p.w[order[at++]];
    }
    starts[0].push_back({1.0 / k, p.x[order[at]], sd0});
  }
  if (k == 1) return starts;
  std::mt19937_64 rng(seed);
  std::discrete_distribution<size_t> pick(p.w.begin(), p.w.end());
  std::vector<double> d2(p.x.size());
  for (int r = 0; r < kRandomRestarts; ++r) {
    std::vector<double> means = {p.x[pick(rng)]};
    while (static_cast<int>(means.size()) < k) {
      double total = 0;
      for (size_t i = 0; i < p.x.size(); ++i) {
        double d = std::numeric_limits<double>::infinity();
        for (double mu : means) d = std::min(d, (p.x[i] - mu) * (p.x[i] - mu));
        total += (d2[i] = p.w[i] * d);
      }
      if (total <= 0) {  // every point sits on a mean already
        means.push_back(p.x[pick(rng)]);
        continue;
      }
      std::discrete_distribution<size_t> far(d2.begin(), d2.end());
      means.push_back(p.x[far(rng)]);
    }
    std::vector<Gaussian> start;
    for (double mu : means) start.push_back({1.0 / k, mu, sd0});
    starts.push_back(std::move(start));
  }
  return starts;
}

Mixture FitWeighted(const Weighted& p, int k, uint64_t seed) {
  Mixture best;
  if (p.x.empty() || p.n <= 0 || k < 1) return best;
  k = static_cast<int>(std::min<size_t>(k, p.x.size()));
  const Moments m = MomentsOf(p);
  // A component may not shrink below 1% of the data's spread: otherwise
  // one could sit on a single repeated value (latencies are whole cycles)
  // and buy an unbounded likelihood.
  const double sd_floor = std::max(0.01 * m.sd, 1e-9 * (1 + std::abs(m.mean)));
  best.log_likelihood = -std::numeric_limits<double>::infinity();
  for (std::vector<Gaussian>& mix : Starts(p, k, seed, m)) {
    for (Gaussian& g : mix) g.sd = std::max(g.sd, sd_floor);
    const double ll = RunEm(p, mix, sd_floor);
    if (ll > best.log_likelihood) {
      best.components = std::move(mix);
      best.log_likelihood = ll;
    }
  }
  std::sort(
      best.components.begin(), best.components.end(),
      [](const Gaussian& a, const Gaussian& b) { return a.mean < b.mean; });
  best.bic = -2 * best.log_likelihood + (3.0 * k - 1) * std::log(p.n);
  return best;
}

Mixture FitWeightedByBic(const Weighted& p, int max_k) {
  Mixture best;
  for (int k = 1; k <= std::max(1, max_k); ++k) {
    Mixture m = FitWeighted(p, k, /*seed=*/1);
    if (k == 1 || m.bic < best.bic) best = std::move(m);
  }
  return best;
}

}  // namespace

Mixture FitMixture(std::span<const double> xs, int k, uint64_t seed) {
  return FitWeighted(Unweighted(xs), k, seed);
}

Mixture FitMixtureByBic(std::span<const double> xs, int max_k) {
  return FitWeightedByBic(Unweighted(xs), max_k);
}

namespace {

// Adjacent components whose sum has one mode (means closer than about two
// sds) are one peak, split only because real peaks are not Gaussian: merge
// them (moment matching) so "near" and "far" are the first two peaks.
std::vector<Gaussian> MergePeaks(const std::vector<Gaussian>& sorted) {
  std::vector<Gaussian> peaks;
  for (const Gaussian& g : sorted) {
    if (g.weight <= 0) continue;
    if (peaks.empty() ||
        g.mean - peaks.back().mean >= 2 * std::max(g.sd, peaks.back().sd)) {
      peaks.push_back(g);
      continue;
    }
    Gaussian& p = peaks.back();
    const double w = p.weight + g.weight;
    const double mean = (p.weight * p.mean + g.weight * g.mean) / w;
    const double second = (p.weight * (p.sd * p.sd + p.mean * p.mean) +
                           g.weight * (g.sd * g.sd + g.mean * g.mean)) /
                          w;
    p = {w, mean, std::sqrt(std::max(0.0, second - mean * mean))};
  }
  return peaks;
}

// Where the weighted densities of near and far cross between their means
// (bisection on the log ratio); the midpoint when they do not cross there.
double Crossing(const Gaussian& near, const Gaussian& far) {
  auto diff = [&](double x) {
    return std::log(near.weight) + LogNormal(x, near) - std::log(far.weight) -
           LogNormal(x, far);
  };
  double lo = near.mean, hi = far.mean;
  if (!(diff(lo) > 0 && diff(hi) < 0)) return 0.5 * (lo + hi);
  for (int i = 0; i < 100 && hi - lo > 1e-9 * (1 + std::abs(hi)); ++i) {
    const double mid = 0.5 * (lo + hi);
    (diff(mid) > 0 ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

absl::Status Validate(const LatencyMatrix& m) {
  if (m.sms <= 0 || m.lines <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "latency matrix: ", m.sms, " SMs x ", m.lines, " lines is empty"));
  }
  const size_t want = static_cast<size_t>(m.sms) * m.lines;
  if (m.cycles.size() != want) {
    return absl::InvalidArgumentError(
        absl::StrCat("latency matrix: ", m.cycles.size(), " cells for ", m.sms,
                     " SMs x ", m.lines, " lines (", want, " expected)"));
  }
  for (size_t i = 0; i < m.cycles.size(); ++i) {
    if (!std::isfinite(m.cycles[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat("latency matrix: cell ", i, " (SM ", i / m.lines,
                       ", line ", i % m.lines, ") is not a finite number"));
    }
  }
  return absl::OkStatus();
}

// Removes per-SM constant offsets (an SM uniformly slower than the rest):
// each row is shifted so its low quantile, which lies in the near peak,
// lands on the median of all rows' low quantiles.
std::vector<double> NormalizeRows(const LatencyMatrix& m) {
  std::vector<double> q(m.sms);
  for (int s = 0; s < m.sms; ++s) {
    auto row = m.cycles.begin() + static_cast<ptrdiff_t>(s) * m.lines;
    q[s] = Quantile(std::vector<double>(row, row + m.lines), kRowQuantile);
  }
  const double global = Quantile(q, 0.5);
  std::vector<double> out(m.cycles.size());
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = m.cycles[i] - q[i / m.lines] + global;
  }
  return out;
}

// The cells in bins of equal width (each at its members' mean), 1/kBins of
// the 1-99% range wide: far finer than any peak, so the fit is as from the
// cells themselves, at the cost of a few thousand points instead of up to
// 2^18 (SMs x lines). The range leaves outliers out, and they only add a
// few sparse bins.
Weighted BinCells(std::vector<double> cells) {
  const double lo = Quantile(cells, 0.01), hi = Quantile(cells, 0.99);
  const double width =
      std::max((hi - lo) / kBins, 1e-9 * (1 + std::abs(lo) + std::abs(hi)));
  std::sort(cells.begin(), cells.end());
  Weighted p;
  p.n = static_cast<double>(cells.size());
  for (size_t i = 0; i < cells.size();) {
    const double bin = std::floor(cells[i] / width);
    double sum = 0;
    size_t j = i;
    for (; j < cells.size() && std::floor(cells[j] / width) == bin; ++j) {
      sum += cells[j];
    }
    p.x.push_back(sum / (j - i));
    p.w.push_back(static_cast<double>(j - i));
    i = j;
  }
  return p;
}

// A set of lines as a bitset, for fast overlaps.
using Bits = std::vector<uint64_t>;

double Jaccard(const Bits& a, const Bits& b) {
  int both = 0, either = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    both += std::popcount(a[i] & b[i]);
    either += std::popcount(a[i] | b[i]);
  }
  return either == 0 ? 1.0 : static_cast<double>(both) / either;
}

bool Has(const Bits& b, int l) { return (b[l / 64] >> (l % 64)) & 1; }

struct Groups {
  std::vector<int> of;         // per SM
  std::vector<Bits> majority;  // per group: the lines most of it sees near
  std::vector<int> sizes;      // per group: SMs
  std::vector<std::vector<int>> counts;  // per group and line: SMs near
};

// Group j's majority near set from its counts (ties count as near).
void SetMajority(Groups& g, int j) {
  Bits& m = g.majority[j];
  std::fill(m.begin(), m.end(), 0);
  for (size_t l = 0; l < g.counts[j].size(); ++l) {
    if (g.sizes[j] > 0 && 2 * g.counts[j][l] >= g.sizes[j]) {
      m[l / 64] |= uint64_t{1} << (l % 64);
    }
  }
}

void Join(const std::vector<Bits>& near, int s, int j, Groups& g) {
  g.of[s] = j;
  ++g.sizes[j];
  for (size_t l = 0; l < g.counts[j].size(); ++l) {
    g.counts[j][l] += Has(near[s], static_cast<int>(l));
  }
  SetMajority(g, j);
}

// Counts and majorities from scratch, after SMs moved between groups.
void Recount(const std::vector<Bits>& near, int lines, Groups& g) {
  const size_t n = g.majority.size();
  g.sizes.assign(n, 0);
  g.counts.assign(n, std::vector<int>(lines));
  const std::vector<int> of = g.of;
  for (size_t s = 0; s < near.size(); ++s) {
    Join(near, static_cast<int>(s), of[s], g);
  }
}

// Drops empty groups and numbers the rest by their smallest SM id.
void Renumber(Groups& g) {
  std::map<int, int> first_sm;  // old group -> smallest SM
  for (size_t s = 0; s < g.of.size(); ++s) first_sm.try_emplace(g.of[s], s);
  std::vector<std::pair<int, int>> order;  // (smallest SM, old group)
  for (auto [group, sm] : first_sm) order.push_back({sm, group});
  std::sort(order.begin(), order.end());
  std::vector<int> renamed(g.majority.size(), -1);
  std::vector<Bits> majority;
  for (auto [sm, group] : order) {
    renamed[group] = static_cast<int>(majority.size());
    majority.push_back(std::move(g.majority[group]));
  }
  for (int& x : g.of) x = renamed[x];
  g.majority = std::move(majority);  // Recount redoes sizes and counts
}

// SMs whose near sets agree form a group: a leader pass (an SM joins the
// group whose majority it overlaps best, if enough; else founds one), then
// a few rounds of reassignment so the order of SMs matters little.
Groups GroupSms(const std::vector<Bits>& near, int lines) {
  Groups g;
  g.of.assign(near.size(), -1);
  const size_t words = (lines + 63) / 64;
  for (size_t s = 0; s < near.size(); ++s) {
    int best = -1;
    double best_j = kSameNodeJaccard;
    for (size_t j = 0; j < g.majority.size(); ++j) {
      const double jac = Jaccard(near[s], g.majority[j]);
      if (jac >= best_j) best = static_cast<int>(j), best_j = jac;
    }
    if (best < 0) {
      best = static_cast<int>(g.majority.size());
      g.majority.push_back(Bits(words));
      g.sizes.push_back(0);
      g.counts.emplace_back(lines);
    }
    Join(near, static_cast<int>(s), best, g);
  }
  for (int round = 0; round < kRegroupRounds; ++round) {
    bool moved = false;
    for (size_t s = 0; s < near.size(); ++s) {
      int best = g.of[s];
      double best_j = Jaccard(near[s], g.majority[best]);
      for (size_t j = 0; j < g.majority.size(); ++j) {
        const double jac = Jaccard(near[s], g.majority[j]);
        if (jac > best_j) best = static_cast<int>(j), best_j = jac;
      }
      moved |= best != g.of[s];
      g.of[s] = best;
    }
    Renumber(g);
    Recount(near, lines, g);
    if (!moved) break;
  }
  return g;
}

// A line's home: the node with the largest share of its SMs seeing the
// line near (the lowest-numbered on a tie).
std::vector<int> LineHomes(const std::vector<Bits>& near, const Groups& g,
                           int lines) {
  const int nodes = static_cast<int>(g.majority.size());
  std::vector<int> homes(lines);
  for (int l = 0; l < lines; ++l) {
    std::vector<int> seen(nodes);
    for (size_t s = 0; s < near.size(); ++s) {
      seen[g.of[s]] += Has(near[s], l);
    }
    double best = -1;
    for (int j = 0; j < nodes; ++j) {
      const double share = static_cast<double>(seen[j]) / g.sizes[j];
      if (share > best) best = share, homes[l] = j;
    }
  }
  return homes;
}

}  // namespace

// Cycles in the result (near, far, threshold, the mixture) are those of
// the offset-free rows: an SM whose latencies all sit 30 cycles higher is
// compared as if it had none, and near_cycles is the typical SM's.
absl::StatusOr<Topology> AnalyzeLatencies(const LatencyMatrix& first_hit) {
  if (absl::Status s = Validate(first_hit); !s.ok()) return s;
  const int sms = first_hit.sms, lines = first_hit.lines;
  const std::vector<double> cells = NormalizeRows(first_hit);
  Topology t;
  t.mixture = FitWeightedByBic(BinCells(cells), kMaxComponents);
  const std::vector<Gaussian> peaks = MergePeaks(t.mixture.components);
  t.near_cycles = peaks.front().mean;
  // One peak: a uniform L2, every hit near; a hit beyond 4 sd is an outlier.
  t.threshold = peaks.size() > 1 ? Crossing(peaks[0], peaks[1])
                                 : peaks[0].mean + 4 * peaks[0].sd;
  std::vector<Bits> near(sms, Bits((lines + 63) / 64));
  for (int s = 0; s < sms; ++s) {
    for (int l = 0; l < lines; ++l) {
      if (cells[static_cast<size_t>(s) * lines + l] <= t.threshold) {
        near[s][l / 64] |= uint64_t{1} << (l % 64);
      }
    }
  }
  Groups g;
  if (peaks.size() > 1) {
    g = GroupSms(near, lines);
  } else {
    g.of.assign(sms, 0);
    g.majority.assign(1, Bits((lines + 63) / 64));
    Recount(near, lines, g);
  }
  t.nodes = static_cast<int>(g.majority.size());
  t.sm_node = g.of;
  t.line_home = LineHomes(near, g, lines);
  t.far_cycles = t.nodes > 1 ? peaks[1].mean : t.near_cycles;
  size_t agree = 0;
  for (int s = 0; s < sms; ++s) {
    for (int l = 0; l < lines; ++l) {
      agree += Has(near[s], l) == (t.line_home[l] == t.sm_node[s]);
    }
  }
  t.agreement = static_cast<double>(agree) / (static_cast<double>(sms) * lines);
  return t;
}

uint64_t InterleaveGranularity(std::span<const int> homes,
                               uint64_t line_bytes) {
  std::vector<size_t> runs;
  for (size_t i = 0; i < homes.size(); ++i) {
    if (i == 0 || homes[i] != homes[i - 1]) runs.push_back(0);
    ++runs.back();
  }
  if (runs.size() < 2) return 0;
  // The first and last runs are cut by the ends of the sample: with runs
  // in between, they say nothing of the chunk size.
  std::span<const size_t> inner(runs);
  if (runs.size() >= 3) inner = inner.subspan(1, runs.size() - 2);
  std::map<size_t, int> count;
  for (size_t r : inner) ++count[r];
  // The most common length; on a tie the longer, as noise only cuts runs.
  size_t best = 0;
  int best_count = 0;
  for (auto [len, n] : count) {
    if (n >= best_count) best = len, best_count = n;
  }
  return best * line_bytes;
}

}  // namespace dmg::gpu

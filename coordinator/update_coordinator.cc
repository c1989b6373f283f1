#include "coordinator/update_coordinator.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace dmg::coordinator {

namespace {

// The keys of ParseCostConstants / FormatCostConstants, in print order.
constexpr std::pair<const char*, double CostConstants::*> kConstantKeys[] = {
    {"pull_ns", &CostConstants::pull_ns_per_visit},
    {"push_ns", &CostConstants::push_ns_per_visit},
    {"remote_ns", &CostConstants::remote_update_ns},
    {"atomic_ns", &CostConstants::atomic_ns},
    {"exchange_us", &CostConstants::exchange_us},
    {"gather_ns", &CostConstants::gather_ns_per_visit},
    {"pull_hit_ns", &CostConstants::pull_hit_ns},
    {"byte_ns", &CostConstants::byte_ns},
};

}  // namespace

absl::StatusOr<CostConstants> ParseCostConstants(const std::string& text,
                                                 const CostConstants& base) {
  CostConstants k = base;
  for (absl::string_view pair :
       absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    const std::vector<absl::string_view> kv = absl::StrSplit(pair, '=');
    double x = 0;
    if (kv.size() != 2 || !absl::SimpleAtod(kv[1], &x) || !std::isfinite(x) ||
        x < 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "cost constants: '%s' is not key=number (a finite number >= 0)",
          pair));
    }
    bool known = false;
    for (const auto& [key, field] : kConstantKeys) {
      if (absl::StripAsciiWhitespace(kv[0]) == key) {
        k.*field = x;
        known = true;
      }
    }
    if (!known) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "cost constants: unknown key '%s' (pull_ns, push_ns, remote_ns, "
          "atomic_ns, exchange_us, gather_ns, pull_hit_ns, byte_ns)",
          kv[0]));
    }
  }
  return k;
}

std::string FormatCostConstants(const CostConstants& k) {
  std::string out;
  for (const auto& [key, field] : kConstantKeys) {
    absl::StrAppendFormat(&out, "%s%s=%g", out.empty() ? "" : ",", key,
                          k.*field);
  }
  return out;
}

UpdateEstimate ChooseUpdates(const PushStep& step, const TransportCost& cost,
                             const CostConstants& k) {
  // Per compute node (they work in parallel), for its share of the edges.
  UpdateEstimate e;
  const double nodes = std::max(1, step.compute_nodes);
  const double others = (nodes - 1) / nodes;  // share of targets elsewhere
  const double edges = static_cast<double>(step.frontier_edges) / nodes;
  e.remote_updates = edges * others;
  // Distinct targets among U updates spread over R vertices (balls into
  // bins): what combining leaves.
  auto distinct = [](double balls, double bins) {
    bins = std::max(1.0, bins);
    return bins * -std::expm1(-balls / bins);
  };
  const double remote_vertices = static_cast<double>(step.vertices) * others;
  e.batch_entries = step.combines ? distinct(e.remote_updates, remote_vertices)
                                  : e.remote_updates;
  const double rtt = cost.round_trip_us;
  const double bw = std::max(1e-3, cost.bytes_per_us);
  const double threads = std::max(1, step.threads);
  const double exchange = kExchangeRoundTrips * rtt + k.exchange_us;
  // Batch: each remote update into an outbox, the entries (vertex + value)
  // written by the pusher and read by their owner, and a second exchange.
  const double entry = 4.0 + static_cast<double>(step.value_bytes);
  e.batch_us = e.remote_updates * k.remote_update_ns / 1000 / threads +
               2 * e.batch_entries * entry / bw + exchange;
  // Atomic: every update (its own vertices' too) a 16-byte compare-and-swap,
  // one in ten retried, in batches per worker; then the 64-byte lines the
  // atomics touched (by all nodes): the owner READs its own at once, the
  // others theirs when they touch them (counted here, once).
  const double atomics = edges * 1.1;
  const double batches =
      std::ceil(atomics / (kAtomicsPerRoundTrip * std::max(1, step.threads)));
  const double lines =
      distinct(edges * nodes, static_cast<double>(step.state_pages) * 64);
  // Plus the barrier that keeps atomics off pages not yet current (an
  // exchange, as batch's second one): left out at first, the sweep in
  // docs/performance-history.md showed atomic chosen where batch was 3x faster.
  e.atomic_us = atomics * k.atomic_ns / 1000 / threads + atomics * 16 / bw +
                batches * rtt + lines * 64 / bw + (lines >= 1 ? rtt : 0) +
                exchange;
  e.atomic = e.atomic_us < e.batch_us;
  return e;
}

DirectionEstimate ChooseDirection(const DirectionStep& step,
                                  const TransportCost& cost,
                                  const CostConstants& k) {
  DirectionEstimate e;
  const double nodes = std::max(1, step.compute_nodes);
  const double threads = std::max(1, step.threads);
  const double bw = std::max(1e-3, cost.bytes_per_us);
  const double share = 1.0 / nodes;
  // Pull: the node's range, every vertex and arc.
  const double range =
      (static_cast<double>(step.vertices) + static_cast<double>(step.arcs)) *
      share;
  e.pull_bytes =
      step.pull_cached ? 0 : static_cast<double>(step.pull_block_bytes) * share;
  const double pull_ns =
      step.every_vertex ? k.gather_ns_per_visit : k.pull_ns_per_visit;
  // A Gather's every arc is a hit (gather_ns holds it); a pull's hits are
  // the frontier's edges.
  const double hits =
      step.every_vertex ? 0 : static_cast<double>(step.frontier_edges) * share;
  // Bytes READ cost the link's time and the CPU's (parsing, checking and
  // keeping blocks), the workers' in parallel.
  const double byte_us = 1 / bw + k.byte_ns / 1000 / threads;
  e.pull_us = (range * pull_ns + hits * k.pull_hit_ns) / 1000 / threads +
              e.pull_bytes * byte_us;
  // Push: the node's share of the frontier and its arcs.
  const double edges = static_cast<double>(step.frontier_edges) * share;
  const double visits = static_cast<double>(step.frontier) * share + edges;
  e.push_bytes =
      step.push_cached ? 0 : edges * static_cast<double>(step.edge_bytes);
  if (!step.push_cached && step.push_keeps_blocks && step.push_blocks > 0) {
    // Whole blocks: of the range's B blocks, f frontier vertices spread
    // at random touch B (1 - e^(-f/B)).
    const double blocks = static_cast<double>(step.push_blocks) * share;
    const double f = static_cast<double>(step.frontier) * share;
    const double touched = blocks * (1 - std::exp(-f / blocks));
    e.push_bytes = touched * static_cast<double>(step.push_block_bytes) /
                   static_cast<double>(step.push_blocks);
  }
  e.push_us = visits * k.push_ns_per_visit / 1000 / threads;
  if (step.compute_nodes > 1) {
    const double others = (nodes - 1) / nodes;
    const double remote =
        edges *
        (step.remote_share >= 0 ? std::min(1.0, step.remote_share) : others);
    // Combined per target: at most the other nodes' vertices.
    const double entries =
        std::min(remote * (step.sent_per_remote >= 0
                               ? std::min(1.0, step.sent_per_remote)
                               : 1.0),
                 static_cast<double>(step.vertices) * others);
    const double entry_bytes = 4.0 + static_cast<double>(step.value_bytes);
    e.push_bytes += 2 * entries * entry_bytes;
    // The update exchange's second round comes only when some node sent an
    // update: with E expected over all nodes, at 1 - e^-E.
    const double second = -std::expm1(-entries * nodes);
    e.push_us +=
        remote * k.remote_update_ns / 1000 / threads +
        second * (kExchangeRoundTrips * cost.round_trip_us + k.exchange_us);
  }
  e.push_us += e.push_bytes * byte_us;
  e.pull = e.pull_us < e.push_us;
  return e;
}

RefreshEstimate ChooseRefresh(const RefreshStep& step,
                              const TransportCost& cost) {
  RefreshEstimate e;
  const double lines = static_cast<double>(step.pending_lines);
  const double line = static_cast<double>(step.line_bytes);
  const double bw = std::max(1e-3, cost.bytes_per_us);
  const double rtt = cost.round_trip_us;
  // At most one READ a pending line, however many arcs reach it.
  e.touches = std::min(lines, std::max(0.0, step.frontier_edges) *
                                  std::clamp(step.remote_share, 0.0, 1.0));
  e.bulk_bytes = lines * line;
  e.bulk_us = lines > 0 ? rtt + e.bulk_bytes / bw : 0;
  e.demand_bytes = e.touches * line;
  // Each a round trip of its own (an accessor waits for it), the workers'
  // in parallel.
  e.demand_us = e.touches * (rtt + line / bw) / std::max(1, step.threads);
  e.demand = e.demand_us < e.bulk_us;
  if (step.stale_ok) {
    // At worst every remote arc an update its owner refuses (written by
    // this node, READ by the owner): not capped by the lines, which a
    // batch READs once whatever number of arcs reach them.
    const double remote_arcs = std::max(0.0, step.frontier_edges) *
                               std::clamp(step.remote_share, 0.0, 1.0);
    e.stale_us = remote_arcs * 2 * step.update_bytes / bw;
    e.stale = e.stale_us < std::min(e.bulk_us, e.demand_us);
  }
  return e;
}

uint64_t DemandBudget(uint64_t pending_lines, uint64_t line_bytes,
                      const TransportCost& cost) {
  if (pending_lines == 0) return 0;
  const double bw = std::max(1e-3, cost.bytes_per_us);
  const double rtt = std::max(0.0, cost.round_trip_us);
  const double line = static_cast<double>(line_bytes);
  const double bulk_us = rtt + static_cast<double>(pending_lines) * line / bw;
  const double each_us = rtt + line / bw;
  return static_cast<uint64_t>(
      std::min(static_cast<double>(pending_lines), bulk_us / each_us));
}

}  // namespace dmg::coordinator

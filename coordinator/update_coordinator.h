// The adaptive update coordinator: for a push step of a job with several
// compute nodes, how its updates to vertices that other nodes own travel.
//
//   batch   combined per target on the pushing node with the update's own
//           combine (Add sums, Min keeps the least, Claim the first), then
//           written once to each owner's inbox; the owner applies them.
//           Two exchanges; bytes shrink by the combining.
//   atomic  a remote compare-and-swap per update, straight into the
//           owner's state on its memory node; the touched pages are then
//           read back by every node. No combining, no inbox: cheap when
//           updates are few and scattered, costly when many.
// (The third way, none, is a pull step: the engine's direction choice.)
//
// As built, atomic also pays a barrier (owners make their pages current
// first) and a read-back of the touched lines; with the fitted constants
// (a compare-and-swap costs ~175 ns of CPU on the development machine,
// an outbox entry nothing measurable beside the push's visit) its
// estimate never beats batch's there, and the forced runs agree (atomic
// stays for ablations and for fabrics where a fit says otherwise; see
// docs/COST_MODEL.md).
//
// The choice compares the two costs from the step's expected updates
// (frontier edges times the share of targets other nodes own), how much
// combining can save (expected distinct targets), and the transport's
// measured round-trip time and bandwidth. A pure function, so it is tested
// on its own and every input and estimate goes into the run's statistics.
#ifndef DMG_COORDINATOR_UPDATE_COORDINATOR_H_
#define DMG_COORDINATOR_UPDATE_COORDINATOR_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace dmg::coordinator {

// What the transport costs, measured at job start.
struct TransportCost {
  double round_trip_us = 20;   // one small READ, posted and waited for
  double bytes_per_us = 1000;  // large READs
};

// The model's CPU and exchange constants: per vertex or arc a pull or push
// visits, per update made to another node's vertex, per compare-and-swap,
// the fixed cost of one exchange beyond its round trips (the nodes'
// rendezvous), per vertex or arc a Gather visits (a pull of every vertex
// with no frontier to test: PageRank's), per arc of a pull from an
// active source (the frontier's edges), and per byte READ. Single-threaded
// figures. The defaults are fitted on the development machine from the
// per-superstep figures of `--stats_json` runs
// (deploy/experiments/fit_coordinator.py; its output and the runs in
// docs/COST_MODEL.md); `dmg run --cost_constants` takes a fit made on the
// user's own cluster. ChooseUpdates and ChooseDirection read them.
struct CostConstants {
  double pull_ns_per_visit = 2.57;
  double push_ns_per_visit = 23.7;
  double remote_update_ns = 0;  // the fit finds it inside push_ns
  double atomic_ns = 175;
  double exchange_us = 48.3;
  double gather_ns_per_visit = 2.44;
  // A pull's arc whose source is in the frontier (the value, the combine)
  // on top of its visit.
  double pull_hit_ns = 1.21;
  // CPU per byte READ from the memory nodes (blocks parsed, checked and
  // kept), beside the link's time for it.
  double byte_ns = 2.01;
};

// "pull_ns=4.1,push_ns=9,remote_ns=20,atomic_ns=60,exchange_us=25" (the
// fit's output; keys in any order, any subset, the rest as `base`): an
// unknown key, a value that is not a finite number >= 0, or a malformed
// pair is an InvalidArgument naming it.
absl::StatusOr<CostConstants> ParseCostConstants(
    const std::string& text, const CostConstants& base = CostConstants{});
std::string FormatCostConstants(const CostConstants& k);

struct PushStep {
  uint64_t vertices = 0;        // in the graph
  uint64_t frontier_edges = 0;  // arcs the step pushes along (estimated)
  int compute_nodes = 1;
  int threads = 1;           // per compute node
  uint64_t value_bytes = 8;  // of one update's value
  bool combines = true;      // the update has a combine that merges
  uint64_t state_pages = 0;  // 4 KiB pages of the target state array
};

struct UpdateEstimate {
  bool atomic = false;
  double remote_updates = 0;  // expected updates to other nodes' vertices
  double batch_entries = 0;   // after combining
  double batch_us = 0;        // estimated time of each way
  double atomic_us = 0;
};

// Per-batch figures the estimates assume (they are the engine's).
inline constexpr double kAtomicsPerRoundTrip = 1024;
inline constexpr double kExchangeRoundTrips = 4;  // one exchange's

UpdateEstimate ChooseUpdates(const PushStep& step, const TransportCost& cost,
                             const CostConstants& k = CostConstants{});

// The direction of an EdgeMap whose pull reads every candidate's whole
// adjacency (updates that are not first-wins: Min, Add; a first-wins pull
// stops at the first frontier neighbour and keeps Ligra's rule). A pull
// visits every vertex and arc of the node's range and READs the range's
// blocks unless the hot-block cache already holds them; a push visits the
// frontier's vertices and arcs, READs their adjacency, and with several
// compute nodes sends the updates to other nodes' vertices through the
// outboxes (combined, written, read and applied by the owner: a per-update
// CPU cost, the entries' bytes and an exchange). Per compute node (they
// work in parallel on even shares). Inputs are the same on every node, so
// all choose alike.
struct DirectionStep {
  uint64_t vertices = 0;          // in the graph
  uint64_t arcs = 0;              // in the graph
  uint64_t frontier = 0;          // frontier vertices (all nodes')
  uint64_t frontier_edges = 0;    // their arcs along the push direction
  uint64_t pull_block_bytes = 0;  // the pull direction's blocks, all nodes'
  bool pull_cached = false;       // the hot cache holds them
  bool push_cached = false;       // the push direction's blocks likewise
  // The push reads every block it touches whole, to keep it (the hot
  // cache can hold the direction; updates that are not first-wins).
  bool push_keeps_blocks = false;
  uint64_t push_blocks = 0;       // the push direction's, all nodes'
  uint64_t push_block_bytes = 0;  // their bytes
  uint64_t edge_bytes = 4;        // per arc in a block (8 when weighted)
  // A Gather: every vertex is in the frontier and a pull visit tests no
  // frontier (gather_ns_per_visit, not pull_ns_per_visit).
  bool every_vertex = false;
  uint64_t value_bytes = 8;  // of one update
  int compute_nodes = 1;
  int threads = 1;  // per compute node
  // With several compute nodes, as measured on the last pushes (every
  // node's figures, as posted): the share of a push's arcs that end in
  // other nodes' ranges, and the updates sent per such arc (after the
  // candidate test and combining). Negative: not measured yet (arcs spread
  // as the ranges are, and every one sent). A road network's ranges keep
  // ~0.1-0.4% of the arcs across; taking (N-1)/N on 4 nodes, weighted SSSP
  // on road-NY pulled in half its steps.
  double remote_share = -1;
  double sent_per_remote = -1;
};

struct DirectionEstimate {
  bool pull = false;
  double pull_us = 0, push_us = 0;        // estimated time of each way
  double pull_bytes = 0, push_bytes = 0;  // remote bytes per node
};

DirectionEstimate ChooseDirection(const DirectionStep& step,
                                  const TransportCost& cost,
                                  const CostConstants& k = CostConstants{});

// How a compute node takes in the state lines other nodes changed (they
// stay pending after each collective) before a push step whose updates
// read their targets' state (first-wins claims, or a condition on targets):
//   bulk    the first read of a pending line READs every pending line of
//           its array, in one batch: a round trip and every pending byte;
//   demand  an accessor that reads a pending line READs that line alone
//           (one round trip each; the workers overlap theirs).
//   stale   (first-wins updates only: the owner's apply refuses a claimed
//           target) a remote target on a pending line is taken as unset,
//           nothing READ: the update goes to its owner, which refuses it
//           if it was claimed. At worst an update too many a touch, in the
//           exchange the step makes anyway.
// Demand moves only the lines of the remote targets the step's arcs reach.
// How many that is comes from the share of this node's arcs that reached
// another node's vertex in its last push step (measured: a graph with
// locality cut into ranges, a road network, reaches few; a random one
// reaches (N-1)/N). Bulk costs a round trip and the pending bytes.
struct RefreshStep {
  uint64_t pending_lines = 0;  // this node's, over all its state arrays
  uint64_t line_bytes = 64;
  double frontier_edges = 0;  // the arcs this node's push will scan
  double remote_share = 1;    // of those, the share reaching other nodes
  int threads = 1;            // per compute node
  // Stale allowed (first-wins updates), and an update's bytes on the wire.
  bool stale_ok = false;
  double update_bytes = 8;
};

struct RefreshEstimate {
  bool demand = false;
  bool stale = false;  // chosen over both (only with stale_ok)
  double touches = 0;  // pending lines the step is expected to read
  double bulk_us = 0, demand_us = 0, stale_us = 0;
  double bulk_bytes = 0, demand_bytes = 0;
};

RefreshEstimate ChooseRefresh(const RefreshStep& step,
                              const TransportCost& cost);

// For an operation whose reads of other nodes' vertices cannot be counted
// beforehand (a pull before its first full scan has recorded the sources,
// a VertexMap chasing labels): how many pending lines of an array it reads
// one at a time before it READs the rest in one batch. Ski rental: demand
// reads until their round trips have cost what the batch would, then the
// batch; never more than twice the better of the two in hindsight. A road
// network's pull touches a few hundred boundary lines (all on demand on a
// fast transport); a random graph's touches them all (the batch after a
// few).
uint64_t DemandBudget(uint64_t pending_lines, uint64_t line_bytes,
                      const TransportCost& cost);

}  // namespace dmg::coordinator

#endif  // DMG_COORDINATOR_UPDATE_COORDINATOR_H_

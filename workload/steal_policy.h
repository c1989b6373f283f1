// Stage 2 of the workload manager, across compute nodes: whether a step
// (a push's frontier chunks, a dense scan's units) is worth stealing in.
//
// Every node derives the step's work items from the same global frontier,
// so each can also weigh every owner's share of the step (its frontier
// members' edges plus alpha times their number, stage 1's cost) and reach
// the same answer without a message.
//
// Stealing has a price: a claim per taken item is a remote fetch-and-add, a
// taken item's adjacency comes from the owner's blocks (not the taker's hot
// ones), and every update it makes travels through the outbox and is
// applied again by the owner. It repays that only when the heaviest owner
// would otherwise keep the others waiting long. On road-NY (600 supersteps
// of a few thousand frontier vertices each) stealing in every step added
// 13% (CC) and 28% (SSSP) remote bytes and saved no time; see
// docs/performance-history.md. So a step steals only when the heaviest owner's
// share exceeds the mean by both a fraction and an absolute amount.
#ifndef DMG_WORKLOAD_STEAL_POLICY_H_
#define DMG_WORKLOAD_STEAL_POLICY_H_

#include <cstdint>
#include <span>
#include <vector>

namespace dmg::workload {

struct StealRule {
  // The heaviest share must exceed the mean by this fraction of the mean...
  double min_excess_fraction = 0.25;
  // ...and by this much work (edges + alpha * vertices): below it, the
  // wait it could save is a few hundred microseconds at most.
  double min_excess_work = 1 << 16;
};

// What a unit of work costs, in the coordinator's fitted terms
// (coordinator::CostConstants and the measured transport): done by its
// owner, or by a node that took it (which also reads the owner's blocks
// instead of its own cached ones, and sends each update it makes through
// the outbox for the owner to apply again); and the steal's own cost (the
// claims' round trips, an exchange the step would not otherwise pay).
// `residue_ns[k]`: what stays with owner k per unit taken from it (empty:
// nothing). A push's taken updates to the owner's own vertices come back
// to it through its inbox, so an owner whose arcs mostly stay in its range
// sheds the scan of a taken unit but keeps most of the applying; an owner
// whose residue reaches its own price cannot gain from being stolen from.
// Compute nodes that share a host's cores: per node, its host's index and
// its threads; per host, the cores its nodes may use. Empty: every node
// has a core a thread to itself.
struct SharedCores {
  std::vector<int> host;
  std::vector<double> threads;
  std::vector<double> cores;
};

// Where nodes share a host's cores, the step's end without stealing (a
// host's nodes end no sooner than sum(work x threads) over its cores) and
// the least any schedule ends at (all of it over all the cores the nodes
// can use). Per node `work` is in its threads' time; both bounds are in
// its units. They bind only where a host has fewer cores than threads
// (four one-thread nodes on two cores: twice the mean share, both), and
// there a taker on the host gains what its owner loses. 0 without shared
// cores or when a node is missing.
struct CoreBounds {
  double alone = 0;
  double floor = 0;
};
CoreBounds SharedCoreBounds(std::span<const double> work,
                            const SharedCores& cores);

struct StealPrices {
  double owner_ns = 1;
  double taker_ns = 1;
  double fixed_ns = 0;
  std::vector<double> residue_ns;
  SharedCores cores;  // the gain counts from SharedCoreBounds
  double residue(size_t owner) const {
    return owner < residue_ns.size() ? residue_ns[owner] : 0.0;
  }
};

struct StealDecision {
  bool steal = false;
  double max_work = 0;   // the heaviest owner's share
  double mean_work = 0;  // over all owners
  // The model's prediction: how much sooner the slowest node finishes
  // when the others take its work at the taker's price (so the ones that
  // finish first each take until all end together), both ends within
  // SharedCoreBounds, and what the steal costs.
  double gain_us = 0;
  double cost_us = 0;
  // What stays with the heaviest owner per unit taken from it (ns).
  double residue_ns = 0;
  // Per node, when stealing: the units of others' work it may take before
  // the balanced finish (0 for the nodes that shed). A node that took more
  // would end after the owners it helps: at the taker's price, a taken unit
  // costs it more than it saves them.
  std::vector<double> room;
  std::vector<double> work;  // the shares it was decided on (room's units)
};

// `work[k]`: owner k's share of the step. Steals when the rule's gate
// holds (the heaviest share exceeds the mean by its fraction and its
// amount) and the predicted gain exceeds the predicted cost. One owner or
// none: no stealing.
StealDecision DecideSteal(std::span<const double> work,
                          const StealPrices& prices,
                          const StealRule& rule = {});
inline StealDecision DecideSteal(std::span<const double> work,
                                 const StealRule& rule = {}) {
  return DecideSteal(work, StealPrices{}, rule);
}

// The time at which every node ends when those that would finish first
// take work from the others (at `taker_ns` a unit instead of `owner_ns`)
// until all end together, each unit taken from owner k saving it
// owner_ns - residue(k); in ns. The slowest node's time without stealing
// is max(work) * owner_ns.
double BalancedFinishNs(std::span<const double> work,
                        const StealPrices& prices);

}  // namespace dmg::workload

#endif  // DMG_WORKLOAD_STEAL_POLICY_H_

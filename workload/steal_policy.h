// Stage 2 of the workload manager, across compute nodes: whether a push
// step is worth stealing in.
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
// docs/PERFORMANCE.md. So a step steals only when the heaviest owner's
// share exceeds the mean by both a fraction and an absolute amount.
#ifndef DMG_WORKLOAD_STEAL_POLICY_H_
#define DMG_WORKLOAD_STEAL_POLICY_H_

#include <cstdint>
#include <span>

namespace dmg::workload {

struct StealRule {
  // The heaviest share must exceed the mean by this fraction of the mean...
  double min_excess_fraction = 0.25;
  // ...and by this much work (edges + alpha * vertices): below it, the
  // wait it could save is a few hundred microseconds at most.
  double min_excess_work = 1 << 16;
};

struct StealDecision {
  bool steal = false;
  double max_work = 0;   // the heaviest owner's share
  double mean_work = 0;  // over all owners
};

// `work[k]`: owner k's share of the step. One owner or none: no stealing.
StealDecision DecideSteal(std::span<const double> work,
                          const StealRule& rule = {});

}  // namespace dmg::workload

#endif  // DMG_WORKLOAD_STEAL_POLICY_H_

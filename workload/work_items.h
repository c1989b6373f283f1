// Stage 2 of the workload manager across compute nodes: a push step's work
// items (a pull step's are its nodes' units of blocks) and how a node
// claims them.
//
// Every node derives the same items from the same global frontier: its
// members ascending, grouped by grain-sized chunk of vertices (ranges start
// on chunk boundaries, so each chunk, and so each item, is one owner's),
// an item also ending after `max_members` members, so a node that has run
// out of work takes pieces small enough to finish before the owner would
// have, however dense a chunk is. Each owner's items sit behind a shared
// cursor in the job record (Cluster::Claim: a fetch-and-add). The owner
// claims its own in guided groups (each a share of what was left at the
// last claim, so the last claims are single items and a node taking
// leftovers is not kept waiting behind a big group); the others take one
// item a claim.
#ifndef DMG_WORKLOAD_WORK_ITEMS_H_
#define DMG_WORKLOAD_WORK_ITEMS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "store/graph.h"

namespace dmg::workload {

// Members [begin, end) of the sorted frontier.
struct WorkItem {
  uint32_t begin = 0, end = 0;
};

// Per owner (owners of them), its items in member order. `members`
// ascending; owner_of(v) < owners.
std::vector<std::vector<WorkItem>> FrontierItems(
    std::span<const store::VertexId> members, uint64_t grain,
    uint32_t max_members, int owners,
    const std::function<int(store::VertexId)>& owner_of);

// The size of an owner's next claim of its own items: `left` unclaimed of
// them, `claimers` workers over all nodes; at least 1.
inline uint64_t GuidedGroup(uint64_t left, uint64_t claimers) {
  const uint64_t parts = 4 * (claimers == 0 ? 1 : claimers);
  return left / parts > 0 ? left / parts : 1;
}

// How much of the others' work a node's workers may take in one round
// (the steal model's room for it: past it, a taken unit at the taker's
// price would end this node after the owners it helps). Shared by the
// node's workers. Default: no limit.
class TakeBudget {
 public:
  TakeBudget() = default;
  // `room`: units this node may take; `item_units[k]`: what one of node
  // k's items is worth (its share over its items).
  TakeBudget(double room, std::vector<double> item_units)
      : room_(room), item_units_(std::move(item_units)) {}
  // Whether one more of node k's items fits: taken so far plus half an
  // item within the room (an item that crosses it by less than half is
  // taken; the first one always is).
  bool Allows(int k) const {
    const double taken = taken_.load(std::memory_order_relaxed);
    return taken == 0 || taken + Units(k) / 2 < room_;
  }
  void Took(int k) {
    double taken = taken_.load(std::memory_order_relaxed);
    while (!taken_.compare_exchange_weak(taken, taken + Units(k),
                                         std::memory_order_relaxed)) {
    }
  }
  double taken() const { return taken_.load(std::memory_order_relaxed); }

 private:
  double Units(int k) const {
    return k < static_cast<int>(item_units_.size()) ? item_units_[k] : 0.0;
  }
  double room_ = std::numeric_limits<double>::infinity();
  std::vector<double> item_units_;
  std::atomic<double> taken_{0.0};
};

// How many items a worker's claim loop ran: its node's own, and taken
// from other nodes.
struct ClaimTally {
  uint64_t own = 0, taken = 0;
};

// One worker's share of a work round across nodes. `items[k]`: how many
// items node k has, behind its shared cursor; `claim(k, n)` advances node
// k's cursor by n and returns where it was (Cluster::Claim); `run(k, i)`
// does node k's item i. Node `me`'s items come first, in guided groups
// (GuidedGroup over `claimers`, every worker of every node), then the
// others' that are left, one per claim, from node me + 1 on, while
// `budget` allows. Every item of every node is run exactly once across all
// the claimers of the round, however their claims interleave (an owner
// claims its own to the end whatever the takers do).
template <typename Claim, typename Run>
absl::Status RunClaimedItems(int me, std::span<const uint64_t> items,
                             uint64_t claimers, Claim&& claim, Run&& run,
                             ClaimTally& tally, TakeBudget* budget = nullptr) {
  const int nodes = static_cast<int>(items.size());
  const uint64_t mine = items[me];
  uint64_t group = GuidedGroup(mine, claimers);
  for (;;) {
    absl::StatusOr<uint64_t> at = claim(me, group);
    if (!at.ok()) return at.status();
    if (*at >= mine) break;
    const uint64_t end = *at + group < mine ? *at + group : mine;
    for (uint64_t i = *at; i < end; ++i) {
      if (absl::Status s = run(me, i); !s.ok()) return s;
      ++tally.own;
    }
    group = GuidedGroup(mine - end, claimers);
  }
  for (int step = 1; step < nodes; ++step) {
    const int victim = (me + step) % nodes;
    for (;;) {
      if (budget != nullptr && !budget->Allows(victim)) break;
      absl::StatusOr<uint64_t> at = claim(victim, 1);
      if (!at.ok()) return at.status();
      if (*at >= items[victim]) break;
      if (absl::Status s = run(victim, *at); !s.ok()) return s;
      if (budget != nullptr) budget->Took(victim);
      ++tally.taken;
    }
  }
  return absl::OkStatus();
}

}  // namespace dmg::workload

#endif  // DMG_WORKLOAD_WORK_ITEMS_H_

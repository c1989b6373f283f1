// Stage 2 of the workload manager across compute nodes: a push step's work
// items and how a node claims them.
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

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

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

}  // namespace dmg::workload

#endif  // DMG_WORKLOAD_WORK_ITEMS_H_

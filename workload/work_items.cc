#include "workload/work_items.h"

namespace dmg::workload {

std::vector<std::vector<WorkItem>> FrontierItems(
    std::span<const store::VertexId> members, uint64_t grain,
    uint32_t max_members, int owners,
    const std::function<int(store::VertexId)>& owner_of) {
  std::vector<std::vector<WorkItem>> items(owners);
  for (uint32_t i = 0; i < members.size();) {
    uint32_t j = i + 1;
    while (j < members.size() && members[j] / grain == members[i] / grain &&
           j - i < max_members) {
      ++j;
    }
    items[owner_of(members[i])].push_back({i, j});
    i = j;
  }
  return items;
}

}  // namespace dmg::workload

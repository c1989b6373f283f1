#include "compute_node/barrier.h"

namespace dmg::compute {

absl::Status Barrier::Arrive(transport::Endpoint& ep, uint64_t superstep) {
  uint64_t old = 0;
  ep.FetchAndAdd(counter_.node, counter_.id, 0, 1, &old);
  if (absl::Status s = ep.Flush(); !s.ok()) return s;
  const uint64_t target = nodes_ * superstep;
  for (uint64_t seen = old + 1; seen < target;) {
    ep.Read(counter_.node, counter_.id, 0, &seen, 8);
    if (absl::Status s = ep.Flush(); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace dmg::compute

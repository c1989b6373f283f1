// The superstep barrier between compute nodes: a fetch-and-add counter in a
// 64-byte region of memory node 0. Each node adds one when it finishes a
// superstep, then READs the counter until every node has: after superstep
// s the counter reaches nodes * s. No messages, no coordinator process.
#ifndef DMG_COMPUTE_NODE_BARRIER_H_
#define DMG_COMPUTE_NODE_BARRIER_H_

#include <cstdint>

#include "absl/status/status.h"
#include "transport/transport.h"

namespace dmg::compute {

class Barrier {
 public:
  // `counter` is a region (at least 8 bytes, zeroed) shared by `nodes`
  // compute nodes.
  Barrier(transport::RegionInfo counter, uint64_t nodes)
      : counter_(counter), nodes_(nodes) {}

  // Arrives at the end of superstep `superstep` (1-based) and waits for
  // the other nodes, polling with `endpoint`.
  absl::Status Arrive(transport::Endpoint& endpoint, uint64_t superstep);

  const transport::RegionInfo& region() const { return counter_; }
  uint64_t nodes() const { return nodes_; }

 private:
  transport::RegionInfo counter_;
  uint64_t nodes_;
};

}  // namespace dmg::compute

#endif  // DMG_COMPUTE_NODE_BARRIER_H_

// The cluster `dmg run` starts in its own process when no --memory_nodes are
// given: memory nodes holding the store image (one, or as many as the image
// is laid out for, each with its slice), reached through the local transport
// (copies, never shared pointers), and one compute engine.
#ifndef DMG_TOOLS_EMBEDDED_CLUSTER_H_
#define DMG_TOOLS_EMBEDDED_CLUSTER_H_

#include <memory>

#include "absl/status/statusor.h"
#include "compute_node/engine.h"
#include "memory_node/memory_node.h"
#include "store/store_image.h"
#include "transport/local_transport.h"

namespace dmg::cli {

class EmbeddedCluster {
 public:
  static absl::StatusOr<std::unique_ptr<EmbeddedCluster>> Start(
      store::StoreImage image, const compute::EngineOptions& options,
      memory_node::MemoryNode::Options node_options = {});

  compute::Engine& engine() { return *engine_; }
  memory_node::MemoryNode& memory_node(int i = 0) { return *nodes_[i]; }
  transport::Transport& transport() { return *transport_; }

 private:
  EmbeddedCluster() = default;
  std::vector<std::unique_ptr<memory_node::MemoryNode>> nodes_;
  std::unique_ptr<transport::LocalTransport> transport_;
  std::unique_ptr<compute::Engine> engine_;
};

}  // namespace dmg::cli

#endif  // DMG_TOOLS_EMBEDDED_CLUSTER_H_

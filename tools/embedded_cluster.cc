#include "tools/embedded_cluster.h"

namespace dmg::cli {

absl::StatusOr<std::unique_ptr<EmbeddedCluster>> EmbeddedCluster::Start(
    store::StoreImage image, const compute::EngineOptions& options,
    memory_node::MemoryNode::Options node_options) {
  if (image.superblock().num_memory_nodes != 1) {
    return absl::InvalidArgumentError(
        "the embedded cluster has one memory node; this image is laid out "
        "for " +
        std::to_string(image.superblock().num_memory_nodes));
  }
  auto cluster = std::unique_ptr<EmbeddedCluster>(new EmbeddedCluster());
  cluster->node_ = std::make_unique<memory_node::MemoryNode>(0, node_options);
  if (absl::Status s = cluster->node_->LoadStore(std::move(image)); !s.ok()) {
    return s;
  }
  cluster->transport_ = std::make_unique<transport::LocalTransport>(
      std::vector<transport::MemoryTarget*>{cluster->node_.get()});
  absl::StatusOr<std::unique_ptr<compute::Engine>> engine =
      compute::Engine::Create(*cluster->transport_, options);
  if (!engine.ok()) return engine.status();
  cluster->engine_ = *std::move(engine);
  return cluster;
}

}  // namespace dmg::cli

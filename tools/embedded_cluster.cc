#include "tools/embedded_cluster.h"

#include <algorithm>
#include <cstring>
#include <thread>

namespace dmg::cli {

absl::StatusOr<std::unique_ptr<EmbeddedCluster>> EmbeddedCluster::Start(
    store::StoreImage image, const compute::EngineOptions& options,
    memory_node::MemoryNode::Options node_options) {
  auto cluster = std::unique_ptr<EmbeddedCluster>(new EmbeddedCluster());
  const store::Superblock sb = image.superblock();
  std::vector<transport::MemoryTarget*> targets;
  for (uint32_t k = 0; k < sb.num_memory_nodes; ++k) {
    auto node = std::make_unique<memory_node::MemoryNode>(k, node_options);
    absl::Status s;
    if (sb.num_memory_nodes == 1) {
      s = node->LoadStore(std::move(image));
    } else {
      auto [begin, end] = store::NodeSlice(sb, k);
      AlignedBuffer slice(end - begin);
      std::memcpy(slice.data(), image.bytes().data() + begin, end - begin);
      s = node->LoadStore(std::move(slice));
    }
    if (!s.ok()) return s;
    targets.push_back(node.get());
    cluster->nodes_.push_back(std::move(node));
  }
  cluster->transport_ = std::make_unique<transport::LocalTransport>(targets);
  if (absl::Status s = cluster->StartEngines(options); !s.ok()) return s;
  return cluster;
}

absl::Status EmbeddedCluster::RestartEngines(
    const compute::EngineOptions& options) {
  engines_.clear();  // frees their state arrays on the memory nodes
  return StartEngines(options);
}

absl::Status EmbeddedCluster::StartEngines(
    const compute::EngineOptions& options) {
  // The compute nodes start together (they meet while starting), one
  // thread each.
  const int nodes = std::max(1, options.cluster.nodes);
  std::vector<absl::StatusOr<std::unique_ptr<compute::Engine>>> engines;
  for (int k = 0; k < nodes; ++k) {
    engines.emplace_back(absl::UnknownError("not started"));
  }
  std::vector<std::thread> threads;
  for (int k = 0; k < nodes; ++k) {
    threads.emplace_back([&, k] {
      compute::EngineOptions mine = options;
      mine.cluster.id = k;
      if (k > 0) mine.on_superstep = nullptr;  // node 0 speaks for the job
      engines[k] = compute::Engine::Create(*transport_, mine);
    });
  }
  for (std::thread& t : threads) t.join();
  for (auto& e : engines) {
    if (!e.ok()) return e.status();
    engines_.push_back(*std::move(e));
  }
  return absl::OkStatus();
}

}  // namespace dmg::cli

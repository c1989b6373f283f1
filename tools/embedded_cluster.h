// The cluster `dmg run` starts in its own process when no --memory_nodes are
// given: memory nodes holding the store image (one, or as many as the image
// is laid out for, each with its slice), reached through the local transport
// (copies, never shared pointers), and one compute engine — or, with
// options.cluster.nodes > 1, that many compute nodes as separate engines,
// each with its own endpoints and cache, meeting through memory node 0 as
// separate processes would.
#ifndef DMG_TOOLS_EMBEDDED_CLUSTER_H_
#define DMG_TOOLS_EMBEDDED_CLUSTER_H_

#include <pthread.h>

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

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

  // Ends the compute nodes' run and starts them afresh on the same memory
  // nodes, with `options` (a new job name for each, when several): the
  // next trial of `dmg run --trials`, on the graph loaded once.
  absl::Status RestartEngines(const compute::EngineOptions& options);

  compute::Engine& engine(int k = 0) { return *engines_[k]; }
  int compute_nodes() const { return static_cast<int>(engines_.size()); }
  // Runs fn(engine) on every compute node at once, one thread each, and
  // returns the results in node order.
  template <typename Fn>
  auto RunEverywhere(Fn fn) -> std::vector<decltype(fn(engine(0)))> {
    std::vector<std::optional<decltype(fn(engine()))>> out(engines_.size());
    std::vector<std::thread> threads;
    for (size_t k = 1; k < engines_.size(); ++k) {
      threads.emplace_back([&, k] {
        // "dmg-node-K" in top -H and perf (node 0 is the caller's thread).
        pthread_setname_np(pthread_self(),
                           ("dmg-node-" + std::to_string(k)).c_str());
        out[k].emplace(fn(*engines_[k]));
      });
    }
    out[0].emplace(fn(*engines_[0]));
    for (std::thread& t : threads) t.join();
    std::vector<decltype(fn(engine()))> results;
    for (auto& r : out) results.push_back(*std::move(r));
    return results;
  }
  memory_node::MemoryNode& memory_node(int i = 0) { return *nodes_[i]; }
  int memory_nodes() const { return static_cast<int>(nodes_.size()); }
  transport::Transport& transport() { return *transport_; }

 private:
  EmbeddedCluster() = default;
  absl::Status StartEngines(const compute::EngineOptions& options);
  std::vector<std::unique_ptr<memory_node::MemoryNode>> nodes_;
  std::unique_ptr<transport::LocalTransport> transport_;
  std::vector<std::unique_ptr<compute::Engine>> engines_;
};

}  // namespace dmg::cli

#endif  // DMG_TOOLS_EMBEDDED_CLUSTER_H_

// The trials of a `dmg run`: the cluster it works on — the embedded one
// (the graph loaded once) or memory-node daemons (connected once) — and
// each trial on a fresh engine (cold cache, new state arrays), with its own
// source when the source is random. A failed first attempt on memory-node
// daemons reconnects and resumes from its last checkpoint (--max_retries).
#ifndef DMG_TOOLS_RUN_TRIALS_H_
#define DMG_TOOLS_RUN_TRIALS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "algorithms/registry.h"
#include "compute_node/engine.h"
#include "tools/embedded_cluster.h"
#include "tools/run_config.h"
#include "transport/transport.h"

namespace dmg::cli {

class TrialRunner {
 public:
  // Loads the graph into the embedded cluster or connects to the memory
  // nodes, and creates the first trial's engine(s).
  static absl::StatusOr<std::unique_ptr<TrialRunner>> Start(
      const RunConfig& config);

  // Runs trial `trial` (0-based) on every compute node of this process;
  // node 0's result is the job's (params(), outcome()).
  absl::Status RunTrial(int trial);

  // This process's compute node 0 (the job's node 0 unless it is one of
  // several processes).
  compute::Engine& engine() {
    return remote_engine_ ? *remote_engine_ : cluster_->engine();
  }
  const algorithms::Params& params() const { return params_; }
  algorithms::Outcome& outcome() { return outcome_; }
  double load_seconds() const { return load_seconds_; }
  uint64_t rss_start() const { return rss_start_; }
  // Memory nodes of the embedded cluster (0 on daemons: the addresses say).
  int embedded_memory_nodes() const {
    return cluster_ ? cluster_->memory_nodes() : 0;
  }

 private:
  explicit TrialRunner(const RunConfig& config) : config_(config) {}
  absl::Status Connect();
  absl::Status LoadEmbedded();
  absl::Status FreshEngine(int trial);
  // --max_retries: waits, reconnects and resumes after `failure`; false
  // when no retry is left or the failure is not one to retry.
  bool Retry(absl::Status failure);

  const RunConfig& config_;
  std::unique_ptr<EmbeddedCluster> cluster_;
  std::unique_ptr<transport::Transport> network_;
  std::unique_ptr<compute::Engine> remote_engine_;
  int attempts_ = 0;
  algorithms::Params params_;
  algorithms::Outcome outcome_;
  double load_seconds_ = 0;
  uint64_t rss_start_ = 0;
};

}  // namespace dmg::cli

#endif  // DMG_TOOLS_RUN_TRIALS_H_

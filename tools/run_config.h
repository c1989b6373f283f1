// `dmg run`'s settings: every flag read and checked together, before any
// work is done, so that each bad value or bad combination is one line and
// exit code 2 (cli::ReportError), never a failure half way through a job.
#ifndef DMG_TOOLS_RUN_CONFIG_H_
#define DMG_TOOLS_RUN_CONFIG_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "algorithms/registry.h"
#include "compute_node/engine.h"
#include "gflags/gflags.h"
#include "store/graph_source.h"

DECLARE_string(algo);
DECLARE_string(source);
DECLARE_int32(sources);
DECLARE_uint64(source_seed);
DECLARE_int32(max_iters);
DECLARE_double(tolerance);
DECLARE_string(precision);
DECLARE_bool(unit_weights);
DECLARE_string(output);
DECLARE_string(stats_json);
DECLARE_string(summary_json);
DECLARE_int32(trials);
DECLARE_bool(verify);
DECLARE_int32(top);
DECLARE_int32(keep_state_s);
DECLARE_bool(resume);
DECLARE_int32(max_retries);
DECLARE_string(memory_nodes);

namespace dmg::cli {

// Where this process stands in a job of several compute nodes.
struct JobPlace {
  int nodes = 1;
  int id = -1;  // -1: start the nodes here
  std::string job;
  bool named = true;  // false: a name made up for this process
};

struct RunConfig {
  const algorithms::Algorithm* algo = nullptr;
  bool remote = false;    // on memory-node daemons (--memory_nodes)
  std::string transport;  // local | tcp | rdma
  // How --graph is read: the embedded cluster's store, and --verify's
  // reference graph. threads is the run's (also without --graph).
  store::GraphSourceOptions graph;
  compute::EngineOptions engine;
  JobPlace place;
  // --gpu: auto | on | off, and what became of it ("" when a GPU runs a
  // share; otherwise why the CPU threads do all of it).
  std::string gpu_mode;
  std::string gpu_note;
  bool gpu_given = false;  // --gpu on the command line

  // Reads and checks every flag of `dmg run`.
  static absl::StatusOr<RunConfig> FromFlags();

  // dmg run --compute_nodes=N --memory_nodes=... without an id starts the
  // N compute nodes as processes of its own (SpawnComputeNodes).
  bool spawns_nodes() const {
    return place.nodes > 1 && place.id < 0 && remote;
  }
};

// With several compute nodes a recorded superstep ends with a barrier of
// its own (its last collective cannot be it), so their state is kept only
// when asked for.
bool KeepStateAsked();

}  // namespace dmg::cli

#endif  // DMG_TOOLS_RUN_CONFIG_H_

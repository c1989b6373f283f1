// dmg: the command-line program. One binary, one subcommand per job:
//   dmg run --algo=A --graph=SPEC  run a vertex program (embedded cluster)
//   dmg info --graph=SPEC          what a graph looks like in the store
//   dmg load --graph=SPEC --image=FILE   ingest once into a store image
// See README.md and ../docs/ARCHITECTURE.md; `dmg help` lists everything.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "store/graph_source.h"
#include "store/image_file.h"
#include "store/summary.h"
#include "tools/cli.h"
#include "tools/doctor_command.h"
#include "tools/graph_flags.h"
#include "tools/load_command.h"
#include "tools/memory_node_command.h"
#include "tools/run_command.h"
#include "tools/status_command.h"

namespace dmg::cli {
namespace {

constexpr char kUsage[] =
    R"(usage: dmg <command> [flags]

commands:
  run   --algo=NAME --graph=SPEC [--source=V|random] [--sources=K]
        [--max_iters=N] [--tolerance=T] [--threads=N] [--output=FILE]
        [--stats_json=FILE] [--verify] [--top=N] [--unit_weights]
        [--cache_mb=N | --cache_fraction=F] [--cache_policy=P]
        [--transport=local|tcp|rdma --memory_nodes=H:P,...]
        [--compute_nodes=N [--compute_node_id=K --job=NAME]]
        [--update_mode=auto|pull|batch|atomic] [--direction=auto|push|pull]
        [--steal] [--stage1_alpha=A]
                                     run an algorithm (embedded cluster when
                                     no --memory_nodes are given; N compute
                                     nodes: dmg starts them, or each runs
                                     with its id, or srun sets it)
  info  --graph=SPEC                 vertices, arcs, degrees, blocks, bytes
  load  --graph=SPEC --image=FILE    ingest a graph into a store image file
  load  --graph=SPEC --memory_nodes=H:P,...   ingest into running memory nodes
  memory-node --listen=H:P --transport=tcp|rdma [--memory_mb=N] [--image=F
        --node_id=K]                 run a memory-node daemon
  status --memory_nodes=H:P,... [--wait_ms=N] [--require_store]
                                     is every memory node up (and loaded)?
  doctor [--memory_nodes=H:P,...]    can this host run over rdma? (exit 0: yes)
  help                               this text

algorithms (--algo=NAME):
%s
SPEC: a file (.el/.txt SNAP edge list, .wel, .mtx, DIMACS/PACE .gr; gzip or
xz compressed too), a store image written by `dmg load`, or a generator
kron:SCALE[:DEGREE] / urand:SCALE[:DEGREE].

graph flags (every command taking --graph):
  --threads=N --seed=N --symmetrize --nodrop_self_loops --nodrop_parallel_arcs
  --relabel --block_size=BYTES --layout_memory_nodes=N --compress

exit codes: 0 ok, 1 internal failure, 2 bad input (one line on stderr).
)";

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since)
      .count();
}

int Info() {
  absl::StatusOr<store::GraphSourceOptions> options =
      GraphSourceOptionsFromFlags();
  if (!options.ok()) return ReportError(options.status());
  auto start = std::chrono::steady_clock::now();
  absl::StatusOr<store::StoreImage> image =
      store::LoadStore(FLAGS_graph, *options);
  if (!image.ok()) return ReportError(image.status());
  std::string text = store::FormatSummary(*image, FLAGS_graph);
  std::printf("%s%-26s %.3f s\n", text.c_str(), "load time:", Seconds(start));
  return kExitOk;
}

int Main(int argc, char** argv) {
  SetCommandLine(argc, argv);
  if (argc < 2) {
    std::fprintf(stderr, kUsage, AlgorithmHelp().c_str());
    return kExitBadInput;
  }
  std::string command = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  if (command == "help" || command == "--help" || command == "-h") {
    std::printf(kUsage, AlgorithmHelp().c_str());
    return kExitOk;
  }
  std::vector<std::string> allowed = GraphFlagNames();
  int (*run)() = nullptr;
  if (command == "info") {
    run = Info;
  } else if (command == "run") {
    run = RunCommand;
    std::vector<std::string> run_flags = RunFlagNames();
    allowed.insert(allowed.end(), run_flags.begin(), run_flags.end());
  } else if (command == "load") {
    run = LoadCommand;
    allowed = LoadFlagNames();
  } else if (command == "memory-node") {
    run = MemoryNodeCommand;
    allowed = MemoryNodeFlagNames();
  } else if (command == "status") {
    run = StatusCommand;
    allowed = StatusFlagNames();
  } else if (command == "doctor") {
    run = DoctorCommand;
    allowed = DoctorFlagNames();
  } else {
    std::fprintf(stderr, "dmg: error: unknown command '%s' (try: dmg help)\n",
                 command.c_str());
    return kExitBadInput;
  }
  if (absl::Status s = ParseFlags(args, allowed); !s.ok()) {
    return ReportError(s);
  }
  return run();
}

}  // namespace
}  // namespace dmg::cli

int main(int argc, char** argv) {
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  return dmg::cli::Main(argc, argv);
}

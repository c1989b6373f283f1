// dmg: the command-line program. One binary, one subcommand per job:
//   dmg run --algo=A --graph=SPEC  run a vertex program (embedded cluster)
//   dmg info --graph=SPEC          what a graph looks like in the store
//   dmg load --graph=SPEC --image=FILE   ingest once into a store image
// See README.md and ../docs/ARCHITECTURE.md; `dmg help` lists everything.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/memory_limits.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "store/graph_source.h"
#include "store/image_file.h"
#include "store/summary.h"
#include "tools/cli.h"
#include "tools/doctor_command.h"
#include "tools/gpu_probe_command.h"
#include "tools/graph_flags.h"
#include "tools/help.h"
#include "tools/load_command.h"
#include "tools/memory_node_command.h"
#include "tools/progress.h"
#include "tools/run_command.h"
#include "tools/secret_command.h"
#include "tools/snapshot_command.h"
#include "tools/status_command.h"
#include "tools/transport_flags.h"
#include "tools/version.h"

namespace dmg::cli {
namespace {

constexpr char kUsage[] =
    R"(usage: dmg <command> [flags]      (dmg help <command>: all its flags)

commands:
  run          --algo=NAME --graph=SPEC [--trials=N] [--verify] ...
               --algo=NAME --memory_nodes=H:P,... [--transport=tcp|rdma] ...
               run an algorithm: on the embedded cluster, or on running
               memory nodes; --compute_nodes=N for several compute nodes
  info         --graph=SPEC      vertices, arcs, degrees, blocks, bytes
  load         --graph=SPEC --image=FILE | --memory_nodes=H:P,...
               ingest a graph into a store image or running memory nodes
  memory-node  --listen=H:P [--transport=tcp|rdma] [--image=F --node_id=K]
               run a memory-node daemon
  status       --memory_nodes=H:P,... [--wait_ms=N] [--require_store]
               is every memory node up (and loaded)?
  snapshot     --memory_nodes=H:P,... [--jobs]
               every memory node writes a snapshot now (--snapshot_dir)
  doctor       [--memory_nodes=H:P,...] [--transport=rdma|tcp]
               can this host run dmg over rdma? (exit 0: yes)
  secret       --output=FILE [--job_only --secret_file=CLUSTER]
               write a new cluster secret (or a job key) for the
               memory nodes, dmg load and dmg run (--secret_file)
  gpu-probe    [--output=topology.json] [--gpu_device=N]
               measure the GPU's L2 partitions (NUMA nodes)
  help [CMD]   this text, or every flag of CMD with its default
  version      the version, git revision and build (also: dmg --version)

algorithms (--algo=NAME):
%s
SPEC: a file (.el/.txt SNAP edge list, .wel, .mtx, DIMACS/PACE .gr; gzip or
xz compressed too), a store image written by `dmg load`, or a generator
kron:SCALE[:DEGREE] / urand:SCALE[:DEGREE].

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
  absl::StatusOr<store::StoreImage> image = [&] {
    ProgressTicker ticker("loading " + FLAGS_graph);
    return store::LoadStore(FLAGS_graph, *options);
  }();
  if (!image.ok()) return ReportError(image.status());
  if (absl::Status s = CheckLayoutFlags(*image); !s.ok()) {
    return ReportError(s);
  }
  std::string text = store::FormatSummary(*image, FLAGS_graph);
  std::printf("%s%-26s %.3f s\n", text.c_str(), "load time:", Seconds(start));
  return kExitOk;
}

// A command: its synopsis and purpose for the help, the flags it accepts
// (in the groups the help shows) and what runs it.
struct Command {
  std::string name;
  std::string synopsis;
  std::string purpose;
  std::vector<FlagGroup> groups;
  int (*run)();
};

// `names` as groups: the command's own flags first, then the graph flags
// and the transport flags among them in groups of their own.
std::vector<FlagGroup> Grouped(const std::vector<std::string>& names) {
  const std::vector<std::string> graph = GraphFlagNames();
  const std::vector<std::string> net = RdmaFlagNames();
  auto in = [](const std::vector<std::string>& v, const std::string& n) {
    return std::find(v.begin(), v.end(), n) != v.end();
  };
  std::vector<FlagGroup> groups = {
      {"flags", {}}, {"the graph", {}}, {"the transport", {}}};
  for (const std::string& n : names) {
    groups[in(graph, n) ? 1 : in(net, n) ? 2 : 0].flags.push_back(n);
  }
  return groups;
}

// --transport is shared with dmg run, whose default (local) a memory node
// does not take: its own default is tcp.
std::vector<FlagGroup> MemoryNodeGroups() {
  std::vector<FlagGroup> groups = Grouped(MemoryNodeFlagNames());
  for (FlagGroup& g : groups) {
    g.own["transport"] = {
        "tcp or rdma: what compute nodes reach this node over (the control "
        "plane is tcp on the same address either way)",
        "'tcp'"};
  }
  return groups;
}

const std::vector<Command>& Commands() {
  static const std::vector<Command>* commands = new std::vector<Command>{
      {"run",
       "dmg run --algo=NAME --graph=SPEC [flags]\n"
       "       dmg run --algo=NAME --memory_nodes=H:P,... [flags]",
       "Runs a vertex program. Without --memory_nodes the graph is loaded "
       "into an embedded cluster in this process (memory nodes reached "
       "through the local transport); with them, on running memory nodes "
       "loaded by `dmg load` (tcp unless --transport=rdma). --trials=N runs "
       "it N times on the graph loaded once and prints each trial's time "
       "and the average.",
       RunFlagGroups(), RunCommand},
      {"info",
       "dmg info --graph=SPEC [flags]",
       "Loads a graph into the store and prints what it looks like there: "
       "vertices, arcs, degrees, blocks, bytes.",
       {{"the graph", GraphFlagNames()}, {"output", {"progress"}}},
       Info},
      {"load",
       "dmg load --graph=SPEC --image=FILE [flags]\n"
       "       dmg load --graph=SPEC --memory_nodes=H:P,... [flags]",
       "Ingests a graph once: into a store image file (which `dmg run "
       "--graph` and `dmg memory-node --image` read), or into running memory "
       "nodes, each given its slice of the layout.",
       Grouped(LoadFlagNames()), LoadCommand},
      {"memory-node",
       "dmg memory-node --listen=HOST:PORT [--transport=tcp|rdma] [flags]",
       "Runs a memory-node daemon: it holds its slice of a store (from "
       "--image, or loaded later by `dmg load`) and serves READs, WRITEs "
       "and atomics until SIGTERM or SIGINT.",
       MemoryNodeGroups(), MemoryNodeCommand},
      {"status", "dmg status --memory_nodes=H:P,... [flags]",
       "Asks every memory node whether it is up and what it holds; exit 0 "
       "when all are ready (with --require_store: loaded), 1 when not.",
       Grouped(StatusFlagNames()), StatusCommand},
      {"snapshot", "dmg snapshot --memory_nodes=H:P,... [--jobs] [flags]",
       "Asks every memory node to write a snapshot into its --snapshot_dir "
       "now and prints what each wrote once it is in place. --jobs adds the "
       "state of the jobs a node keeps for `dmg run --resume` (their "
       "compute nodes gone); a node restarted from that snapshot keeps it "
       "for them, so --resume continues the job after a memory-node "
       "restart too. Needs the cluster secret (the admin role). Exit 0 when "
       "every node wrote one.",
       Grouped(SnapshotFlagNames()), SnapshotCommand},
      {"doctor", "dmg doctor [--memory_nodes=H:P,...] [flags]",
       "Checks whether this host can run dmg over RDMA and prints what it "
       "finds, each line OK, WARN or FAIL with what to fix: RDMA devices, "
       "ports and GIDs (and the GID index to use), the verbs user space, "
       "the locked-memory limit, huge pages, CUDA, and whether each given "
       "memory node answers. Exit 0 when an rdma run can work here, 1 when "
       "not (--transport=tcp: RDMA findings do not fail).",
       Grouped(DoctorFlagNames()), DoctorCommand},
      {"secret",
       "dmg secret --output=FILE\n"
       "       dmg secret --job_only --secret_file=CLUSTER --output=FILE",
       "Writes a new cluster secret to FILE (mode 0600, never over an "
       "existing file). Give the same file to dmg memory-node, dmg load and "
       "dmg run with --secret_file=FILE or DMG_SECRET_FILE: every "
       "connection to a memory node then proves it holds the secret. "
       "--job_only writes the job key derived from the cluster secret: "
       "enough to run jobs, not to load a store or stop a memory node.",
       {{"flags", SecretFlagNames()}},
       SecretCommand},
      {"gpu-probe",
       "dmg gpu-probe [--output=topology.json] [--gpu_device=N] [flags]",
       "Measures the GPU's NUMA structure: per SM, one thread pinned to it "
       "times a pointer chase over --probe_lines lines of a 64 MiB buffer "
       "after an L2 flush (DRAM), then twice from L2 (near or far). The "
       "latencies give the L2 partitions (nodes), which SMs and lines "
       "belong to each, the near and far hit latency, the interleave "
       "granularity and the DRAM latency; --output writes them as JSON "
       "for the GPU kernels. About 1-2 s of GPU time on an H100. Exit 0 "
       "when it ran, 1 without a GPU or when the probe failed, 2 on bad "
       "flags.",
       GpuProbeFlagGroups(), GpuProbeCommand},
  };
  return *commands;
}

const Command* FindCommand(const std::string& name) {
  for (const Command& c : Commands()) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

std::string CommandHelp(const Command& c) {
  std::string text = absl::StrCat("usage: ", c.synopsis, "\n\n");
  // The purpose, filled to 80 columns.
  std::string line;
  for (absl::string_view word : absl::StrSplit(c.purpose, ' ')) {
    if (!line.empty() && line.size() + 1 + word.size() > 79) {
      absl::StrAppend(&text, line, "\n");
      line.clear();
    }
    absl::StrAppend(&line, line.empty() ? "" : " ", word);
  }
  absl::StrAppend(&text, line, "\n\n");
  if (c.name == "run") {
    absl::StrAppend(&text, "algorithms (--algo=NAME):\n", AlgorithmHelp(),
                    "\n");
  }
  absl::StrAppend(&text, FormatFlagGroups(c.groups));
  return text;
}

bool IsHelp(const std::string& arg) {
  return arg == "--help" || arg == "-h" || arg == "--helpfull" || arg == "help";
}

// The command running, for the out-of-memory line ("" before one is known).
const char* running_command = "";

// One line for an allocation that failed (std::bad_alloc), wherever it was:
// which limit the process met, and what to do. Not an abort with a core.
void ReportOutOfMemory() noexcept {
  std::string limit;
  try {
    const MemoryRoom room = ReadMemoryRoom();
    if (room.known()) {
      limit = absl::StrCat("; the least limit is ", room.Source());
    }
  } catch (...) {
    // Reading the limit needs memory too: the line goes without it.
  }
  std::fprintf(stderr,
               "dmg: out of memory: an allocation failed%s%s%s%s; run it "
               "with more memory or on a smaller graph\n",
               *running_command != '\0' ? " in 'dmg " : "", running_command,
               *running_command != '\0' ? "'" : "", limit.c_str());
}

std::terminate_handler previous_terminate = nullptr;

// A std::bad_alloc that leaves a worker thread ends in std::terminate; it
// becomes the same one line and exit code as one in the main thread.
[[noreturn]] void OnTerminate() {
  if (std::exception_ptr e = std::current_exception()) {
    try {
      std::rethrow_exception(e);
    } catch (const std::bad_alloc&) {
      ReportOutOfMemory();
      std::_Exit(kExitBadInput);
    } catch (...) {
      // Anything else: the usual report and abort.
    }
  }
  if (previous_terminate != nullptr) previous_terminate();
  std::abort();
}

int Main(int argc, char** argv) {
  SetCommandLine(argc, argv);
  if (argc < 2) {
    std::fprintf(stderr, kUsage, AlgorithmHelp().c_str());
    return kExitBadInput;
  }
  std::string command = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  if (command == "version" || command == "--version") {
    std::printf("%s", VersionReport().c_str());
    return kExitOk;
  }
  if (IsHelp(command)) {
    // `dmg help`, `dmg help --help`, `dmg help help`: the overview.
    if (args.empty() || IsHelp(args[0])) {
      std::printf(kUsage, AlgorithmHelp().c_str());
      return kExitOk;
    }
    command = args[0];
    args = {"--help"};
  }
  const Command* c = FindCommand(command);
  if (c != nullptr) running_command = c->name.c_str();
  if (c == nullptr) {
    std::vector<std::string> names = {"help", "version"};
    for (const Command& k : Commands()) names.push_back(k.name);
    const std::string near = DidYouMean(command, names);
    std::fprintf(stderr, "dmg: error: unknown command '%s'%s (try: dmg help)\n",
                 command.c_str(),
                 near.empty()
                     ? ""
                     : absl::StrCat("; did you mean '", near, "'?").c_str());
    return kExitBadInput;
  }
  if (std::any_of(args.begin(), args.end(), IsHelp)) {
    std::printf("%s", CommandHelp(*c).c_str());
    return kExitOk;
  }
  if (absl::Status s = ParseFlags(args, FlagNames(c->groups), c->name);
      !s.ok()) {
    return ReportError(s);
  }
  return c->run();
}

// Runs Main with std::bad_alloc, in any thread, turned into one line and
// exit code 2.
int GuardedMain(int argc, char** argv) {
  previous_terminate = std::set_terminate(OnTerminate);
  try {
    return Main(argc, argv);
  } catch (const std::bad_alloc&) {
    ReportOutOfMemory();
    return kExitBadInput;
  }
}

}  // namespace
}  // namespace dmg::cli

int main(int argc, char** argv) {
#if defined(DMG_POPCNT) && defined(__x86_64__)
  // Before anything else runs: the build's code uses the instruction.
  if (!__builtin_cpu_supports("popcnt")) {
    std::fprintf(stderr,
                 "dmg: error: this build uses the POPCNT instruction, which "
                 "this CPU lacks: rebuild with -DDMG_POPCNT=OFF\n");
    return 2;
  }
#endif
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  return dmg::cli::GuardedMain(argc, argv);
}

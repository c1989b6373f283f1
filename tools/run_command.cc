#include "tools/run_command.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <thread>
#include <type_traits>
#include <variant>

#include "absl/algorithm/container.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "algorithms/registry.h"
#include "common/parallel.h"
#include "common/status_macros.h"
#include "common/warm_pool.h"
#include "coordinator/update_coordinator.h"
#include "gflags/gflags.h"
#include "reference/compare.h"
#include "store/generator.h"
#include "store/graph_source.h"
#include "store/image_file.h"
#include "store/reader.h"
#include "tools/cli.h"
#include "tools/embedded_cluster.h"
#include "tools/graph_flags.h"
#include "tools/help.h"
#include "tools/progress.h"
#include "tools/run_summary.h"
#include "tools/transport_flags.h"
#include "tools/version.h"

DEFINE_string(algo, "", "the algorithm (dmg help lists them)");
DEFINE_string(source, "random",
              "source vertex (bfs, sssp, bc), or 'random': a seeded pick "
              "among the vertices with out-arcs, a new one for each trial "
              "(as GAPBS without -r)");
DEFINE_int32(sources, 0, "bc: this many seeded random sources (0: --source)");
DEFINE_uint64(source_seed, 27491095,
              "seed for --source=random and --sources (GAPBS's default)");
DEFINE_int32(max_iters, 20, "pagerank: most iterations");
DEFINE_double(tolerance, 1e-4, "pagerank: stop when the L1 change is below");
DEFINE_string(precision, "float",
              "pagerank: float (as GAPBS: half the bytes and loads per edge) "
              "or double (the reference's arithmetic)");
DEFINE_bool(unit_weights, false, "sssp: treat every arc as weight 1");
DEFINE_string(output, "",
              "write 'vertex value' lines, in vertex order (a count: alone "
              "on one line; the last trial's; '-': stdout, and the summary "
              "goes to stderr); dmg secret: the file to write");
DEFINE_string(stats_json, "",
              "write the engine's figures (per superstep; the last trial's) "
              "as JSON ('-': stdout)");
DEFINE_string(summary_json, "",
              "write the job's summary as JSON: graph, algorithm, sources, "
              "per-trial times and figures, nodes, cache, bytes ('-': "
              "stdout; the format is in docs/ARCHITECTURE.md)");
DEFINE_int32(trials, 1,
             "run the algorithm this many times on the graph loaded once, "
             "each on a fresh engine (and its own source when random); "
             "per-trial and average times are printed");
DEFINE_bool(verify, false,
            "compare with the in-memory reference; exit 1 on a mismatch");
DEFINE_string(transport, "local",
              "local (embedded cluster), tcp or rdma (with --memory_nodes; "
              "given --memory_nodes alone, tcp)");
DEFINE_int32(top, 0, "print the N vertices with the largest values");
DEFINE_double(cache_mb, 0,
              "compute-node cache bound in MiB (graph data and vertex state; "
              "0: unbounded)");
DEFINE_double(cache_fraction, 0,
              "compute-node cache bound as a fraction of the store image");
DEFINE_int32(prefetch_window, 2,
             "streaming scans keep this many READ batches per worker in "
             "flight ahead of the one computed on (1: no prefetch)");
DEFINE_string(cache_policy, "graph_aware",
              "graph_aware | page_lru (4 KiB LRU pages for everything: a "
              "swap-style baseline) | fam (FAM-Graph's design: all vertex "
              "state local, edges remote and never cached: a baseline)");
DEFINE_string(direction, "auto",
              "auto | push | pull: replaces the engine's choice for every "
              "EdgeMap an algorithm leaves to it (ablation)");
DEFINE_int32(compute_nodes, 1,
             "compute nodes in the job: each runs this command with "
             "--compute_node_id=K and the same --job; without an id, dmg "
             "run starts all N itself (threads in one process with the "
             "embedded cluster, processes on this host with --memory_nodes)");
DEFINE_int32(compute_node_id, -1,
             "this process's place among --compute_nodes, 0..N-1 (absent: "
             "SLURM_PROCID when srun started it)");
DEFINE_string(job, "",
              "the job's name: its compute nodes meet by it on memory node 0; "
              "jobs with different names share memory nodes untouched");
DEFINE_string(update_mode, "auto",
              "auto | pull | batch | atomic: how updates to vertices other "
              "compute nodes own travel (auto: the update coordinator "
              "chooses per step; see docs/ARCHITECTURE.md)");
DEFINE_string(cost_constants, "",
              "the update coordinator's CPU and exchange constants, as "
              "deploy/experiments/fit_coordinator.py prints them "
              "(pull_ns=..,push_ns=..,remote_ns=..,atomic_ns=..,"
              "exchange_us=..,gather_ns=..,pull_hit_ns=..,byte_ns=..; any "
              "subset; the rest: the built-in fit, "
              "docs/COST_MODEL.md)");
DEFINE_bool(steal, true,
            "stage 2 across compute nodes: in push, pull and bottom-up "
            "steps where the fitted model predicts a gain (one node's share "
            "well above the mean), a node done with its own work takes the "
            "others' left-over work items (false: for ablations)");
DEFINE_double(stage1_alpha, 1.0,
              "stage 1 of the workload manager: a compute node's range costs "
              "its edges plus this times its vertices");
DEFINE_bool(resume, false,
            "continue job --job from the last superstep it completed (after "
            "a compute node died): same arguments, memory-node daemons; with "
            "several compute nodes every node runs again with --resume, from "
            "the last superstep all of them completed; output identical to "
            "an uninterrupted run");
DEFINE_int32(keep_state_s, 600,
             "with memory-node daemons: the memory nodes keep the job's "
             "state this long after its processes end, and every superstep "
             "is recorded, so --resume can continue it (0: nothing kept, no "
             "--resume). With several compute nodes only when given (or with "
             "--resume or --max_retries): recording costs each superstep a "
             "barrier round of its own there");
DEFINE_string(checkpoint_interval, "auto",
              "one compute node: how often a superstep's end is a "
              "checkpoint (its state changes written to the memory nodes, "
              "the progress record that --resume goes on from): N "
              "supersteps, Xs seconds (e.g. 2s), 0 (every superstep), or "
              "auto (every 64 supersteps or 1 s, whichever comes first); "
              "between checkpoints a superstep ends without a round trip");
DEFINE_int32(max_retries, 0,
             "on a runtime failure (a memory node or the network lost, a "
             "compute node died), reconnect and resume the job from its "
             "last complete superstep, up to this many times (several "
             "compute nodes: when dmg run starts them, all of them again)");
DECLARE_string(memory_nodes);
DECLARE_int32(transport_timeout_ms);
DECLARE_int32(threads);

namespace dmg::cli {
namespace {

using algorithms::Values;

// Float PageRank's L1 change levels off at the rounding of its scores:
// ~1e-7 on road-NY, ~1e-10 on kron:15 (docs/ARCHITECTURE.md, "Precision").
constexpr double kFloatToleranceFloor = 1e-6;

double Since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t)
      .count();
}

// The run's parameters from the flags; sources are resolved on the engine
// (a random pick needs out-degrees), once, so the reference uses the same.
// Random picks come from one seeded sequence, as GAPBS's SourcePicker:
// trial t (0-based) takes the picks after those of trials 0..t-1.
absl::StatusOr<algorithms::Params> ParamsFromFlags(
    const algorithms::Algorithm& algo, compute::Engine& engine, int trial) {
  algorithms::Params p;
  p.max_iters = FLAGS_max_iters;
  p.tolerance = FLAGS_tolerance;
  p.unit_weights = FLAGS_unit_weights;
  p.precision = FLAGS_precision == "double" ? algorithms::Precision::kDouble
                                            : algorithms::Precision::kFloat;
  if (algo.sources == algorithms::Sources::kNone) return p;
  if (FLAGS_sources > 0 && algo.sources == algorithms::Sources::kMany) {
    DMG_ASSIGN_OR_RETURN(
        std::vector<store::VertexId> picks,
        algorithms::PickSources(engine, FLAGS_sources * (trial + 1),
                                FLAGS_source_seed));
    p.sources.assign(picks.end() - FLAGS_sources, picks.end());
    p.source = p.sources[0];
    return p;
  }
  if (FLAGS_source == "random") {
    DMG_ASSIGN_OR_RETURN(
        std::vector<store::VertexId> picks,
        algorithms::PickSources(engine, trial + 1, FLAGS_source_seed));
    p.source = picks.back();
  } else {
    uint64_t v = 0;
    if (!absl::SimpleAtoi(FLAGS_source, &v)) {
      return absl::InvalidArgumentError("--source='" + FLAGS_source +
                                        "' is not a vertex id or 'random'");
    }
    if (v >= engine.num_vertices()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--source %d is out of range: the graph has %d vertices", v,
          engine.num_vertices()));
    }
    p.source = static_cast<store::VertexId>(v);
  }
  p.sources = {p.source};
  return p;
}

// What a run computes, for --resume's check that it continues the same
// computation: the algorithm and its resolved arguments (the engine adds
// the graph and the state it keeps).
uint64_t RunSignature(const std::string& algo, const algorithms::Params& p) {
  std::string key = absl::StrFormat("%s|%d|%d|%.17g|%d|", algo, p.source,
                                    p.max_iters, p.tolerance, p.unit_weights);
  // (Double, the only precision before there was a choice, adds nothing:
  // a double job left by an older build still resumes.)
  if (p.precision == algorithms::Precision::kFloat) {
    absl::StrAppend(&key, "float|");
  }
  for (store::VertexId s : p.sources) absl::StrAppend(&key, s, ",");
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : key) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

// Failures a new attempt may get past (a memory node restarted, the
// network lost); not bad input, a refused request or a wrong resume.
bool Retryable(const absl::Status& s) {
  return absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s) ||
         absl::IsInternal(s) || absl::IsUnknown(s) ||
         absl::IsResourceExhausted(s);
}

// The reference result for the same SPEC, built independently of the store
// layout: the graph is read (or generated) again into a plain CSR.
// (The caller reads the graph once for all trials.)
absl::StatusOr<reference::Mismatch> Verify(const algorithms::Algorithm& algo,
                                           const algorithms::Params& params,
                                           const store::Graph& g,
                                           const Values& actual) {
  DMG_ASSIGN_OR_RETURN(Values expected, algo.reference(g, params));
  return algo.compare(expected, actual, params);
}

// Where the human-readable report goes: stdout, unless stdout carries
// --output=- or a JSON file, then stderr, so a pipe gets only the data.
FILE* Report() {
  static FILE* const report = FLAGS_output == "-" ||
                                      FLAGS_summary_json == "-" ||
                                      FLAGS_stats_json == "-"
                                  ? stderr
                                  : stdout;
  return report;
}

// PATH, atomically (a reader never sees half a file), or stdout for "-".
absl::Status WriteText(const std::string& path, const std::string& text) {
  if (path == "-") {
    if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() ||
        std::fflush(stdout) != 0) {
      return absl::InternalError("writing to stdout failed");
    }
    return absl::OkStatus();
  }
  return store::WriteFileAtomically(
      path, {reinterpret_cast<const std::byte*>(text.data()), text.size()});
}

// SSSP on a graph with negative weights is bad input: named at the file and
// line of the first one when --graph is a text file (read again to find it;
// only on this error path), else by the graph and the weight.
absl::Status NegativeWeightError(const store::GraphSourceOptions& options,
                                 int32_t min_weight) {
  constexpr absl::string_view kWhy =
      "; SSSP needs non-negative weights (or --unit_weights)";
  if (!store::IsGeneratorSpec(FLAGS_graph) &&
      !store::LooksLikeStoreImage(FLAGS_graph)) {
    store::ReadOptions read = options.read;
    read.reject_negative_weights = true;
    absl::StatusOr<store::EdgeList> located =
        store::ReadGraphFile(FLAGS_graph, read);
    if (!located.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(located.status().message(), kWhy));
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat(FLAGS_graph, ": has weight ", min_weight, kWhy));
}

// A source that reaches no other vertex made a run that measured nothing
// (kron graphs have many isolated vertices): say so.
void WarnIfNothingReached(const algorithms::Algorithm& algo,
                          const algorithms::Params& params,
                          const algorithms::Outcome& outcome) {
  if (algo.sources != algorithms::Sources::kOne) return;
  for (const auto& [name, value] : outcome.counts) {
    if (name == "reached" && value <= 1) {
      std::fprintf(stderr,
                   "dmg: warning: source %u reaches no other vertex (it has "
                   "no out-arcs): this run measured nothing; use "
                   "--source=random or another vertex\n",
                   params.source);
    }
  }
}

absl::Status WriteOutput(const Values& values) {
  std::string text;
  std::visit(
      [&](const auto& result) {
        if constexpr (std::is_same_v<std::decay_t<decltype(result)>,
                                     uint64_t>) {
          absl::StrAppend(&text, result, "\n");
        } else {
          text.reserve(result.size() * 12);
          for (size_t v = 0; v < result.size(); ++v) {
            absl::StrAppend(&text, v, " ", reference::FormatValue(result[v]),
                            "\n");
          }
        }
      },
      values);
  return WriteText(FLAGS_output, text);
}

// Test hook: DMG_TEST_CORRUPT_VERTEX=v makes --verify see a wrong value at
// v, so tests can prove that a mismatch is caught and reported.
void CorruptForTest(Values& values) {
  const char* env = std::getenv("DMG_TEST_CORRUPT_VERTEX");
  if (env == nullptr) return;
  uint64_t v = std::strtoull(env, nullptr, 10);
  std::visit(
      [&](auto& result) {
        if constexpr (std::is_same_v<std::decay_t<decltype(result)>,
                                     uint64_t>) {
          result += 1;
        } else if (v < result.size()) {
          result[v] += 1;
        }
      },
      values);
}

void PrintTop(const Values& values) {
  std::visit(
      [&](const auto& vec) {
        if constexpr (std::is_same_v<std::decay_t<decltype(vec)>, uint64_t>) {
          return;  // a count has no vertices
        } else {
          std::vector<uint64_t> order(vec.size());
          std::iota(order.begin(), order.end(), 0);
          size_t k = std::min<size_t>(FLAGS_top, vec.size());
          std::partial_sort(order.begin(), order.begin() + k, order.end(),
                            [&](uint64_t x, uint64_t y) {
                              return vec[x] > vec[y] ||
                                     (vec[x] == vec[y] && x < y);
                            });
          absl::FPrintF(Report(), "top %d vertices by %s:\n", k, FLAGS_algo);
          for (size_t i = 0; i < k; ++i) {
            absl::FPrintF(Report(), "  %10d  %s\n", order[i],
                          reference::FormatValue(vec[order[i]]));
          }
        }
      },
      values);
}

// Where this process stands in a job of several compute nodes.
struct JobPlace {
  int nodes = 1;
  int id = -1;  // -1: start the nodes here
  std::string job;
};

absl::StatusOr<JobPlace> ResolveJob() {
  JobPlace p{FLAGS_compute_nodes, FLAGS_compute_node_id, FLAGS_job};
  const char* procid = std::getenv("SLURM_PROCID");
  const char* ntasks = std::getenv("SLURM_NTASKS");
  int slurm_id = -1, slurm_tasks = 0;
  if (p.id < 0 && procid != nullptr && ntasks != nullptr &&
      absl::SimpleAtoi(procid, &slurm_id) &&
      absl::SimpleAtoi(ntasks, &slurm_tasks) && slurm_tasks > 1) {
    // Started by srun: one task per compute node.
    if (p.nodes != 1 && p.nodes != slurm_tasks) {
      return absl::InvalidArgumentError(
          absl::StrFormat("--compute_nodes=%d but srun started %d tasks",
                          p.nodes, slurm_tasks));
    }
    p.nodes = slurm_tasks;
    p.id = slurm_id;
    if (p.job.empty()) {
      const char* job = std::getenv("SLURM_JOB_ID");
      const char* step = std::getenv("SLURM_STEP_ID");
      p.job = absl::StrCat("slurm-", job ? job : "0", ".", step ? step : "0");
    }
  }
  if (p.nodes < 1 || p.nodes > 64) {
    return absl::InvalidArgumentError("--compute_nodes must be in 1..64");
  }
  if (p.id >= p.nodes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--compute_node_id=%d is not below --compute_nodes=%d", p.id, p.nodes));
  }
  if (p.id >= 0 && p.job.empty() && p.nodes > 1) {
    return absl::InvalidArgumentError(
        "--compute_node_id needs --job=NAME, the same on every compute node");
  }
  // Unique across hosts: the memory nodes scope regions by job name.
  if (p.job.empty()) {
    char host[256] = "host";
    gethostname(host, sizeof(host) - 1);
    p.job = absl::StrCat("dmg-", host, "-", getpid());
  }
  return p;
}

// --checkpoint_interval into the engine's options (false: malformed).
bool ParseCheckpointInterval(const std::string& flag,
                             compute::EngineOptions& options) {
  double seconds = 0;
  int supersteps = 0;
  if (flag == "auto") {
    options.checkpoint_supersteps = 64;
    options.checkpoint_seconds = 1.0;
  } else if (flag.size() > 1 && flag.back() == 's' &&
             absl::SimpleAtod(flag.substr(0, flag.size() - 1), &seconds) &&
             seconds > 0 && seconds < 1e6) {
    // Only by time (the count bound out of reach).
    options.checkpoint_supersteps = std::numeric_limits<int>::max();
    options.checkpoint_seconds = seconds;
  } else if (absl::SimpleAtoi(flag, &supersteps) && supersteps >= 0) {
    options.checkpoint_supersteps = std::max(1, supersteps);
    options.checkpoint_seconds = 0;
  } else {
    return false;
  }
  return true;
}

// With several compute nodes a recorded superstep ends with a barrier of
// its own (its last collective cannot be it), so their state is kept only
// when asked for.
bool KeepStateAsked() {
  return !gflags::GetCommandLineFlagInfoOrDie("keep_state_s").is_default ||
         FLAGS_resume || FLAGS_max_retries > 0;
}

// dmg run --compute_nodes=N --memory_nodes=... without an id: starts N
// copies of this command on this host, one per compute node, and waits.
// Node 0 keeps stdout (its summary is the job's) and writes the outputs;
// the others' stdout is dropped, their errors still show on stderr.
int SpawnComputeNodes(const JobPlace& place, int threads, bool resume) {
  std::vector<pid_t> children;
  for (int k = 0; k < place.nodes; ++k) {
    std::vector<std::string> args = CommandLine();
    args.push_back(absl::StrCat("--compute_node_id=", k));
    args.push_back("--job=" + place.job);
    args.push_back(absl::StrCat("--threads=", threads));
    if (resume) args.push_back("--resume");
    if (KeepStateAsked()) {
      args.push_back(absl::StrCat("--keep_state_s=", FLAGS_keep_state_s));
    }
    args.push_back("--max_retries=0");  // (this process retries them all)
    if (k > 0) {
      for (const char* quiet : {"--output=", "--stats_json=", "--summary_json=",
                                "--noverify", "--top=0"}) {
        args.push_back(quiet);
      }
    }
    const pid_t pid = fork();
    if (pid < 0) {
      return ReportError(
          absl::InternalError(absl::StrCat("fork: ", std::strerror(errno))));
    }
    if (pid == 0) {
      if (k > 0) {
        const int null = open("/dev/null", O_WRONLY);
        if (null >= 0) dup2(null, STDOUT_FILENO);
      }
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv("/proc/self/exe", argv.data());
      std::fprintf(stderr, "dmg: error: exec: %s\n", std::strerror(errno));
      _exit(kExitFailure);
    }
    children.push_back(pid);
  }
  // The job's status is the first failure's; once a node has failed (and
  // said why) the others are stopped rather than left to time out.
  int result = kExitOk;
  for (size_t left = children.size(); left > 0;) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (std::find(children.begin(), children.end(), pid) == children.end()) {
      continue;
    }
    --left;
    const int code = WIFEXITED(status) ? WEXITSTATUS(status)
                     : WTERMSIG(status) == SIGTERM && result != kExitOk
                         ? result
                         : kExitFailure;
    if (code != kExitOk && result == kExitOk) {
      result = code;
      for (pid_t other : children) kill(other, SIGTERM);
    }
  }
  return result;
}

// --max_retries with several compute nodes: a failed attempt (a node died,
// or failed and the others were stopped) is started again, every node
// with --resume, so the job continues from the last superstep all its
// nodes completed. Bad input (exit 2) is not retried.
int SpawnComputeNodesWithRetries(const JobPlace& place, int threads) {
  int code = SpawnComputeNodes(place, threads, FLAGS_resume);
  for (int attempt = 1; code == kExitFailure && attempt <= FLAGS_max_retries;
       ++attempt) {
    const int wait_ms = std::min(8000, 500 << std::min(4, attempt - 1));
    absl::FPrintF(stderr,
                  "dmg: attempt %d of job %s failed; its %d compute nodes "
                  "resume in %.1f s (retry %d of %d)\n",
                  attempt, place.job, place.nodes, wait_ms / 1000.0, attempt,
                  FLAGS_max_retries);
    std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
    code = SpawnComputeNodes(place, threads, /*resume=*/true);
  }
  return code;
}

// --summary_json: the job's figures, completed from compute node 0's engine.
absl::Status WriteSummary(RunSummary& summary, compute::Engine& engine) {
  if (FLAGS_summary_json.empty()) return absl::OkStatus();
  const compute::RunStats& stats = engine.stats();
  summary.vertices = engine.num_vertices();
  summary.arcs = engine.num_arcs();
  summary.compute_nodes = std::max(1, stats.compute_nodes);
  summary.cache_policy = stats.cache_policy;
  summary.cache_bound_bytes = stats.cache_capacity_bytes;
  summary.cache_peak_bytes = stats.cache_peak_bytes;
  return WriteText(FLAGS_summary_json, ToJson(summary));
}

}  // namespace

std::vector<FlagGroup> RunFlagGroups() {
  std::vector<FlagGroup> groups = {
      {"the algorithm",
       {"algo", "source", "sources", "source_seed", "max_iters", "tolerance",
        "precision", "unit_weights", "trials"}},
      {"results",
       {"output", "summary_json", "stats_json", "top", "verify", "progress"}},
      {"the graph (the embedded cluster, when no --memory_nodes are given)",
       GraphFlagNames()},
      {"memory nodes and the transport", {"memory_nodes", "transport"}},
      {"the compute node's cache",
       {"cache_mb", "cache_fraction", "cache_policy", "prefetch_window"}},
      {"compute nodes, the update coordinator and the workload manager",
       {"compute_nodes", "compute_node_id", "job", "update_mode", "direction",
        "cost_constants", "steal", "stage1_alpha"}},
      {"resume after a failure",
       {"resume", "keep_state_s", "checkpoint_interval", "max_retries"}},
  };
  for (const std::string& n : RdmaFlagNames()) groups[3].flags.push_back(n);
  return groups;
}

std::string AlgorithmHelp() {
  std::string text;
  for (const algorithms::Algorithm& a : algorithms::Registry()) {
    absl::StrAppendFormat(&text, "  %-9s %s", a.name, a.help);
    if (!a.flags.empty()) {
      absl::StrAppend(&text, " [--", absl::StrJoin(a.flags, " --"), "]");
    }
    absl::StrAppend(&text, "\n");
  }
  return text;
}

int RunCommand() {
  // Trials start a new engine each: their buffers are reused warm.
  WarmPool::Process().Keep();
  const std::string& a = FLAGS_algo;
  const algorithms::Algorithm* algo = algorithms::FindAlgorithm(a);
  if (algo == nullptr) {
    return ReportError(absl::InvalidArgumentError(absl::StrCat(
        "--algo='", a, "' is not one of ", algorithms::AlgorithmNames(", "))));
  }
  if (FLAGS_sources < 0) {
    return ReportError(
        absl::InvalidArgumentError("--sources must be 0 or more"));
  }
  const bool remote = !FLAGS_memory_nodes.empty();
  // --memory_nodes alone means tcp, the transport every host has.
  const std::string transport =
      remote && gflags::GetCommandLineFlagInfoOrDie("transport").is_default
          ? "tcp"
          : FLAGS_transport;
  if (remote ? transport == "local" : transport != "local") {
    return ReportError(absl::InvalidArgumentError(
        remote ? "--memory_nodes needs --transport=tcp or --transport=rdma"
               : "--transport=" + transport +
                     " needs --memory_nodes=HOST:PORT,... (running memory "
                     "nodes loaded with `dmg load`)"));
  }
  if (FLAGS_max_iters < 1 || !(FLAGS_tolerance >= 0)) {
    return ReportError(absl::InvalidArgumentError(
        "--max_iters must be >= 1 and --tolerance >= 0"));
  }
  if (FLAGS_precision != "float" && FLAGS_precision != "double") {
    return ReportError(absl::InvalidArgumentError(
        "--precision='" + FLAGS_precision + "' is not float or double"));
  }
  if (absl::c_linear_search(algo->flags, "precision") &&
      FLAGS_precision == "float" && FLAGS_tolerance > 0 &&
      FLAGS_tolerance < kFloatToleranceFloor) {
    // Not an error: --max_iters still ends the run.
    absl::FPrintF(stderr,
                  "dmg: --tolerance=%g is below what float scores resolve "
                  "(their L1 change stops falling near %g on large graphs); "
                  "--precision=double reaches it\n",
                  FLAGS_tolerance, kFloatToleranceFloor);
  }
  if (remote && FLAGS_graph.empty() && FLAGS_verify) {
    return ReportError(absl::InvalidArgumentError(
        "--verify needs --graph=SPEC (the graph that was loaded)"));
  }
  absl::StatusOr<store::GraphSourceOptions> options =
      remote && FLAGS_graph.empty() ? store::GraphSourceOptions()
                                    : GraphSourceOptionsFromFlags();
  if (!options.ok()) return ReportError(options.status());
  // Outputs that cannot be written are refused before any work is done.
  for (const std::string* out :
       {&FLAGS_output, &FLAGS_stats_json, &FLAGS_summary_json}) {
    if (out->empty() || *out == "-") continue;
    if (absl::Status s = store::CheckOutputPath(*out); !s.ok()) {
      return ReportError(s);
    }
  }
  // --threads counts without --graph too (a run on loaded memory nodes).
  if (options->threads == 0) options->threads = std::max(0, FLAGS_threads);
  if (options->threads == 0) options->threads = DefaultThreads();
  compute::EngineOptions engine_options;
  engine_options.threads = options->threads;
  if (FLAGS_cache_mb < 0 || FLAGS_cache_fraction < 0 ||
      (FLAGS_cache_mb > 0 && FLAGS_cache_fraction > 0)) {
    return ReportError(absl::InvalidArgumentError(
        "give at most one of --cache_mb and --cache_fraction, positive"));
  }
  if (FLAGS_cache_mb > 0) {
    engine_options.cache_bytes =
        static_cast<uint64_t>(FLAGS_cache_mb * 1024 * 1024);
  }
  engine_options.cache_fraction = FLAGS_cache_fraction;
  if (FLAGS_prefetch_window < 1 || FLAGS_prefetch_window > 64) {
    return ReportError(
        absl::InvalidArgumentError("--prefetch_window must be in 1..64"));
  }
  engine_options.prefetch_window = FLAGS_prefetch_window;
  if (FLAGS_direction == "push") {
    engine_options.direction = compute::Mode::kPush;
  } else if (FLAGS_direction == "pull") {
    engine_options.direction = compute::Mode::kPull;
  } else if (FLAGS_direction != "auto") {
    return ReportError(
        absl::InvalidArgumentError("--direction must be auto, push or pull"));
  }
  if (FLAGS_update_mode == "pull") {
    engine_options.update_mode = compute::UpdateMode::kPull;
  } else if (FLAGS_update_mode == "batch") {
    engine_options.update_mode = compute::UpdateMode::kBatch;
  } else if (FLAGS_update_mode == "atomic") {
    engine_options.update_mode = compute::UpdateMode::kAtomic;
  } else if (FLAGS_update_mode != "auto") {
    return ReportError(absl::InvalidArgumentError(
        "--update_mode must be auto, pull, batch or atomic"));
  }
  {
    absl::StatusOr<coordinator::CostConstants> k =
        coordinator::ParseCostConstants(FLAGS_cost_constants);
    if (!k.ok()) return ReportError(k.status());
    engine_options.cost_constants = *k;
  }
  if (engine_options.update_mode == compute::UpdateMode::kPull &&
      engine_options.direction == compute::Mode::kPush) {
    return ReportError(absl::InvalidArgumentError(
        "--update_mode=pull sends no updates, so it runs every EdgeMap "
        "pull: it contradicts --direction=push"));
  }
  absl::StatusOr<JobPlace> place = ResolveJob();
  if (!place.ok()) return ReportError(place.status());
  if (place->nodes > 1 && place->id >= 0 && !remote) {
    return ReportError(absl::InvalidArgumentError(
        "--compute_node_id needs --memory_nodes: compute nodes in separate "
        "processes meet through memory node 0 (without an id, dmg run starts "
        "all --compute_nodes itself)"));
  }
  if (place->nodes > 1 && FLAGS_threads == 0) {
    // The cores are shared out between the compute nodes on this host.
    options->threads = std::max(1, DefaultThreads() / place->nodes);
  }
  if (FLAGS_keep_state_s < 0 || FLAGS_max_retries < 0 ||
      FLAGS_max_retries > 1000) {
    return ReportError(absl::InvalidArgumentError(
        "--keep_state_s must be >= 0 and --max_retries in 0..1000"));
  }
  if ((FLAGS_resume || FLAGS_max_retries > 0) &&
      (!remote || FLAGS_keep_state_s == 0)) {
    return ReportError(absl::InvalidArgumentError(absl::StrCat(
        FLAGS_resume ? "--resume" : "--max_retries",
        " needs memory-node daemons (--memory_nodes) and --keep_state_s > 0: "
        "the job's state lives on the memory nodes")));
  }
  if (FLAGS_resume && FLAGS_job.empty()) {
    return ReportError(absl::InvalidArgumentError(
        "--resume needs --job=NAME, the name the job to continue ran under"));
  }
  if (FLAGS_max_retries > 0 && place->nodes > 1 && place->id >= 0) {
    return ReportError(absl::InvalidArgumentError(
        "--max_retries with --compute_node_id: a node cannot go on alone "
        "when another dies; let `dmg run --compute_nodes=N` start the nodes "
        "(it starts them all again), or run every node again with --resume"));
  }
  if (place->nodes > 1 && place->id < 0 && remote) {
    return SpawnComputeNodesWithRetries(*place, options->threads);
  }
  engine_options.threads = options->threads;
  engine_options.steal = FLAGS_steal;
  // Node 0 alone reports the job: the others need not READ the result.
  engine_options.results_everywhere = false;
  if (!(FLAGS_stage1_alpha >= 0)) {
    return ReportError(
        absl::InvalidArgumentError("--stage1_alpha must be >= 0"));
  }
  engine_options.stage1_alpha = FLAGS_stage1_alpha;
  engine_options.cluster.nodes = place->nodes;
  engine_options.cluster.id = std::max(0, place->id);
  engine_options.cluster.job = place->job;
  engine_options.job = place->job;
  engine_options.resume = FLAGS_resume;
  if (!ParseCheckpointInterval(FLAGS_checkpoint_interval, engine_options)) {
    return ReportError(absl::InvalidArgumentError(
        "--checkpoint_interval='" + FLAGS_checkpoint_interval +
        "' is not a number of supersteps, seconds (e.g. 2s), 0 or auto"));
  }
  if (remote) {
    if (place->nodes == 1 || KeepStateAsked()) {
      engine_options.keep_state_s = static_cast<uint32_t>(FLAGS_keep_state_s);
    }
  }
  engine_options.cluster.timeout =
      std::chrono::milliseconds(FLAGS_transport_timeout_ms);
  if (FLAGS_cache_policy == "page_lru") {
    engine_options.cache_policy = compute::CachePolicy::kPageLru;
  } else if (FLAGS_cache_policy == "fam") {
    engine_options.cache_policy = compute::CachePolicy::kFam;
  } else if (FLAGS_cache_policy != "graph_aware") {
    return ReportError(absl::InvalidArgumentError(
        "--cache_policy must be graph_aware, page_lru or fam"));
  }

  if (FLAGS_trials < 1 || FLAGS_trials > 10000) {
    return ReportError(
        absl::InvalidArgumentError("--trials must be in 1..10000"));
  }
  int trial = 0;  // the one running (the progress line names it)
  auto trial_start = std::make_shared<std::chrono::steady_clock::time_point>();
  if (Progress::Enabled()) {
    engine_options.on_superstep =
        [&trial, a, trial_start](const compute::SuperstepStats& s) {
          const double elapsed = Since(*trial_start);
          Progress::Show(absl::StrFormat(
              "%s%s: superstep %d, frontier %d, %.2f M vertices/s, %.1f s", a,
              FLAGS_trials > 1 ? absl::StrCat(" trial ", trial + 1) : "",
              s.index, s.frontier,
              s.seconds > 0 ? s.frontier / s.seconds / 1e6 : 0, elapsed));
        };
  }

  // Test hook: DMG_TEST_EXIT_AFTER_SUPERSTEP=N ends the process (exit 9,
  // no clean-up, as a kill) once superstep N has ended, so that resume
  // tests can stop a job at a chosen point whatever this machine's speed.
  if (const char* env = std::getenv("DMG_TEST_EXIT_AFTER_SUPERSTEP")) {
    const int stop = std::atoi(env);
    auto shown = std::move(engine_options.on_superstep);
    engine_options.on_superstep = [stop,
                                   shown](const compute::SuperstepStats& s) {
      if (shown) shown(s);
      if (s.index == stop) std::_Exit(9);
    };
  }

  auto t0 = std::chrono::steady_clock::now();
  uint64_t rss_start = 0;
  std::unique_ptr<EmbeddedCluster> cluster;
  std::unique_ptr<transport::Transport> network;
  std::unique_ptr<compute::Engine> remote_engine;
  if (remote) {
    ProgressTicker ticker("connecting to " + FLAGS_memory_nodes);
    absl::StatusOr<std::unique_ptr<transport::Transport>> t =
        ConnectTransport(transport, FLAGS_memory_nodes, place->job);
    if (!t.ok()) return ReportError(t.status());
    network = *std::move(t);
    rss_start = compute::CurrentRssBytes();
    absl::StatusOr<std::unique_ptr<compute::Engine>> e =
        compute::Engine::Create(*network, engine_options);
    if (!e.ok()) return ReportError(e.status());
    remote_engine = *std::move(e);
  } else {
    ProgressTicker ticker("loading " + FLAGS_graph);
    absl::StatusOr<store::StoreImage> image =
        store::LoadStore(FLAGS_graph, *options);
    if (!image.ok()) return ReportError(image.status());
    if (absl::Status s = CheckLayoutFlags(*image); !s.ok()) {
      return ReportError(s);
    }
    if (a == "sssp" && !FLAGS_unit_weights && image->weighted() &&
        image->superblock().min_weight < 0) {
      return ReportError(
          NegativeWeightError(*options, image->superblock().min_weight));
    }
    rss_start = compute::CurrentRssBytes();
    absl::StatusOr<std::unique_ptr<EmbeddedCluster>> c =
        EmbeddedCluster::Start(*std::move(image), engine_options);
    if (!c.ok()) return ReportError(c.status());
    cluster = *std::move(c);
  }
  const double load_seconds = Since(t0);

  RunSummary summary;
  summary.version = VersionString();
  summary.graph = FLAGS_graph;
  summary.algorithm = a;
  if (absl::c_linear_search(algo->flags, "precision")) {
    summary.precision = FLAGS_precision;
  }
  summary.transport = transport;
  if (remote) {
    summary.memory_node_addresses = absl::StrSplit(FLAGS_memory_nodes, ',');
    summary.memory_nodes =
        static_cast<int>(summary.memory_node_addresses.size());
  } else {
    summary.memory_nodes = cluster->memory_nodes();
  }
  summary.threads = options->threads;
  summary.load_seconds = load_seconds;
  std::optional<store::Graph> reference_graph;  // --verify: read once
  uint64_t rss_peak = 0;

  // Every compute node of this process (several: the embedded cluster's)
  // runs the algorithm; node 0's outcome is the job's.
  struct Run {
    absl::StatusOr<algorithms::Params> params;
    absl::StatusOr<algorithms::Outcome> outcome;
  };
  auto run_one = [&](compute::Engine& e) {
    Run r{ParamsFromFlags(*algo, e, trial), absl::UnknownError("not run")};
    if (r.params.ok()) {
      e.set_signature(RunSignature(a, *r.params));
      r.outcome = algo->run(e, *r.params);
    }
    if (r.outcome.ok()) e.Finish();
    return r;
  };
  // --max_retries: a failed attempt of a remote job on one compute node
  // reconnects and resumes from the last superstep it completed.
  auto retry = [&](absl::Status failure, int* attempt) -> bool {
    while (true) {
      if (!remote || place->nodes > 1 || *attempt >= FLAGS_max_retries ||
          !Retryable(failure)) {
        return false;
      }
      ++*attempt;
      const int wait_ms = std::min(8000, 500 << std::min(4, *attempt - 1));
      absl::FPrintF(stderr,
                    "dmg: attempt %d failed: %s; resuming in %.1f s (retry %d "
                    "of %d)\n",
                    *attempt, failure.message(), wait_ms / 1000.0, *attempt,
                    FLAGS_max_retries);
      remote_engine.reset();
      network.reset();
      std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
      absl::StatusOr<std::unique_ptr<transport::Transport>> t =
          ConnectTransport(transport, FLAGS_memory_nodes, place->job);
      if (!t.ok()) {
        failure = t.status();
        continue;
      }
      network = *std::move(t);
      compute::EngineOptions again = engine_options;
      again.resume = true;
      absl::StatusOr<std::unique_ptr<compute::Engine>> e =
          compute::Engine::Create(*network, again);
      if (!e.ok()) {
        failure = e.status();
        continue;
      }
      remote_engine = *std::move(e);
      return true;
    }
  };
  int attempts = 0;
  std::vector<Run> runs;
  for (; trial < FLAGS_trials; ++trial) {
    *trial_start = std::chrono::steady_clock::now();
    if (trial > 0) {
      // A fresh engine (cold cache, new state arrays) on the graph loaded
      // once; with several compute nodes, a job name of its own.
      compute::EngineOptions next = engine_options;
      next.cluster.job = absl::StrCat(place->job, ".trial", trial + 1);
      next.resume = false;  // (only the first trial continues a job)
      if (remote) {
        remote_engine.reset();
        absl::StatusOr<std::unique_ptr<compute::Engine>> e =
            compute::Engine::Create(*network, next);
        if (!e.ok()) return ReportError(e.status());
        remote_engine = *std::move(e);
      } else if (absl::Status s = cluster->RestartEngines(next); !s.ok()) {
        return ReportError(s);
      }
    }
    runs.clear();
    if (!remote && cluster->compute_nodes() > 1) {
      runs = cluster->RunEverywhere(run_one);
    } else {
      runs.push_back(run_one(remote ? *remote_engine : cluster->engine()));
      while (!runs[0].outcome.ok() && trial == 0) {
        const absl::Status failure = runs[0].params.ok()
                                         ? runs[0].outcome.status()
                                         : runs[0].params.status();
        if (!retry(failure, &attempts)) break;
        runs[0] = run_one(*remote_engine);
      }
    }
    Progress::Clear();
    // The first error that is not another node's echo of it.
    for (const Run& r : runs) {
      const absl::Status s =
          r.params.ok() ? r.outcome.status() : r.params.status();
      if (!s.ok() && !absl::IsAborted(s)) return ReportError(s);
    }
    for (const Run& r : runs) {
      if (!r.params.ok()) return ReportError(r.params.status());
      if (!r.outcome.ok()) return ReportError(r.outcome.status());
    }
    compute::Engine& engine = remote ? *remote_engine : cluster->engine();
    const algorithms::Params& params = *runs[0].params;
    algorithms::Outcome& outcome = *runs[0].outcome;
    compute::RunStats& stats = engine.stats();
    if (engine.compute_node() != 0) {
      // One of several processes: node 0 reports for the job.
      const transport::OpStats& t = stats.total;
      absl::FPrintF(
          Report(),
          "compute node %d of job %s: %.3f s; remote %.1f MB read, %.1f MB "
          "written, %d round trips\n",
          engine.compute_node(), stats.job, stats.seconds, t.bytes_read / 1e6,
          t.bytes_written / 1e6, t.round_trips);
      continue;
    }
    // The process's peak before --verify reads the reference graph into
    // this process (which would be counted against the compute node).
    if (!reference_graph.has_value()) rss_peak = compute::PeakRssBytes();
    TrialSummary& ts = summary.trials.emplace_back();
    ts.trial = trial + 1;
    if (algo->sources != algorithms::Sources::kNone)
      ts.sources = params.sources;
    ts.seconds = stats.seconds;
    ts.supersteps = static_cast<int>(stats.supersteps.size());
    ts.remote = stats.job_total;
    ts.cache = stats.total_cache;
    ts.counts = outcome.counts;
    ts.converged = outcome.converged;
    if (FLAGS_trials > 1) {
      absl::FPrintF(Report(), "trial %d: %.3f s (%d supersteps; %s)\n",
                    trial + 1, stats.seconds, stats.supersteps.size(),
                    outcome.detail);
    }
    WarnIfNothingReached(*algo, params, outcome);
    if (FLAGS_verify) {
      CorruptForTest(outcome.values);
      if (!reference_graph.has_value()) {
        absl::StatusOr<store::Graph> g =
            store::LoadGraph(FLAGS_graph, *options);
        if (!g.ok()) return ReportError(g.status());
        reference_graph = *std::move(g);
      }
      absl::StatusOr<reference::Mismatch> m =
          Verify(*algo, params, *reference_graph, outcome.values);
      if (!m.ok()) return ReportError(m.status());
      if (m->any) {
        std::fprintf(stderr, "verify: MISMATCH%s: %s\n",
                     FLAGS_trials > 1
                         ? absl::StrCat(" in trial ", trial + 1).c_str()
                         : "",
                     m->message.c_str());
        summary.verify = "mismatch";
        if (absl::Status s = WriteSummary(summary, engine); !s.ok()) {
          return ReportError(s);
        }
        return kExitFailure;
      }
    }
  }
  compute::Engine& engine = remote ? *remote_engine : cluster->engine();
  if (engine.compute_node() != 0) return kExitOk;
  Values* values = &runs[0].outcome->values;
  const std::string& detail = runs[0].outcome->detail;
  compute::RunStats& stats = engine.stats();
  stats.algorithm = a;
  stats.rss_start_bytes = rss_start;
  stats.rss_peak_bytes = rss_peak;

  // With several compute nodes, the remote figures are the job's (every
  // node's added up). With several trials they are the last trial's, and
  // the average time over all of them ends the line.
  const transport::OpStats& t = stats.job_total;
  std::string trials_note;
  if (FLAGS_trials > 1) {
    std::vector<double> seconds;
    for (const TrialSummary& ts : summary.trials) seconds.push_back(ts.seconds);
    const Spread spread = SpreadOf(seconds);
    trials_note =
        absl::StrFormat("; %d trials, average %.3f s (min %.3f s, max %.3f s)",
                        FLAGS_trials, spread.average, spread.min, spread.max);
  }
  absl::FPrintF(
      Report(),
      "%s on %s: %d vertices, %d arcs; %d supersteps, %.3f s (load %.3f s); "
      "remote %.1f MB read, %.1f MB written, %d round trips; %s%s%s%s\n",
      a, remote ? transport + "://" + FLAGS_memory_nodes : FLAGS_graph,
      engine.num_vertices(), engine.num_arcs(), stats.supersteps.size(),
      stats.seconds, load_seconds, t.bytes_read / 1e6, t.bytes_written / 1e6,
      t.round_trips, detail,
      engine.resumed_from() > 0
          ? absl::StrFormat("; resumed after superstep %d",
                            engine.resumed_from())
          : "",
      stats.compute_nodes > 1
          ? absl::StrFormat("; %d compute nodes", stats.compute_nodes)
          : "",
      trials_note);
  if (stats.cache_capacity_bytes > 0 || stats.cache_policy == "page_lru") {
    absl::FPrintF(Report(),
                  "cache: %s, bound %.1f MB, peak %.1f MB; %d hits, %d misses, "
                  "%.1f MB fetched\n",
                  stats.cache_policy, stats.cache_capacity_bytes / 1e6,
                  stats.cache_peak_bytes / 1e6, stats.total_cache.hits,
                  stats.total_cache.misses,
                  stats.total_cache.bytes_fetched / 1e6);
  }
  if (FLAGS_top > 0) PrintTop(*values);

  if (!FLAGS_stats_json.empty()) {
    if (absl::Status s = WriteText(FLAGS_stats_json, compute::ToJson(stats));
        !s.ok()) {
      return ReportError(s);
    }
  }
  if (!FLAGS_output.empty()) {
    if (absl::Status s = WriteOutput(*values); !s.ok()) return ReportError(s);
  }
  if (FLAGS_verify) {
    summary.verify = "ok";
    std::fprintf(Report(), "verify: OK (matches the in-memory reference%s)\n",
                 FLAGS_trials > 1 ? " in every trial" : "");
  }
  if (absl::Status s = WriteSummary(summary, engine); !s.ok()) {
    return ReportError(s);
  }
  return kExitOk;
}

}  // namespace dmg::cli

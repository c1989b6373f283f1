#include "tools/run_config.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <limits>

#include "absl/algorithm/container.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/parallel.h"
#include "common/status_macros.h"
#include "coordinator/update_coordinator.h"
#include "gpu/device.h"
#include "gpu/kernels.h"
#include "store/image_file.h"
#include "tools/graph_flags.h"
#include "tools/job_token.h"

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
DEFINE_bool(source_mirrors, true,
            "with several compute nodes: an owner also WRITEs the values of "
            "an array other nodes' pulls read, packed by reader, and each "
            "reader READs its vertices' values alone instead of whole "
            "64-byte lines (false: lines only, for ablations)");
DEFINE_bool(steal, true,
            "stage 2 across compute nodes: in push, pull and bottom-up "
            "steps where the fitted model predicts a gain (one node's share "
            "well above the mean), a node done with its own work takes the "
            "others' left-over work items (false: for ablations)");
DEFINE_string(gpu, "auto",
              "auto | on | off: a share of this compute node's range on its "
              "GPU, by measured throughput (auto: when a GPU can run it, else "
              "the CPU threads, and --summary_json says why; on: refuse to "
              "run without one)");
DEFINE_double(gpu_share, -1,
              "with a GPU: its part of the compute node's range (cost: edges "
              "+ stage1_alpha x vertices), 0 to 1, fixed (ablations; BFS's "
              "bottom-up steps use the GPU only so); below 0: measured by the "
              "calibration at PageRank's first gather");
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

namespace dmg::cli {
namespace {

// Float PageRank's L1 change levels off at the rounding of its scores:
// ~1e-7 on road-NY, ~1e-10 on kron:15 (docs/ARCHITECTURE.md, "Precision").
constexpr double kFloatToleranceFloor = 1e-6;

bool FlagGiven(const char* name) {
  return !gflags::GetCommandLineFlagInfoOrDie(name).is_default;
}

// The algorithm and the flags that shape what it computes.
absl::Status CheckAlgorithmFlags(RunConfig& c) {
  c.algo = algorithms::FindAlgorithm(FLAGS_algo);
  if (c.algo == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("--algo='", FLAGS_algo, "' is not one of ",
                     algorithms::AlgorithmNames(", ")));
  }
  if (FLAGS_sources < 0) {
    return absl::InvalidArgumentError("--sources must be 0 or more");
  }
  if (FLAGS_max_iters < 1 || !(FLAGS_tolerance >= 0)) {
    return absl::InvalidArgumentError(
        "--max_iters must be >= 1 and --tolerance >= 0");
  }
  if (FLAGS_precision != "float" && FLAGS_precision != "double") {
    return absl::InvalidArgumentError("--precision='" + FLAGS_precision +
                                      "' is not float or double");
  }
  if (absl::c_linear_search(c.algo->flags, "precision") &&
      FLAGS_precision == "float" && FLAGS_tolerance > 0 &&
      FLAGS_tolerance < kFloatToleranceFloor) {
    // Not an error: --max_iters still ends the run.
    absl::FPrintF(stderr,
                  "dmg: --tolerance=%g is below what float scores resolve "
                  "(their L1 change stops falling near %g on large graphs); "
                  "--precision=double reaches it\n",
                  FLAGS_tolerance, kFloatToleranceFloor);
  }
  if (FLAGS_trials < 1 || FLAGS_trials > 10000) {
    return absl::InvalidArgumentError("--trials must be in 1..10000");
  }
  return absl::OkStatus();
}

// Where the job runs: the embedded cluster, or memory-node daemons over
// tcp (the transport every host has, so --memory_nodes alone means it) or
// rdma; and the outputs, refused before any work when unwritable.
absl::Status ChooseTransport(RunConfig& c) {
  c.remote = !FLAGS_memory_nodes.empty();
  c.transport = c.remote && !FlagGiven("transport") ? "tcp" : FLAGS_transport;
  if (c.remote ? c.transport == "local" : c.transport != "local") {
    return absl::InvalidArgumentError(
        c.remote ? "--memory_nodes needs --transport=tcp or --transport=rdma"
                 : "--transport=" + c.transport +
                       " needs --memory_nodes=HOST:PORT,... (running memory "
                       "nodes loaded with `dmg load`)");
  }
  if (c.remote && FLAGS_graph.empty() && FLAGS_verify) {
    return absl::InvalidArgumentError(
        "--verify needs --graph=SPEC (the graph that was loaded)");
  }
  for (const std::string* out :
       {&FLAGS_output, &FLAGS_stats_json, &FLAGS_summary_json}) {
    if (out->empty() || *out == "-") continue;
    if (absl::Status s = store::CheckOutputPath(*out); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// --cache_mb / --cache_fraction: at most one, each in its range.
absl::Status CacheBound(compute::EngineOptions& e) {
  if (FLAGS_cache_mb < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--cache_mb=%g is negative: give the bound in MiB (0 or absent: "
        "unbounded)",
        FLAGS_cache_mb));
  }
  if (FLAGS_cache_fraction < 0 || FLAGS_cache_fraction > 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--cache_fraction=%g is not in 0..1: it is a fraction of the store "
        "image (1: as large as the image; 0 or absent: unbounded; "
        "--cache_mb for a bound in MiB)",
        FLAGS_cache_fraction));
  }
  if (FLAGS_cache_mb > 0 && FLAGS_cache_fraction > 0) {
    return absl::InvalidArgumentError(
        "give at most one of --cache_mb and --cache_fraction");
  }
  if (FLAGS_cache_mb > 0) {
    e.cache_bytes = static_cast<uint64_t>(FLAGS_cache_mb * 1024 * 1024);
  }
  e.cache_fraction = FLAGS_cache_fraction;
  if (FLAGS_cache_policy == "page_lru") {
    e.cache_policy = compute::CachePolicy::kPageLru;
  } else if (FLAGS_cache_policy == "fam") {
    e.cache_policy = compute::CachePolicy::kFam;
  } else if (FLAGS_cache_policy != "graph_aware") {
    return absl::InvalidArgumentError(
        "--cache_policy must be graph_aware, page_lru or fam");
  }
  if (FLAGS_prefetch_window < 1 || FLAGS_prefetch_window > 64) {
    return absl::InvalidArgumentError("--prefetch_window must be in 1..64");
  }
  e.prefetch_window = FLAGS_prefetch_window;
  return absl::OkStatus();
}

// --direction, --update_mode, --cost_constants, --steal, --stage1_alpha:
// the choices the engine, the update coordinator and the workload manager
// make unless told.
absl::Status Choices(compute::EngineOptions& e) {
  if (FLAGS_direction == "push") {
    e.direction = compute::Mode::kPush;
  } else if (FLAGS_direction == "pull") {
    e.direction = compute::Mode::kPull;
  } else if (FLAGS_direction != "auto") {
    return absl::InvalidArgumentError("--direction must be auto, push or pull");
  }
  if (FLAGS_update_mode == "pull") {
    e.update_mode = compute::UpdateMode::kPull;
  } else if (FLAGS_update_mode == "batch") {
    e.update_mode = compute::UpdateMode::kBatch;
  } else if (FLAGS_update_mode == "atomic") {
    e.update_mode = compute::UpdateMode::kAtomic;
  } else if (FLAGS_update_mode != "auto") {
    return absl::InvalidArgumentError(
        "--update_mode must be auto, pull, batch or atomic");
  }
  absl::StatusOr<coordinator::CostConstants> k =
      coordinator::ParseCostConstants(FLAGS_cost_constants);
  if (!k.ok()) return k.status();
  e.cost_constants = *k;
  if (e.update_mode == compute::UpdateMode::kPull &&
      e.direction == compute::Mode::kPush) {
    return absl::InvalidArgumentError(
        "--update_mode=pull sends no updates, so it runs every EdgeMap "
        "pull: it contradicts --direction=push");
  }
  if (!(FLAGS_stage1_alpha >= 0)) {
    return absl::InvalidArgumentError("--stage1_alpha must be >= 0");
  }
  e.steal = FLAGS_steal;
  e.source_mirrors = FLAGS_source_mirrors;
  e.stage1_alpha = FLAGS_stage1_alpha;
  return absl::OkStatus();
}

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
    p.named = false;
  }
  return p;
}

// --gpu against the GPUs this process can use. With one (auto or on), the
// engine gets the share kernels' Open as its GPU share factory: PageRank's
// gather runs a share of the node's range on it, cut by stage 1's
// calibration (compute_node/engine_gpu.cc); an Open that fails there
// leaves the CPU threads to run it all, with the reason in the stats.
absl::Status GpuFlags(RunConfig& c) {
  c.gpu_mode = FLAGS_gpu;
  c.gpu_given = FlagGiven("gpu");
  if (FLAGS_gpu != "auto" && FLAGS_gpu != "on" && FLAGS_gpu != "off") {
    return absl::InvalidArgumentError("--gpu='" + FLAGS_gpu +
                                      "' is not auto, on or off");
  }
  if (!(FLAGS_gpu_share <= 1)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--gpu_share=%g: the GPU's part is at most 1 (below 0: calibrate)",
        FLAGS_gpu_share));
  }
  c.engine.gpu_share_fraction = FLAGS_gpu_share;
  if (FLAGS_gpu == "off") {
    c.gpu_note = "off (--gpu=off)";
    return absl::OkStatus();
  }
  std::string why;
  const std::vector<gpu::DeviceInfo> devices = gpu::ListDevices(&why);
  if (devices.empty()) {
    if (FLAGS_gpu == "on") {
      return absl::InvalidArgumentError("--gpu=on: no GPU: " + why);
    }
    c.gpu_note = "no GPU: " + why;
    return absl::OkStatus();
  }
  c.gpu_note =
      absl::StrFormat("GPU %d (%s) found", devices[0].index, devices[0].name);
  const int device = devices[0].index;
  c.engine.gpu_share = [device](uint64_t num_vertices, uint64_t begin,
                                uint64_t end) {
    gpu::KernelOptions options;
    options.device = device;
    return gpu::ShareKernels::Open(num_vertices, begin, end, options);
  };
  return absl::OkStatus();
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

// The job's compute nodes, this one's place, and what survives a failure
// (--keep_state_s, --resume, --max_retries, --checkpoint_interval).
absl::Status JobFlags(RunConfig& c) {
  DMG_ASSIGN_OR_RETURN(c.place, ResolveJob());
  const JobPlace& place = c.place;
  if (place.nodes > 1 && place.id >= 0 && !c.remote) {
    return absl::InvalidArgumentError(
        "--compute_node_id needs --memory_nodes: compute nodes in separate "
        "processes meet through memory node 0 (without an id, dmg run starts "
        "all --compute_nodes itself)");
  }
  if (FLAGS_keep_state_s < 0 || FLAGS_max_retries < 0 ||
      FLAGS_max_retries > 1000) {
    return absl::InvalidArgumentError(
        "--keep_state_s must be >= 0 and --max_retries in 0..1000");
  }
  if ((FLAGS_resume || FLAGS_max_retries > 0) &&
      (!c.remote || FLAGS_keep_state_s == 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        FLAGS_resume ? "--resume" : "--max_retries",
        " needs memory-node daemons (--memory_nodes) and --keep_state_s > 0: "
        "the job's state lives on the memory nodes"));
  }
  if (FLAGS_resume && FLAGS_job.empty()) {
    return absl::InvalidArgumentError(
        "--resume needs --job=NAME, the name the job to continue ran under");
  }
  if (FLAGS_max_retries > 0 && place.nodes > 1 && place.id >= 0) {
    return absl::InvalidArgumentError(
        "--max_retries with --compute_node_id: a node cannot go on alone "
        "when another dies; let `dmg run --compute_nodes=N` start the nodes "
        "(it starts them all again), or run every node again with --resume");
  }
  if (c.remote) {
    DMG_RETURN_IF_ERROR(ResolveJobToken(place.job, place.named, FLAGS_resume));
  }
  compute::EngineOptions& e = c.engine;
  if (!ParseCheckpointInterval(FLAGS_checkpoint_interval, e)) {
    return absl::InvalidArgumentError(
        "--checkpoint_interval='" + FLAGS_checkpoint_interval +
        "' is not a number of supersteps, seconds (e.g. 2s), 0 or auto");
  }
  e.cluster.nodes = place.nodes;
  e.cluster.id = std::max(0, place.id);
  e.cluster.job = place.job;
  e.cluster.timeout = std::chrono::milliseconds(FLAGS_transport_timeout_ms);
  e.job = place.job;
  e.resume = FLAGS_resume;
  if (c.remote && (place.nodes == 1 || KeepStateAsked())) {
    e.keep_state_s = static_cast<uint32_t>(FLAGS_keep_state_s);
  }
  return absl::OkStatus();
}

}  // namespace

bool KeepStateAsked() {
  return FlagGiven("keep_state_s") || FLAGS_resume || FLAGS_max_retries > 0;
}

absl::StatusOr<RunConfig> RunConfig::FromFlags() {
  RunConfig c;
  DMG_RETURN_IF_ERROR(CheckAlgorithmFlags(c));
  DMG_RETURN_IF_ERROR(ChooseTransport(c));
  if (!(c.remote && FLAGS_graph.empty())) {
    DMG_ASSIGN_OR_RETURN(c.graph, GraphSourceOptionsFromFlags());
  }
  DMG_RETURN_IF_ERROR(CacheBound(c.engine));
  DMG_RETURN_IF_ERROR(Choices(c.engine));
  DMG_RETURN_IF_ERROR(GpuFlags(c));
  DMG_RETURN_IF_ERROR(JobFlags(c));
  // --threads counts without --graph too (a run on loaded memory nodes);
  // several compute nodes on this host share its cores out.
  int& threads = c.graph.threads;
  if (threads == 0) threads = std::max(0, FLAGS_threads);
  if (threads == 0) threads = DefaultThreads();
  if (c.place.nodes > 1 && FLAGS_threads == 0) {
    threads = std::max(1, DefaultThreads() / c.place.nodes);
  }
  c.engine.threads = threads;
  // Each node READs and checks its own range of the result; node 0, which
  // reports the job, READs the rest only to write or check the values.
  c.engine.results_everywhere = false;
  c.engine.whole_result =
      !FLAGS_output.empty() || FLAGS_top > 0 || FLAGS_verify;
  return c;
}

}  // namespace dmg::cli

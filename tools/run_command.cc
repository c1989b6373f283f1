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
#include <functional>
#include <memory>
#include <thread>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "algorithms/registry.h"
#include "common/warm_pool.h"
#include "tools/cli.h"
#include "tools/graph_flags.h"
#include "tools/help.h"
#include "tools/progress.h"
#include "tools/run_config.h"
#include "tools/run_report.h"
#include "tools/run_trials.h"
#include "tools/transport_flags.h"

namespace dmg::cli {
namespace {

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

// The progress line while a trial runs: the phase (which trial), the
// superstep, and, for an algorithm with a bound on its supersteps
// (PageRank's --max_iters), how far towards that bound it is.
std::function<void(const compute::SuperstepStats&)> ProgressLine(
    const RunConfig& c, const int& trial) {
  if (!Progress::Enabled()) return nullptr;
  auto start = std::make_shared<std::chrono::steady_clock::time_point>();
  auto shown_trial = std::make_shared<int>(-1);
  const bool bounded = absl::c_linear_search(c.algo->flags, "max_iters");
  return [&trial, start, shown_trial, bounded,
          name = c.algo->name](const compute::SuperstepStats& s) {
    const auto now = std::chrono::steady_clock::now();
    if (*shown_trial != trial) {
      *shown_trial = trial;
      *start = now;
    }
    const std::string phase =
        FLAGS_trials > 1
            ? absl::StrFormat("trial %d of %d", trial + 1, FLAGS_trials)
            : "running";
    const std::string how_far =
        bounded
            ? absl::StrFormat(" of at most %d (%d%%)", FLAGS_max_iters,
                              std::min(100, 100 * s.index / FLAGS_max_iters))
            : "";
    Progress::Show(absl::StrFormat(
        "%s: %s, superstep %d%s, frontier %d, %.2f M vertices/s, %.1f s", name,
        phase, s.index, how_far, s.frontier,
        s.seconds > 0 ? s.frontier / s.seconds / 1e6 : 0,
        std::chrono::duration<double>(now - *start).count()));
  };
}

// Test hook: DMG_TEST_EXIT_AFTER_SUPERSTEP=N ends the process (exit 9,
// no clean-up, as a kill) once superstep N has ended, so that resume
// tests can stop a job at a chosen point whatever this machine's speed.
void InstallExitHook(compute::EngineOptions& options) {
  const char* env = std::getenv("DMG_TEST_EXIT_AFTER_SUPERSTEP");
  if (env == nullptr) return;
  const int stop = std::atoi(env);
  auto shown = std::move(options.on_superstep);
  options.on_superstep = [stop, shown](const compute::SuperstepStats& s) {
    if (shown) shown(s);
    if (s.index == stop) std::_Exit(9);
  };
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
        "cost_constants", "steal", "source_mirrors", "stage1_alpha"}},
      {"the GPU", {"gpu", "gpu_share"}},
      {"resume after a failure",
       {"resume", "keep_state_s", "checkpoint_interval", "max_retries",
        "job_token_file"}},
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
  absl::StatusOr<RunConfig> config = RunConfig::FromFlags();
  if (!config.ok()) return ReportError(config.status());
  if (config->gpu_given && config->gpu_mode == "auto" &&
      !config->engine.gpu_share) {
    absl::FPrintF(stderr, "dmg: --gpu=auto: %s: the CPU threads run it all\n",
                  config->gpu_note);
  }
  if (config->spawns_nodes()) {
    return SpawnComputeNodesWithRetries(config->place, config->graph.threads);
  }
  int trial = 0;  // the one running (the progress line names it)
  config->engine.on_superstep = ProgressLine(*config, trial);
  InstallExitHook(config->engine);
  absl::StatusOr<std::unique_ptr<TrialRunner>> runner =
      TrialRunner::Start(*config);
  if (!runner.ok()) return ReportError(runner.status());
  RunReport report(*config, **runner);
  for (; trial < FLAGS_trials; ++trial) {
    if (absl::Status s = (*runner)->RunTrial(trial); !s.ok()) {
      return ReportError(s);
    }
    compute::Engine& engine = (*runner)->engine();
    if (engine.compute_node() != 0) {
      // One of several processes: node 0 reports for the job.
      const compute::RunStats& stats = engine.stats();
      const transport::OpStats& t = stats.total;
      absl::FPrintF(
          Report(),
          "compute node %d of job %s: %.3f s; remote %.1f MB read, %.1f MB "
          "written, %d round trips\n",
          engine.compute_node(), stats.job, stats.seconds, t.bytes_read / 1e6,
          t.bytes_written / 1e6, t.round_trips);
      continue;
    }
    absl::StatusOr<bool> matched = report.AddTrial(trial);
    if (!matched.ok()) return ReportError(matched.status());
    if (!*matched) return kExitFailure;
  }
  if ((*runner)->engine().compute_node() != 0) return kExitOk;
  if (absl::Status s = report.Finish(); !s.ok()) return ReportError(s);
  return kExitOk;
}

}  // namespace dmg::cli

#include "tools/run_report.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <type_traits>
#include <variant>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "reference/compare.h"
#include "store/image_file.h"
#include "store/store_image.h"
#include "tools/graph_flags.h"
#include "tools/progress.h"
#include "tools/version.h"

namespace dmg::cli {
namespace {

using algorithms::Values;

// "1 superstep", "2 supersteps".
std::string Count(uint64_t n, absl::string_view what) {
  return absl::StrCat(n, " ", what, absl::string_view(n == 1 ? "" : "s"));
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

}  // namespace

FILE* Report() {
  static FILE* const report = FLAGS_output == "-" ||
                                      FLAGS_summary_json == "-" ||
                                      FLAGS_stats_json == "-"
                                  ? stderr
                                  : stdout;
  return report;
}

RunReport::RunReport(const RunConfig& config, TrialRunner& runner)
    : config_(config), runner_(runner) {
  RunSummary& s = summary_;
  s.version = VersionString();
  const store::Superblock& sb = runner.engine().graph().superblock();
  s.graph_source = std::string(store::SourceOf(sb));
  if (sb.arc_digest != 0) {
    s.graph_digest = absl::StrFormat("%016x", sb.arc_digest);
  }
  // On memory nodes without --graph: the graph they hold, by its
  // fingerprint (the store's source name).
  s.graph = FLAGS_graph.empty() && config.remote ? s.graph_source : FLAGS_graph;
  s.algorithm = config.algo->name;
  if (absl::c_linear_search(config.algo->flags, "precision")) {
    s.precision = FLAGS_precision;
  }
  s.transport = config.transport;
  if (config.remote) {
    s.memory_node_addresses = absl::StrSplit(FLAGS_memory_nodes, ',');
    s.memory_nodes = static_cast<int>(s.memory_node_addresses.size());
  } else {
    s.memory_nodes = runner.embedded_memory_nodes();
  }
  s.threads = config.graph.threads;
  s.load_seconds = runner.load_seconds();
  s.gpu_mode = config.gpu_mode;
  s.gpu_note = config.gpu_note;
}

absl::StatusOr<bool> RunReport::AddTrial(int trial) {
  compute::Engine& engine = runner_.engine();
  const compute::RunStats& stats = engine.stats();
  const algorithms::Outcome& outcome = runner_.outcome();
  // The process's peak before --verify reads the reference graph into
  // this process (which would be counted against the compute node).
  if (!reference_.has_value()) rss_peak_ = compute::PeakRssBytes();
  TrialSummary& ts = summary_.trials.emplace_back();
  ts.trial = trial + 1;
  if (config_.algo->sources != algorithms::Sources::kNone) {
    ts.sources = runner_.params().sources;
  }
  ts.seconds = stats.seconds;
  ts.supersteps = static_cast<int>(stats.supersteps.size());
  ts.remote = stats.job_total;
  ts.cache = stats.total_cache;
  ts.counts = outcome.counts;
  ts.converged = outcome.converged;
  // The GPU's share (engine_gpu.cc): whether one ran, and how it was cut
  // or why the CPU threads ran it all.
  if (stats.gpu.used) summary_.gpu_used = true;
  if (!stats.gpu.note.empty()) {
    summary_.gpu_note = config_.gpu_note + "; " + stats.gpu.note;
  } else if (config_.engine.gpu_share) {
    summary_.gpu_note = config_.gpu_note +
                        "; not used: a share runs in PageRank's gather "
                        "(and, with --gpu_share, BFS's bottom-up steps) on "
                        "one compute node";
  }
  if (FLAGS_trials > 1) {
    absl::FPrintF(Report(), "trial %d: %.3f s (%s; %s)\n", trial + 1,
                  stats.seconds, Count(stats.supersteps.size(), "superstep"),
                  outcome.detail);
  }
  WarnIfNothingReached(*config_.algo, runner_.params(), outcome);
  if (!FLAGS_verify) return true;
  return VerifyTrial(trial);
}

// The reference result for the same SPEC, built independently of the
// store layout: the graph is read (or generated) again into a plain CSR,
// once for all trials.
absl::StatusOr<bool> RunReport::VerifyTrial(int trial) {
  Values& values = runner_.outcome().values;
  CorruptForTest(values);
  if (!reference_.has_value()) {
    ProgressTicker ticker("verify: reading " + FLAGS_graph);
    DMG_ASSIGN_OR_RETURN(reference_,
                         store::LoadGraph(FLAGS_graph, config_.graph));
  }
  const compute::Engine& engine = runner_.engine();
  if (reference_->num_vertices() != engine.num_vertices() ||
      reference_->num_arcs() != engine.num_arcs()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "verify: --graph=%s has %d vertices and %d arcs, the graph the job "
        "ran on %d and %d: not the graph that was loaded",
        FLAGS_graph, reference_->num_vertices(), reference_->num_arcs(),
        engine.num_vertices(), engine.num_arcs()));
  }
  ProgressTicker ticker("verify: the in-memory reference");
  const algorithms::Algorithm& algo = *config_.algo;
  DMG_ASSIGN_OR_RETURN(Values expected,
                       algo.reference(*reference_, runner_.params()));
  const reference::Mismatch m =
      algo.compare(expected, values, runner_.params());
  if (!m.any) return true;
  std::fprintf(
      stderr, "verify: MISMATCH%s: %s\n",
      FLAGS_trials > 1 ? absl::StrCat(" in trial ", trial + 1).c_str() : "",
      m.message.c_str());
  summary_.verify = "mismatch";
  DMG_RETURN_IF_ERROR(WriteSummary());
  return false;
}

// With several compute nodes, the remote figures are the job's (every
// node's added up). With several trials they are the last trial's, and
// the average time over all of them ends the line.
void RunReport::PrintSummaryLine() {
  compute::Engine& engine = runner_.engine();
  const compute::RunStats& stats = engine.stats();
  const transport::OpStats& t = stats.job_total;
  std::string trials_note;
  if (FLAGS_trials > 1) {
    std::vector<double> seconds;
    for (const TrialSummary& ts : summary_.trials)
      seconds.push_back(ts.seconds);
    const Spread spread = SpreadOf(seconds);
    trials_note =
        absl::StrFormat("; %d trials, average %.3f s (min %.3f s, max %.3f s)",
                        FLAGS_trials, spread.average, spread.min, spread.max);
  }
  absl::FPrintF(
      Report(),
      "%s on %s: %d vertices, %d arcs; %s, %.3f s (load %.3f s); remote %.1f "
      "MB read, %.1f MB written, %d round trips; %s%s%s%s\n",
      config_.algo->name,
      config_.remote ? config_.transport + "://" + FLAGS_memory_nodes
                     : FLAGS_graph,
      engine.num_vertices(), engine.num_arcs(),
      Count(stats.supersteps.size(), "superstep"), stats.seconds,
      runner_.load_seconds(), t.bytes_read / 1e6, t.bytes_written / 1e6,
      t.round_trips, runner_.outcome().detail,
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
}

absl::Status RunReport::Finish() {
  compute::RunStats& stats = runner_.engine().stats();
  stats.algorithm = config_.algo->name;
  stats.rss_start_bytes = runner_.rss_start();
  stats.rss_peak_bytes = rss_peak_;
  PrintSummaryLine();
  const Values& values = runner_.outcome().values;
  if (FLAGS_top > 0) PrintTop(values);
  if (!FLAGS_stats_json.empty()) {
    DMG_RETURN_IF_ERROR(WriteText(FLAGS_stats_json, compute::ToJson(stats)));
  }
  if (!FLAGS_output.empty()) DMG_RETURN_IF_ERROR(WriteOutput(values));
  if (FLAGS_verify) {
    summary_.verify = "ok";
    std::fprintf(Report(), "verify: OK (matches the in-memory reference%s)\n",
                 FLAGS_trials > 1 ? " in every trial" : "");
  }
  return WriteSummary();
}

// --summary_json: the job's figures, completed from compute node 0's engine.
absl::Status RunReport::WriteSummary() {
  if (FLAGS_summary_json.empty()) return absl::OkStatus();
  compute::Engine& engine = runner_.engine();
  const compute::RunStats& stats = engine.stats();
  summary_.vertices = engine.num_vertices();
  summary_.arcs = engine.num_arcs();
  summary_.compute_nodes = std::max(1, stats.compute_nodes);
  summary_.cache_policy = stats.cache_policy;
  summary_.cache_bound_bytes = stats.cache_capacity_bytes;
  summary_.cache_peak_bytes = stats.cache_peak_bytes;
  return WriteText(FLAGS_summary_json, ToJson(summary_));
}

}  // namespace dmg::cli

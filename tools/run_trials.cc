#include "tools/run_trials.h"

#include <chrono>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "store/generator.h"
#include "store/graph_source.h"
#include "store/image_file.h"
#include "store/reader.h"
#include "tools/graph_flags.h"
#include "tools/progress.h"
#include "tools/transport_flags.h"

namespace dmg::cli {
namespace {

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

// One compute node's run of the trial.
struct NodeRun {
  absl::StatusOr<algorithms::Params> params;
  absl::StatusOr<algorithms::Outcome> outcome;
  absl::Status status() const {
    return params.ok() ? outcome.status() : params.status();
  }
};

}  // namespace

absl::StatusOr<std::unique_ptr<TrialRunner>> TrialRunner::Start(
    const RunConfig& config) {
  std::unique_ptr<TrialRunner> r(new TrialRunner(config));
  const auto t0 = std::chrono::steady_clock::now();
  DMG_RETURN_IF_ERROR(config.remote ? r->Connect() : r->LoadEmbedded());
  r->load_seconds_ = Since(t0);
  return r;
}

absl::Status TrialRunner::Connect() {
  ProgressTicker ticker("connecting to " + FLAGS_memory_nodes);
  DMG_ASSIGN_OR_RETURN(network_,
                       ConnectTransport(config_.transport, FLAGS_memory_nodes,
                                        config_.place.job));
  rss_start_ = compute::CurrentRssBytes();
  DMG_ASSIGN_OR_RETURN(remote_engine_,
                       compute::Engine::Create(*network_, config_.engine));
  // The run records --graph: it must be the graph the nodes hold.
  const store::Superblock& loaded = remote_engine_->graph().superblock();
  if (FLAGS_graph.empty()) return absl::OkStatus();
  if (store::SourceOf(loaded).empty()) {
    absl::FPrintF(stderr,
                  "dmg: warning: the memory nodes' store does not say which "
                  "graph it holds (loaded by a dmg older than graph "
                  "fingerprints): --graph=%s is recorded unchecked\n",
                  FLAGS_graph);
  }
  return store::CheckSameGraph(FLAGS_graph, config_.graph, loaded);
}

absl::Status TrialRunner::LoadEmbedded() {
  ProgressTicker ticker("loading " + FLAGS_graph);
  DMG_ASSIGN_OR_RETURN(store::StoreImage image,
                       store::LoadStore(FLAGS_graph, config_.graph));
  DMG_RETURN_IF_ERROR(CheckLayoutFlags(image));
  if (config_.algo->name == std::string_view("sssp") && !FLAGS_unit_weights &&
      image.weighted() && image.superblock().min_weight < 0) {
    return NegativeWeightError(config_.graph, image.superblock().min_weight);
  }
  rss_start_ = compute::CurrentRssBytes();
  DMG_ASSIGN_OR_RETURN(
      cluster_, EmbeddedCluster::Start(std::move(image), config_.engine));
  return absl::OkStatus();
}

// A fresh engine (cold cache, new state arrays) on the graph loaded once;
// with several compute nodes, a job name of its own.
absl::Status TrialRunner::FreshEngine(int trial) {
  compute::EngineOptions next = config_.engine;
  next.cluster.job = absl::StrCat(config_.place.job, ".trial", trial + 1);
  next.resume = false;  // (only the first trial continues a job)
  if (!config_.remote) return cluster_->RestartEngines(next);
  remote_engine_.reset();
  DMG_ASSIGN_OR_RETURN(remote_engine_,
                       compute::Engine::Create(*network_, next));
  return absl::OkStatus();
}

absl::Status TrialRunner::RunTrial(int trial) {
  if (trial > 0) DMG_RETURN_IF_ERROR(FreshEngine(trial));
  const algorithms::Algorithm& algo = *config_.algo;
  auto run_one = [&](compute::Engine& e) {
    NodeRun r{ParamsFromFlags(algo, e, trial), absl::UnknownError("not run")};
    if (r.params.ok()) {
      e.set_signature(RunSignature(algo.name, *r.params));
      r.outcome = algo.run(e, *r.params);
    }
    if (r.outcome.ok()) e.Finish();
    return r;
  };
  std::vector<NodeRun> runs;
  if (cluster_ && cluster_->compute_nodes() > 1) {
    runs = cluster_->RunEverywhere(run_one);
  } else {
    runs.push_back(run_one(engine()));
    while (!runs[0].status().ok() && trial == 0 && Retry(runs[0].status())) {
      runs[0] = run_one(engine());
    }
  }
  Progress::Clear();
  // The first error that is not another node's echo of it.
  for (const NodeRun& r : runs) {
    if (!r.status().ok() && !absl::IsAborted(r.status())) return r.status();
  }
  for (const NodeRun& r : runs) DMG_RETURN_IF_ERROR(r.status());
  params_ = *std::move(runs[0].params);
  outcome_ = *std::move(runs[0].outcome);
  return absl::OkStatus();
}

bool TrialRunner::Retry(absl::Status failure) {
  while (true) {
    if (!config_.remote || config_.place.nodes > 1 ||
        attempts_ >= FLAGS_max_retries || !Retryable(failure)) {
      return false;
    }
    ++attempts_;
    const int wait_ms = std::min(8000, 500 << std::min(4, attempts_ - 1));
    absl::FPrintF(stderr,
                  "dmg: attempt %d failed: %s; resuming in %.1f s (retry %d "
                  "of %d)\n",
                  attempts_, failure.message(), wait_ms / 1000.0, attempts_,
                  FLAGS_max_retries);
    remote_engine_.reset();
    network_.reset();
    std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
    absl::StatusOr<std::unique_ptr<transport::Transport>> t = ConnectTransport(
        config_.transport, FLAGS_memory_nodes, config_.place.job);
    if (!t.ok()) {
      failure = t.status();
      continue;
    }
    network_ = *std::move(t);
    compute::EngineOptions again = config_.engine;
    again.resume = true;
    absl::StatusOr<std::unique_ptr<compute::Engine>> e =
        compute::Engine::Create(*network_, again);
    if (!e.ok()) {
      failure = e.status();
      continue;
    }
    remote_engine_ = *std::move(e);
    return true;
  }
}

}  // namespace dmg::cli

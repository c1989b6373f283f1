// DM engine vs in-memory reference, in one process, on one graph.
//
// For PageRank (fixed iteration count, tolerance 0) and BFS (several
// sources), runs the parallel in-memory reference (reference/fast.cc: plain
// CSR, no transport) and the DM engine on the embedded cluster (every graph
// byte READ through the local transport from the memory node), each
// `--repeat` times, and prints the best time of each, their ratio, remote
// bytes per traversed edge and round trips per superstep. Ratios are what to
// read: both sides run on the same machine in the same minute.
//
// The DM side runs with a cache of --cache_fraction of the store (default
// 10%: the vertex state stays local, the blocks do not fit and stream from
// the memory node in every superstep, as in a disaggregated deployment).
// --cache_fraction=0 lifts the bound: blocks read once are then kept and
// later supersteps read no edges remotely.
//
// Usage: dm_vs_memory [--graph=kron:18] [--threads=2] [--sources=4]
//                     [--cache_fraction=0.1]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>

#include "absl/strings/str_format.h"
#include "algorithms/algorithms.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "reference/reference.h"
#include "store/graph_source.h"
#include "tools/embedded_cluster.h"

DEFINE_string(graph, "kron:18", "graph SPEC");
DEFINE_int32(threads, 2, "threads for both sides");
DEFINE_int32(iters, 20, "PageRank iterations");
DEFINE_int32(sources, 4, "BFS sources");
DEFINE_int32(repeat, 3, "runs per measurement (best is reported)");
DEFINE_double(cache_fraction, 0.1,
              "DM cache bound as a fraction of the store (0: no bound)");

namespace dmg {
namespace {

double Best(int repeat, const std::function<void()>& fn) {
  double best = 1e300;
  for (int i = 0; i < repeat; ++i) {
    auto t = std::chrono::steady_clock::now();
    fn();
    best = std::min(best, std::chrono::duration<double>(
                              std::chrono::steady_clock::now() - t)
                              .count());
  }
  return best;
}

int Main() {
  store::GraphSourceOptions options;
  options.threads = FLAGS_threads;
  absl::StatusOr<store::Graph> graph = store::LoadGraph(FLAGS_graph, options);
  CHECK(graph.ok()) << graph.status();
  absl::StatusOr<store::StoreImage> image =
      store::LoadStore(FLAGS_graph, options);
  CHECK(image.ok()) << image.status();
  compute::EngineOptions eo;
  eo.threads = FLAGS_threads;
  eo.cache_fraction = FLAGS_cache_fraction;
  auto cluster = cli::EmbeddedCluster::Start(*std::move(image), eo);
  CHECK(cluster.ok()) << cluster.status();
  const uint64_t n = graph->num_vertices(), m = graph->num_arcs();
  absl::PrintF(
      "graph %s: %d vertices, %d arcs; %d threads; best of %d; DM cache %s\n",
      FLAGS_graph, n, m, FLAGS_threads, FLAGS_repeat,
      FLAGS_cache_fraction > 0
          ? absl::StrFormat("%.0f%% of the store", 100 * FLAGS_cache_fraction)
          : std::string("unbounded"));
  absl::PrintF("%-9s %10s %10s %7s %14s %16s\n", "kernel", "memory_s", "dm_s",
               "ratio", "bytes/edge", "trips/superstep");

  // PageRank: exactly FLAGS_iters iterations on both sides.
  double mem_pr = Best(FLAGS_repeat, [&] {
    auto r = reference::fast::PageRank(*graph, FLAGS_iters, 0.0, FLAGS_threads);
    CHECK(r.ok());
  });
  // The DM side is timed around the algorithm only: each run gets a fresh
  // embedded cluster (so its statistics are its own) built outside the clock.
  compute::RunStats pr_stats;
  double dm_pr = 1e300;
  for (int i = 0; i < FLAGS_repeat; ++i) {
    auto c = cli::EmbeddedCluster::Start(
        *store::LoadStore(FLAGS_graph, options), eo);
    CHECK(c.ok());
    auto t = std::chrono::steady_clock::now();
    auto r = algorithms::PageRank((*c)->engine(), FLAGS_iters, 0.0);
    double sec =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t)
            .count();
    CHECK(r.ok()) << r.status();
    (*c)->engine().Finish();
    if (sec < dm_pr) {
      dm_pr = sec;
      pr_stats = (*c)->engine().stats();
    }
  }
  absl::PrintF("%-9s %10.4f %10.4f %7.2f %14.2f %16.1f\n", "pagerank", mem_pr,
               dm_pr, dm_pr / mem_pr,
               double(pr_stats.total.bytes_read) / (double(m) * FLAGS_iters),
               double(pr_stats.total.round_trips) /
                   std::max<size_t>(1, pr_stats.supersteps.size()));

  // BFS from several sources with out-edges. The DM engine picks push or
  // pull per level (direction-optimizing); the memory column is top-down,
  // and the note line gives the in-memory direction-optimizing BFS too.
  std::vector<store::VertexId> sources;
  for (uint64_t x = 1; sources.size() < size_t(FLAGS_sources);) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    store::VertexId v = (x >> 33) % n;
    if (graph->out.degree(v) > 0) sources.push_back(v);
  }
  double mem_bfs = 0, mem_do = 0, dm_bfs = 0;
  uint64_t bytes = 0, trips = 0, steps = 0, edges = 0;
  for (store::VertexId s : sources) {
    mem_bfs += Best(FLAGS_repeat, [&] {
      CHECK(reference::fast::BfsTopDown(*graph, s, FLAGS_threads).ok());
    });
    mem_do += Best(FLAGS_repeat, [&] {
      CHECK(reference::fast::BfsDirectionOptimizing(*graph, s, FLAGS_threads)
                .ok());
    });
    double best = 1e300;
    for (int i = 0; i < FLAGS_repeat; ++i) {
      auto c = cli::EmbeddedCluster::Start(
          *store::LoadStore(FLAGS_graph, options), eo);
      CHECK(c.ok());
      auto t = std::chrono::steady_clock::now();
      auto r = algorithms::Bfs((*c)->engine(), s);
      double sec =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t)
              .count();
      CHECK(r.ok()) << r.status();
      (*c)->engine().Finish();
      if (sec < best) {
        best = sec;
        const compute::RunStats& st = (*c)->engine().stats();
        if (i == 0) {
          bytes += st.total.bytes_read;
          trips += st.total.round_trips;
          steps += st.supersteps.size();
          for (store::VertexId v = 0; v < n; ++v) {
            if ((*r)[v] >= 0) edges += graph->out.degree(v);
          }
        }
      }
    }
    dm_bfs += best;
  }
  absl::PrintF("%-9s %10.4f %10.4f %7.2f %14.2f %16.1f\n", "bfs", mem_bfs,
               dm_bfs, dm_bfs / mem_bfs, double(bytes) / edges,
               double(trips) / steps);
  absl::PrintF(
      "(bfs: %d sources; DM is direction-optimizing, the memory column "
      "top-down; the in-memory direction-optimizing BFS takes %.4f s, ratio "
      "%.2f)\n",
      sources.size(), mem_do, dm_bfs / mem_do);
  return 0;
}

}  // namespace
}  // namespace dmg

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  return dmg::Main();
}

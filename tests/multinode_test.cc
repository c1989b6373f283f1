// Several compute nodes on one job (the embedded cluster runs them as
// separate engines in this process, meeting through memory node 0 as
// separate processes do): every algorithm gives the reference's answers on
// every node, for 1-4 compute nodes x 1-3 memory nodes, every forced
// direction, and bounded caches; jobs with different names share memory
// nodes; the job record does not outlive its job.
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <variant>

#include "algorithms/algorithms.h"
#include "algorithms/registry.h"
#include "compute_node/vertex_program.h"
#include "gtest/gtest.h"
#include "reference/compare.h"
#include "reference/reference.h"
#include "store/build_graph.h"
#include "store/generator.h"
#include "store/layout.h"
#include "tools/embedded_cluster.h"

namespace dmg {
namespace {

using cli::EmbeddedCluster;
using compute::Mode;

store::Graph Generated(store::GeneratorParams::Kind kind, int scale,
                       bool symmetric) {
  store::EdgeList e = store::Generate({kind, scale, 8, 7});
  for (size_t i = 0; i < e.num_arcs(); ++i) {
    e.weights.push_back(
        static_cast<store::Weight>((i * 2654435761u) % 100 + 1));
  }
  store::CleanOptions clean;
  clean.symmetrize = symmetric;
  absl::StatusOr<store::Graph> g = store::BuildGraph(std::move(e), clean);
  EXPECT_TRUE(g.ok()) << g.status();
  return *std::move(g);
}

using compute::UpdateMode;

struct Config {
  int compute_nodes = 2;
  int memory_nodes = 1;
  Mode direction = Mode::kAuto;
  uint64_t cache_bytes = compute::MemoryBudget::kUnlimited;
  int threads = 2;
  UpdateMode update_mode = UpdateMode::kAuto;
  bool steal = true;  // as EngineOptions
  bool counted_parts = true;
  bool results_everywhere = true;
  bool whole_result = false;
  compute::EngineOptions::ForcedRefresh refresh =
      compute::EngineOptions::ForcedRefresh::kAuto;
};

std::string Describe(const Config& c) {
  return absl::StrCat(c.compute_nodes, " compute x ", c.memory_nodes,
                      " memory nodes, direction ",
                      c.direction == Mode::kAuto   ? "auto"
                      : c.direction == Mode::kPush ? "push"
                                                   : "pull",
                      c.cache_bytes == compute::MemoryBudget::kUnlimited
                          ? ""
                          : absl::StrCat(", cache ", c.cache_bytes),
                      ", update mode ",
                      c.update_mode == UpdateMode::kAuto     ? "auto"
                      : c.update_mode == UpdateMode::kBatch  ? "batch"
                      : c.update_mode == UpdateMode::kAtomic ? "atomic"
                                                             : "pull");
}

std::unique_ptr<EmbeddedCluster> Start(const store::Graph& g, const Config& c) {
  store::LayoutOptions layout;
  layout.block_size = 4096;
  layout.num_memory_nodes = c.memory_nodes;
  absl::StatusOr<store::StoreImage> image = store::BuildStoreImage(g, layout);
  EXPECT_TRUE(image.ok()) << image.status();
  compute::EngineOptions eo;
  eo.threads = c.threads;
  eo.batch_bytes = 32 * 1024;
  eo.cache_bytes = c.cache_bytes;
  eo.direction = c.direction;
  eo.update_mode = c.update_mode;
  eo.steal = c.steal;
  eo.counted_parts = c.counted_parts;
  eo.results_everywhere = c.results_everywhere;
  eo.whole_result = c.whole_result;
  eo.refresh = c.refresh;
  eo.cluster.nodes = c.compute_nodes;
  eo.cluster.job = "test";
  eo.cluster.timeout = std::chrono::milliseconds(20000);
  auto cluster = EmbeddedCluster::Start(*std::move(image), eo);
  EXPECT_TRUE(cluster.ok()) << cluster.status();
  return *std::move(cluster);
}

// Every registered algorithm on every compute node of the cluster, each
// node's answer against the in-memory reference (with the registry's own
// comparison). An algorithm whose reference refuses the graph (triangle
// counting and k-core need a symmetric one) must fail on every node too.
void CheckAll(const store::Graph& g, const Config& c) {
  algorithms::Params p;
  while (p.source + 1 < g.num_vertices() && g.out.degree(p.source) == 0) {
    ++p.source;
  }
  p.sources = {p.source, static_cast<store::VertexId>(g.num_vertices() / 2)};
  p.max_iters = 100;
  p.tolerance = 1e-10;
  p.precision = algorithms::Precision::kDouble;
  for (const algorithms::Algorithm& a : algorithms::Registry()) {
    SCOPED_TRACE(absl::StrCat(a.name, ", ", Describe(c)));
    algorithms::Params params = p;
    if (a.sources == algorithms::Sources::kOne) params.sources = {p.source};
    const absl::StatusOr<algorithms::Values> expected = a.reference(g, params);
    auto cluster = Start(g, c);
    if (cluster == nullptr) return;
    auto results = cluster->RunEverywhere([&](compute::Engine& e) {
      absl::StatusOr<algorithms::Outcome> r = a.run(e, params);
      if (r.ok()) e.Finish();
      return r;
    });
    for (size_t k = 0; k < results.size(); ++k) {
      SCOPED_TRACE(absl::StrCat("compute node ", k));
      if (!expected.ok()) {
        EXPECT_FALSE(results[k].ok()) << "the reference refused: "
                                      << expected.status();
        continue;
      }
      ASSERT_TRUE(results[k].ok()) << results[k].status();
      const reference::Mismatch m =
          a.compare(*expected, results[k]->values, params);
      EXPECT_FALSE(m.any) << m.message;
    }
  }
}

class MultiNodeTest
    : public ::testing::TestWithParam<std::tuple<int, int, Mode>> {};

TEST_P(MultiNodeTest, EveryAlgorithmMatchesTheReference) {
  auto [compute_nodes, memory_nodes, direction] = GetParam();
  // Directed (kron) and undirected (urand, symmetrized: TC and k-core too).
  static const store::Graph* kron = new store::Graph(
      Generated(store::GeneratorParams::Kind::kKron, 14, false));
  static const store::Graph* urand = new store::Graph(
      Generated(store::GeneratorParams::Kind::kUrand, 14, true));
  Config c{compute_nodes, memory_nodes, direction};
  CheckAll(*kron, c);
  CheckAll(*urand, c);
}

INSTANTIATE_TEST_SUITE_P(Nodes, MultiNodeTest,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4),
                                            ::testing::Values(1, 3),
                                            ::testing::Values(Mode::kAuto,
                                                              Mode::kPush,
                                                              Mode::kPull)));

// dmg run's results (results_everywhere false): each node READs its own
// range, which matches the reference there; the summary's counts, summed
// over the nodes, are the whole result's on every node; with whole_result
// node 0 holds every value. Checked on 3 nodes against the registry's
// counts over the reference's values (one node, results everywhere).
TEST(MultiNodeTest, SplitResultsCountAsTheWholeOnes) {
  // 4 ranges' worth of vertices: no node's range is empty.
  const store::Graph g =
      Generated(store::GeneratorParams::Kind::kUrand, 14, true);
  algorithms::Params p;
  p.source = 1;
  p.sources = {1, 7};
  p.max_iters = 20;
  p.tolerance = 1e-10;
  p.precision = algorithms::Precision::kDouble;
  for (const char* name : {"bfs", "cc", "sssp", "kcore"}) {
    const algorithms::Algorithm& a = *algorithms::FindAlgorithm(name);
    auto one = Start(g, Config{.compute_nodes = 1});
    ASSERT_NE(one, nullptr);
    auto whole = one->RunEverywhere([&](compute::Engine& e) {
      absl::StatusOr<algorithms::Outcome> r = a.run(e, p);
      if (r.ok()) e.Finish();
      return r;
    });
    ASSERT_TRUE(whole[0].ok()) << whole[0].status();
    for (const bool whole_result : {false, true}) {
      SCOPED_TRACE(absl::StrCat(name, whole_result ? ", whole result" : ""));
      Config c{.compute_nodes = 3, .threads = 1};
      c.results_everywhere = false;
      c.whole_result = whole_result;
      auto cluster = Start(g, c);
      ASSERT_NE(cluster, nullptr);
      std::vector<std::pair<store::VertexId, store::VertexId>> ranges(3);
      auto results = cluster->RunEverywhere([&](compute::Engine& e) {
        absl::StatusOr<algorithms::Outcome> r = a.run(e, p);
        ranges[e.compute_node()] = e.ResultRange();
        if (r.ok()) e.Finish();
        return r;
      });
      for (int k = 0; k < 3; ++k) {
        SCOPED_TRACE(absl::StrCat("compute node ", k));
        ASSERT_TRUE(results[k].ok()) << results[k].status();
        EXPECT_EQ(results[k]->counts, whole[0]->counts);
        EXPECT_EQ(results[k]->detail, whole[0]->detail);
        std::visit(
            [&](const auto& want) {
              using V = std::decay_t<decltype(want)>;
              if constexpr (!std::is_same_v<V, uint64_t>) {
                const V& got = std::get<V>(results[k]->values);
                ASSERT_EQ(got.size(), want.size());
                const bool all = whole_result && k == 0;
                const auto [b, e] = ranges[k];
                EXPECT_LT(b, e);
                for (size_t v = 0; v < want.size(); ++v) {
                  if (all || (v >= b && v < e)) {
                    ASSERT_EQ(got[v], want[v]) << "vertex " << v;
                  }
                }
              }
            },
            whole[0]->values);
      }
    }
  }
}

class UpdateModeTest
    : public ::testing::TestWithParam<std::tuple<int, UpdateMode, Mode>> {};

TEST_P(UpdateModeTest, EveryForcedUpdateModeGivesTheSameAnswers) {
  auto [compute_nodes, update_mode, direction] = GetParam();
  static const store::Graph* kron = new store::Graph(
      Generated(store::GeneratorParams::Kind::kKron, 14, false));
  static const store::Graph* urand = new store::Graph(
      Generated(store::GeneratorParams::Kind::kUrand, 14, true));
  Config c{compute_nodes, 2, direction};
  c.update_mode = update_mode;
  CheckAll(*kron, c);
  CheckAll(*urand, c);
}

INSTANTIATE_TEST_SUITE_P(
    Modes, UpdateModeTest,
    ::testing::Combine(::testing::Values(2, 3),
                       ::testing::Values(UpdateMode::kBatch,
                                         UpdateMode::kAtomic),
                       ::testing::Values(Mode::kAuto, Mode::kPush)));
INSTANTIATE_TEST_SUITE_P(
    Pull, UpdateModeTest,
    ::testing::Combine(::testing::Values(2, 3),
                       ::testing::Values(UpdateMode::kPull),
                       ::testing::Values(Mode::kAuto)));

// PageRank's Gather is pulled or pushed per superstep: the coordinator
// chooses (pull, every visit being cheaper and no updates travelling) and
// records both estimates; --direction=push forces the push, whose sums
// equal the pull's within rounding on any number of nodes.
TEST(MultiNodeTest, PageRanksGatherChoiceIsRecordedPerSuperstep) {
  static const store::Graph* kron = new store::Graph(
      Generated(store::GeneratorParams::Kind::kKron, 14, false));
  const auto ref = reference::PageRank(*kron, 5, 0);
  for (int nodes : {1, 3}) {
    for (Mode direction : {Mode::kAuto, Mode::kPush}) {
      Config c{nodes, 2, direction};
      SCOPED_TRACE(Describe(c));
      auto cluster = Start(*kron, c);
      ASSERT_NE(cluster, nullptr);
      auto results = cluster->RunEverywhere([&](compute::Engine& e) {
        auto r = algorithms::PageRank(e, 5, 0);
        e.Finish();
        if (r.ok() && e.compute_node() == 0) {
          for (const compute::SuperstepStats& s : e.stats().supersteps) {
            SCOPED_TRACE(s.index);
            if (direction == Mode::kPush) {
              EXPECT_EQ(s.direction, "push");
              EXPECT_EQ(s.chosen_by, "flag");
              EXPECT_GT(s.push_arcs, 0u);
              EXPECT_EQ(s.gather_visits, 0u);
              EXPECT_EQ(s.remote_arcs > 0, nodes > 1);
            } else {
              EXPECT_EQ(s.direction, "pull");
              EXPECT_EQ(s.chosen_by, "auto");
              EXPECT_GT(s.est_push_us, s.est_pull_us);
              EXPECT_GT(s.est_pull_us, 0);
              // (In a step others may steal from, on a loaded machine they
              // may take all of node 0's units.)
              if (s.steal != "on") {
                EXPECT_GT(s.gather_visits, 0u);
              }
            }
          }
        }
        return r;
      });
      for (size_t k = 0; k < results.size(); ++k) {
        ASSERT_TRUE(results[k].ok()) << results[k].status();
        EXPECT_EQ(results[k]->iterations, 5);
        EXPECT_LE(reference::L1Distance(ref->scores, results[k]->scores),
                  1e-12);
      }
    }
  }
}

// A gather's first step on several nodes, with the node's blocks in its
// hot-block cache: the node READs its blocks and records the other nodes'
// vertices they name before it gathers (Engine::PrimeSources), so its
// reads of those vertices' pending lines are one batch an array, as in
// later steps, instead of a line at a touch until DemandBudget's batch of
// every pending line. On urand:13 (every other arc crosses the cut) a
// node touches ~256 pending lines an array: a line at a touch made step 1
// 150-460 round trips against step 2's 15-61; primed, 31-33 against
// 16-17 (polls left out).
TEST(MultiNodeTest, AGathersFirstStepReadsItsSourcesInOneBatch) {
  absl::StatusOr<store::Graph> g =
      Generated(store::GeneratorParams::Kind::kUrand, 13, false);
  ASSERT_TRUE(g.ok()) << g.status();
  const auto ref = reference::PageRank(*g, 3, 0);
  Config c{2, 1, Mode::kPull};
  c.steal = false;
  auto cluster = Start(*g, c);
  ASSERT_NE(cluster, nullptr);
  auto results = cluster->RunEverywhere([&](compute::Engine& e) {
    auto r = algorithms::PageRank(e, 3, 0);
    e.Finish();
    return r;
  });
  for (size_t k = 0; k < results.size(); ++k) {
    SCOPED_TRACE(absl::StrCat("compute node ", k));
    ASSERT_TRUE(results[k].ok()) << results[k].status();
    EXPECT_LE(reference::L1Distance(ref->scores, results[k]->scores), 1e-12);
    const auto& steps = cluster->engine(k).stats().supersteps;
    ASSERT_GE(steps.size(), 2u);
    // Step 1 also READs the node's blocks: ~300 KB of 4 KiB blocks in
    // 32 KiB batches, ~16 READs. (Polls for the other node are as many as
    // the wait lasted: up to ~900 under ctest -j2.)
    const uint64_t first = steps[0].ops.round_trips - steps[0].polls;
    const uint64_t second = steps[1].ops.round_trips - steps[1].polls;
    EXPECT_LE(first, second + 64)
        << "step 1 " << first << ", step 2 " << second;
  }
}

TEST(MultiNodeTest, BoundedCachesPageTheState) {
  const store::Graph g =
      Generated(store::GeneratorParams::Kind::kKron, 14, true);
  // A cache far smaller than the state arrays: they are paged, and pages
  // other nodes change are dropped and fetched again.
  for (int nodes : {2, 3}) {
    for (UpdateMode m : {UpdateMode::kBatch, UpdateMode::kAtomic}) {
      Config c{nodes, 2, Mode::kPush, 256 * 1024};
      c.update_mode = m;
      CheckAll(g, c);
    }
    CheckAll(g, Config{nodes, 2, Mode::kAuto, 256 * 1024});
  }
}

absl::StatusOr<store::Graph> Symmetric(store::EdgeList e) {
  store::CleanOptions clean;
  clean.symmetrize = true;
  return store::BuildGraph(std::move(e), clean);
}

// Compute nodes (two unless `nodes`) that push, their ranges split by
// vertices only (stage 1 with a huge alpha), `threads` each, over
// `memory_nodes` memory nodes.
absl::StatusOr<std::unique_ptr<EmbeddedCluster>> StartPushSplitByVertices(
    const store::Graph& g, int threads, uint32_t memory_nodes,
    const std::string& job, bool steal, Mode direction = Mode::kPush,
    int nodes = 2) {
  store::LayoutOptions layout;
  layout.block_size = 4096;
  layout.num_memory_nodes = memory_nodes;
  absl::StatusOr<store::StoreImage> image = store::BuildStoreImage(g, layout);
  if (!image.ok()) return image.status();
  compute::EngineOptions eo;
  eo.threads = threads;
  eo.direction = direction;
  eo.cluster.nodes = nodes;
  eo.cluster.job = job;
  eo.steal = steal;
  // A core a thread, as on hosts of their own: four threads on this
  // machine's two cores would gain nothing from stealing (SharedCoreBounds).
  eo.usable_cores = threads * nodes;
  eo.stage1_alpha = 1e12;
  return EmbeddedCluster::Start(*std::move(image), eo);
}

// The skew graph: the first `half` vertices a dense random graph (48
// neighbours each, from `seed`; with `group`, each vertex's drawn from its
// own run of `group` consecutive vertices, so that every run is a component
// of its own and an arc left out would split it), the second half short
// paths of 4 hanging off it (little work); symmetric.
absl::StatusOr<store::Graph> SkewedGraph(uint32_t half, uint64_t seed,
                                         uint32_t group = 0) {
  store::EdgeList e;
  e.num_vertices = 2 * half;
  uint64_t x = seed;
  const uint32_t run = group == 0 ? half : group;
  for (uint32_t u = 0; u < half; ++u) {
    const uint32_t first = u / run * run;
    const uint32_t size = std::min(run, half - first);
    for (int k = 0; k < 48; ++k) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      e.Add(u, static_cast<store::VertexId>(first + (x >> 33) % size));
    }
  }
  for (uint32_t u = half; u < 2 * half; u += 4) {
    e.Add(u % half, u);
    for (uint32_t k = 0; k < 3; ++k) e.Add(u + k, u + k + 1);
  }
  return Symmetric(std::move(e));
}

// The nodes' busy times and items (the experiments compare them).
void PrintBusy(bool steal, const compute::RunStats& stats) {
  std::string line = absl::StrFormat("steal=%d:", steal);
  for (size_t k = 0; k < stats.nodes.size(); ++k) {
    const compute::NodeStats& n = stats.nodes[k];
    absl::StrAppendFormat(&line,
                          "%s node %d busy %.4f s, items own %d + taken %d",
                          k == 0 ? "" : ";", k, n.seconds - n.wait_seconds,
                          n.own_items, n.stolen_items);
  }
  std::printf("%s\n", line.c_str());
}

// Skew: the first half of the vertices holds nearly all the edges (a dense
// random graph), the second half short paths, and the split balances
// vertices only (stage1_alpha huge), so node 0's range holds most of every
// push step's work. With stealing, node 1 takes node 0's left-over chunks;
// without, it takes none; the answers are the reference's either way. (The
// busy times go to the stats: the experiments compare them.)
TEST(MultiNodeTest, SkewedWorkIsStolen) {
  const uint32_t half = 8192;
  absl::StatusOr<store::Graph> g = SkewedGraph(half, 12345);
  ASSERT_TRUE(g.ok()) << g.status();
  const auto ref = reference::ConnectedComponents(*g);
  const auto ref_bfs = reference::Bfs(*g, 1);
  for (bool steal : {true, false}) {
    SCOPED_TRACE(steal ? "steal" : "no steal");
    auto cluster = StartPushSplitByVertices(*g, 2, 2, "skew", steal);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    auto results = (*cluster)->RunEverywhere([&](compute::Engine& engine) {
      auto bfs = algorithms::Bfs(engine, 1);
      auto cc =
          bfs.ok() ? algorithms::ConnectedComponents(engine)
                   : absl::StatusOr<std::vector<store::VertexId>>(bfs.status());
      engine.Finish();
      return std::make_pair(bfs, cc);
    });
    for (auto& [bfs, cc] : results) {
      ASSERT_TRUE(bfs.ok()) << bfs.status();
      ASSERT_TRUE(cc.ok()) << cc.status();
      EXPECT_FALSE(reference::CompareExact(*ref_bfs, *bfs).any);
      EXPECT_FALSE(reference::CompareExact(ref, *cc).any);
    }
    const compute::RunStats& stats = (*cluster)->engine(0).stats();
    ASSERT_EQ(stats.nodes.size(), 2u);
    EXPECT_EQ(stats.nodes[0].own_end, half)
        << "the split is not the skewed one";
    // Who takes from whom follows the measured times: node 1 has the
    // lighter share, but on a loaded machine node 0 may measure faster in a
    // level and take from node 1 instead (ctest -j2 once: 1 item, by node 0).
    const uint64_t stolen =
        stats.nodes[0].stolen_items + stats.nodes[1].stolen_items;
    if (steal) {
      EXPECT_GT(stolen, 0u);
    } else {
      EXPECT_EQ(stolen, 0u);
    }
    PrintBusy(steal, stats);
  }
}

// The same skew in pull (dense) steps: a node's units of blocks are its
// work items (and, bottom-up, its range's 4096-vertex chunks); a taken
// unit's results travel to their owner as a push's updates do. CC's pull
// steps are skewed enough to steal in (node 0's units hold nearly every
// arc); the answers are the reference's either way.
TEST(MultiNodeTest, SkewedPullWorkIsStolen) {
  const uint32_t half = 8192;
  absl::StatusOr<store::Graph> g = SkewedGraph(half, 54321);
  ASSERT_TRUE(g.ok()) << g.status();
  const auto ref = reference::ConnectedComponents(*g);
  const auto ref_bfs = reference::Bfs(*g, 1);
  const auto ref_pr = reference::PageRank(*g, 5, 0);
  ASSERT_TRUE(ref_pr.ok()) << ref_pr.status();
  // PageRank's scores with stealing equal those without bit for bit: a
  // taken vertex's sum is folded in the same order, and its owner
  // finishes it in its block's place.
  std::vector<double> scores[2];
  for (bool steal : {true, false}) {
    SCOPED_TRACE(steal ? "steal" : "no steal");
    auto cluster =
        StartPushSplitByVertices(*g, 2, 2, "skewpull", steal, Mode::kPull);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    struct Answers {
      absl::StatusOr<std::vector<int32_t>> bfs;
      absl::StatusOr<std::vector<store::VertexId>> cc;
      absl::StatusOr<algorithms::PageRankResult> pr;
    };
    auto results = (*cluster)->RunEverywhere([&](compute::Engine& engine) {
      Answers a{algorithms::Bfs(engine, 1), absl::UnknownError("not run"),
                absl::UnknownError("not run")};
      if (a.bfs.ok()) a.cc = algorithms::ConnectedComponents(engine);
      if (a.cc.ok()) a.pr = algorithms::PageRank(engine, 5, 0);
      engine.Finish();
      return a;
    });
    for (Answers& a : results) {
      ASSERT_TRUE(a.bfs.ok()) << a.bfs.status();
      ASSERT_TRUE(a.cc.ok()) << a.cc.status();
      ASSERT_TRUE(a.pr.ok()) << a.pr.status();
      EXPECT_FALSE(reference::CompareExact(*ref_bfs, *a.bfs).any);
      EXPECT_FALSE(reference::CompareExact(ref, *a.cc).any);
      EXPECT_LE(reference::L1Distance(ref_pr->scores, a.pr->scores), 1e-12);
    }
    scores[steal ? 0 : 1] = results[0].pr->scores;
    const compute::RunStats& stats = (*cluster)->engine(0).stats();
    ASSERT_EQ(stats.nodes.size(), 2u);
    EXPECT_EQ(stats.nodes[0].own_end, half)
        << "the split is not the skewed one";
    const uint64_t taken =
        stats.nodes[0].stolen_items + stats.nodes[1].stolen_items;
    uint64_t shared_steps = 0;
    for (const compute::SuperstepStats& t : stats.supersteps) {
      shared_steps += t.steal == "on";
      if (t.steal == "on") {
        EXPECT_GT(t.est_steal_gain_us, t.est_steal_cost_us);
      }
    }
    if (steal) {
      EXPECT_GT(taken, 0u);
      EXPECT_GT(shared_steps, 0u);
    } else {
      EXPECT_EQ(taken, 0u);
    }
    PrintBusy(steal, stats);
  }
  EXPECT_EQ(scores[0], scores[1]);
}

// Three ranges of `m` vertices each (m a multiple of 4096, so that a
// split by vertices falls between them): in the first, runs of 64
// vertices each a random graph of degree 24, in the second of degree 12
// (every run a component, but the two runs joined by an arc), and short
// paths hanging off the first in the third; symmetric.
absl::StatusOr<store::Graph> TwoDenseRanges(uint32_t m, uint64_t seed) {
  store::EdgeList e;
  e.num_vertices = 3 * m;
  uint64_t x = seed;
  auto in_run = [&](uint32_t u) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<store::VertexId>(u / 64 * 64 + (x >> 33) % 64);
  };
  for (uint32_t u = 0; u < m; ++u) {
    for (int k = 0; k < 24; ++k) e.Add(u, in_run(u));
    for (int k = 0; k < 12; ++k) e.Add(m + u, in_run(m + u));
  }
  e.Add(m - 1, m);
  for (uint32_t u = 2 * m; u < 3 * m; u += 4) {
    e.Add(u % m, u);
    for (uint32_t k = 0; k < 3; ++k) e.Add(u + k, u + k + 1);
  }
  return Symmetric(std::move(e));
}

// Runs cc on `cluster` everywhere, checks every node's labels against
// `ref`, and returns the items taken over all nodes (-1 on a failure).
int64_t ForestItemsTaken(EmbeddedCluster& cluster,
                         const std::vector<store::VertexId>& ref) {
  auto results = cluster.RunEverywhere([&](compute::Engine& engine) {
    auto cc = algorithms::ConnectedComponents(engine);
    engine.Finish();
    return cc;
  });
  for (auto& cc : results) {
    EXPECT_TRUE(cc.ok()) << cc.status();
    if (!cc.ok()) return -1;
    EXPECT_FALSE(reference::CompareExact(ref, *cc).any);
  }
  const compute::RunStats& stats = cluster.engine(0).stats();
  EXPECT_FALSE(stats.supersteps.empty());
  if (stats.supersteps.empty()) return -1;
  // Phase 1 is the first superstep; the decision is the model's, the same
  // on every node.
  EXPECT_EQ(stats.supersteps[0].steal, "on");
  int64_t taken = 0;
  for (const compute::NodeStats& n : stats.nodes) taken += n.stolen_items;
  PrintBusy(true, stats);
  return taken;
}

// Afforest's local forests (cc on several nodes) with the same skew: node
// 0's range holds nearly every arc of phase 1, so node 1 takes some of its
// units, links their arcs in a forest of its own over node 0's range and
// sends node 0 what that joined; the labels are the reference's either way.
// Whether a taker claims an item before the owner has claimed them all
// depends on scheduling (a loaded machine), so a run that took none is
// tried again, up to three times.
TEST(MultiNodeTest, SkewedForestIsStolen) {
  // Sixteen 4096-vertex chunks, of which the sample reads four: the rest
  // is the scan others may take. Runs of 64 vertices are the components,
  // so a taken unit whose links went missing would show.
  const uint32_t half = 65536;
  absl::StatusOr<store::Graph> g = SkewedGraph(half, 777, /*group=*/64);
  ASSERT_TRUE(g.ok()) << g.status();
  const auto ref = reference::ConnectedComponents(*g);
  {
    SCOPED_TRACE("no steal");
    auto cluster = StartPushSplitByVertices(*g, 1, 2, "skewforest", false);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    auto results = (*cluster)->RunEverywhere([&](compute::Engine& engine) {
      auto cc = algorithms::ConnectedComponents(engine);
      engine.Finish();
      return cc;
    });
    for (auto& cc : results) {
      ASSERT_TRUE(cc.ok()) << cc.status();
      EXPECT_FALSE(reference::CompareExact(ref, *cc).any);
    }
    const compute::RunStats& stats = (*cluster)->engine(0).stats();
    ASSERT_EQ(stats.nodes.size(), 2u);
    EXPECT_EQ(stats.nodes[0].own_end, half)
        << "the split is not the skewed one";
    EXPECT_EQ(stats.nodes[0].stolen_items + stats.nodes[1].stolen_items, 0u);
  }
  int64_t taken = 0;
  for (int attempt = 0; attempt < 3 && taken == 0; ++attempt) {
    SCOPED_TRACE(absl::StrFormat("steal, attempt %d", attempt));
    auto cluster = StartPushSplitByVertices(*g, 1, 2, "skewforest", true);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    taken = ForestItemsTaken(**cluster, ref);
    ASSERT_GE(taken, 0);
  }
  EXPECT_GT(taken, 0);
}

// Three nodes, two of them with dense ranges: the third takes from
// either, holding a forest over each range it took from.
TEST(MultiNodeTest, ForestsOverSeveralRangesAreTaken) {
  const uint32_t m = 32768;  // eight chunks a range, four of them sampled
  absl::StatusOr<store::Graph> g = TwoDenseRanges(m, 4242);
  ASSERT_TRUE(g.ok()) << g.status();
  const auto ref = reference::ConnectedComponents(*g);
  int64_t taken = 0;
  for (int attempt = 0; attempt < 3 && taken == 0; ++attempt) {
    SCOPED_TRACE(absl::StrFormat("attempt %d", attempt));
    auto cluster = StartPushSplitByVertices(*g, 1, 2, "twodense", true,
                                            Mode::kPush, /*nodes=*/3);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    const compute::RunStats& stats = (*cluster)->engine(0).stats();
    taken = ForestItemsTaken(**cluster, ref);
    ASSERT_GE(taken, 0);
    ASSERT_EQ(stats.nodes.size(), 3u);
    EXPECT_EQ(stats.nodes[0].own_end, m) << "the split is not by thirds";
    EXPECT_EQ(stats.nodes[1].own_end, 2 * m) << "the split is not by thirds";
  }
  EXPECT_GT(taken, 0);
}

// With several compute nodes each keeps the block headers of its own range
// only, and a frontier's degrees travel with its parts (or, where a part
// cannot sum them, come from a collective). The direction choice's input
// must still be the whole frontier's exact edges, the same on every node:
// at every automatically chosen push level of a BFS, auto_work is the
// level's vertices plus their out-degrees, computed here from the
// reference's depths. Batch updates post the sums; atomic ones post parts
// with other nodes' vertices (no sums: an exchange gathers them); stealing
// needs every owner's sums.
TEST(MultiNodeTest, FrontierDegreesAreExactWithOwnHeadersOnly) {
  const store::Graph g = Generated(store::GeneratorParams::Kind::kKron, 12,
                                   /*symmetric=*/true);
  store::VertexId source = 0;
  while (g.out.degree(source) == 0) ++source;
  const absl::StatusOr<std::vector<int32_t>> depth = reference::Bfs(g, source);
  ASSERT_TRUE(depth.ok()) << depth.status();
  struct Case {
    UpdateMode mode;
    bool steal;
  };
  for (const Case& c :
       {Case{UpdateMode::kBatch, false}, Case{UpdateMode::kAtomic, false},
        Case{UpdateMode::kAuto, true}}) {
    for (int nodes : {2, 3}) {
      SCOPED_TRACE(absl::StrCat(nodes, " nodes, update mode ",
                                static_cast<int>(c.mode),
                                c.steal ? ", steal" : ""));
      Config config;
      config.compute_nodes = nodes;
      config.update_mode = c.mode;
      config.steal = c.steal;
      auto cluster = Start(g, config);
      ASSERT_NE(cluster, nullptr);
      auto results = cluster->RunEverywhere([&](compute::Engine& e) {
        absl::StatusOr<std::vector<int32_t>> r = algorithms::Bfs(e, source);
        e.Finish();
        return r;
      });
      std::vector<uint64_t> first_work;
      for (int k = 0; k < nodes; ++k) {
        ASSERT_TRUE(results[k].ok()) << results[k].status();
        EXPECT_FALSE(reference::CompareExact(*depth, *results[k]).any);
        const compute::RunStats& stats = cluster->engine(k).stats();
        int pushes = 0;
        // Superstep s reads the vertices at depth s - 1; the first's headers
        // are not cached yet (the push plans them).
        for (size_t s = 1; s < stats.supersteps.size(); ++s) {
          const compute::SuperstepStats& step = stats.supersteps[s];
          if (step.direction != "push" || step.chosen_by != "auto") continue;
          uint64_t members = 0, edges = 0;
          for (store::VertexId v = 0; v < g.num_vertices(); ++v) {
            if ((*depth)[v] != static_cast<int32_t>(s)) continue;
            ++members;
            edges += g.out.degree(v);
          }
          EXPECT_EQ(step.frontier, members) << "superstep " << s + 1;
          EXPECT_EQ(step.auto_work, members + edges) << "superstep " << s + 1;
          ++pushes;
        }
        EXPECT_GT(pushes, 0) << "no automatic push level past the first";
      }
    }
  }
}

TEST(MultiNodeTest, MoreComputeNodesThanRanges) {
  // 3000 vertices: one 4096-vertex range; the other nodes own nothing and
  // still take part in every collective.
  const store::Graph g =
      Generated(store::GeneratorParams::Kind::kUrand, 11, true);
  CheckAll(g, Config{3, 1, Mode::kAuto});
}

// The path 0 - 1 - ... - n-1, both directions.
absl::StatusOr<store::Graph> Path(uint32_t n) {
  store::EdgeList e;
  e.num_vertices = n;
  for (uint32_t v = 0; v + 1 < n; ++v) e.Add(v, v + 1);
  return Symmetric(std::move(e));
}

// A road-like graph: a rows x cols grid numbered row by row (ranges cut
// it across a few rows), arcs right and down. Rows below `wall_rows` have
// no arc across the middle column, so the two halves meet only at the
// bottom (labels travel far); every seventh vertex of the last row has no
// arcs at all (components of one).
absl::StatusOr<store::Graph> Grid(uint32_t rows, uint32_t cols,
                                  uint32_t wall_rows, bool symmetric) {
  store::EdgeList e;
  e.num_vertices = rows * cols;
  auto alone = [&](uint32_t r, uint32_t c) {
    return r == rows - 1 && c % 7 == 0;
  };
  for (uint32_t r = 0; r < rows; ++r) {
    for (uint32_t c = 0; c < cols; ++c) {
      const uint32_t v = r * cols + c;
      if (c + 1 < cols && !(r < wall_rows && c + 1 == cols / 2) &&
          !alone(r, c) && !alone(r, c + 1)) {
        e.Add(v, v + 1);
      }
      if (r + 1 < rows && !alone(r + 1, c)) e.Add(v, v + cols);
    }
  }
  store::CleanOptions clean;
  clean.symmetrize = symmetric;
  return store::BuildGraph(std::move(e), clean);
}

// Components on several nodes of a graph whose arcs mostly stay in their
// node's range: local forests, then labels across the cut (cc_forest.cc).
// The answer is the reference's on every node, in a few supersteps where
// label propagation takes the grid's diameter (~450), whether the arcs go
// both ways or one (a directed graph's boundary is found from its
// in-arcs), with resident and with paged labels.
TEST(MultiNodeTest, ComponentsOfARoadLikeGraphCrossTheCutInFewSupersteps) {
  for (bool symmetric : {true, false}) {
    absl::StatusOr<store::Graph> g = Grid(160, 128, 150, symmetric);
    ASSERT_TRUE(g.ok()) << g.status();
    const std::vector<store::VertexId> want =
        reference::ConnectedComponents(*g);
    for (int nodes : {2, 3, 4}) {
      for (uint64_t cache :
           {compute::MemoryBudget::kUnlimited, uint64_t{256} << 10}) {
        Config c;
        c.compute_nodes = nodes;
        c.cache_bytes = cache;
        SCOPED_TRACE(absl::StrCat(symmetric ? "symmetric, " : "directed, ",
                                  Describe(c)));
        auto cluster = Start(*g, c);
        ASSERT_NE(cluster, nullptr);
        auto results = cluster->RunEverywhere([&](compute::Engine& e) {
          auto r = algorithms::ConnectedComponents(e);
          if (r.ok()) e.Finish();
          return r;
        });
        ASSERT_TRUE(results[0].ok()) << results[0].status();
        EXPECT_EQ(*results[0], want);
        for (size_t k = 1; k < results.size(); ++k) {
          EXPECT_TRUE(results[k].ok()) << results[k].status();
        }
        EXPECT_LT(cluster->engine(0).stats().supersteps.size(), 40u);
      }
    }
  }
}

// BFS from `source` on every compute node of `cluster`.
std::vector<absl::StatusOr<std::vector<int32_t>>> BfsEverywhere(
    EmbeddedCluster& cluster, store::VertexId source) {
  return cluster.RunEverywhere([&](compute::Engine& e) {
    auto r = algorithms::Bfs(e, source);
    if (r.ok()) e.Finish();
    return r;
  });
}

// First-wins pushes that take pending remote targets as unset (refresh
// "stale": the owner refuses a claimed one) give the reference's depths,
// and betweenness, whose BFS phases reset depth between sources (a line
// pending because it went back to unset), the reference's scores (stale
// forced: what auto picks depends on the measured round trip).
TEST(MultiNodeTest, StaleTargetsKeepTheAnswers) {
  absl::StatusOr<store::Graph> g =
      Generated(store::GeneratorParams::Kind::kUrand, 13, true);
  const absl::StatusOr<std::vector<int32_t>> want = reference::Bfs(*g, 5);
  ASSERT_TRUE(want.ok()) << want.status();
  for (int nodes : {2, 3}) {
    Config c;
    c.compute_nodes = nodes;
    c.direction = Mode::kPush;
    c.refresh = compute::EngineOptions::ForcedRefresh::kStale;
    SCOPED_TRACE(Describe(c));
    auto cluster = Start(*g, c);
    ASSERT_NE(cluster, nullptr);
    auto results = BfsEverywhere(*cluster, 5);
    bool stale = false;
    for (size_t k = 0; k < results.size(); ++k) {
      ASSERT_TRUE(results[k].ok()) << results[k].status();
      EXPECT_EQ(*results[k], *want) << "compute node " << k;
      for (const auto& s : cluster->engine(k).stats().supersteps) {
        stale = stale || s.refresh == "stale";
      }
    }
    EXPECT_TRUE(stale);
    const std::vector<store::VertexId> sources = {5, 3000, 7000};
    const absl::StatusOr<std::vector<double>> bc = reference::Bc(*g, sources);
    ASSERT_TRUE(bc.ok()) << bc.status();
    auto cluster2 = Start(*g, c);
    ASSERT_NE(cluster2, nullptr);
    auto scores = cluster2->RunEverywhere([&](compute::Engine& e) {
      auto r = algorithms::Bc(e, sources);
      if (r.ok()) e.Finish();
      return r;
    });
    for (size_t k = 0; k < scores.size(); ++k) {
      ASSERT_TRUE(scores[k].ok()) << scores[k].status();
      EXPECT_FALSE(reference::CompareRelative(*bc, *scores[k], 1e-9).any)
          << "compute node " << k;
    }
  }
}

// With several compute nodes, a push step's small frontier parts travel as
// a count and degree sums, not members (EngineOptions::counted_parts), and
// a pull or a steal fetches the members first (CompleteFrontier). The
// answers on every node equal the reference's with parts counted and with
// members posted: BFS along a road-like grid (~220 push levels), every
// algorithm on it (BC's levels are pulled long after they were posted;
// k-core's come from VertexFilter), and BFS on kron (push levels, then pull
// levels: fetched whole, as often on every node). The grid's BFS reads
// fewer bytes with parts counted.
TEST(MultiNodeTest, FrontierPartsAsCountsKeepTheAnswers) {
  absl::StatusOr<store::Graph> grid = Grid(160, 128, 0, true);
  ASSERT_TRUE(grid.ok()) << grid.status();
  static const store::Graph* kron = new store::Graph(
      Generated(store::GeneratorParams::Kind::kKron, 14, true));
  const store::VertexId source = 64;
  for (int nodes : {2, 3}) {
    uint64_t read[2] = {0, 0};
    for (bool counted : {true, false}) {
      Config c;
      c.compute_nodes = nodes;
      c.counted_parts = counted;
      c.steal = false;  // (a steal's extra reads follow the machine's load)
      SCOPED_TRACE(absl::StrCat(Describe(c), counted ? ", counted" : ""));
      auto cluster = Start(*grid, c);
      ASSERT_NE(cluster, nullptr);
      auto results = BfsEverywhere(*cluster, source);
      const auto want = reference::Bfs(*grid, source);
      ASSERT_TRUE(want.ok()) << want.status();
      for (size_t k = 0; k < results.size(); ++k) {
        ASSERT_TRUE(results[k].ok()) << results[k].status();
        EXPECT_EQ(*results[k], *want) << "compute node " << k;
      }
      const compute::RunStats& stats = cluster->engine(0).stats();
      EXPECT_GT(stats.supersteps.size(), 200u);
      // Less the polls (16 bytes each: how many follows the machine's load).
      read[counted ? 0 : 1] = stats.job_total.bytes_read;
      for (const compute::NodeStats& n : stats.nodes) {
        read[counted ? 0 : 1] -= 16 * n.polls;
        // Every level pushes: nothing is fetched whole.
        EXPECT_EQ(n.completed_frontiers, 0u);
      }
    }
    std::printf(
        "%d nodes: grid BFS read %lu bytes besides polls with "
        "counted parts, %lu with members posted\n",
        nodes, (unsigned long)read[0], (unsigned long)read[1]);
    EXPECT_LT(read[0], read[1]);
    Config c;
    c.compute_nodes = nodes;
    CheckAll(*grid, c);  // (kron's: EveryAlgorithmMatchesTheReference)
    // Kron's BFS levels turn to pulls: each turn fetches the frontier
    // whole, as many times on every node.
    auto cluster = Start(*kron, c);
    ASSERT_NE(cluster, nullptr);
    auto results = BfsEverywhere(*cluster, source);
    ASSERT_TRUE(results[0].ok()) << results[0].status();
    const auto want = reference::Bfs(*kron, source);
    ASSERT_TRUE(want.ok()) << want.status();
    EXPECT_EQ(*results[0], *want);
    const compute::RunStats& stats = cluster->engine(0).stats();
    ASSERT_EQ(stats.nodes.size(), static_cast<size_t>(nodes));
    EXPECT_GT(stats.nodes[0].completed_frontiers, 0u);
    for (const compute::NodeStats& n : stats.nodes) {
      EXPECT_EQ(n.completed_frontiers, stats.nodes[0].completed_frontiers);
    }
  }
}

// A BFS along a path from the middle changes one vertex a level on each
// node: each node refreshes the 64-byte line holding the other's change,
// not its 4 KiB page, so every level's answer must come through those
// lines alone (the depths are checked on both nodes). The bytes a level
// costs are printed (page refreshes would add 4 KiB a level).
TEST(MultiNodeTest, OthersSeeChangesThroughRefreshedLines) {
  const uint32_t n = 16384;
  absl::StatusOr<store::Graph> g = Path(n);
  ASSERT_TRUE(g.ok()) << g.status();
  // Split by vertices: the ranges meet at n / 2.
  auto cluster = StartPushSplitByVertices(*g, 1, 1, "lines", true);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  const int32_t levels = 500;
  const store::VertexId source = n / 2;
  auto results = (*cluster)->RunEverywhere([&](compute::Engine& engine) {
    auto& depth = engine.NewState<int32_t>("depth", -1);
    compute::Frontier f = engine.FrontierOf(source);
    absl::Status s =
        engine.VertexMap(f, [&](store::VertexId v) { depth.Set(v, 0); });
    for (int32_t level = 0; s.ok() && level < levels; ++level) {
      // Reads the other node's newest vertex: its line must be fresh.
      const store::VertexId left = source - level, right = source + level;
      if (depth.Get(left) != level || depth.Get(right) != level) {
        s = absl::InternalError(
            absl::StrFormat("level %d: depth(%d) = %d, depth(%d) = %d", level,
                            left, depth.Get(left), right, depth.Get(right)));
        break;
      }
      auto next = engine.EdgeMap<compute::Claim>(
          f, store::Direction::kOut, Mode::kPush, depth,
          [&](store::VertexId, store::VertexId, auto) { return level + 1; },
          compute::AllVertices());
      if (!next.ok()) {
        s = next.status();
        break;
      }
      f = *std::move(next);
      if (f.size() != 2) s = absl::InternalError("frontier lost a wave");
      if (s.ok()) s = engine.EndSuperstep();
    }
    engine.Finish();
    return s;
  });
  for (const absl::Status& s : results) EXPECT_TRUE(s.ok()) << s;
  const compute::RunStats& stats = (*cluster)->engine(0).stats();
  uint64_t bytes = 0;
  for (const auto& step : stats.supersteps) bytes += step.ops.bytes_read;
  std::printf("path BFS on 2 nodes: %.0f bytes read a level on node 0\n",
              static_cast<double>(bytes) / stats.supersteps.size());
}

// Lazy refresh: a push of an update that reads only its sources (Min, every
// vertex a candidate) leaves the other node's published lines unread; a
// read of one of them anyway (here from the value function, and between
// operations) must still see the current value, from the open superstep's
// buffer or, a superstep later, the finished version's.
TEST(MultiNodeTest, PendingLinesAreFetchedWhenRead) {
  const uint32_t n = 16384;
  absl::StatusOr<store::Graph> g = Path(n);
  ASSERT_TRUE(g.ok()) << g.status();
  auto cluster = StartPushSplitByVertices(*g, 2, 2, "lazy", false);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  const store::VertexId far = n - 1;  // node 1's
  auto results = (*cluster)->RunEverywhere([&](compute::Engine& engine) {
    auto& a = engine.NewState<int64_t>("a", 0);
    auto& b = engine.NewState<int64_t>("b", INT64_MAX);
    // Superstep 1: every node sets its own vertices of a; node 0's copy of
    // node 1's lines is now pending.
    absl::Status s = engine.VertexMap(
        [&](store::VertexId v) { a.Set(v, 3 * int64_t{v} + 1); });
    if (s.ok()) s = engine.EndSuperstep();
    // Superstep 2: a lazy push whose value reads node 1's a(far): fetched
    // from the finished version.
    compute::Frontier f = engine.FrontierOf(0);
    for (int step = 0; s.ok() && step < 2; ++step) {
      if (step == 1) {
        // Node 1 changes a(far) in the open superstep: the open buffer.
        s = engine.VertexMap(engine.FrontierOf(far),
                             [&](store::VertexId v) { a.Set(v, 7); });
        if (!s.ok()) break;
      }
      auto next = engine.EdgeMap<compute::Min>(
          f, store::Direction::kOut, Mode::kPush, b,
          [&](store::VertexId, store::VertexId, auto) { return a.Get(far); },
          compute::AllVertices());
      if (!next.ok()) {
        s = next.status();
        break;
      }
      const int64_t want = step == 0 ? 3 * int64_t{far} + 1 : 7;
      if (a.Get(far) != want) {
        s = absl::InternalError(absl::StrFormat("step %d: a(far) = %d, not %d",
                                                step, a.Get(far), want));
      }
      if (s.ok()) s = engine.EndSuperstep();
    }
    auto result_a =
        s.ok() ? engine.Result(a) : absl::StatusOr<std::vector<int64_t>>(s);
    auto result_b =
        result_a.ok() ? engine.Result(b)
                      : absl::StatusOr<std::vector<int64_t>>(result_a.status());
    engine.Finish();
    if (!result_b.ok()) return result_b.status();
    for (store::VertexId v = 0; v < n; ++v) {
      const int64_t want = v == far ? 7 : 3 * int64_t{v} + 1;
      if ((*result_a)[v] != want) {
        return absl::InternalError(
            absl::StrFormat("a(%d) = %d", v, (*result_a)[v]));
      }
    }
    // Vertex 1, the only out-neighbour of vertex 0: the smaller of the two
    // values offered.
    if ((*result_b)[1] != 7) {
      return absl::InternalError(absl::StrFormat("b(1) = %d", (*result_b)[1]));
    }
    return absl::OkStatus();
  });
  for (const absl::Status& s : results) EXPECT_TRUE(s.ok()) << s;
}

// Many workers touch one pending line at once (a push whose every arc
// reads a(far), which the other node changes every superstep): whichever
// READs it first clears its pending bits, and a worker that saw it pending
// just before must not READ it again from the wrong buffer (the finished
// version's, one superstep old) over the fresh copy. Each round, every read
// must give that round's value. (A pause between the check and the READ
// makes the race happen in most rounds rather than one in thousands.)
TEST(MultiNodeTest, WorkersRacingForOnePendingLineAllSeeItsNewValue) {
  compute::StateArrayBase::touch_hook_for_test = [] {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  };
  struct Unhook {
    ~Unhook() { compute::StateArrayBase::touch_hook_for_test = nullptr; }
  } unhook;
  const uint32_t n = 16384;
  absl::StatusOr<store::Graph> g = Path(n);
  ASSERT_TRUE(g.ok()) << g.status();
  auto cluster = StartPushSplitByVertices(*g, 8, 1, "race", false);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  const store::VertexId far = n - 1;  // node 1's
  constexpr int kRounds = 40;
  std::atomic<uint64_t> reads{0}, wrong{0};
  std::atomic<int64_t> first_wrong{-1};
  auto results = (*cluster)->RunEverywhere([&](compute::Engine& engine) {
    auto& a = engine.NewState<int64_t>("a", 0);
    auto& b = engine.NewState<int64_t>("b", INT64_MAX);
    absl::StatusOr<compute::Frontier> all =
        engine.VertexFilter([](store::VertexId) { return true; });
    if (!all.ok()) return all.status();
    absl::Status s = engine.EndSuperstep();
    for (int64_t round = 1; s.ok() && round <= kRounds; ++round) {
      s = engine.VertexMap(engine.FrontierOf(far),
                           [&](store::VertexId v) { a.Set(v, round); });
      if (!s.ok()) break;
      auto next = engine.EdgeMap<compute::Min>(
          *all, store::Direction::kOut, Mode::kPush, b,
          [&](store::VertexId, store::VertexId, auto) {
            const int64_t x = a.Get(far);
            reads.fetch_add(1, std::memory_order_relaxed);
            if (x != round) {
              wrong.fetch_add(1, std::memory_order_relaxed);
              int64_t none = -1;
              first_wrong.compare_exchange_strong(none, x);
            }
            return x;
          },
          compute::AllVertices());
      s = next.ok() ? engine.EndSuperstep() : next.status();
    }
    engine.Finish();
    return s;
  });
  for (const absl::Status& s : results) EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(wrong.load(), 0u)
      << "of " << reads.load() << " reads of a(far); the first wrong one saw "
      << first_wrong.load();
  EXPECT_GT(reads.load(), uint64_t{kRounds} * n);
}

// An operation that may read other nodes' vertices widely (a pull, a
// VertexMap) READs the pending lines it touches one at a time until they
// would have cost what one batch of them all costs (then the batch), and
// leaves the arrays it reads only in its own range unread: on a path split
// in two, a pull whose value reads a(u) of its in-neighbours touches the
// other node's a at the cut, and READs that line alone, and none of b's,
// which every vertex changed too; b's are still right when read later.
// Once a full pull has recorded the sources its blocks name, a later pull
// takes in one batch the pending lines holding one of them (here the line
// at the cut), and no other. A push of a first-wins update on this
// transport (round trips of well under a microsecond) whose arcs stay in
// the range leaves them pending too (demand), and says so.
TEST(MultiNodeTest, AnOperationReadsThePendingLinesOfTheArraysItTouches) {
  const uint32_t n = 16384;
  absl::StatusOr<store::Graph> g = Path(n);
  ASSERT_TRUE(g.ok()) << g.status();
  auto cluster = StartPushSplitByVertices(*g, 2, 1, "touch", false);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  struct Seen {
    uint64_t a_after_pull = 0, b_after_pull = 0, b_after_read = 0;
    uint64_t a_before_second = 0, a_after_second = 0;
    std::string refresh;
  };
  std::vector<Seen> seen(2);
  auto results = (*cluster)->RunEverywhere([&](compute::Engine& engine) {
    const int me = engine.compute_node();
    auto& a = engine.NewState<int64_t>("a", 0);
    auto& b = engine.NewState<int64_t>("b", 0);
    auto& low = engine.NewState<int64_t>("low", INT64_MAX);
    auto& depth = engine.NewState<int32_t>("depth", -1);
    absl::StatusOr<compute::Frontier> all =
        engine.VertexFilter([&](store::VertexId v) {
          a.Set(v, 3 * int64_t{v} + 1);
          b.Set(v, 5 * int64_t{v} + 2);
          return true;
        });
    if (!all.ok()) return all.status();
    absl::Status s = engine.EndSuperstep();
    if (!s.ok()) return s;
    // low(v) = the least a(u) of its in-neighbours.
    auto pulled = engine.EdgeMap<compute::Min>(
        *all, store::Direction::kIn, Mode::kPull, low,
        [&](store::VertexId u, store::VertexId, auto) { return a.Get(u); },
        compute::AllVertices());
    if (!pulled.ok()) return pulled.status();
    seen[me].a_after_pull = a.pending_lines();
    seen[me].b_after_pull = b.pending_lines();
    s = engine.EndSuperstep();
    // Every a changes again (the same values), and a second pull.
    if (s.ok()) {
      s = engine.VertexMap(
          [&](store::VertexId v) { a.Set(v, 3 * int64_t{v} + 1); });
    }
    if (!s.ok()) return s;
    seen[me].a_before_second = a.pending_lines();
    pulled = engine.EdgeMap<compute::Min>(
        *all, store::Direction::kIn, Mode::kPull, low,
        [&](store::VertexId u, store::VertexId, auto) { return a.Get(u); },
        compute::AllVertices());
    if (!pulled.ok()) return pulled.status();
    seen[me].a_after_second = a.pending_lines();
    s = engine.EndSuperstep();
    // A BFS level from each node's first vertex: its arcs stay home.
    const store::VertexId mine = me == 0 ? 0 : n - 1;
    compute::Frontier f = engine.FrontierOf(mine);
    if (s.ok()) {
      s = engine.VertexMap(f, [&](store::VertexId v) { depth.Set(v, 0); });
    }
    for (int level = 0; s.ok() && level < 3; ++level) {
      auto next = engine.EdgeMap<compute::Claim>(
          f, store::Direction::kOut, Mode::kPush, depth,
          [&](store::VertexId, store::VertexId, auto) { return level + 1; },
          compute::AllVertices());
      if (!next.ok()) return next.status();
      f = *std::move(next);
      if (level == 2) {
        seen[me].refresh = engine.stats().supersteps.back().refresh;
      }
      s = engine.EndSuperstep();
    }
    if (!s.ok()) return s;
    // The other node's b, read now: current.
    const store::VertexId far = me == 0 ? n - 1 : 0;
    if (b.Get(far) != 5 * int64_t{far} + 2) {
      return absl::InternalError(
          absl::StrFormat("b(%d) = %d", far, b.Get(far)));
    }
    seen[me].b_after_read = b.pending_lines();
    auto result = engine.Result(low);
    engine.Finish();
    if (!result.ok()) return result.status();
    for (store::VertexId v = 0; v < n; ++v) {
      const int64_t want =
          v == 0 ? 3 * 1 + 1 : 3 * int64_t{v - 1} + 1;  // a(v-1) < a(v+1)
      if ((*result)[v] != want) {
        return absl::InternalError(
            absl::StrFormat("low(%d) = %d, not %d", v, (*result)[v], want));
      }
    }
    return absl::OkStatus();
  });
  for (const absl::Status& s : results) EXPECT_TRUE(s.ok()) << s;
  for (int k = 0; k < 2; ++k) {
    SCOPED_TRACE(absl::StrCat("compute node ", k));
    // The other half of a and b: 8192 vertices of 8 bytes in 64-byte
    // lines; the pull took the line at the cut.
    EXPECT_EQ(seen[k].a_after_pull, 1023u);
    EXPECT_EQ(seen[k].b_after_pull, 1024u);
    // The second pull: the one line the blocks name, in its batch.
    EXPECT_EQ(seen[k].a_before_second, 1024u);
    EXPECT_EQ(seen[k].a_after_second, 1023u);
    EXPECT_EQ(seen[k].refresh, "demand");
    // Reading one line of b took that line alone.
    EXPECT_EQ(seen[k].b_after_read, 1023u);
  }
}

// A collective after which every node's pages are whole in the open
// buffer (resident arrays, nothing held back) is the superstep's barrier:
// the EndSuperstep that follows exchanges nothing, so a superstep of one
// VertexMap is one exchange. Between that collective and EndSuperstep,
// a line another node changed two supersteps ago (still pending) reads
// right, and so does everything after.
TEST(MultiNodeTest, TheLastCleanCollectiveIsTheSuperstepsBarrier) {
  const uint32_t n = 16384;
  absl::StatusOr<store::Graph> g = Path(n);
  ASSERT_TRUE(g.ok()) << g.status();
  auto rounds = [&](int supersteps) -> absl::StatusOr<std::vector<int>> {
    auto cluster = StartPushSplitByVertices(
        *g, 1, 1, absl::StrCat("fused", supersteps), false);
    if (!cluster.ok()) return cluster.status();
    std::vector<int> out(2, 0);
    auto results = (*cluster)->RunEverywhere([&](compute::Engine& engine) {
      auto& a = engine.NewState<int64_t>("a", 0);
      auto& b = engine.NewState<int64_t>("b", 0);
      const store::VertexId far = engine.compute_node() == 0 ? n - 1 : 0;
      for (int s = 1; s <= supersteps; ++s) {
        // Odd supersteps change a, even ones b: a's lines stay pending
        // at the other node across an even superstep.
        absl::Status st = engine.VertexMap([&](store::VertexId v) {
          (s % 2 == 1 ? a : b).Set(v, int64_t{s} * n + v);
        });
        if (!st.ok()) return st;
        // Read only in even supersteps: a's line is still pending then.
        const int64_t last_a = int64_t{s - 1} * n + far;
        if (s % 2 == 0 && a.Get(far) != last_a) {
          return absl::InternalError(absl::StrFormat(
              "superstep %d, before its end: a(%d) = %d, not %d", s, far,
              a.Get(far), last_a));
        }
        st = engine.EndSuperstep();
        if (!st.ok()) return st;
      }
      auto result = engine.Result(b);
      engine.Finish();
      if (!result.ok()) return result.status();
      const int64_t last_b = int64_t{supersteps / 2 * 2} * n;
      for (store::VertexId v = 0; v < n; ++v) {
        if ((*result)[v] != last_b + v) {
          return absl::InternalError(absl::StrFormat("b(%d) = %d, not %d", v,
                                                     (*result)[v], last_b + v));
        }
      }
      out[engine.compute_node()] = engine.stats().nodes[0].rounds;
      return absl::OkStatus();
    });
    for (const absl::Status& s : results) {
      if (!s.ok()) return s;
    }
    return out;
  };
  absl::StatusOr<std::vector<int>> ten = rounds(10);
  ASSERT_TRUE(ten.ok()) << ten.status();
  absl::StatusOr<std::vector<int>> twenty = rounds(20);
  ASSERT_TRUE(twenty.ok()) << twenty.status();
  // Ten more supersteps: ten more exchanges (one collective each).
  EXPECT_EQ((*twenty)[0] - (*ten)[0], 10);
}

// Source mirrors (compute_node/source_mirrors.h): a pull of x at its
// sources READs each owner's packed copy of the values it names instead of
// their 64-byte lines. Checked on 3 nodes, against the same program with
// lines only and against sums computed here:
//  - every gather's sums are exact, in every superstep;
//  - the other values of those lines are still READ when touched after the
//    gather (a VertexMap reading far vertices): their lines stay pending;
//  - packed copies were READ, and the gathers READ fewer bytes;
//  - once a node READs the lines anyway, it stops READing copies.
TEST(MultiNodeTest, PullsReadOwnersPackedCopiesOfTheirSources) {
  // Ranges start on multiples of 4,096 vertices: 4 ranges' worth.
  const store::Graph g =
      Generated(store::GeneratorParams::Kind::kKron, 14, false);
  const uint32_t n = static_cast<uint32_t>(g.num_vertices());
  auto value_at = [](uint64_t v, int s) -> int32_t {
    return static_cast<int32_t>((v * 2654435761u + 977 * s) % 100003);
  };
  uint64_t read[2] = {0, 0};
  for (bool mirrors : {false, true}) {
    SCOPED_TRACE(mirrors ? "mirrors" : "lines");
    store::LayoutOptions layout;
    layout.block_size = 4096;
    absl::StatusOr<store::StoreImage> image = store::BuildStoreImage(g, layout);
    ASSERT_TRUE(image.ok()) << image.status();
    compute::EngineOptions eo;
    eo.threads = 1;
    eo.direction = Mode::kPull;
    eo.steal = false;
    eo.source_mirrors = mirrors;
    eo.cluster.nodes = 3;
    eo.cluster.job = mirrors ? "mirrors" : "lines";
    auto cluster = EmbeddedCluster::Start(*std::move(image), eo);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    auto results = (*cluster)->RunEverywhere([&](compute::Engine& e) {
      auto& x = e.NewState<int32_t>("x", 0);
      auto& y = e.NewState<int64_t>("y", 0);
      absl::Status st;
      uint64_t packed_by_6 = 0;
      for (int s = 1; st.ok() && s <= 8; ++s) {
        st = e.VertexMap([&](store::VertexId v) { x.Set(v, value_at(v, s)); });
        if (st.ok()) st = e.EndSuperstep();
        if (!st.ok()) break;
        const auto r = x.reader();
        auto sum = e.Gather<compute::Add>(
            store::Direction::kIn,
            [r](store::VertexId u, store::VertexId, auto) {
              return int64_t{r[u]};
            },
            [&](store::VertexId v, int64_t total) {
              y.Set(v, total);
              return int64_t{0};
            });
        if (!sum.ok()) {
          st = sum.status();
          break;
        }
        // Far vertices' values, named by no in-edge of this node's range
        // (in one superstep: reading them all brings every line, and the
        // node stops using copies of x).
        std::atomic<int64_t> wrong{-1};
        if (s == 6) {
          st = e.VertexMap([&](store::VertexId v) {
            const store::VertexId far = (v * 7919u + 13) % n;
            if (x.Get(far) != value_at(far, s)) wrong = far;
          });
        }
        if (st.ok() && wrong >= 0) {
          st = absl::InternalError(
              absl::StrFormat("superstep %d: x(%d) is stale after the gather",
                              s, wrong.load()));
        }
        if (st.ok()) {
          st = e.VertexMap([&](store::VertexId v) {
            int64_t want = 0;
            for (store::VertexId u : g.in.neighbors(v)) want += value_at(u, s);
            if (y.Get(v) != want) wrong = v;
          });
        }
        if (st.ok() && wrong >= 0) {
          st = absl::InternalError(absl::StrFormat(
              "superstep %d: vertex %d's sum is wrong", s, wrong.load()));
        }
        if (st.ok()) st = e.EndSuperstep();
        if (s == 6) packed_by_6 = e.mirror_values_read();
      }
      const uint64_t packed = e.mirror_values_read();
      if (st.ok() && packed != packed_by_6) {
        st = absl::InternalError(absl::StrFormat(
            "%d values READ from copies after the lines were READ anyway",
            packed - packed_by_6));
      }
      e.Finish();
      if (!st.ok()) return absl::StatusOr<uint64_t>(st);
      return absl::StatusOr<uint64_t>(packed);
    });
    uint64_t packed = 0;
    for (size_t k = 0; k < results.size(); ++k) {
      ASSERT_TRUE(results[k].ok())
          << "node " << k << ": " << results[k].status();
      packed += *results[k];
      // The gathers' supersteps (2s - 1) from s = 3 (the copies are asked
      // for in the first and written from the second) to 5.
      const auto& steps = (*cluster)->engine(k).stats().supersteps;
      for (int s = 3; s <= 5; ++s) {
        read[mirrors ? 1 : 0] += steps.at(2 * s - 1).ops.bytes_read;
      }
    }
    if (mirrors) {
      EXPECT_GT(packed, 0u) << "no packed copy was READ";
    } else {
      EXPECT_EQ(packed, 0u);
    }
  }
  EXPECT_LT(read[1], read[0]) << "mirrors READ no less";
}

}  // namespace
}  // namespace dmg

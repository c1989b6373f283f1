// The reference implementations (reference/): hand-computed results on tiny
// graphs for the plain versions, the parallel versions against the plain ones
// on generated and (with DMG_GRAPHS_DIR) real graphs at several thread counts,
// the precondition errors, and the comparison helpers. BC and TC against
// brute force on tiny and small generated graphs.
#include "reference/reference.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "reference/compare.h"
#include "store/build_graph.h"
#include "store/graph.h"
#include "store/graph_source.h"

namespace dmg::reference {
namespace {

using store::Graph;
using Arc = std::tuple<VertexId, VertexId, store::Weight>;

// Builds both CSRs directly from `arcs`, keeping parallel arcs and self-loops
// (independent of the store's cleaning).
store::Csr CsrOf(uint64_t n, std::vector<Arc> arcs, bool weighted) {
  std::sort(arcs.begin(), arcs.end());
  store::Csr csr;
  csr.num_vertices = n;
  csr.offsets.assign(n + 1, 0);
  for (const auto& [u, v, w] : arcs) {
    ++csr.offsets[u + 1];
    csr.targets.push_back(v);
    if (weighted) csr.weights.push_back(w);
  }
  for (uint64_t v = 0; v < n; ++v) csr.offsets[v + 1] += csr.offsets[v];
  return csr;
}

Graph FromArcs(uint64_t n, const std::vector<Arc>& arcs,
               bool weighted = false) {
  std::vector<Arc> reversed;
  for (const auto& [u, v, w] : arcs) reversed.emplace_back(v, u, w);
  Graph g;
  g.out = CsrOf(n, arcs, weighted);
  g.in = CsrOf(n, reversed, weighted);
  return g;
}

Graph Load(const std::string& spec) {
  absl::StatusOr<Graph> g = store::LoadGraph(spec, store::GraphSourceOptions{});
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *std::move(g) : Graph{};
}

// A directed random graph (cleaned by the store: no symmetrize) with random
// non-negative weights. Sparse ones have many small components.
Graph RandomDirected(uint64_t n, uint64_t arcs, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<VertexId> vertex(0, n - 1);
  std::uniform_int_distribution<store::Weight> weight(0, 100);
  store::EdgeList edges;
  edges.num_vertices = n;
  for (uint64_t i = 0; i < arcs; ++i) {
    edges.Add(vertex(rng), vertex(rng), weight(rng));
  }
  absl::StatusOr<Graph> g =
      store::BuildGraph(std::move(edges), store::CleanOptions{}, 1);
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *std::move(g) : Graph{};
}

// Bellman-Ford, for an SSSP cross-check independent of Dijkstra.
std::vector<int64_t> BellmanFord(const Graph& g, VertexId source) {
  std::vector<int64_t> dist(g.num_vertices(), kInfDistance);
  dist[source] = 0;
  for (bool changed = true; changed;) {
    changed = false;
    for (VertexId u = 0; u < g.num_vertices(); ++u) {
      if (dist[u] == kInfDistance) continue;
      for (uint64_t i = g.out.offsets[u]; i < g.out.offsets[u + 1]; ++i) {
        int64_t d = dist[u] + g.out.weights[i];
        if (d < dist[g.out.targets[i]]) {
          dist[g.out.targets[i]] = d;
          changed = true;
        }
      }
    }
  }
  return dist;
}

// ------------------------------------------------------------- hand-computed

// 0->1, 0->2, 1->2, 2->0, 2->3; vertex 3 is dangling.
Graph PageRankGraph() {
  return FromArcs(4, {{0, 1, 0}, {0, 2, 0}, {1, 2, 0}, {2, 0, 0}, {2, 3, 0}});
}

TEST(ReferencePageRank, FirstTwoIterationsByHand) {
  Graph g = PageRankGraph();
  // (1-d)/N = 0.0375. From 1/4 each:
  //   new0 = new3 = 0.0375 + 0.85 * (0.25/2)          = 0.14375
  //   new1        = 0.0375 + 0.85 * (0.25/2)          = 0.14375
  //   new2        = 0.0375 + 0.85 * (0.25/2 + 0.25/1) = 0.35625
  absl::StatusOr<PageRankResult> one = PageRank(g, 1, 0.0);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->iterations, 1);
  const double want1[] = {0.14375, 0.14375, 0.35625, 0.14375};
  for (int v = 0; v < 4; ++v) EXPECT_NEAR(one->scores[v], want1[v], 1e-15);
  EXPECT_NEAR(one->last_l1, 3 * 0.10625 + 0.10625, 1e-15);

  // Second iteration from the first's scores:
  //   new0 = new3 = 0.0375 + 0.85 * 0.178125             = 0.18890625
  //   new1        = 0.0375 + 0.85 * 0.071875             = 0.09859375
  //   new2        = 0.0375 + 0.85 * (0.071875 + 0.14375) = 0.22078125
  absl::StatusOr<PageRankResult> two = PageRank(g, 2, 0.0);
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->iterations, 2);
  const double want2[] = {0.18890625, 0.09859375, 0.22078125, 0.18890625};
  for (int v = 0; v < 4; ++v) EXPECT_NEAR(two->scores[v], want2[v], 1e-15);
  EXPECT_NEAR(two->last_l1, 3 * 0.04515625 + 0.13546875, 1e-15);

  for (int threads : {1, 2, 4}) {
    absl::StatusOr<PageRankResult> f = fast::PageRank(g, 2, 0.0, threads);
    ASSERT_TRUE(f.ok());
    EXPECT_EQ(f->iterations, 2);
    for (int v = 0; v < 4; ++v) EXPECT_NEAR(f->scores[v], want2[v], 1e-15);
    EXPECT_NEAR(f->last_l1, two->last_l1, 1e-15);
  }
}

TEST(ReferencePageRank, ConvergesToClosedForm) {
  // Fixed point: x1 = a + d x0/2, x2 = a + d (x0/2 + x1), x0 = x3 = a + d x2/2
  // with a = (1-d)/4, so x0 = a (1 + d(1+d)/2) / (1 - d^2 (1+d)/4).
  const double d = kDamping, a = (1 - d) / 4;
  const double x0 = a * (1 + d * (1 + d) / 2) / (1 - d * d * (1 + d) / 4);
  const double x1 = a + d * x0 / 2;
  const double x2 = a + d * (x0 / 2 + x1);
  absl::StatusOr<PageRankResult> r = PageRank(PageRankGraph(), 1000, 1e-14);
  ASSERT_TRUE(r.ok());
  EXPECT_LT(r->iterations, 1000);
  EXPECT_LT(r->last_l1, 1e-14);
  const double want[] = {x0, x1, x2, x0};
  for (int v = 0; v < 4; ++v) EXPECT_NEAR(r->scores[v], want[v], 1e-13);
  // Dangling vertex 3's score leaks: the sum stays below 1.
  EXPECT_LT(x0 + x1 + x2 + x0, 0.99);
}

TEST(ReferencePageRank, StopsAtFirstIterationBelowTolerance) {
  Graph g = PageRankGraph();
  absl::StatusOr<PageRankResult> r = PageRank(g, 100, 1e-3);
  ASSERT_TRUE(r.ok());
  EXPECT_LT(r->iterations, 100);
  EXPECT_LT(r->last_l1, 1e-3);
  absl::StatusOr<PageRankResult> before = PageRank(g, r->iterations - 1, 1e-3);
  ASSERT_TRUE(before.ok());
  EXPECT_EQ(before->iterations, r->iterations - 1);
  EXPECT_GE(before->last_l1, 1e-3);
}

TEST(ReferencePageRank, RejectsZeroIterations) {
  EXPECT_EQ(PageRank(PageRankGraph(), 0, 1e-4).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(fast::PageRank(PageRankGraph(), 0, 1e-4, 2).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ReferenceBfs, DepthsByHand) {
  // 0->1->2->4, 0->3->2, 5->0 (5 cannot be reached from 0), 6 isolated.
  Graph g = FromArcs(
      7, {{0, 1, 0}, {1, 2, 0}, {0, 3, 0}, {3, 2, 0}, {2, 4, 0}, {5, 0, 0}});
  const std::vector<int32_t> want = {0, 1, 2, 1, 3, -1, -1};
  absl::StatusOr<std::vector<int32_t>> simple = Bfs(g, 0);
  ASSERT_TRUE(simple.ok());
  EXPECT_EQ(*simple, want);
  for (int threads : {1, 2, 4}) {
    EXPECT_EQ(*fast::BfsTopDown(g, 0, threads), want);
    EXPECT_EQ(*fast::BfsDirectionOptimizing(g, 0, threads), want);
  }
  const std::vector<int32_t> from5 = {1, 2, 3, 2, 4, 0, -1};
  EXPECT_EQ(*Bfs(g, 5), from5);
  EXPECT_EQ(*fast::BfsDirectionOptimizing(g, 5, 2), from5);
}

TEST(ReferenceBfs, RejectsBadSource) {
  Graph g = FromArcs(3, {{0, 1, 0}});
  for (uint64_t source : {uint64_t{3}, uint64_t{1} << 40}) {
    EXPECT_EQ(Bfs(g, source).status().code(),
              absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(fast::BfsTopDown(g, source, 2).status().code(),
              absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(fast::BfsDirectionOptimizing(g, source, 2).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(Bfs(Graph{}, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ReferenceCc, ComponentsByHand) {
  // {0,1,2} via 2->1->0; {3,4,5} via 5->4, 3->4; {6} isolated; {7,8,9} via
  // 8->9->7; arcs only point one way, so weak connectivity is needed.
  Graph g = FromArcs(
      10, {{2, 1, 0}, {1, 0, 0}, {5, 4, 0}, {3, 4, 0}, {8, 9, 0}, {9, 7, 0}});
  const std::vector<VertexId> want = {0, 0, 0, 3, 3, 3, 6, 7, 7, 7};
  EXPECT_EQ(ConnectedComponents(g), want);
  for (int threads : {1, 2, 4}) {
    EXPECT_EQ(fast::ConnectedComponents(g, threads), want);
  }
  EXPECT_TRUE(ConnectedComponents(Graph{}).empty());
  EXPECT_TRUE(fast::ConnectedComponents(Graph{}, 2).empty());
}

TEST(ReferenceSssp, DistancesByHand) {
  // Parallel arcs 0->1 (5 and 2), 0->2 (10) beaten by 0->1->2 (2+2), a
  // zero-weight arc 2->3, 4->0 (4 unreachable), 5 isolated.
  Graph g = FromArcs(
      6, {{0, 1, 5}, {0, 1, 2}, {1, 2, 2}, {0, 2, 10}, {2, 3, 0}, {4, 0, 1}},
      /*weighted=*/true);
  absl::StatusOr<std::vector<int64_t>> dist = Sssp(g, 0, false);
  ASSERT_TRUE(dist.ok()) << dist.status();
  EXPECT_EQ(*dist,
            (std::vector<int64_t>{0, 2, 4, 4, kInfDistance, kInfDistance}));
  absl::StatusOr<std::vector<int64_t>> hops = Sssp(g, 0, true);
  ASSERT_TRUE(hops.ok());
  EXPECT_EQ(*hops,
            (std::vector<int64_t>{0, 1, 1, 2, kInfDistance, kInfDistance}));
  EXPECT_EQ(*Sssp(g, 4, false),
            (std::vector<int64_t>{1, 3, 5, 5, 0, kInfDistance}));
}

TEST(ReferenceSssp, LargeWeightsDoNotOverflow) {
  const store::Weight big = std::numeric_limits<store::Weight>::max();
  Graph g = FromArcs(4, {{0, 1, big}, {1, 2, big}, {2, 3, big}}, true);
  EXPECT_EQ((*Sssp(g, 0, false))[3], int64_t{3} * big);
}

TEST(ReferenceSssp, Errors) {
  Graph unweighted = FromArcs(3, {{0, 1, 0}});
  absl::Status s = Sssp(unweighted, 0, false).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "SSSP needs a weighted graph (.wel, DIMACS .gr, weighted .mtx) or "
            "--unit_weights");
  EXPECT_TRUE(Sssp(unweighted, 0, true).ok());

  Graph negative = FromArcs(8, {{0, 1, 4}, {3, 7, -5}, {5, 6, -1}}, true);
  s = Sssp(negative, 0, false).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "negative weight -5 on arc 3 -> 7; SSSP needs non-negative "
            "weights");
  // unit_weights ignores the stored weights.
  EXPECT_TRUE(Sssp(negative, 0, true).ok());

  s = Sssp(FromArcs(3, {{0, 1, 1}}, true), 3, false).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("source 3"), absl::string_view::npos)
      << s.message();
}

// ------------------------------------------------------------- BC and TC

// Arcs both ways for every edge {u, v}.
Graph Undirected(uint64_t n,
                 const std::vector<std::pair<VertexId, VertexId>>& edges) {
  std::vector<Arc> arcs;
  for (const auto& [u, v] : edges) {
    arcs.emplace_back(u, v, 0);
    arcs.emplace_back(v, u, 0);
  }
  return FromArcs(n, arcs);
}

// Brute-force BC, independent of Brandes: hop distances by Floyd-Warshall,
// path counts sigma[a][b] from the in-arcs (sum of sigma[a][p] over arcs
// p->b with dist[a][p] + 1 == dist[a][b]; sigma[a][a] = 1), then for every
// source s, vertex v and target t != v (all reachable from s)
//   score(v) += sigma[s][v] * sigma[v][t] / sigma[s][t]
//               when dist[s][v] + dist[v][t] == dist[s][t].
// That is the textbook pair dependency, except that v = s is not excluded:
// each t the source reaches adds 1 to the source, as in GAPBS. Then divided
// by the largest score (unless it is 0).
std::vector<double> BruteForceBc(const Graph& g,
                                 const std::vector<VertexId>& sources) {
  const uint64_t n = g.num_vertices();
  const int64_t inf = kInfDistance;
  std::vector<std::vector<int64_t>> dist(n, std::vector<int64_t>(n, inf));
  for (VertexId u = 0; u < n; ++u) {
    dist[u][u] = 0;
    for (VertexId v : g.out.neighbors(u)) {
      if (v != u) dist[u][v] = 1;
    }
  }
  for (uint64_t k = 0; k < n; ++k) {
    for (uint64_t i = 0; i < n; ++i) {
      for (uint64_t j = 0; j < n; ++j) {
        if (dist[i][k] != inf && dist[k][j] != inf) {
          dist[i][j] = std::min(dist[i][j], dist[i][k] + dist[k][j]);
        }
      }
    }
  }
  std::vector<std::vector<double>> sigma(n, std::vector<double>(n, 0.0));
  for (VertexId a = 0; a < n; ++a) {
    std::vector<VertexId> by_distance;
    for (VertexId b = 0; b < n; ++b) {
      if (dist[a][b] != inf) by_distance.push_back(b);
    }
    std::stable_sort(
        by_distance.begin(), by_distance.end(),
        [&](VertexId x, VertexId y) { return dist[a][x] < dist[a][y]; });
    sigma[a][a] = 1.0;
    for (VertexId b : by_distance) {
      if (b == a) continue;
      for (VertexId p : g.in.neighbors(b)) {
        if (dist[a][p] != inf && dist[a][p] + 1 == dist[a][b]) {
          sigma[a][b] += sigma[a][p];
        }
      }
    }
  }
  std::vector<double> scores(n, 0.0);
  for (VertexId s : sources) {
    for (VertexId v = 0; v < n; ++v) {
      for (VertexId t = 0; t < n; ++t) {
        if (t == v || dist[s][v] == inf || dist[v][t] == inf ||
            dist[s][t] == inf) {
          continue;
        }
        if (dist[s][v] + dist[v][t] == dist[s][t]) {
          scores[v] += sigma[s][v] * sigma[v][t] / sigma[s][t];
        }
      }
    }
  }
  const double largest = *std::max_element(scores.begin(), scores.end());
  if (largest > 0) {
    for (double& score : scores) score /= largest;
  }
  return scores;
}

void ExpectBcMatchesBruteForce(const Graph& g,
                               const std::vector<VertexId>& sources,
                               const std::string& name) {
  SCOPED_TRACE(name);
  const std::vector<double> want = BruteForceBc(g, sources);
  absl::StatusOr<std::vector<double>> got = Bc(g, sources);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), want.size());
  for (size_t v = 0; v < want.size(); ++v) {
    if (want[v] == 0.0) {
      EXPECT_EQ((*got)[v], 0.0) << "vertex " << v;
    } else {
      EXPECT_NEAR((*got)[v], want[v], 1e-12 * want[v]) << "vertex " << v;
    }
  }
}

// Every single source, all vertices at once, and a list with a repeat.
void ExpectBcMatchesBruteForceAllSources(const Graph& g,
                                         const std::string& name) {
  const uint64_t n = g.num_vertices();
  std::vector<VertexId> all(n);
  std::iota(all.begin(), all.end(), VertexId{0});
  for (VertexId s : all) {
    ExpectBcMatchesBruteForce(g, {s}, name + " from " + std::to_string(s));
  }
  ExpectBcMatchesBruteForce(g, all, name + " from all");
  ExpectBcMatchesBruteForce(g, {0, static_cast<VertexId>(n - 1), 0},
                            name + " from 0, n-1, 0");
}

// 0->1, 0->2, 1->3, 2->3, 3->4: two shortest paths from 0 to 3 and to 4.
Graph Diamond() {
  return FromArcs(5, {{0, 1, 0}, {0, 2, 0}, {1, 3, 0}, {2, 3, 0}, {3, 4, 0}});
}

TEST(ReferenceBc, DiamondByHand) {
  // From 0: depths 0 | 1, 2 | 3 | 4; sigma = 1, 1, 1, 2, 2. Deepest first:
  //   delta4 = 0
  //   delta3 = sigma3/sigma4 * (1 + delta4) = 2/2 * 1       = 1
  //   delta1 = delta2 = sigma1/sigma3 * (1 + delta3) = 1/2 * 2 = 1
  //   delta0 = 1/1 * (1 + 1) + 1/1 * (1 + 1)             = 4
  // (the source's delta counts the 4 vertices it reaches). Scores 4,1,1,1,0
  // divided by the largest, 4:
  absl::StatusOr<std::vector<double>> from0 =
      Bc(Diamond(), std::vector<VertexId>{0});
  ASSERT_TRUE(from0.ok()) << from0.status();
  EXPECT_EQ(*from0, (std::vector<double>{1, 0.25, 0.25, 0.25, 0}));
  // From 3 only 4 is reached: delta3 = 1, the rest 0. With 0: 4,1,1,2,0.
  EXPECT_EQ(*Bc(Diamond(), std::vector<VertexId>{0, 3}),
            (std::vector<double>{1, 0.25, 0.25, 0.5, 0}));
  // A repeated source counts twice; normalising removes the factor.
  EXPECT_EQ(*Bc(Diamond(), std::vector<VertexId>{0, 0}), *from0);
  // From 4 nothing is reached: every score is 0 and stays 0 (no 0/0).
  EXPECT_EQ(*Bc(Diamond(), std::vector<VertexId>{4}),
            (std::vector<double>(5, 0.0)));
}

TEST(ReferenceBc, TinyGraphsMatchBruteForce) {
  ExpectBcMatchesBruteForceAllSources(Diamond(), "diamond");
  ExpectBcMatchesBruteForceAllSources(
      FromArcs(5, {{0, 1, 0}, {1, 2, 0}, {2, 3, 0}, {3, 4, 0}}),
      "directed path");
  ExpectBcMatchesBruteForceAllSources(
      Undirected(5, {{0, 1}, {1, 2}, {2, 3}, {3, 4}}), "undirected path");
  ExpectBcMatchesBruteForceAllSources(
      Undirected(6, {{0, 1}, {0, 2}, {0, 3}, {0, 4}, {0, 5}}), "star");
  ExpectBcMatchesBruteForceAllSources(
      FromArcs(
          6,
          {{0, 1, 0}, {1, 2, 0}, {2, 3, 0}, {3, 4, 0}, {4, 5, 0}, {5, 0, 0}}),
      "directed cycle");
  // A 2x3 grid: several shortest paths of length 3 between its corners.
  ExpectBcMatchesBruteForceAllSources(
      Undirected(6, {{0, 1}, {1, 2}, {3, 4}, {4, 5}, {0, 3}, {1, 4}, {2, 5}}),
      "grid");
  // 0->1->2, 6->0, 3<->4, 5 isolated: most sources reach few vertices.
  ExpectBcMatchesBruteForceAllSources(
      FromArcs(7, {{0, 1, 0}, {1, 2, 0}, {6, 0, 0}, {3, 4, 0}, {4, 3, 0}}),
      "unreachable parts");
}

TEST(ReferenceBc, GeneratedGraphsMatchBruteForce) {
  for (const auto& [name, g] : std::vector<std::pair<std::string, Graph>>{
           {"kron:6", Load("kron:6")},
           {"urand:6", Load("urand:6")},
           {"dense directed", RandomDirected(80, 400, 11)},
           {"sparse directed", RandomDirected(150, 180, 12)}}) {
    const uint64_t n = g.num_vertices();
    ASSERT_GT(n, 0u);
    VertexId hub = 0;
    for (VertexId v = 0; v < n; ++v) {
      if (g.out.degree(v) > g.out.degree(hub)) hub = v;
    }
    ExpectBcMatchesBruteForce(g, {hub}, name + " from the hub");
    ExpectBcMatchesBruteForce(g, {0}, name + " from 0");
    std::mt19937_64 rng(n);
    std::uniform_int_distribution<VertexId> vertex(0, n - 1);
    std::vector<VertexId> sources;
    for (int i = 0; i < 8; ++i) sources.push_back(vertex(rng));
    ExpectBcMatchesBruteForce(g, sources, name + " from 8 random");
    std::vector<VertexId> all(n);
    std::iota(all.begin(), all.end(), VertexId{0});
    ExpectBcMatchesBruteForce(g, all, name + " from all");
  }
}

TEST(ReferenceBc, Errors) {
  absl::Status s = Bc(Diamond(), {}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "BC needs at least one source");
  s = Bc(Diamond(), std::vector<VertexId>{0, 5}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "source 5 is out of range: the graph has 5 vertices");
  EXPECT_EQ(Bc(Graph{}, std::vector<VertexId>{0}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Triangles {a < b < c} with all three edges, by looking at every triple.
uint64_t BruteForceTriangles(const Graph& g) {
  const uint64_t n = g.num_vertices();
  std::vector<std::vector<bool>> adjacent(n, std::vector<bool>(n, false));
  for (VertexId u = 0; u < n; ++u) {
    for (VertexId v : g.out.neighbors(u)) adjacent[u][v] = true;
  }
  uint64_t triangles = 0;
  for (uint64_t a = 0; a < n; ++a) {
    for (uint64_t b = a + 1; b < n; ++b) {
      if (!adjacent[a][b]) continue;
      for (uint64_t c = b + 1; c < n; ++c) {
        if (adjacent[a][c] && adjacent[b][c]) ++triangles;
      }
    }
  }
  return triangles;
}

Graph Complete(uint64_t n) {
  std::vector<std::pair<VertexId, VertexId>> edges;
  for (VertexId u = 0; u < n; ++u) {
    for (VertexId v = u + 1; v < n; ++v) edges.emplace_back(u, v);
  }
  return Undirected(n, edges);
}

TEST(ReferenceTc, KnownCounts) {
  EXPECT_EQ(*TriangleCount(Undirected(3, {{0, 1}, {1, 2}, {0, 2}})), 1u);
  EXPECT_EQ(*TriangleCount(Complete(4)), 4u);   // C(4,3)
  EXPECT_EQ(*TriangleCount(Complete(5)), 10u);  // C(5,3)
  EXPECT_EQ(*TriangleCount(Undirected(4, {{0, 1}, {1, 2}, {2, 3}, {3, 0}})),
            0u);  // a square
  // {0,1,2} and {1,2,3} share the edge {1,2}.
  EXPECT_EQ(
      *TriangleCount(Undirected(4, {{0, 1}, {1, 2}, {2, 0}, {1, 3}, {3, 2}})),
      2u);
  // A triangle next to an isolated vertex and a pendant edge.
  EXPECT_EQ(*TriangleCount(Undirected(6, {{3, 4}, {4, 5}, {5, 3}, {0, 3}})),
            1u);
  EXPECT_EQ(*TriangleCount(Graph{}), 0u);
}

TEST(ReferenceTc, GeneratedGraphsMatchBruteForce) {
  store::EdgeList edges;
  edges.num_vertices = 120;
  std::mt19937_64 rng(13);
  std::uniform_int_distribution<VertexId> vertex(0, 119);
  for (int i = 0; i < 1500; ++i) edges.Add(vertex(rng), vertex(rng));
  store::CleanOptions symmetrize;
  symmetrize.symmetrize = true;
  absl::StatusOr<Graph> random =
      store::BuildGraph(std::move(edges), symmetrize, 1);
  ASSERT_TRUE(random.ok()) << random.status();
  for (const auto& [name, g] : std::vector<std::pair<std::string, Graph>>{
           {"kron:7", Load("kron:7")},
           {"urand:7", Load("urand:7")},
           {"random symmetrized", *std::move(random)}}) {
    SCOPED_TRACE(name);
    const uint64_t want = BruteForceTriangles(g);
    EXPECT_GT(want, 0u);
    absl::StatusOr<uint64_t> got = TriangleCount(g);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, want);
  }
}

TEST(ReferenceTc, RejectsDirectedGraph) {
  absl::Status s =
      TriangleCount(FromArcs(3, {{0, 1, 0}, {1, 2, 0}, {2, 0, 0}})).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "triangle counting needs an undirected graph, but arc 0 -> 1 has "
            "no reverse (the graph is directed); load it with --symmetrize");
  // One missing reverse among symmetric arcs is enough.
  s = TriangleCount(FromArcs(3, {{0, 1, 0}, {1, 0, 0}, {1, 2, 0}})).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("arc 1 -> 2"), std::string::npos) << s.message();
  EXPECT_EQ(TriangleCount(RandomDirected(200, 1000, 14)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// ------------------------------------------------- fast against simple

void ExpectFastMatchesSimple(const Graph& g, const std::string& name) {
  SCOPED_TRACE(name);
  const uint64_t n = g.num_vertices();
  ASSERT_GT(n, 0u);

  absl::StatusOr<PageRankResult> pr =
      PageRank(g, kDefaultMaxIters, kDefaultTolerance);
  ASSERT_TRUE(pr.ok());
  const std::vector<VertexId> cc = ConnectedComponents(g);
  // Sources: 0, the vertex of largest out-degree, and one in the middle.
  VertexId hub = 0;
  for (VertexId v = 0; v < n; ++v) {
    if (g.out.degree(v) > g.out.degree(hub)) hub = v;
  }
  const std::vector<VertexId> sources = {0, hub, static_cast<VertexId>(n / 2)};
  std::vector<std::vector<int32_t>> depths;
  for (VertexId s : sources) depths.push_back(*Bfs(g, s));

  // The simple CC really is the min id of each BFS-closed class: every arc
  // joins equal labels and every label is the smallest id carrying it.
  for (VertexId u = 0; u < n; ++u) {
    EXPECT_LE(cc[u], u);
    EXPECT_EQ(cc[cc[u]], cc[u]);
    for (VertexId v : g.out.neighbors(u)) ASSERT_EQ(cc[u], cc[v]);
  }
  // SSSP with unit weights is BFS.
  for (size_t i = 0; i < sources.size(); ++i) {
    absl::StatusOr<std::vector<int64_t>> hops = Sssp(g, sources[i], true);
    ASSERT_TRUE(hops.ok());
    for (VertexId v = 0; v < n; ++v) {
      int32_t d = depths[i][v];
      ASSERT_EQ((*hops)[v], d == kUnreached ? kInfDistance : int64_t{d});
    }
  }

  for (int threads : {1, 2, 4}) {
    SCOPED_TRACE(threads);
    absl::StatusOr<PageRankResult> f =
        fast::PageRank(g, kDefaultMaxIters, kDefaultTolerance, threads);
    ASSERT_TRUE(f.ok());
    EXPECT_EQ(f->iterations, pr->iterations);
    Mismatch m = CompareL1(pr->scores, f->scores, 1e-12);
    EXPECT_FALSE(m.any) << m.message;
    EXPECT_NEAR(f->last_l1, pr->last_l1, 1e-12);
    // The reduction is deterministic for a given thread count.
    absl::StatusOr<PageRankResult> again =
        fast::PageRank(g, kDefaultMaxIters, kDefaultTolerance, threads);
    EXPECT_EQ(again->last_l1, f->last_l1);

    for (size_t i = 0; i < sources.size(); ++i) {
      m = CompareExact(depths[i], *fast::BfsTopDown(g, sources[i], threads));
      EXPECT_FALSE(m.any) << "top-down from " << sources[i] << ": "
                          << m.message;
      m = CompareExact(depths[i],
                       *fast::BfsDirectionOptimizing(g, sources[i], threads));
      EXPECT_FALSE(m.any) << "direction-optimizing from " << sources[i] << ": "
                          << m.message;
    }
    m = CompareExact(cc, fast::ConnectedComponents(g, threads));
    EXPECT_FALSE(m.any) << m.message;
  }
}

TEST(ReferenceFast, Kron12) {
  ExpectFastMatchesSimple(Load("kron:12"), "kron");
}

TEST(ReferenceFast, Urand12) {
  ExpectFastMatchesSimple(Load("urand:12"), "urand");
}

TEST(ReferenceFast, DirectedRandom) {
  ExpectFastMatchesSimple(RandomDirected(5000, 40000, 7), "dense directed");
  // About one arc per vertex: many components, many unreachable vertices.
  ExpectFastMatchesSimple(RandomDirected(20000, 14000, 8), "sparse directed");
}

TEST(ReferenceSssp, MatchesBellmanFordOnRandomGraph) {
  Graph g = RandomDirected(3000, 15000, 9);
  for (VertexId source : {0u, 1234u, 2999u}) {
    absl::StatusOr<std::vector<int64_t>> dist = Sssp(g, source, false);
    ASSERT_TRUE(dist.ok());
    Mismatch m = CompareExact(BellmanFord(g, source), *dist);
    EXPECT_FALSE(m.any) << m.message;
  }
}

// ------------------------------------------------------------- real graphs

std::string SharedGraph(const std::string& file) {
  const char* dir = std::getenv("DMG_GRAPHS_DIR");
  if (dir == nullptr || !std::filesystem::is_directory(dir)) return "";
  return std::string(dir) + "/" + file;
}

TEST(ReferenceShared, WikiVote) {
  std::string path = SharedGraph("wiki-Vote.el");
  if (path.empty()) {
    GTEST_SKIP() << "DMG_GRAPHS_DIR not set (or not a folder): skipping the "
                    "real-graph test; point it at shared/graphs to run it";
  }
  Graph g = Load(path);
  ExpectFastMatchesSimple(g, "wiki-Vote");
  // 1005 vertices without out-arcs: their mass is lost, the sum is below 1.
  absl::StatusOr<PageRankResult> pr =
      PageRank(g, kDefaultMaxIters, kDefaultTolerance);
  ASSERT_TRUE(pr.ok());
  double sum = std::accumulate(pr->scores.begin(), pr->scores.end(), 0.0);
  EXPECT_LT(sum, 1.0);
  EXPECT_GT(sum, 0.0);
}

TEST(ReferenceShared, RoadNY) {
  std::string path = SharedGraph("road-NY.el");
  if (path.empty()) {
    GTEST_SKIP() << "DMG_GRAPHS_DIR not set (or not a folder): skipping the "
                    "real-graph test; point it at shared/graphs to run it";
  }
  ExpectFastMatchesSimple(Load(path), "road-NY");
}

// ------------------------------------------------------------ compare.h

TEST(ReferenceCompare, FormatValue) {
  EXPECT_EQ(FormatValue(int32_t{-1}), "-1");
  EXPECT_EQ(FormatValue(int32_t{7}), "7");
  EXPECT_EQ(FormatValue(uint32_t{4294967294u}), "4294967294");
  EXPECT_EQ(FormatValue(kInfDistance), "inf");
  EXPECT_EQ(FormatValue(int64_t{12345678901}), "12345678901");
  EXPECT_EQ(FormatValue(0.25), "0.25");
  EXPECT_EQ(FormatValue(0.1), "0.1");
  const double third = 1.0 / 3;
  EXPECT_EQ(std::stod(FormatValue(third)), third);
  EXPECT_EQ(FormatValue(1e-300), "1e-300");
}

TEST(ReferenceCompare, ExactReportsFirstDifference) {
  std::vector<int32_t> a = {0, 1, 2, -1, 4};
  std::vector<int32_t> b = {0, 1, 3, 2, 4};
  EXPECT_FALSE(CompareExact(a, a).any);
  Mismatch m = CompareExact(a, b);
  EXPECT_TRUE(m.any);
  EXPECT_EQ(m.vertex, 2u);
  EXPECT_EQ(m.count, 2u);
  EXPECT_EQ(m.expected, "2");
  EXPECT_EQ(m.actual, "3");
  EXPECT_EQ(m.message, "vertex 2: expected 2, got 3 (2 of 5 vertices differ)");

  std::vector<int64_t> d1 = {0, kInfDistance}, d2 = {0, 5};
  m = CompareExact(d1, d2);
  EXPECT_EQ(m.vertex, 1u);
  EXPECT_EQ(m.expected, "inf");
  EXPECT_EQ(m.actual, "5");

  std::vector<uint32_t> l1 = {0, 0, 2}, l2 = {0, 0};
  m = CompareExact(l1, l2);
  EXPECT_TRUE(m.any);
  EXPECT_EQ(m.message, "expected 3 values, got 2");
}

TEST(ReferenceCompare, L1) {
  std::vector<double> a = {0.5, 0.25, 0.25}, b = {0.5, 0.20, 0.26};
  EXPECT_NEAR(L1Distance(a, b), 0.06, 1e-15);
  Mismatch m = CompareL1(a, b, 0.1);
  EXPECT_FALSE(m.any);
  EXPECT_NEAR(m.l1, 0.06, 1e-15);
  m = CompareL1(a, b, 0.01);
  EXPECT_TRUE(m.any);
  EXPECT_EQ(m.vertex, 1u);  // largest difference
  EXPECT_EQ(m.expected, "0.25");
  EXPECT_EQ(m.actual, "0.2");
  EXPECT_NE(m.message.find("vertex 1"), std::string::npos) << m.message;

  std::vector<double> nan = {0.5, std::nan(""), 0.25};
  m = CompareL1(a, nan, 1.0);
  EXPECT_TRUE(m.any);
  EXPECT_EQ(m.vertex, 1u);
  std::vector<double> shorter = {0.5};
  EXPECT_TRUE(CompareL1(a, shorter, 1.0).any);
}

}  // namespace
}  // namespace dmg::reference

namespace dmg::reference {
namespace {

// Coreness by hand: a triangle with a pendant path and an isolated vertex;
// a clique inside a ring; and the independent check of the definition: the
// k-core (vertices of coreness >= k) has minimum degree >= k inside itself,
// and no vertex of coreness k survives in a (k+1)-core.
TEST(ReferenceKCore, KnownCoreness) {
  store::EdgeList e;
  e.num_vertices = 6;
  for (auto [u, v] : std::vector<std::pair<VertexId, VertexId>>{
           {0, 1}, {1, 2}, {2, 0}, {2, 3}, {3, 4}}) {
    e.Add(u, v);
  }
  store::CleanOptions sym;
  sym.symmetrize = true;
  auto g = store::BuildGraph(std::move(e), sym, 1);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(*KCore(*g), (std::vector<uint32_t>{2, 2, 2, 1, 1, 0}));
  // K5 plus a ring of 5 attached to vertex 0.
  store::EdgeList k;
  k.num_vertices = 10;
  for (VertexId a = 0; a < 5; ++a) {
    for (VertexId b = a + 1; b < 5; ++b) k.Add(a, b);
  }
  for (VertexId r = 5; r < 10; ++r) k.Add(r, r == 9 ? 5 : r + 1);
  k.Add(0, 5);
  auto kg = store::BuildGraph(std::move(k), sym, 1);
  ASSERT_TRUE(kg.ok());
  EXPECT_EQ(*KCore(*kg), (std::vector<uint32_t>{4, 4, 4, 4, 4, 2, 2, 2, 2, 2}));
}

TEST(ReferenceKCore, CorenessMeetsTheDefinition) {
  for (const char* spec : {"kron:9", "urand:9"}) {
    SCOPED_TRACE(spec);
    absl::StatusOr<store::Graph> g =
        store::LoadGraph(spec, store::GraphSourceOptions());
    ASSERT_TRUE(g.ok());
    std::vector<uint32_t> core = *KCore(*g);
    uint32_t top = *std::max_element(core.begin(), core.end());
    for (uint32_t k = 0; k <= top; ++k) {
      // Inside {v : core[v] >= k} every vertex has >= k neighbours.
      for (VertexId v = 0; v < g->num_vertices(); ++v) {
        if (core[v] < k) continue;
        uint32_t inside = 0;
        for (VertexId w : g->out.neighbors(v)) inside += core[w] >= k;
        ASSERT_GE(inside, k) << "vertex " << v;
      }
    }
    // Maximality: the core numbers of a vertex's neighbours cannot all
    // exceed it (else it would belong to a larger core): at most core[v]
    // neighbours have a coreness above core[v].
    for (VertexId v = 0; v < g->num_vertices(); ++v) {
      uint32_t above = 0;
      for (VertexId w : g->out.neighbors(v)) above += core[w] > core[v];
      EXPECT_LE(above, core[v]) << "vertex " << v;
    }
  }
}

TEST(ReferenceKCore, RejectsDirectedGraph) {
  store::EdgeList e;
  e.num_vertices = 2;
  e.Add(0, 1);
  auto g = store::BuildGraph(std::move(e), {}, 1);
  ASSERT_TRUE(g.ok());
  auto r = KCore(*g);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("--symmetrize"), std::string::npos);
}

}  // namespace
}  // namespace dmg::reference

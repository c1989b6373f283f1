#include "store/build_graph.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "store/graph.h"

namespace dmg::store {
namespace {

using Adjacency = std::vector<std::vector<std::pair<VertexId, Weight>>>;

// Independent, obviously-correct cleaning with std::set / std::map.
struct Reference {
  uint64_t num_vertices = 0;
  Adjacency out, in;
  CleanReport report;
};

Reference Clean(const EdgeList& edges, const CleanOptions& options) {
  Reference ref;
  ref.report.input_arcs = edges.num_arcs();
  ref.report.vertices_before_relabel = edges.num_vertices;
  std::map<VertexId, VertexId> relabel;
  uint64_t n = edges.num_vertices;
  if (options.relabel) {
    std::set<VertexId> ids(edges.src.begin(), edges.src.end());
    ids.insert(edges.dst.begin(), edges.dst.end());
    for (VertexId id : ids) relabel.emplace(id, relabel.size());
    n = ids.size();
  }
  auto id = [&](VertexId v) { return options.relabel ? relabel.at(v) : v; };
  const bool symmetrize = options.symmetrize || edges.undirected;
  std::vector<std::tuple<VertexId, VertexId, Weight>> arcs;
  for (size_t e = 0; e < edges.num_arcs(); ++e) {
    const VertexId u = id(edges.src[e]), v = id(edges.dst[e]);
    const Weight w = edges.weighted() ? edges.weights[e] : 0;
    if (u == v) {
      if (options.drop_self_loops) {
        ++ref.report.self_loops_removed;
      } else {
        arcs.emplace_back(u, v, w);
      }
      continue;
    }
    arcs.emplace_back(u, v, w);
    if (symmetrize) {
      arcs.emplace_back(v, u, w);
      ++ref.report.arcs_added_by_symmetrize;
    }
  }
  if (options.drop_parallel_arcs) {
    std::map<std::pair<VertexId, VertexId>, Weight> lightest;
    for (auto [u, v, w] : arcs) {
      auto [it, inserted] = lightest.emplace(std::make_pair(u, v), w);
      if (!inserted) it->second = std::min(it->second, w);
    }
    ref.report.parallel_arcs_removed = arcs.size() - lightest.size();
    arcs.clear();
    for (auto [uv, w] : lightest) arcs.emplace_back(uv.first, uv.second, w);
  }
  ref.num_vertices = n;
  ref.out.resize(n);
  ref.in.resize(n);
  for (auto [u, v, w] : arcs) {
    ref.out[u].emplace_back(v, w);
    ref.in[v].emplace_back(u, w);
  }
  for (auto& list : ref.out) std::sort(list.begin(), list.end());
  for (auto& list : ref.in) std::sort(list.begin(), list.end());
  return ref;
}

void ExpectCsrEquals(const Csr& csr, const Adjacency& ref, bool weighted,
                     const std::string& what) {
  SCOPED_TRACE(what);
  ASSERT_EQ(csr.num_vertices, ref.size());
  ASSERT_EQ(csr.offsets.size(), ref.size() + 1);
  EXPECT_EQ(csr.offsets[0], 0u);
  EXPECT_EQ(csr.offsets.back(), csr.targets.size());
  // Csr::weighted() means "has weights": a weighted graph left with no arcs
  // reads as unweighted.
  EXPECT_EQ(csr.weighted(), weighted && !csr.targets.empty());
  if (csr.weighted()) {
    ASSERT_EQ(csr.weights.size(), csr.targets.size());
  }
  for (VertexId v = 0; v < ref.size(); ++v) {
    ASSERT_LE(csr.offsets[v], csr.offsets[v + 1]) << "vertex " << v;
    std::vector<std::pair<VertexId, Weight>> got;
    for (EdgeIndex i = csr.offsets[v]; i < csr.offsets[v + 1]; ++i) {
      got.emplace_back(csr.targets[i], weighted ? csr.weights[i] : 0);
    }
    ASSERT_EQ(got, ref[v]) << "vertex " << v;
  }
}

void ExpectGraphEquals(const Graph& g, const Reference& ref, bool weighted) {
  EXPECT_EQ(g.num_vertices(), ref.num_vertices);
  ExpectCsrEquals(g.out, ref.out, weighted, "out");
  ExpectCsrEquals(g.in, ref.in, weighted, "in");
  EXPECT_EQ(g.report.input_arcs, ref.report.input_arcs);
  EXPECT_EQ(g.report.self_loops_removed, ref.report.self_loops_removed);
  EXPECT_EQ(g.report.parallel_arcs_removed, ref.report.parallel_arcs_removed);
  EXPECT_EQ(g.report.arcs_added_by_symmetrize,
            ref.report.arcs_added_by_symmetrize);
  EXPECT_EQ(g.report.vertices_before_relabel,
            ref.report.vertices_before_relabel);
  // The documented identity between the counts.
  EXPECT_EQ(g.num_arcs(), g.report.input_arcs - g.report.self_loops_removed +
                              g.report.arcs_added_by_symmetrize -
                              g.report.parallel_arcs_removed);
}

void ExpectSameGraph(const Graph& a, const Graph& b) {
  EXPECT_EQ(a.out.num_vertices, b.out.num_vertices);
  EXPECT_EQ(a.out.offsets, b.out.offsets);
  EXPECT_EQ(a.out.targets, b.out.targets);
  EXPECT_EQ(a.out.weights, b.out.weights);
  EXPECT_EQ(a.in.num_vertices, b.in.num_vertices);
  EXPECT_EQ(a.in.offsets, b.in.offsets);
  EXPECT_EQ(a.in.targets, b.in.targets);
  EXPECT_EQ(a.in.weights, b.in.weights);
  EXPECT_EQ(a.report.self_loops_removed, b.report.self_loops_removed);
  EXPECT_EQ(a.report.parallel_arcs_removed, b.report.parallel_arcs_removed);
  EXPECT_EQ(a.report.arcs_added_by_symmetrize,
            b.report.arcs_added_by_symmetrize);
}

// A random edge list with many self-loops and parallel arcs (with different
// weights, negatives included), over ids < used <= n: ids in [used, n) are
// isolated trailing vertices.
EdgeList RandomEdges(std::mt19937_64& rng, uint64_t n, uint64_t used, size_t m,
                     bool weighted) {
  EdgeList edges;
  edges.num_vertices = n;
  std::uniform_int_distribution<VertexId> id(0, used - 1);
  std::uniform_int_distribution<Weight> weight(-5, 20);
  std::bernoulli_distribution coin(0.15);
  for (size_t e = 0; e < m; ++e) {
    VertexId u = id(rng), v = id(rng);
    if (coin(rng)) v = u;      // self-loop
    if (coin(rng) && e > 0) {  // repeat an earlier arc, maybe reversed
      const size_t k = std::uniform_int_distribution<size_t>(0, e - 1)(rng);
      u = edges.src[k];
      v = edges.dst[k];
      if (coin(rng)) std::swap(u, v);
    }
    if (weighted) {
      edges.Add(u, v, weight(rng));
    } else {
      edges.Add(u, v);
    }
  }
  return edges;
}

std::string Describe(const CleanOptions& o, bool undirected, bool weighted) {
  return "symmetrize=" + std::to_string(o.symmetrize) +
         " drop_self_loops=" + std::to_string(o.drop_self_loops) +
         " drop_parallel=" + std::to_string(o.drop_parallel_arcs) +
         " relabel=" + std::to_string(o.relabel) +
         " undirected=" + std::to_string(undirected) +
         " weighted=" + std::to_string(weighted);
}

TEST(BuildGraphTest, RandomSmallGraphsMatchReferenceForAllOptions) {
  std::mt19937_64 rng(12345);
  for (int trial = 0; trial < 60; ++trial) {
    const uint64_t used = 1 + rng() % 40;
    const uint64_t n = used + (trial % 3 == 0 ? rng() % 5 : 0);
    const size_t m = rng() % 200;
    for (int bits = 0; bits < 64; ++bits) {
      CleanOptions options;
      options.symmetrize = bits & 1;
      options.drop_self_loops = bits & 2;
      options.drop_parallel_arcs = bits & 4;
      options.relabel = bits & 8;
      const bool undirected = bits & 16;
      const bool weighted = bits & 32;
      std::mt19937_64 edge_rng(trial * 1000 + bits);
      EdgeList edges = RandomEdges(edge_rng, n, used, m, weighted);
      edges.undirected = undirected;
      const Reference ref = Clean(edges, options);
      const int threads = 1 + (trial + bits) % 4;
      SCOPED_TRACE("trial " + std::to_string(trial) +
                   " n=" + std::to_string(n) + " m=" + std::to_string(m) +
                   " threads=" + std::to_string(threads) + " " +
                   Describe(options, undirected, weighted));
      absl::StatusOr<Graph> g = BuildGraph(edges, options, threads);
      ASSERT_TRUE(g.ok()) << g.status();
      ExpectGraphEquals(*g, ref, weighted);
      if (testing::Test::HasFailure()) return;
    }
  }
}

TEST(BuildGraphTest, HandMadeWeightedCountsAndLightestWeight) {
  EdgeList edges;
  edges.num_vertices = 6;  // 4 and 5 are isolated trailing vertices
  edges.Add(0, 1, 5);
  edges.Add(0, 1, 3);  // parallel, lighter
  edges.Add(1, 0, 4);  // reverse of (0,1)
  edges.Add(2, 2, 1);  // self-loop
  edges.Add(1, 2, 7);
  edges.Add(3, 1, -2);  // negative weight
  edges.Add(3, 1, -9);  // parallel, lighter
  CleanOptions options;
  options.symmetrize = true;
  absl::StatusOr<Graph> g = BuildGraph(edges, options, 2);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->num_vertices(), 6u);
  EXPECT_EQ(g->report.input_arcs, 7u);
  EXPECT_EQ(g->report.self_loops_removed, 1u);
  EXPECT_EQ(g->report.arcs_added_by_symmetrize, 6u);
  // 12 arcs: (0,1)x3 + (1,0)x3 + (1,2),(2,1) + (3,1)x2 + (1,3)x2 -> 6 kept.
  EXPECT_EQ(g->report.parallel_arcs_removed, 6u);
  EXPECT_EQ(g->report.vertices_before_relabel, 6u);
  EXPECT_EQ(g->out.offsets, (std::vector<EdgeIndex>{0, 1, 4, 5, 6, 6, 6}));
  EXPECT_EQ(g->out.targets, (std::vector<VertexId>{1, 0, 2, 3, 1, 1}));
  EXPECT_EQ(g->out.weights, (std::vector<Weight>{3, 3, 7, -9, 7, -9}));
  // Symmetric: the in-CSR is the same.
  EXPECT_EQ(g->in.offsets, g->out.offsets);
  EXPECT_EQ(g->in.targets, g->out.targets);
  EXPECT_EQ(g->in.weights, g->out.weights);
}

TEST(BuildGraphTest, DirectedKeepsDirectionAndTransposes) {
  EdgeList edges;
  edges.num_vertices = 4;
  edges.Add(2, 0);
  edges.Add(0, 3);
  edges.Add(0, 1);
  edges.Add(0, 1);
  edges.Add(1, 1);
  edges.Add(3, 0);
  absl::StatusOr<Graph> g = BuildGraph(edges, CleanOptions(), 1);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_FALSE(g->weighted());
  EXPECT_TRUE(g->in.weights.empty());
  EXPECT_EQ(g->out.offsets, (std::vector<EdgeIndex>{0, 2, 2, 3, 4}));
  EXPECT_EQ(g->out.targets, (std::vector<VertexId>{1, 3, 0, 0}));
  EXPECT_EQ(g->in.offsets, (std::vector<EdgeIndex>{0, 2, 3, 3, 4}));
  EXPECT_EQ(g->in.targets, (std::vector<VertexId>{2, 3, 0, 0}));
  EXPECT_EQ(g->report.self_loops_removed, 1u);
  EXPECT_EQ(g->report.parallel_arcs_removed, 1u);
  EXPECT_EQ(g->report.arcs_added_by_symmetrize, 0u);
}

TEST(BuildGraphTest, SelfLoopIsNotDoubledBySymmetrize) {
  EdgeList edges;
  edges.num_vertices = 2;
  edges.undirected = true;
  edges.Add(1, 1, 4);
  edges.Add(0, 1, 2);
  CleanOptions options;
  options.drop_self_loops = false;
  options.drop_parallel_arcs = false;
  absl::StatusOr<Graph> g = BuildGraph(edges, options, 2);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->out.offsets, (std::vector<EdgeIndex>{0, 1, 3}));
  EXPECT_EQ(g->out.targets, (std::vector<VertexId>{1, 0, 1}));
  EXPECT_EQ(g->out.weights, (std::vector<Weight>{2, 2, 4}));
  EXPECT_EQ(g->report.arcs_added_by_symmetrize, 1u);
  EXPECT_EQ(g->report.self_loops_removed, 0u);
}

TEST(BuildGraphTest, KeepsParallelArcsSortedByWeightWhenAsked) {
  EdgeList edges;
  edges.num_vertices = 2;
  edges.Add(0, 1, 3);
  edges.Add(0, 1, -5);
  edges.Add(0, 1, 3);
  edges.Add(0, 0, 1);
  CleanOptions options;
  options.drop_parallel_arcs = false;
  absl::StatusOr<Graph> g = BuildGraph(edges, options, 1);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->out.targets, (std::vector<VertexId>{1, 1, 1}));
  EXPECT_EQ(g->out.weights, (std::vector<Weight>{-5, 3, 3}));
  EXPECT_EQ(g->in.offsets, (std::vector<EdgeIndex>{0, 0, 3}));
  EXPECT_EQ(g->in.weights, (std::vector<Weight>{-5, 3, 3}));
  EXPECT_EQ(g->report.parallel_arcs_removed, 0u);
}

TEST(BuildGraphTest, RelabelCompactsIdsInOrder) {
  EdgeList edges;
  edges.num_vertices = 200;
  edges.Add(100, 5);
  edges.Add(7, 7);  // only a self-loop: still a vertex, with no arcs
  edges.Add(5, 150);
  CleanOptions options;
  options.relabel = true;
  absl::StatusOr<Graph> g = BuildGraph(edges, options, 2);
  ASSERT_TRUE(g.ok()) << g.status();
  // 5 -> 0, 7 -> 1, 100 -> 2, 150 -> 3.
  EXPECT_EQ(g->num_vertices(), 4u);
  EXPECT_EQ(g->report.vertices_before_relabel, 200u);
  EXPECT_EQ(g->out.offsets, (std::vector<EdgeIndex>{0, 1, 1, 2, 2}));
  EXPECT_EQ(g->out.targets, (std::vector<VertexId>{3, 0}));
  EXPECT_EQ(g->in.offsets, (std::vector<EdgeIndex>{0, 1, 1, 1, 2}));
  EXPECT_EQ(g->in.targets, (std::vector<VertexId>{2, 0}));
}

TEST(BuildGraphTest, RelabelOfHugeSparseIdRange) {
  // Ids near 2^32 with few arcs: relabel must not need an n-sized table.
  EdgeList edges;
  edges.num_vertices = kMaxVertexId + 1;
  edges.Add(4000000000u, 3u, 9);
  edges.Add(3u, 4294967294u, 1);
  edges.Add(17u, 4000000000u, 2);
  CleanOptions options;
  options.relabel = true;
  options.symmetrize = true;
  const Reference ref = Clean(edges, options);
  for (int threads : {1, 2}) {
    absl::StatusOr<Graph> g = BuildGraph(edges, options, threads);
    ASSERT_TRUE(g.ok()) << g.status();
    EXPECT_EQ(g->num_vertices(), 4u);
    EXPECT_EQ(g->report.vertices_before_relabel, kMaxVertexId + 1);
    ExpectGraphEquals(*g, ref, /*weighted=*/true);
  }
}

TEST(BuildGraphTest, EmptyAndIsolatedOnly) {
  for (uint64_t n : {0u, 1u, 7u}) {
    EdgeList edges;
    edges.num_vertices = n;
    absl::StatusOr<Graph> g = BuildGraph(edges, CleanOptions(), 2);
    ASSERT_TRUE(g.ok()) << g.status();
    EXPECT_EQ(g->num_vertices(), n);
    EXPECT_EQ(g->num_arcs(), 0u);
    EXPECT_EQ(g->out.offsets, std::vector<EdgeIndex>(n + 1, 0));
    EXPECT_EQ(g->in.offsets, std::vector<EdgeIndex>(n + 1, 0));
  }
}

TEST(BuildGraphTest, LargeRandomGraphIsThreadCountIndependent) {
  for (bool weighted : {false, true}) {
    for (bool symmetrize : {false, true}) {
      std::mt19937_64 rng(weighted * 2 + symmetrize);
      // n above the parallel prefix-sum threshold; a skewed id distribution.
      const uint64_t n = 100000;
      EdgeList edges = RandomEdges(rng, n, n, 300000, weighted);
      for (size_t e = 0; e < edges.num_arcs(); e += 3) {
        edges.src[e] = static_cast<VertexId>(edges.src[e] % 50);
      }
      CleanOptions options;
      options.symmetrize = symmetrize;
      SCOPED_TRACE(Describe(options, false, weighted));
      absl::StatusOr<Graph> g1 = BuildGraph(edges, options, 1);
      ASSERT_TRUE(g1.ok()) << g1.status();
      ExpectGraphEquals(*g1, Clean(edges, options), weighted);
      for (int threads : {2, 3, 8}) {
        absl::StatusOr<Graph> gt = BuildGraph(edges, options, threads);
        ASSERT_TRUE(gt.ok()) << gt.status();
        ExpectSameGraph(*g1, *gt);
      }
    }
  }
}

// With many threads and vertices, per-thread degree histograms (64 x 600001 x
// 8 bytes > 256 MiB and > the arcs) are too big, and BuildGraph falls back to
// shared atomic counters, whose slot order varies: the output must not.
TEST(BuildGraphTest, ManyThreadsOnManyVerticesMatchReference) {
  for (bool weighted : {false, true}) {
    for (bool symmetrize : {false, true}) {
      std::mt19937_64 rng(7 + weighted * 2 + symmetrize);
      const uint64_t n = 600000;
      EdgeList edges = RandomEdges(rng, n, n, 20000, weighted);
      for (size_t e = 0; e < edges.num_arcs(); e += 2) {
        edges.dst[e] = static_cast<VertexId>(edges.dst[e] % 100);
      }
      CleanOptions options;
      options.symmetrize = symmetrize;
      SCOPED_TRACE(Describe(options, false, weighted));
      absl::StatusOr<Graph> g64 = BuildGraph(edges, options, 64);
      ASSERT_TRUE(g64.ok()) << g64.status();
      ExpectGraphEquals(*g64, Clean(edges, options), weighted);
      absl::StatusOr<Graph> g1 = BuildGraph(edges, options, 1);
      ASSERT_TRUE(g1.ok()) << g1.status();
      ExpectSameGraph(*g1, *g64);
    }
  }
}

TEST(BuildGraphTest, RejectsOutOfRangeIds) {
  EdgeList edges;
  edges.num_vertices = 3;
  edges.Add(0, 1);
  edges.Add(2, 3);
  for (int threads : {1, 2}) {
    absl::StatusOr<Graph> g = BuildGraph(edges, CleanOptions(), threads);
    ASSERT_FALSE(g.ok());
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(g.status().message().find("vertex id 3"), std::string::npos)
        << g.status();
  }
  // Relabelling does not excuse an id beyond num_vertices.
  CleanOptions relabel;
  relabel.relabel = true;
  EXPECT_EQ(BuildGraph(edges, relabel, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(BuildGraphTest, RejectsMalformedEdgeLists) {
  EdgeList weights_mismatch;
  weights_mismatch.num_vertices = 3;
  weights_mismatch.Add(0, 1, 4);
  weights_mismatch.Add(1, 2);
  EXPECT_EQ(BuildGraph(weights_mismatch, CleanOptions(), 1).status().code(),
            absl::StatusCode::kInvalidArgument);

  EdgeList dst_mismatch;
  dst_mismatch.num_vertices = 3;
  dst_mismatch.Add(0, 1);
  dst_mismatch.src.push_back(2);
  EXPECT_EQ(BuildGraph(dst_mismatch, CleanOptions(), 1).status().code(),
            absl::StatusCode::kInvalidArgument);

  EdgeList too_many;
  too_many.num_vertices = kMaxVertexId + 2;
  EXPECT_EQ(BuildGraph(too_many, CleanOptions(), 1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace dmg::store

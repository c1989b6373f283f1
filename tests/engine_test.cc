// The DM engine against the independent reference: every algorithm, on
// generated graphs of several scales and shapes, at several thread counts;
// the compute side never touches memory-node memory directly; the bytes the
// compute side counts are the bytes the memory node served.
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <string>
#include <tuple>

#include "algorithms/algorithms.h"
#include "algorithms/registry.h"
#include "compute_node/vertex_program.h"
#include "gtest/gtest.h"
#include "reference/compare.h"
#include "reference/reference.h"
#include "store/build_graph.h"
#include "store/generator.h"
#include "store/graph_source.h"
#include "store/layout.h"
#include "tools/embedded_cluster.h"

namespace dmg {
namespace {

using cli::EmbeddedCluster;

struct TestGraph {
  store::Graph graph;
  std::string name;
};

// A generated graph with deterministic weights in [1, 100] so SSSP has
// something to chew on.
TestGraph Generated(store::GeneratorParams::Kind kind, int scale) {
  store::EdgeList e = store::Generate({kind, scale, 8, 42});
  for (size_t i = 0; i < e.num_arcs(); ++i) {
    e.weights.push_back(
        static_cast<store::Weight>((i * 2654435761u) % 100 + 1));
  }
  absl::StatusOr<store::Graph> g = store::BuildGraph(std::move(e), {});
  EXPECT_TRUE(g.ok()) << g.status();
  return {*std::move(g),
          absl::StrCat(
              kind == store::GeneratorParams::Kind::kKron ? "kron:" : "urand:",
              scale)};
}

struct CacheConfig {
  uint64_t bytes = compute::MemoryBudget::kUnlimited;
  compute::CachePolicy policy = compute::CachePolicy::kGraphAware;
  bool compress = false;  // the store's blocks (a layout choice)
};

std::unique_ptr<EmbeddedCluster> Start(const store::Graph& g, int threads,
                                       uint32_t block_size = 4096,
                                       bool guard = false,
                                       CacheConfig cache = {}) {
  store::LayoutOptions layout;
  layout.block_size = block_size;
  layout.compress = cache.compress;
  absl::StatusOr<store::StoreImage> image = store::BuildStoreImage(g, layout);
  EXPECT_TRUE(image.ok()) << image.status();
  compute::EngineOptions eo;
  eo.threads = threads;
  eo.batch_bytes = 64 * 1024;
  eo.cache_bytes = cache.bytes;
  eo.cache_policy = cache.policy;
  memory_node::MemoryNode::Options mo;
  mo.guard_memory = guard;
  auto c = EmbeddedCluster::Start(*std::move(image), eo, mo);
  EXPECT_TRUE(c.ok()) << c.status();
  return *std::move(c);
}

// Every registered algorithm on one cluster configuration, each on a fresh
// cluster, checked against its reference with the registry's comparison.
// An algorithm whose reference refuses the graph (triangle counting and
// k-core need a symmetric one) must fail on the engine too. Returns the
// values by algorithm, for comparisons across configurations.
using Results = std::map<std::string, algorithms::Values>;

Results RunAllAndCheck(const store::Graph& g, int threads,
                       uint32_t block_size = 4096, bool guard = false,
                       CacheConfig cache = {}) {
  algorithms::Params p;
  while (p.source + 1 < g.num_vertices() && g.out.degree(p.source) == 0) {
    ++p.source;
  }
  p.max_iters = 1000;
  p.tolerance = 1e-10;
  p.precision = algorithms::Precision::kDouble;
  p.unit_weights = !g.weighted();
  Results out;
  for (const algorithms::Algorithm& a : algorithms::Registry()) {
    SCOPED_TRACE(a.name);
    algorithms::Params params = p;
    // Brandes from three sources (one repeated: it counts twice).
    params.sources =
        a.sources == algorithms::Sources::kMany
            ? std::vector<store::VertexId>{p.source,
                                           static_cast<store::VertexId>(
                                               g.num_vertices() / 2),
                                           p.source}
            : std::vector<store::VertexId>{p.source};
    const absl::StatusOr<algorithms::Values> expected = a.reference(g, params);
    auto c = Start(g, threads, block_size, guard, cache);
    absl::StatusOr<algorithms::Outcome> r = a.run(c->engine(), params);
    if (!expected.ok()) {
      EXPECT_FALSE(r.ok()) << "the reference refused: " << expected.status();
      continue;
    }
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) continue;
    const reference::Mismatch m = a.compare(*expected, r->values, params);
    EXPECT_FALSE(m.any) << a.name << ": " << m.message;
    out[a.name] = std::move(r->values);
  }
  return out;
}

// The same answers: exact, but for floating-point values, which differ
// by summation order (within 1e-12 of their L1 norm).
void ExpectSameResults(const Results& a, const Results& b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, values] : a) {
    SCOPED_TRACE(name);
    ASSERT_EQ(b.count(name), 1u);
    const algorithms::Values& other = b.at(name);
    if (const auto* x = std::get_if<std::vector<double>>(&values)) {
      const auto& y = std::get<std::vector<double>>(other);
      double norm = 0;
      for (double v : *x) norm += std::abs(v);
      EXPECT_LE(reference::L1Distance(*x, y), 1e-12 * std::max(1.0, norm));
    } else {
      EXPECT_TRUE(values == other);
    }
  }
}

class GeneratedGraphs : public ::testing::TestWithParam<
                            std::tuple<store::GeneratorParams::Kind, int>> {};

TEST_P(GeneratedGraphs, AllAlgorithmsMatchReference) {
  auto [kind, scale] = GetParam();
  TestGraph t = Generated(kind, scale);
  SCOPED_TRACE(t.name);
  RunAllAndCheck(t.graph, 2);
}

INSTANTIATE_TEST_SUITE_P(
    Scales, GeneratedGraphs,
    ::testing::Combine(::testing::Values(store::GeneratorParams::Kind::kKron,
                                         store::GeneratorParams::Kind::kUrand),
                       ::testing::Values(10, 12, 14, 16)));

TEST(EngineTest, ResultsDoNotDependOnThreads) {
  TestGraph t = Generated(store::GeneratorParams::Kind::kKron, 13);
  Results one = RunAllAndCheck(t.graph, 1);
  for (int threads : {2, 4}) {
    ExpectSameResults(one, RunAllAndCheck(t.graph, threads));
  }
}

TEST(EngineTest, SplitVerticesAndTinyBlocks) {
  // 256-byte blocks force many split runs on a skewed graph.
  TestGraph t = Generated(store::GeneratorParams::Kind::kKron, 11);
  RunAllAndCheck(t.graph, 3, 256);
}

TEST(EngineTest, DirectedGraphWithDanglingVertices) {
  store::EdgeList e;
  e.num_vertices = 50;  // 40..49 isolated
  for (store::VertexId v = 0; v < 30; ++v) {
    e.Add(v, (v * 7 + 3) % 40, static_cast<store::Weight>(v % 5));
    e.Add(v, (v * 11 + 1) % 40, static_cast<store::Weight>(v % 3 + 2));
  }
  auto g = store::BuildGraph(std::move(e), {});
  ASSERT_TRUE(g.ok());
  RunAllAndCheck(*g, 2, 256);
}

// Afforest's sampling links only each vertex's first two out-neighbours
// and its final phase skips the largest sampled component: the arcs it
// must still link are those past the second out-neighbour, and, on a
// directed graph, arcs that reach a vertex only as an in-neighbour.
TEST(EngineTest, AfforestLinksWhatSamplingMissed) {
  store::EdgeList e;
  e.num_vertices = 400;
  // A giant component: a chain 0 -> 1 -> ... -> 199 (sampled).
  for (store::VertexId v = 0; v + 1 < 200; ++v) e.Add(v, v + 1);
  // 250 links three chains in through its third to fifth out-neighbours:
  // 260..269, 270..279 and 280..289 (each reached nowhere else).
  for (store::VertexId h : {250, 251, 252, 260, 270, 280}) e.Add(250, h);
  for (store::VertexId v = 260; v < 290; ++v) {
    if (v % 10 != 9) e.Add(v, v + 1);
  }
  // 300..309 reach the chain only as its in-neighbours (a directed graph
  // keeps arcs one way): 150 -> 300 -> 301 ..., 199 -> 305.
  e.Add(150, 300);
  e.Add(199, 305);
  // A second large part, 320..379, joined to the giant one by the last arc
  // of a hub's list: sampling sees two big components.
  for (store::VertexId v = 320; v + 1 < 380; ++v) e.Add(v, v + 1);
  for (store::VertexId h : {321, 322, 323, 324, 390, 5}) e.Add(320, h);
  // {246, 247, 248} and {241, 242, 249} joined only by 246 -> 249, the
  // third neighbour of both ends in either direction: no sampling sees it.
  for (store::VertexId h : {247, 248, 249}) e.Add(246, h);
  for (store::VertexId h : {241, 242}) e.Add(249, h);
  // 395..399 isolated; 390 only an in-neighbour.
  // Directed, and symmetrized (where only out-lists are scanned).
  for (bool symmetric : {false, true}) {
    store::CleanOptions clean;
    clean.symmetrize = symmetric;
    auto g = store::BuildGraph(e, clean);
    ASSERT_TRUE(g.ok());
    const auto want = reference::ConnectedComponents(*g);
    for (int threads : {1, 3}) {
      SCOPED_TRACE(::testing::Message()
                   << threads << " threads, symmetric " << symmetric);
      auto c = Start(*g, threads, 256);
      auto cc = algorithms::ConnectedComponents(c->engine());
      ASSERT_TRUE(cc.ok()) << cc.status();
      auto m = reference::CompareExact(want, *cc);
      EXPECT_FALSE(m.any) << m.message;
    }
  }
}

// FAM-Graph's design as a baseline (--cache_policy=fam): the same answers,
// no edge kept between scans, and a job whose state does not fit the bound
// is refused with one clear error.
TEST(EngineTest, FamKeepsStateLocalAndCachesNoEdges) {
  TestGraph t = Generated(store::GeneratorParams::Kind::kKron, 12);
  Results graph_aware = RunAllAndCheck(t.graph, 2);
  Results fam = RunAllAndCheck(
      t.graph, 2, 4096, false,
      {compute::MemoryBudget::kUnlimited, compute::CachePolicy::kFam});
  ExpectSameResults(graph_aware, fam);
  for (auto policy :
       {compute::CachePolicy::kGraphAware, compute::CachePolicy::kFam}) {
    auto c = Start(t.graph, 1, 4096, false,
                   {compute::MemoryBudget::kUnlimited, policy});
    ASSERT_TRUE(algorithms::PageRank(c->engine(), 3, 0).ok());
    c->engine().Finish();
    const compute::RunStats& s = c->engine().stats();
    EXPECT_EQ(s.cache_policy,
              policy == compute::CachePolicy::kFam ? "fam" : "graph_aware");
    if (policy == compute::CachePolicy::kFam) {
      EXPECT_EQ(s.total_cache.hits, 0u);  // every scan READs its edges
    } else {
      EXPECT_GT(s.total_cache.hits, 0u);  // hot blocks
    }
  }
  // The smallest bound a job accepts (2 workers' buffers and page
  // minimum, a page of slack): no room for kron:16's 256 KiB of depths.
  const uint64_t minimum = 2 * 3 * 4096 + 2 * 16 * 4096 + 4096;
  TestGraph big = Generated(store::GeneratorParams::Kind::kKron, 16);
  auto c =
      Start(big.graph, 2, 4096, false, {minimum, compute::CachePolicy::kFam});
  auto bfs = algorithms::Bfs(c->engine(), 0);
  ASSERT_FALSE(bfs.ok());
  EXPECT_EQ(bfs.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bfs.status().message().find("fam keeps all vertex state local"),
            std::string::npos)
      << bfs.status();
}

// Parents paged through a cache a quarter of their size: links and
// compresses climb pages that come and go.
TEST(EngineTest, AfforestWithPagedParents) {
  TestGraph t = Generated(store::GeneratorParams::Kind::kUrand, 17);
  // 2 workers x (3 block buffers + 16 pages), a page of slack (the
  // smallest cache a job accepts), against 512 KiB of parents.
  const uint64_t minimum = 2 * 3 * 4096 + 2 * 16 * 4096 + 4096;
  auto c = Start(t.graph, 2, 4096, false, {minimum});
  auto cc = algorithms::ConnectedComponents(c->engine());
  ASSERT_TRUE(cc.ok()) << cc.status();
  auto m =
      reference::CompareExact(reference::ConnectedComponents(t.graph), *cc);
  EXPECT_FALSE(m.any) << m.message;
  c->engine().Finish();
  EXPECT_GT(c->engine().stats().total_cache.misses, 0u);
}

// The compute side reaches memory-node memory only through the transport:
// with every region mprotect(PROT_NONE) except while the memory node itself
// serves an operation, any stray pointer access would crash the test.
TEST(EngineTest, NoDirectAccessToMemoryNodeMemory) {
  TestGraph t = Generated(store::GeneratorParams::Kind::kKron, 10);
  RunAllAndCheck(t.graph, 1, 1024, /*guard=*/true);
}

TEST(EngineTest, CountedBytesEqualServedBytes) {
  TestGraph t = Generated(store::GeneratorParams::Kind::kUrand, 12);
  auto c = Start(t.graph, 2);
  auto pr = algorithms::PageRank(c->engine(), 5, 0);
  ASSERT_TRUE(pr.ok());
  auto bfs = algorithms::Bfs(c->engine(), 0);
  ASSERT_TRUE(bfs.ok());
  c->engine().Finish();
  const compute::RunStats& s = c->engine().stats();
  memory_node::ServedStats served = c->memory_node().served();
  EXPECT_EQ(s.total.bytes_read, served.bytes_read);
  EXPECT_EQ(s.total.bytes_written, served.bytes_written);
  EXPECT_EQ(s.total.reads, served.reads);
  EXPECT_EQ(s.total.writes, served.writes);
  EXPECT_EQ(s.total.atomics(), served.atomics);
  // Supersteps and setup add up to the total (plus the final read-back).
  transport::OpStats sum = s.setup;
  for (const compute::SuperstepStats& step : s.supersteps) sum += step.ops;
  EXPECT_LE(sum.bytes_read, s.total.bytes_read);
  EXPECT_GT(s.supersteps.size(), 5u);  // 5 PageRank + the BFS levels
  // The first PageRank superstep READs every in-edge; with no cache bound
  // the whole direction fits, so a full scan keeps the blocks at once and
  // later supersteps READ no edges.
  for (int i = 0; i < 5; ++i) {
    if (i < 1) {
      EXPECT_GE(s.supersteps[i].ops.bytes_read, 4 * t.graph.num_arcs());
    } else {
      EXPECT_LT(s.supersteps[i].ops.bytes_read, t.graph.num_arcs());
    }
    EXPECT_GE(s.supersteps[i].ops.round_trips, 1u);
    EXPECT_EQ(s.supersteps[i].direction, "pull");
  }
  std::string json = compute::ToJson(s);
  for (const char* key : {"\"supersteps\"", "\"frontier\"", "\"bytes_read\"",
                          "\"round_trips\"", "\"atomics\"", "\"totals\""}) {
    EXPECT_NE(json.find(key), std::string::npos) << key;
  }
}

// PageRank keeps its state one of two ways, by where its two slots were
// placed (pagerank.cc): alternating contributions (both resident, or both
// paged: a vertex map only before the first gather and in the last
// superstep) or contributions and scores (the first resident, the second
// not: a vertex map before every gather). Over a range of bounds both
// occur, and every run gives the reference's scores.
TEST(EngineTest, PageRankMatchesTheReferenceInEitherStateLayout) {
  TestGraph t = Generated(store::GeneratorParams::Kind::kUrand, 12);
  constexpr int kIterations = 6;
  const auto ref = reference::PageRank(t.graph, kIterations, 0);
  ASSERT_TRUE(ref.ok());
  double norm = 0;
  for (double x : ref->scores) norm += std::abs(x);
  std::map<std::string, int> seen;
  for (uint64_t kib : {160, 176, 192, 208, 224, 256, 320, 0}) {
    SCOPED_TRACE(::testing::Message() << "bound " << kib << " KiB");
    CacheConfig cache;
    if (kib > 0) cache.bytes = kib << 10;
    auto c = Start(t.graph, 2, 4096, false, cache);
    auto pr = algorithms::PageRank(c->engine(), kIterations, 0,
                                   algorithms::Precision::kDouble);
    ASSERT_TRUE(pr.ok()) << pr.status();
    c->engine().Finish();
    EXPECT_EQ(pr->iterations, kIterations);
    EXPECT_LE(reference::L1Distance(pr->scores, ref->scores), 1e-12 * norm);
    const auto& steps = c->engine().stats().supersteps;
    ASSERT_EQ(steps.size(), static_cast<size_t>(kIterations));
    // The supersteps between the first and the last: a vertex map's
    // visits in each (scores kept) or in none (alternating).
    int mapped = 0;
    for (int i = 1; i + 1 < kIterations; ++i) {
      mapped += steps[i].vertex_visits > 0 ? 1 : 0;
    }
    EXPECT_TRUE(mapped == 0 || mapped == kIterations - 2) << mapped;
    ++seen[mapped == 0 ? "alternating" : "scores kept"];
  }
  EXPECT_GT(seen["alternating"], 0);
  EXPECT_GT(seen["scores kept"], 0);
}

// A cache too small for the blocks streams them: every PageRank superstep
// READs every in-edge again. One with room beside the vertex state keeps a
// fixed subset of the blocks (an LRU cache would keep none of a cyclic scan
// larger than itself), so later supersteps READ fewer, but not none.
TEST(EngineTest, ScansStreamWhatTheCacheCannotHold) {
  TestGraph t = Generated(store::GeneratorParams::Kind::kUrand, 14);
  store::LayoutOptions layout;
  layout.block_size = 4096;
  const uint64_t store_bytes =
      store::BuildStoreImage(t.graph, layout)->bytes().size();
  // PageRank's state (contributions, scores, out-degrees: 20 bytes a
  // vertex) and at most the job's buffers (2 x 3 x 64 KiB) and pages.
  const uint64_t fixed =
      t.graph.num_vertices() * 20 + 2 * 3 * 65536 + 2 * 16 * 4096;
  // In-edges with their weights: 8 bytes each.
  const uint64_t edges = 8 * t.graph.num_arcs();
  for (uint64_t bytes : {store_bytes / 20, fixed + edges / 2}) {
    SCOPED_TRACE(::testing::Message() << "cache " << bytes);
    auto c = Start(t.graph, 2, 4096, false, {bytes});
    ASSERT_TRUE(algorithms::PageRank(c->engine(), 4, 0).ok());
    c->engine().Finish();
    const compute::RunStats& s = c->engine().stats();
    EXPECT_GE(s.supersteps[0].ops.bytes_read, edges);
    // The cache holds part of the blocks only, so they are admitted when
    // read the second time (superstep 2).
    for (int i = 1; i < 4; ++i) {
      uint64_t read = s.supersteps[i].ops.bytes_read;
      if (bytes < fixed || i == 1) {
        EXPECT_GE(read, edges);
      } else {
        EXPECT_LT(read, edges * 9 / 10);
        EXPECT_GT(read, edges / 4);
      }
    }
  }
}

// After each superstep s, buffer s % 2 holds exactly the state after s:
// read it back and compare with what the algorithm set, resident and paged.
void CheckCheckpoints(CacheConfig cache) {
  TestGraph t = Generated(store::GeneratorParams::Kind::kUrand, 13);
  auto c = Start(t.graph, 2, 4096, false, cache);
  compute::Engine& e = c->engine();
  compute::State<int32_t>& d = e.NewState<int32_t>("test.depth", -1);
  std::vector<int32_t> expect(d.size(), -1);
  for (int step = 1; step <= 6; ++step) {
    const std::vector<int32_t> before = expect;
    // Any operation places the array and opens the superstep.
    ASSERT_TRUE(e.VertexMap(e.NewFrontier(), [](store::VertexId) {}).ok());
    // Scattered writes, some pages touched again in later steps.
    for (uint32_t k = 0; k < 300; ++k) {
      uint32_t v = (k * 7919u * step + step * 131u) % d.size();
      d.Set(0, v, step);
      expect[v] = step;
    }
    ASSERT_TRUE(e.EndSuperstep().ok());
    std::vector<int32_t> remote(d.size());
    ASSERT_TRUE(d.ReadVersion(e.superstep(), 0, d.size(), remote.data()).ok());
    ASSERT_EQ(remote, expect) << "after step " << step;
    // The other buffer still holds the version before, whole (commits and
    // write-backs send only changed lines: what each buffer lacks).
    if (step > 1) {
      ASSERT_TRUE(
          d.ReadVersion(e.superstep() - 1, 0, d.size(), remote.data()).ok());
      ASSERT_EQ(remote, before) << "the version before step " << step;
    }
    for (uint32_t v = 0; v < d.size(); v += 97) {
      ASSERT_EQ(d.Get(1, v), expect[v]);
    }
  }
}

TEST(EngineTest, StateVersionsAreConsistentCheckpoints) {
  CheckCheckpoints({});  // resident
  // 2 threads x 4 KiB blocks + 16 pages each of cache: the 32 KiB array
  // cannot be resident, and only a few of its pages fit at once.
  CheckCheckpoints(
      {2 * 4096 + 2 * 16 * 4096 + 8 * 4096, compute::CachePolicy::kGraphAware});
  CheckCheckpoints({200 * 4096, compute::CachePolicy::kPageLru});
}

// Commits (and a paged array's write-backs) send the 64-byte lines
// changed in this superstep or the one before (what the buffer lacks), not
// their 4 KiB pages: a superstep that changes 30 scattered vertices writes
// at most `sends` times 60 lines (a paged line may also go out with an
// eviction), each run padded by at most kGapLines merged unchanged ones,
// and the other buffer keeps the version before.
void CheckCommitsWriteChangedLines(CacheConfig cache, bool paged, int sends) {
  TestGraph t = Generated(store::GeneratorParams::Kind::kUrand, 16);
  auto c = Start(t.graph, 2, 4096, false, cache);
  compute::Engine& e = c->engine();
  compute::State<int32_t>& d = e.NewState<int32_t>("test.depth", -1);
  std::vector<int32_t> expect(d.size(), -1);
  constexpr uint64_t kLine = compute::StateArrayBase::kLineBytes;
  for (int step = 1; step <= 8; ++step) {
    const std::vector<int32_t> before = expect;
    ASSERT_TRUE(e.VertexMap(e.NewFrontier(), [](store::VertexId) {}).ok());
    ASSERT_EQ(d.resident(), !paged);
    for (uint32_t k = 0; k < 30; ++k) {
      uint32_t v = (k * 7919u * step + step * 131u) % d.size();
      d.Set(0, v, step);
      expect[v] = step;
    }
    ASSERT_TRUE(e.EndSuperstep().ok());
    const uint64_t written = e.stats().supersteps.back().ops.bytes_written;
    // The barrier's counter is 8 bytes; the rest is lines.
    EXPECT_LE(written, 8 + sends * 2 * 30 *
                               (1 + compute::StateArrayBase::kGapLines) * kLine)
        << "step " << step;
    EXPECT_GE(written, 30 * sizeof(int32_t)) << "step " << step;
    EXPECT_LT(written, 30 * 4096 / 4) << "step " << step;
    std::vector<int32_t> remote(d.size());
    ASSERT_TRUE(d.ReadVersion(e.superstep(), 0, d.size(), remote.data()).ok());
    ASSERT_EQ(remote, expect) << "after step " << step;
    if (step > 1) {
      ASSERT_TRUE(
          d.ReadVersion(e.superstep() - 1, 0, d.size(), remote.data()).ok());
      ASSERT_EQ(remote, before) << "the version before step " << step;
    }
  }
}

TEST(EngineTest, ResidentCommitsWriteChangedLinesNotPages) {
  CheckCommitsWriteChangedLines({}, /*paged=*/false, /*sends=*/1);
}

TEST(EngineTest, PagedWriteBacksSendChangedLinesNotPages) {
  // A few pages of cache for a 64-page array: evictions mid-superstep.
  CheckCommitsWriteChangedLines(
      {2 * 4096 + 2 * 16 * 4096 + 8 * 4096, compute::CachePolicy::kGraphAware},
      /*paged=*/true, /*sends=*/2);
}

// The claim filter (a paged kClaimed array, graph-aware, one compute node):
// BFS level by level pages none of the depths in (claims and "unset?" tests
// are local bits, claims on pages away are logged and written at commit),
// each finished superstep's buffer holds its whole version and the other
// buffer the one before, and other writes to the same array (a Set back to
// the initial value, reads that fetch pages and merge the logged claims
// into them) keep it exact. Without those writes the depths are BFS's.
void CheckClaimFilter(store::GeneratorParams::Kind kind, int threads,
                      bool meddle) {
  SCOPED_TRACE(testing::Message()
               << "threads " << threads << ", meddle " << meddle);
  TestGraph t = Generated(kind, 14);
  const uint64_t n = t.graph.num_vertices();
  // Block buffers (one + a prefetch window of 2 per worker), the page
  // minimum and 8 pages more: the 64 KiB of depths cannot be resident.
  auto c = Start(t.graph, threads, 4096, false,
                 {uint64_t(threads) * (3 + 16) * 4096 + 8 * 4096,
                  compute::CachePolicy::kGraphAware});
  compute::Engine& e = c->engine();
  auto& d = e.NewState<int32_t>("test.depth", -1, compute::CacheHint::kClaimed);
  store::VertexId source = 0;
  while (t.graph.out.neighbors(source).empty()) ++source;
  std::vector<int32_t> expect(n, -1);
  expect[source] = 0;
  ASSERT_TRUE(e.VertexMap(e.FrontierOf(source), [&](store::VertexId v) {
                 d.Set(v, 0);
               }).ok());
  ASSERT_FALSE(d.resident());
  ASSERT_TRUE(d.filtered());
  compute::Frontier f = e.FrontierOf(source);
  int32_t level = 0;
  uint64_t max_claims = 0;
  while (!f.empty()) {
    SCOPED_TRACE(testing::Message() << "level " << level);
    const std::vector<int32_t> before =
        level == 0 ? std::vector<int32_t>(n, -1) : expect;
    absl::StatusOr<compute::Frontier> next = e.EdgeMap<compute::Claim>(
        f, store::Direction::kOut, compute::Mode::kAuto, d,
        [&](store::VertexId, store::VertexId, auto) { return level + 1; },
        compute::AllVertices());
    ASSERT_TRUE(next.ok()) << next.status();
    const uint64_t next_claims = next->vertices().size();
    for (store::VertexId v : next->vertices()) {
      ASSERT_EQ(expect[v], -1) << "vertex " << v << " claimed twice";
      expect[v] = level + 1;
    }
    if (meddle && level % 2 == 1) {
      // Every element read (pages fetched, logged claims merged), and some
      // of this level's claims undone: their bits must say unset again.
      std::atomic<uint64_t> wrong{0};
      ASSERT_TRUE(e.VertexMap([&](store::VertexId v) {
                     if (d.Get(v) != expect[v]) ++wrong;
                   }).ok());
      EXPECT_EQ(wrong.load(), 0u);
      for (store::VertexId v : next->vertices()) {
        if (v % 7 == 0) {
          d.Set(0, v, -1);
          expect[v] = -1;
        }
      }
    }
    ASSERT_TRUE(e.EndSuperstep().ok());
    const compute::SuperstepStats& step = e.stats().supersteps.back();
    // The source's page, fetched by its Set, at most, while the level's
    // claims fit the log (its share of the bound: 4 bits per element, 128
    // bytes per entry at most); past that, claims page their pages in.
    if (!meddle && next_claims <= n / 256) {
      EXPECT_LE(step.cache.misses, level == 0 ? 1u : 0u);
    }
    max_claims = std::max(max_claims, next_claims);
    std::vector<int32_t> remote(n);
    ASSERT_TRUE(d.ReadVersion(e.superstep(), 0, n, remote.data()).ok());
    ASSERT_EQ(remote, expect) << "after level " << level;
    ASSERT_TRUE(d.ReadVersion(e.superstep() - 1, 0, n, remote.data()).ok());
    ASSERT_EQ(remote, before) << "the version before level " << level;
    for (store::VertexId v = 0; v < n; v += 61) {
      ASSERT_EQ(d.Unset(0, v), expect[v] == -1) << "vertex " << v;
    }
    f = *std::move(next);
    ++level;
  }
  // Levels both within the log's share and past it.
  EXPECT_GT(max_claims, n / 256);
  if (!meddle) {
    absl::StatusOr<std::vector<int32_t>> ref = reference::Bfs(t.graph, source);
    ASSERT_TRUE(ref.ok());
    EXPECT_EQ(*e.Result(d), *ref);
  }
}

TEST(EngineTest, ClaimFilterKeepsDepthPagesAwayAndVersionsWhole) {
  for (int threads : {1, 2, 3}) {
    CheckClaimFilter(store::GeneratorParams::Kind::kUrand, threads, false);
    CheckClaimFilter(store::GeneratorParams::Kind::kKron, threads, false);
    CheckClaimFilter(store::GeneratorParams::Kind::kUrand, threads, true);
    CheckClaimFilter(store::GeneratorParams::Kind::kKron, threads, true);
  }
}

// A paged array's initial value is written from a short pattern, again and
// again: every element of both versions must start with its bytes, in
// arrays longer than the pattern (64 KiB), for every element size.
template <typename T>
void CheckPagedInitialValue(T initial) {
  TestGraph t = Generated(store::GeneratorParams::Kind::kUrand, 18);
  auto c = Start(
      t.graph, 2, 4096, false,
      {2 * 4096 + 2 * 16 * 4096 + 8 * 4096, compute::CachePolicy::kGraphAware});
  compute::Engine& e = c->engine();
  compute::State<T>& s = e.NewState<T>("test.initial", initial);
  ASSERT_GT(s.size() * sizeof(T), 2u * 64 * 1024);
  ASSERT_TRUE(e.VertexMap(e.NewFrontier(), [](store::VertexId) {}).ok());
  ASSERT_FALSE(s.resident());
  ASSERT_TRUE(e.EndSuperstep().ok());
  for (int version : {e.superstep(), e.superstep() - 1}) {
    std::vector<T> remote(s.size());
    ASSERT_TRUE(s.ReadVersion(version, 0, s.size(), remote.data()).ok());
    const auto wrong = std::find_if(remote.begin(), remote.end(),
                                    [&](T x) { return x != initial; });
    EXPECT_EQ(wrong, remote.end())
        << "version " << version << ": element " << (wrong - remote.begin());
  }
}

TEST(EngineTest, PagedArraysStartWithTheirInitialValue) {
  CheckPagedInitialValue<int32_t>(-1);
  CheckPagedInitialValue<int64_t>(0x0102030405060708);
  CheckPagedInitialValue<double>(0.25);
  CheckPagedInitialValue<uint8_t>(0xa5);
}
// Answers must not depend on the cache size or policy: from the smallest
// cache the job accepts to an unbounded one, graph-aware and page_lru.
TEST(EngineTest, EveryCacheSizeAndPolicyGivesTheSameAnswers) {
  TestGraph t = Generated(store::GeneratorParams::Kind::kKron, 11);
  store::LayoutOptions layout;
  layout.block_size = 4096;
  uint64_t store_bytes =
      store::BuildStoreImage(t.graph, layout)->bytes().size();
  Results reference = RunAllAndCheck(t.graph, 2);
  for (auto policy :
       {compute::CachePolicy::kGraphAware, compute::CachePolicy::kPageLru}) {
    // 2 workers x (3 block buffers: one + a prefetch window of 2) + 16
    // pages each, plus a page of slack.
    const uint64_t minimum = 2 * 3 * 4096 + 2 * 16 * 4096 + 4096;
    for (uint64_t bytes :
         {minimum, std::max(minimum, store_bytes / 20), store_bytes}) {
      SCOPED_TRACE(::testing::Message()
                   << (policy == compute::CachePolicy::kPageLru ? "page_lru"
                                                                : "graph_aware")
                   << " cache " << bytes);
      Results r = RunAllAndCheck(t.graph, 2, 4096, false, {bytes, policy});
      ExpectSameResults(reference, r);
    }
  }
}

// Compressed blocks decode to the same graph on every path that reads
// them: whole-block scans, the hot-block cache, segments of a sparse push
// (small caches) and page_lru's pages.
TEST(EngineTest, CompressedBlocksGiveTheSameAnswers) {
  // Large enough that the smallest cache holds a fraction of the store.
  TestGraph t = Generated(store::GeneratorParams::Kind::kKron, 14);
  Results reference = RunAllAndCheck(t.graph, 2);
  store::LayoutOptions layout;
  layout.block_size = 4096;
  layout.compress = true;
  const uint64_t store_bytes =
      store::BuildStoreImage(t.graph, layout)->bytes().size();
  const uint64_t minimum = 2 * 3 * 4096 + 2 * 16 * 4096 + 4096;
  for (auto policy :
       {compute::CachePolicy::kGraphAware, compute::CachePolicy::kPageLru}) {
    for (uint64_t bytes : {minimum, compute::MemoryBudget::kUnlimited}) {
      SCOPED_TRACE(::testing::Message()
                   << (policy == compute::CachePolicy::kPageLru ? "page_lru"
                                                                : "graph_aware")
                   << " cache " << bytes << " of a " << store_bytes
                   << "-byte store");
      Results r = RunAllAndCheck(t.graph, 2, 4096, false,
                                 {bytes, policy, /*compress=*/true});
      if (bytes == minimum) {
        ASSERT_GT(store_bytes, 4 * bytes);
      }
      ExpectSameResults(reference, r);
    }
  }
}

TEST(EngineTest, TheCacheBoundHolds) {
  // kron:14's PageRank state (~320 KB) does not fit a 300 KB cache.
  TestGraph t = Generated(store::GeneratorParams::Kind::kKron, 14);
  for (auto policy :
       {compute::CachePolicy::kGraphAware, compute::CachePolicy::kPageLru}) {
    const uint64_t bound = 300 * 1024;
    auto c = Start(t.graph, 2, 4096, false, {bound, policy});
    ASSERT_TRUE(algorithms::PageRank(c->engine(), 3, 0).ok());
    ASSERT_TRUE(algorithms::Bfs(c->engine(), 0).ok());
    c->engine().Finish();
    EXPECT_LE(c->engine().stats().cache_peak_bytes, bound);
    EXPECT_GT(c->engine().stats().cache_peak_bytes, bound / 2);
  }
  // Below the job's minimum: one clear error, not a crash.
  store::LayoutOptions layout;
  auto image = store::BuildStoreImage(t.graph, layout);
  compute::EngineOptions eo;
  eo.threads = 2;
  eo.cache_bytes = 10000;
  auto c = EmbeddedCluster::Start(*std::move(image), eo);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("minimum"), std::string::npos);
}

TEST(EngineTest, BadSourceAndSsspPreconditions) {
  TestGraph t = Generated(store::GeneratorParams::Kind::kKron, 8);
  auto c = Start(t.graph, 1);
  EXPECT_EQ(algorithms::Bfs(c->engine(), 1u << 20).status().code(),
            absl::StatusCode::kInvalidArgument);
  store::EdgeList e;
  e.num_vertices = 3;
  e.Add(0, 1, 5);
  e.Add(1, 2, -2);
  auto g = store::BuildGraph(std::move(e), {});
  auto neg = Start(*g, 1);
  auto s = algorithms::Sssp(neg->engine(), 0, false);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("non-negative"), std::string::npos);
}

// Delta-stepping's buckets (a width of 8x the heaviest arc): zero-weight
// arcs that keep a bucket busy for several supersteps, arcs heavier than
// a bucket that skip empty ones, a long chain whose distances drop many
// times, and unreachable vertices; the distances are the reference's on
// 1 and 2 threads, with and without a cache bound.
TEST(EngineTest, DeltaSteppingMatchesTheReferenceAcrossBuckets) {
  store::EdgeList e;
  e.num_vertices = 3000;
  for (store::VertexId v = 0; v + 1 < 2000; ++v) {
    e.Add(v, v + 1, static_cast<store::Weight>(v % 7 == 0 ? 0 : 1 + v % 5));
    e.Add(v, (v * 31 + 17) % 2000,
          static_cast<store::Weight>((v * 2654435761u) % 1000));
  }
  // A weight of 1000 makes the bucket 8000 wide; the jumps cross several.
  e.Add(5, 1500, 40000);
  e.Add(1500, 2500, 0);
  e.Add(2500, 2600, 123456);
  auto g = store::BuildGraph(std::move(e), {});
  ASSERT_TRUE(g.ok()) << g.status();
  const auto want = reference::Sssp(*g, 0, false);
  ASSERT_TRUE(want.ok()) << want.status();
  for (int threads : {1, 2}) {
    for (uint64_t bytes :
         {compute::MemoryBudget::kUnlimited, uint64_t{160 << 10}}) {
      SCOPED_TRACE(absl::StrCat(threads, " threads, cache ", bytes));
      CacheConfig cache;
      cache.bytes = bytes;
      auto c = Start(*g, threads, 4096, false, cache);
      auto got = algorithms::Sssp(c->engine(), 0, false);
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(*got, *want);
      EXPECT_EQ((*got)[2999], algorithms::kInfDistance);
      EXPECT_EQ((*got)[2600], (*want)[2500] + 123456);
    }
  }
}

}  // namespace
}  // namespace dmg

namespace dmg {
namespace {

// The vertex-program API's own promises, beyond the algorithms.

// Push and pull are two ways to run one EdgeMap: the same updates, the
// same changed vertices, for every named update.
TEST(VertexProgramTest, PushAndPullAgree) {
  TestGraph t = Generated(store::GeneratorParams::Kind::kKron, 11);
  std::vector<store::VertexId> seeds = {1, 5, 77, 300, 1500};
  auto run = [&](compute::Mode mode) {
    auto c = Start(t.graph, 2, 256);  // tiny blocks: split vertices
    compute::Engine& e = c->engine();
    auto& dist = e.NewState<int64_t>("dist", 1000000);
    auto& claimed = e.NewState<int32_t>("claimed", -1);
    auto& sum = e.NewState<int64_t>("sum", 0);
    compute::Frontier f = e.NewFrontier();
    for (store::VertexId v : seeds) f.Add(0, v);
    f.Seal();
    EXPECT_TRUE(
        e.VertexMap(f, [&](store::VertexId v) { dist.Set(v, v); }).ok());
    auto min = e.EdgeMap<compute::Min>(
        f, store::Direction::kOut, mode, dist,
        // Not reading dist itself: a frontier vertex may also be a target.
        [&](store::VertexId u, store::VertexId, store::Weight w) {
          return int64_t{u} + w;
        },
        compute::AllVertices());
    auto claim = e.EdgeMap<compute::Claim>(
        f, store::Direction::kIn, mode, claimed,
        [](store::VertexId, store::VertexId, store::Weight) { return 7; },
        [](store::VertexId v) { return v % 3 != 0; });
    auto add = e.EdgeMap<compute::Add>(
        f, store::Direction::kOut, mode, sum,
        [](store::VertexId u, store::VertexId, store::Weight) {
          return int64_t{u} + 1;
        },
        compute::AllVertices());
    EXPECT_TRUE(min.ok() && claim.ok() && add.ok());
    auto sorted = [](const compute::Frontier& x) {
      std::vector<store::VertexId> v(x.vertices().begin(), x.vertices().end());
      std::sort(v.begin(), v.end());
      return v;
    };
    return std::make_tuple(*e.Result(dist), *e.Result(claimed), *e.Result(sum),
                           sorted(*min), sorted(*claim), sorted(*add));
  };
  auto push = run(compute::Mode::kPush);
  auto pull = run(compute::Mode::kPull);
  EXPECT_EQ(std::get<0>(push), std::get<0>(pull));
  EXPECT_EQ(std::get<1>(push), std::get<1>(pull));
  EXPECT_EQ(std::get<2>(push), std::get<2>(pull));
  EXPECT_EQ(std::get<3>(push), std::get<3>(pull));
  EXPECT_EQ(std::get<4>(push), std::get<4>(pull));
  EXPECT_EQ(std::get<5>(push), std::get<5>(pull));
  // Independently: the sums are those of a plain loop over the arcs.
  std::vector<int64_t> expect(t.graph.num_vertices(), 0);
  for (store::VertexId u : seeds) {
    for (store::VertexId v : t.graph.out.neighbors(u)) expect[v] += u + 1;
  }
  EXPECT_EQ(std::get<2>(push), expect);
}

// A pull Claim takes, for each candidate, the first frontier member among
// its in-neighbours in adjacency order: the engine reads a prefix of each
// candidate's adjacency first and the rest only when needed, also across the
// pieces of split vertices (tiny blocks), with and without a cache bound.
// Checked against a plain loop over the CSR; and the bottom-up step reads
// fewer bytes than the blocks holding the candidates.
TEST(VertexProgramTest, PullClaimTakesTheFirstFrontierNeighbour) {
  TestGraph t = Generated(store::GeneratorParams::Kind::kKron, 11);
  const uint64_t n = t.graph.num_vertices();
  for (uint32_t block_size : {256u, 4096u}) {
    for (uint64_t cache :
         {compute::MemoryBudget::kUnlimited, uint64_t{256 * 1024}}) {
      SCOPED_TRACE(testing::Message()
                   << "blocks " << block_size << ", cache " << cache);
      // Sparse (most candidates read on past their prefix) and dense.
      uint64_t bytes[2] = {0, 0};
      for (int every : {97, 3}) {
        auto c = Start(t.graph, 2, block_size, false, CacheConfig{cache});
        compute::Engine& e = c->engine();
        auto& parent = e.NewState<int64_t>("parent", -1);
        compute::Frontier f = e.NewFrontier();
        for (store::VertexId v = 0; v < n; v += every) f.Add(0, v);
        f.Seal();
        auto claimed = e.EdgeMap<compute::Claim>(
            f, store::Direction::kOut, compute::Mode::kPull, parent,
            [](store::VertexId u, store::VertexId, store::Weight) {
              return int64_t{u};
            },
            [](store::VertexId v) { return v % 5 != 0; });
        ASSERT_TRUE(claimed.ok()) << claimed.status();
        std::vector<int64_t> expect(n, -1);
        for (store::VertexId v = 0; v < n; ++v) {
          if (v % 5 == 0) continue;
          for (store::VertexId u : t.graph.in.neighbors(v)) {
            if (u % every == 0) {
              expect[v] = u;
              break;
            }
          }
        }
        EXPECT_EQ(*e.Result(parent), expect) << "every " << every;
        EXPECT_EQ(e.stats().supersteps.back().direction, "pull");
        bytes[every == 3] = e.stats().supersteps.back().ops.bytes_read;
      }
      // With a dense frontier most candidates stop within their prefix.
      EXPECT_LT(bytes[1] * 4, bytes[0] * 3);
    }
  }
}

// kAuto's direction for a Claim: pull once the frontier's edges and
// vertices pass m/20 (Ligra's rule), and then keep pulling while the
// frontier holds more than n/18 vertices (GAPBS's beta), even when its
// edges fall under m/20; push again once it is narrow and shrinking.
TEST(VertexProgramTest, AutoClaimKeepsPullingWhileTheFrontierIsWide) {
  TestGraph t = Generated(store::GeneratorParams::Kind::kKron, 11);
  const uint64_t n = t.graph.num_vertices();
  const uint64_t m = t.graph.out.num_arcs();
  // The lowest-degree vertices: a frontier of them stays under m/20.
  std::vector<store::VertexId> by_degree(n);
  std::iota(by_degree.begin(), by_degree.end(), 0);
  std::stable_sort(by_degree.begin(), by_degree.end(), [&](auto a, auto b) {
    return t.graph.out.neighbors(a).size() < t.graph.out.neighbors(b).size();
  });
  auto frontier_of = [&](compute::Engine& e, uint64_t count, uint64_t every) {
    compute::Frontier f = e.NewFrontier();
    for (uint64_t i = 0; i < count; ++i) f.Add(0, by_degree[i * every % n]);
    f.Seal();
    return f;
  };
  const uint64_t wide = n / 10, narrow = n / 40;
  uint64_t wide_edges = 0;
  for (uint64_t i = 0; i < wide; ++i) {
    wide_edges += t.graph.out.neighbors(by_degree[i]).size();
  }
  ASSERT_LT(wide + wide_edges, m / 20) << "the wide frontier must stay under "
                                          "Ligra's threshold by its edges";
  // One Claim EdgeMap a superstep, into a fresh array each (every vertex a
  // candidate); returns the direction chosen, and the work and threshold
  // it weighed.
  auto step = [&](compute::Engine& e, const compute::Frontier& f,
                  const std::string& name) {
    auto& parent = e.NewState<int64_t>(name, -1);
    auto r = e.EdgeMap<compute::Claim>(
        f, store::Direction::kOut, compute::Mode::kAuto, parent,
        [](store::VertexId u, store::VertexId, store::Weight) {
          return int64_t{u};
        },
        compute::AllVertices());
    EXPECT_TRUE(r.ok()) << r.status();
    const compute::SuperstepStats s = e.stats().supersteps.back();
    EXPECT_TRUE(e.EndSuperstep().ok());
    return s.direction + " " + std::to_string(s.auto_work) + "/" +
           std::to_string(s.auto_threshold);
  };
  auto c = Start(t.graph, 2, 256);
  compute::Engine& e = c->engine();
  // A first push caches the degrees (the choice then weighs the frontier's
  // real edges, not the average degree's).
  std::string d = step(e, frontier_of(e, 1, 1), "first");
  EXPECT_EQ(d.substr(0, 5), "push ") << d;
  // Every vertex: far past m/20.
  d = step(e, frontier_of(e, n, 1), "a");
  EXPECT_EQ(d.substr(0, 5), "pull ") << d;
  d = step(e, frontier_of(e, wide, 1), "b");
  EXPECT_EQ(d.substr(0, 5), "pull ") << d;
  d = step(e, frontier_of(e, narrow, 1), "c");
  EXPECT_EQ(d.substr(0, 5), "push ") << d;
  // After a push, the wide frontier is a push again (Ligra's rule: its
  // degrees, cached since the first pull, keep it under m/20).
  d = step(e, frontier_of(e, wide, 1), "d");
  EXPECT_EQ(d.substr(0, 5), "push ") << d;
}

// Reductions are combined in a fixed order: bit-identical doubles for any
// thread count and cache bound, and Gather sees whole split vertices.
TEST(VertexProgramTest, ReductionsAreDeterministic) {
  TestGraph t = Generated(store::GeneratorParams::Kind::kKron, 12);
  std::vector<double> sums, gathers;
  for (int threads : {1, 2, 4}) {
    for (uint64_t cache :
         {compute::MemoryBudget::kUnlimited,
          static_cast<uint64_t>(4 * 4096 + threads * 20 * 4096)}) {
      auto c = Start(t.graph, threads, 256, false, {cache});
      compute::Engine& e = c->engine();
      auto s = e.Reduce<compute::Add>(
          [](store::VertexId v) { return 1.0 / (v + 1.0); });
      ASSERT_TRUE(s.ok());
      sums.push_back(*s);
      auto g = e.Gather<compute::Add>(
          store::Direction::kIn,
          [](store::VertexId u, store::VertexId, store::Weight) {
            return 1.0 / (u + 3.0);
          },
          [&](store::VertexId v, double x) { return x * (v % 7); });
      ASSERT_TRUE(g.ok()) << g.status();
      gathers.push_back(*g);
    }
  }
  for (size_t i = 1; i < sums.size(); ++i) {
    EXPECT_EQ(sums[i], sums[0]);
    EXPECT_EQ(gathers[i], gathers[0]);
  }
  double expect = 0;
  for (store::VertexId v = 0; v < t.graph.num_vertices(); ++v) {
    double x = 0;
    for (store::VertexId u : t.graph.in.neighbors(v)) x += 1.0 / (u + 3.0);
    expect += x * (v % 7);
  }
  EXPECT_NEAR(gathers[0], expect, 1e-9 * expect);
}

TEST(VertexProgramTest, TriangleCountNeedsASymmetricStore) {
  store::EdgeList e;
  e.num_vertices = 3;
  e.Add(0, 1);
  e.Add(1, 2);
  e.Add(0, 2);
  auto g = store::BuildGraph(std::move(e), {});
  ASSERT_TRUE(g.ok());
  auto c = Start(*g, 1);
  auto tc = algorithms::TriangleCount(c->engine());
  EXPECT_EQ(tc.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(tc.status().message().find("--symmetrize"), std::string::npos);
}

}  // namespace
}  // namespace dmg

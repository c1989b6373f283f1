#include "algorithms/registry.h"

#include <algorithm>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "algorithms/algorithms.h"
#include "reference/reference.h"

namespace dmg::algorithms {

namespace {

// "1 iteration", "2 iterations": the summary line's words.
std::string Counted(uint64_t n, absl::string_view what) {
  return absl::StrCat(n, " ", what, n == 1 ? absl::string_view("")
                                           : absl::string_view("s"));
}

// A figure over a result, reduced with Op over the vertices this node
// counts (ResultRange: its own range where each node holds only that) and
// then over the nodes. `of(v, value)` gives vertex v's term.
template <typename Op, typename T, typename Of>
absl::StatusOr<int64_t> OverResult(compute::Engine& e,
                                   const std::vector<T>& values, Of of) {
  int64_t mine = Op::template Identity<int64_t>();
  const auto [begin, end] = e.ResultRange();
  for (VertexId v = begin; v < end && v < values.size(); ++v) {
    mine = Op::Combine(mine, static_cast<int64_t>(of(v, values[v])));
  }
  if (!e.ResultSplit()) return mine;
  return e.AllReduce<Op>(mine);
}

// Exact comparison of per-vertex values of type T.
template <typename T>
reference::Mismatch Exact(const Values& expected, const Values& actual,
                          const Params&) {
  return reference::CompareExact(std::get<std::vector<T>>(expected),
                                 std::get<std::vector<T>>(actual));
}

// How far (L1) a PageRank run may be from the double reference.
// - double: the same arithmetic, summed in another order: far below 1e-9.
// - float: rounding to 24 bits at every step; and a run with a tolerance
//   may stop one iteration before or after the reference, whose last
//   step moved the scores by about that tolerance (L1).
double PageRankL1Tolerance(const Params& p) {
  if (p.precision == Precision::kDouble) return 1e-9;
  return kFloatPageRankL1 + 2 * p.tolerance;
}

template <typename T>
absl::StatusOr<Values> Wrap(absl::StatusOr<T> r) {
  if (!r.ok()) return r.status();
  return Values(*std::move(r));
}

std::vector<Algorithm> MakeRegistry() {
  std::vector<Algorithm> r;
  r.push_back({
      .name = "pagerank",
      .help = "PageRank scores (damping 0.85) until the L1 change < "
              "--tolerance or --max_iters",
      .flags = {"max_iters", "tolerance", "precision"},
      .run = [](compute::Engine& e,
                const Params& p) -> absl::StatusOr<Outcome> {
        DMG_ASSIGN_OR_RETURN(
            PageRankResult pr,
            PageRank(e, p.max_iters, p.tolerance, p.precision));
        const bool converged = pr.last_l1 < p.tolerance;
        Outcome o{std::move(pr.scores),
                  absl::StrFormat("%s, last L1 change %.3g%s",
                                  Counted(pr.iterations, "iteration"),
                                  pr.last_l1,
                                  // With --tolerance=0 a fixed number of
                                  // iterations was asked for.
                                  converged || p.tolerance == 0
                                      ? ""
                                      : " (not converged: stopped at "
                                        "--max_iters)")};
        o.counts = {{"iterations", pr.iterations}};
        o.converged = converged;
        return o;
      },
      .reference = [](const store::Graph& g,
                      const Params& p) -> absl::StatusOr<Values> {
        DMG_ASSIGN_OR_RETURN(reference::PageRankResult pr,
                             reference::PageRank(g, p.max_iters, p.tolerance));
        return Values(std::move(pr.scores));
      },
      .compare =
          [](const Values& a, const Values& b, const Params& p) {
            return reference::CompareL1(std::get<std::vector<double>>(a),
                                        std::get<std::vector<double>>(b),
                                        PageRankL1Tolerance(p));
          },
  });
  r.push_back({
      .name = "bfs",
      .help = "depth of every vertex from --source (-1: unreachable)",
      .flags = {"source"},
      .sources = Sources::kOne,
      .run = [](compute::Engine& e,
                const Params& p) -> absl::StatusOr<Outcome> {
        DMG_ASSIGN_OR_RETURN(std::vector<int32_t> depth, Bfs(e, p.source));
        DMG_ASSIGN_OR_RETURN(
            const int64_t reached,
            OverResult<compute::Add>(
                e, depth, [](VertexId, int32_t d) { return d >= 0; }));
        Outcome o{std::move(depth), ""};
        o.detail = absl::StrFormat("source %d, %d reached", p.source, reached);
        o.counts = {{"reached", reached}};
        return o;
      },
      .reference =
          [](const store::Graph& g, const Params& p) {
            return Wrap(reference::Bfs(g, p.source));
          },
      .compare = Exact<int32_t>,
  });
  for (const bool afforest : {true, false}) {
    r.push_back({
        .name = afforest ? "cc" : "cc_lp",
        .help = afforest ? "weakly connected components: smallest vertex id "
                           "of each vertex's component (Afforest)"
                         : "the same by label propagation (as cc on several "
                           "compute nodes), for comparison",
        .flags = {},
        .run = [afforest](compute::Engine& e,
                          const Params&) -> absl::StatusOr<Outcome> {
          DMG_ASSIGN_OR_RETURN(
              std::vector<VertexId> label,
              afforest ? ConnectedComponents(e) : ConnectedComponentsLp(e));
          DMG_ASSIGN_OR_RETURN(
              const int64_t components,
              OverResult<compute::Add>(
                  e, label, [](VertexId v, VertexId l) { return l == v; }));
          Outcome o{std::move(label),
                    Counted(components, "component")};
          o.counts = {{"components", components}};
          return o;
        },
        .reference = [](const store::Graph& g,
                        const Params&) -> absl::StatusOr<Values> {
          return Values(reference::ConnectedComponents(g));
        },
        .compare = Exact<uint32_t>,
    });
  }
  r.push_back({
      .name = "sssp",
      .help = "shortest-path distance from --source over integer weights "
              "(inf: unreachable)",
      .flags = {"source", "unit_weights"},
      .sources = Sources::kOne,
      .run = [](compute::Engine& e,
                const Params& p) -> absl::StatusOr<Outcome> {
        DMG_ASSIGN_OR_RETURN(std::vector<int64_t> dist,
                             Sssp(e, p.source, p.unit_weights));
        DMG_ASSIGN_OR_RETURN(
            const int64_t reached,
            OverResult<compute::Add>(e, dist, [](VertexId, int64_t d) {
              return d != kInfDistance;
            }));
        Outcome o{std::move(dist), ""};
        o.detail = absl::StrFormat("source %d, %d reached", p.source, reached);
        o.counts = {{"reached", reached}};
        return o;
      },
      .reference =
          [](const store::Graph& g, const Params& p) {
            return Wrap(reference::Sssp(g, p.source, p.unit_weights));
          },
      .compare = Exact<int64_t>,
  });
  r.push_back({
      .name = "bc",
      .help = "betweenness centrality (Brandes, as GAPBS bc) from --source "
              "or --sources=K seeded picks, normalised by the largest",
      .flags = {"source", "sources", "source_seed"},
      .sources = Sources::kMany,
      .run = [](compute::Engine& e,
                const Params& p) -> absl::StatusOr<Outcome> {
        DMG_ASSIGN_OR_RETURN(std::vector<double> score, Bc(e, p.sources));
        Outcome o{std::move(score),
                  Counted(p.sources.size(), "source")};
        o.counts = {{"sources", static_cast<int64_t>(p.sources.size())}};
        return o;
      },
      .reference =
          [](const store::Graph& g, const Params& p) {
            return Wrap(reference::Bc(g, p.sources));
          },
      // Dependencies are summed in another order when pushed.
      .compare =
          [](const Values& a, const Values& b, const Params&) {
            return reference::CompareRelative(std::get<std::vector<double>>(a),
                                              std::get<std::vector<double>>(b),
                                              1e-9);
          },
  });
  r.push_back({
      .name = "tc",
      .help = "number of triangles, each counted once (undirected graphs: "
              "--symmetrize a directed one)",
      .flags = {},
      .run = [](compute::Engine& e, const Params&) -> absl::StatusOr<Outcome> {
        DMG_ASSIGN_OR_RETURN(uint64_t triangles, TriangleCount(e));
        Outcome o{triangles, Counted(triangles, "triangle")};
        o.counts = {{"triangles", static_cast<int64_t>(triangles)}};
        return o;
      },
      .reference =
          [](const store::Graph& g, const Params&) {
            return Wrap(reference::TriangleCount(g));
          },
      .compare =
          [](const Values& a, const Values& b, const Params&) {
            return reference::CompareCount(std::get<uint64_t>(a),
                                           std::get<uint64_t>(b));
          },
  });
  r.push_back({
      .name = "kcore",
      .help = "coreness of every vertex (k-core decomposition by peeling; "
              "undirected graphs: --symmetrize a directed one)",
      .flags = {},
      .run = [](compute::Engine& e, const Params&) -> absl::StatusOr<Outcome> {
        DMG_ASSIGN_OR_RETURN(std::vector<uint32_t> core, KCore(e));
        // 0 for a graph without vertices (Max's identity is the lowest).
        DMG_ASSIGN_OR_RETURN(
            int64_t largest,
            OverResult<compute::Max>(e, core,
                                     [](VertexId, uint32_t c) { return c; }));
        largest = std::max<int64_t>(largest, 0);
        Outcome o{std::move(core), absl::StrFormat("largest core %d", largest)};
        o.counts = {{"largest_core", largest}};
        return o;
      },
      .reference = [](const store::Graph& g,
                      const Params&) { return Wrap(reference::KCore(g)); },
      .compare = Exact<uint32_t>,
  });
  return r;
}

}  // namespace

const std::vector<Algorithm>& Registry() {
  static const std::vector<Algorithm>* registry =
      new std::vector<Algorithm>(MakeRegistry());
  return *registry;
}

const Algorithm* FindAlgorithm(std::string_view name) {
  for (const Algorithm& a : Registry()) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

std::string AlgorithmNames(std::string_view separator) {
  std::vector<std::string> names;
  for (const Algorithm& a : Registry()) names.push_back(a.name);
  return absl::StrJoin(names, std::string(separator));
}

absl::StatusOr<std::vector<VertexId>> PickSources(compute::Engine& engine,
                                                  int count, uint64_t seed) {
  const uint64_t n = engine.num_vertices();
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<uint64_t> pick(0, n == 0 ? 0 : n - 1);
  std::vector<VertexId> sources;
  // Vertices without out-arcs are skipped, as GAPBS does; give up when
  // none turns up in many tries (a graph without arcs).
  for (uint64_t tries = 0; static_cast<int>(sources.size()) < count;) {
    if (n == 0 || ++tries > 1000 + 100 * static_cast<uint64_t>(count)) {
      return absl::InvalidArgumentError(
          "cannot pick sources: no vertex with out-arcs found");
    }
    const auto v = static_cast<VertexId>(pick(rng));
    DMG_ASSIGN_OR_RETURN(uint64_t degree, engine.Degree(Direction::kOut, v));
    if (degree > 0) sources.push_back(v);
  }
  return sources;
}

}  // namespace dmg::algorithms

// PageRank, pull direction (DESIGN.md semantics):
//   score(v) = (1-d)/N + d * sum over in-neighbours u of score(u)/outdeg(u)
// with d = 0.85, start 1/N, dangling mass not redistributed, until the L1
// change is below the tolerance or max_iters iterations ran.
//
// Each iteration is one superstep: the contributions score(u)/outdeg(u)
// from the current scores, then every vertex gathers its in-neighbours'
// contributions, summed in Gather's fixed order (a long list in four
// chains: bit-identical for any thread count, cache or transport, and
// within rounding of a CSR loop's sum), and takes its new score.
// Contributions are read once per edge: the array to keep local.
//
// ScoreT is the precision (Precision): with float, scores, contributions
// and the gather's sums are floats, as GAPBS's ScoreT; the L1 change is
// summed in double either way.
#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "algorithms/algorithms.h"

namespace dmg::algorithms {

namespace {

template <typename ScoreT>
absl::StatusOr<PageRankResult> Run(Engine& engine, int max_iters,
                                   double tolerance) {
  const uint64_t n = engine.num_vertices();
  const ScoreT base = static_cast<ScoreT>((1.0 - kDamping) / n);
  const ScoreT damping = static_cast<ScoreT>(kDamping);
  auto& contrib = engine.NewState<ScoreT>("pagerank.contrib", 0,
                                          compute::CacheHint::kPerEdge);
  auto& score =
      engine.NewState<ScoreT>("pagerank.score", static_cast<ScoreT>(1.0 / n));
  auto& outdeg = engine.NewState<uint32_t>("pagerank.outdeg", 0);
  PageRankResult result;
  // The L1 change of the last iteration (none yet: go on).
  result.last_l1 = std::numeric_limits<double>::infinity();
  engine.Carry("pagerank.iterations", &result.iterations);
  engine.Carry("pagerank.l1", &result.last_l1);
  DMG_ASSIGN_OR_RETURN(const bool resumed, engine.Resume());
  if (!resumed) DMG_RETURN_IF_ERROR(engine.Degrees(Direction::kOut, outdeg));

  while (result.iterations < max_iters && !(result.last_l1 < tolerance)) {
    DMG_RETURN_IF_ERROR(engine.VertexMap([&](VertexId v) {
      const uint32_t d = outdeg.Get(v);
      contrib.Set(v,
                  d == 0 ? ScoreT{0} : score.Get(v) / static_cast<ScoreT>(d));
    }));
    auto finish = [&](VertexId v, ScoreT sum) {  // returns the L1 change
      const ScoreT next = base + damping * sum;
      const double change = std::fabs(double{next} - score.Get(v));
      score.Set(v, next);
      return change;
    };
    if (engine.GpuShareWanted()) {  // the GPU sums the range's first part
      DMG_ASSIGN_OR_RETURN(
          result.last_l1,
          engine.GatherSumOnGpu<ScoreT>(Direction::kIn, contrib, finish));
    } else {
      const auto c = contrib.reader();
      DMG_ASSIGN_OR_RETURN(
          result.last_l1,
          engine.Gather<compute::Add>(
              Direction::kIn, [c](VertexId u, VertexId, auto) { return c[u]; },
              finish));
    }
    ++result.iterations;
    DMG_RETURN_IF_ERROR(engine.EndSuperstep());
  }
  DMG_ASSIGN_OR_RETURN(std::vector<ScoreT> scores, engine.Result(score));
  if constexpr (std::is_same_v<ScoreT, double>) {
    result.scores = std::move(scores);
  } else {
    result.scores.assign(scores.begin(), scores.end());
  }
  return result;
}

}  // namespace

absl::StatusOr<PageRankResult> PageRank(Engine& engine, int max_iters,
                                        double tolerance, Precision precision) {
  return precision == Precision::kFloat
             ? Run<float>(engine, max_iters, tolerance)
             : Run<double>(engine, max_iters, tolerance);
}

}  // namespace dmg::algorithms

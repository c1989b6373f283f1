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
#include <cmath>
#include <limits>

#include "algorithms/algorithms.h"

namespace dmg::algorithms {

absl::StatusOr<PageRankResult> PageRank(Engine& engine, int max_iters,
                                        double tolerance) {
  const uint64_t n = engine.num_vertices();
  const double base = (1.0 - kDamping) / n;
  auto& contrib = engine.NewState<double>("pagerank.contrib", 0.0,
                                          compute::CacheHint::kPerEdge);
  auto& score = engine.NewState<double>("pagerank.score", 1.0 / n);
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
      contrib.Set(v, d == 0 ? 0.0 : score.Get(v) / d);
    }));
    const auto c = contrib.reader();
    DMG_ASSIGN_OR_RETURN(
        result.last_l1,
        engine.Gather<compute::Add>(
            Direction::kIn, [c](VertexId u, VertexId, auto) { return c[u]; },
            [&](VertexId v, double sum) {  // returns the L1 change
              const double next = base + kDamping * sum;
              const double change = std::fabs(next - score.Get(v));
              score.Set(v, next);
              return change;
            }));
    ++result.iterations;
    DMG_RETURN_IF_ERROR(engine.EndSuperstep());
  }
  DMG_ASSIGN_OR_RETURN(result.scores, engine.Result(score));
  return result;
}

}  // namespace dmg::algorithms

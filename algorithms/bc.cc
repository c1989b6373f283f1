// Betweenness centrality by Brandes' algorithm (J. Math. Sociol. 25(2),
// 2001) over out-edges, with the semantics of GAPBS's bc.cc: for each
// source, a breadth-first pass counts shortest paths level by level,
//   sigma(v) = sum of sigma(u) over in-neighbours u one level closer;
// then, from the deepest level up, each vertex's dependency
//   delta(v) = sum over successors w (depth(w) = depth(v) + 1) of
//              sigma(v) / sigma(w) * (1 + delta(w)),
// and every reached vertex (the source too, as GAPBS does) adds delta(v)
// to its score. Scores are summed over the sources (a repeated source
// counts again), then divided by the largest (left at zero if all are).
// Deterministic: path counts are whole numbers, added exactly in any order
// (below 2^53), and each dependency is gathered (pull) in adjacency order.
#include "algorithms/algorithms.h"

namespace dmg::algorithms {

absl::StatusOr<std::vector<double>> Bc(Engine& engine,
                                       std::span<const VertexId> sources) {
  if (sources.empty()) return absl::InvalidArgumentError("BC needs a source");
  for (VertexId s : sources) {
    DMG_RETURN_IF_ERROR(CheckSource(s, engine.num_vertices()));
  }
  using compute::CacheHint, compute::Mode, compute::Add;
  auto& depth = engine.NewState<int32_t>("bc.depth", -1);
  auto& sigma = engine.NewState<double>("bc.sigma", 0, CacheHint::kPerEdge);
  auto& delta = engine.NewState<double>("bc.delta", 0, CacheHint::kPerEdge);
  auto& score = engine.NewState<double>("bc.score", 0, CacheHint::kRare);
  for (VertexId source : sources) {
    std::vector<compute::Frontier> level;  // vertices by depth
    level.push_back(engine.FrontierOf(source));
    DMG_RETURN_IF_ERROR(engine.VertexMap(level[0], [&](VertexId v) {
      depth.Set(v, 0);
      sigma.Set(v, 1);
    }));
    for (int32_t d = 0; !level[d].empty(); ++d) {
      DMG_ASSIGN_OR_RETURN(
          compute::Frontier next,
          engine.EdgeMap<Add>(
              level[d], Direction::kOut, Mode::kAuto, sigma,
              [&](VertexId u, VertexId, auto) { return sigma.Get(u); },
              [&](VertexId v) { return depth.Get(v) == -1; }));
      DMG_RETURN_IF_ERROR(
          engine.VertexMap(next, [&](VertexId v) { depth.Set(v, d + 1); }));
      DMG_RETURN_IF_ERROR(engine.EndSuperstep());
      level.push_back(std::move(next));
    }
    for (int32_t d = static_cast<int32_t>(level.size()) - 2; d >= 0; --d) {
      // Along in-edges from the successors at depth d + 1.
      DMG_RETURN_IF_ERROR(
          engine
              .EdgeMap<Add>(
                  level[d + 1], Direction::kIn, Mode::kPull, delta,
                  [&](VertexId w, VertexId v, auto) {
                    return sigma.Get(v) / sigma.Get(w) * (1 + delta.Get(w));
                  },
                  [&](VertexId v) { return depth.Get(v) == d; })
              .status());
      DMG_RETURN_IF_ERROR(engine.VertexMap(level[d], [&](VertexId v) {
        score.Set(v, score.Get(v) + delta.Get(v));
      }));
      DMG_RETURN_IF_ERROR(engine.EndSuperstep());
    }
    for (const compute::Frontier& f : level) {  // ready for the next source
      DMG_RETURN_IF_ERROR(engine.VertexMap(f, [&](VertexId v) {
        depth.Set(v, -1);
        sigma.Set(v, 0);
        delta.Set(v, 0);
      }));
    }
  }
  DMG_ASSIGN_OR_RETURN(
      double largest,
      engine.Reduce<compute::Max>([&](VertexId v) { return score.Get(v); }));
  if (largest > 0) {
    DMG_RETURN_IF_ERROR(engine.VertexMap(
        [&](VertexId v) { score.Set(v, score.Get(v) / largest); }));
  }
  return engine.Result(score);
}

}  // namespace dmg::algorithms

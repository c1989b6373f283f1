// Single-source shortest paths with integer weights: frontier Bellman-Ford.
// Each superstep relaxes the out-arcs of every vertex whose distance dropped
// in the previous one, with an atomic min on the local distance copy. With
// non-negative weights this reaches the exact distances; unreachable
// vertices keep kInfDistance ("inf" in outputs).
#include "algorithms/algorithms.h"
#include "algorithms/util.h"

namespace dmg::algorithms {

absl::StatusOr<std::vector<int64_t>> Sssp(Engine& engine, VertexId source,
                                          bool unit_weights) {
  const uint64_t n = engine.num_vertices();
  if (absl::Status s = CheckSource(source, n); !s.ok()) return s;
  if (!engine.weighted() && !unit_weights) {
    return absl::InvalidArgumentError(
        "SSSP needs a weighted graph (.wel, DIMACS .gr, weighted .mtx) or "
        "--unit_weights");
  }
  if (engine.weighted() && !unit_weights && engine.graph().min_weight() < 0) {
    return absl::InvalidArgumentError(
        "SSSP needs non-negative weights; this graph has weight " +
        std::to_string(engine.graph().min_weight()));
  }
  auto dist_or = engine.NewState<int64_t>("sssp.dist", kInfDistance);
  if (!dist_or.ok()) return dist_or.status();
  compute::StateArray<int64_t>& dist = **dist_or;
  compute::Frontier frontier(n, engine.threads()), next(n, engine.threads());
  dist.Set(0, source, 0);
  frontier.Add(0, source);
  frontier.Seal();

  while (!frontier.empty()) {
    engine.BeginSuperstep("push", frontier.size());
    absl::Status s = engine.ForEachFrontierVertex(
        store::Direction::kOut, frontier,
        [&](int w, VertexId u, std::span<const VertexId> out,
            std::span<const store::Weight> weight) {
          const int64_t du = dist.Get(w, u);
          for (size_t k = 0; k < out.size(); ++k) {
            int64_t nd = du + (unit_weights ? 1 : weight[k]);
            if (dist.Min(w, out[k], nd)) next.Add(w, out[k]);
          }
        });
    if (!s.ok()) return s;
    next.Seal();
    if (absl::Status e = engine.EndSuperstep(); !e.ok()) return e;
    frontier.Clear();
    std::swap(frontier, next);
  }
  return dist.ReadResult(engine.superstep());
}

}  // namespace dmg::algorithms

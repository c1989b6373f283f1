// Single-source shortest paths with integer weights: frontier Bellman-Ford.
// Each superstep offers dist(u) + w(u, v) along the out-arcs of every vertex
// whose distance dropped in the previous one; targets keep the smallest
// (Min). With non-negative weights this reaches the exact distances;
// unreachable vertices keep kInfDistance ("inf" in outputs).
#include "algorithms/algorithms.h"

namespace dmg::algorithms {

absl::StatusOr<std::vector<int64_t>> Sssp(Engine& engine, VertexId source,
                                          bool unit_weights) {
  DMG_RETURN_IF_ERROR(CheckSource(source, engine.num_vertices()));
  if (!engine.weighted() && !unit_weights) {
    return absl::InvalidArgumentError(
        "SSSP needs a weighted graph (.wel, DIMACS .gr, weighted .mtx) or "
        "--unit_weights");
  }
  if (engine.weighted() && !unit_weights && engine.min_weight() < 0) {
    return absl::InvalidArgumentError(
        "SSSP needs non-negative weights; this graph has weight " +
        std::to_string(engine.min_weight()));
  }
  auto& dist = engine.NewState<int64_t>("sssp.dist", kInfDistance);
  compute::Frontier frontier = engine.FrontierOf(source);
  engine.Carry("sssp.frontier", &frontier);
  DMG_ASSIGN_OR_RETURN(const bool resumed, engine.Resume());
  if (!resumed) {
    DMG_RETURN_IF_ERROR(
        engine.VertexMap(frontier, [&](VertexId v) { dist.Set(v, 0); }));
  }
  while (!frontier.empty()) {
    DMG_ASSIGN_OR_RETURN(
        frontier, engine.EdgeMap<compute::Min>(
                      frontier, Direction::kOut, compute::Mode::kAuto, dist,
                      [&](VertexId u, VertexId, store::Weight w) {
                        return dist.Get(u) + (unit_weights ? 1 : w);
                      },
                      compute::AllVertices()));
    DMG_RETURN_IF_ERROR(engine.EndSuperstep());
  }
  return engine.Result(dist);
}

}  // namespace dmg::algorithms

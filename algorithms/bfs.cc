// Breadth-first search: the depth of every vertex from the source, -1 when
// unreachable. Each superstep claims the unvisited out-neighbours of the
// frontier for the next level (Claim: the first writer wins). The engine
// picks push (top-down: read the frontier's out-edges) or pull (bottom-up:
// unvisited vertices read their in-edges and stop at the first frontier
// member) per level, as direction-optimising BFS (Beamer et al., SC'12)
// does; the depths are the same either way.
#include "algorithms/algorithms.h"

namespace dmg::algorithms {

absl::StatusOr<std::vector<int32_t>> Bfs(Engine& engine, VertexId source) {
  DMG_RETURN_IF_ERROR(CheckSource(source, engine.num_vertices()));
  // Claimed: paged, a bit per vertex answers "visited?" (CacheHint).
  auto& depth =
      engine.NewState<int32_t>("bfs.depth", -1, compute::CacheHint::kClaimed);
  compute::Frontier frontier = engine.FrontierOf(source);
  int32_t level = 0;
  engine.Carry("bfs.frontier", &frontier);
  engine.Carry("bfs.level", &level);
  DMG_ASSIGN_OR_RETURN(const bool resumed, engine.Resume());
  if (!resumed) {
    DMG_RETURN_IF_ERROR(
        engine.VertexMap(frontier, [&](VertexId v) { depth.Set(v, 0); }));
  }
  while (!frontier.empty()) {
    DMG_ASSIGN_OR_RETURN(
        frontier, engine.EdgeMap<compute::Claim>(
                      frontier, Direction::kOut, compute::Mode::kAuto, depth,
                      [&](VertexId, VertexId, auto) { return level + 1; },
                      compute::AllVertices()));
    ++level;
    DMG_RETURN_IF_ERROR(engine.EndSuperstep());
  }
  return engine.Result(depth);
}

}  // namespace dmg::algorithms

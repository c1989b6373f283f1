// Weakly connected components by min-label propagation: every vertex
// starts with its own id; each superstep, every vertex whose label dropped
// offers it to its neighbours in both directions (arcs count as
// undirected), which keep the smallest (Min). At the fixpoint each vertex
// holds the smallest id of its component, whatever the order of updates.
#include "algorithms/algorithms.h"

namespace dmg::algorithms {

absl::StatusOr<std::vector<VertexId>> ConnectedComponents(Engine& engine) {
  auto& label = engine.NewState<VertexId>("cc.label", 0);
  // Every vertex starts active, labelled with its own id.
  DMG_ASSIGN_OR_RETURN(compute::Frontier frontier,
                       engine.VertexFilter([&](VertexId v) {
                         label.Set(v, v);
                         return true;
                       }));
  while (!frontier.empty()) {
    compute::Frontier next = engine.NewFrontier();
    for (Direction along : {Direction::kOut, Direction::kIn}) {
      DMG_ASSIGN_OR_RETURN(
          compute::Frontier changed,
          engine.EdgeMap<compute::Min>(
              frontier, along, compute::Mode::kAuto, label,
              [&](VertexId u, VertexId, auto) { return label.Get(u); },
              compute::AllVertices()));
      next.Merge(changed);
    }
    DMG_RETURN_IF_ERROR(engine.EndSuperstep());
    frontier = std::move(next);
  }
  return engine.Result(label);
}

}  // namespace dmg::algorithms

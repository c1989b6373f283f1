// Weakly connected components by min-label propagation (`--algo=cc_lp`;
// `cc` is Afforest, cc.cc, and on several compute nodes cc_forest.cc, which
// runs this loop where most arcs cross between nodes):
// every vertex starts with its own id; each superstep, every vertex whose
// label dropped offers it to its neighbours in both directions (arcs count
// as undirected), which keep the smallest (Min). At the fixpoint each vertex
// holds the smallest id of its component, whatever the order of updates.
//
// Each superstep ends with one pointer jump (Shiloach-Vishkin's shortcut):
// a vertex whose label dropped to l takes l's own label when that is lower.
// A label is always the id of a vertex of the same component and labels only
// fall, so the fixpoint is the same; but a label travels its own chain
// instead of waiting for the wave. Road-NY: 610 -> 538 supersteps, remote
// bytes written 143 -> 58 MB on one node, 2 x 2 nodes 343 -> 197 MB in all
// (docs/performance-history.md).
#include "algorithms/algorithms.h"

namespace dmg::algorithms {

absl::StatusOr<compute::Frontier> OfferLabels(
    Engine& engine, const compute::Frontier& frontier,
    std::span<const Direction> along, compute::Mode mode,
    compute::State<VertexId>& label) {
  compute::Frontier dropped = engine.NewFrontier();
  for (Direction d : along) {
    DMG_ASSIGN_OR_RETURN(
        compute::Frontier changed,
        engine.EdgeMap<compute::Min>(
            frontier, d, mode, label,
            [&](VertexId u, VertexId, auto) { return label.Get(u); },
            compute::AllVertices()));
    DMG_RETURN_IF_ERROR(engine.Union(dropped, changed));
  }
  return dropped;
}

absl::Status PropagateLabels(Engine& engine, compute::State<VertexId>& label,
                             compute::Frontier& frontier) {
  constexpr Direction kBoth[] = {Direction::kOut, Direction::kIn};
  while (!frontier.empty()) {
    DMG_ASSIGN_OR_RETURN(
        compute::Frontier next,
        OfferLabels(engine, frontier, kBoth, compute::Mode::kAuto, label));
    // A jumped vertex is in `next` already (its label dropped).
    DMG_RETURN_IF_ERROR(engine.VertexMap(next, [&](VertexId v) {
      const VertexId l = label.Get(v);
      const VertexId ll = label.Get(l);
      if (ll < l) label.Set(v, ll);
    }));
    frontier = std::move(next);
    DMG_RETURN_IF_ERROR(engine.EndSuperstep());
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<VertexId>> ConnectedComponentsLp(Engine& engine) {
  auto& label = engine.NewState<VertexId>("cc.label", 0);
  compute::Frontier frontier = engine.NewFrontier();
  engine.Carry("cc.frontier", &frontier);
  DMG_ASSIGN_OR_RETURN(const bool resumed, engine.Resume());
  if (!resumed) {
    // Every vertex starts active, labelled with its own id.
    DMG_ASSIGN_OR_RETURN(frontier, engine.VertexFilter([&](VertexId v) {
      label.Set(v, v);
      return true;
    }));
  }
  DMG_RETURN_IF_ERROR(PropagateLabels(engine, label, frontier));
  return engine.Result(label);
}

}  // namespace dmg::algorithms

// Weakly connected components by min-label propagation: every vertex starts
// with its own id; each superstep, every vertex whose label dropped pushes it
// to its neighbours in both directions (arcs count as undirected) with an
// atomic min. At the fixpoint each vertex holds the smallest id of its
// component, independent of thread timing.
#include "algorithms/algorithms.h"
#include "algorithms/util.h"

namespace dmg::algorithms {

absl::StatusOr<std::vector<VertexId>> ConnectedComponents(Engine& engine) {
  const uint64_t n = engine.num_vertices();
  auto label_or = engine.NewState<VertexId>("cc.label", 0);
  if (!label_or.ok()) return label_or.status();
  compute::StateArray<VertexId>& label = **label_or;
  compute::Frontier frontier(n, engine.threads()), next(n, engine.threads());
  engine.ParallelFor(n, [&](int w, uint64_t b, uint64_t e) {
    for (uint64_t v = b; v < e; ++v) {
      label.Set(w, static_cast<VertexId>(v), static_cast<VertexId>(v));
      frontier.Add(w, static_cast<VertexId>(v));
    }
  });
  frontier.Seal();

  while (!frontier.empty()) {
    engine.BeginSuperstep("push", frontier.size());
    auto push = [&](int w, VertexId u, std::span<const VertexId> nbrs, auto) {
      VertexId mine = label.Get(w, u);
      for (VertexId v : nbrs) {
        if (label.Min(w, v, mine)) next.Add(w, v);
      }
    };
    for (store::Direction d : {store::Direction::kOut, store::Direction::kIn}) {
      if (absl::Status s = engine.ForEachFrontierVertex(d, frontier, push);
          !s.ok()) {
        return s;
      }
    }
    next.Seal();
    if (absl::Status e = engine.EndSuperstep(); !e.ok()) return e;
    frontier.Clear();
    std::swap(frontier, next);
  }
  return label.ReadResult(engine.superstep());
}

}  // namespace dmg::algorithms

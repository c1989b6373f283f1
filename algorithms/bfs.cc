// Breadth-first search, push (top-down): depth of every vertex from the
// source, -1 when unreachable. Each superstep READs the out-blocks holding
// the frontier's adjacency and claims unvisited neighbours with a
// compare-and-swap on the depth array; claimed vertices form the next
// frontier. (Bottom-up steps arrive with the update coordinator.)
#include "algorithms/algorithms.h"
#include "algorithms/util.h"

namespace dmg::algorithms {

absl::StatusOr<std::vector<int32_t>> Bfs(Engine& engine, VertexId source) {
  const uint64_t n = engine.num_vertices();
  if (absl::Status s = CheckSource(source, n); !s.ok()) return s;
  auto depth_or = engine.NewState<int32_t>("bfs.depth", -1);
  if (!depth_or.ok()) return depth_or.status();
  compute::StateArray<int32_t>& depth = **depth_or;
  compute::Frontier frontier(n, engine.threads()), next(n, engine.threads());
  depth.Set(0, source, 0);
  frontier.Add(0, source);
  frontier.Seal();

  for (int32_t level = 0; !frontier.empty(); ++level) {
    engine.BeginSuperstep("push", frontier.size());
    absl::Status s = engine.ForEachFrontierVertex(
        store::Direction::kOut, frontier,
        [&](int w, VertexId, std::span<const VertexId> out, auto) {
          for (VertexId v : out) {
            if (depth.Get(w, v) == -1 &&
                depth.CompareExchange(w, v, -1, level + 1)) {
              next.Add(w, v);
            }
          }
        });
    if (!s.ok()) return s;
    next.Seal();
    if (absl::Status e = engine.EndSuperstep(); !e.ok()) return e;
    frontier.Clear();
    std::swap(frontier, next);
  }
  return depth.ReadResult(engine.superstep());
}

}  // namespace dmg::algorithms

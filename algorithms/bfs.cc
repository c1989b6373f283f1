// Breadth-first search, push (top-down): depth of every vertex from the
// source, -1 when unreachable. Each superstep READs the out-blocks holding
// the frontier's adjacency and claims unvisited neighbours with a
// compare-and-swap on the local depth copy; claimed vertices form the next
// frontier and their pages of the depth array go back to the memory node.
// (Bottom-up steps arrive with the update coordinator.)
#include "algorithms/algorithms.h"
#include "algorithms/util.h"

namespace dmg::algorithms {

absl::StatusOr<std::vector<int32_t>> Bfs(Engine& engine, VertexId source) {
  const uint64_t n = engine.num_vertices();
  if (source >= n) {
    return absl::InvalidArgumentError("--source " + std::to_string(source) +
                                      " is out of range: the graph has " +
                                      std::to_string(n) + " vertices");
  }
  auto depth_or = engine.NewState<int32_t>("bfs.depth", -1);
  if (!depth_or.ok()) return depth_or.status();
  compute::StateArray<int32_t>& depth = **depth_or;
  compute::Frontier frontier(n, engine.threads()), next(n, engine.threads());
  engine.AddLocalStateBytes(2 * (n + 7) / 8);
  depth[source] = 0;
  depth.MarkDirty(source);
  frontier.Add(0, source);
  frontier.Seal();

  for (int32_t level = 0; !frontier.empty(); ++level) {
    engine.BeginSuperstep("push", frontier.size());
    absl::Status s = engine.ForEachFrontierVertex(
        store::Direction::kOut, frontier,
        [&](int w, VertexId, std::span<const VertexId> out, auto) {
          for (VertexId v : out) {
            int32_t unvisited = -1;
            if (AtomicLoad(depth[v]) == -1 &&
                std::atomic_ref<int32_t>(depth[v]).compare_exchange_strong(
                    unvisited, level + 1)) {
              next.Add(w, v);
              depth.MarkDirty(v);
            }
          }
        });
    if (!s.ok()) return s;
    next.Seal();
    if (absl::Status e = engine.EndSuperstep(); !e.ok()) return e;
    frontier.Clear();
    std::swap(frontier, next);
  }
  return ReadBack(engine, depth);
}

}  // namespace dmg::algorithms

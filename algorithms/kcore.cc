// k-core decomposition by peeling (Batagelj and Zaversnik, 2003; as
// Ligra's KCore): the coreness of v is the largest k such that v belongs to
// the k-core, the largest subgraph whose vertices all have degree >= k.
// For k = 0, 1, ... (skipping to the smallest remaining degree), vertices
// whose remaining degree is <= k are peeled with coreness k; each peeled
// vertex adds one to its remaining neighbours' count of peeled neighbours
// (Add), and those left with degree <= k are peeled in the next superstep.
// Undirected graphs only (stored symmetric). Exact.
#include <algorithm>

#include "algorithms/algorithms.h"

namespace dmg::algorithms {

absl::StatusOr<std::vector<uint32_t>> KCore(Engine& engine) {
  if (!engine.symmetric()) {
    return absl::InvalidArgumentError(
        "k-core needs an undirected graph; this one is directed: load it "
        "with --symmetrize");
  }
  constexpr uint32_t kLeft = std::numeric_limits<uint32_t>::max();
  auto& degree = engine.NewState<uint32_t>("kcore.degree", 0);
  auto& peeled = engine.NewState<uint32_t>("kcore.peeled", 0);
  auto& core = engine.NewState<uint32_t>("kcore.core", kLeft);
  DMG_RETURN_IF_ERROR(engine.Degrees(Direction::kOut, degree));
  auto remaining = [&](VertexId v) { return degree.Get(v) - peeled.Get(v); };
  auto left = [&](VertexId v) { return core.Get(v) == kLeft; };
  for (uint32_t k = 0;; ++k) {
    DMG_ASSIGN_OR_RETURN(const uint32_t lowest,
                         engine.Reduce<compute::Min>([&](VertexId v) {
                           return left(v) ? remaining(v) : kLeft;
                         }));
    if (lowest == kLeft) break;  // every vertex is peeled
    k = std::max(k, lowest);
    DMG_ASSIGN_OR_RETURN(compute::Frontier peel,
                         engine.VertexFilter([&](VertexId v) {
                           return left(v) && remaining(v) <= k;
                         }));
    while (!peel.empty()) {
      DMG_RETURN_IF_ERROR(
          engine.VertexMap(peel, [&](VertexId v) { core.Set(v, k); }));
      DMG_ASSIGN_OR_RETURN(
          compute::Frontier touched,
          engine.EdgeMap<compute::Add>(
              peel, Direction::kOut, compute::Mode::kAuto, peeled,
              [](VertexId, VertexId, auto) { return 1u; }, left));
      DMG_ASSIGN_OR_RETURN(peel, engine.VertexFilter(touched, [&](VertexId v) {
        return remaining(v) <= k;
      }));
      DMG_RETURN_IF_ERROR(engine.EndSuperstep());
    }
  }
  return engine.Result(core);
}

}  // namespace dmg::algorithms

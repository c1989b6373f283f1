// Vertex programs over the compute engine. Each is one short file:
//   pagerank.cc  pull, dense: every vertex sums its in-neighbours'
//                contributions; double-buffered scores on the memory node
//   bfs.cc       push, sparse: top-down frontier expansion
//   cc.cc        push, sparse: min-label propagation over both directions
//   sssp.cc      push, sparse: frontier Bellman-Ford with atomic min
// Semantics are DESIGN.md's; reference/ holds the independent yardstick.
// Results are the final version of the state array, read back from the
// memory node.
#ifndef DMG_ALGORITHMS_ALGORITHMS_H_
#define DMG_ALGORITHMS_ALGORITHMS_H_

#include <cstdint>
#include <limits>
#include <vector>

#include "absl/status/statusor.h"
#include "compute_node/engine.h"

namespace dmg::algorithms {

using compute::Engine;
using store::VertexId;

inline constexpr double kDamping = 0.85;
inline constexpr int64_t kInfDistance = std::numeric_limits<int64_t>::max();

struct PageRankResult {
  std::vector<double> scores;
  int iterations = 0;
  double last_l1 = 0;
};

absl::StatusOr<PageRankResult> PageRank(Engine& engine, int max_iters,
                                        double tolerance);
absl::StatusOr<std::vector<int32_t>> Bfs(Engine& engine, VertexId source);
absl::StatusOr<std::vector<VertexId>> ConnectedComponents(Engine& engine);
absl::StatusOr<std::vector<int64_t>> Sssp(Engine& engine, VertexId source,
                                          bool unit_weights);

}  // namespace dmg::algorithms

#endif  // DMG_ALGORITHMS_ALGORITHMS_H_

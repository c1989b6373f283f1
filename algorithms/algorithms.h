// Vertex programs over the vertex-program API (compute_node/
// vertex_program.h). Each is one short file:
//   pagerank.cc  every vertex gathers its in-neighbours' contributions
//   bfs.cc       direction-optimising frontier expansion (Claim)
//   cc.cc        Afforest: neighbour sampling, link, compress (one compute
//                node)
//   cc_forest.cc  components on several compute nodes: local forests, then
//                labels across the cut
//   cc_lp.cc     min-label propagation over both directions (Min)
//   sssp.cc      delta-stepping (Min); Bellman-Ford for unit weights
//   bc.cc        Brandes betweenness centrality from given sources
//   tc.cc        triangle counting, each triangle once, degree-ordered
//   kcore.cc     k-core decomposition by peeling (Add)
// Semantics are DESIGN.md's; reference/ holds the independent yardstick.
// Results are the final version of the state array, read back from the
// memory node.
#ifndef DMG_ALGORITHMS_ALGORITHMS_H_
#define DMG_ALGORITHMS_ALGORITHMS_H_

#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "algorithms/util.h"
#include "compute_node/vertex_program.h"

namespace dmg::algorithms {

using compute::Engine;
using store::Direction;
using store::VertexId;

inline constexpr double kDamping = 0.85;
inline constexpr int64_t kInfDistance = std::numeric_limits<int64_t>::max();

struct PageRankResult {
  std::vector<double> scores;
  int iterations = 0;
  double last_l1 = 0;
};

// The type PageRank keeps scores and contributions in (and sums them in).
// kFloat is GAPBS's ScoreT: half the state bytes and half the loads per
// edge of the gather; kDouble is bit-for-bit the double reference's
// arithmetic. `dmg run` defaults to float (--precision); the library to
// double, which its exact tests compare at 1e-9.
enum class Precision { kFloat, kDouble };

absl::StatusOr<PageRankResult> PageRank(
    Engine& engine, int max_iters, double tolerance,
    Precision precision = Precision::kDouble);
absl::StatusOr<std::vector<int32_t>> Bfs(Engine& engine, VertexId source);
// Weakly connected components, each vertex labelled with the smallest id in
// its component: Afforest (cc.cc) on one compute node, local forests and
// labels across the cut (cc_forest.cc) on several; ConnectedComponentsLp is
// label propagation always (cc_lp.cc).
absl::StatusOr<std::vector<VertexId>> ConnectedComponents(Engine& engine);
absl::StatusOr<std::vector<VertexId>> ConnectedComponentsOnNodes(
    Engine& engine);
absl::StatusOr<std::vector<VertexId>> ConnectedComponentsLp(Engine& engine);
// Label propagation's loop (cc_lp.cc) from `frontier`, until no label drops.
absl::Status PropagateLabels(Engine& engine, compute::State<VertexId>& label,
                             compute::Frontier& frontier);
// One round of it: every frontier vertex offers its label along each
// direction (Min); the vertices whose label dropped.
absl::StatusOr<compute::Frontier> OfferLabels(
    Engine& engine, const compute::Frontier& frontier,
    std::span<const Direction> along, compute::Mode mode,
    compute::State<VertexId>& label);
absl::StatusOr<std::vector<int64_t>> Sssp(Engine& engine, VertexId source,
                                          bool unit_weights);
// Scores normalised by the largest (all zero if no source reaches any
// other vertex). Sources may repeat; each counts.
absl::StatusOr<std::vector<double>> Bc(Engine& engine,
                                       std::span<const VertexId> sources);
// Needs a symmetric store (loaded with --symmetrize when directed).
absl::StatusOr<uint64_t> TriangleCount(Engine& engine);
// Coreness of every vertex; needs a symmetric store.
absl::StatusOr<std::vector<uint32_t>> KCore(Engine& engine);

}  // namespace dmg::algorithms

#endif  // DMG_ALGORITHMS_ALGORITHMS_H_

// Independent in-memory reference implementations of the algorithms.
// Every DMG engine result is checked against these (dmg run --verify, the
// tests, the benchmarks), so they work on the plain in-memory Graph and share
// no code with the engines.
//
// Semantics (../shared/DESIGN.md, "Semantics every backend must agree on"):
//   PageRank  d = 0.85, N = vertices, every score starts at 1/N. One
//             iteration computes, for every v,
//               new(v) = (1-d)/N + d * sum_{in-neighbours u} old(u)/outdeg(u)
//             (dangling mass is NOT redistributed), then
//             L1 = sum_v |new(v) - old(v)| and iterations += 1; it stops when
//             L1 < tolerance or iterations == max_iters. The scores are the
//             last `new`. Double precision.
//   BFS       depth from the source along out-arcs; source 0, unreachable -1.
//   CC        weakly connected components (arcs taken as undirected): every
//             vertex gets the smallest vertex id of its component.
//   SSSP      non-negative int32 weights, int64 distance from the source along
//             out-arcs; unreachable kInfDistance (printed "inf").
//   BC        as GAPBS bc.cc: Brandes over out-arcs (unweighted) from each
//             given source; every vertex reached, the source included, adds
//             its dependency delta to its score; summed over the sources, then
//             divided by the largest score (all zeros stay zeros). Double
//             precision (GAPBS keeps scores in float).
//   TC        triangles of an undirected graph, each counted once.
//
// Two families: the plain functions (simple.cc) are sequential and written to
// be obviously right; fast:: (fast.cc) are parallel and optimized for the
// benchmarks and are tested against the plain ones. Results do not depend on
// the thread count (PageRank: bit-identical scores; only the final L1, a
// reduction, may differ in the last bits between thread counts).
#ifndef DMG_REFERENCE_REFERENCE_H_
#define DMG_REFERENCE_REFERENCE_H_

#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "store/graph.h"

namespace dmg::reference {

using store::VertexId;

inline constexpr double kDamping = 0.85;
inline constexpr int kDefaultMaxIters = 20;
inline constexpr double kDefaultTolerance = 1e-4;
// BFS depth of a vertex the source cannot reach.
inline constexpr int32_t kUnreached = -1;
// SSSP distance of a vertex the source cannot reach. Larger than any real
// distance: (2^31-1) * (2^32-2) < 2^63-1.
inline constexpr int64_t kInfDistance = std::numeric_limits<int64_t>::max();

struct PageRankResult {
  std::vector<double> scores;  // the last iteration's scores
  int iterations = 0;          // iterations performed (>= 1)
  double last_l1 = 0.0;        // L1 change of the last iteration
};

// ---- Precondition checks (simple.cc) ----
// Every function below runs these; engines may call them too so that their
// errors read the same.

// InvalidArgument unless max_iters >= 1.
absl::Status CheckPageRankArgs(int max_iters);
// InvalidArgument unless source < number of vertices.
absl::Status CheckSource(const store::Graph& graph, uint64_t source);
// InvalidArgument if the graph is unweighted and !unit_weights, or (when the
// stored weights are used) names the first arc with a negative weight.
absl::Status CheckSsspWeights(const store::Graph& graph, bool unit_weights);

// ---- Simple, sequential, obviously right (simple.cc) ----

// InvalidArgument if max_iters < 1.
absl::StatusOr<PageRankResult> PageRank(const store::Graph& graph,
                                        int max_iters = kDefaultMaxIters,
                                        double tolerance = kDefaultTolerance);

// InvalidArgument if source >= number of vertices.
absl::StatusOr<std::vector<int32_t>> Bfs(const store::Graph& graph,
                                         uint64_t source);

std::vector<VertexId> ConnectedComponents(const store::Graph& graph);

// Dijkstra. unit_weights: every arc weighs 1 (for unweighted graphs; stored
// weights, if any, are ignored). InvalidArgument if the graph is unweighted
// and !unit_weights, if a weight is negative, or if source is out of range.
absl::StatusOr<std::vector<int64_t>> Sssp(const store::Graph& graph,
                                          uint64_t source, bool unit_weights);

// Betweenness centrality as GAPBS bc.cc computes it. From each source s (in
// order, repeats counted again): a BFS along out-arcs gives depth d and the
// number of shortest paths sigma; then, deepest vertex first,
//   delta(v) = sum over out-neighbours w with d(w) = d(v)+1 of
//              sigma(v)/sigma(w) * (1 + delta(w))
// and score(v) += delta(v) for every vertex reached, the source too (its delta
// is the number of other vertices it reaches; textbook Brandes leaves the
// source out). Finally every score is divided by the largest; if that is 0
// (no source reaches anything) the scores stay 0, where GAPBS would divide
// 0/0. InvalidArgument if sources is empty or a source is out of range.
absl::StatusOr<std::vector<double>> Bc(const store::Graph& graph,
                                       std::span<const VertexId> sources);

// Number of triangles {a, b, c}, each counted once (as GAPBS tc.cc). The
// graph must be undirected, every arc u->v matched by v->u, and have no
// parallel arcs (the store removes them); InvalidArgument if an arc has no
// reverse, saying to load the graph with --symmetrize.
absl::StatusOr<uint64_t> TriangleCount(const store::Graph& graph);

// The coreness of every vertex: the largest k such that the vertex belongs
// to the k-core, the largest subgraph in which every vertex has degree >= k
// (isolated vertices: 0). Undirected graphs only, as TriangleCount.
absl::StatusOr<std::vector<uint32_t>> KCore(const store::Graph& graph);

// ---- Parallel, optimized (fast.cc) ----
// threads <= 0 means all cores. Same preconditions and results as above.
namespace fast {

// Pull with precomputed contributions old(u)/outdeg(u), summed per vertex in
// in-CSR order exactly as the simple version does, so scores are identical;
// the L1 reduction sums per-thread partials in thread order (deterministic for
// a given thread count).
absl::StatusOr<PageRankResult> PageRank(const store::Graph& graph,
                                        int max_iters, double tolerance,
                                        int threads);

// Frontier-based top-down BFS: per-thread next-frontier buffers, depth claimed
// by compare-exchange.
absl::StatusOr<std::vector<int32_t>> BfsTopDown(const store::Graph& graph,
                                                uint64_t source, int threads);

// Beamer's direction-optimizing BFS (switching rule as in GAPBS, alpha = 15,
// beta = 18), bottom-up steps over a frontier bitmap and the in-CSR.
absl::StatusOr<std::vector<int32_t>> BfsDirectionOptimizing(
    const store::Graph& graph, uint64_t source, int threads);

// Afforest (Sutton et al., as in GAPBS): neighbour sampling + lock-free
// union-find that always hooks the larger root under the smaller, so each
// final root is its component's smallest id.
std::vector<VertexId> ConnectedComponents(const store::Graph& graph,
                                          int threads);

}  // namespace fast

}  // namespace dmg::reference

#endif  // DMG_REFERENCE_REFERENCE_H_

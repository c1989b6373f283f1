// Turns an edge list into a cleaned graph (out- and in-CSR), in parallel.
#ifndef DMG_STORE_BUILD_GRAPH_H_
#define DMG_STORE_BUILD_GRAPH_H_

#include "absl/status/statusor.h"
#include "store/graph.h"

namespace dmg::store {

// Cleans and converts. Symmetrizes when options.symmetrize or
// edges.undirected. Adjacency lists come out sorted by target id; when
// parallel arcs are dropped the lightest weight is kept. threads <= 0 means
// all cores. The result does not depend on the thread count.
absl::StatusOr<Graph> BuildGraph(EdgeList edges, const CleanOptions& options,
                                 int threads = 0);

}  // namespace dmg::store

#endif  // DMG_STORE_BUILD_GRAPH_H_

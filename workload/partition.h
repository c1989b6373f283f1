// Stage 1 of the workload manager: one contiguous vertex range per compute
// node, balanced by a cost of edges and vertices (as Gemini does: a node's
// work is its edges plus alpha times its vertices).
//
// Boundaries fall on multiples of `grain` vertices (4096 in the engine): a
// 4 KiB page of any state array (elements of 1 to 8 bytes) and a Reduce
// chunk then belong to exactly one node, so no two nodes ever write the
// same page or partial. A store block that straddles a boundary is read by
// both neighbours, each processing its own vertices (one extra block per
// boundary and direction).
#ifndef DMG_WORKLOAD_PARTITION_H_
#define DMG_WORKLOAD_PARTITION_H_

#include <cstdint>
#include <span>
#include <vector>

#include "store/block_format.h"

namespace dmg::workload {

// Default weight of a vertex against an edge. Gemini uses 8(p-1) for p
// sockets; a compute node here touches each vertex's state about as often
// as one of its edges (one read of the state per edge scanned, one write per
// vertex), so vertices and edges cost about the same.
inline constexpr double kVertexCost = 1.0;

// Edges per grain-sized chunk of vertices, from the block directory of one
// direction (`num_arcs` arcs; a block's edges are the difference of its
// and the next block's first_edge), added into `edges` (resized to the
// number of chunks). A block's edges are spread over the chunks its
// vertices fall in, in proportion to its vertices.
void AddEdgesPerChunk(std::span<const store::DirectoryEntry> directory,
                      uint64_t num_vertices, uint64_t num_arcs, uint64_t grain,
                      std::vector<uint64_t>& edges);

// Splits [0, num_vertices) into `parts` contiguous ranges whose costs
// (edges + alpha * vertices) are as even as grain-aligned cuts allow.
// Returns parts + 1 ascending bounds, from 0 to num_vertices; a range may be
// empty when there are fewer chunks than parts.
std::vector<uint64_t> SplitRanges(std::span<const uint64_t> edges_per_chunk,
                                  uint64_t num_vertices, uint64_t grain,
                                  int parts, double alpha = kVertexCost);

}  // namespace dmg::workload

#endif  // DMG_WORKLOAD_PARTITION_H_

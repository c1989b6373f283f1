// Cuts a cleaned graph into the DM-friendly block layout and lays the result
// out as a store image (store/block_format.h has the bytes).
#ifndef DMG_STORE_LAYOUT_H_
#define DMG_STORE_LAYOUT_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "store/block_format.h"
#include "store/graph.h"
#include "store/store_image.h"

namespace dmg::store {

struct LayoutOptions {
  uint32_t block_size = kDefaultBlockSize;  // upper bound on a block's bytes
  // Blocks are striped round-robin over this many memory nodes so that a scan
  // draws bandwidth from all of them; the directory records the placement.
  uint32_t num_memory_nodes = 1;
  int threads = 0;  // <= 0: all cores
  // Delta + bit-packed blocks (store/block_codec.h): fewer bytes per edge to
  // hold and to move, a decode on the compute node.
  bool compress = false;
};

// One planned block of one direction (before bytes are written).
struct BlockPlan {
  VertexId first_vertex;
  uint32_t vertex_count;
  uint64_t first_edge;
  uint32_t edge_count;
  bool split_piece;
  uint32_t length;  // bytes of the block
};

// Greedy packing: consecutive vertices go into a block while it fits in
// block_size (plain or compressed, as the blocks will be written); a vertex
// too large for one block gets a run of split pieces.
std::vector<BlockPlan> PlanBlocks(const Csr& csr, uint32_t block_size,
                                  bool compress = false);

absl::StatusOr<StoreImage> BuildStoreImage(const Graph& graph,
                                           const LayoutOptions& options);

}  // namespace dmg::store

#endif  // DMG_STORE_LAYOUT_H_

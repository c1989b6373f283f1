// The compute node's view of the graph store: the superblock and the block
// directories, fetched once through the transport at bootstrap. This is the
// only graph index a compute node holds — O(blocks), not O(vertices). Blocks
// themselves are READ on demand by the engine.
#ifndef DMG_COMPUTE_NODE_REMOTE_GRAPH_H_
#define DMG_COMPUTE_NODE_REMOTE_GRAPH_H_

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "store/block_format.h"
#include "store/block_index.h"
#include "transport/transport.h"

namespace dmg::compute {

using store::Direction;
using store::DirectoryEntry;
using store::VertexId;

class RemoteGraph {
 public:
  // Reads the superblock at (node 0, store region, offset 0), checks it, then
  // reads and checks both directories.
  static absl::StatusOr<RemoteGraph> Open(transport::Endpoint& endpoint);

  uint64_t num_vertices() const { return sb_.num_vertices; }
  uint64_t num_arcs() const { return sb_.num_arcs; }
  bool weighted() const { return sb_.flags & store::kSuperblockFlagWeighted; }
  bool symmetric() const { return sb_.flags & store::kSuperblockFlagSymmetric; }
  // Blocks are delta + varint encoded (store/block_codec.h).
  bool compressed() const {
    return sb_.flags & store::kSuperblockFlagCompressed;
  }
  uint32_t block_size() const { return sb_.block_size; }
  // The superblock's checksum: which graph and layout the store holds.
  uint32_t superblock_crc() const { return sb_.crc32; }
  uint32_t num_memory_nodes() const { return sb_.num_memory_nodes; }
  int32_t min_weight() const { return sb_.min_weight; }
  int32_t max_weight() const { return sb_.max_weight; }

  std::span<const DirectoryEntry> directory(Direction d) const {
    return dir_[static_cast<int>(d)];
  }
  // The entries [first, last) of directory(d) that hold v
  // (store::FindBlocks, through the index: O(1) expected).
  std::pair<size_t, size_t> FindBlocks(Direction d, VertexId v) const {
    const int k = static_cast<int>(d);
    return index_[k].Find(dir_[k], v);
  }
  const store::BlockIndex& block_index(Direction d) const {
    return index_[static_cast<int>(d)];
  }
  // Remote location of a block: (node, region, offset within the region).
  struct Location {
    uint32_t node;
    uint32_t region;
    uint64_t offset;
  };
  Location Locate(Direction d, const DirectoryEntry& e) const {
    return {e.memory_node, transport::kStoreRegion,
            block_base_[static_cast<int>(d)][e.memory_node] + e.offset};
  }
  // Bytes of memory node `node`'s store region.
  uint64_t store_bytes(uint32_t node) const {
    auto [begin, end] = store::NodeSlice(sb_, node);
    return end - begin;
  }
  // Bytes of the whole store image (what --cache_fraction is a fraction of).
  uint64_t image_bytes() const { return sb_.image_size; }
  // (Its fingerprint: store::SourceOf, arc_digest.)
  const store::Superblock& superblock() const { return sb_; }
  // Bytes of directory held locally, with its index (reported separately
  // from the cache).
  uint64_t directory_bytes() const {
    return (dir_[0].size() + dir_[1].size()) * sizeof(DirectoryEntry) +
           index_[0].bytes() + index_[1].bytes();
  }

 private:
  store::Superblock sb_;
  std::vector<DirectoryEntry> dir_[2];
  store::BlockIndex index_[2];           // over dir_
  std::vector<uint64_t> block_base_[2];  // per memory node
};

}  // namespace dmg::compute

#endif  // DMG_COMPUTE_NODE_REMOTE_GRAPH_H_

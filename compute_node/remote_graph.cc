#include "compute_node/remote_graph.h"

#include <cstring>

#include "absl/strings/str_format.h"
#include "store/block_format.h"

namespace dmg::compute {

absl::StatusOr<RemoteGraph> RemoteGraph::Open(transport::Endpoint& ep) {
  RemoteGraph g;
  ep.Read(0, transport::kStoreRegion, 0, &g.sb_, sizeof(g.sb_));
  if (absl::Status s = ep.Flush(); !s.ok()) return s;
  const store::Superblock& sb = g.sb_;
  if (std::memcmp(sb.magic, store::kImageMagic, sizeof(sb.magic)) != 0) {
    // `dmg load` writes the superblock last, so this is also what a load
    // that failed or was stopped half way leaves.
    return absl::DataLossError(
        "memory node 0 holds no complete DMG store (no superblock): a `dmg "
        "load` into it failed or did not finish; run dmg load again");
  }
  uint32_t crc = store::Crc32(
      {reinterpret_cast<const std::byte*>(&sb), store::kSuperblockSize - 4});
  if (crc != sb.crc32) {
    return absl::DataLossError("remote superblock checksum mismatch");
  }
  if (sb.format_version > store::kFormatVersion) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "remote store format version %d is newer than this build (%d)",
        sb.format_version, store::kFormatVersion));
  }
  if (sb.num_regions > store::kMaxRegions || sb.num_memory_nodes == 0) {
    return absl::DataLossError("remote superblock fields out of range");
  }
  // Bytes of each node's blocks region, by direction: every block must
  // lie inside its own.
  std::vector<uint64_t> blocks_bytes[2];
  for (int d = 0; d < 2; ++d) {
    g.block_base_[d].assign(sb.num_memory_nodes, 0);
    blocks_bytes[d].assign(sb.num_memory_nodes, 0);
  }
  for (uint32_t i = 0; i < sb.num_regions; ++i) {
    const store::RegionEntry& r = sb.regions[i];
    auto kind = static_cast<store::RegionKind>(r.kind);
    for (int d = 0; d < 2; ++d) {
      auto dir = static_cast<Direction>(d);
      if (kind == store::BlocksKind(dir) &&
          r.memory_node < sb.num_memory_nodes) {
        // The node's store region starts at its slice of the image.
        g.block_base_[d][r.memory_node] =
            r.offset - store::NodeSlice(sb, r.memory_node).first;
        blocks_bytes[d][r.memory_node] = r.length;
      }
      if (kind == store::DirectoryKind(dir) && r.memory_node == 0) {
        if (r.length % sizeof(DirectoryEntry) != 0 ||
            r.length / sizeof(DirectoryEntry) != sb.num_blocks[d]) {
          return absl::DataLossError("remote directory has the wrong size");
        }
        g.dir_[d].resize(sb.num_blocks[d]);
        // READs are at most 1 GiB each; directories are far smaller.
        constexpr uint64_t kChunk = 1 << 30;
        auto* dst = reinterpret_cast<std::byte*>(g.dir_[d].data());
        for (uint64_t at = 0; at < r.length; at += kChunk) {
          ep.Read(0, transport::kStoreRegion, r.offset + at, dst + at,
                  static_cast<uint32_t>(std::min(kChunk, r.length - at)));
        }
        if (absl::Status s = ep.Flush(); !s.ok()) return s;
        if (store::Crc32({dst, r.length}) != r.crc32) {
          return absl::DataLossError("remote directory checksum mismatch");
        }
      }
    }
  }
  // The directory must tile the vertices (ParseBlock takes n from it) and
  // the edges in order (EntryEdges); the engine relies on both.
  for (int d = 0; d < 2; ++d) {
    uint64_t next = 0, last_edge = 0;
    for (size_t i = 0; i < g.dir_[d].size(); ++i) {
      const DirectoryEntry& e = g.dir_[d][i];
      const bool split = e.flags & store::kEntryFlagSplitPiece;
      bool cont = split && i > 0 &&
                  g.dir_[d][i - 1].first_vertex == e.first_vertex &&
                  (g.dir_[d][i - 1].flags & store::kEntryFlagSplitPiece);
      if ((cont ? e.first_vertex : next) != e.first_vertex ||
          e.vertex_count == 0 || (split && e.vertex_count != 1) ||
          e.memory_node >= sb.num_memory_nodes || e.length > sb.block_size ||
          e.length < sizeof(store::BlockHeader) ||
          e.offset > blocks_bytes[d][e.memory_node] ||
          e.length > blocks_bytes[d][e.memory_node] - e.offset ||
          e.first_edge < last_edge || e.first_edge > sb.num_arcs ||
          (i == 0 && e.first_edge != 0)) {
        return absl::DataLossError(
            absl::StrFormat("remote %s-directory is malformed at block %d",
                            d == 0 ? "out" : "in", i));
      }
      next = uint64_t{e.first_vertex} + e.vertex_count;
      last_edge = e.first_edge;
    }
    if (next != sb.num_vertices) {
      return absl::DataLossError("remote directory does not cover the graph");
    }
    g.index_[d] = store::BlockIndex(g.dir_[d], sb.num_vertices);
  }
  return g;
}

}  // namespace dmg::compute

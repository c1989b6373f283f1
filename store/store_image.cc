#include "store/store_image.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/parallel.h"
#include "glog/logging.h"
#include "store/block_codec.h"

namespace dmg::store {
absl::StatusOr<StoreImage> StoreImage::FromBuffer(AlignedBuffer buffer,
                                                  std::string_view source,
                                                  Validation validation) {
  StoreImage image(std::move(buffer));
  if (absl::Status s = image.ValidateSuperblock(source); !s.ok()) return s;
  if (absl::Status s = image.ValidateRegions(source); !s.ok()) return s;
  if (validation == Validation::kFull) {
    for (Direction d : {Direction::kOut, Direction::kIn}) {
      if (absl::Status s = image.ValidateDirection(source, d); !s.ok()) {
        return s;
      }
    }
  }
  return image;
}

absl::Status StoreImage::ValidateSuperblock(std::string_view source) const {
  if (buffer_.size() < kSuperblockSize) {
    return absl::DataLossError(absl::StrFormat(
        "%s: image truncated: %d bytes, smaller than the %d-byte superblock",
        source, buffer_.size(), kSuperblockSize));
  }
  const Superblock& sb = superblock();
  if (std::memcmp(sb.magic, kImageMagic, sizeof(kImageMagic)) != 0) {
    return absl::DataLossError(
        absl::StrFormat("%s: not a DMG store image (bad magic)", source));
  }
  uint32_t crc = Crc32({buffer_.data(), kSuperblockSize - 4});
  auto newer = [&](std::string_view maybe) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s: store format version %d is newer than this build supports "
        "(%d)%s; upgrade dmg or re-create the image",
        source, sb.format_version, kFormatVersion, maybe));
  };
  if (crc != sb.crc32) {
    // A newer format may checksum differently; say so rather than "corrupt".
    if (sb.format_version > kFormatVersion) {
      return newer(" or its superblock is corrupt");
    }
    return absl::DataLossError(absl::StrFormat(
        "%s: superblock checksum mismatch (stored %08x, computed %08x)", source,
        sb.crc32, crc));
  }
  if (sb.format_version > kFormatVersion) return newer("");
  if (sb.format_version == 0 || sb.superblock_size != kSuperblockSize ||
      sb.num_regions > kMaxRegions || sb.num_memory_nodes == 0 ||
      sb.block_size < kMinBlockSize || sb.block_size > kMaxBlockSize ||
      sb.num_vertices == 0 || sb.num_vertices - 1 > kMaxVertexId) {
    return absl::DataLossError(
        absl::StrFormat("%s: superblock fields out of range", source));
  }
  if ((sb.flags & kSuperblockFlagCompressed) && sb.format_version < 2) {
    return absl::DataLossError(absl::StrFormat(
        "%s: superblock says compressed blocks in a version %d image (they "
        "need version 2)",
        source, sb.format_version));
  }
  if (sb.image_size != buffer_.size()) {
    return absl::DataLossError(absl::StrFormat(
        "%s: image truncated or padded: superblock says %d bytes, found %d",
        source, sb.image_size, buffer_.size()));
  }
  return absl::OkStatus();
}

absl::Status StoreImage::ValidateRegions(std::string_view source) const {
  const Superblock& sb = superblock();
  for (const RegionEntry& r : regions()) {
    std::string_view name = RegionKindName(static_cast<RegionKind>(r.kind));
    if (name == "unknown" || r.memory_node >= sb.num_memory_nodes ||
        r.offset < kSuperblockSize || r.offset % kRegionAlignment != 0 ||
        r.offset > buffer_.size() || r.length > buffer_.size() - r.offset) {
      return absl::DataLossError(absl::StrFormat(
          "%s: region table entry (kind %d, node %d, bytes %d..%d) is invalid "
          "for a %d-byte image",
          source, r.kind, r.memory_node, r.offset, r.offset + r.length,
          buffer_.size()));
    }
  }
  // Checksums of all regions, in parallel over regions and within each.
  for (const RegionEntry& r : regions()) {
    uint32_t crc = Crc32(RegionBytes(r));
    if (crc != r.crc32) {
      return absl::DataLossError(absl::StrFormat(
          "%s: checksum mismatch in region %s of memory node %d (stored "
          "%08x, computed %08x)",
          source, RegionKindName(static_cast<RegionKind>(r.kind)),
          r.memory_node, r.crc32, crc));
    }
  }
  for (Direction d : {Direction::kOut, Direction::kIn}) {
    const RegionEntry* dir = FindRegion(DirectoryKind(d), 0);
    if (dir == nullptr || dir->length % sizeof(DirectoryEntry) != 0 ||
        dir->length / sizeof(DirectoryEntry) !=
            sb.num_blocks[static_cast<int>(d)]) {
      return absl::DataLossError(
          absl::StrFormat("%s: %s region missing or of the wrong size", source,
                          RegionKindName(DirectoryKind(d))));
    }
  }
  return absl::OkStatus();
}

absl::Status StoreImage::ValidateDirection(std::string_view source,
                                           Direction d) const {
  const Superblock& sb = superblock();
  std::span<const DirectoryEntry> dir = directory(d);
  std::string_view what = d == Direction::kOut ? "out" : "in";
  auto bad = [&](size_t i, const std::string& why) {
    return absl::DataLossError(absl::StrFormat(
        "%s: %s-direction block %d is invalid: %s", source, what, i, why));
  };
  uint64_t next_vertex = 0, next_edge = 0;
  DecodeBuffer decoded;
  for (size_t i = 0; i < dir.size(); ++i) {
    const DirectoryEntry& e = dir[i];
    const bool split = e.flags & kEntryFlagSplitPiece;
    const bool continues_run = split && i > 0 &&
                               (dir[i - 1].flags & kEntryFlagSplitPiece) &&
                               dir[i - 1].first_vertex == e.first_vertex;
    uint64_t expected_first = continues_run ? e.first_vertex : next_vertex;
    if (e.first_vertex != expected_first || e.vertex_count == 0 ||
        (split && e.vertex_count != 1) || e.first_edge != next_edge) {
      return bad(i, "directory entries do not tile the vertices and edges");
    }
    if (e.memory_node >= sb.num_memory_nodes) return bad(i, "bad memory node");
    const RegionEntry* region = FindRegion(BlocksKind(d), e.memory_node);
    if (region == nullptr || e.offset % 8 != 0 || e.offset > region->length ||
        e.length > region->length - e.offset || e.length > sb.block_size) {
      return bad(i, "block lies outside its region");
    }
    const std::span<const std::byte> bytes =
        RegionBytes(*region).subspan(e.offset, e.length);
    if (bytes.size() >= sizeof(BlockHeader)) {
      const uint32_t flags =
          reinterpret_cast<const BlockHeader*>(bytes.data())->flags;
      if (((flags & kBlockFlagCompressed) != 0) != compressed()) {
        return bad(i, compressed() ? "a plain block in a compressed image"
                                   : "a compressed block in a plain image");
      }
      // Readers of single segments locate them by the layout's offset
      // width: every block must have it.
      if (compressed() && ((flags & kBlockFlagNarrowOffsets) != 0) !=
                              NarrowOffsets(sb.block_size)) {
        return bad(i, "byte offsets of the wrong width for the block size");
      }
    }
    absl::StatusOr<BlockView> view = ParseAnyBlock(bytes, decoded);
    if (!view.ok()) return bad(i, std::string(view.status().message()));
    if (view->first_vertex() != e.first_vertex ||
        view->vertex_count() != e.vertex_count ||
        view->first_edge() != e.first_edge || view->split_piece() != split ||
        view->weighted() != weighted()) {
      return bad(i, "block header disagrees with the directory");
    }
    for (VertexId t : view->all_targets()) {
      if (t >= sb.num_vertices) return bad(i, "edge target out of range");
    }
    next_vertex = uint64_t{e.first_vertex} + e.vertex_count;
    next_edge += view->edge_count();
  }
  if (next_vertex != sb.num_vertices || next_edge != sb.num_arcs) {
    return absl::DataLossError(absl::StrFormat(
        "%s: %s-direction blocks cover %d vertices and %d arcs; superblock "
        "says %d and %d",
        source, what, next_vertex, next_edge, sb.num_vertices, sb.num_arcs));
  }
  return absl::OkStatus();
}

const RegionEntry* StoreImage::FindRegion(RegionKind kind,
                                          uint32_t node) const {
  for (const RegionEntry& r : regions()) {
    if (r.kind == static_cast<uint32_t>(kind) && r.memory_node == node) {
      return &r;
    }
  }
  return nullptr;
}

std::span<const DirectoryEntry> StoreImage::directory(Direction d) const {
  const RegionEntry* r = FindRegion(DirectoryKind(d), 0);
  if (r == nullptr) return {};
  return {reinterpret_cast<const DirectoryEntry*>(buffer_.data() + r->offset),
          r->length / sizeof(DirectoryEntry)};
}

BlockView StoreImage::block(Direction d, const DirectoryEntry& entry) const {
  const RegionEntry* r = FindRegion(BlocksKind(d), entry.memory_node);
  CHECK(r != nullptr) << "no blocks region for memory node "
                      << entry.memory_node;
  thread_local DecodeBuffer decoded;
  absl::StatusOr<BlockView> view = ParseAnyBlock(
      RegionBytes(*r).subspan(entry.offset, entry.length), decoded);
  CHECK(view.ok()) << view.status();  // validated when the image was loaded
  return *view;
}

}  // namespace dmg::store

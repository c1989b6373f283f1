#include "store/store_image.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/parallel.h"
#include "glog/logging.h"
#include "store/arc_hash.h"
#include "store/block_codec.h"

namespace dmg::store {

uint64_t ArcDigestOf(const Csr& csr, int threads) {
  if (threads <= 0) threads = DefaultThreads();
  threads = static_cast<int>(
      std::clamp<uint64_t>(csr.num_vertices / 4096, 1, threads));
  std::vector<uint64_t> sums(threads, 0);
  ParallelRanges(csr.num_vertices, threads, [&](int t, size_t begin,
                                                size_t end) {
    uint64_t sum = 0;
    for (size_t v = begin; v < end; ++v) {
      for (EdgeIndex k = csr.offsets[v]; k < csr.offsets[v + 1]; ++k) {
        sum += ArcHash(static_cast<VertexId>(v), csr.targets[k],
                       csr.weighted() ? csr.weights[k] : 0);
      }
    }
    sums[t] = sum;
  });
  uint64_t digest = 0;
  for (uint64_t x : sums) digest += x;
  return digest;
}

void StoreImage::SetSource(std::string_view source, uint64_t source_bytes) {
  Superblock sb = superblock();
  std::memset(sb.source, 0, sizeof(sb.source));
  // Kept whole or cut at kSourceSize - 1 bytes (always NUL-terminated).
  std::memcpy(sb.source, source.data(),
              std::min<size_t>(source.size(), sizeof(sb.source) - 1));
  sb.source_bytes = source_bytes;
  sb.crc32 =
      Crc32({reinterpret_cast<const std::byte*>(&sb), kSuperblockSize - 4});
  std::memcpy(buffer_.data(), &sb, sizeof(sb));
}

std::string_view SourceOf(const Superblock& sb) {
  return {sb.source, strnlen(sb.source, sizeof(sb.source))};
}

absl::StatusOr<StoreImage> StoreImage::FromBuffer(AlignedBuffer buffer,
                                                  std::string_view source,
                                                  Validation validation) {
  StoreImage image(std::move(buffer));
  if (absl::Status s = image.ValidateSuperblock(source); !s.ok()) return s;
  if (absl::Status s = image.ValidateRegions(source); !s.ok()) return s;
  if (validation == Validation::kFull) {
    ArcDigest digest[2];
    for (Direction d : {Direction::kOut, Direction::kIn}) {
      if (absl::Status s =
              image.ValidateDirection(source, d, digest[static_cast<int>(d)]);
          !s.ok()) {
        return s;
      }
    }
    if (absl::Status s = image.ValidateTranspose(source, digest[0], digest[1]);
        !s.ok()) {
      return s;
    }
    // (Zero: an image written before the fingerprint.)
    const uint64_t recorded = image.superblock().arc_digest;
    if (recorded != 0 && recorded != digest[0].arcs) {
      return absl::DataLossError(absl::StrFormat(
          "%s: the superblock's arc digest %016x is not its arcs' (%016x)",
          source, recorded, digest[0].arcs));
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

absl::Status StoreImage::ValidateDirection(std::string_view source, Direction d,
                                           ArcDigest& digest) const {
  const Superblock& sb = superblock();
  std::span<const DirectoryEntry> dir = directory(d);
  std::string_view what = d == Direction::kOut ? "out" : "in";
  auto bad = [&](size_t i, std::string_view why) {
    return absl::DataLossError(absl::StrFormat(
        "%s: %s-direction block %d is invalid: %s", source, what, i, why));
  };
  // The directory, in order: its entries tile the vertices and the edges
  // (first_edge never decreases; each block's edge count is checked below
  // against the next entry's) and lie inside their regions.
  uint64_t next_vertex = 0, last_edge = 0;
  for (size_t i = 0; i < dir.size(); ++i) {
    const DirectoryEntry& e = dir[i];
    const bool split = e.flags & kEntryFlagSplitPiece;
    const bool continues_run = split && i > 0 &&
                               (dir[i - 1].flags & kEntryFlagSplitPiece) &&
                               dir[i - 1].first_vertex == e.first_vertex;
    uint64_t expected_first = continues_run ? e.first_vertex : next_vertex;
    if (e.first_vertex != expected_first || e.vertex_count == 0 ||
        (split && e.vertex_count != 1) || e.first_edge < last_edge ||
        e.first_edge > sb.num_arcs || (i == 0 && e.first_edge != 0)) {
      return bad(i, "directory entries do not tile the vertices and edges");
    }
    if (e.memory_node >= sb.num_memory_nodes) return bad(i, "bad memory node");
    const RegionEntry* region = FindRegion(BlocksKind(d), e.memory_node);
    if (region == nullptr || e.offset % 8 != 0 || e.offset > region->length ||
        e.length > region->length - e.offset || e.length > sb.block_size) {
      return bad(i, "block lies outside its region");
    }
    next_vertex = uint64_t{e.first_vertex} + e.vertex_count;
    last_edge = e.first_edge;
  }
  if (next_vertex != sb.num_vertices) {
    return absl::DataLossError(absl::StrFormat(
        "%s: %s-direction blocks cover %d vertices; superblock says %d", source,
        what, next_vertex, sb.num_vertices));
  }
  // The blocks, in parallel over contiguous ranges: each parsed (header,
  // offsets, every target < n), checked against its entry, its adjacency
  // sorted, and its arcs hashed into the digest.
  const bool out = d == Direction::kOut;
  const bool symmetric = out && (sb.flags & kSuperblockFlagSymmetric);
  struct Part {
    ArcDigest digest;
    bool any_weight = false;
    size_t failed = ~size_t{0};  // the first invalid block of the range
    std::string why;
  };
  const int threads = static_cast<int>(
      std::clamp<size_t>(dir.size() / 64, 1, DefaultThreads()));
  std::vector<Part> parts(threads);
  ParallelRanges(dir.size(), threads, [&](int t, size_t begin, size_t end) {
    Part& part = parts[t];
    DecodeBuffer decoded;
    auto fail = [&](size_t i, std::string why) {
      part.failed = i;
      part.why = std::move(why);
    };
    for (size_t i = begin; i < end; ++i) {
      const DirectoryEntry& e = dir[i];
      const bool split = e.flags & kEntryFlagSplitPiece;
      const RegionEntry* region = FindRegion(BlocksKind(d), e.memory_node);
      const std::span<const std::byte> bytes =
          RegionBytes(*region).subspan(e.offset, e.length);
      if (bytes.size() >= sizeof(BlockHeader)) {
        BlockHeader h;
        std::memcpy(&h, bytes.data(), sizeof(h));
        if (((h.flags & kBlockFlagCompressed) != 0) != compressed()) {
          return fail(i, compressed() ? "a plain block in a compressed image"
                                      : "a compressed block in a plain image");
        }
        // Readers of single segments locate them by the layout's offset
        // width: every block must have it.
        if (compressed() && ((h.flags & kBlockFlagNarrowOffsets) != 0) !=
                                NarrowOffsets(sb.block_size)) {
          return fail(i, "byte offsets of the wrong width for the block size");
        }
        if (h.length != e.length) {
          return fail(i, absl::StrFormat(
                             "its length %d disagrees with the directory's %d",
                             h.length, e.length));
        }
      }
      absl::StatusOr<BlockView> view =
          ParseAnyBlock(bytes, decoded, sb.num_vertices);
      if (!view.ok()) return fail(i, std::string(view.status().message()));
      if (view->first_vertex() != e.first_vertex ||
          view->vertex_count() != e.vertex_count ||
          view->first_edge() != e.first_edge || view->split_piece() != split ||
          view->weighted() != weighted() ||
          view->edge_count() != EntryEdges(dir, i, sb.num_arcs)) {
        return fail(i, "block header disagrees with the directory");
      }
      ArcDigest& dg = part.digest;
      for (uint32_t j = 0; j < view->vertex_count(); ++j) {
        const VertexId v = view->first_vertex() + j;
        std::span<const VertexId> targets = view->targets(v);
        std::span<const Weight> weights;
        if (view->weighted()) weights = view->weights(v);
        for (size_t k = 0; k < targets.size(); ++k) {
          const VertexId t = targets[k];
          if (k > 0 && t < targets[k - 1]) {
            return fail(i, absl::StrFormat(
                               "the adjacency of vertex %d is not sorted", v));
          }
          const Weight w = weights.empty() ? 0 : weights[k];
          dg.arcs += out ? ArcHash(v, t, w) : ArcHash(t, v, w);
          if (symmetric) {
            dg.pairs += PairHash(v, t);
            dg.reversed += PairHash(t, v);
          }
          if (!weights.empty()) {
            dg.min_weight = part.any_weight ? std::min(dg.min_weight, w) : w;
            dg.max_weight = part.any_weight ? std::max(dg.max_weight, w) : w;
            part.any_weight = true;
          }
        }
      }
    }
  });
  bool any_weight = false;
  for (const Part& part : parts) {
    // Ranges are in block order: the first failure is the lowest block.
    if (part.failed != ~size_t{0}) return bad(part.failed, part.why);
    digest.arcs += part.digest.arcs;
    digest.pairs += part.digest.pairs;
    digest.reversed += part.digest.reversed;
    if (part.any_weight) {
      digest.min_weight =
          any_weight ? std::min(digest.min_weight, part.digest.min_weight)
                     : part.digest.min_weight;
      digest.max_weight =
          any_weight ? std::max(digest.max_weight, part.digest.max_weight)
                     : part.digest.max_weight;
      any_weight = true;
    }
  }
  return absl::OkStatus();
}

absl::Status StoreImage::ValidateTranspose(std::string_view source,
                                           const ArcDigest& out,
                                           const ArcDigest& in) const {
  const Superblock& sb = superblock();
  // SSSP refuses negative weights by the superblock's minimum.
  if (weighted() &&
      (out.min_weight != sb.min_weight || out.max_weight != sb.max_weight)) {
    return absl::DataLossError(absl::StrFormat(
        "%s: superblock says arc weights %d..%d, the blocks hold %d..%d",
        source, sb.min_weight, sb.max_weight, out.min_weight, out.max_weight));
  }
  // The engine reads the out-blocks for in-arcs of a symmetric graph.
  if ((sb.flags & kSuperblockFlagSymmetric) && out.pairs != out.reversed) {
    return absl::DataLossError(absl::StrFormat(
        "%s: superblock says the graph is symmetric, but its out-arcs are "
        "not (some u -> v has no v -> u)",
        source));
  }
  if (out.arcs == in.arcs) return absl::OkStatus();
  // Cold: name a vertex whose out-arcs differ between the two directions
  // (by source) and one whose in-arcs do (by target), and their blocks.
  std::string where;
  constexpr uint64_t kLocateMaxVertices = uint64_t{1} << 25;  // 512 MiB
  if (sb.num_vertices <= kLocateMaxVertices) {
    std::vector<uint64_t> by_source(sb.num_vertices),
        by_target(sb.num_vertices);
    for (Direction d : {Direction::kOut, Direction::kIn}) {
      const bool from_out = d == Direction::kOut;
      for (const DirectoryEntry& e : directory(d)) {
        const BlockView b = block(d, e);
        for (uint32_t j = 0; j < b.vertex_count(); ++j) {
          const VertexId v = b.first_vertex() + j;
          std::span<const VertexId> targets = b.targets(v);
          for (size_t k = 0; k < targets.size(); ++k) {
            const VertexId u = from_out ? v : targets[k];
            const VertexId x = from_out ? targets[k] : v;
            const uint64_t h =
                ArcHash(u, x, b.weighted() ? b.weights(v)[k] : 0);
            by_source[u] += from_out ? h : -h;
            by_target[x] += from_out ? h : -h;
          }
        }
      }
    }
    auto first_nonzero = [](const std::vector<uint64_t>& a) {
      return static_cast<VertexId>(
          std::find_if(a.begin(), a.end(), [](uint64_t x) { return x != 0; }) -
          a.begin());
    };
    const VertexId u = first_nonzero(by_source);
    const VertexId x = first_nonzero(by_target);
    if (u < sb.num_vertices && x < sb.num_vertices) {
      where = absl::StrFormat(
          ": the out-arcs of vertex %d (out-direction block %d) and the "
          "in-arcs of vertex %d (in-direction block %d) differ between them",
          u, FindBlocks(directory(Direction::kOut), u).first, x,
          FindBlocks(directory(Direction::kIn), x).first);
    }
  }
  return absl::DataLossError(absl::StrFormat(
      "%s: the in-blocks are not the transpose of the out-blocks%s", source,
      where));
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
  absl::StatusOr<BlockView> view =
      ParseAnyBlock(RegionBytes(*r).subspan(entry.offset, entry.length),
                    decoded, num_vertices());
  CHECK(view.ok()) << view.status();  // validated when the image was loaded
  return *view;
}

}  // namespace dmg::store

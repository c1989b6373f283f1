// The DM-friendly store layout, byte for byte. This header is the contract
// between the memory side (which holds these bytes in registered memory and in
// image files) and the compute side (which READs them through the transport).
// docs/STORE_FORMAT.md describes the same layout in prose. All integers are
// little-endian; all structures are naturally aligned.
//
// An image is:  [superblock 4 KiB][region][region]...   each region 4 KiB
// aligned
//   superblock : magic, version, counts, block size, region table, checksums
//   directory  : one DirectoryEntry per block (out- and in-direction each)
//   blocks     : self-describing blocks of adjacency (per direction, per
//                memory node; the directory says which node and offset)
//
// A block holds a contiguous vertex range: a header, per-vertex edge offsets
// relative to the block, the targets, then (if weighted) the weights. One READ
// of a block gives both the index and the edges. A vertex whose adjacency does
// not fit in one block gets a run of blocks ("split pieces"), each with
// vertex_count 1.
#ifndef DMG_STORE_BLOCK_FORMAT_H_
#define DMG_STORE_BLOCK_FORMAT_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <utility>

#include "absl/status/statusor.h"
#include "store/graph.h"

namespace dmg::store {

inline constexpr char kImageMagic[8] = {'D', 'M', 'G', 'S', 'T', 'O', 'R', 'E'};
// The newest version this build reads. Images of plain blocks are written
// as version 1 (what every reader so far takes); images of compressed
// blocks as 2, so that an older reader refuses them as "newer".
inline constexpr uint32_t kFormatVersion = 2;
inline constexpr uint32_t kPlainFormatVersion = 1;
inline constexpr uint32_t kSuperblockSize = 4096;
inline constexpr uint32_t kRegionAlignment = 4096;
inline constexpr uint32_t kMaxRegions = 64;
inline constexpr uint32_t kSourceSize = 192;  // Superblock::source
inline constexpr uint32_t kMinBlockSize = 256;
inline constexpr uint32_t kMaxBlockSize = 1u << 20;
// Chosen by measurement (bench/block_size_bench, docs/PERFORMANCE.md).
inline constexpr uint32_t kDefaultBlockSize = 16 * 1024;

enum class Direction : uint32_t { kOut = 0, kIn = 1 };

enum class RegionKind : uint32_t {
  kOutDirectory = 1,
  kOutBlocks = 2,
  kInDirectory = 3,
  kInBlocks = 4,
};

std::string_view RegionKindName(RegionKind kind);
inline RegionKind DirectoryKind(Direction d) {
  return d == Direction::kOut ? RegionKind::kOutDirectory
                              : RegionKind::kInDirectory;
}
inline RegionKind BlocksKind(Direction d) {
  return d == Direction::kOut ? RegionKind::kOutBlocks : RegionKind::kInBlocks;
}

struct RegionEntry {
  uint32_t kind;         // RegionKind
  uint32_t memory_node;  // which memory node serves it
  uint64_t offset;       // byte offset in the image
  uint64_t length;       // bytes
  uint32_t crc32;        // zlib CRC-32 of the region's bytes
  uint32_t reserved;
};
static_assert(sizeof(RegionEntry) == 32);

inline constexpr uint32_t kSuperblockFlagWeighted = 1;
// Every arc u->v has its reverse v->u (out- and in-CSR are equal): the
// graph is undirected, as triangle counting needs.
inline constexpr uint32_t kSuperblockFlagSymmetric = 2;
// Every block is compressed (store/block_codec.h); version 2 and later.
inline constexpr uint32_t kSuperblockFlagCompressed = 4;

struct Superblock {
  char magic[8];
  uint32_t format_version;
  uint32_t superblock_size;  // kSuperblockSize
  uint64_t num_vertices;
  uint64_t num_arcs;    // per direction
  uint64_t image_size;  // total bytes of the image
  uint32_t block_size;  // upper bound on any block's length
  uint32_t flags;       // kSuperblockFlagWeighted | kSuperblockFlagSymmetric
  uint32_t num_memory_nodes;
  uint32_t num_regions;
  uint64_t num_blocks[2];  // directory entries, by Direction
  // What cleaning did at ingestion (for `dmg info`; not used by compute).
  uint64_t input_arcs;
  uint64_t self_loops_removed;
  uint64_t parallel_arcs_removed;
  uint64_t arcs_added_by_symmetrize;
  // Lightest and heaviest arc weight (0, 0 when unweighted or no arcs).
  int32_t min_weight;
  int32_t max_weight;
  uint8_t reserved0[16];
  RegionEntry regions[kMaxRegions];
  // The graph's fingerprint (docs/STORE_FORMAT.md, "Fingerprint"): what it
  // was loaded from, so that a job on memory nodes checks the --graph it is
  // given and records the graph it ran on. All zero in images written
  // before it existed.
  char source[kSourceSize];  // SourceName(): NUL-padded, NUL-terminated
  uint64_t source_bytes;     // the input file's size (0: a generator)
  uint64_t arc_digest;       // sum of ArcHash over the out-arcs
  uint8_t reserved1[kSuperblockSize - 128 - kMaxRegions * sizeof(RegionEntry) -
                    kSourceSize - 16 - 4];
  uint32_t crc32;  // CRC-32 of bytes [0, kSuperblockSize - 4)
};
static_assert(sizeof(Superblock) == kSuperblockSize);
static_assert(offsetof(Superblock, regions) == 128);
static_assert(offsetof(Superblock, source) == 2176);
static_assert(offsetof(Superblock, arc_digest) == 2376);

inline constexpr uint16_t kEntryFlagSplitPiece = 1;

struct DirectoryEntry {
  uint32_t first_vertex;
  uint32_t vertex_count;  // 1 for a split piece
  uint64_t offset;        // byte offset in the (direction, node) blocks region
  uint32_t length;        // bytes of the block
  uint16_t memory_node;
  uint16_t flags;       // kEntryFlagSplitPiece
  uint64_t first_edge;  // index of the block's first edge in CSR order
};
static_assert(sizeof(DirectoryEntry) == 32);

inline constexpr uint32_t kBlockMagic = 0x42474d44;  // "DMGB"
inline constexpr uint32_t kBlockFlagWeighted = 1;
inline constexpr uint32_t kBlockFlagSplitPiece = 2;
// Delta + bit-packed neighbour ids (store/block_codec.h).
inline constexpr uint32_t kBlockFlagCompressed = 4;
// A compressed block's byte offsets are u16 (else u32): in layouts whose
// block size is at most 64 KiB (store/block_codec.h, NarrowOffsets).
inline constexpr uint32_t kBlockFlagNarrowOffsets = 8;

struct BlockHeader {
  uint32_t magic;  // kBlockMagic
  uint32_t flags;
  uint32_t first_vertex;
  uint32_t vertex_count;
  uint32_t edge_count;
  uint32_t length;      // bytes, including header and padding
  uint64_t first_edge;  // index of the first edge in CSR order
};
static_assert(sizeof(BlockHeader) == 32);

// Bytes a block with `vertices` vertices and `edges` edges occupies:
// header, vertices+1 offsets, targets, weights, padded to 8 bytes.
inline uint64_t BlockBytes(uint64_t vertices, uint64_t edges, bool weighted) {
  uint64_t raw =
      sizeof(BlockHeader) + 4 * (vertices + 1) + edges * (weighted ? 8 : 4);
  return (raw + 7) & ~uint64_t{7};
}

// Most edges one split piece can hold.
inline uint64_t EdgesPerSplitPiece(uint32_t block_size, bool weighted) {
  return (block_size - sizeof(BlockHeader) - 8) / (weighted ? 8 : 4);
}

// The bytes of the image memory node `node` holds, as [begin, end) offsets in
// the image: node 0 has the superblock, the directories and its blocks; node
// k > 0 only its blocks regions. A memory node's store region is exactly this
// slice, so a remote offset is (image offset - begin).
std::pair<uint64_t, uint64_t> NodeSlice(const Superblock& sb, uint32_t node);

// zlib CRC-32 of `bytes` (superblock, regions), computed in parallel slices
// and combined.
uint32_t Crc32(std::span<const std::byte> bytes);

// Whether any of `ids` is `n` or more: one pass, eight ids a step in
// vector compares (a plain loop of unsigned compares, or an unsigned max,
// is not vectorized at -O2 on x86-64's SSE2), sixteen where the CPU has
// AVX2. Every block and edge range a compute node reads goes through it.
bool AnyIdAtLeast(std::span<const VertexId> ids, uint64_t n);
// The same on 16-byte vectors whatever the CPU (what AnyIdAtLeast runs
// without AVX2), so that tests check both.
bool AnyIdAtLeastWithoutAvx2(std::span<const VertexId> ids, uint64_t n);

// A parsed, validated view of one plain block's bytes (which may have come
// over the network: Parse checks every length before use). A compressed
// block is decoded into a plain one first (ParseAnyBlock, block_codec.h).
class BlockView {
 public:
  // Checks the header, the lengths, that the offsets are monotone and span
  // the edges, and that every target is a vertex (< num_vertices: one
  // vectorized pass, AnyIdAtLeast), so that no id read from a block can
  // index past a vertex array. Errors name the block's first vertex (and
  // the vertex whose target is not a vertex).
  static absl::StatusOr<BlockView> Parse(std::span<const std::byte> bytes,
                                         uint64_t num_vertices);
  // The same without a vertex count: targets are only checked to be ids
  // (< 2^32 - 1). For tools that inspect a block alone; whatever indexes
  // by the targets must use the form above.
  static absl::StatusOr<BlockView> Parse(std::span<const std::byte> bytes) {
    return Parse(bytes, kMaxVertexId + 1);
  }

  VertexId first_vertex() const { return header_->first_vertex; }
  uint32_t vertex_count() const { return header_->vertex_count; }
  uint32_t edge_count() const { return header_->edge_count; }
  uint64_t first_edge() const { return header_->first_edge; }
  bool weighted() const { return header_->flags & kBlockFlagWeighted; }
  bool split_piece() const { return header_->flags & kBlockFlagSplitPiece; }
  bool contains(VertexId v) const {
    return v >= first_vertex() && v - first_vertex() < vertex_count();
  }
  // Targets (and weights) of vertex v within this block; v must be contained.
  std::span<const VertexId> targets(VertexId v) const {
    uint32_t i = v - first_vertex();
    return {targets_ + offsets_[i], targets_ + offsets_[i + 1]};
  }
  std::span<const Weight> weights(VertexId v) const {
    uint32_t i = v - first_vertex();
    return {weights_ + offsets_[i], weights_ + offsets_[i + 1]};
  }
  std::span<const VertexId> all_targets() const {
    return {targets_, header_->edge_count};
  }
  // Empty if the block is unweighted.
  std::span<const Weight> all_weights() const {
    return {weights_, weighted() ? header_->edge_count : 0};
  }

 private:
  const BlockHeader* header_ = nullptr;
  const uint32_t* offsets_ = nullptr;
  const VertexId* targets_ = nullptr;
  const Weight* weights_ = nullptr;
};

// Edges of directory entry i's block (first_edge is a CSR index; the last
// entry ends at num_arcs).
inline uint64_t EntryEdges(std::span<const DirectoryEntry> directory, size_t i,
                           uint64_t num_arcs) {
  const uint64_t next =
      i + 1 < directory.size() ? directory[i + 1].first_edge : num_arcs;
  return next - directory[i].first_edge;
}

// The directory entries [first, last) that hold vertex v's adjacency: one
// entry, or a run of split pieces. Directory must be sorted by first_vertex
// and cover v. O(log blocks).
std::pair<size_t, size_t> FindBlocks(std::span<const DirectoryEntry> directory,
                                     VertexId v);

}  // namespace dmg::store

#endif  // DMG_STORE_BLOCK_FORMAT_H_

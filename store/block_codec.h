// Compressed blocks: delta + bit-packed neighbour ids (`dmg load
// --compress`; docs/STORE_FORMAT.md, "Compressed blocks").
//
// A compressed block keeps the plain block's header and edge offsets, so a
// headers-only read (degrees, the header cache) works on either encoding,
// then adds a byte offset per vertex into a stream of segments:
//
//   header (32)  u32 offsets[k+1]  u16|u32 byte_offsets[k+1]  u8 stream[]
//
// (byte offsets u16 when the layout's block size is at most 64 KiB, as a
// stream is then shorter than 2^16 bytes: road graphs, with ~3 arcs a
// vertex, save 2 bytes a vertex).
// Vertex i's segment is stream[byte_offsets[i], byte_offsets[i+1]), empty
// when it has no edges here, else
//   varint d            its edges in this block
//   varint zigzag(t0 - v)   the first target, relative to v (either side)
//   u8 w                bits per gap (only when d >= 2)
//   u8 ww               bits per zigzagged weight (weighted blocks only)
//   bits                d - 1 gaps t_j - t_(j-1) of w bits, then d weights
//                       of ww bits, little-endian bit order, to a byte.
// A segment decodes on its own (a push reads just its members' segments),
// and a whole block decodes into the plain layout, so that everything
// downstream of parsing sees plain blocks.
//
// Why bit packing and not a varint per edge: decoding varints is a chain
// in which each value's position waits on the previous value's length
// (kron-20 PageRank: ~6 ns an edge, slower over tcp than the bytes it
// saved); fixed-width fields per vertex put only `bit += w` on that chain.
// Sizes are close: kron-20's gaps are ~17 bits (a varint takes 3 bytes
// for anything above 2^14).
#ifndef DMG_STORE_BLOCK_CODEC_H_
#define DMG_STORE_BLOCK_CODEC_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "store/block_format.h"
#include "store/graph.h"

namespace dmg::store {

// Whether a layout of `block_size` gives its compressed blocks u16 byte
// offsets (kBlockFlagNarrowOffsets), and their width.
inline bool NarrowOffsets(uint32_t block_size) { return block_size <= 65536; }
inline uint32_t OffsetWidth(bool narrow) { return narrow ? 2 : 4; }
// Bytes of a compressed block with k vertices and `data` stream bytes.
inline uint64_t CompressedBlockBytes(uint64_t vertices, uint64_t data,
                                     bool narrow) {
  return (sizeof(BlockHeader) + (4 + OffsetWidth(narrow)) * (vertices + 1) +
          data + 7) &
         ~uint64_t{7};
}
// Where the byte offsets and the stream start in a compressed block.
inline uint64_t ByteOffsetsAt(uint32_t vertices) {
  return sizeof(BlockHeader) + 4 * (uint64_t{vertices} + 1);
}
inline uint64_t StreamAt(uint32_t vertices, bool narrow) {
  return sizeof(BlockHeader) +
         (4 + OffsetWidth(narrow)) * (uint64_t{vertices} + 1);
}

// Sizes a segment edge by edge (for split pieces: as many edges as fit).
class SegmentSizer {
 public:
  SegmentSizer(const Csr& csr, VertexId v) : csr_(csr), v_(v) {}
  // Bytes of the segment of v's CSR edges [from, k] (k: the next one).
  uint64_t BytesWith(uint64_t k) const;
  void Add(uint64_t k);
  uint64_t bytes() const;
  uint64_t edges() const { return edges_; }

 private:
  uint64_t Bytes(uint64_t edges, uint64_t first, uint32_t w, uint32_t ww) const;
  const Csr& csr_;
  const VertexId v_;
  uint64_t edges_ = 0, first_ = 0, last_ = 0;
  uint32_t w_ = 0, ww_ = 0;
};

// Bytes of the segment of CSR edges [from, to) of vertex v (all of v's
// adjacency, or a split piece's part of it).
uint64_t SegmentBytes(const Csr& csr, VertexId v, uint64_t from, uint64_t to);

// Writes the compressed block of edges [first_edge, first_edge + edges) of
// vertices [first, first + count) of `csr` into dst (a split piece: count
// 1 and a part of first's adjacency), which must hold
// CompressedBlockBytes(count, stream bytes, narrow) bytes, padding zeroed;
// returns the block's length. `narrow`: u16 byte offsets (the stream must
// then be shorter than 2^16 bytes).
uint32_t EncodeBlock(const Csr& csr, VertexId first, uint32_t count,
                     uint64_t first_edge, uint32_t edges, bool split_piece,
                     bool narrow, std::byte* dst);

// Where a decoded block goes: reused from block to block (it only grows).
struct DecodeBuffer {
  std::vector<uint64_t> words;
};

// Parses a block in either encoding: a plain block in place; a compressed
// one (checked while decoded: every segment exactly as long as its fields,
// holding its vertex's edges, no id past 2^32 - 2) decoded into `buffer`,
// whose view stays valid until the buffer is reused. Either way every
// target is checked to be below `num_vertices` (BlockView::Parse).
absl::StatusOr<BlockView> ParseAnyBlock(std::span<const std::byte> bytes,
                                        DecodeBuffer& buffer,
                                        uint64_t num_vertices);
// Without a vertex count (ids below 2^32 - 1 only), for tools that look at
// a block alone.
inline absl::StatusOr<BlockView> ParseAnyBlock(std::span<const std::byte> bytes,
                                               DecodeBuffer& buffer) {
  return ParseAnyBlock(bytes, buffer, kMaxVertexId + 1);
}

// Decodes one segment of vertex v (read on its own, so checked alone):
// appends its targets (and, if weighted, weights) to the vectors, which are
// cleared first.
absl::Status DecodeSegment(std::span<const std::byte> segment, VertexId v,
                           bool weighted, std::vector<VertexId>& targets,
                           std::vector<Weight>& weights);

}  // namespace dmg::store

#endif  // DMG_STORE_BLOCK_CODEC_H_

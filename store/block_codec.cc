#include "store/block_codec.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "absl/strings/str_format.h"
#include "common/varint.h"

namespace dmg::store {
namespace {

// The widest field: a gap between two ids, or a zigzagged weight.
constexpr uint32_t kMaxWidth = 32;
// A varint of a zigzagged id difference (33 bits) takes at most 5 bytes.
constexpr int kMaxVarintBytes = 5;

uint32_t Width(uint64_t x) { return static_cast<uint32_t>(std::bit_width(x)); }
uint64_t WeightField(Weight w) { return ZigZag(w); }

// One varint at p (inside [p, end)) of at most 5 bytes.
bool GetVarint(const uint8_t*& p, const uint8_t* end, uint64_t& x) {
  return dmg::GetVarint(p, end, &x, kMaxVarintBytes);
}

// Appends fields of `width` bits to a little-endian bit stream.
class BitWriter {
 public:
  explicit BitWriter(uint8_t* p) : p_(p) {}
  void Put(uint64_t value, uint32_t width) {
    acc_ |= value << fill_;
    fill_ += width;
    while (fill_ >= 8) {
      *p_++ = static_cast<uint8_t>(acc_);
      acc_ >>= 8;
      fill_ -= 8;
    }
  }
  uint8_t* Finish() {
    if (fill_ > 0) *p_++ = static_cast<uint8_t>(acc_);
    return p_;
  }

 private:
  uint8_t* p_;
  uint64_t acc_ = 0;
  uint32_t fill_ = 0;
};

// Bit `bit` onward of the stream at `base` (bytes [base, end) readable),
// `mask` wide (at most 32 bits). Reads 8 bytes at once when they are
// there, else byte by byte.
inline uint64_t Field(const uint8_t* base, const uint8_t* end, uint64_t bit,
                      uint64_t mask) {
  const uint8_t* p = base + (bit >> 3);
  uint64_t word = 0;
  if (end - p >= 8) {
    std::memcpy(&word, p, 8);
  } else {
    std::memcpy(&word, p, std::max<ptrdiff_t>(0, end - p));
  }
  return (word >> (bit & 7)) & mask;
}

// Bytes of a segment of `edges` edges (>= 1) with these fields.
uint64_t SegmentSize(bool weighted, uint64_t edges, uint64_t first, uint32_t w,
                     uint32_t ww) {
  const uint64_t bits = (edges - 1) * w + (weighted ? edges * ww : 0);
  return VarintBytes(edges) + VarintBytes(first) + (edges >= 2 ? 1 : 0) +
         (weighted ? 1 : 0) + (bits + 7) / 8;
}

// Decodes the segment [p, end) of vertex v: `expect` edges (or any number
// when expect < 0) into targets and weights, which hold `room` entries.
// Fast loads may read up to `limit` (>= end). Returns the edges, or -1 if
// the segment is malformed: a field past its end, bytes left over, a width
// over 32 bits, an id over 2^32 - 2.
template <bool kWeighted>
int64_t DecodeVertex(const uint8_t* p, const uint8_t* end, const uint8_t* limit,
                     VertexId v, int64_t expect, uint64_t room,
                     VertexId* targets, Weight* weights) {
  if (p == end) return expect <= 0 ? 0 : -1;
  uint64_t d, first;
  if (!GetVarint(p, end, d) || d == 0 || d > room ||
      (expect >= 0 && d != static_cast<uint64_t>(expect)) ||
      !GetVarint(p, end, first)) {
    return -1;
  }
  uint32_t w = 0, ww = 0;
  if (d >= 2) {
    if (p == end || (w = *p++) > kMaxWidth) return -1;
  }
  if (kWeighted) {
    if (p == end || (ww = *p++) > kMaxWidth) return -1;
  }
  const uint64_t bits = (d - 1) * w + (kWeighted ? d * ww : 0);
  if (static_cast<uint64_t>(end - p) != (bits + 7) / 8) return -1;
  // v + (t0 - v), wrapping below zero to a value past every id.
  uint64_t t = uint64_t{v} + static_cast<uint64_t>(UnZigZag(first));
  if (t > kMaxVertexId) return -1;
  targets[0] = static_cast<VertexId>(t);
  const uint64_t mask = (uint64_t{1} << w) - 1;
  uint64_t bit = 0, j = 1;
  // Gaps whose 8-byte load stays before `limit` need no bounds test: a
  // field at bit b loads bytes [b / 8, b / 8 + 8) of the fields.
  if (w > 0 && limit - p >= 8) {
    const uint64_t safe = std::min<uint64_t>(
        d, 1 + (8 * static_cast<uint64_t>(limit - p - 8)) / w);
    for (; j < safe; ++j, bit += w) {
      uint64_t word;
      std::memcpy(&word, p + (bit >> 3), 8);
      t += (word >> (bit & 7)) & mask;
      targets[j] = static_cast<VertexId>(t);
    }
  }
  for (; j < d; ++j, bit += w) {
    t += Field(p, limit, bit, mask);
    targets[j] = static_cast<VertexId>(t);
  }
  // Gaps are unsigned: the last id is the largest.
  if (t > kMaxVertexId) return -1;
  if (kWeighted) {
    const uint64_t wmask = (uint64_t{1} << ww) - 1;
    for (uint64_t j = 0; j < d; ++j, bit += ww) {
      weights[j] = static_cast<Weight>(UnZigZag(Field(p, limit, bit, wmask)));
    }
  }
  return static_cast<int64_t>(d);
}

int64_t DecodeVertex(bool weighted, const uint8_t* p, const uint8_t* end,
                     const uint8_t* limit, VertexId v, int64_t expect,
                     uint64_t room, VertexId* targets, Weight* weights) {
  return weighted ? DecodeVertex<true>(p, end, limit, v, expect, room, targets,
                                       weights)
                  : DecodeVertex<false>(p, end, limit, v, expect, room, targets,
                                        weights);
}

}  // namespace

uint64_t SegmentSizer::BytesWith(uint64_t k) const {
  if (edges_ == 0) {
    return SegmentSize(
        csr_.weighted(), 1, ZigZag(int64_t{csr_.targets[k]} - int64_t{v_}), 0,
        csr_.weighted() ? Width(WeightField(csr_.weights[k])) : 0);
  }
  const uint32_t w = std::max(w_, Width(csr_.targets[k] - csr_.targets[last_]));
  const uint32_t ww =
      csr_.weighted() ? std::max(ww_, Width(WeightField(csr_.weights[k]))) : 0;
  return SegmentSize(csr_.weighted(), edges_ + 1, first_, w, ww);
}

void SegmentSizer::Add(uint64_t k) {
  if (edges_ == 0) {
    first_ = ZigZag(int64_t{csr_.targets[k]} - int64_t{v_});
  } else {
    w_ = std::max(w_, Width(csr_.targets[k] - csr_.targets[last_]));
  }
  if (csr_.weighted()) ww_ = std::max(ww_, Width(WeightField(csr_.weights[k])));
  last_ = k;
  ++edges_;
}

uint64_t SegmentSizer::bytes() const {
  return edges_ == 0 ? 0
                     : SegmentSize(csr_.weighted(), edges_, first_, w_, ww_);
}

uint64_t SegmentBytes(const Csr& csr, VertexId v, uint64_t from, uint64_t to) {
  SegmentSizer s(csr, v);
  for (uint64_t k = from; k < to; ++k) s.Add(k);
  return s.bytes();
}

uint32_t EncodeBlock(const Csr& csr, VertexId first, uint32_t count,
                     uint64_t first_edge, uint32_t edges, bool split_piece,
                     bool narrow, std::byte* dst) {
  const bool weighted = csr.weighted();
  auto* offsets = reinterpret_cast<uint32_t*>(dst + sizeof(BlockHeader));
  std::byte* const byte_offsets = dst + ByteOffsetsAt(count);
  auto put_byte_offset = [&](uint32_t i, uint64_t at) {
    if (narrow) {
      const auto v = static_cast<uint16_t>(at);
      std::memcpy(byte_offsets + 2 * i, &v, 2);
    } else {
      const auto v = static_cast<uint32_t>(at);
      std::memcpy(byte_offsets + 4 * uint64_t{i}, &v, 4);
    }
  };
  auto* const stream =
      reinterpret_cast<uint8_t*>(dst + StreamAt(count, narrow));
  uint8_t* p = stream;
  offsets[0] = 0;
  put_byte_offset(0, 0);
  for (uint32_t i = 0; i < count; ++i) {
    const VertexId v = first + i;
    const uint64_t from = split_piece ? first_edge : csr.offsets[v];
    const uint64_t to = split_piece ? first_edge + edges : csr.offsets[v + 1];
    if (from < to) {
      uint32_t w = 0, ww = 0;
      for (uint64_t k = from; k < to; ++k) {
        if (k > from)
          w = std::max(w, Width(csr.targets[k] - csr.targets[k - 1]));
        if (weighted) ww = std::max(ww, Width(WeightField(csr.weights[k])));
      }
      p = PutVarint(p, to - from);
      p = PutVarint(p, ZigZag(int64_t{csr.targets[from]} - int64_t{v}));
      if (to - from >= 2) *p++ = static_cast<uint8_t>(w);
      if (weighted) *p++ = static_cast<uint8_t>(ww);
      BitWriter bits(p);
      for (uint64_t k = from + 1; k < to; ++k) {
        bits.Put(csr.targets[k] - csr.targets[k - 1], w);
      }
      if (weighted) {
        for (uint64_t k = from; k < to; ++k) {
          bits.Put(WeightField(csr.weights[k]), ww);
        }
      }
      p = bits.Finish();
    }
    offsets[i + 1] = static_cast<uint32_t>(to - first_edge);
    put_byte_offset(i + 1, p - stream);
  }
  const uint64_t length = CompressedBlockBytes(count, p - stream, narrow);
  std::memset(p, 0, dst + length - reinterpret_cast<std::byte*>(p));
  BlockHeader h{
      .magic = kBlockMagic,
      .flags = kBlockFlagCompressed | (weighted ? kBlockFlagWeighted : 0u) |
               (split_piece ? kBlockFlagSplitPiece : 0u) |
               (narrow ? kBlockFlagNarrowOffsets : 0u),
      .first_vertex = first,
      .vertex_count = count,
      .edge_count = edges,
      .length = static_cast<uint32_t>(length),
      .first_edge = first_edge,
  };
  std::memcpy(dst, &h, sizeof(h));
  return static_cast<uint32_t>(length);
}

absl::StatusOr<BlockView> ParseAnyBlock(std::span<const std::byte> bytes,
                                        DecodeBuffer& buffer,
                                        uint64_t num_vertices) {
  if (bytes.size() < sizeof(BlockHeader)) {
    return BlockView::Parse(bytes, num_vertices);
  }
  BlockHeader h;
  std::memcpy(&h, bytes.data(), sizeof(h));
  if (h.magic != kBlockMagic || !(h.flags & kBlockFlagCompressed)) {
    return BlockView::Parse(bytes, num_vertices);
  }
  const bool weighted = h.flags & kBlockFlagWeighted;
  const bool narrow = h.flags & kBlockFlagNarrowOffsets;
  auto bad = [&](std::string_view what) {
    return absl::DataLossError(absl::StrFormat(
        "compressed block at vertex %d: %s", h.first_vertex, what));
  };
  if (reinterpret_cast<uintptr_t>(bytes.data()) % alignof(uint64_t) != 0) {
    return absl::InvalidArgumentError("block bytes are not 8-byte aligned");
  }
  if (h.vertex_count == 0 || h.length > bytes.size() ||
      StreamAt(h.vertex_count, narrow) > h.length) {
    return bad(absl::StrFormat("length %d does not hold %d vertices' offsets",
                               h.length, h.vertex_count));
  }
  if (uint64_t{h.first_vertex} + h.vertex_count - 1 > kMaxVertexId) {
    return bad("vertex range overflows");
  }
  const uint32_t k = h.vertex_count;
  const auto* offsets =
      reinterpret_cast<const uint32_t*>(bytes.data() + sizeof(BlockHeader));
  const std::byte* const byte_offsets_at = bytes.data() + ByteOffsetsAt(k);
  auto byte_offsets = [&](uint32_t i) -> uint32_t {
    if (narrow) {
      uint16_t v;
      std::memcpy(&v, byte_offsets_at + 2 * i, 2);
      return v;
    }
    uint32_t v;
    std::memcpy(&v, byte_offsets_at + 4 * uint64_t{i}, 4);
    return v;
  };
  if (offsets[0] != 0 || offsets[k] != h.edge_count || byte_offsets(0) != 0) {
    return bad("offsets do not span its edges");
  }
  const uint64_t stream_bytes = byte_offsets(k);
  if (h.length != CompressedBlockBytes(k, stream_bytes, narrow)) {
    return bad(absl::StrFormat("length %d disagrees with its %d stream bytes",
                               h.length, stream_bytes));
  }
  for (uint32_t i = 0; i < k; ++i) {
    if (offsets[i] > offsets[i + 1] || byte_offsets(i) > byte_offsets(i + 1)) {
      return bad(
          absl::StrFormat("offsets decrease at vertex %d", h.first_vertex + i));
    }
  }
  // A segment of d edges holds at least d - 1 bits and 3 bytes: a forged
  // edge count cannot make the decoded block large.
  if (h.edge_count > 8 * stream_bytes + 1) {
    return bad("more edges than its stream can hold");
  }
  // The plain block: header, the same offsets, targets, weights.
  const uint64_t plain = BlockBytes(k, h.edge_count, weighted);
  // Grown, never shrunk: resizing down and up again would zero the
  // difference for every block.
  if (buffer.words.size() < plain / 8) buffer.words.resize(plain / 8);
  auto* out = reinterpret_cast<std::byte*>(buffer.words.data());
  BlockHeader ph = h;
  ph.flags &= ~(kBlockFlagCompressed | kBlockFlagNarrowOffsets);
  ph.length = static_cast<uint32_t>(plain);
  std::memcpy(out, &ph, sizeof(ph));
  std::memcpy(out + sizeof(BlockHeader), offsets, 4 * (uint64_t{k} + 1));
  auto* targets = reinterpret_cast<VertexId*>(out + sizeof(BlockHeader) +
                                              4 * (uint64_t{k} + 1));
  Weight* weights =
      weighted ? reinterpret_cast<Weight*>(targets + h.edge_count) : nullptr;
  const auto* stream =
      reinterpret_cast<const uint8_t*>(bytes.data() + StreamAt(k, narrow));
  const auto* limit = reinterpret_cast<const uint8_t*>(bytes.data()) + h.length;
  for (uint32_t i = 0; i < k; ++i) {
    const uint32_t lo = offsets[i];
    const int64_t d = offsets[i + 1] - lo;
    if (DecodeVertex(weighted, stream + byte_offsets(i),
                     stream + byte_offsets(i + 1), limit, h.first_vertex + i, d,
                     d, targets + lo, weighted ? weights + lo : nullptr) != d) {
      return bad(absl::StrFormat("the edges of vertex %d do not decode",
                                 h.first_vertex + i));
    }
  }
  // Padding is zero in plain blocks too.
  const uint64_t used = sizeof(BlockHeader) + 4 * (uint64_t{k} + 1) +
                        uint64_t{h.edge_count} * (weighted ? 8 : 4);
  std::memset(out + used, 0, plain - used);
  // The decoded targets, checked against the vertex count in one pass.
  return BlockView::Parse({out, plain}, num_vertices);
}

absl::Status DecodeSegment(std::span<const std::byte> segment, VertexId v,
                           bool weighted, std::vector<VertexId>& targets,
                           std::vector<Weight>& weights) {
  const auto* p = reinterpret_cast<const uint8_t*>(segment.data());
  const uint8_t* const end = p + segment.size();
  // d - 1 gaps need at least d - 1 bits, after 2 bytes of varints.
  const uint64_t room = 8 * segment.size() + 1;
  targets.resize(room);
  weights.resize(weighted ? room : 0);
  const int64_t d = DecodeVertex(weighted, p, end, end, v, -1, room,
                                 targets.data(), weights.data());
  if (d < 0) {
    return absl::DataLossError(absl::StrFormat(
        "the edge segment of vertex %d read from a memory node does not "
        "decode",
        v));
  }
  targets.resize(d);
  weights.resize(weighted ? d : 0);
  return absl::OkStatus();
}

}  // namespace dmg::store

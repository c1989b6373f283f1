// Fuzzes the block parsers (store/block_format.*, block_codec.*): the input
// is one block's bytes, as a compute node gets them from a memory node.
// BlockView::Parse (plain blocks) and ParseAnyBlock (plain or compressed,
// decoded into a buffer) must reject bad bytes with an error; a block they
// accept must be safe to read whole: every vertex's targets and weights lie
// inside the bytes (ASan checks each access), the offsets add up to
// edge_count, and both parsers agree on a plain block. DecodeSegment (a
// sparse push decodes one vertex's segment alone) gets the bytes too.
// Seeds: valid plain / compressed, weighted / unweighted blocks and split
// pieces, cut from images make_corpus builds.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "store/block_codec.h"
#include "store/block_format.h"

namespace {

using dmg::store::BlockView;
using dmg::store::VertexId;

// Reads everything a consumer of the view may read.
uint64_t Walk(const BlockView& b) {
  uint64_t edges = 0, sum = 0;
  for (uint32_t i = 0; i < b.vertex_count(); ++i) {
    const VertexId v = b.first_vertex() + i;
    FUZZ_CHECK(b.contains(v));
    for (VertexId t : b.targets(v)) sum += t;
    if (b.weighted()) {
      FUZZ_CHECK(b.weights(v).size() == b.targets(v).size());
      for (dmg::store::Weight w : b.weights(v)) sum += w;
    }
    edges += b.targets(v).size();
  }
  FUZZ_CHECK(edges == b.edge_count());
  for (VertexId t : b.all_targets()) sum += t;
  return sum;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Blocks always sit 8-byte aligned (in images and READ buffers).
  std::vector<uint64_t> words((size + 7) / 8);
  if (size > 0) std::memcpy(words.data(), data, size);
  const std::span<const std::byte> bytes(
      reinterpret_cast<const std::byte*>(words.data()), size);

  absl::StatusOr<BlockView> plain = BlockView::Parse(bytes);
  uint64_t plain_sum = 0;
  if (plain.ok()) plain_sum = Walk(*plain);

  dmg::store::DecodeBuffer buffer;
  absl::StatusOr<BlockView> any = dmg::store::ParseAnyBlock(bytes, buffer);
  if (any.ok()) {
    const uint64_t any_sum = Walk(*any);
    if (plain.ok()) {
      FUZZ_CHECK(any->first_vertex() == plain->first_vertex());
      FUZZ_CHECK(any->vertex_count() == plain->vertex_count());
      FUZZ_CHECK(any->edge_count() == plain->edge_count());
      FUZZ_CHECK(any_sum == plain_sum);
    }
  } else {
    FUZZ_CHECK(!plain.ok());  // a valid plain block is a valid block
  }

  // One segment of a compressed block, for vertex 7 (weights per the input).
  std::vector<VertexId> targets;
  std::vector<dmg::store::Weight> weights;
  const bool weighted = size > 0 && (data[0] & 1);
  if (dmg::store::DecodeSegment(bytes, 7, weighted, targets, weights).ok() &&
      weighted) {
    FUZZ_CHECK(weights.size() == targets.size());
  }
  return 0;
}

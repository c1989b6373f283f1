// Compressed blocks (store/block_codec.h): every vertex's adjacency read
// back through compressed blocks, whole or one segment at a time, equals an
// adjacency built independently from the edge list here; compressed images
// pass full validation, are version 2 and smaller than plain ones; and
// malformed blocks (forged lengths, offsets, widths, ids, random damage)
// are errors, never crashes or ids past the last vertex.
#include "store/block_codec.h"

#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "store/block_format.h"
#include "store/build_graph.h"
#include "store/generator.h"
#include "store/graph_source.h"
#include "store/layout.h"
#include "tests/test_util.h"

namespace dmg::store {
namespace {

using dmg::testing::RefAdjacency;
using dmg::testing::ReferenceAdjacency;

StoreImage Build(const EdgeList& edges, uint32_t block_size, bool compress,
                 bool symmetrize = false, uint32_t memory_nodes = 1) {
  CleanOptions clean;
  clean.symmetrize = symmetrize;
  LayoutOptions layout;
  layout.block_size = block_size;
  layout.compress = compress;
  layout.num_memory_nodes = memory_nodes;
  // Full validation decodes every block.
  return dmg::testing::BuildValidatedImage(edges, clean, layout);
}

// Block `e`'s bytes in its region.
std::span<const std::byte> BlockBytesOf(const StoreImage& image, Direction d,
                                        const DirectoryEntry& e) {
  const RegionEntry* r = image.FindRegion(BlocksKind(d), e.memory_node);
  return image.RegionBytes(*r).subspan(e.offset, e.length);
}

using Adjacency = std::vector<std::pair<uint32_t, int32_t>>;

// v's adjacency in direction d, from whole decoded blocks (`segments`:
// from each block's segment of v, decoded alone).
Adjacency ReadBack(const StoreImage& image, Direction d, VertexId v,
                   bool segments) {
  Adjacency out;
  auto [first, last] = FindBlocks(image.directory(d), v);
  for (size_t i = first; i < last; ++i) {
    const DirectoryEntry& e = image.directory(d)[i];
    std::span<const std::byte> bytes = BlockBytesOf(image, d, e);
    if (!segments) {
      DecodeBuffer buffer;
      absl::StatusOr<BlockView> b = ParseAnyBlock(bytes, buffer);
      EXPECT_TRUE(b.ok()) << b.status();
      if (!b.ok()) return out;
      for (size_t k = 0; k < b->targets(v).size(); ++k) {
        out.push_back(
            {b->targets(v)[k], image.weighted() ? b->weights(v)[k] : 0});
      }
      continue;
    }
    const uint32_t j = v - e.first_vertex;
    const bool narrow = NarrowOffsets(image.block_size());
    EXPECT_EQ((reinterpret_cast<const BlockHeader*>(bytes.data())->flags &
               kBlockFlagNarrowOffsets) != 0,
              narrow);
    auto byte_offset = [&](uint32_t i) -> uint32_t {
      const std::byte* at = bytes.data() + ByteOffsetsAt(e.vertex_count);
      if (narrow) return reinterpret_cast<const uint16_t*>(at)[i];
      return reinterpret_cast<const uint32_t*>(at)[i];
    };
    std::vector<VertexId> t;
    std::vector<Weight> w;
    absl::Status s = DecodeSegment(
        bytes.subspan(StreamAt(e.vertex_count, narrow) + byte_offset(j),
                      byte_offset(j + 1) - byte_offset(j)),
        v, image.weighted(), t, w);
    EXPECT_TRUE(s.ok()) << s;
    for (size_t k = 0; k < t.size(); ++k) {
      out.push_back({t[k], image.weighted() ? w[k] : 0});
    }
  }
  return out;
}

void ExpectMatchesReference(const StoreImage& image, const EdgeList& edges,
                            bool symmetrize) {
  RefAdjacency out = ReferenceAdjacency(edges, symmetrize, false);
  RefAdjacency in = ReferenceAdjacency(edges, symmetrize, true);
  ASSERT_EQ(image.num_vertices(), edges.num_vertices);
  for (VertexId v = 0; v < edges.num_vertices; ++v) {
    for (bool segments : {false, true}) {
      ASSERT_EQ(ReadBack(image, Direction::kOut, v, segments), out[v])
          << "out-adjacency of vertex " << v << (segments ? " (segment)" : "");
      ASSERT_EQ(ReadBack(image, Direction::kIn, v, segments), in[v])
          << "in-adjacency of vertex " << v << (segments ? " (segment)" : "");
    }
  }
}

TEST(BlockCodecTest, EveryAdjacencyRoundTripsWholeAndBySegment) {
  EdgeList e;
  e.num_vertices = 600;                            // 500..599 have no arcs
  for (VertexId v = 1; v < 400; ++v) e.Add(0, v);  // split at 256 bytes
  for (VertexId v = 1; v < 399; ++v) e.Add(v, v + 1);
  e.Add(350, 3);  // a first target below its vertex
  e.Add(7, 499);  // a wide gap
  e.Add(499, 0);  // the first target 499 below
  // 128 KiB blocks have u32 byte offsets, the others u16.
  for (uint32_t block_size : {256u, 1024u, kDefaultBlockSize, 131072u}) {
    SCOPED_TRACE(::testing::Message() << "block " << block_size);
    StoreImage image = Build(e, block_size, true);
    EXPECT_TRUE(image.compressed());
    EXPECT_EQ(image.superblock().format_version, 2u);
    ExpectMatchesReference(image, e, false);
    for (const DirectoryEntry& d : image.directory(Direction::kOut)) {
      EXPECT_LE(d.length, block_size);
      EXPECT_EQ(d.length % 8, 0u);
    }
  }
  // Plain images stay version 1: older readers keep reading them.
  EXPECT_EQ(Build(e, 1024, false).superblock().format_version, 1u);
}

TEST(BlockCodecTest, WeightsOfEveryRangeRoundTrip) {
  EdgeList e;
  e.num_vertices = 300;
  for (VertexId v = 1; v < 300; ++v) {
    e.Add(0, v, static_cast<Weight>(v * 7 - 1000));  // negative ones too
    e.Add(v, (v * 13) % 300, v % 2 ? INT32_MAX : INT32_MIN);
    e.Add(v, (v * 17 + 1) % 300, 0);
  }
  for (uint32_t block_size : {256u, 4096u, 131072u}) {
    StoreImage image = Build(e, block_size, true);
    ASSERT_TRUE(image.weighted());
    ExpectMatchesReference(image, e, false);
  }
}

TEST(BlockCodecTest, GeneratedGraphsAgreeAndShrink) {
  for (auto kind :
       {GeneratorParams::Kind::kKron, GeneratorParams::Kind::kUrand}) {
    EdgeList e = Generate({kind, 12, 16, 7});
    for (uint32_t nodes : {1u, 3u}) {
      SCOPED_TRACE(::testing::Message() << "nodes " << nodes);
      StoreImage image = Build(e, kDefaultBlockSize, true, true, nodes);
      ExpectMatchesReference(image, e, /*symmetrize=*/true);
      StoreImage plain = Build(e, kDefaultBlockSize, false, true, nodes);
      EXPECT_LT(image.bytes().size(), plain.bytes().size() * 3 / 4);
      // Read back into a CSR: the same graph.
      Graph a = GraphFromImage(image), b = GraphFromImage(plain);
      EXPECT_EQ(a.out.offsets, b.out.offsets);
      EXPECT_EQ(a.out.targets, b.out.targets);
      EXPECT_EQ(a.in.targets, b.in.targets);
    }
  }
}

TEST(BlockCodecTest, IdsUpToTheLastOneRoundTrip) {
  // A CSR of three vertices whose targets span all ids (the codec does not
  // look at num_vertices): gaps of 32 bits, a first target far below.
  Csr csr;
  csr.num_vertices = 3;
  csr.offsets = {0, 3, 4, 6};
  csr.targets = {0,
                 5,
                 static_cast<VertexId>(kMaxVertexId),
                 0,
                 static_cast<VertexId>(kMaxVertexId - 1),
                 static_cast<VertexId>(kMaxVertexId)};
  for (bool narrow : {false, true}) {
    std::vector<uint64_t> words(64);
    auto* dst = reinterpret_cast<std::byte*>(words.data());
    const uint32_t length = EncodeBlock(csr, 0, 3, 0, 6, false, narrow, dst);
    ASSERT_LE(length, words.size() * 8);
    DecodeBuffer buffer;
    absl::StatusOr<BlockView> b = ParseAnyBlock({dst, length}, buffer);
    ASSERT_TRUE(b.ok()) << b.status();
    for (VertexId v = 0; v < 3; ++v) {
      std::span<const VertexId> t = b->targets(v);
      EXPECT_EQ(
          std::vector<VertexId>(t.begin(), t.end()),
          std::vector<VertexId>(csr.targets.begin() + csr.offsets[v],
                                csr.targets.begin() + csr.offsets[v + 1]));
    }
  }
}

// A small compressed block to damage: vertex 0 -> {1, 2, 40}, 1 -> {0}.
struct Sample {
  std::vector<uint64_t> words = std::vector<uint64_t>(32);
  uint32_t length = 0;
  std::byte* bytes() { return reinterpret_cast<std::byte*>(words.data()); }
  uint8_t* stream() {
    return reinterpret_cast<uint8_t*>(bytes() + StreamAt(2, false));
  }
  uint32_t* byte_offsets() {
    return reinterpret_cast<uint32_t*>(bytes() + ByteOffsetsAt(2));
  }
  absl::Status Parse() {
    DecodeBuffer buffer;
    return ParseAnyBlock({bytes(), length}, buffer).status();
  }
};
Sample MakeSample() {
  Csr csr;
  csr.num_vertices = 2;
  csr.offsets = {0, 3, 4};
  csr.targets = {1, 2, 40, 0};
  Sample s;
  s.length = EncodeBlock(csr, 0, 2, 0, 4, false, /*narrow=*/false, s.bytes());
  return s;
}

TEST(BlockCodecTest, MalformedBlocksAreErrors) {
  ASSERT_TRUE(MakeSample().Parse().ok());
  {
    Sample s = MakeSample();  // shorter than its header says
    s.length -= 8;
    EXPECT_FALSE(s.Parse().ok());
  }
  {
    Sample s = MakeSample();  // a segment that runs past the stream
    s.byte_offsets()[1] += 1;
    EXPECT_FALSE(s.Parse().ok());
  }
  {
    Sample s = MakeSample();  // a degree that disagrees with the offsets
    s.stream()[0] = 2;
    EXPECT_FALSE(s.Parse().ok());
  }
  {
    Sample s = MakeSample();  // a gap width over 32 bits
    s.stream()[2] = 40;
    EXPECT_FALSE(s.Parse().ok());
  }
  {
    Sample s = MakeSample();  // vertex 1's first target: 0 - 5, below 0
    const uint32_t at = s.byte_offsets()[1];
    s.stream()[at + 1] = 9;  // zigzag(-5)
    EXPECT_FALSE(s.Parse().ok());
  }
  {
    Sample s = MakeSample();  // a plain parser never reads it as plain
    EXPECT_FALSE(BlockView::Parse({s.bytes(), s.length}).ok());
  }
}

TEST(BlockCodecTest, RandomDamageIsAnErrorOrValidIds) {
  EdgeList e = Generate({GeneratorParams::Kind::kKron, 9, 8, 5});
  StoreImage image = Build(e, 1024, true, true);
  std::mt19937_64 rng(7);
  DecodeBuffer buffer;
  int errors = 0, decoded = 0;
  for (const DirectoryEntry& d : image.directory(Direction::kOut)) {
    std::span<const std::byte> bytes = BlockBytesOf(image, Direction::kOut, d);
    std::vector<uint64_t> copy(bytes.size() / 8);
    for (int trial = 0; trial < 40; ++trial) {
      std::memcpy(copy.data(), bytes.data(), bytes.size());
      auto* p = reinterpret_cast<uint8_t*>(copy.data());
      for (int k = 0; k < 3; ++k) p[rng() % bytes.size()] ^= 1 << (rng() % 8);
      absl::StatusOr<BlockView> b = ParseAnyBlock(
          {reinterpret_cast<const std::byte*>(copy.data()), bytes.size()},
          buffer);
      if (!b.ok()) {
        ++errors;
        continue;
      }
      ++decoded;
      for (VertexId t : b->all_targets()) ASSERT_LE(t, kMaxVertexId);
    }
  }
  EXPECT_GT(errors, 0);
  EXPECT_GT(decoded, 0);  // flips in padding, or in bits still valid
}

TEST(BlockCodecTest, ImagesAreCompressedOnRequestAndValidated) {
  EdgeList e = Generate({GeneratorParams::Kind::kKron, 8, 8, 5});
  StoreImage plain = Build(e, 1024, false, true);
  // A compressed flag in a version 1 superblock: refused.
  AlignedBuffer copy(plain.bytes().size());
  std::copy(plain.bytes().begin(), plain.bytes().end(), copy.data());
  auto* sb = reinterpret_cast<Superblock*>(copy.data());
  sb->flags |= kSuperblockFlagCompressed;
  sb->crc32 = Crc32({copy.data(), kSuperblockSize - 4});
  absl::StatusOr<StoreImage> bad =
      StoreImage::FromBuffer(std::move(copy), "x.img");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("version 2"), std::string::npos)
      << bad.status();
  // A block whose byte offsets claim the other width (checksums made to
  // match): refused, since single segments are located by the layout's.
  StoreImage packed = Build(e, 1024, true, true);
  AlignedBuffer forged(packed.bytes().size());
  std::copy(packed.bytes().begin(), packed.bytes().end(), forged.data());
  auto* fsb = reinterpret_cast<Superblock*>(forged.data());
  const DirectoryEntry first = packed.directory(Direction::kOut)[0];
  for (uint32_t r = 0; r < fsb->num_regions; ++r) {
    RegionEntry& region = fsb->regions[r];
    if (region.kind != static_cast<uint32_t>(RegionKind::kOutBlocks)) continue;
    auto* h = reinterpret_cast<BlockHeader*>(forged.data() + region.offset +
                                             first.offset);
    h->flags ^= kBlockFlagNarrowOffsets;
    region.crc32 = Crc32({forged.data() + region.offset, region.length});
  }
  fsb->crc32 = Crc32({forged.data(), kSuperblockSize - 4});
  absl::StatusOr<StoreImage> wrong =
      StoreImage::FromBuffer(std::move(forged), "y.img");
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("wrong width"), std::string::npos)
      << wrong.status();
}

}  // namespace
}  // namespace dmg::store

// The block layout: every vertex's adjacency, read back through the block
// directory and self-describing blocks, must equal a plain CSR built
// independently here. Covers empty vertices, vertices split over several
// blocks, the last block, weights, both directions and striping.
#include "store/layout.h"

#include <vector>

#include "gtest/gtest.h"
#include "store/block_format.h"
#include "store/block_index.h"
#include "store/build_graph.h"
#include "store/generator.h"
#include "tests/test_util.h"

namespace dmg::store {
namespace {

using dmg::testing::RefAdjacency;
using dmg::testing::ReferenceAdjacency;

// Adjacency of v in direction d, read only through the directory and blocks.
std::vector<std::pair<uint32_t, int32_t>> ReadThroughBlocks(
    const StoreImage& image, Direction d, VertexId v) {
  std::vector<std::pair<uint32_t, int32_t>> out;
  auto [first, last] = FindBlocks(image.directory(d), v);
  EXPECT_LT(first, last) << "no block for vertex " << v;
  for (size_t i = first; i < last; ++i) {
    BlockView block = image.block(d, image.directory(d)[i]);
    EXPECT_TRUE(block.contains(v));
    auto targets = block.targets(v);
    for (size_t k = 0; k < targets.size(); ++k) {
      out.push_back({targets[k], image.weighted() ? block.weights(v)[k] : 0});
    }
  }
  return out;
}

void ExpectMatchesReference(const StoreImage& image, const EdgeList& edges,
                            bool symmetrize) {
  RefAdjacency out = ReferenceAdjacency(edges, symmetrize, false);
  RefAdjacency in = ReferenceAdjacency(edges, symmetrize, true);
  ASSERT_EQ(image.num_vertices(), edges.num_vertices);
  uint64_t arcs = 0;
  for (VertexId v = 0; v < edges.num_vertices; ++v) {
    ASSERT_EQ(ReadThroughBlocks(image, Direction::kOut, v), out[v])
        << "out-adjacency of vertex " << v;
    ASSERT_EQ(ReadThroughBlocks(image, Direction::kIn, v), in[v])
        << "in-adjacency of vertex " << v;
    arcs += out[v].size();
  }
  EXPECT_EQ(image.num_arcs(), arcs);
}

StoreImage Build(const EdgeList& edges, uint32_t block_size,
                 uint32_t memory_nodes = 1, bool symmetrize = false) {
  CleanOptions clean;
  clean.symmetrize = symmetrize;
  LayoutOptions layout;
  layout.block_size = block_size;
  layout.num_memory_nodes = memory_nodes;
  return dmg::testing::BuildValidatedImage(edges, clean, layout);
}

TEST(LayoutTest, SmallGraphWithEmptyVerticesAndTrailingIsolated) {
  EdgeList e;
  e.num_vertices = 10;  // 7..9 have no arcs at all
  e.Add(0, 1);
  e.Add(0, 2);
  e.Add(2, 0);
  e.Add(4, 6);
  StoreImage image = Build(e, 256);
  ExpectMatchesReference(image, e, false);
  // Vertex 3 has no out-edges but is still in exactly one block.
  auto [first, last] = FindBlocks(image.directory(Direction::kOut), 3);
  EXPECT_EQ(last - first, 1u);
  EXPECT_EQ(ReadThroughBlocks(image, Direction::kOut, 9).size(), 0u);
}

TEST(LayoutTest, VertexSpanningSeveralBlocks) {
  EdgeList e;
  e.num_vertices = 400;
  for (VertexId v = 1; v < 400; ++v) e.Add(0, v);  // 399 out-edges from 0
  for (VertexId v = 1; v < 399; ++v) e.Add(v, v + 1);
  const uint32_t block_size = 256;
  StoreImage image = Build(e, block_size);
  ExpectMatchesReference(image, e, false);
  auto dir = image.directory(Direction::kOut);
  auto [first, last] = FindBlocks(dir, 0);
  uint64_t per_piece = EdgesPerSplitPiece(block_size, false);
  EXPECT_EQ(last - first, (399 + per_piece - 1) / per_piece);
  for (size_t i = first; i < last; ++i) {
    EXPECT_TRUE(dir[i].flags & kEntryFlagSplitPiece);
    EXPECT_LE(dir[i].length, block_size);
  }
  // Vertex 399 has in-degree 2 (from 0 and 398): in the last in-block.
  auto in = image.directory(Direction::kIn);
  auto [f2, l2] = FindBlocks(in, 399);
  EXPECT_EQ(l2, in.size());
  EXPECT_EQ(l2 - f2, 1u);
}

// The index answers as the binary search over the whole directory, for
// every vertex: split runs at chunk edges, isolated vertices, tiny and
// large blocks, one block for the whole graph.
TEST(LayoutTest, BlockIndexAgreesWithFindBlocks) {
  EdgeList star;  // runs longer and shorter than the index walks
  star.num_vertices = 1200;
  for (VertexId v = 1; v < 1200; ++v) star.Add(0, v);
  for (VertexId v = 1; v < 1199; ++v) star.Add(v, v + 1);
  for (VertexId v = 0; v < 300; ++v) star.Add(256, v);  // a run mid-graph
  EdgeList kron = Generate({GeneratorParams::Kind::kKron, 10, 8, 3});
  for (const EdgeList* e : {&star, &kron}) {
    for (uint32_t block_size : {256u, 1024u, 65536u}) {
      StoreImage image = Build(*e, block_size);
      for (Direction d : {Direction::kOut, Direction::kIn}) {
        auto dir = image.directory(d);
        BlockIndex index(dir, image.num_vertices());
        EXPECT_LE(index.bytes(), 8 * dir.size() + 8);
        for (VertexId v = 0; v < image.num_vertices(); ++v) {
          ASSERT_EQ(index.Find(dir, v), FindBlocks(dir, v))
              << "vertex " << v << ", block size " << block_size;
        }
      }
    }
  }
}

TEST(LayoutTest, EveryBlockRespectsTheBlockSize) {
  EdgeList e = Generate({GeneratorParams::Kind::kKron, 10, 8, 3});
  for (uint32_t block_size : {256u, 1024u, 4096u, 65536u}) {
    StoreImage image = Build(e, block_size);
    for (Direction d : {Direction::kOut, Direction::kIn}) {
      for (const DirectoryEntry& entry : image.directory(d)) {
        EXPECT_LE(entry.length, block_size);
        EXPECT_EQ(entry.length % 8, 0u);
      }
    }
  }
}

TEST(LayoutTest, WeightsTravelWithTheirEdges) {
  EdgeList e;
  e.num_vertices = 300;
  for (VertexId v = 1; v < 300; ++v) {
    e.Add(0, v, static_cast<Weight>(v * 7 - 1000));
    e.Add(v, (v * 13) % 300, static_cast<Weight>(v));
    e.Add(v, (v * 13) % 300, static_cast<Weight>(v + 5));  // parallel, heavier
  }
  StoreImage image = Build(e, 512);
  ASSERT_TRUE(image.weighted());
  ExpectMatchesReference(image, e, false);
}

TEST(LayoutTest, GeneratedGraphsAgreeWithPlainCsr) {
  for (auto kind :
       {GeneratorParams::Kind::kKron, GeneratorParams::Kind::kUrand}) {
    EdgeList e = Generate({kind, 12, 16, 7});
    for (uint32_t block_size : {256u, kDefaultBlockSize}) {
      for (uint32_t nodes : {1u, 3u}) {
        SCOPED_TRACE(::testing::Message()
                     << "block " << block_size << " nodes " << nodes);
        StoreImage image = Build(e, block_size, nodes);
        ExpectMatchesReference(image, e, /*symmetrize=*/true);
        EXPECT_EQ(image.superblock().num_memory_nodes, nodes);
      }
    }
  }
}

TEST(LayoutTest, StripingSpreadsBlocksOverMemoryNodes) {
  EdgeList e = Generate({GeneratorParams::Kind::kUrand, 12, 16, 1});
  StoreImage image = Build(e, 4096, 4);
  std::vector<uint64_t> bytes(4, 0);
  for (const DirectoryEntry& entry : image.directory(Direction::kOut)) {
    bytes[entry.memory_node] += entry.length;
  }
  for (uint64_t b : bytes) {
    EXPECT_GT(b, 0u);
    EXPECT_NEAR(static_cast<double>(b), bytes[0], 0.05 * bytes[0]);
  }
}

TEST(LayoutTest, RejectsBadBlockSize) {
  EdgeList e;
  e.num_vertices = 2;
  e.Add(0, 1);
  absl::StatusOr<Graph> g = BuildGraph(e, {});
  ASSERT_TRUE(g.ok());
  LayoutOptions layout;
  layout.block_size = 100;
  EXPECT_FALSE(BuildStoreImage(*g, layout).ok());
  layout.block_size = 4097;
  EXPECT_FALSE(BuildStoreImage(*g, layout).ok());
}

TEST(BlockViewTest, RejectsGarbage) {
  alignas(8) std::byte junk[64] = {};
  EXPECT_FALSE(BlockView::Parse({junk, sizeof(junk)}).ok());
  EXPECT_FALSE(BlockView::Parse({junk, 8}).ok());
}

}  // namespace
}  // namespace dmg::store

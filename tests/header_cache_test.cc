// The header cache alone: its size is what BytesFor promised, offsets come
// back as filled (from many threads too), and Degree sums a vertex's pieces
// — checked on a hand-built directory and against the CSR of a generated
// graph laid out in small blocks (so that many vertices are split).
#include "compute_node/header_cache.h"

#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "store/block_format.h"
#include "store/build_graph.h"
#include "store/generator.h"
#include "store/layout.h"

namespace dmg::compute {
namespace {

using store::DirectoryEntry;
using store::kEntryFlagSplitPiece;

// Blocks given by their vertices' edge counts in that block; split pieces
// repeat their vertex.
struct HandDir {
  std::vector<DirectoryEntry> entries;
  std::vector<std::vector<uint32_t>> offsets;  // per entry
  std::vector<uint64_t> degree;                // per vertex

  HandDir& Block(const std::vector<uint32_t>& edges) {
    const uint32_t first = degree.size();
    Add(first, edges, 0);
    for (uint32_t e : edges) degree.push_back(e);
    return *this;
  }
  HandDir& Split(const std::vector<uint32_t>& pieces) {
    const uint32_t v = degree.size();
    uint64_t total = 0;
    for (uint32_t e : pieces) {
      Add(v, {e}, kEntryFlagSplitPiece);
      total += e;
    }
    degree.push_back(total);
    return *this;
  }

 private:
  void Add(uint32_t first, const std::vector<uint32_t>& edges, uint16_t flags) {
    std::vector<uint32_t> off = {0};
    for (uint32_t e : edges) off.push_back(off.back() + e);
    entries.push_back({first, static_cast<uint32_t>(edges.size()), 0,
                       static_cast<uint32_t>(
                           store::BlockBytes(edges.size(), off.back(), false)),
                       0, flags, 0});
    offsets.push_back(std::move(off));
  }
};

HandDir Sample() {
  HandDir d;
  d.Block({0, 3, 0, 5})      // vertices 0..3, two of degree 0
      .Split({54, 54, 7})    // vertex 4
      .Block({2, 0})         // 5, 6
      .Split({10, 1})        // 7
      .Block({0})            // 8: a block of one isolated vertex
      .Block({4, 0, 0, 9});  // 9..12
  return d;
}

TEST(HeaderCacheTest, BytesForMatchesBytes) {
  HandDir d = Sample();
  HeaderCache cache(d.entries);
  EXPECT_EQ(HeaderCache::BytesFor(d.entries), cache.bytes());
  // At least every offset of every block header.
  uint64_t offsets = 0;
  for (const auto& o : d.offsets) offsets += o.size();
  EXPECT_GE(cache.bytes(), 4 * offsets);
  EXPECT_EQ(HeaderCache::BytesFor({}), HeaderCache({}).bytes());
}

TEST(HeaderCacheTest, FillAndOffsetsRoundTrip) {
  HandDir d = Sample();
  HeaderCache cache(d.entries);
  // Filled out of order.
  for (uint32_t i = d.entries.size(); i-- > 0;) {
    cache.Fill(i, d.offsets[i].data());
  }
  for (uint32_t i = 0; i < d.entries.size(); ++i) {
    const uint32_t* got = cache.offsets(i);
    for (size_t k = 0; k < d.offsets[i].size(); ++k) {
      EXPECT_EQ(got[k], d.offsets[i][k]) << "entry " << i << " offset " << k;
    }
  }
}

TEST(HeaderCacheTest, DegreeSumsPiecesAndHandlesZeroDegrees) {
  HandDir d = Sample();
  HeaderCache cache(d.entries);
  for (uint32_t i = 0; i < d.entries.size(); ++i) {
    cache.Fill(i, d.offsets[i].data());
  }
  for (uint32_t v = 0; v < d.degree.size(); ++v) {
    EXPECT_EQ(cache.Degree(v), d.degree[v]) << "vertex " << v;
  }
  EXPECT_EQ(cache.Degree(4), 115u);
  EXPECT_EQ(cache.Degree(0), 0u);
  EXPECT_EQ(cache.Degree(8), 0u);
}

// A cache of some entries (a compute node's own range): sized for them
// alone, holding them and no others, with the same offsets and degrees.
TEST(HeaderCacheTest, ACacheOfSomeEntriesHoldsThoseAlone) {
  HandDir d = Sample();
  const uint32_t first = 1, last = 5;  // vertex 4 (three pieces), 5 and 6
  HeaderCache cache(d.entries, nullptr, first, last);
  EXPECT_EQ(HeaderCache::BytesFor(d.entries, first, last), cache.bytes());
  EXPECT_LT(cache.bytes(), HeaderCache::BytesFor(d.entries));
  EXPECT_EQ(cache.first_entry(), first);
  EXPECT_EQ(cache.last_entry(), last);
  EXPECT_TRUE(cache.Holds(first, last));
  EXPECT_TRUE(cache.Holds(2, 3));
  EXPECT_FALSE(cache.Holds(0, 2));
  EXPECT_FALSE(cache.Holds(4, 6));
  for (uint32_t i = first; i < last; ++i) cache.Fill(i, d.offsets[i].data());
  for (uint32_t i = first; i < last; ++i) {
    for (size_t k = 0; k < d.offsets[i].size(); ++k) {
      EXPECT_EQ(cache.offsets(i)[k], d.offsets[i][k]);
    }
  }
  for (uint32_t v = 4; v <= 6; ++v) {
    EXPECT_EQ(cache.Degree(v), d.degree[v]) << "vertex " << v;
  }
  EXPECT_EQ(HeaderCache(d.entries, nullptr, 3, 3).bytes(), 0u);
}

// A generated graph in 256-byte blocks, as a memory node would hold it.
struct Image {
  store::Graph graph;
  store::StoreImage image;
};

Image Build(int scale, uint32_t block_size) {
  store::EdgeList e =
      store::Generate({store::GeneratorParams::Kind::kKron, scale, 16, 3});
  absl::StatusOr<store::Graph> g = store::BuildGraph(std::move(e), {});
  EXPECT_TRUE(g.ok()) << g.status();
  store::LayoutOptions layout;
  layout.block_size = block_size;
  absl::StatusOr<store::StoreImage> image = store::BuildStoreImage(*g, layout);
  EXPECT_TRUE(image.ok()) << image.status();
  return {*std::move(g), *std::move(image)};
}

TEST(HeaderCacheTest, DegreesOfAGeneratedGraphMatchItsCsr) {
  Image im = Build(9, 256);
  for (store::Direction d : {store::Direction::kOut, store::Direction::kIn}) {
    SCOPED_TRACE(store::RegionKindName(store::BlocksKind(d)));
    const store::Csr& csr =
        d == store::Direction::kOut ? im.graph.out : im.graph.in;
    std::span<const DirectoryEntry> dir = im.image.directory(d);
    const store::RegionEntry* region =
        im.image.FindRegion(store::BlocksKind(d), 0);
    ASSERT_NE(region, nullptr);
    // The layout must exercise both split and isolated vertices.
    int split = 0, isolated = 0;
    for (const DirectoryEntry& e : dir) {
      split += (e.flags & kEntryFlagSplitPiece) != 0;
    }
    for (uint32_t v = 0; v < csr.num_vertices; ++v) {
      isolated += csr.degree(v) == 0;
    }
    ASSERT_GT(split, 0);
    ASSERT_GT(isolated, 0);

    HeaderCache cache(dir);
    EXPECT_EQ(HeaderCache::BytesFor(dir), cache.bytes());
    // Filled from several threads at once, as the workers do.
    const int kThreads = 4;
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (uint32_t i = t; i < dir.size(); i += kThreads) {
          const std::byte* block =
              im.image.bytes().data() + region->offset + dir[i].offset;
          cache.Fill(i, reinterpret_cast<const uint32_t*>(
                            block + sizeof(store::BlockHeader)));
        }
      });
    }
    for (std::thread& t : threads) t.join();
    for (uint32_t i = 0; i < dir.size(); ++i) {
      const store::BlockView b = im.image.block(d, dir[i]);
      const uint32_t* off = cache.offsets(i);
      EXPECT_EQ(off[0], 0u);
      EXPECT_EQ(off[dir[i].vertex_count], b.edge_count());
      for (uint32_t k = 0; k < dir[i].vertex_count; ++k) {
        EXPECT_EQ(off[k + 1] - off[k],
                  b.targets(dir[i].first_vertex + k).size());
      }
    }
    for (uint32_t v = 0; v < csr.num_vertices; ++v) {
      ASSERT_EQ(cache.Degree(v), csr.degree(v)) << "vertex " << v;
    }
  }
}

}  // namespace
}  // namespace dmg::compute

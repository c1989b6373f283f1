// The hot-block cache alone, over hand-built directories: the chosen set
// fits its space and prefers the blocks of highest average degree; a block
// is admitted on its second whole read, once, with the bytes offered, even
// when many threads offer it at once; lookups count, peeks do not.
#include "compute_node/hot_block_cache.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "store/block_format.h"

namespace dmg::compute {
namespace {

using store::DirectoryEntry;

struct BlockSpec {
  uint32_t vertices;
  uint64_t edges;
  uint32_t length;
};

// A directory of consecutive blocks; first_edge accumulates the edges, so
// the last block's edges are only known from num_arcs.
struct TestDir {
  std::vector<DirectoryEntry> entries;
  uint64_t num_arcs = 0;

  explicit TestDir(const std::vector<BlockSpec>& specs) {
    uint32_t vertex = 0;
    uint64_t offset = 0;
    for (const BlockSpec& s : specs) {
      entries.push_back({vertex, s.vertices, offset, s.length, 0, 0, num_arcs});
      vertex += s.vertices;
      offset += s.length;
      num_arcs += s.edges;
    }
  }
  uint64_t total_bytes() const {
    uint64_t t = 0;
    for (const DirectoryEntry& e : entries) t += e.length;
    return t;
  }
};

// Some bytes for block `entry` (its length, 8-byte aligned), distinct per
// entry and `version`.
std::vector<uint64_t> BlockBytes(const DirectoryEntry& e, uint32_t entry,
                                 uint64_t version = 0) {
  std::vector<uint64_t> words(e.length / 8);
  for (size_t k = 0; k < words.size(); ++k) {
    words[k] = (uint64_t{entry} << 40) ^ (version << 32) ^ (k * 2654435761u);
  }
  return words;
}
const std::byte* Bytes(const std::vector<uint64_t>& words) {
  return reinterpret_cast<const std::byte*>(words.data());
}

TEST(HotBlockCacheTest, ChosenSetFitsTheSpace) {
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 100; ++trial) {
    std::vector<BlockSpec> specs(1 + rng() % 40);
    for (BlockSpec& s : specs) {
      s = {static_cast<uint32_t>(1 + rng() % 30), rng() % 500,
           static_cast<uint32_t>(64 + 8 * (rng() % 500))};
    }
    TestDir dir(specs);
    const uint64_t space = rng() % (dir.total_bytes() + 4096);
    HotBlockCache cache(dir.entries, dir.num_arcs, space);
    uint64_t preferred_bytes = 0;
    for (uint32_t i = 0; i < dir.entries.size(); ++i) {
      if (cache.preferred(i)) preferred_bytes += dir.entries[i].length;
    }
    EXPECT_LE(cache.bytes(), space);
    EXPECT_EQ(cache.bytes(), preferred_bytes);
    if (space >= dir.total_bytes()) {
      EXPECT_EQ(cache.bytes(), dir.total_bytes()) << "all blocks fit";
    }
  }
}

// Equal lengths; degrees (edges per vertex) 2, 50, 10, 200, 1, 1000. The
// last block's 1000 edges come from num_arcs alone.
TestDir SixBlocks() {
  return TestDir({{10, 20, 512},
                  {2, 100, 512},
                  {5, 50, 512},
                  {1, 200, 512},
                  {20, 20, 512},
                  {1, 1000, 512}});
}

TEST(HotBlockCacheTest, PrefersTheHighestAverageDegree) {
  TestDir dir = SixBlocks();
  const std::vector<double> degree = {2, 50, 10, 200, 1, 1000};
  for (uint32_t k = 0; k <= dir.entries.size(); ++k) {
    SCOPED_TRACE(testing::Message() << "space for " << k << " blocks");
    HotBlockCache cache(dir.entries, dir.num_arcs, k * 512 + 100);
    EXPECT_EQ(cache.bytes(), k * 512);
    double lowest_preferred = 1e18, highest_other = -1;
    uint32_t count = 0;
    for (uint32_t i = 0; i < dir.entries.size(); ++i) {
      if (cache.preferred(i)) {
        ++count;
        lowest_preferred = std::min(lowest_preferred, degree[i]);
      } else {
        highest_other = std::max(highest_other, degree[i]);
      }
    }
    EXPECT_EQ(count, k);
    EXPECT_GT(lowest_preferred, highest_other);
    if (k >= 1) {
      EXPECT_TRUE(cache.preferred(5)) << "the densest block is the last one";
    }
  }
}

// A compute node's own range: its entries are chosen first, densest
// first, then the others' with what room is left; holds_all says whether
// it holds all of its range.
TEST(HotBlockCacheTest, ChoosesItsRangeFirst) {
  TestDir dir = SixBlocks();
  // Entries 1..3: degrees 50, 10, 200; the densest block (5) is not in it.
  HotBlockCache two(dir.entries, dir.num_arcs, 2 * 512 + 100, 1, 4);
  EXPECT_EQ(two.bytes(), 2u * 512);
  EXPECT_FALSE(two.holds_all());
  const std::vector<bool> want = {false, true, false, true, false, false};
  for (uint32_t i = 0; i < dir.entries.size(); ++i) {
    EXPECT_EQ(two.preferred(i), want[i]) << "entry " << i;
  }
  HotBlockCache three(dir.entries, dir.num_arcs, 3 * 512, 1, 4);
  EXPECT_EQ(three.bytes(), 3u * 512);
  EXPECT_TRUE(three.holds_all()) << "its range fits, the other blocks aside";
  EXPECT_FALSE(three.preferred(5));
  // Room for one more: the densest of the others.
  HotBlockCache four(dir.entries, dir.num_arcs, 4 * 512 + 100, 1, 4);
  EXPECT_TRUE(four.holds_all());
  EXPECT_TRUE(four.preferred(5));
  EXPECT_FALSE(four.preferred(0));
  EXPECT_FALSE(four.preferred(4));
  // An empty range: the others alone.
  HotBlockCache none(dir.entries, dir.num_arcs, 512 + 100, 2, 2);
  EXPECT_EQ(none.bytes(), 512u);
  EXPECT_TRUE(none.preferred(5));
}

// A full scan (every block of a range read whole) admits on its first read
// when the cache holds the whole direction: nothing will be evicted and
// full scans come back. With room for only part, it waits for the second.
TEST(HotBlockCacheTest, FullScansAdmitAtOnceOnlyWhenEverythingFits) {
  TestDir dir({{4, 40, 256}, {4, 40, 512}, {4, 40, 1024}});
  const std::vector<uint64_t> b1 = BlockBytes(dir.entries[1], 1);
  HotBlockCache all(dir.entries, dir.num_arcs, dir.total_bytes());
  ASSERT_TRUE(all.holds_all());
  EXPECT_EQ(all.Peek(1), nullptr);
  all.Offer(1, Bytes(b1), /*full_scan=*/true);
  const std::byte* p = all.Peek(1);
  ASSERT_NE(p, nullptr) << "the first full-scan read admits";
  EXPECT_EQ(std::memcmp(p, Bytes(b1), dir.entries[1].length), 0);
  EXPECT_EQ(all.Peek(0), nullptr);
  EXPECT_EQ(all.Peek(2), nullptr);
  // A frontier read (not a full scan) still waits for the second.
  const std::vector<uint64_t> b0 = BlockBytes(dir.entries[0], 0);
  all.Offer(0, Bytes(b0));
  EXPECT_EQ(all.Peek(0), nullptr);

  // Equal degrees: the chosen part is blocks 0 and 1 (directory order).
  HotBlockCache part(dir.entries, dir.num_arcs, 256 + 512 + 100);
  ASSERT_FALSE(part.holds_all());
  ASSERT_TRUE(part.preferred(0));
  part.Offer(0, Bytes(b0), /*full_scan=*/true);
  EXPECT_EQ(part.Peek(0), nullptr) << "part of the direction: second read";
  part.Offer(0, Bytes(b0), /*full_scan=*/true);
  EXPECT_NE(part.Peek(0), nullptr);
}

TEST(HotBlockCacheTest, AdmitsOnTheSecondReadWithTheBytesOffered) {
  TestDir dir({{4, 40, 256}, {4, 40, 512}, {4, 40, 1024}});
  HotBlockCache cache(dir.entries, dir.num_arcs, dir.total_bytes());
  for (uint32_t i = 0; i < 3; ++i) ASSERT_TRUE(cache.preferred(i));
  const std::vector<uint64_t> b1 = BlockBytes(dir.entries[1], 1);

  EXPECT_EQ(cache.Peek(1), nullptr);
  cache.Offer(1, Bytes(b1));
  EXPECT_EQ(cache.Peek(1), nullptr) << "a first read copies nothing in";
  EXPECT_EQ(cache.Lookup(1), nullptr);
  cache.Offer(1, Bytes(b1));
  const std::byte* p = cache.Peek(1);
  ASSERT_NE(p, nullptr) << "the second read admits";
  EXPECT_EQ(std::memcmp(p, Bytes(b1), dir.entries[1].length), 0);
  EXPECT_NE(p, Bytes(b1)) << "a copy, not the caller's buffer";
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 8, 0u);
  // Other blocks are unaffected.
  EXPECT_EQ(cache.Peek(0), nullptr);
  EXPECT_EQ(cache.Peek(2), nullptr);

  // Peek does not count; Lookup does.
  EXPECT_EQ(cache.hits(), 0u);
  EXPECT_EQ(cache.bytes_saved(), 0u);
  EXPECT_EQ(cache.Lookup(1), p);
  EXPECT_EQ(cache.Lookup(1), p);
  EXPECT_EQ(cache.hits(), 2u);
  EXPECT_EQ(cache.bytes_saved(), 2u * dir.entries[1].length);
  EXPECT_EQ(cache.Peek(1), p);
  EXPECT_EQ(cache.hits(), 2u);
  // A failed Lookup counts nothing.
  EXPECT_EQ(cache.Lookup(0), nullptr);
  EXPECT_EQ(cache.hits(), 2u);

  // Admitted once: later offers (other bytes) change nothing.
  const std::vector<uint64_t> other = BlockBytes(dir.entries[1], 1, 7);
  cache.Offer(1, Bytes(other));
  cache.Offer(1, Bytes(other));
  EXPECT_EQ(cache.Peek(1), p);
  EXPECT_EQ(std::memcmp(p, Bytes(b1), dir.entries[1].length), 0);

  // Every block, admitted on its own second read, keeps its own bytes.
  const std::vector<uint64_t> b0 = BlockBytes(dir.entries[0], 0);
  const std::vector<uint64_t> b2 = BlockBytes(dir.entries[2], 2);
  cache.Offer(2, Bytes(b2));
  cache.Offer(0, Bytes(b0));
  cache.Offer(2, Bytes(b2));
  cache.Offer(0, Bytes(b0));
  ASSERT_NE(cache.Peek(0), nullptr);
  ASSERT_NE(cache.Peek(2), nullptr);
  EXPECT_EQ(std::memcmp(cache.Peek(0), Bytes(b0), dir.entries[0].length), 0);
  EXPECT_EQ(std::memcmp(cache.Peek(2), Bytes(b2), dir.entries[2].length), 0);
  EXPECT_EQ(std::memcmp(cache.Peek(1), Bytes(b1), dir.entries[1].length), 0);
}

TEST(HotBlockCacheTest, NonPreferredBlocksAreNeverAdmitted) {
  // Room for the densest block (entry 1) only.
  TestDir dir({{8, 8, 512}, {1, 500, 512}, {8, 16, 512}});
  HotBlockCache cache(dir.entries, dir.num_arcs, 600);
  ASSERT_TRUE(cache.preferred(1));
  for (uint32_t i : {0u, 2u}) {
    ASSERT_FALSE(cache.preferred(i));
    const std::vector<uint64_t> b = BlockBytes(dir.entries[i], i);
    for (int k = 0; k < 5; ++k) cache.Offer(i, Bytes(b));
    EXPECT_EQ(cache.Peek(i), nullptr);
    EXPECT_EQ(cache.Lookup(i), nullptr);
  }
  EXPECT_EQ(cache.hits(), 0u);
  EXPECT_EQ(cache.bytes(), 512u);
}

TEST(HotBlockCacheTest, EmptySpaceChoosesNothing) {
  TestDir dir({{8, 8, 512}, {1, 500, 512}});
  HotBlockCache cache(dir.entries, dir.num_arcs, 0);
  EXPECT_EQ(cache.bytes(), 0u);
  const std::vector<uint64_t> b = BlockBytes(dir.entries[1], 1);
  cache.Offer(1, Bytes(b));
  cache.Offer(1, Bytes(b));
  EXPECT_FALSE(cache.preferred(1));
  EXPECT_EQ(cache.Peek(1), nullptr);
}

TEST(HotBlockCacheTest, ConcurrentOffersAdmitOnceWithConsistentBytes) {
  // Space exactly for all blocks: a block admitted twice would take the
  // room of another, which then could not be admitted.
  // Large blocks: a copy takes long enough for other offers to collide
  // with it.
  std::vector<BlockSpec> specs;
  for (int i = 0; i < 12; ++i) {
    specs.push_back({static_cast<uint32_t>(1 + i % 5),
                     static_cast<uint64_t>(10 + i),
                     static_cast<uint32_t>(32768 + 64 * (i % 7))});
  }
  TestDir dir(specs);
  const uint32_t n = dir.entries.size();
  for (int round = 0; round < 20; ++round) {
    HotBlockCache cache(dir.entries, dir.num_arcs, dir.total_bytes());
    ASSERT_EQ(cache.bytes(), dir.total_bytes());
    constexpr int kThreads = 8;
    std::atomic<int> ready{0};
    std::atomic<int> torn{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        // Each thread offers from its own buffers, in its own order.
        std::vector<std::vector<uint64_t>> mine;
        for (uint32_t i = 0; i < n; ++i) {
          mine.push_back(BlockBytes(dir.entries[i], i));
        }
        // Half the threads in directory order (they collide on every
        // block), the others shuffled.
        std::vector<uint32_t> order(n);
        for (uint32_t i = 0; i < n; ++i) order[i] = i;
        if (t % 2 == 1) {
          std::shuffle(order.begin(), order.end(), std::mt19937(t + round));
        }
        ready.fetch_add(1);
        while (ready.load() < kThreads) {
        }
        for (int pass = 0; pass < 3; ++pass) {
          for (uint32_t i : order) {
            cache.Offer(i, Bytes(mine[i]));
            // Whatever a reader sees is a whole block.
            if (const std::byte* p = cache.Peek(i)) {
              if (std::memcmp(p, Bytes(mine[i]), dir.entries[i].length) != 0) {
                torn.fetch_add(1);
              }
            }
          }
        }
      });
    }
    for (std::thread& t : threads) t.join();
    EXPECT_EQ(torn.load(), 0);
    for (uint32_t i = 0; i < n; ++i) {
      const std::byte* p = cache.Peek(i);
      ASSERT_NE(p, nullptr)
          << "block " << i << " not admitted (round " << round << ")";
      const std::vector<uint64_t> want = BlockBytes(dir.entries[i], i);
      EXPECT_EQ(std::memcmp(p, Bytes(want), dir.entries[i].length), 0);
    }
    EXPECT_EQ(cache.hits(), 0u) << "Peek never counts";
  }
}

// A well-formed block of `vertices` vertices from `first`, vertex i with i
// edges to vertex 0 (as the store lays it out), for directory checks.
std::vector<uint64_t> WellFormedBlock(uint32_t first, uint32_t vertices,
                                      uint64_t first_edge,
                                      DirectoryEntry* entry) {
  uint32_t edges = 0;
  for (uint32_t i = 0; i < vertices; ++i) edges += i;
  const uint64_t length = store::BlockBytes(vertices, edges, false);
  std::vector<uint64_t> words(length / 8, 0);
  auto* p = reinterpret_cast<std::byte*>(words.data());
  store::BlockHeader h{store::kBlockMagic, 0,     first,
                       vertices,           edges, static_cast<uint32_t>(length),
                       first_edge};
  std::memcpy(p, &h, sizeof(h));
  auto* off = reinterpret_cast<uint32_t*>(p + sizeof(h));
  for (uint32_t i = 0, at = 0; i <= vertices; at += i, ++i) off[i] = at;
  *entry = {first, vertices, 0,         static_cast<uint32_t>(length),
            0,     0,        first_edge};
  return words;
}

TEST(HotBlockCacheTest, AdmittedWellFormedBlocksKeepTheirParsedView) {
  DirectoryEntry e0, e1;
  const std::vector<uint64_t> b0 = WellFormedBlock(0, 6, 0, &e0);
  const std::vector<uint64_t> b1 = WellFormedBlock(6, 5, 15, &e1);
  e1.offset = e0.length;
  std::vector<DirectoryEntry> dir = {e0, e1};
  HotBlockCache cache(dir, 15 + 10, e0.length + e1.length);
  // Block 1 is offered with bytes that do not match the directory.
  std::vector<uint64_t> wrong = b1;
  reinterpret_cast<store::BlockHeader*>(wrong.data())->first_vertex = 7;
  for (int k = 0; k < 2; ++k) {
    cache.Offer(0, Bytes(b0));
    cache.Offer(1, Bytes(wrong));
  }
  const std::byte* p0 = cache.Peek(0);
  const std::byte* p1 = cache.Peek(1);
  ASSERT_NE(p0, nullptr);
  ASSERT_NE(p1, nullptr);
  const store::BlockView* v0 = cache.View(0, p0);
  ASSERT_NE(v0, nullptr);
  EXPECT_EQ(v0->first_vertex(), 0u);
  EXPECT_EQ(v0->targets(4).size(), 4u);
  EXPECT_EQ(v0->targets(4).data(),
            reinterpret_cast<const store::VertexId*>(
                p0 + sizeof(store::BlockHeader) + 4 * 7) +
                6)
      << "the view points into the cached copy";
  EXPECT_EQ(cache.View(0, Bytes(b0)), nullptr) << "only for the cached bytes";
  EXPECT_EQ(cache.View(1, p1), nullptr)
      << "a block that failed validation has no view: readers parse it";
}

}  // namespace
}  // namespace dmg::compute

// Source mirrors' layout (compute_node/source_mirror.h), against a plain
// model of who reads what: for random needs on 2-6 nodes,
//  - an owner's packed order holds each of its vertices some other node
//    reads, once, and no other;
//  - each reader's runs, laid over the owner's own order, name exactly the
//    vertices of that owner's range it reads, in the order of its list;
//  - every node computes the same packed sizes;
//  - groups follow the readers' sets, so a reader's runs are few.
#include "compute_node/source_mirror.h"

#include <random>
#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace dmg::compute {
namespace {

TEST(MirrorLayoutTest, EachReaderReadsExactlyItsVerticesFromEveryOwner) {
  std::mt19937_64 rng(7);
  for (int nodes = 2; nodes <= 6; ++nodes) {
    const uint64_t n = 3000 + 17 * nodes;
    std::vector<uint64_t> bounds{0};
    for (int k = 1; k < nodes; ++k) bounds.push_back(n * k / nodes + k);
    bounds.push_back(n);
    std::vector<std::vector<uint64_t>> needs(
        nodes, std::vector<uint64_t>((n + 63) / 64));
    std::vector<std::set<uint64_t>> model(nodes);
    for (int j = 0; j < nodes; ++j) {
      const double p = 0.1 + 0.15 * j;
      for (uint64_t v = 0; v < n; ++v) {
        if (std::uniform_real_distribution<>(0, 1)(rng) >= p) continue;
        needs[j][v >> 6] |= uint64_t{1} << (v & 63);  // own ones ignored
        if (v < bounds[j] || v >= bounds[j + 1]) model[j].insert(v);
      }
    }
    std::vector<std::span<const uint64_t>> spans(needs.begin(), needs.end());
    std::vector<MirrorLayout> layouts;
    for (int j = 0; j < nodes; ++j) layouts.emplace_back(bounds, j, spans);
    for (int k = 0; k < nodes; ++k) {
      std::span<const store::VertexId> order = layouts[k].own_order();
      std::set<uint64_t> expected;
      for (int j = 0; j < nodes; ++j) {
        for (uint64_t v : model[j]) {
          if (v >= bounds[k] && v < bounds[k + 1]) expected.insert(v);
        }
      }
      ASSERT_EQ(std::set<uint64_t>(order.begin(), order.end()), expected);
      ASSERT_EQ(order.size(), expected.size()) << "a vertex twice";
      for (int j = 0; j < nodes; ++j) {
        ASSERT_EQ(layouts[j].packed(k), order.size()) << j << " of " << k;
        if (j == k) continue;
        const MirrorLayout::Part& part = layouts[j].from(k);
        std::vector<uint64_t> read;
        for (const auto& [first, count] : part.runs) {
          for (uint64_t p = first; p < first + count; ++p) {
            ASSERT_LT(p, order.size());
            read.push_back(order[p]);
          }
        }
        ASSERT_EQ(read, std::vector<uint64_t>(part.vertices.begin(),
                                              part.vertices.end()));
        std::set<uint64_t> mine;
        for (uint64_t v : model[j]) {
          if (v >= bounds[k] && v < bounds[k + 1]) mine.insert(v);
        }
        EXPECT_EQ(std::set<uint64_t>(read.begin(), read.end()), mine);
        // 2^(nodes - 2) groups hold j; Gray order joins them into at most
        // half as many runs, and 1 for the highest reader bit.
        EXPECT_LE(part.runs.size(), std::max(1, 1 << (nodes - 2)));
      }
    }
  }
}

}  // namespace
}  // namespace dmg::compute

// Source mirrors: the layout (compute_node/source_mirror.h), against a
// plain model of who reads what: for random needs on 2-6 nodes,
//  - an owner's packed order holds each of its vertices some other node
//    reads, once, and no other;
//  - each reader's runs, laid over the owner's own order, name exactly the
//    vertices of that owner's range it reads, in the order of its list;
//  - every node computes the same packed sizes;
//  - groups follow the readers' sets, so a reader's runs are few.
// And the protocol (compute_node/source_mirrors.h), fed posts written here:
//  - a reader uses an owner's copy only in the superstep after the post
//    that wrote it, at that superstep's parity, and not after remote
//    atomics (Invalidate) or once it dropped the array;
//  - malformed items are a DataLoss naming the node, never a crash.
#include "compute_node/source_mirror.h"

#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "compute_node/source_mirrors.h"
#include "compute_node/wire_codec.h"
#include "gtest/gtest.h"
#include "transport/local_transport.h"

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

// A post's mirror items, as SourceMirrors::Put writes them.
struct Items {
  std::string bytes;
  int count = 0;
  void Needs(int d, const std::vector<uint64_t>& bits) {
    PutVarint(bytes, 1);
    PutVarint(bytes, d);
    wire::PutVertexSet(bytes, bits);
    ++count;
  }
  void Want(int array, int d) {
    for (int x : {2, array, d}) PutVarint(bytes, x);
    ++count;
  }
  void Region(int array, int d, uint32_t id0, uint32_t id1) {
    for (int x : {3, array, d}) PutVarint(bytes, x);
    for (uint32_t id : {id0, id1}) {
      for (uint64_t x : {uint64_t{0}, uint64_t{id}, uint64_t{4096}}) {
        PutVarint(bytes, x);
      }
    }
    ++count;
  }
  void Written(int array) {
    for (int x : {4, array}) PutVarint(bytes, x);
    ++count;
  }
  std::string Post() const {
    std::string out;
    PutVarint(out, count);
    return out + bytes;
  }
};

TEST(SourceMirrorsTest, ACopyServesOnlyTheSuperstepAfterItsPost) {
  transport::LocalTransport transport({});
  const std::vector<uint64_t> bounds{0, 4096, 8192};
  compute::SourceMirrors m(transport, bounds, /*node=*/0);
  std::vector<uint64_t> mine(128, 0), theirs(128, 0);
  mine[64] = 0xff;  // node 0 reads 4096..4103 of node 1
  theirs[0] = 0xf;  // node 1 reads 0..3 of node 0
  auto take = [&](int k, int step, const Items& items,
                  std::vector<bool> changed = {}) {
    std::string post = items.Post();
    std::string_view in = post;
    ASSERT_TRUE(m.Take(k, step, in, changed).ok());
    EXPECT_TRUE(in.empty());
  };
  Items a0, a1;
  a0.Needs(1, mine);
  a1.Needs(1, theirs);
  take(0, 1, a0);
  take(1, 1, a1);
  Items want, region;
  want.Want(0, 1);
  region.Region(0, 1, 40, 41);
  take(0, 2, want);
  take(1, 2, region);
  EXPECT_EQ(m.For(0, 1, 3), nullptr) << "nothing written yet";
  Items written;
  written.Written(0);
  take(1, 3, written, {true});
  for (int step : {2, 3, 5}) EXPECT_EQ(m.For(0, 1, step), nullptr) << step;
  EXPECT_EQ(m.For(0, 0, 4), nullptr) << "another direction's layout";
  const compute::MirrorSource* s = m.For(0, 1, 4);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->regions[1].id, 40u) << "superstep 4's parity";
  EXPECT_EQ(s->regions[0].length, 0u) << "its own range";
  ASSERT_EQ(s->layout->from(1).vertices.size(), 8u);
  EXPECT_EQ(s->layout->own_order().size(), 4u);
  // A change posted without a copy voids the last one.
  take(1, 4, Items(), {true});
  EXPECT_EQ(m.For(0, 1, 5), nullptr);
  // A later collective of the same superstep writes it again.
  take(1, 4, written, {true});
  ASSERT_NE(m.For(0, 1, 5), nullptr);
  EXPECT_EQ(m.For(0, 1, 5)->regions[1].id, 41u) << "superstep 5's parity";
  take(1, 5, written, {true});
  m.Invalidate(0);
  EXPECT_EQ(m.For(0, 1, 6), nullptr) << "remote atomics";
  take(1, 6, written, {true});
  ASSERT_NE(m.For(0, 1, 7), nullptr);
  m.Drop(0);
  take(1, 7, written, {true});
  EXPECT_EQ(m.For(0, 1, 8), nullptr) << "dropped";
}

TEST(SourceMirrorsTest, MalformedItemsAreADataLossNamingTheNode) {
  transport::LocalTransport transport({});
  const std::vector<uint64_t> bounds{0, 4096, 8192};
  Items needs;
  needs.Needs(1, std::vector<uint64_t>(128, 0));
  const std::string whole = needs.Post();
  std::vector<std::string> posts{"",
                                 std::string("\x05", 1),
                                 std::string("\x01\x09", 2),
                                 std::string("\x01\x01\x07", 3),
                                 std::string("\x01\x03\x00\x01", 4),
                                 std::string("\x01\x02\x00", 3),
                                 std::string("\x01\x02\x88\x27\x01", 5),
                                 whole.substr(0, whole.size() / 2)};
  for (const std::string& post : posts) {
    compute::SourceMirrors m(transport, bounds, 0);
    std::string_view in = post;
    const absl::Status s = m.Take(1, 1, in, {});
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
    EXPECT_NE(s.message().find("compute node 1"), std::string::npos) << s;
  }
}

}  // namespace
}  // namespace dmg::compute

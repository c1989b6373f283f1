// Where a state array lives (compute_node/state_slices.h), through a fake
// transport whose regions are plain byte vectors:
//  - slices follow the compute nodes' ranges, and each node allocates its
//    own two regions on memory node (node mod memory nodes);
//  - after every node's post is taken, any node's READs and WRITEs of any
//    byte range land in the right slice's region at the right offset (cut
//    at slice boundaries and at the largest operation), as a plain array
//    would hold them;
//  - a word's address for remote atomics is its slice's, 8-byte aligned;
//  - malformed posts, short adopted regions and frees are handled.
#include "compute_node/state_slices.h"

#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace dmg::compute {
namespace {

// Regions as byte vectors, keyed by (memory node, id).
class FakeTransport : public transport::Transport {
 public:
  explicit FakeTransport(uint32_t memory_nodes) : nodes_(memory_nodes) {}
  std::map<std::pair<uint32_t, uint32_t>, std::vector<std::byte>> regions;
  std::vector<std::string> names;
  int frees = 0;
  int ops = 0;
  uint64_t largest_op = 0;

  std::string name() const override { return "fake"; }
  uint32_t num_memory_nodes() const override { return nodes_; }
  absl::StatusOr<std::unique_ptr<transport::Endpoint>> NewEndpoint() override {
    return std::unique_ptr<transport::Endpoint>(new FakeEndpoint(*this));
  }
  absl::StatusOr<transport::RegionInfo> AllocateRegion(
      uint32_t node, uint64_t bytes, const std::string& name) override {
    transport::RegionInfo r;
    r.node = node;
    r.id = ++next_id_;
    r.length = bytes;
    r.name = name;
    regions[{node, r.id}].assign(bytes, std::byte{0});
    names.push_back(name);
    return r;
  }
  absl::StatusOr<transport::RegionInfo> AllocateFilledRegion(
      uint32_t node, uint64_t bytes, const std::string& name,
      const transport::RegionFill& fill) override {
    absl::StatusOr<transport::RegionInfo> r = AllocateRegion(node, bytes, name);
    if (r.ok())
      transport::FillBytes(regions[{node, r->id}].data(), bytes, fill);
    return r;
  }
  absl::Status FreeRegion(uint32_t node, uint32_t region) override {
    ++frees;
    return regions.erase({node, region}) == 1
               ? absl::OkStatus()
               : absl::NotFoundError("no such region");
  }
  absl::StatusOr<std::vector<transport::RegionInfo>> ListRegions(
      uint32_t) override {
    return std::vector<transport::RegionInfo>();
  }

 private:
  class FakeEndpoint : public transport::Endpoint {
   public:
    explicit FakeEndpoint(FakeTransport& t) : t_(t) {}

   protected:
    absl::Status Execute(std::span<const transport::Op> ops) override {
      for (const transport::Op& op : ops) {
        auto it = t_.regions.find({op.node, op.region});
        if (it == t_.regions.end() ||
            op.offset + op.length > it->second.size()) {
          return absl::OutOfRangeError("outside every region");
        }
        ++t_.ops;
        t_.largest_op = std::max<uint64_t>(t_.largest_op, op.length);
        std::byte* remote = it->second.data() + op.offset;
        if (op.kind == transport::OpKind::kRead) {
          std::memcpy(op.local, remote, op.length);
        } else if (op.kind == transport::OpKind::kWrite) {
          std::memcpy(remote, op.local, op.length);
        } else {
          return absl::UnimplementedError("no atomics here");
        }
      }
      return absl::OkStatus();
    }

   private:
    FakeTransport& t_;
  };
  uint32_t nodes_;
  uint32_t next_id_ = 0;
};

// Three compute nodes' views of one array of `n` 8-byte elements over two
// memory nodes, every post taken.
struct ThreeNodes {
  static constexpr size_t kElem = 8;
  explicit ThreeNodes(uint64_t n) : transport(2) {
    const std::vector<uint64_t> bounds = {0, 4096, 3 * 4096, n};
    for (int k = 0; k < 3; ++k) {
      views.push_back(
          std::make_unique<StateSlices>("ranks", n * kElem, kElem, bounds, k));
      EXPECT_TRUE(views[k]->AllocateOwn(transport).ok());
    }
    std::vector<std::string> posts;
    for (auto& v : views) posts.push_back(v->Post(/*resident=*/true));
    for (auto& v : views) EXPECT_TRUE(v->TakePosts(posts, true).ok());
  }
  FakeTransport transport;
  std::vector<std::unique_ptr<StateSlices>> views;
};

TEST(StateSlicesTest, SlicesFollowTheRangesAndEachNodeAllocatesItsOwn) {
  const uint64_t n = 5 * 4096 + 100;
  ThreeNodes t(n);
  const StateSlices& middle = *t.views[1];
  ASSERT_EQ(middle.count(), 3);
  EXPECT_EQ(middle[0].begin, 0u);
  EXPECT_EQ(middle[1].begin, 4096u * 8);
  EXPECT_EQ(middle[1].end, 3u * 4096 * 8);
  EXPECT_EQ(middle[2].end, n * 8);
  EXPECT_TRUE(middle[1].mine);
  EXPECT_FALSE(middle[0].mine);
  EXPECT_EQ(middle.own_first_page(), 8u);  // 4096 elements of 8 bytes
  EXPECT_EQ(middle.own_end_page(), 24u);
  // The last slice's pages end with the array's last, partial, page.
  EXPECT_EQ(t.views[2]->own_end_page(), (n * 8 + 4095) / 4096);
  // Two regions each, on memory node (node mod 2), named per buffer and node.
  EXPECT_EQ(t.transport.regions.size(), 6u);
  EXPECT_EQ(middle.own().region[0].node, 1u);
  EXPECT_EQ(t.views[2]->own().region[1].node, 0u);
  EXPECT_EQ(t.transport.names[2], "ranks.0.1");
  EXPECT_EQ(t.transport.names[3], "ranks.1.1");
  // Every node knows where every slice is.
  for (int k = 0; k < 3; ++k) {
    for (int b = 0; b < 2; ++b) {
      EXPECT_EQ(t.views[0]->operator[](k).region[b].id,
                t.views[k]->own().region[b].id);
      EXPECT_EQ(t.views[2]->operator[](k).region[b].node,
                t.views[k]->own().region[b].node);
    }
  }
  EXPECT_TRUE(t.views[0]->all_resident());
}

TEST(StateSlicesTest, OneNodeHasOneSliceNamedPerBuffer) {
  FakeTransport transport(3);
  StateSlices one("depth", 12 * 4 + 4, 4, {}, 0);
  EXPECT_EQ(one.count(), 1);
  EXPECT_EQ(one.own().end, 52u);
  // Whole 8-byte words, so remote atomics reach the last element.
  EXPECT_EQ(one.OwnRegionBytes(), 56u);
  ASSERT_TRUE(one.AllocateOwn(transport).ok());
  EXPECT_EQ(transport.names, (std::vector<std::string>{"depth.0", "depth.1"}));
  EXPECT_EQ(one.own().region[0].node, 0u);
  one.FreeOwn(transport);
  EXPECT_EQ(transport.frees, 2);
  EXPECT_TRUE(transport.regions.empty());
  one.FreeOwn(transport);  // nothing left to free
  EXPECT_EQ(transport.frees, 2);
}

// Random byte ranges written through one node's view and read back through
// another's agree with a plain array, in both buffers independently.
TEST(StateSlicesTest, AnyRangeReachesTheSlicesThatHoldIt) {
  const uint64_t n = 5 * 4096 + 100;
  ThreeNodes t(n);
  std::vector<std::byte> model[2];
  for (auto& m : model) m.assign(n * 8, std::byte{0});
  std::mt19937_64 rng(7);
  auto ep = t.transport.NewEndpoint();
  ASSERT_TRUE(ep.ok());
  for (int round = 0; round < 200; ++round) {
    const int writer = static_cast<int>(rng() % 3);
    const int buffer = static_cast<int>(rng() % 2);
    const uint64_t at = rng() % (n * 8);
    const uint64_t length = 1 + rng() % std::min<uint64_t>(n * 8 - at, 70000);
    std::vector<std::byte> data(length);
    for (auto& b : data) b = static_cast<std::byte>(rng());
    t.views[writer]->Queue(**ep, /*write=*/true, buffer, at, data.data(),
                           length);
    ASSERT_TRUE((*ep)->Flush().ok());
    std::memcpy(model[buffer].data() + at, data.data(), length);
  }
  for (int reader = 0; reader < 3; ++reader) {
    for (int b = 0; b < 2; ++b) {
      std::vector<std::byte> got(n * 8);
      t.views[reader]->Queue(**ep, /*write=*/false, b, 0, got.data(),
                             got.size());
      ASSERT_TRUE((*ep)->Flush().ok());
      EXPECT_EQ(got, model[b]) << "reader " << reader << " buffer " << b;
    }
  }
}

TEST(StateSlicesTest, OperationsAreCutAtTheLargestATransportTakes) {
  const uint64_t n = uint64_t{3} << 20;  // 24 MiB of 8-byte elements
  FakeTransport transport(1);
  StateSlices one("big", n * 8, 8, {}, 0);
  ASSERT_TRUE(one.AllocateOwn(transport).ok());
  auto ep = transport.NewEndpoint();
  ASSERT_TRUE(ep.ok());
  std::vector<std::byte> all(n * 8, std::byte{1});
  one.Queue(**ep, /*write=*/true, 0, 0, all.data(), all.size());
  ASSERT_TRUE((*ep)->Flush().ok());
  EXPECT_EQ(transport.largest_op, StateSlices::kMaxOp);
  EXPECT_EQ(transport.ops, 6);
}

TEST(StateSlicesTest, AWordIsAddressedInItsSliceAlignedToEightBytes) {
  const uint64_t n = 5 * 4096 + 100;
  ThreeNodes t(n);
  // Element 4097 of 8 bytes: in node 1's slice, its second element.
  StateSlices::Word w = t.views[0]->WordAt(4097 * 8, 1);
  EXPECT_EQ(w.node, t.views[1]->own().region[1].node);
  EXPECT_EQ(w.region, t.views[1]->own().region[1].id);
  EXPECT_EQ(w.offset, 8u);
  EXPECT_EQ(w.shift, 0u);
  // A 4-byte element's address inside its word.
  StateSlices four("depth", 8192 * 4, 4, {0, 4096, 8192}, 0);
  FakeTransport transport(1);
  ASSERT_TRUE(four.AllocateOwn(transport).ok());
  w = four.WordAt(4099 * 4, 0);  // node 1's slice: region unknown yet
  EXPECT_EQ(w.offset, 8u);
  EXPECT_EQ(w.shift, 4u);
}

TEST(StateSlicesTest, BadPostsAndShortRegionsAreDataLoss) {
  const std::vector<uint64_t> bounds = {0, 4096, 8192};
  StateSlices a("labels", 8192 * 8, 8, bounds, 0);
  FakeTransport transport(1);
  ASSERT_TRUE(a.AllocateOwn(transport).ok());
  absl::Status s = a.TakePosts({a.Post(true), "short"}, true);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("compute node 1"), std::string::npos) << s;
  EXPECT_NE(s.message().find("labels"), std::string::npos) << s;
  s = a.TakePosts({a.Post(true)}, true);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  // One node not resident: not every node is.
  StateSlices b("labels", 8192 * 8, 8, bounds, 1);
  ASSERT_TRUE(b.AllocateOwn(transport).ok());
  ASSERT_TRUE(a.TakePosts({a.Post(true), b.Post(false)}, true).ok());
  EXPECT_FALSE(a.all_resident());
  // Regions left by an earlier attempt that are too short.
  transport::RegionInfo kept[2];
  kept[0].length = kept[1].length = 4096 * 8 - 8;
  s = b.AdoptOwn(kept);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("labels"), std::string::npos) << s;
  kept[0].length = kept[1].length = 4096 * 8;
  kept[1].id = 77;
  ASSERT_TRUE(b.AdoptOwn(kept).ok());
  EXPECT_EQ(b.own().region[1].id, 77u);
}

}  // namespace
}  // namespace dmg::compute

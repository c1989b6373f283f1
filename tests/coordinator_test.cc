// The coordinator's exchange pieces on their own: the batch mode's
// per-owner batches and the owner's checked read of them, and the atomic
// mode's compare-and-swaps racing on one memory node.
#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "coordinator/remote_atomics.h"
#include "coordinator/update_batches.h"
#include "gtest/gtest.h"
#include "memory_node/memory_node.h"
#include "transport/local_transport.h"

namespace dmg {
namespace {

using coordinator::RemoteUpdate;

TEST(UpdateBatchesTest, EachOwnerGetsItsTargetsAndChecksThem) {
  const std::vector<uint64_t> bounds = {0, 100, 250, 400};
  std::mt19937 rng(7);
  std::vector<RemoteUpdate<int64_t>> sorted;
  for (uint32_t v = 0; v < 400; ++v) {
    if (rng() % 3 == 0) {
      sorted.push_back({v, static_cast<int64_t>(rng() % 2001) - 1000});
    }
  }
  const std::vector<std::string> to =
      coordinator::BatchesByOwner<int64_t>(sorted, bounds);
  ASSERT_EQ(to.size(), 3u);
  std::vector<RemoteUpdate<int64_t>> all;
  for (int owner = 0; owner < 3; ++owner) {
    std::vector<RemoteUpdate<int64_t>> inbox;
    const std::string_view parts[] = {"", to[owner], ""};  // one sender
    ASSERT_TRUE(coordinator::ReadInbox<int64_t>(parts, bounds[owner],
                                                bounds[owner + 1], owner, inbox)
                    .ok());
    for (const auto& u : inbox) {
      EXPECT_GE(u.v, bounds[owner]);
      EXPECT_LT(u.v, bounds[owner + 1]);
    }
    all.insert(all.end(), inbox.begin(), inbox.end());
  }
  ASSERT_EQ(all.size(), sorted.size());
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(all[i].v, sorted[i].v);
    EXPECT_EQ(all[i].x, sorted[i].x);
  }
  // Owner 1's batch delivered to owner 2: refused, naming a vertex.
  std::vector<RemoteUpdate<int64_t>> wrong;
  const std::string_view misdelivered[] = {to[1]};
  absl::Status s =
      coordinator::ReadInbox<int64_t>(misdelivered, 250, 400, 2, wrong);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("not its owner"), std::string::npos) << s;
  // A batch cut short: refused, naming its sender.
  const std::string cut = to[0].substr(0, to[0].size() - 1);
  const std::string_view truncated[] = {"", cut};
  s = coordinator::ReadInbox<int64_t>(truncated, 0, 100, 0, wrong);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("compute node 1"), std::string::npos) << s;
}

// Two workers, each with its own endpoint, apply Min updates to the same
// 8-byte words as compare-and-swaps: every word ends at the least value
// sent to it, and every update that lowered a word reported landing.
TEST(RemoteAtomicsTest, RacingMinUpdatesLeaveTheLeast) {
  memory_node::MemoryNode node(0);
  transport::LocalTransport t({&node});
  constexpr uint64_t kWords = 64;
  auto region = t.AllocateRegion(0, kWords * 8, "words");
  ASSERT_TRUE(region.ok()) << region.status();
  {
    auto ep = t.NewEndpoint();
    ASSERT_TRUE(ep.ok());
    const std::vector<uint64_t> start(kWords, ~uint64_t{0});
    (*ep)->Write(0, region->id, 0, start.data(), kWords * 8);
    ASSERT_TRUE((*ep)->Flush().ok());
  }
  struct Update {
    uint64_t x;
    coordinator::CasWord cas;
  };
  constexpr int kWorkers = 2;
  std::vector<std::vector<Update>> work(kWorkers);
  std::vector<uint64_t> least(kWords, ~uint64_t{0});
  std::mt19937_64 rng(11);
  for (int w = 0; w < kWorkers; ++w) {
    for (int i = 0; i < 3000; ++i) {
      Update u{rng() % 100000, {}};
      const uint64_t word = rng() % kWords;
      u.cas.node = 0;
      u.cas.region = region->id;
      u.cas.offset = 8 * word;
      u.cas.expected = ~uint64_t{0};  // a stale guess: most retry
      u.cas.desired = u.x;
      least[word] = std::min(least[word], u.x);
      work[w].push_back(u);
    }
  }
  std::vector<int> landed(kWorkers, 0);
  std::vector<absl::Status> status(kWorkers);
  std::vector<std::thread> threads;
  for (int w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&, w] {
      auto ep = t.NewEndpoint();
      if (!ep.ok()) {
        status[w] = ep.status();
        return;
      }
      status[w] = coordinator::ApplyRemoteCas(
          **ep, std::span<Update>(work[w]),
          [](Update& u) {  // Min: only if it still lowers the word
            if (u.x >= u.cas.expected) return false;
            u.cas.desired = u.x;
            return true;
          },
          [&](const Update&) { ++landed[w]; });
    });
  }
  for (auto& th : threads) th.join();
  for (const absl::Status& s : status) ASSERT_TRUE(s.ok()) << s;
  auto ep = t.NewEndpoint();
  ASSERT_TRUE(ep.ok());
  std::vector<uint64_t> got(kWords);
  (*ep)->Read(0, region->id, 0, got.data(), kWords * 8);
  ASSERT_TRUE((*ep)->Flush().ok());
  EXPECT_EQ(got, least);
  // At least one landing per word that got an update; none beyond the
  // updates sent.
  EXPECT_GE(landed[0] + landed[1], static_cast<int>(kWords));
  EXPECT_LE(landed[0] + landed[1], 2 * 3000);
}

}  // namespace
}  // namespace dmg

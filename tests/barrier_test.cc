// The superstep barrier alone: compute nodes are threads, each with its own
// fake endpoint; the memory node is a 64-byte counter behind a mutex that
// the fakes serve FETCH_AND_ADD and READ on. No node leaves a superstep
// before every node has arrived; transport errors come back.
#include "compute_node/barrier.h"

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "transport/transport.h"

namespace dmg::compute {
namespace {

constexpr uint32_t kNode = 0;
constexpr uint32_t kRegion = 5;

// One 64-byte region of memory node 0, shared by every fake endpoint.
struct CounterRegion {
  std::mutex mu;
  alignas(8) std::byte bytes[64] = {};
  uint64_t value() {
    std::lock_guard lock(mu);
    uint64_t v;
    std::memcpy(&v, bytes, 8);
    return v;
  }
};

class CounterEndpoint : public transport::Endpoint {
 public:
  explicit CounterEndpoint(CounterRegion& region) : region_(region) {}

  // Injected failures, by operation kind.
  bool fail_faa = false;
  bool fail_reads = false;
  int faa_ops = 0, read_ops = 0;

 protected:
  absl::Status Execute(std::span<const transport::Op> ops) override {
    for (const transport::Op& op : ops) {
      if (op.node != kNode || op.region != kRegion ||
          op.offset + op.length > sizeof(region_.bytes)) {
        return absl::InvalidArgumentError("outside the counter region");
      }
      std::lock_guard lock(region_.mu);
      switch (op.kind) {
        case transport::OpKind::kFetchAndAdd: {
          ++faa_ops;
          if (fail_faa) return absl::UnavailableError("faa failed");
          uint64_t old;
          std::memcpy(&old, region_.bytes + op.offset, 8);
          const uint64_t now = old + op.operand;
          std::memcpy(region_.bytes + op.offset, &now, 8);
          std::memcpy(op.local, &old, 8);
          break;
        }
        case transport::OpKind::kRead:
          ++read_ops;
          if (fail_reads) return absl::UnavailableError("read failed");
          std::memcpy(op.local, region_.bytes + op.offset, op.length);
          break;
        default:
          return absl::UnimplementedError("the barrier only adds and reads");
      }
    }
    return absl::OkStatus();
  }

 private:
  CounterRegion& region_;
};

transport::RegionInfo Info() {
  transport::RegionInfo r;
  r.node = kNode;
  r.id = kRegion;
  r.length = 64;
  r.name = "barrier";
  return r;
}

TEST(BarrierTest, NoNodeLeavesASuperstepBeforeAllArrived) {
  for (int nodes : {1, 2, 3, 5}) {
    SCOPED_TRACE(testing::Message() << nodes << " nodes");
    constexpr int kSupersteps = 6;
    CounterRegion region;
    Barrier barrier(Info(), nodes);
    EXPECT_EQ(barrier.nodes(), static_cast<uint64_t>(nodes));
    EXPECT_EQ(barrier.region().id, kRegion);
    std::vector<std::atomic<int>> arrived(kSupersteps + 1);
    std::atomic<int> early{0};
    std::vector<std::thread> threads;
    for (int n = 0; n < nodes; ++n) {
      threads.emplace_back([&, n] {
        CounterEndpoint ep(region);
        for (int s = 1; s <= kSupersteps; ++s) {
          // Nodes finish their supersteps at different times.
          std::this_thread::sleep_for(
              std::chrono::microseconds(200 * ((n * 7 + s * 3) % 5)));
          arrived[s].fetch_add(1);
          absl::Status st = barrier.Arrive(ep, s);
          EXPECT_TRUE(st.ok()) << st;
          if (arrived[s].load() != nodes) early.fetch_add(1);
        }
      });
    }
    for (std::thread& t : threads) t.join();
    EXPECT_EQ(early.load(), 0) << "a node left before every node arrived";
    EXPECT_EQ(region.value(), static_cast<uint64_t>(nodes) * kSupersteps);
  }
}

TEST(BarrierTest, ALoneArrivalWaitsForTheOthers) {
  CounterRegion region;
  Barrier barrier(Info(), 3);
  std::atomic<int> left{0};
  std::thread first([&] {
    CounterEndpoint ep(region);
    EXPECT_TRUE(barrier.Arrive(ep, 1).ok());
    left.fetch_add(1);
  });
  std::thread second([&] {
    CounterEndpoint ep(region);
    EXPECT_TRUE(barrier.Arrive(ep, 1).ok());
    left.fetch_add(1);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(left.load(), 0) << "two of three nodes passed the barrier";
  CounterEndpoint ep(region);
  EXPECT_TRUE(barrier.Arrive(ep, 1).ok());
  first.join();
  second.join();
  EXPECT_EQ(left.load(), 2);
  EXPECT_EQ(region.value(), 3u);
}

TEST(BarrierTest, TransportErrorsAreReturned) {
  {
    // The arrival itself fails.
    CounterRegion region;
    Barrier barrier(Info(), 1);
    CounterEndpoint ep(region);
    ep.fail_faa = true;
    absl::Status s = barrier.Arrive(ep, 1);
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  }
  {
    // Polling fails while waiting for another node: returns rather than
    // spinning on.
    CounterRegion region;
    Barrier barrier(Info(), 2);
    CounterEndpoint ep(region);
    ep.fail_reads = true;
    absl::Status s = barrier.Arrive(ep, 1);
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
    EXPECT_EQ(s.message(), "read failed");
  }
  {
    // A region the transport does not know.
    CounterRegion region;
    transport::RegionInfo wrong = Info();
    wrong.id = kRegion + 1;
    Barrier barrier(wrong, 1);
    CounterEndpoint ep(region);
    absl::Status s = barrier.Arrive(ep, 1);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  }
}

}  // namespace
}  // namespace dmg::compute

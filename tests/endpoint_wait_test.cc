// Endpoint::Wait's contract on failures: a batch that failed while a Wait
// for a later ticket completed it still fails its own Wait. A prefetch
// pipeline waits per batch while its callbacks Flush the same endpoint; it
// must never read a failed batch's buffers as if they had arrived (the bug
// this guards against: a killed memory node gave "bad block magic" instead
// of naming the node).
#include <cstdint>
#include <set>

#include "gtest/gtest.h"
#include "transport/transport.h"

namespace dmg::transport {
namespace {

// Completes batches in order; the ones whose first READ length is in
// `failing` fail when collected.
class ScriptedEndpoint : public Endpoint {
 public:
  std::set<uint32_t> failing;

 protected:
  absl::Status Execute(std::span<const Op>) override {
    return absl::OkStatus();
  }
  absl::Status Begin(std::span<const Op>) override { return absl::OkStatus(); }
  absl::Status End(std::span<const Op> ops) override {
    if (failing.count(ops[0].length) > 0) {
      return absl::UnavailableError("memory node 10.0.0.2:7000: reply failed");
    }
    return absl::OkStatus();
  }
};

uint64_t PostRead(ScriptedEndpoint& ep, uint32_t length, char* buffer) {
  ep.Read(0, 0, 0, buffer, length);
  return ep.Post();
}

TEST(EndpointWaitTest, AFailedBatchFailsItsOwnWaitAfterALaterWaitCompletedIt) {
  ScriptedEndpoint ep;
  ep.failing = {2};
  char buffer[8];
  const uint64_t a = PostRead(ep, 1, buffer);
  const uint64_t b = PostRead(ep, 2, buffer);
  const uint64_t c = PostRead(ep, 3, buffer);
  // A Flush-like wait for the newest batch completes all three.
  absl::Status s = ep.Wait(c);
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  // The pipeline then waits for its own batches, in order.
  EXPECT_TRUE(ep.Wait(a).ok());
  s = ep.Wait(b);
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_NE(s.message().find("10.0.0.2:7000"), std::string::npos);
  // Reported once to its own Wait: later batches are not failed by it.
  EXPECT_TRUE(ep.Wait(b).ok());
  const uint64_t d = PostRead(ep, 4, buffer);
  EXPECT_TRUE(ep.Wait(d).ok());
}

TEST(EndpointWaitTest, AFailureSeenByItsOwnWaitIsNotRepeated) {
  ScriptedEndpoint ep;
  ep.failing = {1};
  char buffer[8];
  const uint64_t a = PostRead(ep, 1, buffer);
  const uint64_t b = PostRead(ep, 2, buffer);
  EXPECT_FALSE(ep.Wait(a).ok());
  EXPECT_TRUE(ep.Wait(b).ok());
  EXPECT_TRUE(ep.Wait(a).ok());
}

}  // namespace
}  // namespace dmg::transport

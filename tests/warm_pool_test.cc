// The warm pool (common/warm_pool.h): buffers a process frees come back to
// its next allocation of the same class, already faulted in; nothing is
// kept before Keep(), nor past the cap; every buffer takes its whole class.
#include "common/warm_pool.h"

#include <cstdint>
#include <cstring>
#include <vector>

#include "common/aligned_buffer.h"
#include "common/huge_pages.h"
#include "gtest/gtest.h"

namespace dmg {
namespace {

TEST(WarmPoolTest, ClassesArePowersOfTwoThenSteps) {
  EXPECT_EQ(WarmPool::ClassBytes(1), WarmPool::kMinBytes);
  EXPECT_EQ(WarmPool::ClassBytes(WarmPool::kMinBytes), WarmPool::kMinBytes);
  EXPECT_EQ(WarmPool::ClassBytes(WarmPool::kMinBytes + 1),
            2 * WarmPool::kMinBytes);
  EXPECT_EQ(WarmPool::ClassBytes(WarmPool::kStepBytes), WarmPool::kStepBytes);
  EXPECT_EQ(WarmPool::ClassBytes(WarmPool::kStepBytes + 1),
            2 * WarmPool::kStepBytes);
  EXPECT_EQ(WarmPool::ClassBytes(3 * WarmPool::kStepBytes - 5),
            3 * WarmPool::kStepBytes);
}

// One test for the process's pool: Keep() cannot be undone.
TEST(WarmPoolTest, FreedBuffersComeBackWarmOnceKept) {
  WarmPool& pool = WarmPool::Process();
  const size_t bytes = 3 * WarmPool::kMinBytes;  // class: 4 x kMinBytes
  // Before Keep(): freed, not kept.
  auto [a, warm_a] = pool.Allocate(bytes, 4096);
  EXPECT_FALSE(warm_a);
  std::memset(a, 1, WarmPool::ClassBytes(bytes));  // the whole class
  pool.Free(a, bytes, 4096);
  EXPECT_EQ(pool.kept_bytes(), 0u);

  pool.Keep();
  auto [b, warm_b] = pool.Allocate(bytes, 4096);
  EXPECT_FALSE(warm_b);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b) % 4096, 0u);
  pool.Free(b, bytes, 4096);
  EXPECT_EQ(pool.kept_bytes(), WarmPool::ClassBytes(bytes));
  // The same class (any size in it) takes it back; another alignment or
  // class does not.
  auto [c, warm_c] = pool.Allocate(bytes + 100, 4096);
  EXPECT_TRUE(warm_c);
  EXPECT_EQ(c, b);
  auto [d, warm_d] = pool.Allocate(bytes, WarmPool::kHugePageBytes);
  EXPECT_FALSE(warm_d);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(d) % WarmPool::kHugePageBytes, 0u);
  pool.Free(c, bytes, 4096);
  pool.Free(d, bytes, WarmPool::kHugePageBytes);

  // Vectors and aligned buffers use it from kMinBytes up.
  const uint64_t reused = pool.reused();
  for (int trial = 0; trial < 3; ++trial) {
    HugePageVector<uint32_t> v(WarmPool::kMinBytes);  // 1 MiB
    AlignedBuffer buffer(2 * WarmPool::kMinBytes);
    // Zeroed, even when it was used before.
    for (size_t i = 0; i < buffer.size(); i += 4096) {
      ASSERT_EQ(buffer.data()[i], std::byte{0});
    }
    std::memset(buffer.data(), 0xff, buffer.size());
  }
  EXPECT_GE(pool.reused(), reused + 4);  // trials 2 and 3, twice each

  // Past the cap, freed buffers are freed.
  std::vector<std::pair<void*, size_t>> big;
  const size_t step = WarmPool::kStepBytes;
  for (size_t kept = 0; kept <= WarmPool::kMaxKeptBytes; kept += step) {
    big.push_back({pool.Allocate(step, 4096).first, step});
  }
  for (auto [p, n] : big) pool.Free(p, n, 4096);
  EXPECT_LE(pool.kept_bytes(), WarmPool::kMaxKeptBytes);
}

}  // namespace
}  // namespace dmg

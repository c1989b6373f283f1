// The page cache against a plain array: whatever the eviction order, a page
// read back holds what was last written to it; dirty victims go back in one
// batch per miss; sequential misses read ahead; a failed write-back loses
// nothing.
#include "compute_node/page_cache.h"

#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace dmg::compute {
namespace {

constexpr uint64_t kPage = PageCache::kPageBytes;

// Remote memory as a local vector; counts batches and can fail on demand.
class FakeSource : public PageSource {
 public:
  explicit FakeSource(uint64_t pages) : bytes_(pages * kPage) {}
  absl::Status FetchPages(int, uint64_t first, uint64_t count,
                          std::byte* const* dst) override {
    ++fetch_batches;
    fetched_pages += count;
    for (uint64_t k = 0; k < count; ++k) {
      std::memcpy(dst[k], bytes_.data() + (first + k) * kPage, kPage);
    }
    return absl::OkStatus();
  }
  absl::Status WriteBackPages(int, std::span<const DirtyPage> pages) override {
    if (fail_writes) return absl::UnavailableError("injected");
    ++write_batches;
    largest_write_batch = std::max(largest_write_batch, pages.size());
    for (const DirtyPage& p : pages) {
      std::memcpy(bytes_.data() + p.page * kPage, p.data, kPage);
    }
    return absl::OkStatus();
  }
  uint64_t Word(uint64_t page) const {
    uint64_t v;
    std::memcpy(&v, bytes_.data() + page * kPage, 8);
    return v;
  }

  int fetch_batches = 0, write_batches = 0;
  uint64_t fetched_pages = 0;
  size_t largest_write_batch = 0;
  bool fail_writes = false;

 private:
  std::vector<std::byte> bytes_;
};

// Writes `value` into the first word of `page` through the cache.
absl::Status Write(PageCache& cache, FakeSource& src, uint64_t page,
                   uint64_t value) {
  absl::StatusOr<std::byte*> p = cache.Pin(0, &src, page);
  if (!p.ok()) return p.status();
  std::memcpy(*p, &value, 8);
  cache.Unpin(&src, page, /*dirtied=*/true);
  return absl::OkStatus();
}

uint64_t Read(PageCache& cache, FakeSource& src, uint64_t page) {
  absl::StatusOr<std::byte*> p = cache.Pin(0, &src, page);
  EXPECT_TRUE(p.ok()) << p.status();
  uint64_t v;
  std::memcpy(&v, *p, 8);
  cache.Unpin(&src, page, false);
  return v;
}

TEST(PageCacheTest, RandomWritesSurviveEviction) {
  for (uint64_t read_ahead : {1, 8}) {
    FakeSource src(300);
    PageCache cache(32, 1, read_ahead);
    cache.Attach(&src, 300);
    std::vector<uint64_t> model(300, 0);
    std::mt19937_64 rng(7);
    for (int op = 0; op < 20000; ++op) {
      uint64_t page = rng() % 300;
      if (rng() % 2) {
        ASSERT_TRUE(Write(cache, src, page, op + 1).ok());
        model[page] = op + 1;
      } else {
        ASSERT_EQ(Read(cache, src, page), model[page]) << "page " << page;
      }
    }
    ASSERT_TRUE(cache.FlushDirty(&src).ok());
    for (uint64_t p = 0; p < 300; ++p) ASSERT_EQ(src.Word(p), model[p]);
  }
}

TEST(PageCacheTest, SequentialScansReadAheadAndWriteBackInBatches) {
  FakeSource src(1024);
  PageCache cache(128, 1, 16);
  cache.Attach(&src, 1024);
  for (int pass = 0; pass < 2; ++pass) {
    for (uint64_t p = 0; p < 1024; ++p) {
      ASSERT_TRUE(Write(cache, src, p, pass * 1000 + p).ok());
    }
  }
  // 2048 page misses in runs of 16 pages: about 128 fetches, not 2048.
  EXPECT_LE(src.fetch_batches, 2 * 1024 / 16 + 4);
  // Victims of a 16-page miss are written back together.
  EXPECT_GE(src.largest_write_batch, 8u);
  EXPECT_LE(src.write_batches, 2 * 1024 / 8);
  ASSERT_TRUE(cache.FlushDirty(&src).ok());
  for (uint64_t p = 0; p < 1024; ++p) ASSERT_EQ(src.Word(p), 1000 + p);
  CacheCounters c = cache.counters();
  EXPECT_EQ(c.writebacks, 2048u);
}

TEST(PageCacheTest, FailedWriteBackLosesNothing) {
  FakeSource src(64);
  PageCache cache(8, 1, 1);
  cache.Attach(&src, 64);
  for (uint64_t p = 0; p < 8; ++p)
    ASSERT_TRUE(Write(cache, src, p, p + 1).ok());
  src.fail_writes = true;
  // The miss needs a victim, every frame is dirty and write-back fails.
  absl::StatusOr<std::byte*> miss = cache.Pin(0, &src, 40);
  EXPECT_FALSE(miss.ok());
  src.fail_writes = false;
  for (uint64_t p = 0; p < 8; ++p) EXPECT_EQ(Read(cache, src, p), p + 1);
  for (uint64_t p = 8; p < 64; ++p)
    ASSERT_TRUE(Write(cache, src, p, p + 1).ok());
  ASSERT_TRUE(cache.FlushDirty(&src).ok());
  for (uint64_t p = 0; p < 64; ++p) EXPECT_EQ(src.Word(p), p + 1);
}

}  // namespace
}  // namespace dmg::compute

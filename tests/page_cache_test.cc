// The page cache against a plain array: whatever the eviction order, a page
// read back holds what was last written to it; dirty victims go back in one
// batch per miss; sequential misses read ahead; a failed write-back loses
// nothing. Concurrency: misses do their I/O without the cache's lock, so
// misses on different pages overlap; a page is fetched once however many
// workers miss on it; a dirty victim is not fetched before its write-back
// landed; failures under concurrency lose nothing and leak no pins; many
// workers at once against a plain array agree with it.
#include "compute_node/page_cache.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace dmg::compute {
namespace {

constexpr uint64_t kPage = PageCache::kPageBytes;
constexpr auto kDeadline = std::chrono::seconds(5);

// Blocks callers of Wait until Open.
class Gate {
 public:
  void Open() {
    std::lock_guard lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  void Wait() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return open_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

// Polls `done` until it holds or the deadline passes (a test of something
// that should happen concurrently fails instead of hanging).
bool WaitFor(const std::function<bool()>& done) {
  auto deadline = std::chrono::steady_clock::now() + kDeadline;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// Remote memory as a local vector; counts batches, can fail on demand, and
// calls hooks (which may block) inside a fetch (before the copy) or a
// write-back (before the copy, or after it). Safe for concurrent I/O on
// distinct pages, the only kind the cache may issue; I/O on a page that
// overlaps other I/O on it (a second fetch, or a fetch during its write-back)
// is counted in `overlaps`.
class FakeSource : public PageSource {
 public:
  explicit FakeSource(uint64_t pages)
      : fetches_of(pages), bytes_(pages * kPage), busy_(pages) {}
  absl::Status FetchPages(int, uint64_t first, uint64_t count,
                          std::byte* const* dst, uint8_t*) override {
    Begin(first, count, nullptr);
    ++fetch_batches;
    fetched_pages += count;
    for (uint64_t k = 0; k < count; ++k) ++fetches_of[first + k];
    if (on_fetch) on_fetch(first, count);
    bool fail = Take(fail_fetches) || Every(fetch_calls_);
    for (uint64_t k = 0; k < count; ++k) {
      if (fail) {
        std::memset(dst[k], 0xab, kPage);  // garbage the cache must not use
      } else {
        std::memcpy(dst[k], bytes_.data() + (first + k) * kPage, kPage);
      }
    }
    End(first, count, nullptr);
    return fail ? absl::UnavailableError("injected fetch failure")
                : absl::OkStatus();
  }
  absl::Status WriteBackPages(int, std::span<const DirtyPage> pages) override {
    Begin(0, 0, &pages);
    if (on_write && !write_hook_after_copy) on_write(pages);
    bool fail = fail_writes || Every(write_calls_);
    // A failed batch may have written some of its pages.
    size_t written = fail ? pages.size() / 2 : pages.size();
    for (size_t i = 0; i < written; ++i) {
      std::memcpy(bytes_.data() + pages[i].page * kPage, pages[i].data, kPage);
    }
    if (!fail) {
      ++write_batches;
      size_t largest = largest_write_batch.load();
      while (
          pages.size() > largest &&
          !largest_write_batch.compare_exchange_weak(largest, pages.size())) {
      }
    }
    if (on_write && write_hook_after_copy) on_write(pages);
    End(0, 0, &pages);
    return fail ? absl::UnavailableError("injected write failure")
                : absl::OkStatus();
  }
  // Word `i` of a page in remote memory.
  uint64_t Word(uint64_t page, int i = 0) const {
    uint64_t v;
    std::memcpy(&v, bytes_.data() + page * kPage + i * 8, 8);
    return v;
  }
  void SetWord(uint64_t page, uint64_t v) {
    std::memcpy(bytes_.data() + page * kPage, &v, 8);
  }

  std::atomic<int> fetch_batches{0}, write_batches{0};
  std::atomic<uint64_t> fetched_pages{0};
  std::atomic<size_t> largest_write_batch{0};
  std::vector<std::atomic<int>> fetches_of;  // per page
  std::atomic<int> overlaps{0};
  std::atomic<bool> fail_writes{false};
  std::atomic<int> fail_fetches{0};  // fail this many fetches
  std::atomic<int> fail_every{0};    // fail every n-th fetch and write-back
  bool yield = false;                // yield inside I/O (widens races)
  std::function<void(uint64_t, uint64_t)> on_fetch;
  std::function<void(std::span<const DirtyPage>)> on_write;
  bool write_hook_after_copy = false;

 private:
  void Begin(uint64_t first, uint64_t count,
             const std::span<const DirtyPage>* pages) {
    auto mark = [&](uint64_t p) {
      if (busy_[p].fetch_add(1) != 0) ++overlaps;
    };
    for (uint64_t k = 0; k < count; ++k) mark(first + k);
    if (pages != nullptr) {
      for (const DirtyPage& p : *pages) mark(p.page);
    }
    if (yield) std::this_thread::yield();
  }
  void End(uint64_t first, uint64_t count,
           const std::span<const DirtyPage>* pages) {
    for (uint64_t k = 0; k < count; ++k) --busy_[first + k];
    if (pages != nullptr) {
      for (const DirtyPage& p : *pages) --busy_[p.page];
    }
  }
  static bool Take(std::atomic<int>& n) {
    int v = n.load();
    while (v > 0 && !n.compare_exchange_weak(v, v - 1)) {
    }
    return v > 0;
  }
  bool Every(std::atomic<uint64_t>& calls) {
    int n = fail_every.load();
    return n > 0 && ++calls % n == 0;
  }

  std::vector<std::byte> bytes_;
  std::vector<std::atomic<int>> busy_;  // I/O in flight per page
  std::atomic<uint64_t> fetch_calls_{0}, write_calls_{0};
};

// Writes `value` into the first word of `page` through the cache.
absl::Status Write(PageCache& cache, FakeSource& src, uint64_t page,
                   uint64_t value, int worker = 0) {
  absl::StatusOr<std::byte*> p = cache.Pin(worker, &src, page);
  if (!p.ok()) return p.status();
  std::memcpy(*p, &value, 8);
  cache.Unpin(&src, page, /*dirtied=*/true);
  return absl::OkStatus();
}

uint64_t Read(PageCache& cache, FakeSource& src, uint64_t page,
              int worker = 0) {
  absl::StatusOr<std::byte*> p = cache.Pin(worker, &src, page);
  EXPECT_TRUE(p.ok()) << p.status();
  if (!p.ok()) return ~uint64_t{0};
  uint64_t v;
  std::memcpy(&v, *p, 8);
  cache.Unpin(&src, page, false);
  return v;
}

// No frame was leaked pinned: every frame can be pinned at once (pages
// [first, first + frames) of `src`), then they are unpinned.
void ExpectAllFramesPinnable(PageCache& cache, FakeSource& src,
                             uint64_t first) {
  std::vector<uint64_t> pinned;
  for (uint64_t p = first; p < first + cache.frames(); ++p) {
    absl::StatusOr<std::byte*> page = cache.Pin(0, &src, p);
    EXPECT_TRUE(page.ok()) << "page " << p << ": " << page.status();
    if (page.ok()) pinned.push_back(p);
  }
  for (uint64_t p : pinned) cache.Unpin(&src, p, false);
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
  EXPECT_LE(src.fetch_batches.load(), 2 * 1024 / 16 + 4);
  // Victims of a 16-page miss are written back together.
  EXPECT_GE(src.largest_write_batch.load(), 8u);
  EXPECT_LE(src.write_batches.load(), 2 * 1024 / 8);
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

TEST(PageCacheTest, MissesOnDifferentPagesFetchConcurrently) {
  FakeSource src(64);
  PageCache cache(16, 2, 1);
  cache.Attach(&src, 64);
  Gate gate;
  std::atomic<int> started{0};
  src.on_fetch = [&](uint64_t, uint64_t) {
    ++started;
    gate.Wait();
  };
  std::thread a([&] { EXPECT_EQ(Read(cache, src, 1, 0), 0u); });
  EXPECT_TRUE(WaitFor([&] { return started == 1; }));
  // The first fetch is blocked; the second miss must not wait for it.
  std::thread b([&] { EXPECT_EQ(Read(cache, src, 9, 1), 0u); });
  bool concurrent = WaitFor([&] { return started == 2; });
  gate.Open();
  a.join();
  b.join();
  EXPECT_TRUE(concurrent) << "a miss waited for another page's fetch";
  EXPECT_EQ(src.overlaps, 0);
}

TEST(PageCacheTest, MissesProceedWhileAnotherWritesBack) {
  FakeSource src(64);
  PageCache cache(4, 2, 1);
  cache.Attach(&src, 64);
  for (uint64_t p = 0; p < 4; ++p) {
    ASSERT_TRUE(Write(cache, src, p, p + 1).ok());
  }
  Gate gate;
  std::atomic<int> started{0};
  src.on_write = [&](std::span<const DirtyPage>) {
    ++started;
    gate.Wait();
  };
  // Every frame is dirty: each miss writes a victim back first.
  std::thread a([&] { EXPECT_EQ(Read(cache, src, 10, 0), 0u); });
  EXPECT_TRUE(WaitFor([&] { return started == 1; }));
  std::thread b([&] { EXPECT_EQ(Read(cache, src, 11, 1), 0u); });
  bool concurrent = WaitFor([&] { return started == 2; });
  gate.Open();
  a.join();
  b.join();
  EXPECT_TRUE(concurrent) << "a miss waited for another miss's write-back";
  src.on_write = nullptr;
  ASSERT_TRUE(cache.FlushDirty(&src).ok());
  for (uint64_t p = 0; p < 4; ++p) EXPECT_EQ(src.Word(p), p + 1);
  EXPECT_EQ(src.overlaps, 0);
}

// With `ramp`, the read-ahead window doubles along a run of misses, up to
// read_ahead, and a miss elsewhere starts again at one page: a scan
// reaches the full window in a few misses; two neighbouring misses of a
// sparse pattern fetch two pages, not the window. Without it, the second
// miss of a run takes the whole window.
TEST(PageCacheTest, ReadAheadRampsUpAlongARunWhenAsked) {
  for (bool ramp : {true, false}) {
    SCOPED_TRACE(ramp);
    FakeSource src(256);
    PageCache cache(128, 1, 16, ramp);
    cache.Attach(&src, 256);
    std::vector<uint64_t> sizes;
    src.on_fetch = [&](uint64_t, uint64_t count) { sizes.push_back(count); };
    for (uint64_t p = 0; p < 63; ++p) ASSERT_EQ(Read(cache, src, p), 0u);
    using Sizes = std::vector<uint64_t>;
    EXPECT_EQ(sizes, (ramp ? Sizes{1, 2, 4, 8, 16, 16, 16}
                           : Sizes{1, 16, 16, 16, 16}));
    sizes.clear();
    for (uint64_t p : {200, 201, 202, 100}) {
      ASSERT_EQ(Read(cache, src, p), 0u);
    }
    // 202 came with 201.
    EXPECT_EQ(sizes, (ramp ? Sizes{1, 2, 1} : Sizes{1, 16, 1}));
  }
}

TEST(PageCacheTest, ConcurrentMissesOnOnePageFetchItOnce) {
  // Without read-ahead, then inside a read-ahead run.
  for (uint64_t read_ahead : {1, 8}) {
    SCOPED_TRACE(read_ahead);
    FakeSource src(64);
    PageCache cache(64, 3, read_ahead);
    cache.Attach(&src, 64);
    for (uint64_t p = 0; p < 64; ++p) src.SetWord(p, 100 + p);
    // With read-ahead, a miss on page 0 makes page 1 the run's next page:
    // its miss claims pages 1..8, and the second worker misses on page 5.
    uint64_t first = 1, page = 1;
    if (read_ahead > 1) {
      ASSERT_EQ(Read(cache, src, 0), 100u);
      page = 5;
    }
    Gate gate;
    std::atomic<int> started{0};
    src.on_fetch = [&](uint64_t, uint64_t) {
      ++started;
      gate.Wait();
    };
    const int fetches_before = src.fetch_batches;
    const std::byte* seen[2] = {nullptr, nullptr};
    uint64_t value[2] = {0, 0};
    auto miss = [&](int w, uint64_t p) {
      absl::StatusOr<std::byte*> d = cache.Pin(w, &src, p);
      ASSERT_TRUE(d.ok()) << d.status();
      seen[w] = *d;
      std::memcpy(&value[w], *d, 8);
      cache.Unpin(&src, p, false);
    };
    std::thread a([&] { miss(0, first); });
    EXPECT_TRUE(WaitFor([&] { return started == 1; }));
    // Loading is "not cached" to the lock-free readers.
    uint64_t v;
    EXPECT_FALSE(cache.TryRead(2, &src, page, 0, &v));
    EXPECT_EQ(cache.Peek(&src, page), nullptr);
    std::thread b([&] { miss(1, page); });
    // A second fetch of the page, if any, would start now.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_EQ(started, 1);
    gate.Open();
    a.join();
    b.join();
    EXPECT_EQ(src.fetches_of[page], 1);
    EXPECT_EQ(src.fetch_batches - fetches_before, 1);
    EXPECT_EQ(value[1], 100 + page);
    if (read_ahead == 1) {
      EXPECT_EQ(seen[0], seen[1]);
    }
    ASSERT_TRUE(cache.TryRead(2, &src, page, 0, &v));
    EXPECT_EQ(v, 100 + page);
    EXPECT_EQ(src.overlaps, 0);
  }
}

TEST(PageCacheTest, DirtyVictimIsNotFetchedBeforeItsWriteBackLands) {
  FakeSource src(16);
  PageCache cache(2, 2, 1);
  cache.Attach(&src, 16);
  ASSERT_TRUE(Write(cache, src, 0, 111).ok());  // frame 0, dirty
  ASSERT_EQ(Read(cache, src, 1), 0u);           // frame 1, clean
  Gate gate;
  std::atomic<int> started{0};
  std::atomic<uint64_t> victim{~uint64_t{0}};
  src.on_write = [&](std::span<const DirtyPage> pages) {
    victim = pages[0].page;
    ++started;
    gate.Wait();
  };
  // The miss on page 2 evicts page 0 (the clock clears both reference bits,
  // then takes frame 0) and writes it back; the write is held.
  std::thread a([&] { EXPECT_EQ(Read(cache, src, 2, 0), 0u); });
  EXPECT_TRUE(WaitFor([&] { return started == 1; })) << "no write-back";
  EXPECT_EQ(victim, 0u);
  EXPECT_EQ(cache.Peek(&src, 0), nullptr);
  // Remote memory still holds page 0's stale bytes (the fake copies after
  // the hook): a miss on it must wait, not fetch.
  std::atomic<uint64_t> got{0};
  std::thread b([&] { got = Read(cache, src, 0, 1); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(src.fetches_of[0], 1) << "fetched during its write-back";
  EXPECT_EQ(src.overlaps, 0);
  gate.Open();
  a.join();
  b.join();
  EXPECT_EQ(got, 111u);
  EXPECT_EQ(src.Word(0), 111u);
  EXPECT_EQ(src.overlaps, 0);
}

TEST(PageCacheTest, FailedFetchUnderConcurrencyLeavesTheCacheUsable) {
  FakeSource src(64);
  PageCache cache(4, 2, 1);
  cache.Attach(&src, 64);
  for (uint64_t p = 0; p < 64; ++p) src.SetWord(p, 100 + p);
  Gate gate;
  std::atomic<int> started{0};
  src.on_fetch = [&](uint64_t, uint64_t) {
    if (++started == 1) gate.Wait();
  };
  src.fail_fetches = 1;
  absl::Status a_status;
  std::thread a([&] { a_status = cache.Pin(0, &src, 7).status(); });
  EXPECT_TRUE(WaitFor([&] { return started == 1; }));
  // Waits for the failing fetch, then fetches the page itself.
  std::atomic<uint64_t> got{0};
  std::thread b([&] { got = Read(cache, src, 7, 1); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  gate.Open();
  a.join();
  b.join();
  EXPECT_FALSE(a_status.ok());
  EXPECT_EQ(got, 107u);
  EXPECT_EQ(src.fetches_of[7], 2);
  src.on_fetch = nullptr;
  ExpectAllFramesPinnable(cache, src, 20);
  for (uint64_t p = 0; p < 64; ++p) EXPECT_EQ(Read(cache, src, p), 100 + p);
  EXPECT_EQ(src.overlaps, 0);
}

TEST(PageCacheTest, FailedWriteBackUnderConcurrencyLosesNothing) {
  FakeSource src(64);
  PageCache cache(4, 3, 1);
  cache.Attach(&src, 64);
  for (uint64_t p = 0; p < 4; ++p) {
    ASSERT_TRUE(Write(cache, src, p, 100 + p).ok());
  }
  Gate gate;
  std::atomic<int> calls{0}, started{0};
  std::vector<uint64_t> victims(2, ~uint64_t{0});
  src.on_write = [&](std::span<const DirtyPage> pages) {
    victims[calls++] = pages[0].page;
    ++started;  // after the victim is recorded
    gate.Wait();
  };
  src.fail_writes = true;
  // Two misses, each with a dirty victim whose write-back will fail.
  absl::Status status[2];
  std::thread a([&] { status[0] = cache.Pin(0, &src, 10).status(); });
  EXPECT_TRUE(WaitFor([&] { return started == 1; }));
  std::thread b([&] { status[1] = cache.Pin(1, &src, 11).status(); });
  bool both = WaitFor([&] { return started == 2; });
  EXPECT_TRUE(both);
  // A miss on a victim in transit waits, then finds it mapped back.
  std::atomic<uint64_t> got{0};
  std::thread c([&] { got = Read(cache, src, victims[0], 2); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  gate.Open();
  a.join();
  b.join();
  c.join();
  EXPECT_FALSE(status[0].ok());
  EXPECT_FALSE(status[1].ok());
  EXPECT_EQ(got, 100 + victims[0]);
  src.fail_writes = false;
  src.on_write = nullptr;
  for (uint64_t p = 0; p < 4; ++p) EXPECT_EQ(Read(cache, src, p), 100 + p);
  ExpectAllFramesPinnable(cache, src, 20);
  ASSERT_TRUE(cache.FlushDirty(&src).ok());
  for (uint64_t p = 0; p < 4; ++p) EXPECT_EQ(src.Word(p), 100 + p);
  EXPECT_EQ(src.overlaps, 0);
}

TEST(PageCacheTest, FlushWritesUnlockedAndKeepsPagesDirtiedMeanwhile) {
  FakeSource src(32);
  PageCache cache(8, 2, 1);
  cache.Attach(&src, 32);
  for (uint64_t p = 0; p < 4; ++p) {
    ASSERT_TRUE(Write(cache, src, p, 10 + p).ok());
  }
  Gate gate;
  std::atomic<int> started{0};
  src.on_write = [&](std::span<const DirtyPage>) {
    ++started;
    gate.Wait();
  };
  src.write_hook_after_copy = true;
  absl::Status flushed;
  std::thread f([&] { flushed = cache.FlushDirty(&src); });
  EXPECT_TRUE(WaitFor([&] { return started == 1; }));
  // The flush's write is in flight: a miss proceeds meanwhile...
  std::atomic<bool> missed{false};
  std::thread m([&] {
    EXPECT_EQ(Read(cache, src, 20, 1), 0u);
    missed = true;
  });
  bool concurrent = WaitFor([&] { return missed.load(); });
  // ...and a page of the batch is dirtied again after its bytes went out.
  EXPECT_TRUE(Write(cache, src, 2, 99).ok());
  gate.Open();
  f.join();
  m.join();
  EXPECT_TRUE(concurrent) << "a miss waited for a flush's write";
  ASSERT_TRUE(flushed.ok()) << flushed;
  EXPECT_EQ(src.Word(2), 12u);
  src.on_write = nullptr;
  ASSERT_TRUE(cache.FlushDirty(&src).ok());  // page 2 is still dirty
  EXPECT_EQ(src.Word(2), 99u);
  for (uint64_t p : {0, 1, 3}) EXPECT_EQ(src.Word(p), 10 + p);
}

// Several workers at once, small cache, overlapping pages: worker t owns
// word t of every page, so the expected contents are a plain array per
// worker. With and without read-ahead, with and without injected failures
// (a failed access is simply not done).
TEST(PageCacheTest, ConcurrentRandomAccessMatchesAnArray) {
  constexpr int kThreads = 4;
  constexpr uint64_t kPages = 96;
  constexpr int kOps = 4000;
  for (uint64_t read_ahead : {1, 4}) {
    for (int fail_every : {0, 7}) {
      SCOPED_TRACE(testing::Message() << "read_ahead " << read_ahead
                                      << " fail_every " << fail_every);
      FakeSource src(kPages);
      src.yield = true;
      src.fail_every = fail_every;
      PageCache cache(16, kThreads, read_ahead);
      cache.Attach(&src, kPages);
      std::vector<std::vector<uint64_t>> model(
          kThreads, std::vector<uint64_t>(kPages, 0));
      std::atomic<int> failures{0};
      std::vector<std::thread> threads;
      for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
          std::mt19937_64 rng(1000 * read_ahead + 10 * fail_every + t);
          uint64_t page = rng() % kPages;
          for (int op = 0; op < kOps; ++op) {
            // Runs of sequential pages (read-ahead) among random jumps.
            page = rng() % 4 == 0 ? rng() % kPages : (page + 1) % kPages;
            absl::StatusOr<std::byte*> p = cache.Pin(t, &src, page);
            if (!p.ok()) {
              EXPECT_GT(fail_every, 0) << p.status();
              ++failures;
              continue;
            }
            std::byte* word = *p + t * 8;
            bool write = rng() % 2;
            if (write) {
              uint64_t v = (uint64_t{1} << 32) * (t + 1) + op;
              std::memcpy(word, &v, 8);
              model[t][page] = v;
            } else {
              uint64_t v;
              std::memcpy(&v, word, 8);
              EXPECT_EQ(v, model[t][page]) << "page " << page;
            }
            cache.Unpin(&src, page, write);
          }
        });
      }
      for (std::thread& t : threads) t.join();
      if (fail_every > 0) {
        EXPECT_GT(failures, 0);
      }
      src.fail_every = 0;
      ASSERT_TRUE(cache.FlushDirty(&src).ok());
      for (int t = 0; t < kThreads; ++t) {
        for (uint64_t p = 0; p < kPages; ++p) {
          ASSERT_EQ(src.Word(p, t), model[t][p])
              << "worker " << t << " page " << p;
        }
      }
      EXPECT_EQ(src.overlaps, 0);
      ExpectAllFramesPinnable(cache, src, 0);
      CacheCounters c = cache.counters();
      EXPECT_GT(c.hits, 0u);
      EXPECT_GT(c.misses, 0u);
    }
  }
}

}  // namespace
}  // namespace dmg::compute

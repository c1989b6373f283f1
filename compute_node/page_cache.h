// A bounded cache of 4 KiB pages of remote memory with CLOCK replacement
// (the LRU approximation operating systems use) and write-back. Used for
// vertex-state arrays that do not fit the budget as whole local copies, and,
// under --cache_policy=page_lru, for everything: the baseline that behaves
// like OS paging of far memory (Fastswap-style) — no knowledge of the graph,
// no bypass for scans, no prefetch beyond the page.
//
// Like a page table, every source has a table from page to frame, so a hit
// costs what a resident page costs an OS: a table load, a pin (one atomic
// add) and a reference bit. Only misses take the lock: the clock hand finds
// an unpinned, unreferenced frame, writes it back if dirty and fetches the
// page with the calling worker's endpoint.
#ifndef DMG_COMPUTE_NODE_PAGE_CACHE_H_
#define DMG_COMPUTE_NODE_PAGE_CACHE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "common/aligned_buffer.h"

namespace dmg::compute {

class PageCache;

// A page on its way back to remote memory.
struct DirtyPage {
  uint64_t page;
  const std::byte* data;
};

// Something whose pages can be cached: fills pages from remote memory and
// writes dirty ones back, using worker w's transport endpoint. Both take
// many pages so that a source can move them in one batch (one round trip).
class PageSource {
 public:
  virtual ~PageSource() = default;
  // Fills pages [first, first + count) into dst[k].
  virtual absl::Status FetchPages(int worker, uint64_t first, uint64_t count,
                                  std::byte* const* dst) = 0;
  virtual absl::Status WriteBackPages(int worker,
                                      std::span<const DirtyPage> pages) = 0;

 private:
  friend class PageCache;
  // page -> frame, or -1 (per-page metadata, like an OS page table).
  std::unique_ptr<std::atomic<int32_t>[]> table_;
  uint64_t pages_ = 0;
  // Read-ahead state (under the cache's lock): where the last miss run
  // ended.
  uint64_t run_end_ = ~uint64_t{0};
};

struct CacheCounters {
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t evictions = 0;
  uint64_t writebacks = 0;
  uint64_t bytes_fetched = 0;  // by misses
  uint64_t bytes_saved = 0;    // by hits (what a fetch would have cost)
  CacheCounters& operator+=(const CacheCounters& o);
  CacheCounters operator-(const CacheCounters& o) const;
};

class PageCache {
 public:
  static constexpr uint64_t kPageBytes = 4096;
  // Most pages written back in one batch (one round trip): 1 MiB.
  static constexpr size_t kWriteBatchPages = 256;

  // `frames` pages of memory (reserved by the caller from the budget), used
  // by up to `workers` workers. Read-ahead, as an OS does it for files: a
  // miss on the page right after the previous miss run of its source (by
  // any worker: workers of a dense scan take turns along the array), or of
  // the worker's own previous run, fetches up to `read_ahead` pages (those
  // not cached) in one batch; any other miss fetches one page. read_ahead =
  // 1: none (the page_lru baseline).
  PageCache(uint64_t frames, int workers, uint64_t read_ahead = 1);
  uint64_t frames() const { return frames_; }

  // Gives `source` a page table for `pages` pages. Before its first Pin.
  void Attach(PageSource* source, uint64_t pages);

  absl::StatusOr<std::byte*> Pin(int worker, PageSource* source,
                                 uint64_t page) {
    int32_t f = source->table_[page].load(std::memory_order_acquire);
    if (f >= 0) {
      Frame& fr = frame_[f];
      fr.pins.fetch_add(1, std::memory_order_acq_rel);
      // Still this page? (An eviction may have raced the pin.)
      if (source->table_[page].load(std::memory_order_acquire) == f) {
        if (!fr.referenced.load(std::memory_order_relaxed)) {
          fr.referenced.store(true, std::memory_order_relaxed);
        }
        ++counters_[worker].hits;
        return data(f);
      }
      fr.pins.fetch_sub(1, std::memory_order_acq_rel);
    }
    return PinSlow(worker, source, page);
  }
  // Reads a T at `offset` of a cached page without pinning it, validated
  // like a seqlock against the frame being evicted or refilled meanwhile;
  // false if the page is not cached or the read raced (then Pin).
  template <typename T>
  bool TryRead(int worker, PageSource* source, uint64_t page, uint64_t offset,
               T* out) {
    int32_t f = source->table_[page].load(std::memory_order_acquire);
    if (f < 0) return false;
    Frame& fr = frame_[f];
    uint32_t gen = fr.gen.load(std::memory_order_acquire);
    if (gen & 1) return false;
    T v = std::atomic_ref<T>(*reinterpret_cast<T*>(data(f) + offset))
              .load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (source->table_[page].load(std::memory_order_relaxed) != f ||
        fr.gen.load(std::memory_order_relaxed) != gen) {
      return false;
    }
    if (!fr.referenced.load(std::memory_order_relaxed)) {
      fr.referenced.store(true, std::memory_order_relaxed);
    }
    ++counters_[worker].hits;
    *out = v;
    return true;
  }

  void Unpin(PageSource* source, uint64_t page, bool dirtied) {
    int32_t f = source->table_[page].load(std::memory_order_acquire);
    if (f < 0) return;
    if (dirtied) frame_[f].dirty.store(true, std::memory_order_relaxed);
    frame_[f].pins.fetch_sub(1, std::memory_order_acq_rel);
  }

  // Writes back every dirty page of `source` (keeping it cached, clean), in
  // batches of up to kWriteBatchPages. Uses worker 0's endpoint; call when
  // no worker holds its pages.
  absl::Status FlushDirty(PageSource* source);
  // The cached bytes of a page, or nullptr (no pin; call between supersteps).
  const std::byte* Peek(PageSource* source, uint64_t page);
  // Forgets every page of `source` without writing it back.
  void Drop(PageSource* source);

  CacheCounters counters();

 private:
  struct Frame {
    std::atomic<int32_t> pins{0};
    std::atomic<bool> referenced{false};
    std::atomic<bool> dirty{false};
    std::atomic<uint32_t> gen{0};  // odd while the frame is being refilled
    PageSource* source = nullptr;  // guarded by mu_
    uint64_t page = 0;
  };
  struct alignas(64) WorkerCounters : CacheCounters {
    // The worker's own last miss run (its misses on one source may be
    // sequential while the source's, interleaved with others', are not).
    PageSource* run_source = nullptr;
    uint64_t run_end = 0;
  };

  std::byte* data(int32_t f) { return memory_.data() + f * kPageBytes; }
  absl::StatusOr<std::byte*> PinSlow(int worker, PageSource* source,
                                     uint64_t page);
  // A dirty frame the clock evicted: unmapped and pinned, its bytes intact
  // until written back.
  struct Victim {
    PageSource* source;
    uint64_t page;
    int32_t frame;
  };
  // A frame to refill (empty, or evicted by the clock), pinned; a dirty
  // victim is appended to `dirty` for the caller to write back (all of a
  // miss's victims in one batch per source). Requires mu_.
  absl::StatusOr<int32_t> TakeFrame(int worker, std::vector<Victim>* dirty);
  // Writes the victims back, one batch per source (in chunks of at most
  // kWriteBatchPages). On failure every victim is mapped again, still dirty.
  absl::Status WriteBack(int worker, std::vector<Victim>& victims);

  const uint64_t frames_;
  const uint64_t read_ahead_;
  AlignedBuffer memory_;
  std::unique_ptr<Frame[]> frame_;
  std::mutex mu_;                         // misses, eviction, flush, drop
  uint64_t hand_ = 0;                     // the clock hand
  uint64_t filled_ = 0;                   // frames ever used
  std::vector<WorkerCounters> counters_;  // hits per worker; misses etc. too
};

}  // namespace dmg::compute

#endif  // DMG_COMPUTE_NODE_PAGE_CACHE_H_

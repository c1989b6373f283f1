// A bounded cache of 4 KiB pages of remote memory with CLOCK replacement
// (the LRU approximation operating systems use) and write-back. Used for
// vertex-state arrays that do not fit the budget as whole local copies, and,
// under --cache_policy=page_lru, for everything: the baseline that behaves
// like OS paging of far memory (Fastswap-style) — no knowledge of the graph,
// no bypass for scans, no prefetch beyond the page.
//
// Like a page table, every source has a table from page to frame, so a hit
// costs what a resident page costs an OS: a table load, a pin (one atomic
// add) and a reference bit. Only misses take the lock, and never across a
// round trip: a miss claims its frames under the lock (the clock hand finds
// unpinned, unreferenced ones), writes dirty victims back and fetches with
// the calling worker's endpoint unlocked, and publishes under the lock.
//
// Locking. One mutex, mu_, guards the frames' identities and states
// (meta_), the clock hand, the count of frames ever used, the count of I/O
// in flight, the flush counter and, of every attached source, its
// read-ahead run end and its busy count; it is also the only lock under
// which page-table entries change. Lock-free: the hit paths (Pin, TryRead,
// Unpin, Peek) read page tables and a frame's pins, reference bit, dirty
// bit and generation, all atomics. A worker's counters are written only by
// that worker's thread. The rule: no I/O under mu_ — every FetchPages and
// WriteBackPages runs with mu_ released, so the misses of other workers
// proceed while one worker waits on the network.
//
// A page-table entry is a frame (the page is cached there), kNotCached, or
// kLoading: the page is on its way in (a miss is fetching it) or out (it is
// a dirty victim whose write-back is in flight). The hit paths see a
// negative entry and take the slow path (Pin, Unpin) or fail (TryRead,
// Peek). Who waits on what, all on the condition variable io_done_ with
// mu_ released: a miss on a loading page, until the page is published (a
// hit), cleared (its own miss), or mapped back (a failed write-back); a
// miss that finds every frame pinned while other I/O is in flight, until
// that I/O releases its frames; FlushDirty and Drop, until no I/O of their
// source is in flight. Nobody waits while holding a claim, so every wait
// ends when some round trip does.
#ifndef DMG_COMPUTE_NODE_PAGE_CACHE_H_
#define DMG_COMPUTE_NODE_PAGE_CACHE_H_

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "common/aligned_buffer.h"
#include "common/mutex.h"

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
// The cache calls them without holding its lock, possibly for several
// workers at once (never for the same page at once).
class PageSource {
 public:
  virtual ~PageSource() = default;
  // Fills pages [first, first + count) into dst[k]. A source that makes a
  // fetched page differ from what remote memory holds (a state array merges
  // the claims it logged while the page was not cached) sets dirtied[k]
  // (all 0 on entry): the cache then treats the frame as dirty.
  virtual absl::Status FetchPages(int worker, uint64_t first, uint64_t count,
                                  std::byte* const* dst, uint8_t* dirtied) = 0;
  virtual absl::Status WriteBackPages(int worker,
                                      std::span<const DirtyPage> pages) = 0;

 private:
  friend class PageCache;
  // page -> frame, kNotCached or kLoading (per-page metadata, like an OS
  // page table). Read lock-free; changed only under the cache's mu_.
  std::unique_ptr<std::atomic<int32_t>[]> table_;
  uint64_t pages_ = 0;  // set by Attach, then constant
  // The rest is guarded by the attached cache's mu_ (an annotation cannot
  // name another object's lock).
  // Read-ahead state: where the last miss run ended, and how many pages it
  // fetched.
  uint64_t run_end_ = ~uint64_t{0};
  uint64_t run_pages_ = 1;
  // Frames holding this source's pages in I/O (being fetched or written
  // back by a miss), plus flushes in flight. Drop and FlushDirty wait for 0.
  uint64_t busy_ = 0;
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
  // Page-table values that are not frames.
  static constexpr int32_t kNotCached = -1;
  static constexpr int32_t kLoading = -2;  // being fetched or written back

  // `frames` pages of memory (reserved by the caller from the budget), used
  // by up to `workers` workers. Read-ahead, as an OS does it for files: a
  // miss on the page right after the previous miss run of its source (by
  // any worker: workers of a dense scan take turns along the array), or of
  // the worker's own previous run, fetches up to `read_ahead` pages (those
  // not cached) in one batch; any other miss fetches one page. With `ramp`,
  // twice as many as that run instead, up to `read_ahead`: a scan reaches
  // the full window in a few misses, and two neighbouring pages that a
  // sparse pattern happens to miss in a row fetch two, not the window
  // (road-NY BFS at 5%, local: 88 -> 52 MB of depth pages a source). Where
  // round trips are dear the ramp's extra misses cost more than the pages
  // (road-NY PageRank over tcp: 21 K -> 28 K round trips, 27% slower).
  // read_ahead = 1: none (the page_lru baseline).
  PageCache(uint64_t frames, int workers, uint64_t read_ahead = 1,
            bool ramp = false);
  uint64_t frames() const { return frames_; }

  // Gives `source` a page table for `pages` pages. Before its first Pin.
  void Attach(PageSource* source, uint64_t pages);

  absl::StatusOr<std::byte*> Pin(int worker, PageSource* source, uint64_t page)
      ABSL_LOCKS_EXCLUDED(mu_) {
    int32_t f = source->table_[page].load(std::memory_order_acquire);
    if (f >= 0) {
      Frame& fr = frame_[f];
      // Sequentially consistent, like TakeFrame's unmap-then-check: either
      // the eviction sees this pin or this re-check sees the unmap. (Same
      // instructions as acq_rel on x86.)
      fr.pins.fetch_add(1, std::memory_order_seq_cst);
      // Still this page? (An eviction may have raced the pin.)
      if (source->table_[page].load(std::memory_order_seq_cst) == f) {
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
  // false if the page is not cached (loading counts as not cached) or the
  // read raced (then Pin).
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

  // Pin's hit path alone: the cached page's bytes, pinned, or nullptr when
  // it is not cached (or loading); never takes a miss.
  std::byte* PinIfCached(int worker, PageSource* source, uint64_t page) {
    int32_t f = source->table_[page].load(std::memory_order_acquire);
    if (f < 0) return nullptr;
    Frame& fr = frame_[f];
    fr.pins.fetch_add(1, std::memory_order_seq_cst);  // as in Pin
    if (source->table_[page].load(std::memory_order_seq_cst) != f) {
      fr.pins.fetch_sub(1, std::memory_order_acq_rel);
      return nullptr;
    }
    if (!fr.referenced.load(std::memory_order_relaxed)) {
      fr.referenced.store(true, std::memory_order_relaxed);
    }
    ++counters_[worker].hits;
    return data(f);
  }

  void Unpin(PageSource* source, uint64_t page, bool dirtied)
      ABSL_LOCKS_EXCLUDED(mu_) {
    int32_t f = source->table_[page].load(std::memory_order_acquire);
    if (f < 0) return UnpinSlow(source, page, dirtied);
    if (dirtied) frame_[f].dirty.store(true, std::memory_order_relaxed);
    frame_[f].pins.fetch_sub(1, std::memory_order_acq_rel);
  }

  // Writes back every dirty page of `source` (keeping it cached, clean), in
  // batches of up to kWriteBatchPages, each written with mu_ released. Uses
  // worker 0's endpoint; call when no worker holds its pages.
  absl::Status FlushDirty(PageSource* source) ABSL_LOCKS_EXCLUDED(mu_);
  // The cached bytes of a page, or nullptr (no pin; call between supersteps).
  const std::byte* Peek(PageSource* source, uint64_t page);
  // Forgets every page of `source` without writing it back (after waiting
  // for its I/O in flight, of which there is none between supersteps). No
  // worker may hold its pages.
  void Drop(PageSource* source) ABSL_LOCKS_EXCLUDED(mu_);
  // Forgets pages [first, first + count) of `source` that are cached (another
  // compute node changed them), like Drop: between operations, none of
  // them dirty or pinned.
  void Invalidate(PageSource* source, uint64_t first, uint64_t count)
      ABSL_LOCKS_EXCLUDED(mu_);

  CacheCounters counters() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // What the hit paths touch, lock-free.
  struct Frame {
    // Holders' pins, plus one while a miss or a flush owns the frame for
    // I/O (the clock skips pinned frames). Only ever added to and
    // subtracted from: a lock-free Pin that raced an eviction adds and
    // takes back one, which a store would lose.
    std::atomic<int32_t> pins{0};
    std::atomic<bool> referenced{false};
    std::atomic<bool> dirty{false};
    std::atomic<uint32_t> gen{0};  // odd while claimed by a miss
  };
  // What a frame holds; under mu_.
  enum class FrameState : uint8_t {
    kFree,     // nothing (never used, dropped, or a failed fetch's); unpinned
    kMapped,   // (source, page); its table entry names the frame
    kWriting,  // (source, page) is a dirty victim of a miss, being written
               // back; its table entry is kLoading; pinned by the miss
    kFilling,  // (source, page) is being fetched by a miss into the frame;
               // its table entry is kLoading; pinned by the miss
  };
  struct FrameMeta {
    PageSource* source = nullptr;
    uint64_t page = 0;
    FrameState state = FrameState::kFree;
  };
  struct alignas(64) WorkerCounters : CacheCounters {
    // The worker's own last miss run (its misses on one source may be
    // sequential while the source's, interleaved with others', are not).
    PageSource* run_source = nullptr;
    uint64_t run_end = 0;
    uint64_t run_pages = 1;
  };
  // A dirty frame the clock evicted: unmapped (kLoading) and pinned, its
  // bytes intact until written back.
  struct Victim {
    PageSource* source;
    uint64_t page;
    int32_t frame;
  };
  // A miss in progress: frames[k] receives page + k.
  struct Miss {
    PageSource* source;
    uint64_t page;
    std::vector<int32_t> frames;
    std::vector<Victim> victims;
  };

  std::byte* data(int32_t f) { return memory_.data() + f * kPageBytes; }
  absl::StatusOr<std::byte*> PinSlow(int worker, PageSource* source,
                                     uint64_t page) ABSL_LOCKS_EXCLUDED(mu_);
  // A pinned page's entry is negative only for an instant, while the clock,
  // under mu_, unmaps it to check it for pins and maps it back: past mu_,
  // it names the frame again.
  void UnpinSlow(PageSource* source, uint64_t page, bool dirtied)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Under mu_: a hit (the page was published meanwhile: pinned, returned),
  // an error, or nullptr with `miss` claimed: its pages marked kLoading,
  // its frames pinned (kFilling, or kWriting for dirty victims).
  absl::StatusOr<std::byte*> Claim(int worker, Miss& miss)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Under mu_, after the victims' write-back: on success their pages become
  // kNotCached and their frames kFilling; on failure everything is undone.
  void EndWriteBack(Miss& miss, const absl::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Under mu_, after the fetch: publishes the pages (the first pinned for
  // the caller) or, on failure, frees the frames.
  void EndFetch(int worker, Miss& miss, const absl::Status& status,
                const std::vector<uint8_t>& dirtied)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A frame to refill (empty, or evicted by the clock), pinned; a dirty
  // victim is appended to `dirty` (state kWriting) for the caller to write
  // back (all of a miss's victims in one batch per source); any other
  // frame is returned kFree. Error when every frame is pinned.
  absl::StatusOr<int32_t> TakeFrame(int worker, std::vector<Victim>* dirty)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sets what frame f holds, keeping the sources' busy counts.
  void SetFrame(int32_t f, FrameState state, PageSource* source, uint64_t page)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes the victims back, one batch per source (in chunks of at most
  // kWriteBatchPages). Unlocked: the victims are pinned and unmapped, so
  // nobody else touches their frames.
  absl::Status WriteBack(int worker, std::vector<Victim>& victims)
      ABSL_LOCKS_EXCLUDED(mu_);

  const uint64_t frames_;
  const uint64_t read_ahead_;
  const bool ramp_;
  AlignedBuffer memory_;
  std::unique_ptr<Frame[]> frame_;
  Mutex mu_;
  // Signalled (all) whenever a miss or flush ends a phase: pages published
  // or cleared, frames released, a source's busy count lowered.
  std::condition_variable io_done_;
  std::vector<FrameMeta> meta_ ABSL_GUARDED_BY(mu_);
  uint64_t hand_ ABSL_GUARDED_BY(mu_) = 0;    // the clock hand
  uint64_t filled_ ABSL_GUARDED_BY(mu_) = 0;  // frames ever used
  // Misses and flushes between claim and publication (their frames are
  // pinned): a miss that finds every frame pinned waits for them rather
  // than failing.
  int inflight_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t flush_writebacks_ ABSL_GUARDED_BY(mu_) = 0;
  // Per worker, written only by that worker's thread (hits lock-free,
  // misses with or without mu_); summed by counters() when workers rest.
  std::vector<WorkerCounters> counters_;
};

}  // namespace dmg::compute

#endif  // DMG_COMPUTE_NODE_PAGE_CACHE_H_

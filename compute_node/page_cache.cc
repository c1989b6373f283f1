#include "compute_node/page_cache.h"

#include <algorithm>
#include <functional>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"

namespace dmg::compute {

CacheCounters& CacheCounters::operator+=(const CacheCounters& o) {
  hits += o.hits;
  misses += o.misses;
  evictions += o.evictions;
  writebacks += o.writebacks;
  bytes_fetched += o.bytes_fetched;
  bytes_saved += o.bytes_saved;
  return *this;
}

CacheCounters CacheCounters::operator-(const CacheCounters& o) const {
  CacheCounters d;
  d.hits = hits - o.hits;
  d.misses = misses - o.misses;
  d.evictions = evictions - o.evictions;
  d.writebacks = writebacks - o.writebacks;
  d.bytes_fetched = bytes_fetched - o.bytes_fetched;
  d.bytes_saved = bytes_saved - o.bytes_saved;
  return d;
}

PageCache::PageCache(uint64_t frames, int workers, uint64_t read_ahead,
                     bool ramp)
    : frames_(frames),
      read_ahead_(std::max<uint64_t>(1, std::min(read_ahead, frames / 4))),
      ramp_(ramp),
      memory_(frames * kPageBytes, AlignedBuffer::Init::kUninitialized),
      frame_(new Frame[frames]),
      meta_(frames),
      counters_(workers + 1) {}

void PageCache::Attach(PageSource* source, uint64_t pages) {
  source->pages_ = pages;
  source->table_.reset(new std::atomic<int32_t>[pages]);
  for (uint64_t p = 0; p < pages; ++p) source->table_[p].store(kNotCached);
}

void PageCache::SetFrame(int32_t f, FrameState state, PageSource* source,
                         uint64_t page) {
  auto in_io = [](FrameState s) {
    return s == FrameState::kWriting || s == FrameState::kFilling;
  };
  FrameMeta& m = meta_[f];
  if (in_io(m.state)) --m.source->busy_;
  if (in_io(state)) ++source->busy_;
  m = {source, page, state};
}

absl::StatusOr<int32_t> PageCache::TakeFrame(int worker,
                                             std::vector<Victim>* dirty) {
  // A taken frame is pinned (so a second TakeFrame cannot pick it) until
  // its miss publishes or abandons it.
  if (filled_ < frames_) {
    int32_t f = static_cast<int32_t>(filled_++);
    frame_[f].pins.fetch_add(1, std::memory_order_acq_rel);
    return f;
  }
  // Clock: skip pinned frames (held, or owned by a miss or flush for I/O);
  // give referenced ones a second chance.
  for (uint64_t scanned = 0; scanned < 3 * frames_; ++scanned) {
    int32_t f = static_cast<int32_t>(hand_);
    hand_ = (hand_ + 1) % frames_;
    Frame& fr = frame_[f];
    FrameMeta& m = meta_[f];
    if (fr.pins.load(std::memory_order_acquire) > 0) continue;
    if (m.state == FrameState::kFree) {  // emptied by Drop or a failed fetch
      fr.pins.fetch_add(1, std::memory_order_acq_rel);
      return f;
    }
    // Unpinned, so kMapped (kWriting and kFilling frames are pinned).
    if (fr.referenced.exchange(false, std::memory_order_relaxed)) continue;
    // Unmap first (kLoading: a miss on the page waits, see below), then make
    // sure no hit pinned it in between (both sequentially consistent: the
    // mirror image of Pin's pin-then-recheck).
    std::atomic<int32_t>& entry = m.source->table_[m.page];
    entry.store(kLoading, std::memory_order_seq_cst);
    if (fr.pins.load(std::memory_order_seq_cst) > 0) {
      entry.store(f, std::memory_order_release);
      continue;
    }
    // Now nobody holds it, so the dirty bit is final (read only after the
    // pin check: a holder sets it before unpinning).
    ++counters_[worker].evictions;
    fr.pins.fetch_add(1, std::memory_order_acq_rel);
    fr.referenced.store(false, std::memory_order_relaxed);
    if (fr.dirty.load(std::memory_order_acquire)) {
      // Hazard: a dirty victim in transit. Until its write-back has landed,
      // remote memory holds stale bytes for the page, so a miss on it must
      // not fetch it: its entry stays kLoading (misses on it wait; read-ahead
      // stops at it) until EndWriteBack clears it, or maps the frame back
      // when the write failed. (The frame is not handed back to such a miss
      // even though its bytes are intact: it is promised to the evicting
      // miss, which fetches into it right after the write. The evicted page
      // was unreferenced for a whole sweep of the clock, so a miss on it
      // during the write is rare; it then costs one fetch.)
      SetFrame(f, FrameState::kWriting, m.source, m.page);
      dirty->push_back({m.source, m.page, f});
    } else {
      // Clean: remote memory has its bytes, so it may be fetched again
      // at once.
      entry.store(kNotCached, std::memory_order_release);
      SetFrame(f, FrameState::kFree, nullptr, 0);
    }
    return f;
  }
  return absl::ResourceExhaustedError(absl::StrFormat(
      "page cache of %d frames is fully pinned; raise --cache_mb", frames_));
}

absl::Status PageCache::WriteBack(int worker, std::vector<Victim>& victims) {
  // Group by source (stable: a source's pages keep the clock's order).
  std::stable_sort(victims.begin(), victims.end(),
                   [](const Victim& a, const Victim& b) {
                     return std::less<PageSource*>()(a.source, b.source);
                   });
  absl::Status status;
  std::vector<DirtyPage> batch;
  for (size_t i = 0; i < victims.size() && status.ok();) {
    size_t j = i;
    batch.clear();
    while (j < victims.size() && victims[j].source == victims[i].source &&
           batch.size() < kWriteBatchPages) {
      batch.push_back({victims[j].page, data(victims[j].frame)});
      ++j;
    }
    status = victims[i].source->WriteBackPages(worker, batch);
    if (status.ok()) counters_[worker].writebacks += batch.size();
    i = j;
  }
  return status;
}

absl::StatusOr<std::byte*> PageCache::Claim(int worker, Miss& miss) {
  PageSource* const source = miss.source;
  const uint64_t page = miss.page;
  WorkerCounters& c = counters_[worker];
  for (;;) {
    int32_t f = source->table_[page].load(std::memory_order_acquire);
    // Another worker brought it in while we waited (for the lock, or for
    // its fetch): a hit, counted as one (as a miss is counted once, by the
    // worker that fetched). No race with eviction, which takes mu_.
    if (f >= 0) {
      frame_[f].pins.fetch_add(1, std::memory_order_acq_rel);
      frame_[f].referenced.store(true, std::memory_order_relaxed);
      ++c.hits;
      return data(f);
    }
    // Hazard: two workers missing on one page. The first marked it kLoading
    // (being fetched); fetching it again into a second frame would map the
    // page twice, and one copy's writes would be lost at write-back. So wait
    // for its publication: then it is a hit, or, if that fetch failed,
    // kNotCached and ours to fetch. The same wait covers a dirty victim in
    // transit (see TakeFrame).
    if (f == kLoading) {
      mu_.Wait(io_done_);
      continue;
    }
    absl::StatusOr<int32_t> first = TakeFrame(worker, &miss.victims);
    if (!first.ok()) {
      // Every frame pinned. Frames owned by I/O in flight come free when it
      // ends; frames held by workers might not, so fail only without any.
      if (inflight_ > 0) {
        mu_.Wait(io_done_);
        continue;
      }
      return first.status();
    }
    miss.frames.push_back(*first);
    break;
  }
  // A miss where the source's or this worker's previous miss run ended:
  // read ahead (the pages not cached, up to read_ahead_). Pages loading —
  // being fetched by another miss, or dirty victims in transit — end the
  // run: neither may be fetched now.
  uint64_t want = 1;
  if (read_ahead_ > 1) {
    if (page == source->run_end_) {
      want =
          ramp_ ? std::min(read_ahead_, 2 * source->run_pages_) : read_ahead_;
    } else if (c.run_source == source && page == c.run_end) {
      want = ramp_ ? std::min(read_ahead_, 2 * c.run_pages) : read_ahead_;
    }
  }
  while (miss.frames.size() < want &&
         page + miss.frames.size() < source->pages_ &&
         source->table_[page + miss.frames.size()].load(
             std::memory_order_relaxed) == kNotCached) {
    absl::StatusOr<int32_t> f = TakeFrame(worker, &miss.victims);
    if (!f.ok()) break;  // read ahead less
    miss.frames.push_back(*f);
  }
  // Claim the pages: kLoading until EndFetch, so that nobody fetches them
  // twice. (TakeFrame cannot have evicted any of them: they were not
  // cached.)
  for (size_t k = 0; k < miss.frames.size(); ++k) {
    int32_t f = miss.frames[k];
    frame_[f].gen.fetch_add(1, std::memory_order_acq_rel);  // odd
    source->table_[page + k].store(kLoading, std::memory_order_release);
    // A dirty victim stays kWriting (its old page) until written back.
    if (meta_[f].state != FrameState::kWriting) {
      SetFrame(f, FrameState::kFilling, source, page + k);
    }
  }
  // Read-ahead state moves on at the claim (not at publication), so that
  // the next worker of a scan, missing on the page after this run while it
  // is in flight, reads ahead too. A failed fetch leaves it so: it is only
  // a hint.
  source->run_end_ = c.run_end = page + miss.frames.size();
  source->run_pages_ = c.run_pages = miss.frames.size();
  c.run_source = source;
  ++inflight_;
  return nullptr;
}

void PageCache::EndWriteBack(Miss& miss, const absl::Status& status) {
  if (status.ok()) {
    // The victims' bytes are in remote memory: their pages may be fetched
    // again (misses waiting on them retry), and their frames are refilled.
    for (const Victim& v : miss.victims) {
      v.source->table_[v.page].store(kNotCached, std::memory_order_release);
    }
    for (size_t k = 0; k < miss.frames.size(); ++k) {
      int32_t f = miss.frames[k];
      if (meta_[f].state == FrameState::kWriting) {
        SetFrame(f, FrameState::kFilling, miss.source, miss.page + k);
      }
    }
    io_done_.notify_all();
    return;
  }
  // Hazard: a failed write-back. Nothing is lost: the victims go back into
  // their tables, dirty (a page written twice is harmless; a page lost is
  // not); the other frames are freed, the miss's pages are not cached
  // again, every pin taken for the miss is dropped, and waiters retry (a
  // miss waiting on a victim then hits it).
  for (const Victim& v : miss.victims) {
    Frame& fr = frame_[v.frame];
    fr.dirty.store(true, std::memory_order_relaxed);
    SetFrame(v.frame, FrameState::kMapped, v.source, v.page);
  }
  for (size_t k = 0; k < miss.frames.size(); ++k) {
    int32_t f = miss.frames[k];
    Frame& fr = frame_[f];
    fr.gen.fetch_add(1, std::memory_order_acq_rel);  // even
    if (meta_[f].state == FrameState::kFilling) {
      SetFrame(f, FrameState::kFree, nullptr, 0);
    } else {  // a victim, remapped (after its gen is even again)
      meta_[f].source->table_[meta_[f].page].store(f,
                                                   std::memory_order_release);
    }
    miss.source->table_[miss.page + k].store(kNotCached,
                                             std::memory_order_release);
    fr.pins.fetch_sub(1, std::memory_order_acq_rel);
  }
  --inflight_;
  io_done_.notify_all();
}

void PageCache::EndFetch(int worker, Miss& miss, const absl::Status& status,
                         const std::vector<uint8_t>& dirtied) {
  PageSource* const source = miss.source;
  for (size_t k = 0; k < miss.frames.size(); ++k) {
    int32_t f = miss.frames[k];
    Frame& fr = frame_[f];
    fr.gen.fetch_add(1, std::memory_order_acq_rel);  // even
    if (status.ok()) {
      fr.dirty.store(dirtied[k] != 0, std::memory_order_relaxed);
      fr.referenced.store(true, std::memory_order_relaxed);
      SetFrame(f, FrameState::kMapped, source, miss.page + k);
      // The first page stays pinned for the caller.
      if (k > 0) fr.pins.fetch_sub(1, std::memory_order_acq_rel);
      source->table_[miss.page + k].store(f, std::memory_order_release);
    } else {
      // Hazard: a failed fetch. Nothing was cached, so nothing is lost: the
      // frames are freed and unpinned, the pages not cached; a miss waiting
      // on one of them retries (and fetches it itself).
      SetFrame(f, FrameState::kFree, nullptr, 0);
      fr.pins.fetch_sub(1, std::memory_order_acq_rel);
      source->table_[miss.page + k].store(kNotCached,
                                          std::memory_order_release);
    }
  }
  if (status.ok()) {
    WorkerCounters& c = counters_[worker];
    ++c.misses;
    c.bytes_fetched += miss.frames.size() * kPageBytes;
  }
  --inflight_;
  io_done_.notify_all();
}

absl::StatusOr<std::byte*> PageCache::PinSlow(int worker, PageSource* source,
                                              uint64_t page) {
  // Claim under the lock, write back and fetch unlocked, publish under the
  // lock.
  Miss miss{source, page, {}, {}};
  {
    MutexLock lock(&mu_);
    absl::StatusOr<std::byte*> hit = Claim(worker, miss);
    if (!hit.ok() || *hit != nullptr) return hit;
  }
  // The victims' bytes go out before their frames are refilled.
  if (!miss.victims.empty()) {
    absl::Status s = WriteBack(worker, miss.victims);
    MutexLock lock(&mu_);
    EndWriteBack(miss, s);
    if (!s.ok()) return s;
  }
  std::vector<std::byte*> dst;
  dst.reserve(miss.frames.size());
  for (int32_t f : miss.frames) dst.push_back(data(f));
  std::vector<uint8_t> dirtied(miss.frames.size(), 0);
  absl::Status s = source->FetchPages(worker, page, miss.frames.size(),
                                      dst.data(), dirtied.data());
  MutexLock lock(&mu_);
  EndFetch(worker, miss, s, dirtied);
  if (!s.ok()) return s;
  return dst[0];
}

void PageCache::UnpinSlow(PageSource* source, uint64_t page, bool dirtied) {
  MutexLock lock(&mu_);
  int32_t f = source->table_[page].load(std::memory_order_acquire);
  if (f < 0) return;  // not pinned after all (a caller's mistake)
  if (dirtied) frame_[f].dirty.store(true, std::memory_order_relaxed);
  frame_[f].pins.fetch_sub(1, std::memory_order_acq_rel);
}

absl::Status PageCache::FlushDirty(PageSource* source) {
  std::vector<DirtyPage> batch;
  std::vector<int32_t> batch_frames;
  MutexLock lock(&mu_);
  // Write-backs of this source's victims by misses (whose failure would
  // map them back dirty) and other flushes end first. None are in flight
  // between supersteps.
  while (source->busy_ > 0) mu_.Wait(io_done_);
  ++source->busy_;
  ++inflight_;
  absl::Status status;
  for (uint64_t next = 0; next < filled_ && status.ok();) {
    // Hazard: flushing unlocked. The batch's frames are pinned, so the
    // clock cannot evict and refill them while their bytes go out (Drop
    // waits for the busy count): each still holds the same page when the
    // write ends. Their dirty bits are cleared before the write, so a
    // worker that dirties one meanwhile sets it again and the page stays
    // dirty (its new bytes may have missed the write).
    batch.clear();
    batch_frames.clear();
    for (; next < filled_ && batch.size() < kWriteBatchPages; ++next) {
      int32_t f = static_cast<int32_t>(next);
      Frame& fr = frame_[f];
      if (meta_[f].source != source || meta_[f].state != FrameState::kMapped ||
          !fr.dirty.load(std::memory_order_acquire)) {
        continue;
      }
      fr.pins.fetch_add(1, std::memory_order_acq_rel);
      fr.dirty.store(false, std::memory_order_relaxed);
      batch.push_back({meta_[f].page, data(f)});
      batch_frames.push_back(f);
    }
    if (batch.empty()) break;
    mu_.Unlock();
    status = source->WriteBackPages(0, batch);
    mu_.Lock();
    for (int32_t f : batch_frames) {
      // Failed: dirty again, nothing lost.
      if (!status.ok()) frame_[f].dirty.store(true, std::memory_order_relaxed);
      frame_[f].pins.fetch_sub(1, std::memory_order_acq_rel);
    }
    if (status.ok()) flush_writebacks_ += batch.size();
    io_done_.notify_all();  // frames unpinned
  }
  --source->busy_;
  --inflight_;
  io_done_.notify_all();
  return status;
}

const std::byte* PageCache::Peek(PageSource* source, uint64_t page) {
  int32_t f = source->table_[page].load(std::memory_order_acquire);
  return f < 0 ? nullptr : data(f);
}

void PageCache::Drop(PageSource* source) {
  MutexLock lock(&mu_);
  // Its frames in I/O (misses, flushes) come back first.
  while (source->busy_ > 0) mu_.Wait(io_done_);
  for (uint64_t i = 0; i < filled_; ++i) {
    int32_t f = static_cast<int32_t>(i);
    if (meta_[f].source != source) continue;
    // kMapped: the busy count is 0.
    Frame& fr = frame_[f];
    source->table_[meta_[f].page].store(kNotCached, std::memory_order_release);
    fr.gen.fetch_add(2, std::memory_order_acq_rel);
    fr.dirty.store(false);
    fr.referenced.store(false);
    SetFrame(f, FrameState::kFree, nullptr, 0);
  }
}

void PageCache::Invalidate(PageSource* source, uint64_t first, uint64_t count) {
  MutexLock lock(&mu_);
  while (source->busy_ > 0) mu_.Wait(io_done_);
  for (uint64_t page = first; page < first + count; ++page) {
    const int32_t f = source->table_[page].load(std::memory_order_acquire);
    if (f < 0) continue;
    Frame& fr = frame_[f];
    source->table_[page].store(kNotCached, std::memory_order_release);
    fr.gen.fetch_add(2, std::memory_order_acq_rel);
    fr.dirty.store(false);
    fr.referenced.store(false);
    SetFrame(f, FrameState::kFree, nullptr, 0);
  }
}

CacheCounters PageCache::counters() {
  CacheCounters total;
  for (const WorkerCounters& c : counters_) total += c;
  {
    MutexLock lock(&mu_);
    total.writebacks += flush_writebacks_;
  }
  total.bytes_saved = total.hits * kPageBytes;
  return total;
}

}  // namespace dmg::compute

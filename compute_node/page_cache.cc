#include "compute_node/page_cache.h"

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

PageCache::PageCache(uint64_t frames, int workers)
    : frames_(frames),
      memory_(frames * kPageBytes, AlignedBuffer::Init::kUninitialized),
      frame_(new Frame[frames]),
      counters_(workers + 1) {}

void PageCache::Attach(PageSource* source, uint64_t pages) {
  source->pages_ = pages;
  source->table_.reset(new std::atomic<int32_t>[pages]);
  for (uint64_t p = 0; p < pages; ++p) source->table_[p].store(-1);
}

absl::StatusOr<std::byte*> PageCache::PinSlow(int worker, PageSource* source,
                                              uint64_t page) {
  std::lock_guard lock(mu_);
  WorkerCounters& c = counters_[worker];
  // Another worker may have brought it in while we waited for the lock.
  if (int32_t f = source->table_[page].load(std::memory_order_acquire);
      f >= 0) {
    frame_[f].pins.fetch_add(1, std::memory_order_acq_rel);
    frame_[f].referenced.store(true, std::memory_order_relaxed);
    ++c.hits;
    return data(f);
  }
  int32_t victim = -1;
  if (filled_ < frames_) {
    victim = static_cast<int32_t>(filled_++);
  } else {
    // Clock: skip pinned frames; give referenced ones a second chance.
    for (uint64_t scanned = 0; scanned < 3 * frames_ && victim < 0; ++scanned) {
      int32_t f = static_cast<int32_t>(hand_);
      hand_ = (hand_ + 1) % frames_;
      Frame& fr = frame_[f];
      if (fr.source == nullptr) {  // emptied by Drop or a failed fetch
        victim = f;
        break;
      }
      if (fr.pins.load(std::memory_order_acquire) > 0) continue;
      if (fr.referenced.exchange(false, std::memory_order_relaxed)) continue;
      // Unmap first, then make sure no hit pinned it in between.
      fr.source->table_[fr.page].store(-1, std::memory_order_release);
      if (fr.pins.load(std::memory_order_acquire) > 0) {
        fr.source->table_[fr.page].store(f, std::memory_order_release);
        continue;
      }
      victim = f;
    }
    if (victim < 0) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "page cache of %d frames is fully pinned; raise --cache_mb",
          frames_));
    }
    Frame& old = frame_[victim];
    if (old.source != nullptr && old.dirty.load(std::memory_order_relaxed)) {
      absl::Status s =
          old.source->WriteBackPage(worker, old.page, data(victim));
      if (!s.ok()) {
        old.source->table_[old.page].store(victim, std::memory_order_release);
        return s;
      }
      ++c.writebacks;
    }
    if (old.source != nullptr) ++c.evictions;
  }
  Frame& fr = frame_[victim];
  fr.source = nullptr;
  fr.gen.fetch_add(1, std::memory_order_acq_rel);  // odd: being refilled
  absl::Status s = source->FetchPage(worker, page, data(victim));
  fr.gen.fetch_add(1, std::memory_order_acq_rel);  // even again
  if (!s.ok()) {  // the frame stays empty (source == nullptr)
    fr.dirty.store(false);
    fr.pins.store(0);
    return s;
  }
  fr.source = source;
  fr.page = page;
  fr.dirty.store(false, std::memory_order_relaxed);
  fr.referenced.store(true, std::memory_order_relaxed);
  fr.pins.store(1, std::memory_order_release);
  source->table_[page].store(victim, std::memory_order_release);
  ++c.misses;
  c.bytes_fetched += kPageBytes;
  return data(victim);
}

absl::Status PageCache::FlushDirty(PageSource* source) {
  std::lock_guard lock(mu_);
  for (uint64_t f = 0; f < filled_; ++f) {
    Frame& fr = frame_[f];
    if (fr.source != source || !fr.dirty.load(std::memory_order_relaxed)) {
      continue;
    }
    absl::Status s = source->WriteBackPage(0, fr.page, data(f));
    if (!s.ok()) return s;
    fr.dirty.store(false, std::memory_order_relaxed);
    ++counters_[0].writebacks;
  }
  return absl::OkStatus();
}

const std::byte* PageCache::Peek(PageSource* source, uint64_t page) {
  int32_t f = source->table_[page].load(std::memory_order_acquire);
  return f < 0 ? nullptr : data(f);
}

void PageCache::Drop(PageSource* source) {
  std::lock_guard lock(mu_);
  for (uint64_t f = 0; f < filled_; ++f) {
    Frame& fr = frame_[f];
    if (fr.source != source) continue;
    source->table_[fr.page].store(-1, std::memory_order_release);
    fr.gen.fetch_add(2, std::memory_order_acq_rel);
    fr.source = nullptr;
    fr.dirty.store(false);
    fr.referenced.store(false);
    fr.pins.store(0);
  }
}

CacheCounters PageCache::counters() {
  CacheCounters total;
  for (const WorkerCounters& c : counters_) total += c;
  total.bytes_saved = total.hits * kPageBytes;
  return total;
}

}  // namespace dmg::compute

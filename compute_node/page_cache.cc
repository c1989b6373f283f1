#include "compute_node/page_cache.h"

#include <algorithm>
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

PageCache::PageCache(uint64_t frames, int workers, uint64_t read_ahead)
    : frames_(frames),
      read_ahead_(std::max<uint64_t>(1, std::min(read_ahead, frames / 4))),
      memory_(frames * kPageBytes, AlignedBuffer::Init::kUninitialized),
      frame_(new Frame[frames]),
      counters_(workers + 1) {}

void PageCache::Attach(PageSource* source, uint64_t pages) {
  source->pages_ = pages;
  source->table_.reset(new std::atomic<int32_t>[pages]);
  for (uint64_t p = 0; p < pages; ++p) source->table_[p].store(-1);
}

absl::StatusOr<int32_t> PageCache::TakeFrame(int worker) {
  // A taken frame is pinned (so a second TakeFrame cannot pick it) until
  // the caller maps it.
  if (filled_ < frames_) {
    int32_t f = static_cast<int32_t>(filled_++);
    frame_[f].pins.store(1, std::memory_order_release);
    return f;
  }
  WorkerCounters& c = counters_[worker];
  int32_t victim = -1;
  // Clock: skip pinned frames; give referenced ones a second chance.
  for (uint64_t scanned = 0; scanned < 3 * frames_ && victim < 0; ++scanned) {
    int32_t f = static_cast<int32_t>(hand_);
    hand_ = (hand_ + 1) % frames_;
    Frame& fr = frame_[f];
    if (fr.pins.load(std::memory_order_acquire) > 0) continue;
    if (fr.source == nullptr) {  // emptied by Drop or a failed fetch
      fr.pins.store(1, std::memory_order_release);
      return f;
    }
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
        "page cache of %d frames is fully pinned; raise --cache_mb", frames_));
  }
  Frame& old = frame_[victim];
  if (old.dirty.load(std::memory_order_relaxed)) {
    absl::Status s = old.source->WriteBackPage(worker, old.page, data(victim));
    if (!s.ok()) {
      old.source->table_[old.page].store(victim, std::memory_order_release);
      return s;
    }
    ++c.writebacks;
  }
  ++c.evictions;
  old.source = nullptr;
  old.dirty.store(false, std::memory_order_relaxed);
  old.pins.store(1, std::memory_order_release);
  return victim;
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
  // A miss right after the previous page's: read ahead (pages not cached).
  uint64_t count = 1;
  if (read_ahead_ > 1 && c.last_source == source && c.last_page + 1 == page) {
    while (count < read_ahead_ && page + count < source->pages_ &&
           source->table_[page + count].load(std::memory_order_relaxed) < 0) {
      ++count;
    }
  }
  std::vector<int32_t> frames;
  std::vector<std::byte*> dst;
  for (uint64_t k = 0; k < count; ++k) {
    absl::StatusOr<int32_t> f = TakeFrame(worker);
    if (!f.ok()) {
      if (k == 0) return f.status();
      break;
    }
    frames.push_back(*f);
    dst.push_back(data(*f));
  }
  count = frames.size();
  for (int32_t f : frames)
    frame_[f].gen.fetch_add(1, std::memory_order_acq_rel);
  absl::Status s = source->FetchPages(worker, page, count, dst.data());
  for (int32_t f : frames)
    frame_[f].gen.fetch_add(1, std::memory_order_acq_rel);
  if (!s.ok()) {  // the frames stay empty (source == nullptr)
    for (int32_t f : frames) frame_[f].pins.store(0);
    return s;
  }
  for (uint64_t k = 0; k < count; ++k) {
    Frame& fr = frame_[frames[k]];
    fr.source = source;
    fr.page = page + k;
    fr.dirty.store(false, std::memory_order_relaxed);
    fr.referenced.store(true, std::memory_order_relaxed);
    fr.pins.store(k == 0 ? 1 : 0, std::memory_order_release);
    source->table_[page + k].store(frames[k], std::memory_order_release);
  }
  ++c.misses;
  c.bytes_fetched += count * kPageBytes;
  c.last_source = source;
  c.last_page = page + count - 1;
  return data(frames[0]);
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

#include "compute_node/page_cache.h"

#include <algorithm>
#include <functional>
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

absl::StatusOr<int32_t> PageCache::TakeFrame(int worker,
                                             std::vector<Victim>* dirty) {
  // A taken frame is pinned (so a second TakeFrame cannot pick it) until
  // the caller maps it.
  if (filled_ < frames_) {
    int32_t f = static_cast<int32_t>(filled_++);
    frame_[f].pins.store(1, std::memory_order_release);
    return f;
  }
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
  ++counters_[worker].evictions;
  if (old.dirty.load(std::memory_order_relaxed)) {
    dirty->push_back({old.source, old.page, victim});
  }
  old.source = nullptr;
  old.dirty.store(false, std::memory_order_relaxed);
  old.pins.store(1, std::memory_order_release);
  return victim;
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
  if (!status.ok()) {
    // Nothing is lost: the victims go back into their tables, dirty (a page
    // written twice is harmless; a page lost is not).
    for (const Victim& v : victims) {
      Frame& fr = frame_[v.frame];
      fr.source = v.source;
      fr.page = v.page;
      fr.dirty.store(true, std::memory_order_relaxed);
      fr.pins.store(0, std::memory_order_release);
      v.source->table_[v.page].store(v.frame, std::memory_order_release);
    }
  }
  return status;
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
  // A miss where the source's or this worker's previous miss run ended:
  // read ahead (the pages not cached, up to read_ahead_).
  uint64_t want = 1;
  if (read_ahead_ > 1) {
    if (page == source->run_end_ ||
        (c.run_source == source && page == c.run_end)) {
      want = read_ahead_;
    }
  }
  uint64_t count = 1;
  while (count < want && page + count < source->pages_ &&
         source->table_[page + count].load(std::memory_order_relaxed) < 0) {
    ++count;
  }
  std::vector<int32_t> frames;
  std::vector<std::byte*> dst;
  std::vector<Victim> dirty;
  for (uint64_t k = 0; k < count; ++k) {
    absl::StatusOr<int32_t> f = TakeFrame(worker, &dirty);
    if (!f.ok()) {
      if (k == 0) return f.status();
      break;
    }
    frames.push_back(*f);
    dst.push_back(data(*f));
  }
  count = frames.size();
  // The victims' bytes go out before the frames are refilled.
  if (absl::Status s = WriteBack(worker, dirty); !s.ok()) {
    for (int32_t f : frames) {
      if (frame_[f].source == nullptr) frame_[f].pins.store(0);
    }
    return s;
  }
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
  source->run_end_ = c.run_end = page + count;
  c.run_source = source;
  return data(frames[0]);
}

absl::Status PageCache::FlushDirty(PageSource* source) {
  std::lock_guard lock(mu_);
  std::vector<DirtyPage> batch;
  std::vector<uint64_t> batch_frames;
  auto write = [&]() -> absl::Status {
    if (batch.empty()) return absl::OkStatus();
    if (absl::Status s = source->WriteBackPages(0, batch); !s.ok()) return s;
    for (uint64_t f : batch_frames) {
      frame_[f].dirty.store(false, std::memory_order_relaxed);
    }
    counters_[0].writebacks += batch.size();
    batch.clear();
    batch_frames.clear();
    return absl::OkStatus();
  };
  for (uint64_t f = 0; f < filled_; ++f) {
    Frame& fr = frame_[f];
    if (fr.source != source || !fr.dirty.load(std::memory_order_relaxed)) {
      continue;
    }
    batch.push_back({fr.page, data(f)});
    batch_frames.push_back(f);
    if (batch.size() == kWriteBatchPages) {
      if (absl::Status s = write(); !s.ok()) return s;
    }
  }
  return write();
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

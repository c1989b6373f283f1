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

PageCache::PageCache(uint64_t frames)
    : frames_(frames), memory_(frames * kPageBytes), table_(frames) {
  free_.reserve(frames);
  for (uint64_t f = frames; f-- > 0;) free_.push_back(static_cast<uint32_t>(f));
  index_.reserve(frames * 2);
}

absl::StatusOr<std::byte*> PageCache::Pin(int worker, PageSource* source,
                                          uint64_t page) {
  std::lock_guard lock(mu_);
  Key key{source, page};
  if (auto it = index_.find(key); it != index_.end()) {
    Frame& f = table_[it->second];
    ++f.pins;
    lru_.splice(lru_.begin(), lru_, f.lru);
    ++counters_.hits;
    counters_.bytes_saved += kPageBytes;
    return data(it->second);
  }
  uint32_t slot;
  if (!free_.empty()) {
    slot = free_.back();
    free_.pop_back();
  } else {
    // Least recently used unpinned frame.
    auto victim = lru_.end();
    for (auto it = lru_.rbegin(); it != lru_.rend(); ++it) {
      if (table_[*it].pins == 0) {
        victim = std::next(it).base();
        break;
      }
    }
    if (victim == lru_.end()) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "page cache of %d frames is fully pinned; raise --cache_mb",
          frames_));
    }
    slot = *victim;
    Frame& old = table_[slot];
    if (old.dirty) {
      absl::Status s =
          old.key.source->WriteBackPage(worker, old.key.page, data(slot));
      if (!s.ok()) return s;
      ++counters_.writebacks;
    }
    index_.erase(old.key);
    lru_.erase(old.lru);
    ++counters_.evictions;
  }
  absl::Status s = source->FetchPage(worker, page, data(slot));
  if (!s.ok()) {
    free_.push_back(slot);
    return s;
  }
  Frame& f = table_[slot];
  f.key = key;
  f.pins = 1;
  f.dirty = false;
  lru_.push_front(slot);
  f.lru = lru_.begin();
  index_.emplace(key, slot);
  ++counters_.misses;
  counters_.bytes_fetched += kPageBytes;
  return data(slot);
}

void PageCache::Unpin(PageSource* source, uint64_t page, bool dirtied) {
  std::lock_guard lock(mu_);
  auto it = index_.find({source, page});
  if (it == index_.end()) return;
  Frame& f = table_[it->second];
  --f.pins;
  f.dirty |= dirtied;
}

absl::Status PageCache::FlushDirty(PageSource* source,
                                   const std::function<void(uint64_t)>& done) {
  std::lock_guard lock(mu_);
  for (auto& [key, slot] : index_) {
    Frame& f = table_[slot];
    if (key.source != source || !f.dirty) continue;
    absl::Status s = source->WriteBackPage(0, key.page, data(slot));
    if (!s.ok()) return s;
    f.dirty = false;
    ++counters_.writebacks;
    done(key.page);
  }
  return absl::OkStatus();
}

const std::byte* PageCache::Peek(PageSource* source, uint64_t page) {
  std::lock_guard lock(mu_);
  auto it = index_.find({source, page});
  return it == index_.end() ? nullptr : data(it->second);
}

void PageCache::Drop(PageSource* source) {
  std::lock_guard lock(mu_);
  for (auto it = index_.begin(); it != index_.end();) {
    if (it->first.source != source) {
      ++it;
      continue;
    }
    Frame& f = table_[it->second];
    lru_.erase(f.lru);
    f = Frame();
    free_.push_back(it->second);
    it = index_.erase(it);
  }
}

CacheCounters PageCache::counters() {
  std::lock_guard lock(mu_);
  return counters_;
}

}  // namespace dmg::compute

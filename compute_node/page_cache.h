// A bounded cache of 4 KiB pages of remote memory, with LRU replacement and
// write-back. Used for vertex-state arrays that do not fit the budget as
// whole local copies, and, under --cache_policy=page_lru, for everything (the
// baseline that behaves like OS paging of far memory: no knowledge of the
// graph, no bypass for scans, no prefetch beyond the page).
//
// Callers Pin a page (fetching it on a miss, evicting the least recently used
// unpinned page and writing it back if dirty), work on its bytes, and Unpin
// it. Pinned pages are never evicted. One lock guards the table; fetches run
// under it (simple and serializing: a known cost of this baseline-grade
// cache, measured by the cache statistics).
#ifndef DMG_COMPUTE_NODE_PAGE_CACHE_H_
#define DMG_COMPUTE_NODE_PAGE_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <list>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "common/aligned_buffer.h"

namespace dmg::compute {

// Something whose pages can be cached: fills a page from remote memory and
// writes a dirty one back, using worker w's transport endpoint.
class PageSource {
 public:
  virtual ~PageSource() = default;
  virtual absl::Status FetchPage(int worker, uint64_t page, std::byte* dst) = 0;
  virtual absl::Status WriteBackPage(int worker, uint64_t page,
                                     const std::byte* src) = 0;
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

  // `frames` pages of memory (reserved by the caller from the budget).
  explicit PageCache(uint64_t frames);
  uint64_t frames() const { return frames_; }

  absl::StatusOr<std::byte*> Pin(int worker, PageSource* source, uint64_t page);
  void Unpin(PageSource* source, uint64_t page, bool dirtied);

  // Writes back every dirty page of `source` (keeping it cached, clean) and
  // calls done(page) for each page written. Uses worker 0's endpoint.
  absl::Status FlushDirty(PageSource* source,
                          const std::function<void(uint64_t)>& done);
  // The cached bytes of a page, or nullptr (no pin; call between supersteps).
  const std::byte* Peek(PageSource* source, uint64_t page);
  // Forgets every page of `source` without writing it back.
  void Drop(PageSource* source);

  CacheCounters counters();

 private:
  struct Key {
    PageSource* source;
    uint64_t page;
    bool operator==(const Key& o) const {
      return source == o.source && page == o.page;
    }
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      return std::hash<uint64_t>()(reinterpret_cast<uintptr_t>(k.source) ^
                                   (k.page * 0x9e3779b97f4a7c15ull));
    }
  };
  struct Frame {
    Key key{nullptr, 0};
    int pins = 0;
    bool dirty = false;
    bool used = false;
    std::list<uint32_t>::iterator lru;  // position in lru_ (front = newest)
  };
  std::byte* data(uint32_t f) { return memory_.data() + f * kPageBytes; }

  const uint64_t frames_;
  AlignedBuffer memory_;
  std::mutex mu_;
  std::vector<Frame> table_;
  std::unordered_map<Key, uint32_t, KeyHash> index_;
  std::list<uint32_t> lru_;
  std::vector<uint32_t> free_;
  CacheCounters counters_;
};

}  // namespace dmg::compute

#endif  // DMG_COMPUTE_NODE_PAGE_CACHE_H_

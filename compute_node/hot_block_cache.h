// The hot-block cache of one direction: whole blocks kept in compute-node
// memory so that later scans do not READ them again.
//
// A fixed set, chosen once: the blocks of the highest average degree (edges
// per vertex) that fill the space granted — all of the direction's blocks
// when the space holds them. A fixed set rather than LRU because scans are
// cyclic: a scan larger than an LRU cache evicts every block before it is
// read again and hits nothing, while a fixed subset hits in proportion to
// its size.
//
// A preferred block is admitted when a scan reads it whole for the second
// time: a one-pass traversal (BFS touches most blocks once) copies nothing
// in. When the space holds the whole direction, a scan of whole blocks
// (every vertex's adjacency: a pull, PageRank's gather) admits on the first
// read instead: such scans repeat, nothing will be evicted, and waiting for
// the second read cost a whole extra pass (urand:20 SSSP pulled the graph
// twice). Admitted blocks stay for the job. Lookups and admissions are safe
// from many workers at once; a block is admitted once.
#ifndef DMG_COMPUTE_NODE_HOT_BLOCK_CACHE_H_
#define DMG_COMPUTE_NODE_HOT_BLOCK_CACHE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "common/aligned_buffer.h"
#include "store/block_format.h"

namespace dmg::compute {

class HotBlockCache {
 public:
  // Chooses the preferred blocks of `directory` (arcs: the direction's
  // total, to size the last block) that fit in `space` bytes, entries
  // [first_entry, last_entry) first when given (a compute node's own range:
  // the blocks it scans; the others' blocks only when it takes their work).
  // The cache's memory is the chosen blocks' total: bytes() <= space.
  HotBlockCache(std::span<const store::DirectoryEntry> directory,
                uint64_t num_arcs, uint64_t space)
      : HotBlockCache(directory, num_arcs, space, 0,
                      static_cast<uint32_t>(directory.size())) {}
  HotBlockCache(std::span<const store::DirectoryEntry> directory,
                uint64_t num_arcs, uint64_t space, uint32_t first_entry,
                uint32_t last_entry);

  // Bytes of the chosen set (what the caller reserves from the budget).
  uint64_t bytes() const { return memory_.size(); }
  bool preferred(uint32_t entry) const { return State(entry) != kNo; }

  // The cached bytes of block `entry`, or nullptr. Counts a hit.
  const std::byte* Lookup(uint32_t entry) {
    const std::byte* p = Peek(entry);
    if (p != nullptr) {
      hits_.fetch_add(1, std::memory_order_relaxed);
      bytes_saved_.fetch_add(dir_[entry].length, std::memory_order_relaxed);
    }
    return p;
  }
  // As Lookup, without counting.
  const std::byte* Peek(uint32_t entry) const {
    int64_t at = std::atomic_ref<int64_t>(const_cast<int64_t&>(slot_[entry]))
                     .load(std::memory_order_acquire);
    return at < 0 ? nullptr : memory_.data() + at;
  }
  // The parsed view of cached block `entry` when `bytes` are its cached
  // bytes (what Lookup returned) and they passed ParseBlock, else nullptr.
  // Blocks are validated once, when admitted: a scan of cached blocks does
  // not re-check every offset (road-NY BFS: ~1 us a block, 31 a level).
  const store::BlockView* View(uint32_t entry, const std::byte* bytes) const {
    const std::byte* p = Peek(entry);
    return p != nullptr && p == bytes && valid_[entry] ? &views_[entry]
                                                       : nullptr;
  }
  // A scan read block `entry` whole (its bytes at `block`): admits it if it
  // is preferred and this is its second read, or its first when
  // `full_scan` (the scan reads every block of its range whole) and the
  // cache holds every block of the direction.
  void Offer(uint32_t entry, const std::byte* block, bool full_scan = false);
  // True when every block of [first_entry, last_entry) is preferred.
  bool holds_all() const { return holds_all_; }

  uint64_t hits() const { return hits_.load(); }
  uint64_t bytes_saved() const { return bytes_saved_.load(); }

 private:
  enum : uint8_t { kNo = 0, kUnread = 1, kReadOnce = 2 };
  // Workers change an entry's state while others read it: always atomic.
  uint8_t State(uint32_t entry) const {
    return std::atomic_ref<uint8_t>(const_cast<uint8_t&>(state_[entry]))
        .load(std::memory_order_relaxed);
  }
  std::span<const store::DirectoryEntry> dir_;
  bool holds_all_ = false;
  std::vector<uint8_t> state_;  // per entry
  std::vector<int64_t> slot_;   // byte offset in memory_, -1 absent
  // Per entry, set before its slot is published (release).
  std::vector<store::BlockView> views_;
  std::vector<uint8_t> valid_;  // views_[entry] holds a parsed view
  AlignedBuffer memory_;
  std::atomic<uint64_t> used_{0};
  std::atomic<uint64_t> hits_{0}, bytes_saved_{0};
};

}  // namespace dmg::compute

#endif  // DMG_COMPUTE_NODE_HOT_BLOCK_CACHE_H_

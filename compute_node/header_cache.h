// The block headers of one direction kept locally ("headers before
// payloads"): every block's per-vertex offsets (vertex_count + 1 of them,
// 4 bytes each) and 8 bytes per block to find them. With them a push scan knows
// each frontier vertex's edge range inside its block and can READ just that
// range when the frontier needs little of the block, and a vertex's degree
// costs no READ.
#ifndef DMG_COMPUTE_NODE_HEADER_CACHE_H_
#define DMG_COMPUTE_NODE_HEADER_CACHE_H_

#include <cstdint>
#include <span>
#include <vector>

#include "common/huge_pages.h"
#include "store/block_format.h"
#include "store/block_index.h"

namespace dmg::compute {

class HeaderCache {
 public:
  // Sized for entries [first_entry, last_entry) of `directory` (every entry
  // by default); filled by Fill. Degree finds a vertex's blocks through
  // `index` (built for `directory`, outliving this) when given, else by a
  // binary search. With several compute nodes each keeps its own range's
  // entries: a node pushes from its own vertices only.
  explicit HeaderCache(std::span<const store::DirectoryEntry> directory,
                       const store::BlockIndex* index = nullptr)
      : HeaderCache(directory, index, 0,
                    static_cast<uint32_t>(directory.size())) {}
  HeaderCache(std::span<const store::DirectoryEntry> directory,
              const store::BlockIndex* index, uint32_t first_entry,
              uint32_t last_entry);

  // Bytes this cache holds once filled (what the caller reserves).
  static uint64_t BytesFor(std::span<const store::DirectoryEntry> directory) {
    return BytesFor(directory, 0, static_cast<uint32_t>(directory.size()));
  }
  static uint64_t BytesFor(std::span<const store::DirectoryEntry> directory,
                           uint32_t first_entry, uint32_t last_entry);
  uint64_t bytes() const { return offsets_.size() * 4 + start_.size() * 8; }

  // The entries held: offsets() and Degree() are for these only.
  uint32_t first_entry() const { return first_; }
  uint32_t last_entry() const { return last_; }
  bool Holds(uint32_t first, uint32_t last) const {
    return first_ <= first && last <= last_;
  }

  // Stores block `entry`'s offsets (vertex_count + 1 values, as in its
  // header). Entries may be filled from many workers at once.
  void Fill(uint32_t entry, const uint32_t* offsets);

  // Block `entry`'s offsets: offsets(entry)[k + 1] - offsets(entry)[k] is
  // the number of edges of its k-th vertex in that block.
  const uint32_t* offsets(uint32_t entry) const {
    return offsets_.data() + start_[entry - first_];
  }
  // Degree of v in this direction (the sum over its pieces); v's blocks
  // must be held.
  uint64_t Degree(store::VertexId v) const;

 private:
  std::span<const store::DirectoryEntry> dir_;
  const store::BlockIndex* index_;
  uint32_t first_, last_;
  std::vector<uint64_t> start_;  // per held entry, into offsets_
  HugePageVector<uint32_t> offsets_;
};

}  // namespace dmg::compute

#endif  // DMG_COMPUTE_NODE_HEADER_CACHE_H_

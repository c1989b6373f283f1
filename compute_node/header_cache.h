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
  // Sized for `directory`; filled by Fill. Degree finds a vertex's blocks
  // through `index` (built for `directory`, outliving this) when given,
  // else by a binary search.
  explicit HeaderCache(std::span<const store::DirectoryEntry> directory,
                       const store::BlockIndex* index = nullptr);

  // Bytes this cache holds once filled (what the caller reserves).
  static uint64_t BytesFor(std::span<const store::DirectoryEntry> directory);
  uint64_t bytes() const { return offsets_.size() * 4 + start_.size() * 8; }

  // Stores block `entry`'s offsets (vertex_count + 1 values, as in its
  // header). Entries may be filled from many workers at once.
  void Fill(uint32_t entry, const uint32_t* offsets);

  // Block `entry`'s offsets: offsets(entry)[k + 1] - offsets(entry)[k] is
  // the number of edges of its k-th vertex in that block.
  const uint32_t* offsets(uint32_t entry) const {
    return offsets_.data() + start_[entry];
  }
  // Degree of v in this direction (the sum over its pieces).
  uint64_t Degree(store::VertexId v) const;

 private:
  std::span<const store::DirectoryEntry> dir_;
  const store::BlockIndex* index_;
  std::vector<uint64_t> start_;  // per entry, into offsets_
  HugePageVector<uint32_t> offsets_;
};

}  // namespace dmg::compute

#endif  // DMG_COMPUTE_NODE_HEADER_CACHE_H_

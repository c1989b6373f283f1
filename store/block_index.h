// Which directory entries hold a vertex, in O(1) expected: FindBlocks is a
// binary search over the whole directory, and a sparse push asks it for
// every frontier member two or three times a level (road-NY BFS with no
// cache bound: 19% of the run in FindBlocks and HeaderCache::Degree).
//
// The vertices are cut into chunks of 2^shift, about one chunk per block
// (so the index stays O(blocks), like the directory it serves: 4 bytes a
// chunk, at most 8 a block); each chunk keeps the first entry that holds
// its first vertex. A vertex's entries then lie between its chunk's entry
// and the next chunk's, a range of about one block that a short search
// narrows.
#ifndef DMG_STORE_BLOCK_INDEX_H_
#define DMG_STORE_BLOCK_INDEX_H_

#include <algorithm>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "store/block_format.h"

namespace dmg::store {

class BlockIndex {
 public:
  BlockIndex() = default;
  // For `directory`, which must tile vertices [0, num_vertices) in order
  // (RemoteGraph::Open and the image writer check it).
  BlockIndex(std::span<const DirectoryEntry> directory, uint64_t num_vertices);

  // FindBlocks(directory, v), for the directory this index was built for
  // (passed again: the index keeps no pointer into it, so its owner may
  // move). v < num_vertices.
  std::pair<size_t, size_t> Find(std::span<const DirectoryEntry> directory,
                                 VertexId v) const {
    const uint64_t c = uint64_t{v} >> shift_;
    const size_t lo = first_[c];
    // The entries holding v end at or just after the one holding the next
    // chunk's first vertex (a block may span the chunks' boundary).
    const size_t hi = std::min(first_[c + 1] + size_t{1}, directory.size());
    if (hi - lo > kWalk) {  // split runs: a search, as FindBlocks
      auto [a, b] = FindBlocks(directory.subspan(lo, hi - lo), v);
      return {a + lo, b + lo};
    }
    // The last entry starting at or before v, then back over its run's
    // pieces (they all start at v, and none before lo holds v).
    size_t e = lo;
    while (e + 1 < hi && directory[e + 1].first_vertex <= v) ++e;
    size_t first = e;
    if (directory[e].flags & kEntryFlagSplitPiece) {
      while (first > lo && directory[first - 1].first_vertex == v) --first;
    }
    return {first, e + 1};
  }

  uint64_t bytes() const { return first_.size() * sizeof(uint32_t); }

 private:
  // Ranges up to this many entries are walked, longer ones searched.
  static constexpr size_t kWalk = 8;
  uint32_t shift_ = 0;
  // Per chunk, the first entry holding its first vertex; then the
  // directory's size.
  std::vector<uint32_t> first_{0};
};

}  // namespace dmg::store

#endif  // DMG_STORE_BLOCK_INDEX_H_

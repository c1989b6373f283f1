#include "compute_node/header_cache.h"

#include <algorithm>
#include <cstring>

namespace dmg::compute {

uint64_t HeaderCache::BytesFor(std::span<const store::DirectoryEntry> directory,
                               uint32_t first_entry, uint32_t last_entry) {
  uint64_t count = 0;  // split pieces repeat their vertex: sum per entry
  for (uint32_t i = first_entry; i < last_entry; ++i) {
    count += directory[i].vertex_count + 1;
  }
  return count * 4 + uint64_t{last_entry - first_entry} * 8;
}

HeaderCache::HeaderCache(std::span<const store::DirectoryEntry> directory,
                         const store::BlockIndex* index, uint32_t first_entry,
                         uint32_t last_entry)
    : dir_(directory),
      index_(index),
      first_(first_entry),
      last_(std::max(first_entry, last_entry)),
      start_(last_ - first_) {
  uint64_t at = 0;
  for (uint32_t i = first_; i < last_; ++i) {
    start_[i - first_] = at;
    at += directory[i].vertex_count + 1;
  }
  offsets_.resize(at);
}

void HeaderCache::Fill(uint32_t entry, const uint32_t* offsets) {
  std::memcpy(offsets_.data() + start_[entry - first_], offsets,
              4 * (dir_[entry].vertex_count + 1));
}

uint64_t HeaderCache::Degree(store::VertexId v) const {
  auto [first, last] =
      index_ != nullptr ? index_->Find(dir_, v) : store::FindBlocks(dir_, v);
  uint64_t degree = 0;
  for (size_t i = first; i < last; ++i) {
    const uint32_t k = v - dir_[i].first_vertex;
    degree += offsets(i)[k + 1] - offsets(i)[k];
  }
  return degree;
}

}  // namespace dmg::compute

#include "store/block_index.h"

#include <algorithm>
#include <bit>

namespace dmg::store {

BlockIndex::BlockIndex(std::span<const DirectoryEntry> directory,
                       uint64_t num_vertices) {
  if (directory.empty() || num_vertices == 0) return;
  // Chunks of at least n / blocks vertices, a power of two.
  const uint64_t per_block =
      std::max<uint64_t>(1, num_vertices / directory.size());
  shift_ = static_cast<uint32_t>(std::bit_width(per_block - 1));
  const uint64_t chunks = ((num_vertices - 1) >> shift_) + 1;
  first_.assign(chunks + 1, 0);
  for (uint64_t c = 0; c < chunks; ++c) {
    first_[c] = static_cast<uint32_t>(
        FindBlocks(directory, static_cast<VertexId>(c << shift_)).first);
  }
  first_[chunks] = static_cast<uint32_t>(directory.size());
}

}  // namespace dmg::store

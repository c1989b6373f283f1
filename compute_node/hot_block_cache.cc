#include "compute_node/hot_block_cache.h"

#include <algorithm>
#include <cstring>

#include "compute_node/block_source.h"

namespace dmg::compute {

namespace {

uint64_t ChooseBlocks(std::span<const store::DirectoryEntry> dir,
                      uint64_t num_arcs, uint64_t space, uint32_t first,
                      uint32_t last, std::vector<uint8_t>& chosen) {
  // [first, last) first, then the others; in each, hot first: by average
  // degree (edges per vertex), highest first; ties keep directory order.
  auto edges = [&](uint32_t i) { return store::EntryEdges(dir, i, num_arcs); };
  auto denser = [&](uint32_t a, uint32_t b) {
    return edges(a) * dir[b].vertex_count > edges(b) * dir[a].vertex_count;
  };
  std::vector<uint32_t> order(dir.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::rotate(order.begin(), order.begin() + first, order.begin() + last);
  std::stable_sort(order.begin(), order.begin() + (last - first), denser);
  std::stable_sort(order.begin() + (last - first), order.end(), denser);
  uint64_t total = 0;
  for (uint32_t i : order) {
    if (total + dir[i].length > space) break;
    total += dir[i].length;
    chosen[i] = 1;
  }
  return total;
}

}  // namespace

HotBlockCache::HotBlockCache(std::span<const store::DirectoryEntry> directory,
                             uint64_t num_arcs, uint64_t space,
                             uint32_t first_entry, uint32_t last_entry)
    : dir_(directory), state_(directory.size(), kNo) {
  last_entry = std::max(first_entry, last_entry);
  uint64_t total =
      ChooseBlocks(directory, num_arcs, space, first_entry, last_entry, state_);
  holds_all_ =
      std::find(state_.begin() + first_entry, state_.begin() + last_entry,
                kNo) == state_.begin() + last_entry;
  memory_ = AlignedBuffer(total, AlignedBuffer::Init::kUninitialized);
  // Only the chosen blocks ever get a slot; the rest stay -1.
  slot_.assign(directory.size(), -1);
  views_.resize(directory.size());
  valid_.assign(directory.size(), 0);
}

void HotBlockCache::Offer(uint32_t entry, const std::byte* block,
                          bool full_scan) {
  if (State(entry) == kNo || Peek(entry) != nullptr) return;
  // Second touch: a block read once may never be read again; copying it in
  // would cost a copy and fresh memory for nothing. Unless a full scan
  // read it and everything fits: full scans come back.
  if (std::atomic_ref<uint8_t>(state_[entry])
              .exchange(kReadOnce, std::memory_order_relaxed) == kUnread &&
      !(full_scan && holds_all_)) {
    return;
  }
  // Two workers offering the same block at once: only the one that claims
  // the slot (-1 -> -2) copies it in.
  int64_t expected = -1;
  if (!std::atomic_ref<int64_t>(slot_[entry])
           .compare_exchange_strong(expected, -2, std::memory_order_relaxed)) {
    return;
  }
  const uint32_t len = dir_[entry].length;
  const uint64_t at = used_.fetch_add(len);
  if (at + len > memory_.size()) return;  // cannot happen: sized to fit
  std::memcpy(memory_.data() + at, block, len);
  // Validated here, once (the bytes came over the wire): a block that
  // fails has no view, and every reader parses it and reports the error.
  // A compressed block is kept compressed (more of them fit) and has no
  // view either: it is decoded (and so checked) at every use.
  store::BlockHeader h{};
  if (len >= sizeof(h)) std::memcpy(&h, memory_.data() + at, sizeof(h));
  if (!(h.flags & store::kBlockFlagCompressed)) {
    absl::StatusOr<store::BlockView> view =
        ParseBlock(dir_, entry, memory_.data() + at, len);
    if (view.ok()) {
      views_[entry] = *view;
      valid_[entry] = 1;
    }
  }
  std::atomic_ref<int64_t>(slot_[entry])
      .store(static_cast<int64_t>(at), std::memory_order_release);
}

}  // namespace dmg::compute

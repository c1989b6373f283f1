#include "compute_node/claim_log.h"

#include <algorithm>
#include <bit>

namespace dmg::compute {

void ClaimLog::Init(uint64_t elements, uint32_t elem, uint64_t page_bytes,
                    uint64_t cap, uint64_t initial) {
  elem_ = elem;
  page_bytes_ = page_bytes;
  cap_ = std::min<uint64_t>(cap, kNone - 1);
  initial_ = static_cast<uint32_t>(initial);
  unset_.assign((elements + 63) / 64, ~uint64_t{0});
  if (elements % 64 != 0) unset_.back() = (uint64_t{1} << (elements % 64)) - 1;
  const uint64_t pages = (elements * elem + page_bytes - 1) / page_bytes;
  log_.assign(cap_, Entry{});
  next_.assign(cap_, kNone);
  head_.assign(pages, kNone);
  logged_.assign((pages + 63) / 64, 0);
  sorted_.reserve(cap_);
  prev_.reserve(cap_);
  values_.reserve(cap_ * kValueBytesPerEntry);
  used_.store(0, std::memory_order_relaxed);
  mark_ = most_per_superstep_ = 0;
  mu_ = std::make_unique<Mutex[]>(kStripes);
}

bool ClaimLog::Log(uint64_t index, const void* value) {
  const uint64_t slot = used_.fetch_add(1, std::memory_order_relaxed);
  if (slot >= cap_) {
    used_.fetch_sub(1, std::memory_order_relaxed);
    return false;
  }
  const uint64_t page = index * elem_ / page_bytes_;
  Entry& e = log_[slot];
  e.index = static_cast<uint32_t>(index);
  e.value = 0;
  std::memcpy(&e.value, value, elem_);
  MutexLock lock(&Lock(page));
  next_[slot] = head_[page];
  head_[page] = static_cast<uint32_t>(slot);
  std::atomic_ref<uint64_t>(logged_[page >> 6])
      .fetch_or(uint64_t{1} << (page & 63), std::memory_order_relaxed);
  return true;
}

bool ClaimLog::EndSuperstep() {
  const uint64_t used = entries();
  most_per_superstep_ = std::max(most_per_superstep_, used - mark_);
  mark_ = used;
  return used + most_per_superstep_ > cap_;
}

uint64_t ClaimLog::PrevLines(uint64_t page) const {
  const uint64_t per_page = page_bytes_ / elem_;
  auto it = std::lower_bound(
      prev_.begin(), prev_.end(), page * per_page,
      [](const Entry& e, uint64_t index) { return e.index < index; });
  uint64_t lines = 0;
  for (; it != prev_.end() && it->index < (page + 1) * per_page; ++it) {
    lines |=
        uint64_t{1} << (uint64_t{it->index} * elem_ % page_bytes_ / kLineBytes);
  }
  return lines;
}

bool ClaimLog::AllUnset(uint64_t begin, uint64_t end) const {
  while (begin < end) {
    const uint64_t word = begin >> 6, lo = begin & 63;
    const uint64_t hi = std::min<uint64_t>(64, lo + (end - begin));
    const uint64_t mask = (hi == 64 ? ~uint64_t{0} : (uint64_t{1} << hi) - 1) &
                          ~((uint64_t{1} << lo) - 1);
    if ((unset_[word] & mask) != mask) return false;
    begin += hi - lo;
  }
  return true;
}

void ClaimLog::SortEntries() {
  sorted_.clear();
  // Page by page (a few entries each), pages ascending.
  for (size_t word = 0; word < logged_.size(); ++word) {
    for (uint64_t bits = logged_[word]; bits != 0; bits &= bits - 1) {
      const size_t from = sorted_.size();
      const uint64_t page = word * 64 + std::countr_zero(bits);
      for (uint32_t k = head_[page]; k != kNone; k = next_[k]) {
        sorted_.push_back(log_[k]);
      }
      std::sort(
          sorted_.begin() + from, sorted_.end(),
          [](const Entry& a, const Entry& b) { return a.index < b.index; });
    }
  }
}

void ClaimLog::Rotate() {
  // prev_ takes this commit's entries (the WRITEs from them are flushed
  // before the next PlanCommit).
  prev_.swap(sorted_);
  sorted_.clear();
  for (size_t word = 0; word < logged_.size(); ++word) {
    for (uint64_t bits = logged_[word]; bits != 0; bits &= bits - 1) {
      head_[word * 64 + std::countr_zero(bits)] = kNone;
    }
  }
  std::fill(logged_.begin(), logged_.end(), 0);
  used_.store(0, std::memory_order_relaxed);
  mark_ = most_per_superstep_ = 0;
}

}  // namespace dmg::compute

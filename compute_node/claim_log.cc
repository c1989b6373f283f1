#include "compute_node/claim_log.h"

#include <algorithm>
#include <bit>

namespace dmg::compute {

void ClaimLog::Init(uint64_t elements, uint32_t elem, uint64_t page_bytes,
                    uint64_t cap, uint64_t initial) {
  elem_ = elem;
  page_bytes_ = page_bytes;
  cap_ = cap;
  initial_ = initial;
  unset_.assign((elements + 63) / 64, ~uint64_t{0});
  if (elements % 64 != 0) unset_.back() = (uint64_t{1} << (elements % 64)) - 1;
  const uint64_t pages = (elements * elem + page_bytes - 1) / page_bytes;
  log_.assign(pages, {});
  prev_log_.assign(pages, {});
  logged_.assign((pages + 63) / 64, 0);
  prev_logged_.assign((pages + 63) / 64, 0);
  entries_.store(0, std::memory_order_relaxed);
  mu_ = std::make_unique<Mutex[]>(kStripes);
}

bool ClaimLog::Log(uint64_t index, const void* value) {
  if (entries_.fetch_add(1, std::memory_order_relaxed) >= cap_) {
    entries_.fetch_sub(1, std::memory_order_relaxed);
    return false;
  }
  const uint64_t page = index * elem_ / page_bytes_;
  Entry e{index, 0};
  std::memcpy(&e.value, value, elem_);
  MutexLock lock(&Lock(page));
  log_[page].push_back(e);
  std::atomic_ref<uint64_t>(logged_[page >> 6])
      .fetch_or(uint64_t{1} << (page & 63), std::memory_order_relaxed);
  return true;
}

uint64_t ClaimLog::PrevLines(uint64_t page) const {
  uint64_t lines = 0;
  for (const Entry& e : prev_log_[page]) {
    lines |= uint64_t{1} << (e.index * elem_ % page_bytes_ / kLineBytes);
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
      std::vector<Entry>& now = log_[word * 64 + std::countr_zero(bits)];
      std::sort(now.begin(), now.end(), [](const Entry& a, const Entry& b) {
        return a.index < b.index;
      });
      sorted_.insert(sorted_.end(), now.begin(), now.end());
    }
  }
}

void ClaimLog::PatchPreviousRuns() {
  size_t r = 0;
  for (const Entry& e : sorted_) {
    while (r < prev_runs_.size() && prev_runs_[r].last < e.index) ++r;
    if (r == prev_runs_.size()) break;
    if (prev_runs_[r].first <= e.index) {
      Store(prev_values_.data() + prev_runs_[r].at +
                (e.index - prev_runs_[r].first) * elem_,
            e.value);
    }
  }
}

void ClaimLog::BuildRuns() {
  runs_.clear();
  uint64_t total = 0;
  for (size_t k = 0; k < sorted_.size();) {
    size_t j = k + 1;
    while (j < sorted_.size() && sorted_[j].index > sorted_[j - 1].index &&
           (sorted_[j].index - sorted_[j - 1].index - 1) * elem_ <= kGapBytes &&
           AllUnset(sorted_[j - 1].index + 1, sorted_[j].index)) {
      ++j;
    }
    runs_.push_back({sorted_[k].index, sorted_[j - 1].index, total});
    total += (sorted_[j - 1].index - sorted_[k].index + 1) * elem_;
    k = j;
  }
  // Sized once: the WRITEs point into it until the flush.
  values_.resize(total);
  size_t e = 0;  // the next entry: runs take them in order
  for (const Run& run : runs_) {
    std::byte* out = values_.data() + run.at;
    // The gaps hold the initial value; then each entry's bytes.
    for (uint64_t v = run.first; v <= run.last; ++v) {
      Store(out + (v - run.first) * elem_, initial_);
    }
    for (; e < sorted_.size() && sorted_[e].index <= run.last; ++e) {
      Store(out + (sorted_[e].index - run.first) * elem_, sorted_[e].value);
    }
  }
}

void ClaimLog::Rotate() {
  for (size_t word = 0; word < prev_logged_.size(); ++word) {
    for (uint64_t bits = prev_logged_[word]; bits != 0; bits &= bits - 1) {
      prev_log_[word * 64 + std::countr_zero(bits)].clear();
    }
  }
  prev_log_.swap(log_);
  prev_logged_.swap(logged_);
  std::fill(logged_.begin(), logged_.end(), 0);
  entries_.store(0, std::memory_order_relaxed);
}

}  // namespace dmg::compute

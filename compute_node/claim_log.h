// The claim filter of a paged state array (state_array.h) on one compute
// node: a bit per element says whether it still holds the initial value,
// so a first-wins claim (BFS's depths) or an "unset?" test never pages the
// array in; a claim won on a page that is not cached is logged (index,
// value) instead of paging the page in.
//
// The log's life, superstep by superstep:
//  - Log: a won claim on an uncached page joins log_[page] (at most `cap`
//    entries; past that the caller pages the page in).
//  - Merge: a later fetch of the page takes the page's entries into the
//    frame (which is then dirty: the write-back sends them).
//  - PlanCommit / Committed: the commit WRITEs what is left, element by
//    element (entries at most kGapBytes apart in one WRITE when every
//    element between still holds the initial value: their bytes are
//    known), and the same bytes again at the next commit into the other
//    buffer (what that buffer lacks), but where that superstep's
//    write-backs sent those pages whole.
//  - Rotate: the superstep's log becomes the previous one's (its lines are
//    owed to the next buffer: PrevLines).
//
// Safe from many workers at once for the bits, Log and Merge (a stripe of
// locks by page); PlanCommit, Committed and Rotate run between supersteps.
#ifndef DMG_COMPUTE_NODE_CLAIM_LOG_H_
#define DMG_COMPUTE_NODE_CLAIM_LOG_H_

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "common/mutex.h"

namespace dmg::compute {

class ClaimLog {
 public:
  static constexpr uint64_t kLineBytes = 64;
  // Entries at most this many bytes apart share a WRITE when the elements
  // between are unset (192 bytes, the resident commit's gap, wrote 6.2 MB
  // in a road-NY BFS at 5% against 4.7 MB, in the same time).
  static constexpr uint64_t kGapBytes = 16;
  // The most bytes one log entry can hold across a commit: its entry in
  // log_ and in the commit's sorted copy (16 each), and at worst a run of
  // its own (24) with 24 bytes of values, this commit's and the previous
  // one's.
  static constexpr uint64_t kBytesPerEntry = 16 + 16 + 2 * (24 + 24);

  // `elements` of `elem` bytes (1, 2, 4 or 8) on pages of `page_bytes`;
  // the log holds at most `cap` entries; `initial`'s low `elem` bytes are
  // the initial value. Every element starts unset.
  void Init(uint64_t elements, uint32_t elem, uint64_t page_bytes, uint64_t cap,
            uint64_t initial);
  bool enabled() const { return !unset_.empty(); }

  // Whether element i holds the initial value; taking that (first wins:
  // true for one caller only); keeping it exact after a write of any kind.
  bool Unset(uint64_t i) const {
    return (std::atomic_ref<const uint64_t>(unset_[i >> 6])
                .load(std::memory_order_relaxed) >>
            (i & 63)) &
           1;
  }
  bool Take(uint64_t i) {
    std::atomic_ref<uint64_t> word(unset_[i >> 6]);
    const uint64_t mask = uint64_t{1} << (i & 63);
    return (word.load(std::memory_order_relaxed) & mask) &&
           (word.fetch_and(~mask, std::memory_order_relaxed) & mask);
  }
  void SetUnset(uint64_t i, bool unset) {
    if (Unset(i) == unset) return;
    std::atomic_ref<uint64_t> word(unset_[i >> 6]);
    const uint64_t mask = uint64_t{1} << (i & 63);
    if (unset) {
      word.fetch_or(mask, std::memory_order_relaxed);
    } else {
      word.fetch_and(~mask, std::memory_order_relaxed);
    }
  }

  // Logs element `index`'s new value (its elem bytes at `value`); false
  // when the log holds its `cap` entries already.
  bool Log(uint64_t index, const void* value);
  // Half its entries used: a commit soon keeps claims off pages (the
  // engine checkpoints early for it).
  bool HalfFull() const {
    return entries_.load(std::memory_order_relaxed) * 2 >= cap_;
  }
  // Whether page p has logged claims not merged yet.
  bool Logged(uint64_t page) const {
    return (std::atomic_ref<const uint64_t>(logged_[page >> 6])
                .load(std::memory_order_relaxed) >>
            (page & 63)) &
           1;
  }
  // Takes page p's logged claims into `data` (the page's bytes), calling
  // dirty(index) for each; true if there were any.
  template <typename Dirty>
  bool Merge(uint64_t page, std::byte* data, Dirty dirty) {
    MutexLock lock(&Lock(page));
    std::vector<Entry>& entries = log_[page];
    for (const Entry& e : entries) {
      Store(data + (e.index * elem_ - page * page_bytes_), e.value);
      dirty(e.index);
    }
    const bool any = !entries.empty();
    entries_.fetch_sub(entries.size(), std::memory_order_relaxed);
    entries.clear();
    std::atomic_ref<uint64_t>(logged_[page >> 6])
        .fetch_and(~(uint64_t{1} << (page & 63)), std::memory_order_relaxed);
    return any;
  }
  // The 64-byte lines of page p that the previous superstep's log changed
  // (a bit per line): a write-back of the page in this superstep sends
  // them, since the commit then skips the page.
  uint64_t PrevLines(uint64_t page) const;

  // One WRITE of a commit: `length` bytes at `bytes` to byte `offset` of
  // the array's buffer.
  struct Write {
    uint64_t offset;
    const std::byte* bytes;
    uint64_t length;
  };
  // The commit's WRITEs into `writes`: the previous commit's again (page by
  // page, but for pages `written_back(page)` says this superstep sent
  // whole), then this superstep's logged claims as runs. The bytes stay
  // valid until Committed.
  template <typename WrittenBack>
  void PlanCommit(WrittenBack written_back, std::vector<Write>& writes);
  // After the commit's WRITEs completed: they are what the next commit
  // sends again; cached frames take the logged values (frame(page): the
  // page's cached bytes, or nullptr).
  template <typename Frame>
  void Committed(Frame frame);
  // The superstep ends: its log becomes the previous one's.
  void Rotate();

  uint64_t entries() const { return entries_.load(std::memory_order_relaxed); }

 private:
  struct Entry {
    uint64_t index;
    uint64_t value;
  };
  struct Run {
    uint64_t first, last, at;  // elements [first, last], bytes at `at`
  };
  static_assert(sizeof(Entry) == 16 && sizeof(Run) == 24);
  static constexpr int kStripes = 64;
  Mutex& Lock(uint64_t page) { return mu_[page % kStripes]; }
  // An element's bytes (the low elem_ bytes of `bits`) to `to`, with a
  // fixed-size copy.
  void Store(std::byte* to, uint64_t bits) const {
    switch (elem_) {
      case 1:
        std::memcpy(to, &bits, 1);
        break;
      case 2:
        std::memcpy(to, &bits, 2);
        break;
      case 4:
        std::memcpy(to, &bits, 4);
        break;
      default:
        std::memcpy(to, &bits, 8);
    }
  }
  // Whether elements [begin, end) are all unset, a word at a time.
  bool AllUnset(uint64_t begin, uint64_t end) const;
  // This superstep's entries, sorted by index (into sorted_).
  void SortEntries();
  // The previous commit's runs with this superstep's claims that fall in
  // their gaps written in (so the two commits' WRITEs may go in any order).
  void PatchPreviousRuns();
  // sorted_ as runs with their bytes (runs_, values_).
  void BuildRuns();

  uint32_t elem_ = 0;
  uint64_t page_bytes_ = 0;
  uint64_t initial_ = 0;
  uint64_t cap_ = 0;
  std::vector<uint64_t> unset_;
  // log_[p]: claims on page p not merged yet, this superstep's; prev_log_:
  // the previous superstep's. logged_ / prev_logged_: a bit per page with
  // entries (read lock-free).
  std::vector<std::vector<Entry>> log_, prev_log_;
  std::vector<uint64_t> logged_, prev_logged_;
  std::atomic<uint64_t> entries_{0};
  std::unique_ptr<Mutex[]> mu_;
  // Commit scratch, reused (no page faults): the sorted entries; this
  // commit's runs and bytes, and the previous commit's.
  std::vector<Entry> sorted_;
  std::vector<Run> runs_, prev_runs_;
  std::vector<std::byte> values_, prev_values_;
};

template <typename WrittenBack>
void ClaimLog::PlanCommit(WrittenBack written_back,
                          std::vector<Write>& writes) {
  SortEntries();
  PatchPreviousRuns();
  for (const Run& run : prev_runs_) {
    // Page by page (a run may cross into a page written back).
    uint64_t from = run.first * elem_;
    const uint64_t end = (run.last + 1) * elem_;
    while (from < end) {
      const uint64_t to = std::min(end, (from / page_bytes_ + 1) * page_bytes_);
      if (!written_back(from / page_bytes_)) {
        writes.push_back(
            {from, prev_values_.data() + run.at + (from - run.first * elem_),
             to - from});
      }
      from = to;
    }
  }
  BuildRuns();
  for (const Run& run : runs_) {
    writes.push_back({run.first * elem_, values_.data() + run.at,
                      (run.last - run.first + 1) * elem_});
  }
}

template <typename Frame>
void ClaimLog::Committed(Frame frame) {
  prev_runs_.swap(runs_);
  prev_values_.swap(values_);
  for (size_t word = 0; word < logged_.size(); ++word) {
    for (uint64_t bits = logged_[word]; bits != 0; bits &= bits - 1) {
      const uint64_t p =
          word * 64 + static_cast<uint64_t>(std::countr_zero(bits));
      std::byte* bytes = frame(p);
      if (bytes == nullptr) continue;
      for (const Entry& e : log_[p]) {
        Store(bytes + (e.index * elem_ - p * page_bytes_), e.value);
      }
    }
  }
}

}  // namespace dmg::compute

#endif  // DMG_COMPUTE_NODE_CLAIM_LOG_H_

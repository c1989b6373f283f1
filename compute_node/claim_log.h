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
  // Bytes of run values (a WRITE of several entries and the unset gaps
  // between needs its bytes in one place) per entry of the cap, for this
  // commit's runs and the previous one's together; runs past them are
  // written entry by entry, from the entries.
  static constexpr uint64_t kValueBytesPerEntry = 8;
  // The bytes one entry of the cap takes: its slot in the log (8) and its
  // page chain link (4), its place in this commit's sorted copy and in the
  // previous commit's (8 each), and run values.
  static constexpr uint64_t kBytesPerEntry =
      8 + 4 + 8 + 8 + kValueBytesPerEntry;

  // `elements` of `elem` bytes (1, 2 or 4) on pages of `page_bytes`; the
  // log holds at most `cap` entries; `initial`'s low `elem` bytes are the
  // initial value. Every element starts unset.
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
  // when the log holds its `cap` entries already (entries merged into
  // fetched pages keep their slots until the commit).
  bool Log(uint64_t index, const void* value);
  // A superstep ends: whether the next one may fill the log, judged by the
  // most entries one superstep added since the last commit (past full,
  // claims page their pages in; the engine checkpoints early for it).
  bool EndSuperstep();
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
    bool any = false;
    for (uint32_t k = head_[page]; k != kNone; k = next_[k]) {
      Store(data + (uint64_t{log_[k].index} * elem_ - page * page_bytes_),
            log_[k].value);
      dirty(log_[k].index);
      any = true;
    }
    head_[page] = kNone;
    std::atomic_ref<uint64_t>(logged_[page >> 6])
        .fetch_and(~(uint64_t{1} << (page & 63)), std::memory_order_relaxed);
    return any;
  }
  // The 64-byte lines of page p that the previous commit's log changed (a
  // bit per line): a write-back of the page before the next commit sends
  // them, since that commit then skips the page.
  uint64_t PrevLines(uint64_t page) const;

  // One WRITE of a commit: `length` bytes at `bytes` to byte `offset` of
  // the array's buffer.
  struct Write {
    uint64_t offset;
    const std::byte* bytes;
    uint64_t length;
  };
  // The commit's WRITEs, each to emit(const Write&): the previous commit's
  // claims again (but on pages `written_back(page)` says were sent whole
  // since) and this commit's logged claims, merged by index into runs (a
  // run may hold both). The bytes stay valid until the next PlanCommit.
  template <typename WrittenBack, typename Emit>
  void PlanCommit(WrittenBack written_back, Emit emit);
  // After PlanCommit: cached frames take the logged values (frame(page):
  // the page's cached bytes, or nullptr).
  template <typename Frame>
  void Committed(Frame frame);
  // The commit ends: its log becomes the previous one's.
  void Rotate();

  // Slots used since the last commit.
  uint64_t entries() const { return used_.load(std::memory_order_relaxed); }

 private:
  struct Entry {
    uint32_t index;
    uint32_t value;  // the element's bytes, low elem_ of them
  };
  static_assert(sizeof(Entry) == 8);
  static constexpr uint32_t kNone = ~uint32_t{0};
  static constexpr int kStripes = 64;
  Mutex& Lock(uint64_t page) { return mu_[page % kStripes]; }
  // An element's bytes (the low elem_ bytes of `bits`) to `to`, with a
  // fixed-size copy.
  void Store(std::byte* to, uint32_t bits) const {
    switch (elem_) {
      case 1:
        std::memcpy(to, &bits, 1);
        break;
      case 2:
        std::memcpy(to, &bits, 2);
        break;
      default:
        std::memcpy(to, &bits, 4);
    }
  }
  // Whether elements [begin, end) are all unset, a word at a time.
  bool AllUnset(uint64_t begin, uint64_t end) const;
  // This commit's live entries, sorted by index, into sorted_.
  void SortEntries();
  // Where a walk of prev_ and sorted_ merged by index is.
  struct Cursor {
    size_t prev = 0, now = 0;
  };
  // The walk's next entry (nullptr: none left): the previous commit's
  // entries (but on pages written back since) and this commit's, by index
  // (an element is in at most one of them: claims are first-wins).
  template <typename WrittenBack>
  const Entry* NextMerged(Cursor& c, WrittenBack& written_back) const;

  uint32_t elem_ = 0;
  uint64_t page_bytes_ = 0;
  uint32_t initial_ = 0;
  uint64_t cap_ = 0;
  std::vector<uint64_t> unset_;
  // This commit's log: slots [0, used_) of log_; each page's entries not
  // merged yet chained from head_[page] through next_. logged_: a bit per
  // page with entries (read lock-free).
  std::vector<Entry> log_;
  std::vector<uint32_t> next_, head_;
  std::vector<uint64_t> logged_;
  std::atomic<uint64_t> used_{0};
  // Entries at the last EndSuperstep, and the most one superstep added.
  uint64_t mark_ = 0, most_per_superstep_ = 0;
  std::unique_ptr<Mutex[]> mu_;
  // This commit's entries sorted, and the previous commit's; run values
  // (reserved once: WRITEs point into them until the next PlanCommit).
  std::vector<Entry> sorted_, prev_;
  std::vector<std::byte> values_;
};

template <typename WrittenBack>
const ClaimLog::Entry* ClaimLog::NextMerged(Cursor& c,
                                            WrittenBack& written_back) const {
  while (c.prev < prev_.size() &&
         written_back(uint64_t{prev_[c.prev].index} * elem_ / page_bytes_)) {
    ++c.prev;
  }
  if (c.prev < prev_.size() &&
      (c.now == sorted_.size() || prev_[c.prev].index < sorted_[c.now].index)) {
    return &prev_[c.prev++];
  }
  return c.now < sorted_.size() ? &sorted_[c.now++] : nullptr;
}

template <typename WrittenBack, typename Emit>
void ClaimLog::PlanCommit(WrittenBack written_back, Emit emit) {
  SortEntries();
  values_.clear();
  auto single = [&](const Entry& e) {
    emit(Write{uint64_t{e.index} * elem_,
               reinterpret_cast<const std::byte*>(&e.value), elem_});
  };
  Cursor c;
  const Entry* e = NextMerged(c, written_back);
  while (e != nullptr) {
    // A run: entries on one page, at most kGapBytes apart, unset between.
    Cursor start = c;
    const uint64_t page = uint64_t{e->index} * elem_ / page_bytes_;
    const Entry* last = e;
    size_t count = 1;
    const Entry* f = NextMerged(c, written_back);
    while (f != nullptr && uint64_t{f->index} * elem_ / page_bytes_ == page &&
           (f->index - last->index - 1) * elem_ <= kGapBytes &&
           AllUnset(last->index + 1, f->index)) {
      last = f;
      ++count;
      f = NextMerged(c, written_back);
    }
    const uint64_t first = e->index;
    const uint64_t length = (last->index - first + 1) * elem_;
    if (count == 1) {
      single(*e);
    } else if (values_.size() + length <= values_.capacity()) {
      const size_t at = values_.size();
      values_.resize(at + length);  // within capacity: nothing moves
      std::byte* out = values_.data() + at;
      for (uint64_t v = first; v <= last->index; ++v) {
        Store(out + (v - first) * elem_, initial_);
      }
      for (const Entry* r = e; count > 0; --count) {
        Store(out + (r->index - first) * elem_, r->value);
        if (count > 1) r = NextMerged(start, written_back);
      }
      emit(Write{first * elem_, out, length});
    } else {
      for (const Entry* r = e; count > 0; --count) {
        single(*r);
        if (count > 1) r = NextMerged(start, written_back);
      }
    }
    e = f;
  }
}

template <typename Frame>
void ClaimLog::Committed(Frame frame) {
  for (const Entry& e : sorted_) {
    const uint64_t p = uint64_t{e.index} * elem_ / page_bytes_;
    std::byte* bytes = frame(p);
    if (bytes != nullptr) {
      Store(bytes + (uint64_t{e.index} * elem_ - p * page_bytes_), e.value);
    }
  }
}

}  // namespace dmg::compute

#endif  // DMG_COMPUTE_NODE_CLAIM_LOG_H_

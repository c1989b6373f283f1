// Lazy refresh of a state array's copy (state_array.h): the 64-byte lines
// other compute nodes published and this copy has not READ yet, a bit per
// line in two sets: `now`, announced in the open superstep (READ from its
// buffer), and `old`, announced before (READ from the finished version's
// buffer, which holds them whole).
//
// Several workers may race for one line: each that sees it pending READs
// it. The buffer a READ uses is chosen from the bits it sees, and bits are
// cleared old first, then now (Clear), so a worker that finds `now` clear
// and `old` set knows the line was never pending in the open buffer: it
// READs the finished version. Choosing the finished buffer for a line
// whose `now` bit another worker just cleared would READ a version one
// superstep old over the fresh copy (the race MultiNodeTest's
// WorkersRacingForOnePendingLineAllSeeItsNewValue pins).
//
// Mark and EndSuperstep run between operations; the rest from any worker.
#ifndef DMG_COMPUTE_NODE_PENDING_LINES_H_
#define DMG_COMPUTE_NODE_PENDING_LINES_H_

#include <atomic>
#include <bit>
#include <cstdint>
#include <vector>

namespace dmg::compute {

class PendingLines {
 public:
  // Where a pending line is READ from.
  enum class Source { kNone, kOpen, kFinished };

  explicit PendingLines(uint64_t lines = 0)
      : lines_(lines), now_((lines + 63) / 64, 0), old_((lines + 63) / 64, 0) {}

  uint64_t lines() const { return lines_; }
  uint64_t words() const { return now_.size(); }

  // Lines [first, first + count) were announced in the open superstep.
  void Mark(uint64_t first, uint64_t count) {
    const uint64_t end = std::min(first + count, lines_);
    for (uint64_t line = first; line < end; ++line) {
      now_[line >> 6] |= uint64_t{1} << (line & 63);
    }
  }
  bool IsPending(uint64_t line) const {
    return ((Load(now_, line >> 6) | Load(old_, line >> 6)) >> (line & 63)) & 1;
  }
  // Where `line` is READ from, as its bits are now (kNone: READ already).
  Source Choose(uint64_t line) const {
    const uint64_t mask = uint64_t{1} << (line & 63);
    if (Load(now_, line >> 6) & mask) return Source::kOpen;
    if (Load(old_, line >> 6) & mask) return Source::kFinished;
    return Source::kNone;
  }
  // Word w's bits (64 lines: a page's, for 4 KiB pages of 64-byte lines).
  uint64_t now(uint64_t w) const { return Load(now_, w); }
  uint64_t old(uint64_t w) const { return Load(old_, w); }
  // Clears word w's `now` and `old` bits once their lines are READ: old
  // first (Choose relies on it).
  void Clear(uint64_t w, uint64_t now, uint64_t old) {
    std::atomic_ref<uint64_t>(old_[w]).fetch_and(~old,
                                                 std::memory_order_release);
    std::atomic_ref<uint64_t>(now_[w]).fetch_and(~now,
                                                 std::memory_order_release);
  }
  // How many lines are pending.
  uint64_t Count() const {
    uint64_t n = 0;
    for (size_t w = 0; w < now_.size(); ++w) {
      n += std::popcount(Load(now_, w) | Load(old_, w));
    }
    return n;
  }
  // The superstep is committed: what is still pending is READ from the
  // finished version's buffer from now on.
  void EndSuperstep() {
    for (size_t w = 0; w < now_.size(); ++w) {
      old_[w] |= now_[w];
      now_[w] = 0;
    }
  }

 private:
  static uint64_t Load(const std::vector<uint64_t>& bits, uint64_t w) {
    return std::atomic_ref<uint64_t>(const_cast<uint64_t&>(bits[w]))
        .load(std::memory_order_acquire);
  }

  uint64_t lines_;
  std::vector<uint64_t> now_, old_;
};

}  // namespace dmg::compute

#endif  // DMG_COMPUTE_NODE_PENDING_LINES_H_

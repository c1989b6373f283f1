// How a state array's changed 64-byte lines become WRITEs and READs
// (state_array.h): runs of lines from per-page bitmaps, merged across short
// gaps (a WRITE costs more than a few lines moved), and a page's 64 line
// flags (0/1 bytes, set lock-free by the workers) packed into its bitmap.
#ifndef DMG_COMPUTE_NODE_LINE_RUNS_H_
#define DMG_COMPUTE_NODE_LINE_RUNS_H_

#include <bit>
#include <cstdint>
#include <cstring>

namespace dmg::compute {

// Runs of lines, each run's set bits added in ascending order; runs at most
// `gap` lines apart merge into one, handed to emit(begin, end) (in lines).
template <typename Emit>
class LineRuns {
 public:
  LineRuns(uint64_t gap, Emit emit) : gap_(gap), emit_(emit) {}
  // Adds the set bits of `bits`, the lines [base, base + 64). `bridge`
  // false: no gap into, inside or out of these lines is bridged (a gap
  // may hold a line that must not be written now).
  void Add(uint64_t base, uint64_t bits, bool bridge = true) {
    const uint64_t gap = bridge ? gap_ : 0;
    for (uint64_t m = bits; m != 0;) {
      const int lo = std::countr_zero(m);
      const int len = std::countr_one(m >> lo);
      m = len + lo == 64 ? 0 : m & ~(((uint64_t{1} << len) - 1) << lo);
      const uint64_t first = base + lo;
      if (open_ && first <= end_ + gap) {
        end_ = first + len;
      } else {
        if (open_) emit_(begin_, end_);
        begin_ = first;
        end_ = first + len;
        open_ = true;
      }
    }
    if (!bridge) Finish();
  }
  void Finish() {
    if (open_) emit_(begin_, end_);
    open_ = false;
  }

 private:
  uint64_t gap_;
  Emit emit_;
  uint64_t begin_ = 0, end_ = 0;  // the open run
  bool open_ = false;
};

// A page's 64 line flags (0/1 bytes) as a line bitmap: byte i lands on
// bit 56 + i of the product, and no partial product carries into the top
// byte.
inline uint64_t PackLineFlags(const uint8_t* flags) {
  uint64_t lines = 0;
  for (int k = 0; k < 8; ++k) {
    uint64_t x;
    std::memcpy(&x, flags + 8 * k, sizeof(x));
    if (x != 0) lines |= ((x * 0x0102040810204080ULL) >> 56) << (8 * k);
  }
  return lines;
}

}  // namespace dmg::compute

#endif  // DMG_COMPUTE_NODE_LINE_RUNS_H_

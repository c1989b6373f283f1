#include "compute_node/wire_codec.h"

#include <algorithm>

namespace dmg::compute::wire {

void PutVertexSet(std::string& out, std::span<const uint64_t> words) {
  // The span of words holding members.
  size_t first = 0, last = words.size();
  while (first + 4 <= last && (words[first] | words[first + 1] |
                               words[first + 2] | words[first + 3]) == 0) {
    first += 4;
  }
  while (first < last && words[first] == 0) ++first;
  while (last > first && words[last - 1] == 0) --last;
  uint64_t count = 0;
  for (size_t k = first; k < last; ++k) count += std::popcount(words[k]);
  PutVertexSet(out, words, count, first, last);
}

void PutVertexSet(std::string& out, std::span<const uint64_t> words,
                  uint64_t count, size_t first, size_t last) {
  if (count == 0) {
    out.push_back(static_cast<char>(kEmptySet));
    return;
  }
  const uint64_t bitmap_bytes = 8 * (last - first);
  // Gaps of a set of `count` members over that span average span / count:
  // a varint of that size each (an estimate; the cheaper form is kept).
  const uint64_t span = 64 * (last - first);
  const uint64_t mean_gap = std::max<uint64_t>(1, span / count);
  const uint64_t gap_bytes = count * ((std::bit_width(mean_gap) + 6) / 7);
  if (bitmap_bytes <= gap_bytes) {
    out.push_back(static_cast<char>(kBitmapSet));
    PutVarint(out, 64 * first);
    PutVarint(out, last - first);
    out.append(reinterpret_cast<const char*>(words.data() + first),
               bitmap_bytes);
    return;
  }
  // Written in place (a varint is at most 10 bytes) and the zero words
  // skipped in a loop of their own: a sparse frontier's span is mostly
  // zeros (road-NY's ~600 members a level span thousands of words).
  const size_t at = out.size();
  out.resize(at + 1 + 10 * (count + 1));
  auto* const begin = reinterpret_cast<uint8_t*>(out.data() + at);
  uint8_t* p = begin;
  *p++ = kGapSet;
  bool head = true;
  uint64_t previous = 0, left = count;
  for (size_t k = first; k < last && left > 0; ++k) {
    while (k + 4 < last &&
           (words[k] | words[k + 1] | words[k + 2] | words[k + 3]) == 0) {
      k += 4;
    }
    while (k + 1 < last && words[k] == 0) ++k;
    // (At most `count` members: the buffer holds no more, whatever the
    // words say.)
    for (uint64_t w = words[k]; w != 0 && left > 0; w &= w - 1, --left) {
      const uint64_t v = 64 * k + std::countr_zero(w);
      if (head) {
        p = PutVarint(p, v);
        p = PutVarint(p, count);
        head = false;
      } else {
        p = PutVarint(p, v - previous);
      }
      previous = v;
    }
  }
  out.resize(at + (p - begin));
}

}  // namespace dmg::compute::wire

// Compact encodings of what compute nodes post to each other every push
// step: vertex sets (frontiers) and combined updates. Raw, a frontier was 4
// bytes a member and an update 8 or 16 (vertex plus padded value); with two
// nodes every byte is written once and read once, every step.
//
//  - A vertex set is a bitmap over [lo, hi] when that is smaller (dense
//    frontiers: 547K members of a 512K-vertex range took 2.2 MB, now 64 KB),
//    else its members ascending as varint gaps (1-3 bytes each).
//  - Updates, combined and ascending by target: coordinator/
//    update_batches.h.
//
// Readers check everything (the bytes crossed memory nodes that others can
// reach): truncation, members past the graph, targets out of order.
#ifndef DMG_COMPUTE_NODE_WIRE_CODEC_H_
#define DMG_COMPUTE_NODE_WIRE_CODEC_H_

#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "common/varint.h"
#include "coordinator/update_batches.h"
#include "store/graph.h"

namespace dmg::compute::wire {

using store::VertexId;

using dmg::GetVarint;
using dmg::PutVarint;

// A set of vertices given by its bitmap (bit v of word v / 64), appended
// to `out`.
void PutVertexSet(std::string& out, std::span<const uint64_t> words);
// The same bytes, for a set whose size and extent the caller knows:
// `count` members, every one in words [first, last), the first and the
// last of them holding members (a small frontier's list says so without a
// scan of the whole bitmap: 4,131 words for road-NY, at every exchange).
void PutVertexSet(std::string& out, std::span<const uint64_t> words,
                  uint64_t count, size_t first, size_t last);

// Reads a set written by PutVertexSet, calling add(v) for each member in
// ascending order; false if malformed or a member is >= num_vertices.
template <typename Add>
bool GetVertexSet(std::string_view& in, uint64_t num_vertices, Add add);

// As GetVertexSet, but a bitmap-form set's words go whole to
// add_words(first_word, bytes, n): n little-endian words from word
// first_word on (bytes unaligned), every member checked < num_vertices.
// A decoder that ORs words saves a call and a test per member (a kron:20
// bottom-up level's frontier has ~450,000).
template <typename Add, typename AddWords>
bool GetVertexSetWords(std::string_view& in, uint64_t num_vertices, Add add,
                       AddWords add_words);

// Combined updates: coordinator/update_batches.h (the batch update mode's
// messages) has their encoding.
using coordinator::GetUpdates;
using coordinator::PutUpdates;

// --- Implementation -------------------------------------------------------

using dmg::UnZigZag;
using dmg::ZigZag;

enum : uint8_t { kEmptySet = 0, kBitmapSet = 1, kGapSet = 2 };

template <typename Add>
bool GetVertexSet(std::string_view& in, uint64_t num_vertices, Add add) {
  if (in.empty()) return false;
  const uint8_t kind = static_cast<uint8_t>(in.front());
  in.remove_prefix(1);
  if (kind == kEmptySet) return true;
  uint64_t lo = 0, n = 0;
  if (!GetVarint(in, &lo) || !GetVarint(in, &n)) return false;
  if (kind == kBitmapSet) {
    // Words of the bitmap starting at vertex lo (a multiple of 64).
    if (lo % 64 != 0 || n > in.size() / 8 || lo >= num_vertices ||
        n > (num_vertices - lo + 63) / 64) {
      return false;
    }
    for (uint64_t k = 0; k < n; ++k) {
      uint64_t w;
      std::memcpy(&w, in.data() + 8 * k, 8);
      for (; w != 0; w &= w - 1) {
        const uint64_t v = lo + 64 * k + std::countr_zero(w);
        if (v >= num_vertices) return false;
        add(static_cast<VertexId>(v));
      }
    }
    in.remove_prefix(8 * n);
    return true;
  }
  if (kind != kGapSet || n == 0 || n - 1 > in.size()) return false;
  uint64_t v = lo;
  const auto* const begin = reinterpret_cast<const uint8_t*>(in.data());
  const uint8_t* p = begin;
  const uint8_t* const end = begin + in.size();
  for (uint64_t k = 0; k < n; ++k) {
    if (k > 0) {
      uint64_t gap;
      if (!GetVarint(p, end, &gap) || gap == 0 || gap >= num_vertices - v) {
        return false;
      }
      v += gap;
    }
    if (v >= num_vertices) return false;
    add(static_cast<VertexId>(v));
  }
  in.remove_prefix(p - begin);
  return true;
}

template <typename Add, typename AddWords>
bool GetVertexSetWords(std::string_view& in, uint64_t num_vertices, Add add,
                       AddWords add_words) {
  if (in.empty() || static_cast<uint8_t>(in.front()) != kBitmapSet) {
    return GetVertexSet(in, num_vertices, add);
  }
  std::string_view rest = in.substr(1);
  uint64_t lo = 0, n = 0;
  if (!GetVarint(rest, &lo) || !GetVarint(rest, &n)) return false;
  if (lo % 64 != 0 || n > rest.size() / 8 || lo >= num_vertices ||
      n > (num_vertices - lo + 63) / 64) {
    return false;
  }
  if (n > 0 && lo + 64 * n > num_vertices) {
    // The last word's bits past the graph must be clear.
    uint64_t last;
    std::memcpy(&last, rest.data() + 8 * (n - 1), 8);
    if ((last >> (num_vertices - (lo + 64 * (n - 1)))) != 0) return false;
  }
  add_words(lo / 64, rest.data(), n);
  rest.remove_prefix(8 * n);
  in = rest;
  return true;
}

}  // namespace dmg::compute::wire

#endif  // DMG_COMPUTE_NODE_WIRE_CODEC_H_

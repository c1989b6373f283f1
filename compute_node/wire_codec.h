// Compact encodings of what compute nodes post to each other every push
// step: vertex sets (frontiers) and combined updates. Raw, a frontier was 4
// bytes a member and an update 8 or 16 (vertex plus padded value); with two
// nodes every byte is written once and read once, every step.
//
//  - A vertex set is a bitmap over [lo, hi] when that is smaller (dense
//    frontiers: 547K members of a 512K-vertex range took 2.2 MB, now 64 KB),
//    else its members ascending as varint gaps (1-3 bytes each).
//  - Updates, combined and ascending by target, are varint gaps and, for
//    integer values, zigzag varints (SSSP distances and BFS depths take a
//    byte or two instead of 8); other values go raw.
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
#include "store/graph.h"

namespace dmg::compute::wire {

using store::VertexId;

inline void PutVarint(std::string& out, uint64_t x) {
  uint8_t bytes[10];
  out.append(reinterpret_cast<const char*>(bytes),
             dmg::PutVarint(bytes, x) - bytes);
}

// False on truncation or more than 64 bits.
inline bool GetVarint(std::string_view& in, uint64_t* x) {
  const auto* p = reinterpret_cast<const uint8_t*>(in.data());
  const auto* begin = p;
  if (!dmg::GetVarint(p, p + in.size(), x)) return false;
  in.remove_prefix(p - begin);
  return true;
}

// A set of vertices given by its bitmap (bit v of word v / 64), appended
// to `out`.
void PutVertexSet(std::string& out, std::span<const uint64_t> words);

// Reads a set written by PutVertexSet, calling add(v) for each member in
// ascending order; false if malformed or a member is >= num_vertices.
template <typename Add>
bool GetVertexSet(std::string_view& in, uint64_t num_vertices, Add add);

// Combined updates (records with a target `v` and a value `x`), strictly
// ascending by target.
template <typename U>
void PutUpdates(std::string& out, std::span<const U> updates);

// Reads all of `in`, written by PutUpdates, appending to `out`; false if
// malformed or not strictly ascending.
template <typename U>
bool GetUpdates(std::string_view in, std::vector<U>& out);

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
  for (uint64_t k = 0; k < n; ++k) {
    if (k > 0) {
      uint64_t gap;
      if (!GetVarint(in, &gap) || gap == 0 || gap >= num_vertices - v) {
        return false;
      }
      v += gap;
    }
    if (v >= num_vertices) return false;
    add(static_cast<VertexId>(v));
  }
  return true;
}

template <typename U>
void PutUpdates(std::string& out, std::span<const U> updates) {
  using T = decltype(U::x);
  static_assert(std::is_trivially_copyable_v<T>);
  PutVarint(out, updates.size());
  VertexId last = 0;
  for (size_t k = 0; k < updates.size(); ++k) {
    PutVarint(out, k == 0 ? updates[k].v : updates[k].v - last);
    last = updates[k].v;
    const T x = updates[k].x;
    if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
      PutVarint(out, ZigZag(static_cast<int64_t>(x)));
    } else if constexpr (std::is_integral_v<T>) {
      PutVarint(out, static_cast<uint64_t>(x));
    } else {
      out.append(reinterpret_cast<const char*>(&x), sizeof(T));
    }
  }
}

template <typename U>
bool GetUpdates(std::string_view in, std::vector<U>& out) {
  using T = decltype(U::x);
  if (in.empty()) return true;  // nothing sent
  uint64_t n;
  if (!GetVarint(in, &n) || n > in.size()) return false;
  out.reserve(out.size() + n);
  uint64_t v = 0;
  for (uint64_t k = 0; k < n; ++k) {
    uint64_t gap;
    // gap <= 2^32 - 1: v + gap cannot wrap around (to a smaller target).
    if (!GetVarint(in, &gap) || (k > 0 && gap == 0) || gap > UINT32_MAX) {
      return false;
    }
    v = k == 0 ? gap : v + gap;
    if (v > UINT32_MAX) return false;
    U u{};
    u.v = static_cast<VertexId>(v);
    if constexpr (std::is_integral_v<T>) {
      uint64_t x;
      if (!GetVarint(in, &x)) return false;
      if constexpr (std::is_signed_v<T>) {
        const int64_t s = UnZigZag(x);
        if (static_cast<int64_t>(static_cast<T>(s)) != s) return false;
        u.x = static_cast<T>(s);
      } else {
        if (static_cast<uint64_t>(static_cast<T>(x)) != x) return false;
        u.x = static_cast<T>(x);
      }
    } else {
      if (in.size() < sizeof(T)) return false;
      std::memcpy(&u.x, in.data(), sizeof(T));
      in.remove_prefix(sizeof(T));
    }
    out.push_back(u);
  }
  return in.empty();
}

}  // namespace dmg::compute::wire

#endif  // DMG_COMPUTE_NODE_WIRE_CODEC_H_

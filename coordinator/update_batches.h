// The batch update mode's messages: a push step's updates to other nodes'
// vertices, combined per target (CombineOutboxes), cut into one batch per
// owner and encoded compactly; and the owner's side, which reads every
// batch sent to it and checks that each target is its own.
//
// Encoding: the count, then per update (strictly ascending by target) the
// gap from the previous target as a varint and the value: integers as
// (zigzag) varints, so SSSP distances and BFS depths take a byte or two
// instead of 8; other values raw. Readers check everything (the bytes
// crossed memory nodes that others can reach): truncation, targets out of
// order or past 32 bits, values that do not fit their type.
#ifndef DMG_COORDINATOR_UPDATE_BATCHES_H_
#define DMG_COORDINATOR_UPDATE_BATCHES_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "common/varint.h"
#include "coordinator/outbox.h"

namespace dmg::coordinator {

// Updates (records with a target `v` and a value `x`), strictly ascending
// by target, appended to `out`.
template <typename U>
void PutUpdates(std::string& out, std::span<const U> updates) {
  using T = decltype(U::x);
  static_assert(std::is_trivially_copyable_v<T>);
  PutVarint(out, updates.size());
  store::VertexId last = 0;
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

// Reads all of `in`, written by PutUpdates, appending to `out`; false if
// malformed (empty: nothing sent).
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
    u.v = static_cast<store::VertexId>(v);
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

// Combined updates, ascending by target, cut into one encoded batch per
// owner: owner k's vertices are [bounds[k], bounds[k + 1]) (bounds.size()
// owners + 1, as stage 1 splits). Owners sent nothing get "".
template <typename T>
std::vector<std::string> BatchesByOwner(std::span<const RemoteUpdate<T>> sorted,
                                        std::span<const uint64_t> bounds) {
  const size_t owners = bounds.empty() ? 0 : bounds.size() - 1;
  std::vector<std::string> to(owners);
  for (size_t k = 0; k < sorted.size();) {
    const size_t owner =
        std::upper_bound(bounds.begin(), bounds.end(), sorted[k].v) -
        bounds.begin() - 1;
    size_t j = k;
    while (j < sorted.size() && sorted[j].v < bounds[owner + 1]) ++j;
    PutUpdates<RemoteUpdate<T>>(to[owner], sorted.subspan(k, j - k));
    k = j;
  }
  return to;
}

// The owner's side: the batches `parts` (one per sending node, in node
// order) appended to `inbox`, each target checked to lie in this node's
// range [begin, end). DataLoss naming the sender, or the target, else.
template <typename T>
absl::Status ReadInbox(std::span<const std::string_view> parts, uint64_t begin,
                       uint64_t end, int me,
                       std::vector<RemoteUpdate<T>>& inbox) {
  for (size_t k = 0; k < parts.size(); ++k) {
    const size_t before = inbox.size();
    if (!GetUpdates<RemoteUpdate<T>>(parts[k], inbox)) {
      return absl::DataLossError(absl::StrFormat(
          "compute node %d sent a malformed batch of updates", k));
    }
    for (size_t i = before; i < inbox.size(); ++i) {
      if (inbox[i].v < begin || inbox[i].v >= end) {
        return absl::DataLossError(absl::StrFormat(
            "an update for vertex %d reached compute node %d, not its owner",
            inbox[i].v, me));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace dmg::coordinator

#endif  // DMG_COORDINATOR_UPDATE_BATCHES_H_

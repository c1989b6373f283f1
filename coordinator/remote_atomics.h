// The atomic update mode's transport part: updates applied as remote
// compare-and-swaps on the 8-byte words that hold their targets, on the
// owners' memory nodes, with no owner involved.
//
// Each update carries the word's address, the value it expects there and
// the value to swap in. A batch of them is posted as one flush; an update
// whose compare failed learns the word's current value, recomputes what it
// would swap in from that (the update's own rule: Min keeps the lesser,
// Claim gives up on a taken word) and goes again in the next round, until
// it lands or no longer changes anything. Words of 8 bytes hold 1, 2, 4 or
// 8 elements, so an update to one element retries when a neighbour in its
// word changed: correct, only slower.
#ifndef DMG_COORDINATOR_REMOTE_ATOMICS_H_
#define DMG_COORDINATOR_REMOTE_ATOMICS_H_

#include <algorithm>
#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "transport/transport.h"

namespace dmg::coordinator {

// Where an update's word lives, and the compare-and-swap's values.
struct CasWord {
  uint32_t node = 0, region = 0;
  uint64_t offset = 0;
  uint64_t expected = 0, desired = 0, old = 0;
};

// Compare-and-swaps per flush: a round trip carries this many.
inline constexpr size_t kCasPerFlush = 1024;

// Applies `updates` (each has a `CasWord cas` member) through `ep`, in
// flushes of kCasPerFlush. For an update whose compare failed,
// `again(update)` is called with update.cas.expected set to the value
// found: it sets update.cas.desired and returns whether the update still
// changes anything (false: dropped). `landed(update)` is called for each
// that swapped in. Reorders `updates`.
template <typename Update, typename Again, typename Landed>
absl::Status ApplyRemoteCas(transport::Endpoint& ep, std::span<Update> updates,
                            Again again, Landed landed) {
  for (size_t at = 0; at < updates.size();) {
    const size_t end = std::min(updates.size(), at + kCasPerFlush);
    std::span<Update> batch = updates.subspan(at, end - at);
    while (!batch.empty()) {
      for (Update& u : batch) {
        ep.CompareAndSwap(u.cas.node, u.cas.region, u.cas.offset,
                          u.cas.expected, u.cas.desired, &u.cas.old);
      }
      if (absl::Status s = ep.Flush(); !s.ok()) return s;
      size_t kept = 0;
      for (Update& u : batch) {
        if (u.cas.old == u.cas.expected) {
          landed(u);
          continue;
        }
        u.cas.expected = u.cas.old;  // someone got there first
        if (again(u)) batch[kept++] = u;
      }
      batch = batch.first(kept);
    }
    at = end;
  }
  return absl::OkStatus();
}

}  // namespace dmg::coordinator

#endif  // DMG_COORDINATOR_REMOTE_ATOMICS_H_

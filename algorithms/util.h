// Small helpers shared by the vertex programs.
#ifndef DMG_ALGORITHMS_UTIL_H_
#define DMG_ALGORITHMS_UTIL_H_

#include <atomic>
#include <cstring>
#include <vector>

#include "absl/status/statusor.h"
#include "compute_node/state_array.h"

namespace dmg::algorithms {

// x = min(x, v) atomically; true if x changed.
template <typename T>
bool AtomicMin(T& x, T v) {
  std::atomic_ref<T> a(x);
  T old = a.load(std::memory_order_relaxed);
  while (v < old) {
    if (a.compare_exchange_weak(old, v, std::memory_order_relaxed)) {
      return true;
    }
  }
  return false;
}

template <typename T>
T AtomicLoad(T& x) {
  return std::atomic_ref<T>(x).load(std::memory_order_relaxed);
}

// The final version of a state array as the memory node holds it. The local
// copy must agree; a difference means the write-back lost an update.
template <typename T>
absl::StatusOr<std::vector<T>> ReadBack(compute::Engine& engine,
                                        compute::StateArray<T>& array) {
  std::vector<T> out(array.size());
  absl::Status s =
      array.ReadVersion(engine.superstep(), 0, array.size(), out.data());
  if (!s.ok()) return s;
  if (std::memcmp(out.data(), array.data(), out.size() * sizeof(T)) != 0) {
    return absl::InternalError("state '" + array.name() +
                               "' on the memory node disagrees with the "
                               "compute node's copy");
  }
  return out;
}

}  // namespace dmg::algorithms

#endif  // DMG_ALGORITHMS_UTIL_H_

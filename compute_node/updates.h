// Named updates: how a value sent along an edge is combined into a vertex's
// state. Because the engine knows the operator, it (and later the update
// coordinator) decides how an update travels: folded into a local
// accumulator and applied once per vertex (pull), applied atomically to the
// local copy (push), combined in batches for a remote owner, or sent as a
// remote atomic.
//
// Each operator provides:
//   Identity<T>()        the combination of no values
//   Combine(a, b)        two values into one (associative, commutative)
//   Apply(x, v, unset)   combines v into the state element x atomically;
//                        true if x changed (the vertex joins the next
//                        frontier). `unset` is the array's initial value.
//   kFirstWins           a pull gather may stop at the first value found
// Also usable as reductions (Engine::Reduce): Add (sum, count), Min, Max.
#ifndef DMG_COMPUTE_NODE_UPDATES_H_
#define DMG_COMPUTE_NODE_UPDATES_H_

#include <algorithm>
#include <atomic>
#include <limits>
#include <type_traits>

namespace dmg::compute {

struct Add {
  static constexpr bool kFirstWins = false;
  template <typename T>
  static T Identity() {
    return T{};
  }
  template <typename T>
  static T Combine(T a, T b) {
    return a + b;
  }
  template <typename T>
  static bool Apply(std::atomic_ref<T> x, T v, T) {
    if (v == T{}) return false;
    if constexpr (std::is_integral_v<T>) {
      x.fetch_add(v, std::memory_order_relaxed);
    } else {
      T old = x.load(std::memory_order_relaxed);
      while (
          !x.compare_exchange_weak(old, old + v, std::memory_order_relaxed)) {
      }
    }
    return true;
  }
};

struct Min {
  static constexpr bool kFirstWins = false;
  template <typename T>
  static T Identity() {
    return std::numeric_limits<T>::max();
  }
  template <typename T>
  static T Combine(T a, T b) {
    return std::min(a, b);
  }
  template <typename T>
  static bool Apply(std::atomic_ref<T> x, T v, T) {
    T old = x.load(std::memory_order_relaxed);
    while (v < old) {
      if (x.compare_exchange_weak(old, v, std::memory_order_relaxed)) {
        return true;
      }
    }
    return false;
  }
};

struct Max {
  static constexpr bool kFirstWins = false;
  template <typename T>
  static T Identity() {
    return std::numeric_limits<T>::lowest();
  }
  template <typename T>
  static T Combine(T a, T b) {
    return std::max(a, b);
  }
  template <typename T>
  static bool Apply(std::atomic_ref<T> x, T v, T) {
    T old = x.load(std::memory_order_relaxed);
    while (old < v) {
      if (x.compare_exchange_weak(old, v, std::memory_order_relaxed)) {
        return true;
      }
    }
    return false;
  }
};

// First writer wins: the element takes v only while it still holds the
// array's initial value ("unset"), as BFS claims a vertex for a level.
struct Claim {
  static constexpr bool kFirstWins = true;
  template <typename T>
  static T Identity() {
    return T{};
  }
  template <typename T>
  static T Combine(T a, T) {
    return a;
  }
  template <typename T>
  static bool Apply(std::atomic_ref<T> x, T v, T unset) {
    return x.load(std::memory_order_relaxed) == unset &&
           x.compare_exchange_strong(unset, v, std::memory_order_relaxed);
  }
};

struct Or {
  static constexpr bool kFirstWins = false;
  template <typename T>
  static T Identity() {
    return T{};
  }
  template <typename T>
  static T Combine(T a, T b) {
    return a | b;
  }
  template <typename T>
  static bool Apply(std::atomic_ref<T> x, T v, T) {
    if ((x.load(std::memory_order_relaxed) & v) == v) return false;
    return (x.fetch_or(v, std::memory_order_relaxed) & v) != v;
  }
};

}  // namespace dmg::compute

#endif  // DMG_COMPUTE_NODE_UPDATES_H_

// Per worker, the updates a push step makes that this node may not apply
// itself: those to other nodes' vertices, and all of those made for work
// taken from another node (a node writes state only for its own work).
//
// Few updates stay a list (8-16 bytes each). Once the list would take more
// memory than one value per vertex, it folds into a dense array over all
// vertices plus a bitmap of the targets holding a value, and later updates
// combine in place with the update's combine operator: O(1) each, no
// growth, no page faults. That is what makes taking another node's dense
// chunk pay: such a chunk sends one update per edge, and appending 50,000
// records per chunk to a growing list cost the taker twice the owner's
// work for it (measured on the skew graph, deploy/experiments/skew.py).
//
// CombineOutboxes folds the workers' outboxes into one list per target,
// sorted by target, ready to be cut into the owners' batches.
#ifndef DMG_COORDINATOR_OUTBOX_H_
#define DMG_COORDINATOR_OUTBOX_H_

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <type_traits>
#include <vector>

#include "common/huge_pages.h"
#include "store/graph.h"

namespace dmg::coordinator {

// An update pushed to a vertex another compute node owns.
template <typename T>
struct RemoteUpdate {
  store::VertexId v;
  T x;
};

// A cache line of its own (alignas): workers add to theirs side by side.
class alignas(64) UpdateOutbox {
 public:
  // Empties the outbox for a step over `num_vertices` vertices; memory
  // stays for the next step.
  void Reset(uint64_t num_vertices) {
    if (dense_) ClearBits();
    dense_ = false;
    size_ = 0;
    num_vertices_ = num_vertices;
  }

  template <typename Op, typename T>
  void Add(store::VertexId v, T x) {
    static_assert(std::is_trivially_copyable_v<T>);
    if (dense_) {
      Combine<Op>(v, x);
      return;
    }
    const RemoteUpdate<T> u{v, x};
    const uint64_t need = (size_ + 1) * sizeof(u);
    // A quarter of the dense arrays' size: past it, combining in place
    // costs less memory and no more time.
    if (4 * need > DenseBytes<T>()) {
      ToDense<Op, T>();
      Combine<Op>(v, x);
      return;
    }
    if (need > list_.bytes()) list_.Reserve(need, size_ * sizeof(u));
    std::memcpy(list_.data() + size_ * sizeof(u), &u, sizeof(u));
    ++size_;
  }

  bool dense() const { return dense_; }
  bool empty() const { return !dense_ && size_ == 0; }
  // In list mode: the updates in the order they were added.
  template <typename T>
  std::span<const RemoteUpdate<T>> list() const {
    return {reinterpret_cast<const RemoteUpdate<T>*>(list_.data()), size_};
  }
  // In dense mode: bit v of has() says values()[v] holds v's combined value.
  template <typename T>
  T* values() {
    return reinterpret_cast<T*>(values_.data());
  }
  uint64_t* has() { return reinterpret_cast<uint64_t*>(has_.data()); }
  uint64_t words() const { return (num_vertices_ + 63) / 64; }
  uint64_t num_vertices() const { return num_vertices_; }

  // Folds `x` into v's value (dense mode).
  template <typename Op, typename T>
  void Combine(store::VertexId v, T x) {
    T* vals = values<T>();
    uint64_t& word = has()[v >> 6];
    const uint64_t bit = uint64_t{1} << (v & 63);
    if (word & bit) {
      vals[v] = Op::Combine(vals[v], x);
    } else {
      vals[v] = x;
      word |= bit;
    }
  }

 private:
  // Zeroes the bitmap (dense mode's invariant: all bits clear when unused).
  void ClearBits() {
    if (has_.bytes() > 0) std::memset(has_.data(), 0, words() * 8);
  }
  template <typename T>
  uint64_t DenseBytes() const {
    return num_vertices_ * sizeof(T) + words() * 8;
  }
  template <typename Op, typename T>
  void ToDense() {
    // Values are read only where their bit is set: not initialised.
    values_.Reserve(num_vertices_ * sizeof(T));
    has_.ReserveZeroed(words() * 8);
    dense_ = true;
    for (const RemoteUpdate<T>& u : list<T>()) Combine<Op>(u.v, u.x);
    size_ = 0;
  }

  bool dense_ = false;
  uint64_t num_vertices_ = 0;
  uint64_t size_ = 0;  // list entries
  HugeBuffer list_;
  HugeBuffer values_;
  HugeBuffer has_;  // bits, all zero whenever not in dense use
};

// Scratch kept between steps by the caller of CombineOutboxes: fresh pages
// every push step would cost more in page faults than the combining.
struct CombineScratch {
  HugeBuffer values;  // a dense accumulator over the targets' span
  HugeBuffer has;     // one byte per target of the span, zero between uses
  HugeBuffer out;     // the combined updates
};

// The workers' updates combined per target with Op::Combine and sorted by
// target. Leaves every outbox reset. Each target's updates fold in worker
// order when all outboxes are lists; once one is dense the others fold into
// it (the combine operators are commutative; only Claim's pick of a winner
// and a float Sum's rounding can differ, as with threads).
template <typename Op, typename T>
std::span<const RemoteUpdate<T>> CombineOutboxes(std::span<UpdateOutbox> boxes,
                                                 CombineScratch& scratch) {
  using Update = RemoteUpdate<T>;
  uint64_t kept = 0;  // entries of `all`
  auto all_reserve = [&](uint64_t n) {
    scratch.out.Reserve(n * sizeof(Update));
    return reinterpret_cast<Update*>(scratch.out.data());
  };
  UpdateOutbox* dense = nullptr;
  for (UpdateOutbox& b : boxes) {
    if (b.dense()) {
      dense = &b;
      break;
    }
  }
  if (dense != nullptr) {
    T* acc = dense->values<T>();
    uint64_t* has = dense->has();
    for (UpdateOutbox& b : boxes) {
      if (&b == dense) continue;
      if (!b.dense()) {
        for (const Update& u : b.list<T>()) dense->Combine<Op>(u.v, u.x);
        continue;
      }
      T* other = b.values<T>();
      uint64_t* bits = b.has();
      for (uint64_t i = 0; i < b.words(); ++i) {
        for (uint64_t m = bits[i]; m != 0; m &= m - 1) {
          const store::VertexId v =
              static_cast<store::VertexId>(i * 64 + std::countr_zero(m));
          dense->Combine<Op>(v, other[v]);
        }
      }
    }
    uint64_t count = 0;
    for (uint64_t i = 0; i < dense->words(); ++i) {
      count += std::popcount(has[i]);
    }
    Update* all = all_reserve(count);
    for (uint64_t i = 0; i < dense->words(); ++i) {
      for (uint64_t m = has[i]; m != 0; m &= m - 1) {
        const store::VertexId v =
            static_cast<store::VertexId>(i * 64 + std::countr_zero(m));
        all[kept++] = {v, acc[v]};
      }
    }
  } else {
    uint64_t total = 0;
    store::VertexId lo = ~store::VertexId{0}, hi = 0;
    for (UpdateOutbox& b : boxes) {
      for (const Update& u : b.list<T>()) {
        lo = std::min(lo, u.v);
        hi = std::max(hi, u.v);
      }
      total += b.list<T>().size();
    }
    if (total > 0 && uint64_t{hi - lo} < 4 * total) {
      // Many updates for their span: a dense accumulator over it.
      static_assert(sizeof(T) <= 8);
      const uint64_t span = uint64_t{hi - lo} + 1;
      scratch.values.Reserve(span * sizeof(T));
      scratch.has.ReserveZeroed(span);
      T* acc = reinterpret_cast<T*>(scratch.values.data());
      auto* has = reinterpret_cast<uint8_t*>(scratch.has.data());
      uint64_t distinct = 0;
      for (UpdateOutbox& b : boxes) {
        for (const Update& u : b.list<T>()) {
          const uint64_t i = u.v - lo;
          if (has[i]) {
            acc[i] = Op::Combine(acc[i], u.x);
          } else {
            acc[i] = u.x;
            has[i] = 1;
            ++distinct;
          }
        }
      }
      Update* all = all_reserve(distinct);
      for (uint64_t i = 0; i < span; ++i) {
        if (has[i]) {
          all[kept++] = {static_cast<store::VertexId>(lo + i), acc[i]};
          has[i] = 0;  // clean for the next use
        }
      }
    } else {
      // Few and scattered: a stable sort keeps each target's fold order.
      Update* all = all_reserve(total);
      uint64_t n = 0;
      for (UpdateOutbox& b : boxes) {
        for (const Update& u : b.list<T>()) all[n++] = u;
      }
      std::stable_sort(all, all + n, [](const Update& a, const Update& b) {
        return a.v < b.v;
      });
      for (uint64_t k = 0; k < n; ++k) {
        if (kept > 0 && all[kept - 1].v == all[k].v) {
          all[kept - 1].x = Op::Combine(all[kept - 1].x, all[k].x);
        } else {
          all[kept++] = all[k];
        }
      }
    }
  }
  for (UpdateOutbox& b : boxes) b.Reset(b.num_vertices());
  return {reinterpret_cast<const Update*>(scratch.out.data()), kept};
}

}  // namespace dmg::coordinator

#endif  // DMG_COORDINATOR_OUTBOX_H_

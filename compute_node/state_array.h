// A vertex-property array (scores, depths, labels, distances) that lives on a
// memory node, double-buffered by superstep: the state after superstep s is
// in buffer s % 2, so a finished superstep is always a consistent checkpoint.
//
// The compute node reaches it in one of two modes, chosen by the engine from
// the memory budget:
//  - resident: a whole local copy (when it fits). At the end of superstep s
//    the 4 KiB pages changed in s or s-1 are written into buffer s % 2 —
//    exactly what that buffer lacks.
//  - paged: pages come and go through the engine's PageCache. A page is
//    fetched from buffer s % 2 if it was already written back there during
//    superstep s, else from buffer (s-1) % 2 (which holds all of version
//    s-1); dirty pages are written back into buffer s % 2 (on eviction or at
//    commit), and pages changed in s-1 but not in s are copied into it.
//
// Accessors take the calling worker (for its transport endpoint on a miss)
// and are safe from many workers at once: values are accessed atomically.
#ifndef DMG_COMPUTE_NODE_STATE_ARRAY_H_
#define DMG_COMPUTE_NODE_STATE_ARRAY_H_

#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/aligned_buffer.h"
#include "compute_node/page_cache.h"
#include "store/graph.h"
#include "transport/transport.h"

namespace dmg::compute {

class Engine;

class StateArrayBase : public PageSource {
 public:
  static constexpr uint64_t kPageBytes = PageCache::kPageBytes;
  ~StateArrayBase() override;
  StateArrayBase(const StateArrayBase&) = delete;
  StateArrayBase& operator=(const StateArrayBase&) = delete;

  const std::string& name() const { return name_; }
  uint64_t size() const { return n_; }
  bool resident() const { return cache_ == nullptr; }

  // Ends superstep `superstep` (1-based) for this array: afterwards buffer
  // superstep % 2 holds the whole version. Called by Engine::EndSuperstep.
  absl::Status Commit(int superstep);
  // Reads elements [begin, end) of the version after `superstep` into dst.
  absl::Status ReadVersion(int superstep, uint64_t begin, uint64_t end,
                           void* dst);
  // First error a paged access hit (accessors cannot return one).
  absl::Status error();
  // Marks every page changed (for bulk writes through MutableResidentData).
  void MarkAllDirty() { std::fill(dirty_.begin(), dirty_.end(), ~uint64_t{0}); }
  // Paged mode: unpins the page each worker keeps pinned between accesses.
  // Called before a commit and whenever workers stop touching the array.
  void ReleasePins();

  // PageSource (paged mode).
  absl::Status FetchPages(int worker, uint64_t first, uint64_t count,
                          std::byte* const* dst) override;
  absl::Status WriteBackPages(int worker,
                              std::span<const DirtyPage> pages) override;

 protected:
  StateArrayBase(Engine* engine, std::string name, uint64_t n, size_t elem_size,
                 PageCache* cache);
  void MarkDirty(uint64_t index) {
    uint64_t page = index * elem_ / kPageBytes;
    std::atomic_ref<uint64_t> word(dirty_[page >> 6]);
    uint64_t mask = uint64_t{1} << (page & 63);
    if (!(word.load(std::memory_order_relaxed) & mask)) {
      word.fetch_or(mask, std::memory_order_relaxed);
    }
  }
  // Paged mode: the element's address inside its page, or nullptr after
  // recording an error. Each worker keeps its last page pinned, so runs of
  // accesses to one page (sequential scans) cost one pin, not one each.
  std::byte* PinElement(int worker, uint64_t index) {
    uint64_t at = index * elem_;
    Handle& h = handles_[worker];
    if (h.page == at / kPageBytes) return h.base + at % kPageBytes;
    return PinSlow(worker, at);
  }
  void NoteDirty(int worker) { handles_[worker].dirty = true; }
  // Paged reads: from the worker's pinned page, else an unpinned validated
  // read of a cached page (the page cache's hit path).
  template <typename T>
  bool TryReadElement(int worker, uint64_t index, T* out) {
    uint64_t at = index * elem_;
    const Handle& h = handles_[worker];
    if (h.page == at / kPageBytes) {
      *out = std::atomic_ref<T>(*reinterpret_cast<T*>(h.base + at % kPageBytes))
                 .load(std::memory_order_relaxed);
      return true;
    }
    return cache_->TryRead(worker, this, at / kPageBytes, at % kPageBytes, out);
  }
  std::byte* local_bytes() { return local_.data(); }

 private:
  friend class Engine;
  absl::Status Allocate(const void* initial);
  void QueueWrite(int w, int buffer, uint64_t first_page, uint64_t last_page);
  bool Bit(const std::vector<uint64_t>& bits, uint64_t page) const {
    return (bits[page >> 6] >> (page & 63)) & 1;
  }
  uint64_t PageLength(uint64_t page) const {
    return std::min(kPageBytes, bytes_ - page * kPageBytes);
  }

  Engine* engine_;
  std::string name_;
  uint64_t n_;
  size_t elem_;
  uint64_t bytes_;
  uint64_t pages_;
  PageCache* cache_;     // nullptr: resident
  AlignedBuffer local_;  // resident mode only
  transport::RegionInfo regions_[2];
  std::vector<uint64_t> dirty_, prev_dirty_;
  std::mutex error_mu_;
  absl::Status error_;
  uint64_t reserved_ = 0;  // budget bytes held by a resident copy
  struct Handle {
    uint64_t page = ~uint64_t{0};
    std::byte* base = nullptr;
    bool dirty = false;
  };
  std::byte* PinSlow(int worker, uint64_t at);
  std::vector<Handle> handles_;  // per worker (paged mode)
};

template <typename T>
class StateArray : public StateArrayBase {
 public:
  T Get(int w, store::VertexId v) {
    if (resident()) return std::atomic_ref<T>(data()[v]).load(kRelaxed);
    T x;
    if (TryReadElement(w, v, &x)) return x;
    std::byte* p = PinElement(w, v);
    if (p == nullptr) return T{};
    return std::atomic_ref<T>(*reinterpret_cast<T*>(p)).load(kRelaxed);
  }
  void Set(int w, store::VertexId v, T x) {
    Update(w, v, [&](std::atomic_ref<T> a) {
      a.store(x, kRelaxed);
      return true;
    });
  }
  // value = min(value, x); true if it changed.
  bool Min(int w, store::VertexId v, T x) {
    return Update(w, v, [&](std::atomic_ref<T> a) {
      T old = a.load(kRelaxed);
      while (x < old) {
        if (a.compare_exchange_weak(old, x, kRelaxed)) return true;
      }
      return false;
    });
  }
  // The local copy when resident, else nullptr: for read-only hot loops
  // (plain loads the compiler can keep in registers), valid while no worker
  // writes the array.
  const T* ResidentData() { return resident() ? data() : nullptr; }
  // Resident only: direct writes for bulk loops; the caller marks what it
  // changed (MarkAllDirty for everything).
  T* MutableResidentData() { return resident() ? data() : nullptr; }

  // The version after `superstep` as the memory node holds it; a resident
  // array also checks it against its local copy (a difference would mean the
  // write-back lost an update).
  absl::StatusOr<std::vector<T>> ReadResult(int superstep) {
    std::vector<T> out(size());
    if (absl::Status s = ReadVersion(superstep, 0, size(), out.data());
        !s.ok()) {
      return s;
    }
    if (resident() &&
        std::memcmp(out.data(), data(), size() * sizeof(T)) != 0) {
      return absl::InternalError("state '" + name() +
                                 "' on the memory node disagrees with the "
                                 "compute node's copy");
    }
    return out;
  }
  // value == expected ? value = desired : nothing; true if it swapped.
  bool CompareExchange(int w, store::VertexId v, T expected, T desired) {
    return Update(w, v, [&](std::atomic_ref<T> a) {
      return a.load(kRelaxed) == expected &&
             a.compare_exchange_strong(expected, desired, kRelaxed);
    });
  }

 private:
  friend class Engine;
  static constexpr std::memory_order kRelaxed = std::memory_order_relaxed;
  StateArray(Engine* engine, std::string name, uint64_t n, PageCache* cache)
      : StateArrayBase(engine, std::move(name), n, sizeof(T), cache) {}
  T* data() { return reinterpret_cast<T*>(local_bytes()); }

  template <typename Op>
  bool Update(int w, store::VertexId v, Op op) {
    bool changed;
    if (resident()) {
      changed = op(std::atomic_ref<T>(data()[v]));
    } else {
      std::byte* p = PinElement(w, v);
      if (p == nullptr) return false;
      changed = op(std::atomic_ref<T>(*reinterpret_cast<T*>(p)));
      // Marked while pinned: once unpinned the page may be evicted and
      // fetched again, and the fetch reads the buffer the dirty bit names.
      if (changed) {
        MarkDirty(v);
        NoteDirty(w);
      }
      return changed;
    }
    if (changed) MarkDirty(v);
    return changed;
  }
};

}  // namespace dmg::compute

#endif  // DMG_COMPUTE_NODE_STATE_ARRAY_H_

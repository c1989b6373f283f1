// Large buffers that a process frees and soon wants again, kept mapped and
// touched instead of going back to the operating system. `dmg run
// --trials` starts a new engine for every trial and an engine allocates
// its per-job buffers afresh (header offsets, frontier lists, push output,
// result vectors, the embedded memory node's regions): each 4 KiB page of
// them cost a first-touch fault (~10 us on a VM) in every trial, ~590
// faults a kron:20 BFS trial (docs/PERFORMANCE.md). A buffer freed here
// goes to a free list of its size class; the next allocation of that class
// takes it, already faulted in.
//
// Size classes: powers of two from kMinBytes, multiples of kStepBytes
// beyond kStepBytes (at most a step of waste there); a buffer always takes
// its whole class, kept or not. Buffers are kept only once a process has
// said so (Keep: `dmg run`, whose trials reuse them; not a memory-node
// daemon, whose freed regions must go back), at most kMaxKeptBytes; past
// that a freed buffer is freed. What is kept is at most what the process
// had in use at once before, so a job does not grow past its own peak.
// Thread-safe.
#ifndef DMG_COMMON_WARM_POOL_H_
#define DMG_COMMON_WARM_POOL_H_

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

namespace dmg {

class WarmPool {
 public:
  static constexpr size_t kMinBytes = size_t{256} << 10;
  static constexpr size_t kStepBytes = size_t{64} << 20;
  static constexpr size_t kMaxKeptBytes = size_t{1} << 30;
  static constexpr size_t kHugePageBytes = size_t{2} << 20;

  // The process's pool (never destroyed: buffers may be freed during exit).
  static WarmPool& Process() {
    static WarmPool* pool = new WarmPool;
    return *pool;
  }

  // From now on, freed buffers are kept (until then they are freed).
  void Keep() {
    std::lock_guard<std::mutex> lock(mu_);
    keep_ = true;
  }

  // The bytes a request of `bytes` takes: its class.
  static size_t ClassBytes(size_t bytes) {
    if (bytes > kStepBytes) {
      return (bytes + kStepBytes - 1) / kStepBytes * kStepBytes;
    }
    size_t c = kMinBytes;
    while (c < bytes) c <<= 1;
    return c;
  }

  // A buffer of at least `bytes` (>= kMinBytes), aligned to `align` (a
  // power of two, at most 2 MiB), and whether it was kept (warm) rather
  // than new. A new one of 2 MiB alignment is advised for hugepages.
  std::pair<void*, bool> Allocate(size_t bytes, size_t align) {
    const size_t c = ClassBytes(bytes);
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = kept_.find({c, align});
      if (it != kept_.end() && !it->second.empty()) {
        void* p = it->second.back();
        it->second.pop_back();
        kept_bytes_ -= c;
        ++reused_;
        return {p, true};
      }
    }
    void* p = std::aligned_alloc(align, c);
    if (p == nullptr) throw std::bad_alloc();
    if (align >= kHugePageBytes) ::madvise(p, c, MADV_HUGEPAGE);
    return {p, false};
  }

  // Gives back a buffer Allocate(bytes, align) returned.
  void Free(void* p, size_t bytes, size_t align) {
    if (p == nullptr) return;
    const size_t c = ClassBytes(bytes);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (keep_ && kept_bytes_ + c <= kMaxKeptBytes) {
        kept_[{c, align}].push_back(p);
        kept_bytes_ += c;
        return;
      }
    }
    std::free(p);
  }

  size_t kept_bytes() const {
    std::lock_guard<std::mutex> lock(mu_);
    return kept_bytes_;
  }
  uint64_t reused() const {
    std::lock_guard<std::mutex> lock(mu_);
    return reused_;
  }

 private:
  WarmPool() = default;
  mutable std::mutex mu_;
  std::map<std::pair<size_t, size_t>, std::vector<void*>> kept_;
  size_t kept_bytes_ = 0;
  uint64_t reused_ = 0;
  bool keep_ = false;
};

}  // namespace dmg

#endif  // DMG_COMMON_WARM_POOL_H_

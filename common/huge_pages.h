// Transparent hugepages for large vectors the compute side fills at once
// (header offsets, frontier lists, results). On virtual machines a 4 KiB
// first-touch fault costs ~10 us (measured here: 64 MiB took 170 ms with
// 4 KiB pages, 6-22 ms with 2 MiB ones), so a 4 MiB array costs ~11 ms to
// touch: more than a BFS level. Advising the buffer before its first touch
// lets the kernel back it with 2 MiB pages where THP is in "madvise" mode.
// Small buffers are left alone: rounding them to 2 MiB would inflate the
// resident set of a compute node with a small cache bound.
#ifndef DMG_COMMON_HUGE_PAGES_H_
#define DMG_COMMON_HUGE_PAGES_H_

#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>
#include <vector>

#include "common/warm_pool.h"

namespace dmg {

inline constexpr size_t kHugePageBytes = size_t{2} << 20;
inline constexpr size_t kHugeAdviceThreshold = size_t{4} << 20;

// Advises the whole 2 MiB-aligned pages inside [p, p + bytes) for
// hugepages, when the range is large enough to be worth it. Advice only:
// failures (no THP, an old kernel) change nothing but speed.
inline void AdviseHugePages(void* p, size_t bytes) {
  if (bytes < kHugeAdviceThreshold) return;
  const uintptr_t begin = reinterpret_cast<uintptr_t>(p);
  const uintptr_t first = (begin + kHugePageBytes - 1) & ~(kHugePageBytes - 1);
  const uintptr_t last = (begin + bytes) & ~(kHugePageBytes - 1);
  if (last > first) {
    ::madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
  }
}

// An allocator for vectors that may grow large: buffers of 4 MiB and more
// start on a 2 MiB boundary and are advised for hugepages, so every page of
// them can be a huge one; buffers of WarmPool::kMinBytes and more come
// from (and go back to) the process's warm pool, so that the next job or
// trial does not fault their pages in again.
template <typename T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() = default;
  template <typename U>
  HugePageAllocator(const HugePageAllocator<U>&) {}  // NOLINT: rebinding
  T* allocate(size_t n) {
    const size_t bytes = n * sizeof(T);
    if (bytes < WarmPool::kMinBytes) {
      return static_cast<T*>(::operator new(bytes));
    }
    return static_cast<T*>(
        WarmPool::Process().Allocate(bytes, Alignment(bytes)).first);
  }
  void deallocate(T* p, size_t n) {
    const size_t bytes = n * sizeof(T);
    if (bytes < WarmPool::kMinBytes) {
      ::operator delete(p);
    } else {
      WarmPool::Process().Free(p, bytes, Alignment(bytes));
    }
  }
  static size_t Alignment(size_t bytes) {
    return bytes < kHugeAdviceThreshold ? 4096 : kHugePageBytes;
  }
  template <typename U>
  bool operator==(const HugePageAllocator<U>&) const {
    return true;
  }
};

template <typename T>
using HugePageVector = std::vector<T, HugePageAllocator<T>>;

// v.reserve(n), with the new buffer advised before anything touches it.
// Call on an empty vector (a reallocation would touch the copy first).
// With a plain allocator the buffer is not 2 MiB-aligned, so only its
// aligned interior can be huge.
template <typename T, typename A>
void ReserveHuge(std::vector<T, A>& v, size_t n) {
  if (n <= v.capacity()) return;
  v.reserve(n);
  AdviseHugePages(v.data(), v.capacity() * sizeof(T));
}

// A vector of n copies of x whose pages are advised before they are filled.
template <typename T>
std::vector<T> HugeVector(size_t n, const T& x = T()) {
  std::vector<T> v;
  ReserveHuge(v, n);
  v.assign(n, x);
  return v;
}

// A growable byte buffer for scratch that is refilled every superstep (the
// push outboxes, the combining of their updates): from 1 MiB on it sits on
// whole 2 MiB pages advised for hugepages (rounding up at most doubles a
// buffer that is only allocated when a step needs it), and it keeps its
// memory between steps, so a step touches fresh pages only when it needs
// more than any step before it.
class HugeBuffer {
 public:
  static constexpr size_t kHugeFrom = size_t{1} << 20;

  HugeBuffer() = default;
  HugeBuffer(const HugeBuffer&) = delete;
  HugeBuffer& operator=(const HugeBuffer&) = delete;
  HugeBuffer(HugeBuffer&& o) noexcept : data_(o.data_), bytes_(o.bytes_) {
    o.data_ = nullptr;
    o.bytes_ = 0;
  }
  HugeBuffer& operator=(HugeBuffer&& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  ~HugeBuffer() { std::free(data_); }

  std::byte* data() { return data_; }
  const std::byte* data() const { return data_; }
  size_t bytes() const { return bytes_; }

  // At least `bytes` bytes, all zero when they had to grow (for buffers
  // whose users keep them zero between uses: a fresh allocation holds
  // whatever the allocator left, the old part included).
  void ReserveZeroed(size_t bytes) {
    if (bytes <= bytes_) return;
    Reserve(bytes);
    std::memset(data_, 0, bytes_);
  }
  // At least `bytes` bytes; the first `keep` bytes keep their contents,
  // the rest are unspecified.
  void Reserve(size_t bytes, size_t keep = 0) {
    if (bytes <= bytes_) return;
    const size_t grown = std::max(bytes, 2 * bytes_);
    size_t rounded;
    void* p;
    if (grown >= kHugeFrom) {
      rounded = (grown + kHugePageBytes - 1) & ~(kHugePageBytes - 1);
      p = std::aligned_alloc(kHugePageBytes, rounded);
      if (p != nullptr) ::madvise(p, rounded, MADV_HUGEPAGE);
    } else {
      rounded = (grown + 63) & ~size_t{63};
      p = std::aligned_alloc(64, rounded);
    }
    if (p == nullptr) throw std::bad_alloc();
    if (keep > 0) std::memcpy(p, data_, std::min(keep, bytes_));
    std::free(data_);
    data_ = static_cast<std::byte*>(p);
    bytes_ = rounded;
  }

 private:
  std::byte* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace dmg

#endif  // DMG_COMMON_HUGE_PAGES_H_

// A page-aligned, zero-initialized byte buffer. Store images live in these so
// a memory node can register them with an RDMA NIC (or map hugepages) as is.
#ifndef DMG_COMMON_ALIGNED_BUFFER_H_
#define DMG_COMMON_ALIGNED_BUFFER_H_

#include <sys/mman.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <span>

#include "common/warm_pool.h"

namespace dmg {

// AlignedBuffer's deleter: buffers of WarmPool::kMinBytes and more came
// from the warm pool and go back to it.
struct AlignedFree {
  size_t bytes = 0, align = 0;
  void operator()(std::byte* p) const {
    if (bytes >= WarmPool::kMinBytes) {
      WarmPool::Process().Free(p, bytes, align);
    } else {
      std::free(p);
    }
  }
};

class AlignedBuffer {
 public:
  static constexpr size_t kAlignment = 4096;
  static constexpr size_t kHugePage = 2 << 20;
  // From one huge page up: a road-NY direction's blocks (3.99 MB) copied
  // into a hot-block cache in 4 KiB pages took ~1000 first-touch faults
  // (~10 us each on a VM) in the middle of a BFS. Rounding wastes less than
  // one huge page per buffer.
  static constexpr size_t kHugeThreshold = kHugePage;

  AlignedBuffer() = default;
  enum class Init { kZero, kUninitialized };
  explicit AlignedBuffer(size_t size, Init init = Init::kZero) : size_(size) {
    if (size == 0) return;
    // Large buffers (store images, state arrays) are 2 MiB aligned and
    // advised to use transparent hugepages: fewer TLB misses for the memory
    // node's copies and fewer pages for an RDMA NIC to translate.
    // From WarmPool::kMinBytes up, buffers come from the process's warm
    // pool (an embedded memory node's regions, freed by one trial's job
    // and allocated by the next's: zeroed again, but not faulted in).
    const size_t align = size >= kHugeThreshold ? kHugePage : kAlignment;
    size_t rounded = (size + align - 1) / align * align;
    void* p = nullptr;
    Free free{0, align};
    if (rounded >= WarmPool::kMinBytes) {
      p = WarmPool::Process().Allocate(rounded, align).first;
      free.bytes = rounded;
    } else {
      p = std::aligned_alloc(align, rounded);
      if (p == nullptr) throw std::bad_alloc();
      if (align == kHugePage) ::madvise(p, rounded, MADV_HUGEPAGE);
    }
    // Caches are filled before they are read: skip touching every page.
    if (init == Init::kZero) std::memset(p, 0, rounded);
    data_ = std::unique_ptr<std::byte, Free>(static_cast<std::byte*>(p), free);
  }

  std::byte* data() { return data_.get(); }
  const std::byte* data() const { return data_.get(); }
  size_t size() const { return size_; }
  std::span<std::byte> span() { return {data(), size_}; }
  std::span<const std::byte> span() const { return {data(), size_}; }

 private:
  using Free = AlignedFree;
  std::unique_ptr<std::byte, Free> data_;
  size_t size_ = 0;
};

}  // namespace dmg

#endif  // DMG_COMMON_ALIGNED_BUFFER_H_

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

namespace dmg {

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
    const size_t align = size >= kHugeThreshold ? kHugePage : kAlignment;
    size_t rounded = (size + align - 1) / align * align;
    void* p = std::aligned_alloc(align, rounded);
    if (p == nullptr) throw std::bad_alloc();
    if (align == kHugePage) ::madvise(p, rounded, MADV_HUGEPAGE);
    // Caches are filled before they are read: skip touching every page.
    if (init == Init::kZero) std::memset(p, 0, rounded);
    data_.reset(static_cast<std::byte*>(p));
  }

  std::byte* data() { return data_.get(); }
  const std::byte* data() const { return data_.get(); }
  size_t size() const { return size_; }
  std::span<std::byte> span() { return {data(), size_}; }
  std::span<const std::byte> span() const { return {data(), size_}; }

 private:
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  std::unique_ptr<std::byte, Free> data_;
  size_t size_ = 0;
};

}  // namespace dmg

#endif  // DMG_COMMON_ALIGNED_BUFFER_H_

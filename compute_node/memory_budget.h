// The compute node's hard byte bound (--cache_mb / --cache_fraction): every
// byte it keeps of graph topology and vertex state — block buffers, cached
// pages, resident state arrays — is reserved here first. The block directory
// and small fixed structures (frontier bitmaps, per-page metadata) are not,
// and are reported separately.
#ifndef DMG_COMPUTE_NODE_MEMORY_BUDGET_H_
#define DMG_COMPUTE_NODE_MEMORY_BUDGET_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>

namespace dmg::compute {

class MemoryBudget {
 public:
  static constexpr uint64_t kUnlimited = std::numeric_limits<uint64_t>::max();

  explicit MemoryBudget(uint64_t capacity = kUnlimited) : capacity_(capacity) {}

  uint64_t capacity() const { return capacity_; }
  bool unlimited() const { return capacity_ == kUnlimited; }
  uint64_t used() const { return used_.load(std::memory_order_relaxed); }
  uint64_t peak() const { return peak_.load(std::memory_order_relaxed); }
  uint64_t available() const {
    uint64_t u = used();
    return u >= capacity_ ? 0 : capacity_ - u;
  }

  // Takes `bytes` if they fit; false (and nothing taken) otherwise.
  bool TryReserve(uint64_t bytes) {
    uint64_t u = used_.load(std::memory_order_relaxed);
    do {
      if (bytes > capacity_ || u > capacity_ - bytes) return false;
    } while (!used_.compare_exchange_weak(u, u + bytes));
    uint64_t p = peak_.load(std::memory_order_relaxed);
    while (u + bytes > p && !peak_.compare_exchange_weak(p, u + bytes)) {
    }
    return true;
  }
  void Release(uint64_t bytes) { used_.fetch_sub(bytes); }

 private:
  const uint64_t capacity_;
  std::atomic<uint64_t> used_{0};
  std::atomic<uint64_t> peak_{0};
};

}  // namespace dmg::compute

#endif  // DMG_COMPUTE_NODE_MEMORY_BUDGET_H_

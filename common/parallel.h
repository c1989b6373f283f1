// Minimal fork-join helpers. The store's ingestion and the reference
// implementations use them; the compute runtime has its own workers.
#ifndef DMG_COMMON_PARALLEL_H_
#define DMG_COMMON_PARALLEL_H_

#include <algorithm>
#include <cstddef>
#include <functional>
#include <thread>
#include <vector>

namespace dmg {

// Number of threads fork-join helpers use: hardware concurrency, at least 1.
inline int DefaultThreads() {
  return std::max(1u, std::thread::hardware_concurrency());
}

// Splits [0, n) into `threads` contiguous ranges and calls fn(thread, begin,
// end) on each, in parallel, returning when all are done. Ranges are a pure
// function of (n, threads), so callers can make results deterministic.
inline void ParallelRanges(size_t n, int threads,
                           const std::function<void(int, size_t, size_t)>& fn) {
  threads = std::max(1, threads);
  if (threads == 1 || n < 2) {
    fn(0, 0, n);
    return;
  }
  std::vector<std::thread> pool;
  pool.reserve(threads - 1);
  for (int t = 1; t < threads; ++t) {
    size_t begin = n * t / threads, end = n * (t + 1) / threads;
    pool.emplace_back([&fn, t, begin, end] { fn(t, begin, end); });
  }
  fn(0, 0, n / threads);
  for (auto& th : pool) th.join();
}

}  // namespace dmg

#endif  // DMG_COMMON_PARALLEL_H_

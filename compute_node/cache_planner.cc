#include "compute_node/cache_planner.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/str_format.h"

namespace dmg::compute {

uint64_t CachePlanner::Spare() const {
  const uint64_t left = budget_.available();
  return left > minimum_page_bytes() ? left - minimum_page_bytes() : 0;
}

absl::StatusOr<BufferPlan> CachePlanner::PlanBuffers() {
  const uint64_t threads = request_.threads;
  BufferPlan plan;
  if (request_.policy != CachePolicy::kPageLru) {
    plan.prefetch_window = std::max(1, request_.prefetch_window);
    const uint64_t slots = plan.prefetch_window + 1;
    // An eighth of what the page minimum leaves, split over the workers and
    // their slots: the rest is for vertex state and the caches.
    const uint64_t cap = budget_.capacity();
    const uint64_t spare =
        cap > minimum_page_bytes() ? cap - minimum_page_bytes() : 0;
    // At least one block, whatever max_batch_bytes says.
    const uint64_t most =
        std::max<uint64_t>(request_.block_size, request_.max_batch_bytes);
    plan.batch_bytes = budget_.unlimited()
                           ? most
                           : std::clamp<uint64_t>(spare / 8 / threads / slots,
                                                  request_.block_size, most);
    plan.bytes_per_worker = plan.batch_bytes * slots;
  } else {
    // The baseline copies blocks out of cached pages one block at a time
    // and does not prefetch.
    plan.batch_bytes = request_.block_size;
    plan.prefetch_window = 1;
    plan.bytes_per_worker = request_.block_size;
  }
  const uint64_t buffers = plan.bytes_per_worker * threads;
  const uint64_t minimum = buffers + minimum_page_bytes();
  if (!budget_.unlimited() && budget_.capacity() < minimum) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "a cache of %d bytes is below this job's minimum of %d bytes (%d "
        "threads x (%d bytes of block buffers + %d bytes of pages)); raise "
        "the cache bound or lower the thread count",
        budget_.capacity(), minimum, threads, plan.bytes_per_worker,
        minimum_page_bytes() / threads));
  }
  if (!budget_.TryReserve(buffers)) {
    return absl::InternalError("the budget refused the worker buffers");
  }
  return plan;
}

const char* CachePolicyName(CachePolicy policy) {
  switch (policy) {
    case CachePolicy::kGraphAware:
      return "graph_aware";
    case CachePolicy::kPageLru:
      return "page_lru";
    case CachePolicy::kFam:
      return "fam";
  }
  return "?";
}

std::vector<bool> CachePlanner::PlaceStates(
    std::span<const StateRequest> states) {
  std::vector<bool> resident(states.size(), false);
  if (request_.policy == CachePolicy::kFam) {
    // All local or the job cannot run (the engine says so): no pages.
    for (size_t i = 0; i < states.size(); ++i) {
      resident[i] = budget_.TryReserve(states[i].bytes);
    }
    return resident;
  }
  if (request_.policy != CachePolicy::kGraphAware) return resident;
  std::vector<size_t> order(states.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return states[a].hint < states[b].hint;
  });
  for (size_t i : order) {
    // Once one array is paged the page cache holds what is left.
    if (paged_ || has_page_cache() || Spare() < states[i].bytes ||
        !budget_.TryReserve(states[i].bytes)) {
      paged_ = true;
      break;
    }
    resident[i] = true;
  }
  return resident;
}

uint64_t CachePlanner::PageCacheBytes(uint64_t unbounded_bytes) {
  if (page_cache_bytes_ > 0) return page_cache_bytes_;
  uint64_t bytes = budget_.unlimited() ? unbounded_bytes : budget_.available();
  bytes = bytes / kPageBytes * kPageBytes;
  if (bytes / kPageBytes < static_cast<uint64_t>(request_.threads) * 4 ||
      !budget_.TryReserve(bytes)) {
    return 0;
  }
  page_cache_bytes_ = bytes;
  return bytes;
}

uint64_t CachePlanner::GrantHeaders(uint64_t header_bytes) {
  if (request_.policy != CachePolicy::kGraphAware || paged_ ||
      has_page_cache() || Spare() < header_bytes ||
      !budget_.TryReserve(header_bytes)) {
    return 0;
  }
  return header_bytes;
}

uint64_t CachePlanner::GrantHotBlocks(uint64_t all_block_bytes) {
  if (request_.policy != CachePolicy::kGraphAware || paged_ ||
      has_page_cache()) {
    return 0;
  }
  const uint64_t spare = Spare();
  const uint64_t space = budget_.unlimited() || all_block_bytes <= spare
                             ? all_block_bytes
                             : spare / 2;
  return space > 0 && budget_.TryReserve(space) ? space : 0;
}

}  // namespace dmg::compute

// What a memory node offers to the transports that serve it: bounds-checked
// one-sided operations on its registered regions, and region management.
// The local backend calls it directly; the tcp and rdma servers will call it
// from their I/O threads. Compute code never sees this interface.
#ifndef DMG_TRANSPORT_MEMORY_TARGET_H_
#define DMG_TRANSPORT_MEMORY_TARGET_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "transport/transport.h"

namespace dmg::transport {

class MemoryTarget {
 public:
  virtual ~MemoryTarget() = default;
  // Each returns OutOfRangeError for an access outside the region and
  // NotFoundError for an unknown region, without touching memory.
  virtual absl::Status ServeRead(uint32_t region, uint64_t offset, void* dst,
                                 uint64_t length) = 0;
  virtual absl::Status ServeWrite(uint32_t region, uint64_t offset,
                                  const void* src, uint64_t length) = 0;
  // Serves `reads` (all kRead, all for this target) in order, stopping at
  // the first error: what a local batch's run of READs costs. The default
  // serves each on its own; a target may take its lock and count once.
  virtual absl::Status ServeReads(std::span<const Op> reads) {
    for (const Op& op : reads) {
      absl::Status s = ServeRead(op.region, op.offset, op.local, op.length);
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }
  // The same for a run of WRITEs (a commit's changed lines, a level's
  // logged claims: thousands of small ones), in order.
  virtual absl::Status ServeWrites(std::span<const Op> writes) {
    for (const Op& op : writes) {
      absl::Status s = ServeWrite(op.region, op.offset, op.local, op.length);
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }
  virtual absl::StatusOr<uint64_t> ServeCompareAndSwap(uint32_t region,
                                                       uint64_t offset,
                                                       uint64_t expected,
                                                       uint64_t desired) = 0;
  virtual absl::StatusOr<uint64_t> ServeFetchAndAdd(uint32_t region,
                                                    uint64_t offset,
                                                    uint64_t add) = 0;
  virtual absl::StatusOr<RegionInfo> ServeAllocate(uint64_t bytes,
                                                   const std::string& name) = 0;
  // A region that starts as `fill` (checked with CheckFill by the caller).
  virtual absl::StatusOr<RegionInfo> ServeAllocateFilled(
      uint64_t bytes, const std::string& name, const RegionFill& fill) = 0;
  // (Re)creates the store region (id kStoreRegion) of `bytes` zero bytes,
  // replacing any store already there; the loader then WRITEs the image.
  virtual absl::StatusOr<RegionInfo> ServeCreateStore(uint64_t bytes) = 0;
  // Makes region `staging` (written by the loader) the store, atomically:
  // a READ of the store sees all of the old one or all of the new one, and
  // store_generation() has moved on before any READ sees the new bytes.
  virtual absl::Status ServeCommitStore(uint32_t staging) {
    return absl::UnimplementedError("this memory target has no staged loads");
  }
  // Changes every time the store is replaced.
  virtual uint64_t store_generation() const { return 0; }
  // The target's position among the memory nodes (the slice of the store
  // it holds), so its messages and logs name it; `by` says who told it
  // ("dmg load", "the snapshot in DIR"), for the log line.
  virtual void AssignNodeId(uint32_t id, std::string_view by) {}
  // The bytes of a region, for servers that register memory with a NIC.
  virtual absl::StatusOr<std::span<std::byte>> RegionMemory(
      uint32_t region) = 0;
  virtual absl::Status ServeFree(uint32_t region) = 0;
  virtual std::vector<RegionInfo> ServeList() = 0;
};

}  // namespace dmg::transport

#endif  // DMG_TRANSPORT_MEMORY_TARGET_H_

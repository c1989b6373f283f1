// Work inside one compute node: what a unit of work is, and the one cursor
// that hands units out to the workers.
//
// A unit is a run of consecutive block-directory entries that a worker READs
// in one batch. Units never cut the pieces of a vertex that is split over
// several blocks, so one worker sees all of a vertex's pieces, in order.
//
// UnitScheduler is the only place where workers take work: dense scans,
// sparse scans, header loads, vertex maps and the bulk transfers of state
// arrays all draw from it. Items are handed out first come, first served
// (a worker that finishes early takes the next item: the dynamic stage of
// the workload manager). Nothing is split statically per worker.
#ifndef DMG_COMPUTE_NODE_UNIT_SCHEDULER_H_
#define DMG_COMPUTE_NODE_UNIT_SCHEDULER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "compute_node/worker_pool.h"
#include "store/block_format.h"

namespace dmg::compute {

// Directory entries [first, last) of one direction, read in one batch.
struct Unit {
  uint32_t first = 0;
  uint32_t last = 0;
};

// Cuts `entries` (ascending directory indices) into units of at most
// `batch_bytes` of blocks (a unit holds at least one block); a unit ends
// where the next entry does not directly follow, and never between two
// pieces of one split vertex.
std::vector<Unit> MakeUnits(std::span<const store::DirectoryEntry> directory,
                            std::span<const uint32_t> entries,
                            uint64_t batch_bytes);
// Every entry of the directory, cut as above.
// For a reader that skips the blocks of a unit the frontier does not touch
// (a sparse push with block headers at hand): cuts `entries` into units of
// about `unit_bytes` of what will actually be read (`need[k]` for entries[k])
// and lets a unit span untouched entries, so a frontier scattered over
// thousands of blocks costs a few batches, not one round trip per block.
// Still never cuts a split vertex.
std::vector<Unit> MakeSparseUnits(
    std::span<const store::DirectoryEntry> directory,
    std::span<const uint32_t> entries, std::span<const uint64_t> need,
    uint64_t unit_bytes);

std::vector<Unit> MakeAllUnits(std::span<const store::DirectoryEntry> directory,
                               uint64_t batch_bytes);

class UnitScheduler {
 public:
  explicit UnitScheduler(WorkerPool& pool) : pool_(pool) {}

  int workers() const { return pool_.size(); }

  // A worker's view of one job's items [0, count): Next() hands out the
  // next item not yet taken by any worker, or nullopt when none is left.
  class Cursor {
   public:
    std::optional<size_t> Next() {
      size_t i = next_->fetch_add(1, std::memory_order_relaxed);
      if (i >= count_) return std::nullopt;
      return i;
    }

   private:
    friend class UnitScheduler;
    Cursor(std::atomic<size_t>* next, size_t count)
        : next_(next), count_(count) {}
    std::atomic<size_t>* next_;
    size_t count_;
  };

  // Runs task(worker, cursor) on every worker; each takes items from one
  // shared cursor over [0, count). Returns the first error.
  absl::Status Run(size_t count,
                   const std::function<absl::Status(int, Cursor&)>& task);

  // fn(worker, item) for every item in [0, count), each once. A single item
  // runs on the calling thread as worker 0, without waking the pool: call
  // from the pool's owner only (as Run).
  absl::Status ForEach(size_t count,
                       const std::function<absl::Status(int, size_t)>& fn);

  // fn(worker, begin, end) over [0, n) in chunks of `grain` (the last may
  // be shorter), each chunk once.
  absl::Status ForRanges(
      uint64_t n, uint64_t grain,
      const std::function<absl::Status(int, uint64_t, uint64_t)>& fn);

 private:
  WorkerPool& pool_;
};

}  // namespace dmg::compute

#endif  // DMG_COMPUTE_NODE_UNIT_SCHEDULER_H_

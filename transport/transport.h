// The one interface through which compute nodes reach remote memory: regions
// registered on memory nodes, and one-sided READ, WRITE, compare-and-swap and
// fetch-and-add on (node, region, offset, length). Backends: local (memory
// nodes are objects in this process; data moves by copy), tcp and rdma. The
// compute runtime uses it; algorithms do not (they call only the engine's
// vertex-program API, whose headers include this one for statistics).
//
// Operations are queued on a per-thread Endpoint and move only when Flush()
// posts them as one batch and waits for all to complete — the shape of an
// RDMA doorbell-batched chain with one signalled completion. Post() and
// Wait() split that in two, so that asynchronous backends (tcp, rdma) can
// have several batches in flight at once; synchronous ones (local) run the
// batch inside Post(). Every operation is counted here, in the base class,
// identically for every backend.
#ifndef DMG_TRANSPORT_TRANSPORT_H_
#define DMG_TRANSPORT_TRANSPORT_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace dmg::transport {

// A region registered on a memory node. Offsets in operations are relative
// to the region's start. Region 0 of node 0 holds the store image, so the
// superblock is at (0, 0, 0).
struct RegionInfo {
  uint32_t node = 0;
  uint32_t id = 0;
  uint64_t length = 0;
  std::string name;
  // RDMA only: where the region is registered, and its remote key.
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
};

inline constexpr uint32_t kStoreRegion = 0;

// What a new region holds: every `width`-byte element (1, 2, 4 or 8) the
// low `width` bytes of `pattern`, little-endian; width 0: zeros.
struct RegionFill {
  uint32_t width = 0;
  uint64_t pattern = 0;
};
// OK if region `name` of `bytes` can hold `fill`, else InvalidArgument
// naming both.
absl::Status CheckFill(const RegionFill& fill, uint64_t bytes,
                       const std::string& name);
// Writes `fill` over [0, bytes) of `p` (zeros for width 0).
void FillBytes(std::byte* p, uint64_t bytes, const RegionFill& fill);

// What moved, counted at the compute side.
struct OpStats {
  uint64_t reads = 0;
  uint64_t writes = 0;
  uint64_t cas = 0;
  uint64_t faa = 0;
  uint64_t bytes_read = 0;     // READ payloads, plus 8 per atomic
  uint64_t bytes_written = 0;  // WRITE payloads, plus 8 per atomic
  uint64_t round_trips = 0;    // batches posted (a batch is one)

  OpStats& operator+=(const OpStats& o);
  OpStats operator-(const OpStats& o) const;
  uint64_t atomics() const { return cas + faa; }
};

enum class OpKind : uint8_t { kRead, kWrite, kCompareAndSwap, kFetchAndAdd };

struct Op {
  OpKind kind;
  uint32_t node;
  uint32_t region;
  uint64_t offset;
  uint32_t length;   // READ/WRITE bytes; 8 for atomics
  void* local;       // READ destination / WRITE source / atomic old value
  uint64_t compare;  // CAS expected
  uint64_t operand;  // CAS desired / FAA addend
};

// A queue of operations owned by one thread. Not thread-safe.
class Endpoint {
 public:
  virtual ~Endpoint() = default;

  void Read(uint32_t node, uint32_t region, uint64_t offset, void* dst,
            uint32_t length) {
    ops_.push_back({OpKind::kRead, node, region, offset, length, dst, 0, 0});
  }
  void Write(uint32_t node, uint32_t region, uint64_t offset, const void* src,
             uint32_t length) {
    ops_.push_back({OpKind::kWrite, node, region, offset, length,
                    const_cast<void*>(src), 0, 0});
  }
  // 8-byte atomics on 8-byte aligned offsets. *old receives the prior value.
  void CompareAndSwap(uint32_t node, uint32_t region, uint64_t offset,
                      uint64_t expected, uint64_t desired, uint64_t* old) {
    ops_.push_back({OpKind::kCompareAndSwap, node, region, offset, 8, old,
                    expected, desired});
  }
  void FetchAndAdd(uint32_t node, uint32_t region, uint64_t offset,
                   uint64_t add, uint64_t* old) {
    ops_.push_back(
        {OpKind::kFetchAndAdd, node, region, offset, 8, old, 0, add});
  }

  // Operations to one memory node take effect in the order they were
  // queued, within a batch and across batches (a WRITE, then a
  // compare-and-swap that says the WRITE is there, may share a batch);
  // operations to different nodes are not ordered.
  //
  // Posts every queued operation as one batch and waits for all of them.
  // On error the batch's effects are unspecified and the queue is cleared.
  absl::Status Flush() { return Wait(Post()); }

  // Posts the queued operations as one batch without waiting for them (the
  // local buffers must stay valid until Wait); returns the batch's ticket.
  // Backends that cannot overlap run the batch here.
  uint64_t Post();
  // Waits for batch `ticket` and every batch posted before it; returns the
  // first error among them. Batches complete in the order they were posted.
  // A batch that failed while a Wait for a later ticket completed it still
  // fails its own Wait (a caller that waits per batch, like a prefetch
  // pipeline whose callbacks Flush in between, never reads a failed batch's
  // buffers as if it had succeeded).
  absl::Status Wait(uint64_t ticket);
  // Batches posted and not yet waited for. For a synchronous backend these
  // have already run (inside Post), so this is not a measure of overlap; see
  // TakeMaxInFlight.
  size_t outstanding() const { return inflight_.size(); }

  // The most batches that were in flight at the same time — handed to the
  // memory nodes and not yet seen to complete — since the previous call (or
  // since the endpoint was made); the count then starts again from the
  // batches in flight now. Synchronous backends (those that run a batch in
  // Execute, like local) return 1 if a batch ran since the previous call,
  // else 0. Asynchronous ones report what they saw: rdma counts batches with
  // work requests posted whose completions it had not yet polled; tcp counts
  // batches whose request frames were sent and whose replies had not fully
  // arrived. The peak can only grow when a batch is posted, so calling this
  // after every Post() loses nothing.
  virtual uint64_t TakeMaxInFlight() {
    return std::exchange(ran_since_take_, 0);
  }

  size_t queued() const { return ops_.size(); }
  // Whether every queued operation is to memory node `node`.
  bool QueuedOnlyTo(uint32_t node) const {
    for (const Op& op : ops_) {
      if (op.node != node) return false;
    }
    return true;
  }
  const OpStats& stats() const { return stats_; }

 protected:
  // Synchronous backends implement Execute: the whole batch, then return.
  virtual absl::Status Execute(std::span<const Op> ops) = 0;
  // Asynchronous backends override Begin (send the batch) and End (collect
  // its completions), and TakeMaxInFlight. End is called in the order Begin
  // was, with the same span, which stays valid and unchanged from Begin to
  // End; End is not called for a batch whose Begin failed. Batches Begun
  // and not yet Ended when the endpoint is destroyed are the backend's to
  // drain or abandon (their local buffers may be gone by then). The default
  // Begin runs Execute and End does nothing.
  virtual absl::Status Begin(std::span<const Op> ops) { return Execute(ops); }
  virtual absl::Status End(std::span<const Op> ops) { return absl::OkStatus(); }

 private:
  struct Batch {
    uint64_t ticket;
    std::vector<Op> ops;
    absl::Status status;  // from Begin
  };
  std::vector<Op> ops_;
  // Oldest first. A deque, so a batch's ops never move while it is in flight.
  std::deque<Batch> inflight_;
  // Op vectors of completed batches, kept with their capacity: Post moves the
  // queued ops into the batch, and without these the next batch would grow
  // its vector from nothing again (a reallocation chain on every round trip,
  // ~5% of a road-NY BFS on the local transport).
  std::vector<std::vector<Op>> spare_ops_;
  // Failed batches completed by a Wait for a later ticket, for their own
  // Wait; oldest first, a few at most (the oldest are dropped beyond that).
  std::deque<std::pair<uint64_t, absl::Status>> failed_early_;
  uint64_t ran_since_take_ = 0;  // for the default TakeMaxInFlight
  uint64_t next_ticket_ = 1;
  OpStats stats_;
};

// A connection to the memory nodes of one cluster.
class Transport {
 public:
  virtual ~Transport() = default;
  virtual std::string name() const = 0;
  virtual uint32_t num_memory_nodes() const = 0;

  // A new endpoint for one worker thread.
  virtual absl::StatusOr<std::unique_ptr<Endpoint>> NewEndpoint() = 0;

  // Control plane: regions on a memory node.
  virtual absl::StatusOr<RegionInfo> AllocateRegion(
      uint32_t node, uint64_t bytes, const std::string& name) = 0;
  // A region that starts as `fill` (a state array's initial values), set
  // by the memory node instead of WRITTEN over the network: two buffers of
  // a 4 MB array were 8 MB on the wire at every job's start. A fill that
  // CheckFill refuses is InvalidArgument.
  virtual absl::StatusOr<RegionInfo> AllocateFilledRegion(
      uint32_t node, uint64_t bytes, const std::string& name,
      const RegionFill& fill) = 0;
  virtual absl::Status FreeRegion(uint32_t node, uint32_t region) = 0;
  virtual absl::StatusOr<std::vector<RegionInfo>> ListRegions(
      uint32_t node) = 0;

  // Asks every memory node to keep this job's regions for keep_s seconds
  // after its connections close (0: free them at close, the default), so
  // that a new process of the same job (`dmg run --resume`) finds its
  // state there. `granted_s`: the least any node granted; `others`: the
  // job's connections older than this control connection still open on
  // any node (another compute node still running the job; call first). Backends
  // whose regions cannot outlive the process (local) say Unimplemented.
  struct Kept {
    uint32_t granted_s = 0;
    uint32_t others = 0;
    // `others` on each memory node (`others` is the largest of them).
    std::vector<uint32_t> others_by_node;
  };
  virtual absl::StatusOr<Kept> KeepRegions(uint32_t keep_s) {
    return absl::UnimplementedError(
        "the " + name() +
        " transport keeps no state after the process exits: resuming a job "
        "needs memory-node daemons (--memory_nodes)");
  }
};

}  // namespace dmg::transport

#endif  // DMG_TRANSPORT_TRANSPORT_H_

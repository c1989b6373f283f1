// Where a state array lives on the memory nodes: one slice per compute
// node's vertex range (stage 1's owned range), each slice in two regions,
// one per version buffer (superstep s's state is in buffer s % 2). A node
// allocates, writes and frees only its own slice; it reads (and remote
// atomics write) the others' through where they said theirs are. A node's
// copy of another's range (resident, or pages in its cache) is a mirror:
// which of its bytes travel is the state array's business (pending lines,
// state_array.h); this class only knows where they are.
//
// With one compute node there is one slice, the whole array.
#ifndef DMG_COMPUTE_NODE_STATE_SLICES_H_
#define DMG_COMPUTE_NODE_STATE_SLICES_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "transport/transport.h"

namespace dmg::compute {

class StateSlices {
 public:
  static constexpr uint64_t kPageBytes = 4096;
  // The most bytes one READ or WRITE moves (transports take at most this).
  static constexpr uint64_t kMaxOp = 4 << 20;

  struct Slice {
    uint64_t begin = 0, end = 0;  // array bytes
    transport::RegionInfo region[2];
    bool mine = false;  // allocated by this node (and freed by it)
  };

  // `bounds`: the compute nodes' vertex ranges (nodes + 1 bounds; empty:
  // one node, one slice); `node`: this node's index. Ranges start on
  // multiples of 4096 vertices, so no page straddles two slices.
  StateSlices(std::string name, uint64_t bytes, size_t elem,
              const std::vector<uint64_t>& bounds, int node);

  int count() const { return static_cast<int>(slices_.size()); }
  const Slice& own() const { return slices_[node_]; }
  const Slice& operator[](int k) const { return slices_[k]; }
  // This node's pages: [own_first_page(), own_end_page()).
  uint64_t own_first_page() const { return own().begin / kPageBytes; }
  uint64_t own_end_page() const {
    return (own().end + kPageBytes - 1) / kPageBytes;
  }
  // The bytes each of this node's regions takes: whole 8-byte words, since
  // remote atomics work on them.
  uint64_t OwnRegionBytes() const;

  // Allocates this node's two regions on memory node (node mod memory
  // nodes), named `name.b` (one node) or `name.b.node`.
  absl::Status AllocateOwn(transport::Transport& transport,
                           const transport::RegionFill& fill = {});
  // Takes regions an earlier attempt of the job left as this node's
  // (`dmg run --resume`); too short ones are a DataLoss naming the array.
  absl::Status AdoptOwn(const transport::RegionInfo (&regions)[2]);
  // Frees this node's regions (a destructor's work: errors are logged).
  void FreeOwn(transport::Transport& transport);

  // What this node tells the others of its slice (its regions, and whether
  // it holds the array resident), and taking every node's posts (in node
  // order, its own included): afterwards every slice is reachable. A
  // malformed post is a DataLoss naming the node and the array.
  std::string Post(bool resident) const;
  absl::Status TakePosts(const std::vector<std::string>& posts,
                         bool resident_here);
  // Every node holds the array resident (known after TakePosts).
  bool all_resident() const { return all_resident_; }

  // The slice holding array byte `at`.
  const Slice& At(uint64_t at) const {
    for (const Slice& s : slices_) {
      if (at >= s.begin && at < s.end) return s;
    }
    return slices_.back();
  }
  // Queues READs (or WRITEs) of array bytes [at, at + length) of buffer
  // `buffer` on `ep`, cut at slice boundaries and at kMaxOp.
  void Queue(transport::Endpoint& ep, bool write, int buffer, uint64_t at,
             std::byte* local, uint64_t length) const;

  // Where array byte `at` lies in buffer `buffer`: the 8-byte aligned word
  // holding it and its byte offset in that word.
  struct Word {
    uint32_t node, region;
    uint64_t offset;
    uint32_t shift;  // bytes
  };
  Word WordAt(uint64_t at, int buffer) const {
    const Slice& s = At(at);
    const transport::RegionInfo& r = s.region[buffer];
    const uint64_t in = at - s.begin;
    return {r.node, r.id, in & ~uint64_t{7}, static_cast<uint32_t>(in & 7)};
  }

 private:
  std::string name_;
  int node_;
  std::vector<Slice> slices_;
  bool all_resident_ = false;
};

}  // namespace dmg::compute

#endif  // DMG_COMPUTE_NODE_STATE_SLICES_H_

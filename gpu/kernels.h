// The GPU's share of a compute node's range (issue 40): PageRank's pull
// sums and BFS's two steps over the vertices [begin, end) that stage 1
// (workload/gpu_share.h) gave the GPU. Host code with no CUDA types, built
// with and without CUDA: without it (or without a device) Open fails and
// the caller runs the share on its CPU threads.
//
// The share's adjacency lives on the GPU for the whole run (Upload, once
// per direction); each call then moves only per-superstep state: the
// contributions or a bitmap over all vertices in, the share's results out.
// Calls are synchronous: a call returns when its results are in the
// caller's spans. One ShareKernels is used by one thread at a time.
//
// Schedules: kPlain is a grid-stride loop over the share's vertices;
// kNuma runs persistent blocks that work first on the part of the share
// that belongs to their SM's L2 partition (KernelOptions::sm_node, from
// the topology probe). kernel_bodies.h holds the per-vertex logic and the
// chunk plans of both, and says how they work.
#ifndef DMG_GPU_KERNELS_H_
#define DMG_GPU_KERNELS_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "store/block_format.h"

namespace dmg::gpu {

using store::Direction;

enum class Schedule { kPlain, kNuma };

// The share's adjacency in one direction, whole in host memory: local
// vertex v = begin + i has neighbours targets[offsets[i], offsets[i + 1]),
// global ids. offsets has end - begin + 1 entries and starts at 0.
struct ShareCsr {
  uint64_t begin = 0, end = 0;
  std::vector<uint64_t> offsets;
  std::vector<uint32_t> targets;
};

// The same adjacency streamed: the offsets whole (8 bytes a vertex, known
// from the degrees), the targets through `fill`, which Upload calls with
// consecutive edge ranges: fill(first, out) writes the targets of edges
// [first, first + out.size()) into `out`, pinned staging memory. While the
// caller fetches one chunk (from the memory nodes, through the transport)
// the previous chunk is copied to the GPU.
struct CsrChunks {
  std::span<const uint64_t> offsets;
  std::function<absl::Status(uint64_t first, std::span<uint32_t> out)> fill;
};

// A CsrChunks that reads from `csr` (which must outlive it).
inline CsrChunks ChunksOf(const ShareCsr& csr) {
  CsrChunks chunks;
  chunks.offsets = csr.offsets;
  chunks.fill = [&csr](uint64_t first, std::span<uint32_t> out) {
    std::memcpy(out.data(), csr.targets.data() + first,
                out.size() * sizeof(uint32_t));
    return absl::OkStatus();
  };
  return chunks;
}

struct KernelOptions {
  int device = 0;  // CUDA device index (gpu::ListDevices)
  Schedule schedule = Schedule::kPlain;
  // kNuma: the node (L2 partition) of the SM with %smid i is sm_node[i];
  // SMs it does not name are spread over the nodes. nodes <= 1 makes
  // kNuma one queue: persistent blocks with dynamic chunks.
  std::vector<int> sm_node;
  int nodes = 1;
  // Pinned host memory for the copies, used as two halves (one filled
  // while the other is copied).
  size_t staging_bytes = size_t{64} << 20;
  // Persistent blocks per SM for kNuma; 0: as many as fit (occupancy).
  int blocks_per_sm = 0;
};

// Where the time went, summed over the calls since Open.
struct KernelTimes {
  // Host <-> device copies through the staging, wall time (an upload's
  // fill included: the copies run under it).
  double copy_seconds = 0;
  double kernel_seconds = 0;  // the kernels, by CUDA events
  uint64_t bytes_to_device = 0;
  uint64_t bytes_from_device = 0;
  uint64_t launches = 0;
};

class ShareKernels {
 public:
  // The share [begin, end) of a graph of num_vertices vertices on GPU
  // options.device. FailedPrecondition in a build without CUDA or when no
  // device is usable; the message says why.
  static absl::StatusOr<std::unique_ptr<ShareKernels>> Open(
      uint64_t num_vertices, uint64_t begin, uint64_t end,
      const KernelOptions& options);
  virtual ~ShareKernels() = default;

  // The share's adjacency in `direction`: kIn for PageRankPull and
  // BfsBottomUp, kOut for BfsTopDown. Replaces an earlier upload.
  virtual absl::Status Upload(Direction direction, const CsrChunks& csr) = 0;
  absl::Status Upload(Direction direction, const ShareCsr& csr) {
    if (csr.begin != begin_ || csr.end != end_) {
      return absl::InvalidArgumentError("upload: the CSR is another share's");
    }
    return Upload(direction, ChunksOf(csr));
  }

  // sums_share[i] = sum of contrib_all[u] over the in-neighbours u of
  // vertex begin + i (contrib_all: every vertex's rank / out-degree).
  virtual absl::Status PageRankPull(std::span<const float> contrib_all,
                                    std::span<float> sums_share) = 0;
  virtual absl::Status PageRankPull(std::span<const double> contrib_all,
                                    std::span<double> sums_share) = 0;

  // One bottom-up step: every vertex begin + i with parent_share[i] < 0
  // (unvisited) that has an in-neighbour in frontier_bitmap_all (a bit a
  // vertex) takes the first such in-neighbour as its parent. *awakened
  // (if given) is the number of vertices that found one.
  virtual absl::Status BfsBottomUp(
      std::span<const uint64_t> frontier_bitmap_all,
      std::span<int64_t> parent_share, uint64_t* awakened) = 0;

  // One top-down step: the out-neighbours of frontier_in_share (global ids
  // in [begin, end)) that visited_bitmap_all does not hold, each once,
  // with a frontier vertex that has an edge to it, appended to
  // *discovered as (vertex, parent) in no particular order.
  virtual absl::Status BfsTopDown(
      std::span<const uint32_t> frontier_in_share,
      std::span<const uint64_t> visited_bitmap_all,
      std::vector<std::pair<uint32_t, uint32_t>>* discovered) = 0;

  virtual KernelTimes times() const = 0;

  uint64_t begin() const { return begin_; }
  uint64_t end() const { return end_; }

 protected:
  ShareKernels(uint64_t begin, uint64_t end) : begin_(begin), end_(end) {}

  const uint64_t begin_, end_;
};

}  // namespace dmg::gpu

#endif  // DMG_GPU_KERNELS_H_

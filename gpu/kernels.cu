// ShareKernels with CUDA: the kernels (thin loops around kernel_bodies.h)
// and the host class that owns the share's device memory, the pinned
// staging and the streams. Every CUDA resource is held by a unique_ptr
// with the matching release; every CUDA call's failure becomes an
// absl::Status with the runtime's words.
//
// The one CUDA translation unit of the share kernels (each costs ~25 s to
// compile for sm_80 and sm_90): the host class lives here too, so nothing
// outside needs CUDA's headers.
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "gpu/cuda_util.h"
#include "gpu/kernel_bodies.h"
#include "gpu/kernels.h"

namespace dmg::gpu {
namespace {

using bodies::kGroup;
using bodies::kWarpFrom;

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kBlockThreads = 256;  // 8 warps
constexpr uint32_t kWarpsPerBlock = kBlockThreads / 32;

// ---- device side ---------------------------------------------------------

// The share's adjacency in one direction.
struct CsrView {
  const uint64_t* offsets;  // n + 1
  const uint32_t* targets;  // global ids
  uint64_t n;               // local vertices
};

// Who takes which group: kPlain (numa false) a grid-stride loop; kNuma
// chunks from per-node queues (kernel_bodies.h, TakeChunk).
struct ScheduleView {
  bool numa;
  int nodes;
  const uint32_t* chunk_begin;
  const uint32_t* node_first;
  uint32_t* counters;  // nodes, zeroed before each launch
  const int* sm_node;
  uint32_t sm_node_size;
};

__device__ __forceinline__ uint32_t SmId() {
  uint32_t id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  return id;
}

struct DeviceCounters {
  // Volatile: a counter other blocks move; a stale value only costs an
  // atomic that finds the queue drained.
  __device__ uint32_t Load(uint32_t* p) const {
    return *static_cast<volatile uint32_t*>(p);
  }
  __device__ uint32_t FetchAdd(uint32_t* p) const { return atomicAdd(p, 1u); }
};

// Calls group(g) with every warp of the grid for the groups of `size`
// indices. group must be called by all 32 lanes together (it uses warp
// votes and shuffles): g depends only on the warp, never on the lane.
template <typename Group>
__device__ void ForEachGroup(uint64_t size, const ScheduleView& s,
                             Group& group) {
  const uint32_t warp = threadIdx.x / 32;
  if (!s.numa) {
    const uint64_t groups = (size + kGroup - 1) / kGroup;
    const uint64_t stride = uint64_t{gridDim.x} * kWarpsPerBlock;
    for (uint64_t g = uint64_t{blockIdx.x} * kWarpsPerBlock + warp; g < groups;
         g += stride) {
      group(g);
    }
    return;
  }
  // Persistent block: thread 0 takes a chunk for the block, whose warps
  // share its groups; the block's home is its SM's L2 partition.
  __shared__ int64_t chunk;
  const int home = bodies::HomeNode(SmId(), s.sm_node, s.sm_node_size, s.nodes);
  for (;;) {
    if (threadIdx.x == 0) {
      DeviceCounters ops;
      chunk = bodies::TakeChunk(home, s.nodes, s.node_first, s.counters, ops);
    }
    __syncthreads();
    const int64_t c = chunk;
    if (c < 0) return;  // the same for the whole block
    const uint64_t end = bodies::EndGroup(s.chunk_begin, c);
    for (uint64_t g = bodies::FirstGroup(s.chunk_begin, c) + warp; g < end;
         g += kWarpsPerBlock) {
      group(g);
    }
    __syncthreads();  // all have read `chunk` before it is taken again
  }
}

template <typename T>
struct LdgLoad {
  const T* contrib;
  // Read-only for the kernel's life: the non-coherent cache path.
  __device__ T operator()(uint32_t u) const { return __ldg(contrib + u); }
};

// Lanes with a short list sum it alone; then the warp sums each long list
// together, 32 consecutive targets a step (coalesced), and adds the lanes'
// parts with a butterfly (WarpTreeSum's order).
template <typename T>
__global__ void __launch_bounds__(kBlockThreads)
    PullKernel(CsrView csr, ScheduleView s, const T* contrib, T* sums) {
  const uint32_t lane = threadIdx.x & 31;
  const LdgLoad<T> load{contrib};
  auto group = [&](uint64_t g) {
    const uint64_t i = g * kGroup + lane;
    uint64_t lo = 0, hi = 0;
    if (i < csr.n) {
      lo = csr.offsets[i];
      hi = csr.offsets[i + 1];
    }
    const bool alone = i < csr.n && hi - lo < kWarpFrom;
    if (alone) sums[i] = bodies::PullSum<T>(csr.targets, lo, hi, load);
    for (unsigned big = __ballot_sync(kFullMask, i < csr.n && !alone); big != 0;
         big &= big - 1) {
      const int owner = __ffs(big) - 1;
      const uint64_t blo = __shfl_sync(kFullMask, lo, owner);
      const uint64_t bhi = __shfl_sync(kFullMask, hi, owner);
      T part =
          bodies::PullLanePart<T>(csr.targets, blo, bhi, lane, kGroup, load);
      for (int offset = kGroup / 2; offset > 0; offset /= 2) {
        part += __shfl_xor_sync(kFullMask, part, offset);
      }
      if (lane == 0) sums[g * kGroup + owner] = part;
    }
  };
  ForEachGroup(csr.n, s, group);
}

// Each unvisited vertex is its own lane's: the parent is written without
// an atomic (no other thread writes it). Long lists: the warp tests 32
// in-neighbours a step and stops at the first window with a hit, taking
// its lowest lane, so the parent is the one FirstParent finds.
__global__ void __launch_bounds__(kBlockThreads)
    BottomUpKernel(CsrView csr, ScheduleView s, const uint64_t* frontier,
                   int64_t* parent, unsigned long long* awakened) {
  const uint32_t lane = threadIdx.x & 31;
  auto group = [&](uint64_t g) {
    const uint64_t i = g * kGroup + lane;
    const bool open = i < csr.n && parent[i] < 0;
    uint64_t lo = 0, hi = 0;
    if (open) {
      lo = csr.offsets[i];
      hi = csr.offsets[i + 1];
    }
    bool found = false;
    if (open && hi - lo < kWarpFrom) {
      const int64_t p = bodies::FirstParent(csr.targets, lo, hi, frontier);
      if (p >= 0) {
        parent[i] = p;
        found = true;
      }
    }
    for (unsigned big = __ballot_sync(kFullMask, open && hi - lo >= kWarpFrom);
         big != 0; big &= big - 1) {
      const int owner = __ffs(big) - 1;
      const uint64_t blo = __shfl_sync(kFullMask, lo, owner);
      const uint64_t bhi = __shfl_sync(kFullMask, hi, owner);
      for (uint64_t w = blo; w < bhi; w += kGroup) {
        const unsigned hit = __ballot_sync(
            kFullMask, bodies::LaneHit(csr.targets, w, bhi, lane, frontier));
        if (hit != 0) {
          if (lane == static_cast<uint32_t>(owner)) {
            parent[i] = csr.targets[w + __ffs(hit) - 1];
            found = true;
          }
          break;
        }
      }
    }
    const int woken = __popc(__ballot_sync(kFullMask, found));
    if (lane == 0 && woken != 0) {
      atomicAdd(awakened, static_cast<unsigned long long>(woken));
    }
  };
  ForEachGroup(csr.n, s, group);
}

// A vertex is claimed by setting its bit in the call's copy of the
// visited bitmap: the one atomicOr that finds the bit clear wins it. A
// plain read first skips the atomic for vertices visited before.
struct DeviceClaim {
  unsigned long long* bits;
  __device__ bool operator()(uint32_t v) const {
    const unsigned long long bit = 1ull << (v & 63);
    if ((bits[v >> 6] & bit) != 0) return false;
    return bodies::WonClaim(atomicOr(bits + (v >> 6), bit), bit);
  }
};

struct DeviceEmit {
  uint32_t* pairs;  // (vertex, parent) at 2k, 2k + 1
  unsigned long long* count;
  unsigned long long capacity;  // the frontier's edges: never reached
  // The lanes that emit together take their slots with one atomic: a
  // single counter for the whole grid would otherwise take one per vertex.
  __device__ void operator()(uint32_t v, uint32_t u) const {
    namespace cg = cooperative_groups;
    const cg::coalesced_group active = cg::coalesced_threads();
    unsigned long long base = 0;
    if (active.thread_rank() == 0) {
      base = atomicAdd(count, static_cast<unsigned long long>(active.size()));
    }
    const unsigned long long at = active.shfl(base, 0) + active.thread_rank();
    if (at < capacity) {
      pairs[2 * at] = v;
      pairs[2 * at + 1] = u;
    }
  }
};

// frontier: the frontier's local ids, sorted (the NUMA plan's parts are
// runs of it). A lane expands a short list alone, the warp a long one.
__global__ void __launch_bounds__(kBlockThreads)
    TopDownKernel(CsrView csr, ScheduleView s, uint32_t begin,
                  const uint32_t* frontier, uint64_t frontier_size,
                  DeviceClaim claim, DeviceEmit emit) {
  const uint32_t lane = threadIdx.x & 31;
  auto group = [&](uint64_t g) {
    const uint64_t j = g * kGroup + lane;
    const bool open = j < frontier_size;
    uint64_t lo = 0, hi = 0;
    uint32_t u = 0;
    if (open) {
      const uint32_t i = frontier[j];
      u = begin + i;
      lo = csr.offsets[i];
      hi = csr.offsets[i + 1];
    }
    if (open && hi - lo < kWarpFrom) {
      bodies::ExpandTopDown(csr.targets, lo, hi, 0, 1, u, claim, emit);
    }
    for (unsigned big = __ballot_sync(kFullMask, open && hi - lo >= kWarpFrom);
         big != 0; big &= big - 1) {
      const int owner = __ffs(big) - 1;
      const uint64_t blo = __shfl_sync(kFullMask, lo, owner);
      const uint64_t bhi = __shfl_sync(kFullMask, hi, owner);
      const uint32_t bu = __shfl_sync(kFullMask, u, owner);
      bodies::ExpandTopDown(csr.targets, blo, bhi, lane, kGroup, bu, claim,
                            emit);
    }
  };
  ForEachGroup(frontier_size, s, group);
}

// ---- host side: errors and owned resources -------------------------------

// A device array that grows (contents not kept) to the largest size asked.
template <typename T>
class DeviceArray {
 public:
  absl::Status Reserve(uint64_t count, absl::string_view what) {
    if (count <= capacity_ && ptr_ != nullptr) return absl::OkStatus();
    ptr_.reset();
    capacity_ = 0;
    void* p = nullptr;
    const uint64_t bytes = std::max<uint64_t>(count, 1) * sizeof(T);
    DMG_RETURN_IF_ERROR(
        CudaCheck(cudaMalloc(&p, bytes),
              absl::StrCat("cudaMalloc of ", bytes, " bytes (", what, ")")));
    ptr_.reset(static_cast<T*>(p));
    capacity_ = count;
    return absl::OkStatus();
  }
  T* get() const { return ptr_.get(); }

 private:
  DeviceBuffer<T> ptr_;
  uint64_t capacity_ = 0;
};

absl::StatusOr<Stream> CreateStream() {
  cudaStream_t s = nullptr;
  DMG_RETURN_IF_ERROR(
      CudaCheck(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking),
            "cudaStreamCreateWithFlags"));
  return Stream(s);
}

absl::StatusOr<Event> CreateEvent(bool timing) {
  cudaEvent_t e = nullptr;
  DMG_RETURN_IF_ERROR(
      CudaCheck(cudaEventCreateWithFlags(
                &e, timing ? cudaEventDefault : cudaEventDisableTiming),
            "cudaEventCreateWithFlags"));
  return Event(e);
}

// A chunk plan on the device.
struct DevicePlan {
  DeviceArray<uint32_t> chunk_begin, node_first;
};

// One direction's adjacency on the device, with what the host keeps of it.
struct DeviceCsr {
  bool loaded = false;
  std::vector<uint64_t> offsets;  // host copy: top-down's output bound
  std::vector<uint64_t> parts;    // kNuma: SplitByEdges's cuts
  DeviceArray<uint64_t> d_offsets;
  DeviceArray<uint32_t> d_targets;
  DevicePlan plan;
};

using Fill =
    std::function<absl::Status(uint64_t offset, std::span<std::byte> out)>;
using Drain =
    std::function<void(uint64_t offset, std::span<const std::byte> in)>;

class CudaShareKernels final : public ShareKernels {
 public:
  CudaShareKernels(uint64_t num_vertices, uint64_t begin, uint64_t end,
                   const KernelOptions& options)
      : ShareKernels(begin, end),
        n_all_(num_vertices),
        options_(options),
        numa_(options.schedule == Schedule::kNuma) {}

  absl::Status Init();

  using ShareKernels::Upload;
  absl::Status Upload(Direction direction, const CsrChunks& csr) override;
  absl::Status PageRankPull(std::span<const float> contrib_all,
                            std::span<float> sums_share) override {
    return Pull(contrib_all, sums_share, contrib_f_, sums_f_);
  }
  absl::Status PageRankPull(std::span<const double> contrib_all,
                            std::span<double> sums_share) override {
    return Pull(contrib_all, sums_share, contrib_d_, sums_d_);
  }
  absl::Status BfsBottomUp(std::span<const uint64_t> frontier_bitmap_all,
                           std::span<int64_t> parent_share,
                           uint64_t* awakened) override;
  absl::Status BfsTopDown(
      std::span<const uint32_t> frontier_in_share,
      std::span<const uint64_t> visited_bitmap_all,
      std::vector<std::pair<uint32_t, uint32_t>>* discovered) override;
  KernelTimes times() const override { return times_; }

 private:
  uint64_t share_size() const { return end_ - begin_; }
  int nodes() const { return numa_ ? std::max(options_.nodes, 1) : 1; }
  uint64_t bitmap_words() const { return (n_all_ + 63) / 64; }

  // Host <-> device through the two pinned halves, one filled or drained
  // on the host while the other's copy runs.
  absl::Status StagedToDevice(void* dst, uint64_t bytes, const Fill& fill);
  absl::Status StagedFromDevice(const void* src, uint64_t bytes,
                                const Drain& drain);
  absl::Status ToDevice(void* dst, const void* src, uint64_t bytes);
  absl::Status FromDevice(void* dst, const void* src, uint64_t bytes);

  absl::Status UploadPlan(const bodies::ChunkPlan& plan, DevicePlan& dst);
  ScheduleView View(const DevicePlan& plan) const;
  absl::Status BeginLaunch();
  absl::Status EndLaunch(absl::string_view kernel);
  template <typename Kernel>
  absl::StatusOr<int> Grid(Kernel kernel, uint64_t groups) const;
  uint64_t ChunkCost(uint64_t total_cost) const;

  template <typename T>
  absl::Status Pull(std::span<const T> contrib, std::span<T> sums,
                    DeviceArray<T>& d_contrib, DeviceArray<T>& d_sums);

  const uint64_t n_all_;
  const KernelOptions options_;
  const bool numa_;
  int sms_ = 0;
  int max_blocks_per_sm_ = 0;
  // Pinned staging, two halves of half_bytes_; copies of half k run on
  // streams_[k] and end with copied_[k]. Kernels run on streams_[0].
  PinnedBuffer<std::byte> staging_;
  uint64_t half_bytes_ = 0;
  Stream streams_[2];
  Event copied_[2];
  Event kernel_start_, kernel_stop_;
  DeviceCsr csr_[2];  // by Direction
  DeviceArray<int> sm_node_;
  DeviceArray<uint32_t> counters_;
  DeviceArray<float> contrib_f_, sums_f_;
  DeviceArray<double> contrib_d_, sums_d_;
  DeviceArray<uint64_t> bitmap_;
  DeviceArray<int64_t> parent_;
  DeviceArray<uint32_t> frontier_, pairs_;
  DeviceArray<unsigned long long> count_;
  DevicePlan frontier_plan_;
  KernelTimes times_;
};

absl::Status CudaShareKernels::Init() {
  DMG_RETURN_IF_ERROR(CudaCheck(cudaSetDevice(options_.device), "cudaSetDevice"));
  DMG_RETURN_IF_ERROR(
      CudaCheck(cudaDeviceGetAttribute(&sms_, cudaDevAttrMultiProcessorCount,
                                   options_.device),
            "cudaDeviceGetAttribute(MultiProcessorCount)"));
  DMG_RETURN_IF_ERROR(
      CudaCheck(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                &max_blocks_per_sm_, PullKernel<double>, kBlockThreads, 0),
            "cudaOccupancyMaxActiveBlocksPerMultiprocessor"));
  max_blocks_per_sm_ = std::max(max_blocks_per_sm_, 1);
  // Halves of whole 8-byte words, at least 64 KiB each.
  half_bytes_ =
      std::max<uint64_t>(options_.staging_bytes / 2, 64 << 10) / 8 * 8;
  void* pinned = nullptr;
  DMG_RETURN_IF_ERROR(
      CudaCheck(cudaHostAlloc(&pinned, 2 * half_bytes_, cudaHostAllocDefault),
            absl::StrCat("cudaHostAlloc of ", 2 * half_bytes_, " bytes")));
  staging_.reset(static_cast<std::byte*>(pinned));
  for (int k = 0; k < 2; ++k) {
    DMG_ASSIGN_OR_RETURN(streams_[k], CreateStream());
    DMG_ASSIGN_OR_RETURN(copied_[k], CreateEvent(/*timing=*/false));
  }
  DMG_ASSIGN_OR_RETURN(kernel_start_, CreateEvent(/*timing=*/true));
  DMG_ASSIGN_OR_RETURN(kernel_stop_, CreateEvent(/*timing=*/true));
  DMG_RETURN_IF_ERROR(counters_.Reserve(nodes(), "queue counters"));
  DMG_RETURN_IF_ERROR(count_.Reserve(1, "counter"));
  if (numa_ && !options_.sm_node.empty()) {
    DMG_RETURN_IF_ERROR(sm_node_.Reserve(options_.sm_node.size(), "sm_node"));
    DMG_RETURN_IF_ERROR(ToDevice(sm_node_.get(), options_.sm_node.data(),
                                 options_.sm_node.size() * sizeof(int)));
  }
  return absl::OkStatus();
}

// The fill of half k (the caller's fetch, or a memcpy) runs while half
// 1 - k's copy is in flight; a half is refilled once its last copy ended.
// Whatever happens, both streams are drained before returning, so no copy
// reads the staging after an error.
absl::Status CudaShareKernels::StagedToDevice(void* dst, uint64_t bytes,
                                              const Fill& fill) {
  const auto start = std::chrono::steady_clock::now();
  absl::Status status;
  int k = 0;
  for (uint64_t offset = 0; offset < bytes && status.ok();
       offset += half_bytes_, k ^= 1) {
    const uint64_t len = std::min(half_bytes_, bytes - offset);
    std::byte* half = staging_.get() + k * half_bytes_;
    status.Update(
        CudaCheck(cudaEventSynchronize(copied_[k].get()), "cudaEventSynchronize"));
    if (status.ok()) status.Update(fill(offset, {half, len}));
    if (status.ok()) {
      status.Update(
          CudaCheck(cudaMemcpyAsync(static_cast<std::byte*>(dst) + offset, half,
                                len, cudaMemcpyHostToDevice, streams_[k].get()),
                "cudaMemcpyAsync to the device"));
    }
    if (status.ok()) {
      status.Update(CudaCheck(cudaEventRecord(copied_[k].get(), streams_[k].get()),
                          "cudaEventRecord"));
    }
  }
  for (const Stream& s : streams_) {
    status.Update(CudaCheck(cudaStreamSynchronize(s.get()),
                        "cudaStreamSynchronize (copies)"));
  }
  times_.copy_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  if (status.ok()) times_.bytes_to_device += bytes;
  return status;
}

// Piece p is copied into half p % 2 while piece p - 1 is drained from the
// other half.
absl::Status CudaShareKernels::StagedFromDevice(const void* src, uint64_t bytes,
                                                const Drain& drain) {
  const auto start = std::chrono::steady_clock::now();
  const uint64_t pieces = (bytes + half_bytes_ - 1) / half_bytes_;
  auto piece_len = [&](uint64_t p) {
    return std::min(half_bytes_, bytes - p * half_bytes_);
  };
  auto drain_piece = [&](uint64_t p) -> absl::Status {
    const int k = static_cast<int>(p % 2);
    DMG_RETURN_IF_ERROR(
        CudaCheck(cudaEventSynchronize(copied_[k].get()), "cudaEventSynchronize"));
    drain(p * half_bytes_, {staging_.get() + k * half_bytes_, piece_len(p)});
    return absl::OkStatus();
  };
  absl::Status status;
  for (uint64_t p = 0; p < pieces && status.ok(); ++p) {
    const int k = static_cast<int>(p % 2);
    status.Update(CudaCheck(
        cudaMemcpyAsync(staging_.get() + k * half_bytes_,
                        static_cast<const std::byte*>(src) + p * half_bytes_,
                        piece_len(p), cudaMemcpyDeviceToHost,
                        streams_[k].get()),
        "cudaMemcpyAsync from the device"));
    if (status.ok()) {
      status.Update(CudaCheck(cudaEventRecord(copied_[k].get(), streams_[k].get()),
                          "cudaEventRecord"));
    }
    if (status.ok() && p > 0) status.Update(drain_piece(p - 1));
  }
  if (status.ok() && pieces > 0) status.Update(drain_piece(pieces - 1));
  for (const Stream& s : streams_) {
    status.Update(CudaCheck(cudaStreamSynchronize(s.get()),
                        "cudaStreamSynchronize (copies)"));
  }
  times_.copy_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  if (status.ok()) times_.bytes_from_device += bytes;
  return status;
}

absl::Status CudaShareKernels::ToDevice(void* dst, const void* src,
                                        uint64_t bytes) {
  return StagedToDevice(
      dst, bytes, [src](uint64_t offset, std::span<std::byte> out) {
        std::memcpy(out.data(), static_cast<const std::byte*>(src) + offset,
                    out.size());
        return absl::OkStatus();
      });
}

absl::Status CudaShareKernels::FromDevice(void* dst, const void* src,
                                          uint64_t bytes) {
  return StagedFromDevice(
      src, bytes, [dst](uint64_t offset, std::span<const std::byte> in) {
        std::memcpy(static_cast<std::byte*>(dst) + offset, in.data(),
                    in.size());
      });
}

absl::Status CudaShareKernels::UploadPlan(const bodies::ChunkPlan& plan,
                                          DevicePlan& dst) {
  DMG_RETURN_IF_ERROR(
      dst.chunk_begin.Reserve(plan.chunk_begin.size(), "chunk plan"));
  DMG_RETURN_IF_ERROR(
      dst.node_first.Reserve(plan.node_first.size(), "chunk plan"));
  DMG_RETURN_IF_ERROR(ToDevice(dst.chunk_begin.get(), plan.chunk_begin.data(),
                               plan.chunk_begin.size() * sizeof(uint32_t)));
  return ToDevice(dst.node_first.get(), plan.node_first.data(),
                  plan.node_first.size() * sizeof(uint32_t));
}

ScheduleView CudaShareKernels::View(const DevicePlan& plan) const {
  return ScheduleView{
      numa_,
      nodes(),
      plan.chunk_begin.get(),
      plan.node_first.get(),
      counters_.get(),
      sm_node_.get(),
      numa_ ? static_cast<uint32_t>(options_.sm_node.size()) : 0u};
}

// A chunk's cost (edges + vertices): about four chunks a persistent block,
// so that blocks that finish early find work, but not so small that the
// queues' atomics show.
uint64_t CudaShareKernels::ChunkCost(uint64_t total_cost) const {
  const uint64_t blocks = uint64_t(sms_) * max_blocks_per_sm_;
  return std::max<uint64_t>(total_cost / (4 * blocks), 4096);
}

// Blocks for a launch over `groups` warp groups: kNuma, the persistent
// grid (every resident block, or blocks_per_sm an SM); kPlain, no more
// than there are groups for.
template <typename Kernel>
absl::StatusOr<int> CudaShareKernels::Grid(Kernel kernel,
                                           uint64_t groups) const {
  int per_sm = 0;
  DMG_RETURN_IF_ERROR(CudaCheck(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                                &per_sm, kernel, kBlockThreads, 0),
                            "cudaOccupancyMaxActiveBlocksPerMultiprocessor"));
  if (numa_ && options_.blocks_per_sm > 0) {
    per_sm = std::min(per_sm, options_.blocks_per_sm);
  }
  const uint64_t resident = uint64_t(std::max(per_sm, 1)) * sms_;
  if (numa_) return static_cast<int>(resident);
  const uint64_t wanted = (groups + kWarpsPerBlock - 1) / kWarpsPerBlock;
  return static_cast<int>(std::max<uint64_t>(1, std::min(wanted, resident)));
}

absl::Status CudaShareKernels::BeginLaunch() {
  if (numa_) {
    DMG_RETURN_IF_ERROR(
        CudaCheck(cudaMemsetAsync(counters_.get(), 0, nodes() * sizeof(uint32_t),
                              streams_[0].get()),
              "cudaMemsetAsync (queue counters)"));
  }
  return CudaCheck(cudaEventRecord(kernel_start_.get(), streams_[0].get()),
               "cudaEventRecord");
}

absl::Status CudaShareKernels::EndLaunch(absl::string_view kernel) {
  DMG_RETURN_IF_ERROR(CudaCheck(cudaGetLastError(), kernel));
  DMG_RETURN_IF_ERROR(
      CudaCheck(cudaEventRecord(kernel_stop_.get(), streams_[0].get()),
            "cudaEventRecord"));
  DMG_RETURN_IF_ERROR(CudaCheck(cudaStreamSynchronize(streams_[0].get()), kernel));
  float ms = 0;
  DMG_RETURN_IF_ERROR(
      CudaCheck(cudaEventElapsedTime(&ms, kernel_start_.get(), kernel_stop_.get()),
            "cudaEventElapsedTime"));
  times_.kernel_seconds += ms / 1e3;
  ++times_.launches;
  return absl::OkStatus();
}

absl::Status CudaShareKernels::Upload(Direction direction,
                                      const CsrChunks& csr) {
  const uint64_t n = share_size();
  if (csr.offsets.size() != n + 1 || csr.offsets[0] != 0 || !csr.fill) {
    return absl::InvalidArgumentError(absl::StrCat(
        "upload: the share has ", n, " vertices, so ", n + 1,
        " offsets from 0 and a fill are needed; got ", csr.offsets.size()));
  }
  if (!std::is_sorted(csr.offsets.begin(), csr.offsets.end())) {
    return absl::InvalidArgumentError("upload: offsets decrease");
  }
  DMG_RETURN_IF_ERROR(CudaCheck(cudaSetDevice(options_.device), "cudaSetDevice"));
  DeviceCsr& c = csr_[static_cast<int>(direction)];
  c.loaded = false;
  const uint64_t edges = csr.offsets.back();
  DMG_RETURN_IF_ERROR(c.d_offsets.Reserve(n + 1, "offsets"));
  DMG_RETURN_IF_ERROR(c.d_targets.Reserve(edges, "targets"));
  DMG_RETURN_IF_ERROR(ToDevice(c.d_offsets.get(), csr.offsets.data(),
                               (n + 1) * sizeof(uint64_t)));
  // The caller's chunks, checked on the way: a target out of range would
  // be a wild read in every kernel.
  const uint64_t limit = n_all_;
  DMG_RETURN_IF_ERROR(StagedToDevice(
      c.d_targets.get(), edges * sizeof(uint32_t),
      [&](uint64_t offset, std::span<std::byte> out) -> absl::Status {
        std::span<uint32_t> targets(reinterpret_cast<uint32_t*>(out.data()),
                                    out.size() / sizeof(uint32_t));
        DMG_RETURN_IF_ERROR(csr.fill(offset / sizeof(uint32_t), targets));
        for (uint32_t t : targets) {
          if (t >= limit) {
            return absl::InvalidArgumentError(absl::StrCat(
                "upload: target ", t, " of a graph of ", limit, " vertices"));
          }
        }
        return absl::OkStatus();
      }));
  c.offsets.assign(csr.offsets.begin(), csr.offsets.end());
  if (numa_) {
    c.parts = bodies::SplitByEdges(c.offsets, nodes());
    const bodies::ChunkPlan plan = bodies::PlanChunks(
        c.offsets, c.parts, ChunkCost(bodies::CostBefore(c.offsets, n)));
    DMG_RETURN_IF_ERROR(UploadPlan(plan, c.plan));
  }
  c.loaded = true;
  return absl::OkStatus();
}

template <typename T>
absl::Status CudaShareKernels::Pull(std::span<const T> contrib,
                                    std::span<T> sums,
                                    DeviceArray<T>& d_contrib,
                                    DeviceArray<T>& d_sums) {
  const DeviceCsr& c = csr_[static_cast<int>(Direction::kIn)];
  if (!c.loaded) {
    return absl::FailedPreconditionError("pull: no in-edges uploaded");
  }
  if (contrib.size() != n_all_ || sums.size() != share_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pull: ", n_all_, " contributions and ", share_size(),
        " sums expected; got ", contrib.size(), " and ", sums.size()));
  }
  if (sums.empty()) return absl::OkStatus();
  DMG_RETURN_IF_ERROR(CudaCheck(cudaSetDevice(options_.device), "cudaSetDevice"));
  DMG_RETURN_IF_ERROR(d_contrib.Reserve(n_all_, "contributions"));
  DMG_RETURN_IF_ERROR(d_sums.Reserve(share_size(), "sums"));
  DMG_RETURN_IF_ERROR(
      ToDevice(d_contrib.get(), contrib.data(), contrib.size_bytes()));
  const CsrView csr{c.d_offsets.get(), c.d_targets.get(), share_size()};
  DMG_ASSIGN_OR_RETURN(
      const int grid,
      Grid(PullKernel<T>, (share_size() + kGroup - 1) / kGroup));
  DMG_RETURN_IF_ERROR(BeginLaunch());
  PullKernel<T><<<grid, kBlockThreads, 0, streams_[0].get()>>>(
      csr, View(c.plan), d_contrib.get(), d_sums.get());
  DMG_RETURN_IF_ERROR(EndLaunch("PullKernel"));
  return FromDevice(sums.data(), d_sums.get(), sums.size_bytes());
}

absl::Status CudaShareKernels::BfsBottomUp(
    std::span<const uint64_t> frontier_bitmap_all,
    std::span<int64_t> parent_share, uint64_t* awakened) {
  const DeviceCsr& c = csr_[static_cast<int>(Direction::kIn)];
  if (!c.loaded) {
    return absl::FailedPreconditionError("bottom-up: no in-edges uploaded");
  }
  if (frontier_bitmap_all.size() != bitmap_words() ||
      parent_share.size() != share_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("bottom-up: ", bitmap_words(), " bitmap words and ",
                     share_size(), " parents expected; got ",
                     frontier_bitmap_all.size(), " and ", parent_share.size()));
  }
  if (awakened != nullptr) *awakened = 0;
  if (parent_share.empty()) return absl::OkStatus();
  DMG_RETURN_IF_ERROR(CudaCheck(cudaSetDevice(options_.device), "cudaSetDevice"));
  DMG_RETURN_IF_ERROR(bitmap_.Reserve(bitmap_words(), "frontier bitmap"));
  DMG_RETURN_IF_ERROR(parent_.Reserve(share_size(), "parents"));
  DMG_RETURN_IF_ERROR(ToDevice(bitmap_.get(), frontier_bitmap_all.data(),
                               frontier_bitmap_all.size_bytes()));
  DMG_RETURN_IF_ERROR(
      ToDevice(parent_.get(), parent_share.data(), parent_share.size_bytes()));
  DMG_RETURN_IF_ERROR(
      CudaCheck(cudaMemsetAsync(count_.get(), 0, sizeof(unsigned long long),
                            streams_[0].get()),
            "cudaMemsetAsync (awakened)"));
  const CsrView csr{c.d_offsets.get(), c.d_targets.get(), share_size()};
  DMG_ASSIGN_OR_RETURN(
      const int grid,
      Grid(BottomUpKernel, (share_size() + kGroup - 1) / kGroup));
  DMG_RETURN_IF_ERROR(BeginLaunch());
  BottomUpKernel<<<grid, kBlockThreads, 0, streams_[0].get()>>>(
      csr, View(c.plan), bitmap_.get(), parent_.get(), count_.get());
  DMG_RETURN_IF_ERROR(EndLaunch("BottomUpKernel"));
  unsigned long long woken = 0;
  DMG_RETURN_IF_ERROR(FromDevice(&woken, count_.get(), sizeof(woken)));
  if (awakened != nullptr) *awakened = woken;
  return FromDevice(parent_share.data(), parent_.get(),
                    parent_share.size_bytes());
}

absl::Status CudaShareKernels::BfsTopDown(
    std::span<const uint32_t> frontier_in_share,
    std::span<const uint64_t> visited_bitmap_all,
    std::vector<std::pair<uint32_t, uint32_t>>* discovered) {
  const DeviceCsr& c = csr_[static_cast<int>(Direction::kOut)];
  if (!c.loaded) {
    return absl::FailedPreconditionError("top-down: no out-edges uploaded");
  }
  if (visited_bitmap_all.size() != bitmap_words() || discovered == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("top-down: ", bitmap_words(), " bitmap words expected; ",
                     "got ", visited_bitmap_all.size()));
  }
  // Local ids, sorted: the NUMA plan's parts are runs of the list, and
  // neighbouring lanes read neighbouring offsets. The bound on the output
  // is the frontier's edges.
  std::vector<uint32_t> local;
  local.reserve(frontier_in_share.size());
  uint64_t edges = 0;
  for (uint32_t u : frontier_in_share) {
    if (u < begin_ || u >= end_) {
      return absl::InvalidArgumentError(
          absl::StrCat("top-down: frontier vertex ", u,
                       " is not in the share [", begin_, ", ", end_, ")"));
    }
    local.push_back(static_cast<uint32_t>(u - begin_));
    edges += c.offsets[u - begin_ + 1] - c.offsets[u - begin_];
  }
  if (edges == 0) return absl::OkStatus();
  std::sort(local.begin(), local.end());
  DMG_RETURN_IF_ERROR(CudaCheck(cudaSetDevice(options_.device), "cudaSetDevice"));
  if (numa_) {
    const uint64_t blocks = uint64_t(sms_) * max_blocks_per_sm_;
    const auto entries = static_cast<uint32_t>(
        std::max<uint64_t>(kGroup, local.size() / (4 * blocks)));
    DMG_RETURN_IF_ERROR(UploadPlan(
        bodies::PlanFrontier(local, c.parts, entries), frontier_plan_));
  }
  DMG_RETURN_IF_ERROR(frontier_.Reserve(local.size(), "frontier"));
  DMG_RETURN_IF_ERROR(bitmap_.Reserve(bitmap_words(), "visited bitmap"));
  DMG_RETURN_IF_ERROR(pairs_.Reserve(2 * edges, "discovered pairs"));
  DMG_RETURN_IF_ERROR(
      ToDevice(frontier_.get(), local.data(), local.size() * sizeof(uint32_t)));
  DMG_RETURN_IF_ERROR(ToDevice(bitmap_.get(), visited_bitmap_all.data(),
                               visited_bitmap_all.size_bytes()));
  DMG_RETURN_IF_ERROR(
      CudaCheck(cudaMemsetAsync(count_.get(), 0, sizeof(unsigned long long),
                            streams_[0].get()),
            "cudaMemsetAsync (discovered)"));
  const CsrView csr{c.d_offsets.get(), c.d_targets.get(), share_size()};
  const DeviceClaim claim{reinterpret_cast<unsigned long long*>(bitmap_.get())};
  const DeviceEmit emit{pairs_.get(), count_.get(), edges};
  DMG_ASSIGN_OR_RETURN(
      const int grid,
      Grid(TopDownKernel, (local.size() + kGroup - 1) / kGroup));
  DMG_RETURN_IF_ERROR(BeginLaunch());
  TopDownKernel<<<grid, kBlockThreads, 0, streams_[0].get()>>>(
      csr, View(frontier_plan_), static_cast<uint32_t>(begin_), frontier_.get(),
      local.size(), claim, emit);
  DMG_RETURN_IF_ERROR(EndLaunch("TopDownKernel"));
  unsigned long long found = 0;
  DMG_RETURN_IF_ERROR(FromDevice(&found, count_.get(), sizeof(found)));
  if (found > edges) {
    return absl::InternalError("top-down: more discoveries than edges");
  }
  const size_t old = discovered->size();
  discovered->resize(old + found);
  static_assert(sizeof(std::pair<uint32_t, uint32_t>) == 2 * sizeof(uint32_t));
  return FromDevice(discovered->data() + old, pairs_.get(),
                    found * 2 * sizeof(uint32_t));
}

}  // namespace

absl::StatusOr<std::unique_ptr<ShareKernels>> ShareKernels::Open(
    uint64_t num_vertices, uint64_t begin, uint64_t end,
    const KernelOptions& options) {
  if (num_vertices > UINT32_MAX || begin > end || end > num_vertices) {
    return absl::InvalidArgumentError(
        absl::StrCat("share [", begin, ", ", end, ") of a graph of ",
                     num_vertices, " vertices (32-bit ids)"));
  }
  if (options.schedule == Schedule::kNuma && options.nodes < 1) {
    return absl::InvalidArgumentError("kNuma needs nodes >= 1");
  }
  // Without a driver the count stays as it was: it must start at 0.
  int count = 0;
  if (cudaError_t err = cudaGetDeviceCount(&count);
      err != cudaSuccess || count == 0) {
    cudaGetLastError();
    return absl::FailedPreconditionError(
        err != cudaSuccess ? absl::StrCat("no GPU: ", cudaGetErrorName(err),
                                          " (", cudaGetErrorString(err), ")")
                           : "no GPU: no CUDA device");
  }
  if (options.device < 0 || options.device >= count) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device ", options.device, " of ", count, " CUDA devices"));
  }
  auto kernels =
      std::make_unique<CudaShareKernels>(num_vertices, begin, end, options);
  DMG_RETURN_IF_ERROR(kernels->Init());
  return kernels;
}

}  // namespace dmg::gpu

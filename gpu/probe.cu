// The probe's kernels (probe_kernels.h; the method in
// ../shared/notes/gpu-numa.md). The host side is probe_cuda.cc.
#include <cstdint>

#include "gpu/probe_kernels.h"

namespace dmg::gpu::kernels {
namespace {

// The SM this thread runs on (not an index 0..sms-1 on every GPU: the
// host finds the ids in use with FindSmsKernel).
__device__ __forceinline__ unsigned SmId() {
  unsigned id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  return id;
}

// A load cached in L2 only (.cg): L1 would answer the repeated passes
// itself and hide the L2 partition the line comes from.
__device__ __forceinline__ uint64_t LoadCg(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.global.cg.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

// Keeps a block resident for about `us` microseconds without touching
// memory, so that the blocks of a launch are spread over the SMs and the
// probe's own traffic is the only traffic.
__device__ __forceinline__ void Linger(int us) {
#pragma unroll 1
  for (int i = 0; i < us; ++i) __nanosleep(1000);
}

__global__ void FindSmsKernel(unsigned* seen) {
  if (threadIdx.x != 0) return;
  const unsigned id = SmId();
  if (id < kMaxSmId) atomicOr(&seen[id / 32], 1u << (id % 32));
  Linger(50);
}

__global__ void FlushKernel(const uint64_t* buf, uint64_t words) {
  // One load per 32-byte sector (4 words): L2 allocates by sector.
  const uint64_t stride = uint64_t{gridDim.x} * blockDim.x * 4;
  uint64_t acc = 0;
  for (uint64_t i = (uint64_t{blockIdx.x} * blockDim.x + threadIdx.x) * 4;
       i < words; i += stride) {
    acc += LoadCg(buf + i);
  }
  // The loads are volatile asm and stay; the sum only keeps `acc` used.
  if (acc == 1) __nanosleep(0);
}

// Walks the chain `passes` times from `start`, timing each load. The
// loaded value is stored (to shared memory) before the second clock read,
// so the read waits for the load to complete. The chain holds addresses,
// not indices, so no arithmetic falls between the clock reads.
__device__ void Walk(const ChaseArgs& a, uint32_t* times) {
  __shared__ uint64_t sink;
  volatile uint64_t* vsink = &sink;
  for (int p = 0; p < a.passes; ++p) {
    uint64_t next = a.start;
    for (int i = 0; i < a.steps; ++i) {
      const long long t0 = clock64();
      next = LoadCg(reinterpret_cast<const uint64_t*>(next));
      *vsink = next;
      const long long t1 = clock64();
      times[i] = static_cast<uint32_t>(t1 - t0);
    }
    // Written out after the pass: global stores in the timed loop would
    // share the memory pipeline with the loads being timed.
    uint32_t* out = a.out + p * a.pass_stride;
    for (int i = 0; i < a.steps; ++i) out[i] = times[i];
  }
}

__global__ void ChaseKernel(ChaseArgs a) {
  extern __shared__ uint32_t times[];
  __shared__ int mine;
  const bool here = SmId() == a.target_sm;
  if (threadIdx.x == 0) {
    mine = here && atomicCAS(a.claim, 0u, 1u) == 0u;
  }
  __syncthreads();
  if (!mine) {
    // Blocks elsewhere stay a little, so the launch's blocks spread over
    // all SMs rather than queue behind finished ones.
    if (!here && threadIdx.x == 0) Linger(20);
    return;
  }
  if (threadIdx.x == 0) Walk(a, times);
}

}  // namespace

cudaError_t LaunchFindSms(unsigned* seen, int blocks, cudaStream_t stream) {
  FindSmsKernel<<<blocks, 32, 0, stream>>>(seen);
  return cudaGetLastError();
}

cudaError_t LaunchFlush(const uint64_t* buf, uint64_t words, int blocks,
                        cudaStream_t stream) {
  FlushKernel<<<blocks, 256, 0, stream>>>(buf, words);
  return cudaGetLastError();
}

cudaError_t LaunchChase(const ChaseArgs& args, int blocks,
                        cudaStream_t stream) {
  const size_t shared = sizeof(uint32_t) * static_cast<size_t>(args.steps);
  ChaseKernel<<<blocks, 32, shared, stream>>>(args);
  return cudaGetLastError();
}

}  // namespace dmg::gpu::kernels

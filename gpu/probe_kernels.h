// The probe's kernels (probe.cu), launched from host C++ (probe_cuda.cc)
// through these plain functions: the host logic (absl, glog) stays out of
// nvcc, and the kernels stay in one CUDA translation unit.
#ifndef DMG_GPU_PROBE_KERNELS_H_
#define DMG_GPU_PROBE_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace dmg::gpu::kernels {

// Bits for %smid values below this (the ids any GPU we target uses).
inline constexpr int kMaxSmId = 1024;

// Marks in `seen` (kMaxSmId / 32 words, zeroed by the caller) the %smid of
// every block of a launch of `blocks` blocks that stay resident a while,
// so that the block scheduler spreads them over all SMs.
cudaError_t LaunchFindSms(unsigned* seen, int blocks, cudaStream_t stream);

// Reads every 32-byte sector of `words` words of `buf` through L2, evicting
// what was there (the buffer is at least 4x the L2).
cudaError_t LaunchFlush(const uint64_t* buf, uint64_t words, int blocks,
                        cudaStream_t stream);

struct ChaseArgs {
  // The chain's first word: each word of the chain holds the device
  // address of the next (a cycle).
  uint64_t start = 0;
  int steps = 0;              // loads per pass (the chain's length)
  int passes = 0;             // walks of the chain, back to back
  unsigned target_sm = 0;     // the %smid that must run the walks
  unsigned* claim = nullptr;  // zeroed; set to 1 by the block that ran
  uint32_t* out = nullptr;    // pass p, step i: out[p * pass_stride + i]
  uint64_t pass_stride = 0;
};

// Launches `blocks` one-warp blocks; the first to find itself on
// args.target_sm claims the work (atomicCAS on args.claim) and its thread 0
// walks the chain, timing each dependent ld.global.cg with clock64(). A
// launch where no block landed there leaves *claim 0: launch again.
cudaError_t LaunchChase(const ChaseArgs& args, int blocks, cudaStream_t stream);

}  // namespace dmg::gpu::kernels

#endif  // DMG_GPU_PROBE_KERNELS_H_

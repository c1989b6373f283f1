// What every host file that calls the CUDA runtime shares (probe_cuda.cc,
// kernels.cu): a CUDA error as an absl::Status, and owners for device and
// pinned memory, streams and events, so nothing leaks on an early return.
// Only for files built with CUDA.
#ifndef DMG_GPU_CUDA_UTIL_H_
#define DMG_GPU_CUDA_UTIL_H_

#include <cuda_runtime_api.h>

#include <memory>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace dmg::gpu {

// OK, or Internal naming `what` and the runtime's error.
inline absl::Status CudaCheck(cudaError_t err, absl::string_view what) {
  if (err == cudaSuccess) return absl::OkStatus();
  // Reading the error clears it, so the next call does not report it again.
  cudaGetLastError();
  return absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorName(err),
                                          " (", cudaGetErrorString(err), ")"));
}

struct DeviceFree {
  void operator()(void* p) const noexcept { cudaFree(p); }
};
struct HostFree {
  void operator()(void* p) const noexcept { cudaFreeHost(p); }
};
struct StreamDestroy {
  void operator()(cudaStream_t s) const noexcept { cudaStreamDestroy(s); }
};
struct EventDestroy {
  void operator()(cudaEvent_t e) const noexcept { cudaEventDestroy(e); }
};
template <typename T>
using DeviceBuffer = std::unique_ptr<T[], DeviceFree>;
template <typename T>
using PinnedBuffer = std::unique_ptr<T[], HostFree>;
using Stream =
    std::unique_ptr<std::remove_pointer_t<cudaStream_t>, StreamDestroy>;
using Event = std::unique_ptr<std::remove_pointer_t<cudaEvent_t>, EventDestroy>;

}  // namespace dmg::gpu

#endif  // DMG_GPU_CUDA_UTIL_H_

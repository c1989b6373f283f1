// ShareKernels in a build without CUDA: nothing to open, so the caller
// runs the share on its CPU threads.
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpu/kernels.h"

namespace dmg::gpu {

absl::StatusOr<std::unique_ptr<ShareKernels>> ShareKernels::Open(
    uint64_t, uint64_t, uint64_t, const KernelOptions&) {
  return absl::FailedPreconditionError("this dmg was built without CUDA");
}

}  // namespace dmg::gpu

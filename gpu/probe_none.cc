// RunProbe for a build without CUDA: it says so (FailedPrecondition), so
// `dmg gpu-probe` and the tests need no #ifdef.
#include "absl/status/status.h"
#include "gpu/probe.h"

namespace dmg::gpu {

absl::StatusOr<ProbeMeasurement> RunProbe(int device,
                                          const ProbeOptions& options) {
  return absl::FailedPreconditionError(
      "this dmg was built without CUDA (nvcc not found, or DMG_CUDA=OFF)");
}

}  // namespace dmg::gpu

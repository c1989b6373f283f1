// ListDevices for a build without CUDA.
#include "gpu/device.h"

namespace dmg::gpu {

bool BuiltWithCuda() { return false; }

std::vector<DeviceInfo> ListDevices(std::string* why) {
  if (why != nullptr) {
    *why = "this dmg was built without CUDA (nvcc not found, or DMG_CUDA=OFF)";
  }
  return {};
}

}  // namespace dmg::gpu

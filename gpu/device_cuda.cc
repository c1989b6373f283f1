// ListDevices for a build with CUDA: the runtime's devices and the
// attributes the probe and the kernels size themselves by.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gpu/device.h"

namespace dmg::gpu {
namespace {

// One attribute, 0 when the runtime cannot say (a partial DeviceInfo is
// still worth listing: the name and memory come from the properties).
int Attribute(cudaDeviceAttr attr, int device) {
  int value = 0;
  if (cudaDeviceGetAttribute(&value, attr, device) != cudaSuccess) return 0;
  return value;
}

// Why the runtime found no device, in the words device.h promises.
std::string NoDeviceReason(cudaError_t err) {
  switch (err) {
    case cudaErrorInsufficientDriver:
      return "no NVIDIA driver (cudaErrorInsufficientDriver)";
    case cudaErrorNoDevice:
      return "no CUDA device";
    default:
      return absl::StrCat("cudaGetDeviceCount failed: ", cudaGetErrorName(err),
                          " (", cudaGetErrorString(err), ")");
  }
}

}  // namespace

bool BuiltWithCuda() { return true; }

std::vector<DeviceInfo> ListDevices(std::string* why) {
  // Without a driver cudaGetDeviceCount returns an error and leaves the
  // count as it was: it must start at 0.
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count <= 0) {
    if (why != nullptr) {
      *why = err != cudaSuccess ? NoDeviceReason(err) : "no CUDA device";
    }
    // A failed call leaves a sticky "last error": later calls start clean.
    cudaGetLastError();
    return {};
  }
  std::vector<DeviceInfo> devices;
  std::string last_error;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaError_t e = cudaGetDeviceProperties(&prop, i); e != cudaSuccess) {
      last_error = absl::StrCat("device ", i, ": ", cudaGetErrorString(e));
      continue;
    }
    DeviceInfo d;
    d.index = i;
    d.name = prop.name;
    d.major = prop.major;
    d.minor = prop.minor;
    d.memory_bytes = prop.totalGlobalMem;
    d.sms = Attribute(cudaDevAttrMultiProcessorCount, i);
    d.clock_khz = Attribute(cudaDevAttrClockRate, i);
    d.memory_clock_khz = Attribute(cudaDevAttrMemoryClockRate, i);
    d.memory_bus_bits = Attribute(cudaDevAttrGlobalMemoryBusWidth, i);
    d.l2_bytes = static_cast<uint64_t>(Attribute(cudaDevAttrL2CacheSize, i));
    devices.push_back(std::move(d));
  }
  if (devices.empty() && why != nullptr) *why = last_error;
  return devices;
}

}  // namespace dmg::gpu

// The GPUs this process can use. Host code, built with and without CUDA:
// without it (or without a driver or a device) the list is empty and says
// why, so callers (`dmg run --gpu`, `dmg gpu-probe`) need no #ifdef.
#ifndef DMG_GPU_DEVICE_H_
#define DMG_GPU_DEVICE_H_

#include <cstdint>
#include <string>
#include <vector>

namespace dmg::gpu {

struct DeviceInfo {
  int index = 0;
  std::string name;
  int major = 0, minor = 0;   // compute capability
  int sms = 0;                // multiprocessors
  int clock_khz = 0;          // SM clock (cudaDevAttrClockRate)
  int memory_clock_khz = 0;   // cudaDevAttrMemoryClockRate
  int memory_bus_bits = 0;    // cudaDevAttrGlobalMemoryBusWidth
  uint64_t memory_bytes = 0;  // global memory
  uint64_t l2_bytes = 0;
  // Peak DRAM bandwidth from the two above (2 transfers a clock), GB/s.
  double PeakGBps() const {
    return 2.0 * memory_clock_khz * 1e3 * (memory_bus_bits / 8) / 1e9;
  }
};

// True when this dmg was built with CUDA (nvcc found; DMG_CUDA not OFF).
bool BuiltWithCuda();

// Devices usable now; when none, *why (if given) says why in a few words
// ("this dmg was built without CUDA", "no NVIDIA driver (...)", "no CUDA
// device"), fit to follow "no GPU: ".
std::vector<DeviceInfo> ListDevices(std::string* why = nullptr);

}  // namespace dmg::gpu

#endif  // DMG_GPU_DEVICE_H_

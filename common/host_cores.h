// Which host a process runs on and how many cores it may use: what the
// steal model needs to know when several compute nodes share a host's
// cores (a test cluster on a laptop, four compute nodes on two cores).
// There, a node that takes another's work takes cores from it too, and no
// schedule ends before the nodes' summed work over the cores
// (workload::CoreFloor).
#ifndef DMG_COMMON_HOST_CORES_H_
#define DMG_COMMON_HOST_CORES_H_

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <random>
#include <string>

namespace dmg {

// The same on every process of this host and boot (the kernel's boot_id;
// the host name where that is unreadable; a random value, so a host alone,
// where both are).
inline uint64_t HostId() {
  std::string text;
  if (std::ifstream f("/proc/sys/kernel/random/boot_id"); f) {
    std::getline(f, text);
  }
  if (text.empty()) {
    char name[256] = {};
    if (::gethostname(name, sizeof(name) - 1) == 0) text = name;
  }
  if (text.empty()) return std::random_device{}() | 1;
  return std::hash<std::string>{}(text);
}

// Cores this process may run on: its affinity mask's, fewer where a cgroup
// v2 quota (cpu.max "quota period") allows less. At least 1.
inline double UsableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  double cores = 0;
  if (::sched_getaffinity(0, sizeof(set), &set) == 0) cores = CPU_COUNT(&set);
  if (cores <= 0) cores = static_cast<double>(::sysconf(_SC_NPROCESSORS_ONLN));
  if (std::ifstream f("/sys/fs/cgroup/cpu.max"); f) {
    std::string quota;
    double period = 0;
    if (f >> quota >> period && quota != "max" && period > 0) {
      const double q = std::atof(quota.c_str()) / period;
      if (q > 0) cores = std::min(cores, std::ceil(q));
    }
  }
  return std::max(1.0, cores);
}

}  // namespace dmg

#endif  // DMG_COMMON_HOST_CORES_H_

// The memory this process may still take: the least of the host's
// MemAvailable and the room its memory cgroup (v2 memory.max, v1
// memory.limit_in_bytes, of its own group and every parent) leaves. A check
// against MemAvailable alone passes in a 3 GiB container on a 64 GiB host
// and the process is OOM-killed instead of refusing with a message; so the
// loader's vertex estimate and input bound, and the memory node's
// allocations, ask here.
#ifndef DMG_COMMON_MEMORY_LIMITS_H_
#define DMG_COMMON_MEMORY_LIMITS_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace dmg {

// Which limit is the least.
enum class MemoryBound {
  kUnknown,       // nothing could be read: no check
  kMemAvailable,  // /proc/meminfo's MemAvailable
  kCgroupV2,      // memory.max less the cgroup's use
  kCgroupV1,      // memory.limit_in_bytes less the cgroup's use
};

struct MemoryRoom {
  // Bytes this process may still take (meaningful when known()).
  uint64_t bytes = 0;
  MemoryBound bound = MemoryBound::kUnknown;
  // For a cgroup bound: the limit and the use it is the difference of, and
  // the group's folder (a parent of this process's own when that is the
  // tighter one).
  uint64_t cgroup_limit = 0;
  uint64_t cgroup_used = 0;
  std::string cgroup_dir;

  bool known() const { return bound != MemoryBound::kUnknown; }
  // What bounds it, for messages: "MemAvailable", "the cgroup's memory.max
  // of 3.0 GiB less 100.0 MiB in use", ...; "unknown" when nothing was
  // read.
  std::string Source() const;
};

// "3.0 GiB", "32.0 MiB": bytes with one decimal, for messages.
std::string ByteAmount(uint64_t bytes);

// Reads the room under `root`, a folder prefixed to every path read
// (/proc/meminfo, /proc/self/cgroup, /proc/self/mountinfo, the cgroup
// files): "" for the real system; tests point it at a tree of fake files.
// Missing files bound nothing.
MemoryRoom ReadMemoryRoom(absl::string_view root);

// The same under MemoryFsRoot().
MemoryRoom ReadMemoryRoom();

// The root the no-argument ReadMemoryRoom uses: $DMG_TEST_FS_ROOT when set
// (the command-line tests fake a cgroup for the dmg binary with it), else
// "" (the real /proc and /sys).
std::string MemoryFsRoot();

// MemAvailable from `root`/proc/meminfo in bytes; 0 when unknown.
uint64_t MemAvailableBytes(absl::string_view root = "");

}  // namespace dmg

#endif  // DMG_COMMON_MEMORY_LIMITS_H_

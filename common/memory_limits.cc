#include "common/memory_limits.h"

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace dmg {
namespace {

// Limits at or above this are "no limit": cgroup v1 writes its unlimited
// as the largest page-aligned int64 (9223372036854771712), v2 as "max".
constexpr uint64_t kUnlimited = uint64_t{1} << 60;

// A cgroup hierarchy is never this deep; a bound on the walk up in case a
// fake or odd path would make it loop.
constexpr int kMaxDepth = 64;

// The whole of a small file (/proc, /sys); nullopt when it cannot be read.
std::optional<std::string> ReadSmallFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return std::nullopt;
  std::string text((std::istreambuf_iterator<char>(f)),
                   std::istreambuf_iterator<char>());
  if (f.bad()) return std::nullopt;
  return text;
}

// A file holding one number ("max" and values >= kUnlimited: nullopt).
std::optional<uint64_t> ReadLimit(const std::string& path) {
  std::optional<std::string> text = ReadSmallFile(path);
  if (!text) return std::nullopt;
  uint64_t value = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &value) ||
      value >= kUnlimited) {
    return std::nullopt;
  }
  return value;
}

// The value of `key` in a "key value" file such as memory.stat (0 if absent).
uint64_t StatValue(const std::string& path, absl::string_view key) {
  std::optional<std::string> text = ReadSmallFile(path);
  if (!text) return 0;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    std::vector<absl::string_view> f =
        absl::StrSplit(line, ' ', absl::SkipEmpty());
    uint64_t value = 0;
    if (f.size() == 2 && f[0] == key && absl::SimpleAtoi(f[1], &value)) {
      return value;
    }
  }
  return 0;
}

// mountinfo escapes blanks in paths as octal (\040).
std::string Unescape(absl::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    auto octal = [&](size_t j) { return s[j] >= '0' && s[j] <= '7'; };
    if (s[i] == '\\' && i + 3 < s.size() && octal(i + 1) && octal(i + 2) &&
        octal(i + 3)) {
      out.push_back(static_cast<char>((s[i + 1] - '0') * 64 +
                                      (s[i + 2] - '0') * 8 + (s[i + 3] - '0')));
      i += 3;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

// Where a cgroup hierarchy is mounted: `root` is the group the mount shows
// at its top (not "/" when a container sees only its own group).
struct CgroupMount {
  std::string root = "/";
  std::string point;
  bool found = false;
};

struct CgroupMounts {
  CgroupMount v2;         // the unified hierarchy
  CgroupMount v1_memory;  // v1's memory controller
};

// From mountinfo: "ID PARENT MAJ:MIN ROOT POINT OPTS [TAGS...] - TYPE SRC
// SUPEROPTS". Unreadable: the usual places, /sys/fs/cgroup and
// /sys/fs/cgroup/memory (a missing file there bounds nothing).
CgroupMounts FindCgroupMounts(const std::string& root) {
  CgroupMounts m;
  std::optional<std::string> info =
      ReadSmallFile(root + "/proc/self/mountinfo");
  if (!info) {
    m.v2 = {"/", "/sys/fs/cgroup", true};
    m.v1_memory = {"/", "/sys/fs/cgroup/memory", true};
    return m;
  }
  for (absl::string_view line : absl::StrSplit(*info, '\n')) {
    std::vector<absl::string_view> f =
        absl::StrSplit(line, ' ', absl::SkipEmpty());
    size_t dash = 6;
    while (dash < f.size() && f[dash] != "-") ++dash;
    if (dash + 1 >= f.size()) continue;
    const absl::string_view type = f[dash + 1];
    const CgroupMount mount{Unescape(f[3]), Unescape(f[4]), true};
    if (type == "cgroup2" && !m.v2.found) {
      m.v2 = mount;
    } else if (type == "cgroup" && !m.v1_memory.found && dash + 3 < f.size()) {
      for (absl::string_view opt : absl::StrSplit(f[dash + 3], ',')) {
        if (opt == "memory") m.v1_memory = mount;
      }
    }
  }
  return m;
}

// The folder of group `path` (as /proc/self/cgroup names it) below the
// mount's point, as a path relative to it ("" for the mount's top).
std::string RelativeGroup(const CgroupMount& mount, absl::string_view path) {
  absl::string_view rel = path;
  if (mount.root != "/") {
    if (!absl::StartsWith(path, mount.root) ||
        (path.size() > mount.root.size() && path[mount.root.size()] != '/')) {
      // Not below what the mount shows (a namespaced view): its top is the
      // nearest group we can see.
      return "";
    }
    rel.remove_prefix(mount.root.size());
  }
  if (absl::StrContains(rel, "..")) return "";
  while (absl::ConsumeSuffix(&rel, "/")) {
  }
  return std::string(rel);
}

// The files one cgroup version keeps its limit, use and reclaimable cache in.
struct CgroupFiles {
  MemoryBound bound;
  const char* limit;
  const char* usage;
  const char* inactive_file;  // memory.stat key of the page cache the
                              // kernel reclaims before killing anything
};
constexpr CgroupFiles kV2Files{MemoryBound::kCgroupV2, "memory.max",
                               "memory.current", "inactive_file"};
constexpr CgroupFiles kV1Files{MemoryBound::kCgroupV1, "memory.limit_in_bytes",
                               "memory.usage_in_bytes", "total_inactive_file"};

// Lowers `room` to what each group from `rel` up to the mount's top leaves,
// where that is less.
void WalkGroups(const std::string& root, const CgroupMount& mount,
                std::string rel, const CgroupFiles& files, MemoryRoom* room) {
  for (int depth = 0; depth < kMaxDepth; ++depth) {
    const std::string dir = absl::StrCat(root, mount.point, rel);
    if (std::optional<uint64_t> limit = ReadLimit(dir + "/" + files.limit)) {
      uint64_t used = ReadLimit(dir + "/" + files.usage).value_or(0);
      // Page cache the kernel would drop first does not count as use (a
      // store image just read stays cached, and would refuse everything).
      const uint64_t cache =
          StatValue(dir + "/memory.stat", files.inactive_file);
      used = cache < used ? used - cache : 0;
      const uint64_t left = *limit > used ? *limit - used : 0;
      if (!room->known() || left < room->bytes) {
        room->bytes = left;
        room->bound = files.bound;
        room->cgroup_limit = *limit;
        room->cgroup_used = used;
        room->cgroup_dir = dir;
      }
    }
    if (rel.empty()) break;
    const size_t up = rel.rfind('/');
    rel.resize(up == std::string::npos ? 0 : up);
  }
}

}  // namespace

std::string ByteAmount(uint64_t bytes) {
  if (bytes < (uint64_t{1} << 30)) {
    return absl::StrFormat("%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  }
  return absl::StrFormat("%.1f GiB", static_cast<double>(bytes) / (1 << 30));
}

std::string MemoryRoom::Source() const {
  switch (bound) {
    case MemoryBound::kUnknown:
      return "unknown";
    case MemoryBound::kMemAvailable:
      return "MemAvailable";
    case MemoryBound::kCgroupV2:
    case MemoryBound::kCgroupV1:
      return absl::StrCat("the cgroup's ",
                          bound == MemoryBound::kCgroupV2
                              ? "memory.max"
                              : "memory.limit_in_bytes",
                          " of ", ByteAmount(cgroup_limit), " less ",
                          ByteAmount(cgroup_used), " in use");
  }
  return "unknown";
}

uint64_t MemAvailableBytes(absl::string_view root) {
  std::optional<std::string> text =
      ReadSmallFile(absl::StrCat(root, "/proc/meminfo"));
  if (!text) return 0;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    if (!absl::ConsumePrefix(&line, "MemAvailable:")) continue;
    line = absl::StripAsciiWhitespace(line);
    if (!absl::ConsumeSuffix(&line, "kB")) return 0;
    uint64_t kib = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &kib)) return 0;
    return kib * 1024;
  }
  return 0;
}

MemoryRoom ReadMemoryRoom(absl::string_view root_view) {
  const std::string root(root_view);
  MemoryRoom room;
  if (const uint64_t available = MemAvailableBytes(root); available > 0) {
    room.bytes = available;
    room.bound = MemoryBound::kMemAvailable;
  }
  std::optional<std::string> groups = ReadSmallFile(root + "/proc/self/cgroup");
  if (!groups) return room;
  const CgroupMounts mounts = FindCgroupMounts(root);
  // "ID:CONTROLLERS:PATH": v2 is "0::PATH"; v1's memory controller is the
  // line whose controllers include "memory".
  for (absl::string_view line : absl::StrSplit(*groups, '\n')) {
    std::vector<absl::string_view> f =
        absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (f.size() != 3) continue;
    if (f[0] == "0" && f[1].empty()) {
      if (mounts.v2.found) {
        WalkGroups(root, mounts.v2, RelativeGroup(mounts.v2, f[2]), kV2Files,
                   &room);
      }
      continue;
    }
    for (absl::string_view controller : absl::StrSplit(f[1], ',')) {
      if (controller == "memory" && mounts.v1_memory.found) {
        WalkGroups(root, mounts.v1_memory,
                   RelativeGroup(mounts.v1_memory, f[2]), kV1Files, &room);
      }
    }
  }
  return room;
}

std::string MemoryFsRoot() {
  const char* root = std::getenv("DMG_TEST_FS_ROOT");
  return root != nullptr ? root : "";
}

MemoryRoom ReadMemoryRoom() { return ReadMemoryRoom(MemoryFsRoot()); }

}  // namespace dmg

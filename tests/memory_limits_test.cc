// Memory limits that hold (issue 39, items 3, 6 and 7): the room a process
// may take is the least of MemAvailable and its cgroup's limits, read from
// fake /proc and /sys trees here (never the machine's real memory); graph
// input is bounded before memory is used (gzip and xz bombs); the vertex
// estimate uses the cgroup's room; the memory node refuses an allocation
// past it and lives; std::bad_alloc in dmg is one line and exit code 2.
#include "common/memory_limits.h"

#include <lzma.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "memory_node/memory_node.h"
#include "store/input_file.h"
#include "store/reader.h"
#include "tests/test_util.h"

namespace dmg {
namespace {

using testing::CommandResult;
using testing::ErrorLines;
using testing::RunCommand;
using testing::TempDir;

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kGiB = uint64_t{1} << 30;

// A fake filesystem root: files written below it by their absolute path.
class FakeRoot {
 public:
  void Write(const std::string& path, const std::string& content) {
    const std::filesystem::path full = dir_.path() + path;
    std::filesystem::create_directories(full.parent_path());
    std::ofstream(full, std::ios::binary) << content;
  }
  void MemAvailable(uint64_t bytes) {
    Write("/proc/meminfo",
          "MemTotal:       99999999 kB\nMemFree:  1 kB\n"
          "MemAvailable:   " +
              std::to_string(bytes / 1024) + " kB\n");
  }
  // A cgroup v2 group `group` ("/a/b") with memory.max `max` ("max" or a
  // number) and memory.current `current`.
  void V2Group(const std::string& group, const std::string& max,
               uint64_t current) {
    const std::string dir = "/sys/fs/cgroup" + group;
    Write(dir + "/memory.max", max + "\n");
    Write(dir + "/memory.current", std::to_string(current) + "\n");
  }
  const std::string& path() const { return dir_.path(); }

 private:
  TempDir dir_;
};

// Sets an environment variable for the scope (the tests run one at a time).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() { ::unsetenv(name_); }

 private:
  const char* name_;
};

// A fake root where this process sits in a v2 cgroup of 3 GiB, none of it
// used, on a host with 64 GiB available.
void ThreeGiBCgroup(FakeRoot& root) {
  root.MemAvailable(64 * kGiB);
  root.Write("/proc/self/cgroup", "0::/dmg.slice/job\n");
  root.V2Group("/dmg.slice/job", std::to_string(3 * kGiB), 0);
}

// --- the room: cgroup v1/v2 and MemAvailable --------------------------------

TEST(MemoryRoomTest, CgroupV2LimitLessItsUse) {
  FakeRoot root;
  root.MemAvailable(64 * kGiB);
  root.Write("/proc/self/cgroup", "0::/user.slice/job\n");
  root.V2Group("/user.slice/job", std::to_string(3 * kGiB), kGiB);
  const MemoryRoom room = ReadMemoryRoom(root.path());
  EXPECT_EQ(room.bound, MemoryBound::kCgroupV2);
  EXPECT_EQ(room.bytes, 2 * kGiB);
  EXPECT_EQ(room.cgroup_limit, 3 * kGiB);
  EXPECT_TRUE(absl::StrContains(room.Source(), "memory.max")) << room.Source();
  EXPECT_TRUE(absl::EndsWith(room.cgroup_dir, "/user.slice/job"))
      << room.cgroup_dir;
}

TEST(MemoryRoomTest, CgroupV2MaxIsUnlimitedAndAParentCanBeTighter) {
  FakeRoot root;
  root.MemAvailable(64 * kGiB);
  root.Write("/proc/self/cgroup", "0::/a/b/c\n");
  root.V2Group("/a/b/c", "max", 10 * kMiB);
  root.V2Group("/a/b", std::to_string(2 * kGiB), 512 * kMiB);
  root.V2Group("/a", std::to_string(8 * kGiB), 512 * kMiB);
  MemoryRoom room = ReadMemoryRoom(root.path());
  EXPECT_EQ(room.bound, MemoryBound::kCgroupV2);
  EXPECT_EQ(room.bytes, 1536 * kMiB);
  EXPECT_TRUE(absl::EndsWith(room.cgroup_dir, "/a/b")) << room.cgroup_dir;
  // The leaf tighter than its parents: the leaf wins.
  root.V2Group("/a/b/c", std::to_string(100 * kMiB), 10 * kMiB);
  room = ReadMemoryRoom(root.path());
  EXPECT_EQ(room.bytes, 90 * kMiB);
  EXPECT_TRUE(absl::EndsWith(room.cgroup_dir, "/a/b/c")) << room.cgroup_dir;
}

TEST(MemoryRoomTest, CgroupV2ReclaimableCacheIsNotUse) {
  FakeRoot root;
  root.MemAvailable(64 * kGiB);
  root.Write("/proc/self/cgroup", "0::/job\n");
  root.V2Group("/job", std::to_string(3 * kGiB), 3 * kGiB);
  root.Write("/sys/fs/cgroup/job/memory.stat",
             "anon 0\nfile 1073741824\ninactive_file 1073741824\n");
  const MemoryRoom room = ReadMemoryRoom(root.path());
  EXPECT_EQ(room.bytes, kGiB);
  // Used past the limit (cache not counted): no room, and that is known.
  root.V2Group("/job", std::to_string(kGiB), 3 * kGiB);
  EXPECT_EQ(ReadMemoryRoom(root.path()).bytes, 0u);
  EXPECT_TRUE(ReadMemoryRoom(root.path()).known());
}

TEST(MemoryRoomTest, CgroupV1LimitInBytesAndItsUnlimited) {
  FakeRoot root;
  root.MemAvailable(64 * kGiB);
  root.Write("/proc/self/cgroup",
             "5:cpu,cpuacct:/x\n4:memory:/docker/abc\n0::/\n");
  const std::string dir = "/sys/fs/cgroup/memory/docker/abc";
  root.Write(dir + "/memory.limit_in_bytes", std::to_string(3 * kGiB) + "\n");
  root.Write(dir + "/memory.usage_in_bytes", std::to_string(kGiB) + "\n");
  root.Write(dir + "/memory.stat", "cache 1\ntotal_inactive_file 536870912\n");
  MemoryRoom room = ReadMemoryRoom(root.path());
  EXPECT_EQ(room.bound, MemoryBound::kCgroupV1);
  EXPECT_EQ(room.bytes, 2 * kGiB + 512 * kMiB);
  EXPECT_TRUE(absl::StrContains(room.Source(), "memory.limit_in_bytes"))
      << room.Source();
  // v1 writes "no limit" as a huge number: MemAvailable bounds then.
  root.Write(dir + "/memory.limit_in_bytes", "9223372036854771712\n");
  room = ReadMemoryRoom(root.path());
  EXPECT_EQ(room.bound, MemoryBound::kMemAvailable);
  EXPECT_EQ(room.bytes, 64 * kGiB);
}

// A container sees its own group at the top of the mount (mountinfo's root
// field is the group): the limit is read at the mount point.
TEST(MemoryRoomTest, MountinfoPlacesTheGroup) {
  FakeRoot root;
  root.MemAvailable(64 * kGiB);
  root.Write("/proc/self/cgroup", "4:memory:/docker/abc\n0::/\n");
  root.Write("/proc/self/mountinfo",
             "31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n"
             "35 31 0:32 /docker/abc /mnt/cg\\040v1 rw,relatime shared:9 - "
             "cgroup cgroup rw,memory\n"
             "41 31 0:38 / /mnt/unified rw,relatime - cgroup2 cgroup2 rw\n");
  root.Write("/mnt/cg v1/memory.limit_in_bytes", std::to_string(kGiB) + "\n");
  root.Write("/mnt/cg v1/memory.usage_in_bytes", "0\n");
  // The unified hierarchy without a memory controller: no files, no bound.
  MemoryRoom room = ReadMemoryRoom(root.path());
  EXPECT_EQ(room.bound, MemoryBound::kCgroupV1);
  EXPECT_EQ(room.bytes, kGiB);
  // Hybrid: a v2 limit too, tighter, at the unified mount.
  root.Write("/mnt/unified/memory.max", std::to_string(kGiB / 2) + "\n");
  root.Write("/mnt/unified/memory.current", "0\n");
  room = ReadMemoryRoom(root.path());
  EXPECT_EQ(room.bound, MemoryBound::kCgroupV2);
  EXPECT_EQ(room.bytes, kGiB / 2);
}

TEST(MemoryRoomTest, TheLeastWinsAndMissingFilesBoundNothing) {
  FakeRoot root;
  EXPECT_FALSE(ReadMemoryRoom(root.path()).known());
  EXPECT_EQ(ReadMemoryRoom(root.path()).Source(), "unknown");
  EXPECT_EQ(MemAvailableBytes(root.path()), 0u);
  root.MemAvailable(2 * kGiB);
  MemoryRoom room = ReadMemoryRoom(root.path());
  EXPECT_EQ(room.bound, MemoryBound::kMemAvailable);
  EXPECT_EQ(room.bytes, 2 * kGiB);
  EXPECT_EQ(room.Source(), "MemAvailable");
  // A cgroup file naming groups whose files are missing: still MemAvailable.
  root.Write("/proc/self/cgroup", "0::/gone\n4:memory:/gone\n");
  EXPECT_EQ(ReadMemoryRoom(root.path()).bound, MemoryBound::kMemAvailable);
  // A roomier cgroup does not raise it; a tighter one lowers it.
  root.V2Group("/gone", std::to_string(3 * kGiB), 0);
  EXPECT_EQ(ReadMemoryRoom(root.path()).bound, MemoryBound::kMemAvailable);
  root.V2Group("/gone", std::to_string(kGiB), 0);
  room = ReadMemoryRoom(root.path());
  EXPECT_EQ(room.bound, MemoryBound::kCgroupV2);
  EXPECT_EQ(room.bytes, kGiB);
  // Garbage in a limit file bounds nothing.
  root.V2Group("/gone", "lots", 0);
  EXPECT_EQ(ReadMemoryRoom(root.path()).bound, MemoryBound::kMemAvailable);
}

TEST(MemoryRoomTest, EnvironmentPointsTheNoArgumentReadAtAFakeRoot) {
  FakeRoot root;
  ThreeGiBCgroup(root);
  ScopedEnv env("DMG_TEST_FS_ROOT", root.path());
  EXPECT_EQ(MemoryFsRoot(), root.path());
  EXPECT_EQ(ReadMemoryRoom().bytes, 3 * kGiB);
}

TEST(MemoryRoomTest, TheRealSystemIsReadable) {
  if (!std::filesystem::exists("/proc/meminfo")) GTEST_SKIP();
  // MemAvailable moves while other tests run: the room read between two
  // readings is at most the larger of them, or a process that grew in
  // between (by more than the slack) made the later one smaller.
  const uint64_t before = MemAvailableBytes();
  const MemoryRoom room = ReadMemoryRoom("");
  const uint64_t after = MemAvailableBytes();
  EXPECT_TRUE(room.known());
  EXPECT_GT(room.bytes, 0u);
  EXPECT_LE(room.bytes, std::max(before, after) + kGiB);
}

// --- input bounded before memory is used -------------------------------------

// `n` zero bytes, gzip-compressed, made in pieces (the zeros never in
// memory at once).
std::string GzipZeros(uint64_t n) {
  z_stream zs{};
  EXPECT_EQ(deflateInit2(&zs, 9, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY),
            Z_OK);
  const std::string zeros(kMiB, '\0');
  std::string out;
  char buf[64 * 1024];
  uint64_t left = n;
  int flush = Z_NO_FLUSH;
  while (flush != Z_FINISH) {
    const uint64_t take = std::min<uint64_t>(left, zeros.size());
    left -= take;
    flush = left == 0 ? Z_FINISH : Z_NO_FLUSH;
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(zeros.data()));
    zs.avail_in = static_cast<uInt>(take);
    do {
      zs.next_out = reinterpret_cast<Bytef*>(buf);
      zs.avail_out = sizeof(buf);
      EXPECT_NE(deflate(&zs, flush), Z_STREAM_ERROR);
      out.append(buf, sizeof(buf) - zs.avail_out);
    } while (zs.avail_out == 0);
  }
  deflateEnd(&zs);
  return out;
}

std::string XzZeros(uint64_t n) {
  const std::string zeros(n, '\0');
  std::string out(n / 100 + 4096, '\0');
  size_t pos = 0;
  EXPECT_EQ(lzma_easy_buffer_encode(
                0, LZMA_CHECK_CRC64, nullptr,
                reinterpret_cast<const uint8_t*>(zeros.data()), zeros.size(),
                reinterpret_cast<uint8_t*>(out.data()), &pos, out.size()),
            LZMA_OK);
  out.resize(pos);
  return out;
}

TEST(InputBoundTest, GzipAndXzBombsStopAtTheBound) {
  TempDir dir;
  const std::string gz = dir.Write("bomb.el.gz", GzipZeros(64 * kMiB));
  ASSERT_LT(testing::Slurp(gz).size(), kMiB);
  const std::string xz = dir.Write("bomb.el.xz", XzZeros(16 * kMiB));
  for (const std::string& path : {gz, xz}) {
    store::InputBound bound{kMiB, ""};
    absl::StatusOr<store::InputText> in = store::ReadInputFile(path, bound);
    ASSERT_FALSE(in.ok()) << path;
    EXPECT_EQ(in.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(in.status().message(),
              path +
                  ": decompresses past --max_input_bytes=1048576; raise it "
                  "if the graph is really that large");
    // The same through the reader, with how the default was chosen.
    store::ReadOptions read;
    read.max_input_bytes = kMiB;
    EXPECT_EQ(store::ReadGraphFile(path, read).status().message(),
              in.status().message());
  }
  // Exactly at the bound is fine, one byte less is not.
  const std::string small = dir.Write("small.el.gz", GzipZeros(1000));
  EXPECT_TRUE(store::ReadInputFile(small, {1000, ""}).ok());
  EXPECT_FALSE(store::ReadInputFile(small, {999, ""}).ok());
}

TEST(InputBoundTest, RawFileSizeIsCheckedBeforeReading) {
  TempDir dir;
  const std::string el = dir.Write("g.el", std::string(2000, '\n') + "0 1\n");
  absl::StatusOr<store::InputText> in =
      store::ReadInputFile(el, {1000, "how it was chosen"});
  ASSERT_FALSE(in.ok());
  EXPECT_EQ(in.status().message(),
            el + ": is 2004 bytes, more than --max_input_bytes=1000 (how it "
                 "was chosen); raise it if the graph is really that large");
  EXPECT_TRUE(store::ReadInputFile(el, {2004, ""}).ok());
}

TEST(InputBoundTest, DefaultIsHalfTheRoom) {
  FakeRoot root;
  ThreeGiBCgroup(root);
  store::InputBound bound =
      store::DefaultMaxInputBytes(ReadMemoryRoom(root.path()));
  EXPECT_EQ(bound.max_bytes, 3 * kGiB / 2);
  EXPECT_TRUE(absl::StrContains(bound.origin, "half of the 3.0 GiB"))
      << bound.origin;
  EXPECT_TRUE(absl::StrContains(bound.origin, "memory.max")) << bound.origin;
  bound = store::DefaultMaxInputBytes(MemoryRoom());
  EXPECT_EQ(bound.max_bytes, store::kUnknownRoomMaxInputBytes);
}

// The 13-byte file of the issue: it passes a check against the host's
// MemAvailable (64 GiB here) but not the cgroup's 3 GiB.
TEST(InputBoundTest, VertexEstimateUsesTheCgroupRoom) {
  TempDir dir;
  const std::string el = dir.Write("huge.el", "0 500000000\n");
  FakeRoot root;
  ThreeGiBCgroup(root);
  ScopedEnv env("DMG_TEST_FS_ROOT", root.path());
  absl::StatusOr<store::EdgeList> edges = store::ReadGraphFile(el);
  ASSERT_FALSE(edges.ok());
  EXPECT_EQ(edges.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(edges.status().message());
  EXPECT_TRUE(absl::StartsWith(message, el + ":1: vertex id 500000000 needs "
                                             "500000001 vertices"))
      << message;
  EXPECT_TRUE(absl::StrContains(message,
                                "only 3.0 GiB is available (the "
                                "cgroup's memory.max"))
      << message;
  // On the host alone it would pass the estimate.
  root.V2Group("/dmg.slice/job", "max", 0);
  root.MemAvailable(64 * kGiB);
  store::ReadOptions read;
  read.max_input_bytes = kMiB;
  EXPECT_TRUE(store::ReadGraphFile(el, read).ok());
}

// --- the command line
// ---------------------------------------------------------

// Runs dmg with `args` under the fake root (none: the real system).
CommandResult RunDmgIn(const std::string& fake_root, const std::string& args) {
  const std::string env =
      fake_root.empty() ? "" : "DMG_TEST_FS_ROOT=" + fake_root + " ";
  return RunCommand(env + DMG_BINARY + " " + args);
}

void ExpectOneLine(const CommandResult& r, const std::vector<std::string>& want,
                   const std::string& what) {
  EXPECT_EQ(r.exit_code, 2) << what << "\n" << r.err;
  const std::vector<std::string> lines = ErrorLines(r.err);
  ASSERT_EQ(lines.size(), 1u) << what << "\n" << r.err;
  for (const std::string& w : want) {
    EXPECT_TRUE(absl::StrContains(lines[0], w))
        << what << ": wanted '" << w << "' in: " << lines[0];
  }
}

TEST(InputBoundCliTest, LoadRefusesTheBombWithOneLine) {
  TempDir dir;
  const std::string gz = dir.Write("bomb.el.gz", GzipZeros(64 * kMiB));
  const std::string image = dir.file("g.img");
  ExpectOneLine(RunDmgIn("", "load --graph=" + gz + " --image=" + image +
                                 " --max_input_bytes=1048576"),
                {"dmg: error: " + gz +
                 ": decompresses past "
                 "--max_input_bytes=1048576; raise it"},
                "the flag");
  // The default follows the room: a 32 MiB cgroup allows 16 MiB of text.
  FakeRoot root;
  root.MemAvailable(64 * kGiB);
  root.Write("/proc/self/cgroup", "0::/small\n");
  root.V2Group("/small", std::to_string(32 * kMiB), 0);
  ExpectOneLine(
      RunDmgIn(root.path(), "load --graph=" + gz + " --image=" + image),
      {gz + ": decompresses past --max_input_bytes=16777216 (the "
            "default: half of the 32.0 MiB left by the cgroup's "
            "memory.max"},
      "the default");
  EXPECT_FALSE(std::filesystem::exists(image));
  // `info` and `run` take the flag too.
  ExpectOneLine(RunDmgIn("", "info --max_input_bytes=1048576 --graph=" + gz),
                {"--max_input_bytes=1048576"}, "info");
}

// The bomb costs the bound, not what it inflates to: the process's peak
// resident memory stays well under 64 MiB.
TEST(InputBoundCliTest, TheBombIsNotInflatedInMemory) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "sanitizer shadow memory skews the resident size";
#endif
  TempDir dir;
  const std::string gz = dir.Write("bomb.el.gz", GzipZeros(256 * kMiB));
  const pid_t pid = ::fork();
  if (pid == 0) {
    std::freopen("/dev/null", "w", stderr);
    const std::string graph = "--graph=" + gz;
    ::execl(DMG_BINARY, DMG_BINARY, "info", graph.c_str(),
            "--max_input_bytes=1048576", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ASSERT_GT(pid, 0);
  int status = 0;
  struct rusage usage {};
  ASSERT_EQ(::wait4(pid, &status, 0, &usage), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 2);
  EXPECT_LT(static_cast<uint64_t>(usage.ru_maxrss) * 1024, 64 * kMiB);
}

TEST(InputBoundCliTest, HugeVertexIdInACgroupIsOneLine) {
  TempDir dir;
  const std::string el = dir.Write("huge.el", "0 500000000\n");
  const std::string image = dir.file("huge.img");
  FakeRoot root;
  ThreeGiBCgroup(root);
  ExpectOneLine(
      RunDmgIn(root.path(), "load --graph=" + el + " --image=" + image),
      {"dmg: error: " + el + ":1: vertex id 500000000 needs",
       "only 3.0 GiB is available (the cgroup's memory.max"},
      "load");
  EXPECT_FALSE(std::filesystem::exists(image));
}

// An allocation that fails becomes one line and exit code 2: an address
// space limit (ulimit -v) makes it fail where the vertex estimate, told of
// plenty of memory by a fake root, lets 10^9 vertices through.
TEST(OutOfMemoryCliTest, BadAllocIsOneLine) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "sanitizers reserve more address space than the limit";
#endif
  TempDir dir;
  const std::string el = dir.Write("big.el", "0 1000000000\n");
  FakeRoot root;
  root.MemAvailable(uint64_t{1} << 40);
  const CommandResult r =
      RunCommand("ulimit -v 1048576 && DMG_TEST_FS_ROOT=" + root.path() + " " +
                 DMG_BINARY + " info --threads=1 --graph=" + el);
  ExpectOneLine(r,
                {"dmg: out of memory: an allocation failed in 'dmg info'",
                 "the least limit is MemAvailable"},
                "info");
}

// --- the memory node
// ----------------------------------------------------------

TEST(MemoryNodeRoomTest, AllocationPastTheCgroupIsAnErrorReply) {
  FakeRoot root;
  ThreeGiBCgroup(root);
  ScopedEnv env("DMG_TEST_FS_ROOT", root.path());
  memory_node::MemoryNode node(0);
  absl::StatusOr<transport::RegionInfo> big =
      node.ServeAllocate(4 * kGiB, "big");
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StrContains(big.status().message(), "'big'"))
      << big.status();
  EXPECT_TRUE(absl::StrContains(big.status().message(), "cgroup's memory.max"))
      << big.status();
  // The node lives and serves what fits.
  absl::StatusOr<transport::RegionInfo> small =
      node.ServeAllocate(4096, "small");
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_EQ(node.bytes_in_use(), 4096u);
  // --memory_mb still bounds below the cgroup.
  memory_node::MemoryNode::Options options;
  options.capacity_bytes = kMiB;
  memory_node::MemoryNode capped(1, options);
  absl::StatusOr<transport::RegionInfo> over =
      capped.ServeAllocate(2 * kMiB, "over");
  ASSERT_FALSE(over.ok());
  EXPECT_TRUE(absl::StrContains(over.status().message(), "capacity"))
      << over.status();
  // And a cgroup used up refuses even a small one.
  root.V2Group("/dmg.slice/job", std::to_string(3 * kGiB), 3 * kGiB);
  EXPECT_EQ(node.ServeAllocate(4096, "more").status().code(),
            absl::StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace dmg

// Issue 13, build item 7: `dmg memory-node --snapshot_dir` keeps the store
// on disk, written atomically with checksums, and serves it again after a
// restart; a crash during a snapshot leaves the previous one intact. The
// file format and folder first (round trip, damage, cancel, lock, stale
// temporary files), then as an operator meets it: 10 kill -9s of a daemon
// while it writes a snapshot, each followed by a restart that must serve
// the last complete snapshot and a verified job on it.
#include "memory_node/snapshot.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "memory_node/memory_node.h"
#include "tests/daemon_util.h"
#include "tests/test_util.h"

namespace dmg {
namespace {

using memory_node::ReadSnapshot;
using memory_node::Snapshot;
using memory_node::SnapshotDir;

AlignedBuffer Bytes(size_t n, uint8_t seed) {
  AlignedBuffer b(n);
  for (size_t i = 0; i < n; ++i) {
    b.data()[i] = static_cast<std::byte>((i * 131 + seed) & 0xff);
  }
  return b;
}

bool Same(const AlignedBuffer& a, const AlignedBuffer& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string SlurpFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), {});
}

void Spit(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

TEST(SnapshotDirTest, WritesAndLoadsTheNewest) {
  testing::TempDir tmp;
  const std::string dir = tmp.file("snap");
  AlignedBuffer a = Bytes(3 << 20, 1), b = Bytes(12345, 2);
  {
    auto d = SnapshotDir::Open(dir);
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_FALSE((*d)->LoadNewest().has_value());
    ASSERT_TRUE((*d)->Write(3, 77, a.span(), nullptr).ok());
    ASSERT_TRUE((*d)->Write(4, 88, b.span(), nullptr).ok());
    // The older one goes once the newer is in place.
    EXPECT_EQ((*d)->List().size(), 1u);
  }
  auto d = SnapshotDir::Open(dir);
  ASSERT_TRUE(d.ok()) << d.status();
  std::optional<Snapshot> s = (*d)->LoadNewest();
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->node_id, 4u);
  EXPECT_EQ(s->load_id, 88u);
  EXPECT_TRUE(Same(s->store, b));
  // Numbering goes on after a restart.
  ASSERT_TRUE((*d)->Write(5, 99, a.span(), nullptr).ok());
  s = (*d)->LoadNewest();
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->node_id, 5u);
  EXPECT_GT(s->seq, 2u);
}

TEST(SnapshotDirTest, ADamagedNewestFallsBackToAnOlderOne) {
  testing::TempDir tmp;
  const std::string dir = tmp.file("snap");
  AlignedBuffer a = Bytes(100000, 3), b = Bytes(200000, 4);
  auto d = SnapshotDir::Open(dir);
  ASSERT_TRUE(d.ok());
  ASSERT_TRUE((*d)->Write(0, 1, a.span(), nullptr).ok());
  const std::string first = (*d)->List().at(0);
  const std::string kept = SlurpFile(first);
  ASSERT_TRUE((*d)->Write(0, 2, b.span(), nullptr).ok());
  const std::string second = (*d)->List().at(0);
  Spit(first, kept);  // the older one back beside the newer
  std::string damaged = SlurpFile(second);
  damaged[damaged.size() / 2] ^= 0x10;
  Spit(second, damaged);
  std::optional<Snapshot> s = (*d)->LoadNewest();
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->load_id, 1u);
  EXPECT_TRUE(Same(s->store, a));
}

TEST(SnapshotDirTest, EveryTruncationAndEveryHeaderByteFlipIsRefused) {
  testing::TempDir tmp;
  auto d = SnapshotDir::Open(tmp.file("snap"));
  ASSERT_TRUE(d.ok());
  AlignedBuffer a = Bytes(5000, 5);
  ASSERT_TRUE((*d)->Write(1, 2, a.span(), nullptr).ok());
  const std::string good = SlurpFile((*d)->List().at(0));
  auto read = [&](const std::string& bytes) {
    std::FILE* f = fmemopen(const_cast<char*>(bytes.data()),
                            std::max<size_t>(bytes.size(), 1), "rb");
    absl::StatusOr<Snapshot> s = ReadSnapshot(f, bytes.size(), "x");
    std::fclose(f);
    return s.status();
  };
  EXPECT_TRUE(read(good).ok());
  int refused = 0, cases = 0;
  for (size_t cut = 0; cut < good.size(); cut += 97) {
    ++cases;
    refused += absl::IsDataLoss(read(good.substr(0, cut)));
  }
  for (size_t i = 0; i < 48; ++i) {  // the header's bytes
    std::string bad = good;
    bad[i] ^= 0x01;
    ++cases;
    refused += absl::IsDataLoss(read(bad));
  }
  EXPECT_EQ(refused, cases);
}

TEST(SnapshotDirTest, ACancelledWriteLeavesThePreviousSnapshotAndNoTempFile) {
  testing::TempDir tmp;
  const std::string dir = tmp.file("snap");
  auto d = SnapshotDir::Open(dir);
  ASSERT_TRUE(d.ok());
  AlignedBuffer a = Bytes(1000, 6), b = Bytes(5 << 20, 7);
  ASSERT_TRUE((*d)->Write(0, 1, a.span(), nullptr).ok());
  int asked = 0;
  absl::StatusOr<uint64_t> w =
      (*d)->Write(0, 2, b.span(), [&] { return ++asked > 2; });
  EXPECT_TRUE(absl::IsCancelled(w.status())) << w.status();
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    files += e.path().filename() != "LOCK";
  }
  EXPECT_EQ(files, 1u);
  std::optional<Snapshot> s = (*d)->LoadNewest();
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->load_id, 1u);
}

TEST(SnapshotDirTest, OneDaemonPerFolderAndStaleTempFilesAreRemoved) {
  testing::TempDir tmp;
  const std::string dir = tmp.file("snap");
  auto d = SnapshotDir::Open(dir);
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(SnapshotDir::Open(dir).status()));
  d->reset();
  // A dead process's unfinished snapshot (pid 2^22+1 does not run).
  const std::string stale =
      dir + "/snapshot-00000000000000000009.dmgsnap.tmp.4194305";
  Spit(stale, "partial");
  auto again = SnapshotDir::Open(dir);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(std::filesystem::exists(stale));
  EXPECT_FALSE((*again)->LoadNewest().has_value());
}

TEST(SnapshotterTest, SnapshotsTheStoreAfterEachRequest) {
  testing::TempDir tmp;
  const std::string dir = tmp.file("snap");
  memory_node::MemoryNode node(0);
  AlignedBuffer a = Bytes(2 << 20, 8);
  ASSERT_TRUE(node.LoadStore(Bytes(2 << 20, 8)).ok());
  {
    auto d = SnapshotDir::Open(dir);
    ASSERT_TRUE(d.ok());
    memory_node::Snapshotter s(*std::move(d), &node);
    s.Request(2, 55);
    s.WaitIdle();
    EXPECT_EQ(s.written(), 1u);
  }
  auto d = SnapshotDir::Open(dir);
  ASSERT_TRUE(d.ok());
  std::optional<Snapshot> snap = (*d)->LoadNewest();
  ASSERT_TRUE(snap.has_value());
  EXPECT_EQ(snap->node_id, 2u);
  EXPECT_EQ(snap->load_id, 55u);
  EXPECT_TRUE(Same(snap->store, a));
}

// ------------------------------------------------------------- processes

using testing::Daemon;
using testing::RunCommand;
using testing::RunDmg;

bool HasTempFile(const std::string& dir) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.path().filename().string().find(".tmp.") != std::string::npos) {
      return true;
    }
  }
  return false;
}

size_t Snapshots(const std::string& dir) {
  size_t n = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string f = e.path().filename().string();
    n += f.size() > 8 && f.compare(f.size() - 8, 8, ".dmgsnap") == 0;
  }
  return n;
}

// Waits (up to 60 s) for `pred`.
template <typename Pred>
bool WaitFor(Pred pred) {
  for (int i = 0; i < 6000; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// The graph a memory node serves, by its vertex count, from a BFS over it.
std::string Serving(const std::string& nodes) {
  testing::CommandResult r =
      RunDmg("run --algo=bfs --source=0 --progress=false" + nodes);
  if (r.out.find(" 65536 vertices") != std::string::npos) return "kron:16";
  if (r.out.find(" 16384 vertices") != std::string::npos) return "kron:14";
  return "nothing (" + r.out + r.err + ")";
}

TEST(SnapshotProcessTest,
     AMemoryNodeKilledDuringASnapshotRestartsOnTheLastComplete) {
  testing::TempDir tmp;
  const std::string snap = tmp.file("snap");
  const std::string flags = "--transport=tcp --snapshot_dir=" + snap;
  // Slow snapshots down (a pause per MiB) so a kill lands inside one.
  setenv("DMG_TEST_SNAPSHOT_CHUNK_DELAY_MS", "40", 1);
  auto daemon = std::make_unique<Daemon>(flags, tmp.file("node0.log"));
  std::string nodes = " --memory_nodes=" + daemon->address();
  ASSERT_EQ(RunDmg("load --graph=kron:14" + nodes).exit_code, 0);
  ASSERT_TRUE(
      WaitFor([&] { return Snapshots(snap) == 1 && !HasTempFile(snap); }));
  std::string complete = "kron:14";  // the newest complete snapshot's graph
  std::mt19937 rng(17);
  constexpr int kTrials = 10;
  int mid_snapshot = 0, verified = 0;
  for (int trial = 0; trial < kTrials; ++trial) {
    const std::string next = complete == "kron:14" ? "kron:16" : "kron:14";
    ASSERT_EQ(RunDmg("load --graph=" + next + nodes).exit_code, 0);
    // The commit starts a snapshot: kill -9 somewhere inside it.
    ASSERT_TRUE(WaitFor([&] { return HasTempFile(snap); }));
    std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 300));
    daemon->Signal(SIGKILL);
    daemon->Wait();
    const bool torn = HasTempFile(snap);
    mid_snapshot += torn;
    if (!torn) complete = next;  // it finished before the kill
    daemon = std::make_unique<Daemon>(
        flags, tmp.file("node" + std::to_string(trial + 1) + ".log"));
    nodes = " --memory_nodes=" + daemon->address();
    EXPECT_FALSE(HasTempFile(snap)) << "the restart removes the torn one";
    EXPECT_GE(Snapshots(snap), 1u);
    EXPECT_EQ(Serving(nodes), complete) << daemon->log();
    testing::CommandResult job =
        RunDmg("run --algo=bfs --graph=" + complete + " --verify" + nodes);
    EXPECT_EQ(job.exit_code, 0) << job.err;
    verified += job.out.find("verify: OK") != std::string::npos;
  }
  unsetenv("DMG_TEST_SNAPSHOT_CHUNK_DELAY_MS");
  EXPECT_GE(mid_snapshot, kTrials / 2);
  EXPECT_EQ(verified, kTrials);
  std::printf(
      "%d memory nodes killed during a snapshot (%d mid-write, %d after it "
      "completed): each restart served the last complete snapshot, %d "
      "verified jobs, %d failures\n",
      kTrials, mid_snapshot, kTrials - mid_snapshot, verified,
      kTrials - verified);
}

}  // namespace
}  // namespace dmg

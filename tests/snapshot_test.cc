// Issue 13, build item 7: `dmg memory-node --snapshot_dir` keeps the store
// on disk, written atomically with checksums, and serves it again after a
// restart; a crash during a snapshot leaves the previous one intact. The
// file format and folder first (round trip, damage, cancel, lock, stale
// temporary files), then as an operator meets it: 10 kill -9s of a daemon
// while it writes a snapshot, each followed by a restart that must serve
// the last complete snapshot and a verified job on it. And job state
// (`dmg snapshot --jobs`): a job whose compute node was killed, snapshotted,
// its memory node killed and restarted from the snapshot, then `dmg run
// --resume`: output identical to an uninterrupted run.
#include "memory_node/snapshot.h"

#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "memory_node/memory_node.h"
#include "tests/daemon_util.h"
#include "tests/test_util.h"
#include "transport/tcp_server.h"
#include "transport/tcp_transport.h"

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

// Waits (up to 60 s) for `pred`.
template <typename Pred>
bool WaitFor(Pred pred) {
  for (int i = 0; i < 6000; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

TEST(SnapshotDirTest, WritesAndLoadsTheNewest) {
  testing::TempDir tmp;
  const std::string dir = tmp.file("snap");
  AlignedBuffer a = Bytes(3 << 20, 1), b = Bytes(12345, 2);
  {
    auto d = SnapshotDir::Open(dir);
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_FALSE((*d)->LoadNewest().has_value());
    ASSERT_TRUE((*d)->Write(3, 77, a.span(), {}, nullptr).ok());
    ASSERT_TRUE((*d)->Write(4, 88, b.span(), {}, nullptr).ok());
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
  ASSERT_TRUE((*d)->Write(5, 99, a.span(), {}, nullptr).ok());
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
  ASSERT_TRUE((*d)->Write(0, 1, a.span(), {}, nullptr).ok());
  const std::string first = (*d)->List().at(0);
  const std::string kept = SlurpFile(first);
  ASSERT_TRUE((*d)->Write(0, 2, b.span(), {}, nullptr).ok());
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
  ASSERT_TRUE((*d)->Write(1, 2, a.span(), {}, nullptr).ok());
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
  ASSERT_TRUE((*d)->Write(0, 1, a.span(), {}, nullptr).ok());
  int asked = 0;
  absl::StatusOr<uint64_t> w =
      (*d)->Write(0, 2, b.span(), {}, [&] { return ++asked > 2; });
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

std::shared_ptr<const AlignedBuffer> Shared(AlignedBuffer b) {
  return std::make_shared<const AlignedBuffer>(std::move(b));
}

TEST(SnapshotDirTest, JobRegionsRoundTripAndADamagedOneIsCaught) {
  testing::TempDir tmp;
  const std::string dir = tmp.file("snap");
  AlignedBuffer store = Bytes(1 << 20, 3);
  // A job's token verifier goes with each of its regions (none: a job of
  // an open node).
  transport::Digest verifier;
  for (size_t i = 0; i < verifier.size(); ++i) verifier[i] = uint8_t(i * 7);
  const std::vector<memory_node::JobRegionRef> jobs = {
      {"pr", "progress", Shared(Bytes(4096, 4)), verifier},
      {"pr", "state.rank.0", Shared(Bytes((2 << 20) + 5, 5)), verifier},
      {"bfs-7", "progress.frontier.0.1", Shared(Bytes(1, 6)), std::nullopt}};
  auto d = SnapshotDir::Open(dir);
  ASSERT_TRUE(d.ok());
  ASSERT_TRUE((*d)->Write(1, 9, store.span(), jobs, nullptr).ok());
  std::optional<Snapshot> s = (*d)->LoadNewest();
  ASSERT_TRUE(s.has_value());
  EXPECT_TRUE(Same(s->store, store));
  ASSERT_EQ(s->jobs.size(), jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_EQ(s->jobs[i].job, jobs[i].job);
    EXPECT_EQ(s->jobs[i].name, jobs[i].name);
    EXPECT_TRUE(Same(s->jobs[i].bytes, *jobs[i].bytes)) << i;
    EXPECT_EQ(s->jobs[i].verifier, jobs[i].verifier) << i;
  }
  // A flipped byte in the last region's bytes, a cut file, a forged count:
  // each is named and nothing loads.
  const std::string file = (*d)->List().back();
  const std::string good = SlurpFile(file);
  std::string bad = good;
  bad[bad.size() - 21] ^= 1;  // the last job byte, before the 20-byte trailer
  Spit(file, bad);
  EXPECT_FALSE((*d)->LoadNewest().has_value());
  auto read = [&](const std::string& bytes) {
    Spit(file, bytes);
    std::FILE* f = std::fopen(file.c_str(), "rb");
    absl::StatusOr<Snapshot> r = ReadSnapshot(f, bytes.size(), "x");
    std::fclose(f);
    return r.status();
  };
  absl::Status flipped = read(bad);
  EXPECT_TRUE(absl::IsDataLoss(flipped)) << flipped;
  EXPECT_NE(flipped.message().find("job region 2 checksum"), std::string::npos)
      << flipped;
  std::string cut = good.substr(0, good.size() - 100);
  EXPECT_TRUE(absl::IsDataLoss(read(cut)));
  std::string many = good;  // the job count (after 48 + 1 MiB) made huge
  const size_t at = 48 + (1 << 20);
  many[at + 3] = 0x7f;
  EXPECT_TRUE(absl::IsDataLoss(read(many))) << read(many);
  EXPECT_TRUE(read(good).ok());
}

// A version-1 snapshot (store only, as the first dmg with snapshots wrote)
// still loads.
TEST(SnapshotDirTest, AVersionOneFileStillLoads) {
  AlignedBuffer store = Bytes(1000, 7);
  auto crc = [](const void* p, size_t n) {
    return static_cast<uint32_t>(crc32_z(0, static_cast<const Bytef*>(p), n));
  };
  std::string f(48, '\0');
  std::memcpy(f.data(), "DMGSNAP1", 8);
  const uint32_t version = 1, node = 2, store_crc = crc(store.data(), 1000);
  const uint64_t load = 5, seq = 3, bytes = 1000;
  std::memcpy(f.data() + 8, &version, 4);
  std::memcpy(f.data() + 12, &node, 4);
  std::memcpy(f.data() + 16, &load, 8);
  std::memcpy(f.data() + 24, &seq, 8);
  std::memcpy(f.data() + 32, &bytes, 8);
  std::memcpy(f.data() + 40, &store_crc, 4);
  const uint32_t header_crc = crc(f.data(), 44);
  std::memcpy(f.data() + 44, &header_crc, 4);
  f.append(reinterpret_cast<const char*>(store.data()), 1000);
  std::string t(20, '\0');
  std::memcpy(t.data(), "DMGSEND1", 8);
  std::memcpy(t.data() + 8, &seq, 8);
  const uint32_t trailer_crc = crc(t.data(), 16);
  std::memcpy(t.data() + 16, &trailer_crc, 4);
  f += t;
  testing::TempDir tmp;
  const std::string dir = tmp.file("snap");
  std::filesystem::create_directories(dir);
  Spit(dir + "/snapshot-00000000000000000003.dmgsnap", f);
  auto d = SnapshotDir::Open(dir);
  ASSERT_TRUE(d.ok());
  std::optional<Snapshot> s = (*d)->LoadNewest();
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->node_id, 2u);
  EXPECT_EQ(s->load_id, 5u);
  EXPECT_TRUE(Same(s->store, store));
  EXPECT_TRUE(s->jobs.empty());
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

// Job state on request: what the collector gives is written; when a job
// comes back while its state is copied, the write is abandoned and taken
// again without it.
TEST(SnapshotterTest, JobStateOnRequestIsTakenAgainWhenAJobComesBack) {
  testing::TempDir tmp;
  memory_node::MemoryNode node(0);
  ASSERT_TRUE(node.LoadStore(Bytes(3 << 20, 8)).ok());
  int collected = 0;
  auto d = SnapshotDir::Open(tmp.file("snap"));
  ASSERT_TRUE(d.ok());
  memory_node::Snapshotter s(*std::move(d), &node, [&] {
    memory_node::JobState state;
    ++collected;
    if (collected == 2) {  // the job resumes while this one is written
      state.regions = {{"pr", "progress", Shared(Bytes(4096, 1)), {}}};
      state.jobs = 1;
      state.still_idle = [] { return false; };
    } else if (collected == 3) {  // now it runs
      state.running = 1;
    } else {
      state.regions = {{"pr", "progress", Shared(Bytes(4096, 1)), {}},
                       {"pr", "state.rank.1", Shared(Bytes(80000, 2)), {}}};
      state.jobs = 1;
    }
    return state;
  });
  // Store only: the collector is not asked.
  absl::StatusOr<memory_node::SnapshotTaken> store = s.Wait(s.Request(0, 1));
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(collected, 0);
  EXPECT_EQ(store->regions, 0u);
  EXPECT_EQ(store->store_bytes, 3u << 20);
  absl::StatusOr<memory_node::SnapshotTaken> jobs =
      s.Wait(s.Request(0, 1, /*with_jobs=*/true));
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  EXPECT_EQ(jobs->jobs, 1u);
  EXPECT_EQ(jobs->regions, 2u);
  EXPECT_EQ(jobs->job_bytes, 84096u);
  absl::StatusOr<memory_node::SnapshotTaken> moved =
      s.Wait(s.Request(0, 1, /*with_jobs=*/true));
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_EQ(collected, 3);
  EXPECT_EQ(moved->regions, 0u);
  EXPECT_EQ(moved->running, 1u);
  EXPECT_GT(moved->seq, jobs->seq);
}

// kSnapshot on a real TcpServer: the admin's only; refused by a node that
// takes no snapshots; written off the I/O threads (a slow snapshot does not
// stall other clients, with one I/O thread); idle_jobs() lists a job's kept
// regions once its connection closed, and counts it running before.
TEST(SnapshotRequestTest, AdminOnlyAndOffTheIoThreads) {
  memory_node::MemoryNode node(0);
  ASSERT_TRUE(node.LoadStore(Bytes(4096, 1)).ok());
  auto client = [](transport::Role role, const std::string& job) {
    transport::TcpOptions o;
    o.timeout_ms = 5000;
    o.credentials.role = role;
    o.credentials.job = job;
    return o;
  };
  {
    auto plain = transport::TcpServer::Start(&node, "127.0.0.1", 0, {});
    ASSERT_TRUE(plain.ok());
    auto admin =
        transport::TcpControl::Connect({{"127.0.0.1", (*plain)->port()}},
                                       client(transport::Role::kAdmin, "a"));
    ASSERT_TRUE(admin.ok());
    absl::Status s = (*admin)->Snapshot(0, true).status();
    EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
    EXPECT_NE(s.message().find("--snapshot_dir"), std::string::npos) << s;
  }
  transport::TcpServerOptions options;
  options.io_threads = 1;
  std::atomic<int> snapshots{0};
  options.snapshot = [&](bool with_jobs) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    ++snapshots;
    transport::wire::SnapshotSummary summary;
    summary.seq = 7;
    summary.jobs = with_jobs ? 1 : 0;
    return absl::StatusOr<transport::wire::SnapshotSummary>(summary);
  };
  options.limits.max_keep_s = 600;
  auto server = transport::TcpServer::Start(&node, "127.0.0.1", 0, options);
  ASSERT_TRUE(server.ok());
  const transport::HostPort at{"127.0.0.1", (*server)->port()};
  {
    auto job = transport::TcpControl::Connect(
        {at}, client(transport::Role::kJob, "j"));
    ASSERT_TRUE(job.ok());
    EXPECT_TRUE(absl::IsPermissionDenied((*job)->Snapshot(0, false).status()));
    ASSERT_TRUE((*job)->Allocate(0, 8192, "progress").ok());
    ASSERT_TRUE((*job)->KeepJob(600).ok());
    EXPECT_EQ((*server)->idle_jobs().running, 1u);
    EXPECT_TRUE((*server)->idle_jobs().jobs.empty());
  }
  ASSERT_TRUE(WaitFor([&] { return !(*server)->idle_jobs().jobs.empty(); }));
  transport::IdleJobs idle = (*server)->idle_jobs();
  ASSERT_EQ(idle.jobs.size(), 1u);
  EXPECT_EQ(idle.jobs[0].job, "j");
  EXPECT_EQ(idle.jobs[0].regions.size(), 1u);
  EXPECT_EQ(idle.running, 0u);
  // A slow snapshot; meanwhile another client is answered at once.
  absl::StatusOr<transport::wire::SnapshotSummary> taken;
  std::thread admin([&] {
    auto c = transport::TcpControl::Connect(
        {at}, client(transport::Role::kAdmin, "a"));
    ASSERT_TRUE(c.ok());
    taken = (*c)->Snapshot(0, true);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto t0 = std::chrono::steady_clock::now();
  auto other = transport::TcpControl::Connect(
      {at}, client(transport::Role::kJob, "other"));
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE((*other)->List(0).ok());
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  EXPECT_EQ(snapshots.load(), 0) << "the list waited for the snapshot";
  EXPECT_LT(waited, 1.0);
  admin.join();
  ASSERT_TRUE(taken.ok()) << taken.status();
  EXPECT_EQ(taken->seq, 7u);
  EXPECT_EQ(taken->jobs, 1u);
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

// Issue 39 item 8: a memory node restarted from a snapshot of an earlier
// load than the other node's is named as such, by a job and by `dmg
// status` (which said "ready" while jobs were told a load was under way).
TEST(SnapshotProcessTest, ANodeRestartedOnAnEarlierLoadIsNamed) {
  testing::TempDir tmp;
  const std::string snap0 = tmp.file("snap0"), snap1 = tmp.file("snap1");
  Daemon node0("--transport=tcp --node_id=0 --snapshot_dir=" + snap0,
               tmp.file("node0.log"));
  auto node1 = std::make_unique<Daemon>(
      "--transport=tcp --node_id=1 --snapshot_dir=" + snap1,
      tmp.file("node1.log"));
  auto list = [&] {
    return " --memory_nodes=" + node0.address() + "," + node1->address();
  };
  ASSERT_EQ(RunDmg("load --graph=kron:12" + list()).exit_code, 0);
  ASSERT_TRUE(
      WaitFor([&] { return Snapshots(snap1) == 1 && !HasTempFile(snap1); }));
  const std::string kept = tmp.file("kron12.dmgsnap");
  std::filesystem::path first;
  for (const auto& e : std::filesystem::directory_iterator(snap1)) {
    first = e.path();
  }
  std::filesystem::copy_file(first, kept);
  ASSERT_EQ(RunDmg("load --graph=kron:13" + list()).exit_code, 0);
  ASSERT_TRUE(WaitFor([&] {
    return !std::filesystem::exists(first) && Snapshots(snap1) == 1 &&
           !HasTempFile(snap1);
  }));
  // Node 1 comes back on its snapshot of kron:12; node 0 serves kron:13.
  node1->Signal(SIGKILL);
  node1->Wait();
  std::filesystem::remove_all(snap1);
  std::filesystem::create_directory(snap1);
  std::filesystem::copy_file(kept, first);
  node1 = std::make_unique<Daemon>("--transport=tcp --snapshot_dir=" + snap1,
                                   tmp.file("node1b.log"));
  testing::CommandResult job =
      RunDmg("run --algo=bfs --source=0 --progress=false" + list());
  EXPECT_NE(job.exit_code, 0);
  EXPECT_NE(job.err.find("restarted from its snapshot"), std::string::npos)
      << job.err;
  testing::CommandResult status = RunDmg("status --require_store" + list());
  EXPECT_NE(status.exit_code, 0) << status.out;
  EXPECT_NE(status.out.find("at its restart"), std::string::npos) << status.out;
  EXPECT_NE(status.out.find("restarted from its snapshot"), std::string::npos)
      << status.out;
  EXPECT_NE(status.out.find("not ready"), std::string::npos) << status.out;
  // A load puts every node on one graph again.
  ASSERT_EQ(RunDmg("load --graph=kron:12" + list()).exit_code, 0);
  EXPECT_EQ(RunDmg("status --require_store" + list()).exit_code, 0);
}

// A job's state through a memory-node restart: PageRank against a daemon
// with --snapshot_dir, its compute node killed (kill -9) in the middle;
// `dmg snapshot --jobs`; the daemon killed (kill -9) and restarted from the
// snapshot; `dmg run --resume`: identical output to an uninterrupted run.
// While the job still runs, a snapshot leaves it out and says so.
TEST(SnapshotProcessTest, AJobResumesAfterItsMemoryNodeRestartedFromASnapshot) {
  testing::TempDir tmp;
  const std::string snap = tmp.file("snap");
  const std::string flags = "--transport=tcp --snapshot_dir=" + snap;
  auto daemon = std::make_unique<Daemon>(flags, tmp.file("node0.log"));
  std::string nodes = " --memory_nodes=" + daemon->address();
  ASSERT_EQ(RunDmg("load --graph=kron:15" + nodes).exit_code, 0);
  const std::string run = std::string(DMG_BINARY) +
                          " run --algo=pagerank --tolerance=0 --max_iters=100 "
                          "--cache_mb=1 --threads=1 --checkpoint_interval=0 "
                          "--progress=false";
  const auto t0 = std::chrono::steady_clock::now();
  testing::CommandResult ref = RunCommand(
      run + nodes + " --job=reference --output=" + tmp.file("reference.out"));
  const double uninterrupted =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  ASSERT_EQ(ref.exit_code, 0) << ref.err;
  const std::string want = SlurpFile(tmp.file("reference.out"));
  ASSERT_FALSE(want.empty());
  // Without --snapshot_dir a node refuses, with one line.
  {
    Daemon plain("--transport=tcp", tmp.file("plain.log"));
    testing::CommandResult r =
        RunDmg("snapshot --memory_nodes=" + plain.address());
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("without --snapshot_dir"), std::string::npos) << r.err;
  }
  constexpr int kTrials = 3;
  int resumed = 0, identical = 0, left_out = 0;
  for (int trial = 0; trial < kTrials; ++trial) {
    const std::string job = "snap-pr-" + std::to_string(trial);
    const std::string out = tmp.file(job + ".out");
    // A kill before the job's first superstep leaves nothing to keep (it
    // had not asked the memory node to keep its state yet), and a kill after
    // its end finds nothing to kill: right, but neither is this test's case.
    // Under load (ctest -j2 in CI) a kill at a fraction of the uninterrupted
    // time has landed in both, so such an attempt is made again, killed
    // later or earlier.
    testing::CommandResult first, taken;
    bool kept = false;
    // Killed at 30%, 50%, 70% of the uninterrupted time; before that, a
    // snapshot while it runs.
    double fraction = 0.3 + 0.2 * trial;
    for (int attempt = 0; attempt < 6 && !kept; ++attempt) {
      std::remove(out.c_str());
      const double delay = uninterrupted * fraction;
      first = RunCommand(
          "(" + run + nodes + " --job=" + job + " --output=" + out +
          " >/dev/null 2>&1 & pid=$!; sleep " + std::to_string(delay / 2) +
          "; " + DMG_BINARY + " snapshot --jobs" + nodes + "; sleep " +
          std::to_string(delay / 2) +
          "; kill -9 $pid 2>/dev/null; wait $pid; echo exit=$?)");
      if (first.out.find("exit=0") != std::string::npos) {
        std::printf(
            "trial %d: finished before the kill at %.2f s; again, "
            "earlier\n",
            trial, delay);
        fraction *= 0.6;
        continue;
      }
      // (The daemon may take a moment to see the killed node's connections
      // close; until then the job counts as running.)
      ASSERT_TRUE(WaitFor([&] {
        taken = RunDmg("snapshot --jobs" + nodes);
        return taken.exit_code == 0 &&
               (taken.out.find("1 job(s)") != std::string::npos ||
                taken.out.find("running job(s) left out") == std::string::npos);
      })) << taken.out
          << taken.err;
      kept = taken.out.find("1 job(s)") != std::string::npos;
      if (!kept) {
        std::printf(
            "trial %d: killed before its first superstep (%.2f s), "
            "nothing kept; again, later\n",
            trial, delay);
        fraction = std::min(0.95, fraction + 0.15);
      }
    }
    ASSERT_TRUE(kept) << "trial " << trial << ": " << taken.out << taken.err;
    left_out +=
        first.out.find("1 running job(s) left out") != std::string::npos;
    daemon->Signal(SIGKILL);
    daemon->Wait();
    daemon = std::make_unique<Daemon>(
        flags, tmp.file("node" + std::to_string(trial + 1) + ".log"));
    nodes = " --memory_nodes=" + daemon->address();
    testing::CommandResult again =
        RunCommand(run + nodes + " --resume --job=" + job + " --output=" + out);
    EXPECT_EQ(again.exit_code, 0) << again.err << daemon->log();
    resumed += std::regex_search(again.out,
                                 std::regex("resumed after superstep [1-9]"));
    if (SlurpFile(out) == want) {
      ++identical;
    } else {
      ADD_FAILURE() << "trial " << trial << ": output differs";
    }
  }
  EXPECT_EQ(resumed, kTrials);
  EXPECT_EQ(identical, kTrials);
  EXPECT_GE(left_out, 1);
  // Every resumed job finished and freed its state.
  testing::CommandResult status = RunDmg("status" + nodes);
  EXPECT_NE(status.out.find(" 0 job regions"), std::string::npos) << status.out;
  std::printf(
      "%d PageRank jobs killed mid-run (uninterrupted %.2f s), snapshotted "
      "with --jobs, their memory node killed and restarted from the "
      "snapshot: %d resumed after a completed superstep, %d outputs "
      "identical; %d snapshots taken while the job ran left it out\n",
      kTrials, uninterrupted, resumed, identical, left_out);
}

}  // namespace
}  // namespace dmg

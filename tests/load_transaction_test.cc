// Issue 13, build item 3: loads are transactions. A load writes a staging
// region beside the store and switches only when every node has its slice;
// a killed load leaves the old store serving; a load is refused while a job
// holds the store, and `--force` makes that job fail instead of reading a
// mix of two graphs. In-process against a real TcpServer first (raw frames),
// then as an operator meets it: 20 loads during jobs, 20 killed loads.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "memory_node/memory_node.h"
#include "tests/daemon_util.h"
#include "tests/raw_wire_client.h"
#include "tests/test_util.h"
#include "transport/tcp_server.h"
#include "transport/wire.h"

namespace dmg {
namespace {

namespace wire = transport::wire;
using testing::RawClient;
using testing::Request;
using transport::Role;

std::string Batch(transport::OpKind kind, uint32_t region, uint64_t offset,
                  const std::string& data_or_length) {
  std::string p;
  wire::Writer w(&p);
  w.Put(uint32_t{1});
  wire::WireOp op{};
  op.kind = static_cast<uint8_t>(kind);
  op.region = region;
  op.offset = offset;
  op.length = kind == transport::OpKind::kWrite
                  ? data_or_length.size()
                  : static_cast<uint32_t>(std::stoul(data_or_length));
  w.Put(op);
  if (kind == transport::OpKind::kWrite) p += data_or_length;
  return p;
}

std::string ReadStore(RawClient& c, absl::Status* status) {
  std::string reply;
  *status = Request(c, wire::kBatch, Batch(transport::OpKind::kRead, 0, 0, "4"),
                    &reply);
  return reply;
}

// Stages `bytes` as a new store on `admin`'s connection; returns its id.
uint32_t Stage(RawClient& admin, const std::string& bytes) {
  std::string req, reply;
  wire::Writer w(&req);
  w.Put(uint64_t{bytes.size()});
  w.Put(uint32_t{0});
  w.Put(uint64_t{42});
  EXPECT_TRUE(Request(admin, wire::kCreateStore, req, &reply).ok());
  wire::Reader r(reply.data(), reply.size());
  transport::RegionInfo staging;
  EXPECT_TRUE(wire::GetRegion(r, 0, &staging));
  EXPECT_NE(staging.id, transport::kStoreRegion);
  EXPECT_TRUE(Request(admin, wire::kBatch,
                      Batch(transport::OpKind::kWrite, staging.id, 0, bytes))
                  .ok());
  return staging.id;
}

absl::Status Commit(RawClient& admin, uint8_t flags) {
  std::string req;
  wire::Writer(&req).Put(flags);
  return Request(admin, wire::kCommitStore, req);
}

class StagedNode {
 public:
  StagedNode() {
    AlignedBuffer store(4096);
    std::memcpy(store.data(), "OLD!", 4);
    EXPECT_TRUE(node_.LoadStore(std::move(store)).ok());
    auto s = transport::TcpServer::Start(&node_, "127.0.0.1", 0, {});
    EXPECT_TRUE(s.ok()) << s.status();
    server_ = *std::move(s);
  }
  uint16_t port() const { return server_->port(); }
  memory_node::MemoryNode& node() { return node_; }

 private:
  memory_node::MemoryNode node_{0};
  std::unique_ptr<transport::TcpServer> server_;
};

TEST(LoadTransactionTest, AKilledLoadLeavesTheOldStoreServing) {
  StagedNode n;
  {
    RawClient loader(n.port());
    ASSERT_TRUE(loader.Hello(Role::kAdmin, "load").ok());
    Stage(loader, std::string("NEW!") + std::string(4092, 'n'));
    // The loader dies before committing.
  }
  RawClient job(n.port());
  ASSERT_TRUE(job.Hello(Role::kJob, "j").ok());
  absl::Status s;
  EXPECT_EQ(ReadStore(job, &s), "OLD!");
  EXPECT_TRUE(s.ok()) << s;
  // The staging region went with the loader's connection.
  for (int wait = 0; wait < 100 && n.node().ServeList().size() > 1; ++wait) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(n.node().ServeList().size(), 1u);
  // A job cannot stage or commit.
  EXPECT_TRUE(absl::IsPermissionDenied(Commit(job, 0)));
}

TEST(LoadTransactionTest, ALoadIsRefusedWhileAJobHoldsTheStoreAndForceFailsIt) {
  StagedNode n;
  RawClient job(n.port()), job_again(n.port());
  ASSERT_TRUE(job.Hello(Role::kJob, "pagerank-1").ok());
  absl::Status s;
  EXPECT_EQ(ReadStore(job, &s), "OLD!");
  // A running job has its state on the node (a connection that only said
  // hello holds nothing a load could break).
  std::string state;
  wire::Writer sw(&state);
  sw.Put(uint64_t{64});
  sw.PutString("pagerank.score");
  ASSERT_TRUE(testing::Request(job, wire::kAllocate, state).ok());
  RawClient loader(n.port());
  ASSERT_TRUE(loader.Hello(Role::kAdmin, "load").ok());
  Stage(loader, "NEW!");
  absl::Status refused = Commit(loader, wire::kCommitCheckOnly);
  EXPECT_TRUE(absl::IsFailedPrecondition(refused)) << refused;
  EXPECT_NE(refused.message().find("pagerank-1"), std::string::npos);
  refused = Commit(loader, 0);
  EXPECT_TRUE(absl::IsFailedPrecondition(refused)) << refused;
  EXPECT_EQ(ReadStore(job, &s), "OLD!");  // still the old store
  // Forced: the job's next READ of the store fails; never the new bytes.
  ASSERT_TRUE(Commit(loader, wire::kCommitForce).ok());
  std::string after = ReadStore(job, &s);
  EXPECT_TRUE(absl::IsAborted(s)) << s << " read " << after;
  EXPECT_NE(s.message().find("--force"), std::string::npos) << s;
  // A new connection of the same job belongs to the old store too.
  ASSERT_TRUE(job_again.Hello(Role::kJob, "pagerank-1").ok());
  ReadStore(job_again, &s);
  EXPECT_TRUE(absl::IsAborted(s)) << s;
  // A new job reads the new store.
  RawClient next(n.port());
  ASSERT_TRUE(next.Hello(Role::kJob, "pagerank-2").ok());
  EXPECT_EQ(ReadStore(next, &s), "NEW!");
  EXPECT_TRUE(s.ok()) << s;
}

// ------------------------------------------------------------ processes

using testing::Daemon;
using testing::RunCommand;
using testing::RunDmg;

constexpr int kTrials = 20;

// The probes: `dmg load` of another graph in the middle of a
// verified job (20 trials), with and without --force; and `dmg load` killed
// at a random moment (20 trials), after which the previous store serves a
// verified job.
TEST(LoadTransactionProcessTest, LoadsDuringJobsNeverGiveAWrongAnswer) {
  testing::TempDir dir;
  Daemon node("--transport=tcp", dir.file("node.log"));
  const std::string nodes = " --memory_nodes=" + node.address();
  ASSERT_EQ(RunDmg("load --graph=kron:16" + nodes).exit_code, 0);
  // A PageRank of 100 iterations on kron:16 (a second or two here; with a
  // 1 MB cache it reads the store every iteration). The loads start at a
  // drawn moment inside its run, as long as it lasts on this machine.
  const std::string run = std::string(DMG_BINARY) +
                          " run --algo=pagerank --tolerance=0 --max_iters=100"
                          " --graph=kron:16 --verify --threads=1"
                          " --cache_mb=1" +
                          nodes;
  const std::string job =
      run + " > " + dir.file("job.out") + " 2>" + dir.file("job.err");
  const auto t0 = std::chrono::steady_clock::now();
  const testing::CommandResult alone = RunCommand(run);
  ASSERT_EQ(alone.exit_code, 0) << alone.err;
  const double job_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  std::printf("the job takes %.0f ms here\n", job_s * 1e3);
  std::mt19937 rng(13);
  int refused = 0, forced_failed = 0, verified = 0, wrong = 0;
  for (int trial = 0; trial < kTrials; ++trial) {
    const bool force = trial % 4 == 3;
    const int delay_ms = static_cast<int>(
        std::uniform_real_distribution<>(0.1, 0.7)(rng) * job_s * 1e3);
    testing::CommandResult r = RunCommand(
        "(" + job + " & pid=$!; sleep " + std::to_string(delay_ms / 1000.0) +
        "; " + DMG_BINARY + " load --graph=kron:13" + nodes +
        (force ? " --force" : "") + " > " + dir.file("load.out") + " 2>&1; " +
        "echo load=$?; wait $pid; echo job=$?)");
    const std::string out = testing::Slurp(dir.file("job.out"));
    const std::string err = testing::Slurp(dir.file("job.err"));
    const bool load_ok = r.out.find("load=0") != std::string::npos;
    const bool job_ok = r.out.find("job=0") != std::string::npos;
    if (job_ok) {
      if (out.find("verify: OK") == std::string::npos) ++wrong;
      ++verified;
    } else {
      // Only a forced load may fail a job, and it says why.
      EXPECT_TRUE(force) << err;
      EXPECT_NE(err.find("dmg load --force"), std::string::npos) << err;
      ++forced_failed;
    }
    if (!load_ok) {
      EXPECT_NE(testing::Slurp(dir.file("load.out")).find("in use by"),
                std::string::npos)
          << testing::Slurp(dir.file("load.out"));
      ++refused;
    }
    // Back to kron:16 for the next trial if the load went through.
    if (load_ok) {
      ASSERT_EQ(RunDmg("load --graph=kron:16" + nodes).exit_code, 0);
    }
  }
  EXPECT_EQ(wrong, 0);
  EXPECT_GT(refused, 0);
  std::printf(
      "%d loads during jobs: %d refused, %d forced jobs failed "
      "cleanly, %d jobs verified, %d wrong answers\n",
      kTrials, refused, forced_failed, verified, wrong);
}

// How many lines of `text` contain `what`.
int CountLines(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos;
       at = text.find(what, at + what.size())) {
    ++n;
  }
  return n;
}

// What the memory node's log says of a load that was killed: whether it
// staged (" stages "), and then either committed or ended without a commit
// (a line written when the server takes the connection's end, which it
// does after every request that was sent on it).
enum class KillLanded { kBeforeStaging, kMidWay, kAfterCommit };

KillLanded WhereTheKillLanded(const testing::Daemon& node, int staged_before,
                              int ended_before, int committed_before) {
  // A request sent just before the kill may still be in the socket: a load
  // not seen staging is taken as unstaged after a second, and a staged one
  // must show its commit or its end within ten.
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    const std::string log = node.log();
    if (CountLines(log, " committed: ") > committed_before) {
      return KillLanded::kAfterCommit;
    }
    if (CountLines(log, " ended before its commit") > ended_before) {
      return KillLanded::kMidWay;
    }
    const bool staged = CountLines(log, " stages ") > staged_before;
    const auto waited = std::chrono::steady_clock::now() - start;
    if (!staged && waited > std::chrono::seconds(1)) {
      return KillLanded::kBeforeStaging;
    }
    if (waited > std::chrono::seconds(10)) {
      ADD_FAILURE() << "a staged load neither committed nor ended:\n" << log;
      return KillLanded::kAfterCommit;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// Starts `dmg load ARGS` and kills it `delay_s` after the memory node logs
// its staging (so the kill lands inside the upload, whatever the build
// before it took on this machine). Returns where the kill landed.
KillLanded KillALoadMidWay(const testing::Daemon& node, const std::string& args,
                           double delay_s) {
  const std::string log = node.log();
  const int staged = CountLines(log, " stages ");
  const int ended = CountLines(log, " ended before its commit");
  const int committed = CountLines(log, " committed: ");
  const pid_t pid = fork();
  if (pid == 0) {
    const std::string cmd = std::string("exec ") + DMG_BINARY + " load " +
                            args + " >/dev/null 2>&1";
    execl("/bin/sh", "sh", "-c", cmd.c_str(), nullptr);
    _exit(127);
  }
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(30);
  int status = 0;
  bool exited = false;
  while (CountLines(node.log(), " stages ") == staged &&
         std::chrono::steady_clock::now() < deadline) {
    if (waitpid(pid, &status, WNOHANG) == pid) {
      exited = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  if (!exited) {
    std::this_thread::sleep_for(std::chrono::duration<double>(delay_s));
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  return WhereTheKillLanded(node, staged, ended, committed);
}

// The kill delays are drawn inside the load's upload (from the staging
// region's creation to the commit), whose length is measured first on
// this machine, and counted from the moment the memory node logs the
// staging. A kill that landed after the commit anyway (loads vary) is made
// again, earlier, up to kRedos times a trial, each said.
TEST(LoadTransactionProcessTest, AKilledLoadLeavesThePreviousStoreServing) {
  testing::TempDir dir;
  Daemon node("--transport=tcp", dir.file("node.log"));
  const std::string nodes = " --memory_nodes=" + node.address();
  // The upload's length: the median of three whole loads (the first is
  // often slow, on cold caches), as the loader reports it.
  std::vector<double> uploads;
  for (int i = 0; i < 3; ++i) {
    testing::CommandResult whole = RunDmg("load --graph=kron:16" + nodes);
    ASSERT_EQ(whole.exit_code, 0) << whole.err;
    const size_t in = whole.out.find("memory node(s) in ");
    ASSERT_NE(in, std::string::npos) << whole.out;
    uploads.push_back(std::stod(whole.out.substr(in + 18)));
  }
  std::sort(uploads.begin(), uploads.end());
  const double upload_s = uploads[1];
  std::printf("a load of kron:16 uploads in %.1f ms here\n", upload_s * 1e3);
  ASSERT_EQ(RunDmg("load --graph=kron:14" + nodes).exit_code, 0);

  constexpr int kRedos = 6;
  std::mt19937 rng(7);
  int killed = 0, verified = 0, redone = 0;
  for (int trial = 0; trial < kTrials; ++trial) {
    KillLanded landed = KillLanded::kBeforeStaging;
    double hi = upload_s;
    for (int attempt = 0; attempt <= kRedos; ++attempt) {
      const double delay_s = std::uniform_real_distribution<>(0, hi)(rng);
      landed = KillALoadMidWay(node, "--graph=kron:16" + nodes, delay_s);
      if (landed == KillLanded::kMidWay) break;
      std::printf("trial %d: the kill %.1f ms after the staging landed %s\n",
                  trial, delay_s * 1e3,
                  landed == KillLanded::kAfterCommit
                      ? "after the commit; again, earlier"
                      : "before it (the loader ended first); again");
      ++redone;
      if (landed == KillLanded::kAfterCommit) {
        hi = delay_s;  // the new graph serves: put kron:14 back
        ASSERT_EQ(RunDmg("load --graph=kron:14" + nodes).exit_code, 0);
      }
    }
    if (landed != KillLanded::kMidWay) continue;
    ++killed;
    testing::CommandResult job =
        RunDmg("run --algo=bfs --graph=kron:14 --verify" + nodes);
    EXPECT_EQ(job.exit_code, 0) << job.err;
    if (job.out.find("verify: OK") != std::string::npos) ++verified;
  }
  EXPECT_GE(killed, kTrials / 2);
  EXPECT_EQ(verified, killed);
  std::printf(
      "%d loads: %d killed mid-way (%d kills made again), after each the "
      "previous store served a verified job %d times\n",
      kTrials, killed, redone, verified);
}

}  // namespace
}  // namespace dmg

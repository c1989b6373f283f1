// Issue 13, build item 6, as an operator meets it: a compute node killed
// (SIGKILL, at a seeded random moment) in the middle of a PageRank or a
// BFS against a `dmg memory-node` daemon, then `dmg run --resume` of the
// same job: 20 trials each, and the output must be byte-identical to an
// uninterrupted run's every time. Also: a resume with other arguments is
// refused, and one while the job still runs elsewhere too; and with
// --max_retries, a job whose connections all drop (a proxy between it and
// the memory node cuts them) reconnects and resumes by itself.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <mutex>
#include <random>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/daemon_util.h"
#include "tests/kill_resume.h"
#include "tests/test_util.h"

namespace dmg {
namespace {

using testing::Daemon;
using testing::RunCommand;
using testing::RunDmg;
using testing::Slurp;

constexpr int kTrials = 20;

struct Case {
  const char* name;
  std::string graph;  // loaded into the memory node
  std::string args;   // the run's algorithm arguments
};

std::string JobName(const char* algo, int trial) {
  return std::string("resume-") + algo + "-" + std::to_string(trial);
}

class ResumeProcessTest : public ::testing::TestWithParam<Case> {};

TEST_P(ResumeProcessTest, AKilledComputeNodeResumesWithIdenticalOutput) {
  const Case& c = GetParam();
  testing::TempDir dir;
  Daemon node("--transport=tcp", dir.file("node.log"));
  const std::string nodes = " --memory_nodes=" + node.address();
  ASSERT_EQ(RunDmg("load --graph=" + c.graph + nodes).exit_code, 0);
  // One thread and a small cache: slow enough to be killed in the middle;
  // every superstep a checkpoint, so that most kills resume.
  const std::string run = std::string(DMG_BINARY) + " run " + c.args +
                          " --threads=1 --checkpoint_interval=0 "
                          "--progress=false" +
                          nodes;
  const testing::Reference ref = testing::RunReference(run, dir);
  ASSERT_FALSE(ref.output.empty());
  const double uninterrupted = ref.seconds;
  const std::string& want = ref.output;

  std::mt19937 rng(20261202);
  testing::KillResumeTrials t;
  t.name = c.name;
  t.trials = kTrials;
  t.uninterrupted_s = uninterrupted;
  t.want = want;
  t.dir = &dir;
  t.job = [&](int trial, int attempt) {
    return JobName(c.name, trial) +
           (attempt ? "-" + std::to_string(attempt) : "");
  };
  // Anywhere from connecting to the last superstep.
  t.run = run;
  t.kill = [](const std::string&, int) {
    return std::string("kill -9 $pid 2>/dev/null");
  };
  testing::RunKillResumeTrials(t, rng);
  // Every job finished: nothing of theirs is left on the memory node.
  testing::CommandResult status = RunDmg("status" + nodes);
  EXPECT_NE(status.out.find(" 0 job regions"), std::string::npos)
      << status.out << status.err;
}

INSTANTIATE_TEST_SUITE_P(
    Algorithms, ResumeProcessTest,
    ::testing::Values(
        // 100 iterations (tolerance 0) that read the store every time;
        // the state arrays are resident.
        Case{"pagerank", "kron:15",
             "--algo=pagerank --tolerance=0 --max_iters=100 --cache_mb=1"},
        // 15 levels; the depths are paged through a 0.5 MB cache.
        Case{"bfs", "urand:18:2", "--algo=bfs --source=random --cache_mb=0.5"}),
    [](const auto& info) { return std::string(info.param.name); });

// Stopped at a chosen superstep (the DMG_TEST_EXIT_AFTER_SUPERSTEP hook:
// exit 9, nothing cleaned up, as a kill), where a random kill rarely lands:
// between Afforest's two phases, whose first takes most of the time.
TEST(ResumeAtASuperstepTest, AfforestResumesBetweenItsPhases) {
  testing::TempDir dir;
  Daemon node("--transport=tcp", dir.file("node.log"));
  const std::string nodes = " --memory_nodes=" + node.address();
  ASSERT_EQ(RunDmg("load --graph=kron:14" + nodes).exit_code, 0);
  const std::string run = std::string(DMG_BINARY) +
                          " run --algo=cc --threads=2 --cache_mb=0.5 "
                          "--checkpoint_interval=0 --progress=false" +
                          nodes;
  const testing::Reference ref = testing::RunReference(run, dir);
  ASSERT_FALSE(ref.output.empty());
  testing::CommandResult killed =
      RunCommand("DMG_TEST_EXIT_AFTER_SUPERSTEP=1 " + run +
                 " --job=cc --output=" + dir.file("cc.out"));
  EXPECT_EQ(killed.exit_code, 9) << killed.err;
  testing::CommandResult again =
      RunCommand(run + " --resume --job=cc --output=" + dir.file("cc.out"));
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.out.find("resumed after superstep 1"), std::string::npos)
      << again.out;
  EXPECT_EQ(Slurp(dir.file("cc.out")), ref.output);
}

// Weighted SSSP (delta-stepping) carries only its bucket's bound: each
// node's pending vertices are not recorded, and a resumed job takes every
// reached vertex as pending. Stopped in the middle of the buckets, on one
// compute node and on three (one process; --keep_state_s keeps the
// regions for the resume), it writes the uninterrupted run's distances.
TEST(ResumeAtASuperstepTest, DeltaSteppingResumesWithItsBoundAlone) {
  testing::TempDir dir;
  {
    // A 120 x 120 grid, both ways, weights 1-255.
    std::FILE* f = std::fopen(dir.file("grid.wel").c_str(), "w");
    ASSERT_NE(f, nullptr);
    for (int r = 0; r < 120; ++r) {
      for (int c = 0; c < 120; ++c) {
        const int v = r * 120 + c;
        for (int u : {c + 1 < 120 ? v + 1 : -1, r + 1 < 120 ? v + 120 : -1}) {
          if (u < 0) continue;
          const int w = (v * 7919 + u * 104729) % 255 + 1;
          std::fprintf(f, "%d %d %d\n%d %d %d\n", v, u, w, u, v, w);
        }
      }
    }
    std::fclose(f);
  }
  Daemon node("--transport=tcp", dir.file("node.log"));
  const std::string nodes = " --memory_nodes=" + node.address();
  ASSERT_EQ(RunDmg("load --graph=" + dir.file("grid.wel") + nodes).exit_code,
            0);
  for (const char* where : {"", " --compute_nodes=3"}) {
    SCOPED_TRACE(where);
    const std::string run = std::string(DMG_BINARY) +
                            " run --algo=sssp --source=0 --threads=1 "
                            "--checkpoint_interval=0 --keep_state_s=60 "
                            "--progress=false" +
                            nodes + where;
    const testing::Reference ref = testing::RunReference(run, dir);
    ASSERT_FALSE(ref.output.empty());
    const std::string job = std::string(" --job=ds") + (*where ? "3" : "1");
    const std::string out = " --output=" + dir.file("ds.out");
    testing::CommandResult killed =
        RunCommand("DMG_TEST_EXIT_AFTER_SUPERSTEP=20 " + run + job + out);
    EXPECT_EQ(killed.exit_code, 9) << killed.err;
    testing::CommandResult again = RunCommand(run + " --resume" + job + out);
    EXPECT_EQ(again.exit_code, 0) << again.err;
    EXPECT_NE(again.out.find("resumed after superstep 20"), std::string::npos)
        << again.out;
    EXPECT_EQ(Slurp(dir.file("ds.out")), ref.output);
  }
}

// With --checkpoint_interval=N a superstep's end is a checkpoint every N
// supersteps: a job stopped between two goes on from the last one, with
// the output of a job that checkpoints every superstep.
TEST(ResumeAtASuperstepTest, ACheckpointIntervalResumesFromTheLastCheckpoint) {
  testing::TempDir dir;
  Daemon node("--transport=tcp", dir.file("node.log"));
  const std::string nodes = " --memory_nodes=" + node.address();
  ASSERT_EQ(RunDmg("load --graph=kron:14" + nodes).exit_code, 0);
  struct Job {
    std::string args;
    int interval, stop, resumed;
  };
  for (const Job& j :
       {Job{"--algo=pagerank --tolerance=0 --max_iters=12", 4, 6, 4},
        Job{"--algo=bfs --source=1 --cache_mb=0.5", 2, 3, 2},
        Job{"--algo=cc_lp --cache_mb=0.5", 3, 2, 0}}) {
    SCOPED_TRACE(j.args);
    const std::string run = std::string(DMG_BINARY) + " run " + j.args +
                            " --threads=2 --progress=false" + nodes;
    const testing::Reference every =
        testing::RunReference(run + " --checkpoint_interval=0", dir);
    ASSERT_FALSE(every.output.empty());
    const std::string interval =
        " --checkpoint_interval=" + std::to_string(j.interval);
    const std::string out = " --output=" + dir.file("job.out");
    testing::CommandResult killed =
        RunCommand("DMG_TEST_EXIT_AFTER_SUPERSTEP=" + std::to_string(j.stop) +
                   " " + run + interval + " --job=ci" + out);
    EXPECT_EQ(killed.exit_code, 9) << killed.err;
    testing::CommandResult again =
        RunCommand(run + interval + " --resume --job=ci" + out);
    EXPECT_EQ(again.exit_code, 0) << again.err;
    if (j.resumed > 0) {
      EXPECT_NE(again.out.find("resumed after superstep " +
                               std::to_string(j.resumed)),
                std::string::npos)
          << again.out;
    } else {
      // Stopped before its first checkpoint: it starts again.
      EXPECT_EQ(again.out.find("resumed after"), std::string::npos)
          << again.out;
    }
    EXPECT_EQ(Slurp(dir.file("job.out")), every.output);
  }
  // The default (auto: every 64 supersteps or 1 s, whichever comes
  // first): stopped after superstep 70, a job goes on from its last
  // checkpoint, wherever this machine's speed put it, with the same output.
  {
    const std::string run = std::string(DMG_BINARY) +
                            " run --algo=pagerank --tolerance=0 "
                            "--max_iters=80 --threads=2 --progress=false" +
                            nodes;
    const testing::Reference every =
        testing::RunReference(run + " --checkpoint_interval=0", dir);
    const std::string out = " --output=" + dir.file("auto.out");
    testing::CommandResult killed = RunCommand(
        "DMG_TEST_EXIT_AFTER_SUPERSTEP=70 " + run + " --job=auto" + out);
    EXPECT_EQ(killed.exit_code, 9) << killed.err;
    testing::CommandResult again =
        RunCommand(run + " --resume --job=auto" + out);
    EXPECT_EQ(again.exit_code, 0) << again.err;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(again.out, m,
                                  std::regex("resumed after superstep (\\d+)")))
        << again.out;
    // At least one checkpoint in any 64 supersteps.
    EXPECT_GE(std::stoi(m[1].str()), 7);
    EXPECT_LE(std::stoi(m[1].str()), 70);
    EXPECT_EQ(Slurp(dir.file("auto.out")), every.output);
  }
  // A malformed interval is one line and exit 2.
  testing::CommandResult bad =
      RunDmg("run --algo=bfs --graph=kron:8 --checkpoint_interval=often");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--checkpoint_interval"), std::string::npos)
      << bad.err;
}

// Shell: waits until the memory node holds some job's state.
std::string WaitForJobState(const std::string& nodes) {
  return std::string("for i in $(seq 200); do ") + DMG_BINARY + " status" +
         nodes + " | grep -q ' 0 job regions' || break; sleep 0.05; done; ";
}

TEST(ResumeRefusalTest, OtherArgumentsOrAJobStillRunningAreRefused) {
  testing::TempDir dir;
  Daemon node("--transport=tcp", dir.file("node.log"));
  const std::string nodes = " --memory_nodes=" + node.address();
  ASSERT_EQ(RunDmg("load --graph=kron:15" + nodes).exit_code, 0);
  const std::string run = std::string(DMG_BINARY) +
                          " run --algo=pagerank --tolerance=0 --threads=1 "
                          "--cache_mb=1 --progress=false --job=pr" +
                          nodes;
  // Still running elsewhere: refused (with or without --resume), and the
  // running job is untouched. The running job is stopped (SIGSTOP: its
  // connections stay open) once its state is on the memory node, so that
  // it cannot finish before the others are refused, however fast or slow
  // this machine is at that moment.
  testing::CommandResult both =
      RunCommand("(" + run + " --max_iters=1000 --output=" + dir.file("a.out") +
                 " >/dev/null 2>&1 & pid=$!; " + WaitForJobState(nodes) +
                 "kill -STOP $pid; " + run + " --max_iters=1000 --resume >" +
                 dir.file("b.out") + " 2>&1; echo b=$?; " + run +
                 " --max_iters=1000 >" + dir.file("c.out") + " 2>&1; " +
                 "kill -9 $pid; kill -CONT $pid; wait $pid)");
  EXPECT_EQ(both.out.find("b=0"), std::string::npos)
      << Slurp(dir.file("b.out"));
  EXPECT_NE(Slurp(dir.file("b.out")).find("still connected"), std::string::npos)
      << Slurp(dir.file("b.out"));
  EXPECT_NE(Slurp(dir.file("c.out")).find("give this run another --job"),
            std::string::npos)
      << Slurp(dir.file("c.out"));
  // The killed job, resumed with other arguments: refused.
  testing::CommandResult other = RunCommand(run + " --max_iters=50 --resume");
  EXPECT_NE(other.exit_code, 0);
  EXPECT_NE(other.err.find("another algorithm, source, arguments, graph"),
            std::string::npos)
      << other.err;
  // With its own arguments it finishes.
  testing::CommandResult same = RunCommand(run + " --max_iters=1000 --resume");
  EXPECT_EQ(same.exit_code, 0) << same.err;
  // --resume needs a job name and daemons; --max_retries, with several
  // compute nodes, the nodes dmg run starts itself.
  EXPECT_EQ(RunDmg("run --algo=bfs --graph=kron:10 --resume").exit_code, 2);
  EXPECT_EQ(RunDmg("run --algo=bfs --resume" + nodes).exit_code, 2);
  testing::CommandResult alone = RunDmg(
      "run --algo=bfs --compute_nodes=2 --compute_node_id=1 --job=x "
      "--max_retries=1" +
      nodes);
  EXPECT_EQ(alone.exit_code, 2);
  EXPECT_NE(alone.err.find("--compute_node_id"), std::string::npos)
      << alone.err;
}

// A TCP proxy to a memory node whose connections the test can cut (the
// network lost, the memory node still up).
class Proxy {
 public:
  explicit Proxy(uint16_t upstream) : upstream_(upstream) {
    listen_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    EXPECT_EQ(bind(listen_, reinterpret_cast<sockaddr*>(&a), len), 0);
    EXPECT_EQ(listen(listen_, 64), 0);
    getsockname(listen_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    threads_.emplace_back([this] { Accept(); });
  }
  ~Proxy() {
    shutdown(listen_, SHUT_RDWR);
    close(listen_);
    DropAll();
    for (std::thread& t : threads_) t.join();
    for (int fd : fds_) close(fd);
  }
  uint16_t port() const { return port_; }
  // Cuts every connection made so far.
  void DropAll() {
    std::lock_guard lock(mu_);
    for (int fd : fds_) shutdown(fd, SHUT_RDWR);
  }

 private:
  void Accept() {
    while (true) {
      int client = accept(listen_, nullptr, nullptr);
      if (client < 0) return;
      int server = socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      a.sin_port = htons(upstream_);
      if (connect(server, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
        close(client);
        close(server);
        continue;
      }
      std::lock_guard lock(mu_);
      fds_.push_back(client);
      fds_.push_back(server);
      threads_.emplace_back([=] { Pump(client, server); });
      threads_.emplace_back([=] { Pump(server, client); });
    }
  }
  static void Pump(int from, int to) {
    char buffer[1 << 16];
    while (true) {
      const ssize_t n = read(from, buffer, sizeof(buffer));
      if (n <= 0) break;
      for (ssize_t at = 0; at < n;) {
        // (send, not write: a peer already gone is an error here, not a
        // SIGPIPE that kills the test)
        const ssize_t w = send(to, buffer + at, n - at, MSG_NOSIGNAL);
        if (w <= 0) {
          shutdown(from, SHUT_RDWR);
          return;
        }
        at += w;
      }
    }
    shutdown(to, SHUT_RDWR);
  }

  uint16_t upstream_, port_ = 0;
  int listen_ = -1;
  std::mutex mu_;
  std::vector<int> fds_;
  std::vector<std::thread> threads_;
};

TEST(ResumeRetryTest, MaxRetriesResumesAJobWhoseConnectionsDropped) {
  testing::TempDir dir;
  Daemon node("--transport=tcp", dir.file("node.log"));
  ASSERT_EQ(
      RunDmg("load --graph=kron:15 --memory_nodes=" + node.address()).exit_code,
      0);
  const std::string args =
      " run --algo=pagerank --tolerance=0 --max_iters=100 --threads=1 "
      "--cache_mb=1 --checkpoint_interval=0 --progress=false";
  const auto t0 = std::chrono::steady_clock::now();
  testing::CommandResult ref =
      RunDmg(args + " --memory_nodes=" + node.address() +
             " --job=reference --output=" + dir.file("reference.out"));
  ASSERT_EQ(ref.exit_code, 0) << ref.err;
  const double uninterrupted = testing::SecondsSince(t0);
  const uint16_t port =
      static_cast<uint16_t>(std::stoi(node.address().substr(10)));
  // The connections drop at a moment drawn from the uninterrupted run's
  // length here: a drop must land after the first superstep (else the job
  // starts again rather than resumes) and before the end (else nothing is
  // dropped). An attempt that missed either way is made again, later or
  // earlier, up to kAttempts times, each said; every attempt's output must
  // equal the reference.
  constexpr int kAttempts = 5;
  double lo = 0.1, hi = 0.9;  // of the uninterrupted run
  bool resumed = false;
  for (int attempt = 1; attempt <= kAttempts && !resumed; ++attempt) {
    const double at = (lo + hi) / 2;
    Proxy proxy(port);
    testing::CommandResult r;
    const std::string job_name = "net" + std::to_string(attempt);
    std::thread job([&] {
      r = RunDmg(args + " --max_retries=3 --job=" + job_name +
                 " --memory_nodes=127.0.0.1:" + std::to_string(proxy.port()) +
                 " --output=" + dir.file("net.out"));
    });
    std::this_thread::sleep_for(
        std::chrono::duration<double>(at * uninterrupted));
    proxy.DropAll();
    job.join();
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(Slurp(dir.file("net.out")), Slurp(dir.file("reference.out")));
    const bool dropped = r.err.find("attempt 1 failed") != std::string::npos;
    resumed =
        dropped && r.out.find("resumed after superstep") != std::string::npos;
    if (resumed) break;
    std::printf(
        "attempt %d: connections dropped at %.0f%% of %.2f s %s; again, %s\n",
        attempt, at * 100, uninterrupted,
        dropped ? "before the first superstep ended" : "after the job ended",
        dropped ? "later" : "earlier");
    (dropped ? lo : hi) = at;
  }
  EXPECT_TRUE(resumed) << "no drop in " << kAttempts
                       << " attempts landed between the first superstep and "
                          "the end";
}

}  // namespace
}  // namespace dmg

// Memory nodes, loader and compute node as separate processes over tcp on
// loopback: outputs identical to the embedded cluster; a memory node killed
// (or frozen) mid-job ends the job within the timeout with a clear error; a
// killed compute node leaves the memory node serving the next job.
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "gtest/gtest.h"
#include "tests/daemon_util.h"
#include "tests/test_util.h"

namespace dmg {
namespace {

using testing::Daemon;
using testing::RunDmg;
using testing::TempDir;

std::string Slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// Loads `graph` into two memory nodes, runs every algorithm over tcp and on
// the embedded cluster, and requires byte-identical outputs.
void CompareWithEmbedded(const std::string& graph, const std::string& wgraph) {
  TempDir dir;
  Daemon a("--transport=tcp", dir.file("a.log"));
  Daemon b("--transport=tcp", dir.file("b.log"));
  std::string nodes = a.address() + "," + b.address();
  for (const std::string& g : {graph, wgraph}) {
    testing::CommandResult load =
        RunDmg("load --graph=" + g + " --memory_nodes=" + nodes);
    ASSERT_EQ(load.exit_code, 0) << load.err;
    std::vector<std::string> algos = {"sssp"};
    if (g == graph) algos = {"pagerank", "bfs", "cc"};
    for (const std::string& algo : algos) {
      std::string args = "run --algo=" + algo + " --threads=2 ";
      if (algo == "pagerank") args += "--tolerance=1e-10 --max_iters=1000 ";
      if (algo == "sssp" && g == graph) args += "--unit_weights ";
      std::string remote = dir.file(algo + ".tcp"), local = dir.file(algo);
      testing::CommandResult r =
          RunDmg(args + "--transport=tcp --memory_nodes=" + nodes +
                 " --output=" + remote);
      ASSERT_EQ(r.exit_code, 0) << algo << ": " << r.err;
      testing::CommandResult e =
          RunDmg(args + "--graph=" + g + " --output=" + local);
      ASSERT_EQ(e.exit_code, 0) << e.err;
      EXPECT_EQ(Slurp(remote), Slurp(local)) << algo << " on " << g;
      EXPECT_FALSE(Slurp(local).empty());
    }
  }
}

TEST(MultiProcessTest, Kron16MatchesEmbedded) {
  CompareWithEmbedded("kron:16", "kron:16");
}

TEST(MultiProcessTest, RealGraphsMatchEmbedded) {
  const char* dir = std::getenv("DMG_GRAPHS_DIR");
  if (dir == nullptr) GTEST_SKIP() << "DMG_GRAPHS_DIR not set";
  for (std::string g : {"ca-GrQc", "email-Enron", "wiki-Vote", "p2p-Gnutella31",
                        "rome99", "road-NY"}) {
    std::string base = std::string(dir) + "/" + g;
    std::string el =
        std::filesystem::exists(base + ".el") ? base + ".el" : base + ".wel";
    SCOPED_TRACE(g);
    CompareWithEmbedded(el, base + ".wel");
  }
}

// A job that runs long enough to be interrupted.
const char* kLongJob =
    "run --algo=pagerank --tolerance=0 --max_iters=100000 --threads=2 "
    "--transport=tcp --transport_timeout_ms=2000 --memory_nodes=";

TEST(MultiProcessTest, KilledMemoryNodeEndsTheJobWithAClearError) {
  for (int sig : {SIGKILL, SIGSTOP}) {
    TempDir dir;
    Daemon node("--transport=tcp", dir.file("node.log"));
    ASSERT_EQ(RunDmg("load --graph=kron:14 --memory_nodes=" + node.address())
                  .exit_code,
              0);
    testing::CommandResult result;
    auto start = std::chrono::steady_clock::now();
    std::thread job([&] { result = RunDmg(kLongJob + node.address()); });
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
    auto killed = std::chrono::steady_clock::now();
    node.Signal(sig);
    job.join();
    double after =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - killed)
            .count();
    SCOPED_TRACE(sig == SIGKILL ? "SIGKILL" : "SIGSTOP");
    EXPECT_GT(std::chrono::duration<double>(killed - start).count(), 0.5);
    EXPECT_NE(result.exit_code, 0);
    EXPECT_LT(result.exit_code, 128) << "crashed: " << result.exit_code;
    EXPECT_LT(after, 10.0) << "took " << after << " s to notice";
    EXPECT_NE(result.err.find("memory node 127.0.0.1:"), std::string::npos)
        << result.err;
    EXPECT_EQ(testing::ErrorLines(result.err).size(), 1u) << result.err;
  }
}

TEST(MultiProcessTest, KilledComputeNodeLeavesTheMemoryNodeServing) {
  TempDir dir;
  Daemon node("--transport=tcp", dir.file("node.log"));
  ASSERT_EQ(
      RunDmg("load --graph=kron:14 --memory_nodes=" + node.address()).exit_code,
      0);
  // Kill a running job with SIGKILL (the test's shell runs it in the
  // background and kills it).
  testing::CommandResult killed = testing::RunCommand(
      std::string("(") + DMG_BINARY + " " + kLongJob + node.address() +
      " & pid=$!; sleep 0.7; kill -9 $pid; wait $pid; exit 0)");
  EXPECT_EQ(killed.exit_code, 0);
  // The next jobs run, and their results are right.
  for (std::string algo : {"bfs", "cc"}) {
    testing::CommandResult r =
        RunDmg("run --algo=" + algo + " --transport=tcp --memory_nodes=" +
               node.address() + " --graph=kron:14 --verify");
    EXPECT_EQ(r.exit_code, 0) << r.err;
  }
  // The dead job's state regions were freed when its connections closed.
  EXPECT_NE(node.log().find("disconnected; freed its"), std::string::npos)
      << node.log();
  node.Signal(SIGTERM);
  int status = node.Wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

TEST(MultiProcessTest, BadAddressesAreBadInput) {
  EXPECT_EQ(
      RunDmg("run --algo=bfs --transport=tcp --memory_nodes=nohost").exit_code,
      2);
  testing::CommandResult r = RunDmg(
      "run --algo=bfs --transport=tcp --transport_timeout_ms=1000 "
      "--memory_nodes=127.0.0.1:1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("127.0.0.1:1"), std::string::npos) << r.err;
  EXPECT_EQ(RunDmg("run --algo=bfs --transport=tcp --graph=kron:8").exit_code,
            2);
}

}  // namespace
}  // namespace dmg

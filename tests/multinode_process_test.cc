// Several compute nodes as separate processes over tcp on loopback (started
// by `dmg run --compute_nodes=N`, or one by one with --compute_node_id):
// outputs identical to one compute node's; a compute node killed mid-job
// makes the others stop within the timeout, naming it, and the next job on
// the same memory nodes runs normally.
#include <signal.h>

#include <chrono>
#include <regex>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "tests/daemon_util.h"
#include "tests/test_util.h"

namespace dmg {
namespace {

using testing::Daemon;
using testing::RunDmg;
using testing::Slurp;
using testing::TempDir;

TEST(MultiNodeProcessTest, SpawnedComputeNodesMatchOneComputeNode) {
  TempDir dir;
  Daemon a("--transport=tcp", dir.file("a.log"));
  Daemon b("--transport=tcp", dir.file("b.log"));
  const std::string nodes = a.address() + "," + b.address();
  const std::string graph = "kron:15 --symmetrize";
  ASSERT_EQ(
      RunDmg("load --graph=" + graph + " --memory_nodes=" + nodes).exit_code,
      0);
  for (std::string algo :
       {"pagerank --tolerance=0 --max_iters=15", "bfs --source=random", "cc",
        "sssp --unit_weights --source=random", "bc --sources=2", "tc"}) {
    const std::string base = "run --algo=" + algo + " --threads=1 ";
    const std::string one = dir.file("one");
    testing::CommandResult r =
        RunDmg(base + "--graph=" + graph + " --output=" + one);
    ASSERT_EQ(r.exit_code, 0) << algo << ": " << r.err;
    for (int n : {2, 3}) {
      SCOPED_TRACE(algo + " on " + std::to_string(n) + " compute nodes");
      const std::string many = dir.file("many");
      const std::string stats = dir.file("stats.json");
      testing::CommandResult m =
          RunDmg(base + "--transport=tcp --memory_nodes=" + nodes +
                 " --compute_nodes=" + std::to_string(n) + " --output=" + many +
                 " --stats_json=" + stats);
      ASSERT_EQ(m.exit_code, 0) << m.err;
      EXPECT_EQ(Slurp(many), Slurp(one));
      // One summary line (node 0's, for the job), every node's figures.
      EXPECT_NE(m.out.find(std::to_string(n) + " compute nodes"),
                std::string::npos)
          << m.out;
      const std::string json = Slurp(stats);
      EXPECT_NE(json.find("\"compute_nodes\": " + std::to_string(n)),
                std::string::npos);
      EXPECT_NE(json.find("\"id\": " + std::to_string(n - 1)),
                std::string::npos)
          << json;
    }
  }
}

TEST(MultiNodeProcessTest, KilledComputeNodeStopsTheOthersNamingIt) {
  TempDir dir;
  Daemon node("--transport=tcp", dir.file("node.log"));
  ASSERT_EQ(
      RunDmg("load --graph=kron:15 --memory_nodes=" + node.address()).exit_code,
      0);
  const std::string job =
      std::string(DMG_BINARY) +
      " run --algo=pagerank --tolerance=0 --max_iters=100000 --threads=1 "
      "--transport=tcp --transport_timeout_ms=2000 --compute_nodes=3 "
      "--job=killed --memory_nodes=" +
      node.address();
  // Three nodes started one by one; node 1 is killed mid-job. Each
  // survivor's exit status and the seconds it took after the kill are
  // printed.
  testing::CommandResult r = testing::RunCommand(
      "(" + job + " --compute_node_id=1 & victim=$!; " +  //
      "(" + job + " --compute_node_id=0; echo \"node0 $?\" >&2) & " + "(" +
      job + " --compute_node_id=2; echo \"node2 $?\" >&2) & " +
      "sleep 1.5; kill -9 $victim; t=$(date +%s%N); wait; " +
      "echo \"after_ms $(( ($(date +%s%N) - t) / 1000000 ))\" >&2)");
  SCOPED_TRACE(r.err);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.err, m, std::regex("after_ms ([0-9]+)")));
  EXPECT_LT(std::stoi(m[1]), 2000 + 3000) << "the survivors took too long";
  for (const char* survivor : {"node0 ", "node2 "}) {
    ASSERT_TRUE(std::regex_search(
        r.err, m, std::regex(std::string(survivor) + "([0-9]+)")));
    EXPECT_NE(std::stoi(m[1]), 0);
    EXPECT_LT(std::stoi(m[1]), 128) << "crashed";
  }
  // One line from each survivor, naming the dead node. (A survivor that
  // looks after the other one has already exited finds both gone and
  // names both: "compute node 0, 1 has stopped".)
  const std::regex named(
      "compute node (1 did not reach round|([0-9]+, )*1(, [0-9]+)* has "
      "stopped \\(its regions)");
  EXPECT_EQ(
      std::distance(std::sregex_iterator(r.err.begin(), r.err.end(), named),
                    std::sregex_iterator()),
      2);
  // The next job, even under the same name, runs normally.
  testing::CommandResult next = RunDmg(
      "run --algo=bfs --transport=tcp --compute_nodes=2 --job=killed "
      "--memory_nodes=" +
      node.address() + " --graph=kron:15 --verify");
  EXPECT_EQ(next.exit_code, 0) << next.err;
}

// --trials with compute nodes in separate processes: every process runs
// the same trials (a job name per trial, derived the same way in each),
// each trial verifies, and node 0's summary lists them all.
TEST(MultiNodeProcessTest, TrialsRunInEveryProcess) {
  TempDir dir;
  Daemon node("--transport=tcp", dir.file("node.log"));
  ASSERT_EQ(
      RunDmg("load --graph=kron:13 --memory_nodes=" + node.address()).exit_code,
      0);
  const std::string json = dir.file("summary.json");
  testing::CommandResult r = RunDmg(
      "run --algo=bfs --compute_nodes=2 --trials=3 --verify "
      "--graph=kron:13 --summary_json=" +
      json + " --memory_nodes=" + node.address());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("3 trials, average"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("verify: OK"), std::string::npos) << r.out;
  const std::string s = Slurp(json);
  EXPECT_NE(s.find("\"compute_nodes\": 2"), std::string::npos) << s;
  EXPECT_NE(s.find("{\"trial\": 3,"), std::string::npos) << s;
  EXPECT_NE(s.find("\"transport\": \"tcp\""), std::string::npos) << s;
}

TEST(MultiNodeProcessTest, JobFlagsAreChecked) {
  // An id without memory nodes, or beyond the node count, is bad input.
  EXPECT_EQ(RunDmg("run --algo=bfs --graph=kron:8 --compute_nodes=2 "
                   "--compute_node_id=1 --job=x")
                .exit_code,
            2);
  EXPECT_EQ(RunDmg("run --algo=bfs --graph=kron:8 --compute_nodes=2 "
                   "--compute_node_id=2 --job=x --transport=tcp "
                   "--memory_nodes=127.0.0.1:1")
                .exit_code,
            2);
  EXPECT_EQ(RunDmg("run --algo=bfs --graph=kron:8 --update_mode=pull "
                   "--direction=push")
                .exit_code,
            2);
  // The embedded cluster with several compute nodes.
  testing::CommandResult r =
      RunDmg("run --algo=cc --graph=kron:14 --compute_nodes=3 --verify");
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

}  // namespace
}  // namespace dmg

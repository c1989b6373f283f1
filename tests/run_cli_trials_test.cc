// The parts of `dmg run` a GAPBS user reaches for: help for every flag,
// --version, random sources by default, --trials on one loaded graph, the
// summary JSON, --output=- and the warnings that keep a benchmark honest.
// Values are checked against `--verify` (the independent reference) and
// against facts of the graph, never against the code's own output.
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace dmg {
namespace {

using testing::RunDmg;
using testing::Slurp;
using testing::TempDir;

// The "--name" at the start of each flag line of a help text.
std::set<std::string> HelpFlags(const std::string& help) {
  std::set<std::string> names;
  std::istringstream lines(help);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("  --", 0) != 0) continue;
    names.insert(line.substr(4, line.find_first_of("= ", 4) - 4));
  }
  return names;
}

// The flags the parser accepts, from its own error for an unknown one.
std::set<std::string> AcceptedFlags(const std::string& command) {
  testing::CommandResult r =
      testing::RunCommand("DMG_TEST_LIST_FLAGS=1 " DMG_BINARY " " + command +
                          " --no_such_flag=1");
  EXPECT_EQ(r.exit_code, 2);
  std::set<std::string> names;
  const size_t start = r.err.find("(accepted: ");
  EXPECT_NE(start, std::string::npos) << r.err;
  std::istringstream list(r.err.substr(start + 11));
  std::string item;
  while (std::getline(list, item, ',')) {
    const size_t dash = item.find("--");
    std::string name = item.substr(dash + 2);
    while (!name.empty() && (name.back() == ')' || name.back() == '\n')) {
      name.pop_back();
    }
    names.insert(name);
  }
  return names;
}

TEST(RunCliTrialsTest, EveryCommandsHelpListsEveryFlagItAccepts) {
  for (const std::string command :
       {"run", "info", "load", "memory-node", "status"}) {
    testing::CommandResult help = RunDmg(command + " --help");
    ASSERT_EQ(help.exit_code, 0) << help.err;
    EXPECT_EQ(HelpFlags(help.out), AcceptedFlags(command)) << command;
    // `dmg help CMD` is the same text.
    EXPECT_EQ(RunDmg("help " + command).out, help.out) << command;
  }
  // Each flag has a description and its default under it.
  testing::CommandResult help = RunDmg("run --help");
  std::istringstream lines(help.out);
  std::string line, previous;
  int flags = 0;
  while (std::getline(lines, line)) {
    if (previous.rfind("  --", 0) == 0) {
      ++flags;
      EXPECT_EQ(line.rfind("        ", 0), 0u) << previous;
    }
    previous = line;
  }
  EXPECT_GE(flags, 40);
  EXPECT_NE(help.out.find("--cache_mb"), std::string::npos);
  EXPECT_NE(help.out.find("--rdma_gid_index"), std::string::npos);
  EXPECT_NE(help.out.find("(default: 'random')"), std::string::npos);
}

TEST(RunCliTrialsTest, VersionNamesTheRevisionAndTheBuild) {
  for (const char* v : {"--version", "version"}) {
    testing::CommandResult r = RunDmg(v);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    for (const char* key :
         {"dmg 0.", "git revision: ", "build type: ", "CUDA: ", "RDMA: "}) {
      EXPECT_NE(r.out.find(key), std::string::npos) << key << "\n" << r.out;
    }
  }
}

// Without --source, BFS starts from a seeded random vertex with out-arcs
// (GAPBS without -r), so it reaches the graph's giant component rather
// than an isolated vertex; each trial takes the next pick.
TEST(RunCliTrialsTest, TrialsRunOnOneLoadWithTheirOwnRandomSources) {
  TempDir dir;
  const std::string json = dir.file("summary.json");
  testing::CommandResult r = RunDmg(
      "run --algo=bfs --graph=kron:14 --trials=3 --verify "
      "--summary_json=" +
      json);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* line : {"trial 1: ", "trial 2: ", "trial 3: ",
                           "3 trials, average ", "verify: OK"}) {
    EXPECT_NE(r.out.find(line), std::string::npos) << line << "\n" << r.out;
  }
  EXPECT_EQ(r.out.find("trial 4: "), std::string::npos);
  const std::string s = Slurp(json);
  for (const char* key :
       {"\"format\": \"dmg-summary-1\"", "\"graph\": \"kron:14\"",
        "\"algorithm\": \"bfs\"", "\"transport\": \"local\"",
        "\"memory_nodes\": 1", "\"compute_nodes\": 1", "\"vertices\": 16384",
        "\"load_seconds\": ", "{\"trial\": 1, \"source\": ",
        "{\"trial\": 3, \"source\": ", "\"reached\": ", "\"median\": ",
        "\"verify\": \"ok\""}) {
    EXPECT_NE(s.find(key), std::string::npos) << key << "\n" << s;
  }
  // The three sources differ, and each reaches more than half the graph
  // (kron:14's giant component holds most vertices with arcs).
  std::set<std::string> sources;
  for (size_t at = s.find("\"source\": "); at != std::string::npos;
       at = s.find("\"source\": ", at + 1)) {
    sources.insert(s.substr(at + 10, s.find(',', at) - at - 10));
  }
  EXPECT_EQ(sources.size(), 3u) << s;
  for (size_t at = s.find("\"reached\": "); at != std::string::npos;
       at = s.find("\"reached\": ", at + 1)) {
    EXPECT_GT(std::stoll(s.substr(at + 11)), 16384 / 2) << s;
  }
}

TEST(RunCliTrialsTest, OutputDashGoesToStdoutAndTheReportToStderr) {
  testing::CommandResult r = RunDmg("run --algo=cc --graph=kron:8 --output=-");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream lines(r.out);
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    ASSERT_EQ(line.substr(0, line.find(' ')), std::to_string(n)) << line;
    ++n;
  }
  EXPECT_EQ(n, 256);
  EXPECT_NE(r.err.find("cc on kron:8"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists("-"));
}

TEST(RunCliTrialsTest, AnIsolatedSourceIsWarnedAbout) {
  TempDir dir;
  // Vertex 3 has no arcs at all.
  const std::string el = dir.Write("g.el", "0 1\n1 2\n2 0\n4 0\n");
  testing::CommandResult r =
      RunDmg("run --algo=bfs --source=3 --verify --graph=" + el);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("warning: source 3 reaches no other vertex"),
            std::string::npos)
      << r.err;
  r = RunDmg("run --algo=bfs --source=0 --graph=" + el);
  EXPECT_EQ(r.err.find("warning"), std::string::npos) << r.err;
}

TEST(RunCliTrialsTest, PageRankStoppedByMaxItersIsSaid) {
  testing::CommandResult r = RunDmg(
      "run --algo=pagerank --graph=kron:10 --max_iters=2 "
      "--summary_json=-");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("not converged"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("\"converged\": false"), std::string::npos) << r.out;
  r = RunDmg("run --algo=pagerank --graph=kron:10 --max_iters=100");
  EXPECT_EQ(r.out.find("not converged"), std::string::npos) << r.out;
}

// --memory_nodes alone means tcp: the error is about the node, not about a
// missing --transport.
TEST(RunCliTrialsTest, MemoryNodesAloneMeansTcp) {
  testing::CommandResult r = RunDmg(
      "run --algo=bfs --memory_nodes=127.0.0.1:1 "
      "--transport_timeout_ms=2000");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.err.find("needs --transport"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("127.0.0.1:1"), std::string::npos) << r.err;
}

TEST(RunCliTrialsTest, BadTrialsIsBadInput) {
  for (const char* t : {"0", "-1", "x"}) {
    testing::CommandResult r =
        RunDmg(std::string("run --algo=bfs --graph=kron:8 --trials=") + t);
    EXPECT_EQ(r.exit_code, 2) << t;
  }
}

}  // namespace
}  // namespace dmg

// `dmg run` end to end: every algorithm on the real graphs with --verify,
// outputs and statistics files, thread independence of the output, bad
// input (one line, exit code 2) and a caught verification mismatch.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "algorithms/registry.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace dmg {
namespace {

using testing::ErrorLines;
using testing::RunDmg;
using testing::Slurp;
using testing::TempDir;

// The algorithms `dmg help` lists (from the registry): a new algorithm is
// picked up by the tests below without editing them.
std::vector<std::string> RegisteredAlgorithms() {
  testing::CommandResult help = RunDmg("help");
  std::vector<std::string> names;
  std::istringstream lines(help.out);
  std::string line;
  bool in_list = false;
  while (std::getline(lines, line)) {
    if (line.rfind("algorithms", 0) == 0) {
      in_list = true;
    } else if (in_list && line.rfind("  ", 0) == 0) {
      names.push_back(line.substr(2, line.find(' ', 2) - 2));
    } else if (in_list) {
      break;
    }
  }
  return names;
}

TEST(RunCliTest, HelpListsEveryAlgorithm) {
  std::vector<std::string> registered;
  for (const algorithms::Algorithm& a : algorithms::Registry()) {
    registered.push_back(a.name);
  }
  EXPECT_EQ(RegisteredAlgorithms(), registered);
}

// Every registered algorithm verifies against its reference, on a graph
// every one accepts (symmetrized for triangle counting, unit weights for
// SSSP, three seeded sources for BC).
TEST(RunCliTest, EveryRegisteredAlgorithmVerifies) {
  for (const std::string& algo : RegisteredAlgorithms()) {
    for (std::string graph : {"kron:11", "urand:11"}) {
      testing::CommandResult r =
          RunDmg("run --algo=" + algo + " --graph=" + graph +
                 " --symmetrize --unit_weights --sources=3 --verify "
                 "--threads=2");
      EXPECT_EQ(r.exit_code, 0) << algo << " " << graph << ": " << r.err;
      EXPECT_NE(r.out.find("verify: OK"), std::string::npos) << r.out;
    }
  }
}

TEST(RunCliTest, TriangleCountOutputAndDirectedGraphs) {
  TempDir dir;
  // Two triangles sharing the edge 1-2, given one way round.
  std::string el = dir.Write("t.el", "0 1\n0 2\n1 2\n1 3\n2 3\n");
  std::string out = dir.file("tc.txt");
  testing::CommandResult r = RunDmg("run --algo=tc --symmetrize --graph=" + el +
                                    " --output=" + out + " --verify");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Slurp(out), "2\n");
  EXPECT_NE(r.out.find("2 triangles"), std::string::npos) << r.out;
  // Directed as loaded: one clear line, exit 2.
  testing::CommandResult d = RunDmg("run --algo=tc --graph=" + el);
  EXPECT_EQ(d.exit_code, 2) << d.err;
  EXPECT_EQ(ErrorLines(d.err).size(), 1u) << d.err;
  EXPECT_NE(d.err.find("--symmetrize"), std::string::npos) << d.err;
}

TEST(RunCliTest, BcSourcesAreSeededAndOutputIsScores) {
  TempDir dir;
  std::string a = dir.file("a.txt"), b = dir.file("b.txt"), c = dir.file("c");
  for (const std::string& out : {a, b}) {
    testing::CommandResult r = RunDmg(
        "run --algo=bc --graph=kron:10 --sources=4 --verify --output=" + out);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("4 sources"), std::string::npos) << r.out;
  }
  EXPECT_EQ(Slurp(a), Slurp(b));
  testing::CommandResult r = RunDmg(
      "run --algo=bc --graph=kron:10 --sources=4 --source_seed=7 --output=" +
      c);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(Slurp(a), Slurp(c));
  // One "vertex score" line per vertex; the largest score is 1.
  EXPECT_NE(Slurp(a).find(" 1\n"), std::string::npos);
  testing::CommandResult random =
      RunDmg("run --algo=bfs --graph=kron:10 --source=random --verify");
  EXPECT_EQ(random.exit_code, 0) << random.err;
}

// --direction replaces the engine's push/pull choice: the answers stay the
// same, and the statistics say who chose.
TEST(RunCliTest, DirectionFlagKeepsAnswers) {
  TempDir dir;
  for (std::string algo : {"bfs", "cc_lp", "sssp", "bc", "kcore"}) {
    std::string first;
    for (std::string direction : {"auto", "push", "pull"}) {
      std::string out = dir.file(algo + direction);
      std::string stats = dir.file(algo + direction + ".json");
      testing::CommandResult r =
          RunDmg("run --algo=" + algo +
                 " --graph=kron:12 --unit_weights --sources=2 "
                 "--threads=2 --direction=" +
                 direction + " --output=" + out + " --stats_json=" + stats);
      ASSERT_EQ(r.exit_code, 0) << algo << " " << direction << ": " << r.err;
      if (direction == "auto") {
        first = Slurp(out);
        EXPECT_NE(Slurp(stats).find("\"chosen_by\": \"auto\""),
                  std::string::npos);
      } else {
        EXPECT_EQ(Slurp(out), first) << algo << " --direction=" << direction;
        EXPECT_NE(Slurp(stats).find("\"chosen_by\": \"flag\""),
                  std::string::npos);
        EXPECT_NE(Slurp(stats).find("\"direction\": \"" + direction + "\""),
                  std::string::npos);
      }
    }
  }
}

// On directed graphs: every algorithm verifies, or (triangle counting and
// k-core) refuses the graph with one line that says to --symmetrize it.
TEST(RunCliTest, AllAlgorithmsVerifyOnGeneratedGraphs) {
  for (std::string graph : {"kron:12", "urand:12"}) {
    for (const std::string& algo : RegisteredAlgorithms()) {
      testing::CommandResult r =
          RunDmg("run --algo=" + algo + " --graph=" + graph +
                 " --unit_weights --verify --threads=2");
      if (r.exit_code == 2 && r.err.find("symmetri") != std::string::npos) {
        continue;
      }
      EXPECT_EQ(r.exit_code, 0) << algo << " " << graph << ": " << r.err;
      EXPECT_NE(r.out.find("verify: OK"), std::string::npos) << r.out;
    }
  }
}

TEST(RunCliTest, OutputAndStatsFiles) {
  TempDir dir;
  std::string out = dir.file("bfs.txt"), stats = dir.file("s.json");
  testing::CommandResult r =
      RunDmg("run --algo=bfs --graph=kron:10 --source=3 --output=" + out +
             " --stats_json=" + stats);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string text = Slurp(out);
  // One "vertex value" line per vertex, in order.
  std::istringstream lines(text);
  std::string line;
  uint64_t expect = 0;
  while (std::getline(lines, line)) {
    ASSERT_EQ(line.substr(0, line.find(' ')), std::to_string(expect)) << line;
    ++expect;
  }
  EXPECT_EQ(expect, 1024u);
  EXPECT_NE(text.find("\n3 0\n"), std::string::npos);
  std::string json = Slurp(stats);
  for (const char* key :
       {"\"algorithm\": \"bfs\"", "\"supersteps\"", "\"direction\": \"push\"",
        "\"frontier\"", "\"seconds\"", "\"bytes_read\"", "\"bytes_written\"",
        "\"round_trips\"", "\"atomics\"", "\"totals\""}) {
    EXPECT_NE(json.find(key), std::string::npos) << key << "\n" << json;
  }
}

// `dmg load --compress` writes a version 2 image of compressed blocks (from
// a graph, or from a plain image), `dmg info` says so, and every algorithm
// gives on it the output it gives on the plain image, byte for byte.
TEST(RunCliTest, CompressedImagesGiveTheSameOutput) {
  TempDir dir;
  const std::string plain = dir.file("g.img"), packed = dir.file("g.z.img"),
                    again = dir.file("g2.z.img");
  ASSERT_EQ(
      RunDmg("load --graph=kron:14 --symmetrize --image=" + plain).exit_code,
      0);
  testing::CommandResult r =
      RunDmg("load --graph=" + plain + " --compress --image=" + packed);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(
      RunDmg("load --graph=kron:14 --symmetrize --compress --image=" + again)
          .exit_code,
      0);
  EXPECT_EQ(Slurp(packed), Slurp(again)) << "the same graph, other bytes";
  testing::CommandResult info = RunDmg("info --graph=" + packed);
  ASSERT_EQ(info.exit_code, 0) << info.err;
  EXPECT_NE(info.out.find("compressed"), std::string::npos) << info.out;
  EXPECT_LT(Slurp(packed).size(), Slurp(plain).size() * 3 / 4);
  // 128 KiB blocks: u32 byte offsets (16 KiB ones have u16).
  const std::string wide = dir.file("g.w.img");
  ASSERT_EQ(RunDmg("load --graph=" + plain +
                   " --compress --block_size=131072 --image=" + wide)
                .exit_code,
            0);
  for (const std::string& algo : RegisteredAlgorithms()) {
    for (const char* cache : {"", " --cache_mb=0.3", " --cache_mb=1"}) {
      SCOPED_TRACE(algo + cache);
      // The wide image needs 1 MB at least (its block buffers).
      const bool big = std::string(cache) == " --cache_mb=1";
      const std::string images[2] = {plain, big ? wide : packed};
      std::string outs[2];
      for (int z = 0; z < 2; ++z) {
        outs[z] = dir.file(algo + std::to_string(z));
        testing::CommandResult run =
            RunDmg("run --algo=" + algo + " --unit_weights --verify --graph=" +
                   images[z] + cache + " --output=" + outs[z]);
        ASSERT_EQ(run.exit_code, 0) << run.err;
      }
      EXPECT_EQ(Slurp(outs[0]), Slurp(outs[1]));
    }
  }
}

TEST(RunCliTest, OutputDoesNotDependOnThreads) {
  TempDir dir;
  for (std::string algo : {"bfs", "cc", "sssp"}) {
    std::string first;
    for (int threads : {1, 2, 4}) {
      std::string out = dir.file(algo + std::to_string(threads));
      testing::CommandResult r =
          RunDmg("run --algo=" + algo +
                 " --unit_weights --graph=kron:13 "
                 "--threads=" +
                 std::to_string(threads) + " --output=" + out);
      ASSERT_EQ(r.exit_code, 0) << r.err;
      if (threads == 1) {
        first = Slurp(out);
      } else {
        EXPECT_EQ(Slurp(out), first) << algo << " threads " << threads;
      }
    }
  }
}

TEST(RunCliTest, VerifyReportsTheFirstDifferingVertex) {
  setenv("DMG_TEST_CORRUPT_VERTEX", "17", 1);
  testing::CommandResult r = RunDmg("run --algo=bfs --graph=kron:10 --verify");
  testing::CommandResult p =
      RunDmg("run --algo=pagerank --graph=kron:10 --verify");
  unsetenv("DMG_TEST_CORRUPT_VERTEX");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("MISMATCH"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("17"), std::string::npos) << r.err;
  EXPECT_NE(p.exit_code, 0);
  EXPECT_NE(p.err.find("17"), std::string::npos) << p.err;
}

// PageRank in float (the default, as GAPBS) and double: both verify, the
// summary says which, and the two are within the float tolerance.
TEST(RunCliTest, PageRankPrecisions) {
  TempDir dir;
  std::vector<double> scores[2];
  for (int k = 0; k < 2; ++k) {
    const std::string precision = k == 0 ? "" : " --precision=double";
    const std::string out = dir.file("pr" + std::to_string(k));
    const std::string summary = out + ".json";
    testing::CommandResult r =
        RunDmg("run --algo=pagerank --graph=kron:12 --tolerance=0 --verify" +
               precision + " --output=" + out + " --summary_json=" + summary);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("verify: OK"), std::string::npos) << r.out;
    EXPECT_NE(Slurp(summary).find(k == 0 ? R"("precision": "float")"
                                         : R"("precision": "double")"),
              std::string::npos)
        << Slurp(summary);
    std::istringstream in(Slurp(out));
    uint64_t v;
    double x;
    while (in >> v >> x) scores[k].push_back(x);
  }
  ASSERT_EQ(scores[0].size(), 4096u);
  ASSERT_EQ(scores[1].size(), 4096u);
  double l1 = 0;
  for (size_t v = 0; v < scores[0].size(); ++v) {
    l1 += std::abs(scores[0][v] - scores[1][v]);
  }
  EXPECT_GT(l1, 0);     // float really rounds
  EXPECT_LT(l1, 1e-5);  // algorithms::kFloatPageRankL1
  // A tolerance float cannot resolve is run, with a warning.
  testing::CommandResult fine = RunDmg(
      "run --algo=pagerank --graph=kron:8 --tolerance=1e-9 --max_iters=30");
  EXPECT_EQ(fine.exit_code, 0) << fine.err;
  EXPECT_NE(fine.err.find("--precision=double reaches it"), std::string::npos)
      << fine.err;
  // Other algorithms' summaries name no precision.
  const std::string bfs = dir.file("bfs.json");
  ASSERT_EQ(
      RunDmg("run --algo=bfs --graph=kron:8 --summary_json=" + bfs).exit_code,
      0);
  EXPECT_EQ(Slurp(bfs).find("precision"), std::string::npos);
}

TEST(RunCliTest, BadInputIsOneLineAndExitTwo) {
  TempDir dir;
  std::string neg = dir.Write("neg.wel", "0 1 4\n1 2 -3\n");
  std::string out = dir.file("out.txt");
  const std::string cases[] = {
      "run --algo=dijkstra --graph=kron:8",
      "run --graph=kron:8",
      "run --algo=bfs --graph=kron:8 --source=256",
      "run --algo=sssp --graph=kron:8 --source=999999",
      "run --algo=sssp --graph=kron:8",
      "run --algo=sssp --graph=" + neg,
      "run --algo=bfs --graph=" + dir.file("missing.el"),
      "run --algo=bfs",
      "run --algo=pagerank --graph=kron:8 --max_iters=0",
      "run --algo=bfs --graph=kron:8 --transport=carrier-pigeon",
      "run --algo=bfs --graph=kron:8 --source=somewhere",
      "run --algo=bc --graph=kron:8 --sources=-1",
      "run --algo=bfs --graph=kron:8 --direction=sideways",
      "run --algo=pagerank --graph=kron:8 --precision=half",
      // Below the cache's minimum, on one node and on two (each node finds
      // it before they meet: not one node's error and the other's lost
      // job record).
      "run --algo=bfs --graph=kron:10 --cache_mb=0.0625",
      "run --algo=bfs --graph=kron:10 --cache_mb=0.0625 --compute_nodes=2",
  };
  for (const std::string& c : cases) {
    testing::CommandResult r = RunDmg(c + " --output=" + out);
    EXPECT_EQ(r.exit_code, 2) << c << "\n" << r.err;
    EXPECT_EQ(ErrorLines(r.err).size(), 1u) << c << "\n" << r.err;
    EXPECT_FALSE(std::filesystem::exists(out)) << c;
  }
}

// Every canonical real graph, every algorithm, verified against the
// reference; PageRank to convergence at 1e-10 (L1 <= 1e-9 is checked by
// --verify).
TEST(RunCliTest, RealGraphsVerify) {
  const char* dir = std::getenv("DMG_GRAPHS_DIR");
  if (dir == nullptr) {
    GTEST_SKIP() << "DMG_GRAPHS_DIR not set: skipping the real-graph runs";
  }
  for (std::string g : {"ca-GrQc", "email-Enron", "wiki-Vote", "p2p-Gnutella31",
                        "rome99", "road-NY"}) {
    std::string base = std::string(dir) + "/" + g;
    std::string el =
        std::filesystem::exists(base + ".el") ? base + ".el" : base + ".wel";
    for (std::string args :
         {"--algo=pagerank --precision=double --tolerance=1e-10 "
          "--max_iters=1000 "
          "--graph=" +
              el,
          "--algo=bfs --graph=" + el, "--algo=cc --graph=" + el,
          "--algo=sssp --graph=" + base + ".wel",
          "--algo=bc --sources=4 --graph=" + el,
          "--algo=tc --symmetrize --graph=" + el,
          "--algo=kcore --symmetrize --graph=" + el}) {
      testing::CommandResult r = RunDmg("run --verify --threads=2 " + args);
      EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.err;
      EXPECT_NE(r.out.find("verify: OK"), std::string::npos) << args;
    }
  }
}

}  // namespace
}  // namespace dmg

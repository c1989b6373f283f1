// Every real graph in ../shared/graphs, raw as published and canonical, loads
// and `dmg info` reports the counts that SOURCES.md and stats.jsonl list.
// The folder is found through DMG_GRAPHS_DIR; without it the test skips.
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <string>

#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace dmg {
namespace {

struct Expected {
  std::string file;   // relative to DMG_GRAPHS_DIR
  std::string flags;  // extra dmg flags
  uint64_t vertices;
  uint64_t arcs;
  uint64_t zero_out;  // vertices with out-degree 0
  uint64_t max_out;
  bool weighted;
};

// Counts from ../shared/graphs/stats.jsonl (canonical_arcs, vertices,
// zero_outdeg_vertices, max_outdeg). Raw files with id gaps need --relabel
// (the canonical files were compacted the same way).
const Expected kGraphs[] = {
    {"ca-GrQc.el", "", 5242, 28968, 1, 81, false},
    {"ca-GrQc.wel", "", 5242, 28968, 1, 81, true},
    {"raw/ca-GrQc.txt", "--relabel", 5242, 28968, 1, 81, false},
    {"email-Enron.el", "", 36692, 367662, 0, 1383, false},
    {"email-Enron.wel", "", 36692, 367662, 0, 1383, true},
    {"raw/email-Enron.txt", "", 36692, 367662, 0, 1383, false},
    {"wiki-Vote.el", "", 7115, 103689, 1005, 893, false},
    {"wiki-Vote.wel", "", 7115, 103689, 1005, 893, true},
    {"raw/Wiki-Vote.txt", "--relabel", 7115, 103689, 1005, 893, false},
    {"p2p-Gnutella31.el", "", 62586, 147892, 46199, 78, false},
    {"p2p-Gnutella31.wel", "", 62586, 147892, 46199, 78, true},
    {"raw/p2p-Gnutella31.txt", "", 62586, 147892, 46199, 78, false},
    {"rome99.wel", "", 3353, 8859, 0, 5, true},
    {"raw/rome99.gr", "", 3353, 8859, 0, 5, true},
    {"road-NY.el", "", 264346, 730100, 0, 8, false},
    {"road-NY.wel", "", 264346, 730100, 0, 8, true},
    {"raw/NY-pace.gr.xz", "", 264346, 730100, 0, 8, false},
};

uint64_t Field(const std::string& text, const std::string& key) {
  std::smatch m;
  std::regex re(key + ":\\s+(\\d+)");
  if (!std::regex_search(text, m, re)) return ~uint64_t{0};
  return std::stoull(m[1]);
}

class SharedGraphsTest : public ::testing::TestWithParam<Expected> {};

TEST_P(SharedGraphsTest, InfoReportsPublishedCounts) {
  const char* dir = std::getenv("DMG_GRAPHS_DIR");
  if (dir == nullptr || !std::filesystem::is_directory(dir)) {
    GTEST_SKIP() << "DMG_GRAPHS_DIR not set (or not a folder): skipping the "
                    "real-graph test; point it at shared/graphs to run it";
  }
  const Expected& g = GetParam();
  std::string path = std::string(dir) + "/" + g.file;
  ASSERT_TRUE(std::filesystem::exists(path)) << path;
  testing::CommandResult r =
      testing::RunDmg("info --graph=" + path + " " + g.flags);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Field(r.out, "vertices"), g.vertices) << r.out;
  EXPECT_EQ(Field(r.out, "arcs"), g.arcs) << r.out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      r.out, m,
      std::regex("out-degree:\\s+min \\d+\\s+max (\\d+).*zero (\\d+)")))
      << r.out;
  EXPECT_EQ(std::stoull(m[1]), g.max_out);
  EXPECT_EQ(std::stoull(m[2]), g.zero_out);
  EXPECT_NE(r.out.find(g.weighted ? "weighted:                  yes"
                                  : "weighted:                  no"),
            std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(All, SharedGraphsTest, ::testing::ValuesIn(kGraphs),
                         [](const auto& info) {
                           std::string n = info.param.file;
                           for (char& c : n) {
                             if (!isalnum(static_cast<unsigned char>(c))) {
                               c = '_';
                             }
                           }
                           return n;
                         });

}  // namespace
}  // namespace dmg

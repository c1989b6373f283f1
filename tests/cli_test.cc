// The dmg command line: bad input gives exactly one line naming the file, the
// line and the problem, exit code 2, and no (partial) output file.
#include <filesystem>
#include <string>

#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace dmg {
namespace {

using testing::ErrorLines;
using testing::RunCommand;
using testing::RunDmg;
using testing::TempDir;

struct BadInput {
  std::string name;      // file name (extension picks the format)
  std::string content;   // file content
  std::string expected;  // substring of the error, besides the file name
};

class BadInputTest : public ::testing::TestWithParam<BadInput> {};

TEST_P(BadInputTest, OneLineExitTwoNoOutput) {
  const BadInput& in = GetParam();
  TempDir dir;
  std::string path = dir.Write(in.name, in.content);
  std::string image = dir.file("out.img");
  testing::CommandResult r =
      RunDmg("load --graph=" + path + " --image=" + image);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  std::vector<std::string> lines = ErrorLines(r.err);
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_NE(lines[0].find(path), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find(in.expected), std::string::npos) << lines[0];
  EXPECT_FALSE(std::filesystem::exists(image));
  // Nothing else (no temporary file) was left in the folder.
  int files = 0;
  for (auto& f : std::filesystem::directory_iterator(dir.path())) {
    (void)f;
    ++files;
  }
  EXPECT_EQ(files, 1);
  // dmg info agrees.
  testing::CommandResult info = RunDmg("info --graph=" + path);
  EXPECT_EQ(info.exit_code, 2);
  EXPECT_TRUE(info.out.empty());
}

INSTANTIATE_TEST_SUITE_P(
    Files, BadInputTest,
    ::testing::Values(
        BadInput{"empty.el", "", "empty"},
        BadInput{"token.el", "0 1\n1 x2\n", ":2:"},
        BadInput{"negative.el", "# c\n0 1\n-3 1\n", ":3:"},
        BadInput{"huge.el", "0 1\n4294967295 1\n", ":2:"},
        BadInput{"hugeish.el", "0 99999999999999999999999\n", ":1:"},
        BadInput{"weight.wel", "0 1 5\n1 2 3000000000\n", ":2:"},
        BadInput{"banner.mtx", "%%MatrixMarket matrix array real general\n",
                 ":1:"},
        BadInput{"nobanner.mtx", "3 3 1\n1 2\n", ":1:"},
        BadInput{"count.mtx",
                 "%%MatrixMarket matrix coordinate pattern general\n"
                 "3 3 3\n1 2\n2 3\n",
                 "3"},
        BadInput{"toomany.mtx",
                 "%%MatrixMarket matrix coordinate pattern general\n"
                 "3 3 1\n1 2\n2 3\n",
                 ":4:"},
        BadInput{"pace_as_sp.gr", "c x\np sp 3 2\n1 2\n2 3\n", ":3:"},
        BadInput{"sp_as_pace.gr", "p tw 3 2\na 1 2 5\na 2 3 5\n", ":2:"},
        // Issue 13, inputs: counts bounded before allocating, binary data.
        BadInput{"maxid.el", "0 4294967294\n", ":1:"},
        BadInput{"maxn.gr", "p sp 4294967295 0\n", ":1:"},
        BadInput{"maxn.mtx",
                 "%%MatrixMarket matrix coordinate pattern general\n"
                 "4294967295 4294967295 0\n",
                 ":2:"},
        BadInput{"binary.el", std::string("0 1\n\0\x01\x02", 7),
                 "binary data"}),
    [](const auto& info) {
      std::string n = info.param.name;
      for (char& c : n) {
        if (!isalnum(static_cast<unsigned char>(c))) c = '_';
      }
      return n;
    });

TEST(CliTest, MissingFile) {
  TempDir dir;
  std::string image = dir.file("o.img");
  testing::CommandResult r =
      RunDmg("load --graph=" + dir.file("nope.el") + " --image=" + image);
  EXPECT_EQ(r.exit_code, 2);
  ASSERT_EQ(ErrorLines(r.err).size(), 1u) << r.err;
  EXPECT_NE(r.err.find("nope.el"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(image));
}

TEST(CliTest, TruncatedCompressedFiles) {
  TempDir dir;
  std::string edges;
  for (int i = 0; i < 20000; ++i) {
    edges += std::to_string(i) + " " + std::to_string((i * 7) % 20000) + "\n";
  }
  std::string plain = dir.Write("g.el", edges);
  for (std::string tool : {"gzip", "xz"}) {
    std::string ext = tool == "gzip" ? ".gz" : ".xz";
    ASSERT_EQ(RunCommand(tool + " -k -f " + plain).exit_code, 0);
    // Whole file reads fine.
    testing::CommandResult ok = RunDmg("info --graph=" + plain + ext);
    EXPECT_EQ(ok.exit_code, 0) << ok.err;
    EXPECT_NE(ok.out.find("vertices:"), std::string::npos);
    // Cut it short.
    std::string cut = dir.file("cut.el" + ext);
    std::filesystem::copy_file(plain + ext, cut);
    std::filesystem::resize_file(cut, std::filesystem::file_size(cut) / 2);
    std::string image = dir.file("o.img");
    testing::CommandResult r =
        RunDmg("load --graph=" + cut + " --image=" + image);
    EXPECT_EQ(r.exit_code, 2) << tool;
    ASSERT_EQ(ErrorLines(r.err).size(), 1u) << r.err;
    EXPECT_NE(r.err.find(cut), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("truncated"), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(image));
  }
}

TEST(CliTest, UsageErrorsExitTwo) {
  EXPECT_EQ(RunDmg("").exit_code, 2);
  EXPECT_EQ(RunDmg("frobnicate").exit_code, 2);
  EXPECT_EQ(RunDmg("info").exit_code, 2);  // no --graph
  EXPECT_EQ(RunDmg("info --graph=kron:8 --bogus=1").exit_code, 2);
  EXPECT_EQ(RunDmg("info --graph=kron:8 --threads=abc").exit_code, 2);
  EXPECT_EQ(RunDmg("info --graph=kron:8 --block_size=100").exit_code, 2);
  EXPECT_EQ(RunDmg("info --graph=kron:abc").exit_code, 2);
  EXPECT_EQ(RunDmg("load --graph=kron:8").exit_code, 2);  // no --image
  EXPECT_EQ(RunDmg("help").exit_code, 0);
}

TEST(CliTest, LoadThenInfoOnImageMatchesInfoOnSource) {
  TempDir dir;
  std::string src = dir.Write("g.wel", "0 1 4\n1 2 5\n2 0 6\n2 0 1\n5 5 9\n");
  std::string image = dir.file("g.img");
  testing::CommandResult load =
      RunDmg("load --graph=" + src + " --image=" + image);
  ASSERT_EQ(load.exit_code, 0) << load.err;
  testing::CommandResult a = RunDmg("info --graph=" + src);
  testing::CommandResult b = RunDmg("info --graph=" + image);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  // Everything but the name and the load time agrees.
  auto strip = [](std::string s) {
    std::string out;
    for (const std::string& line : ErrorLines(s)) {
      if (line.rfind("graph:", 0) == 0 || line.rfind("load time:", 0) == 0) {
        continue;
      }
      out += line + "\n";
    }
    return out;
  };
  EXPECT_EQ(strip(a.out), strip(b.out));
  EXPECT_NE(a.out.find("vertices:                  6"), std::string::npos)
      << a.out;
  EXPECT_NE(a.out.find("arcs:                      3"), std::string::npos)
      << a.out;
  EXPECT_NE(a.out.find("self-loops removed:        1"), std::string::npos);
  EXPECT_NE(a.out.find("parallel arcs removed:     1"), std::string::npos);
}

}  // namespace
}  // namespace dmg

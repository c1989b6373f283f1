// Issue 38, a newcomer's first hour, as a user meets it on the command
// line: records that cannot name the wrong graph (the store's fingerprint),
// and the messages and help of `dmg`.
#include <algorithm>
#include <cstring>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "store/block_format.h"
#include "store/image_file.h"
#include "store/store_image.h"
#include "tests/daemon_util.h"
#include "tests/test_util.h"

namespace dmg {
namespace {

using testing::CommandResult;
using testing::Daemon;
using testing::RunDmg;
using testing::TempDir;

int Lines(const std::string& text) {
  return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The issue's probe: kron:12 on the memory nodes, a run that says kron:14.
TEST(GraphFingerprintTest, RunOnMemoryNodesRefusesAnotherGraphNamingBoth) {
  TempDir dir;
  Daemon node("--transport=tcp", dir.file("node.log"));
  const std::string nodes = " --memory_nodes=" + node.address();
  ASSERT_EQ(RunDmg("load --graph=kron:12" + nodes).exit_code, 0);

  const std::string summary = dir.file("summary.json");
  CommandResult wrong = RunDmg("run --algo=bfs --graph=kron:14 --verify" +
                               nodes + " --summary_json=" + summary);
  EXPECT_EQ(wrong.exit_code, 2) << wrong.err;
  EXPECT_EQ(Lines(wrong.err), 1) << wrong.err;
  EXPECT_TRUE(Has(wrong.err, "--graph=kron:14")) << wrong.err;
  EXPECT_TRUE(Has(wrong.err, "kron:12")) << wrong.err;
  EXPECT_FALSE(std::ifstream(summary).good()) << "a record of the wrong graph";

  // The same generator with a flag that shapes the graph is another graph.
  CommandResult shaped =
      RunDmg("run --algo=bfs --graph=kron:12 --symmetrize" + nodes);
  EXPECT_EQ(shaped.exit_code, 2) << shaped.err;
  EXPECT_TRUE(Has(shaped.err, "kron:12 --symmetrize")) << shaped.err;

  // The right graph runs and verifies; without --graph the run records the
  // graph the nodes hold.
  CommandResult right = RunDmg("run --algo=bfs --graph=kron:12 --verify" +
                               nodes + " --summary_json=" + summary);
  EXPECT_EQ(right.exit_code, 0) << right.err;
  EXPECT_TRUE(Has(testing::Slurp(summary), R"("graph": "kron:12")"));
  CommandResult bare =
      RunDmg("run --algo=bfs" + nodes + " --summary_json=" + summary);
  EXPECT_EQ(bare.exit_code, 0) << bare.err;
  const std::string json = testing::Slurp(summary);
  EXPECT_TRUE(Has(json, R"("graph": "kron:12")")) << json;
  EXPECT_TRUE(Has(json, R"("graph_source": "kron:12")")) << json;
  EXPECT_FALSE(Has(json, R"("graph_digest": "")")) << json;
}

// A file is known by its name and size; an image file by its own
// fingerprint (equal arc digests: the same graph, whatever its name).
TEST(GraphFingerprintTest, FilesByNameAndSizeImagesByTheirArcs) {
  TempDir dir;
  Daemon node("--transport=tcp", dir.file("node.log"));
  const std::string nodes = " --memory_nodes=" + node.address();
  std::string edges;
  for (int v = 0; v < 200; ++v) {
    edges += std::to_string(v) + " " + std::to_string((v * 7 + 1) % 200) + "\n";
  }
  const std::string graph = dir.Write("ring.el", edges);
  ASSERT_EQ(RunDmg("load --graph=" + graph + nodes).exit_code, 0);
  EXPECT_EQ(RunDmg("run --algo=cc --verify --graph=" + graph + nodes).exit_code,
            0);
  dir.Write("ring.el", edges + "0 5\n");  // the same name, other bytes
  CommandResult changed = RunDmg("run --algo=cc --graph=" + graph + nodes);
  EXPECT_EQ(changed.exit_code, 2) << changed.err;
  EXPECT_TRUE(Has(changed.err, "bytes")) << changed.err;

  ASSERT_EQ(RunDmg("load --graph=kron:10" + nodes).exit_code, 0);
  const std::string same = dir.file("same.img"), other = dir.file("other.img");
  ASSERT_EQ(RunDmg("load --graph=kron:10 --image=" + same).exit_code, 0);
  ASSERT_EQ(RunDmg("load --graph=kron:11 --image=" + other).exit_code, 0);
  EXPECT_EQ(RunDmg("run --algo=cc --verify --graph=" + same + nodes).exit_code,
            0);
  CommandResult wrong = RunDmg("run --algo=cc --graph=" + other + nodes);
  EXPECT_EQ(wrong.exit_code, 2) << wrong.err;
  EXPECT_TRUE(Has(wrong.err, "kron:11")) << wrong.err;
  EXPECT_TRUE(Has(wrong.err, "kron:10")) << wrong.err;
}

// The fingerprint lives in the superblock: the source, and a digest of the
// arcs that full validation checks.
TEST(GraphFingerprintTest, ImagesRecordTheirSourceAndValidationChecksIt) {
  TempDir dir;
  const std::string image = dir.file("k.img");
  ASSERT_EQ(RunDmg("load --graph=kron:10 --seed=3 --image=" + image).exit_code,
            0);
  absl::StatusOr<store::Superblock> sb = store::ReadSuperblock(image);
  ASSERT_TRUE(sb.ok()) << sb.status();
  EXPECT_EQ(store::SourceOf(*sb), "kron:10 --seed=3");
  EXPECT_NE(sb->arc_digest, 0u);
  ASSERT_TRUE(store::ReadImageFile(image).ok());

  // A wrong digest (under a correct CRC) is a damaged image.
  std::string bytes = testing::Slurp(image);
  store::Superblock changed = *sb;
  changed.arc_digest ^= 1;
  changed.crc32 = store::Crc32({reinterpret_cast<const std::byte*>(&changed),
                                store::kSuperblockSize - 4});
  std::memcpy(bytes.data(), &changed, sizeof(changed));
  dir.Write("k.img", bytes);
  absl::StatusOr<store::StoreImage> read = store::ReadImageFile(image);
  ASSERT_FALSE(read.ok());
  EXPECT_TRUE(Has(std::string(read.status().message()), "arc digest"))
      << read.status();
}

// Item 4: a load that cannot go in fails before the graph is built (a
// missing input file is only noticed while building it).
TEST(LoadTest, ChecksTheNodesAndTheSecretBeforeBuilding) {
  TempDir dir;
  const std::string missing = dir.file("not-there.el");
  CommandResult down =
      RunDmg("load --graph=" + missing + " --memory_nodes=127.0.0.1:1");
  EXPECT_NE(down.exit_code, 0);
  EXPECT_TRUE(Has(down.err, "127.0.0.1:1")) << down.err;
  EXPECT_FALSE(Has(down.err, "not-there")) << down.err;

  ASSERT_EQ(RunDmg("secret --output=" + dir.file("s")).exit_code, 0);
  Daemon node("--transport=tcp --secret_file=" + dir.file("s"),
              dir.file("node.log"));
  CommandResult no_secret = testing::RunCommand(
      "env -u DMG_SECRET_FILE " DMG_BINARY " load --graph=" + missing +
      " --memory_nodes=" + node.address());
  EXPECT_EQ(no_secret.exit_code, 2) << no_secret.err;
  EXPECT_TRUE(Has(no_secret.err, "requires the cluster secret"))
      << no_secret.err;
}

// Item 7: a misspelt flag or command gets the nearest name, not a list
// of all 50 flags.
TEST(MessagesTest, MisspeltFlagsAndCommandsGetADidYouMean) {
  CommandResult flag = RunDmg("run --algo=bfs --grpah=kron:4");
  EXPECT_EQ(flag.exit_code, 2);
  EXPECT_EQ(Lines(flag.err), 1) << flag.err;
  EXPECT_TRUE(Has(flag.err, "did you mean --graph?")) << flag.err;
  EXPECT_TRUE(Has(flag.err, "dmg help run")) << flag.err;
  EXPECT_FALSE(Has(flag.err, "--cache_mb")) << flag.err;
  EXPECT_TRUE(Has(RunDmg("run --cache_frac=0.5").err,
                  "did you mean --cache_fraction?"));
  CommandResult command = RunDmg("stauts --memory_nodes=127.0.0.1:1");
  EXPECT_EQ(command.exit_code, 2);
  EXPECT_TRUE(Has(command.err, "did you mean 'status'?")) << command.err;
  EXPECT_FALSE(Has(RunDmg("frobnicate").err, "did you mean"));
}

// Item 7: --help everywhere, and the overview lists every command.
TEST(MessagesTest, HelpEverywhere) {
  for (const std::string args :
       {"--help", "help", "help --help", "help help", "-h"}) {
    CommandResult r = RunDmg(args);
    EXPECT_EQ(r.exit_code, 0) << args << ": " << r.err;
    for (const std::string command :
         {"run", "info", "load", "memory-node", "status", "snapshot", "doctor",
          "secret", "gpu-probe"}) {
      EXPECT_TRUE(Has(r.out, "\n  " + command + " "))
          << args << " lacks " << command;
    }
  }
  for (const std::string command :
       {"run", "info", "load", "memory-node", "status", "snapshot", "doctor",
        "secret", "gpu-probe"}) {
    CommandResult r = RunDmg(command + " --help");
    EXPECT_EQ(r.exit_code, 0) << command;
    EXPECT_TRUE(Has(r.out, "usage: dmg " + command)) << r.out;
  }
  // The memory node's --transport is tcp by default, not dmg run's local.
  const std::string help = RunDmg("memory-node --help").out;
  const size_t at = help.find("\n  --transport=");
  ASSERT_NE(at, std::string::npos) << help;
  const std::string entry = help.substr(at, help.find("\n  --", at + 2) - at);
  EXPECT_TRUE(Has(entry, "(default: 'tcp')")) << entry;
}

// Item 7: cache bounds named by what is wrong with them.
TEST(MessagesTest, CacheFlagsSayWhatIsWrong) {
  CommandResult negative =
      RunDmg("run --algo=bfs --graph=kron:6 --cache_mb=-5");
  EXPECT_EQ(negative.exit_code, 2);
  EXPECT_TRUE(Has(negative.err, "--cache_mb=-5 is negative")) << negative.err;
  CommandResult fraction =
      RunDmg("run --algo=bfs --graph=kron:6 --cache_fraction=2");
  EXPECT_EQ(fraction.exit_code, 2) << fraction.out;
  EXPECT_TRUE(Has(fraction.err, "--cache_fraction=2 is not in 0..1"))
      << fraction.err;
  CommandResult both =
      RunDmg("run --algo=bfs --graph=kron:6 --cache_fraction=0.5 --cache_mb=1");
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_TRUE(Has(both.err, "at most one")) << both.err;
  CommandResult whole =
      RunDmg("run --algo=bfs --graph=kron:14 --cache_fraction=1");
  EXPECT_EQ(whole.exit_code, 0) << whole.err;
}

// Item 7: "1 superstep", and progress on a terminal names the phase and,
// for PageRank, how far towards --max_iters it is.
TEST(MessagesTest, CountsAndProgress) {
  CommandResult one =
      RunDmg("run --algo=pagerank --graph=kron:6 --max_iters=1");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_TRUE(Has(one.out, " 1 superstep,")) << one.out;
  EXPECT_FALSE(Has(one.out, " 1 supersteps")) << one.out;
  // `script` gives dmg a terminal, where the progress line shows.
  CommandResult tty = testing::RunCommand(
      "script -qec '" DMG_BINARY
      " run --algo=pagerank --graph=kron:8 --max_iters=4 --tolerance=0 "
      "--trials=2' /dev/null");
  ASSERT_EQ(tty.exit_code, 0) << tty.out << tty.err;
  EXPECT_TRUE(Has(tty.out,
                  "pagerank: trial 2 of 2, superstep 4 of at most "
                  "4 (100%)"))
      << tty.out;
}

// Item 7: the memory node's start line once in a log that takes both
// stdout and stderr (as a launcher's does).
TEST(MessagesTest, MemoryNodeSaysItsStartLineOnce) {
  TempDir dir;
  { Daemon node("--transport=tcp", dir.file("node.log")); }
  const std::string log = testing::Slurp(dir.file("node.log"));
  size_t count = 0;
  for (size_t at = log.find("listening on"); at != std::string::npos;
       at = log.find("listening on", at + 1)) {
    ++count;
  }
  EXPECT_EQ(count, 1u) << log;
}

// Item 7: dmg status without the secret reaches a running node: up, but
// refused; and a job given some of the memory nodes is told so.
TEST(MessagesTest, StatusWithoutTheSecretAndASubsetOfTheNodes) {
  TempDir dir;
  ASSERT_EQ(RunDmg("secret --output=" + dir.file("s")).exit_code, 0);
  const std::string secret = " --secret_file=" + dir.file("s");
  Daemon a("--transport=tcp" + secret, dir.file("a.log"));
  Daemon b("--transport=tcp" + secret, dir.file("b.log"));
  CommandResult status = testing::RunCommand(
      "env -u DMG_SECRET_FILE " DMG_BINARY " status --memory_nodes=" +
      a.address());
  EXPECT_EQ(status.exit_code, 1);
  EXPECT_TRUE(Has(status.out, "up, but it refused this client")) << status.out;
  EXPECT_FALSE(Has(status.out, "down")) << status.out;

  ASSERT_EQ(RunDmg("load --graph=kron:10 --memory_nodes=" + a.address() + "," +
                   b.address() + secret)
                .exit_code,
            0);
  CommandResult subset =
      RunDmg("run --algo=bfs --memory_nodes=" + a.address() + secret);
  EXPECT_EQ(subset.exit_code, 2) << subset.err;
  EXPECT_TRUE(Has(subset.err,
                  "laid out over 2 memory node(s), but the job "
                  "was given 1"))
      << subset.err;
}

}  // namespace
}  // namespace dmg

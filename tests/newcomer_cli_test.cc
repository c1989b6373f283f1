// Issue 38, a newcomer's first hour, as a user meets it on the command
// line: records that cannot name the wrong graph (the store's fingerprint),
// and the messages and help of `dmg`.
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
  changed.crc32 = store::Crc32(
      {reinterpret_cast<const std::byte*>(&changed), store::kSuperblockSize - 4});
  std::memcpy(bytes.data(), &changed, sizeof(changed));
  dir.Write("k.img", bytes);
  absl::StatusOr<store::StoreImage> read = store::ReadImageFile(image);
  ASSERT_FALSE(read.ok());
  EXPECT_TRUE(Has(std::string(read.status().message()), "arc digest"))
      << read.status();
}

}  // namespace
}  // namespace dmg

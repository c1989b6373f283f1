// Store image files: round trip, and rejection of truncated, corrupted and
// newer-format images with a clear error.
#include <sys/stat.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"
#include "store/build_graph.h"
#include "store/generator.h"
#include "store/graph_source.h"
#include "store/image_file.h"
#include "store/layout.h"
#include "tests/test_util.h"
#include "zlib.h"

namespace dmg::store {
namespace {

using dmg::testing::TempDir;

StoreImage MakeImage(uint32_t memory_nodes = 2) {
  EdgeList e = Generate({GeneratorParams::Kind::kKron, 10, 8, 5});
  for (size_t i = 0; i < e.num_arcs(); ++i) {
    e.weights.push_back(static_cast<Weight>(i % 100 + 1));
  }
  absl::StatusOr<Graph> g = BuildGraph(std::move(e), {});
  EXPECT_TRUE(g.ok()) << g.status();
  LayoutOptions layout;
  layout.block_size = 1024;
  layout.num_memory_nodes = memory_nodes;
  absl::StatusOr<StoreImage> image = BuildStoreImage(*g, layout);
  EXPECT_TRUE(image.ok()) << image.status();
  return *std::move(image);
}

std::string ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void WriteAll(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

TEST(ImageFileTest, RoundTripIsByteIdentical) {
  TempDir dir;
  StoreImage image = MakeImage();
  std::string path = dir.file("g.dmgimg");
  ASSERT_TRUE(WriteImageFile(image, path).ok());
  EXPECT_TRUE(IsStoreImageFile(path));
  // No temporary files are left behind.
  int files = 0;
  for (auto& f : std::filesystem::directory_iterator(dir.path())) {
    (void)f;
    ++files;
  }
  EXPECT_EQ(files, 1);

  absl::StatusOr<StoreImage> back = ReadImageFile(path);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->bytes().size(), image.bytes().size());
  EXPECT_EQ(std::memcmp(back->bytes().data(), image.bytes().data(),
                        image.bytes().size()),
            0);
  for (Direction d : {Direction::kOut, Direction::kIn}) {
    auto a = image.directory(d), b = back->directory(d);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(std::memcmp(&a[i], &b[i], sizeof(DirectoryEntry)), 0);
    }
  }
  // The decoded graph is the same as the one decoded from the original.
  Csr x = CsrFromImage(image, Direction::kIn);
  Csr y = CsrFromImage(*back, Direction::kIn);
  EXPECT_EQ(x.offsets, y.offsets);
  EXPECT_EQ(x.targets, y.targets);
  EXPECT_EQ(x.weights, y.weights);
}

TEST(ImageFileTest, TruncatedImageIsRejected) {
  TempDir dir;
  StoreImage image = MakeImage();
  std::string path = dir.file("g.dmgimg");
  ASSERT_TRUE(WriteImageFile(image, path).ok());
  std::string bytes = ReadAll(path);
  for (size_t keep :
       {bytes.size() - 1, bytes.size() / 2, size_t{4096}, size_t{100}}) {
    WriteAll(path, bytes.substr(0, keep));
    absl::StatusOr<StoreImage> back = ReadImageFile(path);
    ASSERT_FALSE(back.ok()) << "kept " << keep;
    EXPECT_NE(back.status().message().find(path), std::string::npos);
    EXPECT_NE(back.status().message().find("truncated"), std::string::npos)
        << back.status();
  }
}

TEST(ImageFileTest, FlippedBitInAnyRegionIsRejected) {
  TempDir dir;
  StoreImage image = MakeImage();
  std::string path = dir.file("g.dmgimg");
  ASSERT_TRUE(WriteImageFile(image, path).ok());
  const std::string good = ReadAll(path);
  // One flip in the superblock, and several in every region.
  std::vector<size_t> positions = {9, 40, 200, kSuperblockSize - 1};
  for (const RegionEntry& r : image.regions()) {
    ASSERT_GT(r.length, 0u);
    for (uint64_t at : {uint64_t{0}, r.length / 2, r.length - 1}) {
      positions.push_back(r.offset + at);
    }
  }
  for (size_t pos : positions) {
    for (int bit : {0, 7}) {
      std::string bad = good;
      bad[pos] ^= static_cast<char>(1 << bit);
      WriteAll(path, bad);
      absl::StatusOr<StoreImage> back = ReadImageFile(path);
      EXPECT_FALSE(back.ok()) << "flip at byte " << pos << " bit " << bit;
      if (!back.ok()) {
        EXPECT_NE(back.status().message().find(path), std::string::npos);
      }
    }
  }
}

TEST(ImageFileTest, NewerFormatVersionIsRejected) {
  TempDir dir;
  StoreImage image = MakeImage(1);
  std::string path = dir.file("g.dmgimg");
  ASSERT_TRUE(WriteImageFile(image, path).ok());
  std::string bytes = ReadAll(path);
  Superblock sb;
  std::memcpy(&sb, bytes.data(), sizeof(sb));
  sb.format_version = kFormatVersion + 1;
  sb.crc32 = static_cast<uint32_t>(
      crc32(0, reinterpret_cast<const Bytef*>(&sb), kSuperblockSize - 4));
  std::memcpy(bytes.data(), &sb, sizeof(sb));
  WriteAll(path, bytes);
  absl::StatusOr<StoreImage> back = ReadImageFile(path);
  ASSERT_FALSE(back.ok());
  EXPECT_EQ(back.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(back.status().message().find("newer"), std::string::npos)
      << back.status();
}

TEST(ImageFileTest, NotAnImage) {
  TempDir dir;
  std::string path = dir.Write("x.el", "0 1\n");
  EXPECT_FALSE(IsStoreImageFile(path));
  EXPECT_FALSE(IsStoreImageFile(dir.file("missing")));
  absl::StatusOr<StoreImage> back = ReadImageFile(path);
  ASSERT_FALSE(back.ok());
  EXPECT_EQ(ReadImageFile(dir.file("missing")).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(GraphSourceTest, ImageSpecGivesTheSameGraphAsItsSource) {
  TempDir dir;
  GraphSourceOptions options;
  options.layout.block_size = 512;
  absl::StatusOr<Graph> g = LoadGraph("urand:9:4", options);
  ASSERT_TRUE(g.ok()) << g.status();
  absl::StatusOr<StoreImage> image = LoadStore("urand:9:4", options);
  ASSERT_TRUE(image.ok());
  std::string path = dir.file("u.img");
  ASSERT_TRUE(WriteImageFile(*image, path).ok());
  absl::StatusOr<Graph> h = LoadGraph(path, options);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(g->out.offsets, h->out.offsets);
  EXPECT_EQ(g->out.targets, h->out.targets);
  EXPECT_EQ(g->in.offsets, h->in.offsets);
  EXPECT_EQ(g->in.targets, h->in.targets);
  EXPECT_EQ(g->report.self_loops_removed, h->report.self_loops_removed);
}

}  // namespace
}  // namespace dmg::store

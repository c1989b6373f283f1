// Tests for the graph-file readers (store/reader.h) and the input layer that
// decompresses gzip and xz (store/input_file.h).
#include "store/reader.h"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <initializer_list>
#include <iostream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "gtest/gtest.h"
#include "store/graph.h"
#include "store/input_file.h"

namespace dmg::store {
namespace {

// "0 1\n1 2\n2 0\n" compressed by `gzip -n -9` and by `xz`.
constexpr unsigned char kSmallGz[] = {
    0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x03, 0x33,
    0x50, 0x30, 0xe4, 0x32, 0x54, 0x30, 0xe2, 0x32, 0x52, 0x30, 0xe0,
    0x02, 0x00, 0x7b, 0x61, 0x5b, 0x23, 0x0c, 0x00, 0x00, 0x00};
constexpr unsigned char kSmallXz[] = {
    0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00, 0x00, 0x04, 0xe6, 0xd6, 0xb4, 0x46,
    0x02, 0x00, 0x21, 0x01, 0x16, 0x00, 0x00, 0x00, 0x74, 0x2f, 0xe5, 0xa3,
    0x01, 0x00, 0x0b, 0x30, 0x20, 0x31, 0x0a, 0x31, 0x20, 0x32, 0x0a, 0x32,
    0x20, 0x30, 0x0a, 0x00, 0xb8, 0xf0, 0x70, 0xf7, 0x40, 0x4e, 0xb0, 0xa4,
    0x00, 0x01, 0x24, 0x0c, 0xa6, 0x18, 0xd8, 0xd8, 0x1f, 0xb6, 0xf3, 0x7d,
    0x01, 0x00, 0x00, 0x00, 0x00, 0x04, 0x59, 0x5a};
// An empty input compressed by gzip and by xz.
constexpr unsigned char kEmptyGz[] = {0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00,
                                      0x00, 0x00, 0x03, 0x03, 0x00, 0x00, 0x00,
                                      0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
constexpr unsigned char kEmptyXz[] = {
    0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00, 0x00, 0x04, 0xe6, 0xd6, 0xb4,
    0x46, 0x00, 0x00, 0x00, 0x00, 0x1c, 0xdf, 0x44, 0x21, 0x1f, 0xb6,
    0xf3, 0x7d, 0x01, 0x00, 0x00, 0x00, 0x00, 0x04, 0x59, 0x5a};

template <size_t N>
std::string Bytes(const unsigned char (&b)[N], size_t len = N) {
  return std::string(reinterpret_cast<const char*>(b), std::min(len, N));
}

class ReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "dmg_reader_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    if (!dir_.empty()) {
      ASSERT_EQ(std::system(("rm -rf '" + dir_ + "'").c_str()), 0);
    }
  }

  // Writes `contents` to DIR/name and returns the path.
  std::string Write(const std::string& name, absl::string_view contents) {
    const std::string path = dir_ + "/" + name;
    std::ofstream out(path, std::ios::binary);
    out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
    out.close();
    EXPECT_TRUE(out.good()) << path;
    return path;
  }

  EdgeList ReadOk(const std::string& path) {
    absl::StatusOr<EdgeList> el = ReadGraphFile(path);
    EXPECT_TRUE(el.ok()) << el.status();
    return el.ok() ? *std::move(el) : EdgeList{};
  }

  // Reads `path`, expects an error "PATH:LINE: ..." naming every keyword.
  // line == 0: an error without a line number ("PATH: ...").
  void ExpectError(const std::string& path, uint64_t line,
                   std::initializer_list<absl::string_view> keywords) {
    absl::StatusOr<EdgeList> el = ReadGraphFile(path);
    ASSERT_FALSE(el.ok()) << path << " read " << el->num_arcs() << " arcs";
    const std::string msg(el.status().message());
    const std::string prefix =
        line == 0 ? path + ": " : absl::StrCat(path, ":", line, ": ");
    EXPECT_TRUE(absl::StartsWith(msg, prefix))
        << "message: " << msg << "\nwanted prefix: " << prefix;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    for (absl::string_view k : keywords) {
      EXPECT_TRUE(absl::StrContains(msg, k))
          << "message: " << msg << "\nmissing: " << k;
    }
  }

  std::string dir_;
};

using Arcs = std::vector<std::pair<VertexId, VertexId>>;
Arcs ArcsOf(const EdgeList& el) {
  Arcs arcs;
  for (size_t i = 0; i < el.num_arcs(); ++i)
    arcs.push_back({el.src[i], el.dst[i]});
  return arcs;
}

bool HaveTool(const char* name) {
  return std::system(
             absl::StrCat("command -v ", name, " >/dev/null 2>&1").c_str()) ==
         0;
}

// ---------------------------------------------------------------------------
// Input layer.

TEST_F(ReaderTest, MissingFile) {
  const std::string path = dir_ + "/nope.el";
  absl::StatusOr<InputText> in = ReadInputFile(path);
  ASSERT_FALSE(in.ok());
  EXPECT_EQ(in.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(in.status().message(), path + ": no such file");
  ExpectError(path, 0, {"no such file"});
}

TEST_F(ReaderTest, EmptyFile) {
  const std::string path = Write("empty.el", "");
  ExpectError(path, 0, {"file is empty"});
  EXPECT_EQ(ReadInputFile(path).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(ReaderTest, DirectoryIsAnError) {
  absl::StatusOr<InputText> in = ReadInputFile(dir_);
  ASSERT_FALSE(in.ok());
  EXPECT_TRUE(absl::StartsWith(in.status().message(), dir_ + ": "))
      << in.status();
}

TEST_F(ReaderTest, PlainFileIsReturnedAsIs) {
  const std::string path = Write("plain.txt", "hello\r\n\x1f");
  absl::StatusOr<InputText> in = ReadInputFile(path);
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_EQ(in->view(), "hello\r\n\x1f");
}

TEST_F(ReaderTest, GzipIsDetectedByMagicNotName) {
  absl::StatusOr<InputText> in =
      ReadInputFile(Write("small.bin", Bytes(kSmallGz)));
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_EQ(in->view(), "0 1\n1 2\n2 0\n");
}

TEST_F(ReaderTest, XzIsDetectedByMagicNotName) {
  absl::StatusOr<InputText> in =
      ReadInputFile(Write("small.bin", Bytes(kSmallXz)));
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_EQ(in->view(), "0 1\n1 2\n2 0\n");
}

TEST_F(ReaderTest, GzipAndXzGraphsReadCorrectly) {
  for (const std::string& path :
       {Write("g.el.gz", Bytes(kSmallGz)), Write("g.el.xz", Bytes(kSmallXz))}) {
    EdgeList el = ReadOk(path);
    EXPECT_EQ(ArcsOf(el), (Arcs{{0, 1}, {1, 2}, {2, 0}})) << path;
    EXPECT_EQ(el.num_vertices, 3u);
    EXPECT_FALSE(el.weighted());
  }
}

TEST_F(ReaderTest, ConcatenatedGzipMembersAndXzStreams) {
  for (const std::string& path :
       {Write("g2.el.gz", Bytes(kSmallGz) + Bytes(kSmallGz)),
        Write("g2.el.xz", Bytes(kSmallXz) + Bytes(kSmallXz))}) {
    absl::StatusOr<InputText> in = ReadInputFile(path);
    ASSERT_TRUE(in.ok()) << in.status();
    EXPECT_EQ(in->view(), "0 1\n1 2\n2 0\n0 1\n1 2\n2 0\n");
  }
}

TEST_F(ReaderTest, TruncatedGzipIsAnError) {
  // Every prefix that still carries the magic bytes must fail, never read as
  // a shorter graph.
  for (size_t len = 2; len < sizeof(kSmallGz); ++len) {
    const std::string path =
        Write(absl::StrCat("cut", len, ".el.gz"), Bytes(kSmallGz, len));
    ExpectError(path, 0, {"truncated or corrupt gzip stream"});
  }
  // A second member cut short is an error too.
  ExpectError(Write("cut2.el.gz", Bytes(kSmallGz) + Bytes(kSmallGz, 20)), 0,
              {"truncated or corrupt gzip stream"});
}

TEST_F(ReaderTest, CorruptGzipIsAnError) {
  std::string bad = Bytes(kSmallGz);
  bad[bad.size() - 6] ^= 0x55;  // CRC32
  ExpectError(Write("crc.el.gz", bad), 0, {"truncated or corrupt gzip stream"});
  ExpectError(Write("tail.el.gz", Bytes(kSmallGz) + "junk"), 0,
              {"trailing garbage"});
}

TEST_F(ReaderTest, TruncatedXzIsAnError) {
  for (size_t len = 6; len < sizeof(kSmallXz); ++len) {
    const std::string path =
        Write(absl::StrCat("cut", len, ".el.xz"), Bytes(kSmallXz, len));
    ExpectError(path, 0, {"truncated or corrupt xz stream"});
  }
  std::string bad = Bytes(kSmallXz);
  bad[30] ^= 0x55;  // payload byte: the CRC check catches it
  ExpectError(Write("crc.el.xz", bad), 0, {"truncated or corrupt xz stream"});
}

TEST_F(ReaderTest, CompressedEmptyFileIsEmpty) {
  ExpectError(Write("e.el.gz", Bytes(kEmptyGz)), 0, {"file is empty"});
  ExpectError(Write("e.el.xz", Bytes(kEmptyXz)), 0, {"file is empty"});
}

TEST_F(ReaderTest, LargeFilesThroughGzipAndXzTools) {
  if (!HaveTool("gzip") || !HaveTool("xz")) {
    GTEST_SKIP() << "gzip or xz command not installed";
  }
  // Big enough that the decompression buffers have to grow many times.
  std::string text = "# a large ring\n";
  constexpr uint32_t kN = 200000;
  for (uint32_t i = 0; i < kN; ++i) {
    absl::StrAppend(&text, i, "\t", (i + 1) % kN, "\t", i % 1000, "\n");
  }
  const std::string plain = Write("ring.wel", text);
  ASSERT_EQ(std::system(("gzip -k '" + plain + "'").c_str()), 0);
  ASSERT_EQ(std::system(("xz -k '" + plain + "'").c_str()), 0);
  for (const std::string& path : {plain, plain + ".gz", plain + ".xz"}) {
    EdgeList el = ReadOk(path);
    ASSERT_EQ(el.num_arcs(), kN) << path;
    EXPECT_EQ(el.num_vertices, kN);
    EXPECT_EQ(el.src[12345], 12345u);
    EXPECT_EQ(el.dst[kN - 1], 0u);
    EXPECT_EQ(el.weights[4321], 321);
  }
  // Chopping the tail of the real compressed files must be noticed.
  std::ifstream gz(plain + ".gz", std::ios::binary);
  std::string gz_bytes((std::istreambuf_iterator<char>(gz)), {});
  std::ifstream xz(plain + ".xz", std::ios::binary);
  std::string xz_bytes((std::istreambuf_iterator<char>(xz)), {});
  for (size_t chop : {1, 4, 8, 100, 5000}) {
    ExpectError(
        Write("chop.wel.gz", gz_bytes.substr(0, gz_bytes.size() - chop)), 0,
        {"truncated or corrupt gzip stream"});
    ExpectError(
        Write("chop.wel.xz", xz_bytes.substr(0, xz_bytes.size() - chop)), 0,
        {"truncated or corrupt xz stream"});
  }
}

// ---------------------------------------------------------------------------
// Edge lists.

TEST_F(ReaderTest, EdgeListUnweighted) {
  EdgeList el = ReadOk(Write("g.el", "0 1\n1 2\n2 0\n5 1\n"));
  EXPECT_EQ(ArcsOf(el), (Arcs{{0, 1}, {1, 2}, {2, 0}, {5, 1}}));
  EXPECT_EQ(el.num_vertices, 6u);  // largest id + 1
  EXPECT_FALSE(el.weighted());
  EXPECT_FALSE(el.undirected);
}

TEST_F(ReaderTest, EdgeListWeightedWhenFirstLineHasThreeFields) {
  EdgeList el = ReadOk(Write("g.txt", "0 1 7\n1 2 -3\n2 0 2147483647\n"));
  EXPECT_EQ(ArcsOf(el), (Arcs{{0, 1}, {1, 2}, {2, 0}}));
  EXPECT_EQ(el.weights, (std::vector<Weight>{7, -3, 2147483647}));
}

TEST_F(ReaderTest, WelRequiresThreeFields) {
  EdgeList el = ReadOk(Write("g.wel", "0 1 4\n"));
  EXPECT_EQ(el.weights, (std::vector<Weight>{4}));
  const std::string path = Write("bad.wel", "# c\n0 1\n");
  ExpectError(path, 2, {"expected 3 fields (u v w), found 2"});
}

TEST_F(ReaderTest, EdgeListFieldCountMustNotChange) {
  ExpectError(Write("a.el", "0 1\n1 2\n2 0 5\n"), 3,
              {"expected 2 fields (u v), found 3"});
  ExpectError(Write("b.el", "0 1 5\n\n1 2\n"), 3,
              {"expected 3 fields (u v w), found 2"});
  ExpectError(Write("c.el", "0\n"), 1, {"expected 2 or 3 fields", "found 1"});
  ExpectError(Write("d.el", "0 1\n1 2 3 4\n"), 2,
              {"expected 2 fields (u v), found 4"});
}

TEST_F(ReaderTest, CrlfTabsCommasAndComments) {
  const std::string text =
      "# SNAP style comment\r\n"
      "% another comment\r\n"
      "\r\n"
      "   # indented comment\r\n"
      "0\t1\r\n"
      "1  \t 2\r\n"
      "2,3\r\n"
      "  3 0  \r\n"
      "\r\n"
      "4 4";  // no final newline
  EdgeList el = ReadOk(Write("mixed.txt", text));
  EXPECT_EQ(ArcsOf(el), (Arcs{{0, 1}, {1, 2}, {2, 3}, {3, 0}, {4, 4}}));
  EXPECT_EQ(el.num_vertices, 5u);
  // Line numbers count CRLF lines correctly.
  ExpectError(Write("crlf_bad.txt", "# x\r\n0\t1\r\n1\tzz\r\n"), 3,
              {"non-numeric token 'zz'"});
}

TEST_F(ReaderTest, OnlyCommentsMeansNoEdges) {
  ExpectError(Write("none.el", "# nothing here\n\n% at all\n"), 0,
              {"no edges found"});
}

TEST_F(ReaderTest, NonNumericTokens) {
  ExpectError(Write("a.el", "0 1\n# c\nabc 2\n"), 3,
              {"non-numeric token 'abc'"});
  ExpectError(Write("b.el", "0 1\n12abc 2\n"), 2,
              {"non-numeric token '12abc'"});
  ExpectError(Write("c.el", "0 1\n1 +2\n"), 2, {"non-numeric token '+2'"});
  ExpectError(Write("d.wel", "0 1 1\n1 2 x9\n"), 2, {"non-numeric token 'x9'"});
  ExpectError(Write("e.wel", "0 1 1.5\n"), 1, {"weight '1.5'", "integer"});
}

TEST_F(ReaderTest, NegativeVertexId) {
  ExpectError(Write("neg.el", "0 1\n1 -3\n"), 2, {"negative vertex id -3"});
}

TEST_F(ReaderTest, VertexIdLimits) {
  // The largest id reads when the bounds allow it (by default, 2^31 vertices
  // and the memory available, it is refused at its line).
  const std::string max = Write("max.el", "0 4294967294\n");
  ReadOptions unbounded;
  unbounded.max_vertices = kMaxVertexId + 1;
  unbounded.memory_bytes = uint64_t{1} << 50;
  absl::StatusOr<EdgeList> el = ReadGraphFile(max, unbounded);
  ASSERT_TRUE(el.ok()) << el.status();
  EXPECT_EQ(el->num_vertices, 4294967295u);
  EXPECT_EQ(el->dst[0], 4294967294u);
  ExpectError(max, 1, {"4294967295 vertices", "--max_vertices=2147483648"});
  ExpectError(Write("over.el", "0 1\n4294967295 1\n"), 2,
              {"vertex id 4294967295 exceeds the maximum 4294967294"});
  // Past 2^64: must still be "too large", not wrap around or "non-numeric".
  ExpectError(Write("huge.el", "1 99999999999999999999999\n"), 1,
              {"vertex id 99999999999999999999999 exceeds the maximum "
               "4294967294"});
  ExpectError(Write("u64.el", "18446744073709551616 1\n"), 1,
              {"exceeds the maximum 4294967294"});
}

TEST_F(ReaderTest, WeightLimits) {
  EdgeList el = ReadOk(Write("w.wel", "0 1 -2147483648\n1 0 -1\n"));
  EXPECT_EQ(el.weights, (std::vector<Weight>{-2147483648, -1}));
  ExpectError(Write("w1.wel", "0 1 1\n1 2 3000000000\n"), 2,
              {"weight 3000000000 does not fit in int32"});
  ExpectError(Write("w2.el", "0 1 -2147483649\n"), 1,
              {"weight -2147483649 does not fit in int32"});
  ExpectError(Write("w3.el", "0 1 123456789012345678901234567890\n"), 1,
              {"does not fit in int32"});
}

TEST_F(ReaderTest, EnronSizeLineIsSkipped) {
  const std::string text =
      "# Directed graph (each unordered pair of nodes is saved once)\r\n"
      "# Nodes: 4 Edges: 3\r\n"
      "# FromNodeId\tToNodeId\r\n"
      "4 3\r\n"
      "0\t1\r\n"
      "1\t2\r\n"
      "2\t3\r\n";
  EdgeList el = ReadOk(Write("enron.txt", text));
  EXPECT_EQ(ArcsOf(el), (Arcs{{0, 1}, {1, 2}, {2, 3}}));
  EXPECT_EQ(el.num_vertices, 4u);
  // Line numbers after the skipped line are unaffected.
  ExpectError(Write("enron_bad.txt", "# Nodes: 4 Edges: 3\n4 3\n0 1\nx 2\n"), 4,
              {"non-numeric token 'x'"});
}

TEST_F(ReaderTest, SizeLineRuleSkipsNothingElse) {
  // No header: "4 3" is an ordinary edge.
  EXPECT_EQ(ArcsOf(ReadOk(Write("a.txt", "4 3\n0 1\n"))),
            (Arcs{{4, 3}, {0, 1}}));
  // Header, but the first line is not exactly "N M".
  EXPECT_EQ(ArcsOf(ReadOk(Write("b.txt", "# Nodes: 4 Edges: 3\n4 2\n0 1\n"))),
            (Arcs{{4, 2}, {0, 1}}));
  // "N M" later than the first data line is an edge.
  EXPECT_EQ(ArcsOf(ReadOk(Write("c.txt", "# Nodes: 4 Edges: 2\n0 1\n4 2\n"))),
            (Arcs{{0, 1}, {4, 2}}));
  // A weighted first line "N M w" is an edge.
  EXPECT_EQ(
      ArcsOf(ReadOk(Write("d.txt", "# Nodes: 4 Edges: 3\n4 3 1\n0 1 1\n"))),
      (Arcs{{4, 3}, {0, 1}}));
}

TEST_F(ReaderTest, ExtensionIsCaseInsensitiveAndContentIsSniffed) {
  EXPECT_EQ(ReadOk(Write("G.EL", "0 1\n")).num_arcs(), 1u);
  // Unknown extensions and no extension: sniff.
  EXPECT_EQ(ReadOk(Write("g.dat", "# c\n0 1\n1 2\n")).num_arcs(), 2u);
  EdgeList mtx =
      ReadOk(Write("matrix",
                   "%%MatrixMarket matrix coordinate pattern general\n3 3 1\n1 "
                   "3\n"));
  EXPECT_EQ(ArcsOf(mtx), (Arcs{{0, 2}}));
  EdgeList gr = ReadOk(Write("g.graph", "c x\np sp 3 1\na 1 3 9\n"));
  EXPECT_EQ(ArcsOf(gr), (Arcs{{0, 2}}));
  EXPECT_EQ(gr.weights, (std::vector<Weight>{9}));
  EdgeList pace = ReadOk(Write("g.pace", "p tw 3 1\n1 3\n"));
  EXPECT_TRUE(pace.undirected);
  // A Matrix Market file named .txt is read as what its banner says.
  EdgeList mtx_txt =
      ReadOk(Write("m.txt",
                   "%%MatrixMarket matrix coordinate pattern general\n3 3 1\n1 "
                   "2\n"));
  EXPECT_EQ(ArcsOf(mtx_txt), (Arcs{{0, 1}}));
  EXPECT_EQ(mtx_txt.num_vertices, 3u);
}

// ---------------------------------------------------------------------------
// Matrix Market.

TEST_F(ReaderTest, MtxGeneralPattern) {
  EdgeList el =
      ReadOk(Write("g.mtx",
                   "%%MatrixMarket matrix coordinate pattern general\n"
                   "% comment\n"
                   "%\n"
                   "4 4 3\n"
                   "1 2\n"
                   "2 3\n"
                   "4 1\n"));
  EXPECT_EQ(ArcsOf(el), (Arcs{{0, 1}, {1, 2}, {3, 0}}));
  EXPECT_EQ(el.num_vertices, 4u);
  EXPECT_FALSE(el.weighted());
  EXPECT_FALSE(el.undirected);
}

TEST_F(ReaderTest, MtxIsolatedTrailingVertices) {
  EdgeList el =
      ReadOk(Write("iso.mtx",
                   "%%MatrixMarket matrix coordinate integer general\n"
                   "10 10 3\n"
                   "1 2 5\n"
                   "2 3 6\n"
                   "4 1 7\n"));
  EXPECT_EQ(el.num_vertices, 10u);
  EXPECT_EQ(el.weights, (std::vector<Weight>{5, 6, 7}));
  // Non-square: max(rows, cols).
  EXPECT_EQ(ReadOk(Write("rect.mtx",
                         "%%MatrixMarket matrix coordinate pattern general\n"
                         "3 8 1\n1 1\n"))
                .num_vertices,
            8u);
  // Declared size, no entries: a graph of isolated vertices.
  EdgeList empty = ReadOk(Write(
      "none.mtx", "%%MatrixMarket matrix coordinate pattern general\n5 5 0\n"));
  EXPECT_EQ(empty.num_vertices, 5u);
  EXPECT_EQ(empty.num_arcs(), 0u);
  ExpectError(
      Write("zero.mtx",
            "%%MatrixMarket matrix coordinate pattern general\n0 0 0\n"),
      0, {"no edges found"});
}

TEST_F(ReaderTest, MtxSymmetricExpands) {
  EdgeList el =
      ReadOk(Write("s.mtx",
                   "%%MatrixMarket matrix coordinate integer symmetric\n"
                   "3 3 3\n"
                   "2 1 4\n"
                   "3 3 9\n"
                   "3 1 5\n"));
  EXPECT_EQ(ArcsOf(el), (Arcs{{1, 0}, {0, 1}, {2, 2}, {2, 0}, {0, 2}}));
  EXPECT_EQ(el.weights, (std::vector<Weight>{4, 4, 9, 5, 5}));
  EXPECT_TRUE(el.undirected);
  ExpectError(Write("ns.mtx",
                    "%%MatrixMarket matrix coordinate pattern symmetric\n"
                    "3 4 0\n"),
              2, {"square"});
}

TEST_F(ReaderTest, MtxRealWeightsAreRounded) {
  EdgeList el = ReadOk(Write("r.mtx",
                             "%%matrixmarket MATRIX Coordinate REAL General\n"
                             "3 3 5\n"
                             "1 2 2.4\n"
                             "1 3 2.6\n"
                             "2 1 -1.5\n"
                             "2 3 1e3\n"
                             "3 1 7\n"));
  EXPECT_EQ(el.weights, (std::vector<Weight>{2, 3, -2, 1000, 7}));
  EdgeList d = ReadOk(Write("d.mtx",
                            "%%MatrixMarket matrix coordinate double general\n"
                            "2 2 1\n1 2 0.5\n"));
  EXPECT_EQ(d.weights, (std::vector<Weight>{1}));
  ExpectError(Write("big.mtx",
                    "%%MatrixMarket matrix coordinate real general\n"
                    "2 2 1\n1 2 3e9\n"),
              3, {"does not fit in int32"});
  ExpectError(Write("nan.mtx",
                    "%%MatrixMarket matrix coordinate real general\n"
                    "2 2 1\n1 2 nan\n"),
              3, {"'nan'"});
  ExpectError(Write("int.mtx",
                    "%%MatrixMarket matrix coordinate integer general\n"
                    "2 2 1\n1 2 3000000000\n"),
              3, {"weight 3000000000 does not fit in int32"});
}

TEST_F(ReaderTest, MtxBadBanner) {
  ExpectError(Write("nob.mtx", "3 3 1\n1 2\n"), 1, {"Matrix Market banner"});
  ExpectError(Write("short.mtx", "%%MatrixMarket matrix coordinate\n1 1 0\n"),
              1, {"banner"});
  ExpectError(Write("arr.mtx", "%%MatrixMarket matrix array real general\n"), 1,
              {"unsupported", "'array'"});
  ExpectError(
      Write("cx.mtx", "%%MatrixMarket matrix coordinate complex general\n"), 1,
      {"unsupported", "'complex'"});
  ExpectError(
      Write("sk.mtx", "%%MatrixMarket matrix coordinate real skew-symmetric\n"),
      1, {"unsupported", "'skew-symmetric'"});
  ExpectError(
      Write("he.mtx", "%%MatrixMarket matrix coordinate real hermitian\n"), 1,
      {"unsupported", "'hermitian'"});
}

TEST_F(ReaderTest, MtxEntryCountMustMatch) {
  const std::string banner =
      "%%MatrixMarket matrix coordinate pattern general\n";
  // Too many: the error points at the first extra entry.
  ExpectError(Write("many.mtx", banner + "% c\n3 3 2\n1 2\n2 3\n3 1\n1 1\n"), 6,
              {"more entries than the 2 declared"});
  // Too few: the error points at the last line.
  ExpectError(Write("few.mtx", banner + "3 3 5\n1 2\n2 3\n3 1\n"), 5,
              {"expected 5 entries, found 3"});
  ExpectError(Write("few2.mtx", banner + "3 3 5\n1 2\n2 3\n3 1"), 5,
              {"expected 5 entries, found 3"});
  ExpectError(Write("nosize.mtx", banner + "% only comments\n"), 2,
              {"missing the size line"});
  ExpectError(Write("badsize.mtx", banner + "3 3\n"), 2,
              {"size line", "found 2 fields"});
  ExpectError(Write("fields.mtx", banner + "3 3 1\n1 2 3\n"), 3,
              {"expected 2 fields (i j), found 3"});
}

TEST_F(ReaderTest, MtxIndexOutOfRange) {
  const std::string banner =
      "%%MatrixMarket matrix coordinate pattern general\n";
  ExpectError(Write("i0.mtx", banner + "3 3 2\n1 2\n0 1\n"), 4,
              {"row index 0 is out of range 1..3"});
  ExpectError(Write("i4.mtx", banner + "3 3 2\n1 2\n1 4\n"), 4,
              {"column index 4 is out of range 1..3"});
  ExpectError(Write("ineg.mtx", banner + "3 3 1\n-1 2\n"), 3,
              {"negative row index -1"});
  ExpectError(Write("ix.mtx", banner + "3 3 1\n1 b\n"), 3,
              {"non-numeric token 'b'"});
}

// ---------------------------------------------------------------------------
// .gr: DIMACS-9 (p sp) and PACE (p tw).

TEST_F(ReaderTest, DimacsShortestPath) {
  EdgeList el = ReadOk(Write("d.gr",
                             "c 9th DIMACS Implementation Challenge\n"
                             "c\n"
                             "p sp 6 3\n"
                             "c arcs follow\n"
                             "a 1 2 10\n"
                             "a 2 3 -4\n"
                             "a 3 1 0\n"));
  EXPECT_EQ(ArcsOf(el), (Arcs{{0, 1}, {1, 2}, {2, 0}}));
  EXPECT_EQ(el.weights, (std::vector<Weight>{10, -4, 0}));
  EXPECT_EQ(el.num_vertices, 6u);  // from the p line
  EXPECT_FALSE(el.undirected);
}

TEST_F(ReaderTest, PaceTreewidth) {
  EdgeList el = ReadOk(Write("p.gr",
                             "c PACE 2016\r\n"
                             "p tw 5 3\r\n"
                             "1 2\r\n"
                             "2 3\r\n"
                             "3 1\r\n"));
  EXPECT_EQ(ArcsOf(el), (Arcs{{0, 1}, {1, 2}, {2, 0}}));  // once, as read
  EXPECT_EQ(el.num_vertices, 5u);
  EXPECT_TRUE(el.undirected);
  EXPECT_FALSE(el.weighted());
}

TEST_F(ReaderTest, GrOfTheOtherFlavour) {
  ExpectError(Write("sp.gr", "c x\np sp 3 2\na 1 2 5\n2 3\n"), 4,
              {"'p sp' (DIMACS shortest-path) file has a bare edge line",
               "PACE 'p tw'"});
  ExpectError(
      Write("tw.gr", "p tw 3 2\n1 2\na 2 3 5\n"), 3,
      {"'p tw' (PACE treewidth) file has an 'a' arc line", "DIMACS 'p sp'"});
}

TEST_F(ReaderTest, GrHeaderErrors) {
  ExpectError(Write("before.gr", "c x\na 1 2 3\np sp 2 1\n"), 2,
              {"before the 'p' line"});
  ExpectError(Write("nop.gr", "c only\nc comments\n"), 2, {"no 'p' line"});
  ExpectError(Write("kind.gr", "p max 3 1\n"), 1,
              {"unknown problem kind 'max'"});
  ExpectError(Write("twice.gr", "p sp 3 1\np sp 3 1\n"), 2,
              {"second 'p' line"});
  ExpectError(Write("short.gr", "p sp 3\n"), 1, {"malformed 'p' line"});
  ExpectError(Write("big.gr", "p sp 4294967296 0\n"), 1, {"4294967296"});
}

TEST_F(ReaderTest, GrCountMustMatchHeader) {
  ExpectError(Write("few.gr", "p sp 3 3\na 1 2 1\na 2 3 1\n"), 3,
              {"header declares 3 arcs, found 2"});
  ExpectError(Write("many.gr", "p tw 3 1\n1 2\n2 3\n"), 3,
              {"header declares 1 edges, found 2"});
}

TEST_F(ReaderTest, GrTokenErrors) {
  ExpectError(Write("id0.gr", "p sp 3 1\na 0 2 1\n"), 2,
              {"vertex id 0 is out of range 1..3"});
  ExpectError(Write("id4.gr", "p tw 3 1\n1 4\n"), 2,
              {"vertex id 4 is out of range 1..3"});
  ExpectError(Write("neg.gr", "p tw 3 1\n-2 1\n"), 2,
              {"negative vertex id -2"});
  ExpectError(Write("nn.gr", "p sp 3 1\na 1 2 x\n"), 2,
              {"non-numeric token 'x'"});
  ExpectError(Write("wo.gr", "p sp 3 1\na 1 2 3000000000\n"), 2,
              {"weight 3000000000 does not fit in int32"});
  ExpectError(Write("f.gr", "p sp 3 1\na 1 2\n"), 2,
              {"expected 4 fields (a u v w), found 3"});
  ExpectError(Write("e.gr", "p sp 3 1\ne 1 2\n"), 2, {"unexpected line"});
}

TEST_F(ReaderTest, CompressedGr) {
  if (!HaveTool("xz")) GTEST_SKIP() << "xz command not installed";
  const std::string plain = Write("ny.gr", "c x\np tw 4 2\n1 2\n3 4\n");
  ASSERT_EQ(std::system(("xz '" + plain + "'").c_str()), 0);
  EdgeList el = ReadOk(plain + ".xz");
  EXPECT_EQ(ArcsOf(el), (Arcs{{0, 1}, {2, 3}}));
  EXPECT_TRUE(el.undirected);
}

// ---------------------------------------------------------------------------
// The real graphs in DMG_GRAPHS_DIR (see its SOURCES.md and stats.jsonl).

TEST(RealGraphsTest, ArcCountsMatchStats) {
  const char* dir = std::getenv("DMG_GRAPHS_DIR");
  if (dir == nullptr || *dir == '\0') {
    GTEST_SKIP() << "DMG_GRAPHS_DIR not set; skipping real-graph reader test";
  }
  struct Expected {
    const char* file;
    uint64_t arcs;
    uint64_t vertices;
    bool weighted;
    bool undirected;
  };
  // From stats.jsonl: raw_arcs, raw_max_id + 1 (raw files) or canonical_arcs,
  // vertices (canonical files).
  const Expected kExpected[] = {
      {"raw/Wiki-Vote.txt", 103689, 8298, false, false},
      {"raw/ca-GrQc.txt", 28980, 26197, false, false},
      {"raw/email-Enron.txt", 367662, 36692, false, false},
      {"raw/p2p-Gnutella31.txt", 147892, 62586, false, false},
      {"raw/rome99.gr", 8870, 3353, true, false},
      {"raw/NY-pace.gr.xz", 365050, 264346, false, true},
      {"ca-GrQc.el", 28968, 5242, false, false},
      {"ca-GrQc.wel", 28968, 5242, true, false},
      {"email-Enron.el", 367662, 36692, false, false},
      {"email-Enron.wel", 367662, 36692, true, false},
      {"wiki-Vote.el", 103689, 7115, false, false},
      {"wiki-Vote.wel", 103689, 7115, true, false},
      {"p2p-Gnutella31.el", 147892, 62586, false, false},
      {"p2p-Gnutella31.wel", 147892, 62586, true, false},
      {"rome99.wel", 8859, 3353, true, false},
      {"road-NY.el", 730100, 264346, false, false},
      {"road-NY.wel", 730100, 264346, true, false},
  };
  for (const Expected& e : kExpected) {
    const std::string path = absl::StrCat(dir, "/", e.file);
    SCOPED_TRACE(path);
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<EdgeList> el = ReadGraphFile(path);
    const double ms = std::chrono::duration<double, std::milli>(
                          std::chrono::steady_clock::now() - start)
                          .count();
    ASSERT_TRUE(el.ok()) << el.status();
    EXPECT_EQ(el->num_arcs(), e.arcs);
    EXPECT_EQ(el->num_vertices, e.vertices);
    EXPECT_EQ(el->weighted(), e.weighted);
    EXPECT_EQ(el->undirected, e.undirected);
    if (e.weighted) {
      EXPECT_EQ(el->weights.size(), el->num_arcs());
    }
    std::cout << "  " << e.file << ": " << el->num_arcs() << " arcs, "
              << el->num_vertices << " vertices, " << ms << " ms\n";
  }
  // The Enron size line "36692 367662" is not an edge: the first arc is 0->1.
  absl::StatusOr<EdgeList> enron =
      ReadGraphFile(absl::StrCat(dir, "/raw/email-Enron.txt"));
  ASSERT_TRUE(enron.ok()) << enron.status();
  EXPECT_EQ(enron->src[0], 0u);
  EXPECT_EQ(enron->dst[0], 1u);
  // rome99: real road lengths, 1..12711 metres (stats.jsonl min_w, max_w).
  absl::StatusOr<EdgeList> rome =
      ReadGraphFile(absl::StrCat(dir, "/rome99.wel"));
  ASSERT_TRUE(rome.ok()) << rome.status();
  EXPECT_EQ(*std::min_element(rome->weights.begin(), rome->weights.end()), 1);
  EXPECT_EQ(*std::max_element(rome->weights.begin(), rome->weights.end()),
            12711);
}

}  // namespace
}  // namespace dmg::store

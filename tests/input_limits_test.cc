// Inputs that used to crash, hang or clobber (issue 13, "Inputs"): each now
// gets one line naming the file (and line), exit code 2, and nothing left
// behind.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "common/memory_limits.h"
#include "gtest/gtest.h"
#include "store/graph_source.h"
#include "store/image_file.h"
#include "store/input_file.h"
#include "store/reader.h"
#include "tests/test_util.h"

namespace dmg {
namespace {

using testing::ErrorLines;
using testing::RunDmg;
using testing::TempDir;

// Runs dmg with `args`, expects exit 2 and exactly one error line holding
// every one of `wanted`.
void ExpectOneLineError(const std::string& args,
                        const std::vector<std::string>& wanted) {
  testing::CommandResult r = RunDmg(args);
  EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.err;
  std::vector<std::string> lines = ErrorLines(r.err);
  ASSERT_EQ(lines.size(), 1u) << args << "\n" << r.err;
  for (const std::string& w : wanted) {
    EXPECT_NE(lines[0].find(w), std::string::npos)
        << args << "\nwanted '" << w << "' in: " << lines[0];
  }
}

// --- 1, 2: vertex counts bounded before allocating --------------------------

TEST(MaxVerticesTest, HugeInferredCountIsRefusedAtItsLine) {
  TempDir dir;
  std::string el = dir.Write("m.el", "0 1\n0 4294967294\n");
  ExpectOneLineError("info --graph=" + el,
                     {el + ":2:", "--max_vertices=2147483648"});
  std::string image = dir.file("m.img");
  ExpectOneLineError("load --graph=" + el + " --image=" + image,
                     {el + ":2:", "--max_vertices"});
  EXPECT_FALSE(std::filesystem::exists(image));
}

// --relabel compacts ids: large sparse ids are fine, the bound is on the
// count after relabelling.
TEST(MaxVerticesTest, RelabelBoundsTheCompactedCount) {
  TempDir dir;
  std::string el = dir.Write("sparse.el", "0 4294967294\n7 4000000000\n");
  testing::CommandResult r = RunDmg("info --relabel --graph=" + el);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("4"), std::string::npos) << r.out;
  ExpectOneLineError("info --relabel --max_vertices=3 --graph=" + el,
                     {el, "4 vertices after relabelling", "--max_vertices=3"});
}

TEST(MaxVerticesTest, HugeDeclaredCountsAreRefusedAtTheirLine) {
  TempDir dir;
  std::string sp = dir.Write("m.gr", "c x\np sp 4294967295 0\n");
  ExpectOneLineError("info --graph=" + sp, {sp + ":2:", "--max_vertices"});
  std::string tw = dir.Write("t.gr", "p tw 4294967295 0\n");
  ExpectOneLineError("info --graph=" + tw, {tw + ":1:", "--max_vertices"});
  std::string mtx =
      dir.Write("m.mtx",
                "%%MatrixMarket matrix coordinate pattern general\n4294967295 "
                "4294967295 0\n");
  ExpectOneLineError("info --graph=" + mtx, {mtx + ":2:", "--max_vertices"});
}

TEST(MaxVerticesTest, FlagLowersAndRaisesTheBound) {
  TempDir dir;
  std::string el = dir.Write("g.el", "0 1\n1 2\n2 99\n");
  EXPECT_EQ(RunDmg("info --graph=" + el).exit_code, 0);
  ExpectOneLineError("info --max_vertices=50 --graph=" + el,
                     {el + ":3:", "100 vertices", "--max_vertices=50"});
  EXPECT_EQ(RunDmg("info --max_vertices=100 --graph=" + el).exit_code, 0);
  std::string gr = dir.Write("g.gr", "p sp 1000 1\na 1 2 3\n");
  ExpectOneLineError("info --max_vertices=999 --graph=" + gr,
                     {gr + ":1:", "1000 vertices"});
  ExpectOneLineError("info --max_vertices=0 --graph=" + gr, {"--max_vertices"});
  ExpectOneLineError("info --max_vertices=4294967296 --graph=" + gr,
                     {"--max_vertices"});
  ExpectOneLineError("info --max_vertices=1000 --graph=kron:10",
                     {"kron:10", "--max_vertices=1000"});
}

// A 37-byte file may declare 10^8 vertices: under the bound it is read (an
// image of isolated vertices), above the memory it is refused, never a crash.
TEST(MaxVerticesTest, SmallFileLargeDeclaredCountFollowsTheMemoryBound) {
  TempDir dir;
  std::string gr = dir.Write("big.gr", "p sp 100000000 1\na 1 2 7\n");
  store::ReadOptions tight;
  tight.memory_bytes = 1 << 30;  // 1 GiB: 10^8 vertices need ~4.5 GiB
  absl::StatusOr<store::EdgeList> r = store::ReadGraphFile(gr, tight);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(gr + ":1:"), std::string::npos)
      << r.status();
  EXPECT_NE(r.status().message().find("memory"), std::string::npos)
      << r.status();
  store::ReadOptions roomy;
  roomy.memory_bytes = uint64_t{64} << 30;
  absl::StatusOr<store::EdgeList> ok = store::ReadGraphFile(gr, roomy);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->num_vertices, 100000000u);
  // The same bound for inferred counts, at the line that needs them.
  std::string el = dir.Write("big.el", "0 1\n1 99999999\n");
  r = store::ReadGraphFile(el, tight);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(el + ":2:"), std::string::npos)
      << r.status();
}

TEST(MaxVerticesTest, AvailableMemoryIsRead) {
  if (!std::filesystem::exists("/proc/meminfo")) GTEST_SKIP();
  EXPECT_GT(MemAvailableBytes(), 0u);
}

// --- 3: only regular files ---------------------------------------------------

TEST(RegularFileTest, DevicesFifosAndDirectoriesAreRefused) {
  TempDir dir;
  ExpectOneLineError("info --graph=/dev/zero",
                     {"/dev/zero", "character device"});
  std::string fifo = dir.file("g.el");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // Without the check this would block forever on open().
  ExpectOneLineError("info --graph=" + fifo, {fifo, "FIFO"});
  ExpectOneLineError("info --graph=" + dir.path(), {dir.path(), "directory"});
  EXPECT_FALSE(store::CheckRegularFile(fifo).ok());
  EXPECT_EQ(store::CheckRegularFile(dir.file("none")).code(),
            absl::StatusCode::kNotFound);
}

// --- 4: negative weights named at their line --------------------------------

TEST(NegativeWeightTest, SsspNamesTheFileAndLine) {
  TempDir dir;
  std::string wel = dir.Write("neg.wel", "0 1 4\n1 2 5\n2 0 -3\n");
  ExpectOneLineError("run --algo=sssp --source=0 --graph=" + wel,
                     {wel + ":3:", "negative weight -3", "--unit_weights"});
  std::string gr = dir.Write("neg.gr", "p sp 3 2\na 1 2 4\na 2 3 -1\n");
  ExpectOneLineError("run --algo=sssp --source=0 --graph=" + gr,
                     {gr + ":3:", "negative weight -1"});
  std::string mtx = dir.Write(
      "neg.mtx",
      "%%MatrixMarket matrix coordinate integer general\n3 3 2\n1 2 4\n2 3 "
      "-2\n");
  ExpectOneLineError("run --algo=sssp --source=0 --graph=" + mtx,
                     {mtx + ":4:", "negative weight -2"});
  // An image carries no lines: it is named with the weight.
  std::string image = dir.file("neg.img");
  ASSERT_EQ(RunDmg("load --graph=" + wel + " --image=" + image).exit_code, 0);
  ExpectOneLineError("run --algo=sssp --source=0 --graph=" + image,
                     {image, "weight -3"});
  // Other algorithms and --unit_weights still run.
  EXPECT_EQ(RunDmg("run --algo=bfs --source=0 --graph=" + wel).exit_code, 0);
  EXPECT_EQ(RunDmg("run --algo=sssp --unit_weights --source=0 --graph=" + wel)
                .exit_code,
            0);
}

// --- 5: vertices but no arcs -------------------------------------------------

TEST(NoArcsTest, VerticesWithoutArcsLayOutAndReadBack) {
  TempDir dir;
  // Four vertices, the only arc a self-loop, dropped by cleaning.
  std::string gr = dir.Write("lonely.gr", "p sp 4 1\na 2 2 5\n");
  testing::CommandResult info = RunDmg("info --graph=" + gr);
  EXPECT_EQ(info.exit_code, 0) << info.err;
  EXPECT_NE(info.out.find("4"), std::string::npos) << info.out;
  std::string image = dir.file("lonely.img");
  testing::CommandResult load =
      RunDmg("load --graph=" + gr + " --image=" + image);
  ASSERT_EQ(load.exit_code, 0) << load.err;
  absl::StatusOr<store::StoreImage> back = store::ReadImageFile(image);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->num_vertices(), 4u);
  EXPECT_EQ(back->num_arcs(), 0u);
  store::Graph g = store::GraphFromImage(*back);
  EXPECT_EQ(g.num_arcs(), 0u);
  EXPECT_EQ(g.out.offsets.size(), 5u);
  for (std::string opt : {"", " --compress"}) {
    testing::CommandResult run =
        RunDmg("run --algo=bfs --source=0 --graph=" + gr + opt);
    EXPECT_EQ(run.exit_code, 0) << opt << "\n" << run.err;
  }
}

// --- 6: a damaged image is reported as one -----------------------------------

TEST(DamagedImageTest, FlippedMagicIsBadMagicNotText) {
  TempDir dir;
  std::string src = dir.Write("g.el", "0 1\n1 2\n2 0\n");
  for (std::string name : {"g.img", "g.store"}) {
    std::string image = dir.file(name);
    ASSERT_EQ(RunDmg("load --graph=" + src + " --image=" + image).exit_code, 0);
    std::string bytes = testing::Slurp(image);
    bytes[2] ^= 0x20;  // 'G' -> 'g'
    std::ofstream(image, std::ios::binary | std::ios::trunc) << bytes;
    ExpectOneLineError("info --graph=" + image, {image, "bad magic"});
  }
  // A text file named .img is not a text graph either.
  std::string text_img = dir.Write("t.img", "0 1\n");
  ExpectOneLineError("info --graph=" + text_img, {text_img, "image"});
  // Binary data under a text name: named, not parsed.
  std::string bin = dir.Write("b.el", std::string("0 1\n1 2\0\0\x7f", 9));
  ExpectOneLineError("info --graph=" + bin, {bin + ":2:", "binary data"});
}

// --- 7: outputs replace regular files only; temporary files cleaned up -------

TEST(OutputTest, ExistingNonRegularOutputsAreRefused) {
  TempDir dir;
  std::string src = dir.Write("g.el", "0 1\n1 2\n2 0\n");
  std::string target = dir.Write("real.txt", "keep\n");
  std::string link = dir.file("link.txt");
  std::filesystem::create_symlink(target, link);
  std::string fifo = dir.file("out.fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string run = "run --algo=bfs --source=0 --graph=" + src;
  ExpectOneLineError(run + " --output=" + link, {link, "symlink"});
  ExpectOneLineError(run + " --output=" + fifo, {fifo, "FIFO"});
  ExpectOneLineError(run + " --stats_json=" + dir.path(),
                     {dir.path(), "directory"});
  ExpectOneLineError(run + " --summary_json=/dev/full", {"/dev/full"});
  ExpectOneLineError("load --graph=" + src + " --image=" + link,
                     {link, "symlink"});
  // Refused before the run: no report, nothing computed.
  testing::CommandResult early = RunDmg(run + " --output=/dev/full");
  EXPECT_EQ(early.exit_code, 2);
  EXPECT_TRUE(early.out.empty()) << early.out;
  EXPECT_TRUE(std::filesystem::is_symlink(link));
  EXPECT_EQ(testing::Slurp(target), "keep\n");
  struct stat st;
  ASSERT_EQ(::stat("/dev/full", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  // A regular file is replaced; "-" is stdout.
  std::string out = dir.file("depths.txt");
  EXPECT_EQ(RunDmg(run + " --output=" + out).exit_code, 0);
  EXPECT_EQ(testing::Slurp(out).substr(0, 4), "0 0\n");
  testing::CommandResult to_stdout = RunDmg(run + " --output=-");
  EXPECT_EQ(to_stdout.exit_code, 0) << to_stdout.err;
  EXPECT_EQ(to_stdout.out.substr(0, 4), "0 0\n");
}

TEST(OutputTest, StaleTemporaryFilesOfDeadProcessesAreRemoved) {
  TempDir dir;
  std::string src = dir.Write("g.el", "0 1\n1 2\n2 0\n");
  std::string image = dir.file("g.img");
  // A pid that is not running: a child that has exited and been reaped.
  pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ASSERT_GT(dead, 0);
  ::waitpid(dead, nullptr, 0);
  std::string stale = image + ".tmp." + std::to_string(dead);
  std::string alive = image + ".tmp." + std::to_string(::getpid());
  std::string other = image + ".tmp.notapid";
  for (const std::string& f : {stale, alive, other})
    dir.Write(f.substr(dir.path().size() + 1), "x");
  ASSERT_EQ(RunDmg("load --graph=" + src + " --image=" + image).exit_code, 0);
  EXPECT_FALSE(std::filesystem::exists(stale));
  EXPECT_TRUE(std::filesystem::exists(alive));  // this test is running
  EXPECT_TRUE(std::filesystem::exists(other));
  EXPECT_TRUE(store::IsStoreImageFile(image));
}

TEST(OutputTest, SigtermRemovesTheTemporaryFile) {
  for (int sig : {SIGTERM, SIGINT}) {
    TempDir dir;
    std::string src = dir.Write("g.el", "0 1\n1 2\n2 0\n");
    std::string image = dir.file("g.img");
    std::string err = dir.file("err");
    pid_t pid = ::fork();
    if (pid == 0) {
      ::setenv("DMG_TEST_PAUSE_BEFORE_RENAME", "1", 1);
      std::freopen(err.c_str(), "w", stderr);
      std::string graph = "--graph=" + src, out = "--image=" + image;
      ::execl(DMG_BINARY, DMG_BINARY, "load", graph.c_str(), out.c_str(),
              static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ASSERT_GT(pid, 0);
    const std::string tmp = image + ".tmp." + std::to_string(pid);
    bool paused = false;
    for (int i = 0; i < 300 && !paused; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      paused = testing::Slurp(err).find("paused") != std::string::npos;
    }
    ASSERT_TRUE(paused) << testing::Slurp(err);
    EXPECT_TRUE(std::filesystem::exists(tmp));
    ::kill(pid, sig);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == sig) << status;
    EXPECT_FALSE(std::filesystem::exists(tmp)) << "signal " << sig;
    EXPECT_FALSE(std::filesystem::exists(image));
  }
}

}  // namespace
}  // namespace dmg

// Helpers shared by the tests: temp folders, files, running the dmg binary,
// and an independent plain-CSR reference built without the store's code.
#ifndef DMG_TESTS_TEST_UTIL_H_
#define DMG_TESTS_TEST_UTIL_H_

#include <sys/resource.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "store/build_graph.h"
#include "store/graph.h"
#include "store/layout.h"
#include "store/store_image.h"

namespace dmg::testing {

// A fresh folder under the test temp dir, removed at destruction.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = ::testing::TempDir() + "/dmg_test_XXXXXX";
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  std::string Write(const std::string& name, const std::string& content) const {
    std::ofstream(file(name), std::ios::binary) << content;
    return file(name);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The whole content of a file ("" if unreadable).
// Tests that hold both ends of thousands of connections: the descriptor
// limit raised as far as allowed (up to 8192), and what it is now.
inline rlim_t RaiseDescriptorLimit() {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return 0;
  rl.rlim_cur = std::min<rlim_t>(rl.rlim_max, 8192);
  setrlimit(RLIMIT_NOFILE, &rl);
  return rl.rlim_cur;
}

inline std::string Slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

struct CommandResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs a shell command, capturing stdout and stderr separately.
inline CommandResult RunCommand(const std::string& command) {
  TempDir dir;
  std::string cmd = command + " >" + dir.file("out") + " 2>" + dir.file("err");
  int status = std::system(cmd.c_str());
  CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = Slurp(dir.file("out"));
  r.err = Slurp(dir.file("err"));
  return r;
}

inline CommandResult RunDmg(const std::string& args) {
  return RunCommand(std::string(DMG_BINARY) + " " + args);
}

// Non-empty lines of `text` that are not glog lines (glog prefixes W/I/E+date).
inline std::vector<std::string> ErrorLines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    if (!line.empty()) lines.push_back(line);
    start = end + 1;
  }
  return lines;
}

// Reference adjacency built the obvious way: (target, weight) pairs per
// vertex, sorted, self-loops dropped, parallel arcs collapsed to the lightest.
using RefAdjacency = std::vector<std::vector<std::pair<uint32_t, int32_t>>>;

inline RefAdjacency ReferenceAdjacency(const store::EdgeList& edges,
                                       bool symmetrize, bool transpose) {
  RefAdjacency adj(edges.num_vertices);
  auto add = [&](uint32_t u, uint32_t v, int32_t w) {
    if (u == v) return;
    if (transpose) std::swap(u, v);
    adj[u].push_back({v, w});
  };
  for (size_t i = 0; i < edges.num_arcs(); ++i) {
    int32_t w = edges.weighted() ? edges.weights[i] : 0;
    add(edges.src[i], edges.dst[i], w);
    if (symmetrize) add(edges.dst[i], edges.src[i], w);
  }
  for (auto& list : adj) {
    std::sort(list.begin(), list.end());
    // After sorting, the first of equal targets has the smallest weight.
    list.erase(std::unique(list.begin(), list.end(),
                           [](auto& a, auto& b) { return a.first == b.first; }),
               list.end());
  }
  return adj;
}

// An image of `edges` cleaned and laid out as asked, which must also pass
// full validation (as a memory node would load it).
inline store::StoreImage BuildValidatedImage(
    const store::EdgeList& edges, const store::CleanOptions& clean,
    const store::LayoutOptions& layout) {
  absl::StatusOr<store::Graph> g = store::BuildGraph(edges, clean);
  EXPECT_TRUE(g.ok()) << g.status();
  absl::StatusOr<store::StoreImage> image = store::BuildStoreImage(*g, layout);
  EXPECT_TRUE(image.ok()) << image.status();
  AlignedBuffer copy(image->bytes().size());
  std::copy(image->bytes().begin(), image->bytes().end(), copy.data());
  absl::StatusOr<store::StoreImage> checked =
      store::StoreImage::FromBuffer(std::move(copy), "test");
  EXPECT_TRUE(checked.ok()) << checked.status();
  return *std::move(image);
}

}  // namespace dmg::testing

#endif  // DMG_TESTS_TEST_UTIL_H_

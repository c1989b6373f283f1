// The engine's GPU share (issue 40; Engine::GatherSum) with the host fake
// of the share kernels (fake_share_kernels.h) injected through
// EngineOptions::gpu_share, so that it runs where no GPU is: PageRank with
// a share equals the CPU-only run within rounding, for fixed shares and
// with stage 1's calibration; the share's upload READs its blocks through
// the transport and is counted; a factory that fails leaves the CPU
// threads to run it all, with the reason.
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "algorithms/algorithms.h"
#include "compute_node/vertex_program.h"
#include "gtest/gtest.h"
#include "store/build_graph.h"
#include "store/generator.h"
#include "store/layout.h"
#include "tests/fake_share_kernels.h"
#include "tools/embedded_cluster.h"
#include "transport/tcp_server.h"
#include "transport/tcp_transport.h"

namespace dmg {
namespace {

using algorithms::Precision;
using cli::EmbeddedCluster;

store::Graph Kron(int scale) {
  store::EdgeList e =
      store::Generate({store::GeneratorParams::Kind::kKron, scale, 8, 42});
  absl::StatusOr<store::Graph> g = store::BuildGraph(std::move(e), {});
  EXPECT_TRUE(g.ok()) << g.status();
  return *std::move(g);
}

// What a share factory does: the fake kernels, or an error.
struct Factory {
  double seconds_per_edge = 0;  // the fake's timings (calibration)
  absl::Status error;           // not OK: Open fails with it
  int opened = 0;
};

store::StoreImage Image(const store::Graph& g, bool compress = false) {
  store::LayoutOptions layout;
  layout.block_size = 4096;
  layout.compress = compress;
  absl::StatusOr<store::StoreImage> image = store::BuildStoreImage(g, layout);
  EXPECT_TRUE(image.ok()) << image.status();
  return *std::move(image);
}

compute::EngineOptions Options(Factory* factory, double fraction) {
  compute::EngineOptions eo;
  eo.threads = 2;
  eo.batch_bytes = 64 * 1024;
  if (factory != nullptr) {
    eo.gpu_share_fraction = fraction;
    eo.gpu_share = [factory](uint64_t n, uint64_t begin, uint64_t end)
        -> absl::StatusOr<std::unique_ptr<gpu::ShareKernels>> {
      if (!factory->error.ok()) return factory->error;
      ++factory->opened;
      auto k = std::make_unique<gpu::fake::HostShare>(
          n, begin, end, gpu::KernelOptions{}, begin * 31 + end);
      k->set_seconds_per_edge(factory->seconds_per_edge);
      return k;
    };
  }
  return eo;
}

std::unique_ptr<EmbeddedCluster> Start(const store::Graph& g, Factory* factory,
                                       double fraction) {
  auto c = EmbeddedCluster::Start(Image(g), Options(factory, fraction));
  EXPECT_TRUE(c.ok()) << c.status();
  return *std::move(c);
}

struct RunResult {
  std::vector<double> scores;
  compute::RunStats stats;
  memory_node::ServedStats served;
};

// PageRank on an embedded cluster of `image` with options `eo`.
RunResult RunPageRank(store::StoreImage image, const compute::EngineOptions& eo,
                      Precision precision, int iterations = 6) {
  RunResult r;
  auto c = EmbeddedCluster::Start(std::move(image), eo);
  EXPECT_TRUE(c.ok()) << c.status();
  if (!c.ok()) return r;
  auto pr = algorithms::PageRank((*c)->engine(), iterations, 0, precision);
  EXPECT_TRUE(pr.ok()) << pr.status();
  (*c)->engine().Finish();
  if (pr.ok()) r.scores = pr->scores;
  r.stats = (*c)->engine().stats();
  r.served = (*c)->memory_node().served();
  return r;
}

RunResult PageRankOn(const store::Graph& g, Factory* factory, double fraction,
                     Precision precision, int iterations = 6) {
  return RunPageRank(Image(g), Options(factory, fraction), precision,
                     iterations);
}

double RelativeL1(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return HUGE_VAL;  // a run that failed
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff += std::fabs(a[i] - b[i]);
    norm += std::fabs(a[i]);
  }
  return norm > 0 ? diff / norm : diff;
}

double Tolerance(Precision p) { return p == Precision::kFloat ? 1e-6 : 1e-12; }

class GpuShareTest : public ::testing::TestWithParam<Precision> {
 protected:
  static void SetUpTestSuite() { graph_ = new store::Graph(Kron(15)); }
  static void TearDownTestSuite() {
    delete graph_;
    graph_ = nullptr;
  }
  static store::Graph* graph_;
};
store::Graph* GpuShareTest::graph_ = nullptr;

TEST_P(GpuShareTest, FixedSharesEqualTheCpuRun) {
  const Precision p = GetParam();
  const RunResult cpu = PageRankOn(*graph_, nullptr, -1, p);
  EXPECT_FALSE(cpu.stats.gpu.used);
  for (double fraction : {0.1, 0.5, 0.9}) {
    SCOPED_TRACE(fraction);
    Factory factory;
    const RunResult gpu = PageRankOn(*graph_, &factory, fraction, p);
    ASSERT_EQ(gpu.scores.size(), cpu.scores.size());
    EXPECT_LE(RelativeL1(cpu.scores, gpu.scores), Tolerance(p));
    const compute::GpuStats& g = gpu.stats.gpu;
    EXPECT_TRUE(g.used) << g.note;
    EXPECT_EQ(factory.opened, 1);  // no calibration: one share, one upload
    EXPECT_EQ(g.pulls, 6u);
    EXPECT_GT(g.cut, g.begin);
    EXPECT_LE(g.cut, g.end);
    EXPECT_EQ(g.cut % 4096, 0u);
    // Every byte READ was served, the upload's included.
    EXPECT_EQ(gpu.stats.total.bytes_read, gpu.served.bytes_read);
    EXPECT_GE(g.upload_bytes_read, 4 * g.upload_edges);
    EXPECT_GT(g.upload_edges, 0u);
  }
}

TEST_P(GpuShareTest, CalibrationCutsTheRangeAndRecordsItsInputs) {
  const Precision p = GetParam();
  const RunResult cpu = PageRankOn(*graph_, nullptr, -1, p);
  // A GPU far faster than the CPU threads: the most the GPU may take.
  Factory fast;
  fast.seconds_per_edge = 1e-15;
  const RunResult gpu = PageRankOn(*graph_, &fast, -1, p);
  EXPECT_LE(RelativeL1(cpu.scores, gpu.scores), Tolerance(p));
  const compute::GpuStats& g = gpu.stats.gpu;
  EXPECT_EQ(g.note, "calibrated");
  EXPECT_TRUE(g.used);
  EXPECT_EQ(fast.opened, 2);  // the sample, then the share
  EXPECT_GT(g.cpu_units, 0);
  EXPECT_GT(g.cpu_seconds, 0);
  EXPECT_GT(g.gpu_units, 0);
  EXPECT_LT(g.gpu_units, g.cpu_units);
  EXPECT_GT(g.gpu_seconds, 0);
  EXPECT_GT(g.share, 0.5);
  EXPECT_LE(g.share, 0.98);
  EXPECT_GT(g.cut, g.begin + (g.end - g.begin) / 2);
  EXPECT_LT(g.cut, g.end);  // the CPU threads keep a part
  EXPECT_EQ(g.pulls, 5u);   // the first superstep calibrates on the CPU
  EXPECT_EQ(gpu.stats.total.bytes_read, gpu.served.bytes_read);
  // ToJson says it.
  const std::string json = compute::ToJson(gpu.stats);
  EXPECT_NE(json.find("\"gpu\": {\"used\": true, \"note\": \"calibrated\""),
            std::string::npos);
}

TEST_P(GpuShareTest, ASlowGpuGetsNothing) {
  const Precision p = GetParam();
  const RunResult cpu = PageRankOn(*graph_, nullptr, -1, p);
  Factory slow;
  slow.seconds_per_edge = 1;  // hours a pull
  const RunResult gpu = PageRankOn(*graph_, &slow, -1, p);
  EXPECT_LE(RelativeL1(cpu.scores, gpu.scores), Tolerance(p));
  const compute::GpuStats& g = gpu.stats.gpu;
  EXPECT_FALSE(g.used);
  EXPECT_EQ(g.pulls, 0u);
  EXPECT_EQ(g.share, 0);
  EXPECT_NE(g.note.find("calibrated: "), std::string::npos) << g.note;
  EXPECT_EQ(slow.opened, 1);  // the sample only
}

TEST_P(GpuShareTest, AFailingFactoryFallsBackToTheCpu) {
  const Precision p = GetParam();
  const RunResult cpu = PageRankOn(*graph_, nullptr, -1, p);
  for (double fraction : {-1.0, 0.5}) {
    Factory broken;
    broken.error = absl::FailedPreconditionError("no usable GPU here");
    const RunResult gpu = PageRankOn(*graph_, &broken, fraction, p);
    EXPECT_LE(RelativeL1(cpu.scores, gpu.scores), Tolerance(p));
    EXPECT_FALSE(gpu.stats.gpu.used);
    EXPECT_NE(gpu.stats.gpu.note.find("no usable GPU here"), std::string::npos)
        << gpu.stats.gpu.note;
  }
}

// Under a cache bound the blocks stream: the share's upload and the CPU
// threads' part READ theirs again each time; under the tighter one the
// state arrays are paged too (the GPU's input is gathered through the
// accessor, not the local copy).
TEST_P(GpuShareTest, UnderACacheBoundTheShareEqualsTheCpuRun) {
  const Precision p = GetParam();
  const RunResult cpu = PageRankOn(*graph_, nullptr, -1, p);
  for (uint64_t bound : {uint64_t{1} << 20, uint64_t{256} << 10}) {
    SCOPED_TRACE(bound);
    Factory factory;
    compute::EngineOptions eo = Options(&factory, 0.5);
    eo.cache_bytes = bound;
    const RunResult gpu = RunPageRank(Image(*graph_), eo, p);
    EXPECT_LE(RelativeL1(cpu.scores, gpu.scores), Tolerance(p));
    EXPECT_TRUE(gpu.stats.gpu.used) << gpu.stats.gpu.note;
    EXPECT_EQ(gpu.stats.total.bytes_read, gpu.served.bytes_read);
  }
}

// Compressed blocks: the upload places the decoded pieces; one worker.
TEST_P(GpuShareTest, CompressedBlocksOneThread) {
  const Precision p = GetParam();
  const RunResult cpu = PageRankOn(*graph_, nullptr, -1, p);
  Factory factory;
  compute::EngineOptions eo = Options(&factory, 0.5);
  eo.threads = 1;
  const RunResult gpu = RunPageRank(Image(*graph_, /*compress=*/true), eo, p);
  EXPECT_LE(RelativeL1(cpu.scores, gpu.scores), Tolerance(p));
  EXPECT_TRUE(gpu.stats.gpu.used) << gpu.stats.gpu.note;
  EXPECT_GT(gpu.stats.gpu.upload_edges, 0u);
  EXPECT_EQ(gpu.stats.total.bytes_read, gpu.served.bytes_read);
}

// The same over tcp (a memory node behind a TcpServer on loopback): every
// byte the engine READs, the share's upload included, is served and
// counted.
TEST_P(GpuShareTest, OverTcpTheShareEqualsTheCpuRun) {
  const Precision p = GetParam();
  const RunResult cpu = PageRankOn(*graph_, nullptr, -1, p);
  for (double fraction : {0.5, -1.0}) {
    SCOPED_TRACE(fraction);
    memory_node::MemoryNode node(0);
    ASSERT_TRUE(node.LoadStore(Image(*graph_)).ok());
    auto server = transport::TcpServer::Start(&node, "127.0.0.1", 0, {});
    ASSERT_TRUE(server.ok()) << server.status();
    auto hosts = transport::ParseHostPorts("127.0.0.1:" +
                                           std::to_string((*server)->port()));
    ASSERT_TRUE(hosts.ok()) << hosts.status();
    transport::TcpOptions options;
    options.timeout_ms = 5000;
    auto tcp = transport::TcpTransport::Connect(*hosts, options);
    ASSERT_TRUE(tcp.ok()) << tcp.status();
    Factory factory;
    factory.seconds_per_edge = 1e-15;  // calibration: a fast GPU
    auto engine = compute::Engine::Create(**tcp, Options(&factory, fraction));
    ASSERT_TRUE(engine.ok()) << engine.status();
    auto pr = algorithms::PageRank(**engine, 6, 0, p);
    ASSERT_TRUE(pr.ok()) << pr.status();
    (*engine)->Finish();
    const compute::RunStats& s = (*engine)->stats();
    EXPECT_LE(RelativeL1(cpu.scores, pr->scores), Tolerance(p));
    EXPECT_TRUE(s.gpu.used) << s.gpu.note;
    EXPECT_GT(s.gpu.upload_bytes_read, 0u);
    EXPECT_EQ(s.total.bytes_read, node.served().bytes_read);
    engine->reset();
  }
}

// BFS's bottom-up steps with a share at a fixed fraction: the GPU's
// candidates take their first frontier in-neighbour, as the CPU's do, so
// the depths are the CPU run's exactly; bottom-up forced (--direction=pull)
// and chosen per level (kron:15 from vertex 1: the rule may push at every
// level). Without a fraction (calibration is PageRank's), BFS
// runs on the CPU threads.
TEST(GpuShareBfsTest, BottomUpStepsEqualTheCpuRun) {
  const store::Graph g = Kron(15);
  auto cpu_cluster = Start(g, nullptr, -1);
  auto cpu = algorithms::Bfs(cpu_cluster->engine(), 1);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  for (compute::Mode mode : {compute::Mode::kPull, compute::Mode::kAuto}) {
    for (double fraction : {0.1, 0.5, 0.9, -1.0}) {
      SCOPED_TRACE(absl::StrCat(static_cast<int>(mode), " ", fraction));
      Factory factory;
      compute::EngineOptions eo = Options(&factory, fraction);
      eo.direction = mode;
      auto c = EmbeddedCluster::Start(Image(g), eo);
      ASSERT_TRUE(c.ok()) << c.status();
      auto gpu = algorithms::Bfs((*c)->engine(), 1);
      ASSERT_TRUE(gpu.ok()) << gpu.status();
      EXPECT_EQ(*gpu, *cpu);
      (*c)->engine().Finish();
      const compute::GpuStats& s = (*c)->engine().stats().gpu;
      if (fraction < 0) {
        EXPECT_FALSE(s.used);
        EXPECT_EQ(s.bottom_up_steps, 0u);
      } else if (mode == compute::Mode::kPull) {  // auto may push throughout
        EXPECT_TRUE(s.used) << s.note;
        EXPECT_GT(s.bottom_up_steps, 0u);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Precisions, GpuShareTest,
                         ::testing::Values(Precision::kFloat,
                                           Precision::kDouble),
                         [](const auto& info) {
                           return info.param == Precision::kFloat
                                      ? std::string("Float")
                                      : std::string("Double");
                         });

}  // namespace
}  // namespace dmg

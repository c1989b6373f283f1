// gpu/analysis: the NUMA topology found in synthetic latency matrices whose
// truth is known (fixed seeds), the mixture fit and its BIC, the interleave
// granularity, and the probe report's JSON.
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "gpu/analysis/report.h"
#include "gpu/analysis/topology.h"
#include "gtest/gtest.h"

namespace dmg::gpu {
namespace {

struct Truth {
  std::vector<int> sm_node;
  std::vector<int> line_home;
};

struct Latencies {
  double near = 200;
  double far = 350;
  double sd = 5;       // per-cell Gaussian noise
  double offset = 0;   // per-SM constant offset, uniform in +-offset
  int slow_every = 0;  // every n-th SM is `slow` cycles slower (0: none)
  double slow = 0;
  // Far latency grows with the distance between node ids by this much
  // beyond the first step (0: one far latency).
  double far_step = 0;
};

LatencyMatrix Synthesize(const Truth& t, const Latencies& lat, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> noise(0, lat.sd);
  std::uniform_real_distribution<double> offset(-lat.offset, lat.offset);
  LatencyMatrix m;
  m.sms = static_cast<int>(t.sm_node.size());
  m.lines = static_cast<int>(t.line_home.size());
  for (int s = 0; s < m.sms; ++s) {
    double o = lat.offset > 0 ? offset(rng) : 0;
    if (lat.slow_every > 0 && s % lat.slow_every == 0) o += lat.slow;
    for (int l = 0; l < m.lines; ++l) {
      const int d = std::abs(t.sm_node[s] - t.line_home[l]);
      const double base = d == 0 ? lat.near : lat.far + (d - 1) * lat.far_step;
      m.cycles.push_back(base + o + noise(rng));
    }
  }
  return m;
}

std::vector<int> RandomLabels(int n, int labels, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> pick(0, labels - 1);
  std::vector<int> out(n);
  for (int& x : out) x = pick(rng);
  return out;
}

// Homes that take turns every `chunk` consecutive lines.
std::vector<int> ChunkHomes(int lines, int chunk, int nodes) {
  std::vector<int> out(lines);
  for (int l = 0; l < lines; ++l) out[l] = (l / chunk) % nodes;
  return out;
}

// Equal as partitions: a one-to-one renaming maps `got` onto `want`.
testing::AssertionResult SameUpToRenumbering(const std::vector<int>& got,
                                             const std::vector<int>& want) {
  if (got.size() != want.size()) {
    return testing::AssertionFailure()
           << got.size() << " labels, " << want.size() << " expected";
  }
  std::map<int, int> to, from;
  for (size_t i = 0; i < got.size(); ++i) {
    const auto [a, ina] = to.try_emplace(got[i], want[i]);
    const auto [b, inb] = from.try_emplace(want[i], got[i]);
    if (a->second != want[i] || b->second != got[i]) {
      return testing::AssertionFailure()
             << "index " << i << ": got " << got[i] << ", expected " << want[i]
             << " (inconsistent renaming)";
    }
  }
  return testing::AssertionSuccess();
}

// Nodes numbered by their smallest SM id, as topology.h promises.
void ExpectCanonicalNumbering(const Topology& t) {
  int next = 0;
  for (int n : t.sm_node) {
    ASSERT_LE(n, next) << "nodes not numbered by smallest SM id";
    if (n == next) ++next;
  }
  EXPECT_EQ(next, t.nodes);
}

void ExpectRecovers(const Topology& t, const Truth& truth,
                    const Latencies& lat) {
  const int nodes =
      *std::max_element(truth.sm_node.begin(), truth.sm_node.end()) + 1;
  EXPECT_EQ(t.nodes, nodes);
  EXPECT_TRUE(SameUpToRenumbering(t.sm_node, truth.sm_node));
  EXPECT_TRUE(SameUpToRenumbering(t.line_home, truth.line_home));
  // Offsets shift every row to a common baseline, so allow for their mean.
  const double slack = 0.03 * lat.near + lat.offset / 2;
  EXPECT_NEAR(t.near_cycles, lat.near, slack);
  EXPECT_NEAR(t.far_cycles, lat.far, 0.03 * lat.far + lat.offset / 2);
  EXPECT_GT(t.threshold, t.near_cycles);
  EXPECT_LT(t.threshold, t.far_cycles);
  EXPECT_GT(t.agreement, 0.95);
  ExpectCanonicalNumbering(t);
}

std::vector<double> TwoGaussians(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::bernoulli_distribution first(0.3);
  std::normal_distribution<double> a(200, 10), b(350, 20);
  std::vector<double> xs(n);
  for (double& x : xs) x = first(rng) ? a(rng) : b(rng);
  return xs;
}

TEST(FitMixture, RecoversTwoComponents) {
  const std::vector<double> xs = TwoGaussians(4000, 7);
  const Mixture m = FitMixture(xs, 2);
  ASSERT_EQ(m.components.size(), 2u);
  EXPECT_NEAR(m.components[0].weight, 0.3, 0.03);
  EXPECT_NEAR(m.components[0].mean, 200, 2);
  EXPECT_NEAR(m.components[0].sd, 10, 1.5);
  EXPECT_NEAR(m.components[1].weight, 0.7, 0.03);
  EXPECT_NEAR(m.components[1].mean, 350, 2);
  EXPECT_NEAR(m.components[1].sd, 20, 2);
  EXPECT_NEAR(m.components[0].weight + m.components[1].weight, 1, 1e-9);
  EXPECT_NEAR(m.bic, -2 * m.log_likelihood + 5 * std::log(4000.0), 1e-6);
}

TEST(FitMixture, SameSeedSameFit) {
  const std::vector<double> xs = TwoGaussians(1000, 3);
  const Mixture a = FitMixture(xs, 3, 42), b = FitMixture(xs, 3, 42);
  ASSERT_EQ(a.components.size(), b.components.size());
  for (size_t i = 0; i < a.components.size(); ++i) {
    EXPECT_EQ(a.components[i].mean, b.components[i].mean);
  }
  EXPECT_EQ(a.log_likelihood, b.log_likelihood);
}

TEST(FitMixture, EmptyOrTinyInput) {
  EXPECT_TRUE(FitMixture({}, 2).components.empty());
  const std::vector<double> one = {5};
  const Mixture m = FitMixture(one, 3);
  ASSERT_EQ(m.components.size(), 1u);
  EXPECT_EQ(m.components[0].mean, 5);
  const std::vector<double> same(100, 7.0);
  EXPECT_EQ(FitMixtureByBic(same).components.size(), 1u);
}

TEST(FitMixtureByBic, PicksTwoForTwoComponents) {
  const std::vector<double> xs = TwoGaussians(4000, 11);
  const double bic1 = FitMixture(xs, 1).bic;
  const double bic2 = FitMixture(xs, 2).bic;
  const double bic3 = FitMixture(xs, 3).bic;
  EXPECT_LT(bic2, bic1);
  EXPECT_LT(bic2, bic3);
  EXPECT_EQ(FitMixtureByBic(xs).components.size(), 2u);
}

TEST(FitMixtureByBic, PicksOneForOneGaussian) {
  std::mt19937_64 rng(5);
  std::normal_distribution<double> g(290, 15);
  std::vector<double> xs(4000);
  for (double& x : xs) x = g(rng);
  const Mixture m = FitMixtureByBic(xs);
  ASSERT_EQ(m.components.size(), 1u);
  EXPECT_NEAR(m.components[0].mean, 290, 1.5);
  EXPECT_NEAR(m.components[0].sd, 15, 1);
}

TEST(AnalyzeLatencies, TwoNodes) {
  Truth truth;
  for (int s = 0; s < 16; ++s) truth.sm_node.push_back(s < 8 ? 0 : 1);
  truth.line_home = RandomLabels(512, 2, 1);
  const Latencies lat;
  absl::StatusOr<Topology> t = AnalyzeLatencies(Synthesize(truth, lat, 1));
  ASSERT_TRUE(t.ok()) << t.status();
  ExpectRecovers(*t, truth, lat);
  EXPECT_EQ(t->sm_node[0], 0);  // numbered by smallest SM id
  EXPECT_EQ(t->sm_node[8], 1);
  EXPECT_GT(t->agreement, 0.999);
}

TEST(AnalyzeLatencies, ThreeNodes) {
  Truth truth;
  truth.sm_node = RandomLabels(30, 3, 2);
  truth.line_home = RandomLabels(900, 3, 3);
  Latencies lat;
  lat.sd = 10;
  absl::StatusOr<Topology> t = AnalyzeLatencies(Synthesize(truth, lat, 2));
  ASSERT_TRUE(t.ok()) << t.status();
  ExpectRecovers(*t, truth, lat);
}

// Three nodes in a row: the farther node is slower again (a third peak),
// which must not be taken for "far" nor split the nodes.
TEST(AnalyzeLatencies, ThreeNodesTwoFarDistances) {
  Truth truth;
  for (int s = 0; s < 36; ++s) truth.sm_node.push_back(s % 3);
  truth.line_home = ChunkHomes(960, 32, 3);
  Latencies lat;
  lat.sd = 10;
  lat.far_step = 80;
  absl::StatusOr<Topology> t = AnalyzeLatencies(Synthesize(truth, lat, 3));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_GE(t->mixture.components.size(), 3u);
  ExpectRecovers(*t, truth, lat);
}

TEST(AnalyzeLatencies, GaussianNoise) {
  Truth truth;
  truth.sm_node = RandomLabels(64, 2, 4);
  truth.line_home = RandomLabels(2048, 2, 5);
  Latencies lat;
  lat.sd = 20;
  absl::StatusOr<Topology> t = AnalyzeLatencies(Synthesize(truth, lat, 4));
  ASSERT_TRUE(t.ok()) << t.status();
  ExpectRecovers(*t, truth, lat);
  ASSERT_EQ(t->mixture.components.size(), 2u);
  EXPECT_NEAR(t->mixture.components[0].sd, 20, 3);
}

// Some SMs are uniformly slower, a few by more than the near-far gap's
// half: a single global threshold on the raw cycles would call all their
// near lines far.
TEST(AnalyzeLatencies, PerSmOffsets) {
  Truth truth;
  truth.sm_node = RandomLabels(48, 2, 6);
  truth.line_home = RandomLabels(1024, 2, 7);
  Latencies lat;
  lat.sd = 10;
  lat.offset = 30;
  lat.slow_every = 7;
  lat.slow = 100;
  const LatencyMatrix m = Synthesize(truth, lat, 6);
  ASSERT_GT(m.at(0, 0), 250);  // SM 0 is a slow one
  absl::StatusOr<Topology> t = AnalyzeLatencies(m);
  ASSERT_TRUE(t.ok()) << t.status();
  ExpectRecovers(*t, truth, lat);
}

// A100: 108 SMs, 62 on one partition and 46 on the other (spread over the
// SM ids), near ~200, far ~350, addresses alternating in 8 KB chunks.
TEST(AnalyzeLatencies, A100Like) {
  std::vector<int> ids(108);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937_64(8));
  Truth truth;
  truth.sm_node.assign(108, 1);
  for (int i = 0; i < 62; ++i) truth.sm_node[ids[i]] = 0;
  truth.line_home = ChunkHomes(2048, 64, 2);  // 64 lines x 128 B = 8 KB
  Latencies lat;
  lat.sd = 15;
  lat.offset = 30;
  absl::StatusOr<Topology> t = AnalyzeLatencies(Synthesize(truth, lat, 8));
  ASSERT_TRUE(t.ok()) << t.status();
  ExpectRecovers(*t, truth, lat);
  const int zero = t->sm_node[ids[0]];
  EXPECT_EQ(std::count(t->sm_node.begin(), t->sm_node.end(), zero), 62);
  EXPECT_EQ(InterleaveGranularity(t->line_home, 128), 8192u);
}

// H100: 132 SMs whose partition alternates with the SM id (ids are dealt
// across GPCs), near ~290, far ~480, 8 KB chunks.
TEST(AnalyzeLatencies, H100LikeInterleavedSms) {
  Truth truth;
  for (int s = 0; s < 132; ++s) truth.sm_node.push_back((s / 2) % 2);
  truth.line_home = ChunkHomes(2048, 64, 2);
  Latencies lat;
  lat.near = 290;
  lat.far = 480;
  lat.sd = 20;
  lat.offset = 30;
  absl::StatusOr<Topology> t = AnalyzeLatencies(Synthesize(truth, lat, 9));
  ASSERT_TRUE(t.ok()) << t.status();
  ExpectRecovers(*t, truth, lat);
  EXPECT_EQ(t->sm_node, truth.sm_node);  // SM 0 is on node 0: same ids
  EXPECT_EQ(InterleaveGranularity(t->line_home, 128), 8192u);
}

TEST(AnalyzeLatencies, UniformL2IsOneNode) {
  Truth truth;
  truth.sm_node.assign(132, 0);
  truth.line_home.assign(2048, 0);
  Latencies lat;
  lat.near = lat.far = 290;
  lat.sd = 15;
  lat.offset = 30;
  absl::StatusOr<Topology> t = AnalyzeLatencies(Synthesize(truth, lat, 10));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->nodes, 1);
  EXPECT_EQ(t->sm_node, std::vector<int>(132, 0));
  EXPECT_EQ(t->line_home, std::vector<int>(2048, 0));
  EXPECT_EQ(t->near_cycles, t->far_cycles);
  EXPECT_NEAR(t->near_cycles, 290, 0.03 * 290);
  EXPECT_GT(t->agreement, 0.99);
  EXPECT_EQ(InterleaveGranularity(t->line_home, 128), 0u);
}

// A uniform L2 where a few loads missed to DRAM: a second peak, but every
// SM sees the same few lines slow, so still one node.
TEST(AnalyzeLatencies, UniformWithDramOutliersIsOneNode) {
  Truth truth;
  truth.sm_node.assign(64, 0);
  truth.line_home.assign(1024, 0);
  Latencies lat;
  lat.near = lat.far = 290;
  lat.sd = 15;
  LatencyMatrix m = Synthesize(truth, lat, 11);
  std::mt19937_64 rng(11);
  std::bernoulli_distribution miss(0.01);
  for (double& c : m.cycles) c += miss(rng) ? 400 : 0;
  absl::StatusOr<Topology> t = AnalyzeLatencies(m);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->nodes, 1);
  EXPECT_NEAR(t->near_cycles, 290, 0.03 * 290);
  EXPECT_GT(t->agreement, 0.98);
}

TEST(AnalyzeLatencies, RejectsMalformedMatrices) {
  EXPECT_EQ(AnalyzeLatencies(LatencyMatrix{}).status().code(),
            absl::StatusCode::kInvalidArgument);
  LatencyMatrix m{.sms = 2, .lines = 3, .cycles = {1, 2, 3, 4, 5}};
  EXPECT_EQ(AnalyzeLatencies(m).status().code(),
            absl::StatusCode::kInvalidArgument);
  m.cycles.push_back(NAN);
  EXPECT_EQ(AnalyzeLatencies(m).status().code(),
            absl::StatusCode::kInvalidArgument);
  m.cycles.back() = 6;
  EXPECT_TRUE(AnalyzeLatencies(m).ok());
}

TEST(InterleaveGranularity, MostCommonRun) {
  const std::vector<int> homes = ChunkHomes(2048, 64, 2);
  EXPECT_EQ(InterleaveGranularity(homes, 128), 8192u);
  EXPECT_EQ(InterleaveGranularity(ChunkHomes(300, 4, 3), 64), 256u);
  EXPECT_EQ(InterleaveGranularity(std::vector<int>(100, 1), 128), 0u);
  EXPECT_EQ(InterleaveGranularity({}, 128), 0u);
}

// A sample that starts and ends mid-chunk, and a misread line.
TEST(InterleaveGranularity, CutEndsAndNoise) {
  std::vector<int> homes = ChunkHomes(64 * 12, 64, 2);
  homes.erase(homes.begin(), homes.begin() + 40);
  homes.resize(homes.size() - 10);
  homes[300] ^= 1;
  EXPECT_EQ(InterleaveGranularity(homes, 128), 8192u);
  // Two runs only, both cut: the longer is the best guess.
  EXPECT_EQ(InterleaveGranularity(std::vector<int>{0, 0, 0, 1}, 1), 3u);
}

TEST(DetectFarCopy, SecondHitNearMeansCopied) {
  Truth truth;
  truth.sm_node = RandomLabels(20, 2, 12);
  truth.line_home = RandomLabels(256, 2, 13);
  Latencies lat;
  lat.offset = 30;
  const LatencyMatrix first = Synthesize(truth, lat, 12);
  absl::StatusOr<Topology> t = AnalyzeLatencies(first);
  ASSERT_TRUE(t.ok()) << t.status();

  Latencies copied = lat;
  copied.far = copied.near;  // every line is near the second time
  absl::StatusOr<FarCopy> c =
      DetectFarCopy(first, Synthesize(truth, copied, 12), *t);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->copied);
  EXPECT_EQ(c->share, 1);
  EXPECT_NEAR(c->second_hit_cycles, 200, 20);

  c = DetectFarCopy(first, Synthesize(truth, lat, 13), *t);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->copied);
  EXPECT_EQ(c->share, 0);
  EXPECT_NEAR(c->second_hit_cycles, 350, 20);

  LatencyMatrix small = first;
  small.lines = 128;
  small.cycles.resize(20 * 128);
  EXPECT_FALSE(DetectFarCopy(first, small, *t).ok());
  Topology one = *t;
  one.nodes = 1;
  EXPECT_FALSE(DetectFarCopy(first, first, one).ok());
}

ProbeReport SampleReport() {
  Truth truth;
  for (int s = 0; s < 8; ++s) truth.sm_node.push_back(s % 2);
  truth.line_home = ChunkHomes(256, 64, 2);
  const LatencyMatrix m = Synthesize(truth, Latencies(), 14);
  ProbeReport r;
  r.gpu_name = "NVIDIA \"H100\" 80GB\\HBM3\n\x01 caf\xc3\xa9";
  r.compute_major = 9;
  r.sms = 8;
  r.sm_clock_khz = 1980000;
  r.memory_clock_khz = 2619000;
  r.memory_bus_bits = 5120;
  r.l2_bytes = 52428800;
  r.gpu_seconds = 1.25;
  r.lines_sampled = 256;
  r.line_bytes = 128;
  r.repeats = 3;
  r.cold_cycles.assign(8, 700.5);
  r.first_hit_cycles = {290, 291, 292, 293, 294, 295, 296, 0.1};
  r.second_hit_cycles.assign(8, NAN);  // not measured: null
  r.dram_cycles = 701;
  r.topology = *AnalyzeLatencies(m);
  r.interleave_bytes = InterleaveGranularity(r.topology.line_home, 128);
  r.far_copied_to_near = true;
  r.far_second_hit_cycles = 291.75;
  return r;
}

// Brackets balance outside strings, and strings hold no raw control bytes.
bool Balanced(const std::string& json) {
  std::vector<char> stack;
  bool in_string = false;
  for (size_t i = 0; i < json.size(); ++i) {
    const char c = json[i];
    if (in_string) {
      if (static_cast<unsigned char>(c) < 0x20) return false;
      if (c == '\\') ++i;
      if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      stack.push_back(c == '{' ? '}' : ']');
    } else if (c == '}' || c == ']') {
      if (stack.empty() || stack.back() != c) return false;
      stack.pop_back();
    }
  }
  return stack.empty() && !in_string;
}

TEST(ProbeReportJson, KeysInOrderAndBalanced) {
  const std::string json = ProbeReportJson(SampleReport());
  EXPECT_TRUE(Balanced(json)) << json;
  const std::vector<std::string> keys = {"format",
                                         "version",
                                         "gpu",
                                         "name",
                                         "compute_major",
                                         "compute_minor",
                                         "sm_clock_khz",
                                         "memory_clock_khz",
                                         "memory_bus_bits",
                                         "sms",
                                         "l2_bytes",
                                         "probe",
                                         "gpu_seconds",
                                         "lines_sampled",
                                         "line_bytes",
                                         "repeats",
                                         "per_sm_median_cycles",
                                         "cold",
                                         "first_hit",
                                         "second_hit",
                                         "dram_cycles",
                                         "topology",
                                         "nodes",
                                         "near_cycles",
                                         "far_cycles",
                                         "threshold_cycles",
                                         "agreement",
                                         "mixture",
                                         "components",
                                         "log_likelihood",
                                         "bic",
                                         "sm_node",
                                         "line_home",
                                         "interleave_bytes",
                                         "far_copied_to_near",
                                         "far_second_hit_cycles"};
  size_t at = 0;
  for (const std::string& k : keys) {
    const size_t found = json.find("\"" + k + "\": ", at);
    ASSERT_NE(found, std::string::npos) << k << " missing or out of order";
    at = found;
  }
  EXPECT_NE(json.find(R"("name": "NVIDIA \"H100\" 80GB\\HBM3\n\u0001 café")"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find(R"("second_hit": [null, null)"), std::string::npos);
  EXPECT_NE(json.find(R"("interleave_bytes": 8192)"), std::string::npos);
  EXPECT_NE(json.find(R"("far_copied_to_near": true)"), std::string::npos);
  EXPECT_EQ(json.find("nan"), std::string::npos);
}

TEST(ProbeReportJson, ReadsBackWhatItWrote) {
  const ProbeReport r = SampleReport();
  absl::StatusOr<ProbeReport> back = ParseProbeReportJson(ProbeReportJson(r));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->gpu_name, r.gpu_name);
  EXPECT_EQ(back->compute_major, 9);
  EXPECT_EQ(back->sm_clock_khz, r.sm_clock_khz);
  EXPECT_EQ(back->l2_bytes, r.l2_bytes);
  EXPECT_EQ(back->gpu_seconds, r.gpu_seconds);
  EXPECT_EQ(back->line_bytes, 128u);
  EXPECT_EQ(back->cold_cycles, r.cold_cycles);
  EXPECT_EQ(back->first_hit_cycles, r.first_hit_cycles);  // exact doubles
  ASSERT_EQ(back->second_hit_cycles.size(), 8u);
  EXPECT_TRUE(std::isnan(back->second_hit_cycles[0]));
  const Topology& t = back->topology;
  EXPECT_EQ(t.nodes, 2);
  EXPECT_EQ(t.sm_node, r.topology.sm_node);
  EXPECT_EQ(t.line_home, r.topology.line_home);
  EXPECT_EQ(t.threshold, r.topology.threshold);
  EXPECT_EQ(t.agreement, r.topology.agreement);
  ASSERT_EQ(t.mixture.components.size(), r.topology.mixture.components.size());
  EXPECT_EQ(t.mixture.components[1].mean,
            r.topology.mixture.components[1].mean);
  EXPECT_EQ(t.mixture.bic, r.topology.mixture.bic);
  EXPECT_EQ(back->interleave_bytes, 8192u);
  EXPECT_TRUE(back->far_copied_to_near);
  EXPECT_EQ(back->far_second_hit_cycles, 291.75);
}

TEST(ProbeReportJson, RejectsBadInput) {
  const std::string good = ProbeReportJson(SampleReport());
  auto bad = [](const std::string& s) {
    return ParseProbeReportJson(s).status().code() ==
           absl::StatusCode::kInvalidArgument;
  };
  EXPECT_TRUE(bad(""));
  EXPECT_TRUE(bad(good.substr(0, good.size() / 2)));
  EXPECT_TRUE(bad(good + "x"));
  EXPECT_TRUE(bad("[1, 2,]"));
  EXPECT_TRUE(bad(R"({"format": "dmg-gpu-probe", "version": 2})"));
  EXPECT_TRUE(bad(std::string(1000, '[')));  // nesting bound, not a crash
  std::string s = good;
  s.replace(s.find("\"sms\""), 5, "\"smz\"");
  EXPECT_TRUE(bad(s));  // missing key
  s = good;
  s.replace(s.find("\"repeats\": 3"), 12, "\"repeats\": 3.5");
  EXPECT_TRUE(bad(s));  // not an integer
  s = good;
  s.replace(s.find("\"far_copied_to_near\": true"), 26,
            "\"far_copied_to_near\": 1");
  EXPECT_TRUE(bad(s));  // not a bool
  // Escapes the writer never uses still read: \/ and a surrogate pair.
  s = good;
  s.replace(s.find("\"name\": \"") + 9, 6, R"(\/\ud83d\ude00)");
  absl::StatusOr<ProbeReport> r = ParseProbeReportJson(s);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->gpu_name.substr(0, 5), "/\xf0\x9f\x98\x80");
}

}  // namespace
}  // namespace dmg::gpu

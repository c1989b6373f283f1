// The GPU share kernels (gpu/kernels.h) on whole generated graphs, the
// GPU taking a node's whole range: the plain schedule against the NUMA one
// (SM -> L2 partition map from `dmg gpu-probe --output`'s file), PageRank
// pull iterations and one direction-optimising BFS, each checked against a
// CPU loop written here, with the bytes a pull iteration moves per second
// of kernel time against the GPU's DRAM peak. One table, for
// gpu/device-check.sh on a machine with a GPU; without one it says so and
// exits 1.
//
//   gpu_share_bench --graphs=kron:22,kron:23,kron:24 --topology=topo.json
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "gflags/gflags.h"
#include "gpu/analysis/report.h"
#include "gpu/device.h"
#include "gpu/kernels.h"
#include "store/build_graph.h"
#include "store/generator.h"

DEFINE_string(graphs, "kron:22,kron:23,kron:24",
              "generator specs, comma-separated");
DEFINE_string(topology, "",
              "dmg gpu-probe's --output file: the SM -> L2 partition map "
              "the NUMA schedule uses (none: one queue)");
DEFINE_int32(iters, 10, "timed PageRank pull iterations per schedule");
DEFINE_int32(device, 0, "CUDA device");

namespace dmg {
namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// The share's CSR straight from a graph's direction (the whole range).
gpu::CsrChunks Chunks(const store::Csr& csr) {
  gpu::CsrChunks c;
  c.offsets = std::span<const uint64_t>(
      reinterpret_cast<const uint64_t*>(csr.offsets.data()),
      csr.offsets.size());
  c.fill = [&csr](uint64_t first, std::span<uint32_t> out) {
    std::copy_n(csr.targets.begin() + first, out.size(), out.begin());
    return absl::OkStatus();
  };
  return c;
}

// Reference pull sums in double, and the float sums' relative L1 to them.
double PullL1(const store::Csr& in, const std::vector<float>& contrib,
              const std::vector<float>& sums) {
  double diff = 0, total = 0;
  for (uint64_t v = 0; v < in.num_vertices; ++v) {
    double s = 0;
    for (uint32_t u : in.neighbors(v)) s += contrib[u];
    diff += std::fabs(s - sums[v]);
    total += std::fabs(s);
  }
  return total > 0 ? diff / total : diff;
}

std::vector<int> QueueBfs(const store::Csr& out, uint32_t source) {
  std::vector<int> depth(out.num_vertices, -1);
  std::vector<uint32_t> queue = {source};
  depth[source] = 0;
  for (size_t i = 0; i < queue.size(); ++i) {
    for (uint32_t w : out.neighbors(queue[i])) {
      if (depth[w] < 0) {
        depth[w] = depth[queue[i]] + 1;
        queue.push_back(w);
      }
    }
  }
  return depth;
}

struct BfsRun {
  double seconds = 0;
  bool exact = false;
  int levels = 0;
};

// Direction-optimising BFS driven from the host: top-down while the
// frontier is small, bottom-up once it holds more than n/20 vertices.
absl::StatusOr<BfsRun> GpuBfs(gpu::ShareKernels& k, const store::Graph& g,
                              uint32_t source) {
  const uint64_t n = g.num_vertices();
  std::vector<int64_t> parent(n, -1);
  std::vector<int> depth(n, -1);
  std::vector<uint64_t> visited((n + 63) / 64, 0), bitmap(visited.size());
  std::vector<uint32_t> frontier = {source};
  parent[source] = source;
  depth[source] = 0;
  visited[source / 64] |= uint64_t{1} << (source % 64);
  BfsRun run;
  const auto start = Clock::now();
  std::vector<std::pair<uint32_t, uint32_t>> found;
  while (!frontier.empty()) {
    std::vector<uint32_t> next;
    if (frontier.size() > n / 20) {
      std::fill(bitmap.begin(), bitmap.end(), 0);
      for (uint32_t v : frontier) bitmap[v / 64] |= uint64_t{1} << (v % 64);
      std::vector<int64_t> before = parent;
      uint64_t awakened = 0;
      if (absl::Status s = k.BfsBottomUp(bitmap, parent, &awakened); !s.ok()) {
        return s;
      }
      for (uint64_t v = 0; v < n; ++v) {
        if (before[v] < 0 && parent[v] >= 0) next.push_back(v);
      }
    } else {
      found.clear();
      if (absl::Status s = k.BfsTopDown(frontier, visited, &found); !s.ok()) {
        return s;
      }
      for (auto [v, p] : found) {
        parent[v] = p;
        next.push_back(v);
      }
    }
    for (uint32_t v : next) {
      depth[v] = run.levels + 1;
      visited[v / 64] |= uint64_t{1} << (v % 64);
    }
    frontier = std::move(next);
    ++run.levels;
  }
  run.seconds = Since(start);
  // Exact depths, and every parent one level up with an edge to its child.
  run.exact = depth == QueueBfs(g.out, source);
  for (uint64_t v = 0; run.exact && v < n; ++v) {
    if (depth[v] <= 0) continue;
    const auto p = static_cast<uint32_t>(parent[v]);
    const auto nb = g.out.neighbors(p);
    run.exact = depth[p] == depth[v] - 1 &&
                std::binary_search(nb.begin(), nb.end(), uint32_t(v));
  }
  return run;
}

struct Row {
  std::string graph, schedule;
  uint64_t n = 0, m = 0;
  double pr_ms = 0, pr_gbps = 0, pr_l1 = 0, bfs_ms = 0;
  bool bfs_exact = false;
};

absl::StatusOr<Row> Measure(const store::Graph& g, const std::string& name,
                            gpu::Schedule schedule, const gpu::ProbeReport* t,
                            uint32_t source) {
  gpu::KernelOptions o;
  o.device = FLAGS_device;
  o.schedule = schedule;
  if (t != nullptr) {
    o.sm_node = t->topology.sm_node;
    o.nodes = t->topology.nodes;
  }
  const uint64_t n = g.num_vertices();
  auto k = gpu::ShareKernels::Open(n, 0, n, o);
  if (!k.ok()) return k.status();
  if (absl::Status s = (*k)->Upload(store::Direction::kIn, Chunks(g.in));
      !s.ok()) {
    return s;
  }
  if (absl::Status s = (*k)->Upload(store::Direction::kOut, Chunks(g.out));
      !s.ok()) {
    return s;
  }
  std::vector<float> contrib(n), sums(n);
  for (uint64_t v = 0; v < n; ++v) {
    const uint64_t d = g.out.degree(v);
    contrib[v] = d == 0 ? 0.0f : 1.0f / n / d;
  }
  if (absl::Status s = (*k)->PageRankPull(contrib, sums); !s.ok()) return s;
  const double kernel_before = (*k)->times().kernel_seconds;
  for (int i = 0; i < FLAGS_iters; ++i) {
    if (absl::Status s = (*k)->PageRankPull(contrib, sums); !s.ok()) return s;
  }
  Row r;
  r.graph = name;
  r.schedule = schedule == gpu::Schedule::kNuma ? "numa" : "plain";
  r.n = n;
  r.m = g.num_arcs();
  const double per_iter =
      ((*k)->times().kernel_seconds - kernel_before) / FLAGS_iters;
  r.pr_ms = per_iter * 1e3;
  // What an iteration reads and writes on the GPU: each in-edge's target
  // and its contribution, the offsets and the sums.
  const double bytes = 8.0 * r.m + 8.0 * (n + 1) + 4.0 * n;
  r.pr_gbps = per_iter > 0 ? bytes / per_iter / 1e9 : 0;
  r.pr_l1 = PullL1(g.in, contrib, sums);
  absl::StatusOr<BfsRun> bfs = GpuBfs(**k, g, source);
  if (!bfs.ok()) return bfs.status();
  r.bfs_ms = bfs->seconds * 1e3;
  r.bfs_exact = bfs->exact;
  return r;
}

int Main() {
  std::string why;
  const std::vector<gpu::DeviceInfo> devices = gpu::ListDevices(&why);
  if (devices.empty()) {
    std::fprintf(stderr, "gpu_share_bench: no GPU: %s\n", why.c_str());
    return 1;
  }
  const gpu::DeviceInfo& d = devices.at(FLAGS_device);
  std::optional<gpu::ProbeReport> topology;
  if (!FLAGS_topology.empty()) {
    std::ifstream f(FLAGS_topology);
    std::stringstream text;
    text << f.rdbuf();
    absl::StatusOr<gpu::ProbeReport> r = gpu::ParseProbeReportJson(text.str());
    if (!r.ok()) {
      std::fprintf(stderr, "gpu_share_bench: %s: %s\n", FLAGS_topology.c_str(),
                   std::string(r.status().message()).c_str());
      return 2;
    }
    topology = *r;
  }
  std::printf(
      "%s: %d SMs, %.1f GB/s DRAM peak; NUMA nodes from the probe: %d\n",
      d.name.c_str(), d.sms, d.PeakGBps(),
      topology ? topology->topology.nodes : 1);
  std::printf("%-9s %10s %11s %-6s %9s %8s %6s %9s %9s %5s\n", "graph",
              "vertices", "arcs", "sched", "pr ms/it", "pr GB/s", "%peak",
              "pr L1", "bfs ms", "bfs");
  int failures = 0;
  const std::vector<std::string> specs = absl::StrSplit(FLAGS_graphs, ',');
  for (const std::string& spec : specs) {
    auto params = store::ParseGeneratorSpec(spec, 1);
    if (!params.ok()) {
      std::fprintf(stderr, "gpu_share_bench: %s\n",
                   std::string(params.status().message()).c_str());
      return 2;
    }
    const auto built = Clock::now();
    absl::StatusOr<store::Graph> g =
        store::BuildGraph(store::Generate(*params), store::CleanOptions{});
    if (!g.ok()) return 1;
    std::fprintf(stderr, "%s built in %.1f s\n", spec.c_str(), Since(built));
    uint32_t source = 0;  // the vertex of highest out-degree
    for (uint64_t v = 1; v < g->num_vertices(); ++v) {
      if (g->out.degree(v) > g->out.degree(source)) source = v;
    }
    for (gpu::Schedule s : {gpu::Schedule::kPlain, gpu::Schedule::kNuma}) {
      absl::StatusOr<Row> r =
          Measure(*g, spec, s, topology ? &*topology : nullptr, source);
      if (!r.ok()) {
        std::fprintf(stderr, "gpu_share_bench: %s: %s\n", spec.c_str(),
                     std::string(r.status().message()).c_str());
        ++failures;
        continue;
      }
      const bool ok = r->pr_l1 <= 1e-6 && r->bfs_exact;
      failures += !ok;
      std::printf(
          "%-9s %10llu %11llu %-6s %9.3f %8.1f %5.1f%% %9.2e %9.2f %5s\n",
          r->graph.c_str(), (unsigned long long)r->n, (unsigned long long)r->m,
          r->schedule.c_str(), r->pr_ms, r->pr_gbps,
          100 * r->pr_gbps / d.PeakGBps(), r->pr_l1, r->bfs_ms,
          r->bfs_exact ? "exact" : "WRONG");
    }
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace dmg

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  return dmg::Main();
}

// How big should a store block be? Builds the layout of one graph at block
// sizes 4..64 KiB and measures, for each, what a compute node would fetch:
//   - the image size and the block directory a compute node must hold;
//   - for BFS from several sources, level by level, the bytes of the distinct
//     blocks that hold the frontier's adjacency (whole-block fetches) against
//     the adjacency bytes actually needed (read amplification), and the number
//     of READs;
//   - a modelled fetch time, READs x latency + bytes / bandwidth, with the
//     latency and bandwidth given by flags (defaults: a 100 Gb/s RDMA NIC,
//     ~2 us per READ round trip). Re-run with figures from the transport
//     micro-benchmark once real fabrics are measured.
// Then, per block size, the two block encodings (store/block_codec.h): the
// out-blocks' bytes per arc, plain and compressed, and what reading a block
// costs the compute node per edge on one thread (best of 5 passes over
// every out-block): parsing a plain block, decoding a compressed one into
// the plain layout (what every scan of compressed blocks pays).
// Usage: block_size_bench [--graph=kron:18] [--sources=8]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <queue>
#include <vector>

#include "absl/strings/str_format.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "store/block_codec.h"
#include "store/graph_source.h"
#include "store/layout.h"

DEFINE_string(graph, "kron:18", "graph SPEC");
DEFINE_int32(sources, 8,
             "BFS sources (the highest out-degree vertices and "
             "pseudo-random ones)");
DEFINE_double(latency_us, 2.0, "modelled cost of one READ round trip");
DEFINE_double(bandwidth_gbs, 12.0, "modelled READ bandwidth, GB/s");
DEFINE_int32(batch_depth, 16,
             "outstanding READs in the batched regime (latency is divided by "
             "it; the unbatched regime uses 1)");

namespace dmg::store {
namespace {

struct Result {
  uint32_t block_size;
  uint64_t image_bytes, directory_bytes, blocks;
  uint64_t bfs_reads = 0, bfs_fetched = 0, bfs_needed = 0;
  double model_seconds = 0;          // one READ at a time
  double model_batched_seconds = 0;  // batch_depth READs in flight
};

Result Measure(const Graph& g, uint32_t block_size,
               const std::vector<VertexId>& sources) {
  LayoutOptions layout;
  layout.block_size = block_size;
  absl::StatusOr<StoreImage> image = BuildStoreImage(g, layout);
  CHECK(image.ok()) << image.status();
  auto dir = image->directory(Direction::kOut);
  Result r{block_size, image->bytes().size(),
           dir.size() * sizeof(DirectoryEntry), dir.size()};
  std::vector<int32_t> depth(g.num_vertices());
  std::vector<uint8_t> touched(dir.size());
  for (VertexId s : sources) {
    std::fill(depth.begin(), depth.end(), -1);
    std::vector<VertexId> frontier = {s}, next;
    depth[s] = 0;
    while (!frontier.empty()) {
      // One level: which blocks does the frontier's adjacency live in?
      std::vector<size_t> blocks;
      for (VertexId v : frontier) {
        r.bfs_needed += g.out.degree(v) * sizeof(VertexId);
        auto [first, last] = FindBlocks(dir, v);
        for (size_t b = first; b < last; ++b) {
          if (!touched[b]) {
            touched[b] = 1;
            blocks.push_back(b);
          }
        }
      }
      for (size_t b : blocks) {
        r.bfs_fetched += dir[b].length;
        touched[b] = 0;
      }
      r.bfs_reads += blocks.size();
      next.clear();
      for (VertexId v : frontier) {
        for (VertexId u : g.out.neighbors(v)) {
          if (depth[u] < 0) {
            depth[u] = depth[v] + 1;
            next.push_back(u);
          }
        }
      }
      frontier.swap(next);
    }
  }
  double transfer = r.bfs_fetched / (FLAGS_bandwidth_gbs * 1e9);
  r.model_seconds = r.bfs_reads * FLAGS_latency_us * 1e-6 + transfer;
  r.model_batched_seconds =
      r.bfs_reads * FLAGS_latency_us * 1e-6 / FLAGS_batch_depth + transfer;
  return r;
}

struct Encoding {
  double bytes_per_arc;
  double ns_per_edge;  // parse (plain) or decode (compressed)
};

Encoding MeasureEncoding(const Graph& g, uint32_t block_size, bool compress) {
  LayoutOptions layout;
  layout.block_size = block_size;
  layout.compress = compress;
  absl::StatusOr<StoreImage> image = BuildStoreImage(g, layout);
  CHECK(image.ok()) << image.status();
  const Direction d = Direction::kOut;
  auto dir = image->directory(d);
  const RegionEntry* region = image->FindRegion(BlocksKind(d), 0);
  uint64_t block_bytes = 0;
  for (const DirectoryEntry& e : dir) block_bytes += e.length;
  DecodeBuffer buffer;
  double best = 1e300;
  uint64_t sink = 0;
  for (int pass = 0; pass < 5; ++pass) {
    const auto start = std::chrono::steady_clock::now();
    for (const DirectoryEntry& e : dir) {
      absl::StatusOr<BlockView> b = ParseAnyBlock(
          image->RegionBytes(*region).subspan(e.offset, e.length), buffer);
      CHECK(b.ok()) << b.status();
      // Touch the edges, as a scan would.
      for (VertexId t : b->all_targets()) sink += t;
    }
    best = std::min(best, std::chrono::duration<double>(
                              std::chrono::steady_clock::now() - start)
                              .count());
  }
  CHECK_NE(sink, 1u);  // keeps the loop
  return {static_cast<double>(block_bytes) / g.num_arcs(),
          best * 1e9 / g.num_arcs()};
}

int Main() {
  GraphSourceOptions options;
  absl::StatusOr<Graph> g = LoadGraph(FLAGS_graph, options);
  CHECK(g.ok()) << g.status();
  std::vector<VertexId> sources;
  {
    std::vector<VertexId> by_degree(g->num_vertices());
    for (VertexId v = 0; v < g->num_vertices(); ++v) by_degree[v] = v;
    std::partial_sort(by_degree.begin(), by_degree.begin() + 1, by_degree.end(),
                      [&](VertexId a, VertexId b) {
                        return g->out.degree(a) > g->out.degree(b);
                      });
    sources.push_back(by_degree[0]);
    uint64_t x = 12345;
    while (static_cast<int>(sources.size()) < FLAGS_sources) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      VertexId v = (x >> 33) % g->num_vertices();
      if (g->out.degree(v) > 0) sources.push_back(v);
    }
  }
  absl::PrintF(
      "graph %s: %d vertices, %d arcs; BFS from %d sources; model "
      "%.1f us/READ, %.1f GB/s\n",
      FLAGS_graph, g->num_vertices(), g->num_arcs(), sources.size(),
      FLAGS_latency_us, FLAGS_bandwidth_gbs);
  std::vector<Result> results;
  for (uint32_t bs : {4096u, 8192u, 16384u, 32768u, 65536u}) {
    results.push_back(Measure(*g, bs, sources));
  }
  double best = 1e300, best_batched = 1e300;
  for (const Result& r : results) {
    best = std::min(best, r.model_seconds);
    best_batched = std::min(best_batched, r.model_batched_seconds);
  }
  // "regret": how much slower than the best block size for this graph, in
  // the worse of the two regimes. The default should keep this small on
  // every graph.
  absl::PrintF("%8s %12s %10s %8s %10s %12s %7s %9s %9s %7s\n", "block",
               "image_B", "dir_B", "blocks", "bfs_READs", "bfs_fetch_B",
               "amplif", "model_s", "batch_s", "regret");
  for (const Result& r : results) {
    double regret = std::max(r.model_seconds / best,
                             r.model_batched_seconds / best_batched);
    absl::PrintF("%8d %12d %10d %8d %10d %12d %7.2f %9.4f %9.4f %7.2f\n",
                 r.block_size, r.image_bytes, r.directory_bytes, r.blocks,
                 r.bfs_reads, r.bfs_fetched,
                 static_cast<double>(r.bfs_fetched) / r.bfs_needed,
                 r.model_seconds, r.model_batched_seconds, regret);
  }
  absl::PrintF(
      "\nencodings (out-blocks; ns per edge of one thread reading "
      "every block)\n%8s %12s %12s %12s %12s %8s\n",
      "block", "plain_B/arc", "parse_ns/e", "packed_B/arc", "decode_ns/e",
      "ratio");
  for (uint32_t bs : {4096u, 8192u, 16384u, 32768u, 65536u}) {
    const Encoding plain = MeasureEncoding(*g, bs, false);
    const Encoding packed = MeasureEncoding(*g, bs, true);
    absl::PrintF("%8d %12.3f %12.3f %12.3f %12.3f %7.2fx\n", bs,
                 plain.bytes_per_arc, plain.ns_per_edge, packed.bytes_per_arc,
                 packed.ns_per_edge,
                 plain.bytes_per_arc / packed.bytes_per_arc);
  }
  return 0;
}

}  // namespace
}  // namespace dmg::store

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  return dmg::store::Main();
}

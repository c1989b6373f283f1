// PageRank, pull direction (DESIGN.md semantics):
//   score(v) = (1-d)/N + d * sum over in-neighbours u of score(u)/outdeg(u)
// with d = 0.85, start 1/N, dangling mass not redistributed, until the L1
// change is below the tolerance or max_iters iterations ran.
//
// Each iteration is one dense superstep: contributions score(u)/outdeg(u)
// are computed locally from the owned scores, every vertex's in-blocks are
// READ and summed in block order (the same order as a CSR loop, so sums are
// bit-identical whatever the thread count), and the new scores become the
// next version of the state array on the memory node.
#include <cmath>

#include "algorithms/algorithms.h"
#include "algorithms/util.h"

namespace dmg::algorithms {

absl::StatusOr<PageRankResult> PageRank(Engine& engine, int max_iters,
                                        double tolerance) {
  const uint64_t n = engine.num_vertices();
  absl::StatusOr<std::vector<uint32_t>> outdeg =
      engine.Degrees(store::Direction::kOut);
  if (!outdeg.ok()) return outdeg.status();
  auto score = engine.NewState<double>("pagerank.score", 1.0 / n);
  if (!score.ok()) return score.status();
  compute::StateArray<double>& s = **score;
  // Explicit local working arrays.
  std::vector<double> contrib(n), sum(n);
  engine.AddLocalStateBytes(2 * n * sizeof(double) + n * sizeof(uint32_t));
  std::vector<double> l1_part(engine.threads());
  const double base = (1.0 - kDamping) / n;

  PageRankResult result;
  while (result.iterations < max_iters) {
    engine.BeginSuperstep("pull", n);
    engine.ParallelFor(n, [&](int, uint64_t b, uint64_t e) {
      for (uint64_t u = b; u < e; ++u) {
        contrib[u] = (*outdeg)[u] ? s[u] / (*outdeg)[u] : 0.0;
        sum[u] = 0.0;
      }
    });
    absl::Status st = engine.ForEachVertex(
        store::Direction::kIn,
        [&](int, VertexId v, std::span<const VertexId> in, auto) {
          double acc = sum[v];
          for (VertexId u : in) acc += contrib[u];
          sum[v] = acc;
        });
    if (!st.ok()) return st;
    engine.ParallelFor(n, [&](int w, uint64_t b, uint64_t e) {
      double l1 = 0;
      for (uint64_t v = b; v < e; ++v) {
        double next = base + kDamping * sum[v];
        l1 += std::fabs(next - s[v]);
        s[v] = next;
      }
      l1_part[w] = l1;
    });
    s.MarkAllDirty();
    if (absl::Status e = engine.EndSuperstep(); !e.ok()) return e;
    result.last_l1 = 0;
    for (double x : l1_part) result.last_l1 += x;
    ++result.iterations;
    if (result.last_l1 < tolerance) break;
  }
  absl::StatusOr<std::vector<double>> out = ReadBack(engine, s);
  if (!out.ok()) return out.status();
  result.scores = *std::move(out);
  return result;
}

}  // namespace dmg::algorithms

// PageRank, pull direction (DESIGN.md semantics):
//   score(v) = (1-d)/N + d * sum over in-neighbours u of score(u)/outdeg(u)
// with d = 0.85, start 1/N, dangling mass not redistributed, until the L1
// change is below the tolerance or max_iters iterations ran.
//
// State on the memory node: contributions score(u)/outdeg(u), scores and
// out-degrees (read once from block headers). Each iteration is one dense
// superstep: every vertex's in-blocks are READ and its in-neighbours'
// contributions summed in block order (the order of a CSR loop, so sums are
// bit-identical whatever the threads or the cache); the vertex's new score is
// set as soon as its last piece is summed; then the new contributions are
// written. The contributions are created first, so under a tight cache they
// are the array that stays whole and local: they are read once per edge.
#include <cmath>

#include "algorithms/algorithms.h"
#include "algorithms/util.h"

namespace dmg::algorithms {

absl::StatusOr<PageRankResult> PageRank(Engine& engine, int max_iters,
                                        double tolerance) {
  const uint64_t n = engine.num_vertices();
  auto contrib_or = engine.NewState<double>("pagerank.contrib", 0.0);
  if (!contrib_or.ok()) return contrib_or.status();
  auto score_or = engine.NewState<double>("pagerank.score", 1.0 / n);
  if (!score_or.ok()) return score_or.status();
  auto outdeg_or = engine.NewState<uint32_t>("pagerank.outdeg", 0);
  if (!outdeg_or.ok()) return outdeg_or.status();
  compute::StateArray<double>& contrib = **contrib_or;
  compute::StateArray<double>& score = **score_or;
  compute::StateArray<uint32_t>& outdeg = **outdeg_or;

  // Out-degrees from block headers (pieces of a split vertex arrive on one
  // worker, so read-add-write needs no atomics), then the first
  // contributions.
  absl::Status st = engine.ForEachDegree(
      store::Direction::kOut, [&](int w, VertexId v, uint32_t d) {
        if (d != 0) outdeg.Set(w, v, outdeg.Get(w, v) + d);
      });
  if (!st.ok()) return st;
  auto update_contributions = [&] {
    // Whole local copies where the cache holds them, accessors elsewhere.
    double* c = contrib.MutableResidentData();
    const double* sc = score.ResidentData();
    const uint32_t* deg = outdeg.ResidentData();
    engine.ParallelFor(n, [&](int w, uint64_t b, uint64_t e) {
      for (uint64_t v = b; v < e; ++v) {
        uint32_t d = deg ? deg[v] : outdeg.Get(w, v);
        double x = d ? (sc ? sc[v] : score.Get(w, v)) / d : 0.0;
        if (c) {
          c[v] = x;
        } else {
          contrib.Set(w, v, x);
        }
      }
    });
    if (c != nullptr) contrib.MarkAllDirty();
  };
  update_contributions();

  const double base = (1.0 - kDamping) / n;
  const int threads = engine.threads();
  // A vertex being summed by one worker (its pieces arrive in order), and
  // the L1 change of the worker's current unit. One cache line per worker.
  struct alignas(64) Pending {
    bool open = false;
    VertexId v = 0;
    double acc = 0;
    uint32_t unit = 0;
    double unit_l1 = 0;
  };
  // L1 change per work unit, added in unit order: the same for any thread
  // count.
  std::vector<double> l1(engine.num_units(store::Direction::kIn));
  PageRankResult result;
  while (result.iterations < max_iters) {
    engine.BeginSuperstep("pull", n);
    std::vector<Pending> pending(threads);
    std::fill(l1.begin(), l1.end(), 0.0);
    // Contributions are read-only during the scan.
    const double* local_contrib = contrib.ResidentData();
    double* local_score = score.MutableResidentData();
    auto finish = [&](int w) {
      Pending& p = pending[w];
      if (!p.open) return;
      double next = base + kDamping * p.acc;
      double old;
      if (local_score != nullptr) {  // each vertex is finished by one worker
        old = local_score[p.v];
        local_score[p.v] = next;
      } else {
        old = score.Get(w, p.v);
        score.Set(w, p.v, next);
      }
      p.unit_l1 += std::fabs(next - old);
      p.open = false;
    };
    auto flush_unit = [&](int w) {
      l1[pending[w].unit] += pending[w].unit_l1;
      pending[w].unit_l1 = 0;
    };
    st = engine.ForEachVertex(
        store::Direction::kIn,
        [&](int w, VertexId v, std::span<const VertexId> in, auto) {
          Pending& p = pending[w];
          if (!p.open || p.v != v) {
            finish(w);
            if (p.unit != engine.current_unit(w)) {
              flush_unit(w);
              p.unit = engine.current_unit(w);
            }
            p.open = true;
            p.v = v;
            p.acc = 0.0;
          }
          double acc = p.acc;
          if (local_contrib != nullptr) {
            for (VertexId u : in) acc += local_contrib[u];
          } else {
            for (VertexId u : in) acc += contrib.Get(w, u);
          }
          p.acc = acc;
        });
    if (!st.ok()) return st;
    for (int w = 0; w < threads; ++w) {
      finish(w);
      flush_unit(w);
    }
    if (local_score != nullptr) score.MarkAllDirty();
    update_contributions();
    if (absl::Status e = engine.EndSuperstep(); !e.ok()) return e;
    result.last_l1 = 0;
    for (double x : l1) result.last_l1 += x;
    ++result.iterations;
    if (result.last_l1 < tolerance) break;
  }
  absl::StatusOr<std::vector<double>> out =
      score.ReadResult(engine.superstep());
  if (!out.ok()) return out.status();
  result.scores = *std::move(out);
  return result;
}

}  // namespace dmg::algorithms

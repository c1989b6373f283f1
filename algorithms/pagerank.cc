// PageRank, pull direction (DESIGN.md semantics):
//   score(v) = (1-d)/N + d * sum over in-neighbours u of score(u)/outdeg(u)
// with d = 0.85, start 1/N, dangling mass not redistributed, until the L1
// change is below the tolerance or max_iters iterations ran.
//
// Each iteration is one superstep: every vertex gathers its in-neighbours'
// contributions score(u)/outdeg(u), summed in Gather's fixed order (a long
// list in four chains: bit-identical for any thread count, cache or
// transport, and within rounding of a CSR loop's sum), and takes its new
// score. Contributions are read once per edge: the array to keep local.
//
// Two ways to keep the state, in three arrays (two slots and the
// out-degrees), chosen once from where the planner put the slots:
//  - Alternating (both slots resident, or both paged): the slots take
//    turns holding the contributions; the gather reads last iteration's
//    while its finish writes this one's (Jacobi, as the semantics say). A
//    score is not stored: it is contribution x out-degree, and a vertex
//    with no out-edge, whose contribution no gather reads, keeps its score
//    in its slot. One operation an iteration touching three arrays per
//    vertex; the last iteration writes the scores into the slots it read.
//  - Scores kept (the first slot resident, the second not): slot 0 holds
//    the contributions, slot 1 the scores; a vertex map writes the
//    contributions before each gather. Alternating would make every
//    other gather read its contributions from paged memory, once per edge
//    (kron:20 at a 9 MB bound: 44 s against 1 s).
// Alternating saves a pass over three arrays and, with several compute
// nodes, one collective an iteration (road-NY at 5%: 207 -> 176 MB READ,
// 43 -> 24 MB written).
//
// ScoreT is the precision (Precision): with float, scores, contributions
// and the gather's sums are floats, as GAPBS's ScoreT; the L1 change is
// summed in double either way.
#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "algorithms/algorithms.h"

namespace dmg::algorithms {

namespace {

template <typename ScoreT>
struct Arrays {
  compute::State<ScoreT>* slots[2];
  compute::State<uint32_t>* outdeg;
  ScoreT base;  // (1-d)/N
  // A vertex's new score from its gathered contributions.
  ScoreT Score(ScoreT sum) const {
    return base + static_cast<ScoreT>(kDamping) * sum;
  }
};

// A score's value in an alternating slot, and back.
template <typename ScoreT>
ScoreT ToSlot(ScoreT score, uint32_t d) {
  return d == 0 ? score : score / static_cast<ScoreT>(d);
}
template <typename ScoreT>
ScoreT ToScore(ScoreT slot, uint32_t d) {
  return d == 0 ? slot : slot * static_cast<ScoreT>(d);
}

// One gather of the contributions in `contrib`; finish(v, sum) returns the
// L1 change of v.
template <typename ScoreT, typename FinishFn>
absl::StatusOr<double> GatherContributions(Engine& engine,
                                           compute::State<ScoreT>& contrib,
                                           FinishFn& finish) {
  if (engine.GpuShareWanted()) {  // the GPU sums the range's first part
    return engine.GatherSumOnGpu<ScoreT>(Direction::kIn, contrib, finish);
  }
  const auto c = contrib.reader();
  return engine.Gather<compute::Add>(
      Direction::kIn, [c](VertexId u, VertexId, auto) { return c[u]; }, finish);
}

// The iterations, alternating; returns the slot that holds the scores.
template <typename ScoreT>
absl::StatusOr<compute::State<ScoreT>*> Alternate(Engine& engine,
                                                  const Arrays<ScoreT>& a,
                                                  int max_iters,
                                                  double tolerance,
                                                  PageRankResult& result) {
  compute::State<uint32_t>& outdeg = *a.outdeg;
  while (result.iterations < max_iters && !(result.last_l1 < tolerance)) {
    compute::State<ScoreT>& now = *a.slots[result.iterations % 2];
    compute::State<ScoreT>& next = *a.slots[(result.iterations + 1) % 2];
    auto finish = [&](VertexId v, ScoreT sum) {
      const uint32_t d = outdeg.Get(v);
      const ScoreT score = a.Score(sum);
      const double change =
          std::fabs(double{score} - double{ToScore(now.Get(v), d)});
      next.Set(v, ToSlot(score, d));
      return change;
    };
    DMG_ASSIGN_OR_RETURN(result.last_l1,
                         GatherContributions(engine, now, finish));
    ++result.iterations;
    if (result.iterations >= max_iters || result.last_l1 < tolerance) {
      // The last iteration: the scores go into the slot it read, in its
      // superstep (so a job resumed after it finds them there).
      DMG_RETURN_IF_ERROR(engine.VertexMap([&](VertexId v) {
        now.Set(v, ToScore(next.Get(v), outdeg.Get(v)));
      }));
    }
    DMG_RETURN_IF_ERROR(engine.EndSuperstep());
  }
  compute::State<ScoreT>& scores = *a.slots[(result.iterations + 1) % 2];
  if (result.iterations == 0) {  // no iteration: the start, as scores
    DMG_RETURN_IF_ERROR(engine.VertexMap([&](VertexId v) {
      scores.Set(v, ToScore(a.slots[0]->Get(v), outdeg.Get(v)));
    }));
  }
  return &scores;
}

// The iterations, scores kept in slot 1; returns it.
template <typename ScoreT>
absl::StatusOr<compute::State<ScoreT>*> KeepScores(Engine& engine,
                                                   const Arrays<ScoreT>& a,
                                                   int max_iters,
                                                   double tolerance,
                                                   PageRankResult& result) {
  compute::State<ScoreT>& contrib = *a.slots[0];
  compute::State<ScoreT>& score = *a.slots[1];
  compute::State<uint32_t>& outdeg = *a.outdeg;
  while (result.iterations < max_iters && !(result.last_l1 < tolerance)) {
    DMG_RETURN_IF_ERROR(engine.VertexMap([&](VertexId v) {
      const uint32_t d = outdeg.Get(v);
      contrib.Set(v,
                  d == 0 ? ScoreT{0} : score.Get(v) / static_cast<ScoreT>(d));
    }));
    auto finish = [&](VertexId v, ScoreT sum) {
      const ScoreT next = a.Score(sum);
      const double change = std::fabs(double{next} - score.Get(v));
      score.Set(v, next);
      return change;
    };
    DMG_ASSIGN_OR_RETURN(result.last_l1,
                         GatherContributions(engine, contrib, finish));
    ++result.iterations;
    DMG_RETURN_IF_ERROR(engine.EndSuperstep());
  }
  return &score;
}

template <typename ScoreT>
absl::StatusOr<PageRankResult> Run(Engine& engine, int max_iters,
                                   double tolerance) {
  const ScoreT start = static_cast<ScoreT>(1.0 / engine.num_vertices());
  const Arrays<ScoreT> a{
      {&engine.NewState<ScoreT>("pagerank.contrib", 0,
                                compute::CacheHint::kPerEdge),
       &engine.NewState<ScoreT>("pagerank.score", start,
                                compute::CacheHint::kPerEdge)},
      &engine.NewState<uint32_t>("pagerank.outdeg", 0),
      static_cast<ScoreT>((1.0 - kDamping) / engine.num_vertices())};
  PageRankResult result;
  // The L1 change of the last iteration (none yet: go on).
  result.last_l1 = std::numeric_limits<double>::infinity();
  int32_t alternate = -1;  // chosen after the arrays are placed
  engine.Carry("pagerank.iterations", &result.iterations);
  engine.Carry("pagerank.l1", &result.last_l1);
  engine.Carry("pagerank.alternate", &alternate);
  DMG_ASSIGN_OR_RETURN(const bool resumed, engine.Resume());
  if (resumed && alternate < 0) {
    return absl::DataLossError("the resumed PageRank carried no state layout");
  }
  if (!resumed) {
    DMG_RETURN_IF_ERROR(engine.Degrees(Direction::kOut, *a.outdeg));
    // Every node the same way (each planned its own bound).
    const int32_t mine =
        a.slots[0]->resident() == a.slots[1]->resident() ? 1 : 0;
    DMG_ASSIGN_OR_RETURN(alternate, engine.AllReduce<compute::Min>(mine));
    if (alternate == 1) {
      compute::State<uint32_t>& outdeg = *a.outdeg;
      DMG_RETURN_IF_ERROR(engine.VertexMap([&](VertexId v) {
        a.slots[0]->Set(v, ToSlot(start, outdeg.Get(v)));
      }));
    }
  }
  DMG_ASSIGN_OR_RETURN(
      compute::State<ScoreT> * scores,
      alternate == 1
          ? Alternate<ScoreT>(engine, a, max_iters, tolerance, result)
          : KeepScores<ScoreT>(engine, a, max_iters, tolerance, result));
  DMG_ASSIGN_OR_RETURN(std::vector<ScoreT> out, engine.Result(*scores));
  if constexpr (std::is_same_v<ScoreT, double>) {
    result.scores = std::move(out);
  } else {
    result.scores.assign(out.begin(), out.end());
  }
  return result;
}

}  // namespace

absl::StatusOr<PageRankResult> PageRank(Engine& engine, int max_iters,
                                        double tolerance, Precision precision) {
  return precision == Precision::kFloat
             ? Run<float>(engine, max_iters, tolerance)
             : Run<double>(engine, max_iters, tolerance);
}

}  // namespace dmg::algorithms

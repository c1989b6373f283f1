// Single-source shortest paths with non-negative integer weights:
// delta-stepping (Meyer and Sanders; GAPBS's sssp.cc is its bucketed form).
//
// Pending vertices are those whose distance dropped since they last
// relaxed their out-arcs. Each superstep relaxes, with Min, the pending
// vertices below the bucket's bound; when none is left below it, the bound
// moves to the bucket of the least pending distance (a Reduce). A vertex
// is relaxed about once in its bucket instead of at every drop of its
// distance, as frontier Bellman-Ford did: weighted road-NY took 498
// supersteps of Bellman-Ford and takes ~790 here, each relaxing fewer
// vertices: 2.3x fewer bytes written and a tenth fewer read on 4 compute
// nodes (the other nodes' changed lines), one node several times faster
// (the history: Issue 36, thirteenth session). Unit weights keep
// Bellman-Ford: its levels are BFS's, which buckets of width 1 would
// repeat with an exchange more a level. Unreachable vertices keep
// kInfDistance ("inf" in outputs).
//
// Each node keeps its own pending vertices (a list and a bit each); they
// are not carried across a resume: a resumed job takes every reached
// vertex as pending, which relaxes some of them once more and leaves the
// distances exact.
#include <algorithm>
#include <vector>

#include "algorithms/algorithms.h"

namespace dmg::algorithms {

namespace {

// Frontier Bellman-Ford over unit weights: every vertex whose distance
// dropped relaxes its out-arcs in the next superstep (BFS's levels).
absl::StatusOr<std::vector<int64_t>> UnitBellmanFord(
    Engine& engine, compute::State<int64_t>& dist, VertexId source) {
  compute::Frontier frontier = engine.FrontierOf(source);
  engine.Carry("sssp.frontier", &frontier);
  DMG_ASSIGN_OR_RETURN(const bool resumed, engine.Resume());
  if (!resumed) {
    DMG_RETURN_IF_ERROR(
        engine.VertexMap(frontier, [&](VertexId v) { dist.Set(v, 0); }));
  }
  while (!frontier.empty()) {
    DMG_ASSIGN_OR_RETURN(
        frontier, engine.EdgeMap<compute::Min>(
                      frontier, Direction::kOut, compute::Mode::kAuto, dist,
                      [&](VertexId u, VertexId, store::Weight) {
                        return dist.Get(u) + 1;
                      },
                      compute::AllVertices()));
    DMG_RETURN_IF_ERROR(engine.EndSuperstep());
  }
  return engine.Result(dist);
}

// This node's pending vertices (all of them its own): a list, and a bit a
// vertex of its range (outside the cache bound, as a frontier's bitmap).
class Pending {
 public:
  explicit Pending(std::pair<VertexId, VertexId> range)
      : begin_(range.first), bits_((range.second - range.first + 63) / 64, 0) {}
  void Add(VertexId v) {
    if (!Has(v)) {
      Flip(v);
      list_.push_back(v);
    }
  }
  // Drops the vertices `drop` says were relaxed.
  template <typename Drop>
  void RemoveIf(Drop drop) {
    size_t kept = 0;
    for (VertexId v : list_) {
      if (drop(v)) {
        Flip(v);
      } else {
        list_[kept++] = v;
      }
    }
    list_.resize(kept);
  }
  const std::vector<VertexId>& list() const { return list_; }
  // (From any worker: nothing changes the set during an operation.)
  bool Has(VertexId v) const {
    const uint64_t i = v - begin_;
    return (bits_[i >> 6] >> (i & 63)) & 1;
  }

 private:
  void Flip(VertexId v) {
    const uint64_t i = v - begin_;
    bits_[i >> 6] ^= uint64_t{1} << (i & 63);
  }
  VertexId begin_;
  std::vector<uint64_t> bits_;
  std::vector<VertexId> list_;
};

}  // namespace

absl::StatusOr<std::vector<int64_t>> Sssp(Engine& engine, VertexId source,
                                          bool unit_weights) {
  DMG_RETURN_IF_ERROR(CheckSource(source, engine.num_vertices()));
  if (!engine.weighted() && !unit_weights) {
    return absl::InvalidArgumentError(
        "SSSP needs a weighted graph (.wel, DIMACS .gr, weighted .mtx) or "
        "--unit_weights");
  }
  if (engine.weighted() && !unit_weights && engine.min_weight() < 0) {
    return absl::InvalidArgumentError(
        "SSSP needs non-negative weights; this graph has weight " +
        std::to_string(engine.min_weight()));
  }
  auto& dist = engine.NewState<int64_t>("sssp.dist", kInfDistance);
  if (unit_weights) return UnitBellmanFord(engine, dist, source);
  // A bucket spans eight of the heaviest arcs: on road-NY (weights
  // 1-255) the least bytes on 4 compute nodes among widths of 256 to
  // 8,160 (narrower: more supersteps, each an exchange or three; wider:
  // more vertices relaxed more than once).
  const int64_t delta =
      8 * std::clamp<int64_t>(engine.max_weight(), 1, int64_t{1} << 24);
  int64_t bound = delta;  // pending vertices below it relax
  engine.Carry("sssp.bound", &bound);
  DMG_ASSIGN_OR_RETURN(const bool resumed, engine.Resume());
  Pending pending(engine.RangeOf(engine.compute_node()));
  if (!resumed) {
    const compute::Frontier start = engine.FrontierOf(source);
    DMG_RETURN_IF_ERROR(
        engine.VertexMap(start, [&](VertexId v) { dist.Set(v, 0); }));
    if (engine.Owns(source)) pending.Add(source);
  } else {
    DMG_ASSIGN_OR_RETURN(const compute::Frontier reached,
                         engine.VertexFilter([&](VertexId v) {
                           return dist.Get(v) != kInfDistance;
                         }));
    for (VertexId v : reached.vertices()) {
      if (engine.Owns(v)) pending.Add(v);
    }
  }
  for (;;) {
    compute::Frontier mine = engine.NewFrontier();
    for (VertexId v : pending.list()) mine.Add(0, v);
    mine.Seal();
    DMG_ASSIGN_OR_RETURN(const compute::Frontier active,
                         engine.VertexFilter(mine, [&](VertexId v) {
                           return dist.Get(v) < bound;
                         }));
    if (active.empty()) {
      // The next bucket: the least pending distance's, on every node.
      DMG_ASSIGN_OR_RETURN(const int64_t least,
                           engine.Reduce<compute::Min>([&](VertexId v) {
                             return pending.Has(v) ? dist.Get(v) : kInfDistance;
                           }));
      if (least == kInfDistance) break;
      bound = (least / delta + 1) * delta;
      continue;
    }
    // Relaxed now: pending again only if its distance drops again (next).
    pending.RemoveIf([&](VertexId v) { return active.Contains(v); });
    DMG_ASSIGN_OR_RETURN(
        const compute::Frontier next,
        engine.EdgeMap<compute::Min>(
            active, Direction::kOut, compute::Mode::kAuto, dist,
            [&](VertexId u, VertexId, store::Weight w) {
              return dist.Get(u) + w;
            },
            compute::AllVertices()));
    for (VertexId v : next.vertices()) {
      if (engine.Owns(v)) pending.Add(v);
    }
    DMG_RETURN_IF_ERROR(engine.EndSuperstep());
  }
  return engine.Result(dist);
}

}  // namespace dmg::algorithms

// Weakly connected components by Afforest (Sutton, Ben-Nun and Barak,
// IPDPS'18; GAPBS's cc.cc): a union-find forest in `comp`, where every
// vertex points at a vertex of its component with a smaller or equal id and
// a root points at itself.
//  1. Sample: every vertex links with its first kSampled out-neighbours;
//     then every path is compressed to its root. On graphs with a giant
//     component this already finds most of it, reading each adjacency once.
//  2. Skip the largest: the most frequent root among kSamples random
//     vertices is (very likely) the giant component's, c. Only vertices not
//     in c link with the rest of their neighbours: out-neighbours past the
//     sampled ones, and, when the graph is directed, all in-neighbours
//     (arcs count as undirected). Units whose vertices are all in c are not
//     read at all.
//  3. Compress again: every vertex points at its root.
// Why that is every arc: an arc (u, x) was linked in step 1, or one end is
// not in c and links it in step 2 (from x's side, u is an in-neighbour, or
// an out-neighbour on a symmetric graph), or both ends are in c already.
// A link hooks the larger of two roots under the smaller, with a
// compare-and-swap that fails if that root was hooked meanwhile (then it
// retries from the new roots), so the root of a component is its smallest
// vertex: after step 3 every vertex holds the smallest id of its
// component, the same output as label propagation (cc_lp.cc) and the
// reference, whatever the thread interleaving.
//
// Links write any vertex's parent, which another compute node would own:
// on several nodes `cc` links only within each node's range and carries
// labels across the cut (cc_forest.cc). Each phase ends a superstep, so a
// resumed job redoes at most one phase (a link repeated is a no-op).
#include <algorithm>
#include <random>
#include <unordered_map>

#include "algorithms/algorithms.h"

namespace dmg::algorithms {

namespace {

constexpr uint32_t kSampled = 2;  // out-neighbours linked in phase 1
constexpr int kSamples = 1024;    // vertices sampled for c
constexpr uint64_t kSampleSeed = 27491095;

using Comp = compute::State<VertexId>;

// Puts u and v in one tree (util.h).
void Link(Comp& comp, VertexId u, VertexId v) { HookRoots(comp, u, v); }

// Points every vertex at its root. Walkers halve the paths they climb
// (each vertex on the way skips to its grandparent, still an ancestor), so
// a deep tree (a road network's sampled links form long chains) is walked
// in full at most once, not once per vertex below it.
absl::Status Compress(Engine& engine, Comp& comp) {
  return engine.VertexMap([&](VertexId v) {
    const VertexId parent = comp.Get(v);
    VertexId x = v, p = parent;
    for (VertexId g = comp.Get(p); g != p && !comp.failed();
         g = comp.Get(p)) {
      if (x != v) comp.Set(x, g);
      x = p;
      p = g;
    }
    if (p != parent) comp.Set(v, p);  // (an unchanged page stays clean)
  });
}

// The root most of kSamples seeded random vertices have: after a
// compress, the giant component's (if there is one).
VertexId MostFrequentRoot(Engine& engine, Comp& comp) {
  std::mt19937_64 rng(kSampleSeed);
  std::uniform_int_distribution<uint64_t> pick(0, engine.num_vertices() - 1);
  std::unordered_map<VertexId, int> count;
  VertexId best = 0;
  int best_count = 0;
  for (int i = 0; i < kSamples; ++i) {
    const VertexId r = comp.Get(static_cast<VertexId>(pick(rng)));
    const int c = ++count[r];
    if (c > best_count) best = r, best_count = c;
  }
  return best;
}

}  // namespace

absl::StatusOr<std::vector<VertexId>> ConnectedComponents(Engine& engine) {
  if (engine.compute_nodes() > 1) return ConnectedComponentsOnNodes(engine);
  // Read at random (links climb trees): the array to keep local.
  auto& comp =
      engine.NewState<VertexId>("cc.comp", 0, compute::CacheHint::kPerEdge);
  int phase = 0;  // phases done
  engine.Carry("cc.phase", &phase);
  DMG_ASSIGN_OR_RETURN(const bool resumed, engine.Resume());
  (void)resumed;  // the phase says where to go on
  if (engine.num_vertices() == 0) phase = 2;
  if (phase == 0) {
    DMG_RETURN_IF_ERROR(engine.VertexMap([&](VertexId v) { comp.Set(v, v); }));
    DMG_RETURN_IF_ERROR(engine.ForEachAdjacency(
        Direction::kOut, nullptr,
        [&](int, VertexId u, std::span<const VertexId> out) {
          const size_t k = std::min<size_t>(kSampled, out.size());
          for (size_t i = 0; i < k; ++i) Link(comp, u, out[i]);
        }));
    DMG_RETURN_IF_ERROR(Compress(engine, comp));
    phase = 1;
    DMG_RETURN_IF_ERROR(engine.EndSuperstep());
  }
  if (phase == 1) {
    const VertexId c = MostFrequentRoot(engine, comp);
    const std::function<bool(VertexId, VertexId)> outside_c =
        [&](VertexId begin, VertexId end) {
          for (VertexId v = begin; v < end; ++v) {
            if (comp.Get(v) != c) return true;
          }
          return false;
        };
    DMG_RETURN_IF_ERROR(engine.ForEachAdjacency(
        Direction::kOut, &outside_c,
        [&](int, VertexId u, std::span<const VertexId> out) {
          if (comp.Get(u) == c) return;
          for (size_t i = kSampled; i < out.size(); ++i) Link(comp, u, out[i]);
        }));
    if (!engine.symmetric()) {
      DMG_RETURN_IF_ERROR(engine.ForEachAdjacency(
          Direction::kIn, &outside_c,
          [&](int, VertexId u, std::span<const VertexId> in) {
            if (comp.Get(u) == c) return;
            for (VertexId x : in) Link(comp, u, x);
          }));
    }
    DMG_RETURN_IF_ERROR(Compress(engine, comp));
    phase = 2;
    DMG_RETURN_IF_ERROR(engine.EndSuperstep());
  }
  return engine.Result(comp);
}

}  // namespace dmg::algorithms

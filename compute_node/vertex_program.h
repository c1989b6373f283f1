// The vertex-program API: everything an algorithm in algorithms/ uses, in
// the spirit of Ligra's edgeMap/vertexMap and GAPBS's kernels. A program
// never sees blocks, work units, pieces of split vertices, resident or
// paged state, or the transport.
//
//   State<T>& s = engine.NewState<T>(name, initial, hint)
//       a vertex-property array on the memory nodes, double-buffered by
//       superstep. The hint says how the program reads it (CacheHint:
//       per edge, per vertex, rarely); the cache keeps arrays local in that
//       order. Usable from the next engine operation on. s.Get(v),
//       s.Set(v, x), s.Apply<Op>(v, x); s.reader() for read-only hot loops.
//   VertexMap(fn(v)) / VertexMap(subset, fn(v))
//       fn for every vertex (or every vertex of a frontier), in parallel.
//   VertexFilter(keep(v)) / VertexFilter(subset, keep(v)) -> Frontier
//       the vertices (of a frontier) keep accepts.
//   Reduce<Add|Min|Max>(fn(v)) -> value
//       fn over every vertex, combined in a fixed order: the same result
//       for any thread count, cache size or number of nodes.
//   EdgeMap<Op>(frontier, along, mode, target, value(u, v, w), cond(v))
//       -> next frontier. For every arc u->v (along kOut; v->u for kIn)
//       with u in the frontier and cond(v) true, combines value(u, v, w)
//       into target[v] with the named update Op (Add, Min, Claim, Or; see
//       updates.h). Returns the vertices whose target changed. Mode kPush
//       reads the frontier's adjacency and applies updates atomically;
//       kPull reads the candidates' adjacency, folds each one's updates
//       locally and applies them once (Claim stops at the first); kAuto
//       lets the engine choose per call. cond must not depend on what this
//       EdgeMap changes. w is the arc's weight (1 if unweighted).
//   Gather<Op>(neighbours, value(u, v, w), finish(v, combined)) -> sum
//       for every vertex v, value over all its neighbours u in direction
//       `neighbours` (kIn: in-neighbours), combined with Op in adjacency
//       order (Op's identity when none), then finish(v, combined); returns
//       the sum of finish's results, added in a fixed order.
//   Degrees(d, state)        adds every vertex's degree into state (READs
//                            block headers only)
//   ForEachNeighbourhood(d, pick, visit)   adjacency of other vertices
//   EndSuperstep()           commits every state array and passes the
//                            barrier; the next operation opens the next one
//   Result(state)            the final version, read back from memory
// Whole vertices: every callback sees a vertex's whole adjacency or its
// combined value, however the store split it over blocks.
#ifndef DMG_COMPUTE_NODE_VERTEX_PROGRAM_H_
#define DMG_COMPUTE_NODE_VERTEX_PROGRAM_H_

#include <type_traits>
#include <utility>
#include <vector>

#include "common/status_macros.h"
#include "compute_node/engine.h"

namespace dmg::compute {

// cond for EdgeMap that accepts every vertex.
struct AllVertices {
  bool operator()(VertexId) const { return true; }
};

namespace internal {
// Vertices per chunk of a VertexMap / Reduce (fixed: the reduction order
// must not depend on threads).
inline constexpr uint64_t kVertexGrain = 4096;

inline Direction Opposite(Direction d) {
  return d == Direction::kOut ? Direction::kIn : Direction::kOut;
}
inline Weight WeightAt(std::span<const Weight> w, size_t k) {
  return w.empty() ? Weight{1} : w[k];
}
}  // namespace internal

template <typename T>
State<T>& Engine::NewState(const std::string& name, T initial, CacheHint hint) {
  auto array = std::make_unique<StateArray<T>>(state_context(), name,
                                               num_vertices(), hint, initial);
  State<T>& state = *array;
  states_.push_back(std::move(array));
  return state;
}

template <typename Fn>
absl::Status Engine::VertexMap(Fn fn) {
  DMG_RETURN_IF_ERROR(Prepare());
  return scheduler_.ForRanges(num_vertices(), internal::kVertexGrain,
                              [&](int, uint64_t begin, uint64_t end) {
                                for (uint64_t v = begin; v < end; ++v)
                                  fn(static_cast<VertexId>(v));
                                return absl::OkStatus();
                              });
}

template <typename Fn>
absl::Status Engine::VertexMap(const Frontier& subset, Fn fn) {
  DMG_RETURN_IF_ERROR(Prepare());
  std::span<const VertexId> vs = subset.vertices();
  return scheduler_.ForRanges(vs.size(), internal::kVertexGrain,
                              [&](int, uint64_t begin, uint64_t end) {
                                for (uint64_t k = begin; k < end; ++k) {
                                  fn(vs[k]);
                                }
                                return absl::OkStatus();
                              });
}

template <typename Fn>
absl::StatusOr<Frontier> Engine::VertexFilter(Fn keep) {
  DMG_RETURN_IF_ERROR(Prepare());
  Frontier out = NewFrontier();
  DMG_RETURN_IF_ERROR(
      scheduler_.ForRanges(num_vertices(), internal::kVertexGrain,
                           [&](int w, uint64_t begin, uint64_t end) {
                             for (uint64_t v = begin; v < end; ++v) {
                               if (keep(static_cast<VertexId>(v))) {
                                 out.Add(w, static_cast<VertexId>(v));
                               }
                             }
                             return absl::OkStatus();
                           }));
  out.Seal();
  return out;
}

template <typename Fn>
absl::StatusOr<Frontier> Engine::VertexFilter(const Frontier& subset, Fn keep) {
  DMG_RETURN_IF_ERROR(Prepare());
  Frontier out = NewFrontier();
  std::span<const VertexId> vs = subset.vertices();
  DMG_RETURN_IF_ERROR(
      scheduler_.ForRanges(vs.size(), internal::kVertexGrain,
                           [&](int w, uint64_t begin, uint64_t end) {
                             for (uint64_t k = begin; k < end; ++k) {
                               if (keep(vs[k])) out.Add(w, vs[k]);
                             }
                             return absl::OkStatus();
                           }));
  out.Seal();
  return out;
}

template <typename Op, typename Fn>
auto Engine::Reduce(Fn fn) -> absl::StatusOr<decltype(fn(VertexId{}))> {
  using R = decltype(fn(VertexId{}));
  DMG_RETURN_IF_ERROR(Prepare());
  const uint64_t n = num_vertices();
  // One partial per fixed chunk, combined in chunk order.
  std::vector<R> partial(
      (n + internal::kVertexGrain - 1) / internal::kVertexGrain,
      Op::template Identity<R>());
  DMG_RETURN_IF_ERROR(scheduler_.ForRanges(
      n, internal::kVertexGrain, [&](int, uint64_t begin, uint64_t end) {
        R acc = Op::template Identity<R>();
        for (uint64_t v = begin; v < end; ++v) {
          acc = Op::Combine(acc, fn(static_cast<VertexId>(v)));
        }
        partial[begin / internal::kVertexGrain] = acc;
        return absl::OkStatus();
      }));
  R total = Op::template Identity<R>();
  for (const R& x : partial) total = Op::Combine(total, x);
  return total;
}

template <typename Op, typename T, typename Value, typename Cond>
absl::StatusOr<Frontier> Engine::EdgeMap(const Frontier& frontier,
                                         Direction along, Mode mode,
                                         State<T>& target, Value value,
                                         Cond cond) {
  DMG_RETURN_IF_ERROR(Prepare());
  const T unset = target.initial();
  // A target worth updating: cond holds, and (Claim) it is still unset.
  auto candidate = [&](VertexId v) {
    if constexpr (Op::kFirstWins) {
      if (target.Get(v) != unset) return false;
    }
    return cond(v);
  };
  Frontier next = NewFrontier();
  const bool pull = ChoosePull(mode, frontier, along);
  if (!pull) {
    DMG_RETURN_IF_ERROR(ScanFrontier(
        along, frontier,
        [&](VertexId u, std::span<const VertexId> out,
            std::span<const Weight> weights) {
          const int w = WorkerPool::current();
          for (size_t k = 0; k < out.size(); ++k) {
            const VertexId v = out[k];
            if (!candidate(v)) continue;
            if (target.template Apply<Op>(
                    w, v, value(u, v, internal::WeightAt(weights, k)))) {
              next.Add(w, v);
            }
          }
        }));
    next.Seal();
    return next;
  }
  // Pull: each candidate folds the updates of its frontier neighbours in
  // adjacency order and applies them once. A split vertex's partial fold
  // waits in its worker's slot for the next piece.
  struct alignas(64) Pending {
    T acc{};
    bool found = false;
  };
  std::vector<Pending> pending(threads());
  const RangeFn want = [&](VertexId begin, VertexId end) {
    for (VertexId v = begin; v < end; ++v) {
      if (candidate(v)) return true;
    }
    return false;
  };
  DMG_RETURN_IF_ERROR(ScanBlocks(
      internal::Opposite(along), &want,
      [&](int w, uint32_t, const BlockView& b, bool continues) {
        Pending& p = pending[w];
        // A local copy: its captures (a state reader) stay in registers
        // across the edge loop, which calls out only on paged reads.
        const Value value_of = value;
        const uint32_t count = b.vertex_count();
        for (uint32_t i = 0; i < count; ++i) {
          const VertexId v = b.first_vertex() + i;
          if (!candidate(v)) continue;
          T acc = p.acc;
          bool found = p.found;
          if (!(Op::kFirstWins && found)) {
            std::span<const VertexId> in = b.targets(v);
            std::span<const Weight> weights =
                b.weighted() ? b.weights(v) : std::span<const Weight>();
            for (size_t k = 0; k < in.size(); ++k) {
              const VertexId u = in[k];
              if (!frontier.Contains(u)) continue;
              const T x = value_of(u, v, internal::WeightAt(weights, k));
              acc = found ? Op::Combine(acc, x) : x;
              found = true;
              if constexpr (Op::kFirstWins) break;
            }
          }
          if (continues && i + 1 == count) {
            p = {acc, found};
            continue;
          }
          p.found = false;
          if (found && target.template Apply<Op>(w, v, acc)) next.Add(w, v);
        }
      }));
  next.Seal();
  return next;
}

template <typename Op, typename Value, typename FinishFn>
auto Engine::Gather(Direction neighbours, Value value, FinishFn finish)
    -> absl::StatusOr<decltype(finish(VertexId{}, value(VertexId{}, VertexId{},
                                                        Weight{})))> {
  using T = decltype(value(VertexId{}, VertexId{}, Weight{}));
  using R = decltype(finish(VertexId{}, T{}));
  DMG_RETURN_IF_ERROR(Prepare());
  NoteEdgeOp("pull", num_vertices());
  // finish's results are summed per block (the block of the vertex's last
  // piece, scanned by one worker in vertex order), then in block order.
  std::vector<R> partial(graph_.directory(neighbours).size(), R{});
  struct alignas(64) Pending {
    T acc{};
    bool open = false;
  };
  std::vector<Pending> pending(threads());
  DMG_RETURN_IF_ERROR(ScanBlocks(
      neighbours, nullptr,
      [&](int w, uint32_t entry, const BlockView& b, bool continues) {
        Pending& p = pending[w];
        // A local copy: its captures (a state reader) stay in registers
        // across the edge loop, which calls out only on paged reads.
        const Value value_of = value;
        const uint32_t count = b.vertex_count();
        R sum{};
        for (uint32_t i = 0; i < count; ++i) {
          const VertexId v = b.first_vertex() + i;
          T acc = p.open ? p.acc : Op::template Identity<T>();
          std::span<const VertexId> in = b.targets(v);
          if (b.weighted()) {
            std::span<const Weight> weights = b.weights(v);
            for (size_t k = 0; k < in.size(); ++k) {
              acc = Op::Combine(acc, value_of(in[k], v, weights[k]));
            }
          } else {
            for (VertexId u : in) acc = Op::Combine(acc, value_of(u, v, 1));
          }
          if (continues && i + 1 == count) {
            p = {acc, true};
            continue;
          }
          p.open = false;
          sum += finish(v, acc);
        }
        partial[entry] = sum;
      }));
  R total{};
  for (const R& x : partial) total += x;
  return total;
}

template <typename T>
absl::StatusOr<std::vector<T>> Engine::Result(State<T>& state) {
  if (open_) DMG_RETURN_IF_ERROR(EndSuperstep());
  return state.ReadResult(superstep_);
}

}  // namespace dmg::compute

#endif  // DMG_COMPUTE_NODE_VERTEX_PROGRAM_H_

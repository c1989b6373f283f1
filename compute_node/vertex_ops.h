// The vertex program's state and per-vertex operations (vertex_program.h
// is the API): NewState, VertexMap, VertexFilter, Reduce, AllReduce, Result.
#ifndef DMG_COMPUTE_NODE_VERTEX_OPS_H_
#define DMG_COMPUTE_NODE_VERTEX_OPS_H_

#include <algorithm>
#include <atomic>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "compute_node/engine.h"
#include "compute_node/wire_codec.h"

namespace dmg::compute {

// cond for EdgeMap that accepts every vertex.
struct AllVertices {
  bool operator()(VertexId) const { return true; }
};

namespace internal {
// Vertices per chunk of a VertexMap / Reduce (fixed: the reduction order
// must not depend on threads).
inline constexpr uint64_t kVertexGrain = 4096;
// Gather sums a list of at least this many values in four chains.
inline constexpr size_t kGatherLanesFrom = 8;

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

// With several compute nodes, every operation below is collective: each
// node does the part in its own range (stage 1 of the workload manager),
// then publishes its state changes and takes in the others' (Collective),
// so that the next operation reads the same state on every node.

template <typename Fn>
absl::Status Engine::VertexMap(Fn fn) {
  DMG_RETURN_IF_ERROR(Prepare());
  NoteVertexVisits(own_end_ - own_begin_);
  const uint64_t base = own_begin_;
  DMG_RETURN_IF_ERROR(scheduler_.ForRanges(
      own_end_ - own_begin_, internal::kVertexGrain,
      [&](int, uint64_t begin, uint64_t end) {
        for (uint64_t v = base + begin; v < base + end; ++v) {
          fn(static_cast<VertexId>(v));
        }
        return absl::OkStatus();
      }));
  return Collective("").status();
}

template <typename Fn>
absl::Status Engine::VertexMap(const Frontier& subset, Fn fn) {
  DMG_RETURN_IF_ERROR(Prepare());
  std::span<const VertexId> vs = subset.vertices();
  NoteVertexVisits(vs.size());
  DMG_RETURN_IF_ERROR(
      scheduler_.ForRanges(vs.size(), internal::kVertexGrain,
                           [&](int, uint64_t begin, uint64_t end) {
                             for (uint64_t k = begin; k < end; ++k) {
                               if (Owns(vs[k])) fn(vs[k]);
                             }
                             return absl::OkStatus();
                           }));
  return Collective("").status();
}

template <typename Fn>
absl::StatusOr<Frontier> Engine::VertexFilter(Fn keep) {
  DMG_RETURN_IF_ERROR(Prepare());
  NoteVertexVisits(own_end_ - own_begin_);
  Frontier out = NewFrontier();
  const uint64_t base = own_begin_;
  DMG_RETURN_IF_ERROR(scheduler_.ForRanges(
      own_end_ - own_begin_, internal::kVertexGrain,
      [&](int w, uint64_t begin, uint64_t end) {
        for (uint64_t v = base + begin; v < base + end; ++v) {
          if (keep(static_cast<VertexId>(v))) {
            out.Add(w, static_cast<VertexId>(v));
          }
        }
        return absl::OkStatus();
      }));
  out.Seal();
  return MergeFrontier(std::move(out));
}

template <typename Fn>
absl::StatusOr<Frontier> Engine::VertexFilter(const Frontier& subset, Fn keep) {
  DMG_RETURN_IF_ERROR(Prepare());
  Frontier out = NewFrontier();
  std::span<const VertexId> vs = subset.vertices();
  NoteVertexVisits(vs.size());
  DMG_RETURN_IF_ERROR(
      scheduler_.ForRanges(vs.size(), internal::kVertexGrain,
                           [&](int w, uint64_t begin, uint64_t end) {
                             for (uint64_t k = begin; k < end; ++k) {
                               if (Owns(vs[k]) && keep(vs[k])) {
                                 out.Add(w, vs[k]);
                               }
                             }
                             return absl::OkStatus();
                           }));
  out.Seal();
  return MergeFrontier(std::move(out));
}

template <typename Op, typename Fn>
auto Engine::Reduce(Fn fn) -> absl::StatusOr<decltype(fn(VertexId{}))> {
  using R = decltype(fn(VertexId{}));
  DMG_RETURN_IF_ERROR(Prepare());
  NoteVertexVisits(own_end_ - own_begin_);
  // One partial per fixed chunk, combined in chunk order. Ranges start on
  // chunk boundaries, so each chunk is one node's.
  const uint64_t base = own_begin_;
  std::vector<R> partial((own_end_ - own_begin_ + internal::kVertexGrain - 1) /
                             internal::kVertexGrain,
                         Op::template Identity<R>());
  DMG_RETURN_IF_ERROR(scheduler_.ForRanges(
      own_end_ - own_begin_, internal::kVertexGrain,
      [&](int, uint64_t begin, uint64_t end) {
        R acc = Op::template Identity<R>();
        for (uint64_t v = base + begin; v < base + end; ++v) {
          acc = Op::Combine(acc, fn(static_cast<VertexId>(v)));
        }
        partial[begin / internal::kVertexGrain] = acc;
        return absl::OkStatus();
      }));
  R total = Op::template Identity<R>();
  if (compute_nodes() == 1) {  // the partials are all here
    for (const R& x : partial) total = Op::Combine(total, x);
    return total;
  }
  MessageWriter out;
  out.PutArray<R>(partial);
  DMG_ASSIGN_OR_RETURN(std::vector<Cluster::Received> all,
                       Collective(out.Take()));
  for (int k = 0; k < compute_nodes(); ++k) {
    MessageReader in(all[k].common);
    std::vector<R> theirs;
    if (!in.GetArray<R>(&theirs)) {
      return Fail(absl::DataLossError("malformed partial reduction"));
    }
    for (const R& x : theirs) total = Op::Combine(total, x);
  }
  return total;
}

template <typename Op, typename T>
absl::StatusOr<T> Engine::AllReduce(T mine) {
  if (compute_nodes() == 1) return mine;
  MessageWriter out;
  out.Put(mine);
  DMG_ASSIGN_OR_RETURN(std::vector<Cluster::Received> all,
                       Collective(out.Take()));
  T total = Op::template Identity<T>();
  for (int k = 0; k < compute_nodes(); ++k) {
    MessageReader in(all[k].common);
    T x;
    if (!in.Get(&x)) return Fail(absl::DataLossError("malformed AllReduce"));
    total = Op::Combine(total, x);
  }
  return total;
}

template <typename T>
absl::StatusOr<std::vector<T>> Engine::Result(State<T>& state) {
  if (open_) DMG_RETURN_IF_ERROR(EndSuperstep());
  // Supersteps since the last checkpoint: their changes become a version
  // (not recorded: the job is done).
  if (version_superstep_ != superstep_) DMG_RETURN_IF_ERROR(CommitVersion());
  StopRecording();  // the program is done with what it carried
  // Node 0 reports the job: with whole_result it READs the others' ranges
  // too.
  if (ResultSplit() && !(options_.whole_result && compute_node() == 0)) {
    return state.ReadResult(version_, own_begin_, own_end_);
  }
  return state.ReadResult(version_);
}

}  // namespace dmg::compute

#endif  // DMG_COMPUTE_NODE_VERTEX_OPS_H_

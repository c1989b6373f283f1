// Gather (vertex_program.h is the API): every vertex's neighbours' values,
// combined in a fixed order.
#ifndef DMG_COMPUTE_NODE_GATHER_H_
#define DMG_COMPUTE_NODE_GATHER_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <span>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "compute_node/engine.h"
#include "compute_node/vertex_ops.h"
#include "compute_node/wire_codec.h"

namespace dmg::compute {

namespace internal {
// acc combined with value(u, v, w) over v's in-edges (u, w) in block b, in
// the block's order. Four independent chains on long unweighted lists: one
// chain is bound by the latency of Combine (a dependent add per edge), four
// by the loads. Which edge goes to which chain depends only on the block's
// adjacency, so results stay the same for any thread count, cache or
// transport.
template <typename Op, typename Value, typename T>
[[gnu::always_inline]] inline T FoldInEdges(const BlockView& b, VertexId v,
                                            const Value& value, T acc) {
  std::span<const VertexId> in = b.targets(v);
  if (b.weighted()) {
    std::span<const Weight> weights = b.weights(v);
    for (size_t k = 0; k < in.size(); ++k) {
      acc = Op::Combine(acc, value(in[k], v, weights[k]));
    }
    return acc;
  }
  size_t k = 0;
  if (in.size() >= kGatherLanesFrom) {
    T a0 = Op::template Identity<T>(), a1 = a0, a2 = a0, a3 = a0;
    for (; k + 4 <= in.size(); k += 4) {
      a0 = Op::Combine(a0, value(in[k], v, 1));
      a1 = Op::Combine(a1, value(in[k + 1], v, 1));
      a2 = Op::Combine(a2, value(in[k + 2], v, 1));
      a3 = Op::Combine(a3, value(in[k + 3], v, 1));
    }
    acc =
        Op::Combine(acc, Op::Combine(Op::Combine(a0, a1), Op::Combine(a2, a3)));
  }
  for (; k < in.size(); ++k) acc = Op::Combine(acc, value(in[k], v, 1));
  return acc;
}
}  // namespace internal

// Pull (every vertex reads its neighbours' values, in block order: the
// fixed order the API promises) or push (every vertex sends its value to
// the vertices it is a neighbour of), as the coordinator estimates
// cheaper (ChooseGatherPull; a push pays a costlier visit per arc, the
// combining and, with several nodes, the exchange of the updates), or as
// --direction forces.
template <typename Op, typename Value, typename FinishFn>
auto Engine::Gather(Direction neighbours, Value value, FinishFn finish)
    -> absl::StatusOr<decltype(finish(VertexId{}, value(VertexId{}, VertexId{},
                                                        Weight{})))> {
  using T = decltype(value(VertexId{}, VertexId{}, Weight{}));
  DMG_RETURN_IF_ERROR(Prepare());
  if (!ChooseGatherPull(neighbours, sizeof(T))) {
    return PushGather<Op>(neighbours, value, finish);
  }
  return PullGather<Op>(neighbours, value, finish);
}

template <typename Op, typename Value, typename FinishFn>
auto Engine::PullGather(
    Direction neighbours, Value& value, FinishFn& finish,
    const GivenSums<std::invoke_result_t<Value&, VertexId, VertexId, Weight>>*
        given)
    -> absl::StatusOr<decltype(finish(VertexId{}, value(VertexId{}, VertexId{},
                                                        Weight{})))> {
  using T = decltype(value(VertexId{}, VertexId{}, Weight{}));
  using R = decltype(finish(VertexId{}, T{}));
  DMG_RETURN_IF_ERROR(ArmSourceReads(neighbours, /*whole=*/given == nullptr));
  // With given sums (a GPU share), the CPU threads gather from cpu_from on
  // and READ only the units holding such vertices (>=: a unit that ends in
  // a split vertex names it as its end).
  const VertexId cpu_from =
      given == nullptr ? own_begin_
                       : static_cast<VertexId>(own_begin_ + given->sums.size());
  const RangeFn cpu_part = [cpu_from](VertexId, VertexId end) {
    return end >= cpu_from;
  };
  // finish's results are summed per block (the block of the vertex's last
  // piece, scanned by one worker in vertex order), then in block order.
  std::vector<R> partial(graph_.directory(Stored(neighbours)).size(), R{});
  struct alignas(64) Pending {
    T acc{};
    bool open = false;
  };
  std::vector<Pending> pending(threads());
  DMG_RETURN_IF_ERROR(ScanBlocks(
      neighbours, given == nullptr ? nullptr : &cpu_part,
      [&](int w, uint32_t entry, const BlockView& b, bool continues) {
        Pending& p = pending[w];
        const uint32_t count = b.vertex_count();
        // A unit taken from another node (stage 2): its vertices are that
        // node's; their combined values go to it, which finishes them.
        // (Plain variables: clang 14 lets no lambda capture a structured
        // binding.)
        const std::pair<uint32_t, uint32_t> range = WorkIndices(w, b);
        const uint32_t hi = range.second;
        uint32_t lo = range.first;
        if (given != nullptr && b.first_vertex() + lo < cpu_from) {
          // The given sums' vertices (one node: no unit is taken).
          lo = static_cast<uint32_t>(
              std::min<uint64_t>(hi, cpu_from - b.first_vertex()));
        }
        // The vertex loop is compiled once for each case, so that a
        // node's own blocks (all of them but in a shared scan) pay no test
        // per vertex (road-NY: ~3 arcs a vertex).
        auto fold = [&](auto taking_tag) {
          constexpr bool kTaking = decltype(taking_tag)::value;
          // A local copy: its captures (a state reader) stay in registers
          // across the edge loop, which calls out only on paged reads (a
          // capture by reference reloaded them at every edge: kron:20
          // PageRank on two one-thread nodes, 5%, 20% slower a step).
          const Value value_of = value;
          R sum{};
          for (uint32_t i = lo; i < hi; ++i) {
            const VertexId v = b.first_vertex() + i;
            const T acc = internal::FoldInEdges<Op>(
                b, v, value_of, p.open ? p.acc : Op::template Identity<T>());
            if (continues && i + 1 == count) {
              p = {acc, true};
              continue;
            }
            p.open = false;
            if constexpr (kTaking) {
              if constexpr (kGatherMaySteal<T>) ToOutbox<Op, T>(w, v, acc);
            } else {
              sum += finish(v, acc);
            }
          }
          if constexpr (!kTaking) partial[entry] = sum;
        };
        if (taking_[w] != 0) {
          fold(std::true_type{});
        } else {
          fold(std::false_type{});
        }
      },
      /*may_steal=*/kGatherMaySteal<T>, &SuperstepStats::gather_visits));
  if constexpr (kGatherMaySteal<T>) {
    if (scan_shared_) {
      DMG_RETURN_IF_ERROR(
          (FinishTakenGather<Op, T>(neighbours, finish, partial)));
    }
  }
  if (given != nullptr) {
    DMG_RETURN_IF_ERROR(FinishGivenSums(neighbours, *given, finish, partial));
  }
  return SumBlockPartials(neighbours, partial);
}

template <typename R>
absl::StatusOr<R> Engine::SumBlockPartials(Direction neighbours,
                                           std::vector<R>& partial) {
  R total{};
  if (compute_nodes() == 1) {  // the partials are all here
    for (const R& x : partial) total += x;
    return total;
  }
  // Each node posts the partials of its blocks; a block across a range
  // boundary has one from each side, added in node order.
  const std::span<const Unit> units = own_units_[static_cast<int>(neighbours)];
  const uint32_t first = units.empty() ? 0 : units.front().first;
  const uint32_t last = units.empty() ? 0 : units.back().last;
  MessageWriter out;
  out.Put<uint32_t>(first);
  out.PutArray<R>(std::span<const R>(partial.data() + first, last - first));
  DMG_ASSIGN_OR_RETURN(std::vector<Cluster::Received> all,
                       Collective(out.Take()));
  std::fill(partial.begin(), partial.end(), R{});
  for (int k = 0; k < compute_nodes(); ++k) {
    MessageReader in(all[k].common);
    uint32_t at = 0;
    std::vector<R> theirs;
    if (!in.Get(&at) || !in.GetArray<R>(&theirs) ||
        theirs.size() > partial.size() - std::min<size_t>(at, partial.size())) {
      return Fail(absl::DataLossError("malformed partial sums"));
    }
    for (size_t j = 0; j < theirs.size(); ++j) partial[at + j] += theirs[j];
  }
  for (const R& x : partial) total += x;
  return total;
}

// The end of a pull Gather whose units other nodes took: their combined
// values for this node's vertices arrive (one per vertex: each unit had one
// taker), and this node finishes them, summing finish's results per block
// in vertex order, as its own scan would have (the same sums, bit for
// bit: a block's vertices in this node's range are all in one unit).
template <typename Op, typename T, typename FinishFn, typename R>
absl::Status Engine::FinishTakenGather(Direction neighbours, FinishFn& finish,
                                       std::vector<R>& partial) {
  using Updates = std::vector<RemoteUpdate<T>>;
  DMG_ASSIGN_OR_RETURN(Updates inbox, (ExchangeUpdates<Op, T>()));
  std::sort(inbox.begin(), inbox.end(),
            [](const RemoteUpdate<T>& a, const RemoteUpdate<T>& b) {
              return a.v < b.v;
            });
  std::span<const DirectoryEntry> dir = graph_.directory(Stored(neighbours));
  // The block of v's last piece: the last whose first vertex is at most v.
  size_t e = 0;
  bool known = false;
  auto last_piece = [&](VertexId v) {
    const bool holds = known && dir[e].first_vertex <= v &&
                       v < dir[e].first_vertex + dir[e].vertex_count &&
                       !(e + 1 < dir.size() && dir[e + 1].first_vertex <= v);
    if (!holds) e = graph_.FindBlocks(Stored(neighbours), v).second - 1;
    known = true;
    return e;
  };
  NoteVertexVisits(inbox.size());
  for (size_t i = 0; i < inbox.size();) {
    const size_t entry = last_piece(inbox[i].v);
    R sum{};
    for (; i < inbox.size() && last_piece(inbox[i].v) == entry; ++i) {
      sum += finish(inbox[i].v, inbox[i].x);
    }
    partial[entry] = sum;
  }
  return absl::OkStatus();
}

// The given sums' vertices, finished in grain-sized chunks on the workers;
// each chunk's results are summed per block of the vertex's last piece (as
// PullGather's scan sums them) and added into `partial` in chunk order.
template <typename T, typename FinishFn, typename R>
absl::Status Engine::FinishGivenSums(Direction neighbours,
                                     const GivenSums<T>& given,
                                     FinishFn& finish,
                                     std::vector<R>& partial) {
  DMG_RETURN_IF_ERROR(given.ready());
  std::span<const DirectoryEntry> dir = graph_.directory(Stored(neighbours));
  const uint64_t n = given.sums.size();
  const uint64_t grain = internal::kVertexGrain;
  // Per chunk: (entry, sum) runs.
  std::vector<std::vector<std::pair<size_t, R>>> runs((n + grain - 1) / grain);
  DMG_RETURN_IF_ERROR(
      scheduler_.ForRanges(n, grain, [&](int, uint64_t begin, uint64_t end) {
        auto& out = runs[begin / grain];
        size_t e = store::FindBlocks(dir, own_begin_ + begin).second - 1;
        for (uint64_t i = begin; i < end; ++i) {
          const VertexId v = static_cast<VertexId>(own_begin_ + i);
          // The block of v's last piece: the last whose first vertex <= v.
          while (e + 1 < dir.size() && dir[e + 1].first_vertex <= v) ++e;
          if (out.empty() || out.back().first != e) out.push_back({e, R{}});
          out.back().second += finish(v, given.sums[i]);
        }
        return absl::OkStatus();
      }));
  NoteVertexVisits(n);
  for (const auto& chunk : runs) {
    for (const auto& [e, sum] : chunk) partial[e] += sum;
  }
  return absl::OkStatus();
}

template <typename T, typename FinishFn>
auto Engine::GatherSum(Direction neighbours, State<T>& values, FinishFn finish)
    -> absl::StatusOr<decltype(finish(VertexId{}, T{}))> {
  // Without a GPU (or once it took no part): Gather<Add> as a program
  // would call it.
  if (!options_.gpu_share || compute_nodes() > 1 ||
      (gpu_.tried && gpu_.kernels == nullptr)) {
    const auto c = values.reader();
    return Gather<Add>(
        neighbours, [c](VertexId u, VertexId, Weight) { return c[u]; }, finish);
  }
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "the GPU kernels sum floats or doubles");
  DMG_RETURN_IF_ERROR(Prepare());
  const auto c = values.reader();
  auto value = [c](VertexId u, VertexId, Weight) { return c[u]; };
  // Every vertex's value, the GPU's input (the share's in-neighbours may be
  // any vertex): the local copy itself when current, else gathered.
  std::span<const T> all = values.current_values();
  std::vector<T> gathered;
  if (all.empty()) {
    gathered.resize(num_vertices());
    DMG_RETURN_IF_ERROR(
        scheduler_.ForRanges(gathered.size(), internal::kVertexGrain,
                             [&](int, uint64_t begin, uint64_t end) {
                               for (uint64_t u = begin; u < end; ++u) {
                                 gathered[u] = c[static_cast<VertexId>(u)];
                               }
                               return absl::OkStatus();
                             }));
    all = gathered;
  }
  const SamplePull sample = [&](gpu::ShareKernels& k) {
    std::vector<T> sums(k.end() - k.begin());
    return k.PageRankPull(all, std::span<T>(sums));
  };
  DMG_ASSIGN_OR_RETURN(const GpuPhase phase, GpuShareFor(neighbours, sample));
  if (phase == GpuPhase::kNone) return Gather<Add>(neighbours, value, finish);
  // The GPU pulls: so does this gather (no push choice to make).
  NoteDecision(5);
  NoteEdgeOp("pull", num_vertices(), "gpu", num_arcs(), 0);
  if (phase == GpuPhase::kCalibrate) {
    const auto start = std::chrono::steady_clock::now();
    auto r = PullGather<Add>(neighbours, value, finish);
    if (!r.ok()) return r;
    const std::chrono::duration<double> took =
        std::chrono::steady_clock::now() - start;
    DMG_RETURN_IF_ERROR(FinishGpuCalibration(neighbours, took.count()));
    return r;
  }
  // The GPU's part runs on its own thread while the workers gather the
  // rest; ready() joins it (the jthread joins on every path out).
  std::vector<T> sums(gpu_.kernels->end() - gpu_.kernels->begin());
  absl::Status gpu_status;
  std::chrono::steady_clock::time_point gpu_done;
  std::jthread gpu_thread([&] {
    gpu_status = RunSharePull<T>(all, sums);
    gpu_done = std::chrono::steady_clock::now();
  });
  GivenSums<T> given{
      sums, [&]() -> absl::Status {
        const auto cpu_done = std::chrono::steady_clock::now();
        gpu_thread.join();
        if (gpu_done > cpu_done) {
          stats_.gpu.wait_seconds +=
              std::chrono::duration<double>(gpu_done - cpu_done).count();
        }
        return Fail(gpu_status);
      }};
  return PullGather<Add>(neighbours, value, finish, &given);
}

// One pull on the share: the kernels' figures go to the run's stats.
template <typename T>
absl::Status Engine::RunSharePull(std::span<const T> all, std::span<T> sums) {
  gpu::ShareKernels& k = *gpu_.kernels;
  DMG_RETURN_IF_ERROR(k.PageRankPull(all, sums));
  const gpu::KernelTimes t = k.times();
  stats_.gpu.used = true;
  ++stats_.gpu.pulls;
  stats_.gpu.kernel_seconds = t.kernel_seconds;
  stats_.gpu.copy_seconds = t.copy_seconds;
  return absl::OkStatus();
}

// Gather's push: every vertex u of this node's range sends value(u, v, w)
// along its arcs the other way (v's in-neighbour u sends to v), combined at
// v with Op: this node's vertices in an accumulator over its range, the
// others' through the outboxes to their owners (a push EdgeMap's batch
// exchange); then finish(v, combined) over the range, summed per chunk in
// chunk order, and over the nodes in node order. Values combine in the
// order they arrive: a float sum equals the pull's within rounding, not
// bit for bit, and may differ between runs with several threads.
template <typename Op, typename Value, typename FinishFn>
auto Engine::PushGather(Direction neighbours, Value& value, FinishFn& finish)
    -> absl::StatusOr<decltype(finish(VertexId{}, value(VertexId{}, VertexId{},
                                                        Weight{})))> {
  using T = decltype(value(VertexId{}, VertexId{}, Weight{}));
  using R = decltype(finish(VertexId{}, T{}));
  const uint64_t own = own_end_ - own_begin_;
  std::vector<T> acc(own, Op::template Identity<T>());
  ClearOutboxes();
  arc_counts_.resize(threads());
  DMG_RETURN_IF_ERROR(ScanBlocks(
      internal::Opposite(neighbours), nullptr,
      [&](int w, uint32_t, const BlockView& b, bool) {
        const Value value_of = value;
        const auto [lo, hi] = OwnIndices(b);
        for (uint32_t i = lo; i < hi; ++i) {
          const VertexId u = b.first_vertex() + i;
          std::span<const VertexId> out = b.targets(u);
          std::span<const Weight> weights =
              b.weighted() ? b.weights(u) : std::span<const Weight>();
          for (size_t k = 0; k < out.size(); ++k) {
            const VertexId v = out[k];
            const T x = value_of(u, v, internal::WeightAt(weights, k));
            if (Owns(v)) {
              std::atomic_ref<T> slot(acc[v - own_begin_]);
              T old = slot.load(std::memory_order_relaxed);
              while (!slot.compare_exchange_weak(old, Op::Combine(old, x),
                                                 std::memory_order_relaxed)) {
              }
            } else {
              ++arc_counts_[w].remote;
              ToOutbox<Op, T>(w, v, x);
            }
          }
        }
      },
      /*may_steal=*/false, &SuperstepStats::push_arcs));
  TakeRemoteArcs();
  if (compute_nodes() > 1) {
    using Updates = std::vector<RemoteUpdate<T>>;
    DMG_ASSIGN_OR_RETURN(Updates inbox, (ExchangeUpdates<Op, T>()));
    for (const RemoteUpdate<T>& u : inbox) {
      acc[u.v - own_begin_] = Op::Combine(acc[u.v - own_begin_], u.x);
    }
  }
  NoteVertexVisits(own);
  std::vector<R> partial(
      (own + internal::kVertexGrain - 1) / internal::kVertexGrain, R{});
  DMG_RETURN_IF_ERROR(scheduler_.ForRanges(
      own, internal::kVertexGrain, [&](int, uint64_t begin, uint64_t end) {
        R sum{};
        for (uint64_t i = begin; i < end; ++i) {
          sum += finish(static_cast<VertexId>(own_begin_ + i), acc[i]);
        }
        partial[begin / internal::kVertexGrain] = sum;
        return absl::OkStatus();
      }));
  R total{};
  for (const R& x : partial) total += x;
  return AllReduce<Add>(total);
}

}  // namespace dmg::compute

#endif  // DMG_COMPUTE_NODE_GATHER_H_

// Gather (vertex_program.h is the API): every vertex's neighbours' values,
// combined in a fixed order.
#ifndef DMG_COMPUTE_NODE_GATHER_H_
#define DMG_COMPUTE_NODE_GATHER_H_

#include <algorithm>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "compute_node/engine.h"
#include "compute_node/vertex_ops.h"
#include "compute_node/wire_codec.h"

namespace dmg::compute {

template <typename Op, typename Value, typename FinishFn>
auto Engine::Gather(Direction neighbours, Value value, FinishFn finish)
    -> absl::StatusOr<decltype(finish(VertexId{}, value(VertexId{}, VertexId{},
                                                        Weight{})))> {
  using T = decltype(value(VertexId{}, VertexId{}, Weight{}));
  using R = decltype(finish(VertexId{}, T{}));
  DMG_RETURN_IF_ERROR(Prepare());
  ArmSourceReads(neighbours);
  NoteEdgeOp("pull", num_vertices());
  // finish's results are summed per block (the block of the vertex's last
  // piece, scanned by one worker in vertex order), then in block order.
  std::vector<R> partial(graph_.directory(Stored(neighbours)).size(), R{});
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
        const auto [lo, hi] = OwnIndices(b);
        R sum{};
        for (uint32_t i = lo; i < hi; ++i) {
          const VertexId v = b.first_vertex() + i;
          T acc = p.open ? p.acc : Op::template Identity<T>();
          std::span<const VertexId> in = b.targets(v);
          if (b.weighted()) {
            std::span<const Weight> weights = b.weights(v);
            for (size_t k = 0; k < in.size(); ++k) {
              acc = Op::Combine(acc, value_of(in[k], v, weights[k]));
            }
          } else {
            // Four independent chains on long lists: one chain is bound by
            // the latency of Combine (a dependent add per edge), four by
            // the loads. Which edge goes to which chain depends only on
            // the block's adjacency, so results stay the same for any
            // thread count, cache or transport.
            size_t k = 0;
            if (in.size() >= internal::kGatherLanesFrom) {
              T a0 = Op::template Identity<T>(), a1 = a0, a2 = a0, a3 = a0;
              for (; k + 4 <= in.size(); k += 4) {
                a0 = Op::Combine(a0, value_of(in[k], v, 1));
                a1 = Op::Combine(a1, value_of(in[k + 1], v, 1));
                a2 = Op::Combine(a2, value_of(in[k + 2], v, 1));
                a3 = Op::Combine(a3, value_of(in[k + 3], v, 1));
              }
              acc = Op::Combine(
                  acc, Op::Combine(Op::Combine(a0, a1), Op::Combine(a2, a3)));
            }
            for (; k < in.size(); ++k) {
              acc = Op::Combine(acc, value_of(in[k], v, 1));
            }
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
  if (cluster_ == nullptr) {
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

}  // namespace dmg::compute

#endif  // DMG_COMPUTE_NODE_GATHER_H_

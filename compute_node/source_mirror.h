// Source mirrors: where an owner's vertices sit in the packed copy it writes
// of a gathered array, so that each other node READs the values its pulls
// read and no others.
//
// With vertex ranges, a node's pull reads the values of the other ranges'
// vertices its in-edges name (Engine::sources_). READ as 64-byte lines of
// the owner's slice, that is every line of every other range on a random
// graph (kron:20 on 4 nodes: 49,183 of 49,187 lines, 3.1 MB an iteration
// of float contributions), though a node names only 43% of those vertices.
// Gemini and PowerGraph send a mirror's value only where it is used; on
// disaggregated memory the owner cannot send, so it WRITEs its values once,
// packed and grouped by the set of nodes that read them, and each reader
// READs the groups holding its own: a few runs, its vertices' bytes alone.
//
// The groups follow the readers' sets (masks of node bits) in Gray-code
// order, so each reader's groups come in few runs (with 3 readers: 1, 1
// and 2), and inside a group ascending vertex ids. Every node computes
// every layout alike from every node's needs (a bit per vertex).
#ifndef DMG_COMPUTE_NODE_SOURCE_MIRROR_H_
#define DMG_COMPUTE_NODE_SOURCE_MIRROR_H_

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "store/graph.h"

namespace dmg::compute {

class MirrorLayout {
 public:
  // A reader's part of one owner's packed copy: its runs of positions
  // [first, first + count), and the vertex each position read holds, in
  // order.
  struct Part {
    std::vector<std::pair<uint64_t, uint64_t>> runs;
    std::vector<store::VertexId> vertices;
  };

  MirrorLayout() = default;
  // `bounds`: the compute nodes' ranges (nodes + 1 vertex ids); `needs[j]`:
  // node j's bit per vertex of the vertices outside its range it reads
  // (its own range's bits are ignored). Nodes <= 64.
  MirrorLayout(std::span<const uint64_t> bounds, int node,
               const std::vector<std::span<const uint64_t>>& needs);

  // This node's vertices that another node reads, in packed order.
  std::span<const store::VertexId> own_order() const { return own_order_; }
  // Node k's packed copy: how many values, and what this node READs of it
  // (empty for k == node()).
  uint64_t packed(int k) const { return packed_[k]; }
  const Part& from(int k) const { return parts_[k]; }

 private:
  std::vector<store::VertexId> own_order_;
  std::vector<uint64_t> packed_;
  std::vector<Part> parts_;
};

}  // namespace dmg::compute

#endif  // DMG_COMPUTE_NODE_SOURCE_MIRROR_H_

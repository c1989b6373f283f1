// In-memory graph types used during ingestion: a raw edge list as read from a
// file or generator, and the cleaned compressed-sparse-row (CSR) form that the
// block layout is cut from. Compute nodes never see these types: they read the
// block layout (store/block_format.h) through the transport.
#ifndef DMG_STORE_GRAPH_H_
#define DMG_STORE_GRAPH_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace dmg::store {

using VertexId = uint32_t;
using EdgeIndex = uint64_t;
using Weight = int32_t;

// Largest vertex id a graph may use: 2^32-2. 2^32-1 is reserved as "no vertex".
inline constexpr uint64_t kMaxVertexId = 0xFFFFFFFEull;
inline constexpr VertexId kNoVertex = 0xFFFFFFFFu;

// Arcs as read, before cleaning. Parallel arcs, self-loops and any order are
// allowed here. weights is empty for unweighted graphs, else one per arc.
struct EdgeList {
  uint64_t num_vertices = 0;  // largest id + 1, or more if the format says so
  std::vector<VertexId> src;
  std::vector<VertexId> dst;
  std::vector<Weight> weights;
  // True when the source format is undirected by definition (PACE .gr,
  // symmetric .mtx already expanded, generators): every arc must be present in
  // both directions after cleaning.
  bool undirected = false;

  bool weighted() const { return !weights.empty(); }
  size_t num_arcs() const { return src.size(); }
  void Add(VertexId u, VertexId v) {
    src.push_back(u);
    dst.push_back(v);
  }
  void Add(VertexId u, VertexId v, Weight w) {
    Add(u, v);
    weights.push_back(w);
  }
};

// One direction of a graph in CSR form. Each adjacency list is sorted by
// target id (ties by weight), so layouts and outputs are deterministic.
struct Csr {
  uint64_t num_vertices = 0;
  std::vector<EdgeIndex> offsets;  // num_vertices + 1 entries
  std::vector<VertexId> targets;
  std::vector<Weight> weights;  // empty, or one per target

  uint64_t num_arcs() const { return targets.size(); }
  bool weighted() const { return !weights.empty(); }
  uint64_t degree(VertexId v) const { return offsets[v + 1] - offsets[v]; }
  std::span<const VertexId> neighbors(VertexId v) const {
    return {targets.data() + offsets[v], targets.data() + offsets[v + 1]};
  }
  std::span<const Weight> neighbor_weights(VertexId v) const {
    return {weights.data() + offsets[v], weights.data() + offsets[v + 1]};
  }
};

// How an edge list becomes a graph.
struct CleanOptions {
  bool symmetrize = false;         // add (v,u) for every (u,v)
  bool drop_self_loops = true;     // remove (v,v)
  bool drop_parallel_arcs = true;  // keep one arc per (u,v): the lightest
  bool relabel = false;            // compact ids: i-th smallest id used -> i
};

// What cleaning did, for `dmg info` and the logs.
struct CleanReport {
  uint64_t input_arcs = 0;
  uint64_t self_loops_removed = 0;
  uint64_t parallel_arcs_removed = 0;
  uint64_t arcs_added_by_symmetrize = 0;
  uint64_t vertices_before_relabel = 0;
};

// A cleaned graph: both directions, so pull and push kernels both work.
struct Graph {
  Csr out;
  Csr in;
  CleanReport report;
  uint64_t num_vertices() const { return out.num_vertices; }
  uint64_t num_arcs() const { return out.num_arcs(); }
  bool weighted() const { return out.weighted(); }
};

}  // namespace dmg::store

#endif  // DMG_STORE_GRAPH_H_

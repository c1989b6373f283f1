// The plain reference implementations: sequential, no tricks, written so a
// reader can check them at a glance. Semantics (also in reference.h):
//
//   PageRank  d = 0.85, N = number of vertices, every score starts at 1/N.
//             One iteration computes, for every vertex v,
//               new(v) = (1-d)/N + d * sum_{in-neighbours u} old(u)/outdeg(u)
//             (a vertex without out-arcs passes nothing on: dangling mass is
//             not redistributed), then L1 = sum_v |new(v) - old(v)| and
//             iterations += 1. It stops when L1 < tolerance or iterations ==
//             max_iters; the result is the last `new`.
//   BFS       depth along out-arcs from the source (0); unreachable -1.
//   CC        arcs taken as undirected; every vertex gets the smallest id in
//             its component.
//   SSSP      Dijkstra along out-arcs with non-negative int32 weights (or 1 per
//             arc with unit_weights); unreachable kInfDistance.
//   BC        GAPBS bc.cc: Brandes over out-arcs from each source, the source's
//             own dependency included, summed, divided by the largest score.
//   TC        undirected graphs only; each triangle counted once.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <queue>
#include <span>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "reference/reference.h"
#include "store/graph.h"

namespace dmg::reference {

absl::Status CheckPageRankArgs(int max_iters) {
  if (max_iters < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("PageRank needs max_iters >= 1, got ", max_iters));
  }
  return absl::OkStatus();
}

absl::Status CheckSource(const store::Graph& graph, uint64_t source) {
  if (source >= graph.num_vertices()) {
    return absl::InvalidArgumentError(
        absl::StrCat("source ", source, " is out of range: the graph has ",
                     graph.num_vertices(), " vertices"));
  }
  return absl::OkStatus();
}

absl::Status CheckSsspWeights(const store::Graph& graph, bool unit_weights) {
  if (unit_weights) return absl::OkStatus();
  if (!graph.weighted()) {
    return absl::InvalidArgumentError(
        "SSSP needs a weighted graph (.wel, DIMACS .gr, weighted .mtx) or "
        "--unit_weights");
  }
  const store::Csr& out = graph.out;
  for (uint64_t u = 0; u < out.num_vertices; ++u) {
    for (uint64_t i = out.offsets[u]; i < out.offsets[u + 1]; ++i) {
      if (out.weights[i] < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "negative weight ", out.weights[i], " on arc ", u, " -> ",
            out.targets[i], "; SSSP needs non-negative weights"));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<PageRankResult> PageRank(const store::Graph& graph,
                                        int max_iters, double tolerance) {
  if (absl::Status s = CheckPageRankArgs(max_iters); !s.ok()) return s;
  const uint64_t n = graph.num_vertices();
  const double base = (1.0 - kDamping) / static_cast<double>(n);

  PageRankResult result;
  std::vector<double> old_scores(n, 1.0 / static_cast<double>(n));
  std::vector<double> new_scores(n);
  while (true) {
    for (uint64_t v = 0; v < n; ++v) {
      double sum = 0.0;
      for (VertexId u : graph.in.neighbors(v)) {
        sum += old_scores[u] / static_cast<double>(graph.out.degree(u));
      }
      new_scores[v] = base + kDamping * sum;
    }
    double l1 = 0.0;
    for (uint64_t v = 0; v < n; ++v) {
      l1 += std::abs(new_scores[v] - old_scores[v]);
    }
    result.iterations += 1;
    result.last_l1 = l1;
    std::swap(old_scores, new_scores);  // old_scores now holds `new`
    if (l1 < tolerance || result.iterations == max_iters) break;
  }
  result.scores = std::move(old_scores);
  return result;
}

absl::StatusOr<std::vector<int32_t>> Bfs(const store::Graph& graph,
                                         uint64_t source) {
  if (absl::Status s = CheckSource(graph, source); !s.ok()) return s;
  std::vector<int32_t> depth(graph.num_vertices(), kUnreached);
  std::queue<VertexId> queue;
  depth[source] = 0;
  queue.push(static_cast<VertexId>(source));
  while (!queue.empty()) {
    VertexId u = queue.front();
    queue.pop();
    for (VertexId v : graph.out.neighbors(u)) {
      if (depth[v] == kUnreached) {
        depth[v] = depth[u] + 1;
        queue.push(v);
      }
    }
  }
  return depth;
}

// Vertices are visited in id order; the first vertex of a component reached
// this way is its smallest id, and a BFS over out- and in-arcs from it labels
// the whole component.
std::vector<VertexId> ConnectedComponents(const store::Graph& graph) {
  const uint64_t n = graph.num_vertices();
  std::vector<VertexId> label(n, store::kNoVertex);
  std::queue<VertexId> queue;
  for (uint64_t root = 0; root < n; ++root) {
    if (label[root] != store::kNoVertex) continue;
    label[root] = static_cast<VertexId>(root);
    queue.push(static_cast<VertexId>(root));
    while (!queue.empty()) {
      VertexId u = queue.front();
      queue.pop();
      for (const store::Csr* csr : {&graph.out, &graph.in}) {
        for (VertexId v : csr->neighbors(u)) {
          if (label[v] == store::kNoVertex) {
            label[v] = static_cast<VertexId>(root);
            queue.push(v);
          }
        }
      }
    }
  }
  return label;
}

absl::StatusOr<std::vector<int64_t>> Sssp(const store::Graph& graph,
                                          uint64_t source, bool unit_weights) {
  if (absl::Status s = CheckSource(graph, source); !s.ok()) return s;
  if (absl::Status s = CheckSsspWeights(graph, unit_weights); !s.ok()) {
    return s;
  }
  const store::Csr& out = graph.out;
  std::vector<int64_t> dist(graph.num_vertices(), kInfDistance);
  // Min-heap of (tentative distance, vertex); outdated entries are skipped.
  using Entry = std::pair<int64_t, VertexId>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
  dist[source] = 0;
  heap.push({0, static_cast<VertexId>(source)});
  while (!heap.empty()) {
    auto [d, u] = heap.top();
    heap.pop();
    if (d > dist[u]) continue;  // u was settled with a shorter distance
    for (uint64_t i = out.offsets[u]; i < out.offsets[u + 1]; ++i) {
      VertexId v = out.targets[i];
      int64_t w = unit_weights ? 1 : out.weights[i];
      if (d + w < dist[v]) {
        dist[v] = d + w;
        heap.push({dist[v], v});
      }
    }
  }
  return dist;
}

absl::StatusOr<std::vector<double>> Bc(const store::Graph& graph,
                                       std::span<const VertexId> sources) {
  if (sources.empty()) {
    return absl::InvalidArgumentError("BC needs at least one source");
  }
  for (VertexId source : sources) {
    if (absl::Status s = CheckSource(graph, source); !s.ok()) return s;
  }
  const uint64_t n = graph.num_vertices();
  std::vector<double> scores(n, 0.0);
  for (VertexId source : sources) {
    // BFS: depth, sigma (number of shortest paths from the source) and the
    // vertices in the order reached, so by non-decreasing depth. A vertex's
    // sigma is complete before it is dequeued: all its predecessors are one
    // level shallower and were dequeued first.
    std::vector<int32_t> depth(n, kUnreached);
    std::vector<double> sigma(n, 0.0);
    std::vector<VertexId> order = {source};
    depth[source] = 0;
    sigma[source] = 1.0;
    for (size_t i = 0; i < order.size(); ++i) {
      VertexId u = order[i];
      for (VertexId v : graph.out.neighbors(u)) {
        if (depth[v] == kUnreached) {
          depth[v] = depth[u] + 1;
          order.push_back(v);
        }
        if (depth[v] == depth[u] + 1) sigma[v] += sigma[u];
      }
    }
    // Dependencies in reverse BFS order: every successor w of v (depth one
    // more) comes later in `order`, so delta[w] is final when v is reached.
    std::vector<double> delta(n, 0.0);
    for (size_t i = order.size(); i-- > 0;) {
      VertexId v = order[i];
      for (VertexId w : graph.out.neighbors(v)) {
        if (depth[w] == depth[v] + 1) {
          delta[v] += sigma[v] / sigma[w] * (1.0 + delta[w]);
        }
      }
      scores[v] += delta[v];  // the source too, as in GAPBS
    }
  }
  const double largest = *std::max_element(scores.begin(), scores.end());
  if (largest > 0.0) {
    for (double& score : scores) score /= largest;
  }
  return scores;
}

namespace {

// InvalidArgument unless every arc u -> v has its reverse v -> u.
absl::Status CheckUndirected(const store::Graph& graph, const char* algorithm) {
  const store::Csr& out = graph.out;
  for (uint64_t u = 0; u < out.num_vertices; ++u) {
    for (VertexId v : out.neighbors(u)) {
      std::span<const VertexId> back = out.neighbors(v);
      if (!std::binary_search(back.begin(), back.end(), u)) {
        return absl::InvalidArgumentError(absl::StrCat(
            algorithm, " needs an undirected graph, but arc ", u, " -> ", v,
            " has no reverse (the graph is directed); load it with "
            "--symmetrize"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

// Every triangle a > b > c is found exactly once: from a, through its
// neighbour b < a, to b's neighbour c < b that is also a neighbour of a.
// Adjacency lists are sorted (store::Csr), so membership is a binary search.
absl::StatusOr<uint64_t> TriangleCount(const store::Graph& graph) {
  const store::Csr& out = graph.out;
  if (absl::Status s = CheckUndirected(graph, "triangle counting"); !s.ok()) {
    return s;
  }
  uint64_t triangles = 0;
  for (uint64_t a = 0; a < out.num_vertices; ++a) {
    std::span<const VertexId> a_neighbors = out.neighbors(a);
    for (VertexId b : a_neighbors) {
      if (b >= a) continue;
      for (VertexId c : out.neighbors(b)) {
        if (c >= b) continue;
        if (std::binary_search(a_neighbors.begin(), a_neighbors.end(), c)) {
          ++triangles;
        }
      }
    }
  }
  return triangles;
}

// Coreness by repeated deletion (Batagelj and Zaversnik's definition, the
// plainest algorithm): for k = 0, 1, ..., delete every vertex of remaining
// degree <= k, again and again until none is left at <= k; a vertex deleted
// while k is current has coreness k. O(n * max_core + m).
absl::StatusOr<std::vector<uint32_t>> KCore(const store::Graph& graph) {
  const store::Csr& out = graph.out;
  if (absl::Status s = CheckUndirected(graph, "k-core"); !s.ok()) return s;
  const uint64_t n = out.num_vertices;
  std::vector<uint64_t> degree(n);
  std::vector<bool> deleted(n, false);
  std::vector<uint32_t> core(n, 0);
  for (uint64_t v = 0; v < n; ++v) degree[v] = out.degree(v);
  uint64_t left = n;
  for (uint32_t k = 0; left > 0; ++k) {
    bool deleted_some = true;
    while (deleted_some) {
      deleted_some = false;
      for (uint64_t v = 0; v < n; ++v) {
        if (deleted[v] || degree[v] > k) continue;
        deleted[v] = true;
        core[v] = k;
        --left;
        deleted_some = true;
        for (VertexId w : out.neighbors(v)) --degree[w];
      }
    }
  }
  return core;
}

}  // namespace dmg::reference

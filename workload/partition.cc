#include "workload/partition.h"

#include <algorithm>

namespace dmg::workload {

void AddEdgesPerChunk(std::span<const store::DirectoryEntry> directory,
                      uint64_t num_vertices, uint64_t num_arcs, uint64_t grain,
                      std::vector<uint64_t>& edges) {
  edges.resize((num_vertices + grain - 1) / grain, 0);
  for (size_t i = 0; i < directory.size(); ++i) {
    const store::DirectoryEntry& e = directory[i];
    const uint64_t next =
        i + 1 < directory.size() ? directory[i + 1].first_edge : num_arcs;
    const uint64_t m = next - e.first_edge;
    const uint64_t begin = e.first_vertex;
    const uint64_t end = begin + std::max<uint32_t>(e.vertex_count, 1);
    // Most blocks lie inside one chunk; the others share their edges out.
    for (uint64_t c = begin / grain; c * grain < end; ++c) {
      const uint64_t lo = std::max(begin, c * grain);
      const uint64_t hi = std::min(end, (c + 1) * grain);
      edges[c] += m * (hi - lo) / (end - begin);
    }
  }
}

std::vector<uint64_t> SplitRanges(std::span<const uint64_t> edges_per_chunk,
                                  uint64_t num_vertices, uint64_t grain,
                                  int parts, double alpha) {
  const uint64_t chunks = (num_vertices + grain - 1) / grain;
  auto cost = [&](uint64_t c) {
    const uint64_t vertices = std::min(grain, num_vertices - c * grain);
    const uint64_t e = c < edges_per_chunk.size() ? edges_per_chunk[c] : 0;
    return static_cast<double>(e) + alpha * static_cast<double>(vertices);
  };
  double total = 0;
  for (uint64_t c = 0; c < chunks; ++c) total += cost(c);
  std::vector<uint64_t> bounds = {0};
  // Greedy over the prefix sums: part k ends at the chunk boundary closest
  // to k/parts of the total, leaving at least nothing for the parts after.
  double sum = 0;
  uint64_t c = 0;
  for (int k = 1; k < parts; ++k) {
    const double goal = total * k / parts;
    while (c < chunks && sum + cost(c) / 2 < goal) sum += cost(c++);
    bounds.push_back(std::min(c * grain, num_vertices));
  }
  bounds.push_back(num_vertices);
  return bounds;
}

}  // namespace dmg::workload

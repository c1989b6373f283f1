#include "compute_node/source_mirror.h"

#include <algorithm>

namespace dmg::compute {

namespace {

// The position of Gray code g in the Gray sequence (its prefix XOR): masks
// in this order differ by one reader from one group to the next.
uint64_t GrayRank(uint64_t g) {
  for (int shift = 1; shift < 64; shift <<= 1) g ^= g >> shift;
  return g;
}

bool Bit(std::span<const uint64_t> bits, uint64_t v) {
  return (v >> 6) < bits.size() && ((bits[v >> 6] >> (v & 63)) & 1) != 0;
}

}  // namespace

MirrorLayout::MirrorLayout(
    std::span<const uint64_t> bounds, int node,
    const std::vector<std::span<const uint64_t>>& needs) {
  const int nodes = static_cast<int>(needs.size());
  packed_.assign(nodes, 0);
  parts_.assign(nodes, Part());
  std::vector<std::pair<uint64_t, store::VertexId>> order;
  std::vector<uint64_t> masks;
  for (int k = 0; k < nodes; ++k) {
    order.clear();
    for (uint64_t v = bounds[k]; v < bounds[k + 1]; ++v) {
      uint64_t mask = 0;
      for (int j = 0; j < nodes; ++j) {
        if (j != k && Bit(needs[j], v)) mask |= uint64_t{1} << j;
      }
      if (mask != 0) {
        order.push_back({GrayRank(mask), static_cast<store::VertexId>(v)});
      }
    }
    // Ascending ids within a group: they were appended so.
    std::stable_sort(
        order.begin(), order.end(),
        [](const auto& a, const auto& b) { return a.first < b.first; });
    packed_[k] = order.size();
    if (k == node) {
      own_order_.reserve(order.size());
      for (const auto& [rank, v] : order) own_order_.push_back(v);
      continue;
    }
    Part& part = parts_[k];
    for (uint64_t p = 0; p < order.size(); ++p) {
      const store::VertexId v = order[p].second;
      if (!Bit(needs[node], v)) continue;
      if (!part.runs.empty() &&
          part.runs.back().first + part.runs.back().second == p) {
        ++part.runs.back().second;
      } else {
        part.runs.push_back({p, 1});
      }
      part.vertices.push_back(v);
    }
  }
}

}  // namespace dmg::compute

// A set of active vertices: a bitmap for O(1) membership plus the list of
// members. Workers add concurrently; each vertex enters once per round.
#ifndef DMG_COMPUTE_NODE_FRONTIER_H_
#define DMG_COMPUTE_NODE_FRONTIER_H_

#include <atomic>
#include <bit>
#include <cstdint>
#include <span>
#include <vector>

#include "store/graph.h"

namespace dmg::compute {

using store::VertexId;

class Frontier {
 public:
  Frontier(uint64_t num_vertices, int workers)
      : bits_((num_vertices + 63) / 64, 0), pending_(workers) {}

  // Adds v if absent; safe from many workers (each passes its own index).
  bool Add(int worker, VertexId v) {
    uint64_t mask = uint64_t{1} << (v & 63);
    std::atomic_ref<uint64_t> word(bits_[v >> 6]);
    if (word.load(std::memory_order_relaxed) & mask) return false;
    if (word.fetch_or(mask, std::memory_order_relaxed) & mask) return false;
    pending_[worker].push_back(v);
    return true;
  }
  // Add for a caller that alone touches v's 64-vertex word this round (a
  // worker adding only vertices of its own 64-aligned chunks): no atomic.
  bool AddExclusive(int worker, VertexId v) {
    uint64_t mask = uint64_t{1} << (v & 63);
    if (bits_[v >> 6] & mask) return false;
    bits_[v >> 6] |= mask;
    pending_[worker].push_back(v);
    return true;
  }
  // Makes the added vertices visible through vertices(); call between rounds.
  void Seal() {
    for (auto& p : pending_) {
      list_.insert(list_.end(), p.begin(), p.end());
      p.clear();
    }
  }
  // Adds the members of another sealed frontier (between rounds).
  void Merge(const Frontier& other) {
    for (VertexId v : other.list_) {
      uint64_t mask = uint64_t{1} << (v & 63);
      if (bits_[v >> 6] & mask) continue;
      bits_[v >> 6] |= mask;
      list_.push_back(v);
    }
  }
  void Clear() {
    if (list_.size() > bits_.size()) {
      std::fill(bits_.begin(), bits_.end(), 0);
    } else {
      for (VertexId v : list_) bits_[v >> 6] = 0;
    }
    list_.clear();
  }
  bool Contains(VertexId v) const { return (bits_[v >> 6] >> (v & 63)) & 1; }
  // The members in ascending order, from the bitmap (no sort).
  std::vector<VertexId> SortedVertices() const {
    std::vector<VertexId> out;
    out.reserve(list_.size());
    for (size_t k = 0; k < bits_.size(); ++k) {
      for (uint64_t b = bits_[k]; b != 0; b &= b - 1) {
        out.push_back(static_cast<VertexId>(k * 64 + std::countr_zero(b)));
      }
    }
    return out;
  }
  uint64_t size() const { return list_.size(); }
  bool empty() const { return list_.empty(); }
  std::span<const VertexId> vertices() const { return list_; }
  uint64_t bytes() const {
    return bits_.size() * 8 + list_.capacity() * sizeof(VertexId);
  }

 private:
  std::vector<uint64_t> bits_;
  std::vector<VertexId> list_;
  std::vector<std::vector<VertexId>> pending_;
};

}  // namespace dmg::compute

#endif  // DMG_COMPUTE_NODE_FRONTIER_H_

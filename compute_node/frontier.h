// A set of active vertices: a bitmap for O(1) membership plus the list of
// members. Workers add concurrently; each vertex enters once per round.
#ifndef DMG_COMPUTE_NODE_FRONTIER_H_
#define DMG_COMPUTE_NODE_FRONTIER_H_

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <span>
#include <utility>
#include <vector>

#include "common/huge_pages.h"
#include "store/graph.h"

namespace dmg::compute {

using store::VertexId;

// One worker's additions of a round, alone on its cache line: workers
// append side by side, and vectors packed together put two workers' end
// pointers on one line (in a kron:20 bottom-up level, half the visit's
// time went to that line moving between the cores).
struct alignas(64) WorkerAdds {
  HugePageVector<store::VertexId> ids;
};

// Storage that frontiers of one engine hand on to the next: a BFS level's
// frontier dies as the next one fills, and first-touch page faults of fresh
// buffers (~10 us per 4 KiB page on virtual machines) cost more than a
// small level's work. Holds cleared buffers of at most one frontier.
class FrontierSpares {
 public:
  struct Storage {
    std::vector<uint64_t> bits;  // all zero
    std::vector<WorkerAdds> pending;
  };
  // Spare storage sized for n vertices and `workers` workers, or empty.
  Storage Take(uint64_t words, int workers) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!spare_ || spare_->bits.size() != words ||
        static_cast<int>(spare_->pending.size()) != workers) {
      return {};
    }
    Storage s = std::move(*spare_);
    spare_.reset();
    return s;
  }
  void Give(Storage s) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!spare_) spare_ = std::make_unique<Storage>(std::move(s));
  }

 private:
  std::mutex mu_;
  std::unique_ptr<Storage> spare_;
};

class Frontier {
 public:
  Frontier(uint64_t num_vertices, int workers,
           std::shared_ptr<FrontierSpares> spares = nullptr)
      : spares_(std::move(spares)), epoch_(NextEpoch()) {
    const uint64_t words = (num_vertices + 63) / 64;
    if (spares_ != nullptr) {
      FrontierSpares::Storage s = spares_->Take(words, workers);
      bits_ = std::move(s.bits);
      pending_ = std::move(s.pending);
    }
    if (bits_.empty()) bits_.assign(words, 0);
    if (pending_.empty()) pending_.resize(workers);
  }
  ~Frontier() {
    if (spares_ == nullptr || bits_.empty()) return;
    for (WorkerAdds& p : pending_) {
      for (VertexId v : p.ids) bits_[v >> 6] = 0;  // added, never sealed
      p.ids.clear();
    }
    Clear();
    spares_->Give({std::move(bits_), std::move(pending_)});
  }
  Frontier(Frontier&& other) noexcept
      : bits_(std::move(other.bits_)),
        list_(std::move(other.list_)),
        pending_(std::move(other.pending_)),
        spares_(std::move(other.spares_)),
        epoch_(std::exchange(other.epoch_, NextEpoch())),
        elsewhere_(std::exchange(other.elsewhere_, 0)),
        partial_(std::exchange(other.partial_, false)) {}
  Frontier& operator=(Frontier&& other) {
    if (this != &other) {
      Frontier gone(std::move(*this));  // hands its storage on
      bits_ = std::move(other.bits_);
      list_ = std::move(other.list_);
      pending_ = std::move(other.pending_);
      spares_ = std::move(other.spares_);
      epoch_ = other.epoch_;
      other.epoch_ = NextEpoch();
      elsewhere_ = std::exchange(other.elsewhere_, 0);
      partial_ = std::exchange(other.partial_, false);
    }
    return *this;
  }
  // Changes when the members may no longer be a prefix of what they were,
  // or their count is no longer what was posted: at Clear, when another
  // frontier moves in, and at a Merge where either is partial. Between,
  // members are only appended (Seal, Merge), so what was computed for
  // vertices()[0, k) under one epoch still holds (Engine keeps its
  // members' degrees so).
  uint64_t epoch() const { return epoch_; }

  // Adds v if absent; safe from many workers (each passes its own index).
  bool Add(int worker, VertexId v) {
    uint64_t mask = uint64_t{1} << (v & 63);
    std::atomic_ref<uint64_t> word(bits_[v >> 6]);
    if (word.load(std::memory_order_relaxed) & mask) return false;
    if (word.fetch_or(mask, std::memory_order_relaxed) & mask) return false;
    pending_[worker].ids.push_back(v);
    return true;
  }
  // Add for a caller that alone touches v's 64-vertex word this round (a
  // worker adding only vertices of its own 64-aligned chunks): no atomic.
  bool AddExclusive(int worker, VertexId v) {
    uint64_t mask = uint64_t{1} << (v & 63);
    if (bits_[v >> 6] & mask) return false;
    bits_[v >> 6] |= mask;
    pending_[worker].ids.push_back(v);
    return true;
  }
  // Add for a vertex no other call adds this round (its first-wins claim
  // succeeded): no atomic; Seal sets its bit.
  void AddUnique(int worker, VertexId v) { pending_[worker].ids.push_back(v); }
  // Makes the added vertices visible through vertices(); call between rounds.
  void Seal() {
    if (list_.empty()) {
      size_t total = 0;
      for (const WorkerAdds& p : pending_) total += p.ids.size();
      ReserveHuge(list_, total);
    }
    for (WorkerAdds& p : pending_) {
      // (AddUnique left these bits unset; for the others it is a no-op.)
      for (VertexId v : p.ids) bits_[v >> 6] |= uint64_t{1} << (v & 63);
      list_.insert(list_.end(), p.ids.begin(), p.ids.end());
      p.ids.clear();
    }
  }
  // Adds the members of n bitmap words from word first_word on (`data`:
  // 8n bytes, unaligned), in ascending order after what was added before
  // (Seal first); members already in are skipped. Between rounds.
  void AppendWords(uint64_t first_word, const void* data, uint64_t n) {
    Seal();
    const auto* bytes = static_cast<const std::byte*>(data);
    auto word = [&](uint64_t k) {
      uint64_t w;
      std::memcpy(&w, bytes + 8 * k, 8);
      return w & ~bits_[first_word + k];
    };
    uint64_t fresh = 0;
    for (uint64_t k = 0; k < n; ++k) fresh += std::popcount(word(k));
    if (fresh == 0) return;
    if (list_.empty()) {
      ReserveHuge(list_, fresh);
    } else if (list_.capacity() - list_.size() < fresh) {
      list_.reserve(std::max(list_.size() + fresh, 2 * list_.capacity()));
    }
    for (uint64_t k = 0; k < n; ++k) {
      const uint64_t w = word(k);
      bits_[first_word + k] |= w;
      for (uint64_t b = w; b != 0; b &= b - 1) {
        list_.push_back(
            static_cast<VertexId>((first_word + k) * 64 + std::countr_zero(b)));
      }
    }
  }
  // Adds the members another sealed frontier holds (between rounds). Where
  // either is partial (whole() false) the count of the union is not known
  // here (Engine::Union counts it across the nodes): the result is partial
  // and a new epoch, so that nothing kept for the old count applies.
  void Merge(const Frontier& other) {
    if (partial_ || other.partial_) {
      partial_ = true;
      epoch_ = NextEpoch();
    }
    for (VertexId v : other.list_) {
      uint64_t mask = uint64_t{1} << (v & 63);
      if (bits_[v >> 6] & mask) continue;
      bits_[v >> 6] |= mask;
      list_.push_back(v);
    }
  }
  // Counts `n` members that other compute nodes hold and this frontier
  // does not (a merged part posted as a count: Engine::PutFrontier), and
  // marks it partial (whole() false), even for n = 0: whether a frontier
  // is whole must read the same on every node.
  void AddElsewhere(uint64_t n) {
    elsewhere_ += n;
    partial_ = true;
  }
  // Partial, `members` members in all (at least those held).
  void SetTotal(uint64_t members) {
    elsewhere_ = members - std::min<uint64_t>(members, list_.size());
    partial_ = true;
  }
  void Clear() {
    epoch_ = NextEpoch();
    elsewhere_ = 0;
    partial_ = false;
    if (list_.size() > bits_.size()) {
      std::fill(bits_.begin(), bits_.end(), 0);
    } else {
      for (VertexId v : list_) bits_[v >> 6] = 0;
    }
    list_.clear();
  }
  bool Contains(VertexId v) const { return (bits_[v >> 6] >> (v & 63)) & 1; }
  // Whether any of [begin, end) is a member: 64 vertices per step.
  bool AnyIn(uint64_t begin, uint64_t end) const {
    if (begin >= end) return false;
    const uint64_t first = begin >> 6, last = (end - 1) >> 6;
    const uint64_t head = ~uint64_t{0} << (begin & 63);
    const uint64_t tail = ~uint64_t{0} >> (63 - ((end - 1) & 63));
    if (first == last) return (bits_[first] & head & tail) != 0;
    if (bits_[first] & head) return true;
    for (uint64_t k = first + 1; k < last; ++k) {
      if (bits_[k] != 0) return true;
    }
    return (bits_[last] & tail) != 0;
  }
  // Calls fn(v) for every member in [begin, end), ascending: 64 vertices
  // per step, so a block of a thousand vertices with a few members costs
  // a few words, not a thousand membership tests.
  template <typename Fn>
  void ForEachIn(uint64_t begin, uint64_t end, Fn&& fn) const {
    if (begin >= end) return;
    const uint64_t first = begin >> 6, last = (end - 1) >> 6;
    for (uint64_t k = first; k <= last; ++k) {
      uint64_t b = bits_[k];
      if (k == first) b &= ~uint64_t{0} << (begin & 63);
      if (k == last) b &= ~uint64_t{0} >> (63 - ((end - 1) & 63));
      for (; b != 0; b &= b - 1) {
        fn(static_cast<VertexId>(k * 64 + std::countr_zero(b)));
      }
    }
  }
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
  // Every member, on every node: those held and those counted elsewhere.
  uint64_t size() const { return list_.size() + elsewhere_; }
  // Whether vertices() and the bitmap hold every member. With several
  // compute nodes, an operation's result may hold only this node's members
  // and some others' (the rest counted: AddElsewhere); the engine fetches
  // the rest where an operation needs them (a pull, a steal).
  bool whole() const { return !partial_ || size() == 0; }
  // No additions wait for Seal: the bitmap holds exactly the members.
  bool sealed() const {
    for (const WorkerAdds& p : pending_) {
      if (!p.ids.empty()) return false;
    }
    return true;
  }
  bool empty() const { return size() == 0; }
  // The members held (sealed): every one when whole().
  std::span<const VertexId> vertices() const { return list_; }
  // The membership bitmap (bit v of word v / 64); sealed held members.
  std::span<const uint64_t> words() const { return bits_; }
  uint64_t bytes() const {
    return bits_.size() * 8 + list_.capacity() * sizeof(VertexId);
  }

 private:
  static uint64_t NextEpoch() {
    static std::atomic<uint64_t> next{1};
    return next.fetch_add(1, std::memory_order_relaxed);
  }
  std::vector<uint64_t> bits_;
  HugePageVector<VertexId> list_;
  std::vector<WorkerAdds> pending_;
  std::shared_ptr<FrontierSpares> spares_;
  uint64_t epoch_ = 0;
  uint64_t elsewhere_ = 0;  // members not held (AddElsewhere)
  bool partial_ = false;
};

}  // namespace dmg::compute

#endif  // DMG_COMPUTE_NODE_FRONTIER_H_

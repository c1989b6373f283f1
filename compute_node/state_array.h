// A vertex-property array (scores, depths, labels, distances) that lives on a
// memory node, double-buffered by superstep: version s (the state after
// superstep s) is in buffer s % 2, so a finished superstep is always a
// consistent checkpoint. The compute node works on an explicit local copy of
// the range it owns (all vertices while there is one compute node) and, at
// the end of each superstep, writes back the 4 KiB pages that changed in this
// or the previous superstep — exactly what the target buffer is missing.
#ifndef DMG_COMPUTE_NODE_STATE_ARRAY_H_
#define DMG_COMPUTE_NODE_STATE_ARRAY_H_

#include <atomic>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/aligned_buffer.h"
#include "store/graph.h"
#include "transport/transport.h"

namespace dmg::compute {

class Engine;

class StateArrayBase {
 public:
  static constexpr uint64_t kPageBytes = 4096;
  virtual ~StateArrayBase();
  StateArrayBase(const StateArrayBase&) = delete;
  StateArrayBase& operator=(const StateArrayBase&) = delete;

  const std::string& name() const { return name_; }
  uint64_t size() const { return n_; }

  // Records that v's value changed in the current superstep (thread-safe).
  void MarkDirty(store::VertexId v) {
    uint64_t page = v * elem_ / kPageBytes;
    std::atomic_ref<uint64_t> word(dirty_[page >> 6]);
    uint64_t mask = uint64_t{1} << (page & 63);
    if (!(word.load(std::memory_order_relaxed) & mask)) {
      word.fetch_or(mask, std::memory_order_relaxed);
    }
  }
  void MarkAllDirty();

  // Ends superstep `superstep` (1-based) for this array: writes the pages
  // changed in it or in the one before into buffer superstep % 2. Called by
  // Engine::EndSuperstep.
  absl::Status Commit(int superstep);
  // Reads elements [begin, end) of the version after `superstep` into dst.
  absl::Status ReadVersion(int superstep, uint64_t begin, uint64_t end,
                           void* dst);
  uint64_t pages_written() const { return pages_written_; }

 protected:
  StateArrayBase(Engine* engine, std::string name, uint64_t n,
                 size_t elem_size);
  std::byte* local_bytes() { return local_.data(); }

 private:
  friend class Engine;
  absl::Status Allocate();
  // Queues WRITEs of pages [first, last) of the local copy to `buffer` on
  // worker w's endpoint, in pieces of at most kMaxOp bytes.
  void QueueWrite(int w, int buffer, uint64_t first_page, uint64_t last_page);

  Engine* engine_;
  std::string name_;
  uint64_t n_;
  size_t elem_;
  uint64_t bytes_;
  uint64_t pages_;
  AlignedBuffer local_;
  transport::RegionInfo regions_[2];
  std::vector<uint64_t> dirty_, prev_dirty_;
  uint64_t pages_written_ = 0;
};

template <typename T>
class StateArray : public StateArrayBase {
 public:
  T* data() { return reinterpret_cast<T*>(local_bytes()); }
  T& operator[](store::VertexId v) { return data()[v]; }
  std::span<T> local() { return {data(), size()}; }

 private:
  friend class Engine;
  StateArray(Engine* engine, std::string name, uint64_t n, T initial)
      : StateArrayBase(engine, std::move(name), n, sizeof(T)) {
    std::fill(data(), data() + n, initial);
  }
};

}  // namespace dmg::compute

#endif  // DMG_COMPUTE_NODE_STATE_ARRAY_H_

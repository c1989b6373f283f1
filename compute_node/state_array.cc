#include "compute_node/state_array.h"

#include <algorithm>

#include "compute_node/engine.h"
#include "glog/logging.h"

namespace dmg::compute {
namespace {
constexpr uint64_t kMaxOp = 4 << 20;  // bytes per WRITE/READ
}

StateArrayBase::StateArrayBase(Engine* engine, std::string name, uint64_t n,
                               size_t elem_size)
    : engine_(engine),
      name_(std::move(name)),
      n_(n),
      elem_(elem_size),
      bytes_(n * elem_size),
      pages_((bytes_ + kPageBytes - 1) / kPageBytes),
      local_(bytes_),
      dirty_((pages_ + 63) / 64, 0),
      prev_dirty_((pages_ + 63) / 64, 0) {
  engine_->AddLocalStateBytes(static_cast<int64_t>(bytes_));
  engine_->Register(this);
}

StateArrayBase::~StateArrayBase() {
  engine_->AddLocalStateBytes(-static_cast<int64_t>(bytes_));
  engine_->Unregister(this);
  for (const transport::RegionInfo& r : regions_) {
    if (r.length == 0 || !engine_->healthy()) continue;
    absl::Status s = engine_->transport().FreeRegion(r.node, r.id);
    VLOG_IF(1, !s.ok()) << "freeing state region " << r.name << ": " << s;
  }
}

absl::Status StateArrayBase::Allocate() {
  for (int b = 0; b < 2; ++b) {
    absl::StatusOr<transport::RegionInfo> r =
        engine_->transport().AllocateRegion(0, std::max<uint64_t>(bytes_, 8),
                                            name_ + "." + std::to_string(b));
    if (!r.ok()) return r.status();
    regions_[b] = *r;
  }
  // Both versions start as the initial state (version "-1" and 0).
  WorkerPool& pool = engine_->pool();
  return pool.Run([&](int w) {
    uint64_t first = pages_ * w / pool.size(),
             last = pages_ * (w + 1) / pool.size();
    QueueWrite(w, 0, first, last);
    QueueWrite(w, 1, first, last);
    return pool.endpoint(w).Flush();
  });
}

void StateArrayBase::MarkAllDirty() {
  std::fill(dirty_.begin(), dirty_.end(), ~uint64_t{0});
}

void StateArrayBase::QueueWrite(int w, int buffer, uint64_t first_page,
                                uint64_t last_page) {
  uint64_t begin = first_page * kPageBytes;
  uint64_t end = std::min(last_page * kPageBytes, bytes_);
  for (uint64_t at = begin; at < end; at += kMaxOp) {
    uint64_t len = std::min(kMaxOp, end - at);
    engine_->pool().endpoint(w).Write(
        regions_[buffer].node, regions_[buffer].id, at, local_.data() + at,
        static_cast<uint32_t>(len));
  }
}

absl::Status StateArrayBase::Commit(int superstep) {
  const int buffer = superstep % 2;
  WorkerPool& pool = engine_->pool();
  std::vector<uint64_t> written(pool.size(), 0);
  absl::Status s = pool.Run([&](int w) {
    uint64_t first = pages_ * w / pool.size();
    uint64_t last = pages_ * (w + 1) / pool.size();
    auto needed = [&](uint64_t p) {
      return ((dirty_[p >> 6] | prev_dirty_[p >> 6]) >> (p & 63)) & 1;
    };
    // Coalesce runs of pages that need writing into single WRITEs.
    for (uint64_t p = first; p < last;) {
      if (!needed(p)) {
        ++p;
        continue;
      }
      uint64_t q = p;
      while (q < last && needed(q)) ++q;
      QueueWrite(w, buffer, p, q);
      written[w] += q - p;
      p = q;
    }
    return pool.endpoint(w).Flush();
  });
  for (uint64_t x : written) pages_written_ += x;
  prev_dirty_.swap(dirty_);
  std::fill(dirty_.begin(), dirty_.end(), 0);
  return s;
}

absl::Status StateArrayBase::ReadVersion(int superstep, uint64_t begin,
                                         uint64_t end, void* dst) {
  const int buffer = superstep % 2;
  WorkerPool& pool = engine_->pool();
  const uint64_t b0 = begin * elem_, b1 = end * elem_;
  return pool.Run([&](int w) {
    uint64_t first = b0 + (b1 - b0) * w / pool.size();
    uint64_t last = b0 + (b1 - b0) * (w + 1) / pool.size();
    for (uint64_t at = first; at < last; at += kMaxOp) {
      uint64_t len = std::min(kMaxOp, last - at);
      pool.endpoint(w).Read(regions_[buffer].node, regions_[buffer].id, at,
                            static_cast<std::byte*>(dst) + (at - b0),
                            static_cast<uint32_t>(len));
    }
    return pool.endpoint(w).Flush();
  });
}

}  // namespace dmg::compute

#include "compute_node/state_array.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_format.h"
#include "glog/logging.h"

namespace dmg::compute {
namespace {
constexpr uint64_t kMaxOp = 4 << 20;  // bytes per WRITE/READ
// Pages per batch when commit copies pages unchanged in this superstep
// from the previous buffer (a 64 KiB bounce buffer per worker).
constexpr size_t kCopyBatch = 16;
// Pages per chunk of bulk work (commit) handed out by the scheduler.
constexpr uint64_t kPagesPerChunk = kMaxOp / 4096;
}  // namespace

StateArrayBase::StateArrayBase(StateContext context, std::string name,
                               uint64_t n, size_t elem_size, CacheHint hint,
                               const void* initial)
    : ctx_(std::move(context)),
      name_(std::move(name)),
      n_(n),
      elem_(elem_size),
      bytes_(n * elem_size),
      pages_((bytes_ + kPageBytes - 1) / kPageBytes),
      hint_(hint),
      initial_(elem_size),
      dirty_((pages_ + 63) / 64, 0),
      prev_dirty_((pages_ + 63) / 64, 0),
      handles_(ctx_.pool->size()) {
  std::memcpy(initial_.data(), initial, elem_size);
}

StateArrayBase::~StateArrayBase() {
  ctx_.budget->Release(reserved_);
  if (cache_ != nullptr) {
    ReleasePins();
    cache_->Drop(this);
  }
  for (const transport::RegionInfo& r : regions_) {
    if (r.length == 0 || !ctx_.healthy()) continue;
    absl::Status s = ctx_.transport->FreeRegion(r.node, r.id);
    VLOG_IF(1, !s.ok()) << "freeing state region " << r.name << ": " << s;
  }
}

absl::Status StateArrayBase::Materialize(PageCache* cache, uint64_t reserved) {
  materialized_ = true;
  cache_ = cache;
  reserved_ = reserved;
  if (cache_ != nullptr) {
    cache_->Attach(this, pages_);
  } else {
    local_ = AlignedBuffer(bytes_);
  }
  for (int b = 0; b < 2; ++b) {
    absl::StatusOr<transport::RegionInfo> r = ctx_.transport->AllocateRegion(
        0, std::max<uint64_t>(bytes_, 8), name_ + "." + std::to_string(b));
    if (!r.ok()) return r.status();
    regions_[b] = *r;
  }
  const std::byte* initial = initial_.data();
  // Both versions start as the initial state: written from the local copy,
  // or (paged) from one page of the initial value repeated.
  std::vector<std::byte> pattern;
  if (cache_ != nullptr) {
    pattern.resize(std::min<uint64_t>(kMaxOp, bytes_));
    for (size_t at = 0; at < pattern.size(); at += elem_) {
      std::memcpy(pattern.data() + at, initial, elem_);
    }
  } else {
    for (uint64_t at = 0; at < bytes_; at += elem_) {
      std::memcpy(local_.data() + at, initial, elem_);
    }
  }
  // Chunks of kMaxOp bytes (whole pages), taken by whichever worker is free.
  return ctx_.scheduler->ForRanges(
      pages_, kMaxOp / kPageBytes,
      [&](int w, uint64_t first, uint64_t last) -> absl::Status {
        if (cache_ == nullptr) {
          QueueWrite(w, 0, first, last);
          QueueWrite(w, 1, first, last);
          return endpoint(w).Flush();
        }
        const uint64_t begin = first * kPageBytes;
        const uint64_t end = std::min(last * kPageBytes, bytes_);
        const uint32_t len = static_cast<uint32_t>(end - begin);
        for (int b = 0; b < 2; ++b) {
          endpoint(w).Write(regions_[b].node, regions_[b].id, begin,
                            pattern.data(), len);
        }
        return endpoint(w).Flush();
      });
}

void StateArrayBase::QueueWrite(int w, int buffer, uint64_t first_page,
                                uint64_t last_page) {
  uint64_t begin = first_page * kPageBytes;
  uint64_t end = std::min(last_page * kPageBytes, bytes_);
  for (uint64_t at = begin; at < end; at += kMaxOp) {
    uint64_t len = std::min(kMaxOp, end - at);
    endpoint(w).Write(regions_[buffer].node, regions_[buffer].id, at,
                      local_.data() + at, static_cast<uint32_t>(len));
  }
}

std::byte* StateArrayBase::PinSlow(int worker, uint64_t at) {
  Handle& h = handles_[worker];
  if (h.base != nullptr) {
    cache_->Unpin(this, h.page, h.dirty);
    h = Handle();
  }
  absl::StatusOr<std::byte*> page = cache_->Pin(worker, this, at / kPageBytes);
  if (!page.ok()) {
    MutexLock lock(&error_mu_);
    if (error_.ok()) error_ = page.status();
    return nullptr;
  }
  h = {at / kPageBytes, *page, false};
  return *page + at % kPageBytes;
}

void StateArrayBase::ReleasePins() {
  if (cache_ == nullptr) return;
  for (Handle& h : handles_) {
    if (h.base != nullptr) cache_->Unpin(this, h.page, h.dirty);
    h = Handle();
  }
}

absl::Status StateArrayBase::error() {
  MutexLock lock(&error_mu_);
  return error_;
}

absl::Status StateArrayBase::FetchPages(int worker, uint64_t first,
                                        uint64_t count, std::byte* const* dst) {
  // Written back during this superstep: the newest copy is in its buffer;
  // otherwise the previous version has it. One batch for all the pages.
  const int s = superstep() + 1;
  transport::Endpoint& ep = endpoint(worker);
  for (uint64_t k = 0; k < count; ++k) {
    uint64_t page = first + k;
    const int buffer = Bit(dirty_, page) ? s % 2 : (s + 1) % 2;
    ep.Read(regions_[buffer].node, regions_[buffer].id, page * kPageBytes,
            dst[k], static_cast<uint32_t>(PageLength(page)));
  }
  return ep.Flush();
}

absl::Status StateArrayBase::WriteBackPages(int worker,
                                            std::span<const DirtyPage> pages) {
  const int buffer = (superstep() + 1) % 2;
  transport::Endpoint& ep = endpoint(worker);
  for (const DirtyPage& p : pages) {
    ep.Write(regions_[buffer].node, regions_[buffer].id, p.page * kPageBytes,
             p.data, static_cast<uint32_t>(PageLength(p.page)));
  }
  return ep.Flush();
}

absl::Status StateArrayBase::Commit(int superstep) {
  const int buffer = superstep % 2;
  if (absl::Status s = error(); !s.ok()) return s;
  UnitScheduler& scheduler = *ctx_.scheduler;
  absl::Status status;
  if (cache_ == nullptr) {
    status = scheduler.ForRanges(
        pages_, kPagesPerChunk, [&](int w, uint64_t first, uint64_t last) {
          auto needed = [&](uint64_t p) {
            return Bit(dirty_, p) || Bit(prev_dirty_, p);
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
            p = q;
          }
          return endpoint(w).Flush();
        });
  } else {
    // Dirty cached pages go to this superstep's buffer...
    ReleasePins();
    status = cache_->FlushDirty(this);
    // ...and pages changed last superstep but not in this one are copied
    // over from the previous buffer (through the cache when it holds them).
    // Each worker copies its share in batches of kCopyBatch pages: one
    // round trip READs the uncached ones into a bounce buffer, a second
    // WRITEs them all.
    if (status.ok()) {
      const transport::RegionInfo& from = regions_[(superstep + 1) % 2];
      const transport::RegionInfo& to = regions_[buffer];
      std::vector<std::vector<std::byte>> bounces(scheduler.workers());
      status = scheduler.ForRanges(
          pages_, kPagesPerChunk, [&](int w, uint64_t first, uint64_t last) {
            transport::Endpoint& ep = endpoint(w);
            std::vector<std::byte>& bounce = bounces[w];
            bounce.resize(kCopyBatch * kPageBytes);
            std::vector<DirtyPage> batch;
            auto copy = [&]() -> absl::Status {
              if (absl::Status s = ep.Flush(); !s.ok()) return s;  // the READs
              for (const DirtyPage& p : batch) {
                ep.Write(to.node, to.id, p.page * kPageBytes, p.data,
                         static_cast<uint32_t>(PageLength(p.page)));
              }
              batch.clear();
              return ep.Flush();
            };
            for (uint64_t p = first; p < last; ++p) {
              if (!Bit(prev_dirty_, p) || Bit(dirty_, p)) continue;
              const std::byte* cached = cache_->Peek(this, p);
              if (cached == nullptr) {
                std::byte* slot = bounce.data() + batch.size() * kPageBytes;
                ep.Read(from.node, from.id, p * kPageBytes, slot,
                        static_cast<uint32_t>(PageLength(p)));
                cached = slot;
              }
              batch.push_back({p, cached});
              if (batch.size() == kCopyBatch) {
                if (absl::Status s = copy(); !s.ok()) return s;
              }
            }
            return batch.empty() ? absl::OkStatus() : copy();
          });
    }
  }
  prev_dirty_.swap(dirty_);
  std::fill(dirty_.begin(), dirty_.end(), 0);
  return status;
}

absl::Status StateArrayBase::ReadVersion(int superstep, uint64_t begin,
                                         uint64_t end, void* dst) {
  const int buffer = superstep % 2;
  const uint64_t b0 = begin * elem_, b1 = end * elem_;
  return ctx_.scheduler->ForRanges(
      b1 - b0, kMaxOp, [&](int w, uint64_t first, uint64_t last) {
        endpoint(w).Read(regions_[buffer].node, regions_[buffer].id, b0 + first,
                         static_cast<std::byte*>(dst) + first,
                         static_cast<uint32_t>(last - first));
        return endpoint(w).Flush();
      });
}

}  // namespace dmg::compute

#include "transport/transport.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_format.h"

namespace dmg::transport {

OpStats& OpStats::operator+=(const OpStats& o) {
  reads += o.reads;
  writes += o.writes;
  cas += o.cas;
  faa += o.faa;
  bytes_read += o.bytes_read;
  bytes_written += o.bytes_written;
  round_trips += o.round_trips;
  return *this;
}

OpStats OpStats::operator-(const OpStats& o) const {
  OpStats d;
  d.reads = reads - o.reads;
  d.writes = writes - o.writes;
  d.cas = cas - o.cas;
  d.faa = faa - o.faa;
  d.bytes_read = bytes_read - o.bytes_read;
  d.bytes_written = bytes_written - o.bytes_written;
  d.round_trips = round_trips - o.round_trips;
  return d;
}

uint64_t Endpoint::Post() {
  const uint64_t ticket = next_ticket_++;
  if (ops_.empty()) return ticket;
  for (const Op& op : ops_) {
    switch (op.kind) {
      case OpKind::kRead:
        ++stats_.reads;
        stats_.bytes_read += op.length;
        break;
      case OpKind::kWrite:
        ++stats_.writes;
        stats_.bytes_written += op.length;
        break;
      case OpKind::kCompareAndSwap:
        ++stats_.cas;
        stats_.bytes_read += 8;
        stats_.bytes_written += 8;
        break;
      case OpKind::kFetchAndAdd:
        ++stats_.faa;
        stats_.bytes_read += 8;
        stats_.bytes_written += 8;
        break;
    }
  }
  ++stats_.round_trips;
  ran_since_take_ = 1;
  inflight_.push_back({ticket, std::move(ops_), absl::OkStatus()});
  ops_.clear();
  if (!spare_ops_.empty()) {
    ops_ = std::move(spare_ops_.back());
    spare_ops_.pop_back();
  }
  Batch& b = inflight_.back();
  b.status = Begin(b.ops);
  return ticket;
}

absl::Status Endpoint::Wait(uint64_t ticket) {
  absl::Status first;
  for (auto it = failed_early_.begin(); it != failed_early_.end(); ++it) {
    if (it->first == ticket) {
      first = it->second;
      failed_early_.erase(it);
      break;
    }
  }
  while (!inflight_.empty() && inflight_.front().ticket <= ticket) {
    Batch& b = inflight_.front();
    absl::Status s = b.status.ok() ? End(b.ops) : b.status;
    if (first.ok()) first = s;
    if (!s.ok() && b.ticket != ticket) {
      constexpr size_t kKept = 64;
      if (failed_early_.size() == kKept) failed_early_.pop_front();
      failed_early_.emplace_back(b.ticket, s);
    }
    // A few spares suffice: one per batch that may be in flight at once.
    constexpr size_t kSpares = 8;
    if (spare_ops_.size() < kSpares) {
      b.ops.clear();
      spare_ops_.push_back(std::move(b.ops));
    }
    inflight_.pop_front();
  }
  return first;
}

absl::Status CheckFill(const RegionFill& fill, uint64_t bytes,
                       const std::string& name) {
  const bool element =
      fill.width == 1 || fill.width == 2 || fill.width == 4 || fill.width == 8;
  if (fill.width == 0 || (element && bytes % fill.width == 0)) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "region '%s' of %d bytes cannot be filled by %d-byte elements", name,
      bytes, fill.width));
}

void FillBytes(std::byte* p, uint64_t bytes, const RegionFill& fill) {
  if (fill.width == 0 || fill.pattern == 0) {
    std::memset(p, 0, bytes);
    return;
  }
  // One element, then doubling copies of what is already there.
  const uint64_t first = std::min<uint64_t>(fill.width, bytes);
  std::memcpy(p, &fill.pattern, first);
  for (uint64_t done = first; done < bytes;) {
    const uint64_t n = std::min(done, bytes - done);
    std::memcpy(p + done, p, n);
    done += n;
  }
}

}  // namespace dmg::transport

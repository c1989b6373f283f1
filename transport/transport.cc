#include "transport/transport.h"

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

absl::Status Endpoint::Flush() {
  if (ops_.empty()) return absl::OkStatus();
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
  absl::Status s = Execute(ops_);
  ops_.clear();
  return s;
}

}  // namespace dmg::transport

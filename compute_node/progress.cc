#include "compute_node/progress.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <set>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "store/block_format.h"

namespace dmg::compute {
namespace {

constexpr uint64_t kWordAt = 16;
constexpr uint64_t kMaxOp = 4 << 20;  // bytes per WRITE/READ

uint32_t Crc(const void* p, size_t n) {
  return store::Crc32({static_cast<const std::byte*>(p), n});
}

// Queues a READ or WRITE of [offset, offset + n) of r in pieces.
void Queue(transport::Endpoint& ep, bool write, const transport::RegionInfo& r,
           uint64_t offset, std::byte* local, uint64_t n) {
  while (n > 0) {
    const uint32_t piece = static_cast<uint32_t>(std::min(n, kMaxOp));
    if (write) {
      ep.Write(r.node, r.id, offset, local, piece);
    } else {
      ep.Read(r.node, r.id, offset, local, piece);
    }
    offset += piece;
    local += piece;
    n -= piece;
  }
}

}  // namespace

Progress::~Progress() {
  if (abandoned_) return;
  allocated_.insert(allocated_.end(), found_.begin(), found_.end());
  for (const transport::RegionInfo& r : allocated_) {
    absl::Status s = transport_.FreeRegion(r.node, r.id);
    VLOG_IF(1, !s.ok()) << "freeing progress region " << r.name << ": " << s;
  }
}

std::string Progress::FrontierName(size_t k, int b) const {
  return absl::StrFormat("%s.frontier.%d.%d", name_, k, b);
}

void Progress::Adopt(std::vector<transport::RegionInfo>& regions) {
  std::erase_if(regions, [&](const transport::RegionInfo& r) {
    if (r.node != 0 ||
        (r.name != name_ && !r.name.starts_with(name_ + ".frontier."))) {
      return false;
    }
    found_.push_back(r);
    return true;
  });
}

absl::StatusOr<transport::RegionInfo> Progress::Region(const std::string& name,
                                                       uint64_t bytes) {
  auto it = std::find_if(found_.begin(), found_.end(), [&](const auto& r) {
    return r.name == name && r.length >= bytes;
  });
  transport::RegionInfo r;
  if (it != found_.end()) {
    r = *it;
    found_.erase(it);
  } else {
    DMG_ASSIGN_OR_RETURN(r, transport_.AllocateRegion(0, bytes, name));
  }
  allocated_.push_back(r);
  return r;
}

absl::Status Progress::FrontierRegions() {
  frontier_regions_.clear();
  for (size_t k = 0; k < carried_.size(); ++k) {
    if (carried_[k].frontier == nullptr) continue;
    std::array<transport::RegionInfo, 2> pair;
    for (int b = 0; b < 2; ++b) {
      DMG_ASSIGN_OR_RETURN(pair[b],
                           Region(FrontierName(k, b), FrontierRegionBytes()));
    }
    frontier_regions_.push_back(pair);
  }
  return absl::OkStatus();
}

absl::Status Progress::CheckCarried() const {
  uint64_t bytes = 0;
  std::set<std::string> names;
  for (const Carried& c : carried_) {
    if (!names.insert(c.name).second) {
      return absl::InvalidArgumentError("two carried values named '" + c.name +
                                        "'");
    }
    bytes += c.bytes;
  }
  if (bytes > kMaxScalarBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "carried values take %d bytes; a progress record holds %d", bytes,
        kMaxScalarBytes));
  }
  return absl::OkStatus();
}

absl::Status Progress::Start(transport::Endpoint& ep, uint64_t signature,
                             std::vector<Carried> carried) {
  carried_ = std::move(carried);
  DMG_RETURN_IF_ERROR(CheckCarried());
  DMG_ASSIGN_OR_RETURN(record_, Region(name_, kRecordBytes));
  DMG_RETURN_IF_ERROR(FrontierRegions());
  epoch_ = 1;
  word_ = uint64_t{epoch_} << 32;
  const uint64_t head[3] = {kMagic, signature, word_};
  ep.Write(record_.node, record_.id, 0, head, sizeof(head));
  DMG_RETURN_IF_ERROR(ep.Flush());
  started_ = true;
  return absl::OkStatus();
}

void Progress::Stage(transport::Endpoint& ep, int checkpoint, int superstep) {
  if (!started_) return;
  if (superstep < 0) superstep = checkpoint;
  const int b = checkpoint % 2;
  // The scalars, into slot b.
  std::vector<std::byte>& slot = staged_slot_;
  slot.assign(kSlotHeader, std::byte{0});
  for (const Carried& c : carried_) {
    if (c.frontier != nullptr) continue;
    const auto* p = static_cast<const std::byte*>(c.data);
    slot.insert(slot.end(), p, p + c.bytes);
  }
  const uint32_t length = static_cast<uint32_t>(slot.size() - kSlotHeader);
  const uint32_t crc = Crc(slot.data() + kSlotHeader, length);
  const uint64_t step = static_cast<uint64_t>(checkpoint);
  const uint64_t where = (static_cast<uint64_t>(superstep) << 32) | step;
  std::memcpy(slot.data(), &length, 4);
  std::memcpy(slot.data() + 4, &crc, 4);
  std::memcpy(slot.data() + 8, &where, 8);
  ep.Write(record_.node, record_.id, kSlotAt + b * kSlotBytes, slot.data(),
           static_cast<uint32_t>(slot.size()));
  // Each frontier into its region b: members, or a bitmap when smaller.
  std::vector<std::vector<std::byte>>& frontiers = staged_frontiers_;
  frontiers.clear();
  size_t k = 0;
  for (const Carried& c : carried_) {
    if (c.frontier == nullptr) continue;
    const Frontier& f = *c.frontier;
    const uint64_t list_bytes = f.size() * sizeof(VertexId);
    const uint64_t map_bytes = f.words().size() * 8;
    const bool bitmap = map_bytes < list_bytes;
    std::vector<std::byte>& out = frontiers.emplace_back(
        kFrontierHeader + (bitmap ? map_bytes : list_bytes));
    std::byte* data = out.data() + kFrontierHeader;
    if (bitmap) {
      std::memcpy(data, f.words().data(), map_bytes);
    } else if (list_bytes > 0) {
      std::memcpy(data, f.vertices().data(), list_bytes);
    }
    const uint64_t members = f.size() | (bitmap ? kBitmap : 0);
    const uint32_t fcrc = Crc(data, out.size() - kFrontierHeader);
    std::memcpy(out.data(), &step, 8);
    std::memcpy(out.data() + 8, &members, 8);
    std::memcpy(out.data() + 16, &fcrc, 4);
  }
  // (Queued once every buffer is in place: emplace_back may move them.)
  for (std::vector<std::byte>& out : frontiers) {
    Queue(ep, /*write=*/true, frontier_regions_[k++][b], 0, out.data(),
          out.size());
  }
  staged_word_ = (uint64_t{epoch_} << 32) | step;
}

absl::Status Progress::Seal(transport::Endpoint& ep) {
  if (!started_ || staged_word_ == 0) return absl::OkStatus();
  const uint64_t next = staged_word_;
  staged_word_ = 0;
  // The checkpoint's WRITEs queued here may share the swap's batch when
  // they go to the record's node (it applies them in order); others must
  // have completed first.
  if (!ep.QueuedOnlyTo(record_.node)) DMG_RETURN_IF_ERROR(ep.Flush());
  // Then the word: checkpoint - 1 -> checkpoint, in this node's epoch.
  uint64_t old = 0;
  ep.CompareAndSwap(record_.node, record_.id, kWordAt, word_, next, &old);
  DMG_RETURN_IF_ERROR(ep.Flush());
  if (old != word_) {
    return absl::AbortedError(absl::StrFormat(
        "job '%s' was taken over by another compute node (attempt %d, a "
        "`dmg run --resume`) at superstep %d: this one (attempt %d) stops",
        job_, old >> 32, old & 0xffffffff, epoch_));
  }
  word_ = next;
  return absl::OkStatus();
}

std::vector<transport::RegionInfo>::iterator Progress::FoundRecord() {
  return std::find_if(found_.begin(), found_.end(), [&](const auto& r) {
    return r.name == name_ && r.length >= kRecordBytes;
  });
}

absl::Status Progress::ReadRecord(transport::Endpoint& ep,
                                  const transport::RegionInfo& r,
                                  uint64_t signature,
                                  std::vector<std::byte>& record) {
  record.resize(kRecordBytes);
  ep.Read(r.node, r.id, 0, record.data(), kRecordBytes);
  DMG_RETURN_IF_ERROR(ep.Flush());
  uint64_t head[2];
  std::memcpy(head, record.data(), sizeof(head));
  if (head[0] == 0 && head[1] == 0) {
    // Allocated, never written: that attempt died before it began.
    record.clear();
    return absl::OkStatus();
  }
  if (head[0] != kMagic) {
    return absl::DataLossError(absl::StrFormat(
        "the progress record of job '%s' on memory node 0 is damaged (bad "
        "magic): start the job again without --resume",
        job_));
  }
  if (head[1] != signature) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "job '%s' on the memory nodes was started with another algorithm, "
        "source, arguments, graph or compute-node count: resume it with the "
        "arguments it was started with, or run without --resume (its state "
        "is then discarded)",
        job_));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> Progress::Completed(transport::Endpoint& ep,
                                        uint64_t signature) {
  auto it = FoundRecord();
  if (it == found_.end()) return 0;
  std::vector<std::byte> record;
  DMG_RETURN_IF_ERROR(ReadRecord(ep, *it, signature, record));
  if (record.empty()) return 0;
  uint64_t word;
  std::memcpy(&word, record.data() + kWordAt, 8);
  return static_cast<int>(word & 0xffffffff);
}

absl::StatusOr<int> Progress::TakeOver(transport::Endpoint& ep,
                                       uint64_t signature,
                                       std::vector<Carried> carried,
                                       int superstep) {
  auto it = FoundRecord();
  if (it == found_.end()) return 0;
  std::vector<std::byte> record;
  DMG_RETURN_IF_ERROR(ReadRecord(ep, *it, signature, record));
  if (record.empty()) return 0;
  uint64_t head[3];
  std::memcpy(head, record.data(), sizeof(head));
  const int last = static_cast<int>(head[2] & 0xffffffff);
  const int done = superstep < 0 ? last : superstep;
  if (done == 0) return 0;
  if (done > last || done < last - 1) {
    // The superstep's values are in one of the two slots only if it is
    // the last complete one or the one before.
    return absl::DataLossError(absl::StrFormat(
        "job '%s': this compute node's record is at superstep %d, too far "
        "from the job's %d: start the job again without --resume",
        job_, last, done));
  }
  carried_ = std::move(carried);
  DMG_RETURN_IF_ERROR(CheckCarried());
  // Take the job over: a node of the old attempt now fails its next CAS.
  // The word names the superstep resumed from (the next Record follows it).
  const uint32_t old_epoch = static_cast<uint32_t>(head[2] >> 32);
  const uint64_t mine =
      (uint64_t{old_epoch + 1} << 32) | static_cast<uint64_t>(done);
  uint64_t seen = 0;
  ep.CompareAndSwap(it->node, it->id, kWordAt, head[2], mine, &seen);
  DMG_RETURN_IF_ERROR(ep.Flush());
  if (seen != head[2]) {
    return absl::AbortedError(absl::StrFormat(
        "job '%s' moved on while this node resumed it (another compute node "
        "runs it): stop that one first",
        job_));
  }
  record_ = *it;
  found_.erase(it);
  allocated_.push_back(record_);
  epoch_ = old_epoch + 1;
  word_ = mine;
  // The scalars of superstep `done`.
  const std::byte* slot = record.data() + kSlotAt + (done % 2) * kSlotBytes;
  uint32_t length, crc;
  uint64_t where;
  std::memcpy(&length, slot, 4);
  std::memcpy(&crc, slot + 4, 4);
  std::memcpy(&where, slot + 8, 8);
  const uint64_t step = where & 0xffffffff;
  resumed_superstep_ =
      where >> 32 != 0 ? static_cast<int>(where >> 32) : static_cast<int>(step);
  uint64_t want = 0;
  for (const Carried& c : carried_) want += c.frontier ? 0 : c.bytes;
  if (step != static_cast<uint64_t>(done) || length != want ||
      Crc(slot + kSlotHeader, length) != crc) {
    return absl::DataLossError(absl::StrFormat(
        "the progress record of job '%s' does not hold superstep %d's values "
        "(slot of superstep %d, %d bytes, checksum %s): start the job again "
        "without --resume",
        job_, done, step, length,
        Crc(slot + kSlotHeader, std::min<uint64_t>(length, kMaxScalarBytes)) ==
                crc
            ? "ok"
            : "wrong"));
  }
  const std::byte* at = slot + kSlotHeader;
  for (const Carried& c : carried_) {
    if (c.frontier != nullptr) continue;
    std::memcpy(c.data, at, c.bytes);
    at += c.bytes;
  }
  // The frontiers of superstep `done`.
  DMG_RETURN_IF_ERROR(FrontierRegions());
  size_t f = 0;
  for (const Carried& c : carried_) {
    if (c.frontier == nullptr) continue;
    DMG_RETURN_IF_ERROR(
        RestoreFrontier(ep, c, frontier_regions_[f++][done % 2], done));
  }
  started_ = true;
  return done;
}

absl::Status Progress::RestoreFrontier(transport::Endpoint& ep,
                                       const Carried& c,
                                       const transport::RegionInfo& r,
                                       int superstep) {
  auto damaged = [&](const char* what) {
    return absl::DataLossError(absl::StrFormat(
        "the saved frontier '%s' of job '%s' (superstep %d) is damaged: %s; "
        "start the job again without --resume",
        c.name, job_, superstep, what));
  };
  std::byte head[kFrontierHeader];
  ep.Read(r.node, r.id, 0, head, kFrontierHeader);
  DMG_RETURN_IF_ERROR(ep.Flush());
  uint64_t step, members;
  uint32_t crc;
  std::memcpy(&step, head, 8);
  std::memcpy(&members, head + 8, 8);
  std::memcpy(&crc, head + 16, 4);
  if (step != static_cast<uint64_t>(superstep))
    return damaged("wrong superstep");
  const bool bitmap = (members & kBitmap) != 0;
  const uint64_t count = members & ~kBitmap;
  const uint64_t bytes =
      bitmap ? ((n_ + 63) / 64) * 8 : count * sizeof(VertexId);
  if (count > n_ || kFrontierHeader + bytes > r.length) {
    return damaged("more members than vertices");
  }
  scratch_.resize(bytes);
  Queue(ep, /*write=*/false, r, kFrontierHeader, scratch_.data(), bytes);
  DMG_RETURN_IF_ERROR(ep.Flush());
  if (Crc(scratch_.data(), bytes) != crc) return damaged("checksum mismatch");
  Frontier& f = *c.frontier;
  f.Clear();
  uint64_t added = 0;
  if (bitmap) {
    for (uint64_t k = 0; k < bytes / 8; ++k) {
      uint64_t word;
      std::memcpy(&word, scratch_.data() + 8 * k, 8);
      for (; word != 0; word &= word - 1) {
        const uint64_t v = k * 64 + std::countr_zero(word);
        if (v >= n_) return damaged("a member beyond the graph");
        f.Add(0, static_cast<VertexId>(v));
        ++added;
      }
    }
  } else {
    for (uint64_t k = 0; k < count; ++k) {
      VertexId v;
      std::memcpy(&v, scratch_.data() + k * sizeof(VertexId), sizeof(v));
      if (v >= n_) return damaged("a member beyond the graph");
      f.Add(0, v);
      ++added;
    }
  }
  f.Seal();
  if (added != count || f.size() != count) return damaged("member count");
  return absl::OkStatus();
}

}  // namespace dmg::compute

#include "compute_node/state_slices.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_format.h"
#include "glog/logging.h"

namespace dmg::compute {

StateSlices::StateSlices(std::string name, uint64_t bytes, size_t elem,
                         const std::vector<uint64_t>& bounds, int node)
    : name_(std::move(name)), node_(bounds.empty() ? 0 : node) {
  const int nodes = bounds.empty() ? 1 : static_cast<int>(bounds.size()) - 1;
  slices_.assign(nodes, Slice());
  for (int k = 0; k < nodes; ++k) {
    slices_[k].begin = bounds.empty() ? 0 : bounds[k] * elem;
    slices_[k].end = k + 1 == nodes ? bytes : bounds[k + 1] * elem;
  }
  slices_[node_].mine = true;
}

uint64_t StateSlices::OwnRegionBytes() const {
  return std::max<uint64_t>((own().end - own().begin + 7) / 8 * 8, 8);
}

absl::Status StateSlices::AllocateOwn(transport::Transport& transport,
                                      const transport::RegionFill& fill) {
  Slice& own = slices_[node_];
  for (int b = 0; b < 2; ++b) {
    absl::StatusOr<transport::RegionInfo> r = transport.AllocateFilledRegion(
        node_ % transport.num_memory_nodes(), OwnRegionBytes(),
        count() == 1 ? name_ + "." + std::to_string(b)
                     : absl::StrFormat("%s.%d.%d", name_, b, node_),
        fill);
    if (!r.ok()) return r.status();
    own.region[b] = *r;
  }
  return absl::OkStatus();
}

absl::Status StateSlices::AdoptOwn(const transport::RegionInfo (&regions)[2]) {
  const uint64_t need = OwnRegionBytes();
  for (const transport::RegionInfo& r : regions) {
    if (r.length < need) {
      return absl::DataLossError(absl::StrFormat(
          "state '%s' left by the job's earlier attempt is %d bytes, not %d",
          name_, r.length, need));
    }
  }
  slices_[node_].region[0] = regions[0];
  slices_[node_].region[1] = regions[1];
  return absl::OkStatus();
}

void StateSlices::FreeOwn(transport::Transport& transport) {
  for (transport::RegionInfo& r : slices_[node_].region) {
    if (r.length == 0) continue;
    absl::Status s = transport.FreeRegion(r.node, r.id);
    VLOG_IF(1, !s.ok()) << "freeing state region " << r.name << ": " << s;
    r = transport::RegionInfo();
  }
}

std::string StateSlices::Post(bool resident) const {
  uint32_t words[5];
  for (int b = 0; b < 2; ++b) {
    words[2 * b] = own().region[b].node;
    words[2 * b + 1] = own().region[b].id;
  }
  words[4] = resident ? 1 : 0;
  return std::string(reinterpret_cast<const char*>(words), sizeof(words));
}

absl::Status StateSlices::TakePosts(const std::vector<std::string>& posts,
                                    bool resident_here) {
  if (posts.size() != slices_.size()) {
    return absl::DataLossError(
        absl::StrFormat("state '%s': %d slices posted for %d compute nodes",
                        name_, posts.size(), slices_.size()));
  }
  bool all = resident_here;
  for (int k = 0; k < count(); ++k) {
    if (k == node_) continue;
    uint32_t words[5];
    if (posts[k].size() != sizeof(words)) {
      return absl::DataLossError(absl::StrFormat(
          "compute node %d posted a malformed slice of state '%s'", k, name_));
    }
    std::memcpy(words, posts[k].data(), sizeof(words));
    all = all && words[4] != 0;
    for (int b = 0; b < 2; ++b) {
      slices_[k].region[b].node = words[2 * b];
      slices_[k].region[b].id = words[2 * b + 1];
      slices_[k].region[b].length = slices_[k].end - slices_[k].begin;
    }
  }
  all_resident_ = all;
  return absl::OkStatus();
}

void StateSlices::Queue(transport::Endpoint& ep, bool write, int buffer,
                        uint64_t at, std::byte* local, uint64_t length) const {
  while (length > 0) {
    const Slice& s = At(at);
    const uint64_t n = std::min({length, s.end - at, kMaxOp});
    const transport::RegionInfo& r = s.region[buffer];
    if (write) {
      ep.Write(r.node, r.id, at - s.begin, local, static_cast<uint32_t>(n));
    } else {
      ep.Read(r.node, r.id, at - s.begin, local, static_cast<uint32_t>(n));
    }
    at += n;
    local += n;
    length -= n;
  }
}

}  // namespace dmg::compute

#include "compute_node/source_mirrors.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "compute_node/wire_codec.h"
#include "glog/logging.h"

namespace dmg::compute {

namespace {

enum Item : uint64_t {
  kNeeds = 1,
  kWant = 2,
  kRegion = 3,
  kWritten = 4,
  kUnwant = 5
};

}  // namespace

SourceMirrors::SourceMirrors(transport::Transport& transport,
                             std::vector<uint64_t> bounds, int node)
    : transport_(transport),
      bounds_(std::move(bounds)),
      node_(node),
      nodes_(static_cast<int>(bounds_.size()) - 1) {
  for (int d = 0; d < 2; ++d) {
    needs_[d].assign(nodes_, {});
    needs_known_[d].assign(nodes_, false);
  }
}

SourceMirrors::~SourceMirrors() {
  for (Array& a : arrays_) {
    for (transport::RegionInfo& r : a.own.region) {
      if (r.length == 0) continue;
      absl::Status s = transport_.FreeRegion(r.node, r.id);
      VLOG_IF(1, !s.ok()) << "freeing packed copy " << r.name << ": " << s;
    }
  }
}

SourceMirrors::Array& SourceMirrors::At(size_t array) {
  while (arrays_.size() <= array) {
    arrays_.emplace_back();
    arrays_.back().from.assign(nodes_, Copy());
  }
  return arrays_[array];
}

void SourceMirrors::SetNeeds(int d, const std::vector<uint64_t>& bits) {
  if (nodes_ < 2 || nodes_ > 64 || needs_known_[d][node_] ||
      needs_to_post_[d]) {
    return;
  }
  my_needs_[d] = bits;
  needs_to_post_[d] = true;
}

void SourceMirrors::Want(size_t array, int d) {
  Array& a = At(array);
  if (a.my_want < 0 && !a.want_posted && !a.dropped) a.my_want = d;
}

void SourceMirrors::Drop(size_t array) { At(array).dropped = true; }

absl::Status SourceMirrors::Allocate(Array& a, size_t array, uint64_t elem) {
  const uint64_t bytes = std::max<uint64_t>(
      8, (layout_[a.wanted_d]->own_order().size() * elem + 7) / 8 * 8);
  for (int b = 0; b < 2; ++b) {
    absl::StatusOr<transport::RegionInfo> r = transport_.AllocateRegion(
        node_ % transport_.num_memory_nodes(), bytes,
        absl::StrFormat("mirror.%d.%d.%d", array, b, node_));
    if (!r.ok()) return r.status();
    a.own.region[b] = *r;
  }
  a.own.d = a.wanted_d;
  return absl::OkStatus();
}

absl::Status SourceMirrors::WritePacked(transport::Endpoint& ep, int superstep,
                                        StateArrayBase& state, Copy& own) {
  std::span<const store::VertexId> order = layout_[own.d]->own_order();
  const uint64_t elem = state.elem_size();
  scratch_.resize(std::max<uint64_t>(8, order.size() * elem));
  state.PackElements(order, scratch_.data());
  const transport::RegionInfo& r = own.region[(superstep + 1) % 2];
  const uint64_t bytes = order.size() * elem;
  constexpr uint64_t kMaxOp = 4 << 20;
  for (uint64_t at = 0; at < bytes; at += kMaxOp) {
    ep.Write(r.node, r.id, at, scratch_.data() + at,
             static_cast<uint32_t>(std::min(kMaxOp, bytes - at)));
  }
  return ep.Flush();
}

absl::Status SourceMirrors::Put(transport::Endpoint& ep, int superstep,
                                std::span<StateArrayBase* const> arrays,
                                const std::vector<bool>& changed,
                                std::string& out) {
  std::string items;
  uint64_t count = 0;
  for (int d = 0; d < 2; ++d) {
    if (!needs_to_post_[d]) continue;
    PutVarint(items, kNeeds);
    PutVarint(items, d);
    wire::PutVertexSet(items, my_needs_[d]);
    needs_to_post_[d] = false;
    ++count;
  }
  for (size_t i = 0; i < arrays_.size(); ++i) {
    Array& a = arrays_[i];
    if (a.my_want >= 0 && !a.want_posted) {
      PutVarint(items, kWant);
      PutVarint(items, i);
      PutVarint(items, a.my_want);
      a.want_posted = true;
      ++count;
    }
    if (a.dropped && a.want_posted && !a.unwant_posted) {
      PutVarint(items, kUnwant);
      PutVarint(items, i);
      a.unwant_posted = true;
      ++count;
    }
    // Copies are written while some other node wants them.
    const bool others_want = (a.wanters & ~(uint64_t{1} << node_)) != 0;
    const uint64_t elem = i < arrays.size() ? arrays[i]->elem_size() : 0;
    if (!others_want || i >= arrays.size() || a.wanted_d < 0 ||
        !layout_[a.wanted_d] || !arrays[i]->resident() || elem > 8 ||
        (elem & (elem - 1)) != 0) {
      continue;
    }
    if (a.own.d < 0) {
      DMG_RETURN_IF_ERROR(Allocate(a, i, elem));
      PutVarint(items, kRegion);
      PutVarint(items, i);
      PutVarint(items, a.own.d);
      for (const transport::RegionInfo& r : a.own.region) {
        PutVarint(items, r.node);
        PutVarint(items, r.id);
        PutVarint(items, r.length);
      }
      ++count;
    }
    // A copy first posted now holds nothing yet: written with the changes.
    if (i < changed.size() && changed[i]) {
      DMG_RETURN_IF_ERROR(WritePacked(ep, superstep, *arrays[i], a.own));
      PutVarint(items, kWritten);
      PutVarint(items, i);
      ++count;
    }
  }
  PutVarint(out, count);
  out.append(items);
  return absl::OkStatus();
}

absl::Status SourceMirrors::Take(int k, int superstep, std::string_view& in,
                                 const std::vector<bool>& changed) {
  auto malformed = [k](const char* what) {
    return absl::DataLossError(absl::StrFormat(
        "compute node %d posted a malformed source-mirror item (%s)", k, what));
  };
  // A change the post does not say was written voids k's copy.
  for (size_t i = 0; i < changed.size() && i < arrays_.size(); ++i) {
    if (changed[i]) arrays_[i].from[k].written_step = -1;
  }
  uint64_t count = 0;
  if (!GetVarint(in, &count)) return malformed("count");
  for (uint64_t n = 0; n < count; ++n) {
    uint64_t kind = 0, i = 0, d = 0;
    if (!GetVarint(in, &kind)) return malformed("kind");
    if (kind == kNeeds) {
      if (!GetVarint(in, &d) || d > 1) return malformed("direction");
      const uint64_t n_vertices = bounds_.back();
      std::vector<uint64_t>& bits = needs_[d][k];
      bits.assign((n_vertices + 63) / 64, 0);
      if (!wire::GetVertexSet(in, n_vertices, [&](uint64_t v) {
            bits[v >> 6] |= uint64_t{1} << (v & 63);
          })) {
        return malformed("needs");
      }
      needs_known_[d][k] = true;
      if (std::all_of(needs_known_[d].begin(), needs_known_[d].end(),
                      [](bool b) { return b; })) {
        std::vector<std::span<const uint64_t>> all(needs_[d].begin(),
                                                   needs_[d].end());
        layout_[d].emplace(bounds_, node_, all);
        // Only the layout is kept.
        for (std::vector<uint64_t>& b : needs_[d]) {
          std::vector<uint64_t>().swap(b);
        }
      }
      continue;
    }
    // (Programs declare a few arrays; a bound keeps a bad post small.)
    if (!GetVarint(in, &i) || i >= 4096) return malformed("array");
    Array& a = At(i);
    if (kind == kWant) {
      if (!GetVarint(in, &d) || d > 1) return malformed("direction");
      if (a.wanted_d < 0) a.wanted_d = static_cast<int>(d);
      a.wanters |= uint64_t{1} << k;
    } else if (kind == kUnwant) {
      a.wanters &= ~(uint64_t{1} << k);
    } else if (kind == kRegion) {
      Copy& c = a.from[k];
      if (!GetVarint(in, &d) || d > 1) return malformed("direction");
      c.d = static_cast<int>(d);
      for (transport::RegionInfo& r : c.region) {
        uint64_t node = 0, id = 0, length = 0;
        if (!GetVarint(in, &node) || !GetVarint(in, &id) ||
            !GetVarint(in, &length)) {
          return malformed("region");
        }
        if (k != node_) {
          r.node = static_cast<uint32_t>(node);
          r.id = static_cast<uint32_t>(id);
          r.length = length;
        }
      }
    } else if (kind == kWritten) {
      a.from[k].written_step = superstep;
    } else {
      return malformed("kind");
    }
  }
  return absl::OkStatus();
}

void SourceMirrors::Invalidate(size_t array) {
  if (array >= arrays_.size()) return;
  for (Copy& c : arrays_[array].from) c.written_step = -1;
}

const MirrorSource* SourceMirrors::For(size_t array, int d, int superstep) {
  if (array >= arrays_.size() || !layout_[d]) return nullptr;
  Array& a = arrays_[array];
  if (a.dropped) return nullptr;
  a.source.layout = &*layout_[d];
  a.source.regions.assign(nodes_, transport::RegionInfo());
  bool any = false;
  for (int k = 0; k < nodes_; ++k) {
    const Copy& c = a.from[k];
    if (k == node_ || c.d != d || c.written_step != superstep - 1) continue;
    a.source.regions[k] = c.region[superstep % 2];
    any = true;
  }
  return any ? &a.source : nullptr;
}

}  // namespace dmg::compute

#include "transport/local_transport.h"

#include "absl/strings/str_format.h"

namespace dmg::transport {
namespace {

class LocalEndpoint : public Endpoint {
 public:
  explicit LocalEndpoint(std::vector<MemoryTarget*> nodes)
      : nodes_(std::move(nodes)) {}

 protected:
  absl::Status Execute(std::span<const Op> ops) override {
    for (size_t k = 0; k < ops.size(); ++k) {
      const Op& op = ops[k];
      if (op.node >= nodes_.size()) {
        return absl::InvalidArgumentError(
            absl::StrFormat("no memory node %d", op.node));
      }
      MemoryTarget* t = nodes_[op.node];
      if (op.kind == OpKind::kRead || op.kind == OpKind::kWrite) {
        // A run of READs (or of WRITEs) for one node is served in one
        // call, in order.
        size_t end = k + 1;
        while (end < ops.size() && ops[end].kind == op.kind &&
               ops[end].node == op.node) {
          ++end;
        }
        std::span<const Op> run = ops.subspan(k, end - k);
        if (absl::Status s = op.kind == OpKind::kRead ? t->ServeReads(run)
                                                      : t->ServeWrites(run);
            !s.ok()) {
          return s;
        }
        k = end - 1;
        continue;
      }
      absl::Status s;
      switch (op.kind) {
        case OpKind::kRead:
          s = t->ServeRead(op.region, op.offset, op.local, op.length);
          break;
        case OpKind::kWrite:
          s = t->ServeWrite(op.region, op.offset, op.local, op.length);
          break;
        case OpKind::kCompareAndSwap: {
          absl::StatusOr<uint64_t> old = t->ServeCompareAndSwap(
              op.region, op.offset, op.compare, op.operand);
          if (old.ok()) *static_cast<uint64_t*>(op.local) = *old;
          s = old.status();
          break;
        }
        case OpKind::kFetchAndAdd: {
          absl::StatusOr<uint64_t> old =
              t->ServeFetchAndAdd(op.region, op.offset, op.operand);
          if (old.ok()) *static_cast<uint64_t*>(op.local) = *old;
          s = old.status();
          break;
        }
      }
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }

 private:
  std::vector<MemoryTarget*> nodes_;
};

}  // namespace

absl::StatusOr<MemoryTarget*> LocalTransport::Node(uint32_t node) {
  if (node >= nodes_.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "no memory node %d (cluster has %d)", node, nodes_.size()));
  }
  return nodes_[node];
}

absl::StatusOr<std::unique_ptr<Endpoint>> LocalTransport::NewEndpoint() {
  return std::make_unique<LocalEndpoint>(nodes_);
}

absl::StatusOr<RegionInfo> LocalTransport::AllocateRegion(
    uint32_t node, uint64_t bytes, const std::string& name) {
  absl::StatusOr<MemoryTarget*> t = Node(node);
  if (!t.ok()) return t.status();
  return (*t)->ServeAllocate(bytes, name);
}

absl::StatusOr<RegionInfo> LocalTransport::AllocateFilledRegion(
    uint32_t node, uint64_t bytes, const std::string& name,
    const RegionFill& fill) {
  absl::StatusOr<MemoryTarget*> t = Node(node);
  if (!t.ok()) return t.status();
  if (absl::Status s = CheckFill(fill, bytes, name); !s.ok()) return s;
  return (*t)->ServeAllocateFilled(bytes, name, fill);
}

absl::Status LocalTransport::FreeRegion(uint32_t node, uint32_t region) {
  absl::StatusOr<MemoryTarget*> t = Node(node);
  if (!t.ok()) return t.status();
  return (*t)->ServeFree(region);
}

absl::StatusOr<std::vector<RegionInfo>> LocalTransport::ListRegions(
    uint32_t node) {
  absl::StatusOr<MemoryTarget*> t = Node(node);
  if (!t.ok()) return t.status();
  return (*t)->ServeList();
}

}  // namespace dmg::transport

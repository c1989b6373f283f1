// The in-process backend: memory nodes are objects in this process and data
// moves by copy through their MemoryTarget interface — never by handing out
// pointers, so the compute side behaves exactly as it would over a network.
#ifndef DMG_TRANSPORT_LOCAL_TRANSPORT_H_
#define DMG_TRANSPORT_LOCAL_TRANSPORT_H_

#include <memory>
#include <vector>

#include "transport/memory_target.h"
#include "transport/transport.h"

namespace dmg::transport {

class LocalTransport : public Transport {
 public:
  // The targets must outlive the transport and its endpoints.
  explicit LocalTransport(std::vector<MemoryTarget*> nodes)
      : nodes_(std::move(nodes)) {}

  std::string name() const override { return "local"; }
  uint32_t num_memory_nodes() const override { return nodes_.size(); }
  absl::StatusOr<std::unique_ptr<Endpoint>> NewEndpoint() override;
  absl::StatusOr<RegionInfo> AllocateRegion(uint32_t node, uint64_t bytes,
                                            const std::string& name) override;
  absl::StatusOr<RegionInfo> AllocateFilledRegion(
      uint32_t node, uint64_t bytes, const std::string& name,
      const RegionFill& fill) override;
  absl::Status FreeRegion(uint32_t node, uint32_t region) override;
  absl::StatusOr<std::vector<RegionInfo>> ListRegions(uint32_t node) override;

 private:
  absl::StatusOr<MemoryTarget*> Node(uint32_t node);
  std::vector<MemoryTarget*> nodes_;
};

}  // namespace dmg::transport

#endif  // DMG_TRANSPORT_LOCAL_TRANSPORT_H_

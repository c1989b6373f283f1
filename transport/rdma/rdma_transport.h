// The rdma transport: the control plane over TCP (TcpControl: region table
// with remote addresses and keys, allocate/free), the data plane over RC
// queue pairs (RdmaEndpoint: one QP per worker endpoint per memory node).
// And the memory side's glue: RdmaMemoryService registers a memory node's
// regions with the NIC as the TCP control server hands them out.
#ifndef DMG_TRANSPORT_RDMA_RDMA_TRANSPORT_H_
#define DMG_TRANSPORT_RDMA_RDMA_TRANSPORT_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "transport/memory_target.h"
#include "transport/rdma/rdma_common.h"
#include "transport/rdma/rdma_server.h"
#include "transport/tcp_server.h"
#include "transport/tcp_transport.h"

namespace dmg::transport::rdma {

class RdmaTransport : public Transport {
 public:
  // nodes[i] is memory node i; its control port and rdma_cm port are the
  // same number.
  static absl::StatusOr<std::unique_ptr<RdmaTransport>> Connect(
      const std::vector<HostPort>& nodes, const RdmaOptions& options);

  std::string name() const override { return "rdma"; }
  uint32_t num_memory_nodes() const override { return nodes_.size(); }
  absl::StatusOr<std::unique_ptr<Endpoint>> NewEndpoint() override;
  absl::StatusOr<RegionInfo> AllocateRegion(uint32_t node, uint64_t bytes,
                                            const std::string& name) override;
  absl::Status FreeRegion(uint32_t node, uint32_t region) override;
  absl::StatusOr<std::vector<RegionInfo>> ListRegions(uint32_t node) override;
  TcpControl& control() { return *control_; }

 private:
  RdmaTransport(std::vector<HostPort> nodes, RdmaOptions options,
                std::unique_ptr<TcpControl> control)
      : nodes_(std::move(nodes)),
        options_(options),
        control_(std::move(control)) {}
  std::vector<HostPort> nodes_;
  RdmaOptions options_;
  std::unique_ptr<TcpControl> control_;
};

// Starts the RDMA server of a memory node on listen (same port as its TCP
// control server) and points the TCP server's hooks at it, so every region
// the control plane reports is registered and carries its remote key.
class RdmaMemoryService {
 public:
  static absl::StatusOr<std::unique_ptr<RdmaMemoryService>> Start(
      const RdmaOptions& options, const HostPort& listen, MemoryTarget* target,
      TcpServerOptions* server_options);
  const std::string& binding() const { return server_->binding(); }

 private:
  std::unique_ptr<RdmaServer> server_;
};

}  // namespace dmg::transport::rdma

#endif  // DMG_TRANSPORT_RDMA_RDMA_TRANSPORT_H_

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

class RdmaTransport : public ControlPlaneTransport {
 public:
  // nodes[i] is memory node i; its control port and rdma_cm port are the
  // same number. The control connections carry `credentials`, so region
  // keys reach only an authenticated client of the right job.
  static absl::StatusOr<std::unique_ptr<RdmaTransport>> Connect(
      const std::vector<HostPort>& nodes, const RdmaOptions& options,
      const Credentials& credentials = {});

  std::string name() const override { return "rdma"; }
  absl::StatusOr<std::unique_ptr<Endpoint>> NewEndpoint() override;

 private:
  RdmaTransport(std::vector<HostPort> nodes, RdmaOptions options,
                std::unique_ptr<TcpControl> control)
      : ControlPlaneTransport(std::move(nodes), std::move(control)),
        options_(options) {}
  RdmaOptions options_;
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

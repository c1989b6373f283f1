// Flags and wiring for the network transports: connecting a compute node (or
// the loader) to running memory nodes, and the RDMA side of a memory node.
#ifndef DMG_TOOLS_TRANSPORT_FLAGS_H_
#define DMG_TOOLS_TRANSPORT_FLAGS_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "memory_node/memory_node.h"
#include "transport/tcp_server.h"
#include "transport/tcp_transport.h"
#include "transport/transport.h"

namespace dmg::cli {

// rdma_*, transport_timeout_ms and secret_file.
std::vector<std::string> RdmaFlagNames();

// The cluster secret named by --secret_file, else by $DMG_SECRET_FILE;
// none when neither is set.
absl::StatusOr<std::optional<transport::Secret>> SecretFromFlags();
// What a client of the memory nodes presents: `role`, `job` and the secret.
absl::StatusOr<transport::TcpOptions> ClientOptions(transport::Role role,
                                                    const std::string& job);

// Why two memory nodes hold stores of different loads (the message a job
// and `dmg status` give): one restarted from a snapshot of another load,
// or a load under way or stopped half way, or two clusters in one list.
std::string DifferentLoads(const transport::HostPort& a,
                           const transport::TcpControl::StoreInfo& ia,
                           const transport::HostPort& b,
                           const transport::TcpControl::StoreInfo& ib);

// Connects to the memory nodes in `list` ("host:port,...") with `kind`
// ("tcp" or "rdma") as a client of job `job`, checking each node reports
// the id its position implies.
absl::StatusOr<std::unique_ptr<transport::Transport>> ConnectTransport(
    const std::string& kind, const std::string& list, const std::string& job);

// The RDMA half of a memory node: owns the RDMA server and fills the tcp
// server's hooks so the region table carries remote addresses and keys.
class RdmaService {
 public:
  virtual ~RdmaService() = default;
  virtual std::string binding() const = 0;
};
absl::StatusOr<std::unique_ptr<RdmaService>> StartRdmaService(
    const transport::HostPort& listen, memory_node::MemoryNode* node,
    transport::TcpServerOptions* server_options);

}  // namespace dmg::cli

#endif  // DMG_TOOLS_TRANSPORT_FLAGS_H_

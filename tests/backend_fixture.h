// A memory node plus a transport to it, for each backend, so transport tests
// can be written once. "local": in-process; "tcp": a TcpServer on an
// ephemeral loopback port; "rdma": an RDMA server on $RXE_IP (skipped with
// kUnavailable when there is no RDMA device), or, with
// DMG_RDMA_REMOTE_NODE=host:port, the `dmg memory-node --transport=rdma`
// there (another host: the two-VM soft-RoCE test).
#ifndef DMG_TESTS_BACKEND_FIXTURE_H_
#define DMG_TESTS_BACKEND_FIXTURE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "memory_node/memory_node.h"
#include "transport/transport.h"

namespace dmg::testing {

class Backend {
 public:
  static absl::StatusOr<std::unique_ptr<Backend>> Create(
      const std::string& kind);
  // A fresh transport of `kind` to an existing backend's address (for child
  // processes).
  static absl::StatusOr<std::unique_ptr<transport::Transport>> Connect(
      const std::string& kind, const std::string& address);
  virtual ~Backend() = default;
  virtual transport::Transport& transport() = 0;
  // "host:port" a child process can connect to ("" for local).
  virtual std::string address() const = 0;
  // Stops the memory node's server abruptly (network backends).
  virtual void KillMemoryNode() = 0;
  // False when the memory node is another host's (KillMemoryNode does
  // nothing there).
  virtual bool can_kill() const { return true; }
};

}  // namespace dmg::testing

#endif  // DMG_TESTS_BACKEND_FIXTURE_H_

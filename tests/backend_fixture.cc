#include "tests/backend_fixture.h"

#include "transport/local_transport.h"
#include "transport/tcp_server.h"
#include "transport/tcp_transport.h"

namespace dmg::testing {
namespace {

class LocalBackend : public Backend {
 public:
  LocalBackend() : node_(0), transport_({&node_}) {}
  transport::Transport& transport() override { return transport_; }
  std::string address() const override { return ""; }
  void KillMemoryNode() override {}

 private:
  memory_node::MemoryNode node_;
  transport::LocalTransport transport_;
};

class TcpBackend : public Backend {
 public:
  static absl::StatusOr<std::unique_ptr<Backend>> Create() {
    auto b = std::unique_ptr<TcpBackend>(new TcpBackend());
    absl::StatusOr<std::unique_ptr<transport::TcpServer>> server =
        transport::TcpServer::Start(&b->node_, "127.0.0.1", 0, {});
    if (!server.ok()) return server.status();
    b->server_ = *std::move(server);
    b->address_ = "127.0.0.1:" + std::to_string(b->server_->port());
    absl::StatusOr<std::unique_ptr<transport::Transport>> t =
        Backend::Connect("tcp", b->address_);
    if (!t.ok()) return t.status();
    b->transport_ = *std::move(t);
    return std::unique_ptr<Backend>(std::move(b));
  }
  ~TcpBackend() override {
    transport_.reset();
    server_.reset();
  }
  transport::Transport& transport() override { return *transport_; }
  std::string address() const override { return address_; }
  void KillMemoryNode() override { server_->Stop(); }

 private:
  TcpBackend() : node_(0) {}
  memory_node::MemoryNode node_;
  std::unique_ptr<transport::TcpServer> server_;
  std::unique_ptr<transport::Transport> transport_;
  std::string address_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<transport::Transport>> Backend::Connect(
    const std::string& kind, const std::string& address) {
  absl::StatusOr<std::vector<transport::HostPort>> nodes =
      transport::ParseHostPorts(address);
  if (!nodes.ok()) return nodes.status();
  transport::TcpOptions options;
  options.timeout_ms = 5000;
  if (kind == "tcp") {
    absl::StatusOr<std::unique_ptr<transport::TcpTransport>> t =
        transport::TcpTransport::Connect(*nodes, options);
    if (!t.ok()) return t.status();
    return std::unique_ptr<transport::Transport>(std::move(*t));
  }
  return absl::UnavailableError("backend " + kind + " is not available here");
}

absl::StatusOr<std::unique_ptr<Backend>> Backend::Create(
    const std::string& kind) {
  if (kind == "local") return std::unique_ptr<Backend>(new LocalBackend());
  if (kind == "tcp") return TcpBackend::Create();
  return absl::UnavailableError(
      "no RDMA device here: the rdma backend runs in the soft-RoCE VM "
      "(deploy/softroce)");
}

}  // namespace dmg::testing

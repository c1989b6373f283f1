#include "tests/backend_fixture.h"

#include "transport/local_transport.h"
#include "transport/tcp_server.h"
#include "transport/tcp_transport.h"
#ifdef DMG_HAVE_RDMA
#include "transport/rdma/rdma_transport.h"
#endif

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

#ifdef DMG_HAVE_RDMA
// The RDMA server and the TCP control server of one memory node share a port
// number (rdma_cm and TCP ports are separate spaces) on $RXE_IP.
class RdmaBackend : public Backend {
 public:
  static absl::StatusOr<std::unique_ptr<Backend>> Create() {
    transport::rdma::RdmaOptions options;
    options.timeout_ms = 5000;
    if (absl::Status s = transport::rdma::CheckRdmaDevices(""); !s.ok()) {
      return absl::UnavailableError(std::string(s.message()));
    }
    const char* ip = std::getenv("RXE_IP");
    std::string host = ip ? ip : "10.77.0.1";
    auto b = std::unique_ptr<RdmaBackend>(new RdmaBackend());
    // The first port free in both spaces.
    absl::Status last;
    for (uint16_t port = 17000; port < 17100 && !b->server_; ++port) {
      transport::TcpServerOptions server_options;
      auto again = transport::rdma::RdmaMemoryService::Start(
          options, {host, port}, &b->node_, &server_options);
      if (!again.ok()) {
        last = again.status();
        continue;
      }
      auto server =
          transport::TcpServer::Start(&b->node_, host, port, server_options);
      if (!server.ok()) continue;
      b->service_ = *std::move(again);
      b->server_ = *std::move(server);
      b->address_ = host + ":" + std::to_string(port);
    }
    if (!b->server_)
      return absl::InternalError("no free port pair: " + last.ToString());
    auto t = Backend::Connect("rdma", b->address_);
    if (!t.ok()) return t.status();
    b->transport_ = *std::move(t);
    return std::unique_ptr<Backend>(std::move(b));
  }
  ~RdmaBackend() override {
    transport_.reset();
    server_.reset();
    service_.reset();
  }
  transport::Transport& transport() override { return *transport_; }
  std::string address() const override { return address_; }
  void KillMemoryNode() override {
    server_.reset();
    service_.reset();
  }

 private:
  RdmaBackend() : node_(0) {}
  memory_node::MemoryNode node_;
  std::unique_ptr<transport::rdma::RdmaMemoryService> service_;
  std::unique_ptr<transport::TcpServer> server_;
  std::unique_ptr<transport::Transport> transport_;
  std::string address_;
};

// A memory-node daemon on another host ($DMG_RDMA_REMOTE_NODE): the same
// tests with the client and the memory node on two ends of a wire.
class RemoteRdmaBackend : public Backend {
 public:
  static absl::StatusOr<std::unique_ptr<Backend>> Create(
      const std::string& address) {
    auto b = std::unique_ptr<RemoteRdmaBackend>(new RemoteRdmaBackend());
    b->address_ = address;
    auto t = Backend::Connect("rdma", address);
    if (!t.ok()) return t.status();
    b->transport_ = *std::move(t);
    return std::unique_ptr<Backend>(std::move(b));
  }
  transport::Transport& transport() override { return *transport_; }
  std::string address() const override { return address_; }
  void KillMemoryNode() override {}
  bool can_kill() const override { return false; }

 private:
  RemoteRdmaBackend() = default;
  std::unique_ptr<transport::Transport> transport_;
  std::string address_;
};
#endif

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
#ifdef DMG_HAVE_RDMA
  if (kind == "rdma") {
    transport::rdma::RdmaOptions rdma;
    rdma.timeout_ms = 5000;
    auto t = transport::rdma::RdmaTransport::Connect(*nodes, rdma);
    if (!t.ok()) return t.status();
    return std::unique_ptr<transport::Transport>(std::move(*t));
  }
#endif
  return absl::UnavailableError("backend " + kind + " is not available here");
}

absl::StatusOr<std::unique_ptr<Backend>> Backend::Create(
    const std::string& kind) {
  if (kind == "local") return std::unique_ptr<Backend>(new LocalBackend());
  if (kind == "tcp") return TcpBackend::Create();
#ifdef DMG_HAVE_RDMA
  if (kind == "rdma") {
    const char* remote = std::getenv("DMG_RDMA_REMOTE_NODE");
    if (remote != nullptr && *remote != '\0') {
      return RemoteRdmaBackend::Create(remote);
    }
    return RdmaBackend::Create();
  }
#endif
  return absl::UnavailableError(
      "no RDMA device here: the rdma backend runs in the soft-RoCE VM "
      "(deploy/softroce)");
}

}  // namespace dmg::testing

// The tcp transport: the same one-sided semantics as RDMA, emulated over
// sockets for machines without an RDMA NIC. An endpoint keeps one connection
// per memory node and sends each Flush() as one batch frame per node (all
// frames first, then all replies: one round trip however many nodes); the
// memory node's I/O threads execute the operations. Every wait is bounded by
// the timeout, so a dead memory node is an error, never a hang.
//
// TcpControl is the control-plane client every transport (tcp and rdma)
// uses: hello, region table, allocate/free, create store, shutdown.
#ifndef DMG_TRANSPORT_TCP_TRANSPORT_H_
#define DMG_TRANSPORT_TCP_TRANSPORT_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "transport/auth.h"
#include "transport/transport.h"
#include "transport/wire.h"

namespace dmg::transport {

struct HostPort {
  std::string host;
  uint16_t port = 0;
  std::string ToString() const { return host + ":" + std::to_string(port); }
};

// Parses "host:port,host:port,...". Port 0 ("any free port") only if
// allow_any_port, for listening.
absl::StatusOr<std::vector<HostPort>> ParseHostPorts(
    const std::string& list, bool allow_any_port = false);

// Who a client is to the memory nodes (transport/auth.h).
struct Credentials {
  Role role = Role::kJob;
  // The job this client acts for: it may touch only regions that
  // connections of the same job allocated (and read the store).
  std::string job;
  // The cluster secret or a job key; none: the memory nodes must be open
  // (a client with a secret refuses a node that asks for none).
  std::optional<Secret> secret;
  // The job's token (role job, with a secret); none: this process's
  // (JobToken::ForThisProcess), so the connections of one process agree.
  std::optional<JobToken> token;
};

// Memory nodes a client found frozen (no reply within its timeout), shared
// by every connection of one transport: the others stop waiting for them
// at once instead of each waiting out its own timeout in turn (a frozen
// node was reported after 2x the timeout, or far later by a kernel that
// kept touching pages). Thread-safe.
class FrozenNodes {
 public:
  void Add(const HostPort& node) {
    std::lock_guard lock(mu_);
    nodes_.insert(node.ToString());
    any_.store(true, std::memory_order_release);
  }
  bool Contains(const HostPort& node) const {
    if (!any_.load(std::memory_order_acquire)) return false;
    std::lock_guard lock(mu_);
    return nodes_.contains(node.ToString());
  }

 private:
  mutable std::mutex mu_;
  std::set<std::string> nodes_;
  std::atomic<bool> any_{false};
};

struct TcpOptions {
  int timeout_ms = 10000;  // bound on every connect, send and receive
  Credentials credentials;
  // Shared by the connections of one transport (TcpTransport::Connect
  // makes one when none is given); null: each connection on its own.
  std::shared_ptr<FrozenNodes> frozen;
};

// One blocking-with-deadline request/reply connection to one memory node.
class TcpConnection {
 public:
  static absl::StatusOr<std::unique_ptr<TcpConnection>> Connect(
      const HostPort& node, const TcpOptions& options);
  ~TcpConnection();

  // Sends frames without waiting for replies (pipelining).
  absl::Status Send(uint16_t type, const std::string& payload) {
    const std::string_view part = payload;
    return Send(type, std::span<const std::string_view>(&part, 1));
  }
  // One frame whose payload is the parts in order, sent without copying them
  // (write payloads go straight from the caller's buffers to the socket, so a
  // batch of large writes costs no second copy of its bytes).
  absl::Status Send(uint16_t type, std::span<const std::string_view> parts);
  // Receives the next reply; an error reply becomes its status.
  absl::StatusOr<std::string> Receive(uint16_t type);
  // Receives the next reply straight into `pieces`, in order (no staging
  // copy: a batch's READ payloads land in their destinations). A successful
  // reply must be exactly the pieces' total size (else DataLoss, and the
  // connection is broken); an error reply becomes its status.
  struct Piece {
    void* data;
    size_t size;
  };
  absl::Status ReceiveInto(uint16_t type, std::span<const Piece> pieces);
  absl::StatusOr<std::string> Call(uint16_t type, const std::string& payload) {
    if (absl::Status s = Send(type, payload); !s.ok()) return s;
    return Receive(type);
  }
  // From now on, waits on this connection are bounded by `ms`.
  void SetTimeout(int ms);
  // The hello (and the challenge-response when the memory node asks for
  // it) that must open every connection; returns the node id it reports.
  absl::StatusOr<uint32_t> Handshake(const Credentials& credentials);
  const HostPort& node() const { return node_; }
  // How long the memory node lets this connection stay silent (its hello's
  // reply; 0: for ever), and how long it has been since a request was sent
  // or a reply taken.
  int idle_timeout_ms() const;
  std::chrono::steady_clock::duration IdleFor() const;
  // Bytes that have arrived and not been received yet (0 on error).
  size_t BytesArrived();

 private:
  struct Impl;
  TcpConnection(HostPort node, std::unique_ptr<Impl> impl);
  // Reads and checks the next reply's header.
  absl::Status ReceiveHeader(uint16_t type, wire::FrameHeader* h);
  // Reads an error reply's payload (h.length bytes) into its status.
  absl::Status ReceiveError(const wire::FrameHeader& h);
  absl::Status ReceivePayload(std::span<const Piece> pieces);
  HostPort node_;
  std::unique_ptr<Impl> impl_;
};

// Control-plane client for a list of memory nodes.
class TcpControl {
 public:
  static absl::StatusOr<std::unique_ptr<TcpControl>> Connect(
      const std::vector<HostPort>& nodes, const TcpOptions& options);
  ~TcpControl();
  uint32_t num_nodes() const { return connections_.size(); }
  const HostPort& node(uint32_t i) const { return connections_[i]->node(); }
  // Node id each memory node reported (the one `dmg load` gave it).
  uint32_t reported_id(uint32_t i) const { return reported_ids_[i]; }

  absl::StatusOr<RegionInfo> Allocate(uint32_t node, uint64_t bytes,
                                      const std::string& name,
                                      const RegionFill& fill = {});
  // A staging region for a new store of `bytes` (the loader WRITEs it, then
  // CommitStore); load_id names the load, the same on every node.
  absl::StatusOr<RegionInfo> CreateStore(uint32_t node, uint64_t bytes,
                                         uint64_t load_id = 0);
  // Makes this connection's staged store the node's store (flags:
  // wire::kCommitForce, kCommitCheckOnly); returns the new generation.
  absl::StatusOr<uint64_t> CommitStore(uint32_t node, uint8_t flags);
  struct StoreInfo {
    uint64_t generation = 0;
    uint64_t load_id = 0;
    uint64_t restored_snapshot = 0;  // 0: the store came from a load
  };
  absl::StatusOr<StoreInfo> GetStoreInfo(uint32_t node);
  absl::Status Free(uint32_t node, uint32_t region);
  absl::StatusOr<std::vector<RegionInfo>> List(uint32_t node);
  absl::Status Shutdown(uint32_t node);
  // kKeepJob on every node (Transport::KeepRegions).
  absl::StatusOr<Transport::Kept> KeepJob(uint32_t keep_s);
  // kSnapshot (admin): `node` writes a snapshot now (with the job state it
  // keeps when with_jobs) and says what it holds once it is in place.
  // The reply comes once the snapshot's file is on disk: it may take up to
  // `reply_timeout_ms` (minutes for a big store), while the connection and
  // everything else keep the transport's timeout.
  absl::StatusOr<wire::SnapshotSummary> Snapshot(uint32_t node, bool with_jobs,
                                                 int reply_timeout_ms = 0);
  // A single-use ticket that admits one RDMA queue pair to `node`.
  absl::StatusOr<std::string> RdmaTicket(uint32_t node);

 private:
  absl::StatusOr<std::string> Call(uint32_t node, uint16_t type,
                                   const std::string& payload);
  // Pings every control connection silent for a third of its node's idle
  // bound (kHello's idle_timeout_ms), until the destructor: they own the
  // job's regions, and a job may compute for long without a control
  // request. Runs only when a node has such a bound.
  void KeepAlive();
  std::vector<std::unique_ptr<TcpConnection>> connections_;
  std::vector<uint32_t> reported_ids_;
  std::mutex mu_;  // one request at a time per control connection
  std::condition_variable stop_cv_;
  bool stopping_ = false;  // guarded by mu_
  std::thread keepalive_;
};

// A transport whose control plane is TcpControl (tcp and rdma): regions are
// allocated, freed and listed over the control connections.
class ControlPlaneTransport : public Transport {
 public:
  uint32_t num_memory_nodes() const override { return nodes_.size(); }
  absl::StatusOr<RegionInfo> AllocateRegion(uint32_t node, uint64_t bytes,
                                            const std::string& name) override {
    return control_->Allocate(node, bytes, name);
  }
  absl::StatusOr<RegionInfo> AllocateFilledRegion(
      uint32_t node, uint64_t bytes, const std::string& name,
      const RegionFill& fill) override {
    if (absl::Status s = CheckFill(fill, bytes, name); !s.ok()) return s;
    return control_->Allocate(node, bytes, name, fill);
  }
  absl::Status FreeRegion(uint32_t node, uint32_t region) override {
    return control_->Free(node, region);
  }
  absl::StatusOr<std::vector<RegionInfo>> ListRegions(uint32_t node) override {
    return control_->List(node);
  }
  absl::StatusOr<Kept> KeepRegions(uint32_t keep_s) override {
    return control_->KeepJob(keep_s);
  }
  TcpControl& control() { return *control_; }

 protected:
  ControlPlaneTransport(std::vector<HostPort> nodes,
                        std::unique_ptr<TcpControl> control)
      : nodes_(std::move(nodes)), control_(std::move(control)) {}
  const std::vector<HostPort>& nodes() const { return nodes_; }

 private:
  std::vector<HostPort> nodes_;
  std::unique_ptr<TcpControl> control_;
};

class TcpTransport : public ControlPlaneTransport {
 public:
  static absl::StatusOr<std::unique_ptr<TcpTransport>> Connect(
      const std::vector<HostPort>& nodes, const TcpOptions& options);

  std::string name() const override { return "tcp"; }
  absl::StatusOr<std::unique_ptr<Endpoint>> NewEndpoint() override;

 private:
  TcpTransport(std::vector<HostPort> nodes, TcpOptions options,
               std::unique_ptr<TcpControl> control)
      : ControlPlaneTransport(std::move(nodes), std::move(control)),
        options_(options) {}
  TcpOptions options_;
};

}  // namespace dmg::transport

#endif  // DMG_TRANSPORT_TCP_TRANSPORT_H_

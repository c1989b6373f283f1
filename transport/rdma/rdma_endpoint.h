// The compute side of the RDMA backend: an Endpoint that owns one reliable-
// connected QP per memory node and executes each Flush() as doorbell-batched
// chains of one-sided work requests.
//
// Per batch: every operation is checked first (node, region key, bounds,
// atomic alignment), so an invalid one fails the batch before anything is
// posted. Then the operations become one chain of work requests per memory
// node (one ibv_post_send each), with every `signal_every`-th and the last
// signalled; the endpoint polls the nodes' CQs until each chain's last
// signalled request completes. READ/WRITE payloads and atomic results pass
// through a registered staging buffer; a batch that does not fit it (or a
// node's send queue) runs as several chains in turn, and an operation bigger
// than the buffer is split. A batch keeps program order per node (one QP
// executes in order; a WRITE or atomic whose bytes overlap an earlier READ
// or atomic of the same chain is fenced); different nodes are not ordered.
//
// Every wait is bounded by RdmaOptions::timeout_ms. A failed completion, a
// timeout or a disconnect returns an error naming the node and the operation
// and marks that node's connection dead: later operations on it fail at once
// (the endpoint never reconnects; make a new one). Other nodes are unaffected.
#ifndef DMG_TRANSPORT_RDMA_RDMA_ENDPOINT_H_
#define DMG_TRANSPORT_RDMA_RDMA_ENDPOINT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "transport/rdma/rdma_common.h"
#include "transport/transport.h"

namespace dmg::transport::rdma {

// How the endpoint learns a region's key: from the control plane (which asks
// the memory node). Called once per (node, region); the answer is cached.
// NotFound for an unknown region makes the operation fail with NotFound.
using RegionResolver =
    std::function<absl::StatusOr<RegionKey>(uint32_t node, uint32_t region)>;

// A memory node's RDMA listening address.
using NodeAddress = std::pair<std::string, uint16_t>;

class RdmaEndpoint : public Endpoint {
 public:
  // Connects to every node (nodes[i] is memory node i) via rdma_cm. Fails at
  // once, with one line, when the machine has no RDMA device.
  static absl::StatusOr<std::unique_ptr<RdmaEndpoint>> Connect(
      const RdmaOptions& options, const std::vector<NodeAddress>& nodes,
      RegionResolver resolver);

  ~RdmaEndpoint() override;
  RdmaEndpoint(const RdmaEndpoint&) = delete;
  RdmaEndpoint& operator=(const RdmaEndpoint&) = delete;

  // Drops cached region keys (e.g. after the store region was re-created);
  // the resolver is asked again on next use.
  void ForgetRegions() { keys_.clear(); }
  // False once the connection to `node` failed.
  bool alive(uint32_t node) const;
  // Whether the staging buffer got hugepages.
  bool staging_on_hugepages() const { return staging_.hugepages(); }

 protected:
  absl::Status Execute(std::span<const Op> ops) override;

 private:
  struct Device;
  struct Connection;
  // One work request: bytes [skip, skip+len) of operation `op`, through
  // staging bytes [staging, staging+len).
  struct Piece {
    uint32_t op;
    uint32_t len;
    uint64_t skip;
    uint64_t staging;
  };

  RdmaEndpoint(const RdmaOptions& options, RegionResolver resolver);
  absl::Status ConnectNode(uint32_t node, const NodeAddress& address);
  absl::StatusOr<Device*> DeviceFor(ibv_context* ctx);
  absl::StatusOr<RegionKey> Key(uint32_t node, uint32_t region);
  // Posts pieces_ (one chain per node) and waits for all of them.
  absl::Status RunChain(std::span<const Op> ops);
  // Marks a connection dead and stops its QP.
  void Kill(Connection& c, const std::string& reason);
  std::string Describe(const Op& op) const;

  const RdmaOptions options_;
  RegionResolver resolver_;
  // Destruction runs bottom-up: connections (QPs, CQs, ids), then devices
  // (staging MR, PD), then the staging memory.
  HostBuffer staging_;
  std::vector<std::unique_ptr<Device>> devices_;
  std::vector<std::unique_ptr<Connection>> conns_;
  std::unordered_map<uint64_t, RegionKey> keys_;  // (node << 32 | region)
  // Per-batch scratch, kept to avoid reallocating.
  std::vector<RegionKey> op_keys_;
  std::vector<Piece> pieces_;
};

// The same, as a plain Endpoint.
absl::StatusOr<std::unique_ptr<Endpoint>> ConnectEndpoint(
    const RdmaOptions& options, const std::vector<NodeAddress>& nodes,
    RegionResolver resolver);

}  // namespace dmg::transport::rdma

#endif  // DMG_TRANSPORT_RDMA_RDMA_ENDPOINT_H_

// The compute side of the RDMA backend: an Endpoint that owns one reliable-
// connected QP per memory node and sends each batch as doorbell-batched
// chains of one-sided work requests, with several batches in flight at once.
//
// Post() (Begin) checks every operation first (node, region key, bounds,
// atomic alignment), so an invalid one fails the batch before anything of it
// is posted, and batches already in flight are untouched. Then the batch is
// cut into rounds: each round is at most a quarter of the registered staging
// buffer (READ/WRITE payloads and atomic results pass through it) and at
// most a send queue's worth of requests per node, and becomes one chain per
// memory node (one ibv_post_send each), with every `signal_every`-th request
// and the last signalled. A round is posted as soon as it has room: staging
// space from a ring shared by all batches in flight, and free slots in each
// node's send queue (outstanding requests are counted per connection across
// batches, so neither the send queue nor the CQ can overflow). Post returns
// once every round is posted; a batch bigger than the free room waits, inside
// Post, for earlier rounds (its own or earlier batches') to complete. Wait
// (End) polls until the batch's chains have completed and copies its READ
// and atomic results out of its staging; completions of other batches seen
// on the way are retired too (work-request ids name batch and piece).
//
// Program order holds per node, within and across batches: one QP executes
// in order, and a WRITE or atomic whose bytes overlap a READ or atomic still
// in flight on that QP (of any batch) is fenced. Different nodes are not
// ordered.
//
// Every wait is bounded by RdmaOptions::timeout_ms per chain (a chain posted
// again after a recovery starts a new bound), and the QP's own retries
// (kRetryCount tries of AckTimeoutFor(timeout_ms)) run out within half of
// it. A failed completion, a timeout or a disconnect fails the batch with an
// error naming the node and the operation and marks that node's connection
// dead: every other batch with requests in flight on it fails too (naming
// its own operation), and later operations on it fail at once. Other nodes
// are unaffected. Two failures are recovered when the endpoint has a ticket
// source: a stale key (the batch fails with NotFound, the next batch
// connects again), and transport retries that ran out while the node's
// control plane still answers (a new QP, and the unfinished READs and
// WRITEs posted on it again: see Recover). The destructor lets batches still
// in flight finish (bounded by the same timeout) without copying their
// results out.
#ifndef DMG_TRANSPORT_RDMA_RDMA_ENDPOINT_H_
#define DMG_TRANSPORT_RDMA_RDMA_ENDPOINT_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
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

// A fresh connect ticket for memory node `node` (from its control plane):
// what an endpoint uses to connect again after a recoverable failure.
using TicketSource = std::function<absl::StatusOr<std::string>(uint32_t node)>;

class RdmaEndpoint : public Endpoint {
 public:
  // Connects to every node (nodes[i] is memory node i) via rdma_cm. Fails at
  // once, with one line, when the machine has no RDMA device. tickets[i],
  // when given, goes to node i in the connect request: a memory-node daemon
  // admits only QPs that bring a ticket its authenticated control plane
  // issued (kRdmaTicketBytes, used once).
  //
  // A READ, WRITE or atomic whose region was freed (its cached key is
  // stale: the NIC answers with a remote access error, which also breaks
  // the QP) fails its batch with NotFound once the resolver confirms the
  // region is gone. With a ticket source, the next batch to that node then
  // connects again (a new QP, with a new ticket), so the endpoint goes on.
  static absl::StatusOr<std::unique_ptr<RdmaEndpoint>> Connect(
      const RdmaOptions& options, const std::vector<NodeAddress>& nodes,
      RegionResolver resolver, const std::vector<std::string>& tickets = {},
      TicketSource ticket_source = nullptr);

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
  // Batches with work requests on the wire now (posted, completions not yet
  // polled).
  uint64_t batches_in_flight() const { return batches_on_wire_; }
  // The most batches on the wire at once since the previous call, counted
  // right after each round is posted (and after polling, without waiting,
  // for completions that had already arrived); then starts again from
  // batches_in_flight().
  uint64_t TakeMaxInFlight() override;
  // Times a QP whose transport retries ran out was replaced by a new
  // connection with its unfinished READs and WRITEs posted again (Recover).
  uint64_t recoveries() const { return recoveries_; }

 protected:
  // Execute is Begin then End.
  absl::Status Execute(std::span<const Op> ops) override;
  absl::Status Begin(std::span<const Op> ops) override;
  absl::Status End(std::span<const Op> ops) override;

 private:
  using Clock = std::chrono::steady_clock;
  struct Device;
  struct Connection;
  struct Batch;
  // One work request: bytes [skip, skip+len) of operation `op`, through
  // staging bytes [staging, staging+len) of its round's staging space.
  struct Piece {
    uint32_t op;
    uint32_t len;
    uint64_t skip;
    uint64_t staging;
  };

  RdmaEndpoint(const RdmaOptions& options, RegionResolver resolver);
  absl::StatusOr<std::unique_ptr<Connection>> ConnectNode(
      uint32_t node, const NodeAddress& address, const std::string& ticket);
  // Replaces the dead connection to `node` (its failure was recoverable)
  // with a new one.
  absl::Status Reconnect(uint32_t node);
  absl::StatusOr<Device*> DeviceFor(ibv_context* ctx);
  absl::StatusOr<RegionKey> Key(uint32_t node, uint32_t region);

  // Building: checks every op of a batch and looks up its region's key.
  absl::Status Validate(std::span<const Op> ops, std::vector<RegionKey>& keys);
  // Cuts a validated batch into pieces and rounds.
  void Cut(Batch& b);
  // Posting: whether round r of b can be posted now (staging space and send
  // queue slots; a round that will fail at once also "fits"), and posting it.
  bool Fits(const Batch& b, size_t r) const;
  void PostRound(Batch& b, size_t r);
  // Appends piece p of b to c's chain being built (c.wrs), through staging
  // at `base` (the round's); copy_payload copies a WRITE's bytes there.
  void AppendRequest(Batch& b, size_t p, Connection& c, std::byte* base,
                     bool copy_payload);
  // Posts c's chain being built as chain of round r of b, one doorbell;
  // false when ibv_post_send failed (b failed, c killed).
  bool PostChain(Batch& b, size_t r, Connection& c, Clock::time_point now);
  // c's transport retries ran out (IBV_WC_RETRY_EXC_ERR) but its memory
  // node's control plane still answers (a fresh ticket): the packets were
  // lost, or the provider lost track of them (soft-RoCE's responder can
  // drop a retried READ for good). When every unfinished chain on c holds
  // only READs and WRITEs, a new connection replaces c and they are posted
  // on it again, oldest first; returns false (c untouched but its QP
  // stopped) when that is not possible, and the caller fails c as usual.
  // At most kMaxRecoveriesInARow times without a chain finishing between.
  bool Recover(Connection& c, const std::string& why);
  // Polling: one pass over every connection with chains in flight (CQ, CM
  // events, deadlines), then polls until done() holds or nothing is in
  // flight; returns done().
  void PollOnce();
  template <typename Done>
  bool PollUntil(Done done);
  // Completing: one chain of round r of b is finished (completed or failed);
  // the last one retires the round (results copied out, staging freed).
  void ChainDone(Batch& b, size_t r);
  void Fail(Batch& b, absl::Status s);
  // Marks a connection dead, stops its QP and fails every chain on it.
  void Kill(Connection& c, const std::string& reason);
  std::string Describe(const Op& op) const;

  // The staging ring: allocations are released in any order, reused once
  // every older one is released.
  std::optional<uint64_t> AllocateStaging(uint64_t bytes) const;
  void TakeStaging(uint64_t offset, uint64_t bytes);
  void ReleaseStaging(uint64_t offset);
  uint64_t round_bytes() const;

  const RdmaOptions options_;
  RegionResolver resolver_;
  std::vector<NodeAddress> addresses_;
  TicketSource ticket_source_;  // may be empty: no reconnecting
  // Destruction runs bottom-up: connections (QPs, CQs, ids), then devices
  // (staging MR, PD), then the staging memory.
  HostBuffer staging_;
  std::vector<std::unique_ptr<Device>> devices_;
  std::vector<std::unique_ptr<Connection>> conns_;
  std::unordered_map<uint64_t, RegionKey> keys_;  // (node << 32 | region)
  // Batches begun and not yet ended, oldest first; spare ones for reuse.
  std::deque<std::unique_ptr<Batch>> batches_;
  std::vector<std::unique_ptr<Batch>> spare_;
  uint64_t next_seq_ = 1;
  uint64_t batches_on_wire_ = 0;  // batches with chains in flight
  uint64_t max_on_wire_ = 0;      // since the last TakeMaxInFlight
  uint64_t recoveries_ = 0;
  static constexpr int kMaxRecoveriesInARow = 3;
  struct StagingUse {
    uint64_t offset;
    uint64_t bytes;
    bool released;
  };
  std::deque<StagingUse> staging_use_;  // oldest first
  Clock::time_point next_cm_check_{};
};

// The same, as a plain Endpoint.
absl::StatusOr<std::unique_ptr<Endpoint>> ConnectEndpoint(
    const RdmaOptions& options, const std::vector<NodeAddress>& nodes,
    RegionResolver resolver, const std::vector<std::string>& tickets = {},
    TicketSource ticket_source = nullptr);

}  // namespace dmg::transport::rdma

#endif  // DMG_TRANSPORT_RDMA_RDMA_ENDPOINT_H_

#include "transport/rdma/rdma_endpoint.h"

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <thread>

#include "absl/strings/str_format.h"
#include "glog/logging.h"

namespace dmg::transport::rdma {
namespace {

bool IsAtomic(OpKind k) {
  return k == OpKind::kCompareAndSwap || k == OpKind::kFetchAndAdd;
}

const char* KindName(OpKind k) {
  switch (k) {
    case OpKind::kRead:
      return "READ";
    case OpKind::kWrite:
      return "WRITE";
    case OpKind::kCompareAndSwap:
      return "CAS";
    case OpKind::kFetchAndAdd:
      return "FAA";
  }
  return "?";
}

// Work-request ids: the batch's sequence number (low 32 bits) and the
// piece's index in the batch, so completions of different batches are told
// apart.
uint64_t WrId(uint64_t seq, size_t piece) {
  return (seq << 32) | static_cast<uint32_t>(piece);
}
uint32_t WrBatch(uint64_t wr_id) { return static_cast<uint32_t>(wr_id >> 32); }
uint32_t WrPiece(uint64_t wr_id) { return static_cast<uint32_t>(wr_id); }

uint64_t Align8(uint64_t n) { return (n + 7) & ~uint64_t{7}; }

}  // namespace

// A batch between Begin and End: its operations (the base class keeps them
// in place until End), their keys, its pieces, and its rounds.
struct RdmaEndpoint::Batch {
  // Pieces [first, end), through `bytes` of staging at `staging`, posted as
  // one chain per node; per_node holds (node, requests).
  struct Round {
    size_t first = 0;
    size_t end = 0;
    uint64_t bytes = 0;
    std::vector<std::pair<uint32_t, int>> per_node;
    uint64_t staging = 0;
    int chains = 0;  // posted and not yet finished
  };

  void Reset() {
    seq = 0;
    ops = {};
    keys.clear();
    pieces.clear();
    rounds.clear();
    chains = 0;
    status = absl::OkStatus();
    abandoned = false;
  }

  uint64_t seq = 0;
  std::span<const Op> ops;
  std::vector<RegionKey> keys;  // per op
  std::vector<Piece> pieces;
  std::vector<Round> rounds;
  int chains = 0;          // of all rounds, posted and not yet finished
  absl::Status status;     // the first error
  bool abandoned = false;  // the endpoint is going away: copy nothing out
};

// The staging buffer's registration on one device (connections to nodes
// reached through the same device share it). MR before PD on destruction.
struct RdmaEndpoint::Device {
  ibv_context* ctx = nullptr;
  DeviceLimits limits;
  PdPtr pd;
  MrPtr staging_mr;
};

// One memory node: its CM id and event channel, CQ and RC QP. Members are
// destroyed QP, CQ, id, channel — the order verbs needs.
struct RdmaEndpoint::Connection {
  ~Connection() {
    // Tells the memory node to drop its QP (also after a failure).
    if (qp && !disconnected) rdma_disconnect(id.get());
  }

  uint32_t node = 0;
  std::string name;  // "memory node 0 (10.77.0.1:7471)"
  Device* device = nullptr;
  int max_wr = 0;        // send-queue depth
  uint64_t max_msg = 0;  // largest single transfer on the port
  std::string dead;      // why the connection failed; empty while alive
  // The failure was a stale key's (its region freed): the memory node is
  // fine, and a new connection may replace this one.
  bool recoverable = false;
  bool disconnected = false;
  // Times in a row this node's QP was replaced (Recover) without a chain
  // finishing on it since.
  int recoveries = 0;
  EventChannelPtr channel;
  CmIdPtr id;
  CqPtr cq;
  QueuePair qp;

  // One chain posted on this QP and not yet finished. An RC send queue
  // completes in order, so chains finish oldest first.
  struct Chain {
    Batch* batch;
    size_t round;
    int wrs;        // send-queue slots it holds
    int signalled;  // signalled completions still expected
    size_t reads;   // its entries at the front of `reads`
    size_t last_piece;
    Clock::time_point posted;
  };
  std::deque<Chain> chains;
  int outstanding = 0;  // work requests of `chains`: never above max_wr
  // Remote bytes (address, length) read or atomically updated by `chains`,
  // oldest first: a WRITE or atomic overlapping one of them is fenced.
  std::deque<std::pair<uint64_t, uint32_t>> reads;
  // Scratch for the chain being built; reserved to max_wr so pointers into
  // it stay valid.
  std::vector<ibv_send_wr> wrs;
  std::vector<ibv_sge> sges;
  size_t new_reads = 0;  // entries the chain being built added to `reads`
  int queued = 0;        // pieces of the round being cut
};

RdmaEndpoint::RdmaEndpoint(const RdmaOptions& options, RegionResolver resolver)
    : options_(options), resolver_(std::move(resolver)) {}

RdmaEndpoint::~RdmaEndpoint() {
  // Batches begun and never ended: their local buffers may be gone, so
  // nothing is copied out, but what is on the wire finishes (bounded by the
  // timeout) so the memory nodes get their WRITEs; then the QPs go before
  // the staging buffer.
  for (auto& b : batches_) b->abandoned = true;
  PollUntil([this] { return batches_on_wire_ == 0; });
}

absl::StatusOr<std::unique_ptr<RdmaEndpoint>> RdmaEndpoint::Connect(
    const RdmaOptions& options, const std::vector<NodeAddress>& nodes,
    RegionResolver resolver, const std::vector<std::string>& tickets,
    TicketSource ticket_source) {
  if (absl::Status s = CheckRdmaDevices(options.device); !s.ok()) return s;
  if (options.send_queue_depth < 1 || options.completion_queue_depth < 1 ||
      options.signal_every < 1 || options.staging_bytes < 8 ||
      options.timeout_ms < 1) {
    return absl::InvalidArgumentError(
        "rdma: queue depths, signal_every and timeout_ms must be positive and "
        "staging_bytes at least 8");
  }
  if (nodes.empty()) {
    return absl::InvalidArgumentError("rdma: no memory nodes to connect to");
  }
  std::unique_ptr<RdmaEndpoint> ep(
      new RdmaEndpoint(options, std::move(resolver)));
  absl::StatusOr<HostBuffer> staging =
      HostBuffer::Allocate(options.staging_bytes);
  if (!staging.ok()) return staging.status();
  ep->staging_ = std::move(*staging);
  ep->addresses_ = nodes;
  ep->ticket_source_ = std::move(ticket_source);
  for (uint32_t i = 0; i < nodes.size(); ++i) {
    const std::string ticket = i < tickets.size() ? tickets[i] : "";
    absl::StatusOr<std::unique_ptr<Connection>> c =
        ep->ConnectNode(i, nodes[i], ticket);
    if (!c.ok()) return c.status();
    ep->conns_.push_back(*std::move(c));
  }
  return ep;
}

absl::StatusOr<std::unique_ptr<Endpoint>> ConnectEndpoint(
    const RdmaOptions& options, const std::vector<NodeAddress>& nodes,
    RegionResolver resolver, const std::vector<std::string>& tickets,
    TicketSource ticket_source) {
  absl::StatusOr<std::unique_ptr<RdmaEndpoint>> ep = RdmaEndpoint::Connect(
      options, nodes, std::move(resolver), tickets, std::move(ticket_source));
  if (!ep.ok()) return ep.status();
  return std::unique_ptr<Endpoint>(std::move(*ep));
}

absl::Status RdmaEndpoint::Reconnect(uint32_t node) {
  Connection& old = *conns_[node];
  absl::StatusOr<std::string> ticket = ticket_source_(node);
  if (!ticket.ok()) {
    return absl::UnavailableError(
        absl::StrFormat("rdma: reconnecting to %s: no ticket: %s", old.name,
                        ticket.status().message()));
  }
  absl::StatusOr<std::unique_ptr<Connection>> fresh =
      ConnectNode(node, addresses_[node], *ticket);
  if (!fresh.ok()) return fresh.status();
  LOG(INFO) << "rdma: connected to " << old.name
            << " again after: " << old.dead;
  conns_[node] = *std::move(fresh);
  return absl::OkStatus();
}

bool RdmaEndpoint::alive(uint32_t node) const {
  return node < conns_.size() && conns_[node]->dead.empty();
}

absl::StatusOr<RdmaEndpoint::Device*> RdmaEndpoint::DeviceFor(
    ibv_context* ctx) {
  for (const auto& d : devices_) {
    if (d->ctx == ctx) return d.get();
  }
  auto d = std::make_unique<Device>();
  d->ctx = ctx;
  const char* dev = ibv_get_device_name(ctx->device);
  absl::StatusOr<DeviceLimits> limits = QueryLimits(ctx);
  if (!limits.ok()) return limits.status();
  d->limits = *limits;
  d->pd.reset(ibv_alloc_pd(ctx));
  if (d->pd == nullptr) {
    return absl::InternalError(
        absl::StrFormat("rdma: ibv_alloc_pd(%s): %s", dev, ErrnoText(errno)));
  }
  d->staging_mr.reset(ibv_reg_mr(d->pd.get(), staging_.data(), staging_.size(),
                                 IBV_ACCESS_LOCAL_WRITE));
  if (d->staging_mr == nullptr) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "rdma: registering the %d-byte staging buffer on %s: %s (raise the "
        "locked-memory limit, ulimit -l, or lower --rdma_staging_bytes)",
        staging_.size(), dev, ErrnoText(errno)));
  }
  devices_.push_back(std::move(d));
  return devices_.back().get();
}

absl::StatusOr<std::unique_ptr<RdmaEndpoint::Connection>>
RdmaEndpoint::ConnectNode(uint32_t node, const NodeAddress& address,
                          const std::string& ticket) {
  auto owned = std::make_unique<Connection>();
  Connection& c = *owned;
  c.node = node;
  c.name = absl::StrFormat("memory node %d (%s:%d)", node, address.first,
                           address.second);
  const int timeout = options_.timeout_ms;

  absl::StatusOr<EventChannelPtr> channel = CreateEventChannel();
  if (!channel.ok()) return channel.status();
  c.channel = std::move(*channel);
  rdma_cm_id* id = nullptr;
  if (rdma_create_id(c.channel.get(), &id, nullptr, RDMA_PS_TCP) != 0) {
    return absl::InternalError(absl::StrFormat("rdma: %s: rdma_create_id: %s",
                                               c.name, ErrnoText(errno)));
  }
  c.id.reset(id);

  absl::StatusOr<sockaddr_storage> addr =
      ResolveHost(address.first, address.second);
  if (!addr.ok()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("rdma: %s: %s", c.name, addr.status().message()));
  }
  if (rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&*addr),
                        timeout) != 0) {
    return absl::UnavailableError(absl::StrFormat(
        "rdma: %s: rdma_resolve_addr: %s", c.name, ErrnoText(errno)));
  }
  if (absl::Status s =
          ExpectCmEvent(c.channel.get(), RDMA_CM_EVENT_ADDR_RESOLVED,
                        timeout + 1000, "rdma: " + c.name);
      !s.ok()) {
    return s;
  }
  absl::StatusOr<std::string> binding =
      CheckBinding(id, options_, "rdma: " + c.name);
  if (!binding.ok()) return binding.status();
  // The QP's ACK timeout, set before the route so that it applies at RTS:
  // transport retries run out well before this endpoint's own deadline.
  const uint8_t ack_timeout =
      static_cast<uint8_t>(AckTimeoutFor(options_.timeout_ms));
  if (rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT,
                      const_cast<uint8_t*>(&ack_timeout),
                      sizeof(ack_timeout)) != 0) {
    // Kernels before 4.17 lack the option; the CM's default stays.
    VLOG(1) << "rdma: " << c.name
            << ": rdma_set_option(ACK_TIMEOUT): " << ErrnoText(errno);
  }
  if (rdma_resolve_route(id, timeout) != 0) {
    return absl::UnavailableError(absl::StrFormat(
        "rdma: %s: rdma_resolve_route: %s", c.name, ErrnoText(errno)));
  }
  if (absl::Status s =
          ExpectCmEvent(c.channel.get(), RDMA_CM_EVENT_ROUTE_RESOLVED,
                        timeout + 1000, "rdma: " + c.name);
      !s.ok()) {
    return s;
  }

  absl::StatusOr<Device*> device = DeviceFor(id->verbs);
  if (!device.ok()) return device.status();
  c.device = *device;
  const DeviceLimits& limits = c.device->limits;
  ibv_port_attr pa{};
  if (int rc = ibv_query_port(id->verbs, id->port_num, &pa); rc != 0) {
    return absl::InternalError(
        absl::StrFormat("rdma: %s: ibv_query_port: %s", c.name, ErrnoText(rc)));
  }
  c.max_msg = pa.max_msg_sz > 0 ? pa.max_msg_sz : (1u << 31);

  const int sq = std::min(options_.send_queue_depth, limits.max_qp_wr);
  // After a failure every outstanding request completes (flushed), signalled
  // or not, so the CQ holds a full send queue.
  const int cqe = std::min(std::max(options_.completion_queue_depth, sq + 1),
                           limits.max_cqe);
  c.cq.reset(ibv_create_cq(id->verbs, cqe, nullptr, nullptr, 0));
  if (c.cq == nullptr) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "rdma: %s: ibv_create_cq(%d): %s", c.name, cqe, ErrnoText(errno)));
  }
  ibv_qp_init_attr attr{};
  attr.send_cq = c.cq.get();
  attr.recv_cq = c.cq.get();
  attr.qp_type = IBV_QPT_RC;
  attr.sq_sig_all = 0;
  attr.cap.max_send_wr = sq;
  attr.cap.max_recv_wr = 1;
  attr.cap.max_send_sge = 1;
  attr.cap.max_recv_sge = 1;
  if (rdma_create_qp(id, c.device->pd.get(), &attr) != 0) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("rdma: %s: rdma_create_qp (send queue %d): %s", c.name,
                        sq, ErrnoText(errno)));
  }
  c.qp = QueuePair(id);
  // Outstanding requests (counted across every batch in flight) never
  // exceed max_wr, so the CQ cannot overflow even when a failure flushes
  // them all.
  c.max_wr = std::max(
      1, std::min({sq, static_cast<int>(attr.cap.max_send_wr), c.cq->cqe}));
  c.wrs.reserve(c.max_wr);
  c.sges.reserve(c.max_wr);

  // Reads and atomics in flight: the initiator depth must be >= 1 (the
  // memory node mirrors it as its responder resources, which enable remote
  // READ/ATOMIC on its QP).
  rdma_conn_param param{};
  param.initiator_depth =
      static_cast<uint8_t>(std::clamp(limits.max_qp_init_rd_atom, 1, 16));
  param.responder_resources =
      static_cast<uint8_t>(std::clamp(limits.max_qp_rd_atom, 1, 16));
  param.retry_count = kRetryCount;
  param.rnr_retry_count = 7;  // receiver not ready: we post no receives
  param.private_data = ticket.empty() ? nullptr : ticket.data();
  param.private_data_len = static_cast<uint8_t>(ticket.size());
  if (rdma_connect(id, &param) != 0) {
    return absl::UnavailableError(absl::StrFormat("rdma: %s: rdma_connect: %s",
                                                  c.name, ErrnoText(errno)));
  }
  if (absl::Status s = ExpectCmEvent(c.channel.get(), RDMA_CM_EVENT_ESTABLISHED,
                                     timeout, "rdma: connecting to " + c.name);
      !s.ok()) {
    return s;
  }
  if (VLOG_IS_ON(1)) {
    ibv_qp_attr qa{};
    ibv_qp_init_attr qi{};
    ibv_query_qp(id->qp, &qa, IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT, &qi);
    VLOG(1) << "rdma: connected to " << c.name << " via " << *binding
            << ", send queue " << c.max_wr << ", staging " << staging_.size()
            << " B" << (staging_.hugepages() ? " (huge)" : "")
            << ", ack timeout " << static_cast<int>(qa.timeout) << ", "
            << static_cast<int>(qa.retry_cnt) << " retries";
  }
  return owned;
}

absl::StatusOr<RegionKey> RdmaEndpoint::Key(uint32_t node, uint32_t region) {
  const uint64_t k = (static_cast<uint64_t>(node) << 32) | region;
  if (auto it = keys_.find(k); it != keys_.end()) return it->second;
  if (!resolver_) {
    return absl::FailedPreconditionError("rdma: endpoint has no resolver");
  }
  absl::StatusOr<RegionKey> key = resolver_(node, region);
  if (key.ok()) keys_[k] = *key;
  return key;
}

std::string RdmaEndpoint::Describe(const Op& op) const {
  std::string where = op.node < conns_.size()
                          ? conns_[op.node]->name
                          : absl::StrFormat("memory node %d", op.node);
  return absl::StrFormat("%s of %d B at %s region %d offset %d",
                         KindName(op.kind), op.length, where, op.region,
                         op.offset);
}

uint64_t RdmaEndpoint::TakeMaxInFlight() {
  return std::exchange(max_on_wire_, batches_on_wire_);
}

absl::Status RdmaEndpoint::Execute(std::span<const Op> ops) {
  if (absl::Status s = Begin(ops); !s.ok()) return s;
  return End(ops);
}

absl::Status RdmaEndpoint::Begin(std::span<const Op> ops) {
  std::unique_ptr<Batch> owned;
  if (spare_.empty()) {
    owned = std::make_unique<Batch>();
  } else {
    owned = std::move(spare_.back());
    spare_.pop_back();
    owned->Reset();
  }
  Batch& b = *owned;
  if (absl::Status s = Validate(ops, b.keys); !s.ok()) {
    spare_.push_back(std::move(owned));
    return s;  // nothing posted; batches in flight are untouched
  }
  b.seq = next_seq_++;
  b.ops = ops;
  Cut(b);
  batches_.push_back(std::move(owned));
  // Retire batches whose completions have already arrived, so that the
  // in-flight count taken after posting is what is really on the wire.
  if (batches_on_wire_ > 0) PollOnce();
  for (size_t r = 0; r < b.rounds.size() && b.status.ok(); ++r) {
    // Room for the round frees up as earlier rounds complete; every chain
    // in flight completes, fails or times out, so this wait is bounded.
    if (!PollUntil([&] { return !b.status.ok() || Fits(b, r); })) {
      Fail(b, absl::InternalError(absl::StrFormat(
                  "rdma: a round of %d B and %d requests does not fit the "
                  "staging buffer (%d B) and send queues with nothing in "
                  "flight",
                  b.rounds[r].bytes, b.rounds[r].end - b.rounds[r].first,
                  staging_.size())));
    }
    if (!b.status.ok()) break;
    PostRound(b, r);
  }
  // Errors after validation are the batch's, reported by End.
  return absl::OkStatus();
}

absl::Status RdmaEndpoint::End(std::span<const Op> ops) {
  if (batches_.empty() || batches_.front()->ops.data() != ops.data() ||
      batches_.front()->ops.size() != ops.size()) {
    return absl::InternalError(
        "rdma: End for a batch that is not the oldest one begun");
  }
  Batch& b = *batches_.front();
  // Ends only when b has nothing in flight: chains complete, fail or time
  // out.
  PollUntil([&] { return b.chains == 0; });
  absl::Status s = std::move(b.status);
  if (spare_.size() < 8) spare_.push_back(std::move(batches_.front()));
  batches_.pop_front();
  return s;
}

// --- Building. ---------------------------------------------------------------

absl::Status RdmaEndpoint::Validate(std::span<const Op> ops,
                                    std::vector<RegionKey>& keys) {
  keys.resize(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    if (op.node >= conns_.size()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("rdma: %s: no memory node %d (connected to %d)",
                          Describe(op), op.node, conns_.size()));
    }
    if (conns_[op.node]->recoverable && ticket_source_ &&
        conns_[op.node]->chains.empty()) {
      if (absl::Status s = Reconnect(op.node); !s.ok()) return s;
    }
    Connection& c = *conns_[op.node];
    if (!c.dead.empty()) {
      return absl::UnavailableError(
          absl::StrFormat("rdma: %s: the connection to %s failed earlier: %s",
                          Describe(op), c.name, c.dead));
    }
    absl::StatusOr<RegionKey> key = Key(op.node, op.region);
    if (!key.ok()) {
      return absl::Status(key.status().code(),
                          absl::StrFormat("rdma: %s: %s", Describe(op),
                                          key.status().message()));
    }
    const uint64_t len = IsAtomic(op.kind) ? 8 : op.length;
    if (op.offset > key->length || len > key->length - op.offset) {
      return absl::OutOfRangeError(
          absl::StrFormat("rdma: %s: outside the region (%d bytes)",
                          Describe(op), key->length));
    }
    if (IsAtomic(op.kind)) {
      if ((key->addr + op.offset) % 8 != 0) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "rdma: %s: atomics need an 8-byte aligned address", Describe(op)));
      }
      if (!c.device->limits.atomics) {
        return absl::UnimplementedError(absl::StrFormat(
            "rdma: %s: the RDMA device has no atomics", Describe(op)));
      }
    }
    if (len > 0 && op.local == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrFormat("rdma: %s: null local buffer", Describe(op)));
    }
    keys[i] = *key;
  }
  return absl::OkStatus();
}

uint64_t RdmaEndpoint::round_bytes() const {
  // A quarter of the buffer, so that several batches (or rounds of one big
  // batch) fit at once.
  return std::max<uint64_t>(8, (staging_.size() / 4) & ~uint64_t{7});
}

void RdmaEndpoint::Cut(Batch& b) {
  const uint64_t cap = round_bytes();
  for (auto& c : conns_) c->queued = 0;
  Batch::Round cur;
  auto close = [&] {
    cur.end = b.pieces.size();
    for (auto& c : conns_) {
      if (c->queued > 0) cur.per_node.emplace_back(c->node, c->queued);
      c->queued = 0;
    }
    b.rounds.push_back(std::move(cur));
    cur = Batch::Round();
    cur.first = b.pieces.size();
  };
  for (uint32_t i = 0; i < b.ops.size(); ++i) {
    const Op& op = b.ops[i];
    Connection& c = *conns_[op.node];
    const uint64_t total = IsAtomic(op.kind) ? 8 : op.length;
    const uint64_t max_piece = std::min(cap, c.max_msg);
    for (uint64_t skip = 0; skip < total;) {
      const uint32_t len =
          static_cast<uint32_t>(std::min(total - skip, max_piece));
      const uint64_t need = Align8(len);
      if ((cur.bytes + need > cap || c.queued == c.max_wr) &&
          b.pieces.size() > cur.first) {
        close();
      }
      b.pieces.push_back({i, len, skip, cur.bytes});
      cur.bytes += need;
      ++c.queued;
      skip += len;
    }
  }
  if (b.pieces.size() > cur.first) close();
}

// --- Posting. ----------------------------------------------------------------

std::optional<uint64_t> RdmaEndpoint::AllocateStaging(uint64_t bytes) const {
  const uint64_t cap = staging_.size();
  if (staging_use_.empty()) {
    if (bytes <= cap) return 0;
    return std::nullopt;
  }
  const uint64_t head = staging_use_.front().offset;
  const uint64_t tail = staging_use_.back().offset + staging_use_.back().bytes;
  if (tail > head) {  // in use: [head, tail)
    if (tail + bytes <= cap) return tail;
    if (bytes <= head) return 0;
    return std::nullopt;
  }
  // Wrapped: in use [head, cap) and [0, tail).
  if (tail + bytes <= head) return tail;
  return std::nullopt;
}

void RdmaEndpoint::TakeStaging(uint64_t offset, uint64_t bytes) {
  staging_use_.push_back({offset, bytes, false});
}

void RdmaEndpoint::ReleaseStaging(uint64_t offset) {
  for (StagingUse& u : staging_use_) {
    if (u.offset == offset && !u.released) {
      u.released = true;
      break;
    }
  }
  while (!staging_use_.empty() && staging_use_.front().released) {
    staging_use_.pop_front();
  }
}

bool RdmaEndpoint::Fits(const Batch& b, size_t r) const {
  const Batch::Round& rd = b.rounds[r];
  for (const auto& [node, n] : rd.per_node) {
    const Connection& c = *conns_[node];
    if (!c.dead.empty()) return true;  // PostRound fails the batch at once
    if (c.outstanding + n > c.max_wr) return false;  // send queue (and CQ)
  }
  return AllocateStaging(rd.bytes).has_value();
}

void RdmaEndpoint::PostRound(Batch& b, size_t r) {
  Batch::Round& rd = b.rounds[r];
  // A node that failed since the batch was checked (e.g. under an earlier
  // batch) fails this batch before anything more of it is posted.
  for (const auto& pn : rd.per_node) {
    const uint32_t node = pn.first;
    const Connection& c = *conns_[node];
    if (c.dead.empty()) continue;
    size_t p = rd.first;
    while (b.ops[b.pieces[p].op].node != node) ++p;
    Fail(b, absl::UnavailableError(absl::StrFormat(
                "rdma: %s: the connection to %s failed earlier: %s",
                Describe(b.ops[b.pieces[p].op]), c.name, c.dead)));
    return;
  }
  const std::optional<uint64_t> at = AllocateStaging(rd.bytes);
  if (!at.has_value()) {  // Fits() said there was room
    Fail(b, absl::InternalError("rdma: no staging space for a round"));
    return;
  }
  rd.staging = *at;
  TakeStaging(rd.staging, rd.bytes);
  std::byte* const base = staging_.data() + rd.staging;

  for (const auto& pn : rd.per_node) {
    Connection& c = *conns_[pn.first];
    c.wrs.clear();
    c.sges.clear();
    c.new_reads = 0;
  }
  for (size_t p = rd.first; p < rd.end; ++p) {
    AppendRequest(b, p, *conns_[b.ops[b.pieces[p].op].node], base,
                  /*copy_payload=*/true);
  }

  // One doorbell per node. (Soft-RoCE may do much of the work inside
  // ibv_post_send, so the clock starts before it.)
  const Clock::time_point now = Clock::now();
  for (const auto& pn : rd.per_node) {
    if (!PostChain(b, r, *conns_[pn.first], now)) continue;
    ++rd.chains;
    if (b.chains++ == 0) ++batches_on_wire_;
  }
  max_on_wire_ = std::max(max_on_wire_, batches_on_wire_);
  if (rd.chains == 0) ReleaseStaging(rd.staging);  // nothing went out
}

void RdmaEndpoint::AppendRequest(Batch& b, size_t p, Connection& c,
                                 std::byte* base, bool copy_payload) {
  const Piece& pc = b.pieces[p];
  const Op& op = b.ops[pc.op];
  const RegionKey& key = b.keys[pc.op];
  ibv_sge sge{};
  sge.addr = reinterpret_cast<uint64_t>(base + pc.staging);
  sge.length = pc.len;
  sge.lkey = c.device->staging_mr->lkey;
  c.sges.push_back(sge);
  ibv_send_wr wr{};
  wr.wr_id = WrId(b.seq, p);
  wr.sg_list = &c.sges.back();
  wr.num_sge = 1;
  const uint64_t raddr = key.addr + op.offset + pc.skip;
  // The responder may let a WRITE or atomic overtake an earlier READ or
  // atomic; fence it when their bytes overlap one still in flight on this
  // QP (this batch's or an earlier one's), so program order holds.
  // (Everything else on one QP is executed in order.)
  if (op.kind != OpKind::kRead) {
    for (const auto& [addr, len] : c.reads) {
      if (raddr < addr + len && addr < raddr + pc.len) {
        wr.send_flags |= IBV_SEND_FENCE;
        break;
      }
    }
  }
  if (op.kind != OpKind::kWrite) {
    c.reads.emplace_back(raddr, pc.len);
    ++c.new_reads;
  }
  switch (op.kind) {
    case OpKind::kRead:
      wr.opcode = IBV_WR_RDMA_READ;
      wr.wr.rdma.remote_addr = raddr;
      wr.wr.rdma.rkey = key.rkey;
      break;
    case OpKind::kWrite:
      if (copy_payload) {
        std::memcpy(base + pc.staging,
                    static_cast<const std::byte*>(op.local) + pc.skip, pc.len);
      }
      wr.opcode = IBV_WR_RDMA_WRITE;
      wr.wr.rdma.remote_addr = raddr;
      wr.wr.rdma.rkey = key.rkey;
      break;
    case OpKind::kCompareAndSwap:
      wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
      wr.wr.atomic.remote_addr = raddr;
      wr.wr.atomic.rkey = key.rkey;
      wr.wr.atomic.compare_add = op.compare;
      wr.wr.atomic.swap = op.operand;
      break;
    case OpKind::kFetchAndAdd:
      wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
      wr.wr.atomic.remote_addr = raddr;
      wr.wr.atomic.rkey = key.rkey;
      wr.wr.atomic.compare_add = op.operand;
      break;
  }
  c.wrs.push_back(wr);
}

bool RdmaEndpoint::PostChain(Batch& b, size_t r, Connection& c,
                             Clock::time_point now) {
  const int every = options_.signal_every;
  const size_t count = c.wrs.size();
  int signalled = 0;
  for (size_t k = 0; k < count; ++k) {
    c.wrs[k].next = k + 1 < count ? &c.wrs[k + 1] : nullptr;
    if ((k + 1) % every == 0 || k + 1 == count) {
      c.wrs[k].send_flags |= IBV_SEND_SIGNALED;
      ++signalled;
    }
  }
  ibv_send_wr* bad = nullptr;
  if (int rc = ibv_post_send(c.qp.get(), c.wrs.data(), &bad); rc != 0) {
    const size_t p = bad != nullptr ? WrPiece(bad->wr_id) : b.rounds[r].first;
    std::string why = absl::StrFormat("ibv_post_send of %d requests: %s", count,
                                      ErrnoText(rc));
    Fail(b, absl::UnavailableError(absl::StrFormat(
                "rdma: %s failed: %s", Describe(b.ops[b.pieces[p].op]), why)));
    Kill(c, why);  // also drops this chain's entries in c.reads
    return false;
  }
  c.chains.push_back({&b, r, static_cast<int>(count), signalled, c.new_reads,
                      WrPiece(c.wrs.back().wr_id), now});
  c.outstanding += static_cast<int>(count);
  return true;
}

// --- Polling and completing. -------------------------------------------------

void RdmaEndpoint::Fail(Batch& b, absl::Status s) {
  if (b.status.ok()) b.status = std::move(s);
}

void RdmaEndpoint::ChainDone(Batch& b, size_t r) {
  Batch::Round& rd = b.rounds[r];
  --rd.chains;
  if (--b.chains == 0) --batches_on_wire_;
  if (rd.chains > 0) return;
  // The round's last chain: its READ and atomic results are in staging.
  if (b.status.ok() && !b.abandoned) {
    const std::byte* const base = staging_.data() + rd.staging;
    for (size_t p = rd.first; p < rd.end; ++p) {
      const Piece& pc = b.pieces[p];
      const Op& op = b.ops[pc.op];
      if (op.kind == OpKind::kWrite) continue;
      std::memcpy(static_cast<std::byte*>(op.local) + pc.skip,
                  base + pc.staging, pc.len);
    }
  }
  ReleaseStaging(rd.staging);
}

void RdmaEndpoint::Kill(Connection& c, const std::string& reason) {
  if (!c.dead.empty()) return;
  c.dead = reason;
  LOG(WARNING) << "rdma: connection to " << c.name << " is dead: " << reason;
  if (c.qp) {
    // Moves the QP to the error state (no further DMA into the staging
    // buffer) and tells the memory node to drop its side.
    if (!c.disconnected && rdma_disconnect(c.id.get()) == 0) {
      c.disconnected = true;
    } else {
      ibv_qp_attr attr{};
      attr.qp_state = IBV_QPS_ERR;
      ibv_modify_qp(c.qp.get(), &attr, IBV_QP_STATE);
    }
  }
  // Every chain still on it is flushed: its batch fails (naming its own
  // operation, unless it already has an error) and its staging is free.
  std::deque<Connection::Chain> chains = std::move(c.chains);
  c.chains.clear();
  c.reads.clear();
  c.outstanding = 0;
  for (const Connection::Chain& ch : chains) {
    Batch& b = *ch.batch;
    Fail(b, absl::UnavailableError(absl::StrFormat(
                "rdma: %s failed: the connection to %s failed: %s",
                Describe(b.ops[b.pieces[ch.last_piece].op]), c.name, reason)));
    ChainDone(b, ch.round);
  }
}

bool RdmaEndpoint::Recover(Connection& c, const std::string& why) {
  if (!ticket_source_ || c.disconnected ||
      c.recoveries >= kMaxRecoveriesInARow) {
    return false;
  }
  const uint32_t node = c.node;
  // Posting a READ or WRITE again is harmless: the same bytes to the same
  // place, in the same order (every unfinished chain goes again, oldest
  // first, and the memory node applies one QP's requests in order). An
  // atomic may already have been applied once.
  for (const Connection::Chain& ch : c.chains) {
    const Batch& b = *ch.batch;
    const Batch::Round& rd = b.rounds[ch.round];
    for (size_t p = rd.first; p < rd.end; ++p) {
      const Op& op = b.ops[b.pieces[p].op];
      if (op.node == node && IsAtomic(op.kind)) return false;
    }
  }
  // Nothing more from the old QP lands in staging.
  ibv_qp_attr err{};
  err.qp_state = IBV_QPS_ERR;
  ibv_modify_qp(c.qp.get(), &err, IBV_QP_STATE);
  // A memory node whose control plane does not answer is gone: no recovery.
  absl::StatusOr<std::string> ticket = ticket_source_(node);
  if (!ticket.ok()) return false;
  absl::StatusOr<std::unique_ptr<Connection>> fresh =
      ConnectNode(node, addresses_[node], *ticket);
  if (!fresh.ok()) {
    LOG(WARNING) << "rdma: " << c.name << ": " << why
                 << "; connecting again failed: " << fresh.status();
    return false;
  }
  std::deque<Connection::Chain> chains = std::move(c.chains);
  c.chains.clear();
  c.dead = why;
  const std::unique_ptr<Connection> old = std::move(conns_[node]);
  conns_[node] = *std::move(fresh);
  Connection& n = *conns_[node];
  n.recoveries = old->recoveries + 1;
  ++recoveries_;
  LOG(WARNING) << "rdma: " << n.name << ": " << why
               << "; connected again and posted its " << chains.size()
               << " unfinished chain(s) again (recovery " << n.recoveries
               << " in a row, at most " << kMaxRecoveriesInARow << ")";
  const Clock::time_point now = Clock::now();
  for (size_t i = 0; i < chains.size(); ++i) {
    Batch& b = *chains[i].batch;
    const size_t r = chains[i].round;
    const Batch::Round& rd = b.rounds[r];
    bool posted = false;
    if (n.dead.empty()) {
      n.wrs.clear();
      n.sges.clear();
      n.new_reads = 0;
      std::byte* const base = staging_.data() + rd.staging;
      for (size_t p = rd.first; p < rd.end; ++p) {
        if (b.ops[b.pieces[p].op].node != node) continue;
        // The WRITE payloads are still in staging; the caller's buffers
        // may be gone (an abandoned batch).
        AppendRequest(b, p, n, base, /*copy_payload=*/false);
      }
      posted = PostChain(b, r, n, now);
    }
    if (!posted) {  // n failed: this chain and the rest are finished
      Fail(b, absl::UnavailableError(absl::StrFormat(
                  "rdma: a request to %s failed: %s; posting it again on a "
                  "new connection failed: %s",
                  n.name, why, n.dead)));
      ChainDone(b, r);
    }
  }
  return true;
}

void RdmaEndpoint::PollOnce() {
  ibv_wc wc[32];
  for (auto& cp : conns_) {
    Connection& c = *cp;
    if (c.chains.empty()) continue;
    const int n = ibv_poll_cq(c.cq.get(), 32, wc);
    if (n < 0) {
      const Connection::Chain& ch = c.chains.front();
      Fail(*ch.batch,
           absl::UnavailableError(absl::StrFormat(
               "rdma: %s failed: polling the CQ of %s failed",
               Describe(ch.batch->ops[ch.batch->pieces[ch.last_piece].op]),
               c.name)));
      Kill(c, "ibv_poll_cq failed");
      continue;
    }
    for (int j = 0; j < n && !c.chains.empty(); ++j) {
      if (wc[j].status != IBV_WC_SUCCESS) {
        // The batch and piece the failed request belongs to.
        Batch* b = c.chains.front().batch;
        for (const Connection::Chain& ch : c.chains) {
          if (static_cast<uint32_t>(ch.batch->seq) == WrBatch(wc[j].wr_id)) {
            b = ch.batch;
            break;
          }
        }
        const size_t p =
            std::min<size_t>(WrPiece(wc[j].wr_id), b->pieces.size() - 1);
        const Op& op = b->ops[b->pieces[p].op];
        std::string why =
            absl::StrFormat("%s (status %d, vendor error 0x%x)",
                            ibv_wc_status_str(wc[j].status),
                            static_cast<int>(wc[j].status), wc[j].vendor_err);
        bool freed = false;
        if (wc[j].status == IBV_WC_REM_ACCESS_ERR) {
          // A stale key: its region was freed since the key was cached.
          // The resolver (the memory node's list of regions) tells.
          keys_.erase((static_cast<uint64_t>(op.node) << 32) | op.region);
          absl::StatusOr<RegionKey> now =
              resolver_ ? resolver_(op.node, op.region)
                        : absl::StatusOr<RegionKey>(RegionKey{});
          freed =
              !now.ok() && now.status().code() == absl::StatusCode::kNotFound;
          why += freed ? " (the region was freed: its key is stale)"
                       : " (outside the registered region, or its key was "
                         "revoked)";
        }
        // A flushed or retried-out request usually means the memory node
        // went away; its CM event says so.
        if (absl::StatusOr<CmEvent> e = NextCmEvent(c.channel.get(), 0);
            e.ok() && (e->type == RDMA_CM_EVENT_DISCONNECTED ||
                       e->type == RDMA_CM_EVENT_DEVICE_REMOVAL)) {
          c.disconnected = e->type == RDMA_CM_EVENT_DISCONNECTED;
          why += absl::StrFormat(" after %s from the memory node",
                                 rdma_event_str(e->type));
        } else if (wc[j].status == IBV_WC_WR_FLUSH_ERR) {
          why +=
              " (the QP was already in the error state; the memory node "
              "has probably closed the connection)";
        } else if (wc[j].status == IBV_WC_RETRY_EXC_ERR) {
          why += absl::StrFormat(
              " (no answer to %d tries of %.0f ms each)", kRetryCount + 1,
              4.096e-3 * (1 << AckTimeoutFor(options_.timeout_ms)));
          if (Recover(c, absl::StrFormat("%s failed: %s", Describe(op), why))) {
            break;  // c is gone; its successor carries the chains
          }
        }
        if (freed) {
          Fail(*b, absl::NotFoundError(absl::StrFormat("rdma: %s failed: %s",
                                                       Describe(op), why)));
        } else {
          Fail(*b, absl::UnavailableError(absl::StrFormat(
                       "rdma: %s failed: %s; the connection is now closed",
                       Describe(op), why)));
        }
        Kill(c, absl::StrFormat("%s failed: %s", Describe(op), why));
        // The control plane answered: the memory node is there.
        c.recoverable = freed;
        break;  // the rest are flushed requests
      }
      Connection::Chain& ch = c.chains.front();
      if (WrBatch(wc[j].wr_id) != static_cast<uint32_t>(ch.batch->seq)) {
        // Bookkeeping gone wrong: stop this QP rather than guess.
        const std::string why = absl::StrFormat(
            "a completion for batch %d while batch %d's chain was oldest",
            WrBatch(wc[j].wr_id), static_cast<uint32_t>(ch.batch->seq));
        Fail(*ch.batch, absl::InternalError("rdma: " + c.name + ": " + why));
        Kill(c, why);
        break;
      }
      if (--ch.signalled > 0) continue;
      c.recoveries = 0;
      Batch& b = *ch.batch;
      const size_t r = ch.round;
      c.outstanding -= ch.wrs;
      c.reads.erase(c.reads.begin(),
                    c.reads.begin() + static_cast<std::ptrdiff_t>(ch.reads));
      c.chains.pop_front();
      ChainDone(b, r);
    }
  }

  const Clock::time_point now = Clock::now();
  if (now >= next_cm_check_) {
    // A memory node that went away says so on the CM channel long before
    // the transport's retries give up.
    next_cm_check_ = now + std::chrono::milliseconds(1);
    for (auto& cp : conns_) {
      Connection& c = *cp;
      if (c.chains.empty()) continue;
      absl::StatusOr<CmEvent> e = NextCmEvent(c.channel.get(), 0);
      if (!e.ok() && e.status().code() == absl::StatusCode::kDeadlineExceeded) {
        continue;
      }
      if (e.ok() && e->type != RDMA_CM_EVENT_DISCONNECTED &&
          e->type != RDMA_CM_EVENT_DEVICE_REMOVAL) {
        continue;  // e.g. an address change: not fatal by itself
      }
      std::string why = e.ok() ? absl::StrFormat("%s from the memory node",
                                                 rdma_event_str(e->type))
                               : std::string(e.status().message());
      if (e.ok() && e->type == RDMA_CM_EVENT_DISCONNECTED) {
        c.disconnected = true;
      }
      const Connection::Chain& ch = c.chains.front();
      Fail(*ch.batch,
           absl::UnavailableError(absl::StrFormat(
               "rdma: %s failed: %s",
               Describe(ch.batch->ops[ch.batch->pieces[ch.last_piece].op]),
               why)));
      Kill(c, why);
    }
  }
  // Each chain gets timeout_ms from its posting; the oldest on a QP is the
  // first that must complete.
  const auto timeout = std::chrono::milliseconds(options_.timeout_ms);
  for (auto& cp : conns_) {
    Connection& c = *cp;
    if (c.chains.empty() || now < c.chains.front().posted + timeout) continue;
    int pending = 0;
    for (const Connection::Chain& ch : c.chains) pending += ch.signalled;
    const Connection::Chain& ch = c.chains.front();
    std::string why = absl::StrFormat(
        "no completion within %d ms (%d signalled requests outstanding)",
        options_.timeout_ms, pending);
    Fail(
        *ch.batch,
        absl::DeadlineExceededError(absl::StrFormat(
            "rdma: %s (last of its chain) failed: %s",
            Describe(ch.batch->ops[ch.batch->pieces[ch.last_piece].op]), why)));
    Kill(c, why);
  }
}

template <typename Done>
bool RdmaEndpoint::PollUntil(Done done) {
  const Clock::time_point start = Clock::now();
  while (!done()) {
    if (batches_on_wire_ == 0) return false;  // nothing can change
    PollOnce();
    if (done()) break;
    // Spin first (completions on real NICs take microseconds), then yield,
    // then sleep briefly so a slow or stuck peer does not burn a core.
    const auto waited = Clock::now() - start;
    if (waited < std::chrono::microseconds(200)) continue;
    if (waited < std::chrono::milliseconds(2)) {
      sched_yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  return true;
}

}  // namespace dmg::transport::rdma

#include "transport/rdma/rdma_endpoint.h"

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "absl/strings/str_format.h"
#include "glog/logging.h"

namespace dmg::transport::rdma {
namespace {

using Clock = std::chrono::steady_clock;

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

}  // namespace

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
  bool disconnected = false;
  EventChannelPtr channel;
  CmIdPtr id;
  CqPtr cq;
  QueuePair qp;
  // Per-chain scratch; reserved to max_wr so pointers into it stay valid.
  std::vector<ibv_send_wr> wrs;
  std::vector<ibv_sge> sges;
  std::vector<std::pair<uint64_t, uint32_t>> reads;  // READ/atomic targets
  int queued = 0;   // pieces of the chain being built
  int pending = 0;  // signalled completions still expected
};

RdmaEndpoint::RdmaEndpoint(const RdmaOptions& options, RegionResolver resolver)
    : options_(options), resolver_(std::move(resolver)) {}

RdmaEndpoint::~RdmaEndpoint() = default;

absl::StatusOr<std::unique_ptr<RdmaEndpoint>> RdmaEndpoint::Connect(
    const RdmaOptions& options, const std::vector<NodeAddress>& nodes,
    RegionResolver resolver) {
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
  for (uint32_t i = 0; i < nodes.size(); ++i) {
    if (absl::Status s = ep->ConnectNode(i, nodes[i]); !s.ok()) return s;
  }
  return ep;
}

absl::StatusOr<std::unique_ptr<Endpoint>> ConnectEndpoint(
    const RdmaOptions& options, const std::vector<NodeAddress>& nodes,
    RegionResolver resolver) {
  absl::StatusOr<std::unique_ptr<RdmaEndpoint>> ep =
      RdmaEndpoint::Connect(options, nodes, std::move(resolver));
  if (!ep.ok()) return ep.status();
  return std::unique_ptr<Endpoint>(std::move(*ep));
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

absl::Status RdmaEndpoint::ConnectNode(uint32_t node,
                                       const NodeAddress& address) {
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
  c.max_wr = std::max(1, std::min<int>(sq, attr.cap.max_send_wr));
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
  param.retry_count = 7;
  param.rnr_retry_count = 7;
  if (rdma_connect(id, &param) != 0) {
    return absl::UnavailableError(absl::StrFormat("rdma: %s: rdma_connect: %s",
                                                  c.name, ErrnoText(errno)));
  }
  if (absl::Status s = ExpectCmEvent(c.channel.get(), RDMA_CM_EVENT_ESTABLISHED,
                                     timeout, "rdma: connecting to " + c.name);
      !s.ok()) {
    return s;
  }
  VLOG(1) << "rdma: connected to " << c.name << " via " << *binding
          << ", send queue " << c.max_wr << ", staging " << staging_.size()
          << " B" << (staging_.hugepages() ? " (huge)" : "");
  conns_.push_back(std::move(owned));
  return absl::OkStatus();
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

void RdmaEndpoint::Kill(Connection& c, const std::string& reason) {
  if (!c.dead.empty()) return;
  c.dead = reason;
  c.pending = 0;
  LOG(WARNING) << "rdma: connection to " << c.name << " is dead: " << reason;
  if (!c.qp) return;
  // Moves the QP to the error state (no further DMA into the staging buffer)
  // and tells the memory node to drop its side.
  if (!c.disconnected && rdma_disconnect(c.id.get()) == 0) {
    c.disconnected = true;
    return;
  }
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  ibv_modify_qp(c.qp.get(), &attr, IBV_QP_STATE);
}

absl::Status RdmaEndpoint::Execute(std::span<const Op> ops) {
  // Check everything before posting anything.
  op_keys_.resize(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    if (op.node >= conns_.size()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("rdma: %s: no memory node %d (connected to %d)",
                          Describe(op), op.node, conns_.size()));
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
    op_keys_[i] = *key;
  }

  // Cut the batch into chains that fit the staging buffer and send queues.
  const uint64_t cap = staging_.size();
  uint64_t used = 0;
  pieces_.clear();
  for (auto& c : conns_) c->queued = 0;
  for (uint32_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    Connection& c = *conns_[op.node];
    const uint64_t total = IsAtomic(op.kind) ? 8 : op.length;
    const uint64_t max_piece = std::min(cap, c.max_msg);
    for (uint64_t skip = 0; skip < total;) {
      const uint32_t len =
          static_cast<uint32_t>(std::min(total - skip, max_piece));
      const uint64_t need = (static_cast<uint64_t>(len) + 7) & ~uint64_t{7};
      if (used + need > cap || c.queued == c.max_wr) {
        if (absl::Status s = RunChain(ops); !s.ok()) return s;
        pieces_.clear();
        used = 0;
        for (auto& d : conns_) d->queued = 0;
      }
      pieces_.push_back({i, len, skip, used});
      used += need;
      ++c.queued;
      skip += len;
    }
  }
  if (pieces_.empty()) return absl::OkStatus();
  return RunChain(ops);
}

absl::Status RdmaEndpoint::RunChain(std::span<const Op> ops) {
  std::byte* const base = staging_.data();
  for (auto& c : conns_) {
    c->wrs.clear();
    c->sges.clear();
    c->reads.clear();
    c->pending = 0;
  }
  for (size_t p = 0; p < pieces_.size(); ++p) {
    const Piece& pc = pieces_[p];
    const Op& op = ops[pc.op];
    const RegionKey& key = op_keys_[pc.op];
    Connection& c = *conns_[op.node];
    ibv_sge sge{};
    sge.addr = reinterpret_cast<uint64_t>(base + pc.staging);
    sge.length = pc.len;
    sge.lkey = c.device->staging_mr->lkey;
    c.sges.push_back(sge);
    ibv_send_wr wr{};
    wr.wr_id = p;
    wr.sg_list = &c.sges.back();
    wr.num_sge = 1;
    const uint64_t raddr = key.addr + op.offset + pc.skip;
    // The responder may let a WRITE or atomic overtake an earlier READ or
    // atomic; fence it when their bytes overlap, so a batch keeps program
    // order. (Everything else on one QP is executed in order.)
    if (op.kind != OpKind::kRead) {
      for (const auto& [addr, len] : c.reads) {
        if (raddr < addr + len && addr < raddr + pc.len) {
          wr.send_flags |= IBV_SEND_FENCE;
          break;
        }
      }
    }
    if (op.kind != OpKind::kWrite) c.reads.emplace_back(raddr, pc.len);
    switch (op.kind) {
      case OpKind::kRead:
        wr.opcode = IBV_WR_RDMA_READ;
        wr.wr.rdma.remote_addr = raddr;
        wr.wr.rdma.rkey = key.rkey;
        break;
      case OpKind::kWrite:
        std::memcpy(base + pc.staging,
                    static_cast<const std::byte*>(op.local) + pc.skip, pc.len);
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

  // One doorbell per node. (Soft-RoCE may do much of the work inside
  // ibv_post_send, so the clock starts before it.)
  const Clock::time_point start = Clock::now();
  absl::Status error;
  int outstanding = 0;
  const int every = options_.signal_every;
  for (auto& cp : conns_) {
    Connection& c = *cp;
    const size_t n = c.wrs.size();
    if (n == 0) continue;
    for (size_t k = 0; k < n; ++k) {
      c.wrs[k].next = k + 1 < n ? &c.wrs[k + 1] : nullptr;
      if ((k + 1) % every == 0 || k + 1 == n) {
        c.wrs[k].send_flags |= IBV_SEND_SIGNALED;
        ++c.pending;
      }
    }
    ibv_send_wr* bad = nullptr;
    if (int rc = ibv_post_send(c.qp.get(), c.wrs.data(), &bad); rc != 0) {
      const Op& op = ops[pieces_[bad != nullptr ? bad->wr_id : 0].op];
      std::string why =
          absl::StrFormat("ibv_post_send of %d requests: %s", n, ErrnoText(rc));
      if (error.ok()) {
        error = absl::UnavailableError(
            absl::StrFormat("rdma: %s failed: %s", Describe(op), why));
      }
      Kill(c, why);
      continue;
    }
    ++outstanding;
  }

  // Wait for each chain's signalled completions.
  const Clock::time_point deadline =
      start + std::chrono::milliseconds(options_.timeout_ms);
  Clock::time_point next_cm_check = start + std::chrono::milliseconds(1);
  ibv_wc wc[32];
  while (outstanding > 0) {
    for (auto& cp : conns_) {
      Connection& c = *cp;
      if (c.pending == 0) continue;
      const int n = ibv_poll_cq(c.cq.get(), 32, wc);
      if (n < 0) {
        if (error.ok()) {
          error = absl::UnavailableError(
              absl::StrFormat("rdma: polling the CQ of %s failed", c.name));
        }
        Kill(c, "ibv_poll_cq failed");
        --outstanding;
        continue;
      }
      for (int j = 0; j < n; ++j) {
        if (wc[j].status != IBV_WC_SUCCESS) {
          const Op& op = ops[pieces_[wc[j].wr_id].op];
          std::string why =
              absl::StrFormat("%s (status %d, vendor error 0x%x)",
                              ibv_wc_status_str(wc[j].status),
                              static_cast<int>(wc[j].status), wc[j].vendor_err);
          if (wc[j].status == IBV_WC_REM_ACCESS_ERR) {
            why += " (outside the registered region, or its key was revoked)";
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
          }
          if (error.ok()) {
            error = absl::UnavailableError(
                absl::StrFormat("rdma: %s failed: %s; the connection is now "
                                "closed",
                                Describe(op), why));
          }
          Kill(c, absl::StrFormat("%s failed: %s", Describe(op), why));
          --outstanding;
          break;  // the rest are flushed requests
        }
        if (--c.pending == 0) {
          --outstanding;
          break;
        }
      }
    }
    if (outstanding == 0) break;

    const Clock::time_point now = Clock::now();
    if (now >= next_cm_check) {
      // A memory node that went away says so on the CM channel long before
      // the transport's retries give up.
      next_cm_check = now + std::chrono::milliseconds(1);
      for (auto& cp : conns_) {
        Connection& c = *cp;
        if (c.pending == 0) continue;
        absl::StatusOr<CmEvent> e = NextCmEvent(c.channel.get(), 0);
        if (!e.ok() &&
            e.status().code() == absl::StatusCode::kDeadlineExceeded) {
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
        const Op& op = ops[pieces_[c.wrs.back().wr_id].op];
        if (error.ok()) {
          error = absl::UnavailableError(
              absl::StrFormat("rdma: %s failed: %s", Describe(op), why));
        }
        Kill(c, why);
        --outstanding;
      }
    }
    if (now >= deadline) {
      for (auto& cp : conns_) {
        Connection& c = *cp;
        if (c.pending == 0) continue;
        const Op& op = ops[pieces_[c.wrs.back().wr_id].op];
        std::string why = absl::StrFormat(
            "no completion within %d ms (%d signalled requests outstanding)",
            options_.timeout_ms, c.pending);
        if (error.ok()) {
          error = absl::DeadlineExceededError(absl::StrFormat(
              "rdma: %s (last of its chain) failed: %s", Describe(op), why));
        }
        Kill(c, why);
        --outstanding;
      }
      break;
    }
    // Spin first (completions on real NICs take microseconds), then yield,
    // then sleep briefly so a slow or stuck peer does not burn a core.
    const auto waited = now - start;
    if (waited < std::chrono::microseconds(200)) continue;
    if (waited < std::chrono::milliseconds(2)) {
      sched_yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  if (!error.ok()) return error;

  for (const Piece& pc : pieces_) {
    const Op& op = ops[pc.op];
    if (op.kind == OpKind::kWrite) continue;
    std::memcpy(static_cast<std::byte*>(op.local) + pc.skip, base + pc.staging,
                pc.len);
  }
  return absl::OkStatus();
}

}  // namespace dmg::transport::rdma

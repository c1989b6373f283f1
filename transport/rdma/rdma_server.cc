#include "transport/rdma/rdma_server.h"

#include <arpa/inet.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_format.h"
#include "glog/logging.h"
#include "transport/transport.h"

namespace dmg::transport::rdma {

// One client QP. Members are destroyed QP, CQ, id — the order verbs needs.
struct RdmaServer::Connection {
  CmIdPtr id;
  CqPtr cq;
  QueuePair qp;
  bool established = false;
};

struct RdmaServer::Registration {
  std::span<std::byte> memory;
  MrPtr mr;
};

RdmaServer::RdmaServer(const RdmaOptions& options) : options_(options) {}

absl::StatusOr<std::unique_ptr<RdmaServer>> RdmaServer::Start(
    const RdmaOptions& options, const std::string& host, uint16_t port,
    Admission admit) {
  if (absl::Status s = CheckRdmaDevices(options.device); !s.ok()) return s;
  std::unique_ptr<RdmaServer> server(new RdmaServer(options));
  server->admit_ = std::move(admit);
  if (absl::Status s = server->Init(host, port); !s.ok()) return s;
  return server;
}

absl::Status RdmaServer::Init(const std::string& host_in, uint16_t port) {
  const std::string host = host_in.empty() ? "0.0.0.0" : host_in;
  const std::string what = absl::StrFormat("rdma server %s:%d", host, port);
  absl::StatusOr<EventChannelPtr> channel = CreateEventChannel();
  if (!channel.ok()) return channel.status();
  channel_ = std::move(*channel);

  rdma_cm_id* id = nullptr;
  if (rdma_create_id(channel_.get(), &id, this, RDMA_PS_TCP) != 0) {
    return absl::InternalError(
        absl::StrFormat("%s: rdma_create_id: %s", what, ErrnoText(errno)));
  }
  listen_id_.reset(id);

  absl::StatusOr<sockaddr_storage> addr = ResolveHost(host, port);
  if (!addr.ok()) return addr.status();
  if (rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&*addr)) != 0) {
    int err = errno;
    return absl::UnavailableError(
        absl::StrFormat("%s: rdma_bind_addr: %s%s", what, ErrnoText(err),
                        err == ENODEV || err == EADDRNOTAVAIL
                            ? " (is the address on an RDMA device?)"
                            : ""));
  }
  if (id->verbs != nullptr) {
    absl::StatusOr<std::string> b = CheckBinding(id, options_, what);
    if (!b.ok()) return b.status();
    binding_ = *b;
    ctx_ = id->verbs;
  } else {
    // Wildcard address: the PD has to live on one device; connections that
    // arrive on any other are rejected.
    int n = 0;
    ibv_context** devices = rdma_get_devices(&n);
    for (int i = 0; devices != nullptr && i < n; ++i) {
      if (options_.device.empty() ||
          options_.device == ibv_get_device_name(devices[i]->device)) {
        ctx_ = devices[i];
        break;
      }
    }
    if (devices != nullptr) rdma_free_devices(devices);
    if (ctx_ == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrFormat("%s: %s", what, NoDeviceMessage()));
    }
    binding_ =
        absl::StrFormat("%s (any address)", ibv_get_device_name(ctx_->device));
  }
  absl::StatusOr<DeviceLimits> limits = QueryLimits(ctx_);
  if (!limits.ok()) return limits.status();
  limits_ = *limits;
  if (!limits_.atomics) {
    LOG(WARNING) << what << ": device " << ibv_get_device_name(ctx_->device)
                 << " has no atomics; remote CAS/FAA will fail";
  }
  pd_.reset(ibv_alloc_pd(ctx_));
  if (pd_ == nullptr) {
    return absl::InternalError(
        absl::StrFormat("%s: ibv_alloc_pd: %s", what, ErrnoText(errno)));
  }
  if (rdma_listen(id, 64) != 0) {
    return absl::UnavailableError(
        absl::StrFormat("%s: rdma_listen: %s", what, ErrnoText(errno)));
  }
  port_ = ntohs(rdma_get_src_port(id));

  int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0) {
    return absl::InternalError(
        absl::StrFormat("%s: eventfd: %s", what, ErrnoText(errno)));
  }
  wake_ = FileDescriptor(fd);
  thread_ = std::thread([this] { Loop(); });
  LOG(INFO) << "rdma server listening on " << host << ":" << port_ << " ("
            << binding_ << ")";
  return absl::OkStatus();
}

RdmaServer::~RdmaServer() {
  if (thread_.joinable()) {
    stop_.store(true);
    uint64_t one = 1;
    if (write(wake_.get(), &one, sizeof(one)) < 0) {
      LOG(WARNING) << "waking the rdma server thread: " << ErrnoText(errno);
    }
    thread_.join();
  }
  // Disconnect first so clients see DISCONNECTED (and their QPs stop) before
  // the memory behind their keys is deregistered.
  for (auto& [id, conn] : conns_) rdma_disconnect(id);
  conns_.clear();
  std::lock_guard lock(mu_);
  regions_.clear();
}

void RdmaServer::Loop() {
  while (!stop_.load()) {
    pollfd fds[2] = {{channel_->fd, POLLIN, 0}, {wake_.get(), POLLIN, 0}};
    if (poll(fds, 2, -1) < 0 && errno != EINTR) {
      LOG(ERROR) << "rdma server: poll: " << ErrnoText(errno);
      return;
    }
    if (stop_.load()) return;
    while (true) {
      absl::StatusOr<CmEvent> e = NextCmEvent(channel_.get(), 0);
      if (!e.ok()) {
        if (e.status().code() != absl::StatusCode::kDeadlineExceeded) {
          LOG(ERROR) << "rdma server: " << e.status();
        }
        break;
      }
      VLOG(1) << "rdma server: " << rdma_event_str(e->type) << " status "
              << e->status;
      switch (e->type) {
        case RDMA_CM_EVENT_CONNECT_REQUEST:
          OnConnectRequest(*e);
          break;
        case RDMA_CM_EVENT_ESTABLISHED:
          if (auto it = conns_.find(e->id); it != conns_.end()) {
            it->second->established = true;
            ++connections_;
          }
          break;
        case RDMA_CM_EVENT_DISCONNECTED:
          Drop(e->id, /*disconnect=*/true);
          break;
        case RDMA_CM_EVENT_REJECTED:
        case RDMA_CM_EVENT_CONNECT_ERROR:
        case RDMA_CM_EVENT_UNREACHABLE:
        case RDMA_CM_EVENT_TIMEWAIT_EXIT:
          Drop(e->id, /*disconnect=*/false);
          break;
        case RDMA_CM_EVENT_DEVICE_REMOVAL:
          if (e->id == listen_id_.get()) {
            LOG(ERROR) << "rdma server: the RDMA device was removed";
          } else {
            Drop(e->id, /*disconnect=*/false);
          }
          break;
        default:
          break;
      }
    }
  }
}

void RdmaServer::OnConnectRequest(const CmEvent& e) {
  CmIdPtr id(e.id);  // ours from now on: every failure path destroys it
  auto reject = [&](const std::string& why) {
    LOG(WARNING) << "rdma server: rejecting a connection: " << why;
    rdma_reject(id.get(), nullptr, 0);
  };
  if (id->verbs != ctx_) {
    reject(absl::StrFormat(
        "it arrived on device %s, the server serves %s",
        id->verbs != nullptr ? ibv_get_device_name(id->verbs->device) : "?",
        ibv_get_device_name(ctx_->device)));
    return;
  }
  if (admit_ && !admit_(e.private_data)) {
    // Not through reject(): a client that tries on purpose gets a line in
    // twenty, not a full disk.
    LOG_EVERY_N(WARNING, 20)
        << "rdma server: rejecting a connection without a valid ticket (a "
           "QP is admitted only with one from an authenticated control "
           "connection); "
        << google::COUNTER << " so far";
    rdma_reject(id.get(), nullptr, 0);
    return;
  }
  auto conn = std::make_unique<Connection>();
  // The server never posts: a minimal CQ and queue sizes.
  conn->cq.reset(ibv_create_cq(ctx_, 4, nullptr, nullptr, 0));
  if (conn->cq == nullptr) {
    reject(absl::StrFormat("ibv_create_cq: %s", ErrnoText(errno)));
    return;
  }
  ibv_qp_init_attr attr{};
  attr.send_cq = conn->cq.get();
  attr.recv_cq = conn->cq.get();
  attr.qp_type = IBV_QPT_RC;
  attr.cap.max_send_wr = 1;
  attr.cap.max_recv_wr = 1;
  attr.cap.max_send_sge = 1;
  attr.cap.max_recv_sge = 1;
  if (rdma_create_qp(id.get(), pd_.get(), &attr) != 0) {
    reject(absl::StrFormat("rdma_create_qp: %s", ErrnoText(errno)));
    return;
  }
  conn->qp = QueuePair(id.get());
  // Responder resources (reads and atomics in flight from the client) must
  // be at least 1, or the CM leaves remote READ/ATOMIC off on this QP.
  rdma_conn_param param{};
  param.responder_resources = static_cast<uint8_t>(std::clamp<int>(
      e.initiator_depth, 1, std::max(1, limits_.max_qp_rd_atom)));
  param.initiator_depth = static_cast<uint8_t>(
      std::min<int>(e.responder_resources, limits_.max_qp_init_rd_atom));
  param.retry_count = kRetryCount;
  param.rnr_retry_count = 7;
  if (rdma_accept(id.get(), &param) != 0) {
    LOG(WARNING) << "rdma server: rdma_accept: " << ErrnoText(errno);
    return;  // conn destroys QP and CQ, then id is destroyed
  }
  rdma_cm_id* raw = id.get();
  conn->id = std::move(id);
  conns_[raw] = std::move(conn);
}

void RdmaServer::Drop(rdma_cm_id* id, bool disconnect) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  if (disconnect) rdma_disconnect(id);
  if (it->second->established) --connections_;
  conns_.erase(it);
}

absl::StatusOr<RegionKey> RdmaServer::Register(uint32_t region,
                                               std::span<std::byte> memory) {
  if (memory.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "rdma: region %d is empty; nothing to register", region));
  }
  std::lock_guard lock(mu_);
  auto it = regions_.find(region);
  if (it != regions_.end() && it->second->memory.data() == memory.data() &&
      it->second->memory.size() == memory.size()) {
    const ibv_mr* mr = it->second->mr.get();
    return RegionKey{reinterpret_cast<uint64_t>(memory.data()), mr->rkey,
                     memory.size()};
  }
  auto reg = std::make_unique<Registration>();
  reg->memory = memory;
  // The store is read-only to every QP: `dmg load` writes it over the
  // authenticated control plane, never through a region key.
  const int access = region == kStoreRegion
                         ? IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ
                         : IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
                               IBV_ACCESS_REMOTE_WRITE |
                               IBV_ACCESS_REMOTE_ATOMIC;
  reg->mr.reset(ibv_reg_mr(pd_.get(), memory.data(), memory.size(), access));
  if (reg->mr == nullptr) {
    int err = errno;
    return absl::ResourceExhaustedError(absl::StrFormat(
        "rdma: ibv_reg_mr of %d bytes for region %d: %s%s", memory.size(),
        region, ErrnoText(err),
        err == ENOMEM || err == EPERM
            ? " (raise the locked-memory limit: ulimit -l unlimited)"
            : ""));
  }
  RegionKey key{reinterpret_cast<uint64_t>(memory.data()), reg->mr->rkey,
                memory.size()};
  regions_[region] = std::move(reg);  // drops (deregisters) any old one
  VLOG(1) << "rdma: registered region " << region << " (" << memory.size()
          << " bytes) rkey " << key.rkey;
  return key;
}

void RdmaServer::Deregister(uint32_t region) {
  std::lock_guard lock(mu_);
  regions_.erase(region);
}

}  // namespace dmg::transport::rdma

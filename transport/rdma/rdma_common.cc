#include "transport/rdma/rdma_common.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "glog/logging.h"

namespace dmg::transport::rdma {
namespace {

std::string GidText(const ibv_gid& gid) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (inet_ntop(AF_INET6, gid.raw, buf, sizeof(buf)) == nullptr) return "?";
  return buf;
}

const char* GidTypeName(uint32_t type) {
  switch (type) {
    case IBV_GID_TYPE_IB:
      return "IB";
    case IBV_GID_TYPE_ROCE_V1:
      return "RoCEv1";
    case IBV_GID_TYPE_ROCE_V2:
      return "RoCEv2";
  }
  return "unknown type";
}

}  // namespace

std::string NoDeviceMessage() {
  return "no RDMA device found (ibv_get_device_list returned none): use "
         "--transport=tcp, or set up soft-RoCE: see deploy/softroce/README.md";
}

std::string ErrnoText(int err) {
  char buf[128];
  // GNU strerror_r returns the message pointer (maybe not buf).
  const char* s = strerror_r(err, buf, sizeof(buf));
  return absl::StrFormat("%s (errno %d)", s, err);
}

absl::Status CheckRdmaDevices(const std::string& device) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr || n <= 0) {
    if (list != nullptr) ibv_free_device_list(list);
    return absl::FailedPreconditionError(NoDeviceMessage());
  }
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i) names.push_back(ibv_get_device_name(list[i]));
  ibv_free_device_list(list);
  if (device.empty()) return absl::OkStatus();
  for (const std::string& name : names) {
    if (name == device) return absl::OkStatus();
  }
  return absl::FailedPreconditionError(
      absl::StrFormat("no RDMA device named '%s' (--rdma_device); this "
                      "machine has: %s",
                      device, absl::StrJoin(names, ", ")));
}

// --- RAII.
// --------------------------------------------------------------------

void EventChannelDeleter::operator()(rdma_event_channel* c) const {
  rdma_destroy_event_channel(c);
}

void CmIdDeleter::operator()(rdma_cm_id* id) const {
  if (rdma_destroy_id(id) != 0) {
    LOG(WARNING) << "rdma_destroy_id: " << ErrnoText(errno);
  }
}

void PdDeleter::operator()(ibv_pd* pd) const {
  if (int rc = ibv_dealloc_pd(pd); rc != 0) {
    LOG(WARNING) << "ibv_dealloc_pd: " << ErrnoText(rc);
  }
}

void CqDeleter::operator()(ibv_cq* cq) const {
  if (int rc = ibv_destroy_cq(cq); rc != 0) {
    LOG(WARNING) << "ibv_destroy_cq: " << ErrnoText(rc);
  }
}

void MrDeleter::operator()(ibv_mr* mr) const {
  if (int rc = ibv_dereg_mr(mr); rc != 0) {
    LOG(WARNING) << "ibv_dereg_mr: " << ErrnoText(rc);
  }
}

QueuePair& QueuePair::operator=(QueuePair&& o) noexcept {
  if (this != &o) {
    reset();
    id_ = o.id_;
    o.id_ = nullptr;
  }
  return *this;
}

void QueuePair::reset() {
  if (id_ != nullptr && id_->qp != nullptr) rdma_destroy_qp(id_);
  id_ = nullptr;
}

FileDescriptor::~FileDescriptor() {
  if (fd_ >= 0) close(fd_);
}

FileDescriptor& FileDescriptor::operator=(FileDescriptor&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

absl::StatusOr<HostBuffer> HostBuffer::Allocate(size_t bytes) {
  constexpr size_t kHuge = 2 << 20;
  constexpr size_t kPage = 4096;
  if (bytes == 0) bytes = 1;
  HostBuffer b;
  b.size_ = bytes;
  size_t huge = (bytes + kHuge - 1) / kHuge * kHuge;
  void* p = mmap(nullptr, huge, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
  if (p != MAP_FAILED) {
    b.mapped_ = huge;
    b.huge_ = true;
  } else {
    size_t pages = (bytes + kPage - 1) / kPage * kPage;
    p = mmap(nullptr, pages, PROT_READ | PROT_WRITE,
             MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "mmap of %d bytes for an RDMA buffer: %s", pages, ErrnoText(errno)));
    }
    b.mapped_ = pages;
  }
  b.data_ = static_cast<std::byte*>(p);
  return b;
}

HostBuffer::~HostBuffer() {
  if (data_ != nullptr) munmap(data_, mapped_);
}

HostBuffer::HostBuffer(HostBuffer&& o) noexcept
    : data_(o.data_), size_(o.size_), mapped_(o.mapped_), huge_(o.huge_) {
  o.data_ = nullptr;
  o.size_ = o.mapped_ = 0;
}

HostBuffer& HostBuffer::operator=(HostBuffer&& o) noexcept {
  if (this != &o) {
    if (data_ != nullptr) munmap(data_, mapped_);
    data_ = o.data_;
    size_ = o.size_;
    mapped_ = o.mapped_;
    huge_ = o.huge_;
    o.data_ = nullptr;
    o.size_ = o.mapped_ = 0;
  }
  return *this;
}

// --- Connection manager.
// ------------------------------------------------------

absl::StatusOr<EventChannelPtr> CreateEventChannel() {
  EventChannelPtr channel(rdma_create_event_channel());
  if (channel == nullptr) {
    return absl::UnavailableError(
        absl::StrFormat("rdma_create_event_channel: %s (is the rdma_ucm "
                        "kernel module loaded?)",
                        ErrnoText(errno)));
  }
  int flags = fcntl(channel->fd, F_GETFL);
  if (flags < 0 || fcntl(channel->fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    return absl::InternalError(absl::StrFormat(
        "making the RDMA event channel non-blocking: %s", ErrnoText(errno)));
  }
  return channel;
}

absl::StatusOr<CmEvent> NextCmEvent(rdma_event_channel* channel,
                                    int timeout_ms) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline =
      Clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    rdma_cm_event* event = nullptr;
    if (rdma_get_cm_event(channel, &event) == 0) {
      CmEvent e;
      e.type = event->event;
      e.status = event->status;
      e.id = event->id;
      e.listen_id = event->listen_id;
      e.responder_resources = event->param.conn.responder_resources;
      e.initiator_depth = event->param.conn.initiator_depth;
      if (event->event == RDMA_CM_EVENT_CONNECT_REQUEST &&
          event->param.conn.private_data != nullptr) {
        e.private_data.assign(
            static_cast<const char*>(event->param.conn.private_data),
            event->param.conn.private_data_len);
      }
      rdma_ack_cm_event(event);
      return e;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      return absl::InternalError(
          absl::StrFormat("rdma_get_cm_event: %s", ErrnoText(errno)));
    }
    int64_t left = std::chrono::duration_cast<std::chrono::milliseconds>(
                       deadline - Clock::now())
                       .count();
    if (left <= 0) {
      return absl::DeadlineExceededError(absl::StrFormat(
          "no RDMA connection-manager event within %d ms", timeout_ms));
    }
    pollfd pfd{channel->fd, POLLIN, 0};
    int rc = poll(&pfd, 1, static_cast<int>(left));
    if (rc < 0 && errno != EINTR) {
      return absl::InternalError(absl::StrFormat(
          "poll on the RDMA event channel: %s", ErrnoText(errno)));
    }
  }
}

absl::Status ExpectCmEvent(rdma_event_channel* channel,
                           rdma_cm_event_type expected, int timeout_ms,
                           const std::string& what) {
  absl::StatusOr<CmEvent> e = NextCmEvent(channel, timeout_ms);
  if (!e.ok()) {
    return absl::Status(
        e.status().code(),
        absl::StrFormat("%s: waiting for %s: %s", what,
                        rdma_event_str(expected), e.status().message()));
  }
  if (e->type != expected || e->status != 0) {
    std::string hint;
    if (e->type == RDMA_CM_EVENT_REJECTED) {
      hint = " (is a memory node listening there?)";
    } else if (e->type == RDMA_CM_EVENT_ADDR_ERROR) {
      hint = " (is the address on an RDMA device?)";
    }
    return absl::UnavailableError(absl::StrFormat(
        "%s: expected %s, got %s (status %d)%s", what, rdma_event_str(expected),
        rdma_event_str(e->type), e->status, hint));
  }
  return absl::OkStatus();
}

absl::StatusOr<sockaddr_storage> ResolveHost(const std::string& host,
                                             uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  std::string service = std::to_string(port);
  int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(),
                       &hints, &res);
  if (rc != 0 || res == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrFormat("cannot resolve '%s': %s", host, gai_strerror(rc)));
  }
  sockaddr_storage out{};
  std::memcpy(&out, res->ai_addr, res->ai_addrlen);
  freeaddrinfo(res);
  return out;
}

int AckTimeoutFor(int timeout_ms) {
  const double budget_us = timeout_ms * 1000.0 / 2;
  int t = 19;
  while (t > 8 &&
         (kRetryCount + 1) * 4.096 * static_cast<double>(1 << t) > budget_us) {
    --t;
  }
  return t;
}

absl::StatusOr<std::string> CheckBinding(rdma_cm_id* id,
                                         const RdmaOptions& options,
                                         const std::string& what) {
  ibv_context* ctx = id->verbs;
  if (ctx == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrFormat("%s: the address is not on any RDMA device", what));
  }
  std::string dev = ibv_get_device_name(ctx->device);
  if (!options.device.empty() && dev != options.device) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s is reached through RDMA device %s, not --rdma_device=%s", what, dev,
        options.device));
  }
  int port = id->port_num;
  if (options.port != port) {
    return absl::FailedPreconditionError(
        absl::StrFormat("%s is reached through %s port %d, not --rdma_port=%d",
                        what, dev, port, options.port));
  }
  ibv_port_attr pa{};
  if (int rc = ibv_query_port(ctx, port, &pa); rc != 0) {
    return absl::InternalError(absl::StrFormat("ibv_query_port(%s, %d): %s",
                                               dev, port, ErrnoText(rc)));
  }
  if (pa.state != IBV_PORT_ACTIVE) {
    return absl::UnavailableError(absl::StrFormat(
        "%s: %s port %d is %s", what, dev, port, ibv_port_state_str(pa.state)));
  }
  const ibv_gid& sgid = id->route.addr.addr.ibaddr.sgid;
  if (pa.link_layer != IBV_LINK_LAYER_ETHERNET) {
    if (options.gid_index > 0) {
      LOG(WARNING) << "--rdma_gid_index only applies to RoCE; " << dev
                   << " port " << port << " is InfiniBand";
    }
    return absl::StrFormat("%s port %d (InfiniBand)", dev, port);
  }
  // The CM uses the IP-mapped GID of the address; find its table entry.
  int found = -1;
  uint32_t found_type = 0;
  for (int i = 0; i < pa.gid_tbl_len; ++i) {
    ibv_gid_entry e{};
    if (ibv_query_gid_ex(ctx, port, i, &e, 0) != 0) continue;
    if (std::memcmp(e.gid.raw, sgid.raw, sizeof(sgid.raw)) != 0) continue;
    if (found < 0 || e.gid_type == IBV_GID_TYPE_ROCE_V2) {
      found = i;
      found_type = e.gid_type;
    }
  }
  if (options.gid_index >= 0 && options.gid_index != found) {
    ibv_gid_entry e{};
    std::string there = "no GID";
    if (ibv_query_gid_ex(ctx, port, options.gid_index, &e, 0) == 0) {
      there =
          absl::StrFormat("%s (%s)", GidText(e.gid), GidTypeName(e.gid_type));
    }
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s: --rdma_gid_index=%d is %s on %s port %d, but the connection "
        "manager uses %s (index %d) for this address; use "
        "--rdma_gid_index=-1",
        what, options.gid_index, there, dev, port, GidText(sgid), found));
  }
  if (found < 0) {
    return absl::StrFormat("%s port %d gid %s", dev, port, GidText(sgid));
  }
  if (found_type != IBV_GID_TYPE_ROCE_V2) {
    LOG(WARNING) << what << ": GID " << GidText(sgid) << " on " << dev << " is "
                 << GidTypeName(found_type) << ", not RoCEv2";
  }
  return absl::StrFormat("%s port %d gid[%d] %s (%s)", dev, port, found,
                         GidText(sgid), GidTypeName(found_type));
}

absl::StatusOr<DeviceLimits> QueryLimits(ibv_context* ctx) {
  ibv_device_attr attr{};
  if (int rc = ibv_query_device(ctx, &attr); rc != 0) {
    return absl::InternalError(absl::StrFormat("ibv_query_device(%s): %s",
                                               ibv_get_device_name(ctx->device),
                                               ErrnoText(rc)));
  }
  DeviceLimits l;
  l.max_qp_wr = attr.max_qp_wr;
  l.max_cqe = attr.max_cqe;
  l.max_qp_rd_atom = attr.max_qp_rd_atom;
  l.max_qp_init_rd_atom = attr.max_qp_init_rd_atom;
  l.atomics = attr.atomic_cap != IBV_ATOMIC_NONE;
  return l;
}

}  // namespace dmg::transport::rdma

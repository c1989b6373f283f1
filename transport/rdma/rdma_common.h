// Pieces shared by the RDMA server (memory side) and endpoint (compute side):
// options, the "is there a device at all" check, the device/port/GID the
// connection manager bound an id to, blocking-with-timeout CM event waits,
// and RAII owners for every verbs / rdma_cm resource, so no error path leaks
// a QP or leaves an MR registered.
#ifndef DMG_TRANSPORT_RDMA_RDMA_COMMON_H_
#define DMG_TRANSPORT_RDMA_RDMA_COMMON_H_

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "transport/rdma/rdma_probe.h"

namespace dmg::transport::rdma {

struct RdmaOptions {
  // --rdma_device: "" = whichever device owns the address (the CM decides);
  // otherwise the device the address must be on (checked, never overridden).
  std::string device;
  // --rdma_port: the port the address must be on (checked).
  int port = 1;
  // --rdma_gid_index: -1 = auto, the RoCEv2 IPv4-mapped GID (::ffff:a.b.c.d)
  // of the address, which is what the CM uses. An explicit index is checked
  // against the GID the CM chose for the address.
  int gid_index = -1;
  int send_queue_depth = 256;
  int completion_queue_depth = 512;
  // Selective signalling: one signalled work request per this many, and
  // always the last of a chain.
  int signal_every = 16;
  // Registered bounce buffer per endpoint; bigger batches are split.
  uint64_t staging_bytes = kDefaultStagingBytes;
  // Bound on every wait: address/route resolution, connect, completions.
  int timeout_ms = 10000;
};

// Where a registered region lives on its memory node, as the compute side
// needs it: remote virtual address, rkey, and length (for bounds checks).
struct RegionKey {
  uint64_t addr = 0;
  uint32_t rkey = 0;
  uint64_t length = 0;
};

// The one-line error every entry point returns when this machine has no RDMA
// device; it names the alternatives.
std::string NoDeviceMessage();

// OK when at least one RDMA device exists (and, when `device` is not empty,
// one with that name); otherwise FailedPrecondition with a one-line message.
absl::Status CheckRdmaDevices(const std::string& device);

// "strerror(errno)"-style text for the current errno, or for `err`.
std::string ErrnoText(int err);

// --- RAII owners. -----------------------------------------------------------

struct EventChannelDeleter {
  void operator()(rdma_event_channel* c) const;
};
using EventChannelPtr =
    std::unique_ptr<rdma_event_channel, EventChannelDeleter>;

// Destroys the id; the QP on it (if any) must already be gone (QueuePair).
struct CmIdDeleter {
  void operator()(rdma_cm_id* id) const;
};
using CmIdPtr = std::unique_ptr<rdma_cm_id, CmIdDeleter>;

struct PdDeleter {
  void operator()(ibv_pd* pd) const;
};
using PdPtr = std::unique_ptr<ibv_pd, PdDeleter>;

struct CqDeleter {
  void operator()(ibv_cq* cq) const;
};
using CqPtr = std::unique_ptr<ibv_cq, CqDeleter>;

struct MrDeleter {
  void operator()(ibv_mr* mr) const;
};
using MrPtr = std::unique_ptr<ibv_mr, MrDeleter>;

// The QP that rdma_create_qp() hung on a cm_id; destroyed with
// rdma_destroy_qp(). Must be destroyed before the id, its CQ and its PD.
class QueuePair {
 public:
  QueuePair() = default;
  // Takes ownership of id->qp.
  explicit QueuePair(rdma_cm_id* id) : id_(id) {}
  ~QueuePair() { reset(); }
  QueuePair(QueuePair&& o) noexcept : id_(o.id_) { o.id_ = nullptr; }
  QueuePair& operator=(QueuePair&& o) noexcept;
  QueuePair(const QueuePair&) = delete;
  QueuePair& operator=(const QueuePair&) = delete;

  ibv_qp* get() const { return id_ != nullptr ? id_->qp : nullptr; }
  explicit operator bool() const { return get() != nullptr; }
  void reset();

 private:
  rdma_cm_id* id_ = nullptr;
};

// A closed-on-destruction file descriptor.
class FileDescriptor {
 public:
  FileDescriptor() = default;
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor();
  FileDescriptor(FileDescriptor&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  FileDescriptor& operator=(FileDescriptor&& o) noexcept;
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }

 private:
  int fd_ = -1;
};

// Anonymous memory for registration: 2 MiB hugepages when the system has
// them free, ordinary pages otherwise (silently). Zero-filled.
class HostBuffer {
 public:
  static absl::StatusOr<HostBuffer> Allocate(size_t bytes);
  HostBuffer() = default;
  ~HostBuffer();
  HostBuffer(HostBuffer&& o) noexcept;
  HostBuffer& operator=(HostBuffer&& o) noexcept;
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;

  std::byte* data() const { return data_; }
  size_t size() const { return size_; }  // what was asked for
  bool hugepages() const { return huge_; }

 private:
  std::byte* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_ = 0;
  bool huge_ = false;
};

// --- Connection-manager helpers. ---------------------------------------------

// A new event channel whose fd is non-blocking (waits use poll()).
absl::StatusOr<EventChannelPtr> CreateEventChannel();

// What we keep of an event after acknowledging it.
struct CmEvent {
  rdma_cm_event_type type;
  int status = 0;
  rdma_cm_id* id = nullptr;
  rdma_cm_id* listen_id = nullptr;
  uint8_t responder_resources = 0;
  uint8_t initiator_depth = 0;
  // A connect request's private data (an admission ticket), as received:
  // the CM may pad it with zeros.
  std::string private_data;
};

// Waits up to timeout_ms for the next event (timeout_ms == 0: only looks),
// acknowledges it and returns its copy. DeadlineExceeded when none came.
absl::StatusOr<CmEvent> NextCmEvent(rdma_event_channel* channel,
                                    int timeout_ms);

// Waits for the next event and checks it is `expected` with status 0;
// otherwise an error naming `what`, the event and its status.
absl::Status ExpectCmEvent(rdma_event_channel* channel,
                           rdma_cm_event_type expected, int timeout_ms,
                           const std::string& what);

// host:port → an IPv4/IPv6 socket address (numeric or by name).
absl::StatusOr<sockaddr_storage> ResolveHost(const std::string& host,
                                             uint16_t port);

// After the CM bound `id` to a device (address resolved, or bound to a local
// address): checks options.device / port / gid_index against that binding
// and returns a description like "rxe0 port 1 gid[1] ::ffff:10.77.0.1
// (RoCEv2)". `what` names the peer in errors.
absl::StatusOr<std::string> CheckBinding(rdma_cm_id* id,
                                         const RdmaOptions& options,
                                         const std::string& what);

// Transport retries of a reliable-connected QP (the IB retry_cnt): 6, not
// the 3-bit field's maximum 7, because soft-RoCE (rxe) reads 7 as "retry
// forever" (as the spec has it only for RNR retries). A request whose
// responder never answers then ends with IBV_WC_RETRY_EXC_ERR instead of
// hanging its QP until the endpoint's own deadline.
inline constexpr int kRetryCount = 6;

// The QP's local ACK timeout (4.096 us x 2^t per try) for a wait bound of
// timeout_ms: the largest t in [8, 19] whose kRetryCount + 1 tries fit in
// half of the bound, so that the provider gives up (and the endpoint can
// connect again and recover) well before the endpoint's own deadline.
// 10 s gives 17 (0.54 s a try), 60 s gives 19 (2.1 s, the CM's own default
// on RoCE).
int AckTimeoutFor(int timeout_ms);

// A device's limits, clamped for what we ask of a connection.
struct DeviceLimits {
  int max_qp_wr = 0;
  int max_cqe = 0;
  int max_qp_rd_atom = 0;       // responder side: reads/atomics in flight
  int max_qp_init_rd_atom = 0;  // initiator side
  bool atomics = false;
};
absl::StatusOr<DeviceLimits> QueryLimits(ibv_context* ctx);

}  // namespace dmg::transport::rdma

#endif  // DMG_TRANSPORT_RDMA_RDMA_COMMON_H_

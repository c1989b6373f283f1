// The memory side of the RDMA backend. It accepts reliable-connected QPs from
// compute-node endpoints (one QP per endpoint connection) and registers
// region memory so those QPs can READ, WRITE and run atomics on it without
// this node's CPU. It does not serve the control plane (allocating regions,
// handing out keys): the memory-node daemon does that over TCP and calls
// Register/Deregister here.
//
// All memory is registered in one protection domain on the device that owns
// the listening address, so a key handed out once is valid on every QP.
#ifndef DMG_TRANSPORT_RDMA_RDMA_SERVER_H_
#define DMG_TRANSPORT_RDMA_RDMA_SERVER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "transport/rdma/rdma_common.h"

namespace dmg::transport::rdma {

class RdmaServer {
 public:
  // Listens with rdma_cm on host:port. `host` must be an address of an RDMA
  // device (e.g. the soft-RoCE interface's); "" or "0.0.0.0" binds every
  // address but then serves only one device (options.device, or the first).
  // Fails at once, with one line, when the machine has no RDMA device.
  //
  // With `admit`, a connect request is accepted only when admit(its private
  // data) says so (the daemon's tickets); without, every one is.
  using Admission = std::function<bool(const std::string& private_data)>;
  static absl::StatusOr<std::unique_ptr<RdmaServer>> Start(
      const RdmaOptions& options, const std::string& host, uint16_t port,
      Admission admit = nullptr);

  // Stops accepting, disconnects every client (their next operation fails),
  // deregisters all memory and frees every verbs resource.
  ~RdmaServer();
  RdmaServer(const RdmaServer&) = delete;
  RdmaServer& operator=(const RdmaServer&) = delete;

  // Registers [memory.data(), +size) for remote READ/WRITE/atomics under
  // region id `region` and returns its key. Registering the same memory again
  // returns the same key; other memory under a known id replaces the old
  // registration (whose key stops working). Thread-safe.
  absl::StatusOr<RegionKey> Register(uint32_t region,
                                     std::span<std::byte> memory);
  // Revokes a region's key (remote accesses with it then fail). No-op for an
  // unknown id. Thread-safe.
  void Deregister(uint32_t region);

  // The port actually bound (useful when Start was given port 0).
  uint16_t port() const { return port_; }
  // Device/port/GID the server listens on, for logs.
  const std::string& binding() const { return binding_; }
  // Connections currently established.
  int connections() const { return connections_.load(); }

 private:
  struct Connection;
  struct Registration;

  explicit RdmaServer(const RdmaOptions& options);
  absl::Status Init(const std::string& host, uint16_t port);
  void Loop();
  void OnConnectRequest(const CmEvent& e);
  void Drop(rdma_cm_id* id, bool disconnect);

  const RdmaOptions options_;
  Admission admit_;
  uint16_t port_ = 0;
  std::string binding_;
  // Declaration order is destruction order reversed: connections go before
  // the registrations, those before the PD, the PD before the listening id
  // and that before its event channel.
  EventChannelPtr channel_;
  CmIdPtr listen_id_;
  ibv_context* ctx_ = nullptr;  // librdmacm's context for the device
  DeviceLimits limits_;
  PdPtr pd_;
  std::mutex mu_;  // guards regions_
  std::map<uint32_t, std::unique_ptr<Registration>> regions_;
  std::map<rdma_cm_id*, std::unique_ptr<Connection>> conns_;  // loop thread
  std::atomic<int> connections_{0};
  FileDescriptor wake_;  // eventfd that stops the loop
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace dmg::transport::rdma

#endif  // DMG_TRANSPORT_RDMA_RDMA_SERVER_H_

// The memory node's network face: a Boost.Asio server that answers the
// control plane (hello, region table, allocate/free, create store,
// shutdown) for every transport, and executes the tcp transport's one-sided
// batches on the node's I/O threads. Every operation is bounds-checked by the
// MemoryTarget before it touches memory; errors go back to the client and to
// the log. Regions a connection allocates are freed when it closes, so a
// compute node that dies leaves nothing behind.
#ifndef DMG_TRANSPORT_TCP_SERVER_H_
#define DMG_TRANSPORT_TCP_SERVER_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "transport/memory_target.h"

namespace dmg::transport {

struct TcpServerOptions {
  int io_threads = 2;
  uint32_t node_id = 0;
  // Filled in by an RDMA server: registers a region with the NIC and returns
  // its remote address and key (for the region table). Empty for tcp only.
  std::function<absl::Status(RegionInfo*)> register_region;
  std::function<void(uint32_t region)> deregister_region;
};

class TcpServer {
 public:
  // Listens on host:port (port 0: any free port; see port()).
  static absl::StatusOr<std::unique_ptr<TcpServer>> Start(
      MemoryTarget* target, const std::string& host, uint16_t port,
      TcpServerOptions options);
  ~TcpServer();

  uint16_t port() const;
  // Blocks until a client sends kShutdown or Stop() is called.
  void Wait();
  // Closes the listener and every connection and joins the I/O threads.
  void Stop();

 private:
  struct Impl;
  explicit TcpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace dmg::transport

#endif  // DMG_TRANSPORT_TCP_SERVER_H_

#include "transport/rdma/rdma_transport.h"

#include "absl/strings/str_format.h"
#include "transport/rdma/rdma_endpoint.h"

namespace dmg::transport::rdma {

absl::StatusOr<std::unique_ptr<RdmaTransport>> RdmaTransport::Connect(
    const std::vector<HostPort>& nodes, const RdmaOptions& options,
    const Credentials& credentials) {
  // Fail fast, with the one clear line, on machines without RDMA.
  if (absl::Status s = CheckRdmaDevices(options.device); !s.ok()) return s;
  TcpOptions tcp;
  tcp.timeout_ms = options.timeout_ms;
  tcp.credentials = credentials;
  absl::StatusOr<std::unique_ptr<TcpControl>> control =
      TcpControl::Connect(nodes, tcp);
  if (!control.ok()) return control.status();
  return std::unique_ptr<RdmaTransport>(
      new RdmaTransport(nodes, options, *std::move(control)));
}

absl::StatusOr<std::unique_ptr<Endpoint>> RdmaTransport::NewEndpoint() {
  std::vector<NodeAddress> addresses;
  for (const HostPort& n : nodes()) addresses.push_back({n.host, n.port});
  TcpControl* control = &this->control();
  RegionResolver resolver =
      [control](uint32_t node, uint32_t region) -> absl::StatusOr<RegionKey> {
    absl::StatusOr<std::vector<RegionInfo>> regions = control->List(node);
    if (!regions.ok()) return regions.status();
    for (const RegionInfo& r : *regions) {
      if (r.id == region) return RegionKey{r.remote_addr, r.rkey, r.length};
    }
    return absl::NotFoundError(
        absl::StrFormat("memory node %d: unknown region %d", node, region));
  };
  return ConnectEndpoint(options_, addresses, std::move(resolver));
}

absl::StatusOr<std::unique_ptr<RdmaMemoryService>> RdmaMemoryService::Start(
    const RdmaOptions& options, const HostPort& listen, MemoryTarget* target,
    TcpServerOptions* server_options) {
  absl::StatusOr<std::unique_ptr<RdmaServer>> server =
      RdmaServer::Start(options, listen.host, listen.port);
  if (!server.ok()) return server.status();
  auto service = std::unique_ptr<RdmaMemoryService>(new RdmaMemoryService());
  service->server_ = *std::move(server);
  RdmaServer* s = service->server_.get();
  server_options->register_region = [s, target](RegionInfo* r) {
    absl::StatusOr<std::span<std::byte>> memory = target->RegionMemory(r->id);
    if (!memory.ok()) return memory.status();
    absl::StatusOr<RegionKey> key = s->Register(r->id, *memory);
    if (!key.ok()) return key.status();
    r->remote_addr = key->addr;
    r->rkey = key->rkey;
    return absl::OkStatus();
  };
  server_options->deregister_region = [s](uint32_t region) {
    s->Deregister(region);
  };
  return service;
}

}  // namespace dmg::transport::rdma

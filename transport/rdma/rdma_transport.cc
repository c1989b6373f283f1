#include "transport/rdma/rdma_transport.h"

#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>

#include "absl/strings/str_format.h"
#include "transport/auth.h"
#include "transport/rdma/rdma_endpoint.h"
#include "transport/wire.h"

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
  // Each memory node admits a QP only with a ticket its (authenticated)
  // control plane issued.
  std::vector<std::string> tickets;
  for (uint32_t i = 0; i < nodes().size(); ++i) {
    absl::StatusOr<std::string> t = control->RdmaTicket(i);
    if (!t.ok()) return t.status();
    tickets.push_back(*std::move(t));
  }
  // After a stale key (a freed region) breaks a QP, the endpoint connects
  // again with a fresh ticket.
  TicketSource more_tickets = [control](uint32_t node) {
    return control->RdmaTicket(node);
  };
  return ConnectEndpoint(options_, addresses, std::move(resolver), tickets,
                         std::move(more_tickets));
}

// Tickets the control plane issued and no QP has used yet. One use each,
// and each expires (a client that asks and never connects leaves nothing).
class RdmaTicketBook {
 public:
  std::string Issue() {
    std::lock_guard lock(mu_);
    const Clock::time_point now = Clock::now();
    std::erase_if(live_, [&](const auto& t) { return t.second < now; });
    if (live_.size() >= kMaxLive) live_.erase(live_.begin());
    std::string ticket(wire::kRdmaTicketBytes, '\0');
    const Nonce n = NewNonce();
    std::memcpy(ticket.data(), n.data(), ticket.size());
    live_[ticket] = now + std::chrono::seconds(60);
    return ticket;
  }
  // The CM may pad private data with zeros: the ticket is its first bytes.
  bool Redeem(const std::string& private_data) {
    if (private_data.size() < wire::kRdmaTicketBytes) return false;
    std::lock_guard lock(mu_);
    auto it = live_.find(private_data.substr(0, wire::kRdmaTicketBytes));
    if (it == live_.end() || it->second < Clock::now()) return false;
    live_.erase(it);
    return true;
  }

 private:
  using Clock = std::chrono::steady_clock;
  static constexpr size_t kMaxLive = 1 << 16;
  std::mutex mu_;
  std::map<std::string, Clock::time_point> live_;
};

absl::StatusOr<std::unique_ptr<RdmaMemoryService>> RdmaMemoryService::Start(
    const RdmaOptions& options, const HostPort& listen, MemoryTarget* target,
    TcpServerOptions* server_options) {
  auto tickets = std::make_shared<RdmaTicketBook>();
  absl::StatusOr<std::unique_ptr<RdmaServer>> server = RdmaServer::Start(
      options, listen.host, listen.port,
      [tickets](const std::string& data) { return tickets->Redeem(data); });
  if (!server.ok()) return server.status();
  auto service = std::unique_ptr<RdmaMemoryService>(new RdmaMemoryService());
  server_options->issue_rdma_ticket = [tickets] { return tickets->Issue(); };
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

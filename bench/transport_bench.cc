// READ latency and bandwidth per transport backend, in the manner of
// perftest's ib_read_lat / ib_read_bw: for each size (64 B .. 1 MiB), batch
// depth (1 .. 64 READs posted as one batch) and window (batches kept in
// flight: Post without waiting, Wait for the oldest once `window` are out),
// repeatedly post batches for --seconds per point; report the mean time per
// batch, bandwidth, operation rate and the most batches the endpoint saw in
// flight at once (Endpoint::TakeMaxInFlight), as a table and (--json) JSON.
//
//   transport_bench --transport=local
//   transport_bench --transport=tcp              (in-process server, loopback)
//   transport_bench --transport=tcp --memory_nodes=HOST:PORT
//   transport_bench --transport=rdma [--host=$RXE_IP]  (needs an RDMA device)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <fstream>
#include <vector>

#include "absl/strings/str_format.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "memory_node/memory_node.h"
#include "transport/local_transport.h"
#include "transport/tcp_server.h"
#include "transport/tcp_transport.h"
#ifdef DMG_HAVE_RDMA
#include "transport/rdma/rdma_transport.h"
#endif

DEFINE_string(transport, "local", "local | tcp | rdma");
DEFINE_string(memory_nodes, "",
              "connect to this memory node instead of "
              "starting one in-process");
DEFINE_string(host, "127.0.0.1", "address of the in-process server");
DEFINE_double(seconds, 0.2, "measuring time per point");
DEFINE_string(json, "", "also write the results here");
DEFINE_string(sizes, "64,512,4096,16384,65536,262144,1048576", "bytes");
DEFINE_string(depths, "1,4,16,64", "READs per batch");
DEFINE_string(windows, "1", "batches kept in flight (1 = post, wait, repeat)");

namespace dmg {
namespace {

std::vector<uint64_t> ParseList(const std::string& s) {
  std::vector<uint64_t> out;
  size_t at = 0;
  while (at < s.size()) {
    size_t comma = s.find(',', at);
    if (comma == std::string::npos) comma = s.size();
    out.push_back(std::stoull(s.substr(at, comma - at)));
    at = comma + 1;
  }
  return out;
}

int Main() {
  memory_node::MemoryNode node(0);
  std::unique_ptr<transport::TcpServer> server;
  std::unique_ptr<transport::Transport> t;
  std::string address = FLAGS_memory_nodes;
#ifdef DMG_HAVE_RDMA
  std::unique_ptr<transport::rdma::RdmaMemoryService> rdma_service;
#endif
  if (FLAGS_transport == "local") {
    t = std::make_unique<transport::LocalTransport>(
        std::vector<transport::MemoryTarget*>{&node});
  } else if (address.empty()) {
    transport::TcpServerOptions so;
    uint16_t port = 17200;
#ifdef DMG_HAVE_RDMA
    if (FLAGS_transport == "rdma") {
      transport::rdma::RdmaOptions ro;
      auto s = transport::rdma::RdmaMemoryService::Start(ro, {FLAGS_host, port},
                                                         &node, &so);
      CHECK(s.ok()) << s.status();
      rdma_service = *std::move(s);
    }
#endif
    auto s = transport::TcpServer::Start(&node, FLAGS_host, port, so);
    CHECK(s.ok()) << s.status();
    server = *std::move(s);
    address = FLAGS_host + ":" + std::to_string(server->port());
  }
  if (!t) {
    auto nodes = transport::ParseHostPorts(address);
    CHECK(nodes.ok()) << nodes.status();
    if (FLAGS_transport == "tcp") {
      auto c = transport::TcpTransport::Connect(*nodes, {});
      CHECK(c.ok()) << c.status();
      t = *std::move(c);
    } else {
#ifdef DMG_HAVE_RDMA
      auto c = transport::rdma::RdmaTransport::Connect(*nodes, {});
      CHECK(c.ok()) << c.status();
      t = *std::move(c);
#else
      LOG(FATAL) << "built without RDMA";
#endif
    }
  }
  const uint64_t region_bytes = 64 << 20;
  auto region = t->AllocateRegion(0, region_bytes, "bench");
  CHECK(region.ok()) << region.status();
  auto ep = t->NewEndpoint();
  CHECK(ep.ok()) << ep.status();
  std::vector<char> buffer(64ull << 20);

  absl::PrintF("transport %s%s; %.2f s per point\n", t->name(),
               address.empty() ? "" : " (" + address + ")", FLAGS_seconds);
  absl::PrintF("%9s %6s %6s %12s %12s %12s %9s %12s\n", "bytes", "depth",
               "window", "batch_us", "MB/s", "kops/s", "in_flight",
               "typical_us");
  std::string json = "[";
  for (uint64_t size : ParseList(FLAGS_sizes)) {
    for (uint64_t depth : ParseList(FLAGS_depths)) {
      for (uint64_t window : ParseList(FLAGS_windows)) {
        window = std::max<uint64_t>(window, 1);
        // Each batch in flight READs into its own part of the buffer.
        if (size * depth * window > buffer.size()) continue;
        uint64_t batches = 0, offset = 0;
        std::deque<uint64_t> tickets;
        // Each batch's time from its first READ to its Wait returning; the
        // median is "typical_us", as ib_read_lat reports t_typical.
        std::deque<std::chrono::steady_clock::time_point> posted;
        std::vector<double> latency_us;
        (void)(*ep)->TakeMaxInFlight();
        auto start = std::chrono::steady_clock::now();
        double elapsed = 0;
        while (elapsed < FLAGS_seconds || batches < 3 * window) {
          char* dst = buffer.data() + (batches % window) * size * depth;
          posted.push_back(std::chrono::steady_clock::now());
          for (uint64_t i = 0; i < depth; ++i) {
            (*ep)->Read(0, region->id, offset, dst + i * size, size);
            offset = (offset + size) % (region_bytes - size);
          }
          tickets.push_back((*ep)->Post());
          if (tickets.size() >= window) {
            CHECK((*ep)->Wait(tickets.front()).ok());
            latency_us.push_back(
                std::chrono::duration<double, std::micro>(
                    std::chrono::steady_clock::now() - posted.front())
                    .count());
            tickets.pop_front();
            posted.pop_front();
          }
          ++batches;
          elapsed = std::chrono::duration<double>(
                        std::chrono::steady_clock::now() - start)
                        .count();
        }
        if (!tickets.empty()) CHECK((*ep)->Wait(tickets.back()).ok());
        elapsed = std::chrono::duration<double>(
                      std::chrono::steady_clock::now() - start)
                      .count();
        const uint64_t in_flight = (*ep)->TakeMaxInFlight();
        double batch_us = elapsed / batches * 1e6;
        double mbs = size * depth * batches / elapsed / 1e6;
        double kops = depth * batches / elapsed / 1e3;
        std::sort(latency_us.begin(), latency_us.end());
        const double typical_us =
            latency_us.empty() ? 0 : latency_us[latency_us.size() / 2];
        absl::PrintF("%9d %6d %6d %12.2f %12.1f %12.1f %9d %12.2f\n", size,
                     depth, window, batch_us, mbs, kops, in_flight, typical_us);
        absl::StrAppendFormat(
            &json,
            "%s\n  {\"transport\": \"%s\", \"bytes\": %d, "
            "\"depth\": %d, \"window\": %d, \"batch_us\": %.3f, "
            "\"MBps\": %.3f, \"kops\": %.3f, \"max_in_flight\": %d, "
            "\"typical_us\": %.3f}",
            json.size() > 1 ? "," : "", t->name(), size, depth, window,
            batch_us, mbs, kops, in_flight, typical_us);
      }
    }
  }
  json += "\n]\n";
  if (!FLAGS_json.empty()) std::ofstream(FLAGS_json) << json;
  return 0;
}

}  // namespace
}  // namespace dmg

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  return dmg::Main();
}

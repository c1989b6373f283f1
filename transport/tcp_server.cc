#include "transport/tcp_server.h"

#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "glog/logging.h"
#include "transport/wire.h"

namespace dmg::transport {

namespace asio = boost::asio;
using asio::ip::tcp;

struct TcpServer::Impl {
  MemoryTarget* target;
  TcpServerOptions options;
  asio::io_context io;
  tcp::acceptor acceptor{io};
  std::vector<std::thread> threads;
  std::mutex mu;
  std::condition_variable stopped_cv;
  bool stopped = false;
  std::set<std::shared_ptr<tcp::socket>> sockets;  // guarded by mu

  void RequestStop() {
    std::lock_guard lock(mu);
    stopped = true;
    stopped_cv.notify_all();
  }

  // Handles one request; returns the reply payload (or an error status).
  absl::StatusOr<std::string> Handle(const wire::FrameHeader& h,
                                     const std::string& payload,
                                     std::vector<uint32_t>& owned,
                                     bool* shutdown) {
    wire::Reader r(payload.data(), payload.size());
    std::string out;
    wire::Writer w(&out);
    auto malformed = [&] {
      return absl::InvalidArgumentError(
          absl::StrFormat("malformed request of type %d", h.type));
    };
    switch (h.type) {
      case wire::kHello: {
        uint32_t version;
        if (!r.Get(&version)) return malformed();
        if (version != wire::kProtocolVersion) {
          return absl::FailedPreconditionError(
              absl::StrFormat("protocol version %d, memory node speaks %d",
                              version, wire::kProtocolVersion));
        }
        w.Put(wire::kProtocolVersion);
        w.Put(options.node_id);
        return out;
      }
      case wire::kListRegions: {
        std::vector<RegionInfo> regions = target->ServeList();
        w.Put(static_cast<uint32_t>(regions.size()));
        for (RegionInfo& region : regions) {
          if (options.register_region) {
            if (absl::Status s = options.register_region(&region); !s.ok()) {
              return s;
            }
          }
          wire::PutRegion(w, region);
        }
        return out;
      }
      case wire::kAllocate:
      case wire::kCreateStore: {
        uint64_t bytes;
        std::string name;
        uint32_t node_id = 0;
        if (!r.Get(&bytes)) return malformed();
        if (h.type == wire::kAllocate ? !r.GetString(&name)
                                      : !r.Get(&node_id)) {
          return malformed();
        }
        if (h.type == wire::kCreateStore) {
          if (options.deregister_region)
            options.deregister_region(kStoreRegion);
          options.node_id = node_id;
          target->AssignNodeId(node_id);
        }
        absl::StatusOr<RegionInfo> region =
            h.type == wire::kAllocate ? target->ServeAllocate(bytes, name)
                                      : target->ServeCreateStore(bytes);
        if (!region.ok()) return region.status();
        if (h.type == wire::kAllocate) owned.push_back(region->id);
        if (options.register_region) {
          if (absl::Status s = options.register_region(&*region); !s.ok()) {
            return s;
          }
        }
        wire::PutRegion(w, *region);
        return out;
      }
      case wire::kFree: {
        uint32_t region;
        if (!r.Get(&region)) return malformed();
        if (options.deregister_region) options.deregister_region(region);
        if (absl::Status s = target->ServeFree(region); !s.ok()) return s;
        std::erase(owned, region);
        return out;
      }
      case wire::kShutdown:
        *shutdown = true;
        return out;
      case wire::kBatch:  // Session serves batches through HandleBatch
        return absl::InternalError("batch handed to Handle");
      default:
        return absl::InvalidArgumentError(
            absl::StrFormat("unknown request type %d", h.type));
    }
  }

  // Serves a batch into `frame` after its header's bytes: status is
  // returned, payload (READ bytes and atomics' old values) written in place,
  // so the reply leaves from the buffer the memory was read into.
  absl::Status HandleBatch(wire::Reader& r, std::string* frame) {
    uint32_t count;
    if (!r.Get(&count) || count > wire::kMaxOpsPerBatch) {
      return absl::InvalidArgumentError("malformed batch");
    }
    const char* ops_bytes = r.Take(uint64_t{count} * sizeof(wire::WireOp));
    if (ops_bytes == nullptr) {
      return absl::InvalidArgumentError("batch truncated");
    }
    std::vector<wire::WireOp> ops(count);
    std::memcpy(ops.data(), ops_bytes, ops.size() * sizeof(wire::WireOp));
    // Size the reply: status, then READ payloads and atomic results.
    uint64_t reply_bytes = 0;
    for (const wire::WireOp& op : ops) {
      if (op.kind == static_cast<uint8_t>(OpKind::kRead)) {
        reply_bytes += op.length;
      } else if (op.kind != static_cast<uint8_t>(OpKind::kWrite)) {
        reply_bytes += 8;
      }
    }
    if (reply_bytes > wire::kMaxPayload) {
      return absl::InvalidArgumentError("batch reply would be too large");
    }
    // Grows only: a session's buffer is reused, so a steady stream of
    // batches allocates (and zero-fills) nothing.
    frame->resize(sizeof(wire::FrameHeader) + reply_bytes);
    char* const data = frame->data() + sizeof(wire::FrameHeader);
    uint64_t at = 0;
    std::vector<Op> reads;
    for (uint32_t i = 0; i < count; ++i) {
      const wire::WireOp& op = ops[i];
      // A run of READs is served in one call (one lock, one count); on an
      // error the run is served again one by one below to name the READ.
      if (op.kind == static_cast<uint8_t>(OpKind::kRead)) {
        uint32_t end = i;
        uint64_t run_at = at;
        reads.clear();
        while (end < count &&
               ops[end].kind == static_cast<uint8_t>(OpKind::kRead)) {
          Op r{};
          r.kind = OpKind::kRead;
          r.region = ops[end].region;
          r.offset = ops[end].offset;
          r.length = ops[end].length;
          r.local = data + run_at;
          run_at += ops[end].length;
          reads.push_back(r);
          ++end;
        }
        if (target->ServeReads(reads).ok()) {
          at = run_at;
          i = end - 1;
          continue;
        }
      }
      absl::Status s;
      switch (static_cast<OpKind>(op.kind)) {
        case OpKind::kRead:
          s = target->ServeRead(op.region, op.offset, data + at, op.length);
          at += op.length;
          break;
        case OpKind::kWrite: {
          const char* src = r.Take(op.length);
          s = src == nullptr
                  ? absl::InvalidArgumentError(
                        "WRITE payload missing from batch")
                  : target->ServeWrite(op.region, op.offset, src, op.length);
          break;
        }
        case OpKind::kCompareAndSwap:
        case OpKind::kFetchAndAdd: {
          absl::StatusOr<uint64_t> old =
              op.kind == static_cast<uint8_t>(OpKind::kCompareAndSwap)
                  ? target->ServeCompareAndSwap(op.region, op.offset,
                                                op.compare, op.operand)
                  : target->ServeFetchAndAdd(op.region, op.offset, op.operand);
          if (old.ok()) std::memcpy(data + at, &*old, 8);
          s = old.status();
          at += 8;
          break;
        }
        default:
          s = absl::InvalidArgumentError(
              absl::StrFormat("unknown operation kind %d", op.kind));
      }
      if (!s.ok()) {
        LOG(WARNING) << "rejected operation " << i << " of a batch: " << s;
        return absl::Status(s.code(),
                            absl::StrFormat("operation %d of the batch: %s", i,
                                            std::string(s.message())));
      }
    }
    return absl::OkStatus();
  }

  asio::awaitable<void> Session(std::shared_ptr<tcp::socket> socket) {
    std::vector<uint32_t> owned;
    boost::system::error_code ec;
    auto token = asio::redirect_error(asio::use_awaitable, ec);
    std::string peer;
    {
      boost::system::error_code e2;
      auto ep = socket->remote_endpoint(e2);
      peer =
          e2 ? "?" : ep.address().to_string() + ":" + std::to_string(ep.port());
    }
    // Reused across requests (their capacity kept, up to a bound), so large
    // batches cost no allocation or page faults each time.
    std::string payload;
    std::string frame;
    constexpr size_t kKeepBytes = 64u << 20;
    while (true) {
      wire::FrameHeader h;
      co_await asio::async_read(*socket, asio::buffer(&h, sizeof(h)), token);
      if (ec) break;
      if (h.magic != wire::kMagic || h.length > wire::kMaxPayload) {
        LOG(WARNING) << "dropping " << peer << ": bad frame (magic 0x"
                     << std::hex << h.magic << std::dec << ", length "
                     << h.length << ")";
        break;
      }
      payload.resize(h.length);
      co_await asio::async_read(*socket, asio::buffer(payload), token);
      if (ec) break;
      bool shutdown = false;
      absl::Status status;
      if (h.type == wire::kBatch) {
        wire::Reader r(payload.data(), payload.size());
        status = HandleBatch(r, &frame);
      } else {
        absl::StatusOr<std::string> reply =
            Handle(h, payload, owned, &shutdown);
        status = reply.status();
        if (reply.ok()) {
          frame.resize(sizeof(wire::FrameHeader));
          frame += *reply;
        }
      }
      wire::FrameHeader rh{wire::kMagic,
                           static_cast<uint16_t>(h.type | wire::kReplyBit), 0,
                           0, h.request_id};
      if (!status.ok()) {
        rh.type |= wire::kErrorBit;
        frame.resize(sizeof(wire::FrameHeader));
        wire::Writer w(&frame);
        wire::PutStatus(w, status);
        if (h.type != wire::kBatch) {
          LOG(WARNING) << "request from " << peer << " failed: " << status;
        }
      }
      rh.length = static_cast<uint32_t>(frame.size() - sizeof(rh));
      std::memcpy(frame.data(), &rh, sizeof(rh));
      co_await asio::async_write(*socket, asio::buffer(frame), token);
      if (ec) break;
      if (frame.capacity() > kKeepBytes) std::string().swap(frame);
      if (payload.capacity() > kKeepBytes) std::string().swap(payload);
      if (shutdown) {
        LOG(INFO) << "shutdown requested by " << peer;
        RequestStop();
      }
    }
    for (uint32_t region : owned) {
      if (options.deregister_region) options.deregister_region(region);
      absl::Status s = target->ServeFree(region);
      LOG_IF(WARNING, !s.ok()) << "freeing region " << region << ": " << s;
    }
    if (!owned.empty()) {
      LOG(INFO) << peer << " disconnected; freed its " << owned.size()
                << " region(s)";
    }
    std::lock_guard lock(mu);
    sockets.erase(socket);
  }

  asio::awaitable<void> Accept() {
    boost::system::error_code ec;
    while (true) {
      auto socket = std::make_shared<tcp::socket>(io);
      co_await acceptor.async_accept(
          *socket, asio::redirect_error(asio::use_awaitable, ec));
      if (ec) {
        if (ec == asio::error::operation_aborted || !acceptor.is_open()) break;
        LOG(WARNING) << "accept failed: " << ec.message();
        continue;
      }
      socket->set_option(tcp::no_delay(true), ec);
      {
        std::lock_guard lock(mu);
        sockets.insert(socket);
      }
      asio::co_spawn(io, Session(socket), asio::detached);
    }
  }
};

TcpServer::TcpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

absl::StatusOr<std::unique_ptr<TcpServer>> TcpServer::Start(
    MemoryTarget* target, const std::string& host, uint16_t port,
    TcpServerOptions options) {
  auto impl = std::make_unique<Impl>();
  impl->target = target;
  impl->options = std::move(options);
  boost::system::error_code ec;
  asio::ip::address address = asio::ip::make_address(host, ec);
  if (ec) {
    tcp::resolver resolver(impl->io);
    auto results = resolver.resolve(host, std::to_string(port), ec);
    if (ec || results.empty()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "cannot resolve listen host '%s': %s", host, ec.message()));
    }
    address = results.begin()->endpoint().address();
  }
  tcp::endpoint endpoint(address, port);
  impl->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl->acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) impl->acceptor.bind(endpoint, ec);
  if (!ec) impl->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError(absl::StrFormat("cannot listen on %s:%d: %s",
                                                  host, port, ec.message()));
  }
  Impl* p = impl.get();
  asio::co_spawn(p->io, p->Accept(), asio::detached);
  for (int i = 0; i < std::max(1, p->options.io_threads); ++i) {
    p->threads.emplace_back([p] { p->io.run(); });
  }
  return std::unique_ptr<TcpServer>(new TcpServer(std::move(impl)));
}

uint16_t TcpServer::port() const {
  boost::system::error_code ec;
  return impl_->acceptor.local_endpoint(ec).port();
}

void TcpServer::Wait() {
  std::unique_lock lock(impl_->mu);
  impl_->stopped_cv.wait(lock, [&] { return impl_->stopped; });
}

void TcpServer::Stop() {
  if (impl_->threads.empty()) return;
  asio::post(impl_->io, [p = impl_.get()] {
    boost::system::error_code ec;
    p->acceptor.close(ec);
    std::lock_guard lock(p->mu);
    for (auto& s : p->sockets) s->close(ec);
  });
  // Sessions notice their closed sockets and end; then the context runs dry.
  for (auto& t : impl_->threads) t.join();
  impl_->threads.clear();
  impl_->RequestStop();
}

TcpServer::~TcpServer() { Stop(); }

}  // namespace dmg::transport

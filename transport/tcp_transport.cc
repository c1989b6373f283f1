#include "transport/tcp_transport.h"

#include <algorithm>
#include <boost/asio.hpp>
#include <cstring>
#include <deque>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "glog/logging.h"

namespace dmg::transport {

namespace asio = boost::asio;
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;

absl::StatusOr<std::vector<HostPort>> ParseHostPorts(const std::string& list,
                                                     bool allow_any_port) {
  std::vector<HostPort> out;
  for (absl::string_view item : absl::StrSplit(list, ',', absl::SkipEmpty())) {
    size_t colon = item.rfind(':');
    uint32_t port = 0;
    if (colon == absl::string_view::npos || colon == 0 ||
        !absl::SimpleAtoi(item.substr(colon + 1), &port) ||
        (port == 0 && !allow_any_port) || port > 65535) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "memory node address '%s' is not host:port", std::string(item)));
    }
    out.push_back(
        {std::string(item.substr(0, colon)), static_cast<uint16_t>(port)});
  }
  if (out.empty()) {
    return absl::InvalidArgumentError("no memory node addresses given");
  }
  return out;
}

struct TcpConnection::Impl {
  asio::io_context io;
  tcp::socket socket{io};
  TcpOptions options;
  uint32_t next_request = 1;
  bool broken = false;
  // When each request still waiting for its reply began to be sent. Its
  // reply's header is due within the timeout of that moment, however long
  // the send itself waited: a frozen node that stopped reading mid-send was
  // reported after the send's timeout and then the reply's, up to 2x. (The
  // send, and a payload once its header came, get the timeout afresh: a
  // caller that comes late to a large reply, or pipelines, must not fail
  // on time it spent elsewhere.)
  std::deque<std::chrono::steady_clock::time_point> sent;
  // The last request sent or reply taken, and how long the memory node
  // lets the connection idle (its hello's reply; 0: for ever).
  std::chrono::steady_clock::time_point active =
      std::chrono::steady_clock::now();
  int idle_timeout_ms = 0;

  std::chrono::steady_clock::time_point Deadline(bool header) const {
    const auto now = std::chrono::steady_clock::now();
    const auto timeout = std::chrono::milliseconds(options.timeout_ms);
    if (!header || sent.empty()) return now + timeout;
    // A header already here is read however late the caller asks for it.
    return std::max(sent.front() + timeout, now + std::chrono::milliseconds(1));
  }

  // Runs the queued asynchronous operation until it completes or the
  // deadline passes; a timed-out connection is closed for good.
  absl::Status RunUntil(bool& done, boost::system::error_code& ec,
                        const HostPort& node, const char* what,
                        bool header = false) {
    const auto deadline = Deadline(header);
    // In slices, so that a node another connection found frozen ends this
    // wait too.
    constexpr auto kSlice = std::chrono::milliseconds(50);
    bool frozen = false;
    while (true) {
      io.restart();
      io.run_until(
          std::min(deadline, std::chrono::steady_clock::now() + kSlice));
      if (done || std::chrono::steady_clock::now() >= deadline) break;
      if (options.frozen != nullptr && options.frozen->Contains(node)) {
        frozen = true;
        break;
      }
    }
    if (!done) {
      boost::system::error_code ignored;
      socket.close(ignored);
      io.restart();
      io.run();  // let the cancelled operation finish
      broken = true;
      if (!frozen && options.frozen != nullptr) options.frozen->Add(node);
      return absl::DeadlineExceededError(absl::StrFormat(
          "memory node %s: no %s within %d ms (is it alive?)", node.ToString(),
          frozen ? "reply" : what, options.timeout_ms));
    }
    if (ec) {
      broken = true;
      return absl::UnavailableError(absl::StrFormat(
          "memory node %s: %s failed: %s", node.ToString(), what,
          ec == asio::error::eof ? "connection closed by the memory node"
                                 : ec.message()));
    }
    return absl::OkStatus();
  }
};

TcpConnection::TcpConnection(HostPort node, std::unique_ptr<Impl> impl)
    : node_(std::move(node)), impl_(std::move(impl)) {}

TcpConnection::~TcpConnection() = default;

absl::StatusOr<std::unique_ptr<TcpConnection>> TcpConnection::Connect(
    const HostPort& node, const TcpOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  boost::system::error_code ec;
  tcp::resolver resolver(impl->io);
  auto endpoints = resolver.resolve(node.host, std::to_string(node.port), ec);
  if (ec) {
    return absl::UnavailableError(absl::StrFormat(
        "cannot resolve memory node %s: %s", node.ToString(), ec.message()));
  }
  bool done = false;
  asio::async_connect(impl->socket, endpoints,
                      [&](const boost::system::error_code& e, const auto&) {
                        ec = e;
                        done = true;
                      });
  if (absl::Status s = impl->RunUntil(done, ec, node, "connection"); !s.ok()) {
    return s;
  }
  impl->socket.set_option(tcp::no_delay(true), ec);
  return std::unique_ptr<TcpConnection>(
      new TcpConnection(node, std::move(impl)));
}

absl::Status TcpConnection::Send(uint16_t type,
                                 std::span<const std::string_view> parts) {
  if (impl_->broken) {
    return absl::UnavailableError(absl::StrFormat(
        "memory node %s: connection already failed", node_.ToString()));
  }
  impl_->active = std::chrono::steady_clock::now();
  uint64_t size = 0;
  for (std::string_view p : parts) size += p.size();
  if (size > wire::kMaxPayload) {
    return absl::InvalidArgumentError("request too large");
  }
  wire::FrameHeader h{wire::kMagic, type, 0, static_cast<uint32_t>(size),
                      impl_->next_request++};
  impl_->sent.push_back(std::chrono::steady_clock::now());
  std::vector<asio::const_buffer> bufs;
  bufs.reserve(parts.size() + 1);
  bufs.push_back(asio::buffer(&h, sizeof(h)));
  for (std::string_view p : parts) {
    if (!p.empty()) bufs.push_back(asio::buffer(p.data(), p.size()));
  }
  bool done = false;
  boost::system::error_code ec;
  asio::async_write(impl_->socket, bufs,
                    [&](const boost::system::error_code& e, size_t) {
                      ec = e;
                      done = true;
                    });
  return impl_->RunUntil(done, ec, node_, "send");
}

int TcpConnection::idle_timeout_ms() const { return impl_->idle_timeout_ms; }

std::chrono::steady_clock::duration TcpConnection::IdleFor() const {
  return std::chrono::steady_clock::now() - impl_->active;
}

size_t TcpConnection::BytesArrived() {
  boost::system::error_code ec;
  const size_t n = impl_->socket.available(ec);
  return ec ? 0 : n;
}

absl::Status TcpConnection::ReceiveHeader(uint16_t type, wire::FrameHeader* h) {
  bool done = false;
  boost::system::error_code ec;
  asio::async_read(impl_->socket, asio::buffer(h, sizeof(*h)),
                   [&](const boost::system::error_code& e, size_t) {
                     ec = e;
                     done = true;
                   });
  if (absl::Status s =
          impl_->RunUntil(done, ec, node_, "reply", /*header=*/true);
      !s.ok()) {
    return s;
  }
  if (!impl_->sent.empty()) impl_->sent.pop_front();
  impl_->active = std::chrono::steady_clock::now();
  if (h->magic != wire::kMagic || h->length > wire::kMaxPayload ||
      (h->type & ~(wire::kReplyBit | wire::kErrorBit)) != type ||
      !(h->type & wire::kReplyBit)) {
    impl_->broken = true;
    return absl::DataLossError(
        absl::StrFormat("memory node %s: malformed reply", node_.ToString()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> TcpConnection::Receive(uint16_t type) {
  wire::FrameHeader h;
  if (absl::Status s = ReceiveHeader(type, &h); !s.ok()) return s;
  if (h.type & wire::kErrorBit) return ReceiveError(h);
  std::string payload(h.length, '\0');
  Piece piece{payload.data(), payload.size()};
  if (absl::Status s = ReceivePayload(std::span<const Piece>(&piece, 1));
      !s.ok()) {
    return s;
  }
  return payload;
}

absl::Status TcpConnection::ReceiveInto(uint16_t type,
                                        std::span<const Piece> pieces) {
  wire::FrameHeader h;
  if (absl::Status s = ReceiveHeader(type, &h); !s.ok()) return s;
  if (h.type & wire::kErrorBit) return ReceiveError(h);
  uint64_t expected = 0;
  for (const Piece& p : pieces) expected += p.size;
  if (h.length != expected) {
    impl_->broken = true;
    return absl::DataLossError(
        absl::StrFormat("memory node %s: reply of %d bytes, expected %d",
                        node_.ToString(), h.length, expected));
  }
  return ReceivePayload(pieces);
}

absl::Status TcpConnection::ReceivePayload(std::span<const Piece> pieces) {
  std::vector<asio::mutable_buffer> bufs;
  bufs.reserve(pieces.size());
  for (const Piece& p : pieces) {
    if (p.size > 0) bufs.push_back(asio::buffer(p.data, p.size));
  }
  bool done = false;
  boost::system::error_code ec;
  asio::async_read(impl_->socket, bufs,
                   [&](const boost::system::error_code& e, size_t) {
                     ec = e;
                     done = true;
                   });
  return impl_->RunUntil(done, ec, node_, "reply");
}

absl::Status TcpConnection::ReceiveError(const wire::FrameHeader& h) {
  std::string payload(h.length, '\0');
  Piece piece{payload.data(), payload.size()};
  if (absl::Status s = ReceivePayload(std::span<const Piece>(&piece, 1));
      !s.ok()) {
    return s;
  }
  wire::Reader r(payload.data(), payload.size());
  absl::Status s = wire::GetStatus(r);
  return absl::Status(s.code(),
                      absl::StrFormat("memory node %s: %s", node_.ToString(),
                                      std::string(s.message())));
}

absl::StatusOr<uint32_t> TcpConnection::Handshake(const Credentials& cred) {
  if (cred.job.size() > wire::kMaxJobName) {
    return absl::InvalidArgumentError(
        absl::StrFormat("job name of %d bytes; at most %d", cred.job.size(),
                        wire::kMaxJobName));
  }
  std::optional<Digest> key;
  if (cred.secret) {
    absl::StatusOr<Digest> k = cred.secret->KeyFor(cred.role);
    if (!k.ok()) return k.status();
    key = *k;
  }
  const Nonce client_nonce = NewNonce();
  std::string hello;
  wire::Writer w(&hello);
  w.Put(wire::kProtocolVersion);
  w.Put(static_cast<uint8_t>(cred.role));
  w.PutString(cred.job);
  w.Put(client_nonce);
  absl::StatusOr<std::string> reply = Call(wire::kHello, hello);
  if (!reply.ok()) return reply.status();
  wire::Reader r(reply->data(), reply->size());
  uint32_t version, id;
  uint8_t auth_required;
  Nonce server_nonce;
  uint32_t idle_timeout_ms = 0;
  if (!r.Get(&version) || !r.Get(&id) || !r.Get(&auth_required) ||
      !r.Get(&server_nonce) || !r.Get(&idle_timeout_ms)) {
    impl_->broken = true;
    return absl::DataLossError("malformed hello reply from memory node " +
                               node_.ToString());
  }
  impl_->idle_timeout_ms =
      static_cast<int>(std::min<uint32_t>(idle_timeout_ms, INT32_MAX));
  if (!auth_required) {
    if (key) {
      // It could be anyone's daemon: never send it the job's data.
      impl_->broken = true;
      return absl::PermissionDeniedError(absl::StrFormat(
          "memory node %s asks for no secret, but this client was given "
          "one: it is not a node of this cluster, or it was started without "
          "--secret_file",
          node_.ToString()));
    }
    return id;
  }
  if (!key) {
    impl_->broken = true;
    return absl::PermissionDeniedError(absl::StrFormat(
        "memory node %s requires the cluster secret: pass --secret_file=FILE "
        "or set DMG_SECRET_FILE",
        node_.ToString()));
  }
  std::string auth;
  wire::Writer aw(&auth);
  aw.Put(ClientProof(*key, server_nonce, client_nonce, cred.role, cred.job));
  if (cred.role == Role::kJob) {
    absl::StatusOr<JobToken> token =
        cred.token ? *cred.token : JobToken::ForThisProcess();
    if (!token.ok()) {
      impl_->broken = true;
      return token.status();
    }
    aw.Put(
        SealToken(*key, server_nonce, client_nonce, cred.job, token->bytes()));
  }
  absl::StatusOr<std::string> proof = Call(wire::kAuth, auth);
  if (!proof.ok()) {
    impl_->broken = true;
    return proof.status();
  }
  Digest server_proof;
  wire::Reader pr(proof->data(), proof->size());
  if (!pr.Get(&server_proof) ||
      !SameDigest(server_proof, ServerProof(*key, server_nonce, client_nonce,
                                            cred.role, cred.job))) {
    impl_->broken = true;
    return absl::PermissionDeniedError(absl::StrFormat(
        "memory node %s did not prove it holds the cluster secret",
        node_.ToString()));
  }
  return id;
}

// ---------------------------------------------------------------- control

absl::StatusOr<std::unique_ptr<TcpControl>> TcpControl::Connect(
    const std::vector<HostPort>& nodes, const TcpOptions& options) {
  auto control = std::unique_ptr<TcpControl>(new TcpControl());
  for (const HostPort& node : nodes) {
    absl::StatusOr<std::unique_ptr<TcpConnection>> c =
        TcpConnection::Connect(node, options);
    if (!c.ok()) return c.status();
    absl::StatusOr<uint32_t> id = (*c)->Handshake(options.credentials);
    if (!id.ok()) return id.status();
    control->connections_.push_back(*std::move(c));
    control->reported_ids_.push_back(*id);
  }
  for (const auto& c : control->connections_) {
    if (c->idle_timeout_ms() > 0) {
      control->keepalive_ =
          std::thread([p = control.get()] { p->KeepAlive(); });
      break;
    }
  }
  return control;
}

TcpControl::~TcpControl() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (keepalive_.joinable()) keepalive_.join();
}

void TcpControl::KeepAlive() {
  int shortest = INT32_MAX;
  for (const auto& c : connections_) {
    if (c->idle_timeout_ms() > 0) {
      shortest = std::min(shortest, c->idle_timeout_ms());
    }
  }
  const auto tick = std::chrono::milliseconds(std::max(10, shortest / 6));
  std::unique_lock lock(mu_);
  while (!stop_cv_.wait_for(lock, tick, [this] { return stopping_; })) {
    for (const auto& c : connections_) {
      const int bound = c->idle_timeout_ms();
      if (bound > 0 && c->IdleFor() >= std::chrono::milliseconds(bound / 3)) {
        // A failure shows at the connection's next real request.
        (void)c->Call(wire::kPing, "");
      }
    }
  }
}

absl::StatusOr<std::string> TcpControl::Call(uint32_t node, uint16_t type,
                                             const std::string& payload) {
  if (node >= connections_.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "no memory node %d (cluster has %d)", node, connections_.size()));
  }
  std::lock_guard lock(mu_);
  return connections_[node]->Call(type, payload);
}

absl::StatusOr<RegionInfo> TcpControl::Allocate(uint32_t node, uint64_t bytes,
                                                const std::string& name,
                                                const RegionFill& fill) {
  std::string req;
  wire::Writer w(&req);
  w.Put(bytes);
  w.PutString(name);
  if (fill.width != 0) {
    w.Put(fill.width);
    w.Put(fill.pattern);
  }
  absl::StatusOr<std::string> reply = Call(node, wire::kAllocate, req);
  if (!reply.ok()) return reply.status();
  wire::Reader r(reply->data(), reply->size());
  RegionInfo info;
  if (!wire::GetRegion(r, node, &info)) {
    return absl::DataLossError("malformed allocate reply");
  }
  return info;
}

absl::StatusOr<RegionInfo> TcpControl::CreateStore(uint32_t node,
                                                   uint64_t bytes,
                                                   uint64_t load_id) {
  std::string req;
  wire::Writer w(&req);
  w.Put(bytes);
  w.Put(node);
  w.Put(load_id);
  absl::StatusOr<std::string> reply = Call(node, wire::kCreateStore, req);
  if (!reply.ok()) return reply.status();
  wire::Reader r(reply->data(), reply->size());
  RegionInfo info;
  if (!wire::GetRegion(r, node, &info)) {
    return absl::DataLossError("malformed create-store reply");
  }
  return info;
}

absl::StatusOr<uint64_t> TcpControl::CommitStore(uint32_t node, uint8_t flags) {
  std::string req;
  wire::Writer(&req).Put(flags);
  absl::StatusOr<std::string> reply = Call(node, wire::kCommitStore, req);
  if (!reply.ok()) return reply.status();
  wire::Reader r(reply->data(), reply->size());
  uint64_t generation;
  if (!r.Get(&generation)) return absl::DataLossError("malformed commit reply");
  if (!(flags & wire::kCommitCheckOnly)) reported_ids_[node] = node;
  return generation;
}

absl::StatusOr<TcpControl::StoreInfo> TcpControl::GetStoreInfo(uint32_t node) {
  absl::StatusOr<std::string> reply = Call(node, wire::kStoreInfo, "");
  if (!reply.ok()) return reply.status();
  wire::Reader r(reply->data(), reply->size());
  StoreInfo info;
  if (!r.Get(&info.generation) || !r.Get(&info.load_id) ||
      !r.Get(&info.restored_snapshot)) {
    return absl::DataLossError("malformed store info reply");
  }
  return info;
}

absl::Status TcpControl::Free(uint32_t node, uint32_t region) {
  std::string req;
  wire::Writer(&req).Put(region);
  return Call(node, wire::kFree, req).status();
}

absl::StatusOr<std::vector<RegionInfo>> TcpControl::List(uint32_t node) {
  absl::StatusOr<std::string> reply = Call(node, wire::kListRegions, "");
  if (!reply.ok()) return reply.status();
  wire::Reader r(reply->data(), reply->size());
  uint32_t count;
  if (!r.Get(&count)) return absl::DataLossError("malformed region list");
  std::vector<RegionInfo> out(count);
  for (RegionInfo& info : out) {
    if (!wire::GetRegion(r, node, &info)) {
      return absl::DataLossError("malformed region list");
    }
  }
  return out;
}

absl::StatusOr<Transport::Kept> TcpControl::KeepJob(uint32_t keep_s) {
  std::string req;
  wire::Writer(&req).Put(keep_s);
  Transport::Kept all;
  all.granted_s = keep_s;
  for (uint32_t node = 0; node < num_nodes(); ++node) {
    absl::StatusOr<std::string> reply = Call(node, wire::kKeepJob, req);
    if (!reply.ok()) return reply.status();
    wire::Reader r(reply->data(), reply->size());
    Transport::Kept one;
    if (!r.Get(&one.granted_s) || !r.Get(&one.others)) {
      return absl::DataLossError("malformed keep reply");
    }
    all.granted_s = std::min(all.granted_s, one.granted_s);
    all.others = std::max(all.others, one.others);
    all.others_by_node.push_back(one.others);
  }
  return all;
}

absl::Status TcpControl::Shutdown(uint32_t node) {
  return Call(node, wire::kShutdown, "").status();
}

void TcpConnection::SetTimeout(int ms) { impl_->options.timeout_ms = ms; }

absl::StatusOr<wire::SnapshotSummary> TcpControl::Snapshot(
    uint32_t node, bool with_jobs, int reply_timeout_ms) {
  std::string req;
  wire::Writer(&req).Put(
      static_cast<uint8_t>(with_jobs ? wire::kSnapshotJobs : 0));
  if (node < connections_.size() && reply_timeout_ms > 0) {
    std::lock_guard lock(mu_);
    connections_[node]->SetTimeout(reply_timeout_ms);
  }
  absl::StatusOr<std::string> reply = Call(node, wire::kSnapshot, req);
  if (!reply.ok()) return reply.status();
  wire::Reader r(reply->data(), reply->size());
  wire::SnapshotSummary summary;
  if (!wire::GetSnapshotSummary(r, &summary) || r.remaining() != 0) {
    return absl::DataLossError("malformed snapshot reply");
  }
  return summary;
}

absl::StatusOr<std::string> TcpControl::RdmaTicket(uint32_t node) {
  absl::StatusOr<std::string> reply = Call(node, wire::kRdmaTicket, "");
  if (reply.ok() && reply->size() != wire::kRdmaTicketBytes) {
    return absl::DataLossError("malformed rdma ticket reply");
  }
  return reply;
}

// ---------------------------------------------------------------- data

namespace {

class TcpEndpoint : public Endpoint {
 public:
  TcpEndpoint(std::vector<HostPort> nodes, TcpOptions options)
      : nodes_(std::move(nodes)),
        options_(options),
        conns_(nodes_.size()),
        failed_(nodes_.size()) {}

  // Counts what was really outstanding: a batch whose replies have all
  // arrived (though not yet read) is no longer in flight.
  uint64_t TakeMaxInFlight() override {
    return std::exchange(max_in_flight_, InFlight(/*newest_counts=*/false));
  }

 protected:
  // A batch is asynchronous: Begin sends one frame per memory node (all
  // nodes before any reply is awaited), End reads the replies. Several
  // batches may be in flight; each connection returns replies in order.
  absl::Status Execute(std::span<const Op> ops) override {
    if (absl::Status s = Begin(ops); !s.ok()) return s;
    return End(ops);
  }

  absl::Status Begin(std::span<const Op> ops) override {
    absl::Status s = SendFrames(ops);
    if (!s.ok()) {
      failure_ = s;
      Reset();
      return s;
    }
    // The batch just sent counts however fast its reply came.
    max_in_flight_ = std::max(max_in_flight_, InFlight(/*newest_counts=*/true));
    return s;
  }

  absl::Status End(std::span<const Op> ops) override {
    auto it =
        std::find_if(pending_.begin(), pending_.end(),
                     [&](const Pending& p) { return p.key == ops.data(); });
    if (it == pending_.end()) {
      // The failure that dropped it names the node; repeat it.
      return absl::Status(
          failure_.ok() ? absl::StatusCode::kUnavailable : failure_.code(),
          absl::StrCat(
              "batch lost: an earlier batch on this endpoint "
              "failed: ",
              failure_.ok() ? "(no reason kept)" : failure_.message()));
    }
    std::vector<Frame> frames = std::move(it->frames);
    pending_.erase(it);
    absl::Status s = ReceiveFrames(frames);
    if (!s.ok()) {
      failure_ = s;
      Reset();
    }
    return s;
  }

 private:
  struct Frame {
    uint32_t node;
    std::vector<const Op*> ops;
    uint64_t reply_bytes = 0;  // a successful reply, header included
  };
  absl::Status failure_;  // the last failure, for batches it dropped
  struct Pending {
    const Op* key;  // the batch's ops (unique while it is in flight)
    std::vector<Frame> frames;
  };

  // Batches sent whose replies have not all arrived. Replies come back in
  // order per connection, so a batch's are in once the bytes that have
  // arrived on each of its connections cover every reply up to its own.
  // (An error reply's size differs; errors end the stream anyway.)
  uint64_t InFlight(bool newest_counts) {
    if (pending_.empty()) return 0;
    // Per connection: bytes arrived and not yet accounted to a reply (asked
    // once); below zero once a reply is short, so later ones are too.
    std::vector<int64_t> left(conns_.size(), 0);
    std::vector<bool> asked(conns_.size(), false);
    uint64_t count = 0;
    for (const Pending& p : pending_) {
      bool arrived = true;
      for (const Frame& f : p.frames) {
        int64_t& l = left[f.node];
        if (!asked[f.node]) {
          asked[f.node] = true;
          l = conns_[f.node]
                  ? static_cast<int64_t>(conns_[f.node]->BytesArrived())
                  : 0;
        }
        l -= static_cast<int64_t>(f.reply_bytes);
        if (l < 0) arrived = false;
      }
      if (!arrived || (newest_counts && &p == &pending_.back())) ++count;
    }
    return count;
  }

  // After any failure the request/reply streams may be out of step: drop
  // every connection (they reconnect on next use) and every batch in flight.
  void Reset() {
    for (auto& c : conns_) c.reset();
    pending_.clear();
  }

  absl::Status SendFrames(std::span<const Op> ops) {
    // One frame per node, bounded in op count and bytes.
    std::vector<Frame> frames;
    std::vector<int> open(nodes_.size(), -1);
    std::vector<uint64_t> open_bytes(nodes_.size(), 0);
    for (const Op& op : ops) {
      if (op.node >= nodes_.size()) {
        return absl::InvalidArgumentError(
            absl::StrFormat("no memory node %d", op.node));
      }
      uint64_t bytes = sizeof(wire::WireOp) + op.length;
      int& f = open[op.node];
      if (f < 0 || frames[f].ops.size() >= wire::kMaxOpsPerBatch ||
          open_bytes[op.node] + bytes > wire::kMaxPayload / 2) {
        f = static_cast<int>(frames.size());
        frames.push_back({op.node, {}});
        open_bytes[op.node] = 0;
      }
      frames[f].ops.push_back(&op);
      if (frames[f].reply_bytes == 0) {
        frames[f].reply_bytes = sizeof(wire::FrameHeader);
      }
      if (op.kind == OpKind::kRead) {
        frames[f].reply_bytes += op.length;
      } else if (op.kind != OpKind::kWrite) {
        frames[f].reply_bytes += 8;
      }
      open_bytes[op.node] += bytes;
    }
    for (const Frame& f : frames) {
      absl::StatusOr<TcpConnection*> c = Connection(f.node);
      if (!c.ok()) return c.status();
      std::string payload;
      wire::Writer w(&payload);
      w.Put(static_cast<uint32_t>(f.ops.size()));
      for (const Op* op : f.ops) {
        wire::WireOp wo{};
        wo.kind = static_cast<uint8_t>(op->kind);
        wo.region = op->region;
        wo.offset = op->offset;
        wo.length = op->length;
        wo.compare = op->compare;
        wo.operand = op->operand;
        w.Put(wo);
      }
      // The descriptors, then each write's bytes in order: large ones
      // straight from their buffers, small ones copied together (a
      // commit's thousand 4-byte claims as a thousand pieces of a writev
      // cost more than the copy).
      constexpr uint32_t kCopyBelow = 256;
      uint64_t small_bytes = 0;
      for (const Op* op : f.ops) {
        if (op->kind == OpKind::kWrite && op->length < kCopyBelow) {
          small_bytes += op->length;
        }
      }
      std::string small;
      small.reserve(small_bytes);  // the pieces point into it: no growth
      std::vector<std::string_view> parts = {payload};
      size_t piece_at = 0;  // where small's piece not yet in parts begins
      for (const Op* op : f.ops) {
        if (op->kind != OpKind::kWrite || op->length == 0) continue;
        const char* bytes = static_cast<const char*>(op->local);
        if (op->length < kCopyBelow) {
          small.append(bytes, op->length);
          continue;
        }
        if (small.size() > piece_at) {
          parts.emplace_back(small.data() + piece_at, small.size() - piece_at);
          piece_at = small.size();
        }
        parts.emplace_back(bytes, op->length);
      }
      if (small.size() > piece_at) {
        parts.emplace_back(small.data() + piece_at, small.size() - piece_at);
      }
      if (absl::Status s = (*c)->Send(wire::kBatch, parts); !s.ok()) {
        return s;
      }
    }
    pending_.push_back({ops.data(), std::move(frames)});
    return absl::OkStatus();
  }

  absl::Status ReceiveFrames(const std::vector<Frame>& frames) {
    absl::Status first_error;
    std::vector<TcpConnection::Piece> pieces;
    for (const Frame& f : frames) {
      if (!conns_[f.node]) {
        return absl::UnavailableError("connection to memory node " +
                                      nodes_[f.node].ToString() + " lost");
      }
      // READ payloads and atomics' old values go straight from the socket
      // to their destinations, in the order of the frame's operations.
      pieces.clear();
      for (const Op* op : f.ops) {
        if (op->kind == OpKind::kWrite) continue;
        pieces.push_back(
            {op->local, op->kind == OpKind::kRead ? op->length : size_t{8}});
      }
      absl::Status s = conns_[f.node]->ReceiveInto(wire::kBatch, pieces);
      if (!s.ok() && first_error.ok()) first_error = s;
    }
    return first_error;
  }

 private:
  // The endpoint's connection to `node`, made at its first use. One that
  // could not be made stays failed, as a broken one does: a caller that
  // goes on must not wait the timeout again for every batch.
  absl::StatusOr<TcpConnection*> Connection(uint32_t node) {
    if (!failed_[node].ok()) return failed_[node];
    if (options_.frozen != nullptr && options_.frozen->Contains(nodes_[node])) {
      failed_[node] = absl::DeadlineExceededError(absl::StrFormat(
          "memory node %s: no reply within %d ms (is it alive?)",
          nodes_[node].ToString(), options_.timeout_ms));
      return failed_[node];
    }
    // The memory node closes data connections silent past its idle bound
    // (they own nothing): one silent for half of it is opened again.
    if (conns_[node] && pending_.empty() &&
        conns_[node]->idle_timeout_ms() > 0 &&
        conns_[node]->IdleFor() >=
            std::chrono::milliseconds(conns_[node]->idle_timeout_ms() / 2)) {
      conns_[node].reset();
    }
    if (!conns_[node]) {
      absl::StatusOr<std::unique_ptr<TcpConnection>> c =
          TcpConnection::Connect(nodes_[node], options_);
      absl::StatusOr<uint32_t> id = c.ok()
                                        ? (*c)->Handshake(options_.credentials)
                                        : absl::StatusOr<uint32_t>(c.status());
      if (!id.ok()) {
        failed_[node] = id.status();
        return id.status();
      }
      conns_[node] = *std::move(c);
    }
    return conns_[node].get();
  }

  std::vector<HostPort> nodes_;
  TcpOptions options_;
  std::vector<std::unique_ptr<TcpConnection>> conns_;
  std::vector<absl::Status> failed_;  // per node: why it could not connect
  std::vector<Pending> pending_;      // batches begun, oldest first
  uint64_t max_in_flight_ = 0;        // since the last TakeMaxInFlight
};

}  // namespace

absl::StatusOr<std::unique_ptr<TcpTransport>> TcpTransport::Connect(
    const std::vector<HostPort>& nodes, const TcpOptions& given) {
  TcpOptions options = given;
  if (options.frozen == nullptr)
    options.frozen = std::make_shared<FrozenNodes>();
  absl::StatusOr<std::unique_ptr<TcpControl>> control =
      TcpControl::Connect(nodes, options);
  if (!control.ok()) return control.status();
  return std::unique_ptr<TcpTransport>(
      new TcpTransport(nodes, options, *std::move(control)));
}

absl::StatusOr<std::unique_ptr<Endpoint>> TcpTransport::NewEndpoint() {
  return std::make_unique<TcpEndpoint>(nodes(), options_);
}

}  // namespace dmg::transport

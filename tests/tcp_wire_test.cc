// The tcp server against hand-made frames on a raw socket (no DMG client):
// out-of-bounds and unknown-region requests are rejected with an error reply
// and logged, malformed frames drop the connection, nothing crashes, and the
// server keeps serving; a shutdown request stops it. And the client against a
// hand-made server: replies land in the caller's buffers, a reply of the
// wrong size is DataLoss.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "glog/logging.h"
#include "gtest/gtest.h"
#include "memory_node/memory_node.h"
#include "tests/raw_wire_client.h"
#include "transport/tcp_server.h"
#include "transport/tcp_transport.h"
#include "transport/wire.h"

namespace dmg {
namespace {

namespace wire = transport::wire;

// Collects WARNING lines logged while it lives.
class WarningCollector : public google::LogSink {
 public:
  WarningCollector() { google::AddLogSink(this); }
  ~WarningCollector() override { google::RemoveLogSink(this); }
  void send(google::LogSeverity severity, const char*, const char*, int,
            const struct ::tm*, const char* message, size_t length) override {
    if (severity != google::GLOG_WARNING) return;
    std::lock_guard lock(mu_);
    text_ += std::string(message, length) + "\n";
  }
  std::string text() {
    std::lock_guard lock(mu_);
    return text_;
  }

 private:
  std::mutex mu_;
  std::string text_;
};

using testing::RawClient;
using transport::Role;

std::string ReadOp(uint32_t region, uint64_t offset, uint32_t length) {
  std::string payload;
  wire::Writer w(&payload);
  w.Put(uint32_t{1});
  wire::WireOp op{};
  op.kind = static_cast<uint8_t>(transport::OpKind::kRead);
  op.region = region;
  op.offset = offset;
  op.length = length;
  w.Put(op);
  return payload;
}

TEST(TcpWireTest, BadRequestsAreRejectedAndLogged) {
  WarningCollector warnings;
  memory_node::MemoryNode node(0);
  auto region = node.ServeAllocate(4096, "data");
  ASSERT_TRUE(region.ok());
  auto server = transport::TcpServer::Start(&node, "127.0.0.1", 0, {});
  ASSERT_TRUE(server.ok()) << server.status();
  RawClient client((*server)->port());
  // Regions added in-process belong to no job: only the admin reaches them.
  ASSERT_TRUE(client.Hello(Role::kAdmin, "test").ok());
  wire::FrameHeader h;
  std::string reply;

  // Outside the region.
  client.Send(wire::kBatch, ReadOp(region->id, 4000, 200));
  ASSERT_TRUE(client.Receive(&h, &reply));
  EXPECT_EQ(h.type, wire::kBatch | wire::kReplyBit | wire::kErrorBit);
  wire::Reader r1(reply.data(), reply.size());
  absl::Status s1 = wire::GetStatus(r1);
  EXPECT_EQ(s1.code(), absl::StatusCode::kOutOfRange) << s1;
  // An unknown region.
  client.Send(wire::kBatch, ReadOp(999, 0, 8));
  ASSERT_TRUE(client.Receive(&h, &reply));
  wire::Reader r2(reply.data(), reply.size());
  EXPECT_EQ(wire::GetStatus(r2).code(), absl::StatusCode::kNotFound);
  // An offset that would overflow.
  client.Send(wire::kBatch, ReadOp(region->id, ~uint64_t{0} - 3, 8));
  ASSERT_TRUE(client.Receive(&h, &reply));
  wire::Reader r3(reply.data(), reply.size());
  EXPECT_EQ(wire::GetStatus(r3).code(), absl::StatusCode::kOutOfRange);
  // A truncated batch and an unknown request type.
  client.Send(wire::kBatch, std::string("\x05\x00\x00\x00", 4));
  ASSERT_TRUE(client.Receive(&h, &reply));
  EXPECT_TRUE(h.type & wire::kErrorBit);
  client.Send(99, "");
  ASSERT_TRUE(client.Receive(&h, &reply));
  EXPECT_TRUE(h.type & wire::kErrorBit);
  // A good request on the same connection still works.
  client.Send(wire::kBatch, ReadOp(region->id, 0, 16));
  ASSERT_TRUE(client.Receive(&h, &reply));
  EXPECT_EQ(h.type, wire::kBatch | wire::kReplyBit);
  EXPECT_EQ(reply.size(), 16u);

  std::string logged = warnings.text();
  EXPECT_NE(logged.find("outside region"), std::string::npos) << logged;
  EXPECT_NE(logged.find("unknown region 999"), std::string::npos) << logged;
  EXPECT_EQ(node.served().bytes_read,
            16u);  // only the good READ touched memory

  // A bad magic or an oversized frame drops that connection, not the server.
  RawClient bad((*server)->port());
  bad.Send(wire::kBatch, "", 0x12345678);
  EXPECT_FALSE(bad.Receive(&h, &reply));
  RawClient again((*server)->port());
  ASSERT_TRUE(again.Hello(Role::kAdmin, "test").ok());
  again.Send(wire::kBatch, ReadOp(region->id, 8, 8));
  ASSERT_TRUE(again.Receive(&h, &reply));
  EXPECT_EQ(h.type, wire::kBatch | wire::kReplyBit);
}

// A region or store bigger than the machine can hold gets an error reply
// (issue 13: such requests went unanswered and leaked the connection), and
// the connection and the daemon go on serving.
TEST(TcpWireTest, AllocationsThatCannotFitGetAnErrorReply) {
  for (uint64_t capacity : {uint64_t{0}, uint64_t{1} << 20}) {
    memory_node::MemoryNode::Options options;
    options.capacity_bytes = capacity;
    memory_node::MemoryNode node(0, options);
    auto server = transport::TcpServer::Start(&node, "127.0.0.1", 0, {});
    ASSERT_TRUE(server.ok()) << server.status();
    transport::TcpOptions admin;
    admin.credentials.role = Role::kAdmin;
    auto control = transport::TcpControl::Connect(
        {{"127.0.0.1", (*server)->port()}}, admin);
    ASSERT_TRUE(control.ok()) << control.status();
    SCOPED_TRACE(capacity == 0 ? "no capacity: the machine's" : "1 MiB");
    const uint64_t huge = uint64_t{1} << 50;
    auto region = (*control)->Allocate(0, huge, "huge");
    EXPECT_TRUE(absl::IsResourceExhausted(region.status())) << region.status();
    auto store = (*control)->CreateStore(0, huge);
    EXPECT_TRUE(absl::IsResourceExhausted(store.status())) << store.status();
    // Still serving, on the same connection: a small region fits.
    auto small = (*control)->Allocate(0, 4096, "small");
    EXPECT_TRUE(small.ok()) << small.status();
    auto list = (*control)->List(0);
    ASSERT_TRUE(list.ok()) << list.status();
    EXPECT_EQ(list->size(), 1u);
  }
}

TEST(TcpWireTest, OversizedFrameDropsTheConnection) {
  memory_node::MemoryNode node(0);
  auto server = transport::TcpServer::Start(&node, "127.0.0.1", 0, {});
  ASSERT_TRUE(server.ok());
  RawClient client((*server)->port());
  // Header claims more than kMaxPayload: nothing is allocated, socket closed.
  struct {
    wire::FrameHeader h;
  } frame{{wire::kMagic, wire::kBatch, 0, wire::kMaxPayload + 1, 1}};
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons((*server)->port());
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(write(fd, &frame, sizeof(frame)), ssize_t(sizeof(frame)));
  char c;
  EXPECT_EQ(read(fd, &c, 1), 0);  // closed by the server
  close(fd);
}

TEST(TcpWireTest, ShutdownRequestStopsTheServer) {
  memory_node::MemoryNode node(0);
  auto server = transport::TcpServer::Start(&node, "127.0.0.1", 0, {});
  ASSERT_TRUE(server.ok());
  RawClient client((*server)->port());
  ASSERT_TRUE(client.Hello(Role::kAdmin, "test").ok());
  client.Send(wire::kShutdown, "");
  wire::FrameHeader h;
  std::string reply;
  ASSERT_TRUE(client.Receive(&h, &reply));
  (*server)->Wait();  // returns: the shutdown was taken
  (*server)->Stop();
}

// A memory node with a 1 MiB region of known bytes, served over tcp.
struct PatternNode {
  memory_node::MemoryNode node{0};
  uint32_t region = 0;
  std::string pattern = std::string(1 << 20, '\0');
  std::unique_ptr<transport::TcpServer> server;

  explicit PatternNode(int step) {
    auto r = node.ServeAllocate(pattern.size(), "data");
    EXPECT_TRUE(r.ok());
    region = r->id;
    for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = char(i * step + 1);
    EXPECT_TRUE(
        node.ServeWrite(region, 0, pattern.data(), pattern.size()).ok());
    auto s = transport::TcpServer::Start(&node, "127.0.0.1", 0, {});
    EXPECT_TRUE(s.ok());
    server = *std::move(s);
  }
};

TEST(TcpWireTest, AReusedReplyBufferCarriesNoStaleBytes) {
  PatternNode n(7);
  const std::string& pattern = n.pattern;
  RawClient client(n.server->port());
  ASSERT_TRUE(client.Hello(Role::kAdmin, "test").ok());
  wire::FrameHeader h;
  std::string reply;
  // Big, small, failing, small again: each reply is exactly its READ.
  const struct {
    uint64_t offset;
    uint32_t length;
  } reads[] = {{0, 1 << 20}, {4096, 24}, {(1 << 20) - 8, 64}, {100, 3}};
  for (const auto& rd : reads) {
    client.Send(wire::kBatch, ReadOp(n.region, rd.offset, rd.length));
    ASSERT_TRUE(client.Receive(&h, &reply));
    if (rd.offset + rd.length > pattern.size()) {
      EXPECT_TRUE(h.type & wire::kErrorBit);
      continue;
    }
    EXPECT_EQ(h.type, wire::kBatch | wire::kReplyBit);
    EXPECT_EQ(reply, pattern.substr(rd.offset, rd.length));
  }
}

// Issue 39 item 5: a client without the secret cannot flood the log.
// 9,000 malformed hellos, each on its own connection, each answered with
// its error: at most 100 WARNING lines (10 a kind per 10 s, the rest
// counted in the next line that gets through).
TEST(TcpWireTest, BadHellosCannotFloodTheLog) {
  memory_node::MemoryNode node(0);
  auto server = transport::TcpServer::Start(&node, "127.0.0.1", 0, {});
  ASSERT_TRUE(server.ok());
  WarningCollector warnings;
  std::string bad;
  wire::Writer w(&bad);
  w.Put(wire::kProtocolVersion);
  w.Put(uint8_t{9});  // no such role
  int answered = 0;
  for (int i = 0; i < 9000; ++i) {
    RawClient c((*server)->port());
    c.Send(wire::kHello, bad);
    wire::FrameHeader h;
    std::string reply;
    answered += c.Receive(&h, &reply) && (h.type & wire::kErrorBit);
  }
  EXPECT_EQ(answered, 9000);
  const std::string text = warnings.text();
  const auto lines = std::count(text.begin(), text.end(), '\n');
  EXPECT_LE(lines, 100) << text.substr(0, 2000);
  EXPECT_NE(text.find("similar lines suppressed"), std::string::npos);
}

// A closed connection's large buffers serve the next connection (dmg run
// connects again every trial; fresh buffers cost page faults each time),
// and a reply from a reused buffer is exactly its READ.
TEST(TcpWireTest, ClosedConnectionsBuffersServeTheNextOne) {
  PatternNode n(5);
  const std::string& pattern = n.pattern;
  const std::unique_ptr<transport::TcpServer>& server = n.server;
  wire::FrameHeader h;
  std::string reply;
  for (int round = 0; round < 3; ++round) {
    {
      RawClient client(server->port());
      ASSERT_TRUE(client.Hello(Role::kAdmin, "test").ok());
      const uint64_t offset = 1000 * round;
      client.Send(wire::kBatch, ReadOp(n.region, offset, 700 << 10));
      ASSERT_TRUE(client.Receive(&h, &reply));
      EXPECT_EQ(h.type, wire::kBatch | wire::kReplyBit);
      EXPECT_EQ(reply, pattern.substr(offset, 700 << 10)) << "round " << round;
    }  // closed
    // The server has given the buffer back once it counts no connection.
    for (int i = 0; i < 200 && server->stats().connections > 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_GT(server->stats().shelved_bytes, 700u << 10);
  }
  EXPECT_GE(server->stats().reused_buffers, 2u);
  EXPECT_EQ(server->stats().buffered_bytes, 0u);
}

// A one-connection server that answers every frame with `reply_length`
// bytes of 0xAB in a reply of the frame's type.
class FakeServer {
 public:
  explicit FakeServer(uint32_t reply_length) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    EXPECT_EQ(listen(listen_fd_, 1), 0);
    socklen_t len = sizeof(a);
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this, reply_length] {
      const int fd = accept(listen_fd_, nullptr, nullptr);
      wire::FrameHeader h;
      while (read(fd, &h, sizeof(h)) == sizeof(h)) {
        std::string payload(h.length, '\0');
        if (h.length > 0 && read(fd, payload.data(), h.length) <= 0) break;
        wire::FrameHeader rh{wire::kMagic,
                             static_cast<uint16_t>(h.type | wire::kReplyBit), 0,
                             reply_length, h.request_id};
        std::string frame(reinterpret_cast<char*>(&rh), sizeof(rh));
        frame += std::string(reply_length, '\xAB');
        if (write(fd, frame.data(), frame.size()) < 0) break;
      }
      close(fd);
    });
  }
  ~FakeServer() {
    thread_.join();
    close(listen_fd_);
  }
  uint16_t port() const { return port_; }

 private:
  int listen_fd_;
  uint16_t port_;
  std::thread thread_;
};

TEST(TcpClientTest, RepliesLandInTheCallersPiecesAndTheWrongSizeIsDataLoss) {
  for (uint32_t length : {12u, 11u, 13u}) {
    FakeServer server(length);
    auto c = transport::TcpConnection::Connect(
        transport::HostPort{"127.0.0.1", server.port()},
        transport::TcpOptions{});
    ASSERT_TRUE(c.ok()) << c.status();
    ASSERT_TRUE((*c)->Send(wire::kBatch, std::string("x")).ok());
    char a[4] = {}, b[8] = {};
    const transport::TcpConnection::Piece pieces[] = {{a, 4}, {b, 8}};
    absl::Status s = (*c)->ReceiveInto(wire::kBatch, pieces);
    if (length == 12) {
      ASSERT_TRUE(s.ok()) << s;
      EXPECT_EQ(std::string(a, 4), std::string(4, '\xAB'));
      EXPECT_EQ(std::string(b, 8), std::string(8, '\xAB'));
    } else {
      EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
      EXPECT_NE(s.message().find("expected 12"), std::string::npos) << s;
      // The connection is not used again.
      EXPECT_FALSE((*c)->Send(wire::kBatch, std::string("x")).ok());
    }
  }
}

// Issue 39 item 8: a frozen memory node (here: one that accepts and never
// reads, as a SIGSTOPped daemon does) is reported within the timeout of
// the request, not after the send's wait and then the reply's. A request
// larger than the socket buffers blocks in its send; before, that took up
// to 2x --transport_timeout_ms.
TEST(TcpClientTest, AFrozenNodeIsReportedWithinTheTimeoutOfTheRequest) {
  const int listen_fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(listen_fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(listen(listen_fd, 1), 0);
  socklen_t len = sizeof(a);
  getsockname(listen_fd, reinterpret_cast<sockaddr*>(&a), &len);
  for (int timeout_ms : {300, 600}) {
    SCOPED_TRACE(::testing::Message() << "timeout " << timeout_ms << " ms");
    transport::TcpOptions options;
    options.timeout_ms = timeout_ms;
    auto c = transport::TcpConnection::Connect(
        transport::HostPort{"127.0.0.1", ntohs(a.sin_port)}, options);
    ASSERT_TRUE(c.ok()) << c.status();  // the kernel's backlog accepts it
    // Far more than the socket buffers hold: the send blocks for a while,
    // then gives up, or fills them and waits for the reply.
    const std::string big(64u << 20, 'w');
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<std::string> r = (*c)->Call(wire::kBatch, big);
    const double waited = std::chrono::duration<double, std::milli>(
                              std::chrono::steady_clock::now() - start)
                              .count();
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded)
        << r.status();
    // 1.2x, plus room for a loaded machine's scheduling (ctest -j2): the
    // bug was up to 2x.
    EXPECT_LE(waited, 1.2 * timeout_ms + 250);
    EXPECT_GE(waited, 0.9 * timeout_ms);
  }
  close(listen_fd);
}

}  // namespace
}  // namespace dmg

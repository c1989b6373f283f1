// Fuzzes the memory node's request decoder over a real socket: a
// transport::TcpServer serving a memory_node::MemoryNode runs in this
// process on loopback (open mode: no secret), each input is written as raw
// bytes to a fresh connection (then half-closed), and whatever comes back is
// read until the server closes or a short deadline passes. Afterwards the
// server must still answer a well-formed hello on a new connection: a
// crash, a sanitizer report, a leak, or a server that stops answering is a
// bug; error replies and dropped connections are fine answers. An input
// whose first byte is odd is sent after a valid hello, so the decoders
// behind the handshake are reached too: as the admin, or as a job when the
// byte's second bit is set (the checks a job-key client meets: its own
// regions only, the store read-only, no staging). Frames that claim more
// than 1 MiB are not sent (SendableBytes): they only wait for bytes.
// Seeds: valid frame sequences (hello, list, allocate, batches of READ,
// WRITE, CAS, FETCH_ADD, free, create store; make_corpus).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "fuzz/fuzz_util.h"
#include "memory_node/memory_node.h"
#include "transport/tcp_server.h"
#include "transport/wire.h"

namespace {

namespace wire = dmg::transport::wire;
using Clock = std::chrono::steady_clock;

struct Server {
  std::unique_ptr<dmg::memory_node::MemoryNode> node;
  std::unique_ptr<dmg::transport::TcpServer> tcp;
};

Server* TheServer() {
  static Server* server = [] {
    dmg::fuzz::QuietLogging();
    std::signal(SIGPIPE, SIG_IGN);
    auto* s = new Server;
    dmg::memory_node::MemoryNode::Options options;
    options.capacity_bytes = 16 << 20;  // what inputs may allocate
    s->node = std::make_unique<dmg::memory_node::MemoryNode>(0, options);
    // Region 1: something for batches to read and write from the start.
    FUZZ_CHECK(s->node->ServeAllocate(64 << 10, "data").ok());
    auto tcp =
        dmg::transport::TcpServer::Start(s->node.get(), "127.0.0.1", 0, {});
    FUZZ_CHECK(tcp.ok());
    s->tcp = *std::move(tcp);
    std::atexit([] { TheServer()->tcp->Stop(); });
    return s;
  }();
  return server;
}

// Two connections per input at several hundred inputs a second: each one
// closed leaves the client's end in TIME_WAIT for 60 s (25k of them after
// 30 s of fuzzing here), and one source address has ~28k ephemeral ports
// (CI: connect() failed after ~12k inputs). So each connection comes from
// the next of 250 loopback addresses (127.0.1.1-250, all local on lo), each
// with ports of its own; should those still run short (EADDRNOTAVAIL), it
// waits a little. Any other failure ends the run, naming it.
int Connect(uint16_t port) {
  static uint32_t next_source = 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  for (int attempt = 0;; ++attempt) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    FUZZ_CHECK(fd >= 0);
    sockaddr_in source{};
    source.sin_family = AF_INET;
    source.sin_addr.s_addr =
        htonl((127u << 24) | (1u << 8) | (1 + next_source++ % 250));
    int err = 0;
    if (bind(fd, reinterpret_cast<sockaddr*>(&source), sizeof(source)) != 0 ||
        connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
      err = errno;
    }
    if (err == 0) return fd;
    close(fd);
    // EINTR: libFuzzer's once-a-second alarm interrupted a connect that
    // waited (a SYN the server's full backlog dropped is sent again after
    // a second): try again, as for a port in use.
    if (err != EADDRNOTAVAIL && err != EADDRINUSE && err != EINTR) {
      std::fprintf(stderr, "connecting to the memory node failed: %s\n",
                   std::strerror(err));
      std::abort();
    }
    if (attempt == 100) {
      std::fprintf(stderr, "no connection to the memory node after 10 s: %s\n",
                   std::strerror(err));
      std::abort();
    }
    usleep(100 * 1000);
  }
}

// Reads into `out` (up to `n` bytes; n == 0: discard until EOF) until EOF,
// `n` bytes, or the deadline. Returns the bytes read.
size_t ReadUntil(int fd, char* out, size_t n, Clock::time_point deadline) {
  char sink[64 << 10];
  size_t got = 0;
  while (n == 0 || got < n) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - Clock::now());
    if (left.count() <= 0) break;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
    const ssize_t r =
        n == 0 ? read(fd, sink, sizeof(sink)) : read(fd, out + got, n - got);
    if (r <= 0) break;  // EOF, or the server reset the connection
    got += static_cast<size_t>(r);
  }
  return got;
}

// The server answers a hello (version, role, job, nonce) with its version,
// node id, whether it wants a proof, its nonce and its idle bound, within
// `wait`; false if it did not answer in time.
bool CheckHello(uint16_t port, std::chrono::seconds wait) {
  const int fd = Connect(port);
  std::string payload;
  wire::Writer w(&payload);
  w.Put(wire::kProtocolVersion);
  w.Put(uint8_t{1});  // Role::kJob
  w.PutString("fuzz");
  w.PutBytes(std::string(16, 'n').data(), 16);
  const wire::FrameHeader h{wire::kMagic, wire::kHello, 0,
                            static_cast<uint32_t>(payload.size()), 4242};
  std::string frame(reinterpret_cast<const char*>(&h), sizeof(h));
  frame += payload;
  FUZZ_CHECK(send(fd, frame.data(), frame.size(), MSG_NOSIGNAL) ==
             static_cast<ssize_t>(frame.size()));
  // version, node id, auth required, server nonce, idle bound.
  constexpr size_t kReply = 4 + 4 + 1 + 16 + 4;
  char reply[sizeof(wire::FrameHeader) + kReply];
  const size_t got = ReadUntil(fd, reply, sizeof(reply), Clock::now() + wait);
  close(fd);
  if (got != sizeof(reply)) return false;
  wire::FrameHeader rh;
  std::memcpy(&rh, reply, sizeof(rh));
  FUZZ_CHECK(rh.magic == wire::kMagic);
  FUZZ_CHECK(rh.type == (wire::kHello | wire::kReplyBit));
  FUZZ_CHECK(rh.request_id == 4242);
  FUZZ_CHECK(rh.length == kReply);
  uint32_t version;
  std::memcpy(&version, reply + sizeof(rh), 4);
  FUZZ_CHECK(version == wire::kProtocolVersion);
  return true;
}

void PrintServerStats(const char* when) {
  const dmg::transport::TcpServerStats st = TheServer()->tcp->stats();
  std::fprintf(stderr,
               "%s: connections %d, refused %llu, timeouts %llu, buffered "
               "%llu bytes, kept regions %llu\n",
               when, st.connections,
               static_cast<unsigned long long>(st.refused_connections),
               static_cast<unsigned long long>(st.timeouts),
               static_cast<unsigned long long>(st.buffered_bytes),
               static_cast<unsigned long long>(st.kept_regions));
}

// A hello must be answered: within 10 s, or, on a loaded machine (CI runs
// two sanitized fuzzers on two cores; one run there missed the 10 s after
// ~8,000 inputs, and the input alone passes), within 15 s of a second try
// (an input's 2 + 10 + 15 s stay under libFuzzer's -timeout=30), which the
// log then reports with the server's figures. No answer then is a server
// that stopped answering.
void CheckServerAnswers(uint16_t port) {
  if (CheckHello(port, std::chrono::seconds(10))) return;
  PrintServerStats("hello not answered within 10 s");
  if (CheckHello(port, std::chrono::seconds(15))) {
    std::fprintf(stderr, "the second hello was answered\n");
    return;
  }
  PrintServerStats("the memory node stopped answering hello");
  std::abort();
}

// The input up to the first frame that claims more than this: the server
// reads a payload in steps as it arrives, so a bigger claim only waits for
// bytes the input does not have (until the frame timeout).
constexpr uint32_t kMaxFuzzFrame = 1 << 20;

size_t SendableBytes(const uint8_t* data, size_t size) {
  size_t at = 0;
  while (size - at >= sizeof(wire::FrameHeader)) {
    wire::FrameHeader h;
    std::memcpy(&h, data + at, sizeof(h));
    if (h.magic != wire::kMagic) break;  // the server drops the connection
    if (h.length > kMaxFuzzFrame) return at;
    at += sizeof(h) + std::min<size_t>(h.length, size - at - sizeof(h));
  }
  return size;
}

}  // namespace

// A valid hello (this protocol version) as the admin (role 2) or a job (1):
// inputs whose first byte is odd start with it, so the decoder behind the
// handshake is fuzzed too (the server is open: it asks for no proof).
std::string Hello(uint8_t role) {
  std::string payload;
  wire::Writer w(&payload);
  w.Put(wire::kProtocolVersion);
  w.Put(role);
  w.PutString("fuzz");
  w.PutBytes(std::string(16, 'n').data(), 16);
  const wire::FrameHeader h{wire::kMagic, wire::kHello, 0,
                            static_cast<uint32_t>(payload.size()), 1};
  return std::string(reinterpret_cast<const char*>(&h), sizeof(h)) + payload;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Server* server = TheServer();
  const bool hello = size > 0 && (data[0] & 1);
  const uint8_t role = size > 0 && (data[0] & 2) ? 1 : 2;  // job : admin
  if (size > 0) {
    ++data;
    --size;
  }
  size = SendableBytes(data, size);
  const uint16_t port = server->tcp->port();
  const int fd = Connect(port);
  if (hello) {
    const std::string h = Hello(role);
    if (send(fd, h.data(), h.size(), MSG_NOSIGNAL) !=
        static_cast<ssize_t>(h.size())) {
      close(fd);
      return 0;
    }
  }
  size_t sent = 0;
  while (sent < size) {  // the server may close early: that is fine
    const ssize_t n = send(fd, data + sent, size - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  shutdown(fd, SHUT_WR);
  ReadUntil(fd, nullptr, 0, Clock::now() + std::chrono::seconds(2));
  close(fd);
  CheckServerAnswers(port);
  // The server's figures now and then, for a log that ends in a failure.
  static uint64_t inputs = 0;
  if (++inputs % 4096 == 0) PrintServerStats("after 4096 more inputs");
  return 0;
}

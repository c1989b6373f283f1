// A client of the memory node's wire protocol on a raw socket, for tests
// that send hand-made (or hostile) frames: no DMG client code in between.
#ifndef DMG_TESTS_RAW_WIRE_CLIENT_H_
#define DMG_TESTS_RAW_WIRE_CLIENT_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <optional>
#include <string>

#include "gtest/gtest.h"
#include "transport/auth.h"
#include "transport/wire.h"

namespace dmg::testing {

class RawClient {
 public:
  explicit RawClient(uint16_t port, int receive_timeout_s = 5) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
    EXPECT_TRUE(connected_);
    timeval tv{receive_timeout_s, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }
  ~RawClient() { close(fd_); }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  int fd() const { return fd_; }
  bool connected() const { return connected_; }
  // Writes raw bytes; false when the connection is gone.
  bool Write(const std::string& bytes) {
    // (No SIGPIPE when the server has closed it: that is an answer.)
    return send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
           static_cast<ssize_t>(bytes.size());
  }
  static std::string Frame(uint16_t type, const std::string& payload,
                           uint32_t magic = transport::wire::kMagic) {
    transport::wire::FrameHeader h{magic, type, 0,
                                   static_cast<uint32_t>(payload.size()), 7};
    std::string frame(reinterpret_cast<char*>(&h), sizeof(h));
    return frame + payload;
  }
  void Send(uint16_t type, const std::string& payload,
            uint32_t magic = transport::wire::kMagic) {
    ASSERT_TRUE(Write(Frame(type, payload, magic)));
  }
  // Reads one reply; returns false if the server closed the connection.
  bool Receive(transport::wire::FrameHeader* h, std::string* payload) {
    if (!ReadAll(h, sizeof(*h))) return false;
    payload->resize(h->length);
    return ReadAll(payload->data(), h->length);
  }
  // True once the server has closed the connection (end of stream, or a
  // reset when it closed with bytes of ours unread); false on a timeout.
  bool Closed() {
    char c;
    const ssize_t r = read(fd_, &c, 1);
    return r == 0 || (r < 0 && errno == ECONNRESET);
  }
  // The error status of an error reply (OK for a successful one).
  static absl::Status ReplyStatus(const transport::wire::FrameHeader& h,
                                  const std::string& payload) {
    if (!(h.type & transport::wire::kErrorBit)) return absl::OkStatus();
    transport::wire::Reader r(payload.data(), payload.size());
    return transport::wire::GetStatus(r);
  }

  static std::string HelloPayload(transport::Role role, const std::string& job,
                                  const transport::Nonce& nonce) {
    std::string p;
    transport::wire::Writer w(&p);
    w.Put(transport::wire::kProtocolVersion);
    w.Put(static_cast<uint8_t>(role));
    w.PutString(job);
    w.Put(nonce);
    return p;
  }
  // The token a job's raw clients carry by default: one per job name, so
  // two clients of one job agree (tests of other tokens pass their own).
  static transport::Digest TestToken(const std::string& job) {
    return transport::TokenVerifier(transport::Digest{}, "test " + job);
  }
  // The hello, and the proof when the server asks for one and `key` is
  // given (with the job's token, sealed, for role job). Returns the status
  // of the last reply (OK: accepted).
  absl::Status Hello(transport::Role role, const std::string& job,
                     std::optional<transport::Digest> key = std::nullopt,
                     std::optional<transport::Digest> token = std::nullopt) {
    const transport::Nonce nonce = transport::NewNonce();
    Send(transport::wire::kHello, HelloPayload(role, job, nonce));
    transport::wire::FrameHeader h;
    std::string reply;
    if (!Receive(&h, &reply)) return absl::UnavailableError("closed");
    if (absl::Status s = ReplyStatus(h, reply); !s.ok()) return s;
    transport::wire::Reader r(reply.data(), reply.size());
    uint32_t version, id;
    uint8_t auth_required;
    if (!r.Get(&version) || !r.Get(&id) || !r.Get(&auth_required) ||
        !r.Get(&server_nonce_)) {
      return absl::DataLossError("malformed hello reply");
    }
    if (!auth_required || !key) return absl::OkStatus();
    std::string auth;
    transport::wire::Writer aw(&auth);
    aw.Put(transport::ClientProof(*key, server_nonce_, nonce, role, job));
    if (role == transport::Role::kJob) {
      aw.Put(transport::SealToken(*key, server_nonce_, nonce, job,
                                  token ? *token : TestToken(job)));
    }
    last_proof_ = auth;
    Send(transport::wire::kAuth, auth);
    if (!Receive(&h, &reply)) return absl::UnavailableError("closed");
    return ReplyStatus(h, reply);
  }
  const std::string& last_proof() const { return last_proof_; }

 private:
  bool ReadAll(void* p, size_t n) {
    char* at = static_cast<char*>(p);
    while (n > 0) {
      ssize_t r = read(fd_, at, n);
      if (r <= 0) return false;
      at += r;
      n -= r;
    }
    return true;
  }
  int fd_;
  bool connected_ = false;
  transport::Nonce server_nonce_{};
  std::string last_proof_;
};

// One request and its reply's status (OK, or the error it carries;
// Unavailable when the server closed the connection instead).
inline absl::Status Request(RawClient& c, uint16_t type,
                            const std::string& payload,
                            std::string* reply = nullptr) {
  if (!c.Write(RawClient::Frame(type, payload))) {
    return absl::UnavailableError("closed");
  }
  transport::wire::FrameHeader h;
  std::string body;
  if (!c.Receive(&h, &body)) return absl::UnavailableError("closed");
  if (reply != nullptr) *reply = body;
  return RawClient::ReplyStatus(h, body);
}

}  // namespace dmg::testing

#endif  // DMG_TESTS_RAW_WIRE_CLIENT_H_

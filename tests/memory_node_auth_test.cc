// Issue 13, build items 1 and 2, against a real TcpServer over loopback:
// without the cluster secret (or with a wrong one) a client cannot read or
// write one byte; the store is read-only to jobs; a job sees and touches only
// its own job's regions; creating the store and stopping the daemon need the
// admin role. The attacks are hand-made frames on raw sockets (no DMG client
// code in between), and every test checks what the memory node served.
#include <sys/resource.h>
#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "memory_node/memory_node.h"
#include "tests/raw_wire_client.h"
#include "tests/test_util.h"
#include "transport/auth.h"
#include "transport/tcp_server.h"
#include "transport/tcp_transport.h"
#include "transport/wire.h"

namespace dmg {
namespace {

namespace wire = transport::wire;
using testing::RawClient;
using testing::Request;
using transport::Role;
using transport::Secret;

std::string OneOp(transport::OpKind kind, uint32_t region, uint64_t offset,
                  uint32_t length, const std::string& data = "") {
  std::string payload;
  wire::Writer w(&payload);
  w.Put(uint32_t{1});
  wire::WireOp op{};
  op.kind = static_cast<uint8_t>(kind);
  op.region = region;
  op.offset = offset;
  op.length = length;
  op.operand = 1;
  w.Put(op);
  payload += data;
  return payload;
}

// A memory node with a 1 MiB store of known bytes, served with `secret`.
class SecuredNode {
 public:
  explicit SecuredNode(std::optional<Secret> secret,
                       transport::TcpServerLimits limits = {}) {
    AlignedBuffer store(1 << 20);
    for (size_t i = 0; i < store.size(); ++i) {
      store.data()[i] = std::byte(i * 13 + 5);
    }
    original_.assign(reinterpret_cast<const char*>(store.data()), store.size());
    EXPECT_TRUE(node_.LoadStore(std::move(store)).ok());
    transport::TcpServerOptions options;
    options.secret = std::move(secret);
    options.limits = limits;
    auto server = transport::TcpServer::Start(&node_, "127.0.0.1", 0, options);
    EXPECT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }
  uint16_t port() const { return server_->port(); }
  transport::HostPort address() const { return {"127.0.0.1", port()}; }
  memory_node::MemoryNode& node() { return node_; }
  transport::TcpServer& server() { return *server_; }
  bool StoreIntact() {
    std::string now(original_.size(), '\0');
    EXPECT_TRUE(node_.ServeRead(0, 0, now.data(), now.size()).ok());
    return now == original_;
  }

 private:
  memory_node::MemoryNode node_{0};
  std::string original_;
  std::unique_ptr<transport::TcpServer> server_;
};

Secret NewSecret() {
  absl::StatusOr<Secret> s = Secret::Generate();
  EXPECT_TRUE(s.ok());
  return *s;
}

transport::TcpOptions Client(Role role, const std::string& job,
                             std::optional<Secret> secret) {
  transport::TcpOptions o;
  o.timeout_ms = 5000;
  o.credentials.role = role;
  o.credentials.job = job;
  o.credentials.secret = std::move(secret);
  return o;
}

TEST(SecretTest, FilesAreWrittenPrivateAndReadBackOnlyWhenPrivate) {
  testing::TempDir dir;
  const Secret secret = NewSecret();
  const std::string path = dir.file("cluster.secret");
  ASSERT_TRUE(secret.WriteFile(path).ok());
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // Never over an existing file.
  EXPECT_FALSE(NewSecret().WriteFile(path).ok());
  absl::StatusOr<Secret> back = Secret::ReadFile(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->admin());
  EXPECT_TRUE(transport::SameDigest(*back->KeyFor(Role::kAdmin),
                                    *secret.KeyFor(Role::kAdmin)));
  // The job key: the same job proof, no admin one.
  const Secret job = secret.JobOnly();
  EXPECT_FALSE(job.admin());
  EXPECT_TRUE(transport::SameDigest(*job.KeyFor(Role::kJob),
                                    *secret.KeyFor(Role::kJob)));
  EXPECT_TRUE(absl::IsPermissionDenied(job.KeyFor(Role::kAdmin).status()));
  EXPECT_FALSE(transport::SameDigest(*secret.KeyFor(Role::kJob),
                                     *secret.KeyFor(Role::kAdmin)));
  // Readable by others, not a secret file, not a regular file.
  chmod(path.c_str(), 0644);
  absl::StatusOr<Secret> open = Secret::ReadFile(path);
  EXPECT_TRUE(absl::IsPermissionDenied(open.status())) << open.status();
  EXPECT_NE(open.status().message().find("chmod 600"), std::string::npos);
  const std::string junk = dir.file("junk");
  { std::ofstream(junk) << "hello\n"; }
  chmod(junk.c_str(), 0600);
  absl::StatusOr<Secret> bad = Secret::ReadFile(junk);
  EXPECT_TRUE(absl::IsInvalidArgument(bad.status())) << bad.status();
  EXPECT_NE(bad.status().message().find("line 1"), std::string::npos);
  EXPECT_FALSE(Secret::ReadFile("/dev/null").ok());
  EXPECT_TRUE(absl::IsNotFound(Secret::ReadFile(dir.file("none")).status()));
}

// Raw sockets against a node with a secret: nothing but the handshake is
// answered before the proof, and a wrong proof or a replayed one ends the
// connection. Not one byte of the store is read or written.
TEST(MemoryNodeAuthTest, WithoutTheSecretNothingIsServed) {
  const Secret secret = NewSecret();
  SecuredNode n(secret);
  const std::string read_store = OneOp(transport::OpKind::kRead, 0, 0, 4096);
  const std::string write_store =
      OneOp(transport::OpKind::kWrite, 0, 0, 4, "EVIL");
  // No hello at all: READ, WRITE, list, allocate, free, create, shutdown.
  const std::vector<std::pair<uint16_t, std::string>> requests = {
      {wire::kBatch, read_store},
      {wire::kBatch, write_store},
      {wire::kListRegions, ""},
      {wire::kAllocate, std::string(10, '\0')},
      {wire::kFree, std::string(4, '\0')},
      {wire::kCreateStore, std::string(12, '\1')},
      {wire::kShutdown, ""}};
  for (const auto& [type, payload] : requests) {
    SCOPED_TRACE(type);
    RawClient c(n.port());
    absl::Status s = Request(c, type, payload);
    EXPECT_TRUE(absl::IsPermissionDenied(s)) << s;
    EXPECT_TRUE(c.Closed());
  }
  // A hello, then requests without the proof.
  {
    RawClient c(n.port());
    EXPECT_TRUE(c.Hello(Role::kAdmin, "evil").ok());  // asks for the proof
    EXPECT_TRUE(absl::IsPermissionDenied(Request(c, wire::kBatch, read_store)));
    EXPECT_TRUE(c.Closed());
  }
  // A wrong secret, for either role.
  for (Role role : {Role::kJob, Role::kAdmin}) {
    RawClient c(n.port());
    absl::Status s = c.Hello(role, "evil", *NewSecret().KeyFor(role));
    EXPECT_TRUE(absl::IsPermissionDenied(s)) << s;
    EXPECT_TRUE(c.Closed());
  }
  // A job key claiming the admin role.
  {
    RawClient c(n.port());
    absl::Status s = c.Hello(Role::kAdmin, "evil", *secret.KeyFor(Role::kJob));
    EXPECT_TRUE(absl::IsPermissionDenied(s)) << s;
  }
  // A proof recorded from a good exchange, replayed on a new connection
  // (its server nonce is new, so the proof is worth nothing).
  std::string recorded;
  {
    RawClient good(n.port());
    ASSERT_TRUE(
        good.Hello(Role::kAdmin, "ops", *secret.KeyFor(Role::kAdmin)).ok());
    recorded = good.last_proof();
  }
  {
    RawClient replay(n.port());
    EXPECT_TRUE(replay.Hello(Role::kAdmin, "ops").ok());
    EXPECT_TRUE(
        absl::IsPermissionDenied(Request(replay, wire::kAuth, recorded)));
    EXPECT_TRUE(replay.Closed());
  }
  EXPECT_EQ(n.node().served().bytes_read, 0u);
  EXPECT_EQ(n.node().served().bytes_written, 0u);
  EXPECT_TRUE(n.StoreIntact());
  EXPECT_GE(n.server().stats().auth_failures, 4u);

  // The DMG client: no secret, a wrong one, then the right one.
  auto none = transport::TcpControl::Connect(
      {n.address()}, Client(Role::kJob, "j", std::nullopt));
  EXPECT_TRUE(absl::IsPermissionDenied(none.status())) << none.status();
  EXPECT_NE(none.status().message().find("--secret_file"), std::string::npos);
  auto wrong = transport::TcpControl::Connect(
      {n.address()}, Client(Role::kJob, "j", NewSecret()));
  EXPECT_TRUE(absl::IsPermissionDenied(wrong.status())) << wrong.status();
  auto right = transport::TcpTransport::Connect(
      {n.address()}, Client(Role::kJob, "j", secret.JobOnly()));
  ASSERT_TRUE(right.ok()) << right.status();
  auto ep = (*right)->NewEndpoint();
  ASSERT_TRUE(ep.ok());
  char buf[64];
  (*ep)->Read(0, 0, 0, buf, sizeof(buf));
  ASSERT_TRUE((*ep)->Flush().ok());
  EXPECT_EQ(buf[1], char(1 * 13 + 5));
}

// A client holding a secret never talks to a node that asks for none: it
// could be anyone's, feeding the job made-up bytes.
TEST(MemoryNodeAuthTest, AClientWithASecretRefusesAnOpenNode) {
  SecuredNode open(std::nullopt);
  auto c = transport::TcpControl::Connect({open.address()},
                                          Client(Role::kJob, "j", NewSecret()));
  EXPECT_TRUE(absl::IsPermissionDenied(c.status())) << c.status();
  EXPECT_NE(c.status().message().find("asks for no secret"), std::string::npos);
}

// Access rules hold whatever the client: checked with raw frames after a
// successful handshake, with a secret and without one.
TEST(MemoryNodeAuthTest, JobsReadTheStoreAndTouchOnlyTheirOwnRegions) {
  const Secret secret = NewSecret();
  for (bool with_secret : {true, false}) {
    SCOPED_TRACE(with_secret ? "with a secret" : "open");
    SecuredNode n(with_secret ? std::optional<Secret>(secret) : std::nullopt);
    auto key = [&](Role r) {
      return with_secret ? std::optional(*secret.KeyFor(r)) : std::nullopt;
    };
    RawClient a(n.port()), b(n.port());
    ASSERT_TRUE(a.Hello(Role::kJob, "alice", key(Role::kJob)).ok());
    ASSERT_TRUE(b.Hello(Role::kJob, "bob", key(Role::kJob)).ok());
    // The store: READ yes; WRITE, CAS and FAA no.
    std::string reply;
    ASSERT_TRUE(Request(a, wire::kBatch,
                        OneOp(transport::OpKind::kRead, 0, 8, 8), &reply)
                    .ok());
    EXPECT_EQ(reply.size(), 8u);
    for (transport::OpKind kind :
         {transport::OpKind::kWrite, transport::OpKind::kCompareAndSwap,
          transport::OpKind::kFetchAndAdd}) {
      absl::Status s =
          Request(a, wire::kBatch,
                  OneOp(kind, 0, 64, kind == transport::OpKind::kWrite ? 4 : 8,
                        kind == transport::OpKind::kWrite ? "EVIL" : ""));
      EXPECT_TRUE(absl::IsPermissionDenied(s)) << s;
      EXPECT_NE(s.message().find("read-only"), std::string::npos) << s;
    }
    EXPECT_TRUE(n.StoreIntact());
    // Creating or freeing the store and stopping the node: admin only.
    std::string create;
    wire::Writer cw(&create);
    cw.Put(uint64_t{4096});
    cw.Put(uint32_t{0});
    cw.Put(uint64_t{1});  // load id
    EXPECT_TRUE(
        absl::IsPermissionDenied(Request(a, wire::kCreateStore, create)));
    std::string free_store(4, '\0');
    EXPECT_TRUE(absl::IsPermissionDenied(Request(a, wire::kFree, free_store)));
    EXPECT_TRUE(absl::IsPermissionDenied(Request(a, wire::kShutdown, "")));
    EXPECT_TRUE(n.StoreIntact());

    // Alice's region: Bob cannot see, read, write or free it.
    std::string alloc;
    wire::Writer aw(&alloc);
    aw.Put(uint64_t{4096});
    aw.PutString("alice.state");
    ASSERT_TRUE(Request(a, wire::kAllocate, alloc, &reply).ok());
    wire::Reader rr(reply.data(), reply.size());
    transport::RegionInfo region;
    ASSERT_TRUE(wire::GetRegion(rr, 0, &region));
    ASSERT_TRUE(
        Request(a, wire::kBatch,
                OneOp(transport::OpKind::kWrite, region.id, 0, 4, "MINE"))
            .ok());
    auto listed = [&](RawClient& c) {
      std::string list;
      EXPECT_TRUE(Request(c, wire::kListRegions, "", &list).ok());
      wire::Reader lr(list.data(), list.size());
      uint32_t count = 0;
      lr.Get(&count);
      std::vector<uint32_t> ids;
      for (uint32_t i = 0; i < count; ++i) {
        transport::RegionInfo info;
        EXPECT_TRUE(wire::GetRegion(lr, 0, &info));
        ids.push_back(info.id);
      }
      return ids;
    };
    EXPECT_EQ(listed(a), (std::vector<uint32_t>{0, region.id}));
    EXPECT_EQ(listed(b), (std::vector<uint32_t>{0}));
    for (const std::string& op :
         {OneOp(transport::OpKind::kRead, region.id, 0, 4),
          OneOp(transport::OpKind::kWrite, region.id, 0, 4, "EVIL"),
          OneOp(transport::OpKind::kFetchAndAdd, region.id, 0, 8)}) {
      absl::Status s = Request(b, wire::kBatch, op);
      EXPECT_TRUE(absl::IsNotFound(s)) << s;  // as if it did not exist
    }
    std::string free_it;
    wire::Writer(&free_it).Put(region.id);
    EXPECT_TRUE(absl::IsNotFound(Request(b, wire::kFree, free_it)));
    // Alice's bytes are untouched; a read with the job's own name works.
    ASSERT_TRUE(Request(a, wire::kBatch,
                        OneOp(transport::OpKind::kRead, region.id, 0, 4),
                        &reply)
                    .ok());
    EXPECT_EQ(reply, "MINE");
    // Another connection of Alice's job shares her regions.
    RawClient a2(n.port());
    ASSERT_TRUE(a2.Hello(Role::kJob, "alice", key(Role::kJob)).ok());
    EXPECT_TRUE(Request(a2, wire::kBatch,
                        OneOp(transport::OpKind::kRead, region.id, 0, 4))
                    .ok());
    // The admin sees everything and may stop the node.
    RawClient admin(n.port());
    ASSERT_TRUE(admin.Hello(Role::kAdmin, "ops", key(Role::kAdmin)).ok());
    EXPECT_EQ(listed(admin), (std::vector<uint32_t>{0, region.id}));
    EXPECT_GE(n.server().stats().denied_requests, 8u);
    EXPECT_TRUE(Request(admin, wire::kShutdown, "").ok());
    n.server().Wait();
  }
}

// The daemon's memory under hostile connections: idle ones and half-sent
// handshakes are closed at the handshake deadline, oversized headers before
// authentication are dropped at once, and an authenticated client that
// announces 256 MiB frames and sends nothing holds only the first step of
// its buffer. The cap holds throughout, and a real client is served after.
TEST(MemoryNodeAuthTest, HostileConnectionsCannotExhaustTheDaemon) {
  // Both ends of 2,400 connections live in this process.
  const rlim_t descriptors = testing::RaiseDescriptorLimit();
  if (descriptors < 5000) GTEST_SKIP() << "descriptor limit " << descriptors;
  const Secret secret = NewSecret();
  transport::TcpServerLimits limits;
  limits.handshake_timeout_ms = 400;
  limits.frame_timeout_ms = 400;
  limits.max_buffer_bytes = 16u << 20;
  limits.max_connections = 4000;
  // Every one of them waits for its deadline here (the limits that close
  // half-open ones sooner have tests of their own below).
  limits.max_handshakes = 4000;
  limits.max_peer_connections = 0;
  SecuredNode n(secret, limits);
  std::vector<std::unique_ptr<RawClient>> clients;
  for (int i = 0; i < 2000; ++i) {  // idle
    clients.push_back(std::make_unique<RawClient>(n.port()));
  }
  for (int i = 0; i < 200; ++i) {  // half-sent hello
    auto c = std::make_unique<RawClient>(n.port());
    const std::string hello = RawClient::Frame(
        wire::kHello,
        RawClient::HelloPayload(Role::kJob, "slow", transport::NewNonce()));
    EXPECT_TRUE(c->Write(hello.substr(0, i % 2 ? 10 : hello.size() - 3)));
    clients.push_back(std::move(c));
  }
  for (int i = 0; i < 100; ++i) {  // oversized headers, unauthenticated
    auto c = std::make_unique<RawClient>(n.port());
    wire::FrameHeader h{wire::kMagic, wire::kBatch, 0, wire::kMaxPayload, 1};
    EXPECT_TRUE(c->Write(std::string(reinterpret_cast<char*>(&h), sizeof(h))));
    clients.push_back(std::move(c));
  }
  for (int i = 0; i < 100; ++i) {  // authenticated, then announce 256 MiB
    auto c = std::make_unique<RawClient>(n.port());
    ASSERT_TRUE(c->Hello(Role::kJob, "big", *secret.KeyFor(Role::kJob)).ok());
    wire::FrameHeader h{wire::kMagic, wire::kBatch, 0, wire::kMaxPayload, 1};
    EXPECT_TRUE(c->Write(std::string(reinterpret_cast<char*>(&h), sizeof(h)) +
                         std::string(100, 'x')));
    clients.push_back(std::move(c));
  }
  // Past every deadline, the server has closed them all.
  for (int wait = 0; wait < 100 && n.server().stats().connections > 0; ++wait) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const transport::TcpServerStats st = n.server().stats();
  EXPECT_EQ(st.connections, 0);
  EXPECT_LE(st.max_buffered_bytes, limits.max_buffer_bytes);
  // Idle, half-sent and the authenticated 256 MiB announcers time out; the
  // unauthenticated oversized headers were dropped at once.
  EXPECT_GE(st.timeouts, 2000u + 200u + 100u);
  EXPECT_EQ(st.buffered_bytes, 0u);
  for (auto& c : clients) EXPECT_TRUE(c->Closed());
  // Served afterwards.
  auto t = transport::TcpTransport::Connect({n.address()},
                                            Client(Role::kJob, "j", secret));
  ASSERT_TRUE(t.ok()) << t.status();
  auto ep = (*t)->NewEndpoint();
  ASSERT_TRUE(ep.ok());
  std::string bytes(4096, '\0');
  (*ep)->Read(0, 0, 0, bytes.data(), bytes.size());
  ASSERT_TRUE((*ep)->Flush().ok());
  EXPECT_TRUE(n.StoreIntact());
}

// Over the connection limit a client is refused at once, with the reason
// as the reply to its hello; the ones inside it are served, and a slot that
// frees up is taken again.
TEST(MemoryNodeAuthTest, ConnectionsOverTheLimitAreClosed) {
  transport::TcpServerLimits limits;
  limits.max_connections = 8;
  limits.admin_slots = 0;
  SecuredNode n(std::nullopt, limits);
  std::vector<std::unique_ptr<RawClient>> inside;
  for (int i = 0; i < 8; ++i) {
    inside.push_back(std::make_unique<RawClient>(n.port()));
    ASSERT_TRUE(inside.back()->Hello(Role::kJob, "j").ok());
  }
  RawClient over(n.port());
  absl::Status refused = over.Hello(Role::kJob, "j");
  EXPECT_TRUE(absl::IsUnavailable(refused)) << refused;
  EXPECT_NE(refused.message().find("8 connections open (--max_connections=8)"),
            std::string::npos)
      << refused;
  EXPECT_TRUE(over.Closed());
  EXPECT_GE(n.server().stats().refused_connections, 1u);
  inside.pop_back();
  for (int wait = 0; wait < 100 && n.server().stats().connections > 7; ++wait) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  RawClient again(n.port());
  EXPECT_TRUE(again.Hello(Role::kJob, "j").ok());
}

// Requests bigger than the daemon's buffer cap get a busy error, not an
// allocation; the connection's buffers are given back.
TEST(MemoryNodeAuthTest, ARequestOverTheBufferCapGetsABusyError) {
  transport::TcpServerLimits limits;
  limits.max_buffer_bytes = 4u << 20;
  SecuredNode n(std::nullopt, limits);
  RawClient c(n.port());
  ASSERT_TRUE(c.Hello(Role::kJob, "j").ok());
  // A READ whose reply (8 MiB) is over the cap: busy, connection usable.
  std::string reply;
  absl::Status s =
      Request(c, wire::kBatch, OneOp(transport::OpKind::kRead, 0, 0, 1 << 20));
  EXPECT_TRUE(s.ok()) << s;
  std::string many;
  wire::Writer w(&many);
  w.Put(uint32_t{8});
  for (int i = 0; i < 8; ++i) {
    wire::WireOp op{};
    op.kind = static_cast<uint8_t>(transport::OpKind::kRead);
    op.length = 1 << 20;
    w.Put(op);
  }
  s = Request(c, wire::kBatch, many);
  EXPECT_TRUE(absl::IsResourceExhausted(s)) << s;
  EXPECT_TRUE(
      Request(c, wire::kBatch, OneOp(transport::OpKind::kRead, 0, 0, 64)).ok());
  EXPECT_LE(n.server().stats().max_buffered_bytes, limits.max_buffer_bytes);
}

// Issue 39 item 1: the loader's staging region belongs to the admin, not
// to the job name its connection gives: a job-key client that says hello
// as `dmg-load` neither sees it nor reads, writes or frees it (100 tries
// each), and the staged bytes stay the loader's.
TEST(MemoryNodeAuthTest, AJobCannotReachTheLoadersStaging) {
  const Secret secret = NewSecret();
  SecuredNode n(secret);
  RawClient loader(n.port());
  ASSERT_TRUE(
      loader.Hello(Role::kAdmin, "dmg-load", *secret.KeyFor(Role::kAdmin))
          .ok());
  std::string create;
  wire::Writer cw(&create);
  cw.Put(uint64_t{4096});
  cw.Put(uint32_t{0});
  cw.Put(uint64_t{7});
  std::string reply;
  ASSERT_TRUE(Request(loader, wire::kCreateStore, create, &reply).ok());
  transport::RegionInfo staging;
  wire::Reader rr(reply.data(), reply.size());
  ASSERT_TRUE(wire::GetRegion(rr, 0, &staging));
  const std::string staged(4096, 'S');
  ASSERT_TRUE(
      Request(loader, wire::kBatch,
              OneOp(transport::OpKind::kWrite, staging.id, 0, 4096, staged))
          .ok());
  RawClient job(n.port());
  ASSERT_TRUE(
      job.Hello(Role::kJob, "dmg-load", *secret.KeyFor(Role::kJob)).ok());
  std::string listed;
  ASSERT_TRUE(Request(job, wire::kListRegions, "", &listed).ok());
  wire::Reader lr(listed.data(), listed.size());
  uint32_t count = 0;
  ASSERT_TRUE(lr.Get(&count));
  for (uint32_t i = 0; i < count; ++i) {
    transport::RegionInfo region;
    ASSERT_TRUE(wire::GetRegion(lr, 0, &region));
    EXPECT_NE(region.id, staging.id) << "the job sees the staging region";
  }
  int served = 0;
  for (int i = 0; i < 100; ++i) {
    served += Request(job, wire::kBatch,
                      OneOp(transport::OpKind::kWrite, staging.id, i, 8,
                            std::string(8, 'X')))
                  .ok();
    served += Request(job, wire::kBatch,
                      OneOp(transport::OpKind::kRead, staging.id, i, 8))
                  .ok();
    std::string free;
    wire::Writer(&free).Put(staging.id);
    served += Request(job, wire::kFree, free).ok();
  }
  EXPECT_EQ(served, 0);
  std::string back;
  ASSERT_TRUE(Request(loader, wire::kBatch,
                      OneOp(transport::OpKind::kRead, staging.id, 0, 4096),
                      &back)
                  .ok());
  EXPECT_EQ(back, staged);
}

// The last slots are the admin's: with jobs (or someone holding the job
// key) in every other one, a job's hello is refused with the reason and an
// admin still gets in.
TEST(MemoryNodeAuthTest, TheLastSlotsAreKeptForTheAdmin) {
  const Secret secret = NewSecret();
  transport::TcpServerLimits limits;
  limits.max_connections = 8;
  limits.admin_slots = 2;
  SecuredNode n(secret, limits);
  std::vector<std::unique_ptr<RawClient>> jobs;
  for (int i = 0; i < 6; ++i) {
    jobs.push_back(std::make_unique<RawClient>(n.port()));
    ASSERT_TRUE(
        jobs.back()->Hello(Role::kJob, "j", *secret.KeyFor(Role::kJob)).ok());
  }
  RawClient late_job(n.port());
  absl::Status s = late_job.Hello(Role::kJob, "j", *secret.KeyFor(Role::kJob));
  EXPECT_TRUE(absl::IsResourceExhausted(s)) << s;
  EXPECT_NE(s.message().find("kept for the admin"), std::string::npos) << s;
  EXPECT_TRUE(late_job.Closed());
  for (int wait = 0; wait < 100 && n.server().stats().connections > 6; ++wait) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  RawClient admin1(n.port()), admin2(n.port());
  EXPECT_TRUE(
      admin1.Hello(Role::kAdmin, "ops", *secret.KeyFor(Role::kAdmin)).ok());
  EXPECT_TRUE(
      admin2.Hello(Role::kAdmin, "ops", *secret.KeyFor(Role::kAdmin)).ok());
  EXPECT_GE(n.server().stats().admin_only_refusals, 1u);
}

// Half-open handshakes cannot keep clients out: 1,100 connections that
// never finish the hello, and more opened all along, while jobs and the
// admin connect and read 8 times each. Past --max_handshakes the oldest
// half-open one is closed, so a client that answers at once gets through.
TEST(MemoryNodeAuthTest, HalfOpenHandshakesCannotKeepClientsOut) {
  const rlim_t descriptors = testing::RaiseDescriptorLimit();
  if (descriptors < 4000) GTEST_SKIP() << "descriptor limit " << descriptors;
  const Secret secret = NewSecret();
  SecuredNode n(secret);  // default limits
  std::vector<std::unique_ptr<RawClient>> half;
  auto open_half = [&] {
    auto c = std::make_unique<RawClient>(n.port());
    const std::string hello = RawClient::Frame(
        wire::kHello,
        RawClient::HelloPayload(Role::kJob, "x", transport::NewNonce()));
    c->Write(hello.substr(0, 10));
    half.push_back(std::move(c));
  };
  for (int i = 0; i < 1100; ++i) open_half();
  int jobs_ok = 0, admins_ok = 0;
  for (int round = 0; round < 8; ++round) {
    for (int i = 0; i < 100; ++i) open_half();  // the attack goes on
    auto t = transport::TcpTransport::Connect(
        {n.address()}, Client(Role::kJob, "legit", secret));
    if (t.ok()) {
      auto ep = (*t)->NewEndpoint();
      std::string bytes(4096, '\0');
      if (ep.ok()) {
        (*ep)->Read(0, 0, 0, bytes.data(), bytes.size());
        jobs_ok += (*ep)->Flush().ok();
      }
    }
    RawClient admin(n.port());
    admins_ok +=
        admin.Hello(Role::kAdmin, "ops", *secret.KeyFor(Role::kAdmin)).ok();
  }
  EXPECT_EQ(jobs_ok, 8);
  EXPECT_EQ(admins_ok, 8);
  const transport::TcpServerStats st = n.server().stats();
  EXPECT_GE(st.evicted_handshakes, 1900u - 128u);
  EXPECT_TRUE(n.StoreIntact());
}

// Idle connections keep no large buffer: 40 of them, each after a 1 MiB
// READ, hold a few KiB together, so a cap of 8 MiB still serves them all
// and then a new one.
TEST(MemoryNodeAuthTest, IdleConnectionsHoldNoLargeBuffers) {
  transport::TcpServerLimits limits;
  limits.max_buffer_bytes = 8u << 20;
  SecuredNode n(std::nullopt, limits);
  std::vector<std::unique_ptr<RawClient>> idle;
  for (int i = 0; i < 40; ++i) {
    idle.push_back(std::make_unique<RawClient>(n.port()));
    ASSERT_TRUE(idle.back()->Hello(Role::kJob, "j").ok());
    absl::Status s = Request(*idle.back(), wire::kBatch,
                             OneOp(transport::OpKind::kRead, 0, 0, 1 << 20));
    ASSERT_TRUE(s.ok()) << "connection " << i << ": " << s;
  }
  EXPECT_LT(n.server().stats().buffered_bytes, 40u * (64u << 10));
  RawClient fresh(n.port());
  ASSERT_TRUE(fresh.Hello(Role::kJob, "j").ok());
  EXPECT_TRUE(Request(fresh, wire::kBatch,
                      OneOp(transport::OpKind::kRead, 0, 0, 1 << 20))
                  .ok());
  EXPECT_LE(n.server().stats().max_buffered_bytes, limits.max_buffer_bytes);
}

// Issue 39 item 3: one job cannot take the node from the others. With a
// quota of 1 MiB a job's second 512 KiB past 768 KiB is refused (naming
// --job_quota_mb), another job still gets its own, and the first gets room
// again once it frees a region; the admin is not held to it.
TEST(MemoryNodeAuthTest, AJobStaysWithinItsQuota) {
  transport::TcpServerLimits limits;
  limits.job_quota_bytes = 1u << 20;
  SecuredNode n(std::nullopt, limits);
  auto allocate = [](RawClient& c, uint64_t bytes, uint32_t* id = nullptr) {
    std::string req, reply;
    wire::Writer w(&req);
    w.Put(bytes);
    w.PutString("state");
    absl::Status s = Request(c, wire::kAllocate, req, &reply);
    transport::RegionInfo region;
    wire::Reader r(reply.data(), reply.size());
    if (s.ok() && id != nullptr && wire::GetRegion(r, 0, &region)) {
      *id = region.id;
    }
    return s;
  };
  RawClient a(n.port()), b(n.port()), admin(n.port());
  ASSERT_TRUE(a.Hello(Role::kJob, "a").ok());
  ASSERT_TRUE(b.Hello(Role::kJob, "b").ok());
  ASSERT_TRUE(admin.Hello(Role::kAdmin, "ops").ok());
  uint32_t first = 0;
  ASSERT_TRUE(allocate(a, 768u << 10, &first).ok());
  absl::Status over = allocate(a, 512u << 10);
  EXPECT_TRUE(absl::IsResourceExhausted(over)) << over;
  EXPECT_NE(over.message().find("--job_quota_mb"), std::string::npos) << over;
  EXPECT_TRUE(allocate(b, 768u << 10).ok());
  std::string free;
  wire::Writer(&free).Put(first);
  ASSERT_TRUE(Request(a, wire::kFree, free).ok());
  EXPECT_TRUE(allocate(a, 512u << 10).ok());
  EXPECT_TRUE(allocate(admin, 4u << 20).ok());
}

// Issue 39 item 1: a job's name is bound to its token. A holder of the job
// key who names a running job, or one kept for --resume, with any other
// token is refused at the handshake (100 tries each), so it cannot read,
// write, free or adopt the job's regions; the job's own processes (same
// token) get in, and once the job holds nothing here its name is free.
TEST(MemoryNodeAuthTest, AJobsNameIsBoundToItsToken) {
  const Secret secret = NewSecret();
  SecuredNode n(secret);
  const transport::Digest key = *secret.KeyFor(Role::kJob);
  auto allocate = [](RawClient& c, const std::string& bytes) {
    std::string req, reply;
    wire::Writer w(&req);
    w.Put(uint64_t{4096});
    w.PutString("state");
    EXPECT_TRUE(Request(c, wire::kAllocate, req, &reply).ok());
    transport::RegionInfo region;
    wire::Reader r(reply.data(), reply.size());
    EXPECT_TRUE(wire::GetRegion(r, 0, &region));
    EXPECT_TRUE(Request(c, wire::kBatch,
                        OneOp(transport::OpKind::kWrite, region.id, 0,
                              bytes.size(), bytes))
                    .ok());
    return region.id;
  };
  auto other_token = [] {
    transport::Digest t;
    const transport::Nonce a = transport::NewNonce(), b = transport::NewNonce();
    std::copy(a.begin(), a.end(), t.begin());
    std::copy(b.begin(), b.end(), t.begin() + a.size());
    return t;
  };
  // A running job, and one whose process is gone with its state kept.
  auto victim = std::make_unique<RawClient>(n.port());
  ASSERT_TRUE(victim->Hello(Role::kJob, "victim", key).ok());
  const uint32_t live = allocate(*victim, "LIVE");
  uint32_t kept = 0;
  {
    RawClient resumable(n.port());
    ASSERT_TRUE(resumable.Hello(Role::kJob, "resumable", key).ok());
    std::string keep;
    wire::Writer(&keep).Put(uint32_t{60});
    ASSERT_TRUE(Request(resumable, wire::kKeepJob, keep).ok());
    kept = allocate(resumable, "KEPT");
  }
  for (int i = 0; i < 100 && n.server().stats().kept_regions == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(n.server().stats().kept_regions, 1u);
  int admitted = 0, served = 0;
  for (const std::string job : {"victim", "resumable"}) {
    for (int i = 0; i < 100; ++i) {
      RawClient attacker(n.port());
      absl::Status s = attacker.Hello(Role::kJob, job, key, other_token());
      if (s.ok()) ++admitted;
      EXPECT_TRUE(absl::IsPermissionDenied(s)) << s;
      EXPECT_NE(s.message().find("another job token"), std::string::npos) << s;
      // A refused handshake leaves the connection able to do nothing.
      const uint32_t region = job == "victim" ? live : kept;
      std::string free;
      wire::Writer(&free).Put(region);
      served += Request(attacker, wire::kBatch,
                        OneOp(transport::OpKind::kRead, region, 0, 4))
                    .ok();
      served += Request(attacker, wire::kFree, free).ok();
    }
  }
  EXPECT_EQ(admitted, 0);
  EXPECT_EQ(served, 0);
  EXPECT_GE(n.server().stats().token_refusals, 200u);
  EXPECT_EQ(n.server().stats().kept_regions, 1u);  // nobody adopted it
  // The jobs' own processes get in and find their bytes as they left them.
  std::string reply;
  auto victim2 = std::make_unique<RawClient>(n.port());
  ASSERT_TRUE(victim2->Hello(Role::kJob, "victim", key).ok());
  ASSERT_TRUE(Request(*victim2, wire::kBatch,
                      OneOp(transport::OpKind::kRead, live, 0, 4), &reply)
                  .ok());
  EXPECT_EQ(reply, "LIVE");
  RawClient resumed(n.port());
  ASSERT_TRUE(resumed.Hello(Role::kJob, "resumable", key).ok());
  ASSERT_TRUE(Request(resumed, wire::kBatch,
                      OneOp(transport::OpKind::kRead, kept, 0, 4), &reply)
                  .ok());
  EXPECT_EQ(reply, "KEPT");
  // Once the victim's connections are gone and it kept nothing, its name is
  // free for the next job (whatever its token).
  victim.reset();
  victim2.reset();
  bool freed = false;
  for (int i = 0; i < 200 && !freed; ++i) {
    RawClient next(n.port());
    freed = next.Hello(Role::kJob, "victim", key, other_token()).ok();
    if (!freed) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(freed);
}

// Issue 39 item 2: a job connection silent past --job_idle_timeout_s is
// closed (an admin's is not), while a real client keeps what it needs: its
// control connection (which owns the job's regions) is pinged, and its
// data connections, closed by the node while silent, are opened again.
TEST(MemoryNodeAuthTest, SilentJobConnectionsCloseButClientsKeepTheirs) {
  const Secret secret = NewSecret();
  transport::TcpServerLimits limits;
  // (Pings come at a third of it, so a loaded machine has a second of
  // slack before the control connection would be closed.)
  limits.job_idle_timeout_ms = 1500;
  SecuredNode n(secret, limits);
  RawClient idle_job(n.port(), /*receive_timeout_s=*/6),
      idle_admin(n.port(), /*receive_timeout_s=*/2);
  ASSERT_TRUE(
      idle_job.Hello(Role::kJob, "idle", *secret.KeyFor(Role::kJob)).ok());
  ASSERT_TRUE(
      idle_admin.Hello(Role::kAdmin, "ops", *secret.KeyFor(Role::kAdmin)).ok());
  auto t = transport::TcpTransport::Connect(
      {n.address()}, Client(Role::kJob, "alive", secret));
  ASSERT_TRUE(t.ok()) << t.status();
  absl::StatusOr<transport::RegionInfo> region =
      (*t)->AllocateRegion(0, 4096, "state");
  ASSERT_TRUE(region.ok()) << region.status();
  auto e = (*t)->NewEndpoint();
  ASSERT_TRUE(e.ok());
  const char bytes[8] = {'k', 'e', 'p', 't', 'a', 'l', 'i', 'v'};
  (*e)->Write(0, region->id, 0, bytes, 8);
  ASSERT_TRUE((*e)->Flush().ok());

  EXPECT_TRUE(idle_job.Closed());     // within the 6 s it waits
  EXPECT_FALSE(idle_admin.Closed());  // 2 s more, and still open
  std::this_thread::sleep_for(std::chrono::milliseconds(2000));
  char back[8] = {};
  (*e)->Read(0, region->id, 0, back, 8);
  absl::Status s = (*e)->Flush();
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(std::string(back, 8), std::string(bytes, 8));
  absl::StatusOr<std::vector<transport::RegionInfo>> listed =
      (*t)->ListRegions(0);
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->size(), 2u);  // the store and the job's region
  EXPECT_GE(n.server().stats().timeouts, 1u);
}

}  // namespace
}  // namespace dmg

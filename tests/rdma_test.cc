// The RDMA backend against a real (soft-RoCE) device: a server and endpoints
// in one process on $RXE_IP (default 10.77.0.1). Without an RDMA device these
// tests skip, except the one that checks the "no device" error. Run them in
// the soft-RoCE VM (deploy/softroce) where the kernel has rdma_rxe.
#include <infiniband/verbs.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/aligned_buffer.h"
#include "glog/logging.h"
#include "gtest/gtest.h"
#include "transport/rdma/rdma_common.h"
#include "transport/rdma/rdma_endpoint.h"
#include "transport/rdma/rdma_server.h"

namespace dmg::transport::rdma {
namespace {

bool HaveRdmaDevice() {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list != nullptr) ibv_free_device_list(list);
  return list != nullptr && n > 0;
}

std::string RxeIp() {
  const char* ip = std::getenv("RXE_IP");
  return ip != nullptr && *ip != '\0' ? ip : "10.77.0.1";
}

uint16_t NextPort() {
  static std::atomic<int> port{7471};
  return static_cast<uint16_t>(port++);
}

std::vector<std::byte> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::byte> v(n);
  for (auto& b : v) b = static_cast<std::byte>(rng());
  return v;
}

TEST(RdmaNoDeviceTest, FailsAtOnceWithOneClearLine) {
  if (HaveRdmaDevice()) GTEST_SKIP() << "this machine has an RDMA device";
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<std::unique_ptr<Endpoint>> ep =
      ConnectEndpoint(RdmaOptions(), {{"10.77.0.1", 7471}}, nullptr);
  ASSERT_FALSE(ep.ok());
  const std::string msg(ep.status().message());
  EXPECT_NE(msg.find("no RDMA device"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--transport=tcp"), std::string::npos) << msg;
  EXPECT_NE(msg.find("deploy/softroce"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  EXPECT_EQ(ep.status().code(), absl::StatusCode::kFailedPrecondition);

  absl::StatusOr<std::unique_ptr<RdmaServer>> server =
      RdmaServer::Start(RdmaOptions(), "10.77.0.1", 7471);
  ASSERT_FALSE(server.ok());
  EXPECT_NE(server.status().message().find("--transport=tcp"),
            std::string::npos);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

// A memory node that accepts one connection and then puts its QP in the
// error state without telling the client, so requests vanish as they would
// into a crashed machine or a cut cable: only the endpoint's own timeout
// (or the NIC's retry limit) can end the wait.
class BlackHole {
 public:
  BlackHole(const std::string& ip, uint16_t port) {
    absl::StatusOr<EventChannelPtr> ch = CreateEventChannel();
    CHECK(ch.ok()) << ch.status();
    channel_ = std::move(*ch);
    rdma_cm_id* id = nullptr;
    CHECK_EQ(rdma_create_id(channel_.get(), &id, nullptr, RDMA_PS_TCP), 0);
    listen_.reset(id);
    absl::StatusOr<sockaddr_storage> addr = ResolveHost(ip, port);
    CHECK(addr.ok());
    CHECK_EQ(rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&*addr)), 0);
    CHECK_EQ(rdma_listen(id, 4), 0);
    pd_.reset(ibv_alloc_pd(id->verbs));
    cq_.reset(ibv_create_cq(id->verbs, 4, nullptr, nullptr, 0));
    thread_ = std::thread([this] { Serve(); });
  }
  ~BlackHole() { thread_.join(); }
  bool swallowing() const { return swallowing_.load(); }

 private:
  void Serve() {
    absl::StatusOr<CmEvent> e = NextCmEvent(channel_.get(), 30000);
    if (!e.ok() || e->type != RDMA_CM_EVENT_CONNECT_REQUEST) return;
    conn_.reset(e->id);
    ibv_qp_init_attr attr{};
    attr.send_cq = attr.recv_cq = cq_.get();
    attr.qp_type = IBV_QPT_RC;
    attr.cap.max_send_wr = attr.cap.max_recv_wr = 1;
    attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
    if (rdma_create_qp(conn_.get(), pd_.get(), &attr) != 0) return;
    qp_ = QueuePair(conn_.get());
    rdma_conn_param param{};
    param.responder_resources = 1;
    if (rdma_accept(conn_.get(), &param) != 0) return;
    e = NextCmEvent(channel_.get(), 30000);
    if (!e.ok() || e->type != RDMA_CM_EVENT_ESTABLISHED) return;
    ibv_qp_attr err{};
    err.qp_state = IBV_QPS_ERR;
    if (ibv_modify_qp(qp_.get(), &err, IBV_QP_STATE) == 0) swallowing_ = true;
  }

  EventChannelPtr channel_;
  CmIdPtr listen_;
  PdPtr pd_;
  CqPtr cq_;
  CmIdPtr conn_;
  QueuePair qp_;
  std::atomic<bool> swallowing_{false};
  std::thread thread_;
};

class RdmaTest : public ::testing::Test {
 protected:
  static constexpr uint32_t kRegion = 1;
  static constexpr size_t kRegionBytes = 4 << 20;

  void SetUp() override {
    if (!HaveRdmaDevice()) {
      GTEST_SKIP() << "no RDMA device; run inside the soft-RoCE VM "
                      "(deploy/softroce)";
    }
    ip_ = RxeIp();
    options_.timeout_ms = 15000;  // TCG-emulated soft-RoCE is slow
    StartServer();
  }

  void StartServer() {
    port_ = NextPort();
    absl::StatusOr<std::unique_ptr<RdmaServer>> s =
        RdmaServer::Start(options_, ip_, port_);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
    memory_ = AlignedBuffer(kRegionBytes);
    absl::StatusOr<RegionKey> key = server_->Register(kRegion, memory_.span());
    ASSERT_TRUE(key.ok()) << key.status();
    EXPECT_EQ(key->length, kRegionBytes);
    SetKey(0, kRegion, *key);
  }

  void SetKey(uint32_t node, uint32_t region, RegionKey key) {
    std::lock_guard lock(mu_);
    keys_[{node, region}] = key;
  }

  RegionResolver Resolver() {
    return [this](uint32_t node, uint32_t region) -> absl::StatusOr<RegionKey> {
      std::lock_guard lock(mu_);
      auto it = keys_.find({node, region});
      if (it == keys_.end()) {
        return absl::NotFoundError(
            absl::StrFormat("node %d has no region %d", node, region));
      }
      return it->second;
    };
  }

  std::unique_ptr<RdmaEndpoint> Connect(const RdmaOptions& options,
                                        std::vector<NodeAddress> nodes = {}) {
    if (nodes.empty()) nodes = {{ip_, port_}};
    absl::StatusOr<std::unique_ptr<RdmaEndpoint>> ep =
        RdmaEndpoint::Connect(options, nodes, Resolver());
    EXPECT_TRUE(ep.ok()) << ep.status();
    return ep.ok() ? std::move(*ep) : nullptr;
  }

  std::byte* mem(uint64_t offset) { return memory_.data() + offset; }

  std::string ip_;
  uint16_t port_ = 0;
  RdmaOptions options_;
  // The memory outlives the server (declared first, destroyed last).
  AlignedBuffer memory_;
  std::unique_ptr<RdmaServer> server_;
  std::mutex mu_;
  std::map<std::pair<uint32_t, uint32_t>, RegionKey> keys_;
};

TEST_F(RdmaTest, ReadWriteManySizesAndAlignments) {
  auto ep = Connect(options_);
  ASSERT_NE(ep, nullptr);
  uint32_t seed = 1;
  for (uint32_t size : {1u, 2u, 3u, 7u, 8u, 9u, 63u, 64u, 65u, 511u, 4096u,
                        4097u, 65536u, 1u << 20}) {
    for (uint64_t offset : {0ull, 1ull, 7ull, 8ull, 4095ull}) {
      SCOPED_TRACE(absl::StrFormat("%d bytes at %d", size, offset));
      std::vector<std::byte> out = Random(size, seed++);
      ep->Write(0, kRegion, offset, out.data(), size);
      ASSERT_TRUE(ep->Flush().ok());
      ASSERT_EQ(std::memcmp(mem(offset), out.data(), size), 0);

      std::vector<std::byte> fresh = Random(size, seed++);
      std::memcpy(mem(offset), fresh.data(), size);
      std::vector<std::byte> in(size);
      const uint64_t trips = ep->stats().round_trips;
      ep->Read(0, kRegion, offset, in.data(), size);
      ASSERT_TRUE(ep->Flush().ok());
      ASSERT_EQ(in, fresh);
      EXPECT_EQ(ep->stats().round_trips, trips + 1);
    }
  }
  // The last byte of the region is reachable; one past it is not.
  uint8_t last = 0x5a;
  ep->Write(0, kRegion, kRegionBytes - 1, &last, 1);
  EXPECT_TRUE(ep->Flush().ok());
  EXPECT_EQ(static_cast<uint8_t>(*mem(kRegionBytes - 1)), 0x5a);
}

TEST_F(RdmaTest, BatchesOfOneToSixtyFourOps) {
  auto ep = Connect(options_);
  ASSERT_NE(ep, nullptr);
  std::mt19937 rng(7);
  std::vector<std::byte> image = Random(kRegionBytes, 99);
  std::memcpy(mem(0), image.data(), kRegionBytes);
  for (int n = 1; n <= 64; ++n) {
    SCOPED_TRACE(absl::StrFormat("batch of %d", n));
    struct Job {
      bool write;
      uint64_t offset;
      std::vector<std::byte> buf;
    };
    std::vector<Job> jobs(n);
    for (int k = 0; k < n; ++k) {
      Job& j = jobs[k];
      j.write = rng() % 2 == 0;
      j.offset = static_cast<uint64_t>(k) * 8192 + rng() % 64;
      size_t len = 1 + rng() % 3000;
      j.buf = j.write ? Random(len, rng()) : std::vector<std::byte>(len);
      if (j.write) {
        ep->Write(0, kRegion, j.offset, j.buf.data(), len);
      } else {
        ep->Read(0, kRegion, j.offset, j.buf.data(), len);
      }
    }
    const uint64_t trips = ep->stats().round_trips;
    ASSERT_TRUE(ep->Flush().ok());
    EXPECT_EQ(ep->stats().round_trips, trips + 1);
    for (const Job& j : jobs) {
      if (j.write) {
        ASSERT_EQ(std::memcmp(mem(j.offset), j.buf.data(), j.buf.size()), 0);
        std::memcpy(image.data() + j.offset, j.buf.data(), j.buf.size());
      } else {
        ASSERT_EQ(
            std::memcmp(image.data() + j.offset, j.buf.data(), j.buf.size()),
            0);
      }
    }
  }
}

TEST_F(RdmaTest, BatchKeepsProgramOrderOnOverlappingBytes) {
  auto ep = Connect(options_);
  ASSERT_NE(ep, nullptr);
  for (int round = 0; round < 20; ++round) {
    const uint64_t base = 1000 + round * 64;
    uint64_t a = 1, b = 2, c = 3;
    std::memcpy(mem(base), &a, 8);
    uint64_t r1 = 0, r2 = 0, r3 = 0, old = 0, cas_old = 0;
    ep->Read(0, kRegion, base, &r1, 8);                     // 1
    ep->Write(0, kRegion, base, &b, 8);                     // -> 2
    ep->Read(0, kRegion, base, &r2, 8);                     // 2
    ep->FetchAndAdd(0, kRegion, base, 10, &old);            // 2 -> 12
    ep->CompareAndSwap(0, kRegion, base, 12, c, &cas_old);  // 12 -> 3
    ep->Read(0, kRegion, base, &r3, 8);                     // 3
    ASSERT_TRUE(ep->Flush().ok());
    EXPECT_EQ(r1, 1u);
    EXPECT_EQ(r2, 2u);
    EXPECT_EQ(old, 2u);
    EXPECT_EQ(cas_old, 12u);
    EXPECT_EQ(r3, 3u);
  }
}

TEST_F(RdmaTest, BatchBiggerThanStagingAndSendQueueAcrossTwoNodes) {
  // A second memory node (another server on the next port).
  const uint16_t port0 = port_;
  AlignedBuffer memory1(kRegionBytes);
  uint16_t port1 = NextPort();
  absl::StatusOr<std::unique_ptr<RdmaServer>> s1 =
      RdmaServer::Start(options_, ip_, port1);
  ASSERT_TRUE(s1.ok()) << s1.status();
  absl::StatusOr<RegionKey> k1 = (*s1)->Register(kRegion, memory1.span());
  ASSERT_TRUE(k1.ok()) << k1.status();
  SetKey(1, kRegion, *k1);

  RdmaOptions small = options_;
  small.staging_bytes = 64 << 10;
  small.send_queue_depth = 16;
  small.signal_every = 4;
  auto ep = Connect(small, {{ip_, port0}, {ip_, port1}});
  ASSERT_NE(ep, nullptr);

  // 300 small writes alternating nodes, one 300 KiB write and one 300 KiB
  // read (each bigger than the whole staging buffer), 100 small reads and
  // 50 fetch-and-adds.
  std::vector<std::byte> big_in(300 << 10);
  std::vector<std::byte> big_out = Random(big_in.size(), 5);
  std::vector<std::byte> pattern1 = Random(kRegionBytes, 6);
  std::memcpy(memory1.data(), pattern1.data(), kRegionBytes);
  std::vector<std::vector<std::byte>> small_out(300), small_in(100);
  for (int k = 0; k < 300; ++k) {
    small_out[k] = Random(1000, 100 + k);
    ep->Write(k % 2, kRegion, k * 1000, small_out[k].data(), 1000);
  }
  ep->Write(0, kRegion, 1 << 20, big_out.data(), big_out.size());
  ep->Read(1, kRegion, 2 << 20, big_in.data(), big_in.size());
  for (int k = 0; k < 100; ++k) {
    small_in[k].resize(500);
    ep->Read(1, kRegion, (3 << 20) + k * 500, small_in[k].data(), 500);
  }
  std::vector<uint64_t> olds(50);
  for (int k = 0; k < 50; ++k) {
    ep->FetchAndAdd(k % 2, kRegion, (4 << 20) - 8, 1, &olds[k]);
  }
  std::memset(mem((4 << 20) - 8), 0, 8);
  std::memset(memory1.data() + (4 << 20) - 8, 0, 8);
  ASSERT_TRUE(ep->Flush().ok());

  for (int k = 0; k < 300; ++k) {
    const std::byte* m =
        (k % 2 == 0 ? memory_.data() : memory1.data()) + k * 1000;
    ASSERT_EQ(std::memcmp(m, small_out[k].data(), 1000), 0) << k;
  }
  EXPECT_EQ(std::memcmp(mem(1 << 20), big_out.data(), big_out.size()), 0);
  EXPECT_EQ(
      std::memcmp(pattern1.data() + (2 << 20), big_in.data(), big_in.size()),
      0);
  for (int k = 0; k < 100; ++k) {
    ASSERT_EQ(std::memcmp(pattern1.data() + (3 << 20) + k * 500,
                          small_in[k].data(), 500),
              0)
        << k;
  }
  for (int k = 0; k < 50; ++k) EXPECT_EQ(olds[k], static_cast<uint64_t>(k / 2));
  uint64_t c0, c1;
  std::memcpy(&c0, mem((4 << 20) - 8), 8);
  std::memcpy(&c1, memory1.data() + (4 << 20) - 8, 8);
  EXPECT_EQ(c0, 25u);
  EXPECT_EQ(c1, 25u);
  EXPECT_EQ(ep->stats().round_trips, 1u);
  ep.reset();
}

TEST_F(RdmaTest, AtomicsUnderContentionFromFourEndpoints) {
  constexpr int kThreads = 4, kFaa = 96, kCas = 24;
  std::memset(mem(0), 0, 16);
  std::vector<std::unique_ptr<RdmaEndpoint>> eps(kThreads);
  std::vector<std::vector<uint64_t>> olds(kThreads);
  std::vector<int> failures(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Each worker connects its own endpoint, all at once.
      eps[t] = Connect(options_);
      if (eps[t] == nullptr) {
        ++failures[t];
        return;
      }
      Endpoint& ep = *eps[t];
      // Fetch-and-add on word 0, four to a batch.
      for (int i = 0; i < kFaa; i += 4) {
        uint64_t got[4];
        for (int k = 0; k < 4; ++k) ep.FetchAndAdd(0, kRegion, 0, 1, &got[k]);
        if (!ep.Flush().ok()) {
          ++failures[t];
          return;
        }
        olds[t].insert(olds[t].end(), got, got + 4);
      }
      // Increment word 1 with compare-and-swap loops.
      uint64_t guess = 0;
      for (int done = 0; done < kCas;) {
        uint64_t old = 0;
        ep.CompareAndSwap(0, kRegion, 8, guess, guess + 1, &old);
        if (!ep.Flush().ok()) {
          ++failures[t];
          return;
        }
        if (old == guess) {
          ++done;
          ++guess;
        } else {
          guess = old;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) ASSERT_EQ(failures[t], 0) << t;
  uint64_t faa, cas;
  std::memcpy(&faa, mem(0), 8);
  std::memcpy(&cas, mem(8), 8);
  EXPECT_EQ(faa, static_cast<uint64_t>(kThreads * kFaa));
  EXPECT_EQ(cas, static_cast<uint64_t>(kThreads * kCas));
  // Every fetch-and-add saw a distinct prior value.
  std::vector<uint64_t> all;
  for (const auto& v : olds) all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end());
  ASSERT_EQ(all.size(), static_cast<size_t>(kThreads * kFaa));
  for (size_t i = 0; i < all.size(); ++i) ASSERT_EQ(all[i], i);
  for (const auto& ep : eps) {
    EXPECT_EQ(ep->stats().faa, static_cast<uint64_t>(kFaa));
    EXPECT_GE(ep->stats().cas, static_cast<uint64_t>(kCas));
  }
}

TEST_F(RdmaTest, InvalidOperationsFailBeforePosting) {
  auto ep = Connect(options_);
  ASSERT_NE(ep, nullptr);
  char buf[64] = {};
  uint64_t old = 0;
  ep->Read(0, kRegion, kRegionBytes - 10, buf, 11);
  EXPECT_EQ(ep->Flush().code(), absl::StatusCode::kOutOfRange);
  ep->Write(0, kRegion, kRegionBytes + 1, buf, 1);
  EXPECT_EQ(ep->Flush().code(), absl::StatusCode::kOutOfRange);
  ep->FetchAndAdd(0, kRegion, kRegionBytes, 1, &old);
  EXPECT_EQ(ep->Flush().code(), absl::StatusCode::kOutOfRange);
  ep->Read(0, kRegion + 5, 0, buf, 1);
  EXPECT_EQ(ep->Flush().code(), absl::StatusCode::kNotFound);
  ep->Read(3, kRegion, 0, buf, 1);
  EXPECT_EQ(ep->Flush().code(), absl::StatusCode::kInvalidArgument);
  ep->CompareAndSwap(0, kRegion, 4, 0, 1, &old);
  EXPECT_EQ(ep->Flush().code(), absl::StatusCode::kInvalidArgument);
  // A bad op fails its whole batch before anything moves.
  std::memset(mem(0), 0, 8);
  uint64_t v = 42;
  ep->Write(0, kRegion, 0, &v, 8);
  ep->Read(0, kRegion, kRegionBytes, buf, 1);
  EXPECT_FALSE(ep->Flush().ok());
  uint64_t now;
  std::memcpy(&now, mem(0), 8);
  EXPECT_EQ(now, 0u);
  // None of that hurt the connection.
  EXPECT_TRUE(ep->alive(0));
  ep->Write(0, kRegion, 0, &v, 8);
  ep->Read(0, kRegion, 0, buf, 8);
  ASSERT_TRUE(ep->Flush().ok());
  std::memcpy(&now, buf, 8);
  EXPECT_EQ(now, 42u);
}

TEST_F(RdmaTest, AccessTheNicRejectsIsAnErrorNotAHang) {
  // The resolver overstates a region, so the endpoint's own check passes and
  // the NIC must refuse the access.
  AlignedBuffer small(4096);
  absl::StatusOr<RegionKey> key = server_->Register(2, small.span());
  ASSERT_TRUE(key.ok()) << key.status();
  RegionKey lie = *key;
  lie.length = 1 << 20;
  SetKey(0, 2, lie);
  auto ep = Connect(options_);
  ASSERT_NE(ep, nullptr);
  char buf[16];
  ep->Read(0, 2, 0, buf, 16);
  ASSERT_TRUE(ep->Flush().ok());
  const auto start = std::chrono::steady_clock::now();
  ep->Read(0, 2, 8192, buf, 16);
  absl::Status s = ep->Flush();
  EXPECT_FALSE(s.ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start,
            std::chrono::milliseconds(options_.timeout_ms + 2000));
  EXPECT_NE(s.message().find("READ"), std::string::npos) << s;
  EXPECT_NE(s.message().find("memory node 0"), std::string::npos) << s;
  LOG(INFO) << "expected error: " << s;
  EXPECT_FALSE(ep->alive(0));
  // The dead connection fails at once from now on.
  ep->Read(0, kRegion, 0, buf, 16);
  EXPECT_EQ(ep->Flush().code(), absl::StatusCode::kUnavailable);
  // The server still serves everyone else, and a deregistered key stops
  // working.
  auto ep2 = Connect(options_);
  ASSERT_NE(ep2, nullptr);
  ep2->Read(0, 2, 0, buf, 16);
  ASSERT_TRUE(ep2->Flush().ok());
  server_->Deregister(2);
  ep2->Read(0, 2, 0, buf, 16);
  EXPECT_FALSE(ep2->Flush().ok());
}

TEST_F(RdmaTest, RegisterIsIdempotentAndReplaces) {
  absl::StatusOr<RegionKey> a = server_->Register(kRegion, memory_.span());
  ASSERT_TRUE(a.ok());
  absl::StatusOr<RegionKey> b = server_->Register(kRegion, memory_.span());
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(a->rkey, b->rkey);
  EXPECT_EQ(a->addr, b->addr);
  AlignedBuffer other(8192);
  absl::StatusOr<RegionKey> c = server_->Register(kRegion, other.span());
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->addr, reinterpret_cast<uint64_t>(other.data()));
  EXPECT_EQ(c->length, 8192u);
  EXPECT_FALSE(server_->Register(9, {}).ok());
  server_->Deregister(kRegion);
  server_->Deregister(12345);  // unknown: no-op
}

TEST_F(RdmaTest, ServerGoneMidTestFailsTheNextFlushWithinTimeout) {
  RdmaOptions o = options_;
  o.timeout_ms = 8000;
  auto ep = Connect(o);
  ASSERT_NE(ep, nullptr);
  uint64_t v = 7, got = 0;
  ep->Write(0, kRegion, 64, &v, 8);
  ep->Read(0, kRegion, 64, &got, 8);
  ASSERT_TRUE(ep->Flush().ok());
  EXPECT_EQ(got, 7u);
  server_.reset();
  const auto start = std::chrono::steady_clock::now();
  ep->Write(0, kRegion, 64, &v, 8);
  ep->Read(0, kRegion, 64, &got, 8);
  absl::Status s = ep->Flush();
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_FALSE(s.ok());
  LOG(INFO)
      << "expected error after "
      << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
      << " ms: " << s;
  EXPECT_LT(took, std::chrono::milliseconds(o.timeout_ms + 2000));
  EXPECT_FALSE(ep->alive(0));
  ep->Read(0, kRegion, 64, &got, 8);
  EXPECT_FALSE(ep->Flush().ok());
}

TEST_F(RdmaTest, UnresponsiveNodeTimesOutInsteadOfHanging) {
  const uint16_t port = NextPort();
  BlackHole hole(ip_, port);
  SetKey(0, 7, RegionKey{4096, 1234, 1 << 20});
  RdmaOptions o = options_;
  o.timeout_ms = 1000;
  auto ep = Connect(o, {{ip_, port}});
  ASSERT_NE(ep, nullptr);
  for (int i = 0; i < 500 && !hole.swallowing(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(hole.swallowing());
  uint64_t v = 0, old = 0;
  ep->Write(0, 7, 0, &v, 8);
  ep->FetchAndAdd(0, 7, 8, 1, &old);
  ep->Read(0, 7, 16, &v, 8);
  const auto start = std::chrono::steady_clock::now();
  absl::Status s = ep->Flush();
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(s.ok());
  LOG(INFO)
      << "expected error after "
      << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
      << " ms: " << s;
  EXPECT_LT(took, std::chrono::milliseconds(o.timeout_ms + 1000));
  EXPECT_FALSE(ep->alive(0));
  ep->Read(0, 7, 16, &v, 8);
  EXPECT_EQ(ep->Flush().code(), absl::StatusCode::kUnavailable);
}

TEST_F(RdmaTest, ConnectingToNothingFailsWithinTimeout) {
  RdmaOptions o = options_;
  o.timeout_ms = 5000;
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<std::unique_ptr<RdmaEndpoint>> ep =
      RdmaEndpoint::Connect(o, {{ip_, NextPort()}}, Resolver());
  EXPECT_FALSE(ep.ok());
  LOG(INFO) << "expected error: " << ep.status();
  EXPECT_LT(std::chrono::steady_clock::now() - start,
            std::chrono::milliseconds(o.timeout_ms * 2 + 2000));
  // A wrong --rdma_device is named in the error.
  o.device = "no_such_device";
  ep = RdmaEndpoint::Connect(o, {{ip_, port_}}, Resolver());
  ASSERT_FALSE(ep.ok());
  EXPECT_NE(ep.status().message().find("no_such_device"), std::string::npos);
}

TEST_F(RdmaTest, DeviceAndGidOptionsAreChecked) {
  RdmaOptions o = options_;
  const char* dev = std::getenv("RXE_DEV");
  const char* gidx = std::getenv("RXE_GIDX");
  if (dev != nullptr) o.device = dev;
  if (gidx != nullptr) o.gid_index = std::atoi(gidx);
  auto ep = Connect(o);
  ASSERT_NE(ep, nullptr);
  uint64_t v = 0;
  ep->Read(0, kRegion, 0, &v, 8);
  EXPECT_TRUE(ep->Flush().ok());

  RdmaOptions wrong_port = options_;
  wrong_port.port = 2;
  absl::StatusOr<std::unique_ptr<RdmaEndpoint>> bad =
      RdmaEndpoint::Connect(wrong_port, {{ip_, port_}}, Resolver());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--rdma_port=2"), std::string::npos)
      << bad.status();

  // GID 0 of a RoCE port is the link-local (MAC-based) GID, never the one
  // the CM uses for an IPv4 address.
  if (gidx != nullptr && std::atoi(gidx) != 0) {
    RdmaOptions wrong_gid = options_;
    wrong_gid.gid_index = 0;
    bad = RdmaEndpoint::Connect(wrong_gid, {{ip_, port_}}, Resolver());
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.status().message().find("--rdma_gid_index=0"),
              std::string::npos)
        << bad.status();
    LOG(INFO) << "expected error: " << bad.status();
    EXPECT_FALSE(RdmaServer::Start(wrong_gid, ip_, NextPort()).ok());
  }
}

TEST_F(RdmaTest, ServerOnAnyAddressServesTheDevice) {
  const uint16_t port = NextPort();
  absl::StatusOr<std::unique_ptr<RdmaServer>> any =
      RdmaServer::Start(options_, "0.0.0.0", port);
  ASSERT_TRUE(any.ok()) << any.status();
  LOG(INFO) << "wildcard server: " << (*any)->binding();
  AlignedBuffer memory(4096);
  absl::StatusOr<RegionKey> key = (*any)->Register(3, memory.span());
  ASSERT_TRUE(key.ok()) << key.status();
  SetKey(0, 3, *key);
  auto ep = Connect(options_, {{ip_, port}});
  ASSERT_NE(ep, nullptr);
  uint64_t v = 0x1122334455667788, got = 0, old = 0;
  ep->Write(0, 3, 16, &v, 8);
  ep->FetchAndAdd(0, 3, 16, 1, &old);
  ep->Read(0, 3, 16, &got, 8);
  ASSERT_TRUE(ep->Flush().ok());
  EXPECT_EQ(old, v);
  EXPECT_EQ(got, v + 1);
  ep.reset();
  any->reset();
}

TEST_F(RdmaTest, ServerCountsAndDropsConnections) {
  auto wait_for = [&](int n) {
    for (int i = 0; i < 500 && server_->connections() != n; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return server_->connections();
  };
  auto a = Connect(options_);
  auto b = Connect(options_);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(wait_for(2), 2);
  a.reset();
  EXPECT_EQ(wait_for(1), 1);
  uint64_t v = 0;
  b->Read(0, kRegion, 0, &v, 8);
  EXPECT_TRUE(b->Flush().ok());
  b.reset();
  EXPECT_EQ(wait_for(0), 0);
}

TEST_F(RdmaTest, StagingUsesHugepagesWhenReserved) {
  auto ep = Connect(options_);
  ASSERT_NE(ep, nullptr);
  LOG(INFO) << "staging buffer on hugepages: " << ep->staging_on_hugepages();
  // The VM script reserves hugepages and sets this; elsewhere it is a log.
  if (std::getenv("DMG_EXPECT_HUGEPAGES") != nullptr) {
    EXPECT_TRUE(ep->staging_on_hugepages());
  }
  uint64_t v = 0;
  ep->Read(0, kRegion, 0, &v, 8);
  EXPECT_TRUE(ep->Flush().ok());
}

}  // namespace
}  // namespace dmg::transport::rdma

// rxe_selftest: proves that one-sided RDMA works on the soft-RoCE device in the
// rxevm guest (deploy/softroce/selftest.sh builds it on the host and runs it in
// the VM). One process, two threads:
//   server: rdma_create_ep (passive, with QP init attributes) + rdma_listen on
//           $RXE_IP, registers an 8 KiB buffer for remote read/write/atomic and
//           hands {addr, rkey} to the client in the accept private data;
//   client: rdma_connect (RC), RDMA WRITE of a 4 KiB pattern, RDMA READ back,
//           3 x FETCH_AND_ADD on a 64-bit counter, READ of the counter, SEND
//           "done"; the server then checks its memory.
// Also checks that GID index $RXE_GIDX of $RXE_DEV is the IPv4-mapped RoCEv2 GID
// of $RXE_IP. Prints "RXE_SELFTEST PASS" and exits 0, or "RXE_SELFTEST FAIL: ...".
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

namespace {

constexpr size_t kDataBytes = 4096;               // WRITE/READ area
constexpr size_t kCounterOffset = kDataBytes;     // 8-byte aligned counter
constexpr size_t kBufBytes = 2 * kDataBytes;
constexpr uint64_t kCounterStart = 1000;
constexpr uint64_t kAdd = 5;
constexpr int kAdds = 3;

struct RemoteBuf {  // accept private data
  uint64_t addr;
  uint32_t rkey;
  uint32_t len;
};

std::atomic<bool> g_listening{false};

[[noreturn]] void Fail(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::fprintf(stdout, "RXE_SELFTEST FAIL: ");
  std::vfprintf(stdout, fmt, ap);
  std::fprintf(stdout, " (errno %d: %s)\n", errno, std::strerror(errno));
  va_end(ap);
  std::fflush(stdout);
  std::_Exit(1);
}

void Step(const char* who, const char* what) {
  std::printf("[%s] %s\n", who, what);
  std::fflush(stdout);
}

uint8_t Pattern(size_t i) { return static_cast<uint8_t>((i * 131 + 7) & 0xff); }

std::string Env(const char* name, const char* dflt) {
  const char* v = std::getenv(name);
  return v && *v ? v : dflt;
}

// GID index RXE_GIDX of RXE_DEV must be ::ffff:RXE_IP (what RoCEv2 over IPv4 uses).
void CheckGid(const std::string& dev, int gidx, const std::string& ip) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list || n == 0) Fail("no RDMA devices (is the rxe provider found?)");
  ibv_context* ctx = nullptr;
  for (int i = 0; i < n; ++i) {
    if (dev == ibv_get_device_name(list[i])) ctx = ibv_open_device(list[i]);
  }
  if (!ctx) Fail("device %s not found/openable", dev.c_str());
  ibv_device_attr attr{};
  if (ibv_query_device(ctx, &attr)) Fail("ibv_query_device");
  std::printf("[main] %s: max_qp=%d max_mr_size=%" PRIu64 " atomic_cap=%d\n", dev.c_str(),
              attr.max_qp, static_cast<uint64_t>(attr.max_mr_size), attr.atomic_cap);
  if (attr.atomic_cap == IBV_ATOMIC_NONE) Fail("%s has no atomics", dev.c_str());
  ibv_gid gid{};
  if (ibv_query_gid(ctx, 1, gidx, &gid)) Fail("ibv_query_gid(%d)", gidx);
  uint8_t want[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (inet_pton(AF_INET, ip.c_str(), want + 12) != 1) Fail("bad RXE_IP %s", ip.c_str());
  if (std::memcmp(gid.raw, want, 16) != 0) Fail("gid %d is not ::ffff:%s", gidx, ip.c_str());
  std::printf("[main] gid index %d = ::ffff:%s (RoCEv2)\n", gidx, ip.c_str());
  ibv_close_device(ctx);
  ibv_free_device_list(list);
}

ibv_qp_init_attr QpAttr() {
  ibv_qp_init_attr a{};
  a.cap.max_send_wr = 16;
  a.cap.max_recv_wr = 16;
  a.cap.max_send_sge = 1;
  a.cap.max_recv_sge = 1;
  a.cap.max_inline_data = 64;
  a.qp_type = IBV_QPT_RC;
  a.sq_sig_all = 1;
  return a;
}

void Server(const std::string& ip, const std::string& port) {
  rdma_addrinfo hints{};
  hints.ai_flags = RAI_PASSIVE;
  hints.ai_port_space = RDMA_PS_TCP;
  rdma_addrinfo* res = nullptr;
  if (rdma_getaddrinfo(ip.c_str(), port.c_str(), &hints, &res)) Fail("server rdma_getaddrinfo");
  // Passive side: the QP init attributes given here are applied to every id
  // returned by rdma_get_request (without them that id has no PD/QP).
  ibv_qp_init_attr qattr = QpAttr();
  rdma_cm_id* listen_id = nullptr;
  if (rdma_create_ep(&listen_id, res, nullptr, &qattr)) Fail("server rdma_create_ep");
  rdma_freeaddrinfo(res);
  if (rdma_listen(listen_id, 1)) Fail("rdma_listen");
  Step("server", "listening");
  g_listening = true;

  rdma_cm_id* id = nullptr;
  if (rdma_get_request(listen_id, &id)) Fail("rdma_get_request");
  if (!id->pd || !id->qp) Fail("request id has no PD/QP");
  Step("server", "got connect request");

  auto* buf = static_cast<uint8_t*>(aligned_alloc(4096, kBufBytes));
  std::memset(buf, 0, kBufBytes);
  uint64_t start = kCounterStart;
  std::memcpy(buf + kCounterOffset, &start, 8);
  ibv_mr* mr = ibv_reg_mr(id->pd, buf, kBufBytes,
                          IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                              IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
  if (!mr) Fail("server ibv_reg_mr");
  char msg[64] = {};
  ibv_mr* msg_mr = rdma_reg_msgs(id, msg, sizeof msg);
  if (!msg_mr) Fail("server rdma_reg_msgs");
  if (rdma_post_recv(id, nullptr, msg, sizeof msg, msg_mr)) Fail("server rdma_post_recv");

  RemoteBuf rb{reinterpret_cast<uintptr_t>(buf), mr->rkey, static_cast<uint32_t>(kBufBytes)};
  rdma_conn_param cp{};
  cp.responder_resources = 4;
  cp.initiator_depth = 4;
  cp.rnr_retry_count = 7;
  cp.private_data = &rb;
  cp.private_data_len = sizeof rb;
  if (rdma_accept(id, &cp)) Fail("rdma_accept");
  Step("server", "accepted (buffer address/rkey sent as private data)");

  ibv_wc wc{};
  if (rdma_get_recv_comp(id, &wc) <= 0 || wc.status != IBV_WC_SUCCESS)
    Fail("server recv completion: %s", ibv_wc_status_str(wc.status));
  Step("server", "got 'done' from client; checking memory");
  if (std::strncmp(msg, "done", 4) != 0) Fail("server got message '%.8s'", msg);
  for (size_t i = 0; i < kDataBytes; ++i) {
    if (buf[i] != Pattern(i)) Fail("server byte %zu = %u after RDMA WRITE", i, buf[i]);
  }
  uint64_t counter = 0;
  std::memcpy(&counter, buf + kCounterOffset, 8);
  if (counter != kCounterStart + kAdds * kAdd)
    Fail("server counter %" PRIu64 " after fetch-and-adds", counter);
  Step("server", "memory holds the written pattern and the added counter");

  rdma_disconnect(id);
  rdma_dereg_mr(msg_mr);
  ibv_dereg_mr(mr);
  rdma_destroy_ep(id);
  rdma_destroy_ep(listen_id);
  free(buf);
}

void Client(const std::string& ip, const std::string& port) {
  rdma_addrinfo hints{};
  hints.ai_port_space = RDMA_PS_TCP;
  rdma_addrinfo* res = nullptr;
  if (rdma_getaddrinfo(ip.c_str(), port.c_str(), &hints, &res)) Fail("client rdma_getaddrinfo");
  ibv_qp_init_attr qattr = QpAttr();
  rdma_cm_id* id = nullptr;
  if (rdma_create_ep(&id, res, nullptr, &qattr)) Fail("client rdma_create_ep");
  rdma_freeaddrinfo(res);

  auto* buf = static_cast<uint8_t*>(aligned_alloc(4096, kBufBytes));
  std::memset(buf, 0, kBufBytes);
  ibv_mr* mr = ibv_reg_mr(id->pd, buf, kBufBytes, IBV_ACCESS_LOCAL_WRITE);
  if (!mr) Fail("client ibv_reg_mr");

  rdma_conn_param cp{};
  cp.responder_resources = 4;
  cp.initiator_depth = 4;
  cp.retry_count = 7;
  cp.rnr_retry_count = 7;
  if (rdma_connect(id, &cp)) Fail("rdma_connect");
  // synchronous id: the ESTABLISHED event (with the server's private data)
  // stays in id->event until the next call on this id
  if (!id->event || id->event->param.conn.private_data_len < sizeof(RemoteBuf))
    Fail("no private data in the ESTABLISHED event");
  RemoteBuf rb;
  std::memcpy(&rb, id->event->param.conn.private_data, sizeof rb);
  std::printf("[client] connected; remote buffer 0x%" PRIx64 " rkey 0x%x len %u\n", rb.addr,
              rb.rkey, rb.len);
  std::fflush(stdout);

  ibv_wc wc{};
  auto wait_send = [&](const char* what) {
    if (rdma_get_send_comp(id, &wc) <= 0) Fail("%s: no completion", what);
    if (wc.status != IBV_WC_SUCCESS) Fail("%s: %s", what, ibv_wc_status_str(wc.status));
  };

  // RDMA WRITE 4 KiB pattern
  for (size_t i = 0; i < kDataBytes; ++i) buf[i] = Pattern(i);
  if (rdma_post_write(id, nullptr, buf, kDataBytes, mr, IBV_SEND_SIGNALED, rb.addr, rb.rkey))
    Fail("rdma_post_write");
  wait_send("RDMA WRITE");
  Step("client", "RDMA WRITE 4096 bytes ok");

  // RDMA READ it back into the second half of the local buffer
  uint8_t* back = buf + kDataBytes;
  std::memset(back, 0, kDataBytes);
  if (rdma_post_read(id, nullptr, back, kDataBytes, mr, IBV_SEND_SIGNALED, rb.addr, rb.rkey))
    Fail("rdma_post_read");
  wait_send("RDMA READ");
  if (std::memcmp(buf, back, kDataBytes) != 0) Fail("RDMA READ returned different bytes");
  Step("client", "RDMA READ 4096 bytes ok, matches what was written");

  // FETCH_AND_ADD x3 on the remote counter; the old values come back in order
  auto* old = reinterpret_cast<uint64_t*>(buf);  // 8-byte aligned local target
  for (int k = 0; k < kAdds; ++k) {
    *old = ~0ull;
    ibv_sge sge{reinterpret_cast<uintptr_t>(old), 8, mr->lkey};
    ibv_send_wr wr{};
    ibv_send_wr* bad = nullptr;
    wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.wr.atomic.remote_addr = rb.addr + kCounterOffset;
    wr.wr.atomic.rkey = rb.rkey;
    wr.wr.atomic.compare_add = kAdd;
    if (ibv_post_send(id->qp, &wr, &bad)) Fail("ibv_post_send(FETCH_AND_ADD)");
    wait_send("FETCH_AND_ADD");
    if (*old != kCounterStart + k * kAdd)
      Fail("FETCH_AND_ADD #%d returned %" PRIu64 ", want %" PRIu64, k, *old,
           kCounterStart + k * kAdd);
  }
  *old = 0;
  if (rdma_post_read(id, nullptr, old, 8, mr, IBV_SEND_SIGNALED, rb.addr + kCounterOffset, rb.rkey))
    Fail("rdma_post_read(counter)");
  wait_send("RDMA READ counter");
  if (*old != kCounterStart + kAdds * kAdd) Fail("counter reads %" PRIu64, *old);
  std::printf("[client] FETCH_AND_ADD x%d ok, counter %" PRIu64 " -> %" PRIu64 "\n", kAdds,
              kCounterStart, *old);
  std::fflush(stdout);

  // tell the server to check its memory
  std::memcpy(buf, "done", 5);
  if (rdma_post_send(id, nullptr, buf, 5, mr, IBV_SEND_SIGNALED)) Fail("rdma_post_send");
  wait_send("SEND done");
  Step("client", "SEND 'done' ok");

  rdma_disconnect(id);
  ibv_dereg_mr(mr);
  rdma_destroy_ep(id);
  free(buf);
}

}  // namespace

int main() {
  const std::string ip = Env("RXE_IP", "10.77.0.1");
  const std::string dev = Env("RXE_DEV", "rxe0");
  const int gidx = std::atoi(Env("RXE_GIDX", "1").c_str());
  const std::string port = Env("RXE_SELFTEST_PORT", "7471");
  const int timeout_s = std::atoi(Env("RXE_SELFTEST_TIMEOUT", "120").c_str());
  std::setvbuf(stdout, nullptr, _IOLBF, 0);

  // Watchdog: a lost completion must fail the test, never hang CI.
  std::thread([timeout_s] {
    std::this_thread::sleep_for(std::chrono::seconds(timeout_s));
    std::printf("RXE_SELFTEST FAIL: timed out after %d s\n", timeout_s);
    std::fflush(stdout);
    std::_Exit(2);
  }).detach();

  const auto t0 = std::chrono::steady_clock::now();
  CheckGid(dev, gidx, ip);
  std::thread server(Server, ip, port);
  while (!g_listening) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  Client(ip, port);
  server.join();
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf("RXE_SELFTEST PASS (RC over rdma_cm on %s: WRITE, READ, FETCH_AND_ADD; %.0f ms)\n",
              ip.c_str(), ms);
  return 0;
}

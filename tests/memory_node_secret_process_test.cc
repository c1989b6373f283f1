// Issue 13 (items 1 and 2) as an operator and an attacker meet it: `dmg
// secret`, a `dmg memory-node --secret_file` daemon, `dmg load` and `dmg run`
// with and without the secret, the forged 4-byte WRITE into the
// store, and 2,000 idle + 200 half-sent connections + 100 oversized headers
// against the daemon, which stays within its cap and then serves a job
// whose answers verify.
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/daemon_util.h"
#include "tests/raw_wire_client.h"
#include "tests/test_util.h"
#include "transport/auth.h"
#include "transport/wire.h"

namespace dmg {
namespace {

namespace wire = transport::wire;
using testing::Daemon;
using testing::RawClient;
using testing::RunCommand;
using testing::RunDmg;
using testing::TempDir;

uint16_t PortOf(const std::string& address) {
  return static_cast<uint16_t>(
      std::stoi(address.substr(address.rfind(':') + 1)));
}

uint64_t RssBytes(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string key;
  while (f >> key) {
    if (key == "VmRSS:") {
      uint64_t kib = 0;
      f >> kib;
      return kib * 1024;
    }
  }
  return 0;
}

// `dmg secret` writes the cluster secret, then the job key from it.
bool WriteSecrets(const std::string& secret, const std::string& job_key) {
  return RunDmg("secret --output=" + secret).exit_code == 0 &&
         RunDmg("secret --job_only --secret_file=" + secret +
                " --output=" + job_key)
                 .exit_code == 0;
}

TEST(SecretProcessTest,
     OnlyHoldersOfTheSecretLoadAndRunAndForgedWritesAreRefused) {
  TempDir dir;
  const std::string secret = dir.file("cluster.secret");
  const std::string job_key = dir.file("job.key");
  ASSERT_EQ(RunDmg("secret --output=" + secret).exit_code, 0);
  struct stat st;
  ASSERT_EQ(stat(secret.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  testing::CommandResult again = RunDmg("secret --output=" + secret);
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_NE(again.err.find("never overwritten"), std::string::npos)
      << again.err;
  ASSERT_EQ(RunDmg("secret --job_only --secret_file=" + secret +
                   " --output=" + job_key)
                .exit_code,
            0);

  Daemon node("--transport=tcp --secret_file=" + secret, dir.file("node.log"));
  const std::string nodes = " --memory_nodes=" + node.address();
  // Loading needs the cluster secret itself.
  testing::CommandResult no_secret = RunDmg("load --graph=kron:12" + nodes);
  EXPECT_EQ(no_secret.exit_code, 2) << no_secret.err;
  EXPECT_NE(no_secret.err.find("requires the cluster secret"),
            std::string::npos)
      << no_secret.err;
  testing::CommandResult job_only =
      RunDmg("load --graph=kron:12 --secret_file=" + job_key + nodes);
  EXPECT_EQ(job_only.exit_code, 2) << job_only.err;
  EXPECT_NE(job_only.err.find("job-only key"), std::string::npos)
      << job_only.err;
  ASSERT_EQ(
      RunDmg("load --graph=kron:12 --secret_file=" + secret + nodes).exit_code,
      0);
  // Running: not without a secret; with the job key (from the environment).
  const std::string job = "run --algo=bfs --graph=kron:12 --verify" + nodes;
  testing::CommandResult refused = RunDmg(job);
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  testing::CommandResult ok =
      RunCommand("DMG_SECRET_FILE=" + job_key + " " + DMG_BINARY + " " + job);
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_NE(ok.out.find("verify: OK"), std::string::npos) << ok.out;

  // The reproducer: a forged 4-byte WRITE into an edge target of
  // the store, from a client that holds the job key. Refused.
  absl::StatusOr<transport::Secret> key = transport::Secret::ReadFile(job_key);
  ASSERT_TRUE(key.ok());
  {
    RawClient forger(PortOf(node.address()));
    ASSERT_TRUE(forger
                    .Hello(transport::Role::kJob, "forger",
                           *key->KeyFor(transport::Role::kJob))
                    .ok());
    std::string payload;
    wire::Writer w(&payload);
    w.Put(uint32_t{1});
    wire::WireOp op{};
    op.kind = static_cast<uint8_t>(transport::OpKind::kWrite);
    op.offset = 8192;
    op.length = 4;
    w.Put(op);
    payload += std::string("\xff\xff\xff\x7f", 4);
    forger.Send(wire::kBatch, payload);
    wire::FrameHeader h;
    std::string reply;
    ASSERT_TRUE(forger.Receive(&h, &reply));
    absl::Status s = RawClient::ReplyStatus(h, reply);
    EXPECT_TRUE(absl::IsPermissionDenied(s)) << s;
    // Nor may a job stop the daemon.
    forger.Send(wire::kShutdown, "");
    ASSERT_TRUE(forger.Receive(&h, &reply));
    EXPECT_TRUE(absl::IsPermissionDenied(RawClient::ReplyStatus(h, reply)));
  }
  ok = RunDmg(job + " --secret_file=" + secret);
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_NE(node.log().find("read-only to jobs"), std::string::npos);
  node.Signal(SIGTERM);
  EXPECT_EQ(node.Wait(), 0);
}

TEST(SecretProcessTest,
     HostileConnectionsLeaveTheDaemonWithinItsCapAndServing) {
  const rlim_t descriptors = testing::RaiseDescriptorLimit();
  if (descriptors < 3000) GTEST_SKIP() << "descriptor limit " << descriptors;
  TempDir dir;
  const std::string secret = dir.file("s");
  ASSERT_EQ(RunDmg("secret --output=" + secret).exit_code, 0);
  constexpr uint64_t kCapMb = 64;
  Daemon node("--transport=tcp --secret_file=" + secret +
                  " --handshake_timeout_ms=1000 --max_connections=4000"
                  " --max_handshakes=4000 --max_peer_connections=0"
                  " --max_buffer_mb=" +
                  std::to_string(kCapMb),
              dir.file("node.log"));
  const std::string nodes =
      " --memory_nodes=" + node.address() + " --secret_file=" + secret;
  ASSERT_EQ(RunDmg("load --graph=kron:14" + nodes).exit_code, 0);
  const uint64_t rss_before = RssBytes(node.pid());
  const uint16_t port = PortOf(node.address());
  std::vector<std::unique_ptr<RawClient>> attackers;
  for (int i = 0; i < 2000; ++i) {
    attackers.push_back(std::make_unique<RawClient>(port));
  }
  for (int i = 0; i < 200; ++i) {
    auto c = std::make_unique<RawClient>(port);
    wire::FrameHeader h{wire::kMagic, wire::kHello, 0, 40, 1};
    c->Write(std::string(reinterpret_cast<char*>(&h), 9));  // half a header
    attackers.push_back(std::move(c));
  }
  for (int i = 0; i < 100; ++i) {
    auto c = std::make_unique<RawClient>(port);
    wire::FrameHeader h{wire::kMagic, wire::kBatch, 0, wire::kMaxPayload, 1};
    c->Write(std::string(reinterpret_cast<char*>(&h), sizeof(h)));
    attackers.push_back(std::move(c));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const uint64_t rss_during = RssBytes(node.pid());
  // Every attacker is closed at its deadline.
  int closed = 0;
  for (auto& c : attackers) closed += c->Closed();
  EXPECT_EQ(closed, 2300);
  const uint64_t rss_after = RssBytes(node.pid());
  EXPECT_LT(rss_during, rss_before + (kCapMb << 20))
      << rss_before << " -> " << rss_during;
  EXPECT_LT(rss_after, rss_before + (kCapMb << 20));
  // Then a job is served and verifies.
  testing::CommandResult r =
      RunDmg("run --algo=bfs --graph=kron:14 --verify" + nodes);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("verify: OK"), std::string::npos) << r.out;
  // The log says what happened without 2,300 lines of it.
  const std::string log = node.log();
  EXPECT_NE(log.find("within 1000 ms"), std::string::npos);
  EXPECT_NE(log.find("similar lines suppressed"), std::string::npos);
  EXPECT_LT(std::count(log.begin(), log.end(), '\n'), 200) << log;
  std::printf(
      "daemon RSS: %.1f MB before, %.1f MB under 2,300 hostile "
      "connections, %.1f MB after (cap %d MiB)\n",
      rss_before / 1e6, rss_during / 1e6, rss_after / 1e6,
      static_cast<int>(kCapMb));
  node.Signal(SIGTERM);
  EXPECT_EQ(node.Wait(), 0);
}

// Issue 39 item 8: a memory node frozen mid-job (SIGSTOP) is reported
// within 1.2x --transport_timeout_ms, at three timeouts. Afforest CC at 5%
// pages its parents in: before, every page-in after the first failure
// reconnected and waited the timeout again (a road-NY run took 216 s at
// 2,000 ms), and others' waits ran on after the first one's.
TEST(SecretProcessTest, AFrozenMemoryNodeIsReportedWithinItsTimeout) {
  TempDir dir;
  Daemon node("--transport=tcp", dir.file("node.log"));
  const std::string nodes = " --memory_nodes=" + node.address();
  // At 5% of kron:16 the parents are paged.
  ASSERT_EQ(RunDmg("load --graph=kron:16" + nodes).exit_code, 0);
  for (int timeout_ms : {500, 1000, 2000}) {
    SCOPED_TRACE(::testing::Message() << "timeout " << timeout_ms << " ms");
    // The job runs trials until the node freezes; the shell times the
    // error from the moment of the SIGSTOP.
    // A job that never ends fails here with its stderr, not at ctest's
    // timeout with nothing (seen once in CI, not again in 15 runs here).
    const std::string job =
        "timeout -k 5 120 " + std::string(DMG_BINARY) +
        " run --algo=cc --cache_fraction=0.05 "
        "--trials=10000 --transport=tcp" +
        nodes + " --transport_timeout_ms=" + std::to_string(timeout_ms);
    const std::string pid = std::to_string(node.pid());
    testing::CommandResult r = RunCommand(
        "(" + job + " > /dev/null 2> " + dir.file("job.err") +
        " & j=$!; sleep 1; kill -STOP " + pid +
        "; t0=$(date +%s%N); wait $j; echo rc=$? ms=$(( ($(date +%s%N) - "
        "t0) / 1000000 )); kill -CONT " +
        pid + ")");
    int rc = -1, ms = -1;
    ASSERT_EQ(std::sscanf(r.out.c_str(), "rc=%d ms=%d", &rc, &ms), 2) << r.out;
    EXPECT_NE(rc, 0);
    EXPECT_NE(rc, 124) << "the job did not end within 120 s of the freeze: "
                       << testing::Slurp(dir.file("job.err"));
    // The bound is 1.2x (here: 1.00-1.01x on a quiet machine, the
    // figure printed below); the test allows a loaded machine's
    // scheduling on top, and still fails on the 2x (or 100x) it caught.
    EXPECT_LE(ms, 1.2 * timeout_ms + 250);
    const std::string err = testing::Slurp(dir.file("job.err"));
    EXPECT_NE(err.find("within " + std::to_string(timeout_ms) + " ms"),
              std::string::npos)
        << err;
    std::printf("frozen node: timeout %d ms, reported after %d ms\n",
                timeout_ms, ms);
  }
  // `dmg snapshot` waits --snapshot_timeout_s (an hour) only for the
  // snapshot's reply; a frozen node is reported at its hello.
  node.Signal(SIGSTOP);
  const auto start = std::chrono::steady_clock::now();
  testing::CommandResult snap =
      RunCommand("timeout -k 5 60 " + std::string(DMG_BINARY) +
                 " snapshot --transport_timeout_ms=1000" + nodes);
  const double snap_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  node.Signal(SIGCONT);
  EXPECT_NE(snap.exit_code, 0);
  EXPECT_LT(snap_s, 1.2 + 0.25) << snap.out << snap.err;
  EXPECT_NE(snap.err.find("within 1000 ms"), std::string::npos) << snap.err;
  node.Signal(SIGTERM);
  EXPECT_EQ(node.Wait(), 0);
}

// Issue 39 items 3 and 4, as a user meets them: a daemon with its
// defaults (and a 64 MiB buffer cap) under 150 idle job-key connections
// that each read 512 KiB, and separately under 1,100 connections that never
// finish the handshake: `dmg run`, `dmg status` and an admin `dmg load`
// succeed 8 of 8 times each, and the daemon's RSS stays within the cap.
// (Before: 31 idle connections held 64 MiB each and refused everyone; the
// half-open ones left 0 of 8 runs.)
TEST(SecretProcessTest, IdleAndHalfOpenConnectionsKeepNoOneOut) {
  const rlim_t descriptors = testing::RaiseDescriptorLimit();
  if (descriptors < 3000) GTEST_SKIP() << "descriptor limit " << descriptors;
  TempDir dir;
  const std::string secret = dir.file("s"), job_key = dir.file("j");
  ASSERT_TRUE(WriteSecrets(secret, job_key));
  constexpr uint64_t kCapMb = 64;
  Daemon node("--transport=tcp --secret_file=" + secret +
                  " --max_buffer_mb=" + std::to_string(kCapMb),
              dir.file("node.log"));
  const std::string nodes = " --memory_nodes=" + node.address();
  ASSERT_EQ(
      RunDmg("load --graph=kron:12 --secret_file=" + secret + nodes).exit_code,
      0);
  const uint64_t rss_before = RssBytes(node.pid());
  const uint16_t port = PortOf(node.address());
  absl::StatusOr<transport::Secret> key = transport::Secret::ReadFile(job_key);
  ASSERT_TRUE(key.ok()) << key.status();
  // The issue holds the attack for 40 s: DMG_TEST_HOLD_S=40 spreads the 8
  // rounds over that long, with `keep_up` run between them (reopening
  // what the node closed); by default (0) they run at once.
  const char* hold_env = std::getenv("DMG_TEST_HOLD_S");
  const int hold_s = hold_env ? std::atoi(hold_env) : 0;
  std::function<void()> keep_up = [] {};
  auto legit_runs = [&](const std::string& what) {
    int runs = 0, statuses = 0, loads = 0;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < 8; ++i) {
      while (std::chrono::steady_clock::now() <
             start + std::chrono::milliseconds(hold_s * 1000 * (i + 1) / 8)) {
        keep_up();
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
      runs += RunCommand("DMG_SECRET_FILE=" + job_key + " " + DMG_BINARY +
                         " run --algo=bfs --source=0 --verify "
                         "--graph=kron:12 --progress=false" +
                         nodes)
                  .out.find("verify: OK") != std::string::npos;
      testing::CommandResult st =
          RunDmg("status --require_store --secret_file=" + job_key + nodes);
      statuses += st.exit_code == 0;
      if (st.exit_code != 0)
        std::printf("%s%s", st.out.c_str(), st.err.c_str());
      loads += RunDmg("load --graph=kron:12 --secret_file=" + secret + nodes)
                   .exit_code == 0;
    }
    EXPECT_EQ(runs, 8) << what;
    EXPECT_EQ(statuses, 8) << what;
    EXPECT_EQ(loads, 8) << what;
    EXPECT_LT(RssBytes(node.pid()), rss_before + (kCapMb << 20)) << what;
    std::printf(
        "%s, %.0f s: %d/8 runs, %d/8 statuses, %d/8 loads; daemon "
        "RSS %.1f MB (%.1f MB before)\n",
        what.c_str(),
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count(),
        runs, statuses, loads, RssBytes(node.pid()) / 1e6, rss_before / 1e6);
  };
  {
    std::vector<std::unique_ptr<RawClient>> idle;
    for (int i = 0; i < 150; ++i) {
      idle.push_back(std::make_unique<RawClient>(port));
      ASSERT_TRUE(idle.back()
                      ->Hello(transport::Role::kJob, "idle" + std::to_string(i),
                              *key->KeyFor(transport::Role::kJob))
                      .ok());
      std::string read;
      transport::wire::Writer w(&read);
      w.Put(uint32_t{1});
      transport::wire::WireOp op{};
      op.kind = static_cast<uint8_t>(transport::OpKind::kRead);
      op.length = 512 << 10;
      w.Put(op);
      absl::Status s =
          testing::Request(*idle.back(), transport::wire::kBatch, read);
      ASSERT_TRUE(s.ok()) << "connection " << i << ": " << s;
    }
    legit_runs("150 idle job-key connections");
  }
  {
    std::vector<std::unique_ptr<RawClient>> half;
    auto open_half = [&] {
      auto c = std::make_unique<RawClient>(port);
      c->Write(std::string("\x44\x4d", 2));  // a header begun
      return c;
    };
    for (int i = 0; i < 1100; ++i) half.push_back(open_half());
    // Reopened as the node closes them (oldest first past
    // --max_handshakes, or at the handshake timeout).
    keep_up = [&] {
      for (auto& c : half) {
        // Anything but "nothing yet" means closed (a reason, then EOF).
        char byte;
        const ssize_t r = recv(c->fd(), &byte, 1, MSG_DONTWAIT | MSG_PEEK);
        if (r >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
          c = open_half();
        }
      }
    };
    legit_runs("1,100 half-open handshakes");
    keep_up = [] {};
  }
  node.Signal(SIGTERM);
  EXPECT_EQ(node.Wait(), 0);
}

// Issue 39 item 1 as a user meets it: a PageRank stopped mid-job keeps its
// state on the memory node for --resume, bound to the job's token (which
// dmg run wrote to $HOME/.dmg/jobs/victim.token). Another holder of the job
// key cannot adopt it, by hand (100 raw handshakes under the job's name)
// or with dmg run --resume under another token; the job's own --resume
// then ends with the output of an uninterrupted run.
TEST(SecretProcessTest, AJobsKeptStateIsResumedOnlyWithItsToken) {
  TempDir dir;
  const std::string secret = dir.file("s"), job_key = dir.file("j");
  ASSERT_TRUE(WriteSecrets(secret, job_key));
  Daemon node("--transport=tcp --secret_file=" + secret, dir.file("node.log"));
  ASSERT_EQ(RunDmg("load --graph=kron:14 --secret_file=" + secret +
                   " --memory_nodes=" + node.address())
                .exit_code,
            0);
  ASSERT_EQ(
      RunCommand("mkdir -p " + dir.file("home") + " " + dir.file("intruder"))
          .exit_code,
      0);
  const std::string env = "DMG_SECRET_FILE=" + job_key + " ";
  const std::string run =
      std::string(DMG_BINARY) +
      " run --algo=pagerank --graph=kron:14 --max_iters=12 --threads=2 "
      "--progress=false --checkpoint_interval=1 --memory_nodes=" +
      node.address();
  const std::string home = "HOME=" + dir.file("home") + " ";
  testing::CommandResult ref =
      RunCommand(env + home + run + " --job=ref --output=" + dir.file("ref"));
  ASSERT_EQ(ref.exit_code, 0) << ref.err;
  testing::CommandResult killed = RunCommand(
      env + home + "DMG_TEST_EXIT_AFTER_SUPERSTEP=3 " + run +
      " --job=victim --keep_state_s=120 --output=" + dir.file("victim"));
  ASSERT_EQ(killed.exit_code, 9) << killed.err;
  struct stat st;
  ASSERT_EQ(stat(dir.file("home/.dmg/jobs/victim.token").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  absl::StatusOr<transport::Secret> key = transport::Secret::ReadFile(job_key);
  ASSERT_TRUE(key.ok());
  int admitted = 0;
  for (int i = 0; i < 100; ++i) {
    RawClient intruder(PortOf(node.address()));
    absl::StatusOr<transport::JobToken> other = transport::JobToken::Generate();
    ASSERT_TRUE(other.ok());
    admitted += intruder
                    .Hello(transport::Role::kJob, "victim",
                           *key->KeyFor(transport::Role::kJob), other->bytes())
                    .ok();
  }
  EXPECT_EQ(admitted, 0);
  // dmg run --resume by someone else: no token of the job's at all, then
  // a token of their own.
  const std::string intruder_home = "HOME=" + dir.file("intruder") + " ";
  testing::CommandResult no_token =
      RunCommand(env + intruder_home + run +
                 " --resume --job=victim --output=" + dir.file("stolen"));
  EXPECT_EQ(no_token.exit_code, 2) << no_token.err;
  EXPECT_NE(no_token.err.find("needs the job token it ran with"),
            std::string::npos)
      << no_token.err;
  testing::CommandResult other_token = RunCommand(
      env + intruder_home + "DMG_JOB_TOKEN=" + std::string(64, 'a') + " " +
      run + " --resume --job=victim --output=" + dir.file("stolen"));
  EXPECT_NE(other_token.exit_code, 0);
  EXPECT_NE(other_token.err.find("under another job token"), std::string::npos)
      << other_token.err;
  EXPECT_EQ(testing::ErrorLines(other_token.err).size(), 1u) << other_token.err;
  EXPECT_FALSE(std::ifstream(dir.file("stolen")).good());
  std::printf("an intruder's --resume (exit %d): %s", other_token.exit_code,
              other_token.err.c_str());

  testing::CommandResult resumed =
      RunCommand(env + home + run +
                 " --resume --job=victim --output=" + dir.file("victim"));
  EXPECT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_NE(resumed.out.find("resumed after superstep 3"), std::string::npos)
      << resumed.out;
  EXPECT_EQ(testing::Slurp(dir.file("victim")),
            testing::Slurp(dir.file("ref")));
  node.Signal(SIGTERM);
  EXPECT_EQ(node.Wait(), 0);
}

TEST(SecretProcessTest, AnOpenDaemonOnANonLoopbackAddressSaysSo) {
  testing::CommandResult r =
      RunCommand(std::string("timeout -s INT 2 ") + DMG_BINARY +
                 " memory-node --listen=0.0.0.0:0 --transport=tcp");
  EXPECT_NE(r.err.find("is OPEN"), std::string::npos) << r.err;
  testing::CommandResult quiet =
      RunCommand(std::string("timeout -s INT 2 ") + DMG_BINARY +
                 " memory-node --listen=127.0.0.1:0 --transport=tcp");
  EXPECT_EQ(quiet.err.find("is OPEN"), std::string::npos) << quiet.err;
}

}  // namespace
}  // namespace dmg

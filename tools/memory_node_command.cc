// The memory-node daemon: holds regions (a store image slice and the state
// regions compute nodes allocate), serves the control plane and the tcp data
// plane on --listen, and (with --transport=rdma) registers its regions with
// the NIC and accepts RDMA connections on the same address. No computation on
// the graph happens here. SIGTERM / SIGINT or a shutdown request stop it
// cleanly.
#include "tools/memory_node_command.h"

#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "memory_node/memory_node.h"
#include "memory_node/snapshot.h"
#include "store/image_file.h"
#include "tools/cli.h"
#include "tools/transport_flags.h"
#include "transport/tcp_server.h"
#include "transport/tcp_transport.h"

DEFINE_string(listen, "", "host:port to serve on (memory-node)");
DEFINE_uint64(memory_mb, 0,
              "most MiB of regions this memory node holds (0: no limit)");
DEFINE_uint32(node_id, 0,
              "memory-node: which node of the image's layout this is (with "
              "--image)");
DEFINE_int32(io_threads, 2, "memory-node: I/O threads");
DEFINE_int32(max_connections, 1024,
             "memory-node: connections open at once; more are closed at "
             "accept");
DEFINE_int32(admin_slots, 16,
             "memory-node: the last connection slots of --max_connections, "
             "kept for the admin (dmg load, status, snapshot): a job "
             "connection that would take one is refused");
DEFINE_uint64(job_quota_mb, 0,
              "memory-node: MiB of regions one job may hold (0: half of "
              "--memory_mb, none without it)");
DEFINE_int32(max_handshakes, 128,
             "memory-node: connections still in their handshake at once; a "
             "new one past it closes the oldest of them");
DEFINE_int32(max_peer_connections, 512,
             "memory-node: connections open at once from one address (0: no "
             "limit)");
DEFINE_int32(handshake_timeout_ms, 10000,
             "memory-node: a connection that has not finished its hello and "
             "proof of the secret by then is closed");
DEFINE_int32(frame_timeout_ms, 30000,
             "memory-node: a request begun must arrive whole, and its reply "
             "be taken, within this");
DEFINE_int32(idle_timeout_s, 0,
             "memory-node: close an authenticated connection silent this long "
             "(0: never)");
DEFINE_int32(job_idle_timeout_s, 300,
             "memory-node: close a job's connection silent this long (0: "
             "never); dmg run keeps the connections it needs alive, so this "
             "reclaims only those no client looks after");
DEFINE_uint64(max_buffer_mb, 1024,
              "memory-node: MiB of request and reply buffers all connections "
              "together may hold; a request over it gets a busy error");
DEFINE_string(snapshot_dir, "",
              "memory-node: keep a snapshot of the store in this folder "
              "(written after each load, and with job state on `dmg "
              "snapshot --jobs`; at start, without --image, the newest "
              "intact one is served and its job state kept for --resume)");
DECLARE_string(image);
DECLARE_string(transport);

namespace dmg::cli {
namespace {

bool IsLoopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

// Every connection is a descriptor: make room for --max_connections of
// them (up to the hard limit), or say that there is less.
void RaiseDescriptorLimit(int connections) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
  const rlim_t want = static_cast<rlim_t>(connections) + 64;
  if (rl.rlim_cur < want) {
    rl.rlim_cur = std::min(want, rl.rlim_max);
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  if (rl.rlim_cur < want) {
    LOG(WARNING) << "descriptor limit " << rl.rlim_cur << " is below "
                 << "--max_connections=" << connections
                 << " (+64): raise ulimit -n";
  }
}

}  // namespace

std::vector<std::string> MemoryNodeFlagNames() {
  std::vector<std::string> names = {"listen",           "transport",
                                    "memory_mb",        "image",
                                    "node_id",          "io_threads",
                                    "max_connections",  "handshake_timeout_ms",
                                    "frame_timeout_ms", "idle_timeout_s",
                                    "max_buffer_mb",    "snapshot_dir",
                                    "admin_slots",      "max_handshakes",
                                    "max_peer_connections", "job_quota_mb",
                                    "job_idle_timeout_s"};
  for (const std::string& n : RdmaFlagNames()) names.push_back(n);
  return names;
}

namespace {

// What a memory node serves at start: nothing yet (`dmg load` gives it a
// store), its last snapshot (a restart), or a slice of --image.
struct Served {
  uint32_t node_id = 0;
  uint64_t load_id = 0;
  bool restored = false;  // from a snapshot
  uint64_t snapshot = 0;  // its number
  std::vector<transport::JobRegions> restored_jobs = {};
};

// The flags checked before anything is started: the address, the
// transport, the connection limits.
absl::StatusOr<transport::HostPort> CheckFlags() {
  absl::StatusOr<std::vector<transport::HostPort>> listen =
      transport::ParseHostPorts(FLAGS_listen, /*allow_any_port=*/true);
  if (!listen.ok() || listen->size() != 1) {
    return absl::InvalidArgumentError(
        "--listen=HOST:PORT is required (one address; port 0 picks a free "
        "one)");
  }
  // The shared --transport flag's default ("local", dmg run's) means tcp
  // here (the help says so).
  if (gflags::GetCommandLineFlagInfoOrDie("transport").is_default) {
    FLAGS_transport = "tcp";
  }
  if (FLAGS_transport != "tcp" && FLAGS_transport != "rdma") {
    return absl::InvalidArgumentError(
        "memory-node --transport must be tcp or rdma");
  }
  if (FLAGS_max_connections < 1 || FLAGS_handshake_timeout_ms < 1 ||
      FLAGS_frame_timeout_ms < 1 || FLAGS_idle_timeout_s < 0 ||
      FLAGS_job_idle_timeout_s < 0 || FLAGS_idle_timeout_s > 2000000 ||
      FLAGS_job_idle_timeout_s > 2000000 ||
      FLAGS_max_buffer_mb < 1 || FLAGS_max_handshakes < 1 ||
      FLAGS_admin_slots < 0 || FLAGS_max_peer_connections < 0) {
    return absl::InvalidArgumentError(
        "--max_connections, --handshake_timeout_ms, --frame_timeout_ms, "
        "--max_handshakes and --max_buffer_mb must be positive, "
        "--idle_timeout_s, --job_idle_timeout_s (at most 2000000), "
        "--admin_slots and --max_peer_connections at least 0");
  }
  if (FLAGS_admin_slots >= FLAGS_max_connections) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--admin_slots=%d leaves no connection for jobs: keep it under "
        "--max_connections=%d",
        FLAGS_admin_slots, FLAGS_max_connections));
  }
  return (*listen)[0];
}

// A restart: serve what the last complete snapshot holds, and give its
// job state back to its jobs, kept for `dmg run --resume`
// (TcpServerOptions::restored_jobs).
absl::Status RestoreSnapshot(memory_node::SnapshotDir& dir,
                             memory_node::MemoryNode& node, Served& served) {
  std::optional<memory_node::Snapshot> snap = dir.LoadNewest();
  if (!snap) return absl::OkStatus();
  if (!gflags::GetCommandLineFlagInfoOrDie("node_id").is_default &&
      FLAGS_node_id != snap->node_id) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--node_id=%d but the snapshot in %s is of memory node %d",
        FLAGS_node_id, FLAGS_snapshot_dir, snap->node_id));
  }
  served.node_id = snap->node_id;
  served.load_id = snap->load_id;
  const uint64_t bytes = snap->store.size();
  DMG_RETURN_IF_ERROR(node.LoadStore(std::move(snap->store)));
  node.AssignNodeId(served.node_id, "the snapshot in " + FLAGS_snapshot_dir);
  served.restored = true;
  served.snapshot = snap->seq;
  LOG(INFO) << "serving the store of snapshot " << snap->seq << " in "
            << FLAGS_snapshot_dir << " (node " << served.node_id << ", "
            << bytes << " bytes)";
  std::map<std::string, transport::JobRegions> by_job;
  for (memory_node::JobRegion& region : snap->jobs) {
    absl::StatusOr<transport::RegionInfo> info =
        node.AddRegion(std::move(region.bytes), region.name);
    if (!info.ok()) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "cannot restore region '%s' of job '%s' from the snapshot in %s: "
          "%s (raise --memory_mb)",
          region.name, region.job, FLAGS_snapshot_dir,
          info.status().message()));
    }
    transport::JobRegions& job = by_job[region.job];
    job.job = region.job;
    job.regions.push_back(info->id);
    if (region.verifier) job.verifier = region.verifier;
  }
  for (auto& [name, job] : by_job) {
    served.restored_jobs.push_back(std::move(job));
  }
  return absl::OkStatus();
}

// --image: this node's slice of the image.
absl::Status ServeImage(memory_node::MemoryNode& node, Served& served) {
  DMG_ASSIGN_OR_RETURN(store::StoreImage image,
                       store::ReadImageFile(FLAGS_image));
  const store::Superblock sb = image.superblock();
  // Every node started from this image holds the same load.
  served.load_id = uint64_t{sb.crc32} | uint64_t{1} << 32;
  if (FLAGS_node_id >= sb.num_memory_nodes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--node_id=%d but %s is laid out for %d memory node(s)", FLAGS_node_id,
        FLAGS_image, sb.num_memory_nodes));
  }
  auto [begin, end] = store::NodeSlice(sb, FLAGS_node_id);
  AlignedBuffer slice(end - begin);
  std::memcpy(slice.data(), image.bytes().data() + begin, end - begin);
  DMG_RETURN_IF_ERROR(node.LoadStore(std::move(slice)));
  LOG(INFO) << "serving " << FLAGS_image << " (node " << FLAGS_node_id
            << " of " << sb.num_memory_nodes << ", " << (end - begin)
            << " bytes)";
  return absl::OkStatus();
}

// Snapshots of the store (after each load) and, on `dmg snapshot --jobs`,
// of the jobs kept with no connection open: it asks the running server
// which those are (their state does not change while idle).
std::unique_ptr<memory_node::Snapshotter> MakeSnapshotter(
    std::unique_ptr<memory_node::SnapshotDir> dir,
    memory_node::MemoryNode& node,
    std::atomic<transport::TcpServer*>& running_server) {
  return std::make_unique<memory_node::Snapshotter>(
      std::move(dir), &node, [&node, &running_server] {
        memory_node::JobState state;
        transport::TcpServer* server = running_server.load();
        if (server == nullptr) return state;
        transport::IdleJobs idle = server->idle_jobs();
        state.running = idle.running;
        state.jobs = static_cast<uint32_t>(idle.jobs.size());
        for (const transport::JobRegions& job : idle.jobs) {
          for (uint32_t id : job.regions) {
            std::string name;
            std::shared_ptr<const AlignedBuffer> bytes =
                node.RegionBytes(id, &name);
            if (bytes != nullptr) {
              state.regions.push_back({job.job, name, bytes, job.verifier});
            }
          }
        }
        state.still_idle = [server, at = idle.adoptions] {
          return server->adoptions() == at;
        };
        return state;
      });
}

// The node id and load id of the store served now (a load changes them),
// for the snapshots the server asks for.
struct CurrentStore {
  std::mutex mu;
  uint32_t node_id GUARDED_BY(mu) = 0;
  uint64_t load_id GUARDED_BY(mu) = 0;
};

absl::StatusOr<transport::TcpServerOptions> ServerOptions(
    Served& served, memory_node::Snapshotter* snapshotter,
    CurrentStore& current) {
  transport::TcpServerOptions o;
  o.io_threads = FLAGS_io_threads;
  o.node_id = served.node_id;
  o.initial_load_id = served.load_id;
  o.restored_snapshot = served.snapshot;
  o.restored_jobs = std::move(served.restored_jobs);
  {
    std::lock_guard lock(current.mu);
    current.node_id = served.node_id;
    current.load_id = served.load_id;
  }
  if (snapshotter != nullptr) {
    o.on_commit = [&current, snapshotter](uint32_t id, uint64_t load) {
      {
        std::lock_guard lock(current.mu);
        current.node_id = id;
        current.load_id = load;
      }
      snapshotter->Request(id, load);
    };
    o.snapshot = [&current, snapshotter](bool with_jobs) {
      uint32_t id;
      uint64_t load;
      {
        std::lock_guard lock(current.mu);
        id = current.node_id;
        load = current.load_id;
      }
      return snapshotter->Wait(snapshotter->Request(id, load, with_jobs));
    };
  }
  DMG_ASSIGN_OR_RETURN(std::optional<transport::Secret> secret,
                       SecretFromFlags());
  if (secret && !secret->admin()) {
    return absl::InvalidArgumentError(
        "a memory node needs the cluster secret, not a job-only key");
  }
  o.secret = std::move(secret);
  o.limits.max_connections = FLAGS_max_connections;
  o.limits.admin_slots = FLAGS_admin_slots;
  o.limits.max_handshakes = FLAGS_max_handshakes;
  o.limits.max_peer_connections = FLAGS_max_peer_connections;
  // By default one job may hold half of the node's bound: two jobs always
  // fit (a job holding 192 of --memory_mb=200 MiB made every other fail).
  o.limits.job_quota_bytes =
      (FLAGS_job_quota_mb > 0 ? FLAGS_job_quota_mb : FLAGS_memory_mb / 2)
      << 20;
  o.limits.handshake_timeout_ms = FLAGS_handshake_timeout_ms;
  o.limits.frame_timeout_ms = FLAGS_frame_timeout_ms;
  o.limits.idle_timeout_ms = FLAGS_idle_timeout_s * 1000;
  o.limits.job_idle_timeout_ms = FLAGS_job_idle_timeout_s * 1000;
  o.limits.max_buffer_bytes = FLAGS_max_buffer_mb << 20;
  return o;
}

bool SameFile(int a, int b) {
  struct stat x, y;
  return fstat(a, &x) == 0 && fstat(b, &y) == 0 && x.st_dev == y.st_dev &&
         x.st_ino == y.st_ino;
}

// "memory node K listening on HOST:PORT (tcp)": on stdout for scripts, in
// the log for people; once when both go to the same file (a launcher's
// log). And the warning of a node open to anyone.
void Announce(const transport::HostPort& listen, int port,
              const Served& served, bool has_secret) {
  // Without --image the daemon has no place yet: `dmg load` gives it one
  // (and its slice), so its number is not claimed before that.
  const std::string name =
      FLAGS_image.empty() && !served.restored &&
              gflags::GetCommandLineFlagInfoOrDie("node_id").is_default
          ? std::string("memory node (no store yet)")
          : absl::StrFormat("memory node %d", served.node_id);
  const std::string line = absl::StrFormat(
      "%s listening on %s:%d (%s)", name, listen.host, port, FLAGS_transport);
  if (!SameFile(STDOUT_FILENO, STDERR_FILENO)) LOG(INFO) << line;
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
  if (!has_secret && !IsLoopback(listen.host)) {
    std::fprintf(
        stderr,
        "dmg: WARNING: memory node on %s:%d is OPEN: it was started without "
        "--secret_file, so anyone who reaches this port can read and write "
        "every region, load a store and stop it. Start it with "
        "--secret_file=FILE (`dmg secret --output=FILE` writes one) and give "
        "the same file to dmg load and dmg run.\n",
        listen.host.c_str(), port);
  }
}

}  // namespace

int MemoryNodeCommand() {
  absl::StatusOr<transport::HostPort> listen = CheckFlags();
  if (!listen.ok()) return ReportError(listen.status());
  // Signals are taken by one thread with sigwait; block them everywhere else
  // (threads inherit this mask).
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  memory_node::MemoryNode::Options options;
  options.capacity_bytes = FLAGS_memory_mb << 20;
  memory_node::MemoryNode node(FLAGS_node_id, options);
  Served served;
  served.node_id = FLAGS_node_id;
  std::unique_ptr<memory_node::SnapshotDir> snapshot_dir;
  if (!FLAGS_snapshot_dir.empty()) {
    absl::StatusOr<std::unique_ptr<memory_node::SnapshotDir>> dir =
        memory_node::SnapshotDir::Open(FLAGS_snapshot_dir);
    if (!dir.ok()) return ReportError(dir.status());
    snapshot_dir = *std::move(dir);
    if (FLAGS_image.empty()) {
      if (absl::Status s = RestoreSnapshot(*snapshot_dir, node, served);
          !s.ok()) {
        return ReportError(s);
      }
    }
  }
  if (!FLAGS_image.empty()) {
    if (absl::Status s = ServeImage(node, served); !s.ok()) {
      return ReportError(s);
    }
  }
  std::atomic<transport::TcpServer*> running_server{nullptr};
  std::unique_ptr<memory_node::Snapshotter> snapshotter;
  if (snapshot_dir != nullptr) {
    snapshotter = MakeSnapshotter(std::move(snapshot_dir), node, running_server);
    if (!FLAGS_image.empty()) {
      snapshotter->Request(served.node_id, served.load_id);
    }
  }
  CurrentStore current;
  absl::StatusOr<transport::TcpServerOptions> server_options =
      ServerOptions(served, snapshotter.get(), current);
  if (!server_options.ok()) return ReportError(server_options.status());
  RaiseDescriptorLimit(FLAGS_max_connections);
  absl::StatusOr<std::unique_ptr<RdmaService>> rdma;
  if (FLAGS_transport == "rdma") {
    rdma = StartRdmaService(*listen, &node, &*server_options);
    if (!rdma.ok()) return ReportError(rdma.status());
  }
  absl::StatusOr<std::unique_ptr<transport::TcpServer>> server =
      transport::TcpServer::Start(&node, listen->host, listen->port,
                                  *server_options);
  if (!server.ok()) return ReportError(server.status());
  running_server.store(server->get());
  Announce(*listen, (*server)->port(), served,
           server_options->secret.has_value());

  std::thread signal_thread([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    if (sig != 0) {
      LOG(INFO) << "signal " << sig << ": stopping";
      (*server)->Stop();
    }
  });
  (*server)->Wait();
  (*server)->Stop();
  // Before the server goes: job-state snapshots ask it what is idle.
  snapshotter.reset();
  running_server.store(nullptr);
  // Wake the signal thread if the stop came from a shutdown request.
  pthread_kill(signal_thread.native_handle(), SIGTERM);
  signal_thread.join();
  LOG(INFO) << "memory node " << node.id() << " stopped";
  return kExitOk;
}

}  // namespace dmg::cli

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

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <thread>

#include "absl/strings/str_format.h"
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
DEFINE_int32(handshake_timeout_ms, 10000,
             "memory-node: a connection that has not finished its hello and "
             "proof of the secret by then is closed");
DEFINE_int32(frame_timeout_ms, 30000,
             "memory-node: a request begun must arrive whole, and its reply "
             "be taken, within this");
DEFINE_int32(idle_timeout_s, 0,
             "memory-node: close an authenticated connection silent this long "
             "(0: never; compute nodes keep theirs for a whole job)");
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
                                    "max_buffer_mb",    "snapshot_dir"};
  for (const std::string& n : RdmaFlagNames()) names.push_back(n);
  return names;
}

int MemoryNodeCommand() {
  absl::StatusOr<std::vector<transport::HostPort>> listen =
      transport::ParseHostPorts(FLAGS_listen, /*allow_any_port=*/true);
  if (!listen.ok() || listen->size() != 1) {
    return ReportError(absl::InvalidArgumentError(
        "--listen=HOST:PORT is required (one address; port 0 picks a free "
        "one)"));
  }
  // The shared --transport flag's default ("local") means tcp here.
  if (gflags::GetCommandLineFlagInfoOrDie("transport").is_default) {
    FLAGS_transport = "tcp";
  }
  if (FLAGS_transport != "tcp" && FLAGS_transport != "rdma") {
    return ReportError(absl::InvalidArgumentError(
        "memory-node --transport must be tcp or rdma"));
  }
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
  uint64_t load_id = 0;
  uint32_t node_id = FLAGS_node_id;
  bool restored = false;
  std::vector<transport::JobRegions> restored_jobs;
  std::unique_ptr<memory_node::SnapshotDir> snapshot_dir;
  if (!FLAGS_snapshot_dir.empty()) {
    absl::StatusOr<std::unique_ptr<memory_node::SnapshotDir>> dir =
        memory_node::SnapshotDir::Open(FLAGS_snapshot_dir);
    if (!dir.ok()) return ReportError(dir.status());
    snapshot_dir = *std::move(dir);
  }
  if (snapshot_dir != nullptr && FLAGS_image.empty()) {
    // A restart: serve what the last complete snapshot holds.
    if (std::optional<memory_node::Snapshot> snap =
            snapshot_dir->LoadNewest()) {
      if (!gflags::GetCommandLineFlagInfoOrDie("node_id").is_default &&
          FLAGS_node_id != snap->node_id) {
        return ReportError(absl::InvalidArgumentError(absl::StrFormat(
            "--node_id=%d but the snapshot in %s is of memory node %d",
            FLAGS_node_id, FLAGS_snapshot_dir, snap->node_id)));
      }
      node_id = snap->node_id;
      load_id = snap->load_id;
      const uint64_t bytes = snap->store.size();
      if (absl::Status s = node.LoadStore(std::move(snap->store)); !s.ok()) {
        return ReportError(s);
      }
      node.AssignNodeId(node_id, "the snapshot in " + FLAGS_snapshot_dir);
      restored = true;
      LOG(INFO) << "serving the store of snapshot " << snap->seq << " in "
                << FLAGS_snapshot_dir << " (node " << node_id << ", " << bytes
                << " bytes)";
      // The job state it holds goes back as regions of their jobs, kept
      // for `dmg run --resume` (TcpServerOptions::restored_jobs).
      std::map<std::string, std::vector<uint32_t>> by_job;
      for (memory_node::JobRegion& region : snap->jobs) {
        absl::StatusOr<transport::RegionInfo> info =
            node.AddRegion(std::move(region.bytes), region.name);
        if (!info.ok()) {
          return ReportError(absl::ResourceExhaustedError(absl::StrFormat(
              "cannot restore region '%s' of job '%s' from the snapshot in "
              "%s: %s (raise --memory_mb)",
              region.name, region.job, FLAGS_snapshot_dir,
              info.status().message())));
        }
        by_job[region.job].push_back(info->id);
      }
      for (auto& [job, regions] : by_job) {
        restored_jobs.push_back({job, std::move(regions)});
      }
    }
  }
  if (!FLAGS_image.empty()) {
    absl::StatusOr<store::StoreImage> image = store::ReadImageFile(FLAGS_image);
    if (!image.ok()) return ReportError(image.status());
    const store::Superblock sb = image->superblock();
    // Every node started from this image holds the same load.
    load_id = uint64_t{sb.crc32} | uint64_t{1} << 32;
    if (FLAGS_node_id >= sb.num_memory_nodes) {
      return ReportError(absl::InvalidArgumentError(absl::StrFormat(
          "--node_id=%d but %s is laid out for %d memory node(s)",
          FLAGS_node_id, FLAGS_image, sb.num_memory_nodes)));
    }
    auto [begin, end] = store::NodeSlice(sb, FLAGS_node_id);
    AlignedBuffer slice(end - begin);
    std::memcpy(slice.data(), image->bytes().data() + begin, end - begin);
    if (absl::Status s = node.LoadStore(std::move(slice)); !s.ok()) {
      return ReportError(s);
    }
    LOG(INFO) << "serving " << FLAGS_image << " (node " << FLAGS_node_id
              << " of " << sb.num_memory_nodes << ", " << (end - begin)
              << " bytes)";
  }

  // The server, once it runs: a snapshot of job state asks it which jobs
  // are kept with no connection open (their state does not change).
  std::atomic<transport::TcpServer*> running_server{nullptr};
  std::unique_ptr<memory_node::Snapshotter> snapshotter;
  if (snapshot_dir != nullptr) {
    snapshotter = std::make_unique<memory_node::Snapshotter>(
        std::move(snapshot_dir), &node, [&node, &running_server] {
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
              if (bytes != nullptr)
                state.regions.push_back({job.job, name, bytes});
            }
          }
          state.still_idle = [server, at = idle.adoptions] {
            return server->adoptions() == at;
          };
          return state;
        });
    if (!FLAGS_image.empty()) snapshotter->Request(node_id, load_id);
  }

  transport::TcpServerOptions server_options;
  server_options.io_threads = FLAGS_io_threads;
  server_options.node_id = node_id;
  server_options.restored_jobs = std::move(restored_jobs);
  // The node id and load id of the store served now (a load changes them).
  std::mutex current_mu;
  uint32_t current_node_id = node_id;
  uint64_t current_load_id = load_id;
  if (snapshotter != nullptr) {
    server_options.on_commit = [&, s = snapshotter.get()](uint32_t id,
                                                          uint64_t load) {
      {
        std::lock_guard lock(current_mu);
        current_node_id = id;
        current_load_id = load;
      }
      s->Request(id, load);
    };
    server_options.snapshot = [&, s = snapshotter.get()](bool with_jobs) {
      uint32_t id;
      uint64_t load;
      {
        std::lock_guard lock(current_mu);
        id = current_node_id;
        load = current_load_id;
      }
      return s->Wait(s->Request(id, load, with_jobs));
    };
  }
  server_options.initial_load_id = load_id;
  absl::StatusOr<std::optional<transport::Secret>> secret = SecretFromFlags();
  if (!secret.ok()) return ReportError(secret.status());
  if (*secret && !(*secret)->admin()) {
    return ReportError(absl::InvalidArgumentError(
        "a memory node needs the cluster secret, not a job-only key"));
  }
  server_options.secret = *std::move(secret);
  if (FLAGS_max_connections < 1 || FLAGS_handshake_timeout_ms < 1 ||
      FLAGS_frame_timeout_ms < 1 || FLAGS_idle_timeout_s < 0 ||
      FLAGS_max_buffer_mb < 1) {
    return ReportError(absl::InvalidArgumentError(
        "--max_connections, --handshake_timeout_ms, --frame_timeout_ms and "
        "--max_buffer_mb must be positive, --idle_timeout_s at least 0"));
  }
  server_options.limits.max_connections = FLAGS_max_connections;
  server_options.limits.handshake_timeout_ms = FLAGS_handshake_timeout_ms;
  server_options.limits.frame_timeout_ms = FLAGS_frame_timeout_ms;
  server_options.limits.idle_timeout_ms = FLAGS_idle_timeout_s * 1000;
  server_options.limits.max_buffer_bytes = FLAGS_max_buffer_mb << 20;
  RaiseDescriptorLimit(FLAGS_max_connections);
  absl::StatusOr<std::unique_ptr<RdmaService>> rdma;
  if (FLAGS_transport == "rdma") {
    rdma = StartRdmaService((*listen)[0], &node, &server_options);
    if (!rdma.ok()) return ReportError(rdma.status());
  }
  absl::StatusOr<std::unique_ptr<transport::TcpServer>> server =
      transport::TcpServer::Start(&node, (*listen)[0].host, (*listen)[0].port,
                                  server_options);
  if (!server.ok()) return ReportError(server.status());
  running_server.store(server->get());
  // Without --image the daemon has no place yet: `dmg load` gives it one
  // (and its slice), so its number is not claimed before that.
  const std::string name =
      FLAGS_image.empty() && !restored &&
              gflags::GetCommandLineFlagInfoOrDie("node_id").is_default
          ? std::string("memory node (no store yet)")
          : absl::StrFormat("memory node %d", node_id);
  const std::string line =
      absl::StrFormat("%s listening on %s:%d (%s)", name, (*listen)[0].host,
                      (*server)->port(), FLAGS_transport);
  LOG(INFO) << line;
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
  if (!server_options.secret && !IsLoopback((*listen)[0].host)) {
    std::fprintf(
        stderr,
        "dmg: WARNING: memory node on %s:%d is OPEN: it was started without "
        "--secret_file, so anyone who reaches this port can read and write "
        "every region, load a store and stop it. Start it with "
        "--secret_file=FILE (`dmg secret --output=FILE` writes one) and give "
        "the same file to dmg load and dmg run.\n",
        (*listen)[0].host.c_str(), (*server)->port());
  }

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

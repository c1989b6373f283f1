// The memory node's network face: a Boost.Asio server that answers the
// control plane (hello, region table, allocate/free, create store,
// shutdown) for every transport, and executes the tcp transport's one-sided
// batches on the node's I/O threads. Every operation is bounds-checked by the
// MemoryTarget before it touches memory; errors go back to the client and to
// the log. Regions a connection allocates are freed when it closes, so a
// compute node that dies leaves nothing behind — unless its job asked to
// keep them (kKeepJob, for `dmg run --resume`): then they stay, owned by
// the job, for the time it asked (at most max_keep_s), and the job's next
// connection adopts them.
//
// Nothing is accepted before the hello (and, with a secret, the challenge-
// response of transport/auth.h); then the connection's role and job decide
// what it may touch: a job reads the store and only its own job's regions;
// only an admin creates or writes the store, sees every job, or stops the
// daemon. Every frame is bounded before anything is allocated for it, and
// the bytes all connections buffer together are capped; a connection that
// does not finish its handshake, or a frame, in time is closed.
#ifndef DMG_TRANSPORT_TCP_SERVER_H_
#define DMG_TRANSPORT_TCP_SERVER_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "transport/auth.h"
#include "transport/memory_target.h"
#include "transport/wire.h"

namespace dmg::transport {

struct TcpServerLimits {
  // Connections open at once; more are refused as soon as accepted (with
  // the reason). The last `admin_slots` of them are the admin's: a job
  // connection that would take one is refused at its hello, so `dmg load`,
  // `dmg status` and snapshots get in when jobs (or an attacker holding
  // the job key) fill the rest.
  int max_connections = 1024;
  int admin_slots = 16;
  // Connections that have not finished the handshake, at once; past it the
  // oldest of them is closed (with the reason) to make room, so that
  // half-open connections held by someone without the secret cannot keep
  // clients that answer at once out.
  int max_handshakes = 128;
  // Connections open at once from one address (0: no limit).
  int max_peer_connections = 512;
  // The hello and the challenge-response must be done within this.
  int handshake_timeout_ms = 10000;
  // A frame begun must arrive whole, and its reply be taken, within this.
  int frame_timeout_ms = 30000;
  // An authenticated connection that sends nothing for this long is closed
  // (0: never).
  int idle_timeout_ms = 0;
  // The same for job connections (the shorter of the two applies; 0:
  // none): the hello's reply tells a job this bound, and its client keeps
  // its control connections alive with kPing and opens its data
  // connections again when they idled past half of it, so only
  // connections no client looks after (forgotten, or someone's holding
  // slots) are closed.
  int job_idle_timeout_ms = 300000;
  // The longest a job may ask its regions to be kept after its connections
  // close (kKeepJob), in seconds.
  int max_keep_s = 3600;
  // Request and reply buffers of all connections together.
  uint64_t max_buffer_bytes = uint64_t{1} << 30;
  // Bytes of regions one job may hold on this node (0: no quota), so that
  // one job cannot take the node's whole --memory_mb from the others.
  uint64_t job_quota_bytes = 0;
};

// What the server has seen, for tests and logs.
struct TcpServerStats {
  int connections = 0;          // open now
  uint64_t buffered_bytes = 0;  // held in request/reply buffers now
  uint64_t max_buffered_bytes = 0;
  uint64_t refused_connections = 0;  // over max_connections
  uint64_t auth_failures = 0;
  uint64_t timeouts = 0;         // handshake, frame or idle
  uint64_t denied_requests = 0;  // not allowed to the connection's role/job
  uint64_t kept_regions = 0;     // of closed connections, kept for their job
  // Buffers of 64 KiB and more a connection took from those closed ones
  // gave back (no allocation, no page faults), and the bytes kept so.
  uint64_t reused_buffers = 0;
  uint64_t shelved_bytes = 0;
  uint64_t evicted_handshakes = 0;   // closed to make room (max_handshakes)
  uint64_t admin_only_refusals = 0;  // job hellos in the admin's slots
  // Job connections whose token was not the one the job's name is bound
  // to here (someone else's job, or a process given another token).
  uint64_t token_refusals = 0;
};

// A job's regions on this node, by id.
struct JobRegions {
  std::string job;
  std::vector<uint32_t> regions;
  // TokenVerifier of the job's token (transport/auth.h); none: an open
  // node's job, or one from a snapshot written before tokens.
  std::optional<Digest> verifier;
};

// The jobs whose regions the node keeps with no connection of theirs open
// (their compute nodes gone; kKeepJob), and how many jobs run now.
struct IdleJobs {
  std::vector<JobRegions> jobs;
  uint32_t running = 0;
  uint64_t adoptions = 0;  // TcpServer::adoptions() when they were listed
};

struct TcpServerOptions {
  int io_threads = 2;
  uint32_t node_id = 0;
  // The cluster secret every client must prove it holds; none: the server
  // is open (anyone who reaches the port is trusted with the role it asks
  // for) and says so loudly unless it listens on loopback only.
  std::optional<Secret> secret;
  TcpServerLimits limits;
  // Identifies the load the store at start came from (an image's
  // superblock checksum; 0: none), so compute nodes can tell that every
  // memory node holds the same load.
  uint64_t initial_load_id = 0;
  // The snapshot the store at start came from (its number; 0: none), said
  // in kStoreInfo until a load replaces it, so that a node restarted from a
  // snapshot of an earlier load is named as such.
  uint64_t restored_snapshot = 0;
  // Filled in by an RDMA server: registers a region with the NIC and returns
  // its remote address and key (for the region table). Empty for tcp only.
  std::function<absl::Status(RegionInfo*)> register_region;
  std::function<void(uint32_t region)> deregister_region;
  // Filled in by an RDMA server: a fresh single-use ticket that admits one
  // queue pair (kRdmaTicket, asked on an authenticated connection).
  std::function<std::string()> issue_rdma_ticket;
  // Called after a load commits a new store (with the node id and load id
  // it gave this node), e.g. to snapshot it (`--snapshot_dir`). Runs on an
  // I/O thread: it must return quickly.
  std::function<void(uint32_t node_id, uint64_t load_id)> on_commit;
  // kSnapshot (admin): writes a snapshot now, with job state when asked,
  // and returns what it holds once it is in place. Runs on a thread of its
  // own (one snapshot at a time), not an I/O thread. Empty: the node takes
  // no snapshots (FailedPrecondition).
  std::function<absl::StatusOr<wire::SnapshotSummary>(bool with_jobs)> snapshot;
  // Job state restored from a snapshot at start: kept for its job as if
  // its connections had just closed (max_keep_s), owned by it, adopted by
  // its next connection (`dmg run --resume`).
  std::vector<JobRegions> restored_jobs;
};

class TcpServer {
 public:
  // Listens on host:port (port 0: any free port; see port()).
  static absl::StatusOr<std::unique_ptr<TcpServer>> Start(
      MemoryTarget* target, const std::string& host, uint16_t port,
      TcpServerOptions options);
  ~TcpServer();

  uint16_t port() const;
  TcpServerStats stats() const;
  // The jobs kept with no connection open, for a snapshot of job state.
  IdleJobs idle_jobs() const;
  // How many times a connection took over kept regions (a job resumed):
  // idle_jobs() is out of date once this moved.
  uint64_t adoptions() const;
  // Blocks until a client sends kShutdown or Stop() is called.
  void Wait();
  // Closes the listener and every connection and joins the I/O threads.
  void Stop();

 private:
  struct Impl;
  explicit TcpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace dmg::transport

#endif  // DMG_TRANSPORT_TCP_SERVER_H_

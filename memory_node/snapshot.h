// Snapshots of a memory node's store on local disk (`dmg memory-node
// --snapshot_dir=DIR`), so a daemon that restarts serves the store it held
// without another `dmg load`.
//
// A snapshot is one file, DIR/snapshot-SEQ.dmgsnap:
//   header  {magic "DMGSNAP1", u32 version, u32 node_id, u64 load_id,
//            u64 seq, u64 store_bytes, u32 store_crc, u32 header_crc}
//   bytes   the node's store slice, exactly
//   jobs    (version 2) {u32 count, u32 crc of count}, then `count` job
//           regions, each {u32 job_len, u32 name_len, u64 bytes,
//           u32 data_crc (of what follows the header), u32 entry_crc (of
//           the 20 bytes before it)}, the job's name, the region's name,
//           (version 3) the job's token block {u8 present, 32-byte
//           verifier of the job's token}, the bytes
//   trailer {magic "DMGSEND1", u64 seq, u32 trailer_crc}
// (little-endian; CRCs are zlib CRC-32). Job regions are the state of jobs
// whose compute nodes are gone and whose regions the node keeps for
// `dmg run --resume` (kKeepJob); they are written only on request
// (`dmg snapshot --jobs`), and a restart keeps them for the job as if its
// connections had just closed, bound to the job's token as before (only
// its holder resumes it). Versions 1 (no jobs) and 2 (no token: the first
// job to connect under the name takes it) still load.
// It is written as
// DIR/snapshot-SEQ.dmgsnap.tmp.PID, fsync'd, renamed into place and the
// folder fsync'd, so a crash (kill -9) at any moment leaves either the new
// snapshot whole or only a temporary file, which the next start removes;
// the previous snapshot is deleted only after the new one is in place.
// Loading takes the newest snapshot that verifies (every CRC, the sizes
// against the file's) and falls back to older ones, saying why.
//
// DIR/LOCK (flock) keeps two daemons off one folder.
#ifndef DMG_MEMORY_NODE_SNAPSHOT_H_
#define DMG_MEMORY_NODE_SNAPSHOT_H_

#include <condition_variable>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "common/aligned_buffer.h"
#include "transport/auth.h"
#include "transport/wire.h"

namespace dmg::memory_node {

// One region of a job, as a snapshot holds it.
struct JobRegion {
  std::string job;   // the job name it belongs to (kHello's job)
  std::string name;  // the region's name (e.g. "progress")
  AlignedBuffer bytes;
  std::optional<transport::Digest> verifier;  // of the job's token
};

struct Snapshot {
  uint32_t node_id = 0;
  uint64_t load_id = 0;  // the load the store came from (TcpServerOptions)
  uint64_t seq = 0;      // numbers snapshots in one folder, newest highest
  AlignedBuffer store;
  std::vector<JobRegion> jobs;
};

// A job region to write: its bytes are held (shared) while they are.
struct JobRegionRef {
  std::string job, name;
  std::shared_ptr<const AlignedBuffer> bytes;
  std::optional<transport::Digest> verifier;  // of the job's token
};

// Bounds a reader applies to a job region's names.
inline constexpr uint32_t kMaxSnapshotNameBytes = 4096;

// Parses and verifies a snapshot read from `f` (`size` bytes; `name` for
// messages). Every length is checked against `size` before allocating.
absl::StatusOr<Snapshot> ReadSnapshot(std::FILE* f, uint64_t size,
                                      const std::string& name);

class SnapshotDir {
 public:
  // Creates `dir` if needed, locks it and removes temporary files of
  // processes that no longer run.
  static absl::StatusOr<std::unique_ptr<SnapshotDir>> Open(
      const std::string& dir);
  ~SnapshotDir();
  SnapshotDir(const SnapshotDir&) = delete;
  SnapshotDir& operator=(const SnapshotDir&) = delete;

  const std::string& dir() const { return dir_; }

  // The newest snapshot that verifies (nullopt: none; damaged ones are
  // skipped with a warning naming the file and the fault).
  std::optional<Snapshot> LoadNewest();

  // Writes a new snapshot of `store` and, once it is in place, deletes the
  // older ones. `cancelled` is asked between chunks: true abandons the
  // write (the temporary file goes; the previous snapshot stays). Returns
  // the new snapshot's seq.
  absl::StatusOr<uint64_t> Write(uint32_t node_id, uint64_t load_id,
                                 std::span<const std::byte> store,
                                 std::span<const JobRegionRef> jobs,
                                 const std::function<bool()>& cancelled);

  // Snapshot files in the folder, oldest first (for tests and logs).
  std::vector<std::string> List() const;

 private:
  SnapshotDir(std::string dir, int lock_fd);
  std::string dir_;
  int lock_fd_;
  uint64_t next_seq_ = 1;
};

class MemoryNode;

// The job state a snapshot takes, collected when its write begins: the
// regions of jobs that are not running (kept for --resume), how many jobs
// that is, how many running jobs were left out (their state changes while
// it would be copied), and a check asked while the write goes on and
// before it is put in place: false once one of those jobs came back (then
// the write is abandoned and taken again, without it).
struct JobState {
  std::vector<JobRegionRef> regions;
  uint32_t jobs = 0;
  uint32_t running = 0;
  std::function<bool()> still_idle;
};

// What a snapshot written on request holds (kSnapshot's reply).
using SnapshotTaken = transport::wire::SnapshotSummary;

// Snapshots a memory node's store in the background: Request() after each
// load (and at start, for a store from --image); a newer request abandons
// a write still in progress, which leaves the previous snapshot in place.
// A request with jobs (kSnapshot) also takes the job state `job_state`
// collects; Wait() blocks until a snapshot that covers a request is in
// place and says what it holds.
class Snapshotter {
 public:
  using JobStateFn = std::function<JobState()>;
  Snapshotter(std::unique_ptr<SnapshotDir> dir, MemoryNode* node,
              JobStateFn job_state = nullptr);
  ~Snapshotter();  // abandons a write in progress and joins the thread
  Snapshotter(const Snapshotter&) = delete;
  Snapshotter& operator=(const Snapshotter&) = delete;

  // Returns a ticket for Wait.
  uint64_t Request(uint32_t node_id, uint64_t load_id, bool with_jobs = false);
  // The snapshot that covers `ticket` (the first one written, or failed,
  // after it was requested), or Cancelled when the snapshotter stops first.
  absl::StatusOr<SnapshotTaken> Wait(uint64_t ticket);
  // Blocks until every request so far is written or abandoned (tests).
  void WaitIdle();
  uint64_t written() const;  // snapshots completed

 private:
  void Run();
  std::unique_ptr<SnapshotDir> dir_;
  MemoryNode* node_;
  JobStateFn job_state_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false, busy_ = false;
  uint64_t requested_ = 0, taken_ = 0, written_ = 0;  // guarded by mu_
  bool jobs_pending_ = false;                         // guarded by mu_
  // The last request a finished write covered, and what it did.
  uint64_t done_ = 0;                                     // guarded by mu_
  absl::StatusOr<SnapshotTaken> last_ = SnapshotTaken{};  // guarded by mu_
  uint32_t node_id_ = 0;
  uint64_t load_id_ = 0;
  std::thread thread_;
};

}  // namespace dmg::memory_node

#endif  // DMG_MEMORY_NODE_SNAPSHOT_H_

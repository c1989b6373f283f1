// The compute nodes of one job, and how they meet: through memory node 0,
// with no process of their own. Compute node 0 creates the job record (a
// region named "job.<name>": the node count, the vertex ranges stage 1 of
// the workload manager chose, a barrier counter and one slot per node); the
// others find it by name and join. Any launcher works: a shell loop, ssh,
// srun, or `dmg run --compute_nodes=N` itself.
//
// Exchange is the one collective: every node posts a payload (bytes) and
// gets every node's payload back, in node order, once all have posted. A
// node WRITEs its payload to its own board (a region it owns, two of them
// alternating by round so a fast node never overwrites what a slow one is
// still reading), then WRITEs its slot (round, board) and adds one to the
// barrier counter with a fetch-and-add; it READs the counter and the slots
// until every node has reached the round, then READs the others' boards.
// The engine builds everything on it: state changes, frontiers, partial
// reductions, remote-update inboxes, the superstep barrier.
//
// Failure: a node that fails posts its error in its slot, and the others
// stop with it; a node that stops posting (killed, stalled) is named by the
// others once `timeout` passes. Regions are owned by the connections that
// allocated them, so a job that dies leaves nothing behind on tcp and rdma
// memory nodes; a job that ends frees its record and boards.
#ifndef DMG_COMPUTE_NODE_CLUSTER_H_
#define DMG_COMPUTE_NODE_CLUSTER_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "transport/transport.h"

namespace dmg::compute {

struct ClusterOptions {
  int nodes = 1;  // compute nodes in the job
  int id = 0;     // this node, 0 <= id < nodes
  std::string job = "dmg";
  // How long a node waits for the others (to join, to reach a round)
  // before it names the missing ones and fails.
  std::chrono::milliseconds timeout{30000};
  // A resumed job (`dmg run --resume`): a record of the job found on the
  // memory node is an earlier attempt's. Node 0 frees it and makes a new
  // one; the others wait for the new one (a record that already has all
  // its nodes is the old one).
  bool resume = false;
};

class Cluster {
 public:
  // Joins the job. Node 0 creates its record with `bounds` (nodes + 1
  // ascending vertex ids: node k owns [bounds[k], bounds[k+1])) and
  // `num_vertices`; the others wait for the record to appear, check it
  // against their own view (node count, vertices) and read the bounds.
  static absl::StatusOr<std::unique_ptr<Cluster>> Join(
      transport::Transport& transport, transport::Endpoint& endpoint,
      const ClusterOptions& options, uint64_t num_vertices,
      std::span<const uint64_t> bounds);
  // A job of one compute node: no record and no boards on the memory
  // nodes. Exchange hands this node's post back, work rounds claim from
  // cursors in this process, and nothing fails but this node: the engine
  // runs the same code with one node as with several.
  static std::unique_ptr<Cluster> Solo(transport::Transport& transport,
                                       std::string job, uint64_t num_vertices);
  ~Cluster();
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  int id() const { return options_.id; }
  int nodes() const { return options_.nodes; }
  bool solo() const { return solo_; }
  // The job's name ("" for a solo job: it has no record to name).
  const std::string& job() const { return options_.job; }
  // Vertex range bounds as recorded in the job record.
  std::span<const uint64_t> bounds() const { return bounds_; }
  uint64_t rounds() const { return round_; }
  // Microseconds this node spent waiting for the others (in Exchange).
  uint64_t wait_us() const { return wait_us_; }
  // READs of the job record while waiting for the others (each one a round
  // trip, counted in the transport's figures too).
  uint64_t polls() const { return polls_; }
  // Whether this node allocated region `id` on memory node `node` (the
  // record, or one of its boards).
  bool Allocated(uint32_t node, uint32_t id) const;

  // What one node posted in a round: its part for everyone, and the part
  // it addressed to this node.
  struct Received {
    std::string common;
    std::string mine;
  };
  // Posts `common` (for every node) and `to[k]` (for node k alone; empty or
  // nodes() long), waits for every node's post of this round, and returns
  // what each posted for this node, in node order (this node's included).
  absl::StatusOr<std::vector<Received>> Exchange(
      transport::Endpoint& endpoint, std::string_view common,
      std::span<const std::string> to = {});

  // Stage 2 of the workload manager across nodes: in a work round (every
  // node begins each one, in the same order) node k's work items are
  // handed out by a cursor in the job record that any node advances with
  // a fetch-and-add: k takes its own from it, and a node done with its own
  // takes k's that are left. Returns the round's cursor parity.
  absl::StatusOr<int> BeginWorkRound(transport::Endpoint& endpoint);
  // Advances node `node`'s cursor of this round by `count`; returns where
  // it was (items [old, old + count) are the caller's, those that exist).
  absl::StatusOr<uint64_t> Claim(transport::Endpoint& endpoint, int node,
                                 int parity, uint64_t count);

  // An error met while working (a region not found, say) may mean another
  // node has died: if some node's regions are gone from the memory nodes,
  // returns an error naming it; else `status`.
  absl::Status Diagnose(const absl::Status& status);

  // Tells the others this node failed (best effort; they stop with
  // `status` naming this node). Later exchanges fail.
  void Abort(transport::Endpoint& endpoint, const absl::Status& status);

  // The last round: after it every node stops touching the record, and
  // node 0 frees it once all have said so.
  absl::Status Leave(transport::Endpoint& endpoint);

 private:
  struct Board {
    transport::RegionInfo region;
    bool allocated = false;
  };
  Cluster(transport::Transport& transport, ClusterOptions options,
          transport::RegionInfo record, std::vector<uint64_t> bounds);
  uint64_t slot_offset(int k, uint64_t round) const;
  uint64_t CursorAt(int node, int parity) const;
  absl::Status WaitForRound(transport::Endpoint& endpoint,
                            std::vector<std::byte>& slots);

  // WaitForRound's steps; `image` is its copy of the job record.
  //
  // What a READ of the barrier and left counters showed.
  enum class CounterPoll {
    kBehind,      // some node has not posted this round yet: poll again
    kRoundDone,   // every node posted; the others' slot heads and their
                  // sections for this node are in the image
    kReadRecord,  // a node left or failed, a READ failed, or time ran out
  };
  CounterPoll PollCounters(transport::Endpoint& endpoint,
                           std::vector<std::byte>& image,
                           std::chrono::steady_clock::time_point start);
  // Every node is at this round in `image` (error: a node's slot says it
  // failed).
  absl::StatusOr<bool> AllAtRound(const std::vector<std::byte>& image);
  // The nodes that had not reached this round when `image` was read.
  std::string MissingNodes(const std::vector<std::byte>& image) const;
  // The error when the job record is gone (node 0 stopped); `late`: the
  // nodes still missing when it was last read.
  absl::Status RecordGone(const std::string& late) const;
  // The error when the wait runs out; counts the missing nodes.
  absl::Status GiveUpWaiting(const std::vector<std::byte>& image);

  void FreeRegions();

  transport::Transport& transport_;
  ClusterOptions options_;
  transport::RegionInfo record_;
  std::vector<uint64_t> bounds_;
  Board boards_[2];
  uint64_t round_ = 0;
  uint64_t work_round_ = 0;
  uint64_t wait_us_ = 0;
  uint64_t polls_ = 0;
  bool failed_ = false;
  bool relayed_ = false;  // the failure came from another node's slot
  uint64_t missing_ = 0;  // nodes this one gave up waiting for
  bool left_ = false;
  bool record_freed_ = false;
  bool solo_ = false;
  std::atomic<uint64_t> solo_cursor_[2] = {0, 0};  // Claim's, solo
};

}  // namespace dmg::compute

#endif  // DMG_COMPUTE_NODE_CLUSTER_H_

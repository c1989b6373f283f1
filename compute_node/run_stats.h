// The figures of one run: per superstep and totals. `dmg run --stats_json`
// writes them; benchmarks read them.
#ifndef DMG_COMPUTE_NODE_RUN_STATS_H_
#define DMG_COMPUTE_NODE_RUN_STATS_H_

#include <string>
#include <vector>

#include "compute_node/page_cache.h"
#include "transport/transport.h"

namespace dmg::compute {

struct SuperstepStats {
  int index = 0;
  // Whether its end was a checkpoint (a version of the state arrays on the
  // memory nodes, and the progress record): EngineOptions.
  bool checkpoint = true;
  std::string direction;  // "pull" or "push"
  uint64_t frontier = 0;  // active vertices at the start of the superstep
  // Who chose the first EdgeMap's direction: "auto" (the engine, from
  // auto_work = frontier vertices + their edges, as far as summed, against
  // auto_threshold = arcs / 20), "flag" (--direction), "program" (the
  // kernel forced it); empty when the superstep had no EdgeMap.
  std::string chosen_by;
  uint64_t auto_work = 0;
  uint64_t auto_threshold = 0;
  // For an update that does not stop early, auto_work is the frontier's
  // edges (summed up to auto_threshold, the count at which a pull becomes
  // the cheaper) and these are the coordinator's estimates of each way
  // (coordinator::ChooseDirection; per compute node).
  double est_pull_us = 0, est_push_us = 0;
  double est_pull_bytes = 0, est_push_bytes = 0;
  // The share of a push's arcs to other nodes' vertices those estimates
  // took, as measured on every node's last push (-1: not yet measured, or
  // one compute node; the model then takes (N-1)/N).
  double est_push_remote_share = -1;
  // How the first push EdgeMap's updates to other nodes' vertices travelled
  // ("batch", "atomic"; "local" with one compute node), who chose ("auto":
  // the update coordinator, from est_*; "flag": --update_mode), and the
  // coordinator's estimates: updates per node to others' vertices, and the
  // time each way would take.
  uint64_t stolen_items = 0;  // push work items this node took from others
  // Stage 2's choice for the first push EdgeMap with several compute nodes
  // ("on": items could be taken across nodes; "off": each pushed its own;
  // empty: no such EdgeMap) and its inputs, the heaviest owner's share of
  // the step and the mean (edges + alpha * vertices).
  std::string steal;
  double steal_max_work = 0, steal_mean_work = 0;
  // The steal model's predicted gain and cost (workload::DecideSteal).
  double est_steal_gain_us = 0, est_steal_cost_us = 0;
  // The steal model's ns per unit taken that stays with the heaviest owner
  // (push steps: the updates to its own vertices it applies again).
  double est_steal_residue_ns = 0;
  std::string update_mode;
  std::string update_chosen_by;
  uint64_t est_remote_updates = 0;
  double est_batch_us = 0, est_atomic_us = 0;
  // How the first push EdgeMap that read its targets took in the lines
  // other nodes changed ("bulk": all READ first; "demand": READ as read;
  // empty: no such EdgeMap, or nothing pending), and the coordinator's
  // inputs and estimates (coordinator::ChooseRefresh; this node's).
  std::string refresh;
  uint64_t pending_lines = 0;
  double remote_share = 0;
  double est_refresh_touches = 0;
  double est_bulk_refresh_us = 0, est_demand_refresh_us = 0;
  double est_stale_refresh_us = 0;  // first-wins pushes only
  // What this node did, measured (the cost model's inputs, which
  // deploy/experiments/fit_coordinator.py fits its constants to): arcs its
  // pushes scanned and those to other nodes' vertices, vertices + arcs of
  // the blocks its pulls and its Gathers scanned, the vertices its
  // VertexMaps, VertexFilters and Reduces visited, the exchanges and the
  // time it waited in them.
  uint64_t push_arcs = 0, remote_arcs = 0, pull_visits = 0, gather_visits = 0;
  // Vertices and arcs of the blocks READ for a GPU share's upload (not a
  // pull's visits: the cost model's fit must not see them).
  uint64_t gpu_upload_visits = 0;
  uint64_t pull_hits = 0;  // of pull_visits, arcs whose source was active
  uint64_t vertex_visits = 0;
  uint64_t rounds = 0;
  // Of ops.round_trips: the READs that polled for the other nodes in
  // exchanges (as many as the wait lasted).
  uint64_t polls = 0;
  double wait_seconds = 0;
  double seconds = 0;
  transport::OpStats ops;
  CacheCounters cache;
  // Most READ batches one worker's endpoint had in flight at once.
  uint64_t max_outstanding = 0;
  // The most batches one endpoint posted (ops.round_trips counts every
  // endpoint's): the round trips on the superstep's longest path when the
  // workers' run side by side.
  uint64_t path_round_trips = 0;
};

// One compute node's figures in a job of several (compute node 0 gathers
// them all at the end).
struct NodeStats {
  int id = 0;
  uint64_t own_begin = 0, own_end = 0;  // its vertex range
  double seconds = 0;                   // its whole run
  double wait_seconds = 0;  // waiting for the other nodes in exchanges
  uint64_t rounds = 0;      // exchanges
  uint64_t polls = 0;       // round trips spent polling for the others (in ops)
  // Push work items (frontier chunks) it did of its own range, and of
  // other nodes' ranges (stolen through the shared cursors).
  uint64_t own_items = 0, stolen_items = 0;
  // Frontiers whose parts came partly as counts, fetched whole (a pull or a
  // steal needed the others' members: Engine::CompleteFrontier).
  uint64_t completed_frontiers = 0;
  transport::OpStats total;
};

// The GPU's share of the node's range (issue 40; Engine::GatherSum).
struct GpuStats {
  bool used = false;  // a share ran in some gather
  // How the share was chosen ("fixed", "calibrated"), or why the CPU
  // threads ran it all.
  std::string note;
  // Stage 1's calibration: cost units and seconds of each side's sample,
  // the rates and the share they gave (workload::ShareFromCalibration).
  double cpu_units = 0, cpu_seconds = 0, gpu_units = 0, gpu_seconds = 0;
  double cpu_rate = 0, gpu_rate = 0, share = 0;
  // The GPU's part [begin, cut) of the node's range [begin, end).
  uint64_t begin = 0, cut = 0, end = 0;
  // The share's upload: edges, and bytes READ for it through the transport.
  uint64_t upload_edges = 0, upload_bytes_read = 0;
  // Pulls run, the kernels' own figures (gpu::KernelTimes), and how long
  // the CPU threads waited for the GPU after their part.
  uint64_t pulls = 0;
  double kernel_seconds = 0, copy_seconds = 0, wait_seconds = 0;
  // BFS bottom-up steps whose share's candidates the GPU took.
  uint64_t bottom_up_steps = 0;
};

struct RunStats {
  std::string algorithm;
  std::string transport;
  int threads = 0;
  uint64_t vertices = 0;
  uint64_t arcs = 0;
  transport::OpStats setup;  // bootstrap, degree reads, state allocation
  std::vector<SuperstepStats> supersteps;
  transport::OpStats total;  // setup + supersteps + result read-back
  double seconds = 0;        // whole run on the compute node
  // Engine start to the first superstep (bootstrap, state allocation) and
  // the last superstep's end to the end of the run (result read-back).
  double setup_seconds = 0;
  double finish_seconds = 0;
  uint64_t directory_bytes = 0;  // graph index held by the compute node
  std::string cache_policy;
  uint64_t cache_capacity_bytes = 0;  // 0: unbounded
  uint64_t cache_peak_bytes = 0;      // most bytes ever held under the bound
  CacheCounters setup_cache;
  CacheCounters total_cache;
  // Process memory (from /proc/self/status), when the caller measured it:
  // resident set before the engine started, and the process's peak.
  uint64_t rss_start_bytes = 0;
  uint64_t rss_peak_bytes = 0;
  // The job's compute nodes; with more than one, `nodes` holds each one's
  // figures (on compute node 0) and `job_total` their sum.
  int compute_nodes = 1;
  std::string job;
  // The transport as the coordinator sees it (measured at job start with
  // several compute nodes).
  double transport_rtt_us = 0, transport_bytes_per_us = 0;
  // The coordinator's constants this run used (FormatCostConstants).
  std::string cost_constants;
  std::vector<NodeStats> nodes;
  transport::OpStats job_total;
  GpuStats gpu;
};

std::string ToJson(const RunStats& stats);

// VmRSS / VmHWM of this process in bytes (0 where /proc is unavailable).
uint64_t CurrentRssBytes();
uint64_t PeakRssBytes();

}  // namespace dmg::compute

#endif  // DMG_COMPUTE_NODE_RUN_STATS_H_

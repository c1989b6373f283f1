// The compute runtime of one compute node: a bulk-synchronous engine over
// the remote store. Vertex programs use it through the API that
// compute_node/vertex_program.h documents (and defines, for the templated
// operations); this header declares it and the run around it.
//
// The engine orchestrates parts that each do one job:
//   RemoteGraph       the superblock and block directories (bootstrap)
//   WorkerPool        threads, one transport endpoint each
//   UnitScheduler     the one cursor handing out work
//   CachePlanner      the one place that divides the cache bound
//   BlockSource       block I/O with the cache policy (graph-aware, page_lru)
//   HotBlockCache, HeaderCache, PageCache   what the cache holds
//   StateArray        double-buffered vertex state on the memory nodes
//   Barrier           the superstep barrier
//   RunStats          per-superstep figures
// Every byte of graph data reaches it through transport READs of
// self-describing blocks; the only index it holds is the block directory.
#ifndef DMG_COMPUTE_NODE_ENGINE_H_
#define DMG_COMPUTE_NODE_ENGINE_H_

#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "compute_node/barrier.h"
#include "compute_node/block_source.h"
#include "compute_node/cache_planner.h"
#include "compute_node/cluster.h"
#include "compute_node/frontier.h"
#include "compute_node/header_cache.h"
#include "compute_node/hot_block_cache.h"
#include "compute_node/memory_budget.h"
#include "compute_node/message.h"
#include "compute_node/page_cache.h"
#include "compute_node/progress.h"
#include "compute_node/remote_graph.h"
#include "compute_node/run_stats.h"
#include "compute_node/source_mirrors.h"
#include "compute_node/state_array.h"
#include "compute_node/unit_scheduler.h"
#include "compute_node/updates.h"
#include "compute_node/worker_pool.h"
#include "coordinator/outbox.h"
#include "coordinator/update_coordinator.h"
#include "gpu/kernels.h"
#include "store/block_format.h"
#include "workload/steal_policy.h"

namespace dmg::compute {

// The update exchange's outboxes (coordinator/outbox.h).
using coordinator::CombineOutboxes;
using coordinator::CombineScratch;
using coordinator::RemoteUpdate;
using coordinator::UpdateOutbox;

using store::BlockView;
using store::Weight;

// A vertex-property array, as programs see it.
template <typename T>
using State = StateArray<T>;

// How an EdgeMap moves updates: push (read the frontier's adjacency, update
// the targets), pull (read every candidate target's adjacency and gather
// from frontier members), or let the engine choose per call.
enum class Mode { kAuto, kPush, kPull };

// With several compute nodes: how a push EdgeMap's updates to vertices that
// other nodes own travel. kBatch: combined locally with the update's
// combine and written to the owner's inbox once, at the end of the
// operation; kAtomic: applied with remote atomics as they are made (later);
// kPull: none travel, the EdgeMap runs pull (each node gathers for its own
// vertices, reading its neighbours' state). kAuto: the engine chooses.
enum class UpdateMode { kAuto, kPull, kBatch, kAtomic };

struct EngineOptions {
  int threads = 1;
  // Most bytes of blocks READ in one batch (one round trip) by a worker.
  uint64_t batch_bytes = 256 * 1024;
  // Streaming scans keep this many batches per worker posted ahead of the
  // one being computed on (1: no prefetch). Graph-aware only.
  int prefetch_window = 2;
  // The compute node's cache bound (MemoryBudget::kUnlimited: none), or, if
  // cache_fraction > 0, that fraction of the store image's bytes.
  uint64_t cache_bytes = MemoryBudget::kUnlimited;
  double cache_fraction = 0;
  CachePolicy cache_policy = CachePolicy::kGraphAware;
  // Replaces the choice of every EdgeMap a program leaves to the engine
  // (Mode::kAuto) — for ablations (`dmg run --direction`). Modes a program
  // forces itself stay.
  Mode direction = Mode::kAuto;
  // The job's compute nodes and this one's place among them (one node: no
  // cluster, nothing is exchanged).
  ClusterOptions cluster;
  UpdateMode update_mode = UpdateMode::kAuto;
  // Tests: replaces ChooseTargetRefresh's choice before pushes that read
  // their targets (kStale only for first-wins updates; else demand).
  enum class ForcedRefresh { kAuto, kBulk, kDemand, kStale };
  ForcedRefresh refresh = ForcedRefresh::kAuto;
  // The coordinator's CPU and exchange constants (`dmg run
  // --cost_constants`; the defaults are the development machine's fit).
  coordinator::CostConstants cost_constants;
  // Stage 2 across compute nodes: push steps' work items go through shared
  // cursors, so idle nodes take others' left-overs (false: each node does
  // its own range only; for ablations).
  bool steal = true;
  // The cores this node posts for the steal model (workload::SharedCores;
  // 0: UsableCores, what this process may run on). Tests of stealing set
  // it to their threads, as hosts of their own would have them, so that
  // the machine's core count does not decide whether a step steals.
  double usable_cores = 0;
  // With several compute nodes: a node's small part of a push step's
  // frontier travels as a count and degree sums, not its members, and the
  // frontier holds only some members (Frontier::whole() false) until an
  // operation needs the rest (a pull, a steal: one exchange of members).
  // Off while progress is recorded (a checkpoint keeps whole frontiers).
  bool counted_parts = true;
  // With several compute nodes: arrays other nodes' pulls read travel as
  // owners' packed copies of the values each reader reads
  // (source_mirrors.h), not as 64-byte lines.
  bool source_mirrors = true;
  // Stage 1: a range's cost is its edges plus this times its vertices.
  double stage1_alpha = 1.0;
  // Called on the calling thread after every superstep with its figures
  // (dmg run's progress line on a terminal); none when empty.
  std::function<void(const SuperstepStats&)> on_superstep;
  // Resume (`dmg run --resume`; one compute node, memory-node daemons).
  // keep_state_s > 0: the memory nodes keep the job's regions for this
  // long after its process ends, and every superstep records the values
  // the program carries (Progress), so that a later run of the same job
  // can continue; resume: continue from the last superstep the job
  // completed. signature: what the run computes (algorithm, arguments,
  // graph), so that a resume of something else is refused. job: the job's
  // name, for messages.
  uint32_t keep_state_s = 0;
  bool resume = false;
  // One compute node: which superstep ends are checkpoints, where the state
  // arrays' changes go to their buffers on the memory node (a version) and
  // the progress record follows (`dmg run --checkpoint_interval`). Between
  // two, a superstep ends without a round trip: changes stay in the local
  // copy and the cache (pages evicted meanwhile go to the open version's
  // buffer), and a resume goes on from the last checkpoint. Every
  // `checkpoint_supersteps` supersteps (0 or 1: every one), or the first
  // superstep end `checkpoint_seconds` after the last checkpoint (0: no
  // time bound), whichever comes first; and, over a network, early when a
  // paged array's claim log may fill in the next superstep (ClaimLog::
  // EndSuperstep; a commit empties it; past full, claims would page their
  // pages in). Several compute nodes checkpoint
  // every superstep: versions are how they see each other's changes.
  int checkpoint_supersteps = 1;
  double checkpoint_seconds = 0;
  uint64_t signature = 0;
  std::string job;
  // With several compute nodes: whether Result() READs the whole array on
  // every node (tests). False (dmg run): each node READs its own range and
  // checks it against its copy, so that what the job reads back splits
  // over the nodes as its state does; with whole_result node 0 (which
  // writes --output, --top or --verify) READs the rest too. A figure over
  // a result is then summed over the nodes (ResultRange, ResultSplit).
  bool results_everywhere = true;
  bool whole_result = false;
  // The GPU's share of this node's range (issue 40): opens the share
  // kernels for [begin, end) of a graph of num_vertices vertices (dmg run:
  // gpu::ShareKernels::Open; tests: a host fake). Empty: no GPU. GatherSum
  // uses it with one compute node; an error falls back to the CPU threads.
  using GpuShareFactory =
      std::function<absl::StatusOr<std::unique_ptr<gpu::ShareKernels>>(
          uint64_t num_vertices, uint64_t begin, uint64_t end)>;
  GpuShareFactory gpu_share;
  // The GPU's part of the range's cost (edges + stage1_alpha * vertices),
  // 0..1, fixed (tests, ablations); < 0: stage 1's calibration at the
  // first GatherSum measures it.
  double gpu_share_fraction = -1;
};

class Engine {
 public:
  static absl::StatusOr<std::unique_ptr<Engine>> Create(
      transport::Transport& transport, const EngineOptions& options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // ---- The graph -------------------------------------------------------
  uint64_t num_vertices() const { return graph_.num_vertices(); }
  uint64_t num_arcs() const { return graph_.num_arcs(); }
  bool weighted() const { return graph_.weighted(); }
  int32_t min_weight() const { return graph_.min_weight(); }
  int32_t max_weight() const { return graph_.max_weight(); }
  // True if the store was laid out from a symmetric graph (every arc u->v
  // has v->u), as undirected algorithms need.
  bool symmetric() const { return graph_.symmetric(); }
  int threads() const { return pool_->size(); }
  // This compute node among the job's, and the vertices it owns (stage 1 of
  // the workload manager): it computes them, and only it writes their state.
  int compute_node() const { return cluster_->id(); }
  int compute_nodes() const { return cluster_->nodes(); }
  VertexId own_begin() const { return own_begin_; }
  VertexId own_end() const { return own_end_; }
  bool Owns(VertexId v) const { return v >= own_begin_ && v < own_end_; }
  // Block b's vertices in this node's range, as indices [first, second)
  // into the block (all of them but at the ends of the range).
  std::pair<uint32_t, uint32_t> OwnIndices(const BlockView& b) const {
    const uint32_t lo =
        b.first_vertex() < own_begin_ ? own_begin_ - b.first_vertex() : 0;
    const uint32_t hi = std::min<uint64_t>(
        b.vertex_count(), static_cast<uint64_t>(own_end_) - b.first_vertex());
    return {lo, hi};
  }
  // The same for the node whose work item worker w is on: this node's, or
  // (stage 2) the one it took the item from.
  std::pair<uint32_t, uint32_t> WorkIndices(int w, const BlockView& b) const {
    const auto [begin, end] = work_range_[w];
    const uint32_t lo = b.first_vertex() < begin ? begin - b.first_vertex() : 0;
    const uint32_t hi = std::min<uint64_t>(
        b.vertex_count(), static_cast<uint64_t>(end) - b.first_vertex());
    return {lo, hi};
  }

  // ---- The vertex-program API (see vertex_program.h) -------------------
  template <typename T>
  State<T>& NewState(const std::string& name, T initial,
                     CacheHint hint = CacheHint::kPerVertex);
  Frontier NewFrontier() const {
    return Frontier(num_vertices(), threads(), frontier_spares_);
  }
  Frontier FrontierOf(VertexId v) const;

  template <typename Fn>
  absl::Status VertexMap(Fn fn);
  template <typename Fn>
  absl::Status VertexMap(const Frontier& subset, Fn fn);
  template <typename Fn>
  absl::StatusOr<Frontier> VertexFilter(Fn keep);
  template <typename Fn>
  absl::StatusOr<Frontier> VertexFilter(const Frontier& subset, Fn keep);
  template <typename Op, typename Fn>
  auto Reduce(Fn fn) -> absl::StatusOr<decltype(fn(VertexId{}))>;
  // `into` gains the members of `other` (both sealed). Where either is
  // partial, the nodes count the union's members (an exchange, on every
  // node at the same point of the program).
  absl::Status Union(Frontier& into, const Frontier& other);
  // EdgeMap's value(u, v, w) and cond(v), and Gather's value(u, v, w) and
  // finish(v, sum), read state only at the vertices they are given (Ligra's
  // edge-function contract): with several compute nodes a pull takes in
  // just the other nodes' lines its sources lie on, and reads of other
  // vertices may see them stale.
  template <typename Op, typename T, typename Value, typename Cond>
  absl::StatusOr<Frontier> EdgeMap(const Frontier& frontier, Direction along,
                                   Mode mode, State<T>& target, Value value,
                                   Cond cond);
  template <typename Op, typename Value, typename FinishFn>
  auto Gather(Direction neighbours, Value value, FinishFn finish)
      -> absl::StatusOr<decltype(finish(
          VertexId{}, value(VertexId{}, VertexId{}, Weight{})))>;
  // Gather<Add> of values[u] over every vertex's neighbours u, then
  // finish(v, sum), for float or double values (PageRank's pull). With a
  // GPU share (EngineOptions::gpu_share, one compute node) it is a pull:
  // the GPU sums the first part of the range while the CPU threads gather
  // the rest, and finish sees every vertex as Gather's would; without one,
  // it is Gather<Add>.
  template <typename T, typename FinishFn>
  auto GatherSum(Direction neighbours, State<T>& values, FinishFn finish)
      -> absl::StatusOr<decltype(finish(VertexId{}, T{}))>;
  // Whether GatherSum would run a GPU share now (a factory, one compute
  // node, not turned off after a failure).
  bool GpuShareWanted() const {
    return options_.gpu_share && compute_nodes() == 1 &&
           !(gpu_.tried && gpu_.kernels == nullptr);
  }
  // GatherSum for a program to call when GpuShareWanted() (else its own
  // Gather<Add>). Compiled once, in engine_gpu.cc, for float and double:
  // instantiated in a program's translation unit, the GPU path's code made
  // GCC stop inlining that unit's CPU gather loop, and kron-20 PageRank ran
  // 35% slower without any GPU.
  template <typename T>
  absl::StatusOr<double> GatherSumOnGpu(
      Direction neighbours, State<T>& values,
      const std::function<double(VertexId, T)>& finish);
  absl::Status Degrees(Direction d, State<uint32_t>& out);
  // One vertex's degree in direction d (a READ of its blocks' headers).
  absl::StatusOr<uint64_t> Degree(Direction d, VertexId v);

  // Neighbourhoods of other vertices (triangle counting, and the like):
  // for every vertex u (a dense scan of direction d, whole adjacency),
  // pick(worker, u, N(u), wanted) appends the vertices whose adjacency u
  // needs; once READ (in batches, through the cache),
  // visit(worker, u, wanted(u), v, N(v)) is called for each, in increasing
  // v per batch.
  using PickFn = std::function<void(int, VertexId, std::span<const VertexId>,
                                    std::vector<VertexId>&)>;
  using VisitFn = std::function<void(int, VertexId, std::span<const VertexId>,
                                     VertexId, std::span<const VertexId>)>;
  absl::Status ForEachNeighbourhood(Direction d, const PickFn& pick,
                                    const VisitFn& visit);

  // Every own vertex's whole neighbour list in direction d, in a dense scan
  // of its blocks (kernels that work on adjacency itself: Afforest's
  // links): fn(worker, v, N(v)), workers in parallel. With `want`, only
  // the units holding a vertex it accepts (want(begin, end) for the unit's
  // vertex range) are READ; fn still sees each of their vertices.
  using AdjacencyFn =
      std::function<void(int, VertexId, std::span<const VertexId>)>;
  absl::Status ForEachAdjacency(
      Direction d, const std::function<bool(VertexId, VertexId)>* want,
      const AdjacencyFn& fn);
  // ForEachAdjacency with stage 2: with several compute nodes, stealing on
  // and the steal model's yes, a node done with its own units takes other
  // nodes' and calls taken(w, v, N(v)) for their vertices (v another
  // node's). `want` then also answers for other nodes' ranges, from what
  // every node knows. Returns whether the scan was shared (alike on every
  // node); what a taker learned reaches the owners through SendToOwners.
  absl::StatusOr<bool> ForEachAdjacencyShared(
      Direction d, const std::function<bool(VertexId, VertexId)>* want,
      const AdjacencyFn& own, const AdjacencyFn& taken);
  // Every node's (v, x) pairs, ascending by v, go to v's owner: returns
  // those all nodes sent for this node's vertices, in node order. Every
  // node calls it at the same point of the program (one exchange).
  template <typename T>
  absl::StatusOr<std::vector<RemoteUpdate<T>>> SendToOwners(
      std::span<const RemoteUpdate<T>> sorted);
  // The compute node whose range holds v, and compute node k's vertex
  // range [first, second).
  int OwnerOf(VertexId v) const;
  std::pair<VertexId, VertexId> RangeOf(int node) const {
    std::span<const uint64_t> b = cluster_->bounds();
    return {static_cast<VertexId>(b[node]), static_cast<VertexId>(b[node + 1])};
  }

  // Combines a value each compute node computed on its own (a count its
  // callbacks accumulated, say) over all of them with Op, in node order;
  // every node gets the result. With one node, returns `mine`.
  template <typename Op, typename T>
  absl::StatusOr<T> AllReduce(T mine);

  // Ends the superstep: commits every state array (its new version goes to
  // buffer superstep() % 2), records the carried values (when the job can
  // be resumed), passes the barrier, records the figures.
  absl::Status EndSuperstep();

  // Resume (see vertex_program.h): values the program carries from one
  // superstep to the next, saved with every superstep...
  template <typename T>
  void Carry(const std::string& name, T* value) {
    static_assert(std::is_trivially_copyable_v<T>);
    carried_.push_back({name, value, sizeof(T), nullptr});
  }
  void Carry(const std::string& name, Frontier* frontier) {
    carried_.push_back({name, nullptr, 0, frontier});
  }
  // ...and restored by Resume, called once after the program declared its
  // state arrays and carried values and before its first operation: true
  // when the job continues from an earlier attempt's last complete
  // superstep (state arrays and carried values are as they were then; the
  // program skips its set-up), false for a fresh start.
  absl::StatusOr<bool> Resume();
  // The superstep a resumed run continued from (0: a fresh start).
  int resumed_from() const { return resumed_from_; }
  // What the run computes (the algorithm and its resolved arguments), for
  // Resume's check; set before the program runs.
  void set_signature(uint64_t signature) { options_.signature = signature; }
  int superstep() const { return superstep_; }
  // The final version of a state array, read back from the memory node
  // (an open superstep is ended first). Every element is read unless the
  // result is split (ResultSplit): then only [ResultRange) is, and the
  // others hold the array's initial value.
  template <typename T>
  absl::StatusOr<std::vector<T>> Result(State<T>& state);
  // Whether Result leaves this node only its own range, so that a figure
  // over the result is this node's part of one summed over the nodes
  // (AllReduce): the same on every node of a job.
  bool ResultSplit() const {
    return compute_nodes() > 1 && !options_.results_everywhere;
  }
  // The elements of Result's vector this node counts: its own range when
  // the result is split, else all of them.
  std::pair<VertexId, VertexId> ResultRange() const {
    if (ResultSplit()) return {own_begin_, own_end_};
    return {0, static_cast<VertexId>(num_vertices())};
  }

  // ---- The run ---------------------------------------------------------
  // False after a transport failure; cleanup then skips remote frees (the
  // memory node reclaims a dead client's regions when its connections close).
  bool healthy() const { return !pool_->failed() && !failed_; }
  const RemoteGraph& graph() const { return graph_; }
  // Values this node READ from other nodes' packed copies of pulled
  // arrays (source_mirrors.h).
  uint64_t mirror_values_read() const;
  RunStats& stats() { return stats_; }
  // Closes the totals (ends an open superstep first) and, with several
  // compute nodes, leaves the job (after this, no collective operation).
  void Finish();

 private:
  // A block delivered to a dense scan; `continues`: the block's last vertex
  // goes on in the next block (a split vertex).
  using BlockFn = std::function<void(int worker, uint32_t entry,
                                     const BlockView& block, bool continues)>;
  // A frontier vertex's piece delivered to a push scan.
  using PieceFn = BlockSource::PerPiece;
  using RangeFn = std::function<bool(VertexId begin, VertexId end)>;

  Engine(transport::Transport& transport, RemoteGraph graph,
         std::unique_ptr<WorkerPool> pool, const EngineOptions& options);
  absl::Status Init();
  // Places the declared state arrays (once, at the first operation; arrays
  // declared later are placed at once) and opens a superstep if none is.
  absl::Status Prepare(bool open_superstep = true, bool fetch_pending = true);
  // READs every state array's pending lines (lazy refresh, state_array.h).
  absl::Status FetchPendingState();
  // Arms a shared dense scan's reads of other nodes' changes
  // (ScanBlocksShared).
  void ArmSharedScanReads();
  // Before a taken block's work (a pull's or a gather's): the pending lines
  // of its vertices and their neighbours, in one batch an array, instead of
  // a line at a touch.
  void FetchPendingOfBlock(int w, const BlockView& b);
  // What the next operation's accessors READ when they touch a pending
  // line: all of that array's pending lines, or the line alone
  // (StateArrayBase::FetchAllOnTouch); all of them after the first few
  // (coordinator::DemandBudget) unless `demand_first` is false.
  void ArmPendingReads(bool all_on_touch, bool demand_first = true);
  // The pending lines of `a` READ one at a time before the rest in one
  // batch (coordinator::DemandBudget at the measured transport; 0 when
  // none is pending).
  uint64_t DemandBudgetOf(const StateArrayBase& a) const;
  // The same for an operation that reads state at the neighbours a dense
  // scan of direction d names (a pull's sources): once a scan has recorded
  // them all (sources_), the batch is the pending lines holding one.
  // `whole`: the operation scans every block of this node's range (a
  // gather), so the sources may be recorded first (PrimeSources).
  absl::Status ArmSourceReads(Direction d, bool whole = false);
  // Before the first whole scan of direction d whose blocks this node's
  // hot-block cache holds: READs them (into the cache, where the scan
  // finds them) and records their sources, so that the scan's first
  // source reads are the referenced pending lines in one batch instead of
  // demand reads then every pending line (DemandBudget's batch: 0.76 MB
  // a node of a road-NY PageRank's first step over tcp, on 4 nodes).
  absl::Status PrimeSources(Direction d);
  // Places arrays: resident or paged, by the planner; fresh, or (adopt) from
  // the regions an earlier attempt left, at version superstep_.
  absl::Status PlaceStates(std::span<StateArrayBase* const> arrays,
                           bool adopt = false);
  // Resume: asks the memory nodes to keep the job's regions, and lists
  // what an earlier attempt of the job left (leftovers_).
  absl::Status KeepState();
  // Whether the superstep now ending is a checkpoint (options_).
  bool CheckpointDue();
  // Commits every state array's changes since the last version as the
  // next one (each node its own pages).
  // `leave_queued`: the last WRITEs stay queued on endpoint 0 (see
  // StateArrayBase::Commit); the caller flushes them.
  absl::Status CommitVersion(bool leave_queued = false);
  // The job's connections older than this attempt's, still open (`kept`:
  // this node's answer from the memory nodes). With several compute nodes
  // (a collective), on each memory node the node whose control connection
  // is the oldest there counts just the earlier attempt's: the least count
  // over the nodes, the most over the memory nodes.
  absl::StatusOr<uint32_t> OlderConnections(
      const transport::Transport::Kept& kept);
  // Whether region `r`, listed on a memory node, is one this compute node
  // left in an earlier attempt of the job (with several compute nodes each
  // takes over, or frees, its own).
  bool LeftByThisNode(const transport::RegionInfo& r) const;
  // Every compute node's `mine`, in node order (a collective of the
  // cluster's alone: no state is published with it).
  absl::StatusOr<std::vector<std::string>> PostToAll(std::string mine);
  void FreeLeftovers();
  // A program's result is read: its carried values are not recorded any
  // more (another program may run on this engine next).
  void StopRecording() {
    if (progress_ != nullptr) progress_->Stop();
    carried_.clear();
  }
  uint64_t Signature() const;
  // Records an edge operation's direction, frontier and who chose the
  // direction (with the automatic choice's inputs) in the superstep.
  void NoteEdgeOp(const char* direction, uint64_t frontier,
                  const char* chosen_by = "program", uint64_t work = 0,
                  uint64_t threshold = 0);
  // Grants direction d its headers (for push scans) and hot blocks when it
  // is first scanned.
  void PlanDirection(Direction d, bool push);
  // The directory entries [first, last) holding a vertex of `node`'s range
  // in stored direction d.
  std::pair<uint32_t, uint32_t> NodeEntries(Direction d, int node) const;
  const HeaderCache* headers(Direction d) const {
    return headers_[static_cast<int>(Stored(d))].get();
  }
  // The stored direction a scan of d reads: an unweighted symmetric graph's
  // in-arcs are its out-arcs, so scans of kIn read the out blocks (one set
  // of blocks, headers and hot blocks in the cache instead of two). Not
  // for weighted graphs: the weights of u->v and v->u may differ.
  Direction Stored(Direction d) const {
    return d == Direction::kIn && graph_.symmetric() && !graph_.weighted()
               ? Direction::kOut
               : d;
  }
  // Dense scan of direction d's blocks (of units holding a vertex range
  // `want` accepts, if given), each block on one worker, in order per unit.
  // `may_steal`: with several compute nodes the units are work items that
  // other nodes may take (ScanBlocksShared) when the coordinator's model
  // says that pays; the caller's fn then takes each block's vertices by
  // WorkIndices and sends a taken item's updates through the outbox, and
  // after the scan scan_shared_ says whether it was shared.
  // The vertices and arcs scanned are counted into the superstep's
  // `visits` field (a pull's by default; a Gather's, a push Gather's).
  // ForEachAdjacency and ForEachAdjacencyShared: `own` for this node's
  // vertices, `taken` for those of units taken from other nodes.
  absl::Status ScanAdjacency(
      Direction d, const std::function<bool(VertexId, VertexId)>* want,
      const AdjacencyFn& own, const AdjacencyFn& taken, bool may_steal);
  // `once`: a scan whose owner READs its blocks as a taker does (they are
  // not kept between steps), so a taken unit costs its taker little more.
  absl::Status ScanBlocks(
      Direction d, const RangeFn* want, const BlockFn& fn,
      bool may_steal = false,
      uint64_t SuperstepStats::*visits = &SuperstepStats::pull_visits,
      bool once = false);
  // ScanBlocks' stage 2 across nodes: every node's units behind its shared
  // cursor, taken by any node done with its own.
  // `block(w, entry, bytes, length, own)` does one block read for an item
  // of this node's (own) or another's.
  using SharedBlockFn =
      std::function<absl::Status(int w, uint32_t entry, const std::byte* bytes,
                                 uint32_t length, bool own)>;
  // Gather's values travel through the outboxes when a pull Gather's
  // units are taken (values of up to 8 bytes, as a push's updates).
  template <typename T>
  static constexpr bool kGatherMaySteal =
      sizeof(T) <= 8 && std::is_trivially_copyable_v<T>;
  template <typename Op, typename T, typename FinishFn, typename R>
  absl::Status FinishTakenGather(Direction neighbours, FinishFn& finish,
                                 std::vector<R>& partial);
  // A pull Gather's total: finish's results summed per block (`partial`,
  // each node its own blocks'), then over the blocks in order; with
  // several compute nodes after one collective (`partial` is reused).
  template <typename R>
  absl::StatusOr<R> SumBlockPartials(Direction neighbours,
                                     std::vector<R>& partial);
  absl::Status ScanBlocksShared(Direction d, const RangeFn* want,
                                const SharedBlockFn& block);
  // Stage 2 for a dense scan: whether other nodes may take this node's
  // units (the same answer on every node), noted in the superstep's stats.
  bool PullStealPays(Direction d, bool once = false);
  // Push scan: the pieces of the frontier's vertices in direction d.
  absl::Status ScanFrontier(Direction d, const Frontier& frontier,
                            const PieceFn& fn);
  // ScanFrontier's plan (d stored): whether the source reads only the
  // frontier's ranges of a block; the blocks holding vs's adjacency marked
  // in touched_ (and, sparse, their edge bytes in need_); the marked
  // blocks cut into units (the marks cleared).
  bool SparsePush() const;
  absl::Status MarkFrontierBlocks(Direction d, std::span<const VertexId> vs);
  std::vector<Unit> FrontierUnits(Direction d);
  // The push scan with several compute nodes: the frontier's chunks are
  // work items handed out by shared cursors (stage 2 across nodes), so a
  // node with a light share takes the others' left-over chunks.
  absl::Status ScanFrontierShared(Direction d, const Frontier& frontier,
                                  const PieceFn& fn);
  // Bottom-up scan for first-wins updates (BFS's Claim): for every vertex v
  // of this node's range that `candidates` marks, visit(worker, v, targets,
  // weights) over v's direction-d adjacency, in adjacency order and in
  // parts: first a short prefix of every candidate, then the rest of only
  // those whose visits all returned false (not resolved). A bottom-up step
  // stops at the first frontier neighbour; reading whole blocks would read
  // every edge of every candidate. Returns false, having read nothing, when
  // the block source reads whole blocks or d's headers are not cached.
  // Sets out[v - begin] to 1 for the candidates among [begin, end).
  using CandidatesFn =
      std::function<void(VertexId begin, VertexId end, uint8_t* out)>;
  using PrefixFn =
      std::function<bool(int worker, VertexId v, std::span<const VertexId>,
                         std::span<const Weight>)>;
  // `may_steal`: as for ScanBlocks, with 4096-vertex chunks of every
  // node's range as the work items (a taken chunk's visits run with
  // taking_ set; scan_shared_ says whether it was shared).
  absl::StatusOr<bool> ScanPrefixes(Direction d, const CandidatesFn& candidates,
                                    const PrefixFn& visit,
                                    bool may_steal = false);
  // Stage 2 across nodes, one work round: every node's items (counts[k]
  // of node k) behind the shared cursors, run(worker, node, item) on this
  // node's workers for its own and for those it takes (taking_ and
  // work_range_ set for another node's). Returns this node's measured
  // share: its workers' time on its own items, scaled to all of them (0
  // when others took them all).
  // `kind` (kPullScan, kPrefixScan, kPushScan): whose measured prices
  // (own_steal_) the round's times update.
  using WorkItemFn = std::function<absl::Status(int, int, uint64_t)>;
  absl::StatusOr<uint64_t> RunWorkRound(int kind,
                                        std::span<const uint64_t> counts,
                                        const WorkItemFn& run);
  // Stage 2 over chunks of every node's range: scan_chunk(w, begin, end)
  // for each, claimed through the shared cursors.
  absl::Status RunSharedChunks(
      uint64_t chunk,
      const std::function<absl::Status(int, VertexId, VertexId)>& scan_chunk);
  // Whether a bottom-up step's chunks are worth stealing (the same answer
  // on every node).
  bool PrefixStealPays(Direction d);
  // Calls fn(worker, entry, offsets) for every block of d, from READs of
  // block headers and offsets only (validated).
  using HeaderFn = std::function<void(int, uint32_t, const uint32_t*)>;
  absl::Status ScanHeaders(Direction d, const HeaderFn& fn,
                           bool own_only = false);
  // The end of a collective operation with several compute nodes: this
  // node publishes its state changes, posts `common` (to every node) and
  // `to` (one part per node), and takes in the others' state changes.
  // Returns what every node posted for this one, in node order. With one
  // compute node: returns `common` and `to`'s only part, moving nothing.
  // `publish_now`, when given, is asked (with what every node posted) whether
  // to publish here; it must answer alike on every node. No leaves the
  // changes for the next collective: the middle of an operation whose nodes
  // read nobody else's state before it ends (a push's update exchange, when
  // updates did travel), so lines changed on both sides of it are written
  // and read once, and one exchange is saved.
  using PublishTest =
      std::function<bool(const std::vector<Cluster::Received>&)>;
  // Changes are written before the post where they can be (Prewrite: a
  // resident array's lines not announced yet in this superstep), so the
  // post says they are in place; the rest after the exchange, and then a
  // "written" round, only when some node had such a rest. `prewrite`
  // false: none before the post (a node that knows the publish waits for
  // the next collective).
  absl::StatusOr<std::vector<Cluster::Received>> Collective(
      std::string common, std::span<const std::string> to = {},
      const PublishTest& publish_now = nullptr, bool prewrite = true);

  // Collective's steps.
  //
  // A run of `count` consecutive changed lines from `first` of state array
  // `array`.
  struct LineRun {
    size_t array;
    uint64_t first, count;
  };
  // What the nodes' posts of one collective say together.
  struct CollectivePosts {
    std::vector<LineRun> refresh;  // the other nodes' changed lines
    bool own_changes = false, others_changed = false;
    bool any_held = false;  // some node has changes left to write
    bool all_clean = true;  // every node's arrays are clean
  };
  // Prewrites (if `prewrite`) and writes this node's header and changed
  // lines: the start of its post.
  absl::Status PutCollectiveHeader(bool prewrite, MessageWriter& out);
  // The header's source-mirror items (SourceMirrors::Put); changed[i]:
  // this post changes array i.
  absl::Status PutMirrorItems(const std::vector<bool>& changed,
                              MessageWriter& out);
  // Checks node k's header against this node's place in the program, notes
  // its changed lines in `posts` (the other nodes'), and strips header and
  // lines from `post`, leaving the operation's own part.
  absl::Status TakeCollectiveHeader(int k, std::string& post,
                                    CollectivePosts& posts);
  // Writes the changes the posts announce (or releases pins when none).
  absl::Status PublishCollective(const CollectivePosts& posts);
  // Takes in the other nodes' changed lines.
  absl::Status RefreshOthersLines(std::vector<LineRun>& refresh);

  // With several compute nodes a node holds its own range's headers only:
  // a frontier's degrees per owner node, in each stored direction, come
  // with its parts (PutFrontier: each node sums its own members) or, for a
  // frontier without them (the program's own, or a part too large to sum
  // when posted), from an exchange where each node sums its own members,
  // stopping past `upto` (EnsureFrontierSums). The engine's thread only.
  struct FrontierSums {
    uint64_t epoch = 0;
    size_t size = 0;
    bool known[2] = {false, false};
    // Exact up to `cover`: a node's sum past it stopped there (kAllEdges:
    // exact).
    uint64_t cover[2] = {0, 0};
    std::vector<uint64_t> edges[2];  // per owner node
    // Each owner's members, where every part posted its count (a partial
    // frontier's always did).
    bool counted = false;
    std::vector<uint64_t> members;
  };
  FrontierSums frontier_sums_;
  // The sums of what the parts being taken posted.
  struct PostedSums {
    bool known[2] = {true, true};
    std::vector<uint64_t> edges[2];
    bool counted = true;
    std::vector<uint64_t> members;
    bool any_counted = false;  // a part came as a count alone
  };
  // Frontier parts: a node's members of `local` (all in its range) go into
  // a message; TakeFrontier adds a part read back into `global`.
  // The part carries its members' degree sums in each stored direction
  // with headers (FrontierSums) and their count when every member is this
  // node's and there are few enough to sum; members of `skip` (posted
  // before) are left out of both. Such a part, when `may_count` and the
  // options allow (CountedParts), carries no members: the readers count
  // them elsewhere (Frontier::AddElsewhere), and the poster adds its own
  // from `local` (TakeFrontier's `mine`).
  void PutFrontier(MessageWriter& out, const Frontier& local,
                   const Frontier* skip = nullptr,
                   bool may_count = false) const;
  // (A null `global` skips the members, reading the sums alone.) `mine`:
  // this node's posted part, for node == compute_node().
  absl::Status TakeFrontier(MessageReader& in, int node, Frontier* global,
                            PostedSums& sums, const Frontier* mine = nullptr);
  // Whether parts may go as counts (Options::counted_parts).
  bool CountedParts() const;
  // Whether the per-owner member counts of `frontier` are at hand.
  const std::vector<uint64_t>* PostedMembers(const Frontier& frontier) const;
  // `partial` whole: each node posts its own members (an exchange, on
  // every node at the same point of the program). Its sums go with it.
  absl::StatusOr<Frontier> CompleteFrontier(const Frontier& partial);
  // An error unless `frontier` is whole: a pull tests any vertex's
  // membership (EdgeMap fetches a partial one first).
  absl::Status WholeForPull(const Frontier& frontier);
  // One frontier from the nodes' parts (a collective).
  absl::StatusOr<Frontier> MergeFrontier(Frontier local);
  template <typename Op, typename T, typename Value, typename Candidate>
  absl::StatusOr<Frontier> AtomicPush(const Frontier& frontier, Direction along,
                                      State<T>& target, Value& value,
                                      Candidate& candidate);
  // How a push EdgeMap's updates to other nodes' vertices travel (batch or
  // atomic; kBatch with one compute node, where none do): the
  // --update_mode flag, else the coordinator's choice from the frontier,
  // its edges, the update's size, and the
  // transport's measured cost. Records the choice and its inputs.
  UpdateMode ChooseUpdateMode(const Frontier& frontier, Direction along,
                              size_t value_bytes);
  template <typename Op, typename T>
  absl::StatusOr<Frontier> FinishPush(State<T>& target, Frontier next);
  // The batch exchange's pieces: the workers' outboxes combined per target
  // with Op and cut into one batch per owner (`sent`: how many updates);
  // the batches a collective brought this node, checked to be its own;
  // both around a collective of their own (a push Gather's).
  template <typename Op, typename T>
  std::vector<std::string> OwnerBatches(uint64_t* sent);
  template <typename T>
  absl::Status TakeInbox(const std::vector<Cluster::Received>& got,
                         std::vector<RemoteUpdate<T>>& inbox);
  template <typename Op, typename T>
  absl::StatusOr<std::vector<RemoteUpdate<T>>> ExchangeUpdates();
  // Gather's two ways (gather.h) and the choice between them, recorded in
  // the superstep's statistics with the coordinator's estimates: the
  // --direction (or --update_mode=pull) flag, else the cheaper estimate
  // (coordinator::ChooseDirection for a step of every vertex).
  bool ChooseGatherPull(Direction neighbours, size_t value_bytes);
  // The coordinator's inputs for a step pushing along push_blocks (or
  // pulling the other way), but its frontier.
  coordinator::DirectionStep DirectionStepFor(Direction push_blocks,
                                              size_t value_bytes) const;
  // Records a direction estimate and its measured input, for the
  // superstep's first operation.
  void NoteDirectionEstimate(const coordinator::DirectionStep& step,
                             const coordinator::DirectionEstimate& e);
  // Sums of a pull Gather computed elsewhere (a GPU share): the vertices
  // [own_begin_, own_begin_ + sums.size()) take them once ready() returns
  // OK (it waits for them; the CPU threads gather the rest meanwhile).
  template <typename T>
  struct GivenSums {
    std::span<const T> sums;
    std::function<absl::Status()> ready;
  };
  template <typename Op, typename Value, typename FinishFn>
  auto PullGather(
      Direction neighbours, Value& value, FinishFn& finish,
      const GivenSums<std::invoke_result_t<Value&, VertexId, VertexId, Weight>>*
          given = nullptr)
      -> absl::StatusOr<decltype(finish(
          VertexId{}, value(VertexId{}, VertexId{}, Weight{})))>;
  // PullGather's end for the given sums: finish over their vertices, added
  // per block of the vertex's last piece into `partial` (after the scan).
  template <typename T, typename FinishFn, typename R>
  absl::Status FinishGivenSums(Direction neighbours, const GivenSums<T>& given,
                               FinishFn& finish, std::vector<R>& partial);
  // The GPU share (engine_gpu.cc). What a GatherSum does with it: nothing
  // (no factory, several nodes, it failed or took no part: the CPU threads
  // gather all), calibrate (this gather runs on the CPU threads, timed,
  // after the GPU pulled a sample; the share is cut after it), or run it.
  enum class GpuPhase { kNone, kCalibrate, kRun };
  // `sample_pull(kernels)` runs one PageRankPull of the current values on
  // an open share (the calibration's GPU sample).
  using SamplePull = std::function<absl::Status(gpu::ShareKernels&)>;
  absl::StatusOr<GpuPhase> GpuShareFor(Direction neighbours,
                                       const SamplePull& sample_pull);
  // Ends the calibration with the CPU threads' time for the whole range.
  absl::Status FinishGpuCalibration(Direction neighbours, double cpu_seconds);
  // Opens the share [own_begin_, cut) and uploads its adjacency; on an
  // error the GPU is off for the run, with the reason in the stats.
  absl::Status OpenGpuShare(Direction neighbours, VertexId cut);
  absl::StatusOr<std::unique_ptr<gpu::ShareKernels>> OpenShare(
      Direction neighbours, VertexId begin, VertexId end);
  // The share's adjacency in direction d, READ from the store's blocks
  // (through the transport and the cache, counted as any READ) into the
  // upload's staging, chunk by chunk.
  absl::Status UploadShare(gpu::ShareKernels& share, Direction d);
  // The share [begin, end)'s offsets in stored direction d (from 0), and
  // the CSR index of its first edge.
  struct ShareOffsets {
    std::vector<uint64_t> offsets;
    uint64_t first_edge = 0;
  };
  absl::StatusOr<ShareOffsets> ReadShareOffsets(Direction d, VertexId begin,
                                                VertexId end);
  // The edges per kVertexGrain vertices of the gathered direction (from
  // the directory, once), SplitForGpu's input.
  const std::vector<uint64_t>& GpuChunkEdges(Direction neighbours);
  // The cost (edges + stage1_alpha * vertices) of [begin, end).
  double GpuRangeCost(Direction neighbours, VertexId begin, VertexId end);
  // One PageRankPull on the open share, its time and copies noted.
  template <typename T>
  absl::Status RunSharePull(std::span<const T> all, std::span<T> sums);
  void GpuOff(std::string reason);
  struct GpuShareState {
    std::unique_ptr<gpu::ShareKernels> kernels;
    bool tried = false;  // GpuShareFor decided (kNone stays kNone)
    bool calibrating = false;
    double sample_units = 0, sample_seconds = 0;
    std::vector<uint64_t> chunk_edges;     // per kVertexGrain vertices
    Direction direction = Direction::kIn;  // stored, of the upload
  };
  GpuShareState gpu_;
  template <typename Op, typename Value, typename FinishFn>
  auto PushGather(Direction neighbours, Value& value, FinishFn& finish)
      -> absl::StatusOr<decltype(finish(
          VertexId{}, value(VertexId{}, VertexId{}, Weight{})))>;
  template <typename T>
  absl::StatusOr<Frontier> FinishAtomicPush(
      State<T>& target, Frontier next, const std::vector<uint64_t>& touched);
  // EdgeMap's push, bottom-up pull (std::nullopt: the source cannot read
  // prefixes) and pull (edge_map.h).
  template <typename Op, typename T, typename Value, typename Candidate>
  absl::StatusOr<Frontier> PushEdgeMap(const Frontier& frontier,
                                       Direction along, State<T>& target,
                                       Value& value, Candidate& candidate);
  template <typename Op, typename T, typename Value, typename Candidate>
  absl::StatusOr<std::optional<Frontier>> BottomUp(const Frontier& frontier,
                                                   Direction along,
                                                   State<T>& target,
                                                   Value& value,
                                                   Candidate& candidate);
  // A bottom-up step's GPU share (engine_gpu.cc): true when one is open
  // over direction d's adjacency (first-wins steps on an unweighted graph,
  // one compute node); opens one at a fixed gpu_share_fraction (a BFS
  // step's own calibration is not built: without a fraction, only a share
  // a PageRank gather opened is used).
  absl::StatusOr<bool> GpuShareForBottomUp(Direction d);
  // parents[i] of a share vertex that was no candidate.
  static constexpr int64_t kNotCandidate = std::numeric_limits<int64_t>::max();
  template <typename Op, typename T, typename Value>
  absl::Status ApplyGpuParents(std::span<const int64_t> parents,
                               State<T>& target, Value& value, Frontier& next);
  template <typename Op, bool kEveryVertex, typename T, typename Value,
            typename Candidate>
  absl::StatusOr<Frontier> PullEdgeMap(const Frontier& frontier,
                                       Direction along, State<T>& target,
                                       Value& value, Candidate& candidate);
  // Before a push EdgeMap that reads its targets' state, with several
  // compute nodes: whether a touched pending line of the others' changes
  // brings all of its array's (bulk) or itself alone (demand), by the
  // coordinator's estimates (coordinator::ChooseRefresh) from the pending
  // lines, this node's share of the frontier's arcs and the share of its
  // arcs that reached other nodes' vertices in its last push. Records the
  // choice and its inputs in the superstep's statistics. With `stale_ok`
  // (first-wins updates of `update_bytes`) it may choose to read none:
  // kStale (the candidate test takes a pending remote target as unset).
  enum class Refresh { kDemand, kBulk, kStale };
  Refresh ChooseTargetRefresh(const Frontier& frontier, Direction along,
                              bool stale_ok, size_t update_bytes);
  // The arcs of the frontier's members in this node's range, from the
  // cached headers or at the average degree.
  uint64_t OwnFrontierEdges(const Frontier& frontier, Direction d) const;
  // Per worker: arcs this node's push scanned, and those whose target
  // another node owns (ChooseTargetRefresh's measured share).
  // And the vertices and arcs of the blocks its pulls scanned (the cost
  // model's visits, recorded per superstep for fitting its constants).
  // and the arcs from frontier vertices among a pull's.
  struct alignas(64) ArcCount {
    uint64_t arcs = 0, remote = 0, pulled = 0, hits = 0;
  };
  void CountArcs(int w, std::span<const VertexId> targets) {
    ArcCount& c = arc_counts_[w];
    c.arcs += targets.size();
    if (compute_nodes() == 1) return;  // every target is this node's
    for (VertexId v : targets) c.remote += !Owns(v);
  }
  // Vertices a VertexMap, VertexFilter or Reduce visits on this node (the
  // superstep's figures).
  void NoteVertexVisits(uint64_t n) {
    stats_.supersteps.back().vertex_visits += n;
  }
  // Ends a pull's counting of arcs from the frontier.
  void TakePullHits() {
    for (ArcCount& c : arc_counts_) {
      stats_.supersteps.back().pull_hits += c.hits;
      c.hits = 0;
    }
  }
  // Ends a push Gather's counting of the arcs to other nodes' vertices.
  void TakeRemoteArcs() {
    SuperstepStats& s = stats_.supersteps.back();
    for (ArcCount& c : arc_counts_) {
      s.remote_arcs += c.remote;
      c.remote = 0;
    }
  }
  // Ends a push's counting: the share of arcs that reached other nodes
  // (with several nodes), and both counts into the superstep's figures.
  void TakeRemoteShare();
  // Per worker, the push step's updates to other nodes' vertices (and those
  // of work taken from other nodes), combined in place once many.
  template <typename Op, typename T>
  void ToOutbox(int w, VertexId v, T x) {
    outbox_[w].Add<Op, T>(v, x);
  }
  void ClearOutboxes() {
    outbox_.resize(threads());
    for (auto& b : outbox_) b.Reset(num_vertices());
  }
  // The pages [first, last) of state array `a` that hold this node's
  // vertices (ranges start on page boundaries; all pages with one node).
  std::pair<uint64_t, uint64_t> OwnPages(const StateArrayBase& a) const;
  // Samples the transport's round trip and bandwidth (transport_cost_),
  // the same on every node (the mean of their samples).
  absl::Status MeasureTransport();
  // Stage 2 across nodes: whether this push step's items may be taken by
  // other nodes (workload/steal_policy.h), noted in the superstep's stats.
  bool StealPays(Direction d, const Frontier& frontier);
  // The steal model's prices (workload::StealPrices): the CPU and link
  // time of READing an arc's bytes again, and the claims' round trips.
  double ArcReadNs() const;
  double ClaimRoundsNs() const;
  // Records a steal decision in the superstep's stats (the first of the
  // step) and keeps it for the work round it decided (steal_: each node's
  // room bounds what its workers take); returns whether to steal.
  bool NoteSteal(const workload::StealDecision& decision);
  workload::StealDecision steal_;
  // A dense scan's steal decision (kind as own_scan_ns_): on the measured
  // shares once every node has one, else on `estimate` (directory work
  // units at `prices`).
  workload::StealDecision DecideDenseSteal(int kind,
                                           std::span<const double> estimate,
                                           const workload::StealPrices& prices);
  // Push or pull for an EdgeMap asked for `mode`: the program's forced
  // mode, else the --direction override, else (kAuto) for an update that
  // stops early, pull when the frontier's edges in the push direction and
  // its vertices exceed a twentieth of the arcs (Ligra's rule; the pull
  // reads prefixes); for any other, the cheaper of the coordinator's two
  // estimates (coordinator::ChooseDirection: CPU, blocks the hot cache does
  // not hold yet, and with several nodes the updates' exchange). Records
  // the choice and its inputs in the superstep's statistics.
  // What ChoosePull resolves before it sums the frontier's edges: the mode,
  // who chose it, and for an automatic choice how far the sum must go.
  struct PullPlan {
    Mode mode = Mode::kAuto;
    const char* by = "program";
    bool model = false;   // the coordinator's estimates (else Ligra's rule)
    bool sticky = false;  // Ligra's rule keeps pulling without a sum
    bool sums = false;    // the frontier's edges are summed, up to stop_at
    uint64_t stop_at = 0, threshold = 0;
    coordinator::DirectionStep step;  // the model's inputs but the edges
  };
  PullPlan PlanPull(Mode mode, const Frontier& frontier, Direction push_blocks,
                    bool stops_early) const;
  bool ChoosePull(const PullPlan& plan, const Frontier& frontier,
                  Direction push_blocks);
  // How far the frontier's edges must be known for `plan` and what may
  // follow it (the update mode's choice, a steal decision): 0 none,
  // kAllEdges exactly.
  uint64_t SumsNeeded(const PullPlan& plan) const;
  static constexpr uint64_t kAllEdges = ~uint64_t{0};
  // The frontier of the last auto-chosen pull of an update that stops
  // early, while pulling (0: the last such choice was a push).
  uint64_t early_pull_frontier_ = 0;
  // The frontier's edges in direction d, from the cached headers (summed
  // until past stop_at) or at the average degree. With several compute
  // nodes, the per-node sums (frontier_sums_) that EnsureFrontierSums made
  // sure of, else at the average degree.
  uint64_t FrontierEdges(const Frontier& frontier, Direction d,
                         uint64_t stop_at) const;
  PostedSums NewPostedSums() const;
  // Keeps what the parts of `global` posted (frontier_sums_), and marks it
  // partial where a part came as a count alone.
  void KeepSums(Frontier& global, const PostedSums& sums);
  const std::vector<uint64_t>* Sums(const Frontier& frontier, int k,
                                    uint64_t upto) const;
  absl::Status EnsureFrontierSums(const Frontier& frontier, Direction d,
                                  uint64_t upto);
  // Headers of entries [first, last) of stored direction d for worker w:
  // the cached ones when they hold them, else READ into `scratch` (a
  // chunk of another node's range that this node took).
  absl::StatusOr<const HeaderCache*> HeadersFor(
      int w, Direction d, uint32_t first, uint32_t last,
      std::unique_ptr<HeaderCache>& scratch);
  // One compute node: the degrees in stored direction d (its cached
  // headers: headers(d) is set) of the frontier's first `count` members,
  // each computed once a frontier epoch (Frontier::epoch): a superstep's
  // choices may sum them several times, each time finding every member's
  // blocks. (Several nodes sum their own members when they post them:
  // FrontierSums.) The engine's thread only.
  std::span<const uint64_t> MemberDegrees(const Frontier& frontier, Direction d,
                                          size_t count) const;
  struct DegreeMemo {
    uint64_t epoch = 0;
    int direction = -1;
    std::vector<uint64_t> degrees;  // of vertices()[0, size)
  };
  mutable DegreeMemo degree_memo_;
  absl::Status Fail(absl::Status s);
  template <typename T>
  absl::StatusOr<T> Fail(absl::StatusOr<T> r) {
    if (!r.ok()) return Fail(r.status());
    return r;
  }
  CacheCounters CacheTotals();
  StateContext state_context();

  transport::Transport& transport_;
  RemoteGraph graph_;
  std::unique_ptr<WorkerPool> pool_;
  UnitScheduler scheduler_;
  EngineOptions options_;
  MemoryBudget budget_;
  CachePlanner planner_;
  BufferPlan buffers_;
  std::unique_ptr<PageCache> page_cache_;
  std::unique_ptr<BlockSource> source_;
  std::vector<Unit> all_units_[2];
  // The units holding this node's vertices (all units with one node).
  std::vector<Unit> own_units_[2];
  // With several compute nodes, every node's units (own_units_ is this
  // node's) and their work (arcs + kVertexCost per vertex), for stealing
  // in dense scans.
  std::vector<std::vector<Unit>> node_units_[2];
  std::vector<double> node_work_[2];
  // Per worker: the vertex range of the node whose item it is on (its own
  // but while it works on a taken one; WorkIndices).
  std::vector<std::pair<VertexId, VertexId>> work_range_;
  // The last ScanBlocks with may_steal ran shared (ScanBlocksShared).
  bool scan_shared_ = false;
  // Per kind of dense scan that may steal (0: a pull's blocks, 1: a
  // bottom-up step's prefixes): this node's measured time for its own
  // share, the least of its last kScanHistory such scans (ns; a shared
  // scan's own items' time scaled to all of them), posted in every
  // collective's header; and every node's as last posted (the steal
  // model's measured input, the same on every node; 0 where a node has
  // posted none yet, or has measured only one scan). The least, because
  // what else shares a node's cores only ever slows a scan: one slow scan
  // is no reason to take work from that node in the next step, a node slow
  // in every one is (NoteOwnScan).
  static constexpr int kScanHistory = 3;
  uint64_t own_scan_ns_[2] = {0, 0};
  std::vector<uint64_t> own_scan_history_[2];
  void NoteOwnScan(int kind, uint64_t ns);
  std::vector<uint64_t> scan_ns_[2];
  // The kinds of work round (own_scan_ns_'s two, and a push's chunks).
  static constexpr int kPullScan = 0, kPrefixScan = 1, kPushScan = 2;
  // This node's measured steal prices per kind of round, posted beside
  // own_scan_ns_: of its last round of that kind, its time per unit of
  // work (the decision's shares' units) on its own items, and on items it
  // took (ps; 0: none measured); every node's as last posted.
  struct StealFigures {
    uint64_t own_ps[3] = {0, 0, 0}, taken_ps[3] = {0, 0, 0};
  };
  StealFigures own_steal_;
  std::vector<StealFigures> steal_figures_;
  // Replaces the model's prices with the measured ones for a round of
  // `kind` with shares `work`, once both are measured: the heaviest
  // owner's own time per unit and the takers' mean (`absolute`: both, in
  // ns; else the taker's as the ratio of the two times the owner's price,
  // for rounds whose units change from one to the next).
  void MeasuredPrices(int kind, std::span<const double> work, bool absolute,
                      workload::StealPrices& prices) const;
  // This node's measured push figures, posted beside own_scan_ns_ (the
  // steal model's owner residue, PushResidueNs): of its last push that
  // took no other node's work, the arcs, those to other nodes' vertices,
  // and the updates it sent (after the candidate test and combining); of
  // its last inbox of at least kTimedInbox updates, the CPU time per update
  // applied (ps). Zero: not measured yet.
  struct PushFigures {
    uint64_t arcs = 0, remote = 0, sent = 0, apply_ps = 0;
  };
  static constexpr uint64_t kTimedInbox = 256;
  PushFigures own_push_;
  std::vector<PushFigures> push_figures_;  // every node's, as last posted
  // Their arcs, remote arcs and updates sent, summed over the nodes (the
  // same on every node).
  PushFigures PushTotals() const;
  // Per owner: the ns per unit of push work taken from it that stays with
  // it (its share of arcs to its own vertices comes back as updates to
  // apply), from the posted figures (the same on every node).
  std::vector<double> PushResidueNs() const;
  // FinishPush's figures for own_push_: the updates sent, and the inbox
  // applied in `apply_ns` (0: not timed).
  void NotePushFigures(uint64_t sent, uint64_t applied, uint64_t apply_ns);
  // The measured shares of scan `kind` as work for DecideSteal, or empty
  // when some node has none yet.
  std::vector<double> MeasuredShares(int kind) const;
  // The job's compute nodes (Cluster::Solo for one).
  std::unique_ptr<Cluster> cluster_;
  coordinator::TransportCost transport_cost_;  // measured at job start
  // The compute nodes' hosts, cores and threads, posted at job start (the
  // steal model's CoreFloor; empty on one node).
  workload::SharedCores shared_cores_;
  // A round trip at least this long is dear (any network, RDMA's few
  // microseconds included; the local transport's is a memcpy, ~0.06 us):
  // fewer and larger batches pay. At 10 us, tcp on loopback (8-12 us
  // measured at job start) fell on either side from run to run: road-NY
  // BFS at 5% took 0.15 or 0.58 s a source.
  static constexpr double kDearRoundTripUs = 1;
  bool RoundTripsDear() const {
    return transport_cost_.round_trip_us >= kDearRoundTripUs;
  }
  std::vector<Frontier> steal_scratch_;  // per worker
  std::vector<UpdateOutbox> outbox_;     // per worker (ToOutbox)
  // FinishPush's dense combining: values (any T of up to 8 bytes) and
  // whether each target has one (all 0 between uses).
  CombineScratch combine_;
  // Per worker: 1 while it works on another node's item (its updates then
  // all travel through the outbox).
  std::vector<uint8_t> taking_;
  std::vector<ArcCount> arc_counts_;  // per worker (CountArcs)
  // With several compute nodes, per stored direction: a bit per vertex of
  // the other nodes' ranges that this node's blocks name (the sources its
  // pulls read), recorded by its dense scans until one has read all its
  // blocks (sources_complete_). Like the state arrays' line bitmaps it is
  // not counted in the cache bound (a bit a vertex).
  std::vector<uint64_t> sources_[2];
  bool sources_complete_[2] = {false, false};
  // Direction k's sources are complete: offered to the source mirrors.
  void SourcesComplete(int k);
  // Packed copies of pulled arrays (options_.source_mirrors, several
  // compute nodes); the stored direction of the last ArmSourceReads.
  std::unique_ptr<SourceMirrors> mirrors_;
  int armed_sources_ = -1;
  // The index of `a` in states_ (states_.size() if none).
  size_t IndexOf(const StateArrayBase& a) const;
  // Records the neighbours of the block's vertices in this node's range.
  void RecordSources(int k, const BlockView& b) {
    const VertexId first = b.first_vertex();
    const VertexId end = first + b.vertex_count();
    const VertexId lo = std::max(first, own_begin_);
    const VertexId hi = std::min(end, own_end_);
    if (lo >= hi) return;
    const std::span<const VertexId> from = b.targets(lo);
    const std::span<const VertexId> to = b.targets(hi - 1);
    for (const VertexId* p = from.data(); p != to.data() + to.size(); ++p) {
      const VertexId u = *p;
      if (Owns(u)) continue;
      std::atomic_ref<uint64_t> word(sources_[k][u >> 6]);
      const uint64_t bit = uint64_t{1} << (u & 63);
      if (!(word.load(std::memory_order_relaxed) & bit)) {
        word.fetch_or(bit, std::memory_order_relaxed);
      }
    }
  }
  // Of the arcs this node's last push scanned, the share whose targets
  // other nodes own; < 0 before the first.
  double remote_share_ = -1;
  uint64_t last_push_arcs_ = 0, last_push_remote_ = 0;  // TakeRemoteShare
  uint64_t own_items_ = 0, stolen_items_ = 0;           // push work items done
  uint64_t completed_frontiers_ = 0;  // CompleteFrontier's exchanges
  uint64_t collectives_ = 0;
  // The last collective left every node's arrays clean (each node's pages
  // whole in the open buffer, nothing left to commit), and no operation
  // has begun since: it serves as the superstep's barrier, and
  // EndSuperstep needs no exchange of its own (a BFS level on a road
  // network: one exchange, not two). Reset by Prepare.
  bool barrier_ready_ = false;
  // An atomic push in the open superstep (its pages are refreshed after
  // its exchange: no collective of the superstep counts as the barrier).
  bool atomic_in_step_ = false;
  void SetBarrierReady(bool ready);
  // A running hash of the engine's choices (direction, update mode): the
  // same on every node, or they would diverge.
  uint64_t decisions_ = 0;
  void NoteDecision(uint64_t d) { decisions_ = decisions_ * 1000003 + d + 1; }
  VertexId own_begin_ = 0, own_end_ = 0;
  std::vector<uint8_t> touched_[2];  // scratch for frontier units
  bool headers_tried_[2] = {false, false};
  bool hot_tried_[2] = {false, false};
  // Every node's hot set holds every block of its range (the same on every
  // node; HotBlockCache::holds_all says it of this node's).
  bool hot_all_[2] = {false, false};
  std::unique_ptr<HeaderCache> headers_[2];
  // ScanFrontier's per-entry edge bytes of the frontier, or its members
  // where no headers give the bytes (zero between scans); the touched
  // entries and their estimated bytes (kept across scans).
  std::vector<uint64_t> need_[2];
  std::vector<uint32_t> push_entries_;
  std::vector<uint64_t> push_estimate_;
  // Buffers a dead frontier hands to the next one.
  std::shared_ptr<FrontierSpares> frontier_spares_ =
      std::make_shared<FrontierSpares>();
  std::unique_ptr<HotBlockCache> hot_[2];
  // Completed scans of every own block of a stored direction (the same
  // count on every node): with a cache that holds the whole direction, its
  // blocks are all admitted after the first (HotBlockCache::Offer).
  int full_scans_[2] = {0, 0};
  // Whether the hot cache holds all blocks of stored direction d, read.
  bool AllCached(Direction d) const;
  std::unique_ptr<Barrier> barrier_;
  // State arrays, in declaration order; placed_ of them are materialized.
  std::vector<std::unique_ptr<StateArrayBase>> states_;
  size_t placed_ = 0;
  // Superstep bookkeeping.
  int superstep_ = 0;
  // The state arrays' committed versions (checkpoints; the arrays' buffer
  // parity follows it), and the superstep count and time of the last.
  int version_ = 0;
  int version_superstep_ = 0;
  std::chrono::steady_clock::time_point version_time_;
  bool open_ = false;
  std::chrono::steady_clock::time_point start_, step_start_, step_end_;
  transport::OpStats step_base_;
  // Each endpoint's round trips when the superstep began.
  std::vector<uint64_t> step_path_base_;
  uint64_t step_rounds_base_ = 0, step_wait_base_us_ = 0;  // cluster's
  uint64_t step_polls_base_ = 0;
  CacheCounters step_cache_base_;
  RunStats stats_;
  bool failed_ = false;
  // Resume: the job's progress record (null: the job cannot be resumed),
  // an earlier attempt's regions not (yet) taken over, the carried values.
  std::unique_ptr<Progress> progress_;
  std::vector<transport::RegionInfo> leftovers_;
  std::vector<Progress::Carried> carried_;
  bool resume_asked_ = false;
  int resumed_from_ = 0;
};

}  // namespace dmg::compute

#endif  // DMG_COMPUTE_NODE_ENGINE_H_

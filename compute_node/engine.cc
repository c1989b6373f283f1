#include "compute_node/engine.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/host_cores.h"
#include "common/status_macros.h"
#include "compute_node/vertex_program.h"
#include "compute_node/wire_codec.h"
#include "glog/logging.h"
#include "workload/partition.h"

namespace dmg::compute {

namespace {

// The best of `samples` 8-byte READs of the store, posted and waited for:
// one round trip on this transport.
absl::StatusOr<double> BestRoundTripUs(transport::Endpoint& ep, int samples) {
  uint64_t word = 0;
  double best = 1e30;
  for (int i = 0; i < samples; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    ep.Read(0, transport::kStoreRegion, 0, &word, sizeof(word));
    DMG_RETURN_IF_ERROR(ep.Flush());
    best = std::min(best, std::chrono::duration<double, std::micro>(
                              std::chrono::steady_clock::now() - t0)
                              .count());
  }
  return best;
}

// The best of `reads` READs of the store's first `bytes`, in bytes per
// microsecond beyond a round trip of `round_trip_us`.
absl::StatusOr<double> BestBandwidth(transport::Endpoint& ep, uint64_t bytes,
                                     int reads, double round_trip_us) {
  std::vector<std::byte> buffer(bytes);
  double us = 1e30;
  for (int i = 0; i < reads; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    ep.Read(0, transport::kStoreRegion, 0, buffer.data(),
            static_cast<uint32_t>(bytes));
    DMG_RETURN_IF_ERROR(ep.Flush());
    us = std::min(us, std::chrono::duration<double, std::micro>(
                          std::chrono::steady_clock::now() - t0)
                          .count());
  }
  return static_cast<double>(bytes) / std::max(1.0, us - round_trip_us);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(
    transport::Transport& transport, const EngineOptions& options) {
  if (options.threads < 1) {
    return absl::InvalidArgumentError("engine needs at least one thread");
  }
  std::vector<std::unique_ptr<transport::Endpoint>> endpoints;
  for (int i = 0; i < options.threads; ++i) {
    DMG_ASSIGN_OR_RETURN(std::unique_ptr<transport::Endpoint> ep,
                         transport.NewEndpoint());
    endpoints.push_back(std::move(ep));
  }
  auto start = std::chrono::steady_clock::now();
  DMG_ASSIGN_OR_RETURN(RemoteGraph graph, RemoteGraph::Open(*endpoints[0]));
  if (graph.num_memory_nodes() > transport.num_memory_nodes()) {
    // Node 0 holds the superblock, so a subset of the memory nodes shows
    // here, before anything READs a missing one.
    return absl::InvalidArgumentError(absl::StrFormat(
        "the store on these memory nodes is laid out over %d memory node(s), "
        "but the job was given %d: list every memory node it was loaded "
        "into, in the order `dmg load` was given them",
        graph.num_memory_nodes(), transport.num_memory_nodes()));
  }
  EngineOptions resolved = options;
  if (options.cache_fraction > 0) {
    resolved.cache_bytes = static_cast<uint64_t>(
        options.cache_fraction * static_cast<double>(graph.image_bytes()));
  }
  auto engine = std::unique_ptr<Engine>(
      new Engine(transport, std::move(graph),
                 std::make_unique<WorkerPool>(std::move(endpoints)), resolved));
  engine->start_ = start;
  engine->version_time_ = start;
  engine->own_end_ = static_cast<VertexId>(engine->num_vertices());
  // Before the nodes meet: a bound below the minimum is the same error on
  // every node, not a node that left the record and one that lost it.
  DMG_ASSIGN_OR_RETURN(engine->buffers_, engine->planner_.PlanBuffers());
  if (options.cluster.nodes > 1) {
    // Stage 1 of the workload manager: node 0 splits the vertices by edges
    // and vertices and records the ranges; the others take them from the
    // record.
    const RemoteGraph& g = engine->graph_;
    std::vector<uint64_t> edges;
    for (Direction d : {Direction::kOut, Direction::kIn}) {
      workload::AddEdgesPerChunk(g.directory(d), g.num_vertices(), g.num_arcs(),
                                 internal::kVertexGrain, edges);
    }
    const std::vector<uint64_t> bounds =
        workload::SplitRanges(edges, g.num_vertices(), internal::kVertexGrain,
                              options.cluster.nodes, options.stage1_alpha);
    ClusterOptions cluster = options.cluster;
    cluster.resume = options.resume;
    DMG_ASSIGN_OR_RETURN(engine->cluster_,
                         Cluster::Join(transport, engine->pool_->endpoint(0),
                                       cluster, g.num_vertices(), bounds));
    const int id = options.cluster.id;
    engine->own_begin_ = static_cast<VertexId>(engine->cluster_->bounds()[id]);
    engine->own_end_ =
        static_cast<VertexId>(engine->cluster_->bounds()[id + 1]);
    if (options.source_mirrors) {
      std::span<const uint64_t> b = engine->cluster_->bounds();
      engine->mirrors_ = std::make_unique<SourceMirrors>(
          transport, std::vector<uint64_t>(b.begin(), b.end()), id);
    }
    DMG_RETURN_IF_ERROR(engine->MeasureTransport());
  } else {
    engine->cluster_ =
        Cluster::Solo(transport, /*job=*/"", engine->num_vertices());
    // One compute node: the round trip alone (whether a small push is
    // worth two workers overlapping their round trips).
    DMG_ASSIGN_OR_RETURN(const double best,
                         BestRoundTripUs(engine->pool_->endpoint(0), 4));
    engine->transport_cost_.round_trip_us = best;
    engine->stats_.transport_rtt_us = best;
  }
  engine->stats_.cost_constants =
      coordinator::FormatCostConstants(options.cost_constants);
  DMG_RETURN_IF_ERROR(engine->Init());
  return engine;
}

Engine::Engine(transport::Transport& transport, RemoteGraph graph,
               std::unique_ptr<WorkerPool> pool, const EngineOptions& options)
    : transport_(transport),
      graph_(std::move(graph)),
      pool_(std::move(pool)),
      scheduler_(*pool_),
      options_(options),
      budget_(options.cache_bytes),
      planner_(
          CacheRequest{
              .capacity = options.cache_bytes,
              .policy = options.cache_policy,
              .threads = options.threads,
              .block_size = graph_.block_size(),
              .max_batch_bytes = options.batch_bytes,
              .prefetch_window = options.prefetch_window,
          },
          budget_) {}

Engine::~Engine() {
  // After a failure the job's regions stay on the memory nodes (kept for
  // a resume when it asked, else reclaimed when the connections close).
  if (progress_ != nullptr && !healthy()) progress_->Abandon();
  progress_.reset();
  if (healthy()) FreeLeftovers();
  // State arrays release their budget and regions before the caches go.
  states_.clear();
  source_.reset();
  if (barrier_ != nullptr && healthy()) {
    absl::Status s =
        transport_.FreeRegion(barrier_->region().node, barrier_->region().id);
    VLOG_IF(1, !s.ok()) << "freeing barrier region: " << s;
  }
}

absl::Status Engine::KeepState() {
  absl::StatusOr<transport::Transport::Kept> kept =
      transport_.KeepRegions(options_.keep_state_s);
  if (absl::IsUnimplemented(kept.status()) && !options_.resume) {
    return absl::OkStatus();  // in-process memory nodes: nothing to resume
  }
  if (!kept.ok()) return kept.status();
  // A process of the job that is still connected (one just killed whose
  // connections the memory node has not seen close yet, or one still
  // running) would write over what this one resumes.
  // (Two runs of one job at once would also share each other's regions.)
  DMG_ASSIGN_OR_RETURN(uint32_t older, OlderConnections(*kept));
  for (int wait = 0; older > 0 && wait < 30; ++wait) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    kept = transport_.KeepRegions(options_.keep_state_s);
    if (!kept.ok()) return kept.status();
    DMG_ASSIGN_OR_RETURN(older, OlderConnections(*kept));
  }
  if (older > 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "job '%s' is still connected to the memory nodes (%d connection(s)): "
        "another compute node runs it; %s",
        options_.job, older,
        options_.resume ? "stop it before resuming"
                        : "give this run another --job"));
  }
  for (uint32_t node = 0; node < transport_.num_memory_nodes(); ++node) {
    DMG_ASSIGN_OR_RETURN(std::vector<transport::RegionInfo> regions,
                         transport_.ListRegions(node));
    for (transport::RegionInfo& r : regions) {
      if (LeftByThisNode(r)) leftovers_.push_back(std::move(r));
    }
  }
  progress_ = std::make_unique<Progress>(
      transport_, num_vertices(), options_.job,
      compute_nodes() == 1 ? "progress"
                           : absl::StrFormat("progress.%d", compute_node()));
  progress_->Adopt(leftovers_);
  VLOG(1) << "job '" << options_.job << "': state kept " << kept->granted_s
          << " s after the process ends; " << leftovers_.size()
          << " region(s) of an earlier attempt";
  return absl::OkStatus();
}

absl::StatusOr<uint32_t> Engine::OlderConnections(
    const transport::Transport::Kept& kept) {
  if (compute_nodes() == 1) return kept.others;  // no other node's
  const std::vector<uint32_t>& mine = kept.others_by_node;
  if (mine.size() != transport_.num_memory_nodes()) {
    return absl::InternalError("the memory nodes' keep replies are missing");
  }
  DMG_ASSIGN_OR_RETURN(
      std::vector<std::string> all,
      PostToAll(std::string(reinterpret_cast<const char*>(mine.data()),
                            mine.size() * sizeof(uint32_t))));
  std::vector<uint32_t> least(mine.size(), ~uint32_t{0});
  for (const std::string& theirs : all) {
    if (theirs.size() != mine.size() * sizeof(uint32_t)) {
      return Fail(absl::DataLossError("malformed connection counts"));
    }
    for (size_t m = 0; m < mine.size(); ++m) {
      uint32_t x;
      std::memcpy(&x, theirs.data() + m * sizeof(x), sizeof(x));
      least[m] = std::min(least[m], x);
    }
  }
  return *std::max_element(least.begin(), least.end());
}

bool Engine::LeftByThisNode(const transport::RegionInfo& r) const {
  if (r.id == transport::kStoreRegion) return false;
  if (compute_nodes() == 1) return true;  // every region of the job
  if (cluster_->Allocated(r.node, r.id)) return false;  // this attempt's
  const std::string k = absl::StrCat(compute_node());
  const std::string progress = "progress." + k;
  if (r.name == progress || r.name.starts_with(progress + ".")) return true;
  const std::string job = "job." + options_.cluster.job + ".";
  if (r.name.starts_with(job))
    return r.name == job + "board." + k + ".0" ||
           r.name == job + "board." + k + ".1";
  if (r.name.starts_with("job.") || r.name.starts_with("progress.")) {
    return false;
  }
  // A state array's slice: NAME.BUFFER.NODE.
  const size_t dot = r.name.rfind('.');
  if (dot == std::string::npos || r.name.substr(dot + 1) != k) return false;
  const std::string rest = r.name.substr(0, dot);
  return rest.ends_with(".0") || rest.ends_with(".1");
}

absl::StatusOr<std::vector<std::string>> Engine::PostToAll(std::string mine) {
  DMG_ASSIGN_OR_RETURN(std::vector<Cluster::Received> all,
                       Fail(cluster_->Exchange(pool_->endpoint(0), mine)));
  std::vector<std::string> common;
  for (Cluster::Received& r : all) common.push_back(std::move(r.common));
  return common;
}

void Engine::FreeLeftovers() {
  for (const transport::RegionInfo& r : leftovers_) {
    absl::Status s = transport_.FreeRegion(r.node, r.id);
    VLOG_IF(1, !s.ok()) << "freeing " << r.name << ": " << s;
  }
  leftovers_.clear();
}

uint64_t Engine::Signature() const {
  // FNV-1a over what the run computes and what it keeps.
  uint64_t h = 0xcbf29ce484222325ULL;
  auto mix = [&h](const void* p, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      h = (h ^ static_cast<const uint8_t*>(p)[i]) * 0x100000001b3ULL;
    }
  };
  auto mix64 = [&](uint64_t x) { mix(&x, sizeof(x)); };
  mix64(options_.signature);
  mix64(num_vertices());
  mix64(num_arcs());
  mix64(graph_.superblock_crc());
  if (compute_nodes() > 1) {
    // Each node's slices of the state arrays are its vertex range's.
    for (uint64_t b : cluster_->bounds()) mix64(b);
  }
  for (const auto& a : states_) {
    mix(a->name().data(), a->name().size());
    mix64(a->elem_size());
  }
  for (const Progress::Carried& c : carried_) {
    mix(c.name.data(), c.name.size());
    mix64(c.bytes);
    mix64(c.frontier != nullptr);
  }
  return h;
}

absl::StatusOr<bool> Engine::Resume() {
  if (resume_asked_ || open_ || superstep_ > 0 || placed_ > 0) {
    // A second program on one engine (tests) is never resumed.
    if (options_.resume) {
      return absl::FailedPreconditionError(
          "Resume is called once, before the program's first operation");
    }
    carried_.clear();
    return false;
  }
  resume_asked_ = true;
  if (progress_ == nullptr) return false;
  transport::Endpoint& ep = pool_->endpoint(0);
  const uint64_t signature = Signature();
  int done = 0;
  if (options_.resume) {
    // With several compute nodes, the last superstep every node completed:
    // its version is whole in every node's slices (a node records a
    // superstep before the barrier that lets any node begin the next, so
    // none has written over the one before).
    int at = -1;
    if (compute_nodes() > 1) {
      DMG_ASSIGN_OR_RETURN(const int mine,
                           Fail(progress_->Completed(ep, signature)));
      DMG_ASSIGN_OR_RETURN(std::vector<std::string> all,
                           PostToAll(absl::StrCat(mine)));
      for (const std::string& theirs : all) {
        int x = 0;
        if (!absl::SimpleAtoi(theirs, &x)) {
          return Fail(absl::DataLossError("malformed superstep count"));
        }
        at = at < 0 ? x : std::min(at, x);
      }
    }
    DMG_ASSIGN_OR_RETURN(
        done, Fail(progress_->TakeOver(ep, signature, carried_, at)));
  }
  if (done == 0) {
    LOG_IF(INFO, options_.resume)
        << "job '" << options_.job
        << "' completed no superstep before: starting from the beginning";
    FreeLeftovers();  // an earlier attempt's state is not used
    DMG_RETURN_IF_ERROR(Fail(progress_->Start(ep, signature, carried_)));
    return false;
  }
  version_ = done;
  superstep_ = progress_->resumed_superstep();
  version_superstep_ = superstep_;
  resumed_from_ = superstep_;
  std::vector<StateArrayBase*> arrays;
  for (const auto& a : states_) arrays.push_back(a.get());
  placed_ = states_.size();
  DMG_RETURN_IF_ERROR(Fail(PlaceStates(arrays, /*adopt=*/true)));
  FreeLeftovers();  // what the resumed superstep does not need
  LOG(INFO) << "job '" << options_.job << "' resumes after superstep "
            << superstep_ << " (attempt " << progress_->epoch() << ")";
  return true;
}

absl::Status Engine::Init() {
  if (options_.keep_state_s > 0 || options_.resume) {
    DMG_RETURN_IF_ERROR(KeepState());
  }
  taking_.assign(threads(), 0);
  work_range_.assign(threads(), {own_begin_, own_end_});
  for (int d = 0; d < 2; ++d) {
    std::span<const DirectoryEntry> dir =
        graph_.directory(static_cast<Direction>(d));
    all_units_[d] = MakeAllUnits(dir, buffers_.batch_bytes);
    touched_[d].assign(dir.size(), 0);
    // The blocks holding a vertex of each node's range (a block across a
    // range boundary is read by both nodes, each taking its vertices).
    const std::span<const uint64_t> bounds = cluster_->bounds();
    node_units_[d].assign(compute_nodes(), {});
    node_work_[d].assign(compute_nodes(), 0.0);
    for (int node = 0; node < compute_nodes(); ++node) {
      std::vector<uint32_t> theirs;
      for (uint32_t i = 0; i < dir.size(); ++i) {
        const uint64_t first = dir[i].first_vertex;
        const uint64_t end = first + std::max<uint32_t>(dir[i].vertex_count, 1);
        if (first < bounds[node + 1] && end > bounds[node]) {
          theirs.push_back(i);
          node_work_[d][node] +=
              static_cast<double>(store::EntryEdges(dir, i, num_arcs())) +
              workload::kVertexCost * dir[i].vertex_count;
        }
      }
      node_units_[d][node] = MakeUnits(dir, theirs, buffers_.batch_bytes);
    }
    own_units_[d] = node_units_[d][compute_node()];
  }
  if (options_.cache_policy == CachePolicy::kPageLru) {
    const uint64_t bytes = planner_.PageCacheBytes(
        graph_.image_bytes() + num_vertices() * 32 + (64 << 20));
    if (bytes == 0) {
      return absl::InvalidArgumentError("cache too small for any pages");
    }
    page_cache_ = std::make_unique<PageCache>(bytes / PageCache::kPageBytes,
                                              threads(), /*read_ahead=*/64);
    source_ =
        std::make_unique<PageLruBlockSource>(graph_, *pool_, *page_cache_);
  } else {
    source_ = std::make_unique<GraphAwareBlockSource>(
        graph_, *pool_, buffers_.batch_bytes, buffers_.prefetch_window);
  }
  if (compute_nodes() == 1) {
    // Several compute nodes meet in their exchanges instead.
    DMG_ASSIGN_OR_RETURN(transport::RegionInfo counter,
                         transport_.AllocateRegion(0, 64, "barrier"));
    barrier_ = std::make_unique<Barrier>(counter, /*nodes=*/1);
  }
  stats_.transport = transport_.name();
  stats_.threads = threads();
  stats_.vertices = num_vertices();
  stats_.arcs = num_arcs();
  stats_.directory_bytes = graph_.directory_bytes();
  stats_.cache_policy = CachePolicyName(options_.cache_policy);
  stats_.cache_capacity_bytes = budget_.unlimited() ? 0 : budget_.capacity();
  stats_.compute_nodes = compute_nodes();
  stats_.job = cluster_->job();
  return absl::OkStatus();
}

StateContext Engine::state_context() {
  return StateContext{
      .pool = pool_.get(),
      .scheduler = &scheduler_,
      .transport = &transport_,
      .budget = &budget_,
      // Versions, not supersteps: between checkpoints an array sees one
      // long superstep.
      .superstep = &version_,
      .healthy = [this] { return healthy(); },
      .bounds = compute_nodes() > 1
                    ? std::vector<uint64_t>(cluster_->bounds().begin(),
                                            cluster_->bounds().end())
                    : std::vector<uint64_t>(),
      .node = compute_node(),
      .exchange =
          [this](std::string mine) -> absl::StatusOr<std::vector<std::string>> {
        DMG_ASSIGN_OR_RETURN(std::vector<Cluster::Received> all,
                             cluster_->Exchange(pool_->endpoint(0), mine));
        std::vector<std::string> common;
        for (Cluster::Received& r : all) common.push_back(std::move(r.common));
        return common;
      },
  };
}

Frontier Engine::FrontierOf(VertexId v) const {
  Frontier f = NewFrontier();
  f.Add(0, v);
  f.Seal();
  return f;
}

absl::Status Engine::Fail(absl::Status s) {
  if (!s.ok() && !failed_) {
    failed_ = true;
    if (absl::IsNotFound(s)) s = cluster_->Diagnose(s);
    // The others stop with this node's error instead of waiting for it.
    cluster_->Abort(pool_->endpoint(0), s);
  }
  return s;
}

absl::Status Engine::MeasureTransport() {
  // What the update coordinator weighs updates with: the best of a few
  // 8-byte READs (a round trip) on every node, and the bandwidth of a
  // 128 KiB READ of the store on node 0 alone. Every node must decide
  // alike, so all take the mean round trip and node 0's bandwidth: the
  // probe's bytes count in the job's figures, and N nodes each reading
  // megabytes to learn one figure had cost a road-NY BFS on 2 nodes a
  // fifth of its bytes. 128 KiB still takes a few round trips' time on
  // every transport (tcp loopback ~110 us against ~50 us). Each node also
  // posts its host, cores and threads (shared_cores_).
  transport::Endpoint& ep = pool_->endpoint(0);
  DMG_ASSIGN_OR_RETURN(const double best, BestRoundTripUs(ep, 8));
  struct Sample {
    coordinator::TransportCost cost;
    uint64_t host;
    double cores, threads;
  };
  Sample mine{{best, 0},
              HostId(),
              options_.usable_cores > 0 ? options_.usable_cores : UsableCores(),
              static_cast<double>(threads())};
  if (compute_node() == 0) {
    // The better of two: the first READ of the store's pages came out
    // 2x (embedded) to 7x (tcp loopback) slower than the next. A third
    // READ was 128 KiB more, a fifth of node 0's bytes in a road-NY BFS on
    // 4 nodes, for a figure that is noisy either way where the nodes share
    // two cores (tcp loopback, 4 nodes: 430-1,230 bytes/us the better of
    // two, 590-2,200 the best of three; embedded 1,750-3,060).
    DMG_ASSIGN_OR_RETURN(
        mine.cost.bytes_per_us,
        BestBandwidth(ep, std::min<uint64_t>(128 << 10, graph_.store_bytes(0)),
                      /*reads=*/2, best));
  }
  std::string post(reinterpret_cast<const char*>(&mine), sizeof(mine));
  DMG_ASSIGN_OR_RETURN(std::vector<Cluster::Received> all,
                       cluster_->Exchange(ep, post));
  coordinator::TransportCost cost{0, 0};
  workload::SharedCores shared;
  std::vector<uint64_t> hosts;
  for (size_t k = 0; k < all.size(); ++k) {
    Sample c;
    if (all[k].common.size() != sizeof(c)) {
      return absl::DataLossError("malformed transport sample");
    }
    std::memcpy(&c, all[k].common.data(), sizeof(c));
    cost.round_trip_us += c.cost.round_trip_us / all.size();
    if (k == 0) cost.bytes_per_us = c.cost.bytes_per_us;
    const auto at = std::find(hosts.begin(), hosts.end(), c.host);
    shared.host.push_back(static_cast<int>(at - hosts.begin()));
    if (at == hosts.end()) {
      hosts.push_back(c.host);
      shared.cores.push_back(c.cores);
    }
    shared.threads.push_back(std::max(1.0, c.threads));
    double& cores = shared.cores[shared.host.back()];
    cores = std::max(1.0, std::min(cores, c.cores));
  }
  transport_cost_ = cost;
  shared_cores_ = std::move(shared);
  stats_.transport_rtt_us = transport_cost_.round_trip_us;
  stats_.transport_bytes_per_us = transport_cost_.bytes_per_us;
  return absl::OkStatus();
}

std::pair<uint64_t, uint64_t> Engine::OwnPages(const StateArrayBase& a) const {
  const uint64_t page = StateArrayBase::kPageBytes;
  return {
      own_begin_ * a.elem_size() / page,
      own_end_ == num_vertices() ? a.pages() : own_end_ * a.elem_size() / page};
}

int Engine::OwnerOf(VertexId v) const {
  std::span<const uint64_t> b = cluster_->bounds();
  return static_cast<int>(std::upper_bound(b.begin() + 1, b.end() - 1, v) -
                          (b.begin() + 1));
}

absl::Status Engine::PutCollectiveHeader(bool prewrite, MessageWriter& out) {
  // Whether changes are left to write after the exchange, and whether every
  // array of this node is clean (StateArrayBase::Prewrite).
  bool held = false, clean = prewrite && !atomic_in_step_;
  for (size_t i = 0; i < placed_; ++i) {
    if (prewrite) {
      DMG_ASSIGN_OR_RETURN(const StateArrayBase::Prewritten p,
                           Fail(states_[i]->Prewrite()));
      held = held || p.held;
      clean = clean && p.clean;
    } else {
      held = true;
    }
  }
  // Varints: every other node READs this header at every collective (a
  // road-NY BFS on 4 nodes has ~770), and most of its figures are small or
  // 0 (129 bytes as fixed words, ~25 as varints).
  std::string& bytes = out.bytes();
  for (uint64_t x : {collectives_, static_cast<uint64_t>(superstep_),
                     static_cast<uint64_t>(placed_), decisions_}) {
    PutVarint(bytes, x);
  }
  out.Put<uint8_t>((held ? 1 : 0) | (clean ? 2 : 0));
  // This node's measured share of its last dense scans, its push figures
  // and its steal prices (stage 2's inputs).
  for (uint64_t ns : own_scan_ns_) PutVarint(bytes, ns);
  for (uint64_t x :
       {own_push_.arcs, own_push_.remote, own_push_.sent, own_push_.apply_ps}) {
    PutVarint(bytes, x);
  }
  for (int kind = 0; kind < 3; ++kind) {
    PutVarint(bytes, own_steal_.own_ps[kind]);
    PutVarint(bytes, own_steal_.taken_ps[kind]);
  }
  // Each array's changed lines (not pages: a page of 1,024 labels with one
  // changed costs the others 64 bytes, not 4 KiB), as a set: a bitmap or
  // varint gaps, whichever is smaller (a BFS level's few hundred scattered
  // lines take a byte or two each, not 16 a run).
  std::vector<bool> changed(placed_, false);
  for (size_t i = 0; i < placed_; ++i) {
    DMG_RETURN_IF_ERROR(Fail(states_[i]->error()));
    std::span<const uint64_t> lines = states_[i]->DirtyLineWords();
    wire::PutVertexSet(out.bytes(), lines);
    changed[i] = std::any_of(lines.begin(), lines.end(),
                             [](uint64_t w) { return w != 0; });
  }
  return PutMirrorItems(changed, out);
}

absl::Status Engine::PutMirrorItems(const std::vector<bool>& changed,
                                    MessageWriter& out) {
  if (mirrors_ == nullptr) {
    PutVarint(out.bytes(), 0);
    return absl::OkStatus();
  }
  for (size_t i = 0; i < placed_; ++i) {
    if (states_[i]->TakeFilteredBatch() && armed_sources_ >= 0) {
      mirrors_->Want(i, armed_sources_);
    }
    if (states_[i]->TakeMirrorWasted()) mirrors_->Drop(i);
  }
  std::vector<StateArrayBase*> arrays(placed_);
  for (size_t i = 0; i < placed_; ++i) arrays[i] = states_[i].get();
  return Fail(mirrors_->Put(pool_->endpoint(0), superstep_, arrays, changed,
                            out.bytes()));
}

absl::Status Engine::TakeCollectiveHeader(int k, std::string& post,
                                          CollectivePosts& posts) {
  MessageReader in(post);
  uint64_t where[4] = {0, 0, 0, 0};
  uint8_t held_there = 0;
  uint64_t shares[2] = {0, 0};
  push_figures_.resize(compute_nodes());
  PushFigures& f = push_figures_[k];
  steal_figures_.resize(compute_nodes());
  StealFigures& g = steal_figures_[k];
  std::string_view& rest = in.rest();
  bool ok = GetVarint(rest, &where[0]) && GetVarint(rest, &where[1]) &&
            GetVarint(rest, &where[2]) && GetVarint(rest, &where[3]) &&
            in.Get(&held_there) && GetVarint(rest, &shares[0]) &&
            GetVarint(rest, &shares[1]) && GetVarint(rest, &f.arcs) &&
            GetVarint(rest, &f.remote) && GetVarint(rest, &f.sent) &&
            GetVarint(rest, &f.apply_ps);
  for (int kind = 0; kind < 3; ++kind) {
    ok = ok && GetVarint(rest, &g.own_ps[kind]) &&
         GetVarint(rest, &g.taken_ps[kind]);
  }
  if (!ok) {
    return Fail(absl::DataLossError(
        absl::StrFormat("compute node %d posted a malformed header", k)));
  }
  for (int kind = 0; kind < 2; ++kind) {
    scan_ns_[kind].resize(compute_nodes(), 0);
    scan_ns_[kind][k] = shares[kind];
  }
  posts.any_held = posts.any_held || (held_there & 1) != 0;
  posts.all_clean = posts.all_clean && (held_there & 2) != 0;
  if (where[0] != collectives_ ||
      where[1] != static_cast<uint64_t>(superstep_) || where[2] != placed_ ||
      where[3] != decisions_) {
    return Fail(absl::InternalError(absl::StrFormat(
        "compute nodes disagree: node %d is at collective %d of superstep "
        "%d with %d state arrays (decisions %x), node %d at %d of %d with "
        "%d (%x)",
        k, where[0], where[1], where[2], where[3], compute_node(), collectives_,
        superstep_, placed_, decisions_)));
  }
  std::vector<LineRun>& refresh = posts.refresh;
  const bool own = k == compute_node();
  std::vector<bool> changed(placed_, false);
  for (size_t i = 0; i < placed_; ++i) {
    // Runs of consecutive changed lines (of its own post, only whether
    // there are any).
    const size_t from = refresh.size();
    bool any = false;
    auto add = [&](VertexId line) {
      any = true;
      if (own) return;
      if (refresh.size() > from &&
          refresh.back().first + refresh.back().count == line) {
        ++refresh.back().count;
      } else {
        refresh.push_back({i, line, 1});
      }
    };
    if (!wire::GetVertexSet(in.rest(), states_[i]->lines(), add)) {
      return Fail(absl::DataLossError(absl::StrFormat(
          "compute node %d posted malformed state changes (array '%s', "
          "array %d of %d, or a line beyond it)",
          k, states_[i]->name(), i, placed_)));
    }
    (own ? posts.own_changes : posts.others_changed) |= any;
    changed[i] = any;
  }
  if (mirrors_ != nullptr) {
    DMG_RETURN_IF_ERROR(Fail(mirrors_->Take(k, superstep_, rest, changed)));
  } else if (uint64_t items = 0; !GetVarint(rest, &items) || items != 0) {
    return Fail(absl::DataLossError(absl::StrFormat(
        "compute node %d posted source-mirror items this node does not take "
        "(--source_mirrors differs between nodes?)",
        k)));
  }
  // What is left is the operation's own part.
  const size_t used = post.size() - in.remaining();
  post.erase(0, used);
  return absl::OkStatus();
}

absl::Status Engine::PublishCollective(const CollectivePosts& posts) {
  bool any_changes = posts.others_changed || posts.own_changes;
  if (any_changes) {
    std::vector<uint64_t> pages;
    for (size_t i = 0; i < placed_; ++i) {
      pages.clear();
      DMG_RETURN_IF_ERROR(Fail(states_[i]->Publish(pages)));
    }
    // Every change was written before its node posted: the exchange said
    // so, and nothing is left to wait for.
    if (posts.any_held) {
      DMG_RETURN_IF_ERROR(
          Fail(cluster_->Exchange(pool_->endpoint(0), "written").status()));
    }
  } else {
    // What Publish does besides writing: paged arrays unpin their pages.
    for (size_t i = 0; i < placed_; ++i) {
      if (!states_[i]->resident()) states_[i]->ReleasePins();
    }
  }
  return absl::OkStatus();
}

absl::Status Engine::RefreshOthersLines(std::vector<LineRun>& refresh) {
  // Resident copies note the others' lines (lazy refresh, FetchPending);
  // paged ones forget their pages: many short runs, a few batches per
  // worker, one flush each.
  size_t kept = 0;
  for (const LineRun& r : refresh) {
    if (states_[r.array]->resident()) {
      states_[r.array]->MarkPending(r.first, r.count);
    } else {
      refresh[kept++] = r;
    }
  }
  refresh.resize(kept);
  const uint64_t grain = std::max<uint64_t>(
      1, refresh.size() / (4 * static_cast<uint64_t>(threads())));
  return Fail(scheduler_.ForRanges(
      refresh.size(), grain, [&](int w, uint64_t begin, uint64_t end) {
        for (uint64_t j = begin; j < end; ++j) {
          states_[refresh[j].array]->RefreshLines(w, refresh[j].first,
                                                  refresh[j].count);
        }
        return pool_->endpoint(w).Flush();
      }));
}

absl::StatusOr<std::vector<Cluster::Received>> Engine::Collective(
    std::string common, std::span<const std::string> to,
    const PublishTest& publish_now, bool prewrite) {
  if (compute_nodes() == 1) {
    // Nothing to publish or check: the post comes back as it is.
    std::vector<Cluster::Received> one(1);
    one[0].common = std::move(common);
    if (!to.empty()) one[0].mine = to[0];
    return one;
  }
  // Where this node is in the program: every node must be at the same
  // collective of the same superstep (a difference is a bug, or a program
  // whose control flow depends on one node's view; caught here, not later
  // as wrong answers).
  ++collectives_;
  SetBarrierReady(false);
  // The operation is over: accessors check for pending lines again.
  for (size_t i = 0; i < placed_; ++i) states_[i]->ResumeChecks();
  MessageWriter out;
  DMG_RETURN_IF_ERROR(PutCollectiveHeader(prewrite, out));
  out.bytes().append(common);
  DMG_ASSIGN_OR_RETURN(
      std::vector<Cluster::Received> all,
      Fail(cluster_->Exchange(pool_->endpoint(0), out.bytes(), to)));
  // The others' changes: READ into resident copies, forgotten by the page
  // cache; one batch per worker.
  CollectivePosts posts;
  for (int k = 0; k < compute_nodes(); ++k) {
    DMG_RETURN_IF_ERROR(TakeCollectiveHeader(k, all[k].common, posts));
  }
  // Every node has finished the operation (it posted), so nobody reads the
  // slices for it any more: now the changes are written, and once every
  // node has written (a second exchange) they are read. Writing before the
  // first exchange would let a node that is ahead overwrite pages a slow
  // node is still reading for the operation before. When no node changed
  // anything (every post says so), there is nothing to write or wait for.
  // Left for the next collective: the lines stay dirty (posted again), and
  // nobody notes lines not written yet.
  if (publish_now && !publish_now(all)) return all;
  DMG_RETURN_IF_ERROR(PublishCollective(posts));
  // Every node's pages are whole in the open buffer: if the superstep ends
  // now, this was its barrier.
  SetBarrierReady(posts.all_clean);
  DMG_RETURN_IF_ERROR(RefreshOthersLines(posts.refresh));
  return all;
}

namespace {

// A part's form: its members follow, or only their count does.
constexpr uint8_t kMembersPosted = 0;
constexpr uint8_t kMembersCounted = 1;
// The known-mask's bit for a posted count (bits 0 and 1: the sums).
constexpr uint8_t kCountPosted = 4;

// A bitmap or ascending gaps, whichever is smaller (wire_codec.h). A small
// frontier's extent comes from its list, not a scan of the bitmap.
void PutMembers(std::string& out, const Frontier& local) {
  std::span<const VertexId> vs = local.vertices();
  std::span<const uint64_t> words = local.words();
  if (vs.size() * 8 > words.size() || !local.sealed()) {
    wire::PutVertexSet(out, words);
  } else if (vs.empty()) {  // often: a step's second exchange
    wire::PutVertexSet(out, words, 0, 0, 0);
  } else {
    const auto [lo, hi] = std::minmax_element(vs.begin(), vs.end());
    wire::PutVertexSet(out, words, vs.size(), *lo >> 6, (*hi >> 6) + 1);
  }
}

}  // namespace

bool Engine::CountedParts() const {
  // (Alike on every node: the same options, and progress is recorded on
  // all or none.)
  return options_.counted_parts && compute_nodes() > 1 && progress_ == nullptr;
}

void Engine::PutFrontier(MessageWriter& out, const Frontier& local,
                         const Frontier* skip, bool may_count) const {
  // The members' degrees, summed here from this node's own headers. A
  // large part (a bottom-up level's: ~225,000 members a node on kron:20)
  // is not summed: that would be a degree lookup a member at every such
  // level, where the rule that keeps pulling mostly needs no sum, and the
  // exchange that gathers sums when a choice does is one round.
  constexpr size_t kSummedMembers = 16384;
  std::span<const VertexId> vs = local.vertices();
  bool mine =
      compute_nodes() > 1 && local.sealed() && vs.size() <= kSummedMembers;
  uint64_t count = 0;
  for (size_t i = 0; mine && i < vs.size(); ++i) {
    if (skip != nullptr && skip->Contains(vs[i])) continue;
    mine = Owns(vs[i]);  // not so for an atomic push's part
    ++count;
  }
  const bool counted = mine && may_count && count > 0 && CountedParts();
  out.Put<uint8_t>(counted ? kMembersCounted : kMembersPosted);
  if (!counted && skip != nullptr && local.sealed() && count < vs.size()) {
    // Not those posted before: with that part counted, a reader holding
    // them now would count them twice.
    Frontier rest = NewFrontier();
    for (VertexId v : vs) {
      if (!skip->Contains(v)) rest.AddExclusive(0, v);
    }
    rest.Seal();
    PutMembers(out.bytes(), rest);
  } else if (!counted) {
    PutMembers(out.bytes(), local);
  }
  uint8_t known = mine ? kCountPosted : 0;
  uint64_t sums[2] = {0, 0};
  for (int k = 0; mine && k < 2; ++k) {
    const HeaderCache* h = headers_[k].get();
    if (h == nullptr) continue;
    for (VertexId v : vs) {
      if (skip == nullptr || !skip->Contains(v)) sums[k] += h->Degree(v);
    }
    known |= 1 << k;
  }
  out.Put<uint8_t>(known);
  for (int k = 0; k < 2; ++k) {
    if (known & (1 << k)) out.Put<uint64_t>(sums[k]);
  }
  if (known & kCountPosted) out.Put<uint64_t>(count);
}

absl::Status Engine::TakeFrontier(MessageReader& in, int node, Frontier* global,
                                  PostedSums& sums, const Frontier* mine) {
  // One thread decodes: plain stores (AddExclusive still skips members
  // that two nodes posted); a bitmap part a word at a time.
  uint8_t form = 0, known = 0;
  bool ok =
      in.Get(&form) && (form == kMembersPosted || form == kMembersCounted);
  if (ok && form == kMembersPosted) {
    ok = global == nullptr
             ? wire::GetVertexSetWords(
                   in.rest(), num_vertices(), [](VertexId) {},
                   [](uint64_t, const char*, uint64_t) {})
             : wire::GetVertexSetWords(
                   in.rest(), num_vertices(),
                   [&](VertexId v) { global->AddExclusive(0, v); },
                   [&](uint64_t first, const char* words, uint64_t n) {
                     global->AppendWords(first, words, n);
                   });
  }
  ok = ok && in.Get(&known);
  for (int k = 0; ok && k < 2; ++k) {
    uint64_t sum = 0;
    if (!(known & (1 << k))) {
      sums.known[k] = false;
    } else if ((ok = in.Get(&sum))) {
      sums.edges[k][node] += sum;
    }
  }
  uint64_t count = 0;
  if (ok && (known & kCountPosted)) {
    ok = in.Get(&count);
    sums.members[node] += count;
  } else {
    sums.counted = false;
  }
  // A counted part is only ever posted with its count.
  ok = ok && (form == kMembersPosted || (known & kCountPosted));
  if (!ok) {
    return Fail(absl::DataLossError(absl::StrFormat(
        "compute node %d posted a malformed frontier (or a vertex beyond "
        "the graph)",
        node)));
  }
  if (form == kMembersCounted) {
    sums.any_counted = true;
    if (global == nullptr) {
      // (The caller adds this part's members.)
    } else if (node != compute_node()) {
      global->AddElsewhere(count);
    } else if (mine != nullptr) {
      global->Merge(*mine);
    } else {
      return Fail(absl::InternalError("this node's counted part is missing"));
    }
  }
  return absl::OkStatus();
}

Engine::PostedSums Engine::NewPostedSums() const {
  PostedSums sums;
  for (int k = 0; k < 2; ++k) sums.edges[k].assign(compute_nodes(), 0);
  sums.members.assign(compute_nodes(), 0);
  return sums;
}

void Engine::KeepSums(Frontier& global, const PostedSums& sums) {
  // Partial on every node alike, this one's part counted or not.
  if (sums.any_counted) global.AddElsewhere(0);
  FrontierSums& f = frontier_sums_;
  f.epoch = global.epoch();
  f.size = global.size();
  for (int k = 0; k < 2; ++k) {
    f.known[k] = sums.known[k] && headers_[k] != nullptr;
    f.cover[k] = kAllEdges;
    f.edges[k] = sums.edges[k];
  }
  f.counted = sums.counted;
  f.members = sums.members;
}

const std::vector<uint64_t>* Engine::PostedMembers(
    const Frontier& frontier) const {
  const FrontierSums& f = frontier_sums_;
  if (f.epoch != frontier.epoch() || f.size != frontier.size() || !f.counted) {
    return nullptr;
  }
  return &f.members;
}

absl::Status Engine::Union(Frontier& into, const Frontier& other) {
  const bool partial = !into.whole() || !other.whole();
  into.Merge(other);
  if (!partial) return absl::OkStatus();
  // Each node holds its own members of both: it counts those of the union.
  uint64_t mine = 0;
  for (VertexId v : into.vertices()) mine += Owns(v) ? 1 : 0;
  MessageWriter out;
  out.Put(mine);
  DMG_ASSIGN_OR_RETURN(
      std::vector<Cluster::Received> all,
      Fail(cluster_->Exchange(pool_->endpoint(0), out.bytes())));
  FrontierSums counts;
  counts.counted = true;
  counts.members.assign(compute_nodes(), 0);
  uint64_t total = 0;
  for (int k = 0; k < compute_nodes(); ++k) {
    MessageReader in(all[k].common);
    if (!in.Get(&counts.members[k])) {
      return Fail(absl::DataLossError("malformed frontier count"));
    }
    total += counts.members[k];
  }
  into.SetTotal(total);
  // (No degree sums: a choice that needs them gathers them.)
  counts.epoch = into.epoch();
  counts.size = into.size();
  frontier_sums_ = std::move(counts);
  return absl::OkStatus();
}

absl::Status Engine::WholeForPull(const Frontier& frontier) {
  if (frontier.whole()) return absl::OkStatus();
  return Fail(absl::InternalError(
      "a pull step was given a frontier without the other nodes' members"));
}

absl::StatusOr<Frontier> Engine::CompleteFrontier(const Frontier& partial) {
  Frontier own = NewFrontier();
  for (VertexId v : partial.vertices()) {
    if (Owns(v)) own.AddExclusive(0, v);
  }
  own.Seal();
  // A bare exchange, as EnsureFrontierSums's: it carries no state.
  MessageWriter out;
  PutMembers(out.bytes(), own);
  DMG_ASSIGN_OR_RETURN(
      std::vector<Cluster::Received> all,
      Fail(cluster_->Exchange(pool_->endpoint(0), out.bytes())));
  Frontier whole = NewFrontier();
  for (int k = 0; k < compute_nodes(); ++k) {
    MessageReader in(all[k].common);
    if (!wire::GetVertexSetWords(
            in.rest(), num_vertices(),
            [&](VertexId v) { whole.AddExclusive(0, v); },
            [&](uint64_t first, const char* words, uint64_t n) {
              whole.AppendWords(first, words, n);
            })) {
      return Fail(absl::DataLossError(absl::StrFormat(
          "compute node %d posted malformed frontier members", k)));
    }
  }
  whole.Seal();
  if (whole.size() != partial.size()) {
    return Fail(absl::InternalError(
        absl::StrFormat("a frontier counted %d members and its parts hold %d",
                        partial.size(), whole.size())));
  }
  ++completed_frontiers_;
  // The same members: what was posted for the partial one holds.
  if (frontier_sums_.epoch == partial.epoch()) {
    frontier_sums_.epoch = whole.epoch();
  }
  return whole;
}

const std::vector<uint64_t>* Engine::Sums(const Frontier& frontier, int k,
                                          uint64_t upto) const {
  const FrontierSums& f = frontier_sums_;
  if (f.epoch != frontier.epoch() || f.size != frontier.size() || !f.known[k] ||
      f.cover[k] < upto) {
    return nullptr;
  }
  return &f.edges[k];
}

absl::Status Engine::EnsureFrontierSums(const Frontier& frontier, Direction d,
                                        uint64_t upto) {
  d = Stored(d);
  const int k = static_cast<int>(d);
  const HeaderCache* h = headers(d);
  // Without headers every choice takes the average degree (alike on every
  // node: all were granted alike).
  if (upto == 0 || compute_nodes() == 1 || h == nullptr ||
      Sums(frontier, k, upto) != nullptr) {
    return absl::OkStatus();
  }
  uint64_t mine = 0;
  uint8_t stopped = 0;
  for (VertexId v : frontier.vertices()) {
    if (!Owns(v)) continue;
    mine += h->Degree(v);
    if (upto != kAllEdges && mine > upto) {
      stopped = 1;  // the sum is past what any choice compares it with
      break;
    }
  }
  // A bare exchange, not a collective: it carries no state (an atomic
  // push's touched lines, say, wait for the operation's own collective).
  MessageWriter out;
  out.Put(mine);
  out.Put(stopped);
  DMG_ASSIGN_OR_RETURN(
      std::vector<Cluster::Received> all,
      Fail(cluster_->Exchange(pool_->endpoint(0), out.bytes())));
  PostedSums sums = NewPostedSums();
  bool any_stopped = false;
  for (int n = 0; n < compute_nodes(); ++n) {
    MessageReader in(all[n].common);
    if (!in.Get(&sums.edges[k][n]) || !in.Get(&stopped)) {
      return Fail(absl::DataLossError("malformed frontier degrees"));
    }
    any_stopped |= stopped != 0;
  }
  FrontierSums& f = frontier_sums_;
  if (f.epoch != frontier.epoch() || f.size != frontier.size()) {
    f = FrontierSums{};
    f.epoch = frontier.epoch();
    f.size = frontier.size();
  }
  f.known[k] = true;
  f.cover[k] = any_stopped ? upto : kAllEdges;
  f.edges[k] = std::move(sums.edges[k]);
  return absl::OkStatus();
}

absl::StatusOr<Frontier> Engine::MergeFrontier(Frontier local) {
  if (compute_nodes() == 1) return local;  // nothing to merge
  MessageWriter out;
  PutFrontier(out, local, nullptr, /*may_count=*/true);
  DMG_ASSIGN_OR_RETURN(std::vector<Cluster::Received> all,
                       Collective(out.Take()));
  Frontier global = NewFrontier();
  PostedSums sums = NewPostedSums();
  for (int k = 0; k < compute_nodes(); ++k) {
    MessageReader in(all[k].common);
    if (k == compute_node() && local.sealed() &&
        local.size() * 8 > local.words().size()) {
      // This node's own part, when dense: the words it posted, in the order
      // a decoder of its post adds them, without decoding (its sums are
      // still read, past the part).
      std::span<const uint64_t> words = local.words();
      global.AppendWords(0, words.data(), words.size());
      DMG_RETURN_IF_ERROR(TakeFrontier(in, k, nullptr, sums));
      continue;
    }
    DMG_RETURN_IF_ERROR(TakeFrontier(in, k, &global, sums, &local));
  }
  global.Seal();
  KeepSums(global, sums);
  return global;
}

absl::Status Engine::PlaceStates(std::span<StateArrayBase* const> arrays,
                                 bool adopt) {
  std::vector<StateRequest> requests;
  for (StateArrayBase* a : arrays) requests.push_back({a->bytes(), a->hint()});
  std::vector<bool> resident = planner_.PlaceStates(requests);
  // Claim filters of paged kClaimed arrays come out of the bound before the
  // page cache takes what is left (graph-aware, one compute node; with
  // room for the page minimum beside them). A resumed job reads the bits
  // from the version it adopts.
  std::vector<uint64_t> filter_bytes(arrays.size(), 0);
  const bool dear = RoundTripsDear();
  for (size_t i = 0; i < arrays.size(); ++i) {
    // And its log: a few entries where round trips are cheap (a full log
    // pages claims in; only dear round trips commit early for it).
    const uint64_t bits = dear ? arrays[i]->ClaimFilterBytes()
                               : arrays[i]->LeanClaimFilterBytes();
    if (!resident[i] && page_cache_ == nullptr &&
        arrays[i]->hint() == CacheHint::kClaimed &&
        options_.cache_policy == CachePolicy::kGraphAware &&
        compute_nodes() == 1 &&
        budget_.available() >= bits + planner_.minimum_page_bytes() &&
        budget_.TryReserve(bits)) {
      filter_bytes[i] = bits;
    }
  }
  for (size_t i = 0; i < arrays.size(); ++i) {
    PageCache* cache = nullptr;
    if (!resident[i] && options_.cache_policy == CachePolicy::kFam) {
      return Fail(absl::InvalidArgumentError(absl::StrFormat(
          "--cache_policy=fam keeps all vertex state local: state '%s' (%d "
          "bytes) does not fit in the %d bytes the cache bound leaves; raise "
          "the bound",
          arrays[i]->name(), arrays[i]->bytes(), budget_.available())));
    }
    if (!resident[i]) {
      if (page_cache_ == nullptr) {
        // Unbounded graph-aware jobs never page; the figure is a fallback.
        const uint64_t bytes = planner_.PageCacheBytes(num_vertices() * 32);
        if (bytes == 0) {
          return absl::ResourceExhaustedError(
              "no room left in the cache for vertex state; raise the cache "
              "bound");
        }
        // Read-ahead ramps up where round trips are cheap (PageCache).
        page_cache_ = std::make_unique<PageCache>(bytes / PageCache::kPageBytes,
                                                  threads(), /*read_ahead=*/64,
                                                  /*ramp=*/!RoundTripsDear());
      }
      cache = page_cache_.get();
    }
    const uint64_t reserved =
        (resident[i] ? arrays[i]->bytes() : 0) + filter_bytes[i];
    if (!adopt) {
      DMG_RETURN_IF_ERROR(
          Fail(arrays[i]->Materialize(cache, reserved, filter_bytes[i])));
      continue;
    }
    // The earlier attempt's two buffers of this array, by name.
    transport::RegionInfo buffers[2];
    for (int b = 0; b < 2; ++b) {
      const std::string name =
          compute_nodes() == 1 ? absl::StrFormat("%s.%d", arrays[i]->name(), b)
                               : absl::StrFormat("%s.%d.%d", arrays[i]->name(),
                                                 b, compute_node());
      auto it = std::find_if(leftovers_.begin(), leftovers_.end(),
                             [&](const auto& r) { return r.name == name; });
      if (it == leftovers_.end()) {
        return Fail(absl::DataLossError(absl::StrFormat(
            "job '%s': state '%s' is not on the memory nodes; run the job "
            "again without --resume",
            options_.job, name)));
      }
      buffers[b] = *it;
      leftovers_.erase(it);
    }
    DMG_RETURN_IF_ERROR(Fail(
        arrays[i]->Adopt(cache, reserved, buffers, version_, filter_bytes[i])));
  }
  return absl::OkStatus();
}

absl::Status Engine::FetchPendingState() {
  for (size_t i = 0; compute_nodes() > 1 && i < placed_; ++i) {
    DMG_RETURN_IF_ERROR(Fail(states_[i]->FetchPending()));
  }
  return absl::OkStatus();
}

void Engine::ArmPendingReads(bool all_on_touch, bool demand_first) {
  for (size_t i = 0; compute_nodes() > 1 && i < placed_; ++i) {
    StateArrayBase& a = *states_[i];
    a.FetchAllOnTouch(all_on_touch, nullptr,
                      all_on_touch && demand_first ? DemandBudgetOf(a) : 0);
  }
}

uint64_t Engine::DemandBudgetOf(const StateArrayBase& a) const {
  return a.any_pending() ? coordinator::DemandBudget(a.pending_lines(),
                                                     StateArrayBase::kLineBytes,
                                                     transport_cost_)
                         : 0;
}

absl::Status Engine::ArmSourceReads(Direction d, bool whole) {
  const int k = static_cast<int>(Stored(d));
  if (whole) DMG_RETURN_IF_ERROR(PrimeSources(d));
  if (!sources_complete_[k]) {
    // Which lines the scan reads is not known yet: demand first.
    ArmPendingReads(/*all_on_touch=*/true);
    return absl::OkStatus();
  }
  armed_sources_ = k;
  for (size_t i = 0; compute_nodes() > 1 && i < placed_; ++i) {
    states_[i]->FetchAllOnTouch(true, &sources_[k]);
    if (mirrors_ != nullptr) {
      states_[i]->SetMirror(mirrors_->For(i, k, superstep_));
    }
  }
  return absl::OkStatus();
}

void Engine::SourcesComplete(int k) {
  sources_complete_[k] = true;
  if (mirrors_ == nullptr) return;
  // The layout (4 bytes a vertex this node reads, or others read of its
  // range) and the copies' buffers (up to 8 bytes a value) count against
  // the bound, from what the cache planner left: where they do not fit,
  // this node posts no needs, and no node mirrors direction k.
  uint64_t reads = 0;
  for (const uint64_t w : sources_[k]) reads += std::popcount(w);
  const uint64_t bytes = (reads + (own_end_ - own_begin_)) * 12;
  if (!budget_.TryReserve(bytes)) return;
  mirrors_->SetNeeds(k, sources_[k]);
}

uint64_t Engine::mirror_values_read() const {
  uint64_t n = 0;
  for (const auto& a : states_) n += a->mirror_values();
  return n;
}

size_t Engine::IndexOf(const StateArrayBase& a) const {
  for (size_t i = 0; i < states_.size(); ++i) {
    if (states_[i].get() == &a) return i;
  }
  return states_.size();
}

absl::Status Engine::PrimeSources(Direction d) {
  d = Stored(d);
  const int k = static_cast<int>(d);
  if (compute_nodes() == 1 || sources_complete_[k]) return absl::OkStatus();
  PlanDirection(d, /*push=*/false);
  const HotBlockCache* hot = hot_[k].get();
  // Without room for the range's blocks the scan would READ them again.
  if (hot == nullptr || !hot->holds_all()) return absl::OkStatus();
  sources_[k].resize((num_vertices() + 63) / 64, 0);
  std::span<const DirectoryEntry> dir = graph_.directory(d);
  std::span<const Unit> units = own_units_[k];
  DMG_RETURN_IF_ERROR(Fail(
      scheduler_.Run(units.size(), [&](int w, UnitScheduler::Cursor& cursor) {
        return source_->Stream(
            w, d, units, cursor, [](size_t) {},
            [&](uint32_t i, const std::byte* p, uint32_t len) -> absl::Status {
              if (const BlockView* v = hot->View(i, p)) {
                RecordSources(k, *v);
                return absl::OkStatus();
              }
              DMG_ASSIGN_OR_RETURN(BlockView b, ParseBlock(dir, i, p, len));
              RecordSources(k, b);
              return absl::OkStatus();
            });
      })));
  SourcesComplete(k);
  return absl::OkStatus();
}

void Engine::SetBarrierReady(bool ready) {
  if (ready == barrier_ready_) return;
  barrier_ready_ = ready;
  for (size_t i = 0; i < placed_; ++i) states_[i]->ReadOldFromOpen(ready);
}

absl::Status Engine::Prepare(bool open_superstep, bool fetch_pending) {
  SetBarrierReady(false);  // an operation begins (or the superstep ends)
  if (placed_ < states_.size()) {
    std::vector<StateArrayBase*> arrays;
    for (size_t i = placed_; i < states_.size(); ++i) {
      arrays.push_back(states_[i].get());
    }
    placed_ = states_.size();
    DMG_RETURN_IF_ERROR(Fail(PlaceStates(arrays)));
  }
  if (open_superstep && !open_) {
    step_start_ = std::chrono::steady_clock::now();
    if (superstep_ == 0 && stats_.supersteps.empty()) {
      stats_.setup = pool_->TotalStats();
      stats_.setup_cache = CacheTotals();
      stats_.setup_seconds =
          std::chrono::duration<double>(step_start_ - start_).count();
    }
    open_ = true;
    step_base_ = pool_->TotalStats();
    step_path_base_.resize(pool_->size());
    for (int w = 0; w < pool_->size(); ++w) {
      step_path_base_[w] = pool_->endpoint(w).stats().round_trips;
    }
    step_rounds_base_ = cluster_->rounds();
    step_polls_base_ = cluster_->polls();
    step_wait_base_us_ = cluster_->wait_us();
    step_cache_base_ = CacheTotals();
    source_->TakeMaxOutstanding();
    SuperstepStats s;
    s.index = superstep_ + 1;
    stats_.supersteps.push_back(s);
  }
  // Other nodes' changes not READ yet: an operation that may read them
  // widely (all but the pushes) READs an array's pending lines in one
  // batch when it first touches one; an array it reads only in this
  // node's range (PageRank's scores in its Gather) moves nothing. Others
  // READ a line when they touch it.
  ArmPendingReads(fetch_pending);
  return absl::OkStatus();
}

void Engine::NoteEdgeOp(const char* direction, uint64_t frontier,
                        const char* chosen_by, uint64_t work,
                        uint64_t threshold) {
  SuperstepStats& s = stats_.supersteps.back();
  if (s.direction.empty()) {
    s.direction = direction;
    s.frontier = frontier;
    s.chosen_by = chosen_by;
    s.auto_work = work;
    s.auto_threshold = threshold;
  } else if (s.direction.find(direction) == std::string::npos) {
    s.direction += std::string("+") + direction;
  }
}

void Engine::PlanDirection(Direction d, bool push) {
  d = Stored(d);
  const int k = static_cast<int>(d);
  std::span<const DirectoryEntry> dir = graph_.directory(d);
  if (push && !headers_tried_[k]) {
    // Headers before payloads: a push scan asks for them before its hot
    // blocks take what is left. With several compute nodes, a node's own
    // range's (it pushes from its own vertices; the frontier's degrees
    // travel with its parts). Every node asks for the largest range's
    // bytes and keeps them, so that all plan their hot blocks alike.
    headers_tried_[k] = true;
    uint64_t ask = 0;
    for (int node = 0; node < compute_nodes(); ++node) {
      const auto [first, last] = NodeEntries(d, node);
      ask = std::max(ask, HeaderCache::BytesFor(dir, first, last));
    }
    const uint64_t bytes = planner_.GrantHeaders(ask);
    if (bytes > 0) {
      const auto [first, last] = NodeEntries(d, compute_node());
      auto headers = std::make_unique<HeaderCache>(dir, &graph_.block_index(d),
                                                   first, last);
      absl::Status s = ScanHeaders(
          d,
          [&](int, uint32_t entry, const uint32_t* offsets) {
            headers->Fill(entry, offsets);
          },
          /*own_only=*/true);
      if (s.ok()) {
        headers_[k] = std::move(headers);
      } else {
        // Not fatal here: the scan that needs the blocks will report it.
        planner_.ReturnUnused(bytes);
      }
    }
  }
  if (hot_tried_[k]) return;
  hot_tried_[k] = true;
  // With several compute nodes the hot set takes a node's own range's
  // blocks (the ones it scans) first, others' (for work it takes) with what
  // is left. Whether the set holds every block feeds choices every node
  // must make alike: so it is whether every node's range fits (hot_all_).
  uint64_t all = 0, largest = 0;
  for (const DirectoryEntry& e : dir) all += e.length;
  for (int node = 0; node < compute_nodes(); ++node) {
    const auto [first, last] = NodeEntries(d, node);
    uint64_t range = 0;
    for (uint32_t i = first; i < last; ++i) range += dir[i].length;
    largest = std::max(largest, range);
  }
  const uint64_t space = planner_.GrantHotBlocks(all);
  if (space == 0) return;
  hot_all_[k] = largest <= space;
  const auto [first, last] = NodeEntries(d, compute_node());
  auto hot =
      std::make_unique<HotBlockCache>(dir, num_arcs(), space, first, last);
  // With several nodes each keeps the whole grant, so that what is left for
  // later grants is alike on every node.
  if (compute_nodes() == 1) planner_.ReturnUnused(space - hot->bytes());
  if (hot->bytes() == 0) return;
  hot_[k] = std::move(hot);
  source_->SetHotBlocks(d, hot_[k].get());
}

std::pair<uint32_t, uint32_t> Engine::NodeEntries(Direction d, int node) const {
  const std::vector<Unit>& units =
      node_units_[static_cast<int>(Stored(d))][node];
  if (units.empty()) return {0, 0};
  return {units.front().first, units.back().last};
}

absl::Status Engine::EndSuperstep() {
  // The last collective was the barrier (every node's pages whole in the
  // open buffer), unless something changed since.
  // (Not when the superstep is recorded: that must come between the
  // commit and the barrier.)
  const bool recording = progress_ != nullptr && progress_->started();
  const bool fused = compute_nodes() > 1 && barrier_ready_ && open_ &&
                     placed_ == states_.size() && !recording;
  // Ends the superstep without READing what others changed (lazy).
  DMG_RETURN_IF_ERROR(
      Prepare(/*open_superstep=*/true, /*fetch_pending=*/false));
  for (size_t i = 0; fused && i < placed_; ++i) {
    if (!states_[i]->Clean()) {
      return Fail(absl::FailedPreconditionError(absl::StrFormat(
          "state '%s' changed outside an operation after the superstep's "
          "last one: with several compute nodes, change state only inside "
          "operations",
          states_[i]->name())));
    }
  }
  const bool checkpoint = CheckpointDue();
  // One compute node: the carried values' WRITEs are queued first on the
  // endpoint the commit flushes, so they go out with the state's.
  const bool staged = checkpoint && recording && compute_nodes() == 1;
  if (staged) {
    progress_->Stage(pool_->endpoint(0), version_ + 1, superstep_ + 1);
  }
  // Its last WRITEs stay queued for Seal's swap to follow in one batch.
  if (checkpoint) DMG_RETURN_IF_ERROR(CommitVersion(/*leave_queued=*/staged));
  ++superstep_;
  open_ = false;
  atomic_in_step_ = false;
  if (!checkpoint) {
    // One compute node between checkpoints: nothing leaves the node.
  } else if (fused) {
    // Every node wrote its whole version before that collective's post:
    // nothing to wait for.
  } else if (compute_nodes() > 1) {
    // Recorded before the barrier: no node begins the next superstep (and
    // writes into the buffer of the one before) until every node's record
    // says this one is whole in its slices.
    if (recording) {
      DMG_RETURN_IF_ERROR(
          Fail(progress_->Record(pool_->endpoint(0), version_, superstep_)));
    }
    DMG_RETURN_IF_ERROR(
        Fail(cluster_->Exchange(pool_->endpoint(0), "superstep").status()));
  } else if (staged) {
    // One compute node: recording the checkpoint is its end (the barrier
    // would be a second round trip that orders nothing more).
    DMG_RETURN_IF_ERROR(Fail(progress_->Seal(pool_->endpoint(0))));
  } else {
    DMG_RETURN_IF_ERROR(Fail(barrier_->Arrive(pool_->endpoint(0), version_)));
  }
  SuperstepStats& s = stats_.supersteps.back();
  s.checkpoint = checkpoint;
  if (s.direction.empty()) s.direction = "none";
  step_end_ = std::chrono::steady_clock::now();
  s.seconds = std::chrono::duration<double>(step_end_ - step_start_).count();
  s.ops = pool_->TotalStats() - step_base_;
  s.path_round_trips = 0;
  for (int w = 0; w < pool_->size(); ++w) {
    s.path_round_trips =
        std::max(s.path_round_trips,
                 pool_->endpoint(w).stats().round_trips - step_path_base_[w]);
  }
  s.rounds = cluster_->rounds() - step_rounds_base_;
  s.polls = cluster_->polls() - step_polls_base_;
  s.wait_seconds = (cluster_->wait_us() - step_wait_base_us_) / 1e6;
  s.cache = CacheTotals() - step_cache_base_;
  s.max_outstanding = source_->TakeMaxOutstanding();
  if (options_.on_superstep) options_.on_superstep(s);
  return absl::OkStatus();
}

bool Engine::CheckpointDue() {
  // Every array hears that the superstep ends.
  bool claims_full = false;
  for (const auto& a : states_) claims_full |= a->WantsCommit();
  if (compute_nodes() > 1 || options_.checkpoint_supersteps <= 1) return true;
  if (superstep_ + 1 - version_superstep_ >= options_.checkpoint_supersteps) {
    return true;
  }
  // A claim log the next superstep may fill asks for one where round trips
  // are dear: past full, claims page their pages in, a round trip each on
  // a network (road-NY BFS over tcp at 5%: 22 -> 9 a level). Locally a
  // page is a memcpy and the commits cost more than they save (road-NY
  // BFS at 5%, 10 trials: 0.044 s a source without them, 0.054 s with;
  // 23,690 against 3,183 round trips).
  if (claims_full && RoundTripsDear()) {
    return true;
  }
  return options_.checkpoint_seconds > 0 &&
         std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                       version_time_)
                 .count() >= options_.checkpoint_seconds;
}

absl::Status Engine::CommitVersion(bool leave_queued) {
  for (const auto& a : states_) {
    // Each node commits the pages of its own range (all, with one node).
    const auto [first, last] = OwnPages(*a);
    DMG_RETURN_IF_ERROR(
        Fail(a->Commit(version_ + 1, first, last, leave_queued)));
  }
  if (!leave_queued) DMG_RETURN_IF_ERROR(Fail(pool_->endpoint(0).Flush()));
  ++version_;
  // In EndSuperstep, before the superstep count moves on.
  version_superstep_ = open_ ? superstep_ + 1 : superstep_;
  version_time_ = std::chrono::steady_clock::now();
  return absl::OkStatus();
}

CacheCounters Engine::CacheTotals() {
  CacheCounters c = page_cache_ ? page_cache_->counters() : CacheCounters();
  for (const auto& hot : hot_) {
    if (hot == nullptr) continue;
    c.hits += hot->hits();
    c.bytes_saved += hot->bytes_saved();
  }
  return c;
}

void Engine::Finish() {
  if (open_ && healthy()) {
    absl::Status s = EndSuperstep();
    LOG_IF(WARNING, !s.ok()) << "ending the last superstep: " << s;
  }
  if (progress_ != nullptr && healthy()) {
    // Done: nothing to resume; the job's regions go when it closes.
    absl::StatusOr<transport::Transport::Kept> s = transport_.KeepRegions(0);
    LOG_IF(WARNING, !s.ok())
        << "releasing the job's kept state: " << s.status();
  }
  stats_.total = pool_->TotalStats();
  stats_.job_total = stats_.total;
  if (compute_nodes() > 1 && healthy()) {
    // Every node's figures to every node (node 0 reports them), then leave.
    NodeStats mine;
    mine.id = compute_node();
    mine.own_begin = own_begin_;
    mine.own_end = own_end_;
    mine.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_)
            .count();
    mine.wait_seconds = cluster_->wait_us() / 1e6;
    mine.rounds = cluster_->rounds();
    mine.polls = cluster_->polls();
    mine.total = stats_.total;
    mine.own_items = own_items_;
    mine.stolen_items = stolen_items_;
    mine.completed_frontiers = completed_frontiers_;
    std::string bytes(reinterpret_cast<const char*>(&mine), sizeof(mine));
    absl::StatusOr<std::vector<Cluster::Received>> all =
        Fail(cluster_->Exchange(pool_->endpoint(0), bytes));
    if (all.ok()) {
      stats_.nodes.clear();
      stats_.job_total = transport::OpStats();
      for (const Cluster::Received& r : *all) {
        NodeStats n;
        if (r.common.size() != sizeof(n)) continue;
        std::memcpy(&n, r.common.data(), sizeof(n));
        stats_.nodes.push_back(n);
        stats_.job_total += n.total;
      }
    }
    absl::Status s =
        all.ok() ? Fail(cluster_->Leave(pool_->endpoint(0))) : all.status();
    LOG_IF(WARNING, !s.ok()) << "leaving job " << cluster_->job() << ": " << s;
  }
  stats_.total_cache = CacheTotals();
  stats_.cache_peak_bytes = budget_.peak();
  if (stats_.supersteps.empty()) stats_.setup = stats_.total;
  const auto now = std::chrono::steady_clock::now();
  stats_.seconds = std::chrono::duration<double>(now - start_).count();
  if (stats_.supersteps.empty()) {
    stats_.setup_seconds = stats_.seconds;
  } else {
    stats_.finish_seconds =
        std::chrono::duration<double>(now - step_end_).count();
  }
}

}  // namespace dmg::compute

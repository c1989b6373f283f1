#include "compute_node/engine.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace dmg::compute {

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
  EngineOptions resolved = options;
  if (options.cache_fraction > 0) {
    resolved.cache_bytes = static_cast<uint64_t>(
        options.cache_fraction * static_cast<double>(graph.image_bytes()));
  }
  auto engine = std::unique_ptr<Engine>(
      new Engine(transport, std::move(graph),
                 std::make_unique<WorkerPool>(std::move(endpoints)), resolved));
  engine->start_ = start;
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
  // State arrays release their budget and regions before the caches go.
  states_.clear();
  source_.reset();
  if (barrier_ != nullptr && healthy()) {
    absl::Status s =
        transport_.FreeRegion(barrier_->region().node, barrier_->region().id);
    VLOG_IF(1, !s.ok()) << "freeing barrier region: " << s;
  }
}

absl::Status Engine::Init() {
  DMG_ASSIGN_OR_RETURN(buffers_, planner_.PlanBuffers());
  for (int d = 0; d < 2; ++d) {
    std::span<const DirectoryEntry> dir =
        graph_.directory(static_cast<Direction>(d));
    all_units_[d] = MakeAllUnits(dir, buffers_.batch_bytes);
    touched_[d].assign(dir.size(), 0);
  }
  if (options_.cache_policy == CachePolicy::kPageLru) {
    const uint64_t bytes = planner_.PageCacheBytes(
        graph_.image_bytes() + num_vertices() * 32 + (64 << 20));
    if (bytes == 0) {
      return absl::InvalidArgumentError("cache too small for any pages");
    }
    page_cache_ = std::make_unique<PageCache>(bytes / PageCache::kPageBytes,
                                              threads(), /*read_ahead=*/1);
    source_ =
        std::make_unique<PageLruBlockSource>(graph_, *pool_, *page_cache_);
  } else {
    source_ = std::make_unique<GraphAwareBlockSource>(
        graph_, *pool_, buffers_.batch_bytes, buffers_.prefetch_window);
  }
  DMG_ASSIGN_OR_RETURN(transport::RegionInfo counter,
                       transport_.AllocateRegion(0, 64, "barrier"));
  barrier_ = std::make_unique<Barrier>(counter, /*nodes=*/1);
  stats_.transport = transport_.name();
  stats_.threads = threads();
  stats_.vertices = num_vertices();
  stats_.arcs = num_arcs();
  stats_.directory_bytes = graph_.directory_bytes();
  stats_.cache_policy = options_.cache_policy == CachePolicy::kGraphAware
                            ? "graph_aware"
                            : "page_lru";
  stats_.cache_capacity_bytes = budget_.unlimited() ? 0 : budget_.capacity();
  return absl::OkStatus();
}

StateContext Engine::state_context() {
  return StateContext{
      .pool = pool_.get(),
      .scheduler = &scheduler_,
      .transport = &transport_,
      .budget = &budget_,
      .superstep = &superstep_,
      .healthy = [this] { return healthy(); },
  };
}

Frontier Engine::FrontierOf(VertexId v) const {
  Frontier f = NewFrontier();
  f.Add(0, v);
  f.Seal();
  return f;
}

absl::Status Engine::Fail(absl::Status s) {
  if (!s.ok()) failed_ = true;
  return s;
}

absl::Status Engine::PlaceStates(std::span<StateArrayBase* const> arrays) {
  std::vector<StateRequest> requests;
  for (StateArrayBase* a : arrays) requests.push_back({a->bytes(), a->hint()});
  std::vector<bool> resident = planner_.PlaceStates(requests);
  for (size_t i = 0; i < arrays.size(); ++i) {
    PageCache* cache = nullptr;
    if (!resident[i]) {
      if (page_cache_ == nullptr) {
        // Unbounded graph-aware jobs never page; the figure is a fallback.
        const uint64_t bytes = planner_.PageCacheBytes(num_vertices() * 32);
        if (bytes == 0) {
          return absl::ResourceExhaustedError(
              "no room left in the cache for vertex state; raise the cache "
              "bound");
        }
        page_cache_ = std::make_unique<PageCache>(bytes / PageCache::kPageBytes,
                                                  threads(), /*read_ahead=*/64);
      }
      cache = page_cache_.get();
    }
    DMG_RETURN_IF_ERROR(Fail(
        arrays[i]->Materialize(cache, resident[i] ? arrays[i]->bytes() : 0)));
  }
  return absl::OkStatus();
}

absl::Status Engine::Prepare(bool open_superstep) {
  if (placed_ < states_.size()) {
    std::vector<StateArrayBase*> arrays;
    for (size_t i = placed_; i < states_.size(); ++i) {
      arrays.push_back(states_[i].get());
    }
    placed_ = states_.size();
    DMG_RETURN_IF_ERROR(PlaceStates(arrays));
  }
  if (open_superstep && !open_) {
    if (superstep_ == 0 && stats_.supersteps.empty()) {
      stats_.setup = pool_->TotalStats();
      stats_.setup_cache = CacheTotals();
    }
    open_ = true;
    step_start_ = std::chrono::steady_clock::now();
    step_base_ = pool_->TotalStats();
    step_cache_base_ = CacheTotals();
    source_->TakeMaxOutstanding();
    SuperstepStats s;
    s.index = superstep_ + 1;
    stats_.supersteps.push_back(s);
  }
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
  const int k = static_cast<int>(d);
  std::span<const DirectoryEntry> dir = graph_.directory(d);
  if (push && !headers_tried_[k]) {
    // Headers before payloads: a push scan asks for them before its hot
    // blocks take what is left.
    headers_tried_[k] = true;
    const uint64_t bytes = planner_.GrantHeaders(HeaderCache::BytesFor(dir));
    if (bytes > 0) {
      auto headers = std::make_unique<HeaderCache>(dir);
      absl::Status s =
          ScanHeaders(d, [&](int, uint32_t entry, const uint32_t* offsets) {
            headers->Fill(entry, offsets);
          });
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
  uint64_t all = 0;
  for (const DirectoryEntry& e : dir) all += e.length;
  const uint64_t space = planner_.GrantHotBlocks(all);
  if (space == 0) return;
  auto hot = std::make_unique<HotBlockCache>(dir, num_arcs(), space);
  planner_.ReturnUnused(space - hot->bytes());
  if (hot->bytes() == 0) return;
  hot_[k] = std::move(hot);
  source_->SetHotBlocks(d, hot_[k].get());
}

absl::Status Engine::EndSuperstep() {
  DMG_RETURN_IF_ERROR(Prepare());
  for (const auto& a : states_) {
    DMG_RETURN_IF_ERROR(Fail(a->Commit(superstep_ + 1)));
  }
  ++superstep_;
  open_ = false;
  DMG_RETURN_IF_ERROR(Fail(barrier_->Arrive(pool_->endpoint(0), superstep_)));
  SuperstepStats& s = stats_.supersteps.back();
  if (s.direction.empty()) s.direction = "none";
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                            step_start_)
                  .count();
  s.ops = pool_->TotalStats() - step_base_;
  s.cache = CacheTotals() - step_cache_base_;
  s.max_outstanding = source_->TakeMaxOutstanding();
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
  stats_.total = pool_->TotalStats();
  stats_.total_cache = CacheTotals();
  stats_.cache_peak_bytes = budget_.peak();
  if (stats_.supersteps.empty()) stats_.setup = stats_.total;
  stats_.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_)
          .count();
}

}  // namespace dmg::compute

#include "compute_node/engine.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_format.h"
#include "glog/logging.h"

namespace dmg::compute {

using transport::OpStats;

namespace {

// One memory node's store region seen as pages (page_lru reads blocks
// through these). Read-only.
class StorePageSource : public PageSource {
 public:
  StorePageSource(WorkerPool& pool, uint32_t node, uint64_t bytes)
      : pool_(pool), node_(node), bytes_(bytes) {}
  absl::Status FetchPages(int worker, uint64_t first, uint64_t count,
                          std::byte* const* dst) override {
    transport::Endpoint& ep = pool_.endpoint(worker);
    for (uint64_t k = 0; k < count; ++k) {
      uint64_t at = (first + k) * PageCache::kPageBytes;
      ep.Read(
          node_, transport::kStoreRegion, at, dst[k],
          static_cast<uint32_t>(std::min(PageCache::kPageBytes, bytes_ - at)));
    }
    return ep.Flush();
  }
  absl::Status WriteBackPages(int, std::span<const DirtyPage>) override {
    return absl::InternalError("store pages are never written");
  }

 private:
  WorkerPool& pool_;
  uint32_t node_;
  uint64_t bytes_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(
    transport::Transport& transport, const EngineOptions& options) {
  if (options.threads < 1) {
    return absl::InvalidArgumentError("engine needs at least one thread");
  }
  std::vector<std::unique_ptr<transport::Endpoint>> endpoints;
  for (int i = 0; i < options.threads; ++i) {
    absl::StatusOr<std::unique_ptr<transport::Endpoint>> ep =
        transport.NewEndpoint();
    if (!ep.ok()) return ep.status();
    endpoints.push_back(*std::move(ep));
  }
  auto start = std::chrono::steady_clock::now();
  absl::StatusOr<RemoteGraph> graph = RemoteGraph::Open(*endpoints[0]);
  if (!graph.ok()) return graph.status();
  EngineOptions resolved = options;
  if (options.cache_fraction > 0) {
    resolved.cache_bytes = static_cast<uint64_t>(
        options.cache_fraction * static_cast<double>(graph->image_bytes()));
  }
  auto engine = std::unique_ptr<Engine>(
      new Engine(transport, *std::move(graph),
                 std::make_unique<WorkerPool>(std::move(endpoints)), resolved));
  engine->start_ = start;
  if (absl::Status s = engine->Init(); !s.ok()) return s;
  return engine;
}

Engine::Engine(transport::Transport& transport, RemoteGraph graph,
               std::unique_ptr<WorkerPool> pool, const EngineOptions& options)
    : transport_(transport),
      graph_(std::move(graph)),
      pool_(std::move(pool)),
      options_(options),
      buffers_(pool_->size()),
      current_unit_(pool_->size(), 0),
      budget_(options.cache_bytes) {}

Engine::~Engine() {
  if (barrier_.length > 0 && healthy()) {
    absl::Status s = transport_.FreeRegion(barrier_.node, barrier_.id);
    VLOG_IF(1, !s.ok()) << "freeing barrier region: " << s;
  }
}

absl::Status Engine::Init() {
  // Worker buffers come out of the budget first: a batch of blocks each
  // (graph-aware; at least one block), or one block each (page_lru, which
  // copies blocks out of cached pages).
  const uint64_t block = graph_.block_size();
  uint64_t per_worker = block;
  if (options_.cache_policy == CachePolicy::kGraphAware) {
    // An eighth of what the page minimum leaves, split over the workers:
    // the rest is for vertex state (PageRank's contributions first).
    uint64_t spare = budget_.capacity() > MinimumCacheBytes()
                         ? budget_.capacity() - MinimumCacheBytes()
                         : 0;
    options_.prefetch_window = std::max(1, options_.prefetch_window);
    const uint64_t slots = options_.prefetch_window + 1;
    per_worker = budget_.unlimited()
                     ? options_.batch_bytes
                     : std::clamp<uint64_t>(spare / 8 / threads() / slots,
                                            block, options_.batch_bytes);
    options_.batch_bytes = per_worker;
    // One buffer for synchronous fetches, plus the prefetch window's.
    per_worker *= slots;
  } else {
    options_.batch_bytes = block;
    options_.prefetch_window = 1;  // the baseline does not prefetch
  }
  buffer_reservation_ = per_worker * threads();
  const uint64_t minimum = buffer_reservation_ + MinimumCacheBytes();
  if (!budget_.unlimited() && budget_.capacity() < minimum) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "a cache of %d bytes is below this job's minimum of %d bytes (%d "
        "threads x (%d bytes of block buffers + %d bytes of pages)); raise "
        "--cache_mb/--cache_fraction or lower --threads",
        budget_.capacity(), minimum, threads(), per_worker,
        MinimumCacheBytes() / threads()));
  }
  CHECK(budget_.TryReserve(buffer_reservation_));
  prefetch_buffers_.resize(threads());
  for (auto& slots : prefetch_buffers_) {
    if (options_.prefetch_window > 1) {
      slots.assign(options_.prefetch_window,
                   std::vector<uint64_t>(options_.batch_bytes / 8));
    }
  }

  for (int d = 0; d < 2; ++d) {
    auto dir = static_cast<Direction>(d);
    std::vector<uint32_t> all(graph_.directory(dir).size());
    for (uint32_t i = 0; i < all.size(); ++i) all[i] = i;
    all_units_[d] = MakeUnits(dir, all);
    touched_[d].assign(all.size(), 0);
  }
  if (options_.cache_policy == CachePolicy::kPageLru) {
    for (uint32_t k = 0; k < graph_.num_memory_nodes(); ++k) {
      store_pages_.push_back(
          std::make_unique<StorePageSource>(*pool_, k, graph_.store_bytes(k)));
    }
    if (EnsurePageCache() == nullptr) {
      return absl::InvalidArgumentError("cache too small for any pages");
    }
  }
  absl::StatusOr<transport::RegionInfo> barrier =
      transport_.AllocateRegion(0, 64, "barrier");
  if (!barrier.ok()) return barrier.status();
  barrier_ = *barrier;
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

uint64_t Engine::MinimumCacheBytes() const {
  return static_cast<uint64_t>(threads()) * 16 * PageCache::kPageBytes;
}

PageCache* Engine::EnsurePageCache() {
  if (page_cache_ != nullptr) return page_cache_.get();
  uint64_t bytes = budget_.available();
  if (budget_.unlimited()) {
    // No bound: room for the whole store and generous state.
    bytes = graph_.image_bytes() + num_vertices() * 32 + (64 << 20);
  }
  uint64_t frames = bytes / PageCache::kPageBytes;
  if (frames < static_cast<uint64_t>(threads()) * 4) return nullptr;
  page_cache_reservation_ = frames * PageCache::kPageBytes;
  if (!budget_.TryReserve(page_cache_reservation_)) return nullptr;
  // Graph-aware reads ahead on sequential misses; the baseline does not.
  page_cache_ = std::make_unique<PageCache>(
      frames, threads(),
      options_.cache_policy == CachePolicy::kGraphAware ? 64 : 1);
  for (auto& source : store_pages_) {
    page_cache_->Attach(source.get(),
                        (graph_.store_bytes(&source - store_pages_.data()) +
                         PageCache::kPageBytes - 1) /
                            PageCache::kPageBytes);
  }
  return page_cache_.get();
}

CacheCounters Engine::CacheTotals() {
  CacheCounters c = page_cache_ ? page_cache_->counters() : CacheCounters();
  c.hits += block_hits_.load();
  c.bytes_saved += block_bytes_saved_.load();
  return c;
}

void Engine::Register(StateArrayBase* array) { arrays_.push_back(array); }

void Engine::Unregister(StateArrayBase* array) {
  arrays_.erase(std::remove(arrays_.begin(), arrays_.end(), array),
                arrays_.end());
}

std::vector<Engine::Unit> Engine::MakeUnits(
    Direction d, const std::vector<uint32_t>& entries) const {
  std::span<const DirectoryEntry> dir = graph_.directory(d);
  std::vector<Unit> units;
  uint64_t bytes = 0;
  for (size_t k = 0; k < entries.size(); ++k) {
    uint32_t i = entries[k];
    // Start a new unit when this one is full, unless i continues a split run
    // (all pieces of one vertex stay on one worker, in order) or i does not
    // directly follow the unit's last entry.
    bool continues_run = !units.empty() && units.back().last == i &&
                         (dir[i].flags & store::kEntryFlagSplitPiece) &&
                         dir[i - 1].first_vertex == dir[i].first_vertex;
    bool adjacent = !units.empty() && units.back().last == i;
    if (units.empty() || !adjacent ||
        (bytes + dir[i].length > options_.batch_bytes && !continues_run)) {
      units.push_back({i, i + 1});
      bytes = dir[i].length;
    } else {
      units.back().last = i + 1;
      bytes += dir[i].length;
    }
  }
  return units;
}

std::vector<Engine::Unit> Engine::FrontierUnits(Direction d,
                                                const Frontier& frontier) {
  std::span<const DirectoryEntry> dir = graph_.directory(d);
  std::vector<uint8_t>& touched = touched_[static_cast<int>(d)];
  std::span<const VertexId> vs = frontier.vertices();
  ParallelFor(vs.size(), [&](int, uint64_t b, uint64_t e) {
    for (uint64_t k = b; k < e; ++k) {
      auto [first, last] = store::FindBlocks(dir, vs[k]);
      for (size_t i = first; i < last; ++i) {
        std::atomic_ref<uint8_t>(touched[i])
            .store(1, std::memory_order_relaxed);
      }
    }
  });
  std::vector<uint32_t> entries;
  for (uint32_t i = 0; i < touched.size(); ++i) {
    if (touched[i]) {
      entries.push_back(i);
      touched[i] = 0;
    }
  }
  return MakeUnits(d, entries);
}

absl::Status Engine::FetchBlocks(
    int w, Direction d, const Unit& unit, bool headers_only,
    const std::function<absl::Status(uint32_t, const std::byte*, uint32_t)>&
        per_block) {
  std::span<const DirectoryEntry> dir = graph_.directory(d);
  std::vector<uint64_t>& buffer = buffers_[w];
  const uint64_t capacity = options_.batch_bytes;  // reserved in the budget
  if (buffer.size() * 8 < capacity) buffer.resize(capacity / 8);
  auto* base = reinterpret_cast<std::byte*>(buffer.data());
  auto length = [&](uint32_t i) -> uint32_t {
    return headers_only ? static_cast<uint32_t>(sizeof(store::BlockHeader) +
                                                4 * (dir[i].vertex_count + 1))
                        : dir[i].length;
  };
  transport::Endpoint& ep = pool_->endpoint(w);
  std::vector<uint64_t> at;
  for (uint32_t first = unit.first; first < unit.last;) {
    // As many blocks as fit in the buffer (at least one), in one batch.
    uint32_t last = first;
    uint64_t total = 0;
    at.clear();
    while (last < unit.last &&
           (last == first || total + (length(last) + 7) / 8 * 8 <= capacity)) {
      at.push_back(total);
      total += (length(last) + 7) / 8 * 8;
      ++last;
    }
    for (uint32_t i = first; i < last; ++i) {
      RemoteGraph::Location loc = graph_.Locate(d, dir[i]);
      std::byte* dst = base + at[i - first];
      if (options_.cache_policy == CachePolicy::kPageLru) {
        // Page by page through the cache: no batching, no bypass.
        PageSource* src = store_pages_[loc.node].get();
        for (uint64_t off = loc.offset, end = loc.offset + length(i);
             off < end;) {
          uint64_t page = off / PageCache::kPageBytes;
          uint64_t in_page = off % PageCache::kPageBytes;
          uint64_t n = std::min(PageCache::kPageBytes - in_page, end - off);
          absl::StatusOr<std::byte*> p = page_cache_->Pin(w, src, page);
          if (!p.ok()) return p.status();
          std::memcpy(dst, *p + in_page, n);
          page_cache_->Unpin(src, page, false);
          dst += n;
          off += n;
        }
      } else {
        ep.Read(loc.node, loc.region, loc.offset, dst, length(i));
      }
    }
    if (absl::Status s = ep.Flush(); !s.ok()) return s;
    for (uint32_t i = first; i < last; ++i) {
      if (absl::Status s = per_block(i, base + at[i - first], length(i));
          !s.ok()) {
        return s;
      }
    }
    first = last;
  }
  return absl::OkStatus();
}

absl::Status Engine::ScanUnits(
    Direction d, std::span<const Unit> units,
    const std::function<void(int, const BlockView&)>& per_block) {
  std::span<const DirectoryEntry> dir = graph_.directory(d);
  auto deliver = [&](int w, uint32_t i, const std::byte* p,
                     uint32_t len) -> absl::Status {
    absl::StatusOr<BlockView> block = BlockView::Parse({p, len});
    if (!block.ok()) return block.status();
    if (block->first_vertex() != dir[i].first_vertex ||
        block->vertex_count() != dir[i].vertex_count) {
      return absl::DataLossError(absl::StrFormat(
          "block %d read from memory node %d disagrees with the directory", i,
          dir[i].memory_node));
    }
    per_block(w, *block);
    return absl::OkStatus();
  };
  // Graph-aware: blocks the hot-block cache holds are not fetched again,
  // and fetched blocks it prefers are admitted, so a scan the cache can
  // hold (in part) is served from it (in that part) in later supersteps.
  BlockCache* cache = EnsureBlockCache(d);
  auto cached = [&](uint32_t i) -> const std::byte* {
    const std::byte* p = cache ? CachedBlock(d, i) : nullptr;
    if (p != nullptr) {
      block_hits_.fetch_add(1, std::memory_order_relaxed);
      block_bytes_saved_.fetch_add(dir[i].length, std::memory_order_relaxed);
    }
    return p;
  };
  auto deliver_fetched = [&](int w, uint32_t i, const std::byte* p,
                             uint32_t len) -> absl::Status {
    if (absl::Status s = deliver(w, i, p, len); !s.ok()) return s;
    if (cache != nullptr) MaybeAdmit(d, i, p);
    return absl::OkStatus();
  };
  // Whole units only: a unit is served from the cache when it holds every
  // block of it.
  auto all_cached = [&](size_t u) {
    if (cache == nullptr) return false;
    for (uint32_t i = units[u].first; i < units[u].last; ++i) {
      if (CachedBlock(d, i) == nullptr) return false;
    }
    return true;
  };
  auto deliver_cached = [&](int w, size_t u) -> absl::Status {
    current_unit_[w] = static_cast<uint32_t>(u);
    for (uint32_t i = units[u].first; i < units[u].last; ++i) {
      if (absl::Status s = deliver(w, i, cached(i), dir[i].length); !s.ok()) {
        return s;
      }
    }
    return absl::OkStatus();
  };
  std::atomic<size_t> next{0};
  const int window = options_.prefetch_window;
  return pool_->Run([&](int w) -> absl::Status {
    auto sync = [&](size_t u) {
      if (all_cached(u)) return deliver_cached(w, u);
      current_unit_[w] = static_cast<uint32_t>(u);
      return FetchBlocks(w, d, units[u], /*headers_only=*/false,
                         [&](uint32_t i, const std::byte* p, uint32_t len) {
                           return deliver_fetched(w, i, p, len);
                         });
    };
    if (window <= 1) {
      for (size_t u = next.fetch_add(1); u < units.size();
           u = next.fetch_add(1)) {
        if (absl::Status s = sync(u); !s.ok()) return s;
      }
      return absl::OkStatus();
    }
    // Prefetch: keep up to `window` units' READs posted; compute on the
    // oldest while the others are in flight.
    transport::Endpoint& ep = pool_->endpoint(w);
    std::vector<std::vector<uint64_t>>& slots = prefetch_buffers_[w];
    const uint64_t capacity = options_.batch_bytes;
    struct InFlight {
      size_t unit;
      int slot;  // -1: too big for a slot, fetched synchronously instead
      uint64_t ticket;
    };
    std::vector<InFlight> queue;
    std::vector<int> free_slots;
    for (int k = window - 1; k >= 0; --k) free_slots.push_back(k);
    auto post_next = [&]() -> bool {
      size_t u = next.fetch_add(1);
      if (u >= units.size()) return false;
      uint64_t total = 0;
      for (uint32_t i = units[u].first; i < units[u].last; ++i) {
        total += dir[i].length;
      }
      if (total > capacity || all_cached(u)) {  // sync() handles both
        queue.push_back({u, -1, 0});
        return true;
      }
      int slot = free_slots.back();
      free_slots.pop_back();
      auto* base = reinterpret_cast<std::byte*>(slots[slot].data());
      // Only the blocks the cache does not hold.
      for (uint32_t i = units[u].first, at = 0; i < units[u].last; ++i) {
        if (cache != nullptr && CachedBlock(d, i) != nullptr) continue;
        RemoteGraph::Location loc = graph_.Locate(d, dir[i]);
        ep.Read(loc.node, loc.region, loc.offset, base + at, dir[i].length);
        at += dir[i].length;
      }
      queue.push_back({u, slot, ep.Post()});
      uint64_t depth = ep.outstanding();
      uint64_t seen = max_outstanding_.load(std::memory_order_relaxed);
      while (depth > seen &&
             !max_outstanding_.compare_exchange_weak(seen, depth)) {
      }
      return true;
    };
    while (true) {
      while (static_cast<int>(queue.size()) < window && !free_slots.empty() &&
             post_next()) {
      }
      if (queue.empty()) break;
      InFlight f = queue.front();
      queue.erase(queue.begin());
      if (f.slot < 0) {
        if (absl::Status s = sync(f.unit); !s.ok()) return s;
        continue;
      }
      if (absl::Status s = ep.Wait(f.ticket); !s.ok()) return s;
      current_unit_[w] = static_cast<uint32_t>(f.unit);
      auto* base = reinterpret_cast<const std::byte*>(slots[f.slot].data());
      for (uint32_t i = units[f.unit].first, at = 0; i < units[f.unit].last;
           ++i) {
        // Cached when posted: slots are never evicted, so still cached.
        if (const std::byte* p = cached(i); p != nullptr) {
          if (absl::Status s = deliver(w, i, p, dir[i].length); !s.ok()) {
            return s;
          }
          continue;
        }
        if (absl::Status s = deliver_fetched(w, i, base + at, dir[i].length);
            !s.ok()) {
          return s;
        }
        at += dir[i].length;
      }
      free_slots.push_back(f.slot);
    }
    return absl::OkStatus();
  });
}

bool Engine::EnsureHeaders(Direction d) {
  const int k = static_cast<int>(d);
  if (header_state_[k] != 0) return header_state_[k] == 1;
  header_state_[k] = -1;
  if (options_.cache_policy != CachePolicy::kGraphAware) return false;
  std::span<const DirectoryEntry> dir = graph_.directory(d);
  uint64_t count = 0;  // split pieces repeat their vertex: sum per entry
  for (const DirectoryEntry& e : dir) count += e.vertex_count + 1;
  const uint64_t bytes = count * 4 + dir.size() * 8;
  if (budget_.available() < bytes + MinimumCacheBytes() ||
      !budget_.TryReserve(bytes)) {
    return false;
  }
  header_reservation_ += bytes;
  header_start_[k].resize(dir.size());
  header_offsets_[k].resize(count);
  uint64_t at = 0;
  for (size_t i = 0; i < dir.size(); ++i) {
    header_start_[k][i] = at;
    at += dir[i].vertex_count + 1;
  }
  // Fill by directory entry (FetchBlocks names each block's entry).
  std::atomic<size_t> next{0};
  std::span<const Unit> units = all_units_[k];
  absl::Status s = pool_->Run([&](int w) -> absl::Status {
    for (size_t u = next.fetch_add(1); u < units.size();
         u = next.fetch_add(1)) {
      absl::Status st = FetchBlocks(
          w, d, units[u], /*headers_only=*/true,
          [&](uint32_t i, const std::byte* p, uint32_t) -> absl::Status {
            std::memcpy(header_offsets_[k].data() + header_start_[k][i],
                        p + sizeof(store::BlockHeader),
                        4 * (dir[i].vertex_count + 1));
            return absl::OkStatus();
          });
      if (!st.ok()) return st;
    }
    return absl::OkStatus();
  });
  if (!s.ok()) {
    budget_.Release(bytes);
    header_reservation_ -= bytes;
    header_offsets_[k].clear();
    return false;
  }
  header_state_[k] = 1;
  return true;
}

Engine::BlockCache* Engine::EnsureBlockCache(Direction d) {
  BlockCache& c = block_cache_[static_cast<int>(d)];
  if (c.state != 0) return c.state == 1 ? &c : nullptr;
  c.state = -1;
  if (options_.cache_policy != CachePolicy::kGraphAware) return nullptr;
  std::span<const DirectoryEntry> dir = graph_.directory(d);
  // All of this direction's blocks if what is left holds them, else half
  // of it (the other direction may want the rest); keeping the page
  // cache's minimum.
  uint64_t left = budget_.available();
  left = left > MinimumCacheBytes() ? left - MinimumCacheBytes() : 0;
  uint64_t all = 0;
  for (const DirectoryEntry& e : dir) all += e.length;
  uint64_t space = budget_.unlimited() || all <= left ? all : left / 2;
  // Hot first: blocks by average degree (edges per vertex), highest first.
  std::vector<uint32_t> order(dir.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  auto edges = [&](uint32_t i) {
    uint64_t next = i + 1 < dir.size() ? dir[i + 1].first_edge : num_arcs();
    return next - dir[i].first_edge;
  };
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    return edges(a) * dir[b].vertex_count > edges(b) * dir[a].vertex_count;
  });
  c.preferred.assign(dir.size(), 0);
  uint64_t total = 0;
  for (uint32_t i : order) {
    if (total + dir[i].length > space) break;
    total += dir[i].length;
    c.preferred[i] = 1;
  }
  if (total == 0 || !budget_.TryReserve(total)) return nullptr;
  c.reserved = total;
  c.memory = AlignedBuffer(total, AlignedBuffer::Init::kUninitialized);
  c.slot.assign(dir.size(), -1);
  c.state = 1;
  return &c;
}

void Engine::MaybeAdmit(Direction d, uint32_t i, const std::byte* block) {
  BlockCache& c = block_cache_[static_cast<int>(d)];
  if (c.state != 1 || !c.preferred[i] || c.slot[i] >= 0) return;
  // Second touch: a block read once may never be read again (one pass of a
  // traversal); copying it in would cost a copy and fresh memory for
  // nothing. Admit it when it is read again.
  // (preferred: 1 = not yet read, 2 = read once.)
  if (std::atomic_ref<uint8_t>(c.preferred[i])
          .exchange(2, std::memory_order_relaxed) == 1) {
    return;
  }
  uint32_t len = graph_.directory(d)[i].length;
  uint64_t at = c.used.fetch_add(len);
  if (at + len > c.memory.size()) return;  // cannot happen: sized to fit
  std::memcpy(c.memory.data() + at, block, len);
  std::atomic_ref<int64_t>(c.slot[i]).store(static_cast<int64_t>(at),
                                            std::memory_order_release);
}

absl::Status Engine::ScanFrontierUnits(
    Direction d, std::span<const Unit> units, const Frontier& frontier,
    const std::function<void(int, VertexId, std::span<const VertexId>,
                             std::span<const Weight>)>& fn) {
  const bool spans = EnsureHeaders(d);
  if (!spans) {
    return ScanUnits(d, units, [&](int w, const BlockView& b) {
      for (uint32_t i = 0; i < b.vertex_count(); ++i) {
        VertexId v = b.first_vertex() + i;
        if (frontier.Contains(v)) fn(w, v, b.targets(v), Weights(b, v));
      }
    });
  }
  const int k = static_cast<int>(d);
  EnsureBlockCache(d);
  std::span<const DirectoryEntry> dir = graph_.directory(d);
  const bool weighted = graph_.weighted();
  const uint32_t edge_bytes = weighted ? 8 : 4;
  std::atomic<size_t> next{0};
  return pool_->Run([&](int w) -> absl::Status {
    transport::Endpoint& ep = pool_->endpoint(w);
    std::vector<uint64_t>& buffer = buffers_[w];
    const uint64_t capacity = options_.batch_bytes;
    if (buffer.size() * 8 < capacity) buffer.resize(capacity / 8);
    auto* base = reinterpret_cast<std::byte*>(buffer.data());
    // What the buffer holds: whole blocks, or one vertex's edge range.
    struct Item {
      uint32_t entry;
      VertexId v;      // span items
      uint64_t at;     // byte offset in the buffer
      uint32_t edges;  // span items
      bool whole;
      const std::byte* cached = nullptr;  // a whole block from the cache
    };
    std::vector<Item> items;
    uint64_t used = 0;
    auto deliver = [&]() -> absl::Status {
      if (items.empty()) return absl::OkStatus();
      if (absl::Status s = ep.Flush(); !s.ok()) return s;
      for (const Item& it : items) {
        if (it.whole) {
          const std::byte* bytes = it.cached ? it.cached : base + it.at;
          absl::StatusOr<BlockView> b =
              BlockView::Parse({bytes, dir[it.entry].length});
          if (!b.ok()) return b.status();
          if (!it.cached) MaybeAdmit(d, it.entry, bytes);
          for (uint32_t i = 0; i < b->vertex_count(); ++i) {
            VertexId v = b->first_vertex() + i;
            if (frontier.Contains(v)) fn(w, v, b->targets(v), Weights(*b, v));
          }
        } else {
          const auto* t = reinterpret_cast<const VertexId*>(base + it.at);
          std::span<const Weight> wt;
          if (weighted) {
            wt = {reinterpret_cast<const Weight*>(base + it.at +
                                                  4 * uint64_t{it.edges}),
                  it.edges};
          }
          fn(w, it.v, {t, it.edges}, wt);
        }
      }
      items.clear();
      used = 0;
      return absl::OkStatus();
    };
    for (size_t u = next.fetch_add(1); u < units.size();
         u = next.fetch_add(1)) {
      for (uint32_t i = units[u].first; i < units[u].last; ++i) {
        const DirectoryEntry& e = dir[i];
        const uint32_t* off = header_offsets_[k].data() + header_start_[k][i];
        uint64_t need = 0, vertices = 0;
        for (uint32_t j = 0; j < e.vertex_count; ++j) {
          if (!frontier.Contains(e.first_vertex + j)) continue;
          ++vertices;
          need += (uint64_t{off[j + 1] - off[j]} * edge_bytes + 7) / 8 * 8;
        }
        if (vertices == 0) continue;
        if (const std::byte* cached = CachedBlock(d, i); cached != nullptr) {
          block_hits_.fetch_add(1, std::memory_order_relaxed);
          block_bytes_saved_.fetch_add(e.length, std::memory_order_relaxed);
          items.push_back({i, 0, 0, 0, true, cached});
          continue;
        }
        RemoteGraph::Location loc = graph_.Locate(d, e);
        // Whole block when the frontier needs half of it or more, or many
        // small pieces of it; else just the frontier's edge ranges.
        const bool whole = need * 2 >= e.length || vertices > 32;
        const uint64_t bytes = whole ? e.length : need;
        if (used + bytes > capacity) {
          if (absl::Status s = deliver(); !s.ok()) return s;
        }
        if (whole) {
          ep.Read(loc.node, loc.region, loc.offset, base + used, e.length);
          items.push_back({i, 0, used, 0, true});
          used += e.length;
          continue;
        }
        const uint64_t targets_at =
            loc.offset + sizeof(store::BlockHeader) + 4 * (e.vertex_count + 1);
        const uint32_t block_edges = off[e.vertex_count];
        for (uint32_t j = 0; j < e.vertex_count; ++j) {
          VertexId v = e.first_vertex + j;
          if (!frontier.Contains(v)) continue;
          uint32_t edges = off[j + 1] - off[j];
          if (edges > 0) {
            ep.Read(loc.node, loc.region, targets_at + 4 * uint64_t{off[j]},
                    base + used, 4 * edges);
            if (weighted) {
              ep.Read(
                  loc.node, loc.region,
                  targets_at + 4 * uint64_t{block_edges} + 4 * uint64_t{off[j]},
                  base + used + 4 * uint64_t{edges}, 4 * edges);
            }
          }
          items.push_back({i, v, used, edges, false});
          used += (uint64_t{edges} * edge_bytes + 7) / 8 * 8;
        }
      }
      // Deliver at the end of each unit so a vertex's pieces stay in order
      // on this worker and units do not wait on each other.
      if (absl::Status s = deliver(); !s.ok()) return s;
    }
    return absl::OkStatus();
  });
}

absl::Status Engine::ScanHeaders(
    Direction d,
    const std::function<void(int, VertexId, uint32_t, const uint32_t*)>&
        per_block) {
  std::span<const DirectoryEntry> dir = graph_.directory(d);
  std::span<const Unit> units = all_units_[static_cast<int>(d)];
  std::atomic<size_t> next{0};
  return pool_->Run([&](int w) -> absl::Status {
    for (size_t u = next.fetch_add(1); u < units.size();
         u = next.fetch_add(1)) {
      absl::Status s = FetchBlocks(
          w, d, units[u], /*headers_only=*/true,
          [&](uint32_t i, const std::byte* p, uint32_t) -> absl::Status {
            store::BlockHeader h;
            std::memcpy(&h, p, sizeof(h));
            if (h.magic != store::kBlockMagic ||
                h.first_vertex != dir[i].first_vertex ||
                h.vertex_count != dir[i].vertex_count) {
              return absl::DataLossError(
                  "block header disagrees with directory");
            }
            const auto* off = reinterpret_cast<const uint32_t*>(
                p + sizeof(store::BlockHeader));
            if (off[0] != 0 || off[h.vertex_count] != h.edge_count) {
              return absl::DataLossError("block offsets are malformed");
            }
            per_block(w, h.first_vertex, h.vertex_count, off);
            return absl::OkStatus();
          });
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  });
}

void Engine::BeginSuperstep(const char* direction, uint64_t frontier_size) {
  if (superstep_ == 0 && stats_.supersteps.empty()) {
    stats_.setup = pool_->TotalStats();
    stats_.setup_cache = CacheTotals();
  }
  step_start_ = std::chrono::steady_clock::now();
  step_base_ = pool_->TotalStats();
  step_cache_base_ = CacheTotals();
  max_outstanding_ = 0;
  SuperstepStats s;
  s.index = superstep_ + 1;
  s.direction = direction;
  s.frontier = frontier_size;
  stats_.supersteps.push_back(s);
}

absl::Status Engine::EndSuperstep() {
  for (StateArrayBase* a : arrays_) {
    if (absl::Status s = a->Commit(superstep_ + 1); !s.ok()) {
      failed_ = true;
      return s;
    }
  }
  ++superstep_;
  // Barrier: count in, then wait until every compute node has (one today).
  constexpr uint64_t kComputeNodes = 1;
  transport::Endpoint& ep = pool_->endpoint(0);
  uint64_t old = 0;
  ep.FetchAndAdd(barrier_.node, barrier_.id, 0, 1, &old);
  if (absl::Status s = ep.Flush(); !s.ok()) {
    failed_ = true;
    return s;
  }
  uint64_t target = kComputeNodes * static_cast<uint64_t>(superstep_);
  uint64_t seen = old + 1;
  while (seen < target) {
    ep.Read(barrier_.node, barrier_.id, 0, &seen, 8);
    if (absl::Status s = ep.Flush(); !s.ok()) {
      failed_ = true;
      return s;
    }
  }
  SuperstepStats& s = stats_.supersteps.back();
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                            step_start_)
                  .count();
  s.ops = pool_->TotalStats() - step_base_;
  s.cache = CacheTotals() - step_cache_base_;
  s.max_outstanding = max_outstanding_.load();
  return absl::OkStatus();
}

void Engine::Finish() {
  stats_.total = pool_->TotalStats();
  stats_.total_cache = CacheTotals();
  stats_.cache_peak_bytes = budget_.peak();
  if (stats_.supersteps.empty()) stats_.setup = stats_.total;
  stats_.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_)
          .count();
}

}  // namespace dmg::compute

#include "compute_node/block_source.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_format.h"

namespace dmg::compute {

using store::BlockView;
using store::DirectoryEntry;

namespace {

uint32_t HeaderLength(const DirectoryEntry& e) {
  return static_cast<uint32_t>(sizeof(store::BlockHeader) +
                               4 * (e.vertex_count + 1));
}

uint64_t Align8(uint64_t x) { return (x + 7) / 8 * 8; }

std::span<const store::Weight> WeightsOf(const BlockView& b, VertexId v) {
  return b.weighted() ? b.weights(v) : std::span<const store::Weight>();
}

// Delivers the pieces of frontier vertices in a whole block.
absl::Status DeliverFrontier(std::span<const DirectoryEntry> dir,
                             uint32_t entry, const std::byte* bytes,
                             const Frontier& frontier,
                             const BlockSource::PerPiece& per_piece) {
  absl::StatusOr<BlockView> b =
      ParseBlock(dir, entry, bytes, dir[entry].length);
  if (!b.ok()) return b.status();
  for (uint32_t k = 0; k < b->vertex_count(); ++k) {
    VertexId v = b->first_vertex() + k;
    if (frontier.Contains(v)) per_piece(v, b->targets(v), WeightsOf(*b, v));
  }
  return absl::OkStatus();
}

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

absl::StatusOr<BlockView> ParseBlock(std::span<const DirectoryEntry> dir,
                                     uint32_t entry, const std::byte* bytes,
                                     uint32_t length) {
  absl::StatusOr<BlockView> block = BlockView::Parse({bytes, length});
  if (!block.ok()) return block.status();
  // first_edge tells the pieces of one split vertex apart.
  if (block->first_vertex() != dir[entry].first_vertex ||
      block->vertex_count() != dir[entry].vertex_count ||
      block->first_edge() != dir[entry].first_edge ||
      block->split_piece() !=
          ((dir[entry].flags & store::kEntryFlagSplitPiece) != 0)) {
    return absl::DataLossError(absl::StrFormat(
        "block %d read from memory node %d disagrees with the directory", entry,
        dir[entry].memory_node));
  }
  return block;
}

absl::Status BlockSource::Stream(int worker, Direction d,
                                 std::span<const Unit> units,
                                 UnitScheduler::Cursor& cursor,
                                 const std::function<void(size_t)>& on_unit,
                                 const PerBlock& per_block) {
  for (std::optional<size_t> u = cursor.Next(); u; u = cursor.Next()) {
    on_unit(*u);
    if (absl::Status s = Read(worker, d, units[*u], false, per_block);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status BlockSource::ReadFrontier(int worker, Direction d,
                                       const Unit& unit,
                                       const Frontier& frontier,
                                       const HeaderCache*,
                                       const PerPiece& per_piece) {
  return Read(worker, d, unit, false,
              [&](uint32_t entry, const std::byte* bytes, uint32_t) {
                return DeliverFrontier(directory(d), entry, bytes, frontier,
                                       per_piece);
              });
}

// ---------------------------------------------------------------------------
// Graph-aware

GraphAwareBlockSource::GraphAwareBlockSource(const RemoteGraph& graph,
                                             WorkerPool& pool,
                                             uint64_t batch_bytes,
                                             int prefetch_window)
    : BlockSource(graph),
      pool_(pool),
      batch_bytes_(batch_bytes),
      window_(std::max(1, prefetch_window)),
      buffers_(pool.size()) {
  // Buffers are reserved by the planner, allocated on first use.
  for (auto& slots : buffers_) slots.resize(window_ > 1 ? window_ + 1 : 1);
}

std::byte* GraphAwareBlockSource::buffer(int worker, int slot) {
  std::vector<uint64_t>& b = buffers_[worker][slot];
  if (b.size() * 8 < batch_bytes_) b.resize(batch_bytes_ / 8);
  return reinterpret_cast<std::byte*>(b.data());
}

bool GraphAwareBlockSource::AllCached(Direction d, const Unit& unit) const {
  HotBlockCache* cache = hot(d);
  if (cache == nullptr) return false;
  for (uint32_t i = unit.first; i < unit.last; ++i) {
    if (cache->Peek(i) == nullptr) return false;
  }
  return true;
}

absl::Status GraphAwareBlockSource::DeliverFetched(Direction d, uint32_t entry,
                                                   const std::byte* bytes,
                                                   const PerBlock& per_block) {
  absl::Status s = per_block(entry, bytes, directory(d)[entry].length);
  if (s.ok() && hot(d) != nullptr) hot(d)->Offer(entry, bytes);
  return s;
}

absl::Status GraphAwareBlockSource::Read(int worker, Direction d,
                                         const Unit& unit, bool headers_only,
                                         const PerBlock& per_block) {
  std::span<const DirectoryEntry> dir = directory(d);
  HotBlockCache* cache = headers_only ? nullptr : hot(d);
  std::byte* base = buffer(worker, 0);
  auto length = [&](uint32_t i) {
    return headers_only ? HeaderLength(dir[i]) : dir[i].length;
  };
  transport::Endpoint& ep = pool_.endpoint(worker);
  // Offsets in the buffer of the blocks of one batch; -1: from the cache.
  std::vector<int64_t> at;
  for (uint32_t first = unit.first; first < unit.last;) {
    // As many blocks as fit in the buffer (at least one), in one batch.
    uint32_t last = first;
    uint64_t total = 0;
    at.clear();
    while (last < unit.last) {
      if (cache != nullptr && cache->Peek(last) != nullptr) {
        at.push_back(-1);
      } else {
        uint64_t len = Align8(length(last));
        if (total > 0 && total + len > batch_bytes_) break;
        const RemoteGraph::Location loc = graph_.Locate(d, dir[last]);
        ep.Read(loc.node, loc.region, loc.offset, base + total, length(last));
        at.push_back(static_cast<int64_t>(total));
        total += len;
      }
      ++last;
    }
    if (absl::Status s = ep.Flush(); !s.ok()) return s;
    for (uint32_t i = first; i < last; ++i) {
      const int64_t off = at[i - first];
      absl::Status s;
      if (off < 0) {
        s = per_block(i, cache->Lookup(i), dir[i].length);
      } else if (headers_only) {
        s = per_block(i, base + off, length(i));
      } else {
        s = DeliverFetched(d, i, base + off, per_block);
      }
      if (!s.ok()) return s;
    }
    first = last;
  }
  return absl::OkStatus();
}

absl::Status GraphAwareBlockSource::Stream(
    int worker, Direction d, std::span<const Unit> units,
    UnitScheduler::Cursor& cursor, const std::function<void(size_t)>& on_unit,
    const PerBlock& per_block) {
  if (window_ <= 1) {
    return BlockSource::Stream(worker, d, units, cursor, on_unit, per_block);
  }
  // Prefetch: keep up to window_ units' READs posted; compute on the oldest
  // while the others are in flight. Only blocks the cache does not hold are
  // READ; a unit too large for a slot, or wholly cached, is read (or served)
  // synchronously when its turn comes.
  std::span<const DirectoryEntry> dir = directory(d);
  HotBlockCache* cache = hot(d);
  transport::Endpoint& ep = pool_.endpoint(worker);
  struct InFlight {
    size_t unit;
    int slot;  // -1: synchronous
    uint64_t ticket;
    std::vector<int64_t> at;  // per block: offset in the slot, -1 cached
  };
  std::vector<InFlight> queue;
  std::vector<int> free_slots;
  for (int k = window_; k >= 1; --k) free_slots.push_back(k);
  auto post_next = [&]() -> bool {
    std::optional<size_t> u = cursor.Next();
    if (!u) return false;
    const Unit& unit = units[*u];
    InFlight f{*u, -1, 0, {}};
    uint64_t total = 0;
    for (uint32_t i = unit.first; i < unit.last; ++i) {
      bool cached = cache != nullptr && cache->Peek(i) != nullptr;
      f.at.push_back(cached ? -1 : static_cast<int64_t>(total));
      if (!cached) total += Align8(dir[i].length);
    }
    if (total == 0 || total > batch_bytes_) {
      queue.push_back(std::move(f));
      return true;
    }
    f.slot = free_slots.back();
    free_slots.pop_back();
    std::byte* base = buffer(worker, f.slot);
    for (uint32_t i = unit.first; i < unit.last; ++i) {
      if (f.at[i - unit.first] < 0) continue;
      const RemoteGraph::Location loc = graph_.Locate(d, dir[i]);
      ep.Read(loc.node, loc.region, loc.offset, base + f.at[i - unit.first],
              dir[i].length);
    }
    f.ticket = ep.Post();
    uint64_t depth = ep.outstanding();
    uint64_t seen = max_outstanding_.load(std::memory_order_relaxed);
    while (depth > seen &&
           !max_outstanding_.compare_exchange_weak(seen, depth)) {
    }
    queue.push_back(std::move(f));
    return true;
  };
  // On an error, batches still posted must complete before their slots
  // (and this frame) go away.
  auto drain = [&](absl::Status s) {
    for (const InFlight& f : queue) {
      if (f.slot >= 0) (void)ep.Wait(f.ticket);
    }
    return s;
  };
  while (true) {
    while (static_cast<int>(queue.size()) < window_ && !free_slots.empty() &&
           post_next()) {
    }
    if (queue.empty()) break;
    InFlight f = std::move(queue.front());
    queue.erase(queue.begin());
    on_unit(f.unit);
    const Unit& unit = units[f.unit];
    if (f.slot < 0) {
      if (absl::Status s = Read(worker, d, unit, false, per_block); !s.ok()) {
        return drain(s);
      }
      continue;
    }
    if (absl::Status s = ep.Wait(f.ticket); !s.ok()) return drain(s);
    const std::byte* base = buffer(worker, f.slot);
    for (uint32_t i = unit.first; i < unit.last; ++i) {
      const int64_t off = f.at[i - unit.first];
      // Cached when posted: the hot-block cache never evicts.
      absl::Status s = off < 0 ? per_block(i, cache->Lookup(i), dir[i].length)
                               : DeliverFetched(d, i, base + off, per_block);
      if (!s.ok()) return drain(s);
    }
    free_slots.push_back(f.slot);
  }
  return absl::OkStatus();
}

absl::Status GraphAwareBlockSource::ReadFrontier(int worker, Direction d,
                                                 const Unit& unit,
                                                 const Frontier& frontier,
                                                 const HeaderCache* headers,
                                                 const PerPiece& per_piece) {
  if (headers == nullptr) {
    return BlockSource::ReadFrontier(worker, d, unit, frontier, nullptr,
                                     per_piece);
  }
  std::span<const DirectoryEntry> dir = directory(d);
  HotBlockCache* cache = hot(d);
  const bool weighted = graph_.weighted();
  const uint32_t edge_bytes = weighted ? 8 : 4;
  transport::Endpoint& ep = pool_.endpoint(worker);
  std::byte* base = buffer(worker, 0);
  // What the buffer holds: whole blocks (from it or the cache), or one
  // vertex's edge range.
  struct Item {
    uint32_t entry;
    bool whole;
    bool fetched;            // whole blocks: READ now (else from the cache)
    const std::byte* bytes;  // whole blocks
    VertexId v;              // ranges
    uint64_t at;             // ranges: offset in the buffer
    uint32_t edges;          // ranges
  };
  std::vector<Item> items;
  uint64_t used = 0;
  auto deliver = [&]() -> absl::Status {
    if (items.empty()) return absl::OkStatus();
    if (absl::Status s = ep.Flush(); !s.ok()) return s;
    for (const Item& it : items) {
      if (it.whole) {
        absl::Status s =
            DeliverFrontier(dir, it.entry, it.bytes, frontier, per_piece);
        if (!s.ok()) return s;
        if (cache != nullptr && it.fetched) {
          cache->Offer(it.entry, it.bytes);
        }
        continue;
      }
      const auto* t = reinterpret_cast<const VertexId*>(base + it.at);
      std::span<const store::Weight> wt;
      if (weighted) {
        wt = {reinterpret_cast<const store::Weight*>(base + it.at +
                                                     4 * uint64_t{it.edges}),
              it.edges};
      }
      per_piece(it.v, {t, it.edges}, wt);
    }
    items.clear();
    used = 0;
    return absl::OkStatus();
  };
  for (uint32_t i = unit.first; i < unit.last; ++i) {
    const DirectoryEntry& e = dir[i];
    const uint32_t* off = headers->offsets(i);
    uint64_t need = 0, vertices = 0;
    for (uint32_t j = 0; j < e.vertex_count; ++j) {
      if (!frontier.Contains(e.first_vertex + j)) continue;
      ++vertices;
      need += Align8(uint64_t{off[j + 1] - off[j]} * edge_bytes);
    }
    if (vertices == 0) continue;
    if (const std::byte* cached = cache ? cache->Lookup(i) : nullptr) {
      items.push_back({i, true, false, cached, 0, 0, 0});
      continue;
    }
    const RemoteGraph::Location loc = graph_.Locate(d, e);
    // Whole block when the frontier needs half of it or more, or many
    // small pieces of it; else just the frontier's edge ranges.
    const bool whole = need * 2 >= e.length || vertices > 32;
    if (used + (whole ? Align8(e.length) : need) > batch_bytes_) {
      if (absl::Status s = deliver(); !s.ok()) return s;
    }
    if (whole) {
      ep.Read(loc.node, loc.region, loc.offset, base + used, e.length);
      items.push_back({i, true, true, base + used, 0, 0, 0});
      used += Align8(e.length);
      continue;
    }
    const uint64_t targets_at =
        loc.offset + sizeof(store::BlockHeader) + 4 * (e.vertex_count + 1);
    const uint32_t block_edges = off[e.vertex_count];
    for (uint32_t j = 0; j < e.vertex_count; ++j) {
      VertexId v = e.first_vertex + j;
      if (!frontier.Contains(v)) continue;
      const uint32_t edges = off[j + 1] - off[j];
      if (edges > 0) {
        ep.Read(loc.node, loc.region, targets_at + 4 * uint64_t{off[j]},
                base + used, 4 * edges);
        if (weighted) {
          ep.Read(loc.node, loc.region,
                  targets_at + 4 * uint64_t{block_edges} + 4 * uint64_t{off[j]},
                  base + used + 4 * uint64_t{edges}, 4 * edges);
        }
      }
      items.push_back({i, false, false, nullptr, v, used, edges});
      used += Align8(uint64_t{edges} * edge_bytes);
    }
  }
  // Delivered at the end of the unit, so a vertex's pieces stay in order.
  return deliver();
}

// ---------------------------------------------------------------------------
// page_lru

PageLruBlockSource::PageLruBlockSource(const RemoteGraph& graph,
                                       WorkerPool& pool, PageCache& cache)
    : BlockSource(graph), cache_(cache), buffers_(pool.size()) {
  for (uint32_t k = 0; k < graph.num_memory_nodes(); ++k) {
    const uint64_t bytes = graph.store_bytes(k);
    store_pages_.push_back(std::make_unique<StorePageSource>(pool, k, bytes));
    cache_.Attach(store_pages_.back().get(),
                  (bytes + PageCache::kPageBytes - 1) / PageCache::kPageBytes);
  }
}

PageLruBlockSource::~PageLruBlockSource() {
  for (auto& source : store_pages_) cache_.Drop(source.get());
}

absl::Status PageLruBlockSource::Read(int worker, Direction d, const Unit& unit,
                                      bool headers_only,
                                      const PerBlock& per_block) {
  std::span<const DirectoryEntry> dir = directory(d);
  std::vector<uint64_t>& buffer = buffers_[worker];
  for (uint32_t i = unit.first; i < unit.last; ++i) {
    const uint32_t length = headers_only ? HeaderLength(dir[i]) : dir[i].length;
    if (buffer.size() * 8 < length) buffer.resize((length + 7) / 8);
    auto* dst = reinterpret_cast<std::byte*>(buffer.data());
    // Page by page through the cache: no batching, no bypass.
    const RemoteGraph::Location loc = graph_.Locate(d, dir[i]);
    PageSource* src = store_pages_[loc.node].get();
    for (uint64_t off = loc.offset, end = loc.offset + length; off < end;) {
      const uint64_t page = off / PageCache::kPageBytes;
      const uint64_t in_page = off % PageCache::kPageBytes;
      const uint64_t n = std::min(PageCache::kPageBytes - in_page, end - off);
      absl::StatusOr<std::byte*> p = cache_.Pin(worker, src, page);
      if (!p.ok()) return p.status();
      std::memcpy(dst, *p + in_page, n);
      cache_.Unpin(src, page, false);
      dst += n;
      off += n;
    }
    if (absl::Status s =
            per_block(i, reinterpret_cast<std::byte*>(buffer.data()), length);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace dmg::compute

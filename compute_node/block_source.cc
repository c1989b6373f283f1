#include "compute_node/block_source.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "store/block_codec.h"

namespace dmg::compute {

using store::BlockView;
using store::DirectoryEntry;

uint32_t BlockHeaderLength(const DirectoryEntry& e) {
  return static_cast<uint32_t>(sizeof(store::BlockHeader) +
                               4 * (e.vertex_count + 1));
}

namespace {

uint64_t Align8(uint64_t x) { return (x + 7) / 8 * 8; }

// A sparse push READs members' offsets and edge ranges; ones closer than
// these share one READ (the bytes between cost less than another
// operation): offsets up to 4 words apart, ranges up to 16 bytes. (16
// words and 64 bytes read 11.0 MB in a road-NY BFS at 5% against 6.7 MB,
// no faster.)
constexpr int64_t kOffsetGapWords = 4;
constexpr uint64_t kRangeGapBytes = 16;

std::span<const store::Weight> WeightsOf(const BlockView& b, VertexId v) {
  return b.weighted() ? b.weights(v) : std::span<const store::Weight>();
}

// Delivers the pieces of frontier vertices in a whole block.
void DeliverFrontier(const BlockView& b, const Frontier& frontier,
                     const BlockSource::PerPiece& per_piece) {
  frontier.ForEachIn(
      b.first_vertex(), uint64_t{b.first_vertex()} + b.vertex_count(),
      [&](VertexId v) { per_piece(v, b.targets(v), WeightsOf(b, v)); });
}

// As above for block bytes not yet validated (fetched), or cached ones
// (`cache`: their view is kept).
absl::Status DeliverFrontier(std::span<const DirectoryEntry> dir,
                             uint32_t entry, const std::byte* bytes,
                             const Frontier& frontier,
                             const BlockSource::PerPiece& per_piece,
                             const HotBlockCache* cache = nullptr) {
  if (const BlockView* view = cache ? cache->View(entry, bytes) : nullptr) {
    DeliverFrontier(*view, frontier, per_piece);
    return absl::OkStatus();
  }
  absl::StatusOr<BlockView> b =
      ParseBlock(dir, entry, bytes, dir[entry].length);
  if (!b.ok()) return b.status();
  DeliverFrontier(*b, frontier, per_piece);
  return absl::OkStatus();
}

// One memory node's store region seen as pages (page_lru reads blocks
// through these). Read-only.
class StorePageSource : public PageSource {
 public:
  StorePageSource(WorkerPool& pool, uint32_t node, uint64_t bytes)
      : pool_(pool), node_(node), bytes_(bytes) {}
  absl::Status FetchPages(int worker, uint64_t first, uint64_t count,
                          std::byte* const* dst, uint8_t*) override {
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
  // A compressed block is decoded into this thread's buffer: its view lasts
  // until the thread's next ParseBlock (each caller uses one view at a
  // time, inside its callback).
  thread_local store::DecodeBuffer decoded;
  const DirectoryEntry& e = dir[entry];
  auto disagrees = [&](std::string_view what) {
    return absl::DataLossError(absl::StrFormat(
        "block %d (vertex %d) read from memory node %d disagrees with the "
        "directory: %s",
        entry, e.first_vertex, e.memory_node, what));
  };
  // The vertices the directory tiles: 0..n-1.
  const uint64_t n =
      uint64_t{dir.back().first_vertex} + dir.back().vertex_count;
  store::BlockHeader raw{};
  if (length >= sizeof(raw)) std::memcpy(&raw, bytes, sizeof(raw));
  if (length >= sizeof(raw) && raw.length != e.length) {
    return disagrees(
        absl::StrFormat("length %d, not %d", raw.length, e.length));
  }
  absl::StatusOr<BlockView> block =
      store::ParseAnyBlock({bytes, length}, decoded, n);
  if (!block.ok()) {
    return absl::Status(
        block.status().code(),
        absl::StrFormat("block %d read from memory node %d: %s", entry,
                        e.memory_node, block.status().message()));
  }
  // first_edge tells the pieces of one split vertex apart.
  if (block->first_vertex() != e.first_vertex ||
      block->vertex_count() != e.vertex_count ||
      block->first_edge() != e.first_edge ||
      block->split_piece() != ((e.flags & store::kEntryFlagSplitPiece) != 0)) {
    return disagrees("another block's header");
  }
  return block;
}

namespace {

// A block header READ for directory entry e is e's: else the entry or the
// bytes were forged (an offset that points elsewhere reads another
// block's header, or none).
bool HeaderAgrees(const DirectoryEntry& e, const store::BlockHeader& h) {
  const bool split = e.flags & store::kEntryFlagSplitPiece;
  return h.magic == store::kBlockMagic && h.first_vertex == e.first_vertex &&
         h.vertex_count == e.vertex_count && h.first_edge == e.first_edge &&
         ((h.flags & store::kBlockFlagSplitPiece) != 0) == split &&
         h.length == e.length;
}

}  // namespace

absl::StatusOr<const uint32_t*> ParseBlockHeader(
    std::span<const DirectoryEntry> dir, uint32_t entry,
    const std::byte* bytes) {
  const DirectoryEntry& e = dir[entry];
  auto bad = [&](std::string_view what) {
    return absl::DataLossError(
        absl::StrFormat("block %d (vertex %d) read from memory node %d: %s",
                        entry, e.first_vertex, e.memory_node, what));
  };
  store::BlockHeader h;
  std::memcpy(&h, bytes, sizeof(h));
  if (!HeaderAgrees(e, h))
    return bad("its header disagrees with the directory");
  // The edges fit the length: a plain block's exactly; a compressed
  // block's as its decoder bounds them (a segment of d edges holds at
  // least d - 1 bits).
  const bool packed = h.flags & store::kBlockFlagCompressed;
  const uint64_t fixed =
      packed ? store::StreamAt(h.vertex_count,
                               h.flags & store::kBlockFlagNarrowOffsets)
             : 0;
  if (packed ? fixed > h.length ||
                   h.edge_count > 8 * (uint64_t{h.length} - fixed) + 1
             : h.length !=
                   store::BlockBytes(h.vertex_count, h.edge_count,
                                     h.flags & store::kBlockFlagWeighted)) {
    return bad(absl::StrFormat("length %d does not hold its %d edges", h.length,
                               h.edge_count));
  }
  const auto* off =
      reinterpret_cast<const uint32_t*>(bytes + sizeof(store::BlockHeader));
  if (off[0] != 0 || off[h.vertex_count] != h.edge_count) {
    return bad("its offsets do not span its edges");
  }
  // Monotone: one pass with no branch per vertex.
  bool decreasing = false;
  for (uint32_t i = 0; i < h.vertex_count; ++i) {
    decreasing |= off[i] > off[i + 1];
  }
  if (decreasing) return bad("its offsets decrease");
  return off;
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

// Targets of vertex v (or of several, from v on) of block `entry` came
// over the wire without their block: an id past the last vertex is corrupt
// data, never an index. One pass, no branch per edge.
absl::Status CheckTargets(std::span<const VertexId> targets, uint64_t n,
                          std::span<const DirectoryEntry> dir, uint32_t entry,
                          VertexId v) {
  if (!store::AnyIdAtLeast(targets, n)) return absl::OkStatus();
  const VertexId most = *std::max_element(targets.begin(), targets.end());
  return absl::DataLossError(absl::StrFormat(
      "block %d (vertex %d) read from memory node %d: edge target %d of "
      "vertex %d is not a vertex (the graph has %d)",
      entry, dir[entry].first_vertex, dir[entry].memory_node, most, v, n));
}

absl::Status BlockSource::ReadRanges(int worker, Direction d,
                                     std::span<const EdgeRange> ranges,
                                     const HeaderCache&,
                                     const PerRange& per_range) {
  std::span<const DirectoryEntry> dir = directory(d);
  for (size_t k = 0; k < ranges.size();) {
    const uint32_t entry = ranges[k].entry;
    size_t end = k;
    while (end < ranges.size() && ranges[end].entry == entry) ++end;
    absl::Status s =
        Read(worker, d, Unit{entry, entry + 1}, false,
             [&](uint32_t, const std::byte* bytes, uint32_t) -> absl::Status {
               // ParseBlock checked every target.
               absl::StatusOr<BlockView> b =
                   ParseBlock(dir, entry, bytes, dir[entry].length);
               if (!b.ok()) return b.status();
               for (size_t j = k; j < end; ++j) {
                 const EdgeRange& r = ranges[j];
                 if (!b->contains(r.v) || r.from > r.to ||
                     r.to > b->targets(r.v).size()) {
                   return absl::InternalError("edge range outside its block");
                 }
                 std::span<const VertexId> t =
                     b->targets(r.v).subspan(r.from, r.to - r.from);
                 std::span<const store::Weight> w = WeightsOf(*b, r.v);
                 if (!w.empty()) w = w.subspan(r.from, r.to - r.from);
                 per_range(j, t, w);
               }
               return absl::OkStatus();
             });
    if (!s.ok()) return s;
    k = end;
  }
  return absl::OkStatus();
}

absl::Status BlockSource::ReadSpans(int worker, Direction d,
                                    std::span<const EdgeSpan> spans,
                                    const HeaderCache&,
                                    const PerSpans& per_batch) {
  std::span<const DirectoryEntry> dir = directory(d);
  std::vector<const VertexId*> targets;
  std::vector<const store::Weight*> weights;
  for (size_t k = 0; k < spans.size();) {
    const uint32_t entry = spans[k].entry;
    size_t end = k;
    while (end < spans.size() && spans[end].entry == entry) ++end;
    absl::Status s = Read(
        worker, d, Unit{entry, entry + 1}, false,
        [&](uint32_t, const std::byte* bytes, uint32_t) -> absl::Status {
          // ParseBlock checked every target.
          absl::StatusOr<BlockView> b =
              ParseBlock(dir, entry, bytes, dir[entry].length);
          if (!b.ok()) return b.status();
          targets.clear();
          weights.clear();
          for (size_t j = k; j < end; ++j) {
            const EdgeSpan& r = spans[j];
            if (r.begin > r.end || r.end > b->edge_count()) {
              return absl::InternalError("edge span outside its block");
            }
            targets.push_back(b->all_targets().data() + r.begin);
            weights.push_back(b->weighted() ? b->all_weights().data() + r.begin
                                            : nullptr);
          }
          per_batch(k, end, targets, weights);
          return absl::OkStatus();
        });
    if (!s.ok()) return s;
    k = end;
  }
  return absl::OkStatus();
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
      buffers_(pool.size()),
      offset_scratch_(pool.size()) {
  // Buffers are reserved by the planner, allocated on first use.
  for (auto& slots : buffers_) slots.resize(window_ > 1 ? window_ + 1 : 1);
  for (int d = 0; d < 2; ++d) {
    const size_t entries = graph.directory(static_cast<Direction>(d)).size();
    header_checked_[d] = std::make_unique<std::atomic<uint8_t>[]>(entries);
    for (size_t i = 0; i < entries; ++i) header_checked_[d][i] = 0;
  }
}

std::byte* GraphAwareBlockSource::buffer(int worker, int slot) {
  std::unique_ptr<uint64_t[]>& b = buffers_[worker][slot];
  if (b == nullptr) {
    b = std::make_unique_for_overwrite<uint64_t[]>((batch_bytes_ + 7) / 8);
  }
  return reinterpret_cast<std::byte*>(b.get());
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
  // Whole-block reads outside the frontier path are scans of every block
  // of a range (ScanBlocks, neighbourhoods): full scans for admission.
  if (s.ok() && hot(d) != nullptr) {
    hot(d)->Offer(entry, bytes, /*full_scan=*/true);
  }
  return s;
}

absl::Status GraphAwareBlockSource::Read(int worker, Direction d,
                                         const Unit& unit, bool headers_only,
                                         const PerBlock& per_block) {
  std::span<const DirectoryEntry> dir = directory(d);
  // A cached block serves a header read too: its bytes begin with the
  // header (a push's header scan after a pull filled the hot set READs
  // nothing).
  HotBlockCache* cache = hot(d);
  std::byte* base = buffer(worker, 0);
  auto length = [&](uint32_t i) {
    return headers_only ? BlockHeaderLength(dir[i]) : dir[i].length;
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
      if (off < 0 && headers_only) {
        s = per_block(i, cache->Peek(i), length(i));
      } else if (off < 0) {
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
    // Batches really in flight on the wire (1 on synchronous backends,
    // which run a batch inside Post), not merely posted and not waited for.
    // The only caller of TakeMaxInFlight on this endpoint.
    uint64_t depth = ep.TakeMaxInFlight();
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

// One ReadFrontier call: the unit, the frontier, the worker's endpoint,
// buffer and scratch, and the batch being filled, shared by its steps.
class GraphAwareBlockSource::FrontierReader {
 public:
  FrontierReader(GraphAwareBlockSource& source, int worker, Direction d,
                 const Unit& unit, const Frontier& frontier,
                 const HeaderCache* headers, const PerPiece& per_piece);

  // Hands the pieces of the frontier's members in the unit to per_piece,
  // in order: plans the READs (which byte ranges of which blocks, in
  // batches that fit the worker's buffer), then executes the plan.
  absl::Status Run();

 private:
  // What the buffer holds: whole blocks (from it or the cache, `fetched`
  // when READ now), or one vertex's edge range (`at` in the buffer,
  // `edges` long).
  using Item = OffsetScratch::Item;
  // A block read by its members' edge ranges.
  struct SparseBlock {
    uint32_t entry = 0;
    // What a member's offsets may not pass: the block's edges, or for a
    // compressed block the bytes of its stream.
    uint64_t edges_in_block = 0;
    size_t run = 0;    // the run of READ offsets RangeOf is at
    absl::Status bad;  // the first member whose offsets were outside
    RemoteGraph::Location loc{};
    uint64_t targets_at = 0;
    // The open span: bytes [lo, hi) of the block's targets (or stream),
    // landing at base + at; members close to it join it.
    struct Span {
      bool open = false;
      uint64_t lo = 0, hi = 0, at = 0;
    } span;
    uint64_t span_base = 0;
  };

  // Where e's stream starts in its block.
  uint64_t StreamStart(const DirectoryEntry& e) const {
    return store::StreamAt(e.vertex_count, narrow_);
  }
  // The bytes of e's stream (0 for a directory entry too short to hold its
  // offsets: it came over the wire).
  uint64_t StreamBytes(const DirectoryEntry& e) const {
    return e.length > StreamStart(e) ? e.length - StreamStart(e) : 0;
  }
  // Entry i's edges, as the directory says.
  uint64_t BlockEdges(uint32_t i) const {
    return store::EntryEdges(dir_, i, graph_.num_arcs());
  }
  // Whole block when the frontier needs half of it or more; else just the
  // frontier's edge ranges, those closer than kRangeGapBytes in one READ
  // (unweighted: a member's weights follow its targets in the buffer, so
  // weighted ranges go one by one, and many of them read the block whole).
  // Reading whole blocks for more than 32 members read 12x road-NY's edge
  // bytes in a BFS at 5% (35 of 84.9 MB, with the depth pages the rest).
  bool ReadsWhole(const DirectoryEntry& e, uint64_t need,
                  uint64_t vertices) const {
    return need * 2 >= e.length || (weighted_ && vertices > 32) || keep_;
  }

  // Without cached headers, the members' offsets of the blocks read
  // sparsely are READ first (one round trip for the unit; one READ per run
  // of consecutive members) into this worker's scratch, then their edge
  // ranges, as with headers. Before, such blocks were read whole for a few
  // members (road-NY BFS at 5%: 31 blocks of 16 KiB a level for ~14
  // members each). Scratch is transient, like frontiers: not in the bound.
  absl::Status ReadMemberOffsets();

  // Decides which blocks of the unit are read by ranges and plans the runs
  // of their members' offsets to READ; returns the offsets' count.
  uint64_t PlanOffsetRuns();

  // Queues the READs of the planned offset runs and of the headers of the
  // blocks not checked yet.
  void PostOffsetReads(uint64_t total);

  // The headers READ are their entries' blocks'; marks them checked.
  absl::Status CheckSparseHeaders();

  // A READ of the plan: `bytes` at `offset` of a node's region, into the
  // worker's buffer (or its offset scratch).
  using PlannedRead = OffsetScratch::PlannedRead;
  void PlanRead(uint32_t node, uint32_t region, uint64_t offset,
                std::byte* into, uint64_t bytes) {
    reads_.push_back(
        {node, region, offset, into, static_cast<uint32_t>(bytes)});
  }
  // Ends the batch being planned: the next one reuses the buffer from 0.
  void NextBatch();
  // The executor: each batch's READs in one round trip, then its items to
  // per_piece.
  absl::Status Execute();
  // Posts reads_[begin, end) and waits for them.
  absl::Status PostAndWait(size_t begin, size_t end);
  // Hands a batch's items to per_piece.
  absl::Status Deliver(size_t begin, size_t end);

  // One member's edge range (or compressed segment) from the buffer.
  absl::Status DeliverRange(const Item& it);

  // Queues block i's reads (whole, or its members' ranges) or its cached
  // copy.
  absl::Status ReadBlock(uint32_t i);

  // Member j's edge range [lo, hi) of block b (offsets outside it: an empty
  // range, and b.bad).
  void RangeOf(SparseBlock& b, uint32_t j, uint32_t* lo, uint32_t* hi);

  // Queues a READ of block i whole (after delivering a full batch).
  absl::Status ReadWholeBlock(uint32_t i, const RemoteGraph::Location& loc);

  // Queues READs of the frontier members' edge ranges of block b (the
  // members ReadBlock listed, with their ranges).
  absl::Status ReadMemberRanges(SparseBlock& b);

  // Queues the READ of b's open span, if any.
  void CloseSpan(SparseBlock& b);

  // Unweighted: targets (or a segment's bytes) [lo, hi) of the block, in
  // the open span or a new one.
  absl::Status AddToSpan(SparseBlock& b, VertexId v, uint32_t lo, uint32_t hi);

  // Weighted, compressed: the segment's bytes [lo, hi) of the stream.
  absl::Status ReadSegment(SparseBlock& b, VertexId v, uint32_t lo,
                           uint32_t hi);

  // Weighted: the member's targets [lo, hi), then its weights.
  absl::Status ReadWeightedRange(SparseBlock& b, VertexId v, uint32_t lo,
                                 uint32_t hi);

  GraphAwareBlockSource& source_;
  const RemoteGraph& graph_;
  const Direction d_;
  const Unit& unit_;
  const Frontier& frontier_;
  const HeaderCache* headers_;
  const PerPiece& per_piece_;
  const std::span<const DirectoryEntry> dir_;
  HotBlockCache* const cache_;
  const bool keep_;
  const bool weighted_;
  const uint32_t edge_bytes_;
  const bool packed_;
  const bool narrow_;
  const uint32_t index_width_;
  const uint64_t n_;
  transport::Endpoint& ep_;
  std::byte* const base_;
  OffsetScratch& sc_;
  std::atomic<uint8_t>* const checked_;
  // The plan: READs and items in order, cut into batches; a batch ends
  // at these indices of reads_ and items_ (the worker's scratch).
  using Batch = OffsetScratch::Batch;
  PlanVector<PlannedRead>& reads_;
  PlanVector<Item>& items_;
  std::vector<Batch>& batches_;
  uint64_t used_ = 0;  // bytes of the buffer the open batch fills
};
GraphAwareBlockSource::FrontierReader::FrontierReader(
    GraphAwareBlockSource& source, int worker, Direction d, const Unit& unit,
    const Frontier& frontier, const HeaderCache* headers,
    const PerPiece& per_piece)
    : source_(source),
      graph_(source.graph_),
      d_(d),
      unit_(unit),
      frontier_(frontier),
      headers_(headers),
      per_piece_(per_piece),
      dir_(source.directory(d)),
      cache_(source.hot(d)),
      keep_(source.FrontierKeepsBlocks(d)),
      weighted_(graph_.weighted()),
      edge_bytes_(weighted_ ? 8 : 4),
      // Compressed blocks: a member's piece is its segment of the stream,
      // found by the block's byte offsets (not in the header cache, which
      // holds edge offsets: it sizes nothing here), and decoded on
      // arrival.
      packed_(graph_.compressed()),
      // The layout's width of byte offsets (the memory node checked every
      // block has it; a block that lied decodes to an error).
      narrow_(store::NarrowOffsets(graph_.block_size())),
      index_width_(packed_ ? store::OffsetWidth(narrow_) : 4),
      n_(graph_.num_vertices()),
      ep_(source.pool_.endpoint(worker)),
      base_(source.buffer(worker, 0)),
      sc_(source.offset_scratch_[worker]),
      checked_(source.header_checked_[static_cast<int>(d)].get()),
      reads_(sc_.reads),
      items_(sc_.items),
      batches_(sc_.batches) {
  if (packed_) headers_ = nullptr;
  reads_.clear();
  items_.clear();
  batches_.clear();
}

absl::Status GraphAwareBlockSource::FrontierReader::Run() {
  sc_.runs.clear();
  sc_.sparse.clear();
  sc_.first_run.assign(unit_.last - unit_.first, -1);
  sc_.planned.clear();
  sc_.first_member.resize(unit_.last - unit_.first);
  if (headers_ == nullptr) {
    DMG_RETURN_IF_ERROR(ReadMemberOffsets());
  }
  for (uint32_t i = unit_.first; i < unit_.last; ++i) {
    DMG_RETURN_IF_ERROR(ReadBlock(i));
  }
  // Before any range is READ: each member's offsets were checked as
  // ReadBlock took them, and now the headers READ with them.
  if (headers_ == nullptr) DMG_RETURN_IF_ERROR(CheckSparseHeaders());
  NextBatch();
  return Execute();
}

absl::Status GraphAwareBlockSource::FrontierReader::ReadMemberOffsets() {
  const uint64_t total = PlanOffsetRuns();
  if (sc_.runs.empty()) return absl::OkStatus();
  PostOffsetReads(total);
  DMG_RETURN_IF_ERROR(PostAndWait(0, reads_.size()));
  reads_.clear();
  return absl::OkStatus();
}

uint64_t GraphAwareBlockSource::FrontierReader::PlanOffsetRuns() {
  uint64_t total = 0;
  for (uint32_t i = unit_.first; i < unit_.last; ++i) {
    const DirectoryEntry& e = dir_[i];
    const uint64_t block_end = uint64_t{e.first_vertex} + e.vertex_count;
    if (cache_ != nullptr && cache_->Peek(i) != nullptr) continue;
    // One walk of the block's frontier bits plans its runs; a block read
    // whole (or with no member) takes them back.
    const size_t member_mark = sc_.planned.size(), run_mark = sc_.runs.size();
    const uint64_t total_mark = total;
    int64_t last = -2;  // the previous member's index in the block
    frontier_.ForEachIn(e.first_vertex, block_end, [&](VertexId v) {
      sc_.planned.push_back(v);
      const int64_t j = v - e.first_vertex;
      if (last >= 0 && j - last <= kOffsetGapWords + 1) {
        // Offsets up to j + 1: a few more words (the ones between are
        // read too, and not used), one READ fewer.
        sc_.runs.back().count += j - last;
        total += j - last;
      } else {
        sc_.runs.push_back({i, static_cast<uint32_t>(j), 2, total});
        total += 2;
      }
      last = j;
    });
    const uint64_t vertices = sc_.planned.size() - member_mark;
    if (vertices == 0) continue;
    // Estimated at the block's mean degree.
    const uint64_t mean =
        packed_ ? Align8(StreamBytes(e) / e.vertex_count + 1)
                : Align8(BlockEdges(i) * edge_bytes_ / e.vertex_count +
                         edge_bytes_);
    if (ReadsWhole(e, vertices * mean, vertices)) {
      sc_.planned.truncate(member_mark);
      sc_.runs.resize(run_mark);
      total = total_mark;
      continue;
    }
    sc_.first_run[i - unit_.first] = static_cast<int64_t>(run_mark);
    sc_.first_member[i - unit_.first] = static_cast<uint32_t>(member_mark);
    if (!checked_[i].load(std::memory_order_relaxed)) sc_.sparse.push_back(i);
  }
  return total;
}

void GraphAwareBlockSource::FrontierReader::PostOffsetReads(uint64_t total) {
  // Offsets land as `index_width`-byte words, at word r.at of a run.
  sc_.offsets.resize((total * index_width_ + 3) / 4);
  auto* words = reinterpret_cast<std::byte*>(sc_.offsets.data());
  for (const OffsetScratch::Run& r : sc_.runs) {
    const DirectoryEntry& e = dir_[r.entry];
    const RemoteGraph::Location loc = graph_.Locate(d_, e);
    const uint64_t index_at = packed_ ? store::ByteOffsetsAt(e.vertex_count)
                                      : sizeof(store::BlockHeader);
    PlanRead(loc.node, loc.region,
             loc.offset + index_at + uint64_t{index_width_} * r.first,
             words + index_width_ * r.at, index_width_ * r.count);
  }
  // Each such block's header too (once a job), in the same round
  // trip: the ranges are cut from its offsets without the rest of the
  // block, so the header is what shows that these bytes are the
  // entry's block (and have the edge count the ranges are bounded by).
  // (At every step it was 5% more READs: road-NY BFS, 5% cache.)
  sc_.headers.resize(sc_.sparse.size());
  for (size_t k = 0; k < sc_.sparse.size(); ++k) {
    const RemoteGraph::Location loc = graph_.Locate(d_, dir_[sc_.sparse[k]]);
    PlanRead(loc.node, loc.region, loc.offset,
             reinterpret_cast<std::byte*>(&sc_.headers[k]),
             sizeof(store::BlockHeader));
  }
}

absl::Status GraphAwareBlockSource::FrontierReader::CheckSparseHeaders() {
  for (size_t k = 0; k < sc_.sparse.size(); ++k) {
    const uint32_t i = sc_.sparse[k];
    const store::BlockHeader& h = sc_.headers[k];
    if (!HeaderAgrees(dir_[i], h) ||
        ((h.flags & store::kBlockFlagCompressed) != 0) != packed_ ||
        (!packed_ && h.edge_count != BlockEdges(i))) {
      return absl::DataLossError(absl::StrFormat(
          "block %d (vertex %d) read from memory node %d: its header "
          "disagrees with the directory",
          i, dir_[i].first_vertex, dir_[i].memory_node));
    }
    checked_[i].store(1, std::memory_order_relaxed);
  }
  return absl::OkStatus();
}

void GraphAwareBlockSource::FrontierReader::NextBatch() {
  if (batches_.empty() ? !items_.empty()
                       : items_.size() > batches_.back().items_end) {
    batches_.push_back({reads_.size(), items_.size()});
  }
  used_ = 0;
}

absl::Status GraphAwareBlockSource::FrontierReader::Execute() {
  size_t reads = 0, items = 0;
  for (const Batch& batch : batches_) {
    DMG_RETURN_IF_ERROR(PostAndWait(reads, batch.reads_end));
    // Delivered in plan order, so a vertex's pieces stay in order.
    DMG_RETURN_IF_ERROR(Deliver(items, batch.items_end));
    reads = batch.reads_end;
    items = batch.items_end;
  }
  return absl::OkStatus();
}

absl::Status GraphAwareBlockSource::FrontierReader::PostAndWait(size_t begin,
                                                                size_t end) {
  if (begin == end) return absl::OkStatus();
  for (size_t k = begin; k < end; ++k) {
    const PlannedRead& r = reads_[k];
    ep_.Read(r.node, r.region, r.offset, r.into, r.bytes);
  }
  return ep_.Flush();
}

absl::Status GraphAwareBlockSource::FrontierReader::Deliver(size_t begin,
                                                            size_t end) {
  for (size_t k = begin; k < end; ++k) {
    const Item& it = items_[k];
    if (it.whole) {
      absl::Status s = DeliverFrontier(dir_, it.entry, it.bytes, frontier_,
                                       per_piece_, cache_);
      if (!s.ok()) return s;
      if (cache_ != nullptr && it.fetched) {
        cache_->Offer(it.entry, it.bytes, /*full_scan=*/keep_);
      }
      continue;
    }
    DMG_RETURN_IF_ERROR(DeliverRange(it));
  }
  return absl::OkStatus();
}

absl::Status GraphAwareBlockSource::FrontierReader::DeliverRange(
    const Item& it) {
  if (packed_) {
    // A segment: `edges` is its bytes; decoding checks it.
    DMG_RETURN_IF_ERROR(store::DecodeSegment(
        {base_ + it.at, it.edges}, it.v, weighted_, sc_.targets, sc_.weights));
    DMG_RETURN_IF_ERROR(CheckTargets(sc_.targets, n_, dir_, it.entry, it.v));
    per_piece_(it.v, sc_.targets, sc_.weights);
    return absl::OkStatus();
  }
  const auto* t = reinterpret_cast<const VertexId*>(base_ + it.at);
  // Ranges came over the wire without their block: check the ids.
  if (absl::Status s = CheckTargets({t, it.edges}, n_, dir_, it.entry, it.v);
      !s.ok()) {
    return s;
  }
  std::span<const store::Weight> wt;
  if (weighted_) {
    wt = {reinterpret_cast<const store::Weight*>(base_ + it.at +
                                                 4 * uint64_t{it.edges}),
          it.edges};
  }
  per_piece_(it.v, {t, it.edges}, wt);
  return absl::OkStatus();
}

absl::Status GraphAwareBlockSource::FrontierReader::ReadBlock(uint32_t i) {
  const DirectoryEntry& e = dir_[i];
  const uint64_t block_end = uint64_t{e.first_vertex} + e.vertex_count;
  // Units may span blocks the frontier does not touch.
  if (!frontier_.AnyIn(e.first_vertex, block_end)) return absl::OkStatus();
  if (const std::byte* cached = cache_ ? cache_->Lookup(i) : nullptr) {
    items_.push_back({i, true, false, cached, 0, 0, 0});
    return absl::OkStatus();
  }
  SparseBlock b;
  b.entry = i;
  b.edges_in_block = packed_ ? StreamBytes(e)
                     : headers_ != nullptr
                         ? headers_->offsets(i)[e.vertex_count]
                         : BlockEdges(i);
  // The members' edge ranges [lo, hi) within the block, from the headers
  // or the offsets READ above (checked: they came over the wire).
  const int64_t first_run = sc_.first_run[i - unit_.first];
  b.run = first_run < 0 ? 0 : static_cast<size_t>(first_run);
  uint64_t need = 0;
  bool whole = first_run < 0;  // without headers: as decided above
  // The members and their ranges, kept for ReadMemberRanges: as planned
  // with the offsets READ, or one walk of the frontier's bits for the
  // block.
  sc_.members.clear();
  auto add = [&](VertexId v) {
    uint32_t lo, hi;
    RangeOf(b, v - e.first_vertex, &lo, &hi);
    sc_.members.push_back({v, lo, hi});
    need += Align8(uint64_t{hi - lo} * edge_bytes_);
  };
  if (!whole) {
    for (size_t k = sc_.first_member[i - unit_.first];
         k < sc_.planned.size() && sc_.planned[k] < block_end; ++k) {
      add(sc_.planned[k]);
    }
  } else if (headers_ != nullptr) {
    frontier_.ForEachIn(e.first_vertex, block_end, add);
  }
  if (headers_ != nullptr) whole = ReadsWhole(e, need, sc_.members.size());
  b.loc = graph_.Locate(d_, e);
  if (whole) return ReadWholeBlock(i, b.loc);
  return ReadMemberRanges(b);
}

void GraphAwareBlockSource::FrontierReader::RangeOf(SparseBlock& b, uint32_t j,
                                                    uint32_t* lo,
                                                    uint32_t* hi) {
  const uint32_t i = b.entry;
  if (headers_ != nullptr) {
    const uint32_t* off = headers_->offsets(i);
    *lo = off[j];
    *hi = off[j + 1];
    return;
  }
  size_t& run = b.run;
  while (sc_.runs[run].first + sc_.runs[run].count - 1 <= j) ++run;
  const uint64_t at = sc_.runs[run].at + (j - sc_.runs[run].first);
  if (index_width_ == 2) {
    const auto* off = reinterpret_cast<const uint16_t*>(sc_.offsets.data());
    *lo = off[at];
    *hi = off[at + 1];
  } else {
    *lo = sc_.offsets[at];
    *hi = sc_.offsets[at + 1];
  }
  if (*lo > *hi || *hi > b.edges_in_block) {
    *lo = *hi = 0;
    if (b.bad.ok()) {
      const DirectoryEntry& e = dir_[i];
      b.bad = absl::DataLossError(absl::StrFormat(
          "block %d read from memory node %d: offsets of vertex %d are "
          "outside its %d edges",
          i, e.memory_node, e.first_vertex + j, b.edges_in_block));
    }
  }
}

absl::Status GraphAwareBlockSource::FrontierReader::ReadWholeBlock(
    uint32_t i, const RemoteGraph::Location& loc) {
  const DirectoryEntry& e = dir_[i];
  if (used_ + Align8(e.length) > source_.batch_bytes_) NextBatch();
  PlanRead(loc.node, loc.region, loc.offset, base_ + used_, e.length);
  items_.push_back({i, true, true, base_ + used_, 0, 0, 0});
  used_ += Align8(e.length);
  return absl::OkStatus();
}

absl::Status GraphAwareBlockSource::FrontierReader::ReadMemberRanges(
    SparseBlock& b) {
  const DirectoryEntry& e = dir_[b.entry];
  b.targets_at =
      b.loc.offset + sizeof(store::BlockHeader) + 4 * (e.vertex_count + 1);
  absl::Status status;
  b.span_base = packed_ ? b.loc.offset + StreamStart(e) : b.targets_at;
  if (!b.bad.ok()) return b.bad;
  for (const OffsetScratch::Member& m : sc_.members) {
    if (!weighted_) {
      status = AddToSpan(b, m.v, m.lo, m.hi);
    } else if (packed_) {
      status = ReadSegment(b, m.v, m.lo, m.hi);
    } else {
      status = ReadWeightedRange(b, m.v, m.lo, m.hi);
    }
    if (!status.ok()) return status;
  }
  CloseSpan(b);
  return status;
}

void GraphAwareBlockSource::FrontierReader::CloseSpan(SparseBlock& b) {
  if (!b.span.open) return;
  PlanRead(b.loc.node, b.loc.region, b.span_base + b.span.lo, base_ + b.span.at,
           b.span.hi - b.span.lo);
  used_ = b.span.at + Align8(b.span.hi - b.span.lo);
  b.span.open = false;
}

absl::Status GraphAwareBlockSource::FrontierReader::AddToSpan(SparseBlock& b,
                                                              VertexId v,
                                                              uint32_t lo,
                                                              uint32_t hi) {
  const uint64_t b0 = packed_ ? lo : 4 * uint64_t{lo};
  const uint64_t b1 = packed_ ? hi : 4 * uint64_t{hi};
  const uint32_t count = hi - lo;  // edges, or a segment's bytes
  if (b0 == b1) {                  // nothing to read
    items_.push_back({b.entry, false, false, nullptr, v, used_, 0});
    return absl::OkStatus();
  }
  SparseBlock::Span& span = b.span;
  if (span.open && b0 >= span.hi && b0 - span.hi <= kRangeGapBytes &&
      span.at + Align8(b1 - span.lo) <= source_.batch_bytes_) {
    span.hi = b1;
  } else {
    CloseSpan(b);
    if (used_ + Align8(b1 - b0) > source_.batch_bytes_) NextBatch();
    span = {true, b0, b1, used_};
  }
  items_.push_back(
      {b.entry, false, false, nullptr, v, span.at + (b0 - span.lo), count});
  return absl::OkStatus();
}

absl::Status GraphAwareBlockSource::FrontierReader::ReadSegment(SparseBlock& b,
                                                                VertexId v,
                                                                uint32_t lo,
                                                                uint32_t hi) {
  const uint32_t bytes = hi - lo;
  if (used_ + Align8(bytes) > source_.batch_bytes_) NextBatch();
  if (bytes > 0) {
    PlanRead(b.loc.node, b.loc.region,
             b.loc.offset + StreamStart(dir_[b.entry]) + lo, base_ + used_,
             bytes);
  }
  items_.push_back({b.entry, false, false, nullptr, v, used_, bytes});
  used_ += Align8(bytes);
  return absl::OkStatus();
}

absl::Status GraphAwareBlockSource::FrontierReader::ReadWeightedRange(
    SparseBlock& b, VertexId v, uint32_t lo, uint32_t hi) {
  const uint32_t edges = hi - lo;
  const uint64_t bytes = Align8(uint64_t{edges} * edge_bytes_);
  if (used_ + bytes > source_.batch_bytes_) NextBatch();
  if (edges > 0) {
    PlanRead(b.loc.node, b.loc.region, b.targets_at + 4 * uint64_t{lo},
             base_ + used_, 4 * edges);
    if (weighted_) {
      PlanRead(b.loc.node, b.loc.region,
               b.targets_at + 4 * b.edges_in_block + 4 * uint64_t{lo},
               base_ + used_ + 4 * uint64_t{edges}, 4 * edges);
    }
  }
  items_.push_back({b.entry, false, false, nullptr, v, used_, edges});
  used_ += bytes;
  return absl::OkStatus();
}

absl::Status GraphAwareBlockSource::ReadFrontier(int worker, Direction d,
                                                 const Unit& unit,
                                                 const Frontier& frontier,
                                                 const HeaderCache* headers,
                                                 const PerPiece& per_piece) {
  return FrontierReader(*this, worker, d, unit, frontier, headers, per_piece)
      .Run();
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
    const uint32_t length =
        headers_only ? BlockHeaderLength(dir[i]) : dir[i].length;
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

// Ranges of one block closer than this many edges share one READ: the gap
// costs fewer bytes than another operation's round-trip bookkeeping.
constexpr uint32_t kMergeGapEdges = 16;

namespace {

// Block `entry`'s view in the hot-block cache (null when not cached). A
// cached block was validated when admitted (ParseBlock: its targets are
// vertices) and is read through its view; one that failed has no view,
// and its error is the reader's.
absl::Status LookUpCached(HotBlockCache* cache,
                          std::span<const DirectoryEntry> dir, uint32_t entry,
                          const BlockView** view) {
  const std::byte* bytes = cache != nullptr ? cache->Lookup(entry) : nullptr;
  *view = bytes != nullptr ? cache->View(entry, bytes) : nullptr;
  if (bytes != nullptr && *view == nullptr) {
    absl::StatusOr<BlockView> b =
        ParseBlock(dir, entry, bytes, dir[entry].length);
    return b.ok() ? absl::InternalError("cached block has no view")
                  : b.status();
  }
  return absl::OkStatus();
}

// Targets READ from block `entry`'s edges [begin, ...) are vertices; the
// error (cold) names the vertex whose edge is not, from the offsets.
absl::Status CheckReadTargets(std::span<const VertexId> t, uint64_t n,
                              std::span<const DirectoryEntry> dir,
                              const HeaderCache& headers, uint32_t entry,
                              uint64_t begin) {
  if (!store::AnyIdAtLeast(t, n)) return absl::OkStatus();
  const uint32_t* off = headers.offsets(entry);
  const uint64_t edge =
      begin + (std::max_element(t.begin(), t.end()) - t.begin());
  const uint32_t j = static_cast<uint32_t>(
      std::upper_bound(off, off + dir[entry].vertex_count + 1, edge) - off - 1);
  return CheckTargets(t, n, dir, entry, dir[entry].first_vertex + j);
}

}  // namespace

// One ReadRanges call on blocks that are not compressed: the ranges, the
// worker's endpoint and buffer, and the batch being filled, shared by its
// steps.
class GraphAwareBlockSource::RangeReader {
 public:
  RangeReader(GraphAwareBlockSource& source, int worker, Direction d,
              std::span<const EdgeRange> ranges, const HeaderCache& headers,
              const PerRange& per_range);

  // Hands every range to per_range, in order.
  absl::Status Run();

 private:
  // One READ of block `entry`'s edges [begin, end) (and one of their
  // weights), landing at `at` in the buffer: targets, then weights.
  struct BatchRead {
    uint32_t entry;
    uint64_t begin, end, at;
  };
  // Where a range's edges are: in a READ of this batch, or in a cached
  // block (read < 0).
  struct Item {
    int read;
    uint64_t skip;  // edges before the range's first in its READ
    const VertexId* targets;
    const store::Weight* weights;
  };

  // Buffer bytes of `edges` edges: targets, then weights if any.
  uint64_t Footprint(uint64_t edges) const {
    return Align8(4 * edges) * (edge_bytes_ / 4);
  }

  // Queues READ r (and the READ of its weights).
  void Post(const BatchRead& r);

  // The targets of the batch's READs, once they landed, are vertices.
  absl::Status CheckReads() const;

  // READs the batch and hands ranges [first_, end) to per_range.
  absl::Status Deliver(size_t end);

  // Looked up once per block (a lookup counts a hit of the whole block).
  absl::Status LookUp(uint32_t entry);

  // Extends the last READ when the range (edges [begin, end) of `entry`)
  // follows closely in its block and the batch has room.
  bool ExtendLastRead(uint32_t entry, uint64_t begin, uint64_t end);

  // Places ranges_[k] (checked to lie in its block): in a cached block, in
  // the last READ, or in a new READ.
  absl::Status AddRange(size_t k);

  GraphAwareBlockSource& source_;
  const Direction d_;
  const std::span<const EdgeRange> ranges_;
  const HeaderCache& headers_;
  const PerRange& per_range_;
  const std::span<const DirectoryEntry> dir_;
  HotBlockCache* const cache_;
  const uint64_t n_;
  const bool weighted_;
  const uint64_t edge_bytes_;
  transport::Endpoint& ep_;
  std::byte* const base_;
  std::vector<BatchRead> reads_;
  std::vector<Item> items_;
  size_t first_ = 0;  // ranges[first_..] are in the batch
  uint64_t used_ = 0;
  uint32_t looked_up_ = ~0u;
  const BlockView* cached_ = nullptr;
};
GraphAwareBlockSource::RangeReader::RangeReader(
    GraphAwareBlockSource& source, int worker, Direction d,
    std::span<const EdgeRange> ranges, const HeaderCache& headers,
    const PerRange& per_range)
    : source_(source),
      d_(d),
      ranges_(ranges),
      headers_(headers),
      per_range_(per_range),
      dir_(source.directory(d)),
      cache_(source.hot(d)),
      n_(source.graph_.num_vertices()),
      weighted_(source.graph_.weighted()),
      edge_bytes_(weighted_ ? 8 : 4),
      ep_(source.pool_.endpoint(worker)),
      base_(source.buffer(worker, 0)) {
  items_.reserve(std::min<size_t>(ranges.size(), 1 << 16));
}

absl::Status GraphAwareBlockSource::RangeReader::Run() {
  for (size_t k = 0; k < ranges_.size(); ++k) {
    DMG_RETURN_IF_ERROR(AddRange(k));
  }
  return Deliver(ranges_.size());
}

void GraphAwareBlockSource::RangeReader::Post(const BatchRead& r) {
  const DirectoryEntry& e = dir_[r.entry];
  const RemoteGraph::Location loc = source_.graph_.Locate(d_, e);
  const uint64_t targets_at = loc.offset + sizeof(store::BlockHeader) +
                              4 * (uint64_t{e.vertex_count} + 1);
  const uint32_t bytes = static_cast<uint32_t>(4 * (r.end - r.begin));
  ep_.Read(loc.node, loc.region, targets_at + 4 * r.begin, base_ + r.at, bytes);
  if (weighted_) {
    const uint64_t block_edges = headers_.offsets(r.entry)[e.vertex_count];
    ep_.Read(loc.node, loc.region, targets_at + 4 * (block_edges + r.begin),
             base_ + r.at + Align8(bytes), bytes);
  }
}

absl::Status GraphAwareBlockSource::RangeReader::CheckReads() const {
  for (const BatchRead& r : reads_) {
    const std::span<const VertexId> t(
        reinterpret_cast<const VertexId*>(base_ + r.at), r.end - r.begin);
    DMG_RETURN_IF_ERROR(
        CheckReadTargets(t, n_, dir_, headers_, r.entry, r.begin));
  }
  return absl::OkStatus();
}

absl::Status GraphAwareBlockSource::RangeReader::Deliver(size_t end) {
  if (first_ == end) return absl::OkStatus();
  for (const BatchRead& r : reads_) Post(r);
  if (absl::Status s = ep_.Flush(); !s.ok()) return s;
  DMG_RETURN_IF_ERROR(CheckReads());
  for (size_t k = first_; k < end; ++k) {
    const Item& it = items_[k - first_];
    const uint32_t count = ranges_[k].to - ranges_[k].from;
    const VertexId* t = it.targets;
    const store::Weight* w = it.weights;
    if (it.read >= 0) {
      const BatchRead& r = reads_[it.read];
      const std::byte* at = base_ + r.at;
      t = reinterpret_cast<const VertexId*>(at) + it.skip;
      w = reinterpret_cast<const store::Weight*>(
              at + Align8(4 * (r.end - r.begin))) +
          it.skip;
    }
    // READs were checked as a whole above; cached blocks when admitted.
    std::span<const VertexId> targets(t, count);
    per_range_(k, targets,
               weighted_ ? std::span<const store::Weight>(w, count)
                         : std::span<const store::Weight>());
  }
  reads_.clear();
  items_.clear();
  first_ = end;
  used_ = 0;
  return absl::OkStatus();
}

absl::Status GraphAwareBlockSource::RangeReader::LookUp(uint32_t entry) {
  if (entry == looked_up_) return absl::OkStatus();
  looked_up_ = entry;
  return LookUpCached(cache_, dir_, entry, &cached_);
}

bool GraphAwareBlockSource::RangeReader::ExtendLastRead(uint32_t entry,
                                                        uint64_t begin,
                                                        uint64_t end) {
  if (reads_.empty()) return false;
  BatchRead& last = reads_.back();
  if (last.entry != entry || begin < last.end ||
      begin - last.end > kMergeGapEdges) {
    return false;
  }
  const uint64_t grown = last.at + Footprint(end - last.begin);
  if (grown > source_.batch_bytes_) return false;
  last.end = std::max(last.end, end);
  used_ = grown;
  items_.push_back({static_cast<int>(reads_.size() - 1), begin - last.begin,
                    nullptr, nullptr});
  return true;
}

absl::Status GraphAwareBlockSource::RangeReader::AddRange(size_t k) {
  const EdgeRange& r = ranges_[k];
  const DirectoryEntry& e = dir_[r.entry];
  const uint32_t* off = headers_.offsets(r.entry);
  const uint32_t j = r.v - e.first_vertex;
  if (r.v < e.first_vertex || j >= e.vertex_count || r.from > r.to ||
      r.to > off[j + 1] - off[j]) {
    return absl::InternalError("edge range outside its block");
  }
  const uint64_t begin = off[j] + uint64_t{r.from};
  const uint64_t end = off[j] + uint64_t{r.to};
  DMG_RETURN_IF_ERROR(LookUp(r.entry));
  if (cached_ != nullptr) {
    std::span<const VertexId> targets = cached_->targets(r.v);
    if (r.to > targets.size()) {
      return absl::DataLossError(absl::StrFormat(
          "block %d read from memory node %d: its offsets of vertex %d "
          "disagree with its header read before",
          r.entry, e.memory_node, r.v));
    }
    items_.push_back(
        {-1, 0, targets.data() + r.from,
         weighted_ ? cached_->weights(r.v).data() + r.from : nullptr});
    return absl::OkStatus();
  }
  // Extend the last READ when the range follows closely in its block and
  // the batch has room; else a new READ (after delivering a full batch).
  if (ExtendLastRead(r.entry, begin, end)) return absl::OkStatus();
  if (Footprint(end - begin) > source_.batch_bytes_) {
    return absl::InternalError("edge range larger than a batch");
  }
  if (used_ + Footprint(end - begin) > source_.batch_bytes_) {
    if (absl::Status s = Deliver(k); !s.ok()) return s;
  }
  reads_.push_back({r.entry, begin, end, used_});
  used_ += Footprint(end - begin);
  items_.push_back({static_cast<int>(reads_.size() - 1), 0, nullptr, nullptr});
  return absl::OkStatus();
}

absl::Status GraphAwareBlockSource::ReadRanges(
    int worker, Direction d, std::span<const EdgeRange> ranges,
    const HeaderCache& headers, const PerRange& per_range) {
  // Edge ranges have no fixed place in a compressed block: whole blocks.
  if (graph_.compressed()) {
    return BlockSource::ReadRanges(worker, d, ranges, headers, per_range);
  }
  return RangeReader(*this, worker, d, ranges, headers, per_range).Run();
}

// One ReadSpans call on blocks that are not compressed. With prefetch
// slots, batches alternate between two of them: the next batch's READs are
// in flight while this one's spans are delivered (over a network the
// memory node serves them while the worker visits); without, one batch at
// a time in slot 0.
class GraphAwareBlockSource::SpanReader {
 public:
  SpanReader(GraphAwareBlockSource& source, int worker, Direction d,
             std::span<const EdgeSpan> spans, const HeaderCache& headers,
             const PerSpans& per_batch)
      : source_(source),
        worker_(worker),
        d_(d),
        spans_(spans),
        headers_(headers),
        per_batch_(per_batch),
        dir_(source.directory(d)),
        cache_(source.hot(d)),
        weighted_(source.graph_.weighted()),
        ep_(source.pool_.endpoint(worker)) {}

  absl::Status Run();

 private:
  struct Batch {
    int slot = 0;
    size_t first = 0, end = 0;
    bool posted = false;
    uint64_t ticket = 0;
    std::vector<const VertexId*> targets;
    std::vector<const store::Weight*> weights;
    std::vector<uint32_t> reads;  // spans READ (the others were cached)
  };

  // Buffer bytes of `edges` edges: targets, then weights if any.
  uint64_t Footprint(uint64_t edges) const {
    return Align8(4 * edges) * (weighted_ ? 2 : 1);
  }
  // Fills b with the spans from `first` on that fit its slot, and posts
  // their READs.
  absl::Status Plan(size_t first, Batch& b);
  // Waits for b's READs, checks their targets, hands b's spans over.
  absl::Status Deliver(Batch& b);
  // The span's place in its block, checked against the cached headers.
  absl::Status CheckSpan(const EdgeSpan& r) const;

  GraphAwareBlockSource& source_;
  const int worker_;
  const Direction d_;
  const std::span<const EdgeSpan> spans_;
  const HeaderCache& headers_;
  const PerSpans& per_batch_;
  const std::span<const DirectoryEntry> dir_;
  HotBlockCache* const cache_;
  const bool weighted_;
  transport::Endpoint& ep_;
  uint32_t looked_up_ = ~0u;
  const BlockView* cached_ = nullptr;
};

absl::Status GraphAwareBlockSource::SpanReader::CheckSpan(
    const EdgeSpan& r) const {
  if (r.entry >= dir_.size() || r.begin > r.end ||
      r.end > headers_.offsets(r.entry)[dir_[r.entry].vertex_count] ||
      r.end - r.begin > source_.MaxSpanEdges()) {
    return absl::InternalError("edge span outside its block");
  }
  return absl::OkStatus();
}

absl::Status GraphAwareBlockSource::SpanReader::Plan(size_t first, Batch& b) {
  b.first = first;
  b.posted = false;
  b.targets.clear();
  b.weights.clear();
  b.reads.clear();
  std::byte* const base = source_.buffer(worker_, b.slot);
  uint64_t used = 0;
  size_t k = first;
  for (; k < spans_.size(); ++k) {
    const EdgeSpan& r = spans_[k];
    DMG_RETURN_IF_ERROR(CheckSpan(r));
    if (r.entry != looked_up_) {
      looked_up_ = r.entry;
      DMG_RETURN_IF_ERROR(LookUpCached(cache_, dir_, r.entry, &cached_));
    }
    if (cached_ != nullptr) {
      if (r.end > cached_->edge_count()) {
        return absl::DataLossError(absl::StrFormat(
            "block %d read from memory node %d: its edge count disagrees "
            "with its header read before",
            r.entry, dir_[r.entry].memory_node));
      }
      b.targets.push_back(cached_->all_targets().data() + r.begin);
      b.weights.push_back(weighted_ ? cached_->all_weights().data() + r.begin
                                    : nullptr);
      continue;
    }
    const uint64_t edges = r.end - r.begin;
    if (edges == 0) {  // nothing to READ (a split vertex's empty piece)
      b.targets.push_back(reinterpret_cast<const VertexId*>(base));
      b.weights.push_back(nullptr);
      continue;
    }
    if (used + Footprint(edges) > source_.batch_bytes_) break;
    const DirectoryEntry& e = dir_[r.entry];
    const RemoteGraph::Location loc = source_.graph_.Locate(d_, e);
    const uint64_t targets_at = loc.offset + sizeof(store::BlockHeader) +
                                4 * (uint64_t{e.vertex_count} + 1);
    const uint32_t bytes = static_cast<uint32_t>(4 * edges);
    ep_.Read(loc.node, loc.region, targets_at + 4 * uint64_t{r.begin},
             base + used, bytes);
    b.targets.push_back(reinterpret_cast<const VertexId*>(base + used));
    b.weights.push_back(nullptr);
    if (weighted_) {
      const uint64_t block_edges = headers_.offsets(r.entry)[e.vertex_count];
      std::byte* at = base + used + Align8(bytes);
      ep_.Read(loc.node, loc.region, targets_at + 4 * (block_edges + r.begin),
               at, bytes);
      b.weights.back() = reinterpret_cast<const store::Weight*>(at);
    }
    b.reads.push_back(static_cast<uint32_t>(k));
    used += Footprint(edges);
  }
  b.end = k;
  if (!b.reads.empty()) {
    b.ticket = ep_.Post();
    b.posted = true;
    const uint64_t depth = ep_.TakeMaxInFlight();
    uint64_t seen = source_.max_outstanding_.load(std::memory_order_relaxed);
    while (depth > seen &&
           !source_.max_outstanding_.compare_exchange_weak(seen, depth)) {
    }
  }
  return absl::OkStatus();
}

absl::Status GraphAwareBlockSource::SpanReader::Deliver(Batch& b) {
  if (b.posted) {
    b.posted = false;
    DMG_RETURN_IF_ERROR(ep_.Wait(b.ticket));
    for (uint32_t k : b.reads) {
      const EdgeSpan& r = spans_[k];
      const std::span<const VertexId> t(b.targets[k - b.first],
                                        r.end - r.begin);
      DMG_RETURN_IF_ERROR(CheckReadTargets(t, source_.graph_.num_vertices(),
                                           dir_, headers_, r.entry, r.begin));
    }
  }
  if (b.end > b.first) per_batch_(b.first, b.end, b.targets, b.weights);
  return absl::OkStatus();
}

absl::Status GraphAwareBlockSource::SpanReader::Run() {
  if (source_.window_ < 2) {
    Batch b;
    for (size_t k = 0; k < spans_.size(); k = b.end) {
      DMG_RETURN_IF_ERROR(Plan(k, b));
      if (b.end == k)
        return absl::InternalError("edge span larger than a batch");
      DMG_RETURN_IF_ERROR(Deliver(b));
    }
    return absl::OkStatus();
  }
  Batch now, next;
  now.slot = 1;
  next.slot = 2;
  // A batch still posted when an error returns completes first: its slot
  // is this worker's next READ's.
  auto drain = [&](absl::Status s) {
    if (next.posted) (void)ep_.Wait(next.ticket);
    if (now.posted) (void)ep_.Wait(now.ticket);
    return s;
  };
  absl::Status s = Plan(0, now);
  while (s.ok() && now.first < spans_.size()) {
    if (now.end == now.first) {
      return drain(absl::InternalError("edge span larger than a batch"));
    }
    if (now.end < spans_.size()) s = Plan(now.end, next);
    if (s.ok()) s = Deliver(now);
    if (!s.ok()) break;
    if (now.end == spans_.size()) break;
    std::swap(now, next);
  }
  return s.ok() ? s : drain(s);
}

absl::Status GraphAwareBlockSource::ReadSpans(int worker, Direction d,
                                              std::span<const EdgeSpan> spans,
                                              const HeaderCache& headers,
                                              const PerSpans& per_batch) {
  // Edge spans have no fixed place in a compressed block: whole blocks.
  if (graph_.compressed()) {
    return BlockSource::ReadSpans(worker, d, spans, headers, per_batch);
  }
  return SpanReader(*this, worker, d, spans, headers, per_batch).Run();
}

}  // namespace dmg::compute

// The engine's scans: how a program's operations become block reads —
// dense scans (EdgeMap pull, Gather), push scans over a frontier, header
// scans (degrees), and neighbourhood reads. Each draws its work from the
// unit scheduler and its bytes from the block source.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>

#include "absl/strings/str_format.h"
#include "common/run_clock.h"
#include "common/status_macros.h"
#include "compute_node/engine.h"
#include "coordinator/update_coordinator.h"
#include "workload/partition.h"
#include "workload/steal_policy.h"
#include "workload/work_items.h"

namespace dmg::compute {

namespace {

// Assembles the adjacency of a vertex split over several blocks (pieces
// arrive in order, on one worker). Transient, per worker; not counted in
// the cache bound (like frontiers).
struct Assembler {
  std::vector<VertexId> targets;
  bool open = false;
};

// True if entry i's last vertex goes on in entry i + 1 (a split vertex).
bool ContinuesInNext(std::span<const DirectoryEntry> dir, uint32_t i) {
  return i + 1 < dir.size() &&
         (dir[i + 1].flags & store::kEntryFlagSplitPiece) &&
         dir[i + 1].first_vertex == dir[i].first_vertex;
}

// The offsets of entry i's block from its header bytes (header + offsets,
// as a headers-only read delivers them), checked against the directory:
// they came over the wire.
absl::StatusOr<const uint32_t*> HeaderOffsets(
    std::span<const DirectoryEntry> dir, uint32_t i, const std::byte* p) {
  return ParseBlockHeader(dir, i, p);
}

// Calls fn(v, N(v)) for every whole vertex of a block, assembling split
// vertices across consecutive blocks (`continues`: the block's last vertex
// goes on in the next one).
template <typename Fn>
void ForEachWholeVertex(Assembler& a, const BlockView& b, bool continues,
                        Fn&& fn) {
  const uint32_t count = b.vertex_count();
  for (uint32_t i = 0; i < count; ++i) {
    const VertexId v = b.first_vertex() + i;
    std::span<const VertexId> targets = b.targets(v);
    const bool last = i + 1 == count;
    if (a.open || (continues && last)) {
      a.targets.insert(a.targets.end(), targets.begin(), targets.end());
      a.open = continues && last;
      if (a.open) return;
      fn(v, std::span<const VertexId>(a.targets));
      a.targets.clear();
      continue;
    }
    fn(v, targets);
  }
}

uint64_t ElapsedNs(std::chrono::steady_clock::time_point start) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(
          std::chrono::steady_clock::now() - start)
          .count());
}

// A parallel scan's working time: its wall time less its workers' mean
// run-queue wait (common/run_clock.h).
uint64_t WorkingNs(std::chrono::steady_clock::time_point start,
                   uint64_t waited_ns, int workers) {
  const uint64_t wall = ElapsedNs(start);
  const uint64_t waited = waited_ns / std::max(1, workers);
  return wall > waited ? wall - waited : 0;
}

// A shared scan's measure of this node's share: the time its workers spent
// on its own items (summed over workers, so per worker on average), scaled
// from the items it ran to all of them.
uint64_t ScaledOwnShare(uint64_t ns, uint64_t done, uint64_t all, int workers) {
  if (done == 0) return 0;
  return static_cast<uint64_t>(static_cast<double>(ns) / workers *
                               static_cast<double>(all) /
                               static_cast<double>(done));
}

// Pass 2 of a bottom-up chunk: the rest of the edges of the candidates
// their prefixes left unresolved (`rest`: each one's prefix, edges [0, to)
// of its piece in block `entry`), piece by piece, in order, until a visit
// resolves each.
absl::Status ReadRests(
    BlockSource& source, int w, Direction d,
    std::span<const DirectoryEntry> dir, const HeaderCache& h,
    std::span<const BlockSource::EdgeRange> rest,
    std::vector<BlockSource::EdgeRange>& tail,
    const std::function<bool(int, VertexId, std::span<const VertexId>,
                             std::span<const Weight>)>& visit) {
  tail.clear();
  for (const BlockSource::EdgeRange& r : rest) {
    uint32_t e = r.entry;
    const uint32_t* off = h.offsets(e);
    const uint32_t j = r.v - dir[e].first_vertex;
    const uint32_t len = off[j + 1] - off[j];
    if (r.to < len) tail.push_back({e, r.v, r.to, len});
    while (ContinuesInNext(dir, e)) {
      ++e;
      const uint32_t* next = h.offsets(e);
      if (next[1] > 0) tail.push_back({e, r.v, 0, next[1]});
    }
  }
  VertexId last = ~VertexId{0};
  bool resolved = false;
  return source.ReadRanges(
      w, d, tail, h,
      [&](size_t k, std::span<const VertexId> t, std::span<const Weight> wt) {
        const VertexId v = tail[k].v;
        if (v != last) {
          last = v;
          resolved = false;
        }
        if (!resolved) resolved = visit(w, v, t, wt);
      });
}

// Edges a bottom-up step reads first from each candidate: in a BFS's
// bottom-up levels most unvisited vertices find a frontier neighbour among
// their first few (the frontier then holds the hubs); the rest read on.
constexpr uint32_t kPrefixEdges = 8;
// Prefixes of one block closer than this many edges share a span (one
// READ, one delivery): the gap costs fewer bytes than another operation.
constexpr uint32_t kSpanGapEdges = 16;

// A chunk's prefixes: its candidates in order, and the spans that hold
// their prefixes (span k holds candidates [first[k], first[k + 1])).
struct PrefixPlan {
  std::vector<VertexId> candidates;
  std::vector<BlockSource::EdgeSpan> spans;
  std::vector<uint32_t> first;
  std::vector<uint8_t> is_candidate;

  void Clear() {
    candidates.clear();
    spans.clear();
    first.clear();
  }
  uint32_t End(size_t k) const {
    return k + 1 < first.size() ? first[k + 1]
                                : static_cast<uint32_t>(candidates.size());
  }
};

// Adds block i's candidates among [first_v, end_v) (those with edges in
// the block, or a split vertex's first piece) and their prefixes' spans.
void PlanPrefixes(std::span<const DirectoryEntry> dir, const HeaderCache& h,
                  size_t i, VertexId first_v, VertexId end_v, uint32_t max_span,
                  PrefixPlan& plan) {
  const DirectoryEntry& e = dir[i];
  const uint32_t* off = h.offsets(i);
  const bool split = ContinuesInNext(dir, i);
  const uint32_t lo = e.first_vertex < first_v ? first_v - e.first_vertex : 0;
  const uint32_t hi = static_cast<uint32_t>(
      std::min<uint64_t>(e.vertex_count, uint64_t{end_v} - e.first_vertex));
  // Branch-free: whether a vertex has edges and is a candidate is
  // data-dependent (coin flips on a kron graph), so every vertex is
  // written and only the wanted ones advance the end.
  const size_t c0 = plan.candidates.size();
  plan.candidates.resize(c0 + (hi - lo));
  VertexId* out = plan.candidates.data();
  size_t count = c0;
  for (uint32_t j = lo; j < hi; ++j) {
    const bool last = split && j + 1 == e.vertex_count;
    const VertexId v = e.first_vertex + j;
    out[count] = v;
    count += (off[j + 1] != off[j] || last) & plan.is_candidate[v - first_v];
  }
  plan.candidates.resize(count);
  bool open = false;
  for (size_t c = c0; c < count; ++c) {
    const uint32_t j = out[c] - e.first_vertex;
    const uint32_t begin = off[j];
    const uint32_t end = begin + std::min(off[j + 1] - begin, kPrefixEdges);
    BlockSource::EdgeSpan* back = open ? &plan.spans.back() : nullptr;
    if (back != nullptr && begin - back->end <= kSpanGapEdges &&
        end - back->begin <= max_span) {
      back->end = end;
      continue;
    }
    plan.spans.push_back({static_cast<uint32_t>(i), begin, end});
    plan.first.push_back(static_cast<uint32_t>(c));
    open = true;
  }
}

// Whether `unit` holds a vertex `want` accepts.
bool UnitWanted(std::span<const DirectoryEntry> dir, const Unit& unit,
                uint64_t num_vertices,
                const std::function<bool(VertexId, VertexId)>& want) {
  const VertexId begin = dir[unit.first].first_vertex;
  const VertexId end = unit.last < dir.size()
                           ? dir[unit.last].first_vertex
                           : static_cast<VertexId>(num_vertices);
  // A split run shares its vertex with the next unit's first entry.
  return want(begin, std::max(end, begin + 1));
}

}  // namespace

absl::StatusOr<bool> Engine::ScanPrefixes(Direction d,
                                          const CandidatesFn& candidates,
                                          const PrefixFn& visit,
                                          bool may_steal) {
  d = Stored(d);
  // Prefixes are edge ranges located by the header cache's edge offsets:
  // compressed blocks have no fixed place per edge.
  if (!source_->ReadsRanges() || graph_.compressed()) return false;
  PlanDirection(d, /*push=*/true);  // headers first, as for a push scan
  if (headers(d) == nullptr) return false;
  std::span<const DirectoryEntry> dir = graph_.directory(d);
  using EdgeRange = BlockSource::EdgeRange;
  // Per worker, reused from chunk to chunk.
  struct Scratch {
    PrefixPlan plan;
    std::vector<EdgeRange> rest, tail;
    std::unique_ptr<HeaderCache> taken;  // a taken chunk's headers
  };
  std::vector<Scratch> scratch(threads());
  const uint32_t max_span = source_->MaxSpanEdges();
  auto scan_chunk = [&](int w, VertexId first_v,
                        VertexId end_v) -> absl::Status {
    // Pass 1: every candidate's prefix (of its first piece), block by
    // block, in spans.
    Scratch& sc = scratch[w];
    const uint32_t first_entry =
        static_cast<uint32_t>(store::FindBlocks(dir, first_v).first);
    const uint32_t last_entry =
        static_cast<uint32_t>(store::FindBlocks(dir, end_v - 1).second);
    DMG_ASSIGN_OR_RETURN(const HeaderCache* h,
                         HeadersFor(w, d, first_entry, last_entry, sc.taken));
    PrefixPlan& plan = sc.plan;
    plan.Clear();
    plan.is_candidate.resize(end_v - first_v);
    candidates(first_v, end_v, plan.is_candidate.data());
    for (size_t i = store::FindBlocks(dir, first_v).first;
         i < dir.size() && dir[i].first_vertex < end_v; ++i) {
      PlanPrefixes(dir, *h, i, first_v, end_v, max_span, plan);
      // The later pieces of a split vertex hold no other vertex.
      while (ContinuesInNext(dir, i)) ++i;
    }
    std::vector<EdgeRange>& rest = sc.rest;
    rest.clear();
    DMG_RETURN_IF_ERROR(source_->ReadSpans(
        w, d, plan.spans, *h,
        [&](size_t first, size_t end, std::span<const VertexId* const> targets,
            std::span<const Weight* const> weights) {
          for (size_t k = first; k < end; ++k) {
            const BlockSource::EdgeSpan& sp = plan.spans[k];
            const DirectoryEntry& e = dir[sp.entry];
            const uint32_t* off = h->offsets(sp.entry);
            const bool split = ContinuesInNext(dir, sp.entry);
            const VertexId* t = targets[k - first];
            const Weight* wt = weights[k - first];
            for (uint32_t c = plan.first[k], c_end = plan.End(k); c < c_end;
                 ++c) {
              const VertexId v = plan.candidates[c];
              const uint32_t j = v - e.first_vertex;
              const uint32_t at = off[j] - sp.begin;
              const uint32_t len = off[j + 1] - off[j];
              const uint32_t take = std::min(len, kPrefixEdges);
              const bool more =
                  take < len || (split && j + 1 == e.vertex_count);
              if (!visit(w, v, {t + at, take},
                         wt != nullptr ? std::span<const Weight>(wt + at, take)
                                       : std::span<const Weight>()) &&
                  more) {
                rest.push_back({sp.entry, v, 0, take});
              }
            }
          }
        }));
    if (rest.empty()) return absl::OkStatus();
    return ReadRests(*source_, w, d, dir, *h, rest, sc.tail, visit);
  };
  // Chunks of 4096 vertices keep every frontier-bitmap word and every page
  // of state one worker's. Chunks of 16,384 cut a kron:20 bottom-up level
  // from 258 round trips to 66 but saved no time over tcp loopback and cost
  // ~8% locally (a larger working set per chunk), so they stay small.
  constexpr uint64_t kChunk = 4096;
  scan_shared_ =
      may_steal && compute_nodes() > 1 && options_.steal && PrefixStealPays(d);
  if (scan_shared_) {
    DMG_RETURN_IF_ERROR(RunSharedChunks(kChunk, scan_chunk));
    return true;
  }
  const VertexId base = own_begin_;
  const auto start = std::chrono::steady_clock::now();
  std::atomic<uint64_t> waited{0};
  // Timed only where a steal decision reads it: a chunk's clock is two
  // reads of /proc (a kron:20 bottom-up step has 256 chunks).
  const bool timed = may_steal && compute_nodes() > 1;
  absl::Status status = scheduler_.ForRanges(
      own_end_ - own_begin_, kChunk, [&](int w, uint64_t begin, uint64_t end) {
        if (!timed) return scan_chunk(w, base + begin, base + end);
        const RunClock clock;
        absl::Status done = scan_chunk(w, base + begin, base + end);
        waited.fetch_add(clock.WaitedNs(), std::memory_order_relaxed);
        return done;
      });
  if (!status.ok()) return Fail(status);
  if (may_steal) {
    NoteOwnScan(kPrefixScan, WorkingNs(start, waited.load(), threads()));
  }
  return true;
}

absl::Status Engine::RunSharedChunks(
    uint64_t chunk,
    const std::function<absl::Status(int, VertexId, VertexId)>& scan_chunk) {
  const int nodes = compute_nodes();
  const std::span<const uint64_t> bounds = cluster_->bounds();
  std::vector<uint64_t> counts(nodes);
  for (int n = 0; n < nodes; ++n) {
    counts[n] = (bounds[n + 1] - bounds[n] + chunk - 1) / chunk;
  }
  // Taken chunks' candidates and sources are anywhere: pending lines are
  // READ as touched, then in one batch (as for a shared push).
  ArmPendingReads(/*all_on_touch=*/true);
  ClearOutboxes();
  DMG_ASSIGN_OR_RETURN(
      const uint64_t own_ns,
      RunWorkRound(kPrefixScan, counts, [&](int w, int node, uint64_t item) {
        const VertexId begin = bounds[node] + item * chunk;
        const VertexId end =
            std::min<uint64_t>(bounds[node + 1], begin + chunk);
        return scan_chunk(w, begin, end);
      }));
  // (A node whose items were all taken keeps its last measure.)
  if (own_ns > 0) NoteOwnScan(kPrefixScan, own_ns);
  return absl::OkStatus();
}

absl::StatusOr<const HeaderCache*> Engine::HeadersFor(
    int w, Direction d, uint32_t first, uint32_t last,
    std::unique_ptr<HeaderCache>& scratch) {
  d = Stored(d);
  const HeaderCache* h = headers(d);
  if (h != nullptr && h->Holds(first, last)) return h;
  if (scratch != nullptr && scratch->Holds(first, last)) return scratch.get();
  std::span<const DirectoryEntry> dir = graph_.directory(d);
  scratch =
      std::make_unique<HeaderCache>(dir, &graph_.block_index(d), first, last);
  HeaderCache* fill = scratch.get();
  DMG_RETURN_IF_ERROR(source_->Read(
      w, d, Unit{first, last}, /*headers_only=*/true,
      [&](uint32_t i, const std::byte* p, uint32_t) -> absl::Status {
        DMG_ASSIGN_OR_RETURN(const uint32_t* off, HeaderOffsets(dir, i, p));
        fill->Fill(i, off);
        return absl::OkStatus();
      }));
  return fill;
}

absl::Status Engine::ScanHeaders(Direction d, const HeaderFn& fn,
                                 bool own_only) {
  d = Stored(d);
  std::span<const DirectoryEntry> dir = graph_.directory(d);
  // Units cut by the headers' own length, not the blocks': a unit of
  // blocks holds ~16 of them, so a header scan of kron:20 was 511 round
  // trips for 4.5 MB; cut by header bytes it is a few per worker.
  std::vector<uint32_t> entries;
  std::vector<uint64_t> need;
  uint64_t total = 0;
  for (const Unit& u :
       (own_only ? own_units_ : all_units_)[static_cast<int>(d)]) {
    for (uint32_t i = u.first; i < u.last; ++i) {
      entries.push_back(i);
      need.push_back(BlockHeaderLength(dir[i]));
      total += need.back();
    }
  }
  const std::vector<Unit> units =
      MakeSparseUnits(dir, entries, need,
                      std::clamp<uint64_t>(total / (4 * threads()), 4096,
                                           buffers_.batch_bytes));
  return Fail(scheduler_.ForEach(units.size(), [&](int w, size_t u) {
    return source_->Read(
        w, d, units[u], /*headers_only=*/true,
        [&](uint32_t i, const std::byte* p, uint32_t) -> absl::Status {
          DMG_ASSIGN_OR_RETURN(const uint32_t* off, HeaderOffsets(dir, i, p));
          fn(w, i, off);
          return absl::OkStatus();
        });
  }));
}

absl::Status Engine::ScanBlocks(Direction d, const RangeFn* want,
                                const BlockFn& fn, bool may_steal,
                                uint64_t SuperstepStats::*visits, bool once) {
  d = Stored(d);
  const int k = static_cast<int>(d);
  PlanDirection(d, /*push=*/false);
  std::span<const DirectoryEntry> dir = graph_.directory(d);
  auto continues = [&](uint32_t i) { return ContinuesInNext(dir, i); };
  const HotBlockCache* hot = hot_[k].get();
  // Until one scan has read all of them, the blocks' other-node neighbours
  // are recorded (a pass over targets just read, after the block's work).
  const bool record = compute_nodes() > 1 && !sources_complete_[k];
  if (record) sources_[k].resize((num_vertices() + 63) / 64, 0);
  arc_counts_.resize(threads());
  auto block = [&](int w, uint32_t i, const std::byte* p, uint32_t len,
                   bool own) -> absl::Status {
    // Cached blocks were validated when admitted.
    const uint64_t end_edge =
        i + 1 < dir.size() ? dir[i + 1].first_edge : num_arcs();
    arc_counts_[w].pulled +=
        dir[i].vertex_count + (end_edge - dir[i].first_edge);
    if (const BlockView* v = hot ? hot->View(i, p) : nullptr) {
      if (!own && !once) FetchPendingOfBlock(w, *v);
      fn(w, i, *v, continues(i));
      if (record && own) RecordSources(k, *v);
      return absl::OkStatus();
    }
    DMG_ASSIGN_OR_RETURN(BlockView b, ParseBlock(dir, i, p, len));
    if (!own && !once) FetchPendingOfBlock(w, b);
    fn(w, i, b, continues(i));
    if (record && own) RecordSources(k, b);
    return absl::OkStatus();
  };
  scan_shared_ = may_steal && compute_nodes() > 1 && options_.steal &&
                 PullStealPays(d, once);
  if (scan_shared_) {
    DMG_RETURN_IF_ERROR(ScanBlocksShared(d, want, block));
  } else {
    const auto start = std::chrono::steady_clock::now();
    std::span<const Unit> units = own_units_[k];
    std::vector<Unit> wanted;
    if (want != nullptr) {
      // Only the units holding a vertex the scan needs are READ.
      std::vector<uint8_t> keep(units.size(), 0);
      DMG_RETURN_IF_ERROR(scheduler_.ForEach(units.size(), [&](int, size_t u) {
        keep[u] = UnitWanted(dir, units[u], num_vertices(), *want);
        return absl::OkStatus();
      }));
      for (size_t u = 0; u < units.size(); ++u) {
        if (keep[u]) wanted.push_back(units[u]);
      }
      units = wanted;
    }
    std::atomic<uint64_t> waited{0};
    DMG_RETURN_IF_ERROR(Fail(
        scheduler_.Run(units.size(), [&](int w, UnitScheduler::Cursor& cursor) {
          // (One clock a worker a scan: cheap enough to keep on every one.)
          const RunClock clock;
          absl::Status done = source_->Stream(
              w, d, units, cursor, [](size_t) {},
              [&](uint32_t i, const std::byte* p, uint32_t len) {
                return block(w, i, p, len, /*own=*/true);
              });
          waited.fetch_add(clock.WaitedNs(), std::memory_order_relaxed);
          return done;
        })));
    if (may_steal) {
      NoteOwnScan(kPullScan, WorkingNs(start, waited.load(), threads()));
    }
  }
  for (ArcCount& c : arc_counts_) {
    stats_.supersteps.back().*visits += c.pulled;
    c.pulled = 0;
  }
  // Unfiltered and not shared: every node read all its blocks (the same on
  // every node).
  if (want == nullptr && !scan_shared_) {
    ++full_scans_[k];
    if (record) SourcesComplete(k);
  }
  return absl::OkStatus();
}

absl::Status Engine::ScanBlocksShared(Direction d, const RangeFn* want,
                                      const SharedBlockFn& block) {
  const int k = static_cast<int>(d);
  std::span<const DirectoryEntry> dir = graph_.directory(d);
  const int nodes = compute_nodes(), me = compute_node();
  const std::span<const uint64_t> bounds = cluster_->bounds();
  std::vector<uint64_t> counts(nodes);
  for (int n = 0; n < nodes; ++n) counts[n] = node_units_[k][n].size();
  ArmSharedScanReads();
  ClearOutboxes();
  DMG_ASSIGN_OR_RETURN(
      const uint64_t own_ns,
      RunWorkRound(kPullScan, counts, [&](int w, int node, uint64_t item) {
        const Unit& unit = node_units_[k][node][item];
        if (want != nullptr) {
          // Each owner's range alone: a unit's first and last blocks may
          // hold a neighbour's vertices, which that neighbour's item covers.
          const VertexId begin = bounds[node], end = bounds[node + 1];
          const RangeFn theirs = [&](VertexId b, VertexId e) {
            b = std::max(b, begin);
            e = std::min(e, end);
            return b < e && (*want)(b, e);
          };
          if (!UnitWanted(dir, unit, num_vertices(), theirs)) {
            return absl::OkStatus();
          }
        }
        return source_->Read(w, d, unit, /*headers_only=*/false,
                             [&](uint32_t i, const std::byte* p, uint32_t len) {
                               return block(w, i, p, len, node == me);
                             });
      }));
  // (A node whose items were all taken keeps its last measure.)
  if (own_ns > 0) NoteOwnScan(kPullScan, own_ns);
  return absl::OkStatus();
}

void Engine::NoteOwnScan(int kind, uint64_t ns) {
  std::vector<uint64_t>& h = own_scan_history_[kind];
  if (h.size() == kScanHistory) h.erase(h.begin());
  h.push_back(ns);
  // One scan alone says nothing yet (0: the directory's estimate decides).
  own_scan_ns_[kind] = h.size() < 2 ? 0 : *std::min_element(h.begin(), h.end());
}

void Engine::FetchPendingOfBlock(int w, const BlockView& b) {
  const VertexId first = b.first_vertex();
  const VertexId end = first + b.vertex_count();
  if (first == end) return;
  const std::span<const VertexId> from = b.targets(first);
  const std::span<const VertexId> to = b.targets(end - 1);
  const std::span<const VertexId> neighbours(
      from.data(), static_cast<size_t>(to.data() + to.size() - from.data()));
  for (size_t i = 0; i < placed_; ++i) {
    states_[i]->FetchPendingOf(w, neighbours, first, end);
  }
}

void Engine::ArmSharedScanReads() {
  // The owner's units read what the operation armed (a pull's or a
  // gather's: the lines its own blocks' sources are in, in one batch). A
  // taken unit's sources and candidates are anywhere: the accessors keep
  // checking, READing a line at a touch until that has cost what one batch
  // of the rest costs (coordinator::DemandBudget). A node that takes
  // nothing READs no more than when it scans alone.
  bool armed = true;
  for (size_t i = 0; i < placed_; ++i) {
    armed = armed && states_[i]->fetches_all_on_touch();
  }
  if (!armed) ArmPendingReads(/*all_on_touch=*/true);
  for (size_t i = 0; compute_nodes() > 1 && i < placed_; ++i) {
    states_[i]->KeepChecks(DemandBudgetOf(*states_[i]));
  }
}

bool Engine::AllCached(Direction d) const {
  const int k = static_cast<int>(Stored(d));
  // (Alike on every node: a node with an empty range has no hot set.)
  return hot_all_[k] && full_scans_[k] > 0;
}

absl::Status Engine::ScanFrontierShared(Direction d, const Frontier& frontier,
                                        const PieceFn& fn) {
  d = Stored(d);
  std::span<const DirectoryEntry> dir = graph_.directory(d);
  const int nodes = compute_nodes();
  // Work items: the frontier's members grouped by 4096-vertex chunk, each
  // chunk its owner's (ranges start on chunk boundaries), in vertex order,
  // so that every node derives the same lists from the same frontier.
  const std::vector<VertexId> members = frontier.SortedVertices();
  using Item = workload::WorkItem;
  constexpr uint64_t kItemGrain = 4096;  // the ranges' grain
  constexpr uint32_t kItemVertices = 512;
  const std::vector<std::vector<Item>> items =
      workload::FrontierItems(members, kItemGrain, kItemVertices, nodes,
                              [&](VertexId v) { return OwnerOf(v); });
  const HeaderCache* h = headers(d);
  while (steal_scratch_.size() < static_cast<size_t>(threads())) {
    steal_scratch_.push_back(NewFrontier());
  }
  std::vector<std::vector<uint32_t>> entries(threads());
  // A taken item's blocks are another node's: READ with their headers.
  auto process = [&](int w, const Item& it, bool mine) -> absl::Status {
    Frontier& part = steal_scratch_[w];
    part.Clear();
    entries[w].clear();
    // Members ascend: their blocks are found by walking the directory
    // from the first one's.
    size_t e = store::FindBlocks(dir, members[it.begin]).first;
    for (uint32_t i = it.begin; i < it.end; ++i) {
      const VertexId v = members[i];
      part.AddExclusive(w, v);
      while (dir[e].first_vertex + dir[e].vertex_count <= v) ++e;
      for (size_t b = e; b < dir.size() && dir[b].first_vertex <= v; ++b) {
        if (entries[w].empty() || entries[w].back() < b) {
          entries[w].push_back(b);
        }
      }
    }
    part.Seal();
    for (const Unit& u : MakeUnits(dir, entries[w], buffers_.batch_bytes)) {
      DMG_RETURN_IF_ERROR(
          source_->ReadFrontier(w, d, u, part, mine ? h : nullptr, fn));
    }
    return absl::OkStatus();
  };
  std::vector<uint64_t> counts(nodes);
  for (int n = 0; n < nodes; ++n) counts[n] = items[n].size();
  return RunWorkRound(kPushScan, counts,
                      [&](int w, int node, uint64_t i) {
                        return process(w, items[node][i],
                                       node == compute_node());
                      })
      .status();
}

absl::StatusOr<uint64_t> Engine::RunWorkRound(int kind,
                                              std::span<const uint64_t> counts,
                                              const WorkItemFn& run) {
  const int nodes = compute_nodes(), me = compute_node();
  const std::span<const uint64_t> bounds = cluster_->bounds();
  DMG_ASSIGN_OR_RETURN(const int parity,
                       Fail(cluster_->BeginWorkRound(pool_->endpoint(0))));
  std::atomic<uint64_t> own{0}, stolen{0}, own_ns{0}, taken_ns{0};
  // The steal decision's room for this node, in its shares' units: each
  // node's items are worth its share over their number.
  std::vector<double> item_units(nodes, 0.0);
  std::unique_ptr<workload::TakeBudget> budget;
  if (steal_.steal && steal_.work.size() == static_cast<size_t>(nodes)) {
    for (int k = 0; k < nodes; ++k) {
      if (counts[k] > 0) item_units[k] = steal_.work[k] / counts[k];
    }
    budget =
        std::make_unique<workload::TakeBudget>(steal_.room[me], item_units);
  }
  absl::Status status = scheduler_.Run(0, [&](int w, UnitScheduler::Cursor&) {
    transport::Endpoint& ep = pool_->endpoint(w);
    workload::ClaimTally tally;
    auto claim = [&](int node, uint64_t count) {
      return cluster_->Claim(ep, node, parity, count);
    };
    auto one = [&](int node, uint64_t item) {
      const bool mine = node == me;
      taking_[w] = mine ? 0 : 1;
      work_range_[w] = {static_cast<VertexId>(bounds[node]),
                        static_cast<VertexId>(bounds[node + 1])};
      const RunClock clock;
      absl::Status done = run(w, node, item);
      (mine ? own_ns : taken_ns)
          .fetch_add(clock.ElapsedNs(), std::memory_order_relaxed);
      taking_[w] = 0;
      work_range_[w] = {own_begin_, own_end_};
      return done;
    };
    // This node's own items first, in guided groups, then the others'
    // that are left, one per claim (workload/work_items.h).
    DMG_RETURN_IF_ERROR(
        workload::RunClaimedItems(me, counts, uint64_t(threads()) * nodes,
                                  claim, one, tally, budget.get()));
    own.fetch_add(tally.own, std::memory_order_relaxed);
    stolen.fetch_add(tally.taken, std::memory_order_relaxed);
    return absl::OkStatus();
  });
  own_items_ += own.load();
  stolen_items_ += stolen.load();
  stats_.supersteps.back().stolen_items += stolen.load();
  DMG_RETURN_IF_ERROR(Fail(status));
  // The model's measured prices: time per unit on own items and on taken
  // ones (a node keeps its last figure where it has none this round).
  const double own_units = own.load() * item_units[me];
  if (own_units > 0) {
    own_steal_.own_ps[kind] =
        static_cast<uint64_t>(own_ns.load() * 1e3 / own_units);
  }
  if (budget != nullptr && budget->taken() > 0 && taken_ns.load() > 0) {
    own_steal_.taken_ps[kind] =
        static_cast<uint64_t>(taken_ns.load() * 1e3 / budget->taken());
  }
  return ScaledOwnShare(own_ns.load(), own.load(), counts[me], threads());
}

bool Engine::StealPays(Direction d, const Frontier& frontier) {
  // Every node sees the same global frontier and the same degrees, so all
  // reach the same answer (a node that skipped the shared cursors while
  // another used them would leave its items unclaimed).
  std::vector<double> work(compute_nodes(), 0.0);
  // Each owner's members' edges, as the nodes summed them (EnsureFrontier-
  // Sums), else at the average degree.
  const std::vector<uint64_t>* sums =
      headers(d) != nullptr
          ? Sums(frontier, static_cast<int>(Stored(d)), kAllEdges)
          : nullptr;
  // Stage 1's cost of a vertex, not --stage1_alpha: that one shapes the
  // split (a huge value balances vertices only); this weighs real work.
  const double alpha = workload::kVertexCost;
  const double average =
      static_cast<double>(num_arcs()) /
      static_cast<double>(std::max<uint64_t>(1, num_vertices()));
  const double per_member = (sums != nullptr ? 0.0 : average) + alpha;
  if (frontier.whole()) {
    for (VertexId v : frontier.vertices()) work[OwnerOf(v)] += per_member;
  } else {  // (EdgeMap made sure of the counts)
    const std::vector<uint64_t>& members = *PostedMembers(frontier);
    for (int n = 0; n < compute_nodes(); ++n) {
      work[n] += per_member * static_cast<double>(members[n]);
    }
  }
  if (sums != nullptr) {
    for (int n = 0; n < compute_nodes(); ++n) {
      work[n] += static_cast<double>((*sums)[n]);
    }
  }
  // A taken arc is pushed as the owner would, from the owner's blocks
  // READ again; its update travels anyway (the outbox and the exchange
  // the push pays in any case).
  const coordinator::CostConstants& c = options_.cost_constants;
  workload::StealPrices prices;
  prices.owner_ns = c.push_ns_per_visit;
  prices.taker_ns = c.push_ns_per_visit + ArcReadNs();
  prices.fixed_ns = ClaimRoundsNs();
  prices.residue_ns = PushResidueNs();
  prices.cores = shared_cores_;
  MeasuredPrices(kPushScan, work, /*absolute=*/true, prices);
  return NoteSteal(workload::DecideSteal(work, prices));
}

void Engine::MeasuredPrices(int kind, std::span<const double> work,
                            bool absolute,
                            workload::StealPrices& prices) const {
  if (steal_figures_.size() != static_cast<size_t>(compute_nodes()) ||
      work.size() != steal_figures_.size()) {
    return;
  }
  // The heaviest owner is the one others would take from.
  const size_t victim =
      std::max_element(work.begin(), work.end()) - work.begin();
  const uint64_t own = steal_figures_[victim].own_ps[kind];
  double taken = 0;
  int takers = 0;
  for (const StealFigures& f : steal_figures_) {
    if (f.taken_ps[kind] > 0) {
      taken += static_cast<double>(f.taken_ps[kind]);
      ++takers;
    }
  }
  if (own == 0 || takers == 0) return;
  taken /= takers;
  if (absolute) {
    prices.owner_ns = static_cast<double>(own) / 1e3;
    prices.taker_ns = taken / 1e3;
  } else {
    prices.taker_ns = prices.owner_ns * taken / static_cast<double>(own);
  }
}

Engine::PushFigures Engine::PushTotals() const {
  PushFigures all;
  for (const PushFigures& f : push_figures_) {
    all.arcs += f.arcs;
    all.remote += f.remote;
    all.sent += f.sent;
  }
  return all;
}

std::vector<double> Engine::PushResidueNs() const {
  // A taken arc to the owner's own vertex reaches it as an inbox update
  // (after the taker's candidate test and combining: the updates sent per
  // remote arc, over every node's last push) which it applies at its
  // measured price. Before a node has measured, its arcs are taken as
  // spread evenly and an apply as half a push's visit (the visit without
  // the arc's read).
  const int n = compute_nodes();
  const PushFigures all = PushTotals();
  const double per_arc =
      all.remote > 0 ? std::min(1.0, static_cast<double>(all.sent) /
                                         static_cast<double>(all.remote))
                     : 1.0;
  std::vector<double> residue(n, 0.0);
  for (int k = 0; k < n && k < static_cast<int>(push_figures_.size()); ++k) {
    const PushFigures& f = push_figures_[k];
    const double local = f.arcs > 0 ? static_cast<double>(f.arcs - f.remote) /
                                          static_cast<double>(f.arcs)
                                    : 1.0 / n;
    const double apply_ns = f.apply_ps > 0
                                ? static_cast<double>(f.apply_ps) / 1e3
                                : options_.cost_constants.push_ns_per_visit / 2;
    residue[k] = local * per_arc * apply_ns;
  }
  return residue;
}

void Engine::NotePushFigures(uint64_t sent, uint64_t applied,
                             uint64_t apply_ns) {
  if (stats_.supersteps.back().stolen_items == 0 && last_push_arcs_ > 0) {
    own_push_.arcs = last_push_arcs_;
    own_push_.remote = last_push_remote_;
    own_push_.sent = sent;
  }
  if (applied >= kTimedInbox && apply_ns > 0) {
    own_push_.apply_ps = apply_ns * 1000 * threads() / applied;
  }
}

bool Engine::PullStealPays(Direction d, bool once) {
  // Every node's units and their arcs come from the directory: the same
  // answer on every node.
  const int k = static_cast<int>(Stored(d));
  const coordinator::CostConstants& c = options_.cost_constants;
  const double average =
      static_cast<double>(num_arcs()) /
      static_cast<double>(std::max<uint64_t>(1, num_vertices()));
  // A taken unit's blocks are READ again by the taker, each of its
  // vertices' results goes through the outbox to be applied again by its
  // owner (a push's visit, per vertex), and the step pays the update
  // exchange's second round.
  workload::StealPrices prices;
  prices.owner_ns = c.pull_ns_per_visit;
  prices.taker_ns =
      c.pull_ns_per_visit + ArcReadNs() + c.push_ns_per_visit / average;
  prices.fixed_ns = ClaimRoundsNs() + c.exchange_us * 1e3;
  if (once && !AllCached(d)) {
    // The owner READs its blocks too (a scan that runs once, Afforest's
    // links): it pays the bytes a taker pays.
    prices.owner_ns += ArcReadNs();
  }
  return NoteSteal(DecideDenseSteal(0, node_work_[k], prices));
}

std::vector<double> Engine::MeasuredShares(int kind) const {
  const std::vector<uint64_t>& ns = scan_ns_[kind];
  if (ns.size() != static_cast<size_t>(compute_nodes())) return {};
  std::vector<double> work(ns.size());
  for (size_t i = 0; i < ns.size(); ++i) {
    if (ns[i] == 0) return {};
    work[i] = static_cast<double>(ns[i]);
  }
  return work;
}

workload::StealDecision Engine::DecideDenseSteal(
    int kind, std::span<const double> estimate,
    const workload::StealPrices& prices) {
  // Once every node has measured its share of this kind of scan, the
  // shares are those times (a dense step's work changes slowly from one
  // step to the next, and a bottom-up step's with what is left unvisited,
  // which the directory cannot tell), priced at 1 ns a unit, the taker at
  // the model's ratio; before that, the directory's estimate. Once a round
  // of this kind has stolen, the taker's price is the measured ratio.
  const std::vector<double> measured = MeasuredShares(kind);
  workload::StealPrices priced = prices;
  priced.cores = shared_cores_;
  MeasuredPrices(kind, measured.empty() ? estimate : measured,
                 /*absolute=*/false, priced);
  if (measured.empty() || prices.owner_ns <= 0) {
    return workload::DecideSteal(estimate, priced);
  }
  workload::StealPrices per_ns = priced;
  per_ns.owner_ns = 1;
  per_ns.taker_ns = priced.taker_ns / prices.owner_ns;
  workload::StealRule rule;
  // The gate's amount, in the estimate's units priced at the owner's.
  rule.min_excess_work *= prices.owner_ns;
  return workload::DecideSteal(measured, per_ns, rule);
}

bool Engine::PrefixStealPays(Direction d) {
  // A bottom-up candidate reads a prefix of its edges and mostly stops
  // there: a node's share is its vertices' prefixes (from the directory,
  // the same on every node) more than its arcs. The owner READs the
  // prefixes as a taker does; what a taker adds is its claims going
  // through the outbox to be applied again, and the exchange's second
  // round.
  const int k = static_cast<int>(Stored(d));
  std::span<const DirectoryEntry> dir = graph_.directory(Stored(d));
  const std::span<const uint64_t> bounds = cluster_->bounds();
  std::vector<double> work(compute_nodes(), 0.0);
  for (int node = 0; node < compute_nodes(); ++node) {
    for (const Unit& u : node_units_[k][node]) {
      for (uint32_t i = u.first; i < u.last; ++i) {
        const uint64_t lo =
            std::max<uint64_t>(dir[i].first_vertex, bounds[node]);
        const uint64_t hi = std::min<uint64_t>(
            dir[i].first_vertex + dir[i].vertex_count, bounds[node + 1]);
        if (hi <= lo) continue;
        const double vertices = static_cast<double>(hi - lo);
        const double arcs =
            static_cast<double>(store::EntryEdges(dir, i, num_arcs())) *
            vertices / std::max<uint32_t>(1, dir[i].vertex_count);
        work[node] += std::min(arcs, vertices * kPrefixEdges) +
                      workload::kVertexCost * vertices;
      }
    }
  }
  const coordinator::CostConstants& c = options_.cost_constants;
  workload::StealPrices prices;
  prices.owner_ns = c.pull_ns_per_visit + ArcReadNs();
  prices.taker_ns = prices.owner_ns + c.push_ns_per_visit / kPrefixEdges;
  prices.fixed_ns = ClaimRoundsNs() + c.exchange_us * 1e3;
  return NoteSteal(DecideDenseSteal(1, work, prices));
}

double Engine::ArcReadNs() const {
  const double edge_bytes = graph_.weighted() ? 8 : 4;
  return edge_bytes * (options_.cost_constants.byte_ns +
                       1e3 / std::max(1e-9, transport_cost_.bytes_per_us));
}

double Engine::ClaimRoundsNs() const {
  // Resetting the cursor, and the owner's guided claims of its own items.
  const double claimers = static_cast<double>(threads()) * compute_nodes();
  return (2 + 4 * claimers) * transport_cost_.round_trip_us * 1e3;
}

bool Engine::NoteSteal(const workload::StealDecision& decision) {
  steal_ = decision;
  SuperstepStats& s = stats_.supersteps.back();
  if (s.steal.empty()) {
    s.steal = decision.steal ? "on" : "off";
    s.steal_max_work = decision.max_work;
    s.steal_mean_work = decision.mean_work;
    s.est_steal_gain_us = decision.gain_us;
    s.est_steal_cost_us = decision.cost_us;
    s.est_steal_residue_ns = decision.residue_ns;
  }
  return decision.steal;
}

absl::Status Engine::ScanFrontier(Direction d, const Frontier& frontier,
                                  const PieceFn& fn) {
  d = Stored(d);
  PlanDirection(d, /*push=*/true);
  if (compute_nodes() > 1 && options_.steal && StealPays(d, frontier)) {
    // Taken items' sources are other nodes' vertices: their pending lines
    // are READ as touched, then in one batch once that has cost what the
    // batch costs (not every pending line of every array up front).
    ArmPendingReads(/*all_on_touch=*/true);
    if (frontier.whole()) return ScanFrontierShared(d, frontier, fn);
    // Takers push others' members: every node needs them all.
    DMG_ASSIGN_OR_RETURN(const Frontier whole, CompleteFrontier(frontier));
    return ScanFrontierShared(d, whole, fn);
  }
  // With several compute nodes, each pushes from its own vertices.
  Frontier own_part = compute_nodes() > 1 ? NewFrontier() : Frontier(0, 0);
  if (compute_nodes() > 1) {
    for (VertexId v : frontier.vertices()) {
      if (Owns(v)) own_part.AddExclusive(0, v);
    }
    own_part.Seal();
  }
  const Frontier& pushed = compute_nodes() > 1 ? own_part : frontier;
  const HeaderCache* h = headers(d);
  DMG_RETURN_IF_ERROR(MarkFrontierBlocks(d, pushed.vertices()));
  const std::vector<Unit> units = FrontierUnits(d);
  // A small push runs on the caller alone where round trips are cheap.
  // Handing a few thousand edges to the pool costs more than the second
  // worker saves, and two workers on one small level contend for the same
  // state pages: road-NY BFS at 5% (~1,200 edges a level, 621 levels), the
  // unit scan took 87 us a level on two workers and 54 us on one; 4
  // sources, best of 3, 0.30 -> 0.24 s. Over a network the workers overlap
  // their round trips instead (tcp loopback: 4.3 -> 4.6 s serial).
  // (With several nodes, the own members' degrees come from the whole
  // frontier's, which the step's choices already took.)
  constexpr uint64_t kSerialPushEdges = 4096;
  auto small = [&] {
    return (compute_nodes() > 1 ? OwnFrontierEdges(frontier, d)
                                : FrontierEdges(pushed, d, kSerialPushEdges)) <=
           kSerialPushEdges;
  };
  if (units.size() <= 1 || (!RoundTripsDear() && small())) {
    for (const Unit& u : units) {
      DMG_RETURN_IF_ERROR(Fail(source_->ReadFrontier(0, d, u, pushed, h, fn)));
    }
    return absl::OkStatus();
  }
  return Fail(scheduler_.ForEach(units.size(), [&](int w, size_t u) {
    return source_->ReadFrontier(w, d, units[u], pushed, h, fn);
  }));
}

bool Engine::SparsePush() const {
  return options_.cache_policy == CachePolicy::kGraphAware &&
         source_->ReadsRanges();
}

absl::Status Engine::MarkFrontierBlocks(Direction d,
                                        std::span<const VertexId> vs) {
  const int k = static_cast<int>(d);
  std::span<const DirectoryEntry> dir = graph_.directory(d);
  std::vector<uint8_t>& touched = touched_[k];
  const HeaderCache* h = headers(d);
  const bool sparse = SparsePush();
  const uint64_t edge_bytes = graph_.weighted() ? 8 : 4;
  std::vector<uint64_t>& need = need_[k];
  if (sparse && need.size() != dir.size()) need.assign(dir.size(), 0);
  // Per touched block, the members' edge bytes where the headers give
  // them, else the members (estimated at the block's mean piece in
  // FrontierUnits). One worker marks a small frontier with plain adds: a
  // locked add per member was 3% of a road-NY BFS at 5%, on ~600 members a
  // level.
  const bool exact = h != nullptr && !graph_.compressed();
  auto mark = [&]<bool kShared>(uint64_t begin, uint64_t end) {
    for (uint64_t j = begin; j < end; ++j) {
      auto [first, last] = graph_.FindBlocks(d, vs[j]);
      for (size_t i = first; i < last; ++i) {
        uint64_t add = 1;
        if (exact) {
          const uint32_t at = vs[j] - dir[i].first_vertex;
          const uint32_t* off = h->offsets(i);
          add = (off[at + 1] - off[at]) * edge_bytes;
        }
        if constexpr (kShared) {
          std::atomic_ref<uint8_t>(touched[i])
              .store(1, std::memory_order_relaxed);
          if (sparse) {
            std::atomic_ref<uint64_t>(need[i]).fetch_add(
                add, std::memory_order_relaxed);
          }
        } else {
          touched[i] = 1;
          if (sparse) need[i] += add;
        }
      }
    }
  };
  constexpr uint64_t kMarkGrain = 4096;
  if (vs.size() <= kMarkGrain) {
    mark.template operator()<false>(0, vs.size());
    return absl::OkStatus();
  }
  return scheduler_.ForRanges(vs.size(), kMarkGrain,
                              [&](int, uint64_t begin, uint64_t end) {
                                mark.template operator()<true>(begin, end);
                                return absl::OkStatus();
                              });
}

std::vector<Unit> Engine::FrontierUnits(Direction d) {
  const int k = static_cast<int>(d);
  std::span<const DirectoryEntry> dir = graph_.directory(d);
  std::vector<uint8_t>& touched = touched_[k];
  std::vector<uint64_t>& need = need_[k];
  // The graph-aware source reads only the frontier's part of each block
  // and skips untouched ones, so units are sized by what will be read (the
  // frontier's edge bytes per block: from the headers, or without them
  // estimated at the block's mean degree plus the offsets READ first) and
  // may span gaps.
  const bool sparse = SparsePush();
  const bool keep = sparse && source_->FrontierKeepsBlocks(d);
  const bool exact = headers(d) != nullptr && !graph_.compressed();
  const uint64_t edge_bytes = graph_.weighted() ? 8 : 4;
  // A block's mean piece of one vertex: compressed, its stream's bytes over
  // its vertices; else its edges'; plus a word.
  auto mean_piece = [&](size_t i) -> uint64_t {
    const uint64_t bytes =
        graph_.compressed()
            ? dir[i].length
            : store::EntryEdges(dir, i, num_arcs()) * edge_bytes;
    return bytes / dir[i].vertex_count + 8;
  };
  std::vector<uint32_t>& entries = push_entries_;
  std::vector<uint64_t>& estimate = push_estimate_;
  entries.clear();
  estimate.clear();
  uint64_t total = 0;
  for (uint32_t i = 0; i < touched.size(); ++i) {
    if (!touched[i]) continue;
    entries.push_back(i);
    touched[i] = 0;
    if (!sparse) continue;
    const uint64_t wanted = exact ? need[i] : need[i] * mean_piece(i);
    // As ReadFrontier decides: the whole block once half of it is needed
    // (or when blocks are kept: nothing once cached), else the edge ranges.
    const uint64_t bytes =
        keep ? (hot_[k]->Peek(i) != nullptr ? 0 : dir[i].length)
        : wanted * 2 >= dir[i].length ? dir[i].length
                                      : wanted;
    estimate.push_back(bytes);
    total += bytes;
    need[i] = 0;
  }
  // Where round trips are dear (a network), a sparse push is cut into
  // units as large as a worker's batch: each costs two dependent round
  // trips (offsets, then edges), so the fewest units cost the least; one
  // that a batch holds runs on one worker (road-NY BFS over tcp at 5%:
  // ~600 members a level, 8 -> 2 round trips a level). Else units small
  // enough to balance the workers.
  if (!sparse) return MakeUnits(dir, entries, buffers_.batch_bytes);
  return MakeSparseUnits(
      dir, entries, estimate,
      RoundTripsDear() ? buffers_.batch_bytes
                       : std::clamp<uint64_t>(total / (8 * threads()), 4096,
                                              buffers_.batch_bytes));
}

std::span<const uint64_t> Engine::MemberDegrees(const Frontier& frontier,
                                                Direction d,
                                                size_t count) const {
  DegreeMemo& m = degree_memo_;
  if (m.epoch != frontier.epoch() || m.direction != static_cast<int>(d)) {
    m.epoch = frontier.epoch();
    m.direction = static_cast<int>(d);
    m.degrees.clear();
  }
  std::span<const VertexId> vs = frontier.vertices();
  count = std::min(count, vs.size());
  const HeaderCache* h = headers(d);
  for (size_t k = m.degrees.size(); k < count; ++k) {
    m.degrees.push_back(h->Degree(vs[k]));
  }
  return {m.degrees.data(), count};
}

uint64_t Engine::FrontierEdges(const Frontier& frontier, Direction d,
                               uint64_t stop_at) const {
  d = Stored(d);
  uint64_t edges = 0;
  if (compute_nodes() > 1) {
    // The nodes' sums (EnsureFrontierSums made sure of them for the
    // choices that need them); without, the average degree, alike on every
    // node.
    const std::vector<uint64_t>* sums =
        Sums(frontier, static_cast<int>(d), std::max<uint64_t>(stop_at, 1));
    if (headers(d) != nullptr && sums != nullptr) {
      for (uint64_t x : *sums) edges += x;
      return edges;
    }
  } else if (headers(d) != nullptr) {
    // Stops summing as soon as the answer is known, taking degrees a
    // growing prefix at a time (a wide frontier's tail may not be needed).
    const size_t n = frontier.size();
    size_t k = 0;
    while (k < n && edges <= stop_at) {
      const size_t upto = std::min(n, std::max<size_t>(2 * k, k + 256));
      std::span<const uint64_t> degrees = MemberDegrees(frontier, d, upto);
      for (; k < upto && edges <= stop_at; ++k) edges += degrees[k];
    }
    return edges;
  }
  // At the average degree.
  return frontier.size() * num_arcs() / std::max<uint64_t>(1, num_vertices());
}

coordinator::DirectionStep Engine::DirectionStepFor(Direction push_blocks,
                                                    size_t value_bytes) const {
  const Direction pull_blocks =
      Stored(push_blocks == Direction::kOut ? Direction::kIn : Direction::kOut);
  coordinator::DirectionStep step;
  step.vertices = num_vertices();
  step.arcs = num_arcs();
  for (const DirectoryEntry& e : graph_.directory(pull_blocks)) {
    step.pull_block_bytes += e.length;
  }
  step.pull_cached = AllCached(pull_blocks);
  step.push_cached = AllCached(push_blocks);
  step.push_keeps_blocks = hot_all_[static_cast<int>(Stored(push_blocks))];
  for (const DirectoryEntry& e : graph_.directory(Stored(push_blocks))) {
    ++step.push_blocks;
    step.push_block_bytes += e.length;
  }
  step.edge_bytes = graph_.weighted() ? 8 : 4;
  step.value_bytes = value_bytes;
  step.compute_nodes = compute_nodes();
  step.threads = threads();
  const PushFigures all = PushTotals();
  if (compute_nodes() > 1 && all.arcs > 0) {
    step.remote_share =
        static_cast<double>(all.remote) / static_cast<double>(all.arcs);
    if (all.remote > 0) {
      step.sent_per_remote =
          static_cast<double>(all.sent) / static_cast<double>(all.remote);
    }
  }
  return step;
}

void Engine::NoteDirectionEstimate(const coordinator::DirectionStep& step,
                                   const coordinator::DirectionEstimate& e) {
  SuperstepStats& s = stats_.supersteps.back();
  if (!s.direction.empty()) return;  // the superstep's first operation's
  s.est_push_remote_share = step.remote_share;
  s.est_pull_us = e.pull_us;
  s.est_push_us = e.push_us;
  s.est_pull_bytes = e.pull_bytes;
  s.est_push_bytes = e.push_bytes;
}

bool Engine::ChooseGatherPull(Direction neighbours, size_t value_bytes) {
  Mode mode = options_.direction;
  const char* by = "flag";
  if (options_.update_mode == UpdateMode::kPull) {
    mode = Mode::kPull;  // no updates travel
    by = "update_mode";
  }
  coordinator::DirectionStep step;
  coordinator::DirectionEstimate e;
  if (mode == Mode::kAuto) {
    by = "auto";
    // Every vertex sends along its arcs the other way: the push reads
    // those blocks whole.
    step = DirectionStepFor(
        neighbours == Direction::kIn ? Direction::kOut : Direction::kIn,
        value_bytes);
    step.every_vertex = true;
    step.frontier = num_vertices();
    step.frontier_edges = num_arcs();
    step.push_keeps_blocks = false;
    e = coordinator::ChooseDirection(step, transport_cost_,
                                     options_.cost_constants);
    mode = e.pull ? Mode::kPull : Mode::kPush;
  }
  const bool pull = mode == Mode::kPull;
  NoteDecision(pull ? 5 : 6);
  NoteDirectionEstimate(step, e);
  NoteEdgeOp(pull ? "pull" : "push", num_vertices(), by, num_arcs(), 0);
  return pull;
}

Engine::PullPlan Engine::PlanPull(Mode mode, const Frontier& frontier,
                                  Direction push_blocks,
                                  bool stops_early) const {
  PullPlan p;
  if (mode == Mode::kAuto) {
    mode = options_.direction;
    p.by = "flag";
    if (options_.update_mode == UpdateMode::kPull) {
      mode = Mode::kPull;  // no updates travel: every step gathers
      p.by = "update_mode";
    }
  }
  p.mode = mode;
  if (mode != Mode::kAuto) return p;
  p.by = "auto";
  const uint64_t n = frontier.size();
  if (!stops_early) {
    p.model = true;
    p.step = DirectionStepFor(push_blocks, 8);
    p.step.frontier = n;
    // The push's cost grows with the frontier's edges faster than the
    // pull's (an arc pushed against an active arc pulled: 23.7 and 1.2 ns
    // fitted; a fit where it is the other way round would always pull):
    // find the edge count where they meet, and sum the frontier's edges
    // only that far.
    coordinator::DirectionStep step = p.step;
    uint64_t lo = 0, hi = num_arcs() + 1;
    while (lo < hi) {
      step.frontier_edges = lo + (hi - lo) / 2;
      if (coordinator::ChooseDirection(step, transport_cost_,
                                       options_.cost_constants)
              .pull) {
        hi = step.frontier_edges;
      } else {
        lo = step.frontier_edges + 1;
      }
    }
    p.threshold = lo;  // the fewest edges at which a pull is cheaper
    p.sums = true;
    p.stop_at = lo;
    return p;
  }
  // A pull that stops at the first frontier neighbour (Claim) reads
  // prefixes of the candidates' adjacency: it pays once the frontier's
  // edges pass a twentieth of the arcs (Ligra's rule). Once pulling, it
  // stays so while the frontier grows or holds more than a 18th of the
  // vertices (GAPBS's beta): a shrinking but still wide frontier's edges
  // may fall under the twentieth while most of them lead to vertices
  // already visited, which a push pays for and a pull never reads.
  p.threshold = num_arcs() / 20;
  if (early_pull_frontier_ > 0 &&
      (n >= early_pull_frontier_ || n > num_vertices() / 18)) {
    p.sticky = true;
  } else {
    p.sums = true;
    p.stop_at = p.threshold > n ? p.threshold - n : 0;
  }
  return p;
}

uint64_t Engine::SumsNeeded(const PullPlan& p) const {
  if (compute_nodes() == 1 || p.mode == Mode::kPull || p.sticky) {
    return 0;  // (one node sums from its own headers as it goes)
  }
  // A steal decision weighs every node's members' edges.
  if (options_.steal) return kAllEdges;
  // The update mode's choice sums them all when the step pushes: an
  // automatic direction pushes only below stop_at, where the sums stopped
  // nowhere.
  const bool update_auto = options_.update_mode != UpdateMode::kBatch &&
                           options_.update_mode != UpdateMode::kAtomic;
  if (update_auto && !p.sums) return kAllEdges;
  return p.sums ? std::max<uint64_t>(p.stop_at, 1) : 0;
}

bool Engine::ChoosePull(const PullPlan& p, const Frontier& frontier,
                        Direction push_blocks) {
  Mode mode = p.mode;
  uint64_t work = 0;
  coordinator::DirectionEstimate e;
  if (mode == Mode::kAuto && p.model) {
    work = FrontierEdges(frontier, push_blocks, p.stop_at);
    coordinator::DirectionStep step = p.step;
    step.frontier_edges = work;
    e = coordinator::ChooseDirection(step, transport_cost_,
                                     options_.cost_constants);
    mode = e.pull ? Mode::kPull : Mode::kPush;
    NoteDirectionEstimate(step, e);
  } else if (mode == Mode::kAuto) {
    const uint64_t n = frontier.size();
    if (p.sticky) {
      work = n;
      mode = Mode::kPull;
    } else {
      work = n + FrontierEdges(frontier, push_blocks, p.stop_at);
      mode = work > p.threshold ? Mode::kPull : Mode::kPush;
    }
    early_pull_frontier_ = mode == Mode::kPull ? std::max<uint64_t>(n, 1) : 0;
  }
  const bool pull = mode == Mode::kPull;
  NoteDecision(pull ? 1 : 2);
  NoteEdgeOp(pull ? "pull" : "push", frontier.size(), p.by, work, p.threshold);
  return pull;
}

UpdateMode Engine::ChooseUpdateMode(const Frontier& frontier, Direction along,
                                    size_t value_bytes) {
  SuperstepStats& s = stats_.supersteps.back();
  UpdateMode mode = UpdateMode::kBatch;
  const char* by = "flag";
  coordinator::UpdateEstimate e;
  if (compute_nodes() == 1) {
    mode = UpdateMode::kBatch;  // nothing travels: updates apply locally
    by = "one node";
  } else if (options_.update_mode == UpdateMode::kBatch ||
             options_.update_mode == UpdateMode::kAtomic) {
    mode = options_.update_mode;
  } else {
    by = "auto";
    coordinator::PushStep step;
    step.vertices = num_vertices();
    step.frontier_edges = FrontierEdges(frontier, along, ~uint64_t{0});
    step.compute_nodes = compute_nodes();
    step.threads = threads();
    step.value_bytes = value_bytes;
    step.combines = true;  // every named update merges duplicates
    step.state_pages =
        (num_vertices() * value_bytes + StateArrayBase::kPageBytes - 1) /
        StateArrayBase::kPageBytes;
    e = coordinator::ChooseUpdates(step, transport_cost_,
                                   options_.cost_constants);
    mode = e.atomic ? UpdateMode::kAtomic : UpdateMode::kBatch;
  }
  NoteDecision(mode == UpdateMode::kAtomic ? 3 : 4);
  if (s.update_mode.empty()) {
    s.update_mode = compute_nodes() == 1          ? "local"
                    : mode == UpdateMode::kAtomic ? "atomic"
                                                  : "batch";
    s.update_chosen_by = by;
    s.est_remote_updates = static_cast<uint64_t>(e.remote_updates);
    s.est_batch_us = e.batch_us;
    s.est_atomic_us = e.atomic_us;
  }
  return mode;
}

uint64_t Engine::OwnFrontierEdges(const Frontier& frontier, Direction d) const {
  d = Stored(d);
  const int k = static_cast<int>(d);
  const HeaderCache* h = headers(d);
  if (h != nullptr && compute_nodes() > 1) {
    if (const std::vector<uint64_t>* sums = Sums(frontier, k, kAllEdges)) {
      return (*sums)[compute_node()];
    }
  }
  uint64_t members = 0, edges = 0;
  for (VertexId v : frontier.vertices()) {
    if (!Owns(v)) continue;
    ++members;
    if (h != nullptr) edges += h->Degree(v);
  }
  if (h != nullptr) return edges;
  return members * num_arcs() / std::max<uint64_t>(1, num_vertices());
}

void Engine::TakeRemoteShare() {
  uint64_t arcs = 0, remote = 0;
  for (ArcCount& c : arc_counts_) {
    arcs += c.arcs;
    remote += c.remote;
    c = ArcCount{};
  }
  SuperstepStats& s = stats_.supersteps.back();
  s.push_arcs += arcs;
  s.remote_arcs += remote;
  last_push_arcs_ = arcs;
  last_push_remote_ = remote;
  if (arcs > 0 && compute_nodes() > 1) {
    remote_share_ = static_cast<double>(remote) / static_cast<double>(arcs);
  }
}

Engine::Refresh Engine::ChooseTargetRefresh(const Frontier& frontier,
                                            Direction along, bool stale_ok,
                                            size_t update_bytes) {
  coordinator::RefreshStep step;
  for (size_t i = 0; i < placed_; ++i) {
    step.pending_lines += states_[i]->pending_lines();
  }
  if (step.pending_lines == 0) return Refresh::kDemand;  // nothing to take in
  step.stale_ok = stale_ok;
  step.update_bytes = static_cast<double>(sizeof(VertexId) + update_bytes);
  step.line_bytes = StateArrayBase::kLineBytes;
  step.frontier_edges = static_cast<double>(OwnFrontierEdges(frontier, along));
  // Before any push of its own: arcs spread as the ranges are.
  step.remote_share =
      remote_share_ >= 0
          ? remote_share_
          : static_cast<double>(compute_nodes() - 1) / compute_nodes();
  step.threads = threads();
  const coordinator::RefreshEstimate e =
      coordinator::ChooseRefresh(step, transport_cost_);
  SuperstepStats& s = stats_.supersteps.back();
  using Forced = EngineOptions::ForcedRefresh;
  const Forced forced = options_.refresh;
  const Refresh choice =
      forced == Forced::kBulk                                 ? Refresh::kBulk
      : forced == Forced::kStale && stale_ok                  ? Refresh::kStale
      : forced == Forced::kDemand || forced == Forced::kStale ? Refresh::kDemand
      : e.stale                                               ? Refresh::kStale
      : e.demand                                              ? Refresh::kDemand
                                                              : Refresh::kBulk;
  if (s.refresh.empty()) {
    s.refresh = choice == Refresh::kStale    ? "stale"
                : choice == Refresh::kDemand ? "demand"
                                             : "bulk";
    s.pending_lines = step.pending_lines;
    s.remote_share = step.remote_share;
    s.est_refresh_touches = e.touches;
    s.est_bulk_refresh_us = e.bulk_us;
    s.est_demand_refresh_us = e.demand_us;
    s.est_stale_refresh_us = e.stale_us;
  }
  return choice;
}

absl::Status Engine::Degrees(Direction d, State<uint32_t>& out) {
  d = Stored(d);
  DMG_RETURN_IF_ERROR(Prepare(/*open_superstep=*/false));
  // The pieces of a split vertex arrive on one worker: read-add-write
  // needs no atomics.
  std::span<const DirectoryEntry> dir = graph_.directory(d);
  DMG_RETURN_IF_ERROR(ScanHeaders(
      d,
      [&](int w, uint32_t entry, const uint32_t* offsets) {
        const VertexId first = dir[entry].first_vertex;
        for (uint32_t k = 0; k < dir[entry].vertex_count; ++k) {
          const uint32_t degree = offsets[k + 1] - offsets[k];
          if (degree != 0 && Owns(first + k)) {
            out.Set(w, first + k, out.Get(w, first + k) + degree);
          }
        }
      },
      /*own_only=*/true));
  return Collective("").status();
}

absl::StatusOr<uint64_t> Engine::Degree(Direction d, VertexId v) {
  d = Stored(d);
  if (v >= num_vertices()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("vertex %d is out of range", v));
  }
  std::span<const DirectoryEntry> dir = graph_.directory(d);
  auto [first, last] = store::FindBlocks(dir, v);
  uint64_t degree = 0;
  DMG_RETURN_IF_ERROR(Fail(source_->Read(
      0, d, Unit{static_cast<uint32_t>(first), static_cast<uint32_t>(last)},
      /*headers_only=*/true,
      [&](uint32_t i, const std::byte* p, uint32_t len) -> absl::Status {
        DMG_ASSIGN_OR_RETURN(const uint32_t* off, HeaderOffsets(dir, i, p));
        const uint32_t k = v - dir[i].first_vertex;
        degree += off[k + 1] - off[k];
        return absl::OkStatus();
      })));
  return degree;
}

absl::Status Engine::ForEachAdjacency(
    Direction d, const std::function<bool(VertexId, VertexId)>* want,
    const AdjacencyFn& fn) {
  return ScanAdjacency(d, want, fn, fn, /*may_steal=*/false);
}

absl::StatusOr<bool> Engine::ForEachAdjacencyShared(
    Direction d, const std::function<bool(VertexId, VertexId)>* want,
    const AdjacencyFn& own, const AdjacencyFn& taken) {
  DMG_RETURN_IF_ERROR(ScanAdjacency(d, want, own, taken, /*may_steal=*/true));
  return scan_shared_;
}

absl::Status Engine::ScanAdjacency(
    Direction d, const std::function<bool(VertexId, VertexId)>* want,
    const AdjacencyFn& own, const AdjacencyFn& taken, bool may_steal) {
  DMG_RETURN_IF_ERROR(Prepare());
  NoteEdgeOp("pull", num_vertices());
  std::vector<Assembler> assemblers(threads());
  // A unit's vertices are those of the node whose work item the worker is
  // on: this node's, or (stage 2) the one it took the item from.
  return Fail(ScanBlocks(
      d, want,
      [&](int w, uint32_t, const BlockView& b, bool continues) {
        // (Plain variables: clang 14 lets no lambda capture a structured
        // binding.)
        const VertexId begin = work_range_[w].first,
                       end = work_range_[w].second;
        const AdjacencyFn& fn = taking_[w] != 0 ? taken : own;
        ForEachWholeVertex(assemblers[w], b, continues,
                           [&](VertexId v, std::span<const VertexId> nbrs) {
                             if (v >= begin && v < end) fn(w, v, nbrs);
                           });
      },
      may_steal, &SuperstepStats::pull_visits, /*once=*/true));
}

absl::Status Engine::ForEachNeighbourhood(Direction d, const PickFn& pick,
                                          const VisitFn& visit) {
  d = Stored(d);
  DMG_RETURN_IF_ERROR(Prepare());
  NoteEdgeOp("pull", num_vertices());
  PlanDirection(d, /*push=*/false);
  std::span<const DirectoryEntry> dir = graph_.directory(d);
  std::span<const Unit> units = own_units_[static_cast<int>(d)];
  auto continues = [&](uint32_t i) { return ContinuesInNext(dir, i); };
  // Per worker: what the vertices of its current unit asked for.
  struct Request {
    VertexId u;
    size_t begin, end;  // into wanted
  };
  struct Scratch {
    Assembler outer, inner;
    std::vector<VertexId> wanted;
    std::vector<Request> requests;
    std::vector<std::pair<VertexId, uint32_t>> by_target;  // (v, request)
    std::vector<uint32_t> entries;
  };
  std::vector<Scratch> scratch(threads());
  DMG_RETURN_IF_ERROR(Fail(scheduler_.ForEach(units.size(), [&](int w,
                                                                size_t u) {
    Scratch& s = scratch[w];
    s.wanted.clear();
    s.requests.clear();
    DMG_RETURN_IF_ERROR(source_->Read(
        w, d, units[u], false,
        [&](uint32_t i, const std::byte* p, uint32_t len) -> absl::Status {
          DMG_ASSIGN_OR_RETURN(BlockView b, ParseBlock(dir, i, p, len));
          ForEachWholeVertex(
              s.outer, b, continues(i),
              [&](VertexId v, std::span<const VertexId> nbrs) {
                if (!Owns(v)) return;
                const size_t begin = s.wanted.size();
                pick(w, v, nbrs, s.wanted);
                if (s.wanted.size() > begin) {
                  s.requests.push_back({v, begin, s.wanted.size()});
                }
              });
          return absl::OkStatus();
        }));
    // Serve the requests in target order: READ the blocks holding the
    // wanted adjacency (once each, in batches) and visit.
    s.by_target.clear();
    for (uint32_t r = 0; r < s.requests.size(); ++r) {
      for (size_t j = s.requests[r].begin; j < s.requests[r].end; ++j) {
        s.by_target.push_back({s.wanted[j], r});
      }
    }
    std::sort(s.by_target.begin(), s.by_target.end());
    s.entries.clear();
    for (size_t j = 0; j < s.by_target.size(); ++j) {
      if (j > 0 && s.by_target[j].first == s.by_target[j - 1].first) continue;
      auto [first, last] = graph_.FindBlocks(d, s.by_target[j].first);
      for (size_t i = first; i < last; ++i) {
        if (s.entries.empty() || s.entries.back() < i) s.entries.push_back(i);
      }
    }
    size_t next = 0;  // into by_target
    for (const Unit& need : MakeUnits(dir, s.entries, buffers_.batch_bytes)) {
      DMG_RETURN_IF_ERROR(source_->Read(
          w, d, need, false,
          [&](uint32_t i, const std::byte* p, uint32_t len) -> absl::Status {
            DMG_ASSIGN_OR_RETURN(BlockView b, ParseBlock(dir, i, p, len));
            ForEachWholeVertex(
                s.inner, b, continues(i),
                [&](VertexId v, std::span<const VertexId> nbrs) {
                  while (next < s.by_target.size() &&
                         s.by_target[next].first < v) {
                    ++next;
                  }
                  for (; next < s.by_target.size() &&
                         s.by_target[next].first == v;
                       ++next) {
                    const Request& r = s.requests[s.by_target[next].second];
                    visit(w, r.u,
                          std::span<const VertexId>(s.wanted).subspan(
                              r.begin, r.end - r.begin),
                          v, nbrs);
                  }
                });
            return absl::OkStatus();
          }));
    }
    return absl::OkStatus();
  })));
  return Collective("").status();
}

}  // namespace dmg::compute

// A vertex-property array (scores, depths, labels, distances) that lives on a
// memory node, double-buffered by superstep: the state after superstep s is
// in buffer s % 2, so a finished superstep is always a consistent checkpoint.
//
// The compute node reaches it in one of two modes, chosen by the engine from
// the memory budget:
//  - resident: a whole local copy (when it fits). At the end of superstep s
//    the 64-byte lines changed in s or s-1 are written into buffer s % 2 —
//    exactly what that buffer lacks (runs of lines with gaps of at most
//    kGapLines merged into one WRITE: a level that changes 27 scattered
//    vertices writes 27 lines, not 27 pages).
//  - paged: pages come and go through the engine's PageCache. A page is
//    fetched from buffer s % 2 if it was already written back there during
//    superstep s, else from buffer (s-1) % 2 (which holds all of version
//    s-1); dirty pages are written back into buffer s % 2 (on eviction or at
//    commit), and pages changed in s-1 but not in s are copied into it.
//
// Claim filter (paged, graph-aware, one compute node, arrays hinted
// kClaimed, such as BFS's depths): a local bit per element says whether it
// still holds the initial value, so a first-wins claim or an "unset?" test
// never pages the array in. A claim won on a page that is not cached is
// logged (index, value) instead: a later fetch of the page merges the log
// into its frame (which is then dirty), and the commit writes what is left
// of it element by element (entries at most 16 bytes apart in one WRITE
// when the elements between are unset), and the next commit the same
// bytes into the other buffer (what that buffer lacks), so a level's
// scattered claims move a few bytes each, not a page each. The log holds
// at most as many entries as its share of the bound; a claim past that
// pages its page in. road-NY BFS at 5% fetched 49 MB of depth pages for a
// 1 MB array; now none.
//
// Accessors are safe from many workers at once (values are accessed
// atomically); a paged miss uses the calling worker's transport endpoint
// (the worker is the pool thread calling; the two-argument forms name it).
// An array is declared first and materialized (regions allocated, both
// versions set to the initial value, resident or paged) when the engine
// plans its cache; it is used only after that.
#ifndef DMG_COMPUTE_NODE_STATE_ARRAY_H_
#define DMG_COMPUTE_NODE_STATE_ARRAY_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/aligned_buffer.h"
#include "common/huge_pages.h"
#include "common/mutex.h"
#include "compute_node/cache_planner.h"
#include "compute_node/claim_log.h"
#include "compute_node/memory_budget.h"
#include "compute_node/page_cache.h"
#include "compute_node/pending_lines.h"
#include "compute_node/source_mirror.h"
#include "compute_node/state_slices.h"
#include "compute_node/unit_scheduler.h"
#include "compute_node/worker_pool.h"
#include "store/graph.h"
#include "transport/transport.h"

namespace dmg::compute {

// Owners' packed copies a batch filtered by a pull's sources may READ
// instead of the lines (source_mirrors.h): per owner node, the copy that
// holds its values now (length 0: READ the lines).
struct MirrorSource {
  const MirrorLayout* layout = nullptr;
  std::vector<transport::RegionInfo> regions;
};

// What a state array needs from the runtime around it.
struct StateContext {
  WorkerPool* pool = nullptr;  // endpoints, one per worker
  UnitScheduler* scheduler = nullptr;
  transport::Transport* transport = nullptr;  // regions
  MemoryBudget* budget = nullptr;  // a resident copy's bytes are released here
  const int* superstep = nullptr;  // supersteps completed
  // False after a transport failure: skip remote frees.
  std::function<bool()> healthy;
  // With several compute nodes: their vertex ranges (nodes + 1 bounds),
  // this node's index, and the raw exchange (Cluster::Exchange's common
  // parts, in node order) through which they tell each other where their
  // slices are. Empty bounds: one node, one slice.
  std::vector<uint64_t> bounds;
  int node = 0;
  std::function<absl::StatusOr<std::vector<std::string>>(std::string)> exchange;
};

// Ascending page numbers as (first, count) pairs of consecutive runs: how
// compute nodes tell each other which pages changed.
inline std::vector<uint64_t> PageRuns(std::span<const uint64_t> pages) {
  std::vector<uint64_t> runs;
  for (size_t k = 0; k < pages.size();) {
    size_t j = k + 1;
    while (j < pages.size() && pages[j] == pages[j - 1] + 1) ++j;
    runs.push_back(pages[k]);
    runs.push_back(j - k);
    k = j;
  }
  return runs;
}

class StateArrayBase : public PageSource {
 public:
  static constexpr uint64_t kPageBytes = PageCache::kPageBytes;
  ~StateArrayBase() override;
  StateArrayBase(const StateArrayBase&) = delete;
  StateArrayBase& operator=(const StateArrayBase&) = delete;

  const std::string& name() const { return name_; }
  uint64_t size() const { return n_; }
  uint64_t bytes() const { return bytes_; }
  CacheHint hint() const { return hint_; }
  bool materialized() const { return materialized_; }
  bool resident() const { return cache_ == nullptr; }

  // Allocates both versions and writes the initial value into them:
  // resident (a local copy whose `reserved` budget bytes this array
  // releases when destroyed) when cache is nullptr, else paged through
  // `cache`. With several compute nodes each allocates the slice of its
  // own vertex range, on memory node (node mod memory nodes), so the
  // array is striped over the memory nodes; the nodes then exchange where
  // their slices are (a collective: every node materializes the same
  // arrays in the same order).
  // `claim_filter_bytes` (paged, one compute node; 0: none): keep the
  // claim filter in that many bytes of `reserved`, its bits and the rest
  // for its log (ClaimFilterBytes or LeanClaimFilterBytes).
  absl::Status Materialize(PageCache* cache, uint64_t reserved,
                           uint64_t claim_filter_bytes = 0);
  // The budget bytes a claim filter of this array takes: its bits, and four
  // times as many for the log and what commits keep of it (5 bits per
  // element; a claim past the log's share pages its page in).
  uint64_t ClaimFilterBytes() const { return 5 * ClaimBitBytes(); }
  // Its bits and a log of a few entries: where a page-in is a memcpy (the
  // local transport), the engine commits no earlier for a full log, so the
  // log fills a few levels after each checkpoint and then stays full, and
  // its bytes serve better as page frames (road-NY BFS at 5%: 11.6 K ->
  // 8.9 K page misses a source).
  uint64_t LeanClaimFilterBytes() const {
    return ClaimBitBytes() + kMinLogEntries * kLogBytesPerEntry;
  }
  static constexpr uint64_t kMinLogEntries = 16;
  // The bytes one log entry takes across a commit (ClaimLog).
  static constexpr uint64_t kLogBytesPerEntry = ClaimLog::kBytesPerEntry;
  // The largest element a claim filter takes (its log keeps 4 bytes).
  static constexpr size_t kMaxClaimedElement = 4;
  uint64_t ClaimBitBytes() const { return (n_ + 63) / 64 * 8; }
  bool filtered() const { return claims_.enabled(); }
  // Called once as each superstep ends: whether a commit now would save
  // page traffic (the next superstep may fill the claim log; past full,
  // claims page their pages in).
  bool WantsCommit() { return filtered() && claims_.EndSuperstep(); }
  // Materializes from the regions an earlier attempt of the job left
  // (`dmg run --resume`): `regions` are its two buffers (of this node's
  // slice, with several compute nodes), and the version after superstep
  // `version` (the one superstep_ says) is taken as the current one. With
  // one compute node its other buffer holds an older version, so the next
  // commit writes every page there, not just the changed ones; with
  // several, each node copies its slice's version into the other buffer,
  // and the nodes exchange where their slices are (a collective).
  // `claim_filter_bytes` (one compute node, paged; 0: none): keep the
  // claim filter in that many bytes, as Materialize does, its bits read
  // from the version.
  absl::Status Adopt(PageCache* cache, uint64_t reserved,
                     const transport::RegionInfo (&regions)[2], int version,
                     uint64_t claim_filter_bytes = 0);

  // Ends superstep `superstep` (1-based) for this array: afterwards buffer
  // superstep % 2 holds the whole version (of the pages in [page_begin,
  // page_end), the pages this compute node owns; the other nodes commit
  // theirs). Called by Engine::EndSuperstep. `leave_queued`: a paged
  // array's last WRITEs stay queued on endpoint 0 (the commit is whole once
  // the caller flushes it; the bytes stay valid until the next Commit), so
  // that the progress record's swap can go in the same batch.
  absl::Status Commit(int superstep, uint64_t page_begin = 0,
                      uint64_t page_end = ~uint64_t{0},
                      bool leave_queued = false);

  // With several compute nodes, at the end of every operation:
  // Publish writes the pages this node changed since its last publish into
  // the open superstep's buffer and appends them to `pages` (ascending);
  // Refresh takes pages another node published: a resident copy READs them
  // (worker w's endpoint, flushed by the caller), a paged one forgets them.
  absl::Status Publish(std::vector<uint64_t>& pages);
  // With several compute nodes: the kLineBytes lines that changed since
  // the last publish (ascending), appended to `lines`; the other nodes
  // refresh just these (RefreshLines). Publish writes them and, for a page
  // not yet written in the open superstep, the lines changed in the
  // previous one too, so the open buffer holds every published page whole
  // (paged readers fetch whole pages from it).
  static constexpr uint64_t kLineBytes = 64;
  // Lines a page holds: one 64-bit word of a line bitmap per page.
  static_assert(PageCache::kPageBytes / kLineBytes == 64);
  static_assert(StateSlices::kPageBytes == PageCache::kPageBytes);
  // Resident writes merge runs of changed lines separated by at most this
  // many unchanged ones: a WRITE costs more than 192 bytes moved.
  static constexpr uint64_t kGapLines = 3;
  // Before a collective's post, with several compute nodes: WRITEs the
  // lines changed since the last publish that were not announced yet in the
  // open superstep (and what their pages lack in its buffer), so that the
  // post itself tells the others they are in place and no "written" round
  // is needed. Only for an array every node holds resident: a resident
  // reader READs from the open buffer only lines announced to it, so
  // unannounced lines can be written while a slower node is still in the
  // operation; a paged reader fetches whole pages from it. Lines announced
  // earlier in this superstep and changed again wait for Publish, after the
  // exchange: a slower node may still READ their announced bytes. Returns
  // whether anything is left for Publish (such lines, or any change of an
  // array some node pages), and whether the array is clean: its buffer
  // then holds every page of this node whole (the lines the previous
  // superstep changed are copied too), so a commit right after the
  // exchange would write nothing.
  struct Prewritten {
    bool held = false;
    bool clean = false;
  };
  absl::StatusOr<Prewritten> Prewrite();
  // No change since the last Prewrite that said clean (a commit now writes
  // nothing).
  bool Clean();
  // Between a collective after which every node was clean and the end of
  // the superstep (Engine::EndSuperstep without a barrier): the open
  // buffer holds the whole version, and lines pending from earlier
  // supersteps are READ from it, not from the finished version's buffer,
  // which a node that has already ended the superstep may be writing.
  void ReadOldFromOpen(bool on) { old_from_open_ = on; }
  // The lines changed since the last publish, a bit each (bit j of word p
  // is line 64p + j, as wire::PutVertexSet takes a set).
  std::span<const uint64_t> DirtyLineWords();
  uint64_t lines() const { return (bytes_ + kLineBytes - 1) / kLineBytes; }
  // Lines [first, first + count) another node published: a resident copy
  // READs them (worker w's endpoint, flushed by the caller); a paged one
  // forgets their pages.
  void RefreshLines(int w, uint64_t first, uint64_t count);

  // Lazy refresh (a resident copy with several compute nodes): instead of
  // READing the lines another node published, note them as pending. They
  // are READ in bulk by FetchPending (the engine calls it before every
  // operation that may read other nodes' vertices widely), or one at a time
  // by an accessor that reads a pending line (a safety net: any read sees
  // a current value). A push of an update that reads only its own sources
  // (SSSP's distances, CC's labels) then never READs the others' changes.
  // Pending lines of the open superstep are READ from its buffer (nobody
  // writes a published line again until the next collective); older ones
  // from the last finished version's buffer (nobody writes it during the
  // open superstep), which holds them whole and current.
  void MarkPending(uint64_t first, uint64_t count);
  // READs every pending line, batched over the workers; afterwards the copy
  // is current.
  absl::Status FetchPending();
  // What an accessor that reads a pending line READs during the next
  // operation (set between operations): that line alone (false), or every
  // pending line of the array in one batch (true: for operations that may
  // read other nodes' vertices widely, a pull or a VertexMap chasing
  // labels; an array such an operation never reads elsewhere than in this
  // node's range moves no byte).
  // `referenced` (a bit per vertex, or nullptr: every line) narrows that
  // batch to the pending lines holding a vertex it sets: the sources a
  // pull's in-edges name (Engine::ArmSourceReads). Lines outside it stay
  // pending, and a touch of one READs that line alone.
  // `demand` lines are READ one at a time before the batch
  // (coordinator::DemandBudget).
  // With `referenced` set, the operation promises to read other nodes'
  // vertices only where it names them (a pull's value reads its source and
  // target, Ligra's edge-function contract): once the batch is in, the
  // accessors stop checking for pending lines until ResumeChecks (the
  // check per read cost a two-node PageRank at 5% a third of its time).
  void FetchAllOnTouch(bool all,
                       const std::vector<uint64_t>* referenced = nullptr,
                       uint64_t demand = 0) {
    ResumeChecks();
    fetch_all_ = all;
    referenced_ = referenced;
    mirror_ = nullptr;
    keep_checks_ = false;
    bulk_taken_.store(false, std::memory_order_relaxed);
    demand_left_.store(static_cast<int64_t>(demand), std::memory_order_relaxed);
  }
  // Where the next batch filtered by `referenced` may READ owners' packed
  // copies instead of lines (nullptr: lines only; set between operations,
  // after FetchAllOnTouch, which clears it). Their vertices' values land
  // in the copy; their lines stay pending, so once the operation is over
  // a touch of any other vertex there READs its line.
  void SetMirror(const MirrorSource* mirror) {
    mirror_ = mirror;
    // Sized once, here, where no worker runs: NoteTaken reads it anytime.
    if (mirror != nullptr && mirror_pages_.empty()) {
      mirror_pages_.assign((pages_ + 63) / 64, 0);
    }
  }
  // Whether a batch filtered by `referenced` was READ since the last call
  // (the engine then asks the owners for packed copies).
  bool TakeFilteredBatch() { return filtered_batch_.exchange(false); }
  // Copies the resident values of `vertices`, in order, to `out`
  // (elem_size() bytes each): an owner's packed copy.
  void PackElements(std::span<const store::VertexId> vertices,
                    std::byte* out) const {
    for (const store::VertexId v : vertices) {
      std::memcpy(out, local_.data() + uint64_t{v} * elem_, elem_);
      out += elem_;
    }
  }
  // Whether a line of a page whose values the last packed copies brought
  // was READ since (by a later operation touching other vertices there):
  // the copies then only add bytes (SourceMirrors::Drop). Cleared by the
  // call.
  bool TakeMirrorWasted() { return mirror_wasted_.exchange(false); }
  // Values READ from packed copies so far.
  uint64_t mirror_values() const { return mirror_values_; }
  bool any_pending() const { return any_pending_; }
  // Whether FetchAllOnTouch armed a batch for this operation.
  bool fetches_all_on_touch() const { return fetch_all_; }
  // READs in one batch the pending lines holding any of `vertices` or of
  // [first, end) (a taken block's neighbours and its own vertices), before
  // its work would touch them one at a time. Resident arrays; an error is
  // kept as a touch's is.
  void FetchPendingOf(int worker, std::span<const store::VertexId> vertices,
                      store::VertexId first, store::VertexId end);
  // For a scan others may take units of (until the next FetchAllOnTouch):
  // the batch READs only the referenced lines, as armed, but the accessors
  // keep checking the rest, which a taken unit may touch anywhere: READ a
  // line at a touch, then, after `rest_budget` of them (what the batch
  // would cost), all that are left in one batch.
  void KeepChecks(uint64_t rest_budget) {
    keep_checks_ = true;
    rest_left_.store(static_cast<int64_t>(rest_budget),
                     std::memory_order_relaxed);
  }
  // Ends what FetchAllOnTouch's promise allowed (at the operation's end).
  void ResumeChecks() {
    mirror_ = nullptr;
    if (checks_suspended_) {
      checks_suspended_ = false;
      any_pending_.store(true, std::memory_order_release);
    }
  }
  // How many lines are pending (the refresh choice weighs them).
  uint64_t pending_lines() const;
  // Whether element `index`'s line is pending (ReadResult skips those in
  // its comparison).
  bool LinePending(uint64_t index) const {
    return any_pending_ && LineIsPending(index * elem_ / kLineBytes);
  }
  // Makes the open superstep's buffer hold the whole current version of
  // pages [page_begin, page_end) (this node's), so that remote atomics can
  // work on it; Commit then has nothing left to write for them.
  absl::Status MakeCurrent(uint64_t page_begin, uint64_t page_end);
  // Pages [first, first + count) were changed in the open superstep's
  // buffer by remote atomics: this node's own pages count as published by
  // it (mine), others' as theirs. (Refresh still brings the bytes.)
  void MarkChangedRemotely(uint64_t first, uint64_t count, bool mine);
  // Lines [first, first + count) of this node's own pages were changed in
  // the open superstep's buffer by remote atomics: the next superstep's
  // buffer lacks just these (RefreshLines brings the bytes here).
  void MarkOwnLinesChangedRemotely(uint64_t first, uint64_t count);
  // Where element `index` lies in the open superstep's buffer: the 8-byte
  // aligned word holding it and the element's byte offset in that word.
  using Word = StateSlices::Word;
  Word CurrentWord(uint64_t index) const {
    return slices_.WordAt(index * elem_, (superstep() + 1) % 2);
  }
  uint64_t elem_size() const { return elem_; }
  void Refresh(int w, uint64_t first, uint64_t count);
  uint64_t pages() const { return pages_; }
  // Reads elements [begin, end) of the version after `superstep` into dst.
  absl::Status ReadVersion(int superstep, uint64_t begin, uint64_t end,
                           void* dst);
  // First error a paged access hit (accessors cannot return one).
  absl::Status error();
  // Whether a READ of this array failed this job (error() says why): then
  // its values are not the job's, and a kernel loop that climbs values (a
  // union-find's) must stop instead of waiting for them to agree.
  bool failed() const {
    return pin_failed_.load(std::memory_order_relaxed) ||
           read_failed_.load(std::memory_order_relaxed);
  }
  // Marks every page changed (for bulk writes through MutableResidentData).
  void MarkAllDirty() {
    std::fill(dirty_.begin(), dirty_.end(), ~uint64_t{0});
    std::fill(dirty_lines_.begin(), dirty_lines_.end(), ~uint64_t{0});
  }
  // Paged mode: unpins the page each worker keeps pinned between accesses.
  // Called before a commit and whenever workers stop touching the array.
  void ReleasePins();

  // PageSource (paged mode).
  absl::Status FetchPages(int worker, uint64_t first, uint64_t count,
                          std::byte* const* dst, uint8_t* dirtied) override;
  absl::Status WriteBackPages(int worker,
                              std::span<const DirtyPage> pages) override;

 protected:
  StateArrayBase(StateContext context, std::string name, uint64_t n,
                 size_t elem_size, CacheHint hint, const void* initial);
  void MarkDirty(uint64_t index) {
    const uint64_t at = index * elem_;
    // Paged: misses read the page bits during an operation (which buffer
    // holds a page), so they are set at once (one fetch_or per page).
    if (cache_ != nullptr) SetBit(dirty_, at / kPageBytes);
    // Commits write, and other compute nodes re-read, just the changed
    // lines (an element never straddles one: sizes are powers of two).
    // One plain byte store per line: a bitmap's atomic fetch_or serialised
    // the hot loops that write every element (PageRank's VertexMap spent
    // 70% of its time in it); the flags are folded into the line bitmaps
    // between operations (FoldLineFlags), before anything reads them.
    std::atomic_ref<uint8_t> flag(line_flags_[at / kLineBytes]);
    if (flag.load(std::memory_order_relaxed) == 0) {
      flag.store(1, std::memory_order_relaxed);
      std::atomic_ref<uint8_t> page(page_flags_[at / kPageBytes]);
      if (page.load(std::memory_order_relaxed) == 0) {
        page.store(1, std::memory_order_relaxed);
      }
      // Read first: once set, the workers share the line read-only.
      if (!flags_set_.load(std::memory_order_relaxed)) {
        flags_set_.store(true, std::memory_order_relaxed);
      }
    }
  }
  static void SetBit(std::vector<uint64_t>& bits, uint64_t i) {
    std::atomic_ref<uint64_t> word(bits[i >> 6]);
    const uint64_t mask = uint64_t{1} << (i & 63);
    if (!(word.load(std::memory_order_relaxed) & mask)) {
      word.fetch_or(mask, std::memory_order_relaxed);
    }
  }
  // Paged mode: the element's address inside its page, or nullptr after
  // recording an error. Each worker keeps its last page pinned, so runs of
  // accesses to one page (sequential scans) cost one pin, not one each.
  std::byte* PinElement(int worker, uint64_t index) {
    uint64_t at = index * elem_;
    Handle& h = handles_[worker];
    if (h.page == at / kPageBytes) return h.base + at % kPageBytes;
    return PinSlow(worker, at);
  }
  void NoteDirty(int worker) { handles_[worker].dirty = true; }
  // Claim filter: whether element `index` holds the initial value; taking
  // that (first wins: true for one caller only); keeping it exact after a
  // write of any other kind.
  bool UnsetBit(uint64_t index) const { return claims_.Unset(index); }
  bool TakeUnsetBit(uint64_t index) { return claims_.Take(index); }
  void SetUnsetBit(uint64_t index, bool unset) {
    claims_.SetUnset(index, unset);
  }
  // Where a won claim's value goes: the element in its page when the page
  // is cached (the worker's pinned one, or any cached frame, now pinned by
  // the worker: no miss), else nullptr, and LogClaim keeps it.
  std::byte* PinIfCachedElement(int worker, uint64_t index);
  // False when the log holds its share of the bound already.
  bool LogClaim(uint64_t index, const void* value);
  // Paged reads: from the worker's pinned page, else an unpinned validated
  // read of a cached page (the page cache's hit path).
  template <typename T>
  bool TryPinnedElement(int worker, uint64_t index, T* out) {
    const uint64_t at = index * elem_;
    Handle& h = handles_[worker];
    if (h.page != at / kPageBytes) return false;
    ++h.reads;
    *out = std::atomic_ref<T>(*reinterpret_cast<T*>(h.base + at % kPageBytes))
               .load(std::memory_order_relaxed);
    return true;
  }
  // After a validated read of a cached page that is not the worker's
  // pinned one: whether the pin should move there, because the last
  // kFollowAfter reads of the array by this worker were all of that page
  // (no read of the pinned page between them: `reads` counts those).
  // Without it a sequential scan of cached pages, or a pull whose sources
  // sit mostly on their target's page (road-NY: 89% of arcs), would pay
  // the page cache's validated read at every element; counting only the
  // reads off the pin would move it away and back for sources off their
  // target's page. Sixteen: a pin moves with two locked read-modify-
  // writes, and Afforest's climbs, which read a few pages of roots between
  // their vertices' pages, moved it often enough at four to lose 6% on
  // road-NY CC (one thread).
  [[gnu::always_inline]] bool FollowRead(int worker, uint64_t index) {
    static constexpr uint32_t kFollowAfter = 16;
    Handle& h = handles_[worker];
    const uint64_t page = index * elem_ / kPageBytes;
    const bool run = h.streak_page == page && h.streak_reads == h.reads;
    h.streak_reads = h.reads;
    if (!run) {
      h.streak_page = page;
      h.streak = 1;
      return false;
    }
    if (++h.streak < kFollowAfter) return false;
    h.streak = 0;
    return true;
  }
  template <typename T>
  bool TryReadElement(int worker, uint64_t index, T* out) {
    uint64_t at = index * elem_;
    const Handle& h = handles_[worker];
    if (h.page == at / kPageBytes) {
      *out = std::atomic_ref<T>(*reinterpret_cast<T*>(h.base + at % kPageBytes))
                 .load(std::memory_order_relaxed);
      return true;
    }
    return cache_->TryRead(worker, this, at / kPageBytes, at % kPageBytes, out);
  }
  std::byte* local_bytes() { return local_.data(); }
  const std::byte* initial_bytes() const { return initial_.data(); }
  bool LineIsPending(uint64_t line) const { return pending_.IsPending(line); }
  // Accessors' check: READs element `index`'s line first if it is pending
  // (not after a READ of pending lines failed: the error ends the job at
  // the operation's end, and every touch READing again, and failing again,
  // kept a node whose peer died busy for tens of seconds).
  void FetchIfPending(int worker, uint64_t index) {
    const uint64_t line = index * elem_ / kLineBytes;
    if (LineIsPending(line) && !read_failed_.load(std::memory_order_relaxed)) {
      if (fetch_all_ && !bulk_taken_.load(std::memory_order_acquire) &&
          demand_left_.fetch_sub(1, std::memory_order_relaxed) <= 0) {
        FetchAllPending(worker, line);
      } else if (keep_checks_ && bulk_taken_.load(std::memory_order_acquire) &&
                 rest_left_.fetch_sub(1, std::memory_order_relaxed) <= 0) {
        FetchRestPending(worker, line);
      } else {
        if (touch_hook_for_test != nullptr) touch_hook_for_test();
        FetchLine(worker, line);
      }
    }
  }

 public:
  // Tests only: runs between an accessor's pending check and its READ of
  // the line, to widen the window in which another worker READs the same
  // line (MultiNodeTest.WorkersRacingForOnePendingLineAllSeeItsNewValue).
  static inline void (*touch_hook_for_test)() = nullptr;

 protected:
  // Set between operations (and cleared by FetchAllPending, once it has
  // READ every pending line; a worker that sees it clear reads the copy).
  std::atomic<bool> any_pending_ = false;
  // A READ of pending lines failed (error_ says why).
  std::atomic<bool> read_failed_ = false;
  // A page-in failed (error_ says why): no more are tried.
  std::atomic<bool> pin_failed_ = false;
  bool fetch_all_ = false;  // set between operations only
  // FetchAllOnTouch's filter (set between operations), and whether this
  // operation's batch was READ with lines left pending outside it.
  const std::vector<uint64_t>* referenced_ = nullptr;
  const MirrorSource* mirror_ = nullptr;  // SetMirror
  std::atomic<bool> filtered_batch_ = false;
  uint64_t mirror_values_ = 0;
  std::atomic<bool> bulk_taken_ = false;
  std::atomic<int64_t> demand_left_ = 0;  // lines before the batch
  // Lines are pending but the accessors do not check (FetchAllOnTouch).
  bool checks_suspended_ = false;
  bool keep_checks_ = false;            // KeepChecks
  std::atomic<int64_t> rest_left_ = 0;  // lines before the rest's batch

 private:
  // What Materialize and Adopt share: the local copy or the cache's pages,
  // and clean line flags.
  void AttachStorage(PageCache* cache, uint64_t reserved);
  // With several compute nodes: every node posts where its slice's buffers
  // are and whether it holds the array resident (a collective).
  absl::Status ExchangeSlices();
  // Copies this node's slice from buffer `from` into buffer `to`.
  absl::Status CopyOwnSlice(int from, int to);
  void QueueWrite(int w, int buffer, uint64_t first_page, uint64_t last_page);
  // Resident: queues WRITEs into `buffer` of the lines pages[0..count) need
  // there (see LinesNeeded), runs merged across gaps of kGapLines.
  // kNeeded: the lines LinesNeeded gives; kPrewrite: those not held back
  // for Publish (see Prewrite), noted in prewritten_; kRest: those not
  // prewritten.
  enum class Lines { kNeeded, kPrewrite, kRest };
  template <typename PageAt>
  void QueueLines(int w, int buffer, uint64_t count, PageAt page_at,
                  Lines which = Lines::kNeeded);
  // Per page: lines Prewrite wrote since the last publish or commit.
  std::vector<uint64_t> prewritten_;
  bool old_from_open_ = false;  // set between operations only
  // The buffer a pending line is READ from: the open superstep's for one
  // announced in it (`now`), else the finished version's (or, see
  // ReadOldFromOpen, the open one's).
  int PendingBuffer(bool now) const {
    return now || old_from_open_ ? (superstep() + 1) % 2 : superstep() % 2;
  }
  // The lines of page p the open superstep's buffer lacks: those changed
  // since the last publish, and, unless the page was already written whole
  // into that buffer in this superstep, those changed in the previous one.
  uint64_t LinesNeeded(uint64_t p) const {
    const bool whole = Bit(published_, p) || Bit(current_, p);
    return dirty_lines_[p] | (whole ? 0 : prev_lines_[p]);
  }
  // After the open buffer received dirty_'s pages: they count as published,
  // their lines as changed in this superstep.
  void MarkPublished();
  absl::Status WriteVersion(int superstep, uint64_t page_begin,
                            uint64_t page_end, bool leave_queued = false);
  // Atomic: workers set dirty bits (MarkDirty) while misses read them.
  static bool Bit(const std::vector<uint64_t>& bits, uint64_t page) {
    return (std::atomic_ref<uint64_t>(const_cast<uint64_t&>(bits[page >> 6]))
                .load(std::memory_order_relaxed) >>
            (page & 63)) &
           1;
  }
  uint64_t PageLength(uint64_t page) const {
    return std::min(kPageBytes, bytes_ - page * kPageBytes);
  }

  transport::Endpoint& endpoint(int w) { return ctx_.pool->endpoint(w); }
  int superstep() const { return *ctx_.superstep; }

  StateContext ctx_;
  std::string name_;
  uint64_t n_;
  size_t elem_;
  uint64_t bytes_;
  uint64_t pages_;
  CacheHint hint_;
  std::vector<std::byte> initial_;  // one element
  bool materialized_ = false;
  PageCache* cache_ = nullptr;  // nullptr: resident
  AlignedBuffer local_;         // resident mode only
  // Where the array's bytes are on the memory nodes (this node's owned
  // range and the others'), and how a READ or WRITE of a byte range is cut
  // to reach them.
  StateSlices slices_;
  void Queue(transport::Endpoint& ep, bool write, int buffer, uint64_t at,
             std::byte* local, uint64_t length) {
    slices_.Queue(ep, write, buffer, at, local, length);
  }
  // Pages this node changed since it last published (all of the open
  // superstep's changes with one compute node), in the previous superstep;
  // pages it published in this superstep; pages others published in it.
  std::vector<uint64_t> dirty_, prev_dirty_, published_, others_;
  // Pages this node copied unchanged into the open superstep's buffer
  // (MakeCurrent) in this superstep.
  std::vector<uint64_t> current_;
  // Paged: pages written back into the open superstep's buffer in this
  // superstep (the first write-back also sends the previous superstep's
  // lines; later ones only this one's).
  std::vector<uint64_t> written_;
  // Commit scratch: pages to copy into the open buffer, where each one's
  // bytes are (a cached frame, or bounce_); reused.
  std::vector<uint64_t> copies_;
  std::vector<const std::byte*> copy_sources_;
  std::vector<std::byte> bounce_;
  // While a commit flushes the dirty frames: WriteBackPages queues them on
  // the committing endpoint without flushing (CommitPaged flushes).
  bool defer_writebacks_ = false;
  // Queues READs into (or WRITEs from) `data`, a page's bytes, of the lines
  // of page `page` set in `lines` of version buffer `buffer`, runs merged
  // across gaps of kGapLines.
  void QueuePageLines(transport::Endpoint& ep, bool write, int buffer,
                      uint64_t page, std::byte* data, uint64_t lines);

  // Line bitmaps, one word per page: the lines of dirty_'s pages that
  // changed since the last publish (what the other nodes refresh and
  // resident writes send); lines changed and published earlier in this
  // superstep; lines changed in the previous superstep (what the open
  // buffer lacks besides this superstep's).
  std::vector<uint64_t> dirty_lines_, step_lines_, prev_lines_;
  // A byte per line (64 per page), set by MarkDirty during an operation;
  // FoldLineFlags moves them into dirty_lines_ (and dirty_), single-
  // threaded, before anything reads those, and clears them. Not counted in
  // the cache bound (like the bitmaps: 1/64 of the array's bytes).
  std::vector<uint8_t> line_flags_;
  // A byte per page: one of its line flags was set since the last fold (a
  // BFS level changes a few hundred lines: the fold packs their pages, not
  // a flag of every line of the array).
  std::vector<uint8_t> page_flags_;
  // A line flag was set since the last fold (folds between operations,
  // several a collective, skip the scan of every flag when none was).
  std::atomic<bool> flags_set_ = false;
  void FoldLineFlags();
  // Lazy refresh: lines others published and this copy has not READ, in
  // the open superstep (its buffer) and before (the last finished one's).
  PendingLines pending_;
  // READs one pending line (nothing if another worker READ it since the
  // caller saw it pending).
  [[gnu::noinline]] void FetchLine(int worker, uint64_t line);
  // FetchAllOnTouch's READ: every pending line (in referenced_), on the
  // worker that touched `line`; the others that touch one meanwhile wait
  // for it. Lines leave the bitmaps only once READ (as in FetchLine).
  [[gnu::noinline]] void FetchAllPending(int worker, uint64_t line);
  // KeepChecks' second batch: every line still pending.
  [[gnu::noinline]] void FetchRestPending(int worker, uint64_t line);
  // The batch both READ: the pending lines (only referenced_'s when
  // `filtered`), cleared once READ. Sets *left when pending lines remain
  // outside the filter; false when the READ failed (the error is kept).
  bool ReadPendingBatch(int worker, bool filtered, bool* left)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(fetch_mu_);
  // A batch's READs queued on ep: the words to clear once READ (page, its
  // now and old bits). FlushTaken flushes and clears them; false when the
  // READ failed (the error is kept; they stay pending).
  struct TakenLines {
    uint64_t page, now, old;
  };
  bool FlushTaken(transport::Endpoint& ep,
                  const std::vector<TakenLines>& taken);
  // READs the values mirror_ offers into the copy; false when the READ
  // failed (the error is kept). `skip[p]`: page p's lines are left pending
  // (an owner whose copy was READ).
  bool ReadMirrors(int worker, std::vector<bool>& skip)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(fetch_mu_);
  // One element's bytes into the copy, as one atomic store.
  void StoreElement(std::byte* to, const std::byte* from) const {
    switch (elem_) {
      case 1:
        return Store<uint8_t>(to, from);
      case 2:
        return Store<uint16_t>(to, from);
      case 4:
        return Store<uint32_t>(to, from);
      default:
        return Store<uint64_t>(to, from);
    }
  }
  template <typename W>
  static void Store(std::byte* to, const std::byte* from) {
    W w;
    std::memcpy(&w, from, sizeof(W));
    std::atomic_ref<W>(*reinterpret_cast<W*>(to))
        .store(w, std::memory_order_relaxed);
  }
  std::vector<std::byte> mirror_scratch_;  // under fetch_mu_
  // Pages whose values the last packed copies brought, a bit each (sized by
  // SetMirror; words set by ReadMirrors, read by NoteTaken, atomically).
  std::vector<uint64_t> mirror_pages_;
  std::atomic<bool> mirror_wasted_ = false;
  // Lines of page `page` are being READ: a page the copies brought?
  void NoteTaken(uint64_t page) {
    if (!mirror_pages_.empty() &&
        ((std::atomic_ref<uint64_t>(mirror_pages_[page >> 6])
              .load(std::memory_order_relaxed) >>
          (page & 63)) &
         1) != 0) {
      mirror_wasted_.store(true, std::memory_order_relaxed);
    }
  }
  std::vector<bool> mirror_skip_;          // under fetch_mu_
  // The lines of page `page` holding a vertex referenced_ sets.
  uint64_t ReferencedLines(uint64_t page) const;
  // Queues READs of page `page`'s pending lines (bits `now` from the open
  // superstep's buffer, `old` from the finished version's), a READ a run.
  void QueuePendingRuns(transport::Endpoint& ep, uint64_t page, uint64_t now,
                        uint64_t old);
  Mutex fetch_mu_;
  Mutex error_mu_;
  absl::Status error_ ABSL_GUARDED_BY(error_mu_);
  uint64_t reserved_ = 0;  // budget bytes held by a resident copy
  // A line each: a worker writes its own at every page change and every
  // claim, and handles packed together put two workers' on one line.
  struct alignas(64) Handle {
    uint64_t page = ~uint64_t{0};
    std::byte* base = nullptr;
    bool dirty = false;
    // Reads of the pinned page, and of cached pages that are not the
    // pinned one (FollowRead).
    uint32_t reads = 0;
    uint32_t streak = 0;
    uint32_t streak_reads = 0;
    uint64_t streak_page = ~uint64_t{0};
  };
  std::byte* PinSlow(int worker, uint64_t at);
  std::vector<Handle> handles_;  // per worker (paged mode)

  // Claim filter (disabled: none; claim_log.h).
  ClaimLog claims_;
  // At commit: the claim log's WRITEs (ClaimLog::PlanCommit), then cached
  // frames take its values (they hold the committed version from then on).
  // The claim filter, every element unset (paged, one compute node,
  // elements of at most kMaxClaimedElement bytes; else none).
  void InitClaims(uint64_t bytes);
  // After an adoption: the bits of the elements that differ from the
  // initial value in `version` cleared (one READ of the array).
  absl::Status RebuildClaimBits(int version);
  // Queues the claim log's WRITEs into `buffer` on `ep` (ClaimLog::
  // PlanCommit); after they completed, claims_.Committed.
  void QueueLogs(transport::Endpoint& ep, int buffer);
  // WriteVersion of a paged array: everything in one round trip on the
  // committing thread's endpoint (two when lines to copy are not cached).
  absl::Status CommitPaged(int buffer, uint64_t page_begin, uint64_t page_end,
                           bool leave_queued);
  // Copies copies_' lines changed last superstep into `buffer`, the
  // workers sharing them.
  absl::Status CopyPagesInParallel(int buffer);
};

template <typename T>
class StateArray : public StateArrayBase {
  // Lines hold whole elements, and regions start filled with them
  // (transport::RegionFill).
  static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 ||
                sizeof(T) == 8);

 public:
  StateArray(StateContext context, std::string name, uint64_t n, CacheHint hint,
             T initial)
      : StateArrayBase(std::move(context), std::move(name), n, sizeof(T), hint,
                       &initial) {}

  // The value every element starts with (Claim's "unset").
  T initial() const {
    T x;
    std::memcpy(&x, initial_bytes(), sizeof(T));
    return x;
  }

  // The resident paths are inline; paged ones are out of line, so that hot
  // loops stay small. Forced inline (with the Reader's read): a kernel's
  // per-vertex code calls several accessors, and out of line they cost
  // PageRank's finish ~45 instructions a vertex (callgrind, kron:16: 107
  // -> 62 with MarkDirty forced too; kron:20 with no bound 12-17% of a
  // run). Forcing these alone made GCC outline the Reader's read instead,
  // a call per arc; forcing MarkDirty too cost road-NY BFS ~3%.
  [[gnu::always_inline]] T Get(store::VertexId v) {
    if (resident()) {
      if (any_pending_) [[unlikely]]
        FetchIfPending(WorkerPool::current(), v);
      return std::atomic_ref<T>(data()[v]).load(kRelaxed);
    }
    return Get(WorkerPool::current(), v);
  }
  [[gnu::always_inline]] void Set(store::VertexId v, T x) {
    if (resident()) {
      std::atomic_ref<T>(data()[v]).store(x, kRelaxed);
      MarkDirty(v);
      return;
    }
    Set(WorkerPool::current(), v, x);
  }
  // Applies a named update (see vertex_program.h): true if v changed.
  template <typename Op>
  bool Apply(store::VertexId v, T x) {
    return Apply<Op>(WorkerPool::current(), v, x);
  }

  T Get(int w, store::VertexId v) {
    if (resident()) {
      if (any_pending_) [[unlikely]]
        FetchIfPending(w, v);
      return std::atomic_ref<T>(data()[v]).load(kRelaxed);
    }
    // Paged: the worker's pinned page inline (sequential scans stay on one
    // page for 4 KiB of elements), anything else out of line.
    T x;
    if (TryPinnedElement(w, v, &x)) return x;
    return GetPaged(w, v);
  }
  // Whether v still holds the initial value (Claim's test): a bit with the
  // claim filter, else a read.
  bool Unset(int w, store::VertexId v) {
    if (!resident() && filtered()) return UnsetBit(v);
    return Get(w, v) == initial();
  }
  bool Unset(store::VertexId v) {
    if (!resident() && filtered()) return UnsetBit(v);
    return Get(v) == initial();
  }
  // Unset for a target another node owns, in a push whose owner applies
  // the update itself and refuses a claimed target (first wins): a pending
  // line is not READ but taken as unset, so the push sends at worst an
  // update too many instead of a READ. Exact where nothing is pending.
  bool UnsetOrPending(int w, store::VertexId v) {
    if (!resident()) return Unset(w, v);
    if (LinePending(v)) return true;
    return std::atomic_ref<T>(data()[v]).load(kRelaxed) == initial();
  }
  void Set(int w, store::VertexId v, T x) {
    Update(w, v, [&](std::atomic_ref<T> a) {
      a.store(x, kRelaxed);
      return true;
    });
  }
  template <typename Op>
  bool Apply(int w, store::VertexId v, T x) {
    const T unset = initial();
    if constexpr (Op::kFirstWins) {
      // Claim filter: the bit decides who wins; no page comes in for it.
      if (!resident() && filtered() && x != unset) {
        if (!TakeUnsetBit(v)) return false;
        std::byte* p = PinIfCachedElement(w, v);
        if (p == nullptr && LogClaim(v, &x)) return true;
        // Cached, or the log is full: into the page (fetched if need be).
        if (p == nullptr) p = PinElement(w, v);
        if (p == nullptr) return false;  // the error is recorded
        std::atomic_ref<T>(*reinterpret_cast<T*>(p)).store(x, kRelaxed);
        MarkDirty(v);
        NoteDirty(w);
        return true;
      }
    }
    return Update(w, v,
                  [&](std::atomic_ref<T> a) { return Op::Apply(a, x, unset); });
  }

  // A first-wins claim (Claim) by the only worker that writes v this
  // round (a bottom-up step's chunk is its worker's alone): a load and a
  // store where resident, not a locked compare-and-swap, which took three
  // quarters of a kron:20 bottom-up level's claims. Paged arrays apply it
  // as Apply<Claim> does (the claim filter's bit is the test).
  template <typename Op>
  bool ApplyOwned(int w, store::VertexId v, T x) {
    static_assert(Op::kFirstWins);
    const T unset = initial();
    if (!resident() || x == unset) return Apply<Op>(w, v, x);
    std::atomic_ref<T> a(data()[v]);
    if (a.load(kRelaxed) != unset) return false;
    a.store(x, kRelaxed);
    MarkDirty(v);
    return true;
  }

  // Sets v to `desired` if it holds `expected`, atomically (a union-find's
  // hook: Afforest's links): true if it did. Like Set, on one compute
  // node or on the node's own range only.
  bool CompareExchange(store::VertexId v, T expected, T desired) {
    return Update(WorkerPool::current(), v, [&](std::atomic_ref<T> a) {
      return a.compare_exchange_strong(expected, desired, kRelaxed);
    });
  }

  // A read-only view for hot loops: plain loads from the local copy when
  // resident (the compiler keeps the pointer in a register), accessor reads
  // when paged. Valid while no worker writes the array.
  // A copy checks again whether the local copy is current: a pull made
  // with a reader taken while other nodes' lines were pending READs them
  // in one batch at its first touch, and the kernels copy their value
  // function per block (PullGather does), so the blocks after it read
  // plain loads (with two compute nodes, kron:20 PageRank's pull spent a
  // third more time a step reading through the accessor).
  class Reader {
   public:
    [[gnu::always_inline]] T operator[](store::VertexId v) const {
      // Relaxed atomic loads (a plain load on x86): a worker whose copy
      // still checks may be writing a line the batch already brought, the
      // same bytes, into the local copy.
      return local_ != nullptr
                 ? std::atomic_ref<T>(const_cast<T&>(local_[v])).load(kRelaxed)
                 : array_->Get(v);
    }
    Reader(const Reader& o) : Reader(o.array_) {}
    Reader& operator=(const Reader& o) {
      array_ = o.array_;
      local_ = Current(array_);
      return *this;
    }

   private:
    friend class StateArray;
    explicit Reader(StateArray* a) : array_(a), local_(Current(a)) {}
    // Plain loads only from a current resident copy (nothing pending).
    static const T* Current(StateArray* a) {
      return a->resident() && !a->any_pending() ? a->data() : nullptr;
    }
    StateArray* array_;
    const T* local_;
  };
  Reader reader() { return Reader(this); }
  // Every vertex's value as one span, when the local copy is current (a
  // resident array with nothing pending; else empty): a GPU share's input
  // without a copy.
  std::span<const T> current_values() {
    const T* p = Reader::Current(this);
    return p == nullptr ? std::span<const T>() : std::span<const T>(p, size());
  }

  // The version after `superstep` as the memory node holds it; a resident
  // array also checks it against its local copy (a difference would mean the
  // write-back lost an update).
  absl::StatusOr<std::vector<T>> ReadResult(int superstep) {
    return ReadResult(superstep, 0, size());
  }
  // The same for elements [begin, end) (on page boundaries, or end = size()),
  // the others left at the initial value.
  absl::StatusOr<std::vector<T>> ReadResult(int superstep, uint64_t begin,
                                            uint64_t end) {
    // After the last operation: lines it left pending under a pull's
    // promise (FetchAllOnTouch) are pending again, and are not compared.
    ResumeChecks();
    std::vector<T> out = HugeVector<T>(size());
    if (begin > 0 || end < size()) {
      std::fill(out.begin(), out.begin() + begin, initial());
      std::fill(out.begin() + end, out.end(), initial());
    }
    if (absl::Status s = ReadVersion(superstep, begin, end, out.data() + begin);
        !s.ok()) {
      return s;
    }
    if (resident() && Differs(out.data(), begin, end)) {
      return absl::InternalError("state '" + name() +
                                 "' on the memory node disagrees with the "
                                 "compute node's copy");
    }
    return out;
  }

 private:
  static constexpr std::memory_order kRelaxed = std::memory_order_relaxed;
  T* data() { return reinterpret_cast<T*>(local_bytes()); }
  // Whether `read` (the whole array's layout) and the local copy differ in
  // elements [begin, end), pending lines skipped (lines hold whole
  // elements).
  bool Differs(const T* read, uint64_t begin, uint64_t end) {
    const uint64_t b0 = begin * sizeof(T), b1 = end * sizeof(T);
    const auto* mine = reinterpret_cast<const std::byte*>(data());
    const auto* theirs = reinterpret_cast<const std::byte*>(read);
    if (!any_pending())
      return std::memcmp(theirs + b0, mine + b0, b1 - b0) != 0;
    for (uint64_t at = b0; at < b1; at += kLineBytes - at % kLineBytes) {
      const uint64_t n =
          std::min<uint64_t>(kLineBytes - at % kLineBytes, b1 - at);
      if (!LineIsPending(at / kLineBytes) &&
          std::memcmp(theirs + at, mine + at, n) != 0) {
        return true;
      }
    }
    return false;
  }
  [[gnu::noinline]] T GetPaged(int w, store::VertexId v) {
    if (filtered() && UnsetBit(v)) return initial();  // no page for it
    T x;
    if (TryReadElement(w, v, &x)) {
      if (!FollowRead(w, v)) return x;
      PinElement(w, v);  // a failure is recorded; x was read all the same
      return x;
    }
    std::byte* p = PinElement(w, v);
    if (p == nullptr) return T{};
    return std::atomic_ref<T>(*reinterpret_cast<T*>(p)).load(kRelaxed);
  }

  template <typename Op>
  bool Update(int w, store::VertexId v, Op op) {
    bool changed;
    if (resident()) {
      changed = op(std::atomic_ref<T>(data()[v]));
    } else {
      std::byte* p = PinElement(w, v);
      if (p == nullptr) return false;
      std::atomic_ref<T> a(*reinterpret_cast<T*>(p));
      changed = op(a);
      // Marked while pinned: once unpinned the page may be evicted and
      // fetched again, and the fetch reads the buffer the dirty bit names.
      if (changed) {
        MarkDirty(v);
        NoteDirty(w);
        if (filtered()) SetUnsetBit(v, a.load(kRelaxed) == initial());
      }
      return changed;
    }
    if (changed) MarkDirty(v);
    return changed;
  }
};

}  // namespace dmg::compute

#endif  // DMG_COMPUTE_NODE_STATE_ARRAY_H_

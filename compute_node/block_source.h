// Where scans get their blocks from: the I/O half of the cache policy.
//
// Every block arrives through a worker's transport endpoint (or the page
// cache, which uses one), is delivered in directory order within a unit,
// and stays valid only during its callback. Two implementations:
//  - GraphAwareBlockSource: batched READs of whole units into per-worker
//    buffers, a prefetch window of batches in flight on streaming scans,
//    the hot-block cache for blocks it holds, and, for push scans with the
//    block headers cached, READs of just the frontier's edge ranges when a
//    frontier needs little of a block ("adaptive fetch size").
//  - PageLruBlockSource: the baseline; every byte through the shared LRU
//    page cache, page by page, one block at a time, no prefetch.
#ifndef DMG_COMPUTE_NODE_BLOCK_SOURCE_H_
#define DMG_COMPUTE_NODE_BLOCK_SOURCE_H_

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "compute_node/frontier.h"
#include "compute_node/header_cache.h"
#include "compute_node/hot_block_cache.h"
#include "compute_node/page_cache.h"
#include "compute_node/remote_graph.h"
#include "compute_node/unit_scheduler.h"
#include "compute_node/worker_pool.h"
#include "store/block_format.h"

namespace dmg::compute {

// Parses bytes said to be directory entry `entry`'s block and checks them
// against the directory (they came over the wire: never trusted): header,
// length, offsets, and every target below n, the vertices the directory
// tiles (RemoteGraph::Open checks that it tiles the graph's). A block that
// passes can be indexed by its targets. A compressed block is decoded into
// a buffer of the calling thread's, valid until its next call: use one view
// at a time.
absl::StatusOr<store::BlockView> ParseBlock(
    std::span<const store::DirectoryEntry> directory, uint32_t entry,
    const std::byte* bytes, uint32_t length);

// Checks the header and offsets of entry `entry`'s block (a headers-only
// read: BlockHeaderLength bytes) against the directory and returns its
// vertex_count + 1 offsets: they start at 0, never decrease, and end at
// the block's edge count, which its length bounds. Edge ranges cut from
// them lie inside the block.
absl::StatusOr<const uint32_t*> ParseBlockHeader(
    std::span<const store::DirectoryEntry> directory, uint32_t entry,
    const std::byte* bytes);

// Bytes of a block's header and offsets: what a headers-only read moves.
uint32_t BlockHeaderLength(const store::DirectoryEntry& e);

class BlockSource {
 public:
  // entry's bytes: the whole block, or its header and offsets only.
  using PerBlock = std::function<absl::Status(
      uint32_t entry, const std::byte* bytes, uint32_t length)>;
  // One frontier vertex's piece in one block (weights empty if unweighted).
  using PerPiece =
      std::function<void(store::VertexId v, std::span<const VertexId> targets,
                         std::span<const store::Weight> weights)>;

  explicit BlockSource(const RemoteGraph& graph) : graph_(graph) {}
  virtual ~BlockSource() = default;

  // Reads `unit`'s blocks of direction d, whole or (headers_only) only
  // their header and offsets, calling per_block for each, in order.
  virtual absl::Status Read(int worker, Direction d, const Unit& unit,
                            bool headers_only, const PerBlock& per_block) = 0;

  // Streams whole blocks of the units the cursor hands out: on_unit(u)
  // before unit u's blocks, then per_block for each of them, in order.
  // The default reads one unit at a time.
  virtual absl::Status Stream(int worker, Direction d,
                              std::span<const Unit> units,
                              UnitScheduler::Cursor& cursor,
                              const std::function<void(size_t)>& on_unit,
                              const PerBlock& per_block);

  // Push scans: the pieces of `frontier`'s vertices in `unit`'s blocks,
  // in order. `headers` (may be null) are direction d's cached offsets.
  // The default reads whole blocks and filters.
  virtual absl::Status ReadFrontier(int worker, Direction d, const Unit& unit,
                                    const Frontier& frontier,
                                    const HeaderCache* headers,
                                    const PerPiece& per_piece);

  // One vertex's edges [from, to) of its piece in block `entry`, counted
  // from the piece's first edge.
  struct EdgeRange {
    uint32_t entry;
    VertexId v;
    uint32_t from, to;
  };
  using PerRange =
      std::function<void(size_t index, std::span<const VertexId> targets,
                         std::span<const store::Weight> weights)>;
  // Reads `ranges` (entries ascending, ranges of one entry ascending) and
  // calls per_range(k, ...) for each, in order; every target is checked to
  // be a vertex (once per READ, or by ParseBlock for a whole block; a
  // cached block was checked when admitted). `headers` are direction d's
  // cached offsets. The default reads the blocks whole; the graph-aware
  // source READs just the ranges, one READ for ranges close together in a
  // block.
  virtual absl::Status ReadRanges(int worker, Direction d,
                                  std::span<const EdgeRange> ranges,
                                  const HeaderCache& headers,
                                  const PerRange& per_range);

  // Consecutive edges [begin, end) of block `entry`, counted from the
  // block's first edge, READ as one piece: a bottom-up step's prefixes of
  // neighbouring candidates with the gaps between them (one READ and one
  // delivery for several vertices, where a range is one vertex's).
  struct EdgeSpan {
    uint32_t entry;
    uint32_t begin, end;
  };
  // Called once per batch of spans [first, end) whose targets were
  // checked: targets[k - first] points at span k's first target and
  // weights[k - first] at its first weight (null when unweighted).
  using PerSpans = std::function<void(
      size_t first, size_t end, std::span<const VertexId* const> targets,
      std::span<const store::Weight* const> weights)>;
  // Reads `spans` (entries ascending), each of at most MaxSpanEdges()
  // edges, in batches and in order. The default reads the blocks whole.
  virtual absl::Status ReadSpans(int worker, Direction d,
                                 std::span<const EdgeSpan> spans,
                                 const HeaderCache& headers,
                                 const PerSpans& per_batch);
  virtual uint32_t MaxSpanEdges() const { return ~uint32_t{0}; }

  // True if ReadRanges reads just the ranges (else whole blocks).
  virtual bool ReadsRanges() const { return false; }

  // The hot-block cache of direction d (nullptr: none); sources that do
  // not use one ignore it.
  virtual void SetHotBlocks(Direction, HotBlockCache*) {}
  // Whether the next push scans of direction d read every block they touch
  // whole and keep it (admitted at once) when the hot-block cache holds the
  // whole direction: set for updates that are not first-wins (Min, Add),
  // whose vertices come back to the frontier, so that a block fetched for
  // a few of them serves every later step (road-NY SSSP pushed 670 steps
  // of edge ranges, reading each vertex's adjacency again every time it
  // came back). BFS's Claim visits each vertex once: ranges stay cheaper.
  virtual void SetFrontierKeepsBlocks(Direction, bool) {}
  virtual bool FrontierKeepsBlocks(Direction) const { return false; }
  // Most READ batches one worker's endpoint had in flight at once (as the
  // transport counts them: Endpoint::TakeMaxInFlight), since the last call.
  virtual uint64_t TakeMaxOutstanding() { return 1; }

 protected:
  std::span<const store::DirectoryEntry> directory(Direction d) const {
    return graph_.directory(d);
  }
  const RemoteGraph& graph_;
};

class GraphAwareBlockSource : public BlockSource {
 public:
  GraphAwareBlockSource(const RemoteGraph& graph, WorkerPool& pool,
                        uint64_t batch_bytes, int prefetch_window);

  absl::Status Read(int worker, Direction d, const Unit& unit,
                    bool headers_only, const PerBlock& per_block) override;
  absl::Status Stream(int worker, Direction d, std::span<const Unit> units,
                      UnitScheduler::Cursor& cursor,
                      const std::function<void(size_t)>& on_unit,
                      const PerBlock& per_block) override;
  absl::Status ReadFrontier(int worker, Direction d, const Unit& unit,
                            const Frontier& frontier,
                            const HeaderCache* headers,
                            const PerPiece& per_piece) override;
  absl::Status ReadRanges(int worker, Direction d,
                          std::span<const EdgeRange> ranges,
                          const HeaderCache& headers,
                          const PerRange& per_range) override;
  absl::Status ReadSpans(int worker, Direction d,
                         std::span<const EdgeSpan> spans,
                         const HeaderCache& headers,
                         const PerSpans& per_batch) override;
  // A span's targets and weights take at most a quarter of a batch.
  uint32_t MaxSpanEdges() const override {
    return static_cast<uint32_t>(batch_bytes_ / 32);
  }
  bool ReadsRanges() const override { return true; }
  void SetFrontierKeepsBlocks(Direction d, bool keep) override {
    keep_[static_cast<int>(d)] = keep;
  }
  bool FrontierKeepsBlocks(Direction d) const override {
    HotBlockCache* cache = hot(d);
    return keep_[static_cast<int>(d)] && cache != nullptr && cache->holds_all();
  }
  void SetHotBlocks(Direction d, HotBlockCache* cache) override {
    hot_[static_cast<int>(d)] = cache;
  }
  uint64_t TakeMaxOutstanding() override {
    return max_outstanding_.exchange(0);
  }

 private:
  HotBlockCache* hot(Direction d) const { return hot_[static_cast<int>(d)]; }
  // Worker's buffer `slot` (allocated on first use; the planner reserved
  // it): slot 0 for synchronous reads, 1..window for prefetch.
  std::byte* buffer(int worker, int slot);
  // Every block of `unit` is in the hot-block cache.
  bool AllCached(Direction d, const Unit& unit) const;
  // Delivers a block read whole: offered to the hot-block cache after.
  absl::Status DeliverFetched(Direction d, uint32_t entry,
                              const std::byte* bytes,
                              const PerBlock& per_block);

  WorkerPool& pool_;
  const uint64_t batch_bytes_;
  const int window_;
  // Per worker, per slot; allocated on first use and not zeroed (a READ
  // fills what is used), so untouched pages of a slot cost nothing.
  std::vector<std::vector<std::unique_ptr<uint64_t[]>>> buffers_;
  HotBlockCache* hot_[2] = {nullptr, nullptr};
  bool keep_[2] = {false, false};  // SetFrontierKeepsBlocks
  std::atomic<uint64_t> max_outstanding_{0};
  // Per worker: offsets READ for push scans without cached headers. A run
  // is `count` consecutive offsets of block `entry` from vertex index
  // `first`, at offsets[at].
  // A vector whose push_back stays inline, for plans built an element at a
  // time in hot loops (std::vector's emplace_back, out of line, was 7% of a
  // road-NY BFS at 5%). Kept across calls: clear() keeps the storage.
  template <typename T>
  class PlanVector {
   public:
    [[gnu::always_inline]] void push_back(const T& x) {
      if (n_ == v_.size()) [[unlikely]] {
        v_.resize(std::max<size_t>(64, 2 * n_));
      }
      v_[n_++] = x;
    }
    void clear() { n_ = 0; }
    void truncate(size_t n) { n_ = std::min(n_, n); }
    size_t size() const { return n_; }
    bool empty() const { return n_ == 0; }
    T& operator[](size_t k) { return v_[k]; }
    const T& operator[](size_t k) const { return v_[k]; }
    const T* begin() const { return v_.data(); }
    const T* end() const { return v_.data() + n_; }

   private:
    std::vector<T> v_;
    size_t n_ = 0;
  };
  struct OffsetScratch {
    struct Run {
      uint32_t entry, first, count;
      uint64_t at;
    };
    std::vector<Run> runs;
    std::vector<uint32_t> offsets;   // u32 words, or u16 (narrow blocks)
    std::vector<int64_t> first_run;  // per entry of the unit; -1: whole
    // The members of the blocks read by ranges, in order, as planned (a
    // block's start at first_member, per entry of the unit).
    PlanVector<VertexId> planned;
    std::vector<uint32_t> first_member;
    std::vector<uint32_t> sparse;  // entries read by ranges, ascending
    std::vector<store::BlockHeader> headers;  // theirs, READ to be checked
    // A compressed segment, decoded.
    std::vector<VertexId> targets;
    std::vector<store::Weight> weights;
    // A FrontierReader's plan (block_source.cc says what each holds), kept
    // across calls so that a unit allocates nothing.
    struct PlannedRead {
      uint32_t node;
      uint32_t region;
      uint64_t offset;
      std::byte* into;
      uint32_t bytes;
    };
    struct Item {
      uint32_t entry;
      bool whole;
      bool fetched;
      const std::byte* bytes;
      VertexId v;
      uint64_t at;
      uint32_t edges;
    };
    struct Batch {
      size_t reads_end;
      size_t items_end;
    };
    PlanVector<PlannedRead> reads;
    PlanVector<Item> items;
    std::vector<Batch> batches;
    // The members of the block being planned, with their edge ranges.
    struct Member {
      VertexId v;
      uint32_t lo, hi;
    };
    PlanVector<Member> members;
  };
  std::vector<OffsetScratch> offset_scratch_;
  // Per direction, per entry: the block's header was READ and found to be
  // its directory entry's (push scans without cached headers check it
  // once a job, before their first range READ of the block). Like the
  // directory, O(blocks) and not in the bound.
  std::unique_ptr<std::atomic<uint8_t>[]> header_checked_[2];

  // The steps of one ReadFrontier, ReadRanges or ReadSpans call, and what
  // they share.
  class FrontierReader;
  class RangeReader;
  class SpanReader;
};

class PageLruBlockSource : public BlockSource {
 public:
  // Attaches every memory node's store region to `cache` as page sources.
  PageLruBlockSource(const RemoteGraph& graph, WorkerPool& pool,
                     PageCache& cache);
  ~PageLruBlockSource() override;

  absl::Status Read(int worker, Direction d, const Unit& unit,
                    bool headers_only, const PerBlock& per_block) override;

 private:
  PageCache& cache_;
  std::vector<std::unique_ptr<PageSource>> store_pages_;  // per memory node
  std::vector<std::vector<uint64_t>> buffers_;            // per worker
};

}  // namespace dmg::compute

#endif  // DMG_COMPUTE_NODE_BLOCK_SOURCE_H_

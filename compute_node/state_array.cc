#include "compute_node/state_array.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "compute_node/line_runs.h"
#include "glog/logging.h"

namespace dmg::compute {
namespace {
constexpr uint64_t kMaxOp = StateSlices::kMaxOp;  // bytes per WRITE/READ
// Pages per batch when commit copies pages unchanged in this superstep
// from the previous buffer (a 64 KiB bounce buffer per worker).
constexpr size_t kCopyBatch = 16;
// At most this many pages to copy go on the committing thread's endpoint
// with the rest of the commit (more are shared among the workers): its
// bounce buffer stays the size of a worker's, 64 KiB.
constexpr size_t kInlineCopyPages = kCopyBatch;
// Pages per chunk of bulk work (commit) handed out by the scheduler.
constexpr uint64_t kPagesPerChunk = kMaxOp / 4096;
}  // namespace

StateArrayBase::StateArrayBase(StateContext context, std::string name,
                               uint64_t n, size_t elem_size, CacheHint hint,
                               const void* initial)
    : ctx_(std::move(context)),
      name_(std::move(name)),
      n_(n),
      elem_(elem_size),
      bytes_(n * elem_size),
      pages_((bytes_ + kPageBytes - 1) / kPageBytes),
      hint_(hint),
      initial_(elem_size),
      slices_(name_, bytes_, elem_, ctx_.bounds, ctx_.node),
      dirty_((pages_ + 63) / 64, 0),
      prev_dirty_((pages_ + 63) / 64, 0),
      published_((pages_ + 63) / 64, 0),
      others_((pages_ + 63) / 64, 0),
      current_((pages_ + 63) / 64, 0),
      written_((pages_ + 63) / 64, 0),
      dirty_lines_(pages_, 0),
      step_lines_(pages_, 0),
      prev_lines_(pages_, 0),
      pending_(lines()),
      handles_(ctx_.pool->size()) {
  std::memcpy(initial_.data(), initial, elem_size);
  prewritten_.assign(pages_, 0);
}

StateArrayBase::~StateArrayBase() {
  ctx_.budget->Release(reserved_);
  if (cache_ != nullptr) {
    ReleasePins();
    cache_->Drop(this);
  }
  if (ctx_.healthy()) slices_.FreeOwn(*ctx_.transport);
}

void StateArrayBase::AttachStorage(PageCache* cache, uint64_t reserved) {
  materialized_ = true;
  cache_ = cache;
  reserved_ = reserved;
  if (cache_ != nullptr) {
    cache_->Attach(this, pages_);
  } else {
    local_ = AlignedBuffer(bytes_);
  }
  line_flags_.assign(pages_ * 64, 0);
  page_flags_.assign(pages_, 0);
}

absl::Status StateArrayBase::Materialize(PageCache* cache, uint64_t reserved,
                                         uint64_t claim_filter_bytes) {
  AttachStorage(cache, reserved);
  if (claim_filter_bytes > 0) InitClaims(claim_filter_bytes);
  // Both versions start as the initial state, set by the memory node as it
  // allocates them (a local copy takes it here).
  transport::RegionFill fill{static_cast<uint32_t>(elem_), 0};
  std::memcpy(&fill.pattern, initial_.data(), elem_);
  DMG_RETURN_IF_ERROR(slices_.AllocateOwn(*ctx_.transport, fill));
  // The local copy: doubling copies, not a call per element.
  if (cache_ == nullptr) transport::FillBytes(local_.data(), bytes_, fill);
  if (slices_.count() == 1) return absl::OkStatus();
  return ExchangeSlices();
}

absl::Status StateArrayBase::ExchangeSlices() {
  // Where every node's slice is, and whether it holds the array resident.
  const bool resident_here = cache_ == nullptr;
  absl::StatusOr<std::vector<std::string>> all =
      ctx_.exchange(slices_.Post(resident_here));
  if (!all.ok()) return all.status();
  return slices_.TakePosts(*all, resident_here);
}

void StateArrayBase::InitClaims(uint64_t bytes) {
  if (cache_ == nullptr || ctx_.bounds.size() > 2 ||
      elem_ > kMaxClaimedElement) {
    return;
  }
  // Every element starts as the initial value.
  uint64_t initial = 0;
  std::memcpy(&initial, initial_.data(), elem_);
  claims_.Init(
      n_, elem_, kPageBytes,
      std::max<uint64_t>(kMinLogEntries,
                         (std::max(bytes, ClaimBitBytes()) - ClaimBitBytes()) /
                             kLogBytesPerEntry),
      initial);
}

absl::Status StateArrayBase::RebuildClaimBits(int version) {
  // Which elements still hold the initial value, from the version's
  // buffer, a chunk at a time (transient, like a frontier).
  constexpr uint64_t kChunk = 16384;
  std::vector<std::byte> chunk(std::min(kChunk, n_) * elem_);
  for (uint64_t begin = 0; begin < n_; begin += kChunk) {
    const uint64_t end = std::min(n_, begin + kChunk);
    DMG_RETURN_IF_ERROR(ReadVersion(version, begin, end, chunk.data()));
    for (uint64_t i = begin; i < end; ++i) {
      claims_.SetUnset(i, std::memcmp(chunk.data() + (i - begin) * elem_,
                                      initial_.data(), elem_) == 0);
    }
  }
  return absl::OkStatus();
}

absl::Status StateArrayBase::Adopt(PageCache* cache, uint64_t reserved,
                                   const transport::RegionInfo (&regions)[2],
                                   int version, uint64_t claim_filter_bytes) {
  DMG_RETURN_IF_ERROR(slices_.AdoptOwn(regions));
  AttachStorage(cache, reserved);
  if (slices_.count() > 1) {
    // Both buffers of this node's slice take the version (as a fresh
    // array's hold its initial value), so the open superstep's buffer is
    // whole without knowing what the earlier attempt changed last; the
    // exchange after it is also the barrier that keeps the others from
    // writing into this slice before the copy is done.
    DMG_RETURN_IF_ERROR(CopyOwnSlice(version % 2, (version + 1) % 2));
    DMG_RETURN_IF_ERROR(ExchangeSlices());
    if (cache_ != nullptr) return absl::OkStatus();
    return ReadVersion(version, 0, n_, local_.data());
  }
  // Buffer (version + 1) % 2 holds an older version: as if every line had
  // changed in the last superstep, the next commit completes it.
  std::fill(prev_dirty_.begin(), prev_dirty_.end(), ~uint64_t{0});
  std::fill(prev_lines_.begin(), prev_lines_.end(), ~uint64_t{0});
  if (claim_filter_bytes > 0) {
    InitClaims(claim_filter_bytes);
    if (filtered()) DMG_RETURN_IF_ERROR(RebuildClaimBits(version));
  }
  if (cache_ != nullptr) return absl::OkStatus();  // pages come from version
  return ReadVersion(version, 0, n_, local_.data());
}

absl::Status StateArrayBase::CopyOwnSlice(int from, int to) {
  const StateSlices::Slice& own = slices_.own();
  return ctx_.scheduler->ForRanges(
      own.end - own.begin, kMaxOp,
      [&](int w, uint64_t first, uint64_t last) -> absl::Status {
        std::vector<std::byte> bounce(last - first);
        Queue(endpoint(w), /*write=*/false, from, own.begin + first,
              bounce.data(), last - first);
        DMG_RETURN_IF_ERROR(endpoint(w).Flush());
        Queue(endpoint(w), /*write=*/true, to, own.begin + first, bounce.data(),
              last - first);
        return endpoint(w).Flush();
      });
}

void StateArrayBase::QueueWrite(int w, int buffer, uint64_t first_page,
                                uint64_t last_page) {
  uint64_t begin = first_page * kPageBytes;
  uint64_t end = std::min(last_page * kPageBytes, bytes_);
  if (begin < end) {
    Queue(endpoint(w), /*write=*/true, buffer, begin, local_.data() + begin,
          end - begin);
  }
}

template <typename PageAt>
void StateArrayBase::QueueLines(int w, int buffer, uint64_t count,
                                PageAt page_at, Lines which) {
  transport::Endpoint& ep = endpoint(w);
  LineRuns runs(StateArrayBase::kGapLines, [&](uint64_t first, uint64_t last) {
    const uint64_t begin = first * kLineBytes;
    const uint64_t end = std::min(last * kLineBytes, bytes_);
    if (begin < end) {
      Queue(ep, /*write=*/true, buffer, begin, local_.data() + begin,
            end - begin);
    }
  });
  for (uint64_t k = 0; k < count; ++k) {
    const uint64_t p = page_at(k);
    uint64_t lines = LinesNeeded(p);
    if (which == Lines::kPrewrite) {
      // Held back: announced in this superstep and changed again. No run
      // bridges a gap here (it might hold one).
      const uint64_t held = dirty_lines_[p] & step_lines_[p];
      lines &= ~held;
      prewritten_[p] |= lines;
      runs.Add(p * 64, lines, /*bridge=*/held == 0);
      continue;
    }
    if (which == Lines::kRest) lines &= ~prewritten_[p];
    runs.Add(p * 64, lines);
  }
  runs.Finish();
}

void StateArrayBase::MarkPublished() {
  for (size_t word = 0; word < dirty_.size(); ++word) {
    published_[word] |= dirty_[word];
    dirty_[word] = 0;
  }
  for (size_t p = 0; p < dirty_lines_.size(); ++p) {
    step_lines_[p] |= dirty_lines_[p];
    dirty_lines_[p] = 0;
  }
}

std::byte* StateArrayBase::PinSlow(int worker, uint64_t at) {
  Handle& h = handles_[worker];
  if (h.base != nullptr) {
    cache_->Unpin(this, h.page, h.dirty);
    h = Handle();
  }
  // After a failed page-in the job ends with that error; a kernel that
  // goes on touching pages must not wait for each of them in turn (a
  // frozen memory node held road-NY CC's links for 108 timeouts).
  if (pin_failed_.load(std::memory_order_relaxed)) return nullptr;
  absl::StatusOr<std::byte*> page = cache_->Pin(worker, this, at / kPageBytes);
  if (!page.ok()) {
    pin_failed_.store(true, std::memory_order_relaxed);
    MutexLock lock(&error_mu_);
    if (error_.ok()) error_ = page.status();
    return nullptr;
  }
  h = {at / kPageBytes, *page, false};
  return *page + at % kPageBytes;
}

void StateArrayBase::ReleasePins() {
  if (cache_ == nullptr) return;
  for (Handle& h : handles_) {
    if (h.base != nullptr) cache_->Unpin(this, h.page, h.dirty);
    h = Handle();
  }
}

absl::Status StateArrayBase::error() {
  MutexLock lock(&error_mu_);
  return error_;
}

absl::Status StateArrayBase::FetchPages(int worker, uint64_t first,
                                        uint64_t count, std::byte* const* dst,
                                        uint8_t* dirtied) {
  // Written back during this superstep: the newest copy is in its buffer;
  // otherwise the previous version has it. One batch for all the pages.
  const int s = superstep() + 1;
  transport::Endpoint& ep = endpoint(worker);
  for (uint64_t k = 0; k < count; ++k) {
    uint64_t page = first + k;
    const int buffer = Bit(dirty_, page) || Bit(published_, page) ||
                               Bit(others_, page) || Bit(current_, page)
                           ? s % 2
                           : (s + 1) % 2;
    Queue(ep, /*write=*/false, buffer, page * kPageBytes, dst[k],
          PageLength(page));
  }
  if (absl::Status status = ep.Flush(); !status.ok() || !filtered()) {
    return status;
  }
  // Claims logged while these pages were away join their bytes.
  for (uint64_t k = 0; k < count; ++k) {
    if (claims_.Logged(first + k)) {
      dirtied[k] = claims_.Merge(first + k, dst[k],
                                 [&](uint64_t index) { MarkDirty(index); });
    }
  }
  return absl::OkStatus();
}

std::byte* StateArrayBase::PinIfCachedElement(int worker, uint64_t index) {
  const uint64_t at = index * elem_;
  const uint64_t page = at / kPageBytes;
  Handle& h = handles_[worker];
  if (h.page == page) return h.base + at % kPageBytes;
  std::byte* base = cache_->PinIfCached(worker, this, page);
  if (base == nullptr) return nullptr;
  // Kept pinned, as PinSlow keeps its page: claims come in runs.
  if (h.base != nullptr) cache_->Unpin(this, h.page, h.dirty);
  h = {page, base, false};
  return base + at % kPageBytes;
}

bool StateArrayBase::LogClaim(uint64_t index, const void* value) {
  return claims_.Log(index, value);
}

void StateArrayBase::QueueLogs(transport::Endpoint& ep, int buffer) {
  claims_.PlanCommit([&](uint64_t page) { return Bit(written_, page); },
                     [&](const ClaimLog::Write& w) {
                       Queue(ep, /*write=*/true, buffer, w.offset,
                             const_cast<std::byte*>(w.bytes), w.length);
                     });
}

void StateArrayBase::QueuePageLines(transport::Endpoint& ep, bool write,
                                    int buffer, uint64_t page, std::byte* data,
                                    uint64_t lines) {
  const uint64_t length = PageLength(page);
  LineRuns runs(StateArrayBase::kGapLines, [&](uint64_t first, uint64_t last) {
    const uint64_t from = first * kLineBytes;
    const uint64_t to = std::min(last * kLineBytes, length);
    if (from < to) {
      Queue(ep, write, buffer, page * kPageBytes + from, data + from,
            to - from);
    }
  });
  runs.Add(0, lines);
  runs.Finish();
}

absl::Status StateArrayBase::WriteBackPages(int worker,
                                            std::span<const DirtyPage> pages) {
  const int buffer = (superstep() + 1) % 2;
  transport::Endpoint& ep = endpoint(worker);
  for (const DirtyPage& p : pages) {
    // Just the lines the open superstep's buffer lacks: those changed in
    // this superstep (flags not yet folded, and folded ones) and, the
    // first time the page goes there in this superstep, those changed in
    // the previous one. The page is being written back (a victim: misses
    // on it wait; or a flush between operations), so its flags are still.
    // Whole pages cost 4 KiB for a few changed elements: road-NY BFS at 5%
    // wrote 83 MB of depth pages for a 1 MB array.
    const uint64_t page = p.page;
    uint64_t lines = PackLineFlags(line_flags_.data() + page * 64) |
                     std::atomic_ref<uint64_t>(dirty_lines_[page])
                         .load(std::memory_order_relaxed);
    const uint64_t mask = uint64_t{1} << (page & 63);
    const bool first = (std::atomic_ref<uint64_t>(written_[page >> 6])
                            .fetch_or(mask, std::memory_order_relaxed) &
                        mask) == 0;
    if (first && !Bit(published_, page) && !Bit(current_, page)) {
      lines |= prev_lines_[page];
    }
    // The previous superstep's logged claims: the frame holds them (it came
    // from that version), and the commit skips pages written here.
    if (first && filtered()) lines |= claims_.PrevLines(page);
    QueuePageLines(ep, /*write=*/true, buffer, page,
                   const_cast<std::byte*>(p.data), lines);
  }
  // In a commit the caller flushes (CommitPaged).
  return defer_writebacks_ ? absl::OkStatus() : ep.Flush();
}

absl::StatusOr<StateArrayBase::Prewritten> StateArrayBase::Prewrite() {
  if (absl::Status s = error(); !s.ok()) return s;
  FoldLineFlags();
  bool changed = false;
  for (uint64_t word : dirty_) changed = changed || word != 0;
  if (cache_ != nullptr || !slices_.all_resident())
    return Prewritten{changed, false};
  // The changed pages, and this node's pages whose buffer still lacks the
  // lines the previous superstep changed.
  std::vector<uint64_t> pages;
  for (uint64_t p = 0; p < pages_; ++p) {
    const bool own =
        p >= slices_.own_first_page() && p < slices_.own_end_page();
    const bool whole = Bit(published_, p) || Bit(current_, p);
    if (Bit(dirty_, p) || (own && !whole && prev_lines_[p] != 0)) {
      pages.push_back(p);
    }
  }
  if (pages.empty()) return Prewritten{false, true};
  const int buffer = (superstep() + 1) % 2;
  DMG_RETURN_IF_ERROR(ctx_.scheduler->ForRanges(
      pages.size(), kPagesPerChunk, [&](int w, uint64_t first, uint64_t last) {
        QueueLines(
            w, buffer, last - first,
            [&](uint64_t k) { return pages[first + k]; }, Lines::kPrewrite);
        return endpoint(w).Flush();
      }));
  Prewritten out;
  for (uint64_t p : pages) {
    // Its buffer holds the previous version's lines now: later writes
    // need only this superstep's.
    current_[p >> 6] |= uint64_t{1} << (p & 63);
    out.held = out.held || (dirty_lines_[p] & step_lines_[p]) != 0;
  }
  out.clean = !out.held;
  return out;
}

bool StateArrayBase::Clean() {
  FoldLineFlags();
  if (cache_ != nullptr || !slices_.all_resident()) return false;
  for (uint64_t word : dirty_) {
    if (word != 0) return false;
  }
  return true;
}

absl::Status StateArrayBase::Publish(std::vector<uint64_t>& pages) {
  if (absl::Status s = error(); !s.ok()) return s;
  FoldLineFlags();
  const size_t from = pages.size();
  for (uint64_t& word : dirty_) {
    for (uint64_t bits = word; bits != 0; bits &= bits - 1) {
      pages.push_back((&word - dirty_.data()) * 64 + std::countr_zero(bits));
    }
  }
  absl::Status status;
  std::span<const uint64_t> fresh(pages.data() + from, pages.size() - from);
  if (cache_ != nullptr) {
    ReleasePins();
    status = cache_->FlushDirty(this);
  } else {
    // What Prewrite did not write.
    const int buffer = (superstep() + 1) % 2;
    status = ctx_.scheduler->ForRanges(
        fresh.size(), kPagesPerChunk,
        [&](int w, uint64_t first, uint64_t last) {
          QueueLines(
              w, buffer, last - first,
              [&](uint64_t k) { return fresh[first + k]; }, Lines::kRest);
          return endpoint(w).Flush();
        });
    for (uint64_t p : fresh) prewritten_[p] = 0;
  }
  // Published pages stay whole in the open superstep's buffer: later
  // fetches and the commit go by published_ for them.
  MarkPublished();
  return status;
}

void StateArrayBase::FoldLineFlags() {
  if (line_flags_.empty() || !flags_set_.exchange(false)) return;
  for (uint64_t p = 0; p < pages_; ++p) {
    // Eight pages' bytes at a time, to skip the unflagged.
    if (p % 8 == 0 && p + 8 <= pages_) {
      uint64_t group;
      std::memcpy(&group, page_flags_.data() + p, sizeof(group));
      if (group == 0) {
        p += 7;
        continue;
      }
    }
    if (page_flags_[p] == 0) continue;
    page_flags_[p] = 0;
    uint8_t* flags = line_flags_.data() + p * 64;
    const uint64_t lines = PackLineFlags(flags);
    if (lines == 0) continue;
    dirty_lines_[p] |= lines;
    dirty_[p >> 6] |= uint64_t{1} << (p & 63);
    std::memset(flags, 0, 64);
  }
}

std::span<const uint64_t> StateArrayBase::DirtyLineWords() {
  FoldLineFlags();
  return dirty_lines_;
}

void StateArrayBase::RefreshLines(int w, uint64_t first, uint64_t count) {
  const uint64_t begin = first * kLineBytes;
  const uint64_t end = std::min((first + count) * kLineBytes, bytes_);
  if (begin >= end) return;
  const uint64_t first_page = begin / kPageBytes;
  const uint64_t last_page = (end - 1) / kPageBytes + 1;
  for (uint64_t p = first_page; p < last_page; ++p) {
    std::atomic_ref<uint64_t>(others_[p >> 6])
        .fetch_or(uint64_t{1} << (p & 63), std::memory_order_relaxed);
  }
  if (cache_ != nullptr) {
    cache_->Invalidate(this, first_page, last_page - first_page);
    return;
  }
  const int buffer = (superstep() + 1) % 2;
  Queue(endpoint(w), /*write=*/false, buffer, begin, local_.data() + begin,
        end - begin);
}

void StateArrayBase::MarkPending(uint64_t first, uint64_t count) {
  const uint64_t end = std::min(first + count, lines());
  pending_.Mark(first, count);
  for (uint64_t line = first; line < end; ++line) {
    others_[line >> 12] |= uint64_t{1} << ((line >> 6) & 63);
  }
  if (first < end) any_pending_ = true;
}

uint64_t StateArrayBase::pending_lines() const {
  return any_pending_ ? pending_.Count() : 0;
}

void StateArrayBase::QueuePendingRuns(transport::Endpoint& ep, uint64_t page,
                                      uint64_t now, uint64_t old) {
  old &= ~now;  // a line changed again is READ from the open buffer
  // Both from the open buffer between a barrier-free collective and the
  // end of the superstep (ReadOldFromOpen).
  if (PendingBuffer(false) == PendingBuffer(true)) {
    now |= old;
    old = 0;
  }
  const std::pair<int, uint64_t> sets[2] = {{PendingBuffer(true), now},
                                            {PendingBuffer(false), old}};
  for (const auto& [buffer, lines] : sets) {
    // Runs of consecutive pending lines: one READ each.
    for (uint64_t bits = lines; bits != 0;) {
      const int at = std::countr_zero(bits);
      const int run = std::countr_one(bits >> at);
      const uint64_t begin = (page * 64 + at) * kLineBytes;
      const uint64_t end = std::min(begin + uint64_t(run) * kLineBytes, bytes_);
      Queue(ep, /*write=*/false, buffer, begin, local_.data() + begin,
            end - begin);
      bits &= run == 64 ? 0 : ~(((uint64_t{1} << run) - 1) << at);
    }
  }
}

absl::Status StateArrayBase::FetchPending() {
  if (!any_pending_) return absl::OkStatus();
  absl::Status status = ctx_.scheduler->ForRanges(
      pages_, kPagesPerChunk, [&](int w, uint64_t first, uint64_t last) {
        transport::Endpoint& ep = endpoint(w);
        for (uint64_t p = first; p < last; ++p) {
          const uint64_t now = pending_.now(p), old = pending_.old(p);
          QueuePendingRuns(ep, p, now, old);
          if ((now | old) != 0) NoteTaken(p);
          pending_.Clear(p, now, old);
        }
        return ep.Flush();
      });
  any_pending_ = false;
  return status;
}

uint64_t StateArrayBase::ReferencedLines(uint64_t page) const {
  if (referenced_ == nullptr) return ~uint64_t{0};
  const std::vector<uint64_t>& bits = *referenced_;
  // Elements are 1, 2, 4 or 8 bytes: a line holds 64, 32, 16 or 8
  // vertices, aligned within one word of the bitmap.
  const uint64_t per_line = kLineBytes / elem_;
  const uint64_t mask =
      per_line >= 64 ? ~uint64_t{0} : (uint64_t{1} << per_line) - 1;
  uint64_t lines = 0;
  for (uint64_t j = 0; j < 64; ++j) {
    const uint64_t first = (page * 64 + j) * per_line;
    if (first >= n_ || (first >> 6) >= bits.size()) break;
    if ((bits[first >> 6] >> (first & 63)) & mask) lines |= uint64_t{1} << j;
  }
  return lines;
}

bool StateArrayBase::ReadMirrors(int worker, std::vector<bool>& skip) {
  const MirrorSource& m = *mirror_;
  // Elements a single atomic store writes (StoreElement).
  if (elem_ > 8 || (elem_ & (elem_ - 1)) != 0) return true;
  const int nodes = slices_.count();
  uint64_t total = 0;
  std::vector<bool> use(nodes, false);
  for (int k = 0; k < nodes && k < static_cast<int>(m.regions.size()); ++k) {
    const transport::RegionInfo& r = m.regions[k];
    const MirrorLayout::Part& part = m.layout->from(k);
    if (r.length == 0 || part.runs.empty()) continue;
    const auto& last = part.runs.back();
    if ((last.first + last.second) * elem_ > r.length) continue;
    use[k] = true;
    total += part.vertices.size();
  }
  if (total == 0) return true;
  mirror_scratch_.resize(total * elem_);
  transport::Endpoint& ep = endpoint(worker);
  std::byte* at = mirror_scratch_.data();
  for (int k = 0; k < nodes; ++k) {
    if (!use[k]) continue;
    const transport::RegionInfo& r = m.regions[k];
    for (const auto& [first, count] : m.layout->from(k).runs) {
      for (uint64_t done = 0; done < count * elem_;) {
        const uint64_t n =
            std::min<uint64_t>(count * elem_ - done, StateSlices::kMaxOp);
        ep.Read(r.node, r.id, first * elem_ + done, at,
                static_cast<uint32_t>(n));
        at += n;
        done += n;
      }
    }
  }
  if (absl::Status s = ep.Flush(); !s.ok()) {
    MutexLock error_lock(&error_mu_);
    if (error_.ok()) error_ = s;
    read_failed_.store(true, std::memory_order_relaxed);
    return false;
  }
  // Other workers may be reading these elements (those on lines that are
  // not pending hold the same value already): element-wide stores.
  const std::byte* from = mirror_scratch_.data();
  skip.assign(pages_, false);
  for (uint64_t& word : mirror_pages_) {
    std::atomic_ref<uint64_t>(word).store(0, std::memory_order_relaxed);
  }
  for (int k = 0; k < nodes; ++k) {
    if (!use[k]) continue;
    for (const store::VertexId v : m.layout->from(k).vertices) {
      StoreElement(local_.data() + uint64_t{v} * elem_, from);
      from += elem_;
    }
    const StateSlices::Slice& slice = slices_[k];
    for (uint64_t p = slice.begin / kPageBytes;
         p < std::min(pages_, (slice.end + kPageBytes - 1) / kPageBytes); ++p) {
      skip[p] = true;
      std::atomic_ref<uint64_t>(mirror_pages_[p >> 6])
          .fetch_or(uint64_t{1} << (p & 63), std::memory_order_relaxed);
    }
  }
  mirror_values_ += total;
  return true;
}

bool StateArrayBase::ReadPendingBatch(int worker, bool filtered, bool* left) {
  transport::Endpoint& ep = endpoint(worker);
  std::vector<TakenLines> taken;
  mirror_skip_.clear();
  if (filtered && referenced_ != nullptr) {
    filtered_batch_.store(true, std::memory_order_relaxed);
    if (mirror_ != nullptr && !keep_checks_ && cache_ == nullptr &&
        !ReadMirrors(worker, mirror_skip_)) {
      return false;
    }
  }
  for (uint64_t p = 0; p < pages_; ++p) {
    uint64_t now = pending_.now(p);
    uint64_t old = pending_.old(p);
    if ((now | old) == 0) continue;
    if (!mirror_skip_.empty() && mirror_skip_[p]) {
      *left = true;  // READ from the owner's packed copy
      continue;
    }
    const uint64_t wanted = filtered ? ReferencedLines(p) : ~uint64_t{0};
    *left = *left || ((now | old) & ~wanted) != 0;
    now &= wanted;
    old &= wanted;
    if ((now | old) == 0) continue;
    QueuePendingRuns(ep, p, now, old);
    taken.push_back({p, now, old});
  }
  return FlushTaken(ep, taken);
}

bool StateArrayBase::FlushTaken(transport::Endpoint& ep,
                                const std::vector<TakenLines>& taken) {
  if (absl::Status s = ep.Flush(); !s.ok()) {
    MutexLock error_lock(&error_mu_);
    if (error_.ok()) error_ = s;
    read_failed_.store(true, std::memory_order_relaxed);
    return false;  // stays pending; the error ends the job
  }
  for (const TakenLines& t : taken) {
    NoteTaken(t.page);
    pending_.Clear(t.page, t.now, t.old);
  }
  return true;
}

void StateArrayBase::FetchAllPending(int worker, uint64_t line) {
  MutexLock lock(&fetch_mu_);
  if (read_failed_.load(std::memory_order_relaxed)) return;
  if (bulk_taken_.load(std::memory_order_relaxed)) {
    // The batch was READ while this worker waited, perhaps without its
    // line.
    if (LineIsPending(line)) FetchLine(worker, line);
    return;
  }
  bool left = false;  // pending lines outside referenced_
  if (!ReadPendingBatch(worker, /*filtered=*/true, &left)) return;
  if (left) {
    // The rest is READ a line at a touch, or, under the operation's
    // promise, never touched; the line this worker touched, now (unless
    // its values came from a packed copy).
    const bool mirrored =
        !mirror_skip_.empty() && mirror_skip_[line * kLineBytes / kPageBytes];
    if (!mirrored && LineIsPending(line)) FetchLine(worker, line);
    bulk_taken_.store(true, std::memory_order_release);
    if (referenced_ != nullptr && !keep_checks_) {
      checks_suspended_ = true;
      any_pending_.store(false, std::memory_order_release);
    }
    return;
  }
  // Nothing is marked pending during an operation: the copy is current,
  // and the accessors' check can stop.
  any_pending_.store(false, std::memory_order_release);
}

void StateArrayBase::FetchPendingOf(int worker,
                                    std::span<const store::VertexId> vertices,
                                    store::VertexId first,
                                    store::VertexId end) {
  if (!resident() || !any_pending_.load(std::memory_order_acquire) ||
      read_failed_.load(std::memory_order_relaxed)) {
    return;
  }
  std::vector<uint64_t> lines;
  const uint64_t last = std::min<uint64_t>(end, n_);
  for (uint64_t line = first * elem_ / kLineBytes;
       first < last && line <= (last - 1) * elem_ / kLineBytes; ++line) {
    if (LineIsPending(line)) lines.push_back(line);
  }
  for (const store::VertexId v : vertices) {
    const uint64_t line = uint64_t{v} * elem_ / kLineBytes;
    if (v < n_ && LineIsPending(line)) lines.push_back(line);
  }
  if (lines.empty()) return;
  std::sort(lines.begin(), lines.end());
  std::vector<TakenLines> taken;
  transport::Endpoint& ep = endpoint(worker);
  for (size_t j = 0; j < lines.size();) {
    const uint64_t page = lines[j] / 64;
    uint64_t bits = 0;
    for (; j < lines.size() && lines[j] / 64 == page; ++j) {
      bits |= uint64_t{1} << (lines[j] % 64);
    }
    const uint64_t now = pending_.now(page) & bits;
    const uint64_t old = pending_.old(page) & bits;
    if ((now | old) == 0) continue;  // READ by another worker meanwhile
    QueuePendingRuns(ep, page, now, old);
    taken.push_back({page, now, old});
  }
  FlushTaken(ep, taken);
}

void StateArrayBase::FetchRestPending(int worker, uint64_t line) {
  MutexLock lock(&fetch_mu_);
  if (read_failed_.load(std::memory_order_relaxed)) return;
  if (!any_pending_.load(std::memory_order_relaxed)) {
    // READ while this worker waited.
    if (LineIsPending(line)) FetchLine(worker, line);
    return;
  }
  bool left = false;
  if (!ReadPendingBatch(worker, /*filtered=*/false, &left)) return;
  any_pending_.store(false, std::memory_order_release);
}

void StateArrayBase::FetchLine(int worker, uint64_t line) {
  // Another worker may have READ the line since this one saw it pending
  // (pending_lines.h: why the bits it sees now choose the buffer).
  const PendingLines::Source from = pending_.Choose(line);
  if (from == PendingLines::Source::kNone) return;
  const bool open = from == PendingLines::Source::kOpen;
  const int buffer = PendingBuffer(open);
  const uint64_t begin = line * kLineBytes;
  const uint64_t end = std::min(begin + kLineBytes, bytes_);
  transport::Endpoint& ep = endpoint(worker);
  Queue(ep, /*write=*/false, buffer, begin, local_.data() + begin, end - begin);
  if (absl::Status s = ep.Flush(); !s.ok()) {
    MutexLock lock(&error_mu_);
    if (error_.ok()) error_ = s;
    read_failed_.store(true, std::memory_order_relaxed);
    return;  // stays pending; the error ends the job
  }
  const uint64_t mask = uint64_t{1} << (line & 63);
  NoteTaken(line >> 6);
  pending_.Clear(line >> 6, mask, mask);
}

void StateArrayBase::Refresh(int w, uint64_t first, uint64_t count) {
  for (uint64_t p = first; p < first + count; ++p) {
    std::atomic_ref<uint64_t>(others_[p >> 6])
        .fetch_or(uint64_t{1} << (p & 63), std::memory_order_relaxed);
  }
  if (cache_ != nullptr) {
    cache_->Invalidate(this, first, count);
    return;
  }
  const int buffer = (superstep() + 1) % 2;
  const uint64_t begin = first * kPageBytes;
  const uint64_t end = std::min((first + count) * kPageBytes, bytes_);
  if (begin < end) {
    Queue(endpoint(w), /*write=*/false, buffer, begin, local_.data() + begin,
          end - begin);
  }
}

absl::Status StateArrayBase::Commit(int superstep, uint64_t page_begin,
                                    uint64_t page_end, bool leave_queued) {
  absl::Status status =
      WriteVersion(superstep, page_begin, page_end, leave_queued);
  std::fill(prewritten_.begin(), prewritten_.end(), 0);
  // What changed in this superstep is what the next one's buffer lacks.
  prev_dirty_.swap(published_);
  prev_lines_.swap(step_lines_);
  if (filtered()) claims_.Rotate();
  // Lines still pending are READ from the finished version's buffer now.
  if (any_pending_) pending_.EndSuperstep();
  std::fill(dirty_.begin(), dirty_.end(), 0);
  std::fill(dirty_lines_.begin(), dirty_lines_.end(), 0);
  std::fill(step_lines_.begin(), step_lines_.end(), 0);
  std::fill(published_.begin(), published_.end(), 0);
  std::fill(others_.begin(), others_.end(), 0);
  std::fill(current_.begin(), current_.end(), 0);
  std::fill(written_.begin(), written_.end(), 0);
  return status;
}

absl::Status StateArrayBase::CommitPaged(int buffer, uint64_t page_begin,
                                         uint64_t page_end, bool leave_queued) {
  // Between supersteps the workers are idle: frames stay as they are until
  // the flush below, so the dirty ones are only queued.
  ReleasePins();
  transport::Endpoint& ep = endpoint(0);
  defer_writebacks_ = true;
  absl::Status status = cache_->FlushDirty(this);
  defer_writebacks_ = false;
  // Pages changed last superstep but not in this one: their lines changed
  // then are copied over from the previous buffer (through the cache when
  // it holds them).
  copies_.clear();
  for (uint64_t word = page_begin / 64; word * 64 < page_end; ++word) {
    for (uint64_t bits = prev_dirty_[word] & ~dirty_[word] & ~published_[word] &
                         ~current_[word];
         bits != 0; bits &= bits - 1) {
      const uint64_t p = word * 64 + std::countr_zero(bits);
      if (p >= page_begin && p < page_end) copies_.push_back(p);
    }
  }
  if (status.ok() && copies_.size() > kInlineCopyPages) {
    status = ep.Flush();  // many: the workers share them
    if (status.ok()) status = CopyPagesInParallel(buffer);
    copies_.clear();
  }
  // A few (a BFS level's): the uncached ones' lines are READ with the
  // dirty pages' WRITEs, then everything else goes in one batch.
  const int from = (buffer + 1) % 2;
  bounce_.resize(copies_.size() * kPageBytes);
  copy_sources_.clear();
  bool reads = false;
  for (size_t k = 0; k < copies_.size(); ++k) {
    const std::byte* cached = cache_->Peek(this, copies_[k]);
    if (cached == nullptr) {
      std::byte* slot = bounce_.data() + k * kPageBytes;
      QueuePageLines(ep, /*write=*/false, from, copies_[k], slot,
                     prev_lines_[copies_[k]]);
      cached = slot;
      reads = true;
    }
    copy_sources_.push_back(cached);
  }
  if (status.ok() && reads) status = ep.Flush();
  for (size_t k = 0; status.ok() && k < copies_.size(); ++k) {
    QueuePageLines(ep, /*write=*/true, buffer, copies_[k],
                   const_cast<std::byte*>(copy_sources_[k]),
                   prev_lines_[copies_[k]]);
  }
  if (status.ok() && filtered()) QueueLogs(ep, buffer);
  if (status.ok() && !leave_queued) status = ep.Flush();
  if (!status.ok()) return status;
  if (filtered()) {
    // Cached frames take the logged values (frames are unpinned; one queued
    // for a WRITE of its lines gets the value its log WRITE sends too).
    claims_.Committed([&](uint64_t page) {
      return const_cast<std::byte*>(cache_->Peek(this, page));
    });
  }
  return absl::OkStatus();
}

absl::Status StateArrayBase::CopyPagesInParallel(int buffer) {
  const int from = (buffer + 1) % 2;
  std::vector<std::vector<std::byte>> bounces(ctx_.scheduler->workers());
  return ctx_.scheduler->ForRanges(
      copies_.size(), kCopyBatch, [&](int w, uint64_t first, uint64_t last) {
        transport::Endpoint& ep = endpoint(w);
        std::vector<std::byte>& bounce = bounces[w];
        bounce.resize(kCopyBatch * kPageBytes);
        // One round trip READs the uncached ones into the bounce buffer, a
        // second WRITEs them all; only the lines changed last superstep
        // (the rest of the page is the same in both buffers).
        std::vector<DirtyPage> batch;
        for (uint64_t k = first; k < last; ++k) {
          const uint64_t p = copies_[k];
          const std::byte* cached = cache_->Peek(this, p);
          if (cached == nullptr) {
            std::byte* slot = bounce.data() + batch.size() * kPageBytes;
            QueuePageLines(ep, /*write=*/false, from, p, slot, prev_lines_[p]);
            cached = slot;
          }
          batch.push_back({p, cached});
        }
        DMG_RETURN_IF_ERROR(ep.Flush());  // the READs
        for (const DirtyPage& p : batch) {
          QueuePageLines(ep, /*write=*/true, buffer, p.page,
                         const_cast<std::byte*>(p.data), prev_lines_[p.page]);
        }
        return ep.Flush();
      });
}

absl::Status StateArrayBase::MakeCurrent(uint64_t page_begin,
                                         uint64_t page_end) {
  return WriteVersion(superstep() + 1, page_begin, page_end);
}

absl::Status StateArrayBase::WriteVersion(int superstep, uint64_t page_begin,
                                          uint64_t page_end,
                                          bool leave_queued) {
  const int buffer = superstep % 2;
  if (absl::Status s = error(); !s.ok()) return s;
  FoldLineFlags();
  UnitScheduler& scheduler = *ctx_.scheduler;
  page_end = std::min(page_end, pages_);
  page_begin = std::min(page_begin, page_end);
  const uint64_t owned = page_end - page_begin;
  absl::Status status;
  if (cache_ == nullptr) {
    status = scheduler.ForRanges(
        owned, kPagesPerChunk, [&](int w, uint64_t first, uint64_t last) {
          // Lines changed and not yet published, or changed last
          // superstep in a page not yet written in this one (this buffer
          // still holds the version before).
          QueueLines(w, buffer, last - first,
                     [&](uint64_t k) { return page_begin + first + k; });
          return endpoint(w).Flush();
        });
  } else {
    status = CommitPaged(buffer, page_begin, page_end, leave_queued);
  }
  // The buffer now holds every page of [page_begin, page_end): the changed
  // ones are published, the copied ones current.
  for (size_t word = 0; word < dirty_.size(); ++word) {
    current_[word] |= prev_dirty_[word] & ~published_[word] & ~dirty_[word];
  }
  MarkPublished();
  return status;
}

void StateArrayBase::MarkChangedRemotely(uint64_t first, uint64_t count,
                                         bool mine) {
  std::vector<uint64_t>& bits = mine ? published_ : others_;
  for (uint64_t p = first; p < first + count; ++p) {
    bits[p >> 6] |= uint64_t{1} << (p & 63);
    // Which of its lines changed is not known here: the next superstep's
    // buffer lacks the whole page.
    if (mine) step_lines_[p] = ~uint64_t{0};
  }
}

void StateArrayBase::MarkOwnLinesChangedRemotely(uint64_t first,
                                                 uint64_t count) {
  const uint64_t end = std::min(first + count, lines());
  for (uint64_t line = first; line < end; ++line) {
    const uint64_t p = line / 64;
    published_[p >> 6] |= uint64_t{1} << (p & 63);
    step_lines_[p] |= uint64_t{1} << (line & 63);
  }
}

absl::Status StateArrayBase::ReadVersion(int superstep, uint64_t begin,
                                         uint64_t end, void* dst) {
  const int buffer = superstep % 2;
  const uint64_t b0 = begin * elem_, b1 = end * elem_;
  return ctx_.scheduler->ForRanges(
      b1 - b0, kMaxOp, [&](int w, uint64_t first, uint64_t last) {
        Queue(endpoint(w), /*write=*/false, buffer, b0 + first,
              static_cast<std::byte*>(dst) + first, last - first);
        return endpoint(w).Flush();
      });
}

}  // namespace dmg::compute

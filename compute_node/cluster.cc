#include "compute_node/cluster.h"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace dmg::compute {
namespace {

// The job record's layout (all fields little-endian u64 unless noted).
constexpr uint64_t kMagic = 0x31424f4a474d44;  // "DMGJOB1"
constexpr uint64_t kMagicAt = 0, kNodesAt = 8, kVerticesAt = 16,
                   kCounterAt = 24, kLeftAt = 32, kJoinedAt = 40,
                   kBoundsAt = 64;
constexpr uint64_t kMaxPiece = 4 << 20;  // bytes per READ/WRITE
// Slot.failed: the node failed (message: its error), or it gave up waiting
// for others (message: which, passed on verbatim).
constexpr uint64_t kFailed = 1, kVerdict = 2;

// A node's slot: where its post of the last round it reached is, then
// (SectionAt) one (offset, length) pair per node for the part it addressed
// to that node, in the same board.
struct Slot {
  uint64_t round;
  uint32_t board_node;
  uint32_t board_region;
  uint64_t length;  // of the common part, at offset 0 of the board
  uint64_t failed;  // nonzero: the node failed; message says why
  char message[224];
};
static_assert(sizeof(Slot) == 256);
// The part of a slot before its message: what a round's post needs.
constexpr uint32_t kSlotHead = offsetof(Slot, message);
static_assert(kSlotHead == 32);
struct Section {
  uint64_t offset;
  uint64_t length;
};

uint64_t SlotsAt(int nodes) {
  return (kBoundsAt + 8 * (nodes + 1) + 63) / 64 * 64;
}
uint64_t SlotBytes(int nodes) { return (256 + 16 * nodes + 63) / 64 * 64; }
// Two slots per node, by round parity: a node that has moved on to the
// next round must not overwrite what a slower one still reads.
uint64_t CursorsAt(int nodes) {
  return SlotsAt(nodes) + SlotBytes(nodes) * 2 * nodes;
}
// Then two work cursors per node (by round parity of stealing rounds).
uint64_t RecordBytes(int nodes) { return CursorsAt(nodes) + 16 * nodes; }
std::string RecordName(const std::string& job) { return "job." + job; }

uint64_t Load64(const std::vector<std::byte>& b, uint64_t at) {
  uint64_t x;
  std::memcpy(&x, b.data() + at, 8);
  return x;
}

// Queues READs or WRITEs of `length` bytes in pieces the transports accept.
void ReadPieces(transport::Endpoint& ep, const transport::RegionInfo& r,
                uint64_t offset, std::byte* dst, uint64_t length) {
  for (uint64_t at = 0; at < length; at += kMaxPiece) {
    ep.Read(r.node, r.id, offset + at, dst + at,
            static_cast<uint32_t>(std::min(kMaxPiece, length - at)));
  }
}

// Polls back to back at first (a node a few microseconds behind costs
// nothing to wait for), then yields the core between polls for up to
// kYieldFor (a node sharing its core lets the others run; alone on it, a
// yield returns at once), then sleeps with a growing pause (a node far
// behind, or gone: the waiting leaves the cores alone). A sleep costs its
// pause plus the kernel's timer slack (50 us by default): sleeping from the
// 64th poll on, a two-node road-NY BFS paid ~48 us an exchange, as much as
// a level's work. With a `max_gap`, polls are at least a gap apart (the
// node yields until it has passed), the gap doubling from 250 ns up to it:
// every poll is a READ that the job's figures count and a network carries,
// and back to back they were the largest share of a node's bytes in a
// road-NY BFS at 4 nodes (~45,000 polls of 16 bytes, for ~770 rounds). A
// gap shorter than a round trip changes nothing over a network.
class Backoff {
 public:
  explicit Backoff(uint64_t max_pause_us = 1000,
                   std::chrono::nanoseconds max_gap = {})
      : max_pause_us_(max_pause_us), max_gap_(max_gap) {}
  void Pause() {
    if (++polls_ < 64) {
      Gap();
      return;
    }
    const auto now = std::chrono::steady_clock::now();
    if (polls_ == 64) yield_until_ = now + kYieldFor;
    if (now < yield_until_) {
      std::this_thread::yield();
      Gap();
      return;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(pause_us_));
    pause_us_ = std::min<uint64_t>(pause_us_ * 2, max_pause_us_);
  }

 private:
  void Gap() {
    if (max_gap_.count() == 0) return;
    const auto until = std::chrono::steady_clock::now() + gap_;
    gap_ = std::min(gap_ * 2, max_gap_);
    while (std::chrono::steady_clock::now() < until) std::this_thread::yield();
  }
  static constexpr std::chrono::microseconds kYieldFor{2000};
  uint64_t max_pause_us_;
  std::chrono::nanoseconds max_gap_;
  std::chrono::nanoseconds gap_{250};
  int polls_ = 0;
  std::chrono::steady_clock::time_point yield_until_;
  uint64_t pause_us_ = 20;
};

// The longest gap between two polls of the job record while waiting for a
// round (Backoff): about what an RDMA READ's round trip takes.
constexpr std::chrono::nanoseconds kPollGap{2000};

}  // namespace

Cluster::Cluster(transport::Transport& transport, ClusterOptions options,
                 transport::RegionInfo record, std::vector<uint64_t> bounds)
    : transport_(transport),
      options_(std::move(options)),
      record_(std::move(record)),
      bounds_(std::move(bounds)) {}

std::unique_ptr<Cluster> Cluster::Solo(transport::Transport& transport,
                                       std::string job, uint64_t num_vertices) {
  ClusterOptions options;
  options.nodes = 1;
  options.id = 0;
  options.job = std::move(job);
  auto cluster = std::unique_ptr<Cluster>(
      new Cluster(transport, std::move(options), transport::RegionInfo{},
                  std::vector<uint64_t>{0, num_vertices}));
  cluster->solo_ = true;
  return cluster;
}

uint64_t Cluster::slot_offset(int k, uint64_t round) const {
  return SlotsAt(options_.nodes) +
         SlotBytes(options_.nodes) * (2 * static_cast<uint64_t>(k) + round % 2);
}

namespace {

// The job record's region on memory node 0, if there is one.
absl::StatusOr<std::optional<transport::RegionInfo>> FindRecord(
    transport::Transport& transport, const std::string& name) {
  DMG_ASSIGN_OR_RETURN(std::vector<transport::RegionInfo> regions,
                       transport.ListRegions(0));
  for (const transport::RegionInfo& r : regions) {
    if (r.name == name) return r;
  }
  return std::nullopt;
}

// Node 0: writes the job record (replacing an earlier attempt's when
// resuming), the magic last.
absl::StatusOr<transport::RegionInfo> CreateRecord(
    transport::Transport& transport, transport::Endpoint& ep,
    const ClusterOptions& options, uint64_t num_vertices,
    std::span<const uint64_t> bounds) {
  const int nodes = options.nodes;
  if (bounds.size() != static_cast<size_t>(nodes) + 1) {
    return absl::InternalError("job record needs nodes + 1 bounds");
  }
  const std::string name = RecordName(options.job);
  DMG_ASSIGN_OR_RETURN(std::optional<transport::RegionInfo> existing,
                       FindRecord(transport, name));
  if (existing.has_value() && options.resume) {
    // An earlier attempt's: its nodes still running (if any) stop when
    // they next look at it.
    LOG(INFO) << "job '" << options.job
              << "': replacing the job record of an earlier attempt";
    DMG_RETURN_IF_ERROR(transport.FreeRegion(existing->node, existing->id));
  } else if (existing.has_value()) {
    return absl::AlreadyExistsError(absl::StrCat(
        "a job named '", options.job,
        "' is already running on these memory nodes; pick another --job"));
  }
  const uint64_t bytes = RecordBytes(nodes);
  DMG_ASSIGN_OR_RETURN(transport::RegionInfo record,
                       transport.AllocateRegion(0, bytes, name));
  std::vector<std::byte> image(bytes);
  auto put = [&](uint64_t at, uint64_t x) {
    std::memcpy(image.data() + at, &x, 8);
  };
  put(kNodesAt, nodes);
  put(kVerticesAt, num_vertices);
  for (int k = 0; k <= nodes; ++k) put(kBoundsAt + 8 * k, bounds[k]);
  // Everything but the magic first: a joiner that sees the magic sees a
  // whole record.
  ep.Write(record.node, record.id, 8, image.data() + 8,
           static_cast<uint32_t>(bytes - 8));
  DMG_RETURN_IF_ERROR(ep.Flush());
  ep.Write(record.node, record.id, kMagicAt, &kMagic, 8);
  DMG_RETURN_IF_ERROR(ep.Flush());
  return record;
}

// Another node: waits for node 0's whole record (not an earlier attempt's)
// and checks it against this node's view; *bounds gets the recorded ones.
absl::StatusOr<transport::RegionInfo> AwaitRecord(
    transport::Transport& transport, transport::Endpoint& ep,
    const ClusterOptions& options, uint64_t num_vertices,
    std::vector<uint64_t>* bounds) {
  const int nodes = options.nodes;
  const std::string name = RecordName(options.job);
  const auto deadline = std::chrono::steady_clock::now() + options.timeout;
  std::vector<std::byte> head(kBoundsAt);
  transport::RegionInfo record;
  // Node 0 writes the record as it starts: nodes started together find
  // it within microseconds (a flat 5 ms sleep was most of a small job's
  // setup); a node started long before it polls every 5 ms.
  Backoff backoff(/*max_pause_us=*/5000);
  for (;;) {
    DMG_ASSIGN_OR_RETURN(std::optional<transport::RegionInfo> found,
                         FindRecord(transport, name));
    if (found.has_value() && found->length >= kBoundsAt) {
      ep.Read(found->node, found->id, 0, head.data(), kBoundsAt);
      absl::Status read = ep.Flush();
      // (An earlier attempt's record may go between the listing and the
      // READ: node 0 of a resumed job replaces it.)
      if (absl::IsNotFound(read)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        continue;
      }
      DMG_RETURN_IF_ERROR(read);
      // Resuming, a record whose nodes have all joined is the earlier
      // attempt's, which node 0 is about to replace.
      const bool stale = options.resume && Load64(head, kJoinedAt) >=
                                               static_cast<uint64_t>(nodes);
      if (Load64(head, kMagicAt) == kMagic && !stale) {
        record = *found;
        break;
      }
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return absl::DeadlineExceededError(absl::StrFormat(
          "job '%s': no job record on memory node 0 after %d ms; is compute "
          "node 0 running with --job=%s?",
          options.job, options.timeout.count(), options.job));
    }
    backoff.Pause();
  }
  if (Load64(head, kNodesAt) != static_cast<uint64_t>(nodes) ||
      record.length < RecordBytes(nodes)) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "job '%s' was started with --compute_nodes=%d, this node has %d",
        options.job, Load64(head, kNodesAt), nodes));
  }
  if (Load64(head, kVerticesAt) != num_vertices) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "job '%s' runs on a graph of %d vertices, this node sees %d: the "
        "memory nodes were reloaded",
        options.job, Load64(head, kVerticesAt), num_vertices));
  }
  bounds->assign(nodes + 1, 0);
  ep.Read(record.node, record.id, kBoundsAt, bounds->data(), 8 * (nodes + 1));
  DMG_RETURN_IF_ERROR(ep.Flush());
  return record;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Cluster>> Cluster::Join(
    transport::Transport& transport, transport::Endpoint& ep,
    const ClusterOptions& options, uint64_t num_vertices,
    std::span<const uint64_t> bounds) {
  const int nodes = options.nodes;
  if (nodes < 1 || options.id < 0 || options.id >= nodes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "compute node id %d is not in [0, %d)", options.id, nodes));
  }
  if (options.job.empty() || options.job.size() > 64 ||
      options.job.find_first_of(" \t\n/") != std::string::npos) {
    return absl::InvalidArgumentError(
        "--job must be 1 to 64 characters, without spaces or '/'");
  }
  std::vector<uint64_t> recorded(bounds.begin(), bounds.end());
  absl::StatusOr<transport::RegionInfo> record =
      options.id == 0
          ? CreateRecord(transport, ep, options, num_vertices, bounds)
          : AwaitRecord(transport, ep, options, num_vertices, &recorded);
  if (!record.ok()) return record.status();
  uint64_t joined = 0;
  ep.FetchAndAdd(record->node, record->id, kJoinedAt, 1, &joined);
  DMG_RETURN_IF_ERROR(ep.Flush());
  if (joined >= static_cast<uint64_t>(nodes)) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "job '%s' already has its %d compute nodes; is another node running "
        "with --compute_node_id=%d?",
        options.job, nodes, options.id));
  }
  return std::unique_ptr<Cluster>(
      new Cluster(transport, options, *record, std::move(recorded)));
}

bool Cluster::Allocated(uint32_t node, uint32_t id) const {
  if (solo_) return false;
  auto is = [&](const transport::RegionInfo& r) {
    return r.node == node && r.id == id;
  };
  if (is(record_) && options_.id == 0) return true;
  for (const Board& b : boards_) {
    if (b.allocated && is(b.region)) return true;
  }
  return false;
}

Cluster::~Cluster() {
  if (solo_) return;
  FreeRegions();
  // A job that ends badly frees its record too, so that it blocks no later
  // job; first node 0 gives the other live nodes (those it did not find
  // missing) until the timeout to read why and stop.
  if (id() == 0 && !record_freed_ && failed_) {
    const auto deadline = std::chrono::steady_clock::now() + options_.timeout;
    Backoff backoff;
    absl::StatusOr<std::unique_ptr<transport::Endpoint>> ep =
        transport_.NewEndpoint();
    while (ep.ok() && std::chrono::steady_clock::now() < deadline) {
      uint64_t left = 0;
      (*ep)->Read(record_.node, record_.id, kLeftAt, &left, 8);
      if (!(*ep)->Flush().ok() ||
          left + missing_ >= static_cast<uint64_t>(nodes())) {
        break;
      }
      backoff.Pause();
    }
  }
  if (id() == 0 && !record_freed_) {
    absl::Status s = transport_.FreeRegion(record_.node, record_.id);
    VLOG_IF(1, !s.ok()) << "freeing the job record: " << s;
  }
}

void Cluster::FreeRegions() {
  for (Board& b : boards_) {
    if (!b.allocated) continue;
    absl::Status s = transport_.FreeRegion(b.region.node, b.region.id);
    VLOG_IF(1, !s.ok()) << "freeing board " << b.region.name << ": " << s;
    b.allocated = false;
  }
}

std::string Cluster::MissingNodes(const std::vector<std::byte>& image) const {
  std::string names;
  for (int k = 0; k < options_.nodes; ++k) {
    Slot slot;
    std::memcpy(&slot, image.data() + slot_offset(k, round_), sizeof(slot));
    if (slot.round < round_) {
      absl::StrAppend(&names, names.empty() ? "" : ", ", k);
    }
  }
  return names;
}

Cluster::CounterPoll Cluster::PollCounters(
    transport::Endpoint& ep, std::vector<std::byte>& image,
    std::chrono::steady_clock::time_point start) {
  const int nodes = options_.nodes;
  static_assert(kLeftAt == kCounterAt + 8);
  uint64_t words[2] = {0, 0};  // the barrier counter, the left counter
  ep.Read(record_.node, record_.id, kCounterAt, words, sizeof(words));
  absl::Status s = ep.Flush();
  const bool timed_out =
      std::chrono::steady_clock::now() - start > options_.timeout;
  if (!s.ok() || words[1] != 0 || timed_out) return CounterPoll::kReadRecord;
  if (words[0] < round_ * nodes) return CounterPoll::kBehind;
  // Of each other node's slot, what Exchange uses: the head and the
  // section addressed to this node (a round's bytes grow with the node
  // count, not its square).
  for (int k = 0; k < nodes; ++k) {
    if (k == id()) continue;
    const uint64_t at = slot_offset(k, round_);
    const uint64_t section = at + sizeof(Slot) + sizeof(Section) * id();
    ep.Read(record_.node, record_.id, at, image.data() + at, kSlotHead);
    ep.Read(record_.node, record_.id, section, image.data() + section,
            static_cast<uint32_t>(sizeof(Section)));
  }
  return ep.Flush().ok() ? CounterPoll::kRoundDone : CounterPoll::kReadRecord;
}

absl::Status Cluster::RecordGone(const std::string& late) const {
  if (!late.empty() && late != "0") {
    return absl::DeadlineExceededError(absl::StrFormat(
        "job '%s': compute node %s did not reach round %d (stopped or "
        "stalled); compute node 0 gave up waiting too",
        job(), late, round_));
  }
  return absl::UnavailableError(absl::StrFormat(
      "job '%s': the job record is gone from memory node 0: compute "
      "node 0 (its owner) has stopped",
      job()));
}

absl::StatusOr<bool> Cluster::AllAtRound(const std::vector<std::byte>& image) {
  bool all = Load64(image, kCounterAt) >= round_ * options_.nodes;
  for (int k = 0; k < options_.nodes; ++k) {
    Slot slot;
    std::memcpy(&slot, image.data() + slot_offset(k, round_), sizeof(slot));
    if (slot.failed != 0 && k != id()) {
      slot.message[sizeof(slot.message) - 1] = '\0';
      relayed_ = true;
      if (slot.failed == kVerdict) {  // about others: passed on as it is
        return absl::DeadlineExceededError(slot.message);
      }
      return absl::AbortedError(absl::StrFormat(
          "compute node %d of job '%s' failed: %s", k, job(), slot.message));
    }
    if (slot.round < round_) all = false;
  }
  return all;
}

absl::Status Cluster::GiveUpWaiting(const std::vector<std::byte>& image) {
  for (int k = 0; k < options_.nodes; ++k) {
    Slot slot;
    std::memcpy(&slot, image.data() + slot_offset(k, round_), sizeof(slot));
    missing_ += slot.round < round_ ? 1 : 0;
  }
  return absl::DeadlineExceededError(absl::StrFormat(
      "job '%s': compute node %s did not reach round %d within %d ms "
      "(stopped or stalled)",
      job(), MissingNodes(image), round_, options_.timeout.count()));
}

absl::Status Cluster::WaitForRound(transport::Endpoint& ep,
                                   std::vector<std::byte>& image) {
  const auto start = std::chrono::steady_clock::now();
  Backoff backoff(1000, kPollGap);
  bool read_once = false;
  // Set once an image showed every node at this round: the next READ of the
  // whole record is the one trusted. A READ is not an ordered snapshot: its
  // bytes may be fetched in any order (glibc's memcpy of a record this size
  // loads the last 128 bytes first, a NIC splits a READ into requests), so
  // the image that showed a slot's new round word may hold bytes of its body
  // (written before that word, e.g. its sections at the slot's end) from two
  // rounds ago. Every slot whose round said so was whole before that READ
  // ended and stays so until this node posts its next round, so a READ
  // issued after it sees it whole.
  bool confirm = false;
  for (;;) {
    // The common case reads 16 bytes a poll: the barrier counter and the
    // left counter. Each node's slot body landed before its fetch-and-add
    // was issued, so once the counter shows every node at this round, a
    // READ issued after that one sees every slot body of the round whole
    // (a node moves on to write the other parity only, and reaches this
    // parity again only after this node's next post): one batch of READs
    // of the others' slot heads and sections for this node, and no READ
    // of the whole record. The whole record
    // (slots: who is where, who failed) is read only when a node has left
    // or failed (it adds to the left counter first), when a READ fails (is
    // node 0 gone?), or when the wait runs out.
    ++polls_;
    if (!confirm) {
      const CounterPoll poll = PollCounters(ep, image, start);
      if (poll == CounterPoll::kBehind) {
        backoff.Pause();
        continue;
      }
      if (poll == CounterPoll::kRoundDone) break;
    }
    std::vector<std::byte> last = image;
    ep.Read(record_.node, record_.id, 0, image.data(),
            static_cast<uint32_t>(image.size()));
    if (absl::Status s = ep.Flush(); !s.ok()) {
      if (id() != 0 && absl::IsNotFound(s)) {
        // Node 0 has gone (and the record with it): name whoever it was
        // waiting for with us, if anyone.
        image = last;
        return RecordGone(read_once ? MissingNodes(image) : "");
      }
      return s;
    }
    read_once = true;
    DMG_ASSIGN_OR_RETURN(const bool all, AllAtRound(image));
    if (all && confirm) break;
    if (all) {
      confirm = true;
      continue;
    }
    const auto waited = std::chrono::steady_clock::now() - start;
    if (waited > options_.timeout) return GiveUpWaiting(image);
    backoff.Pause();
  }
  wait_us_ += std::chrono::duration_cast<std::chrono::microseconds>(
                  std::chrono::steady_clock::now() - start)
                  .count();
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Cluster::Received>> Cluster::Exchange(
    transport::Endpoint& ep, std::string_view common,
    std::span<const std::string> to) {
  if (failed_) return absl::AbortedError("this compute node has failed");
  if (!to.empty() && to.size() != static_cast<size_t>(nodes())) {
    return absl::InternalError("Exchange: one part per node");
  }
  if (solo_) {
    std::vector<Received> mine(1);
    mine[0].common = std::string(common);
    if (!to.empty()) mine[0].mine = to[0];
    return mine;
  }
  ++round_;
  // The board: the common part, then the parts addressed to each node.
  std::vector<Section> sections(nodes(), Section{0, 0});
  uint64_t total = common.size();
  for (size_t k = 0; k < to.size(); ++k) {
    sections[k] = {total, to[k].size()};
    total += to[k].size();
  }
  Board& board = boards_[round_ % 2];
  if (total > board.region.length || !board.allocated) {
    if (board.allocated) {
      DMG_RETURN_IF_ERROR(
          transport_.FreeRegion(board.region.node, board.region.id));
      board.allocated = false;
    }
    // Room from the first for a post of a bitmap over the whole graph (a
    // dense frontier, up to 1 MiB): a board that grew later did so in the
    // middle of a superstep, an allocation (and the memory node's check of
    // its room, ~0.25 ms) the other nodes waited for.
    const uint64_t dense = std::min<uint64_t>(
        bounds_.empty() ? 0 : bounds_.back() / 8 + 4096, uint64_t{1} << 20);
    const uint64_t bytes =
        std::max<uint64_t>(std::max<uint64_t>(4096, dense),
                           std::max<uint64_t>(total, board.region.length * 2));
    DMG_ASSIGN_OR_RETURN(
        board.region,
        transport_.AllocateRegion(
            id() % transport_.num_memory_nodes(), bytes,
            absl::StrFormat("job.%s.board.%d.%d", job(), id(), round_ % 2)));
    board.allocated = true;
  }
  auto write = [&](uint64_t at, std::string_view bytes) {
    for (uint64_t k = 0; k < bytes.size(); k += kMaxPiece) {
      ep.Write(board.region.node, board.region.id, at + k, bytes.data() + k,
               static_cast<uint32_t>(
                   std::min<uint64_t>(kMaxPiece, bytes.size() - k)));
    }
  };
  write(0, common);
  for (size_t k = 0; k < to.size(); ++k) write(sections[k].offset, to[k]);
  std::vector<std::byte> slot(SlotBytes(nodes()));
  Slot head{};
  head.round = round_;
  head.board_node = board.region.node;
  head.board_region = board.region.id;
  head.length = common.size();
  std::memcpy(slot.data(), &head, sizeof(head));
  std::memcpy(slot.data() + sizeof(head), sections.data(),
              sections.size() * sizeof(Section));
  // The board and the slot's body (head and sections; the message is for
  // failures) first, all but its round; then, once they have landed,
  // arrive (the fetch-and-add) and set the round, in one batch executed in
  // order. A reader trusts a body only after the counter (or, in the slow
  // path, the slot's round: an aligned 8-byte word is never read torn)
  // showed it landed, and takes it from a READ issued after that one
  // (WaitForRound), so it never sees a half-written body; a node that dies
  // between the two is still named by its slot's old round.
  const uint64_t at = slot_offset(id(), round_);
  ep.Write(record_.node, record_.id, at + 8, slot.data() + 8, kSlotHead - 8);
  ep.Write(record_.node, record_.id, at + sizeof(Slot),
           slot.data() + sizeof(Slot),
           static_cast<uint32_t>(sizeof(Section) * nodes()));
  DMG_RETURN_IF_ERROR(ep.Flush());
  uint64_t old = 0;
  ep.FetchAndAdd(record_.node, record_.id, kCounterAt, 1, &old);
  ep.Write(record_.node, record_.id, slot_offset(id(), round_), &round_, 8);
  DMG_RETURN_IF_ERROR(ep.Flush());

  std::vector<std::byte> image(RecordBytes(nodes()));
  DMG_RETURN_IF_ERROR(WaitForRound(ep, image));
  std::vector<Received> all(nodes());
  for (int k = 0; k < nodes(); ++k) {
    if (k == id()) {
      all[k].common = std::string(common);
      if (!to.empty()) all[k].mine = to[k];
      continue;
    }
    Slot s;
    std::memcpy(&s, image.data() + slot_offset(k, round_), sizeof(s));
    Section part;
    std::memcpy(&part,
                image.data() + slot_offset(k, round_) + sizeof(Slot) +
                    sizeof(Section) * id(),
                sizeof(part));
    transport::RegionInfo from;
    from.node = s.board_node;
    from.id = s.board_region;
    all[k].common.resize(s.length);
    ReadPieces(ep, from, 0, reinterpret_cast<std::byte*>(all[k].common.data()),
               s.length);
    all[k].mine.resize(part.length);
    ReadPieces(ep, from, part.offset,
               reinterpret_cast<std::byte*>(all[k].mine.data()), part.length);
  }
  DMG_RETURN_IF_ERROR(ep.Flush());
  return all;
}

absl::StatusOr<int> Cluster::BeginWorkRound(transport::Endpoint& ep) {
  ++work_round_;
  const int parity = static_cast<int>(work_round_ % 2);
  if (solo_) {
    solo_cursor_[1 - parity].store(0, std::memory_order_relaxed);
    return parity;
  }
  // This node's cursor of the other parity was last used in the previous
  // round, which every node has left (an exchange lies between): reset it
  // for the next one.
  const uint64_t zero = 0;
  ep.Write(record_.node, record_.id, CursorAt(id(), 1 - parity), &zero, 8);
  DMG_RETURN_IF_ERROR(ep.Flush());
  return parity;
}

absl::StatusOr<uint64_t> Cluster::Claim(transport::Endpoint& ep, int node,
                                        int parity, uint64_t count) {
  if (solo_) {
    return solo_cursor_[parity].fetch_add(count, std::memory_order_relaxed);
  }
  uint64_t old = 0;
  ep.FetchAndAdd(record_.node, record_.id, CursorAt(node, parity), count, &old);
  DMG_RETURN_IF_ERROR(ep.Flush());
  return old;
}

uint64_t Cluster::CursorAt(int node, int parity) const {
  return CursorsAt(options_.nodes) + 16 * static_cast<uint64_t>(node) +
         8 * parity;
}

absl::Status Cluster::Diagnose(const absl::Status& status) {
  if (round_ == 0 || solo_) return status;  // no boards to look for
  // Regions are freed when their owner's connections close: a node whose
  // boards are gone from every memory node has stopped.
  std::vector<bool> alive(nodes(), false);
  alive[id()] = true;
  const std::string prefix = absl::StrFormat("job.%s.board.", job());
  for (uint32_t m = 0; m < transport_.num_memory_nodes(); ++m) {
    absl::StatusOr<std::vector<transport::RegionInfo>> regions =
        transport_.ListRegions(m);
    if (!regions.ok()) return status;
    for (const transport::RegionInfo& r : *regions) {
      int k = -1;
      if (r.name.rfind(prefix, 0) == 0 &&
          std::sscanf(r.name.c_str() + prefix.size(), "%d", &k) == 1 &&
          k >= 0 && k < nodes()) {
        alive[k] = true;
      }
    }
  }
  std::string dead;
  uint64_t count = 0;
  for (int k = 0; k < nodes(); ++k) {
    if (alive[k]) continue;
    absl::StrAppend(&dead, dead.empty() ? "" : ", ", k);
    ++count;
  }
  missing_ = std::max(missing_, count);
  if (dead.empty()) return status;
  return absl::UnavailableError(absl::StrFormat(
      "job '%s': compute node %s has stopped (its regions on the memory "
      "nodes are gone)",
      job(), dead));
}

void Cluster::Abort(transport::Endpoint& ep, const absl::Status& status) {
  if (failed_ || left_) return;
  failed_ = true;
  if (solo_) return;  // nobody to tell
  // This node stops touching the record (node 0 waits for that before it
  // frees the record, so that late nodes still read why the job ended).
  uint64_t old = 0;
  ep.FetchAndAdd(record_.node, record_.id, kLeftAt, 1, &old);
  if (relayed_) {
    (void)ep.Flush();
    return;  // another node's news, already posted
  }
  Slot slot{};
  slot.round = round_;
  slot.failed = absl::IsDeadlineExceeded(status) ? kVerdict : kFailed;
  const std::string text(status.message());
  std::snprintf(slot.message, sizeof(slot.message), "%s", text.c_str());
  for (uint64_t r : {round_, round_ + 1}) {
    ep.Write(record_.node, record_.id, slot_offset(id(), r), &slot,
             sizeof(slot));
  }
  absl::Status s = ep.Flush();
  VLOG_IF(1, !s.ok()) << "posting this node's failure: " << s;
}

absl::Status Cluster::Leave(transport::Endpoint& ep) {
  if (left_) return absl::OkStatus();
  if (solo_) {
    left_ = true;
    return absl::OkStatus();
  }
  DMG_RETURN_IF_ERROR(Exchange(ep, "").status());  // everyone is done
  left_ = true;
  uint64_t left = 0;
  ep.FetchAndAdd(record_.node, record_.id, kLeftAt, 1, &left);
  DMG_RETURN_IF_ERROR(ep.Flush());
  FreeRegions();
  if (id() != 0) return absl::OkStatus();
  // Node 0 owns the record: it frees it once every node has stopped
  // reading it (or the wait runs out: their connections are gone then).
  const auto deadline = std::chrono::steady_clock::now() + options_.timeout;
  Backoff backoff;
  while (left + 1 < static_cast<uint64_t>(nodes()) &&
         std::chrono::steady_clock::now() < deadline) {
    backoff.Pause();
    uint64_t now = 0;
    ep.Read(record_.node, record_.id, kLeftAt, &now, 8);
    DMG_RETURN_IF_ERROR(ep.Flush());
    left = now - 1;
  }
  record_freed_ = true;
  return transport_.FreeRegion(record_.node, record_.id);
}

}  // namespace dmg::compute

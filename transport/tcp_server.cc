#include "transport/tcp_server.h"

#include <atomic>
#include <bit>
#include <boost/asio.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "glog/logging.h"
#include "transport/wire.h"

namespace dmg::transport {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

using Clock = std::chrono::steady_clock;

// At most 10 lines per 10 s for one kind of message (a client that fails
// on purpose must not fill the disk); the ones dropped are counted in the
// next line that gets through.
class LogLimiter {
 public:
  static constexpr int kBurst = 10;
  // Whether to log now; *note is what to prefix: how many were dropped
  // since the last line, or that the next ones will be.
  bool Allow(std::string* note) {
    std::lock_guard lock(mu_);
    const Clock::time_point now = Clock::now();
    if (now - window_ > std::chrono::seconds(10)) {
      window_ = now;
      in_window_ = 0;
    }
    if (in_window_ >= kBurst) {
      ++suppressed_;
      return false;
    }
    ++in_window_;
    note->clear();
    if (suppressed_ > 0) {
      *note = absl::StrFormat("(%d similar lines suppressed) ",
                              std::exchange(suppressed_, 0));
    }
    if (in_window_ == kBurst) {
      *note += "(similar lines suppressed for 10 s after this one) ";
    }
    return true;
  }

 private:
  std::mutex mu_;
  Clock::time_point window_{};
  int in_window_ = 0;
  uint64_t suppressed_ = 0;
};

// LOG(WARNING) and LOG(INFO) through a LogLimiter: every line a client
// without the admin role can cause goes through one. (A load's lines, which
// only the admin causes, are its audit trail and are all kept.)
#define DMG_LOG_LIMITED(limiter)                           \
  if (std::string dmg_note; !(limiter).Allow(&dmg_note)) { \
  } else                                                   \
    LOG(WARNING) << dmg_note
#define DMG_INFO_LIMITED(limiter)                          \
  if (std::string dmg_note; !(limiter).Allow(&dmg_note)) { \
  } else                                                   \
    LOG(INFO) << dmg_note

// Buffers that connections gave back, for the next connection that asks:
// `dmg run` opens its connections again every trial, and each new
// connection faulted its buffers' pages in afresh (~1,750 faults a kron:20
// BFS trial over loopback, a tenth of the daemon's time serving it).
// Capacities from 64 KiB come in classes (steps of an eighth of a power of
// two), so a buffer fits the next request of its size; smaller ones are
// exact and not kept (malloc's arenas serve them warm), so a handshake's
// few bytes hold no more. At most `max_bytes` are kept; nothing above
// kMaxClassBytes. Thread-safe.
class BufferShelf {
 public:
  static constexpr size_t kMinClassBytes = size_t{64} << 10;
  static constexpr size_t kMaxClassBytes = size_t{64} << 20;

  void SetLimit(size_t max_bytes) {
    std::lock_guard lock(mu_);
    max_bytes_ = max_bytes;
  }

  // The capacity a request of n bytes gets: n rounded up to its class
  // (at most an eighth more), or n itself outside the classes.
  static size_t ClassBytes(size_t n) {
    if (n < kMinClassBytes || n > kMaxClassBytes) return n;
    const size_t step = std::bit_ceil(n) / 8;
    return (n + step - 1) / step * step;
  }
  // A kept buffer of exactly `bytes` (a class), or null.
  std::unique_ptr<char[]> Take(size_t bytes) {
    std::lock_guard lock(mu_);
    auto it = kept_.find(bytes);
    if (it == kept_.end() || it->second.empty()) return nullptr;
    std::unique_ptr<char[]> p = std::move(it->second.back());
    it->second.pop_back();
    kept_bytes_ -= bytes;
    ++reused_;
    return p;
  }
  // Keeps p (of `bytes`) if there is room; else it is freed.
  void Give(std::unique_ptr<char[]> p, size_t bytes) {
    if (p == nullptr || bytes < kMinClassBytes || bytes > kMaxClassBytes) {
      return;
    }
    std::lock_guard lock(mu_);
    if (kept_bytes_ + bytes > max_bytes_) return;
    kept_[bytes].push_back(std::move(p));
    kept_bytes_ += bytes;
  }
  uint64_t reused() {
    std::lock_guard lock(mu_);
    return reused_;
  }
  size_t kept_bytes() {
    std::lock_guard lock(mu_);
    return kept_bytes_;
  }

 private:
  std::mutex mu_;
  size_t max_bytes_ = 0;
  std::map<size_t, std::vector<std::unique_ptr<char[]>>> kept_;
  size_t kept_bytes_ = 0;
  uint64_t reused_ = 0;
};

// A byte buffer whose capacity is its class (BufferShelf::ClassBytes), so
// what every connection holds can be counted against the daemon's cap. Its
// contents are not zeroed: every byte of a reply is written before it is
// sent.
class ByteBuffer {
 public:
  char* data() { return data_.get(); }
  size_t capacity() const { return capacity_; }
  // Room for n bytes, keeping the first `keep`: a capacity of n's class,
  // from the shelf when it has one. Throws std::bad_alloc.
  void Reserve(size_t n, size_t keep, BufferShelf& shelf) {
    if (n <= capacity_) return;
    const size_t bytes = BufferShelf::ClassBytes(n);
    std::unique_ptr<char[]> p = shelf.Take(bytes);
    if (p == nullptr) p.reset(new char[bytes]);
    if (keep > 0) std::memcpy(p.get(), data_.get(), keep);
    Release(shelf);
    data_ = std::move(p);
    capacity_ = bytes;
  }
  // Back to the shelf (or freed).
  void Release(BufferShelf& shelf) {
    shelf.Give(std::move(data_), capacity_);
    data_.reset();
    capacity_ = 0;
  }

 private:
  std::unique_ptr<char[]> data_;
  size_t capacity_ = 0;
};

}  // namespace

struct TcpServer::Impl {
  MemoryTarget* target;
  TcpServerOptions options;
  std::atomic<uint32_t> node_id{0};
  asio::io_context io;
  // The acceptor and the reaper are touched by the accept loop, the reaper
  // loop and Stop, all on this strand: with the io threads, a Stop that
  // cancelled the reaper's timer while its loop ran between two waits
  // (nothing to cancel) left the loop going, so the io threads never ran
  // dry and Stop never returned (a SIGINT'd daemon hung for 600 s under two
  // CPU hogs).
  asio::strand<asio::io_context::executor_type> control{asio::make_strand(io)};
  tcp::acceptor acceptor{io};
  asio::steady_timer reaper{io};  // frees kept regions whose time is up
  std::atomic<bool> stopping{false};
  asio::thread_pool snapshots{1};  // writes kSnapshot's, off the I/O threads
  std::vector<std::thread> threads;

  // One accepted connection. Its session and its watchdog run on the
  // connection's strand, so they never touch it at the same time.
  struct Conn {
    explicit Conn(const asio::any_io_executor& ex) : socket(ex), timer(ex) {}
    tcp::socket socket;
    asio::steady_timer timer;
    // When the watchdog closes the connection, and what it waits for then.
    Clock::time_point deadline = Clock::time_point::max();
    const char* waiting_for = "hello";
    int waiting_ms = 0;
    bool done = false;
    std::string peer;
    bool hello = false, authenticated = false;
    Role role = Role::kJob;
    std::string job;
    Nonce client_nonce{}, server_nonce{};
    std::optional<Digest> verifier;  // of its job token (role job, secret)
    std::vector<uint32_t> owned;     // regions it allocated, freed at close
    // A job's connections pin the store generation the job started on.
    bool pinned = false;
    uint64_t generation = 0;
    // Authenticated connections are numbered in order (a job's older ones
    // still open are another process of it: kKeepJob's `others`).
    uint64_t seq = 0;
    // A loader's staged store, until it commits (0: none).
    uint32_t staging = 0;
    uint32_t staging_node_id = 0;
    uint64_t staging_load_id = 0;
    ByteBuffer payload, frame;  // kept across requests, up to a bound
    uint64_t held = 0;          // bytes of its buffers counted against the cap
    // Not yet through the handshake (counted in `handshakes`); read by the
    // accept loop when it needs room, so atomic.
    std::atomic<bool> in_handshake{true};
    // Accepted into one of the admin's slots: only an admin hello is taken.
    bool admin_only = false;
    std::string address;  // the peer's address without its port
  };

  std::mutex mu;
  std::condition_variable stopped_cv;
  bool stopped = false;
  std::set<std::shared_ptr<Conn>> conns;  // guarded by mu

  // The job each region was allocated by (absent: the store, and regions a
  // process added in-process). A loader's staging region belongs to no job
  // (kStagingOwner, longer than any job name): a job connection that calls
  // itself `dmg-load` must not reach what becomes the store.
  static inline const std::string kStagingOwner =
      std::string(wire::kMaxJobName + 1, '-');
  std::shared_mutex owners_mu;
  std::unordered_map<uint32_t, std::string> owners;  // guarded by owners_mu

  // Jobs that asked to keep their regions after their connections close
  // (kKeepJob): how long, and the regions of closed connections waiting for
  // the job's next connection (or for the deadline, then freed).
  struct Kept {
    Clock::duration keep{};
    std::vector<uint32_t> orphans;
    Clock::time_point deadline = Clock::time_point::max();
  };
  std::map<std::string, Kept> kept;  // guarded by owners_mu
  // The verifier of the token each job's name is bound to (auth.h), held
  // while the job has connections (pins) or kept regions here. Lock order:
  // pins_mu, then owners_mu.
  std::map<std::string, Digest> verifiers;  // guarded by owners_mu
  std::atomic<uint64_t> token_refusals{0};
  std::atomic<uint64_t> kept_regions{0};
  std::atomic<uint64_t> adoptions{0};  // connections that took kept regions

  // The store's generation each job started on, and how many of its
  // connections are open; the load id of the current store.
  struct Pin {
    uint64_t generation = 0;
    int connections = 0;
    std::set<uint64_t> open;  // the connections' seq
  };
  uint64_t next_seq = 1;  // guarded by pins_mu
  std::mutex pins_mu;
  std::map<std::string, Pin> pins;  // guarded by pins_mu
  uint64_t load_id = 0;             // guarded by pins_mu
  uint64_t restored_snapshot = 0;   // guarded by pins_mu

  std::atomic<int> connections{0};
  // Connections still in their handshake, oldest first (some of the
  // entries may be through it or gone: skipped when met).
  std::deque<std::weak_ptr<Conn>> handshaking;  // guarded by mu
  std::atomic<int> handshakes{0};
  std::unordered_map<std::string, int> per_peer;  // guarded by mu
  std::atomic<uint64_t> evicted{0}, admin_only_refusals{0};
  std::atomic<uint64_t> buffered{0}, max_buffered{0};
  // Buffers closed connections gave back: at most a quarter of the cap
  // (up to 64 MiB) beside what connections hold (set in Start).
  BufferShelf shelf;
  std::atomic<uint64_t> refused{0}, auth_failures{0}, timeouts{0}, denied{0};
  LogLimiter refuse_log, auth_log, frame_log, timeout_log, denied_log;
  LogLimiter rejected_log, failed_log, accept_log, close_log, adopt_log,
      keep_log, evict_log;

  void RequestStop() {
    std::lock_guard lock(mu);
    stopped = true;
    stopped_cv.notify_all();
  }

  // ------------------------------------------------------------- budget

  // Sets what `c` holds to `bytes` when all connections together stay
  // within the cap (a shrink always succeeds).
  bool Account(Conn& c, uint64_t bytes) {
    if (bytes <= c.held) {
      buffered -= c.held - bytes;
      c.held = bytes;
      return true;
    }
    const uint64_t more = bytes - c.held;
    uint64_t now = buffered.load();
    do {
      if (now + more > options.limits.max_buffer_bytes) return false;
    } while (!buffered.compare_exchange_weak(now, now + more));
    c.held = bytes;
    uint64_t peak = max_buffered.load();
    while (now + more > peak &&
           !max_buffered.compare_exchange_weak(peak, now + more)) {
    }
    return true;
  }

  // Grows one of c's buffers to n bytes (keeping `keep`), within the cap.
  bool Grow(Conn& c, ByteBuffer& b, size_t n, size_t keep) {
    if (n <= b.capacity()) return true;
    const size_t bytes = BufferShelf::ClassBytes(n);
    if (!Account(c, c.held - b.capacity() + bytes)) return false;
    try {
      b.Reserve(n, keep, shelf);
    } catch (const std::bad_alloc&) {
      Account(c, c.payload.capacity() + c.frame.capacity());
      return false;
    }
    return true;
  }

  absl::Status BusyError(uint64_t bytes) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "memory node busy: %d more bytes of request buffers would exceed its "
        "cap of %d bytes for all connections together; retry, or raise "
        "--max_buffer_mb",
        bytes, options.limits.max_buffer_bytes));
  }

  void SetDeadline(Conn& c, int ms, const char* what) {
    c.deadline = ms > 0 ? Clock::now() + std::chrono::milliseconds(ms)
                        : Clock::time_point::max();
    c.waiting_for = what;
    c.waiting_ms = ms;
  }
  // Between requests: the rest of the handshake time, or the idle bound.
  void SetWaitingDeadline(Conn& c) {
    if (c.authenticated) SetDeadline(c, IdleTimeoutMs(c.role), "request");
  }
  // How long a connection of `role` may stay silent (0: for ever).
  int IdleTimeoutMs(Role role) const {
    const TcpServerLimits& l = options.limits;
    if (role != Role::kJob || l.job_idle_timeout_ms <= 0) {
      return l.idle_timeout_ms;
    }
    return l.idle_timeout_ms > 0
               ? std::min(l.idle_timeout_ms, l.job_idle_timeout_ms)
               : l.job_idle_timeout_ms;
  }

  // ------------------------------------------------------------- loads

  // A job's first connection pins the current store; later ones of the same
  // job get the same generation, so a job never mixes two stores.
  // c is through its handshake (or closing): it stops counting against
  // max_handshakes.
  void LeaveHandshake(Conn& c) {
    if (c.in_handshake.exchange(false)) --handshakes;
  }

  // A job connection with a token binds the job's name to it when the job
  // holds nothing here, and must match it otherwise (PermissionDenied).
  absl::Status Authenticated(Conn& c) {
    if (c.role != Role::kJob) {
      c.authenticated = true;
      LeaveHandshake(c);
      return absl::OkStatus();
    }
    {
      std::lock_guard lock(pins_mu);
      if (c.verifier) {
        std::unique_lock owners_lock(owners_mu);
        auto it = verifiers.find(c.job);
        const bool held = pins.contains(c.job) || kept.contains(c.job);
        if (it != verifiers.end() && held &&
            !SameDigest(it->second, *c.verifier)) {
          ++token_refusals;
          DMG_LOG_LIMITED(denied_log)
              << "refused " << c.peer << ": job '" << c.job
              << "' is bound to another job token here";
          return absl::PermissionDeniedError(absl::StrFormat(
              "memory node %d: job '%s' is running here (or kept for "
              "--resume) under another job token: a job's processes share "
              "one token (dmg run hands it to the ones it starts; "
              "$DMG_JOB_TOKEN or --job_token_file for others), and another "
              "job's name cannot be taken over",
              node_id.load(), c.job));
        }
        verifiers[c.job] = *c.verifier;
      }
      c.authenticated = true;
      LeaveHandshake(c);
      Pin& pin = pins[c.job];
      c.seq = next_seq++;
      pin.open.insert(c.seq);
      if (pin.connections++ == 0) pin.generation = target->store_generation();
      c.pinned = true;
      c.generation = pin.generation;
    }
    Adopt(c);
    return absl::OkStatus();
  }

  // Forgets the token of jobs that hold nothing here any more (their name
  // is free again). Takes pins_mu: call with neither lock held.
  void ForgetIdleTokens(const std::vector<std::string>& jobs) {
    if (jobs.empty()) return;
    std::lock_guard lock(pins_mu);
    std::unique_lock owners_lock(owners_mu);
    for (const std::string& job : jobs) {
      if (!pins.contains(job) && !kept.contains(job)) verifiers.erase(job);
    }
  }

  // ------------------------------------------------------------- kept jobs

  // A job's connection takes over the regions its job's closed connections
  // left kept (so they are freed, or kept again, when it closes).
  void Adopt(Conn& c) {
    std::unique_lock lock(owners_mu);
    auto it = kept.find(c.job);
    if (it == kept.end() || it->second.orphans.empty()) return;
    Kept& k = it->second;
    DMG_INFO_LIMITED(adopt_log)
        << c.peer << " of job '" << c.job << "' adopts its " << k.orphans.size()
        << " kept region(s)";
    kept_regions -= k.orphans.size();
    ++adoptions;
    c.owned.insert(c.owned.end(), k.orphans.begin(), k.orphans.end());
    k.orphans.clear();
    k.deadline = Clock::time_point::max();
  }

  // kKeepJob: {u32 keep_s} -> {u32 granted_s, u32 others}.
  absl::StatusOr<std::string> HandleKeepJob(Conn& c, wire::Reader& r) {
    uint32_t keep_s;
    if (!r.Get(&keep_s)) return absl::InvalidArgumentError("malformed keep");
    if (c.role != Role::kJob) {
      return absl::InvalidArgumentError("only a job's regions can be kept");
    }
    const uint32_t granted = std::min<uint32_t>(
        keep_s, static_cast<uint32_t>(std::max(0, options.limits.max_keep_s)));
    std::vector<uint32_t> to_free;
    {
      std::unique_lock lock(owners_mu);
      if (granted > 0) {
        kept[c.job].keep = std::chrono::seconds(granted);
      } else if (auto it = kept.find(c.job); it != kept.end()) {
        // No longer kept: what closed connections left goes now.
        to_free = std::move(it->second.orphans);
        kept_regions -= to_free.size();
        for (uint32_t region : to_free) owners.erase(region);
        kept.erase(it);
      }
    }
    FreeRegions(to_free);
    uint32_t others = 0;  // the job's connections older than this one
    {
      std::lock_guard lock(pins_mu);
      auto it = pins.find(c.job);
      if (it != pins.end()) {
        const std::set<uint64_t>& open = it->second.open;
        others = static_cast<uint32_t>(
            std::distance(open.begin(), open.lower_bound(c.seq)));
      }
    }
    // With none older left, every region they had is kept by now (their
    // close keeps them before it stops counting them); this connection
    // takes over those that closed after it said hello.
    if (granted > 0 && others == 0) Adopt(c);
    std::string out;
    wire::Writer w(&out);
    w.Put(granted);
    w.Put(others);
    return out;
  }

  void FreeRegions(const std::vector<uint32_t>& regions) {
    for (uint32_t region : regions) {
      if (options.deregister_region) options.deregister_region(region);
      absl::Status s = target->ServeFree(region);
      if (!s.ok()) {
        DMG_LOG_LIMITED(failed_log) << "freeing region " << region << ": " << s;
      }
    }
  }

  // Job state restored from a snapshot: kept as if the job's connections
  // had just closed.
  void RestoreJobs() {
    std::unique_lock lock(owners_mu);
    const auto keep =
        std::chrono::seconds(std::max(0, options.limits.max_keep_s));
    for (const JobRegions& job : options.restored_jobs) {
      Kept& k = kept[job.job];
      if (job.verifier) verifiers[job.job] = *job.verifier;
      k.keep = keep;
      k.deadline = Clock::now() + keep;
      for (uint32_t region : job.regions) {
        owners[region] = job.job;
        k.orphans.push_back(region);
        ++kept_regions;
      }
      LOG(INFO) << "keeping " << job.regions.size() << " region(s) of job '"
                << job.job << "' from the snapshot for "
                << options.limits.max_keep_s << " s (dmg run --resume)";
    }
  }

  IdleJobs ListIdleJobs() {
    IdleJobs out;
    out.adoptions = adoptions.load();
    std::set<std::string> open;
    {
      std::lock_guard lock(pins_mu);
      for (const auto& [job, pin] : pins) open.insert(job);
    }
    std::shared_lock lock(owners_mu);
    std::set<std::string> running;
    for (const auto& [region, job] : owners) {
      if (open.contains(job)) running.insert(job);
    }
    out.running = static_cast<uint32_t>(running.size());
    for (const auto& [job, k] : kept) {
      if (k.orphans.empty() || open.contains(job)) continue;
      std::optional<Digest> verifier;
      if (auto v = verifiers.find(job); v != verifiers.end()) {
        verifier = v->second;
      }
      out.jobs.push_back({job, k.orphans, verifier});
    }
    return out;
  }

  // kSnapshot: {u8 flags} -> SnapshotSummary, written on the snapshot
  // thread while this connection's session waits (other sessions go on).
  asio::awaitable<absl::StatusOr<std::string>> HandleSnapshot(Conn& c,
                                                              wire::Reader& r) {
    uint8_t flags;
    if (!r.Get(&flags)) {
      co_return absl::InvalidArgumentError("malformed snapshot request");
    }
    if (!IsAdmin(c))
      co_return Deny(c, "taking a snapshot needs the admin role");
    if (!options.snapshot) {
      co_return absl::FailedPreconditionError(absl::StrFormat(
          "memory node %d takes no snapshots: it was started without "
          "--snapshot_dir",
          node_id.load()));
    }
    SetDeadline(c, 0, "a snapshot");  // however long it takes to write
    const bool jobs = (flags & wire::kSnapshotJobs) != 0;
    absl::StatusOr<wire::SnapshotSummary> taken = co_await asio::co_spawn(
        snapshots,
        [this,
         jobs]() -> asio::awaitable<absl::StatusOr<wire::SnapshotSummary>> {
          co_return options.snapshot(jobs);
        },
        asio::use_awaitable);
    if (!taken.ok()) co_return taken.status();
    std::string out;
    wire::Writer w(&out);
    wire::PutSnapshotSummary(w, *taken);
    co_return out;
  }

  // Frees kept regions whose job did not come back in time; runs every
  // second until Stop.
  asio::awaitable<void> Reap() {
    boost::system::error_code ec;
    while (!stopping.load()) {
      reaper.expires_after(std::chrono::seconds(1));
      co_await reaper.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      if (ec) break;
      std::vector<uint32_t> to_free;
      std::vector<std::string> gone;  // jobs no longer kept
      {
        std::unique_lock lock(owners_mu);
        const auto now = Clock::now();
        for (auto it = kept.begin(); it != kept.end();) {
          if (it->second.orphans.empty() || now < it->second.deadline) {
            ++it;
            continue;
          }
          DMG_INFO_LIMITED(keep_log)
              << "job '" << it->first << "' did not come back: freeing "
              << it->second.orphans.size() << " kept region(s)";
          for (uint32_t region : it->second.orphans) {
            owners.erase(region);
            to_free.push_back(region);
          }
          kept_regions -= it->second.orphans.size();
          gone.push_back(it->first);
          it = kept.erase(it);
        }
      }
      FreeRegions(to_free);
      ForgetIdleTokens(gone);
    }
  }
  void Unpin(Conn& c) {
    if (!c.pinned) return;
    std::lock_guard lock(pins_mu);
    auto it = pins.find(c.job);
    if (it != pins.end()) it->second.open.erase(c.seq);
    if (it != pins.end() && --it->second.connections == 0) {
      pins.erase(it);
      std::unique_lock owners_lock(owners_mu);
      if (!kept.contains(c.job)) verifiers.erase(c.job);
    }
    c.pinned = false;
  }

  absl::Status Replaced(const Conn& c) {
    return absl::AbortedError(absl::StrFormat(
        "memory node %d: the store job '%s' started on was replaced by a "
        "`dmg load --force`, or by a load before the job held state here, "
        "while the job ran; run the job again",
        node_id.load(), c.job));
  }

  absl::StatusOr<std::string> HandleCommit(Conn& c, wire::Reader& r) {
    uint8_t flags;
    if (!r.Get(&flags)) return absl::InvalidArgumentError("malformed commit");
    if (!IsAdmin(c)) return Deny(c, "committing a store needs the admin role");
    if (c.staging == 0) {
      return absl::FailedPreconditionError(
          "no staged store on this connection to commit");
    }
    // A job holds the store when it runs: it has state regions here. Bare
    // connections that said hello as a job hold nothing a load could
    // break (a pinned one that touches the store after a load is told its
    // store was replaced), and idle ones by someone holding the job key
    // must not keep the admin from loading.
    std::set<std::string> running;
    {
      std::shared_lock owners_lock(owners_mu);
      for (const auto& [region, job] : owners) running.insert(job);
    }
    std::unique_lock lock(pins_mu);
    const uint64_t current = target->store_generation();
    std::vector<std::string> users;
    for (const auto& [job, pin] : pins) {
      if (pin.generation == current && current > 0 && running.contains(job)) {
        users.push_back(job);
      }
    }
    if (!users.empty() && !(flags & wire::kCommitForce)) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "memory node %d: the store is in use by %d job(s) ('%s'): a load "
          "now would make them fail; wait for them, or `dmg load --force`",
          node_id.load(), users.size(), absl::StrJoin(users, "', '")));
    }
    if (flags & wire::kCommitCheckOnly) {
      std::string out;
      wire::Writer(&out).Put(current);
      return out;
    }
    if (options.deregister_region) options.deregister_region(kStoreRegion);
    if (absl::Status s = target->ServeCommitStore(c.staging); !s.ok()) {
      return s;
    }
    {
      std::unique_lock owners_lock(owners_mu);
      owners.erase(c.staging);
    }
    std::erase(c.owned, c.staging);
    c.staging = 0;
    load_id = c.staging_load_id;
    restored_snapshot = 0;  // a load's store, no longer the snapshot's
    node_id.store(c.staging_node_id);
    target->AssignNodeId(c.staging_node_id, "dmg load");
    if (options.on_commit) options.on_commit(c.staging_node_id, load_id);
    LOG(INFO) << "load " << absl::StrFormat("%016x", load_id) << " from "
              << c.peer << " committed: serving its store as memory node "
              << c.staging_node_id;
    if (!users.empty()) {
      LOG(WARNING) << "store replaced by a forced load from " << c.peer
                   << " while " << users.size() << " job(s) ran on it ('"
                   << absl::StrJoin(users, "', '") << "'): they fail";
    }
    std::string out;
    wire::Writer(&out).Put(target->store_generation());
    return out;
  }

  absl::StatusOr<std::string> HandleStoreInfo(Conn& c) {
    std::lock_guard lock(pins_mu);
    const uint64_t current = target->store_generation();
    if (c.pinned && c.generation != current) return Replaced(c);
    std::string out;
    wire::Writer w(&out);
    w.Put(current);
    w.Put(load_id);
    w.Put(restored_snapshot);
    return out;
  }

  // ------------------------------------------------------------- access

  absl::Status Deny(Conn& c, const std::string& what) {
    ++denied;
    DMG_LOG_LIMITED(denied_log)
        << "denied " << c.peer << " (" << RoleName(c.role) << ", job '" << c.job
        << "'): " << what;
    return absl::PermissionDeniedError(absl::StrFormat(
        "permission denied: %s (this connection is %s '%s')", what,
        c.role == Role::kAdmin ? "the admin" : "job", c.job));
  }
  static bool IsAdmin(const Conn& c) { return c.role == Role::kAdmin; }

  // A job's regions and `more` bytes stay within --job_quota_mb. (Two
  // allocations of one job at once may pass it by one of them.)
  absl::Status CheckQuota(Conn& c, uint64_t more) {
    const uint64_t quota = options.limits.job_quota_bytes;
    if (quota == 0) return absl::OkStatus();
    const std::vector<RegionInfo> regions = target->ServeList();
    uint64_t held = 0;
    {
      std::shared_lock lock(owners_mu);
      for (const RegionInfo& r : regions) {
        auto it = owners.find(r.id);
        if (it != owners.end() && it->second == c.job) held += r.length;
      }
    }
    if (held + more <= quota) return absl::OkStatus();
    return absl::ResourceExhaustedError(absl::StrFormat(
        "memory node %d: job '%s' holds %d bytes of regions here; %d more "
        "would pass its quota of %d (--job_quota_mb), kept so that one job "
        "cannot take the node from the others",
        node_id.load(), c.job, held, more, quota));
  }

  // A job touches the store read-only and only its own job's regions.
  absl::Status CheckBatch(Conn& c, const std::vector<wire::WireOp>& ops) {
    if (IsAdmin(c)) return absl::OkStatus();
    if (c.pinned && c.generation != target->store_generation()) {
      for (const wire::WireOp& op : ops) {
        if (op.region == kStoreRegion) return Replaced(c);
      }
    }
    std::shared_lock lock(owners_mu);
    uint32_t allowed = kStoreRegion;  // last region found to be the job's
    for (size_t i = 0; i < ops.size(); ++i) {
      const wire::WireOp& op = ops[i];
      if (op.region == kStoreRegion) {
        if (op.kind == static_cast<uint8_t>(OpKind::kRead)) continue;
        lock.unlock();
        return Deny(c, absl::StrFormat("operation %d of the batch writes the "
                                       "store, which is read-only to jobs",
                                       i));
      }
      if (op.region == allowed) continue;
      auto it = owners.find(op.region);
      if (it == owners.end() || it->second != c.job) {
        const bool foreign = it != owners.end();
        lock.unlock();
        return NoSuchRegion(c, op.region, foreign,
                            absl::StrFormat("operation %d of the batch", i));
      }
      allowed = op.region;
    }
    return absl::OkStatus();
  }

  absl::Status CheckOwner(Conn& c, uint32_t region, const char* what) {
    if (IsAdmin(c)) return absl::OkStatus();
    std::shared_lock lock(owners_mu);
    auto it = owners.find(region);
    if (it != owners.end() && it->second == c.job) return absl::OkStatus();
    const bool foreign = it != owners.end();
    lock.unlock();
    return NoSuchRegion(c, region, foreign, what);
  }

  // Another job's region is answered as one that does not exist (NotFound,
  // as for an unknown id), so a job cannot even learn which ids are taken;
  // the attempt is counted and logged.
  absl::Status NoSuchRegion(Conn& c, uint32_t region, bool foreign,
                            const std::string& what) {
    if (foreign) {
      ++denied;
      DMG_LOG_LIMITED(denied_log)
          << "denied " << c.peer << " (" << RoleName(c.role) << ", job '"
          << c.job << "'): " << what << ": region " << region
          << " belongs to another job";
    }
    return absl::NotFoundError(
        absl::StrFormat("memory node %d: %s: no region %d of job '%s'",
                        node_id.load(), what, region, c.job));
  }

  // ------------------------------------------------------------- requests

  absl::StatusOr<std::string> HandleHello(Conn& c, wire::Reader& r) {
    uint32_t version;
    uint8_t role;
    std::string job;
    Nonce nonce;
    if (!r.Get(&version)) {
      return absl::InvalidArgumentError("malformed hello");
    }
    if (version != wire::kProtocolVersion) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "protocol version %d, memory node speaks %d: use the same dmg "
          "release on compute and memory nodes",
          version, wire::kProtocolVersion));
    }
    if (!r.Get(&role) || !r.GetString(&job) || !r.Get(&nonce) ||
        (role != static_cast<uint8_t>(Role::kJob) &&
         role != static_cast<uint8_t>(Role::kAdmin)) ||
        job.size() > wire::kMaxJobName) {
      return absl::InvalidArgumentError("malformed hello");
    }
    if (c.hello) return absl::FailedPreconditionError("a second hello");
    if (c.admin_only && role != static_cast<uint8_t>(Role::kAdmin)) {
      ++admin_only_refusals;
      return absl::ResourceExhaustedError(absl::StrFormat(
          "memory node full: %d connections open, and the last %d of "
          "--max_connections=%d are kept for the admin; retry later",
          connections.load(), options.limits.admin_slots,
          options.limits.max_connections));
    }
    c.hello = true;
    c.role = static_cast<Role>(role);
    c.job = std::move(job);
    c.client_nonce = nonce;
    const bool auth_required = options.secret.has_value();
    if (auth_required) {
      c.server_nonce = NewNonce();
      c.waiting_for = "proof of the secret";
    } else if (absl::Status s = Authenticated(c); !s.ok()) {
      return s;
    }
    std::string out;
    wire::Writer w(&out);
    w.Put(wire::kProtocolVersion);
    w.Put(node_id.load());
    w.Put(static_cast<uint8_t>(auth_required));
    w.Put(c.server_nonce);
    w.Put(static_cast<uint32_t>(std::max(0, IdleTimeoutMs(c.role))));
    return out;
  }

  absl::StatusOr<std::string> HandleAuth(Conn& c, wire::Reader& r) {
    Digest proof, sealed;
    if (!c.hello || c.authenticated || !options.secret || !r.Get(&proof)) {
      return absl::FailedPreconditionError(
          "an authentication request out of place");
    }
    if (c.role == Role::kJob && !r.Get(&sealed)) {
      return absl::InvalidArgumentError(
          "a job's authentication carries its sealed job token");
    }
    absl::StatusOr<Digest> key = options.secret->KeyFor(c.role);
    if (!key.ok() ||
        !SameDigest(proof, ClientProof(*key, c.server_nonce, c.client_nonce,
                                       c.role, c.job))) {
      ++auth_failures;
      DMG_LOG_LIMITED(auth_log)
          << "authentication failed: " << c.peer << " (as " << RoleName(c.role)
          << " of job '" << c.job << "') does not hold the cluster secret";
      return absl::PermissionDeniedError(
          "authentication failed: wrong secret (or a job key asking for the "
          "admin role)");
    }
    if (c.role == Role::kJob) {
      Digest token =
          SealToken(*key, c.server_nonce, c.client_nonce, c.job, sealed);
      c.verifier = TokenVerifier(token, c.job);
      token.fill(0);
    }
    if (absl::Status s = Authenticated(c); !s.ok()) return s;
    VLOG(1) << c.peer << " authenticated as " << RoleName(c.role) << " of job '"
            << c.job << "'";
    std::string out;
    wire::Writer(&out).Put(
        ServerProof(*key, c.server_nonce, c.client_nonce, c.role, c.job));
    return out;
  }

  // Handles one control request; returns the reply payload (or an error).
  absl::StatusOr<std::string> Handle(Conn& c, const wire::FrameHeader& h,
                                     wire::Reader& r, bool* shutdown) {
    std::string out;
    wire::Writer w(&out);
    auto malformed = [&] {
      return absl::InvalidArgumentError(
          absl::StrFormat("malformed request of type %d", h.type));
    };
    switch (h.type) {
      case wire::kHello:
        return HandleHello(c, r);
      case wire::kAuth:
        return HandleAuth(c, r);
      case wire::kListRegions: {
        std::vector<RegionInfo> regions = target->ServeList();
        if (!IsAdmin(c)) {
          std::shared_lock lock(owners_mu);
          std::erase_if(regions, [&](const RegionInfo& region) {
            if (region.id == kStoreRegion) return false;
            auto it = owners.find(region.id);
            return it == owners.end() || it->second != c.job;
          });
        }
        w.Put(static_cast<uint32_t>(regions.size()));
        for (RegionInfo& region : regions) {
          if (options.register_region) {
            if (absl::Status s = options.register_region(&region); !s.ok()) {
              return s;
            }
          }
          wire::PutRegion(w, region);
        }
        return out;
      }
      case wire::kAllocate:
      case wire::kCreateStore: {
        uint64_t bytes;
        std::string name;
        uint32_t id = 0;
        uint64_t load = 0;
        if (h.type == wire::kCreateStore && !IsAdmin(c)) {
          return Deny(c, "creating the store needs the admin role");
        }
        if (!r.Get(&bytes)) return malformed();
        if (h.type == wire::kAllocate ? !r.GetString(&name)
                                      : !r.Get(&id) || !r.Get(&load)) {
          return malformed();
        }
        const bool staging = h.type == wire::kCreateStore;
        if (staging) {
          if (bytes == 0) return absl::InvalidArgumentError("empty store");
          // A new load on this connection replaces its earlier staging.
          if (c.staging != 0) {
            {
              std::unique_lock lock(owners_mu);
              owners.erase(c.staging);
            }
            std::erase(c.owned, c.staging);
            (void)target->ServeFree(c.staging);
            c.staging = 0;
          }
          name = "store.staging";
        }
        // An allocation may say what the region starts as (RegionFill).
        RegionFill fill;
        if (!staging && r.remaining() > 0 &&
            (!r.Get(&fill.width) || !r.Get(&fill.pattern) ||
             r.remaining() != 0)) {
          return malformed();
        }
        if (absl::Status s = CheckFill(fill, bytes, name); !s.ok()) return s;
        if (!IsAdmin(c)) {
          if (absl::Status s = CheckQuota(c, bytes); !s.ok()) return s;
        }
        absl::StatusOr<RegionInfo> region =
            fill.width == 0 ? target->ServeAllocate(bytes, name)
                            : target->ServeAllocateFilled(bytes, name, fill);
        if (!region.ok()) return region.status();
        c.owned.push_back(region->id);
        {
          std::unique_lock lock(owners_mu);
          owners[region->id] = staging ? kStagingOwner : c.job;
        }
        if (staging) {
          // Written over tcp only; registered with a NIC once committed.
          c.staging = region->id;
          c.staging_node_id = id;
          c.staging_load_id = load;
          LOG(INFO) << "load " << absl::StrFormat("%016x", load) << " from "
                    << c.peer << " stages " << bytes << " bytes";
          wire::PutRegion(w, *region);
          return out;
        }
        if (options.register_region) {
          if (absl::Status s = options.register_region(&*region); !s.ok()) {
            return s;
          }
        }
        wire::PutRegion(w, *region);
        return out;
      }
      case wire::kFree: {
        uint32_t region;
        if (!r.Get(&region)) return malformed();
        if (region == kStoreRegion && !IsAdmin(c)) {
          return Deny(c, "freeing the store needs the admin role");
        }
        if (region != kStoreRegion) {
          if (absl::Status s = CheckOwner(c, region, "free"); !s.ok()) {
            return s;
          }
        }
        if (options.deregister_region) options.deregister_region(region);
        if (absl::Status s = target->ServeFree(region); !s.ok()) return s;
        std::erase(c.owned, region);
        std::unique_lock lock(owners_mu);
        owners.erase(region);
        return out;
      }
      case wire::kCommitStore:
        return HandleCommit(c, r);
      case wire::kStoreInfo:
        return HandleStoreInfo(c);
      case wire::kPing:
        return std::string();
      case wire::kKeepJob:
        return HandleKeepJob(c, r);
      case wire::kRdmaTicket:
        if (!options.issue_rdma_ticket) {
          return absl::FailedPreconditionError(
              "this memory node serves no rdma (started with --transport=tcp)");
        }
        return options.issue_rdma_ticket();
      case wire::kShutdown:
        if (!IsAdmin(c))
          return Deny(c, "stopping the memory node needs the admin role");
        *shutdown = true;
        return out;
      case wire::kBatch:  // Session serves batches through HandleBatch
        return absl::InternalError("batch handed to Handle");
      default:
        return absl::InvalidArgumentError(
            absl::StrFormat("unknown request type %d", h.type));
    }
  }

  // Serves a batch into c.frame after its header's bytes: status is
  // returned, payload (READ bytes and atomics' old values) written in place,
  // so the reply leaves from the buffer the memory was read into; *size is
  // the reply's bytes, header included.
  absl::Status HandleBatch(Conn& c, wire::Reader& r, size_t* size) {
    uint32_t count;
    if (!r.Get(&count) || count > wire::kMaxOpsPerBatch) {
      return absl::InvalidArgumentError("malformed batch");
    }
    const char* ops_bytes = r.Take(uint64_t{count} * sizeof(wire::WireOp));
    if (ops_bytes == nullptr) {
      return absl::InvalidArgumentError("batch truncated");
    }
    std::vector<wire::WireOp> ops(count);
    if (count > 0) {  // (an empty vector's data() may be null)
      std::memcpy(ops.data(), ops_bytes, ops.size() * sizeof(wire::WireOp));
    }
    if (absl::Status s = CheckBatch(c, ops); !s.ok()) return s;
    // A forced load may replace the store while this batch is served (or
    // since CheckBatch looked): then its READs may hold new bytes, or fall
    // outside the new store, and the batch fails saying so. A pinned
    // connection's own generation is the one that counts.
    const uint64_t generation =
        c.pinned ? c.generation : target->store_generation();
    // Size the reply: status, then READ payloads and atomic results.
    uint64_t reply_bytes = 0;
    for (const wire::WireOp& op : ops) {
      if (op.kind == static_cast<uint8_t>(OpKind::kRead)) {
        reply_bytes += op.length;
      } else if (op.kind != static_cast<uint8_t>(OpKind::kWrite)) {
        reply_bytes += 8;
      }
    }
    if (reply_bytes > wire::kMaxPayload) {
      return absl::InvalidArgumentError("batch reply would be too large");
    }
    *size = sizeof(wire::FrameHeader) + reply_bytes;
    if (!Grow(c, c.frame, *size, 0)) return BusyError(*size);
    char* const data = c.frame.data() + sizeof(wire::FrameHeader);
    uint64_t at = 0;
    std::vector<Op> run;  // a run of READs or WRITEs
    for (uint32_t i = 0; i < count; ++i) {
      const wire::WireOp& op = ops[i];
      // A run of READs is served in one call (one lock, one count); on an
      // error the run is served again one by one below to name the READ.
      if (op.kind == static_cast<uint8_t>(OpKind::kRead)) {
        uint32_t end = i;
        uint64_t run_at = at;
        run.clear();
        while (end < count &&
               ops[end].kind == static_cast<uint8_t>(OpKind::kRead)) {
          Op r{};
          r.kind = OpKind::kRead;
          r.region = ops[end].region;
          r.offset = ops[end].offset;
          r.length = ops[end].length;
          r.local = data + run_at;
          run_at += ops[end].length;
          run.push_back(r);
          ++end;
        }
        if (target->ServeReads(run).ok()) {
          at = run_at;
          i = end - 1;
          continue;
        }
      }
      // Likewise a run of WRITEs (a commit's lines and logged claims: a
      // thousand small ones); on an error the payloads are taken again.
      if (op.kind == static_cast<uint8_t>(OpKind::kWrite) && i + 1 < count &&
          ops[i + 1].kind == static_cast<uint8_t>(OpKind::kWrite)) {
        const wire::Reader before = r;
        uint32_t end = i;
        run.clear();
        while (end < count &&
               ops[end].kind == static_cast<uint8_t>(OpKind::kWrite)) {
          const char* src = r.Take(ops[end].length);
          if (src == nullptr) break;
          Op w{};
          w.kind = OpKind::kWrite;
          w.region = ops[end].region;
          w.offset = ops[end].offset;
          w.length = ops[end].length;
          w.local = const_cast<char*>(src);
          run.push_back(w);
          ++end;
        }
        if (end == count ||
            ops[end].kind != static_cast<uint8_t>(OpKind::kWrite)) {
          if (target->ServeWrites(run).ok()) {
            i = end - 1;
            continue;
          }
        }
        r = before;
      }
      absl::Status s;
      switch (static_cast<OpKind>(op.kind)) {
        case OpKind::kRead:
          s = target->ServeRead(op.region, op.offset, data + at, op.length);
          at += op.length;
          break;
        case OpKind::kWrite: {
          const char* src = r.Take(op.length);
          s = src == nullptr
                  ? absl::InvalidArgumentError(
                        "WRITE payload missing from batch")
                  : target->ServeWrite(op.region, op.offset, src, op.length);
          break;
        }
        case OpKind::kCompareAndSwap:
        case OpKind::kFetchAndAdd: {
          absl::StatusOr<uint64_t> old =
              op.kind == static_cast<uint8_t>(OpKind::kCompareAndSwap)
                  ? target->ServeCompareAndSwap(op.region, op.offset,
                                                op.compare, op.operand)
                  : target->ServeFetchAndAdd(op.region, op.offset, op.operand);
          if (old.ok()) std::memcpy(data + at, &*old, 8);
          s = old.status();
          at += 8;
          break;
        }
        default:
          s = absl::InvalidArgumentError(
              absl::StrFormat("unknown operation kind %d", op.kind));
      }
      if (!s.ok()) {
        // The store replaced under the batch (its bounds changed): say so.
        if (c.pinned && op.region == kStoreRegion &&
            target->store_generation() != generation) {
          return Replaced(c);
        }
        DMG_LOG_LIMITED(rejected_log)
            << "rejected operation " << i << " of a batch from " << c.peer
            << ": " << s;
        return absl::Status(s.code(),
                            absl::StrFormat("operation %d of the batch: %s", i,
                                            std::string(s.message())));
      }
    }
    if (c.pinned && target->store_generation() != generation) {
      for (const wire::WireOp& op : ops) {
        if (op.region == kStoreRegion) return Replaced(c);
      }
    }
    return absl::OkStatus();
  }

  // The largest payload a frame of this type may announce on `c`.
  static uint32_t FrameCap(const Conn& c, uint16_t type) {
    if (!c.authenticated) return wire::kMaxHandshakePayload;
    return type == wire::kBatch ? wire::kMaxPayload : wire::kMaxControlPayload;
  }

  asio::awaitable<void> Session(std::shared_ptr<Conn> c) {
    boost::system::error_code ec;
    auto token = asio::redirect_error(asio::use_awaitable, ec);
    SetDeadline(*c, options.limits.handshake_timeout_ms, "hello");
    std::string error_frame;
    while (true) {
      wire::FrameHeader h;
      co_await asio::async_read(c->socket, asio::buffer(&h, sizeof(h)), token);
      if (ec) break;
      if (c->authenticated) {
        SetDeadline(*c, options.limits.frame_timeout_ms, "the rest of a frame");
      }
      if (h.magic != wire::kMagic || h.length > FrameCap(*c, h.type)) {
        DMG_LOG_LIMITED(frame_log)
            << "dropping " << c->peer << ": bad frame (magic 0x" << std::hex
            << h.magic << std::dec << ", type " << h.type << ", length "
            << h.length << (c->authenticated ? "" : ", before authentication")
            << ")";
        break;
      }
      // Nothing but the handshake before it is done (the payload, at most
      // kMaxHandshakePayload then, is read only so the error reply is not
      // lost to a reset).
      absl::Status status;
      bool close_after = false;
      if (!c->authenticated && h.type != wire::kHello &&
          h.type != wire::kAuth) {
        status = absl::PermissionDeniedError(
            "not authenticated: a connection begins with hello (and the "
            "proof of the cluster secret when the memory node has one)");
        DMG_LOG_LIMITED(auth_log)
            << "refusing request type " << h.type << " from " << c->peer
            << ": not authenticated";
        close_after = true;
      }
      // The payload, read in growing steps, each counted against the cap
      // before it is allocated: a header announcing 256 MiB costs nothing
      // until the bytes come.
      size_t got = 0;
      bool busy = false;
      while (!busy && got < h.length) {
        const size_t step =
            std::min<size_t>(h.length - got, std::max<size_t>(64u << 10, got));
        if (got + step > c->payload.capacity()) {
          if (!Grow(*c, c->payload, got + step, got)) {
            c->frame.Release(shelf);  // not needed until the reply; again
            Account(*c, c->payload.capacity());
            if (!Grow(*c, c->payload, got + step, got)) {
              status = BusyError(h.length - got);
              close_after = true;  // the rest of the payload is unread
              busy = true;
              break;
            }
          }
        }
        co_await asio::async_read(
            c->socket, asio::buffer(c->payload.data() + got, step), token);
        if (ec) break;
        got += step;
      }
      if (ec) break;
      bool shutdown = false;
      size_t reply_size = sizeof(wire::FrameHeader);
      if (status.ok()) {
        wire::Reader r(c->payload.data(), h.length);
        if (h.type == wire::kBatch) {
          status = HandleBatch(*c, r, &reply_size);
        } else {
          absl::StatusOr<std::string> reply;
          if (h.type == wire::kSnapshot) {
            reply = co_await HandleSnapshot(*c, r);
          } else {
            reply = Handle(*c, h, r, &shutdown);
          }
          status = reply.status();
          if (reply.ok()) {
            reply_size += reply->size();
            if (Grow(*c, c->frame, reply_size, 0)) {
              std::memcpy(c->frame.data() + sizeof(wire::FrameHeader),
                          reply->data(), reply->size());
            } else {
              status = BusyError(reply_size);
            }
          }
        }
        if (!status.ok() && (h.type == wire::kHello || h.type == wire::kAuth)) {
          close_after = true;  // a failed handshake ends the connection
        }
      }
      wire::FrameHeader rh{wire::kMagic,
                           static_cast<uint16_t>(h.type | wire::kReplyBit), 0,
                           0, h.request_id};
      // Error replies are small and leave from a buffer of their own.
      char* out = c->frame.data();
      if (!status.ok()) {
        rh.type |= wire::kErrorBit;
        error_frame.assign(sizeof(wire::FrameHeader), '\0');
        wire::Writer w(&error_frame);
        wire::PutStatus(w, status);
        out = error_frame.data();
        reply_size = error_frame.size();
        if (h.type != wire::kBatch &&
            status.code() != absl::StatusCode::kPermissionDenied) {
          DMG_LOG_LIMITED(failed_log)
              << "request from " << c->peer << " failed: " << status;
        }
      }
      rh.length = static_cast<uint32_t>(reply_size - sizeof(rh));
      std::memcpy(out, &rh, sizeof(rh));
      if (!c->authenticated || close_after) {
        // (the handshake deadline keeps running)
      } else {
        SetDeadline(*c, options.limits.frame_timeout_ms,
                    "the reply to be taken");
      }
      co_await asio::async_write(c->socket, asio::buffer(out, reply_size),
                                 token);
      if (ec || close_after) break;
      // Between requests a connection keeps no buffer of 64 KiB or more:
      // they wait on the shelf, warm, for its next request or another
      // connection's. So idle connections hold a few KiB each and cannot
      // fill --max_buffer_mb (31 idle ones holding 64 MiB each did).
      if (c->frame.capacity() >= BufferShelf::kMinClassBytes) {
        c->frame.Release(shelf);
      }
      if (c->payload.capacity() >= BufferShelf::kMinClassBytes) {
        c->payload.Release(shelf);
      }
      Account(*c, c->payload.capacity() + c->frame.capacity());
      SetWaitingDeadline(*c);
      if (shutdown) {
        LOG(INFO) << "shutdown requested by " << c->peer;
        RequestStop();
      }
    }
    c->done = true;
    LeaveHandshake(*c);
    c->timer.cancel();
    boost::system::error_code ignored;
    c->socket.close(ignored);
    c->payload.Release(shelf);
    c->frame.Release(shelf);
    Account(*c, 0);
    std::vector<uint32_t> to_free;
    size_t kept_now = 0;
    {
      std::unique_lock lock(owners_mu);
      auto k = c->role == Role::kJob ? kept.find(c->job) : kept.end();
      for (uint32_t region : c->owned) {
        if (!owners.contains(region)) continue;  // freed already
        if (k != kept.end()) {
          k->second.orphans.push_back(region);
          ++kept_now;
        } else {
          owners.erase(region);
          to_free.push_back(region);
        }
      }
      if (kept_now > 0) {
        k->second.deadline = Clock::now() + k->second.keep;
        kept_regions += kept_now;
      }
    }
    FreeRegions(to_free);
    // Only now does the job stop counting this connection (kKeepJob's
    // `others`): a process that sees none left older than its own finds
    // their regions kept or gone, never still owned.
    Unpin(*c);
    if (c->staging != 0) {
      LOG(INFO) << "load " << absl::StrFormat("%016x", c->staging_load_id)
                << " from " << c->peer
                << " ended before its commit: its staging region is freed, "
                   "the store this node had still serves";
    }
    if (!to_free.empty()) {
      DMG_INFO_LIMITED(close_log) << c->peer << " disconnected; freed its "
                                  << to_free.size() << " region(s)";
    }
    if (kept_now > 0) {
      DMG_INFO_LIMITED(close_log)
          << c->peer << " disconnected; kept its " << kept_now
          << " region(s) for job '" << c->job << "' (kKeepJob)";
    }
    --connections;
    std::lock_guard lock(mu);
    conns.erase(c);
    if (auto it = per_peer.find(c->address);
        it != per_peer.end() && --it->second == 0) {
      per_peer.erase(it);
    }
  }

  // Closes a connection whose deadline passed: a handshake never finished,
  // a frame never completed, a reply never taken, or (with an idle bound)
  // nothing said for too long. Checks a few times per shortest bound.
  asio::awaitable<void> Watchdog(std::shared_ptr<Conn> c) {
    const TcpServerLimits& l = options.limits;
    int shortest = 1000;
    for (int ms : {l.handshake_timeout_ms, l.frame_timeout_ms,
                   l.idle_timeout_ms, l.job_idle_timeout_ms}) {
      if (ms > 0) shortest = std::min(shortest, ms);
    }
    const auto tick = std::chrono::milliseconds(std::max(10, shortest / 4));
    boost::system::error_code ec;
    while (!c->done) {
      c->timer.expires_after(tick);
      co_await c->timer.async_wait(
          asio::redirect_error(asio::use_awaitable, ec));
      if (c->done) break;
      if (Clock::now() >= c->deadline) {
        ++timeouts;
        DMG_LOG_LIMITED(timeout_log)
            << "closing " << c->peer << ": no " << c->waiting_for << " within "
            << c->waiting_ms << " ms";
        c->socket.close(ec);  // the session's pending operation fails
        break;
      }
    }
  }

  // Takes c in, or says why not (--max_connections, one address's share).
  // When c would pass max_handshakes, the oldest connection still in its
  // handshake is closed to make room; in the admin's slots c may only say
  // hello as the admin.
  std::string Admit(const std::shared_ptr<Conn>& c) {
    const TcpServerLimits& l = options.limits;
    std::shared_ptr<Conn> evict;
    {
      std::lock_guard lock(mu);
      const int open = connections.load();
      if (open >= l.max_connections) {
        return absl::StrFormat("%d connections open (--max_connections=%d)",
                               open, l.max_connections);
      }
      auto [peer, added] = per_peer.try_emplace(c->address, 0);
      if (l.max_peer_connections > 0 &&
          peer->second >= l.max_peer_connections) {
        return absl::StrFormat(
            "%d connections open from %s (--max_peer_connections=%d)",
            peer->second, c->address, l.max_peer_connections);
      }
      ++peer->second;
      ++connections;
      conns.insert(c);
      c->admin_only = open >= l.max_connections - l.admin_slots;
      // Entries through their handshake (or gone) leave from the front.
      while (!handshaking.empty()) {
        std::shared_ptr<Conn> old = handshaking.front().lock();
        if (old == nullptr || !old->in_handshake.load()) {
          handshaking.pop_front();
          continue;
        }
        if (handshakes.load() < l.max_handshakes) break;
        handshaking.pop_front();
        evict = std::move(old);
        break;
      }
      ++handshakes;
      handshaking.push_back(c);
    }
    if (evict != nullptr) {
      ++evicted;
      LeaveHandshake(*evict);
      DMG_LOG_LIMITED(evict_log)
          << "closing " << evict->peer << ": still in its handshake while "
          << l.max_handshakes << " others are (--max_handshakes)";
      asio::post(evict->socket.get_executor(), [evict] {
        boost::system::error_code e;
        evict->socket.close(e);
      });
    }
    return "";
  }

  // Tells a refused connection why (an error reply to the hello it is about
  // to send), then closes it. At most kMaxRefusing wait at once to let the
  // reply be read; past that a refused connection is closed at once.
  static constexpr int kMaxRefusing = 64;
  std::atomic<int> refusing{0};
  asio::awaitable<void> Refuse(std::shared_ptr<Conn> c, std::string why) {
    boost::system::error_code ec;
    if (refusing.fetch_add(1) < kMaxRefusing) {
      std::string payload;
      wire::Writer w(&payload);
      wire::PutStatus(w, absl::UnavailableError(
                             "memory node refused the connection: " + why));
      wire::FrameHeader h{wire::kMagic,
                          static_cast<uint16_t>(wire::kHello | wire::kReplyBit |
                                                wire::kErrorBit),
                          0, static_cast<uint32_t>(payload.size()), 0};
      std::string frame(reinterpret_cast<const char*>(&h), sizeof(h));
      frame += payload;
      co_await asio::async_write(c->socket, asio::buffer(frame),
                                 asio::redirect_error(asio::use_awaitable, ec));
      c->socket.shutdown(tcp::socket::shutdown_send, ec);
      // A close with the client's hello unread would reset the connection
      // and could take the reply with it: let the hello arrive first.
      asio::steady_timer t(c->socket.get_executor());
      t.expires_after(std::chrono::milliseconds(50));
      co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
    --refusing;
    c->socket.close(ec);
  }

  asio::awaitable<void> Accept() {
    boost::system::error_code ec;
    while (true) {
      auto c = std::make_shared<Conn>(asio::make_strand(io));
      co_await acceptor.async_accept(
          c->socket, asio::redirect_error(asio::use_awaitable, ec));
      if (ec) {
        if (ec == asio::error::operation_aborted || !acceptor.is_open()) break;
        DMG_LOG_LIMITED(accept_log) << "accept failed: " << ec.message();
        // Out of descriptors, say: wait instead of spinning on it.
        asio::steady_timer pause(io, std::chrono::milliseconds(100));
        co_await pause.async_wait(
            asio::redirect_error(asio::use_awaitable, ec));
        continue;
      }
      {
        boost::system::error_code e2;
        auto ep = c->socket.remote_endpoint(e2);
        c->address = e2 ? "?" : ep.address().to_string();
        c->peer = e2 ? "?" : c->address + ":" + std::to_string(ep.port());
      }
      if (std::string why = Admit(c); !why.empty()) {
        ++refused;
        DMG_LOG_LIMITED(refuse_log) << "refusing " << c->peer << ": " << why;
        asio::co_spawn(c->socket.get_executor(), Refuse(c, why),
                       asio::detached);
        continue;
      }
      c->socket.set_option(tcp::no_delay(true), ec);
      asio::co_spawn(c->socket.get_executor(), Session(c), asio::detached);
      asio::co_spawn(c->socket.get_executor(), Watchdog(c), asio::detached);
    }
  }
};

TcpServer::TcpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

absl::StatusOr<std::unique_ptr<TcpServer>> TcpServer::Start(
    MemoryTarget* target, const std::string& host, uint16_t port,
    TcpServerOptions options) {
  auto impl = std::make_unique<Impl>();
  impl->target = target;
  impl->options = std::move(options);
  impl->shelf.SetLimit(static_cast<size_t>(std::min<uint64_t>(
      impl->options.limits.max_buffer_bytes / 4, uint64_t{64} << 20)));
  impl->node_id.store(impl->options.node_id);
  impl->load_id = impl->options.initial_load_id;
  impl->restored_snapshot = impl->options.restored_snapshot;
  if (impl->options.secret && !impl->options.secret->admin()) {
    return absl::InvalidArgumentError(
        "a memory node needs the cluster secret, not a job-only key");
  }
  boost::system::error_code ec;
  asio::ip::address address = asio::ip::make_address(host, ec);
  if (ec) {
    tcp::resolver resolver(impl->io);
    auto results = resolver.resolve(host, std::to_string(port), ec);
    if (ec || results.empty()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "cannot resolve listen host '%s': %s", host, ec.message()));
    }
    address = results.begin()->endpoint().address();
  }
  tcp::endpoint endpoint(address, port);
  impl->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl->acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) impl->acceptor.bind(endpoint, ec);
  if (!ec) impl->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError(absl::StrFormat("cannot listen on %s:%d: %s",
                                                  host, port, ec.message()));
  }
  if (!impl->options.secret && !address.is_loopback()) {
    LOG(WARNING) << "listening on " << host << ":" << port
                 << " with no secret: anyone who reaches this port may read "
                    "and write every region and stop this memory node";
  }
  Impl* p = impl.get();
  p->RestoreJobs();
  asio::co_spawn(p->control, p->Accept(), asio::detached);
  asio::co_spawn(p->control, p->Reap(), asio::detached);
  for (int i = 0; i < std::max(1, p->options.io_threads); ++i) {
    p->threads.emplace_back([p] { p->io.run(); });
  }
  return std::unique_ptr<TcpServer>(new TcpServer(std::move(impl)));
}

uint16_t TcpServer::port() const {
  boost::system::error_code ec;
  return impl_->acceptor.local_endpoint(ec).port();
}

TcpServerStats TcpServer::stats() const {
  TcpServerStats s;
  s.connections = impl_->connections.load();
  s.buffered_bytes = impl_->buffered.load();
  s.max_buffered_bytes = impl_->max_buffered.load();
  s.reused_buffers = impl_->shelf.reused();
  s.evicted_handshakes = impl_->evicted.load();
  s.admin_only_refusals = impl_->admin_only_refusals.load();
  s.token_refusals = impl_->token_refusals.load();
  s.shelved_bytes = impl_->shelf.kept_bytes();
  s.refused_connections = impl_->refused.load();
  s.auth_failures = impl_->auth_failures.load();
  s.timeouts = impl_->timeouts.load();
  s.denied_requests = impl_->denied.load();
  s.kept_regions = impl_->kept_regions.load();
  return s;
}

IdleJobs TcpServer::idle_jobs() const { return impl_->ListIdleJobs(); }

uint64_t TcpServer::adoptions() const { return impl_->adoptions.load(); }

void TcpServer::Wait() {
  std::unique_lock lock(impl_->mu);
  impl_->stopped_cv.wait(lock, [&] { return impl_->stopped; });
}

void TcpServer::Stop() {
  if (impl_->threads.empty()) return;
  impl_->stopping.store(true);
  asio::post(impl_->control, [p = impl_.get()] {
    boost::system::error_code ec;
    p->acceptor.close(ec);
    p->reaper.cancel();
    std::lock_guard lock(p->mu);
    for (const auto& c : p->conns) {
      asio::post(c->socket.get_executor(), [c] {
        boost::system::error_code e;
        c->socket.close(e);
        c->timer.cancel();
      });
    }
  });
  // Sessions notice their closed sockets and end; then the context runs dry.
  for (auto& t : impl_->threads) t.join();
  impl_->threads.clear();
  impl_->snapshots.join();
  impl_->RequestStop();
}

TcpServer::~TcpServer() { Stop(); }

}  // namespace dmg::transport

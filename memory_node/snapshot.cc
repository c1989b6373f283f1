#include "memory_node/snapshot.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "glog/logging.h"
#include "memory_node/memory_node.h"
#include "store/block_format.h"

namespace dmg::memory_node {
namespace {

constexpr char kMagic[8] = {'D', 'M', 'G', 'S', 'N', 'A', 'P', '1'};
constexpr char kEndMagic[8] = {'D', 'M', 'G', 'S', 'E', 'N', 'D', '1'};
// Written; 1 (no job section) and 2 (no job tokens) still read.
constexpr uint32_t kVersion = 3;
constexpr size_t kChunk = 1 << 20;

#pragma pack(push, 1)
struct Header {
  char magic[8];
  uint32_t version;
  uint32_t node_id;
  uint64_t load_id;
  uint64_t seq;
  uint64_t store_bytes;
  uint32_t store_crc;
  uint32_t header_crc;  // of the bytes before it
};
struct JobsHeader {
  uint32_t count;
  uint32_t count_crc;  // of count
};
struct EntryHeader {
  uint32_t job_len;
  uint32_t name_len;
  uint64_t bytes;
  uint32_t data_crc;   // of the job's name, the region's name and its bytes
  uint32_t entry_crc;  // of the bytes before it
};
struct Trailer {
  char magic[8];
  uint64_t seq;
  uint32_t trailer_crc;  // of the bytes before it
};
#pragma pack(pop)

template <typename T>
uint32_t CrcBefore(const T& t, size_t crc_offset) {
  return store::Crc32(
      std::span(reinterpret_cast<const std::byte*>(&t), crc_offset));
}

// A job region's data CRC: its job's name, its name, then its bytes.
// From version 3, the job's token block (TokenBlock) between the names
// and the bytes.
uint32_t EntryCrc(std::string_view job, std::string_view name,
                  std::string_view token_block,
                  std::span<const std::byte> bytes) {
  uLong crc = crc32_z(0L, Z_NULL, 0);
  crc = crc32_z(crc, reinterpret_cast<const Bytef*>(job.data()), job.size());
  crc = crc32_z(crc, reinterpret_cast<const Bytef*>(name.data()), name.size());
  crc = crc32_z(crc, reinterpret_cast<const Bytef*>(token_block.data()),
                token_block.size());
  crc =
      crc32_z(crc, reinterpret_cast<const Bytef*>(bytes.data()), bytes.size());
  return static_cast<uint32_t>(crc);
}

// A job region's token block (version 3): {u8 present, 32-byte verifier of
// the job's token (transport/auth.h)}.
constexpr size_t kTokenBlockBytes = 1 + sizeof(transport::Digest);
std::string TokenBlock(const std::optional<transport::Digest>& verifier) {
  std::string block(kTokenBlockBytes, '\0');
  if (verifier) {
    block[0] = 1;
    std::memcpy(block.data() + 1, verifier->data(), verifier->size());
  }
  return block;
}

absl::Status Errno(const std::string& path, const char* what) {
  return absl::InternalError(
      absl::StrFormat("%s: %s: %s", path, what, std::strerror(errno)));
}

absl::Status Damaged(const std::string& name, const std::string& what) {
  return absl::DataLossError(
      absl::StrFormat("%s: not a complete snapshot: %s", name, what));
}

// "snapshot-SEQ.dmgsnap" -> SEQ (0: not a snapshot's name).
uint64_t SeqOf(const std::string& file) {
  constexpr std::string_view kPrefix = "snapshot-", kSuffix = ".dmgsnap";
  if (file.size() <= kPrefix.size() + kSuffix.size() ||
      file.compare(0, kPrefix.size(), kPrefix) != 0 ||
      file.compare(file.size() - kSuffix.size(), kSuffix.size(), kSuffix) !=
          0) {
    return 0;
  }
  const std::string digits = file.substr(
      kPrefix.size(), file.size() - kPrefix.size() - kSuffix.size());
  uint64_t seq = 0;
  if (digits.find_first_not_of("0123456789") != std::string::npos ||
      !absl::SimpleAtoi(digits, &seq)) {
    return 0;
  }
  return seq;
}

std::string NameOf(uint64_t seq) {
  return absl::StrFormat("snapshot-%020d.dmgsnap", seq);
}

bool WriteAll(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

void FsyncDir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

}  // namespace

absl::StatusOr<Snapshot> ReadSnapshot(std::FILE* f, uint64_t size,
                                      const std::string& name) {
  Header h;
  if (size < sizeof(Header) + sizeof(Trailer) ||
      std::fread(&h, sizeof h, 1, f) != 1) {
    return Damaged(name, absl::StrFormat("%d bytes is too short", size));
  }
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0) {
    return Damaged(name, "bad magic");
  }
  if (CrcBefore(h, offsetof(Header, header_crc)) != h.header_crc) {
    return Damaged(name, "header checksum mismatch");
  }
  if (h.version != 1 && h.version != kVersion) {
    return Damaged(name, absl::StrFormat("version %d (this dmg reads 1 to %d)",
                                         h.version, kVersion));
  }
  // What lies between the header and the trailer: the store, then (from
  // version 2) the job section.
  const uint64_t body = size - sizeof(Header) - sizeof(Trailer);
  if (h.version == 1
          ? h.store_bytes != body
          : h.store_bytes > body || body - h.store_bytes < sizeof(JobsHeader)) {
    return Damaged(name, absl::StrFormat("header says %d store bytes, the "
                                         "file holds %d between its header "
                                         "and trailer",
                                         h.store_bytes, body));
  }
  Snapshot s;
  s.node_id = h.node_id;
  s.load_id = h.load_id;
  s.seq = h.seq;
  try {
    s.store = AlignedBuffer(h.store_bytes, AlignedBuffer::Init::kUninitialized);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "%s: cannot allocate %d bytes for its store", name, h.store_bytes));
  }
  if (h.store_bytes > 0 &&
      std::fread(s.store.data(), 1, h.store_bytes, f) != h.store_bytes) {
    return Damaged(name, "store bytes cut short");
  }
  if (store::Crc32(s.store.span()) != h.store_crc) {
    return Damaged(name, "store checksum mismatch");
  }
  uint64_t left = body - h.store_bytes;
  if (h.version >= 2) {
    JobsHeader jh;
    if (std::fread(&jh, sizeof jh, 1, f) != 1 ||
        CrcBefore(jh, offsetof(JobsHeader, count_crc)) != jh.count_crc) {
      return Damaged(name, "bad job section header");
    }
    left -= sizeof jh;
    if (jh.count > left / sizeof(EntryHeader)) {
      return Damaged(name, absl::StrFormat("%d job regions cannot fit in %d "
                                           "bytes",
                                           jh.count, left));
    }
    for (uint32_t i = 0; i < jh.count; ++i) {
      EntryHeader e;
      if (left < sizeof e || std::fread(&e, sizeof e, 1, f) != 1 ||
          CrcBefore(e, offsetof(EntryHeader, entry_crc)) != e.entry_crc) {
        return Damaged(name, absl::StrFormat("bad header of job region %d", i));
      }
      left -= sizeof e;
      const size_t block_bytes = h.version >= 3 ? kTokenBlockBytes : 0;
      if (e.job_len > kMaxSnapshotNameBytes ||
          e.name_len > kMaxSnapshotNameBytes ||
          uint64_t{e.job_len} + e.name_len + block_bytes > left ||
          e.bytes > left - e.job_len - e.name_len - block_bytes) {
        return Damaged(
            name, absl::StrFormat("job region %d does not fit the file", i));
      }
      JobRegion region;
      region.job.resize(e.job_len);
      region.name.resize(e.name_len);
      try {
        region.bytes =
            AlignedBuffer(e.bytes, AlignedBuffer::Init::kUninitialized);
      } catch (const std::bad_alloc&) {
        return absl::ResourceExhaustedError(
            absl::StrFormat("%s: cannot allocate %d bytes for job region %d",
                            name, e.bytes, i));
      }
      std::string block(block_bytes, '\0');
      if ((e.job_len > 0 &&
           std::fread(region.job.data(), 1, e.job_len, f) != e.job_len) ||
          (e.name_len > 0 &&
           std::fread(region.name.data(), 1, e.name_len, f) != e.name_len) ||
          (block_bytes > 0 &&
           std::fread(block.data(), 1, block_bytes, f) != block_bytes) ||
          (e.bytes > 0 &&
           std::fread(region.bytes.data(), 1, e.bytes, f) != e.bytes)) {
        return Damaged(name, absl::StrFormat("job region %d cut short", i));
      }
      left -= e.job_len + e.name_len + block_bytes + e.bytes;
      if (EntryCrc(region.job, region.name, block, region.bytes.span()) !=
          e.data_crc) {
        return Damaged(name,
                       absl::StrFormat("job region %d checksum mismatch", i));
      }
      if (block_bytes > 0 && block[0] > 1) {
        return Damaged(name,
                       absl::StrFormat("job region %d: bad token block", i));
      }
      if (block_bytes > 0 && block[0] == 1) {
        region.verifier.emplace();
        std::memcpy(region.verifier->data(), block.data() + 1,
                    region.verifier->size());
      }
      s.jobs.push_back(std::move(region));
    }
  }
  if (left != 0) {
    return Damaged(name,
                   absl::StrFormat("%d stray bytes before the trailer", left));
  }
  Trailer t;
  if (std::fread(&t, sizeof t, 1, f) != 1 ||
      std::memcmp(t.magic, kEndMagic, sizeof kEndMagic) != 0 ||
      CrcBefore(t, offsetof(Trailer, trailer_crc)) != t.trailer_crc ||
      t.seq != h.seq) {
    return Damaged(name, "bad trailer");
  }
  return s;
}

SnapshotDir::SnapshotDir(std::string dir, int lock_fd)
    : dir_(std::move(dir)), lock_fd_(lock_fd) {}

SnapshotDir::~SnapshotDir() {
  if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the flock
}

absl::StatusOr<std::unique_ptr<SnapshotDir>> SnapshotDir::Open(
    const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--snapshot_dir=%s: cannot create or use it as a folder%s", dir,
        ec ? ": " + ec.message() : ""));
  }
  const std::string lock = dir + "/LOCK";
  const int fd =
      ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return Errno(lock, "cannot open");
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    return absl::FailedPreconditionError(absl::StrFormat(
        "--snapshot_dir=%s is in use by another memory node (%s is locked)",
        dir, lock));
  }
  std::unique_ptr<SnapshotDir> d(new SnapshotDir(dir, fd));
  // Temporary files of writers that died (kill -9 during a snapshot).
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string file = entry.path().filename().string();
    const size_t tmp = file.find(".dmgsnap.tmp.");
    if (tmp == std::string::npos) continue;
    const std::string digits = file.substr(tmp + 13);
    if (digits.empty() || digits.size() > 9 ||
        digits.find_first_not_of("0123456789") != std::string::npos) {
      continue;
    }
    const pid_t pid = static_cast<pid_t>(std::stol(digits));
    if (pid != ::getpid() && ::kill(pid, 0) != 0 && errno == ESRCH) {
      LOG(INFO) << "removing " << entry.path().string()
                << ": an unfinished snapshot of a process that is gone";
      std::filesystem::remove(entry.path(), ec);
    }
  }
  for (const std::string& file : d->List()) {
    d->next_seq_ =
        std::max(d->next_seq_,
                 SeqOf(std::filesystem::path(file).filename().string()) + 1);
  }
  return d;
}

std::vector<std::string> SnapshotDir::List() const {
  std::vector<std::pair<uint64_t, std::string>> found;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
    const std::string file = entry.path().filename().string();
    if (uint64_t seq = SeqOf(file); seq > 0 && entry.is_regular_file(ec)) {
      found.emplace_back(seq, file);
    }
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& [seq, file] : found) out.push_back(dir_ + "/" + file);
  return out;
}

std::optional<Snapshot> SnapshotDir::LoadNewest() {
  std::vector<std::string> files = List();
  for (auto it = files.rbegin(); it != files.rend(); ++it) {
    std::FILE* f = std::fopen(it->c_str(), "rb");
    if (f == nullptr) {
      LOG(WARNING) << *it << ": cannot open: " << std::strerror(errno);
      continue;
    }
    struct stat st;
    absl::StatusOr<Snapshot> s =
        ::fstat(fileno(f), &st) == 0
            ? ReadSnapshot(f, static_cast<uint64_t>(st.st_size), *it)
            : Errno(*it, "cannot stat");
    std::fclose(f);
    if (s.ok()) {
      LOG(INFO) << "loaded snapshot " << *it << " (" << s->store.size()
                << " store bytes, node " << s->node_id << ")";
      return *std::move(s);
    }
    LOG(WARNING) << "skipping " << s.status().message();
  }
  return std::nullopt;
}

absl::StatusOr<uint64_t> SnapshotDir::Write(
    uint32_t node_id, uint64_t load_id, std::span<const std::byte> store,
    std::span<const JobRegionRef> jobs,
    const std::function<bool()>& cancelled) {
  const uint64_t seq = next_seq_++;
  const std::string path = dir_ + "/" + NameOf(seq);
  const std::string tmp = absl::StrFormat("%s.tmp.%d", path, ::getpid());
  // Test hook: a pause after each chunk, so a test can kill -9 the daemon
  // while a snapshot is being written.
  int delay_ms = 0;
  if (const char* d = std::getenv("DMG_TEST_SNAPSHOT_CHUNK_DELAY_MS")) {
    delay_ms = std::atoi(d);
  }
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.version = kVersion;
  h.node_id = node_id;
  h.load_id = load_id;
  h.seq = seq;
  h.store_bytes = store.size();
  h.store_crc = store::Crc32(store);
  h.header_crc = CrcBefore(h, offsetof(Header, header_crc));
  Trailer t{};
  std::memcpy(t.magic, kEndMagic, sizeof kEndMagic);
  t.seq = seq;
  t.trailer_crc = CrcBefore(t, offsetof(Trailer, trailer_crc));

  const int fd = ::open(
      tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return Errno(tmp, "cannot create");
  auto fail = [&](absl::Status s) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return s;
  };
  // Writes `bytes` in chunks, asking `cancelled` before each one.
  auto write_chunks = [&](std::span<const std::byte> bytes) -> absl::Status {
    for (size_t done = 0; done < bytes.size();) {
      if (cancelled && cancelled()) {
        return absl::CancelledError("snapshot abandoned");
      }
      const size_t n = std::min(kChunk, bytes.size() - done);
      if (!WriteAll(fd, bytes.data() + done, n)) {
        return Errno(tmp, "write failed");
      }
      done += n;
      if (delay_ms > 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
      }
    }
    return absl::OkStatus();
  };
  if (!WriteAll(fd, &h, sizeof h)) return fail(Errno(tmp, "write failed"));
  if (absl::Status s = write_chunks(store); !s.ok()) return fail(s);
  JobsHeader jh{static_cast<uint32_t>(jobs.size()), 0};
  jh.count_crc = CrcBefore(jh, offsetof(JobsHeader, count_crc));
  if (!WriteAll(fd, &jh, sizeof jh)) return fail(Errno(tmp, "write failed"));
  for (const JobRegionRef& region : jobs) {
    if (region.job.size() > kMaxSnapshotNameBytes ||
        region.name.size() > kMaxSnapshotNameBytes) {
      return fail(absl::InvalidArgumentError(
          absl::StrFormat("job '%s' region '%s': a name over %d bytes",
                          region.job.substr(0, 64), region.name.substr(0, 64),
                          kMaxSnapshotNameBytes)));
    }
    const std::span<const std::byte> bytes = region.bytes->span();
    const std::string block = TokenBlock(region.verifier);
    EntryHeader e{static_cast<uint32_t>(region.job.size()),
                  static_cast<uint32_t>(region.name.size()), bytes.size(),
                  EntryCrc(region.job, region.name, block, bytes), 0};
    e.entry_crc = CrcBefore(e, offsetof(EntryHeader, entry_crc));
    if (!WriteAll(fd, &e, sizeof e) ||
        !WriteAll(fd, region.job.data(), region.job.size()) ||
        !WriteAll(fd, region.name.data(), region.name.size()) ||
        !WriteAll(fd, block.data(), block.size())) {
      return fail(Errno(tmp, "write failed"));
    }
    if (absl::Status s = write_chunks(bytes); !s.ok()) return fail(s);
  }
  if (!WriteAll(fd, &t, sizeof t)) return fail(Errno(tmp, "write failed"));
  if (::fsync(fd) != 0) return fail(Errno(tmp, "fsync failed"));
  // Last word before it replaces the previous one (job state that changed
  // while it was copied, a newer request).
  if (cancelled && cancelled()) {
    return fail(absl::CancelledError("snapshot abandoned"));
  }
  if (::close(fd) != 0) {
    ::unlink(tmp.c_str());
    return Errno(tmp, "close failed");
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    absl::Status s = Errno(path, "rename failed");
    ::unlink(tmp.c_str());
    return s;
  }
  FsyncDir(dir_);
  // Only now that the new one is durable do the older ones go.
  std::error_code ec;
  for (const std::string& file : List()) {
    if (file != path) std::filesystem::remove(file, ec);
  }
  FsyncDir(dir_);
  LOG(INFO) << "snapshot " << path << " written (" << store.size()
            << " store bytes, " << jobs.size() << " job region(s))";
  return seq;
}

Snapshotter::Snapshotter(std::unique_ptr<SnapshotDir> dir, MemoryNode* node,
                         JobStateFn job_state)
    : dir_(std::move(dir)),
      node_(node),
      job_state_(std::move(job_state)),
      thread_([this] { Run(); }) {}

Snapshotter::~Snapshotter() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

uint64_t Snapshotter::Request(uint32_t node_id, uint64_t load_id,
                              bool with_jobs) {
  uint64_t ticket;
  {
    std::lock_guard lock(mu_);
    ticket = ++requested_;
    node_id_ = node_id;
    load_id_ = load_id;
    jobs_pending_ = jobs_pending_ || with_jobs;
  }
  cv_.notify_all();
  return ticket;
}

absl::StatusOr<SnapshotTaken> Snapshotter::Wait(uint64_t ticket) {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return stop_ || done_ >= ticket; });
  if (done_ < ticket) {
    return absl::CancelledError("the memory node stopped before the snapshot");
  }
  return last_;
}

void Snapshotter::WaitIdle() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return stop_ || (!busy_ && taken_ == requested_); });
}

uint64_t Snapshotter::written() const {
  std::lock_guard lock(mu_);
  return written_;
}

void Snapshotter::Run() {
  std::unique_lock lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || taken_ < requested_; });
    if (stop_) break;
    taken_ = requested_;
    const uint64_t mine = taken_;
    const uint32_t node_id = node_id_;
    const uint64_t load_id = load_id_;
    const bool with_jobs = jobs_pending_ && job_state_ != nullptr;
    jobs_pending_ = false;
    busy_ = true;
    lock.unlock();
    // Held for the write: a load meanwhile cannot free these bytes, nor a
    // job free its regions.
    std::shared_ptr<const AlignedBuffer> store = node_->StoreBytes();
    JobState jobs;
    if (with_jobs) jobs = job_state_();
    bool jobs_changed = false;
    absl::StatusOr<uint64_t> seq =
        store == nullptr
            ? absl::StatusOr<uint64_t>(
                  absl::FailedPreconditionError("no store to snapshot"))
            : dir_->Write(node_id, load_id, store->span(), jobs.regions, [&] {
                if (jobs.still_idle && !jobs.still_idle()) {
                  jobs_changed = true;
                  return true;
                }
                std::lock_guard l(mu_);
                return stop_ || requested_ != mine;
              });
    lock.lock();
    busy_ = false;
    if (absl::IsCancelled(seq.status())) {
      // Taken again: a newer request, or job state that moved (then once
      // more with what is idle now). A request for jobs stays one.
      jobs_pending_ = jobs_pending_ || with_jobs;
      if (jobs_changed && taken_ == requested_) ++requested_;
      cv_.notify_all();
      continue;
    }
    if (seq.ok()) {
      ++written_;
      SnapshotTaken taken;
      taken.seq = *seq;
      taken.store_bytes = store->size();
      taken.jobs = jobs.jobs;
      taken.running = jobs.running;
      taken.regions = static_cast<uint32_t>(jobs.regions.size());
      for (const JobRegionRef& r : jobs.regions) {
        taken.job_bytes += r.bytes->size();
      }
      last_ = taken;
    } else {
      LOG(ERROR) << "snapshot in " << dir_->dir()
                 << " failed (the previous one stays): " << seq.status();
      last_ = seq.status();
    }
    done_ = mine;
    cv_.notify_all();
  }
  cv_.notify_all();
}

}  // namespace dmg::memory_node

#include "store/image_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <string>

#include "absl/strings/str_format.h"
#include "store/input_file.h"

namespace dmg::store {
namespace {

absl::Status Errno(std::string_view path, std::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrFormat("%s: %s: %s", path, what, std::strerror(errno)));
}

// Closes a file descriptor on scope exit.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

// The first bytes of `path` (fewer if it is shorter; none if unreadable or
// not a regular file: opening a FIFO would block).
std::string Head(const std::string& path, size_t n) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return "";
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) return "";
  std::string head(n, '\0');
  const ssize_t got = ::pread(fd.get(), head.data(), n, 0);
  head.resize(got > 0 ? got : 0);
  return head;
}

// Temporary files being written, for the signal handler: a fixed table
// (nothing is allocated in the handler). A slot is kFree, claimed (kBusy,
// its path being filled in or taken out) or kLive (the handler unlinks it).
constexpr int kTempSlots = 16;
constexpr size_t kTempPathMax = 4096;
enum SlotState : int { kFree = 0, kBusy = 1, kLive = 2 };
std::atomic<int> g_slot_state[kTempSlots];
char g_slot_path[kTempSlots][kTempPathMax];
struct sigaction g_previous[2];  // SIGTERM, SIGINT before ours
std::once_flag g_handlers_once;

void RemoveTempFilesOnSignal(int sig) {
  const int saved_errno = errno;
  for (int i = 0; i < kTempSlots; ++i) {
    if (g_slot_state[i].load() == kLive) ::unlink(g_slot_path[i]);
  }
  errno = saved_errno;
  const struct sigaction& prev = g_previous[sig == SIGTERM ? 0 : 1];
  if (prev.sa_handler == SIG_IGN) return;
  if (prev.sa_handler != SIG_DFL && !(prev.sa_flags & SA_SIGINFO)) {
    prev.sa_handler(sig);
    return;
  }
  // The default action: die of the signal, as without this handler.
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

void InstallHandlers() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof(sa));
  sa.sa_handler = RemoveTempFilesOnSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ::sigaction(SIGTERM, &sa, &g_previous[0]);
  ::sigaction(SIGINT, &sa, &g_previous[1]);
}

// Registers `path` for removal on SIGTERM/SIGINT while it lives. With every
// slot taken, the file is still written, just not cleaned up on a signal.
class TempRegistration {
 public:
  explicit TempRegistration(const std::string& path) {
    if (path.size() >= kTempPathMax) return;
    std::call_once(g_handlers_once, InstallHandlers);
    for (int i = 0; i < kTempSlots; ++i) {
      int expected = kFree;
      if (g_slot_state[i].compare_exchange_strong(expected, kBusy)) {
        std::memcpy(g_slot_path[i], path.c_str(), path.size() + 1);
        g_slot_state[i].store(kLive);
        slot_ = i;
        return;
      }
    }
  }
  TempRegistration(const TempRegistration&) = delete;
  TempRegistration& operator=(const TempRegistration&) = delete;
  ~TempRegistration() {
    if (slot_ >= 0) g_slot_state[slot_].store(kFree);
  }

 private:
  int slot_ = -1;
};

// Removes `path.tmp.PID` files in path's folder whose process is gone (left
// by a dmg that was killed with SIGKILL, or crashed).
void RemoveStaleTempFiles(const std::filesystem::path& target) {
  const std::filesystem::path dir =
      target.has_parent_path() ? target.parent_path() : ".";
  const std::string prefix = target.filename().string() + ".tmp.";
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() <= prefix.size() ||
        name.compare(0, prefix.size(), prefix) != 0) {
      continue;
    }
    const std::string digits = name.substr(prefix.size());
    if (digits.find_first_not_of("0123456789") != std::string::npos ||
        digits.size() > 9) {
      continue;
    }
    const pid_t pid = static_cast<pid_t>(std::stol(digits));
    if (pid <= 0 || pid == ::getpid()) continue;
    if (::kill(pid, 0) != 0 && errno == ESRCH) {
      ::unlink(it->path().c_str());
    }
  }
}

}  // namespace

bool IsStoreImageFile(const std::string& path) {
  const std::string head = Head(path, sizeof(kImageMagic));
  return head.size() == sizeof(kImageMagic) &&
         std::memcmp(head.data(), kImageMagic, sizeof(kImageMagic)) == 0;
}

bool LooksLikeStoreImage(const std::string& path) {
  const std::string head = Head(path, sizeof(kImageMagic));
  if (head.empty()) return false;
  std::string name = std::filesystem::path(path).filename().string();
  for (char& c : name) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  if (name.size() > 4 && name.compare(name.size() - 4, 4, ".img") == 0) {
    return true;
  }
  if (head.size() < sizeof(kImageMagic)) return false;
  int same = 0;
  for (size_t i = 0; i < sizeof(kImageMagic); ++i) {
    same += head[i] == kImageMagic[i];
  }
  return same >= 5;  // a byte or three damaged; no text graph starts so
}

absl::Status CheckOutputPath(const std::string& path) {
  // rename() would replace a device, a FIFO or a symlink with a plain file.
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    const char* kind = S_ISLNK(st.st_mode)    ? "a symlink"
                       : S_ISDIR(st.st_mode)  ? "a directory"
                       : S_ISCHR(st.st_mode)  ? "a character device"
                       : S_ISBLK(st.st_mode)  ? "a block device"
                       : S_ISFIFO(st.st_mode) ? "a FIFO"
                                              : "not a regular file";
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: exists and is %s; outputs replace regular files only (remove it "
        "or name another file)",
        path, kind));
  }
  return absl::OkStatus();
}

absl::Status WriteFileAtomically(const std::string& path,
                                 std::span<const std::byte> bytes) {
  std::filesystem::path target(path);
  if (absl::Status s = CheckOutputPath(path); !s.ok()) return s;
  RemoveStaleTempFiles(target);
  std::string tmp = absl::StrFormat("%s.tmp.%d", path, ::getpid());
  TempRegistration registration(tmp);
  {
    Fd fd(::open(tmp.c_str(),
                 O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644));
    if (fd.get() < 0) return Errno(path, "cannot create temporary file");
    size_t done = 0;
    while (done < bytes.size()) {
      ssize_t n = ::write(fd.get(), bytes.data() + done,
                          std::min<size_t>(bytes.size() - done, 1 << 30));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        absl::Status s = Errno(path, "write failed");
        ::unlink(tmp.c_str());
        return s;
      }
      done += n;
    }
    if (::fsync(fd.get()) != 0 || ::close(fd.release()) != 0) {
      absl::Status s = Errno(path, "fsync failed");
      ::unlink(tmp.c_str());
      return s;
    }
  }
  // Test hook: DMG_TEST_PAUSE_BEFORE_RENAME=1 waits here (the temporary file
  // written, not yet renamed) so a test can signal the process.
  if (const char* pause = std::getenv("DMG_TEST_PAUSE_BEFORE_RENAME");
      pause != nullptr && pause[0] == '1') {
    std::fprintf(stderr, "dmg: test: paused before renaming %s\n", tmp.c_str());
    for (int i = 0; i < 600; ++i) ::usleep(100 * 1000);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    absl::Status s = Errno(path, "rename failed");
    ::unlink(tmp.c_str());
    return s;
  }
  // Make the rename itself durable.
  std::string dir = target.has_parent_path() ? target.parent_path().string()
                                             : std::string(".");
  Fd dfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dfd.get() >= 0) ::fsync(dfd.get());
  return absl::OkStatus();
}

absl::Status WriteImageFile(const StoreImage& image, const std::string& path) {
  return WriteFileAtomically(path, image.bytes());
}

absl::StatusOr<StoreImage> ReadImageFile(const std::string& path) {
  if (absl::Status s = CheckRegularFile(path); !s.ok()) return s;
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT) {
      return absl::NotFoundError(absl::StrFormat("%s: no such file", path));
    }
    return Errno(path, "cannot open");
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return Errno(path, "cannot stat");
  AlignedBuffer buffer(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < buffer.size()) {
    ssize_t n = ::read(fd.get(), buffer.data() + done,
                       std::min<size_t>(buffer.size() - done, 1 << 30));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Errno(path, "read failed");
    if (n == 0) break;
    done += n;
  }
  if (done != buffer.size()) {
    return absl::DataLossError(
        absl::StrFormat("%s: file shrank while being read", path));
  }
  return StoreImage::FromBuffer(std::move(buffer), path);
}

absl::StatusOr<Superblock> ReadSuperblock(const std::string& path) {
  if (absl::Status s = CheckRegularFile(path); !s.ok()) return s;
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return Errno(path, "cannot open");
  Superblock sb;
  size_t done = 0;
  while (done < sizeof(sb)) {
    ssize_t n = ::read(fd.get(), reinterpret_cast<char*>(&sb) + done,
                       sizeof(sb) - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Errno(path, "read failed");
    if (n == 0) break;
    done += n;
  }
  if (done != sizeof(sb) ||
      std::memcmp(sb.magic, kImageMagic, sizeof(kImageMagic)) != 0 ||
      Crc32({reinterpret_cast<const std::byte*>(&sb), kSuperblockSize - 4}) !=
          sb.crc32) {
    return absl::DataLossError(
        absl::StrFormat("%s: not a store image, or its superblock is damaged",
                        path));
  }
  return sb;
}

}  // namespace dmg::store

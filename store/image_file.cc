#include "store/image_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_format.h"

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

}  // namespace

bool IsStoreImageFile(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return false;
  char magic[sizeof(kImageMagic)];
  return ::pread(fd.get(), magic, sizeof(magic), 0) == sizeof(magic) &&
         std::memcmp(magic, kImageMagic, sizeof(magic)) == 0;
}

absl::Status WriteFileAtomically(const std::string& path,
                                 std::span<const std::byte> bytes) {
  std::filesystem::path target(path);
  std::string tmp = absl::StrFormat("%s.tmp.%d", path, ::getpid());
  {
    Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
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

}  // namespace dmg::store

#include "store/input_file.h"

#include <errno.h>
#include <fcntl.h>
#include <lzma.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace dmg::store {
namespace {

constexpr unsigned char kGzipMagic[] = {0x1f, 0x8b};
constexpr unsigned char kXzMagic[] = {0xfd, '7', 'z', 'X', 'Z', 0x00};
constexpr unsigned char kZstdMagic[] = {0x28, 0xb5, 0x2f, 0xfd};
constexpr unsigned char kBzip2Magic[] = {'B',  'Z',  'h',  0 /*1-9*/, 0x31,
                                         0x41, 0x59, 0x26, 0x53,      0x59};

template <size_t N>
bool HasMagic(absl::string_view data, const unsigned char (&magic)[N]) {
  return data.size() >= N && std::memcmp(data.data(), magic, N) == 0;
}

bool IsBzip2(absl::string_view data) {
  if (data.size() < sizeof(kBzip2Magic)) return false;
  for (size_t i = 0; i < sizeof(kBzip2Magic); ++i) {
    const unsigned char c = static_cast<unsigned char>(data[i]);
    if (i == 3 ? (c < '1' || c > '9') : c != kBzip2Magic[i]) return false;
  }
  return true;
}

absl::Status ErrnoError(const std::string& path, int err) {
  if (err == ENOENT || err == ENOTDIR) {
    return absl::NotFoundError(absl::StrCat(path, ": no such file"));
  }
  if (err == EACCES || err == EPERM) {
    return absl::PermissionDeniedError(
        absl::StrCat(path, ": permission denied"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": cannot read: ", std::strerror(err)));
}

// What a file of mode `mode` is, for a message.
const char* KindOf(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

absl::Status NotRegular(const std::string& path, mode_t mode) {
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": is ", KindOf(mode),
                   "; graphs are read from regular files only"));
}

// A refusal for an input past the bound: `what` says how ("is 7 bytes,
// more than", "decompresses past").
absl::Status PastBound(const std::string& path, absl::string_view what,
                       const InputBound& bound) {
  return absl::InvalidArgumentError(absl::StrCat(
      path, ": ", what, " --max_input_bytes=", bound.max_bytes,
      bound.origin.empty() ? "" : absl::StrCat(" (", bound.origin, ")"),
      "; raise it if the graph is really that large"));
}

absl::Status DecompressesPast(const std::string& path,
                              const InputBound& bound) {
  return PastBound(path, "decompresses past", bound);
}

// The most bytes a decompressed output may hold: one past the bound, so an
// output that goes on past it is seen without allocating more.
size_t OutputCap(const InputBound& bound) {
  return bound.max_bytes >= std::numeric_limits<size_t>::max() - 1
             ? std::numeric_limits<size_t>::max()
             : static_cast<size_t>(bound.max_bytes) + 1;
}

// Room in `out` for a decompressed output that filled it: twice as much,
// at most `cap` (rounded up to a page).
bool GrowOutput(InputText& out, size_t first, size_t cap) {
  const size_t want = out.capacity() == 0 ? first : out.capacity() * 2;
  return out.Reserve(std::min(cap, std::max<size_t>(want, 1 << 16)));
}

absl::Status OutOfMemory(const std::string& path, absl::string_view doing) {
  return absl::ResourceExhaustedError(
      absl::StrCat(path, ": out of memory while ", doing));
}

// Reads the raw bytes of `path`: refused before reading when its size is
// past the bound (and when it grows past it while read).
absl::StatusOr<InputText> ReadRaw(const std::string& path,
                                  const InputBound& bound) {
  // Stat before opening: opening a FIFO would block until a writer comes.
  if (absl::Status s = CheckRegularFile(path); !s.ok()) return s;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return ErrnoError(path, errno);
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};

  struct stat st;
  if (::fstat(fd, &st) != 0) return ErrnoError(path, errno);
  // Again on what was opened: the name may have been replaced meanwhile.
  if (!S_ISREG(st.st_mode)) return NotRegular(path, st.st_mode);
  if (static_cast<uint64_t>(st.st_size) > bound.max_bytes) {
    return PastBound(path, absl::StrCat("is ", st.st_size, " bytes, more than"),
                     bound);
  }
  InputText data;
  // st_size is only a hint: pipes and /proc files report 0, and a file may
  // grow while we read it.
  const size_t hint = st.st_size > 0 ? static_cast<size_t>(st.st_size) + 1 : 0;
  if (!data.Reserve(std::max<size_t>(hint, 64 * 1024))) {
    return OutOfMemory(path, "reading");
  }
  size_t len = 0;
  while (true) {
    if (len == data.capacity() && !data.Reserve(data.capacity() * 2)) {
      return OutOfMemory(path, "reading");
    }
    const ssize_t n = ::read(fd, data.data() + len, data.capacity() - len);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(path, errno);
    }
    if (n == 0) break;
    len += static_cast<size_t>(n);
    if (len > bound.max_bytes) {
      return PastBound(path, "grew while read past", bound);
    }
  }
  data.set_size(len);
  return data;
}

absl::Status CorruptGzip(const std::string& path, absl::string_view detail) {
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": truncated or corrupt gzip stream", detail));
}

// Decompresses one or more concatenated gzip members (as gzip(1) does),
// stopping as soon as the output passes the bound.
absl::StatusOr<InputText> Gunzip(const std::string& path, absl::string_view in,
                                 const InputBound& bound) {
  // zlib counts in uInt (32 bits): feed and drain in chunks of at most 1 GiB.
  constexpr size_t kChunk = size_t{1} << 30;
  z_stream zs;
  std::memset(&zs, 0, sizeof(zs));
  // 15 + 32: maximum window, automatic zlib/gzip header detection.
  if (inflateInit2(&zs, 15 + 32) != Z_OK) {
    return absl::ResourceExhaustedError(
        absl::StrCat(path, ": cannot initialise zlib"));
  }
  struct Ender {
    z_stream* zs;
    ~Ender() { inflateEnd(zs); }
  } ender{&zs};

  const size_t cap = OutputCap(bound);
  InputText out;
  size_t in_pos = 0;   // bytes of `in` handed to zlib
  size_t out_len = 0;  // bytes of `out` filled
  zs.avail_in = 0;
  while (true) {
    if (zs.avail_in == 0 && in_pos < in.size()) {
      const size_t n = std::min(kChunk, in.size() - in_pos);
      zs.next_in =
          reinterpret_cast<Bytef*>(const_cast<char*>(in.data())) + in_pos;
      zs.avail_in = static_cast<uInt>(n);
      in_pos += n;
    }
    if (out_len == out.capacity() && !GrowOutput(out, in.size() * 4, cap)) {
      return OutOfMemory(path, "decompressing gzip");
    }
    const size_t room = std::min(kChunk, out.capacity() - out_len);
    zs.next_out = reinterpret_cast<Bytef*>(out.data()) + out_len;
    zs.avail_out = static_cast<uInt>(room);
    const int ret = inflate(&zs, Z_NO_FLUSH);
    out_len += room - zs.avail_out;
    if (out_len > bound.max_bytes) return DecompressesPast(path, bound);
    if (ret == Z_STREAM_END) {
      // End of one member. Anything after it must be another member.
      const size_t rest = zs.avail_in + (in.size() - in_pos);
      if (rest == 0) break;
      const size_t next = in.size() - rest;
      if (!HasMagic(in.substr(next), kGzipMagic)) {
        return absl::InvalidArgumentError(absl::StrCat(
            path, ": trailing garbage after the gzip stream at byte ", next));
      }
      if (inflateReset(&zs) != Z_OK) {
        return CorruptGzip(path, "");
      }
      continue;
    }
    if (ret == Z_OK) continue;
    if (ret == Z_BUF_ERROR) {
      // No progress possible: either the output is full (grow and go on) or
      // the input ran out before the end of the stream.
      if (zs.avail_out == 0) continue;
      if (zs.avail_in == 0 && in_pos == in.size()) {
        return CorruptGzip(path, " (unexpected end of file)");
      }
      return CorruptGzip(path, "");
    }
    if (ret == Z_MEM_ERROR) return OutOfMemory(path, "decompressing gzip");
    return CorruptGzip(
        path, zs.msg != nullptr ? absl::StrCat(" (", zs.msg, ")") : "");
  }
  out.set_size(out_len);
  return out;
}

absl::Status CorruptXz(const std::string& path, absl::string_view detail) {
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": truncated or corrupt xz stream", detail));
}

// Decompresses one or more concatenated .xz streams (as xz(1) does),
// stopping as soon as the output passes the bound.
absl::StatusOr<InputText> Unxz(const std::string& path, absl::string_view in,
                               const InputBound& bound) {
  lzma_stream strm = LZMA_STREAM_INIT;
  if (lzma_stream_decoder(&strm, std::numeric_limits<uint64_t>::max(),
                          LZMA_CONCATENATED) != LZMA_OK) {
    return absl::ResourceExhaustedError(
        absl::StrCat(path, ": cannot initialise the xz decoder"));
  }
  struct Ender {
    lzma_stream* s;
    ~Ender() { lzma_end(s); }
  } ender{&strm};

  const size_t cap = OutputCap(bound);
  InputText out;
  size_t out_len = 0;
  strm.next_in = reinterpret_cast<const uint8_t*>(in.data());
  strm.avail_in = in.size();
  while (true) {
    if (out_len == out.capacity() && !GrowOutput(out, in.size() * 6, cap)) {
      return OutOfMemory(path, "decompressing xz");
    }
    const size_t room = out.capacity() - out_len;
    strm.next_out = reinterpret_cast<uint8_t*>(out.data()) + out_len;
    strm.avail_out = room;
    // All input is present from the start, so we can always say FINISH; the
    // decoder then reports LZMA_STREAM_END only for a complete stream.
    const lzma_ret ret = lzma_code(&strm, LZMA_FINISH);
    out_len += room - strm.avail_out;
    if (out_len > bound.max_bytes) return DecompressesPast(path, bound);
    if (ret == LZMA_STREAM_END) break;
    if (ret == LZMA_OK) continue;
    switch (ret) {
      case LZMA_BUF_ERROR:
        if (strm.avail_out == 0) continue;
        return CorruptXz(path, " (unexpected end of file)");
      case LZMA_MEM_ERROR:
      case LZMA_MEMLIMIT_ERROR:
        return OutOfMemory(path, "decompressing xz");
      case LZMA_FORMAT_ERROR:
        return CorruptXz(path, " (bad format)");
      case LZMA_OPTIONS_ERROR:
        return CorruptXz(path, " (unsupported options)");
      case LZMA_DATA_ERROR:
        return CorruptXz(path, " (data error)");
      default:
        return CorruptXz(
            path, absl::StrCat(" (liblzma error ", static_cast<int>(ret), ")"));
    }
  }
  out.set_size(out_len);
  return out;
}

}  // namespace

absl::Status CheckRegularFile(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return ErrnoError(path, errno);
  if (!S_ISREG(st.st_mode)) return NotRegular(path, st.st_mode);
  return absl::OkStatus();
}

InputText::InputText(InputText&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      capacity_(std::exchange(other.capacity_, 0)) {}

InputText& InputText::operator=(InputText&& other) noexcept {
  std::swap(data_, other.data_);
  std::swap(size_, other.size_);
  std::swap(capacity_, other.capacity_);
  return *this;
}

InputText::~InputText() {
  if (data_ != nullptr) ::munmap(data_, capacity_);
}

bool InputText::Reserve(size_t capacity) {
  if (capacity <= capacity_) return true;
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  if (capacity > std::numeric_limits<size_t>::max() - page) return false;
  capacity = (capacity + page - 1) / page * page;
  void* p = data_ == nullptr
                ? ::mmap(nullptr, capacity, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
                : ::mremap(data_, capacity_, capacity, MREMAP_MAYMOVE);
  if (p == MAP_FAILED) return false;
  data_ = static_cast<char*>(p);
  capacity_ = capacity;
  return true;
}

absl::StatusOr<InputText> ReadInputFile(const std::string& path,
                                        const InputBound& bound) {
  absl::StatusOr<InputText> raw = ReadRaw(path, bound);
  if (!raw.ok()) return raw.status();
  if (raw->empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": file is empty"));
  }
  const absl::string_view head = raw->view();
  absl::StatusOr<InputText> data;
  if (HasMagic(head, kGzipMagic)) {
    data = Gunzip(path, head, bound);
  } else if (HasMagic(head, kXzMagic)) {
    data = Unxz(path, head, bound);
  } else if (HasMagic(head, kZstdMagic)) {
    return absl::InvalidArgumentError(absl::StrCat(
        path,
        ": zstd-compressed input is not supported; decompress it first "
        "or recompress with gzip or xz"));
  } else if (IsBzip2(head)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path,
                     ": bzip2-compressed input is not supported; decompress it "
                     "first or recompress with gzip or xz"));
  } else {
    return raw;
  }
  if (!data.ok()) return data.status();
  if (data->empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": file is empty (it decompresses to nothing)"));
  }
  return data;
}

}  // namespace dmg::store

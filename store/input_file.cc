#include "store/input_file.h"

#include <errno.h>
#include <fcntl.h>
#include <lzma.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>

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

// Reads the raw bytes of `path`.
absl::StatusOr<std::string> ReadRaw(const std::string& path) {
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
  std::string data;
  // st_size is only a hint: pipes and /proc files report 0, and a file may
  // grow while we read it.
  size_t capacity = st.st_size > 0 ? static_cast<size_t>(st.st_size) + 1 : 0;
  capacity = std::max<size_t>(capacity, 64 * 1024);
  data.resize(capacity);
  size_t len = 0;
  while (true) {
    if (len == data.size()) data.resize(data.size() * 2);
    const ssize_t n = ::read(fd, data.data() + len, data.size() - len);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(path, errno);
    }
    if (n == 0) break;
    len += static_cast<size_t>(n);
  }
  data.resize(len);
  return data;
}

absl::Status CorruptGzip(const std::string& path, absl::string_view detail) {
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": truncated or corrupt gzip stream", detail));
}

// Decompresses one or more concatenated gzip members (as gzip(1) does).
absl::StatusOr<std::string> Gunzip(const std::string& path,
                                   absl::string_view in) {
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

  std::string out;
  out.resize(std::max<size_t>(in.size() * 4, 1 << 16));
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
    if (out_len == out.size()) out.resize(out.size() * 2);
    const size_t room = std::min(kChunk, out.size() - out_len);
    zs.next_out = reinterpret_cast<Bytef*>(out.data()) + out_len;
    zs.avail_out = static_cast<uInt>(room);
    const int ret = inflate(&zs, Z_NO_FLUSH);
    out_len += room - zs.avail_out;
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
    if (ret == Z_MEM_ERROR) {
      return absl::ResourceExhaustedError(
          absl::StrCat(path, ": out of memory while decompressing gzip"));
    }
    return CorruptGzip(
        path, zs.msg != nullptr ? absl::StrCat(" (", zs.msg, ")") : "");
  }
  out.resize(out_len);
  return out;
}

absl::Status CorruptXz(const std::string& path, absl::string_view detail) {
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": truncated or corrupt xz stream", detail));
}

// Decompresses one or more concatenated .xz streams (as xz(1) does).
absl::StatusOr<std::string> Unxz(const std::string& path,
                                 absl::string_view in) {
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

  std::string out;
  out.resize(std::max<size_t>(in.size() * 6, 1 << 16));
  size_t out_len = 0;
  strm.next_in = reinterpret_cast<const uint8_t*>(in.data());
  strm.avail_in = in.size();
  while (true) {
    if (out_len == out.size()) out.resize(out.size() * 2);
    const size_t room = out.size() - out_len;
    strm.next_out = reinterpret_cast<uint8_t*>(out.data()) + out_len;
    strm.avail_out = room;
    // All input is present from the start, so we can always say FINISH; the
    // decoder then reports LZMA_STREAM_END only for a complete stream.
    const lzma_ret ret = lzma_code(&strm, LZMA_FINISH);
    out_len += room - strm.avail_out;
    if (ret == LZMA_STREAM_END) break;
    if (ret == LZMA_OK) continue;
    switch (ret) {
      case LZMA_BUF_ERROR:
        if (strm.avail_out == 0) continue;
        return CorruptXz(path, " (unexpected end of file)");
      case LZMA_MEM_ERROR:
      case LZMA_MEMLIMIT_ERROR:
        return absl::ResourceExhaustedError(
            absl::StrCat(path, ": out of memory while decompressing xz"));
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
  out.resize(out_len);
  return out;
}

}  // namespace

absl::Status CheckRegularFile(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return ErrnoError(path, errno);
  if (!S_ISREG(st.st_mode)) return NotRegular(path, st.st_mode);
  return absl::OkStatus();
}

uint64_t AvailableMemoryBytes() {
  const int fd = ::open("/proc/meminfo", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[8192];
  ssize_t n;
  do {
    n = ::read(fd, buf, sizeof(buf) - 1);
  } while (n < 0 && errno == EINTR);
  ::close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  const char* p = std::strstr(buf, "MemAvailable:");
  if (p == nullptr) return 0;
  unsigned long long kib = 0;
  if (std::sscanf(p, "MemAvailable: %llu kB", &kib) != 1) return 0;
  return static_cast<uint64_t>(kib) * 1024;
}

absl::StatusOr<std::string> ReadInputFile(const std::string& path) {
  absl::StatusOr<std::string> raw = ReadRaw(path);
  if (!raw.ok()) return raw.status();
  if (raw->empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": file is empty"));
  }
  absl::StatusOr<std::string> data;
  if (HasMagic(*raw, kGzipMagic)) {
    data = Gunzip(path, *raw);
  } else if (HasMagic(*raw, kXzMagic)) {
    data = Unxz(path, *raw);
  } else if (HasMagic(*raw, kZstdMagic)) {
    return absl::InvalidArgumentError(absl::StrCat(
        path,
        ": zstd-compressed input is not supported; decompress it first "
        "or recompress with gzip or xz"));
  } else if (IsBzip2(*raw)) {
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

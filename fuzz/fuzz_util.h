// Helpers shared by the libFuzzer targets in this folder (docs/TESTING.md).
// A target fails loudly (FUZZ_CHECK aborts, which libFuzzer reports as a
// crash and saves the input) only on a real bug; an error Status from the
// code under test is an expected answer to bad bytes.
#ifndef DMG_FUZZ_FUZZ_UTIL_H_
#define DMG_FUZZ_FUZZ_UTIL_H_

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "glog/logging.h"

// Aborts with the failed condition: a bug the fuzzer found.
#define FUZZ_CHECK(cond)                                                   \
  do {                                                                     \
    if (!(cond)) {                                                         \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK failed: %s\n", __FILE__,     \
                   __LINE__, #cond);                                       \
      std::abort();                                                        \
    }                                                                      \
  } while (0)

namespace dmg::fuzz {

// Quiet logging: the code under test warns about every bad input, which
// would drown libFuzzer's output and slow it down. FATAL still aborts.
inline void QuietLogging() { FLAGS_minloglevel = google::GLOG_FATAL; }

// A directory of this process for the files the readers are given
// (/dev/shm when there is one: no disk writes per input), removed at exit.
inline const std::string& ScratchDir() {
  static const std::string* dir = [] {
    std::string base = "/dev/shm";
    struct stat st;
    if (stat(base.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      const char* tmp = std::getenv("TMPDIR");
      base = tmp != nullptr ? tmp : "/tmp";
    }
    std::string templ = base + "/dmg-fuzz-XXXXXX";
    if (mkdtemp(templ.data()) == nullptr) {
      std::perror("mkdtemp");
      std::abort();
    }
    auto* d = new std::string(templ);
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(ScratchDir(), ignored);
    });
    return d;
  }();
  return *dir;
}

// Writes `data` to ScratchDir()/NAME (replacing it) and returns the path.
inline std::string WriteScratchFile(const std::string& name,
                                    const uint8_t* data, size_t size) {
  const std::string path = ScratchDir() + "/" + name;
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  FUZZ_CHECK(fd >= 0);
  size_t done = 0;
  while (done < size) {
    const ssize_t n = write(fd, data + done, size - done);
    FUZZ_CHECK(n > 0);
    done += static_cast<size_t>(n);
  }
  FUZZ_CHECK(close(fd) == 0);
  return path;
}

}  // namespace dmg::fuzz

#endif  // DMG_FUZZ_FUZZ_UTIL_H_

// Time a thread was able to work: wall time less the time it waited,
// runnable, for a core (the kernel's run-queue wait,
// /proc/thread-self/schedstat). What else shares a node's cores (other
// compute processes on the same host, a daemon, four compute nodes on two
// cores) stretches the wall time of a scan without adding work to it; the
// steal model weighs work, so it measures with this clock. Where the file
// is missing (a kernel without schedstats), the run-queue wait reads 0 and
// this is the wall clock.
#ifndef DMG_COMMON_RUN_CLOCK_H_
#define DMG_COMMON_RUN_CLOCK_H_

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>

namespace dmg {

// This thread's run-queue wait since it started (ns; 0 when unknown).
inline uint64_t RunQueueWaitNs() {
  // One descriptor per thread, kept open: a read is one pread(2).
  struct File {
    int fd = ::open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
    ~File() {
      if (fd >= 0) ::close(fd);
    }
  };
  thread_local File file;
  if (file.fd < 0) return 0;
  char text[96];
  const ssize_t n = ::pread(file.fd, text, sizeof(text) - 1, 0);
  if (n <= 0) return 0;
  text[n] = '\0';
  // "<on-cpu ns> <run-queue wait ns> <timeslices>"
  char* end = nullptr;
  std::strtoull(text, &end, 10);
  if (end == text) return 0;
  return std::strtoull(end, nullptr, 10);
}

// Measures one thread's working time from construction: wall time less the
// run-queue wait in between.
class RunClock {
 public:
  RunClock()
      : wall_(std::chrono::steady_clock::now()), waited_(RunQueueWaitNs()) {}
  uint64_t ElapsedNs() const {
    const int64_t wall = std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::steady_clock::now() - wall_)
                             .count();
    const int64_t waited = static_cast<int64_t>(RunQueueWaitNs() - waited_);
    return static_cast<uint64_t>(wall > waited ? wall - waited : 0);
  }
  // The run-queue wait alone since construction.
  uint64_t WaitedNs() const { return RunQueueWaitNs() - waited_; }

 private:
  std::chrono::steady_clock::time_point wall_;
  uint64_t waited_;
};

}  // namespace dmg

#endif  // DMG_COMMON_RUN_CLOCK_H_

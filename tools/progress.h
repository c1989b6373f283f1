// Progress on a terminal: one status line on stderr, rewritten in place
// ("loading kron:22: 4 s", "bfs: superstep 5, frontier 12345, ..."), and
// nothing at all when stderr is not a terminal (logs and scripts stay
// clean) or --progress=false.
#ifndef DMG_TOOLS_PROGRESS_H_
#define DMG_TOOLS_PROGRESS_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace dmg::cli {

class Progress {
 public:
  // Whether progress lines are shown: stderr is a terminal and --progress.
  static bool Enabled();
  // Replaces the status line with `text` (when enabled).
  static void Show(const std::string& text);
  // Removes the status line, so that what follows starts on a clean line.
  static void Clear();
};

// While it lives, "WHAT: N s" is refreshed about once a second (when
// enabled); a step with no figures of its own to show, like a graph load.
class ProgressTicker {
 public:
  explicit ProgressTicker(std::string what);
  ~ProgressTicker();
  ProgressTicker(const ProgressTicker&) = delete;
  ProgressTicker& operator=(const ProgressTicker&) = delete;

 private:
  std::string what_;
  std::chrono::steady_clock::time_point start_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace dmg::cli

#endif  // DMG_TOOLS_PROGRESS_H_

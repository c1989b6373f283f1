#include "tools/progress.h"

#include <unistd.h>

#include <cstdio>

#include "absl/strings/str_format.h"
#include "gflags/gflags.h"

DEFINE_bool(progress, true,
            "show a progress line on stderr while loading and per superstep "
            "(only when stderr is a terminal)");

namespace dmg::cli {

bool Progress::Enabled() { return FLAGS_progress && isatty(STDERR_FILENO); }

void Progress::Show(const std::string& text) {
  if (!Enabled()) return;
  // \r and "erase to end of line": the new text replaces the old in place.
  std::fprintf(stderr, "\r\033[K%s", text.c_str());
  std::fflush(stderr);
}

void Progress::Clear() {
  if (!Enabled()) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
}

ProgressTicker::ProgressTicker(std::string what)
    : what_(std::move(what)), start_(std::chrono::steady_clock::now()) {
  if (!Progress::Enabled()) return;
  thread_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(mu_);
    while (!done_) {
      const double s = std::chrono::duration<double>(
                           std::chrono::steady_clock::now() - start_)
                           .count();
      Progress::Show(absl::StrFormat("%s: %.0f s", what_, s));
      cv_.wait_for(lock, std::chrono::seconds(1));
    }
  });
}

ProgressTicker::~ProgressTicker() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
  }
  cv_.notify_all();
  thread_.join();
  Progress::Clear();
}

}  // namespace dmg::cli

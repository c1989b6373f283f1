// Starting `dmg memory-node` daemons from tests: fork/exec with the output in
// a file, wait for the "listening on" line (port 0 picks a free port), and
// signal or reap the process.
#ifndef DMG_TESTS_DAEMON_UTIL_H_
#define DMG_TESTS_DAEMON_UTIL_H_

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace dmg::testing {

class Daemon {
 public:
  // Starts `dmg memory-node --listen=127.0.0.1:0 ARGS`; log goes to log_path.
  Daemon(const std::string& args, const std::string& log_path)
      : log_(log_path) {
    pid_ = fork();
    if (pid_ == 0) {
      std::string cmd = std::string("exec ") + DMG_BINARY +
                        " memory-node --listen=127.0.0.1:0 " + args + " >" +
                        log_path + " 2>&1";
      execl("/bin/sh", "sh", "-c", cmd.c_str(), nullptr);
      _exit(127);
    }
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    std::regex re("listening on 127\\.0\\.0\\.1:(\\d+)");
    while (std::chrono::steady_clock::now() < deadline) {
      std::ifstream f(log_path);
      std::string text((std::istreambuf_iterator<char>(f)), {});
      std::smatch m;
      if (std::regex_search(text, m, re)) {
        address_ = "127.0.0.1:" + m[1].str();
        return;
      }
      int status;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        reaped_ = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ADD_FAILURE() << "memory node did not start; log:\n" << log();
  }
  ~Daemon() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGCONT);
      kill(pid_, SIGKILL);
      Wait();
    }
  }
  const std::string& address() const { return address_; }
  pid_t pid() const { return pid_; }
  void Signal(int sig) { kill(pid_, sig); }
  // Waits for the process; returns its wait status.
  int Wait() {
    int status = 0;
    waitpid(pid_, &status, 0);
    reaped_ = true;
    return status;
  }
  std::string log() const {
    std::ifstream f(log_);
    return std::string((std::istreambuf_iterator<char>(f)), {});
  }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  std::string log_;
  std::string address_;
};

}  // namespace dmg::testing

#endif  // DMG_TESTS_DAEMON_UTIL_H_

// The trials of a kill-and-resume process test: each trial starts a job,
// kills it (or one of its compute nodes) at a moment drawn inside an
// uninterrupted run's length, runs it again with --resume, and compares the
// output with the uninterrupted run's. A job that finished before its kill
// (this machine was faster than during the uninterrupted run) is made again
// with an earlier kill, at most kRedos times a trial, each said; every
// run's output is checked.
#ifndef DMG_TESTS_KILL_RESUME_H_
#define DMG_TESTS_KILL_RESUME_H_

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <random>
#include <regex>
#include <string>

#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace dmg::testing {

inline double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
      .count();
}

// A job run uninterrupted (as job "reference", writing dir/reference.out):
// its output and how long it took here ("" and a failure when it failed).
struct Reference {
  std::string output;
  double seconds = 0;
};
inline Reference RunReference(const std::string& run, const TempDir& dir) {
  const auto t0 = std::chrono::steady_clock::now();
  CommandResult r = RunCommand(
      run + " --job=reference --output=" + dir.file("reference.out"));
  Reference ref{Slurp(dir.file("reference.out")), SecondsSince(t0)};
  if (r.exit_code != 0) {
    ADD_FAILURE() << "the uninterrupted run failed: " << r.err;
    ref.output.clear();
  }
  return ref;
}

struct KillResumeTrials {
  std::string name;  // in messages
  int trials = 20;
  double uninterrupted_s = 1;
  double earliest = 0.05;  // of the uninterrupted run
  std::string want;        // the uninterrupted run's output
  // The job's name in trial `trial`, attempt `attempt`.
  std::function<std::string(int trial, int attempt)> job;
  // The job's `dmg run` command line (without --job and --output), and
  // what its first run adds.
  std::string run;
  std::string first_flags;
  // Shell that kills trial `trial`'s job `job` (its `dmg run` is $pid).
  std::function<std::string(const std::string& job, int trial)> kill;
  // Where outputs go.
  const TempDir* dir = nullptr;
};

struct KillResumeCounts {
  int killed = 0, finished = 0, redone = 0, resumed = 0, restarted = 0;
  int identical = 0;
  std::string from;  // the supersteps resumed after
};

inline KillResumeCounts RunKillResumeTrials(const KillResumeTrials& t,
                                            std::mt19937& rng) {
  constexpr int kRedos = 4;
  KillResumeCounts n;
  auto check = [&](const std::string& out, int trial) {
    if (Slurp(out) == t.want) {
      ++n.identical;
    } else {
      ADD_FAILURE() << t.name << " trial " << trial
                    << ": output differs from the uninterrupted run's";
    }
  };
  for (int trial = 0; trial < t.trials; ++trial) {
    double hi = 1.0;  // of the uninterrupted run
    for (int attempt = 0; attempt <= kRedos; ++attempt) {
      const std::string job = t.job(trial, attempt);
      const std::string out = t.dir->file(job + ".out");
      const double delay = t.uninterrupted_s * std::uniform_real_distribution<>(
                                                   t.earliest, hi)(rng);
      CommandResult first = RunCommand(
          "(" + t.run + t.first_flags + " --job=" + job + " --output=" + out +
          " >/dev/null 2>" + t.dir->file("first.err") + " & pid=$!; sleep " +
          std::to_string(delay) + "; " + t.kill(job, trial) +
          "; wait $pid; echo exit=$?)");
      if (first.out.find("exit=0") != std::string::npos) {
        ++n.finished;  // too late: it completed before the kill
        check(out, trial);
        if (attempt == kRedos) break;
        std::printf(
            "%s trial %d: finished before the kill at %.2f s; again, "
            "earlier\n",
            t.name.c_str(), trial, delay);
        ++n.redone;
        hi = std::max(2 * t.earliest, delay / t.uninterrupted_s);
        continue;
      }
      ++n.killed;
      CommandResult again =
          RunCommand(t.run + " --resume --job=" + job + " --output=" + out);
      EXPECT_EQ(again.exit_code, 0) << again.err;
      std::smatch m;
      if (std::regex_search(again.out, m,
                            std::regex("resumed after superstep (\\d+)"))) {
        ++n.resumed;
        n.from += " " + m[1].str();
      } else {
        ++n.restarted;  // killed before its first superstep completed
      }
      check(out, trial);
      break;
    }
  }
  std::printf(
      "%s: %d trials (uninterrupted %.2f s): %d killed, %d finished before "
      "the kill (%d made again); %d resumed (after supersteps:%s), %d "
      "restarted from the beginning; %d outputs identical to the "
      "uninterrupted run's\n",
      t.name.c_str(), t.trials, t.uninterrupted_s, n.killed, n.finished,
      n.redone, n.resumed, n.from.c_str(), n.restarted, n.identical);
  EXPECT_EQ(n.identical, n.killed + n.finished);
  EXPECT_GE(n.killed, t.trials / 2);
  EXPECT_GE(n.resumed, t.trials / 4);
  return n;
}

}  // namespace dmg::testing

#endif  // DMG_TESTS_KILL_RESUME_H_

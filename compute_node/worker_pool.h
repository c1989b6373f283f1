// Persistent worker threads, each with its own transport endpoint (one queue
// pair per worker per memory node, in RDMA terms). Run() executes a task on
// every worker and returns when all are done.
#ifndef DMG_COMPUTE_NODE_WORKER_POOL_H_
#define DMG_COMPUTE_NODE_WORKER_POOL_H_

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "common/mutex.h"
#include "transport/transport.h"

namespace dmg::compute {

class WorkerPool {
 public:
  WorkerPool(std::vector<std::unique_ptr<transport::Endpoint>> endpoints);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  int size() const { return static_cast<int>(endpoints_.size()); }
  // The index of the worker running on this thread: set on pool threads,
  // 0 on any other thread (the caller of Run is worker 0).
  static int current() { return current_; }
  transport::Endpoint& endpoint(int worker) { return *endpoints_[worker]; }

  // Runs task(worker) on every worker (worker 0 on the calling thread) and
  // returns the first error any of them returned.
  absl::Status Run(const std::function<absl::Status(int worker)>& task);

  // True once any task failed (e.g. a memory node died): later cleanup
  // should not wait on the transport again.
  bool failed() const { return failed_; }

  // Sum of all endpoints' counters. Call only between Run()s.
  transport::OpStats TotalStats() const;

 private:
  void Loop(int worker);
  // constinit and defined here, so that every translation unit reads it
  // with one %fs-relative load: defined in a .cc, the others would call
  // the TLS wrapper function (through the PLT) at every paged state access
  // of the hot loops.
  static inline constinit thread_local int current_ = 0;

  std::vector<std::unique_ptr<transport::Endpoint>> endpoints_;
  std::vector<std::thread> threads_;
  // A task is handed over by bumping generation_ (release; task_ is
  // written before it) and collected by running_ reaching zero. Both sides
  // spin for kSpinMicros, then spin yielding the core (to any thread that
  // wants it) up to kYieldMicros, before sleeping on a condition variable:
  // a high-diameter graph is thousands of operations a second, and a futex
  // sleep and wake-up per operation cost more than a small one's work
  // (road-NY BFS: a third of the run in the kernel's futex paths).
  static constexpr int64_t kSpinMicros = 50;
  static constexpr int64_t kYieldMicros = 200;
  const std::function<absl::Status(int)>* task_ = nullptr;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> running_{0};
  std::atomic<bool> stop_{false};
  // Guards the sleepers' hand-shake and the first error; never held while a
  // task runs (tasks do the network I/O).
  Mutex mu_;
  std::condition_variable wake_, done_;
  int sleepers_ ABSL_GUARDED_BY(mu_) = 0;
  bool caller_waiting_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status first_error_ ABSL_GUARDED_BY(mu_);
  // Written by Run on the calling thread only.
  bool failed_ = false;
};

}  // namespace dmg::compute

#endif  // DMG_COMPUTE_NODE_WORKER_POOL_H_

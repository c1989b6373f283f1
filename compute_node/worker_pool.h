// Persistent worker threads, each with its own transport endpoint (one queue
// pair per worker per memory node, in RDMA terms). Run() executes a task on
// every worker and returns when all are done.
#ifndef DMG_COMPUTE_NODE_WORKER_POOL_H_
#define DMG_COMPUTE_NODE_WORKER_POOL_H_

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
  static thread_local int current_;

  std::vector<std::unique_ptr<transport::Endpoint>> endpoints_;
  std::vector<std::thread> threads_;
  // Hands a task to the workers and collects them; never held while a
  // task runs (tasks do the network I/O).
  Mutex mu_;
  std::condition_variable wake_, done_;
  const std::function<absl::Status(int)>* task_ ABSL_GUARDED_BY(mu_) = nullptr;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status first_error_ ABSL_GUARDED_BY(mu_);
  // Written by Run on the calling thread only.
  bool failed_ = false;
};

}  // namespace dmg::compute

#endif  // DMG_COMPUTE_NODE_WORKER_POOL_H_

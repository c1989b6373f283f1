#include "compute_node/worker_pool.h"

namespace dmg::compute {

thread_local int WorkerPool::current_ = 0;

WorkerPool::WorkerPool(
    std::vector<std::unique_ptr<transport::Endpoint>> endpoints)
    : endpoints_(std::move(endpoints)) {
  for (int w = 1; w < size(); ++w) {
    threads_.emplace_back([this, w] { Loop(w); });
  }
}

WorkerPool::~WorkerPool() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : threads_) t.join();
}

void WorkerPool::Loop(int worker) {
  current_ = worker;
  uint64_t seen = 0;
  while (true) {
    const std::function<absl::Status(int)>* task;
    {
      MutexLock lock(&mu_);
      while (!stop_ && generation_ == seen) mu_.Wait(wake_);
      if (stop_) return;
      seen = generation_;
      task = task_;
    }
    absl::Status s = (*task)(worker);
    MutexLock lock(&mu_);
    if (!s.ok() && first_error_.ok()) first_error_ = s;
    if (--running_ == 0) done_.notify_all();
  }
}

absl::Status WorkerPool::Run(const std::function<absl::Status(int)>& task) {
  {
    MutexLock lock(&mu_);
    task_ = &task;
    running_ = size();
    first_error_ = absl::OkStatus();
    ++generation_;
  }
  wake_.notify_all();
  absl::Status s = task(0);
  MutexLock lock(&mu_);
  if (!s.ok() && first_error_.ok()) first_error_ = s;
  --running_;
  while (running_ != 0) mu_.Wait(done_);
  if (!first_error_.ok()) failed_ = true;
  return first_error_;
}

transport::OpStats WorkerPool::TotalStats() const {
  transport::OpStats total;
  for (const auto& e : endpoints_) total += e->stats();
  return total;
}

}  // namespace dmg::compute

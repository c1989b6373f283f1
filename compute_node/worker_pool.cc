#include "compute_node/worker_pool.h"

#include <chrono>

namespace dmg::compute {

WorkerPool::WorkerPool(
    std::vector<std::unique_ptr<transport::Endpoint>> endpoints)
    : endpoints_(std::move(endpoints)) {
  for (int w = 1; w < size(); ++w) {
    threads_.emplace_back([this, w] { Loop(w); });
  }
}

WorkerPool::~WorkerPool() {
  stop_.store(true, std::memory_order_release);
  // A worker that saw no stop under the lock is waiting by now: notified.
  { MutexLock lock(&mu_); }
  wake_.notify_all();
  for (auto& t : threads_) t.join();
}

namespace {

// Waits for done() without sleeping: pause-spins for kSpinMicros, then
// yields the core to any other runnable thread (the caller's serial work,
// a memory node sharing the cores, other compute nodes) up to kYieldMicros
// in all. True if done() came true.
template <typename Done>
bool SpinUntil(Done done, int64_t spin_micros, int64_t yield_micros) {
  const auto start = std::chrono::steady_clock::now();
  const auto spin_end = start + std::chrono::microseconds(spin_micros);
  const auto yield_end = start + std::chrono::microseconds(yield_micros);
  while (true) {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= yield_end) return done();
    if (now >= spin_end) std::this_thread::yield();
  }
}

}  // namespace

void WorkerPool::Loop(int worker) {
  current_ = worker;
  uint64_t seen = 0;
  auto handed = [&] {
    return stop_.load(std::memory_order_acquire) ||
           generation_.load(std::memory_order_acquire) != seen;
  };
  while (true) {
    if (!SpinUntil(handed, kSpinMicros, kYieldMicros)) {
      MutexLock lock(&mu_);
      ++sleepers_;
      while (!handed()) mu_.Wait(wake_);
      --sleepers_;
    }
    if (stop_.load(std::memory_order_acquire)) return;
    seen = generation_.load(std::memory_order_acquire);
    absl::Status s = (*task_)(worker);
    if (!s.ok()) {
      MutexLock lock(&mu_);
      if (first_error_.ok()) first_error_ = s;
    }
    if (running_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      MutexLock lock(&mu_);
      if (caller_waiting_) done_.notify_all();
    }
  }
}

absl::Status WorkerPool::Run(const std::function<absl::Status(int)>& task) {
  {
    MutexLock lock(&mu_);
    first_error_ = absl::OkStatus();
  }
  task_ = &task;
  running_.store(size(), std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);
  {
    MutexLock lock(&mu_);
    if (sleepers_ > 0) wake_.notify_all();
  }
  absl::Status s = task(0);
  running_.fetch_sub(1, std::memory_order_acq_rel);
  auto all_done = [&] { return running_.load(std::memory_order_acquire) == 0; };
  if (!SpinUntil(all_done, kSpinMicros, kYieldMicros)) {
    MutexLock lock(&mu_);
    caller_waiting_ = true;
    while (!all_done()) mu_.Wait(done_);
    caller_waiting_ = false;
  }
  MutexLock lock(&mu_);
  if (!s.ok() && first_error_.ok()) first_error_ = s;
  if (!first_error_.ok()) failed_ = true;
  return first_error_;
}

transport::OpStats WorkerPool::TotalStats() const {
  transport::OpStats total;
  for (const auto& e : endpoints_) total += e->stats();
  return total;
}

}  // namespace dmg::compute

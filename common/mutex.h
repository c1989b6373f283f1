// A mutex whose lock discipline is written in code: std::mutex with the
// thread-safety annotations of absl::Mutex (ABSL_GUARDED_BY and friends,
// checked by clang's -Wthread-safety).
#ifndef DMG_COMMON_MUTEX_H_
#define DMG_COMMON_MUTEX_H_

#include <condition_variable>
#include <mutex>

#include "absl/base/thread_annotations.h"

namespace dmg {

// std::mutex with the thread-safety annotations of absl::Mutex (checked by
// clang's -Wthread-safety). Not absl::Mutex itself: the distribution's absl
// is built without ThreadSanitizer's annotations, so TSan cannot see
// absl::Mutex synchronize and reports false races, while it understands
// std::mutex and std::condition_variable.
class ABSL_LOCKABLE Mutex {
 public:
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  // Releases the mutex while blocked on `cv`; holds it again on return
  // (which may be spurious: callers re-check their condition).
  void Wait(std::condition_variable& cv) ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    std::unique_lock<std::mutex> lock(mu_, std::adopt_lock);
    cv.wait(lock);
    lock.release();
  }

 private:
  std::mutex mu_;
};

class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu)
      : mu_(mu) {
    mu_->Lock();
  }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

}  // namespace dmg

#endif  // DMG_COMMON_MUTEX_H_

// The waiting primitives of the runtime, chosen at compile time. Internal to fairgate.
//
// Normally Boost.Fiber's: waiting on them suspends only the calling fiber (a plain thread sleeps),
// which is what lets RunSync callers on fibers and Submit jobs share a few threads. Built with
// FAIRGATE_RUNTIME_THREADS (the `tsan` preset), the runtime waits with the standard library's
// instead, runs each Submit job on a plain worker thread, and guards its core with std::mutex
// rather than glibc's adaptive mutex: ThreadSanitizer cannot follow Boost.Context's stack
// switches, but it can check every lock, wait and shared field of the runtime's own code in this
// form. The scheduling logic is the same code.
#ifndef FAIRGATE_RUNTIME_WAITING_H_
#define FAIRGATE_RUNTIME_WAITING_H_

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "fairgate/context.h"

#if FAIRGATE_RUNTIME_THREADS
#include <condition_variable>
#include <thread>
#else
#include "boost/fiber/condition_variable.hpp"
#include "boost/fiber/context.hpp"
#include "boost/fiber/mutex.hpp"
#include "boost/fiber/operations.hpp"
#endif

namespace fairgate::internal {

// Nothing suspends a fiber while its thread holds a scheduler's core lock (CoreMutex below). The
// lock is a thread lock: a fiber suspended while holding it lets its thread run another fiber,
// which meets the lock and blocks the thread, so the holder can never resume, and every caller
// of the scheduler, the timer and the pool stop for good (issue 46: a woken RunSync caller read
// its context's error under the lock while the thread that cancelled the context held the
// context's fiber mutex). So the rule is checked as the runtime runs, in every build (it costs
// two adds per locked section and a test per wait): each CoreMutex counts itself in the holding
// thread's `core_locks_held`, and every primitive here that may suspend a fiber, and the pool's
// scheduling algorithm before it switches fibers (parker.cc), aborts with the lock's name if the
// count is not zero. Checked before the primitive is used, not only when it would suspend, so a
// test that reaches such a call under the lock fails every time, not only when it is contended.
// clang's thread-safety analysis checks the same rule at compile time: CoreMutex also acquires
// `core_lock` (fairgate/context.h), which every function that may suspend excludes.
inline thread_local int core_locks_held __attribute__((tls_model("initial-exec"))) = 0;

// Aborts, naming the lock and `what` was about to suspend the fiber.
[[noreturn, gnu::cold, gnu::noinline]] void AbortSuspendUnderCoreLock(const char* what);

// Called by whatever may suspend the calling fiber, before it does.
inline void CheckMaySuspend(const char* what) {
  if (core_locks_held != 0) [[unlikely]]
    AbortSuspendUnderCoreLock(what);
}

// A mutex whose holder may be suspended, or that suspends a fiber that finds it taken
// (Boost.Fiber's, or std::mutex in the thread build, where the rule is checked all the same):
// checked before it is taken.
template <typename Mutex>
class ABSL_LOCKABLE CheckedMutex {
 public:
  void lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() ABSL_LOCKS_EXCLUDED(core_lock) {
    CheckMaySuspend("a fiber mutex's lock");
    mutex_.lock();
  }
  bool try_lock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) { return mutex_.try_lock(); }
  void unlock() ABSL_UNLOCK_FUNCTION() { mutex_.unlock(); }

 private:
  Mutex mutex_;
};

// A condition variable over any lock, checked before each wait.
template <typename Condition>
class CheckedCondition {
 public:
  void notify_one() noexcept { condition_.notify_one(); }
  void notify_all() noexcept { condition_.notify_all(); }
  template <typename Lock, typename Predicate>
  void wait(Lock& lock, Predicate ready) ABSL_LOCKS_EXCLUDED(core_lock) {
    CheckMaySuspend("a wait on a fiber condition variable");
    condition_.wait(lock, std::move(ready));
  }
  template <typename Lock, typename Clock, typename Duration, typename Predicate>
  bool wait_until(Lock& lock, const std::chrono::time_point<Clock, Duration>& until,
                  Predicate ready) ABSL_LOCKS_EXCLUDED(core_lock) {
    CheckMaySuspend("a timed wait on a fiber condition variable");
    return condition_.wait_until(lock, until, std::move(ready));
  }
  template <typename Lock, typename Rep, typename Period, typename Predicate>
  bool wait_for(Lock& lock, const std::chrono::duration<Rep, Period>& timeout, Predicate ready)
      ABSL_LOCKS_EXCLUDED(core_lock) {
    CheckMaySuspend("a timed wait on a fiber condition variable");
    return condition_.wait_for(lock, timeout, std::move(ready));
  }

 private:
  Condition condition_;
};

#if FAIRGATE_RUNTIME_THREADS
inline constexpr bool kThreadRuntime = true;
using WaitMutex = CheckedMutex<std::mutex>;
using WaitCondition = CheckedCondition<std::condition_variable_any>;
using ShortMutex = std::mutex;
using ShortCondition = CheckedCondition<std::condition_variable_any>;
inline void YieldToOthers() ABSL_LOCKS_EXCLUDED(core_lock) {
  CheckMaySuspend("a yield");
  std::this_thread::yield();
}
template <typename Duration>
void SleepFor(Duration d) ABSL_LOCKS_EXCLUDED(core_lock) {
  CheckMaySuspend("a sleep");
  std::this_thread::sleep_for(d);
}
// The scheduler's lock.
class ABSL_LOCKABLE CoreMutex {
 public:
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION(this, core_lock) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    mutex_.lock();
    ++core_locks_held;
  }
  bool TryLock()
      ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true, this, core_lock) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if (!mutex_.try_lock()) return false;
    ++core_locks_held;
    return true;
  }
  void Unlock() ABSL_UNLOCK_FUNCTION(this, core_lock) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    --core_locks_held;
    mutex_.unlock();
  }

 private:
  std::mutex mutex_;
};
#else
inline constexpr bool kThreadRuntime = false;
using WaitMutex = CheckedMutex<boost::fibers::mutex>;
using WaitCondition = CheckedCondition<boost::fibers::condition_variable_any>;
// A lock that many threads take at once, each for a few instructions and never across a wait
// (the pool's queue, the count of outstanding jobs). A fiber mutex is the wrong tool there: with
// 64 worker threads on 2 cores its internal spinlock took most of the CPU of a Submit burst
// (perf, bench/HISTORY.md). A thread mutex, tried up to 256 times before it sleeps the thread:
// for a lock held this briefly the holder is usually done within the spin (draining a backlog
// with 64 workers on 2 cores: 250 k jobs/s with a plain std::mutex; 320-350 k spinning 64
// times, 480 k 256 times, 316-334 k 1,024 times).
// Not absl::Mutex: its deadlock detector (on in Debian's build) aborted one ASan stress run,
// reporting a lock taken twice on one thread; it keeps its record of held locks per thread,
// which fibers share, and no fiber switch under this lock was found.
class ShortMutex {
 public:
  void lock() {
    for (int i = 0; i < 256; ++i) {
      if (mutex_.try_lock()) return;
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
    mutex_.lock();
  }
  bool try_lock() { return mutex_.try_lock(); }
  void unlock() { mutex_.unlock(); }

 private:
  std::mutex mutex_;
};
// Waits on a ShortMutex, suspending only the calling fiber.
using ShortCondition = CheckedCondition<boost::fibers::condition_variable_any>;
inline void YieldToOthers() ABSL_LOCKS_EXCLUDED(core_lock) {
  CheckMaySuspend("a yield");
  boost::this_fiber::yield();
}
template <typename Duration>
void SleepFor(Duration d) ABSL_LOCKS_EXCLUDED(core_lock) {
  CheckMaySuspend("a sleep");
  boost::this_fiber::sleep_for(d);
}
// The scheduler's lock: glibc's adaptive mutex (PTHREAD_MUTEX_ADAPTIVE_NP). It spins for as long
// as recent acquisitions needed before it sleeps, and a running thread takes a free lock ahead
// of sleeping waiters: that keeps many plain threads calling RunSync from settling into a
// standing queue, where the threads whose jobs were admitted sleep on the lock they need to
// complete and slots stand idle (src/runtime/README.md, "The lock").
//
// A caller on a plain thread (its thread's main context: no fiber of its own to run instead)
// first waits up to kPlainThreadSpins pauses for the lock to be free, reading whether it is held
// (without taking its cache line from the holder), before it falls to the mutex, which may put it
// to sleep: a thread that sleeps on the lock must be woken by a system call, and sleepers fall
// behind. Fibers do not spin: they have other fibers of their thread to give way to, and
// spinning there costs the fibers' throughput (bench/HISTORY.md has the figures). Telling the two
// apart initializes Boost.Fiber on a plain thread that finds the lock taken (its main context and
// scheduler, as any fiber-aware wait on that thread does).
class ABSL_LOCKABLE CoreMutex {
 public:
  CoreMutex() {
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP);
    pthread_mutex_init(&mutex_, &attr);
    pthread_mutexattr_destroy(&attr);
  }
  ~CoreMutex() { pthread_mutex_destroy(&mutex_); }
  CoreMutex(const CoreMutex&) = delete;
  CoreMutex& operator=(const CoreMutex&) = delete;
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION(this, core_lock) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if (TryLock()) return;
    if (boost::fibers::context::active()->is_context(boost::fibers::type::main_context)) {
      for (int i = 0; i < kPlainThreadSpins; ++i) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
        if (!held_.load(std::memory_order_relaxed) && TryLock()) return;
      }
    }
    pthread_mutex_lock(&mutex_);
    held_.store(true, std::memory_order_relaxed);
    ++core_locks_held;
  }
  bool TryLock()
      ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true, this, core_lock) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if (pthread_mutex_trylock(&mutex_) != 0) return false;
    held_.store(true, std::memory_order_relaxed);
    ++core_locks_held;
    return true;
  }
  void Unlock() ABSL_UNLOCK_FUNCTION(this, core_lock) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    --core_locks_held;
    held_.store(false, std::memory_order_relaxed);
    pthread_mutex_unlock(&mutex_);
  }

 private:
  // About 25 µs on the 2-core VM, where a pause takes about 50 ns (the hypervisor's pause-loop
  // exits). Tried for every caller: 100 (5 µs) left a repetition at a sixth of its run's median
  // in one run of four; 2,000 did no better than 500 for plain threads.
  static constexpr int kPlainThreadSpins = 500;
  pthread_mutex_t mutex_;
  // Whether the lock is held, as the spin reads it: a hint only (the mutex decides), written by
  // the holder, so that spinners read a shared line instead of each taking it exclusively.
  std::atomic<bool> held_{false};
};
#endif

}  // namespace fairgate::internal

#endif  // FAIRGATE_RUNTIME_WAITING_H_

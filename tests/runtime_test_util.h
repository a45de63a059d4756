// Helpers for the runtime tests: gates that jobs wait on, a clock that only the test moves,
// waiting for a condition with a failure guard, and a watchdog that turns a deadlock into a failed
// test instead of a hung CI. Timeouts here are failure guards, never assertions about speed.
#ifndef FAIRGATE_TESTS_RUNTIME_TEST_UTIL_H_
#define FAIRGATE_TESTS_RUNTIME_TEST_UTIL_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fairgate/observer.h"
#include "fairgate/options.h"
#include "fairgate/scheduler.h"
#include "fairgate/status.h"
#include "runtime/waiting.h"

namespace fairgate::testing {

// The pool the runtime's tests run their scheduler on: `options` as they are, unless
// FAIRGATE_TEST_WORKER_THREADS names a number of worker threads for the tests that leave it to the
// default (worker_threads 0: one thread per slot). CTest runs the scheduler's tests again on pools
// of 1, 2 and 64 threads that way (tests/CMakeLists.txt, RuntimeOnPool.*): what a test asserts must
// hold on any pool that can run its jobs, and a job that waits only on fiber-aware primitives
// (Gate, the scheduler's own calls) needs no thread of its own. A test whose jobs block their
// thread sets worker_threads itself. The thread runtime (FAIRGATE_RUNTIME_THREADS, the tsan
// preset) runs each job on one of the pool's threads until it returns, so a smaller pool there
// holds back jobs the test waits to see running: the variable is refused in that build.
inline SchedulerOptions WithPoolUnderTest(SchedulerOptions options) {
  const char* threads = std::getenv("FAIRGATE_TEST_WORKER_THREADS");
#if FAIRGATE_RUNTIME_THREADS
  if (threads != nullptr) {
    std::fprintf(stderr,
                 "FAIRGATE_TEST_WORKER_THREADS is for the fiber runtime: in this thread build each "
                 "job holds a pool thread until it returns, so a smaller pool stalls the tests\n");
    std::abort();
  }
#endif
  if (threads != nullptr && options.runtime.worker_threads == 0) {
    options.runtime.worker_threads = std::atoi(threads);
    if (options.runtime.worker_threads < 1) {
      std::fprintf(stderr, "FAIRGATE_TEST_WORKER_THREADS must be a positive count, got '%s'\n",
                   threads);
      std::abort();
    }
  }
  return options;
}

// A copy of `status` with a representation of its own, for a status handed to another thread.
// absl::Status shares its error representation through a reference count that lives in the
// uninstrumented libabsl, so ThreadSanitizer cannot see that a representation read on one thread
// and freed on another was handed over properly, and reports a race that is not there.
inline Status Own(const Status& status) { return Status(status.code(), status.message()); }

// A one-shot event that fibers and threads can wait on.
class Gate {
 public:
  void Open() {
    {
      std::unique_lock lock(mutex_);
      open_ = true;
    }
    cv_.notify_all();
  }
  // Waits until open; false if `guard` passed first.
  bool Wait(std::chrono::milliseconds guard = std::chrono::milliseconds(20000)) {
    std::unique_lock lock(mutex_);
    return cv_.wait_for(lock, guard, [&] { return open_; });
  }

 private:
  internal::WaitMutex mutex_;
  internal::WaitCondition cv_;
  bool open_ = false;
};

// A clock that only the test moves, for `options.runtime.clock`: a job's run time (what its
// estimate learns), a queue's wait and a key's idle time are then exact. Copies share one time,
// so the scheduler and a job may hold it past the test's frame.
class TestClock {
 public:
  explicit TestClock(double start = 0) : now_(std::make_shared<std::atomic<double>>(start)) {}
  // What the scheduler reads as now.
  std::function<Seconds()> Fn() const {
    return [now = now_] { return Seconds(now->load()); };
  }
  void Set(double seconds) const { now_->store(seconds); }
  void Advance(double seconds) const { now_->fetch_add(seconds); }
  // A job function that takes `seconds` of this clock and returns `status`.
  Scheduler::JobFn Takes(double seconds, Status status = absl::OkStatus()) const {
    return [now = now_, seconds, status](const Context&) {
      now->fetch_add(seconds);
      return status;
    };
  }

 private:
  std::shared_ptr<std::atomic<double>> now_;
};

// A job function that holds its slot until `gate` opens (Internal if it never does).
inline Scheduler::JobFn HoldUntil(Gate& gate) {
  return [&gate](const Context&) {
    return gate.Wait() ? absl::OkStatus() : absl::InternalError("gate never opened");
  };
}

// Polls `condition` until it holds; false if `guard` passed first.
inline bool Eventually(const std::function<bool()>& condition,
                       std::chrono::milliseconds guard = std::chrono::milliseconds(20000)) {
  const auto end = std::chrono::steady_clock::now() + guard;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > end) return false;
    internal::SleepFor(std::chrono::milliseconds(1));
  }
  return true;
}

// Aborts the test program if not destroyed within `limit`.
class Watchdog {
 public:
  Watchdog(std::string what, std::chrono::seconds limit) : what_(std::move(what)) {
    thread_ = std::thread([this, limit] {
      std::unique_lock lock(mutex_);
      if (!cv_.wait_for(lock, limit, [&] { return disarmed_; })) {
        std::fprintf(stderr, "watchdog: '%s' did not finish within %llds: deadlock?\n",
                     what_.c_str(), static_cast<long long>(limit.count()));
        std::abort();
      }
    });
  }
  ~Watchdog() {
    {
      std::unique_lock lock(mutex_);
      disarmed_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::string what_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool disarmed_ = false;
  std::thread thread_;
};

// An ordered log of what happened, from any thread.
class Log {
 public:
  void Add(std::string entry) {
    std::unique_lock lock(mutex_);
    entries_.push_back(std::move(entry));
  }
  std::vector<std::string> entries() const {
    std::unique_lock lock(mutex_);
    return entries_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> entries_;
};

// An observer that keeps, in order, a line for each event `format` describes (an empty line: the
// event is not kept), from any thread.
class EventLines : public Observer {
 public:
  explicit EventLines(std::function<std::string(const JobEvent&)> format)
      : format_(std::move(format)) {}
  void OnEvent(const JobEvent& e) override {
    std::string line = format_(e);
    if (!line.empty()) log_.Add(std::move(line));
  }
  std::vector<std::string> lines() const { return log_.entries(); }

 private:
  const std::function<std::string(const JobEvent&)> format_;
  Log log_;
};

}  // namespace fairgate::testing

#endif  // FAIRGATE_TESTS_RUNTIME_TEST_UTIL_H_

// Timer: a scheduler's thread for what is due at a time (deadlines, queue-wait limits, periodic
// runs, retries, adaptive capacity, the TTL sweep). Internal to src/runtime.
//
// It owns its thread and its lock, and knows nothing of what it runs: `next_due` says when it
// must run next, `run_due(now)` runs what is due at `now`. A thread of its own, not a pool fiber:
// a job that blocks its worker thread (a subprocess, a blocking read) must not hold up what is
// due behind it.
//
// Lock order: `next_due` is called with the timer's lock held, and may take the scheduler's
// (never the other way round: nothing under the scheduler's lock calls Wake). `run_due` is called
// without the timer's lock: what it runs may call Wake.
//
// Thread safety: Wake may be called from any thread at once; Start and Stop once each, by the
// owner.
#ifndef FAIRGATE_RUNTIME_TIMER_H_
#define FAIRGATE_RUNTIME_TIMER_H_

#include <functional>
#include <thread>

#include "fairgate/context.h"
#include "runtime/waiting.h"

namespace fairgate::internal {

class Timer {
 public:
  using Clock = Context::Clock;
  Timer(std::function<Clock::time_point()> next_due,
        std::function<void(Clock::time_point now)> run_due);
  ~Timer();  // Stop
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;

  void Start();
  // Something may be due earlier than `next_due` said: it asks again.
  void Wake() ABSL_LOCKS_EXCLUDED(core_lock);
  // Stops the thread (a run in progress ends first) and joins it. Idempotent.
  void Stop();

 private:
  void Loop();

  const std::function<Clock::time_point()> next_due_;
  const std::function<void(Clock::time_point)> run_due_;
  WaitMutex mutex_;
  WaitCondition wake_;
  bool stop_ = false;   // under mutex_
  bool rearm_ = false;  // under mutex_: Wake was called since next_due_ was asked
  std::thread thread_;
};

}  // namespace fairgate::internal

#endif  // FAIRGATE_RUNTIME_TIMER_H_

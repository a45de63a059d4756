// Alarms: functions due at a time, run by the scheduler's timer: what a call that returns at
// once must still do when its context's deadline passes (RunAsync's deadline). Internal to
// src/runtime.
//
// A deadline is read, never pushed (fairgate/context.h): a call that waits reads it, and a call
// that does not wait files an alarm here that does what the context's cancellation would.
//
// Thread safety: every method may be called from any thread at once. Its lock is never held while
// an alarm runs, so an alarm may Remove itself or another, and Add.
#ifndef FAIRGATE_RUNTIME_ALARMS_H_
#define FAIRGATE_RUNTIME_ALARMS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <utility>

#include "fairgate/context.h"

namespace fairgate::internal {

class Alarms {
 public:
  using Clock = Context::Clock;
  // Names a filed alarm, for Remove.
  using Id = std::pair<Clock::time_point, std::uint64_t>;

  // Files `fire` to run at `at`. `earliest`: set when it is now the first due, so that the caller
  // wakes the timer (not under a lock the timer's next_due takes).
  Id Add(Clock::time_point at, std::function<void()> fire, bool& earliest);
  // Unfiles the alarm: it will not run unless it is running or has run (then this does nothing).
  void Remove(const Id& id);

  // For the scheduler's timer: when the first alarm is due (Clock::time_point::max() for none),
  // and running each alarm due by `now`, in the order they are due, outside the lock.
  Clock::time_point NextDue() const;
  void RunDue(Clock::time_point now);

 private:
  // Guards what follows. A std::mutex, as every service's: ThreadSanitizer cannot follow
  // Debian's uninstrumented Abseil (README.md).
  mutable std::mutex mutex_;
  std::map<Id, std::function<void()>> due_;
  std::uint64_t next_ = 0;
};

}  // namespace fairgate::internal

#endif  // FAIRGATE_RUNTIME_ALARMS_H_

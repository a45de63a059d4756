// PeriodicRuns: the scheduler's periodic jobs (Scheduler::SubmitEvery, fairgate/periodic.h), a
// service on the scheduler's Submission. Internal to src/runtime.
//
// It keeps when each periodic job's next run is due (one entry per job between runs), and queues
// a run as a Submit job when the scheduler's timer finds it due (RunDue); the run's end schedules
// the next. With a store, a restart keeps the schedule: the first run is placed by the last run's
// end (StateKeeper::LastRunEnd), and each run's end is recorded there.
//
// Thread safety: every method may be called from any thread at once; its own lock is never held
// while it calls the scheduler.
#ifndef FAIRGATE_RUNTIME_PERIODIC_RUNS_H_
#define FAIRGATE_RUNTIME_PERIODIC_RUNS_H_

#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string_view>

#include "fairgate/context.h"
#include "fairgate/periodic.h"
#include "fairgate/scheduler.h"
#include "runtime/periodic_state.h"
#include "runtime/state_keeper.h"
#include "runtime/submission.h"

namespace fairgate::internal {

class PeriodicRuns {
 public:
  using Clock = Context::Clock;
  // `keeper`: the store's side, or null without a store.
  PeriodicRuns(Submission& scheduler, StateKeeper* keeper)
      : scheduler_(scheduler), keeper_(keeper) {}

  // Scheduler::SubmitEvery, whose refusals it returns; the state its PeriodicJob handle shares.
  StatusOr<std::shared_ptr<PeriodicState>> SubmitEvery(const JobName& job, Seconds interval,
                                                       Scheduler::JobFn fn,
                                                       const PeriodicOptions& options);

  // For the scheduler's timer: when the next run is due (Clock::time_point::max() for none), and
  // queueing the runs due by `now`.
  Clock::time_point NextDue() const;
  void RunDue(Clock::time_point now);

 private:
  // Queues one run as a Submit job; when it ends, the next is scheduled.
  void QueueRun(const std::shared_ptr<PeriodicState>& state);
  // After a run: the next one `interval` (with jitter) from now, unless stopped or closing.
  void ScheduleNext(const std::shared_ptr<PeriodicState>& state);
  // Queues the job's next run `after` seconds from now; true when it is the earliest, so that the
  // caller wakes the timer (after releasing the lock).
  bool ScheduleLocked(const std::shared_ptr<PeriodicState>& state, double after);
  // A uniform double in [low, high).
  double UniformLocked(double low, double high) {
    return std::uniform_real_distribution<double>(low, high)(random_);
  }

  Submission& scheduler_;
  StateKeeper* const keeper_;
  // Guards what follows. A std::mutex, as every service's: ThreadSanitizer cannot follow
  // Debian's uninstrumented Abseil (README.md), and *Locked functions need it held.
  mutable std::mutex mutex_;
  // Periodic jobs by when their next run is due.
  std::multimap<Clock::time_point, std::shared_ptr<PeriodicState>> due_;
  // Jitter and the first runs' spread.
  std::mt19937_64 random_{std::random_device{}()};
};

}  // namespace fairgate::internal

#endif  // FAIRGATE_RUNTIME_PERIODIC_RUNS_H_

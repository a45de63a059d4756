// fairgate/periodic.h: background work that repeats (Scheduler::SubmitEvery).
//
// A periodic job is a Submit job run again and again: each run is queued like any Submit of its
// JobName (type, id, and the fairness key charged for every run), in the same order and under the
// same caps and conflicts. The next run is queued `interval` after the previous run ended (whatever
// its status), stretched or shrunk by up to `jitter` of it at random, so two runs of one periodic
// job never overlap and a slow run never makes runs pile up. The first run is queued after a random
// part of one interval, so that a server starting a thousand periodic jobs does not start them
// together
// (`first_run_at_once` queues it at once instead).
//
// After a restart, with a store (PersistenceOptions::store), the first run keeps the
// schedule the last process had. The store knows when the job's (type, id) last run ended, and
// the first run is queued:
// - one interval after that end, if that is still to come (never more than one interval from
//   now, should the wall clock have stepped back), without jitter;
// - else (the run is overdue: the process was stopped for longer than an interval) after a
//   random part of one interval, as at a first start, so that jobs overdue after a long stop do
//   not all start together;
// - at once, whatever the store says, with `first_run_at_once`.
// The end of a run reaches the store with the scheduler's next state flush
// (PersistenceOptions::state_flush_interval, and at Shutdown); a process killed before that flush
// is placed by the run before it. Without a store, or for a (type, id) the store has no run of,
// the first run is placed as at a first start.
//
// Runs stop when the PeriodicJob handle's Stop is called or the scheduler shuts down or drains:
// no run is queued after that; a run already queued or running finishes and is reported. The
// handle may be dropped: the job goes on until the scheduler stops.
//
// Thread safety: a PeriodicJob may be copied and stopped from any thread or fiber, also after its
// scheduler is gone (then Stop does nothing).
#ifndef FAIRGATE_PERIODIC_H_
#define FAIRGATE_PERIODIC_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "fairgate/export.h"
#include "fairgate/status.h"

namespace fairgate {

struct PeriodicOptions {
  // Each wait is interval * (1 + u), u uniform in [-jitter, +jitter]. In [0, 1).
  double jitter = 0.1;
  // Queue the first run at once, instead of after a random part of one interval.
  bool first_run_at_once = false;
  // Called after each run with its status, as a Submit callback is (may be empty). A run refused
  // at the door (a full queue, say) is reported here with that status, and the next one is
  // scheduled as usual.
  std::function<void(const Status& status)> on_run;
};

namespace internal {
struct PeriodicState;
}  // namespace internal

class FAIRGATE_EXPORT PeriodicJob {
 public:
  PeriodicJob() = default;
  // No further run is queued. Idempotent; does not wait for a run in flight.
  void Stop();
  // Runs that have ended (reported to on_run) so far.
  std::uint64_t runs() const;

 private:
  friend class Scheduler;
  explicit PeriodicJob(std::shared_ptr<internal::PeriodicState> state) : state_(std::move(state)) {}
  std::shared_ptr<internal::PeriodicState> state_;
};

}  // namespace fairgate

#endif  // FAIRGATE_PERIODIC_H_

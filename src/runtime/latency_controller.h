// LatencyController: the latency rule (fairgate/latency_capacity.h), a service on the scheduler's
// Submission. Internal to src/runtime; exists only with RuleOptions::latency_capacity.
//
// Once per interval, on the scheduler's timer, it applies core::LatencyRule to the global cap in
// force and to the measured runs completed since the last interval (the admission table keeps
// them: AdmissionTable::KeepRunSamples), in one decision through Submission::ChangeCapacity: a
// cap that grew admits what it now has room for. The rule's instants are the scheduler's clock
// (SchedulerOptions::clock), the one the runs were measured with; the timer's only say when.
//
// Thread safety: Tick and NextDue are called by the timer's thread only.
#ifndef FAIRGATE_RUNTIME_LATENCY_CONTROLLER_H_
#define FAIRGATE_RUNTIME_LATENCY_CONTROLLER_H_

#include "core/latency_rule.h"
#include "fairgate/context.h"
#include "fairgate/latency_capacity.h"
#include "runtime/submission.h"

namespace fairgate::internal {

class LatencyController {
 public:
  using Clock = Context::Clock;
  LatencyController(Submission& scheduler, const LatencyCapacity& rule, int max_concurrency);

  // When the rule is applied next.
  Clock::time_point NextDue() const { return next_; }
  // Applies the rule if its interval has passed by `now`.
  void Tick(Clock::time_point now);

 private:
  Submission& scheduler_;
  core::LatencyRule rule_;
  const Clock::duration interval_;
  Clock::time_point next_;
};

}  // namespace fairgate::internal

#endif  // FAIRGATE_RUNTIME_LATENCY_CONTROLLER_H_

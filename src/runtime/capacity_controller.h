// CapacityController: adaptive capacity (fairgate/adaptive_capacity.h), a service on the
// scheduler's Submission. Internal to src/runtime; exists only with
// RuleOptions::adaptive_capacity.
//
// Once per interval, on the scheduler's timer, it samples the stall counter (the CPU pressure
// since the previous sample) and applies the rule (NextCapacity) to the global cap in force,
// through Submission::ChangeCapacity: a cap that grew admits what it now has room for. A counter
// that cannot be read is counted and leaves the cap where it is.
//
// Thread safety: Tick and NextDue are called by the timer's thread only; the constructor takes a
// first sample.
#ifndef FAIRGATE_RUNTIME_CAPACITY_CONTROLLER_H_
#define FAIRGATE_RUNTIME_CAPACITY_CONTROLLER_H_

#include <functional>
#include <optional>
#include <utility>

#include "fairgate/adaptive_capacity.h"
#include "fairgate/context.h"
#include "fairgate/status.h"
#include "runtime/submission.h"

namespace fairgate::internal {

class CapacityController {
 public:
  using Clock = Context::Clock;
  // `stalled_seconds`: the signal, a counter that only grows (see AdaptiveCapacity).
  CapacityController(Submission& scheduler, const AdaptiveCapacity& rule, int max_concurrency,
                     std::function<StatusOr<double>()> stalled_seconds);

  // When the rule is applied next.
  Clock::time_point NextDue() const { return next_; }
  // Applies the rule if its interval has passed by `now`.
  void Tick(Clock::time_point now);

 private:
  // The pressure since the previous sample, or nothing when the counter cannot be read (counted)
  // or there is no previous sample.
  std::optional<double> Sample(Clock::time_point now);

  Submission& scheduler_;
  const AdaptiveCapacity rule_;
  const int max_concurrency_;
  const std::function<StatusOr<double>()> stalled_seconds_;
  const Clock::duration interval_;
  std::optional<std::pair<Clock::time_point, double>> last_sample_;
  Clock::time_point next_;
};

}  // namespace fairgate::internal

#endif  // FAIRGATE_RUNTIME_CAPACITY_CONTROLLER_H_

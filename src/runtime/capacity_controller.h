// CapacityController: adaptive capacity (fairgate/adaptive_capacity.h), a service on the
// scheduler's Submission. Internal to src/runtime; exists only with
// RuleOptions::adaptive_capacity.
//
// Once per interval, on the scheduler's timer, it samples each signal (CPU's stall counter and
// those of rule.signals: a stall counter's increase over the interval divided by it, memory use
// as read) and applies the rule (NextCapacityOfAll) to the global cap in force, through
// Submission::ChangeCapacity: a cap that grew admits what it now has room for. A signal that
// cannot be read is counted; CPU's leaves the cap where it is, another's blocks growth.
//
// Thread safety: Tick and NextDue are called by the timer's thread only; the constructor takes a
// first sample.
#ifndef FAIRGATE_RUNTIME_CAPACITY_CONTROLLER_H_
#define FAIRGATE_RUNTIME_CAPACITY_CONTROLLER_H_

#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "fairgate/adaptive_capacity.h"
#include "fairgate/context.h"
#include "fairgate/status.h"
#include "runtime/submission.h"

namespace fairgate::internal {

// The readers of adaptive capacity's signals: CPU's stall counter, and one per rule.signals, in
// order (see PressureSignal::read): the caller's, or the kernel's (kernel_pressure.h).
struct CapacitySignals {
  std::function<StatusOr<double>()> cpu;
  std::vector<std::function<StatusOr<double>()>> others;
};

// The readers of `rule`'s signals: the caller's where it gave one, else the kernel's, which must
// be readable now (from the process's own cgroup v2 if it runs in one); FailedPrecondition naming
// the first that is not.
StatusOr<CapacitySignals> CapacitySignalsOf(const AdaptiveCapacity& rule);

class CapacityController {
 public:
  using Clock = Context::Clock;
  using Reader = std::function<StatusOr<double>()>;
  CapacityController(Submission& scheduler, const AdaptiveCapacity& rule, int max_concurrency,
                     CapacitySignals signals);

  // When the rule is applied next.
  Clock::time_point NextDue() const { return next_; }
  // Applies the rule if its interval has passed by `now`.
  void Tick(Clock::time_point now);

 private:
  // One signal's reader and its last reading.
  struct Signal {
    Reader read;
    bool counter = true;  // a stall counter (its rate is the signal), else a level
    std::optional<std::pair<Clock::time_point, double>> last;
  };
  // The signal since its previous sample, or nothing when it cannot be read (counted) or a
  // counter has no previous sample.
  std::optional<double> Sample(Signal& signal, Clock::time_point now);

  Submission& scheduler_;
  const AdaptiveCapacity rule_;
  const int max_concurrency_;
  Signal cpu_;
  std::vector<Signal> signals_;
  const Clock::duration interval_;
  Clock::time_point next_;
};

}  // namespace fairgate::internal

#endif  // FAIRGATE_RUNTIME_CAPACITY_CONTROLLER_H_

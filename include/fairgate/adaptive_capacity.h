// fairgate/adaptive_capacity.h: a global cap that follows what the machine sustains.
//
// A fixed max_concurrency of 8 on a 2-core machine admits 8 CPU-bound jobs that each run about
// 4x slower: wall-time costs inflate, and a light client's one job is slowed by everyone else's.
// With RuleOptions::adaptive_capacity the global cap in force moves between `min` and
// max_concurrency by additive increase, multiplicative decrease (AIMD) on CPU pressure: the share
// of wall time in which some runnable task waited for a CPU (Linux pressure stall information,
// the `some` line of /proc/pressure/cpu), measured over each `interval`.
//
// The rule, applied once per interval (NextCapacity):
// - pressure above `high`: the cap shrinks to floor(cap * decrease), by at least one slot, not
//   below `min`;
// - pressure below `low` while work waits for admission: the cap grows by one slot, up to
//   max_concurrency;
// - otherwise it stays.
// Nothing running is stopped: a lower cap admits nothing until the running jobs' slots are below
// it. The cap starts at max_concurrency (what a fixed cap would be). Its value is in
// Snapshot::capacity and the metric fairgate_capacity. A multi-slot type wider than `min` waits
// while the cap is below its slots: keep `min` at least the widest type's slots.
//
// Thread safety: a plain value type.
#ifndef FAIRGATE_ADAPTIVE_CAPACITY_H_
#define FAIRGATE_ADAPTIVE_CAPACITY_H_

#include <functional>

#include "fairgate/export.h"
#include "fairgate/seconds.h"
#include "fairgate/status.h"

namespace fairgate {

struct AdaptiveCapacity {
  int min = 1;             // the least cap, >= 1 and <= max_concurrency
  Seconds interval{1.0};   // between two applications of the rule, finite and > 0
  double high = 0.2;       // pressure above which the cap shrinks, in (0, 1]
  double low = 0.05;       // pressure below which, with work waiting, it grows; in [0, high)
  double decrease = 0.75;  // the factor of a shrink, in (0, 1)
  // The runtime's signal: the cumulative seconds some task has stalled for a CPU, a counter that
  // only grows (its increase over an interval, divided by the interval, is the pressure). Empty:
  // the `some ... total=` microseconds of /proc/pressure/cpu; Scheduler::Create fails with
  // FailedPrecondition when that cannot be read. An error from it leaves the cap where it is.
  // Called once per interval on the scheduler's timer thread, outside its lock: it must be quick
  // and must not call the scheduler.
  // The simulator ignores it: it models the pressure of its machine (docs/simulator.md).
  std::function<StatusOr<double>()> stalled_seconds;
};

// The cap after one interval with `pressure` (in [0, 1]) from `current`, with
// `max_concurrency` the highest it may be and `work_waiting` whether jobs wait for admission.
FAIRGATE_EXPORT int NextCapacity(const AdaptiveCapacity& rule, int current, int max_concurrency,
                                 double pressure, bool work_waiting);

// Returns OK when `rule` is valid under `max_concurrency`, else InvalidArgument naming the field.
FAIRGATE_EXPORT Status ValidateAdaptiveCapacity(const AdaptiveCapacity& rule, int max_concurrency);

}  // namespace fairgate

#endif  // FAIRGATE_ADAPTIVE_CAPACITY_H_

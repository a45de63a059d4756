// fairgate/latency_capacity.h: a global cap that follows how much slower jobs run, with no
// threshold to tune.
//
// Adaptive capacity (fairgate/adaptive_capacity.h) shrinks the cap when the kernel reports
// pressure above a threshold, and someone has to choose the threshold. With
// RuleOptions::latency_capacity the cap follows the jobs' own run times instead: a job that runs
// slower than it did unloaded says the machine is past its knee, however that shows (CPU, memory,
// disk, a lock, a downstream service).
//
// The rule, applied at the end of each `interval` (gradient-style, as Envoy's adaptive
// concurrency and Netflix's Gradient limits are):
// - Of the jobs completed in the interval, only those admitted since the cap last changed count
//   (a job admitted under the old cap says nothing about the new one). Per type, their median run
//   time is the type's recent run time; the type's baseline is the least recent run time seen
//   since the baseline was last re-measured.
// - The gradient is the mean over those jobs of baseline / recent of their type (1: no
//   slowdown; 0.5: they took twice as long). No such job in the interval: the cap stays.
// - Gradient below 1 / 1.1 (run times more than 10 % above the baseline, past what a busy
//   machine's noise explains): the cap becomes round(cap * gradient), at least one slot less, not
//   below `min`. On a machine whose knee is k slots, a cap of n > k runs jobs n / k times slower,
//   so cap * gradient is the knee.
// - Otherwise, while work waits for admission: at first (until the first slowdown) the cap grows
//   by a quarter, at least one slot; after that by one slot, as a probe: at once after a probe that
//   showed no slowdown, else after as many intervals as the last failed probe waited, doubled, at
//   most `remeasure_every`. The cap never exceeds max_concurrency.
// - Every `remeasure_every` intervals the baselines are measured again: the cap is halved (not
//   below `min`) until jobs admitted since then complete (at most three intervals), their medians
//   become the baselines, and the cap returns to what it was. So a baseline that no longer holds
//   (the jobs became slower for good) is replaced, at the price of those intervals' throughput.
// The cap starts at `min`. Nothing running is stopped: a lower cap admits nothing until the
// running jobs' slots are below it. Its value is in Snapshot::capacity and the metric
// fairgate_capacity. The rule learns from the run times the scheduler measures itself (its own
// wall clock from admission to completion); a job completed without a measurement (lost with its
// worker, or run elsewhere) teaches it nothing, and of more than 4,096 completions in one
// interval the rule reads the first 4,096. `interval` should span several run times of the
// common jobs: an interval in which no job admitted under the current cap completes changes
// nothing. Keep `min` at least the widest type's slots.
//
// The simulator runs the same rule on its machine model (docs/simulator.md, "A limit from
// latency", with a table against fixed caps and against adaptive capacity).
//
// Not with RuleOptions::adaptive_capacity: one rule moves the cap.
//
// Thread safety: a plain value type.
#ifndef FAIRGATE_LATENCY_CAPACITY_H_
#define FAIRGATE_LATENCY_CAPACITY_H_

#include "fairgate/export.h"
#include "fairgate/seconds.h"
#include "fairgate/status.h"

namespace fairgate {

struct LatencyCapacity {
  int min = 1;               // the least cap, and the first: >= 1 and <= max_concurrency
  Seconds interval{1.0};     // between two applications of the rule, finite and > 0
  int remeasure_every = 60;  // intervals between two re-measurements of the baselines, >= 2
};

// Returns OK when `rule` is valid under `max_concurrency`, else InvalidArgument naming the field.
FAIRGATE_EXPORT Status ValidateLatencyCapacity(const LatencyCapacity& rule, int max_concurrency);

}  // namespace fairgate

#endif  // FAIRGATE_LATENCY_CAPACITY_H_

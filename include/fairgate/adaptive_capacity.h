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
// More signals (`signals`, PressureSignal): memory and disk pressure (the `some` and `full`
// lines of Linux's memory and io pressure), and the memory a cgroup uses against its limit, each
// with thresholds of its own. The cap follows the worst: it shrinks when any signal is above its
// `high`, and grows only when every signal is below its `low` (and work waits). A signal that
// cannot be read in an interval is counted; it blocks growth in that interval and shrinks
// nothing. DefaultPressureSignals() gives memory and io pressure; none is read unless asked for.
//
// Where the kernel's signals come from: when the process runs in a cgroup v2 of its own (a line
// `0::/path` of /proc/self/cgroup, path not "/"), that cgroup's cpu.pressure, memory.pressure,
// io.pressure, memory.current and memory.max (under /sys/fs/cgroup, or /sys/fs/cgroup/unified
// on a hybrid hierarchy), so that a container or a systemd service follows its own pressure, not
// the machine's; else (or where the cgroup's pressure file cannot be read) the machine's
// /proc/pressure/cpu, /memory and /io. Memory use is the memory the cgroup holds less the page
// cache the kernel reclaims first (memory.current less memory.stat's inactive_file), over its
// limit, memory.max: what a working set is, since a cgroup's page cache fills it to its limit
// whatever its processes need. Where memory is still on cgroup v1 (a hybrid hierarchy: a line
// `N:memory:/path`), the v1 controller's memory.usage_in_bytes less total_inactive_file, over the
// least of its memory.limit_in_bytes and a parent's (hierarchical_memory_limit). Without a limit
// in either, Scheduler::Create fails with FailedPrecondition for a kMemoryUse signal the caller
// does not read itself.
//
// Thread safety: a plain value type.
#ifndef FAIRGATE_ADAPTIVE_CAPACITY_H_
#define FAIRGATE_ADAPTIVE_CAPACITY_H_

#include <functional>
#include <optional>
#include <vector>

#include "fairgate/export.h"
#include "fairgate/seconds.h"
#include "fairgate/status.h"

namespace fairgate {

// What a PressureSignal reads.
enum class PressureSource {
  kMemorySome,  // the share of time some task stalled on memory (reclaim, refaults, swap-in)
  kMemoryFull,  // the share of time every non-idle task stalled on memory at once
  kIoSome,      // the share of time some task stalled on io
  kIoFull,      // the share of time every non-idle task stalled on io at once
  kMemoryUse,   // the cgroup's memory in use over its limit now (a level, not a share of time;
                // the header comment says what "in use" counts)
};

// A signal adaptive capacity follows besides CPU pressure, with its own thresholds.
struct PressureSignal {
  PressureSource source = PressureSource::kMemorySome;
  double high = 0.2;  // above it the cap shrinks; in (0, 1]
  double low = 0.05;  // below it (every other signal below its own too) the cap may grow; [0, high)
  // The reading, as AdaptiveCapacity::stalled_seconds is CPU's: for the stall sources the
  // cumulative seconds stalled, a counter that only grows; for kMemoryUse the share of the limit
  // in use now, in [0, 1]. Empty: the kernel's (see the header comment). Called once per interval
  // on the scheduler's timer thread, outside its lock: quick, and not calling the scheduler.
  std::function<StatusOr<double>()> read;
};

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
  // More signals (the header comment), at most one of each source. Empty (the default): CPU
  // pressure only. The simulator models memory some and memory use on a machine with memory and
  // refuses the others (docs/simulator.md).
  std::vector<PressureSignal> signals;
};

// Memory and io pressure (`some`), at the thresholds of CPU's: a starting point, not a
// measurement; a server that knows its memory's knee sets its own.
FAIRGATE_EXPORT std::vector<PressureSignal> DefaultPressureSignals();

// The cap after one interval in which CPU pressure was `cpu` and each of rule.signals read
// `signals[i]` (a share in [0, 1]; nullopt: it could not be read), from `current`: shrunk as
// NextCapacity's when any reading is above its high, grown by one when every reading is known
// and below its low and work waits, else the same. `signals` has one reading per rule.signals.
FAIRGATE_EXPORT int NextCapacityOfAll(const AdaptiveCapacity& rule, int current,
                                      int max_concurrency, double cpu,
                                      const std::vector<std::optional<double>>& signals,
                                      bool work_waiting);

// The cap after one interval with `pressure` (in [0, 1]) from `current`, with
// `max_concurrency` the highest it may be and `work_waiting` whether jobs wait for admission.
FAIRGATE_EXPORT int NextCapacity(const AdaptiveCapacity& rule, int current, int max_concurrency,
                                 double pressure, bool work_waiting);

// Returns OK when `rule` is valid under `max_concurrency`, else InvalidArgument naming the field.
FAIRGATE_EXPORT Status ValidateAdaptiveCapacity(const AdaptiveCapacity& rule, int max_concurrency);

}  // namespace fairgate

#endif  // FAIRGATE_ADAPTIVE_CAPACITY_H_

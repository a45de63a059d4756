// What a periodic job (fairgate/periodic.h) shares between its PeriodicJob handles and the
// scheduler's timer. It holds nothing of the scheduler, so a handle outlives it safely.
#ifndef FAIRGATE_RUNTIME_PERIODIC_STATE_H_
#define FAIRGATE_RUNTIME_PERIODIC_STATE_H_

#include <atomic>
#include <cstdint>
#include <string>

#include "fairgate/options.h"
#include "fairgate/periodic.h"
#include "fairgate/scheduler.h"

namespace fairgate::internal {

struct PeriodicState {
  std::string type, id, fairness_key;
  Seconds interval{0};
  Scheduler::JobFn fn;
  PeriodicOptions options;
  std::atomic<bool> stopped{false};    // set by Stop; the timer and each run's end read it
  std::atomic<std::uint64_t> runs{0};  // runs reported to on_run
};

}  // namespace fairgate::internal

#endif  // FAIRGATE_RUNTIME_PERIODIC_STATE_H_

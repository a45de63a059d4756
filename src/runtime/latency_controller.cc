#include "runtime/latency_controller.h"

#include <chrono>

namespace fairgate::internal {

LatencyController::LatencyController(Submission& scheduler, const LatencyCapacity& rule,
                                     int max_concurrency)
    : scheduler_(scheduler),
      rule_(rule, max_concurrency),
      interval_(std::chrono::duration_cast<Clock::duration>(rule.interval)),
      next_(Clock::now() + interval_) {}

void LatencyController::Tick(Clock::time_point now) {
  if (now < next_) return;
  next_ = now + interval_;
  scheduler_.ChangeCapacity([&](const Submission::CapacityInputs& in) {
    return rule_.Next(in.now, in.current, in.work_waiting, in.runs);
  });
}

}  // namespace fairgate::internal

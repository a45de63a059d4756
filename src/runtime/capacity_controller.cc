#include "runtime/capacity_controller.h"

#include <algorithm>
#include <chrono>

namespace fairgate::internal {

CapacityController::CapacityController(Submission& scheduler, const AdaptiveCapacity& rule,
                                       int max_concurrency,
                                       std::function<StatusOr<double>()> stalled_seconds)
    : scheduler_(scheduler),
      rule_(rule),
      max_concurrency_(max_concurrency),
      stalled_seconds_(std::move(stalled_seconds)),
      interval_(std::chrono::duration_cast<Clock::duration>(rule.interval)) {
  // The rule is applied every interval, from a first sample taken now.
  Sample(Clock::now());
  next_ = Clock::now() + interval_;
}

void CapacityController::Tick(Clock::time_point now) {
  if (now < next_) return;
  next_ = now + interval_;
  const std::optional<double> pressure = Sample(now);
  if (!pressure) return;
  scheduler_.ChangeCapacity([&](int current, bool work_waiting) {
    return NextCapacity(rule_, current, max_concurrency_, *pressure, work_waiting);
  });
}

std::optional<double> CapacityController::Sample(Clock::time_point now) {
  StatusOr<double> stalled = stalled_seconds_();
  if (!stalled.ok()) {
    scheduler_.CountCapacitySignalFailed();
    return std::nullopt;
  }
  std::optional<double> pressure;
  if (last_sample_) {
    const double wall = std::chrono::duration<double>(now - last_sample_->first).count();
    if (wall > 0) pressure = std::clamp((*stalled - last_sample_->second) / wall, 0.0, 1.0);
  }
  last_sample_ = {now, *stalled};
  return pressure;
}

}  // namespace fairgate::internal

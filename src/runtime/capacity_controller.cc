#include "runtime/capacity_controller.h"

#include <algorithm>
#include <chrono>

namespace fairgate::internal {

CapacityController::CapacityController(Submission& scheduler, const AdaptiveCapacity& rule,
                                       int max_concurrency, CapacitySignals signals)
    : scheduler_(scheduler),
      rule_(rule),
      max_concurrency_(max_concurrency),
      interval_(std::chrono::duration_cast<Clock::duration>(rule.interval)) {
  cpu_.read = std::move(signals.cpu);
  for (std::size_t i = 0; i < signals.others.size(); ++i) {
    signals_.push_back({std::move(signals.others[i]),
                        rule.signals[i].source != PressureSource::kMemoryUse, std::nullopt});
  }
  // The rule is applied every interval, from a first sample taken now.
  const Clock::time_point now = Clock::now();
  Sample(cpu_, now);
  for (Signal& signal : signals_) Sample(signal, now);
  next_ = now + interval_;
}

void CapacityController::Tick(Clock::time_point now) {
  if (now < next_) return;
  next_ = now + interval_;
  const std::optional<double> cpu = Sample(cpu_, now);
  std::vector<std::optional<double>> readings;
  readings.reserve(signals_.size());
  for (Signal& signal : signals_) readings.push_back(Sample(signal, now));
  if (!cpu) return;
  scheduler_.ChangeCapacity([&](int current, bool work_waiting) {
    return NextCapacityOfAll(rule_, current, max_concurrency_, *cpu, readings, work_waiting);
  });
}

std::optional<double> CapacityController::Sample(Signal& signal, Clock::time_point now) {
  StatusOr<double> read = signal.read();
  if (!read.ok()) {
    scheduler_.CountCapacitySignalFailed();
    return std::nullopt;
  }
  if (!signal.counter) return std::clamp(*read, 0.0, 1.0);
  std::optional<double> pressure;
  if (signal.last) {
    const double wall = std::chrono::duration<double>(now - signal.last->first).count();
    if (wall > 0) pressure = std::clamp((*read - signal.last->second) / wall, 0.0, 1.0);
  }
  signal.last = {now, *read};
  return pressure;
}

}  // namespace fairgate::internal

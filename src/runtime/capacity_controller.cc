#include "runtime/capacity_controller.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/kernel_pressure.h"

namespace fairgate::internal {

StatusOr<CapacitySignals> CapacitySignalsOf(const AdaptiveCapacity& rule) {
  const std::optional<std::string> cgroup = OwnCgroupV2();
  const std::optional<std::string> memory_v1 = OwnMemoryCgroupV1();
  auto reader = [&](std::optional<PressureSource> source,
                    const std::function<StatusOr<double>()>& given,
                    const std::string& what) -> StatusOr<std::function<StatusOr<double>()>> {
    if (given) return given;
    auto read = KernelSignal(source, cgroup, memory_v1);
    if (!read.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("adaptive_capacity needs ", what, ": ", read.status().message()));
    }
    return read;
  };
  CapacitySignals signals;
  auto cpu = reader(std::nullopt, rule.stalled_seconds, "CPU pressure stall information");
  if (!cpu.ok()) return cpu.status();
  signals.cpu = *std::move(cpu);
  for (std::size_t i = 0; i < rule.signals.size(); ++i) {
    auto read =
        reader(rule.signals[i].source, rule.signals[i].read, absl::StrCat("signals[", i, "]"));
    if (!read.ok()) return read.status();
    signals.others.push_back(*std::move(read));
  }
  return signals;
}

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
  scheduler_.ChangeCapacity([&](const Submission::CapacityInputs& in) {
    return NextCapacityOfAll(rule_, in.current, max_concurrency_, *cpu, readings, in.work_waiting);
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

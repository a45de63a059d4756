#include "core/latency_rule.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "absl/strings/str_cat.h"

namespace fairgate {

Status ValidateLatencyCapacity(const LatencyCapacity& rule, int max_concurrency) {
  if (rule.min < 1 || rule.min > max_concurrency) {
    return absl::InvalidArgumentError(
        absl::StrCat("latency_capacity.min must be in [1, max_concurrency ", max_concurrency,
                     "], got ", rule.min));
  }
  if (const double interval = rule.interval.count(); !std::isfinite(interval) || interval <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("latency_capacity.interval must be finite and > 0, got ", interval));
  }
  if (rule.remeasure_every < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "latency_capacity.remeasure_every must be >= 2 intervals, got ", rule.remeasure_every));
  }
  return absl::OkStatus();
}

namespace core {

namespace {

// Run times more than this factor above the baseline are a slowdown.
constexpr double kTolerance = 1.1;
// Re-measuring waits at most this many intervals for a job admitted since it began to complete.
constexpr int kRemeasureWait = 3;

// The median run time of each type among `runs` admitted at or after `since`, with their count;
// by type name, so that the gradient is summed in one order whatever the runs' (deterministic).
struct Recent {
  double median;
  int count;
};
std::map<std::string, Recent> RecentRunTimes(const std::vector<RunSample>& runs, double since) {
  std::map<std::string, std::vector<double>> by_type;
  for (const RunSample& run : runs) {
    if (run.start >= since) by_type[run.type].push_back(run.run_time);
  }
  std::map<std::string, Recent> recent;
  for (auto& [type, times] : by_type) {
    // The lower median: of an even count, the smaller of the two middle values.
    auto middle = times.begin() + (times.size() - 1) / 2;
    std::nth_element(times.begin(), middle, times.end());
    recent[type] = {*middle, static_cast<int>(times.size())};
  }
  return recent;
}

}  // namespace

LatencyRule::LatencyRule(const LatencyCapacity& rule, int max_concurrency)
    : rule_(rule),
      max_concurrency_(max_concurrency),
      changed_at_(-std::numeric_limits<double>::infinity()) {}

int LatencyRule::ChangeTo(double now, int current, int next) {
  if (next != current) changed_at_ = now;
  return next;
}

int LatencyRule::Next(double now, int current, bool work_waiting,
                      const std::vector<RunSample>& runs) {
  const std::map<std::string, Recent> recent = RecentRunTimes(runs, changed_at_);
  if (phase_ == Phase::kRemeasuring) {
    if (recent.empty() && ++remeasure_waited_ < kRemeasureWait) return current;
    for (const auto& [type, times] : recent) baseline_[type] = times.median;
    // Back where it was: a probe's countdown goes on (a probe cut short by the re-measurement
    // counts as neither failed nor passed).
    phase_ = phase_before_;
    probing_ = false;
    // A change even if the cap is the same: runs admitted while it was low are not counted.
    changed_at_ = now;
    return std::clamp(saved_cap_, rule_.min, max_concurrency_);
  }
  if (++intervals_since_remeasure_ >= rule_.remeasure_every) {
    intervals_since_remeasure_ = 0;
    phase_before_ = phase_;
    phase_ = Phase::kRemeasuring;
    saved_cap_ = current;
    remeasure_waited_ = 0;
    changed_at_ = now;
    return std::max(rule_.min, current / 2);
  }
  if (recent.empty()) return current;

  double sum = 0;
  int count = 0;
  for (const auto& [type, times] : recent) {
    auto [it, added] = baseline_.try_emplace(type, times.median);
    if (!added) it->second = std::min(it->second, times.median);
    // A run time of 0 with a baseline of 0: no slowdown.
    const double ratio = times.median > 0 ? it->second / times.median : 1.0;
    sum += ratio * times.count;
    count += times.count;
  }
  gradient_ = sum / count;

  if (gradient_ < 1 / kTolerance) {
    if (probing_) probe_spacing_ = std::min(2 * probe_spacing_, rule_.remeasure_every);
    probing_ = false;
    phase_ = Phase::kSteady;
    probe_in_ = probe_spacing_;
    const int shrunk = static_cast<int>(std::lround(current * gradient_));
    return ChangeTo(now, current, std::max(rule_.min, std::min(current - 1, shrunk)));
  }
  if (probing_) {  // the probe showed no slowdown: the knee is higher, probe again at once
    probe_spacing_ = 1;
    probe_in_ = 1;
  }
  probing_ = false;
  if (!work_waiting || current >= max_concurrency_) return current;
  if (phase_ == Phase::kStarting) {
    return ChangeTo(now, current, std::min(max_concurrency_, current + std::max(1, current / 4)));
  }
  if (--probe_in_ > 0) return current;
  probing_ = true;
  probe_in_ = probe_spacing_;
  return ChangeTo(now, current, current + 1);
}

}  // namespace core
}  // namespace fairgate

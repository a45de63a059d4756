#include "fairgate/adaptive_capacity.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"

namespace fairgate {

namespace {

int Shrunk(const AdaptiveCapacity& rule, int current) {
  const int shrunk = std::min(current - 1, static_cast<int>(std::floor(current * rule.decrease)));
  return std::max(rule.min, shrunk);
}

const char* NameOf(PressureSource source) {
  switch (source) {
    case PressureSource::kMemorySome:
      return "memory some";
    case PressureSource::kMemoryFull:
      return "memory full";
    case PressureSource::kIoSome:
      return "io some";
    case PressureSource::kIoFull:
      return "io full";
    case PressureSource::kMemoryUse:
      return "memory use";
  }
  return "unknown";
}

}  // namespace

int NextCapacity(const AdaptiveCapacity& rule, int current, int max_concurrency, double pressure,
                 bool work_waiting) {
  if (pressure > rule.high) return Shrunk(rule, current);
  if (pressure < rule.low && work_waiting) return std::min(max_concurrency, current + 1);
  return current;
}

int NextCapacityOfAll(const AdaptiveCapacity& rule, int current, int max_concurrency, double cpu,
                      const std::vector<std::optional<double>>& signals, bool work_waiting) {
  bool all_low = cpu < rule.low;
  if (cpu > rule.high) return Shrunk(rule, current);
  for (std::size_t i = 0; i < signals.size() && i < rule.signals.size(); ++i) {
    if (!signals[i]) {
      all_low = false;
    } else if (*signals[i] > rule.signals[i].high) {
      return Shrunk(rule, current);
    } else if (!(*signals[i] < rule.signals[i].low)) {
      all_low = false;
    }
  }
  if (signals.size() < rule.signals.size()) all_low = false;
  if (all_low && work_waiting) return std::min(max_concurrency, current + 1);
  return current;
}

std::vector<PressureSignal> DefaultPressureSignals() {
  PressureSignal memory, io;
  memory.source = PressureSource::kMemorySome;
  io.source = PressureSource::kIoSome;
  return {memory, io};
}

Status ValidateAdaptiveCapacity(const AdaptiveCapacity& rule, int max_concurrency) {
  if (rule.min < 1 || rule.min > max_concurrency) {
    return absl::InvalidArgumentError(
        absl::StrCat("adaptive_capacity.min must be in [1, max_concurrency ", max_concurrency,
                     "], got ", rule.min));
  }
  if (const double interval = rule.interval.count(); !std::isfinite(interval) || interval <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("adaptive_capacity.interval must be finite and > 0, got ", interval));
  }
  if (!(rule.high > 0 && rule.high <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("adaptive_capacity.high must be in (0, 1], got ", rule.high));
  }
  if (!(rule.low >= 0 && rule.low < rule.high)) {
    return absl::InvalidArgumentError(
        absl::StrCat("adaptive_capacity.low must be in [0, high ", rule.high, "), got ", rule.low));
  }
  if (!(rule.decrease > 0 && rule.decrease < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("adaptive_capacity.decrease must be in (0, 1), got ", rule.decrease));
  }
  std::vector<PressureSource> seen;
  for (std::size_t i = 0; i < rule.signals.size(); ++i) {
    const PressureSignal& signal = rule.signals[i];
    const std::string where =
        absl::StrCat("adaptive_capacity.signals[", i, "] (", NameOf(signal.source), ")");
    if (static_cast<int>(signal.source) < 0 ||
        static_cast<int>(signal.source) > static_cast<int>(PressureSource::kMemoryUse)) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": not a pressure source"));
    }
    if (std::find(seen.begin(), seen.end(), signal.source) != seen.end()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": a second signal of that source"));
    }
    seen.push_back(signal.source);
    if (!(signal.high > 0 && signal.high <= 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".high must be in (0, 1], got ", signal.high));
    }
    if (!(signal.low >= 0 && signal.low < signal.high)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".low must be in [0, high ", signal.high, "), got ", signal.low));
    }
  }
  return absl::OkStatus();
}

}  // namespace fairgate

#include "fairgate/adaptive_capacity.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace fairgate {

int NextCapacity(const AdaptiveCapacity& rule, int current, int max_concurrency, double pressure,
                 bool work_waiting) {
  if (pressure > rule.high) {
    const int shrunk = std::min(current - 1, static_cast<int>(std::floor(current * rule.decrease)));
    return std::max(rule.min, shrunk);
  }
  if (pressure < rule.low && work_waiting) return std::min(max_concurrency, current + 1);
  return current;
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
  return absl::OkStatus();
}

}  // namespace fairgate

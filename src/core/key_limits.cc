#include "fairgate/key_limits.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace fairgate {

Status ValidateKeyLimits(const KeyLimits& limits) {
  if (limits.max_running < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_running must be >= 1, got ", limits.max_running));
  }
  if (limits.min_running < 0 || limits.min_running > limits.max_running) {
    return absl::InvalidArgumentError(absl::StrCat("min_running must be in [0, max_running ",
                                                   limits.max_running, "], got ",
                                                   limits.min_running));
  }
  return ValidateRateLimit(limits.rate_limit, "rate_limit");
}

Status ValidateKeyWeight(double weight) {
  if (!(std::isfinite(weight) && weight > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("key weight must be finite and > 0, got ", weight));
  }
  return absl::OkStatus();
}

}  // namespace fairgate

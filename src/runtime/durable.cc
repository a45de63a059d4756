// The retry policy of durable jobs (fairgate/durable.h).
#include "fairgate/durable.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace fairgate {

Status ValidateRetryPolicy(const RetryPolicy& policy) {
  if (policy.max_attempts < 1) {
    return absl::InvalidArgumentError("retry max_attempts must be >= 1, got 0");
  }
  const double initial = policy.initial_backoff.count();
  const double max = policy.max_backoff.count();
  if (!std::isfinite(initial) || initial < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("retry initial_backoff must be finite and >= 0 seconds, got ", initial));
  }
  if (!std::isfinite(max) || max < initial) {
    return absl::InvalidArgumentError(absl::StrCat(
        "retry max_backoff must be finite and >= initial_backoff (", initial, " s), got ", max));
  }
  if (!std::isfinite(policy.multiplier) || policy.multiplier < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("retry multiplier must be finite and >= 1, got ", policy.multiplier));
  }
  return absl::OkStatus();
}

Seconds RetryBackoff(const RetryPolicy& policy, std::uint32_t failed_attempts) {
  const double exponent = failed_attempts > 0 ? failed_attempts - 1.0 : 0.0;
  // pow may overflow to infinity for many attempts; min caps it.
  const double wait = policy.initial_backoff.count() * std::pow(policy.multiplier, exponent);
  return Seconds(std::min(std::isfinite(wait) ? wait : policy.max_backoff.count(),
                          policy.max_backoff.count()));
}

}  // namespace fairgate

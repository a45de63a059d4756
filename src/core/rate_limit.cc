#include "fairgate/rate_limit.h"

#include <charconv>
#include <cmath>
#include <string>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/token_bucket.h"

namespace fairgate {

namespace {

// The payload of a refusal for want of a token: the seconds to wait, as text.
constexpr absl::string_view kRetryAfterUrl = "fairgate.RetryAfter";

}  // namespace

std::optional<double> RetryAfter(const Status& status) {
  if (status.code() != absl::StatusCode::kResourceExhausted) return std::nullopt;
  const absl::optional<absl::Cord> payload = status.GetPayload(kRetryAfterUrl);
  double seconds = 0;
  if (!payload || !absl::SimpleAtod(std::string(*payload), &seconds)) return std::nullopt;
  return seconds;
}

namespace core {

Status WithRetryAfter(Status status, double seconds) {
  // The shortest text that reads back as the same double.
  char text[32];
  const std::to_chars_result written = std::to_chars(text, text + sizeof text, seconds);
  status.SetPayload(kRetryAfterUrl, absl::Cord(absl::string_view(text, written.ptr - text)));
  return status;
}

Status RefusedForToken(std::string_view what, double seconds) {
  return WithRetryAfter(absl::ResourceExhaustedError(
                            absl::StrCat(absl::string_view(what.data(), what.size()),
                                         " has no token: the next is due in ", seconds, " s")),
                        seconds);
}

std::string TypeRateName(std::string_view type) {
  return absl::StrCat("job type '", absl::string_view(type.data(), type.size()), "''s rate limit");
}

std::string KeyRateName(std::string_view key) {
  return absl::StrCat("fairness key '", absl::string_view(key.data(), key.size()),
                      "''s rate limit");
}

}  // namespace core

Status ValidateRateLimit(const RateLimit& limit, std::string_view field) {
  const absl::string_view name(field.data(), field.size());
  // Written so that NaN fails too.
  if (!(std::isfinite(limit.per_second) && limit.per_second >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ".per_second must be finite and >= 0, got ", limit.per_second));
  }
  if (!(std::isfinite(limit.burst) && limit.burst >= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ".burst must be finite and >= 1, got ", limit.burst));
  }
  return absl::OkStatus();
}

}  // namespace fairgate

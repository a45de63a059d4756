#include "fairgate/rate_limit.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace fairgate {

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

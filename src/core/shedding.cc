#include "fairgate/shedding.h"

#include <cmath>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "core/shed_watch.h"
#include "core/token_bucket.h"

namespace fairgate {
namespace {

// The payload that marks a refusal by shedding (WasShed).
constexpr absl::string_view kShedUrl = "fairgate.Shed";

}  // namespace

Status ValidateShedding(const Shedding& shedding, std::string_view field) {
  const absl::string_view f(field.data(), field.size());
  if (const double target = shedding.target.count(); !std::isfinite(target) || target < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(f, ".target must be finite and >= 0, got ", target));
  }
  if (const double interval = shedding.interval.count();
      !std::isfinite(interval) || interval <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(f, ".interval must be finite and > 0, got ", interval));
  }
  return absl::OkStatus();
}

bool WasShed(const Status& status) {
  return status.code() == absl::StatusCode::kResourceExhausted &&
         status.GetPayload(kShedUrl).has_value();
}

namespace core {

Status ShedStatus(std::string message, double retry_after) {
  Status status = WithRetryAfter(absl::ResourceExhaustedError(message), retry_after);
  status.SetPayload(kShedUrl, absl::Cord("1"));
  return status;
}

}  // namespace core
}  // namespace fairgate

#include "fairgate/job_type.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace fairgate {

Status ValidateJobType(std::string_view name, const JobTypeConfig& config) {
  if (name.empty()) return absl::InvalidArgumentError("job type name is empty");
  const absl::string_view n(name.data(), name.size());
  if (config.priority < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("job type '", n, "': priority must be >= 1, got ", config.priority));
  }
  if (config.max_concurrency < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "job type '", n, "': max_concurrency must be >= 1, got ", config.max_concurrency));
  }
  if (config.slots < 1 || config.slots > config.priority) {
    return absl::InvalidArgumentError(
        absl::StrCat("job type '", n, "': slots must be >= 1 and at most its priority (",
                     config.priority, "), got ", config.slots));
  }
  if (config.conflict_limit < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "job type '", n, "': conflict_limit must be >= 1, got ", config.conflict_limit));
  }
  if (config.conflict_limit != 1 && config.conflict_group.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "job type '", n, "': conflict_limit ", config.conflict_limit, " needs a conflict_group"));
  }
  if (!std::isfinite(config.default_cost) || config.default_cost < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "job type '", n, "': default_cost must be finite and >= 0, got ", config.default_cost));
  }
  return absl::OkStatus();
}

}  // namespace fairgate

#include "fairgate/group_limits.h"

#include "absl/strings/str_cat.h"

namespace fairgate {

Status ValidateGroupLimits(const GroupLimits& limits) {
  if (limits.max_running < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("a group's max_running must be >= 1, got ", limits.max_running));
  }
  if (limits.min_running < 0 || limits.min_running > limits.max_running) {
    return absl::InvalidArgumentError(
        absl::StrCat("a group's min_running must be in [0, max_running ", limits.max_running,
                     "], got ", limits.min_running));
  }
  return absl::OkStatus();
}

}  // namespace fairgate

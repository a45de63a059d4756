#include "core/timed_steps.h"

#include "absl/strings/str_cat.h"

namespace fairgate::core {

Status TimedSteps::CheckSizes(std::size_t promoting, std::size_t expiring) const {
  if (promoting != promotions_.size()) {
    return absl::InternalError("the aging queue holds stale steps");
  }
  if (expiring != expiries_.size())
    return absl::InternalError("the expiry queue holds stale limits");
  for (const auto& [job, clock] : clocks_) {
    if (job->state != JobState::kReady && job->state != JobState::kParked) {
      return absl::InternalError(
          absl::StrCat("job ", job->seq, " has a pause clock but is not pending"));
    }
  }
  return absl::OkStatus();
}

}  // namespace fairgate::core

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "fairgate/worker.h"

namespace fairgate {

namespace {

// A job's loss with its worker reads "worker '<name>' was removed while the job ran on it": the
// message is the marker (a payload would print in every log line of the status).
constexpr absl::string_view kLostPrefix = "worker '";
constexpr absl::string_view kLostSuffix = "' was removed while the job ran on it";

}  // namespace

bool WorkerServes(const WorkerConfig& worker, std::string_view type,
                  const JobTypeConfig& type_config) {
  return worker.slots >= type_config.slots && WorkerNames(worker, type, type_config);
}

bool WorkerNames(const WorkerConfig& worker, std::string_view type,
                 const JobTypeConfig& type_config) {
  if (std::find(worker.types.begin(), worker.types.end(), type) != worker.types.end()) return true;
  for (const std::string& tag : worker.tags) {
    if (std::find(type_config.tags.begin(), type_config.tags.end(), tag) !=
        type_config.tags.end()) {
      return true;
    }
  }
  return false;
}

Status ValidateWorker(std::string_view name, const WorkerConfig& config) {
  if (name.empty()) return absl::InvalidArgumentError("worker name is empty");
  const absl::string_view n(name.data(), name.size());
  if (config.slots < 1 || config.slots > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("worker '", n, "': slots must be >= 1 and at most 65535, got ", config.slots));
  }
  if (config.types.empty() && config.tags.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("worker '", n, "': it serves no type (give types or tags)"));
  }
  for (const std::string& type : config.types) {
    if (type.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("worker '", n, "': a type name is empty"));
    }
  }
  for (const std::string& tag : config.tags) {
    if (tag.empty())
      return absl::InvalidArgumentError(absl::StrCat("worker '", n, "': a tag is empty"));
  }
  return absl::OkStatus();
}

Status WorkerLostError(std::string_view worker) {
  return absl::UnavailableError(
      absl::StrCat(kLostPrefix, absl::string_view(worker.data(), worker.size()), kLostSuffix));
}

bool WorkerLost(const Status& status) {
  const absl::string_view message = status.message();
  return status.code() == absl::StatusCode::kUnavailable &&
         message.size() > kLostPrefix.size() + kLostSuffix.size() &&
         absl::StartsWith(message, kLostPrefix) && absl::EndsWith(message, kLostSuffix);
}

}  // namespace fairgate

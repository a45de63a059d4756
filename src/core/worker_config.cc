#include <algorithm>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "fairgate/worker.h"

namespace fairgate {

namespace {

// The payload that marks a job's loss with its worker (WorkerLost); its value is empty.
constexpr char kWorkerLostPayload[] = "type.fairgate/worker_lost";

}  // namespace

bool WorkerServes(const WorkerConfig& worker, std::string_view type,
                  const JobTypeConfig& type_config) {
  if (worker.slots < type_config.slots) return false;
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
  Status status = absl::UnavailableError(
      absl::StrCat("worker '", absl::string_view(worker.data(), worker.size()),
                   "' was removed while the job ran on it"));
  status.SetPayload(kWorkerLostPayload, absl::Cord());
  return status;
}

bool WorkerLost(const Status& status) {
  return status.code() == absl::StatusCode::kUnavailable &&
         status.GetPayload(kWorkerLostPayload).has_value();
}

}  // namespace fairgate

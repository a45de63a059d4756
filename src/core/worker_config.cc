#include "absl/strings/str_cat.h"
#include "fairgate/worker.h"

namespace fairgate {

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

}  // namespace fairgate

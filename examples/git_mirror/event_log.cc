#include "event_log.h"

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace git_mirror {

fairgate::StatusOr<std::unique_ptr<EventLog>> EventLog::Open(const std::string& path) {
  std::FILE* file = nullptr;
  if (!path.empty()) {
    file = std::fopen(path.c_str(), "ae");  // e: close-on-exec, no git child inherits it
    if (file == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot open event log '", path, "': ", std::strerror(errno)));
    }
  }
  return std::unique_ptr<EventLog>(new EventLog(file));
}

EventLog::~EventLog() {
  if (file_ != nullptr) std::fclose(file_);
}

void EventLog::Record(std::string_view event, std::string_view type, std::string_view repository,
                      std::string_view client, const fairgate::Status* status,
                      std::optional<double> seconds) {
  if (file_ == nullptr) return;
  std::lock_guard lock(mutex_);
  const double t =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - opened_).count();
  nlohmann::json line = {
      {"t", t}, {"event", event}, {"type", type}, {"repo", repository}, {"client", client}};
  if (status != nullptr) line["status"] = status->ToString();
  if (seconds.has_value()) line["seconds"] = *seconds;
  // Client names come from a header: replace what is not UTF-8 rather than throw.
  const std::string text =
      line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  std::fwrite(text.data(), 1, text.size(), file_);
  std::fflush(file_);
}

}  // namespace git_mirror

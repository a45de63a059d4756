// EventLog: what the mirror did, one JSON object per line, in the order it happened.
//
//   {"t":1.204518,"event":"start","type":"fetch","repo":"git.git","client":""}
//   {"t":1.251002,"event":"end","type":"fetch","repo":"git.git","client":"","status":"OK"}
//
// `t` is seconds since the log was opened (steady clock). Events: "start" and "end" of every job
// (an end carries the job's status), "cancelled" for a job whose caller gave up before it was
// admitted (it never ran and took no slot), "refused" for one the policy turned away, "joined"
// for a request served by another's run of the same job (coalescing: first mirrors), "hit" for one
// served from the pack cache, "sent" when a response's last byte has been handed to the client's
// socket and "cut" when a response was cut short. A "sent" carries `seconds`, the time from the
// handler taking the request (before any wait for a slot) to that last byte: the server's side of
// the request, whatever the client then does with it; the "start" of a request's git run carries
// the seconds it waited for its slot. Lines are
// written whole, under a lock, and flushed at once: a reader sees a prefix of the truth, and since
// a job's "start" is written after its admission and its "end" before its slot is released, two
// jobs whose intervals do not overlap in the log did not overlap in fact.
//
// Thread safety: Record may be called from any thread at once.
#ifndef FAIRGATE_EXAMPLES_GIT_MIRROR_EVENT_LOG_H_
#define FAIRGATE_EXAMPLES_GIT_MIRROR_EVENT_LOG_H_

#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "fairgate/status.h"

namespace git_mirror {

class EventLog {
 public:
  // Appends to `path`; an empty path records nothing.
  static fairgate::StatusOr<std::unique_ptr<EventLog>> Open(const std::string& path);
  ~EventLog();

  void Record(std::string_view event, std::string_view type, std::string_view repository,
              std::string_view client, const fairgate::Status* status = nullptr,
              std::optional<double> seconds = std::nullopt);

 private:
  explicit EventLog(std::FILE* file) : file_(file) {}
  std::mutex mutex_;
  std::FILE* file_;
  const std::chrono::steady_clock::time_point opened_ = std::chrono::steady_clock::now();
};

}  // namespace git_mirror

#endif  // FAIRGATE_EXAMPLES_GIT_MIRROR_EVENT_LOG_H_

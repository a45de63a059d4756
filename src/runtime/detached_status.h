// Detached: a copy of a status that shares nothing with it. Internal to src/runtime.
#ifndef FAIRGATE_RUNTIME_DETACHED_STATUS_H_
#define FAIRGATE_RUNTIME_DETACHED_STATUS_H_

#include <string>

#include "absl/strings/cord.h"
#include "absl/strings/string_view.h"
#include "fairgate/status.h"

namespace fairgate::internal {

// A copy of `status` that shares nothing with it, for a status handed to another thread: each
// call that joined a run gets one, and so do the job, its context and the observers when a
// worker is lost. absl::Status counts the references to a shared representation inside libabsl,
// where ThreadSanitizer cannot see the handover, and reports the reads of one thread's copy (its
// payload's URL) against the free of another's as a race.
inline Status Detached(const Status& status) {
  Status copy(status.code(), status.message());
  status.ForEachPayload([&](absl::string_view url, const absl::Cord& payload) {
    copy.SetPayload(url, absl::Cord(std::string(payload)));
  });
  return copy;
}

}  // namespace fairgate::internal

#endif  // FAIRGATE_RUNTIME_DETACHED_STATUS_H_

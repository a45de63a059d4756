#include "runtime/attempt_marker.h"

#include <mutex>
#include <utility>

#include "absl/strings/str_cat.h"

namespace fairgate::internal {

StatusOr<std::uint32_t> AttemptMarker::Begin(std::uint64_t sequence) {
  auto mark = std::make_shared<Mark>(sequence);
  if (store_.QueuesWrites()) {
    store_.BeginAttemptsQueued({sequence}, [mark](Marked marked) { Tell(*mark, marked, 0, 1); });
  } else if (!thread_.Queue(mark)) {
    return store_.BeginAttempt(sequence);  // stopped
  }
  std::unique_lock lock(mark->mutex);
  mark->marked.wait(lock, [&] { return mark->done; });
  return std::move(mark->attempts);
}

void AttemptMarker::Write(const std::vector<std::shared_ptr<Mark>>& batch) {
  std::vector<std::uint64_t> sequences;
  sequences.reserve(batch.size());
  for (const auto& m : batch) sequences.push_back(m->sequence);
  Marked marked = store_.BeginAttempts(sequences);
  for (std::size_t i = 0; i < batch.size(); ++i) Tell(*batch[i], marked, i, batch.size());
}

void AttemptMarker::Tell(Mark& m, Marked& marked, std::size_t i, std::size_t batch) {
  {
    std::unique_lock lock(m.mutex);
    if (!marked.ok()) {
      // A status of its own for each caller, not copies sharing one: absl releases a shared
      // status in its library, where ThreadSanitizer does not see the release.
      m.attempts = Status(marked.status().code(), marked.status().message());
    } else if (i < marked->size()) {
      m.attempts = std::move((*marked)[i]);
    } else {
      m.attempts = absl::InternalError(absl::StrCat("the store's BeginAttempts answered ",
                                                    marked->size(), " of ", batch, " jobs"));
    }
    m.done = true;
  }
  m.marked.notify_one();
}

}  // namespace fairgate::internal

#include "runtime/attempt_marker.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace fairgate::internal {

StatusOr<std::uint32_t> AttemptMarker::Begin(std::uint64_t sequence) {
  auto mark = std::make_shared<Mark>(sequence);
  bool stopped = false;
  bool wake = false;
  {
    std::lock_guard lock(mutex_);
    stopped = stopped_;
    if (!stopped) {
      queued_.push_back(mark);
      if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
      wake = queued_.size() == 1;
    }
  }
  if (stopped) return store_.BeginAttempt(sequence);
  if (wake) wake_.notify_one();
  std::unique_lock lock(mark->mutex);
  mark->marked.wait(lock, [&] { return mark->done; });
  return std::move(mark->attempts);
}

void AttemptMarker::Stop() {
  {
    std::lock_guard lock(mutex_);
    if (stopped_) return;
    stopped_ = true;  // the thread marks what is queued, then ends
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void AttemptMarker::Loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stopped_ || !queued_.empty(); });
    if (queued_.empty()) return;  // stopped, with nothing left to mark
    std::vector<std::shared_ptr<Mark>> batch;
    if (queued_.size() <= kMaxBatch) {
      batch.swap(queued_);
    } else {
      batch.assign(queued_.begin(), queued_.begin() + kMaxBatch);
      queued_.erase(queued_.begin(), queued_.begin() + kMaxBatch);
    }
    lock.unlock();
    std::vector<std::uint64_t> sequences;
    sequences.reserve(batch.size());
    for (const auto& m : batch) sequences.push_back(m->sequence);
    StatusOr<std::vector<StatusOr<std::uint32_t>>> marked = store_.BeginAttempts(sequences);
    for (std::size_t i = 0; i < batch.size(); ++i) {
      Mark& m = *batch[i];
      {
        std::unique_lock mark_lock(m.mutex);
        if (!marked.ok()) {
          // A status of its own for each caller, not copies sharing one: absl releases a shared
          // status in its library, where ThreadSanitizer does not see the release.
          m.attempts = Status(marked.status().code(), marked.status().message());
        } else if (i < marked->size()) {
          m.attempts = std::move((*marked)[i]);
        } else {
          m.attempts =
              absl::InternalError(absl::StrCat("the store's BeginAttempts answered ",
                                               marked->size(), " of ", batch.size(), " jobs"));
        }
        m.done = true;
      }
      m.marked.notify_one();
    }
    lock.lock();
  }
}

}  // namespace fairgate::internal

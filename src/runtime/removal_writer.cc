#include "runtime/removal_writer.h"

namespace fairgate::internal {

void RemovalWriter::Remove(std::uint64_t sequence) {
  {
    std::lock_guard lock(mutex_);
    ++queued_total_;
  }
  if (!thread_.Queue(sequence)) WriteQueued({sequence});  // stopped: written here
}

void RemovalWriter::Flush() {
  std::unique_lock lock(mutex_);
  const std::uint64_t target = queued_total_;
  written_cv_.wait(lock, [&] { return written_total_ >= target; });
}

void RemovalWriter::WriteQueued(const std::vector<std::uint64_t>& batch) {
  Write(batch);
  written_(batch);
  {
    std::lock_guard lock(mutex_);
    written_total_ += batch.size();
  }
  written_cv_.notify_all();
}

// A batch the store failed as a whole is kept as one write; a job the store failed on its own
// (a store without batches, or a lookup that failed) is kept on its own. Either is counted as
// an error and as succeeded, as RemoveJob's failure is (the attempt did succeed).
void RemovalWriter::Write(const std::vector<std::uint64_t>& batch) {
  using Operation = StateKeeper::Operation;
  using Outcome = StateKeeper::Outcome;
  Store& store = keeper_.store();
  StatusOr<std::vector<Status>> removed = store.RemoveJobs(batch);
  if (!removed.ok()) {
    keeper_.CountError(Operation::kRemoveJob);
    keeper_.Count(Outcome::kSucceeded, batch.size());
    if (WriteRetries::Retryable(removed.status())) {
      writes_.Later(Operation::kRemoveJob, [s = &store, batch]() -> Status {
        StatusOr<std::vector<Status>> again = s->RemoveJobs(batch);
        return again.ok() ? absl::OkStatus() : again.status();
      });
    }
  } else {
    for (std::size_t i = 0; i < batch.size() && i < removed->size(); ++i) {
      const Status& status = (*removed)[i];
      if (status.code() == absl::StatusCode::kAborted) {
        keeper_.Count(Outcome::kFenced);
        continue;
      }
      keeper_.Count(Outcome::kSucceeded);
      if (status.ok()) continue;
      keeper_.CountError(Operation::kRemoveJob);
      if (WriteRetries::Retryable(status)) {
        writes_.Later(Operation::kRemoveJob,
                      [s = &store, sequence = batch[i]] { return s->RemoveJob(sequence); });
      }
    }
  }
}

}  // namespace fairgate::internal

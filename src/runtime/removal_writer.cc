#include "runtime/removal_writer.h"

namespace fairgate::internal {

void RemovalWriter::Remove(std::uint64_t sequence) {
  {
    std::lock_guard lock(mutex_);
    ++queued_total_;
  }
  Store& store = keeper_.store();
  if (store.QueuesWrites()) {
    store.RemoveJobsQueued({sequence}, [this, sequence](Removed removed) {
      Answered({sequence}, std::move(removed));
    });
  } else if (!thread_.Queue(sequence)) {
    WriteQueued({sequence});  // stopped: written here
  }
}

void RemovalWriter::Flush() {
  std::unique_lock lock(mutex_);
  const std::uint64_t target = queued_total_;
  written_cv_.wait(lock, [&] { return written_total_ >= target; });
}

void RemovalWriter::WriteQueued(const std::vector<std::uint64_t>& batch) {
  Answered(batch, keeper_.store().RemoveJobs(batch));
}

void RemovalWriter::Answered(const std::vector<std::uint64_t>& batch, Removed removed) {
  Record(batch, removed);
  written_(batch);
  // Notified under the mutex: once Flush sees the count, `this` may be destroyed (Stop), and a
  // queued removal's `done` runs on another thread than the one that flushes.
  std::lock_guard lock(mutex_);
  written_total_ += batch.size();
  written_cv_.notify_all();
}

// A batch the store failed as a whole is kept as one write; a job the store failed on its own
// (a store without batches, or a lookup that failed) is kept on its own. Either is counted as
// an error and as succeeded, as RemoveJob's failure is (the attempt did succeed).
void RemovalWriter::Record(const std::vector<std::uint64_t>& batch, const Removed& removed) {
  using Operation = StateKeeper::Operation;
  using Outcome = StateKeeper::Outcome;
  Store& store = keeper_.store();
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

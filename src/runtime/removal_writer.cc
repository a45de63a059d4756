#include "runtime/removal_writer.h"

namespace fairgate::internal {

void RemovalWriter::Remove(std::uint64_t sequence) {
  {
    std::lock_guard lock(mutex_);
    if (!stopped_) {
      queued_.push_back(sequence);
      ++queued_total_;
      if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
      if (queued_.size() == 1) wake_.notify_one();
      return;
    }
  }
  Write({sequence});
  written_({sequence});
}

void RemovalWriter::Flush() {
  std::unique_lock lock(mutex_);
  const std::uint64_t target = queued_total_;
  written_cv_.wait(lock, [&] { return written_total_ >= target; });
}

void RemovalWriter::Stop() {
  {
    std::lock_guard lock(mutex_);
    if (stopped_) return;
    stopped_ = true;  // the thread writes what is queued, then ends
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void RemovalWriter::Loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stopped_ || !queued_.empty(); });
    if (queued_.empty()) return;  // stopped, with nothing left to write
    std::vector<std::uint64_t> batch;
    if (queued_.size() <= kMaxBatch) {
      batch.swap(queued_);
    } else {
      batch.assign(queued_.begin(), queued_.begin() + kMaxBatch);
      queued_.erase(queued_.begin(), queued_.begin() + kMaxBatch);
    }
    lock.unlock();
    Write(batch);
    written_(batch);
    lock.lock();
    written_total_ += batch.size();
    written_cv_.notify_all();
  }
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

// RemovalWriter: the removals of durable jobs that succeeded, written in batches on a thread of
// its own. Internal to src/runtime; exists only with a store.
//
// A durable job's attempt ends on a worker of the scheduler; writing its removal there would hold
// that thread for a commit per job. Remove queues the removal and returns at once; the thread
// takes everything queued by then (at most kMaxBatch) and removes it with one Store::RemoveJobs
// (one commit in the SQLite and PostgreSQL stores), so that while one batch commits the next
// gathers. A store that queues writes itself (Store::QueuesWrites: the SQLite store) is handed
// each removal as it comes (Store::RemoveJobsQueued) and writes it with its next group commit:
// the thread is then never started. What the store fails is kept by WriteRetries and tried
// again until the store takes it.
//
// A crash loses the removals queued and not yet committed: those jobs run again after the
// restart, which delivery at least once allows (fairgate/durable.h).
//
// Thread safety: every method may be called from any thread; its lock is never held while the
// store is called.
#ifndef FAIRGATE_RUNTIME_REMOVAL_WRITER_H_
#define FAIRGATE_RUNTIME_REMOVAL_WRITER_H_

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

#include "runtime/batch_thread.h"
#include "runtime/state_keeper.h"
#include "runtime/write_retries.h"

namespace fairgate::internal {

class RemovalWriter {
 public:
  static constexpr std::size_t kMaxBatch = 1000;

  // Told the sequences of each batch once it is written (or kept to try again), on the writer's
  // thread (or Remove's caller's, once stopped), or on the thread that led the store's commit of
  // a queued removal: it must not call the store.
  using Written = std::function<void(const std::vector<std::uint64_t>& batch)>;

  RemovalWriter(StateKeeper& keeper, WriteRetries& writes, Written written)
      : keeper_(keeper),
        writes_(writes),
        written_(std::move(written)),
        thread_("fg-removals", kMaxBatch,
                [this](std::vector<std::uint64_t>& batch) { WriteQueued(batch); }) {}
  ~RemovalWriter() { Stop(); }
  RemovalWriter(const RemovalWriter&) = delete;
  RemovalWriter& operator=(const RemovalWriter&) = delete;

  // Queues the removal of the job `sequence` (its attempt succeeded): to a store that queues
  // writes, else to the thread (started on first use; once stopped, written on the caller's
  // thread instead).
  void Remove(std::uint64_t sequence);
  // Returns once every removal queued before the call has been written or kept to try again.
  void Flush();
  // Flush, then stops the thread (idempotent).
  void Stop() {
    Flush();
    thread_.Stop();
  }

 private:
  using Removed = StatusOr<std::vector<Status>>;

  // Writes one batch with Store::RemoveJobs, then Answered.
  void WriteQueued(const std::vector<std::uint64_t>& batch);
  // What the store answered for a batch: Record, tells `written_` and counts it written.
  void Answered(const std::vector<std::uint64_t>& batch, Removed removed);
  // Counts what became of each job of the batch, and keeps what failed to try again.
  void Record(const std::vector<std::uint64_t>& batch, const Removed& removed);

  StateKeeper& keeper_;
  WriteRetries& writes_;
  const Written written_;

  std::mutex mutex_;                    // guards the two counts
  std::condition_variable written_cv_;  // Flush: a batch was written
  std::uint64_t queued_total_ = 0;      // removals queued so far
  std::uint64_t written_total_ = 0;     // of them, written (or kept to try again)
  // Last: its thread, which calls WriteQueued, ends before the members above are gone.
  BatchThread<std::uint64_t> thread_;
};

}  // namespace fairgate::internal

#endif  // FAIRGATE_RUNTIME_REMOVAL_WRITER_H_

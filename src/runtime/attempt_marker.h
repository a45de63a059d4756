// AttemptMarker: the attempts of durable jobs, marked as begun in the store in batches on a thread
// of its own. Internal to src/runtime; exists only with a store that replicas do not share.
//
// A durable job's attempt is marked in the store before its handler runs (so that a crash during
// it counts it). Marked on the workers, each mark's commit would hold a worker's thread (and every
// fiber on it) for its fsync, and the marks of a busy scheduler would share a commit only as many
// at a time as it has worker threads (8 submitters end to end on SQLite at FULL: about 2 jobs per
// fsync, bench/HISTORY.md). Begin queues the mark and suspends only the calling fiber; the thread
// takes everything queued by then (at most kMaxBatch) and marks it with one Store::BeginAttempts
// (one commit, shared with the submissions of that moment, in the SQLite store), so that while
// one batch commits the next gathers. A store that queues writes itself (Store::QueuesWrites:
// the SQLite store) is handed each mark as it comes (Store::BeginAttemptsQueued), writes it with
// its next group commit and tells the caller from the thread that led it: the thread is then
// never started, and a mark costs no switch to it and back. (A shared store's BeginAttempt
// confirms the attempt its claim counted, without a round trip while the lease is surely held:
// it is called on the worker, not here.)
//
// Thread safety: every method may be called from any thread; Begin suspends only the calling
// fiber, and never with a core lock held (runtime/waiting.h); the store is called with no lock
// held, on the thread (BatchThread) or, when it queues writes, by Begin (a call that returns at
// once).
#ifndef FAIRGATE_RUNTIME_ATTEMPT_MARKER_H_
#define FAIRGATE_RUNTIME_ATTEMPT_MARKER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "fairgate/context.h"
#include "fairgate/status.h"
#include "fairgate/store.h"
#include "runtime/batch_thread.h"
#include "runtime/waiting.h"

namespace fairgate::internal {

class AttemptMarker {
 public:
  static constexpr std::size_t kMaxBatch = 1000;

  explicit AttemptMarker(Store& store)
      : store_(store),
        thread_("fg-marker", kMaxBatch,
                [this](std::vector<std::shared_ptr<Mark>>& batch) { Write(batch); }) {}
  ~AttemptMarker() { Stop(); }
  AttemptMarker(const AttemptMarker&) = delete;
  AttemptMarker& operator=(const AttemptMarker&) = delete;

  // Counts one more attempt of the job `sequence` as begun, as Store::BeginAttempt: the count, or
  // the store's status for it (that of the batch's transaction when it failed as a whole). Returns
  // once the batch that holds it is written. With a store that queues writes, hands it the mark;
  // else starts the thread on first use and, once stopped, calls the store on the caller's thread.
  StatusOr<std::uint32_t> Begin(std::uint64_t sequence) ABSL_LOCKS_EXCLUDED(core_lock);
  // Marks what is queued, then stops the thread (idempotent).
  void Stop() { thread_.Stop(); }

 private:
  // One Begin's mark. Its caller waits on its own fiber condition variable, which only the
  // thread notifies (after releasing the mark's mutex): a variable that every caller waited on
  // would be notified for a whole batch under Boost.Fiber's spinlock, which the woken callers'
  // threads then spin on (runtime/parker.h). Shared, as the thread notifies it after its caller
  // may have returned.
  struct Mark {
    explicit Mark(std::uint64_t s) : sequence(s) {}
    const std::uint64_t sequence;
    WaitMutex mutex;
    WaitCondition marked;
    StatusOr<std::uint32_t> attempts = absl::UnknownError("not marked yet");  // under mutex
    bool done = false;                                                        // under mutex
  };

  using Marked = StatusOr<std::vector<StatusOr<std::uint32_t>>>;

  // Marks a batch with one Store::BeginAttempts and tells each caller its result.
  void Write(const std::vector<std::shared_ptr<Mark>>& batch);
  // Tells `m`'s caller its result: the `i`th of `marked`, the answer to a batch of `batch` marks.
  static void Tell(Mark& m, Marked& marked, std::size_t i, std::size_t batch);

  Store& store_;
  BatchThread<std::shared_ptr<Mark>> thread_;
};

}  // namespace fairgate::internal

#endif  // FAIRGATE_RUNTIME_ATTEMPT_MARKER_H_

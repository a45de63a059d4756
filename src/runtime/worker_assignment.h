// WorkerAssignment: the worker a running job was admitted onto (fairgate/worker.h), shared by
// the job's record and the context it runs under. Internal to src/runtime.
//
// The admission names the worker (under the scheduler's lock); the job's runner enters it when
// the job starts, outside the lock, and gets a context that names the worker (Context::Worker).
// If the worker is removed while the job runs (Scheduler::RemoveWorker), the core has already
// ended the job; MarkLost and CancelContext cancel that context with the reason, and the runner,
// once the job's function returns, reports the loss instead of the function's status and completes
// nothing. A loss before the job entered cancels the context it then gets at once. Either order,
// the job's end is reported once.
//
// Thread safety: Enter and Lose may be called from any threads at once.
#ifndef FAIRGATE_RUNTIME_WORKER_ASSIGNMENT_H_
#define FAIRGATE_RUNTIME_WORKER_ASSIGNMENT_H_

#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "fairgate/context.h"
#include "fairgate/status.h"

namespace fairgate::internal {

class ContextState;

class WorkerAssignment {
 public:
  explicit WorkerAssignment(std::string_view worker)
      : worker_(std::make_shared<const std::string>(worker)) {}

  const std::string& worker() const { return *worker_; }
  // The context the job runs under: a child of `parent` (its cancellation and deadline, its
  // fencing token) that names the worker, cancelled with the loss if the worker is gone.
  Context Enter(const Context& parent);
  // The worker was removed with the job on it (called under the scheduler's lock, which the
  // job's completion reads Lost under: so it completes nothing of a job the core has ended).
  // Once only; later calls change nothing.
  void MarkLost(const Status& why);
  // After MarkLost, outside the scheduler's lock: cancels the job's context, if it has entered
  // (else Enter cancels the one it makes).
  void CancelContext();
  // The loss, if the worker was removed: what the job's callers are told.
  std::optional<Status> Lost() const;

 private:
  const std::shared_ptr<const std::string> worker_;
  mutable std::mutex mutex_;
  std::shared_ptr<ContextState> ctx_;  // once entered
  std::optional<Status> lost_;
};

}  // namespace fairgate::internal

#endif  // FAIRGATE_RUNTIME_WORKER_ASSIGNMENT_H_

// fairgate/permit.h: a held admission, for work that is not one function call.
//
// Scheduler::Acquire admits a job without running anything: it hands the caller a Permit, and
// the job is "running" until the permit is released. An event-loop server uses it to hold a slot
// for exactly as long as a response takes to produce and send (a git clone's pack, streamed),
// without a thread or a fiber waiting for the admission or during the work.
//
// A Permit is move-only and releases its job exactly once: by Release(status), or by its
// destructor (as Release(OK)) if it still holds the job. Releasing completes the job as a RunSync
// return would: its slot is offered to the next job at once, the time from admission to release
// is the observed cost that the estimate of its (type, id) learns, and `status` is what the
// metrics, the events and the key's reconciliation see. A holder that does none of the job's work
// gives it back with ReleaseUnused instead, which teaches nothing. An empty permit
// (default-constructed, moved from, or released) does nothing.
//
// Thread safety: a Permit is one object; use it from one thread at a time. It may be released
// from any thread or fiber, including inside the callback that delivered it. Every permit must be
// released before its scheduler's destructor returns: the destructor (and Shutdown without a
// deadline) waits for held permits as it waits for running jobs, so a permit held by the thread
// that destroys the scheduler is a deadlock.
#ifndef FAIRGATE_PERMIT_H_
#define FAIRGATE_PERMIT_H_

#include <cstdint>
#include <memory>
#include <string_view>

#include "fairgate/context.h"
#include "fairgate/export.h"
#include "fairgate/status.h"

namespace fairgate {

namespace internal {
// The scheduler's side of a held permit; defined by the runtime.
class HeldJob {
 public:
  virtual ~HeldJob() = default;
  // `used`: false for Permit::ReleaseUnused.
  virtual void Release(const Status& status, bool used) = 0;
  virtual std::uint64_t FencingToken() const { return 0; }
  virtual std::string_view Worker() const { return {}; }
  virtual const Context& JobContext() const = 0;
};
}  // namespace internal

class FAIRGATE_EXPORT Permit {
 public:
  // An empty permit.
  Permit() = default;
  Permit(Permit&& other) noexcept = default;
  // Releases the permit held here (as Release(OK)) before taking `other`'s.
  Permit& operator=(Permit&& other) noexcept {
    if (this != &other) {
      Release();
      job_ = std::move(other.job_);
    }
    return *this;
  }
  Permit(const Permit&) = delete;
  Permit& operator=(const Permit&) = delete;
  // Releases the job with an OK status if it is still held.
  ~Permit() { Release(); }

  // Whether this permit still holds its job.
  bool held() const noexcept { return job_ != nullptr; }
  explicit operator bool() const noexcept { return held(); }

  // The fencing token of the fleet-wide lease the job holds (a type of a fleet-wide conflict
  // group or cap on a shared store, fairgate/options.h): greater than every earlier holder's of
  // the same resource, for storage that can refuse a stale writer. 0 when it holds none, or
  // when empty.
  std::uint64_t FencingToken() const { return job_ ? job_->FencingToken() : 0; }
  // With workers declared (fairgate/worker.h): the worker the job was admitted onto; do the
  // work there. Empty without workers or once released.
  std::string_view Worker() const { return job_ ? job_->Worker() : std::string_view(); }

  // The job's context, for the holder to watch (Done, Wait, OnCancel): cancelled, Err() saying
  // so (Unavailable, WorkerLost), when the worker the job was admitted onto is removed while the
  // permit is held (Scheduler::RemoveWorker: the job has ended, and Release completes nothing);
  // its FencingToken and Worker are the permit's. Shutdown does not cancel it (Shutdown waits for
  // the permit's release). Background() without workers and fleet-wide leases, or when empty.
  // Valid while the permit holds its job; a copy outlives the permit.
  const Context& JobContext() const {
    static const Context background = Context::Background();
    return job_ ? job_->JobContext() : background;
  }
  // Completes the job with `status` (see the header comment); no-op when empty.
  void Release(const Status& status = absl::OkStatus()) { End(status, /*used=*/true); }
  // Gives the job back without having done any of its work: for a holder whose reason to run it
  // went away between the admission and the start (its client disconnected while it waited, its
  // context ended as the permit came). The slot is offered to the next job at once, as Release's
  // is, but the job's (type, id) estimate learns nothing (a Release after no work would teach it
  // a cost near zero), and its key, and the key's group, are charged back what the admission
  // charged them, as though it had not been admitted; the rate-limit tokens the admission took
  // stay taken. `status` is what the metrics and the events see: a kComplete event with a charge
  // of 0 (fairgate/observer.h). No-op when empty; after the removal of its worker it completes
  // nothing, as Release.
  void ReleaseUnused(
      const Status& status = absl::CancelledError("the permit was given back unused")) {
    End(status, /*used=*/false);
  }

 private:
  friend class Scheduler;
  explicit Permit(std::unique_ptr<internal::HeldJob> job) : job_(std::move(job)) {}
  void End(const Status& status, bool used) {
    if (job_ == nullptr) return;
    std::unique_ptr<internal::HeldJob> job = std::move(job_);
    job->Release(status, used);
  }

  std::unique_ptr<internal::HeldJob> job_;
};

}  // namespace fairgate

#endif  // FAIRGATE_PERMIT_H_

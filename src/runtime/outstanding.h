// OutstandingCount: how many accepted calls a scheduler has not fully reported yet, and a wait
// until there are none (Shutdown and Drain). Internal to src/runtime.
//
// Every accepted call is counted once (Add) and finished once (Finish), on any thread. Until the
// first WaitQuiet the count also holds one for the scheduler itself, so that it cannot reach zero
// while the scheduler accepts work: a Finish then never needs the mutex, which on the RunSync
// paths (one or two jobs outstanding at a time) it would otherwise take at nearly every call.
// After that, a Finish that may reach zero takes the mutex WaitQuiet reads the count under, so a
// waiter cannot see zero (and destroy the scheduler) before that Finish is done with it.
//
// Thread safety: every method may be called from any thread or fiber at once. It takes no lock
// of the scheduler's.
#ifndef FAIRGATE_RUNTIME_OUTSTANDING_H_
#define FAIRGATE_RUNTIME_OUTSTANDING_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

#include "fairgate/context.h"
#include "fairgate/status.h"
#include "runtime/waiting.h"

namespace fairgate::internal {

class OutstandingCount {
 public:
  void Add() { count_.fetch_add(1, std::memory_order_relaxed); }

  // One accepted call has been fully reported. Above one the count drops without the mutex (it
  // cannot reach zero): every job takes this path once, on every worker thread at once.
  void Finish() {
    std::int64_t n = count_.load(std::memory_order_relaxed);
    while (n > 1) {
      if (count_.compare_exchange_weak(n, n - 1, std::memory_order_acq_rel)) return;
    }
    std::unique_lock lock(quiet_->mutex);
    if (count_.fetch_sub(1, std::memory_order_acq_rel) == 1) quiet_->cv.notify_all();
  }

  // Stops counting the scheduler itself (once), then waits until no accepted call is
  // outstanding (OK) or `ctx` is done (its error).
  Status WaitQuiet(const Context& ctx) ABSL_LOCKS_EXCLUDED(core_lock);

 private:
  // Shared, so that a context callback that outlives the scheduler still has something to
  // signal.
  struct Quiet {
    ShortMutex mutex;
    ShortCondition cv;
  };
  const std::shared_ptr<Quiet> quiet_ = std::make_shared<Quiet>();
  std::atomic<std::int64_t> count_{1};  // one for the scheduler itself, until the first wait
  bool open_counted_ = true;            // under quiet_->mutex
};

}  // namespace fairgate::internal

#endif  // FAIRGATE_RUNTIME_OUTSTANDING_H_

// WriteRetries: store writes that failed and are tried again until the store takes them. Internal
// to src/runtime; exists only with a store.
//
// The writes that end a durable job (removed, deferred, dead, given back) and give back a
// fleet-wide lease record something the store must learn even if it was away when it happened:
// dropped, a job done before an outage would run again once its lease lapsed, and its leases
// (cap slots included) would stay held until then. A failed write is kept and tried again on a
// thread of its own (never the caller's, never the scheduler's timer: a store that is down may
// take seconds to answer), after 0.1 s, then twice as long each time up to 5 s, until the store
// takes it or refuses it for good (NotFound, Aborted: fenced, InvalidArgument,
// FailedPrecondition), or the scheduler shuts down, when each is tried once more and then left
// as the store has it (delivery is at least once).
//
// Thread safety: every method may be called from any thread; its lock is never held while a
// write runs.
#ifndef FAIRGATE_RUNTIME_WRITE_RETRIES_H_
#define FAIRGATE_RUNTIME_WRITE_RETRIES_H_

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include "fairgate/status.h"
#include "runtime/state_keeper.h"

namespace fairgate::internal {

class WriteRetries {
 public:
  using Clock = std::chrono::steady_clock;
  using Write = std::function<Status()>;

  explicit WriteRetries(StateKeeper& keeper) : keeper_(keeper) {}
  ~WriteRetries() { Stop(); }
  WriteRetries(const WriteRetries&) = delete;
  WriteRetries& operator=(const WriteRetries&) = delete;

  // Runs `write` now and returns its status; if that failed and another try may succeed, keeps
  // it to try again (as above). The first try's status is the caller's to count; each later try
  // that fails is counted under `operation`.
  Status Run(StateKeeper::Operation operation, Write write);
  // Keeps `write`, which already failed (its status counted by the caller), to try again as Run
  // keeps one.
  void Later(StateKeeper::Operation operation, Write write) {
    Keep({operation, std::move(write), kFirstBackoff});
  }
  // Whether a failed write's status is worth another try.
  static bool Retryable(const Status& status);
  // Tries every kept write once more, forgets them, and stops the thread (idempotent).
  void Stop();
  // How many failed writes wait for another try.
  std::size_t waiting() const;

 private:
  static constexpr Clock::duration kFirstBackoff = std::chrono::milliseconds(100);
  struct Kept {
    StateKeeper::Operation operation;
    Write write;
    Clock::duration backoff;
  };
  void Keep(Kept kept);  // starts the thread on first use
  void Loop();

  StateKeeper& keeper_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::multimap<Clock::time_point, Kept> kept_;  // by when each is tried next
  bool stopped_ = false;
  std::thread thread_;
};

}  // namespace fairgate::internal

#endif  // FAIRGATE_RUNTIME_WRITE_RETRIES_H_

// StateKeeper: a scheduler's side of its store (fairgate/store.h). It opens the store, holds what
// was loaded from it until the scheduler asks for it (a type's estimates when the type is
// registered, the keys' costs at start, a periodic job's last run when it is submitted), records
// the ends of periodic runs, flushes what the scheduler learned on a thread of its own, and
// counts the store's errors and the durable jobs' outcomes for the metrics.
//
// It never takes the scheduler's lock itself: the flusher calls `collect`, which does, and then
// writes without it.
//
// Thread safety: every method may be called from any thread.
#ifndef FAIRGATE_RUNTIME_STATE_KEEPER_H_
#define FAIRGATE_RUNTIME_STATE_KEEPER_H_

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "fairgate/options.h"
#include "fairgate/status.h"
#include "fairgate/store.h"

namespace fairgate::internal {

// Wall-clock seconds since the Unix epoch: the store's time.
double WallNow();

class StateKeeper {
 public:
  // The operations whose errors are counted, by name in the metrics.
  enum class Operation {
    kAddJob,
    kBeginAttempt,
    kRemoveJob,
    kDeferJob,
    kKillJob,
    kLoad,
    kFlush,
    kClaim,
    kRenew,
    kRelease,
    kShare,
    kResource,
    kRateLease  // a lease of the fleet's rate limit's tokens (FleetRates)
  };
  // What became of a durable job's attempt, or of a SubmitDurable. kClaimed: taken from a shared
  // store; kFenced: its lease was another replica's by the time this one began or ended it.
  enum class Outcome { kStored, kSucceeded, kRetried, kDead, kClaimed, kFenced };

  // Takes options.store and loads what it holds. Null (and OK) when it is not set; the store's
  // status when it cannot be read.
  static StatusOr<std::unique_ptr<StateKeeper>> Open(const SchedulerOptions& options);
  ~StateKeeper();  // stops the flusher, without a last flush

  Store& store() { return *store_; }
  // The store's shared side, with replicas (SharedStore); null for a store of one process.
  SharedStore* shared_store() { return store_->AsShared(); }

  // The loaded estimates of `type`, least recently used first; each is handed out once.
  std::vector<SavedEstimate> TakeEstimates(std::string_view type);
  // The loaded keys' costs, least recently idle first; handed out once.
  std::vector<SavedKey> TakeKeys();
  // When the last run of the periodic job (type, id) ended, if known (Unix seconds).
  std::optional<double> LastRunEnd(std::string_view type, std::string_view id) const;
  // A run of the periodic job (type, id) ended at `wall`: kept, and flushed with the next flush.
  void RunEnded(std::string_view type, std::string_view id, double wall);

  // What a flush writes: the estimates and keys the scheduler changed since the last successful
  // flush, which `collect` is told to take (it returns its own mark for next time, passed back
  // after a success). Times in Unix seconds.
  struct Collected {
    LearnedState state;
    double mark = 0;
  };
  using Collect = std::function<Collected(double since_mark)>;
  // Starts flushing every `interval` on a thread of its own.
  void StartFlusher(Seconds interval, Collect collect);
  // Flushes now (one flush at a time); the store's status.
  Status Flush();
  // Stops the flusher thread (idempotent); a last Flush is the caller's.
  void StopFlusher();

  void CountError(Operation operation) {
    errors_[static_cast<std::size_t>(operation)].fetch_add(1, std::memory_order_relaxed);
  }
  void Count(Outcome outcome, std::uint64_t jobs = 1) {
    outcomes_[static_cast<std::size_t>(outcome)].fetch_add(jobs, std::memory_order_relaxed);
  }
  // A claim from a shared store that succeeded, and whether it took any job.
  void CountClaim(bool took_jobs) {
    claims_[took_jobs ? 1 : 0].fetch_add(1, std::memory_order_relaxed);
  }
  // Appends the store's metrics in the Prometheus text format.
  void WriteMetrics(std::string& out) const;

 private:
  StateKeeper(std::shared_ptr<Store> store, const SchedulerOptions& options, LearnedState loaded);
  void FlusherLoop(Seconds interval);

  const std::shared_ptr<Store> store_;
  const double estimate_ttl_, key_ttl_;

  mutable std::mutex mutex_;  // guards everything below up to the flusher's
  std::map<std::string, std::vector<SavedEstimate>, std::less<>> estimates_by_type_;
  std::vector<SavedKey> keys_;
  std::map<std::pair<std::string, std::string>, double, std::less<>> last_run_end_;
  std::vector<SavedSchedule> runs_unflushed_;

  std::mutex flush_mutex_;  // one flush at a time; guards the mark
  Collect collect_;
  double mark_ = -1e300;  // everything the scheduler learned is newer than this at first

  std::mutex flusher_mutex_;
  std::condition_variable flusher_wake_;
  bool stop_flusher_ = false;
  std::thread flusher_;

  std::array<std::atomic<std::uint64_t>, 13> errors_{};
  std::array<std::atomic<std::uint64_t>, 6> outcomes_{};
  std::array<std::atomic<std::uint64_t>, 2> claims_{};  // empty, took jobs
  std::atomic<std::uint64_t> flushes_{0};
};

}  // namespace fairgate::internal

#endif  // FAIRGATE_RUNTIME_STATE_KEEPER_H_

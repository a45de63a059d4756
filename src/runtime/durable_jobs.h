// DurableJobs: the scheduler's durable jobs (fairgate/durable.h), a service on the scheduler's
// Submission. Internal to src/runtime; exists only with a store.
//
// It keeps the handler and retry policy of each durable type, where Recover is, and the stored
// jobs waiting out a retry's backoff (queued by the scheduler's timer: NextDue, RunDue). Each
// attempt of a stored job is queued as a Submit job of its type, id and key; the attempt is
// marked in the store before the handler runs (so a crash during it counts it), and its end
// removes, retries or kills the job. With a shared store (replicas) nothing is loaded at Recover:
// the claimer claims jobs by lease (ClaimableTypes, QueueClaimed), and a retry is given back to
// the fleet instead of waiting here.
//
// Thread safety: every method may be called from any thread at once; its own lock is never held
// while it calls the scheduler or the store.
#ifndef FAIRGATE_RUNTIME_DURABLE_JOBS_H_
#define FAIRGATE_RUNTIME_DURABLE_JOBS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "fairgate/context.h"
#include "fairgate/durable.h"
#include "fairgate/store.h"
#include "runtime/attempt_marker.h"
#include "runtime/claimer.h"
#include "runtime/fleet_leases.h"
#include "runtime/removal_writer.h"
#include "runtime/state_keeper.h"
#include "runtime/submission.h"
#include "runtime/write_retries.h"

namespace fairgate::internal {

class DurableJobs {
 public:
  using Clock = Context::Clock;
  // `writes` tries again the writes that end an attempt when the store fails them.
  DurableJobs(Submission& scheduler, StateKeeper& keeper, WriteRetries& writes)
      : scheduler_(scheduler),
        keeper_(keeper),
        writes_(writes),
        removals_(keeper, writes,
                  [this](const std::vector<std::uint64_t>& batch) { ForgetCapped(batch); }) {
    if (keeper.shared_store() == nullptr) marker_ = std::make_unique<AttemptMarker>(keeper.store());
  }

  // With a shared store, before the claimer starts: who claims (null without a shared store), and
  // the fleet-wide leases a claim takes with its jobs (null without any).
  void AttachFleet(Claimer* claimer, FleetLeases* fleet) {
    claimer_ = claimer;
    fleet_ = fleet;
  }

  // Scheduler::RegisterDurable, Recover, SubmitDurable, DeadJobs, RetryDeadJob and
  // RemoveDeadJob, with their refusals.
  Status Register(std::string_view type, DurableHandler handler, const RetryPolicy& retry);
  StatusOr<RecoveryReport> Recover();
  StatusOr<std::uint64_t> Submit(const DurableSubmission& submission);
  StatusOr<std::vector<std::uint64_t>> SubmitBatch(const std::vector<DurableSubmission>& jobs);
  StatusOr<std::vector<StoredJob>> Dead();
  StatusOr<std::vector<StoredJob>> Dead(std::uint64_t after, std::size_t limit);
  Status RetryDead(std::uint64_t sequence);
  Status RemoveDead(std::uint64_t sequence);

  // For the claimer: the types this replica claims jobs of, with their tiers (those not paused,
  // and none once the scheduler is closing; a type with a fleet-wide cap bounded by what this
  // replica can run of it at once, less the claimed jobs of it it holds, and left out when that is
  // none); and queueing what it claimed (a job that cannot be queued is given back at once).
  std::vector<ClaimableType> ClaimableTypes() const;
  void QueueClaimed(std::vector<StoredJob> jobs);

  // For the scheduler's timer: when the next retry is due (Clock::time_point::max() for none),
  // and queueing the retries due by `now`.
  Clock::time_point NextDue() const;
  void RunDue(Clock::time_point now);
  // At shutdown: the retries waiting here stay stored, with their backoff, for the next Recover.
  void DropRetries();
  // Returns once the removals of the jobs that succeeded so far are written (or kept to try
  // again). StopWriters, once no attempt runs any more, also stops the threads that mark attempts
  // and write removals, before the claimer stops.
  void FlushRemovals() { removals_.Flush(); }
  void StopWriters() {
    if (marker_) marker_->Stop();
    removals_.Stop();
  }
  // At the scheduler's end, once nothing writes to the store any more: another scheduler may
  // work its jobs (Store::EndExclusiveUse, if Recover began it).
  void EndExclusiveUse();

 private:
  // A durable type's handler and retry policy, fixed at Register.
  struct Type {
    DurableHandler handler;
    RetryPolicy retry;
  };
  using TypePtr = std::shared_ptr<const Type>;
  // One attempt of a durable job, queued as a Submit job.
  struct Attempt {
    StoredJob job;
    TypePtr type;
    std::uint32_t attempt = 0;  // its number once begun; 0 while it has not run
    bool gone = false;          // the store no longer had it when it began: nothing to record
    // Its run says nothing of its cost (Submission::ServiceJob): it was gone when it began, or
    // its handler returned when the job was not surely this replica's (SurelyHolds).
    bool unmeasured = false;
  };
  enum class Recovery { kNotYet, kRecovering, kDone };

  // OK once Recover is done and while the scheduler is open; else the refusal of `call` ("<call>
  // before Recover: ...", or the scheduler's once it is closing).
  Status Recovered(const char* call) const;
  // The handler of a job SubmitDurable may store: refused (nothing stored) before Recover, for a
  // type without a handler or an empty id, and once the scheduler is closing.
  StatusOr<TypePtr> Accepting(std::string_view type, std::string_view id) const;
  // A new job as stored, its submission time now.
  static StoredJob ToStore(const DurableSubmission& job);

  template <typename LoadFailed>
  StatusOr<RecoveryReport> RecoverShared(LoadFailed& load_failed);
  // The handler of `type`, if registered.
  TypePtr Find(std::string_view type) const;
  // Whether a stored job (neither done nor dead) has begun every attempt its type allows: its
  // last one was cut short (a crash, a kill, a shutdown that cancelled it), and it must not run
  // again; KillInterrupted moves it to the dead jobs with an error saying so.
  static bool AttemptsSpent(const StoredJob& job, const Type& type);
  Status KillInterrupted(const StoredJob& job, const Type& type);
  // Queues one attempt of a stored job as a Submit job of its type, id and key; Submit's refusal.
  Status Queue(const StoredJob& job, TypePtr type);
  // Queues a stored job whose time has come; true if it was queued. Refused at the door (a full
  // queue), it stays stored and is tried again a backoff (at least a second) later; shutting
  // down, it stays stored for the next Recover.
  bool QueueOrDefer(const StoredJob& job, const TypePtr& type);
  // Marks an attempt as begun in the store and sets its number; the store's status.
  Status BeginAttempt(Attempt& a);
  // The attempt: marked in the store first, then the handler runs.
  Status Run(Attempt& a, const Context& ctx);
  // The attempt ended with `status` (or never ran): the job is removed, retried or dead.
  void Finish(Attempt& a, const Status& status);
  // Queues a stored job for the timer `after` seconds from now (unless the scheduler is
  // closing: then it stays stored); wakes the timer when it is the earliest.
  void ScheduleRetry(StoredJob job, TypePtr type, double after);
  // A claimed job of a type with a fleet-wide cap (whose claim holds one of the cap's slots) is
  // held until the store has removed, deferred, killed or released it: Capped counts it, and
  // ForgetCapped forgets it (a job not counted: nothing) and pokes the claimer when that makes
  // room for a claim.
  void Capped(const StoredJob& job);
  void ForgetCapped(const std::vector<std::uint64_t>& sequences);
  // Counts what a store call that records an attempt's end returned: an error, a refusal because
  // another replica holds the job now (kFenced), or else `outcome` if given.
  void Recorded(const Status& status, StateKeeper::Operation operation,
                std::optional<StateKeeper::Outcome> outcome = std::nullopt);

  Submission& scheduler_;
  StateKeeper& keeper_;
  WriteRetries& writes_;
  Claimer* claimer_ = nullptr;
  FleetLeases* fleet_ = nullptr;
  // The removals of jobs that succeeded, written in batches.
  RemovalWriter removals_;
  // The attempts' marks, written in batches off the workers; null with a shared store, whose
  // BeginAttempt confirms a claim's count locally (attempt_marker.h).
  std::unique_ptr<AttemptMarker> marker_;

  // Guards what follows (a std::mutex, as every service's).
  mutable std::mutex mutex_;
  absl::flat_hash_map<std::string, TypePtr> types_;
  Recovery recovery_ = Recovery::kNotYet;  // SubmitDurable waits for kDone
  // Recover began the store's exclusive use (Store::BeginExclusiveUse), and it has not ended.
  bool exclusive_ = false;
  // Stored jobs waiting out a retry's backoff, by when it ends.
  std::multimap<Clock::time_point, std::pair<StoredJob, TypePtr>> retries_;
  // The claimed jobs of types with a fleet-wide cap this replica holds (Capped): each one's type
  // by its sequence, and how many of each type.
  absl::flat_hash_map<std::uint64_t, std::string> capped_claims_;
  absl::flat_hash_map<std::string, std::size_t> capped_held_;
};

}  // namespace fairgate::internal

#endif  // FAIRGATE_RUNTIME_DURABLE_JOBS_H_

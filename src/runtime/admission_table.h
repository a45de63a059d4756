// AdmissionTable: the scheduler's lock and everything it guards. Internal to src/runtime.
//
// The runtime in layers (src/runtime/README.md has the picture):
//
//   Scheduler::Impl (scheduler.cc)   the calls (RunSync, Submit, Acquire) and the dispatcher:
//                                    starts and reports what a decision admitted or refused,
//                                    outside the lock
//   AdmissionTable (this file)       the lock; the core, the records of the calls it decides,
//                                    the decision log, the Submit intake; every locked section
//   services (submission.h)          periodic runs, durable jobs, the fleet's costs, adaptive
//                                    capacity: on the Submission interface, never on this lock
//
// Every method takes the lock itself, for one decision, and returns what the caller must do
// once it is released: a Decision (jobs to start or report, calls to tell, whether the timer must
// look again), with its answer when it has one (Decided), which the caller hands to the
// dispatcher: `dispatcher_.Act(table_.X(...))`. Nothing here starts a job, runs user code, waits,
// or calls a store.
//
// Taking the lock first queues what the Submit intake holds (submit_intake.h). A decision made
// by a method that does not return one (a query, a registration) and that queued from the intake
// is handed to the Owner (HandOff), which acts on it elsewhere.
//
// Thread safety: every method may be called from any thread or fiber at once. The lock is a
// thread lock (waiting.h, CoreMutex), never held while user code runs or a caller waits; its
// contracts are checked by clang's thread-safety analysis (scripts/thread_safety.sh).
#ifndef FAIRGATE_RUNTIME_ADMISSION_TABLE_H_
#define FAIRGATE_RUNTIME_ADMISSION_TABLE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "core/admission_core.h"
#include "fairgate/options.h"
#include "fairgate/snapshot.h"
#include "fairgate/store.h"
#include "runtime/decision_log.h"
#include "runtime/job_record.h"
#include "runtime/state_keeper.h"
#include "runtime/submission.h"
#include "runtime/submit_intake.h"
#include "runtime/waiting.h"

namespace fairgate::internal {

// What a decision leaves to do once the lock is released (Dispatcher::Act does it, in this
// order): whether the timer must look again; the calls that joined a run that ended (`result`
// set: to tell); the running jobs that ended with their worker (their contexts to cancel); the
// jobs it admitted (to start) or refused (`refusal` set: to report), in decision order; the
// Acquires whose context's deadline passed while they waited (to take out of the queue).
struct Decision {
  bool wake_timer = false;
  std::vector<RecordPtr> joiners;
  RecordList lost;
  RecordList admitted;
  RecordList deadline_passed;
};

// What a completed job's run tells the core: its time (AdmissionCore::Complete), nothing (a run
// that was not its own: CompleteUnmeasured), or that the job did none of its work (a permit
// given back unused: CompleteUnused, its charge given back).
enum class RunEnd { kMeasured, kUnmeasured, kUnused };

// A deciding method's answer and its decision: the dispatcher acts on the decision and hands
// back the answer (Dispatcher::Act).
template <typename Answer>
struct Decided {
  Answer answer;
  Decision decision;
};

// A Submit waiting in the intake: what Accept would enqueue, owned. It lives in one allocation
// with its job's record (IntakeRecord) and owns that allocation while it waits: `record` points
// into it. One allocation per Submit instead of two, made by the submitter and freed on another
// thread, where glibc's malloc costs most (bench/HISTORY.md).
struct IntakeEntry {
  IntakeEntry* next = nullptr;
  RecordPtr record;
  std::optional<double> cost;
  core::Join join = core::Join::kPending;
  double read = 0;  // the clock when Submit was called, as Accept's `read`
};
struct IntakeRecord {
  JobRecord record{std::in_place_type<SubmitCall>};
  IntakeEntry entry;
};
// Disposes of an entry never taken (the table's destruction): its record's last owner.
struct ReleaseIntakeEntry {
  void operator()(IntakeEntry* entry) const { RecordPtr last = std::move(entry->record); }
};
using IntakeEntryPtr = std::unique_ptr<IntakeEntry, ReleaseIntakeEntry>;

class AdmissionTable {
 public:
  enum class Phase { kOpen, kDraining, kShutDown };

  // Who acts on decisions: the dispatcher (Scheduler::Impl).
  class Owner {
   public:
    virtual ~Owner() = default;
    // The lock was released and Submits wait in the intake: queue them (TryTakeIntake) and act.
    virtual void ServeIntake() = 0;
    // A decision made under a lock taken by a call that does not act on decisions itself (a
    // query, a registration, the timer's thread): act on it elsewhere (on a pool fiber).
    virtual void HandOff(Decision decision) = 0;
  };

  // How many Submits may wait in the intake before the one that finds it so waits for the lock
  // and queues them itself: callers that submit faster than the core can queue are held back to
  // its pace, and a holder inherits about this many enqueues at most (milliseconds on the 2-core
  // VM). The larger it is, the less a burst of Submits into a busy pool waits for the holders'
  // queueing (bench/HISTORY.md).
  static constexpr std::size_t kIntakeLimit = 16384;

  AdmissionTable(const SchedulerOptions& options, std::unique_ptr<core::AdmissionCore> core,
                 Owner& owner);

  // The scheduler's clock (RuntimeOptions::clock, else steady time since the start).
  double Now() const {
    const Seconds t = options_.runtime.clock ? options_.runtime.clock()
                                             : Seconds(std::chrono::steady_clock::now() - epoch_);
    return std::isfinite(t.count()) ? t.count() : 0.0;
  }

  // --- Types, settings and queries (each one decision; HandOff for what the intake brought).
  // Registers a type; true when it was new. `saved` gives the estimates a store kept for it,
  // asked only for a new type.
  StatusOr<bool> RegisterType(std::string_view name, const JobTypeConfig& config,
                              const std::function<std::vector<SavedEstimate>()>& saved);
  // Puts back keys' costs kept by a store (their idle_since on the scheduler's clock); returns
  // those restored.
  std::vector<SavedKey> RestoreKeys(std::vector<SavedKey> keys, double wall);
  // A snapshot and the metrics take the expiries and aging steps due first, so that the counts
  // are current; the decision wakes the timer when some expired (it reports them).
  Decided<Snapshot> TakeSnapshot(std::size_t heaviest_keys);
  // Appends the metrics to `out`.
  Decision WriteMetrics(std::string& out);
  Status SetKeyWeight(std::string_view key, double weight);
  // A key's group and a group's weight (core::AdmissionCore::SetKeyGroup, SetGroupWeight): they
  // change the order, never what is admissible, so no decision follows.
  Status SetKeyGroup(std::string_view key, std::string_view group);
  Status SetGroupWeight(std::string_view group, double weight);
  // A group's limits, then the admissions a higher max_running allows.
  Decided<Status> SetGroupLimits(std::string_view group, const GroupLimits& limits);
  std::optional<double> GroupAccumulatedCost(std::string_view group) const;
  // Charges the key for work done without a job (core::AdmissionCore::Charge), at now.
  Status Charge(std::string_view key, double cost);
  Decided<Status> SetKeyLimits(std::string_view key, const KeyLimits& limits);
  // A pause or resume of the core at now, `change(core, now)`, then the admissions it allows.
  Decided<Status> ChangePause(const std::function<Status(core::AdmissionCore&, double)>& change);
  StatusOr<double> MaxWaitToCeiling(std::string_view type) const;
  // Adds a worker (or, with `update`, changes one), then admits what it makes admissible.
  Decided<Status> SetWorker(std::string_view name, const WorkerConfig& config, bool update);
  // Removes a worker: the core ends its running jobs, whose records leave the table marked lost
  // (WorkerAssignment::MarkLost), logged as completed with the loss, into the decision's `lost`
  // (their contexts are cancelled once the lock is released); then admits what can run.
  Decided<Status> RemoveWorker(std::string_view name);
  // The registered types no worker serves (with workers declared).
  std::vector<std::string> TypesWithoutWorker() const;
  // AdmissionCore::NarrowWorkerWarnings.
  std::vector<std::string> NarrowWorkerWarnings(std::string_view worker,
                                                std::string_view type) const;
  std::optional<double> AccumulatedCost(std::string_view key) const;
  std::optional<double> Estimate(std::string_view type, std::string_view id) const;
  Status Open() const;
  std::optional<Submission::TypeInfo> Type(std::string_view type) const;
  // The global cap set to `next` of what it reads (Submission::ChangeCapacity), the run samples
  // taken with it.
  Decision ChangeCapacity(const std::function<int(const Submission::CapacityInputs&)>& next);
  // With the latency rule: from now on each measured completion is kept as a run sample for the
  // next ChangeCapacity, at most this many between two (the rest are dropped: the medians of
  // that many are plenty, and the rule reads them under the lock, once an interval).
  static constexpr std::size_t kMaxRunSamples = 4096;
  void KeepRunSamples();
  void CountCapacitySignalFailed();
  // The fleet's rate limits (FleetRates), called once before any type is registered: from now
  // on the global rate limit's bucket, every rate-limited type's, as it is registered, and
  // every key's are leased (AdmissionCore::LeaseTokens, LeaseKeyTokens). `wanted` is called, with
  // this table's lock held, as the lock is released with a leased bucket wanting a lease that
  // may be taken now (AdmissionCore::WantsTokens), once until the next BucketsToLease or grant;
  // it must not block or call the table.
  void LeaseRates(std::function<void()> wanted);
  // AdmissionCore::BucketsToLease (and from now on `wanted` is called again when one wants a
  // lease); GrantTokens with the store's lease (its next token due in lease.next_in seconds from
  // now), then a decision.
  std::vector<std::pair<core::BucketName, RateLimit>> BucketsToLease();
  Decided<Status> GrantTokens(const core::BucketName& bucket, const TokenLease& lease);
  std::vector<Submission::KeyCost> KeyCosts(Submission::CostsOf of);
  std::vector<bool> SetFleetCosts(Submission::CostsOf of, const std::vector<SavedKey>& totals,
                                  const absl::flat_hash_map<std::string, double>& collected);
  // What a flush writes: the estimates used since `since` and (unless the store is shared,
  // where FleetCosts adds them up instead) every key's cost, in Unix seconds.
  StateKeeper::Collected Learned(double since, bool shared_store);

  // --- The life of a call.
  // Whether a Submit may go through the intake: everything Accept could refuse it for but the
  // phase (told by its callback if it changed meanwhile) is judged here, without the core. A
  // call that may be refused for want of a token (refuse_without_token) or by its type's
  // shedding goes through Accept, which answers it at once.
  bool IntakeAccepts(std::string_view type, std::string_view id, const JobOptions& options) const {
    return intake_open_ && accepting_.load(std::memory_order_relaxed) && !id.empty() &&
           (!options.cost || (std::isfinite(*options.cost) && *options.cost >= 0)) &&
           !options.refuse_without_token && intake_types_.Contains(type);
  }
  // Whether calls are still accepted (cleared by Shutdown and Drain before they take the lock).
  bool accepting() const { return accepting_.load(std::memory_order_relaxed); }
  // Leaves a Submit in the intake; how many wait there now.
  std::size_t PushIntake(IntakeEntryPtr entry) { return intake_.Push(std::move(entry)); }
  // Whether the global cap was full when the lock was last released.
  bool CapFull() const { return cap_full_.load(std::memory_order_seq_cst); }
  // Queues the intake under the lock (waiting for it).
  Decision TakeIntake();
  // If Submits wait in the intake and the lock is free: queues them and returns the decision.
  // Looks after a fence that pairs with a pusher's (StoreLoadFence), so that every entry is queued
  // by its pusher or by whoever releases the lock next.
  std::optional<Decision> TryTakeIntake();

  // A call refused at the door once Shutdown or Drain has begun, without a record: logged, and
  // Unavailable; OK while the scheduler is still open.
  Status RefuseIfClosed(const core::EnqueueRequest& request);
  // What Enqueue answers: the core's refusal (logged), or OK; and, for a caller that runs its own
  // job, whether this call admitted it (it is then not in the decision: the caller learns it here
  // and runs it, without being woken).
  struct Enqueued {
    Status status;
    bool admitted_at_once = false;
  };
  // Queues `record`'s job, read at `read`, and admits what can be admitted. `runs_itself`: the
  // caller runs the job itself once admitted (RunSync), so an admission by this call is answered
  // rather than put in the decision. `at_once_only` (TryAcquire): a job this call leaves pending
  // is withdrawn before the lock is released (uncharged, a cancel event), and the answer is
  // ResourceExhausted; so nothing admits it after the call has given up.
  Decided<Enqueued> Enqueue(const RecordPtr& record, const core::EnqueueRequest& request,
                            double read, bool runs_itself, bool at_once_only = false);
  // A RunSync caller woke (`decided`: told by the decision itself, whose state it may read
  // without the lock). OK and `run` set: it runs its job. Else what the caller returns: the
  // refusal or the result of the run it joined, or `ctx`'s error when its context ended first
  // (it then leaves the queue, uncharged, or stops waiting for the run it joined).
  Status SettleRunSync(const RecordPtr& record, bool decided, const Context& ctx, bool& run);
  // Completes a job that ran for `run_time`, ending at `end`: the calls that joined it are
  // finished with `status` (into the decision's `joiners`, to tell) and what it frees admitted.
  // `ran` says what the core learns of it (RunEnd); the run time is logged whatever it says.
  Decision Complete(JobRecord& record, double run_time, double end, const Status& status,
                    RunEnd ran = RunEnd::kMeasured);
  // An Acquire that leaves the queue without a permit, uncharged: false (nothing done) unless
  // its job was still pending.
  bool Abandon(const RecordPtr& record, const Status& why);

  // --- Shutdown and Drain.
  // Stops accepting calls (before the lock: Submits stop using the intake at once).
  void StopAccepting() { accepting_.store(false, std::memory_order_relaxed); }
  // Shuts down: every pending call leaves, refused; returns them, with the expired jobs a
  // snapshot found and the timer has not reported yet.
  RecordList ShutDown();
  // Drains: resumes what is paused and admits what can run.
  Decision StartDrain();
  // Outside the lock: waits until every event logged so far has been delivered.
  void FlushLog() { ABSL_TS_UNCHECKED_READ(log_).Flush(); }

  // --- For the timer.
  // When the timer must wake for the table: the next Acquire deadline or queue-wait limit; now
  // when a snapshot left expiries to report; Clock::time_point::max() for none.
  Context::Clock::time_point NextDue() const;
  // What is due at `now`: the Acquires whose context's deadline has passed (the decision's
  // `deadline_passed`), the expiries to report and the admissions they allow.
  Decision TakeDue(Context::Clock::time_point now);
  // The TTL sweep.
  void Sweep();

 private:
  // The lock for one critical section, the one way the table takes it. Taking it queues what the
  // intake holds first. A call that acts on its decision passes it (its release then serves the
  // intake again, through the Owner); any other call's decision, if there is one, is handed off.
  class ABSL_SCOPED_LOCKABLE Locked {
   public:
    Locked(AdmissionTable* table, Decision& decision)
        ABSL_EXCLUSIVE_LOCK_FUNCTION(table->mutex_, core_lock)
        : table_(table), decision_(&decision) {
      Acquire();
    }
    explicit Locked(AdmissionTable* table) ABSL_EXCLUSIVE_LOCK_FUNCTION(table->mutex_, core_lock)
        : table_(table) {
      Acquire();
    }
    // A query queues the intake too: what it reads includes the caller's earlier Submits.
    explicit Locked(const AdmissionTable* table)
        ABSL_EXCLUSIVE_LOCK_FUNCTION(table->mutex_, core_lock)
        : Locked(const_cast<AdmissionTable*>(table)) {}
    ~Locked() ABSL_UNLOCK_FUNCTION() { Release(); }
    Locked(const Locked&) = delete;
    Locked& operator=(const Locked&) = delete;

    // Releases the lock before the end of the scope (once; the destructor then does nothing).
    void Release() ABSL_UNLOCK_FUNCTION();

   private:
    void Acquire() ABSL_EXCLUSIVE_LOCK_FUNCTION(table_->mutex_, core_lock) {
      table_->mutex_.Lock();
      table_->TakeIntakeLocked(*decision_);
    }
    AdmissionTable* table_;
    Decision own_;
    Decision* decision_ = &own_;
  };

  // What the thread-safety analysis cannot follow through a std::optional<Locked>: that it holds
  // the lock from here on. Aborts when it does not.
  void MustHold(const std::optional<Locked>& lock) const
      ABSL_ASSERT_EXCLUSIVE_LOCK(mutex_, core_lock);
  // Releases the lock, publishing first whether the global cap is full (for CapFull).
  void UnlockCore() ABSL_UNLOCK_FUNCTION(mutex_, core_lock);
  // Queues what the intake holds, oldest first, as Enqueue would have one by one.
  void TakeIntakeLocked(Decision& decision) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_, core_lock);
  // The group RuntimeOptions::key_group gives a key the core does not track, if a rule is set
  // and the key's group is no caller's (an enqueue's or a charge's).
  void ApplyGroupRuleLocked(std::string_view key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_, core_lock);
  // Enqueue's work under the lock, at `now`.
  Status EnqueueLocked(const RecordPtr& record, const core::EnqueueRequest& request, double now,
                       Decision& decision) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_, core_lock);
  // A call refused before its job was queued, logged: returns `why`.
  Status RejectLocked(const core::EnqueueRequest& request, Status why, double now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_, core_lock);
  // Why a call is refused once the scheduler is no longer open.
  Status UnavailableLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_, core_lock);
  // The time a decision is taken at: `read` (which may have been read before the lock was taken,
  // while another thread decided at a later time) made no earlier than the last decision's. So
  // the decisions' times, as the core, the metrics and the observers see them, never go back, and
  // no job is admitted before it arrived.
  double MonotonicLocked(double read) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_, core_lock) {
    last_decision_time_ = std::max(last_decision_time_, read);
    return last_decision_time_;
  }
  // The clock, read under the lock, for a decision.
  double LockedNow() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_, core_lock) {
    return MonotonicLocked(Now());
  }
  // Whether AdmitLocked(now) would admit, reap and report nothing: the core would decide nothing
  // (AdmissionCore::AdmitsNothing) and no aging step waits to be reported.
  bool AdmitsNothingLocked(double now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_, core_lock) {
    return core_->AdmitsNothing(now) && !log_.PromotionsPending();
  }
  // Admits everything admissible at `now`. Jobs that expired on the way go out in the decision
  // too, refused. Asks the core nothing when it would answer nothing (AdmitsNothingLocked): a
  // drain of the intake into a full pool comes here after every entry it queues.
  void AdmitLocked(double now, Decision& decision) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_, core_lock);
  // A job the core admitted at `now`: its record runs, logged, into the decision (unless its
  // caller is the one enqueueing it and runs it itself: runs_itself_).
  void TakeAdmissionLocked(const core::Admission& a, double now, Decision& decision)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_, core_lock);
  // Takes the expiries and aging steps due by `now` without admitting (for a snapshot): expired
  // jobs wait in unreported_ for the timer. True when some did (wake the timer).
  bool AdvanceLocked(double now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_, core_lock);
  // The jobs the core expired at their type's max_queue_wait leave the records at once (their
  // slots may be reused by the next enqueue), refused with DeadlineExceeded, into `out`.
  void ReapExpiredLocked(double now, RecordList& out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_, core_lock);
  // With FAIRGATE_CHECK_INVARIANTS, the core's invariants after every decision that may have
  // changed them; a broken one is a bug in fairgate: say which, and abort.
  void CheckInvariantsLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_, core_lock);
  // The job `lead` stands for was admitted and other calls share it: the one that runs it becomes
  // the lead, the others wait for its status (kJoined). A RunSync caller still waiting runs its
  // own function (the first to have asked), in its own thread; else a Submit's function: the
  // first's (kJoin) or the latest's (kSupersede).
  static void ChooseRunnerLocked(RecordPtr& lead, Coalesce mode);
  // A pending call leaves the queue. The job leaves with its last call (uncharged, cancelled in
  // the log); until then the core counts one caller fewer and, if the lead left, the next call
  // to have joined leads.
  void LeaveQueueLocked(const RecordPtr& record, double now, const Status& why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_, core_lock);
  // A call that joined a running job stops waiting for it; the run goes on for the others.
  void LeaveRunLocked(const RecordPtr& record) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_, core_lock);
  // A pending job leaves the queue without running, uncharged: told to the core and the log.
  void CancelLocked(JobRecord& record, double now, const Status& why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_, core_lock);
  void ForgetDeadlineLocked(JobRecord& record) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_, core_lock);
  // When the timer must wake for the next queue-wait limit, and for the next token a pending job
  // waits for (a rate limit's), on its clock.
  std::optional<Context::Clock::time_point> NextExpiryLocked() const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_, core_lock);
  std::optional<Context::Clock::time_point> NextTokenLocked() const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_, core_lock);
  // A time of the core's clock, on the timer's.
  std::optional<Context::Clock::time_point> OnTimer(std::optional<double> at) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_, core_lock);

  const SchedulerOptions options_;
  const std::chrono::steady_clock::time_point epoch_;
  Owner& owner_;

  // The Submit intake, and what a Submit reads without the lock to judge whether it may use it
  // and whether to queue it itself. The intake's head, these flags and the lock each on a cache
  // line of their own: a look at the intake after releasing the lock must not take back the line
  // the next holder is writing.
  IntakeStack<IntakeEntry, ReleaseIntakeEntry> intake_;
  GrowOnlyNameSet intake_types_;  // registered types without a queue-wait limit
  const bool intake_open_;        // no pending bound configured
  // phase_ == kOpen, as of the last change; cleared by Shutdown and Drain before they take the
  // lock. Enqueue reads it too: a call that finds it cleared is refused uncounted.
  alignas(64) std::atomic<bool> accepting_{true};
  std::atomic<bool> cap_full_{false};  // the core's full() when the lock was last released

  // The lock, and what it guards.
  alignas(64) mutable CoreMutex mutex_;
  std::unique_ptr<core::AdmissionCore> core_ ABSL_GUARDED_BY(mutex_);
  // By ticket slot: the pending and running jobs' leads.
  std::vector<RecordPtr> records_ ABSL_GUARDED_BY(mutex_);
  // During an Enqueue whose caller runs its own job: that job's record, until this call admits
  // it (TakeAdmissionLocked then leaves it out of the decision and clears this).
  const JobRecord* runs_itself_ ABSL_GUARDED_BY(mutex_) = nullptr;
  // The time of the latest decision (MonotonicLocked).
  double last_decision_time_ ABSL_GUARDED_BY(mutex_) = -std::numeric_limits<double>::infinity();
  std::vector<Coalesce> coalesce_ ABSL_GUARDED_BY(mutex_);  // by type index
  // Acquire's pending jobs whose context has a deadline.
  DeadlineMap deadlines_ ABSL_GUARDED_BY(mutex_);
  // Expired during a snapshot; the timer reports them.
  RecordList unreported_ ABSL_GUARDED_BY(mutex_);
  // The next token pending jobs wait for that the timer was last told of (AdmitLocked).
  std::optional<double> token_told_ ABSL_GUARDED_BY(mutex_);
  // Whether rate limits are leased (LeaseRates: every key's bucket is, so a bucket may want
  // tokens from then on), and whom AdmitLocked tells that one wants tokens.
  bool lease_rates_ ABSL_GUARDED_BY(mutex_) = false;
  // KeepRunSamples: the measured runs completed since the last ChangeCapacity.
  bool keep_run_samples_ ABSL_GUARDED_BY(mutex_) = false;
  std::vector<core::RunSample> run_samples_ ABSL_GUARDED_BY(mutex_);
  // Since FleetRates last looked (BucketsToLease) or a grant came (UnlockCore).
  bool tokens_told_ ABSL_GUARDED_BY(mutex_) = false;
  std::function<void()> tokens_wanted_ ABSL_GUARDED_BY(mutex_);
  Phase phase_ ABSL_GUARDED_BY(mutex_) = Phase::kOpen;
  // Metrics, events and evidence of every decision, in decision order.
  mutable DecisionLog log_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace fairgate::internal

#endif  // FAIRGATE_RUNTIME_ADMISSION_TABLE_H_

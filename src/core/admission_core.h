// AdmissionCore: the deterministic engine that decides which job runs next.
//
// It holds every pending and running job and applies the admission rule of docs/ordering.md: a job
// is admissible when every constraint it is subject to has room for it (core/constraints.h: the
// global cap and its tier's cap for its slots, its type's cap, its key's max_running, its
// resource's conflict limit); among admissible jobs the first in the order (-effective priority,
// aged first, reserved first, accumulated_cost[key], sjf, arrival, enqueue sequence) goes next,
// and its key is charged at once (the charge divided by the key's weight). With none of the
// options on, that is (-priority, acc, arrival, seq): seed mode.
//
// Contract:
// - Single-threaded and deterministic: no clock, no threads, no I/O. Time is an argument, in
//   seconds; the same calls with the same arguments always give the same results. The runtime
//   wraps it in one lock; the simulator and the tests drive it directly.
// - The caller drives admission: after anything that may free a slot (Enqueue, Complete, Cancel),
//   call NextAdmission until it returns nothing.
// - Every operation costs O(log n) in the pending jobs, plus O(tiers + types) for
//   NextAdmission; no operation sorts or scans the pending or running jobs (but a pause or resume
//   with aging, which restarts the clocks of the jobs it touches). A job blocked by a
//   full resource is parked in a lane of the resource's wait group, which stands in its queue as
//   one entry while the resource has room: a release relinks that entry, however many wait; a
//   type at its cap is skipped as a whole.
// - Bad input is refused with a status (see fairgate/status.h) and changes nothing.
#ifndef FAIRGATE_CORE_ADMISSION_CORE_H_
#define FAIRGATE_CORE_ADMISSION_CORE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "core/admission.h"
#include "core/constraints.h"
#include "core/estimate_table.h"
#include "core/group_table.h"
#include "core/job_table.h"
#include "core/key_table.h"
#include "core/lane_index.h"
#include "core/order.h"
#include "core/queue_nodes.h"
#include "core/timed_steps.h"
#include "core/type_table.h"
#include "core/worker_table.h"
#include "fairgate/job_type.h"
#include "fairgate/key_limits.h"
#include "fairgate/learned_state.h"
#include "fairgate/rule_options.h"
#include "fairgate/snapshot.h"
#include "fairgate/status.h"
#include "fairgate/worker.h"

namespace fairgate::core {

class AdmissionCore {
 public:
  // A core that applies `rule`; InvalidArgument naming the first bad field (ValidateRuleOptions).
  static StatusOr<std::unique_ptr<AdmissionCore>> Create(const RuleOptions& rule);
  ~AdmissionCore();
  AdmissionCore(const AdmissionCore&) = delete;
  AdmissionCore& operator=(const AdmissionCore&) = delete;

  // Registers a job type. Idempotent for an equal config; AlreadyExists for a different one.
  Status RegisterType(std::string_view name, const JobTypeConfig& config);

  // Queues a job that arrives at `now`. NotFound for an unknown type, InvalidArgument for an empty
  // id or a bad cost, ResourceExhausted when a pending bound is reached.
  //
  // A request that joins (EnqueueRequest::join) returns the ticket of the job it joined and
  // changes nothing else: the job keeps its key, its place and its arrival (so its queue-wait
  // limit), no pending bound applies, the joiner's key is not tracked and its cost hint is
  // ignored. Joining a pending job adds a caller (Callers); joining a running one adds none.
  StatusOr<JobTicket> Enqueue(const EnqueueRequest& request, double now);
  // Enqueue, then, when that queued a new job (not a refusal, not a join), NextAdmission(now)
  // into `admission` (empty otherwise): the same statuses, tickets, admission (which may be
  // another job's), evidence and state as the two calls. When nothing else is pending and the
  // new job may run at once, it is admitted without entering the order (no lane, no B-tree
  // entry, no pick): what a caller of a scheduler with room pays for (src/core/README.md).
  StatusOr<JobTicket> EnqueueAndAdmit(const EnqueueRequest& request, double now,
                                      std::optional<Admission>& admission);

  // Removes a pending job without charging anything. FailedPrecondition if it is running,
  // NotFound if the ticket names no live job. A pending job that joined requests stand for
  // (Callers > 1) loses one caller and stays; the last caller's Cancel removes it.
  Status Cancel(JobTicket ticket, double now);

  // How many requests a pending job stands for: 1, plus the requests that joined it. NotFound
  // if the ticket names no pending job.
  StatusOr<std::uint32_t> Callers(JobTicket ticket) const;

  // Admits the first admissible job, charges its key, and returns it; nothing when no pending job
  // is admissible now.
  std::optional<Admission> NextAdmission(double now);

  // Ends a running job that held its slot for `elapsed` seconds: the estimate of its (type, id)
  // learns, the key is reconciled (if enabled), and its slot and resource are free again.
  Status Complete(JobTicket ticket, double elapsed, double now) {
    return CompleteRunning(ticket, &elapsed, now, nullptr);
  }
  // The same, and `completed` describes the job as Describe would have just before (left as it
  // was when the status is not OK): one lookup of the ticket instead of two. Its views stay valid
  // until the next call that enqueues or sweeps (the job's id lives in its slot until the slot is
  // reused, its key until an idle key is forgotten).
  Status Complete(JobTicket ticket, double elapsed, double now, JobView& completed) {
    return CompleteRunning(ticket, &elapsed, now, &completed);
  }
  // Ends a running job whose run says nothing of its cost, because its outcome was not this
  // caller's to give (a durable attempt whose lease another replica took while it ran): its key
  // keeps the charge made at admission, reconciled to nothing, and its estimate learns nothing;
  // its slot and resource are free again, as Complete's are. `completed` as Complete's.
  Status CompleteUnmeasured(JobTicket ticket, double now, JobView& completed) {
    return CompleteRunning(ticket, nullptr, now, &completed);
  }
  // Ends a running job that did none of its work, because its holder gave it back unused (the
  // caller it was admitted for had gone): its key and its group are charged back what its
  // admission charged them, whether or not the rule reconciles (as though it had run for no
  // time), and its estimate learns nothing; its slot and resource are free again, as Complete's
  // are. The tokens its admission took stay taken. `completed` as Complete's, its charge 0.
  Status CompleteUnused(JobTicket ticket, double now, JobView& completed) {
    Status status = CompleteRunning(ticket, nullptr, now, &completed, /*charge_back=*/true);
    if (status.ok()) completed.charge = 0;  // given back
    return status;
  }

  // Forgets idle keys and unused estimates past their TTL, at most `sweep_batch` of each. With
  // `evicted`, the names and accumulated costs of the keys forgotten are appended to it.
  SweepResult Sweep(double now, std::vector<std::pair<std::string, double>>* evicted = nullptr);

  // Takes the expiries and then the aging steps due by `now` (NextAdmission does too first). A
  // pending job whose type's max_queue_wait is reached by `now` (arrival + max_queue_wait <=
  // now) leaves the queue uncharged, as Cancel at `now` would take it, and waits in the expired
  // list for TakeExpired; it is never admitted.
  void AdvanceTo(double now);
  // The jobs expired since the last call, in the order their limits were reached (ties by
  // enqueue order), and those refused since: for want of a token (ExpiredJob::token_due) and by
  // shedding (ExpiredJob::shed; JobTypeConfig::shedding: a type whose queue stands sheds its
  // heaviest pending job at an Enqueue of a lighter key's job and after each admission of its
  // jobs by NextAdmission), in the order they happened. The caller reports them; the core has
  // forgotten them.
  std::vector<ExpiredJob> TakeExpired();
  // Shedding's choice, on demand: the
  // pending job of `type` whose key has consumed the most leaves the queue, uncharged, with every
  // request that joined it, and is returned (expired_at: now) rather than listed for
  // TakeExpired. "The most" is the greatest (its group's accumulated cost, its key's, arrival,
  // enqueue sequence), a key of no group being a group of its own, as in the order's group and
  // key levels; tiers, aging and reservations do not enter. Nothing when the type has no pending
  // job; NotFound for an unknown type. Expiries due by `now` are not taken first. O(pending jobs
  // of every key that has one): a scan, for the overloaded moments it is meant for.
  StatusOr<std::optional<ExpiredJob>> ShedHeaviest(std::string_view type, double now);
  // Whether an expiry or an aging step is due by `now`, or expired jobs wait for TakeExpired:
  // while none is and the global cap is full (full()), NextAdmission(now) changes nothing.
  bool StepDueBy(double now) const;
  // When the next pending job's queue-wait limit is reached, if any job has one: for a timer.
  std::optional<double> NextExpiryAt() const { return steps_.NextExpiryAt(); }
  // When a token comes due that a pending job waits for (the global rate limit's, with jobs
  // pending; a type's, with jobs of it pending), if one is missing at `now`: for a timer, so that
  // a decision is made then (NextAdmission) and nothing polls. Nothing when no job waits for a
  // token. O(types). Leased buckets are left out: their tokens come with a lease.
  std::optional<double> NextTokenAt(double now) const;

  // Fleet-wide rate limits (fairgate/store.h, SharedStore::TakeTokens): the bucket of `type`
  // ("": the global one) no longer fills with time; it holds the tokens GrantTokens gives it,
  // from none. NotFound for a type not registered, FailedPrecondition for a bucket without a
  // limit. Leasing a leased bucket again changes nothing.
  Status LeaseTokens(std::string_view type);
  // The same for every key's rate limit (KeyLimits::rate_limit): a key's bucket holds what
  // GrantTokens gives it, from none; it is made, empty and asking for a lease, when the key gets
  // a job while it has none pending, and a key without a token is held until a grant brings one
  // (a call refused for want of one is refused at once only while the store's last grant said
  // the next token is due later: before its first, and after that time, it waits for the lease).
  // A key forgotten after key_ttl takes its unused tokens with it.
  // FailedPrecondition once a key has a job pending or running (call it before the first job;
  // keys restored idle are fine); again: nothing.
  Status LeaseKeyTokens();
  // Adds `tokens` (>= 0, finite) to a leased bucket; `due`: when the store said its next token
  // is due (what a refusal for want of one says: RefuseWithoutToken); the caller decides again
  // (NextAdmission). To a key not tracked (forgotten since it asked): nothing, OK. A grant that
  // leaves a bucket without a token refuses the pending jobs under it that asked not to wait for
  // one (they came while its lease was on its way, TokenBucket::AwaitsLease): they leave
  // uncharged at `now`, for TakeExpired, with ExpiredJob::token_due and token_of.
  Status GrantTokens(const BucketName& bucket, double tokens, double due, double now);
  // The leased buckets with less than one token and jobs pending under them (the global one's:
  // any; a type's: its own; a key's: its own), or that were leased, used up by a take or short
  // of a token for a refused call since their last grant (TokenBucket::Ask: a lease in hand
  // before it is needed), each with its limit: what the runtime leases next. O(leased global
  // and type buckets + asking keys).
  std::vector<std::pair<BucketName, RateLimit>> BucketsToLease() const;
  // Whether BucketsToLease would name one whose lease may be taken at `now`: whose next token
  // the store's last lease said is due by `now`, or that has had no lease yet (the runtime asks
  // the store for a bucket no sooner than it said). No allocation, for a check after every
  // decision.
  bool WantsTokens(double now) const;
  // Where each aging step taken from now on is recorded (null: nowhere), for observers, and how
  // many were taken (TimedSteps keeps both).
  void set_promotion_log(std::vector<Promotion>* log) { steps_.set_promotion_log(log); }
  std::uint64_t promotions_total() const { return steps_.promotions_taken(); }
  // The `n` keys with the highest accumulated cost, highest first (ties by name). O(keys).
  std::vector<std::pair<std::string, double>> HeaviestKeys(std::size_t n) const;
  // The registration index of a type, if registered.
  std::optional<std::uint32_t> TypeIndex(std::string_view type) const;
  // The configuration a type was registered with; null if it is not registered.
  const JobTypeConfig* TypeConfig(std::string_view type) const;
  // Whether a registered type is paused (PauseType); false for an unknown type.
  bool TypePaused(std::string_view type) const;
  // The job a ticket names, if it is pending or running.
  std::optional<JobView> Describe(JobTicket ticket) const;

  // Sets the key's weight (finite, > 0): its later charges are divided by it. Kept while the
  // scheduler lives, even when the key is idle or forgotten.
  Status SetKeyWeight(std::string_view key, double weight);
  // Puts the key in a group of keys (a tenant; "": in none, a group of its own). The order puts
  // a group's accumulated cost before its keys' (docs/ordering.md, "Groups"): a group is charged
  // what its keys are, divided by its weight (SetGroupWeight). Kept like weights. A key with jobs
  // pending or running moves with them: its pending jobs keep their places among its group's,
  // its running jobs count in its new group and their reconciliation is its new group's; O(its
  // pending jobs). FailedPrecondition with idle catch-up on (not yet defined for groups).
  Status SetKeyGroup(std::string_view key, std::string_view group, double now);
  // Whether the runtime's rule of groups (RuntimeOptions::key_group) is to be asked of the key:
  // it is not tracked and SetKeyGroup did not name its group.
  bool NeedsKeyGroup(std::string_view key) const;
  // The rule's answer for a key NeedsKeyGroup said yes of ("": none). Unlike SetKeyGroup's, it
  // is kept only while the key is tracked: a key forgotten after key_ttl forgets it too (its
  // settings go with it unless the caller set others), so that a rule over a million clients
  // keeps nothing of the idle ones. FailedPrecondition with idle catch-up on, as SetKeyGroup.
  Status SetKeyGroupByRule(std::string_view key, std::string_view group);
  // The rule's answer for a key that then was not tracked after all (a restored key past its
  // TTL) is forgotten, as at its eviction.
  void ForgetKeyGroupByRule(std::string_view key);
  // Sets the group's weight (finite, > 0): its later charges are divided by it. Kept like a
  // key's weight.
  Status SetGroupWeight(std::string_view group, double weight);
  // Sets the group's limits (fairgate/group_limits.h), kept like its weight. May make jobs
  // admissible: call NextAdmission after.
  Status SetGroupLimits(std::string_view group, const GroupLimits& limits);
  // The group's accumulated cost, if it is tracked (one of its keys has had a job or a charge,
  // and it has not been idle for key_ttl since).
  std::optional<double> GroupAccumulatedCost(std::string_view group) const;
  // How many keys have settings kept (weights, limits, pauses, groups): configuration, and the
  // rule's groups of the tracked keys.
  std::size_t key_settings_kept() const { return keys_.settings_size(); }
  // How many groups are tracked.
  std::size_t groups_tracked() const { return groups_.size(); }
  // Sets the key's limits (see fairgate/key_limits.h), kept like weights. May make jobs
  // admissible: call NextAdmission after.
  Status SetKeyLimits(std::string_view key, const KeyLimits& limits);
  // Pauses a type (or a key): its pending jobs stay queued in their places and hold nothing, but
  // none is admitted and none ages (its aging clock stops) until it is resumed; jobs enqueued
  // meanwhile wait the same way. Running jobs are not touched. A job of a paused type or of a
  // paused key is paused. Idempotent; NotFound for an unknown type. A key need not be tracked:
  // its pause is kept like its weight. The aging steps and expiries due by `now` are taken first;
  // queue-wait limits keep running while paused. After a resume, call NextAdmission. O(1), plus
  // with aging O(jobs) to stop or restart their aging clocks.
  Status PauseType(std::string_view type, double now);
  Status ResumeType(std::string_view type, double now);
  Status PauseKey(std::string_view key, double now);
  Status ResumeKey(std::string_view key, double now);
  // With aging, the longest a pending job of `type` takes to reach the aging ceiling:
  // grace + steps * interval, where steps is the number of registered tiers between its tier and
  // the ceiling. 0 when it cannot rise (aging off, or no registered tier above it within the
  // ceiling). NotFound for an unknown type.
  StatusOr<double> MaxWaitToCeiling(std::string_view type) const;

  // The global cap in force, in slots: max_concurrency unless lowered (adaptive capacity,
  // RuleOptions::adaptive_capacity; with RuleOptions::latency_capacity it starts at its min). A
  // lower cap admits nothing until the running jobs' slots are below it (nothing running is
  // stopped); a higher one may admit at once (call NextAdmission). InvalidArgument unless 1 <=
  // capacity <= max_concurrency.
  Status SetCapacity(int capacity);
  int capacity() const { return types_.global_cap().limit(); }
  // Whether the running jobs take every slot of the global cap in force: nothing is admitted
  // until one completes (or the cap grows).
  bool full() const { return types_.global_cap().Full(); }
  // Whether NextAdmission(now) would admit nothing and change nothing: the global cap is full or
  // no job is pending, and no expiry or aging step is due (StepDueBy). O(1): what a caller asks
  // before a decision it may skip.
  bool AdmitsNothing(double now) const { return (full() || pending_ == 0) && !StepDueBy(now); }
  std::int64_t pending_jobs() const { return pending_; }

  // The state at `now` (the rate limits' tokens are read at `now`).
  Snapshot TakeSnapshot(double now) const;

  // Recomputes every count, link and entry the core keeps from the jobs themselves and compares
  // (admission_core_invariants.cc): OK, or Internal naming the first broken invariant. O(jobs +
  // keys + lanes + resources): for the differential tests, the fuzzer and debug builds.
  Status CheckInvariants() const;

  // Warm restart (fairgate/store.h), with every time on the core's clock. The estimates used or
  // learned at or after `since`: O(those estimates).
  std::vector<SavedEstimate> EstimatesUsedSince(double since) const;
  // Every tracked key's accumulated cost, and since when it has been idle (`now` if it is busy):
  // O(keys).
  std::vector<SavedKey> KeyCosts(double now) const;
  // Puts back an estimate learned before. Skipped (false) when (type, id) is already tracked or
  // its estimate_ttl has passed by `now`; NotFound for an unknown type.
  StatusOr<bool> RestoreEstimate(const SavedEstimate& estimate, double now);
  // Puts back an idle key's accumulated cost, idle since `idle_since` (<= now): it is forgotten
  // key_ttl after that, unless it enqueues first. Skipped (false) when the key is already tracked
  // or its key_ttl has passed by `now`. InvalidArgument for a cost that is not finite and >= 0.
  StatusOr<bool> RestoreKey(const SavedKey& key, double now);
  // Sets a tracked key's accumulated cost (what several replicas charged it, fleet-wide): its
  // pending jobs take their new places. False (nothing done) for a key that is not tracked;
  // InvalidArgument for a cost that is not finite and >= 0. O(the key's lanes x log lanes).
  StatusOr<bool> SetAccumulatedCost(std::string_view key, double cost);
  // The same for groups of keys (docs/ordering.md, "Groups"), each as a SavedKey whose `key` is
  // the group's name: every tracked group's accumulated cost and since when it has been idle
  // (`now` if it is busy), O(groups); and a tracked group's cost set, its stand-ins taking their
  // new places (false for a group that is not tracked), O(the group's lane sets x log lanes).
  std::vector<SavedKey> GroupCosts(double now) const;
  StatusOr<bool> SetGroupAccumulatedCost(std::string_view group, double cost);
  // Charges `cost` (finite, >= 0; else InvalidArgument) to the key for work done without a job
  // (a response served from a cache, say), as an admission charges its job's: divided by the
  // key's weight, its pending jobs taking their new places. A key that is not tracked becomes
  // tracked, idle; an idle key's idle clock starts again at `now`, so that it keeps the charge
  // for key_ttl. Makes nothing admissible. O(the key's lanes x log lanes).
  Status Charge(std::string_view key, double cost, double now);

  // Workers (fairgate/worker.h; docs/ordering.md, "Workers"). The first AddWorker turns them on
  // for good: from then a job is admitted only onto a worker that serves its type and has room
  // (with none left, nothing is admitted); without any, the scheduler's slots serve every type.
  // Each is O(workers x types) (the index of who serves what is rebuilt); call NextAdmission
  // after, as a worker may have room.
  //
  // Adds a worker. Idempotent for an equal config; AlreadyExists for a different one;
  // InvalidArgument for a bad one; ResourceExhausted past 65535 workers.
  Status AddWorker(std::string_view name, const WorkerConfig& config);
  // Changes a worker's slots and types. Its running jobs keep running on it and holding its
  // slots, even those of a type it no longer serves; fewer slots than they hold admit nothing
  // more onto it until enough complete. NotFound for an unknown worker.
  Status UpdateWorker(std::string_view name, const WorkerConfig& config);
  // Removes a worker: its slots leave the accounting at once and each of its running jobs ends
  // now, uncharged back and unlearned (its key keeps what it was charged; its estimate learns
  // nothing). Returns them, in enqueue order; their tickets name nothing from now on, so a
  // later Complete of one is NotFound and changes nothing. NotFound for an unknown worker.
  StatusOr<std::vector<LostJob>> RemoveWorker(std::string_view name, double now);
  bool workers_in_use() const { return workers_.in_use(); }
  // Whether a job of a registered type can ever be admitted here as the workers stand: true
  // without workers, else whether one serves it. False for an unknown type.
  bool TypeServed(std::string_view type) const;
  // The registered types that no worker serves (with workers declared; empty without), by
  // registration order: their jobs wait until a worker that serves them is added.
  std::vector<std::string> TypesWithoutWorker() const;
  // One sentence for each worker that names a registered type it is too narrow to serve
  // (fairgate/worker.h, WorkerServes), of the worker `worker` and the type `type` (empty: any),
  // by worker and then type order.
  std::vector<std::string> NarrowWorkerWarnings(std::string_view worker,
                                                std::string_view type) const;

  // The key's accumulated cost, if the key is tracked.
  std::optional<double> AccumulatedCost(std::string_view key) const;
  // The tokens at `now` of the key's rate limit (KeyLimits::rate_limit), if the key is tracked
  // and has one.
  std::optional<double> KeyTokens(std::string_view key, double now) const;
  // The learned estimate of (type, id), if tracked.
  std::optional<double> Estimate(std::string_view type, std::string_view id) const;
  const RuleOptions& rule() const { return rule_; }

 private:
  explicit AdmissionCore(const RuleOptions& rule);

  JobView ViewOf(const Job& job) const;
  void ViewInto(const Job& job, JobView& view) const;  // ViewOf, written into `view`
  // Complete (CompleteUnmeasured when `elapsed` is null; CompleteUnused with `charge_back`),
  // describing the job into `completed` first when it is not null.
  Status CompleteRunning(JobTicket ticket, const double* elapsed, double now, JobView* completed,
                         bool charge_back = false);
  class InvariantCheck;            // CheckInvariants' parts (admission_core_invariants.cc)
  Status CheckJoinPoints() const;  // part of CheckInvariants
  static JobTicket TicketOf(const Job& job) { return JobTable::TicketOf(job); }
  // Moves the type's pending jobs in its own tier to the lanes of the home Shares now gives it,
  // if that changed (a pause, a resume, the first worker): O(job slots), as a pause with aging.
  void Rehome(TypeState& type) {
    lanes_.Rehome(type, types_.Shares(type) ? type.tier->shared : type.lanes, jobs_);
  }
  // The one list of constraints (core/constraints.h): whether a job may run at `now`, and if
  // not, the first constraint without room for it. Every check of admissibility, in the pick, the
  // fast path, the skip counts and CheckInvariants, is one of these. `kBorrowing`: for a borrower
  // (RuleOptions::lending; TypeTable::BlockerOf).
  template <bool kBorrowing = false>
  Blocker BlockerOf(const Job& job, double now) const {
    if (const Blocker b = types_.BlockerOf<kBorrowing>(*job.type, now); b != Blocker::kNone) {
      return b;
    }
    if (const Blocker b = keys_.BlockerOf(*job.key); b != Blocker::kNone) return b;
    // The key's group: its stand-ins are held while it is at its max_running.
    if (const GroupState* group = GroupTable::Of(*job.key);
        group != nullptr && !groups_.Admissible(*group)) {
      return Blocker::kGroupLimit;
    }
    return LaneIndex::IdBlocker(job.resource);
  }
  // The reservation of RuleOptions::sole_worker_reserve_after: reserves in this decision the
  // workers whose sole types starve (WorkerTable::Claim) and returns the job that goes first on
  // one of them, with `worker` set to it, or null when none of them has room for its claimant.
  Job* PickReserved(double now, WorkerState*& worker);
  // The first admissible job of `type` across its own lane set and the aged groups it has in
  // higher tiers (higher tiers first), or null: Pick's choice were the type alone pending.
  Job* FrontOfType(TypeState& type);
  // Ends a running job: releases what it holds and frees it. `elapsed` null: it was lost with
  // its worker, or its run was not its own (CompleteUnmeasured), or it did none of its work
  // (CompleteUnused): nothing learned, and nothing reconciled unless `charge_back`, which gives
  // the key and its group the admission's charge back.
  template <bool kGrouping = true>
  void EndRunning(Job& job, const double* elapsed, double now, bool charge_back = false);
  // Calls `use(usage, amount)` for every constraint of the list a running `job` holds: admission
  // acquires exactly these, completion releases exactly these, CheckInvariants recounts exactly
  // these. `Self` is AdmissionCore or const AdmissionCore.
  template <typename Self, typename Use>
  static void ForEachHold(Self& self, const Job& job, Use use) {
    const std::int32_t slots = job.type->config.slots;
    use(self.types_.global_cap(), slots);
    use(job.type->tier->slots, slots);
    use(job.type->running, 1);
    use(job.key->running, 1);
    if (GroupState* group = GroupTable::Of(*job.key)) use(group->running, 1);
    if (job.resource != nullptr) use(job.resource->running, 1);
    if (job.worker != 0) use(self.workers_.Of(job)->slots, slots);
  }
  // A job's place within its key (order part 5): 0 unless shortest-first, else its estimate plus
  // shortest_first_aging times its arrival.
  double SjfOf(const TypeState& type, absl::string_view id, const EnqueueRequest& request,
               double now) const;
  // Whether a job's type or key is paused.
  bool Paused(const Job& job) const {
    return job.type->paused || (job.key->settings != nullptr && job.key->settings->paused);
  }
  // Runs `apply` (a change of pauses) and stops or restarts the aging clocks of the pending jobs
  // `affects` picks whose pause it changed.
  template <typename Affects, typename Apply>
  void ChangePause(double now, Affects affects, Apply apply);
  Status SetTypePaused(std::string_view type, bool paused, double now);
  Status SetKeyPaused(std::string_view key, bool paused, double now);
  // What the group's accumulated cost becomes as a running job of one of its keys ends (measured:
  // `elapsed`; null: not; `charge_back`: as if at no time), reconciled at its weight now. Out of
  // line: off the path of keys without a group.
  [[gnu::noinline]] double ReconciledCost(const GroupState& group, const Job& job,
                                          const double* elapsed, bool charge_back) const;
  // Takes a pending job out of the queue, uncharged: Cancel's work, and an expiry's.
  void Withdraw(Job& job, double now);
  // Schedules a pending job's next aging step, if it can rise: aging on, not paused, a tier above.
  void SchedulePromotion(Job& job);
  void Promote(Job& job);
  // The first job in the order among the admissible ones, or null; counts what it passed over.
  // `kBorrowing`: among those admissible as borrowers (RuleOptions::lending), counting nothing:
  // the look a decision takes when the first found none. `kGrouping`: some key may have a group
  // (LaneIndex::grouping): heads compare by their group's place first (LaneIndex::PlaceOfHead).
  template <bool kBorrowing = false, bool kGrouping = false>
  Job* Pick(DecisionSkips& skipped, double now);
  // The bucket of `type` ("": the global one), or NotFound naming the type.
  StatusOr<TokenBucket*> BucketOf(std::string_view type);
  // The leased buckets (LeaseTokens): each with its name ("": the global one) and the type whose
  // pending jobs it holds back (null: the global one, which holds back every job).
  struct LeasedBucket {
    std::string name;
    const TokenBucket* bucket;
    const TypeState* type;
  };
  // Whether a leased bucket has less than a token and jobs pending under it, or asked for a
  // lease (TokenBucket::Ask).
  bool Wants(const LeasedBucket& leased) const;
  // GrantTokens's refusal of the pending jobs that asked not to wait for a token under the
  // bucket it left without one, in enqueue order: `key`'s, or (key null) `type`'s, or (both
  // null) all. O(its jobs) for a key; else O(keys + pending jobs).
  void RefuseImpatient(const KeyState* key, const TypeState* type, double due, double now);
  // What TakeExpired reports of a pending job leaving at `at` (before it is withdrawn).
  static ExpiredJob ExpiredOf(const Job& job, double at);
  // Shedding (fairgate/shedding.h; admission_core_shed.cc). A job's place in its order: (its
  // group's cost, or its key's without a group; its key's cost; arrival; seq), greatest first.
  using ShedPlace = std::tuple<double, double, double, std::uint64_t>;
  // The pending job of `type` with the greatest place (and that place), or null if none.
  // O(keys + pending jobs).
  Job* HeaviestPending(const TypeState& type, ShedPlace* place);
  // Withdraws a pending job refused by shedding at `now`, for TakeExpired.
  ExpiredJob ShedJob(Job& job, double now);
  // A new job of `type` (which sheds) arrives at `now` for the key `key_name` (`key`: it, null if
  // not tracked): if the type's queue stands, the refusal if its place would be the greatest,
  // else OK after the heaviest pending job was shed; OK if it does not stand.
  Status ShedForArrival(TypeState& type, std::string_view key_name, const KeyState* key,
                        double now);
  // After an admission of a job of `type` at `now`: if its queue stands, its heaviest pending job
  // is shed.
  void ShedAfterAdmission(TypeState& type, double now);
  Status ShedRefusal(const TypeState& type, double now) const;
  // The refusal of a request that would not wait for a token (EnqueueRequest::
  // refuse_without_token) when a bucket it is under has none at `now` (`key`: the key if
  // tracked: an untracked key's bucket is full); OK otherwise.
  Status RefuseWithoutToken(const TypeState& type, const KeyState* key, std::string_view key_name,
                            double now) const;
  // Enqueue's work, and EnqueueAndAdmit's with `admission`.
  //
  // The parts of the hot paths (EnterPending, LeavePending, Admit, ChargeAndHold, EndRunning)
  // take `kGrouping` as Pick does: false while no group was ever named (GroupTable::in_use),
  // when they test no key's group at all, so that a core with no group named runs the
  // instructions of one without groups (issue 51); an enqueue, a decision and a completion each
  // choose once (lanes_.grouping()). Other callers take the default, right in both cases.
  StatusOr<JobTicket> EnqueueJob(const EnqueueRequest& request, double now,
                                 std::optional<Admission>* admission);
  // Whether NextAdmission(now) would admit `job`, just made, at once, when nothing else is
  // pending (the caller checks that first): every cap and limit has room for it and no timed
  // step of its is due. Its fields are set; it is in no lane and counted nowhere as pending.
  bool AdmitsAtOnce(const Job& job, double now) const;
  // Admits `job`: charges its key, acquires its constraints, and describes the decision in
  // `admission`.
  template <bool kGrouping>
  void Admit(Job& job, const DecisionSkips& skipped, double now, Admission& admission);
  // Admit for a job AdmitsAtOnce accepted, which never entered the order; the same decision.
  void AdmitAtOnce(Job& job, double now, Admission& admission);
  // What both describe: the decision on `job`, ordered in `effective_priority`'s tier, with its
  // charge (a use of its estimate, unless the request gave its cost) and its key's weight.
  // Returns the estimate entry the charge was read from, held for the job's completion (null
  // for an explicit cost).
  EstimateTable::Entry* DescribeAdmission(const Job& job, int effective_priority,
                                          const DecisionSkips& skipped, double now,
                                          Admission& admission);
  // What both do once the job has left the order (Admit: from its lane; AdmitAtOnce: it never
  // entered): its key is charged, it holds its constraints (ForEachHold) and takes a token of
  // each rate limit it is under.
  template <bool kGrouping = true>
  void ChargeAndHold(Job& job, const Admission& admission, double now);
  // What both end with: the job runs (a resource it fills hides its parked jobs again, its join
  // point names it as running, its running facts replace its pending ones, `estimate` among
  // them: DescribeAdmission's hold).
  void StartRunning(Job& job, const Admission& admission, EstimateTable::Entry* estimate);
  // Puts a new job, made and counted nowhere yet, into the pending accounting at `now`: its
  // key's lane of its type in its own tier, the counts, its tier presence (idle catch-up), its
  // aging step and its queue-wait limit.
  template <bool kGrouping>
  void EnterPending(Job& job, double now);
  // Takes a job out of the pending accounting once it is no longer pending.
  template <bool kGrouping = true>
  void LeavePending(Job& job, double now);
  // Idle catch-up (RuleOptions::idle_catch_up): a pending job of the key in `tier` more (its
  // presence there made if it had none) or fewer (freed at none). Out of line: the enqueue's and
  // the admission's inlining stays as without it (bench/HISTORY.md).
  [[gnu::noinline]] static void EnterTier(KeyState& key, TierState& tier);
  [[gnu::noinline]] static void LeaveTier(KeyState& key, const TierState& tier);
  // Idle catch-up (docs/ordering.md, "Groups"): links a key's new or
  // moved presence in its tier into its tier's keys_by_acc, or for a key of `group` into the
  // group's presence in the tier (made if it has none); and unlinks it, freeing the group's
  // presence when it was its last key there.
  static void LinkTierPresence(TierPresence& presence, GroupState* group);
  // At an enqueue of an idle key's job in `tier`, before it is counted: the key's group's cost
  // if the group is idle too, then the key's, no less than the least it competes with there.
  [[gnu::noinline]] static void CatchUp(KeyState& key, const TierState& tier);
  static void UnlinkTierPresence(TierPresence& presence);
  // The least cost in `tier` among the keys without a group and the groups with jobs pending
  // there, or (`group` given) among the group's keys with jobs there; none when there are none.
  static std::optional<double> LeastInTier(const TierState& tier);
  static std::optional<double> LeastInTier(const TierState& tier, const GroupState& group);

  RuleOptions rule_;
  // The declared workers, who serves what, and the decision's reservations.
  WorkerTable workers_;
  // The types, tiers and conflict groups, the global cap, and the type level (reads workers_).
  TypeTable types_;
  KeyTable keys_;
  GroupTable groups_{rule_.default_group_limits};  // groups of keys (SetKeyGroup)
  LaneIndex lanes_{
      keys_, groups_};  // where the pending jobs wait: lanes, lane sets, wait groups, resources
  TimedSteps steps_;    // aging steps, queue-wait limits and pause clocks of the pending jobs
  std::vector<ExpiredJob> expired_;  // expired, not yet taken
  EstimateTable estimates_;

  JobTable jobs_;
  std::uint64_t next_seq_ = 0;
  std::int64_t pending_ = 0;
  std::vector<LeasedBucket> leased_;  // LeaseTokens's, in the order leased
};

}  // namespace fairgate::core

#endif  // FAIRGATE_CORE_ADMISSION_CORE_H_

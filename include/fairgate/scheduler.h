// fairgate/scheduler.h: the admission controller a server links in.
//
// Every unit of work goes through one Scheduler:
// - foreground work, where a caller waits: RunSync blocks the calling fiber or thread until the
//   job is admitted, runs `fn` right there on the caller, and returns its status;
// - foreground work in an event loop, where nothing may block: Acquire returns at once and later
//   hands a callback a Permit (fairgate/permit.h), which holds the job's slot until released
//   (fairgate/asio.h adapts it to Boost.Asio completion tokens); TryAcquire gives a Permit now
//   or refuses without queueing; RunAsync is RunSync with nobody waiting: it returns at once,
//   runs `fn` on the pool and tells a callback what RunSync returns;
// - background work: Submit returns at once, and `fn` runs later as a fiber on the scheduler's
//   own worker pool; the completion callback (if given) learns its status.
// - background work that must survive a crash: SubmitDurable stores it (fairgate/durable.h) and a
//   handler registered for its type runs it, at least once, after a restart too.
// Which job runs next, and when, is the admission rule of docs/ordering.md (tier, then the
// fairness key's accumulated cost, then arrival; global and tier caps in slots, type caps, key
// limits, conflict limits), decided by the deterministic core that this class wraps.
//
// Thread safety: every method may be called from any thread or fiber at once. One lock guards the
// core; it is never held while user code runs or while a caller waits. RunSync blocks only the
// calling fiber when called from a fiber (including a Submit job of this or another scheduler),
// and the thread when called from a plain thread.
//
// What may suspend a fiber: RunSync (until admitted, then while fn runs), Shutdown and Drain
// (until quiet), and the destructor. Every other method returns without waiting for anything but
// the core's lock, which is held only for a decision; that lock is a thread lock, so a fiber
// that meets it contended blocks its thread for that moment rather than yielding. Nothing ever
// suspends a fiber while that lock is held (a suspended holder would stop the scheduler): the
// library checks it as it runs and aborts with a message naming the lock if it ever did.
//
// Jobs and their functions:
// - `fn` receives the job's context: RunSync's `ctx`, or for Submit a context that is cancelled
//   when the scheduler shuts down. A running job whose context is done is expected to stop soon.
// - An exception escaping `fn` becomes an Internal status for that job; the slot is released and
//   the scheduler keeps working. A completion callback must not throw; if it does, the exception
//   is caught and dropped, since nobody is left to receive it.
// - A job's run time, from the scheduler's clock, is the observed cost that the estimate of its
//   (type, id) learns. A clock that steps backwards counts as zero.
// - `fn` must not call Shutdown, Drain or the destructor of its own scheduler (that would wait
//   for itself).
//
// Exactly once: every job accepted (RunSync or Submit returned OK, or RunSync reached its wait;
// RunAsync or Acquire returned OK) either runs or is told that it did not, exactly once: RunSync
// returns, and a RunAsync callback is called once with, Cancelled, DeadlineExceeded, or fn's
// status; a Submit callback is called once, with fn's status, Cancelled, or DeadlineExceeded (its
// type's max_queue_wait, fairgate/job_type.h); an Acquire callback is called once, with a Permit
// or with why there is none, and the permit releases the job once. Each may also be told
// ResourceExhausted (RetryAfter says when to try again), uncharged, when its job is refused while
// it waits: shed (fairgate/shedding.h), or, asked not to wait for a token, when the lease of a
// fleet's bucket it waited for brought none (JobOptions::refuse_without_token). For calls that
// joined one job (below) it holds per call: each is told exactly once, the job runs at most once,
// and one function runs it.
//
// Coalescing (JobTypeConfig::coalesce, off by default): calls for a (type, id) share one job.
// - Which calls may join what:
//     call                                  a pending job of its id   a running job of its id
//     RunSync, RunAsync                     joins                     joins (the one admitted last)
//     Submit                                joins                     no: queues a job of its own
//     Submit with JobOptions::join_running  joins                     joins (the one admitted last)
//     Acquire                               no                        no
//     SubmitDurable                         as Submit                 as Submit
//   A call that may join both joins the running job (its result is the soonest). A call that
//   finds nothing to join queues a job as usual, which later calls may join. Acquire never joins
//   and is never joined (its caller runs its own work under the permit). A plain Submit does not
//   join a running job because it may ask for work that must start after the call (fetch what
//   was pushed since); join_running says any run already under way will do.
// - The job keeps the place, the fairness key and the arrival of the call that queued it (its
//   creator): that key alone is charged, once; joiners are not charged, their keys are not
//   tracked, their cost hints are ignored, and the pending bounds do not count them. Its
//   queue-wait limit runs from its arrival, for every call that joined it.
// - Who pays when the creator leaves: still the creator's key. A creator whose RunSync context
//   ends while others wait on the job leaves, but the job keeps the creator's key, place and
//   arrival, and when it is admitted that key is charged, as if the creator were still there.
//   The joiners got the creator's place in the order, so the creator's key pays for it; a client
//   cannot queue under one key and be charged under another by leaving.
// - One function runs the job, when admitted: that of the first RunSync caller still waiting, in
//   that caller's fiber or thread (a RunAsync counts as such a caller; its function runs on a
//   pool fiber); with none, a Submit's: the first's (kJoin) or the latest's
//   (kSupersede). Every other call gets the status of that run: RunSync returns it, a Submit
//   callback receives it. The functions that did not run are released unrun.
// - A call that leaves (its RunSync context ends) leaves alone: the job stays for the others,
//   and is cancelled, uncharged, only when its last call has left. A RunSync that joined a
//   running job and whose context ends returns at once; the run goes on.
// - Counted in TypeSnapshot::joined and fairgate_jobs_joined_total; the job's own events and
//   counts (enqueued, admitted, completed) are its own, once.
//
// Shutdown: Shutdown(ctx) refuses new calls (Unavailable), fails every pending job (RunSync
// callers return Cancelled, Submit and Acquire callbacks get Cancelled), cancels the context of
// running Submit jobs, and waits until every running job has finished, every permit has been
// released and every callback has run, or until
// `ctx` is done (then it returns ctx.Err() and the jobs go on; the destructor waits for them).
// Calls that keep arriving meanwhile are refused at once and do not hold Shutdown back.
// Drain(ctx) refuses new calls but runs everything pending first (resuming what is paused), then
// shuts down. The destructor shuts down and waits; like any object's, it must not begin while
// another thread is still inside a call of this scheduler.
#ifndef FAIRGATE_SCHEDULER_H_
#define FAIRGATE_SCHEDULER_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fairgate/context.h"
#include "fairgate/durable.h"
#include "fairgate/export.h"
#include "fairgate/group_limits.h"
#include "fairgate/job_name.h"
#include "fairgate/job_options.h"
#include "fairgate/job_type.h"
#include "fairgate/key_limits.h"
#include "fairgate/options.h"
#include "fairgate/periodic.h"
#include "fairgate/permit.h"
#include "fairgate/snapshot.h"
#include "fairgate/status.h"
#include "fairgate/store.h"
#include "fairgate/worker.h"

namespace fairgate {

class FAIRGATE_EXPORT Scheduler {
 public:
  using JobFn = std::function<Status(const Context& ctx)>;
  using DoneCallback = std::function<void(const Status& status)>;
  using PermitCallback = std::function<void(StatusOr<Permit> permit)>;

  // Starts a scheduler: validates `options` (InvalidArgument naming the bad field), starts the
  // worker pool and the TTL sweeper.
  static StatusOr<std::unique_ptr<Scheduler>> Create(const SchedulerOptions& options = {});
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Registers a job type before its first job. Idempotent for an equal config; AlreadyExists for
  // a different one; InvalidArgument for a bad one. A valid type that is probably not what was
  // meant (JobTypeWarnings in fairgate/job_type.h: its tier's cap below its max_concurrency, say;
  // or a worker that names it with fewer slots than its jobs take, fairgate/worker.h) is
  // registered, and each warning goes to RuntimeOptions::warn (stderr by default).
  Status RegisterType(std::string_view name, const JobTypeConfig& config);

  // Waits until the job (type, id) of `fairness_key` is admitted, then runs `fn(ctx)` on the
  // calling fiber or thread and returns its status. Returns without running `fn`, uncharged:
  // ctx.Err() if `ctx` is done before admission; DeadlineExceeded if the job is still pending at
  // its type's max_queue_wait; Cancelled if the scheduler shuts down first; Unavailable after
  // Shutdown or Drain began; NotFound for an unknown type; InvalidArgument for an empty id or
  // function or a bad `options` (fairgate/job_options.h); ResourceExhausted when a pending bound is
  // reached.
  Status RunSync(const Context& ctx, const JobName& job, const JobFn& fn,
                 const JobOptions& options = {}) ABSL_LOCKS_EXCLUDED(internal::core_lock);

  // RunSync with nobody waiting: queues the job exactly as RunSync does (the same order, caps and
  // conflicts; of a coalescing type it joins a pending or running job of its id, and its `fn`
  // counts as a RunSync caller's when the function that runs the job is chosen) and returns at
  // once. Refusals are returned here, as RunSync returns them, and then `done` is never called.
  // Otherwise `fn(ctx)` runs on a pool fiber if and when this call runs the job, and `done` (may
  // be empty) is called exactly once with what RunSync would have returned: fn's status (on that
  // fiber), or, from the thread or fiber that decided it (as a Submit's `done` that did not run:
  // inside ctx's cancel function, a call of this scheduler, the timer), the status of the run it
  // joined, ctx.Err() (uncharged) if `ctx` is cancelled or its deadline passes first (the call
  // leaves as a RunSync caller leaves; a deadline is watched by the scheduler's timer),
  // DeadlineExceeded at its type's max_queue_wait, Cancelled if the scheduler shuts down first.
  // For callers that must not block while they wait: an event loop, or another language's
  // runtime through the C interface (fairgate_run_async), where a RunSync would hold a thread.
  Status RunAsync(const Context& ctx, const JobName& job, JobFn fn, DoneCallback done = {},
                  const JobOptions& options = {});

  // The asynchronous RunSync: queues the job (type, id) of `fairness_key` in the same order, under
  // the same caps and conflicts, and returns at once. Refusals are returned here (as RunSync
  // returns them: ctx.Err() if `ctx` is already done, Unavailable, NotFound, InvalidArgument for
  // an empty id or callback or bad options, ResourceExhausted), and then `on_admitted` is never
  // called.
  // Otherwise `on_admitted` is called exactly once, with no fairgate lock held:
  // - with a Permit when the job is admitted; the job runs until the permit is released;
  // - with ctx.Err() (Cancelled or DeadlineExceeded), uncharged, when `ctx` is done first: a
  //   deadline is watched by the scheduler's timer, so it ends the wait with no caller to poll;
  // - with DeadlineExceeded, uncharged, when the job is still pending at its type's
  //   max_queue_wait;
  // - with Cancelled when the scheduler shuts down first;
  // - with ResourceExhausted, uncharged, when the job is refused while pending (shed, or a fleet
  //   bucket's lease it waited for brought no token; above, "Exactly once").
  // A type that takes fleet-wide leases (FleetOptions::conflict_groups,
  // FleetOptions::type_caps) is admitted, then takes its leases on a pool fiber and gets its permit
  // there; if ctx ends, the scheduler shuts down or the store fails before it has them, the job
  // completes (charged as having run for no time) and the callback gets that status.
  // It runs on the thread that made the decision: inside Acquire itself when the job is admitted
  // at once, inside whatever released a slot (a Permit's Release, a RunSync return, a worker),
  // inside ctx's cancel function, on the scheduler's timer, or on a pool fiber (above). It should
  // be quick and must not block; it may call the scheduler (release its permit, acquire again). An
  // event loop posts the result to itself: fairgate/asio.h does so for Boost.Asio.
  Status Acquire(const Context& ctx, const JobName& job, PermitCallback on_admitted,
                 const JobOptions& options = {});

  // Admitted at once or not at all: a Permit when the job (type, id) of `fairness_key` is admitted
  // by this call (in fair order: with jobs pending ahead of it, only if they cannot run and it
  // can), or ResourceExhausted when it would have to wait, and then it is not queued: it leaves
  // with a cancel event, uncharged, and nothing can admit it later. Otherwise the refusals
  // Acquire returns (Unavailable, NotFound, InvalidArgument, ResourceExhausted), and
  // FailedPrecondition for a type that takes fleet-wide leases (FleetOptions::conflict_groups,
  // type_caps), which a store grants after the admission: use Acquire for those. For a caller that
  // has something else to do when the slot is taken (serve from a cache, answer 429).
  StatusOr<Permit> TryAcquire(const JobName& job, const JobOptions& options = {});

  // Queues the background job (type, id) of `fairness_key` and returns at once. `done` (may be
  // empty) is called exactly once, with fn's status, Cancelled or DeadlineExceeded, from the thread
  // or fiber that decided it (a worker fiber, Shutdown, or another call of this scheduler that
  // released the slot or queued it). Refusals are returned here (as RunSync returns them), and then
  // `done` is never called; a Submit that returns OK just as Shutdown or Drain begins may be told
  // Cancelled by `done`. Submit usually does not wait for the scheduler's lock: a job whose type
  // has no max_queue_wait, with no pending bound configured, is left for whoever holds the lock
  // next to queue, in the order of the calls; every later call of the scheduler finds it queued.
  Status Submit(const JobName& job, JobFn fn, DoneCallback done = {},
                const JobOptions& options = {});

  // Runs `fn` as the background job (type, id) of `fairness_key` again and again, each run
  // `interval` after the previous one ended, never two at once (fairgate/periodic.h has the
  // schedule, the jitter and the spread first run). Returns a handle that stops it. Refused, with
  // nothing scheduled: Unavailable after Shutdown or Drain began; NotFound for an unknown type;
  // InvalidArgument for an empty id or function, an interval that is not finite and in (0, 1e8]
  // seconds, or a jitter outside [0, 1).
  StatusOr<PeriodicJob> SubmitEvery(const JobName& job, Seconds interval, JobFn fn,
                                    const PeriodicOptions& options = {});

  // Durable background work (fairgate/durable.h) needs a store (PersistenceOptions::store);
  // without one each of these returns FailedPrecondition, RegisterDurable too.
  //
  // Registers the handler of durable jobs of `type` and how their failures are retried. NotFound
  // for an unregistered type, AlreadyExists for a second handler, InvalidArgument for an empty
  // handler or a bad policy (the field named).
  Status RegisterDurable(std::string_view type, DurableHandler handler,
                         const RetryPolicy& retry = {});
  // Queues every stored job that is neither done nor dead, in stored order; those waiting out a
  // retry's backoff are queued when it ends; those of types without a handler stay stored, unrun;
  // those whose last allowed attempt was cut short (fairgate/durable.h) become dead.
  // Call it once, after registering the types and handlers: FailedPrecondition the second time.
  // The store's status if it cannot be read (then it may be called again). From it until this
  // scheduler is destroyed no other scheduler works the store's jobs: another's Recover on the
  // same store, in this process or another, is FailedPrecondition naming the holder (and may be
  // called again once it is gone; Store::BeginExclusiveUse). With a shared store
  // (several replicas) nothing is loaded: from now on this replica claims the jobs of its
  // handlers' types by lease (FleetOptions::lease_ttl, claim_interval, max_claimed), the
  // first claim at once (RecoveryReport::queued).
  StatusOr<RecoveryReport> Recover();
  // Stores the durable job (type, id) of `fairness_key` with `payload` and queues it; returns its
  // sequence number once it is stored. Refused, with nothing stored: FailedPrecondition before
  // Recover; NotFound for a type without a handler; InvalidArgument for an empty id; Unavailable
  // after Shutdown or Drain began; ResourceExhausted when a pending bound is reached; the store's
  // status when it cannot store it (a full disk: ResourceExhausted; a read-only file:
  // FailedPrecondition; a job larger than the store's max_job_bytes, its type, id, fairness key
  // and payload together: InvalidArgument). A job stored while the scheduler begins to shut down is
  // kept, and runs after the next Recover. With a shared store the job is not queued here:
  // whichever replica claims it first runs it (this one is woken to claim at once), and a full
  // queue does not refuse it; its number is 0 in one case: the connection to the database broke
  // as the job was stored with others submitted at once, and a replica had run and removed it by
  // the time the store learned it was stored (fairgate/postgres_store.h).
  StatusOr<std::uint64_t> SubmitDurable(const JobName& job, std::string_view payload);
  // Stores many durable jobs in one commit of the store (one fsync for all of them) and queues
  // them in the order given; returns their sequence numbers, in that order, once all are stored.
  // All or nothing: a job that SubmitDurable would refuse before storing it (FailedPrecondition,
  // NotFound, InvalidArgument, Unavailable: the message names the job's index in the batch), or a
  // store that cannot take them, refuses the whole batch and stores none. Once stored, the batch
  // is accepted as a whole: a job the queue has no room for now (a pending bound) is not refused
  // but waits in the store and is queued when room frees (tried every second, as a job Recover
  // found under a full queue). An empty batch stores nothing and returns no numbers. With a
  // shared store a job's number may be 0, as SubmitDurable's.
  StatusOr<std::vector<std::uint64_t>> SubmitDurableBatch(
      const std::vector<DurableSubmission>& jobs);
  // The durable jobs that ran out of attempts, in stored order, with their last errors.
  StatusOr<std::vector<StoredJob>> DeadJobs();
  // A page of them: at most `limit` whose sequence numbers are above `after`, in stored order;
  // the next page starts after the last one's `sequence`, and a page shorter than `limit` means
  // that no dead job is numbered above it yet. Both stores read the page only. InvalidArgument
  // for a limit of 0; FailedPrecondition without a store; the store's status when it cannot.
  StatusOr<std::vector<StoredJob>> DeadJobs(std::uint64_t after, std::size_t limit);
  // Gives a dead job (DeadJobs: its `sequence`) its attempts again: it lives again with its
  // attempts counted from 0 and its last error kept, and is queued as a job Recover found is (a
  // full queue: tried again a second later; with a shared store, claimed by whichever replica
  // first; a type without a handler here: stays stored for a process that has one). NotFound
  // when the store holds no dead job of that number (a live one included); FailedPrecondition
  // without a store or before Recover; Unavailable after Shutdown or Drain began; the store's
  // status when it cannot.
  Status RetryDeadJob(std::uint64_t sequence);
  // Deletes a dead job from the store, with the same refusals as RetryDeadJob.
  Status RemoveDeadJob(std::uint64_t sequence);
  // Writes the learned estimates, keys' costs and periodic schedules to the store now, as the
  // periodic flush does (state_flush_interval) and Shutdown does last. The store's status.
  Status FlushState();

  // See the header comment. Idempotent; OK once everything has finished.
  Status Shutdown(const Context& ctx) ABSL_LOCKS_EXCLUDED(internal::core_lock);
  Status Drain(const Context& ctx) ABSL_LOCKS_EXCLUDED(internal::core_lock);

  // The core's counts: running and pending per tier and type, keys and estimates tracked, and the
  // counters since the start. The second form also lists the `heaviest_keys` keys with the
  // highest accumulated cost (O(keys)).
  fairgate::Snapshot Snapshot() const;
  fairgate::Snapshot Snapshot(std::size_t heaviest_keys) const;
  // Appends the scheduler's metrics to `out` in the Prometheus text exposition format: jobs
  // enqueued, admitted, completed (by status), rejected (by reason), cancelled, expired (at their
  // type's max_queue_wait); pending and running
  // per tier and type; queue-wait and run-time histograms; keys, estimates, evictions, aging steps,
  // jobs that waited on a conflict or on capacity. Names under `fairgate_`, base units; no label
  // holds a fairness key or a job id.
  void WriteMetrics(std::string& out) const;
  // What `fairness_key` has been charged so far, if the key is tracked. A key is tracked from its
  // first accepted job until key_ttl (SchedulerOptions) after it last had nothing pending or
  // running: a key whose only job was cancelled before admission is tracked, uncharged (0 if it
  // was new), until then; a call refused at the door (NotFound, InvalidArgument, a pending bound)
  // does not make a key tracked.
  std::optional<double> AccumulatedCost(std::string_view fairness_key) const;
  // The learned cost of (type, id) in seconds, if tracked.
  std::optional<double> Estimate(TypeName type, JobId id) const;

  // Divides the key's later charges by `weight` (finite, > 0; else InvalidArgument): keys that
  // are all backlogged get service in proportion to their weights. Charges already made stay.
  // Kept for the scheduler's life, also while the key is idle or forgotten by the TTL sweep.
  Status SetKeyWeight(std::string_view fairness_key, double weight);
  // Puts the key in a group of keys (a tenant: an organisation's users, a CI farm's addresses;
  // "" for none, when the key is a group of its own). The order then puts the least-charged
  // group first and, within it, the least-charged key (docs/ordering.md, "Groups"), so a client
  // that spreads its work over many keys gets one group's share, not one per key. A group is
  // charged what its keys are, divided by its weight (SetGroupWeight). A key with jobs moves
  // with them: its pending jobs take their places in the new group, its running ones count and
  // are reconciled there. Kept for the scheduler's life, like a weight; a group's cost is
  // forgotten after key_ttl with nothing of its keys pending or running, as a key's is. With
  // RuleOptions::idle_catch_up, an idle group catches up among the groups of its job's tier and
  // an idle key among its group's keys there.
  Status SetKeyGroup(std::string_view fairness_key, std::string_view group);
  // Divides the group's later charges by `weight` (finite, > 0; else InvalidArgument), as a
  // key's weight does among keys. Kept like a key's weight.
  Status SetGroupWeight(std::string_view group, double weight);
  // Sets the group's limits (fairgate/group_limits.h; InvalidArgument if out of range), kept like
  // its weight: max_running caps the running jobs of all its keys together, min_running puts its
  // keys first within their tier while it runs fewer. Raising max_running admits at once what it
  // makes admissible.
  Status SetGroupLimits(std::string_view group, const GroupLimits& limits);
  // The group's accumulated cost, if it is tracked (one of its keys had a job or a charge, and
  // the group has not since been idle for key_ttl).
  std::optional<double> GroupAccumulatedCost(std::string_view group) const;
  // Charges the key `cost` seconds of work done without a job (a response served from a cache,
  // say: no slot taken, but not free), as an admission charges its job's estimate: divided by
  // the key's weight; its pending jobs take their new places at once. A key not tracked becomes
  // tracked (idle, kept for key_ttl from now, as an idle key's is restarted). Never admits or
  // holds back anything by itself. InvalidArgument for a cost that is not finite and >= 0. With
  // a fleet, the charge is shared as a job's is (fleet costs).
  Status Charge(std::string_view fairness_key, double cost);
  // Sets the key's limits (fairgate/key_limits.h; InvalidArgument if out of range), kept like a
  // weight. Raising max_running admits at once what it makes admissible.
  Status SetKeyLimits(std::string_view fairness_key, const KeyLimits& limits);
  // Pauses a job type, or a fairness key (all its types): its pending jobs, and those enqueued
  // while it is paused, stay queued in their places and hold no slot, but none is admitted until
  // it is resumed; their aging clock (RuleOptions::aging) stops meanwhile. Running jobs go
  // on. A queue-wait limit keeps running: a paused job still pending at its type's max_queue_wait
  // leaves with DeadlineExceeded. Resuming admits at once what it makes admissible. Idempotent;
  // NotFound for an unknown type. A key need not have jobs: its pause is kept like its weight.
  // With a shared store (replicas), a replica claims no stored job of a type paused on it, and
  // gives back at once any that a claim under way when the pause came took; those it claimed
  // before stay with it, paused. Snapshot() lists what is paused (TypeSnapshot::paused,
  // Snapshot::paused_keys), and so do the metrics (fairgate_type_paused, fairgate_keys_paused).
  // O(1), with aging O(jobs).
  Status PauseType(std::string_view type);
  Status ResumeType(std::string_view type);
  Status PauseKey(std::string_view fairness_key);
  Status ResumeKey(std::string_view fairness_key);
  // Workers (fairgate/worker.h; docs/ordering.md, "Workers"): where jobs may run. Without any,
  // max_concurrency slots serve every type. The first AddWorker turns them on for good: from
  // then a job is admitted only onto a worker that serves its type and has room for its slots,
  // the most specialised of those (fewest types served, then added first), and the job's
  // context names it (Context::Worker; a permit's: Permit::Worker); the caller sends the work
  // there. A type no worker serves waits (Snapshot::types_without_worker). Each admits at once
  // what it makes admissible.
  //
  // Adds a worker: idempotent for an equal config, AlreadyExists for another, InvalidArgument
  // for a bad one (ValidateWorker). It serves the registered types it names and has the slots for
  // (WorkerServes); for each it names but is narrower than, this call and UpdateWorker's warn
  // through RuntimeOptions::warn, and the type waits for a wider worker
  // (Snapshot::types_without_worker).
  Status AddWorker(std::string_view name, const WorkerConfig& config);
  // Changes a worker's slots and types. Its running jobs go on and keep their slots, even those
  // of a type it no longer serves. NotFound for an unknown worker.
  Status UpdateWorker(std::string_view name, const WorkerConfig& config);
  // Removes a worker (it stopped, or its connection closed): its slots leave the accounting at
  // once, and each job running on it ends now, once: its context is cancelled with Unavailable;
  // when its function returns, a RunSync returns that Unavailable (WorkerLost tells it from the
  // job's own), a Submit's callback gets it, or with JobOptions::requeue_on_worker_loss the job
  // is submitted again, a durable job's attempt fails with it and follows its retry policy, and
  // a permit's job context is cancelled (Permit::JobContext) and its Release completes nothing. The
  // key keeps what it was charged; the estimate learns nothing. NotFound for an unknown worker.
  Status RemoveWorker(std::string_view name);

  // With RuleOptions::aging, how long a pending job of `type` takes at most to reach the
  // aging ceiling (grace + steps * interval, plus any time it spends paused); 0 when it cannot
  // rise (its tier is at or above the ceiling). What that bounds, and what it does not (a job of
  // the ceiling tier, a tier above the ceiling that stays backlogged): docs/ordering.md.
  // NotFound for an unknown type.
  StatusOr<Seconds> MaxWaitToCeiling(std::string_view type) const;

 private:
  class Impl;
  explicit Scheduler(std::unique_ptr<Impl> impl);
  static Permit MakePermit(std::unique_ptr<internal::HeldJob> job) {
    return Permit(std::move(job));
  }
  std::unique_ptr<Impl> impl_;
};

// How long the scheduler runs Submit jobs back to back on one worker fiber (a completion that
// admits the next job runs it there, with no wake-up) before it lets the thread's other fibers
// run: tasks its worker takes from the pool, RunSync callers woken on that thread.
inline constexpr Seconds kChainBudget{200e-6};

// Lets the other fibers of the calling thread run, then returns. Submit jobs run as fibers,
// several on each worker thread, and a fiber runs until it waits: a job that computes for a long
// time without waiting keeps the others on its thread waiting, and should call this every
// millisecond or so. On a thread with no other fibers it returns at once (in the thread build,
// FAIRGATE_RUNTIME_THREADS, it is std::this_thread::yield()).
FAIRGATE_EXPORT void YieldToOtherJobs();

}  // namespace fairgate

#endif  // FAIRGATE_SCHEDULER_H_

#include "fairgate/scheduler.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/cleanup/cleanup.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "core/admission_core.h"
#include "runtime/claimer.h"
#include "runtime/context_state.h"
#include "runtime/cpu_pressure.h"
#include "runtime/decision_log.h"
#include "runtime/fiber_stack.h"
#include "runtime/fleet_leases.h"
#include "runtime/periodic_state.h"
#include "runtime/state_keeper.h"
#include "runtime/submit_intake.h"
#include "runtime/waiting.h"
#include "runtime/worker_pool.h"

namespace fairgate {
namespace {

// One accepted job, from its acceptance until it is reported.
struct JobRecord;
using RecordPtr = std::shared_ptr<JobRecord>;
// The jobs one decision admitted or refused: rarely more than a few, gathered under the lock,
// where a heap allocation per decision would lengthen the critical section.
using RecordList = absl::InlinedVector<RecordPtr, 4>;
// Acquire's waiting jobs by the deadline of their context, for the scheduler's timer.
using DeadlineMap = std::multimap<Context::Clock::time_point, RecordPtr>;

// One accepted call, from its acceptance until it is reported. Calls that coalesced share one
// core job: the record in the scheduler's table for the job's slot (its lead; once admitted, the
// call that runs it) lists the others, which are told the status of the run.
struct JobRecord {
  // A call's states. Every transition is made under the scheduler's lock, in the function named:
  //
  //   kNew     -> kPending    EnqueueLocked: its job is queued, or it joined a pending job of its
  //                           id (coalescing)
  //   kNew     -> kJoined     EnqueueLocked: it joined a run of its id under way (RunSync)
  //   kNew     -> kCancelled  TakeIntakeLocked: a Submit the intake held when shutdown began
  //   kPending -> kRunning    TakeAdmissionLocked: its job is admitted and it runs it (also
  //                           within the EnqueueLocked that queued it, when that call admits it)
  //   kPending -> kJoined     TakeAdmissionLocked, through ChooseRunnerLocked: its job is admitted
  //                           and another of the job's calls runs it
  //   kPending -> kCancelled  ReapExpiredLocked (max_queue_wait, with the calls that joined it);
  //                           LeaveQueueLocked and CancelLocked (its context ended, an Acquire's
  //                           deadline passed, shutdown)
  //   kJoined  -> kFinished   Complete: the run it joined ended, with `result`
  //   kJoined  -> kCancelled  LeaveRunLocked: its context ended; the run goes on for the others
  //
  // kRunning, kFinished and kCancelled are final: whoever ran the job, or the call told of its
  // end or refusal, reports it once, outside the lock. An Acquire's context may end while it is
  // kNew (before the core queued it). MoveTo is the one way a state changes, and it holds the
  // change to this table.
  enum class State { kNew, kPending, kRunning, kJoined, kFinished, kCancelled };
  // Whether the table above has the transition `from` -> `to`.
  static constexpr bool MayMove(State from, State to) {
    switch (from) {
      case State::kNew:
        return to == State::kPending || to == State::kJoined || to == State::kCancelled;
      case State::kPending:
        return to == State::kRunning || to == State::kJoined || to == State::kCancelled;
      case State::kJoined:
        return to == State::kFinished || to == State::kCancelled;
      case State::kRunning:
      case State::kFinished:
      case State::kCancelled:
        return false;
    }
    return false;
  }
  // Moves the call to `to`; a transition the table does not have aborts, naming both states (a
  // call decided twice, and so reported twice, would begin with one).
  void MoveTo(State to) {
    if (!MayMove(state, to)) {
      static constexpr const char* kNames[] = {"kNew",    "kPending",  "kRunning",
                                               "kJoined", "kFinished", "kCancelled"};
      std::fprintf(stderr, "fairgate: a call moved from %s to %s\n",
                   kNames[static_cast<int>(state)], kNames[static_cast<int>(to)]);
      std::abort();
    }
    state = to;
  }

  // What an admission reads and writes comes first, together: with a large backlog the record is
  // long out of every cache when its job is admitted, and each line it touches is a miss.
  core::JobTicket ticket;
  bool sync = false;          // RunSync
  bool async = false;         // Acquire
  bool fleet_leases = false;  // Acquire: its type takes fleet-wide leases (as when accepted)
  State state = State::kNew;  // guarded by the scheduler's lock
  double admitted_at = 0;     // Acquire: when the permit was granted
  // The lead's: the other calls that share its job, in the order they joined. Under the lock.
  std::vector<std::shared_ptr<JobRecord>> joiners;
  // kCancelled: what its caller is told. Set under the lock, read by whoever reports it.
  Status refusal;
  // Acquire: the entry in the deadline map while pending (under the scheduler's lock).
  std::optional<DeadlineMap::iterator> deadline_entry;
  // kFinished: the status of the run it joined. Set under the lock, read by whoever reports it.
  Status result;

  // RunSync: the caller sleeps on `wake` until `signalled`; the truth is `state`, which the
  // caller may read without the scheduler's lock once `decided` (Signal).
  internal::WaitMutex wake_mutex;
  internal::WaitCondition wake;
  bool signalled = false;
  bool decided = false;

  // Submit. claimed_leases: the fencing token of the fleet-wide leases a claimed durable job's
  // claim took (the store gives them back with the job), 0 for none.
  Scheduler::JobFn fn;
  Scheduler::DoneCallback done;
  std::uint64_t claimed_leases = 0;

  // Acquire: called once; the context's cancel callback (0: none, or it ran inline).
  Scheduler::PermitCallback on_admitted;
  Context ctx = Context::Background();
  std::uint64_t ctx_callback = 0;
};

// A copy of `status` that shares nothing with it. Each call that joined a run gets one: the
// copies are read and dropped on different threads, and absl::Status counts the references to
// a shared representation inside libabsl, where ThreadSanitizer cannot see the handover.
Status Detached(const Status& status) {
  Status copy(status.code(), status.message());
  status.ForEachPayload(
      [&](absl::string_view url, const absl::Cord& payload) { copy.SetPayload(url, payload); });
  return copy;
}

// Wakes a RunSync caller. `decided`: its state was set (under the scheduler's lock) to one that
// nothing but the caller changes any more (kRunning, kCancelled, kFinished), so the caller may
// read it without taking that lock again.
void Signal(JobRecord& record, bool decided) {
  {
    std::unique_lock lock(record.wake_mutex);
    record.signalled = true;
    record.decided |= decided;
  }
  record.wake.notify_all();
}

// Runs user code at the edge: an exception becomes a status. Nothing suspends inside a catch
// block (exception state is per thread in this Boost.Fiber).
Status Invoke(const Scheduler::JobFn& fn, const Context& ctx) {
  std::string error;
  try {
    return fn(ctx);
  } catch (const std::exception& e) {
    error = e.what();
  } catch (...) {
    error = "an exception that is not a std::exception";
  }
  internal::ForgetUnwoundFrames();
  return absl::InternalError(absl::StrCat("job function threw: ", error));
}

void InvokeDone(const Scheduler::DoneCallback& done, const Status& status) {
  if (!done) return;
  try {
    done(status);
  } catch (...) {
    // Documented: nobody is left to receive it.
  }
}

// Calls an Acquire callback once, and lets go of what it holds.
void InvokeAdmitted(JobRecord& record, StatusOr<Permit> result) {
  Scheduler::PermitCallback callback = std::move(record.on_admitted);
  record.on_admitted = nullptr;
  try {
    callback(std::move(result));
  } catch (...) {
    // As for a completion callback: nobody is left to receive it. A permit it held is released
    // by its destructor during the unwinding.
  }
}

}  // namespace

class Scheduler::Impl {
 public:
  // `stalled_seconds`: adaptive capacity's signal (unused without it).
  // `keeper`: the store's side (null without a store).
  Impl(const SchedulerOptions& options, std::unique_ptr<core::AdmissionCore> core,
       std::function<StatusOr<double>()> stalled_seconds,
       std::unique_ptr<internal::StateKeeper> keeper)
      : options_(options),
        stalled_seconds_(std::move(stalled_seconds)),
        epoch_(std::chrono::steady_clock::now()),
        keeper_(std::move(keeper)),
        core_(std::move(core)),
        log_(options, *core_),
        background_(WithCancel(Context::Background())),
        pool_(options.worker_threads > 0 ? options.worker_threads : options.max_concurrency,
              options.fiber_stack_bytes),
        // Its own thread, not a pool fiber: a job that blocks its worker thread (a subprocess, a
        // blocking read) must not hold up deadlines, expiries and periodic runs behind it.
        timer_([this] { SweeperLoop(); }) {
    if (keeper_) {
      // The keys' costs now; each type's estimates when it is registered.
      {
        Locked lock(this);
        const double now = Now();
        const double wall = internal::WallNow();
        const bool shared = keeper_->store().Shared();
        for (SavedKey& key : keeper_->TakeKeys()) {
          key.idle_since = now - (wall - key.idle_since);
          StatusOr<bool> restored = core_->RestoreKey(key, now);  // a bad row is skipped
          // Already the fleet's: shared again only what is charged here from now on.
          if (shared && restored.ok() && *restored) shared_costs_[key.key] = key.accumulated_cost;
        }
      }
      keeper_->StartFlusher(options_.state_flush_interval,
                            [this](double since) { return CollectLearned(since); });
      if (keeper_->store().Shared()) {
        const internal::Claimer::Settings settings{
            options_.lease_ttl.count(), options_.claim_interval.count(),
            static_cast<std::size_t>(options_.max_claimed > 0 ? options_.max_claimed
                                                              : options_.max_concurrency)};
        claimer_ = std::make_unique<internal::Claimer>(
            *keeper_, settings, [this] { return ClaimableTypes(); },
            [this](std::vector<StoredJob> jobs) { QueueClaimed(std::move(jobs)); },
            [this] { ShareCosts(); });
        claimer_->StartThread();
        if (!options_.fleet_conflict_groups.empty() || !options_.fleet_type_caps.empty()) {
          fleet_ = std::make_unique<internal::FleetLeases>(*keeper_, options_);
        }
      }
    }
  }

  ~Impl() {
    (void)Shutdown(Context::Background());  // with no deadline it returns once all is done
    if (claimer_) claimer_->Stop();         // every claimed job has finished or been released
    if (keeper_) keeper_->StopFlusher();    // Shutdown flushed last
    StopSweeper();
    timer_.join();
    // pool_ is destroyed next (declared before the timer): it joins its threads.
  }

  Status RegisterType(std::string_view name, const JobTypeConfig& config) {
    bool first = false;
    Status status;
    {
      Locked lock(this);
      first = !core_->TypeIndex(name).has_value();
      status = core_->RegisterType(name, config);
      if (status.ok()) {
        log_.TypeRegistered(name, config.priority);
        const std::uint32_t index = *core_->TypeIndex(name);
        if (coalesce_.size() <= index) coalesce_.resize(index + 1);
        coalesce_[index] = config.coalesce;
        if (config.max_queue_wait == 0) intake_types_.Add(name);
        if (fleet_) fleet_->TypeRegistered(name, config);
        if (first && keeper_) {
          const double now = Now();
          const double wall = internal::WallNow();
          for (SavedEstimate& estimate : keeper_->TakeEstimates(name)) {
            estimate.last_used = now - (wall - estimate.last_used);
            (void)core_->RestoreEstimate(estimate, now);  // a bad row is skipped
          }
        }
      }
    }
    if (status.ok() && first) {
      for (const std::string& warning : JobTypeWarnings(name, config, options_.max_concurrency)) {
        if (options_.warn) {
          options_.warn(warning);
        } else {
          std::fprintf(stderr, "fairgate: warning: %s\n", warning.c_str());
        }
      }
    }
    return status;
  }

  Status RunSync(const Context& ctx, std::string_view type, std::string_view id,
                 std::string_view key, const JobFn& fn, const JobOptions& options) {
    if (!fn) return absl::InvalidArgumentError("job function is empty");
    if (Status s = ctx.Err(); !s.ok()) return s;
    bool decided = false;  // admitted by the call itself: it need not wait to be told
    StatusOr<RecordPtr> accepted = Accept(
        {type, id, key, options.cost, core::Join::kPendingOrRunning},
        [](const RecordPtr& r) { r->sync = true; }, &decided);
    if (!accepted.ok()) return accepted.status();
    RecordPtr record = *std::move(accepted);

    if (!decided) {
      // Sleep until admitted, refused by shutdown, or the context is done.
      std::uint64_t callback = 0;
      if (ctx.state()) {
        callback = ctx.state()->AddCallback([record] { Signal(*record, /*decided=*/false); });
      }
      {
        std::unique_lock lock(record->wake_mutex);
        auto woken = [&] { return record->signalled; };
        if (std::optional<Context::Clock::time_point> deadline = ctx.Deadline()) {
          record->wake.wait_until(lock, *deadline, woken);
        } else {
          record->wake.wait(lock, woken);
        }
        decided = record->decided;
      }
      if (ctx.state()) ctx.state()->RemoveCallback(callback);
    }

    {
      // An admitted caller does not take the scheduler's lock again to learn that it was: with
      // many threads calling, waiting for that lock again held its slot idle (bench/README.md).
      std::optional<Locked> lock;
      if (!decided) lock.emplace(this);
      switch (record->state) {
        case JobRecord::State::kNew:  // Accept queued it (kPending) before returning it
          std::fprintf(stderr, "fairgate: a RunSync job woke without having been queued\n");
          std::abort();
        case JobRecord::State::kRunning:
          break;  // admitted, even if the context ended meanwhile: the job runs and sees it
        case JobRecord::State::kCancelled:   // shutdown, or its queue-wait limit
        case JobRecord::State::kFinished: {  // the run it joined ended
          Status told =
              record->state == JobRecord::State::kCancelled ? record->refusal : record->result;
          lock.reset();
          FinishOutstanding();  // the last touch of the scheduler: it may be destroyed after
          return told;
        }
        case JobRecord::State::kPending:
        case JobRecord::State::kJoined: {
          // The context ended first: leave the queue, uncharged (the job leaves with its last
          // caller), or stop waiting for the run it joined (which goes on for the others).
          Status err = ctx.Err();
          if (err.ok()) err = absl::CancelledError("context cancelled");
          MustHold(lock);  // not decided: woken by the context, so the lock was taken above
          if (record->state == JobRecord::State::kPending) {
            LeaveQueueLocked(record, LockedNow(), err);
          } else {
            LeaveRunLocked(record);
          }
          lock.reset();
          FinishOutstanding();
          return err;
        }
      }
    }
    internal::FleetLeases::Held leases;
    Status status = fleet_ ? fleet_->Enter(type, id, ctx, leases) : absl::OkStatus();
    const double start = Now();  // a wait for fleet-wide leases is not part of the run
    if (status.ok()) status = Invoke(fn, leases.ctx ? *leases.ctx : ctx);  // no copy of ctx
    if (fleet_) fleet_->Leave(leases);
    (void)Complete(*record, start, Now(), status);
    FinishOutstanding();
    return status;
  }

  Status Acquire(const Context& ctx, std::string_view type, std::string_view id,
                 std::string_view key, PermitCallback on_admitted, const JobOptions& options) {
    if (!on_admitted) return absl::InvalidArgumentError("permit callback is empty");
    if (Status s = ctx.Err(); !s.ok()) return s;
    const bool fleet_leases = fleet_ && fleet_->Needed(type);
    RecordPtr pending;
    StatusOr<RecordPtr> accepted = Accept({type, id, key, options.cost}, [&](const RecordPtr& r) {
      r->async = true;
      r->fleet_leases = fleet_leases;
      r->on_admitted = std::move(on_admitted);
      r->ctx = ctx;
      if (ctx.state()) {
        // The callback counts as outstanding until it has run or been removed, so that it never
        // touches a destroyed scheduler; whoever disposes of it finishes that count. It holds the
        // record until then (a cycle through the context, broken by either).
        AddOutstanding();
        r->ctx_callback = ctx.state()->AddCallback([this, r] {
          Status err = r->ctx.Err();
          AbandonWaiting(r, err.ok() ? absl::CancelledError("context cancelled") : err);
          FinishOutstanding();
        });
      }
      pending = r;
    });
    if (!accepted.ok()) {
      // Never queued: its callback, if it ran, found nothing to do. Refused before its record
      // was made (the scheduler shuts down), it has none.
      if (pending) DetachContext(*pending);
      return accepted.status();
    }
    RecordPtr record = *std::move(accepted);
    // The context may have ended before the job was queued: its callback found nothing to do.
    if (Status err = ctx.Err(); !err.ok()) AbandonWaiting(record, err);
    return absl::OkStatus();
  }

  // Scheduler::Submit: through the Submit intake when it can judge the request without the core
  // (IntakeAccepts), else as Submit. Internal callers use Submit: they act on its refusals.
  Status SubmitFromCaller(std::string_view type, std::string_view id, std::string_view key,
                          JobFn fn, DoneCallback done, const JobOptions& options) {
    if (fn && IntakeAccepts(type, id, options)) {
      SubmitThroughIntake(type, id, key, std::move(fn), std::move(done), options);
      return absl::OkStatus();
    }
    return Submit(type, id, key, std::move(fn), std::move(done), options);
  }

  // `claimed_leases`: a claimed durable job's, when its claim took its fleet-wide leases (the
  // fencing token of the last); it runs under them instead of taking its own.
  Status Submit(std::string_view type, std::string_view id, std::string_view key, JobFn fn,
                DoneCallback done, const JobOptions& options, std::uint64_t claimed_leases = 0) {
    if (!fn) return absl::InvalidArgumentError("job function is empty");
    StatusOr<RecordPtr> accepted =
        Accept({type, id, key, options.cost,
                options.join_running ? core::Join::kPendingOrRunning : core::Join::kPending},
               [&](const RecordPtr& r) {
                 r->fn = std::move(fn);
                 r->done = std::move(done);
                 r->claimed_leases = claimed_leases;
               });
    return accepted.status();
  }

  StatusOr<PeriodicJob> SubmitEvery(std::string_view type, std::string_view id, Seconds interval,
                                    JobFn fn, const PeriodicOptions& options) {
    if (!fn) return absl::InvalidArgumentError("job function is empty");
    if (id.empty()) return absl::InvalidArgumentError("job id is empty");
    if (!std::isfinite(interval.count()) || interval.count() <= 0 || interval.count() > 1e8) {
      return absl::InvalidArgumentError(
          absl::StrCat("interval must be finite and in (0, 1e8] seconds, got ", interval.count()));
    }
    if (!(options.jitter >= 0 && options.jitter < 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("jitter must be in [0, 1), got ", options.jitter));
    }
    auto state = std::make_shared<internal::PeriodicState>();
    state->type = std::string(type);
    state->id = std::string(id);
    state->interval = interval;
    state->fn = std::move(fn);
    state->options = options;
    bool earliest = false;
    {
      Locked lock(this);
      if (phase_ != Phase::kOpen) return UnavailableLocked();
      if (!core_->TypeIndex(type)) {
        return absl::NotFoundError(
            absl::StrCat("unknown job type '", absl::string_view(type.data(), type.size()), "'"));
      }
      // The first run after a random part of one interval, unless asked at once; with a store
      // that knows when the last run ended, one interval after that end (a restart keeps the
      // schedule), and if that has passed, after a random part of one interval as at a first
      // start, so that jobs overdue after a long stop do not all start together.
      double first = options.first_run_at_once ? 0.0 : interval.count() * Uniform(0.0, 1.0);
      if (keeper_ && !options.first_run_at_once) {
        if (std::optional<double> last = keeper_->LastRunEnd(type, id)) {
          const double due_in = *last + interval.count() - internal::WallNow();
          if (due_in > 0) first = std::min(due_in, interval.count());
        }
      }
      earliest = SchedulePeriodicLocked(state, first);
    }
    if (earliest) WakeTimer();
    return PeriodicJob(state);
  }

  Status Shutdown(const Context& ctx) {
    RecordList refused;
    // Before the lock: Submits stop using the intake at once, instead of adding to what taking
    // the lock queues first.
    accepting_.store(false, std::memory_order_relaxed);
    {
      Locked lock(this);
      if (phase_ != Phase::kShutDown) {
        phase_ = Phase::kShutDown;
        const double now = LockedNow();
        for (RecordPtr& record : records_) {
          if (!record || record->state != JobRecord::State::kPending) continue;
          // Every call the job stands for leaves: those that joined it, then its lead, whose
          // leaving takes the job out (and clears `record`).
          std::vector<RecordPtr> calls = std::move(record->joiners);
          record->joiners.clear();
          calls.push_back(record);
          for (const RecordPtr& call : calls) {
            LeaveQueueLocked(call, now, absl::CancelledError("the scheduler shut down"));
            call->refusal = absl::CancelledError(
                call->sync || call->async ? "the scheduler shut down before the job was admitted"
                                          : "the scheduler shut down before the job ran");
            refused.push_back(call);
          }
        }
      }
      // Expired jobs a snapshot found, not yet reported by the timer.
      refused.insert(refused.end(), unreported_.begin(), unreported_.end());
      unreported_.clear();
      retries_.clear();  // they stay stored, with their backoff, for the next Recover
    }
    background_.second();  // running Submit jobs see their context done
    for (const RecordPtr& record : refused) Refuse(record);
    Status quiet = WaitQuiet(ctx);
    // The events of every decision made so far reach the observers. Outside the lock, as
    // DecisionLog::Flush must be: it waits for the delivery's thread, not for the scheduler.
    ABSL_TS_UNCHECKED_READ(log_).Flush();
    if (claimer_) ShareCosts();           // what was charged since the last share
    if (keeper_) (void)keeper_->Flush();  // counted if it fails; Shutdown's status is the jobs'
    return quiet;
  }

  Status Drain(const Context& ctx) {
    RecordList admitted;
    bool wake_timer = false;
    accepting_.store(false, std::memory_order_relaxed);  // before the lock, as in Shutdown
    {
      Locked lock(this, admitted, wake_timer);
      if (phase_ == Phase::kOpen) phase_ = Phase::kDraining;
      if (phase_ == Phase::kDraining) {
        // Everything accepted runs: paused work too.
        const double now = LockedNow();
        const fairgate::Snapshot paused = core_->TakeSnapshot();
        for (const TypeSnapshot& type : paused.types) {
          if (type.paused) (void)core_->ResumeType(type.name, now);
        }
        for (const std::string& key : paused.paused_keys) (void)core_->ResumeKey(key, now);
        AdmitLocked(now, admitted);
      }
    }
    if (wake_timer) WakeTimer();
    Dispatch(admitted);
    Status quiet = WaitQuiet(ctx);
    Status shut = Shutdown(ctx);
    return quiet.ok() ? shut : quiet;
  }

  fairgate::Snapshot TakeSnapshot(std::size_t heaviest_keys) {
    Locked lock(this);
    // The expiries and aging steps due by now, so that the counts are current.
    const bool expired = AdvanceLocked(LockedNow());
    fairgate::Snapshot s = core_->TakeSnapshot();
    for (std::size_t i = 0; i < s.types.size(); ++i) {  // both in registration order
      TypeSnapshot& t = s.types[i];
      const auto& counts = log_.metrics().types()[i];
      t.enqueued = counts.enqueued;
      t.admitted = counts.admitted;
      t.cancelled = counts.cancelled;
      t.expired = counts.expired;
      t.joined = counts.joined;
      for (const std::uint64_t n : counts.completed) t.completed += n;
      t.wait_seconds_sum = counts.wait.sum();
      t.run_seconds_sum = counts.run.sum();
    }
    for (const auto& [code, n] : log_.metrics().rejected()) s.rejected += n;
    s.waited_on_conflict = log_.metrics().waited_on_conflict();
    s.waited_on_capacity = log_.metrics().waited_on_capacity();
    s.aging_promotions = core_->promotions_total();
    s.keys_evicted = log_.metrics().keys_evicted();
    if (heaviest_keys > 0) {
      for (auto& [key, acc] : core_->HeaviestKeys(heaviest_keys)) {
        s.heaviest_keys.push_back({std::move(key), acc});
      }
    }
    lock.Release();
    if (expired) WakeTimer();
    return s;
  }

  void WriteMetrics(std::string& out) {
    Locked lock(this);
    const bool expired = AdvanceLocked(LockedNow());
    log_.WriteMetrics(out);
    lock.Release();
    if (keeper_) keeper_->WriteMetrics(out);
    if (expired) WakeTimer();
  }

  Status SetKeyWeight(std::string_view key, double weight) {
    Locked lock(this);
    return core_->SetKeyWeight(key, weight);
  }

  Status SetKeyLimits(std::string_view key, const KeyLimits& limits) {
    RecordList admitted;
    bool wake_timer = false;
    Status status;
    {
      Locked lock(this, admitted, wake_timer);
      status = core_->SetKeyLimits(key, limits);
      // A higher max_running may make the key's waiting jobs admissible now.
      if (status.ok() && phase_ != Phase::kShutDown) AdmitLocked(LockedNow(), admitted);
    }
    if (wake_timer) WakeTimer();
    Dispatch(admitted);
    return status;
  }

  // Runs a pause or resume of the core at now (`change(core, now)`, under the lock), and admits
  // (and reports the expiries of) what that leaves.
  template <typename Change>
  Status ChangePause(Change change) {
    RecordList admitted;
    bool wake_timer = false;
    Status status;
    {
      Locked lock(this, admitted, wake_timer);
      const double now = LockedNow();
      status = change(*core_, now);
      if (phase_ != Phase::kShutDown) AdmitLocked(now, admitted);
    }
    if (wake_timer) WakeTimer();
    Dispatch(admitted);
    return status;
  }

  Status PauseType(std::string_view type) {
    return ChangePause(
        [&](core::AdmissionCore& core, double now) { return core.PauseType(type, now); });
  }
  Status ResumeType(std::string_view type) {
    Status status = ChangePause(
        [&](core::AdmissionCore& core, double now) { return core.ResumeType(type, now); });
    if (status.ok() && claimer_) claimer_->Poke();  // its stored jobs may be claimed again
    return status;
  }
  Status PauseKey(std::string_view key) {
    return ChangePause(
        [&](core::AdmissionCore& core, double now) { return core.PauseKey(key, now); });
  }
  Status ResumeKey(std::string_view key) {
    return ChangePause(
        [&](core::AdmissionCore& core, double now) { return core.ResumeKey(key, now); });
  }

  StatusOr<double> MaxWaitToCeiling(std::string_view type) const {
    Locked lock(this);
    return core_->MaxWaitToCeiling(type);
  }

  std::optional<double> AccumulatedCost(std::string_view key) const {
    Locked lock(this);
    return core_->AccumulatedCost(key);
  }

  std::optional<double> Estimate(std::string_view type, std::string_view id) const {
    Locked lock(this);
    return core_->Estimate(type, id);
  }

  Status RegisterDurable(std::string_view type, DurableHandler handler, const RetryPolicy& retry) {
    if (Status s = NeedStore("RegisterDurable"); !s.ok()) return s;
    if (!handler) return absl::InvalidArgumentError("durable handler is empty");
    if (Status s = ValidateRetryPolicy(retry); !s.ok()) return s;
    Locked lock(this);
    if (!core_->TypeIndex(type)) {
      return absl::NotFoundError(
          absl::StrCat("unknown job type '", absl::string_view(type.data(), type.size()), "'"));
    }
    auto [it, inserted] = durable_types_.try_emplace(
        std::string(type),
        std::make_shared<const DurableType>(DurableType{std::move(handler), retry}));
    if (!inserted) {
      return absl::AlreadyExistsError(absl::StrCat("job type '",
                                                   absl::string_view(type.data(), type.size()),
                                                   "' already has a durable handler"));
    }
    return absl::OkStatus();
  }

  StatusOr<RecoveryReport> Recover() {
    if (Status s = NeedStore("Recover"); !s.ok()) return s;
    {
      Locked lock(this);
      if (phase_ != Phase::kOpen) return UnavailableLocked();
      if (recovery_ != Recovery::kNotYet) {
        return absl::FailedPreconditionError("Recover was already called");
      }
      recovery_ = Recovery::kRecovering;
    }
    auto load_failed = [&](const Status& status) {
      keeper_->CountError(internal::StateKeeper::Operation::kLoad);
      Locked lock(this);
      recovery_ = Recovery::kNotYet;  // may be called again
      return status;
    };
    if (claimer_) return RecoverShared(load_failed);
    StatusOr<std::vector<StoredJob>> live = keeper_->store().LiveJobs();
    if (!live.ok()) return load_failed(live.status());
    StatusOr<std::vector<StoredJob>> dead = keeper_->store().DeadJobs();
    if (!dead.ok()) return load_failed(dead.status());
    RecoveryReport report;
    report.dead = dead->size();
    std::vector<std::pair<StoredJob, std::shared_ptr<const DurableType>>> due;
    bool earliest = false;
    {
      Locked lock(this);
      const double wall = internal::WallNow();
      for (StoredJob& job : *live) {
        auto handler = durable_types_.find(job.type);
        if (handler == durable_types_.end()) {
          ++report.without_handler;
        } else if (job.not_before > wall) {
          ++report.deferred;
          const double wait = job.not_before - wall;
          earliest |= ScheduleRetryLocked(std::move(job), handler->second, wait);
        } else {
          due.emplace_back(std::move(job), handler->second);
        }
      }
    }
    if (earliest) WakeTimer();
    // In stored order, before SubmitDurable is accepted: no job of this process comes between.
    for (const auto& [job, type] : due) {
      // Refused at the door (a full queue), it is tried again a backoff later.
      ++(QueueOrDefer(job, type) ? report.queued : report.deferred);
    }
    Locked lock(this);
    recovery_ = Recovery::kDone;
    return report;
  }

  StatusOr<std::uint64_t> SubmitDurable(std::string_view type, std::string_view id,
                                        std::string_view key, std::string_view payload) {
    if (Status s = NeedStore("SubmitDurable"); !s.ok()) return s;
    if (id.empty()) return absl::InvalidArgumentError("job id is empty");
    std::shared_ptr<const DurableType> handler;
    {
      Locked lock(this);
      if (phase_ != Phase::kOpen) return UnavailableLocked();
      if (recovery_ != Recovery::kDone) {
        return absl::FailedPreconditionError(
            "SubmitDurable before Recover: register the types and their handlers, then call "
            "Recover");
      }
      auto it = durable_types_.find(absl::string_view(type.data(), type.size()));
      if (it == durable_types_.end()) {
        return absl::NotFoundError(absl::StrCat("job type '",
                                                absl::string_view(type.data(), type.size()),
                                                "' has no durable handler (RegisterDurable)"));
      }
      handler = it->second;
    }
    StoredJob job;
    job.type = std::string(type);
    job.id = std::string(id);
    job.fairness_key = std::string(key);
    job.payload = std::string(payload);
    job.submitted_at = internal::WallNow();
    StatusOr<std::uint64_t> sequence = keeper_->store().AddJob(job);
    if (!sequence.ok()) {
      keeper_->CountError(internal::StateKeeper::Operation::kAddJob);
      return sequence.status();
    }
    keeper_->Count(internal::StateKeeper::Outcome::kStored);
    if (claimer_) {  // a shared store: whichever replica claims it first runs it
      claimer_->Poke();
      return *sequence;
    }
    job.sequence = *sequence;
    Status queued = QueueDurable(std::move(job), handler);
    // Refused at the door (a full queue): not accepted, so not kept. Shutting down meanwhile: it
    // is stored, and runs after the next Recover.
    if (!queued.ok() && queued.code() != absl::StatusCode::kUnavailable) {
      if (!keeper_->store().RemoveJob(*sequence).ok()) {
        keeper_->CountError(internal::StateKeeper::Operation::kRemoveJob);
      }
      return queued;
    }
    return *sequence;
  }

  StatusOr<std::vector<StoredJob>> DeadJobs() {
    if (Status s = NeedStore("DeadJobs"); !s.ok()) return s;
    StatusOr<std::vector<StoredJob>> dead = keeper_->store().DeadJobs();
    if (!dead.ok()) keeper_->CountError(internal::StateKeeper::Operation::kLoad);
    return dead;
  }

  Status FlushState() {
    if (Status s = NeedStore("FlushState"); !s.ok()) return s;
    return keeper_->Flush();
  }

 private:
  enum class Phase { kOpen, kDraining, kShutDown };

  // A durable job type's handler and retry policy, fixed at RegisterDurable.
  struct DurableType {
    DurableHandler handler;
    RetryPolicy retry;
  };
  // One attempt of a durable job, queued as a Submit job.
  struct DurableAttempt {
    StoredJob job;
    std::shared_ptr<const DurableType> type;
    std::uint32_t attempt = 0;  // its number once begun; 0 while it has not run
    bool gone = false;          // the store no longer had it when it began: nothing to record
  };

  Status NeedStore(std::string_view what) const {
    if (keeper_) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat(
        absl::string_view(what.data(), what.size()),
        " needs a store: set SchedulerOptions::store (fairgate/sqlite_store.h opens one)"));
  }

  // Why a call is refused once the scheduler is no longer open.
  Status UnavailableLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    return absl::UnavailableError(phase_ == Phase::kDraining ? "the scheduler is draining"
                                                             : "the scheduler is shut down");
  }

  // Recover on a shared store: nothing is loaded; the claimer claims what is due, now and from
  // now on.
  template <typename LoadFailed>
  StatusOr<RecoveryReport> RecoverShared(LoadFailed& load_failed) {
    StatusOr<std::vector<StoredJob>> dead = keeper_->store().DeadJobs();
    if (!dead.ok()) return load_failed(dead.status());
    {
      Locked lock(this);
      recovery_ = Recovery::kDone;
    }
    RecoveryReport report;
    report.dead = dead->size();
    // A failed first claim is counted; the claimer's thread tries again.
    if (StatusOr<std::size_t> claimed = claimer_->ClaimNow(); claimed.ok())
      report.queued = *claimed;
    return report;
  }

  // The durable types this replica claims jobs of, with their tiers: those not paused, and none
  // once it is closing.
  std::vector<ClaimableType> ClaimableTypes() const {
    Locked lock(this);
    std::vector<ClaimableType> types;
    if (phase_ != Phase::kOpen || recovery_ != Recovery::kDone) return types;
    for (const auto& [name, type] : durable_types_) {
      if (core_->TypePaused(name)) continue;  // held, its jobs would wait while others could run
      const JobTypeConfig* config = core_->TypeConfig(name);
      ClaimableType& claimable = types.emplace_back();
      claimable.type = name;
      claimable.priority = config != nullptr ? config->priority : 1;
      if (fleet_) fleet_->DescribeNeeds(claimable);  // taken with the claim
    }
    return types;
  }

  // Queues jobs the claimer claimed; a job that cannot be queued (a full queue, shutting down)
  // is given back at once for any replica to claim, and so is one whose type was paused while
  // the claim that took it was under way (ClaimableTypes leaves paused types out of the next).
  void QueueClaimed(std::vector<StoredJob> jobs) {
    for (StoredJob& job : jobs) {
      std::shared_ptr<const DurableType> type;
      {
        Locked lock(this);
        if (auto it = durable_types_.find(job.type);
            it != durable_types_.end() && !core_->TypePaused(job.type)) {
          type = it->second;
        }
      }
      if (type && QueueDurable(job, type).ok()) continue;
      Recorded(keeper_->store().ReleaseJob(job.sequence),
               internal::StateKeeper::Operation::kRelease);
      claimer_->Done(/*claim_again=*/false);
    }
  }

  // Takes the fleet-wide leases a job needs (FleetLeases::Enter), waiting under `ctx` while
  // they are held elsewhere.
  Status EnterFleet(const JobRecord& record, const Context& ctx,
                    internal::FleetLeases::Held& leases) {
    if (!fleet_) return absl::OkStatus();
    std::string type, id;
    {
      Locked lock(this);
      std::optional<core::JobView> job = core_->Describe(record.ticket);
      if (!job) return absl::OkStatus();
      type = std::string(job->type);
      id = std::string(job->id);
    }
    return fleet_->Enter(type, id, ctx, leases);
  }

  // An admitted Acquire whose type takes fleet-wide leases: takes them on a pool fiber (blocking
  // store calls, never on the thread that admitted it), then delivers a permit that holds them
  // until it is released. While they are held elsewhere it waits, until the Acquire's context
  // ends or Shutdown begins; then, or when the store fails, the job completes with that status
  // (as a Submit job's lease wait would) and the callback gets it. The hold, and so the observed
  // cost, begins with the permit.
  void AdmitWithLeases(const RecordPtr& record) {
    auto leases = std::make_unique<internal::FleetLeases::Held>();
    auto [ctx, cancel] = WithCancel(record->ctx);
    const std::shared_ptr<internal::ContextState>& shutdown = background_.first.state();
    const std::uint64_t on_shutdown = shutdown->AddCallback(cancel);
    Status status = EnterFleet(*record, ctx, *leases);
    shutdown->RemoveCallback(on_shutdown);
    cancel();
    DetachContext(*record);
    if (!status.ok()) {
      fleet_->Leave(*leases);
      const double now = Now();
      (void)Complete(*record, now, now, status);
      InvokeAdmitted(*record, status);
      FinishOutstanding();
      return;
    }
    record->admitted_at = Now();
    InvokeAdmitted(*record, Scheduler::MakePermit(
                                std::make_unique<HeldPermit>(this, record, std::move(leases))));
  }

  // Shares the keys' costs with the fleet (Store::ShareKeyCosts): adds what this replica charged
  // each key since the last share, and sets each busy key's cost to the fleet's total plus what
  // it was charged here meanwhile. A failure is counted; its charges go with the next share.
  void ShareCosts() {
    std::lock_guard share_lock(share_mutex_);  // one share at a time: each charge is sent once
    std::vector<SavedKey> charged;
    std::vector<std::string> busy;
    absl::flat_hash_map<std::string, double> collected;  // each key's cost as collected
    {
      Locked lock(this);
      const double now = LockedNow();
      const double wall = internal::WallNow();
      absl::flat_hash_map<std::string, double> shared;  // only the keys still tracked
      for (SavedKey& key : core_->KeyCosts(now)) {
        auto it = shared_costs_.find(key.key);
        const double base = it == shared_costs_.end() ? 0 : it->second;
        const double delta = key.accumulated_cost - base;
        const bool is_busy = key.idle_since >= now;
        if (delta != 0 || is_busy) busy.push_back(key.key);
        if (delta != 0) {
          charged.push_back({key.key, delta, wall - (now - key.idle_since)});
        }
        collected[key.key] = key.accumulated_cost;
        shared[key.key] = base;
      }
      shared_costs_ = std::move(shared);
    }
    if (busy.empty()) return;
    StatusOr<std::vector<SavedKey>> totals = keeper_->store().ShareKeyCosts(charged, busy);
    if (!totals.ok()) {
      keeper_->CountError(internal::StateKeeper::Operation::kShare);
      return;
    }
    Locked lock(this);
    for (const SavedKey& total : *totals) {
      std::optional<double> now_cost = core_->AccumulatedCost(total.key);
      auto at_collect = collected.find(total.key);
      if (!now_cost || at_collect == collected.end()) continue;  // forgotten meanwhile
      // Charged here since the collection: not in the total yet, kept on top of it.
      const double since = *now_cost - at_collect->second;
      (void)core_->SetAccumulatedCost(total.key, std::max(0.0, total.accumulated_cost + since));
      shared_costs_[total.key] = total.accumulated_cost;
    }
  }

  // Counts what a store call that records a durable attempt's end returned: an error, a refusal
  // because another replica holds the job now (kFenced), or else `outcome` if given.
  void Recorded(const Status& status, internal::StateKeeper::Operation operation,
                std::optional<internal::StateKeeper::Outcome> outcome = std::nullopt) {
    if (status.code() == absl::StatusCode::kAborted) {
      keeper_->Count(internal::StateKeeper::Outcome::kFenced);
      return;
    }
    if (!status.ok()) keeper_->CountError(operation);
    if (outcome) keeper_->Count(*outcome);
  }

  // Queues one attempt of a stored job as a Submit job of its type, id and key; Submit's refusal.
  Status QueueDurable(const StoredJob& job, std::shared_ptr<const DurableType> type) {
    auto attempt = std::make_shared<DurableAttempt>(DurableAttempt{job, std::move(type)});
    return Submit(
        job.type, job.id, job.fairness_key,
        [this, attempt](const Context& ctx) { return RunDurable(*attempt, ctx); },
        [this, attempt](const Status& status) { FinishDurable(*attempt, status); }, {},
        job.resource_token);
  }

  // Queues a stored job whose time has come (recovered, or at the end of its backoff); true if
  // it was queued. Refused at the door (a full queue), it stays stored and is tried again a
  // backoff (at least a second) later; shutting down, it stays stored for the next Recover.
  bool QueueOrDefer(const StoredJob& job, const std::shared_ptr<const DurableType>& type) {
    Status queued = QueueDurable(job, type);
    if (queued.ok()) return true;
    if (queued.code() == absl::StatusCode::kUnavailable) return false;
    bool earliest = false;
    {
      Locked lock(this);
      if (phase_ != Phase::kOpen) return false;
      earliest = ScheduleRetryLocked(job, type, std::max(1.0, type->retry.initial_backoff.count()));
    }
    if (earliest) WakeTimer();
    return false;
  }

  // Marks an attempt as begun in the store and sets its number; the store's status. A store that
  // fails is counted and the number comes from memory (the attempt goes ahead: at least once);
  // a job the store no longer has, or whose lease another replica holds now, is `gone`.
  Status BeginAttempt(DurableAttempt& a) {
    StatusOr<std::uint32_t> begun = keeper_->store().BeginAttempt(a.job.sequence);
    if (begun.ok()) {
      a.attempt = *begun;
    } else if (begun.status().code() == absl::StatusCode::kNotFound) {
      a.gone = true;
    } else if (begun.status().code() == absl::StatusCode::kAborted) {
      a.gone = true;
      keeper_->Count(internal::StateKeeper::Outcome::kFenced);
    } else {
      keeper_->CountError(internal::StateKeeper::Operation::kBeginAttempt);
      a.attempt = a.job.attempts + 1;
    }
    return begun.status();
  }

  // The attempt begins: marked in the store first (so a crash during it counts it), then the
  // handler runs.
  Status RunDurable(DurableAttempt& a, const Context& ctx) {
    if (Status begun = BeginAttempt(a); a.gone) return begun;
    const DurableJob view{a.job.sequence, a.job.type, a.job.id,         a.job.fairness_key,
                          a.job.payload,  a.attempt,  a.job.lease_token};
    return a.type->handler(view, ctx);
  }

  // The attempt ended with `status` (or never ran): the job is removed, retried or dead. On a
  // shared store a retry or a job cut short by a shutdown is given back, for any replica.
  void FinishDurable(DurableAttempt& a, const Status& status) {
    using Operation = internal::StateKeeper::Operation;
    using Outcome = internal::StateKeeper::Outcome;
    absl::Cleanup done = [&] {
      if (claimer_) claimer_->Done(/*claim_again=*/true);
    };
    if (a.gone) return;
    Store& store = keeper_->store();
    const std::uint64_t sequence = a.job.sequence;
    if (status.ok()) {
      Recorded(store.RemoveJob(sequence), Operation::kRemoveJob, Outcome::kSucceeded);
      return;
    }
    bool open = false;
    {
      Locked lock(this);
      open = phase_ == Phase::kOpen;
    }
    // Cut short by a shutdown (not admitted, or cancelled while it ran): stays as stored.
    if (!open && (a.attempt == 0 || status.code() == absl::StatusCode::kCancelled)) {
      if (claimer_) Recorded(store.ReleaseJob(sequence), Operation::kRelease);
      return;
    }
    if (a.attempt == 0) {
      // Never ran: it waited its type's max_queue_wait. That counts as a failed attempt, so that
      // a queue that stays full cannot keep it for ever.
      (void)BeginAttempt(a);
      if (a.gone) return;
    }
    const std::string error = status.ToString();
    if (a.attempt >= a.type->retry.max_attempts) {
      Recorded(store.KillJob(sequence, error), Operation::kKillJob, Outcome::kDead);
      return;
    }
    const double wait = RetryBackoff(a.type->retry, a.attempt).count();
    StoredJob next = a.job;
    next.attempts = a.attempt;
    next.not_before = internal::WallNow() + wait;
    next.last_error = error;
    Recorded(store.DeferJob(sequence, next.not_before, error), Operation::kDeferJob,
             Outcome::kRetried);
    if (claimer_) return;  // given back: claimed again, here or elsewhere, once its wait is over
    bool earliest = false;
    {
      Locked lock(this);
      if (phase_ != Phase::kOpen) return;  // stays stored, with its backoff
      earliest = ScheduleRetryLocked(std::move(next), a.type, wait);
    }
    if (earliest) WakeTimer();
  }

  // Queues a stored job on the timer `after` seconds from now; true when it is the timer's
  // earliest retry, so that the caller wakes the timer (after releasing the lock).
  bool ScheduleRetryLocked(StoredJob job, std::shared_ptr<const DurableType> type, double after)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    const auto due = Context::Clock::now() + std::chrono::duration_cast<Context::Clock::duration>(
                                                 std::chrono::duration<double>(after));
    const auto entry = retries_.emplace(due, std::make_pair(std::move(job), std::move(type)));
    return entry == retries_.begin();
  }

  // What a flush writes (StateKeeper::Collect): the estimates used since `since` (the scheduler's
  // clock, the mark of the last successful flush) and every key's cost, in Unix seconds.
  internal::StateKeeper::Collected CollectLearned(double since) {
    internal::StateKeeper::Collected collected;
    double now = 0, wall = 0;
    {
      Locked lock(this);
      now = Now();
      wall = internal::WallNow();
      collected.state.estimates = core_->EstimatesUsedSince(since);
      // A shared store gets keys' costs as sums over the fleet (ShareCosts), not replaced.
      if (!keeper_->store().Shared()) collected.state.keys = core_->KeyCosts(now);
    }
    for (SavedEstimate& e : collected.state.estimates) e.last_used = wall - (now - e.last_used);
    for (SavedKey& k : collected.state.keys) k.idle_since = wall - (now - k.idle_since);
    collected.mark = now;
    return collected;
  }

  double Now() const {
    const Seconds t =
        options_.clock ? options_.clock() : Seconds(std::chrono::steady_clock::now() - epoch_);
    return std::isfinite(t.count()) ? t.count() : 0.0;
  }

  // Enqueues a job and admits what can be admitted. `fill` sets the record's kind and function.
  // With `admitted_at_once`, a RunSync's: set when this call admitted the job itself, which is
  // then not signalled (its caller learns it here, and does not wait).
  template <typename Fill>
  StatusOr<RecordPtr> Accept(const core::EnqueueRequest& request, Fill fill,
                             bool* admitted_at_once = nullptr) {
    if (!accepting_.load(std::memory_order_relaxed)) {
      // Shutdown or Drain has begun: refused without a record and without being counted as
      // outstanding (nothing of the call outlives it). Counted, a steady stream of refused calls
      // kept the count from ever reaching zero, and Shutdown from returning. Until the phase
      // changes (just after the flag, under the lock) the call goes the usual way.
      Locked lock(this);
      if (phase_ != Phase::kOpen) return RejectLocked(request, UnavailableLocked(), LockedNow());
    }
    auto record = std::make_shared<JobRecord>();
    fill(record);
    // Counted before it can be admitted and finished elsewhere; uncounted if refused (an atomic
    // count, never under the scheduler's lock).
    AddOutstanding();
    RecordList admitted;
    Status refused;
    bool wake_timer = false;
    // Read before the lock, as Complete's end time is: the critical section is what the callers
    // queue for. Another thread may take the lock in between with a later time: MonotonicLocked.
    const double read = Now();
    bool at_once = false;
    {
      Locked lock(this, admitted, wake_timer);
      refused = EnqueueLocked(record, request, MonotonicLocked(read), admitted, wake_timer);
      // Running is decided: nothing but this caller changes a running RunSync's record.
      at_once = admitted_at_once != nullptr && record->state == JobRecord::State::kRunning;
    }
    if (wake_timer) WakeTimer();
    if (at_once) {
      *admitted_at_once = true;
      // Signalling the caller itself would cost it a lock, a notify and a wait on its own record
      // (about 600 instructions per RunSync into a scheduler with room: bench/README.md).
      // It is in `admitted`: EnqueueLocked lists what it admits.
      if (auto it = std::find(admitted.begin(), admitted.end(), record); it != admitted.end()) {
        admitted.erase(it);
      }
    }
    Dispatch(admitted);
    if (!refused.ok()) {
      FinishOutstanding();
      return refused;
    }
    return record;
  }

  // Accept's work under the lock: queues `record`'s job in the core at `now` and admits what
  // that makes admissible into `admitted`; `wake_timer` is set when the timer must look again.
  // The core's refusal, logged, if it refused.
  Status EnqueueLocked(const RecordPtr& record, const core::EnqueueRequest& request, double now,
                       RecordList& admitted, bool& wake_timer)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    const std::optional<double> next_expiry = core_->NextExpiryAt();
    // The core's first admission after the enqueue, if it queued a new job: with nothing else
    // pending and room for it, the job itself, admitted without entering the order.
    std::optional<core::Admission> first;
    StatusOr<core::JobTicket> ticket =
        phase_ != Phase::kOpen ? UnavailableLocked() : core_->EnqueueAndAdmit(request, now, first);
    if (!ticket.ok()) return RejectLocked(request, ticket.status(), now);
    if (ticket->slot < records_.size() && records_[ticket->slot] &&
        records_[ticket->slot]->ticket == *ticket) {
      // It joined the job of its id (coalescing): it waits with that job's calls, pending or,
      // for a RunSync, for the run under way. Nothing else changed: no admission to try.
      JobRecord& lead = *records_[ticket->slot];
      record->ticket = *ticket;
      record->MoveTo(lead.state == JobRecord::State::kPending ? JobRecord::State::kPending
                                                              : JobRecord::State::kJoined);
      lead.joiners.push_back(record);
      log_.Joined(*core_->Describe(*ticket));
      return absl::OkStatus();
    }
    record->ticket = *ticket;
    record->MoveTo(JobRecord::State::kPending);
    if (first && first->ticket == *ticket) {
      log_.Enqueued(*first);  // admitted by this call: its admission says what Describe would
    } else {
      log_.Enqueued(*core_->Describe(*ticket));
    }
    if (records_.size() <= ticket->slot) records_.resize(ticket->slot + 1);
    records_[ticket->slot] = record;
    if (first) TakeAdmissionLocked(*first, now, admitted);
    AdmitLocked(now, admitted);
    if (record->async && record->state == JobRecord::State::kPending) {
      if (std::optional<Context::Clock::time_point> deadline = record->ctx.Deadline()) {
        record->deadline_entry = deadlines_.emplace(*deadline, record);
        wake_timer |= deadlines_.begin() == *record->deadline_entry;
      }
    }
    // A queue-wait limit earlier than any the timer knows of.
    if (core_->NextExpiryAt() != next_expiry && core_->NextExpiryAt()) wake_timer = true;
    return absl::OkStatus();
  }

  // A call refused before its job was queued, logged: returns `why`.
  Status RejectLocked(const core::EnqueueRequest& request, Status why, double now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    log_.Rejected(request.type, request.id, request.key, why, now);
    log_.Post();
    return why;
  }

  // A Submit waiting in the intake (runtime/submit_intake.h): what Accept would enqueue, owned.
  // It lives in one allocation with its job's record (IntakeRecord) and owns that allocation
  // while it waits: `record` points into it. One allocation per Submit instead of two, made by
  // the submitter and freed on another thread, where glibc's malloc costs most (bench/README.md,
  // "One allocation per Submit").
  struct IntakeEntry {
    IntakeEntry* next = nullptr;
    RecordPtr record;
    std::string type, id, key;
    std::optional<double> cost;
    core::Join join = core::Join::kPending;
    double read = 0;  // the clock when Submit was called, as Accept's `read`
  };
  struct IntakeRecord {
    JobRecord record;
    IntakeEntry entry;
  };
  // Disposes of an entry never taken (the scheduler's destruction): its record's last owner.
  struct ReleaseIntakeEntry {
    void operator()(IntakeEntry* entry) const { RecordPtr last = std::move(entry->record); }
  };
  using IntakeEntryPtr = std::unique_ptr<IntakeEntry, ReleaseIntakeEntry>;
  // How many Submits may wait in the intake before the one that finds it so waits for the lock
  // and queues them itself: callers that submit faster than the core can queue are held back to
  // its pace (four threads submitting in a loop otherwise filled the memory in seconds), and a
  // holder inherits about this many enqueues at most (milliseconds on the 2-core VM). The larger
  // it is, the less a burst of Submits into a busy pool waits for the holders' queueing: at 64 the
  // submitter paid 1.5-2 us per call, as before the intake, at 16,384 about 1 us
  // (bench/README.md).
  static constexpr std::size_t kIntakeLimit = 16384;

  // Whether a Submit may go through the intake: whether everything Accept could refuse it for
  // but the phase (told by its callback if it changed meanwhile) is judged here, without the
  // core. A type with a queue-wait limit goes through the lock, so that the timer knows of its
  // limit from the start.
  bool IntakeAccepts(std::string_view type, std::string_view id, const JobOptions& options) const {
    return intake_open_ && accepting_.load(std::memory_order_relaxed) && !id.empty() &&
           (!options.cost || (std::isfinite(*options.cost) && *options.cost >= 0)) &&
           intake_types_.Contains(type);
  }

  // Submit through the intake: the job is queued in the core by whoever takes the lock next, or
  // by this call: when the intake is long (waiting for the lock), or when the job could be
  // admitted now (if the lock is free; else its holder queues it). While the global cap is full
  // nothing can be admitted before a job completes, and every completion takes the lock: the job
  // is left for it.
  void SubmitThroughIntake(std::string_view type, std::string_view id, std::string_view key,
                           JobFn fn, DoneCallback done, const JobOptions& options) {
    IntakeEntryPtr entry;
    {
      auto both = std::make_shared<IntakeRecord>();
      both->entry.record = RecordPtr(both, &both->record);  // shares `both`'s ownership
      entry.reset(&both->entry);
    }
    entry->record->fn = std::move(fn);
    entry->record->done = std::move(done);
    entry->type.assign(type);
    entry->id.assign(id);
    entry->key.assign(key);
    entry->cost = options.cost;
    entry->join = options.join_running ? core::Join::kPendingOrRunning : core::Join::kPending;
    AddOutstanding();  // as Accept counts it: from here it is told exactly once
    entry->read = Now();
    if (intake_.Push(std::move(entry)) >= kIntakeLimit) {
      RecordList admitted;
      bool wake_timer = false;
      { Locked lock(this, admitted, wake_timer); }  // queues the intake, this job with it
      if (wake_timer) WakeTimer();
      Dispatch(admitted);
    } else if (!cap_full_.load(std::memory_order_seq_cst)) {
      ServeIntake();
    }
  }

  // Queues what the intake holds, oldest first, as Accept would have one by one; the first thing
  // done under the lock (Locked), so that a call finds the caller's earlier Submits queued.
  void TakeIntakeLocked(RecordList& admitted, bool& wake_timer)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    IntakeEntry* list = intake_.TakeAll();
    while (list != nullptr) {
      IntakeEntry* entry = std::exchange(list, list->next);
      // The entry lives in its record's allocation: it stays valid while `record` holds it.
      RecordPtr record = std::move(entry->record);
      Status refused =
          EnqueueLocked(record, {entry->type, entry->id, entry->key, entry->cost, entry->join},
                        MonotonicLocked(entry->read), admitted, wake_timer);
      // The core keeps its own copies: names longer than a string holds inline give their memory
      // back now, not when the job ends.
      entry->type = std::string();
      entry->id = std::string();
      entry->key = std::string();
      if (!refused.ok()) {
        // Submit returned OK and the scheduler began to shut down before the job was queued: its
        // callback is told, as a pending job's is at shutdown.
        record->MoveTo(JobRecord::State::kCancelled);
        record->refusal = refused.code() == absl::StatusCode::kUnavailable
                              ? absl::CancelledError("the scheduler shut down before the job ran")
                              : std::move(refused);
        admitted.push_back(std::move(record));
      }
    }
  }

  // After the lock was released: if Submits reached the intake and the lock is free, take it and
  // queue them. A Submit pushes before it looks at the lock and a holder looks at the intake after
  // it releases the lock, each with a fence between (StoreLoadFence), so every entry is queued by
  // the one or the other.
  void ServeIntake() {
    for (;;) {
      internal::StoreLoadFence();  // after the push or the release above, before the look
      if (intake_.empty() || !mutex_.TryLock()) return;
      RecordList admitted;
      bool wake_timer = false;
      TakeIntakeLocked(admitted, wake_timer);
      UnlockCore();
      if (wake_timer) WakeTimer();
      Dispatch(admitted);
    }
  }

  // Releases the scheduler's lock, publishing first whether the global cap is full (for
  // SubmitThroughIntake).
  void UnlockCore() ABSL_UNLOCK_FUNCTION(mutex_) {
    // Written only when it changes: a line both cores write at every release would bounce.
    if (const bool full = core_->full(); cap_full_.load(std::memory_order_relaxed) != full) {
      cap_full_.store(full, std::memory_order_seq_cst);
    }
    mutex_.Unlock();
  }

  // The scheduler's lock for one critical section, the one way the runtime takes it. Taking it
  // queues what the Submit intake holds first. What that admits is started and reported:
  // - by a call that dispatches what it decides (Accept, Complete, ...), with its own: it passes
  //   its `admitted` and `wake_timer`, and the release serves the intake again on this thread;
  // - for any other call (a query, a registration, the timer's thread) on a pool fiber, with the
  //   intake left after the release: such a call runs no job's callback, and the timer's thread,
  //   which holds its own lock while it takes this one, never waits for its own lock to wake
  //   itself.
  class ABSL_SCOPED_LOCKABLE Locked {
   public:
    Locked(Impl* impl, RecordList& admitted, bool& wake_timer)
        ABSL_EXCLUSIVE_LOCK_FUNCTION(impl->mutex_)
        : impl_(impl), admitted_(&admitted), wake_timer_(&wake_timer) {
      Acquire();
    }
    explicit Locked(Impl* impl) ABSL_EXCLUSIVE_LOCK_FUNCTION(impl->mutex_) : impl_(impl) {
      Acquire();
    }
    // A query queues the intake too: what it reads includes the caller's earlier Submits.
    explicit Locked(const Impl* impl) ABSL_EXCLUSIVE_LOCK_FUNCTION(impl->mutex_)
        : Locked(const_cast<Impl*>(impl)) {}
    ~Locked() ABSL_UNLOCK_FUNCTION() { Release(); }
    Locked(const Locked&) = delete;
    Locked& operator=(const Locked&) = delete;

    // Releases the lock before the end of the scope (once; the destructor then does nothing).
    void Release() ABSL_UNLOCK_FUNCTION() {
      if (impl_ == nullptr) return;
      Impl* impl = std::exchange(impl_, nullptr);
      impl->UnlockCore();
      if (admitted_ != &own_admitted_) {
        impl->ServeIntake();
        return;
      }
      internal::StoreLoadFence();  // as in ServeIntake
      if (own_admitted_.empty() && !own_wake_timer_ && impl->intake_.empty()) return;
      impl->HandOff(std::move(own_admitted_), own_wake_timer_);
    }

   private:
    void Acquire() ABSL_EXCLUSIVE_LOCK_FUNCTION(impl_->mutex_) {
      impl_->mutex_.Lock();
      impl_->TakeIntakeLocked(*admitted_, *wake_timer_);
    }
    Impl* impl_;
    RecordList own_admitted_;
    bool own_wake_timer_ = false;
    RecordList* admitted_ = &own_admitted_;
    bool* wake_timer_ = &own_wake_timer_;
  };

  // What the thread-safety analysis cannot follow through a std::optional<Locked>: that it holds
  // the scheduler's lock from here on. Aborts when it does not.
  void MustHold(const std::optional<Locked>& lock) const ABSL_ASSERT_EXCLUSIVE_LOCK(mutex_) {
    if (lock.has_value()) return;
    std::fprintf(stderr, "fairgate: a call expected to hold the scheduler's lock and did not\n");
    std::abort();
  }

  // Starts and reports, on a pool fiber, what a Locked call that does not dispatch queued from
  // the intake, and serves the intake there. Inline only when the pool is closing (the
  // scheduler is being destroyed: no call of it is left to need the timer's lock).
  void HandOff(RecordList admitted, bool wake_timer) {
    auto follow = [this, admitted = std::move(admitted), wake_timer] {
      ServeIntake();
      if (wake_timer) WakeTimer();
      Dispatch(admitted);
    };
    if (!pool_.Post(follow)) follow();
  }

  // The time a decision under the lock is taken at: `read` (which may have been read before the
  // lock was taken, while another thread decided at a later time) made no earlier than the last
  // decision's. So the decisions' times, as the core, the metrics and the observers see them,
  // never go back, and no job is admitted before it arrived.
  double MonotonicLocked(double read) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    last_decision_time_ = std::max(last_decision_time_, read);
    return last_decision_time_;
  }
  // The clock, read under the lock, for a decision.
  double LockedNow() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) { return MonotonicLocked(Now()); }

  // Whether AdmitLocked(now) would admit, reap and report nothing: the global cap is full (no job
  // is admitted before one completes or the cap grows) or no job is pending, and no expiry or
  // aging step is due or waits to be reported.
  bool AdmitsNothingLocked(double now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    return (core_->full() || core_->pending_jobs() == 0) && !core_->StepDueBy(now) &&
           !log_.PromotionsPending();
  }

  // Admits everything admissible at `now` (the time of the operation that may have freed room).
  // Jobs that expired on the way go out with `admitted` too, refused, for Dispatch to report.
  // Asks the core nothing when it would answer nothing (AdmitsNothingLocked): a drain of the
  // intake into a full pool comes here after every entry it queues.
  void AdmitLocked(double now, RecordList& admitted) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    if (!AdmitsNothingLocked(now)) {
      while (std::optional<core::Admission> a = core_->NextAdmission(now)) {
        TakeAdmissionLocked(*a, now, admitted);
      }
      ReapExpiredLocked(now, admitted);
      log_.Promotions(now);
    }
    log_.Post();
    CheckInvariantsLocked();
  }

  // A job the core admitted at `now`: its record runs, logged, into `admitted`.
  void TakeAdmissionLocked(const core::Admission& a, double now, RecordList& admitted)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    RecordPtr& record = records_[a.ticket.slot];
    if (!record->joiners.empty()) ChooseRunnerLocked(record, coalesce_[a.type_index]);
    record->MoveTo(JobRecord::State::kRunning);
    record->admitted_at = now;
    ForgetDeadlineLocked(*record);
    log_.Admitted(a, now);
    admitted.push_back(record);
  }

  // Takes the expiries and aging steps due by `now` without admitting (for a snapshot): expired
  // jobs wait in unreported_ for the timer. True when some did: wake the timer to report them,
  // once the lock is released (the timer takes its own lock first, then this one).
  bool AdvanceLocked(double now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    core_->AdvanceTo(now);
    const std::size_t before = unreported_.size();
    ReapExpiredLocked(now, unreported_);
    log_.Promotions(now);
    log_.Post();
    return unreported_.size() != before;
  }

  // The jobs the core expired at their type's max_queue_wait leave the records at once (their
  // slots may be reused by the next enqueue), refused with DeadlineExceeded, into `out`.
  void ReapExpiredLocked(double now, RecordList& out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    for (const core::ExpiredJob& expired : core_->TakeExpired()) {
      RecordPtr record = std::move(records_[expired.ticket.slot]);
      record->MoveTo(JobRecord::State::kCancelled);
      record->refusal = absl::DeadlineExceededError(
          absl::StrCat("the job waited its type's max_queue_wait (",
                       expired.expired_at - expired.arrival, " s) without being admitted"));
      ForgetDeadlineLocked(*record);
      log_.Expired(expired.View(), record->refusal, now);
      // The calls that joined it leave with it (its arrival was theirs).
      for (RecordPtr& joiner : record->joiners) {
        joiner->MoveTo(JobRecord::State::kCancelled);
        joiner->refusal = record->refusal;
        out.push_back(std::move(joiner));
      }
      record->joiners.clear();
      out.push_back(std::move(record));
    }
  }

  // With FAIRGATE_CHECK_INVARIANTS (the debug preset), the core's invariants after every decision
  // that may have changed them; a broken one is a bug in fairgate: say which, and abort.
  void CheckInvariantsLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
#if FAIRGATE_CHECK_INVARIANTS
    if (Status broken = core_->CheckInvariants(); !broken.ok()) {
      std::fprintf(stderr, "fairgate: %s\n", std::string(broken.message()).c_str());
      std::abort();
    }
#endif
  }

  // The job `lead` stands for was admitted and other calls share it: the one that runs it becomes
  // the lead, the others wait for its status (kJoined). A RunSync caller still waiting runs its
  // own function (the first to have asked), in its own thread; else a Submit's function: the
  // first's (kJoin) or the latest's (kSupersede).
  static void ChooseRunnerLocked(RecordPtr& lead, Coalesce mode) {
    std::vector<RecordPtr> calls = std::move(lead->joiners);
    calls.insert(calls.begin(), lead);
    auto runner =
        std::find_if(calls.begin(), calls.end(), [](const RecordPtr& r) { return r->sync; });
    if (runner == calls.end())
      runner = mode == Coalesce::kSupersede ? calls.end() - 1 : calls.begin();
    RecordPtr chosen = std::move(*runner);
    calls.erase(runner);
    for (const RecordPtr& call : calls) call->MoveTo(JobRecord::State::kJoined);
    chosen->joiners = std::move(calls);
    lead = std::move(chosen);
  }

  // A pending call leaves the queue. The job leaves with its last call (uncharged, cancelled in
  // the log); until then the core counts one caller fewer and, if the lead left, the next call
  // to have joined leads.
  void LeaveQueueLocked(const RecordPtr& record, double now, const Status& why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    RecordPtr& lead = records_[record->ticket.slot];
    if (lead == record && record->joiners.empty()) {
      CancelLocked(*record, now, why);
      return;
    }
    (void)core_->Cancel(record->ticket, now);
    CheckInvariantsLocked();
    if (lead == record) {
      RecordPtr next = std::move(record->joiners.front());
      record->joiners.erase(record->joiners.begin());
      next->joiners = std::move(record->joiners);
      record->joiners.clear();
      lead = std::move(next);
    } else {
      std::erase(lead->joiners, record);
    }
    record->MoveTo(JobRecord::State::kCancelled);
  }

  // A call that joined a running job stops waiting for it; the run goes on for the others.
  void LeaveRunLocked(const RecordPtr& record) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    std::erase(records_[record->ticket.slot]->joiners, record);
    record->MoveTo(JobRecord::State::kCancelled);
  }

  // Tells the calls that joined a run that ended its status (each its own copy, `result`),
  // outside the lock.
  void TellJoiners(std::vector<RecordPtr>& joiners) {
    for (const RecordPtr& joiner : joiners) {
      if (joiner->sync) {
        Signal(*joiner, /*decided=*/true);  // the caller returns the result, then finishes
      } else {
        joiner->fn = nullptr;  // release what the function holds before reporting
        InvokeDone(joiner->done, joiner->result);
        joiner->done = nullptr;
        FinishOutstanding();
      }
    }
  }

  // A pending job leaves the queue without running, uncharged: told to the core and the log.
  void CancelLocked(JobRecord& record, double now, const Status& why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    const core::JobView job = *core_->Describe(record.ticket);
    (void)core_->Cancel(record.ticket, now);
    CheckInvariantsLocked();
    record.MoveTo(JobRecord::State::kCancelled);
    records_[record.ticket.slot] = nullptr;
    ForgetDeadlineLocked(record);
    log_.Cancelled(job, why, now);
    log_.Post();
  }

  // Tells a job that left the queue without running why (its refusal), exactly once.
  void Refuse(const RecordPtr& record) {
    if (record->sync) {
      Signal(*record, /*decided=*/true);  // the caller returns the refusal, then finishes
    } else if (record->async) {
      DetachContext(*record);
      InvokeAdmitted(*record, record->refusal);
      FinishOutstanding();
    } else {
      record->fn = nullptr;  // release what the function holds before reporting
      InvokeDone(record->done, record->refusal);
      record->done = nullptr;
      FinishOutstanding();
    }
  }

  // Starts the admitted jobs, and reports the refused ones (expired on the way).
  void Dispatch(const RecordList& admitted) {
    for (const RecordPtr& record : admitted) {
      if (!record->refusal.ok()) {
        Refuse(record);
      } else if (record->sync) {
        Signal(*record, /*decided=*/true);
      } else if (record->async && record->fleet_leases) {
        pool_.Post([this, record] { AdmitWithLeases(record); });
      } else if (record->async) {
        DetachContext(*record);
        InvokeAdmitted(*record, Scheduler::MakePermit(std::make_unique<HeldPermit>(this, record)));
      } else {
        pool_.Post([this, record] { RunBackground(record); });
      }
    }
  }

  // Runs a Submit job on a pool fiber. When its completion admits another Submit job, this
  // fiber runs that one next instead of posting it: the slot it frees goes to a job on the same
  // thread, with no wake-up of another worker. Such a chain yields to its thread's other fibers
  // (tasks it took from the pool, RunSync callers woken there, its worker's search for work)
  // once it has run for kChainBudget since it last did: a chain never holds a thread longer.
  void RunBackground(RecordPtr record) {
    double slice_start = Now();
    while (record) {
      internal::FleetLeases::Held leases;
      Status status;
      if (record->claimed_leases != 0) {
        leases.ctx = internal::WithFencingToken(background_.first, record->claimed_leases);
      } else {
        status = EnterFleet(*record, background_.first, leases);
      }
      const double start = Now();  // a wait for fleet-wide leases is not part of the run
      if (status.ok()) status = Invoke(record->fn, leases.ctx ? *leases.ctx : background_.first);
      if (fleet_) fleet_->Leave(leases);
      const double end = Now();
      RecordPtr next = Complete(*record, start, end, status, /*keep_background=*/true);
      record->fn = nullptr;  // release what the function holds before reporting
      InvokeDone(record->done, status);
      record->done = nullptr;
      FinishOutstanding();  // `next`, still outstanding, keeps the scheduler alive
      record = std::move(next);
      if (record && end - slice_start >= kChainBudget.count()) {
        internal::YieldToOthers();
        slice_start = Now();
      }
    }
  }

  // Completes a job that ran from `start` to `end` and dispatches what that admits. With
  // `keep_background`, the first admitted Submit job is returned instead of posted, for the
  // caller to run.
  RecordPtr Complete(JobRecord& record, double start, double end, const Status& status,
                     bool keep_background = false) {
    RecordList admitted;
    std::vector<RecordPtr> joiners;
    bool wake_timer = false;
    {
      Locked lock(this, admitted, wake_timer);
      const double run_time = std::max(0.0, end - start);
      end = MonotonicLocked(end);
      core::JobView job;  // described by the completion itself: one lookup of the ticket
      (void)core_->Complete(record.ticket, run_time, end, job);
      log_.Completed(job, status, run_time, end);
      records_[record.ticket.slot] = nullptr;
      joiners = std::move(record.joiners);
      record.joiners.clear();
      for (const RecordPtr& joiner : joiners) {
        joiner->MoveTo(JobRecord::State::kFinished);
        joiner->result = Detached(status);
      }
      AdmitLocked(end, admitted);
    }
    if (wake_timer) WakeTimer();
    TellJoiners(joiners);
    RecordPtr kept;
    if (keep_background) {
      auto it = std::find_if(admitted.begin(), admitted.end(), [](const RecordPtr& r) {
        return !r->sync && !r->async && r->refusal.ok();
      });
      if (it != admitted.end()) {
        kept = std::move(*it);
        admitted.erase(it);
      }
    }
    Dispatch(admitted);
    return kept;
  }

  // An Acquire that leaves the queue without a permit (its context ended, its deadline passed):
  // uncharged, told once. Does nothing unless the job is still pending.
  void AbandonWaiting(const RecordPtr& record, const Status& why) {
    {
      Locked lock(this);
      if (record->state != JobRecord::State::kPending) return;
      CancelLocked(*record, LockedNow(), why);
    }
    DetachContext(*record);
    InvokeAdmitted(*record, why);
    FinishOutstanding();
  }

  // Unregisters an Acquire's context callback; if it had not run, finishes its outstanding count
  // (a callback that has run finishes its own).
  void DetachContext(JobRecord& record) {
    if (record.ctx.state() && record.ctx.state()->RemoveCallback(record.ctx_callback)) {
      FinishOutstanding();
    }
  }

  void ForgetDeadlineLocked(JobRecord& record) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    if (!record.deadline_entry) return;
    deadlines_.erase(*record.deadline_entry);
    record.deadline_entry.reset();
  }

  // The scheduler's side of a Permit: releasing it gives back its fleet-wide leases, if any,
  // and completes the job.
  class HeldPermit : public internal::HeldJob {
   public:
    HeldPermit(Impl* impl, RecordPtr record,
               std::unique_ptr<internal::FleetLeases::Held> leases = nullptr)
        : impl_(impl), record_(std::move(record)), leases_(std::move(leases)) {}
    void Release(const Status& status) override {
      Impl* impl = impl_;
      const double end = impl->Now();
      if (leases_) impl->fleet_->Leave(*leases_);
      (void)impl->Complete(*record_, record_->admitted_at, end, status);
      record_ = nullptr;
      impl->FinishOutstanding();  // the last touch: the scheduler may be destroyed after it
    }
    std::uint64_t FencingToken() const override {
      return leases_ && leases_->ctx ? leases_->ctx->FencingToken() : 0;
    }

   private:
    Impl* impl_;
    RecordPtr record_;
    std::unique_ptr<internal::FleetLeases::Held> leases_;
  };

  void AddOutstanding() { outstanding_.fetch_add(1, std::memory_order_relaxed); }

  // One accepted job has been fully reported. Above one the count drops without the lock (it
  // cannot reach zero); a drop that may reach it is made under the quiet mutex, which WaitQuiet
  // reads it under, so a waiter in Shutdown cannot see zero (and destroy the scheduler) before
  // this call is done with it. Every job takes this path once, on every worker thread at once:
  // a mutex here was a point of contention (bench/README.md). Until the scheduler first waits
  // to be quiet, the count includes the scheduler itself: RunSync callers that run their jobs
  // one or two at a time (fibers on two threads) would otherwise take the mutex at nearly every
  // call (bench/README.md, "The count of outstanding jobs").
  void FinishOutstanding() {
    std::int64_t n = outstanding_.load(std::memory_order_relaxed);
    while (n > 1) {
      if (outstanding_.compare_exchange_weak(n, n - 1, std::memory_order_acq_rel)) return;
    }
    std::unique_lock lock(quiet_->mutex);
    if (outstanding_.fetch_sub(1, std::memory_order_acq_rel) == 1) quiet_->cv.notify_all();
  }

  // Waits until no accepted job is outstanding, or `ctx` is done.
  Status WaitQuiet(const Context& ctx) {
    std::uint64_t callback = 0;
    if (ctx.state()) {
      // Holds the signal, not the scheduler: the callback may run after the scheduler is gone.
      callback = ctx.state()->AddCallback([quiet = quiet_] {
        std::unique_lock lock(quiet->mutex);
        quiet->cv.notify_all();
      });
    }
    Status result;
    {
      std::unique_lock lock(quiet_->mutex);
      // Shutdown and Drain wait here once they stop accepting work: the scheduler stops counting
      // itself (FinishOutstanding), once.
      if (std::exchange(open_counted_, false)) {
        outstanding_.fetch_sub(1, std::memory_order_acq_rel);
      }
      auto done = [&] { return outstanding_ == 0 || ctx.Done(); };
      if (std::optional<Context::Clock::time_point> deadline = ctx.Deadline()) {
        quiet_->cv.wait_until(lock, *deadline, done);
      } else {
        quiet_->cv.wait(lock, done);
      }
      if (outstanding_ != 0) result = ctx.Err();
    }
    if (ctx.state()) ctx.state()->RemoveCallback(callback);
    return result;
  }

  // Tells the timer that an earlier deadline may be waiting.
  void WakeTimer() {
    {
      std::unique_lock lock(sweeper_mutex_);
      timer_rearm_ = true;
    }
    sweeper_wake_.notify_all();
  }

  // What is due on the timer: ends the waits of Acquire jobs whose deadline has passed and of
  // jobs at their type's max_queue_wait, and queues the periodic runs due.
  void RunDue(Context::Clock::time_point now) {
    RecordList expired;
    RecordList reported;
    std::vector<std::shared_ptr<internal::PeriodicState>> due;
    std::vector<std::pair<StoredJob, std::shared_ptr<const DurableType>>> retries;
    {
      Locked lock(this);
      for (auto it = deadlines_.begin(); it != deadlines_.end() && it->first <= now; ++it) {
        expired.push_back(it->second);
      }
      reported.swap(unreported_);
      if (phase_ != Phase::kShutDown) AdmitLocked(LockedNow(), reported);
      while (!periodic_.empty() && periodic_.begin()->first <= now) {
        due.push_back(std::move(periodic_.begin()->second));
        periodic_.erase(periodic_.begin());
      }
      while (!retries_.empty() && retries_.begin()->first <= now) {
        retries.push_back(std::move(retries_.begin()->second));
        retries_.erase(retries_.begin());
      }
    }
    Dispatch(reported);
    for (const auto& state : due) {
      if (!state->stopped) QueuePeriodicRun(state);
    }
    for (const auto& [job, type] : retries) QueueOrDefer(job, type);
    for (const RecordPtr& record : expired) {
      AbandonWaiting(record, absl::DeadlineExceededError("context deadline exceeded"));
    }
  }

  // A uniform double in [low, high), from the scheduler's generator.
  double Uniform(double low, double high) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    return std::uniform_real_distribution<double>(low, high)(random_);
  }

  // Queues the periodic job's next run `after` seconds from now on the timer; true when it is
  // the timer's earliest, so that the caller wakes the timer (after releasing the lock).
  bool SchedulePeriodicLocked(const std::shared_ptr<internal::PeriodicState>& state, double after)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    const auto due = Context::Clock::now() + std::chrono::duration_cast<Context::Clock::duration>(
                                                 std::chrono::duration<double>(after));
    const auto entry = periodic_.emplace(due, state);  // before begin(): operands are unordered
    return entry == periodic_.begin();
  }

  // Queues one run of a periodic job as a Submit job; when it ends, the next is scheduled.
  void QueuePeriodicRun(const std::shared_ptr<internal::PeriodicState>& state) {
    auto ended = [this, state](const Status& status) {
      if (keeper_) keeper_->RunEnded(state->type, state->id, internal::WallNow());
      ++state->runs;
      if (state->options.on_run) InvokeDone(state->options.on_run, status);
      ScheduleNextRun(state);
    };
    Status queued =
        Submit(state->type, state->id, state->options.fairness_key, state->fn, ended, {});
    if (queued.code() == absl::StatusCode::kUnavailable) return;  // shutting down: runs stop
    if (!queued.ok()) ended(queued);
  }

  // After a run: the next one `interval` (with jitter) from now, unless stopped or shutting down.
  void ScheduleNextRun(const std::shared_ptr<internal::PeriodicState>& state) {
    if (state->stopped) return;
    bool earliest = false;
    {
      Locked lock(this);
      if (phase_ != Phase::kOpen) return;
      const double jitter = state->options.jitter;
      const double factor = jitter > 0 ? 1.0 + Uniform(-jitter, jitter) : 1.0;
      earliest = SchedulePeriodicLocked(state, state->interval.count() * factor);
    }
    if (earliest) WakeTimer();
  }

  // When the timer must wake for the next queue-wait limit, on its clock.
  std::optional<Context::Clock::time_point> NextExpiryLocked() const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    const std::optional<double> at = core_->NextExpiryAt();
    if (!at) return std::nullopt;
    // Through the scheduler's clock, which need not be the steady one: how far ahead it is.
    const double ahead = std::max(0.0, *at - Now());
    return Context::Clock::now() + std::chrono::duration_cast<Context::Clock::duration>(
                                       std::chrono::duration<double>(std::min(ahead, 1e6)));
  }

  // The scheduler's timer: sweeps idle keys every sweep_interval, ends Acquire waits at their
  // context's deadline, takes out jobs at their type's max_queue_wait, and queues periodic runs.
  void SweeperLoop() {
    using Clock = Context::Clock;
    const auto sweep_interval =
        std::chrono::duration_cast<Clock::duration>(options_.sweep_interval);
    Clock::time_point next_sweep = Clock::now() + sweep_interval;
    // Adaptive capacity: the rule is applied every interval, from a first sample taken now.
    std::optional<Clock::duration> adapt_interval;
    Clock::time_point next_adapt = Clock::time_point::max();
    if (options_.adaptive_capacity) {
      adapt_interval = std::chrono::duration_cast<Clock::duration>(
          std::chrono::duration<double>(options_.adaptive_capacity->interval));
      SampleStall(Clock::now());
      next_adapt = Clock::now() + *adapt_interval;
    }
    std::unique_lock lock(sweeper_mutex_);
    while (!stop_sweeper_) {
      Clock::time_point wake_at = std::min(next_sweep, next_adapt);
      {
        Locked core_lock(this);
        if (!deadlines_.empty()) wake_at = std::min(wake_at, deadlines_.begin()->first);
        if (auto expiry = NextExpiryLocked()) wake_at = std::min(wake_at, *expiry);
        if (!unreported_.empty()) wake_at = Clock::now();
        if (!periodic_.empty()) wake_at = std::min(wake_at, periodic_.begin()->first);
        if (!retries_.empty()) wake_at = std::min(wake_at, retries_.begin()->first);
      }
      timer_rearm_ = false;
      sweeper_wake_.wait_until(lock, wake_at, [&] { return stop_sweeper_ || timer_rearm_; });
      if (stop_sweeper_) break;
      const Clock::time_point woke_at = Clock::now();
      // Callbacks run without the timer's lock: they may acquire again, which may wake it.
      lock.unlock();
      RunDue(woke_at);
      if (adapt_interval && woke_at >= next_adapt) {
        AdaptCapacity(woke_at);
        next_adapt = woke_at + *adapt_interval;
      }
      lock.lock();
      if (stop_sweeper_) break;
      if (woke_at < next_sweep) continue;
      next_sweep = woke_at + sweep_interval;
      Locked core_lock(this);
      const double now = LockedNow();
      std::vector<std::pair<std::string, double>> evicted;
      const core::SweepResult swept = core_->Sweep(now, log_.wants_events() ? &evicted : nullptr);
      log_.Evicted(swept, evicted, now);
      log_.Post();
    }
  }

  // Reads the stall counter at `now`: the pressure since the previous sample, or nothing when
  // the counter cannot be read (counted; the cap stays) or there is no previous sample.
  std::optional<double> SampleStall(Context::Clock::time_point now) {
    StatusOr<double> stalled = stalled_seconds_();
    if (!stalled.ok()) {
      Locked lock(this);
      log_.CapacitySignalFailed();
      return std::nullopt;
    }
    std::optional<double> pressure;
    if (last_sample_) {
      const double wall = std::chrono::duration<double>(now - last_sample_->first).count();
      if (wall > 0) pressure = std::clamp((*stalled - last_sample_->second) / wall, 0.0, 1.0);
    }
    last_sample_ = {now, *stalled};
    return pressure;
  }

  // One application of adaptive capacity's rule (fairgate/adaptive_capacity.h); a cap that grew
  // admits what it now has room for.
  void AdaptCapacity(Context::Clock::time_point now) {
    const std::optional<double> pressure = SampleStall(now);
    if (!pressure) return;
    RecordList admitted;
    bool wake_timer = false;
    {
      Locked lock(this, admitted, wake_timer);
      const int current = core_->capacity();
      const int next = NextCapacity(*options_.adaptive_capacity, current, options_.max_concurrency,
                                    *pressure, core_->pending_jobs() > 0);
      if (next != current) (void)core_->SetCapacity(next);
      if (next > current && phase_ != Phase::kShutDown) AdmitLocked(LockedNow(), admitted);
    }
    if (wake_timer) WakeTimer();
    Dispatch(admitted);
  }

  void StopSweeper() {
    {
      std::unique_lock lock(sweeper_mutex_);
      stop_sweeper_ = true;
    }
    sweeper_wake_.notify_all();
  }

  const SchedulerOptions options_;
  // Adaptive capacity's signal and its last sample (the timer thread's alone).
  const std::function<StatusOr<double>()> stalled_seconds_;
  std::optional<std::pair<Context::Clock::time_point, double>> last_sample_;
  const std::chrono::steady_clock::time_point epoch_;
  // The store's side: loading, flushing, counting (null without a store). Before the core's
  // lock: the flusher it runs takes that lock.
  const std::unique_ptr<internal::StateKeeper> keeper_;
  // With a shared store: claims durable jobs and renews their leases (null otherwise). Stopped by
  // ~Impl after Shutdown; the callbacks it calls read the members below.
  std::unique_ptr<internal::Claimer> claimer_;
  // With a shared store: each tracked key's cost as the fleet had it at the last share (what
  // ShareCosts subtracts to find what was charged here since).
  absl::flat_hash_map<std::string, double> shared_costs_ ABSL_GUARDED_BY(mutex_);
  // With a shared store and fleet-wide conflict groups or caps: the leases jobs take (null
  // otherwise).
  std::unique_ptr<internal::FleetLeases> fleet_;
  std::mutex share_mutex_;  // taken before mutex_, never under it

  // The Submit intake (runtime/submit_intake.h), and what a Submit reads without the lock to
  // judge whether it may use it and whether to queue it itself.
  // The intake's head, these flags and the lock each on a cache line of their own: a look at the
  // intake after releasing the lock must not take back the line the next holder is writing.
  internal::IntakeStack<IntakeEntry, ReleaseIntakeEntry> intake_;
  internal::GrowOnlyNameSet intake_types_;  // registered types without a queue-wait limit
  const bool intake_open_ = options_.max_pending_total == SchedulerOptions::kUnlimited &&
                            options_.max_pending_per_key == SchedulerOptions::kUnlimited;
  // phase_ == kOpen, as of the last change; cleared by Shutdown and Drain before they take the
  // lock. Accept reads it too: a call that finds it cleared is refused uncounted.
  alignas(64) std::atomic<bool> accepting_{true};
  std::atomic<bool> cap_full_{false};  // the core's full() when the lock was last released
  // The scheduler's lock, and what it guards (checked by clang's thread-safety analysis:
  // scripts/thread_safety.sh).
  alignas(64) mutable internal::CoreMutex mutex_;
  std::unique_ptr<core::AdmissionCore> core_ ABSL_GUARDED_BY(mutex_);
  // By ticket slot: the pending and running jobs' leads.
  std::vector<RecordPtr> records_ ABSL_GUARDED_BY(mutex_);
  // The time of the latest decision (MonotonicLocked).
  double last_decision_time_ ABSL_GUARDED_BY(mutex_) = -std::numeric_limits<double>::infinity();
  std::vector<Coalesce> coalesce_ ABSL_GUARDED_BY(mutex_);  // by type index
  // Acquire's pending jobs whose context has a deadline.
  DeadlineMap deadlines_ ABSL_GUARDED_BY(mutex_);
  // Expired during a snapshot; the timer reports them.
  RecordList unreported_ ABSL_GUARDED_BY(mutex_);
  // Periodic jobs by when their next run is due; one entry each between runs.
  std::multimap<Context::Clock::time_point, std::shared_ptr<internal::PeriodicState>> periodic_
      ABSL_GUARDED_BY(mutex_);
  // Durable jobs: handlers by type; where Recover is (SubmitDurable waits for kDone); stored jobs
  // waiting out a retry's backoff, by when it ends.
  absl::flat_hash_map<std::string, std::shared_ptr<const DurableType>> durable_types_
      ABSL_GUARDED_BY(mutex_);
  enum class Recovery { kNotYet, kRecovering, kDone };
  Recovery recovery_ ABSL_GUARDED_BY(mutex_) = Recovery::kNotYet;
  std::multimap<Context::Clock::time_point,
                std::pair<StoredJob, std::shared_ptr<const DurableType>>>
      retries_ ABSL_GUARDED_BY(mutex_);
  // Jitter and first-run spread.
  std::mt19937_64 random_ ABSL_GUARDED_BY(mutex_){std::random_device{}()};
  Phase phase_ ABSL_GUARDED_BY(mutex_) = Phase::kOpen;
  // Metrics, events and evidence of every decision, in decision order.
  mutable internal::DecisionLog log_ ABSL_GUARDED_BY(mutex_);

  // Signalled when no accepted job is left unreported. Shared, so that a context callback that
  // outlives the scheduler still has something to signal.
  struct Quiet {
    internal::ShortMutex mutex;
    internal::ShortCondition cv;
  };
  const std::shared_ptr<Quiet> quiet_ = std::make_shared<Quiet>();
  // Accepted and not yet fully reported, plus one for the scheduler itself until the first
  // WaitQuiet (`open_counted_`): until then it cannot reach zero, so FinishOutstanding never
  // needs the quiet mutex. Changed without that mutex except when it may reach zero, read under
  // it by WaitQuiet.
  std::atomic<std::int64_t> outstanding_{1};
  bool open_counted_ = true;  // under the quiet mutex

  internal::WaitMutex sweeper_mutex_;
  internal::WaitCondition sweeper_wake_;
  bool stop_sweeper_ = false;
  bool timer_rearm_ = false;  // under sweeper_mutex_

  std::pair<Context, CancelFunc> background_;  // the context of Submit jobs
  internal::WorkerPool pool_;
  std::thread timer_;  // runs SweeperLoop; last: started once everything else exists
};

StatusOr<std::unique_ptr<Scheduler>> Scheduler::Create(const SchedulerOptions& options) {
  StatusOr<std::unique_ptr<core::AdmissionCore>> core = core::AdmissionCore::Create(options);
  if (!core.ok()) return core.status();
  std::function<StatusOr<double>()> stalled_seconds;
  if (options.adaptive_capacity) {
    stalled_seconds = options.adaptive_capacity->stalled_seconds;
    if (!stalled_seconds) {
      // The kernel's counter, which must be readable now.
      if (StatusOr<double> probe = internal::ReadCpuStallSeconds(); !probe.ok()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "adaptive_capacity needs CPU pressure stall information: ", probe.status().message()));
      }
      stalled_seconds = [] { return internal::ReadCpuStallSeconds(); };
    }
  }
  StatusOr<std::unique_ptr<internal::StateKeeper>> keeper = internal::StateKeeper::Open(options);
  if (!keeper.ok()) return keeper.status();
  return std::unique_ptr<Scheduler>(new Scheduler(std::make_unique<Impl>(
      options, *std::move(core), std::move(stalled_seconds), *std::move(keeper))));
}

Scheduler::Scheduler(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Scheduler::~Scheduler() = default;

Status Scheduler::RegisterType(std::string_view name, const JobTypeConfig& config) {
  return impl_->RegisterType(name, config);
}

Status Scheduler::RunSync(const Context& ctx, std::string_view type, std::string_view id,
                          std::string_view fairness_key, const JobFn& fn,
                          const JobOptions& options) {
  return impl_->RunSync(ctx, type, id, fairness_key, fn, options);
}

Status Scheduler::Acquire(const Context& ctx, std::string_view type, std::string_view id,
                          std::string_view fairness_key, PermitCallback on_admitted,
                          const JobOptions& options) {
  return impl_->Acquire(ctx, type, id, fairness_key, std::move(on_admitted), options);
}

Status Scheduler::Submit(std::string_view type, std::string_view id, JobFn fn) {
  return impl_->SubmitFromCaller(type, id, "", std::move(fn), nullptr, {});
}

Status Scheduler::Submit(std::string_view type, std::string_view id, std::string_view fairness_key,
                         JobFn fn, DoneCallback done, const JobOptions& options) {
  return impl_->SubmitFromCaller(type, id, fairness_key, std::move(fn), std::move(done), options);
}

StatusOr<PeriodicJob> Scheduler::SubmitEvery(std::string_view type, std::string_view id,
                                             Seconds interval, JobFn fn,
                                             const PeriodicOptions& options) {
  return impl_->SubmitEvery(type, id, interval, std::move(fn), options);
}

Status Scheduler::RegisterDurable(std::string_view type, DurableHandler handler,
                                  const RetryPolicy& retry) {
  return impl_->RegisterDurable(type, std::move(handler), retry);
}

StatusOr<RecoveryReport> Scheduler::Recover() { return impl_->Recover(); }

StatusOr<std::uint64_t> Scheduler::SubmitDurable(std::string_view type, std::string_view id,
                                                 std::string_view fairness_key,
                                                 std::string_view payload) {
  return impl_->SubmitDurable(type, id, fairness_key, payload);
}

StatusOr<std::vector<StoredJob>> Scheduler::DeadJobs() { return impl_->DeadJobs(); }

Status Scheduler::FlushState() { return impl_->FlushState(); }

Status Scheduler::Shutdown(const Context& ctx) { return impl_->Shutdown(ctx); }

Status Scheduler::Drain(const Context& ctx) { return impl_->Drain(ctx); }

fairgate::Snapshot Scheduler::Snapshot() const { return impl_->TakeSnapshot(0); }

fairgate::Snapshot Scheduler::Snapshot(std::size_t heaviest_keys) const {
  return impl_->TakeSnapshot(heaviest_keys);
}

void Scheduler::WriteMetrics(std::string& out) const { impl_->WriteMetrics(out); }

std::optional<double> Scheduler::AccumulatedCost(std::string_view fairness_key) const {
  return impl_->AccumulatedCost(fairness_key);
}

std::optional<double> Scheduler::Estimate(std::string_view type, std::string_view id) const {
  return impl_->Estimate(type, id);
}

Status Scheduler::SetKeyWeight(std::string_view fairness_key, double weight) {
  return impl_->SetKeyWeight(fairness_key, weight);
}

Status Scheduler::SetKeyLimits(std::string_view fairness_key, const KeyLimits& limits) {
  return impl_->SetKeyLimits(fairness_key, limits);
}

Status Scheduler::PauseType(std::string_view type) { return impl_->PauseType(type); }

Status Scheduler::ResumeType(std::string_view type) { return impl_->ResumeType(type); }

Status Scheduler::PauseKey(std::string_view fairness_key) { return impl_->PauseKey(fairness_key); }

Status Scheduler::ResumeKey(std::string_view fairness_key) {
  return impl_->ResumeKey(fairness_key);
}

StatusOr<Seconds> Scheduler::MaxWaitToCeiling(std::string_view type) const {
  StatusOr<double> wait = impl_->MaxWaitToCeiling(type);
  if (!wait.ok()) return wait.status();
  return Seconds(*wait);
}

void YieldToOtherJobs() { internal::YieldToOthers(); }

}  // namespace fairgate

// The calls of a Scheduler: RunSync, Submit (through the intake or not) and Acquire. Each makes
// its call's record, has the admission table decide, and acts on the decision (the Dispatcher,
// dispatcher.h).
#include <memory>
#include <mutex>
#include <optional>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/context_state.h"
#include "runtime/scheduler_impl.h"

namespace fairgate {

using internal::Invoke;
using internal::JobRecord;
using internal::Signal;

Status Scheduler::Impl::RunSync(const Context& ctx, std::string_view type, std::string_view id,
                                std::string_view key, const JobFn& fn, const JobOptions& options) {
  if (!fn) return absl::InvalidArgumentError("job function is empty");
  if (Status s = ctx.Err(); !s.ok()) return s;
  bool decided = false;  // admitted by the call itself: it need not wait to be told
  StatusOr<RecordPtr> accepted = Accept<internal::RunSyncCall>(
      {type, id, key, options.cost, core::Join::kPendingOrRunning, options.refuse_without_token},
      [](const RecordPtr&) {}, &decided);
  if (!accepted.ok()) return accepted.status();
  RecordPtr record = *std::move(accepted);

  if (!decided) {
    // Sleep until admitted, refused by shutdown, or the context is done.
    std::uint64_t callback = 0;
    if (ctx.state()) {
      callback = ctx.state()->AddCallback([record] { Signal(*record, /*decided=*/false); });
    }
    {
      internal::RunSyncCall& call = record->run_sync();
      std::unique_lock lock(call.wake_mutex);
      auto woken = [&] { return call.signalled; };
      if (std::optional<Context::Clock::time_point> deadline = ctx.Deadline()) {
        call.wake.wait_until(lock, *deadline, woken);
      } else {
        call.wake.wait(lock, woken);
      }
      decided = call.decided;
    }
    if (ctx.state()) ctx.state()->RemoveCallback(callback);
  }

  bool run = false;
  if (Status told = table_.SettleRunSync(record, decided, ctx, run); !run) {
    outstanding_.Finish();  // the last touch of the scheduler: it may be destroyed after
    return told;
  }
  Status status = RunAdmitted(*record, ctx, fn);
  outstanding_.Finish();
  return status;
}

Status Scheduler::Impl::RunAdmitted(JobRecord& record, const Context& ctx, const JobFn& fn) {
  internal::FleetLeases::Held leases;
  Status status = dispatcher_.EnterFleet(record, ctx, leases);
  const double start = Now();  // a wait for fleet-wide leases is not part of the run
  if (status.ok()) {
    const Context& base = leases.ctx ? *leases.ctx : ctx;
    if (record.worker) {
      status = Invoke(fn, record.worker->Enter(base));  // a context that names its worker
    } else {
      status = Invoke(fn, base);  // no copy of ctx
    }
  }
  if (record.worker) {
    if (std::optional<Status> lost = record.worker->Lost()) status = *std::move(lost);
  }
  if (fleet_) fleet_->Leave(leases);
  (void)dispatcher_.Complete(record, start, Now(), status);
  return status;
}

// The record is queued with its continuation unarmed, then ctx's cancel callback is registered
// (and its deadline filed as an alarm that signals as the cancellation does), then the
// continuation is armed (DetachedRunSync): it is posted by the first Signal after that, or here
// if one came before (the context ended, the job was admitted or refused meanwhile).
Status Scheduler::Impl::RunAsync(const Context& ctx, std::string_view type, std::string_view id,
                                 std::string_view key, JobFn fn, DoneCallback done,
                                 const JobOptions& options) {
  if (!fn) return absl::InvalidArgumentError("job function is empty");
  if (Status s = ctx.Err(); !s.ok()) return s;
  bool decided = false;  // admitted by the call itself: no Signal comes
  StatusOr<RecordPtr> accepted = Accept<internal::RunSyncCall>(
      {type, id, key, options.cost, core::Join::kPendingOrRunning, options.refuse_without_token},
      [&](const RecordPtr& r) {
        auto detached = std::make_unique<internal::DetachedRunSync>();
        detached->ctx = ctx;
        detached->fn = std::move(fn);
        detached->done = std::move(done);
        detached->resume = &Impl::ResumeRunAsyncOf;
        detached->scheduler = this;
        detached->self = r;
        r->run_sync().detached = std::move(detached);
        // Copied: this call returns before its job ends.
        r->name.Keep(JobName(TypeName(type), JobId(id), FairnessKey(key)));
      },
      &decided);
  if (!accepted.ok()) return accepted.status();
  RecordPtr record = *std::move(accepted);
  std::uint64_t callback = 0;
  std::optional<internal::Alarms::Id> alarm;
  if (!decided && ctx.state()) {
    auto signal = [weak = std::weak_ptr<JobRecord>(record)] {
      if (RecordPtr r = weak.lock()) Signal(*r, /*decided=*/false);
    };
    callback = ctx.state()->AddCallback(signal);
    if (std::optional<Context::Clock::time_point> deadline = ctx.Deadline()) {
      bool earliest = false;
      alarm = alarms_.Add(*deadline, signal, earliest);
      if (earliest) timer_.Wake();
    }
  }
  internal::RunSyncCall& call = record->run_sync();
  bool resume = false;
  {
    std::unique_lock lock(call.wake_mutex);
    call.detached->ctx_callback = callback;
    call.detached->alarm = alarm;
    call.detached->armed = true;
    if (decided) {
      call.signalled = true;
      call.decided = true;
    }
    resume = call.TakeResume();
  }
  if (resume) call.Resume();
  return absl::OkStatus();
}

// On the thread that signalled the call (RunSyncCall): it settles the call as a waking RunSync
// caller would; a call that runs the job has it run on a pool fiber, never on that thread (a
// caller, a completing job, the canceller), and any other is told there, as a Submit that did not
// run is told by whoever decided it.
void Scheduler::Impl::ResumeRunAsync(const RecordPtr& record) {
  internal::RunSyncCall& call = record->run_sync();
  internal::DetachedRunSync& detached = *call.detached;
  bool decided = false;
  {
    std::unique_lock lock(call.wake_mutex);
    decided = call.decided;
  }
  // Harmless from inside that callback: a context runs its callbacks outside its list's lock.
  if (detached.ctx_callback != 0) detached.ctx.state()->RemoveCallback(detached.ctx_callback);
  if (detached.alarm) alarms_.Remove(*detached.alarm);
  bool run = false;
  Status told = table_.SettleRunSync(record, decided, detached.ctx, run);
  if (!run) {
    FinishRunAsync(detached, told);
    return;
  }
  auto task = [this, record] {
    internal::DetachedRunSync& d = *record->run_sync().detached;
    FinishRunAsync(d, RunAdmitted(*record, d.ctx, d.fn));
  };
  if (!pool_.Post(task)) task();  // the pool is closing: no call is left to wait for it
}

void Scheduler::Impl::FinishRunAsync(internal::DetachedRunSync& detached, const Status& status) {
  detached.fn = nullptr;  // release what the function holds before reporting
  internal::InvokeDone(detached.done, status);
  detached.done = nullptr;
  outstanding_.Finish();  // the last touch of the scheduler: it may be destroyed after
}

Status Scheduler::Impl::Acquire(const Context& ctx, std::string_view type, std::string_view id,
                                std::string_view key, PermitCallback on_admitted,
                                const JobOptions& options) {
  if (!on_admitted) return absl::InvalidArgumentError("permit callback is empty");
  if (Status s = ctx.Err(); !s.ok()) return s;
  RecordPtr pending;
  StatusOr<RecordPtr> accepted = Accept<internal::AcquireCall>(
      {type, id, key, options.cost, core::Join::kNever, options.refuse_without_token},
      [&](const RecordPtr& r) {
        internal::AcquireCall& call = r->acquire();
        call.on_admitted = std::move(on_admitted);
        call.ctx = ctx;
        if (ctx.state()) {
          // The callback counts as outstanding until it has run or been removed, so that it never
          // touches a destroyed scheduler; whoever disposes of it finishes that count. It holds the
          // record until then (a cycle through the context, broken by either).
          outstanding_.Add();
          call.ctx_callback = ctx.state()->AddCallback([this, r] {
            Status err = r->acquire().ctx.Err();
            dispatcher_.AbandonWaiting(r,
                                       err.ok() ? absl::CancelledError("context cancelled") : err);
            outstanding_.Finish();
          });
        }
        pending = r;
      });
  if (!accepted.ok()) {
    // Never queued: its callback, if it ran, found nothing to do. Refused before its record was
    // made (the scheduler shuts down), it has none.
    if (pending) dispatcher_.DetachContext(*pending);
    return accepted.status();
  }
  RecordPtr record = *std::move(accepted);
  // The context may have ended before the job was queued: its callback found nothing to do.
  if (Status err = ctx.Err(); !err.ok()) dispatcher_.AbandonWaiting(record, err);
  return absl::OkStatus();
}

// Acquire's record, given up under the lock if the call does not admit it (Accept's
// `at_once_only`): admitted, its permit is delivered on this thread by the decision's dispatch,
// before Accept returns. A type that takes fleet-wide leases gets its permit later, from a pool
// fiber (Dispatcher::AdmitWithLeases): refused here rather than admitted and given up.
StatusOr<Permit> Scheduler::Impl::TryAcquire(std::string_view type, std::string_view id,
                                             std::string_view key, const JobOptions& options) {
  if (TakesFleetLeases(type)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "type '", absl::string_view(type.data(), type.size()),
        "' takes fleet-wide leases (FleetOptions::conflict_groups, type_caps), which a store "
        "grants later: TryAcquire cannot admit it at once; use Acquire"));
  }
  StatusOr<Permit> admitted = absl::InternalError("TryAcquire's permit was not delivered");
  StatusOr<RecordPtr> accepted = Accept<internal::AcquireCall>(
      {type, id, key, options.cost, core::Join::kNever, options.refuse_without_token},
      [&](const RecordPtr& r) {
        // Called at most once, inside Accept (above): `admitted` outlives it.
        r->acquire().on_admitted = [&admitted](StatusOr<Permit> permit) {
          admitted = std::move(permit);
        };
      },
      nullptr, /*at_once_only=*/true);
  if (!accepted.ok()) return accepted.status();
  return admitted;
}

Status Scheduler::Impl::SubmitFromCaller(std::string_view type, std::string_view id,
                                         std::string_view key, JobFn fn, DoneCallback done,
                                         const JobOptions& options) {
  if (options.requeue_on_worker_loss && fn) {
    return SubmitRequeued(
        std::make_shared<Requeued>(Requeued{std::string(type), std::string(id), std::string(key),
                                            std::move(fn), std::move(done), options}));
  }
  if (fn && table_.IntakeAccepts(type, id, options)) {
    SubmitThroughIntake(type, id, key, std::move(fn), std::move(done), options);
    return absl::OkStatus();
  }
  return Submit(type, id, key, std::move(fn), std::move(done), options);
}

// A job submitted with JobOptions::requeue_on_worker_loss: its callback submits it again, with
// the same function (held here, copied for each run), when its worker was lost; only another end
// reaches the caller's callback.
Status Scheduler::Impl::SubmitRequeued(const std::shared_ptr<Requeued>& job) {
  JobOptions once = job->options;
  once.requeue_on_worker_loss = false;
  return Submit(
      job->type, job->id, job->key, job->fn,
      [this, job](const Status& status) {
        if (WorkerLost(status) && SubmitRequeued(job).ok()) return;
        if (job->done) job->done(status);
      },
      once);
}

// `service`: a service's job's (submission.h); a claimed durable job runs under the leases its
// claim took instead of taking its own.
Status Scheduler::Impl::Submit(std::string_view type, std::string_view id, std::string_view key,
                               JobFn fn, DoneCallback done, const JobOptions& options,
                               const ServiceJob& service) {
  if (!fn) return absl::InvalidArgumentError("job function is empty");
  StatusOr<RecordPtr> accepted = Accept<internal::SubmitCall>(
      {type, id, key, options.cost,
       options.join_running ? core::Join::kPendingOrRunning : core::Join::kPending,
       options.refuse_without_token},
      [&](const RecordPtr& r) {
        internal::SubmitCall& call = r->submit();
        call.fn = std::move(fn);
        call.done = std::move(done);
        call.claimed_leases = service.claimed_leases;
        call.unmeasured = service.unmeasured;
        if (service.claimed_leases != 0) r->takes_fleet_leases = false;
      });
  return accepted.status();
}

template <typename Kind, typename Fill>
StatusOr<Scheduler::Impl::RecordPtr> Scheduler::Impl::Accept(const core::EnqueueRequest& request,
                                                             Fill fill, bool* admitted_at_once,
                                                             bool at_once_only) {
  if (!table_.accepting()) {
    // Shutdown or Drain has begun: refused without a record and without being counted as
    // outstanding (nothing of the call outlives it). Counted, a steady stream of refused calls
    // kept the count from ever reaching zero, and Shutdown from returning. Until the phase
    // changes (just after the flag, under the lock) the call goes the usual way.
    if (Status refused = table_.RefuseIfClosed(request); !refused.ok()) return refused;
  }
  auto record = std::make_shared<JobRecord>(std::in_place_type<Kind>);
  const JobName name(TypeName(request.type), JobId(request.id), FairnessKey(request.key));
  if constexpr (std::is_same_v<Kind, internal::RunSyncCall>) {
    record->name.Borrow(name);  // the caller's own, alive until its call returns (not RunAsync's)
  } else {
    record->name.Keep(name);
  }
  record->takes_fleet_leases = TakesFleetLeases(request.type);
  fill(record);
  // Counted before it can be admitted and finished elsewhere; uncounted if refused (an atomic
  // count, never under the table's lock).
  outstanding_.Add();
  // Read before the lock, as Complete's end time is: the critical section is what the callers
  // queue for. Another thread may take the lock in between with a later time: the table keeps
  // the decisions' times from going back.
  const double read = Now();
  const internal::AdmissionTable::Enqueued enqueued = dispatcher_.Act(
      table_.Enqueue(record, request, read, admitted_at_once != nullptr, at_once_only));
  if (!enqueued.status.ok()) {
    outstanding_.Finish();
    return enqueued.status;
  }
  if (enqueued.admitted_at_once) *admitted_at_once = true;
  return record;
}

// While the global cap is full nothing can be admitted before a job completes, and every
// completion takes the lock: the job is left for it.
void Scheduler::Impl::SubmitThroughIntake(std::string_view type, std::string_view id,
                                          std::string_view key, JobFn fn, DoneCallback done,
                                          const JobOptions& options) {
  internal::IntakeEntryPtr entry;
  {
    auto both = std::make_shared<internal::IntakeRecord>();
    both->entry.record = RecordPtr(both, &both->record);  // shares `both`'s ownership
    entry.reset(&both->entry);
  }
  entry->record->submit().fn = std::move(fn);
  entry->record->submit().done = std::move(done);
  entry->record->name.Keep(JobName(TypeName(type), JobId(id), FairnessKey(key)));
  entry->cost = options.cost;
  entry->join = options.join_running ? core::Join::kPendingOrRunning : core::Join::kPending;
  entry->record->takes_fleet_leases = TakesFleetLeases(type);
  outstanding_.Add();  // as Accept counts it: from here it is told exactly once
  entry->read = Now();
  if (table_.PushIntake(std::move(entry)) >= internal::AdmissionTable::kIntakeLimit) {
    dispatcher_.Act(table_.TakeIntake());  // queues the intake, this job with it
  } else if (!table_.CapFull()) {
    dispatcher_.ServeIntake();
  }
}

}  // namespace fairgate

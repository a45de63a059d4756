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
#include "runtime/capacity_controller.h"
#include "runtime/claimer.h"
#include "runtime/context_state.h"
#include "runtime/cpu_pressure.h"
#include "runtime/decision_log.h"
#include "runtime/durable_jobs.h"
#include "runtime/fiber_stack.h"
#include "runtime/fleet_costs.h"
#include "runtime/fleet_leases.h"
#include "runtime/job_record.h"
#include "runtime/outstanding.h"
#include "runtime/periodic_runs.h"
#include "runtime/periodic_state.h"
#include "runtime/state_keeper.h"
#include "runtime/submit_intake.h"
#include "runtime/timer.h"
#include "runtime/waiting.h"
#include "runtime/worker_pool.h"

namespace fairgate {

using internal::DeadlineMap;
using internal::Detached;
using internal::Invoke;
using internal::InvokeAdmitted;
using internal::InvokeDone;
using internal::JobRecord;
using internal::RecordList;
using internal::RecordPtr;
using internal::Signal;
using internal::Timer;

class Scheduler::Impl final : public internal::Submission {
 public:
  // `stalled_seconds`: adaptive capacity's signal (unused without it).
  // `keeper`: the store's side (null without a store).
  Impl(const SchedulerOptions& options, std::unique_ptr<core::AdmissionCore> core,
       std::function<StatusOr<double>()> stalled_seconds,
       std::unique_ptr<internal::StateKeeper> keeper)
      : options_(options),
        epoch_(std::chrono::steady_clock::now()),
        keeper_(std::move(keeper)),
        core_(std::move(core)),
        log_(options, *core_),
        background_(WithCancel(Context::Background())),
        pool_(options.worker_threads > 0 ? options.worker_threads : options.max_concurrency,
              options.fiber_stack_bytes) {
    if (keeper_) {
      // The keys' costs now; each type's estimates when it is registered.
      std::vector<SavedKey> restored_keys;
      {
        Locked lock(this);
        const double now = Now();
        const double wall = internal::WallNow();
        for (SavedKey& key : keeper_->TakeKeys()) {
          key.idle_since = now - (wall - key.idle_since);
          StatusOr<bool> restored = core_->RestoreKey(key, now);  // a bad row is skipped
          if (restored.ok() && *restored) restored_keys.push_back(std::move(key));
        }
      }
      if (keeper_->store().Shared()) {
        fleet_costs_ = std::make_unique<internal::FleetCosts>(*this, *keeper_);
        // Already the fleet's: shared again only what is charged here from now on.
        for (const SavedKey& key : restored_keys) {
          fleet_costs_->Restored(key.key, key.accumulated_cost);
        }
      }
      durable_ = std::make_unique<internal::DurableJobs>(*this, *keeper_);
      keeper_->StartFlusher(options_.state_flush_interval,
                            [this](double since) { return CollectLearned(since); });
      if (keeper_->store().Shared()) {
        const internal::Claimer::Settings settings{
            options_.lease_ttl.count(), options_.claim_interval.count(),
            static_cast<std::size_t>(options_.max_claimed > 0 ? options_.max_claimed
                                                              : options_.max_concurrency)};
        if (!options_.fleet_conflict_groups.empty() || !options_.fleet_type_caps.empty()) {
          fleet_ = std::make_unique<internal::FleetLeases>(*keeper_, options_);
        }
        claimer_ = std::make_unique<internal::Claimer>(
            *keeper_, settings, [this] { return durable_->ClaimableTypes(); },
            [this](std::vector<StoredJob> jobs) { durable_->QueueClaimed(std::move(jobs)); },
            [this] { fleet_costs_->Share(); });
        durable_->AttachFleet(claimer_.get(), fleet_.get());
        claimer_->StartThread();
      }
    }
    if (options_.adaptive_capacity) {
      capacity_ = std::make_unique<internal::CapacityController>(
          *this, *options_.adaptive_capacity, options_.max_concurrency, std::move(stalled_seconds));
    }
    timer_.Start();
  }

  ~Impl() {
    (void)Shutdown(Context::Background());  // with no deadline it returns once all is done
    if (claimer_) claimer_->Stop();         // every claimed job has finished or been released
    if (keeper_) keeper_->StopFlusher();    // Shutdown flushed last
    timer_.Stop();
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
          outstanding_.Finish();  // the last touch of the scheduler: it may be destroyed after
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
          outstanding_.Finish();
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
    outstanding_.Finish();
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
        outstanding_.Add();
        r->ctx_callback = ctx.state()->AddCallback([this, r] {
          Status err = r->ctx.Err();
          AbandonWaiting(r, err.ok() ? absl::CancelledError("context cancelled") : err);
          outstanding_.Finish();
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
                DoneCallback done, const JobOptions& options,
                std::uint64_t claimed_leases = 0) override {
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
    StatusOr<std::shared_ptr<internal::PeriodicState>> state =
        periodic_runs_.SubmitEvery(type, id, interval, std::move(fn), options);
    if (!state.ok()) return state.status();
    return PeriodicJob(*std::move(state));
  }

  // Submission (runtime/submission.h), for the services built on Submit.
  Status Open() const override {
    Locked lock(this);
    return phase_ == Phase::kOpen ? absl::OkStatus() : UnavailableLocked();
  }
  std::optional<TypeInfo> Type(std::string_view type) const override {
    Locked lock(this);
    const JobTypeConfig* config = core_->TypeConfig(type);
    if (config == nullptr) return std::nullopt;
    return TypeInfo{config->priority, core_->TypePaused(type)};
  }
  void WakeTimer() override { timer_.Wake(); }
  void ChangeCapacity(const std::function<int(int current, bool work_waiting)>& next) override {
    RecordList admitted;
    bool wake_timer = false;
    {
      Locked lock(this, admitted, wake_timer);
      const int current = core_->capacity();
      const int capacity = next(current, core_->pending_jobs() > 0);
      if (capacity != current) (void)core_->SetCapacity(capacity);
      if (capacity > current && phase_ != Phase::kShutDown) AdmitLocked(LockedNow(), admitted);
    }
    if (wake_timer) timer_.Wake();
    Dispatch(admitted);
  }
  void CountCapacitySignalFailed() override {
    Locked lock(this);
    log_.CapacitySignalFailed();
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
    }
    if (durable_) durable_->DropRetries();  // stored, with their backoff, for the next Recover
    background_.second();                   // running Submit jobs see their context done
    for (const RecordPtr& record : refused) Refuse(record);
    Status quiet = outstanding_.WaitQuiet(ctx);
    // The events of every decision made so far reach the observers. Outside the lock, as
    // DecisionLog::Flush must be: it waits for the delivery's thread, not for the scheduler.
    ABSL_TS_UNCHECKED_READ(log_).Flush();
    if (fleet_costs_) fleet_costs_->Share();  // what was charged since the last share
    if (keeper_) (void)keeper_->Flush();      // counted if it fails; Shutdown's status is the jobs'
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
    if (wake_timer) timer_.Wake();
    Dispatch(admitted);
    Status quiet = outstanding_.WaitQuiet(ctx);
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
    if (expired) timer_.Wake();
    return s;
  }

  void WriteMetrics(std::string& out) {
    Locked lock(this);
    const bool expired = AdvanceLocked(LockedNow());
    log_.WriteMetrics(out);
    lock.Release();
    if (keeper_) keeper_->WriteMetrics(out);
    if (expired) timer_.Wake();
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
    if (wake_timer) timer_.Wake();
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
    if (wake_timer) timer_.Wake();
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

  // Durable jobs (durable_jobs.h), only with a store.
  Status RegisterDurable(std::string_view type, DurableHandler handler, const RetryPolicy& retry) {
    if (!durable_) return NeedStore("RegisterDurable");
    return durable_->Register(type, std::move(handler), retry);
  }
  StatusOr<RecoveryReport> Recover() {
    if (!durable_) return NeedStore("Recover");
    return durable_->Recover();
  }
  StatusOr<std::uint64_t> SubmitDurable(std::string_view type, std::string_view id,
                                        std::string_view key, std::string_view payload) {
    if (!durable_) return NeedStore("SubmitDurable");
    return durable_->Submit(type, id, key, payload);
  }
  StatusOr<std::vector<StoredJob>> DeadJobs() {
    if (!durable_) return NeedStore("DeadJobs");
    return durable_->Dead();
  }

  Status FlushState() {
    if (Status s = NeedStore("FlushState"); !s.ok()) return s;
    return keeper_->Flush();
  }

 private:
  enum class Phase { kOpen, kDraining, kShutDown };

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
      outstanding_.Finish();
      return;
    }
    record->admitted_at = Now();
    InvokeAdmitted(*record, Scheduler::MakePermit(
                                std::make_unique<HeldPermit>(this, record, std::move(leases))));
  }

  // FleetCosts' side of the interface (submission.h).
  std::vector<KeyCost> KeyCosts() override {
    std::vector<KeyCost> costs;
    Locked lock(this);
    const double now = LockedNow();
    const double wall = internal::WallNow();
    for (SavedKey& key : core_->KeyCosts(now)) {
      costs.push_back({std::move(key.key), key.accumulated_cost, wall - (now - key.idle_since),
                       key.idle_since >= now});
    }
    return costs;
  }
  std::vector<bool> SetFleetCosts(
      const std::vector<SavedKey>& totals,
      const absl::flat_hash_map<std::string, double>& collected) override {
    std::vector<bool> applied(totals.size(), false);
    Locked lock(this);
    for (std::size_t i = 0; i < totals.size(); ++i) {
      const SavedKey& total = totals[i];
      std::optional<double> now_cost = core_->AccumulatedCost(total.key);
      auto at_collect = collected.find(total.key);
      if (!now_cost || at_collect == collected.end()) continue;  // forgotten meanwhile
      // Charged here since the collection: not in the total yet, kept on top of it.
      const double since = *now_cost - at_collect->second;
      (void)core_->SetAccumulatedCost(total.key, std::max(0.0, total.accumulated_cost + since));
      applied[i] = true;
    }
    return applied;
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
      // A shared store gets keys' costs as sums over the fleet (FleetCosts), not replaced.
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
    outstanding_.Add();
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
    if (wake_timer) timer_.Wake();
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
      outstanding_.Finish();
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
    outstanding_.Add();  // as Accept counts it: from here it is told exactly once
    entry->read = Now();
    if (intake_.Push(std::move(entry)) >= kIntakeLimit) {
      RecordList admitted;
      bool wake_timer = false;
      { Locked lock(this, admitted, wake_timer); }  // queues the intake, this job with it
      if (wake_timer) timer_.Wake();
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
      if (wake_timer) timer_.Wake();
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
      if (wake_timer) timer_.Wake();
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
        outstanding_.Finish();
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
      outstanding_.Finish();
    } else {
      record->fn = nullptr;  // release what the function holds before reporting
      InvokeDone(record->done, record->refusal);
      record->done = nullptr;
      outstanding_.Finish();
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
      outstanding_.Finish();  // `next`, still outstanding, keeps the scheduler alive
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
    if (wake_timer) timer_.Wake();
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
    outstanding_.Finish();
  }

  // Unregisters an Acquire's context callback; if it had not run, finishes its outstanding count
  // (a callback that has run finishes its own).
  void DetachContext(JobRecord& record) {
    if (record.ctx.state() && record.ctx.state()->RemoveCallback(record.ctx_callback)) {
      outstanding_.Finish();
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
      impl->outstanding_.Finish();  // the last touch: the scheduler may be destroyed after it
    }
    std::uint64_t FencingToken() const override {
      return leases_ && leases_->ctx ? leases_->ctx->FencingToken() : 0;
    }

   private:
    Impl* impl_;
    RecordPtr record_;
    std::unique_ptr<internal::FleetLeases::Held> leases_;
  };

  // What is due on the timer: ends the waits of Acquire jobs whose deadline has passed and of
  // jobs at their type's max_queue_wait, and queues the periodic runs due.
  void RunDue(Context::Clock::time_point now) {
    RecordList expired;
    RecordList reported;
    {
      Locked lock(this);
      for (auto it = deadlines_.begin(); it != deadlines_.end() && it->first <= now; ++it) {
        expired.push_back(it->second);
      }
      reported.swap(unreported_);
      if (phase_ != Phase::kShutDown) AdmitLocked(LockedNow(), reported);
    }
    Dispatch(reported);
    periodic_runs_.RunDue(now);
    if (durable_) durable_->RunDue(now);
    for (const RecordPtr& record : expired) {
      AbandonWaiting(record, absl::DeadlineExceededError("context deadline exceeded"));
    }
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

  // When the timer must run next (Timer's next_due, called with the timer's lock held): the next
  // sweep or adaptive-capacity interval, Acquire deadline, queue-wait limit, periodic run or
  // retry; at once when a snapshot left expiries to report.
  Timer::Clock::time_point TimerNextDue() {
    using Clock = Timer::Clock;
    Clock::time_point wake_at = std::min(next_sweep_, periodic_runs_.NextDue());
    if (capacity_) wake_at = std::min(wake_at, capacity_->NextDue());
    if (durable_) wake_at = std::min(wake_at, durable_->NextDue());
    Locked core_lock(this);
    if (!deadlines_.empty()) wake_at = std::min(wake_at, deadlines_.begin()->first);
    if (auto expiry = NextExpiryLocked()) wake_at = std::min(wake_at, *expiry);
    if (!unreported_.empty()) wake_at = Clock::now();
    return wake_at;
  }

  // What the timer runs when it wakes (Timer's run_due, on its thread): what is due, then
  // adaptive capacity's rule and the TTL sweep when their intervals have passed.
  void TimerRunDue(Timer::Clock::time_point now) {
    RunDue(now);
    if (capacity_) capacity_->Tick(now);
    if (now < next_sweep_) return;
    next_sweep_ = now + std::chrono::duration_cast<Timer::Clock::duration>(options_.sweep_interval);
    Locked core_lock(this);
    const double t = LockedNow();
    std::vector<std::pair<std::string, double>> evicted;
    const core::SweepResult swept = core_->Sweep(t, log_.wants_events() ? &evicted : nullptr);
    log_.Evicted(swept, evicted, t);
    log_.Post();
  }

  const SchedulerOptions options_;
  const std::chrono::steady_clock::time_point epoch_;
  // The store's side: loading, flushing, counting (null without a store). Before the core's
  // lock: the flusher it runs takes that lock.
  const std::unique_ptr<internal::StateKeeper> keeper_;
  // With a shared store: claims durable jobs and renews their leases (null otherwise). Stopped by
  // ~Impl after Shutdown; the callbacks it calls read the members below.
  std::unique_ptr<internal::Claimer> claimer_;
  // With a shared store: the keys' costs shared with the fleet (null otherwise).
  std::unique_ptr<internal::FleetCosts> fleet_costs_;
  // With a shared store and fleet-wide conflict groups or caps: the leases jobs take (null
  // otherwise).
  std::unique_ptr<internal::FleetLeases> fleet_;

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
  Phase phase_ ABSL_GUARDED_BY(mutex_) = Phase::kOpen;
  // Metrics, events and evidence of every decision, in decision order.
  mutable internal::DecisionLog log_ ABSL_GUARDED_BY(mutex_);

  // Accepted calls not yet fully reported (Shutdown and Drain wait for none).
  internal::OutstandingCount outstanding_;

  // The services built on Submit (runtime/submission.h). Durable jobs only with a store; made
  // before the claimer, which calls them.
  internal::PeriodicRuns periodic_runs_{*this, keeper_.get()};
  std::unique_ptr<internal::DurableJobs> durable_;
  std::unique_ptr<internal::CapacityController> capacity_;  // with adaptive capacity

  std::pair<Context, CancelFunc> background_;  // the context of Submit jobs
  internal::WorkerPool pool_;
  // The timer's own schedule (its thread's alone): the next TTL sweep.
  Timer::Clock::time_point next_sweep_ =
      Timer::Clock::now() +
      std::chrono::duration_cast<Timer::Clock::duration>(options_.sweep_interval);
  // Last: started once everything else exists, stopped first.
  Timer timer_{[this] { return TimerNextDue(); },
               [this](Timer::Clock::time_point now) { TimerRunDue(now); }};
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

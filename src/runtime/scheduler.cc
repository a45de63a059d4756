// A Scheduler: its construction, its queries and settings, Shutdown and Drain, the side of the
// Submission interface its services use, and the timer's glue. The calls are in calls.cc, acting
// on decisions in the Dispatcher (dispatcher.h), the lock and what it guards in admission_table.cc.
#include "fairgate/scheduler.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/admission_core.h"
#include "runtime/scheduler_impl.h"

namespace fairgate {

using internal::RecordList;
using internal::RecordPtr;

Scheduler::Impl::Impl(const SchedulerOptions& options, std::unique_ptr<core::AdmissionCore> core,
                      internal::CapacitySignals signals,
                      std::unique_ptr<internal::StateKeeper> keeper)
    : options_(options),
      keeper_(std::move(keeper)),
      table_(options, std::move(core), dispatcher_),
      background_(WithCancel(Context::Background())),
      pool_(options.runtime.worker_threads > 0 ? options.runtime.worker_threads
                                               : options.rule.max_concurrency,
            options.runtime.fiber_stack_bytes),
      next_sweep_(internal::Timer::Clock::now() +
                  std::chrono::duration_cast<internal::Timer::Clock::duration>(
                      options.runtime.sweep_interval)) {
  if (keeper_) {
    // The keys' costs now; each type's estimates when it is registered.
    std::vector<SavedKey> restored = table_.RestoreKeys(keeper_->TakeKeys(), internal::WallNow());
    writes_ = std::make_unique<internal::WriteRetries>(*keeper_);
    durable_ = std::make_unique<internal::DurableJobs>(*this, *keeper_, *writes_);
    keeper_->StartFlusher(options_.persistence.state_flush_interval, [this](double since) {
      return table_.Learned(since, keeper_->shared_store() != nullptr);
    });
    if (keeper_->shared_store() != nullptr) {
      fleet_costs_ = std::make_unique<internal::FleetCosts>(*this, *keeper_);
      // Already the fleet's: shared again only what is charged here from now on.
      for (const SavedKey& key : restored) fleet_costs_->Restored(key.key, key.accumulated_cost);
      if (!options_.fleet.conflict_groups.empty() || !options_.fleet.type_caps.empty()) {
        fleet_ = std::make_unique<internal::FleetLeases>(*keeper_, *writes_, options_);
      }
      // max_claimed fixes how many a replica holds; by default, from twice its slots to 64
      // times as many, as many as it can start soon (Claimer::Settings).
      const auto slots = static_cast<std::size_t>(options_.rule.max_concurrency);
      const auto fixed = static_cast<std::size_t>(options_.fleet.max_claimed);
      const internal::Claimer::Settings settings{
          options_.fleet.lease_ttl.count(), options_.fleet.claim_interval.count(),
          fixed > 0 ? fixed : 2 * slots, fixed > 0 ? fixed : 64 * slots};
      claimer_ = std::make_unique<internal::Claimer>(
          *keeper_, settings, [this] { return durable_->ClaimableTypes(); },
          [this](std::vector<StoredJob> jobs) { durable_->QueueClaimed(std::move(jobs)); },
          [this] { fleet_costs_->Share(); });
      durable_->AttachFleet(claimer_.get(), fleet_.get());
      // The fleet's rate limits: buckets in the store, taken from in leases on their own thread.
      fleet_rates_ = std::make_unique<internal::FleetRates>(
          *keeper_, options_.fleet.token_lease.count(), options_.fleet.claim_interval.count(),
          [this] { return table_.BucketsToLease(); },
          [this](const core::BucketName& bucket, const TokenLease& lease) {
            // Refused only for a lease the core cannot take (a count that is not a count): the
            // bucket keeps what it had and asks again when it runs out.
            (void)dispatcher_.Act(table_.GrantTokens(bucket, lease));
          });
      table_.LeaseRates([rates = fleet_rates_.get()] { rates->Wake(); });
      fleet_rates_->StartThread();
      claimer_->StartThread();
    }
  }
  if (options_.rule.adaptive_capacity) {
    capacity_ = std::make_unique<internal::CapacityController>(
        *this, *options_.rule.adaptive_capacity, options_.rule.max_concurrency, std::move(signals));
  }
  if (options_.rule.latency_capacity) {
    table_.KeepRunSamples();
    latency_ = std::make_unique<internal::LatencyController>(*this, *options_.rule.latency_capacity,
                                                             options_.rule.max_concurrency);
  }
  timer_.Start();
}

Scheduler::Impl::~Impl() {
  (void)Shutdown(Context::Background());      // with no deadline it returns once all is done
  if (durable_) durable_->StopWriters();      // the last marks and removals written
  if (claimer_) claimer_->Stop();             // every claimed job has finished or been released
  if (fleet_rates_) fleet_rates_->Stop();     // no job waits for a token any more
  if (writes_) writes_->Stop();               // the failed writes tried a last time
  if (keeper_) keeper_->StopFlusher();        // Shutdown flushed last
  if (durable_) durable_->EndExclusiveUse();  // another scheduler may work the stored jobs now
  timer_.Stop();
  // pool_ is destroyed after the timer (declared before it): it joins its threads.
}

Status Scheduler::Impl::RegisterType(std::string_view name, const JobTypeConfig& config) {
  StatusOr<bool> first =
      table_.RegisterType(name, config,
                          keeper_ ? std::function<std::vector<SavedEstimate>()>(
                                        [&] { return keeper_->TakeEstimates(name); })
                                  : nullptr);
  if (!first.ok()) return first.status();
  if (fleet_) fleet_->TypeRegistered(name, config);
  if (*first) {
    Warn(JobTypeWarnings(name, config, options_.rule.max_concurrency,
                         options_.rule.lending.has_value()));
    Warn(table_.NarrowWorkerWarnings("", name));
  }
  return absl::OkStatus();
}

void Scheduler::Impl::Warn(const std::vector<std::string>& warnings) const {
  for (const std::string& warning : warnings) {
    if (options_.runtime.warn) {
      options_.runtime.warn(warning);
    } else {
      std::fprintf(stderr, "fairgate: warning: %s\n", warning.c_str());
    }
  }
}

StatusOr<PeriodicJob> Scheduler::Impl::SubmitEvery(const JobName& job, Seconds interval, JobFn fn,
                                                   const PeriodicOptions& options) {
  StatusOr<std::shared_ptr<internal::PeriodicState>> state =
      periodic_runs_.SubmitEvery(job, interval, std::move(fn), options);
  if (!state.ok()) return state.status();
  return PeriodicJob(*std::move(state));
}

Status Scheduler::Impl::NeedStore(std::string_view what) const {
  return absl::FailedPreconditionError(absl::StrCat(
      absl::string_view(what.data(), what.size()),
      " needs a store: set PersistenceOptions::store (fairgate/sqlite_store.h opens one)"));
}

Status Scheduler::Impl::RegisterDurable(std::string_view type, DurableHandler handler,
                                        const RetryPolicy& retry) {
  if (!durable_) return NeedStore("RegisterDurable");
  return durable_->Register(type, std::move(handler), retry);
}

StatusOr<RecoveryReport> Scheduler::Impl::Recover() {
  if (!durable_) return NeedStore("Recover");
  return durable_->Recover();
}

StatusOr<std::uint64_t> Scheduler::Impl::SubmitDurable(const DurableSubmission& job) {
  if (!durable_) return NeedStore("SubmitDurable");
  return durable_->Submit(job);
}

StatusOr<std::vector<std::uint64_t>> Scheduler::Impl::SubmitDurableBatch(
    const std::vector<DurableSubmission>& jobs) {
  if (!durable_) return NeedStore("SubmitDurableBatch");
  return durable_->SubmitBatch(jobs);
}

StatusOr<std::vector<StoredJob>> Scheduler::Impl::DeadJobs() {
  if (!durable_) return NeedStore("DeadJobs");
  return durable_->Dead();
}

StatusOr<std::vector<StoredJob>> Scheduler::Impl::DeadJobs(std::uint64_t after, std::size_t limit) {
  if (!durable_) return NeedStore("DeadJobs");
  return durable_->Dead(after, limit);
}

Status Scheduler::Impl::RetryDeadJob(std::uint64_t sequence) {
  if (!durable_) return NeedStore("RetryDeadJob");
  return durable_->RetryDead(sequence);
}

Status Scheduler::Impl::RemoveDeadJob(std::uint64_t sequence) {
  if (!durable_) return NeedStore("RemoveDeadJob");
  return durable_->RemoveDead(sequence);
}

Status Scheduler::Impl::FlushState() {
  if (!keeper_) return NeedStore("FlushState");
  return keeper_->Flush();
}

Status Scheduler::Impl::Shutdown(const Context& ctx) {
  table_.StopAccepting();  // before the lock: Submits stop using the intake at once
  const RecordList refused = table_.ShutDown();
  if (durable_) durable_->DropRetries();  // stored, with their backoff, for the next Recover
  background_.second();                   // running Submit jobs see their context done
  for (const RecordPtr& record : refused) dispatcher_.Refuse(record);
  Status quiet = outstanding_.WaitQuiet(ctx);
  if (durable_) durable_->FlushRemovals();  // what succeeded is removed before Shutdown returns
  // The events of every decision made so far reach the observers (outside the lock: it waits for
  // the delivery's thread, not for the scheduler).
  table_.FlushLog();
  if (fleet_costs_) fleet_costs_->Share();  // what was charged since the last share
  if (keeper_) (void)keeper_->Flush();      // counted if it fails; Shutdown's status is the jobs'
  return quiet;
}

Status Scheduler::Impl::Drain(const Context& ctx) {
  table_.StopAccepting();  // before the lock, as in Shutdown
  dispatcher_.Act(table_.StartDrain());
  Status quiet = outstanding_.WaitQuiet(ctx);
  Status shut = Shutdown(ctx);
  return quiet.ok() ? shut : quiet;
}

// The timer reports the jobs a snapshot or the metrics found expired.
fairgate::Snapshot Scheduler::Impl::TakeSnapshot(std::size_t heaviest_keys) {
  return dispatcher_.Act(table_.TakeSnapshot(heaviest_keys));
}

void Scheduler::Impl::WriteMetrics(std::string& out) {
  const Decision decision = table_.WriteMetrics(out);
  if (keeper_) keeper_->WriteMetrics(out);
  if (fleet_rates_) fleet_rates_->WriteMetrics(out);
  dispatcher_.Act(decision);
}

Status Scheduler::Impl::SetKeyLimits(std::string_view key, const KeyLimits& limits) {
  return dispatcher_.Act(table_.SetKeyLimits(key, limits));
}

Status Scheduler::Impl::SetGroupLimits(std::string_view group, const GroupLimits& limits) {
  return dispatcher_.Act(table_.SetGroupLimits(group, limits));
}

Status Scheduler::Impl::SetWorker(std::string_view name, const WorkerConfig& config, bool update) {
  Status status = dispatcher_.Act(table_.SetWorker(name, config, update));
  if (!status.ok()) return status;
  if (claimer_) claimer_->Poke();  // stored jobs of the types it serves
  Warn(table_.NarrowWorkerWarnings(name, ""));
  return status;
}

Status Scheduler::Impl::RemoveWorker(std::string_view name) {
  return dispatcher_.Act(table_.RemoveWorker(name));
}

Status Scheduler::Impl::ChangePause(
    const std::function<Status(core::AdmissionCore&, double)>& change) {
  return dispatcher_.Act(table_.ChangePause(change));
}

Status Scheduler::Impl::PauseType(std::string_view type) {
  return ChangePause(
      [&](core::AdmissionCore& core, double now) { return core.PauseType(type, now); });
}

Status Scheduler::Impl::ResumeType(std::string_view type) {
  Status status = ChangePause(
      [&](core::AdmissionCore& core, double now) { return core.ResumeType(type, now); });
  if (status.ok() && claimer_) claimer_->Poke();  // its stored jobs may be claimed again
  return status;
}

Status Scheduler::Impl::PauseKey(std::string_view key) {
  return ChangePause(
      [&](core::AdmissionCore& core, double now) { return core.PauseKey(key, now); });
}

Status Scheduler::Impl::ResumeKey(std::string_view key) {
  return ChangePause(
      [&](core::AdmissionCore& core, double now) { return core.ResumeKey(key, now); });
}

void Scheduler::Impl::ChangeCapacity(const std::function<int(const CapacityInputs&)>& next) {
  dispatcher_.Act(table_.ChangeCapacity(next));
}

// Called with the timer's lock held: takes the table's lock (never the other way round).
internal::Timer::Clock::time_point Scheduler::Impl::TimerNextDue() {
  internal::Timer::Clock::time_point wake_at =
      std::min({next_sweep_, table_.NextDue(), periodic_runs_.NextDue(), alarms_.NextDue()});
  if (durable_) wake_at = std::min(wake_at, durable_->NextDue());
  if (capacity_) wake_at = std::min(wake_at, capacity_->NextDue());
  if (latency_) wake_at = std::min(wake_at, latency_->NextDue());
  return wake_at;
}

// What is due at `now`: Acquire waits and RunAsync calls whose context's deadline has passed
// end, jobs at their type's max_queue_wait are reported, periodic runs and retries are queued;
// then adaptive capacity's rule (or the latency rule) and the TTL sweep, when their intervals
// have passed.
void Scheduler::Impl::TimerRunDue(internal::Timer::Clock::time_point now) {
  dispatcher_.Act(table_.TakeDue(now));
  alarms_.RunDue(now);
  periodic_runs_.RunDue(now);
  if (durable_) durable_->RunDue(now);
  if (capacity_) capacity_->Tick(now);
  if (latency_) latency_->Tick(now);
  if (now < next_sweep_) return;
  next_sweep_ = now + std::chrono::duration_cast<internal::Timer::Clock::duration>(
                          options_.runtime.sweep_interval);
  table_.Sweep();
}

StatusOr<std::unique_ptr<Scheduler>> Scheduler::Create(const SchedulerOptions& options) {
  if (Status s = ValidateOptions(options); !s.ok()) return s;
  StatusOr<std::unique_ptr<core::AdmissionCore>> core = core::AdmissionCore::Create(options.rule);
  if (!core.ok()) return core.status();
  internal::CapacitySignals signals;
  if (options.rule.adaptive_capacity) {
    StatusOr<internal::CapacitySignals> readers =
        internal::CapacitySignalsOf(*options.rule.adaptive_capacity);
    if (!readers.ok()) return readers.status();
    signals = *std::move(readers);
  }
  StatusOr<std::unique_ptr<internal::StateKeeper>> keeper = internal::StateKeeper::Open(options);
  if (!keeper.ok()) return keeper.status();
  return std::unique_ptr<Scheduler>(new Scheduler(
      std::make_unique<Impl>(options, *std::move(core), std::move(signals), *std::move(keeper))));
}

Scheduler::Scheduler(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Scheduler::~Scheduler() = default;

Status Scheduler::RegisterType(std::string_view name, const JobTypeConfig& config) {
  return impl_->RegisterType(name, config);
}

Status Scheduler::RunSync(const Context& ctx, const JobName& job, const JobFn& fn,
                          const JobOptions& options) {
  return impl_->RunSync(ctx, job.type, job.id, job.fairness_key, fn, options);
}

Status Scheduler::RunAsync(const Context& ctx, const JobName& job, JobFn fn, DoneCallback done,
                           const JobOptions& options) {
  return impl_->RunAsync(ctx, job.type, job.id, job.fairness_key, std::move(fn), std::move(done),
                         options);
}

Status Scheduler::Acquire(const Context& ctx, const JobName& job, PermitCallback on_admitted,
                          const JobOptions& options) {
  return impl_->Acquire(ctx, job.type, job.id, job.fairness_key, std::move(on_admitted), options);
}

StatusOr<Permit> Scheduler::TryAcquire(const JobName& job, const JobOptions& options) {
  return impl_->TryAcquire(job.type, job.id, job.fairness_key, options);
}

Status Scheduler::Submit(const JobName& job, JobFn fn, DoneCallback done,
                         const JobOptions& options) {
  return impl_->SubmitFromCaller(job.type, job.id, job.fairness_key, std::move(fn), std::move(done),
                                 options);
}

StatusOr<PeriodicJob> Scheduler::SubmitEvery(const JobName& job, Seconds interval, JobFn fn,
                                             const PeriodicOptions& options) {
  return impl_->SubmitEvery(job, interval, std::move(fn), options);
}

Status Scheduler::RegisterDurable(std::string_view type, DurableHandler handler,
                                  const RetryPolicy& retry) {
  return impl_->RegisterDurable(type, std::move(handler), retry);
}

StatusOr<RecoveryReport> Scheduler::Recover() { return impl_->Recover(); }

StatusOr<std::uint64_t> Scheduler::SubmitDurable(const JobName& job, std::string_view payload) {
  return impl_->SubmitDurable({job, payload});
}

StatusOr<std::vector<std::uint64_t>> Scheduler::SubmitDurableBatch(
    const std::vector<DurableSubmission>& jobs) {
  return impl_->SubmitDurableBatch(jobs);
}

StatusOr<std::vector<StoredJob>> Scheduler::DeadJobs() { return impl_->DeadJobs(); }
StatusOr<std::vector<StoredJob>> Scheduler::DeadJobs(std::uint64_t after, std::size_t limit) {
  return impl_->DeadJobs(after, limit);
}

Status Scheduler::RetryDeadJob(std::uint64_t sequence) { return impl_->RetryDeadJob(sequence); }

Status Scheduler::RemoveDeadJob(std::uint64_t sequence) { return impl_->RemoveDeadJob(sequence); }

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

std::optional<double> Scheduler::Estimate(TypeName type, JobId id) const {
  return impl_->Estimate(type.value, id.value);
}

Status Scheduler::SetKeyWeight(std::string_view fairness_key, double weight) {
  return impl_->SetKeyWeight(fairness_key, weight);
}

Status Scheduler::SetKeyGroup(std::string_view fairness_key, std::string_view group) {
  return impl_->SetKeyGroup(fairness_key, group);
}

Status Scheduler::SetGroupWeight(std::string_view group, double weight) {
  return impl_->SetGroupWeight(group, weight);
}

Status Scheduler::SetGroupLimits(std::string_view group, const GroupLimits& limits) {
  return impl_->SetGroupLimits(group, limits);
}

std::optional<double> Scheduler::GroupAccumulatedCost(std::string_view group) const {
  return impl_->GroupAccumulatedCost(group);
}

Status Scheduler::Charge(std::string_view fairness_key, double cost) {
  return impl_->Charge(fairness_key, cost);
}

Status Scheduler::SetKeyLimits(std::string_view fairness_key, const KeyLimits& limits) {
  return impl_->SetKeyLimits(fairness_key, limits);
}

Status Scheduler::PauseType(std::string_view type) { return impl_->PauseType(type); }

Status Scheduler::AddWorker(std::string_view name, const WorkerConfig& config) {
  return impl_->SetWorker(name, config, /*update=*/false);
}

Status Scheduler::UpdateWorker(std::string_view name, const WorkerConfig& config) {
  return impl_->SetWorker(name, config, /*update=*/true);
}

Status Scheduler::RemoveWorker(std::string_view name) { return impl_->RemoveWorker(name); }

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

// Scheduler::Impl: what a Scheduler is made of. Internal to src/runtime; the declaration is the
// map, the bodies live by layer:
//
//   scheduler.cc  construction, the queries and settings, Shutdown and Drain, and the side of
//                 the Submission interface the services use (durable jobs, periodic runs, the
//                 fleet's costs, adaptive capacity, the timer)
//   calls.cc      the calls: RunSync, RunAsync, Submit (through the intake or not), Acquire,
//                 TryAcquire
//
// What a decision admitted or refused is started and reported by the Dispatcher (dispatcher.h),
// outside the lock.
//
// The lock and everything it guards belong to the AdmissionTable (admission_table.h): nothing
// here holds it. src/runtime/README.md has the picture of who owns what.
#ifndef FAIRGATE_RUNTIME_SCHEDULER_IMPL_H_
#define FAIRGATE_RUNTIME_SCHEDULER_IMPL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/admission_core.h"
#include "fairgate/scheduler.h"
#include "runtime/admission_table.h"
#include "runtime/alarms.h"
#include "runtime/capacity_controller.h"
#include "runtime/claimer.h"
#include "runtime/dispatcher.h"
#include "runtime/durable_jobs.h"
#include "runtime/fleet_costs.h"
#include "runtime/fleet_leases.h"
#include "runtime/fleet_rates.h"
#include "runtime/job_record.h"
#include "runtime/latency_controller.h"
#include "runtime/outstanding.h"
#include "runtime/periodic_runs.h"
#include "runtime/state_keeper.h"
#include "runtime/submission.h"
#include "runtime/timer.h"
#include "runtime/worker_pool.h"
#include "runtime/write_retries.h"

namespace fairgate {

// Hidden in the shared library, although nested in the exported Scheduler: internal.
class __attribute__((visibility("hidden"))) Scheduler::Impl final : public internal::Submission {
 public:
  using Decision = internal::Decision;
  using RecordPtr = internal::RecordPtr;
  using RecordList = internal::RecordList;

  // `signals`: adaptive capacity's readers (unused without it).
  // `keeper`: the store's side (null without a store).
  Impl(const SchedulerOptions& options, std::unique_ptr<core::AdmissionCore> core,
       internal::CapacitySignals signals, std::unique_ptr<internal::StateKeeper> keeper);
  ~Impl() override;

  // --- scheduler.cc: the Scheduler's methods but the calls.
  Status RegisterType(std::string_view name, const JobTypeConfig& config);
  StatusOr<PeriodicJob> SubmitEvery(const JobName& job, Seconds interval, JobFn fn,
                                    const PeriodicOptions& options);
  Status RegisterDurable(std::string_view type, DurableHandler handler, const RetryPolicy& retry);
  StatusOr<RecoveryReport> Recover();
  StatusOr<std::uint64_t> SubmitDurable(const DurableSubmission& job);
  StatusOr<std::vector<std::uint64_t>> SubmitDurableBatch(
      const std::vector<DurableSubmission>& jobs);
  StatusOr<std::vector<StoredJob>> DeadJobs();
  StatusOr<std::vector<StoredJob>> DeadJobs(std::uint64_t after, std::size_t limit);
  Status RetryDeadJob(std::uint64_t sequence);
  Status RemoveDeadJob(std::uint64_t sequence);
  Status FlushState();
  Status Shutdown(const Context& ctx);
  Status Drain(const Context& ctx);
  fairgate::Snapshot TakeSnapshot(std::size_t heaviest_keys);
  void WriteMetrics(std::string& out);
  Status SetKeyWeight(std::string_view key, double weight) {
    return table_.SetKeyWeight(key, weight);
  }
  Status SetKeyGroup(std::string_view key, std::string_view group) {
    return table_.SetKeyGroup(key, group);
  }
  Status SetGroupWeight(std::string_view group, double weight) {
    return table_.SetGroupWeight(group, weight);
  }
  Status SetGroupLimits(std::string_view group, const GroupLimits& limits);
  std::optional<double> GroupAccumulatedCost(std::string_view group) const {
    return table_.GroupAccumulatedCost(group);
  }
  Status Charge(std::string_view key, double cost) { return table_.Charge(key, cost); }
  Status SetKeyLimits(std::string_view key, const KeyLimits& limits);
  Status SetWorker(std::string_view name, const WorkerConfig& config, bool update);
  Status RemoveWorker(std::string_view name);
  Status PauseType(std::string_view type);
  Status ResumeType(std::string_view type);
  Status PauseKey(std::string_view key);
  Status ResumeKey(std::string_view key);
  StatusOr<double> MaxWaitToCeiling(std::string_view type) const {
    return table_.MaxWaitToCeiling(type);
  }
  std::optional<double> AccumulatedCost(std::string_view key) const {
    return table_.AccumulatedCost(key);
  }
  std::optional<double> Estimate(std::string_view type, std::string_view id) const {
    return table_.Estimate(type, id);
  }

  // Submission (submission.h): the services' side.
  Status Submit(std::string_view type, std::string_view id, std::string_view key, JobFn fn,
                DoneCallback done, const JobOptions& options,
                const ServiceJob& service = {}) override;  // calls.cc
  Status Open() const override { return table_.Open(); }
  std::optional<TypeInfo> Type(std::string_view type) const override { return table_.Type(type); }
  void WakeTimer() override { timer_.Wake(); }
  void ChangeCapacity(const std::function<int(const CapacityInputs&)>& next) override;
  void CountCapacitySignalFailed() override { table_.CountCapacitySignalFailed(); }
  std::vector<KeyCost> KeyCosts(CostsOf of) override { return table_.KeyCosts(of); }
  std::vector<bool> SetFleetCosts(
      CostsOf of, const std::vector<SavedKey>& totals,
      const absl::flat_hash_map<std::string, double>& collected) override {
    return table_.SetFleetCosts(of, totals, collected);
  }

  // --- calls.cc.
  Status RunSync(const Context& ctx, std::string_view type, std::string_view id,
                 std::string_view key, const JobFn& fn, const JobOptions& options);
  Status RunAsync(const Context& ctx, std::string_view type, std::string_view id,
                  std::string_view key, JobFn fn, DoneCallback done, const JobOptions& options);
  Status Acquire(const Context& ctx, std::string_view type, std::string_view id,
                 std::string_view key, PermitCallback on_admitted, const JobOptions& options);
  StatusOr<Permit> TryAcquire(std::string_view type, std::string_view id, std::string_view key,
                              const JobOptions& options);
  // Scheduler::Submit: through the Submit intake when the table can judge the request without
  // the core (IntakeAccepts), else as Submit. Internal callers use Submit: they act on its
  // refusals.
  // A Submit with JobOptions::requeue_on_worker_loss, as SubmitRequeued takes it.
  struct Requeued {
    std::string type, id, key;
    JobFn fn;
    DoneCallback done;
    JobOptions options;
  };
  Status SubmitRequeued(const std::shared_ptr<Requeued>& job);
  Status SubmitFromCaller(std::string_view type, std::string_view id, std::string_view key,
                          JobFn fn, DoneCallback done, const JobOptions& options);

 private:
  // --- calls.cc.
  // Makes the call's record, of the kind `Kind` (a JobRecord::Call alternative), with its names
  // and whether it takes fleet-wide leases; `fill` sets its kind's part (and may say otherwise
  // of the leases). Counts it outstanding and queues its job; acts on what that decided. With
  // `admitted_at_once`, a RunSync's: set when this call admitted the job itself, which is then
  // not signalled (its caller learns it here). With `at_once_only` (TryAcquire), a job this call
  // does not admit is withdrawn under the same hold of the lock: ResourceExhausted, no record.
  template <typename Kind, typename Fill>
  StatusOr<RecordPtr> Accept(const core::EnqueueRequest& request, Fill fill,
                             bool* admitted_at_once = nullptr, bool at_once_only = false);
  // Runs an admitted RunSync's function (its worker's and its fleet-wide leases' context made
  // from ctx) and completes its job; returns the function's status, or the worker's loss.
  Status RunAdmitted(internal::JobRecord& record, const Context& ctx, const JobFn& fn);
  // What a RunAsync does once signalled (DetachedRunSync): what RunSync does after its wait, its
  // run posted to the pool; then `done`, and the call is finished (FinishRunAsync).
  void ResumeRunAsync(const RecordPtr& record);
  // ResumeRunAsync as DetachedRunSync::resume: `impl` is the Impl.
  static void ResumeRunAsyncOf(void* impl, const RecordPtr& record) {
    static_cast<Impl*>(impl)->ResumeRunAsync(record);
  }
  void FinishRunAsync(internal::DetachedRunSync& detached, const Status& status);
  // Submit through the intake: the job is queued in the core by whoever takes the lock next, or
  // by this call: when the intake is long, or when the job could be admitted now.
  void SubmitThroughIntake(std::string_view type, std::string_view id, std::string_view key,
                           JobFn fn, DoneCallback done, const JobOptions& options);
  // Whether a job of `type` takes fleet-wide leases (JobRecord::takes_fleet_leases).
  bool TakesFleetLeases(std::string_view type) const { return fleet_ && fleet_->Needed(type); }

  // --- scheduler.cc.
  Status NeedStore(std::string_view what) const;
  // Hands each sentence to RuntimeOptions::warn (stderr by default).
  void Warn(const std::vector<std::string>& warnings) const;
  Status ChangePause(const std::function<Status(core::AdmissionCore&, double)>& change);
  // The timer's two sides (timer.h): when it must run next, and what it runs then.
  internal::Timer::Clock::time_point TimerNextDue();
  void TimerRunDue(internal::Timer::Clock::time_point now);
  double Now() const { return table_.Now(); }

  const SchedulerOptions options_;
  // The store's side (null without a store): loading, flushing, counting.
  const std::unique_ptr<internal::StateKeeper> keeper_;
  // The lock and what it guards; decisions.
  internal::AdmissionTable table_;
  // Accepted calls not yet fully reported (Shutdown and Drain wait for none).
  internal::OutstandingCount outstanding_;

  // The services built on Submit (submission.h). Those of a store are made by the constructor
  // with it, the claimer last (it calls the others).
  internal::PeriodicRuns periodic_runs_{*this, keeper_.get()};
  std::unique_ptr<internal::WriteRetries> writes_;          // with a store
  std::unique_ptr<internal::DurableJobs> durable_;          // with a store
  std::unique_ptr<internal::FleetCosts> fleet_costs_;       // with a shared store
  std::unique_ptr<internal::FleetLeases> fleet_;            // with fleet-wide groups or caps
  std::unique_ptr<internal::Claimer> claimer_;              // with a shared store
  std::unique_ptr<internal::FleetRates> fleet_rates_;       // with a shared store
  std::unique_ptr<internal::CapacityController> capacity_;  // with adaptive capacity
  std::unique_ptr<internal::LatencyController> latency_;    // with the latency rule

  std::pair<Context, CancelFunc> background_;  // the context of Submit jobs
  // Starts and reports what decisions admitted or refused; the table's owner. Before the pool,
  // whose fibers call it until the pool is gone.
  internal::Dispatcher dispatcher_{
      table_, pool_, outstanding_, timer_, fleet_, background_.first, &Scheduler::MakePermit};
  internal::WorkerPool pool_;
  // The timer's own schedule (its thread's alone): the next TTL sweep.
  internal::Timer::Clock::time_point next_sweep_;
  // RunAsync calls' context deadlines, which the timer runs as their cancellations.
  internal::Alarms alarms_;
  // Last: started once everything else exists, stopped first.
  internal::Timer timer_{[this] { return TimerNextDue(); },
                         [this](internal::Timer::Clock::time_point now) { TimerRunDue(now); }};
};

}  // namespace fairgate

#endif  // FAIRGATE_RUNTIME_SCHEDULER_IMPL_H_

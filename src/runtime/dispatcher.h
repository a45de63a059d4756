// Dispatcher: acts on the admission table's decisions, outside its lock. It starts the jobs a
// decision admitted (a RunSync caller woken, a Submit job run on the pool, an Acquire's permit
// delivered, after its fleet-wide leases when its type takes them), reports those it refused,
// and completes jobs, which makes the next decisions. Internal to src/runtime.
//
// Every accepted call reaches its caller through here exactly once (JobRecord's states say
// which path); each report finishes the call's outstanding count, the last touch of the
// scheduler by that call.
//
// Thread safety: every method may be called from any thread or fiber at once; nothing here
// holds a lock across a call into user code.
#ifndef FAIRGATE_RUNTIME_DISPATCHER_H_
#define FAIRGATE_RUNTIME_DISPATCHER_H_

#include <memory>
#include <vector>

#include "fairgate/context.h"
#include "fairgate/permit.h"
#include "fairgate/status.h"
#include "runtime/admission_table.h"
#include "runtime/fleet_leases.h"
#include "runtime/job_record.h"
#include "runtime/outstanding.h"
#include "runtime/timer.h"
#include "runtime/worker_pool.h"

namespace fairgate::internal {

class Dispatcher final : public AdmissionTable::Owner {
 public:
  // How a held job becomes the caller's Permit (Scheduler's, which alone may make one).
  using MakePermit = Permit (*)(std::unique_ptr<HeldJob> job);

  // All by reference, owned by the scheduler, which outlives every job it dispatches. `fleet`
  // is null without fleet-wide groups or caps; `background` is the context of Submit jobs.
  Dispatcher(AdmissionTable& table, WorkerPool& pool, OutstandingCount& outstanding, Timer& timer,
             const std::unique_ptr<FleetLeases>& fleet, const Context& background,
             MakePermit make_permit)
      : table_(table),
        pool_(pool),
        outstanding_(outstanding),
        timer_(timer),
        fleet_(fleet),
        background_(background),
        make_permit_(make_permit) {}
  Dispatcher(const Dispatcher&) = delete;
  Dispatcher& operator=(const Dispatcher&) = delete;

  // Takes the fleet-wide leases an admitted job needs (JobRecord::takes_fleet_leases; none
  // without), by its names, waiting under `ctx` while they are held elsewhere: a Submit job's
  // runner and a RunSync caller, before the job runs. Inline: every RunSync asks.
  Status EnterFleet(const JobRecord& record, const Context& ctx, FleetLeases::Held& leases)
      ABSL_LOCKS_EXCLUDED(core_lock) {
    if (!record.takes_fleet_leases) return absl::OkStatus();
    const JobName name = record.name.view();
    return fleet_->Enter(name.type, name.id, ctx, leases);
  }

  // The one way a decision is acted on, in the order Decision lists: wake the timer if asked,
  // tell the calls that joined a run that ended, cancel the contexts of the jobs lost with their
  // worker, start the admitted jobs and report the refused ones (in decision order), and take
  // the Acquires whose deadline passed out of the queue.
  void Act(const Decision& decision) ABSL_LOCKS_EXCLUDED(core_lock) {
    if (decision.wake_timer) timer_.Wake();
    if (!decision.joiners.empty()) TellJoiners(decision.joiners);
    for (const RecordPtr& record : decision.lost) record->worker->CancelContext();
    Dispatch(decision.admitted);
    if (!decision.deadline_passed.empty()) AbandonAtDeadline(decision.deadline_passed);
  }
  // Acts on a deciding method's decision and hands back its answer:
  // `return dispatcher_.Act(table_.SetKeyLimits(key, limits));`.
  template <typename Answer>
  Answer Act(Decided<Answer> decided) ABSL_LOCKS_EXCLUDED(core_lock) {
    Act(decided.decision);
    return std::move(decided.answer);
  }
  // Tells a job that left the queue without running why (its refusal), exactly once.
  void Refuse(const RecordPtr& record) ABSL_LOCKS_EXCLUDED(core_lock);
  // Completes a job that ran from `start` to `end` and acts on what that admits. With
  // `keep_background`, the first admitted Submit job is returned instead of posted, for the
  // caller to run.
  RecordPtr Complete(JobRecord& record, double start, double end, const Status& status,
                     bool keep_background = false) ABSL_LOCKS_EXCLUDED(core_lock);
  // Completes a held permit's job that did none of its work (Permit::ReleaseUnused), at `end`,
  // and acts on what that admits.
  void CompleteUnused(JobRecord& record, double end, const Status& status)
      ABSL_LOCKS_EXCLUDED(core_lock);
  // An Acquire that leaves the queue without a permit: uncharged, told once.
  void AbandonWaiting(const RecordPtr& record, const Status& why) ABSL_LOCKS_EXCLUDED(core_lock);
  // Unregisters an Acquire's context callback; if it had not run, finishes its outstanding count.
  void DetachContext(JobRecord& record) ABSL_LOCKS_EXCLUDED(core_lock);

  // AdmissionTable::Owner.
  void ServeIntake() override;
  void HandOff(Decision decision) override;

 private:
  class HeldPermit;

  void Dispatch(const RecordList& admitted) ABSL_LOCKS_EXCLUDED(core_lock);
  // Tells a Submit call `status` (its run's, or why it did not run) and finishes it, once.
  void Report(SubmitCall& call, const Status& status) ABSL_LOCKS_EXCLUDED(core_lock);
  // Tells the calls that joined a run that ended its status.
  void TellJoiners(const std::vector<RecordPtr>& joiners) ABSL_LOCKS_EXCLUDED(core_lock);
  // Acquires whose context's deadline passed while they waited: each leaves the queue, told
  // DeadlineExceeded (AbandonWaiting), unless it was admitted meanwhile.
  void AbandonAtDeadline(const RecordList& records) ABSL_LOCKS_EXCLUDED(core_lock);
  // Runs a Submit job on a pool fiber, and the Submit jobs its completion admits after it.
  void RunBackground(RecordPtr record) ABSL_LOCKS_EXCLUDED(core_lock);
  // An admitted Acquire whose type takes fleet-wide leases: takes them on a pool fiber, then
  // delivers a permit that holds them.
  void AdmitWithLeases(const RecordPtr& record) ABSL_LOCKS_EXCLUDED(core_lock);

  AdmissionTable& table_;
  WorkerPool& pool_;
  OutstandingCount& outstanding_;
  Timer& timer_;
  const std::unique_ptr<FleetLeases>& fleet_;
  const Context& background_;
  const MakePermit make_permit_;
};

}  // namespace fairgate::internal

#endif  // FAIRGATE_RUNTIME_DISPATCHER_H_

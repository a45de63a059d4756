#include "runtime/dispatcher.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "fairgate/scheduler.h"
#include "runtime/context_state.h"

namespace fairgate::internal {

// The scheduler's side of a Permit: releasing it gives back its fleet-wide leases, if any, and
// completes the job. Its context is made at admission: one with the leases' fencing token, of
// no parent (the leases' own is a child of the Acquire's wait, which ends before the permit
// does), and on a worker one that the worker's removal cancels (WorkerAssignment::Enter).
class Dispatcher::HeldPermit : public HeldJob {
 public:
  HeldPermit(Dispatcher* dispatcher, RecordPtr record,
             std::unique_ptr<FleetLeases::Held> leases = nullptr)
      : dispatcher_(dispatcher),
        record_(std::move(record)),
        leases_(std::move(leases)),
        context_(leases_ && leases_->ctx
                     ? WithFencingToken(Context::Background(), leases_->ctx->FencingToken())
                     : Context::Background()) {
    if (record_->worker) context_ = record_->worker->Enter(context_);
  }
  void Release(const Status& status, bool used) override {
    Dispatcher* dispatcher = dispatcher_;
    const double end = dispatcher->table_.Now();
    if (leases_) dispatcher->fleet_->Leave(*leases_);
    if (used) {
      (void)dispatcher->Complete(*record_, record_->admitted_at, end, status);
    } else {
      dispatcher->CompleteUnused(*record_, end, status);
    }
    record_ = nullptr;
    dispatcher->outstanding_.Finish();  // the last touch: the scheduler may be destroyed after it
  }
  std::uint64_t FencingToken() const override {
    return leases_ && leases_->ctx ? leases_->ctx->FencingToken() : 0;
  }
  std::string_view Worker() const override {
    return record_ && record_->worker ? std::string_view(record_->worker->worker())
                                      : std::string_view();
  }
  const Context& JobContext() const override { return context_; }

 private:
  Dispatcher* dispatcher_;
  RecordPtr record_;
  std::unique_ptr<FleetLeases::Held> leases_;
  Context context_;
};

void Dispatcher::Dispatch(const RecordList& admitted) {
  for (const RecordPtr& record : admitted) {
    if (!record->refusal.ok()) {
      Refuse(record);
      continue;
    }
    switch (record->kind()) {
      case JobRecord::Kind::kRunSync:  // its caller runs it
        Signal(*record, /*decided=*/true);
        break;
      case JobRecord::Kind::kSubmit:
        pool_.Post([this, record] { RunBackground(record); });
        break;
      case JobRecord::Kind::kAcquire:
        if (record->takes_fleet_leases) {
          pool_.Post([this, record] { AdmitWithLeases(record); });
        } else {
          DetachContext(*record);
          InvokeAdmitted(*record, make_permit_(std::make_unique<HeldPermit>(this, record)));
        }
        break;
    }
  }
}

void Dispatcher::ServeIntake() {
  while (std::optional<Decision> decision = table_.TryTakeIntake()) Act(*decision);
}

// On a pool fiber, serving the intake there too. Inline only when the pool is closing (the
// scheduler is being destroyed: no call of it is left to need the timer's lock).
void Dispatcher::HandOff(Decision decision) {
  auto follow = [this, decision = std::move(decision)] {
    ServeIntake();
    Act(decision);
  };
  if (!pool_.Post(follow)) follow();
}

void Dispatcher::Refuse(const RecordPtr& record) {
  switch (record->kind()) {
    case JobRecord::Kind::kRunSync:
      Signal(*record, /*decided=*/true);  // the caller returns the refusal, then finishes
      break;
    case JobRecord::Kind::kSubmit:
      Report(record->submit(), record->refusal);
      break;
    case JobRecord::Kind::kAcquire:
      DetachContext(*record);
      InvokeAdmitted(*record, record->refusal);
      outstanding_.Finish();
      break;
  }
}

void Dispatcher::Report(SubmitCall& call, const Status& status) {
  call.fn = nullptr;  // release what the function holds before reporting
  InvokeDone(call.done, status);
  call.done = nullptr;
  outstanding_.Finish();
}

void Dispatcher::TellJoiners(const std::vector<RecordPtr>& joiners) {
  for (const RecordPtr& joiner : joiners) {
    if (joiner->kind() == JobRecord::Kind::kRunSync) {
      Signal(*joiner, /*decided=*/true);  // the caller returns the result, then finishes
    } else {
      Report(joiner->submit(), joiner->result);  // an Acquire never joins
    }
  }
}

// When its completion admits another Submit job, this fiber runs that one next instead of posting
// it: the slot it frees goes to a job on the same thread, with no wake-up of another worker. Such
// a chain yields to its thread's other fibers (tasks it took from the pool, RunSync callers woken
// there, its worker's search for work) once it has run for kChainBudget since it last did: a
// chain never holds a thread longer.
void Dispatcher::RunBackground(RecordPtr record) {
  double slice_start = table_.Now();
  while (record) {
    SubmitCall& call = record->submit();
    FleetLeases::Held leases;
    Status status;
    if (call.claimed_leases != 0) {
      leases.ctx = WithFencingToken(background_, call.claimed_leases);
    } else {
      status = EnterFleet(*record, background_, leases);
    }
    const double start = table_.Now();  // a wait for fleet-wide leases is not part of the run
    if (status.ok()) {
      const Context& base = leases.ctx ? *leases.ctx : background_;
      status =
          record->worker ? Invoke(call.fn, record->worker->Enter(base)) : Invoke(call.fn, base);
    }
    if (record->worker) {
      if (std::optional<Status> lost = record->worker->Lost()) status = *std::move(lost);
    }
    if (fleet_) fleet_->Leave(leases);
    const double end = table_.Now();
    RecordPtr next = Complete(*record, start, end, status, /*keep_background=*/true);
    Report(call, status);  // `next`, still outstanding, keeps the scheduler alive
    record = std::move(next);
    if (record && end - slice_start >= kChainBudget.count()) {
      YieldToOthers();
      slice_start = table_.Now();
    }
  }
}

RecordPtr Dispatcher::Complete(JobRecord& record, double start, double end, const Status& status,
                               bool keep_background) {
  Decision decision =
      table_.Complete(record, std::max(0.0, end - start), end, status,
                      record.RunMeasured() ? RunEnd::kMeasured : RunEnd::kUnmeasured);
  RecordPtr kept;
  if (keep_background) {
    RecordList& admitted = decision.admitted;
    auto it = std::find_if(admitted.begin(), admitted.end(), [](const RecordPtr& r) {
      return r->kind() == JobRecord::Kind::kSubmit && r->refusal.ok();
    });
    if (it != admitted.end()) {
      kept = std::move(*it);
      admitted.erase(it);
    }
  }
  Act(decision);
  return kept;
}

void Dispatcher::CompleteUnused(JobRecord& record, double end, const Status& status) {
  Act(table_.Complete(record, std::max(0.0, end - record.admitted_at), end, status,
                      RunEnd::kUnused));
}

void Dispatcher::AbandonAtDeadline(const RecordList& records) {
  for (const RecordPtr& record : records) {
    AbandonWaiting(record, absl::DeadlineExceededError("context deadline exceeded"));
  }
}

void Dispatcher::AbandonWaiting(const RecordPtr& record, const Status& why) {
  if (!table_.Abandon(record, why)) return;
  DetachContext(*record);
  InvokeAdmitted(*record, why);
  outstanding_.Finish();
}

void Dispatcher::DetachContext(JobRecord& record) {
  AcquireCall& call = record.acquire();
  if (call.ctx.state() && call.ctx.state()->RemoveCallback(call.ctx_callback)) {
    outstanding_.Finish();
  }
}

// Takes the leases on a pool fiber (blocking store calls, never on the thread that admitted it),
// then delivers a permit that holds them until it is released. While they are held elsewhere it
// waits, until the Acquire's context ends or Shutdown begins; then, or when the store fails, the
// job completes with that status (as a Submit job's lease wait would) and the callback gets it.
// The hold, and so the observed cost, begins with the permit.
void Dispatcher::AdmitWithLeases(const RecordPtr& record) {
  auto leases = std::make_unique<FleetLeases::Held>();
  auto [ctx, cancel] = WithCancel(record->acquire().ctx);
  const std::shared_ptr<ContextState>& shutdown = background_.state();
  const std::uint64_t on_shutdown = shutdown->AddCallback(cancel);
  const JobName name = record->name.view();
  Status status = fleet_->Enter(name.type, name.id, ctx, *leases);
  shutdown->RemoveCallback(on_shutdown);
  cancel();
  DetachContext(*record);
  if (!status.ok()) {
    fleet_->Leave(*leases);
    const double now = table_.Now();
    (void)Complete(*record, now, now, status);
    InvokeAdmitted(*record, status);
    outstanding_.Finish();
    return;
  }
  record->admitted_at = table_.Now();
  InvokeAdmitted(*record,
                 make_permit_(std::make_unique<HeldPermit>(this, record, std::move(leases))));
}

}  // namespace fairgate::internal

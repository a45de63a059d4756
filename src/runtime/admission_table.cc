#include "runtime/admission_table.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "core/join_points.h"

namespace fairgate::internal {

AdmissionTable::AdmissionTable(const SchedulerOptions& options,
                               std::unique_ptr<core::AdmissionCore> core, Owner& owner)
    : options_(options),
      epoch_(std::chrono::steady_clock::now()),
      owner_(owner),
      intake_open_(options.rule.max_pending_total == RuleOptions::kUnlimited &&
                   options.rule.max_pending_per_key == RuleOptions::kUnlimited),
      core_(std::move(core)),
      log_(options, *core_) {}

// --- The lock.

void AdmissionTable::Locked::Release() {
  if (table_ == nullptr) return;
  AdmissionTable* table = std::exchange(table_, nullptr);
  table->UnlockCore();
  StoreLoadFence();  // after the release, before the look (TryTakeIntake)
  if (decision_ != &own_) {
    if (!table->intake_.empty()) table->owner_.ServeIntake();
    return;
  }
  if (own_.admitted.empty() && !own_.wake_timer && table->intake_.empty()) return;
  table->owner_.HandOff(std::move(own_));
}

void AdmissionTable::MustHold(const std::optional<Locked>& lock) const {
  if (lock.has_value()) return;
  std::fprintf(stderr, "fairgate: a call expected to hold the scheduler's lock and did not\n");
  std::abort();
}

void AdmissionTable::UnlockCore() {
  // A leased bucket's tokens come with a lease (FleetRates), not with time: told when one wants
  // a lease that may be taken now, whatever changed it (a take, a refusal, a registration, an
  // arrival), once until FleetRates next looks (BucketsToLease) or a grant comes. Not at every
  // unlock: FleetRates would look again and again. Not for a bucket the store said has no token
  // until later: FleetRates looks again by itself then (and a wake for it would hide the next
  // bucket that wants a lease now).
  if (lease_rates_ && !tokens_told_ && core_->WantsTokens(last_decision_time_)) {
    tokens_told_ = true;
    tokens_wanted_();
  }
  // Written only when it changes: a line both cores write at every release would bounce.
  if (const bool full = core_->full(); cap_full_.load(std::memory_order_relaxed) != full) {
    cap_full_.store(full, std::memory_order_seq_cst);
  }
  mutex_.Unlock();
}

// --- The intake.

Decision AdmissionTable::TakeIntake() {
  Decision decision;
  { Locked lock(this, decision); }  // taking the lock queues the intake
  return decision;
}

std::optional<Decision> AdmissionTable::TryTakeIntake() {
  StoreLoadFence();  // after the push or the release, before the look
  if (intake_.empty() || !mutex_.TryLock()) return std::nullopt;
  Decision decision;
  TakeIntakeLocked(decision);
  UnlockCore();
  return decision;
}

void AdmissionTable::TakeIntakeLocked(Decision& decision) {
  IntakeEntry* list = intake_.TakeAll();
  while (list != nullptr) {
    IntakeEntry* entry = std::exchange(list, list->next);
    // The entry lives in its record's allocation: it stays valid while `record` holds it.
    RecordPtr record = std::move(entry->record);
    const JobName name = record->name.view();
    Status refused =
        EnqueueLocked(record, {name.type, name.id, name.fairness_key, entry->cost, entry->join},
                      MonotonicLocked(entry->read), decision);
    if (!refused.ok()) {
      // Submit returned OK and the scheduler began to shut down before the job was queued: its
      // callback is told, as a pending job's is at shutdown.
      record->MoveTo(JobRecord::State::kCancelled);
      record->refusal = refused.code() == absl::StatusCode::kUnavailable
                            ? absl::CancelledError("the scheduler shut down before the job ran")
                            : std::move(refused);
      decision.admitted.push_back(std::move(record));
    }
  }
}

// --- The life of a call.

Status AdmissionTable::RefuseIfClosed(const core::EnqueueRequest& request) {
  Locked lock(this);
  if (phase_ != Phase::kOpen) return RejectLocked(request, UnavailableLocked(), LockedNow());
  return absl::OkStatus();
}

auto AdmissionTable::Enqueue(const RecordPtr& record, const core::EnqueueRequest& request,
                             double read, bool runs_itself, bool at_once_only)
    -> Decided<Enqueued> {
  Decided<Enqueued> out;
  Locked lock(this, out.decision);
  // Signalling a caller that runs its own job would cost it a lock, a notify and a wait on its
  // own record (about 600 instructions per RunSync into a scheduler with room: bench/HISTORY.md):
  // an admission of it by this call is answered instead (TakeAdmissionLocked).
  runs_itself_ = runs_itself ? record.get() : nullptr;
  const double now = MonotonicLocked(read);
  out.answer.status = EnqueueLocked(record, request, now, out.decision);
  out.answer.admitted_at_once = runs_itself && runs_itself_ == nullptr;
  runs_itself_ = nullptr;
  if (at_once_only && out.answer.status.ok() && record->state == JobRecord::State::kPending) {
    out.answer.status =
        absl::ResourceExhaustedError("the job is not admissible now (TryAcquire does not wait)");
    CancelLocked(*record, now, out.answer.status);
  }
  return out;
}

void AdmissionTable::ApplyGroupRuleLocked(std::string_view key) {
  if (!options_.runtime.key_group || !core_->NeedsKeyGroup(key)) return;
  // ValidateOptions refused the rule with idle catch-up, the one refusal SetKeyGroupByRule has
  // for a key NeedsKeyGroup said yes of.
  if (!core_->SetKeyGroupByRule(key, options_.runtime.key_group(key)).ok()) {
    std::fprintf(stderr, "fairgate: runtime.key_group's answer was refused\n");
    std::abort();
  }
}

Status AdmissionTable::EnqueueLocked(const RecordPtr& record, const core::EnqueueRequest& request,
                                     double now, Decision& decision) {
  const std::optional<double> next_expiry = core_->NextExpiryAt();
  // The core's first admission after the enqueue, if it queued a new job: with nothing else
  // pending and room for it, the job itself, admitted without entering the order.
  std::optional<core::Admission> first;
  ApplyGroupRuleLocked(request.key);
  StatusOr<core::JobTicket> ticket =
      phase_ != Phase::kOpen ? UnavailableLocked() : core_->EnqueueAndAdmit(request, now, first);
  if (!ticket.ok()) {
    // A key the rule was asked of that the refusal left untracked keeps nothing of its answer.
    if (options_.runtime.key_group) core_->ForgetKeyGroupByRule(request.key);
    return RejectLocked(request, ticket.status(), now);
  }
  // A job its type's shedding refused in this call's place leaves its record first: the new job
  // may have its slot.
  ReapExpiredLocked(now, decision.admitted);
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
  if (first) TakeAdmissionLocked(*first, now, decision);
  AdmitLocked(now, decision);
  if (record->state == JobRecord::State::kPending) {
    if (std::optional<Context::Clock::time_point> deadline = record->QueueDeadline()) {
      const DeadlineMap::iterator entry = deadlines_.emplace(*deadline, record);
      record->acquire().deadline_entry = entry;
      record->deadline_filed = true;
      decision.wake_timer |= deadlines_.begin() == entry;
    }
  }
  // A queue-wait limit earlier than any the timer knows of.
  if (core_->NextExpiryAt() != next_expiry && core_->NextExpiryAt()) decision.wake_timer = true;
  return absl::OkStatus();
}

Status AdmissionTable::RejectLocked(const core::EnqueueRequest& request, Status why, double now) {
  log_.Rejected(request.type, request.id, request.key, why, now);
  log_.Post();
  return why;
}

Status AdmissionTable::UnavailableLocked() const {
  return absl::UnavailableError(phase_ == Phase::kDraining ? "the scheduler is draining"
                                                           : "the scheduler is shut down");
}

Status AdmissionTable::SettleRunSync(const RecordPtr& record, bool decided, const Context& ctx,
                                     bool& run) {
  run = false;
  // Why the context ended, read before the lock: Err takes the context's fiber mutex, which the
  // thread that cancelled the context may still hold (it unlinks the context from its parent
  // after waking this caller). Read under the core lock, that suspended this fiber holding it,
  // and the scheduler stopped for good (issue 46; runtime/waiting.h). Read even if the job was
  // admitted meanwhile: it is only used when not.
  Status err;
  if (!decided) err = ctx.Err();
  // An admitted caller does not take the lock again to learn that it was: with many threads
  // calling, waiting for that lock again held its slot idle (bench/HISTORY.md).
  std::optional<Locked> lock;
  if (!decided) lock.emplace(this);
  switch (record->state) {
    case JobRecord::State::kNew:  // Enqueue queued it (kPending) before returning it
      std::fprintf(stderr, "fairgate: a RunSync job woke without having been queued\n");
      std::abort();
    case JobRecord::State::kRunning:
      run = true;  // admitted, even if the context ended meanwhile: the job runs and sees it
      return absl::OkStatus();
    case JobRecord::State::kCancelled:  // shutdown, or its queue-wait limit
      return record->refusal;
    case JobRecord::State::kFinished:  // the run it joined ended
      return record->result;
    case JobRecord::State::kPending:
    case JobRecord::State::kJoined:
      break;
  }
  // The context ended first: leave the queue, uncharged (the job leaves with its last caller), or
  // stop waiting for the run it joined (which goes on for the others).
  if (err.ok()) err = absl::CancelledError("context cancelled");
  MustHold(lock);  // not decided: woken by the context, so the lock was taken above
  if (record->state == JobRecord::State::kPending) {
    LeaveQueueLocked(record, LockedNow(), err);
  } else {
    LeaveRunLocked(record);
  }
  return err;
}

Decision AdmissionTable::Complete(JobRecord& record, double run_time, double end,
                                  const Status& status, RunEnd ran) {
  Decision decision;
  Locked lock(this, decision);
  end = MonotonicLocked(end);
  if (record.worker == nullptr || !record.worker->Lost()) {
    core::JobView job;  // described by the completion itself: one lookup of the ticket
    switch (ran) {
      case RunEnd::kMeasured:
        (void)core_->Complete(record.ticket, run_time, end, job);
        break;
      case RunEnd::kUnmeasured:
        (void)core_->CompleteUnmeasured(record.ticket, end, job);
        break;
      case RunEnd::kUnused:
        (void)core_->CompleteUnused(record.ticket, end, job);
        break;
    }
    if (keep_run_samples_ && ran == RunEnd::kMeasured && run_samples_.size() < kMaxRunSamples) {
      run_samples_.push_back({std::string(job.type), record.admitted_at, run_time});
    }
    log_.Completed(job, status, run_time, end);
    records_[record.ticket.slot] = nullptr;
  }
  // Else its worker was removed: the core ended the job then, and its slot may be another's.
  decision.joiners = std::move(record.joiners);
  record.joiners.clear();
  for (const RecordPtr& joiner : decision.joiners) {
    joiner->MoveTo(JobRecord::State::kFinished);
    joiner->result = Detached(status);
  }
  AdmitLocked(end, decision);
  return decision;
}

Decided<Status> AdmissionTable::SetWorker(std::string_view name, const WorkerConfig& config,
                                          bool update) {
  Decided<Status> out;
  Locked lock(this, out.decision);
  const double now = LockedNow();
  out.answer = update ? core_->UpdateWorker(name, config) : core_->AddWorker(name, config);
  if (out.answer.ok() && phase_ != Phase::kShutDown) AdmitLocked(now, out.decision);
  return out;
}

Decided<Status> AdmissionTable::RemoveWorker(std::string_view name) {
  Decided<Status> out;
  Locked lock(this, out.decision);
  const double now = LockedNow();
  StatusOr<std::vector<core::LostJob>> ended = core_->RemoveWorker(name, now);
  out.answer = ended.status();
  if (ended.ok()) {
    const Status why = WorkerLostError(name);
    for (const core::LostJob& job : *ended) {
      RecordPtr record = std::move(records_[job.ticket.slot]);
      record->worker->MarkLost(Detached(why));
      log_.Completed(job.View(), Detached(why), std::max(0.0, now - record->admitted_at), now);
      out.decision.lost.push_back(std::move(record));
    }
    if (phase_ != Phase::kShutDown) AdmitLocked(now, out.decision);
    CheckInvariantsLocked();
  }
  return out;
}

bool AdmissionTable::Abandon(const RecordPtr& record, const Status& why) {
  Locked lock(this);
  if (record->state != JobRecord::State::kPending) return false;
  CancelLocked(*record, LockedNow(), why);
  return true;
}

// --- Shutdown and Drain.

RecordList AdmissionTable::ShutDown() {
  RecordList refused;
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
        call->refusal = call->ShutDownRefusal();
        refused.push_back(call);
      }
    }
  }
  // Expired jobs a snapshot found, not yet reported by the timer.
  refused.insert(refused.end(), unreported_.begin(), unreported_.end());
  unreported_.clear();
  return refused;
}

Decision AdmissionTable::StartDrain() {
  Decision decision;
  Locked lock(this, decision);
  if (phase_ == Phase::kOpen) phase_ = Phase::kDraining;
  if (phase_ == Phase::kDraining) {
    // Everything accepted runs: paused work too.
    const double now = LockedNow();
    const Snapshot paused = core_->TakeSnapshot(now);
    for (const TypeSnapshot& type : paused.types) {
      if (type.paused) (void)core_->ResumeType(type.name, now);
    }
    for (const std::string& key : paused.paused_keys) (void)core_->ResumeKey(key, now);
    AdmitLocked(now, decision);
  }
  return decision;
}

// --- Decisions.

void AdmissionTable::AdmitLocked(double now, Decision& decision) {
  if (!AdmitsNothingLocked(now)) {
    while (std::optional<core::Admission> a = core_->NextAdmission(now)) {
      TakeAdmissionLocked(*a, now, decision);
    }
    ReapExpiredLocked(now, decision.admitted);
    log_.Promotions(now);
    // A token that pending jobs now wait for (a rate limit's, fairgate/rate_limit.h) and that
    // the timer has not been told of: it wakes to decide again when the token is due.
    if (const std::optional<double> token = core_->NextTokenAt(now); token != token_told_) {
      token_told_ = token;
      decision.wake_timer |= token.has_value();
    }
  }
  log_.Post();
  CheckInvariantsLocked();
}

void AdmissionTable::TakeAdmissionLocked(const core::Admission& a, double now, Decision& decision) {
  RecordPtr& record = records_[a.ticket.slot];
  if (!record->joiners.empty()) ChooseRunnerLocked(record, coalesce_[a.type_index]);
  if (!a.worker.empty()) record->worker = std::make_unique<WorkerAssignment>(a.worker);
  record->MoveTo(JobRecord::State::kRunning);
  record->admitted_at = now;
  ForgetDeadlineLocked(*record);
  log_.Admitted(a, now);
  if (record.get() == runs_itself_) {
    runs_itself_ = nullptr;  // its caller, this call's, runs it: answered, not in the decision
    return;
  }
  decision.admitted.push_back(record);
}

bool AdmissionTable::AdvanceLocked(double now) {
  core_->AdvanceTo(now);
  const std::size_t before = unreported_.size();
  ReapExpiredLocked(now, unreported_);
  log_.Promotions(now);
  log_.Post();
  return unreported_.size() != before;
}

void AdmissionTable::ReapExpiredLocked(double now, RecordList& out) {
  for (const core::ExpiredJob& expired : core_->TakeExpired()) {
    RecordPtr record = std::move(records_[expired.ticket.slot]);
    record->MoveTo(JobRecord::State::kCancelled);
    ForgetDeadlineLocked(*record);
    if (!expired.shed.ok()) {
      // Its type's queue stood and its key had consumed the most: refused, as a call would be.
      record->refusal = expired.shed;
      log_.Shed(expired.View(), record->refusal, now);
    } else if (expired.token_due) {
      // It asked not to wait for a token, and the lease its bucket awaited brought none: a
      // cancel event with the refusal it would have had, had the bucket been known empty then.
      record->refusal = core::RefusedForToken(
          expired.token_of, std::max(*expired.token_due - now, 0.001));  // RetryAfter promises > 0
      log_.Cancelled(expired.View(), record->refusal, now);
    } else {
      record->refusal = absl::DeadlineExceededError(
          absl::StrCat("the job waited its type's max_queue_wait (",
                       expired.expired_at - expired.arrival, " s) without being admitted"));
      log_.Expired(expired.View(), record->refusal, now);
    }
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

void AdmissionTable::CheckInvariantsLocked() const {
#if FAIRGATE_CHECK_INVARIANTS
  if (Status broken = core_->CheckInvariants(); !broken.ok()) {
    std::fprintf(stderr, "fairgate: %s\n", std::string(broken.message()).c_str());
    std::abort();
  }
#endif
}

void AdmissionTable::ChooseRunnerLocked(RecordPtr& lead, Coalesce mode) {
  std::vector<RecordPtr> calls = std::move(lead->joiners);
  calls.insert(calls.begin(), lead);
  const auto runner =
      core::ChooseRunner(calls, mode, [](const RecordPtr& r) { return r->CallerRunsJob(); });
  RecordPtr chosen = std::move(*runner);
  calls.erase(runner);
  for (const RecordPtr& call : calls) call->MoveTo(JobRecord::State::kJoined);
  chosen->joiners = std::move(calls);
  lead = std::move(chosen);
}

void AdmissionTable::LeaveQueueLocked(const RecordPtr& record, double now, const Status& why) {
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

void AdmissionTable::LeaveRunLocked(const RecordPtr& record) {
  std::erase(records_[record->ticket.slot]->joiners, record);
  record->MoveTo(JobRecord::State::kCancelled);
}

void AdmissionTable::CancelLocked(JobRecord& record, double now, const Status& why) {
  const core::JobView job = *core_->Describe(record.ticket);
  (void)core_->Cancel(record.ticket, now);
  CheckInvariantsLocked();
  record.MoveTo(JobRecord::State::kCancelled);
  records_[record.ticket.slot] = nullptr;
  ForgetDeadlineLocked(record);
  log_.Cancelled(job, why, now);
  log_.Post();
}

void AdmissionTable::ForgetDeadlineLocked(JobRecord& record) {
  if (!record.deadline_filed) return;
  std::optional<DeadlineMap::iterator>& entry = record.acquire().deadline_entry;
  deadlines_.erase(*entry);
  entry.reset();
  record.deadline_filed = false;
}

}  // namespace fairgate::internal

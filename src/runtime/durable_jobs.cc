#include "runtime/durable_jobs.h"

#include <algorithm>
#include <chrono>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"

namespace fairgate::internal {
namespace {

// What a store keeps of an attempt's error (StoredJob::last_error): its first kMaxLastErrorBytes
// bytes, cut before a UTF-8 continuation byte so that no character is split, and how much was
// left out.
std::string StoredError(std::string error) {
  if (error.size() <= kMaxLastErrorBytes) return error;
  std::size_t cut = kMaxLastErrorBytes;
  while (cut > 0 && (static_cast<unsigned char>(error[cut]) & 0xC0) == 0x80) --cut;
  const std::size_t more = error.size() - cut;
  error.resize(cut);
  absl::StrAppend(&error, " [", more, " bytes more]");
  return error;
}

}  // namespace

Status DurableJobs::Register(std::string_view type, DurableHandler handler,
                             const RetryPolicy& retry) {
  if (!handler) return absl::InvalidArgumentError("durable handler is empty");
  if (Status s = ValidateRetryPolicy(retry); !s.ok()) return s;
  if (!scheduler_.Type(type)) {
    return absl::NotFoundError(
        absl::StrCat("unknown job type '", absl::string_view(type.data(), type.size()), "'"));
  }
  std::lock_guard lock(mutex_);
  auto [it, inserted] = types_.try_emplace(
      std::string(type), std::make_shared<const Type>(Type{std::move(handler), retry}));
  if (!inserted) {
    return absl::AlreadyExistsError(absl::StrCat("job type '",
                                                 absl::string_view(type.data(), type.size()),
                                                 "' already has a durable handler"));
  }
  return absl::OkStatus();
}

StatusOr<RecoveryReport> DurableJobs::Recover() {
  if (Status open = scheduler_.Open(); !open.ok()) return open;
  {
    std::lock_guard lock(mutex_);
    if (recovery_ != Recovery::kNotYet) {
      return absl::FailedPreconditionError("Recover was already called");
    }
    recovery_ = Recovery::kRecovering;
  }
  auto load_failed = [&](const Status& status) {
    keeper_.CountError(StateKeeper::Operation::kLoad);
    std::lock_guard lock(mutex_);
    recovery_ = Recovery::kNotYet;  // may be called again
    return status;
  };
  if (claimer_ != nullptr) return RecoverShared(load_failed);
  // Two schedulers on one store would each run every job: this one works them from now on, or
  // Recover is refused (and may be called again).
  bool exclusive;
  {
    std::lock_guard lock(mutex_);
    exclusive = exclusive_;
  }
  if (!exclusive) {
    if (Status begun = keeper_.store().BeginExclusiveUse(); !begun.ok()) {
      std::lock_guard lock(mutex_);
      recovery_ = Recovery::kNotYet;
      return begun;
    }
    std::lock_guard lock(mutex_);
    exclusive_ = true;
  }
  StatusOr<std::vector<StoredJob>> live = keeper_.store().LiveJobs();
  if (!live.ok()) return load_failed(live.status());
  RecoveryReport report;
  // Jobs whose last attempt was begun and cut short with no attempt left die first, so that the
  // dead jobs read next include them; a store that fails here leaves Recover to be called again.
  std::vector<std::pair<StoredJob, TypePtr>> runnable;
  for (StoredJob& job : *live) {
    TypePtr type = Find(job.type);
    if (!type) {
      ++report.without_handler;
    } else if (AttemptsSpent(job, *type)) {
      if (Status killed = KillInterrupted(job, *type); !killed.ok()) return load_failed(killed);
    } else {
      runnable.emplace_back(std::move(job), std::move(type));
    }
  }
  StatusOr<std::size_t> dead = keeper_.store().CountDeadJobs();
  if (!dead.ok()) return load_failed(dead.status());
  report.dead = *dead;
  std::vector<std::pair<StoredJob, TypePtr>> due;
  const double wall = WallNow();
  for (auto& [job, type] : runnable) {
    if (job.not_before > wall) {
      ++report.deferred;
      const double wait = job.not_before - wall;
      ScheduleRetry(std::move(job), std::move(type), wait);
    } else {
      due.emplace_back(std::move(job), std::move(type));
    }
  }
  // In stored order, before SubmitDurable is accepted: no job of this process comes between.
  for (const auto& [job, type] : due) {
    // Refused at the door (a full queue), it is tried again a backoff later.
    ++(QueueOrDefer(job, type) ? report.queued : report.deferred);
  }
  std::lock_guard lock(mutex_);
  recovery_ = Recovery::kDone;
  return report;
}

void DurableJobs::EndExclusiveUse() {
  {
    std::lock_guard lock(mutex_);
    if (!exclusive_) return;
    exclusive_ = false;
  }
  keeper_.store().EndExclusiveUse();
}

// Recover on a shared store: nothing is loaded; the claimer claims what is due, now and from now
// on.
template <typename LoadFailed>
StatusOr<RecoveryReport> DurableJobs::RecoverShared(LoadFailed& load_failed) {
  StatusOr<std::size_t> dead = keeper_.store().CountDeadJobs();
  if (!dead.ok()) return load_failed(dead.status());
  RecoveryReport report;
  report.dead = *dead;
  // The claimer's thread may be about to claim (its listener pokes it once it listens): the
  // first claim after the opening is this one, so that what is due now is reported queued. A
  // failed first claim is counted; the claimer's thread tries again.
  const StatusOr<std::size_t> claimed = claimer_->OpenAndClaim([this] {
    std::lock_guard lock(mutex_);
    recovery_ = Recovery::kDone;
  });
  if (claimed.ok()) report.queued = *claimed;
  return report;
}

StatusOr<DurableJobs::TypePtr> DurableJobs::Accepting(std::string_view type,
                                                      std::string_view id) const {
  if (id.empty()) return absl::InvalidArgumentError("job id is empty");
  if (Status ready = Recovered("SubmitDurable"); !ready.ok()) return ready;
  std::lock_guard lock(mutex_);
  auto it = types_.find(absl::string_view(type.data(), type.size()));
  if (it == types_.end()) {
    return absl::NotFoundError(absl::StrCat("job type '",
                                            absl::string_view(type.data(), type.size()),
                                            "' has no durable handler (RegisterDurable)"));
  }
  return it->second;
}

StoredJob DurableJobs::ToStore(const DurableSubmission& job) {
  StoredJob stored;
  stored.type = std::string(job.name.type);
  stored.id = std::string(job.name.id);
  stored.fairness_key = std::string(job.name.fairness_key);
  stored.payload = std::string(job.payload);
  stored.submitted_at = WallNow();
  return stored;
}

StatusOr<std::uint64_t> DurableJobs::Submit(const DurableSubmission& submission) {
  StatusOr<TypePtr> handler = Accepting(submission.name.type, submission.name.id);
  if (!handler.ok()) return handler.status();
  StoredJob job = ToStore(submission);
  StatusOr<std::uint64_t> sequence = keeper_.store().AddJob(job);
  if (!sequence.ok()) {
    keeper_.CountError(StateKeeper::Operation::kAddJob);
    return sequence.status();
  }
  keeper_.Count(StateKeeper::Outcome::kStored);
  if (claimer_ != nullptr) {  // a shared store: whichever replica claims it first runs it
    claimer_->Poke();
    return *sequence;
  }
  job.sequence = *sequence;
  Status queued = Queue(std::move(job), *std::move(handler));
  // Refused at the door (a full queue): not accepted, so not kept. Shutting down meanwhile: it
  // is stored, and runs after the next Recover.
  if (!queued.ok() && queued.code() != absl::StatusCode::kUnavailable) {
    if (!keeper_.store().RemoveJob(*sequence).ok()) {
      keeper_.CountError(StateKeeper::Operation::kRemoveJob);
    }
    return queued;
  }
  return *sequence;
}

// One commit for the batch; then each job is queued as a recovered one is (QueueOrDefer): the
// batch was accepted as a whole, so a job a full queue refuses waits in the store instead.
StatusOr<std::vector<std::uint64_t>> DurableJobs::SubmitBatch(
    const std::vector<DurableSubmission>& jobs) {
  std::vector<StoredJob> stored;
  std::vector<TypePtr> handlers;
  stored.reserve(jobs.size());
  handlers.reserve(jobs.size());
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    StatusOr<TypePtr> handler = Accepting(jobs[i].name.type, jobs[i].name.id);
    if (!handler.ok()) {
      return Status(handler.status().code(),
                    absl::StrCat("job ", i, " of the batch: ", handler.status().message()));
    }
    handlers.push_back(*std::move(handler));
    stored.push_back(ToStore(jobs[i]));
  }
  if (jobs.empty()) return std::vector<std::uint64_t>{};
  StatusOr<std::vector<std::uint64_t>> sequences = keeper_.store().AddJobs(stored);
  if (!sequences.ok()) {
    keeper_.CountError(StateKeeper::Operation::kAddJob);
    return sequences.status();
  }
  keeper_.Count(StateKeeper::Outcome::kStored, stored.size());
  if (claimer_ != nullptr) {
    claimer_->Poke();
    return sequences;
  }
  for (std::size_t i = 0; i < stored.size(); ++i) {
    stored[i].sequence = (*sequences)[i];
    QueueOrDefer(stored[i], handlers[i]);
  }
  return sequences;
}

StatusOr<std::vector<StoredJob>> DurableJobs::Dead() {
  StatusOr<std::vector<StoredJob>> dead = keeper_.store().DeadJobs();
  if (!dead.ok()) keeper_.CountError(StateKeeper::Operation::kLoad);
  return dead;
}

StatusOr<std::vector<StoredJob>> DurableJobs::Dead(std::uint64_t after, std::size_t limit) {
  if (limit == 0) {
    return absl::InvalidArgumentError("DeadJobs: a page's limit must be at least 1, got 0");
  }
  StatusOr<std::vector<StoredJob>> dead = keeper_.store().DeadJobsAfter(after, limit);
  if (!dead.ok()) keeper_.CountError(StateKeeper::Operation::kLoad);
  return dead;
}

// Before Recover the store's jobs are not this scheduler's yet (another may work a SQLite file's).
Status DurableJobs::Recovered(const char* call) const {
  if (Status open = scheduler_.Open(); !open.ok()) return open;
  std::lock_guard lock(mutex_);
  if (recovery_ == Recovery::kDone) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat(call,
                   " before Recover: register the types and their handlers, then call "
                   "Recover"));
}

Status DurableJobs::RetryDead(std::uint64_t sequence) {
  if (Status ready = Recovered("RetryDeadJob"); !ready.ok()) return ready;
  StatusOr<StoredJob> revived = keeper_.store().ReviveJob(sequence);
  if (!revived.ok()) return revived.status();
  if (claimer_ != nullptr) {  // a shared store: whichever replica claims it first runs it
    claimer_->Poke();
    return absl::OkStatus();
  }
  // Without a handler it stays stored, as Recover leaves such jobs.
  if (TypePtr type = Find(revived->type)) QueueOrDefer(*revived, type);
  return absl::OkStatus();
}

Status DurableJobs::RemoveDead(std::uint64_t sequence) {
  if (Status ready = Recovered("RemoveDeadJob"); !ready.ok()) return ready;
  return keeper_.store().RemoveDeadJob(sequence);
}

std::vector<ClaimableType> DurableJobs::ClaimableTypes() const {
  std::vector<ClaimableType> types;
  if (!scheduler_.Open().ok()) return types;
  std::vector<std::pair<std::string, std::size_t>> names;  // with the capped claims held
  {
    std::lock_guard lock(mutex_);
    if (recovery_ != Recovery::kDone) return types;
    for (const auto& [name, type] : types_) {
      auto held = capped_held_.find(name);
      names.emplace_back(name, held == capped_held_.end() ? 0 : held->second);
    }
  }
  for (const auto& [name, held] : names) {
    const std::optional<Submission::TypeInfo> info = scheduler_.Type(name);
    // Paused: held, its jobs would wait while others could run. Served by none of this
    // replica's workers: its jobs would wait here while another replica could run them.
    if (info && (info->paused || !info->served)) continue;
    ClaimableType& claimable = types.emplace_back();
    claimable.type = name;
    claimable.priority = info ? info->priority : 1;
    if (fleet_ != nullptr) fleet_->DescribeNeeds(claimable);  // taken with the claim
    if (claimable.fleet_cap > 0) {
      // Its claimed jobs hold the cap's slots: no more than this replica can run at once, so
      // that the fleet's slots go to the replicas that can run them.
      const std::size_t at_once = info ? static_cast<std::size_t>(std::max(info->at_once, 0)) : 1;
      if (held >= at_once) {
        types.pop_back();
        continue;
      }
      claimable.max_jobs = at_once - held;
    }
  }
  return types;
}

// A job that cannot be queued (a full queue, shutting down) is given back at once for any replica
// to claim, and so is one whose type was paused while the claim that took it was under way
// (ClaimableTypes leaves paused types out of the next).
void DurableJobs::QueueClaimed(std::vector<StoredJob> jobs) {
  for (StoredJob& job : jobs) {
    Capped(job);
    TypePtr type = Find(job.type);
    // Its holder died during its last attempt: dead, not run again (the claim's lease lets this
    // replica record it; a store that fails leaves it to lapse and be claimed again).
    if (type && AttemptsSpent(job, *type)) {
      (void)KillInterrupted(job, *type);
      ForgetCapped({job.sequence});
      claimer_->Done(/*claim_again=*/true);
      continue;
    }
    if (type) {
      const std::optional<Submission::TypeInfo> info = scheduler_.Type(job.type);
      if (info && info->paused) type = nullptr;
    }
    if (type && Queue(job, type).ok()) continue;
    SharedStore* store = keeper_.shared_store();
    const std::uint64_t sequence = job.sequence;
    Recorded(writes_.Run(StateKeeper::Operation::kRelease,
                         [store, sequence] { return store->ReleaseJob(sequence); }),
             StateKeeper::Operation::kRelease);
    ForgetCapped({sequence});
    claimer_->Done(/*claim_again=*/false);
  }
}

DurableJobs::Clock::time_point DurableJobs::NextDue() const {
  std::lock_guard lock(mutex_);
  return retries_.empty() ? Clock::time_point::max() : retries_.begin()->first;
}

void DurableJobs::RunDue(Clock::time_point now) {
  std::vector<std::pair<StoredJob, TypePtr>> due;
  {
    std::lock_guard lock(mutex_);
    while (!retries_.empty() && retries_.begin()->first <= now) {
      due.push_back(std::move(retries_.begin()->second));
      retries_.erase(retries_.begin());
    }
  }
  for (const auto& [job, type] : due) QueueOrDefer(job, type);
}

void DurableJobs::DropRetries() {
  std::lock_guard lock(mutex_);
  retries_.clear();
}

DurableJobs::TypePtr DurableJobs::Find(std::string_view type) const {
  std::lock_guard lock(mutex_);
  auto it = types_.find(absl::string_view(type.data(), type.size()));
  return it == types_.end() ? nullptr : it->second;
}

Status DurableJobs::Queue(const StoredJob& job, TypePtr type) {
  auto attempt = std::make_shared<Attempt>(Attempt{job, std::move(type)});
  return scheduler_.Submit(
      job.type, job.id, job.fairness_key,
      [this, attempt](const Context& ctx) { return Run(*attempt, ctx); },
      [this, attempt](const Status& status) { Finish(*attempt, status); }, {},
      {.claimed_leases = job.resource_token, .unmeasured = &attempt->unmeasured});
}

bool DurableJobs::QueueOrDefer(const StoredJob& job, const TypePtr& type) {
  Status queued = Queue(job, type);
  if (queued.ok()) return true;
  if (queued.code() == absl::StatusCode::kUnavailable) return false;
  ScheduleRetry(job, type, std::max(1.0, type->retry.initial_backoff.count()));
  return false;
}

bool DurableJobs::AttemptsSpent(const StoredJob& job, const Type& type) {
  return job.attempts >= type.retry.max_attempts;
}

// A stored job that is neither done nor dead has attempts left, unless its last attempt was begun
// and never ended: an attempt that ends removes, defers or kills the job, so a live job whose
// begun attempts reached max_attempts was cut short in its last one (its process died or was
// killed, or a shutdown cancelled it).
Status DurableJobs::KillInterrupted(const StoredJob& job, const Type& type) {
  std::string error =
      absl::StrCat("attempt ", job.attempts, " (max_attempts ", type.retry.max_attempts,
                   ") was interrupted before it ended: its process stopped while "
                   "it ran; not run again");
  if (!job.last_error.empty()) absl::StrAppend(&error, "; an earlier attempt: ", job.last_error);
  Status killed = keeper_.store().KillJob(job.sequence, StoredError(std::move(error)));
  Recorded(killed, StateKeeper::Operation::kKillJob,
           killed.ok() ? std::optional(StateKeeper::Outcome::kDead) : std::nullopt);
  return killed;
}

// A store that fails is counted and the number comes from memory (the attempt goes ahead: at
// least once); a job the store no longer has, or whose lease another replica holds now, is
// `gone`.
Status DurableJobs::BeginAttempt(Attempt& a) {
  StatusOr<std::uint32_t> begun =
      marker_ ? marker_->Begin(a.job.sequence) : keeper_.store().BeginAttempt(a.job.sequence);
  if (begun.ok()) {
    a.attempt = *begun;
  } else if (begun.status().code() == absl::StatusCode::kNotFound) {
    a.gone = true;
  } else if (begun.status().code() == absl::StatusCode::kAborted) {
    a.gone = true;
    keeper_.Count(StateKeeper::Outcome::kFenced);
  } else {
    keeper_.CountError(StateKeeper::Operation::kBeginAttempt);
    a.attempt = a.job.attempts + 1;
  }
  return begun.status();
}

// An attempt whose job was not this replica's when it ended (its lease lapsed while it ran: the
// replica stalled, or could not renew it) is charged what it was estimated at admission, not its
// run time: another replica may have run the job meanwhile, and charged it; a stall of the
// process is nobody's cost.
Status DurableJobs::Run(Attempt& a, const Context& ctx) {
  if (Status begun = BeginAttempt(a); a.gone) {
    a.unmeasured = true;
    return begun;
  }
  const DurableJob view{a.job.sequence, a.job.type, a.job.id,         a.job.fairness_key,
                        a.job.payload,  a.attempt,  a.job.lease_token};
  Status status = a.type->handler(view, ctx);
  if (SharedStore* shared = keeper_.shared_store();
      shared != nullptr && !shared->SurelyHolds(a.job.sequence)) {
    a.unmeasured = true;
  }
  return status;
}

// A success's removal is queued to the batched writer (RemovalWriter). On a shared store a retry
// or a job cut short by a shutdown is given back, for any replica.
void DurableJobs::Finish(Attempt& a, const Status& status) {
  using Operation = StateKeeper::Operation;
  using Outcome = StateKeeper::Outcome;
  bool removing = false;  // a capped claim is then held until the removal is written
  absl::Cleanup done = [&] {
    if (claimer_ == nullptr) return;
    if (!removing) ForgetCapped({a.job.sequence});
    claimer_->Done(/*claim_again=*/true);
  };
  if (a.gone) return;
  if (status.ok()) {
    // Its lease is held (and renewed) until the removal commits; the replica may claim another
    // job meanwhile (of a type with a fleet-wide cap, once the removal gave the cap's slot back).
    removing = true;
    removals_.Remove(a.job.sequence);
    return;
  }
  Store& store = keeper_.store();
  const std::uint64_t sequence = a.job.sequence;
  // The writes that end an attempt are tried again while the store fails them (WriteRetries):
  // a job done before an outage must not run again, and its leases must come back with the store.
  auto write = [&](Operation operation, WriteRetries::Write w) {
    return writes_.Run(operation, std::move(w));
  };
  const bool open = scheduler_.Open().ok();
  // Cut short by a shutdown (not admitted, or cancelled while it ran): stays as stored.
  if (!open && (a.attempt == 0 || status.code() == absl::StatusCode::kCancelled)) {
    if (claimer_ != nullptr) {
      SharedStore* shared = keeper_.shared_store();
      Recorded(
          write(Operation::kRelease, [shared, sequence] { return shared->ReleaseJob(sequence); }),
          Operation::kRelease);
    }
    return;
  }
  if (a.attempt == 0) {
    // Never ran: it waited its type's max_queue_wait. That counts as a failed attempt, so that
    // a queue that stays full cannot keep it for ever.
    (void)BeginAttempt(a);
    if (a.gone) return;
  }
  const std::string error = StoredError(status.ToString());
  if (a.attempt >= a.type->retry.max_attempts) {
    Recorded(write(Operation::kKillJob,
                   [s = &store, sequence, error] { return s->KillJob(sequence, error); }),
             Operation::kKillJob, Outcome::kDead);
    return;
  }
  const double wait = RetryBackoff(a.type->retry, a.attempt).count();
  StoredJob next = a.job;
  next.attempts = a.attempt;
  next.not_before = WallNow() + wait;
  next.last_error = error;
  Recorded(
      write(Operation::kDeferJob, [s = &store, sequence, not_before = next.not_before,
                                   error] { return s->DeferJob(sequence, not_before, error); }),
      Operation::kDeferJob, Outcome::kRetried);
  if (claimer_ != nullptr) return;  // given back: claimed again, here or elsewhere, once due
  ScheduleRetry(std::move(next), a.type, wait);
}

void DurableJobs::ScheduleRetry(StoredJob job, TypePtr type, double after) {
  if (!scheduler_.Open().ok()) return;  // stays stored, with its backoff
  const auto due = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(after));
  bool earliest = false;
  {
    std::lock_guard lock(mutex_);
    const auto entry = retries_.emplace(due, std::make_pair(std::move(job), std::move(type)));
    earliest = entry == retries_.begin();
  }
  if (earliest) scheduler_.WakeTimer();
}

void DurableJobs::Capped(const StoredJob& job) {
  if (fleet_ == nullptr || !fleet_->Capped(job.type)) return;
  std::lock_guard lock(mutex_);
  if (capped_claims_.emplace(job.sequence, job.type).second) ++capped_held_[job.type];
}

void DurableJobs::ForgetCapped(const std::vector<std::uint64_t>& sequences) {
  bool room = false;
  {
    std::lock_guard lock(mutex_);
    if (capped_claims_.empty()) return;
    for (std::uint64_t sequence : sequences) {
      auto it = capped_claims_.find(sequence);
      if (it == capped_claims_.end()) continue;
      auto held = capped_held_.find(it->second);
      if (--held->second == 0) capped_held_.erase(held);
      capped_claims_.erase(it);
      room = true;
    }
  }
  if (room && claimer_ != nullptr) claimer_->Poke();
}

void DurableJobs::Recorded(const Status& status, StateKeeper::Operation operation,
                           std::optional<StateKeeper::Outcome> outcome) {
  if (status.code() == absl::StatusCode::kAborted) {
    keeper_.Count(StateKeeper::Outcome::kFenced);
    return;
  }
  if (!status.ok()) keeper_.CountError(operation);
  if (outcome) keeper_.Count(*outcome);
}

}  // namespace fairgate::internal

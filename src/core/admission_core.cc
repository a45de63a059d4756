#include "core/admission_core.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/check.h"

namespace fairgate::core {
namespace {

absl::string_view AsAbsl(std::string_view s) { return absl::string_view(s.data(), s.size()); }

[[gnu::cold, gnu::noinline]] Status NotFinite(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(what, " is not finite"));
}

// Inlined: every enqueue and completion asks it.
inline Status CheckTime(double t, absl::string_view what) {
  if (!std::isfinite(t)) [[unlikely]] {
    return NotFinite(what);
  }
  return absl::OkStatus();
}

}  // namespace

JobView EndedJob::BaseView() const {
  JobView view;
  view.type = type;
  view.id = id;
  view.key = key;
  view.type_index = type_index;
  view.priority = priority;
  view.effective_priority = effective_priority;
  view.arrival = arrival;
  return view;
}

StatusOr<std::unique_ptr<AdmissionCore>> AdmissionCore::Create(const RuleOptions& rule) {
  if (Status s = ValidateRuleOptions(rule); !s.ok()) return s;
  return std::unique_ptr<AdmissionCore>(new AdmissionCore(rule));
}

AdmissionCore::AdmissionCore(const RuleOptions& rule)
    : rule_(rule),
      keys_(rule.default_key_limits),
      steps_(rule.aging),
      limits_in_use_(rule.default_key_limits != KeyLimits{}),
      slots_(rule.max_concurrency) {}

AdmissionCore::~AdmissionCore() {
  // Hooks are safe-mode: unlink every node before the containers that own them die.
  for (auto& tier : tiers_) tier->keys_by_acc.clear();
  for (auto& [name, key] : keys_) {
    while (Lane* lane = key.lanes) {
      key.lanes = lane->next_in_key;
      delete lane;
    }
    while (TierPresence* presence = key.tiers) {
      key.tiers = presence->next_in_key;
      delete presence;
    }
  }
}

Status AdmissionCore::RegisterType(std::string_view name, const JobTypeConfig& config) {
  if (Status s = ValidateJobType(name, config); !s.ok()) return s;
  if (auto it = types_by_name_.find(AsAbsl(name)); it != types_by_name_.end()) {
    if (it->second->config == config) return absl::OkStatus();
    return absl::AlreadyExistsError(absl::StrCat(
        "job type '", AsAbsl(name), "' is already registered with a different config"));
  }
  if (config.slots > rule_.max_concurrency) {
    return absl::InvalidArgumentError(
        absl::StrCat("job type '", AsAbsl(name), "': slots (", config.slots,
                     ") exceed the scheduler's max_concurrency (", rule_.max_concurrency, ")"));
  }
  if (!config.conflict_group.empty()) {
    auto it = conflict_groups_.find(config.conflict_group);
    if (it != conflict_groups_.end() && it->second.limit != config.conflict_limit) {
      return absl::InvalidArgumentError(absl::StrCat(
          "job type '", AsAbsl(name), "': conflict_limit ", config.conflict_limit, " differs from ",
          it->second.limit, ", the limit of conflict group '", config.conflict_group, "'"));
    }
  }
  auto type = std::make_unique<TypeState>();
  type->name = std::string(name);
  type->config = config;
  type->index = static_cast<std::uint32_t>(types_.size());
  type->running.set_limit(config.max_concurrency);
  if (!config.conflict_group.empty()) {
    auto [it, inserted] = conflict_groups_.try_emplace(
        config.conflict_group,
        ConflictGroup{static_cast<std::uint32_t>(conflict_groups_.size() + 1),
                      config.conflict_limit});
    type->conflict_group = it->second.index;
  }
  auto tier_it = std::find_if(tiers_.begin(), tiers_.end(),
                              [&](const auto& t) { return t->priority <= config.priority; });
  if (tier_it == tiers_.end() || (*tier_it)->priority != config.priority) {
    auto tier = std::make_unique<TierState>();
    tier->priority = config.priority;
    tier->slots.set_limit(config.priority);
    tier_it = tiers_.insert(tier_it, std::move(tier));
  }
  type->tier = tier_it->get();
  type->tier->types.push_back(type.get());
  if (Shares(*type)) type->home = &type->tier->shared;
  types_by_name_.emplace(type->name, type.get());
  types_.push_back(std::move(type));
  if (workers_.in_use()) workers_.RebuildIndex(types_);
  return absl::OkStatus();
}

StatusOr<JobTicket> AdmissionCore::Enqueue(const EnqueueRequest& request, double now) {
  return EnqueueJob(request, now, nullptr);
}

StatusOr<JobTicket> AdmissionCore::EnqueueAndAdmit(const EnqueueRequest& request, double now,
                                                   std::optional<Admission>& admission) {
  admission.reset();
  return EnqueueJob(request, now, &admission);
}

StatusOr<JobTicket> AdmissionCore::EnqueueJob(const EnqueueRequest& request, double now,
                                              std::optional<Admission>* admission) {
  if (Status s = CheckTime(now, "enqueue time"); !s.ok()) return s;
  auto type_it = types_by_name_.find(AsAbsl(request.type));
  if (type_it == types_by_name_.end()) {
    return absl::NotFoundError(absl::StrCat("unknown job type '", AsAbsl(request.type), "'"));
  }
  TypeState& type = *type_it->second;
  if (request.id.empty()) return absl::InvalidArgumentError("job id is empty");
  if (request.cost && (!std::isfinite(*request.cost) || *request.cost < 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("explicit cost must be finite and >= 0, got ", *request.cost));
  }
  const bool joinable = type.config.coalesce != Coalesce::kOff && request.join != Join::kNever;
  if (joinable) {
    if (const Job* joined =
            type.join_points.Join(AsAbsl(request.id), request.join == Join::kPendingOrRunning)) {
      return TicketOf(*joined);
    }
  }
  if (static_cast<std::size_t>(pending_) >= rule_.max_pending_total) {
    return absl::ResourceExhaustedError(
        absl::StrCat("max_pending_total (", rule_.max_pending_total, ") jobs are already pending"));
  }
  KeyState* known = keys_.Find(AsAbsl(request.key));
  if (known != nullptr && static_cast<std::size_t>(known->pending) >= rule_.max_pending_per_key) {
    return absl::ResourceExhaustedError(absl::StrCat("fairness key '", AsAbsl(request.key),
                                                     "' already has max_pending_per_key (",
                                                     rule_.max_pending_per_key, ") jobs pending"));
  }
  KeyState& key = known != nullptr ? *known : keys_.Add(AsAbsl(request.key));
  TierState& tier = *type.tier;

  if (KeyTable::Idle(key)) {
    keys_.Wake(key);
    // The key has no lanes and no tier presence yet, so its cost can change without relinking.
    if (rule_.idle_catch_up && !tier.keys_by_acc.empty()) {
      key.acc = std::max(key.acc, tier.keys_by_acc.begin()->key->acc);
    }
  }

  Job& job = jobs_.Allocate();
  job.key = &key;
  job.type = &type;
  job.id.assign(request.id);
  job.arrival = now;
  job.seq = next_seq_++;
  job.has_explicit_cost = request.cost.has_value();
  job.explicit_cost = request.cost.value_or(0);
  job.sjf = SjfOf(type, AsAbsl(request.id), request, now);
  job.promotions = 0;
  job.was_parked = false;
  job.joinable = joinable;
  if (joinable) type.join_points.Open(job);
  job.resource = ResourceFor(type, AsAbsl(request.id));
  if (job.resource) ++job.resource->refs;
  if (admission != nullptr && pending_ == 0 && AdmitsAtOnce(job, now)) {
    AdmitAtOnce(job, now, admission->emplace());
    return TicketOf(job);
  }
  JoinLane(job, LaneFor(key, type, tier));
  ++key.pending;
  if (type.pending == 0) type.starved_since = now;
  ++type.pending;
  ++tier.pending;
  ++pending_;
  if (rule_.idle_catch_up) {
    TierPresence* presence = key.tiers;
    while (presence != nullptr && presence->tier != &tier) presence = presence->next_in_key;
    if (presence == nullptr) {
      presence = new TierPresence;
      presence->key = &key;
      presence->tier = &tier;
      presence->next_in_key = key.tiers;
      key.tiers = presence;
      tier.keys_by_acc.insert(*presence);
    }
    ++presence->pending;
  }
  InsertIntoLane(job);
  if (rule_.aging && Paused(job)) steps_.StopClock(job, now);
  SchedulePromotion(job);
  steps_.ScheduleExpiry(job);
  const JobTicket ticket = TicketOf(job);
  if (admission != nullptr && !AdmitsNothing(now)) *admission = NextAdmission(now);
  return ticket;
}

bool AdmissionCore::AdmitsAtOnce(const Job& job, double now) const {
  // NextAdmission would take no expiry or aging step but the job's own (nothing else is pending:
  // the caller's test, the first and the cheapest), and Pick would find every tier but the job's
  // empty, no lane held (lanes exist only with pending jobs) and no other type's lane to count as
  // skipped: it admits the job exactly when the checks Pick makes let it through (its type's caps
  // in TypeFits, its key in SyncLane's Admissible, its resource in FrontOf: the one list,
  // BlockerOf), counting no skip.
  const TypeState& type = *job.type;
  return BlockerOf(job) == Blocker::kNone &&
         !(TimedSteps::Expires(job) && TimedSteps::ExpiryAt(job) <= now) &&
         !(rule_.aging && TierAbove(*type.tier) != nullptr && steps_.NextStepAt(job) <= now);
}

void AdmissionCore::AdmitAtOnce(Job& job, double now, Admission& admission) {
  if (workers_.in_use()) {
    job.worker = workers_.Choose(*job.type)->index + 1;  // AdmitsAtOnce: one has room
  }
  EstimateTable::Entry* estimate =
      DescribeAdmission(job, job.type->tier->priority, DecisionSkips{}, now, admission);
  // What Admit does besides is for a job in a lane, a tier presence and timed steps, and counted
  // as pending: this one is in none of them, and its key, with nothing pending, has no lanes to
  // move.
  ChargeAndHold(job, admission);
  StartRunning(job, admission, estimate);
}

Status AdmissionCore::Cancel(JobTicket ticket, double now) {
  if (Status s = CheckTime(now, "cancel time"); !s.ok()) return s;
  Job* job = jobs_.Find(ticket);
  if (job == nullptr) return absl::NotFoundError("no pending or running job has this ticket");
  if (job->state == JobState::kRunning) {
    return absl::FailedPreconditionError("the job is running; only pending jobs can be cancelled");
  }
  if (job->joinable && job->type->join_points.LeaveCaller(*job)) return absl::OkStatus();
  Withdraw(*job, now);
  return absl::OkStatus();
}

StatusOr<std::uint32_t> AdmissionCore::Callers(JobTicket ticket) const {
  const Job* job = jobs_.Find(ticket);
  if (job == nullptr || job->state == JobState::kRunning) {
    return absl::NotFoundError("no pending job has this ticket");
  }
  if (!job->joinable) return 1;
  return job->type->join_points.Callers(*job);
}

void AdmissionCore::Withdraw(Job& job, double now) {
  if (job.joinable) job.type->join_points.Withdraw(job);
  steps_.UnschedulePromotion(job);
  steps_.UnscheduleExpiry(job);
  RemoveFromLane(job);
  LeavePending(job);
  ReleaseResource(job.resource);
  keys_.MaybeIdle(*job.key, now);
  jobs_.Free(job);
}

Job* AdmissionCore::FrontOf(LaneSet& lanes) {
  while (!lanes.empty()) {
    Lane& front = *lanes.front();
    if (front.key == nullptr) {
      // A wait group's proxy: its resource has room and the first job of its best parked lane
      // comes first here. It goes home, where it is the head of the set's first lane.
      Unpark(*front.group->lanes.front()->ready.front().job);
      continue;
    }
    Job& head = *front.ready.front().job;
    if (IdBlocker(head.resource) == Blocker::kNone) return &head;
    Park(head);
  }
  return nullptr;
}

std::optional<Admission> AdmissionCore::NextAdmission(double now) {
  AdvanceTo(now);
  if (slots_.Full()) return std::nullopt;
  DecisionSkips skipped;
  parked_in_decision_ = 0;
  WorkerState* reserved = nullptr;
  Job* job = workers_.in_use() ? PickReserved(now, reserved) : nullptr;
  if (job == nullptr) job = Pick(skipped);
  if (job != nullptr && workers_.in_use()) {
    job->worker = (reserved != nullptr ? reserved : workers_.Choose(*job->type))->index + 1;
  }
  if (workers_.reserving()) workers_.ClearReservations();
  if (job == nullptr) return std::nullopt;
  skipped.conflict = parked_in_decision_;
  std::optional<Admission> admission(std::in_place);
  Admit(*job, skipped, now, *admission);
  admission->worker_reserved = reserved != nullptr;
  return admission;
}

Job* AdmissionCore::PickReserved(double now, WorkerState*& worker) {
  const double after = rule_.sole_worker_reserve_after.count();
  for (TypeState* type : workers_.sole_types()) {
    if (type->pending == 0 || now - type->starved_since < after) continue;
    if (CapBlocker(*type) != Blocker::kNone) continue;
    Job* job = FrontOfType(*type);
    if (job == nullptr) continue;  // held back by its keys or its resources, not by the worker
    workers_.Claim(*type, job);
  }
  return workers_.FirstClaim(worker);
}

Job* AdmissionCore::FrontOfType(TypeState& type) {
  for (auto& tier : tiers_) {
    if (tier.get() == type.tier) return FrontOf(*type.home);
    if (tier->aged_in == 0) continue;
    for (auto& group : tier->aged) {
      if (group->type != &type) continue;
      if (Job* job = FrontOf(group->lanes)) return job;
      break;
    }
  }
  return nullptr;
}

Job* AdmissionCore::Pick(DecisionSkips& skipped) {
  for (auto& tier : tiers_) {
    Job* best = nullptr;
    AdmissionOrder best_order;
    // The head of a lane set, if it goes before the best so far. A linked lane's entry holds its
    // head's order, kept current by SyncLane: read, not recomputed.
    auto consider = [&](LaneSet& lanes) {
      Job* head = FrontOf(lanes);
      if (head != nullptr && (best == nullptr || head->lane->order < best_order)) {
        best = head;
        best_order = head->lane->order;
      }
    };
    skipped.key_limit += static_cast<int>(tier->held_lanes);
    // Jobs that aged into this tier go ahead of its own; each still needs room in its own type's
    // and its own tier's caps.
    if (tier->aged_in > 0) {
      for (auto& group : tier->aged) {
        if (TypeFits(*group->type, group->lanes, skipped)) consider(group->lanes);
      }
    }
    if (best == nullptr && tier->pending > 0) {
      if (tier->slots.Full()) {  // no type of the tier fits (each takes a slot at least)
        ++skipped.tier_cap;
      } else {
        // The sharing types' set: nothing but the tier's cap and the global one, both with
        // room here, can hold its jobs back (Shares).
        if (!tier->shared.empty()) consider(tier->shared);
        for (TypeState* type : tier->types) {
          if (type->home == &type->lanes && TypeFits(*type, type->lanes, skipped)) {
            consider(type->lanes);
          }
        }
      }
    }
    if (best != nullptr) return best;
  }
  return nullptr;
}

// Inlined into Admit and AdmitAtOnce, as it was part of Admit: called, it cost every admission
// about 45 instructions more (bench/HISTORY.md).
[[gnu::always_inline]] inline EstimateTable::Entry* AdmissionCore::DescribeAdmission(
    const Job& job, int effective_priority, const DecisionSkips& skipped, double now,
    Admission& admission) {
  const TypeState& type = *job.type;
  const KeyState& key = *job.key;
  admission.ticket = TicketOf(job);
  admission.type = type.name;
  admission.id = job.id;
  admission.key = *key.name;
  admission.arrival = job.arrival;
  admission.priority = type.config.priority;
  admission.effective_priority = effective_priority;
  admission.type_index = type.index;
  admission.accumulated_before = key.acc;
  admission.sjf = job.sjf;
  admission.seq = job.seq;
  admission.reserved = Reserved(key);
  admission.waited_on_conflict = job.was_parked;
  admission.skipped = skipped;
  if (job.worker != 0) admission.worker = workers_.Of(job)->name;
  admission.weight = KeyTable::WeightOf(key);
  admission.estimate_source = EstimateSource::kExplicit;
  admission.charge = job.explicit_cost;
  if (job.has_explicit_cost) return nullptr;
  bool learned = false;
  EstimateTable::Entry* estimate =
      estimates_.UseAndHold(type.index, job.id, type.config.default_cost, now, &learned);
  admission.charge = estimate->value;
  admission.estimate_source = learned ? EstimateSource::kLearned : EstimateSource::kDefault;
  return estimate;
}

void AdmissionCore::Admit(Job& job, const DecisionSkips& skipped, double now,
                          Admission& admission) {
  KeyState& key = *job.key;
  EstimateTable::Entry* estimate =
      DescribeAdmission(job, job.lane->tier->priority, skipped, now, admission);
  steps_.UnschedulePromotion(job);
  steps_.UnscheduleExpiry(job);
  // One pass over the key's lanes covers the new head, the new cost and the new running count.
  Lane* lane = job.lane;
  Rekey(
      key,
      [&] {
        lane->ready.erase(ReadyEntryOf(job));
        LeavePending(job);  // frees the lane if this was its last job
        ChargeAndHold(job, admission);
      },
      lane->pending > 1 ? lane : nullptr);
  job.type->starved_since = now;  // an admission of the type restarts its clock
  StartRunning(job, admission, estimate);
}

void AdmissionCore::ChargeAndHold(Job& job, const Admission& admission) {
  job.key->acc = job.key->acc + admission.charge / admission.weight;
  workers_.ChangeUse(job, [&] {
    ForEachHold(*this, job, [](Usage& usage, std::int32_t amount) { usage.Acquire(amount); });
  });
  if (job.worker != 0) workers_.Of(job)->running.insert(job.slot);
}

// Inlined likewise.
[[gnu::always_inline]] inline void AdmissionCore::StartRunning(Job& job, const Admission& admission,
                                                               EstimateTable::Entry* estimate) {
  // A resource this fills hides the jobs parked on it again.
  if (IdBlocker(job.resource) != Blocker::kNone) SyncProxies(*job.resource);
  // RunSync requests for its id join it while it runs, Submits do not.
  if (job.joinable) job.type->join_points.Start(job);
  // No longer pending: its pending facts give way to its running ones (queue_nodes.h).
  job.charge = admission.charge;
  job.weight = admission.weight;
  job.effective_priority = admission.effective_priority;
  job.estimate = estimate;  // in the lane's place: the job has left it (or never entered one)
  job.state = JobState::kRunning;
}

Status AdmissionCore::CompleteRunning(JobTicket ticket, double elapsed, double now,
                                      JobView* completed) {
  if (Status s = CheckTime(now, "completion time"); !s.ok()) return s;
  if (!std::isfinite(elapsed) || elapsed < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("elapsed time must be finite and >= 0, got ", elapsed));
  }
  Job* job = jobs_.Find(ticket);
  if (job == nullptr) return absl::NotFoundError("no pending or running job has this ticket");
  if (job->state != JobState::kRunning) {
    return absl::FailedPreconditionError("the job is pending; only running jobs can complete");
  }
  if (completed != nullptr) ViewInto(*job, *completed);  // in place: no copy
  EndRunning(*job, &elapsed, now);
  return absl::OkStatus();
}

void AdmissionCore::EndRunning(Job& job, const double* elapsed, double now) {
  const TypeState& type = *job.type;
  KeyState& key = *job.key;
  if (elapsed == nullptr) {
    if (job.estimate != nullptr) estimates_.DropHold(job.estimate);
  } else if (job.estimate != nullptr) {
    estimates_.LearnHeld(job.estimate, type.config.default_cost, *elapsed, rule_.alpha, now);
  } else {
    estimates_.Learn(type.index, job.id, type.config.default_cost, *elapsed, rule_.alpha, now);
  }
  const double acc = rule_.reconcile && elapsed != nullptr
                         ? key.acc + (*elapsed - job.charge) / job.weight
                         : key.acc;
  Resource* resource = job.resource;
  const bool resource_was_full = IdBlocker(resource) != Blocker::kNone;
  if (WorkerState* w = workers_.Of(job)) w->running.erase(job.slot);
  auto release = [&] {
    key.acc = acc;
    workers_.ChangeUse(job, [&] {
      ForEachHold(*this, job, [](Usage& usage, std::int32_t amount) { usage.Release(amount); });
    });
  };
  // The key's lanes move only if its cost or (with limits) its admissibility may have changed.
  if (acc != key.acc || limits_in_use_) {
    Rekey(key, release);
  } else {
    release();
  }
  if (resource != nullptr) {
    if (resource_was_full) Reopen(*resource);  // its parked jobs may come first again
    ReleaseResource(resource);
  }
  if (job.joinable) job.type->join_points.Complete(job);
  keys_.MaybeIdle(key, now);
  jobs_.Free(job);
}

SweepResult AdmissionCore::Sweep(double now, std::vector<std::pair<std::string, double>>* evicted) {
  SweepResult result;
  result.keys_evicted = keys_.Evict(now, rule_.key_ttl.count(), rule_.sweep_batch, evicted);
  result.estimates_evicted = estimates_.Evict(now, rule_.estimate_ttl.count(), rule_.sweep_batch);
  return result;
}

void AdmissionCore::AdvanceTo(double now) {
  while (Job* due = steps_.ExpiryDueBy(now)) {
    Job& job = *due;
    expired_.push_back({{TicketOf(job), job.type->name, job.id, *job.key->name, job.type->index,
                         job.type->config.priority, job.lane->tier->priority, job.arrival},
                        TimedSteps::ExpiryAt(job)});
    Withdraw(job, now);
  }
  while (Job* job = steps_.TakePromotionDueBy(now)) Promote(*job);
}

void AdmissionCore::Promote(Job& job) {
  // Scheduled only when a tier above existed; tiers are never removed and the ceiling is fixed.
  TierState* above = TierAbove(*job.lane->tier);
  FAIRGATE_CORE_CHECK(above != nullptr, "an aging step was due with no tier above");
  ++promotions_total_;
  if (promotion_log_ != nullptr) {
    promotion_log_->push_back({TicketOf(job), job.type->name, job.id, *job.key->name,
                               job.lane->tier->priority, above->priority, steps_.NextStepAt(job),
                               job.arrival});
  }
  // A parked job stays parked: it moves to its parked lane of the tier above.
  MoveToLane(job, LaneFor(*job.key, *job.type, *above,
                          job.state == JobState::kParked ? job.resource : nullptr));
  ++job.promotions;
  SchedulePromotion(job);
}

TierState* AdmissionCore::TierAbove(const TierState& tier) const {
  if (!rule_.aging) return nullptr;
  for (std::size_t i = 1; i < tiers_.size(); ++i) {
    if (tiers_[i].get() == &tier) {
      TierState* above = tiers_[i - 1].get();
      return above->priority <= rule_.aging->ceiling ? above : nullptr;
    }
  }
  return nullptr;
}

std::vector<ExpiredJob> AdmissionCore::TakeExpired() {
  std::vector<ExpiredJob> taken;
  taken.swap(expired_);
  return taken;
}

bool AdmissionCore::StepDueBy(double now) const {
  // The conditions AdvanceTo's loops begin with.
  return !expired_.empty() || steps_.ExpiryDueBy(now) != nullptr || steps_.PromotionDueBy(now);
}

void AdmissionCore::SchedulePromotion(Job& job) {
  if (rule_.aging && !Paused(job) && TierAbove(*job.lane->tier) != nullptr) {
    steps_.SchedulePromotion(job);
  }
}

template <typename Affects, typename Apply>
void AdmissionCore::ChangePause(double now, Affects affects, Apply apply) {
  AdvanceTo(now);  // the steps due before the change are taken at their old pace
  std::vector<std::pair<Job*, bool>> changed;  // pending jobs it may affect, paused before
  if (rule_.aging) {
    for (Job& job : jobs_) {
      if ((job.state == JobState::kReady || job.state == JobState::kParked) && affects(job)) {
        changed.emplace_back(&job, Paused(job));
      }
    }
  }
  apply();
  for (auto [job, was_paused] : changed) {
    if (Paused(*job) == was_paused) continue;
    if (was_paused) {
      steps_.RestartClock(*job, now);
      SchedulePromotion(*job);
    } else {
      steps_.UnschedulePromotion(*job);
      steps_.StopClock(*job, now);
    }
  }
}

Status AdmissionCore::PauseType(std::string_view name, double now) {
  return SetTypePaused(name, true, now);
}

Status AdmissionCore::ResumeType(std::string_view name, double now) {
  return SetTypePaused(name, false, now);
}

Status AdmissionCore::SetTypePaused(std::string_view name, bool paused, double now) {
  if (Status s = CheckTime(now, paused ? "pause time" : "resume time"); !s.ok()) return s;
  auto it = types_by_name_.find(AsAbsl(name));
  if (it == types_by_name_.end()) {
    return absl::NotFoundError(absl::StrCat("unknown job type '", AsAbsl(name), "'"));
  }
  TypeState& type = *it->second;
  ChangePause(
      now, [&](const Job& job) { return job.type == &type; }, [&] { type.paused = paused; });
  Rehome(type);  // a paused type's jobs wait in lanes of their own
  return absl::OkStatus();
}

Status AdmissionCore::PauseKey(std::string_view name, double now) {
  return SetKeyPaused(name, true, now);
}

Status AdmissionCore::ResumeKey(std::string_view name, double now) {
  return SetKeyPaused(name, false, now);
}

Status AdmissionCore::SetKeyPaused(std::string_view name, bool paused, double now) {
  if (Status s = CheckTime(now, paused ? "pause time" : "resume time"); !s.ok()) return s;
  KeySettings& settings = keys_.SettingsFor(AsAbsl(name));
  limits_in_use_ = true;
  keys_.NotePaused(AsAbsl(name), paused);
  KeyState* state = keys_.Find(AsAbsl(name));
  if (state == nullptr) {
    // No job of the key to stop or restart, but the steps and expiries due by `now` are still
    // taken first, as at every other pause and resume.
    AdvanceTo(now);
    settings.paused = paused;
    return absl::OkStatus();
  }
  ChangePause(
      now, [&](const Job& job) { return job.key == state; },
      [&] { Rekey(*state, [&] { settings.paused = paused; }); });
  return absl::OkStatus();
}

StatusOr<double> AdmissionCore::MaxWaitToCeiling(std::string_view type_name) const {
  auto it = types_by_name_.find(AsAbsl(type_name));
  if (it == types_by_name_.end()) {
    return absl::NotFoundError(absl::StrCat("unknown job type '", AsAbsl(type_name), "'"));
  }
  int steps = 0;
  for (const TierState* tier = it->second->tier; (tier = TierAbove(*tier)) != nullptr;) ++steps;
  if (steps == 0) return 0.0;
  return rule_.aging->grace.count() + steps * rule_.aging->interval.count();
}

std::vector<std::pair<std::string, double>> AdmissionCore::HeaviestKeys(std::size_t n) const {
  std::vector<std::pair<std::string, double>> keys;
  keys.reserve(keys_.size());
  for (const auto& [name, key] : keys_) keys.emplace_back(name, key.acc);
  auto heavier = [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  };
  if (keys.size() > n) {
    std::partial_sort(keys.begin(), keys.begin() + static_cast<std::ptrdiff_t>(n), keys.end(),
                      heavier);
    keys.resize(n);
  } else {
    std::sort(keys.begin(), keys.end(), heavier);
  }
  return keys;
}

std::optional<std::uint32_t> AdmissionCore::TypeIndex(std::string_view type) const {
  auto it = types_by_name_.find(AsAbsl(type));
  if (it == types_by_name_.end()) return std::nullopt;
  return it->second->index;
}

const JobTypeConfig* AdmissionCore::TypeConfig(std::string_view type) const {
  auto it = types_by_name_.find(AsAbsl(type));
  return it == types_by_name_.end() ? nullptr : &it->second->config;
}

bool AdmissionCore::TypePaused(std::string_view type) const {
  auto it = types_by_name_.find(AsAbsl(type));
  return it != types_by_name_.end() && it->second->paused;
}

Status AdmissionCore::SetKeyWeight(std::string_view name, double weight) {
  if (Status s = ValidateKeyWeight(weight); !s.ok()) return s;
  keys_.SettingsFor(AsAbsl(name)).weight = weight;
  return absl::OkStatus();
}

Status AdmissionCore::SetKeyLimits(std::string_view name, const KeyLimits& limits) {
  if (Status s = ValidateKeyLimits(limits); !s.ok()) return s;
  KeySettings& settings = keys_.SettingsFor(AsAbsl(name));
  limits_in_use_ = true;
  auto apply = [&] {
    settings.limits = limits;
    settings.has_limits = true;
  };
  if (KeyState* key = keys_.Find(AsAbsl(name))) {
    Rekey(*key, apply);
  } else {
    apply();
  }
  return absl::OkStatus();
}

void AdmissionCore::CountCapSkip(Blocker blocker, DecisionSkips& skipped) {
  switch (blocker) {
    case Blocker::kGlobalCap:
      ++skipped.global_cap;
      return;
    case Blocker::kTierCap:
      ++skipped.tier_cap;
      return;
    case Blocker::kTypeCap:
      ++skipped.type_cap;
      return;
    case Blocker::kNoWorker:
      ++skipped.worker;
      return;
    case Blocker::kTypePaused:  // not a cap: nothing to count
      return;
    case Blocker::kNone:  // not of the type level: counted where their jobs wait, if at all
    case Blocker::kKeyPaused:
    case Blocker::kKeyLimit:
    case Blocker::kConflictLimit:
    case Blocker::kCount:
      break;
  }
  FAIRGATE_CORE_CHECK(false, "a type's lane set was skipped by no constraint of the type level");
}

bool AdmissionCore::Reserved(const KeyState& key) const {
  return limits_in_use_ && key.running.used() < keys_.LimitsOf(key).min_running;
}

KeyPlace AdmissionCore::PlaceOf(const KeyState& key) const {
  return {Reserved(key) ? 0u : kUnreservedRank, SortableBits(key.acc)};
}

double AdmissionCore::SjfOf(const TypeState& type, absl::string_view id,
                            const EnqueueRequest& request, double now) const {
  if (!type.config.shortest_first && !rule_.shortest_first) return 0;
  // Reading the estimate for the order is not a use: it does not keep the estimate alive.
  const double estimate = request.cost
                              ? *request.cost
                              : estimates_.Find(type.index, id).value_or(type.config.default_cost);
  return estimate + rule_.shortest_first_aging * now;
}

Status AdmissionCore::SetCapacity(int capacity) {
  if (capacity < 1 || capacity > rule_.max_concurrency) {
    return absl::InvalidArgumentError(absl::StrCat("capacity must be in [1, max_concurrency ",
                                                   rule_.max_concurrency, "], got ", capacity));
  }
  slots_.set_limit(capacity);
  return absl::OkStatus();
}

Snapshot AdmissionCore::TakeSnapshot() const {
  Snapshot s;
  s.max_concurrency = rule_.max_concurrency;
  s.capacity = slots_.limit();
  s.slots_in_use = slots_.used();
  s.pending = pending_;
  for (const auto& tier : tiers_) {
    int running = 0;
    for (const TypeState* type : tier->types) running += type->running.used();
    s.tiers.push_back({tier->priority, running, tier->pending, tier->aged_in, tier->slots.used()});
    s.running += running;
  }
  for (const auto& type : types_) {
    s.types.push_back({type->name, type->config.priority, type->config.max_concurrency,
                       type->running.used(), type->pending});
    s.types.back().paused = type->paused;
  }
  s.paused_keys.assign(keys_.paused().begin(), keys_.paused().end());
  std::vector<const WorkerState*> workers;
  for (const auto& w : workers_.all()) {
    if (w != nullptr) workers.push_back(w.get());
  }
  std::sort(workers.begin(), workers.end(),
            [](const WorkerState* a, const WorkerState* b) { return a->added < b->added; });
  for (const WorkerState* w : workers) {
    WorkerSnapshot& out = s.workers.emplace_back();
    out.name = w->name;
    out.slots = w->slots.limit();
    out.slots_in_use = w->slots.used();
    for (const TypeState* type : w->served) out.types.push_back(type->name);
  }
  s.types_without_worker = TypesWithoutWorker();
  s.keys_tracked = keys_.size();
  s.estimates_tracked = estimates_.size();
  return s;
}

std::vector<SavedEstimate> AdmissionCore::EstimatesUsedSince(double since) const {
  std::vector<SavedEstimate> out;
  estimates_.ForEachUsedSince(
      since, [&](std::uint32_t type, absl::string_view id, double value, double last_used) {
        out.push_back({types_[type]->name, std::string(id), value, last_used});
      });
  return out;
}

std::vector<SavedKey> AdmissionCore::KeyCosts(double now) const {
  std::vector<SavedKey> out;
  out.reserve(keys_.size());
  for (const auto& [name, key] : keys_) {
    out.push_back({name, key.acc, KeyTable::Idle(key) ? key.idle_since : now});
  }
  return out;
}

StatusOr<bool> AdmissionCore::RestoreEstimate(const SavedEstimate& estimate, double now) {
  auto type = types_by_name_.find(AsAbsl(estimate.type));
  if (type == types_by_name_.end()) {
    return absl::NotFoundError(absl::StrCat("unknown job type '", AsAbsl(estimate.type), "'"));
  }
  if (!std::isfinite(estimate.seconds) || estimate.seconds < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("a restored estimate must be finite and >= 0, got ", estimate.seconds));
  }
  const double last_used = std::min(estimate.last_used, now);
  if (last_used + rule_.estimate_ttl.count() <= now) return false;
  return estimates_.Restore(type->second->index, AsAbsl(estimate.id), estimate.seconds, last_used);
}

StatusOr<bool> AdmissionCore::RestoreKey(const SavedKey& saved, double now) {
  if (!std::isfinite(saved.accumulated_cost) || saved.accumulated_cost < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a restored accumulated cost must be finite and >= 0, got ", saved.accumulated_cost));
  }
  const double idle_since = std::min(saved.idle_since, now);
  if (idle_since + rule_.key_ttl.count() <= now) return false;
  return keys_.Restore(saved, idle_since);
}

StatusOr<bool> AdmissionCore::SetAccumulatedCost(std::string_view name, double cost) {
  if (!std::isfinite(cost) || cost < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("an accumulated cost must be finite and >= 0, got ", cost));
  }
  KeyState* key = keys_.Find(AsAbsl(name));
  if (key == nullptr) return false;
  Rekey(*key, [&] { key->acc = cost; });
  return true;
}

Status AdmissionCore::Charge(std::string_view name, double cost, double now) {
  if (Status s = CheckTime(now, "charge time"); !s.ok()) return s;
  if (!std::isfinite(cost) || cost < 0) {
    return absl::InvalidArgumentError(absl::StrCat("a charge must be finite and >= 0, got ", cost));
  }
  KeyState* known = keys_.Find(AsAbsl(name));
  KeyState& key = known != nullptr ? *known : keys_.Add(AsAbsl(name));
  keys_.Wake(key);
  Rekey(key, [&] { key.acc += cost / KeyTable::WeightOf(key); });
  keys_.MaybeIdle(key, now);
  return absl::OkStatus();
}

std::optional<double> AdmissionCore::AccumulatedCost(std::string_view key) const {
  const KeyState* state = keys_.Find(AsAbsl(key));
  if (state == nullptr) return std::nullopt;
  return state->acc;
}

std::optional<double> AdmissionCore::Estimate(std::string_view type, std::string_view id) const {
  auto it = types_by_name_.find(AsAbsl(type));
  if (it == types_by_name_.end()) return std::nullopt;
  return estimates_.Find(it->second->index, AsAbsl(id));
}

std::optional<JobView> AdmissionCore::Describe(JobTicket ticket) const {
  const Job* job = jobs_.Find(ticket);
  if (job == nullptr) return std::nullopt;
  return ViewOf(*job);
}

JobView AdmissionCore::ViewOf(const Job& job) const {
  JobView view;
  ViewInto(job, view);
  return view;
}

void AdmissionCore::ViewInto(const Job& job, JobView& view) const {
  view.type = job.type->name;
  view.id = job.id;
  view.key = *job.key->name;
  view.type_index = job.type->index;
  view.priority = job.type->config.priority;
  view.arrival = job.arrival;
  view.running = job.state == JobState::kRunning;
  view.effective_priority = view.running ? job.effective_priority : job.lane->tier->priority;
  view.charge = view.running ? job.charge : 0;
  view.worker = view.running && job.worker != 0 ? std::string_view(workers_.Of(job)->name)
                                                : std::string_view();
}

LaneSet& AdmissionCore::SetFor(TypeState& type, TierState& tier) {
  if (&tier == type.tier) return *type.home;
  auto group = std::find_if(tier.aged.begin(), tier.aged.end(),
                            [&](const auto& g) { return g->type == &type; });
  if (group == tier.aged.end()) {
    tier.aged.push_back(std::make_unique<AgedGroup>());
    tier.aged.back()->type = &type;
    group = tier.aged.end() - 1;
  }
  return (*group)->lanes;
}

Lane& AdmissionCore::LaneFor(KeyState& key, TypeState& type, TierState& tier, Resource* parked_on) {
  // A lane's set names its type, tier and resource: the walk compares sets only, which are in
  // the lanes' first 64 bytes.
  LaneSet& home = &tier == type.tier ? *type.home : SetFor(type, tier);
  WaitGroup* group = parked_on != nullptr ? &GroupFor(*parked_on, home) : nullptr;
  LaneSet* set = group != nullptr ? &group->lanes : &home;
  for (Lane* lane = key.lanes; lane != nullptr; lane = lane->next_in_key) {
    if (lane->set == set) return *lane;
  }
  Lane* lane;
  if (spare_lanes_.empty()) {
    lane = new Lane;
  } else {
    lane = spare_lanes_.back().release();
    spare_lanes_.pop_back();
  }
  lane->key = &key;
  lane->type = &type;
  lane->tier = &tier;
  lane->group = group;
  lane->set = set;
  lane->next_in_key = key.lanes;
  key.lanes = lane;
  return *lane;
}

WaitGroup& AdmissionCore::GroupFor(Resource& resource, LaneSet& home) {
  for (auto& group : resource.groups) {
    if (group->proxy.set == &home) return *group;
  }
  auto group = std::make_unique<WaitGroup>();
  group->resource = &resource;
  group->proxy.set = &home;
  group->proxy.group = group.get();
  resource.groups.push_back(std::move(group));
  return *resource.groups.back();
}

Resource* AdmissionCore::ResourceFor(const TypeState& type, absl::string_view id) {
  if (type.conflict_group == 0) return nullptr;
  auto it = resources_.find(IndexedNameView{type.conflict_group, id});
  if (it == resources_.end()) {
    it = resources_.emplace(IndexedName{type.conflict_group, std::string(id)}, Resource{}).first;
    it->second.name = &it->first;
    it->second.running.set_limit(type.config.conflict_limit);  // the same for the whole group
  }
  return &it->second;
}

void AdmissionCore::ReleaseResource(Resource* resource) {
  if (resource == nullptr || --resource->refs > 0) return;
  resources_.erase(resources_.find(resource->name->view()));
}

template <typename Mutate>
void AdmissionCore::Rekey(KeyState& key, Mutate mutate, const Lane* head_changed) {
  // The presences' order reads the key's cost live: take them out while it may change.
  for (TierPresence* p = key.tiers; p != nullptr; p = p->next_in_key) {
    p->tier->keys_by_acc.erase(p->tier->keys_by_acc.iterator_to(*p));
  }
  const bool was_admissible = Admissible(key);
  mutate();
  // A presence exists while the key has pending jobs in its tier (LeavePending frees the ones
  // that end).
  for (TierPresence* p = key.tiers; p != nullptr; p = p->next_in_key) {
    p->tier->keys_by_acc.insert(*p);
  }
  if (key.lanes == nullptr) return;
  if (!was_admissible || !Admissible(key)) {
    for (Lane* lane = key.lanes; lane != nullptr; lane = lane->next_in_key) SyncLane(*lane);
    return;
  }
  // Every lane of an admissible key is linked (each has jobs), and only `head_changed` has a
  // new head: the others move to the key's new place with the head their place already holds,
  // reading only their first 64 bytes, not their jobs (queue_nodes.h).
  const KeyPlace place = PlaceOf(key);
  for (Lane* lane = key.lanes; lane != nullptr; lane = lane->next_in_key) {
    if (lane == head_changed) {
      SyncLane(*lane);
    } else if (MoveLane(*lane, {place, lane->order.job}) && lane->group != nullptr) {
      SyncProxy(*lane->group);  // the group's best lane may have changed
    }
  }
}

void AdmissionCore::SyncLane(Lane& lane) {
  const bool admissible = Admissible(*lane.key);
  const bool held = lane.group == nullptr && !lane.ready.empty() && !admissible;
  if (held != lane.held) {
    lane.tier->held_lanes += held ? 1 : -1;
    lane.held = held;
  }
  std::optional<AdmissionOrder> order;
  if (!lane.ready.empty() && admissible) {
    order = AdmissionOrder{PlaceOf(*lane.key), lane.ready.front().place};
  }
  // The group's best lane may have changed.
  if (PlaceLane(lane, order) && lane.group != nullptr) SyncProxy(*lane.group);
}

void AdmissionCore::SyncProxy(WaitGroup& group) {
  std::optional<AdmissionOrder> order;
  if (!group.lanes.empty() && IdBlocker(group.resource) == Blocker::kNone) {
    order = group.lanes.front()->order;
  }
  PlaceLane(group.proxy, order);
}

bool AdmissionCore::PlaceLane(Lane& lane, const std::optional<AdmissionOrder>& order) {
  if (order ? lane.linked && lane.order == *order : !lane.linked) return false;
  if (!order) {
    UnlinkLane(lane);
  } else if (lane.linked) {
    MoveLane(lane, *order);
  } else {
    lane.order = *order;
    lane.set->insert(lane);
    lane.linked = true;
  }
  return true;
}

bool AdmissionCore::MoveLane(Lane& lane, const AdmissionOrder& order) {
  if (lane.order == order) return false;
  lane.order = order;
  lane.set->Relink(lane);
  return true;
}

void AdmissionCore::Rehome(TypeState& type) {
  LaneSet* home = Shares(type) ? &type.tier->shared : &type.lanes;
  if (type.home == home) return;
  std::vector<Job*> moved;  // its pending jobs in its own tier: in lanes of the old home
  for (Job& job : jobs_) {
    if ((job.state == JobState::kReady || job.state == JobState::kParked) && job.type == &type &&
        job.lane->tier == type.tier) {
      moved.push_back(&job);
    }
  }
  type.home = home;
  // Each keeps its place; a parked one stays parked, in its resource's wait group of the new home.
  for (Job* job : moved) {
    Resource* parked_on = job->state == JobState::kParked ? job->resource : nullptr;
    MoveToLane(*job, LaneFor(*job->key, type, *type.tier, parked_on));
  }
}

void AdmissionCore::SyncProxies(Resource& resource) {
  for (auto& group : resource.groups) SyncProxy(*group);
}

void AdmissionCore::Reopen(Resource& resource) {
  // A group of a few parked lanes sends their first jobs home at once: as cheap as linking the
  // proxy, and their keys keep fewer lanes to relink at each charge (bench/HISTORY.md). A larger
  // group is left to its proxy, so that a release costs O(log n) however many wait.
  static constexpr std::size_t kReturnedAtOnce = 4;
  for (auto& group : resource.groups) {
    if (!group->lanes.empty() && group->lanes.size() <= kReturnedAtOnce) {
      Lane* lanes[kReturnedAtOnce];
      std::size_t n = 0;
      group->lanes.ForEach([&](Lane* lane) { lanes[n++] = lane; });
      // Each goes home; the rest of its lane stays parked, behind it (and behind the proxy).
      for (std::size_t i = 0; i < n; ++i) Unpark(*lanes[i]->ready.front().job);
    }
    SyncProxy(*group);
  }
}

void AdmissionCore::UnlinkLane(Lane& lane) {
  lane.set->erase(lane);
  lane.linked = false;
}

void AdmissionCore::InsertIntoLane(Job& job) {
  job.lane->ready.insert(ReadyEntryOf(job));
  job.state = job.lane->group != nullptr ? JobState::kParked : JobState::kReady;
  SyncLane(*job.lane);
}

void AdmissionCore::RemoveFromLane(Job& job) {
  job.lane->ready.erase(ReadyEntryOf(job));
  SyncLane(*job.lane);
}

void AdmissionCore::MoveToLane(Job& job, Lane& target) {
  RemoveFromLane(job);
  LeaveLane(job);
  JoinLane(job, target);
  InsertIntoLane(job);
}

void AdmissionCore::Park(Job& job) {
  ++parked_in_decision_;
  job.was_parked = true;
  MoveToLane(job, LaneFor(*job.key, *job.type, *job.lane->tier, job.resource));
}

void AdmissionCore::Unpark(Job& job) {
  MoveToLane(job, LaneFor(*job.key, *job.type, *job.lane->tier));
}

void AdmissionCore::JoinLane(Job& job, Lane& lane) {
  job.lane = &lane;
  ++lane.pending;
  if (lane.tier != job.type->tier) ++lane.tier->aged_in;
}

void AdmissionCore::LeaveLane(Job& job) {
  Lane* lane = job.lane;
  job.lane = nullptr;
  if (lane->tier != job.type->tier) --lane->tier->aged_in;
  if (--lane->pending == 0) {
    KeyState& key = *lane->key;
    Lane** link = &key.lanes;
    while (*link != lane) link = &(*link)->next_in_key;
    *link = lane->next_in_key;
    if (lane->linked) UnlinkLane(*lane);
    // Held means ready jobs: the last SyncLane of a lane that empties saw none.
    FAIRGATE_CORE_CHECK(!lane->held, "an empty lane was still held");
    WaitGroup* group = lane->group;
    if (spare_lanes_.size() < kSpareLanes) {
      // Nothing to reset: an empty lane has no jobs (`ready` empty, `pending` 0), is unlinked and
      // not held, LaneFor sets its key, type, tier, group and set, and its order is read only
      // while it is linked.
      spare_lanes_.emplace_back(lane);
    } else {
      delete lane;
    }
    if (group != nullptr) SyncProxy(*group);
  }
}

void AdmissionCore::LeavePending(Job& job) {
  steps_.Forget(job);
  KeyState& key = *job.key;
  TypeState& type = *job.type;
  LeaveLane(job);
  --key.pending;
  --type.pending;
  --type.tier->pending;
  --pending_;
  if (rule_.idle_catch_up) {
    TierPresence** link = &key.tiers;
    while ((*link)->tier != type.tier) link = &(*link)->next_in_key;
    TierPresence* presence = *link;
    if (--presence->pending == 0) {
      if (presence->tier_hook.is_linked()) {
        type.tier->keys_by_acc.erase(type.tier->keys_by_acc.iterator_to(*presence));
      }
      *link = presence->next_in_key;
      delete presence;
    }
  }
}

}  // namespace fairgate::core

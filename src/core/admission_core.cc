#include "core/admission_core.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/arguments.h"
#include "core/check.h"

namespace fairgate::core {
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
  std::unique_ptr<AdmissionCore> core(new AdmissionCore(rule));
  // The latency rule's cap starts at its minimum (fairgate/latency_capacity.h).
  if (rule.latency_capacity) core->types_.SetCapacity(rule.latency_capacity->min);
  return core;
}

AdmissionCore::AdmissionCore(const RuleOptions& rule)
    : rule_(rule),
      types_(rule.max_concurrency, rule.aging, rule.rate_limit, rule.lending, workers_),
      keys_(rule.default_key_limits),
      steps_(rule.aging) {}

AdmissionCore::~AdmissionCore() {
  // Hooks are safe-mode: unlink every node before the containers that own them die.
  for (auto& tier : types_.tiers()) {
    tier->keys_by_acc.clear();
    tier->groups_by_acc.clear();
  }
  for (auto& [name, key] : keys_) {
    LaneIndex::FreeLanesOf(key);
    while (TierPresence* presence = key.tiers) {
      key.tiers = presence->next_in_key;
      UnlinkTierPresence(*presence);
      delete presence;
    }
  }
}

Status AdmissionCore::RegisterType(std::string_view name, const JobTypeConfig& config) {
  bool added = false;
  if (StatusOr<TypeState*> type = types_.Register(name, config, added); !type.ok()) {
    return type.status();
  }
  if (added && workers_.in_use()) workers_.RebuildIndex(types_.all());
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
  TypeState* found = types_.Find(request.type);
  if (found == nullptr) [[unlikely]] {
    return types_.FindOrError(request.type).status();
  }
  TypeState& type = *found;
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
  if (request.refuse_without_token || type.config.refuse_without_token) {
    if (Status s = RefuseWithoutToken(type, known, request.key, now); !s.ok()) {
      // A leased bucket without a token wants a lease even with nothing pending under it: a
      // type whose every call is refused so would never be given one.
      for (TokenBucket* bucket : {&types_.global_rate(), &type.rate}) {
        if (bucket->leased() && !bucket->HasToken(now)) bucket->Ask();
      }
      if (known != nullptr) keys_.AskFor(*known);
      return s;
    }
  }
  if (type.shed != nullptr) [[unlikely]] {
    if (Status s = ShedForArrival(type, request.key, known, now); !s.ok()) return s;
  }
  KeyState& key = known != nullptr ? *known : keys_.Add(AsAbsl(request.key));
  TierState& tier = *type.tier;
  // The key's group is tracked while one of its keys has a job.
  const bool grouping = lanes_.grouping();
  if (grouping && key.settings != nullptr && key.settings->group != nullptr) [[unlikely]] {
    groups_.TrackAwake(*key.settings->group);
  }
  // None of the key's lanes is linked yet: a leased bucket's hold may change without a Rekey.
  if (key.pending == 0 && keys_.leased()) keys_.Arrive(key);

  if (KeyTable::Idle(key)) {
    keys_.Wake(key);
    // (A key with jobs has its group busy: only an idle key's group may be idle.)
    if (rule_.idle_catch_up) CatchUp(key, tier);
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
  job.impatient = request.refuse_without_token || type.config.refuse_without_token;
  if (joinable) type.join_points.Open(job);
  job.resource = lanes_.RefResource(type, AsAbsl(request.id));
  if (admission != nullptr && pending_ == 0 && AdmitsAtOnce(job, now)) {
    AdmitAtOnce(job, now, admission->emplace());
    return TicketOf(job);
  }
  if (grouping) {
    EnterPending<true>(job, now);
  } else {
    EnterPending<false>(job, now);
  }
  const JobTicket ticket = TicketOf(job);
  if (admission != nullptr && !AdmitsNothing(now)) *admission = NextAdmission(now);
  return ticket;
}

// The buckets are asked in the order of the one list (global, type, key); the refusal names the
// first without a token and waits for the latest of their next tokens.
Status AdmissionCore::RefuseWithoutToken(const TypeState& type, const KeyState* key,
                                         std::string_view key_name, double now) const {
  std::string first;
  double due = now;
  auto missing = [&](std::optional<double> at, auto name) {
    if (!at) return;
    if (first.empty()) first = name();
    due = std::max(due, *at);
  };
  const TokenBucket& global = types_.global_rate();
  if (global.limited() && !global.HasToken(now) && !global.AwaitsLease(now)) {
    missing(global.NextTokenAt(now), [] { return std::string(kGlobalRateName); });
  }
  if (type.rate.limited() && !type.rate.HasToken(now) && !type.rate.AwaitsLease(now)) {
    missing(type.rate.NextTokenAt(now), [&] { return TypeRateName(type.name); });
  }
  if (key != nullptr && keys_.rates_in_use()) {
    missing(keys_.MissingTokenAt(*key, now), [&] { return KeyRateName(key_name); });
  }
  if (first.empty()) return absl::OkStatus();
  return RefusedForToken(first, due - now);
}

bool AdmissionCore::AdmitsAtOnce(const Job& job, double now) const {
  // NextAdmission would take no expiry or aging step but the job's own (nothing else is pending:
  // the caller's test, the first and the cheapest), and Pick would find every tier but the job's
  // empty, no lane held (lanes exist only with pending jobs) and no other type's lane to count as
  // skipped: it admits the job exactly when the checks Pick makes let it through (its type's caps
  // in TypeTable::Fits, its key in SyncLane's Admissible, its resource in FrontOf: the one list,
  // BlockerOf), counting no skip.
  // With lending, a job its tier's cap holds back is admitted as a borrower: Pick's first look
  // finds nothing (nothing else is pending), and its second asks BlockerOf<true>.
  const TypeState& type = *job.type;
  return (BlockerOf(job, now) == Blocker::kNone ||
          (types_.lends() && BlockerOf<true>(job, now) == Blocker::kNone)) &&
         !(TimedSteps::Expires(job) && TimedSteps::ExpiryAt(job) <= now) &&
         !(rule_.aging && types_.TierAbove(*type.tier) != nullptr && steps_.NextStepAt(job) <= now);
}

void AdmissionCore::AdmitAtOnce(Job& job, double now, Admission& admission) {
  if (workers_.in_use()) {
    job.worker = workers_.Choose(*job.type)->index + 1;  // AdmitsAtOnce: one has room
  }
  EstimateTable::Entry* estimate =
      DescribeAdmission(job, job.type->tier->priority, DecisionSkips{}, now, admission);
  // AdmitsAtOnce let it through as a borrower exactly when its tier's cap has no room for it.
  admission.borrowed = !job.type->tier->slots.Fits(job.type->config.slots);
  // What Admit does besides is for a job in a lane, a tier presence and timed steps, and counted
  // as pending: this one is in none of them, and its key, with nothing pending, has no lanes to
  // move.
  ChargeAndHold(job, admission, now);
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
  lanes_.Remove(job);
  LeavePending(job, now);
  lanes_.UnrefResource(job.resource);
  keys_.MaybeIdle(*job.key, now);
  if (GroupState* group = GroupTable::Of(*job.key)) groups_.MaybeIdle(*group, now);
  jobs_.Free(job);
}

std::optional<Admission> AdmissionCore::NextAdmission(double now) {
  AdvanceTo(now);
  if (full()) return std::nullopt;
  // No token of the global rate limit: no job may start, whatever the order (NextTokenAt).
  if (types_.rates_in_use() && types_.global_rate().limited() &&
      !types_.global_rate().HasToken(now)) {
    if (pending_ > 0) types_.global_rate().CountRefusal();
    return std::nullopt;
  }
  DecisionSkips skipped;
  const bool grouping = lanes_.grouping();
  lanes_.StartDecision();
  WorkerState* reserved = nullptr;
  Job* job = workers_.in_use() ? PickReserved(now, reserved) : nullptr;
  if (job == nullptr) {
    job = grouping ? Pick<false, true>(skipped, now) : Pick(skipped, now);
  }
  // Lending: the slots no admissible job wanted go to the first borrower in the order.
  bool borrowed = false;
  if (job == nullptr && types_.lends()) {
    job = grouping ? Pick<true, true>(skipped, now) : Pick<true>(skipped, now);
    borrowed = job != nullptr;
  }
  if (job != nullptr && workers_.in_use()) {
    job->worker = (reserved != nullptr ? reserved : workers_.Choose(*job->type))->index + 1;
  }
  if (workers_.reserving()) workers_.ClearReservations();
  if (job == nullptr) return std::nullopt;
  skipped.conflict = lanes_.parked_in_decision();
  std::optional<Admission> admission(std::in_place);
  if (grouping) {
    Admit<true>(*job, skipped, now, *admission);
  } else {
    Admit<false>(*job, skipped, now, *admission);
  }
  admission->worker_reserved = reserved != nullptr;
  admission->borrowed = borrowed;
  if (job->type->shed != nullptr) [[unlikely]]
    ShedAfterAdmission(*job->type, now);
  return admission;
}

Job* AdmissionCore::PickReserved(double now, WorkerState*& worker) {
  const double after = rule_.sole_worker_reserve_after.count();
  for (TypeState* type : workers_.sole_types()) {
    if (type->pending == 0 || now - type->starved_since < after) continue;
    if (types_.CapBlocker(*type, now) != Blocker::kNone) continue;
    Job* job = FrontOfType(*type);
    if (job == nullptr) continue;  // held back by its keys or its resources, not by the worker
    workers_.Claim(*type, job);
  }
  return workers_.FirstClaim(worker);
}

Job* AdmissionCore::FrontOfType(TypeState& type) {
  for (auto& tier : types_.tiers()) {
    if (tier.get() == type.tier) return lanes_.FrontOf(*type.home);
    if (tier->aged_in == 0) continue;
    for (auto& group : tier->aged) {
      if (group->type != &type) continue;
      if (Job* job = lanes_.FrontOf(group->lanes)) return job;
      break;
    }
  }
  return nullptr;
}

template <bool kBorrowing, bool kGrouping>
Job* AdmissionCore::Pick(DecisionSkips& skipped, double now) {
  for (auto& tier : types_.tiers()) {
    Job* best = nullptr;
    // The best head's place: with groups the group's place before the lane's order.
    std::conditional_t<kGrouping, GroupedLaneEntry, AdmissionOrder> best_place;
    // The head of a lane set, if it goes before the best so far. A linked lane's entry holds its
    // head's order, kept current by SyncLane: read, not recomputed.
    auto consider = [&](LaneSet& lanes) {
      Job* head = lanes_.FrontOf(lanes);
      if (head == nullptr) return;
      if constexpr (kGrouping) {
        const GroupedLaneEntry place = LaneIndex::PlaceOfHead(*head);
        if (best == nullptr || place < best_place) {
          best = head;
          best_place = place;
        }
      } else if (best == nullptr || head->lane->order < best_place) {
        best = head;
        best_place = head->lane->order;
      }
    };
    if constexpr (!kBorrowing) skipped.key_limit += static_cast<int>(tier->held_lanes);
    // Jobs that aged into this tier go ahead of its own; each still needs room in its own type's
    // and its own tier's caps.
    if (tier->aged_in > 0) {
      for (auto& group : tier->aged) {
        if (types_.Fits<kBorrowing>(*group->type, group->lanes, skipped, now)) {
          consider(group->lanes);
        }
      }
    }
    if (best == nullptr && tier->pending > 0) {
      // No type of the tier fits (each takes a slot at least); a borrower's tier cap is the
      // global cap past the slots kept back.
      if (kBorrowing ? !types_.global_cap().Fits(1 + types_.kept_back()) : tier->slots.Full()) {
        if constexpr (!kBorrowing) ++skipped.tier_cap;
      } else {
        // The sharing types' set: nothing but the tier's cap and the global one, both with
        // room here, can hold its jobs back (Shares).
        if (!tier->shared.empty()) consider(tier->shared);
        for (TypeState* type : tier->types) {
          if (type->home == &type->lanes &&
              types_.Fits<kBorrowing>(*type, type->lanes, skipped, now)) {
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
  admission.reserved = keys_.Reserved(key);
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

template <bool kGrouping>
void AdmissionCore::Admit(Job& job, const DecisionSkips& skipped, double now,
                          Admission& admission) {
  KeyState& key = *job.key;
  EstimateTable::Entry* estimate =
      DescribeAdmission(job, job.lane->tier->priority, skipped, now, admission);
  steps_.UnschedulePromotion(job);
  steps_.UnscheduleExpiry(job);
  // One pass over the key's lanes covers the new head, the new cost and the new running count.
  // The key is admissible: the job was picked from a linked lane.
  Lane* lane = job.lane;
  lanes_.Rekey<kGrouping>(
      key,
      [&] {
        lane->ready.erase(ReadyEntryOf(job));
        LeavePending<kGrouping>(job, now);  // frees the lane if this was its last job
        ChargeAndHold<kGrouping>(job, admission, now);
      },
      lane->pending > 1 ? lane : nullptr, /*admissible_before=*/true);
  job.type->starved_since = now;  // an admission of the type restarts its clock
  StartRunning(job, admission, estimate);
}

template <bool kGrouping>
void AdmissionCore::ChargeAndHold(Job& job, const Admission& admission, double now) {
  job.key->acc = job.key->acc + admission.charge / admission.weight;
  if constexpr (kGrouping) {
    if (GroupState* group = GroupTable::Of(*job.key)) {
      group->acc = group->acc + admission.charge / GroupTable::WeightOf(*group);
    }
  }
  // One token of each rate limit the job is under, whatever its slots (fairgate/rate_limit.h).
  if (types_.rates_in_use()) {
    types_.global_rate().Take(now);
    job.type->rate.Take(now);
  }
  // Inside the Rekey of Admit (a key left without a token has its lanes held there), or of no
  // lanes at all (AdmitAtOnce: nothing else of the key is pending).
  if (keys_.rates_in_use()) keys_.TakeToken(*job.key, now);
  workers_.ChangeUse(job, [&] {
    ForEachHold(*this, job, [](Usage& usage, std::int32_t amount) { usage.Acquire(amount); });
  });
  if (job.worker != 0) workers_.Of(job)->running.insert(job.slot);
}

// Inlined likewise.
[[gnu::always_inline]] inline void AdmissionCore::StartRunning(Job& job, const Admission& admission,
                                                               EstimateTable::Entry* estimate) {
  // A resource this fills hides the jobs parked on it again.
  if (LaneIndex::IdBlocker(job.resource) != Blocker::kNone) lanes_.SyncProxies(*job.resource);
  // RunSync requests for its id join it while it runs, Submits do not.
  if (job.joinable) job.type->join_points.Start(job);
  // No longer pending: its pending facts give way to its running ones (queue_nodes.h).
  job.charge = admission.charge;
  job.weight = admission.weight;
  job.effective_priority = admission.effective_priority;
  job.estimate = estimate;  // in the lane's place: the job has left it (or never entered one)
  job.state = JobState::kRunning;
}

Status AdmissionCore::CompleteRunning(JobTicket ticket, const double* elapsed, double now,
                                      JobView* completed, bool charge_back) {
  if (Status s = CheckTime(now, "completion time"); !s.ok()) return s;
  if (elapsed != nullptr && (!std::isfinite(*elapsed) || *elapsed < 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("elapsed time must be finite and >= 0, got ", *elapsed));
  }
  Job* job = jobs_.Find(ticket);
  if (job == nullptr) return absl::NotFoundError("no pending or running job has this ticket");
  if (job->state != JobState::kRunning) {
    return absl::FailedPreconditionError("the job is pending; only running jobs can complete");
  }
  if (completed != nullptr) ViewInto(*job, *completed);  // in place: no copy
  if (lanes_.grouping()) {
    EndRunning<true>(*job, elapsed, now, charge_back);
  } else {
    EndRunning<false>(*job, elapsed, now, charge_back);
  }
  return absl::OkStatus();
}

template <bool kGrouping>
void AdmissionCore::EndRunning(Job& job, const double* elapsed, double now, bool charge_back) {
  const TypeState& type = *job.type;
  KeyState& key = *job.key;
  if (elapsed == nullptr) {
    if (job.estimate != nullptr) estimates_.DropHold(job.estimate);
  } else if (job.estimate != nullptr) {
    estimates_.LearnHeld(job.estimate, type.config.default_cost, *elapsed, rule_.alpha, now);
  } else {
    estimates_.Learn(type.index, job.id, type.config.default_cost, *elapsed, rule_.alpha, now);
  }
  const double acc = charge_back ? key.acc + (0 - job.charge) / job.weight
                     : rule_.reconcile && elapsed != nullptr
                         ? key.acc + (*elapsed - job.charge) / job.weight
                         : key.acc;
  // The key's group now (it may have moved since the admission) is reconciled at its weight now.
  GroupState* group = kGrouping ? GroupTable::Of(key) : nullptr;
  const double group_acc = group != nullptr ? ReconciledCost(*group, job, elapsed, charge_back) : 0;
  Resource* resource = job.resource;
  const bool resource_was_full = LaneIndex::IdBlocker(resource) != Blocker::kNone;
  if (WorkerState* w = workers_.Of(job)) w->running.erase(job.slot);
  auto release = [&] {
    key.acc = acc;
    if (group != nullptr) group->acc = group_acc;
    workers_.ChangeUse(job, [&] {
      ForEachHold(*this, job, [](Usage& usage, std::int32_t amount) { usage.Release(amount); });
    });
  };
  // The key's lanes move only if its cost or (with limits) its admissibility may have changed.
  if (acc != key.acc || keys_.limits_in_use() ||
      (group != nullptr && (group_acc != group->acc || groups_.limits_in_use()))) {
    lanes_.Rekey<kGrouping>(key, release);
  } else {
    release();
  }
  if (resource != nullptr) {
    if (resource_was_full) lanes_.Reopen(*resource);  // its parked jobs may come first again
    lanes_.UnrefResource(resource);
  }
  if (job.joinable) job.type->join_points.Complete(job);
  keys_.MaybeIdle(key, now);
  if (group != nullptr) groups_.MaybeIdle(*group, now);
  jobs_.Free(job);
}

// The general form, for AdmissionCore's other files (a lost worker's jobs).
template void AdmissionCore::EndRunning<true>(Job&, const double*, double, bool);

double AdmissionCore::ReconciledCost(const GroupState& group, const Job& job, const double* elapsed,
                                     bool charge_back) const {
  const double weight = GroupTable::WeightOf(group);
  return charge_back                             ? group.acc + (0 - job.charge) / weight
         : rule_.reconcile && elapsed != nullptr ? group.acc + (*elapsed - job.charge) / weight
                                                 : group.acc;
}

SweepResult AdmissionCore::Sweep(double now, std::vector<std::pair<std::string, double>>* evicted) {
  SweepResult result;
  result.keys_evicted = keys_.Evict(now, rule_.key_ttl.count(), rule_.sweep_batch, evicted);
  result.groups_evicted = groups_.Evict(now, rule_.key_ttl.count(), rule_.sweep_batch);
  result.estimates_evicted = estimates_.Evict(now, rule_.estimate_ttl.count(), rule_.sweep_batch);
  return result;
}

void AdmissionCore::AdvanceTo(double now) {
  // Keys whose rate limit's next token is due: their lanes are linked again.
  keys_.ReleaseDue(now, [&](KeyState& key) { lanes_.Rekey(key, [&] { keys_.Unhold(key); }); });
  while (Job* due = steps_.ExpiryDueBy(now)) {
    Job& job = *due;
    expired_.push_back(ExpiredOf(job, TimedSteps::ExpiryAt(job)));
    Withdraw(job, now);
  }
  while (Job* job = steps_.TakePromotionDueBy(now)) Promote(*job);
}

void AdmissionCore::Promote(Job& job) {
  // Scheduled only when a tier above existed; tiers are never removed and the ceiling is fixed.
  TierState* above = types_.TierAbove(*job.lane->tier);
  FAIRGATE_CORE_CHECK(above != nullptr, "an aging step was due with no tier above");
  if (steps_.CountPromotion()) {
    steps_.LogPromotion({TicketOf(job), job.type->name, job.id, *job.key->name,
                         job.lane->tier->priority, above->priority, steps_.NextStepAt(job),
                         job.arrival});
  }
  // A parked job stays parked: it moves to its parked lane of the tier above.
  lanes_.Move(job, lanes_.LaneFor(*job.key, *job.type, *above,
                                  job.state == JobState::kParked ? job.resource : nullptr));
  ++job.promotions;
  SchedulePromotion(job);
}

std::vector<ExpiredJob> AdmissionCore::TakeExpired() {
  std::vector<ExpiredJob> taken;
  taken.swap(expired_);
  return taken;
}

StatusOr<TokenBucket*> AdmissionCore::BucketOf(std::string_view type) {
  if (type.empty()) return &types_.global_rate();
  StatusOr<TypeState*> found = types_.FindOrError(type);
  if (!found.ok()) return found.status();
  return &(*found)->rate;
}

Status AdmissionCore::LeaseTokens(std::string_view type) {
  StatusOr<TokenBucket*> bucket = BucketOf(type);
  if (!bucket.ok()) return bucket.status();
  if (!(*bucket)->limited()) {
    return absl::FailedPreconditionError(
        absl::StrCat(type.empty() ? std::string("the global bucket")
                                  : absl::StrCat("job type '", AsAbsl(type), "'"),
                     " has no rate limit to lease tokens of"));
  }
  if ((*bucket)->leased()) return absl::OkStatus();
  (*bucket)->Lease();
  leased_.push_back({std::string(type), *bucket, type.empty() ? nullptr : types_.Find(type)});
  return absl::OkStatus();
}

Status AdmissionCore::LeaseKeyTokens() {
  if (keys_.leased()) return absl::OkStatus();
  for (const auto& [name, key] : keys_) {
    if (!KeyTable::Idle(key)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "keys' rate limits are leased before any job is enqueued; key '", name, "' has jobs"));
    }
  }
  keys_.LeaseBuckets();
  return absl::OkStatus();
}

Status AdmissionCore::GrantTokens(const BucketName& name, double tokens, double due, double now) {
  if (Status s = CheckTime(now, "grant time"); !s.ok()) return s;
  if (!std::isfinite(tokens) || tokens < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("granted tokens must be finite and >= 0, got ", tokens));
  }
  if (name.of == BucketName::Of::kKey) {
    if (!keys_.leased()) {
      return absl::FailedPreconditionError("tokens are granted only to a leased bucket");
    }
    KeyState* key = keys_.Find(AsAbsl(name.name));
    if (key == nullptr) return absl::OkStatus();  // forgotten: its lease goes with it
    if (keys_.GrantFrees(*key, tokens)) {
      lanes_.Rekey(*key, [&] { keys_.Grant(*key, tokens, due); });
    } else if (keys_.Grant(*key, tokens, due) && key->pending > 0) {
      RefuseImpatient(key, nullptr, due, now);
    }
    return absl::OkStatus();
  }
  const bool global = name.of == BucketName::Of::kGlobal;
  StatusOr<TokenBucket*> bucket = BucketOf(global ? std::string_view() : name.name);
  if (!bucket.ok()) return bucket.status();
  if (!(*bucket)->leased()) {
    return absl::FailedPreconditionError("tokens are granted only to a leased bucket");
  }
  (*bucket)->Grant(tokens, due);
  const TypeState* type = global ? nullptr : types_.Find(name.name);  // BucketOf found it
  if (!(*bucket)->HasToken(now) && (global ? pending_ : type->pending) > 0) {
    RefuseImpatient(nullptr, type, due, now);
  }
  return absl::OkStatus();
}

void AdmissionCore::RefuseImpatient(const KeyState* key, const TypeState* type, double due,
                                    double now) {
  std::vector<Job*> refused;
  auto collect = [&](const KeyState& of) {
    for (Lane* lane = of.lanes; lane != nullptr; lane = lane->next_in_key) {
      lane->ready.ForEach([&](Job& job) {
        if (job.impatient && (type == nullptr || job.type == type)) refused.push_back(&job);
      });
    }
  };
  if (key != nullptr) {
    collect(*key);
  } else {
    for (const auto& entry : keys_) {
      if (entry.second.pending > 0) collect(entry.second);
    }
  }
  std::sort(refused.begin(), refused.end(),
            [](const Job* a, const Job* b) { return a->seq < b->seq; });
  for (Job* job : refused) {
    expired_.push_back(ExpiredOf(*job, now));
    expired_.back().token_due = due;
    expired_.back().token_of = key != nullptr    ? KeyRateName(*key->name)
                               : type != nullptr ? TypeRateName(type->name)
                                                 : std::string(kGlobalRateName);
    Withdraw(*job, now);
  }
}

ExpiredJob AdmissionCore::ExpiredOf(const Job& job, double at) {
  return {{TicketOf(job), job.type->name, job.id, *job.key->name, job.type->index,
           job.type->config.priority, job.lane->tier->priority, job.arrival},
          at,
          std::nullopt,
          {},
          {}};
}

bool AdmissionCore::Wants(const LeasedBucket& leased) const {
  const std::int64_t pending = leased.type == nullptr ? pending_ : leased.type->pending;
  // HasToken reads no time for a leased bucket.
  return (pending > 0 || leased.bucket->asked()) && !leased.bucket->HasToken(0);
}

std::vector<std::pair<BucketName, RateLimit>> AdmissionCore::BucketsToLease() const {
  std::vector<std::pair<BucketName, RateLimit>> wanted;
  for (const LeasedBucket& leased : leased_) {
    if (!Wants(leased)) continue;
    wanted.emplace_back(
        leased.type == nullptr ? BucketName::Global() : BucketName::Type(leased.name),
        leased.bucket->limit());
  }
  keys_.ForEachAsking([&](const KeyState& key, const RateLimit& limit) {
    wanted.emplace_back(BucketName::Key(*key.name), limit);
  });
  return wanted;
}

bool AdmissionCore::WantsTokens(double now) const {
  return keys_.AsksBy(now) ||
         std::any_of(leased_.begin(), leased_.end(), [&](const LeasedBucket& leased) {
           return Wants(leased) && leased.bucket->AwaitsLease(now);
         });
}

std::optional<double> AdmissionCore::NextTokenAt(double now) const {
  if (pending_ == 0 || !(types_.rates_in_use() || keys_.rates_in_use())) return std::nullopt;
  std::optional<double> next;
  auto missing = [&](const TokenBucket& bucket) {
    // A leased bucket's tokens come with the runtime's next lease, not with time (BucketsToLease).
    if (!bucket.limited() || bucket.leased() || bucket.HasToken(now)) return;
    const double at = bucket.NextTokenAt(now);
    if (!next || at < *next) next = at;
  };
  missing(types_.global_rate());
  for (const auto& type : types_.all()) {
    if (type->pending > 0) missing(type->rate);
  }
  // A key held by its rate (perhaps with nothing pending: then the decision is idle).
  if (const std::optional<double> release = keys_.NextRelease();
      release && (!next || *release < *next)) {
    next = std::max(*release, now);
  }
  return next;
}

bool AdmissionCore::StepDueBy(double now) const {
  // The conditions AdvanceTo's loops begin with.
  return !expired_.empty() || steps_.ExpiryDueBy(now) != nullptr || steps_.PromotionDueBy(now);
}

void AdmissionCore::SchedulePromotion(Job& job) {
  if (rule_.aging && !Paused(job) && types_.TierAbove(*job.lane->tier) != nullptr) {
    steps_.SchedulePromotion(job);
  }
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

template <bool kGrouping>
void AdmissionCore::EnterPending(Job& job, double now) {
  KeyState& key = *job.key;
  TypeState& type = *job.type;
  TierState& tier = *type.tier;
  lanes_.JoinLane(job, lanes_.LaneFor<kGrouping>(key, type, tier));
  ++key.pending;
  if constexpr (kGrouping) {
    if (GroupState* group = GroupTable::Of(key)) ++group->pending;
  }
  if (type.pending == 0) type.starved_since = now;
  ++type.pending;
  ++tier.pending;
  ++pending_;
  if (rule_.idle_catch_up) EnterTier(key, tier);
  if (type.shed != nullptr) [[unlikely]]
    type.shed->Enter(job.arrival, job.seq, now);
  lanes_.Insert<kGrouping>(job);
  if (rule_.aging && Paused(job)) steps_.StopClock(job, now);
  SchedulePromotion(job);
  steps_.ScheduleExpiry(job);
}

template <bool kGrouping>
void AdmissionCore::LeavePending(Job& job, double now) {
  steps_.Forget(job);
  KeyState& key = *job.key;
  TypeState& type = *job.type;
  if (type.shed != nullptr) [[unlikely]]
    type.shed->Leave(job.arrival, job.seq, now);
  lanes_.LeaveLane<kGrouping>(job);
  --key.pending;
  if constexpr (kGrouping) {
    if (GroupState* group = GroupTable::Of(key)) --group->pending;
  }
  --type.pending;
  --type.tier->pending;
  --pending_;
  if (rule_.idle_catch_up) LeaveTier(key, *type.tier);
}

}  // namespace fairgate::core

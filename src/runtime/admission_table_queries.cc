// The AdmissionTable's types, settings and queries, and its side of the timer: each one decision
// under the lock, as every method of the table (admission_table.h). The life of a call, the
// intake and the decisions themselves are in admission_table.cc.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "runtime/admission_table.h"

namespace fairgate::internal {

// --- Types, settings and queries.

StatusOr<bool> AdmissionTable::RegisterType(
    std::string_view name, const JobTypeConfig& config,
    const std::function<std::vector<SavedEstimate>()>& saved) {
  Locked lock(this);
  const bool first = !core_->TypeIndex(name).has_value();
  if (Status status = core_->RegisterType(name, config); !status.ok()) return status;
  log_.TypeRegistered(name, config.priority);
  const std::uint32_t index = *core_->TypeIndex(name);
  if (coalesce_.size() <= index) coalesce_.resize(index + 1);
  coalesce_[index] = config.coalesce;
  // The fleet's bucket from the first job of the type on (under this lock: no job took a token
  // of a bucket of its own before).
  if (first && lease_rates_ && config.rate_limit.limited()) {
    core_->LeaseTokens(name).IgnoreError();  // limited: it asks for its first lease (UnlockCore)
  }
  // A Submit through the intake is answered later: one that may be refused at once is not.
  if (config.max_queue_wait.count() == 0 && !config.refuse_without_token && !config.shedding.on()) {
    intake_types_.Add(name);
  }
  if (first && saved) {
    const double now = Now();
    const double wall = WallNow();
    for (SavedEstimate& estimate : saved()) {
      estimate.last_used = now - (wall - estimate.last_used);
      (void)core_->RestoreEstimate(estimate, now);  // a bad row is skipped
    }
  }
  return first;
}

std::vector<SavedKey> AdmissionTable::RestoreKeys(std::vector<SavedKey> keys, double wall) {
  std::vector<SavedKey> restored_keys;
  Locked lock(this);
  const double now = Now();
  for (SavedKey& key : keys) {
    key.idle_since = now - (wall - key.idle_since);
    // A restored key is tracked: the rule of groups is asked of it now, not at its next job.
    ApplyGroupRuleLocked(key.key);
    StatusOr<bool> restored = core_->RestoreKey(key, now);  // a bad row is skipped
    if (restored.ok() && *restored) {
      restored_keys.push_back(std::move(key));
    } else {
      core_->ForgetKeyGroupByRule(key.key);
    }
  }
  return restored_keys;
}

Decided<Snapshot> AdmissionTable::TakeSnapshot(std::size_t heaviest_keys) {
  Decided<Snapshot> out;
  Locked lock(this);
  const double now = LockedNow();
  out.decision.wake_timer = AdvanceLocked(now);
  Snapshot& s = out.answer;
  s = core_->TakeSnapshot(now);
  for (std::size_t i = 0; i < s.types.size(); ++i) {  // both in registration order
    TypeSnapshot& t = s.types[i];
    const auto& counts = log_.metrics().types()[i];
    t.enqueued = counts.enqueued;
    t.admitted = counts.admitted;
    t.cancelled = counts.cancelled;
    t.expired = counts.expired;
    t.joined = counts.joined;
    t.borrowed = counts.borrowed;
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
  return out;
}

Decision AdmissionTable::WriteMetrics(std::string& out) {
  Decision decision;
  Locked lock(this);
  const double now = LockedNow();
  decision.wake_timer = AdvanceLocked(now);
  log_.WriteMetrics(out, now);
  return decision;
}

Status AdmissionTable::SetKeyWeight(std::string_view key, double weight) {
  Locked lock(this);
  return core_->SetKeyWeight(key, weight);
}

Status AdmissionTable::SetKeyGroup(std::string_view key, std::string_view group) {
  Locked lock(this);
  return core_->SetKeyGroup(key, group, LockedNow());
}

Status AdmissionTable::SetGroupWeight(std::string_view group, double weight) {
  Locked lock(this);
  return core_->SetGroupWeight(group, weight);
}

Decided<Status> AdmissionTable::SetGroupLimits(std::string_view group, const GroupLimits& limits) {
  Decided<Status> out;
  Locked lock(this, out.decision);
  out.answer = core_->SetGroupLimits(group, limits);
  if (out.answer.ok() && phase_ != Phase::kShutDown) AdmitLocked(LockedNow(), out.decision);
  return out;
}

std::optional<double> AdmissionTable::GroupAccumulatedCost(std::string_view group) const {
  Locked lock(this);
  return core_->GroupAccumulatedCost(group);
}

Status AdmissionTable::Charge(std::string_view key, double cost) {
  Locked lock(this);
  ApplyGroupRuleLocked(key);
  if (Status s = core_->Charge(key, cost, LockedNow()); !s.ok()) {
    if (options_.runtime.key_group) core_->ForgetKeyGroupByRule(key);  // as a refused enqueue's
    return s;
  }
  return absl::OkStatus();
}

Decided<Status> AdmissionTable::SetKeyLimits(std::string_view key, const KeyLimits& limits) {
  Decided<Status> out;
  Locked lock(this, out.decision);
  out.answer = core_->SetKeyLimits(key, limits);
  // A higher max_running may make the key's waiting jobs admissible now.
  if (out.answer.ok() && phase_ != Phase::kShutDown) AdmitLocked(LockedNow(), out.decision);
  return out;
}

Decided<Status> AdmissionTable::ChangePause(
    const std::function<Status(core::AdmissionCore&, double)>& change) {
  Decided<Status> out;
  Locked lock(this, out.decision);
  const double now = LockedNow();
  out.answer = change(*core_, now);
  if (phase_ != Phase::kShutDown) AdmitLocked(now, out.decision);
  return out;
}

std::vector<std::string> AdmissionTable::TypesWithoutWorker() const {
  Locked lock(this);
  return core_->TypesWithoutWorker();
}

std::vector<std::string> AdmissionTable::NarrowWorkerWarnings(std::string_view worker,
                                                              std::string_view type) const {
  Locked lock(this);
  return core_->NarrowWorkerWarnings(worker, type);
}

StatusOr<double> AdmissionTable::MaxWaitToCeiling(std::string_view type) const {
  Locked lock(this);
  return core_->MaxWaitToCeiling(type);
}

std::optional<double> AdmissionTable::AccumulatedCost(std::string_view key) const {
  Locked lock(this);
  return core_->AccumulatedCost(key);
}

std::optional<double> AdmissionTable::Estimate(std::string_view type, std::string_view id) const {
  Locked lock(this);
  return core_->Estimate(type, id);
}

Status AdmissionTable::Open() const {
  Locked lock(this);
  return phase_ == Phase::kOpen ? absl::OkStatus() : UnavailableLocked();
}

std::optional<Submission::TypeInfo> AdmissionTable::Type(std::string_view type) const {
  Locked lock(this);
  const JobTypeConfig* config = core_->TypeConfig(type);
  if (config == nullptr) return std::nullopt;
  return Submission::TypeInfo{
      config->priority, core_->TypePaused(type), core_->TypeServed(type),
      std::min(config->max_concurrency, core_->capacity() / std::max(config->slots, 1))};
}

Decision AdmissionTable::ChangeCapacity(
    const std::function<int(const Submission::CapacityInputs&)>& next) {
  Decision decision;
  Locked lock(this, decision);
  const int current = core_->capacity();
  Submission::CapacityInputs inputs{current, core_->pending_jobs() > 0, LockedNow(),
                                    std::move(run_samples_)};
  run_samples_.clear();
  const int capacity = next(inputs);
  if (capacity != current) (void)core_->SetCapacity(capacity);
  if (capacity > current && phase_ != Phase::kShutDown) AdmitLocked(LockedNow(), decision);
  return decision;
}

void AdmissionTable::LeaseRates(std::function<void()> wanted) {
  Locked lock(this);
  tokens_wanted_ = std::move(wanted);
  lease_rates_ = true;
  core_->LeaseTokens("").IgnoreError();  // FailedPrecondition: no global rate limit
  // Keys get limits at any time (SetKeyLimits): their buckets are leased from the start.
  // Called before the scheduler takes a job: only keys restored idle are tracked.
  if (const Status keys = core_->LeaseKeyTokens(); !keys.ok()) {
    std::fprintf(stderr, "fairgate: %s\n", keys.ToString().c_str());
    std::abort();
  }
}

std::vector<std::pair<core::BucketName, RateLimit>> AdmissionTable::BucketsToLease() {
  Locked lock(this);
  tokens_told_ = false;  // FleetRates sees every bucket that wants a lease now: tell it of the next
  return core_->BucketsToLease();
}

Decided<Status> AdmissionTable::GrantTokens(const core::BucketName& bucket,
                                            const TokenLease& lease) {
  Decided<Status> out;
  Locked lock(this, out.decision);
  const double now = LockedNow();
  out.answer = core_->GrantTokens(bucket, lease.taken, now + lease.next_in, now);
  tokens_told_ = false;  // a bucket that still wants tokens is told of again
  if (out.answer.ok() && phase_ != Phase::kShutDown) AdmitLocked(now, out.decision);
  return out;
}

void AdmissionTable::KeepRunSamples() {
  Locked lock(this);
  keep_run_samples_ = true;
}

void AdmissionTable::CountCapacitySignalFailed() {
  Locked lock(this);
  log_.CapacitySignalFailed();
}

std::vector<Submission::KeyCost> AdmissionTable::KeyCosts(Submission::CostsOf of) {
  std::vector<Submission::KeyCost> costs;
  Locked lock(this);
  const double now = LockedNow();
  const double wall = WallNow();
  for (SavedKey& key :
       of == Submission::CostsOf::kKeys ? core_->KeyCosts(now) : core_->GroupCosts(now)) {
    costs.push_back({std::move(key.key), key.accumulated_cost, wall - (now - key.idle_since),
                     key.idle_since >= now});
  }
  return costs;
}

std::vector<bool> AdmissionTable::SetFleetCosts(
    Submission::CostsOf of, const std::vector<SavedKey>& totals,
    const absl::flat_hash_map<std::string, double>& collected) {
  const bool keys = of == Submission::CostsOf::kKeys;
  std::vector<bool> applied(totals.size(), false);
  Locked lock(this);
  for (std::size_t i = 0; i < totals.size(); ++i) {
    const SavedKey& total = totals[i];
    std::optional<double> now_cost =
        keys ? core_->AccumulatedCost(total.key) : core_->GroupAccumulatedCost(total.key);
    auto at_collect = collected.find(total.key);
    if (!now_cost || at_collect == collected.end()) continue;  // forgotten meanwhile
    // Charged here since the collection: not in the total yet, kept on top of it.
    const double cost = std::max(0.0, total.accumulated_cost + (*now_cost - at_collect->second));
    (void)(keys ? core_->SetAccumulatedCost(total.key, cost)
                : core_->SetGroupAccumulatedCost(total.key, cost));
    applied[i] = true;
  }
  return applied;
}

StateKeeper::Collected AdmissionTable::Learned(double since, bool shared_store) {
  StateKeeper::Collected collected;
  double now = 0, wall = 0;
  {
    Locked lock(this);
    now = Now();
    wall = WallNow();
    collected.state.estimates = core_->EstimatesUsedSince(since);
    if (!shared_store) collected.state.keys = core_->KeyCosts(now);
  }
  for (SavedEstimate& e : collected.state.estimates) e.last_used = wall - (now - e.last_used);
  for (SavedKey& k : collected.state.keys) k.idle_since = wall - (now - k.idle_since);
  collected.mark = now;
  return collected;
}

// --- For the timer.

Context::Clock::time_point AdmissionTable::NextDue() const {
  using Clock = Context::Clock;
  Clock::time_point wake_at = Clock::time_point::max();
  Locked lock(this);
  if (!deadlines_.empty()) wake_at = std::min(wake_at, deadlines_.begin()->first);
  if (auto expiry = NextExpiryLocked()) wake_at = std::min(wake_at, *expiry);
  if (auto token = NextTokenLocked()) wake_at = std::min(wake_at, *token);
  if (!unreported_.empty()) wake_at = Clock::now();
  return wake_at;
}

Decision AdmissionTable::TakeDue(Context::Clock::time_point now) {
  Decision decision;
  Locked lock(this);
  for (auto it = deadlines_.begin(); it != deadlines_.end() && it->first <= now; ++it) {
    decision.deadline_passed.push_back(it->second);
  }
  RecordList& reported = decision.admitted;
  reported.insert(reported.end(), unreported_.begin(), unreported_.end());
  unreported_.clear();
  if (phase_ != Phase::kShutDown) AdmitLocked(LockedNow(), decision);
  return decision;
}

void AdmissionTable::Sweep() {
  Locked lock(this);
  const double now = LockedNow();
  std::vector<std::pair<std::string, double>> evicted;
  const core::SweepResult swept = core_->Sweep(now, log_.wants_events() ? &evicted : nullptr);
  log_.Evicted(swept, evicted, now);
  log_.Post();
}

std::optional<Context::Clock::time_point> AdmissionTable::NextExpiryLocked() const {
  return OnTimer(core_->NextExpiryAt());
}

std::optional<Context::Clock::time_point> AdmissionTable::NextTokenLocked() const {
  return OnTimer(core_->NextTokenAt(Now()));
}

std::optional<Context::Clock::time_point> AdmissionTable::OnTimer(std::optional<double> at) const {
  if (!at) return std::nullopt;
  // Through the scheduler's clock, which need not be the steady one: how far ahead it is.
  const double ahead = std::max(0.0, *at - Now());
  return Context::Clock::now() + std::chrono::duration_cast<Context::Clock::duration>(
                                     std::chrono::duration<double>(std::min(ahead, 1e6)));
}

}  // namespace fairgate::internal

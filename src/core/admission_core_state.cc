// What AdmissionCore tells of itself (types, keys' costs, estimates, a snapshot, the heaviest
// keys, the longest wait to the aging ceiling) and what a warm restart saves and puts back.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/admission_core.h"
#include "core/arguments.h"

namespace fairgate::core {

StatusOr<double> AdmissionCore::MaxWaitToCeiling(std::string_view type_name) const {
  StatusOr<TypeState*> type = types_.FindOrError(type_name);
  if (!type.ok()) return type.status();
  const int steps = types_.StepsToCeiling(*(*type)->tier);
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
  const TypeState* found = types_.Find(type);
  if (found == nullptr) return std::nullopt;
  return found->index;
}

const JobTypeConfig* AdmissionCore::TypeConfig(std::string_view type) const {
  const TypeState* found = types_.Find(type);
  return found == nullptr ? nullptr : &found->config;
}

bool AdmissionCore::TypePaused(std::string_view type) const {
  const TypeState* found = types_.Find(type);
  return found != nullptr && found->paused;
}

namespace {

std::optional<RateSnapshot> RateOf(const TokenBucket& bucket, double now) {
  if (!bucket.limited()) return std::nullopt;
  return RateSnapshot{bucket.limit().per_second, bucket.limit().burst, bucket.TokensAt(now),
                      bucket.taken(), bucket.refused()};
}

}  // namespace

Snapshot AdmissionCore::TakeSnapshot(double now) const {
  Snapshot s;
  s.rate_limit = RateOf(types_.global_rate(), now);
  s.max_concurrency = rule_.max_concurrency;
  s.capacity = types_.global_cap().limit();
  s.slots_in_use = types_.global_cap().used();
  s.pending = pending_;
  for (const auto& tier : types_.tiers()) {
    int running = 0;
    for (const TypeState* type : tier->types) running += type->running.used();
    s.tiers.push_back({tier->priority, running, tier->pending, tier->aged_in, tier->slots.used()});
    s.running += running;
  }
  for (const auto& type : types_.all()) {
    s.types.push_back({type->name, type->config.priority, type->config.max_concurrency,
                       type->running.used(), type->pending});
    s.types.back().paused = type->paused;
    s.types.back().rate_limit = RateOf(type->rate, now);
    if (type->shed != nullptr) {
      s.types.back().shedding = ShedSnapshot{type->shed->Stands(now), type->shed->refused()};
    }
  }
  s.paused_keys.assign(keys_.paused().begin(), keys_.paused().end());
  // Those due by `now` are held until the next decision lets them go: not counted.
  if (keys_.rates_in_use()) s.keys_held_by_rate = keys_.RateHeldAfter(now);
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
        out.push_back({types_.all()[type]->name, std::string(id), value, last_used});
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

std::vector<SavedKey> AdmissionCore::GroupCosts(double now) const {
  std::vector<SavedKey> out;
  out.reserve(groups_.size());
  for (const auto& [name, group] : groups_) {
    out.push_back({name, group.acc, GroupTable::Idle(group) ? group.idle_since : now});
  }
  return out;
}

StatusOr<bool> AdmissionCore::RestoreEstimate(const SavedEstimate& estimate, double now) {
  StatusOr<TypeState*> type = types_.FindOrError(estimate.type);
  if (!type.ok()) return type.status();
  if (!std::isfinite(estimate.seconds) || estimate.seconds < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("a restored estimate must be finite and >= 0, got ", estimate.seconds));
  }
  const double last_used = std::min(estimate.last_used, now);
  if (last_used + rule_.estimate_ttl.count() <= now) return false;
  return estimates_.Restore((*type)->index, AsAbsl(estimate.id), estimate.seconds, last_used);
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

std::optional<double> AdmissionCore::AccumulatedCost(std::string_view key) const {
  const KeyState* state = keys_.Find(AsAbsl(key));
  if (state == nullptr) return std::nullopt;
  return state->acc;
}

std::optional<double> AdmissionCore::GroupAccumulatedCost(std::string_view group) const {
  const GroupState* state = groups_.Find(AsAbsl(group));
  if (state == nullptr) return std::nullopt;
  return state->acc;
}

std::optional<double> AdmissionCore::KeyTokens(std::string_view key, double now) const {
  const KeyState* state = keys_.Find(AsAbsl(key));
  if (state == nullptr || !keys_.RateOf(*state).limited()) return std::nullopt;
  return keys_.TokensOf(*state, now);
}

std::optional<double> AdmissionCore::Estimate(std::string_view type, std::string_view id) const {
  const TypeState* found = types_.Find(type);
  if (found == nullptr) return std::nullopt;
  return estimates_.Find(found->index, AsAbsl(id));
}

}  // namespace fairgate::core

#include "core/type_table.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/check.h"

namespace fairgate::core {

TypeTable::TypeTable(int max_concurrency, const std::optional<AgingConfig>& aging,
                     const RateLimit& global_rate, const std::optional<TierLending>& lending,
                     const WorkerTable& workers)
    : max_concurrency_(max_concurrency),
      aging_ceiling_(aging ? std::optional<int>(aging->ceiling) : std::nullopt),
      workers_(workers),
      lending_(lending),
      global_rate_(global_rate) {
  SetCapacity(max_concurrency);
  // Borrowers leave kept_back() free of the capacity in force C, and C - floor(k * C) grows with
  // C: so a tier never runs more slots than its cap or this, whatever SetCapacity sets.
  if (lending_) lent_ceiling_ = max_concurrency - kept_back_;
}

void TypeTable::SetCapacity(int capacity) {
  slots_.set_limit(capacity);
  if (lending_) {
    kept_back_ = static_cast<std::int32_t>(std::floor(lending_->kept_back * capacity));
  }
}

StatusOr<TypeState*> TypeTable::Register(std::string_view name, const JobTypeConfig& config,
                                         bool& added) {
  added = false;
  if (Status s = ValidateJobType(name, config); !s.ok()) return s;
  if (TypeState* known = Find(name)) {
    if (known->config == config) return known;
    return absl::AlreadyExistsError(absl::StrCat(
        "job type '", AsAbsl(name), "' is already registered with a different config"));
  }
  if (config.slots > max_concurrency_) {
    return absl::InvalidArgumentError(
        absl::StrCat("job type '", AsAbsl(name), "': slots (", config.slots,
                     ") exceed the scheduler's max_concurrency (", max_concurrency_, ")"));
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
  type->rate = TokenBucket(config.rate_limit);
  if (config.shedding.on()) type->shed = std::make_unique<ShedWatch>(config.shedding);
  rates_in_use_ |= type->rate.limited();
  if (!config.conflict_group.empty()) {
    auto [it, inserted] = conflict_groups_.try_emplace(
        config.conflict_group,
        ConflictGroup{static_cast<std::uint32_t>(conflict_groups_.size() + 1),
                      config.conflict_limit});
    type->conflict_group = it->second.index;
  }
  type->tier = &TierOf(config.priority);
  type->tier->types.push_back(type.get());
  if (Shares(*type)) type->home = &type->tier->shared;
  by_name_.emplace(type->name, type.get());
  types_.push_back(std::move(type));
  added = true;
  return types_.back().get();
}

StatusOr<TypeState*> TypeTable::FindOrError(std::string_view name) const {
  if (TypeState* type = Find(name)) return type;
  return absl::NotFoundError(absl::StrCat("unknown job type '", AsAbsl(name), "'"));
}

TierState& TypeTable::TierOf(int priority) {
  auto it = std::find_if(tiers_.begin(), tiers_.end(),
                         [&](const auto& t) { return t->priority <= priority; });
  if (it == tiers_.end() || (*it)->priority != priority) {
    auto tier = std::make_unique<TierState>();
    tier->priority = priority;
    tier->slots.set_limit(priority);
    it = tiers_.insert(it, std::move(tier));
  }
  return **it;
}

TierState* TypeTable::TierAbove(const TierState& tier) const {
  if (!aging_ceiling_) return nullptr;
  for (std::size_t i = 1; i < tiers_.size(); ++i) {
    if (tiers_[i].get() == &tier) {
      TierState* above = tiers_[i - 1].get();
      return above->priority <= *aging_ceiling_ ? above : nullptr;
    }
  }
  return nullptr;
}

int TypeTable::StepsToCeiling(const TierState& tier) const {
  int steps = 0;
  for (const TierState* t = &tier; (t = TierAbove(*t)) != nullptr;) ++steps;
  return steps;
}

bool TypeTable::Shares(const TypeState& type) const {
  for (int b = 1; b < static_cast<int>(Blocker::kCount); ++b) {
    const auto blocker = static_cast<Blocker>(b);
    if (LevelOf(blocker) == BlockerLevel::kType && !SharingMaySkip(blocker, type)) return false;
  }
  return true;
}

bool TypeTable::SharingMaySkip(Blocker blocker, const TypeState& type) const {
  switch (blocker) {
    case Blocker::kTypePaused:
      return !type.paused;
    case Blocker::kTierCap:    // Pick: the tier (borrowing: the global cap past the slots kept
                               // back) has a slot; one is all a job of the type takes
    case Blocker::kGlobalCap:  // NextAdmission: the global cap has a slot; the same
      return type.config.slots == 1;
    case Blocker::kTypeCap:  // its running jobs fill the tier before they reach its cap
      return type.config.max_concurrency >= std::max(type.config.priority, lent_ceiling_);
    case Blocker::kGlobalRate:  // NextAdmission: the global bucket has a token, for any job
      return true;
    case Blocker::kTypeRate:  // a bucket of the type's own
      return !type.rate.limited();
    case Blocker::kNoWorker:  // a worker's room is per type
      return !workers_.in_use();
    case Blocker::kNone:
    case Blocker::kKeyPaused:  // the key and id levels hold a shared set's lanes and jobs
    case Blocker::kKeyLimit:   // as they hold a type's own (LaneIndex::SyncLane, FrontOf)
    case Blocker::kKeyRate:
    case Blocker::kGroupLimit:
    case Blocker::kConflictLimit:
    case Blocker::kCount:
      return true;
  }
  return false;
}

void TypeTable::CountCapSkip(Blocker blocker, DecisionSkips& skipped) {
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
    case Blocker::kGlobalRate:
    case Blocker::kTypeRate:
      ++skipped.rate_limit;
      return;
    case Blocker::kTypePaused:  // not a cap: nothing to count
      return;
    case Blocker::kNone:  // not of the type level: counted where their jobs wait, if at all
    case Blocker::kKeyPaused:
    case Blocker::kKeyLimit:
    case Blocker::kKeyRate:
    case Blocker::kGroupLimit:
    case Blocker::kConflictLimit:
    case Blocker::kCount:
      break;
  }
  FAIRGATE_CORE_CHECK(false, "a type's lane set was skipped by no constraint of the type level");
}

}  // namespace fairgate::core

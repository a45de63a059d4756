// AdmissionCore's settings, what an operator changes while it runs: pauses of types and keys,
// keys' weights and limits, the capacity in force, and keys' costs set or charged from outside
// (a fleet's shared totals, work done without a job).
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/admission_core.h"
#include "core/arguments.h"

namespace fairgate::core {

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
  StatusOr<TypeState*> found = types_.FindOrError(name);
  if (!found.ok()) return found.status();
  TypeState& type = **found;
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
  keys_.UseLimits();
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
      [&] { lanes_.Rekey(*state, [&] { settings.paused = paused; }); });
  return absl::OkStatus();
}

Status AdmissionCore::SetKeyWeight(std::string_view name, double weight) {
  if (Status s = ValidateKeyWeight(weight); !s.ok()) return s;
  KeySettings& settings = keys_.SettingsFor(AsAbsl(name));
  KeyState* key = keys_.rates_in_use() ? keys_.Find(AsAbsl(name)) : nullptr;
  if (key != nullptr && keys_.LimitsOf(*key).rate_per_weight) {
    // The key's rate follows its weight: a hold's release moves with it.
    lanes_.Rekey(*key, [&] {
      settings.weight = weight;
      keys_.LimitsChanged(*key);
    });
  } else {
    settings.weight = weight;
  }
  return absl::OkStatus();
}

Status AdmissionCore::SetKeyLimits(std::string_view name, const KeyLimits& limits) {
  if (Status s = ValidateKeyLimits(limits); !s.ok()) return s;
  KeySettings& settings = keys_.SettingsFor(AsAbsl(name));
  keys_.UseLimits();
  if (limits.rate_limit.limited()) keys_.UseRates();
  auto apply = [&] {
    settings.limits = limits;
    settings.has_limits = true;
  };
  if (KeyState* key = keys_.Find(AsAbsl(name))) {
    lanes_.Rekey(*key, [&] {
      apply();
      keys_.LimitsChanged(*key);  // a rate's hold moves with its limit
    });
  } else {
    apply();
  }
  return absl::OkStatus();
}

Status AdmissionCore::SetCapacity(int capacity) {
  if (capacity < 1 || capacity > rule_.max_concurrency) {
    return absl::InvalidArgumentError(absl::StrCat("capacity must be in [1, max_concurrency ",
                                                   rule_.max_concurrency, "], got ", capacity));
  }
  types_.SetCapacity(capacity);
  return absl::OkStatus();
}

StatusOr<bool> AdmissionCore::SetAccumulatedCost(std::string_view name, double cost) {
  if (!std::isfinite(cost) || cost < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("an accumulated cost must be finite and >= 0, got ", cost));
  }
  KeyState* key = keys_.Find(AsAbsl(name));
  if (key == nullptr) return false;
  lanes_.Rekey(*key, [&] { key->acc = cost; });
  return true;
}

StatusOr<bool> AdmissionCore::SetGroupAccumulatedCost(std::string_view name, double cost) {
  if (!std::isfinite(cost) || cost < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("an accumulated cost must be finite and >= 0, got ", cost));
  }
  GroupState* group = groups_.Find(AsAbsl(name));
  if (group == nullptr) return false;
  LaneIndex::UnlinkTierPresences(*group);
  group->acc = cost;
  LaneIndex::LinkTierPresences(*group);
  lanes_.RelinkGroup(*group);
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
  // The key's group is charged too, and tracked from then as the key is.
  GroupState* group = nullptr;
  if (groups_.in_use() && key.settings != nullptr && key.settings->group != nullptr) {
    group = &groups_.Track(*key.settings->group);
    groups_.Wake(*group);
  }
  lanes_.Rekey(key, [&] {
    key.acc += cost / KeyTable::WeightOf(key);
    if (group != nullptr) group->acc += cost / GroupTable::WeightOf(*group);
  });
  keys_.MaybeIdle(key, now);
  if (group != nullptr) groups_.MaybeIdle(*group, now);
  return absl::OkStatus();
}

Status AdmissionCore::SetKeyGroup(std::string_view name, std::string_view group_name, double now) {
  if (Status s = CheckTime(now, "group change time"); !s.ok()) return s;
  KeySettings& settings = keys_.SettingsFor(AsAbsl(name));
  GroupSettings* target = group_name.empty() ? nullptr : &groups_.SettingsFor(AsAbsl(group_name));
  settings.group_set = true;  // the caller's, kept for good: no rule overrides it
  settings.group_by_rule = false;
  if (settings.group == target) return absl::OkStatus();
  KeyState* key = keys_.Find(AsAbsl(name));
  if (key == nullptr || KeyTable::Idle(*key)) {
    settings.group = target;  // its next job finds it there
    return absl::OkStatus();
  }
  // Its pending jobs move to lanes in its new group's stand-ins, each keeping its place; its
  // counts go with it.
  std::vector<Job*> moved;
  for (Lane* lane = key->lanes; lane != nullptr; lane = lane->next_in_key) {
    lane->ready.ForEach([&](Job& job) { moved.push_back(&job); });
  }
  GroupState* from = GroupTable::Of(*key);
  // Its tier presences (idle catch-up) leave its group's, for its new group's.
  for (TierPresence* p = key->tiers; p != nullptr; p = p->next_in_key) UnlinkTierPresence(*p);
  settings.group = target;
  GroupState* to = target != nullptr ? &groups_.Track(*target) : nullptr;
  for (TierPresence* p = key->tiers; p != nullptr; p = p->next_in_key) LinkTierPresence(*p, to);
  if (from != nullptr) {
    from->pending -= key->pending;
    from->running.Release(key->running.used());
  }
  if (to != nullptr) {
    groups_.Wake(*to);
    to->pending += key->pending;
    to->running.Acquire(key->running.used());
  }
  for (Job* job : moved) {
    Resource* parked_on = job->state == JobState::kParked ? job->resource : nullptr;
    lanes_.Move(*job, lanes_.LaneFor(*key, *job->type, *job->lane->tier, parked_on));
  }
  // Their running counts moved: each group's place and admissibility may have changed.
  if (from != nullptr) {
    lanes_.RelinkGroup(*from);
    groups_.MaybeIdle(*from, now);
  }
  if (to != nullptr) lanes_.RelinkGroup(*to);
  return absl::OkStatus();
}

bool AdmissionCore::NeedsKeyGroup(std::string_view name) const {
  if (keys_.Find(AsAbsl(name)) != nullptr) return false;
  const KeySettings* settings = keys_.FindSettings(AsAbsl(name));
  return settings == nullptr || !settings->group_set;
}

Status AdmissionCore::SetKeyGroupByRule(std::string_view name, std::string_view group_name) {
  if (group_name.empty()) return absl::OkStatus();  // none: nothing to keep
  if (keys_.Find(AsAbsl(name)) != nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("key '", AsAbsl(name), "' is tracked: its group is no rule's to set now"));
  }
  KeySettings& settings = keys_.SettingsFor(AsAbsl(name));
  if (settings.group_set) return absl::OkStatus();  // the caller's SetKeyGroup wins
  settings.group = &groups_.SettingsFor(AsAbsl(group_name));
  settings.group_by_rule = true;
  return absl::OkStatus();
}

void AdmissionCore::ForgetKeyGroupByRule(std::string_view name) {
  keys_.ForgetRuleOnlySettings(AsAbsl(name));
}

Status AdmissionCore::SetGroupLimits(std::string_view name, const GroupLimits& limits) {
  if (Status s = ValidateGroupLimits(limits); !s.ok()) return s;
  if (name.empty()) return absl::InvalidArgumentError("a group's name must not be empty");
  GroupSettings& settings = groups_.SettingsFor(AsAbsl(name));
  groups_.UseLimits();
  settings.limits = limits;
  settings.has_limits = true;
  if (settings.state != nullptr) lanes_.RelinkGroup(*settings.state);
  return absl::OkStatus();
}

Status AdmissionCore::SetGroupWeight(std::string_view name, double weight) {
  if (!(std::isfinite(weight) && weight > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("group weight must be finite and > 0, got ", weight));
  }
  if (name.empty()) return absl::InvalidArgumentError("a group's name must not be empty");
  groups_.SettingsFor(AsAbsl(name)).weight = weight;
  return absl::OkStatus();
}

}  // namespace fairgate::core

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

Status AdmissionCore::Charge(std::string_view name, double cost, double now) {
  if (Status s = CheckTime(now, "charge time"); !s.ok()) return s;
  if (!std::isfinite(cost) || cost < 0) {
    return absl::InvalidArgumentError(absl::StrCat("a charge must be finite and >= 0, got ", cost));
  }
  KeyState* known = keys_.Find(AsAbsl(name));
  KeyState& key = known != nullptr ? *known : keys_.Add(AsAbsl(name));
  keys_.Wake(key);
  lanes_.Rekey(key, [&] { key.acc += cost / KeyTable::WeightOf(key); });
  keys_.MaybeIdle(key, now);
  return absl::OkStatus();
}

}  // namespace fairgate::core

// AdmissionCore::CheckInvariants: every fact the core keeps twice, recomputed from the jobs
// themselves and compared. O(jobs + keys + lanes + resources): for the differential tests, the
// fuzzer and debug builds, never on a hot path.
#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "core/admission_core.h"

namespace fairgate::core {
namespace {

Status Broken(std::string what) {
  return absl::InternalError(absl::StrCat("core invariant broken: ", what));
}

// The home set a lane belongs to: its own set, or a parked lane's group's home.
// The home set of a lane: its set's, or for a lane in a group's stand-in the stand-in's parent's.
const LaneSet* HomeOf(const Lane& lane) {
  if (lane.group != nullptr) return lane.group->proxy.set;
  const GroupPresence* presence = lane.set->presence();
  return presence != nullptr ? presence->set : lane.set;
}

// The home set a pending job's lane must belong to: its type's home in its own tier (its own
// lanes, or the tier's shared ones), else the aged group's of the tier it aged into.
const LaneSet* HomeFor(const Job& job) {
  const TierState& tier = *job.lane->tier;
  if (&tier == job.type->tier) return job.type->home;
  for (const auto& group : tier.aged) {
    if (group->type == job.type) return &group->lanes;
  }
  return nullptr;
}

}  // namespace

// CheckInvariants part by part, over one recount of the jobs (CountJobs): each part compares
// what the core keeps of one kind of node with what the jobs say.
class AdmissionCore::InvariantCheck {
 public:
  explicit InvariantCheck(const AdmissionCore& core) : core_(core) {}

  Status Run() {
    using Part = Status (InvariantCheck::*)();
    for (Part part : {&InvariantCheck::CountJobs, &InvariantCheck::CheckTotals,
                      &InvariantCheck::CheckTypesAndTiers, &InvariantCheck::CheckKeys,
                      &InvariantCheck::CheckGroups}) {
      if (Status s = (this->*part)(); !s.ok()) return s;
    }
    // The parts that own their state check it against the recount.
    if (Status s = core_.lanes_.Check(core_.types_.tiers(), recount_); !s.ok()) {
      return Broken(std::string(s.message()));
    }
    if (Status s = core_.workers_.Check(core_.jobs_, core_.types_.all(), recount_.held_by);
        !s.ok()) {
      return Broken(std::string(s.message()));
    }
    if (Status s = core_.keys_.CheckRates(); !s.ok()) return Broken(std::string(s.message()));
    return absl::OkStatus();
  }

 private:
  // What the jobs say. What running jobs hold is recounted through the one list (ForEachHold),
  // by constraint.
  Status CountJobs() {
    const AdmissionCore& c = core_;
    absl::flat_hash_set<std::uint32_t> free(c.jobs_.free_slots().begin(),
                                            c.jobs_.free_slots().end());
    for (const Job& job : c.jobs_) {
      if (job.state == JobState::kFree) {
        if (!free.contains(job.slot)) {
          return Broken(absl::StrCat("free slot ", job.slot, " is lost"));
        }
        continue;
      }
      if (free.contains(job.slot)) return Broken(absl::StrCat("live slot ", job.slot, " is free"));
      if (job.resource != nullptr) ++recount_.jobs_by_resource[job.resource];
      if (Status s = job.state == JobState::kRunning ? CountRunning(job) : CountPending(job);
          !s.ok()) {
        return s;
      }
    }
    return absl::OkStatus();
  }
  Status CountRunning(const Job& job) {
    ForEachHold(core_, job, [&](const Usage& usage, std::int32_t amount) {
      recount_.held_by[&usage] += amount;
    });
    // Charged its estimate, it holds that (type, id)'s entry; charged an explicit cost, none.
    const bool holds_its_own =
        job.estimate != nullptr && EstimateTable::Holds(job.estimate, job.type->index, job.id);
    if (job.has_explicit_cost ? job.estimate != nullptr : !holds_its_own) {
      return Broken(
          absl::StrCat("running job ", job.seq, " does not hold the estimate it was charged from"));
    }
    if (job.promotion_scheduled) return Broken("a running job has an aging step scheduled");
    return absl::OkStatus();
  }
  Status CountPending(const Job& job) {
    const AdmissionCore& c = core_;
    ++pending_;
    ++by_type_[job.type];
    ++by_key_[job.key];
    if (job.type->shed != nullptr && !job.type->shed->Watches(job.arrival, job.seq)) {
      return Broken(absl::StrCat("pending job ", job.seq, " of a shedding type is not watched"));
    }
    if (job.lane == nullptr || job.lane->key != job.key || HomeOf(*job.lane) != HomeFor(job)) {
      return Broken(absl::StrCat("pending job ", job.seq, " is not in its key's lane of its type"));
    }
    ++recount_.pending_by_lane[job.lane];
    if (job.lane->tier != job.type->tier) ++aged_in_[job.lane->tier];
    const bool in_ready = job.lane->ready.contains(ReadyEntryOf(job));
    // Ready in its home lane; parked in its parked lane of its own resource.
    const bool parked_lane = job.lane->group != nullptr;
    if (!in_ready || parked_lane != (job.state == JobState::kParked) ||
        (parked_lane && job.lane->group->resource != job.resource)) {
      return Broken(absl::StrCat("pending job ", job.seq, " is not in the right lane"));
    }
    const bool can_rise =
        c.rule_.aging && !c.Paused(job) && c.types_.TierAbove(*job.lane->tier) != nullptr;
    if (job.promotion_scheduled != can_rise) {
      return Broken(absl::StrCat(
          "job ", job.seq,
          can_rise ? " can age but has no step scheduled" : " has a step it cannot take"));
    }
    if (job.promotion_scheduled) {
      ++scheduled_;
      if (!c.steps_.HasPromotion(job)) {
        return Broken(absl::StrCat("job ", job.seq, "'s aging step is not in the queue"));
      }
    }
    if (TimedSteps::Expires(job)) {
      ++expiring_;
      if (!c.steps_.HasExpiry(job)) {
        return Broken(absl::StrCat("job ", job.seq, "'s queue-wait limit is not in its queue"));
      }
    }
    return absl::OkStatus();
  }

  // Whether a constraint holds what the running jobs hold of it, and (unless its limit may be
  // lowered below that) no more than its limit.
  bool HoldsWrongly(const Constraint& c, bool limit_may_drop) const {
    const auto it = recount_.held_by.find(&c);
    return c.used() != (it == recount_.held_by.end() ? 0 : it->second) ||
           (!limit_may_drop && c.used() > c.limit());
  }

  // The global cap and the pending count; the join points and the timed steps' queues.
  Status CheckTotals() {
    const AdmissionCore& c = core_;
    const Constraint& global_cap = c.types_.global_cap();
    if (HoldsWrongly(global_cap, /*limit_may_drop=*/true) || pending_ != c.pending_) {
      return Broken(absl::StrCat("slots in use/pending counted ", global_cap.used(), "/",
                                 c.pending_, ", jobs say ", recount_.held_by[&global_cap], "/",
                                 pending_));
    }
    if (Status s = c.CheckJoinPoints(); !s.ok()) return s;
    if (Status s = c.steps_.CheckSizes(scheduled_, expiring_); !s.ok()) {
      return Broken(std::string(s.message()));
    }
    if (global_cap.used() > c.rule_.max_concurrency) {
      return Broken("more slots used than the global cap");
    }
    if (global_cap.limit() < 1 || global_cap.limit() > c.rule_.max_concurrency) {
      return Broken("the capacity in force is outside [1, max_concurrency]");
    }
    return absl::OkStatus();
  }

  // Types and tiers: counts and caps.
  Status CheckTypesAndTiers() {
    for (const auto& tier : core_.types_.tiers()) {
      std::int64_t tier_pending = 0;
      for (const TypeState* type : tier->types) {
        if (type->home != (core_.types_.Shares(*type) ? &tier->shared : &type->lanes) ||
            (type->home != &type->lanes && !type->lanes.empty())) {
          return Broken(
              absl::StrCat("type ", type->name, "'s lanes are not where it shares or not"));
        }
        if (HoldsWrongly(type->running, false) || type->pending != by_type_[type] ||
            type->running.limit() != type->config.max_concurrency) {
          return Broken(absl::StrCat("type ", type->name, " counts ", type->running.used(), "/",
                                     type->pending, " of its cap ", type->running.limit(),
                                     ", jobs say ", recount_.held_by[&type->running], "/",
                                     by_type_[type]));
        }
        // Each pending job is watched (CountPending): as many watched as pending, none other.
        if (type->shed != nullptr &&
            type->shed->size() != static_cast<std::size_t>(type->pending)) {
          return Broken(absl::StrCat("type ", type->name, " watches ", type->shed->size(),
                                     " jobs for shedding and has ", type->pending, " pending"));
        }
        tier_pending += type->pending;
      }
      // Borrowers (RuleOptions::lending) run their tier over its cap.
      if (HoldsWrongly(tier->slots, core_.types_.lends()) || tier->pending != tier_pending ||
          tier->slots.limit() != tier->priority) {
        return Broken(absl::StrCat("tier ", tier->priority, " counts differ from its jobs'"));
      }
      if (tier->aged_in != aged_in_[tier.get()]) {
        return Broken(absl::StrCat("tier ", tier->priority, " counts ", tier->aged_in,
                                   " aged-in jobs, jobs say ", aged_in_[tier.get()]));
      }
    }
    return absl::OkStatus();
  }

  // Keys: their counts, the idle list and (with idle catch-up) their tier presences. Their lanes
  // are the lane index's (LaneIndex::Check).
  Status CheckKeys() {
    for (const auto& [name, key] : core_.keys_) {
      // A key's limit may be lowered below what it runs (SetKeyLimits): only the count is checked.
      const std::int64_t key_running = recount_.held_by[&key.running];
      if (key.running.used() != key_running || key.pending != by_key_[&key]) {
        return Broken(absl::StrCat("key '", name, "' counts ", key.running.used(), "/", key.pending,
                                   ", jobs say ", key_running, "/", by_key_[&key]));
      }
      if (key.idle_hook.is_linked() != (key.pending == 0 && key.running.used() == 0)) {
        return Broken(absl::StrCat("key '", name, "' is ", key.idle_hook.is_linked() ? "" : "not ",
                                   "in the idle list"));
      }
      if (core_.rule_.idle_catch_up) {
        if (Status s = CheckPresencesOf(name, key); !s.ok()) return s;
      }
    }
    return absl::OkStatus();
  }
  // Groups: each counts its keys' pending and running jobs, is in the idle list exactly when
  // both are none, and a key with jobs has its group tracked.
  Status CheckGroups() {
    absl::flat_hash_map<const GroupState*, std::int64_t> pending;
    for (const auto& [name, key] : core_.keys_) {
      if (key.settings != nullptr && key.settings->group != nullptr && !KeyTable::Idle(key) &&
          key.settings->group->state == nullptr) {
        return Broken(absl::StrCat("key '", name, "' has jobs and its group is not tracked"));
      }
      if (const GroupState* group = GroupTable::Of(key)) pending[group] += key.pending;
    }
    for (const auto& [name, group] : core_.groups_) {
      const std::int64_t running = recount_.held_by[&group.running];
      if (group.pending != pending[&group] || group.running.used() != running) {
        return Broken(absl::StrCat("group '", name, "' counts ", group.running.used(), "/",
                                   group.pending, ", jobs say ", running, "/", pending[&group]));
      }
      if (group.idle_hook.is_linked() != GroupTable::Idle(group) ||
          group.settings->state != &group) {
        return Broken(absl::StrCat("group '", name, "' is ",
                                   group.idle_hook.is_linked() ? "" : "not ", "in the idle list"));
      }
      // Idle catch-up: a presence per tier its keys have presences in, none empty.
      for (const GroupTierPresence* p = group.tiers; p != nullptr; p = p->next_in_group) {
        if (p->group != &group || p->keys.empty() || !p->tier_hook.is_linked()) {
          return Broken(absl::StrCat("group '", name, "''s presence in tier ", p->tier->priority,
                                     " is stale"));
        }
      }
    }
    // The sets of idle catch-up are in order of the costs they read live.
    for (const auto& tier : core_.types_.tiers()) {
      auto by_key = [](const TierPresence& a, const TierPresence& b) {
        return a.key->acc < b.key->acc;
      };
      if (!std::is_sorted(tier->keys_by_acc.begin(), tier->keys_by_acc.end(), by_key) ||
          !std::is_sorted(tier->groups_by_acc.begin(), tier->groups_by_acc.end(),
                          [](const GroupTierPresence& a, const GroupTierPresence& b) {
                            return a.group->acc < b.group->acc;
                          })) {
        return Broken(absl::StrCat("tier ", tier->priority, "'s presences are out of order"));
      }
      for (const GroupTierPresence& p : tier->groups_by_acc) {
        if (!std::is_sorted(p.keys.begin(), p.keys.end(), by_key)) {
          return Broken(absl::StrCat("tier ", tier->priority, "'s presences are out of order"));
        }
      }
    }
    return absl::OkStatus();
  }
  Status CheckPresencesOf(const std::string& name, const KeyState& key) {
    absl::flat_hash_map<const TierState*, std::int64_t> per_tier;
    for (const auto& [lane, n] : recount_.pending_by_lane) {
      if (lane->key == &key) per_tier[lane->type->tier] += n;
    }
    std::size_t presences = 0;
    const GroupState* group = GroupTable::Of(key);
    for (const TierPresence* p = key.tiers; p != nullptr; p = p->next_in_key) {
      ++presences;
      if (p->pending != per_tier[p->tier] || !p->tier_hook.is_linked()) {
        return Broken(
            absl::StrCat("key '", name, "''s presence in tier ", p->tier->priority, " is stale"));
      }
      // In its group's presence in the tier, or the tier's own set without a group.
      const bool placed = p->group != nullptr
                              ? p->group->group == group && p->group->tier == p->tier &&
                                    p->group->tier_hook.is_linked()
                              : group == nullptr;
      if (!placed) {
        return Broken(absl::StrCat("key '", name, "''s presence in tier ", p->tier->priority,
                                   " is not in its group's"));
      }
    }
    std::size_t tiers_with_pending = 0;
    for (const auto& [tier, n] : per_tier) tiers_with_pending += n > 0;
    if (presences != tiers_with_pending) {
      return Broken(absl::StrCat("key '", name, "' has ", presences, " tier presences for ",
                                 tiers_with_pending, " tiers"));
    }
    return absl::OkStatus();
  }

  const AdmissionCore& core_;
  // The recount (CountJobs).
  std::int64_t pending_ = 0;
  LaneRecount recount_;  // by lane and resource, and what running jobs hold
  absl::flat_hash_map<const TypeState*, std::int64_t> by_type_;  // pending
  absl::flat_hash_map<const KeyState*, int> by_key_;             // pending
  absl::flat_hash_map<const TierState*, std::int64_t> aged_in_;
  std::size_t scheduled_ = 0;
  std::size_t expiring_ = 0;  // pending jobs whose type has a queue-wait limit
};

Status AdmissionCore::CheckInvariants() const { return InvariantCheck(*this).Run(); }

// Every join point names live joinable jobs of its type and id, in the state it says, and every
// joinable job is found through its point.
Status AdmissionCore::CheckJoinPoints() const {
  std::size_t pending_joinable = 0;
  for (const Job& job : jobs_) {
    if (job.state == JobState::kFree || !job.joinable) continue;
    if (job.type->config.coalesce == Coalesce::kOff) {
      return Broken(absl::StrCat("job ", job.seq, " is joinable in a type that does not coalesce"));
    }
    if (job.state != JobState::kRunning) ++pending_joinable;
  }
  std::size_t pending_named = 0;
  for (const auto& type : types_.all()) {
    StatusOr<std::size_t> named = type->join_points.Check(*type);
    if (!named.ok()) return Broken(std::string(named.status().message()));
    pending_named += *named;
  }
  // A running joinable job need not be named: a later one of its id may have replaced it.
  if (pending_joinable != pending_named) {
    return Broken("a pending joinable job is not its id's join point");
  }
  return absl::OkStatus();
}

}  // namespace fairgate::core

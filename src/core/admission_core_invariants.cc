// AdmissionCore::CheckInvariants: every fact the core keeps twice, recomputed from the jobs
// themselves and compared. O(jobs + keys + lanes + resources): for the differential tests, the
// fuzzer and debug builds, never on a hot path.
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
const LaneSet* HomeOf(const Lane& lane) {
  return lane.group != nullptr ? lane.group->proxy.set : lane.set;
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

Status AdmissionCore::CheckInvariants() const {
  // What the jobs say. What running jobs hold is recounted through the one list (ForEachHold),
  // by constraint.
  std::int64_t pending = 0;
  absl::flat_hash_map<const Usage*, std::int64_t> held_by;
  absl::flat_hash_map<const TypeState*, std::int64_t> by_type;  // pending
  absl::flat_hash_map<const KeyState*, int> by_key;             // pending
  absl::flat_hash_map<const Lane*, std::int64_t> by_lane;
  absl::flat_hash_map<const TierState*, std::int64_t> aged_in;
  absl::flat_hash_map<const Resource*, std::int64_t> by_resource;  // refs
  std::size_t scheduled = 0;
  std::size_t expiring = 0;  // pending jobs whose type has a queue-wait limit
  absl::flat_hash_set<std::uint32_t> free(jobs_.free_slots().begin(), jobs_.free_slots().end());
  for (const Job& job : jobs_) {
    if (job.state == JobState::kFree) {
      if (!free.contains(job.slot)) return Broken(absl::StrCat("free slot ", job.slot, " is lost"));
      continue;
    }
    if (free.contains(job.slot)) return Broken(absl::StrCat("live slot ", job.slot, " is free"));
    if (job.resource != nullptr) ++by_resource[job.resource];
    if (job.state == JobState::kRunning) {
      ForEachHold(*this, job,
                  [&](const Usage& usage, std::int32_t amount) { held_by[&usage] += amount; });
      // Charged its estimate, it holds that (type, id)'s entry; charged an explicit cost, none.
      const bool holds_its_own =
          job.estimate != nullptr && EstimateTable::Holds(job.estimate, job.type->index, job.id);
      if (job.has_explicit_cost ? job.estimate != nullptr : !holds_its_own) {
        return Broken(absl::StrCat("running job ", job.seq,
                                   " does not hold the estimate it was charged from"));
      }
      if (job.promotion_scheduled) return Broken("a running job has an aging step scheduled");
      continue;
    }
    ++pending;
    ++by_type[job.type];
    ++by_key[job.key];
    if (job.lane == nullptr || job.lane->key != job.key || HomeOf(*job.lane) != HomeFor(job)) {
      return Broken(absl::StrCat("pending job ", job.seq, " is not in its key's lane of its type"));
    }
    ++by_lane[job.lane];
    if (job.lane->tier != job.type->tier) ++aged_in[job.lane->tier];
    const bool in_ready = job.lane->ready.contains(ReadyEntryOf(job));
    // Ready in its home lane; parked in its parked lane of its own resource.
    const bool parked_lane = job.lane->group != nullptr;
    if (!in_ready || parked_lane != (job.state == JobState::kParked) ||
        (parked_lane && job.lane->group->resource != job.resource)) {
      return Broken(absl::StrCat("pending job ", job.seq, " is not in the right lane"));
    }
    const bool can_rise =
        options_.rule.aging && !Paused(job) && TierAbove(*job.lane->tier) != nullptr;
    if (job.promotion_scheduled != can_rise) {
      return Broken(absl::StrCat(
          "job ", job.seq,
          can_rise ? " can age but has no step scheduled" : " has a step it cannot take"));
    }
    if (job.promotion_scheduled) {
      ++scheduled;
      if (!steps_.HasPromotion(job)) {
        return Broken(absl::StrCat("job ", job.seq, "'s aging step is not in the queue"));
      }
    }
    if (TimedSteps::Expires(job)) {
      ++expiring;
      if (!steps_.HasExpiry(job)) {
        return Broken(absl::StrCat("job ", job.seq, "'s queue-wait limit is not in its queue"));
      }
    }
  }
  // Whether a constraint holds what the running jobs hold of it, and (unless its limit may be
  // lowered below that) no more than its limit.
  auto holds_wrongly = [&](const Constraint& c, bool limit_may_drop) {
    const auto it = held_by.find(&c);
    return c.used() != (it == held_by.end() ? 0 : it->second) ||
           (!limit_may_drop && c.used() > c.limit());
  };
  if (holds_wrongly(slots_, /*limit_may_drop=*/true) || pending != pending_) {
    return Broken(absl::StrCat("slots in use/pending counted ", slots_.used(), "/", pending_,
                               ", jobs say ", held_by[&slots_], "/", pending));
  }
  if (Status s = CheckJoinPoints(); !s.ok()) return s;
  if (Status s = steps_.CheckSizes(scheduled, expiring); !s.ok()) {
    return Broken(std::string(s.message()));
  }
  if (slots_.used() > options_.rule.max_concurrency) {
    return Broken("more slots used than the global cap");
  }
  if (slots_.limit() < 1 || slots_.limit() > options_.rule.max_concurrency) {
    return Broken("the capacity in force is outside [1, max_concurrency]");
  }

  // Types and tiers: counts and caps.
  for (const auto& tier : tiers_) {
    std::int64_t tier_pending = 0;
    for (const TypeState* type : tier->types) {
      if (type->home != (Shares(*type) ? &tier->shared : &type->lanes) ||
          (type->home != &type->lanes && !type->lanes.empty())) {
        return Broken(absl::StrCat("type ", type->name, "'s lanes are not where it shares or not"));
      }
      if (holds_wrongly(type->running, false) || type->pending != by_type[type] ||
          type->running.limit() != type->config.max_concurrency) {
        return Broken(absl::StrCat("type ", type->name, " counts ", type->running.used(), "/",
                                   type->pending, " of its cap ", type->running.limit(),
                                   ", jobs say ", held_by[&type->running], "/", by_type[type]));
      }
      tier_pending += type->pending;
    }
    if (holds_wrongly(tier->slots, false) || tier->pending != tier_pending ||
        tier->slots.limit() != tier->priority) {
      return Broken(absl::StrCat("tier ", tier->priority, " counts differ from its jobs'"));
    }
    if (tier->aged_in != aged_in[tier.get()]) {
      return Broken(absl::StrCat("tier ", tier->priority, " counts ", tier->aged_in,
                                 " aged-in jobs, jobs say ", aged_in[tier.get()]));
    }
  }

  // Lane sets: each a heap in order whose lanes know their entries' positions.
  for (const auto& tier : tiers_) {
    for (const TypeState* type : tier->types) {
      if (!type->lanes.valid()) return Broken(absl::StrCat("type ", type->name, "'s lane heap"));
    }
    if (!tier->shared.valid()) {
      return Broken(absl::StrCat("the shared lane heap of tier ", tier->priority));
    }
    for (const auto& group : tier->aged) {
      if (!group->lanes.valid()) {
        return Broken(absl::StrCat("an aged group's lane heap in tier ", tier->priority));
      }
    }
  }
  for (const auto& [name, resource] : resources_) {
    for (const auto& group : resource.groups) {
      if (!group->lanes.valid()) {
        return Broken(absl::StrCat("a wait group's lane heap of resource '", name.name, "'"));
      }
    }
  }

  // Keys, their lanes and presences.
  absl::flat_hash_map<const TierState*, std::int64_t> held;
  absl::flat_hash_map<const LaneSet*, std::size_t> linked;
  for (const auto& [name, key] : keys_) {
    // A key's limit may be lowered below what it runs (SetKeyLimits): only the count is checked.
    const std::int64_t key_running = held_by[&key.running];
    if (key.running.used() != key_running || key.pending != by_key[&key]) {
      return Broken(absl::StrCat("key '", name, "' counts ", key.running.used(), "/", key.pending,
                                 ", jobs say ", key_running, "/", by_key[&key]));
    }
    if (key.idle_hook.is_linked() != (key.pending == 0 && key.running.used() == 0)) {
      return Broken(absl::StrCat("key '", name, "' is ", key.idle_hook.is_linked() ? "" : "not ",
                                 "in the idle list"));
    }
    std::int64_t in_lanes = 0;
    for (const Lane* lane = key.lanes; lane != nullptr; lane = lane->next_in_key) {
      if (lane->key != &key) return Broken(absl::StrCat("key '", name, "' owns another's lane"));
      if (lane->pending != by_lane[lane] || lane->pending == 0) {
        return Broken(absl::StrCat("a lane of key '", name, "' counts ", lane->pending,
                                   " jobs, jobs say ", by_lane[lane]));
      }
      in_lanes += lane->pending;
      const bool admissible = Admissible(key);
      if (lane->linked != (!lane->ready.empty() && admissible) ||
          lane->held != (lane->group == nullptr && !lane->ready.empty() && !admissible)) {
        return Broken(absl::StrCat("a lane of key '", name, "' is linked or held wrongly"));
      }
      held[lane->tier] += lane->held;
      if (lane->linked) {
        if (!(lane->order == AdmissionOrder{PlaceOf(key), lane->ready.front().place})) {
          return Broken(absl::StrCat("a lane of key '", name, "' sorts by a stale entry"));
        }
        if (!lane->set->contains(*lane)) {
          return Broken(absl::StrCat("a linked lane of key '", name, "' is missing from its set"));
        }
        ++linked[lane->set];
      }
    }
    if (in_lanes != key.pending) return Broken(absl::StrCat("key '", name, "' lost a lane"));
    if (options_.rule.idle_catch_up) {
      absl::flat_hash_map<const TierState*, std::int64_t> per_tier;
      for (const auto& [lane, n] : by_lane) {
        if (lane->key == &key) per_tier[lane->type->tier] += n;
      }
      std::size_t presences = 0;
      for (const TierPresence* p = key.tiers; p != nullptr; p = p->next_in_key) {
        ++presences;
        if (p->pending != per_tier[p->tier] || !p->tier_hook.is_linked()) {
          return Broken(
              absl::StrCat("key '", name, "''s presence in tier ", p->tier->priority, " is stale"));
        }
      }
      std::size_t tiers_with_pending = 0;
      for (const auto& [tier, n] : per_tier) tiers_with_pending += n > 0;
      if (presences != tiers_with_pending) {
        return Broken(absl::StrCat("key '", name, "' has ", presences, " tier presences for ",
                                   tiers_with_pending, " tiers"));
      }
    }
  }
  // Wait groups: each holds its linked parked lanes; its proxy stands in the home set at the
  // best one's entry exactly while the resource has room.
  for (const auto& [name, resource] : resources_) {
    for (const auto& group : resource.groups) {
      if (group->resource != &resource || group->lanes.size() != linked[&group->lanes]) {
        return Broken(absl::StrCat("a wait group of resource '", name.name, "' is stale"));
      }
      const Lane& proxy = group->proxy;
      if (proxy.linked != (!group->lanes.empty() && IdBlocker(&resource) == Blocker::kNone)) {
        return Broken(absl::StrCat("the proxy of resource '", name.name, "' is linked wrongly"));
      }
      if (proxy.linked) {
        if (!(proxy.order == group->lanes.front()->order) || !proxy.set->contains(proxy)) {
          return Broken(absl::StrCat("the proxy of resource '", name.name, "' sorts stale"));
        }
        ++linked[proxy.set];
      }
    }
  }
  for (const auto& tier : tiers_) {
    if (tier->held_lanes != held[tier.get()]) {
      return Broken(absl::StrCat("tier ", tier->priority, " counts ", tier->held_lanes,
                                 " held lanes, lanes say ", held[tier.get()]));
    }
    for (const TypeState* type : tier->types) {
      if (type->lanes.size() != linked[&type->lanes]) {
        return Broken(absl::StrCat("type ", type->name, "'s lane set has unlinked lanes"));
      }
    }
    if (tier->shared.size() != linked[&tier->shared]) {
      return Broken(
          absl::StrCat("the shared lane set of tier ", tier->priority, " has unlinked lanes"));
    }
    for (const auto& group : tier->aged) {
      if (group->lanes.size() != linked[&group->lanes]) {
        return Broken(
            absl::StrCat("an aged group in tier ", tier->priority, " has unlinked lanes"));
      }
    }
  }

  // Resources: runners counted and within the group's limit.
  for (const auto& [name, resource] : resources_) {
    if (resource.refs != by_resource[&resource]) {
      return Broken(absl::StrCat("resource '", name.name, "' counts ", resource.refs,
                                 " references, jobs say ", by_resource[&resource]));
    }
    if (holds_wrongly(resource.running, false)) {
      return Broken(absl::StrCat("resource '", name.name, "' counts ", resource.running.used(),
                                 " running jobs of its limit ", resource.running.limit(),
                                 ", jobs say ", held_by[&resource.running]));
    }
  }
  if (by_resource.size() > resources_.size()) return Broken("a job names a forgotten resource");
  return CheckWorkers(held_by);
}

// Each worker holds what the jobs on it hold (its slots may have been lowered below that), knows
// exactly its running jobs, serves what its config names, and each type's workers and their
// room count are what the workers say; no job runs on a worker without workers, or pending on
// one; no reservation outlives its decision.
Status AdmissionCore::CheckWorkers(
    const absl::flat_hash_map<const Usage*, std::int64_t>& held_by) const {
  std::size_t on_workers = 0;
  for (const Job& job : jobs_) {
    if (job.state == JobState::kFree || job.worker == 0) continue;
    if (job.state != JobState::kRunning) {
      return Broken(absl::StrCat("pending job ", job.seq, " names a worker"));
    }
    if (job.worker > workers_.size() || workers_[job.worker - 1] == nullptr ||
        !workers_[job.worker - 1]->running.contains(job.slot)) {
      return Broken(absl::StrCat("job ", job.seq, " runs on a worker that does not know it"));
    }
    ++on_workers;
  }
  // A job admitted before the first worker was added runs on none: that is not checked.
  std::size_t known = 0;
  for (const auto& worker : workers_) {
    if (worker == nullptr) continue;
    known += worker->running.size();
    const auto it = held_by.find(&worker->slots);
    if (worker->slots.used() != (it == held_by.end() ? 0 : it->second) ||
        worker->slots.limit() != worker->config.slots) {
      return Broken(absl::StrCat("worker '", worker->name, "' counts ", worker->slots.used(),
                                 " slots in use, its jobs hold ",
                                 it == held_by.end() ? 0 : it->second));
    }
    if (worker->reserved || worker->claimant != nullptr) {
      return Broken(absl::StrCat("worker '", worker->name, "' is reserved outside a decision"));
    }
    std::size_t serves = 0;
    for (const auto& type : types_) {
      const bool listed = std::find(worker->served.begin(), worker->served.end(), type.get()) !=
                          worker->served.end();
      bool named = std::find(worker->config.types.begin(), worker->config.types.end(),
                             type->name) != worker->config.types.end();
      for (const std::string& tag : worker->config.tags) {
        named = named || std::find(type->config.tags.begin(), type->config.tags.end(), tag) !=
                             type->config.tags.end();
      }
      const bool fits = worker->config.slots >= type->config.slots;
      if (listed != (named && fits)) {
        return Broken(absl::StrCat("worker '", worker->name, "' serves type ", type->name,
                                   listed
                                       ? (named ? " but is narrower than it" : " without naming it")
                                       : " but does not list it"));
      }
      serves += listed;
    }
    if (serves != worker->served.size()) {
      return Broken(absl::StrCat("worker '", worker->name, "' lists a type twice"));
    }
  }
  if (known != on_workers) return Broken("a worker lists a job that does not run on it");
  if (!reserved_workers_.empty()) return Broken("reservations outlived their decision");
  for (const auto& type : types_) {
    std::int32_t with_room = 0;
    for (std::size_t i = 0; i < type->workers.size(); ++i) {
      const WorkerState* w = type->workers[i];
      with_room += WorkerFits(*w, *type);
      if (std::find(w->served.begin(), w->served.end(), type.get()) == w->served.end()) {
        return Broken(absl::StrCat("type ", type->name, " lists worker '", w->name,
                                   "', which does not serve it"));
      }
      if (i > 0 && std::pair(type->workers[i - 1]->served.size(), type->workers[i - 1]->added) >=
                       std::pair(w->served.size(), w->added)) {
        return Broken(
            absl::StrCat("type ", type->name, "'s workers are not most specialised first"));
      }
    }
    if (with_room != type->workers_with_room) {
      return Broken(absl::StrCat("type ", type->name, " counts ", type->workers_with_room,
                                 " workers with room, its workers say ", with_room));
    }
    const bool sole =
        std::find(sole_types_.begin(), sole_types_.end(), type.get()) != sole_types_.end();
    if (sole != (type->workers.size() == 1)) {
      return Broken(absl::StrCat("type ", type->name, " is listed as sole-served wrongly"));
    }
  }
  std::size_t served_pairs = 0, listed_pairs = 0;
  for (const auto& worker : workers_) served_pairs += worker == nullptr ? 0 : worker->served.size();
  for (const auto& type : types_) listed_pairs += type->workers.size();
  if (served_pairs != listed_pairs) return Broken("types and workers disagree on who serves what");
  return absl::OkStatus();
}

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
  for (const auto& type : types_) {
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

// LaneIndex: lanes, lane sets, wait groups and their proxies, and the resources they wait on.
#include "core/lane_index.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/check.h"

namespace fairgate::core {

void LaneIndex::FreeLanesOf(KeyState& key) {
  while (Lane* lane = key.lanes) {
    key.lanes = lane->next_in_key;
    delete lane;
  }
}

Resource* LaneIndex::RefResource(const TypeState& type, absl::string_view id) {
  if (type.conflict_group == 0) return nullptr;
  auto it = resources_.find(IndexedNameView{type.conflict_group, id});
  if (it == resources_.end()) {
    it = resources_.emplace(IndexedName{type.conflict_group, std::string(id)}, Resource{}).first;
    it->second.name = &it->first;
    it->second.running.set_limit(type.config.conflict_limit);  // the same for the whole group
  }
  ++it->second.refs;
  return &it->second;
}

void LaneIndex::UnrefResource(Resource* resource) {
  if (resource == nullptr || --resource->refs > 0) return;
  resources_.erase(resources_.find(resource->name->view()));
}

LaneSet& LaneIndex::SetFor(TypeState& type, TierState& tier) {
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

template <bool kGrouping>
Lane& LaneIndex::LaneFor(KeyState& key, TypeState& type, TierState& tier, Resource* parked_on) {
  // A lane's set names its type, tier and resource: the walk compares sets only, which are in
  // the lanes' first 64 bytes.
  LaneSet& home = &tier == type.tier ? *type.home : SetFor(type, tier);
  WaitGroup* group = parked_on != nullptr ? &GroupFor(*parked_on, home) : nullptr;
  LaneSet* set = group != nullptr ? &group->lanes : &home;
  GroupPresence* presence = nullptr;
  if (kGrouping && groups_.in_use()) {
    if (GroupState* owner = GroupTable::Of(key)) {
      presence = &PresenceFor(*owner, *set, group, tier);
      set = &presence->lanes;
    }
  }
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
  if (presence != nullptr) ++presence->refs;
  return *lane;
}

GroupPresence& LaneIndex::PresenceFor(GroupState& group, LaneSet& parent, WaitGroup* wait_group,
                                      TierState& tier) {
  for (GroupPresence* p = group.presences; p != nullptr; p = p->next_in_group) {
    if (p->set == &parent) return *p;
  }
  auto* presence = new GroupPresence;
  presence->presence = true;
  presence->set = &parent;
  presence->group = wait_group;
  presence->tier = &tier;
  presence->owner = &group;
  presence->lanes.set_presence(presence);
  presence->next_in_group = group.presences;
  group.presences = presence;
  return *presence;
}

WaitGroup& LaneIndex::GroupFor(Resource& resource, LaneSet& home) {
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

template <bool kGrouping>
void LaneIndex::LeaveLane(Job& job) {
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
    LaneSet* set = lane->set;
    GroupPresence* presence = kGrouping ? set->presence() : nullptr;
    if (spare_lanes_.size() < kSpareLanes) {
      // Nothing to reset: an empty lane has no jobs (`ready` empty, `pending` 0), is unlinked and
      // not held, LaneFor sets its key, type, tier, group and set, and its order is read only
      // while it is linked.
      spare_lanes_.emplace_back(lane);
    } else {
      delete lane;
    }
    if (presence != nullptr && --presence->refs == 0) {
      // The group's last lane in that set: its stand-in goes (unlinked and not held: it stood for
      // no lane).
      if (presence->linked) UnlinkLane(*presence);
      if (presence->held) {
        presence->tier->held_lanes -= 1;
        presence->held = false;
      }
      GroupPresence** in_group = &presence->owner->presences;
      while (*in_group != presence) in_group = &(*in_group)->next_in_group;
      *in_group = presence->next_in_group;
      delete presence;
      if (group != nullptr) SyncProxy(*group);
    } else {
      // Not freed: the set is the stand-in's (still there) or the lane's.
      Follow<kGrouping>(*set, group);
    }
  }
}

void LaneIndex::Move(Job& job, Lane& target) {
  Remove(job);
  LeaveLane(job);
  JoinLane(job, target);
  Insert(job);
}

void LaneIndex::Park(Job& job) {
  ++parked_in_decision_;
  job.was_parked = true;
  Move(job, LaneFor(*job.key, *job.type, *job.lane->tier, job.resource));
}

Job* LaneIndex::FrontOf(LaneSet& lanes) {
  while (!lanes.empty()) {
    // A group's stand-in stands for its first lane.
    Lane& front = *Member(lanes.front());
    if (front.key == nullptr) {
      // A wait group's proxy: its resource has room and the first job of its best parked lane
      // comes first here. It goes home, where it is the head of the set's first lane.
      Unpark(*Member(front.group->lanes.front())->ready.front().job);
      continue;
    }
    Job& head = *front.ready.front().job;
    if (IdBlocker(head.resource) == Blocker::kNone) return &head;
    Park(head);
  }
  return nullptr;
}

template <bool kGrouping>
void LaneIndex::SyncLane(Lane& lane, bool admissible) {
  const bool held = lane.group == nullptr && !lane.ready.empty() && !admissible;
  if (held != lane.held) {
    lane.tier->held_lanes += held ? 1 : -1;
    lane.held = held;
  }
  std::optional<AdmissionOrder> order;
  if (!lane.ready.empty() && admissible) {
    order = AdmissionOrder{keys_.PlaceOf(*lane.key), lane.ready.front().place};
  }
  // The best lane of the group or stand-in the lane is in may have changed.
  if (PlaceLane<kGrouping>(lane, order)) Follow<kGrouping>(*lane.set, lane.group);
}

template <bool kGrouping>
void LaneIndex::RelinkKey(KeyState& key, bool was_admissible, const Lane* head_changed) {
  if (key.lanes == nullptr) return;
  const bool admissible = keys_.Admissible(key);
  if (!was_admissible || !admissible) {
    for (Lane* lane = key.lanes; lane != nullptr; lane = lane->next_in_key) {
      SyncLane<kGrouping>(*lane, admissible);
    }
    return;
  }
  // Every lane of an admissible key is linked (each has jobs), and only `head_changed` has a
  // new head: the others move to the key's new place with the head their place already holds,
  // reading only their first 64 bytes, not their jobs (queue_nodes.h).
  const KeyPlace place = keys_.PlaceOf(key);
  for (Lane* lane = key.lanes; lane != nullptr; lane = lane->next_in_key) {
    if (lane == head_changed) {
      SyncLane<kGrouping>(*lane, true);
    } else if (MoveLane<kGrouping>(*lane, {place, lane->order.job})) {
      // The best lane of its group or stand-in may have changed.
      Follow<kGrouping>(*lane->set, lane->group);
    }
  }
}

void LaneIndex::SyncProxy(WaitGroup& group) {
  std::optional<AdmissionOrder> order;
  KeyPlace place;
  if (!group.lanes.empty() && IdBlocker(group.resource) == Blocker::kNone) {
    order = group.lanes.front()->order;
    place = group.lanes.front_group();
  }
  PlaceStandIn(group.proxy, order, group.place, place);
}

void LaneIndex::SyncPresence(GroupPresence& presence) {
  const GroupState& group = *presence.owner;
  SyncPresence(presence, groups_.Admissible(group), groups_.PlaceOf(group));
}

// Inlined into its two callers: a charge to a group runs it once per stand-in, and a call paid
// about 20 instructions of saved registers each time (bench/HISTORY.md).
inline void LaneIndex::SyncPresence(GroupPresence& presence, bool admissible,
                                    const KeyPlace& place) {
  const bool empty = presence.lanes.empty();
  const bool held = presence.group == nullptr && !empty && !admissible;
  if (held != presence.held) [[unlikely]] {
    presence.tier->held_lanes += held ? 1 : -1;
    presence.held = held;
  }
  if (empty || !admissible) {
    if (!presence.linked) return;
    UnlinkLane(presence);
  } else {
    const AdmissionOrder& best = presence.lanes.front()->order;
    if (presence.linked) {
      // The place first: a charge to the group moves it and seldom the best lane.
      if (presence.place == place && presence.order == best) return;
      presence.order = best;
      presence.place = place;
      presence.set->RelinkStandIn(presence);
    } else {
      presence.order = best;
      presence.place = place;
      presence.set->insert(presence);
      presence.linked = true;
    }
  }
  if (presence.group != nullptr) SyncProxy(*presence.group);
}

void LaneIndex::UnlinkTierPresences(GroupState& group) {
  for (GroupTierPresence* p = group.tiers; p != nullptr; p = p->next_in_group) {
    p->tier->groups_by_acc.erase(p->tier->groups_by_acc.iterator_to(*p));
  }
}

void LaneIndex::LinkTierPresences(GroupState& group) {
  for (GroupTierPresence* p = group.tiers; p != nullptr; p = p->next_in_group) {
    p->tier->groups_by_acc.insert(*p);
  }
}

// LaneSet's out-of-line paths (queue_nodes.h): defined once, here, so that their noinline
// declarations are not followed by inline definitions.
void LaneSet::InsertOther(Lane& lane) {
  Fit(lane);
  if (compact_) {
    compact_heap_.push(Compact(lane));
  } else if (!grouped_) {
    full_heap_.push({lane.order, &lane});
  } else if (compact_grouped_) {
    compact_grouped_heap_.push(CompactGrouped(GroupPlaceOf(lane), lane));
  } else {
    grouped_heap_.push({GroupPlaceOf(lane), lane.order, &lane});
  }
}

void LaneSet::RelinkOther(Lane& lane) {
  Fit(lane);
  if (compact_) {
    compact_heap_.update(lane.heap_index, Compact(lane));
  } else if (!grouped_) {
    full_heap_.update(lane.heap_index, {lane.order, &lane});
  } else if (compact_grouped_) {
    compact_grouped_heap_.update(lane.heap_index, CompactGrouped(GroupPlaceOf(lane), lane));
  } else {
    grouped_heap_.update(lane.heap_index, {GroupPlaceOf(lane), lane.order, &lane});
  }
}

void LaneIndex::UnlinkTierPresences(KeyState& key) {
  for (TierPresence* p = key.tiers; p != nullptr; p = p->next_in_key) {
    PresenceSet& set = PresenceSetOf(*p);
    set.erase(set.iterator_to(*p));
  }
}

void LaneIndex::LinkTierPresences(KeyState& key) {
  for (TierPresence* p = key.tiers; p != nullptr; p = p->next_in_key) PresenceSetOf(*p).insert(*p);
}

void LaneIndex::RelinkGroup(GroupState& group) {
  const bool admissible = groups_.Admissible(group);
  const KeyPlace place = groups_.PlaceOf(group);
  for (GroupPresence* p = group.presences; p != nullptr; p = p->next_in_group) {
    SyncPresence(*p, admissible, place);
  }
}

bool LaneIndex::PlaceStandIn(Lane& stand_in, const std::optional<AdmissionOrder>& order,
                             KeyPlace& field, const KeyPlace& place) {
  if (!order) {
    if (!stand_in.linked) return false;
    UnlinkLane(stand_in);
    return true;
  }
  if (stand_in.linked && stand_in.order == *order && field == place) return false;
  stand_in.order = *order;
  field = place;
  if (stand_in.linked) {
    stand_in.set->Relink(stand_in);
  } else {
    stand_in.set->insert(stand_in);
    stand_in.linked = true;
  }
  return true;
}

template <bool kGrouping>
bool LaneIndex::PlaceLane(Lane& lane, const std::optional<AdmissionOrder>& order) {
  if (order ? lane.linked && lane.order == *order : !lane.linked) return false;
  if (!order) {
    UnlinkLane(lane);
  } else if (lane.linked) {
    MoveLane<kGrouping>(lane, *order);
  } else {
    lane.order = *order;
    lane.set->insert<kGrouping>(lane);
    lane.linked = true;
  }
  return true;
}

template <bool kGrouping>
bool LaneIndex::MoveLane(Lane& lane, const AdmissionOrder& order) {
  if (lane.order == order) return false;
  lane.order = order;
  lane.set->Relink<kGrouping>(lane);
  return true;
}

void LaneIndex::UnlinkLane(Lane& lane) {
  lane.set->erase(lane);
  lane.linked = false;
}

void LaneIndex::Reopen(Resource& resource) {
  // A group of a few parked lanes sends their first jobs home at once: as cheap as linking the
  // proxy, and their keys keep fewer lanes to relink at each charge (bench/HISTORY.md). A larger
  // group is left to its proxy, so that a release costs O(log n) however many wait.
  static constexpr std::size_t kReturnedAtOnce = 4;
  for (auto& group : resource.groups) {
    if (!group->lanes.empty() && group->lanes.size() <= kReturnedAtOnce) {
      Lane* lanes[kReturnedAtOnce];
      std::size_t n = 0;
      // A group's stand-in sends its first lane's.
      group->lanes.ForEach([&](Lane* lane) { lanes[n++] = Member(lane); });
      // Each goes home; the rest of its lane stays parked, behind it (and behind the proxy).
      for (std::size_t i = 0; i < n; ++i) Unpark(*lanes[i]->ready.front().job);
    }
    SyncProxy(*group);
  }
}

void LaneIndex::Rehome(TypeState& type, LaneSet& home, JobTable& jobs) {
  if (type.home == &home) return;
  std::vector<Job*> moved;  // its pending jobs in its own tier: in lanes of the old home
  for (Job& job : jobs) {
    if ((job.state == JobState::kReady || job.state == JobState::kParked) && job.type == &type &&
        job.lane->tier == type.tier) {
      moved.push_back(&job);
    }
  }
  type.home = &home;
  // Each keeps its place; a parked one stays parked, in its resource's wait group of the new home.
  for (Job* job : moved) {
    Resource* parked_on = job->state == JobState::kParked ? job->resource : nullptr;
    Move(*job, LaneFor(*job->key, type, *type.tier, parked_on));
  }
}

namespace {

// Internal naming what is broken; CheckInvariants says whose (as for WorkerTable::Check).
Status Broken(std::string what) { return absl::InternalError(what); }

std::int64_t CountOf(const absl::flat_hash_map<const Usage*, std::int64_t>& held_by,
                     const Usage& usage) {
  const auto it = held_by.find(&usage);
  return it == held_by.end() ? 0 : it->second;
}

}  // namespace

Status LaneIndex::Check(const std::vector<std::unique_ptr<TierState>>& tiers,
                        const LaneRecount& recount) const {
  absl::flat_hash_map<const TierState*, std::int64_t> held;  // held lanes by tier
  absl::flat_hash_map<const LaneSet*, std::size_t> linked;   // lanes and proxies by set
  for (const auto& [name, key] : keys_) {
    if (Status s = CheckLanesOf(name, key, recount, held, linked); !s.ok()) return s;
  }
  if (Status s = CheckPresences(held, linked); !s.ok()) return s;
  if (Status s = CheckResources(recount, linked); !s.ok()) return s;
  // Every lane set is a heap in order whose lanes know their positions, and holds exactly the
  // lanes linked into it; each tier counts its held lanes.
  auto exact = [&](const LaneSet& set) { return set.valid() && set.size() == linked[&set]; };
  for (const auto& tier : tiers) {
    if (tier->held_lanes != held[tier.get()]) {
      return Broken(absl::StrCat("tier ", tier->priority, " counts ", tier->held_lanes,
                                 " held lanes, lanes say ", held[tier.get()]));
    }
    for (const TypeState* type : tier->types) {
      if (!exact(type->lanes)) return Broken(absl::StrCat("type ", type->name, "'s lane set"));
    }
    if (!exact(tier->shared)) {
      return Broken(absl::StrCat("the shared lane set of tier ", tier->priority));
    }
    for (const auto& group : tier->aged) {
      if (!exact(group->lanes)) {
        return Broken(absl::StrCat("an aged group's lane set in tier ", tier->priority));
      }
    }
  }
  return absl::OkStatus();
}

Status LaneIndex::CheckLanesOf(const std::string& name, const KeyState& key,
                               const LaneRecount& recount,
                               absl::flat_hash_map<const TierState*, std::int64_t>& held,
                               absl::flat_hash_map<const LaneSet*, std::size_t>& linked) const {
  std::int64_t in_lanes = 0;
  const bool admissible = keys_.Admissible(key);
  for (const Lane* lane = key.lanes; lane != nullptr; lane = lane->next_in_key) {
    const auto counted = recount.pending_by_lane.find(lane);
    const std::int64_t jobs = counted == recount.pending_by_lane.end() ? 0 : counted->second;
    if (lane->key != &key) return Broken(absl::StrCat("key '", name, "' owns another's lane"));
    // A key of a group has its lanes in its group's stand-ins, and only there.
    const GroupPresence* presence = lane->set->presence();
    if ((presence != nullptr ? presence->owner : nullptr) != GroupTable::Of(key)) {
      return Broken(absl::StrCat("a lane of key '", name, "' is not in its group's stand-in"));
    }
    if (lane->pending != jobs || lane->pending == 0) {
      return Broken(absl::StrCat("a lane of key '", name, "' counts ", lane->pending,
                                 " jobs, jobs say ", jobs));
    }
    in_lanes += lane->pending;
    if (lane->linked != (!lane->ready.empty() && admissible) ||
        lane->held != (lane->group == nullptr && !lane->ready.empty() && !admissible)) {
      return Broken(absl::StrCat("a lane of key '", name, "' is linked or held wrongly"));
    }
    held[lane->tier] += lane->held;
    if (lane->linked) {
      if (!(lane->order == AdmissionOrder{keys_.PlaceOf(key), lane->ready.front().place})) {
        return Broken(absl::StrCat("a lane of key '", name, "' sorts by a stale entry"));
      }
      if (!lane->set->contains(*lane)) {
        return Broken(absl::StrCat("a linked lane of key '", name, "' is missing from its set"));
      }
      ++linked[lane->set];
    }
  }
  if (in_lanes != key.pending) return Broken(absl::StrCat("key '", name, "' lost a lane"));
  return absl::OkStatus();
}

// Groups' stand-ins: each counts the lanes in it, is linked in its parent at its group's place
// and its best lane's order exactly while it has a linked lane, and names its parent's wait group.
Status LaneIndex::CheckPresences(absl::flat_hash_map<const TierState*, std::int64_t>& held,
                                 absl::flat_hash_map<const LaneSet*, std::size_t>& linked) const {
  absl::flat_hash_map<const LaneSet*, std::int64_t> lanes_by_set;
  for (const auto& [name, key] : keys_) {
    for (const Lane* lane = key.lanes; lane != nullptr; lane = lane->next_in_key) {
      ++lanes_by_set[lane->set];
    }
  }
  for (const auto& [name, group] : groups_) {
    for (const GroupPresence* p = group.presences; p != nullptr; p = p->next_in_group) {
      const std::int64_t lanes = lanes_by_set[&p->lanes];
      if (!p->presence || p->owner != &group || p->lanes.presence() != p || p->refs != lanes ||
          lanes == 0) {
        return Broken(absl::StrCat("a stand-in of group '", name, "' counts ", p->refs,
                                   " lanes, lanes say ", lanes));
      }
      if (!p->lanes.valid() || p->lanes.size() != linked[&p->lanes]) {
        return Broken(absl::StrCat("the lane set of a stand-in of group '", name, "'"));
      }
      if (p->group != nullptr && &p->group->lanes != p->set) {
        return Broken(absl::StrCat("a stand-in of group '", name, "' names another wait group"));
      }
      const bool admissible = groups_.Admissible(group);
      if (p->linked != (!p->lanes.empty() && admissible) ||
          p->held != (p->group == nullptr && !p->lanes.empty() && !admissible)) {
        return Broken(absl::StrCat("a stand-in of group '", name, "' is linked or held wrongly"));
      }
      held[p->tier] += p->held;
      if (p->linked) {
        if (!(p->order == p->lanes.front()->order) || !(p->place == groups_.PlaceOf(group)) ||
            !p->set->contains(*p)) {
          return Broken(absl::StrCat("a stand-in of group '", name, "' sorts stale"));
        }
        ++linked[p->set];
      }
    }
  }
  return absl::OkStatus();
}

// Resources: their references and runners; their wait groups, each holding its linked parked
// lanes, its proxy standing in the home set at the best one's entry exactly while the resource
// has room.
Status LaneIndex::CheckResources(const LaneRecount& recount,
                                 absl::flat_hash_map<const LaneSet*, std::size_t>& linked) const {
  for (const auto& [name, resource] : resources_) {
    const auto refs = recount.jobs_by_resource.find(&resource);
    const std::int64_t jobs = refs == recount.jobs_by_resource.end() ? 0 : refs->second;
    if (resource.refs != jobs) {
      return Broken(absl::StrCat("resource '", name.name, "' counts ", resource.refs,
                                 " references, jobs say ", jobs));
    }
    const std::int64_t running = CountOf(recount.held_by, resource.running);
    if (resource.running.used() != running || resource.running.used() > resource.running.limit()) {
      return Broken(absl::StrCat("resource '", name.name, "' counts ", resource.running.used(),
                                 " running jobs of its limit ", resource.running.limit(),
                                 ", jobs say ", running));
    }
    for (const auto& group : resource.groups) {
      if (!group->lanes.valid()) {
        return Broken(absl::StrCat("a wait group's lane heap of resource '", name.name, "'"));
      }
      if (group->resource != &resource || group->lanes.size() != linked[&group->lanes]) {
        return Broken(absl::StrCat("a wait group of resource '", name.name, "' is stale"));
      }
      const Lane& proxy = group->proxy;
      if (proxy.linked != (!group->lanes.empty() && IdBlocker(&resource) == Blocker::kNone)) {
        return Broken(absl::StrCat("the proxy of resource '", name.name, "' is linked wrongly"));
      }
      if (proxy.linked) {
        if (!(proxy.order == group->lanes.front()->order) ||
            !(group->place == group->lanes.front_group()) || !proxy.set->contains(proxy)) {
          return Broken(absl::StrCat("the proxy of resource '", name.name, "' sorts stale"));
        }
        ++linked[proxy.set];
      }
    }
  }
  if (recount.jobs_by_resource.size() > resources_.size()) {
    return Broken("a job names a forgotten resource");
  }
  return absl::OkStatus();
}

// Both forms of the hot paths (lane_index.h): the core's calls choose one.
template Lane& LaneIndex::LaneFor<true>(KeyState&, TypeState&, TierState&, Resource*);
template Lane& LaneIndex::LaneFor<false>(KeyState&, TypeState&, TierState&, Resource*);
template void LaneIndex::LeaveLane<true>(Job&);
template void LaneIndex::LeaveLane<false>(Job&);
template void LaneIndex::SyncLane<true>(Lane&, bool);
template void LaneIndex::SyncLane<false>(Lane&, bool);
template void LaneIndex::RelinkKey<true>(KeyState&, bool, const Lane*);
template void LaneIndex::RelinkKey<false>(KeyState&, bool, const Lane*);

}  // namespace fairgate::core

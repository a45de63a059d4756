// LaneIndex: where the pending jobs wait in the admission order. Internal to src/core.
//
// A pending job is in a lane (core/queue_nodes.h): the jobs of one key and one type in one
// effective tier, in their order. A lane is linked into its lane set (its type's own, its tier's
// shared one, or an aged group's) at its key's place and its head's while it has ready jobs and
// its key is admissible (KeyTable::Admissible); the set's front is then its first admissible
// lane. A job whose resource is full is parked in a lane of the resource's wait group, which
// stands in the home set as one entry (its proxy) while the resource has room, so a release
// relinks one entry however many wait.
//
// This part owns the lanes (through their keys' lists, with a few spares), the lane sets of the
// aged groups and of the wait groups, and the resources with their wait groups; it keeps every
// lane and proxy linked exactly where those facts say. Which set is a type's home, and when a
// job's type, key or resource changes its room, is the core's: it calls SyncLane, RelinkKey,
// Reopen or Rehome after the change, or makes a key's change through Rekey. Single-threaded,
// like the core.
#ifndef FAIRGATE_CORE_LANE_INDEX_H_
#define FAIRGATE_CORE_LANE_INDEX_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/node_hash_map.h"
#include "absl/strings/string_view.h"
#include "core/constraints.h"
#include "core/group_table.h"
#include "core/indexed_name.h"
#include "core/job_table.h"
#include "core/key_table.h"
#include "core/queue_nodes.h"
#include "fairgate/status.h"

namespace fairgate::core {

// What the jobs themselves say of the lanes and resources, recounted by the core's
// CheckInvariants for LaneIndex::Check.
struct LaneRecount {
  absl::flat_hash_map<const Lane*, std::int64_t> pending_by_lane;
  absl::flat_hash_map<const Resource*, std::int64_t> jobs_by_resource;  // pending and running
  // What the running jobs hold of each constraint (AdmissionCore::ForEachHold).
  absl::flat_hash_map<const Usage*, std::int64_t> held_by;
};

class LaneIndex {
 public:
  // Reads the keys' level and places from `keys`, and whether keys have groups from `groups`;
  // both must outlive it.
  LaneIndex(const KeyTable& keys, const GroupTable& groups) : keys_(keys), groups_(groups) {}
  LaneIndex(const LaneIndex&) = delete;
  LaneIndex& operator=(const LaneIndex&) = delete;
  // Frees a key's lanes (the key is being destroyed with the core).
  static void FreeLanesOf(KeyState& key);

  // The resource of (type's conflict group, id), made if new, with one more job referring to it;
  // null (nothing counted) when the type has no conflict group.
  Resource* RefResource(const TypeState& type, absl::string_view id);
  // One job fewer refers to `resource` (null: none); the last one's forgets it.
  void UnrefResource(Resource* resource);
  // The id level of the one list (core/constraints.h): the conflict limit of a job's resource
  // (null: its type has no conflict group).
  static Blocker IdBlocker(const Resource* resource) {
    return resource != nullptr && resource->running.Full() ? Blocker::kConflictLimit
                                                           : Blocker::kNone;
  }

  // The type's home set in its own tier (TypeState::home), or the aged group's of `tier`.
  LaneSet& SetFor(TypeState& type, TierState& tier);
  // The hot paths (an enqueue, an admission, a completion) take `kGrouping`: false only while no
  // group was ever named (GroupTable::in_use), when no key has a group and no set a stand-in,
  // so that they test neither (issue 51: with no group named, the instructions of a core
  // without groups). The core chooses once per call, as it chooses Pick's; every other caller
  // takes the default, which reads the facts and is right in both cases.

  // The key's home lane for (type, tier), or with `parked_on` its parked lane for that resource;
  // made (empty, in the key's list) if it has none. A key of a group has its lanes in its
  // group's stand-in (GroupPresence) in that set, made if the group has none there.
  template <bool kGrouping = true>
  Lane& LaneFor(KeyState& key, TypeState& type, TierState& tier, Resource* parked_on = nullptr);

  // Counts a pending job into `lane` (JoinLane), or out of its lane, freeing the lane when it
  // empties (LeaveLane). Neither touches the lane's order: Insert and Remove do.
  void JoinLane(Job& job, Lane& lane) {
    job.lane = &lane;
    ++lane.pending;
    if (lane.tier != job.type->tier) ++lane.tier->aged_in;
  }
  template <bool kGrouping = true>
  void LeaveLane(Job& job);
  // Puts a counted job into its lane's order (kReady in a home lane, kParked in a parked one),
  // or takes it out; the lane follows (SyncLane).
  template <bool kGrouping = true>
  void Insert(Job& job) {
    job.lane->ready.insert(ReadyEntryOf(job));
    job.state = job.lane->group != nullptr ? JobState::kParked : JobState::kReady;
    SyncLane<kGrouping>(*job.lane);
  }
  void Remove(Job& job) {
    job.lane->ready.erase(ReadyEntryOf(job));
    SyncLane(*job.lane);
  }
  // Moves a pending job to another lane, keeping its place.
  void Move(Job& job, Lane& target);
  // Returns a parked job to its home lane.
  void Unpark(Job& job) { Move(job, LaneFor(*job.key, *job.type, *job.lane->tier)); }

  // The whole place of a head that FrontOf returned: its group's place (its key's when the key
  // has no group), then its lane's order. Heads of different sets compare by it.
  static GroupedLaneEntry PlaceOfHead(const Job& head) {
    const Lane& lane = *head.lane;
    const GroupPresence* presence = lane.set->presence();
    return {presence != nullptr ? presence->place : lane.order.key, lane.order, head.lane};
  }
  // Whether some key may have a group: heads must then be compared by PlaceOfHead.
  bool grouping() const { return groups_.in_use(); }

  // The best admissible head among `lanes`, or null. On the way it parks the heads whose
  // resource is full (counted in parked_in_decision) and sends home the first job of each
  // proxy's best lane, which then heads the set's first lane.
  Job* FrontOf(LaneSet& lanes);
  // A decision starts: no job parked in it yet.
  void StartDecision() { parked_in_decision_ = 0; }
  // The jobs FrontOf parked since StartDecision: the decision's skips for a full resource.
  int parked_in_decision() const { return parked_in_decision_; }

  // Links, relinks or unlinks the lane so that it is linked, at its current entry, exactly when
  // it has ready jobs and its key is admissible; a parked lane's group's proxy follows.
  template <bool kGrouping = true>
  void SyncLane(Lane& lane) {
    SyncLane<kGrouping>(lane, keys_.Admissible(*lane.key));
  }
  // SyncLane, with the lane's key's admissibility (KeyTable::Admissible) already known: a walk
  // over a key's lanes asks it once (its rate limit is a lookup).
  template <bool kGrouping = true>
  void SyncLane(Lane& lane, bool admissible);
  // The key's admissibility, place or running count changed (it was `was_admissible` before):
  // its lanes follow. Only `head_changed`'s head (if any) changed with it; the others keep the
  // head their entries hold and move reading only their first 64 bytes (queue_nodes.h).
  template <bool kGrouping = true>
  void RelinkKey(KeyState& key, bool was_admissible, const Lane* head_changed);
  // Runs `mutate` (a change to the key's cost, running count or settings) and puts the key's
  // tier presences (TierState::keys_by_acc) and lanes where they now belong. `mutate` changes no
  // lane's head but `head_changed`'s, if given. `admissible_before`: the caller knows the key
  // is admissible now (the key of a job picked from a linked lane), and it is not asked again.
  template <bool kGrouping = true, typename Mutate>
  void Rekey(KeyState& key, Mutate mutate, const Lane* head_changed = nullptr,
             bool admissible_before = false) {
    // The key's group's place and admissibility may change with it (a charge is the group's
    // too): kept out of the way of keys without one.
    if constexpr (kGrouping) {
      if (GroupState* group = GroupTable::Of(key)) [[unlikely]] {
        RekeyInGroup(key, *group, mutate, head_changed, admissible_before);
        return;
      }
    }
    RekeyKey<kGrouping>(key, mutate, head_changed, admissible_before);
  }
  // The group's place or admissibility changed (inside a Rekey of one of its keys, a change of
  // its limits or of its keys): its stand-ins move, one per lane set its keys have lanes in.
  void RelinkGroup(GroupState& group);
  // Around a change of the group's cost outside a Rekey: its tier presences (idle catch-up,
  // TierState::groups_by_acc), which read the cost live, leave their sets and come back.
  [[gnu::noinline]] static void UnlinkTierPresences(GroupState& group);
  [[gnu::noinline]] static void LinkTierPresences(GroupState& group);
  // The same for a key's presences (TierState::keys_by_acc, or its group's), in a Rekey.
  [[gnu::noinline]] static void UnlinkTierPresences(KeyState& key);
  [[gnu::noinline]] static void LinkTierPresences(KeyState& key);
  // The resource's room changed: each of its groups' proxies is linked exactly while it has
  // room (SyncProxies). Reopen, for a resource that had none: also the first jobs of a group of
  // a few lanes go home at once.
  void SyncProxies(Resource& resource) {
    for (auto& group : resource.groups) SyncProxy(*group);
  }
  void Reopen(Resource& resource);
  // Moves the type's pending jobs in its own tier (of `jobs`) to the lanes of `home`, its new
  // home set, if that is not where they are: O(job slots). A parked one stays parked, in its
  // resource's wait group of the new home.
  void Rehome(TypeState& type, LaneSet& home, JobTable& jobs);

  // Every key's lanes, every resource and its wait groups against `recount`, and every lane
  // set of `tiers`: OK, or Internal naming the first broken invariant (for CheckInvariants).
  Status Check(const std::vector<std::unique_ptr<TierState>>& tiers,
               const LaneRecount& recount) const;

 private:
  WaitGroup& GroupFor(Resource& resource, LaneSet& home);
  // Rekey's parts: the key's own, and with its group's place and admissibility.
  template <bool kGrouping, typename Mutate>
  [[gnu::always_inline]] void RekeyKey(KeyState& key, Mutate& mutate, const Lane* head_changed,
                                       bool admissible_before) {
    // The presences' order reads the key's cost live: take them out while it may change.
    if (key.tiers != nullptr) UnlinkTierPresences(key);
    const bool was_admissible = admissible_before || keys_.Admissible(key);
    mutate();
    // A presence exists while the key has pending jobs in its tier (the core's LeavePending
    // frees the ones that end).
    if (key.tiers != nullptr) LinkTierPresences(key);
    RelinkKey<kGrouping>(key, was_admissible, head_changed);
  }
  template <typename Mutate>
  [[gnu::noinline]] void RekeyInGroup(KeyState& key, GroupState& group, Mutate& mutate,
                                      const Lane* head_changed, bool admissible_before) {
    // The stand-ins of the group follow once, after the key's lanes moved among its keys and
    // its place changed with them, not once for each. Its tier presences (idle catch-up) read
    // its cost live: out while it may change.
    if (group.tiers != nullptr) UnlinkTierPresences(group);
    deferring_presences_ = true;
    RekeyKey<true>(key, mutate, head_changed, admissible_before);
    deferring_presences_ = false;
    if (group.tiers != nullptr) LinkTierPresences(group);
    RelinkGroup(group);
  }
  // The group's stand-in in `parent` (a wait group's set when `wait_group` is given), made if
  // the group has none there.
  GroupPresence& PresenceFor(GroupState& group, LaneSet& parent, WaitGroup* wait_group,
                             TierState& tier);
  // A lane's entry in its set changed: the stand-in or proxy that stands for that set follows.
  template <bool kGrouping = true>
  void Follow(const LaneSet& set, WaitGroup* group) {
    if constexpr (kGrouping) {
      if (GroupPresence* presence = set.presence()) {
        if (!deferring_presences_) SyncPresence(*presence);
        return;
      }
    }
    if (group != nullptr) SyncProxy(*group);
  }
  // Links, relinks or unlinks a stand-in so that it is linked, at its group's place and its best
  // lane's order, exactly while it has a linked lane and its group is admissible (else it is held
  // if in a home set); its wait group's proxy, if any, follows.
  void SyncPresence(GroupPresence& presence);
  // The same, with its group's admissibility and place already read (a walk over its stand-ins).
  [[gnu::always_inline]] inline void SyncPresence(GroupPresence& presence, bool admissible,
                                                  const KeyPlace& place);
  // Puts a stand-in or proxy in its set at `order` and group place `place` (stored in `field`),
  // or out of it with no order; false if it already was so.
  bool PlaceStandIn(Lane& stand_in, const std::optional<AdmissionOrder>& order, KeyPlace& field,
                    const KeyPlace& place);
  // The first key lane a linked entry stands for: itself, or its stand-in's first lane.
  static Lane* Member(Lane* lane) {
    return lane->presence ? static_cast<GroupPresence*>(lane)->lanes.front() : lane;
  }
  // Parks a home lane's head whose resource is full.
  void Park(Job& job);
  // Links, relinks or unlinks a group's proxy so that it is linked, at its best lane's entry,
  // exactly when the group has a linked lane and its resource has room.
  void SyncProxy(WaitGroup& group);
  // Puts `lane` in its set at `order`, or out of it with none; false if it already was so.
  template <bool kGrouping = true>
  bool PlaceLane(Lane& lane, const std::optional<AdmissionOrder>& order);
  // PlaceLane for a lane known to be linked, reading only its first 64 bytes.
  template <bool kGrouping = true>
  static bool MoveLane(Lane& lane, const AdmissionOrder& order);
  static void UnlinkLane(Lane& lane);
  // The parts of Check.
  Status CheckLanesOf(const std::string& name, const KeyState& key, const LaneRecount& recount,
                      absl::flat_hash_map<const TierState*, std::int64_t>& held,
                      absl::flat_hash_map<const LaneSet*, std::size_t>& linked) const;
  Status CheckResources(const LaneRecount& recount,
                        absl::flat_hash_map<const LaneSet*, std::size_t>& linked) const;
  Status CheckPresences(absl::flat_hash_map<const TierState*, std::int64_t>& held,
                        absl::flat_hash_map<const LaneSet*, std::size_t>& linked) const;

  const KeyTable& keys_;
  const GroupTable& groups_;
  // Inside RekeyInGroup: the stand-ins' moves wait for its RelinkGroup.
  bool deferring_presences_ = false;
  absl::node_hash_map<IndexedName, Resource, IndexedNameHash, IndexedNameEq> resources_;
  // Lanes that emptied, kept for the next LaneFor: a key with one job at a time (a client whose
  // calls wait for each other) would otherwise allocate and free a lane per job, under the
  // runtime's lock. At most kSpareLanes; each empty (no jobs, unlinked).
  static constexpr std::size_t kSpareLanes = 64;
  std::vector<std::unique_ptr<Lane>> spare_lanes_;
  int parked_in_decision_ = 0;
};

}  // namespace fairgate::core

#endif  // FAIRGATE_CORE_LANE_INDEX_H_

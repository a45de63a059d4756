// GroupTable: the groups of keys (tenants) the core tracks, and their settings. Internal to
// src/core.
//
// A key may belong to one group (AdmissionCore::SetKeyGroup); a key without one is a group of
// its own. The order puts a group's place before its keys' (docs/ordering.md, "Groups"): a group's
// accumulated cost is what its keys were charged, each charge divided by the group's weight. A
// group is tracked from the first job (or charge) of one of its keys until it has been idle
// (nothing of its keys pending or running) for key_ttl, as a key is; its settings (weight, and
// which keys name it, which is the keys' settings) are kept for as long as the scheduler lives.
//
// This part owns the groups' memory, names, lifetime and place; where a group stands in the lane
// sets (its GroupPresences) is the lane index's, which frees them as they empty; the ones left
// when the core is destroyed are freed here.
#ifndef FAIRGATE_CORE_GROUP_TABLE_H_
#define FAIRGATE_CORE_GROUP_TABLE_H_

#include <cstddef>
#include <string>

#include "absl/container/node_hash_map.h"
#include "absl/strings/string_view.h"
#include "core/order.h"
#include "core/queue_nodes.h"

namespace fairgate::core {

using IdleGroupList =
    bi::list<GroupState, bi::member_hook<GroupState, ListHook, &GroupState::idle_hook>>;

class GroupTable {
 public:
  explicit GroupTable(const GroupLimits& default_limits)
      : default_limits_(default_limits), limits_in_use_(default_limits != GroupLimits{}) {}
  ~GroupTable();
  GroupTable(const GroupTable&) = delete;
  GroupTable& operator=(const GroupTable&) = delete;

  // The group's settings, made (weight 1) if it had none. Never forgotten. From the first, the
  // order reads groups (in_use).
  GroupSettings& SettingsFor(absl::string_view name);
  // Whether any group was ever named: until then no key has one, and nothing reads groups.
  bool in_use() const { return !settings_.empty(); }

  // The tracked group of that name, or null.
  const GroupState* Find(absl::string_view name) const {
    auto it = groups_.find(name);
    return it == groups_.end() ? nullptr : &it->second;
  }
  GroupState* Find(absl::string_view name) {
    auto it = groups_.find(name);
    return it == groups_.end() ? nullptr : &it->second;
  }
  // The tracked group of a key, or null: none, or its group is not tracked (a group is tracked
  // while one of its keys has a job pending or running, and afterwards until Evict).
  static GroupState* Of(const KeyState& key) {
    return key.settings != nullptr && key.settings->group != nullptr ? key.settings->group->state
                                                                     : nullptr;
  }
  // The group's tracked state, made (cost 0, idle, in no list yet) if it is not tracked.
  GroupState& Track(GroupSettings& settings);
  // Track, and out of the idle list: one of its keys is about to get a job.
  [[gnu::noinline]] GroupState& TrackAwake(GroupSettings& settings) {
    GroupState& group = Track(settings);
    Wake(group);
    return group;
  }
  static double WeightOf(const GroupState& group) { return group.settings->weight; }
  // The group's limits in force: its own, or the rule's default_group_limits.
  const GroupLimits& LimitsOf(const GroupState& group) const {
    return group.settings->has_limits ? group.settings->limits : default_limits_;
  }
  // Whether the group's keys may run one more job: it runs fewer than its max_running.
  bool Admissible(const GroupState& group) const {
    return group.running.used() < LimitsOf(group).max_running;
  }
  // Whether the group runs fewer jobs than its min_running: its keys go ahead of unreserved ones.
  bool Reserved(const GroupState& group) const {
    return group.running.used() < LimitsOf(group).min_running;
  }
  // A group's place in the order (core/order.h): reserved first, then its accumulated cost, in
  // the place a key's takes among keys.
  KeyPlace PlaceOf(const GroupState& group) const {
    return {Reserved(group) ? 0u : kUnreservedRank, SortableBits(group.acc)};
  }
  // From now on some group has limits: its running count moves its place and admissibility, so
  // every completion of a group's job relinks its stand-ins.
  void UseLimits() { limits_in_use_ = true; }
  bool limits_in_use() const { return limits_in_use_; }

  static bool Idle(const GroupState& group) {
    return group.pending == 0 && group.running.used() == 0;
  }
  // The group is about to get a job or a charge: it leaves the idle list (if it was in it).
  void Wake(GroupState& group) {
    if (group.idle_hook.is_linked()) idle_.erase(idle_.iterator_to(group));
  }
  // The group may have become idle: if it is, it joins the idle list at `now`.
  void MaybeIdle(GroupState& group, double now) {
    if (!Idle(group) || group.idle_hook.is_linked()) return;
    group.idle_since = now;
    idle_.push_back(group);
  }
  // Forgets up to `batch` groups idle for `ttl` by `now`, oldest first, with their costs.
  // Returns how many it forgot.
  std::size_t Evict(double now, double ttl, std::size_t batch);

  std::size_t size() const { return groups_.size(); }
  // Every tracked group as (name, GroupState), in no particular order.
  auto begin() const { return groups_.begin(); }
  auto end() const { return groups_.end(); }

 private:
  absl::node_hash_map<std::string, GroupSettings> settings_;  // stable, never erased
  absl::node_hash_map<std::string, GroupState> groups_;       // nodes: addresses are stable
  IdleGroupList idle_;                                        // in the order they became idle
  const GroupLimits default_limits_;
  bool limits_in_use_;
};

}  // namespace fairgate::core

#endif  // FAIRGATE_CORE_GROUP_TABLE_H_

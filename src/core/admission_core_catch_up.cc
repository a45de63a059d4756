// AdmissionCore's idle catch-up (RuleOptions::idle_catch_up; docs/ordering.md, "Groups"): the
// least costs a returning key or group catches up to, and the presences they are read from. A
// unit of its own: in admission_core.cc they moved the compiler's inlining of the enqueue.
#include <algorithm>
#include <optional>
#include <utility>

#include "core/admission_core.h"

namespace fairgate::core {

void AdmissionCore::CatchUp(KeyState& key, const TierState& tier) {
  GroupState* group = GroupTable::Of(key);
  // Neither has lanes, stand-ins or tier presences yet: their costs change without relinking.
  // An idle group starts at no less than the least among the groups (and keys without one)
  // waiting in the tier, an idle key at no less than the least among its group's keys there.
  if (group != nullptr && GroupTable::Idle(*group)) {
    if (std::optional<double> least = LeastInTier(tier)) group->acc = std::max(group->acc, *least);
  }
  const std::optional<double> least =
      group != nullptr ? LeastInTier(tier, *group) : LeastInTier(tier);
  if (least) key.acc = std::max(key.acc, *least);
}

void AdmissionCore::EnterTier(KeyState& key, TierState& tier) {
  TierPresence* presence = key.tiers;
  while (presence != nullptr && presence->tier != &tier) presence = presence->next_in_key;
  if (presence == nullptr) {
    presence = new TierPresence;
    presence->key = &key;
    presence->tier = &tier;
    presence->next_in_key = key.tiers;
    key.tiers = presence;
    LinkTierPresence(*presence, GroupTable::Of(key));
  }
  ++presence->pending;
}

void AdmissionCore::LeaveTier(KeyState& key, const TierState& tier) {
  TierPresence** link = &key.tiers;
  while ((*link)->tier != &tier) link = &(*link)->next_in_key;
  TierPresence* presence = *link;
  if (--presence->pending == 0) {
    UnlinkTierPresence(*presence);
    *link = presence->next_in_key;
    delete presence;
  }
}

void AdmissionCore::LinkTierPresence(TierPresence& presence, GroupState* group) {
  presence.group = nullptr;
  if (group != nullptr) {
    GroupTierPresence* in_tier = group->tiers;
    while (in_tier != nullptr && in_tier->tier != presence.tier) in_tier = in_tier->next_in_group;
    if (in_tier == nullptr) {
      in_tier = new GroupTierPresence;
      in_tier->group = group;
      in_tier->tier = presence.tier;
      in_tier->next_in_group = group->tiers;
      group->tiers = in_tier;
      presence.tier->groups_by_acc.insert(*in_tier);
    }
    presence.group = in_tier;
  }
  PresenceSetOf(presence).insert(presence);
}

void AdmissionCore::UnlinkTierPresence(TierPresence& presence) {
  // Inside a Rekey of its key the presence is out of its set already (RekeyKey), and inside one
  // of its group the group's presences are out of theirs (RekeyInGroup).
  if (presence.tier_hook.is_linked()) {
    PresenceSet& set = PresenceSetOf(presence);
    set.erase(set.iterator_to(presence));
  }
  GroupTierPresence* in_tier = std::exchange(presence.group, nullptr);
  if (in_tier == nullptr || !in_tier->keys.empty()) return;
  // Its group's last key in the tier: the group leaves it.
  if (in_tier->tier_hook.is_linked()) {
    in_tier->tier->groups_by_acc.erase(in_tier->tier->groups_by_acc.iterator_to(*in_tier));
  }
  GroupTierPresence** link = &in_tier->group->tiers;
  while (*link != in_tier) link = &(*link)->next_in_group;
  *link = in_tier->next_in_group;
  delete in_tier;
}

std::optional<double> AdmissionCore::LeastInTier(const TierState& tier) {
  std::optional<double> least;
  if (!tier.keys_by_acc.empty()) least = tier.keys_by_acc.begin()->key->acc;
  if (!tier.groups_by_acc.empty()) {
    const double group = tier.groups_by_acc.begin()->group->acc;
    if (!least || group < *least) least = group;
  }
  return least;
}

std::optional<double> AdmissionCore::LeastInTier(const TierState& tier, const GroupState& group) {
  for (const GroupTierPresence* p = group.tiers; p != nullptr; p = p->next_in_group) {
    if (p->tier == &tier && !p->keys.empty()) return p->keys.begin()->key->acc;
  }
  return std::nullopt;
}

}  // namespace fairgate::core

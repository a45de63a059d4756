// KeyTable: the fairness keys the core tracks, their settings and the idle list. Internal to
// src/core.
//
// A key is tracked from its first job (or a warm restart's RestoreKey) until it has been idle
// (nothing pending, nothing running) for key_ttl, when a Sweep forgets it and its accumulated
// cost. Its settings (weight, limits, pause) are kept apart, for as long as the scheduler lives,
// whether the key is tracked or not: an operator may set them before a key's first job, and they
// outlive its idle periods. A tracked key with settings points at them; a key without settings
// has weight 1 and the options' default limits.
//
// It also answers the key level of the one list of constraints (core/constraints.h) and a key's
// place in the order (core/order.h), as both read only the key and its settings. What a key's
// jobs and lanes do is the core's and the lane index's; this part owns the keys' memory, names,
// lifetime and level. KeyState addresses are stable (a node map): lanes, jobs and presences
// point at keys.
#ifndef FAIRGATE_CORE_KEY_TABLE_H_
#define FAIRGATE_CORE_KEY_TABLE_H_

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/btree_set.h"
#include "absl/container/node_hash_map.h"
#include "absl/strings/string_view.h"
#include "core/constraints.h"
#include "core/order.h"
#include "core/queue_nodes.h"
#include "fairgate/key_limits.h"
#include "fairgate/learned_state.h"

namespace fairgate::core {

class KeyTable {
 public:
  explicit KeyTable(const KeyLimits& default_limits)
      : default_limits_(default_limits), limits_in_use_(default_limits != KeyLimits{}) {}
  ~KeyTable() { idle_.clear(); }  // safe-mode hooks: unlinked before their nodes die
  KeyTable(const KeyTable&) = delete;
  KeyTable& operator=(const KeyTable&) = delete;

  // The tracked key of that name, or null.
  KeyState* Find(absl::string_view name) {
    auto it = keys_.find(name);
    return it == keys_.end() ? nullptr : &it->second;
  }
  const KeyState* Find(absl::string_view name) const {
    return const_cast<KeyTable*>(this)->Find(name);
  }
  // Tracks a key that is not tracked: cost 0, idle (in no list yet), its settings linked if it
  // has any.
  KeyState& Add(absl::string_view name);

  // The key's settings, made (weight 1, the default limits, not paused) if it had none, and
  // linked to the key if it is tracked. Never forgotten.
  KeySettings& SettingsFor(absl::string_view name);
  const KeyLimits& LimitsOf(const KeyState& key) const {
    return key.settings && key.settings->has_limits ? key.settings->limits : default_limits_;
  }
  static double WeightOf(const KeyState& key) {
    return key.settings != nullptr ? key.settings->weight : 1.0;
  }
  // From now on some key has limits of its own or a pause: the key level checks them. Until the
  // first (with the default limits all off), no key is held back or reserved, and the checks
  // cost nothing.
  void UseLimits() { limits_in_use_ = true; }
  bool limits_in_use() const { return limits_in_use_; }
  // The key level of the one list: the key's pause, then its max_running.
  Blocker BlockerOf(const KeyState& key) const {
    if (!limits_in_use_) return Blocker::kNone;
    if (key.settings != nullptr && key.settings->paused) return Blocker::kKeyPaused;
    if (key.running.used() >= LimitsOf(key).max_running) return Blocker::kKeyLimit;
    return Blocker::kNone;
  }
  // Whether the key level lets the key run one more job: its lanes are linked, not held.
  bool Admissible(const KeyState& key) const { return BlockerOf(key) == Blocker::kNone; }
  // Whether the key runs fewer jobs than its min_running: it goes ahead of unreserved keys.
  bool Reserved(const KeyState& key) const {
    return limits_in_use_ && key.running.used() < LimitsOf(key).min_running;
  }
  // A key's place in the admission order (core/order.h): reserved first, then accumulated cost.
  KeyPlace PlaceOf(const KeyState& key) const {
    return {Reserved(key) ? 0u : kUnreservedRank, SortableBits(key.acc)};
  }

  // The names of the paused keys, in name order (for the snapshot); the pause itself is the
  // key's settings' (KeySettings::paused), changed by the core where its lanes follow.
  void NotePaused(absl::string_view name, bool paused);
  const absl::btree_set<std::string>& paused() const { return paused_; }

  // Whether nothing of the key is pending or running.
  static bool Idle(const KeyState& key) { return key.pending == 0 && key.running.used() == 0; }
  // The key is about to get a job: it leaves the idle list (if it was in it).
  void Wake(KeyState& key) {
    if (key.idle_hook.is_linked()) idle_.erase(idle_.iterator_to(key));
  }
  // The key may have become idle: if it is, it joins the idle list at `now`.
  void MaybeIdle(KeyState& key, double now) {
    if (!Idle(key)) return;
    key.idle_since = now;
    idle_.push_back(key);
  }
  // Forgets up to `batch` keys idle for `ttl` by `now`, oldest first; with `evicted`, appends
  // their names and accumulated costs. Returns how many it forgot.
  std::size_t Evict(double now, double ttl, std::size_t batch,
                    std::vector<std::pair<std::string, double>>* evicted);
  // Puts back a key idle since `idle_since` with its accumulated cost (warm restart), in its
  // place in the idle list. False, nothing done, if the key is tracked already.
  bool Restore(const SavedKey& saved, double idle_since);

  std::size_t size() const { return keys_.size(); }
  // Every tracked key as (name, KeyState), in no particular order: for the O(keys) reports
  // (HeaviestKeys, KeyCosts) and CheckInvariants.
  auto begin() { return keys_.begin(); }
  auto end() { return keys_.end(); }
  auto begin() const { return keys_.begin(); }
  auto end() const { return keys_.end(); }

 private:
  const KeyLimits default_limits_;
  bool limits_in_use_;
  absl::node_hash_map<std::string, KeyState> keys_;         // nodes: KeyState addresses are stable
  absl::node_hash_map<std::string, KeySettings> settings_;  // stable, never erased
  absl::btree_set<std::string> paused_;
  IdleKeyList idle_;  // in the order they became idle
};

}  // namespace fairgate::core

#endif  // FAIRGATE_CORE_KEY_TABLE_H_

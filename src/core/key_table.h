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
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/node_hash_map.h"
#include "absl/strings/string_view.h"
#include "core/constraints.h"
#include "core/order.h"
#include "core/queue_nodes.h"
#include "core/token_bucket.h"
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
  // linked to the key if it is tracked. Never forgotten, but for those that hold nothing but a
  // group of the runtime's rule (KeySettings::group_by_rule), which go with their key's eviction.
  KeySettings& SettingsFor(absl::string_view name);
  // Forgets the settings of a key that is not tracked if they hold nothing but the group the
  // runtime's rule gave it (an evicted key's, a key the rule was asked of and that was not kept).
  void ForgetRuleOnlySettings(absl::string_view name);
  const KeySettings* FindSettings(absl::string_view name) const {
    auto it = settings_.find(name);
    return it == settings_.end() ? nullptr : &it->second;
  }
  const KeyLimits& LimitsOf(const KeyState& key) const {
    return key.settings && key.settings->has_limits ? key.settings->limits : default_limits_;
  }
  static double WeightOf(const KeyState& key) {
    return key.settings != nullptr ? key.settings->weight : 1.0;
  }
  // The key's rate limit in force: its limits' rate_limit, with per_second times the key's weight
  // when KeyLimits::rate_per_weight.
  RateLimit RateOf(const KeyState& key) const {
    const KeyLimits& limits = LimitsOf(key);
    RateLimit rate = limits.rate_limit;
    if (limits.rate_per_weight) rate.per_second *= WeightOf(key);
    return rate;
  }
  // From now on some key has limits of its own or a pause: the key level checks them. Until the
  // first (with the default limits all off), no key is held back or reserved, and the checks
  // cost nothing.
  void UseLimits() { limits_in_use_ = true; }
  bool limits_in_use() const { return limits_in_use_; }
  // From now on some key has a rate limit (its own, or the default): admissions take tokens.
  void UseRates() { rates_in_use_ = true; }
  bool rates_in_use() const { return rates_in_use_; }
  // Part of AdmissionCore::CheckInvariants: each key held by its rate is filed once for release,
  // at its bucket's next token, and nothing else is: OK, or Internal saying what is broken.
  Status CheckRates() const;
  // The key level of the one list: the key's pause, then its max_running, then its rate limit
  // (held from the take that left it without a token until ReleaseDue reaches its next one).
  Blocker BlockerOf(const KeyState& key) const {
    if (!limits_in_use_) return Blocker::kNone;
    if (key.settings != nullptr && key.settings->paused) return Blocker::kKeyPaused;
    if (key.running.used() >= LimitsOf(key).max_running) return Blocker::kKeyLimit;
    if (held_count_ > 0 && RateHeld(key)) return Blocker::kKeyRate;
    return Blocker::kNone;
  }

  // Keys' rate limits (KeyLimits::rate_limit). The state of a key's bucket is kept here, apart
  // from the key (which stays 72 bytes), from its first take under a limit until the key is
  // forgotten; a key without one has a full bucket. An admission takes a token (TakeToken, inside
  // the Rekey that moves the key's lanes: a take that leaves less than one holds the key);
  // ReleaseDue lets go the keys whose next token is due (the core relinks their lanes); a change
  // of the key's limits moves its release (LimitsChanged, inside the Rekey of SetKeyLimits).
  void TakeToken(KeyState& key, double now);
  // Takes out of the release queue each key held by its rate whose next token is due by `now`,
  // earliest first, and calls `release(key)`, which must clear the hold inside a Rekey of the key
  // (Unhold).
  template <typename Release>
  void ReleaseDue(double now, Release release) {
    while (!held_.empty() && held_.begin()->first <= now) {
      KeyState& key = *held_.begin()->second;
      held_.erase(held_.begin());
      release(key);
    }
  }
  void Unhold(const KeyState& key) {
    buckets_.find(&key)->second.held = false;
    --held_count_;
  }
  // Lets the key go now if its rate holds it (out of the release queue too).
  void Release(KeyState& key);
  void LimitsChanged(KeyState& key);
  // When the first key held by its rate gets its next token, if any is held.
  std::optional<double> NextRelease() const {
    if (held_.empty()) return std::nullopt;
    return held_.begin()->first;
  }
  // How many keys their rate holds past `now` (O(log keys + those due by `now`); leased: that a
  // grant has not freed yet).
  std::size_t RateHeldAfter(double now) const {
    if (leased_) return held_count_;
    std::size_t due = 0;
    for (auto it = held_.begin(); it != held_.end() && it->first <= now; ++it) ++due;
    return held_.size() - due;
  }
  // The key's bucket at `now`: its tokens (infinity without a limit), for the snapshot.
  double TokensOf(const KeyState& key, double now) const;
  // When the key's next token is due, if it has none at `now` (leased: when the store said the
  // next would be, if that is after `now`; before the first grant, or once that time has come,
  // nothing: the lease on its way may bring one).
  std::optional<double> MissingTokenAt(const KeyState& key, double now) const;

  // Fleet-wide key buckets (AdmissionCore::LeaseKeyTokens): from now on a key's bucket does not
  // fill with time; it holds the tokens Grant gives it, from none, and a key under a rate limit
  // without a token is held until a grant brings one (no time releases it). A key's bucket is
  // made, empty and asking for a lease, when the key gets a pending job with none (Arrive) or a
  // rate limit (LimitsChanged). Call before any key has a job.
  void LeaseBuckets() { leased_ = true; }
  bool leased() const { return leased_; }
  // The key has nothing pending and is about to get a job (none of its lanes is linked): a key
  // under a rate limit without a bucket gets one, empty, held and asking; one without a token
  // asks for a lease. Leased buckets only (else nothing).
  void Arrive(KeyState& key);
  // A call of the key was refused for want of a token: its bucket asks for a lease (leased).
  void AskFor(KeyState& key);
  // Whether Grant would let the key go (its lanes must then be relinked: inside a Rekey).
  bool GrantFrees(const KeyState& key, double tokens) const;
  // Adds a lease's `tokens` to the key's leased bucket (none: nothing); `due`: when the store
  // said its next token is due. A bucket left with a token is no longer held and asks nothing;
  // one still without asks again only if the key has jobs pending. True when the grant left the
  // key without a token.
  bool Grant(KeyState& key, double tokens, double due);
  // The keys whose leased buckets ask for a lease, with their limits: those without a word from
  // the store first, then by when it said their next token is due.
  template <typename Visit>
  void ForEachAsking(Visit visit) const {
    for (const auto& [due, key] : asking_) visit(*key, RateOf(*key));
  }
  // Whether a key asks for a lease whose next token the store said is due by `now` (or that has
  // had no word yet): a lease the runtime may take at `now`.
  bool AsksBy(double now) const { return !asking_.empty() && asking_.begin()->first <= now; }
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
  // How many keys have settings kept (SettingsFor).
  std::size_t settings_size() const { return settings_.size(); }
  // Every tracked key as (name, KeyState), in no particular order: for the O(keys) reports
  // (HeaviestKeys, KeyCosts) and CheckInvariants.
  auto begin() { return keys_.begin(); }
  auto end() { return keys_.end(); }
  auto begin() const { return keys_.begin(); }
  auto end() const { return keys_.end(); }

 private:
  // A key's bucket: its tokens (core/token_bucket.h), whether it is held until its next one, and
  // `at`: not leased, that token's time (its release, as filed in held_); leased, when the store
  // said the next token is due (0 before the first grant). Leased, whether it asks for a lease is
  // its key's place in asking_. 32 bytes, as the map's slots of a table of many keys are read at
  // each key-level check.
  struct KeyBucket {
    Tokens tokens;
    bool held = false;
    double at = 0;
  };
  static_assert(sizeof(KeyBucket) == 32, "a key's bucket is a map slot's 32 bytes (above)");
  // Leased: holds the key (no release time: a grant lets it go) and files its bucket as asking.
  void HoldLeased(KeyState& key, KeyBucket& bucket);
  // Files the key (whose bucket is `bucket`) as asking for a lease, or not.
  void SetAsked(KeyState& key, const KeyBucket& bucket, bool asked);
  // Files the bucket's release at its next token under `limit`.
  void Hold(KeyState& key, KeyBucket& bucket, const RateLimit& limit);
  bool RateHeld(const KeyState& key) const {
    auto it = buckets_.find(&key);
    return it != buckets_.end() && it->second.held;
  }
  // Forgets the key's bucket (it is forgotten; leased, with its unused tokens).
  void ForgetBucket(KeyState& key);
  Status CheckLeasedRates() const;

  const KeyLimits default_limits_;
  bool limits_in_use_;
  bool rates_in_use_ = default_limits_.rate_limit.limited();
  bool leased_ = false;
  absl::flat_hash_map<const KeyState*, KeyBucket> buckets_;
  // The leased buckets that ask for a lease, by their `at` (filed again when a grant moves it).
  absl::btree_set<std::pair<double, const KeyState*>> asking_;
  // The keys held by their rate, by when their next token is due, then address (the order in
  // which keys due at once are released changes no decision).
  absl::btree_set<std::pair<double, KeyState*>> held_;
  // The buckets that hold their keys (a key taken out of held_ is held until Unhold).
  std::size_t held_count_ = 0;
  absl::node_hash_map<std::string, KeyState> keys_;         // nodes: KeyState addresses are stable
  absl::node_hash_map<std::string, KeySettings> settings_;  // stable, never erased
  absl::btree_set<std::string> paused_;
  IdleKeyList idle_;  // in the order they became idle
};

}  // namespace fairgate::core

#endif  // FAIRGATE_CORE_KEY_TABLE_H_

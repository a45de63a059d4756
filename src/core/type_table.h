// TypeTable: the registered job types, their tiers and conflict groups, the global cap, and the
// type level of the one list (core/constraints.h). Internal to src/core: a part of
// AdmissionCore, which decides; the table keeps its own state consistent and answers the type
// level: whether a job of a type may run as far as its pause, its tier's cap, the global cap, its
// type's cap and (with workers) a worker with room go, and which lane set is a type's home in
// its own tier (Shares).
//
// Types are never removed: a type's index is its registration order, and a TypeState or
// TierState pointer stays valid while the table lives. Tiers are ordered highest priority first.
#ifndef FAIRGATE_CORE_TYPE_TABLE_H_
#define FAIRGATE_CORE_TYPE_TABLE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "core/admission.h"
#include "core/arguments.h"
#include "core/constraints.h"
#include "core/queue_nodes.h"
#include "core/token_bucket.h"
#include "core/worker_table.h"
#include "fairgate/job_type.h"
#include "fairgate/rate_limit.h"
#include "fairgate/rule_options.h"
#include "fairgate/status.h"

namespace fairgate::core {

class TypeTable {
 public:
  using Types = std::vector<std::unique_ptr<TypeState>>;
  using Tiers = std::vector<std::unique_ptr<TierState>>;

  // `max_concurrency` bounds a type's slots and is the global cap until SetCapacity; `aging`
  // (if any) gives the ceiling TierAbove stops at; `global_rate` is every admission's rate limit;
  // `workers` is read for the worker level.
  TypeTable(int max_concurrency, const std::optional<AgingConfig>& aging,
            const RateLimit& global_rate, const std::optional<TierLending>& lending,
            const WorkerTable& workers);
  TypeTable(const TypeTable&) = delete;
  TypeTable& operator=(const TypeTable&) = delete;

  // Registers a type: InvalidArgument for a bad config (ValidateJobType), for slots above
  // max_concurrency or a conflict_limit that differs from its group's; AlreadyExists for a name
  // registered with a different config. Returns the type, and whether it is new (an equal
  // config registered again changes nothing). Its tier is made if it is the first of its
  // priority; its home is its tier's shared set if it Shares. The workers' index is not rebuilt.
  StatusOr<TypeState*> Register(std::string_view name, const JobTypeConfig& config, bool& added);

  // The type of that name, or null.
  [[gnu::always_inline]] TypeState* Find(std::string_view name) const {
    auto it = by_name_.find(AsAbsl(name));
    return it == by_name_.end() ? nullptr : it->second;
  }
  // NotFound naming the type when it is not registered.
  StatusOr<TypeState*> FindOrError(std::string_view name) const;
  const Types& all() const { return types_; }    // registration order
  const Tiers& tiers() const { return tiers_; }  // highest priority first

  // The tier one step above `tier` within the aging ceiling, or null (always with aging off).
  TierState* TierAbove(const TierState& tier) const;
  // How many steps of aging a job of `tier` can take: the tiers above it within the ceiling.
  int StepsToCeiling(const TierState& tier) const;

  // The global cap: the slots running jobs take, against the capacity in force.
  Constraint& global_cap() { return slots_; }
  const Constraint& global_cap() const { return slots_; }
  // Sets the capacity in force, and with it the slots kept back from borrowers.
  void SetCapacity(int capacity);
  // Whether tiers lend (RuleOptions::lending), and the slots of the capacity in force kept back
  // from borrowers: floor(kept_back * capacity).
  bool lends() const { return lending_.has_value(); }
  std::int32_t kept_back() const { return kept_back_; }
  // The global rate limit's bucket (RuleOptions::rate_limit): every admission takes a token.
  TokenBucket& global_rate() { return global_rate_; }
  const TokenBucket& global_rate() const { return global_rate_; }
  // Whether any rate limit is set: the global one, or a registered type's.
  bool rates_in_use() const { return rates_in_use_; }

  // The type level at `now`: the type's pause, then the tier, global and type caps, the global
  // and type rate limits, then (with workers) a worker with room. `kBorrowing`: for a borrower
  // (RuleOptions::lending), whose tier cap has room when the global cap has room for its slots
  // and the slots kept back.
  template <bool kBorrowing = false>
  Blocker BlockerOf(const TypeState& type, double now) const {
    if (const Blocker b = CapBlocker<kBorrowing>(type, now); b != Blocker::kNone) return b;
    return workers_.in_use() ? workers_.BlockerFor(type) : Blocker::kNone;
  }
  // The type level but the worker.
  template <bool kBorrowing = false>
  Blocker CapBlocker(const TypeState& type, double now) const {
    const std::int32_t slots = type.config.slots;
    if (type.paused) return Blocker::kTypePaused;
    if (kBorrowing ? !slots_.Fits(slots + kept_back_) : !type.tier->slots.Fits(slots)) {
      return Blocker::kTierCap;
    }
    if (!slots_.Fits(slots)) return Blocker::kGlobalCap;
    if (type.running.Full()) return Blocker::kTypeCap;
    return rates_in_use_ ? RateBlocker(type, now) : Blocker::kNone;
  }
  // The rate limits of the type level (with some set): the global one, then the type's.
  Blocker RateBlocker(const TypeState& type, double now) const {
    if (global_rate_.limited() && !global_rate_.HasToken(now)) return Blocker::kGlobalRate;
    if (type.rate.limited() && !type.rate.HasToken(now)) return Blocker::kTypeRate;
    return Blocker::kNone;
  }
  // Whether the type level has room for one more job of `type` at `now`; if not, counts `lanes`
  // (when it has jobs) as skipped by the cap or rate without room (a pause is not a cap: not
  // counted), and a refusal of the type's bucket when that was what held them. A borrower's
  // look (`kBorrowing`) counts nothing: the decision's first look counted these lanes.
  template <bool kBorrowing = false>
  bool Fits(TypeState& type, const LaneSet& lanes, DecisionSkips& skipped, double now) const {
    const Blocker blocker = BlockerOf<kBorrowing>(type, now);
    if (blocker == Blocker::kNone) return true;
    if (!kBorrowing && !lanes.empty()) {
      CountCapSkip(blocker, skipped);
      if (blocker == Blocker::kTypeRate) type.rate.CountRefusal();
    }
    return false;
  }
  // Counts one lane set skipped by a type-level `blocker` in `skipped` (a pause counts nothing).
  // The other levels' skips are counted where their jobs wait: held lanes per tier
  // (TierState::held_lanes), jobs parked in the decision (LaneIndex::parked_in_decision).
  static void CountCapSkip(Blocker blocker, DecisionSkips& skipped);

  // Whether the type shares its tier's lanes (TierState::shared): whether every constraint of
  // the type level is one a shared lane set may skip for it (SharingMaySkip). Sharing changes no
  // decision: a key's one lane is ordered by the first of its jobs of the sharing types, as the
  // first of its per-type lanes would be.
  bool Shares(const TypeState& type) const;
  // Whether `blocker`, a constraint of the type level, may go unchecked for `type`'s jobs in its
  // tier's shared lane set: Pick checks it for the whole tier before the set, or it cannot hold
  // a job of the type back (core/constraints.h, "A new constraint"). Every type-level Blocker
  // has its case there (the switch has no default, and the core is built with -Werror=switch):
  // a new constraint cannot be forgotten by sharing.
  bool SharingMaySkip(Blocker blocker, const TypeState& type) const;

 private:
  struct ConflictGroup {
    std::uint32_t index = 0;  // >= 1
    std::int32_t limit = 1;   // jobs of the group running on one id at once
  };
  // The tier of `priority`, made (in its place in the order) if it is the first.
  TierState& TierOf(int priority);

  const int max_concurrency_;
  const std::optional<int> aging_ceiling_;
  const WorkerTable& workers_;
  Types types_;
  absl::flat_hash_map<std::string, TypeState*> by_name_;
  Tiers tiers_;
  absl::flat_hash_map<std::string, ConflictGroup> conflict_groups_;
  Constraint slots_;
  const std::optional<TierLending> lending_;
  std::int32_t kept_back_ = 0;
  // With lending, the most slots a tier may run past its cap: max_concurrency less the slots kept
  // back of it (0 without lending). Shares reads it.
  std::int32_t lent_ceiling_ = 0;
  TokenBucket global_rate_;
  bool rates_in_use_ = global_rate_.limited();
};

}  // namespace fairgate::core

#endif  // FAIRGATE_CORE_TYPE_TABLE_H_

// fairgate/rule_options.h: the admission rule's options, which the core, the simulator and the
// scheduler all read (SchedulerOptions::rule, fairgate/options.h), with their presets and their
// validation. Options are validated when a core or a scheduler is created: a bad value is refused
// with InvalidArgument naming the field by its path, never replaced by a default.
//
// Thread safety: plain value types and a pure function; nothing blocks, owns a resource or needs
// shutting down.
#ifndef FAIRGATE_RULE_OPTIONS_H_
#define FAIRGATE_RULE_OPTIONS_H_

#include <cstddef>
#include <limits>
#include <optional>

#include "fairgate/adaptive_capacity.h"
#include "fairgate/export.h"
#include "fairgate/group_limits.h"
#include "fairgate/key_limits.h"
#include "fairgate/latency_capacity.h"
#include "fairgate/rate_limit.h"
#include "fairgate/seconds.h"
#include "fairgate/status.h"

namespace fairgate {

// Aging: a pending job's place in the order rises with its wait, so that no tier's work waits
// for ever behind a busier one. After `grace`, and then after each `interval`, the job's
// *ordering* tier rises by one registered tier, up to the highest tier whose priority is at most
// `ceiling`: its k-th step is due at arrival + grace + k * interval. A job that aged into a tier
// goes ahead of that tier's own jobs (among themselves, in the usual order). Caps do not move: an
// aged job still counts against, and waits for, its own tier's and its own type's caps. Steps
// walk through the tiers registered when each step is taken.
struct AgingConfig {
  Seconds grace{0.0};     // finite and >= 0
  Seconds interval{1.0};  // finite and > 0
  int ceiling = 1;        // a priority, >= 1
  friend bool operator==(const AgingConfig&, const AgingConfig&) = default;
};

// Tiers that lend idle slots (docs/ordering.md, "Lending"). When a decision finds no admissible
// job, it looks again with every tier's cap replaced by this bound: the running jobs' slots plus
// the job's must leave `floor(kept_back * C)` slots of the capacity in force C free. The first job
// in the order that is admissible so runs as a *borrower*: it holds its tier's slots as any job of
// the tier does, so the tier is over its cap until enough of its jobs end. Borrowers are never
// preempted; a job of another tier is delayed by them only while they run, as the bound in
// docs/ordering.md states.
struct TierLending {
  // The share of the global cap kept back from borrowers, for jobs that run within their tiers'
  // caps. In [0, 1); `kept_back * C` is rounded down, computed in double precision.
  double kept_back = 0.25;
  friend bool operator==(const TierLending&, const TierLending&) = default;
};

// The admission rule: what runs next and how much it counts. The core, the simulator and the
// scheduler all read these.
struct RuleOptions {
  // The original rule, exactly: no reconciliation, no idle catch-up, no lending, TTL eviction on
  // (SchedulerOptions::Seed's rule).
  static RuleOptions Seed() {
    RuleOptions rule;
    rule.reconcile = false;
    rule.idle_catch_up = false;
    rule.lending.reset();
    return rule;
  }

  // A limit that never refuses anything.
  static constexpr std::size_t kUnlimited = std::numeric_limits<std::size_t>::max();

  // The global capacity: at most this many jobs run at once (in slots), or with adaptive_capacity
  // the most it may grow to. >= 1.
  int max_concurrency = 8;

  // Weight of the newest observation in the learned cost of a (type, id):
  // `est = alpha * observed + (1.0 - alpha) * est`. In (0, 1].
  double alpha = 0.3;

  // At completion, correct the key's accumulated cost by `observed - charged`, so a key whose
  // jobs cost more than estimated is not under-charged for good. On by default, off in seed mode.
  bool reconcile = true;

  // A key that has nothing pending or running starts, when it enqueues, at no less than the least
  // accumulated cost among keys with jobs pending in that job's tier. Off in both presets.
  bool idle_catch_up = false;

  // A fairness key with nothing pending or running for this long is forgotten (its accumulated
  // cost with it). > 0.
  Seconds key_ttl{600.0};

  // A learned estimate not charged or updated for this long is forgotten. > 0.
  Seconds estimate_ttl{3600.0};

  // At most this many keys and this many estimates are evicted by one sweep, so a sweep never
  // stalls admission. >= 1.
  std::size_t sweep_batch = 1024;

  // Bounded queues: past these, Enqueue is refused with ResourceExhausted. >= 1.
  std::size_t max_pending_total = kUnlimited;
  std::size_t max_pending_per_key = kUnlimited;
  // Aging (see AgingConfig); none in both presets. Off costs nothing.
  std::optional<AgingConfig> aging;
  // Every type shortest-first (see JobTypeConfig::shortest_first). Off in both presets.
  bool shortest_first = false;
  // The aging term of shortest-first, a >= 0 (finite): a shortest-first job's place within its
  // key is `estimate + a * arrival` instead of its estimate alone (Smith's rule plus linear
  // aging), so a later job of its key goes ahead of it only if it is cheaper by more than a
  // times the time between them. A job of estimated cost c is passed by no job of its key and
  // type that arrived more than c / a after it: its own key's short jobs cannot keep it waiting
  // for ever, in any tier. 0 (both presets): pure shortest-first.
  double shortest_first_aging = 0;
  // The limits of keys that have none of their own (Scheduler::SetKeyLimits): none by default.
  KeyLimits default_key_limits;
  // The limits of every group of keys without its own (Scheduler::SetGroupLimits;
  // fairgate/group_limits.h): none by default.
  GroupLimits default_group_limits;
  // A global cap that follows CPU pressure between a minimum and max_concurrency
  // (fairgate/adaptive_capacity.h). Off in both presets: the cap is max_concurrency.
  std::optional<AdaptiveCapacity> adaptive_capacity;
  // A global cap that follows the jobs' run times against their unloaded ones, between a minimum
  // and max_concurrency (fairgate/latency_capacity.h). Not with adaptive_capacity. Off in both
  // presets.
  std::optional<LatencyCapacity> latency_capacity;
  // With workers (fairgate/worker.h): a type that one worker alone serves and that has had jobs
  // pending this long without one being admitted *starves*, and reserves that worker: while it
  // has a job that nothing but the worker's room holds back, the worker takes no job of another
  // type, and its next room goes to the type of its own that has starved longest. So a rare job
  // is not kept waiting for ever by common jobs that other workers could run, in any tier
  // (docs/ordering.md, "Workers", states the bound). > 0; infinity: never. Ignored without workers.
  Seconds sole_worker_reserve_after{30.0};
  // How often any job may start (fairgate/rate_limit.h): every admission takes a token of this
  // one bucket, besides its type's (JobTypeConfig::rate_limit); while it has none, nothing is
  // admitted until one is due. Off in both presets.
  RateLimit rate_limit;
  // Tiers lend the slots no admissible job wants (TierLending): on in the improved rule, so that a
  // type of priority 1 with a higher max_concurrency uses an idle server; off in seed mode, where
  // a tier's priority is its cap, always.
  std::optional<TierLending> lending = TierLending{};
};

// Returns OK when every field of the rule is in range, else InvalidArgument naming the first bad
// field by its path ("rule.max_concurrency must be >= 1, got 0").
FAIRGATE_EXPORT Status ValidateRuleOptions(const RuleOptions& rule);

}  // namespace fairgate

#endif  // FAIRGATE_RULE_OPTIONS_H_

// fairgate/snapshot.h: a point-in-time picture of a scheduler's state, for tests, debugging and
// the `/debug` pages of a server.
//
// A snapshot is a copy: it does not change as the scheduler moves on, and costs
// O(types + tiers) to take, plus O(keys) when it lists the heaviest keys. ToJson gives the same
// facts as the metrics (Scheduler::WriteMetrics), for a `/debug` page.
#ifndef FAIRGATE_SNAPSHOT_H_
#define FAIRGATE_SNAPSHOT_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fairgate/export.h"

namespace fairgate {

// A rate limit's bucket (fairgate/rate_limit.h), as it stands when the snapshot is taken.
struct RateSnapshot {
  double per_second = 0, burst = 0;  // its RateLimit
  double tokens = 0;                 // now
  // Since the scheduler started: admissions that took a token; decisions that passed over
  // pending jobs under it for want of one (a type's: its jobs, skipped in that decision; the
  // global one's: decisions that admitted nothing, with jobs pending).
  std::uint64_t taken = 0, refused = 0;
  friend bool operator==(const RateSnapshot&, const RateSnapshot&) = default;
};

// A type's shedding (JobTypeConfig::shedding, fairgate/shedding.h).
struct ShedSnapshot {
  bool standing = false;  // its queue stands now: it refuses its heaviest keys' work
  // Jobs refused by it since the scheduler started: calls at their arrival and pending jobs.
  std::uint64_t shed = 0;
  friend bool operator==(const ShedSnapshot&, const ShedSnapshot&) = default;
};

struct TypeSnapshot {
  std::string name;
  int priority = 0;
  int max_concurrency = 0;
  int running = 0;
  std::int64_t pending = 0;
  bool paused = false;  // Scheduler::PauseType: its pending jobs wait until ResumeType
  // Since the scheduler started (the core alone leaves them 0):
  // `cancelled`: left the queue without running (context done, shutdown); `expired`: left it at
  // the type's max_queue_wait; `joined`: calls that joined a job of their id instead of queueing
  // one (JobTypeConfig::coalesce), not counted in `enqueued`.
  // `borrowed`: admitted over the tier's cap, on slots no admissible job wanted
  // (RuleOptions::lending), counted in `admitted` too.
  std::uint64_t enqueued = 0, admitted = 0, completed = 0, cancelled = 0, expired = 0, joined = 0;
  std::uint64_t borrowed = 0;
  double wait_seconds_sum = 0;                            // over admitted jobs
  double run_seconds_sum = 0;                             // over completed jobs
  std::optional<RateSnapshot> rate_limit = std::nullopt;  // with JobTypeConfig::rate_limit
  std::optional<ShedSnapshot> shedding = std::nullopt;    // with JobTypeConfig::shedding
};

struct KeyCost {
  std::string key;
  double accumulated_cost = 0;
  friend bool operator==(const KeyCost&, const KeyCost&) = default;
};

struct TierSnapshot {
  int priority = 0;          // also the tier's cap, in slots
  int running = 0;           // jobs
  std::int64_t pending = 0;  // its own jobs, wherever aging has placed them
  std::int64_t aged_in = 0;  // pending jobs of lower tiers that aged into this one
  int slots_in_use = 0;      // the slots its running jobs take (JobTypeConfig::slots)
};

// A declared worker (fairgate/worker.h).
struct WorkerSnapshot {
  std::string name;
  int slots = 0;
  int slots_in_use = 0;
  std::vector<std::string> types;  // the registered types it serves, by registration order
};

struct Snapshot {
  int max_concurrency = 0;  // in slots
  // The global cap in force, in slots: max_concurrency, or less while adaptive capacity
  // (RuleOptions::adaptive_capacity) or the latency rule (RuleOptions::latency_capacity) has
  // lowered it. Running jobs may hold more for a while.
  int capacity = 0;
  int running = 0;       // jobs
  int slots_in_use = 0;  // the slots running jobs take; equals `running` without multi-slot types
  std::int64_t pending = 0;
  std::optional<RateSnapshot> rate_limit = std::nullopt;  // with RuleOptions::rate_limit
  std::vector<TierSnapshot> tiers;                        // highest priority first
  std::vector<TypeSnapshot> types;                        // in registration order
  std::size_t keys_tracked = 0;
  std::size_t estimates_tracked = 0;
  // Scheduler::PauseKey: the keys paused now, by name (their pending jobs wait until ResumeKey).
  std::vector<std::string> paused_keys;
  // With keys' rate limits (KeyLimits::rate_limit, of some key or the default): the keys whose
  // bucket has no token now, their jobs passed over until it is due.
  std::optional<std::size_t> keys_held_by_rate = std::nullopt;
  // With workers declared: each, in the order they were added, and the registered types none
  // serves, named by none or only by workers with fewer slots than its jobs take (their jobs wait
  // until a worker that serves them is added).
  std::vector<WorkerSnapshot> workers;
  std::vector<std::string> types_without_worker;
  // Since the scheduler started:
  std::uint64_t rejected = 0, keys_evicted = 0, aging_promotions = 0;
  std::uint64_t waited_on_conflict = 0, waited_on_capacity = 0;
  // When asked for: the keys with the highest accumulated cost, highest first.
  std::vector<KeyCost> heaviest_keys;
};

// The snapshot as one JSON object (pretty-printed with `indent` > 0).
FAIRGATE_EXPORT std::string ToJson(const Snapshot& snapshot, int indent = -1);

}  // namespace fairgate

#endif  // FAIRGATE_SNAPSHOT_H_

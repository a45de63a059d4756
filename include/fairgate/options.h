// fairgate/options.h: the knobs of a scheduler, with the seed-mode and default-mode presets.
//
// `SchedulerOptions::Seed()` reproduces the original admission rule exactly (see DESIGN.md);
// `SchedulerOptions::Default()` (also what a default-constructed value holds) improves on it with
// one documented switch at a time. Options are validated when a scheduler or core is created:
// a bad value is refused with InvalidArgument naming the field, never replaced by a default.
//
// Thread safety: a plain value type.
#ifndef FAIRGATE_OPTIONS_H_
#define FAIRGATE_OPTIONS_H_

#include <chrono>
#include <cstddef>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fairgate/evidence.h"
#include "fairgate/export.h"
#include "fairgate/observer.h"
#include "fairgate/rule_options.h"
#include "fairgate/seconds.h"
#include "fairgate/status.h"
#include "fairgate/store.h"

namespace fairgate {

// The runtime (fairgate::Scheduler): its threads, clock and listeners. The core and the
// simulator ignore these.
struct RuntimeOptions {
  // Threads of the pool that runs Submit jobs as fibers. A job that blocks in a system call holds
  // its whole thread, so the pool needs as many threads as blocking background jobs may run at
  // once. 0: `rule.max_concurrency` threads, so every admitted job can block without stalling
  // another. For jobs that never block their thread (they wait only on fiber-aware primitives),
  // fewer threads, down to the number of cores, cost less in thread switches.
  int worker_threads = 0;

  // Stack of each Submit job's fiber. >= 16 KiB.
  std::size_t fiber_stack_bytes = 256 * 1024;

  // How often the TTL sweeper wakes. > 0.
  Seconds sweep_interval{1.0};

  // The clock that job run times are measured with (the observed costs that estimates learn)
  // and that the core's times come from. Empty: a steady clock. Tests inject their own. It is
  // called from any thread, with the scheduler's lock held or not: it must be cheap,
  // thread-safe, and not call the scheduler. Times that threads read before taking the lock and
  // reach it in the other order are evened out: the times of the decisions never go back.
  std::function<Seconds()> clock;
  // Told of every decision, outside the lock, on a delivery thread (fairgate/observer.h).
  std::vector<std::shared_ptr<Observer>> observers;
  // Given one record per admission, like observers (fairgate/evidence.h). Empty: none.
  EvidenceSink evidence;
  // Events that may wait for slow observers before newer ones are dropped. >= 1.
  std::size_t observer_queue_limit = 65536;
  // Where warnings go, one sentence per call, on the calling thread: RegisterType's when a type
  // is first registered (fairgate/job_type.h, JobTypeWarnings), and RegisterType's, AddWorker's
  // and UpdateWorker's of a worker too narrow for a type it names (fairgate/worker.h,
  // WorkerServes). Empty: written to stderr,
  // one line each, as "fairgate: warning: <sentence>". A function that does nothing silences them.
  std::function<void(std::string_view warning)> warn;
  // The group of a fairness key the scheduler has not seen (docs/ordering.md, "Groups"; "" for
  // none), so that a server says once how its clients make tenants: an IPv4 address's /24, the
  // organisation of an authenticated user. Asked when a job or a charge of a key that is not
  // tracked arrives, and again after key_ttl forgot the key; a key whose group
  // Scheduler::SetKeyGroup named keeps that one. What it answers is kept only while the key is
  // tracked. Called with the scheduler's lock held, on the calling thread: it must be cheap,
  // thread-safe, and not call the scheduler. Empty: no rule. Not with rule.idle_catch_up
  // (InvalidArgument).
  std::function<std::string(std::string_view fairness_key)> key_group;
};

// What survives a restart (fairgate/store.h): durable jobs, learned estimates, keys' accumulated
// costs and periodic schedules.
struct PersistenceOptions {
  // The store they are kept in. Null (the default): nothing is kept, and the durable calls are
  // refused with FailedPrecondition. For one process, a SQLite file:
  // `options.persistence.store = *fairgate::OpenSqliteStore(path)` (fairgate/sqlite_store.h,
  // CMake target fairgate::sqlite); for replicas, OpenPostgresStore (fairgate/postgres_store.h,
  // fairgate::postgres); or an implementation of your own. The scheduler itself links neither.
  std::shared_ptr<Store> store;
  // How often learned estimates, costs and schedules are flushed to the store (also at
  // shutdown), on a thread of their own. Finite and > 0.
  Seconds state_flush_interval{5.0};
};

// Replicas sharing a store (a SharedStore in persistence.store: the PostgreSQL store). Each
// replica runs the durable jobs it claims by lease (fairgate/store.h). Without a shared store
// these are not used, and the two lists must be empty.
struct FleetOptions {
  // How long a claim lasts without renewal: jobs of a replica that died or stalled are claimed
  // by another at most lease_ttl + claim_interval (and a claim's own time) after its last
  // renewal. Renewed every third of it. Finite and > 0.
  Seconds lease_ttl{10.0};
  // How often a replica looks for jobs to claim when nothing woke it (a job stored or finished
  // on this replica wakes it at once), and how often it shares its keys' costs with the fleet,
  // or less often when sharing takes long: the next share starts twenty times the last one's
  // length after it ended if that is later, at most twenty claim_intervals after (a share
  // carrying 10,000 keys took up to 0.19 s). Shares run on a thread of their own: one that
  // takes long, or that the store holds up, delays neither claims nor lease renewals. Finite
  // and > 0.
  Seconds claim_interval{1.0};
  // How many durable jobs a replica holds at most, claimed and not yet finished. 0: as many as
  // it can start soon, from 2 x rule.max_concurrency up to 64 x: twice its slots, plus eight
  // times the jobs that finished during its last claim's round trip (twice as many as before
  // when it ran dry waiting for a claim that took all it asked for), so that short jobs are
  // claimed many at a time (a claim's cost is mostly per claim) and long ones are not hoarded. A
  // claim counts an attempt of each job it takes (fairgate/durable.h). >= 0.
  int max_claimed = 0;
  // Conflict groups (JobTypeConfig::conflict_group) whose limit holds across the fleet: a job of
  // such a group runs only while it holds one of the conflict_limit slots of its resource
  // (group, id) in the shared store, a lease renewed with the others; it waits for one (holding
  // its local slot, not counted in its run time) and gets the lease's fencing token in its
  // context (Context::FencingToken). RunSync and Submit jobs (periodic ones too); an Acquire's
  // permit is delivered once its lease is taken (on a pool fiber, waiting under the Acquire's
  // context) and holds it until released (Permit::FencingToken). A durable job's lease is taken
  // with its claim instead (a job whose resource has no free slot is not claimed) and held from
  // then, also while the job waits in its replica's queue, until the store has its end (removed,
  // retried or dead) or it is given back, or until its claim lapses. Needs a shared store, and
  // names it can hold (SharedStore::CheckName: PostgreSQL's are UTF-8 without a NUL byte).
  std::vector<std::string> conflict_groups;
  // Job types whose jobs run at most N at once in the whole fleet (type -> N): a job holds one
  // of the N slots as a lease while it runs, taken like a fleet-wide conflict's (and before it,
  // never held while waiting for it). A durable job takes its slot with its claim, and a replica
  // claims no more jobs of such a type than it can run at once (its max_concurrency within the
  // global cap), so that claimed jobs waiting on one replica never hold slots another could run
  // with. On top of each replica's own caps. Needs a shared store that can hold the types'
  // names (as conflict_groups'); each N >= 1.
  std::map<std::string, int> type_caps;
  // With a shared store, the global rate limit (RuleOptions::rate_limit), every type's
  // (JobTypeConfig::rate_limit) and every key's (KeyLimits::rate_limit, a bucket per key) are
  // the fleet's: one bucket in the store for all replicas
  // (SharedStore::TakeTokens), from which a replica takes a lease of tokens when its own run out
  // while jobs wait: what the rate gives in this time, at least one token and at most the burst.
  // The fleet starts at most burst + per_second x w jobs under a bucket in any w seconds, plus
  // one lease per replica (tokens a replica took and has not used yet; a replica that dies
  // takes its unused lease with it, as a key forgotten after key_ttl does). A replica's first job
  // of a key waits for the key's first lease. A call that will not wait for a token
  // (JobOptions::refuse_without_token) is refused when the fleet's bucket has none: at once when
  // the store's last lease said the next is due later; while a lease is on its way (none yet, or
  // that time has come), when that lease brings none. A lease the store fails to give brings
  // none, the next due claim_interval later: such a call is refused (ResourceExhausted with a
  // retry-after) rather than held through an outage. Finite and > 0.
  Seconds token_lease{0.1};
};

// A scheduler's options, by concern. Reads naturally with designated initialisers:
//
//   auto scheduler = fairgate::Scheduler::Create({
//       .rule = {.max_concurrency = 16, .max_pending_per_key = 1000},
//       .persistence = {.store = store},
//   });
//
// or field by field: `options.rule.max_concurrency = 16;`.
struct FAIRGATE_EXPORT SchedulerOptions {
  RuleOptions rule;
  RuntimeOptions runtime;
  PersistenceOptions persistence;
  FleetOptions fleet;

  // The original rule, exactly: no reconciliation, no idle catch-up, TTL eviction on.
  static SchedulerOptions Seed();
  // The improved rule (the values above).
  static SchedulerOptions Default();
};

// Returns OK when every field is in range, else InvalidArgument naming the first bad field by its
// path ("rule.max_concurrency must be >= 1, got 0").
FAIRGATE_EXPORT Status ValidateOptions(const SchedulerOptions& options);

}  // namespace fairgate

#endif  // FAIRGATE_OPTIONS_H_

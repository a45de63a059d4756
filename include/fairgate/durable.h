// fairgate/durable.h: background work that survives a crash (Scheduler::SubmitDurable).
//
// A Submit job is a closure and dies with its process. A durable job is data instead: a type, an
// id, a fairness key and payload bytes (together at most the store's max_job_bytes: up to about
// 1 GB in a SQLite file, 500 MB on PostgreSQL), stored (fairgate/store.h) before SubmitDurable
// returns (SubmitDurableBatch: many in one commit), and run by the handler registered for its type
// (Scheduler::RegisterDurable). It is queued and
// admitted exactly as a Submit of (type, id) under its fairness key is, in the same order and
// under the same caps, conflicts and coalescing.
//
// Delivery is at least once: an attempt is marked in the store before the handler runs and the
// job is removed only after it returned OK. A handler should therefore be idempotent.
// RetryPolicy::max_attempts bounds the attempts begun, whatever ended them:
// - OK: the job is done and removed.
// - Any other status: the attempt failed. While attempts are left, the job waits its backoff and
//   is queued again (as a new arrival); otherwise it is dead: kept in the store with its last
//   error, listed by Scheduler::DeadJobs, never run again.
// - Cut short (the process crashed or was killed, or a shutdown cancelled the handler): the
//   attempt counts. After the restart (Recover; with a shared store, the replica that claims the
//   job) it runs again with the next attempt number while attempts are left; a job whose last
//   allowed attempt was cut short is dead instead, with an error saying that attempt was
//   interrupted. So a payload that kills its process runs at most max_attempts times.
// - A job still pending when the scheduler shuts down is left stored as it is, and runs after the
//   next Recover.
//
// What is on the store's disk before what: a job is committed before SubmitDurable returns; an
// attempt's mark is committed before its handler runs (so a crash during it counts it: the marks
// of jobs that begin at once share one commit, made off the workers while each job waits for its
// own); the job's removal (or retry, or death) is written after its handler returned. With a shared
// store the mark is the claim's: the claim that hands a replica its jobs counts one attempt of each
// in its own commit, so a job claimed and not yet begun when its replica dies has that attempt
// counted (given back when a live replica gives the job back unrun). A removal is queued and
// written with the others that gathered meanwhile in one commit, off the worker that ran the job,
// whose slot is free at once; a removal lost in a crash or an outage only runs the job again,
// which at-least-once allows, and one that failed is written again until the store takes it.
// So a process killed after a handler returned OK and before its batch committed leaves the job
// stored, with the attempt that succeeded counted: it runs again after the restart (with a
// shared store, on the replica that claims it once the dead one's lease lapses), with the next
// attempt number. A removal that committed is never undone: that job does not run again. The
// claims are commits of their own, so a crash between a batch of removals and the next claim
// loses neither: jobs claimed and not yet run lapse to another replica as above.
// Writes made at once by concurrent callers share one commit (the SQLite store groups them all;
// the PostgreSQL store groups the jobs stored at once through one store into one statement, and
// commits its other writes on a pool of connections, whose WAL flushes the server groups), a
// batch is one commit, and none is acknowledged before its commit.
//
// Recovery happens at one defined point: Scheduler::Recover, called once after the types and
// their handlers are registered. It queues every stored job that is neither done nor dead, in
// sequence order (the order SubmitDurable stored them in), before any durable job of this
// process: their relative order is the stored one. SubmitDurable is refused until then. Without
// replicas, one scheduler at a time works a store's jobs, from its Recover until it is destroyed:
// two would each run every job. Another's Recover is refused meanwhile (the SQLite store: by an
// exclusive lock on a file beside its own, which a crashed process leaves free).
//
// With a shared store (a SharedStore: the PostgreSQL store, several replicas) jobs are claimed by
// lease instead (fairgate/store.h): each replica claims, in fairgate's order over the fleet,
// what it can start soon (FleetOptions::max_claimed), renews its leases every lease_ttl / 3, and
// gives back what it will not run (a full queue, a shutdown). A retry is given back with its
// backoff, for any replica. A replica that dies or stalls loses its jobs to the others about
// lease_ttl + claim_interval after its last renewal; if it comes back, whatever it then records
// of those jobs is refused (fairgate_durable_jobs_total{outcome="fenced"}), and a handler that
// writes elsewhere should check DurableJob::lease_token (or Context::FencingToken, for a
// fleet-wide conflict group) so that the stale writer loses. Delivery stays at least once: the
// handler of a job whose holder stalled may run twice, once on each replica. An attempt whose
// handler returns when its replica is no longer sure it holds the job (SharedStore::SurelyHolds:
// its last renewal's lease has run out) is charged to its key what was estimated at its
// admission, not its run time, and its estimate learns nothing from it: the stall is nobody's
// cost, and the replica that ran the job meanwhile charged it.
//
// Thread safety: plain value types; a handler is called on a worker fiber of the scheduler, like
// a Submit job, and may run for several jobs at once.
#ifndef FAIRGATE_DURABLE_H_
#define FAIRGATE_DURABLE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>

#include "fairgate/context.h"
#include "fairgate/export.h"
#include "fairgate/job_name.h"
#include "fairgate/options.h"
#include "fairgate/status.h"

namespace fairgate {

// What a handler is given: views valid for the duration of the call.
struct DurableJob {
  std::uint64_t sequence = 0;  // the store's number for the job
  std::string_view type, id, fairness_key, payload;
  // 1 for the first attempt; counts every attempt begun, also those cut short (at most
  // RetryPolicy::max_attempts).
  std::uint32_t attempt = 1;
  // With a shared store (several replicas): the fencing token of this replica's lease on the job,
  // greater than any token of an earlier claim of it. A handler that writes to storage which can
  // check it should reject writes with a token lower than one it has seen (the lease had passed
  // and another replica runs the job now). 0 with a store that is not shared.
  std::uint64_t lease_token = 0;
};

using DurableHandler = std::function<Status(const DurableJob& job, const Context& ctx)>;

// One job of Scheduler::SubmitDurableBatch: what SubmitDurable takes, as one value. Views: the
// batch copies them before it returns.
struct DurableSubmission {
  JobName name;
  std::string_view payload;
};

// How a failed durable job is retried: attempt n + 1 waits
// min(initial_backoff * multiplier^(n - 1), max_backoff) after attempt n failed.
struct RetryPolicy {
  std::uint32_t max_attempts = 5;  // >= 1; 1: no retry
  Seconds initial_backoff{1.0};    // finite, >= 0
  Seconds max_backoff{300.0};      // finite, >= initial_backoff
  double multiplier = 2.0;         // finite, >= 1
  friend bool operator==(const RetryPolicy&, const RetryPolicy&) = default;
};

// OK, or InvalidArgument naming the first field out of range.
FAIRGATE_EXPORT Status ValidateRetryPolicy(const RetryPolicy& policy);
// The wait before attempt `failed_attempts + 1`, after `failed_attempts` (>= 1) have failed.
FAIRGATE_EXPORT Seconds RetryBackoff(const RetryPolicy& policy, std::uint32_t failed_attempts);

// What Recover found.
struct RecoveryReport {
  std::size_t queued = 0;  // queued now, in stored order
  // Waiting out a retry's backoff (or refused by a full queue: tried again a second later),
  // queued when it ends.
  std::size_t deferred = 0;
  // Stored jobs of types without a handler: left stored, not run (a later process with the
  // handler recovers them).
  std::size_t without_handler = 0;
  // Dead jobs in the store (Scheduler::DeadJobs), with those Recover found with every attempt
  // begun and the last cut short (made dead just now; see above).
  std::size_t dead = 0;
};

}  // namespace fairgate

#endif  // FAIRGATE_DURABLE_H_

// fairgate/store.h: what a scheduler keeps across restarts, and the interface it keeps it through.
//
// A scheduler with a store (PersistenceOptions::store: the SQLite store of fairgate/sqlite_store.h,
// the PostgreSQL store of fairgate/postgres_store.h, or another) persists four things:
// - durable jobs (Scheduler::SubmitDurable): stored before SubmitDurable returns, marked at the
//   start of each attempt, removed when a run succeeds, rescheduled for a retry or moved to the
//   dead jobs when it fails (fairgate/durable.h);
// - learned estimates of (type, id), and
// - fairness keys' accumulated costs, flushed every PersistenceOptions::state_flush_interval and at
//   shutdown, and loaded by Scheduler::Create, so that a restart charges what was learned before;
// - the last end of each periodic job's run (fairgate/periodic.h), so that the runs after a
//   restart keep their schedule instead of all coming due together.
//
// Times in the store are wall-clock seconds since the Unix epoch, so that they mean the same to
// the next process; the scheduler converts them to and from its own clock.
//
// The contract of an implementation:
// - Every method may be called from any thread, concurrently; the implementation serialises
//   what it must. It is never called under the scheduler's lock, so it may block (on disk, on a
//   network), and a slow store slows only the calls that wait for it: SubmitDurable, the start
//   and end of a durable job's attempt, and the flusher's thread.
// - A failure is a status, never an exception or a crash; the scheduler counts it
//   (fairgate_store_errors_total) and keeps working in memory. A write that failed changed
//   nothing (each method is one transaction), unless the store says it could not learn whether
//   it committed (the PostgreSQL store: a connection broken during the commit and the server
//   unreachable after, Unavailable; fairgate/postgres_store.h).
// - AddJob and AddJobs return once the jobs are as durable as the store promises (the SQLite
//   store: in its file, with the fsync policy of SqliteStoreOptions::synchronous), with sequence
//   numbers greater than every one the store returned before, also across restarts.
//
// A shared store (a SharedStore: the PostgreSQL store) is one replica's handle on a database that
// several replicas use at once. Durable jobs are then handed out by lease: a replica runs only the
// jobs it claimed (ClaimJobs), keeps its leases alive (RenewLeases), and each claim carries a
// fencing token (StoredJob::lease_token) that is greater than every token given out before it. A
// job whose lease lapsed may be claimed by another replica with a new token; from then on the old
// holder's BeginAttempt, RemoveJob, DeferJob, KillJob and ReleaseJob of it are refused with
// Aborted and change nothing. A job nobody holds may be changed by any replica.
//
// Thread safety: as above.
#ifndef FAIRGATE_STORE_H_
#define FAIRGATE_STORE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "fairgate/export.h"
#include "fairgate/learned_state.h"
#include "fairgate/rate_limit.h"
#include "fairgate/status.h"

namespace fairgate {

// The most of a failed attempt's status a stored job keeps (StoredJob::last_error), so that an
// error that quotes a large input cannot outgrow what its store holds in a row.
inline constexpr std::size_t kMaxLastErrorBytes = 65'536;

// A durable job as stored.
struct StoredJob {
  std::uint64_t sequence = 0;  // given by the store: the job's place in arrival order
  std::string type, id, fairness_key;
  std::string payload;      // bytes, opaque to fairgate
  double submitted_at = 0;  // Unix seconds, when SubmitDurable stored it
  // Attempts begun so far (marked before each one runs: an attempt cut short by a crash counts,
  // and one that reached the type's max_attempts that way is dead at the next Recover or claim).
  std::uint32_t attempts = 0;
  double not_before = 0;  // Unix seconds: the next attempt waits until then (a retry's backoff)
  // The status of the last failed attempt, as text: its first kMaxLastErrorBytes bytes (cut at
  // a character), then " [N bytes more]" where it was longer.
  std::string last_error;
  // A shared store's fencing token of this replica's claim (ClaimJobs); 0 when not claimed, and
  // always 0 in a store that is not shared.
  std::uint64_t lease_token = 0;
  // The fencing token of the last fleet-wide lease taken with the claim (ClaimableType: its
  // resource's, else its cap slot's); 0 when the claim took none.
  std::uint64_t resource_token = 0;
  friend bool operator==(const StoredJob&, const StoredJob&) = default;
};

// When the last run of the periodic job (type, id) ended (Unix seconds).
struct SavedSchedule {
  std::string type, id;
  double last_run_end = 0;
  friend bool operator==(const SavedSchedule&, const SavedSchedule&) = default;
};

// The resource group under which fleet-wide caps' slots are leased, one resource per capped type
// (FleetOptions::type_caps).
inline constexpr std::string_view kFleetCapGroup = "fairgate.type_cap";

// A job type a replica claims jobs of, its tier (JobTypeConfig::priority: higher first), and the
// fleet-wide leases each of its jobs takes in the claim's own transaction: one of the fleet_cap
// slots of resource (kFleetCapGroup, type) when fleet_cap > 0, then one of the conflict_limit
// slots of resource (conflict_group, the job's id) when conflict_group is not empty. A job whose
// leases cannot all be taken is not claimed, and does not keep a claim from the claimable jobs
// after it, however many such jobs come first.
struct ClaimableType {
  std::string type;
  int priority = 1;
  std::string conflict_group;
  int conflict_limit = 1;
  int fleet_cap = 0;
  // At most this many of its jobs in one claim (0: no bound but the claim's). A replica bounds a
  // type with a fleet-wide cap by what it can run at once, less what it holds of it, so that its
  // claimed jobs hold no more of the cap's slots than it can run.
  std::size_t max_jobs = 0;
};

// What the scheduler has learned: a flush writes what changed since the previous one (rows with
// the same names are replaced), a load returns everything.
struct LearnedState {
  std::vector<SavedEstimate> estimates;
  std::vector<SavedKey> keys;
  std::vector<SavedSchedule> schedules;
  bool empty() const { return estimates.empty() && keys.empty() && schedules.empty(); }
};

class SharedStore;

// Tokens taken from a fleet-wide rate limit's bucket (SharedStore::TakeTokens): how many, and,
// when the bucket was left with less than one, the seconds until it next holds one (else 0).
struct TokenLease {
  int taken = 0;
  double next_in = 0;
};

// What every store does.
class FAIRGATE_EXPORT Store {
 public:
  virtual ~Store() = default;

  // The store's shared side when several replicas share it (a SharedStore), else null.
  virtual SharedStore* AsShared() { return nullptr; }

  // Stores a new durable job (its `sequence` is ignored) and returns its sequence number.
  virtual StatusOr<std::uint64_t> AddJob(const StoredJob& job) = 0;
  // Stores new durable jobs in one transaction, all of them or none, and returns their sequence
  // numbers in the order given (ascending: the jobs keep their order in the batch). An empty
  // batch stores nothing and returns none. A shared store whose reply was lost may return 0 for
  // a job another replica already ran and removed (fairgate/postgres_store.h).
  virtual StatusOr<std::vector<std::uint64_t>> AddJobs(const std::vector<StoredJob>& jobs) = 0;
  // Counts one more attempt of the job as begun; returns the count. NotFound if it is not stored.
  virtual StatusOr<std::uint32_t> BeginAttempt(std::uint64_t sequence) = 0;
  // Counts one more attempt of each job, each as BeginAttempt would, in one transaction where the
  // store can (the SQLite store; this default calls BeginAttempt for each in turn): each one's
  // count or status in the order given, or the store's status when the transaction failed and
  // none was counted. The scheduler marks the attempts of a store that replicas do not share
  // with it, many jobs at once.
  virtual StatusOr<std::vector<StatusOr<std::uint32_t>>> BeginAttempts(
      const std::vector<std::uint64_t>& sequences) {
    std::vector<StatusOr<std::uint32_t>> begun;
    begun.reserve(sequences.size());
    for (std::uint64_t sequence : sequences) begun.push_back(BeginAttempt(sequence));
    return begun;
  }
  // The job succeeded (or was refused before it could run): it is removed.
  virtual Status RemoveJob(std::uint64_t sequence) = 0;
  // Removes jobs that succeeded, each as RemoveJob would, in one transaction where the store can
  // (the SQLite and PostgreSQL stores; this default calls RemoveJob for each in turn): each
  // one's status in the order given, or the store's status when the transaction failed and
  // none was removed.
  virtual StatusOr<std::vector<Status>> RemoveJobs(const std::vector<std::uint64_t>& sequences) {
    std::vector<Status> removed;
    removed.reserve(sequences.size());
    for (std::uint64_t sequence : sequences) removed.push_back(RemoveJob(sequence));
    return removed;
  }
  // BeginAttempts and RemoveJobs, queued with the store's other writes: each returns at once and
  // tells `done` what the call it stands for would have returned, once the commit that holds its
  // write is done. A store whose QueuesWrites is true (the SQLite store) writes them with the
  // next of its group commits and calls `done` on the thread that led that commit (a caller of
  // another of its writes, or a thread of the store's own), so `done` must be quick, must not
  // block and must not call the store; it calls every `done` it was given before its destructor
  // returns. The scheduler then hands it each job's mark and removal as they come and keeps no
  // thread of its own to wait for them. These defaults call BeginAttempts and RemoveJobs, and
  // then `done`, on the caller's thread.
  using AttemptsBegun = std::function<void(StatusOr<std::vector<StatusOr<std::uint32_t>>>)>;
  using JobsRemoved = std::function<void(StatusOr<std::vector<Status>>)>;
  virtual bool QueuesWrites() const { return false; }
  virtual void BeginAttemptsQueued(std::vector<std::uint64_t> sequences, AttemptsBegun done) {
    done(BeginAttempts(sequences));
  }
  virtual void RemoveJobsQueued(std::vector<std::uint64_t> sequences, JobsRemoved done) {
    done(RemoveJobs(sequences));
  }
  // An attempt failed with `error`; the next waits until `not_before`.
  virtual Status DeferJob(std::uint64_t sequence, double not_before, std::string_view error) = 0;
  // An attempt failed with `error` and no attempt is left: the job moves to the dead jobs.
  virtual Status KillJob(std::uint64_t sequence, std::string_view error) = 0;
  // The stored jobs that are neither done nor dead, in sequence order.
  virtual StatusOr<std::vector<StoredJob>> LiveJobs() = 0;
  // The dead jobs, in sequence order.
  virtual StatusOr<std::vector<StoredJob>> DeadJobs() = 0;
  // A page of them: at most `limit` (above 0) dead jobs whose sequence numbers are above `after`,
  // in sequence order (the next page starts after the last one's number; a short page means that
  // none is numbered above it yet). This default reads them all (DeadJobs) and keeps the page;
  // both stores read the page only, from an index of the dead jobs.
  virtual StatusOr<std::vector<StoredJob>> DeadJobsAfter(std::uint64_t after, std::size_t limit) {
    StatusOr<std::vector<StoredJob>> dead = DeadJobs();
    if (!dead.ok()) return dead.status();
    std::vector<StoredJob> page;
    for (StoredJob& job : *dead) {
      if (page.size() == limit) break;
      if (job.sequence > after) page.push_back(std::move(job));
    }
    return page;
  }
  // How many dead jobs there are (Scheduler::Recover reports it), without reading them. This
  // default reads them (DeadJobs); both stores count them in their index.
  virtual StatusOr<std::size_t> CountDeadJobs() {
    StatusOr<std::vector<StoredJob>> dead = DeadJobs();
    if (!dead.ok()) return dead.status();
    return dead->size();
  }
  // The dead job lives again: its attempts counted from 0, due at once, its last error kept (a
  // shared store's replicas waiting for jobs are told). Returns it as it is stored now. NotFound
  // when no dead job has that sequence number (a live one included). This default:
  // Unimplemented (a store written before it; Scheduler::RetryDeadJob then says so).
  virtual StatusOr<StoredJob> ReviveJob(std::uint64_t /*sequence*/) {
    return absl::UnimplementedError("this store cannot revive a dead job (Store::ReviveJob)");
  }
  // Deletes the dead job. NotFound when no dead job has that sequence number (a live one
  // included). This default: Unimplemented, as ReviveJob's.
  virtual Status RemoveDeadJob(std::uint64_t /*sequence*/) {
    return absl::UnimplementedError("this store cannot remove a dead job (Store::RemoveDeadJob)");
  }

  // Makes the calling scheduler the only one that works the stored jobs, until EndExclusiveUse:
  // two schedulers on one store (in one process or two, through one handle or two) would each
  // recover and run every job. Scheduler::Recover begins it, when replicas do not share the
  // store (a SharedStore's replicas share its jobs by lease instead), and the scheduler's
  // destructor ends it. FailedPrecondition, naming the holder, while another scheduler holds
  // it. These defaults hold nothing: a store no other scheduler can reach needs no guard. The
  // SQLite store holds an exclusive lock on a file beside its own (fairgate/sqlite_store.h).
  virtual Status BeginExclusiveUse() { return absl::OkStatus(); }
  virtual void EndExclusiveUse() {}

  // Writes what changed since the previous flush (replacing rows of the same names), and removes
  // estimates last used before `forget_estimates_before` and keys idle since before
  // `forget_keys_before` (their TTLs have passed).
  virtual Status SaveLearned(const LearnedState& changed, double forget_estimates_before,
                             double forget_keys_before) = 0;
  virtual StatusOr<LearnedState> LoadLearned() = 0;
};

// What a store that several replicas share adds: durable jobs claimed by lease, fleet-wide
// leases of resources, and keys' (and groups') costs summed over the fleet.
class FAIRGATE_EXPORT SharedStore : public Store {
 public:
  SharedStore* AsShared() final { return this; }

  // Claims, for `lease_seconds`, up to `max_jobs` live jobs of `types` whose backoff is over and
  // that no unexpired lease holds, and counts one more attempt of each in the same transaction:
  // the attempt this replica will begin. Each comes with `attempts` as it was before the claim;
  // BeginAttempt of a claimed job confirms the attempt counted (without a write while the lease
  // is surely held), and ReleaseJob or KillJob of one never begun gives it back. A replica that
  // dies holding claimed jobs it had not begun leaves that attempt counted. Jobs whose lease lapsed
  // (their holder died or stalled: they had been admitted already) come first, then the rest in
  // fairgate's order: the higher tier first, then the key with the lower accumulated cost (as
  // flushed, SaveLearned), then the lower sequence; in that order among the jobs whose leases can
  // be taken now (ClaimableType). Each comes with its new lease_token. Jobs other replicas are
  // claiming at the same moment are skipped, not waited for. The leases its type takes
  // (ClaimableType) are taken with the claim, with resource_token; they are the claim's: renewed
  // with it, given back when this replica removes, defers, kills or releases the job, and lapsed
  // with it.
  virtual StatusOr<std::vector<StoredJob>> ClaimJobs(const std::vector<ClaimableType>& types,
                                                     std::size_t max_jobs,
                                                     double lease_seconds) = 0;
  // Waits up to `timeout_seconds` for a job to be stored or given back by any replica: OK when
  // one was, or may have been unnoticed (the store has just begun to listen: a claim may find
  // one now), DeadlineExceeded when none was, Unavailable when the store
  // cannot listen now (try again later). A store that cannot tell returns Unimplemented at once,
  // and its replicas claim every claim_interval only. Called from one thread at a time.
  virtual Status WaitForJobs(double timeout_seconds) {
    (void)timeout_seconds;
    return absl::UnimplementedError("this store does not notify stored jobs");
  }
  // Extends every lease this replica still holds (of jobs and of resources) to `lease_seconds`
  // from now; how many it extended. A store may pass over a job that another call of this
  // replica is changing at that moment (removing it, say), rather than wait for that call and
  // risk a deadlock with it: the next renewal extends its lease if the job is still held.
  virtual StatusOr<std::size_t> RenewLeases(double lease_seconds) = 0;
  // Gives a claimed job back unrun: any replica may claim it at once.
  virtual Status ReleaseJob(std::uint64_t sequence) = 0;
  // Whether this replica surely still holds the job it claimed as `sequence`, by its own clock:
  // the lease its claim or last renewal got has not run out (once it has, the job may be another
  // replica's). The scheduler asks when an attempt's handler returns: an attempt that ended when
  // the job was not surely its own says nothing of the job's cost, and is charged only what was
  // estimated at its admission. A store that cannot tell says true.
  virtual bool SurelyHolds(std::uint64_t sequence) {
    (void)sequence;
    return true;
  }
  // Whether the store can hold `name` (a fleet-wide lease's group or id, a type's or a key's
  // name) in its tables: OK, or InvalidArgument naming `what` and the store's rule. The
  // scheduler asks at Create of the names in its FleetOptions (conflict_groups, type_caps'
  // types), which every job of theirs would otherwise fail on. A store that holds any bytes
  // says OK.
  virtual Status CheckName(std::string_view name, std::string_view what) const {
    (void)name;
    (void)what;
    return absl::OkStatus();
  }
  // Fleet-wide conflicts: takes, for `lease_seconds`, one of the `limit` slots of the resource
  // (group, id) that no unexpired lease holds, and returns its fencing token (greater than every
  // token given out before); 0 when every slot is held. InvalidArgument for a group or id the
  // store cannot hold (the job fails; another try would too).
  virtual StatusOr<std::uint64_t> AcquireResource(std::string_view group, std::string_view id,
                                                  int limit, double lease_seconds) = 0;
  // Gives back the slot taken with `token` (nothing if its lease passed and another took it).
  virtual Status ReleaseResource(std::string_view group, std::string_view id,
                                 std::uint64_t token) = 0;
  // Keys' costs summed over the fleet, in one transaction: adds each of `charged`'s
  // accumulated_cost (what this replica charged the key since it last shared it; may be
  // negative, the total stays >= 0) to the key's shared cost, moves its idle_since forward to
  // the given one, then returns the shared costs of `keys` (those the store has).
  virtual StatusOr<std::vector<SavedKey>> ShareKeyCosts(const std::vector<SavedKey>& charged,
                                                        const std::vector<std::string>& keys) = 0;
  // The same for groups of keys (docs/ordering.md, "Groups"), each SavedKey's `key` a group's
  // name, kept apart from keys' (a group and a key may share a name); the fleet forgets a group
  // as it forgets a key (SaveLearned's forget_keys_before). A store that does not share them
  // returns Unimplemented, and each replica's groups then count only what it charged.
  virtual StatusOr<std::vector<SavedKey>> ShareGroupCosts(const std::vector<SavedKey>& charged,
                                                          const std::vector<std::string>& groups) {
    (void)charged;
    (void)groups;
    return absl::UnimplementedError("this store does not share groups' costs");
  }
  // Fleet-wide rate limits (fairgate/rate_limit.h): the bucket `bucket` that every replica
  // shares, under `limit` (limited; a replica that gives another limit takes under its own).
  // Its tokens at the store's time t are min(burst, left + (t - at) * per_second), as a
  // replica's own bucket's, full when first taken from. Takes its whole tokens, at most `want`
  // (>= 1), in one statement, and says how many, and when it holds less than a token after,
  // in how many seconds it next holds one. Names: "global", "type:" + a type's name, "key:" + a
  // fairness key's, or "type-hex:" / "key-hex:" + the name's bytes in hex when it is not all
  // printable ASCII. A store may forget a full bucket (it is as good as none).
  virtual StatusOr<TokenLease> TakeTokens(std::string_view bucket, const RateLimit& limit,
                                          int want) = 0;
};

}  // namespace fairgate

#endif  // FAIRGATE_STORE_H_

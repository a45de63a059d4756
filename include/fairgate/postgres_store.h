// fairgate/postgres_store.h: the store (fairgate/store.h) in a PostgreSQL database, for several
// processes (replicas) that share what they learned and their durable jobs.
//
// The schema (tables prefixed `fairgate_`) is created on first use and checked on every open:
// a database whose schema is newer than this fairgate's is refused with FailedPrecondition. A pool
// of connections (PostgresStoreOptions::connections), one per call in progress; a call that finds
// its connection broken (the server restarted, the connection was terminated) reconnects once
// and tries again, so a store outlives a database restart; while the server is unreachable calls
// fail with Unavailable and the scheduler goes on in memory. Errors are statuses naming the
// operation: Unavailable for a connection that cannot be made, ResourceExhausted for a full disk,
// FailedPrecondition for a read-only database or a missing privilege, Internal for anything else.
//
// A connection may break after the server committed a write and before its reply arrived. The
// store then learns on the new connection what the write did, rather than doing it twice or
// reporting what its second try finds: a job or batch stored is looked up by the numbers its
// store marked it with (column stored_by) before it is stored again, and found, the call returns
// its sequence numbers (0 for a job of a batch that a replica claimed, ran and removed meanwhile,
// whose number is gone; a job alone that went so is not found, and is stored again: it runs
// again, as at least once allows); a claim adopts the jobs it claimed (this replica's, with
// tokens above any it was given before); a transaction of several statements (a claim whose
// types take fleet-wide leases, sharing keys' and groups' costs, a flush) is looked up by its
// transaction id (pg_xact_status), and not run again if it committed; an AcquireResource slot is
// looked up by the number its take marked it with (column taken_by); a job's end (removed,
// deferred, killed, given back) whose second try changes nothing is done if the job is still
// surely this replica's, as nobody else can have changed it; and beginning an attempt on the
// server, reviving and removing a dead job run in a transaction that is looked up so. A write
// whose outcome cannot be learned (the server unreachable after the break, or its transaction
// still in progress 5 s later) fails with Unavailable saying so. A rate limit's tokens are taken
// again regardless: they may be taken twice, and the fleet then starts fewer jobs, never more.
//
// The store is shared (SharedStore): each store object is one replica, named by
// PostgresStoreOptions::replica, and durable jobs are claimed by lease (fairgate/store.h). A claim
// is one transaction that picks jobs with `FOR UPDATE SKIP LOCKED`, so replicas claiming together
// never get the same job; fencing tokens come from one database sequence. Claims whose types take
// no fleet-wide leases never wait on each other. Claims whose types take them (a fleet-wide cap
// or conflict group, or a bound on a type's jobs in a claim) run one at a time over the database,
// each after the last one's commit: they read the same first jobs of the fair order, and side by
// side each read past the other's (two replicas claimed fewer jobs a second than one,
// bench/HISTORY.md); a replica stopped in its claim holds the others back for about a second (the
// idle timeout below). Lease times are the database server's clock, so replicas' clocks need not
// agree for leases; a retry's backoff (DeferJob's not_before) is the replica's wall clock.
//
// Keys' costs are summed over the fleet (ShareKeyCosts: each replica adds what it charged since
// its last share, every claim_interval or less often for a share that takes over a twentieth of
// it, and reads the totals of its busy keys), and groups'
// the same way in a table of their own (ShareGroupCosts, fairgate_groups), and fleet-wide
// conflict groups hold one lease row per slot of a resource (AcquireResource), with fencing
// tokens from the same sequence as the jobs'.
//
// Fleet-wide caps (FleetOptions::type_caps) are leases of the same kind, one resource
// per capped type.
//
// A claim takes jobs in fairgate's order over every stored job. The database keeps each key's
// first ready job with the key's cost (the table fairgate_key_heads, kept by triggers in the
// statements that store, claim and finish jobs and that change keys' costs, under a lock per key
// that those statements take for their transaction), so that a claim reads the first keys in
// claim order from one index and only as many of their jobs as its size needs: its cost grows
// with the claim's size (and the retries due at once), not with the keys or the jobs stored. A
// claim whose types take fleet-wide leases reads the keys in the same order, each from its first
// job whose leases have a free slot, and passes over the keys whose every job waits for a lease:
// its cost grows with those too. Storing a job costs the trigger's upsert of its key's head
// (bench/README.md has the figures). Every text column (types, ids, keys, replicas' names) is
// compared bytewise (COLLATE "C") whatever the database's collation, so that a linguistic one
// (ICU's, or glibc's en_US) neither slows the claims nor ties fairgate's indexes to the system's
// collation library. The tables that every job, claim or cost share changes are vacuumed by
// autovacuum once 1,000 of their rows are dead, whatever their size, without its cost delay
// (their storage parameters): each job leaves dead rows that every claim reads past until a
// vacuum. Schema 13; a database of an earlier schema is migrated on open.
//
// Storing jobs wakes the replicas that wait for jobs (a replica waits once a claim of its came
// back short, until one comes back whole): while one waits, the storing transaction notifies
// every replica's listener (LISTEN/NOTIFY), so that a waiting replica claims the jobs at once
// instead of at its next claim_interval; while none waits, it does not. PostgreSQL commits
// notifying transactions one at a time over the whole server, so this is what lets stores made at
// once share their commits' fsyncs when the replicas are busy. A replica that begins to wait says
// so in the table fairgate_waiting, waits for the stores already under way to commit (each holds
// an advisory lock, shared, from before it looked at that table), then claims: their jobs are in
// that claim, and any later store sees the replica waiting and notifies. A replica that stops
// (its store destroyed) deletes its row; one that dies leaves it, and stores pass over a row not
// written for a minute (a waiting replica writes its row again every 5 s). A job just stored
// wakes a replica that was busy until a moment before at its listener's next look (every 0.2 s),
// or its next claim. Giving a job back, or a lease (with a job removed, deferred or killed, or a
// resource released), notifies the same way: while a replica waits, which may then claim what
// the lease held back.
//
// AddJob calls (SubmitDurable) made at once through one store wait for the one in flight, and
// then go in together, as one statement and commit (a group whose statement fails is stored job
// by job, so a job the server refuses fails its own call only); where stores come fast,
// SubmitDurableBatch stores many jobs in one transaction. A batch is one statement, which carries
// its payloads as hex text: one whose jobs take more than 1,000,000,000 bytes so (about twice
// their payloads) is refused with InvalidArgument, nothing of it stored; store it in smaller
// batches. (A group of AddJob calls that would take more is stored job by job.)
//
// Names are PostgreSQL text, which holds UTF-8 without a NUL byte. A durable job whose type, id
// or fairness key is not that is refused (InvalidArgument, naming which). A key, group, type or
// id that is not, met in what a replica learned or charged, stays in that replica: its cost is
// not shared with the fleet and it is not saved (its estimate or schedule neither), and the
// others' are, as passing it to the database would fail every share or flush it was in. A type
// that is not has no stored jobs, and a claim passes over it; the scheduler names a fleet rate
// limit's bucket by such a key or type in hex (SharedStore::TakeTokens), and refuses at Create a
// fleet-wide conflict group or capped type named so (SharedStore::CheckName). An attempt's error
// (StoredJob::last_error), which quotes whatever a handler's status said, is kept with each byte
// that is not part of a UTF-8 character, and each NUL, replaced by U+FFFD.
//
// Each connection sets idle_in_transaction_session_timeout to 1 s: a replica stopped in the
// middle of one of its (millisecond) transactions would otherwise hold that transaction's row
// locks, and the resource leases a claim was taking, for as long as it stays stopped. It also
// sets jit off: the server's JIT compiled some of these millisecond statements on every
// execution, for longer than they run.
//
// Thread safety: every method may be called from any thread at once.
#ifndef FAIRGATE_POSTGRES_STORE_H_
#define FAIRGATE_POSTGRES_STORE_H_

#include <cstddef>
#include <memory>
#include <string>

#include "fairgate/export.h"
#include "fairgate/status.h"
#include "fairgate/store.h"

namespace fairgate {

// The most PostgresStoreOptions::max_job_bytes may be, and its default: PostgreSQL holds at most
// 1 GiB in a field and in a row it sends, and a claim reads a job's payload back as hex text,
// twice its size.
inline constexpr std::size_t kPostgresMaxJobBytes = 500'000'000;

struct PostgresStoreOptions {
  // This replica's name in the leases it holds: unique among the replicas sharing the database
  // while they run; UTF-8 without a NUL byte. Empty: "<host name>/<process id>/<random hex>".
  std::string replica;
  // Connections to the server at most, each serving one call at a time: calls beyond it wait
  // for one to be free. Made when first needed. >= 1.
  int connections = 4;
  // The most bytes a durable job may be: its type, id, fairness key and payload together. A larger
  // one is refused by AddJob and AddJobs (SubmitDurable, SubmitDurableBatch: the whole batch) with
  // InvalidArgument naming its size, and nothing of it is stored. Lower it to bound what callers
  // can make the database hold. 1 to kPostgresMaxJobBytes (the default).
  std::size_t max_job_bytes = kPostgresMaxJobBytes;
};

// Connects with the libpq connection string `conninfo` ("host=/run/pg dbname=mirror", or a
// postgresql:// URL) and creates, migrates or checks the schema. InvalidArgument for an empty or
// malformed string (libpq's reason in the message), before any connection is tried; Unavailable
// when the server cannot be reached.
FAIRGATE_EXPORT StatusOr<std::unique_ptr<SharedStore>> OpenPostgresStore(
    const std::string& conninfo, const PostgresStoreOptions& options = {});

}  // namespace fairgate

#endif  // FAIRGATE_POSTGRES_STORE_H_

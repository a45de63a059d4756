// fairgate/sqlite_store.h: the embedded store (fairgate/store.h) in one SQLite file.
//
// The file is opened in WAL mode (readers never wait for the writer, a commit appends to the
// log), its schema created on first use and checked on every open (a file written by a newer
// fairgate is refused with FailedPrecondition; one of an older fairgate is moved to this one's
// schema in one transaction, its jobs and sequence numbers kept, and is then refused by the
// older). One connection, its calls serialised by a mutex;
// the durable jobs' writes (AddJob(s), BeginAttempt(s), RemoveJob(s), DeferJob, KillJob) that
// callers make at once share one transaction and one commit (group commit), so concurrent
// SubmitDurable calls, and the scheduler's marks of attempts and removals, share an fsync: each
// returns once the commit holding its write is on disk, with its own write's status, or the
// commit's when that failed (then no write of the group is stored). The store queues writes
// (Store::QueuesWrites): the scheduler hands it each attempt's mark and each removal as they come
// (BeginAttemptsQueued, RemoveJobsQueued), which go in the next group and are answered by the
// thread that led its commit; when only such writes wait, a thread of the store's own leads.
// One scheduler at a time works the file's durable jobs (Store::BeginExclusiveUse, from its
// Recover until it is destroyed): it holds an exclusive lock (flock) on `<file>-lock` beside the
// file (its path with links resolved), which holds the holder's process id, and which the kernel
// frees however the process ends; another scheduler's Recover, through this handle, another
// handle or another process, is FailedPrecondition naming the holder. The lock file stays when
// the lock is dropped; a child forked without exec while the lock is held holds it until it
// exits. Handles that only read or write (no Recover) are not refused.
// Errors are statuses naming the file and the operation: ResourceExhausted when the disk or the
// file is full, FailedPrecondition when the file is read-only or not fairgate's, Unavailable for
// an I/O error or a lock held too long by another process, DataLoss for a corrupt file.
//
// Thread safety: every method may be called from any thread at once.
#ifndef FAIRGATE_SQLITE_STORE_H_
#define FAIRGATE_SQLITE_STORE_H_

#include <cstddef>
#include <memory>
#include <string>

#include "fairgate/export.h"
#include "fairgate/seconds.h"
#include "fairgate/status.h"
#include "fairgate/store.h"

namespace fairgate {

// The most SqliteStoreOptions::max_job_bytes may be, and its default: SQLite holds at most
// 1,000,000,000 bytes in a row (SQLITE_MAX_LENGTH, as Debian builds it), and a job's row keeps
// the rest for its other columns and its last error (kMaxLastErrorBytes).
inline constexpr std::size_t kSqliteMaxJobBytes = 999'000'000;

struct SqliteStoreOptions {
  // When a commit is on disk. kFull (the default): every commit (every SubmitDurable, every
  // attempt's start and end) waits for an fsync of the log, so an acknowledged job survives a
  // power cut. kNormal: the log is synced only at checkpoints; an acknowledged job survives a
  // crash of the process (kill -9) but possibly not of the machine. Several times faster.
  enum class Sync { kNormal, kFull };
  Sync synchronous = Sync::kFull;
  // How long a write waits for another process's lock on the file before Unavailable. >= 0.
  Seconds busy_timeout{5.0};
  // The most bytes a durable job may be: its type, id, fairness key and payload together. A larger
  // one is refused by AddJob and AddJobs (SubmitDurable, SubmitDurableBatch: the whole batch) with
  // InvalidArgument naming its size, and nothing of it is stored. Lower it to bound what callers
  // can make the file hold. 1 to kSqliteMaxJobBytes (the default), and at most what the SQLite
  // library linked holds in a row less 1,000,000 bytes.
  std::size_t max_job_bytes = kSqliteMaxJobBytes;
  friend bool operator==(const SqliteStoreOptions&, const SqliteStoreOptions&) = default;
};

// Opens (creating if absent) the store in `path`. InvalidArgument for an empty path or a bad
// option; FailedPrecondition naming what is wrong for a directory, a missing directory, or
// another program's SQLite database (one with tables of its own, or another PRAGMA
// application_id), which is refused before anything is written to it; the statuses above when
// the file cannot be opened or read. An empty file becomes a store.
FAIRGATE_EXPORT StatusOr<std::unique_ptr<Store>> OpenSqliteStore(
    const std::string& path, const SqliteStoreOptions& options = {});

}  // namespace fairgate

#endif  // FAIRGATE_SQLITE_STORE_H_

// The SQLite store (fairgate/sqlite_store.h), on SQLite's C API: one connection, prepared
// statements kept for its life, each method one transaction under the store's mutex, but the
// durable jobs' writes, which concurrent callers share (group commit, Grouped below).
#include "fairgate/sqlite_store.h"

#include <pthread.h>
#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "store/file_lock.h"
#include "store/job_size.h"

namespace fairgate {
namespace {

// 2: durable_jobs' sequence a plain INTEGER PRIMARY KEY (in 1, AUTOINCREMENT), its newest row kept
// as a tombstone when removed (below). 3: the dead jobs' index (kSchema). Files of an earlier
// schema are migrated when opened.
constexpr int kSchemaVersion = 3;
// PRAGMA application_id of fairgate's files ("FGat"), set with the schema: how an open tells
// fairgate's file from another program's database.
constexpr int kApplicationId = 0x46476174;

// The durable jobs' columns (a table's body, for kSchema and the migration from schema 1).
//
// Sequence numbers never go back, also across restarts and connections: a new row takes one more
// than the greatest sequence in the table (SQLite's choice for a rowid not given), and that row is
// never deleted. A removal of the newest row turns it into a tombstone instead (dead = 2, its
// fields emptied), which no read sees and the first removal after a newer job was stored deletes
// (also one that an earlier connection left, once a LiveJobs scan has found it; Recover makes
// one). AUTOINCREMENT, which schema 1 used for the same promise, writes the sqlite_sequence
// table's page in every commit that stores a job (two pages of the log instead of one) and costs
// an insert about 4,000 more instructions (callgrind, SQLite 3.40).
// dead: 0 live, 1 dead (Store::KillJob), 2 a tombstone.
constexpr const char* kJobsColumns = R"sql((
  sequence INTEGER PRIMARY KEY,
  type TEXT NOT NULL,
  id TEXT NOT NULL,
  fairness_key TEXT NOT NULL,
  payload BLOB NOT NULL,
  submitted_at REAL NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0,
  not_before REAL NOT NULL DEFAULT 0,
  last_error TEXT NOT NULL DEFAULT '',
  dead INTEGER NOT NULL DEFAULT 0
))sql";

// Schema 1 to 2, in the transaction that creates the rest: the rows copied to a table without
// AUTOINCREMENT, and a tombstone at the greatest sequence schema 1 gave out when no row holds it.
constexpr const char* kMigrateFrom1 = R"sql(
INSERT INTO durable_jobs_2 (sequence, type, id, fairness_key, payload, submitted_at, attempts,
                            not_before, last_error, dead)
  SELECT sequence, type, id, fairness_key, payload, submitted_at, attempts, not_before,
         last_error, dead FROM durable_jobs;
INSERT INTO durable_jobs_2 (sequence, type, id, fairness_key, payload, submitted_at, dead)
  SELECT seq, '', '', '', x'', 0, 2 FROM sqlite_sequence
  WHERE name = 'durable_jobs' AND seq > (SELECT ifnull(max(sequence), 0) FROM durable_jobs);
DROP TABLE durable_jobs;
ALTER TABLE durable_jobs_2 RENAME TO durable_jobs;
)sql";

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS estimates (
  type TEXT NOT NULL,
  id TEXT NOT NULL,
  seconds REAL NOT NULL,
  last_used REAL NOT NULL,
  PRIMARY KEY (type, id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS fairness_keys (
  key TEXT NOT NULL PRIMARY KEY,
  accumulated_cost REAL NOT NULL,
  idle_since REAL NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS schedules (
  type TEXT NOT NULL,
  id TEXT NOT NULL,
  last_run_end REAL NOT NULL,
  PRIMARY KEY (type, id)
) WITHOUT ROWID;
-- Schema 3: the dead jobs by sequence, so that a page of them or their count reads them only,
-- not every live job's row too (a live job's insert and removal do not touch it).
CREATE INDEX IF NOT EXISTS durable_jobs_dead ON durable_jobs (sequence) WHERE dead = 1;
)sql";

struct CloseDb {
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};
struct FinalizeStatement {
  void operator()(sqlite3_stmt* statement) const { sqlite3_finalize(statement); }
};
using Db = std::unique_ptr<sqlite3, CloseDb>;
using Statement = std::unique_ptr<sqlite3_stmt, FinalizeStatement>;

// SQLite's result code and message as a status naming the file and what was being done.
Status ToStatus(int code, absl::string_view error, const std::string& path, const char* what) {
  const std::string message = absl::StrCat("SQLite store ", path, ": ", what, ": ", error);
  switch (code & 0xff) {
    case SQLITE_FULL:
      return absl::ResourceExhaustedError(message);
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_CANTOPEN:
    case SQLITE_NOTADB:
      return absl::FailedPreconditionError(message);
    case SQLITE_CORRUPT:
      return absl::DataLossError(message);
    case SQLITE_TOOBIG:
      return absl::InvalidArgumentError(message);
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_IOERR:
    case SQLITE_PROTOCOL:
      return absl::UnavailableError(message);
    default:
      return absl::InternalError(message);
  }
}

// The same, with the connection's last error message (or the code's, without a connection).
Status ToStatus(int code, sqlite3* db, const std::string& path, const char* what) {
  return ToStatus(code, db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(code), path, what);
}

class SqliteStore final : public Store {
 public:
  static StatusOr<std::unique_ptr<Store>> Open(const std::string& path,
                                               const SqliteStoreOptions& options) {
    if (path.empty()) return absl::InvalidArgumentError("SQLite store path is empty");
    if (!std::isfinite(options.busy_timeout.count()) || options.busy_timeout.count() < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "busy_timeout must be finite and >= 0 seconds, got ", options.busy_timeout.count()));
    }
    // SQLite says only "unable to open database file" for these: name what is wrong.
    std::error_code error;
    const std::filesystem::path file(path);
    if (std::filesystem::is_directory(file, error)) {
      return absl::FailedPreconditionError(
          absl::StrCat("SQLite store ", path, ": is a directory, not a file"));
    }
    if (const std::filesystem::path parent = file.parent_path();
        !parent.empty() && !std::filesystem::is_directory(parent, error)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "SQLite store ", path, ": its directory ", parent.string(),
          std::filesystem::exists(parent, error) ? " is not a directory" : " does not exist"));
    }
    sqlite3* raw = nullptr;
    const int opened = sqlite3_open_v2(
        path.c_str(), &raw,
        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE,
        nullptr);
    Db db(raw);  // closed on every path, also when the open failed
    if (opened != SQLITE_OK) return ToStatus(opened, db.get(), path, "open");
    // A row holds at most the library's length limit: what a job may be leaves 1,000,000 bytes
    // of it to the row's other columns and its last error (kMaxLastErrorBytes).
    const auto row_limit =
        static_cast<std::size_t>(sqlite3_limit(db.get(), SQLITE_LIMIT_LENGTH, -1));
    if (options.max_job_bytes < 1 || options.max_job_bytes > kSqliteMaxJobBytes ||
        options.max_job_bytes + kRowReserve > row_limit) {
      return absl::InvalidArgumentError(absl::StrCat(
          "SQLite store ", path, ": max_job_bytes must be in [1, ",
          std::min(kSqliteMaxJobBytes, row_limit > kRowReserve ? row_limit - kRowReserve : 0),
          "] (this SQLite holds ", row_limit, " bytes in a row, less ", kRowReserve,
          " kept for the rest of it), got ", options.max_job_bytes));
    }
    auto store =
        std::unique_ptr<SqliteStore>(new SqliteStore(path, std::move(db), options.max_job_bytes));
    if (Status s = store->Prepare(options); !s.ok()) return s;
    return std::unique_ptr<Store>(std::move(store));
  }

  // Lets the store's own thread lead what is still queued, then ends it.
  ~SqliteStore() override {
    {
      std::lock_guard lock(group_mutex_);
      closing_ = true;
    }
    writer_wake_.notify_one();
    if (writer_.joinable()) writer_.join();
  }

  StatusOr<std::uint64_t> AddJob(const StoredJob& job) override {
    if (Status s = store::CheckJobSize(job, max_job_bytes_, StoreName()); !s.ok()) return s;
    StatusOr<std::uint64_t> sequence;
    if (Status committed = Grouped("store a durable job", [&] { sequence = InsertLocked(job); });
        !committed.ok()) {
      return committed;
    }
    return sequence;
  }

  // The batch's rows go in under a savepoint of the group's transaction: a row that fails takes
  // the batch's earlier rows with it, and leaves the other writes of the group alone.
  StatusOr<std::vector<std::uint64_t>> AddJobs(const std::vector<StoredJob>& jobs) override {
    if (jobs.empty()) return std::vector<std::uint64_t>{};
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      if (Status s = store::CheckJobSize(jobs[i], max_job_bytes_, StoreName()); !s.ok()) {
        return Status(s.code(), absl::StrCat("job ", i, " of the batch: ", s.message()));
      }
    }
    StatusOr<std::vector<std::uint64_t>> sequences;
    if (Status committed =
            Grouped("store a batch of durable jobs", [&] { sequences = InsertBatchLocked(jobs); });
        !committed.ok()) {
      return committed;
    }
    return sequences;
  }

  StatusOr<std::uint32_t> BeginAttempt(std::uint64_t sequence) override {
    StatusOr<std::uint32_t> attempts;
    if (Status committed =
            Grouped("mark an attempt", [&] { attempts = BeginAttemptLocked(sequence); });
        !committed.ok()) {
      return committed;
    }
    return attempts;
  }

  // One write of the group: the attempts are counted together.
  StatusOr<std::vector<StatusOr<std::uint32_t>>> BeginAttempts(
      const std::vector<std::uint64_t>& sequences) override {
    return GroupedEach<StatusOr<std::uint32_t>>(
        "mark attempts", sequences,
        [&](std::uint64_t sequence) { return BeginAttemptLocked(sequence); });
  }

  Status RemoveJob(std::uint64_t sequence) override {
    return GroupedStatus("remove a durable job", [&] { return RemoveInGroupLocked(sequence); });
  }

  // One write of the group: the jobs' removals commit together.
  StatusOr<std::vector<Status>> RemoveJobs(const std::vector<std::uint64_t>& sequences) override {
    return GroupedEach<Status>("remove durable jobs", sequences, [&](std::uint64_t sequence) {
      return RemoveInGroupLocked(sequence);
    });
  }

  // Queued: one write of a later group each, as BeginAttempts and RemoveJobs are one write of
  // theirs; `done` is told on the thread that led that group's commit.
  bool QueuesWrites() const override { return true; }
  void BeginAttemptsQueued(std::vector<std::uint64_t> sequences, AttemptsBegun done) override {
    QueuedEach<StatusOr<std::uint32_t>>(
        "mark attempts", std::move(sequences), std::move(done),
        [this](std::uint64_t sequence) { return BeginAttemptLocked(sequence); });
  }
  void RemoveJobsQueued(std::vector<std::uint64_t> sequences, JobsRemoved done) override {
    QueuedEach<Status>("remove durable jobs", std::move(sequences), std::move(done),
                       [this](std::uint64_t sequence) { return RemoveInGroupLocked(sequence); });
  }

  Status DeferJob(std::uint64_t sequence, double not_before, std::string_view error) override {
    return GroupedStatus("defer a durable job", [&] {
      sqlite3_stmt* s = defer_.get();
      sqlite3_bind_double(s, 1, not_before);
      Bind(s, 2, error);
      sqlite3_bind_int64(s, 3, static_cast<sqlite3_int64>(sequence));
      return Step(s, "defer a durable job");
    });
  }

  Status KillJob(std::uint64_t sequence, std::string_view error) override {
    return GroupedStatus("move a durable job to the dead jobs", [&] {
      sqlite3_stmt* s = kill_.get();
      Bind(s, 1, error);
      sqlite3_bind_int64(s, 2, static_cast<sqlite3_int64>(sequence));
      return Step(s, "move a durable job to the dead jobs");
    });
  }

  StatusOr<std::vector<StoredJob>> LiveJobs() override { return Jobs(false); }
  StatusOr<std::vector<StoredJob>> DeadJobs() override { return Jobs(true); }
  StatusOr<std::vector<StoredJob>> DeadJobsAfter(std::uint64_t after, std::size_t limit) override {
    return Jobs(true, after, limit);
  }
  StatusOr<std::size_t> CountDeadJobs() override {
    std::lock_guard lock(mutex_);
    std::size_t count = 0;
    Status status = Query(
        "SELECT count(*) FROM durable_jobs INDEXED BY durable_jobs_dead WHERE dead = 1",
        "count dead jobs",
        [&](sqlite3_stmt* s) { count = static_cast<std::size_t>(sqlite3_column_int64(s, 0)); });
    if (!status.ok()) return status;
    return count;
  }

  // A write of the group, as the jobs' other writes are.
  StatusOr<StoredJob> ReviveJob(std::uint64_t sequence) override {
    StatusOr<StoredJob> revived;
    if (Status committed = Grouped("revive a dead job", [&] { revived = ReviveLocked(sequence); });
        !committed.ok()) {
      return committed;
    }
    return revived;
  }

  // Removed as RemoveJob removes (the newest row left as a tombstone), once found dead.
  Status RemoveDeadJob(std::uint64_t sequence) override {
    return GroupedStatus("remove a dead job", [&]() -> Status {
      bool dead = false;
      Status read = Query(
          absl::StrCat("SELECT dead FROM durable_jobs WHERE sequence = ", sequence).c_str(),
          "remove a dead job", [&](sqlite3_stmt* s) { dead = sqlite3_column_int(s, 0) == 1; });
      if (!read.ok()) return read;
      if (!dead) return NoDeadJob(sequence);
      return RemoveInGroupLocked(sequence);
    });
  }

  // One scheduler at a time: this handle's (a second scheduler given the same handle is
  // refused), and the lock file's beside the database (`<file>-lock`, the file's path with its
  // links resolved, so that two paths to one file share it), which two handles, in one process
  // or two, cannot both hold.
  Status BeginExclusiveUse() override {
    std::lock_guard lock(use_mutex_);
    if (lock_.has_value()) {
      return absl::FailedPreconditionError(
          absl::StrCat("SQLite store ", path_,
                       ": another scheduler works its durable jobs through this same store"));
    }
    std::error_code error;
    const std::filesystem::path file = std::filesystem::canonical(path_, error);
    StatusOr<store::FileLock> held =
        store::FileLock::Take((error ? path_ : file.string()) + "-lock");
    const absl::StatusCode code = held.status().code();
    if (code == absl::StatusCode::kFailedPrecondition) {
      return absl::FailedPreconditionError(
          absl::StrCat("SQLite store ", path_, ": another scheduler works its durable jobs (",
                       held.status().message(),
                       "); one at a time may, and Recover may be called again once it is gone"));
    }
    if (!held.ok()) {
      return Status(
          code == absl::StatusCode::kPermissionDenied ? absl::StatusCode::kFailedPrecondition
                                                      : code,
          absl::StrCat("SQLite store ", path_,
                       ": cannot make sure that no other scheduler works its durable jobs: ",
                       held.status().message()));
    }
    lock_.emplace(*std::move(held));
    return absl::OkStatus();
  }
  void EndExclusiveUse() override {
    std::lock_guard lock(use_mutex_);
    lock_.reset();
  }

  Status SaveLearned(const LearnedState& changed, double forget_estimates_before,
                     double forget_keys_before) override {
    std::lock_guard lock(mutex_);
    if (Status s = Exec("BEGIN IMMEDIATE", "begin a flush"); !s.ok()) return s;
    Status status = [&]() -> Status {
      for (const SavedEstimate& e : changed.estimates) {
        sqlite3_stmt* s = save_estimate_.get();
        Bind(s, 1, e.type);
        Bind(s, 2, e.id);
        sqlite3_bind_double(s, 3, e.seconds);
        sqlite3_bind_double(s, 4, e.last_used);
        if (Status st = Step(s, "save an estimate"); !st.ok()) return st;
      }
      for (const SavedKey& k : changed.keys) {
        sqlite3_stmt* s = save_key_.get();
        Bind(s, 1, k.key);
        sqlite3_bind_double(s, 2, k.accumulated_cost);
        sqlite3_bind_double(s, 3, k.idle_since);
        if (Status st = Step(s, "save a key's cost"); !st.ok()) return st;
      }
      for (const SavedSchedule& p : changed.schedules) {
        sqlite3_stmt* s = save_schedule_.get();
        Bind(s, 1, p.type);
        Bind(s, 2, p.id);
        sqlite3_bind_double(s, 3, p.last_run_end);
        if (Status st = Step(s, "save a periodic schedule"); !st.ok()) return st;
      }
      sqlite3_bind_double(forget_estimates_.get(), 1, forget_estimates_before);
      if (Status st = Step(forget_estimates_.get(), "forget old estimates"); !st.ok()) return st;
      sqlite3_bind_double(forget_keys_.get(), 1, forget_keys_before);
      return Step(forget_keys_.get(), "forget idle keys");
    }();
    if (!status.ok()) {
      (void)Exec("ROLLBACK", "roll back a flush");
      return status;
    }
    return Exec("COMMIT", "commit a flush");
  }

  StatusOr<LearnedState> LoadLearned() override {
    std::lock_guard lock(mutex_);
    LearnedState state;
    Status status =
        Query("SELECT type, id, seconds, last_used FROM estimates", "load estimates",
              [&](sqlite3_stmt* s) {
                state.estimates.push_back({Text(s, 0), Text(s, 1), sqlite3_column_double(s, 2),
                                           sqlite3_column_double(s, 3)});
              });
    if (!status.ok()) return status;
    status = Query("SELECT key, accumulated_cost, idle_since FROM fairness_keys",
                   "load keys' costs", [&](sqlite3_stmt* s) {
                     state.keys.push_back(
                         {Text(s, 0), sqlite3_column_double(s, 1), sqlite3_column_double(s, 2)});
                   });
    if (!status.ok()) return status;
    status =
        Query("SELECT type, id, last_run_end FROM schedules", "load periodic schedules",
              [&](sqlite3_stmt* s) {
                state.schedules.push_back({Text(s, 0), Text(s, 1), sqlite3_column_double(s, 2)});
              });
    if (!status.ok()) return status;
    return state;
  }

 private:
  StatusOr<std::uint64_t> InsertLocked(const StoredJob& job) {
    sqlite3_stmt* s = add_.get();
    Bind(s, 1, job.type);
    Bind(s, 2, job.id);
    Bind(s, 3, job.fairness_key);
    sqlite3_bind_blob64(s, 4, job.payload.data(), job.payload.size(), SQLITE_STATIC);
    sqlite3_bind_double(s, 5, job.submitted_at);
    newest_in_group_.reset();  // a newer row (or, if it failed, perhaps not): read it again
    if (Status st = Step(s, "store a durable job"); !st.ok()) return st;
    return static_cast<std::uint64_t>(sqlite3_last_insert_rowid(db_.get()));
  }

  // Removes the job within a group's transaction (RemoveLocked).
  Status RemoveInGroupLocked(std::uint64_t sequence) {
    StatusOr<std::uint64_t> newest = NewestInGroupLocked();
    if (!newest.ok()) return newest.status();
    return RemoveLocked(sequence, *newest);
  }

  // NewestLocked, read once a group while no job is stored meanwhile: a removal leaves the newest
  // row (as a tombstone), so the removals of a group's writes share one read.
  StatusOr<std::uint64_t> NewestInGroupLocked() {
    if (newest_in_group_) return *newest_in_group_;
    StatusOr<std::uint64_t> newest = NewestLocked();
    if (newest.ok()) newest_in_group_ = *newest;
    return newest;
  }

  // The greatest sequence stored (0 for none), after deleting the tombstones known to this
  // connection that a newer row has made needless: what RemoveLocked needs first.
  StatusOr<std::uint64_t> NewestLocked() {
    const char* what = "remove a durable job";
    sqlite3_stmt* newest = newest_.get();
    const int rc = sqlite3_step(newest);
    const std::uint64_t last =
        rc == SQLITE_ROW ? static_cast<std::uint64_t>(sqlite3_column_int64(newest, 0)) : 0;
    sqlite3_reset(newest);
    if (rc != SQLITE_ROW) return ToStatus(rc, db_.get(), path_, what);
    for (auto t = tombstones_.begin(); t != tombstones_.end();) {
      if (*t == last) {  // still the newest row: still needed
        ++t;
        continue;
      }
      // Below the newest: needless. (Above it, gone already.) A transaction that was rolled back
      // may have left a row that is no tombstone under a known sequence: `dead = 2` spares it.
      if (*t < last) {
        sqlite3_bind_int64(purge_.get(), 1, static_cast<sqlite3_int64>(*t));
        if (Status s = Step(purge_.get(), what); !s.ok()) return s;
      }
      t = tombstones_.erase(t);
    }
    return last;
  }

  // Deletes the job, unless it is the newest row (`last`, from NewestLocked): that one becomes a
  // tombstone (kJobsColumns). A sequence not stored is no error (a removal may be written twice).
  Status RemoveLocked(std::uint64_t sequence, std::uint64_t last) {
    if (sequence > last) return absl::OkStatus();  // not stored
    sqlite3_stmt* write = sequence < last ? remove_.get() : retire_.get();
    sqlite3_bind_int64(write, 1, static_cast<sqlite3_int64>(sequence));
    if (Status s = Step(write, "remove a durable job"); !s.ok()) return s;
    if (sequence == last && sqlite3_changes(db_.get()) > 0) tombstones_.push_back(sequence);
    return absl::OkStatus();
  }

  StatusOr<std::vector<std::uint64_t>> InsertBatchLocked(const std::vector<StoredJob>& jobs) {
    const char* what = "store a batch of durable jobs";
    if (Status s = Exec("SAVEPOINT fairgate_batch", what); !s.ok()) return s;
    std::vector<std::uint64_t> sequences;
    sequences.reserve(jobs.size());
    for (const StoredJob& job : jobs) {
      StatusOr<std::uint64_t> sequence = InsertLocked(job);
      if (!sequence.ok()) {
        // Unless the error ended the whole transaction (then the group fails with it).
        if (sqlite3_get_autocommit(db_.get()) == 0) {
          (void)Exec("ROLLBACK TO fairgate_batch", what);
          (void)Exec("RELEASE fairgate_batch", what);
        }
        return sequence.status();
      }
      sequences.push_back(*sequence);
    }
    if (Status s = Exec("RELEASE fairgate_batch", what); !s.ok()) return s;
    return sequences;
  }

  // The count is read back by a second statement, not by the UPDATE's RETURNING: SQLite builds
  // an ephemeral table for every RETURNING, which made a mark cost about 36,000 instructions,
  // three times an insert; the two statements cost about 11,000 (callgrind, SQLite 3.40).
  StatusOr<std::uint32_t> BeginAttemptLocked(std::uint64_t sequence) {
    sqlite3_stmt* update = begin_attempt_.get();
    sqlite3_bind_int64(update, 1, static_cast<sqlite3_int64>(sequence));
    if (Status s = Step(update, "mark an attempt"); !s.ok()) return s;
    if (sqlite3_changes(db_.get()) == 0) {
      return absl::NotFoundError(absl::StrCat("durable job ", sequence, " is not stored"));
    }
    sqlite3_stmt* read = read_attempts_.get();
    sqlite3_bind_int64(read, 1, static_cast<sqlite3_int64>(sequence));
    const int rc = sqlite3_step(read);
    std::optional<std::uint32_t> attempts;
    if (rc == SQLITE_ROW) attempts = static_cast<std::uint32_t>(sqlite3_column_int64(read, 0));
    const int done = rc == SQLITE_ROW ? sqlite3_step(read) : rc;
    sqlite3_reset(read);
    sqlite3_clear_bindings(read);
    if (done != SQLITE_DONE) return ToStatus(done, db_.get(), path_, "read an attempt's count");
    if (!attempts) {
      return absl::InternalError(
          absl::StrCat("durable job ", sequence, " vanished while its attempt was marked"));
    }
    return *attempts;
  }

  // Group commit. Each durable job's write (store, begin an attempt, remove, defer, kill) is one
  // statement, run by Grouped inside a transaction that concurrent writes share: the first caller
  // to find no commit under way leads, taking every write queued by then (its own among them)
  // into one BEGIN IMMEDIATE ... COMMIT, one fsync at Sync::kFull; the callers that queued
  // meanwhile wait, and the next of them leads the next group. A caller returns only once the
  // commit that holds its write is done, with its statement's own status, or the commit's if that
  // failed (then none of the group's writes is stored). `write` runs with the connection's mutex
  // held, on the leader's thread. The queued writes (Queued) go in the same groups, but nobody
  // waits on them: a leader tells each its group's status after the commit.
  Status Grouped(const char* what, const std::function<void()>& write) {
    Waiting me;
    me.write = &write;
    me.what = what;
    std::unique_lock lock(group_mutex_);
    ++inside_;
    queue_.push_back(&me);
    while (!me.done) {
      if (leading_) {
        group_done_.wait(lock);
        continue;
      }
      Lead(lock);  // `me` is in the group: it was queued and is not done
      return me.committed;
    }
    --inside_;
    return me.committed;
  }

  // Commits the queued writes as one group; called, and returns, with `lock` (of group_mutex_)
  // held by the caller of Grouped that found no leader. Leaves the mutex unlocked.
  void Lead(std::unique_lock<std::mutex>& lock) {
    leading_ = true;
    // The callers of the group just committed come back one by one as they wake, and their
    // next writes a moment later; a leader that took only those queued so far would commit
    // groups of one or two. It lets the callers still inside (woken, not yet queued again, or
    // leaving) queue first, and as many as the last group had, and half as many queued writes
    // as it had (the attempts and removals of the jobs that its commit let start or end, which
    // follow a moment later), for at most half the last commit's time (at most 1 ms): a group
    // that does not fill costs its callers half a commit at most. (Waiting for none of the
    // queued writes, one submitter's job took 1.6 commits instead of one, its attempt's mark
    // committed alone; waiting for only half the callers, 8 submitters' groups split in two and
    // ran no faster, bench/HISTORY.md.)
    const auto give_up = std::chrono::steady_clock::now() +
                         std::min(last_commit_ / 2, std::chrono::microseconds(1000));
    while ((queue_.size() - queued_writes_ < std::max(inside_, last_group_) ||
            queued_writes_ < last_queued_ / 2) &&
           std::chrono::steady_clock::now() < give_up) {
      lock.unlock();
      std::this_thread::yield();
      lock.lock();
    }
    std::vector<Waiting*> group;
    group.swap(queue_);
    last_group_ = group.size() - queued_writes_;
    last_queued_ = queued_writes_;
    queued_writes_ = 0;
    lock.unlock();
    const auto commit_began = std::chrono::steady_clock::now();
    int failed = SQLITE_OK;  // the group's: none of its writes is stored
    std::string error;
    {
      std::lock_guard db(mutex_);
      failed = Run(begin_.get());
      newest_in_group_.reset();
      if (failed == SQLITE_OK) {
        for (Waiting* w : group) {
          (*w->write)();
          // An error that rolled the whole transaction back (a full disk, an I/O error): the
          // writes already run are gone, and the rest must not run outside a transaction.
          if (sqlite3_get_autocommit(db_.get()) != 0) {
            failed = sqlite3_extended_errcode(db_.get());
            if (failed == SQLITE_OK) failed = SQLITE_ABORT;
            break;
          }
        }
        if (failed == SQLITE_OK) {
          failed = Run(commit_.get());
        }
      }
      if (failed != SQLITE_OK) {
        error = sqlite3_errmsg(db_.get());
        if (sqlite3_get_autocommit(db_.get()) == 0) {
          (void)Run(rollback_.get());
        }
      }
    }
    const auto committed_at = std::chrono::steady_clock::now();
    std::vector<std::unique_ptr<Waiting>> queued;  // told after the mutex is free
    lock.lock();
    last_commit_ =
        std::chrono::duration_cast<std::chrono::microseconds>(committed_at - commit_began);
    for (Waiting* w : group) {
      if (failed != SQLITE_OK) w->committed = ToStatus(failed, error, path_, w->what);
      if (w->then) {
        queued.emplace_back(w);
      } else {
        w->done = true;  // its caller may return (and `w` be gone) once the mutex is free
      }
    }
    leading_ = false;
    --inside_;
    // Writes queued during the commit with no caller's among them: nobody would lead them.
    const bool orphaned = OrphanedLocked();
    // Woken once the mutex is free: woken under it, each of the group's callers would find it
    // held and sleep again on it, a second switch each (8 submitters storing: 3.7 context
    // switches a job against 2.1 so, and 7-20 % more jobs a second in alternated rounds). The
    // next group's waiters wake too, and one of them leads it.
    lock.unlock();
    group_done_.notify_all();
    if (orphaned) writer_wake_.notify_one();
    for (const auto& w : queued) w->then(w->committed);
  }

  // Queues `write` for the next group as Grouped would, and returns at once; `then` is told the
  // status Grouped would have returned, once the group's commit is done, on its leader's thread
  // with no lock of the store's held.
  void Queued(const char* what, std::function<void()> write,
              std::function<void(const Status&)> then) {
    auto w = std::make_unique<Waiting>();
    w->own_write = std::move(write);
    w->write = &w->own_write;
    w->what = what;
    w->then = std::move(then);
    bool orphaned = false;
    {
      std::lock_guard lock(group_mutex_);
      queue_.push_back(w.release());
      ++queued_writes_;
      // Under a leader, its group takes the write, or it is handed on after its commit (Lead).
      orphaned = !leading_ && OrphanedLocked();
    }
    if (orphaned) writer_wake_.notify_one();
  }

  // Whether the queue holds only queued writes, which no caller of Grouped will lead: then the
  // store's own thread (WriteOrphans, started here on first need) is asked to. By group_mutex_.
  bool OrphanedLocked() {
    if (!OnlyQueuedLocked()) return false;
    writer_due_ = true;
    if (!writer_.joinable()) writer_ = std::thread([this] { WriteOrphans(); });
    return true;
  }

  // Whether queued writes wait and no caller's write does. By group_mutex_.
  bool OnlyQueuedLocked() const { return !queue_.empty() && queue_.size() == queued_writes_; }

  // The store's own thread: leads a group whenever queued writes have nobody else to, until the
  // store closes with nothing queued.
  void WriteOrphans() {
    (void)pthread_setname_np(pthread_self(), "fg-sqlite");  // a diagnostic only
    static const std::function<void()> kNothing = [] {};
    std::unique_lock lock(group_mutex_);
    for (;;) {
      writer_wake_.wait(lock, [&] { return writer_due_ || closing_; });
      if (!writer_due_) return;
      writer_due_ = false;
      // Taken meanwhile by a caller who led, or to be handed on by the leader now committing.
      if (leading_ || !OnlyQueuedLocked()) continue;
      lock.unlock();
      (void)Grouped("write queued attempts and removals", kNothing);
      lock.lock();
    }
  }

  // Queued, for one write that calls `each` for every sequence in turn (as GroupedEach): `done`
  // is told their results in the order given, or the group's status when it failed.
  template <typename Result, typename Done, typename Each>
  void QueuedEach(const char* what, std::vector<std::uint64_t> sequences, Done done, Each each) {
    auto results = std::make_shared<std::vector<Result>>();
    Queued(
        what,
        [this, results, sequences = std::move(sequences), each = std::move(each)] {
          EachLocked(sequences, each, *results);
        },
        [results, done = std::move(done)](const Status& committed) {
          if (!committed.ok()) {
            done(committed);
          } else {
            done(std::move(*results));
          }
        });
  }
  // One write of Grouped that calls `each` for every sequence in turn: their results in the
  // order given, or the group's status when it failed (then none is stored).
  template <typename Result, typename Each>
  StatusOr<std::vector<Result>> GroupedEach(const char* what,
                                            const std::vector<std::uint64_t>& sequences,
                                            const Each& each) {
    std::vector<Result> results;
    if (Status committed = Grouped(what, [&] { EachLocked(sequences, each, results); });
        !committed.ok()) {
      return committed;
    }
    return results;
  }
  // The write of GroupedEach and QueuedEach: `each` of every sequence in turn, into `results`.
  template <typename Result, typename Each>
  void EachLocked(const std::vector<std::uint64_t>& sequences, const Each& each,
                  std::vector<Result>& results) {
    results.clear();
    for (std::uint64_t sequence : sequences) {
      // An error that ended the group's transaction (Grouped fails the whole group then): the
      // rest must not run outside it.
      if (sqlite3_get_autocommit(db_.get()) != 0) break;
      results.push_back(each(sequence));
    }
  }
  // Grouped, for a write whose result is a status.
  Status GroupedStatus(const char* what, const std::function<Status()>& write) {
    Status written;
    if (Status committed = Grouped(what, [&] { written = write(); }); !committed.ok()) {
      return committed;
    }
    return written;
  }
  struct Waiting {
    const std::function<void()>* write = nullptr;
    const char* what = "";  // for the status when the group's commit fails
    Status committed;
    bool done = false;  // a caller's write: its group's commit is done
    // A queued write's (Queued): `write` points at `own_write`; `then` is told `committed`.
    std::function<void()> own_write;
    std::function<void(const Status&)> then;
  };

  SqliteStore(std::string path, Db db, std::size_t max_job_bytes)
      : path_(std::move(path)), max_job_bytes_(max_job_bytes), db_(std::move(db)) {}

  Status Prepare(const SqliteStoreOptions& options) {
    sqlite3_busy_timeout(db_.get(), static_cast<int>(options.busy_timeout.count() * 1000));
    sqlite3_extended_result_codes(db_.get(), 1);
    // Read first: a file that is not a database (or not readable) fails here, and another
    // program's database is refused here, before any write (WAL mode included) changes it.
    int version = 0, application = 0, tables = 0, ours = 0;
    Status status = Query("PRAGMA user_version", "read the schema version",
                          [&](sqlite3_stmt* s) { version = sqlite3_column_int(s, 0); });
    if (status.ok()) {
      status = Query("PRAGMA application_id", "read the application id",
                     [&](sqlite3_stmt* s) { application = sqlite3_column_int(s, 0); });
    }
    if (status.ok()) {
      status = Query(
          "SELECT count(*), count(*) FILTER (WHERE type = 'table' AND name = 'durable_jobs') "
          "FROM sqlite_master",
          "read the schema", [&](sqlite3_stmt* s) {
            tables = sqlite3_column_int(s, 0);
            ours = sqlite3_column_int(s, 1);
          });
    }
    if (!status.ok()) return status;
    // fairgate's files carry its application id; those written before it did, its schema
    // version and tables. Anything else with a schema of its own is another program's.
    if (application != kApplicationId &&
        (application != 0 || (tables > 0 && (version == 0 || ours == 0)))) {
      return absl::FailedPreconditionError(absl::StrCat(
          "SQLite store ", path_, ": is another program's database, not fairgate's (",
          application != 0 ? absl::StrCat("application_id ", application)
                           : absl::StrCat(tables, " schema objects, user_version ", version),
          "); it was left untouched"));
    }
    if (version > kSchemaVersion) {
      return absl::FailedPreconditionError(
          absl::StrCat("SQLite store ", path_, " has schema version ", version,
                       ", newer than this fairgate's ", kSchemaVersion));
    }
    // WAL and the schema need a writable file; a read-only one is refused here, clearly.
    std::string mode;
    status = Query("PRAGMA journal_mode=WAL", "switch to WAL mode",
                   [&](sqlite3_stmt* s) { mode = Text(s, 0); });
    if (!status.ok()) return status;
    if (mode != "wal") {
      return absl::FailedPreconditionError(
          absl::StrCat("SQLite store ", path_, ": cannot use WAL mode (journal mode ", mode, ")"));
    }
    const char* sync = options.synchronous == SqliteStoreOptions::Sync::kFull
                           ? "PRAGMA synchronous=FULL"
                           : "PRAGMA synchronous=NORMAL";
    if (Status s = Exec(sync, "set the fsync policy"); !s.ok()) return s;
    // A new file, or one of an older fairgate (its schema is completed, and it is marked).
    if (version < kSchemaVersion || application != kApplicationId) {
      if (Status s = Exec("BEGIN IMMEDIATE", "begin creating the schema"); !s.ok()) return s;
      // Read again under the write lock: another process may have migrated the file meanwhile.
      status = Query("PRAGMA user_version", "read the schema version",
                     [&](sqlite3_stmt* s) { version = sqlite3_column_int(s, 0); });
      if (status.ok() && version == 1) {
        status = Exec(absl::StrCat("CREATE TABLE durable_jobs_2 ", kJobsColumns).c_str(),
                      "create the durable jobs' table of schema 2");
        if (status.ok()) status = Exec(kMigrateFrom1, "move the durable jobs to schema 2");
      } else if (status.ok()) {
        status =
            Exec(absl::StrCat("CREATE TABLE IF NOT EXISTS durable_jobs ", kJobsColumns).c_str(),
                 "create the durable jobs' table");
      }
      if (status.ok()) status = Exec(kSchema, "create the schema");
      if (status.ok()) {
        status = Exec(absl::StrCat("PRAGMA user_version=", kSchemaVersion).c_str(),
                      "set the schema version");
      }
      if (status.ok()) {
        status = Exec(absl::StrCat("PRAGMA application_id=", kApplicationId).c_str(),
                      "mark the file as fairgate's");
      }
      if (!status.ok()) {
        (void)Exec("ROLLBACK", "roll back creating the schema");
        return status;
      }
      if (Status s = Exec("COMMIT", "commit the schema"); !s.ok()) return s;
    }
    struct {
      Statement* statement;
      const char* sql;
    } statements[] = {
        {&begin_, "BEGIN IMMEDIATE"},
        {&commit_, "COMMIT"},
        {&rollback_, "ROLLBACK"},
        {&add_,
         "INSERT INTO durable_jobs (type, id, fairness_key, payload, submitted_at) "
         "VALUES (?, ?, ?, ?, ?)"},
        {&begin_attempt_,
         "UPDATE durable_jobs SET attempts = attempts + 1 WHERE sequence = ? AND dead = 0"},
        {&read_attempts_, "SELECT attempts FROM durable_jobs WHERE sequence = ?"},
        {&newest_, "SELECT max(sequence) FROM durable_jobs"},
        {&remove_, "DELETE FROM durable_jobs WHERE sequence = ?"},
        {&retire_,
         "UPDATE durable_jobs SET dead = 2, type = '', id = '', fairness_key = '', payload = x'', "
         "last_error = '' WHERE sequence = ? AND dead <> 2"},
        {&purge_, "DELETE FROM durable_jobs WHERE sequence = ? AND dead = 2"},
        {&defer_,
         "UPDATE durable_jobs SET not_before = ?, last_error = ? WHERE sequence = ? AND dead <> 2"},
        {&kill_,
         "UPDATE durable_jobs SET dead = 1, last_error = ? WHERE sequence = ? AND dead <> 2"},
        {&save_estimate_, "INSERT OR REPLACE INTO estimates VALUES (?, ?, ?, ?)"},
        {&save_key_, "INSERT OR REPLACE INTO fairness_keys VALUES (?, ?, ?)"},
        {&save_schedule_, "INSERT OR REPLACE INTO schedules VALUES (?, ?, ?)"},
        {&forget_estimates_, "DELETE FROM estimates WHERE last_used < ?"},
        {&forget_keys_, "DELETE FROM fairness_keys WHERE idle_since < ?"},
    };
    for (auto& [statement, sql] : statements) {
      sqlite3_stmt* raw = nullptr;
      const int rc =
          sqlite3_prepare_v3(db_.get(), sql, -1, SQLITE_PREPARE_PERSISTENT, &raw, nullptr);
      statement->reset(raw);
      if (rc != SQLITE_OK) return ToStatus(rc, db_.get(), path_, "prepare a statement");
    }
    return absl::OkStatus();
  }

  // Within a group's transaction: the dead job `sequence` lives again, its attempts from 0, due
  // at once, and is read back.
  StatusOr<StoredJob> ReviveLocked(std::uint64_t sequence) {
    const char* what = "revive a dead job";
    const std::string where = absl::StrCat(" WHERE sequence = ", sequence);
    if (Status s = Query(absl::StrCat("UPDATE durable_jobs SET dead = 0, attempts = 0, "
                                      "not_before = 0",
                                      where, " AND dead = 1")
                             .c_str(),
                         what, [](sqlite3_stmt*) {});
        !s.ok()) {
      return s;
    }
    if (sqlite3_changes(db_.get()) == 0) return NoDeadJob(sequence);
    std::optional<StoredJob> job;
    if (Status s = Query(absl::StrCat(kSelectJobs, where).c_str(), what,
                         [&](sqlite3_stmt* s) { job = JobAt(s); });
        !s.ok()) {
      return s;
    }
    if (!job) {
      return absl::InternalError(absl::StrCat("SQLite store ", path_, ": ", what, ": job ",
                                              sequence, " vanished as it was revived"));
    }
    return *std::move(job);
  }

  Status NoDeadJob(std::uint64_t sequence) const {
    return absl::NotFoundError(
        absl::StrCat("SQLite store ", path_, ": no dead job has sequence number ", sequence));
  }

  // The jobs' columns, as JobAt reads them, from every row (a WHERE follows).
  static constexpr const char* kSelectJobs =
      "SELECT sequence, type, id, fairness_key, payload, submitted_at, attempts, not_before, "
      "last_error, dead FROM durable_jobs";
  static StoredJob JobAt(sqlite3_stmt* s) {
    StoredJob job;
    job.sequence = static_cast<std::uint64_t>(sqlite3_column_int64(s, 0));
    job.type = Text(s, 1);
    job.id = Text(s, 2);
    job.fairness_key = Text(s, 3);
    const void* payload = sqlite3_column_blob(s, 4);
    job.payload.assign(static_cast<const char*>(payload),
                       payload != nullptr ? sqlite3_column_bytes(s, 4) : 0);
    job.submitted_at = sqlite3_column_double(s, 5);
    job.attempts = static_cast<std::uint32_t>(sqlite3_column_int64(s, 6));
    job.not_before = sqlite3_column_double(s, 7);
    job.last_error = Text(s, 8);
    return job;
  }

  // The live jobs' scan also reads the tombstones (kJobsColumns), for the next removal to delete:
  // those an earlier connection left are found by the scan Recover makes anyway, not by another.
  // The scan sees every tombstone of the file (no transaction of this connection is open under
  // mutex_ meanwhile), so what it found replaces what was known: a connection that only reads
  // does not gather the numbers of tombstones deleted long ago.
  // The dead jobs' reads (`after` and `limit` a page's, Store::DeadJobsAfter) take them from their
  // index (durable_jobs_dead), whatever the number of live jobs.
  StatusOr<std::vector<StoredJob>> Jobs(bool dead, std::uint64_t after = 0,
                                        std::size_t limit = kNoLimit) {
    std::lock_guard lock(mutex_);
    std::vector<StoredJob> jobs;
    std::vector<std::uint64_t> tombstones;
    const std::string sql =
        dead ? absl::StrCat(kSelectJobs, " INDEXED BY durable_jobs_dead WHERE dead = 1",
                            " AND sequence > ", Int64(after), " ORDER BY sequence LIMIT ",
                            Int64(limit))
             : absl::StrCat(kSelectJobs, " WHERE dead <> 1 ORDER BY sequence");
    Status status = Query(sql.c_str(), "load durable jobs", [&](sqlite3_stmt* s) {
      if (sqlite3_column_int(s, 9) == 2) {
        tombstones.push_back(static_cast<std::uint64_t>(sqlite3_column_int64(s, 0)));
        return;
      }
      jobs.push_back(JobAt(s));
    });
    if (!status.ok()) return status;
    if (!dead) tombstones_.swap(tombstones);
    return jobs;
  }

  // No limit: as the largest, SQLite's integers hold it (Int64).
  static constexpr std::size_t kNoLimit = std::numeric_limits<std::size_t>::max();
  // A number as SQLite's integers hold it: those above them as the largest.
  static std::int64_t Int64(std::uint64_t n) {
    return static_cast<std::int64_t>(
        std::min<std::uint64_t>(n, std::numeric_limits<std::int64_t>::max()));
  }

  // Binds without a copy (SQLITE_STATIC): every statement is stepped, and its bindings cleared
  // (Step), before the caller's strings go away.
  static void Bind(sqlite3_stmt* s, int index, std::string_view text) {
    sqlite3_bind_text64(s, index, text.data(), text.size(), SQLITE_STATIC, SQLITE_UTF8);
  }

  static std::string Text(sqlite3_stmt* s, int column) {
    const unsigned char* text = sqlite3_column_text(s, column);
    if (text == nullptr) return {};
    return std::string(reinterpret_cast<const char*>(text),
                       static_cast<std::size_t>(sqlite3_column_bytes(s, column)));
  }

  // Runs a prepared statement that returns no rows, then makes it ready for the next use.
  Status Step(sqlite3_stmt* s, const char* what) {
    const int rc = Run(s);
    sqlite3_clear_bindings(s);
    if (rc != SQLITE_OK) return ToStatus(rc, db_.get(), path_, what);
    return absl::OkStatus();
  }

  // Steps a statement that returns no rows and resets it: SQLITE_OK, or its error code.
  int Run(sqlite3_stmt* s) {
    const int rc = sqlite3_step(s);
    sqlite3_reset(s);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
  }

  Status Exec(const char* sql, const char* what) {
    const int rc = sqlite3_exec(db_.get(), sql, nullptr, nullptr, nullptr);
    if (rc != SQLITE_OK) return ToStatus(rc, db_.get(), path_, what);
    return absl::OkStatus();
  }

  template <typename Row>
  Status Query(const char* sql, const char* what, Row row) {
    sqlite3_stmt* raw = nullptr;
    int rc = sqlite3_prepare_v2(db_.get(), sql, -1, &raw, nullptr);
    Statement statement(raw);
    if (rc != SQLITE_OK) return ToStatus(rc, db_.get(), path_, what);
    while ((rc = sqlite3_step(raw)) == SQLITE_ROW) row(raw);
    if (rc != SQLITE_DONE) return ToStatus(rc, db_.get(), path_, what);
    return absl::OkStatus();
  }

  // "SQLite store <path>", as errors begin.
  std::string StoreName() const { return absl::StrCat("SQLite store ", path_); }

  // Bytes of a row's length limit that a job may not take (SqliteStoreOptions::max_job_bytes).
  static constexpr std::size_t kRowReserve = 1'000'000;

  const std::string path_;
  const std::size_t max_job_bytes_;  // SqliteStoreOptions::max_job_bytes
  std::mutex group_mutex_;           // guards the group commit's queue and leader
  std::condition_variable group_done_;
  std::vector<Waiting*> queue_;    // writes waiting for the next group
  bool leading_ = false;           // a group is being committed
  std::size_t inside_ = 0;         // callers in Grouped: queued, waiting, or done and not yet gone
  std::size_t queued_writes_ = 0;  // of them, queued writes (Queued), which no caller waits on
  std::size_t last_group_ = 1;     // how many callers' writes the last group committed
  std::size_t last_queued_ = 0;    // and how many queued writes
  // The store's own thread (WriteOrphans), and when it must lead: started on first need.
  std::condition_variable writer_wake_;
  bool writer_due_ = false;  // queued writes wait with nobody else to lead them
  bool closing_ = false;     // the destructor: the thread ends once nothing is due
  std::thread writer_;
  std::chrono::microseconds last_commit_{200};  // how long its transaction took
  std::mutex mutex_;                            // one transaction at a time on the one connection
  Db db_;
  // The group commit's own statements, prepared once: sqlite3_exec would parse them again for
  // each group (about 5,000 instructions each time).
  Statement begin_, commit_, rollback_;
  Statement add_, begin_attempt_, read_attempts_, newest_, remove_, retire_, purge_, defer_, kill_;
  // Tombstones (kJobsColumns) this connection knows of: made by RemoveLocked, found by Jobs,
  // deleted by NewestLocked. By mutex_.
  std::vector<std::uint64_t> tombstones_;
  std::optional<std::uint64_t> newest_in_group_;  // NewestInGroupLocked's, by mutex_
  Statement save_estimate_, save_key_, save_schedule_, forget_estimates_, forget_keys_;
  // The lock file a scheduler holds through this store (BeginExclusiveUse), by use_mutex_.
  std::mutex use_mutex_;
  std::optional<store::FileLock> lock_;
};

}  // namespace

StatusOr<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path,
                                                 const SqliteStoreOptions& options) {
  return SqliteStore::Open(path, options);
}

}  // namespace fairgate

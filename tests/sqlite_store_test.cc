// The SQLite store on its own (fairgate/sqlite_store.h): what it keeps across reopening the file,
// its statuses for files it cannot use, and its group commit (of callers' and queued writes).
#include "fairgate/sqlite_store.h"

#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "doctest/doctest.h"
#include "forwarding_store.h"
#include "store_contract.h"
#include "temp_dir.h"

namespace fairgate {
namespace {
namespace sqlite_store_test {

TEST_CASE("SqliteStore.KeepsJobsAcrossReopeningTheFile") {
  testing::TempDir dir;
  const std::string path = dir.path() + "/state.db";
  testing::CheckJobsAcrossConnections([&] { return *OpenSqliteStore(path); });
}

TEST_CASE("SqliteStore.StoresABatchWholeInItsOrder") {
  testing::TempDir dir;
  const std::string path = dir.path() + "/state.db";
  testing::CheckBatches([&] { return *OpenSqliteStore(path); });
}

TEST_CASE("SqliteStore.DeadJobsAreRevivedOrRemoved") {
  testing::TempDir dir;
  const std::string path = dir.path() + "/state.db";
  testing::CheckDeadJobsAreRevivedOrRemoved([&] { return *OpenSqliteStore(path); });
}

TEST_CASE("SqliteStore.DeadJobsArePaged") {
  testing::TempDir dir;
  const std::string path = dir.path() + "/state.db";
  testing::CheckDeadJobsArePaged([&] { return *OpenSqliteStore(path); });
}

TEST_CASE("SqliteStore.AJobAboveMaxJobBytesIsRefusedAndNothingOfItStored") {
  testing::TempDir dir;
  const std::string path = dir.path() + "/state.db";
  SqliteStoreOptions bounded;
  bounded.max_job_bytes = 100;
  testing::CheckJobsAboveTheBoundAreRefused([&] { return *OpenSqliteStore(path, bounded); });
  for (std::size_t bad : {std::size_t{0}, kSqliteMaxJobBytes + 1}) {
    SqliteStoreOptions options;
    options.max_job_bytes = bad;
    const Status refused = OpenSqliteStore(path, options).status();
    CHECK(refused.code() == absl::StatusCode::kInvalidArgument);
    CHECK_MESSAGE(
        refused.message().find("max_job_bytes must be in [1, 999000000]") != std::string::npos,
        refused.message());
  }
  // By default, what SQLite can hold in a row: a job just above it is refused by its size (it was
  // SQLite's "string or blob too big", or, past SQLite's limit, a NOT NULL constraint on the
  // payload it then bound as NULL), and the store goes on.
  auto store = *OpenSqliteStore(path);
  const StoredJob huge = testing::TestJob("huge.git", std::string(kSqliteMaxJobBytes, 'p'));
  const Status refused = store->AddJob(huge).status();
  CHECK(refused.code() == absl::StatusCode::kInvalidArgument);
  CHECK(refused.message().find("more than max_job_bytes (999000000)") != std::string::npos);
  CHECK(store->AddJob(testing::TestJob("small.git", "")).ok());
}

TEST_CASE("SqliteStore.LearnedStateIsReplacedByNameAndForgottenPastItsTtl") {
  testing::TempDir dir;
  const std::string path = dir.path() + "/state.db";
  testing::CheckLearnedState([&] { return *OpenSqliteStore(path); });
}

TEST_CASE("SqliteStore.FilesItCannotUseAreRefusedWithStatusesNamingThem") {
  testing::TempDir dir;
  CHECK(OpenSqliteStore("").status().code() == absl::StatusCode::kInvalidArgument);
  SqliteStoreOptions bad;
  bad.busy_timeout = Seconds(-1);
  CHECK(OpenSqliteStore(dir.path() + "/x.db", bad).status().code() ==
        absl::StatusCode::kInvalidArgument);

  const std::string text = dir.path() + "/notes.txt";
  std::ofstream(text) << "this is not a database, and it is long enough to have a header.....\n"
                      << std::string(200, 'x');
  Status s = OpenSqliteStore(text).status();
  CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(s.message().find(text) != std::string::npos);

  // A directory, and a file whose directory is missing, are named as such.
  s = OpenSqliteStore(dir.path()).status();
  CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(s.message() == "SQLite store " + dir.path() + ": is a directory, not a file");
  s = OpenSqliteStore(dir.path() + "/no/such/dir/state.db").status();
  CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(s.message() == "SQLite store " + dir.path() + "/no/such/dir/state.db: its directory " +
                           dir.path() + "/no/such/dir does not exist");
  s = OpenSqliteStore(text + "/state.db").status();
  CHECK(s.message() ==
        "SQLite store " + text + "/state.db: its directory " + text + " is not a directory");

  // A file from a newer fairgate (a higher schema version) is not touched.
  const std::string newer = dir.path() + "/newer.db";
  {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(newer.c_str(), &db) == SQLITE_OK);
    REQUIRE(sqlite3_exec(db, "PRAGMA user_version=99", nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(db);
  }
  s = OpenSqliteStore(newer).status();
  CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(s.message().find("schema version 99") != std::string::npos);
}

std::string Bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void Sql(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  CHECK(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK);
  sqlite3_close(db);
}

TEST_CASE("SqliteStore.AnotherProgramsDatabaseIsRefusedAndLeftUntouched") {
  testing::TempDir dir;
  struct Foreign {
    const char* what;
    const char* sql;
  };
  for (const Foreign& f :
       {Foreign{"tables of its own",
                "CREATE TABLE notes (id INTEGER, text TEXT);"
                "INSERT INTO notes VALUES (1, 'mine');"},
        Foreign{"and a schema version", "CREATE TABLE notes (id INTEGER); PRAGMA user_version=1;"},
        Foreign{"an application id of its own", "PRAGMA application_id=1234;"}}) {
    CAPTURE(f.what);
    const std::string path = dir.path() + "/" + f.what + ".db";
    Sql(path, f.sql);
    const std::string before = Bytes(path);
    Status s = OpenSqliteStore(path).status();
    CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
    CHECK(s.message().find("is another program's database, not fairgate's") != std::string::npos);
    CHECK(s.message().find("left untouched") != std::string::npos);
    CHECK(Bytes(path) == before);
    CHECK_FALSE(std::filesystem::exists(path + "-wal"));
  }
  // fairgate's own file, also one written before fairgate marked its files, opens; an empty file
  // (nothing in it to lose) becomes a store.
  const std::string own = dir.path() + "/own.db";
  REQUIRE(OpenSqliteStore(own).ok());
  Sql(own, "PRAGMA application_id=0;");
  auto reopened = OpenSqliteStore(own);
  REQUIRE_MESSAGE(reopened.ok(), reopened.status().message());
  const std::string empty = dir.path() + "/empty.db";
  std::ofstream{empty};
  CHECK(OpenSqliteStore(empty).ok());
}

// One number a query of the file gives (its first column of its first row), read by a connection
// of its own.
std::int64_t Number(const std::string& path, const char* sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  sqlite3_stmt* statement = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, sql, -1, &statement, nullptr) == SQLITE_OK);
  REQUIRE(sqlite3_step(statement) == SQLITE_ROW);
  const std::int64_t number = sqlite3_column_int64(statement, 0);
  sqlite3_finalize(statement);
  sqlite3_close(db);
  return number;
}

// The learned state's tables as schemas 1 and 2 made them.
constexpr const char* kEarlyLearnedTables = R"sql(
    CREATE TABLE estimates (type TEXT NOT NULL, id TEXT NOT NULL, seconds REAL NOT NULL,
      last_used REAL NOT NULL, PRIMARY KEY (type, id)) WITHOUT ROWID;
    CREATE TABLE fairness_keys (key TEXT NOT NULL PRIMARY KEY, accumulated_cost REAL NOT NULL,
      idle_since REAL NOT NULL) WITHOUT ROWID;
    CREATE TABLE schedules (type TEXT NOT NULL, id TEXT NOT NULL, last_run_end REAL NOT NULL,
      PRIMARY KEY (type, id)) WITHOUT ROWID;
)sql";

// A file of schema 1 (durable jobs numbered by AUTOINCREMENT) is moved to the current schema when
// opened: its jobs and learned state kept, and the sequence numbers it gave out never given again,
// also that of its newest job, removed before the migration.
TEST_CASE("SqliteStore.AFileOfSchema1IsMigratedKeepingItsJobsAndItsSequenceNumbers") {
  testing::TempDir dir;
  const std::string path = dir.path() + "/schema1.db";
  Sql(path, std::string(kEarlyLearnedTables) + R"sql(
    PRAGMA journal_mode=WAL;
    CREATE TABLE durable_jobs (
      sequence INTEGER PRIMARY KEY AUTOINCREMENT, type TEXT NOT NULL, id TEXT NOT NULL,
      fairness_key TEXT NOT NULL, payload BLOB NOT NULL, submitted_at REAL NOT NULL,
      attempts INTEGER NOT NULL DEFAULT 0, not_before REAL NOT NULL DEFAULT 0,
      last_error TEXT NOT NULL DEFAULT '', dead INTEGER NOT NULL DEFAULT 0);
    INSERT INTO durable_jobs (type, id, fairness_key, payload, submitted_at, attempts, not_before,
                              last_error)
      VALUES ('fetch', 'a.git', 'alice', x'00ff', 1000.5, 2, 2000.25, 'UNAVAILABLE: try later');
    INSERT INTO durable_jobs (type, id, fairness_key, payload, submitted_at, dead, last_error)
      VALUES ('fetch', 'b.git', 'bob', x'', 1001, 1, 'INTERNAL: broken');
    INSERT INTO durable_jobs (type, id, fairness_key, payload, submitted_at)
      VALUES ('fetch', 'c.git', 'carol', x'', 1002);
    DELETE FROM durable_jobs WHERE id = 'c.git';
    INSERT INTO estimates VALUES ('fetch', 'a.git', 4.5, 1000);
    PRAGMA user_version=1;
    PRAGMA application_id=1179083124;
  )sql");
  REQUIRE(Number(path, "SELECT seq FROM sqlite_sequence WHERE name = 'durable_jobs'") == 3);
  {
    auto store = OpenSqliteStore(path);
    REQUIRE_MESSAGE(store.ok(), store.status().ToString());
    std::vector<StoredJob> live = *(*store)->LiveJobs();
    REQUIRE(live.size() == 1);
    CHECK(live[0].sequence == 1u);
    CHECK(live[0].id == "a.git");
    CHECK(live[0].fairness_key == "alice");
    CHECK(live[0].payload == std::string("\0\xff", 2));
    CHECK(live[0].submitted_at == 1000.5);
    CHECK(live[0].attempts == 2u);
    CHECK(live[0].not_before == 2000.25);
    CHECK(live[0].last_error == "UNAVAILABLE: try later");
    std::vector<StoredJob> dead = *(*store)->DeadJobs();
    REQUIRE(dead.size() == 1);
    CHECK(dead[0].sequence == 2u);
    CHECK(dead[0].last_error == "INTERNAL: broken");
    CHECK(*(*store)->AddJob(testing::TestJob("d.git", "")) == 4u);  // not 3: c.git had it
    StatusOr<LearnedState> learned = (*store)->LoadLearned();
    REQUIRE(learned.ok());
    REQUIRE(learned->estimates.size() == 1);
    CHECK(learned->estimates[0].seconds == 4.5);
  }
  CHECK(Number(path, "PRAGMA user_version") == 3);
  CHECK(Number(path, "SELECT count(*) FROM sqlite_master WHERE sql LIKE '%AUTOINCREMENT%'") == 0);
  CHECK(Number(path, "SELECT count(*) FROM sqlite_master WHERE name = 'durable_jobs_dead'") == 1);
  // Opened again, it is not migrated twice.
  auto again = OpenSqliteStore(path);
  REQUIRE_MESSAGE(again.ok(), again.status().ToString());
  CHECK((*again)->LiveJobs()->size() == 2);
  CHECK(*(*again)->AddJob(testing::TestJob("e.git", "")) == 5u);
}

// A file of schema 2 gains schema 3's index of the dead jobs when opened, which its dead jobs'
// pages and count then read; its jobs are kept.
TEST_CASE("SqliteStore.AFileOfSchema2GainsTheDeadJobsIndex") {
  testing::TempDir dir;
  const std::string path = dir.path() + "/schema2.db";
  Sql(path, std::string(kEarlyLearnedTables) + R"sql(
    PRAGMA journal_mode=WAL;
    CREATE TABLE durable_jobs (
      sequence INTEGER PRIMARY KEY, type TEXT NOT NULL, id TEXT NOT NULL,
      fairness_key TEXT NOT NULL, payload BLOB NOT NULL, submitted_at REAL NOT NULL,
      attempts INTEGER NOT NULL DEFAULT 0, not_before REAL NOT NULL DEFAULT 0,
      last_error TEXT NOT NULL DEFAULT '', dead INTEGER NOT NULL DEFAULT 0);
    INSERT INTO durable_jobs (sequence, type, id, fairness_key, payload, submitted_at, dead,
                              last_error)
      VALUES (1, 'fetch', 'a.git', 'alice', x'', 1000, 1, 'INTERNAL: broken'),
             (2, 'fetch', 'b.git', 'bob', x'', 1001, 0, ''),
             (3, 'fetch', 'c.git', 'carol', x'', 1002, 1, 'INTERNAL: gone'),
             (4, '', '', '', x'', 0, 2, '');
    PRAGMA user_version=2;
    PRAGMA application_id=1179083124;
  )sql");
  {
    auto store = OpenSqliteStore(path);
    REQUIRE_MESSAGE(store.ok(), store.status().ToString());
    CHECK(*(*store)->CountDeadJobs() == 2u);
    std::vector<StoredJob> page = *(*store)->DeadJobsAfter(1, 10);
    REQUIRE(page.size() == 1);
    CHECK(page[0].id == "c.git");
    CHECK(page[0].last_error == "INTERNAL: gone");
    REQUIRE((*store)->LiveJobs()->size() == 1);
    CHECK(*(*store)->AddJob(testing::TestJob("d.git", "")) == 5u);  // not 4: the tombstone's
  }
  CHECK(Number(path, "PRAGMA user_version") == 3);
  CHECK(Number(path, "SELECT count(*) FROM sqlite_master WHERE name = 'durable_jobs_dead'") == 1);
}

// Sequence numbers never go back, whichever connection stores or removes the newest job, and a
// removed newest job (kept as a tombstone while it is the newest row) is seen by no read and
// changed by no write; its row leaves the file once a newer job's removal passes by.
TEST_CASE("SqliteStore.RemovingTheNewestJobFromAnyConnectionNeverLetsItsSequenceBackIn") {
  testing::TempDir dir;
  const std::string path = dir.path() + "/state.db";
  std::unique_ptr<Store> a = *OpenSqliteStore(path);
  std::unique_ptr<Store> b = *OpenSqliteStore(path);
  const std::uint64_t one = *a->AddJob(testing::TestJob("one.git", "secret-1"));
  const std::uint64_t two = *b->AddJob(testing::TestJob("two.git", "secret-2"));
  CHECK(two > one);
  REQUIRE(a->RemoveJob(two).ok());  // the newest, removed by the other connection
  const std::uint64_t three = *b->AddJob(testing::TestJob("three.git", ""));
  CHECK(three > two);
  REQUIRE(b->RemoveJobs({one, three})->size() == 2);  // three is now the newest
  for (Store* store : {a.get(), b.get()}) {
    CHECK(store->LiveJobs()->empty());
    CHECK(store->DeadJobs()->empty());
  }
  // The removed newest job: not begun, not deferred, not killed back into the dead jobs.
  CHECK(a->BeginAttempt(three).status().code() == absl::StatusCode::kNotFound);
  CHECK(a->DeferJob(three, 2000, "later").ok());
  CHECK(a->KillJob(three, "broken").ok());
  CHECK(a->LiveJobs()->empty());
  CHECK(a->DeadJobs()->empty());
  // two's row, a tombstone that no removal has passed since, holds none of the job's fields.
  CHECK(Number(path,
               "SELECT count(*) FROM durable_jobs WHERE payload = CAST('secret-2' AS BLOB) "
               "OR id = 'two.git'") == 0);
  a.reset();
  b.reset();
  // A new connection, after every job was removed: the next number is past every one given out.
  std::unique_ptr<Store> c = *OpenSqliteStore(path);
  const std::uint64_t four = *c->AddJob(testing::TestJob("four.git", ""));
  CHECK(four > three);
  REQUIRE(c->LiveJobs()->size() == 1);
  CHECK(c->LiveJobs()->front().id == "four.git");
  // The tombstones a and b left behind, found by the scan of the live jobs above (Recover makes
  // one), go at the first removal once a newer job is stored: only jobs remain.
  const std::uint64_t five = *c->AddJob(testing::TestJob("five.git", ""));
  REQUIRE(c->RemoveJob(four).ok());
  CHECK(Number(path, "SELECT count(*) FROM durable_jobs") == 1);
  CHECK(Number(path, "SELECT max(sequence) FROM durable_jobs") == static_cast<std::int64_t>(five));
}

TEST_CASE("SqliteStore.ALockHeldByAnotherProcessEndsInUnavailableAfterTheBusyTimeout") {
  testing::TempDir dir;
  const std::string path = dir.path() + "/state.db";
  SqliteStoreOptions options;
  options.busy_timeout = Seconds(0.05);
  auto store = *OpenSqliteStore(path, options);
  sqlite3* other = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &other) == SQLITE_OK);
  REQUIRE(sqlite3_exec(other, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK);
  Status s = store->AddJob(testing::TestJob("a.git", "")).status();
  CHECK(s.code() == absl::StatusCode::kUnavailable);
  CHECK(s.message().find("store a durable job") != std::string::npos);
  REQUIRE(sqlite3_exec(other, "ROLLBACK", nullptr, nullptr, nullptr) == SQLITE_OK);
  sqlite3_close(other);
  CHECK(store->AddJob(testing::TestJob("a.git", "")).ok());
}

// One handle at a time uses the file exclusively (Store::BeginExclusiveUse, which a scheduler's
// Recover calls): the lock file beside it says which process holds it, and the use ends with
// EndExclusiveUse or the handle. A lock file the store cannot use is a status naming it.
TEST_CASE("SqliteStore.OneHandleAtATimeUsesTheFileExclusively") {
  testing::TempDir dir;
  const std::string path = dir.path() + "/state.db";
  auto a = *OpenSqliteStore(path);
  auto b = *OpenSqliteStore(path);
  // Beside the file the path leads to (its links resolved).
  const std::string lock = std::filesystem::canonical(path).string() + "-lock";
  REQUIRE(a->BeginExclusiveUse().ok());
  std::ifstream holder(lock);
  std::string pid;
  holder >> pid;
  CHECK(pid == std::to_string(getpid()));
  Status refused = b->BeginExclusiveUse();
  CHECK(refused.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(refused.message() ==
        "SQLite store " + path + ": another scheduler works its durable jobs (" + lock +
            " is held by this process); one at a time may, and Recover may be called again once "
            "it is gone");
  refused = a->BeginExclusiveUse();  // a second scheduler given the same store
  CHECK(refused.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(refused.message().find("through this same store") != std::string::npos);
  // Both still read and write.
  REQUIRE(b->AddJob(testing::TestJob("a.git", "")).ok());
  CHECK(a->LiveJobs()->size() == 1);
  a->EndExclusiveUse();
  REQUIRE(b->BeginExclusiveUse().ok());
  b.reset();  // the handle's end ends its use
  REQUIRE(a->BeginExclusiveUse().ok());
  a->EndExclusiveUse();

  // The lock file cannot be opened: Unavailable, naming it and why (a permission's refusal is
  // FailedPrecondition, as the database file's is).
  const std::string blocked = dir.path() + "/blocked.db";
  auto c = *OpenSqliteStore(blocked);
  const std::string blocked_lock = std::filesystem::canonical(blocked).string() + "-lock";
  std::filesystem::create_directory(blocked_lock);
  refused = c->BeginExclusiveUse();
  CHECK(refused.code() == absl::StatusCode::kUnavailable);
  CHECK(refused.message() == "SQLite store " + blocked +
                                 ": cannot make sure that no other scheduler works its durable "
                                 "jobs: cannot open the lock file " +
                                 blocked_lock + ": Is a directory");
}

// A lock file the caller may not open: FailedPrecondition (the database file's own permissions
// give the same), naming it and why. Root opens any file: checked as an unprivileged user, in a
// child process, on a database it may write.
TEST_CASE("SqliteStore.ALockFileItMayNotOpenIsRefusedAsTheFileWouldBe") {
  testing::TempDir dir;
  REQUIRE(chmod(dir.path().c_str(), 0755) == 0);
  const std::string path = dir.path() + "/state.db";
  auto kept = *OpenSqliteStore(path);  // keeps the log's files, which the child writes too
  REQUIRE(kept->AddJob(testing::TestJob("a.git", "")).ok());
  for (const char* suffix : {"", "-wal", "-shm"}) {
    REQUIRE(chmod((path + suffix).c_str(), 0666) == 0);
  }
  const std::string lock = std::filesystem::canonical(path).string() + "-lock";
  std::ofstream(lock) << "1\n";
  REQUIRE(chmod(lock.c_str(), 0600) == 0);
  auto refused = [&] {
    StatusOr<std::unique_ptr<Store>> store = OpenSqliteStore(path);
    if (!store.ok()) return false;
    const Status s = (*store)->BeginExclusiveUse();
    return s.code() == absl::StatusCode::kFailedPrecondition &&
           s.message() == "SQLite store " + path +
                              ": cannot make sure that no other scheduler works its durable "
                              "jobs: cannot open the lock file " +
                              lock + ": Permission denied";
  };
  if (geteuid() != 0) {
    CHECK(refused());
    return;
  }
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(2);
    _exit(refused() ? 0 : 1);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

// Group commit: writes from many threads at once share transactions, and each caller learns
// its own write's result once the commit that holds it is done.
TEST_CASE("SqliteStore.ConcurrentWritesAreEachStoredOnceAndAnsweredWithTheirOwnResults") {
  testing::TempDir dir;
  auto store = *OpenSqliteStore(dir.path() + "/state.db");
  constexpr int kThreads = 8, kEach = 150;
  std::vector<std::vector<std::uint64_t>> sequences(kThreads);
  std::atomic<int> failures{0};
  auto in_threads = [&](const std::function<void(int)>& body) {
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) threads.emplace_back(body, t);
    for (std::thread& t : threads) t.join();
  };
  in_threads([&](int t) {
    for (int i = 0; i < kEach; ++i) {
      auto sequence = store->AddJob(
          testing::TestJob(std::to_string(t) + "-" + std::to_string(i), std::to_string(t)));
      if (!sequence.ok()) {
        ++failures;
        continue;
      }
      sequences[t].push_back(*sequence);
    }
  });
  REQUIRE(failures == 0);
  std::set<std::uint64_t> all;
  for (const auto& mine : sequences) {
    CHECK(std::is_sorted(mine.begin(), mine.end()));  // a caller's writes keep its order
    all.insert(mine.begin(), mine.end());
  }
  CHECK(all.size() == static_cast<std::size_t>(kThreads * kEach));
  auto live = *store->LiveJobs();
  REQUIRE(live.size() == all.size());
  for (const StoredJob& job : live) {  // each row is the job its sequence was returned for
    const std::size_t dash = job.id.find('-');
    const int t = std::stoi(job.id.substr(0, dash));
    const int i = std::stoi(job.id.substr(dash + 1));
    CHECK(sequences[t][i] == job.sequence);
  }
  // Attempts and removals from all threads at once; a write for a job that is not stored gets
  // its own NotFound, and the others in its group are unharmed.
  in_threads([&](int t) {
    for (std::uint64_t sequence : sequences[t]) {
      if (store->BeginAttempt(sequence).value_or(0) != 1) ++failures;
      if (!store->RemoveJob(sequence).ok()) ++failures;
    }
    if (store->BeginAttempt(1'000'000 + t).status().code() != absl::StatusCode::kNotFound) {
      ++failures;
    }
  });
  CHECK(failures == 0);
  CHECK(store->LiveJobs()->empty());
}

// What queued calls (Store::BeginAttemptsQueued, RemoveJobsQueued) were told, by job: each answer
// is kept, so that a job told twice shows. Wait returns once `n` jobs were told, or false after a
// minute (the bound only ends a test that hangs; the test waits for the answers themselves).
template <typename Result>
class Answers {
 public:
  using Told = StatusOr<std::vector<Result>>;
  std::function<void(Told)> For(std::uint64_t sequence) {
    return [this, sequence](Told told) {
      std::lock_guard lock(mutex_);
      told_[sequence].push_back(std::move(told));
      changed_.notify_all();
    };
  }
  bool Wait(std::size_t n) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, std::chrono::minutes(1), [&] { return told_.size() >= n; });
  }
  std::map<std::uint64_t, std::vector<Told>> Taken() {
    std::lock_guard lock(mutex_);
    return told_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::uint64_t, std::vector<Told>> told_;
};

// A group whose commit fails fails every write in it, callers' and queued, each with a status
// naming its own operation, and stores none of them.
TEST_CASE("SqliteStore.AGroupThatCannotCommitStoresNoneOfItsWrites") {
  testing::TempDir dir;
  const std::string path = dir.path() + "/state.db";
  SqliteStoreOptions options;
  options.busy_timeout = Seconds(0.2);
  auto store = *OpenSqliteStore(path, options);
  const std::uint64_t kept = *store->AddJob(testing::TestJob("kept.git", ""));
  sqlite3* other = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &other) == SQLITE_OK);
  REQUIRE(sqlite3_exec(other, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK);
  std::vector<Status> added(4), removed(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      added[t] = store->AddJob(testing::TestJob("lost.git", "")).status();
      removed[t] = store->RemoveJob(kept);
    });
  }
  Answers<StatusOr<std::uint32_t>> marks;
  Answers<Status> removals;
  store->BeginAttemptsQueued({kept}, marks.For(kept));
  store->RemoveJobsQueued({kept}, removals.For(kept));
  for (std::thread& t : threads) t.join();
  REQUIRE(marks.Wait(1));
  REQUIRE(removals.Wait(1));
  REQUIRE(sqlite3_exec(other, "ROLLBACK", nullptr, nullptr, nullptr) == SQLITE_OK);
  sqlite3_close(other);
  for (int t = 0; t < 4; ++t) {
    CHECK(added[t].code() == absl::StatusCode::kUnavailable);
    CHECK(added[t].message().find("store a durable job") != std::string::npos);
    CHECK(removed[t].code() == absl::StatusCode::kUnavailable);
    CHECK(removed[t].message().find("remove a durable job") != std::string::npos);
  }
  const Status marked = marks.Taken().at(kept).at(0).status();
  CHECK(marked.code() == absl::StatusCode::kUnavailable);
  CHECK(marked.message().find("mark attempts") != std::string::npos);
  const Status queued_removal = removals.Taken().at(kept).at(0).status();
  CHECK(queued_removal.code() == absl::StatusCode::kUnavailable);
  CHECK(queued_removal.message().find("remove durable jobs") != std::string::npos);
  auto live = *store->LiveJobs();
  REQUIRE(live.size() == 1);
  CHECK(live[0].sequence == kept);
  CHECK(live[0].attempts == 0);
}

// Queued marks and removals go in the groups of the callers' writes (or, with none, in groups the
// store leads itself), and each is told its own result once, after the commit that holds it.
TEST_CASE("SqliteStore.QueuedAttemptsAndRemovalsAreWrittenAndEachAnsweredOnce") {
  testing::TempDir dir;
  auto store = *OpenSqliteStore(dir.path() + "/state.db");
  REQUIRE(store->QueuesWrites());
  constexpr int kThreads = 8, kEach = 50;
  Answers<StatusOr<std::uint32_t>> marks;
  Answers<Status> removals;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Each job's mark is queued while the other threads store theirs.
      for (int i = 0; i < kEach; ++i) {
        auto sequence = store->AddJob(testing::TestJob(std::to_string(t * kEach + i), ""));
        if (!sequence.ok()) {
          ++failures;
          continue;
        }
        store->BeginAttemptsQueued({*sequence}, marks.For(*sequence));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  REQUIRE(failures == 0);
  const std::uint64_t missing = 1'000'000;
  store->BeginAttemptsQueued({missing}, marks.For(missing));
  REQUIRE(marks.Wait(kThreads * kEach + 1));
  std::vector<std::uint64_t> stored;
  for (const auto& [sequence, told] : marks.Taken()) {
    REQUIRE(told.size() == 1);
    REQUIRE(told[0].ok());  // the group committed
    REQUIRE(told[0]->size() == 1);
    const StatusOr<std::uint32_t>& attempts = (*told[0])[0];
    if (sequence == missing) {
      CHECK(attempts.status().code() == absl::StatusCode::kNotFound);
    } else {
      CHECK(attempts.value_or(0) == 1);
      stored.push_back(sequence);
    }
  }
  REQUIRE(stored.size() == static_cast<std::size_t>(kThreads * kEach));
  const std::vector<StoredJob> live = *store->LiveJobs();
  REQUIRE(live.size() == stored.size());
  for (const StoredJob& job : live) CHECK(job.attempts == 1);
  // The removals, queued from no thread that writes anything else: the store leads them.
  for (std::uint64_t sequence : stored) store->RemoveJobsQueued({sequence}, removals.For(sequence));
  REQUIRE(removals.Wait(stored.size()));
  for (const auto& [sequence, told] : removals.Taken()) {
    REQUIRE(told.size() == 1);
    REQUIRE(told[0].ok());
    REQUIRE(told[0]->size() == 1);
    CHECK((*told[0])[0].ok());
  }
  CHECK(store->LiveJobs()->empty());
}

// The store's destructor returns only once every queued write it was given is written and told.
TEST_CASE("SqliteStore.ClosingTheStoreWritesAndAnswersWhatIsQueued") {
  testing::TempDir dir;
  const std::string path = dir.path() + "/state.db";
  auto store = *OpenSqliteStore(path);
  constexpr int kJobs = 100;
  std::vector<std::uint64_t> sequences;
  for (int i = 0; i < kJobs; ++i) {
    sequences.push_back(*store->AddJob(testing::TestJob(std::to_string(i), "")));
  }
  Answers<Status> removals;
  for (std::uint64_t sequence : sequences) {
    store->RemoveJobsQueued({sequence}, removals.For(sequence));
  }
  store.reset();
  const auto told = removals.Taken();
  REQUIRE(told.size() == static_cast<std::size_t>(kJobs));
  for (const auto& [sequence, answers] : told) {
    REQUIRE(answers.size() == 1);
    REQUIRE(answers[0].ok());
    CHECK((*answers[0])[0].ok());
  }
  CHECK((*OpenSqliteStore(path))->LiveJobs()->empty());
}

// A store that does not queue writes (Store's defaults, here a store that forwards the other
// calls) answers a queued call on the caller's thread, before it returns, with what the call it
// stands for returned.
TEST_CASE("Store.QueuedCallsOfAStoreThatDoesNotQueueAreAnsweredBeforeTheyReturn") {
  testing::TempDir dir;
  testing::ForwardingStore store(std::shared_ptr<Store>(*OpenSqliteStore(dir.path() + "/s.db")));
  REQUIRE_FALSE(store.QueuesWrites());
  const std::uint64_t sequence = *store.AddJob(testing::TestJob("a.git", ""));
  Answers<StatusOr<std::uint32_t>> marks;
  Answers<Status> removals;
  store.BeginAttemptsQueued({sequence, sequence + 1}, marks.For(sequence));
  const auto marked = marks.Taken();  // at once: no wait
  REQUIRE(marked.size() == 1);
  REQUIRE(marked.at(sequence).at(0).ok());
  const auto& each = *marked.at(sequence).at(0);
  REQUIRE(each.size() == 2);
  CHECK(each[0].value_or(0) == 1);
  CHECK(each[1].status().code() == absl::StatusCode::kNotFound);
  store.RemoveJobsQueued({sequence}, removals.For(sequence));
  REQUIRE(removals.Taken().size() == 1);
  CHECK(store.LiveJobs()->empty());
}

}  // namespace sqlite_store_test
}  // namespace
}  // namespace fairgate

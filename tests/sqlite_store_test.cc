// The SQLite store on its own (fairgate/sqlite_store.h): what it keeps across reopening the file,
// and its statuses for files it cannot use.
#include "fairgate/sqlite_store.h"

#include <sqlite3.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "doctest/doctest.h"
#include "temp_dir.h"

namespace fairgate {
namespace {

StoredJob Job(std::string id, std::string payload) {
  StoredJob job;
  job.type = "fetch";
  job.id = std::move(id);
  job.fairness_key = "alice";
  job.payload = std::move(payload);
  job.submitted_at = 1000.5;
  return job;
}

TEST_CASE("SqliteStore.JobsKeepTheirFieldsOrderAndAttemptsAcrossReopening") {
  testing::TempDir dir;
  const std::string path = dir.path() + "/state.db";
  std::uint64_t first = 0, second = 0, third = 0;
  {
    auto store = *OpenSqliteStore(path);
    first = *store->AddJob(Job("a.git", std::string("\0binary\xff", 8)));
    second = *store->AddJob(Job("b.git", ""));
    third = *store->AddJob(Job("c.git", "x"));
    CHECK(first < second);
    CHECK(second < third);
    CHECK(*store->BeginAttempt(second) == 1u);
    CHECK(*store->BeginAttempt(second) == 2u);
    CHECK(store->DeferJob(second, 2000.25, "UNAVAILABLE: try later").ok());
    CHECK(store->RemoveJob(first).ok());
    CHECK(store->KillJob(third, "INTERNAL: broken").ok());
    CHECK(store->BeginAttempt(first).status().code() == absl::StatusCode::kNotFound);
    CHECK(store->BeginAttempt(third).status().code() == absl::StatusCode::kNotFound);
  }
  auto store = *OpenSqliteStore(path);
  auto live = *store->LiveJobs();
  REQUIRE(live.size() == 1);
  CHECK(live[0].sequence == second);
  CHECK(live[0].id == "b.git");
  CHECK(live[0].fairness_key == "alice");
  CHECK(live[0].attempts == 2u);
  CHECK(live[0].not_before == 2000.25);
  CHECK(live[0].last_error == "UNAVAILABLE: try later");
  CHECK(live[0].submitted_at == 1000.5);
  auto dead = *store->DeadJobs();
  REQUIRE(dead.size() == 1);
  CHECK(dead[0].sequence == third);
  CHECK(dead[0].payload == "x");
  CHECK(dead[0].last_error == "INTERNAL: broken");
  // Sequence numbers never go back, also after the newest job was removed and the file reopened.
  CHECK(store->RemoveJob(second).ok());
  CHECK(*store->AddJob(Job("d.git", "")) > third);
  // The binary payload came back byte for byte.
  auto again = *OpenSqliteStore(path);
  CHECK(again->LiveJobs()->back().id == "d.git");
}

TEST_CASE("SqliteStore.LearnedStateIsReplacedByNameAndForgottenPastItsTtl") {
  testing::TempDir dir;
  const std::string path = dir.path() + "/state.db";
  {
    auto store = *OpenSqliteStore(path);
    LearnedState state;
    state.estimates = {{"clone", "linux.git", 120, 500}, {"clone", "git.git", 3, 100}};
    state.keys = {{"alice", 40, 500}, {"bob", 2, 100}};
    state.schedules = {{"fetch", "linux.git", 450}};
    CHECK(store->SaveLearned(state, 0, 0).ok());
    LearnedState later;
    later.estimates = {{"clone", "linux.git", 130, 600}};
    later.schedules = {{"fetch", "linux.git", 650}};
    // Estimates used before 200 and keys idle since before 200 are forgotten.
    CHECK(store->SaveLearned(later, 200, 200).ok());
  }
  auto store = *OpenSqliteStore(path);
  LearnedState loaded = *store->LoadLearned();
  REQUIRE(loaded.estimates.size() == 1);
  CHECK(loaded.estimates[0] == SavedEstimate{"clone", "linux.git", 130, 600});
  REQUIRE(loaded.keys.size() == 1);
  CHECK(loaded.keys[0] == SavedKey{"alice", 40, 500});
  REQUIRE(loaded.schedules.size() == 1);
  CHECK(loaded.schedules[0] == SavedSchedule{"fetch", "linux.git", 650});
}

TEST_CASE("SqliteStore.FilesItCannotUseAreRefusedWithStatusesNamingThem") {
  testing::TempDir dir;
  CHECK(OpenSqliteStore("").status().code() == absl::StatusCode::kInvalidArgument);
  SqliteStoreOptions bad;
  bad.busy_timeout_seconds = -1;
  CHECK(OpenSqliteStore(dir.path() + "/x.db", bad).status().code() ==
        absl::StatusCode::kInvalidArgument);

  const std::string text = dir.path() + "/notes.txt";
  std::ofstream(text) << "this is not a database, and it is long enough to have a header.....\n"
                      << std::string(200, 'x');
  Status s = OpenSqliteStore(text).status();
  CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(s.message().find(text) != std::string::npos);

  CHECK(OpenSqliteStore(dir.path() + "/no/such/dir/state.db").status().code() ==
        absl::StatusCode::kFailedPrecondition);

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

TEST_CASE("SqliteStore.ALockHeldByAnotherProcessEndsInUnavailableAfterTheBusyTimeout") {
  testing::TempDir dir;
  const std::string path = dir.path() + "/state.db";
  SqliteStoreOptions options;
  options.busy_timeout_seconds = 0.05;
  auto store = *OpenSqliteStore(path, options);
  sqlite3* other = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &other) == SQLITE_OK);
  REQUIRE(sqlite3_exec(other, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK);
  Status s = store->AddJob(Job("a.git", "")).status();
  CHECK(s.code() == absl::StatusCode::kUnavailable);
  CHECK(s.message().find("store a durable job") != std::string::npos);
  REQUIRE(sqlite3_exec(other, "ROLLBACK", nullptr, nullptr, nullptr) == SQLITE_OK);
  sqlite3_close(other);
  CHECK(store->AddJob(Job("a.git", "")).ok());
}

}  // namespace
}  // namespace fairgate

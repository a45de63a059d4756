// The SQLite store on its own (fairgate/sqlite_store.h): what it keeps across reopening the file,
// and its statuses for files it cannot use.
#include "fairgate/sqlite_store.h"

#include <sqlite3.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "doctest/doctest.h"
#include "store_contract.h"
#include "temp_dir.h"

namespace fairgate {
namespace {

TEST_CASE("SqliteStore.KeepsJobsAcrossReopeningTheFile") {
  testing::TempDir dir;
  const std::string path = dir.path() + "/state.db";
  testing::CheckJobsAcrossConnections([&] { return *OpenSqliteStore(path); });
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

}  // namespace
}  // namespace fairgate

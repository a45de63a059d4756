// The PostgreSQL store (fairgate/postgres_store.h) against a real server started for each test
// (postgres_server.h): what it keeps, a scheduler that recovers from it, and a server that goes
// away and comes back.
#include "fairgate/postgres_store.h"

#include <atomic>
#include <string>
#include <vector>

#include "doctest/doctest.h"
#include "fairgate/scheduler.h"
#include "postgres_server.h"
#include "runtime_test_util.h"
#include "store_contract.h"
#include "test_job_types.h"

namespace fairgate {
namespace {

TEST_CASE("PostgresStore.KeepsJobsAcrossConnections") {
  testing::PostgresServer server;
  testing::CheckJobsAcrossConnections([&] { return *OpenPostgresStore(server.conninfo()); });
}

TEST_CASE("PostgresStore.LearnedStateIsReplacedByNameAndForgottenPastItsTtl") {
  testing::PostgresServer server;
  testing::CheckLearnedState([&] { return *OpenPostgresStore(server.conninfo()); });
}

TEST_CASE("PostgresStore.ASchedulerRecoversItsDurableJobsAndCostsFromIt") {
  testing::PostgresServer server;
  auto options = [&] {
    SchedulerOptions o;
    o.store = std::shared_ptr<Store>(*OpenPostgresStore(server.conninfo()));
    o.max_concurrency = 1;
    o.warn = [](std::string_view) {};
    return o;
  };
  {
    auto s = *Scheduler::Create(options());
    REQUIRE(s->RegisterType("fetch", testing::Type(4, 1)).ok());
    REQUIRE(s->RegisterDurable("fetch", [](const DurableJob&, const Context&) {
               return absl::OkStatus();
             }).ok());
    REQUIRE(s->Recover().ok());
    REQUIRE(s->RunSync(Context::Background(), "fetch", "warm", "carol", [](const Context&) {
               return absl::OkStatus();
             }).ok());
    REQUIRE(s->PauseType("fetch").ok());
    for (const char* id : {"c", "a", "b"}) REQUIRE(s->SubmitDurable("fetch", id, "", id).ok());
  }
  testing::Log ran;
  auto s = *Scheduler::Create(options());
  CHECK(s->AccumulatedCost("carol").has_value());
  REQUIRE(s->RegisterType("fetch", testing::Type(4, 1)).ok());
  REQUIRE(s->RegisterDurable("fetch", [&](const DurableJob& job, const Context&) {
             ran.Add(std::string(job.payload));
             return absl::OkStatus();
           }).ok());
  RecoveryReport report = *s->Recover();
  CHECK(report.queued == 3);
  REQUIRE(testing::Eventually([&] { return ran.entries().size() == 3; }));
  CHECK(ran.entries() == std::vector<std::string>{"c", "a", "b"});
}

TEST_CASE("PostgresStore.WhileTheServerIsDownCallsAreUnavailableAndItReconnectsWhenItReturns") {
  testing::PostgresServer server;
  CHECK(OpenPostgresStore("").status().code() == absl::StatusCode::kInvalidArgument);
  auto store = *OpenPostgresStore(server.conninfo());
  REQUIRE(store->AddJob(testing::TestJob("a.git", "")).ok());
  server.Stop();
  Status down = store->AddJob(testing::TestJob("b.git", "")).status();
  INFO(down.ToString());
  CHECK(down.code() == absl::StatusCode::kUnavailable);
  CHECK(down.message().find("PostgreSQL") != std::string::npos);
  CHECK(OpenPostgresStore(server.conninfo()).status().code() == absl::StatusCode::kUnavailable);
  server.Start();
  REQUIRE(store->AddJob(testing::TestJob("c.git", "")).ok());  // a fresh connection, at once
  auto live = *store->LiveJobs();
  REQUIRE(live.size() == 2);
  CHECK(live[0].id == "a.git");
  CHECK(live[1].id == "c.git");
}

}  // namespace
}  // namespace fairgate

// The PostgreSQL store (fairgate/postgres_store.h) when a connection breaks after the server
// committed a write and before its reply arrived (lost_reply_proxy.h): the store tries again on a
// new connection, and each write is applied once and reported as what it did, not as the
// refusal or the absence its second run would find.
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "doctest/doctest.h"
#include "fairgate/postgres_store.h"
#include "fairgate/scheduler.h"
#include "lost_reply_proxy.h"
#include "postgres_server.h"
#include "runtime_test_util.h"
#include "store_contract.h"
#include "test_job_types.h"

// In the runtime's suite so that the thread runtime's build (ThreadSanitizer) has these tests;
// each is a store's test that starts no scheduler: the suite "store" (postgres_store_test.cc).
TEST_SUITE_BEGIN("runtime");

namespace fairgate {
namespace {
namespace postgres_lost_reply_test {

const doctest::test_suite kStoreAlone("store");

// A store that reaches the server through `proxy`, as replica `name`.
std::unique_ptr<SharedStore> Through(const testing::LostReplyProxy& proxy,
                                     const std::string& name) {
  PostgresStoreOptions options;
  options.replica = name;
  StatusOr<std::unique_ptr<SharedStore>> store = OpenPostgresStore(proxy.conninfo(), options);
  REQUIRE_MESSAGE(store.ok(), store.status().ToString());
  return *std::move(store);
}

// The sequence numbers of the jobs stored, in order.
std::vector<std::uint64_t> Stored(const testing::PostgresServer& server) {
  const std::vector<StoredJob> live = *(*OpenPostgresStore(server.conninfo()))->LiveJobs();
  std::vector<std::uint64_t> sequences;
  for (const StoredJob& job : live) sequences.push_back(job.sequence);
  return sequences;
}

// A job, or a batch, whose statement committed is stored once, with the numbers it was stored
// under, not a second time by the statement's second run.
TEST_CASE("PostgresLostReply.JobsStoredWhenTheReplyIsLostAreStoredOnce" * kStoreAlone) {
  testing::PostgresServer server;
  testing::LostReplyProxy proxy(server.conninfo());
  auto store = Through(proxy, "a");
  proxy.LoseCommitOf("INSERT INTO fairgate_durable_jobs");
  StatusOr<std::uint64_t> one = store->AddJob(testing::StoredJobOf("fetch", "one.git", "k"));
  REQUIRE(proxy.losses() == 1);
  REQUIRE_MESSAGE(one.ok(), one.status().ToString());
  CHECK(Stored(server) == std::vector<std::uint64_t>{*one});

  proxy.LoseCommitOf("INSERT INTO fairgate_durable_jobs");
  StatusOr<std::vector<std::uint64_t>> batch = store->AddJobs(
      {testing::StoredJobOf("fetch", "b1.git", "k"), testing::StoredJobOf("fetch", "b2.git", "k"),
       testing::StoredJobOf("fetch", "b3.git", "j")});
  REQUIRE(proxy.losses() == 2);
  REQUIRE_MESSAGE(batch.ok(), batch.status().ToString());
  REQUIRE(batch->size() == 3);
  CHECK(Stored(server) == std::vector<std::uint64_t>{*one, (*batch)[0], (*batch)[1], (*batch)[2]});
  const std::vector<StoredJob> live = *store->LiveJobs();
  CHECK(live[1].id == "b1.git");
  CHECK(live[3].id == "b3.git");
}

// A job of the batch that another replica claimed, ran and removed before the store learned that
// the batch was stored is not stored again, and has no number to give (0); a job alone that went
// so is stored again: the store cannot tell it from one never stored, and it runs again, as at
// least once allows.
TEST_CASE("PostgresLostReply.AJobRemovedBeforeTheStoreLearnsItWasStored" * kStoreAlone) {
  testing::PostgresServer server;
  testing::LostReplyProxy proxy(server.conninfo());
  auto store = Through(proxy, "a");
  auto run_elsewhere = [&](const std::string& id) {
    return
        [&server, id] { server.Sql("DELETE FROM fairgate_durable_jobs WHERE id = '" + id + "'"); };
  };
  proxy.LoseCommitOf("INSERT INTO fairgate_durable_jobs", run_elsewhere("b1.git"));
  StatusOr<std::vector<std::uint64_t>> batch = store->AddJobs(
      {testing::StoredJobOf("fetch", "b1.git", "k"), testing::StoredJobOf("fetch", "b2.git", "k")});
  REQUIRE(proxy.losses() == 1);
  REQUIRE_MESSAGE(batch.ok(), batch.status().ToString());
  REQUIRE(batch->size() == 2);
  CHECK((*batch)[0] == 0u);
  CHECK(Stored(server) == std::vector<std::uint64_t>{(*batch)[1]});

  proxy.LoseCommitOf("INSERT INTO fairgate_durable_jobs", run_elsewhere("one.git"));
  StatusOr<std::uint64_t> one = store->AddJob(testing::StoredJobOf("fetch", "one.git", "k"));
  REQUIRE(proxy.losses() == 2);
  REQUIRE_MESSAGE(one.ok(), one.status().ToString());
  CHECK(Stored(server) == std::vector<std::uint64_t>{(*batch)[1], *one});
}

TEST_CASE("PostgresLostReply.ADeadJobRevivedOrRemovedIsSoOnceAndSaysSo" * kStoreAlone) {
  testing::PostgresServer server;
  testing::LostReplyProxy proxy(server.conninfo());
  auto store = Through(proxy, "a");
  const std::uint64_t revived = *store->AddJob(testing::StoredJobOf("fetch", "a.git", "k"));
  const std::uint64_t removed = *store->AddJob(testing::StoredJobOf("fetch", "b.git", "k"));
  REQUIRE(store->KillJob(revived, "INTERNAL: bad pack").ok());
  REQUIRE(store->KillJob(removed, "INTERNAL: gone").ok());

  proxy.LoseCommitOf("SET dead = false");
  StatusOr<StoredJob> job = store->ReviveJob(revived);
  REQUIRE(proxy.losses() == 1);
  REQUIRE_MESSAGE(job.ok(), job.status().ToString());
  CHECK(job->sequence == revived);
  CHECK(job->id == "a.git");

  proxy.LoseCommitOf("WHERE sequence = $1 AND dead");
  const Status gone = store->RemoveDeadJob(removed);
  REQUIRE(proxy.losses() == 2);
  CHECK_MESSAGE(gone.ok(), gone.ToString());

  auto reader = *OpenPostgresStore(server.conninfo());
  CHECK(reader->DeadJobs()->empty());
  const std::vector<StoredJob> live = *reader->LiveJobs();
  REQUIRE(live.size() == 1);
  CHECK(live[0].sequence == revived);
  CHECK(live[0].attempts == 0u);
}

// An attempt begun on the server (the job not claimed by this replica) is counted once.
TEST_CASE("PostgresLostReply.AnAttemptBegunOnTheServerIsCountedOnce" * kStoreAlone) {
  testing::PostgresServer server;
  testing::LostReplyProxy proxy(server.conninfo());
  auto store = Through(proxy, "a");
  const std::uint64_t sequence = *store->AddJob(testing::StoredJobOf("fetch", "a.git", "k"));
  proxy.LoseCommitOf("SET attempts = attempts + $3");
  StatusOr<std::uint32_t> attempt = store->BeginAttempt(sequence);
  REQUIRE(proxy.losses() == 1);
  REQUIRE_MESSAGE(attempt.ok(), attempt.status().ToString());
  CHECK(*attempt == 1u);
  CHECK(store->LiveJobs()->at(0).attempts == 1u);
}

// A claimed job's end (removed, alone or in a batch; deferred; killed; given back) whose reply
// is lost is done, not refused as if another replica held the job.
TEST_CASE("PostgresLostReply.AClaimedJobsEndIsDoneNotRefused" * kStoreAlone) {
  testing::PostgresServer server;
  testing::LostReplyProxy proxy(server.conninfo());
  auto store = Through(proxy, "a");
  std::vector<std::uint64_t> jobs;
  for (const char* id : {"removed", "in-a-batch", "deferred", "killed", "released"}) {
    jobs.push_back(*store->AddJob(testing::StoredJobOf("fetch", id, "k")));
  }
  REQUIRE(store->ClaimJobs({{"fetch", 1}}, jobs.size(), 60)->size() == jobs.size());

  proxy.LoseCommitOf("DELETE FROM fairgate_durable_jobs WHERE sequence = $1");
  Status status = store->RemoveJob(jobs[0]);
  REQUIRE(proxy.losses() == 1);
  CHECK_MESSAGE(status.ok(), status.ToString());

  proxy.LoseCommitOf("WITH gone AS (DELETE FROM fairgate_durable_jobs");
  StatusOr<std::vector<Status>> batch = store->RemoveJobs({jobs[1]});
  REQUIRE(proxy.losses() == 2);
  REQUIRE(batch.ok());
  CHECK_MESSAGE(batch->at(0).ok(), batch->at(0).ToString());

  proxy.LoseCommitOf("SET not_before = $3");
  status = store->DeferJob(jobs[2], 1e12, "INTERNAL: later");
  REQUIRE(proxy.losses() == 3);
  CHECK_MESSAGE(status.ok(), status.ToString());

  proxy.LoseCommitOf("SET dead = true");
  status = store->KillJob(jobs[3], "INTERNAL: bad pack");
  REQUIRE(proxy.losses() == 4);
  CHECK_MESSAGE(status.ok(), status.ToString());

  proxy.LoseCommitOf("SET attempts = attempts - $3, holder = NULL");
  status = store->ReleaseJob(jobs[4]);
  REQUIRE(proxy.losses() == 5);
  CHECK_MESSAGE(status.ok(), status.ToString());

  auto reader = *OpenPostgresStore(server.conninfo());
  const std::vector<StoredJob> live = *reader->LiveJobs();
  REQUIRE(live.size() == 2);
  CHECK(live[0].sequence == jobs[2]);
  CHECK(live[0].not_before == 1e12);
  CHECK(live[1].sequence == jobs[4]);
  CHECK(live[1].attempts == 0u);  // given back unbegun
  const std::vector<StoredJob> dead = *reader->DeadJobs();
  REQUIRE(dead.size() == 1);
  CHECK(dead[0].sequence == jobs[3]);
  // The job given back is another replica's to claim at once.
  CHECK(reader->ClaimJobs({{"fetch", 1}}, 5, 60)->size() == 1);
}

// A claim is one statement that claims jobs and counts their attempts: when its reply is lost,
// the replica gets the jobs that statement claimed (their attempts as before it, as a claim
// says), rather than claiming others and leaving these held by nobody who knows it until their
// leases lapse.
TEST_CASE("PostgresLostReply.AClaimWhoseReplyIsLostGivesItsJobs" * kStoreAlone) {
  testing::PostgresServer server;
  testing::LostReplyProxy proxy(server.conninfo());
  auto store = Through(proxy, "a");
  std::vector<std::uint64_t> jobs;
  for (const char* id : {"a.git", "b.git", "c.git"}) {
    jobs.push_back(*store->AddJob(testing::StoredJobOf("fetch", id, "k")));
  }
  proxy.LoseCommitOf("token = nextval('fairgate_lease_tokens')");
  StatusOr<std::vector<StoredJob>> claimed = store->ClaimJobs({{"fetch", 1}}, 2, 60);
  REQUIRE(proxy.losses() == 1);
  REQUIRE_MESSAGE(claimed.ok(), claimed.status().ToString());
  REQUIRE(claimed->size() == 2);
  CHECK(claimed->at(0).sequence == jobs[0]);
  CHECK(claimed->at(1).sequence == jobs[1]);
  CHECK(claimed->at(0).attempts == 0u);
  CHECK(*store->BeginAttempt(jobs[0]) == 1u);  // the claim's, begun without a round trip
  CHECK(store->RemoveJob(jobs[0]).ok());
  CHECK(store->RemoveJob(jobs[1]).ok());
  // The third job is still there for any replica, the next claim's.
  auto other = *OpenPostgresStore(server.conninfo(), {"b"});
  StatusOr<std::vector<StoredJob>> rest = other->ClaimJobs({{"fetch", 1}}, 2, 60);
  REQUIRE(rest.ok());
  REQUIRE(rest->size() == 1);
  CHECK(rest->at(0).sequence == jobs[2]);
}

// A claim whose types take fleet-wide leases is a transaction of several statements: when its
// COMMIT's reply is lost, the replica still gets the jobs it claimed, rather than claiming
// others and leaving these held by nobody who knows it until their leases lapse.
TEST_CASE("PostgresLostReply.AClaimWithLeasesWhoseCommitIsLostGivesItsJobs" * kStoreAlone) {
  testing::PostgresServer server;
  testing::LostReplyProxy proxy(server.conninfo());
  auto store = Through(proxy, "a");
  std::vector<std::uint64_t> jobs;
  for (const char* id : {"a.git", "b.git", "c.git", "d.git"}) {
    jobs.push_back(*store->AddJob(testing::StoredJobOf("fetch", id, "k")));
  }
  ClaimableType capped{"fetch", 1};
  capped.fleet_cap = 2;
  proxy.LoseCommitOf("pg_advisory_xact_lock(727125, 0)");
  StatusOr<std::vector<StoredJob>> claimed = store->ClaimJobs({capped}, 2, 60);
  REQUIRE(proxy.losses() == 1);
  REQUIRE_MESSAGE(claimed.ok(), claimed.status().ToString());
  REQUIRE(claimed->size() == 2);
  CHECK(claimed->at(0).sequence == jobs[0]);
  CHECK(claimed->at(1).sequence == jobs[1]);
  // They are this replica's: it removes them, and the cap's two slots go back with them.
  StatusOr<std::vector<Status>> removed = store->RemoveJobs({jobs[0], jobs[1]});
  REQUIRE(removed.ok());
  for (const Status& s : *removed) CHECK_MESSAGE(s.ok(), s.ToString());
  auto other = *OpenPostgresStore(server.conninfo(), {"b"});
  StatusOr<std::vector<StoredJob>> rest = other->ClaimJobs({capped}, 2, 60);
  REQUIRE(rest.ok());
  CHECK(rest->size() == 2);
}

// A fleet-wide lease's slot taken when the reply is lost is the caller's, not held by nobody who
// knows it while the caller is told every slot is taken.
TEST_CASE("PostgresLostReply.AResourcesSlotTakenWhenTheReplyIsLostIsTheCallers" * kStoreAlone) {
  testing::PostgresServer server;
  testing::LostReplyProxy proxy(server.conninfo());
  auto store = Through(proxy, "a");
  auto other = *OpenPostgresStore(server.conninfo(), {"b"});
  proxy.LoseCommitOf("INSERT INTO fairgate_resource_leases");
  StatusOr<std::uint64_t> token = store->AcquireResource("repo", "linux.git", 1, 60);
  REQUIRE(proxy.losses() == 1);
  REQUIRE_MESSAGE(token.ok(), token.status().ToString());
  CHECK(*token != 0u);
  CHECK(*other->AcquireResource("repo", "linux.git", 1, 60) == 0u);  // the one slot is held
  REQUIRE(store->ReleaseResource("repo", "linux.git", *token).ok());
  CHECK(*other->AcquireResource("repo", "linux.git", 1, 60) > *token);
}

// What a replica charged a key is added to the fleet's total once.
TEST_CASE("PostgresLostReply.AKeysCostSharedWhenTheCommitIsLostIsAddedOnce" * kStoreAlone) {
  testing::PostgresServer server;
  testing::LostReplyProxy proxy(server.conninfo());
  auto store = Through(proxy, "a");
  proxy.LoseCommitOf("INSERT INTO fairgate_keys");
  StatusOr<std::vector<SavedKey>> totals = store->ShareKeyCosts({{"k", 2.5, 0}}, {"k"});
  REQUIRE(proxy.losses() == 1);
  REQUIRE_MESSAGE(totals.ok(), totals.status().ToString());
  REQUIRE(totals->size() == 1);
  CHECK(totals->at(0).accumulated_cost == 2.5);
  auto other = *OpenPostgresStore(server.conninfo(), {"b"});
  CHECK(other->ShareKeyCosts({}, {"k"})->at(0).accumulated_cost == 2.5);
}

// A replica whose calls lose the reply of their first try again and again (each on a new
// connection after a loss is answered) still runs each job to its end exactly once: stored once,
// claimed by the replica whose claim's reply was lost rather than left to lapse, each attempt
// counted once (a job failing its first attempt runs its second as attempt 2), deferred and
// removed as the replica was told, and keys' costs shared once.
TEST_CASE("PostgresLostReply.AReplicaWhoseRepliesAreLostRunsEachJobOnce") {
  testing::Watchdog watchdog("PostgresLostReply.AReplicaWhoseRepliesAreLostRunsEachJobOnce",
                             std::chrono::seconds(240));
  testing::PostgresServer server;
  testing::LostReplyProxy proxy(server.conninfo());
  constexpr int kBatches = 12, kBatchSize = 10;
  // Stored before any replica claims, so that no job can be run and removed before its store
  // learns that it was stored (the one case where a job is stored again).
  proxy.LoseEveryCommitOf({"INSERT INTO fairgate_durable_jobs"});
  {
    auto loader = Through(proxy, "loader");
    for (int b = 0; b < kBatches; ++b) {
      std::vector<StoredJob> batch;
      for (int i = 0; i < kBatchSize; ++i) {
        batch.push_back(testing::StoredJobOf("fetch", "j" + std::to_string(b * kBatchSize + i),
                                             "k" + std::to_string(i % 3)));
      }
      StatusOr<std::vector<std::uint64_t>> stored = loader->AddJobs(batch);
      REQUIRE_MESSAGE(stored.ok(), stored.status().ToString());
    }
  }
  const int stored_losses = proxy.losses();
  CHECK(stored_losses >= kBatches / 2);  // every other: a loss, then a new connection's first
  const std::vector<StoredJob> stored = *(*OpenPostgresStore(server.conninfo()))->LiveJobs();
  REQUIRE(stored.size() == static_cast<std::size_t>(kBatches * kBatchSize));

  proxy.LoseEveryCommitOf({"token = nextval('fairgate_lease_tokens')",  // a claim
                           "WITH gone AS (DELETE",                      // removals
                           "DELETE FROM fairgate_durable_jobs WHERE sequence = $1",
                           "SET not_before = $3",          // a retry's deferral
                           "INSERT INTO fairgate_keys"});  // keys' costs shared
  testing::Log ran;
  SchedulerOptions o;
  o.persistence.store = std::shared_ptr<Store>(Through(proxy, "a"));
  o.runtime.warn = [](std::string_view) {};
  o.rule.max_concurrency = 4;
  o.fleet.claim_interval = Seconds(0.05);
  auto scheduler = *Scheduler::Create(o);
  REQUIRE(scheduler->RegisterType("fetch", testing::Type(4, 4)).ok());
  REQUIRE(scheduler
              ->RegisterDurable(
                  "fetch",
                  [&](const DurableJob& job, const Context&) {
                    ran.Add(std::string(job.id) + "#" + std::to_string(job.attempt));
                    // Every fourth job fails its first attempt.
                    const bool fails = std::stoi(std::string(job.id.substr(1))) % 4 == 0;
                    if (fails && job.attempt == 1) return absl::InternalError("once");
                    return absl::OkStatus();
                  },
                  RetryPolicy{.max_attempts = 3,
                              .initial_backoff = Seconds(0.01),
                              .max_backoff = Seconds(0.01)})
              .ok());
  REQUIRE(scheduler->Recover().ok());
  const std::size_t runs = kBatches * kBatchSize * 5 / 4;
  REQUIRE(testing::Eventually([&] { return ran.entries().size() >= runs; },
                              std::chrono::milliseconds(120000)));
  auto reader = *OpenPostgresStore(server.conninfo());
  REQUIRE(testing::Eventually([&] { return reader->LiveJobs()->empty(); },
                              std::chrono::milliseconds(60000)));
  proxy.StopLosing();
  scheduler.reset();
  CHECK(proxy.losses() - stored_losses >= 10);
  CHECK(reader->DeadJobs()->empty());
  std::map<std::string, int> times;
  for (const std::string& entry : ran.entries()) ++times[entry];
  CHECK(ran.entries().size() == runs);
  for (int j = 0; j < kBatches * kBatchSize; ++j) {
    const std::string id = "j" + std::to_string(j);
    CHECK_MESSAGE(times[id + "#1"] == 1, id);
    CHECK_MESSAGE(times[id + "#2"] == (j % 4 == 0 ? 1 : 0), id);
  }
}

}  // namespace postgres_lost_reply_test
}  // namespace
}  // namespace fairgate

TEST_SUITE_END();

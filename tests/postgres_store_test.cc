// The PostgreSQL store (fairgate/postgres_store.h) against a real server started for each test
// (postgres_server.h): what it keeps, a scheduler that recovers from it, and a server that goes
// away and comes back.
#include "fairgate/postgres_store.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "doctest/doctest.h"
#include "fairgate/scheduler.h"
#include "fairgate/sqlite_store.h"
#include "forwarding_store.h"
#include "postgres_server.h"
#include "runtime_test_util.h"
#include "store/postgres_connection.h"
#include "store/postgres_statements.h"
#include "store_contract.h"
#include "temp_dir.h"
#include "test_job_types.h"

// The runtime's tests: CTest labels them "runtime", and runs them again on other pools and
// under ThreadSanitizer (tests/CMakeLists.txt).
TEST_SUITE_BEGIN("runtime");

namespace fairgate {
namespace {
namespace postgres_store_test {

// A test of the store alone, which starts no scheduler: in the doctest suite "store" instead,
// which CTest labels "store" and runs under ThreadSanitizer with the runtime's tests (the store is
// called from many threads) but not again on other pools (it runs on none).
const doctest::test_suite kStoreAlone("store");

// Runs a statement that returns no rows on a connection of the test's own: whether it succeeded.
bool Command(PGconn* connection, const char* sql) {
  PGresult* r = PQexec(connection, sql);
  const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
  PQclear(r);
  return ok;
}

// The tests' own server (tests/postgres_server.h) is stopped and its directory removed when the
// process that started it dies without unwinding: killed, as ctest kills a test at its timeout.
TEST_CASE("PostgresServer.TheServerOfAKilledTestIsStoppedAndRemoved" * kStoreAlone) {
  int fds[2];  // close-on-exec: the server the child starts holds no end of it
  REQUIRE(pipe2(fds, O_CLOEXEC) == 0);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    close(fds[0]);
    try {
      testing::PostgresServer server;
      const std::string said = server.directory() + "\n" + server.conninfo() + "\n";
      if (write(fds[1], said.data(), said.size()) != static_cast<ssize_t>(said.size())) _exit(1);
      kill(getpid(), SIGKILL);  // with `server` still in scope: nothing of it unwinds
    } catch (...) {
    }
    _exit(1);
  }
  close(fds[1]);
  std::string said;
  char buffer[512];
  for (ssize_t n; (n = read(fds[0], buffer, sizeof buffer)) > 0;) said.append(buffer, n);
  close(fds[0]);
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFSIGNALED(status));
  const std::size_t newline = said.find('\n');
  REQUIRE(newline != std::string::npos);
  const std::string directory = said.substr(0, newline);
  const std::string conninfo = said.substr(newline + 1, said.size() - newline - 2);
  REQUIRE(!directory.empty());
  CHECK(testing::Eventually([&] { return !std::filesystem::exists(directory); },
                            std::chrono::seconds(30)));
  PGconn* c = PQconnectdb((conninfo + " connect_timeout=5").c_str());
  CHECK(PQstatus(c) != CONNECTION_OK);
  PQfinish(c);
}

TEST_CASE("PostgresStore.KeepsJobsAcrossConnections" * kStoreAlone) {
  testing::PostgresServer server;
  testing::CheckJobsAcrossConnections([&] { return *OpenPostgresStore(server.conninfo()); });
}

// A replica that starts beside others at work takes no lock on the tables they write: the schema
// is made only when the database's is older (the CI found two schedulers' opening deadlock with
// each other's claims while the second ran the DDL again). Here another session holds what a
// claim holds on the jobs table, in an open transaction; the store opens all the same, and that
// session's transaction is still there to commit (it would be cut after its 20 s idle limit had
// the opening waited for it).
TEST_CASE("PostgresStore.AStoreOpeningBesideAFleetAtWorkTakesNoLockOnItsTables" * kStoreAlone) {
  testing::PostgresServer server;
  REQUIRE(OpenPostgresStore(server.conninfo(), {"first"}).ok());  // makes the schema
  PGconn* busy = PQconnectdb(server.conninfo().c_str());
  REQUIRE(PQstatus(busy) == CONNECTION_OK);
  auto exec = [&](const char* sql) { return Command(busy, sql); };
  REQUIRE(exec("SET idle_in_transaction_session_timeout = '20s'"));
  REQUIRE(exec("BEGIN"));
  REQUIRE(exec("LOCK TABLE fairgate_durable_jobs IN ROW EXCLUSIVE MODE"));
  auto second = OpenPostgresStore(server.conninfo(), {"second"});
  CHECK(second.ok());
  CHECK(exec("COMMIT"));
  PQfinish(busy);
}

TEST_CASE("PostgresStore.StoresABatchWholeInItsOrder" * kStoreAlone) {
  testing::PostgresServer server;
  testing::CheckBatches([&] { return *OpenPostgresStore(server.conninfo()); });
}

// Single jobs stored from many threads at once on one store share statements (a group a commit,
// store/grouped_writes.h): each call's answer is its own job's sequence, every job is stored once
// with its fields, and a job the server refuses (a key too long for an index entry: the
// statement of its group fails whole) fails its own call only.
TEST_CASE("PostgresStore.JobsStoredFromManyThreadsAtOnceAreEachStoredOnceAsTheirOwn" *
          kStoreAlone) {
  testing::PostgresServer server;
  auto store = *OpenPostgresStore(server.conninfo());
  constexpr int kThreads = 8, kEach = 40;
  // Past the largest entry of a B-tree index (about 2.7 kB), and not compressible to fit.
  std::string refused_key;
  std::mt19937 random(49);
  for (int i = 0; i < 9000; ++i) refused_key += static_cast<char>('a' + random() % 26);
  auto job_of = [&](int thread, int i) {
    StoredJob job = testing::TestJob("t" + std::to_string(thread) + "." + std::to_string(i),
                                     "payload " + std::to_string(thread * kEach + i));
    job.fairness_key = thread == 3 && i == 20 ? refused_key : "key" + std::to_string(i % 5);
    return job;
  };
  std::vector<std::vector<StatusOr<std::uint64_t>>> answers(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) answers[t].push_back(store->AddJob(job_of(t, i)));
    });
  }
  for (std::thread& thread : threads) thread.join();
  StatusOr<std::vector<StoredJob>> live = store->LiveJobs();
  REQUIRE(live.ok());
  std::map<std::uint64_t, StoredJob> stored;
  for (const StoredJob& job : *live) stored[job.sequence] = job;
  CHECK(stored.size() == live->size());
  CHECK(stored.size() == static_cast<std::size_t>(kThreads * kEach - 1));
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kEach; ++i) {
      const StoredJob want = job_of(t, i);
      const StatusOr<std::uint64_t>& answer = answers[t][i];
      if (t == 3 && i == 20) {
        CHECK_FALSE(answer.ok());
        CHECK(answer.status().message().find("store a durable job") != std::string::npos);
        continue;
      }
      REQUIRE(answer.ok());
      auto it = stored.find(*answer);
      REQUIRE(it != stored.end());
      CHECK(it->second.id == want.id);
      CHECK(it->second.fairness_key == want.fairness_key);
      CHECK(it->second.payload == want.payload);
    }
  }
}

// PostgreSQL's text holds no NUL byte (and libpq would cut a parameter at one): such a name is
// refused, in a batch naming the job, and nothing of the batch is stored.
TEST_CASE("PostgresStore.ANameWithANulByteIsRefusedNotCutShort" * kStoreAlone) {
  testing::PostgresServer server;
  auto store = *OpenPostgresStore(server.conninfo());
  Status single = store->AddJob(testing::TestJob(std::string("a\0b", 3), "")).status();
  CHECK(single.code() == absl::StatusCode::kInvalidArgument);
  CHECK(single.message().find("NUL") != std::string::npos);
  StoredJob with_nul_key = testing::TestJob("b.git", "");
  with_nul_key.fairness_key = std::string("al\0ice", 6);
  Status batch =
      store->AddJobs({testing::TestJob("a.git", std::string("\0", 1)), with_nul_key}).status();
  CHECK(batch.code() == absl::StatusCode::kInvalidArgument);
  CHECK(batch.message().find("job 1 of the batch") != std::string::npos);
  CHECK(batch.message().find("fairness key") != std::string::npos);
  CHECK(store->LiveJobs()->empty());
}

TEST_CASE("PostgresStore.DeadJobsAreRevivedOrRemoved" * kStoreAlone) {
  testing::PostgresServer server;
  testing::CheckDeadJobsAreRevivedOrRemoved([&] { return *OpenPostgresStore(server.conninfo()); });
}

TEST_CASE("PostgresStore.DeadJobsArePaged" * kStoreAlone) {
  testing::PostgresServer server;
  testing::CheckDeadJobsArePaged([&] { return *OpenPostgresStore(server.conninfo()); });
}

// A dead job retried on one replica is claimed and run by a replica; its key has a head again
// (the claim finds it through the keys' heads).
TEST_CASE("PostgresStore.ADeadJobRetriedOnOneReplicaRunsAgain") {
  testing::PostgresServer server;
  std::atomic<bool> failing{true};
  testing::Log ran;
  auto replica = [&] {
    SchedulerOptions o;
    o.persistence.store = std::shared_ptr<Store>(*OpenPostgresStore(server.conninfo()));
    o.runtime.warn = [](std::string_view) {};
    auto s = *Scheduler::Create(o);
    REQUIRE(s->RegisterType("fetch", testing::Type(4, 1)).ok());
    REQUIRE(s->RegisterDurable(
                 "fetch",
                 [&](const DurableJob& job, const Context&) {
                   ran.Add(std::string(job.id) + "#" + std::to_string(job.attempt));
                   if (failing) return absl::InternalError("bad pack");
                   return absl::OkStatus();
                 },
                 RetryPolicy{.max_attempts = 1})
                .ok());
    REQUIRE(s->Recover().ok());
    return s;
  };
  auto first = replica();
  auto second = replica();
  const std::uint64_t sequence = *first->SubmitDurable({TypeName("fetch"), JobId("a.git")}, "");
  REQUIRE(testing::Eventually([&] { return first->DeadJobs()->size() == 1; }));
  CHECK(ran.entries() == std::vector<std::string>{"a.git#1"});
  failing = false;
  REQUIRE(second->RetryDeadJob(sequence).ok());
  REQUIRE(testing::Eventually([&] { return ran.entries().size() == 2; }));
  CHECK(ran.entries()[1] == "a.git#1");  // its attempts counted from 0 again
  auto reader = *OpenPostgresStore(server.conninfo());
  REQUIRE(testing::Eventually(
      [&] { return first->DeadJobs()->empty() && reader->LiveJobs()->empty(); }));
  CHECK(first->RetryDeadJob(sequence).code() == absl::StatusCode::kNotFound);
}

TEST_CASE("PostgresStore.AJobAboveMaxJobBytesIsRefusedAndNothingOfItStored" * kStoreAlone) {
  testing::PostgresServer server;
  PostgresStoreOptions bounded;
  bounded.max_job_bytes = 100;
  testing::CheckJobsAboveTheBoundAreRefused(
      [&] { return *OpenPostgresStore(server.conninfo(), bounded); });
  for (std::size_t bad : {std::size_t{0}, kPostgresMaxJobBytes + 1}) {
    PostgresStoreOptions options;
    options.max_job_bytes = bad;
    const Status refused = OpenPostgresStore(server.conninfo(), options).status();
    CHECK(refused.code() == absl::StatusCode::kInvalidArgument);
    CHECK_MESSAGE(
        refused.message().find("max_job_bytes must be in [1, 500000000]") != std::string::npos,
        refused.message());
  }
}

// By default a job is at most what a claim can read back (its payload as hex text, in a row of
// at most 1 GiB). A job of 600 MB was stored, and then every claim that reached it failed
// ("invalid memory alloc request size"), so that the replica claimed nothing more; one of 1.1 GB
// closed the connection (Unavailable, as if the server were down). A batch is one statement,
// which carries its payloads as hex text: one that would carry more than 1,000,000,000 bytes is
// refused before anything is sent, though each of its jobs is within the bound.
TEST_CASE("PostgresStore.AJobOrBatchTooLargeToStoreAndReadBackIsRefusedBeforeItIsSent" *
          kStoreAlone) {
  testing::PostgresServer server;
  auto store = *OpenPostgresStore(server.conninfo());
  const Status refused =
      store->AddJob(testing::TestJob("huge.git", std::string(kPostgresMaxJobBytes, 'p'))).status();
  CHECK(refused.code() == absl::StatusCode::kInvalidArgument);
  CHECK(refused.message().find("more than max_job_bytes (500000000)") != std::string::npos);
  std::vector<StoredJob> batch;
  for (const char* id : {"a.git", "b.git", "c.git"}) {
    batch.push_back(testing::TestJob(id, std::string(200'000'000, 'p')));
  }
  const Status too_much = store->AddJobs(batch).status();
  CHECK(too_much.code() == absl::StatusCode::kInvalidArgument);
  CHECK_MESSAGE(too_much.message().find("its 3 jobs take ") != std::string::npos,
                too_much.message());
  CHECK(too_much.message().find("store them in smaller batches") != std::string::npos);
  batch.clear();
  CHECK(store->LiveJobs()->empty());
  CHECK(store->AddJob(testing::TestJob("small.git", "")).ok());
}

// An attempt's error quotes whatever a handler's status says. One that was not UTF-8 failed the
// statement that deferred or killed its job ("invalid byte sequence for encoding UTF8"): the
// job stayed held until its lease lapsed, its error lost, and its retries came a lease late.
// libpq cut one at a NUL byte. Each such byte is kept as U+FFFD.
TEST_CASE("PostgresStore.AnAttemptsErrorThatIsNotUtf8IsKeptReadable" * kStoreAlone) {
  testing::PostgresServer server;
  auto store = *OpenPostgresStore(server.conninfo());
  const std::uint64_t deferred = *store->AddJob(testing::TestJob("a.git", ""));
  const std::uint64_t killed = *store->AddJob(testing::TestJob("b.git", ""));
  const std::string error("INTERNAL: bad \xff\xfe byte, a NUL \0 and \xE2\x82\xAC", 38);
  const std::string kept = "INTERNAL: bad \uFFFD\uFFFD byte, a NUL \uFFFD and \u20AC";
  const Status deferral = store->DeferJob(deferred, 1.5, error);
  CHECK_MESSAGE(deferral.ok(), deferral.ToString());
  const Status death = store->KillJob(killed, error);
  CHECK_MESSAGE(death.ok(), death.ToString());
  const std::vector<StoredJob> live = *store->LiveJobs();
  REQUIRE(live.size() == 1);
  CHECK(live[0].not_before == 1.5);
  CHECK(live[0].last_error == kept);
  const std::vector<StoredJob> dead = *store->DeadJobs();
  REQUIRE(dead.size() == 1);
  CHECK(dead[0].last_error == kept);
}

// PostgreSQL's text is UTF-8 without a NUL byte. A durable job named otherwise is refused; a key,
// group, type or id of a replica's learned state that is not stays in the replica, and the
// others are shared and saved: passed to the statement, it failed the whole share or flush, at
// every try for as long as the replica kept it (one odd client's key stopped the fleet's
// sharing of every key's cost).
TEST_CASE("PostgresStore.NamesItsTextCannotHoldStayInTheReplicaAndStopNoOtherName" * kStoreAlone) {
  testing::PostgresServer server;
  auto store = *OpenPostgresStore(server.conninfo(), {"a"});
  const std::string not_utf8 = "client\xff";
  const std::string surrogate = "\xed\xa0\x80";  // U+D800, which UTF-8 cannot encode
  const std::string nul("cli\0ent", 7);

  Status refused = store->AddJob(testing::StoredJobOf("fetch", "r", not_utf8)).status();
  CHECK(refused.code() == absl::StatusCode::kInvalidArgument);
  CHECK(refused.message().find("fairness key is not UTF-8") != std::string::npos);
  refused = store->AddJob(testing::StoredJobOf("fetch", surrogate, "alice")).status();
  CHECK(refused.message().find("id is not UTF-8") != std::string::npos);
  REQUIRE(store->AddJob(testing::StoredJobOf("fetch", "r", "alice")).ok());

  const StatusOr<std::vector<SavedKey>> keys = store->ShareKeyCosts(
      {{"alice", 2, 0}, {not_utf8, 3, 0}, {nul, 4, 0}}, {"alice", not_utf8, nul});
  REQUIRE_MESSAGE(keys.ok(), keys.status().ToString());
  REQUIRE(keys->size() == 1);
  CHECK(keys->at(0).key == "alice");
  CHECK(keys->at(0).accumulated_cost == 2);
  const StatusOr<std::vector<SavedKey>> groups =
      store->ShareGroupCosts({{"farm", 5, 0}, {surrogate, 1, 0}}, {"farm", surrogate});
  REQUIRE_MESSAGE(groups.ok(), groups.status().ToString());
  REQUIRE(groups->size() == 1);
  CHECK(groups->at(0).key == "farm");

  LearnedState state;
  state.estimates = {{"fetch", "r", 1.5, 100}, {"fetch", not_utf8, 2, 100}, {nul, "r", 3, 100}};
  state.keys = {{"bob", 7, 100}, {nul, 8, 100}};
  state.schedules = {{"gc", "r", 50}, {"gc", surrogate, 60}};
  const Status saved = store->SaveLearned(state, 0, 0);
  REQUIRE_MESSAGE(saved.ok(), saved.ToString());
  CHECK(server.Sql("SELECT string_agg(type || '/' || id || '=' || seconds, ',') "
                   "FROM fairgate_estimates") == "fetch/r=1.5");
  CHECK(server.Sql("SELECT string_agg(key || '=' || accumulated_cost, ',' ORDER BY key) "
                   "FROM fairgate_keys") == "alice=2,bob=7");
  CHECK(server.Sql("SELECT string_agg(type || '/' || id, ',') FROM fairgate_schedules") == "gc/r");

  // A claim passes over a type of such a name (it has no stored job) and claims the others'.
  const StatusOr<std::vector<StoredJob>> claimed =
      store->ClaimJobs({{"fetch", 1}, {not_utf8, 1}}, 10, 60);
  REQUIRE_MESSAGE(claimed.ok(), claimed.status().ToString());
  REQUIRE(claimed->size() == 1);
  CHECK(claimed->at(0).fairness_key == "alice");

  const StatusOr<TokenLease> tokens = store->TakeTokens(not_utf8, RateLimit{1, 1}, 1);
  CHECK(tokens.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(tokens.status().message().find("UTF-8") != std::string::npos);
  const Status replica = OpenPostgresStore(server.conninfo(), {.replica = nul}).status();
  CHECK(replica.code() == absl::StatusCode::kInvalidArgument);
  CHECK(replica.message().find("replica's name must be UTF-8") != std::string::npos);
}

TEST_CASE("PostgresStore.LearnedStateIsReplacedByNameAndForgottenPastItsTtl" * kStoreAlone) {
  testing::PostgresServer server;
  testing::CheckLearnedState([&] { return *OpenPostgresStore(server.conninfo()); });
}

// Replicas flush the estimates and schedules of the same jobs at once, each in its own order (a
// replica's changed ones come in no set order): every flush succeeds. Each used to upsert row by
// row in the order given, and two flushes each holding a row the other wanted deadlocked (the
// server broke the cycle by failing one after a second; seen in fleet_bench's runs).
TEST_CASE("PostgresStore.ReplicasFlushingTheSameEstimatesAtOnceNeverDeadlock" * kStoreAlone) {
  testing::PostgresServer server;
  std::vector<SavedEstimate> estimates;
  std::vector<SavedSchedule> schedules;
  for (int i = 0; i < 300; ++i) {
    estimates.push_back({"fetch", "repo" + std::to_string(i), 1.0 + i, 100});
    schedules.push_back({"gc", "repo" + std::to_string(i), 1.0 + i});
  }
  std::atomic<int> failed{0};
  std::vector<std::thread> replicas;
  for (int r = 0; r < 2; ++r) {
    replicas.emplace_back([&, r] {
      auto store = *OpenPostgresStore(server.conninfo(), {"r" + std::to_string(r)});
      LearnedState state;
      state.estimates = estimates;
      state.schedules = schedules;
      if (r == 1) {
        std::reverse(state.estimates.begin(), state.estimates.end());
        std::reverse(state.schedules.begin(), state.schedules.end());
      }
      for (int round = 0; round < 20; ++round) {
        const Status s = store->SaveLearned(state, 0, 0);
        if (!s.ok()) {
          ++failed;
          MESSAGE(s.ToString());
        }
      }
    });
  }
  for (std::thread& t : replicas) t.join();
  CHECK(failed.load() == 0);
  CHECK(server.Sql("SELECT count(*) FROM fairgate_estimates") == "300");
  CHECK(server.Sql("SELECT count(*) FROM fairgate_schedules") == "300");
}

TEST_CASE("PostgresStore.ASchedulerRecoversItsDurableJobsAndCostsFromIt") {
  testing::PostgresServer server;
  auto options = [&] {
    SchedulerOptions o;
    o.persistence.store = std::shared_ptr<Store>(*OpenPostgresStore(server.conninfo()));
    o.rule.max_concurrency = 1;
    o.runtime.warn = [](std::string_view) {};
    return o;
  };
  {
    auto s = *Scheduler::Create(options());
    REQUIRE(s->RegisterType("fetch", testing::Type(4, 1)).ok());
    REQUIRE(s->RegisterDurable("fetch", [](const DurableJob&, const Context&) {
               return absl::OkStatus();
             }).ok());
    REQUIRE(s->Recover().ok());
    REQUIRE(s->RunSync(Context::Background(),
                       {TypeName("fetch"), JobId("warm"), FairnessKey("carol")},
                       [](const Context&) { return absl::OkStatus(); })
                .ok());
    REQUIRE(s->PauseType("fetch").ok());
    for (const char* id : {"c", "a", "b"})
      REQUIRE(s->SubmitDurable({TypeName("fetch"), JobId(id)}, id).ok());
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
  // A replica claims as many as it may hold: at first twice its max_concurrency (1 here).
  CHECK(report.queued == 2);
  REQUIRE(testing::Eventually([&] { return ran.entries().size() == 3; }));
  CHECK(ran.entries() == std::vector<std::string>{"c", "a", "b"});
}

// Replicas with workers (fairgate/worker.h) claim only the stored jobs of types their workers
// serve: a render job is never claimed by the replica that has no worker for it, where it would
// wait while the other could run it.
TEST_CASE("PostgresStore.AReplicaClaimsOnlyTheTypesItsWorkersServe") {
  testing::PostgresServer server;
  auto replica = [&](const char* serves) {
    SchedulerOptions o;
    o.persistence.store = std::shared_ptr<Store>(*OpenPostgresStore(server.conninfo()));
    o.rule.max_concurrency = 2;
    o.runtime.warn = [](std::string_view) {};
    auto s = *Scheduler::Create(o);
    REQUIRE(s->RegisterType("render", testing::Type(4, 2)).ok());
    REQUIRE(s->RegisterType("index", testing::Type(4, 2)).ok());
    REQUIRE(s->AddWorker(std::string(serves) + "-worker", WorkerConfig{2, {serves}, {}}).ok());
    return s;
  };
  auto renders = replica("render");
  auto indexes = replica("index");
  testing::Log ran;
  for (auto* s : {renders.get(), indexes.get()}) {
    const std::string name = s == renders.get() ? "render-replica" : "index-replica";
    for (const char* type : {"render", "index"}) {
      REQUIRE(s->RegisterDurable(type, [&ran, name](const DurableJob& job, const Context& ctx) {
                 ran.Add(std::string(job.type) + " on " + name + " (" + std::string(ctx.Worker()) +
                         ")");
                 return absl::OkStatus();
               }).ok());
    }
    REQUIRE(s->Recover().ok());
  }
  for (int i = 0; i < 4; ++i) {
    REQUIRE(renders->SubmitDurable({TypeName("index"), JobId("i" + std::to_string(i))}, "").ok());
    REQUIRE(indexes->SubmitDurable({TypeName("render"), JobId("r" + std::to_string(i))}, "").ok());
  }
  REQUIRE(testing::Eventually([&] { return ran.entries().size() == 8; }));
  for (const std::string& entry : ran.entries()) {
    CAPTURE(entry);
    CHECK((entry == "render on render-replica (render-worker)" ||
           entry == "index on index-replica (index-worker)"));
  }
}

TEST_CASE("PostgresStore.ABatchSubmittedToAReplicaRunsOnceEachInItsOrder") {
  testing::PostgresServer server;
  SchedulerOptions o;
  o.persistence.store = std::shared_ptr<Store>(*OpenPostgresStore(server.conninfo()));
  o.rule.max_concurrency = 1;
  o.runtime.warn = [](std::string_view) {};
  auto s = *Scheduler::Create(o);
  REQUIRE(s->RegisterType("fetch", testing::Type(4, 1)).ok());
  testing::Log ran;
  REQUIRE(s->RegisterDurable("fetch", [&](const DurableJob& job, const Context&) {
             ran.Add(std::string(job.id));
             return absl::OkStatus();
           }).ok());
  REQUIRE(s->Recover().ok());
  std::vector<std::string> ids;
  for (int i = 0; i < 30; ++i) ids.push_back("repo-" + std::to_string(29 - i));
  std::vector<DurableSubmission> batch;
  for (const std::string& id : ids)
    batch.push_back({{TypeName("fetch"), JobId(id), FairnessKey("alice")}, ""});
  StatusOr<std::vector<std::uint64_t>> sequences = s->SubmitDurableBatch(batch);
  REQUIRE_MESSAGE(sequences.ok(), sequences.status().ToString());
  CHECK(std::is_sorted(sequences->begin(), sequences->end()));
  REQUIRE(testing::Eventually([&] { return ran.entries().size() == ids.size(); }));
  CHECK(ran.entries() == ids);  // one key, one slot: the batch's order
  REQUIRE(testing::Eventually(
      [&] { return server.Sql("SELECT count(*) FROM fairgate_durable_jobs") == "0"; }));
}

TEST_CASE("PostgresStore.WhileTheServerIsDownCallsAreUnavailableAndItReconnectsWhenItReturns" *
          kStoreAlone) {
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

TEST_CASE("PostgresStore.AReplicaAdmitsItsOwnWorkWhileTheServerIsDownAndCatchesUpAfter") {
  testing::PostgresServer server;
  SchedulerOptions o;
  o.persistence.store = std::shared_ptr<Store>(*OpenPostgresStore(server.conninfo(), {"a"}));
  o.rule.max_concurrency = 2;
  o.fleet.claim_interval = Seconds(0.05);
  o.runtime.warn = [](std::string_view) {};
  auto s = *Scheduler::Create(o);
  REQUIRE(s->RegisterType("fetch", testing::Type(4, 2)).ok());
  testing::Log ran;
  REQUIRE(s->RegisterDurable("fetch", [&](const DurableJob& job, const Context&) {
             ran.Add(std::string(job.payload));
             return absl::OkStatus();
           }).ok());
  REQUIRE(s->Recover().ok());
  server.Stop();
  // In-process work is admitted, runs and is charged as ever; durable work cannot be stored.
  for (int i = 0; i < 5; ++i) {
    CHECK(s->RunSync(Context::Background(), {TypeName("fetch"), JobId("x"), FairnessKey("alice")},
                     [](const Context&) { return absl::OkStatus(); })
              .ok());
  }
  CHECK(s->SubmitDurable({TypeName("fetch"), JobId("y")}, "lost").status().code() ==
        absl::StatusCode::kUnavailable);
  const double charged = *s->AccumulatedCost("alice");
  CHECK(charged > 0);
  server.Start();
  // What alice was charged meanwhile reaches the fleet with the next share, and durable work
  // stored now is claimed and runs.
  REQUIRE(testing::Eventually([&] {
    const std::string cost =
        server.Sql("SELECT accumulated_cost FROM fairgate_keys WHERE key = 'alice'");
    return !cost.empty() && std::stod(cost) >= charged * 0.999;
  }));
  REQUIRE(s->SubmitDurable({TypeName("fetch"), JobId("z")}, "after").ok());
  REQUIRE(testing::Eventually([&] { return ran.entries().size() == 1; }));
  CHECK(ran.entries() == std::vector<std::string>{"after"});
}

StoredJob Job(std::string type, std::string id, std::string key) {
  return testing::StoredJobOf(std::move(type), std::move(id), std::move(key));
}

// Submits a job of `type` on `id` that runs until `gate` opens.
void SubmitBlocked(Scheduler& s, std::string_view type, std::string_view id,
                   std::shared_ptr<testing::Gate> gate) {
  REQUIRE(s.Submit({TypeName(type), JobId(id), FairnessKey("x")},
                   [gate](const Context&) {
                     gate->Wait();
                     return absl::OkStatus();
                   },
                   {})
              .ok());
}

// The value of one sample (its name with its labels) of a scheduler's metrics; -1 if absent.
double Metric(const Scheduler& s, const std::string& sample) {
  std::string metrics;
  s.WriteMetrics(metrics);
  const std::string name = sample + " ";
  const std::size_t at = metrics.find(name);
  return at == std::string::npos ? -1 : std::strtod(metrics.c_str() + at + name.size(), nullptr);
}

// fairgate_durable_jobs_total{outcome="claimed"} of a scheduler.
double Claimed(const Scheduler& s) {
  return Metric(s, "fairgate_durable_jobs_total{outcome=\"claimed\"}");
}

std::vector<std::string> Ids(const std::vector<StoredJob>& jobs) { return testing::IdsOf(jobs); }

// The shared-store contract's replicas (store_contract.h): a store of each name on `server`.
testing::OpenSharedStore Replicas(const testing::PostgresServer& server) {
  return [&server](const std::string& replica) {
    return *OpenPostgresStore(server.conninfo(), {replica});
  };
}

// How many of fairgate's text columns a database compares other than bytewise (COLLATE "C").
constexpr const char* kTextColumnsNotBytewise =
    "SELECT count(*) FROM information_schema.columns WHERE table_name LIKE 'fairgate%' "
    "AND data_type = 'text' AND collation_name IS DISTINCT FROM 'C'";

// How many of fairgate's tables that every job, claim or cost share changes autovacuum vacuums
// once 1,000 of their rows are dead, whatever their size, at full speed (schema 13): all six.
constexpr const char* kTablesVacuumedSoon =
    "SELECT count(*) FROM pg_class WHERE relname IN ('fairgate_durable_jobs', "
    "'fairgate_key_heads', 'fairgate_keys', 'fairgate_groups', 'fairgate_resource_leases', "
    "'fairgate_rate_buckets') AND reloptions @> ARRAY['autovacuum_vacuum_scale_factor=0', "
    "'autovacuum_vacuum_threshold=1000', 'autovacuum_vacuum_cost_delay=0']";

TEST_CASE("PostgresStore.ADatabaseOfTheFirstSchemaIsMigratedAndANewerOneRefused" * kStoreAlone) {
  testing::PostgresServer server;
  // What the first PostgreSQL store (schema 1, no leases) left: two jobs, one of them a retry
  // whose backoff is over.
  server.Sql(
      "CREATE TABLE fairgate_schema (version integer NOT NULL); "
      "INSERT INTO fairgate_schema VALUES (1); "
      "CREATE TABLE fairgate_durable_jobs (sequence bigserial PRIMARY KEY, type text NOT NULL, "
      "id text NOT NULL, fairness_key text NOT NULL, payload bytea NOT NULL, "
      "submitted_at double precision NOT NULL, attempts integer NOT NULL DEFAULT 0, "
      "not_before double precision NOT NULL DEFAULT 0, last_error text NOT NULL DEFAULT '', "
      "dead boolean NOT NULL DEFAULT false); "
      "CREATE INDEX fairgate_durable_jobs_queue "
      "ON fairgate_durable_jobs (type, fairness_key, sequence) WHERE NOT dead; "
      "INSERT INTO fairgate_durable_jobs (type, id, fairness_key, payload, submitted_at) "
      "VALUES ('fetch', 'linux.git', 'alice', 'x', 1); "
      "INSERT INTO fairgate_durable_jobs (type, id, fairness_key, payload, submitted_at, "
      "attempts, not_before) VALUES ('fetch', 'git.git', 'bob', 'x', 1, 1, 2); "
      "ANALYZE fairgate_durable_jobs");
  auto store = *OpenPostgresStore(server.conninfo(), {"a"});
  CHECK(server.Sql("SELECT max(version) FROM fairgate_schema") == "13");
  // Schema 3 keeps each key's first job in fairgate_key_heads: the migration filled it.
  CHECK(server.Sql("SELECT fairness_key FROM fairgate_key_heads") == "alice");
  // Schema 6 locks a large set of keys at once (fairgate_lock_key_set).
  CHECK(server.Sql("SELECT count(*) FROM pg_proc WHERE proname = 'fairgate_lock_key_set'") == "1");
  // Schema 7 notifies only while a replica waits (fairgate_notify_waiting).
  CHECK(server.Sql("SELECT count(*) FROM pg_proc WHERE proname = 'fairgate_notify_waiting'") ==
        "1");
  // Schema 8 keeps an index of the dead jobs (their pages and count read it).
  CHECK(server.Sql("SELECT count(*) FROM pg_indexes WHERE indexname = "
                   "'fairgate_durable_jobs_dead'") == "1");
  // Schema 9 marks each job with a number its store chose (stored_by): the old rows have none.
  CHECK(server.Sql("SELECT count(*) FROM fairgate_durable_jobs WHERE stored_by IS NULL") == "2");
  // Schema 10 marks a slot an AcquireResource took (taken_by).
  CHECK(server.Sql("SELECT count(*) FROM information_schema.columns WHERE table_name = "
                   "'fairgate_resource_leases' AND column_name = 'taken_by'") == "1");
  // Schema 11 drops the first claims' index of every live job, which nothing reads.
  CHECK(server.Sql("SELECT count(*) FROM pg_indexes WHERE indexname = "
                   "'fairgate_durable_jobs_queue'") == "0");
  // Schema 12 compares every text column bytewise, the old tables' columns too.
  CHECK(server.Sql(kTextColumnsNotBytewise) == "0");
  // Its change of the columns' collation dropped their statistics; the migration gathered them
  // again.
  CHECK(server.Sql("SELECT count(*) FROM pg_stats WHERE tablename = 'fairgate_durable_jobs' "
                   "AND attname = 'fairness_key'") == "1");
  // Schema 13 has autovacuum vacuum the tables every job changes once 1,000 rows are dead.
  CHECK(server.Sql(kTablesVacuumedSoon) == "6");
  std::vector<StoredJob> claimed = *store->ClaimJobs({{"fetch", 1}}, 10, 30);
  REQUIRE(claimed.size() == 2);
  CHECK(claimed[0].id == "linux.git");
  CHECK(claimed[1].id == "git.git");
  CHECK(store->RemoveJob(claimed[0].sequence).ok());
  server.Sql("UPDATE fairgate_schema SET version = 14");
  Status newer = OpenPostgresStore(server.conninfo()).status();
  CHECK(newer.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(newer.message().find("newer") != std::string::npos);
}

// A large jobs' table is vacuumed once 1,000 of its rows are dead (schema 13), not once a fifth
// of it is (the server's default): 60,000 jobs, 2,000 of them deleted, where the default waits
// for 12,050. Autovacuum is held off while the rows are made and killed, and then comes every
// second, so that the vacuum counted is the one those dead rows call for.
TEST_CASE("PostgresStore.ItsJobsTableIsVacuumedOnceAThousandRowsAreDeadWhateverItsSize" *
          kStoreAlone) {
  testing::PostgresServer server;
  server.Sql("ALTER SYSTEM SET autovacuum = off");
  server.Sql("SELECT pg_reload_conf()");
  auto store = *OpenPostgresStore(server.conninfo(), {"a"});
  CHECK(server.Sql(kTablesVacuumedSoon) == "6");
  server.Sql(
      "INSERT INTO fairgate_durable_jobs (type, id, fairness_key, payload, submitted_at) "
      "SELECT 'fetch', 'repo-' || i, 'key-' || (i % 100), '', 0 FROM generate_series(1, 60000) i");
  server.Sql("VACUUM ANALYZE fairgate_durable_jobs");
  server.Sql("DELETE FROM fairgate_durable_jobs WHERE sequence <= 2000");
  const std::string vacuums =
      "SELECT autovacuum_count FROM pg_stat_user_tables WHERE relname = 'fairgate_durable_jobs'";
  REQUIRE(server.Sql(vacuums) == "0");
  server.Sql("ALTER SYSTEM SET autovacuum = on");
  server.Sql("ALTER SYSTEM SET autovacuum_naptime = 1");
  server.Sql("SELECT pg_reload_conf()");
  CHECK(testing::Eventually(
      [&] {
        // Each look is a connection of its own: at most 20 a second, not one a millisecond.
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        return server.Sql(vacuums) != "0";
      },
      std::chrono::seconds(60)));
  CHECK(server.Sql("SELECT n_dead_tup FROM pg_stat_user_tables "
                   "WHERE relname = 'fairgate_durable_jobs'") == "0");
}

// A database whose collation is linguistic (ICU's en-US here, where "a" < "b" < "B"; bytewise,
// "B" < "a" < "b"): fairgate's names are compared bytewise all the same (schema 12), so its
// indexes do not depend on the database's collation library, and its jobs are stored, claimed in
// fair order and removed as in any other database.
TEST_CASE("PostgresStore.NamesAreComparedBytewiseWhateverTheDatabasesCollation" * kStoreAlone) {
  testing::PostgresServer server;
  server.Sql(
      "CREATE DATABASE linguistic TEMPLATE template0 ENCODING 'UTF8' LOCALE_PROVIDER icu "
      "ICU_LOCALE 'en-US' LOCALE 'C.UTF-8'");
  const std::string conninfo = server.conninfo() + " dbname=linguistic";
  // The database does order names linguistically.
  CHECK(testing::PostgresServer::SqlAt(conninfo, "SELECT 'B' < 'a'") == "f");
  auto store = *OpenPostgresStore(conninfo, {"a"});
  CHECK(testing::PostgresServer::SqlAt(conninfo, kTextColumnsNotBytewise) == "0");
  std::vector<StoredJob> jobs;
  for (const char* key : {"b", "B", "a", "\xc3\xa4"}) {
    jobs.push_back(Job("fetch", std::string("repo-") + key, key));
  }
  std::vector<std::uint64_t> stored = *store->AddJobs(jobs);
  REQUIRE(stored.size() == 4);
  // Every key at cost 0: the order of arrival, whatever the keys' names.
  std::vector<StoredJob> claimed = *store->ClaimJobs({{"fetch", 1}}, 10, 30);
  CHECK(Ids(claimed) == std::vector<std::string>{"repo-b", "repo-B", "repo-a", "repo-\xc3\xa4"});
  for (const StoredJob& job : claimed) CHECK(store->RemoveJob(job.sequence).ok());
  CHECK(store->LiveJobs()->empty());
}

// Calls from many threads at once: each job stored once, under its own sequence number; calls in
// flight at once on connections of their own, as many as the pool's size.
TEST_CASE("PostgresStore.CallsFromManyThreadsShareAPoolOfConnections" * kStoreAlone) {
  testing::PostgresServer server;
  CHECK(OpenPostgresStore(server.conninfo(), {.connections = 0}).status().code() ==
        absl::StatusCode::kInvalidArgument);
  auto store = *OpenPostgresStore(server.conninfo(), {.replica = "a", .connections = 2});
  std::vector<std::thread> threads;
  std::mutex mutex;
  std::set<std::uint64_t> sequences;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i) {
        StatusOr<std::uint64_t> sequence = store->AddJob(Job("fetch", std::to_string(t), "k"));
        REQUIRE(sequence.ok());
        std::lock_guard lock(mutex);
        sequences.insert(*sequence);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  CHECK(sequences.size() == 200);
  CHECK(store->LiveJobs()->size() == 200);
  // Two calls at once take two connections: a job's store waits on a lock of the jobs' table held
  // by another session, and a read of the jobs goes on beside it.
  const char* client_backends =
      "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'";
  PGconn* locker = PQconnectdb(server.conninfo().c_str());
  REQUIRE(PQstatus(locker) == CONNECTION_OK);
  REQUIRE(Command(locker, "SET idle_in_transaction_session_timeout = '20s'"));
  REQUIRE(Command(locker, "BEGIN"));
  REQUIRE(Command(locker, "LOCK TABLE fairgate_durable_jobs IN EXCLUSIVE MODE"));
  StatusOr<std::uint64_t> held = absl::UnknownError("not stored yet");
  std::thread storing([&] { held = store->AddJob(Job("fetch", "held", "k")); });
  CHECK(testing::Eventually([&] {
    return server.Sql(
               "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
               "AND backend_type = 'client backend'") == "1";
  }));
  CHECK(store->LiveJobs()->size() == 200);
  // The store's two, the locking session and the one counting them.
  CHECK(server.Sql(client_backends) == "4");
  CHECK(Command(locker, "COMMIT"));
  storing.join();
  CHECK(held.ok());
  PQfinish(locker);
  CHECK(store->LiveJobs()->size() == 201);
}

TEST_CASE("PostgresStore.ReplicasClaimByTierThenKeyCostThenArrivalAndNeverTheSameJob" *
          kStoreAlone) {
  testing::PostgresServer server;
  testing::CheckClaimsInFairOrderEachJobToOneReplica(Replicas(server));
  // A store that is not shared hands out no leases: it is no SharedStore (so ClaimJobs does not
  // even compile on it), and says so.
  testing::TempDir dir;
  auto sqlite = *OpenSqliteStore(dir.path() + "/state.db");
  CHECK(sqlite->AsShared() == nullptr);
}

// A claim takes the first jobs of the whole claim order (lapsed leases first, then the higher
// tier, the cheaper key, the earlier job), whatever the keys' number, costs and ties, the jobs
// other replicas hold, the lapsed ones and those waiting out a backoff: the store's bounded
// reading (only some keys' first jobs) against the order of every stored job, computed here.
TEST_CASE("PostgresStore.AClaimTakesTheFirstJobsOfTheWholeOrderWhateverTheKeysAndTheirCosts" *
          kStoreAlone) {
  testing::PostgresServer server;
  std::mt19937 random(20261127);
  // Costs of 4 values (groups of tied keys), or of 1,000 (most keys a group of their own: the
  // claim stops reading keys at the group where it has read enough, FAIRGATE_PG_CLAIM_CANDIDATES).
  for (const auto& [keys, costs] : std::vector<std::pair<int, int>>{
           {1, 4}, {3, 4}, {30, 4}, {150, 4}, {30, 1000}, {150, 1000}}) {
    CAPTURE(keys);
    CAPTURE(costs);
    auto a = *OpenPostgresStore(server.conninfo(), {"a"});  // makes the schema
    auto other = *OpenPostgresStore(server.conninfo(), {"other"});
    server.Sql("TRUNCATE fairgate_durable_jobs, fairgate_keys, fairgate_resource_leases");
    // Costs with ties (several keys at each value, some never charged: 0).
    std::map<std::string, double> cost;
    std::vector<SavedKey> saved;
    for (int k = 0; k < keys; ++k) {
      const std::string key = "k" + std::to_string(k);
      if (random() % 5 == 0) continue;
      cost[key] = static_cast<double>(random() % static_cast<std::uint32_t>(costs));
      saved.push_back({key, cost[key], 0});
    }
    // Half the costs are known before the jobs are stored, the rest after (a key's cost that
    // changes moves its jobs).
    std::vector<SavedKey> later(saved.begin() + static_cast<std::ptrdiff_t>(saved.size() / 2),
                                saved.end());
    saved.resize(saved.size() / 2);
    REQUIRE(a->SaveLearned({{}, saved, {}}, 0, 0).ok());
    std::vector<StoredJob> batch;
    for (int i = 0; i < 1200; ++i) {
      const std::uint32_t roll = random() % 10;
      StoredJob job = Job(roll < 2   ? "clone"
                          : roll < 9 ? "fetch"
                                     : "other",
                          "r", "k" + std::to_string(random() % 4 == 0 ? 0 : random() % keys));
      batch.push_back(job);
    }
    REQUIRE(a->AddJobs(batch).ok());
    REQUIRE(a->SaveLearned({{}, later, {}}, 0, 0).ok());
    // Retries: some jobs deferred, a few still waiting out their backoff, the rest due.
    {
      auto retrier = *OpenPostgresStore(server.conninfo(), {"retrier"});
      const std::vector<StoredJob> retried =
          *retrier->ClaimJobs({{"fetch", 2}, {"clone", 5}}, 90, 60);
      for (std::size_t i = 0; i < retried.size(); i += 3) {
        const double not_before = i % 2 == 0 ? 4e9 : 1;
        REQUIRE(retrier->DeferJob(retried[i].sequence, not_before, "retry").ok());
      }
      for (std::size_t i = 0; i < retried.size(); ++i) {
        if (i % 3 != 0) REQUIRE(retrier->ReleaseJob(retried[i].sequence).ok());
      }
    }
    const std::vector<ClaimableType> types = {{"fetch", 2}, {"clone", 5}};
    // Another replica holds some jobs, and held some whose leases have lapsed.
    // (Each claim held in a variable: a loop over `*other->ClaimJobs(...)` would read a
    // destroyed temporary.)
    std::set<std::uint64_t> held, lapsed;
    const std::vector<StoredJob> lapsing = *other->ClaimJobs(types, 40, 0.2);
    for (const StoredJob& job : lapsing) lapsed.insert(job.sequence);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const std::vector<StoredJob> kept = *other->ClaimJobs(types, 20, 60);
    for (const StoredJob& job : kept) {
      held.insert(job.sequence);
      lapsed.erase(job.sequence);  // claimed again: held now
    }
    for (const int n : {1, 5, 23, 64}) {
      CAPTURE(n);
      // The whole order of what may be claimed now.
      struct Place {
        bool lapsed;
        int tier;
        double cost;
        std::uint64_t sequence;
      };
      std::vector<Place> order;
      const std::vector<StoredJob> live = *a->LiveJobs();
      for (const StoredJob& job : live) {
        if (job.type == "other" || held.contains(job.sequence) || job.not_before > 1e9) continue;
        auto c = cost.find(job.fairness_key);
        order.push_back({lapsed.contains(job.sequence), job.type == "clone" ? 5 : 2,
                         c == cost.end() ? 0.0 : c->second, job.sequence});
      }
      std::sort(order.begin(), order.end(), [](const Place& x, const Place& y) {
        return std::tuple(!x.lapsed, -x.tier, x.cost, x.sequence) <
               std::tuple(!y.lapsed, -y.tier, y.cost, y.sequence);
      });
      std::vector<std::uint64_t> expected;
      for (std::size_t i = 0; i < order.size() && i < static_cast<std::size_t>(n); ++i) {
        expected.push_back(order[i].sequence);
      }
      std::sort(expected.begin(), expected.end());
      const std::vector<StoredJob> claimed = *a->ClaimJobs(types, n, 60);
      std::vector<std::uint64_t> got;
      for (const StoredJob& job : claimed) got.push_back(job.sequence);
      CHECK(got == expected);
      for (std::uint64_t sequence : got) {
        REQUIRE(a->ReleaseJob(sequence).ok());  // as it was, for the next claim
        lapsed.erase(sequence);                 // given back: nobody holds it now
      }
    }
  }
}

// The same for a claim whose jobs take leases (a fleet-wide conflict group, one job per
// repository at once): many keys with tied costs, repositories held by another replica, retries
// due and not. The claim reads the first jobs of the whole order of claimable jobs (not held,
// due, their repository free) and takes, in that order, each whose repository no job it took
// already needs (and, of a type bounded in a claim, no more than its bound), up to the claim's
// size, whatever the number of keys (it reads the keys' heads, not every key). Then again with
// clones of the fetches' tier and one a claim at most: a clone passed over for its bound leaves
// its repository to a later fetch (a claim that counted it as taking the repository, as it may
// count a job of an unbounded type, would pass over that fetch).
TEST_CASE("PostgresStore.AClaimWithLeasesTakesTheFirstClaimableJobsOfTheWholeOrder" * kStoreAlone) {
  testing::PostgresServer server;
  std::mt19937 random(20261129);
  struct Case {
    std::size_t clones;  // the clones' bound in a claim (0: none, and their tier higher)
    int keys;
    int costs = 3;  // how many values the keys' costs take (1,000: most keys alone at theirs)
  };
  for (const Case run : {Case{0, 1}, Case{0, 3}, Case{0, 30}, Case{0, 300}, Case{1, 1}, Case{1, 3},
                         Case{1, 30}, Case{1, 300}, Case{0, 300, 1000}, Case{1, 300, 1000}}) {
    const std::size_t clones = run.clones;
    const int keys = run.keys;
    CAPTURE(clones);
    CAPTURE(keys);
    CAPTURE(run.costs);
    std::vector<ClaimableType> types = {{"fetch", 2, "repo", 1, 0}, {"clone", 5, "repo", 1, 0}};
    const int clone_tier = clones == 0 ? 5 : 2;
    types[1].priority = clone_tier;
    types[1].max_jobs = clones;  // 0: no bound
    auto a = *OpenPostgresStore(server.conninfo(), {"a"});
    auto other = *OpenPostgresStore(server.conninfo(), {"other"});
    server.Sql(
        "TRUNCATE fairgate_durable_jobs, fairgate_keys, fairgate_resource_leases, "
        "fairgate_key_heads");
    std::map<std::string, double> cost;
    std::vector<SavedKey> saved;
    for (int k = 0; k < keys; ++k) {
      const std::string key = "k" + std::to_string(k);
      if (random() % 3 == 0) continue;  // never charged: 0, tied with many
      cost[key] = static_cast<double>(random() % static_cast<std::uint32_t>(run.costs));
      saved.push_back({key, cost[key], 0});
    }
    REQUIRE(a->SaveLearned({{}, saved, {}}, 0, 0).ok());
    std::vector<StoredJob> batch;
    for (int i = 0; i < 900; ++i) {
      // A few repositories take most jobs, so that keys' first ready jobs are often blocked.
      const std::uint32_t repo = random() % 3 == 0 ? random() % 40 : random() % 4;
      batch.push_back(Job(random() % 5 == 0 ? "clone" : "fetch", "r" + std::to_string(repo),
                          "k" + std::to_string(random() % keys)));
    }
    REQUIRE(a->AddJobs(batch).ok());
    // Retries, then another replica holding a few repositories.
    {
      auto retrier = *OpenPostgresStore(server.conninfo(), {"retrier"});
      const std::vector<StoredJob> retried = *retrier->ClaimJobs(types, 12, 60);
      for (std::size_t i = 0; i < retried.size(); ++i) {
        if (i % 3 == 2) {
          REQUIRE(retrier->ReleaseJob(retried[i].sequence).ok());
        } else {
          REQUIRE(retrier->DeferJob(retried[i].sequence, i % 3 == 0 ? 4e9 : 1, "retry").ok());
        }
      }
      server.Sql("DELETE FROM fairgate_resource_leases WHERE holder = 'retrier'");
    }
    std::set<std::uint64_t> held;
    std::set<std::string> held_repos;
    const std::vector<StoredJob> kept = *other->ClaimJobs(types, 3, 60);
    for (const StoredJob& job : kept) {
      held.insert(job.sequence);
      held_repos.insert(job.id);
    }
    for (const int n : {1, 4, 9}) {
      CAPTURE(n);
      struct Place {
        int tier;
        double cost;
        std::uint64_t sequence;
        std::string repo;
        bool clone;
      };
      std::vector<Place> order;
      const std::vector<StoredJob> live = *a->LiveJobs();
      for (const StoredJob& job : live) {
        if (held.contains(job.sequence) || job.not_before > 1e9 || held_repos.contains(job.id)) {
          continue;
        }
        auto c = cost.find(job.fairness_key);
        order.push_back({job.type == "clone" ? clone_tier : 2, c == cost.end() ? 0.0 : c->second,
                         job.sequence, job.id, job.type == "clone"});
      }
      std::sort(order.begin(), order.end(), [](const Place& x, const Place& y) {
        return std::tuple(-x.tier, x.cost, x.sequence) < std::tuple(-y.tier, y.cost, y.sequence);
      });
      // The claim reads the first `read` of the order and leaves out each job of a repository
      // that an earlier job of an unbounded type (one claimed whenever its repository is free)
      // needs; it locks the first `locked` of the rest, and takes them in order, each
      // repository once, clones up to their bound.
      auto expected = [&](int read, int locked) {
        std::vector<Place> candidates;
        std::set<std::string> needed;  // by an unbounded type's job
        for (std::size_t i = 0; i < order.size() && i < static_cast<std::size_t>(read); ++i) {
          if (needed.contains(order[i].repo)) continue;
          if (!order[i].clone || clones == 0) needed.insert(order[i].repo);
          candidates.push_back(order[i]);
        }
        std::vector<std::uint64_t> sequences;
        std::set<std::string> taken;
        std::size_t cloned = 0;
        for (std::size_t i = 0; i < candidates.size() && i < static_cast<std::size_t>(locked) &&
                                sequences.size() < static_cast<std::size_t>(n);
             ++i) {
          const bool clone = candidates[i].clone;
          if (clone && clones > 0 && cloned == clones) continue;
          if (!taken.insert(candidates[i].repo).second) continue;
          cloned += clone ? 1 : 0;
          sequences.push_back(candidates[i].sequence);
        }
        std::sort(sequences.begin(), sequences.end());
        return sequences;
      };
      // A store's first claim reads the first 8 n candidates and locks 4 n (n where both types
      // are unbounded); one after a whole claim reads 2 n and locks n (and one after a short
      // claim as the first). Each claim is given back before the next.
      const int wide_locked = clones == 0 ? n : 4 * n;
      auto claimer = *OpenPostgresStore(server.conninfo(), {"a"});
      auto claim = [&] {
        const std::vector<StoredJob> claimed = *claimer->ClaimJobs(types, n, 60);
        std::vector<std::uint64_t> got;
        for (const StoredJob& job : claimed) got.push_back(job.sequence);
        std::sort(got.begin(), got.end());
        for (std::uint64_t sequence : got) REQUIRE(claimer->ReleaseJob(sequence).ok());
        server.Sql("DELETE FROM fairgate_resource_leases WHERE holder = 'a'");
        return got;
      };
      const std::vector<std::uint64_t> first = claim();
      CHECK(first == expected(8 * n, wide_locked));
      if (first.size() == static_cast<std::size_t>(n)) {
        const std::vector<std::uint64_t> after_whole = claim();
        CHECK(after_whole == expected(2 * n, n));
        if (after_whole.size() < static_cast<std::size_t>(n)) {
          CHECK(claim() == expected(8 * n, wide_locked));
        }
      }
    }
  }

  // Keys whose first ready jobs are blocked do not hide a key behind them: eight keys (as many
  // as a claim of one reads first) begin with a job on a held repository, each with a free job
  // later; a ninth key's first job, stored between, comes first.
  server.Sql(
      "TRUNCATE fairgate_durable_jobs, fairgate_keys, fairgate_resource_leases, "
      "fairgate_key_heads");
  auto a = *OpenPostgresStore(server.conninfo(), {"a"});
  auto other = *OpenPostgresStore(server.conninfo(), {"other"});
  const std::vector<ClaimableType> types = {{"fetch", 2, "repo", 1, 0}, {"clone", 5, "repo", 1, 0}};
  REQUIRE(a->AddJob(Job("fetch", "busy", "holder")).ok());
  REQUIRE(other->ClaimJobs(types, 1, 60)->size() == 1);  // holds "busy"
  for (int k = 0; k < 8; ++k)
    REQUIRE(a->AddJob(Job("fetch", "busy", "k" + std::to_string(k))).ok());
  const std::uint64_t first = *a->AddJob(Job("fetch", "free-8", "k8"));
  for (int k = 0; k < 8; ++k) {
    REQUIRE(a->AddJob(Job("fetch", "free-" + std::to_string(k), "k" + std::to_string(k))).ok());
  }
  const std::vector<StoredJob> claimed = *a->ClaimJobs(types, 1, 60);
  REQUIRE(claimed.size() == 1);
  CHECK(claimed[0].sequence == first);
}

// The keys' heads (fairgate_key_heads, kept by triggers under a lock per key) against the jobs
// while two producers store jobs of a few keys and two replicas claim, give back, defer and
// remove them at once: every job is claimed in the end (no key lost from the heads), and the
// heads are exactly each key's first ready job whenever they are read. Beside them, sets of more
// than 1,000 keys, which lock every key at once instead of each: a store of two batches of 1,001
// keys' jobs, and a replica sharing 1,001 keys' costs (the producers' four among them) over and
// over; the heads' costs stay the keys' costs.
TEST_CASE("PostgresStore.TheKeysHeadsStayExactWhileReplicasStoreClaimAndFinishAtOnce" *
          kStoreAlone) {
  testing::PostgresServer server;
  constexpr int kPerProducer = 1000;
  constexpr int kBulk = 2 * 1001;
  constexpr int kJobs = 2 * kPerProducer + kBulk;
  const std::vector<ClaimableType> types = {{"fetch", 1}};
  // Heads that differ from the jobs: a pair whose head is not its first ready job, or a pair with
  // ready jobs and no head; or a head whose cost is not its key's.
  const std::string mismatches =
      "SELECT count(*) FROM (SELECT type, fairness_key, min(sequence) AS head "
      "FROM fairgate_durable_jobs WHERE NOT dead AND holder IS NULL AND not_before = 0 "
      "GROUP BY 1, 2) r FULL JOIN fairgate_key_heads h "
      "ON h.type = r.type AND h.fairness_key = r.fairness_key "
      "LEFT JOIN fairgate_keys c ON c.key = h.fairness_key "
      "WHERE r.head IS DISTINCT FROM h.head OR h.cost <> coalesce(c.accumulated_cost, 0)";
  auto schema = *OpenPostgresStore(server.conninfo());  // before anyone reads the tables
  std::atomic<int> stored{0}, removed{0};
  std::atomic<bool> failed{false};
  std::vector<std::thread> threads;
  // Keys k0..k3 (the producers') and 997 others.
  std::vector<std::string> many;
  for (int k = 0; k < 1001; ++k) many.push_back((k < 4 ? "k" : "bulk") + std::to_string(k));
  threads.emplace_back([&] {
    auto store = *OpenPostgresStore(server.conninfo(), {"bulk"});
    for (int b = 0; b < 2; ++b) {
      std::vector<StoredJob> batch;
      for (const std::string& key : many) batch.push_back(Job("fetch", "r", key));
      if (!store->AddJobs(batch).ok()) failed = true;
      stored += static_cast<int>(batch.size());
    }
  });
  threads.emplace_back([&] {
    auto store = *OpenPostgresStore(server.conninfo(), {"sharer"});
    std::vector<SavedKey> charged;
    for (const std::string& key : many) charged.push_back({key, 1, 0});
    while (removed.load() < kJobs && !failed) {
      if (!store->ShareKeyCosts(charged, many).ok()) failed = true;
    }
  });
  for (int p = 0; p < 2; ++p) {
    threads.emplace_back([&, p] {
      auto store = *OpenPostgresStore(server.conninfo(), {"producer" + std::to_string(p)});
      for (int i = 0; i < kPerProducer;) {
        std::vector<StoredJob> batch;
        const int n = i % 7 == 0 ? 5 : 1;  // now and then a batch
        for (int b = 0; b < n && i < kPerProducer; ++b, ++i) {
          batch.push_back(Job("fetch", "r", "k" + std::to_string((i * 7 + p) % 4)));
        }
        if (!store->AddJobs(batch).ok()) failed = true;
        stored += static_cast<int>(batch.size());
      }
    });
  }
  for (int c = 0; c < 2; ++c) {
    threads.emplace_back([&, c] {
      auto store = *OpenPostgresStore(server.conninfo(), {"replica" + std::to_string(c)});
      std::mt19937 random(c);
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (removed.load() < kJobs && std::chrono::steady_clock::now() < give_up) {
        StatusOr<std::vector<StoredJob>> claimed = store->ClaimJobs(types, 20, 60);
        if (!claimed.ok()) {
          failed = true;
          return;
        }
        std::vector<std::uint64_t> done;
        for (const StoredJob& job : *claimed) {
          const std::uint32_t roll = random() % 10;
          if (roll == 0) {
            (void)store->ReleaseJob(job.sequence);  // given back: ready again
          } else if (roll == 1 && job.attempts == 0) {
            (void)store->DeferJob(job.sequence, 1, "retry");  // due at once, off the heads
          } else {
            done.push_back(job.sequence);
          }
        }
        StatusOr<std::vector<Status>> gone = store->RemoveJobs(done);
        if (!gone.ok()) failed = true;
        removed += static_cast<int>(done.size());
      }
    });
  }
  // Read while they run: the heads are exact at every commit.
  int reads = 0;
  while (removed.load() < kJobs && !failed && reads < 2000) {
    CHECK(server.Sql(mismatches) == "0");
    ++reads;
  }
  for (std::thread& t : threads) t.join();
  CHECK_FALSE(failed.load());
  CHECK(stored.load() == kJobs);
  CHECK(removed.load() == kJobs);
  CHECK(server.Sql("SELECT count(*) FROM fairgate_durable_jobs") == "0");
  CHECK(server.Sql("SELECT count(*) FROM fairgate_key_heads") == "0");
  // An operator's purge of ready jobs (a DELETE of many rows) refreshes each key once.
  std::vector<StoredJob> more;
  for (int i = 0; i < 60; ++i) more.push_back(Job("fetch", "r", "k" + std::to_string(i % 3)));
  REQUIRE(schema->AddJobs(more).ok());
  server.Sql("DELETE FROM fairgate_durable_jobs WHERE sequence % 2 = 0 OR fairness_key = 'k1'");
  CHECK(server.Sql(mismatches) == "0");
  CHECK(server.Sql("SELECT count(*) FROM fairgate_key_heads") == "2");
}

// A key's head moves past the jobs claimed; a job of the key that is ready again afterwards (given
// back, or dead and revived) comes before the head, and its key's head goes back to it.
TEST_CASE("PostgresStore.AJobReadyAgainBeforeItsKeysHeadIsClaimedFirst" * kStoreAlone) {
  testing::PostgresServer server;
  auto store = *OpenPostgresStore(server.conninfo(), {"a"});
  std::vector<StoredJob> jobs;
  for (const char* id : {"a1", "a2", "a3", "a4"}) jobs.push_back(Job("fetch", id, "alice"));
  const std::vector<std::uint64_t> stored = *store->AddJobs(jobs);
  REQUIRE(stored.size() == 4);
  const std::vector<ClaimableType> types = {{"fetch", 1}};
  const std::string head = "SELECT head FROM fairgate_key_heads WHERE fairness_key = 'alice'";
  REQUIRE(Ids(*store->ClaimJobs(types, 2, 30)) == std::vector<std::string>{"a1", "a2"});
  CHECK(server.Sql(head) == std::to_string(stored[2]));
  REQUIRE(store->ReleaseJob(stored[0]).ok());  // a1 given back
  CHECK(server.Sql(head) == std::to_string(stored[0]));
  REQUIRE(store->KillJob(stored[1], "failed").ok());  // a2 dead, then revived
  REQUIRE(store->ReviveJob(stored[1]).ok());
  CHECK(server.Sql(head) == std::to_string(stored[0]));
  CHECK(Ids(*store->ClaimJobs(types, 3, 30)) == std::vector<std::string>{"a1", "a2", "a3"});
  CHECK(server.Sql(head) == std::to_string(stored[3]));
}

// The interleaving the keys' locks exist for, made to happen: a job stored for a key and not yet
// committed while a claim takes that key's only ready job. The claim's refresh of the key waits
// for the store's commit and then sees the new job; without the lock it would find no ready job,
// drop the key's head, and the new job would never be claimed. The same when the store is of
// 1,001 keys' jobs, which locks every key at once instead of each.
TEST_CASE("PostgresStore.AClaimThatEmptiesAKeyWhileAJobOfItIsBeingStoredKeepsTheNewJob" *
          kStoreAlone) {
  testing::PostgresServer server;
  auto store = *OpenPostgresStore(server.conninfo(), {"a"});
  for (const int keys : {1, 1001}) {
    CAPTURE(keys);
    server.Sql("TRUNCATE fairgate_durable_jobs");
    REQUIRE(store->AddJob(Job("fetch", "first", "k")).ok());
    // The producer's transaction: the jobs are stored (their trigger ran) but not committed.
    PGconn* producer = PQconnectdb(server.conninfo().c_str());
    REQUIRE(PQstatus(producer) == CONNECTION_OK);
    auto exec = [&](const std::string& sql) {
      PGresult* r = PQexec(producer, sql.c_str());
      const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
      PQclear(r);
      return ok;
    };
    REQUIRE(exec("BEGIN"));
    REQUIRE(
        exec("INSERT INTO fairgate_durable_jobs (type, id, fairness_key, payload, submitted_at) "
             "SELECT 'fetch', 'second', CASE WHEN i = 0 THEN 'k' ELSE 'other' || i END, '', 0 "
             "FROM generate_series(0, " +
             std::to_string(keys - 1) + ") AS i"));
    std::vector<StoredJob> first;
    std::thread claim([&] { first = *store->ClaimJobs({{"fetch", 1}}, 1, 60); });
    // The claim's refresh waits for the producer's lock (or, without it, the claim ends).
    const std::string waiting =
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted";
    const bool waited = testing::Eventually([&] { return server.Sql(waiting) == "1"; });
    CHECK(exec("COMMIT"));
    claim.join();
    PQfinish(producer);
    CHECK(waited);
    REQUIRE(first.size() == 1);
    CHECK(first[0].id == "first");
    // The second job is the key's head, and a claim finds it first.
    const std::vector<StoredJob> second = *store->ClaimJobs({{"fetch", 1}}, 1, 60);
    REQUIRE(second.size() == 1);
    CHECK(second[0].id == "second");
    CHECK(second[0].fairness_key == "k");
  }
}

// A replica claiming alone reads as many candidates as it claims, once its claims come back whole
// (PostgresStore::ClaimJobs); when another replica's claim under way is locking the first of
// them, the claim still takes as many as it asked for, the next ones in claim order.
TEST_CASE("PostgresStore.AClaimWhoseFirstJobsAnotherClaimIsLockingTakesTheNextOnes" * kStoreAlone) {
  testing::PostgresServer server;
  auto store = *OpenPostgresStore(server.conninfo(), {"a"});
  for (int i = 0; i < 8; ++i) {
    REQUIRE(store->AddJob(Job("fetch", "j" + std::to_string(i), "k" + std::to_string(i))).ok());
  }
  // Two claims that come back whole: the next reads no more candidates than it claims.
  for (const char* first : {"j0", "j1"}) {
    const std::vector<StoredJob> claimed = *store->ClaimJobs({{"fetch", 1}}, 1, 60);
    REQUIRE(claimed.size() == 1);
    CHECK(claimed[0].id == first);
  }
  // Another replica's claim, under way: it has locked the next two jobs in claim order.
  PGconn* other = PQconnectdb(server.conninfo().c_str());
  REQUIRE(PQstatus(other) == CONNECTION_OK);
  auto exec = [&](const std::string& sql, ExecStatusType want) {
    PGresult* r = PQexec(other, sql.c_str());
    const bool ok = PQresultStatus(r) == want;
    PQclear(r);
    return ok;
  };
  REQUIRE(exec("BEGIN", PGRES_COMMAND_OK));
  REQUIRE(exec("SELECT sequence FROM fairgate_durable_jobs WHERE id IN ('j2', 'j3') FOR UPDATE",
               PGRES_TUPLES_OK));
  auto ids_claimed = [&](std::size_t count) {
    const std::vector<StoredJob> claimed = *store->ClaimJobs({{"fetch", 1}}, count, 60);
    std::vector<std::string> ids;
    for (const StoredJob& job : claimed) ids.push_back(job.id);
    return ids;
  };
  CHECK(ids_claimed(2) == std::vector<std::string>{"j4", "j5"});
  CHECK(exec("ROLLBACK", PGRES_COMMAND_OK));
  PQfinish(other);
  // The locked jobs were never taken: the next claim finds them first.
  CHECK(ids_claimed(4) == std::vector<std::string>{"j2", "j3", "j6", "j7"});
}

// The same for a claim whose jobs take leases: after claims that came back whole, a claim of n
// locks n of the first 2 n candidates; when other transactions are locking all of those, it
// locks again at once from the first 8 n (n of them here: its one type is sure), rather than
// come back empty. (Another replica's claim with leases is not one of them: the next test.)
TEST_CASE("PostgresStore.AClaimWithLeasesWhoseCandidatesAnotherTransactionIsLockingReadsFurther" *
          kStoreAlone) {
  testing::PostgresServer server;
  auto store = *OpenPostgresStore(server.conninfo(), {"a"});
  const std::vector<ClaimableType> fetch = {{"fetch", 1, "repo", 1, 0}};
  for (int i = 0; i < 12; ++i) {
    const std::string n = std::to_string(i);
    REQUIRE(store->AddJob(Job("fetch", "j" + n, "k" + n)).ok());
  }
  for (const char* first : {"j0", "j1"}) {
    const std::vector<StoredJob> claimed = *store->ClaimJobs(fetch, 1, 60);
    REQUIRE(claimed.size() == 1);
    CHECK(claimed[0].id == first);
  }
  PGconn* other = PQconnectdb(server.conninfo().c_str());
  REQUIRE(PQstatus(other) == CONNECTION_OK);
  REQUIRE(Command(other, "BEGIN"));
  PGresult* locked = PQexec(other,
                            "SELECT sequence FROM fairgate_durable_jobs "
                            "WHERE id IN ('j2', 'j3', 'j4', 'j5') FOR UPDATE");
  REQUIRE(PQntuples(locked) == 4);
  PQclear(locked);
  auto ids_claimed = [&](std::size_t count) {
    const std::vector<StoredJob> claimed = *store->ClaimJobs(fetch, count, 60);
    std::vector<std::string> ids;
    for (const StoredJob& job : claimed) ids.push_back(job.id);
    return ids;
  };
  CHECK(ids_claimed(2) == std::vector<std::string>{"j6", "j7"});
  CHECK(Command(other, "ROLLBACK"));
  PQfinish(other);
  CHECK(ids_claimed(4) == std::vector<std::string>{"j2", "j3", "j4", "j5"});
}

// Claims with leases run one at a time: a claim waits for another replica's claim under way (here
// a connection of the test's that takes the claims' lock, locks the first jobs and marks them
// claimed) and then takes the jobs after that claim's, rather than reading past its locked
// candidates beside it. A claim under way on a replica that stopped holds the others back no
// longer than the session's idle timeout (the store's sessions' setting, taken here too).
TEST_CASE("PostgresStore.AClaimWithLeasesWaitsForAnotherReplicasClaimUnderWayAndTakesTheNextJobs" *
          kStoreAlone) {
  testing::PostgresServer server;
  auto store = *OpenPostgresStore(server.conninfo(), {"a"});
  const std::vector<ClaimableType> fetch = {{"fetch", 1, "repo", 1, 0}};
  for (int i = 0; i < 8; ++i) {
    const std::string n = std::to_string(i);
    REQUIRE(store->AddJob(Job("fetch", "j" + n, "k" + n)).ok());
  }
  auto claim_ids = [&](std::size_t count) {
    StatusOr<std::vector<StoredJob>> claimed = store->ClaimJobs(fetch, count, 60);
    std::vector<std::string> ids;
    if (!claimed.ok()) return std::vector<std::string>{claimed.status().ToString()};
    for (const StoredJob& job : claimed.value()) ids.push_back(job.id);
    return ids;
  };
  auto waiting_for_the_lock = [&] {
    return server.Sql(
               "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
               "AND classid = 727125 AND objid = 0 AND NOT granted") == "1";
  };
  // Declared before `other`, which is closed first when a check fails: a claim still waiting
  // then ends, and so does the future's wait for it.
  std::future<std::vector<std::string>> waiting;
  PGconn* other = PQconnectdb(server.conninfo().c_str());
  const std::unique_ptr<PGconn, decltype(&PQfinish)> close_other(other, &PQfinish);
  REQUIRE(PQstatus(other) == CONNECTION_OK);
  REQUIRE(Command(other, "BEGIN"));
  PGresult* r = PQexec(other, store::postgres::kLockLeasedClaims);
  REQUIRE(PQresultStatus(r) == PGRES_TUPLES_OK);
  PQclear(r);
  r = PQexec(other,
             "SELECT sequence FROM fairgate_durable_jobs WHERE id IN ('j0', 'j1') FOR UPDATE");
  REQUIRE(PQntuples(r) == 2);
  PQclear(r);
  waiting = std::async(std::launch::async, claim_ids, 2);
  REQUIRE(testing::Eventually(waiting_for_the_lock));
  CHECK(waiting.wait_for(std::chrono::milliseconds(0)) == std::future_status::timeout);
  REQUIRE(Command(other,
                  "UPDATE fairgate_durable_jobs SET holder = 'b', lease_until = 1e12 "
                  "WHERE id IN ('j0', 'j1')"));
  REQUIRE(Command(other, "COMMIT"));
  CHECK(waiting.get() == std::vector<std::string>{"j2", "j3"});

  // A replica stopped in the middle of its claim: its session ends after a second idle, and with
  // it the lock.
  REQUIRE(Command(other, "SET idle_in_transaction_session_timeout = 1000"));
  REQUIRE(Command(other, "BEGIN"));
  r = PQexec(other, store::postgres::kLockLeasedClaims);
  REQUIRE(PQresultStatus(r) == PGRES_TUPLES_OK);
  PQclear(r);
  waiting = std::async(std::launch::async, claim_ids, 2);
  REQUIRE(waiting.wait_for(std::chrono::seconds(60)) == std::future_status::ready);
  CHECK(waiting.get() == std::vector<std::string>{"j4", "j5"});
}

// A server's lock table has room for 64 locks a connection by default (max_locks_per_transaction),
// and the keys' triggers once took a lock for each key a statement touched: storing, sharing,
// saving or forgetting 20,000 keys at once failed "out of shared memory", and a replica that
// charged that many keys in one claim interval could never share their costs again. Larger sets
// lock every key at once.
TEST_CASE("PostgresStore.TwentyThousandKeysAreStoredSharedSavedAndForgottenAtOnce" * kStoreAlone) {
  testing::PostgresServer server;
  auto store = *OpenPostgresStore(server.conninfo(), {"a"});
  constexpr int kKeys = 20000;
  std::vector<std::string> names;
  std::vector<SavedKey> charged;
  std::vector<StoredJob> jobs;
  for (int k = 0; k < kKeys; ++k) {
    names.push_back("k" + std::to_string(k));
    charged.push_back({names.back(), 2, 0});
    jobs.push_back(Job("fetch", "r", names.back()));
  }
  const Status added = store->AddJobs(jobs).status();
  REQUIRE_MESSAGE(added.ok(), added.ToString());
  const StatusOr<std::vector<SavedKey>> totals = store->ShareKeyCosts(charged, names);
  REQUIRE_MESSAGE(totals.ok(), totals.status().ToString());
  CHECK(totals->size() == kKeys);
  CHECK(std::all_of(totals->begin(), totals->end(),
                    [](const SavedKey& k) { return k.accumulated_cost == 2; }));
  const std::string heads_at = "SELECT count(*) FROM fairgate_key_heads WHERE cost = ";
  CHECK(server.Sql(heads_at + "2") == "20000");
  for (SavedKey& k : charged) k = {k.key, 3, 100};  // idle since 100
  const Status saved = store->SaveLearned({{}, charged, {}}, 0, 0);
  REQUIRE_MESSAGE(saved.ok(), saved.ToString());
  CHECK(server.Sql(heads_at + "3") == "20000");
  const Status forgot = store->SaveLearned({}, 0, 200);  // every key idle for too long
  REQUIRE_MESSAGE(forgot.ok(), forgot.ToString());
  CHECK(server.Sql("SELECT count(*) FROM fairgate_keys") == "0");
  CHECK(server.Sql(heads_at + "0") == "20000");
  // The heads are each key's job: a claim of every job takes them all.
  const StatusOr<std::vector<StoredJob>> claimed = store->ClaimJobs({{"fetch", 1}}, kKeys, 60);
  REQUIRE_MESSAGE(claimed.ok(), claimed.status().ToString());
  CHECK(claimed->size() == kKeys);
}

TEST_CASE("PostgresStore.ALapsedLeaseGoesToAnotherReplicaWithAGreaterTokenAndTheOldHolderIsFenced" *
          kStoreAlone) {
  testing::PostgresServer server;
  testing::CheckALapsedClaimGoesToAnotherReplicaAndFencesTheOld(Replicas(server));
}

// The claim counts the attempt its replica will begin, so that beginning it needs no write of its
// own: BeginAttempt answers while the server is down. A job given back or killed unbegun gives
// that attempt back; past the lease's sure part, the server is asked again and counts nothing
// twice.
TEST_CASE("PostgresStore.AClaimCountsTheAttemptAndBeginningItNeedsNoRoundTrip" * kStoreAlone) {
  testing::PostgresServer server;
  auto a = *OpenPostgresStore(server.conninfo(), {"a"});
  const std::vector<ClaimableType> types = {{"fetch", 1}};
  std::vector<std::uint64_t> jobs;
  for (const char* id : {"begun", "released", "killed"}) {
    jobs.push_back(*a->AddJob(Job("fetch", id, "k")));
  }
  std::vector<StoredJob> claimed = *a->ClaimJobs(types, 3, 30);
  REQUIRE(claimed.size() == 3);
  for (const StoredJob& job : claimed) CHECK(job.attempts == 0u);  // as before the claim
  const std::vector<StoredJob> counted = *a->LiveJobs();
  for (const StoredJob& job : counted) CHECK(job.attempts == 1u);
  server.Stop();
  CHECK(*a->BeginAttempt(jobs[0]) == 1u);
  CHECK(a->LiveJobs().status().code() == absl::StatusCode::kUnavailable);
  server.Start();
  REQUIRE(a->ReleaseJob(jobs[1]).ok());
  REQUIRE(a->KillJob(jobs[2], "refused").ok());
  auto live = *a->LiveJobs();
  REQUIRE(live.size() == 2);
  CHECK(live[0].attempts == 1u);  // begun: it counts
  CHECK(live[1].attempts == 0u);  // given back unbegun
  CHECK(a->DeadJobs()->front().attempts == 0u);
  // Claimed again with a short lease that passes unrenewed: BeginAttempt asks the server, which
  // refuses (the lease is over), and the attempt is not counted a second time.
  REQUIRE(a->ClaimJobs(types, 1, 0.2)->size() == 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK(a->BeginAttempt(jobs[1]).status().code() == absl::StatusCode::kAborted);
  live = *a->LiveJobs();
  CHECK(live[1].attempts == 1u);
}

// A batch of removals is one statement: it removes the jobs this replica holds and those nobody
// holds, refuses one another replica claimed after this one's lease passed, and gives back the
// leases the claims took, so that another replica may take the repository at once.
TEST_CASE("PostgresStore.RemovingABatchRemovesWhatItHoldsRefusesWhatItLostAndGivesLeasesBack" *
          kStoreAlone) {
  testing::PostgresServer server;
  testing::CheckABatchOfRemovals(Replicas(server));
}

// A replica renews its leases and removes its finished jobs at once, on two connections: the
// renewal passes over the rows a removal is deleting (left to the next renewal), so neither
// waits on the other in a cycle. Here the removals come newest first (as jobs that finish out of
// order do), in batches of 500, while the renewals go on: every removal and every renewal
// succeeds. Before, the renewal waited for such rows while holding others the removal wanted,
// each locking in its own order, and they deadlocked (the server broke the cycle after a second
// by failing one: in three runs of this test, each failed).
TEST_CASE("PostgresStore.RenewingLeasesWhileRemovingJobsNeverDeadlocks" * kStoreAlone) {
  testing::PostgresServer server;
  auto store = *OpenPostgresStore(server.conninfo(), {"a"});
  const ClaimableType fetch{"fetch", 1};
  // Keys of distinct costs, the last one cheapest: claims take the jobs key by key, so their rows'
  // new versions lie in an order other than the sequences' (a renewal that went by the table's
  // order met a removal that went by sequence, each holding a row the other wanted).
  std::vector<SavedKey> costs;
  for (int k = 0; k < 50; ++k) costs.push_back({"k" + std::to_string(k), 50.0 - k, 0});
  REQUIRE(store->SaveLearned({{}, costs, {}}, 0, 0).ok());
  for (int round = 0; round < 5; ++round) {
    std::vector<StoredJob> batch;
    for (int i = 0; i < 2000; ++i) {
      StoredJob job;
      job.type = "fetch";
      job.id = "r" + std::to_string(i);
      job.fairness_key = "k" + std::to_string(i % 50);
      batch.push_back(job);
    }
    REQUIRE(store->AddJobs(batch).ok());
    std::vector<std::uint64_t> held;
    for (;;) {
      const StatusOr<std::vector<StoredJob>> claimed = store->ClaimJobs({fetch}, 512, 60);
      REQUIRE(claimed.ok());
      if (claimed->empty()) break;
      for (const StoredJob& job : *claimed) held.push_back(job.sequence);
    }
    REQUIRE(held.size() == 2000u);
    std::sort(held.rbegin(), held.rend());
    std::atomic<bool> removing{true};
    std::atomic<int> renewal_errors{0};
    std::thread renewer([&] {
      while (removing.load()) {
        if (!store->RenewLeases(60).ok()) ++renewal_errors;
      }
    });
    int removal_errors = 0;
    for (std::size_t at = 0; at < held.size(); at += 500) {
      const std::vector<std::uint64_t> part(held.begin() + static_cast<std::ptrdiff_t>(at),
                                            held.begin() + static_cast<std::ptrdiff_t>(at + 500));
      const StatusOr<std::vector<Status>> removed = store->RemoveJobs(part);
      if (!removed.ok()) {
        ++removal_errors;
        MESSAGE(removed.status().ToString());
        continue;
      }
      for (const Status& s : *removed) CHECK(s.ok());
    }
    removing = false;
    renewer.join();
    CHECK(removal_errors == 0);
    CHECK(renewal_errors.load() == 0);
  }
  CHECK(server.Sql("SELECT count(*) FROM fairgate_durable_jobs") == "0");
}

TEST_CASE("PostgresStore.KeysCostsAreSummedOverReplicas" * kStoreAlone) {
  testing::PostgresServer server;
  testing::CheckKeysCostsAreSummedOverReplicas(Replicas(server));
}

TEST_CASE("PostgresStore.GroupsCostsAreSummedOverReplicasApartFromKeys") {
  testing::PostgresServer server;
  testing::CheckGroupsCostsAreSummedOverReplicasApartFromKeys(Replicas(server));
}

// A replica of one slot on `server` whose clones each cost 10 (reconcile off: figures to reason
// about), sharing costs every 50 ms; `key_group`: its rule of groups, if any.
std::unique_ptr<Scheduler> CostSharingReplica(
    const testing::PostgresServer& server, const std::string& name,
    std::function<std::string(std::string_view)> key_group = nullptr) {
  SchedulerOptions o;
  o.persistence.store = std::shared_ptr<Store>(*OpenPostgresStore(server.conninfo(), {name}));
  o.rule.max_concurrency = 1;
  o.rule.reconcile = false;
  o.fleet.claim_interval = Seconds(0.05);
  o.runtime.warn = [](std::string_view) {};
  o.runtime.key_group = std::move(key_group);
  auto s = *Scheduler::Create(o);
  REQUIRE(s->RegisterType("clone", testing::Type(1, 1, "", 10)).ok());
  return s;
}

// Queues a clone of each of `keys` on `replica`, each adding its key to `order` when it runs.
void QueueRecorded(Scheduler& replica, const std::vector<std::string>& keys, testing::Log& order) {
  for (const std::string& key : keys) {
    REQUIRE(replica
                .Submit({TypeName("clone"), JobId("r-" + key), FairnessKey(key)},
                        [&order, key](const Context&) {
                          order.Add(key);
                          return absl::OkStatus();
                        },
                        {})
                .ok());
  }
}

// A tenant whose keys cloned on one replica is behind another tenant on the next replica,
// although none of its keys there has been charged: the group's cost is the fleet's.
TEST_CASE("PostgresStore.ATenantSpreadingItsKeysOverReplicasIsChargedOnce") {
  testing::PostgresServer server;
  // The farm's keys are "farm-*".
  auto farm = [](std::string_view key) {
    return key.substr(0, 5) == "farm-" ? std::string("farm") : std::string();
  };
  auto a = CostSharingReplica(server, "a", farm);
  auto b = CostSharingReplica(server, "b", farm);
  auto ok = [](const Context&) { return absl::OkStatus(); };
  // The farm clones on a from three keys (10 each) ...
  for (const char* key : {"farm-1", "farm-2", "farm-3"}) {
    REQUIRE(a->RunSync(Context::Background(), {TypeName("clone"), JobId(key), FairnessKey(key)}, ok)
                .ok());
  }
  // ... then queues on b, from a fourth key, behind a running job, before modest does.
  testing::Log order;
  auto blocker = std::make_shared<testing::Gate>();
  SubmitBlocked(*b, "clone", "blocker", blocker);
  QueueRecorded(*b, {"farm-4", "modest"}, order);
  // Within a share or two, b's farm has what a charged it; farm-4 itself was charged nothing.
  REQUIRE(testing::Eventually([&] { return b->GroupAccumulatedCost("farm") == 30.0; }));
  CHECK(b->AccumulatedCost("farm-4") == 0.0);
  blocker->Open();
  REQUIRE(testing::Eventually([&] { return order.entries().size() == 2; }));
  CHECK(order.entries() == std::vector<std::string>{"modest", "farm-4"});
  REQUIRE(testing::Eventually([&] { return b->GroupAccumulatedCost("farm") == 40.0; }));
  auto store = *OpenPostgresStore(server.conninfo());
  REQUIRE(testing::Eventually(
      [&] { return store->ShareGroupCosts({}, {"farm"})->at(0).accumulated_cost == 40.0; }));
  CHECK(store->ShareKeyCosts({}, {"farm"})->empty());  // a group is not a key
}

TEST_CASE("PostgresStore.AClientSpreadingItsWorkOverReplicasIsChargedOnce") {
  testing::PostgresServer server;
  auto a = CostSharingReplica(server, "a");
  auto b = CostSharingReplica(server, "b");
  auto ok = [](const Context&) { return absl::OkStatus(); };
  // greedy clones three repositories on a (10 each) ...
  for (const char* id : {"r1", "r2", "r3"}) {
    REQUIRE(
        a->RunSync(Context::Background(), {TypeName("clone"), JobId(id), FairnessKey("greedy")}, ok)
            .ok());
  }
  // ... then queues on b behind a running job, before modest does.
  testing::Log order;
  auto blocker = std::make_shared<testing::Gate>();
  SubmitBlocked(*b, "clone", "blocker", blocker);
  QueueRecorded(*b, {"greedy", "modest"}, order);
  // Within a share or two, b charges greedy what a charged it.
  REQUIRE(testing::Eventually([&] { return b->AccumulatedCost("greedy") == 30.0; }));
  blocker->Open();
  REQUIRE(testing::Eventually([&] { return order.entries().size() == 2; }));
  CHECK(order.entries() == std::vector<std::string>{"modest", "greedy"});
  // b adds its own charge to the fleet's total: 30 from a, 10 for the job on b. (a reads the
  // total again when greedy next has work there: idle keys are not read.)
  REQUIRE(testing::Eventually([&] { return b->AccumulatedCost("greedy") == 40.0; }));
  CHECK(b->AccumulatedCost("modest") == 10.0);
  auto store = *OpenPostgresStore(server.conninfo());
  REQUIRE(testing::Eventually(
      [&] { return store->ShareKeyCosts({}, {"greedy"})->at(0).accumulated_cost == 40.0; }));
}

// A replica's store whose shares of keys' costs each take `delay` longer, recording when each
// call began and ended.
class SlowShareStore final : public testing::ForwardingSharedStore {
 public:
  using Clock = std::chrono::steady_clock;
  struct Call {
    Clock::time_point began, ended;
  };
  SlowShareStore(std::shared_ptr<SharedStore> inner, std::chrono::milliseconds delay)
      : ForwardingSharedStore(std::move(inner)), delay_(delay) {}
  StatusOr<std::vector<SavedKey>> ShareKeyCosts(const std::vector<SavedKey>& charged,
                                                const std::vector<std::string>& keys) override {
    const auto began = Clock::now();
    std::this_thread::sleep_for(delay_);
    StatusOr<std::vector<SavedKey>> totals = inner_->ShareKeyCosts(charged, keys);
    std::lock_guard lock(mutex_);
    calls_.push_back({began, Clock::now()});
    return totals;
  }
  std::vector<Call> calls() {
    std::lock_guard lock(mutex_);
    return calls_;
  }

 private:
  const std::chrono::milliseconds delay_;
  std::mutex mutex_;
  std::vector<Call> calls_;
};

// The gaps between a replica's first three shares of keys' costs, each taking `delay` of the
// store's, with shares due every `claim_interval`: the share's length and the gap after it. A
// running job keeps its key busy, so that every share calls the store.
std::vector<std::pair<double, double>> ShareGaps(const testing::PostgresServer& server,
                                                 std::chrono::milliseconds delay,
                                                 double claim_interval) {
  auto slow = std::make_shared<SlowShareStore>(
      std::shared_ptr<SharedStore>(*OpenPostgresStore(server.conninfo(), {"a"})), delay);
  SchedulerOptions o;
  o.persistence.store = slow;
  o.rule.max_concurrency = 1;
  o.fleet.claim_interval = Seconds(claim_interval);
  o.runtime.warn = [](std::string_view) {};
  auto a = *Scheduler::Create(o);
  REQUIRE(a->RegisterType("clone", testing::Type(1, 1)).ok());
  auto gate = std::make_shared<testing::Gate>();
  SubmitBlocked(*a, "clone", "busy", gate);
  REQUIRE(testing::Eventually([&] { return slow->calls().size() >= 3; }));
  gate->Open();
  REQUIRE(a->Shutdown(Context::Background()).ok());
  const std::vector<SlowShareStore::Call> calls = slow->calls();
  std::vector<std::pair<double, double>> gaps;
  for (std::size_t i = 1; i < 3; ++i) {
    gaps.emplace_back(
        std::chrono::duration<double>(calls[i - 1].ended - calls[i - 1].began).count(),
        std::chrono::duration<double>(calls[i].began - calls[i - 1].ended).count());
  }
  return gaps;
}

// Shares that take a tenth of claim_interval (50 ms of 500 ms) come twenty times their length
// apart, not every claim_interval: sharing takes at most a twenty-first of the store's time,
// however many keys a share carries.
TEST_CASE("PostgresStore.ASlowShareOfCostsIsFollowedByTheNextTwentyTimesItsLengthAfter") {
  testing::PostgresServer server;
  for (const auto& [length, gap] : ShareGaps(server, std::chrono::milliseconds(50), 0.5)) {
    INFO("a share of ", length, " s, then ", gap, " s to the next");
    CHECK(gap >= 20 * length);
  }
}

// Shares that take longer than claim_interval (200 ms of 50 ms), as one held up by an outage may,
// come twenty claim_intervals apart (1 s), not twenty times their length (4 s).
TEST_CASE("PostgresStore.SharesLongerThanTheClaimIntervalComeTwentyIntervalsApart") {
  testing::PostgresServer server;
  for (const auto& [length, gap] : ShareGaps(server, std::chrono::milliseconds(200), 0.05)) {
    INFO("a share of ", length, " s, then ", gap, " s to the next");
    CHECK(gap >= 1.0);
    CHECK(gap < 20 * length);
  }
}

// A replica's store whose first share of keys' costs waits for `gate` (a minute at most: longer
// than a test's wait for what should happen meanwhile), counting its renewals of leases.
class HeldShareStore final : public testing::ForwardingSharedStore {
 public:
  HeldShareStore(std::shared_ptr<SharedStore> inner, std::shared_ptr<testing::Gate> gate)
      : ForwardingSharedStore(std::move(inner)), gate_(std::move(gate)) {}
  StatusOr<std::vector<SavedKey>> ShareKeyCosts(const std::vector<SavedKey>& charged,
                                                const std::vector<std::string>& keys) override {
    if (!sharing_.exchange(true)) gate_->Wait(std::chrono::minutes(1));
    return inner_->ShareKeyCosts(charged, keys);
  }
  StatusOr<std::size_t> RenewLeases(double lease_seconds) override {
    renewals_.fetch_add(1);
    return inner_->RenewLeases(lease_seconds);
  }
  bool sharing() const { return sharing_.load(); }
  int renewals() const { return renewals_.load(); }

 private:
  const std::shared_ptr<testing::Gate> gate_;
  std::atomic<bool> sharing_{false};
  std::atomic<int> renewals_{0};
};

// A share of costs that the store holds up (a lock on every key waited for, a slow server) holds
// up neither the replica's claims nor its renewals of the leases of the jobs it runs: it claims
// and runs a job stored meanwhile, and renews its leases.
TEST_CASE("PostgresStore.AShareHeldUpByTheStoreHoldsUpNeitherClaimsNorRenewals") {
  testing::PostgresServer server;
  auto share_gate = std::make_shared<testing::Gate>();
  auto held = std::make_shared<HeldShareStore>(
      std::shared_ptr<SharedStore>(*OpenPostgresStore(server.conninfo(), {"a"})), share_gate);
  SchedulerOptions o;
  o.persistence.store = held;
  o.rule.max_concurrency = 2;
  o.fleet.claim_interval = Seconds(0.05);
  o.fleet.lease_ttl = Seconds(0.6);  // renewed every 0.2 s
  o.runtime.warn = [](std::string_view) {};
  auto a = *Scheduler::Create(o);
  REQUIRE(a->RegisterType("fetch", testing::Type(2, 2)).ok());
  testing::Log ran;
  testing::Gate first_done;
  REQUIRE(a->RegisterDurable("fetch", [&](const DurableJob& job, const Context&) {
             ran.Add(std::string(job.payload));
             if (job.payload == "first") first_done.Wait();
             return absl::OkStatus();
           }).ok());
  REQUIRE(a->Recover().ok());
  // The first job runs and keeps its key busy, so that a share calls the store: the first is
  // held.
  REQUIRE(a->SubmitDurable({TypeName("fetch"), JobId("r1"), FairnessKey("k1")}, "first").ok());
  REQUIRE(testing::Eventually([&] { return held->sharing(); }));
  const int renewed = held->renewals();
  REQUIRE(a->SubmitDurable({TypeName("fetch"), JobId("r2"), FairnessKey("k2")}, "second").ok());
  CHECK(testing::Eventually(
      [&] { return ran.entries().size() == 2 && held->renewals() >= renewed + 2; }));
  share_gate->Open();
  first_done.Open();
  REQUIRE(a->Shutdown(Context::Background()).ok());
  CHECK(ran.entries() == std::vector<std::string>{"first", "second"});
}

TEST_CASE("PostgresStore.AResourceLeaseHasLimitSlotsFencingTokensAndLapses" * kStoreAlone) {
  testing::PostgresServer server;
  testing::CheckResourceLeases(Replicas(server));
}

TEST_CASE("PostgresStore.AClaimTakesTheLeasesItsJobsNeedInTheSameTransaction" * kStoreAlone) {
  testing::PostgresServer server;
  testing::CheckAClaimTakesItsJobsLeases(Replicas(server));
}

// A claim takes all its jobs' leases in one statement. A slot it read as free but another
// replica was taking (an insert not yet committed) is lost when that replica commits; the claim
// then takes the resource's next free slot rather than drop the job. Here another session takes
// slot 0 of linux.git (two slots) in an open transaction, the claim waits for it, and that
// session commits: the claim's job comes with slot 1.
TEST_CASE("PostgresStore.AClaimThatLosesASlotToAnotherReplicaTakesTheResourcesNextFreeOne" *
          kStoreAlone) {
  testing::PostgresServer server;
  auto a = *OpenPostgresStore(server.conninfo(), {"a"});
  StoredJob job;
  job.type = "fetch";
  job.id = "linux.git";
  job.fairness_key = "k";
  const std::uint64_t linux_job = *a->AddJob(job);
  job.id = "git.git";
  const std::uint64_t git = *a->AddJob(job);
  PGconn* other = PQconnectdb(server.conninfo().c_str());
  REQUIRE(PQstatus(other) == CONNECTION_OK);
  auto exec = [&](const char* sql) { return Command(other, sql); };
  REQUIRE(exec("BEGIN"));
  REQUIRE(
      exec("INSERT INTO fairgate_resource_leases VALUES ('repo', 'linux.git', 0, 'other', "
           "extract(epoch from clock_timestamp()) + 60, nextval('fairgate_lease_tokens'))"));
  StatusOr<std::vector<StoredJob>> claimed;
  std::thread claim([&] { claimed = a->ClaimJobs({{"fetch", 1, "repo", 2, 0}}, 2, 30); });
  // Until the claim waits on the other session's slot (bounded).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (server.Sql("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'") ==
             "0" &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  CHECK(exec("COMMIT"));
  claim.join();
  PQfinish(other);
  REQUIRE_MESSAGE(claimed.ok(), claimed.status().ToString());
  std::set<std::uint64_t> got;
  for (const StoredJob& j : *claimed) {
    got.insert(j.sequence);
    CHECK(j.resource_token > 0u);
  }
  CHECK(got == std::set<std::uint64_t>{linux_job, git});
  CHECK(server.Sql("SELECT string_agg(slot || ':' || holder, ',' ORDER BY slot) "
                   "FROM fairgate_resource_leases WHERE id = 'linux.git'") == "0:other,1:a");
}

// Each connection of the store cuts a transaction left idle for a second (a replica stopped in
// the middle of one would otherwise hold its locks), and compiles no statement just in time:
// the server's JIT took longer to compile a claim with leases than the claim took to run.
TEST_CASE("PostgresStore.ItsConnectionsCutIdleTransactionsAndCompileNothingJustInTime" *
          kStoreAlone) {
  testing::PostgresServer server;
  store::postgres::ConnectionPool pool(server.conninfo(), 1);
  store::postgres::ConnectionPool::Session session = pool.Take();
  auto show = [&](const char* setting) {
    StatusOr<store::postgres::Result> r = pool.Retrying(*session, [&] {
      return store::postgres::Exec(*session, (std::string("SHOW ") + setting).c_str(), {},
                                   "show a setting");
    });
    REQUIRE_MESSAGE(r.ok(), r.status().ToString());
    return std::string(PQgetvalue(r->get(), 0, 0));
  };
  CHECK(show("jit") == "off");
  CHECK(show("idle_in_transaction_session_timeout") == "1s");
  // The server's own default, which the store's settings override.
  CHECK(server.Sql("SHOW jit") == "on");
}

// store::postgres::OnGenericIndexPlans, which both claims' statements and the renewal run in: a
// prepared statement run in it is planned once, generically, however often it runs, with
// sequential and bitmap scans set aside, and the session's own settings (PostgreSQL's defaults:
// custom plans for a prepared statement's first five runs, sequential and bitmap scans where the
// planner judges them cheaper) are back after.
TEST_CASE("PostgresStore.AStatementOnGenericIndexPlansIsPlannedOnceAndTheSessionKeepsItsMode" *
          kStoreAlone) {
  testing::PostgresServer server;
  store::postgres::ConnectionPool pool(server.conninfo(), 1);
  store::postgres::ConnectionPool::Session session = pool.Take();
  store::postgres::Link& link = *session;
  const char* count = "SELECT count(*) FROM pg_class WHERE relname = $1";
  auto run = [&](bool generic) {
    StatusOr<store::postgres::Result> r = pool.Retrying(link, [&] {
      auto statement = [&] { return store::postgres::Exec(link, count, {{"pg_class"}}, "count"); };
      return generic ? store::postgres::OnGenericIndexPlans(link, statement) : statement();
    });
    REQUIRE_MESSAGE(r.ok(), r.status().ToString());
    CHECK(std::string(PQgetvalue(r->get(), 0, 0)) == "1");
  };
  // The plans this session made of `count` so far: "generic custom".
  auto plans = [&] {
    StatusOr<store::postgres::Result> r = store::postgres::Exec(
        link,
        "SELECT generic_plans || ' ' || custom_plans FROM pg_prepared_statements "
        "WHERE statement = $1",
        {{count}}, "read the plans");
    REQUIRE_MESSAGE(r.ok(), r.status().ToString());
    REQUIRE(PQntuples(r->get()) == 1);
    return std::string(PQgetvalue(r->get(), 0, 0));
  };
  for (int i = 0; i < 3; ++i) run(true);
  CHECK(plans() == "3 0");
  for (int i = 0; i < 2; ++i) run(false);
  CHECK(plans() == "3 2");
  auto setting = [&](const char* name) {
    StatusOr<store::postgres::Result> r =
        store::postgres::Exec(link, "SELECT current_setting($1)", {{name}}, "read a setting");
    REQUIRE(r.ok());
    return std::string(PQgetvalue(r->get(), 0, 0));
  };
  CHECK(store::postgres::OnGenericIndexPlans(link, [&] { return setting("enable_seqscan"); }) ==
        "off");
  CHECK(store::postgres::OnGenericIndexPlans(link, [&] { return setting("enable_bitmapscan"); }) ==
        "off");
  CHECK(setting("plan_cache_mode") == "auto");
  CHECK(setting("enable_seqscan") == "on");
  CHECK(setting("enable_bitmapscan") == "on");
}

// Within a transaction (a claim with leases is one): a statement run on generic plans there is
// planned so, and a failure of it leaves the session its own settings once the transaction is
// rolled back (the reset after it fails in the aborted transaction).
TEST_CASE("PostgresStore.OnGenericIndexPlansInATransactionThatFailsLeavesTheSessionsMode" *
          kStoreAlone) {
  testing::PostgresServer server;
  store::postgres::ConnectionPool pool(server.conninfo(), 1);
  store::postgres::ConnectionPool::Session session = pool.Take();
  store::postgres::Link& link = *session;
  auto exec = [&](const char* sql, std::vector<store::postgres::Param> params = {}) {
    return store::postgres::Exec(link, sql, params, "a test's statement");
  };
  auto mode = [&] {
    StatusOr<store::postgres::Result> r = exec("SHOW plan_cache_mode");
    REQUIRE(r.ok());
    return std::string(PQgetvalue(r->get(), 0, 0));
  };
  const char* divide = "SELECT 10 / $1::int";
  REQUIRE(pool.Retrying(link, [&] { return exec("SELECT 1"); }).ok());  // connects
  REQUIRE(exec("BEGIN").ok());
  StatusOr<store::postgres::Result> fine =
      store::postgres::OnGenericIndexPlans(link, [&] { return exec(divide, {{"2"}}); });
  REQUIRE_MESSAGE(fine.ok(), fine.status().ToString());
  CHECK(std::string(PQgetvalue(fine->get(), 0, 0)) == "5");
  CHECK(mode() == "auto");
  StatusOr<store::postgres::Result> failed =
      store::postgres::OnGenericIndexPlans(link, [&] { return exec(divide, {{"0"}}); });
  CHECK(!failed.ok());
  REQUIRE(exec("ROLLBACK").ok());
  CHECK(mode() == "auto");
  for (const char* scans : {"SHOW enable_seqscan", "SHOW enable_bitmapscan"}) {
    StatusOr<store::postgres::Result> shown = exec(scans);
    REQUIRE(shown.ok());
    CHECK(std::string(PQgetvalue(shown->get(), 0, 0)) == "on");
  }
  StatusOr<store::postgres::Result> plans = exec(
      "SELECT generic_plans || ' ' || custom_plans FROM pg_prepared_statements "
      "WHERE statement = $1",
      {{divide}});
  REQUIRE(plans.ok());
  REQUIRE(PQntuples(plans->get()) == 1);
  CHECK(std::string(PQgetvalue(plans->get(), 0, 0)) == "2 0");
}

// The parameters of a claim of up to 512 jobs of type "fetch" (tier 1) by replica "a", every
// deferred job due: of kClaim as PostgresStore::ClaimUnleased binds them ($1-$7), and of
// kClaimCandidates as PostgresStore::LockCandidates binds them ($1-$10, a lease of each job's
// repository, "sure" of one slot).
std::vector<store::postgres::Param> UnleasedClaimParameters() {
  return {{store::postgres::TextArray({"fetch"})},
          {store::postgres::TextArray({"1"})},
          {"512"},
          {"a"},
          {"60"},
          {store::postgres::Number(1e12)},
          {"512"}};
}
std::vector<store::postgres::Param> LeasedClaimParameters() {
  return {{store::postgres::TextArray({"fetch"})},
          {store::postgres::TextArray({"1"})},
          {"512"},
          {store::postgres::Number(1e12)},
          {store::postgres::TextArray({"repo"})},
          {store::postgres::TextArray({"1"})},
          {store::postgres::TextArray({"0"})},
          {"fleet-cap"},
          {"2048"},
          {store::postgres::TextArray({"t"})}};
}

// Both claims' statements on OnGenericIndexPlans read the jobs' table by its indexes, whatever
// its statistics said when they were planned: over a table of 3,600 jobs, analyzed, a claim of
// 512 on a generic plan alone joined its candidates with a sequential scan of the whole table (a
// plan the connection then kept as the table grew with dead rows, until the next analyze). The
// server's count of sequential scans of the table in the claim's own transaction says which.
TEST_CASE("PostgresStore.AClaimReadsTheJobsByIndexWhateverTheTablesStatistics" * kStoreAlone) {
  testing::PostgresServer server;
  {
    auto store = *OpenPostgresStore(server.conninfo(), {"filler"});
    std::vector<StoredJob> jobs;
    for (int i = 0; i < 3600; ++i) {
      jobs.push_back(Job("fetch", "repo-" + std::to_string(i), "key-" + std::to_string(i)));
    }
    REQUIRE(store->AddJobs(jobs)->size() == 3600);
  }
  server.Sql("ANALYZE");  // as autovacuum would have
  store::postgres::ConnectionPool pool(server.conninfo(), 1);
  store::postgres::ConnectionPool::Session session = pool.Take();
  store::postgres::Link& link = *session;
  auto exec = [&](const char* sql, const std::vector<store::postgres::Param>& params = {}) {
    StatusOr<store::postgres::Result> r =
        store::postgres::Exec(link, sql, params, "a test's statement");
    REQUIRE_MESSAGE(r.ok(), r.status().ToString());
    return *std::move(r);
  };
  REQUIRE(
      pool.Retrying(link, [&] { return store::postgres::Exec(link, "SELECT 1", {}, "connect"); })
          .ok());
  // Runs `sql` in a transaction of its own on generic plans that read by index: the rows it
  // returned, and the sequential scans of the jobs' table it made.
  auto claim = [&](const char* sql, const std::vector<store::postgres::Param>& params) {
    exec("BEGIN");
    StatusOr<store::postgres::Result> r = store::postgres::OnGenericIndexPlans(
        link, [&] { return store::postgres::Exec(link, sql, params, "claim"); });
    REQUIRE_MESSAGE(r.ok(), r.status().ToString());
    const int rows = PQntuples(r->get());
    store::postgres::Result scans =
        exec("SELECT pg_stat_get_xact_numscans('fairgate_durable_jobs'::regclass)");
    const std::string made = PQgetvalue(scans.get(), 0, 0);
    exec("ROLLBACK");
    return std::make_pair(rows, made);
  };
  const auto [unleased, unleased_scans] = claim(store::postgres::kClaim, UnleasedClaimParameters());
  CHECK(unleased == 512);
  CHECK(unleased_scans == "0");
  const auto [leased, leased_scans] =
      claim(store::postgres::kClaimCandidates, LeasedClaimParameters());
  CHECK(leased == 512);
  CHECK(leased_scans == "0");
  // The settings are the session's own again.
  CHECK(std::string(PQgetvalue(exec("SHOW enable_seqscan").get(), 0, 0)) == "on");
}

// The statements that read the holder index (both claims' and the renewal of a replica's leases)
// read it by an index scan, whatever it held when they were planned: an index scan marks the
// entries of rows dead to everyone as it passes them, and later scans step over them. Planned
// over an empty index (a fresh database), the claim read it by a bitmap scan, which marks
// nothing: every claim read again every entry each finished job had left there since the table's
// last vacuum (claims from 23 to 82 ms in a fleet_bench run's first minute). Here the statements
// are planned on empty tables, 5,000 jobs are held and finished from other connections (as other
// replicas' jobs would be; no vacuum meanwhile), and each statement is run again, counting the
// holder index's entries it read: the entries are read once, not at each run.
TEST_CASE("PostgresStore.AClaimReadsTheEntriesFinishedJobsLeftOnceWhateverItWasPlannedOver" *
          kStoreAlone) {
  testing::PostgresServer server;
  server.Sql("ALTER SYSTEM SET autovacuum = off");
  server.Sql("SELECT pg_reload_conf()");
  auto store = *OpenPostgresStore(server.conninfo(), {"filler"});
  store::postgres::ConnectionPool pool(server.conninfo(), 1);
  store::postgres::ConnectionPool::Session session = pool.Take();
  store::postgres::Link& link = *session;
  auto exec = [&](const char* sql) {
    StatusOr<store::postgres::Result> r =
        store::postgres::Exec(link, sql, {}, "a test's statement");
    REQUIRE_MESSAGE(r.ok(), r.status().ToString());
    return *std::move(r);
  };
  REQUIRE(
      pool.Retrying(link, [&] { return store::postgres::Exec(link, "SELECT 1", {}, "connect"); })
          .ok());
  // $1-$3 of the renewal as PostgresStore::RenewLeases binds them.
  const std::vector<std::pair<const char*, std::vector<store::postgres::Param>>> statements = {
      {store::postgres::kClaim, UnleasedClaimParameters()},
      {store::postgres::kClaimCandidates, LeasedClaimParameters()},
      {store::postgres::kRenewJobLeases, {{"a"}, {"60"}, {store::postgres::TextArray({"1"})}}}};
  // The holder index's entries this session has read since it last reported its counts to the
  // server's statistics (which it does only outside a transaction).
  auto entries_read = [&] {
    store::postgres::Result read =
        exec("SELECT pg_stat_get_xact_tuples_returned('fairgate_durable_jobs_holder'::regclass)");
    return std::strtol(PQgetvalue(read.get(), 0, 0), nullptr, 10);
  };
  // Runs statement `i` as the store does, in a transaction rolled back after it: the holder
  // index's entries it read.
  auto run = [&](std::size_t i) {
    exec("BEGIN");
    const long before = entries_read();
    StatusOr<store::postgres::Result> r = store::postgres::OnGenericIndexPlans(link, [&] {
      return store::postgres::Exec(link, statements[i].first, statements[i].second, "claim");
    });
    REQUIRE_MESSAGE(r.ok(), r.status().ToString());
    const long read = entries_read() - before;
    exec("ROLLBACK");
    return read;
  };
  for (std::size_t i = 0; i < statements.size(); ++i) CHECK(run(i) == 0);  // planned

  std::vector<StoredJob> jobs;
  for (int i = 0; i < 5000; ++i) {
    jobs.push_back(Job("fetch", "repo-" + std::to_string(i), "key-" + std::to_string(i % 100)));
  }
  REQUIRE(store->AddJobs(jobs)->size() == 5000);
  server.Sql("UPDATE fairgate_durable_jobs SET holder = 'a', lease_until = 1e12, token = 1");
  server.Sql("DELETE FROM fairgate_durable_jobs");
  jobs.resize(200);
  REQUIRE(store->AddJobs(jobs)->size() == 200);  // for the claims to claim
  // The first run reads the 5,000 jobs' entries. After it, each run reads those that the
  // claims before it left (each claims the 200 jobs, rolled back); a bitmap scan would read the
  // 5,000 again each time.
  REQUIRE(run(0) >= 5000);
  for (std::size_t i = 0; i < statements.size(); ++i) {
    CAPTURE(i);
    CHECK(run(i) < 1000);
    CHECK(run(i) < 1000);
  }
}

// The same of a replica's renewal of its leases as the store runs it (RenewLeases): planned by
// the first renewal, over a holder index of one entry, it read the index by a bitmap scan and
// read again, at each renewal, every entry that the replica's finished jobs had left there since
// the last vacuum. 5,000 such entries are made (from another connection) after the first renewal,
// three renewals follow, and the index's entries read are counted once the store's connections
// have ended (a connection reports its counts to the server's statistics as it ends).
TEST_CASE("PostgresStore.ARenewalReadsTheEntriesFinishedJobsLeftOnce" * kStoreAlone) {
  testing::PostgresServer server;
  server.Sql("ALTER SYSTEM SET autovacuum = off");
  server.Sql("SELECT pg_reload_conf()");
  {
    auto store = *OpenPostgresStore(server.conninfo(), {"a"});
    REQUIRE(store->AddJobs({Job("fetch", "held", "k")})->size() == 1);
    REQUIRE(store->ClaimJobs({{"fetch", 1}}, 1, 60)->size() == 1);
    REQUIRE(*store->RenewLeases(60) == 1);
    server.Sql(
        "INSERT INTO fairgate_durable_jobs "
        "  (type, id, fairness_key, payload, submitted_at, holder, lease_until, token) "
        "SELECT 'fetch', 'gone-' || i, 'k', '', 0, 'a', 1e12, 0 FROM generate_series(1, 5000) i");
    server.Sql("DELETE FROM fairgate_durable_jobs WHERE id LIKE 'gone-%'");
    for (int i = 0; i < 3; ++i) CHECK(*store->RenewLeases(60) == 1);
  }
  REQUIRE(testing::Eventually([&] {
    return server.Sql(
               "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' "
               "AND pid <> pg_backend_pid()") == "0";
  }));
  const long read =
      std::stol(server.Sql("SELECT idx_tup_read FROM pg_stat_user_indexes "
                           "WHERE indexrelname = 'fairgate_durable_jobs_holder'"));
  CHECK(read >= 5000);  // the first renewal after them read them
  CHECK(read < 8000);   // and the others did not: three times each would be 15,000
}

// The fleet's rate buckets (SharedStore::TakeTokens): full at first, whole tokens taken up to
// what was asked, the rest kept and refilled by the server's clock; takes from many threads never
// give a token twice. Rates of a thousandth a second, so that the test's own time adds nothing.
TEST_CASE("PostgresStore.ARateBucketGivesEachTokenOnceToWhoeverTakesFirst" * kStoreAlone) {
  testing::PostgresServer server;
  auto store = *OpenPostgresStore(server.conninfo(), {"a"});
  const RateLimit slow{0.001, 3};
  StatusOr<TokenLease> first = store->TakeTokens("type:clone", slow, 5);
  REQUIRE_MESSAGE(first.ok(), first.status().message());
  CHECK(first->taken == 3);
  CHECK(first->next_in == doctest::Approx(1000).epsilon(0.01));  // (1 - 0) / 0.001
  CHECK(store->TakeTokens("type:clone", slow, 5)->taken == 0);
  // 2.5 s ago at a thousand a second: 2.5 tokens; 2 taken, a half kept.
  server.Sql("UPDATE fairgate_rate_buckets SET at = at - 2500 WHERE name = 'type:clone'");
  StatusOr<TokenLease> refilled = store->TakeTokens("type:clone", slow, 5);
  REQUIRE(refilled.ok());
  CHECK(refilled->taken == 2);
  CHECK(refilled->next_in == doctest::Approx(500).epsilon(0.01));
  CHECK(store->TakeTokens("type:clone", {0, 1}, 1).status().code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(store->TakeTokens("type:clone", slow, 0).status().code() ==
        absl::StatusCode::kInvalidArgument);

  // Four replicas at once, each taking 3 at a time until none is left: 50 in all.
  std::vector<std::unique_ptr<SharedStore>> replicas;
  for (const char* name : {"r1", "r2", "r3", "r4"}) {
    replicas.push_back(*OpenPostgresStore(server.conninfo(), {name}));
  }
  std::atomic<int> taken{0};
  std::vector<std::thread> threads;
  for (auto& replica : replicas) {
    threads.emplace_back([&, r = replica.get()] {
      for (;;) {
        StatusOr<TokenLease> lease = r->TakeTokens("global", {0.001, 50}, 3);
        CHECK(lease.ok());
        if (!lease.ok() || lease->taken == 0) return;
        CHECK(lease->taken <= 3);
        taken += lease->taken;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  CHECK(taken.load() == 50);
}

// A full bucket's row is as good as none: a store's first take deletes the rows of full buckets
// (and again a minute later), so the rows of a million clients' keys do not stay; a bucket
// that is not full keeps its row and what it holds.
TEST_CASE("PostgresStore.TheRowsOfFullBucketsAreForgotten") {
  testing::PostgresServer server;
  auto first = *OpenPostgresStore(server.conninfo(), {"a"});
  REQUIRE(first->TakeTokens("key:quick", {1000, 3}, 1).ok());  // full again within 1 ms
  REQUIRE(first->TakeTokens("key:slow", {0.001, 3}, 1).ok());  // 2 left, full in 1000 s
  CHECK(server.Sql("SELECT count(*) FROM fairgate_rate_buckets") == "2");
  std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the quick one is full
  auto second = *OpenPostgresStore(server.conninfo(), {"b"});
  REQUIRE(second->TakeTokens("global", {1, 1}, 1).ok());
  CHECK(server.Sql("SELECT string_agg(name, ',' ORDER BY name) FROM fairgate_rate_buckets") ==
        "global,key:slow");
  StatusOr<TokenLease> slow = second->TakeTokens("key:slow", {0.001, 3}, 5);
  REQUIRE(slow.ok());
  CHECK(slow->taken == 2);  // what was left of it, not a full bucket
}

// A scheduler on a shared store takes its rate limits' tokens from the fleet's bucket, in leases
// (FleetOptions::token_lease), on its own thread: RunSync callers of a limited type are served
// with no other caller to make a decision, the bucket's row is in the database, and the metrics
// count the leases.
TEST_CASE("PostgresStore.ASchedulerTakesItsRateLimitsTokensFromTheFleetsBucket") {
  testing::PostgresServer server;
  SchedulerOptions o;
  o.persistence.store = std::shared_ptr<Store>(*OpenPostgresStore(server.conninfo(), {"a"}));
  o.runtime.warn = [](std::string_view) {};
  auto scheduler = *Scheduler::Create(o);
  JobTypeConfig limited = testing::Type(4, 4);
  limited.rate_limit = {1000, 10};  // leases of 100 (1000 x 0.1 s), at most the burst: 10
  REQUIRE(scheduler->RegisterType("clone", limited).ok());
  for (int i = 0; i < 30; ++i) {
    REQUIRE(scheduler
                ->RunSync(Context::Background(),
                          {TypeName("clone"), JobId(std::to_string(i)), FairnessKey("k")},
                          [](const Context&) { return absl::OkStatus(); })
                .ok());
  }
  CHECK(server.Sql("SELECT count(*) FROM fairgate_rate_buckets WHERE name = 'type:clone'") == "1");
  std::string metrics;
  scheduler->WriteMetrics(metrics);
  const std::string tokens = "fairgate_rate_leases_total{result=\"tokens\"} ";
  const std::size_t at = metrics.find(tokens);
  REQUIRE(at != std::string::npos);
  CHECK(std::atoi(metrics.c_str() + at + tokens.size()) >= 3);  // 30 tokens, at most 10 a lease
  CHECK(metrics.find("fairgate_store_errors_total{operation=\"rate_lease\"} 0") !=
        std::string::npos);
  REQUIRE(scheduler->Shutdown(Context::Background()).ok());
}

// A key's rate limit on a shared store is the fleet's: two schedulers on one database, each
// with jobs of one client whose burst is 4 and whose rate gives nothing more in the test's time,
// start 4 of its jobs between them, not 4 each, while another key's jobs run on both; the key's
// row is in the database.
TEST_CASE("PostgresStore.AKeysRateLimitIsTheFleetsAcrossSchedulers") {
  testing::PostgresServer server;
  std::vector<std::unique_ptr<Scheduler>> replicas;
  std::atomic<int> client_started{0}, other_started{0};
  for (const char* name : {"a", "b"}) {
    SchedulerOptions o;
    o.persistence.store = std::shared_ptr<Store>(*OpenPostgresStore(server.conninfo(), {name}));
    o.rule.max_concurrency = 8;
    o.runtime.warn = [](std::string_view) {};
    replicas.push_back(*Scheduler::Create(o));
    Scheduler& replica = *replicas.back();
    REQUIRE(replica.RegisterType("clone", testing::Type(8, 8)).ok());
    KeyLimits limits;
    limits.rate_limit = {0.001, 4};  // leases of 1 token
    REQUIRE(replica.SetKeyLimits("client", limits).ok());
    for (int i = 0; i < 6; ++i) {
      for (const char* key : {"client", "other"}) {
        REQUIRE(replica
                    .Submit(
                        {TypeName("clone"), JobId(std::to_string(i)), FairnessKey(key)},
                        [&, key](const Context&) {
                          ++(std::string_view(key) == "client" ? client_started : other_started);
                          return absl::OkStatus();
                        },
                        [](const Status&) {})
                    .ok());
      }
    }
  }
  // Both have found the fleet's bucket empty, no more tokens until the rate gives one: the one
  // that took its last token by that lease (the store said when the next is due, and it asks no
  // sooner), the other by a lease that brought none.
  auto empty_leases = [](Scheduler& replica) {
    std::string metrics;
    replica.WriteMetrics(metrics);
    const std::string empty = "fairgate_rate_leases_total{result=\"empty\"} ";
    const std::size_t at = metrics.find(empty);
    return at == std::string::npos ? 0 : std::atoi(metrics.c_str() + at + empty.size());
  };
  REQUIRE(testing::Eventually([&] {
    return client_started.load() == 4 && other_started.load() == 12 &&
           empty_leases(*replicas[0]) + empty_leases(*replicas[1]) > 0;
  }));
  CHECK(client_started.load() == 4);
  CHECK(server.Sql("SELECT count(*) FROM fairgate_rate_buckets WHERE name = 'key:client'") == "1");
  // A third replica's first call of the client that will not wait: it waits for the key's first
  // lease only, which brings none, and is refused with when the fleet's next token is due.
  SchedulerOptions o;
  o.persistence.store = std::shared_ptr<Store>(*OpenPostgresStore(server.conninfo(), {"c"}));
  o.runtime.warn = [](std::string_view) {};
  auto third = *Scheduler::Create(o);
  REQUIRE(third->RegisterType("clone", testing::Type(8, 8)).ok());
  KeyLimits limits;
  limits.rate_limit = {0.001, 4};
  REQUIRE(third->SetKeyLimits("client", limits).ok());
  JobOptions impatient;
  impatient.refuse_without_token = true;
  const Status refused = third->RunSync(
      Context::Background(), {TypeName("clone"), JobId("x"), FairnessKey("client")},
      [&](const Context&) {
        ++client_started;
        return absl::OkStatus();
      },
      impatient);
  CHECK(refused.code() == absl::StatusCode::kResourceExhausted);
  REQUIRE(RetryAfter(refused).has_value());
  CHECK(*RetryAfter(refused) > 0);
  CHECK(*RetryAfter(refused) <= 1000);  // a token a thousand seconds apart
  REQUIRE(third->Shutdown(Context::Background()).ok());
  for (auto& replica : replicas) {
    const fairgate::Snapshot snapshot = replica->Snapshot();
    CHECK(snapshot.keys_held_by_rate == 1);
    REQUIRE(replica->Shutdown(Context::Background()).ok());
  }
  CHECK(client_started.load() == 4);
}

// A call that will not wait for a token is refused when the fleet's bucket has none, not when
// its replica's lease of it is used up: one after another, with nothing else running, every
// call of a type whose fleet-wide burst is 3 and of a key whose burst is 2 (leases of one token,
// the next taken only when the last is used) runs until the fleet's bucket is empty, whatever
// the lease's round trip to the database; the next is refused with when its token is due. On one
// replica: a bucket the store said has no token for 1,000 s does not keep the replica from
// leasing another bucket's tokens at once (a key's first). While the database is down, a lease
// brings none: a call that will not wait is refused, with the next try's time, not held.
TEST_CASE("PostgresStore.ACallThatWillNotWaitIsRefusedOnlyWhenTheFleetsBucketIsEmpty") {
  testing::PostgresServer server;
  SchedulerOptions o;
  o.persistence.store = std::shared_ptr<Store>(*OpenPostgresStore(server.conninfo(), {"a"}));
  o.fleet.claim_interval = Seconds(2);
  o.runtime.warn = [](std::string_view) {};
  auto scheduler = *Scheduler::Create(o);
  JobTypeConfig clone = testing::Type(8, 8);
  clone.rate_limit = {0.001, 3};
  clone.refuse_without_token = true;
  REQUIRE(scheduler->RegisterType("clone", clone).ok());
  REQUIRE(scheduler->RegisterType("fetch", testing::Type(8, 8)).ok());
  KeyLimits limits;
  limits.rate_limit = {0.001, 2};
  REQUIRE(scheduler->SetKeyLimits("client", limits).ok());
  REQUIRE(scheduler->SetKeyLimits("during-outage", limits).ok());
  int ran = 0;
  auto run = [&](const char* type, int i, const char* key) {
    return scheduler->RunSync(Context::Background(),
                              {TypeName(type), JobId(std::to_string(i)), FairnessKey(key)},
                              [&](const Context&) {
                                ++ran;
                                return absl::OkStatus();
                              },
                              {.refuse_without_token = true});
  };
  for (int i = 0; i < 3; ++i) CHECK(run("clone", i, "other").ok());
  const Status type_refused = run("clone", 3, "other");
  CHECK(type_refused.code() == absl::StatusCode::kResourceExhausted);
  CHECK(std::string(type_refused.message()).find("job type 'clone'") != std::string::npos);
  REQUIRE(RetryAfter(type_refused).has_value());
  CHECK(*RetryAfter(type_refused) > 0);
  CHECK(*RetryAfter(type_refused) <= 1000);
  for (int i = 0; i < 2; ++i) CHECK(run("fetch", i, "client").ok());
  const Status key_refused = run("fetch", 2, "client");
  CHECK(key_refused.code() == absl::StatusCode::kResourceExhausted);
  CHECK(std::string(key_refused.message()).find("fairness key 'client'") != std::string::npos);
  REQUIRE(RetryAfter(key_refused).has_value());
  CHECK(*RetryAfter(key_refused) > 0);
  CHECK(*RetryAfter(key_refused) <= 1000);
  CHECK(ran == 5);

  server.Stop();
  const Status outage = run("fetch", 3, "during-outage");  // its first lease fails
  CHECK(outage.code() == absl::StatusCode::kResourceExhausted);
  CHECK(std::string(outage.message()).find("fairness key 'during-outage'") != std::string::npos);
  REQUIRE(RetryAfter(outage).has_value());
  CHECK(*RetryAfter(outage) > 0);
  CHECK(*RetryAfter(outage) <= 2);
  CHECK(ran == 5);
  server.Start();
  // Refused at once until the next try's time, then served by its lease.
  int id = 4;
  CHECK(testing::Eventually([&] { return run("fetch", id++, "during-outage").ok(); },
                            std::chrono::seconds(20)));
  CHECK(ran == 6);
  REQUIRE(scheduler->Shutdown(Context::Background()).ok());
}

TEST_CASE("PostgresStore.ACrashedReplicasClaimsAndLeasesLapseToAnother" * kStoreAlone) {
  testing::PostgresServer server;
  testing::CheckACrashedReplicasClaimsAndLeasesLapse(Replicas(server));
}

// A job stored by another process (here: another store's AddJob, as a producer that runs no
// scheduler would) wakes a replica's claim at once through the database's notification, not at
// its next claim_interval (30 s here); so does a job another replica gives back.
TEST_CASE("PostgresStore.AJobStoredElsewhereWakesAReplicaAtOnce") {
  testing::PostgresServer server;
  SchedulerOptions o;
  o.persistence.store = std::shared_ptr<Store>(*OpenPostgresStore(server.conninfo(), {"worker"}));
  o.fleet.claim_interval = Seconds(30);
  o.runtime.warn = [](std::string_view) {};
  auto worker = *Scheduler::Create(o);
  REQUIRE(worker->RegisterType("fetch", testing::Type(2, 4)).ok());
  testing::Log ran;
  REQUIRE(worker
              ->RegisterDurable("fetch",
                                [&](const DurableJob& job, const Context&) {
                                  ran.Add(std::string(job.id));
                                  return absl::OkStatus();
                                })
              .ok());
  REQUIRE(worker->Recover().ok());  // its first claim: nothing yet
  auto producer = *OpenPostgresStore(server.conninfo(), {"producer"});
  for (int i = 0; i < 3; ++i) {
    StoredJob job;
    job.type = "fetch";
    job.id = "repo-" + std::to_string(i);
    REQUIRE(producer->AddJob(job).ok());
    CHECK(
        testing::Eventually([&] { return ran.entries().size() == static_cast<std::size_t>(i + 1); },
                            std::chrono::seconds(5)));
  }
  // Given back unrun by a replica that claimed it: claimable at once, and the worker is told.
  StoredJob job;
  job.type = "fetch";
  job.id = "given-back";
  auto other = *OpenPostgresStore(server.conninfo(), {"other"});
  REQUIRE(worker->PauseType("fetch").ok());  // so that the worker does not take it first
  const std::uint64_t sequence = *other->AddJob(job);
  REQUIRE(testing::Eventually([&] {
    return other->ClaimJobs({{"fetch", 2}}, 1, 30)->size() == 1;
  }));
  REQUIRE(worker->ResumeType("fetch").ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the resume's wake has passed
  REQUIRE(other->ReleaseJob(sequence).ok());
  CHECK(testing::Eventually([&] { return ran.entries().size() == 4; }, std::chrono::seconds(5)));
  REQUIRE(worker->Shutdown(Context::Background()).ok());
}

// Stores notify the replicas only while one waits for jobs (its last claim came back short): a
// notification makes PostgreSQL commit the notifying transactions one at a time. So do a job
// given back and a lease given back (with a job removed, deferred or killed, or a resource's
// released), which let a waiting replica claim what it could not. A listener of the test's own
// hears, in commit order, each notification, if any, before a marker the test sends after it on
// a channel of its own.
TEST_CASE("PostgresStore.StoresNotifyOnlyWhileAReplicaWaitsForJobs" * kStoreAlone) {
  testing::PostgresServer server;
  auto producer = *OpenPostgresStore(server.conninfo(), {"producer"});
  PGconn* listener = PQconnectdb(server.conninfo().c_str());
  REQUIRE(PQstatus(listener) == CONNECTION_OK);
  REQUIRE(Command(listener, "LISTEN fairgate_jobs"));
  REQUIRE(Command(listener, "LISTEN fairgate_test_marker"));
  PGconn* marker = PQconnectdb(server.conninfo().c_str());
  REQUIRE(PQstatus(marker) == CONNECTION_OK);
  // Does `act`, then sends the marker: the channels the listener hears up to the marker (a
  // call of two transactions, a job given back and then its leases, may notify twice).
  auto heard_after = [&](const std::function<void()>& act) {
    act();
    REQUIRE(Command(marker, "NOTIFY fairgate_test_marker"));
    std::vector<std::string> heard;
    REQUIRE(testing::Eventually([&] {
      PQconsumeInput(listener);
      while (PGnotify* notice = PQnotifies(listener)) {
        heard.push_back(notice->relname);
        PQfreemem(notice);
      }
      return !heard.empty() && heard.back() == "fairgate_test_marker";
    }));
    heard.pop_back();
    return std::set<std::string>(heard.begin(), heard.end());
  };
  int n = 0;
  auto store_one = [&] {
    REQUIRE(producer->AddJob(testing::TestJob("job" + std::to_string(n++), "")).ok());
  };
  // Another replica's "gc" jobs (a type the waiting replica does not claim), each claimed with
  // its repository's lease, given back in each of the ways a lease is.
  auto other = *OpenPostgresStore(server.conninfo(), {"other"});
  SharedStore& gc = *other->AsShared();
  const ClaimableType leased{"gc", 1, "repo", 1};
  auto claimed_gc = [&] {
    StoredJob job = testing::TestJob("gc" + std::to_string(n++), "");
    job.type = "gc";
    REQUIRE(gc.AddJob(job).ok());
    std::vector<StoredJob> claimed = *gc.ClaimJobs({leased}, 1, 30);
    REQUIRE(claimed.size() == 1);
    return claimed[0].sequence;
  };
  auto giving_back = [&] {
    std::vector<std::function<void()>> ways;
    std::uint64_t released = 0, removed = 0, deferred = 0, killed = 0, batch = 0;
    std::uint64_t resource = 0;
    // Each claimed while nobody listens for its own notifications (heard_after drains them).
    heard_after([&] {
      released = claimed_gc();
      removed = claimed_gc();
      deferred = claimed_gc();
      killed = claimed_gc();
      batch = claimed_gc();
      resource = *gc.AcquireResource("repo", "r", 1, 30);
    });
    ways.push_back([&, released] { REQUIRE(gc.ReleaseJob(released).ok()); });
    ways.push_back([&, removed] { REQUIRE(gc.RemoveJob(removed).ok()); });
    ways.push_back([&, deferred] { REQUIRE(gc.DeferJob(deferred, 1e12, "later").ok()); });
    ways.push_back([&, killed] { REQUIRE(gc.KillJob(killed, "no").ok()); });
    ways.push_back([&, batch] { REQUIRE(gc.RemoveJobs({batch})->at(0).ok()); });
    ways.push_back([&, resource] { REQUIRE(gc.ReleaseResource("repo", "r", resource).ok()); });
    return ways;
  };
  const std::set<std::string> none, one = {"fairgate_jobs"};
  CHECK(heard_after(store_one) == none);  // no replica yet
  for (const auto& way : giving_back()) CHECK(heard_after(way) == none);
  // A replica whose claim came back short waits: the first wait makes its row and returns at
  // once (a claim may find what was stored before); from then on stores notify.
  auto replica = *OpenPostgresStore(server.conninfo(), {"replica"});
  SharedStore& shared = *replica->AsShared();
  REQUIRE(shared.ClaimJobs({{"fetch", 1}}, 10, 30)->size() == 1);
  CHECK(shared.WaitForJobs(0).ok());
  CHECK(server.Sql("SELECT replica FROM fairgate_waiting") == "replica");
  CHECK(heard_after(store_one) == one);
  for (const auto& way : giving_back()) CHECK(heard_after(way) == one);
  CHECK(testing::Eventually([&] { return shared.WaitForJobs(0).ok(); }));  // notified
  // A claim that comes back whole: the replica is busy, its next wait deletes its row, and
  // stores stop notifying. (That wait may still take a notification sent while the replica
  // waited: the seven above reach its listener in their own time, and the one wait above may
  // have taken only the first.)
  REQUIRE(shared.ClaimJobs({{"fetch", 1}}, 1, 30)->size() == 1);
  const Status busy = shared.WaitForJobs(0);
  CHECK((busy.ok() || busy.code() == absl::StatusCode::kDeadlineExceeded));
  CHECK(server.Sql("SELECT count(*) FROM fairgate_waiting") == "0");
  CHECK(heard_after(store_one) == none);
  for (const auto& way : giving_back()) CHECK(heard_after(way) == none);
  // Short again: waiting again, and a row not seen for a minute (a replica that died waiting)
  // is passed over.
  REQUIRE(shared.ClaimJobs({{"fetch", 1}}, 10, 30)->size() == 1);
  CHECK(shared.WaitForJobs(0).ok());
  CHECK(heard_after(store_one) == one);
  server.Sql("UPDATE fairgate_waiting SET seen = seen - 61");
  CHECK(heard_after(store_one) == none);
  // A replica that closes deletes its row.
  server.Sql("UPDATE fairgate_waiting SET seen = seen + 61");
  replica.reset();
  CHECK(server.Sql("SELECT count(*) FROM fairgate_waiting") == "0");
  PQfinish(marker);
  PQfinish(listener);
}

// A store under way when a replica begins to wait looked before the replica's row was there, so
// it does not notify: the replica's first wait waits for it to commit, so that the claim after
// the wait finds its job. The store here is the store's statement run by hand in a transaction
// held open.
TEST_CASE("PostgresStore.AReplicaThatBeginsToWaitFindsTheJobsOfStoresUnderWay" * kStoreAlone) {
  testing::PostgresServer server;
  auto replica = *OpenPostgresStore(server.conninfo(), {"replica"});
  SharedStore& shared = *replica->AsShared();
  REQUIRE(shared.ClaimJobs({{"fetch", 1}}, 10, 30)->empty());  // short: it waits
  PGconn* producer = PQconnectdb(server.conninfo().c_str());
  REQUIRE(PQstatus(producer) == CONNECTION_OK);
  REQUIRE(Command(producer, "SET idle_in_transaction_session_timeout = '60s'"));
  REQUIRE(Command(producer, "BEGIN"));
  REQUIRE(Command(producer,
                  "INSERT INTO fairgate_durable_jobs (type, id, fairness_key, payload, "
                  "submitted_at) VALUES ('fetch', 'under-way', 'alice', '', 1)"));
  PGresult* looked = PQexec(producer, "SELECT fairgate_notify_waiting()");
  REQUIRE(PQresultStatus(looked) == PGRES_TUPLES_OK);
  PQclear(looked);
  Status waited = absl::UnknownError("not yet");
  std::thread waiting([&] { waited = shared.WaitForJobs(10); });
  CHECK(testing::Eventually([&] {
    return server.Sql("SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'advisory'") == "1";
  }));
  const bool committed = Command(producer, "COMMIT");
  waiting.join();
  REQUIRE(committed);
  CHECK(waited.ok());
  const std::vector<StoredJob> claimed = *shared.ClaimJobs({{"fetch", 1}}, 10, 30);
  REQUIRE(claimed.size() == 1);
  CHECK(claimed[0].id == "under-way");
  PQfinish(producer);
}

// The stall a fault run found: a replica stopped during the first of five jobs on repo-0 holds
// repo-0's lease; the fair order puts the other four repo-0 jobs first, and a claim that looked
// only at the first few jobs in that order (about 4 x max_jobs) claimed nothing, although five
// jobs on a free repository waited behind them, until the lease lapsed. A claim now passes over
// the jobs whose leases are held, however many come first; for a fleet-wide cap as well.
TEST_CASE("PostgresStore.AClaimFindsClaimableJobsPastAnyNumberOfBlockedOnes") {
  testing::PostgresServer server;
  auto stopped = *OpenPostgresStore(server.conninfo(), {"stopped"});
  auto b = *OpenPostgresStore(server.conninfo(), {"b"});
  auto add = [&](const std::string& type, const std::string& id) {
    StoredJob job;
    job.type = type;
    job.id = id;
    return *stopped->AddJob(job);
  };
  const ClaimableType fetch{"fetch", 1, "repo", 1, 0};
  std::vector<std::uint64_t> repo0, repo1;
  for (int i = 0; i < 5; ++i) repo0.push_back(add("fetch", "repo-0"));
  for (int i = 0; i < 5; ++i) repo1.push_back(add("fetch", "repo-1"));
  // The replica that then stops claims the first job, and with it repo-0's lease.
  std::vector<StoredJob> claimed = *stopped->ClaimJobs({fetch}, 1, 30);
  REQUIRE(claimed.size() == 1);
  REQUIRE(claimed[0].sequence == repo0[0]);
  // b, with one slot free, claims the first job on the free repository.
  claimed = *b->ClaimJobs({fetch}, 1, 30);
  REQUIRE(claimed.size() == 1);
  CHECK(claimed[0].sequence == repo1[0]);
  // And with both repositories held, nothing (and no error).
  CHECK(b->ClaimJobs({fetch}, 4, 30)->empty());

  // A fleet-wide cap of one: while its slot is held, a claim of several types passes over the
  // capped type's jobs to the next type's, though they come later in the order.
  const ClaimableType repack{"repack", 2, "", 1, 1};
  const ClaimableType gc{"gc", 1, "", 1, 0};
  std::vector<std::uint64_t> repacks;
  for (int i = 0; i < 6; ++i) repacks.push_back(add("repack", "x" + std::to_string(i)));
  const std::uint64_t collect = add("gc", "y");
  claimed = *stopped->ClaimJobs({repack}, 1, 30);
  REQUIRE(claimed.size() == 1);
  CHECK(claimed[0].sequence == repacks[0]);
  claimed = *b->ClaimJobs({repack, gc}, 1, 30);
  REQUIRE(claimed.size() == 1);
  CHECK(claimed[0].sequence == collect);
}

// A replica named `name` on `server` whose conflict group "repo" is fleet-wide, with types
// "repack" (tier 1, up to `repacks` at once) and "fetch" (tier 2, up to `fetches`) in it, and
// `capacity` slots.
std::unique_ptr<Scheduler> RepoReplica(const testing::PostgresServer& server,
                                       const std::string& name, int capacity, int repacks,
                                       int fetches) {
  SchedulerOptions o;
  o.persistence.store = std::shared_ptr<Store>(*OpenPostgresStore(server.conninfo(), {name}));
  o.rule.max_concurrency = capacity;
  o.fleet.claim_interval = Seconds(0.05);
  o.fleet.conflict_groups = {"repo"};
  o.runtime.warn = [](std::string_view) {};
  auto s = *Scheduler::Create(o);
  REQUIRE(s->RegisterType("repack", testing::Type(1, repacks, "repo")).ok());
  REQUIRE(s->RegisterType("fetch", testing::Type(2, fetches, "repo")).ok());
  return s;
}

// Through schedulers: a replica that charged a key PostgreSQL's text cannot hold shares its other
// keys' costs all the same, and a job on a repository named so fails alone (InvalidArgument, not
// a retryable outage) while the next job runs.
TEST_CASE("PostgresStore.AReplicaWithANameItsTextCannotHoldSharesAndLeasesTheOthers") {
  testing::PostgresServer server;
  auto ok = [](const Context&) { return absl::OkStatus(); };
  auto a = CostSharingReplica(server, "a");
  for (const char* key : {"odd\xff", "alice"}) {
    REQUIRE(a->RunSync(Context::Background(), {TypeName("clone"), JobId("r"), FairnessKey(key)}, ok)
                .ok());
  }
  REQUIRE(testing::Eventually([&] {  // shared (what is left of its 10 once decayed)
    return server.Sql(
               "SELECT count(*) FROM fairgate_keys WHERE key = 'alice' "
               "AND accumulated_cost > 0") == "1";
  }));
  CHECK(server.Sql("SELECT count(*) FROM fairgate_keys") == "1");

  auto b = RepoReplica(server, "b", 1, 1, 1);
  const Status odd = b->RunSync(Context::Background(),
                                {TypeName("fetch"), JobId("repo-\xff"), FairnessKey("x")}, ok);
  CHECK(odd.code() == absl::StatusCode::kInvalidArgument);
  CHECK(odd.message().find("must be UTF-8") != std::string::npos);
  CHECK(
      b->RunSync(Context::Background(), {TypeName("fetch"), JobId("repo-1"), FairnessKey("x")}, ok)
          .ok());
  REQUIRE(b->Shutdown(Context::Background()).ok());
  REQUIRE(a->Shutdown(Context::Background()).ok());
}

// Names in a replica's fleet options: a fleet-wide conflict group or capped type that
// PostgreSQL's text cannot hold is refused when the scheduler is made, rather than failing each
// of its jobs (a name of other letters, UTF-8, is not); a rate-limited type named so takes its
// tokens from the fleet's bucket under its name in hex (before, every take was refused and its
// jobs never started).
TEST_CASE("PostgresStore.FleetNamesItsTextCannotHoldAreRefusedOrWrittenInHex") {
  testing::PostgresServer server;
  const std::shared_ptr<Store> store(*OpenPostgresStore(server.conninfo(), {"a"}));
  auto create = [&](std::vector<std::string> groups, std::map<std::string, int> caps) {
    SchedulerOptions o;
    o.persistence.store = store;
    o.fleet.conflict_groups = std::move(groups);
    o.fleet.type_caps = std::move(caps);
    o.runtime.warn = [](std::string_view) {};
    return Scheduler::Create(o);
  };
  const Status group = create({"repo", "repo\xff"}, {}).status();
  CHECK(group.code() == absl::StatusCode::kInvalidArgument);
  CHECK(group.message() ==
        "PostgreSQL store: the fleet.conflict_groups entry \"repo\\xff\" must be UTF-8 without "
        "a NUL byte, as PostgreSQL's text is");
  const Status cap = create({}, {{"fetch", 2}, {std::string("re\0pack", 7), 1}}).status();
  CHECK(cap.code() == absl::StatusCode::kInvalidArgument);
  CHECK(cap.message() ==
        "PostgreSQL store: fleet.type_caps' type \"re\\x00pack\" must be UTF-8 without a NUL "
        "byte, as PostgreSQL's text is");

  auto fine = create({"d\xc3\xa9p\xc3\xb4t"}, {{"r\xc3\xa9pack", 1}});
  REQUIRE(fine.ok());
  JobTypeConfig limited = testing::Type(1, 1);
  limited.rate_limit = {100, 1};
  REQUIRE((*fine)->RegisterType("odd\xff", limited).ok());
  auto [ctx, cancel] = WithTimeout(Context::Background(), std::chrono::seconds(20));
  for (const char* id : {"a", "b"}) {
    CHECK((*fine)
              ->RunSync(ctx, {TypeName("odd\xff"), JobId(id), FairnessKey("k")},
                        [](const Context&) { return absl::OkStatus(); })
              .ok());
  }
  cancel();
  CHECK(server.Sql("SELECT string_agg(name, ',') FROM fairgate_rate_buckets") ==
        "type-hex:6f6464ff");
  REQUIRE((*fine)->Shutdown(Context::Background()).ok());
}

// The same through a scheduler: replica a (one slot) stored five jobs on repo-0, then five on
// repo-1, and stopped (killed: no shutdown, its leases stay until they lapse) during the first;
// replica b runs the five repo-1 jobs at once, not after the lapse.
TEST_CASE("PostgresStore.AReplicaRunsJobsOnFreeRepositoriesWhileADeadOnesLeaseBlocksTheFirst") {
  testing::PostgresServer server;
  {
    auto a = *OpenPostgresStore(server.conninfo(), {"a"});
    for (int i = 0; i < 10; ++i) {
      StoredJob job;
      job.type = "fetch";
      job.id = i < 5 ? "repo-0" : "repo-1";
      REQUIRE(a->AddJob(job).ok());
    }
    const ClaimableType fetch{"fetch", 2, "repo", 1, 0};
    auto claimed = *a->ClaimJobs({fetch}, 1, /*lease_seconds=*/60);  // outlives the test
    REQUIRE(claimed.size() == 1);
    REQUIRE(claimed[0].id == "repo-0");
    REQUIRE(a->BeginAttempt(claimed[0].sequence).ok());  // and a dies mid-attempt
  }
  testing::Log ran;
  auto b = RepoReplica(server, "b", 1, 1, 1);
  REQUIRE(b->RegisterDurable("fetch", [&](const DurableJob& job, const Context&) {
             ran.Add(std::string(job.id));
             return absl::OkStatus();
           }).ok());
  REQUIRE(b->Recover().ok());
  REQUIRE(testing::Eventually([&] { return ran.entries().size() == 5; }));
  for (const std::string& id : ran.entries()) CHECK(id == "repo-1");
  REQUIRE(b->Shutdown(Context::Background()).ok());
}

// A job that finishes while the server is down: its removal, and the giving back of the
// repository's lease its claim took, fail and are tried again until the server takes them, so
// that once it is back the job is gone (not run again when its lease would have lapsed) and the
// repository is free at once (not when the lease would have lapsed, 40 s or more on).
TEST_CASE("PostgresStore.AJobDoneDuringAnOutageIsRemovedAndItsLeaseGivenBackWhenTheServerReturns") {
  testing::PostgresServer server;
  SchedulerOptions o;
  o.persistence.store = std::shared_ptr<Store>(*OpenPostgresStore(server.conninfo(), {"a"}));
  o.fleet.claim_interval = Seconds(0.05);
  o.fleet.lease_ttl = Seconds(60);  // renewed every 20 s: held at least 40 s past the outage
  o.fleet.conflict_groups = {"repo"};
  o.runtime.warn = [](std::string_view) {};
  auto a = *Scheduler::Create(o);
  REQUIRE(a->RegisterType("fetch", testing::Type(2, 1, "repo")).ok());
  std::atomic<int> runs{0};
  auto gate = std::make_shared<testing::Gate>();
  REQUIRE(a->RegisterDurable("fetch", [&, gate](const DurableJob&, const Context&) {
             ++runs;
             gate->Wait();
             return absl::OkStatus();
           }).ok());
  REQUIRE(a->Recover().ok());
  REQUIRE(a->SubmitDurable({TypeName("fetch"), JobId("linux.git")}, "").ok());
  REQUIRE(testing::Eventually([&] { return runs.load() == 1; }));
  server.Stop();
  gate->Open();  // done while the server is down: the removal and the release fail
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  server.Start();
  auto store = *OpenPostgresStore(server.conninfo(), {"b"});
  CHECK(testing::Eventually(
      [&] {
        auto live = store->LiveJobs();
        return live.ok() && live->empty();
      },
      std::chrono::seconds(10)));
  CHECK(testing::Eventually(
      [&] {
        auto token = store->AcquireResource("repo", "linux.git", 1, 30);
        return token.ok() && *token > 0;
      },
      std::chrono::seconds(10)));
  REQUIRE(a->Shutdown(Context::Background()).ok());
  CHECK(runs == 1);
  CHECK(Metric(*a, "fairgate_store_errors_total{operation=\"remove_job\"}") >= 1);
}

TEST_CASE("PostgresStore.AFleetWideConflictGroupKeepsAFetchOnOneReplicaFromARepackOnAnother") {
  testing::PostgresServer server;
  auto replica = [&](const std::string& name) {
    auto s = RepoReplica(server, name, 2, 1, 2);
    REQUIRE(s->RegisterType("archive", testing::Type(1, 1)).ok());
    return s;
  };
  auto gate = std::make_shared<testing::Gate>();
  auto a = replica("a");
  auto b = replica("b");
  std::atomic<std::uint64_t> repack_token{0}, fetch_token{0};
  std::atomic<bool> repacking{false}, overlapped{false};
  REQUIRE(a->Submit({TypeName("repack"), JobId("linux.git")},
                    [&, gate](const Context& ctx) {
                      repack_token = ctx.FencingToken();
                      repacking = true;
                      gate->Wait();
                      repacking = false;
                      return absl::OkStatus();
                    },
                    {})
              .ok());
  REQUIRE(testing::Eventually([&] { return repacking.load(); }));
  std::thread fetch([&] {
    CHECK(b->RunSync(Context::Background(),
                     {TypeName("fetch"), JobId("linux.git"), FairnessKey("carol")},
                     [&](const Context& ctx) {
                       overlapped = repacking.load();
                       fetch_token = ctx.FencingToken();
                       return absl::OkStatus();
                     })
              .ok());
  });
  // b's fetch of another repository, and a type in no fleet-wide group, run meanwhile.
  CHECK(b->RunSync(Context::Background(), {TypeName("fetch"), JobId("git.git")},
                   [](const Context& ctx) {
                     CHECK(ctx.FencingToken() > 0);
                     return absl::OkStatus();
                   })
            .ok());
  CHECK(b->RunSync(Context::Background(), {TypeName("archive"), JobId("linux.git")},
                   [](const Context& ctx) {
                     CHECK(ctx.FencingToken() == 0u);
                     return absl::OkStatus();
                   })
            .ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  CHECK(fetch_token.load() == 0u);  // still waiting for a's repack
  gate->Open();
  fetch.join();
  CHECK_FALSE(overlapped.load());
  CHECK(fetch_token.load() > repack_token.load());
  // A waiting job's deadline ends its wait (once a's repack of the repository has begun, and
  // so holds its lease).
  auto blocker = std::make_shared<testing::Gate>();
  std::atomic<bool> blocking{false};
  REQUIRE(a->Submit({TypeName("repack"), JobId("mesa.git")},
                    [&, blocker](const Context&) {
                      blocking = true;
                      blocker->Wait();
                      return absl::OkStatus();
                    },
                    {})
              .ok());
  REQUIRE(testing::Eventually([&] { return blocking.load(); }));
  auto [ctx, cancel] = WithTimeout(Context::Background(), std::chrono::milliseconds(200));
  CHECK(b->RunSync(ctx, {TypeName("fetch"), JobId("mesa.git")}, [](const Context&) {
           return absl::OkStatus();
         }).code() == absl::StatusCode::kDeadlineExceeded);
  blocker->Open();
}

TEST_CASE("PostgresStore.AnAcquiresPermitHoldsItsFleetWideLeaseUntilReleased") {
  testing::PostgresServer server;
  auto a = RepoReplica(server, "a", 4, 4, 4);
  auto b = RepoReplica(server, "b", 4, 4, 4);
  // What one Acquire's callback got, once it has.
  struct Delivery {
    std::mutex mutex;
    std::optional<StatusOr<Permit>> result;
    bool got() {
      std::lock_guard lock(mutex);
      return result.has_value();
    }
  };
  auto acquire = [](Scheduler& s, const Context& ctx, const std::string& type,
                    const std::string& id) {
    auto d = std::make_shared<Delivery>();
    REQUIRE(
        s.Acquire(ctx, {TypeName(type), JobId(id), FairnessKey("client")}, [d](StatusOr<Permit> p) {
           std::lock_guard lock(d->mutex);
           d->result = std::move(p);
         }).ok());
    return d;
  };
  // TryAcquire cannot promise at once what the store grants after the admission: refused,
  // naming the type, with nothing queued or held.
  const StatusOr<Permit> tried =
      a->TryAcquire({TypeName("repack"), JobId("linux.git"), FairnessKey("client")});
  CHECK(tried.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(tried.status().message().find("'repack' takes fleet-wide leases") != std::string::npos);
  CHECK(a->Snapshot().pending == 0);
  CHECK(a->Snapshot().running == 0);
  auto repack = acquire(*a, Context::Background(), "repack", "linux.git");
  REQUIRE(testing::Eventually([&] { return repack->got(); }));
  REQUIRE(repack->result->ok());
  const std::uint64_t repack_token = (*repack->result)->FencingToken();
  CHECK(repack_token > 0);
  // The permit's job context carries the token, and nothing of the Acquire's wait ends it.
  CHECK((*repack->result)->JobContext().FencingToken() == repack_token);
  CHECK_FALSE((*repack->result)->JobContext().Done());
  // b's fetch of the same repository is admitted there but gets no permit while a's is held;
  // one of another repository gets its own at once.
  auto fetch = acquire(*b, Context::Background(), "fetch", "linux.git");
  auto other = acquire(*b, Context::Background(), "fetch", "git.git");
  REQUIRE(testing::Eventually([&] { return other->got(); }));
  REQUIRE(other->result->ok());
  CHECK((*other->result)->FencingToken() > repack_token);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  CHECK_FALSE(fetch->got());
  (*repack->result)->Release();
  REQUIRE(testing::Eventually([&] { return fetch->got(); }));
  REQUIRE(fetch->result->ok());
  CHECK((*fetch->result)->FencingToken() > repack_token);

  // Waiting for a lease held elsewhere ends with the Acquire's context, and with Shutdown.
  auto [ctx, cancel] = WithTimeout(Context::Background(), std::chrono::milliseconds(200));
  auto timed_out = acquire(*a, ctx, "repack", "linux.git");
  REQUIRE(testing::Eventually([&] { return timed_out->got(); }));
  CHECK(timed_out->result->status().code() == absl::StatusCode::kDeadlineExceeded);
  auto cut = acquire(*a, Context::Background(), "repack", "linux.git");
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK_FALSE(cut->got());
  CHECK(a->Shutdown(Context::Background()).ok());
  REQUIRE(cut->got());
  CHECK(cut->result->status().code() == absl::StatusCode::kCancelled);
  // The permit's holder gives the lease back when it releases: a takes none meanwhile, and b's
  // next fetch of the repository goes through.
  (*fetch->result)->Release();
  auto again = acquire(*b, Context::Background(), "fetch", "linux.git");
  REQUIRE(testing::Eventually([&] { return again->got(); }));
  CHECK(again->result->ok());
  (*again->result)->Release();
  (*other->result)->Release();
}

TEST_CASE("PostgresStore.AFleetWideCapHoldsAcrossReplicas") {
  testing::PostgresServer server;
  std::atomic<int> running{0}, most{0};
  auto replica = [&](const std::string& name) {
    SchedulerOptions o;
    o.persistence.store = std::shared_ptr<Store>(*OpenPostgresStore(server.conninfo(), {name}));
    o.rule.max_concurrency = 2;
    o.fleet.claim_interval = Seconds(0.05);
    o.fleet.type_caps = {{"repack", 1}};
    o.runtime.warn = [](std::string_view) {};
    auto s = *Scheduler::Create(o);
    REQUIRE(s->RegisterType("repack", testing::Type(2, 2)).ok());  // two at once per replica
    return s;
  };
  auto a = replica("a");
  auto b = replica("b");
  std::atomic<int> done{0};
  for (Scheduler* s : {a.get(), b.get()}) {
    for (const char* id : {"linux.git", "git.git"}) {  // different repositories: no conflict
      REQUIRE(s->Submit(
                   {TypeName("repack"), JobId(id)},
                   [&](const Context& ctx) {
                     CHECK(ctx.FencingToken() > 0);
                     const int now = ++running;
                     int seen = most.load();
                     while (now > seen && !most.compare_exchange_weak(seen, now)) {
                     }
                     std::this_thread::sleep_for(std::chrono::milliseconds(50));
                     --running;
                     return absl::OkStatus();
                   },
                   [&](const Status&) { ++done; })
                  .ok());
    }
  }
  REQUIRE(testing::Eventually([&] { return done.load() == 4; }));
  CHECK(most.load() == 1);  // without the fleet-wide cap, up to four at once
  // A cap must be at least 1.
  SchedulerOptions bad;
  bad.persistence.store = std::shared_ptr<Store>(*OpenPostgresStore(server.conninfo()));
  bad.fleet.type_caps = {{"repack", 0}};
  Status refused = Scheduler::Create(bad).status();
  CHECK(refused.code() == absl::StatusCode::kInvalidArgument);
  CHECK(refused.message().find("fleet.type_caps of 'repack' must be >= 1") != std::string::npos);
}

// A fleet-wide cap counts running jobs, not claimed ones: three replicas of one slot under a cap
// of 2 run two jobs at once, and no replica's claims hold more of the cap's slots than it can
// run (before, a replica of one slot claimed two jobs, took both slots, and the others' claims
// came back empty while it ran one).
TEST_CASE("PostgresStore.AFleetWideCapsSlotsGoToJobsThatRunNotToJobsAReplicaClaimed") {
  testing::PostgresServer server;
  std::atomic<int> running{0}, most{0}, ran{0};
  auto replica = [&](const std::string& name) {
    SchedulerOptions o;
    o.persistence.store = std::shared_ptr<Store>(*OpenPostgresStore(server.conninfo(), {name}));
    o.rule.max_concurrency = 1;
    o.fleet.claim_interval = Seconds(0.05);
    o.fleet.type_caps = {{"fetch", 2}};
    o.runtime.warn = [](std::string_view) {};
    auto s = *Scheduler::Create(o);
    REQUIRE(s->RegisterType("fetch", testing::Type(1, 1)).ok());
    REQUIRE(s->RegisterDurable("fetch", [&](const DurableJob&, const Context&) {
               const int now = ++running;
               int seen = most.load();
               while (now > seen && !most.compare_exchange_weak(seen, now)) {
               }
               std::this_thread::sleep_for(std::chrono::milliseconds(40));
               --running;
               ++ran;
               return absl::OkStatus();
             }).ok());
    REQUIRE(s->Recover().ok());
    return s;
  };
  auto a = replica("a");
  auto b = replica("b");
  auto c = replica("c");
  constexpr int kJobs = 40;
  std::vector<std::string> ids;  // the batch's names are views: their strings outlive it
  for (int i = 0; i < kJobs; ++i) ids.push_back(std::to_string(i));
  std::vector<DurableSubmission> jobs;
  for (const std::string& id : ids) jobs.push_back({{TypeName("fetch"), JobId(id)}});
  REQUIRE(a->SubmitDurableBatch(jobs).ok());
  // The most of the cap's slots one replica held, sampled until every job ran (a sample can miss
  // a moment, never invent one).
  int most_held = 0;
  REQUIRE(testing::Eventually([&] {
    most_held = std::max(most_held,
                         std::atoi(server
                                       .Sql("SELECT coalesce(max(n), 0) FROM (SELECT count(*) AS n "
                                            "FROM fairgate_resource_leases WHERE grp = "
                                            "'fairgate.type_cap' GROUP BY holder) h")
                                       .c_str()));
    return ran.load() == kJobs;
  }));
  CHECK(most_held == 1);    // a replica of one slot holds one of the cap's slots at most
  CHECK(most.load() == 2);  // and the cap's two slots ran two jobs at once
  for (Scheduler* s : {a.get(), b.get(), c.get()}) REQUIRE(s->Shutdown(Context::Background()).ok());
  CHECK(OpenPostgresStore(server.conninfo()).value()->LiveJobs()->empty());
}

TEST_CASE(
    "PostgresStore.TwoSchedulersSharingItRunEachDurableJobOnceAndAClosingOneGivesItsJobsBack") {
  testing::PostgresServer server;
  testing::Log ran;
  std::atomic<int> blocking{0};  // a's handlers waiting in a "block" job
  // Replica a blocks on the jobs whose payload is "block" until it shuts down.
  auto replica = [&](const std::string& name, int max_concurrency, int max_claimed) {
    SchedulerOptions o;
    o.persistence.store = std::shared_ptr<Store>(*OpenPostgresStore(server.conninfo(), {name}));
    o.rule.max_concurrency = max_concurrency;
    o.fleet.max_claimed = max_claimed;
    o.fleet.claim_interval = Seconds(0.05);
    o.runtime.warn = [](std::string_view) {};
    auto s = *Scheduler::Create(o);
    REQUIRE(s->RegisterType("fetch", testing::Type(2, 1)).ok());
    REQUIRE(s->RegisterDurable("fetch", [&ran, &blocking, name](const DurableJob& job,
                                                                const Context& ctx) {
               CHECK(job.lease_token > 0);
               if (name == "a" && job.payload == "block") {
                 ++blocking;
                 ctx.Wait();
                 return ctx.Err();
               }
               std::this_thread::sleep_for(std::chrono::milliseconds(20));
               ran.Add(name + " " + std::string(job.id));
               return absl::OkStatus();
             }).ok());
    return s;
  };
  auto a = replica("a", 1, 2);
  auto b = replica("b", 2, 0);
  REQUIRE(a->Recover().ok());
  REQUIRE(b->Recover().ok());
  for (int i = 0; i < 40; ++i)
    REQUIRE(a->SubmitDurable({TypeName("fetch"), JobId(std::to_string(i))}, "").ok());
  REQUIRE(testing::Eventually([&] { return ran.entries().size() == 40; }));
  std::set<std::string> ids;
  int on_b = 0;
  for (const std::string& entry : ran.entries()) {
    ids.insert(entry.substr(2));
    on_b += entry[0] == 'b';
  }
  CHECK(ids.size() == 40);  // each exactly once
  CHECK(on_b > 0);          // b claimed jobs a stored
  // A replica keeps nothing of a paused type: it claims none, and gives back at once what a
  // claim under way when the pause came took (the store counts that claim: b's count may be one
  // or two higher). One that shuts down gives back what it claimed and had not finished: here one
  // job cancelled while it ran and one never admitted.
  REQUIRE(b->PauseType("fetch").ok());
  const double claimed_by_a = Claimed(*a);
  REQUIRE(b->SubmitDurable({TypeName("fetch"), JobId("late0")}, "block").ok());
  REQUIRE(b->SubmitDurable({TypeName("fetch"), JobId("late1")}, "block").ok());
  const bool claimed_both = testing::Eventually([&] { return Claimed(*a) == claimed_by_a + 2; });
  INFO("a claimed ", Claimed(*a), " in all, ", claimed_by_a, " before the pause; b ", Claimed(*b),
       ", ", on_b, " of the 40 ran on b");
  REQUIRE(claimed_both);
  CHECK(Claimed(*b) >= on_b);
  CHECK(Claimed(*b) <= on_b + 2);
  // The claim counted an attempt of each; the claim lands before a begins one of the two: wait
  // for its handler, or the shutdown may come first and give both back unbegun.
  auto store = *OpenPostgresStore(server.conninfo());
  REQUIRE(testing::Eventually([&] { return blocking == 1; }));
  REQUIRE(a->Shutdown(Context::Background()).ok());
  // b acknowledges its finished jobs in batches, so the last of the 40 it ran may still be
  // stored for a moment (seen once under ASan: 3 live jobs, 21 of the 40 run on b).
  std::vector<StoredJob> live;
  REQUIRE(testing::Eventually([&] {
    live = *store->LiveJobs();
    return live.size() == 2;
  }));
  // The one that began counts its attempt; the other was given back with the attempt its claim
  // had counted.
  CHECK(live[0].attempts + live[1].attempts == 1);
  CHECK(store->ClaimJobs({{"fetch", 1}}, 10, 0.01)->size() == 2);  // nobody holds them
  REQUIRE(b->ResumeType("fetch").ok());  // b claims them once that short lease is over
  REQUIRE(testing::Eventually([&] { return ran.entries().size() == 42; }));
  CHECK(ran.entries()[40].substr(0, 6) == "b late");
}

// A replica that stores one "fetch" job, claims it with a 50 ms lease, begins its attempt when
// `begin`, and is gone: no renewal, no release.
void ClaimAndDie(const testing::PostgresServer& server, bool begin) {
  auto dying = *OpenPostgresStore(server.conninfo(), {"dying"});
  StoredJob job;
  job.type = "fetch";
  job.id = "repo";
  REQUIRE(dying->AddJob(job).ok());
  auto claimed = dying->ClaimJobs({{"fetch", 1}}, 1, /*lease_seconds=*/0.05);
  REQUIRE(claimed.ok());
  REQUIRE(claimed->size() == 1);
  if (begin) REQUIRE(*dying->BeginAttempt(claimed->front().sequence) == 1);
}

// The replica that claims what ClaimAndDie left, once its lease lapses: "fetch" jobs run
// `handler` under `retry`; Recover called.
std::unique_ptr<Scheduler> Survivor(const testing::PostgresServer& server, DurableHandler handler,
                                    const RetryPolicy& retry) {
  SchedulerOptions o;
  o.persistence.store = std::shared_ptr<Store>(*OpenPostgresStore(server.conninfo(), {"survivor"}));
  o.fleet.claim_interval = Seconds(0.05);
  o.runtime.warn = [](std::string_view) {};
  auto survivor = *Scheduler::Create(o);
  REQUIRE(survivor->RegisterType("fetch", testing::Type(2, 1)).ok());
  REQUIRE(survivor->RegisterDurable("fetch", std::move(handler), retry).ok());
  REQUIRE(survivor->Recover().ok());
  return survivor;
}

// A replica that dies during a job's last allowed attempt leaves it claimed with that attempt
// begun; the replica that claims it once the lease lapses moves it to the dead jobs, with an
// error saying the attempt was interrupted, and does not run it again (a payload that kills its
// process must not loop through the fleet).
TEST_CASE("PostgresStore.AJobWhoseLastAttemptWasCutShortOnADeadReplicaIsDeadNotRunAgain") {
  testing::PostgresServer server;
  ClaimAndDie(server, /*begin=*/true);
  std::atomic<int> runs{0};
  auto survivor = Survivor(server,
                           [&](const DurableJob&, const Context&) {
                             ++runs;
                             return absl::OkStatus();
                           },
                           {.max_attempts = 1});
  auto store = *OpenPostgresStore(server.conninfo());
  REQUIRE(testing::Eventually([&] { return store->DeadJobs()->size() == 1; }));
  CHECK(runs == 0);
  CHECK(store->LiveJobs()->empty());
  const StoredJob dead = store->DeadJobs()->front();
  CHECK(dead.attempts == 1);
  CHECK(dead.last_error.find("interrupted") != std::string::npos);
  REQUIRE(survivor->Shutdown(Context::Background()).ok());
  CHECK(runs == 0);
}

// The claim is the attempt's mark: a replica that dies holding a job it claimed and had not begun
// leaves that attempt counted, and the next replica runs the job with the next attempt number.
TEST_CASE("PostgresStore.AJobClaimedByAReplicaThatDiedBeforeBeginningItCountsThatAttempt") {
  testing::PostgresServer server;
  ClaimAndDie(server, /*begin=*/false);
  testing::Log ran;
  auto survivor = Survivor(server,
                           [&](const DurableJob& job, const Context&) {
                             ran.Add(std::to_string(job.attempt));
                             return absl::OkStatus();
                           },
                           {.max_attempts = 2});
  REQUIRE(testing::Eventually([&] { return ran.entries().size() == 1; }));
  CHECK(ran.entries() == std::vector<std::string>{"2"});
  REQUIRE(survivor->Shutdown(Context::Background()).ok());
  CHECK(server.Sql("SELECT count(*) FROM fairgate_durable_jobs") == "0");
}

// A shared store that passes every call to another (a real PostgreSQL store) and, once armed,
// runs `after_claim` right after the first claim that took jobs, before the replica queues them:
// what happens when something changes while a claim is under way. It records how many jobs each
// claim asked for, and can make every claim take `claim_delay` longer.
class ClaimHookStore final : public testing::ForwardingSharedStore {
 public:
  using ForwardingSharedStore::ForwardingSharedStore;
  void Arm(std::function<void()> after_claim) {
    std::lock_guard lock(mutex_);
    after_claim_ = std::move(after_claim);
  }
  std::atomic<int> claim_delay_ms{0};
  std::vector<std::size_t> Asked() {
    std::lock_guard lock(mutex_);
    return asked_;
  }

  StatusOr<std::vector<StoredJob>> ClaimJobs(const std::vector<ClaimableType>& types,
                                             std::size_t max_jobs, double lease_seconds) override {
    {
      std::lock_guard lock(mutex_);
      asked_.push_back(max_jobs);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(claim_delay_ms.load()));
    StatusOr<std::vector<StoredJob>> claimed = inner_->ClaimJobs(types, max_jobs, lease_seconds);
    std::function<void()> hook;
    if (claimed.ok() && !claimed->empty()) {
      std::lock_guard lock(mutex_);
      hook = std::exchange(after_claim_, nullptr);
    }
    if (hook) hook();
    return claimed;
  }

 private:
  std::mutex mutex_;
  std::function<void()> after_claim_;
  std::vector<std::size_t> asked_;
};

// By default a replica holds twice its slots at first and more as its jobs finish during a
// claim's round trip, or before it (it ran dry), up to 64 times its slots; max_claimed fixes the
// number.
TEST_CASE("PostgresStore.AReplicaClaimsAsManyAsItCanStartSoonWithinItsBounds") {
  testing::PostgresServer server;
  for (const int max_claimed : {0, 3}) {
    CAPTURE(max_claimed);
    auto hooked = std::make_shared<ClaimHookStore>(
        std::shared_ptr<SharedStore>(*OpenPostgresStore(server.conninfo(), {"a"})));
    hooked->claim_delay_ms = 30;  // a slow round trip: the no-op jobs all finish during it
    SchedulerOptions o;
    o.persistence.store = hooked;
    o.rule.max_concurrency = 2;
    o.fleet.max_claimed = max_claimed;
    o.fleet.claim_interval = Seconds(0.05);
    o.runtime.warn = [](std::string_view) {};
    std::atomic<int> runs{0};
    auto s = *Scheduler::Create(o);
    REQUIRE(s->RegisterType("fetch", testing::Type(2, 1)).ok());
    REQUIRE(s->RegisterDurable("fetch", [&runs](const DurableJob&, const Context&) {
               ++runs;
               return absl::OkStatus();
             }).ok());
    REQUIRE(s->Recover().ok());
    std::vector<DurableSubmission> batch;
    std::vector<std::string> ids;
    for (int i = 0; i < 300; ++i) ids.push_back("repo" + std::to_string(i));
    for (const std::string& id : ids) batch.push_back({{TypeName("fetch"), JobId(id)}, ""});
    REQUIRE(s->SubmitDurableBatch(batch).ok());
    REQUIRE(testing::Eventually([&] { return runs == 300; }));
    REQUIRE(s->Shutdown(Context::Background()).ok());
    const std::vector<std::size_t> asked = hooked->Asked();
    REQUIRE(!asked.empty());
    const std::size_t most = *std::max_element(asked.begin(), asked.end());
    if (max_claimed == 0) {
      CHECK(asked.front() == 4u);  // twice the slots
      CHECK(most > 4u);            // more once jobs finished during a claim or before it
      CHECK(most <= 128u);         // never above 64 times the slots
    } else {
      CHECK(most <= 3u);
    }
    CHECK(server.Sql("SELECT count(*) FROM fairgate_durable_jobs") == "0");
    // Every claim is counted, by whether it took jobs (once a claim under way at the shutdown,
    // asked for already, has returned).
    CHECK(Metric(*s, "fairgate_claims_total{result=\"jobs\"}") >=
          300.0 / static_cast<double>(most));
    CHECK(testing::Eventually([&] {
      return Metric(*s, "fairgate_claims_total{result=\"jobs\"}") +
                 Metric(*s, "fairgate_claims_total{result=\"empty\"}") ==
             static_cast<double>(hooked->Asked().size());
    }));
  }
}

// One replica on `store` (a ClaimHookStore) of 40 stored jobs on 40 repositories, which holds at
// most 8 and claims only when its jobs' ends ask for it; each job's handler waits for a permit,
// so that the test decides when each ends. `leased`: its type is in a fleet-wide conflict group
// (each claimed job takes its repository's lease).
class GatedReplica {
 public:
  GatedReplica(testing::PostgresServer& server, std::shared_ptr<ClaimHookStore> store, bool leased)
      : server_(server), store_(std::move(store)) {
    std::vector<StoredJob> jobs;
    for (int i = 0; i < 40; ++i) jobs.push_back(testing::TestJob("repo" + std::to_string(i), ""));
    REQUIRE(OpenPostgresStore(server.conninfo()).value()->AddJobs(jobs).ok());
    SchedulerOptions o;
    o.persistence.store = store_;
    o.rule.max_concurrency = 8;
    o.fleet.max_claimed = 8;                 // a target of 8: claims at 4 held
    o.fleet.claim_interval = Seconds(3600);  // no claim but those the jobs' ends ask for
    if (leased) o.fleet.conflict_groups = {"repo"};
    o.runtime.warn = [](std::string_view) {};
    scheduler_ = *Scheduler::Create(o);
    REQUIRE(scheduler_->RegisterType("fetch", testing::Type(2, 8, leased ? "repo" : "")).ok());
    REQUIRE(scheduler_
                ->RegisterDurable("fetch",
                                  [this](const DurableJob&, const Context&) {
                                    std::unique_lock lock(mutex_);
                                    permitted_.wait(lock, [&] { return permits_ > 0; });
                                    --permits_;
                                    ++ended_;
                                    return absl::OkStatus();
                                  })
                .ok());
    REQUIRE(scheduler_->Recover().ok());  // claims 8
  }
  // Whatever failed, no handler waits past the test (the scheduler waits for them as it ends).
  ~GatedReplica() {
    Permit(1000);
    scheduler_.reset();
  }
  void Permit(int n) {
    {
      std::unique_lock lock(mutex_);
      permits_ += n;
    }
    permitted_.notify_all();
  }
  std::string Stored() { return server_.Sql("SELECT count(*) FROM fairgate_durable_jobs"); }
  // Ends `n` jobs during the next claim that takes jobs, and waits there until `stored` jobs are
  // left (their removals written) before it returns.
  void EndDuringNextClaim(int n, int stored) {
    store_->Arm([this, n, stored] {
      Permit(n);
      (void)testing::Eventually([&] { return Stored() == std::to_string(stored); });
    });
  }
  // Every job run, the replica shut down, the table empty.
  void Finish() {
    Permit(1000);
    REQUIRE(testing::Eventually([&] { return ended_ == 40; }));
    REQUIRE(scheduler_->Shutdown(Context::Background()).ok());
    CHECK(Stored() == "0");
  }
  Scheduler& scheduler() { return *scheduler_; }

 private:
  testing::PostgresServer& server_;
  std::shared_ptr<ClaimHookStore> store_;
  internal::WaitMutex mutex_;
  internal::WaitCondition permitted_;
  int permits_ = 0;
  std::atomic<int> ended_{0};
  std::unique_ptr<Scheduler> scheduler_;
};

// Once a replica holds half its target it claims again. When its held jobs fell to half while a
// claim was under way and that claim brought them back above half, it waits for half again
// rather than claiming the few jobs left room for at once (a claim costs the store mostly per
// claim); of leased jobs (whose claims cost it mostly per job), it claims them at once.
TEST_CASE("PostgresStore.AReplicaClaimsAgainOnceItHoldsHalfItsTarget") {
  for (const bool leased : {false, true}) {
    CAPTURE(leased);
    testing::PostgresServer server;
    auto hooked = std::make_shared<ClaimHookStore>(
        std::shared_ptr<SharedStore>(*OpenPostgresStore(server.conninfo(), {"a"})));
    GatedReplica replica(server, hooked, leased);
    // During the next claim one more job ends (3 of 8 held, below half); the claim brings the
    // replica to 7.
    replica.EndDuringNextClaim(1, 35);
    replica.Permit(4);  // 4 of 8 held: a claim of 4
    REQUIRE(testing::Eventually([&] { return Claimed(replica.scheduler()) >= 12; }));
    if (leased) {
      REQUIRE(testing::Eventually([&] { return hooked->Asked().size() >= 3; }));
      CHECK(hooked->Asked()[2] == 1u);  // at once, though no job ended after the second claim
    } else {
      replica.Permit(3);  // 4 held again: a claim of 4
      REQUIRE(testing::Eventually([&] { return hooked->Asked().size() >= 3; }));
      CHECK(hooked->Asked()[2] == 4u);  // not 1, at once after the second
    }
    const std::vector<std::size_t> asked = hooked->Asked();
    CHECK(asked[0] == 8u);
    CHECK(asked[1] == 4u);
    replica.Finish();
  }
}

TEST_CASE("PostgresStore.JobsAClaimTookAsTheirTypeWasPausedAreGivenBackForOthersToRun") {
  testing::PostgresServer server;
  testing::Log ran;
  auto replica = [&](const std::string& name, std::shared_ptr<Store> store) {
    SchedulerOptions o;
    o.persistence.store = std::move(store);
    o.rule.max_concurrency = 2;
    o.fleet.claim_interval = Seconds(0.05);
    o.runtime.warn = [](std::string_view) {};
    auto s = *Scheduler::Create(o);
    REQUIRE(s->RegisterType("fetch", testing::Type(2, 1)).ok());
    REQUIRE(s->RegisterDurable("fetch", [&ran, name](const DurableJob& job, const Context&) {
               ran.Add(name + " " + std::string(job.id));
               return absl::OkStatus();
             }).ok());
    return s;
  };
  auto hooked = std::make_shared<ClaimHookStore>(
      std::shared_ptr<SharedStore>(*OpenPostgresStore(server.conninfo(), {"b"})));
  auto a = replica("a", std::shared_ptr<Store>(*OpenPostgresStore(server.conninfo(), {"a"})));
  auto b = replica("b", hooked);
  // Only b claims at first; its first claim that takes jobs is followed, before b queues them,
  // by a pause of their type on b.
  REQUIRE(a->PauseType("fetch").ok());
  REQUIRE(a->Recover().ok());
  REQUIRE(b->Recover().ok());
  std::atomic<bool> paused_during_claim{false};
  hooked->Arm([&] { paused_during_claim = b->PauseType("fetch").ok(); });
  for (int i = 0; i < 3; ++i)
    REQUIRE(a->SubmitDurable({TypeName("fetch"), JobId(std::to_string(i))}, "").ok());
  REQUIRE(testing::Eventually([&] { return paused_during_claim.load(); }));
  // b gave them back at once: a, resumed, claims and runs every one; b runs none.
  REQUIRE(a->ResumeType("fetch").ok());
  REQUIRE(testing::Eventually([&] { return ran.entries().size() == 3; }));
  for (const std::string& entry : ran.entries()) CHECK(entry.substr(0, 2) == "a ");
  CHECK(Claimed(*b) >= 1);  // the claim it gave back
  REQUIRE(a->Shutdown(Context::Background()).ok());
  REQUIRE(b->Shutdown(Context::Background()).ok());
  CHECK(OpenPostgresStore(server.conninfo()).value()->LiveJobs()->empty());
}

// A replica's store whose renewals fail while `stalled`: its claims' leases lapse as a stopped
// process's would, while its handlers go on.
class StallingStore : public testing::ForwardingSharedStore {
 public:
  using ForwardingSharedStore::ForwardingSharedStore;
  std::atomic<bool> stalled{false};
  StatusOr<std::size_t> RenewLeases(double lease_seconds) override {
    if (stalled) return absl::UnavailableError("stalled (test)");
    return inner_->RenewLeases(lease_seconds);
  }
};

// Replica a runs a job and stalls past its lease; b claims the job and runs it; then a's handler
// returns. a's run says nothing of the job's cost: the fleet charges the key what a estimated at
// admission (0.1, the type's default cost) and b's own short run, not a's wall time (over the
// 0.5 s lease). Without the rule the key's shared cost is at least a's wall time.
TEST_CASE("PostgresStore.AnAttemptWhoseLeaseLapsedWhileItRanIsChargedItsEstimateNotItsTime") {
  testing::PostgresServer server;
  std::atomic<bool> a_started{false}, b_ran{false}, a_returned{false};
  auto replica = [&](const std::string& name, std::shared_ptr<Store> store) {
    SchedulerOptions o;
    o.persistence.store = std::move(store);
    o.rule.max_concurrency = 1;
    o.fleet.lease_ttl = Seconds(0.5);
    o.fleet.claim_interval = Seconds(0.05);
    o.runtime.warn = [](std::string_view) {};
    auto s = *Scheduler::Create(o);
    REQUIRE(s->RegisterType("fetch", testing::Type(1, 1, "", /*default_cost=*/0.1)).ok());
    REQUIRE(s->RegisterDurable("fetch", [&, name](const DurableJob&, const Context&) {
               if (name == "b") {
                 b_ran = true;
                 return absl::OkStatus();
               }
               a_started = true;
               const bool b_took_it = testing::Eventually([&] { return b_ran.load(); });
               a_returned = true;
               return b_took_it ? absl::OkStatus() : absl::InternalError("b never ran the job");
             }).ok());
    return s;
  };
  auto stalling = std::make_shared<StallingStore>(
      std::shared_ptr<SharedStore>(*OpenPostgresStore(server.conninfo(), {"a"})));
  stalling->stalled = true;  // a's claim is never renewed
  auto a = replica("a", stalling);
  REQUIRE(a->Recover().ok());
  REQUIRE(a->SubmitDurable({TypeName("fetch"), JobId("repo"), FairnessKey("light")}, "").ok());
  REQUIRE(testing::Eventually([&] { return a_started.load(); }));
  auto b = replica("b", std::shared_ptr<Store>(*OpenPostgresStore(server.conninfo(), {"b"})));
  REQUIRE(b->Recover().ok());  // b claims the job once a's lease lapses
  REQUIRE(testing::Eventually([&] { return a_returned.load(); }));
  CHECK(b_ran.load());
  // Each shuts down once its run has ended, sharing what it charged.
  REQUIRE(a->Shutdown(Context::Background()).ok());
  REQUIRE(b->Shutdown(Context::Background()).ok());
  auto store = *OpenPostgresStore(server.conninfo());
  const double shared = store->ShareKeyCosts({}, {"light"})->at(0).accumulated_cost;
  INFO("the key's shared cost: ", shared);
  CHECK(shared >= 0.1);  // a's charge at admission stays
  CHECK(shared < 0.3);   // b's run took milliseconds; a's wall time was over 0.5 s
  CHECK(store->LiveJobs()->empty());
}

}  // namespace postgres_store_test
}  // namespace
}  // namespace fairgate

TEST_SUITE_END();

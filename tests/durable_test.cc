// Durable jobs, warm restarts and the store's failures, through the Scheduler with a real SQLite
// file (fairgate/durable.h, fairgate/store.h). A restart is a second Scheduler on the same file
// after the first was destroyed; the crash test (durable_crash_test.cc) kills real processes.
#include <sched.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "doctest/doctest.h"
#include "fairgate/scheduler.h"
#include "fairgate/sqlite_store.h"
#include "forwarding_store.h"
#include "runtime_test_util.h"
#include "store_contract.h"
#include "temp_dir.h"
#include "test_job_types.h"

// The runtime's tests: CTest labels them "runtime", and runs them again on other pools and
// under ThreadSanitizer (tests/CMakeLists.txt).
TEST_SUITE_BEGIN("runtime");

namespace fairgate {
namespace {
namespace durable_test {

using namespace std::chrono_literals;
using testing::Eventually;
using testing::TempDir;
using testing::TestClock;
using testing::Type;

// The wall clock, in Unix seconds (a store's times).
double UnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Writes `state` into the SQLite file `path`, as a scheduler's flush before a restart would.
void SaveState(const std::string& path, const LearnedState& state) {
  auto store = *OpenSqliteStore(path);
  REQUIRE(store->SaveLearned(state, -1e300, -1e300).ok());
}

// Options with a store in the SQLite file `path` (opened here: the test fails if it cannot be).
SchedulerOptions WithState(const std::string& path) {
  SchedulerOptions options;
  StatusOr<std::unique_ptr<Store>> store = OpenSqliteStore(path);
  REQUIRE_MESSAGE(store.ok(), store.status().message());
  options.persistence.store = *std::move(store);
  options.rule.max_concurrency = 1;
  options.runtime.worker_threads = 1;
  options.runtime.warn = [](std::string_view) {};  // a tier cap above the global one is meant here
  return options;
}

// What a handler saw, from any fiber.
struct Seen {
  std::mutex mutex;
  std::vector<std::string> runs;  // "id#attempt:payload"
  void Add(const DurableJob& job) {
    std::lock_guard lock(mutex);
    runs.push_back(std::string(job.id) + "#" + std::to_string(job.attempt) + ":" +
                   std::string(job.payload));
  }
  std::vector<std::string> Get() {
    std::lock_guard lock(mutex);
    return runs;
  }
  std::size_t Size() {
    std::lock_guard lock(mutex);
    return runs.size();
  }
};

std::vector<StoredJob> Live(const std::string& path) {
  // A failure is reported with its status, not a crash on an empty StatusOr.
  StatusOr<std::unique_ptr<Store>> store = OpenSqliteStore(path);
  REQUIRE_MESSAGE(store.ok(), store.status().ToString());
  StatusOr<std::vector<StoredJob>> live = (*store)->LiveJobs();
  REQUIRE_MESSAGE(live.ok(), live.status().ToString());
  return *std::move(live);
}

// Stores jobs of `type` with these ids, as a previous process would have left them.
void StoreJobs(const std::string& path, const std::string& type,
               const std::vector<std::string>& ids) {
  auto store = *OpenSqliteStore(path);
  StoredJob job;
  job.type = type;
  for (const std::string& id : ids) {
    job.id = id;
    REQUIRE(store->AddJob(job).ok());
  }
}

// A scheduler on `options` with the type "fetch", whose durable jobs succeed and are recorded in
// `seen`.
std::unique_ptr<Scheduler> Recording(const SchedulerOptions& options, Seen& seen) {
  auto s = *Scheduler::Create(options);
  REQUIRE(s->RegisterType("fetch", Type(4, 1)).ok());
  REQUIRE(s->RegisterDurable("fetch", [&seen](const DurableJob& job, const Context&) {
             seen.Add(job);
             return absl::OkStatus();
           }).ok());
  return s;
}

TEST_CASE("Durable.RefusalsNameWhatIsMissing") {
  TempDir dir;
  auto plain = *Scheduler::Create();
  REQUIRE(plain->RegisterType("fetch", Type(4, 1)).ok());
  auto noop = [](const DurableJob&, const Context&) { return absl::OkStatus(); };
  Status unstored = plain->RegisterDurable("fetch", noop);
  CHECK(unstored.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(unstored.message().find("PersistenceOptions::store") != std::string::npos);
  CHECK(plain->SubmitDurable({TypeName("fetch"), JobId("a")}, "").status().code() ==
        absl::StatusCode::kFailedPrecondition);
  CHECK(plain->Recover().status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(plain->DeadJobs().status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(plain->DeadJobs(0, 10).status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(plain->FlushState().code() == absl::StatusCode::kFailedPrecondition);

  auto s = *Scheduler::Create(WithState(dir.path() + "/state.db"));
  auto ok = [](const DurableJob&, const Context&) { return absl::OkStatus(); };
  CHECK(s->RegisterDurable("fetch", ok).code() == absl::StatusCode::kNotFound);
  REQUIRE(s->RegisterType("fetch", Type(4, 1)).ok());
  CHECK(s->RegisterDurable("fetch", nullptr).code() == absl::StatusCode::kInvalidArgument);
  Status bad = s->RegisterDurable("fetch", ok, RetryPolicy{.max_attempts = 0});
  CHECK(bad.code() == absl::StatusCode::kInvalidArgument);
  CHECK(bad.message().find("max_attempts") != std::string::npos);
  bad = s->RegisterDurable("fetch", ok,
                           RetryPolicy{.initial_backoff = Seconds(5), .max_backoff = Seconds(1)});
  CHECK(bad.message().find("max_backoff") != std::string::npos);
  REQUIRE(s->RegisterDurable("fetch", ok).ok());
  CHECK(s->RegisterDurable("fetch", ok).code() == absl::StatusCode::kAlreadyExists);

  Status early = s->SubmitDurable({TypeName("fetch"), JobId("a")}, "").status();
  CHECK(early.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(early.message().find("Recover") != std::string::npos);
  REQUIRE(s->Recover().ok());
  CHECK(s->Recover().status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(s->SubmitDurable({TypeName("fetch"), JobId("")}, "").status().code() ==
        absl::StatusCode::kInvalidArgument);
  REQUIRE(s->RegisterType("repack", Type(4, 1)).ok());
  CHECK(s->SubmitDurable({TypeName("repack"), JobId("a")}, "").status().code() ==
        absl::StatusCode::kNotFound);
  // Nothing refused was stored.
  CHECK(Live(dir.path() + "/state.db").empty());
}

TEST_CASE("Durable.AJobRunsWithItsPayloadAndLeavesTheStoreWhenItSucceeds") {
  TempDir dir;
  const std::string path = dir.path() + "/state.db";
  Seen seen;
  auto s = Recording(WithState(path), seen);
  RecoveryReport report = *s->Recover();
  CHECK(report.queued == 0);
  StatusOr<std::uint64_t> sequence = s->SubmitDurable(
      {TypeName("fetch"), JobId("linux.git"), FairnessKey("alice")}, "refs/heads/main");
  REQUIRE(sequence.ok());
  REQUIRE(Eventually([&] { return seen.Size() == 1; }));
  CHECK(seen.Get()[0] == "linux.git#1:refs/heads/main");
  REQUIRE(Eventually([&] { return Live(path).empty(); }));
  // The success is counted once the removal has returned, a moment after the store shows it.
  auto metrics = [&] {
    std::string out;
    s->WriteMetrics(out);
    return out;
  };
  CHECK(Eventually([&] {
    return metrics().find("fairgate_durable_jobs_total{outcome=\"succeeded\"} 1\n") !=
           std::string::npos;
  }));
  CHECK(metrics().find("fairgate_durable_jobs_total{outcome=\"stored\"} 1\n") != std::string::npos);
}

TEST_CASE("Durable.PendingJobsSurviveARestartAndRunInTheirStoredOrder") {
  TempDir dir;
  const std::string path = dir.path() + "/state.db";
  {
    auto s = *Scheduler::Create(WithState(path));
    REQUIRE(s->RegisterType("fetch", Type(4, 1)).ok());
    REQUIRE(s->RegisterDurable("fetch", [](const DurableJob&, const Context&) {
               return absl::OkStatus();
             }).ok());
    REQUIRE(s->Recover().ok());
    REQUIRE(s->PauseType("fetch").ok());  // nothing runs: all stay pending
    for (const char* id : {"e", "b", "d", "a", "c"}) {
      REQUIRE(s->SubmitDurable({TypeName("fetch"), JobId(id)}, std::string("payload-") + id).ok());
    }
  }  // shut down with five jobs pending: they stay stored
  REQUIRE(Live(path).size() == 5);

  Seen seen;
  auto s = Recording(WithState(path), seen);
  REQUIRE(s->PauseType("fetch").ok());
  RecoveryReport report = *s->Recover();
  CHECK(report.queued == 5);
  CHECK(report.deferred == 0);
  // Submitted after Recover: after every recovered job, whatever its id.
  REQUIRE(s->SubmitDurable({TypeName("fetch"), JobId("0")}, "new").ok());
  REQUIRE(s->ResumeType("fetch").ok());
  REQUIRE(Eventually([&] { return seen.Size() == 6; }));
  CHECK(seen.Get() == std::vector<std::string>{"e#1:payload-e", "b#1:payload-b", "d#1:payload-d",
                                               "a#1:payload-a", "c#1:payload-c", "0#1:new"});
}

// Two schedulers on one state file would each recover and run every stored job: while one works
// them (from its Recover until it is destroyed), another's Recover is refused, whether it opened
// the file itself, by another path, or was given the first one's store; once the first is gone
// it may. (Another process's: durable_crash_test.cc.)
TEST_CASE("Durable.OneSchedulerAtATimeWorksAStateFilesJobs") {
  TempDir dir;
  const std::string path = dir.path() + "/state.db";
  auto gate = std::make_shared<testing::Gate>();
  std::atomic<int> runs{0};
  SchedulerOptions first_options = WithState(path);
  std::shared_ptr<Store> first_store = first_options.persistence.store;
  auto first = *Scheduler::Create(first_options);
  REQUIRE(first->RegisterType("fetch", Type(4, 1)).ok());
  REQUIRE(first
              ->RegisterDurable("fetch",
                                [&, gate](const DurableJob&, const Context&) {
                                  ++runs;
                                  gate->Wait();
                                  return absl::OkStatus();
                                })
              .ok());
  REQUIRE(first->Recover().ok());
  REQUIRE(first->SubmitDurable({TypeName("fetch"), JobId("linux.git")}, "").ok());
  REQUIRE(Eventually([&] { return runs.load() == 1; }));

  Seen seen;
  REQUIRE(symlink(path.c_str(), (dir.path() + "/link.db").c_str()) == 0);
  const SchedulerOptions through_a_link = WithState(dir.path() + "/link.db");
  SchedulerOptions same_store = WithState(path);
  same_store.persistence.store = first_store;
  for (const SchedulerOptions& options : {WithState(path), through_a_link, same_store}) {
    auto second = Recording(options, seen);
    const Status refused = second->Recover().status();
    INFO(refused.ToString());
    CHECK(refused.code() == absl::StatusCode::kFailedPrecondition);
    CHECK(refused.message().find("another scheduler works its durable jobs") != std::string::npos);
    // It names who: another handle of this process holds the lock file, or this very store.
    CHECK((refused.message().find("held by this process") != std::string::npos ||
           refused.message().find("through this same store") != std::string::npos));
    // Refused, it stores nothing either.
    CHECK(second->SubmitDurable({TypeName("fetch"), JobId("x")}, "").status().code() ==
          absl::StatusCode::kFailedPrecondition);
  }
  auto second = Recording(WithState(path), seen);
  CHECK(second->Recover().status().code() == absl::StatusCode::kFailedPrecondition);
  gate->Open();
  REQUIRE(Eventually([&] { return Live(path).empty(); }));
  first.reset();
  // The first is gone: the second's Recover may be called again, and works the file's jobs.
  RecoveryReport report = *second->Recover();
  CHECK(report.queued == 0);  // linux.git ran once, on the first, and is gone
  REQUIRE(second->SubmitDurable({TypeName("fetch"), JobId("git.git")}, "").ok());
  REQUIRE(Eventually([&] { return seen.Size() == 1; }));
  CHECK(seen.Get() == std::vector<std::string>{"git.git#1:"});
  CHECK(runs.load() == 1);
  // A reader's handle (no scheduler's Recover) is never refused.
  CHECK(Eventually([&] { return Live(path).empty(); }));
}

// A durable job whose worker is removed while it runs (fairgate/worker.h): its attempt fails with
// Unavailable, and its retry policy runs it again, on the worker left.
TEST_CASE("Durable.AJobWhoseWorkerIsRemovedIsRetriedElsewhere") {
  TempDir dir;
  const std::string path = dir.path() + "/state.db";
  auto s = *Scheduler::Create(WithState(path));
  REQUIRE(s->RegisterType("fetch", Type(4, 1)).ok());
  REQUIRE(s->AddWorker("first", WorkerConfig{1, {"fetch"}, {}}).ok());
  REQUIRE(s->AddWorker("second", WorkerConfig{1, {"fetch"}, {}}).ok());
  std::mutex mutex;
  std::vector<std::string> runs;  // "worker#attempt"
  std::atomic<bool> on_first{false};
  const RetryPolicy retry{.max_attempts = 3, .initial_backoff = Seconds(0.01)};
  REQUIRE(s->RegisterDurable(
               "fetch",
               [&](const DurableJob& job, const Context& ctx) {
                 {
                   std::lock_guard lock(mutex);
                   runs.push_back(std::string(ctx.Worker()) + "#" + std::to_string(job.attempt));
                 }
                 if (ctx.Worker() != "first") return absl::OkStatus();
                 on_first = true;
                 ctx.WaitFor(20s);  // its worker never answers; the removal cancels the wait
                 return absl::OkStatus();
               },
               retry)
              .ok());
  REQUIRE(s->Recover().ok());
  REQUIRE(s->SubmitDurable({TypeName("fetch"), JobId("repo")}, "").ok());
  REQUIRE(Eventually([&] { return on_first.load(); }));
  REQUIRE(s->RemoveWorker("first").ok());
  REQUIRE(Eventually([&] { return Live(path).empty(); }));
  std::lock_guard lock(mutex);
  CHECK(runs == std::vector<std::string>{"first#1", "second#2"});
  CHECK(s->DeadJobs()->empty());
}

TEST_CASE("Durable.AFailedJobIsRetriedWithBackoffThenDeadWithItsLastError") {
  TempDir dir;
  const std::string path = dir.path() + "/state.db";
  Seen seen;
  auto s = *Scheduler::Create(WithState(path));
  REQUIRE(s->RegisterType("fetch", Type(4, 1)).ok());
  const RetryPolicy retry{
      .max_attempts = 3, .initial_backoff = Seconds(0.01), .max_backoff = Seconds(0.02)};
  REQUIRE(s->RegisterDurable(
               "fetch",
               [&](const DurableJob& job, const Context&) {
                 seen.Add(job);
                 if (job.id == "flaky" && job.attempt < 3)
                   return absl::UnavailableError("remote hung up");
                 if (job.id == "broken") return absl::InternalError("bad pack");
                 return absl::OkStatus();
               },
               retry)
              .ok());
  REQUIRE(s->Recover().ok());
  REQUIRE(s->SubmitDurable({TypeName("fetch"), JobId("flaky")}, "").ok());
  REQUIRE(s->SubmitDurable({TypeName("fetch"), JobId("broken")}, "").ok());
  REQUIRE(Eventually([&] { return seen.Size() == 6; }));
  REQUIRE(Eventually([&] {
    StatusOr<std::vector<StoredJob>> dead = s->DeadJobs();
    REQUIRE_MESSAGE(dead.ok(), dead.status().ToString());
    return dead->size() == 1;
  }));
  std::vector<std::string> runs = seen.Get();
  auto count = [&](const std::string& run) { return std::count(runs.begin(), runs.end(), run); };
  for (const char* run :
       {"flaky#1:", "flaky#2:", "flaky#3:", "broken#1:", "broken#2:", "broken#3:"}) {
    CHECK(count(run) == 1);
  }
  StoredJob dead = s->DeadJobs()->front();
  CHECK(dead.id == "broken");
  CHECK(dead.attempts == 3u);
  CHECK(dead.last_error == "INTERNAL: bad pack");
  REQUIRE(Eventually([&] { return Live(path).empty(); }));  // flaky succeeded, broken is dead

  // A dead job is not run again after a restart; it is still listed.
  s.reset();
  auto again = *Scheduler::Create(WithState(path));
  REQUIRE(again->RegisterType("fetch", Type(4, 1)).ok());
  REQUIRE(again
              ->RegisterDurable("fetch",
                                [&](const DurableJob& job, const Context&) {
                                  seen.Add(job);
                                  return absl::OkStatus();
                                })
              .ok());
  RecoveryReport report = *again->Recover();
  CHECK(report.queued == 0);
  CHECK(report.dead == 1);
  CHECK(again->DeadJobs()->size() == 1);
}

// A dead job given its attempts again runs again from attempt 1, and leaves the store when it
// succeeds; a dead job removed is gone, also after a restart. Neither is done to a live job.
TEST_CASE("Durable.ADeadJobRetriedRunsAgainAndARemovedOneIsGone") {
  TempDir dir;
  const std::string path = dir.path() + "/state.db";
  Seen seen;
  std::atomic<bool> failing{true};
  auto s = *Scheduler::Create(WithState(path));
  REQUIRE(s->RegisterType("fetch", Type(4, 1)).ok());
  REQUIRE(s->RegisterDurable(
               "fetch",
               [&](const DurableJob& job, const Context&) {
                 seen.Add(job);
                 if (failing) return absl::InternalError("bad pack");
                 return absl::OkStatus();
               },
               RetryPolicy{.max_attempts = 2, .initial_backoff = Seconds(0)})
              .ok());
  CHECK(s->RetryDeadJob(1).code() == absl::StatusCode::kFailedPrecondition);  // before Recover
  REQUIRE(s->Recover().ok());
  const std::uint64_t retried = *s->SubmitDurable({TypeName("fetch"), JobId("retried")}, "r");
  const std::uint64_t removed = *s->SubmitDurable({TypeName("fetch"), JobId("removed")}, "");
  REQUIRE(Eventually([&] { return s->DeadJobs()->size() == 2; }));
  CHECK(seen.Size() == 4);
  failing = false;
  REQUIRE(s->RetryDeadJob(retried).ok());
  REQUIRE(Eventually([&] { return seen.Size() == 5; }));
  CHECK(seen.Get().back() == "retried#1:r");  // its attempts counted from 0 again
  REQUIRE(s->RemoveDeadJob(removed).ok());
  REQUIRE(Eventually([&] { return Live(path).empty(); }));
  CHECK(s->DeadJobs()->empty());
  CHECK(s->RetryDeadJob(retried).code() == absl::StatusCode::kNotFound);
  CHECK(s->RemoveDeadJob(removed).code() == absl::StatusCode::kNotFound);
  const std::uint64_t running = *s->SubmitDurable({TypeName("fetch"), JobId("live")}, "");
  CHECK(s->RemoveDeadJob(running).code() == absl::StatusCode::kNotFound);
  s.reset();
  auto again = *Scheduler::Create(WithState(path));
  REQUIRE(again->RegisterType("fetch", Type(4, 1)).ok());
  REQUIRE(again
              ->RegisterDurable("fetch",
                                [&](const DurableJob&, const Context&) { return absl::OkStatus(); })
              .ok());
  CHECK(again->Recover()->dead == 0);
}

// Recover counts the dead jobs without reading them: 20,000 dead jobs of 100 KB each took it 1.4-
// 3.3 s and 1.9 GB of memory, read whole only to be counted (36-90 ms and 8 MB counted).
class DeadJobsReadStore final : public testing::ForwardingStore {
 public:
  using testing::Forwarding<Store>::Forwarding;
  std::atomic<int> reads{0};
  StatusOr<std::vector<StoredJob>> DeadJobs() override {
    ++reads;
    return inner_->DeadJobs();
  }
};

TEST_CASE("Durable.RecoverCountsTheDeadJobsWithoutReadingThem") {
  TempDir dir;
  const std::string path = dir.path() + "/state.db";
  {
    auto store = *OpenSqliteStore(path);
    for (const char* id : {"a", "b", "c"}) {
      StoredJob job;
      job.type = "fetch";
      job.id = id;
      job.payload = std::string(1000, 'p');
      REQUIRE(store->KillJob(*store->AddJob(job), "INTERNAL: bad pack").ok());
    }
  }
  auto store = std::make_shared<DeadJobsReadStore>(std::shared_ptr<Store>(*OpenSqliteStore(path)));
  SchedulerOptions options = WithState(path);
  options.persistence.store = store;
  auto s = *Scheduler::Create(options);
  REQUIRE(s->RegisterType("fetch", Type(4, 1)).ok());
  REQUIRE(s->RegisterDurable("fetch", [](const DurableJob&, const Context&) {
             return absl::OkStatus();
           }).ok());
  StatusOr<RecoveryReport> report = s->Recover();
  REQUIRE_MESSAGE(report.ok(), report.status().ToString());
  CHECK(report->dead == 3);
  CHECK(store->reads == 0);
  CHECK(s->DeadJobs()->size() == 3);  // listed when asked for
  CHECK(store->reads == 1);
}

// The dead jobs a page at a time: each page read from the store's index of them, not the whole
// list; a limit of 0 is refused by name.
class DeadJobsPagedStore final : public testing::ForwardingStore {
 public:
  using testing::Forwarding<Store>::Forwarding;
  std::atomic<int> whole_reads{0};
  StatusOr<std::vector<StoredJob>> DeadJobs() override {
    ++whole_reads;
    return inner_->DeadJobs();
  }
};

TEST_CASE("Durable.DeadJobsAreListedAPageAtATime") {
  TempDir dir;
  const std::string path = dir.path() + "/state.db";
  auto store = std::make_shared<DeadJobsPagedStore>(std::shared_ptr<Store>(*OpenSqliteStore(path)));
  SchedulerOptions options = WithState(path);
  options.persistence.store = store;
  auto s = *Scheduler::Create(options);
  REQUIRE(s->RegisterType("fetch", Type(4, 1)).ok());
  std::atomic<int> ran{0};
  REQUIRE(s->RegisterDurable(
               "fetch",
               [&](const DurableJob& job, const Context&) {
                 ++ran;
                 // Every third job succeeds; the others die at their only attempt.
                 return job.id.back() == '0'
                            ? absl::OkStatus()
                            : absl::InternalError("no pack for " + std::string(job.id));
               },
               RetryPolicy{.max_attempts = 1})
              .ok());
  REQUIRE(s->Recover().ok());
  std::vector<std::uint64_t> died;
  for (int i = 0; i < 9; ++i) {
    const std::string id = "repo" + std::to_string(i) + std::to_string(i % 3);
    StatusOr<std::uint64_t> sequence = s->SubmitDurable({TypeName("fetch"), JobId(id)}, "");
    REQUIRE(sequence.ok());
    if (i % 3 != 0) died.push_back(*sequence);
  }
  REQUIRE(Eventually([&] { return ran == 9 && s->DeadJobs(0, 100)->size() == died.size(); }));
  std::vector<std::uint64_t> walked;
  std::uint64_t after = 0;
  for (;;) {
    StatusOr<std::vector<StoredJob>> page = s->DeadJobs(after, 4);
    REQUIRE_MESSAGE(page.ok(), page.status().ToString());
    for (const StoredJob& job : *page) {
      walked.push_back(job.sequence);
      CHECK(job.last_error == "INTERNAL: no pack for " + job.id);
    }
    if (page->size() < 4) break;
    after = page->back().sequence;
  }
  CHECK(walked == died);
  CHECK(store->whole_reads == 0);
  Status none = s->DeadJobs(0, 0).status();
  CHECK(none.code() == absl::StatusCode::kInvalidArgument);
  CHECK(none.message().find("limit") != std::string::npos);
}

// A store that keeps Store's own page of the dead jobs (a store written before DeadJobsAfter)
// pages as the stores do.
class UnpagedStore final : public testing::ForwardingStore {
 public:
  using testing::Forwarding<Store>::Forwarding;
  StatusOr<std::vector<StoredJob>> DeadJobsAfter(std::uint64_t after, std::size_t limit) override {
    return Store::DeadJobsAfter(after, limit);
  }
};

TEST_CASE("Durable.AStoreWithoutItsOwnPageOfDeadJobsPagesAsTheStoresDo") {
  TempDir dir;
  const std::string path = dir.path() + "/state.db";
  testing::CheckDeadJobsArePaged([&]() -> std::unique_ptr<Store> {
    return std::make_unique<UnpagedStore>(std::shared_ptr<Store>(*OpenSqliteStore(path)));
  });
}

// An attempt's error is kept to its first kMaxLastErrorBytes bytes, cut before a character rather
// than through it, then how much was left out: a handler whose error quotes a large input cannot
// make its job's row outgrow the store, in a deferral or in its death.
TEST_CASE("Durable.AnAttemptsLongErrorIsKeptCutAtACharacterWithWhatWasLeftOut") {
  TempDir dir;
  const std::string path = dir.path() + "/state.db";
  auto s = *Scheduler::Create(WithState(path));
  REQUIRE(s->RegisterType("fetch", Type(4, 1)).ok());
  // "INTERNAL: " (10 bytes), then 'x' up to two bytes before the bound, then a three-byte
  // character (U+20AC) across it, then more.
  const std::string head(kMaxLastErrorBytes - 10 - 2, 'x');
  const std::string message = head + "\xE2\x82\xAC" + std::string(100'000, 'y');
  std::atomic<int> runs{0};
  const RetryPolicy retry{
      .max_attempts = 2, .initial_backoff = Seconds(0.01), .max_backoff = Seconds(0.01)};
  REQUIRE(s->RegisterDurable(
               "fetch",
               [&](const DurableJob&, const Context&) {
                 ++runs;
                 return absl::InternalError(message);
               },
               retry)
              .ok());
  REQUIRE(s->Recover().ok());
  REQUIRE(s->SubmitDurable({TypeName("fetch"), JobId("quoting.git")}, "").ok());
  REQUIRE(Eventually([&] {
    StatusOr<std::vector<StoredJob>> dead = s->DeadJobs();
    REQUIRE_MESSAGE(dead.ok(), dead.status().ToString());
    return dead->size() == 1;
  }));
  CHECK(runs == 2);  // the deferral after the first attempt was stored, the second attempt ran
  const std::string full = "INTERNAL: " + message;
  const std::string kept = s->DeadJobs()->front().last_error;
  const std::size_t cut = kMaxLastErrorBytes - 2;  // before the character, not through it
  CHECK(kept.size() < kMaxLastErrorBytes + 32);
  CHECK(kept.substr(0, cut) == full.substr(0, cut));
  CHECK(kept.substr(cut) == " [" + std::to_string(full.size() - cut) + " bytes more]");
}

TEST_CASE("Durable.AnAttemptCutShortByACrashRunsAgainWithTheNextAttemptNumber") {
  TempDir dir;
  const std::string path = dir.path() + "/state.db";
  std::uint64_t interrupted = 0, waiting = 0;
  {
    // What a process that died mid-attempt leaves: a job whose attempt 1 began, and a job that
    // failed once and waits out a backoff that ends 0.2 s from now.
    auto store = *OpenSqliteStore(path);
    StoredJob job;
    job.type = "fetch";
    job.id = "interrupted";
    interrupted = *store->AddJob(job);
    REQUIRE(*store->BeginAttempt(interrupted) == 1u);
    job.id = "waiting";
    waiting = *store->AddJob(job);
    REQUIRE(*store->BeginAttempt(waiting) == 1u);
    REQUIRE(store->DeferJob(waiting, UnixNow() + 0.2, "UNAVAILABLE: later").ok());
  }
  Seen seen;
  auto s = *Scheduler::Create(WithState(path));
  REQUIRE(s->RegisterType("fetch", Type(4, 1)).ok());
  REQUIRE(s->RegisterType("other", Type(4, 1)).ok());
  REQUIRE(s->RegisterDurable("fetch", [&](const DurableJob& job, const Context&) {
             seen.Add(job);
             return absl::OkStatus();
           }).ok());
  RecoveryReport report = *s->Recover();
  CHECK(report.queued == 1);
  CHECK(report.deferred == 1);
  REQUIRE(Eventually([&] { return seen.Size() == 2; }));
  CHECK(seen.Get() == std::vector<std::string>{"interrupted#2:", "waiting#2:"});
}

// A store that passes every call to another (a SQLite store) and holds the first batch of
// removals until `gate` opens; it counts the removals it is asked for, one by one or in batches.
class HeldRemovalsStore final : public testing::ForwardingStore {
 public:
  using testing::Forwarding<Store>::Forwarding;
  testing::Gate gate;
  std::atomic<int> single{0}, batches{0}, in_batches{0};

  StatusOr<std::vector<Status>> RemoveJobs(const std::vector<std::uint64_t>& sequences) override {
    if (batches++ == 0) gate.Wait();
    in_batches += static_cast<int>(sequences.size());
    return inner_->RemoveJobs(sequences);
  }
  Status RemoveJob(std::uint64_t sequence) override {
    ++single;
    return inner_->RemoveJob(sequence);
  }
};

// A success's removal is written off the workers, in batches: while the first batch's commit is
// held, one worker thread and one slot go on running every other job, and their removals gather
// into later batches; Shutdown returns once all are written.
TEST_CASE("Durable.RemovalsOfSucceededJobsAreWrittenInBatchesOffTheWorkers") {
  TempDir dir;
  const std::string path = dir.path() + "/state.db";
  SchedulerOptions options = WithState(path);  // one slot, one worker thread
  auto held = std::make_shared<HeldRemovalsStore>(std::shared_ptr<Store>(*OpenSqliteStore(path)));
  options.persistence.store = held;
  Seen seen;
  auto s = Recording(options, seen);
  REQUIRE(s->Recover().ok());
  std::vector<DurableSubmission> batch;
  std::vector<std::string> ids;
  for (int i = 0; i < 100; ++i) ids.push_back("repo" + std::to_string(i));
  for (const std::string& id : ids) batch.push_back({{TypeName("fetch"), JobId(id)}, ""});
  REQUIRE(s->SubmitDurableBatch(batch).ok());
  REQUIRE(Eventually([&] { return seen.Size() == 100; }));  // all ran, the first removal held
  CHECK(held->in_batches == 0);
  CHECK(Live(path).size() == 100);
  held->gate.Open();
  REQUIRE(s->Shutdown(Context::Background()).ok());
  CHECK(Live(path).empty());
  CHECK(held->in_batches == 100);
  CHECK(held->single == 0);
  CHECK(held->batches < 100);  // the ninety-nine that waited shared later batches
}

// With the SQLite store, which queues writes, each job's mark and removal go to the store as they
// come and are written with its group commits: every job runs once, as attempt 1, each after its
// mark, and Shutdown returns only once every success's removal is written, also those still
// queued when the last handler returned.
TEST_CASE("Durable.MarksAndRemovalsQueuedToTheSqliteStoreAreAllWrittenByShutdown") {
  TempDir dir;
  const std::string path = dir.path() + "/state.db";
  SchedulerOptions options = WithState(path);
  options.rule.max_concurrency = 8;
  REQUIRE(options.persistence.store->QueuesWrites());
  Seen seen;
  auto s = Recording(options, seen);
  REQUIRE(s->Recover().ok());
  constexpr int kJobs = 200;
  std::vector<std::string> ids;
  for (int i = 0; i < kJobs; ++i) ids.push_back("repo" + std::to_string(i));
  std::vector<std::thread> submitters;
  std::atomic<int> refused{0};
  for (int t = 0; t < 4; ++t) {
    submitters.emplace_back([&, t] {
      for (int i = t; i < kJobs; i += 4) {
        if (!s->SubmitDurable({TypeName("fetch"), JobId(ids[i])}, "").ok()) ++refused;
      }
    });
  }
  for (std::thread& t : submitters) t.join();
  REQUIRE(refused == 0);
  REQUIRE(Eventually([&] { return seen.Size() == kJobs; }));
  REQUIRE(s->Shutdown(Context::Background()).ok());
  CHECK(Live(path).empty());
  std::vector<std::string> runs = seen.Get();
  std::sort(runs.begin(), runs.end());
  std::vector<std::string> expected;
  for (const std::string& id : ids) expected.push_back(id + "#1:");
  std::sort(expected.begin(), expected.end());
  CHECK(runs == expected);
}

// A store that passes every call to another (a SQLite store) and holds the first batch of
// attempts until `gate` opens; it counts the attempts it is asked to mark, one by one or in
// batches.
class HeldMarksStore final : public testing::ForwardingStore {
 public:
  using testing::Forwarding<Store>::Forwarding;
  testing::Gate gate;
  std::atomic<int> single{0}, batches{0}, in_batches{0};

  StatusOr<std::vector<StatusOr<std::uint32_t>>> BeginAttempts(
      const std::vector<std::uint64_t>& sequences) override {
    if (batches++ == 0) gate.Wait();
    in_batches += static_cast<int>(sequences.size());
    return inner_->BeginAttempts(sequences);
  }
  StatusOr<std::uint32_t> BeginAttempt(std::uint64_t sequence) override {
    ++single;
    return inner_->BeginAttempt(sequence);
  }
};

// An attempt's mark is written off the workers, in batches: while the first mark's commit is
// held, the scheduler's one worker thread runs a plain job, and the marks of the durable jobs
// admitted meanwhile wait together for the next batch; each job then runs once, as attempt 1.
// Fibers only: in the thread runtime of the TSan build a job's wait for its mark holds its thread.
TEST_CASE("Durable.AttemptsAreMarkedInBatchesOffTheWorkers" *
          doctest::skip(internal::kThreadRuntime)) {
  TempDir dir;
  const std::string path = dir.path() + "/state.db";
  SchedulerOptions options = WithState(path);  // one worker thread
  options.rule.max_concurrency = 8;
  auto held = std::make_shared<HeldMarksStore>(std::shared_ptr<Store>(*OpenSqliteStore(path)));
  options.persistence.store = held;
  Seen seen;
  auto s = *Scheduler::Create(options);
  // One tier of 8 slots, the global cap: the five jobs below run at once.
  REQUIRE(s->RegisterType("fetch", Type(8, 4)).ok());
  REQUIRE(s->RegisterType("other", Type(8, 1)).ok());
  REQUIRE(s->RegisterDurable("fetch", [&seen](const DurableJob& job, const Context&) {
             seen.Add(job);
             return absl::OkStatus();
           }).ok());
  REQUIRE(s->Recover().ok());
  REQUIRE(s->SubmitDurable({TypeName("fetch"), JobId("a")}, "").ok());
  REQUIRE(Eventually([&] { return held->batches == 1; }));  // a's mark, held
  for (const char* id : {"b", "c", "d"}) {
    REQUIRE(s->SubmitDurable({TypeName("fetch"), JobId(id)}, "").ok());
  }
  // Posted after b, c and d: on the one worker thread (fibers run in turn) it runs once each of
  // them has queued its mark.
  std::atomic<bool> plain_ran{false};
  REQUIRE(s->Submit({TypeName("other"), JobId("plain")}, [&](const Context&) {
             plain_ran = true;
             return absl::OkStatus();
           }).ok());
  CHECK(Eventually([&] { return plain_ran.load(); }));
  CHECK(seen.Size() == 0);  // no handler runs before its mark
  held->gate.Open();
  REQUIRE(Eventually([&] { return seen.Size() == 4; }));
  REQUIRE(s->Shutdown(Context::Background()).ok());
  std::vector<std::string> runs = seen.Get();
  std::sort(runs.begin(), runs.end());
  CHECK(runs == std::vector<std::string>{"a#1:", "b#1:", "c#1:", "d#1:"});
  CHECK(held->single == 0);
  CHECK(held->in_batches == 4);
  CHECK(held->batches == 2);
}

// Resumes the paused "fetch" of `s`: all `total` jobs run, the two the queue took first ("a" and
// "b") first, and the store at `path` empties.
void ResumeAndRunAll(Scheduler& s, Seen& seen, const std::string& path, std::size_t total) {
  REQUIRE(s.ResumeType("fetch").ok());
  REQUIRE(Eventually([&] { return seen.Size() == total; }));
  std::vector<std::string> runs = seen.Get();
  CHECK(std::vector<std::string>(runs.begin(), runs.begin() + 2) ==
        std::vector<std::string>{"a#1:", "b#1:"});
  REQUIRE(Eventually([&] { return Live(path).empty(); }));
}

TEST_CASE("Durable.RecoveredJobsAFullQueueRefusesWaitAndRunLater") {
  TempDir dir;
  const std::string path = dir.path() + "/state.db";
  StoreJobs(path, "fetch", {"a", "b", "c", "d"});
  SchedulerOptions options = WithState(path);
  options.rule.max_pending_total = 2;
  Seen seen;
  auto s = Recording(options, seen);
  REQUIRE(s->PauseType("fetch").ok());
  RecoveryReport report = *s->Recover();
  CHECK(report.queued == 2);
  CHECK(report.deferred == 2);
  ResumeAndRunAll(*s, seen, path, 4);
}

TEST_CASE("Durable.ABatchIsStoredAtOnceAndRunsInItsOrder") {
  TempDir dir;
  const std::string path = dir.path() + "/state.db";
  Seen seen;
  auto s = Recording(WithState(path), seen);
  REQUIRE(s->Recover().ok());
  REQUIRE(s->PauseType("fetch").ok());  // so that the store is read before anything runs
  const std::vector<std::string> ids{"e", "d", "c", "b", "a"};  // not in name order
  const std::vector<std::string> payloads{"p-e", "p-d", "p-c", "p-b", "p-a"};
  std::vector<DurableSubmission> batch;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    batch.push_back({{TypeName("fetch"), JobId(ids[i]), FairnessKey("alice")}, payloads[i]});
  }
  StatusOr<std::vector<std::uint64_t>> sequences = s->SubmitDurableBatch(batch);
  REQUIRE_MESSAGE(sequences.ok(), sequences.status().ToString());
  REQUIRE(sequences->size() == 5);
  CHECK(std::is_sorted(sequences->begin(), sequences->end()));
  const std::vector<StoredJob> live = Live(path);
  REQUIRE(live.size() == 5);
  for (std::size_t i = 0; i < live.size(); ++i) {
    CHECK(live[i].sequence == (*sequences)[i]);
    CHECK(live[i].id == ids[i]);
    CHECK(live[i].payload == "p-" + ids[i]);
    CHECK(live[i].fairness_key == "alice");
  }
  // An empty batch stores nothing.
  StatusOr<std::vector<std::uint64_t>> none = s->SubmitDurableBatch({});
  REQUIRE(none.ok());
  CHECK(none->empty());
  REQUIRE(s->ResumeType("fetch").ok());
  REQUIRE(Eventually([&] { return seen.Size() == 5; }));
  CHECK(seen.Get() ==
        std::vector<std::string>{"e#1:p-e", "d#1:p-d", "c#1:p-c", "b#1:p-b", "a#1:p-a"});
  REQUIRE(Eventually([&] { return Live(path).empty(); }));
  std::string metrics;
  s->WriteMetrics(metrics);
  CHECK(metrics.find("fairgate_durable_jobs_total{outcome=\"stored\"} 5\n") != std::string::npos);
}

TEST_CASE("Durable.ABatchWithAJobSubmitDurableWouldRefuseIsRefusedWholeNamingThatJob") {
  TempDir dir;
  const std::string path = dir.path() + "/state.db";
  Seen seen;
  auto s = Recording(WithState(path), seen);
  REQUIRE(s->RegisterType("repack", Type(4, 1)).ok());  // no durable handler
  const std::vector<DurableSubmission> good{{{TypeName("fetch"), JobId("a")}, ""},
                                            {{TypeName("fetch"), JobId("b")}, ""}};
  Status early = s->SubmitDurableBatch(good).status();
  CHECK(early.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(early.message().find("Recover") != std::string::npos);
  REQUIRE(s->Recover().ok());
  Status empty_id = s->SubmitDurableBatch({{{TypeName("fetch"), JobId("a")}, ""},
                                           {{TypeName("fetch"), JobId("b")}, ""},
                                           {{TypeName("fetch"), JobId("")}, ""}})
                        .status();
  CHECK(empty_id.code() == absl::StatusCode::kInvalidArgument);
  CHECK(empty_id.message().find("job 2 of the batch") != std::string::npos);
  Status no_handler = s->SubmitDurableBatch({{{TypeName("fetch"), JobId("a")}, ""},
                                             {{TypeName("repack"), JobId("b")}, ""}})
                          .status();
  CHECK(no_handler.code() == absl::StatusCode::kNotFound);
  CHECK(no_handler.message().find("job 1 of the batch") != std::string::npos);
  CHECK(no_handler.message().find("repack") != std::string::npos);
  CHECK(Live(path).empty());  // nothing of a refused batch was stored
  REQUIRE(s->Shutdown(Context::Background()).ok());
  CHECK(s->SubmitDurableBatch(good).status().code() == absl::StatusCode::kUnavailable);
  CHECK(Live(path).empty());
  CHECK(seen.Size() == 0);
}

TEST_CASE("Durable.ABatchTheQueueHasNoRoomForWaitsInTheStoreAndRunsLater") {
  TempDir dir;
  const std::string path = dir.path() + "/state.db";
  SchedulerOptions options = WithState(path);
  options.rule.max_pending_total = 2;
  Seen seen;
  auto s = Recording(options, seen);
  REQUIRE(s->Recover().ok());
  REQUIRE(s->PauseType("fetch").ok());
  StatusOr<std::vector<std::uint64_t>> sequences =
      s->SubmitDurableBatch({{{TypeName("fetch"), JobId("a")}, ""},
                             {{TypeName("fetch"), JobId("b")}, ""},
                             {{TypeName("fetch"), JobId("c")}, ""}});
  REQUIRE_MESSAGE(sequences.ok(), sequences.status().ToString());  // accepted as a whole
  CHECK(s->Snapshot().pending == 2);
  CHECK(Live(path).size() == 3);
  ResumeAndRunAll(*s, seen, path, 3);
}

TEST_CASE("Durable.JobsOfATypeWithoutAHandlerStayStoredForALaterProcess") {
  TempDir dir;
  const std::string path = dir.path() + "/state.db";
  StoreJobs(path, "gc", {"linux.git"});
  auto s = *Scheduler::Create(WithState(path));
  REQUIRE(s->RegisterType("gc", Type(4, 1)).ok());
  RecoveryReport report = *s->Recover();
  CHECK(report.without_handler == 1);
  CHECK(report.queued == 0);
  s.reset();
  CHECK(Live(path).size() == 1);
}

TEST_CASE("Durable.EstimatesAndCostsSurviveARestart") {
  TempDir dir;
  const std::string path = dir.path() + "/state.db";
  TestClock clock;
  {
    SchedulerOptions options = WithState(path);
    options.runtime.clock = clock.Fn();
    auto s = *Scheduler::Create(options);
    REQUIRE(s->RegisterType("clone", Type(8, 1, "", 10)).ok());
    REQUIRE(s->RunSync(Context::Background(),
                       {TypeName("clone"), JobId("linux.git"), FairnessKey("alice")},
                       clock.Takes(100))  // the clone took 100 s
                .ok());
    REQUIRE(s->RunSync(Context::Background(),
                       {TypeName("clone"), JobId("git.git"), FairnessKey("bob")}, clock.Takes(2))
                .ok());
    CHECK(*s->Estimate(TypeName("clone"), JobId("linux.git")) ==
          doctest::Approx(0.3 * 100 + 0.7 * 10));
  }  // shut down: flushed
  SchedulerOptions options = WithState(path);
  auto s = *Scheduler::Create(options);
  // Keys' costs are back at once; a type's estimates when it is registered.
  CHECK(*s->AccumulatedCost("alice") == doctest::Approx(100));  // charged 10, reconciled to 100
  CHECK(*s->AccumulatedCost("bob") == doctest::Approx(2));
  CHECK(!s->Estimate(TypeName("clone"), JobId("linux.git")));
  REQUIRE(s->RegisterType("clone", Type(8, 1, "", 10)).ok());
  CHECK(*s->Estimate(TypeName("clone"), JobId("linux.git")) == doctest::Approx(37));
  CHECK(*s->Estimate(TypeName("clone"), JobId("git.git")) == doctest::Approx(0.3 * 2 + 0.7 * 10));
  // The first clone after the restart is charged what was learned: 37, not the default 10.
  std::optional<double> before = s->AccumulatedCost("carol");
  CHECK(!before);
  REQUIRE(s->Recover().ok());
  REQUIRE(s->RunSync(Context::Background(),
                     {TypeName("clone"), JobId("linux.git"), FairnessKey("carol")},
                     [&](const Context&) {
                       CHECK(*s->AccumulatedCost("carol") == doctest::Approx(37));
                       return absl::OkStatus();
                     })
              .ok());
}

TEST_CASE("Durable.WhatOutlivedItsTtlIsNotRestored") {
  TempDir dir;
  const std::string path = dir.path() + "/state.db";
  const double now = UnixNow();
  LearnedState state;
  state.estimates = {{"clone", "old.git", 50, now - 7200}, {"clone", "new.git", 60, now - 60}};
  state.keys = {{"gone", 9, now - 7200}, {"back", 7, now - 60}};
  SaveState(path, state);
  SchedulerOptions options = WithState(path);
  options.rule.estimate_ttl = Seconds(3600);
  options.rule.key_ttl = Seconds(600);
  auto s = *Scheduler::Create(options);
  REQUIRE(s->RegisterType("clone", Type(8, 1, "", 10)).ok());
  CHECK(!s->Estimate(TypeName("clone"), JobId("old.git")));
  CHECK(*s->Estimate(TypeName("clone"), JobId("new.git")) == 60);
  CHECK(!s->AccumulatedCost("gone"));
  CHECK(*s->AccumulatedCost("back") == 7);
}

// A key restored from the store is tracked at once: the rule of groups (RuntimeOptions::
// key_group) is asked of it then, not only of keys the scheduler has not seen, so its first job
// after a restart counts in its group.
TEST_CASE("Durable.ARestoredKeyIsGivenItsGroupByTheRule") {
  TempDir dir;
  const std::string path = dir.path() + "/state.db";
  const double now = UnixNow();
  LearnedState state;
  state.keys = {{"10.0.0.1", 7, now - 60}, {"gone", 9, now - 7200}};
  SaveState(path, state);
  SchedulerOptions options = WithState(path);
  options.rule.key_ttl = Seconds(600);
  std::vector<std::string> asked;  // the rule is called under the scheduler's lock
  options.runtime.key_group = [&asked](std::string_view key) {
    asked.emplace_back(key);
    return std::string(key.substr(0, key.rfind('.')));
  };
  auto s = *Scheduler::Create(options);
  REQUIRE(s->RegisterType("clone", Type(8, 1, "", 10)).ok());
  CHECK(*s->AccumulatedCost("10.0.0.1") == 7);
  REQUIRE(s->RunSync(Context::Background(),
                     {TypeName("clone"), JobId("linux.git"), FairnessKey("10.0.0.1")},
                     [](const Context&) { return absl::OkStatus(); })
              .ok());
  // Its clone was charged to its group (the default cost, 10, reconciled to what it took).
  CHECK(s->GroupAccumulatedCost("10.0.0").has_value());
  // Asked of the restored key once, at the restore, not again at its job.
  CHECK(std::count(asked.begin(), asked.end(), "10.0.0.1") == 1);
}

TEST_CASE("Durable.APeriodicJobKeepsItsScheduleAcrossARestart") {
  TempDir dir;
  const std::string path = dir.path() + "/state.db";
  std::atomic<double> first_end{0};
  auto wall = UnixNow;
  {
    testing::Gate ran;  // before the scheduler, whose destruction waits for the callback
    auto s = *Scheduler::Create(WithState(path));
    REQUIRE(s->RegisterType("fetch", Type(4, 1)).ok());
    PeriodicOptions at_once{.jitter = 0, .first_run_at_once = true};
    at_once.on_run = [&](const Status&) {  // called once the run's end is recorded
      if (first_end.load() == 0) first_end = wall();
      ran.Open();
    };
    REQUIRE(s->SubmitEvery(
                 {TypeName("fetch"), JobId("linux.git")}, Seconds(2),
                 [&](const Context&) { return absl::OkStatus(); }, at_once)
                .ok());
    REQUIRE(ran.Wait());
  }  // the run's end is flushed at shutdown
  std::atomic<double> second_start{0};
  testing::Gate ran;
  auto s = *Scheduler::Create(WithState(path));
  REQUIRE(s->RegisterType("fetch", Type(4, 1)).ok());
  // Without the stored end, the first run would come after a random part of the interval.
  REQUIRE(s->SubmitEvery(
               {TypeName("fetch"), JobId("linux.git")}, Seconds(2),
               [&](const Context&) {
                 second_start = wall();
                 ran.Open();
                 return absl::OkStatus();
               },
               PeriodicOptions{.jitter = 0})
              .ok());
  REQUIRE(ran.Wait());
  CHECK(second_start.load() >= first_end.load() + 1.9);
}

// Fills the store until SubmitDurable is refused; returns the refusal and how many were stored.
std::pair<Status, int> FillUntilRefused(Scheduler& s) {
  const std::string payload(16 * 1024, 'p');
  for (int i = 0; i < 1000; ++i) {
    StatusOr<std::uint64_t> r =
        s.SubmitDurable({TypeName("fetch"), JobId("job" + std::to_string(i))}, payload);
    if (!r.ok()) return {r.status(), i};
  }
  return {absl::OkStatus(), 1000};
}

// After the store refused a durable job: foreground and background work still run, and the jobs
// stored before the refusal run too. True when all did.
bool KeepsWorking(Scheduler& s, const std::atomic<int>& ran, int stored) {
  bool ok = s.ResumeType("fetch").ok();
  ok &= s.RunSync(Context::Background(), {TypeName("fetch"), JobId("sync")}, [](const Context&) {
           return absl::OkStatus();
         }).ok();
  // Shared with the job: Open may still be notifying when Wait returns.
  auto background = std::make_shared<testing::Gate>();
  ok &= s.Submit(
             {TypeName("fetch"), JobId("plain")},
             [background](const Context&) {
               background->Open();
               return absl::OkStatus();
             },
             nullptr)
            .ok();
  ok &= background->Wait();
  ok &= Eventually([&] { return ran.load() == stored; });
  std::string metrics;
  s.WriteMetrics(metrics);
  return ok && metrics.find("fairgate_store_errors_total{operation=\"add_job\"} 1\n") !=
                   std::string::npos;
}

// A scheduler with a store in `path`, whose durable fetches are paused and counted in `ran`.
std::unique_ptr<Scheduler> PausedDurable(const std::string& path, std::atomic<int>& ran) {
  auto s = *Scheduler::Create(WithState(path));
  if (!s->RegisterType("fetch", Type(4, 1)).ok()) return nullptr;
  Status registered = s->RegisterDurable("fetch", [&ran](const DurableJob&, const Context&) {
    ++ran;
    return absl::OkStatus();
  });
  if (!registered.ok() || !s->Recover().ok() || !s->PauseType("fetch").ok()) return nullptr;
  return s;
}

// While it lives, files this process writes may not grow past `bytes` (RLIMIT_FSIZE; SIGXFSZ
// would end the process, ignored the write fails instead): SQLite sees a failed write.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    REQUIRE(getrlimit(RLIMIT_FSIZE, &before_) == 0);
    old_handler_ = std::signal(SIGXFSZ, SIG_IGN);
    struct rlimit small = before_;
    small.rlim_cur = bytes;
    REQUIRE(setrlimit(RLIMIT_FSIZE, &small) == 0);
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &before_);
    std::signal(SIGXFSZ, old_handler_);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  struct rlimit before_ {};
  void (*old_handler_)(int) = nullptr;
};

TEST_CASE("Durable.AFileThatMayNotGrowRefusesDurableWorkClearlyAndTheSchedulerKeepsWorking") {
  TempDir dir;
  const std::string path = dir.path() + "/state.db";
  std::atomic<int> ran{0};
  std::unique_ptr<Scheduler> s = PausedDurable(path, ran);
  REQUIRE(s);
  std::optional<FileSizeLimit> limit(std::in_place, 256 * 1024);
  auto [refused, stored] = FillUntilRefused(*s);
  const Status flush = s->FlushState();
  limit.reset();
  INFO(refused.ToString());
  CHECK(refused.code() == absl::StatusCode::kUnavailable);  // SQLite's "disk I/O error"
  CHECK(refused.message().find(path) != std::string::npos);
  CHECK(stored > 0);
  CHECK(KeepsWorking(*s, ran, stored));
  (void)flush;  // it may have fit in the room left, or not: either is fine here
}

TEST_CASE("Durable.ABatchTheFileCannotTakeStoresNoneOfItsJobs") {
  TempDir dir;
  const std::string path = dir.path() + "/state.db";
  std::atomic<int> ran{0};
  std::unique_ptr<Scheduler> s = PausedDurable(path, ran);
  REQUIRE(s);
  REQUIRE(s->SubmitDurable({TypeName("fetch"), JobId("before")}, "").ok());
  // The batch holds 640 KiB of payloads: a write in the middle of it fails.
  std::optional<FileSizeLimit> limit(std::in_place, 256 * 1024);
  const std::string payload(16 * 1024, 'p');
  std::vector<DurableSubmission> batch;
  std::vector<std::string> ids;
  for (int i = 0; i < 40; ++i) ids.push_back("batch" + std::to_string(i));
  for (const std::string& id : ids) batch.push_back({{TypeName("fetch"), JobId(id)}, payload});
  const Status refused = s->SubmitDurableBatch(batch).status();
  limit.reset();
  INFO(refused.ToString());
  CHECK(refused.code() == absl::StatusCode::kUnavailable);  // SQLite's "disk I/O error"
  CHECK(refused.message().find(path) != std::string::npos);
  const std::vector<StoredJob> live = Live(path);
  REQUIRE(live.size() == 1);
  CHECK(live[0].id == "before");
  CHECK(KeepsWorking(*s, ran, 1));
}

TEST_CASE("Durable.AFullDiskRefusesDurableWorkWithResourceExhaustedAndTheSchedulerKeepsWorking") {
  if (geteuid() != 0) {
    MESSAGE("skipped: mounting a small file system needs root");
    return;
  }
  TempDir dir;
  REQUIRE(chmod(dir.path().c_str(), 0755) == 0);
  // In a child with a mount namespace of its own: a 512 KiB tmpfs over the directory, gone with
  // the child whatever happens.
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    if (unshare(CLONE_NEWNS) != 0) _exit(3);
    if (mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) _exit(3);
    if (mount("tmpfs", dir.path().c_str(), "tmpfs", 0, "size=512k") != 0) _exit(3);
    std::atomic<int> ran{0};
    std::unique_ptr<Scheduler> s = PausedDurable(dir.path() + "/state.db", ran);
    if (!s) _exit(4);
    auto [refused, stored] = FillUntilRefused(*s);
    if (refused.code() != absl::StatusCode::kResourceExhausted) _exit(5);
    if (refused.message().find("full") == std::string::npos || stored == 0) _exit(6);
    _exit(KeepsWorking(*s, ran, stored) ? 0 : 7);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 3) {
    MESSAGE("skipped: no mount namespace here");
    return;
  }
  CHECK(WEXITSTATUS(status) == 0);
}

// Sets or clears the immutable attribute of `paths` (chattr): writes through descriptors already
// open then fail too, as on a file system remounted read-only under a running server.
bool Immutable(const std::vector<std::string>& paths, bool on) {
  std::string command = std::string("chattr ") + (on ? "+i" : "-i");
  for (const std::string& p : paths) command += " '" + p + "'";
  return std::system((command + " 2>/dev/null").c_str()) == 0;
}

TEST_CASE("Durable.AStateFileThatTurnsReadOnlyWhileRunningGivesClearStatusesAndWorkGoesOn") {
  if (geteuid() != 0) {
    MESSAGE("skipped: making a file immutable needs root");
    return;
  }
  TempDir dir;
  const std::string path = dir.path() + "/state.db";
  std::atomic<int> ran{0};
  std::unique_ptr<Scheduler> s = PausedDurable(path, ran);
  REQUIRE(s);
  REQUIRE(s->SubmitDurable({TypeName("fetch"), JobId("before")}, "").ok());
  const std::vector<std::string> files = {path, path + "-wal"};
  if (!Immutable(files, true)) {
    MESSAGE("skipped: this file system has no immutable attribute");
    return;
  }
  struct Undo {
    const std::vector<std::string>& files;
    ~Undo() { Immutable(files, false); }  // else the directory cannot be removed
  } undo{files};
  Status refused = s->SubmitDurable({TypeName("fetch"), JobId("after")}, "").status();
  INFO(refused.ToString());
  CHECK(refused.code() == absl::StatusCode::kUnavailable);
  CHECK(refused.message().find(path) != std::string::npos);
  CHECK(!s->FlushState().ok());
  // Work goes on in memory: the job stored before runs (its attempt cannot be marked, nor its
  // end recorded: counted, and it runs again after a restart), and so do new jobs.
  CHECK(KeepsWorking(*s, ran, 1));
  std::string metrics;
  s->WriteMetrics(metrics);
  CHECK(metrics.find("fairgate_store_errors_total{operation=\"begin_attempt\"} 1\n") !=
        std::string::npos);
  CHECK(metrics.find("fairgate_store_errors_total{operation=\"flush\"} 0\n") == std::string::npos);
  // The removal is written off the worker (RemovalWriter): its failure is counted a moment later.
  CHECK(Eventually([&] {
    metrics.clear();
    s->WriteMetrics(metrics);
    return metrics.find("fairgate_store_errors_total{operation=\"remove_job\"} 1\n") !=
           std::string::npos;
  }));
}

TEST_CASE("Durable.AReadOnlyStateFileIsRefusedAtOpenWithAStatusNamingIt") {
  TempDir dir;
  const std::string path = dir.path() + "/state.db";
  REQUIRE(OpenSqliteStore(path).ok());  // made by an earlier run, then closed
  REQUIRE(chmod(path.c_str(), 0444) == 0);
  REQUIRE(chmod(dir.path().c_str(), 0755) == 0);
  auto check = [&]() -> bool {
    StatusOr<std::unique_ptr<Store>> s = OpenSqliteStore(path);
    return s.status().code() == absl::StatusCode::kFailedPrecondition &&
           s.status().message().find(path) != std::string::npos &&
           s.status().message().find("readonly") != std::string::npos;
  };
  if (geteuid() != 0) {
    CHECK(check());
    return;
  }
  // Root writes any file whatever its mode: check as an unprivileged user, in a child process.
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(2);
    _exit(check() ? 0 : 1);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

}  // namespace durable_test
}  // namespace
}  // namespace fairgate

TEST_SUITE_END();

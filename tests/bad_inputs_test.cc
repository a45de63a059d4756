// Every bad input of the public API, tried for real, with the status it gets; and
// docs/bad-inputs.md, which must be exactly the table these rows render (run the test with
// FAIRGATE_UPDATE_DOCS=1 to rewrite it after adding a row).
#include <sqlite3.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "doctest/doctest.h"
#include "fairgate/postgres_store.h"
#include "fairgate/scheduler.h"
#include "fairgate/sqlite_store.h"
#include "sim/trace.h"
#include "temp_dir.h"
#include "test_job_types.h"

// The runtime's tests: CTest labels them "runtime", and runs them again on other pools and
// under ThreadSanitizer (tests/CMakeLists.txt).
TEST_SUITE_BEGIN("runtime");

namespace fairgate {
namespace {
namespace bad_inputs_test {

using testing::Type;

struct Row {
  std::string api;
  std::string input;
  absl::StatusCode code;
  std::string message;  // a part of the message the caller sees
  std::function<Status()> attempt;
};

const double kNaN = std::nan("");
const double kInf = std::numeric_limits<double>::infinity();

Status CreateWith(const std::function<void(SchedulerOptions&)>& change) {
  SchedulerOptions options;
  change(options);
  return Scheduler::Create(options).status();
}

std::unique_ptr<Scheduler> Ready(SchedulerOptions options = {}) {
  auto s = *Scheduler::Create(options);
  (void)s->RegisterType("clone", Type(8, 8));
  return s;
}

Status Noop(const Context&) { return absl::OkStatus(); }

// A state file for the rows that need a store, in a directory removed at exit.
std::string StatePath(const std::string& name) {
  static testing::TempDir dir;
  return dir.path() + "/" + name;
}

std::vector<Row> Rows() {
  std::vector<Row> rows;
  auto create = [&](std::string input, std::string message,
                    std::function<void(SchedulerOptions&)> change) {
    rows.push_back({"Scheduler::Create", std::move(input), absl::StatusCode::kInvalidArgument,
                    std::move(message), [change] { return CreateWith(change); }});
  };
  create("rule.max_concurrency = 0", "rule.max_concurrency must be >= 1",
         [](auto& o) { o.rule.max_concurrency = 0; });
  create("rule.alpha = 0", "rule.alpha must be in (0, 1]", [](auto& o) { o.rule.alpha = 0; });
  create("rule.alpha = 1.5", "rule.alpha must be in (0, 1]", [](auto& o) { o.rule.alpha = 1.5; });
  create("rule.alpha = NaN", "rule.alpha must be in (0, 1]", [](auto& o) { o.rule.alpha = kNaN; });
  create("rule.key_ttl = 0 s", "rule.key_ttl must be finite and > 0",
         [](auto& o) { o.rule.key_ttl = Seconds(0); });
  create("rule.estimate_ttl = inf", "rule.estimate_ttl must be finite and > 0",
         [](auto& o) { o.rule.estimate_ttl = Seconds(kInf); });
  create("rule.sweep_batch = 0", "rule.sweep_batch must be >= 1",
         [](auto& o) { o.rule.sweep_batch = 0; });
  create("rule.max_pending_total = 0", "rule.max_pending_total must be >= 1",
         [](auto& o) { o.rule.max_pending_total = 0; });
  create("rule.max_pending_per_key = 0", "rule.max_pending_per_key must be >= 1",
         [](auto& o) { o.rule.max_pending_per_key = 0; });
  create("runtime.worker_threads = -1", "runtime.worker_threads must be >= 0",
         [](auto& o) { o.runtime.worker_threads = -1; });
  create("runtime.fiber_stack_bytes = 1024", "runtime.fiber_stack_bytes must be >= 16384",
         [](auto& o) { o.runtime.fiber_stack_bytes = 1024; });
  create("runtime.sweep_interval = 0 s", "runtime.sweep_interval must be finite and > 0",
         [](auto& o) { o.runtime.sweep_interval = Seconds(0); });
  create("rule.aging.grace = -1 s", "rule.aging.grace must be finite and >= 0", [](auto& o) {
    o.rule.aging = AgingConfig{Seconds(-1), Seconds(1), 8};
  });
  create("rule.aging.interval = 0 s", "rule.aging.interval must be finite and > 0", [](auto& o) {
    o.rule.aging = AgingConfig{Seconds(0), Seconds(0), 8};
  });
  create("rule.aging.ceiling = 0", "rule.aging.ceiling must be a priority >= 1", [](auto& o) {
    o.rule.aging = AgingConfig{Seconds(0), Seconds(1), 0};
  });
  create("rule.shortest_first_aging = -1",
         "rule.shortest_first_aging must be finite and >= 0, got -1",
         [](auto& o) { o.rule.shortest_first_aging = -1; });
  create("rule.lending.kept_back = 1", "rule.lending.kept_back must be in [0, 1), got 1",
         [](auto& o) { o.rule.lending = TierLending{1}; });
  create("rule.rate_limit.per_second = -1", "rule.rate_limit.per_second must be finite and >= 0",
         [](auto& o) { o.rule.rate_limit = RateLimit{.per_second = -1}; });
  create("rule.rate_limit.burst = 0.5", "rule.rate_limit.burst must be finite and >= 1, got 0.5",
         [](auto& o) { o.rule.rate_limit = RateLimit{.per_second = 1, .burst = 0.5}; });
  create("rule.adaptive_capacity.min = 0",
         "rule.adaptive_capacity.min must be in [1, max_concurrency",
         [](auto& o) { o.rule.adaptive_capacity = AdaptiveCapacity{.min = 0}; });
  create("rule.adaptive_capacity.low = high", "rule.adaptive_capacity.low must be in [0, high",
         [](auto& o) { o.rule.adaptive_capacity = AdaptiveCapacity{.high = 0.2, .low = 0.2}; });
  create("rule.adaptive_capacity.decrease = 1", "rule.adaptive_capacity.decrease must be in (0, 1)",
         [](auto& o) { o.rule.adaptive_capacity = AdaptiveCapacity{.decrease = 1}; });
  create(
      "rule.adaptive_capacity.signals: two of one source",
      "rule.adaptive_capacity.signals[1] (io some): a second signal of that source", [](auto& o) {
        o.rule.adaptive_capacity = AdaptiveCapacity{
            .signals = {{.source = PressureSource::kIoSome}, {.source = PressureSource::kIoSome}}};
      });
  create("rule.latency_capacity.remeasure_every = 1",
         "rule.latency_capacity.remeasure_every must be >= 2 intervals",
         [](auto& o) { o.rule.latency_capacity = LatencyCapacity{.remeasure_every = 1}; });
  create("rule.latency_capacity with rule.adaptive_capacity",
         "rule.latency_capacity and rule.adaptive_capacity: at most one rule may move the cap",
         [](auto& o) {
           o.rule.latency_capacity = LatencyCapacity{};
           o.rule.adaptive_capacity = AdaptiveCapacity{};
         });
  create("rule.default_key_limits.max_running = 0",
         "rule.default_key_limits: max_running must be >= 1",
         [](auto& o) { o.rule.default_key_limits.max_running = 0; });
  create("runtime.observer_queue_limit = 0", "runtime.observer_queue_limit must be >= 1",
         [](auto& o) { o.runtime.observer_queue_limit = 0; });
  create("a null observer", "an observer is null",
         [](auto& o) { o.runtime.observers = {nullptr}; });
  create("persistence.state_flush_interval = 0 s",
         "persistence.state_flush_interval must be finite and > 0",
         [](auto& o) { o.persistence.state_flush_interval = Seconds(0); });
  create("fleet.lease_ttl = 0 s", "fleet.lease_ttl must be finite and > 0",
         [](auto& o) { o.fleet.lease_ttl = Seconds(0); });
  create("fleet.claim_interval = infinity", "fleet.claim_interval must be finite and > 0",
         [](auto& o) { o.fleet.claim_interval = Seconds(kInf); });
  create("fleet.token_lease = 0 s", "fleet.token_lease must be finite and > 0",
         [](auto& o) { o.fleet.token_lease = Seconds(0); });
  create("fleet.max_claimed = -1", "fleet.max_claimed must be >= 0",
         [](auto& o) { o.fleet.max_claimed = -1; });
  create("fleet.conflict_groups without a shared store",
         "fleet.conflict_groups needs a shared store",
         [](auto& o) { o.fleet.conflict_groups = {"repo"}; });
  create("fleet.type_caps without a shared store", "fleet.type_caps needs a shared store",
         [](auto& o) {
           o.fleet.type_caps = {{"repack", 1}};
         });

  auto register_type = [&](std::string input, absl::StatusCode code, std::string message,
                           std::string name, JobTypeConfig config) {
    rows.push_back({"Scheduler::RegisterType", std::move(input), code, std::move(message),
                    [name, config] { return Ready()->RegisterType(name, config); }});
  };
  register_type("empty name", absl::StatusCode::kInvalidArgument, "job type name is empty", "",
                Type(1, 1));
  register_type("priority = 0", absl::StatusCode::kInvalidArgument, "priority must be >= 1",
                "fetch", Type(0, 1));
  register_type("max_concurrency = 0", absl::StatusCode::kInvalidArgument,
                "max_concurrency must be >= 1", "fetch", Type(1, 0));
  register_type("default_cost = -1", absl::StatusCode::kInvalidArgument,
                "default_cost must be finite and >= 0", "fetch", Type(1, 1, "", -1));
  register_type("default_cost = NaN", absl::StatusCode::kInvalidArgument,
                "default_cost must be finite and >= 0", "fetch", Type(1, 1, "", kNaN));
  register_type("a registered name with another config", absl::StatusCode::kAlreadyExists,
                "already registered with a different config", "clone", Type(8, 4));
  register_type("slots = 0", absl::StatusCode::kInvalidArgument,
                "slots must be >= 1 and at most its priority (4), got 0", "repack",
                JobTypeConfig{.priority = 4, .slots = 0});
  register_type("slots above the priority", absl::StatusCode::kInvalidArgument,
                "slots must be >= 1 and at most its priority (4), got 5", "repack",
                JobTypeConfig{.priority = 4, .slots = 5});
  register_type("slots above the scheduler's max_concurrency (8)",
                absl::StatusCode::kInvalidArgument,
                "slots (9) exceed the scheduler's max_concurrency (8)", "repack",
                JobTypeConfig{.priority = 16, .slots = 9});
  register_type("conflict_limit = 0", absl::StatusCode::kInvalidArgument,
                "conflict_limit must be >= 1, got 0", "fetch",
                JobTypeConfig{.conflict_group = "git", .conflict_limit = 0});
  register_type("conflict_limit = 2 without a conflict group", absl::StatusCode::kInvalidArgument,
                "conflict_limit 2 needs a conflict_group", "fetch",
                JobTypeConfig{.conflict_limit = 2});
  register_type("max_queue_wait = -1", absl::StatusCode::kInvalidArgument,
                "max_queue_wait must be finite and >= 0, got -1", "fetch",
                JobTypeConfig{.max_queue_wait = Seconds(-1)});
  register_type("max_queue_wait = NaN", absl::StatusCode::kInvalidArgument,
                "max_queue_wait must be finite and >= 0", "fetch",
                JobTypeConfig{.max_queue_wait = Seconds(kNaN)});
  register_type("rate_limit.per_second = NaN", absl::StatusCode::kInvalidArgument,
                "rate_limit.per_second must be finite and >= 0", "fetch",
                JobTypeConfig{.rate_limit = {.per_second = kNaN}});
  register_type("rate_limit.burst = 0", absl::StatusCode::kInvalidArgument,
                "rate_limit.burst must be finite and >= 1, got 0", "fetch",
                JobTypeConfig{.rate_limit = {.per_second = 5, .burst = 0}});
  register_type("shedding.target = -1", absl::StatusCode::kInvalidArgument,
                "shedding.target must be finite and >= 0, got -1", "fetch",
                JobTypeConfig{.shedding = {.target = Seconds(-1)}});
  register_type("shedding.interval = 0", absl::StatusCode::kInvalidArgument,
                "shedding.interval must be finite and > 0, got 0", "fetch",
                JobTypeConfig{.shedding = {.target = Seconds(2), .interval = Seconds(0)}});
  register_type("coalesce = Coalesce(7)", absl::StatusCode::kInvalidArgument,
                "coalesce 7 is not one of kOff, kJoin, kSupersede", "fetch",
                JobTypeConfig{.coalesce = static_cast<Coalesce>(7)});

  auto run = [&](std::string api, std::string input, absl::StatusCode code, std::string message,
                 std::function<Status()> attempt) {
    rows.push_back(
        {std::move(api), std::move(input), code, std::move(message), std::move(attempt)});
  };
  run("Scheduler::RegisterType", "a conflict_limit other than its group's",
      absl::StatusCode::kInvalidArgument,
      "conflict_limit 1 differs from 2, the limit of conflict group 'git'", [] {
        auto s = Ready();
        (void)s->RegisterType("clone-git",
                              JobTypeConfig{.conflict_group = "git", .conflict_limit = 2});
        return s->RegisterType("repack", JobTypeConfig{.conflict_group = "git"});
      });
  run("Scheduler::RunSync", "an unknown type", absl::StatusCode::kNotFound, "unknown job type 'x'",
      [] {
        return Ready()->RunSync(Context::Background(),
                                {TypeName("x"), JobId("id"), FairnessKey("k")}, Noop);
      });
  run("Scheduler::RunSync", "an empty id", absl::StatusCode::kInvalidArgument, "job id is empty",
      [] {
        return Ready()->RunSync(Context::Background(),
                                {TypeName("clone"), JobId(""), FairnessKey("k")}, Noop);
      });
  run("Scheduler::PauseType", "an unknown type", absl::StatusCode::kNotFound,
      "unknown job type 'x'", [] { return Ready()->PauseType("x"); });
  run("Scheduler::RunSync", "a cost hint of -1", absl::StatusCode::kInvalidArgument,
      "explicit cost must be finite and >= 0, got -1", [] {
        return Ready()->RunSync(Context::Background(),
                                {TypeName("clone"), JobId("id"), FairnessKey("k")}, Noop,
                                {.cost = -1});
      });
  run("Scheduler::RunSync", "an empty function", absl::StatusCode::kInvalidArgument,
      "job function is empty", [] {
        return Ready()->RunSync(Context::Background(),
                                {TypeName("clone"), JobId("id"), FairnessKey("k")}, nullptr);
      });
  run("Scheduler::RunSync", "a context already cancelled", absl::StatusCode::kCancelled,
      "cancelled", [] {
        auto [ctx, cancel] = WithCancel(Context::Background());
        cancel();
        return Ready()->RunSync(ctx, {TypeName("clone"), JobId("id"), FairnessKey("k")}, Noop);
      });
  run("Scheduler::RunSync", "after Shutdown", absl::StatusCode::kUnavailable, "shut down", [] {
    auto s = Ready();
    (void)s->Shutdown(Context::Background());
    return s->RunSync(Context::Background(), {TypeName("clone"), JobId("id"), FairnessKey("k")},
                      Noop);
  });
  run("Scheduler::RunAsync", "an empty function", absl::StatusCode::kInvalidArgument,
      "job function is empty", [] {
        return Ready()->RunAsync(Context::Background(),
                                 {TypeName("clone"), JobId("id"), FairnessKey("k")}, nullptr);
      });
  auto ignore = [](StatusOr<Permit>) {};
  run("Scheduler::Acquire", "an unknown type", absl::StatusCode::kNotFound, "unknown job type 'x'",
      [&] {
        return Ready()->Acquire(Context::Background(),
                                {TypeName("x"), JobId("id"), FairnessKey("k")}, ignore);
      });
  run("Scheduler::Acquire", "an empty id", absl::StatusCode::kInvalidArgument, "job id is empty",
      [&] {
        return Ready()->Acquire(Context::Background(),
                                {TypeName("clone"), JobId(""), FairnessKey("k")}, ignore);
      });
  run("Scheduler::Acquire", "an empty callback", absl::StatusCode::kInvalidArgument,
      "permit callback is empty", [] {
        return Ready()->Acquire(Context::Background(),
                                {TypeName("clone"), JobId("id"), FairnessKey("k")}, nullptr);
      });
  run("Scheduler::Acquire", "a context already cancelled", absl::StatusCode::kCancelled,
      "cancelled", [&] {
        auto [ctx, cancel] = WithCancel(Context::Background());
        cancel();
        return Ready()->Acquire(ctx, {TypeName("clone"), JobId("id"), FairnessKey("k")}, ignore);
      });
  run("Scheduler::Acquire", "after Shutdown", absl::StatusCode::kUnavailable, "shut down", [&] {
    auto s = Ready();
    (void)s->Shutdown(Context::Background());
    return s->Acquire(Context::Background(), {TypeName("clone"), JobId("id"), FairnessKey("k")},
                      ignore);
  });
  run("Scheduler::TryAcquire", "an unknown type", absl::StatusCode::kNotFound,
      "unknown job type 'x'", [] {
        return Ready()->TryAcquire({TypeName("x"), JobId("id"), FairnessKey("k")}).status();
      });
  run("Scheduler::TryAcquire", "an empty id", absl::StatusCode::kInvalidArgument, "job id is empty",
      [] {
        return Ready()->TryAcquire({TypeName("clone"), JobId(""), FairnessKey("k")}).status();
      });
  run("Scheduler::TryAcquire", "a cost hint of -1", absl::StatusCode::kInvalidArgument,
      "explicit cost must be finite and >= 0, got -1", [] {
        return Ready()
            ->TryAcquire({TypeName("clone"), JobId("id"), FairnessKey("k")}, {.cost = -1})
            .status();
      });
  run("Scheduler::Submit", "max_pending_per_key jobs already pending",
      absl::StatusCode::kResourceExhausted, "max_pending_per_key", [] {
        SchedulerOptions o;
        o.rule.max_concurrency = 1;
        o.rule.max_pending_per_key = 1;
        auto s = Ready(o);
        auto [ctx, cancel] = WithCancel(Context::Background());
        // One job holds the only slot until cancelled; one waits; the third is refused.
        (void)s->Submit({TypeName("clone"), JobId("a"), FairnessKey("k")},
                        [ctx = ctx](const Context&) {
                          ctx.Wait();
                          return absl::OkStatus();
                        },
                        {});
        while (s->Snapshot().running == 0) std::this_thread::yield();
        (void)s->Submit({TypeName("clone"), JobId("b"), FairnessKey("k")}, Noop, {});
        Status refused = s->Submit({TypeName("clone"), JobId("c"), FairnessKey("k")}, Noop, {});
        cancel();
        return refused;
      });
  run("Scheduler::Submit", "an empty function", absl::StatusCode::kInvalidArgument,
      "job function is empty", [] {
        return Ready()->Submit({TypeName("clone"), JobId("id")}, nullptr);
      });
  run("Scheduler::SetKeyWeight", "weight = 0", absl::StatusCode::kInvalidArgument,
      "key weight must be finite and > 0", [] { return Ready()->SetKeyWeight("k", 0); });
  run("Scheduler::SetKeyWeight", "weight = NaN", absl::StatusCode::kInvalidArgument,
      "key weight must be finite and > 0", [] { return Ready()->SetKeyWeight("k", kNaN); });
  run("Scheduler::SetKeyWeight", "weight = inf", absl::StatusCode::kInvalidArgument,
      "key weight must be finite and > 0", [] { return Ready()->SetKeyWeight("k", kInf); });
  run("Scheduler::Charge", "cost = -1", absl::StatusCode::kInvalidArgument,
      "a charge must be finite and >= 0, got -1", [] { return Ready()->Charge("k", -1); });
  run("Scheduler::Charge", "cost = NaN", absl::StatusCode::kInvalidArgument,
      "a charge must be finite and >= 0", [] { return Ready()->Charge("k", kNaN); });
  run("Scheduler::Charge", "cost = inf", absl::StatusCode::kInvalidArgument,
      "a charge must be finite and >= 0", [] { return Ready()->Charge("k", kInf); });
  run("Scheduler::SetKeyLimits", "max_running = 0", absl::StatusCode::kInvalidArgument,
      "max_running must be >= 1", [] { return Ready()->SetKeyLimits("k", {.max_running = 0}); });
  run("Scheduler::SetKeyLimits", "rate_limit.per_second = inf", absl::StatusCode::kInvalidArgument,
      "rate_limit.per_second must be finite and >= 0",
      [] { return Ready()->SetKeyLimits("k", {.rate_limit = {.per_second = kInf}}); });
  run("Scheduler::SetKeyLimits", "min_running = -1", absl::StatusCode::kInvalidArgument,
      "min_running must be in [0, max_running",
      [] { return Ready()->SetKeyLimits("k", {.min_running = -1}); });
  run("Scheduler::SetKeyLimits", "min_running > max_running", absl::StatusCode::kInvalidArgument,
      "min_running must be in [0, max_running 1], got 2",
      [] { return Ready()->SetKeyLimits("k", {.max_running = 1, .min_running = 2}); });
  run("OpenSqliteStore", "a file in a directory that does not exist",
      absl::StatusCode::kFailedPrecondition,
      "SQLite store /nonexistent/state.db: its directory /nonexistent does not exist",
      [] { return OpenSqliteStore("/nonexistent/state.db").status(); });
  run("OpenSqliteStore", "a directory", absl::StatusCode::kFailedPrecondition,
      "is a directory, not a file", [] { return OpenSqliteStore(StatePath("")).status(); });
  run("OpenSqliteStore", "another program's SQLite database", absl::StatusCode::kFailedPrecondition,
      "is another program's database, not fairgate's", [] {
        const std::string path = StatePath("foreign.db");
        sqlite3* db = nullptr;
        sqlite3_open(path.c_str(), &db);
        sqlite3_exec(db, "CREATE TABLE IF NOT EXISTS notes (text TEXT)", nullptr, nullptr, nullptr);
        sqlite3_close(db);
        return OpenSqliteStore(path).status();
      });
  run("OpenSqliteStore", "busy_timeout = -1 s", absl::StatusCode::kInvalidArgument,
      "busy_timeout must be finite and >= 0 seconds",
      [] { return OpenSqliteStore(StatePath("busy.db"), {.busy_timeout = Seconds(-1)}).status(); });
  run("OpenSqliteStore", "max_job_bytes = 0", absl::StatusCode::kInvalidArgument,
      "max_job_bytes must be in [1, 999000000]",
      [] { return OpenSqliteStore(StatePath("bound.db"), {.max_job_bytes = 0}).status(); });
  run("OpenPostgresStore", "max_job_bytes = 0", absl::StatusCode::kInvalidArgument,
      "PostgreSQL store: max_job_bytes must be in [1, 500000000], got 0",
      [] { return OpenPostgresStore("dbname=fairgate", {.max_job_bytes = 0}).status(); });
  run("OpenPostgresStore", "a malformed connection string", absl::StatusCode::kInvalidArgument,
      "PostgreSQL connection string is malformed: missing \"=\" after \"nonsense\"",
      [] { return OpenPostgresStore("nonsense").status(); });
  run("Scheduler::SubmitDurable", "no store", absl::StatusCode::kFailedPrecondition,
      "SubmitDurable needs a store", [] {
        return Ready()
            ->SubmitDurable({TypeName("clone"), JobId("id"), FairnessKey("k")}, "")
            .status();
      });
  run("Scheduler::RegisterDurable", "no store", absl::StatusCode::kFailedPrecondition,
      "RegisterDurable needs a store", [] {
        return Ready()->RegisterDurable(
            "clone", [](const DurableJob&, const Context&) { return absl::OkStatus(); });
      });
  auto durable = [] {
    static int files = 0;
    SchedulerOptions o;
    o.persistence.store = *OpenSqliteStore(StatePath("durable" + std::to_string(files++) + ".db"));
    return Ready(o);
  };
  run("Scheduler::SubmitDurable", "before Recover", absl::StatusCode::kFailedPrecondition,
      "SubmitDurable before Recover", [&] {
        auto s = durable();
        (void)s->RegisterDurable(
            "clone", [](const DurableJob&, const Context&) { return absl::OkStatus(); });
        return s->SubmitDurable({TypeName("clone"), JobId("id"), FairnessKey("k")}, "").status();
      });
  run("Scheduler::SubmitDurable", "a type without a handler", absl::StatusCode::kNotFound,
      "job type 'clone' has no durable handler", [&] {
        auto s = durable();
        (void)s->Recover();
        return s->SubmitDurable({TypeName("clone"), JobId("id"), FairnessKey("k")}, "").status();
      });
  run("Scheduler::SubmitDurable", "a job above the store's max_job_bytes (100)",
      absl::StatusCode::kInvalidArgument,
      "the job is 108 bytes (its payload 100, with its type, id and fairness key), more than "
      "max_job_bytes (100)",
      [&] {
        SchedulerOptions o;
        o.persistence.store = *OpenSqliteStore(StatePath("bounded.db"), {.max_job_bytes = 100});
        auto s = Ready(o);
        (void)s->RegisterDurable(
            "clone", [](const DurableJob&, const Context&) { return absl::OkStatus(); });
        (void)s->Recover();
        return s
            ->SubmitDurable({TypeName("clone"), JobId("id"), FairnessKey("k")},
                            std::string(100, 'p'))
            .status();
      });
  run("Scheduler::SubmitDurableBatch", "no store", absl::StatusCode::kFailedPrecondition,
      "SubmitDurableBatch needs a store", [] {
        return Ready()
            ->SubmitDurableBatch({{{TypeName("clone"), JobId("id"), FairnessKey("k")}, ""}})
            .status();
      });
  run("Scheduler::SubmitDurableBatch", "an empty id in the second job",
      absl::StatusCode::kInvalidArgument, "job 1 of the batch: job id is empty", [&] {
        auto s = durable();
        (void)s->RegisterDurable(
            "clone", [](const DurableJob&, const Context&) { return absl::OkStatus(); });
        (void)s->Recover();
        return s
            ->SubmitDurableBatch({{{TypeName("clone"), JobId("a"), FairnessKey("k")}, ""},
                                  {{TypeName("clone"), JobId(""), FairnessKey("k")}, ""}})
            .status();
      });
  run("Scheduler::DeadJobs", "a page of 0", absl::StatusCode::kInvalidArgument,
      "a page's limit must be at least 1, got 0",
      [&] { return durable()->DeadJobs(0, 0).status(); });
  run("Scheduler::RetryDeadJob", "no store", absl::StatusCode::kFailedPrecondition,
      "RetryDeadJob needs a store", [] { return Ready()->RetryDeadJob(1); });
  run("Scheduler::RetryDeadJob", "a number no dead job has", absl::StatusCode::kNotFound,
      "no dead job has sequence number 7", [&] {
        auto s = durable();
        (void)s->Recover();
        return s->RetryDeadJob(7);
      });
  run("Scheduler::RemoveDeadJob", "before Recover", absl::StatusCode::kFailedPrecondition,
      "RemoveDeadJob before Recover", [&] { return durable()->RemoveDeadJob(7); });
  run("Scheduler::RegisterDurable", "an unknown type", absl::StatusCode::kNotFound,
      "unknown job type 'x'", [&] {
        return durable()->RegisterDurable(
            "x", [](const DurableJob&, const Context&) { return absl::OkStatus(); });
      });
  run("Scheduler::RegisterDurable", "retry max_attempts = 0", absl::StatusCode::kInvalidArgument,
      "retry max_attempts must be >= 1", [&] {
        return durable()->RegisterDurable(
            "clone", [](const DurableJob&, const Context&) { return absl::OkStatus(); },
            RetryPolicy{.max_attempts = 0});
      });
  run("Scheduler::RegisterDurable", "retry multiplier = 0.5", absl::StatusCode::kInvalidArgument,
      "retry multiplier must be finite and >= 1, got 0.5", [&] {
        return durable()->RegisterDurable(
            "clone", [](const DurableJob&, const Context&) { return absl::OkStatus(); },
            RetryPolicy{.multiplier = 0.5});
      });
  run("Scheduler::Recover", "a second time", absl::StatusCode::kFailedPrecondition,
      "Recover was already called", [&] {
        auto s = durable();
        (void)s->Recover();
        return s->Recover().status();
      });
  run("Scheduler::Recover", "another scheduler works the store's jobs",
      absl::StatusCode::kFailedPrecondition,
      "another scheduler works its durable jobs through this same store", [&] {
        SchedulerOptions o;
        o.persistence.store = *OpenSqliteStore(StatePath("shared.db"));
        auto first = Ready(o);
        (void)first->Recover();
        return Ready(o)->Recover().status();
      });
  run("Scheduler::MaxWaitToCeiling", "an unknown type", absl::StatusCode::kNotFound,
      "unknown job type 'x'", [] { return Ready()->MaxWaitToCeiling("x").status(); });
  run("OpenEvidenceFile", "a path in a missing directory", absl::StatusCode::kInvalidArgument,
      "cannot open evidence file '/nonexistent/e.jsonl'",
      [] { return OpenEvidenceFile("/nonexistent/e.jsonl").status(); });
  run("fairgate sim (a trace file)", "a job of an unregistered type",
      absl::StatusCode::kInvalidArgument, "t.json: job 0: field 'type': unknown job type 'x'", [] {
        return sim::ParseTrace(R"({"capacity": 1, "types": {}, "jobs": [{"type": "x",
          "id": "r", "arrival": 0, "duration": 1}]})",
                               "t.json")
            .status();
      });
  run("fairgate sim (a trace file)", "a misspelt field", absl::StatusCode::kInvalidArgument,
      "t.json: field 'capacty': unknown field", [] {
        return sim::ParseTrace(R"({"capacty": 1, "capacity": 1, "types": {}, "jobs": []})",
                               "t.json")
            .status();
      });
  run("fairgate sim (a trace file)", "a field given twice", absl::StatusCode::kInvalidArgument,
      "t.json: field 'capacity': is given twice", [] {
        return sim::ParseTrace(R"({"capacity": 1, "capacity": 2, "types": {}, "jobs": []})",
                               "t.json")
            .status();
      });
  run("fairgate sim (a trace file)", "a directory", absl::StatusCode::kInvalidArgument,
      "/tmp: is a directory, not a trace file", [] { return sim::LoadTrace("/tmp").status(); });
  return rows;
}

std::string Render(const std::vector<Row>& rows) {
  std::ostringstream doc;
  doc << "# Bad inputs and what they get\n\n"
      << "Every row is tried by `tests/bad_inputs_test.cc`, which also checks that this file is\n"
      << "exactly the table its rows render: the table cannot drift from the code. A refused call\n"
      << "changes nothing. The message names the field and the value; the last column is a part\n"
      << "of it. `fairgate sim` prints such a message on one line and exits with status 2 (every\n"
      << "trace error is in `tests/trace_test.cc`); the git mirror's HTTP answers are in\n"
      << "`examples/git_mirror/README.md`.\n\n"
      << "| API | input | status | message contains |\n| --- | --- | --- | --- |\n";
  for (const Row& r : rows) {
    doc << "| `" << r.api << "` | " << r.input << " | " << absl::StatusCodeToString(r.code) << " | "
        << r.message << " |\n";
  }
  return doc.str();
}

TEST_CASE("BadInputs.EachGetsItsStatusAndMessage") {
  for (const Row& r : Rows()) {
    CAPTURE(r.api);
    CAPTURE(r.input);
    const Status s = r.attempt();
    CHECK(s.code() == r.code);
    CHECK_MESSAGE(std::string(s.message()).find(r.message) != std::string::npos, s.message());
  }
}

TEST_CASE("BadInputs.TheDocumentIsTheTableOfTheTests") {
  const std::string path = std::string(FAIRGATE_SOURCE_DIR) + "/docs/bad-inputs.md";
  const std::string rendered = Render(Rows());
  if (std::getenv("FAIRGATE_UPDATE_DOCS") != nullptr) std::ofstream(path) << rendered;
  std::ifstream in(path);
  std::stringstream committed;
  committed << in.rdbuf();
  CHECK_MESSAGE(committed.str() == rendered,
                "docs/bad-inputs.md differs from the tests' table; rerun with "
                "FAIRGATE_UPDATE_DOCS=1 to rewrite it");
}

}  // namespace bad_inputs_test
}  // namespace
}  // namespace fairgate

TEST_SUITE_END();

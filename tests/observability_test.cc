// What an operator sees: metrics, events, the evidence of each admission, the snapshot as JSON.
#include <atomic>
#include <future>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/admission_core.h"
#include "doctest/doctest.h"
#include "fairgate/evidence.h"
#include "fairgate/observer.h"
#include "fairgate/scheduler.h"
#include "runtime_test_util.h"
#include "test_job_types.h"

// The runtime's tests: CTest labels them "runtime", and runs them again on other pools and
// under ThreadSanitizer (tests/CMakeLists.txt).
TEST_SUITE_BEGIN("runtime");

namespace fairgate {
namespace {
namespace observability_test {

using namespace std::chrono_literals;
using testing::Eventually;
using testing::Gate;
using testing::TestClock;
using testing::Type;
using testing::Watchdog;

bool Contains(const std::string& text, const std::string& line) {
  return text.find(line + "\n") != std::string::npos;
}

// Seed options on a clock the test moves.
SchedulerOptions SeedOn(const TestClock& clock) {
  SchedulerOptions options = SchedulerOptions::Seed();
  options.runtime.clock = clock.Fn();
  return options;
}

std::unique_ptr<Scheduler> Make(const SchedulerOptions& options) {
  auto s = Scheduler::Create(testing::WithPoolUnderTest(options));
  REQUIRE_MESSAGE(s.ok(), s.status().message());
  return *std::move(s);
}

TEST_CASE("Observability.Metrics.CountWhatHappenedWithoutKeysOrIds") {
  Watchdog watchdog("metrics", 60s);
  TestClock clock;
  SchedulerOptions options = SeedOn(clock);
  options.rule.max_concurrency = 1;
  auto scheduler = Make(options);
  REQUIRE(scheduler->RegisterType("clone", Type(8, 2, "", 10)).ok());
  REQUIRE(scheduler->RegisterType("fetch", Type(4, 1, "git")).ok());

  REQUIRE(scheduler
              ->RunSync(Context::Background(),
                        {TypeName("clone"), JobId("linux.git"), FairnessKey("alice")},
                        clock.Takes(2))
              .ok());
  CHECK(scheduler
            ->RunSync(Context::Background(),
                      {TypeName("clone"), JobId("linux.git"), FairnessKey("alice")},
                      clock.Takes(0.003, absl::InternalError("pack failed")))
            .code() == absl::StatusCode::kInternal);
  CHECK(scheduler
            ->RunSync(Context::Background(),
                      {TypeName("nope"), JobId("linux.git"), FairnessKey("alice")}, clock.Takes(0))
            .code() == absl::StatusCode::kNotFound);
  // A pending fetch whose caller gives up: cancelled, never admitted.
  Gate gate;
  REQUIRE(scheduler->Submit({TypeName("fetch"), JobId("linux.git")}, testing::HoldUntil(gate), {})
              .ok());
  REQUIRE(Eventually([&] { return scheduler->Snapshot().running == 1; }));
  auto [ctx, cancel] = WithCancel(Context::Background());
  std::thread waiter([&, ctx = ctx] {
    CHECK(scheduler
              ->RunSync(ctx, {TypeName("clone"), JobId("git.git"), FairnessKey("bob")},
                        clock.Takes(0))
              .code() == absl::StatusCode::kCancelled);
  });
  REQUIRE(Eventually([&] { return scheduler->Snapshot().pending == 1; }));
  std::string during;
  scheduler->WriteMetrics(during);
  cancel();
  waiter.join();
  gate.Open();
  REQUIRE(Eventually([&] { return scheduler->Snapshot().running == 0; }));

  std::string out;
  scheduler->WriteMetrics(out);
  CHECK(Contains(out, "# TYPE fairgate_jobs_enqueued_total counter"));
  CHECK(Contains(out, "fairgate_jobs_enqueued_total{tier=\"8\",type=\"clone\"} 3"));
  CHECK(Contains(out, "fairgate_jobs_enqueued_total{tier=\"4\",type=\"fetch\"} 1"));
  CHECK(Contains(out, "fairgate_jobs_admitted_total{tier=\"8\",type=\"clone\"} 2"));
  CHECK(Contains(out, "fairgate_jobs_cancelled_total{tier=\"8\",type=\"clone\"} 1"));
  CHECK(Contains(out, "fairgate_jobs_completed_total{status=\"ok\",tier=\"8\",type=\"clone\"} 1"));
  CHECK(Contains(out,
                 "fairgate_jobs_completed_total{status=\"internal\",tier=\"8\",type=\"clone\"} 1"));
  CHECK(Contains(out, "fairgate_jobs_rejected_total{reason=\"not_found\"} 1"));
  CHECK(Contains(out, "fairgate_run_seconds_bucket{tier=\"8\",type=\"clone\",le=\"0.001\"} 0"));
  CHECK(Contains(out, "fairgate_run_seconds_bucket{tier=\"8\",type=\"clone\",le=\"0.005\"} 1"));
  CHECK(Contains(out, "fairgate_run_seconds_bucket{tier=\"8\",type=\"clone\",le=\"1\"} 1"));
  CHECK(Contains(out, "fairgate_run_seconds_bucket{tier=\"8\",type=\"clone\",le=\"5\"} 2"));
  CHECK(Contains(out, "fairgate_run_seconds_count{tier=\"8\",type=\"clone\"} 2"));
  CHECK(Contains(out, "fairgate_run_seconds_sum{tier=\"8\",type=\"clone\"} 2.003"));
  CHECK(Contains(out, "fairgate_queue_wait_seconds_count{tier=\"8\",type=\"clone\"} 2"));
  CHECK(Contains(out, "fairgate_jobs_pending{tier=\"8\",type=\"clone\"} 0"));
  CHECK(Contains(during, "fairgate_jobs_pending{tier=\"8\",type=\"clone\"} 1"));
  CHECK(Contains(during, "fairgate_jobs_running{tier=\"4\",type=\"fetch\"} 1"));
  CHECK(Contains(out, "fairgate_keys_tracked 3"));
  CHECK(Contains(out, "fairgate_capacity 1"));
  // Bounded labels only: no fairness key and no job id anywhere.
  for (const char* unbounded : {"alice", "bob", "linux.git", "git.git"}) {
    CHECK(out.find(unbounded) == std::string::npos);
  }
}

TEST_CASE("Observability.Metrics.JobsThatWaitedOnACapOrAConflict") {
  Watchdog watchdog("waited metrics", 60s);
  TestClock clock;
  SchedulerOptions options = SeedOn(clock);
  options.rule.max_concurrency = 2;
  auto scheduler = Make(options);
  REQUIRE(scheduler->RegisterType("fetch", Type(4, 1, "git")).ok());
  REQUIRE(scheduler->RegisterType("repack", Type(4, 2, "git")).ok());
  Gate gate;
  auto held = [&](const Context&) {
    return gate.Wait() ? absl::OkStatus() : absl::InternalError("gate");
  };
  std::atomic<int> done{0};
  auto count = [&](const Status&) { ++done; };
  REQUIRE(scheduler->Submit({TypeName("fetch"), JobId("r")}, held, count).ok());  // runs at once
  REQUIRE(Eventually([&] { return scheduler->Snapshot().running == 1; }));
  // A second fetch waits for the type's cap; a repack of r, with a slot free, for the conflict.
  REQUIRE(scheduler->Submit({TypeName("fetch"), JobId("s")}, held, count).ok());
  REQUIRE(scheduler->Submit({TypeName("repack"), JobId("r")}, held, count).ok());
  clock.Set(1);  // so that their waits are not zero
  gate.Open();
  REQUIRE(Eventually([&] { return done == 3; }));
  std::string out;
  scheduler->WriteMetrics(out);
  CHECK(Contains(out, "fairgate_jobs_waited_total{reason=\"capacity\"} 1"));
  CHECK(Contains(out, "fairgate_jobs_waited_total{reason=\"conflict\"} 1"));
}

struct Recorder : Observer {
  std::mutex mutex;
  std::vector<JobEvent> events;
  Scheduler* scheduler = nullptr;
  std::atomic<int> snapshots_taken{0};
  void OnEvent(const JobEvent& e) override {
    // Outside the scheduler's lock: calling back into it does not deadlock.
    if (scheduler != nullptr) {
      (void)scheduler->Snapshot();
      ++snapshots_taken;
    }
    std::lock_guard lock(mutex);
    events.push_back(e);
  }
  std::vector<std::string> Kinds() {
    std::lock_guard lock(mutex);
    std::vector<std::string> kinds;
    for (const JobEvent& e : events) kinds.push_back(JobEventKindName(e.kind));
    return kinds;
  }
};

// Options of one slot on `clock`, observed by `recorder`.
SchedulerOptions ObservedOptions(const TestClock& clock,
                                 const std::shared_ptr<Recorder>& recorder) {
  SchedulerOptions options = SeedOn(clock);
  options.rule.max_concurrency = 1;
  options.runtime.observers = {recorder};
  return options;
}

TEST_CASE("Observability.Observers.SeeEveryDecisionInOrderOutsideTheLock") {
  Watchdog watchdog("observers", 60s);
  TestClock clock;
  auto recorder = std::make_shared<Recorder>();
  auto scheduler = Make(ObservedOptions(clock, recorder));
  recorder->scheduler = scheduler.get();
  REQUIRE(scheduler->RegisterType("clone", Type(8, 8, "", 3)).ok());
  REQUIRE(scheduler
              ->RunSync(Context::Background(),
                        {TypeName("clone"), JobId("linux.git"), FairnessKey("alice")},
                        clock.Takes(5))
              .ok());
  CHECK(scheduler
            ->RunSync(Context::Background(), {TypeName("nope"), JobId("x"), FairnessKey("alice")},
                      clock.Takes(0))
            .code() == absl::StatusCode::kNotFound);
  REQUIRE(scheduler->Shutdown(Context::Background()).ok());  // delivers everything before it

  CHECK(recorder->Kinds() == std::vector<std::string>{"admit", "complete", "reject"});
  std::lock_guard lock(recorder->mutex);
  const JobEvent& admit = recorder->events[0];
  CHECK(admit.type == "clone");
  CHECK(admit.id == "linux.git");
  CHECK(admit.key == "alice");
  CHECK(admit.tier == 8);
  CHECK(admit.effective_tier == 8);
  CHECK(admit.charge == 3);
  CHECK(admit.accumulated_cost == 3);
  CHECK(admit.wait == 0);
  const JobEvent& complete = recorder->events[1];
  CHECK(complete.run_time == 5);
  CHECK(complete.time == 5);
  CHECK(complete.status.ok());
  CHECK(recorder->events[2].status.code() == absl::StatusCode::kNotFound);
  CHECK(recorder->snapshots_taken == 3);
}

// Calls read the clock before they take the scheduler's lock, so two threads can reach it with
// their times in the other order. The times the decisions carry never go back, and no job is
// admitted before it arrived. The clock here yields after each read, so that such inversions
// happen often.
TEST_CASE("Observability.Observers.DecisionTimesNeverGoBackWhenThreadsReadTheClockOutOfOrder") {
  Watchdog watchdog("clock order", 60s);
  auto recorder = std::make_shared<Recorder>();
  SchedulerOptions options;
  options.rule.max_concurrency = 2;
  options.runtime.observers = {recorder};
  const auto epoch = std::chrono::steady_clock::now();
  options.runtime.clock = [epoch] {
    const Seconds t = std::chrono::steady_clock::now() - epoch;
    std::this_thread::yield();
    return t;
  };
  auto scheduler = Make(options);
  REQUIRE(scheduler->RegisterType("clone", Type(8, 2)).ok());
  constexpr int kThreads = 4, kCalls = 300;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCalls; ++i) {
        CHECK(scheduler
                  ->RunSync(Context::Background(),
                            {TypeName("clone"),
                             JobId("repo" + std::to_string(t) + "." + std::to_string(i % 7)),
                             FairnessKey("client" + std::to_string(t))},
                            [](const Context&) { return absl::OkStatus(); })
                  .ok());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  REQUIRE(scheduler->Shutdown(Context::Background()).ok());
  std::lock_guard lock(recorder->mutex);
  REQUIRE(recorder->events.size() == 2 * kThreads * kCalls);  // an admission and a completion
  double last = 0;
  int went_back = 0, negative_waits = 0;
  for (const JobEvent& e : recorder->events) {
    if (e.time < last) ++went_back;
    if (e.kind == JobEvent::Kind::kAdmit && e.wait < 0) ++negative_waits;
    last = std::max(last, e.time);
  }
  CHECK(went_back == 0);
  CHECK(negative_waits == 0);
}

TEST_CASE("Observability.Observers.SeePromotionsCancellationsAndEvictions") {
  Watchdog watchdog("observer kinds", 60s);
  TestClock clock;
  auto recorder = std::make_shared<Recorder>();
  SchedulerOptions options = SeedOn(clock);
  options.rule.max_concurrency = 1;
  options.rule.aging = AgingConfig{Seconds(1), Seconds(1), 8};
  options.rule.key_ttl = Seconds(10);
  options.runtime.sweep_interval = Seconds(0.001);
  options.runtime.observers = {recorder};
  auto scheduler = Make(options);
  REQUIRE(scheduler->RegisterType("clone", Type(8, 8)).ok());
  REQUIRE(scheduler->RegisterType("repack", Type(1, 1)).ok());
  Gate gate;
  REQUIRE(scheduler
              ->Submit({TypeName("clone"), JobId("a"), FairnessKey("alice")},
                       testing::HoldUntil(gate), {})
              .ok());
  REQUIRE(Eventually([&] { return scheduler->Snapshot().running == 1; }));
  auto [ctx, cancel] = WithCancel(Context::Background());
  std::thread repack([&, ctx = ctx] {
    CHECK(scheduler->RunSync(ctx, {TypeName("repack"), JobId("r")}, clock.Takes(0)).code() ==
          absl::StatusCode::kCancelled);
  });
  REQUIRE(Eventually([&] { return scheduler->Snapshot().pending == 1; }));
  clock.Set(2.5);  // past grace + one interval: the repack ages into tier 8
  CHECK(scheduler->Snapshot().tiers[0].aged_in == 1);
  cancel();
  repack.join();
  gate.Open();
  REQUIRE(Eventually([&] { return scheduler->Snapshot().running == 0; }));
  clock.Set(100);  // every key idle for longer than the TTL
  REQUIRE(Eventually([&] { return scheduler->Snapshot().keys_tracked == 0; }));
  REQUIRE(scheduler->Shutdown(Context::Background()).ok());

  std::lock_guard lock(recorder->mutex);
  std::vector<std::string> kinds;
  for (const JobEvent& e : recorder->events) kinds.push_back(JobEventKindName(e.kind));
  CHECK(kinds ==
        std::vector<std::string>{"admit", "promote", "cancel", "complete", "evict", "evict"});
  const JobEvent& promote = recorder->events[1];
  CHECK(promote.type == "repack");
  CHECK(promote.tier == 1);
  CHECK(promote.effective_tier == 8);
  CHECK(promote.wait == 2);  // it was due at arrival 0 + grace 1 + interval 1
  const JobEvent& cancelled = recorder->events[2];
  CHECK(cancelled.status.code() == absl::StatusCode::kCancelled);
  CHECK(cancelled.wait == 2.5);
  CHECK(cancelled.tier == 1);            // the core's description of the pending job:
  CHECK(cancelled.effective_tier == 8);  // its own tier, and the one it had aged into
  const JobEvent& completed = recorder->events[3];
  CHECK(completed.type == "clone");
  CHECK(completed.key == "alice");
  CHECK(completed.tier == 8);
  CHECK(completed.effective_tier == 8);
  CHECK(completed.charge == 1);
  std::set<std::string> evicted = {recorder->events[4].key, recorder->events[5].key};
  CHECK(evicted == std::set<std::string>{"", "alice"});
}

TEST_CASE("Observability.Observers.AQueueWaitExpiryIsAnExpireEventNotACancel") {
  Watchdog watchdog("observer expiry", 60s);
  TestClock clock;
  auto recorder = std::make_shared<Recorder>();
  auto scheduler = Make(ObservedOptions(clock, recorder));
  JobTypeConfig clone = Type(8, 1);
  clone.max_queue_wait = Seconds(10);
  REQUIRE(scheduler->RegisterType("clone", clone).ok());
  Gate gate;
  REQUIRE(scheduler
              ->Submit({TypeName("clone"), JobId("a"), FairnessKey("holder")},
                       testing::HoldUntil(gate), {})
              .ok());
  REQUIRE(Eventually([&] { return scheduler->Snapshot().running == 1; }));
  std::promise<Status> late;
  REQUIRE(scheduler
              ->Submit({TypeName("clone"), JobId("b"), FairnessKey("late")}, clock.Takes(0),
                       [&](const Status& s) { late.set_value(s); })
              .ok());
  // A second job, cancelled by its caller: a kCancel, so that the two kinds are told apart.
  auto [ctx, cancel] = WithCancel(Context::Background());
  std::thread leaving([&, ctx = ctx] {
    CHECK(
        scheduler
            ->RunSync(ctx, {TypeName("clone"), JobId("c"), FairnessKey("leaving")}, clock.Takes(0))
            .code() == absl::StatusCode::kCancelled);
  });
  REQUIRE(Eventually([&] { return scheduler->Snapshot().pending == 2; }));
  cancel();
  leaving.join();
  clock.Set(10.5);  // past the late job's max_queue_wait
  CHECK(late.get_future().get().code() == absl::StatusCode::kDeadlineExceeded);
  gate.Open();
  REQUIRE(scheduler->Shutdown(Context::Background()).ok());

  CHECK(recorder->Kinds() == std::vector<std::string>{"admit", "cancel", "expire", "complete"});
  std::lock_guard lock(recorder->mutex);
  const JobEvent& cancelled = recorder->events[1];
  CHECK(cancelled.key == "leaving");
  CHECK(cancelled.status.code() == absl::StatusCode::kCancelled);
  const JobEvent& expired = recorder->events[2];
  CHECK(expired.kind == JobEvent::Kind::kExpire);
  CHECK(expired.key == "late");
  CHECK(expired.status.code() == absl::StatusCode::kDeadlineExceeded);
  CHECK(std::string(expired.status.message()).find("max_queue_wait") != std::string::npos);
  CHECK(expired.wait == 10.5);
  CHECK(expired.charge == 0);
}

TEST_CASE("Observability.Observers.ASlowObserverNeverStallsAdmission") {
  Watchdog watchdog("slow observer", 60s);
  struct Stuck : Observer {
    Gate gate;
    void OnEvent(const JobEvent&) override { (void)gate.Wait(60000ms); }
  };
  auto stuck = std::make_shared<Stuck>();
  SchedulerOptions options = SchedulerOptions::Default();
  options.runtime.observers = {stuck};
  options.runtime.observer_queue_limit = 10;
  auto scheduler = Make(options);
  REQUIRE(scheduler->RegisterType("clone", Type(8, 8)).ok());
  // The observer is stuck on the first event; 100 jobs still run, one after the other.
  for (int i = 0; i < 100; ++i) {
    REQUIRE(scheduler
                ->RunSync(Context::Background(), {TypeName("clone"), JobId("r"), FairnessKey("k")},
                          [](const Context&) { return absl::OkStatus(); })
                .ok());
  }
  std::string out;
  scheduler->WriteMetrics(out);
  // 200 events (admit and complete each): at most 10 wait, the few the delivery thread took
  // before it got stuck are delivered late, the rest are dropped and counted.
  const std::string metric = "fairgate_observer_events_dropped_total ";
  const std::size_t at = out.find("\n" + metric);
  REQUIRE(at != std::string::npos);
  const int dropped = std::stoi(out.substr(at + 1 + metric.size()));
  CHECK(dropped >= 150);
  CHECK(dropped <= 190);
  stuck->gate.Open();
}

TEST_CASE("Observability.Evidence.NamesTheSourceOfTheEstimateAndWhatWasSkipped") {
  SchedulerOptions options = SchedulerOptions::Seed();
  options.rule.max_concurrency = 8;
  auto core = *core::AdmissionCore::Create(options.rule);
  REQUIRE(core->RegisterType("clone", Type(8, 1, "git", 4)).ok());
  REQUIRE(core->RegisterType("archive", Type(8, 8)).ok());
  REQUIRE(core->RegisterType("fetch", Type(1, 1)).ok());

  SUBCASE("estimate sources: default, then learned, then explicit") {
    (void)*core->Enqueue({"archive", "r", "a"}, 0);
    auto first = core->NextAdmission(0);
    REQUIRE(first);
    CHECK(first->estimate_source == core::EstimateSource::kDefault);
    REQUIRE(core->Complete(first->ticket, 2, 1).ok());
    (void)*core->Enqueue({"archive", "r", "a"}, 1);
    auto second = core->NextAdmission(1);
    CHECK(second->estimate_source == core::EstimateSource::kLearned);
    (void)*core->Enqueue({"archive", "r", "a", 7.0}, 1);
    auto third = core->NextAdmission(1);
    CHECK(third->estimate_source == core::EstimateSource::kExplicit);
    CHECK(third->charge == 7);
  }
  SUBCASE("a type at its cap, a busy resource and a key at its limit are passed over") {
    // clone (cap 1) runs r1 for key a.
    (void)*core->Enqueue({"clone", "r1", "a"}, 0);
    REQUIRE(core->NextAdmission(0));
    REQUIRE(core->SetKeyLimits("b", {.max_running = 1}).ok());
    (void)*core->Enqueue({"archive", "x", "b"}, 0);
    REQUIRE(core->NextAdmission(0));  // b now runs its one job
    // Waiting: another clone (type at cap), an archive of b (key at limit), an archive of c.
    (void)*core->Enqueue({"clone", "r2", "d"}, 1);
    (void)*core->Enqueue({"archive", "y", "b"}, 1);
    (void)*core->Enqueue({"archive", "z", "c"}, 2);
    auto admitted = core->NextAdmission(2);
    REQUIRE(admitted);
    CHECK(admitted->key == "c");
    CHECK(admitted->skipped.type_cap == 1);
    CHECK(admitted->skipped.key_limit == 1);
    CHECK(admitted->skipped.conflict == 0);
    CHECK(admitted->skipped.tier_cap == 0);
  }
  SUBCASE("a job whose resource is busy is set aside, and counted") {
    REQUIRE(core->RegisterType("sync", Type(8, 4, "git")).ok());
    (void)*core->Enqueue({"sync", "r1", "a"}, 0);
    REQUIRE(core->NextAdmission(0));
    (void)*core->Enqueue({"sync", "r1", "b"}, 1);  // b has used nothing: first, but r1 is busy
    (void)*core->Enqueue({"sync", "r2", "a"}, 2);
    auto admitted = core->NextAdmission(2);
    REQUIRE(admitted);
    CHECK(admitted->id == "r2");
    CHECK(admitted->skipped.conflict == 1);
  }
  SUBCASE("a full tier is passed over") {
    REQUIRE(core->RegisterType("mid", Type(2, 2)).ok());
    (void)*core->Enqueue({"mid", "m1", "a"}, 0);
    (void)*core->Enqueue({"mid", "m2", "a"}, 0);
    REQUIRE(core->NextAdmission(0));
    REQUIRE(core->NextAdmission(0));
    (void)*core->Enqueue({"mid", "m3", "a"}, 1);
    (void)*core->Enqueue({"fetch", "f", "a"}, 1);
    auto admitted = core->NextAdmission(1);
    REQUIRE(admitted);
    CHECK(admitted->type == "fetch");
    CHECK(admitted->skipped.tier_cap == 1);
  }
}

TEST_CASE("Observability.Evidence.OneJsonLinePerAdmission") {
  AdmissionEvidence e;
  e.time = 12.5;
  e.type = "repack";
  e.id = "linux.git";
  e.key = "";
  e.tier = 1;
  e.effective_tier = 8;
  e.aged = true;
  e.accumulated_cost = 40;
  e.arrival = 1;
  e.seq = 7;
  e.estimate = 20;
  e.estimate_source = "learned";
  e.skipped_type_cap = 2;
  CHECK(ToJsonLine(e) ==
        R"({"t":12.5,"type":"repack","id":"linux.git","key":"","order":{"effective_tier":8,)"
        R"("aged":true,"reserved":false,"accumulated_cost":40.0,"sjf":0.0,"arrival":1.0,"seq":7},)"
        R"("tier":1,"estimate":20.0,"estimate_source":"learned","weight":1.0,)"
        R"("skipped":{"tier_cap":0,"type_cap":2,"key_limit":0,"conflict":0}})");

  std::vector<AdmissionEvidence> records;
  std::mutex mutex;
  SchedulerOptions options = SchedulerOptions::Seed();
  options.runtime.evidence = [&](const AdmissionEvidence& r) {
    std::lock_guard lock(mutex);
    records.push_back(r);
  };
  auto scheduler = Make(options);
  REQUIRE(scheduler->RegisterType("clone", Type(8, 8, "", 3)).ok());
  REQUIRE(scheduler
              ->RunSync(Context::Background(),
                        {TypeName("clone"), JobId("git.git"), FairnessKey("alice")},
                        [](const Context&) { return absl::OkStatus(); })
              .ok());
  REQUIRE(scheduler->Shutdown(Context::Background()).ok());
  REQUIRE(records.size() == 1);
  CHECK(records[0].key == "alice");
  CHECK(records[0].estimate == 3);
  CHECK(records[0].estimate_source == "default");
}

TEST_CASE("Observability.Snapshot.JsonHasTheCountsAndTheHeaviestKeys") {
  TestClock clock;
  auto scheduler = Make(SeedOn(clock));
  REQUIRE(scheduler->RegisterType("clone", Type(8, 8, "", 1)).ok());
  for (const auto& [key, cost] : std::vector<std::pair<std::string, double>>{
           {"light", 1}, {"heavy", 1}, {"heavy", 1}, {"heavy", 1}, {"mid", 1}, {"mid", 1}}) {
    REQUIRE(scheduler
                ->RunSync(Context::Background(),
                          {TypeName("clone"), JobId("r" + key), FairnessKey(key)},
                          clock.Takes(cost))
                .ok());
  }
  const Snapshot s = scheduler->Snapshot(2);
  CHECK(s.heaviest_keys == std::vector<KeyCost>{{"heavy", 3}, {"mid", 2}});
  CHECK(scheduler->Snapshot().heaviest_keys.empty());
  CHECK(s.types[0].admitted == 6);
  CHECK(s.types[0].completed == 6);
  CHECK(s.types[0].run_seconds_sum == 6);
  CHECK(ToJson(s) ==
        R"({"max_concurrency":8,"capacity":8,"running":0,"slots_in_use":0,"pending":0,)"
        R"("tiers":[{"priority":8,"running":0,"pending":0,"aged_in":0,"slots_in_use":0}],)"
        R"("types":[{"name":"clone","priority":8,"max_concurrency":8,"running":0,"pending":0,)"
        R"("enqueued":6,"admitted":6,"completed":6,"cancelled":0,"expired":0,"joined":0,)"
        R"("borrowed":0,"paused":false,)"
        R"("wait_seconds_sum":0.0,)"
        R"("run_seconds_sum":6.0}],"keys_tracked":3,"estimates_tracked":3,"paused_keys":[],)"
        R"("workers":[],"types_without_worker":[],)"
        R"("rejected":0,)"
        R"("keys_evicted":0,"aging_promotions":0,"waited_on_conflict":0,"waited_on_capacity":0,)"
        R"("heaviest_keys":[{"key":"heavy","accumulated_cost":3.0},)"
        R"({"key":"mid","accumulated_cost":2.0}]})");
}

}  // namespace observability_test
}  // namespace
}  // namespace fairgate

TEST_SUITE_END();

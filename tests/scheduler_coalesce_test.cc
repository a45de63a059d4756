// Coalescing through the Scheduler (JobTypeConfig::coalesce, "Coalescing" in fairgate/scheduler.h):
// which function runs, who is told what, who is charged, and that every call is told exactly
// once, whatever leaves. The core's side (which request joins which job, the callers it counts)
// is in tests/admission_core_test.cc and the differential tests. Each case that could hang has a
// watchdog; none asserts how long anything took.
#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "doctest/doctest.h"
#include "fairgate/scheduler.h"
#include "runtime_test_util.h"
#include "test_job_types.h"

// The runtime's tests: CTest labels them "runtime", and runs them again on other pools and
// under ThreadSanitizer (tests/CMakeLists.txt).
TEST_SUITE_BEGIN("runtime");

namespace fairgate {
namespace {
namespace scheduler_coalesce_test {

using namespace std::chrono_literals;
using testing::Eventually;
using testing::Gate;
using testing::Own;
using testing::TestClock;
using testing::Watchdog;

// One slot, held by a job of another type until `Release`, so that what comes next waits.
class Coalescing {
 public:
  explicit Coalescing(Coalesce mode) {
    SchedulerOptions options = SchedulerOptions::Default();
    options.rule.max_concurrency = 1;
    options.runtime.sweep_interval = 3600s;
    options.rule.reconcile = false;  // each key is charged exactly the default cost, 2
    auto created = Scheduler::Create(testing::WithPoolUnderTest(options));
    REQUIRE(created.ok());
    scheduler = *std::move(created);
    JobTypeConfig mirror = testing::Type(1, 1, "", 2);
    mirror.coalesce = mode;
    REQUIRE(scheduler->RegisterType("mirror", mirror).ok());
    REQUIRE(scheduler->RegisterType("other", testing::Type(1, 1)).ok());
    REQUIRE(scheduler
                ->Submit(
                    {TypeName("other"), JobId("x"), FairnessKey("holder")},
                    [this](const Context&) {
                      return hold_.Wait() ? absl::OkStatus() : absl::InternalError("held");
                    },
                    nullptr)
                .ok());
    REQUIRE(Eventually([&] { return scheduler->Snapshot().running == 1; }));
  }

  void Release() { hold_.Open(); }

  // A Submit of mirror/`id` whose function records `name` and returns `status`; its callback's
  // status lands in the returned future.
  std::future<Status> Submit(std::string name, std::string key, std::string id = "linux",
                             Status status = absl::OkStatus()) {
    auto told = std::make_shared<std::promise<Status>>();
    std::future<Status> future = told->get_future();
    REQUIRE(scheduler
                ->Submit(
                    {TypeName("mirror"), JobId(id), FairnessKey(key)},
                    [this, name, status](const Context&) {
                      Ran(name);
                      return status;
                    },
                    [told](const Status& s) { told->set_value(Own(s)); })
                .ok());
    return future;
  }

  // How RunSync below calls: RunSync on a thread of its own, or RunAsync (RunSync with nobody
  // waiting: the same rules, its status told to a callback).
  enum class Call { kSync, kAsync };
  Call call = Call::kSync;

  // A RunSync of mirror/`id` under `ctx`, whose function records `name` and returns `status`.
  std::future<Status> RunSync(std::string name, std::string key,
                              Context ctx = Context::Background(), std::string id = "linux",
                              Status status = absl::OkStatus()) {
    auto fn = [=, this](const Context&) {
      Ran(name);
      return status;
    };
    if (call == Call::kAsync) {
      auto told = std::make_shared<std::promise<Status>>();
      std::future<Status> future = told->get_future();
      const Status accepted =
          scheduler->RunAsync(ctx, {TypeName("mirror"), JobId(id), FairnessKey(key)}, fn,
                              [told](const Status& s) { told->set_value(Own(s)); });
      if (!accepted.ok()) told->set_value(accepted);  // refused: `done` is never called
      return future;
    }
    return std::async(std::launch::async, [=, this] {
      return scheduler->RunSync(ctx, {TypeName("mirror"), JobId(id), FairnessKey(key)}, fn);
    });
  }

  std::vector<std::string> Runs() {
    std::lock_guard lock(mutex_);
    return runs_;
  }

  std::unique_ptr<Scheduler> scheduler;

 private:
  void Ran(const std::string& name) {
    std::lock_guard lock(mutex_);
    runs_.push_back(name);
  }

  Gate hold_;
  std::mutex mutex_;
  std::vector<std::string> runs_;
};

using Names = std::vector<std::string>;

TEST_CASE("Scheduler.Coalesce.SubmitsOfAPendingIdRunOnceAndEveryCallbackGetsItsStatus") {
  for (Coalesce mode : {Coalesce::kJoin, Coalesce::kSupersede}) {
    CAPTURE(static_cast<int>(mode));
    Watchdog watchdog("coalesced submits", 60s);
    Coalescing c(mode);
    std::future<Status> first = c.Submit("first", "a", "linux", absl::NotFoundError("first ran"));
    std::future<Status> second = c.Submit("second", "b", "linux", absl::NotFoundError("second"));
    std::future<Status> third = c.Submit("third", "c", "linux", absl::NotFoundError("third ran"));
    std::future<Status> other = c.Submit("other id", "a", "git");
    CHECK(c.scheduler->Snapshot().pending == 2);  // linux once, git once
    c.Release();
    const std::string ran = mode == Coalesce::kJoin ? "first ran" : "third ran";
    for (std::future<Status>* told : {&first, &second, &third}) {
      const Status s = told->get();
      CHECK(s.code() == absl::StatusCode::kNotFound);
      CHECK(s.message() == ran);
    }
    CHECK(other.get().ok());
    CHECK(c.Runs() == Names{mode == Coalesce::kJoin ? "first" : "third", "other id"});
    // Charged once, to the key that queued the job; the joiners' keys are not even tracked.
    CHECK(c.scheduler->AccumulatedCost("a") == 4.0);  // linux and git, 2 each
    CHECK(c.scheduler->AccumulatedCost("b") == std::nullopt);
    const Snapshot snapshot = c.scheduler->Snapshot();
    CHECK(snapshot.types[0].enqueued == 2);
    CHECK(snapshot.types[0].joined == 2);
    CHECK(snapshot.types[0].completed == 2);
    std::string metrics;
    c.scheduler->WriteMetrics(metrics);
    CHECK(metrics.find("fairgate_jobs_joined_total{tier=\"1\",type=\"mirror\"} 2") !=
          std::string::npos);
    REQUIRE(c.scheduler->Drain(Context::Background()).ok());
  }
}

TEST_CASE("Scheduler.Coalesce.RunSyncCallersOfAPendingIdShareOneRunOnTheFirstCaller") {
  for (Coalescing::Call call : {Coalescing::Call::kSync, Coalescing::Call::kAsync}) {
    CAPTURE(static_cast<int>(call));
    Watchdog watchdog("coalesced RunSync", 60s);
    Coalescing c(Coalesce::kJoin);
    c.call = call;
    std::vector<std::future<Status>> calls;
    calls.push_back(c.RunSync("caller 0", "k0", Context::Background(), "linux",
                              absl::AbortedError("caller 0 ran")));
    REQUIRE(Eventually([&] { return c.scheduler->Snapshot().pending == 1; }));
    for (int i = 1; i < 8; ++i) {
      calls.push_back(c.RunSync("caller " + std::to_string(i), "k" + std::to_string(i)));
    }
    REQUIRE(Eventually([&] { return c.scheduler->Snapshot().types[0].joined == 7; }));
    CHECK(c.scheduler->Snapshot().pending == 1);
    c.Release();
    for (auto& told : calls) CHECK(told.get().message() == "caller 0 ran");
    CHECK(c.Runs() == Names{"caller 0"});
    REQUIRE(c.scheduler->Drain(Context::Background()).ok());
  }
}

TEST_CASE("Scheduler.Coalesce.ARunSyncThatJoinsASubmitRunsItsOwnFunctionAndTellsTheSubmit") {
  for (Coalescing::Call call : {Coalescing::Call::kSync, Coalescing::Call::kAsync}) {
    CAPTURE(static_cast<int>(call));
    for (bool submit_first : {true, false}) {
      CAPTURE(submit_first);
      Watchdog watchdog("Submit and RunSync", 60s);
      Coalescing c(Coalesce::kJoin);
      c.call = call;
      std::future<Status> submitted, synced;
      if (submit_first) {
        submitted = c.Submit("submit", "a");
        synced =
            c.RunSync("sync", "b", Context::Background(), "linux", absl::DataLossError("sync"));
        REQUIRE(Eventually([&] { return c.scheduler->Snapshot().types[0].joined == 1; }));
      } else {
        synced =
            c.RunSync("sync", "b", Context::Background(), "linux", absl::DataLossError("sync"));
        REQUIRE(Eventually([&] { return c.scheduler->Snapshot().pending == 1; }));
        submitted = c.Submit("submit", "a");
        CHECK(c.scheduler->Snapshot().types[0].joined == 1);
      }
      c.Release();
      // The caller that waits runs its own function, in its own thread; the Submit is told.
      CHECK(synced.get().message() == "sync");
      CHECK(submitted.get().message() == "sync");
      CHECK(c.Runs() == Names{"sync"});
      // The key that queued the job is charged: the Submit's or the RunSync's.
      CHECK(c.scheduler->AccumulatedCost(submit_first ? "a" : "b") == 2.0);
      CHECK(c.scheduler->AccumulatedCost(submit_first ? "b" : "a") == std::nullopt);
      REQUIRE(c.scheduler->Drain(Context::Background()).ok());
    }
  }
}

TEST_CASE("Scheduler.Coalesce.ACallerThatLeavesLeavesAloneAndTheLastOneCancelsTheJob") {
  for (Coalescing::Call call : {Coalescing::Call::kSync, Coalescing::Call::kAsync}) {
    CAPTURE(static_cast<int>(call));
    Watchdog watchdog("coalesced leave", 60s);
    Coalescing c(Coalesce::kJoin);
    c.call = call;
    auto [first_ctx, cancel_first] = WithCancel(Context::Background());
    std::future<Status> first = c.RunSync("first", "a", first_ctx);
    REQUIRE(Eventually([&] { return c.scheduler->Snapshot().pending == 1; }));
    std::future<Status> second = c.RunSync("second", "b");
    REQUIRE(Eventually([&] { return c.scheduler->Snapshot().types[0].joined == 1; }));
    std::future<Status> third = c.RunSync("third", "c");
    REQUIRE(Eventually([&] { return c.scheduler->Snapshot().types[0].joined == 2; }));
    // The caller that queued the job leaves: the job stays, for the others.
    cancel_first();
    CHECK(first.get().code() == absl::StatusCode::kCancelled);
    CHECK(c.scheduler->Snapshot().pending == 1);
    CHECK(c.scheduler->Snapshot().types[0].cancelled == 0);
    c.Release();
    CHECK(second.get().ok());
    CHECK(third.get().ok());
    CHECK(c.Runs() == Names{"second"});  // the first caller still waiting runs it
    // Still charged to the key that queued it: its place in the order was that key's. The joiners'
    // keys are charged nothing, and not even tracked.
    CHECK(c.scheduler->AccumulatedCost("a") == 2.0);
    CHECK_FALSE(c.scheduler->AccumulatedCost("b").has_value());
    CHECK_FALSE(c.scheduler->AccumulatedCost("c").has_value());

    // Now every caller leaves: the job is cancelled, uncharged, and nothing runs.
    Gate hold;
    std::promise<Status> blocker;
    REQUIRE(c.scheduler
                ->Submit(
                    {TypeName("other"), JobId("y"), FairnessKey("holder")},
                    [&](const Context&) {
                      return hold.Wait() ? absl::OkStatus() : absl::InternalError("");
                    },
                    [&](const Status& s) { blocker.set_value(Own(s)); })
                .ok());
    REQUIRE(Eventually([&] { return c.scheduler->Snapshot().running == 1; }));
    auto [d_ctx, cancel_d] = WithCancel(Context::Background());
    auto [e_ctx, cancel_e] = WithCancel(Context::Background());
    std::future<Status> d = c.RunSync("d", "d", d_ctx);
    REQUIRE(Eventually([&] { return c.scheduler->Snapshot().pending == 1; }));
    std::future<Status> e = c.RunSync("e", "e", e_ctx);
    REQUIRE(Eventually([&] { return c.scheduler->Snapshot().types[0].joined == 3; }));
    cancel_e();
    CHECK(e.get().code() == absl::StatusCode::kCancelled);
    CHECK(c.scheduler->Snapshot().pending == 1);
    cancel_d();
    CHECK(d.get().code() == absl::StatusCode::kCancelled);
    CHECK(c.scheduler->Snapshot().pending == 0);
    CHECK(c.scheduler->Snapshot().types[0].cancelled == 1);
    CHECK(c.scheduler->AccumulatedCost("d") == 0.0);
    hold.Open();
    CHECK(blocker.get_future().get().ok());
    CHECK(c.Runs() == Names{"second"});
    REQUIRE(c.scheduler->Drain(Context::Background()).ok());
  }
}

// A caller whose context's deadline passes leaves as a cancelled one does, told DeadlineExceeded
// (RunAsync too: its deadline is watched by the scheduler's timer): alone, its job leaves the
// queue uncharged; joined to a pending or a running job, it leaves the job to the others. Each
// outcome is the same if the deadline passes before the call is queued (refused with it).
TEST_CASE("Scheduler.Coalesce.ACallerWhoseDeadlinePassesLeavesAsACancelledOneDoes") {
  for (Coalescing::Call call : {Coalescing::Call::kSync, Coalescing::Call::kAsync}) {
    CAPTURE(static_cast<int>(call));
    Watchdog watchdog("coalesced deadlines", 60s);
    Coalescing c(Coalesce::kJoin);
    c.call = call;
    auto soon = [] { return WithTimeout(Context::Background(), 200ms).first; };
    // Alone: the job leaves the queue, uncharged, and nothing runs.
    std::future<Status> alone = c.RunSync("alone", "a", soon(), "git");
    CHECK(alone.get().code() == absl::StatusCode::kDeadlineExceeded);
    CHECK(c.scheduler->Snapshot().pending == 0);
    CHECK(c.scheduler->AccumulatedCost("a").value_or(0) == 0.0);
    // Joined to a pending job: the job stays, and its own caller runs it.
    std::future<Status> first =
        c.RunSync("first", "b", Context::Background(), "linux", absl::DataLossError("first ran"));
    REQUIRE(Eventually([&] { return c.scheduler->Snapshot().pending == 1; }));
    std::future<Status> late = c.RunSync("late", "c", soon());
    CHECK(late.get().code() == absl::StatusCode::kDeadlineExceeded);
    CHECK(c.scheduler->Snapshot().pending == 1);
    c.Release();
    CHECK(first.get().message() == "first ran");
    // Joined to a running job: it stops waiting; the run goes on for the others.
    Gate running;
    std::atomic<int> runs = 0;
    std::promise<Status> submitted;
    REQUIRE(c.scheduler
                ->Submit(
                    {TypeName("mirror"), JobId("linux"), FairnessKey("d")},
                    [&](const Context&) {
                      ++runs;
                      return running.Wait() ? absl::UnavailableError("upstream down")
                                            : absl::InternalError("gate");
                    },
                    [&](const Status& s) { submitted.set_value(Own(s)); })
                .ok());
    REQUIRE(Eventually([&] { return runs == 1; }));
    std::future<Status> waiting = c.RunSync("waiting", "e");
    std::future<Status> impatient = c.RunSync("impatient", "f", soon());
    CHECK(impatient.get().code() == absl::StatusCode::kDeadlineExceeded);
    running.Open();
    CHECK(submitted.get_future().get().message() == "upstream down");
    CHECK(waiting.get().message() == "upstream down");
    CHECK(runs == 1);
    CHECK(c.Runs() == Names{"first"});
    REQUIRE(c.scheduler->Drain(Context::Background()).ok());
  }
}

TEST_CASE("Scheduler.Coalesce.ARunSyncJoinsARunningJobASubmitQueuesAnother") {
  for (Coalescing::Call call : {Coalescing::Call::kSync, Coalescing::Call::kAsync}) {
    CAPTURE(static_cast<int>(call));
    Watchdog watchdog("join a running job", 60s);
    Coalescing c(Coalesce::kJoin);
    c.call = call;
    c.Release();  // nothing held: the first Submit runs at once and waits on `running`
    Gate running;
    std::atomic<int> runs = 0;
    std::promise<Status> first;
    REQUIRE(c.scheduler
                ->Submit(
                    {TypeName("mirror"), JobId("linux"), FairnessKey("a")},
                    [&](const Context&) {
                      ++runs;
                      return running.Wait() ? absl::UnavailableError("upstream down")
                                            : absl::InternalError("gate");
                    },
                    [&](const Status& s) { first.set_value(Own(s)); })
                .ok());
    REQUIRE(Eventually([&] { return runs == 1; }));  // running, the holder gone
    std::future<Status> joined = c.RunSync("joined", "b");
    auto [leaving_ctx, leave] = WithCancel(Context::Background());
    std::future<Status> leaving = c.RunSync("leaving", "c", leaving_ctx);
    REQUIRE(Eventually([&] { return c.scheduler->Snapshot().types[0].joined == 2; }));
    // A Submit asks for a run after this one: it queues a job of its own; unless it says any run
    // under way will do.
    std::future<Status> again = c.Submit("again", "d");
    CHECK(c.scheduler->Snapshot().pending == 1);
    std::promise<Status> any_run;
    REQUIRE(c.scheduler
                ->Submit(
                    {TypeName("mirror"), JobId("linux"), FairnessKey("e")},
                    [&](const Context&) { return absl::InternalError("ran"); },
                    [&](const Status& s) { any_run.set_value(Own(s)); }, {.join_running = true})
                .ok());
    CHECK(c.scheduler->Snapshot().types[0].joined == 3);
    // A joiner of a run that leaves returns at once; the run goes on.
    leave();
    CHECK(leaving.get().code() == absl::StatusCode::kCancelled);
    running.Open();
    CHECK(first.get_future().get().message() == "upstream down");
    CHECK(joined.get().message() == "upstream down");
    CHECK(any_run.get_future().get().message() == "upstream down");
    CHECK(again.get().ok());
    CHECK(runs == 1);
    CHECK(c.Runs() == Names{"again"});
    REQUIRE(c.scheduler->Drain(Context::Background()).ok());
  }
}

TEST_CASE("Scheduler.Coalesce.EveryCallOfAnExpiredOrShutDownJobIsToldOnce") {
  Watchdog watchdog("coalesced refusals", 60s);
  for (bool expire : {true, false}) {
    CAPTURE(expire);
    SchedulerOptions options = SchedulerOptions::Default();
    options.rule.max_concurrency = 1;
    options.runtime.sweep_interval = 3600s;
    // The scheduler's clock stands still until every call has joined, then passes the queue
    // wait: on a slow machine the calls took longer than the wait to arrive, and the first
    // ones expired before the last joined.
    TestClock clock(100);
    options.runtime.clock = clock.Fn();
    auto scheduler = *Scheduler::Create(testing::WithPoolUnderTest(options));
    JobTypeConfig mirror = testing::Type(1, 1);
    mirror.coalesce = Coalesce::kJoin;
    if (expire) mirror.max_queue_wait = Seconds(0.05);
    REQUIRE(scheduler->RegisterType("mirror", mirror).ok());
    Gate hold;
    std::promise<Status> holder;
    REQUIRE(scheduler
                ->Submit(
                    {TypeName("mirror"), JobId("held"), FairnessKey("h")},
                    [&](const Context&) {
                      return hold.Wait() ? absl::OkStatus() : absl::InternalError("");
                    },
                    [&](const Status& s) { holder.set_value(Own(s)); })
                .ok());
    REQUIRE(Eventually([&] { return scheduler->Snapshot().running == 1; }));
    std::atomic<int> ran = 0, told = 0;
    std::vector<std::future<Status>> syncs;
    std::promise<void> all_told;
    for (int i = 0; i < 3; ++i) {
      REQUIRE(scheduler
                  ->Submit(
                      {TypeName("mirror"), JobId("linux"), FairnessKey("s")},
                      [&](const Context&) {
                        ++ran;
                        return absl::OkStatus();
                      },
                      [&](const Status& s) {
                        CHECK(s.code() == (expire ? absl::StatusCode::kDeadlineExceeded
                                                  : absl::StatusCode::kCancelled));
                        if (++told == 3) all_told.set_value();
                      })
                  .ok());
      syncs.push_back(std::async(std::launch::async, [&] {
        return scheduler->RunSync(Context::Background(),
                                  {TypeName("mirror"), JobId("linux"), FairnessKey("r")},
                                  [&](const Context&) {
                                    ++ran;
                                    return absl::OkStatus();
                                  });
      }));
    }
    REQUIRE(Eventually([&] { return scheduler->Snapshot().types[0].joined == 5; }));
    if (expire) clock.Set(101);
    std::thread shutdown;
    if (!expire)
      shutdown = std::thread([&] { CHECK(scheduler->Shutdown(Context::Background()).ok()); });
    for (auto& sync : syncs) {
      CHECK(sync.get().code() ==
            (expire ? absl::StatusCode::kDeadlineExceeded : absl::StatusCode::kCancelled));
    }
    all_told.get_future().get();
    hold.Open();
    CHECK(holder.get_future().get().ok());
    if (shutdown.joinable()) shutdown.join();
    CHECK(ran == 0);
    CHECK(told == 3);
    const Snapshot snapshot = scheduler->Snapshot();
    CHECK(snapshot.pending == 0);
    CHECK(snapshot.types[0].expired == (expire ? 1 : 0));
    CHECK(snapshot.types[0].cancelled == (expire ? 0 : 1));
  }
}

}  // namespace scheduler_coalesce_test
}  // namespace
}  // namespace fairgate

TEST_SUITE_END();

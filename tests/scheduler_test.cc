// The Scheduler: RunSync on the caller, Submit on the pool, cancellation, errors, shutdown, and
// learning from wall time. Runtime tests run over several pool sizes; every test that could hang
// has a watchdog; no test asserts how long anything took.
#include "fairgate/scheduler.h"

#include <pthread.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <future>
#include <limits>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "boost/fiber/fiber.hpp"
#include "boost/fiber/operations.hpp"
#include "doctest/doctest.h"
#include "runtime/waiting.h"
#include "runtime_test_util.h"
#include "test_job_types.h"

// The runtime's tests: CTest labels them "runtime", and runs them again on other pools and
// under ThreadSanitizer (tests/CMakeLists.txt).
TEST_SUITE_BEGIN("runtime");

namespace fairgate {
namespace {
namespace scheduler_test {

using namespace std::chrono_literals;
using testing::Eventually;
using testing::Gate;
using testing::TestClock;
using testing::Watchdog;

std::unique_ptr<Scheduler> Make(SchedulerOptions options = SchedulerOptions::Default()) {
  auto scheduler = Scheduler::Create(testing::WithPoolUnderTest(options));
  REQUIRE_MESSAGE(scheduler.ok(), scheduler.status().message());
  return *std::move(scheduler);
}

SchedulerOptions Capacity(int capacity, int worker_threads = 0) {
  SchedulerOptions options = SchedulerOptions::Default();
  options.rule.max_concurrency = capacity;
  options.runtime.worker_threads = worker_threads;
  return options;
}

using testing::Type;

Scheduler::JobFn Ok() {
  return [](const Context&) { return absl::OkStatus(); };
}

using testing::HoldUntil;

// A scheduler of one slot whose only job (type "t") runs until `hold` opens; `reported` is set
// when its completion callback is called.
std::unique_ptr<Scheduler> RunningOneHeldJob(Gate& hold, std::atomic<bool>& reported) {
  auto scheduler = Make(Capacity(1));
  REQUIRE(scheduler->RegisterType("t", Type(1, 1)).ok());
  REQUIRE(scheduler
              ->Submit({TypeName("t"), JobId("x")}, HoldUntil(hold),
                       [&](const Status&) { reported = true; })
              .ok());
  REQUIRE(Eventually([&] { return scheduler->Snapshot().running == 1; }));
  return scheduler;
}

TEST_CASE("Scheduler.Create.TakesItsOptionsByConcernWithDesignatedInitialisers") {
  Gate hold;  // outlives the scheduler, whose jobs wait on it
  const auto Ignore = [](const Status&) {};
  auto scheduler = Scheduler::Create(testing::WithPoolUnderTest({
      .rule = {.max_concurrency = 3, .max_pending_per_key = 1},
      .runtime = {.sweep_interval = Seconds(0.5)},
  }));
  REQUIRE(scheduler.ok());
  CHECK((*scheduler)->Snapshot().max_concurrency == 3);
  REQUIRE((*scheduler)->RegisterType("t", Type(1, 1)).ok());
  REQUIRE((*scheduler)
              ->Submit({TypeName("t"), JobId("a"), FairnessKey("k")}, HoldUntil(hold), Ignore)
              .ok());
  REQUIRE(Eventually([&] { return (*scheduler)->Snapshot().running == 1; }));
  // The rule's per-key bound is the one given: the key's second pending job is refused.
  REQUIRE((*scheduler)
              ->Submit({TypeName("t"), JobId("b"), FairnessKey("k")}, HoldUntil(hold), Ignore)
              .ok());
  CHECK((*scheduler)
            ->Submit({TypeName("t"), JobId("c"), FairnessKey("k")}, HoldUntil(hold), Ignore)
            .code() == absl::StatusCode::kResourceExhausted);
  hold.Open();
}

TEST_CASE("Scheduler.Create.RefusesBadOptions") {
  SchedulerOptions options;
  options.rule.alpha = 2;
  auto scheduler = Scheduler::Create(options);
  CHECK(scheduler.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(scheduler.status().message()).rfind("rule.alpha", 0) == 0);
}

TEST_CASE("Scheduler.RunSync.RunsFnOnTheCallerAndReturnsItsStatus") {
  Watchdog watchdog("RunSync on caller", 60s);
  auto scheduler = Make();
  REQUIRE(scheduler->RegisterType("clone", Type(8, 8)).ok());
  std::thread::id ran_on;
  Status s = scheduler->RunSync(Context::Background(),
                                {TypeName("clone"), JobId("linux"), FairnessKey("client")},
                                [&](const Context&) {
                                  ran_on = std::this_thread::get_id();
                                  return absl::NotFoundError("no such ref");
                                });
  CHECK(ran_on == std::this_thread::get_id());
  CHECK(s == absl::NotFoundError("no such ref"));
  CHECK(scheduler->Snapshot().running == 0);
  CHECK(scheduler->AccumulatedCost("client").has_value());
}

TEST_CASE("Scheduler.RunSync.BadInputIsRefusedWithoutRunning") {
  auto scheduler = Make();
  REQUIRE(scheduler->RegisterType("clone", Type(8, 8)).ok());
  bool ran = false;
  auto fn = [&](const Context&) {
    ran = true;
    return absl::OkStatus();
  };
  CHECK(scheduler
            ->RunSync(Context::Background(), {TypeName("nope"), JobId("x"), FairnessKey("k")}, fn)
            .code() == absl::StatusCode::kNotFound);
  CHECK(scheduler
            ->RunSync(Context::Background(), {TypeName("clone"), JobId(""), FairnessKey("k")}, fn)
            .code() == absl::StatusCode::kInvalidArgument);
  CHECK(scheduler
            ->RunSync(Context::Background(), {TypeName("clone"), JobId("x"), FairnessKey("k")},
                      nullptr)
            .code() == absl::StatusCode::kInvalidArgument);
  auto [done, cancel] = WithCancel(Context::Background());
  cancel();
  CHECK(scheduler->RunSync(done, {TypeName("clone"), JobId("x"), FairnessKey("k")}, fn).code() ==
        absl::StatusCode::kCancelled);
  CHECK(scheduler->Submit({TypeName("nope"), JobId("x")}, Ok()).code() ==
        absl::StatusCode::kNotFound);
  CHECK(scheduler->Submit({TypeName("clone"), JobId("x")}, nullptr).code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(scheduler->RegisterType("", Type(1, 1)).code() == absl::StatusCode::kInvalidArgument);
  CHECK(scheduler->RegisterType("gc", Type(0, 1)).code() == absl::StatusCode::kInvalidArgument);
  CHECK(scheduler->RegisterType("clone", Type(8, 8)).ok());  // the same config again
  CHECK(scheduler->RegisterType("clone", Type(8, 2)).code() == absl::StatusCode::kAlreadyExists);
  CHECK_FALSE(ran);
  CHECK(scheduler->Snapshot().pending == 0);
}

// Records the status of each job's kCancel event: a job cancelled (or timed out) while pending.
class CancelRecorder : public Observer {
 public:
  void OnEvent(const JobEvent& e) override {
    if (e.kind != JobEvent::Kind::kCancel) return;
    std::lock_guard lock(mutex_);
    cancelled_.emplace_back(e.id, e.status.code());
  }
  std::vector<std::pair<std::string, absl::StatusCode>> cancelled() {
    std::lock_guard lock(mutex_);
    return cancelled_;
  }

 private:
  std::mutex mutex_;
  std::vector<std::pair<std::string, absl::StatusCode>> cancelled_;
};

TEST_CASE("Scheduler.RunSync.CancelledOrTimedOutWhilePendingReturnsAtOnceUncharged") {
  for (bool timeout : {false, true}) {
    CAPTURE(timeout);
    Watchdog watchdog("RunSync cancel while pending", 60s);
    auto recorder = std::make_shared<CancelRecorder>();
    SchedulerOptions options = Capacity(1);
    options.runtime.observers.push_back(recorder);
    auto scheduler = Make(options);
    REQUIRE(scheduler->RegisterType("clone", Type(1, 1, "", 5)).ok());
    Gate hold;
    std::thread holder([&] {
      CHECK(scheduler
                ->RunSync(Context::Background(), {TypeName("clone"), JobId("a"), FairnessKey("a")},
                          HoldUntil(hold))
                .ok());
    });
    REQUIRE(Eventually([&] { return scheduler->Snapshot().running == 1; }));

    auto [cancellable, cancel] = WithCancel(Context::Background());
    bool ran = false;
    Status result;
    std::thread waiter([&, cancellable = cancellable] {
      // The timeout starts here, so that the call is made long before it ends; whether the job
      // was pending when it ended is told by its cancel event below, not by polling for a state
      // that the timer ends.
      Context ctx = timeout ? WithTimeout(Context::Background(), 300ms).first : cancellable;
      result = scheduler->RunSync(ctx, {TypeName("clone"), JobId("b"), FairnessKey("b")},
                                  [&](const Context&) {
                                    ran = true;
                                    return absl::OkStatus();
                                  });
    });
    if (!timeout) {
      REQUIRE(Eventually([&] { return scheduler->Snapshot().pending == 1; }));
      cancel();
    }
    waiter.join();  // returns while the slot is still held: it did not wait for admission
    const absl::StatusCode expected =
        timeout ? absl::StatusCode::kDeadlineExceeded : absl::StatusCode::kCancelled;
    CHECK(result.code() == expected);
    CHECK_FALSE(ran);
    // It ended while pending: the scheduler told of a cancelled pending job, with the reason.
    REQUIRE(Eventually([&] { return !recorder->cancelled().empty(); }));
    CHECK(recorder->cancelled() ==
          std::vector<std::pair<std::string, absl::StatusCode>>{{"b", expected}});
    CHECK(scheduler->Snapshot().pending == 0);
    CHECK(scheduler->Snapshot().running == 1);
    CHECK(scheduler->AccumulatedCost("b") == 0.0);  // never charged
    hold.Open();
    holder.join();
  }
}

TEST_CASE("Scheduler.RunSync.ReturnsOnlyAfterFnReturnedEvenWhenCancelledWhileRunning") {
  Watchdog watchdog("RunSync cancel while running", 60s);
  auto scheduler = Make();
  REQUIRE(scheduler->RegisterType("clone", Type(8, 8)).ok());
  auto [ctx, cancel] = WithCancel(Context::Background());
  std::atomic<bool> started{false}, finished{false};
  std::thread caller([&, ctx = ctx] {
    Status s = scheduler->RunSync(ctx, {TypeName("clone"), JobId("x"), FairnessKey("k")},
                                  [&](const Context& job_ctx) {
                                    started = true;
                                    job_ctx.Wait();  // sees the cancellation
                                    std::this_thread::sleep_for(10ms);
                                    finished = true;
                                    return job_ctx.Err();
                                  });
    CHECK(finished);
    CHECK(s.code() == absl::StatusCode::kCancelled);
  });
  REQUIRE(Eventually([&] { return started.load(); }));
  cancel();
  caller.join();
}

// A RunAsync's function and callback, recorded: the status `done` was told lands in `told`.
struct AsyncCall {
  std::atomic<int> runs{0};
  std::atomic<int> dones{0};
  std::thread::id ran_on;
  std::promise<Status> told;
  Scheduler::JobFn Fn(Status status = absl::OkStatus()) {
    return [this, status](const Context&) {
      ran_on = std::this_thread::get_id();
      ++runs;
      return status;
    };
  }
  Scheduler::DoneCallback Done() {
    return [this](const Status& s) {
      if (++dones == 1) told.set_value(s);
    };
  }
};

TEST_CASE("Scheduler.RunAsync.ReturnsAtOnceRunsFnOnThePoolAndTellsDoneOnce") {
  Watchdog watchdog("RunAsync", 60s);
  Gate hold;
  std::atomic<bool> reported{false};
  auto scheduler = RunningOneHeldJob(hold, reported);
  AsyncCall call;
  REQUIRE(scheduler
              ->RunAsync(Context::Background(), {TypeName("t"), JobId("y"), FairnessKey("k")},
                         call.Fn(absl::NotFoundError("no such ref")), call.Done())
              .ok());
  // Returned while the only slot is held: queued, not run, not told.
  CHECK(scheduler->Snapshot().pending == 1);
  CHECK(call.runs == 0);
  CHECK(call.dones == 0);
  hold.Open();
  CHECK(call.told.get_future().get() == absl::NotFoundError("no such ref"));
  CHECK(call.runs == 1);
  CHECK(call.ran_on != std::this_thread::get_id());
  CHECK(call.dones == 1);
  CHECK(scheduler->AccumulatedCost("k").has_value());
  REQUIRE(scheduler->Drain(Context::Background()).ok());
  CHECK(call.dones == 1);
}

TEST_CASE("Scheduler.RunAsync.BadInputIsRefusedAndDoneIsNeverCalled") {
  auto scheduler = Make();
  REQUIRE(scheduler->RegisterType("clone", Type(8, 8)).ok());
  AsyncCall call;
  const JobName job{TypeName("clone"), JobId("x"), FairnessKey("k")};
  CHECK(scheduler
            ->RunAsync(Context::Background(), {TypeName("nope"), JobId("x"), FairnessKey("k")},
                       call.Fn(), call.Done())
            .code() == absl::StatusCode::kNotFound);
  CHECK(scheduler
            ->RunAsync(Context::Background(), {TypeName("clone"), JobId(""), FairnessKey("k")},
                       call.Fn(), call.Done())
            .code() == absl::StatusCode::kInvalidArgument);
  CHECK(scheduler->RunAsync(Context::Background(), job, nullptr, call.Done()).code() ==
        absl::StatusCode::kInvalidArgument);
  auto [done, cancel] = WithCancel(Context::Background());
  cancel();
  CHECK(scheduler->RunAsync(done, job, call.Fn(), call.Done()).code() ==
        absl::StatusCode::kCancelled);
  // A deadline already past is refused with it.
  CHECK(scheduler
            ->RunAsync(WithTimeout(Context::Background(), -1s).first, job, call.Fn(), call.Done())
            .code() == absl::StatusCode::kDeadlineExceeded);
  REQUIRE(scheduler->Drain(Context::Background()).ok());
  CHECK(call.runs == 0);
  CHECK(call.dones == 0);
  CHECK(scheduler->Snapshot().types[0].enqueued == 0);
}

TEST_CASE("Scheduler.RunAsync.CancelledWhilePendingIsToldAtOnceUncharged") {
  Watchdog watchdog("RunAsync cancel while pending", 60s);
  Gate hold;
  std::atomic<bool> reported{false};
  auto scheduler = RunningOneHeldJob(hold, reported);
  auto [ctx, cancel] = WithCancel(Context::Background());
  AsyncCall call;
  REQUIRE(scheduler
              ->RunAsync(ctx, {TypeName("t"), JobId("b"), FairnessKey("b")}, call.Fn(), call.Done())
              .ok());
  REQUIRE(scheduler->Snapshot().pending == 1);
  cancel();
  // Told while the slot is still held: it did not wait for an admission.
  CHECK(call.told.get_future().get().code() == absl::StatusCode::kCancelled);
  CHECK(scheduler->Snapshot().pending == 0);
  CHECK(scheduler->Snapshot().running == 1);
  CHECK(scheduler->AccumulatedCost("b") == 0.0);  // never charged
  hold.Open();
  REQUIRE(scheduler->Drain(Context::Background()).ok());
  CHECK(call.runs == 0);
  CHECK(call.dones == 1);
}

// A context's deadline is watched while the call waits (by the scheduler's timer: nobody else
// would), and no longer once the job is admitted: a call admitted before its deadline runs its
// function and is told its status, as a RunSync caller would be.
TEST_CASE("Scheduler.RunAsync.ADeadlineEndsTheWaitUnchargedAndNotTheRun") {
  Watchdog watchdog("RunAsync deadline", 60s);
  Gate hold;
  std::atomic<bool> reported{false};
  auto scheduler = RunningOneHeldJob(hold, reported);
  AsyncCall late, patient;
  const Status accepted =
      scheduler->RunAsync(WithTimeout(Context::Background(), 200ms).first,
                          {TypeName("t"), JobId("b"), FairnessKey("b")}, late.Fn(), late.Done());
  // Queued, or refused with its deadline if that passed first: told DeadlineExceeded either way.
  if (accepted.ok()) {
    CHECK(late.told.get_future().get().code() == absl::StatusCode::kDeadlineExceeded);
  } else {
    CHECK(accepted.code() == absl::StatusCode::kDeadlineExceeded);
  }
  CHECK(scheduler->Snapshot().pending == 0);
  CHECK(scheduler->Snapshot().running == 1);  // the held job: the wait ended without a slot
  CHECK(scheduler->AccumulatedCost("b").value_or(0) == 0.0);
  REQUIRE(scheduler
              ->RunAsync(WithTimeout(Context::Background(), 3600s).first,
                         {TypeName("t"), JobId("c"), FairnessKey("c")},
                         patient.Fn(absl::AbortedError("ran")), patient.Done())
              .ok());
  hold.Open();
  CHECK(patient.told.get_future().get() == absl::AbortedError("ran"));
  REQUIRE(scheduler->Drain(Context::Background()).ok());
  CHECK(late.runs == 0);
  CHECK(late.dones == (accepted.ok() ? 1 : 0));
  CHECK(patient.runs == 1);
  CHECK(patient.dones == 1);
}

TEST_CASE("Scheduler.RunAsync.AShutdownTellsAPendingCallCancelled") {
  Watchdog watchdog("RunAsync shutdown", 60s);
  Gate hold;
  std::atomic<bool> reported{false};
  auto scheduler = RunningOneHeldJob(hold, reported);
  AsyncCall call;
  REQUIRE(scheduler
              ->RunAsync(Context::Background(), {TypeName("t"), JobId("b"), FairnessKey("b")},
                         call.Fn(), call.Done())
              .ok());
  REQUIRE(scheduler->Snapshot().pending == 1);
  std::thread shutter([&] { CHECK(scheduler->Shutdown(Context::Background()).ok()); });
  CHECK(call.told.get_future().get().code() == absl::StatusCode::kCancelled);
  hold.Open();
  shutter.join();
  CHECK(call.runs == 0);
  CHECK(call.dones == 1);
  CHECK(scheduler
            ->RunAsync(Context::Background(), {TypeName("t"), JobId("c"), FairnessKey("b")},
                       call.Fn(), call.Done())
            .code() == absl::StatusCode::kUnavailable);
}

// Fibers only: the thread runtime (TSan build) has none.
TEST_CASE("Scheduler.RunSync.ManyFibersOnOneThreadWaitWithoutBlockingEachOther" *
          doctest::skip(internal::kThreadRuntime)) {
  for (int capacity : {1, 2, 4}) {
    CAPTURE(capacity);
    Watchdog watchdog("RunSync from fibers", 60s);
    auto scheduler = Make(Capacity(capacity));
    REQUIRE(scheduler->RegisterType("clone", Type(8, 8)).ok());
    std::atomic<int> running{0}, max_running{0}, ok{0};
    std::vector<boost::fibers::fiber> fibers;
    for (int i = 0; i < 50; ++i) {
      fibers.emplace_back([&, i] {
        Status s = scheduler->RunSync(
            Context::Background(),
            {TypeName("clone"), JobId("r" + std::to_string(i)),
             FairnessKey("k" + std::to_string(i % 5))},
            [&](const Context&) {
              const int now = ++running;
              int seen = max_running.load();
              while (now > seen && !max_running.compare_exchange_weak(seen, now)) {
              }
              boost::this_fiber::yield();  // let the other fibers of this thread run
              --running;
              return absl::OkStatus();
            });
        if (s.ok()) ++ok;
      });
    }
    for (auto& f : fibers) f.join();
    CHECK(ok == 50);
    CHECK(max_running <= capacity);
    CHECK(max_running == capacity);  // the fibers did overlap: waiting suspended only the fiber
  }
}

TEST_CASE("Scheduler.Exceptions.BecomeInternalAndTheSlotIsReleased") {
  Watchdog watchdog("exceptions", 60s);
  auto scheduler = Make(Capacity(1));
  REQUIRE(scheduler->RegisterType("t", Type(1, 1)).ok());
  Status s =
      scheduler->RunSync(Context::Background(), {TypeName("t"), JobId("x"), FairnessKey("k")},
                         [](const Context&) -> Status { throw std::runtime_error("boom"); });
  CHECK(s == absl::InternalError("job function threw: boom"));
  s = scheduler->RunSync(Context::Background(), {TypeName("t"), JobId("x"), FairnessKey("k")},
                         [](const Context&) -> Status { throw 42; });
  CHECK(s.code() == absl::StatusCode::kInternal);
  std::promise<Status> background;
  REQUIRE(scheduler
              ->Submit(
                  {TypeName("t"), JobId("y")},
                  [](const Context&) -> Status { throw std::logic_error("bad"); },
                  [&](const Status& st) { background.set_value(st); })
              .ok());
  CHECK(background.get_future().get() == absl::InternalError("job function threw: bad"));
  // The slot is free again.
  CHECK(
      scheduler->RunSync(Context::Background(), {TypeName("t"), JobId("z"), FairnessKey("k")}, Ok())
          .ok());
  // A throwing completion callback is contained.
  std::atomic<bool> after{false};
  REQUIRE(
      scheduler->Submit({TypeName("t"), JobId("w")}, Ok(), [](const Status&) { throw 1; }).ok());
  REQUIRE(scheduler->Submit({TypeName("t"), JobId("v")}, Ok(), [&](const Status&) { after = true; })
              .ok());
  CHECK(Eventually([&] { return after.load(); }));
}

TEST_CASE("Scheduler.Submit.RunsOnThePoolAndReportsOnceThroughTheCallback") {
  for (int threads : {1, 2, 4, 8}) {
    CAPTURE(threads);
    Watchdog watchdog("Submit", 60s);
    auto scheduler = Make(Capacity(4, threads));
    REQUIRE(scheduler->RegisterType("fetch", Type(4, 4)).ok());
    std::mutex mutex;
    std::vector<int> reported(100, 0);
    std::atomic<int> ran{0};
    const auto caller = std::this_thread::get_id();
    for (int i = 0; i < 100; ++i) {
      REQUIRE(scheduler
                  ->Submit(
                      {TypeName("fetch"), JobId("r" + std::to_string(i % 10))},
                      [&, i](const Context&) {
                        CHECK(std::this_thread::get_id() != caller);
                        ++ran;
                        return i % 2 ? absl::OkStatus() : absl::AbortedError("odd");
                      },
                      [&, i](const Status& s) {
                        std::unique_lock lock(mutex);
                        reported[i] += 1;
                        CHECK(s.ok() == (i % 2 == 1));
                      })
                  .ok());
    }
    REQUIRE(scheduler->Drain(Context::Background()).ok());
    CHECK(ran == 100);
    CHECK(std::all_of(reported.begin(), reported.end(), [](int n) { return n == 1; }));
  }
}

// fairgate names the threads it starts for their role ("fg-" first), so that a server's own
// threads and fairgate's are told apart in top -H, gdb and perf (runtime/thread_name.h).
TEST_CASE("Scheduler.Submit.RunsOnThreadsNamedForFairgatesWorkers") {
  Watchdog watchdog("Submit", 60s);
  auto scheduler = Make(Capacity(2));
  REQUIRE(scheduler->RegisterType("fetch", Type(2, 2)).ok());
  std::promise<std::string> name;
  REQUIRE(scheduler
              ->Submit({TypeName("fetch"), JobId("r")},
                       [&](const Context&) {
                         char buffer[16] = {};
                         pthread_getname_np(pthread_self(), buffer, sizeof buffer);
                         name.set_value(buffer);
                         return absl::OkStatus();
                       })
              .ok());
  CHECK(name.get_future().get() == "fg-worker");
}

TEST_CASE("Scheduler.Submit.JobsBlockingTheirThreadUpToTheCapsAllRunAtOnce") {
  // Caps of 8 and 8 jobs that each block their thread in a system call until all 8 are in:
  // possible only if the pool gives each its own thread.
  Watchdog watchdog("blocking jobs", 60s);
  // A thread per slot, as the default gives, whatever pool the other tests run on.
  auto scheduler = Make(Capacity(8, 8));
  REQUIRE(scheduler->RegisterType("repack", Type(8, 8)).ok());
  std::mutex mutex;
  std::condition_variable cv;
  int inside = 0;
  std::atomic<int> saw_all{0};
  for (int i = 0; i < 8; ++i) {
    REQUIRE(scheduler
                ->Submit({TypeName("repack"), JobId("r" + std::to_string(i))},
                         [&](const Context&) {
                           std::unique_lock lock(mutex);  // a plain mutex: blocks the thread
                           ++inside;
                           cv.notify_all();
                           if (cv.wait_for(lock, 20s, [&] { return inside == 8; })) ++saw_all;
                           return absl::OkStatus();
                         })
                .ok());
  }
  REQUIRE(scheduler->Drain(Context::Background()).ok());
  CHECK(saw_all == 8);
}

double ProcessCpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_utime.tv_sec + usage.ru_stime.tv_sec +
         (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

// Fibers only: in the thread runtime a chain holds its thread, and posted jobs go to the others.
TEST_CASE("Scheduler.Pool.AChainOfBackgroundJobsDoesNotStarveJobsPostedToItsThread" *
          doctest::skip(internal::kThreadRuntime)) {
  // One worker thread. A long queue of "a" jobs runs as a chain on it: each completion admits
  // the next, which runs on the same fiber. A RunSync completion on this thread admits the
  // background job "s", which is posted to the pool: it must start while the chain goes on.
  Watchdog watchdog("chain starvation", 60s);
  SchedulerOptions options = Capacity(2, 1);
  auto scheduler = Make(options);
  REQUIRE(scheduler->RegisterType("a", Type(2, 1)).ok());
  REQUIRE(scheduler->RegisterType("s", Type(2, 1)).ok());
  constexpr int kChain = 10000;
  std::atomic<int> a_done{0};
  std::atomic<int> a_done_when_s_started{-1};
  for (int i = 0; i < kChain; ++i) {
    REQUIRE(scheduler
                ->Submit({TypeName("a"), JobId("x")},
                         [&](const Context&) {
                           const auto until = std::chrono::steady_clock::now() + 20us;
                           while (a_done_when_s_started < 0 &&
                                  std::chrono::steady_clock::now() < until) {
                           }
                           ++a_done;
                           return absl::OkStatus();
                         })
                .ok());
  }
  REQUIRE(Eventually([&] { return a_done > 0; }));
  REQUIRE(scheduler
              ->RunSync(Context::Background(), {TypeName("s"), JobId("y"), FairnessKey("k")},
                        [&](const Context&) {
                          // Queued behind this job, which holds the type's one slot.
                          return scheduler->Submit({TypeName("s"), JobId("y")},
                                                   [&](const Context&) {
                                                     a_done_when_s_started = a_done.load();
                                                     return absl::OkStatus();
                                                   });
                        })
              .ok());
  REQUIRE(Eventually([&] { return a_done_when_s_started >= 0; }));
  CHECK(a_done_when_s_started < kChain);
  REQUIRE(scheduler->Drain(Context::Background()).ok());
  CHECK(a_done == kChain);
}

TEST_CASE("Scheduler.Pool.AnIdlePoolUsesNoCpu") {
  auto scheduler = Make(Capacity(8));
  REQUIRE(scheduler->RegisterType("t", Type(1, 1)).ok());
  REQUIRE(
      scheduler->RunSync(Context::Background(), {TypeName("t"), JobId("x"), FairnessKey("k")}, Ok())
          .ok());
  const double before = ProcessCpuSeconds();
  std::this_thread::sleep_for(300ms);
  const double used = ProcessCpuSeconds() - before;
  // Eight idle workers and a sweeper waking every second: a spinning pool would use the 300 ms
  // of both cores; a sleeping one uses next to nothing.
  CHECK(used < 0.05);
}

TEST_CASE("Scheduler.Pool.SeveralSchedulersLiveInOneProcess") {
  Watchdog watchdog("several schedulers", 60s);
  std::vector<std::unique_ptr<Scheduler>> schedulers;
  std::atomic<int> done{0};
  for (int i = 0; i < 4; ++i) {
    schedulers.push_back(Make(Capacity(2, 2)));
    REQUIRE(schedulers.back()->RegisterType("t", Type(2, 2)).ok());
  }
  for (auto& s : schedulers) {
    for (int j = 0; j < 20; ++j) {
      REQUIRE(s->Submit({TypeName("t"), JobId(std::to_string(j))}, Ok(), [&](const Status&) {
                 ++done;
               }).ok());
    }
  }
  schedulers.clear();  // each destructor drains nothing more but waits for its jobs
  CHECK(done == 80);
}

TEST_CASE("Scheduler.Shutdown.FailsPendingJobsAndWaitsForRunningOnes") {
  Watchdog watchdog("shutdown", 60s);
  auto scheduler = Make(Capacity(1));
  REQUIRE(scheduler->RegisterType("t", Type(1, 1)).ok());
  Gate hold;
  std::atomic<bool> running_saw_cancel{false};
  REQUIRE(scheduler
              ->Submit(
                  {TypeName("t"), JobId("running")},
                  [&](const Context& ctx) {
                    hold.Wait();
                    running_saw_cancel = ctx.Done();
                    return absl::OkStatus();
                  },
                  nullptr)
              .ok());
  REQUIRE(Eventually([&] { return scheduler->Snapshot().running == 1; }));
  Status sync_result;
  std::thread sync_caller([&] {
    sync_result = scheduler->RunSync(
        Context::Background(), {TypeName("t"), JobId("pending-sync"), FairnessKey("k")}, Ok());
  });
  std::promise<Status> async_result;
  REQUIRE(scheduler
              ->Submit({TypeName("t"), JobId("pending-async")}, Ok(),
                       [&](const Status& s) { async_result.set_value(s); })
              .ok());
  REQUIRE(Eventually([&] { return scheduler->Snapshot().pending == 2; }));

  std::atomic<bool> shut{false};
  std::thread shutter([&] {
    CHECK(scheduler->Shutdown(Context::Background()).ok());
    shut = true;
  });
  sync_caller.join();
  CHECK(sync_result.code() == absl::StatusCode::kCancelled);
  CHECK(async_result.get_future().get().code() == absl::StatusCode::kCancelled);
  CHECK_FALSE(shut);  // still waiting for the running job
  CHECK(scheduler
            ->RunSync(Context::Background(), {TypeName("t"), JobId("late"), FairnessKey("k")}, Ok())
            .code() == absl::StatusCode::kUnavailable);
  CHECK(scheduler->Submit({TypeName("t"), JobId("late")}, Ok()).code() ==
        absl::StatusCode::kUnavailable);
  hold.Open();
  shutter.join();
  CHECK(shut);
  CHECK(running_saw_cancel);  // Submit jobs' context is cancelled at shutdown
  CHECK(scheduler->Shutdown(Context::Background()).ok());  // idempotent
}

TEST_CASE("Scheduler.Shutdown.ReturnsTheContextErrorWhenJobsOutlastIt") {
  Watchdog watchdog("shutdown timeout", 60s);
  Gate hold;
  std::atomic<bool> reported{false};
  auto scheduler = RunningOneHeldJob(hold, reported);
  auto [ctx, cancel] = WithTimeout(Context::Background(), 20ms);
  CHECK(scheduler->Shutdown(ctx).code() == absl::StatusCode::kDeadlineExceeded);
  CHECK_FALSE(reported);
  hold.Open();
  scheduler.reset();  // the destructor waits for the job
  CHECK(reported);
}

TEST_CASE("Scheduler.Shutdown.ReturnsOnceItsJobsAreDoneWhileRefusedCallsKeepArriving") {
  // A server still taking requests while it shuts down: every call after Shutdown began is
  // refused, but each passes through the scheduler. Shutdown waits for the jobs it accepted,
  // not for a moment when no refused call happens to be under way (which callers that keep
  // coming can put off for ever).
  Watchdog watchdog("shutdown under refused calls", 120s);
  Gate hold;
  std::atomic<bool> reported{false};
  auto scheduler = RunningOneHeldJob(hold, reported);
  std::atomic<bool> shut{false};
  std::atomic<long> refused{0};
  std::vector<std::thread> callers;
  for (int i = 0; i < 8; ++i) {
    callers.emplace_back([&, i] {
      while (!shut) {
        if (scheduler
                ->RunSync(Context::Background(),
                          {TypeName("t"), JobId(std::to_string(i)), FairnessKey("k")}, Ok())
                .code() == absl::StatusCode::kUnavailable) {
          ++refused;
        }
      }
    });
  }
  Status result;
  std::thread shutter([&] {
    // Generous: the job ends at once when the gate opens; only a Shutdown starved by the
    // refused calls reaches this deadline.
    auto [ctx, cancel] = WithTimeout(Context::Background(), 30s);
    result = scheduler->Shutdown(ctx);
    shut = true;
  });
  REQUIRE(Eventually([&] { return refused > 1000; }));
  hold.Open();
  shutter.join();
  for (auto& caller : callers) caller.join();
  CHECK(result.ok());
  CHECK(reported);
}

TEST_CASE("Scheduler.Drain.RunsEverythingPendingFirst") {
  Watchdog watchdog("drain", 60s);
  auto scheduler = Make(Capacity(1));
  REQUIRE(scheduler->RegisterType("t", Type(1, 1)).ok());
  std::atomic<int> ok{0};
  for (int i = 0; i < 20; ++i) {
    REQUIRE(scheduler
                ->Submit({TypeName("t"), JobId(std::to_string(i))}, Ok(),
                         [&](const Status& s) { ok += s.ok(); })
                .ok());
  }
  CHECK(scheduler->Drain(Context::Background()).ok());
  CHECK(ok == 20);
  CHECK(scheduler->Submit({TypeName("t"), JobId("late")}, Ok()).code() ==
        absl::StatusCode::kUnavailable);
}

TEST_CASE("Scheduler.Destructor.ReportsEveryAcceptedJobExactlyOnce") {
  Watchdog watchdog("destructor", 60s);
  std::atomic<int> reports{0}, ran{0};
  {
    auto scheduler = Make(Capacity(2));
    REQUIRE(scheduler->RegisterType("t", Type(2, 2)).ok());
    for (int i = 0; i < 200; ++i) {
      REQUIRE(scheduler
                  ->Submit(
                      {TypeName("t"), JobId(std::to_string(i))},
                      [&](const Context&) {
                        ++ran;
                        return absl::OkStatus();
                      },
                      [&](const Status&) { ++reports; })
                  .ok());
    }
  }
  CHECK(reports == 200);
  CHECK(ran <= 200);
}

TEST_CASE("Scheduler.Limits.FullQueuesAnswerResourceExhausted") {
  SchedulerOptions options = Capacity(1);
  options.rule.max_pending_per_key = 1;
  auto scheduler = Make(options);
  REQUIRE(scheduler->RegisterType("t", Type(1, 1)).ok());
  Gate hold;
  REQUIRE(scheduler->Submit({TypeName("t"), JobId("a")}, HoldUntil(hold)).ok());
  REQUIRE(Eventually([&] { return scheduler->Snapshot().running == 1; }));
  REQUIRE(scheduler->Submit({TypeName("t"), JobId("b")}, Ok()).ok());
  CHECK(scheduler->Submit({TypeName("t"), JobId("c")}, Ok()).code() ==
        absl::StatusCode::kResourceExhausted);
  CHECK(scheduler->RunSync(Context::Background(), {TypeName("t"), JobId("d")}, Ok()).code() ==
        absl::StatusCode::kResourceExhausted);
  hold.Open();
}

// A seed-mode scheduler (no reconciliation: a charge stays) with alpha 0.5, on a clock that only
// its jobs move, with a type "clone" of default cost 10.
struct LearningScheduler {
  explicit LearningScheduler(double start) : clock(start) {
    SchedulerOptions options = SchedulerOptions::Seed();
    options.rule.alpha = 0.5;
    options.runtime.clock = clock.Fn();
    scheduler = Make(options);
    REQUIRE(scheduler->RegisterType("clone", Type(8, 8, "", 10)).ok());
  }
  TestClock clock;
  std::unique_ptr<Scheduler> scheduler;
};

TEST_CASE("Scheduler.Estimates.LearnFromTheWallTimeOfTheInjectedClock") {
  LearningScheduler learning(100.0);
  Scheduler* scheduler = learning.scheduler.get();
  auto takes = [&](double seconds) { return learning.clock.Takes(seconds); };
  REQUIRE(scheduler
              ->RunSync(Context::Background(),
                        {TypeName("clone"), JobId("linux"), FairnessKey("a")}, takes(30))
              .ok());
  CHECK(scheduler->Estimate(TypeName("clone"), JobId("linux")) == 20.0);  // 0.5 * 30 + 0.5 * 10
  REQUIRE(scheduler
              ->RunSync(Context::Background(),
                        {TypeName("clone"), JobId("linux"), FairnessKey("a")}, takes(4))
              .ok());
  CHECK(scheduler->Estimate(TypeName("clone"), JobId("linux")) == 12.0);
  CHECK(scheduler->AccumulatedCost("a") == 30.0);  // charged 10, then the learned 20
  // A clock that steps backwards counts as zero.
  REQUIRE(scheduler
              ->RunSync(Context::Background(),
                        {TypeName("clone"), JobId("linux"), FairnessKey("a")}, takes(-50))
              .ok());
  CHECK(scheduler->Estimate(TypeName("clone"), JobId("linux")) == 6.0);
}

TEST_CASE("Scheduler.RegisterType.WarnsOnceOfCapsThatDisagree") {
  auto warnings = std::make_shared<std::vector<std::string>>();
  SchedulerOptions options = Capacity(8);
  options.runtime.warn = [warnings](std::string_view w) { warnings->emplace_back(w); };
  auto scheduler = Make(options);
  // Consistent: no warning.
  REQUIRE(scheduler->RegisterType("clone", Type(8, 8)).ok());
  CHECK(warnings->empty());
  // The newcomer's trap: priority 1 is a tier whose cap is one slot.
  REQUIRE(scheduler->RegisterType("gc", Type(1, 4)).ok());
  REQUIRE(warnings->size() == 1);
  CHECK(warnings->at(0).find("'gc'") != std::string::npos);
  CHECK(warnings->at(0).find("at most 1 of its jobs") != std::string::npos);
  // The default rule lends idle slots (RuleOptions::lending), and the warning says how far.
  CHECK(warnings->at(0).find("more run only as borrowers of idle slots (rule.lending)") !=
        std::string::npos);
  // Registering it again is a no-op, and says nothing again.
  REQUIRE(scheduler->RegisterType("gc", Type(1, 4)).ok());
  CHECK(warnings->size() == 1);
  // The defaults: no cap of its own, and the lowest tier, which lends: nothing to say
  // (Scheduler.Lending.ATypeRegisteredWithTheDefaultsRunsOnTheIdleSlotsButTheOneKeptBack).
  warnings->clear();
  REQUIRE(scheduler->RegisterType("plain", {}).ok());
  CHECK(warnings->empty());
  // Without lending, one job at a time: said so.
  SchedulerOptions strict = options;
  strict.rule.lending.reset();
  auto without_lending = Make(strict);
  REQUIRE(without_lending->RegisterType("plain", {}).ok());
  REQUIRE(warnings->size() == 1);
  CHECK(warnings->at(0) ==
        "job type 'plain': runs one job at a time (priority 1, the default, is its tier's cap in "
        "slots, and the rule's tiers do not lend), though the scheduler has 8 slots; give it a "
        "priority at least the jobs it should run at once");
  warnings->clear();
  REQUIRE(without_lending->RegisterType("costly", {.default_cost = 30}).ok());
  CHECK(warnings->size() == 1);
  // A type that sets anything else is taken as meant: one repack at a time in its group.
  warnings->clear();
  REQUIRE(scheduler->RegisterType("repack-alone", Type(1, 1, "git")).ok());
  CHECK(warnings->empty());
  // A tier cap above the global cap, and a type cap the global cap cuts.
  warnings->clear();
  REQUIRE(scheduler->RegisterType("bulk", Type(16, 12)).ok());
  REQUIRE(warnings->size() == 2);
  CHECK(warnings->at(0).find("global cap (max_concurrency 8") != std::string::npos);
  CHECK(warnings->at(0).find("at most 8 of its jobs") != std::string::npos);
  CHECK(warnings->at(1).find("never has more than 8 slots") != std::string::npos);
  // Wide jobs count their slots: 3 jobs of 2 slots do not fit a tier of 4.
  warnings->clear();
  JobTypeConfig wide = Type(4, 3);
  wide.slots = 2;
  REQUIRE(scheduler->RegisterType("repack", wide).ok());
  REQUIRE(warnings->size() == 1);
  CHECK(warnings->at(0).find("at most 2 of its jobs") != std::string::npos);
  // A refused registration warns of nothing.
  warnings->clear();
  CHECK(scheduler->RegisterType("bad", Type(0, 4)).code() == absl::StatusCode::kInvalidArgument);
  CHECK(warnings->empty());
}

TEST_CASE("Scheduler.CostHint.IsChargedInsteadOfTheEstimateWhichStillLearns") {
  LearningScheduler learning(0.0);
  Scheduler* scheduler = learning.scheduler.get();
  auto takes = [&](double seconds) { return learning.clock.Takes(seconds); };
  // RunSync: charged the hint 100, not the default 10; the estimate learns the run time 30.
  REQUIRE(scheduler
              ->RunSync(Context::Background(),
                        {TypeName("clone"), JobId("linux"), FairnessKey("a")}, takes(30),
                        {.cost = 100})
              .ok());
  CHECK(scheduler->AccumulatedCost("a") == 100.0);
  CHECK(scheduler->Estimate(TypeName("clone"), JobId("linux")) == 20.0);  // 0.5 * 30 + 0.5 * 10
  // Submit: charged the hint 7, not the learned 20.
  std::promise<Status> done;
  REQUIRE(scheduler
              ->Submit({TypeName("clone"), JobId("linux"), FairnessKey("b")}, takes(0),
                       [&](const Status& s) { done.set_value(s); }, {.cost = 7})
              .ok());
  REQUIRE(done.get_future().get().ok());
  CHECK(scheduler->AccumulatedCost("b") == 7.0);
  // Acquire: charged the hint 0.5.
  std::promise<StatusOr<Permit>> granted;
  REQUIRE(scheduler
              ->Acquire(Context::Background(),
                        {TypeName("clone"), JobId("linux"), FairnessKey("c")},
                        [&](StatusOr<Permit> p) { granted.set_value(std::move(p)); }, {.cost = 0.5})
              .ok());
  StatusOr<Permit> permit = granted.get_future().get();
  REQUIRE(permit.ok());
  CHECK(scheduler->AccumulatedCost("c") == 0.5);
  permit->Release(absl::OkStatus());
  // Without a hint the estimate is charged again: it learned the two zero-second runs,
  // 20 -> 10 -> 5.
  REQUIRE(scheduler
              ->RunSync(Context::Background(),
                        {TypeName("clone"), JobId("linux"), FairnessKey("d")}, Ok())
              .ok());
  CHECK(scheduler->AccumulatedCost("d") == 5.0);
}

TEST_CASE("Scheduler.CostHint.ABadCostIsRefusedAndNothingRuns") {
  auto scheduler = Make();
  REQUIRE(scheduler->RegisterType("clone", Type(8, 8)).ok());
  bool ran = false;
  auto mark = [&](const Context&) {
    ran = true;
    return absl::OkStatus();
  };
  for (double bad :
       {-1.0, std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()}) {
    CAPTURE(bad);
    Status sync =
        scheduler->RunSync(Context::Background(), {TypeName("clone"), JobId("r"), FairnessKey("a")},
                           mark, {.cost = bad});
    CHECK(sync.code() == absl::StatusCode::kInvalidArgument);
    CHECK(std::string(sync.message()).find("explicit cost") != std::string::npos);
    CHECK(scheduler
              ->Submit({TypeName("clone"), JobId("r"), FairnessKey("a")}, mark, {}, {.cost = bad})
              .code() == absl::StatusCode::kInvalidArgument);
    CHECK(scheduler
              ->Acquire(Context::Background(), {TypeName("clone"), JobId("r"), FairnessKey("a")},
                        [](StatusOr<Permit>) {}, {.cost = bad})
              .code() == absl::StatusCode::kInvalidArgument);
  }
  REQUIRE(scheduler->Drain(Context::Background()).ok());
  CHECK_FALSE(ran);
  CHECK(scheduler->Snapshot().types[0].enqueued == 0);
}

TEST_CASE("Scheduler.QueueWait.JobsPendingAtTheLimitLeaveWithDeadlineExceededUncharged") {
  Watchdog watchdog("queue wait", 60s);
  // A sweep an hour apart: the expiries must come from the timer's own wake-ups.
  SchedulerOptions options = Capacity(1);
  options.runtime.sweep_interval = 3600s;
  auto scheduler = Make(options);
  JobTypeConfig clone = Type(1, 1);
  clone.max_queue_wait = Seconds(0.05);
  REQUIRE(scheduler->RegisterType("clone", clone).ok());
  Gate gate;
  std::promise<Status> holder_done;
  REQUIRE(scheduler
              ->Submit({TypeName("clone"), JobId("r"), FairnessKey("holder")}, HoldUntil(gate),
                       [&](const Status& s) { holder_done.set_value(s); })
              .ok());
  REQUIRE(Eventually([&] { return scheduler->Snapshot().running == 1; }));
  // Each kind of call waits behind the holder until its limit ends the wait.
  bool ran = false;
  auto mark = [&](const Context&) {
    ran = true;
    return absl::OkStatus();
  };
  std::future<Status> sync = std::async(std::launch::async, [&] {
    return scheduler->RunSync(Context::Background(),
                              {TypeName("clone"), JobId("r"), FairnessKey("sync")}, mark);
  });
  std::promise<Status> submitted;
  REQUIRE(scheduler
              ->Submit({TypeName("clone"), JobId("r"), FairnessKey("submit")}, mark,
                       [&](const Status& s) { submitted.set_value(s); })
              .ok());
  std::promise<StatusOr<Permit>> acquired;
  REQUIRE(scheduler
              ->Acquire(Context::Background(),
                        {TypeName("clone"), JobId("r"), FairnessKey("acquire")},
                        [&](StatusOr<Permit> p) { acquired.set_value(std::move(p)); })
              .ok());
  CHECK(sync.get().code() == absl::StatusCode::kDeadlineExceeded);
  const Status submit_status = submitted.get_future().get();
  CHECK(submit_status.code() == absl::StatusCode::kDeadlineExceeded);
  CHECK(std::string(submit_status.message()).find("max_queue_wait") != std::string::npos);
  CHECK(acquired.get_future().get().status().code() == absl::StatusCode::kDeadlineExceeded);
  CHECK_FALSE(ran);
  // Uncharged, counted as expired (not cancelled), and the running job is not touched.
  for (const char* key : {"sync", "submit", "acquire"}) CHECK(scheduler->AccumulatedCost(key) == 0);
  const Snapshot snapshot = scheduler->Snapshot();
  CHECK(snapshot.types[0].expired == 3);
  CHECK(snapshot.types[0].cancelled == 0);
  CHECK(snapshot.pending == 0);
  std::string metrics;
  scheduler->WriteMetrics(metrics);
  CHECK(metrics.find("fairgate_jobs_expired_total{tier=\"1\",type=\"clone\"} 3") !=
        std::string::npos);
  gate.Open();
  CHECK(holder_done.get_future().get().ok());
  REQUIRE(scheduler->Drain(Context::Background()).ok());
}

TEST_CASE("Scheduler.QueueWait.ASnapshotPastTheLimitCountsTheJobOutAndItIsStillToldOnce") {
  Watchdog watchdog("queue wait snapshot", 60s);
  TestClock clock;
  SchedulerOptions options = Capacity(1);
  options.runtime.clock = clock.Fn();
  auto scheduler = Make(options);
  JobTypeConfig clone = Type(1, 1);
  clone.max_queue_wait = Seconds(10);
  REQUIRE(scheduler->RegisterType("clone", clone).ok());
  Gate gate;
  REQUIRE(
      scheduler->Submit({TypeName("clone"), JobId("r"), FairnessKey("holder")}, HoldUntil(gate), {})
          .ok());
  REQUIRE(Eventually([&] { return scheduler->Snapshot().running == 1; }));
  std::atomic<int> told{0};
  std::promise<Status> done;
  REQUIRE(scheduler
              ->Submit({TypeName("clone"), JobId("r"), FairnessKey("late")}, Ok(),
                       [&](const Status& s) {
                         ++told;
                         done.set_value(s);
                       })
              .ok());
  clock.Set(9.5);
  CHECK(scheduler->Snapshot().pending == 1);  // not yet at its limit
  clock.Set(10);
  const Snapshot at_limit = scheduler->Snapshot();
  CHECK(at_limit.pending == 0);
  CHECK(at_limit.types[0].expired == 1);
  // The snapshot does not run the callback; the scheduler's timer does, once.
  CHECK(done.get_future().get().code() == absl::StatusCode::kDeadlineExceeded);
  gate.Open();
  REQUIRE(scheduler->Drain(Context::Background()).ok());
  CHECK(told == 1);
}

TEST_CASE("Scheduler.Submit.ACompletionThatAdmitsAnAcquireGivesItsCallbackThePermit") {
  Watchdog watchdog("submit admits acquire", 60s);
  auto scheduler = Make(Capacity(1, 1));
  REQUIRE(scheduler->RegisterType("clone", Type(1, 1)).ok());
  Gate gate;
  REQUIRE(scheduler->Submit({TypeName("clone"), JobId("r"), FairnessKey("a")}, HoldUntil(gate), {})
              .ok());
  REQUIRE(Eventually([&] { return scheduler->Snapshot().running == 1; }));
  std::promise<StatusOr<Permit>> granted;
  REQUIRE(scheduler
              ->Acquire(Context::Background(), {TypeName("clone"), JobId("r"), FairnessKey("b")},
                        [&](StatusOr<Permit> p) { granted.set_value(std::move(p)); })
              .ok());
  gate.Open();  // the Submit job's completion admits the Acquire, on the pool's fiber
  StatusOr<Permit> permit = granted.get_future().get();
  REQUIRE(permit.ok());
  CHECK(scheduler->Snapshot().running == 1);
  permit->Release(absl::OkStatus());
  REQUIRE(scheduler->Drain(Context::Background()).ok());
  CHECK(scheduler->Snapshot().types[0].completed == 2);
}

TEST_CASE("Scheduler.Pause.PausedWorkWaitsHoldingNoSlotAndResumeAdmitsItAtOnce") {
  Watchdog watchdog("pause", 60s);
  auto scheduler = Make(Capacity(2));
  REQUIRE(scheduler->RegisterType("clone", Type(2, 2)).ok());
  REQUIRE(scheduler->RegisterType("repack", Type(2, 2)).ok());
  CHECK(scheduler->PauseType("nope").code() == absl::StatusCode::kNotFound);
  REQUIRE(scheduler->PauseType("repack").ok());
  REQUIRE(scheduler->PauseType("repack").ok());  // idempotent
  REQUIRE(scheduler->PauseKey("b").ok());        // a key with no jobs yet
  Gate gate;
  std::atomic<int> repacks{0}, b_clones{0}, a_clones{0};
  auto counting = [&](std::atomic<int>& started) {
    return [&](const Context&) {
      ++started;
      return gate.Wait() ? absl::OkStatus() : absl::InternalError("gate never opened");
    };
  };
  REQUIRE(scheduler->Submit({TypeName("repack"), JobId("r")}, counting(repacks), {}).ok());
  REQUIRE(
      scheduler->Submit({TypeName("clone"), JobId("r"), FairnessKey("b")}, counting(b_clones), {})
          .ok());
  REQUIRE(
      scheduler->Submit({TypeName("clone"), JobId("r"), FairnessKey("a")}, counting(a_clones), {})
          .ok());
  // Only a's clone runs; the other slot stays free: paused work holds nothing.
  REQUIRE(Eventually([&] { return a_clones == 1; }));
  Snapshot snapshot = scheduler->Snapshot();
  CHECK(snapshot.running == 1);
  CHECK(snapshot.pending == 2);
  CHECK(snapshot.types[1].paused);
  CHECK_FALSE(snapshot.types[0].paused);
  CHECK(snapshot.paused_keys == std::vector<std::string>{"b"});
  std::string metrics;
  scheduler->WriteMetrics(metrics);
  CHECK(metrics.find("fairgate_type_paused{tier=\"2\",type=\"repack\"} 1") != std::string::npos);
  CHECK(metrics.find("fairgate_type_paused{tier=\"2\",type=\"clone\"} 0") != std::string::npos);
  CHECK(metrics.find("fairgate_keys_paused 1") != std::string::npos);
  // Resuming admits at once, without another call to make room.
  REQUIRE(scheduler->ResumeKey("b").ok());
  CHECK(Eventually([&] { return b_clones == 1; }));
  CHECK(repacks == 0);
  CHECK(scheduler->Snapshot().paused_keys.empty());
  gate.Open();
  REQUIRE(scheduler->ResumeType("repack").ok());
  CHECK(Eventually([&] { return repacks == 1; }));
  REQUIRE(scheduler->Drain(Context::Background()).ok());
}

TEST_CASE("Scheduler.Pause.DrainRunsPausedWorkToo") {
  Watchdog watchdog("drain paused", 60s);
  auto scheduler = Make(Capacity(2));
  REQUIRE(scheduler->RegisterType("clone", Type(2, 2)).ok());
  REQUIRE(scheduler->PauseType("clone").ok());
  REQUIRE(scheduler->PauseKey("k").ok());
  std::atomic<int> ran{0};
  auto count = [&](const Context&) {
    ++ran;
    return absl::OkStatus();
  };
  REQUIRE(scheduler->Submit({TypeName("clone"), JobId("r"), FairnessKey("k")}, count, {}).ok());
  REQUIRE(scheduler->Submit({TypeName("clone"), JobId("s"), FairnessKey("j")}, count, {}).ok());
  REQUIRE(scheduler->Drain(Context::Background()).ok());
  CHECK(ran == 2);
}

TEST_CASE("Scheduler.Periodic.RunsAgainNeverTwoAtOnceReportsEachRunAndStops") {
  Watchdog watchdog("periodic", 60s);
  // A sweep an hour apart: the runs must come from the timer's own wake-ups.
  SchedulerOptions scheduler_options = Capacity(4);
  scheduler_options.runtime.sweep_interval = 3600s;
  auto scheduler = Make(scheduler_options);
  REQUIRE(scheduler->RegisterType("fetch", Type(4, 4)).ok());
  std::atomic<int> in_flight{0}, most_at_once{0}, calls{0};
  // Each run takes longer than the interval: runs must still never overlap.
  auto fetch = [&](const Context&) {
    const int now = ++in_flight;
    int seen = most_at_once.load();
    while (now > seen && !most_at_once.compare_exchange_weak(seen, now)) {
    }
    internal::SleepFor(15ms);
    --in_flight;
    // Every third run fails: it is reported, and the job goes on.
    return ++calls % 3 == 0 ? absl::UnavailableError("upstream down") : absl::OkStatus();
  };
  std::mutex mutex;
  std::vector<absl::StatusCode> reported;
  PeriodicOptions options;
  options.first_run_at_once = true;
  options.on_run = [&](const Status& s) {
    std::lock_guard lock(mutex);
    reported.push_back(s.code());
  };
  StatusOr<PeriodicJob> job = scheduler->SubmitEvery(
      {TypeName("fetch"), JobId("linux"), FairnessKey("maintenance")}, 5ms, fetch, options);
  REQUIRE(job.ok());
  REQUIRE(Eventually([&] { return job->runs() >= 6; }));
  job->Stop();
  job->Stop();  // idempotent
  // Whatever was in flight at Stop ends; then nothing more starts.
  REQUIRE(Eventually([&] { return in_flight == 0 && job->runs() == std::uint64_t(calls); }));
  const int after_stop = calls;
  internal::SleepFor(60ms);  // a dozen intervals, in which a running job would have run again
  CHECK(calls == after_stop);
  CHECK(most_at_once == 1);
  std::lock_guard lock(mutex);
  REQUIRE(reported.size() == static_cast<std::size_t>(after_stop));
  CHECK(reported[2] == absl::StatusCode::kUnavailable);
  CHECK(reported[3] == absl::StatusCode::kOk);
  CHECK(scheduler->AccumulatedCost("maintenance").has_value());  // charged to its key
}

TEST_CASE("Scheduler.Periodic.FirstRunsAreSpreadOverTheIntervalAndShutdownEndsThem") {
  Watchdog watchdog("periodic spread", 60s);
  auto scheduler = Make(Capacity(8));
  REQUIRE(scheduler->RegisterType("fetch", Type(8, 8)).ok());
  const auto start = std::chrono::steady_clock::now();
  std::mutex mutex;
  std::vector<double> first_runs;  // seconds after start
  std::vector<PeriodicJob> jobs;
  for (int i = 0; i < 20; ++i) {
    auto seen = std::make_shared<std::atomic<bool>>(false);
    auto fn = [&, seen](const Context&) {
      if (!seen->exchange(true)) {
        std::lock_guard lock(mutex);
        first_runs.push_back(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      }
      return absl::OkStatus();
    };
    StatusOr<PeriodicJob> job = scheduler->SubmitEvery(
        {TypeName("fetch"), JobId("repo" + std::to_string(i))}, 300ms, fn, {.jitter = 0});
    REQUIRE(job.ok());
    jobs.push_back(*job);
  }
  REQUIRE(Eventually([&] {
    std::lock_guard lock(mutex);
    return first_runs.size() == 20;
  }));
  {
    std::lock_guard lock(mutex);
    const auto [low, high] = std::minmax_element(first_runs.begin(), first_runs.end());
    // Twenty uniform draws over 300 ms all within 30 ms of each other: about 1e-17.
    CHECK(*high - *low > 0.03);
  }
  REQUIRE(scheduler->Shutdown(Context::Background()).ok());
  std::uint64_t runs = 0;
  for (const PeriodicJob& job : jobs) runs += job.runs();
  internal::SleepFor(400ms);  // more than an interval: nothing runs after shutdown
  std::uint64_t later = 0;
  for (const PeriodicJob& job : jobs) later += job.runs();
  CHECK(later == runs);
  CHECK(scheduler->SubmitEvery({TypeName("fetch"), JobId("x")}, 1s, Ok()).status().code() ==
        absl::StatusCode::kUnavailable);
}

TEST_CASE("Scheduler.Periodic.BadInputIsRefusedAndNothingIsScheduled") {
  auto scheduler = Make();
  REQUIRE(scheduler->RegisterType("fetch", Type(1, 1)).ok());
  auto code = [&](std::string_view type, std::string_view id, Seconds interval, Scheduler::JobFn fn,
                  PeriodicOptions options = {}) {
    return scheduler->SubmitEvery({TypeName(type), JobId(id)}, interval, std::move(fn), options)
        .status()
        .code();
  };
  using absl::StatusCode;
  CHECK(code("nope", "r", 1s, Ok()) == StatusCode::kNotFound);
  CHECK(code("fetch", "", 1s, Ok()) == StatusCode::kInvalidArgument);
  CHECK(code("fetch", "r", 1s, nullptr) == StatusCode::kInvalidArgument);
  CHECK(code("fetch", "r", 0s, Ok()) == StatusCode::kInvalidArgument);
  CHECK(code("fetch", "r", Seconds(std::numeric_limits<double>::quiet_NaN()), Ok()) ==
        StatusCode::kInvalidArgument);
  CHECK(code("fetch", "r", Seconds(1e9), Ok()) == StatusCode::kInvalidArgument);
  CHECK(code("fetch", "r", 1s, Ok(), {.jitter = 1}) == StatusCode::kInvalidArgument);
  CHECK(code("fetch", "r", 1s, Ok(), {.jitter = -0.1}) == StatusCode::kInvalidArgument);
  CHECK(scheduler->Snapshot().types[0].enqueued == 0);
  PeriodicJob empty;
  empty.Stop();  // a default handle does nothing
  CHECK(empty.runs() == 0);
}

TEST_CASE("Scheduler.KeyLimits.MaxRunningHoldsAKeyBackAndRaisingItAdmitsAtOnce") {
  Watchdog watchdog("key limits", 60s);
  auto scheduler = Make(Capacity(4));
  REQUIRE(scheduler->RegisterType("clone", Type(8, 4)).ok());
  REQUIRE(scheduler->SetKeyLimits("a", {.max_running = 1}).ok());
  Gate gate;
  std::atomic<int> a_started{0}, b_started{0};
  auto counting = [&](std::atomic<int>& started) {
    return [&](const Context&) {
      ++started;
      return gate.Wait() ? absl::OkStatus() : absl::InternalError("gate never opened");
    };
  };
  for (int i = 0; i < 3; ++i)
    REQUIRE(scheduler
                ->Submit({TypeName("clone"), JobId("r"), FairnessKey("a")}, counting(a_started), {})
                .ok());
  REQUIRE(
      scheduler->Submit({TypeName("clone"), JobId("r"), FairnessKey("b")}, counting(b_started), {})
          .ok());
  // Key a holds one slot; b takes another although a came first; two slots stay free for keys
  // that could use them (none can: a is at its limit).
  REQUIRE(Eventually([&] { return a_started == 1 && b_started == 1; }));
  CHECK(scheduler->Snapshot().running == 2);
  CHECK(scheduler->Snapshot().pending == 2);
  REQUIRE(scheduler->SetKeyLimits("a", {.max_running = 3}).ok());
  CHECK(Eventually([&] { return a_started == 3; }));
  gate.Open();
  REQUIRE(scheduler->Drain(Context::Background()).ok());
}

TEST_CASE("Scheduler.KeyWeight.DividesLaterCharges") {
  auto scheduler = Make(SchedulerOptions::Seed());  // no reconciliation: the charge stays
  REQUIRE(scheduler->RegisterType("clone", Type(8, 8, "", 2)).ok());
  REQUIRE(scheduler
              ->RunSync(Context::Background(), {TypeName("clone"), JobId("x"), FairnessKey("prod")},
                        Ok())
              .ok());
  CHECK(scheduler->AccumulatedCost("prod") == 2.0);
  REQUIRE(scheduler->SetKeyWeight("prod", 4).ok());
  // Another id, whose estimate is still the default cost 2 (x's has learned from its run).
  REQUIRE(scheduler
              ->RunSync(Context::Background(), {TypeName("clone"), JobId("y"), FairnessKey("prod")},
                        Ok())
              .ok());
  CHECK(scheduler->AccumulatedCost("prod") == 2.5);  // 2 + 2 / 4
}

TEST_CASE("Scheduler.Charge.WorkDoneWithoutAJobCountsInTheKeysPlace") {
  Watchdog watchdog("charge", 60s);
  Gate gate;
  testing::Log ran;  // declared before the scheduler whose jobs use it
  auto scheduler = Make(Capacity(1));
  REQUIRE(scheduler->RegisterType("clone", Type(8, 1)).ok());
  REQUIRE(
      scheduler->Submit({TypeName("clone"), JobId("busy"), FairnessKey("c")}, HoldUntil(gate), {})
          .ok());
  REQUIRE(Eventually([&] { return scheduler->Snapshot().running == 1; }));
  for (const char* key : {"a", "b"}) {
    REQUIRE(scheduler
                ->Submit({TypeName("clone"), JobId("r"), FairnessKey(key)},
                         [&ran, key](const Context&) {
                           ran.Add(key);
                           return absl::OkStatus();
                         },
                         {})
                .ok());
  }
  // a came first and both cost 0; a's cache hits (say) put it behind b.
  REQUIRE(scheduler->Charge("a", 0.5).ok());
  CHECK(scheduler->AccumulatedCost("a") == 0.5);
  CHECK(scheduler->Charge("a", -1).code() == absl::StatusCode::kInvalidArgument);
  CHECK(scheduler->Charge("a", std::nan("")).code() == absl::StatusCode::kInvalidArgument);
  CHECK(scheduler->AccumulatedCost("a") == 0.5);
  // A key with nothing queued is tracked from its first charge.
  REQUIRE(scheduler->Charge("reader", 0.25).ok());
  CHECK(scheduler->AccumulatedCost("reader") == 0.25);
  gate.Open();
  REQUIRE(scheduler->Drain(Context::Background()).ok());
  CHECK(ran.entries() == std::vector<std::string>{"b", "a"});
}

// A scheduler of one slot with type "clone" (one at a time), whose slot a job of key "c" holds
// until `gate` opens. Seed mode by default: no reconciliation, so charges are exact.
std::unique_ptr<Scheduler> OneSlotHeldUntil(Gate& gate,
                                            SchedulerOptions options = SchedulerOptions::Seed()) {
  options.rule.max_concurrency = 1;
  auto scheduler = Make(options);
  REQUIRE(scheduler->RegisterType("clone", Type(8, 1)).ok());
  REQUIRE(
      scheduler->Submit({TypeName("clone"), JobId("busy"), FairnessKey("c")}, HoldUntil(gate), {})
          .ok());
  REQUIRE(Eventually([&] { return scheduler->Snapshot().running == 1; }));
  return scheduler;
}

TEST_CASE("Scheduler.KeyGroup.AFarmOfKeysInOneGroupTakesOneTurnAgainstALoneKey") {
  Watchdog watchdog("groups", 60s);
  Gate gate;
  testing::Log ran;  // declared before the scheduler whose jobs use it
  auto scheduler = OneSlotHeldUntil(gate);
  // Each its own id, so that each is charged the type's default cost 1 (none learned yet).
  auto submit = [&](const std::string& key) {
    REQUIRE(scheduler
                ->Submit({TypeName("clone"), JobId(key), FairnessKey(key)},
                         [&ran, key](const Context&) {
                           ran.Add(key.substr(0, 4));
                           return absl::OkStatus();
                         },
                         {})
                .ok());
  };
  // Three farm keys queue first, then alice: in one group they take one turn in two.
  for (const char* key : {"farm1", "farm2", "farm3"}) {
    REQUIRE(scheduler->SetKeyGroup(key, "farm").ok());
    submit(key);
  }
  submit("alic");
  CHECK(scheduler->SetGroupWeight("farm", 0).code() == absl::StatusCode::kInvalidArgument);
  CHECK(scheduler->SetGroupLimits("farm", {.max_running = 0}).code() ==
        absl::StatusCode::kInvalidArgument);
  gate.Open();
  REQUIRE(scheduler->Drain(Context::Background()).ok());
  CHECK(ran.entries() == std::vector<std::string>{"farm", "alic", "farm", "farm"});
  // The group was charged its keys' three clones.
  CHECK(scheduler->GroupAccumulatedCost("farm") == 3.0);
  CHECK_FALSE(scheduler->GroupAccumulatedCost("nobody").has_value());
}

TEST_CASE("Scheduler.KeyGroup.ARuleGroupsTheKeysItHasNotSeenOnce") {
  Watchdog watchdog("group rule", 60s);
  Gate gate;
  testing::Log ran;  // declared before the scheduler whose jobs use it
  std::atomic<int> asked = 0;
  SchedulerOptions options = SchedulerOptions::Seed();
  // An IPv4 address's /24 (for the test: everything before the last dot).
  options.runtime.key_group = [&asked](std::string_view key) {
    ++asked;
    return std::string(key.substr(0, key.rfind('.')));
  };
  auto scheduler = OneSlotHeldUntil(gate, options);
  int id = 0;  // each job its own id, so that each is charged the type's default cost 1
  for (const std::string key : {"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.1", "10.0.1.7"}) {
    REQUIRE(scheduler
                ->Submit({TypeName("clone"), JobId(std::to_string(id++)), FairnessKey(key)},
                         [&ran, key](const Context&) {
                           ran.Add(key.substr(0, key.rfind('.')));
                           return absl::OkStatus();
                         },
                         {})
                .ok());
  }
  gate.Open();
  REQUIRE(scheduler->Drain(Context::Background()).ok());
  // The /24 of four jobs takes one turn against the lone address of 10.0.1.
  CHECK(ran.entries() ==
        std::vector<std::string>{"10.0.0", "10.0.1", "10.0.0", "10.0.0", "10.0.0"});
  CHECK(scheduler->GroupAccumulatedCost("10.0.0") == 4.0);
  // Asked once per key it had not seen: "c" (the busy job's), then four addresses.
  CHECK(asked == 5);
}

// With idle catch-up, a key the rule puts in a busy group starts at its group's least waiting
// key, not at 0; a key of no group at the least group waiting (docs/ordering.md, "Groups").
TEST_CASE("Scheduler.KeyGroup.WithIdleCatchUpANewKeyStartsAmongItsGroupsKeys") {
  Watchdog watchdog("group rule, idle catch-up", 60s);
  Gate gate;
  SchedulerOptions options = SchedulerOptions::Seed();
  options.rule.idle_catch_up = true;
  // "org/user" keys: the organisation is the group.
  options.runtime.key_group = [](std::string_view key) {
    const std::size_t slash = key.find('/');
    return slash == std::string_view::npos ? std::string() : std::string(key.substr(0, slash));
  };
  auto scheduler = OneSlotHeldUntil(gate, options);
  auto queue = [&](const std::string& key) {
    REQUIRE(scheduler
                ->Submit({TypeName("clone"), JobId(key), FairnessKey(key)},
                         [](const Context&) { return absl::OkStatus(); }, {})
                .ok());
  };
  REQUIRE(scheduler->Charge("acme/alice", 10).ok());  // alice 10, acme 10
  queue("acme/alice");
  queue("acme/bob");  // acme is busy: bob catches up to alice, its group's least waiting key
  CHECK(scheduler->AccumulatedCost("acme/bob") == 10.0);
  CHECK(scheduler->GroupAccumulatedCost("acme") == 10.0);
  queue("solo");  // no group: the least waiting at the groups' level, acme's 10
  CHECK(scheduler->AccumulatedCost("solo") == 10.0);
  queue("globex/carol");  // an idle group: globex catches up to acme's 10, carol to none
  CHECK(scheduler->GroupAccumulatedCost("globex") == 10.0);
  CHECK(scheduler->AccumulatedCost("globex/carol") == 0.0);
  gate.Open();
  REQUIRE(scheduler->Drain(Context::Background()).ok());
}

TEST_CASE("Scheduler.KeySettings.BadValuesAreRefusedAndChangeNothing") {
  auto scheduler = Make(SchedulerOptions::Seed());
  REQUIRE(scheduler->RegisterType("clone", Type(8, 8, "", 2)).ok());
  for (double w : {0.0, -1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    CAPTURE(w);
    const Status s = scheduler->SetKeyWeight("k", w);
    CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    CHECK(std::string(s.message()).find("weight") != std::string::npos);
  }
  CHECK(scheduler->SetKeyLimits("k", {.max_running = 0}).code() ==
        absl::StatusCode::kInvalidArgument);
  const Status s = scheduler->SetKeyLimits("k", {.max_running = 1, .min_running = 2});
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(s.message()).find("min_running") != std::string::npos);
  REQUIRE(
      scheduler
          ->RunSync(Context::Background(), {TypeName("clone"), JobId("x"), FairnessKey("k")}, Ok())
          .ok());
  CHECK(scheduler->AccumulatedCost("k") == 2.0);  // weight still 1
}

TEST_CASE("Scheduler.Aging.MaxWaitToCeilingAndAgedJobsInTheSnapshot") {
  Watchdog watchdog("aging", 60s);
  TestClock clock;
  SchedulerOptions options = Capacity(1);
  options.rule.aging = AgingConfig{Seconds(2), Seconds(3), 8};
  options.runtime.clock = clock.Fn();
  auto scheduler = Make(options);
  REQUIRE(scheduler->RegisterType("clone", Type(8, 8)).ok());
  REQUIRE(scheduler->RegisterType("fetch", Type(4, 4)).ok());
  REQUIRE(scheduler->RegisterType("repack", Type(1, 1)).ok());
  CHECK(scheduler->MaxWaitToCeiling("repack")->count() == 8.0);  // 2 + 2 steps * 3
  CHECK(scheduler->MaxWaitToCeiling("fetch")->count() == 5.0);
  CHECK(scheduler->MaxWaitToCeiling("clone")->count() == 0.0);
  CHECK(scheduler->MaxWaitToCeiling("nope").status().code() == absl::StatusCode::kNotFound);

  Gate gate;
  REQUIRE(scheduler->Submit({TypeName("clone"), JobId("a"), FairnessKey("x")}, HoldUntil(gate), {})
              .ok());
  REQUIRE(Eventually([&] { return scheduler->Snapshot().running == 1; }));
  REQUIRE(scheduler->Submit({TypeName("repack"), JobId("r")}, Ok(), {}).ok());
  auto aged_in = [&](int priority) {
    for (const TierSnapshot& t : scheduler->Snapshot().tiers) {
      if (t.priority == priority) return t.aged_in;
    }
    return std::int64_t{-1};
  };
  CHECK(aged_in(4) == 0);
  clock.Set(5.0);  // grace + one interval: one tier up
  CHECK(aged_in(4) == 1);
  clock.Set(8.0);  // at the ceiling
  CHECK(aged_in(4) == 0);
  CHECK(aged_in(8) == 1);
  gate.Open();
  REQUIRE(scheduler->Drain(Context::Background()).ok());
}

TEST_CASE("Scheduler.Sweeper.ForgetsIdleKeysAndStopsPromptlyAtShutdown") {
  Watchdog watchdog("sweeper", 60s);
  TestClock clock;
  SchedulerOptions options = SchedulerOptions::Default();
  options.runtime.clock = clock.Fn();
  options.rule.key_ttl = Seconds(60);
  options.runtime.sweep_interval = Seconds(0.005);
  auto scheduler = Make(options);
  REQUIRE(scheduler->RegisterType("t", Type(1, 1)).ok());
  REQUIRE(scheduler
              ->RunSync(Context::Background(), {TypeName("t"), JobId("x"), FairnessKey("visitor")},
                        Ok())
              .ok());
  CHECK(scheduler->Snapshot().keys_tracked == 1);
  clock.Set(61);
  CHECK(Eventually([&] { return scheduler->Snapshot().keys_tracked == 0; }));

  // A sweeper that would sleep for an hour still stops at once when the scheduler goes.
  SchedulerOptions slow = SchedulerOptions::Default();
  slow.runtime.sweep_interval = Seconds(3600);
  auto sleepy = Make(slow);
  sleepy.reset();  // the watchdog fails the test if this waits for the hour
}

TEST_CASE("Scheduler.Lock.UserCodeRunsOutsideTheLock") {
  // A job and a callback that call back into the scheduler would deadlock if the lock were held.
  Watchdog watchdog("reentrancy", 60s);
  auto scheduler = Make(Capacity(2));
  REQUIRE(scheduler->RegisterType("t", Type(2, 2)).ok());
  std::promise<void> nested_done;
  REQUIRE(scheduler
              ->Submit(
                  {TypeName("t"), JobId("outer")},
                  [&](const Context&) {
                    CHECK(scheduler->Snapshot().running == 1);
                    // A background job may itself wait in RunSync: only its fiber waits.
                    return scheduler->RunSync(Context::Background(),
                                              {TypeName("t"), JobId("inner"), FairnessKey("k")},
                                              Ok());
                  },
                  [&](const Status& s) {
                    CHECK(s.ok());
                    CHECK(scheduler
                              ->Submit({TypeName("t"), JobId("from-callback")}, Ok(),
                                       [&](const Status&) { nested_done.set_value(); })
                              .ok());
                  })
              .ok());
  nested_done.get_future().wait();
}

}  // namespace scheduler_test
}  // namespace
}  // namespace fairgate

TEST_SUITE_END();

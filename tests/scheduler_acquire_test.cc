// Scheduler::Acquire and Permit: the asynchronous admission an event-loop server uses, with the
// same order, caps, cancellation, shutdown and exactly-once promises as RunSync; and its Boost.Asio
// adapter (fairgate/asio.h). No test asserts how long anything took.
#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "boost/asio/bind_executor.hpp"
#include "boost/asio/io_context.hpp"
#include "boost/asio/strand.hpp"
#include "boost/asio/use_future.hpp"
#include "doctest/doctest.h"
#include "fairgate/asio.h"
#include "fairgate/observer.h"
#include "fairgate/permit.h"
#include "fairgate/scheduler.h"
#include "runtime_test_util.h"
#include "test_job_types.h"

// The runtime's tests: CTest labels them "runtime", and runs them again on other pools and
// under ThreadSanitizer (tests/CMakeLists.txt).
TEST_SUITE_BEGIN("runtime");

namespace fairgate {
namespace {
namespace scheduler_acquire_test {

using namespace std::chrono_literals;
using testing::Eventually;
using testing::TestClock;
using testing::Type;
using testing::Watchdog;

std::unique_ptr<Scheduler> Make(SchedulerOptions options) {
  auto scheduler = Scheduler::Create(testing::WithPoolUnderTest(options));
  REQUIRE_MESSAGE(scheduler.ok(), scheduler.status().message());
  return *std::move(scheduler);
}

SchedulerOptions SeedCapacity(int capacity) {
  SchedulerOptions options = SchedulerOptions::Seed();
  options.rule.max_concurrency = capacity;
  options.runtime.worker_threads = 1;
  return options;
}

// What one Acquire's callback received, filled from whichever thread called it.
struct Outcome {
  std::mutex mutex;
  int calls = 0;
  std::optional<Permit> permit;
  Status status;

  Scheduler::PermitCallback Callback() {
    return [this](StatusOr<Permit> result) {
      std::lock_guard lock(mutex);
      ++calls;
      if (result.ok()) {
        permit.emplace(*std::move(result));
      } else {
        status = result.status();
      }
    };
  }
  int Calls() {
    std::lock_guard lock(mutex);
    return calls;
  }
  bool Held() {
    std::lock_guard lock(mutex);
    return permit.has_value() && permit->held();
  }
  void Release(const Status& s = absl::OkStatus()) {
    std::optional<Permit> taken;
    {
      std::lock_guard lock(mutex);
      taken = std::move(permit);
      permit.reset();
    }
    REQUIRE(taken.has_value());
    taken->Release(s);
  }
};

TEST_CASE("Scheduler.Acquire.AdmittedAtOnceTheCallbackRunsInsideAcquireWithAPermit") {
  Watchdog watchdog("acquire inline", 60s);
  auto scheduler = Make(SeedCapacity(1));
  REQUIRE(scheduler->RegisterType("clone", Type(1, 1)).ok());
  Outcome first;
  std::thread::id called_on;
  REQUIRE(scheduler
              ->Acquire(Context::Background(),
                        {TypeName("clone"), JobId("linux"), FairnessKey("a")},
                        [&](StatusOr<Permit> p) {
                          called_on = std::this_thread::get_id();
                          first.Callback()(std::move(p));
                        })
              .ok());
  CHECK(first.Calls() == 1);
  CHECK(first.Held());
  CHECK(called_on == std::this_thread::get_id());
  CHECK(scheduler->Snapshot().running == 1);
  first.Release();
  CHECK(scheduler->Snapshot().running == 0);
}

TEST_CASE("Scheduler.Acquire.APermitHoldsItsSlotUntilReleasedAndTheNextWaiterGetsIt") {
  Watchdog watchdog("acquire hold", 60s);
  auto scheduler = Make(SeedCapacity(1));
  REQUIRE(scheduler->RegisterType("clone", Type(1, 1)).ok());
  Outcome a, b;
  REQUIRE(scheduler
              ->Acquire(Context::Background(), {TypeName("clone"), JobId("r1"), FairnessKey("a")},
                        a.Callback())
              .ok());
  REQUIRE(scheduler
              ->Acquire(Context::Background(), {TypeName("clone"), JobId("r2"), FairnessKey("b")},
                        b.Callback())
              .ok());
  CHECK(a.Held());
  CHECK(b.Calls() == 0);  // waiting: the only slot is held
  CHECK(scheduler->Snapshot().pending == 1);
  a.Release();
  CHECK(b.Calls() == 1);  // handed the slot by the release, on the releasing thread
  CHECK(b.Held());
  b.Release();
  CHECK(a.Calls() == 1);
  CHECK(b.Calls() == 1);
}

TEST_CASE("Scheduler.Acquire.WaitersAreAdmittedInTheFairOrder") {
  Watchdog watchdog("acquire order", 60s);
  // Seed mode: charges stay as estimated (1 each), so the order is known exactly.
  auto scheduler = Make(SeedCapacity(1));
  REQUIRE(scheduler->RegisterType("clone", Type(1, 1)).ok());
  std::mutex mutex;
  std::vector<std::string> order;
  std::vector<Permit> held;
  auto record = [&](std::string name) {
    return [&, name](StatusOr<Permit> p) {
      REQUIRE(p.ok());
      std::lock_guard lock(mutex);
      order.push_back(name);
      held.push_back(*std::move(p));
    };
  };
  REQUIRE(scheduler
              ->Acquire(Context::Background(),
                        {TypeName("clone"), JobId("r"), FairnessKey("heavy")}, record("heavy1"))
              .ok());
  REQUIRE(scheduler
              ->Acquire(Context::Background(),
                        {TypeName("clone"), JobId("r"), FairnessKey("heavy")}, record("heavy2"))
              .ok());
  REQUIRE(scheduler
              ->Acquire(Context::Background(),
                        {TypeName("clone"), JobId("r"), FairnessKey("heavy")}, record("heavy3"))
              .ok());
  REQUIRE(scheduler
              ->Acquire(Context::Background(),
                        {TypeName("clone"), JobId("r"), FairnessKey("light")}, record("light1"))
              .ok());
  // Release whatever is held, one at a time, until all four ran.
  for (int i = 0; i < 4; ++i) {
    Permit p;
    {
      std::lock_guard lock(mutex);
      REQUIRE(held.size() == 1);
      p = std::move(held.back());
      held.pop_back();
    }
    p.Release();
  }
  // heavy1 ran first (alone); then light (charged 0) goes before heavy's second job (charged 1).
  CHECK(order == std::vector<std::string>{"heavy1", "light1", "heavy2", "heavy3"});
}

TEST_CASE("Scheduler.Acquire.CancelledWhileWaitingIsToldOnceUnchargedAndNeverAdmitted") {
  Watchdog watchdog("acquire cancel", 60s);
  auto scheduler = Make(SeedCapacity(1));
  REQUIRE(scheduler->RegisterType("clone", Type(1, 1)).ok());
  Outcome holder, waiter;
  REQUIRE(scheduler
              ->Acquire(Context::Background(), {TypeName("clone"), JobId("r"), FairnessKey("a")},
                        holder.Callback())
              .ok());
  auto [ctx, cancel] = WithCancel(Context::Background());
  REQUIRE(
      scheduler->Acquire(ctx, {TypeName("clone"), JobId("r2"), FairnessKey("b")}, waiter.Callback())
          .ok());
  CHECK(waiter.Calls() == 0);
  cancel();
  CHECK(waiter.Calls() == 1);  // told inside the cancel function
  CHECK(waiter.status.code() == absl::StatusCode::kCancelled);
  CHECK(scheduler->AccumulatedCost("b").value_or(0) == 0);
  holder.Release();
  CHECK(waiter.Calls() == 1);  // never admitted afterwards
  CHECK(scheduler->Snapshot().running == 0);
  CHECK(scheduler->Snapshot().pending == 0);
  cancel();  // again: nothing
  CHECK(waiter.Calls() == 1);
}

TEST_CASE("Scheduler.Acquire.ADeadlineEndsTheWaitWithNobodyPolling") {
  Watchdog watchdog("acquire deadline", 60s);
  auto scheduler = Make(SeedCapacity(1));
  REQUIRE(scheduler->RegisterType("clone", Type(1, 1)).ok());
  Outcome holder, waiter;
  REQUIRE(scheduler
              ->Acquire(Context::Background(), {TypeName("clone"), JobId("r"), FairnessKey("a")},
                        holder.Callback())
              .ok());
  // Long enough to outlast the call on a loaded machine under ThreadSanitizer.
  auto [ctx, cancel] = WithTimeout(Context::Background(), 200ms);
  REQUIRE(
      scheduler->Acquire(ctx, {TypeName("clone"), JobId("r2"), FairnessKey("b")}, waiter.Callback())
          .ok());
  REQUIRE(Eventually([&] { return waiter.Calls() == 1; }));
  CHECK(waiter.status.code() == absl::StatusCode::kDeadlineExceeded);
  CHECK(scheduler->Snapshot().pending == 0);
  holder.Release();
  CHECK(waiter.Calls() == 1);
  cancel();
}

TEST_CASE("Scheduler.Acquire.AnEarlierDeadlineWakesTheTimerEarlier") {
  Watchdog watchdog("acquire deadline order", 60s);
  SchedulerOptions options = SeedCapacity(1);
  options.runtime.sweep_interval = Seconds(3600);  // the timer would otherwise sleep for an hour
  auto scheduler = Make(options);
  REQUIRE(scheduler->RegisterType("clone", Type(1, 1)).ok());
  Outcome holder, late, early;
  REQUIRE(scheduler
              ->Acquire(Context::Background(), {TypeName("clone"), JobId("r"), FairnessKey("a")},
                        holder.Callback())
              .ok());
  auto [late_ctx, cancel_late] = WithTimeout(Context::Background(), 1h);
  REQUIRE(
      scheduler
          ->Acquire(late_ctx, {TypeName("clone"), JobId("r2"), FairnessKey("b")}, late.Callback())
          .ok());
  // Made just before its call, and long enough to outlast it on a loaded machine under
  // ThreadSanitizer (20 ms made before the call above once passed before this call was made).
  auto [early_ctx, cancel_early] = WithTimeout(Context::Background(), 200ms);
  REQUIRE(
      scheduler
          ->Acquire(early_ctx, {TypeName("clone"), JobId("r3"), FairnessKey("c")}, early.Callback())
          .ok());
  REQUIRE(Eventually([&] { return early.Calls() == 1; }));
  CHECK(early.status.code() == absl::StatusCode::kDeadlineExceeded);
  CHECK(late.Calls() == 0);
  holder.Release();
  CHECK(late.Held());  // the surviving waiter gets the slot
  late.Release();
  cancel_late();
  cancel_early();
}

TEST_CASE("Scheduler.Acquire.RefusalsAreReturnedAndTheCallbackIsNeverCalled") {
  Watchdog watchdog("acquire refusals", 60s);
  SchedulerOptions options = SeedCapacity(1);
  options.rule.max_pending_per_key = 1;
  auto scheduler = Make(options);
  REQUIRE(scheduler->RegisterType("clone", Type(1, 1)).ok());
  Outcome o;
  CHECK(scheduler
            ->Acquire(Context::Background(), {TypeName("nope"), JobId("r"), FairnessKey("a")},
                      o.Callback())
            .code() == absl::StatusCode::kNotFound);
  CHECK(scheduler
            ->Acquire(Context::Background(), {TypeName("clone"), JobId(""), FairnessKey("a")},
                      o.Callback())
            .code() == absl::StatusCode::kInvalidArgument);
  CHECK(scheduler
            ->Acquire(Context::Background(), {TypeName("clone"), JobId("r"), FairnessKey("a")},
                      nullptr)
            .code() == absl::StatusCode::kInvalidArgument);
  auto [done_ctx, cancel] = WithCancel(Context::Background());
  cancel();
  CHECK(
      scheduler->Acquire(done_ctx, {TypeName("clone"), JobId("r"), FairnessKey("a")}, o.Callback())
          .code() == absl::StatusCode::kCancelled);
  CHECK(o.Calls() == 0);
  // A full queue: the holder runs, one waits, the next is refused.
  Outcome holder, waiter, refused;
  auto [ctx, cancel_ctx] = WithCancel(Context::Background());
  REQUIRE(
      scheduler->Acquire(ctx, {TypeName("clone"), JobId("r"), FairnessKey("a")}, holder.Callback())
          .ok());
  REQUIRE(
      scheduler->Acquire(ctx, {TypeName("clone"), JobId("r"), FairnessKey("a")}, waiter.Callback())
          .ok());
  CHECK(
      scheduler->Acquire(ctx, {TypeName("clone"), JobId("r"), FairnessKey("a")}, refused.Callback())
          .code() == absl::StatusCode::kResourceExhausted);
  CHECK(refused.Calls() == 0);
  holder.Release();
  waiter.Release();
  cancel_ctx();  // after the refusal: its callback was unregistered, nothing runs now
  CHECK(refused.Calls() == 0);
  CHECK(holder.Calls() == 1);
  CHECK(waiter.Calls() == 1);
}

TEST_CASE("Scheduler.Acquire.ShutdownCancelsWaitersAndWaitsForHeldPermits") {
  Watchdog watchdog("acquire shutdown", 60s);
  auto scheduler = Make(SeedCapacity(1));
  REQUIRE(scheduler->RegisterType("clone", Type(1, 1)).ok());
  Outcome holder, waiter;
  REQUIRE(scheduler
              ->Acquire(Context::Background(), {TypeName("clone"), JobId("r"), FairnessKey("a")},
                        holder.Callback())
              .ok());
  REQUIRE(scheduler
              ->Acquire(Context::Background(), {TypeName("clone"), JobId("r"), FairnessKey("b")},
                        waiter.Callback())
              .ok());
  auto [short_ctx, cancel] = WithTimeout(Context::Background(), 50ms);
  // The permit is still held: Shutdown gives up at its deadline, and the waiter is told.
  CHECK(scheduler->Shutdown(short_ctx).code() == absl::StatusCode::kDeadlineExceeded);
  CHECK(waiter.Calls() == 1);
  CHECK(waiter.status.code() == absl::StatusCode::kCancelled);
  Outcome late;
  CHECK(scheduler
            ->Acquire(Context::Background(), {TypeName("clone"), JobId("r"), FairnessKey("c")},
                      late.Callback())
            .code() == absl::StatusCode::kUnavailable);
  holder.Release();
  CHECK(scheduler->Shutdown(Context::Background()).ok());
  CHECK(late.Calls() == 0);
  cancel();
}

TEST_CASE("Scheduler.Acquire.TheHoldTimeIsTheObservedCostAndTheStatusIsCounted") {
  Watchdog watchdog("acquire cost", 60s);
  TestClock clock;
  SchedulerOptions options = SeedCapacity(2);
  options.runtime.clock = clock.Fn();
  auto scheduler = Make(options);
  REQUIRE(scheduler->RegisterType("clone", Type(2, 2)).ok());  // default cost 1
  Outcome ok, failed;
  REQUIRE(scheduler
              ->Acquire(Context::Background(),
                        {TypeName("clone"), JobId("linux"), FairnessKey("a")}, ok.Callback())
              .ok());
  REQUIRE(scheduler
              ->Acquire(Context::Background(), {TypeName("clone"), JobId("git"), FairnessKey("a")},
                        failed.Callback())
              .ok());
  clock.Set(11);
  ok.Release();
  failed.Release(absl::UnavailableError("client went away"));
  CHECK(scheduler->Estimate(TypeName("clone"), JobId("linux")).value() ==
        doctest::Approx(0.3 * 11 + 0.7 * 1));
  std::string metrics;
  scheduler->WriteMetrics(metrics);
  CHECK(metrics.find("status=\"unavailable\"") != std::string::npos);
  CHECK(metrics.find("status=\"ok\"") != std::string::npos);
}

// The completions an observer saw: "id status charge accumulated_cost".
std::shared_ptr<testing::EventLines> CompletionRecorder() {
  return std::make_shared<testing::EventLines>([](const JobEvent& e) -> std::string {
    if (e.kind != JobEvent::Kind::kComplete) return "";
    return absl::StrCat(e.id, " ", absl::StatusCodeToString(e.status.code()), " ", e.charge, " ",
                        e.accumulated_cost);
  });
}

// A permit given back unused (its holder's client went away as it was admitted) teaches its
// estimate nothing, where a Release after no work would pull it toward 0, and gives its key the
// charge back; its slot goes to the next waiter, and its completion is seen with its status and
// a charge of 0.
TEST_CASE("Scheduler.Acquire.APermitGivenBackUnusedTeachesNothingAndGivesBackItsCharge") {
  Watchdog watchdog("acquire unused", 60s);
  TestClock clock;
  SchedulerOptions options = SeedCapacity(1);
  options.runtime.clock = clock.Fn();
  auto recorder = CompletionRecorder();
  options.runtime.observers.push_back(recorder);
  auto scheduler = Make(options);
  REQUIRE(scheduler->RegisterType("clone", Type(1, 1)).ok());  // default cost 1
  const JobName linux_a{TypeName("clone"), JobId("linux"), FairnessKey("a")};
  // A first clone of linux holds its slot 11 s: its estimate learns 0.3 x 11 + 0.7 x 1 = 4.
  Outcome first;
  REQUIRE(scheduler->Acquire(Context::Background(), linux_a, first.Callback()).ok());
  clock.Set(11);
  first.Release();
  const double estimate = scheduler->Estimate(TypeName("clone"), JobId("linux")).value();
  CHECK(estimate == doctest::Approx(4.0));
  const double cost_before = scheduler->AccumulatedCost("a").value();
  // The second is admitted, charged the estimate, and given back a second later unused.
  Outcome second, next;
  REQUIRE(scheduler->Acquire(Context::Background(), linux_a, second.Callback()).ok());
  REQUIRE(second.Held());
  CHECK(scheduler->AccumulatedCost("a").value() == doctest::Approx(cost_before + estimate));
  REQUIRE(scheduler
              ->Acquire(Context::Background(), {TypeName("clone"), JobId("git"), FairnessKey("b")},
                        next.Callback())
              .ok());
  CHECK(next.Calls() == 0);  // the one slot is the second clone's
  clock.Set(12);
  {
    std::optional<Permit> taken;
    {
      std::lock_guard lock(second.mutex);
      taken = std::move(second.permit);
    }
    taken->ReleaseUnused(absl::CancelledError("the client went away"));
    CHECK_FALSE(taken->held());
    taken->ReleaseUnused();  // empty now: does nothing
  }
  CHECK(scheduler->Estimate(TypeName("clone"), JobId("linux")).value() == estimate);
  CHECK(scheduler->AccumulatedCost("a").value() == cost_before);
  CHECK(next.Held());  // the slot went to the waiter
  next.Release();
  std::string metrics;
  scheduler->WriteMetrics(metrics);
  CHECK(metrics.find("status=\"cancelled\"") != std::string::npos);
  REQUIRE(scheduler->Shutdown(Context::Background()).ok());  // events delivered
  const std::vector<std::string> lines = recorder->lines();
  REQUIRE(lines.size() == 3);
  CHECK(lines[0] == absl::StrCat("linux OK 1 ", cost_before));
  CHECK(lines[1] == absl::StrCat("linux CANCELLED 0 ", cost_before));
}

// The key's accumulated cost in `scheduler` (0 if it has none).
double CostOf(const Scheduler& scheduler, std::string_view key) {
  for (const KeyCost& k : scheduler.Snapshot(100).heaviest_keys) {
    if (k.key == key) return k.accumulated_cost;
  }
  return 0;
}

TEST_CASE("Scheduler.TryAcquire.AdmitsAtOnceOrLeavesNothingBehind") {
  Watchdog watchdog("try acquire", 60s);
  auto scheduler = Make(SeedCapacity(1));
  REQUIRE(scheduler->RegisterType("clone", Type(1, 1)).ok());
  StatusOr<Permit> held =
      scheduler->TryAcquire({TypeName("clone"), JobId("linux"), FairnessKey("alice")});
  REQUIRE(held.ok());
  CHECK(held->held());
  CHECK(scheduler->Snapshot().running == 1);
  // The only slot is held: refused, and not queued, not charged.
  const StatusOr<Permit> refused =
      scheduler->TryAcquire({TypeName("clone"), JobId("git"), FairnessKey("bob")});
  CHECK(refused.status().code() == absl::StatusCode::kResourceExhausted);
  CHECK(refused.status().message().find("not admissible now") != std::string::npos);
  Snapshot after = scheduler->Snapshot();
  CHECK(after.pending == 0);
  REQUIRE(after.types.size() == 1);
  CHECK(after.types[0].enqueued == 2);
  CHECK(after.types[0].admitted == 1);
  CHECK(after.types[0].cancelled == 1);
  // Freed, the slot admits nothing of the refused call; a new try takes it.
  held->Release();
  after = scheduler->Snapshot();
  CHECK(after.running == 0);
  CHECK(after.types[0].admitted == 1);
  CHECK(CostOf(*scheduler, "bob") == 0);
  StatusOr<Permit> again =
      scheduler->TryAcquire({TypeName("clone"), JobId("git"), FairnessKey("bob")});
  REQUIRE(again.ok());
  again->Release();
  CHECK(CostOf(*scheduler, "bob") > 0);
  // Refusals are Acquire's.
  CHECK(scheduler->TryAcquire({TypeName("x"), JobId("a"), FairnessKey("k")}).status().code() ==
        absl::StatusCode::kNotFound);
  CHECK(scheduler->TryAcquire({TypeName("clone"), JobId(""), FairnessKey("k")}).status().code() ==
        absl::StatusCode::kInvalidArgument);
  REQUIRE(scheduler->Shutdown(Context::Background()).ok());
  CHECK(scheduler->TryAcquire({TypeName("clone"), JobId("a"), FairnessKey("k")}).status().code() ==
        absl::StatusCode::kUnavailable);
}

// In fair order: a job pending ahead that can run would have been admitted; one that cannot
// (its key paused) does not keep a tried job of another key from the free slot.
TEST_CASE("Scheduler.TryAcquire.PassesPendingJobsThatCannotRun") {
  Watchdog watchdog("try acquire order", 60s);
  auto scheduler = Make(SeedCapacity(2));
  REQUIRE(scheduler->RegisterType("clone", Type(2, 2)).ok());
  REQUIRE(scheduler->PauseKey("paused").ok());
  Outcome waiting;
  REQUIRE(scheduler
              ->Acquire(Context::Background(),
                        {TypeName("clone"), JobId("linux"), FairnessKey("paused")},
                        waiting.Callback())
              .ok());
  CHECK(scheduler->Snapshot().pending == 1);
  StatusOr<Permit> tried =
      scheduler->TryAcquire({TypeName("clone"), JobId("git"), FairnessKey("alice")});
  REQUIRE(tried.ok());
  CHECK(waiting.Calls() == 0);
  tried->Release();
  REQUIRE(scheduler->ResumeKey("paused").ok());
  CHECK(waiting.Held());
  waiting.Release();
}

// Many threads trying while others release: every admission is a try that returned a permit.
// Given up under the scheduler's lock, a refused try is never admitted after it returned (where a
// try built on Acquire and a cancel could be admitted in between, and released unused, teaching
// its estimate a run of no time).
TEST_CASE("Scheduler.TryAcquire.NoRefusedTryIsEverAdmitted") {
  Watchdog watchdog("try acquire race", 120s);
  auto scheduler = Make(SeedCapacity(1));
  REQUIRE(scheduler->RegisterType("clone", Type(1, 1)).ok());
  std::atomic<std::uint64_t> permits{0}, refusals{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) {
        StatusOr<Permit> p =
            scheduler->TryAcquire({TypeName("clone"), JobId("r" + std::to_string(i % 7)),
                                   FairnessKey("k" + std::to_string(t))});
        if (p.ok()) {
          ++permits;
          std::this_thread::yield();  // held a moment: others' tries meet a full cap
          p->Release();
        } else {
          CHECK(p.status().code() == absl::StatusCode::kResourceExhausted);
          ++refusals;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const Snapshot after = scheduler->Snapshot();
  MESSAGE(permits.load() << " permits, " << refusals.load() << " refusals");
  CHECK(permits + refusals == 8000);
  CHECK(after.types[0].admitted == permits.load());
  CHECK(after.types[0].completed == permits.load());
  CHECK(after.types[0].cancelled == refusals.load());
  CHECK(after.running == 0);
  CHECK(after.pending == 0);
}

TEST_CASE("Scheduler.Acquire.APermitReleasesOnceWhenDestroyedMovedOrReleasedTwice") {
  Watchdog watchdog("permit lifetime", 60s);
  auto scheduler = Make(SeedCapacity(1));
  REQUIRE(scheduler->RegisterType("clone", Type(1, 1)).ok());
  {
    Outcome o;
    REQUIRE(scheduler
                ->Acquire(Context::Background(), {TypeName("clone"), JobId("r"), FairnessKey("a")},
                          o.Callback())
                .ok());
    REQUIRE(o.Held());
    Permit moved = std::move(*o.permit);
    CHECK_FALSE(o.permit->held());
    CHECK(moved.held());
    CHECK(scheduler->Snapshot().running == 1);
  }  // `moved` destroyed: released
  CHECK(scheduler->Snapshot().running == 0);
  Outcome x, y;
  REQUIRE(scheduler
              ->Acquire(Context::Background(), {TypeName("clone"), JobId("r"), FairnessKey("a")},
                        x.Callback())
              .ok());
  REQUIRE(scheduler
              ->Acquire(Context::Background(), {TypeName("clone"), JobId("r"), FairnessKey("b")},
                        y.Callback())
              .ok());
  CHECK(y.Calls() == 0);
  Permit p = std::move(*x.permit);
  p.Release();
  p.Release();  // empty now: nothing
  CHECK(y.Held());
  Permit q = std::move(*y.permit);
  q = Permit();  // assignment releases what q held
  CHECK(scheduler->Snapshot().running == 0);
  CHECK(scheduler->Snapshot().types[0].admitted == 3);
}

TEST_CASE("Scheduler.Acquire.ExactlyOnceUnderRacingCancelsDeadlinesReleasesAndShutdown") {
  Watchdog watchdog("acquire stress", 120s);
  SchedulerOptions options = SchedulerOptions::Default();
  options.rule.max_concurrency = 3;
  options.runtime.worker_threads = 1;
  auto scheduler = Make(options);
  REQUIRE(scheduler->RegisterType("clone", Type(3, 3, "git")).ok());
  constexpr int kThreads = 4, kPerThread = 300;
  std::vector<std::atomic<int>> calls(kThreads * kPerThread);
  std::atomic<int> admitted{0}, running{0}, max_running{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 random(t);
      for (int i = 0; i < kPerThread; ++i) {
        const int index = t * kPerThread + i;
        const int mode = static_cast<int>(random() % 4);
        auto [ctx, cancel] =
            mode == 1 ? WithTimeout(Context::Background(), 1ms) : WithCancel(Context::Background());
        auto callback = [&, index](StatusOr<Permit> p) {
          calls[index].fetch_add(1);
          if (!p.ok()) return;
          admitted.fetch_add(1);
          const int now_running = running.fetch_add(1) + 1;
          int seen = max_running.load();
          while (now_running > seen && !max_running.compare_exchange_weak(seen, now_running)) {
          }
          running.fetch_sub(1);
          p->Release();  // inside the callback: may admit the next waiter on this thread
        };
        const std::string id = "r" + std::to_string(index % 5);
        Status s = scheduler->Acquire(
            ctx, {TypeName("clone"), JobId(id), FairnessKey("k" + std::to_string(t))}, callback);
        if (!s.ok()) calls[index].fetch_add(1);  // refused: counted here, never called
        if (mode == 2) cancel();
        if (mode == 3) std::this_thread::yield();
        cancel();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  REQUIRE(Eventually([&] {
    for (auto& c : calls) {
      if (c.load() == 0) return false;
    }
    return true;
  }));
  CHECK(scheduler->Shutdown(Context::Background()).ok());
  for (auto& c : calls) CHECK(c.load() == 1);
  CHECK(admitted.load() > 0);
  CHECK(max_running.load() <= 3);
}

TEST_CASE("Scheduler.Acquire.AsioHandlersRunOnTheirExecutorNeverInline") {
  Watchdog watchdog("asio acquire", 60s);
  auto scheduler = Make(SeedCapacity(1));
  REQUIRE(scheduler->RegisterType("clone", Type(1, 1)).ok());
  boost::asio::io_context io;
  auto strand = boost::asio::make_strand(io);
  std::vector<std::string> seen;
  std::optional<Permit> first;
  AsyncAcquire(*scheduler, Context::Background(), {TypeName("clone"), JobId("r"), FairnessKey("a")},
               boost::asio::bind_executor(strand, [&](StatusOr<Permit> p) {
                 REQUIRE(p.ok());
                 seen.push_back("first");
                 first.emplace(*std::move(p));
               }));
  AsyncAcquire(*scheduler, Context::Background(), {TypeName("clone"), JobId("r"), FairnessKey("b")},
               boost::asio::bind_executor(strand, [&](StatusOr<Permit> p) {
                 REQUIRE(p.ok());
                 seen.push_back("second");
               }));
  AsyncAcquire(*scheduler, Context::Background(),
               {TypeName("unknown"), JobId("r"), FairnessKey("c")},
               boost::asio::bind_executor(strand, [&](StatusOr<Permit> p) {
                 CHECK(p.status().code() == absl::StatusCode::kNotFound);
                 seen.push_back("refused");
               }));
  CHECK(seen.empty());  // admitted at once, but delivered only by the executor
  io.run_for(std::chrono::milliseconds(200));
  io.restart();
  CHECK(seen == std::vector<std::string>{"first", "refused"});
  first->Release();  // admits the second, which is posted to the strand
  io.run_for(std::chrono::milliseconds(200));
  CHECK(seen == std::vector<std::string>{"first", "refused", "second"});
}

// What asio.h's first lines say: a handler without an executor of its own runs on Asio's system
// executor, off the io_context's thread; one bound to the io_context runs inside its run().
TEST_CASE("Scheduler.Acquire.AsioAPlainHandlerRunsOffTheIoContextABoundOneInsideIt") {
  Watchdog watchdog("asio executors", 60s);
  auto scheduler = Make(SeedCapacity(2));
  REQUIRE(scheduler->RegisterType("clone", Type(2, 2)).ok());
  boost::asio::io_context io;
  std::promise<std::thread::id> plain_ran_on;
  std::optional<Permit> plain_permit;
  AsyncAcquire(*scheduler, Context::Background(),
               {TypeName("clone"), JobId("r"), FairnessKey("plain")}, [&](StatusOr<Permit> p) {
                 REQUIRE(p.ok());
                 plain_permit.emplace(*std::move(p));
                 plain_ran_on.set_value(std::this_thread::get_id());
               });
  // Nobody runs `io`, and still the plain handler runs.
  const std::thread::id plain_thread = plain_ran_on.get_future().get();
  CHECK(plain_thread != std::this_thread::get_id());
  std::optional<std::thread::id> bound_ran_on;
  AsyncAcquire(*scheduler, Context::Background(),
               {TypeName("clone"), JobId("s"), FairnessKey("bound")},
               boost::asio::bind_executor(io, [&](StatusOr<Permit> p) {
                 REQUIRE(p.ok());
                 bound_ran_on = std::this_thread::get_id();
               }));
  CHECK_FALSE(bound_ran_on.has_value());  // admitted, but delivered only by io.run()
  io.run_for(std::chrono::milliseconds(200));
  REQUIRE(bound_ran_on.has_value());
  CHECK(*bound_ran_on == std::this_thread::get_id());
  plain_permit->Release();
}

// A permit posted to an executor that is destroyed before it runs the handler is given back
// unused: the slot is free, the estimate has learned nothing (a Release at no time would have
// pulled it from 1 to 0.7), the key's charge is given back.
TEST_CASE("Scheduler.Acquire.AsioAPermitNeverDeliveredIsGivenBackUnused") {
  Watchdog watchdog("asio undelivered", 60s);
  TestClock clock;
  SchedulerOptions options = SeedCapacity(1);
  options.runtime.clock = clock.Fn();
  auto scheduler = Make(options);
  REQUIRE(scheduler->RegisterType("clone", Type(1, 1)).ok());  // default cost 1
  bool delivered = false;
  {
    boost::asio::io_context io;
    AsyncAcquire(*scheduler, Context::Background(),
                 {TypeName("clone"), JobId("linux"), FairnessKey("a")},
                 boost::asio::bind_executor(io, [&](StatusOr<Permit>) { delivered = true; }));
    CHECK(scheduler->Snapshot().running == 1);  // admitted, posted, never run
    CHECK(scheduler->AccumulatedCost("a").value_or(0) == 1.0);
  }
  CHECK_FALSE(delivered);
  CHECK(scheduler->Snapshot().running == 0);
  CHECK(scheduler->Estimate(TypeName("clone"), JobId("linux")).value_or(1.0) == 1.0);
  CHECK(scheduler->AccumulatedCost("a").value_or(0) == 0.0);
}

TEST_CASE("Scheduler.Acquire.AsioUseFutureGivesThePermit") {
  Watchdog watchdog("asio future", 60s);
  auto scheduler = Make(SeedCapacity(1));
  REQUIRE(scheduler->RegisterType("clone", Type(1, 1)).ok());
  std::future<StatusOr<Permit>> result =
      AsyncAcquire(*scheduler, Context::Background(),
                   {TypeName("clone"), JobId("r"), FairnessKey("a")}, boost::asio::use_future);
  StatusOr<Permit> permit = result.get();
  REQUIRE(permit.ok());
  CHECK(permit->held());
  CHECK(scheduler->Snapshot().running == 1);
  permit->Release();
  CHECK(scheduler->Snapshot().running == 0);
}

}  // namespace scheduler_acquire_test
}  // namespace
}  // namespace fairgate

TEST_SUITE_END();

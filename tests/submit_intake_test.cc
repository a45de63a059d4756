// The Submit intake (runtime/submit_intake.h): the stack Submits leave their jobs on without the
// scheduler's lock, the set of types that may use it, and what the scheduler promises about jobs
// that went that way: each is queued in the order its caller submitted it, runs or is told
// exactly once, and a caller's later call finds its earlier Submits queued. Runtime tests run
// over several pool sizes and have watchdogs; none asserts how long anything took.
#include "runtime/submit_intake.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "doctest/doctest.h"
#include "fairgate/observer.h"
#include "fairgate/scheduler.h"
#include "runtime/record_job_name.h"
#include "runtime_test_util.h"
#include "test_job_types.h"

// The runtime's tests: CTest labels them "runtime", and runs them again on other pools and
// under ThreadSanitizer (tests/CMakeLists.txt).
TEST_SUITE_BEGIN("runtime");

namespace fairgate {
namespace {
namespace submit_intake_test {

using namespace std::chrono_literals;
using testing::Eventually;
using testing::Gate;
using testing::Type;
using testing::Watchdog;

struct Entry {
  Entry* next = nullptr;
  int thread = 0;
  int index = 0;
};

TEST_CASE("SubmitIntake.Stack.EveryEntryIsTakenOnceAndEachPushersOldestFirst") {
  constexpr int kThreads = 4;
  constexpr int kPerThread = 20000;
  internal::IntakeStack<Entry> stack;
  std::atomic<int> pushing{kThreads};
  std::vector<std::thread> pushers;
  for (int t = 0; t < kThreads; ++t) {
    pushers.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        auto entry = std::make_unique<Entry>();
        entry->thread = t;
        entry->index = i;
        CHECK(stack.Push(std::move(entry)) >= 1);
      }
      --pushing;
    });
  }
  // The taker runs while they push, as the scheduler's lock holders do.
  std::vector<int> next_index(kThreads, 0);
  int taken = 0;
  bool in_order = true;
  while (pushing > 0 || !stack.empty()) {
    Entry* list = stack.TakeAll();
    for (Entry* e = list; e != nullptr; e = e->next) {
      in_order &= e->index == next_index[e->thread];
      next_index[e->thread] = e->index + 1;
      ++taken;
    }
    internal::IntakeStack<Entry>::FreeList(list);
  }
  for (std::thread& t : pushers) t.join();
  CHECK(in_order);
  CHECK(taken == kThreads * kPerThread);
  CHECK(stack.size() == 0);
  CHECK(stack.TakeAll() == nullptr);
}

TEST_CASE("SubmitIntake.Stack.PushCountsWhatWaitsAndTheDestructorFreesWhatIsLeft") {
  // Under AddressSanitizer a leak of the entries left behind fails the run.
  internal::IntakeStack<Entry> stack;
  CHECK(stack.empty());
  CHECK(stack.Push(std::make_unique<Entry>()) == 1);
  CHECK(stack.Push(std::make_unique<Entry>()) == 2);
  CHECK_FALSE(stack.empty());
  CHECK(stack.size() == 2);
}

// The scheduler's entries live inside their job's record, which they own while they wait: the
// stack hands what it still holds at its end to a deleter that gives that ownership up. The stack
// keeps raw pointers, so its deleter is a type, default-constructed where it disposes.
struct CountingDelete {
  static inline int deleted = 0;
  void operator()(Entry* e) const {
    ++deleted;
    delete e;
  }
};

TEST_CASE("SubmitIntake.Stack.WhatIsLeftGoesToItsDeleterOnce") {
  CountingDelete::deleted = 0;
  {
    internal::IntakeStack<Entry, CountingDelete> stack;
    auto push = [&] { stack.Push(std::unique_ptr<Entry, CountingDelete>(new Entry)); };
    push();
    push();
    internal::IntakeStack<Entry, CountingDelete>::FreeList(stack.TakeAll());
    CHECK(CountingDelete::deleted == 2);
    push();
    push();
    push();
    CHECK(CountingDelete::deleted == 2);  // held, not disposed of
  }
  CHECK(CountingDelete::deleted == 5);  // the three left, at the stack's end
}

TEST_CASE("SubmitIntake.NameSet.ANameAddedIsSeenByReadersOnOtherThreadsAndStays") {
  internal::GrowOnlyNameSet names;
  CHECK_FALSE(names.Contains("clone"));
  std::atomic<bool> added{false}, stop{false};
  std::atomic<int> lost{0};
  std::thread reader([&] {
    while (!stop) {
      const bool seen_added = added;
      if (seen_added && !names.Contains("clone")) ++lost;
      (void)names.Contains("type-" + std::to_string(lost.load() % 50));
    }
  });
  names.Add("clone");
  added = true;
  for (int i = 0; i < 100; ++i) names.Add("type-" + std::to_string(i));
  names.Add("clone");  // again: no change
  stop = true;
  reader.join();
  CHECK(lost == 0);
  CHECK(names.Contains("clone"));
  CHECK(names.Contains("type-99"));
  CHECK_FALSE(names.Contains("type-100"));
}

std::unique_ptr<Scheduler> MakeScheduler(int capacity, int worker_threads) {
  SchedulerOptions options = SchedulerOptions::Default();
  options.rule.max_concurrency = capacity;
  options.runtime.worker_threads = worker_threads;
  auto scheduler = Scheduler::Create(testing::WithPoolUnderTest(options));
  REQUIRE_MESSAGE(scheduler.ok(), scheduler.status().message());
  return *std::move(scheduler);
}

// Submits a job of `type` that holds its slot until `hold` opens, and waits until it runs.
void HoldASlot(Scheduler& scheduler, std::string_view type, Gate& hold) {
  REQUIRE(scheduler
              .Submit(
                  {TypeName(type), JobId("blocker")},
                  [&hold](const Context&) {
                    return hold.Wait() ? absl::OkStatus() : absl::InternalError("gate");
                  },
                  nullptr)
              .ok());
  REQUIRE(Eventually([&] { return scheduler.Snapshot().running == 1; }));
}

// While the only slot is held, Submits from several threads wait in the intake (nothing can be
// admitted before a completion): a snapshot taken after they returned counts them all, and once
// the slot is free they run one at a time in the order of their arrival, so each thread's jobs
// run in the order it submitted them.
TEST_CASE("Scheduler.Intake.SubmitsFromManyThreadsRunOnceEachInTheirCallersOrder") {
  for (int workers : {1, 2, 4}) {
    CAPTURE(workers);
    Watchdog watchdog("intake order", 120s);
    constexpr int kThreads = 4;
    constexpr int kPerThread = 500;
    auto scheduler = MakeScheduler(1, workers);
    REQUIRE(scheduler->RegisterType("t", Type(1, 1)).ok());
    Gate hold;
    HoldASlot(*scheduler, "t", hold);
    std::mutex mutex;
    std::vector<std::pair<int, int>> ran;
    std::vector<std::atomic<int>> told(kThreads * kPerThread);
    std::vector<std::thread> submitters;
    for (int t = 0; t < kThreads; ++t) {
      submitters.emplace_back([&, t] {
        for (int i = 0; i < kPerThread; ++i) {
          Status s = scheduler->Submit(
              {TypeName("t"), JobId("r")},
              [&, t, i](const Context&) {
                std::lock_guard lock(mutex);
                ran.emplace_back(t, i);
                return absl::OkStatus();
              },
              [&, t, i](const Status& status) {
                CHECK(status.ok());
                ++told[t * kPerThread + i];
              });
          CHECK(s.ok());
        }
      });
    }
    for (std::thread& t : submitters) t.join();
    const Snapshot waiting = scheduler->Snapshot();
    CHECK(waiting.pending == kThreads * kPerThread);
    CHECK(waiting.running == 1);
    hold.Open();
    REQUIRE(scheduler->Drain(Context::Background()).ok());
    CHECK(ran.size() == static_cast<std::size_t>(kThreads * kPerThread));
    std::vector<int> next(kThreads, 0);
    bool in_order = true;
    for (const auto& [t, i] : ran) {
      in_order &= i == next[t];
      next[t] = i + 1;
    }
    CHECK(in_order);
    int told_once = 0;
    for (const std::atomic<int>& n : told) told_once += n == 1;
    CHECK(told_once == kThreads * kPerThread);
  }
}

// A Submit that waits in the intake keeps its names only in its record (one buffer, inline up to
// its capacity, runtime/record_job_name.h): names of every length, at and past that capacity,
// reach the queue whole, as the observers' admissions show.
struct AdmissionNames : Observer {
  std::mutex mutex;
  std::vector<std::vector<std::string>> admitted;  // type, id, key of each admission, in order
  void OnEvent(const JobEvent& event) override {
    if (event.kind != JobEvent::Kind::kAdmit) return;
    std::lock_guard lock(mutex);
    admitted.push_back({event.type, event.id, event.key});
  }
};

TEST_CASE("Scheduler.Intake.NamesOfEveryLengthAreQueuedWhole") {
  Watchdog watchdog("intake names", 60s);
  auto names = std::make_shared<AdmissionNames>();
  SchedulerOptions options = SchedulerOptions::Default();
  options.rule.max_concurrency = 1;
  options.runtime.observers = {names};
  StatusOr<std::unique_ptr<Scheduler>> made =
      Scheduler::Create(testing::WithPoolUnderTest(options));
  REQUIRE_MESSAGE(made.ok(), made.status().message());
  Scheduler& scheduler = **made;
  // One long type name too: every name may pass the inline capacity on its own.
  const std::string long_type(60, 't');
  REQUIRE(scheduler.RegisterType("t", Type(1, 1)).ok());
  REQUIRE(scheduler.RegisterType(long_type, Type(1, 1)).ok());
  Gate hold;
  HoldASlot(scheduler, "t", hold);  // the cap is full: each Submit waits in the intake
  const std::vector<std::vector<std::string>> submitted = {
      {"t", "r", ""},
      {"t", std::string(internal::RecordJobName::kInline - 3, 'a'), "k2"},  // the capacity exactly
      {"t", std::string(internal::RecordJobName::kInline - 2, 'b'), "k2"},  // one byte past it
      {long_type, std::string(300, 'c'), std::string(200, 'd')},
  };
  for (const auto& n : submitted) {
    REQUIRE(scheduler
                .Submit({TypeName(n[0]), JobId(n[1]), FairnessKey(n[2])},
                        [](const Context&) { return absl::OkStatus(); })
                .ok());
  }
  hold.Open();
  REQUIRE(scheduler.Drain(Context::Background()).ok());
  std::lock_guard lock(names->mutex);
  REQUIRE(names->admitted.size() == submitted.size() + 1);  // the held slot's job first
  // In the order of their keys' charges, not of submission: compared as sets.
  std::vector<std::vector<std::string>> queued(names->admitted.begin() + 1, names->admitted.end());
  std::vector<std::vector<std::string>> expected = submitted;
  std::sort(queued.begin(), queued.end());
  std::sort(expected.begin(), expected.end());
  CHECK(queued == expected);
}

// A Submit that waits in the intake is in the queue for the next call: a RunSync of the same id
// of a coalescing type joins its job, so the work runs once (the RunSync caller's function, as
// for any job a waiting RunSync joined) and both are told its status.
TEST_CASE("Scheduler.Intake.ARunSyncAfterASubmitJoinsItsJob") {
  Watchdog watchdog("intake join", 60s);
  auto scheduler = MakeScheduler(1, 2);
  JobTypeConfig mirror = Type(1, 1);
  mirror.coalesce = Coalesce::kJoin;
  REQUIRE(scheduler->RegisterType("mirror", mirror).ok());
  REQUIRE(scheduler->RegisterType("hold", Type(1, 1)).ok());
  Gate hold;
  HoldASlot(*scheduler, "hold", hold);
  std::atomic<int> submit_ran{0}, sync_ran{0};
  std::promise<Status> told;
  REQUIRE(scheduler
              ->Submit(
                  {TypeName("mirror"), JobId("linux.git"), FairnessKey("bob")},
                  [&](const Context&) {
                    ++submit_ran;
                    return absl::OkStatus();
                  },
                  [&](const Status& s) { told.set_value(testing::Own(s)); })
              .ok());
  Status sync_status;
  std::thread caller([&] {
    sync_status = scheduler->RunSync(Context::Background(),
                                     {TypeName("mirror"), JobId("linux.git"), FairnessKey("alice")},
                                     [&](const Context&) {
                                       ++sync_ran;
                                       return absl::AbortedError("the run's status");
                                     });
  });
  REQUIRE(Eventually([&] { return scheduler->Snapshot().types[0].joined == 1; }));
  CHECK(scheduler->Snapshot().pending == 1);
  hold.Open();
  caller.join();
  CHECK(sync_status.code() == absl::StatusCode::kAborted);
  CHECK(told.get_future().get().code() == absl::StatusCode::kAborted);
  CHECK(sync_ran == 1);
  CHECK(submit_ran == 0);
}

// Submits racing Shutdown: each either is refused by its call (Unavailable, and its callback is
// never called) or returns OK and is told exactly once, by its callback, whether it ran.
TEST_CASE("Scheduler.Intake.SubmitsRacingShutdownAreEachToldExactlyOnce") {
  for (int workers : {1, 4}) {
    CAPTURE(workers);
    Watchdog watchdog("intake shutdown", 120s);
    auto scheduler = MakeScheduler(2, workers);
    REQUIRE(scheduler->RegisterType("t", Type(2, 2)).ok());
    constexpr int kThreads = 4;
    std::atomic<int> accepted{0}, refused{0}, told{0}, ran{0}, told_cancelled{0};
    std::vector<std::thread> submitters;
    for (int t = 0; t < kThreads; ++t) {
      // Each submits until refused: after Shutdown began, every call is.
      submitters.emplace_back([&] {
        for (;;) {
          Status s = scheduler->Submit(
              {TypeName("t"), JobId("r")},
              [&](const Context&) {
                ++ran;
                return absl::OkStatus();
              },
              [&](const Status& status) {
                ++told;
                if (status.code() == absl::StatusCode::kCancelled) ++told_cancelled;
              });
          if (!s.ok()) {
            CHECK(s.code() == absl::StatusCode::kUnavailable);
            ++refused;
            return;
          }
          ++accepted;
        }
      });
    }
    REQUIRE(Eventually([&] { return accepted > 2000; }));
    REQUIRE(scheduler->Shutdown(Context::Background()).ok());
    for (std::thread& t : submitters) t.join();
    // A call that began before Shutdown may have been accepted after it returned; it is told
    // too, at the latest before the destructor returns.
    scheduler.reset();
    CHECK(told == accepted);
    CHECK(ran + told_cancelled == accepted);
    CHECK(refused == kThreads);
  }
}

}  // namespace submit_intake_test
}  // namespace
}  // namespace fairgate

TEST_SUITE_END();

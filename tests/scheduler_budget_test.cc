// Sharing a worker thread: a chain of Submit jobs run back to back on one fiber yields to the
// thread's other fibers every kChainBudget, and a long computation that calls YieldToOtherJobs
// lets them run. With one worker thread, so that nothing else could run the other work. Fibers
// only: the thread build runs each job on its thread to the end.
#include <atomic>
#include <condition_variable>
#include <mutex>

#include "doctest/doctest.h"
#include "fairgate/scheduler.h"
#include "runtime/waiting.h"
#include "runtime_test_util.h"
#include "test_job_types.h"

// The runtime's tests: CTest labels them "runtime", and runs them again on other pools and
// under ThreadSanitizer (tests/CMakeLists.txt).
TEST_SUITE_BEGIN("runtime");

namespace fairgate {
namespace {
namespace scheduler_budget_test {

// Two slots in one tier (its priority is its cap), one per type.
std::unique_ptr<Scheduler> OneWorker() {
  SchedulerOptions options;
  options.rule.max_concurrency = 2;
  options.runtime.worker_threads = 1;
  auto scheduler = *Scheduler::Create(options);
  REQUIRE(scheduler->RegisterType("chain", testing::Type(2, 1)).ok());
  REQUIRE(scheduler->RegisterType("other", testing::Type(2, 1)).ok());
  return scheduler;
}

TEST_CASE("Scheduler.Budget.AChainOfJobsLetsOtherWorkOnItsThreadRun") {
  if (internal::kThreadRuntime) return;
  auto scheduler = OneWorker();
  constexpr int kChain = 20000;
  std::atomic<int> chained{0};
  std::atomic<int> other_ran_at{-1};
  // The first job of the chain holds the one worker thread (a blocking wait, not a fiber's)
  // until everything is queued; then the chain's jobs run one after the other on its fiber.
  std::mutex mutex;
  std::condition_variable cv;
  bool go = false;
  REQUIRE(scheduler
              ->Submit({TypeName("chain"), JobId("first")},
                       [&](const Context&) {
                         std::unique_lock lock(mutex);
                         cv.wait(lock, [&] { return go; });
                         return absl::OkStatus();
                       })
              .ok());
  for (int i = 0; i < kChain; ++i) {
    REQUIRE(scheduler
                ->Submit({TypeName("chain"), JobId("next")},
                         [&](const Context&) {
                           chained.fetch_add(1);
                           return absl::OkStatus();
                         })
                .ok());
  }
  // Admitted at once (its own type's slot): posted to the pool, behind the running chain.
  REQUIRE(scheduler
              ->Submit({TypeName("other"), JobId("x")},
                       [&](const Context&) {
                         other_ran_at = chained.load();
                         return absl::OkStatus();
                       })
              .ok());
  {
    std::lock_guard lock(mutex);
    go = true;
  }
  cv.notify_all();
  REQUIRE(testing::Eventually([&] { return chained.load() == kChain && other_ran_at >= 0; }));
  INFO("the other job ran after " << other_ran_at.load() << " jobs of the chain");
  CHECK(other_ran_at.load() < kChain);
}

TEST_CASE("Scheduler.Budget.ALongJobThatYieldsLetsOthersOnItsThreadRun") {
  if (internal::kThreadRuntime) return;
  auto scheduler = OneWorker();
  std::atomic<bool> other_ran{false}, gave_up{false};
  testing::Gate done;
  REQUIRE(scheduler
              ->Submit({TypeName("chain"), JobId("long")},
                       [&](const Context&) {
                         // Computes until the other job has run; it would never run without the
                         // yield.
                         const auto give_up =
                             std::chrono::steady_clock::now() + std::chrono::seconds(20);
                         while (!other_ran.load()) {
                           if (std::chrono::steady_clock::now() > give_up) {
                             gave_up = true;
                             break;
                           }
                           YieldToOtherJobs();
                         }
                         done.Open();
                         return absl::OkStatus();
                       })
              .ok());
  REQUIRE(scheduler
              ->Submit({TypeName("other"), JobId("x")},
                       [&](const Context&) {
                         other_ran = true;
                         return absl::OkStatus();
                       })
              .ok());
  REQUIRE(done.Wait());
  CHECK(other_ran.load());
  CHECK_FALSE(gave_up.load());
}

}  // namespace scheduler_budget_test
}  // namespace
}  // namespace fairgate

TEST_SUITE_END();

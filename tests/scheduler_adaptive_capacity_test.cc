// Adaptive capacity through the Scheduler (fairgate/adaptive_capacity.h): the rule itself, the
// cap following an injected stall counter, what a lowered cap admits, and the refusals. The
// counter is injected, so nothing depends on this machine's load; waits are for conditions,
// with generous bounds, and no test asserts how long anything took.
#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "doctest/doctest.h"
#include "fairgate/scheduler.h"
#include "runtime/cpu_pressure.h"
#include "runtime_test_util.h"
#include "test_job_types.h"

// The runtime's tests: CTest labels them "runtime", and runs them again on other pools and
// under ThreadSanitizer (tests/CMakeLists.txt).
TEST_SUITE_BEGIN("runtime");

namespace fairgate {
namespace {

using namespace std::chrono_literals;
using testing::Eventually;
using testing::Gate;
using testing::Watchdog;

TEST_CASE("AdaptiveCapacity.Rule.ShrinksMultiplicativelyGrowsByOneAndStaysInItsBounds") {
  AdaptiveCapacity rule;  // min 1, high 0.2, low 0.05, decrease 0.75
  rule.min = 2;
  CHECK(NextCapacity(rule, 8, 8, 0.5, true) == 6);    // floor(8 * 0.75)
  CHECK(NextCapacity(rule, 3, 8, 0.5, true) == 2);    // floor(2.25), and at least one less
  CHECK(NextCapacity(rule, 2, 8, 1.0, true) == 2);    // never below min
  CHECK(NextCapacity(rule, 6, 8, 0.01, true) == 7);   // room and work waiting: one more
  CHECK(NextCapacity(rule, 6, 8, 0.01, false) == 6);  // nothing waits: no reason to grow
  CHECK(NextCapacity(rule, 8, 8, 0.0, true) == 8);    // never above max_concurrency
  CHECK(NextCapacity(rule, 5, 8, 0.1, true) == 5);    // between low and high: it stays
  rule.decrease = 0.99;
  CHECK(NextCapacity(rule, 5, 8, 0.5, true) == 4);  // a shrink takes at least one slot
}

TEST_CASE("AdaptiveCapacity.Options.BadRulesAreRefusedNamingTheField") {
  auto refusal = [](AdaptiveCapacity rule) {
    SchedulerOptions options = SchedulerOptions::Default();
    options.rule.max_concurrency = 4;
    rule.stalled_seconds = [] { return StatusOr<double>(0.0); };
    options.rule.adaptive_capacity = rule;
    auto created = Scheduler::Create(testing::WithPoolUnderTest(options));
    CHECK(created.status().code() == absl::StatusCode::kInvalidArgument);
    return std::string(created.status().message());
  };
  CHECK(refusal({.min = 0}) ==
        "rule.adaptive_capacity.min must be in [1, max_concurrency 4], got 0");
  CHECK(refusal({.min = 5}) ==
        "rule.adaptive_capacity.min must be in [1, max_concurrency 4], got 5");
  CHECK(refusal({.interval = Seconds(0)}) ==
        "rule.adaptive_capacity.interval must be finite and > 0, got 0");
  CHECK(refusal({.high = 1.5}) == "rule.adaptive_capacity.high must be in (0, 1], got 1.5");
  CHECK(refusal({.high = 0.2, .low = 0.2}) ==
        "rule.adaptive_capacity.low must be in [0, high 0.2), got 0.2");
  CHECK(refusal({.decrease = 1}) == "rule.adaptive_capacity.decrease must be in (0, 1), got 1");
}

TEST_CASE("AdaptiveCapacity.Signal.TheKernelCounterIsReadAndAMissingOneIsAClearError") {
  const StatusOr<double> missing = internal::ReadCpuStallSeconds("/nonexistent/pressure/cpu");
  CHECK(missing.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(std::string(missing.status().message()).find("/nonexistent/pressure/cpu") !=
        std::string::npos);
  // This machine's kernel has PSI (the Debian 12 kernels do): a counter that does not go back.
  const StatusOr<double> first = internal::ReadCpuStallSeconds();
  REQUIRE_MESSAGE(first.ok(), first.status().message());
  const StatusOr<double> second = internal::ReadCpuStallSeconds();
  REQUIRE(second.ok());
  CHECK(*second >= *first);
}

// A stall counter the test drives: while `stalling`, it grows by a second per reading (pressure
// 1 over any interval shorter than that), else it stands still (pressure 0).
struct FakeStall {
  std::atomic<bool> stalling = false;
  std::atomic<bool> failing = false;
  std::atomic<double> total = 0;
  std::function<StatusOr<double>()> Source() {
    return [this]() -> StatusOr<double> {
      if (failing) return absl::UnavailableError("no signal");
      if (stalling) total = total + 1.0;
      return total.load();
    };
  }
};

TEST_CASE("AdaptiveCapacity.Scheduler.TheCapFollowsPressureAndALowerCapAdmitsLess") {
  Watchdog watchdog("adaptive capacity", 60s);
  FakeStall stall;
  SchedulerOptions options = SchedulerOptions::Default();
  options.rule.max_concurrency = 4;
  options.rule.adaptive_capacity =
      AdaptiveCapacity{.min = 1, .interval = Seconds(0.01), .stalled_seconds = stall.Source()};
  auto created = Scheduler::Create(testing::WithPoolUnderTest(options));
  REQUIRE(created.ok());
  std::unique_ptr<Scheduler> scheduler = *std::move(created);
  REQUIRE(scheduler->RegisterType("build", testing::Type(4, 4)).ok());
  CHECK(scheduler->Snapshot().capacity == 4);  // it starts where a fixed cap would be

  // Under pressure the cap falls to its minimum: 4 -> 3 -> 2 -> 1.
  stall.stalling = true;
  REQUIRE(Eventually([&] { return scheduler->Snapshot().capacity == 1; }));
  std::string metrics;
  scheduler->WriteMetrics(metrics);
  CHECK(metrics.find("fairgate_capacity 1\n") != std::string::npos);
  CHECK(metrics.find("fairgate_capacity_max 4\n") != std::string::npos);

  // Three jobs that hold their slots: one runs, two wait.
  Gate release;
  std::vector<std::promise<Status>> done(3);
  for (auto& d : done) {
    REQUIRE(scheduler
                ->Submit(
                    {TypeName("build"), JobId("x"), FairnessKey("k")},
                    [&](const Context&) {
                      return release.Wait() ? absl::OkStatus() : absl::InternalError("gate");
                    },
                    [&d](const Status& s) { d.set_value(testing::Own(s)); })
                .ok());
  }
  REQUIRE(Eventually([&] { return scheduler->Snapshot().running == 1; }));
  CHECK(scheduler->Snapshot().pending == 2);

  // A signal that cannot be read leaves the cap where it is, counted.
  stall.failing = true;
  REQUIRE(Eventually([&] {
    std::string m;
    scheduler->WriteMetrics(m);
    return m.find("fairgate_capacity_signal_errors_total 0\n") == std::string::npos;
  }));
  CHECK(scheduler->Snapshot().capacity == 1);
  stall.failing = false;

  // The pressure is gone and work waits: the cap grows one slot per interval and admits it.
  stall.stalling = false;
  REQUIRE(Eventually([&] { return scheduler->Snapshot().running == 3; }));
  CHECK(scheduler->Snapshot().capacity >= 3);
  release.Open();
  for (auto& d : done) CHECK(d.get_future().get().ok());
  // Nothing waits any more: the cap grows no further than that need, up to max_concurrency.
  CHECK(scheduler->Snapshot().capacity <= 4);
  REQUIRE(scheduler->Drain(Context::Background()).ok());
}

}  // namespace
}  // namespace fairgate

TEST_SUITE_END();

// The latency rule through the Scheduler (fairgate/latency_capacity.h): the cap starts at its
// minimum and follows the run times the scheduler measures on its own clock. The clock is the
// test's (SchedulerOptions::clock), and the test plays a machine on it: each round, the permits it
// holds run for 1 s times max(1, held / cores), then are released, and as many jobs are asked for
// again. Nothing depends on this machine's speed: the rule's intervals pass on the timer, and the
// test waits for the cap it expects, round after round, within a generous bound.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "doctest/doctest.h"
#include "fairgate/scheduler.h"
#include "runtime_test_util.h"
#include "test_job_types.h"

// The runtime's tests: CTest labels them "runtime", and runs them again on other pools and
// under ThreadSanitizer (tests/CMakeLists.txt).
TEST_SUITE_BEGIN("runtime");

namespace fairgate {
namespace {
namespace scheduler_latency_capacity_test {

using namespace std::chrono_literals;
using testing::Eventually;
using testing::Watchdog;

// A machine of `cores` on the test's clock, running the jobs of one scheduler (see above).
class Machine {
 public:
  static constexpr int kInFlight = 16;  // jobs asked for at once: always more than the cap

  std::function<Seconds()> Clock() {
    return [this] { return Seconds(now_.load()); };
  }
  void SetCores(int cores) { cores_ = cores; }
  void Ask(Scheduler& scheduler, int n) {
    for (int i = 0; i < n; ++i) {
      REQUIRE(scheduler
                  .Acquire(Context::Background(), {TypeName("build"), JobId("x"), FairnessKey("k")},
                           [this](StatusOr<Permit> permit) {
                             if (!permit.ok()) return;  // the scheduler shut down
                             std::lock_guard lock(mutex_);
                             // Closing: released at once (by the destructor, on return).
                             if (!closing_) granted_.push_back(*std::move(permit));
                           })
                  .ok());
    }
  }
  // One round: the jobs held run (the clock moves on by their run time), end, and as many are
  // asked for again.
  void Round(Scheduler& scheduler) {
    std::vector<Permit> held;
    {
      std::lock_guard lock(mutex_);
      held = std::move(granted_);
      granted_.clear();
    }
    if (held.empty()) return;
    const double stretch = std::max(1.0, static_cast<double>(held.size()) / cores_.load());
    now_ = now_.load() + stretch;
    for (Permit& permit : held) permit.Release();
    Ask(scheduler, static_cast<int>(held.size()));
  }
  // From now on every permit is released as soon as it is granted; those held are released.
  void ReleaseAll() {
    std::vector<Permit> held;
    {
      std::lock_guard lock(mutex_);
      closing_ = true;
      held = std::move(granted_);
    }
    held.clear();  // their destructors release them (and the jobs that follow are granted)
  }

 private:
  std::atomic<double> now_ = 0;
  std::atomic<int> cores_ = 2;
  std::mutex mutex_;
  std::vector<Permit> granted_;
  bool closing_ = false;  // guarded by mutex_
};

TEST_CASE("LatencyCapacity.Scheduler.TheCapStartsAtItsMinimumAndFollowsTheMachinesKnee") {
  Watchdog watchdog("the latency rule", 120s);
  Machine machine;
  SchedulerOptions options = SchedulerOptions::Default();
  options.rule.max_concurrency = 8;
  options.rule.latency_capacity =
      LatencyCapacity{.min = 1, .interval = Seconds(0.005), .remeasure_every = 8};
  options.runtime.clock = machine.Clock();
  auto created = Scheduler::Create(testing::WithPoolUnderTest(options));
  REQUIRE_MESSAGE(created.ok(), created.status().message());
  std::unique_ptr<Scheduler> scheduler = *std::move(created);
  REQUIRE(scheduler->RegisterType("build", testing::Type(8, 8)).ok());
  auto capacity = [&] { return scheduler->Snapshot().capacity; };
  CHECK(capacity() == 1);  // the rule's minimum, before anything ran
  absl::Cleanup finish = [&] {
    machine.ReleaseAll();
    (void)scheduler->Shutdown(Context::Background());
  };
  machine.Ask(*scheduler, Machine::kInFlight);
  auto rounds_until = [&](const std::function<bool(int)>& reached) {
    return Eventually([&] {
      machine.Round(*scheduler);
      return reached(capacity());
    });
  };
  // Two cores: runs keep their speed up to 2 at once, so the cap grows past 1, to 3 (a probe or
  // the first growth past the knee), where runs take 1.5 s, and comes back to 2.
  REQUIRE(rounds_until([](int cap) { return cap >= 3; }));
  REQUIRE(rounds_until([](int cap) { return cap == 2; }));
  // Six cores: probes pass, and the cap climbs to 6 at least.
  machine.SetCores(6);
  REQUIRE(rounds_until([](int cap) { return cap >= 6; }));
  // One core: every run past the first is slower; the cap falls to 1.
  machine.SetCores(1);
  REQUIRE(rounds_until([](int cap) { return cap == 1; }));
  // The metric follows the cap.
  std::string metrics;
  scheduler->WriteMetrics(metrics);
  CHECK(metrics.find("\nfairgate_capacity ") != std::string::npos);
}

// Refused at Create, naming the field; not with adaptive capacity.
TEST_CASE("LatencyCapacity.Scheduler.BadRulesAreRefusedAtCreate") {
  SchedulerOptions options = SchedulerOptions::Default();
  options.rule.max_concurrency = 4;
  options.rule.latency_capacity = LatencyCapacity{.min = 5};
  auto created = Scheduler::Create(testing::WithPoolUnderTest(options));
  REQUIRE_FALSE(created.ok());
  CHECK(created.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(created.status().message()) ==
        "rule.latency_capacity.min must be in [1, max_concurrency 4], got 5");
  options.rule.latency_capacity = LatencyCapacity{};
  options.rule.adaptive_capacity = AdaptiveCapacity{};
  options.rule.adaptive_capacity->stalled_seconds = [] { return StatusOr<double>(0.0); };
  created = Scheduler::Create(testing::WithPoolUnderTest(options));
  REQUIRE_FALSE(created.ok());
  CHECK(std::string(created.status().message()) ==
        "rule.latency_capacity and rule.adaptive_capacity: at most one rule may move the cap");
}

}  // namespace scheduler_latency_capacity_test
}  // namespace
}  // namespace fairgate

TEST_SUITE_END();

// Faults from outside: a clock that jumps by hours and steps back, exceptions that are not
// std::exceptions, a million clients that each come once. The scheduler keeps its promises:
// every job runs or is told it did not, exactly once, and memory comes back.
#include <malloc.h>

#include <atomic>
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
namespace faults_test {

using namespace std::chrono_literals;
using testing::Eventually;
using testing::TestClock;
using testing::Type;
using testing::Watchdog;

TEST_CASE("Faults.Clock.JumpsForwardByHoursAndStepsBack") {
  Watchdog watchdog("clock jumps", 60s);
  TestClock clock(1000);
  SchedulerOptions options;
  options.runtime.clock = clock.Fn();
  options.rule.max_concurrency = 2;
  options.rule.key_ttl = Seconds(600);
  options.runtime.sweep_interval = Seconds(0.001);
  options.rule.aging = AgingConfig{Seconds(60), Seconds(60), 8};
  auto scheduler = *Scheduler::Create(options);
  REQUIRE(scheduler->RegisterType("clone", Type(8, 8, "", 1)).ok());
  REQUIRE(scheduler->RegisterType("repack", Type(1, 1, "", 1)).ok());
  auto jump = [&](double by) { return clock.Takes(by); };
  // A job during which the clock jumps three hours ahead: it is charged and learned as such.
  REQUIRE(scheduler
              ->RunSync(Context::Background(),
                        {TypeName("clone"), JobId("big"), FairnessKey("alice")}, jump(3 * 3600))
              .ok());
  CHECK(scheduler->Estimate(TypeName("clone"), JobId("big")) ==
        doctest::Approx(0.3 * 10800 + 0.7 * 1));
  // A job during which the clock steps back an hour: its run time counts as zero.
  REQUIRE(scheduler
              ->RunSync(Context::Background(),
                        {TypeName("clone"), JobId("small"), FairnessKey("alice")}, jump(-3600))
              .ok());
  CHECK(scheduler->Estimate(TypeName("clone"), JobId("small")) == doctest::Approx(0.7));
  // Jobs enqueued after the step back (earlier arrival times than older ones) still all run.
  std::atomic<int> done{0};
  for (int i = 0; i < 20; ++i) {
    REQUIRE(scheduler
                ->Submit({TypeName("repack"), JobId("r" + std::to_string(i))},
                         jump(i % 2 ? 7200 : -7200),
                         [&](const Status& s) {
                           CHECK(s.ok());
                           ++done;
                         })
                .ok());
  }
  REQUIRE(Eventually([&] { return done == 20; }));
  // A jump far past every TTL: idle keys are forgotten, and nothing pending or running is.
  clock.Advance(24 * 3600);
  CHECK(Eventually([&] { return scheduler->Snapshot().keys_tracked == 0; }));
  REQUIRE(scheduler
              ->RunSync(Context::Background(),
                        {TypeName("clone"), JobId("small"), FairnessKey("bob")}, jump(0))
              .ok());
  const Snapshot s = scheduler->Snapshot();
  CHECK(s.running == 0);
  CHECK(s.pending == 0);
}

struct NotAStdException {
  int code;
};

TEST_CASE("Faults.Exceptions.NonStandardOnesBecomeInternalEverywhere") {
  Watchdog watchdog("non-standard exceptions", 60s);
  auto scheduler = *Scheduler::Create(SchedulerOptions{});
  REQUIRE(scheduler->RegisterType("t", Type(8, 8)).ok());
  auto throws = [](auto what) { return [what](const Context&) -> Status { throw what; }; };
  for (const Status& s :
       {scheduler->RunSync(Context::Background(), {TypeName("t"), JobId("a"), FairnessKey("k")},
                           throws(NotAStdException{7})),
        scheduler->RunSync(Context::Background(), {TypeName("t"), JobId("b"), FairnessKey("k")},
                           throws(std::string("text"))),
        scheduler->RunSync(Context::Background(), {TypeName("t"), JobId("c"), FairnessKey("k")},
                           throws(3.5))}) {
    CHECK(s == absl::InternalError("job function threw: an exception that is not a "
                                   "std::exception"));
  }
  std::vector<std::promise<Status>> reported(3);
  REQUIRE(scheduler
              ->Submit({TypeName("t"), JobId("d")}, throws(NotAStdException{1}),
                       [&](const Status& s) { reported[0].set_value(s); })
              .ok());
  REQUIRE(scheduler
              ->Submit({TypeName("t"), JobId("e")}, throws(nullptr),
                       [&](const Status& s) { reported[1].set_value(s); })
              .ok());
  REQUIRE(scheduler
              ->Submit({TypeName("t"), JobId("f")}, throws('x'),
                       [&](const Status& s) { reported[2].set_value(s); })
              .ok());
  for (auto& r : reported) CHECK(r.get_future().get().code() == absl::StatusCode::kInternal);
  CHECK(scheduler->Snapshot().running == 0);
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

// Heap bytes in use, from the allocator itself.
std::size_t HeapInUse() { return mallinfo2().uordblks; }

TEST_CASE("Faults.Keys.AMillionEphemeralKeysLeaveNoMemoryBehind" *
          doctest::skip(kSanitized)) {  // sanitizers' allocators do not report through mallinfo2
  Watchdog watchdog("a million keys", 300s);
  TestClock clock;
  SchedulerOptions options;
  options.runtime.clock = clock.Fn();
  options.rule.key_ttl = Seconds(60);
  options.runtime.sweep_interval = Seconds(0.0005);
  options.rule.sweep_batch = 65536;
  auto scheduler = *Scheduler::Create(options);
  REQUIRE(scheduler->RegisterType("clone", Type(8, 8)).ok());
  auto noop = [](const Context&) { return absl::OkStatus(); };
  // Warm up what stays: the estimate of (clone, repo), the pool, the metrics.
  for (int i = 0; i < 1000; ++i) {
    REQUIRE(scheduler
                ->RunSync(Context::Background(),
                          {TypeName("clone"), JobId("repo"), FairnessKey("warm")}, noop)
                .ok());
  }
  malloc_trim(0);
  const std::size_t before = HeapInUse();

  constexpr int kKeys = 1000000;
  for (int i = 0; i < kKeys; ++i) {
    REQUIRE(scheduler
                ->RunSync(
                    Context::Background(),
                    {TypeName("clone"), JobId("repo"), FairnessKey("client-" + std::to_string(i))},
                    noop)
                .ok());
  }
  const std::size_t full = HeapInUse();
  CHECK(scheduler->Snapshot().keys_tracked == kKeys + 1);
  clock.Set(3600);  // past the TTL of every one of them
  REQUIRE(Eventually([&] { return scheduler->Snapshot().keys_tracked == 0; }, 120000ms));
  malloc_trim(0);
  const std::size_t after = HeapInUse();
  MESSAGE("heap in use: ", before / 1024, " KiB before, ", full / 1024 / 1024, " MiB with ", kKeys,
          " idle keys, ", after / 1024, " KiB after the TTL sweep");
  CHECK(full > before + kKeys * 64);        // the keys really were held
  CHECK(after < before + 2 * 1024 * 1024);  // and came back, within 2 MiB
}

}  // namespace faults_test
}  // namespace
}  // namespace fairgate

TEST_SUITE_END();

// The original design's five scenarios, in real time through the Scheduler. Each job waits on its
// own gate, so the test decides when each finishes; the assertions are on which jobs run
// together and in which order they start, never on durations.
#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "doctest/doctest.h"
#include "fairgate/scheduler.h"
#include "runtime_test_util.h"

// The runtime's tests: CTest labels them "runtime", and runs them again on other pools and
// under ThreadSanitizer (tests/CMakeLists.txt).
TEST_SUITE_BEGIN("runtime");

namespace fairgate {
namespace {
namespace scheduler_scenarios_test {

using namespace std::chrono_literals;
using testing::Eventually;
using testing::Gate;
using testing::TestClock;
using testing::Watchdog;

// Jobs that report when they start and wait for the test to release them.
class Board {
 public:
  Scheduler::JobFn Job(const std::string& name) {
    Gate* gate;
    {
      std::unique_lock lock(mutex_);
      gate = &gates_[name];
    }
    return [this, name, gate](const Context&) {
      {
        std::unique_lock lock(mutex_);
        started_.push_back(name);
        running_.insert(name);
      }
      if (!gate->Wait()) return absl::InternalError("never released");
      std::unique_lock lock(mutex_);
      running_.erase(name);
      return absl::OkStatus();
    };
  }
  void Release(const std::string& name) {
    std::unique_lock lock(mutex_);
    gates_[name].Open();
  }
  std::set<std::string> Running() {
    std::unique_lock lock(mutex_);
    return running_;
  }
  std::vector<std::string> Started() {
    std::unique_lock lock(mutex_);
    return started_;
  }
  // Waits until exactly `n` jobs have started and returns them.
  std::vector<std::string> WaitStarted(std::size_t n) {
    REQUIRE(Eventually([&] { return Started().size() >= n; }));
    std::this_thread::sleep_for(5ms);  // a moment for anything that should not start
    return Started();
  }
  // Releases `name`, waits for one more job to start, returns it.
  std::string ReleaseAndNext(const std::string& name) {
    const std::size_t before = Started().size();
    Release(name);
    std::vector<std::string> started = WaitStarted(before + 1);
    REQUIRE(started.size() == before + 1);
    return started.back();
  }

 private:
  std::mutex mutex_;
  std::map<std::string, Gate> gates_;
  std::vector<std::string> started_;
  std::set<std::string> running_;
};

std::unique_ptr<Scheduler> SeedScheduler(SchedulerOptions options = SchedulerOptions::Seed()) {
  auto scheduler = Scheduler::Create(testing::WithPoolUnderTest(options));
  REQUIRE(scheduler.ok());
  REQUIRE(
      (*scheduler)
          ->RegisterType(
              "sync-clone",
              {.default_cost = 10, .max_concurrency = 8, .conflict_group = "git", .priority = 8})
          .ok());
  REQUIRE(
      (*scheduler)
          ->RegisterType(
              "repack",
              {.default_cost = 20, .max_concurrency = 3, .conflict_group = "git", .priority = 4})
          .ok());
  REQUIRE(
      (*scheduler)
          ->RegisterType(
              "pull",
              {.default_cost = 10, .max_concurrency = 3, .conflict_group = "git", .priority = 4})
          .ok());
  return *std::move(scheduler);
}

// RunSync from its own thread, as a server's request handler would.
class Caller {
 public:
  Caller(Scheduler& scheduler, std::string type, std::string id, std::string key,
         Scheduler::JobFn fn)
      : thread_([&scheduler, type, id, key, fn, this] {
          result_ = scheduler.RunSync(Context::Background(),
                                      {TypeName(type), JobId(id), FairnessKey(key)}, fn);
        }) {}
  ~Caller() { thread_.join(); }
  Status Join() {
    thread_.join();
    thread_ = std::thread([] {});
    return result_;
  }

 private:
  Status result_;
  std::thread thread_;
};

using Names = std::vector<std::string>;
using NameSet = std::set<std::string>;

TEST_CASE("Scenario.BackgroundSaturated.AForegroundJobStartsAtOnce") {
  Watchdog watchdog("background saturated", 60s);
  auto scheduler = SeedScheduler();
  Board board;
  for (int i = 1; i <= 6; ++i) {
    const std::string id = "r" + std::to_string(i);
    REQUIRE(scheduler->Submit({TypeName("repack"), JobId(id)}, board.Job("repack " + id)).ok());
  }
  for (int i = 7; i <= 10; ++i) {
    const std::string id = "r" + std::to_string(i);
    REQUIRE(scheduler->Submit({TypeName("pull"), JobId(id)}, board.Job("pull " + id)).ok());
  }
  // The background tier's cap (4) and repack's cap (3) hold the rest back.
  const std::vector<std::string> first = board.WaitStarted(4);
  CHECK(NameSet(first.begin(), first.end()) ==
        NameSet{"repack r1", "repack r2", "repack r3", "pull r7"});
  // A clone starts while all four background jobs still run.
  Caller clone(*scheduler, "sync-clone", "r99", "dev1", board.Job("clone r99"));
  CHECK(board.WaitStarted(5).back() == "clone r99");
  CHECK(board.Running().size() == 5);
  board.Release("clone r99");
  CHECK(clone.Join().ok());
  // The background queue then drains in the rule's order.
  CHECK(board.ReleaseAndNext("pull r7") == "pull r8");
  for (const char* name : {"repack r1", "repack r2", "repack r3", "pull r8", "repack r4",
                           "repack r5", "repack r6", "pull r9", "pull r10"}) {
    board.Release(name);
  }
  CHECK(scheduler->Drain(Context::Background()).ok());
  CHECK(board.Started().size() == 11);
}

TEST_CASE("Scenario.TwoClientsBursting.TheSecondClientGoesNextInsteadOfWaitingItsTurn") {
  Watchdog watchdog("two clients", 60s);
  auto scheduler = SeedScheduler();
  Board board;
  for (int i = 1; i <= 4; ++i) {
    const std::string id = "repo" + std::to_string(i);
    REQUIRE(scheduler->Submit({TypeName("repack"), JobId(id)}, board.Job("repack " + id)).ok());
  }
  board.WaitStarted(3);
  std::vector<std::unique_ptr<Caller>> callers;
  for (int i = 1; i <= 10; ++i) {
    const std::string id = "a" + std::to_string(i);
    callers.push_back(
        std::make_unique<Caller>(*scheduler, "sync-clone", id, "clientA", board.Job(id)));
  }
  REQUIRE(Eventually([&] { return scheduler->Snapshot().pending == 6; }));  // 5 clones + repo4
  // Admitted is not yet started: wait for the five clones' callers to be running their jobs.
  CHECK(board.WaitStarted(8).size() == 8);
  for (int i = 1; i <= 2; ++i) {
    const std::string id = "b" + std::to_string(i);
    callers.push_back(
        std::make_unique<Caller>(*scheduler, "sync-clone", id, "clientB", board.Job(id)));
  }
  REQUIRE(Eventually([&] { return scheduler->Snapshot().pending == 8; }));
  // clientA has been charged 50, clientB nothing: B's clones take the next two slots, then A's.
  const std::vector<std::string> running = board.Started();
  std::vector<std::string> a_running;
  for (const auto& name : running) {
    if (name[0] == 'a') a_running.push_back(name);
  }
  REQUIRE(a_running.size() == 5);
  std::set<std::string> next;
  for (int i = 0; i < 3; ++i) next.insert(board.ReleaseAndNext(a_running[i]));
  CHECK(next.count("b1") == 1);
  CHECK(next.count("b2") == 1);
  CHECK(board.Started()[8][0] == 'b');  // the very next one is B's
  for (const std::string& name : board.Started()) board.Release(name);
  for (int i = 1; i <= 10; ++i) board.Release("a" + std::to_string(i));
  board.Release("repack repo4");
  callers.clear();
  CHECK(scheduler->Drain(Context::Background()).ok());
  CHECK(board.Started().size() == 16);
}

TEST_CASE("Scenario.ExpensiveVersusCheap.ALearnedLinuxCloneCountsForMore") {
  Watchdog watchdog("expensive vs cheap", 60s);
  TestClock clock;
  SchedulerOptions options = SchedulerOptions::Seed();
  options.rule.max_concurrency = 1;
  options.runtime.clock = clock.Fn();
  auto scheduler = SeedScheduler(options);
  auto takes = [&](double seconds, std::vector<std::string>* order, std::string name) {
    return [clock, seconds, order, name](const Context&) {
      if (order) order->push_back(name);
      clock.Advance(seconds);
      return absl::OkStatus();
    };
  };
  // Learn: linux takes 100 s, git takes 5 s. Both keys are charged the default 10.
  REQUIRE(scheduler
              ->RunSync(Context::Background(),
                        {TypeName("sync-clone"), JobId("linux"), FairnessKey("A")},
                        takes(100, nullptr, ""))
              .ok());
  REQUIRE(scheduler
              ->RunSync(Context::Background(),
                        {TypeName("sync-clone"), JobId("git"), FairnessKey("B")},
                        takes(5, nullptr, ""))
              .ok());
  CHECK(scheduler->Estimate(TypeName("sync-clone"), JobId("linux")) ==
        0.3 * 100 + (1.0 - 0.3) * 10);
  CHECK(scheduler->Estimate(TypeName("sync-clone"), JobId("git")) == 0.3 * 5 + (1.0 - 0.3) * 10);

  // Hold the one slot, queue A's two linux clones and then B's four git clones.
  Board board;
  Caller blocker(*scheduler, "pull", "elsewhere", "ops", board.Job("blocker"));
  board.WaitStarted(1);
  std::vector<std::string> order;  // written only by the one running job at a time
  std::vector<std::unique_ptr<Caller>> callers;
  int expected_pending = 0;
  auto queue = [&](std::string id, std::string key, double seconds, std::string name) {
    callers.push_back(
        std::make_unique<Caller>(*scheduler, "sync-clone", id, key, takes(seconds, &order, name)));
    ++expected_pending;
    REQUIRE(Eventually([&] { return scheduler->Snapshot().pending == expected_pending; }));
  };
  queue("linux", "A", 100, "linux1");
  queue("linux", "A", 100, "linux2");
  for (int i = 1; i <= 4; ++i) queue("git", "B", 5, "git" + std::to_string(i));
  board.Release("blocker");
  callers.clear();
  // A's first linux clone is charged the learned 37, so B's four git clones (8.5 each) all go
  // before A's second: one linux clone weighs more than four git ones.
  CHECK(order == Names{"linux1", "git1", "git2", "git3", "git4", "linux2"});
}

TEST_CASE("Scenario.ConflictExclusion.SameRepositoryNeverOverlapsOthersRunTogether") {
  Watchdog watchdog("conflict", 60s);
  auto scheduler = SeedScheduler();
  Board board;
  REQUIRE(scheduler->Submit({TypeName("repack"), JobId("repo1")}, board.Job("repack repo1")).ok());
  board.WaitStarted(1);
  REQUIRE(scheduler->Submit({TypeName("pull"), JobId("repo1")}, board.Job("pull repo1")).ok());
  REQUIRE(scheduler->Submit({TypeName("pull"), JobId("repo2")}, board.Job("pull repo2")).ok());
  Caller clone(*scheduler, "sync-clone", "repo1", "dev1", board.Job("clone repo1"));
  REQUIRE(Eventually([&] { return scheduler->Snapshot().pending == 2; }));
  CHECK(board.WaitStarted(2).back() == "pull repo2");  // another repository runs alongside
  CHECK(board.Running() == NameSet{"repack repo1", "pull repo2"});
  // When the repack ends, the clone (higher tier) takes repo1; the pull waits for the clone.
  CHECK(board.ReleaseAndNext("repack repo1") == "clone repo1");
  CHECK(board.Running() == NameSet{"clone repo1", "pull repo2"});
  CHECK(board.ReleaseAndNext("clone repo1") == "pull repo1");
  CHECK(clone.Join().ok());
  board.Release("pull repo1");
  board.Release("pull repo2");
  CHECK(scheduler->Drain(Context::Background()).ok());
}

TEST_CASE("Scenario.PerRepositoryLimitAndWideJobs.TwoClonesPerRepositoryARepackTakesThreeSlots") {
  Watchdog watchdog("per-repository limit and wide jobs", 60s);
  SchedulerOptions options = SchedulerOptions::Seed();
  options.rule.max_concurrency = 4;
  auto created = Scheduler::Create(testing::WithPoolUnderTest(options));
  REQUIRE(created.ok());
  Scheduler& scheduler = **created;
  REQUIRE(
      scheduler
          .RegisterType(
              "clone",
              {.max_concurrency = 4, .conflict_group = "git", .conflict_limit = 2, .priority = 4})
          .ok());
  REQUIRE(scheduler
              .RegisterType("repack", {.max_concurrency = 1,
                                       .conflict_group = "git",
                                       .conflict_limit = 2,
                                       .priority = 4,
                                       .slots = 3})
              .ok());
  Board board;
  for (const char* name : {"clone linux 1", "clone linux 2", "clone linux 3"}) {
    REQUIRE(scheduler.Submit({TypeName("clone"), JobId("linux")}, board.Job(name)).ok());
  }
  // Two clones of one repository at once, not three.
  CHECK(board.WaitStarted(2).size() == 2);
  REQUIRE(scheduler.Submit({TypeName("repack"), JobId("git")}, board.Job("repack git")).ok());
  CHECK(board.Running() == NameSet{"clone linux 1", "clone linux 2"});
  // The third clone takes the freed place on linux; the repack needs three free slots.
  CHECK(board.ReleaseAndNext("clone linux 1") == "clone linux 3");
  CHECK(board.ReleaseAndNext("clone linux 2") == "repack git");
  CHECK(board.Running() == NameSet{"clone linux 3", "repack git"});
  Snapshot snapshot = scheduler.Snapshot();
  CHECK(snapshot.running == 2);
  CHECK(snapshot.slots_in_use == 4);
  REQUIRE(scheduler.Submit({TypeName("clone"), JobId("git")}, board.Job("clone git")).ok());
  CHECK(board.ReleaseAndNext("clone linux 3") == "clone git");
  board.Release("repack git");
  board.Release("clone git");
  CHECK(scheduler.Drain(Context::Background()).ok());
}

TEST_CASE("Scenario.ManyBackgroundTypes.DoNotStarveTheForeground") {
  Watchdog watchdog("many background types", 60s);
  auto scheduler = SeedScheduler();
  for (const char* type : {"gc", "verify"}) {
    REQUIRE(
        scheduler
            ->RegisterType(
                type,
                {.default_cost = 15, .max_concurrency = 4, .conflict_group = "git", .priority = 4})
            .ok());
  }
  Board board;
  for (const char* type : {"repack", "pull", "gc", "verify"}) {
    for (int i = 1; i <= 3; ++i) {
      const std::string id = std::string(type) + std::to_string(i);
      REQUIRE(scheduler->Submit({TypeName(type), JobId(id)}, board.Job(id)).ok());
    }
  }
  CHECK(board.WaitStarted(4).size() == 4);  // the background tier's cap, whatever the types
  std::vector<std::unique_ptr<Caller>> clones;
  for (int i = 1; i <= 4; ++i) {
    const std::string id = "clone" + std::to_string(i);
    clones.push_back(
        std::make_unique<Caller>(*scheduler, "sync-clone", id, "clientA", board.Job(id)));
  }
  std::vector<std::string> started = board.WaitStarted(8);
  CHECK(std::count_if(started.begin() + 4, started.end(),
                      [](const std::string& s) { return s.rfind("clone", 0) == 0; }) == 4);
  CHECK(board.Running().size() == 8);
  for (int i = 1; i <= 4; ++i) board.Release("clone" + std::to_string(i));
  clones.clear();
  for (const char* type : {"repack", "pull", "gc", "verify"}) {
    for (int i = 1; i <= 3; ++i) board.Release(std::string(type) + std::to_string(i));
  }
  CHECK(scheduler->Drain(Context::Background()).ok());
  CHECK(board.Started().size() == 16);
}

}  // namespace scheduler_scenarios_test
}  // namespace
}  // namespace fairgate

TEST_SUITE_END();

// Stress: many threads and fibers call RunSync and Submit at once, with cancellations, deadlines
// and throwing jobs, then the scheduler shuts down in the middle of it all. A checker inside every
// job fails the test if a cap is ever exceeded or two conflicting jobs overlap; the accounting
// fails it unless every accepted job either ran or was told it did not, exactly once. A watchdog
// turns a deadlock into a failure. FAIRGATE_STRESS_SECONDS sets how long it runs (default 3).
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "boost/fiber/fiber.hpp"
#include "boost/fiber/operations.hpp"
#include "doctest/doctest.h"
#include "fairgate/scheduler.h"
#include "runtime/waiting.h"
#include "runtime_test_util.h"

// The runtime's tests: CTest labels them "runtime", and runs them again on other pools and
// under ThreadSanitizer (tests/CMakeLists.txt).
TEST_SUITE_BEGIN("runtime");

namespace fairgate {
namespace {
namespace scheduler_stress_test {

using namespace std::chrono_literals;

struct TypeInfo {
  std::string name;
  JobTypeConfig config;
};

const std::vector<TypeInfo>& Types() {
  static const auto* types = new std::vector<TypeInfo>{
      {"clone", {.default_cost = 2, .max_concurrency = 4, .conflict_group = "git", .priority = 4}},
      {"stat", {.default_cost = 1, .max_concurrency = 3, .priority = 4}},
      {"fetch", {.default_cost = 3, .max_concurrency = 2, .conflict_group = "git", .priority = 2}},
      {"repack", {.default_cost = 5, .max_concurrency = 1, .conflict_group = "git", .priority = 2}},
  };
  return *types;
}

constexpr int kCapacity = 6;

// Counts what runs at each moment, from inside the jobs, and records any broken promise. A tier's
// cap is checked only where tiers do not lend (RuleOptions::lending): a borrower runs over it.
class InvariantChecker {
 public:
  explicit InvariantChecker(const SchedulerOptions& options)
      : tier_caps_hold_(!options.rule.lending) {}
  void Enter(const TypeInfo& type, const std::string& id) {
    std::unique_lock lock(mutex_);
    ++total_;
    ++by_tier_[type.config.priority];
    ++by_type_[type.name];
    if (total_ > kCapacity) Violation("global cap exceeded");
    if (tier_caps_hold_ && by_tier_[type.config.priority] > type.config.priority) {
      Violation("tier cap exceeded");
    }
    if (by_type_[type.name] > type.config.max_concurrency) Violation("type cap exceeded");
    if (!type.config.conflict_group.empty() && ++resources_[id] > 1) {
      Violation("conflicting jobs overlap on " + id);
    }
  }
  void Exit(const TypeInfo& type, const std::string& id) {
    std::unique_lock lock(mutex_);
    --total_;
    --by_tier_[type.config.priority];
    --by_type_[type.name];
    if (!type.config.conflict_group.empty()) --resources_[id];
  }
  void Report(std::string what) {
    std::unique_lock lock(mutex_);
    Violation(std::move(what));
  }
  std::vector<std::string> violations() {
    std::unique_lock lock(mutex_);
    return violations_;
  }

 private:
  void Violation(std::string what) {
    if (violations_.size() < 20) violations_.push_back(std::move(what));
  }
  const bool tier_caps_hold_;
  std::mutex mutex_;
  int total_ = 0;
  std::map<int, int> by_tier_;
  std::map<std::string, int> by_type_;
  std::map<std::string, int> resources_;
  std::vector<std::string> violations_;
};

// Per accepted Submit job: how often its function ran and its callback was called.
struct Accounting {
  std::atomic<int> ran{0};
  std::atomic<int> reported{0};
  std::atomic<bool> reported_cancelled{false};
};

// FAIRGATE_STRESS_SECONDS, else `fallback`.
int StressSeconds(int fallback) {
  const char* env = std::getenv("FAIRGATE_STRESS_SECONDS");
  return env ? std::max(1, std::atoi(env)) : fallback;
}

// A scheduler of kCapacity slots with the stress types registered: `options` with its queue
// bound per key, sweep interval and a short key TTL, so that keys come and go during the run.
std::unique_ptr<Scheduler> StressScheduler(SchedulerOptions options, int max_pending_per_key,
                                           double sweep_seconds) {
  options.rule.max_concurrency = kCapacity;
  options.rule.max_pending_per_key = max_pending_per_key;
  options.runtime.sweep_interval = Seconds(sweep_seconds);
  options.rule.key_ttl = Seconds(0.05);
  auto created = Scheduler::Create(options);
  REQUIRE(created.ok());
  std::unique_ptr<Scheduler> scheduler = *std::move(created);
  for (const TypeInfo& t : Types()) REQUIRE(scheduler->RegisterType(t.name, t.config).ok());
  return scheduler;
}

TEST_CASE("Stress.Runtime.CapsConflictsAndExactlyOnceHoldUnderLoad") {
  const int seconds = StressSeconds(3);
  testing::Watchdog watchdog("stress", std::chrono::seconds(seconds * 10 + 120));
  // Tiers that do not lend, so that every tier's cap is checked as a hard one; the stress below
  // runs with the default rule's lending.
  SchedulerOptions options = SchedulerOptions::Default();
  options.rule.lending.reset();
  std::unique_ptr<Scheduler> scheduler = StressScheduler(options, 200, 0.01);

  InvariantChecker checker(options);
  std::atomic<bool> stop{false};
  std::atomic<long> sync_ran{0}, sync_refused{0}, sync_cancelled{0}, sync_bad{0};
  std::mutex accounting_mutex;
  std::vector<std::unique_ptr<Accounting>> submitted;

  auto job = [&](const TypeInfo& type, std::string id, int behaviour,
                 std::atomic<int>* ran) -> Scheduler::JobFn {
    return [&, type, id, behaviour, ran](const Context& ctx) -> Status {
      if (ran && ran->fetch_add(1) != 0) checker.Report("a job ran twice on " + id);
      checker.Enter(type, id);
      if (behaviour == 1) internal::YieldToOthers();
      if (behaviour == 2) std::this_thread::sleep_for(50us);
      if (behaviour == 3) ctx.WaitFor(200us);
      checker.Exit(type, id);
      if (behaviour == 4) throw std::runtime_error("job failed");
      if (behaviour == 5) throw 7;  // not a std::exception
      if (behaviour == 6) {
        // Ignores its context: keeps running whatever happens to it, shutdown included.
        std::this_thread::sleep_for(300us);
      }
      return absl::OkStatus();
    };
  };

  auto sync_loop = [&](std::uint64_t seed, bool fiber) {
    std::mt19937_64 rng(seed);
    while (!stop) {
      const TypeInfo& type = Types()[rng() % Types().size()];
      const std::string id = "repo" + std::to_string(rng() % 5);
      const std::string key = "client" + std::to_string(rng() % 8);
      std::pair<Context, CancelFunc> ctx = WithCancel(Context::Background());
      const int mode = static_cast<int>(rng() % 10);
      if (mode == 0)
        ctx = WithTimeout(Context::Background(), std::chrono::microseconds(rng() % 300));
      std::thread canceller;
      if (mode == 1) {
        canceller = std::thread([cancel = ctx.second, delay = rng() % 200] {
          std::this_thread::sleep_for(std::chrono::microseconds(delay));
          cancel();
        });
      }
      std::atomic<int> ran{0};
      // Jobs of RunSync callers on this test's own fibers do not throw: under ASan, an exception
      // on a fiber stack that fairgate does not own leaves false positives behind (see
      // src/runtime/fiber_stack.h); pool fibers and plain threads do throw.
      const int pick = static_cast<int>(rng() % 7);
      const int behaviour = fiber && (pick == 4 || pick == 5) ? 0 : pick;
      Status s = scheduler->RunSync(ctx.first, {TypeName(type.name), JobId(id), FairnessKey(key)},
                                    job(type, id, behaviour, &ran));
      if (canceller.joinable()) canceller.join();
      ctx.second();
      if (s.ok() || s.code() == absl::StatusCode::kInternal) {
        ++sync_ran;
        if (ran != 1) ++sync_bad;
      } else if (s.code() == absl::StatusCode::kUnavailable ||
                 s.code() == absl::StatusCode::kResourceExhausted) {
        ++sync_refused;
        if (ran != 0) ++sync_bad;
      } else if (s.code() == absl::StatusCode::kCancelled ||
                 s.code() == absl::StatusCode::kDeadlineExceeded) {
        ++sync_cancelled;  // before admission (fn did not run), or fn returned ctx.Err()
        if (ran > 1) ++sync_bad;
      } else {
        ++sync_bad;
      }
      if (fiber) internal::YieldToOthers();
    }
  };

  auto submit_loop = [&](std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    while (!stop) {
      const TypeInfo& type = Types()[rng() % Types().size()];
      const std::string id = "repo" + std::to_string(rng() % 5);
      auto accounting = std::make_unique<Accounting>();
      Accounting* a = accounting.get();
      {
        std::unique_lock lock(accounting_mutex);
        submitted.push_back(std::move(accounting));
      }
      Status s = scheduler->Submit(
          {TypeName(type.name), JobId(id), FairnessKey("bg" + std::to_string(rng() % 3))},
          job(type, id, static_cast<int>(rng() % 7), &a->ran), [a](const Status& st) {
            a->reported_cancelled = st.code() == absl::StatusCode::kCancelled;
            ++a->reported;
          });
      if (!s.ok()) a->reported = -1;  // refused: never reported, must never run
      // Back off when the queue is full, as a client answered 429 would.
      if (s.code() == absl::StatusCode::kResourceExhausted) std::this_thread::sleep_for(200us);
      if (rng() % 4 == 0) std::this_thread::sleep_for(20us);
    }
  };

  std::vector<std::thread> threads;
  for (int i = 0; i < 6; ++i) threads.emplace_back([&, i] { sync_loop(100 + i, false); });
  for (int i = 0; i < 2; ++i) {
    threads.emplace_back([&, i] {
      if constexpr (internal::kThreadRuntime) {  // the TSan build has no fibers: more threads
        std::vector<std::thread> more;
        for (int f = 0; f < 4; ++f)
          more.emplace_back([&, i, f] { sync_loop(1000 + i * 100 + f, true); });
        for (auto& t : more) t.join();
      } else {
        std::vector<boost::fibers::fiber> fibers;
        for (int f = 0; f < 16; ++f)
          fibers.emplace_back([&, i, f] { sync_loop(1000 + i * 100 + f, true); });
        for (auto& f : fibers) f.join();
      }
    });
  }
  for (int i = 0; i < 2; ++i) threads.emplace_back([&, i] { submit_loop(500 + i); });

  std::this_thread::sleep_for(std::chrono::seconds(seconds));
  // Shut down in the middle of it all, then let the callers see Unavailable and stop.
  REQUIRE(scheduler->Shutdown(Context::Background()).ok());
  stop = true;
  for (auto& t : threads) t.join();

  CHECK(checker.violations().empty());
  for (const std::string& v : checker.violations()) MESSAGE(v);
  CHECK(sync_bad == 0);
  CHECK(sync_ran > 100);  // the run did exercise admission
  long cancelled_before_run = 0, ran_jobs = 0, refused = 0;
  for (const auto& a : submitted) {
    if (a->reported == -1) {
      ++refused;
      CHECK(a->ran == 0);
      continue;
    }
    REQUIRE(a->reported == 1);  // told exactly once
    CHECK(a->ran <= 1);
    if (a->ran == 0) {
      CHECK(a->reported_cancelled);  // told it did not run
      ++cancelled_before_run;
    }
    ran_jobs += a->ran;
  }
  MESSAGE("sync ran " << sync_ran.load() << ", cancelled " << sync_cancelled.load() << ", refused "
                      << sync_refused.load() << "; submit ran " << ran_jobs
                      << ", cancelled by shutdown " << cancelled_before_run << ", refused "
                      << refused);
  CHECK(ran_jobs > 100);
}

// Parents that a canceller thread cancels and replaces while callers make children of them and
// wait under those children: what a server does when a client's connection (the parent) goes
// away while its requests (the children) wait for admission.
class RotatingParents {
 public:
  explicit RotatingParents(int count) {
    for (int i = 0; i < count; ++i) parents_.push_back(WithCancel(Context::Background()));
  }
  ~RotatingParents() {
    for (auto& parent : parents_) parent.second();
  }
  Context Pick(std::uint64_t r) {
    std::unique_lock lock(mutex_);
    return parents_[r % parents_.size()].first;
  }
  // Cancels parent `r` (its children with it) and puts a fresh one in its place.
  void Rotate(std::uint64_t r) {
    std::pair<Context, CancelFunc> fresh = WithCancel(Context::Background());
    {
      std::unique_lock lock(mutex_);
      std::swap(fresh, parents_[r % parents_.size()]);
    }
    fresh.second();  // outside the lock: it runs the children's cancellations
  }

 private:
  std::mutex mutex_;
  std::vector<std::pair<Context, CancelFunc>> parents_;
};

// Issue 46: fiber callers hung the whole scheduler when one of them was suspended while it held
// the scheduler's lock (a woken RunSync caller read its context's error under the lock while the
// canceller thread held that context's fiber mutex; the thread's next fiber then blocked the
// thread on the lock, so the holder could never resume). The shape of the client that found it:
// plain threads and fibers on 1, 2 and 8 threads of their own calling RunSync under children of
// parents that a canceller thread keeps cancelling, Submit beside them, deadlines, callbacks that
// touch only atomics. The watchdog turns a hang into a failure; scripts/hang_hunt.sh runs this
// case many times beside a CPU hog and prints every thread's stack and the lock's owner if one
// hangs. FAIRGATE_STRESS_SECONDS sets how long each of the three rounds runs (default 1).
TEST_CASE("Stress.Runtime.FiberCallersUnderRotatingParentCancellationsNeverStopTheScheduler") {
  const int seconds = StressSeconds(1);
  const char* only = std::getenv("FAIRGATE_STRESS_FIBER_THREADS");  // one round, for the script
  std::vector<int> rounds = {1, 2, 8};
  if (only != nullptr) rounds = {std::max(1, std::atoi(only))};
  for (const int fiber_threads : rounds) {
    CAPTURE(fiber_threads);
    testing::Watchdog watchdog("rotating parents", std::chrono::seconds(seconds * 10 + 60));
    const SchedulerOptions options = testing::WithPoolUnderTest(SchedulerOptions::Default());
    std::unique_ptr<Scheduler> scheduler = StressScheduler(options, 500, 0.005);

    InvariantChecker checker(options);
    RotatingParents parents(4);
    std::atomic<bool> stop{false};
    std::atomic<long> ran{0}, cancelled{0}, bad{0}, submitted{0}, reported{0};

    auto job = [&](const TypeInfo& type, const std::string& id, int behaviour) {
      return [&, type, id, behaviour](const Context& ctx) -> Status {
        checker.Enter(type, id);
        if (behaviour == 1) internal::YieldToOthers();
        if (behaviour == 2) ctx.WaitFor(100us);
        checker.Exit(type, id);
        return ctx.Err();
      };
    };
    auto sync_loop = [&](std::uint64_t seed) {
      std::mt19937_64 rng(seed);
      while (!stop) {
        const TypeInfo& type = Types()[rng() % Types().size()];
        const std::string id = "repo" + std::to_string(rng() % 5);
        const std::string key = "client" + std::to_string(rng() % 8);
        const Context parent = parents.Pick(rng());
        std::pair<Context, CancelFunc> ctx =
            rng() % 4 == 0 ? WithTimeout(parent, std::chrono::microseconds(rng() % 500))
                           : WithCancel(parent);
        Status s = scheduler->RunSync(ctx.first, {TypeName(type.name), JobId(id), FairnessKey(key)},
                                      job(type, id, static_cast<int>(rng() % 3)));
        ctx.second();
        if (s.ok()) {
          ++ran;
        } else if (s.code() == absl::StatusCode::kCancelled ||
                   s.code() == absl::StatusCode::kDeadlineExceeded ||
                   s.code() == absl::StatusCode::kUnavailable ||
                   s.code() == absl::StatusCode::kResourceExhausted) {
          ++cancelled;
        } else {
          ++bad;
        }
      }
    };
    auto submit_loop = [&](std::uint64_t seed) {
      std::mt19937_64 rng(seed);
      while (!stop) {
        const TypeInfo& type = Types()[rng() % Types().size()];
        const std::string id = "repo" + std::to_string(rng() % 5);
        Status s = scheduler->Submit(
            {TypeName(type.name), JobId(id), FairnessKey("bg" + std::to_string(rng() % 3))},
            job(type, id, static_cast<int>(rng() % 3)), [&](const Status&) { ++reported; });
        if (s.ok()) ++submitted;
        if (!s.ok()) std::this_thread::sleep_for(200us);  // a full queue: back off
      }
    };

    std::vector<std::thread> threads;
    for (int i = 0; i < 16; ++i) threads.emplace_back([&, i] { sync_loop(100 + i); });
    for (int i = 0; i < fiber_threads; ++i) {
      threads.emplace_back([&, i] {
        if constexpr (internal::kThreadRuntime) {  // the TSan build has no fibers: threads
          std::vector<std::thread> more;
          for (int f = 0; f < 8; ++f) more.emplace_back([&, i, f] { sync_loop(1000 + i * 8 + f); });
          for (auto& t : more) t.join();
        } else {
          std::vector<boost::fibers::fiber> fibers;
          for (int f = 0; f < 8; ++f)
            fibers.emplace_back([&, i, f] { sync_loop(1000 + i * 8 + f); });
          for (auto& f : fibers) f.join();
        }
      });
    }
    for (int i = 0; i < 2; ++i) threads.emplace_back([&, i] { submit_loop(500 + i); });
    std::thread canceller([&] {
      std::mt19937_64 rng(7);
      while (!stop) {
        parents.Rotate(rng());
        std::this_thread::sleep_for(std::chrono::microseconds(rng() % 200));
      }
    });

    std::this_thread::sleep_for(std::chrono::seconds(seconds));
    stop = true;
    for (auto& t : threads) t.join();
    canceller.join();
    REQUIRE(scheduler->Shutdown(Context::Background()).ok());

    CHECK(checker.violations().empty());
    for (const std::string& v : checker.violations()) MESSAGE(v);
    CHECK(bad == 0);
    CHECK(ran > 0);                // admission was exercised
    CHECK(cancelled > 0);          // and so were the cancellations
    CHECK(reported == submitted);  // every accepted Submit was told, after Shutdown returned
    MESSAGE("fiber threads " << fiber_threads << ": ran " << ran.load() << ", cancelled or refused "
                             << cancelled.load() << ", submitted " << submitted.load());
  }
}

}  // namespace scheduler_stress_test
}  // namespace
}  // namespace fairgate

TEST_SUITE_END();

// Contexts: cancellation reaches children, deadlines end contexts, and both fibers and plain
// threads can wait on them.
#include "fairgate/context.h"

#include <atomic>
#include <chrono>
#include <thread>

#include "boost/fiber/fiber.hpp"
#include "boost/fiber/operations.hpp"
#include "doctest/doctest.h"
#include "runtime/waiting.h"
#include "runtime_test_util.h"

// The runtime's tests: CTest labels them "runtime", and runs them again on other pools and
// under ThreadSanitizer (tests/CMakeLists.txt).
TEST_SUITE_BEGIN("runtime");

namespace fairgate {
namespace {
namespace context_test {

using namespace std::chrono_literals;

TEST_CASE("Context.Background.IsNeverDone") {
  Context ctx = Context::Background();
  CHECK_FALSE(ctx.Done());
  CHECK(ctx.Err().ok());
  CHECK_FALSE(ctx.Deadline().has_value());
  CHECK_FALSE(ctx.WaitFor(5ms));
}

TEST_CASE("Context.WithCancel.CancelEndsItOnceWithCancelled") {
  auto [ctx, cancel] = WithCancel(Context::Background());
  CHECK_FALSE(ctx.Done());
  cancel();
  CHECK(ctx.Done());
  CHECK(ctx.Err().code() == absl::StatusCode::kCancelled);
  cancel();  // harmless
  CHECK(ctx.Err().code() == absl::StatusCode::kCancelled);
  CHECK(ctx.WaitFor(1h));  // returns at once
}

TEST_CASE("Context.Parent.CancellationReachesDescendantsNotAncestors") {
  auto [parent, cancel_parent] = WithCancel(Context::Background());
  auto [child, cancel_child] = WithCancel(parent);
  auto [grandchild, cancel_grandchild] = WithTimeout(child, 1h);
  auto [sibling, cancel_sibling] = WithCancel(parent);
  cancel_sibling();
  CHECK_FALSE(parent.Done());
  CHECK_FALSE(grandchild.Done());
  cancel_parent();
  CHECK(child.Err().code() == absl::StatusCode::kCancelled);
  CHECK(grandchild.Err().code() == absl::StatusCode::kCancelled);
  // A child of a context that is already done is done from the start.
  auto [late, cancel_late] = WithCancel(parent);
  CHECK(late.Done());
}

TEST_CASE("Context.Deadline.EndsWithDeadlineExceededAndChildrenInheritIt") {
  auto [ctx, cancel] = WithTimeout(Context::Background(), 20ms);
  REQUIRE(ctx.Deadline().has_value());
  auto [child, cancel_child] = WithDeadline(ctx, Context::Clock::now() + 1h);
  CHECK(child.Deadline() == ctx.Deadline());  // never later than the parent's
  CHECK(child.WaitFor(20s));
  CHECK(ctx.Err().code() == absl::StatusCode::kDeadlineExceeded);
  CHECK(child.Err().code() == absl::StatusCode::kDeadlineExceeded);
  cancel();  // after the deadline, the reason stays
  CHECK(ctx.Err().code() == absl::StatusCode::kDeadlineExceeded);
}

TEST_CASE("Context.Wait.AThreadWakesWhenAnotherThreadCancels") {
  testing::Watchdog watchdog("Context.Wait thread", std::chrono::seconds(30));
  auto [ctx, cancel] = WithCancel(Context::Background());
  std::thread waiter([ctx = ctx] { ctx.Wait(); });
  std::this_thread::sleep_for(5ms);
  cancel();
  waiter.join();
  CHECK(ctx.Done());
}

// Fibers only: the thread runtime (TSan build) has none.
TEST_CASE("Context.Wait.AFiberWaitingSuspendsOnlyItself" *
          doctest::skip(internal::kThreadRuntime)) {
  testing::Watchdog watchdog("Context.Wait fiber", std::chrono::seconds(30));
  auto [ctx, cancel] = WithCancel(Context::Background());
  std::atomic<int> other_fiber_steps{0};
  bool waiter_saw_done = false;
  boost::fibers::fiber waiter([&, ctx = ctx] {
    ctx.Wait();
    waiter_saw_done = ctx.Done();
  });
  boost::fibers::fiber other([&, cancel = cancel] {
    // Runs on the same thread while the waiter is suspended, then cancels it.
    for (int i = 0; i < 3; ++i) {
      ++other_fiber_steps;
      boost::this_fiber::yield();
    }
    cancel();
  });
  waiter.join();
  other.join();
  CHECK(other_fiber_steps == 3);
  CHECK(waiter_saw_done);
}

TEST_CASE("Context.OnCancel.RunsOnceOnTheCancellerAndNotAfterStop") {
  auto [parent, cancel_parent] = WithCancel(Context::Background());
  auto [ctx, cancel] = WithCancel(parent);
  int runs = 0;
  CancelCallback callback = OnCancel(ctx, [&] { ++runs; });
  int stopped_runs = 0;
  CancelCallback stopped = OnCancel(ctx, [&] { ++stopped_runs; });
  CHECK_FALSE(stopped.Stop());
  CHECK(runs == 0);
  cancel_parent();  // reaches the child, and its callbacks, on this thread
  CHECK(runs == 1);
  cancel();
  CHECK(runs == 1);
  CHECK(callback.Stop());
  CHECK(callback.Stop());  // the same answer
  CHECK(stopped_runs == 0);
  // Registered on a context already cancelled: runs at once, here.
  int late_runs = 0;
  CancelCallback late = OnCancel(ctx, [&] { ++late_runs; });
  CHECK(late_runs == 1);
  CHECK(late.Stop());
}

TEST_CASE("Context.OnCancel.NeverForBackgroundNorADeadline") {
  bool ran = false;
  CancelCallback background = OnCancel(Context::Background(), [&] { ran = true; });
  auto [ctx, cancel] = WithTimeout(Context::Background(), 1ms);
  CancelCallback deadline = OnCancel(ctx, [&] { ran = true; });
  CHECK(ctx.WaitFor(20s));
  CHECK(ctx.Err().code() == absl::StatusCode::kDeadlineExceeded);
  CHECK_FALSE(ran);
  CHECK_FALSE(background.Stop());
  CHECK_FALSE(deadline.Stop());
}

TEST_CASE("Context.OnCancel.DestroyingTheRegistrationStopsIt") {
  auto [ctx, cancel] = WithCancel(Context::Background());
  bool ran = false;
  {
    CancelCallback callback = OnCancel(ctx, [&] { ran = true; });
  }
  CancelCallback moved = OnCancel(ctx, [&] { ran = true; });
  moved = CancelCallback();  // the assignment stops the one it replaces
  cancel();
  CHECK_FALSE(ran);
}

// Stop waits for a run under way on another thread, so that what the function uses may be freed
// when Stop returns.
TEST_CASE("Context.OnCancel.StopWaitsForARunUnderWay") {
  testing::Watchdog watchdog("Context.OnCancel stop", std::chrono::seconds(30));
  auto [ctx, cancel] = WithCancel(Context::Background());
  std::atomic<bool> entered{false}, may_leave{false}, left{false};
  CancelCallback callback = OnCancel(ctx, [&] {
    entered = true;
    while (!may_leave) std::this_thread::yield();
    left = true;
  });
  std::thread canceller([cancel = cancel] { cancel(); });
  while (!entered) std::this_thread::yield();
  std::atomic<bool> stopping{false};
  bool left_before_stop_returned = false;
  std::thread stopper([&] {
    stopping = true;
    CHECK(callback.Stop());
    left_before_stop_returned = left;
  });
  while (!stopping) std::this_thread::yield();
  // Time for a Stop that did not wait to return (nothing here depends on it when Stop waits).
  std::this_thread::sleep_for(20ms);
  may_leave = true;
  stopper.join();
  canceller.join();
  CHECK(left_before_stop_returned);
}

}  // namespace context_test
}  // namespace
}  // namespace fairgate

TEST_SUITE_END();

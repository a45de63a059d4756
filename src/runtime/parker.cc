#include "runtime/parker.h"

#include <chrono>

#if !FAIRGATE_RUNTIME_THREADS
#include "boost/fiber/algo/algorithm.hpp"
#include "boost/fiber/context.hpp"
#include "boost/fiber/operations.hpp"
#include "boost/fiber/scheduler.hpp"
#include "runtime/waiting.h"
#endif

namespace fairgate::internal {

#if FAIRGATE_RUNTIME_THREADS

void Parker::AdoptThisThread() {}

void Parker::Park() {
  std::unique_lock lock(mutex_);
  wake_.wait(lock, [&] { return unparked_.load(); });
  unparked_ = false;
}

#else

// Round robin over the thread's ready fibers, holding the worker's main fiber back while it is
// parked (parker.h). Boost calls every method on the thread it schedules, except notify.
class ParkingScheduler final : public boost::fibers::algo::algorithm {
 public:
  explicit ParkingScheduler(Parker* parker) : parker_(parker) {}

  void awakened(boost::fibers::context* ctx) noexcept override {
    if (parker_->parking_ && ctx->is_context(boost::fibers::type::main_context)) {
      held_ = ctx;  // Park yielded: it waits here, out of the ready queue, until unparked
      return;
    }
    ctx->ready_link(ready_);
  }

  // Called whenever a fiber of the thread leaves it (suspends, yields or ends): none may while
  // the thread holds a core lock (waiting.h). An unparked main fiber joins the back of the ready
  // queue: fibers that yield to each other keep the queue from ever emptying, and must not keep
  // it parked.
  boost::fibers::context* pick_next() noexcept override {
    CheckMaySuspend("a fiber switch on a pool thread");
    if (held_ != nullptr && parker_->unparked_.load(std::memory_order_acquire)) {
      held_->ready_link(ready_);
      held_ = nullptr;
    }
    if (ready_.empty()) return nullptr;
    boost::fibers::context* next = &ready_.front();
    ready_.pop_front();
    return next;
  }

  bool has_ready_fibers() const noexcept override {
    return !ready_.empty() ||
           (held_ != nullptr && parker_->unparked_.load(std::memory_order_acquire));
  }

  // No fiber is ready: the thread sleeps until it is unparked, one of its fibers is woken from
  // another thread, or `until` (the earliest timed wait of its fibers).
  void suspend_until(const std::chrono::steady_clock::time_point& until) noexcept override {
    std::unique_lock lock(parker_->mutex_);
    auto woken = [&] { return parker_->fiber_woken_ || (held_ != nullptr && parker_->unparked_); };
    if (until == std::chrono::steady_clock::time_point::max()) {
      parker_->wake_.wait(lock, woken);
    } else {
      parker_->wake_.wait_until(lock, until, woken);
    }
    parker_->fiber_woken_ = false;
  }

  // Called from any thread when a fiber of this one is made ready there, and at shutdown.
  void notify() noexcept override {
    {
      std::lock_guard lock(parker_->mutex_);
      parker_->fiber_woken_ = true;
    }
    parker_->wake_.notify_one();
  }

 private:
  Parker* const parker_;
  boost::fibers::scheduler::ready_queue_type ready_;
  boost::fibers::context* held_ = nullptr;  // the main fiber, while parked
};

void Parker::AdoptThisThread() { boost::fibers::use_scheduling_algorithm<ParkingScheduler>(this); }

void Parker::Park() {
  parking_ = true;
  boost::this_fiber::yield();  // resumed by ParkingScheduler once unparked
  parking_ = false;
  std::lock_guard lock(mutex_);
  unparked_ = false;
}

#endif

void Parker::Unpark() {
  {
    std::lock_guard lock(mutex_);
    unparked_ = true;
  }
  wake_.notify_one();
}

}  // namespace fairgate::internal

#include "runtime/timer.h"

#include <mutex>
#include <utility>

#include "runtime/thread_name.h"

namespace fairgate::internal {

Timer::Timer(std::function<Clock::time_point()> next_due,
             std::function<void(Clock::time_point now)> run_due)
    : next_due_(std::move(next_due)), run_due_(std::move(run_due)) {}

Timer::~Timer() { Stop(); }

void Timer::Start() {
  thread_ = std::thread([this] {
    NameThisThread("fg-timer");
    Loop();
  });
}

void Timer::Wake() {
  {
    std::unique_lock lock(mutex_);
    rearm_ = true;
  }
  wake_.notify_all();
}

void Timer::Stop() {
  {
    std::unique_lock lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Timer::Loop() {
  std::unique_lock lock(mutex_);
  while (!stop_) {
    const Clock::time_point wake_at = next_due_();
    rearm_ = false;
    wake_.wait_until(lock, wake_at, [&] { return stop_ || rearm_; });
    if (stop_) break;
    const Clock::time_point now = Clock::now();
    lock.unlock();
    run_due_(now);
    lock.lock();
  }
}

}  // namespace fairgate::internal

#include "runtime/outstanding.h"

#include <optional>
#include <utility>

#include "runtime/context_state.h"

namespace fairgate::internal {

Status OutstandingCount::WaitQuiet(const Context& ctx) {
  std::uint64_t callback = 0;
  if (ctx.state()) {
    // Holds the signal, not the count's owner: the callback may run after the scheduler is gone.
    callback = ctx.state()->AddCallback([quiet = quiet_] {
      std::unique_lock lock(quiet->mutex);
      quiet->cv.notify_all();
    });
  }
  Status result;
  {
    std::unique_lock lock(quiet_->mutex);
    if (std::exchange(open_counted_, false)) count_.fetch_sub(1, std::memory_order_acq_rel);
    auto done = [&] { return count_ == 0 || ctx.Done(); };
    if (std::optional<Context::Clock::time_point> deadline = ctx.Deadline()) {
      quiet_->cv.wait_until(lock, *deadline, done);
    } else {
      quiet_->cv.wait(lock, done);
    }
    if (count_ != 0) result = ctx.Err();
  }
  if (ctx.state()) ctx.state()->RemoveCallback(callback);
  return result;
}

}  // namespace fairgate::internal

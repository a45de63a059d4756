#include "runtime/outstanding.h"

#include <atomic>
#include <memory>
#include <optional>
#include <utility>

#include "runtime/context_state.h"

namespace fairgate::internal {

Status OutstandingCount::WaitQuiet(const Context& ctx) {
  // Whether the context was cancelled, as its callback tells it: the wait's predicate runs under
  // the count's mutex, a thread lock, where the context's own methods (which take its fiber
  // mutex, and may suspend the fiber) are not called. Its deadline ends the timed wait instead.
  auto ended = std::make_shared<std::atomic<bool>>(false);
  std::uint64_t callback = 0;
  if (ctx.state()) {
    // Holds the signal, not the count's owner: the callback may run after the scheduler is gone.
    callback = ctx.state()->AddCallback([quiet = quiet_, ended] {
      std::unique_lock lock(quiet->mutex);
      ended->store(true);
      quiet->cv.notify_all();
    });
  }
  const std::optional<Context::Clock::time_point> deadline = ctx.Deadline();
  bool quiet = false;
  {
    std::unique_lock lock(quiet_->mutex);
    if (std::exchange(open_counted_, false)) count_.fetch_sub(1, std::memory_order_acq_rel);
    auto done = [&] { return count_ == 0 || ended->load(); };
    if (deadline) {
      quiet_->cv.wait_until(lock, *deadline, done);
    } else {
      quiet_->cv.wait(lock, done);
    }
    quiet = count_ == 0;
  }
  if (ctx.state()) ctx.state()->RemoveCallback(callback);
  // Not quiet: the context was cancelled or its deadline passed, and says which.
  return quiet ? absl::OkStatus() : ctx.Err();
}

}  // namespace fairgate::internal

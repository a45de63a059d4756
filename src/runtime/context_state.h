// ContextState: the shared state behind fairgate::Context. Internal to fairgate.
//
// Cancellation is pushed: Cancel() marks the state done and runs the registered callbacks
// (children cancelling themselves, waiters waking up), outside the state's lock. A deadline is
// observed where it matters instead of being pushed by a timer: Done() and Err() compare it with
// the clock, and waits are timed waits that end at the deadline. Children inherit the earliest
// deadline of their ancestors, so no callback is needed for deadlines.
#ifndef FAIRGATE_RUNTIME_CONTEXT_STATE_H_
#define FAIRGATE_RUNTIME_CONTEXT_STATE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fairgate/context.h"
#include "runtime/waiting.h"

namespace fairgate::internal {

// Every method but the accessors takes the state's fiber mutex (WaitMutex), so each may suspend
// the calling fiber and excludes the core lock (waiting.h); so does the destructor, which unlinks
// the state from its parent: the last reference to a context is never dropped under that lock.
class ContextState : public std::enable_shared_from_this<ContextState> {
 public:
  using Clock = Context::Clock;

  explicit ContextState(std::optional<Clock::time_point> deadline) : deadline_(deadline) {}
  ~ContextState();
  ContextState(const ContextState&) = delete;
  ContextState& operator=(const ContextState&) = delete;

  // Marks the state done with `reason` (Cancelled) and runs the callbacks; no-op once done.
  void Cancel(Status reason) ABSL_LOCKS_EXCLUDED(core_lock);
  bool Done() const ABSL_LOCKS_EXCLUDED(core_lock);
  Status Err() const ABSL_LOCKS_EXCLUDED(core_lock);
  const std::optional<Clock::time_point>& deadline() const { return deadline_; }
  // The fencing token of the fleet-wide lease the job under this context holds (0: none); set
  // before the state is shared, inherited by children.
  std::uint64_t fencing_token() const { return fencing_token_; }
  void set_fencing_token(std::uint64_t token) { fencing_token_ = token; }
  // The worker the job under this context was admitted onto (fairgate/worker.h; null: none); set
  // before the state is shared, inherited by children.
  const std::shared_ptr<const std::string>& worker() const { return worker_; }
  void set_worker(std::shared_ptr<const std::string> worker) { worker_ = std::move(worker); }

  // Runs `callback` once when the state is cancelled (at once, inline, if it already was).
  // Returns an id for RemoveCallback, or 0 if it ran inline. Deadlines do not run callbacks.
  std::uint64_t AddCallback(std::function<void()> callback) ABSL_LOCKS_EXCLUDED(core_lock);
  // Unregisters a callback that has not run yet; harmless for one that has. True when it was
  // still registered (so it will never run); false when it has run, is running, or `id` is 0.
  bool RemoveCallback(std::uint64_t id) ABSL_LOCKS_EXCLUDED(core_lock);

  // Blocks until done, or until `until` when given; returns Done().
  bool WaitUntil(std::optional<Clock::time_point> until) ABSL_LOCKS_EXCLUDED(core_lock);

  // Links this child to its parent: cancelling the parent cancels it. `this` must already be
  // owned by a shared_ptr.
  void LinkParent(const std::shared_ptr<ContextState>& parent) ABSL_LOCKS_EXCLUDED(core_lock);
  // Undoes LinkParent (at the child's own cancellation, so parents do not collect dead children).
  void UnlinkParent() ABSL_LOCKS_EXCLUDED(core_lock);

 private:
  mutable WaitMutex mutex_;
  WaitCondition cancelled_cv_;
  const std::optional<Clock::time_point> deadline_;
  std::uint64_t fencing_token_ = 0;
  std::shared_ptr<const std::string> worker_;
  bool cancelled_ = false;
  Status reason_;
  std::uint64_t next_id_ = 1;
  std::vector<std::pair<std::uint64_t, std::function<void()>>> callbacks_;
  std::weak_ptr<ContextState> parent_;
  std::uint64_t parent_callback_ = 0;
};

}  // namespace fairgate::internal

#endif  // FAIRGATE_RUNTIME_CONTEXT_STATE_H_

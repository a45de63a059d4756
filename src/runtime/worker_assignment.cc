#include "runtime/worker_assignment.h"

#include <utility>

#include "runtime/context_state.h"
#include "runtime/detached_status.h"

namespace fairgate::internal {

Context WorkerAssignment::Enter(const Context& parent) {
  auto state = std::make_shared<ContextState>(parent.Deadline());
  state->set_fencing_token(parent.FencingToken());
  state->set_worker(worker_);
  state->LinkParent(parent.state());
  std::optional<Status> lost;
  {
    std::lock_guard lock(mutex_);
    ctx_ = state;
    lost = lost_;
  }
  if (lost) state->Cancel(Detached(*lost));  // outside the lock: cancelling runs callbacks
  return WithState(std::move(state));
}

void WorkerAssignment::MarkLost(const Status& why) {
  std::lock_guard lock(mutex_);
  if (!lost_) lost_ = why;
}

void WorkerAssignment::CancelContext() {
  std::shared_ptr<ContextState> ctx;
  Status why;
  {
    std::lock_guard lock(mutex_);
    if (!lost_ || !ctx_) return;
    ctx = ctx_;
    why = *lost_;
  }
  ctx->Cancel(Detached(why));  // outside the lock: cancelling runs callbacks
}

std::optional<Status> WorkerAssignment::Lost() const {
  std::lock_guard lock(mutex_);
  if (!lost_) return std::nullopt;
  return Detached(*lost_);  // read and dropped on the job's thread
}

}  // namespace fairgate::internal

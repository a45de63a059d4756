#include "fairgate/context.h"

#include <algorithm>

#include "runtime/context_state.h"

namespace fairgate {
namespace internal {

ContextState::~ContextState() { UnlinkParent(); }

void ContextState::Cancel(Status reason) {
  std::vector<std::pair<std::uint64_t, std::function<void()>>> callbacks;
  {
    std::unique_lock lock(mutex_);
    if (cancelled_) return;
    cancelled_ = true;
    // Past its deadline the context was already done, for that reason.
    reason_ = deadline_ && Clock::now() >= *deadline_
                  ? absl::DeadlineExceededError("context deadline exceeded")
                  : std::move(reason);
    callbacks.swap(callbacks_);
  }
  cancelled_cv_.notify_all();
  for (auto& [id, callback] : callbacks) callback();
  UnlinkParent();
}

bool ContextState::Done() const { return !Err().ok(); }

Status ContextState::Err() const {
  std::unique_lock lock(mutex_);
  if (cancelled_) return reason_;
  if (deadline_ && Clock::now() >= *deadline_) {
    return absl::DeadlineExceededError("context deadline exceeded");
  }
  return absl::OkStatus();
}

std::uint64_t ContextState::AddCallback(std::function<void()> callback) {
  {
    std::unique_lock lock(mutex_);
    if (!cancelled_) {
      callbacks_.emplace_back(next_id_, std::move(callback));
      return next_id_++;
    }
  }
  callback();
  return 0;
}

bool ContextState::RemoveCallback(std::uint64_t id) {
  if (id == 0) return false;
  std::unique_lock lock(mutex_);
  auto it = std::find_if(callbacks_.begin(), callbacks_.end(),
                         [&](const auto& entry) { return entry.first == id; });
  if (it == callbacks_.end()) return false;
  callbacks_.erase(it);
  return true;
}

bool ContextState::WaitUntil(std::optional<Clock::time_point> until) {
  std::optional<Clock::time_point> end = deadline_;
  if (until && (!end || *until < *end)) end = until;
  {
    std::unique_lock lock(mutex_);
    if (end) {
      cancelled_cv_.wait_until(lock, *end, [&] { return cancelled_; });
    } else {
      cancelled_cv_.wait(lock, [&] { return cancelled_; });
    }
  }
  return Done();
}

void ContextState::LinkParent(const std::shared_ptr<ContextState>& parent) {
  if (!parent) return;
  std::weak_ptr<ContextState> weak_parent = parent;
  // The callback holds the child weakly: a child nobody refers to any more is not kept alive.
  const std::uint64_t id = parent->AddCallback([weak_self = weak_from_this(), weak_parent] {
    auto self = weak_self.lock();
    if (!self) return;
    Status reason = absl::CancelledError("parent context cancelled");
    if (auto p = weak_parent.lock()) reason = p->Err();
    self->Cancel(std::move(reason));
  });
  std::unique_lock lock(mutex_);
  parent_ = parent;
  parent_callback_ = id;
}

void ContextState::UnlinkParent() {
  std::shared_ptr<ContextState> parent;
  std::uint64_t id;
  {
    std::unique_lock lock(mutex_);
    parent = parent_.lock();
    parent_.reset();
    id = parent_callback_;
    parent_callback_ = 0;
  }
  if (parent) parent->RemoveCallback(id);
}

}  // namespace internal

Context Context::Background() { return Context(nullptr); }

bool Context::Done() const { return state_ && state_->Done(); }

Status Context::Err() const { return state_ ? state_->Err() : absl::OkStatus(); }

std::uint64_t Context::FencingToken() const { return state_ ? state_->fencing_token() : 0; }

std::string_view Context::Worker() const {
  return state_ && state_->worker() ? std::string_view(*state_->worker()) : std::string_view();
}

std::optional<Context::Clock::time_point> Context::Deadline() const {
  return state_ ? state_->deadline() : std::nullopt;
}

void Context::Wait() const {
  if (state_) {
    state_->WaitUntil(std::nullopt);
    return;
  }
  // Background is never done: block for good, without spinning.
  internal::WaitMutex mutex;
  internal::WaitCondition never;
  std::unique_lock lock(mutex);
  never.wait(lock, [] { return false; });
}

bool Context::WaitFor(Clock::duration timeout) const {
  if (state_) return state_->WaitUntil(Clock::now() + timeout);
  internal::SleepFor(timeout);
  return false;
}

std::pair<Context, CancelFunc> WithDeadline(const Context& parent,
                                            Context::Clock::time_point deadline) {
  std::optional<Context::Clock::time_point> effective = deadline;
  if (auto inherited = parent.Deadline(); inherited && *inherited < deadline) {
    effective = inherited;
  }
  auto state = std::make_shared<internal::ContextState>(effective);
  state->set_fencing_token(parent.FencingToken());
  if (parent.state()) state->set_worker(parent.state()->worker());
  state->LinkParent(parent.state());
  CancelFunc cancel = [state] { state->Cancel(absl::CancelledError("context cancelled")); };
  return {Context(state), std::move(cancel)};
}

std::pair<Context, CancelFunc> WithCancel(const Context& parent) {
  auto state = std::make_shared<internal::ContextState>(parent.Deadline());
  state->set_fencing_token(parent.FencingToken());
  if (parent.state()) state->set_worker(parent.state()->worker());
  state->LinkParent(parent.state());
  CancelFunc cancel = [state] { state->Cancel(absl::CancelledError("context cancelled")); };
  return {Context(state), std::move(cancel)};
}

// The function and whether it may still run, under a mutex that a run holds, so that Stop,
// taking it, waits for a run under way.
struct CancelCallback::Registration {
  internal::WaitMutex mutex;
  std::function<void()> fn;
  bool ran = false;
  bool stopped = false;
  std::weak_ptr<internal::ContextState> state;
  std::uint64_t id = 0;  // of the context's callback; 0 if none is registered
};

CancelCallback OnCancel(const Context& ctx, std::function<void()> fn) {
  if (!ctx.state() || !fn) return CancelCallback();  // never cancelled: nothing to register
  auto registration = std::make_shared<CancelCallback::Registration>();
  registration->fn = std::move(fn);
  registration->state = ctx.state();
  // The context holds the registration weakly: one stopped and dropped is not kept alive.
  registration->id =
      ctx.state()->AddCallback([weak = std::weak_ptr<CancelCallback::Registration>(registration)] {
        auto r = weak.lock();
        if (!r) return;
        std::unique_lock lock(r->mutex);
        if (r->stopped || r->ran) return;
        r->ran = true;
        r->fn();
      });
  return CancelCallback(std::move(registration));
}

CancelCallback& CancelCallback::operator=(CancelCallback&& other) noexcept {
  if (this != &other) {
    Stop();
    registration_ = std::move(other.registration_);
  }
  return *this;
}

bool CancelCallback::Stop() {
  if (!registration_) return false;
  Registration& r = *registration_;
  if (auto state = r.state.lock()) state->RemoveCallback(r.id);
  std::function<void()> fn;  // released outside the mutex: its captures may run anything
  bool ran;
  {
    std::unique_lock lock(r.mutex);
    r.stopped = true;
    ran = r.ran;
    fn.swap(r.fn);
  }
  return ran;
}

namespace internal {

Context WithFencingToken(const Context& parent, std::uint64_t token) {
  auto state = std::make_shared<ContextState>(parent.Deadline());
  state->set_fencing_token(token);
  if (parent.state()) state->set_worker(parent.state()->worker());
  state->LinkParent(parent.state());
  return Context(state);
}

Context WithState(std::shared_ptr<ContextState> state) { return Context(std::move(state)); }

}  // namespace internal

std::pair<Context, CancelFunc> WithTimeout(const Context& parent,
                                           Context::Clock::duration timeout) {
  return WithDeadline(parent, Context::Clock::now() + timeout);
}

}  // namespace fairgate

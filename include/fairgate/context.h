// fairgate/context.h: Go-style contexts, which carry cancellation and deadlines to jobs.
//
// A Context is a cheap, copyable handle to shared state. `Background()` is never done. A context
// made by WithCancel, WithDeadline or WithTimeout is done when its cancel function is called, when
// its deadline passes, or when its parent is done, whichever comes first; its deadline is never
// later than its parent's. Once done it stays done, and Err() says why: Cancelled or
// DeadlineExceeded (OK while not done).
//
// Thread safety: every method may be called from any thread or fiber at once. A cancel function
// may be called any number of times, from anywhere; calls after the first do nothing. Calling it
// releases the context's link to its parent, so call it when done with the context, as in Go.
//
// What may suspend a fiber (Boost.Fiber primitives, which suspend only the calling fiber when
// called from a fiber, and block the thread when called from a plain thread):
// - Wait and WaitFor: until the context is done (or the timeout passes).
// - Done, Err, a cancel function, WithCancel, WithDeadline and WithTimeout take the context's
//   mutex, held only to read or flip its state: they suspend the calling fiber only while another
//   holds it, for that moment. A cancel function also runs, on its caller, what was registered
//   on the context: it cancels the children, wakes RunSync callers waiting under it, and ends the
//   waits of Acquire calls under it, whose callbacks then run there (fairgate/scheduler.h). It
//   never waits for a job to finish.
// - OnCancel and CancelCallback::Stop take the context's mutex as Done does; Stop also waits for
//   a call of the registered function under way on another thread to return.
// - Deadline and Background never suspend.
#ifndef FAIRGATE_CONTEXT_H_
#define FAIRGATE_CONTEXT_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "fairgate/export.h"
#include "fairgate/status.h"

namespace fairgate {

class Context;
namespace internal {
// For clang's thread-safety analysis of fairgate's own code (scripts/thread_safety.sh), nothing
// for a user to hold: held wherever the runtime holds a scheduler's core lock. Every call that may
// suspend a fiber excludes it (the methods below among them), because a fiber suspended under
// that lock stops its whole thread, and with it the scheduler (src/runtime/README.md, "Nothing
// suspends a fiber under a thread lock"); the runtime checks the same rule as it runs
// (runtime/waiting.h).
class ABSL_LOCKABLE CoreLockCapability {};
inline CoreLockCapability core_lock;
class ContextState;
// A child of `parent` whose FencingToken is `token` (the runtime's, for jobs under a fleet-wide
// lease).
Context WithFencingToken(const Context& parent, std::uint64_t token);
// A context around a state the runtime made (a job's on a worker, runtime/worker_assignment.h).
Context WithState(std::shared_ptr<ContextState> state);
}  // namespace internal

class FAIRGATE_EXPORT Context {
 public:
  using Clock = std::chrono::steady_clock;

  // The root context: never cancelled, no deadline.
  static Context Background();

  // Whether the context is done (cancelled, or past its deadline).
  bool Done() const ABSL_LOCKS_EXCLUDED(internal::core_lock);
  // OK while not done; once done, Cancelled or DeadlineExceeded, or Unavailable for a job's
  // context whose worker was removed (Worker()).
  Status Err() const ABSL_LOCKS_EXCLUDED(internal::core_lock);
  // The deadline, if the context or an ancestor has one.
  std::optional<Clock::time_point> Deadline() const;

  // Blocks until the context is done. Never returns for Background().
  void Wait() const ABSL_LOCKS_EXCLUDED(internal::core_lock);
  // Blocks until the context is done or `timeout` passes; returns Done().
  bool WaitFor(Clock::duration timeout) const ABSL_LOCKS_EXCLUDED(internal::core_lock);

  // For fairgate's runtime: the shared state, null for Background().
  const std::shared_ptr<internal::ContextState>& state() const { return state_; }

  // The fencing token of the fleet-wide resource lease held by the job this context was given
  // to (FleetOptions::conflict_groups), inherited by contexts made from it: greater
  // than the token of every earlier holder of the resource, so that storage shared by replicas
  // can refuse a write whose token is lower than one it has seen (its lease had passed). 0 when
  // the job holds no such lease.
  std::uint64_t FencingToken() const;

  // With workers declared (fairgate/worker.h): the name of the worker the job this context was
  // given to was admitted onto, inherited by contexts made from it; send the work there. Empty
  // without workers. If that worker is removed while the job runs, the context is cancelled and
  // Err() says so (Unavailable).
  std::string_view Worker() const;

 private:
  friend std::pair<Context, std::function<void()>> WithCancel(const Context& parent);
  friend std::pair<Context, std::function<void()>> WithDeadline(const Context& parent,
                                                                Clock::time_point deadline);
  explicit Context(std::shared_ptr<internal::ContextState> state) : state_(std::move(state)) {}
  friend Context internal::WithFencingToken(const Context& parent, std::uint64_t token);
  friend Context internal::WithState(std::shared_ptr<internal::ContextState> state);

  std::shared_ptr<internal::ContextState> state_;
};

using CancelFunc = std::function<void()>;

// A child of `parent` that is also done when the returned function is called.
FAIRGATE_EXPORT std::pair<Context, CancelFunc> WithCancel(const Context& parent)
    ABSL_LOCKS_EXCLUDED(internal::core_lock);
// A child of `parent` that is also done at `deadline` (or earlier, by its cancel function).
FAIRGATE_EXPORT std::pair<Context, CancelFunc> WithDeadline(const Context& parent,
                                                            Context::Clock::time_point deadline)
    ABSL_LOCKS_EXCLUDED(internal::core_lock);
// WithDeadline(parent, now + timeout).
FAIRGATE_EXPORT std::pair<Context, CancelFunc> WithTimeout(const Context& parent,
                                                           Context::Clock::duration timeout)
    ABSL_LOCKS_EXCLUDED(internal::core_lock);

// A function registered on a context by OnCancel, until Stop (or its destruction) unregisters
// it. Move-only; a default-constructed one registers nothing.
class FAIRGATE_EXPORT CancelCallback {
 public:
  CancelCallback() = default;
  CancelCallback(CancelCallback&& other) noexcept = default;
  // Stops the callback held here before taking `other`'s.
  CancelCallback& operator=(CancelCallback&& other) noexcept;
  CancelCallback(const CancelCallback&) = delete;
  CancelCallback& operator=(const CancelCallback&) = delete;
  ~CancelCallback() { Stop(); }

  // Unregisters the function: once Stop returns it is not running and never will (if it is
  // running on another thread, Stop waits until it returns), and what it captured is released.
  // Returns whether it ran. Later calls return the same. Must not be called by the function
  // itself.
  bool Stop() ABSL_LOCKS_EXCLUDED(internal::core_lock);

  struct Registration;  // the context's side, defined by fairgate

 private:
  friend CancelCallback OnCancel(const Context& ctx, std::function<void()> fn);
  explicit CancelCallback(std::shared_ptr<Registration> registration)
      : registration_(std::move(registration)) {}
  std::shared_ptr<Registration> registration_;
};

// Calls `fn` once when `ctx` is cancelled (its cancel function called, or an ancestor's; a job's
// context also when the scheduler shuts down or the job's worker is removed), on the thread that
// cancels it, or at once on this thread if it already was; never for Background(). Not when only
// a deadline passes: a deadline is read (Done, Deadline), never pushed. For code that cannot wait
// on the context (a callback-driven client, another language's runtime). `fn` must be short and
// must not block: it runs inside the canceller's call. Keep the result for as long as `fn` may
// run: its destruction stops it.
[[nodiscard]] FAIRGATE_EXPORT CancelCallback OnCancel(const Context& ctx, std::function<void()> fn)
    ABSL_LOCKS_EXCLUDED(internal::core_lock);

}  // namespace fairgate

#endif  // FAIRGATE_CONTEXT_H_

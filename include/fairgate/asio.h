// fairgate/asio.h: Scheduler::Acquire as a Boost.Asio asynchronous operation.
//
// On Debian 12 (Boost 1.74, g++ 12, C++20), Boost's own boost/asio/awaitable.hpp uses
// std::exchange without including <utility>: a file whose first include is <boost/asio.hpp> does
// not compile ("'exchange' is not a member of 'std'", inside Boost). Include <utility>, or this
// header, before <boost/asio.hpp>; this header includes <utility> before any of Boost's.
//
// Where the handler runs: on the handler's associated executor. A plain lambda has none, so Asio
// gives it the system executor, and the handler then runs on a thread of Asio's own system pool,
// not on your io_context's thread. Bind the executor it should run on:
//
//   boost::asio::io_context io;
//   fairgate::AsyncAcquire(
//       scheduler, ctx,
//       {fairgate::TypeName("clone"), fairgate::JobId(repository), fairgate::FairnessKey(client)},
//       boost::asio::bind_executor(io, [](fairgate::StatusOr<fairgate::Permit> p) {
//         // runs in io.run(), like every other handler of `io`
//       }));
//
// (or a strand of it, or a token whose executor is `io`'s, such as `use_awaitable` inside a
// coroutine that `io` runs).
//
// AsyncAcquire works with any completion token of Boost.Asio 1.74 (a handler,
// `boost::asio::use_future`, `boost::asio::use_awaitable`, a `bind_executor`-wrapped handler), with
// the completion signature `void(fairgate::StatusOr<fairgate::Permit>)`. Unlike a raw Acquire
// callback, the handler is never called inside AsyncAcquire, nor on a fairgate thread: the result
// is posted to the handler's associated executor, and the operation counts as outstanding work on
// that executor until then, as Asio's own operations do. A refusal arrives the same way, so the
// handler sees every outcome in one place.
//
// Cancellation is fairgate's: cancel `ctx` (or give it a deadline) to end the wait; the handler
// then gets Cancelled or DeadlineExceeded. If the executor is shut down before the handler runs,
// the posted result is destroyed with it, and a permit in it is given back unused
// (Permit::ReleaseUnused: its estimate learns nothing, its key's charge is given back).
//
// Thread safety: as Scheduler::Acquire. Header-only; the including target needs Boost's headers.
#ifndef FAIRGATE_ASIO_H_
#define FAIRGATE_ASIO_H_

#include <memory>
#include <string_view>
#include <utility>

#include "boost/asio/associated_executor.hpp"
#include "boost/asio/async_result.hpp"
#include "boost/asio/executor_work_guard.hpp"
#include "boost/asio/post.hpp"
#include "fairgate/context.h"
#include "fairgate/permit.h"
#include "fairgate/scheduler.h"
#include "fairgate/status.h"

namespace fairgate {

// With `options` (fairgate/job_options.h) for the job.
template <typename CompletionToken>
auto AsyncAcquire(Scheduler& scheduler, const Context& ctx, const JobName& job,
                  const JobOptions& options, CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken, void(StatusOr<Permit>)>(
      [&scheduler, &ctx, job, options](auto handler) {
        using Handler = decltype(handler);
        // Acquire's callback must be copyable (std::function); the handler need not be.
        struct Pending {
          explicit Pending(Handler h)
              : handler(std::move(h)),
                work(boost::asio::make_work_guard(boost::asio::get_associated_executor(handler))) {}
          Handler handler;
          boost::asio::executor_work_guard<boost::asio::associated_executor_t<Handler>> work;
        };
        // A result on its way to the handler: destroyed undelivered (the executor shut down
        // first), its permit is given back unused. Delivered, it is moved from and empty.
        struct Posted {
          explicit Posted(StatusOr<Permit> r) : result(std::move(r)) {}
          Posted(Posted&&) noexcept = default;
          ~Posted() {
            if (result.ok()) {
              result->ReleaseUnused(absl::CancelledError(
                  "the handler's executor shut down before the permit reached it"));
            }
          }
          StatusOr<Permit> result;
        };
        auto pending = std::make_shared<Pending>(std::move(handler));
        auto deliver = [pending](StatusOr<Permit> result) {
          auto executor = pending->work.get_executor();
          boost::asio::post(executor, [pending, posted = Posted(std::move(result))]() mutable {
            Handler handler = std::move(pending->handler);
            pending->work.reset();
            std::move(handler)(std::move(posted.result));
          });
        };
        Status refused = scheduler.Acquire(ctx, job, deliver, options);
        if (!refused.ok()) deliver(std::move(refused));
      },
      token);
}

template <typename CompletionToken>
auto AsyncAcquire(Scheduler& scheduler, const Context& ctx, const JobName& job,
                  CompletionToken&& token) {
  return AsyncAcquire(scheduler, ctx, job, JobOptions{}, std::forward<CompletionToken>(token));
}

}  // namespace fairgate

#endif  // FAIRGATE_ASIO_H_

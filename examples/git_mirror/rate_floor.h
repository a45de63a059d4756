// RateFloor: whether a transfer keeps up a minimum rate, judged on the bytes that have really
// moved (a body read from the client, a response taken by the client's TCP), never on when one
// read or write completes: a write of the next piece may wait until much of a multi-megabyte
// kernel buffer has drained, although the client takes its bytes steadily.
//
// The rule is a bucket of credit in bytes. It starts full at `grace` x `rate`; while the clock
// runs it drains at `rate` bytes per second; every byte moved puts one back; it never holds more
// than it started with (so a fast start buys at most the grace). The transfer is too slow once
// the bucket is empty. So a transfer at or above the rate is never cut, one that stops is cut
// after the grace, and one at a tenth of the rate is cut after about 1.1 x the grace.
//
// The clock runs only while the transfer waits on the client (Start .. Stop): time the server
// spends making what it sends is not held against the client.
//
// Thread safety: none; one transfer's handlers use it, on their strand.
#ifndef FAIRGATE_EXAMPLES_GIT_MIRROR_RATE_FLOOR_H_
#define FAIRGATE_EXAMPLES_GIT_MIRROR_RATE_FLOOR_H_

#include <chrono>
#include <cstdint>

namespace git_mirror {

class RateFloor {
 public:
  using Clock = std::chrono::steady_clock;

  // `rate` at least 1 byte per second, `grace` positive (ValidateHttpLimits checks both).
  RateFloor(std::uint64_t rate, Clock::duration grace);

  // Starts the clock at `now` (no-op if it runs).
  void Start(Clock::time_point now);
  // Stops the clock at `now` (no-op if it is stopped).
  void Stop(Clock::time_point now);
  bool running() const { return running_; }

  // `total` bytes have moved in all so far (a count that only grows).
  void Moved(std::uint64_t total, Clock::time_point now);

  // How long the credit lasts from `now` if nothing more moves; zero once it is spent.
  Clock::duration Left(Clock::time_point now) const;

 private:
  // The credit at `now`, with the time since the last update drained.
  double CreditAt(Clock::time_point now) const;

  double rate_;      // bytes per second
  double capacity_;  // bytes
  double credit_;    // bytes, at `since_`
  std::uint64_t moved_ = 0;
  Clock::time_point since_{};
  bool running_ = false;
};

}  // namespace git_mirror

#endif  // FAIRGATE_EXAMPLES_GIT_MIRROR_RATE_FLOOR_H_

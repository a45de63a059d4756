// TokenBucket: a RateLimit's state (fairgate/rate_limit.h). Internal to src/core.
//
// Deterministic, as the core is: the tokens are a function of the last take and of the time
// asked about, computed by one expression (docs/ordering.md, "Rate limits", has it), so that the
// reference model of the differential tests, computing the same, agrees to the bit.
#ifndef FAIRGATE_CORE_TOKEN_BUCKET_H_
#define FAIRGATE_CORE_TOKEN_BUCKET_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "fairgate/rate_limit.h"

namespace fairgate::core {

class TokenBucket {
 public:
  TokenBucket() = default;
  explicit TokenBucket(const RateLimit& limit) : limit_(limit), tokens_(limit.burst) {}

  bool limited() const { return limit_.limited(); }
  const RateLimit& limit() const { return limit_; }

  // The tokens at `now` (>= the last take's time): full at first, then what the last take left
  // plus what was gained since, at most `burst`.
  double TokensAt(double now) const {
    if (!limited()) return std::numeric_limits<double>::infinity();
    return std::min(limit_.burst, tokens_ + (now - taken_at_) * limit_.per_second);
  }
  // Whether an admission at `now` may take a token.
  bool HasToken(double now) const { return TokensAt(now) >= 1; }
  // An admission at `now` takes one (HasToken(now) is the caller's to check).
  void Take(double now) {
    if (!limited()) return;
    tokens_ = TokensAt(now) - 1;
    taken_at_ = now;
    ++taken_;
  }
  // The first time at or after `now` at which HasToken holds: when an admission held back by
  // this bucket may go. Nudged up to the first double where the expression gives a whole token,
  // so that a timer set to it always finds one.
  double NextTokenAt(double now) const {
    if (HasToken(now)) return now;
    double at = taken_at_ + (1 - tokens_) / limit_.per_second;
    at = std::max(at, now);
    while (!HasToken(at)) at = std::nextafter(at, std::numeric_limits<double>::infinity());
    return at;
  }
  std::uint64_t taken() const { return taken_; }
  // A decision passed over jobs under this bucket for want of a token.
  void CountRefusal() { ++refused_; }
  std::uint64_t refused() const { return refused_; }

 private:
  RateLimit limit_;
  double tokens_ = 0;    // after the last take
  double taken_at_ = 0;  // when it was
  std::uint64_t taken_ = 0;
  std::uint64_t refused_ = 0;
};

}  // namespace fairgate::core

#endif  // FAIRGATE_CORE_TOKEN_BUCKET_H_

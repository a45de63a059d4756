// TokenBucket: a RateLimit's state (fairgate/rate_limit.h). Internal to src/core.
//
// Deterministic, as the core is: the tokens are a function of the last take and of the time
// asked about, computed by one expression (docs/ordering.md, "Rate limits", has it), so that the
// reference model of the differential tests, computing the same, agrees to the bit. Tokens (the
// expression, on a limit and a state) serve a key's bucket too, whose limit is the key's
// (KeyLimits::rate_limit) and whose state KeyTable keeps apart from the key.
#ifndef FAIRGATE_CORE_TOKEN_BUCKET_H_
#define FAIRGATE_CORE_TOKEN_BUCKET_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string_view>

#include "fairgate/rate_limit.h"
#include "fairgate/status.h"

namespace fairgate::core {

// A bucket's state under a limit: the tokens its last take left, and when that was; a bucket
// nothing has taken from holds `burst` (Full).
struct Tokens {
  double left = 0;
  double at = 0;

  static Tokens Full(const RateLimit& limit) { return {limit.burst, 0}; }
  // The tokens at `now` (>= at): what the last take left plus what was gained since, at most
  // `burst`.
  double At(const RateLimit& limit, double now) const {
    return std::min(limit.burst, left + (now - at) * limit.per_second);
  }
  bool HasToken(const RateLimit& limit, double now) const { return At(limit, now) >= 1; }
  // A take at `now` (HasToken is the caller's to check).
  void Take(const RateLimit& limit, double now) { *this = {At(limit, now) - 1, now}; }
  // The first time at which HasToken holds, after a take that left less than a token: computed,
  // then nudged up to the first double where the expression gives a whole token, so that a timer
  // set to it always finds one.
  double NextTokenAt(const RateLimit& limit) const {
    double t = at + (1 - left) / limit.per_second;
    while (!HasToken(limit, t)) t = std::nextafter(t, std::numeric_limits<double>::infinity());
    return t;
  }
};

// The refusal of a call that asked not to wait for a token (JobOptions::refuse_without_token):
// ResourceExhausted naming `what` lacked one, with `seconds` until it is due as the payload
// fairgate::RetryAfter reads (rate_limit.cc, beside it).
Status RefusedForToken(std::string_view what, double seconds);

// A bucket with its limit and its counts: the global rate limit's and each type's.
class TokenBucket {
 public:
  TokenBucket() = default;
  explicit TokenBucket(const RateLimit& limit) : limit_(limit), tokens_(Tokens::Full(limit)) {}

  bool limited() const { return limit_.limited(); }
  const RateLimit& limit() const { return limit_; }

  // The tokens at `now` (infinity without a limit).
  double TokensAt(double now) const {
    if (!limited()) return std::numeric_limits<double>::infinity();
    return tokens_.At(limit_, now);
  }
  // Whether an admission at `now` may take a token.
  bool HasToken(double now) const { return TokensAt(now) >= 1; }
  // An admission at `now` takes one (HasToken(now) is the caller's to check).
  void Take(double now) {
    if (!limited()) return;
    tokens_.Take(limit_, now);
    ++taken_;
  }
  // The first time at or after `now` at which HasToken holds: when an admission held back by
  // this bucket may go.
  double NextTokenAt(double now) const {
    return HasToken(now) ? now : std::max(now, tokens_.NextTokenAt(limit_));
  }
  std::uint64_t taken() const { return taken_; }
  // A decision passed over jobs under this bucket for want of a token.
  void CountRefusal() { ++refused_; }
  std::uint64_t refused() const { return refused_; }

 private:
  RateLimit limit_;
  Tokens tokens_;
  std::uint64_t taken_ = 0;
  std::uint64_t refused_ = 0;
};

}  // namespace fairgate::core

#endif  // FAIRGATE_CORE_TOKEN_BUCKET_H_

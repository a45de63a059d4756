// fairgate/rate_limit.h: how often work may start, as a token bucket.
//
// A RateLimit bounds admissions over time where a cap bounds them at once: a bucket holds up to
// `burst` tokens and gains `per_second` of them every second; each admission under it takes one
// token, and a job whose bucket has less than one is passed over (never waited on: the next job
// in the order that may run goes instead) until the token is due. A bucket starts full. One token
// per admission, whatever the job's slots (JobTypeConfig::slots); a request that joins a job of
// its id (coalescing) takes none, as it starts nothing.
//
// Where they apply: RuleOptions::rate_limit, every admission of the scheduler;
// JobTypeConfig::rate_limit, each admission of that type; KeyLimits::rate_limit (SetKeyLimits, or
// RuleOptions::default_key_limits), each admission of that key. A call may rather be refused than
// wait for a token (JobOptions::refuse_without_token), and RetryAfter below says when its token
// is due. The rule, exactly, with the arithmetic the core does, is in docs/ordering.md ("Rate
// limits").
//
// Thread safety: a plain value type.
#ifndef FAIRGATE_RATE_LIMIT_H_
#define FAIRGATE_RATE_LIMIT_H_

#include <optional>
#include <string_view>

#include "fairgate/export.h"
#include "fairgate/status.h"

namespace fairgate {

struct RateLimit {
  // Tokens gained per second. 0: no limit (the default). Finite and >= 0.
  double per_second = 0;
  // The most tokens the bucket holds: how many admissions may follow each other at once after
  // an idle while. Finite and >= 1.
  double burst = 1;
  bool limited() const { return per_second > 0; }
  friend bool operator==(const RateLimit&, const RateLimit&) = default;
};

// OK when the limit is in range, else InvalidArgument naming `field` (e.g. "rule.rate_limit")
// and what is wrong.
FAIRGATE_EXPORT Status ValidateRateLimit(const RateLimit& limit, std::string_view field);

// For a call refused because a rate limit had no token (JobOptions::refuse_without_token: a
// ResourceExhausted status): in how many seconds the token it lacked is due (when several
// lacked one, the latest), > 0. Nothing for any other status.
FAIRGATE_EXPORT std::optional<double> RetryAfter(const Status& status);

}  // namespace fairgate

#endif  // FAIRGATE_RATE_LIMIT_H_

// fairgate/key_limits.h: how many jobs one fairness key may run, and how many it is promised.
//
// KeyLimits are set per key with Scheduler::SetKeyLimits, or for every key without its own with
// RuleOptions::default_key_limits:
// - `max_running`: a key with this many jobs running is not admissible; its pending jobs wait and
//   the free slots go to other keys.
// - `min_running`: a key running fewer jobs than this, with jobs pending, goes first within its
//   tier (a reservation). It is an order, never a held slot: when the key has nothing admissible
//   the slot goes to someone else (fairgate never leaves a usable slot idle).
// - `rate_limit`: how often the key's jobs may start (fairgate/rate_limit.h), a bucket of the
//   key's own: "at most 30 clones a minute per client". A key whose bucket has no token is passed
//   over until its next token is due; other keys' jobs go meanwhile. A key forgotten after
//   key_ttl idle starts again with a full bucket.
// - `rate_per_weight`: the rate is per unit of the key's weight (Scheduler::SetKeyWeight): a key
//   of weight w gains w x per_second tokens a second (its burst as given), so that a key that
//   counts double in the order may also start twice as often. A change of the weight applies from
//   then on, to what the bucket's last take left, as a change of the limit does.
// The order and admissibility rules they take part in are in docs/ordering.md.
//
// Thread safety: a plain value type.
#ifndef FAIRGATE_KEY_LIMITS_H_
#define FAIRGATE_KEY_LIMITS_H_

#include <limits>

#include "fairgate/export.h"
#include "fairgate/rate_limit.h"
#include "fairgate/status.h"

namespace fairgate {

struct KeyLimits {
  static constexpr int kNoLimit = std::numeric_limits<int>::max();
  int max_running = kNoLimit;  // >= 1
  int min_running = 0;         // >= 0 and <= max_running
  RateLimit rate_limit = {};   // off by default
  bool rate_per_weight = false;
  friend bool operator==(const KeyLimits&, const KeyLimits&) = default;
};

// OK when the limits are in range, else InvalidArgument naming the field.
FAIRGATE_EXPORT Status ValidateKeyLimits(const KeyLimits& limits);

// OK when `weight` is finite and > 0, else InvalidArgument.
FAIRGATE_EXPORT Status ValidateKeyWeight(double weight);

}  // namespace fairgate

#endif  // FAIRGATE_KEY_LIMITS_H_

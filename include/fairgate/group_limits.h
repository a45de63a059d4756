// fairgate/group_limits.h: how many jobs the keys of one group (a tenant) may run together, and
// how many they are promised.
//
// A key belongs to at most one group (Scheduler::SetKeyGroup); GroupLimits are set per group with
// Scheduler::SetGroupLimits, and count the running jobs of all its keys:
// - `max_running`: a group whose keys run this many jobs is not admissible; its keys' pending jobs
//   wait and the free slots go to other groups and keys.
// - `min_running`: a group running fewer jobs than this, with jobs pending, goes first within its
//   tier, before every key and group that is not so reserved (a reservation). As a key's, it is an
//   order, never a held slot.
// The order and admissibility rules they take part in are in docs/ordering.md ("Groups").
//
// Thread safety: a plain value type.
#ifndef FAIRGATE_GROUP_LIMITS_H_
#define FAIRGATE_GROUP_LIMITS_H_

#include <limits>

#include "fairgate/export.h"
#include "fairgate/status.h"

namespace fairgate {

struct GroupLimits {
  static constexpr int kNoLimit = std::numeric_limits<int>::max();
  int max_running = kNoLimit;  // >= 1
  int min_running = 0;         // >= 0 and <= max_running
  friend bool operator==(const GroupLimits&, const GroupLimits&) = default;
};

// OK when the limits are in range, else InvalidArgument naming the field.
FAIRGATE_EXPORT Status ValidateGroupLimits(const GroupLimits& limits);

}  // namespace fairgate

#endif  // FAIRGATE_GROUP_LIMITS_H_

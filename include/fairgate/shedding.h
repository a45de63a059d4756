// fairgate/shedding.h: refusing a type's work fairly when it cannot be served in time.
//
// A queue wait limit (JobTypeConfig::max_queue_wait) drops a job after it has waited too long;
// by then it has held its caller all that time. With JobTypeConfig::shedding the type refuses
// work as soon as its queue *stands*, CoDel-style: its oldest pending job has waited at least
// `target` without a break for `interval` (a queue that drains below the target now and then is
// serving in time and is left alone). While it stands:
// - a new job of the type is compared with the type's pending jobs by how much its group and its
//   key have consumed (the group's cost, then the key's, then arrival: latest heaviest); if it is
//   the heaviest, the call is refused at once with ResourceExhausted, and RetryAfter
//   (fairgate/rate_limit.h) reads `interval` from the status; else the heaviest pending job is
//   refused in its place (it leaves the queue uncharged, its caller told the same) and the new
//   job is queued;
// - each admission of a job of the type refuses its heaviest pending job as well, so that the
//   queue drains until its oldest job has waited less than `target`.
// So the clients that have consumed the most lose their latest work first, and the lightest keep
// being served. A request that joins a job already queued (coalescing) is never refused so.
// docs/ordering.md ("Shedding") states the rule exactly; Snapshot counts the refusals per type,
// and the scheduler's metrics and events name each one's reason.
//
// Thread safety: a plain value type.
#ifndef FAIRGATE_SHEDDING_H_
#define FAIRGATE_SHEDDING_H_

#include <string_view>

#include "fairgate/export.h"
#include "fairgate/seconds.h"
#include "fairgate/status.h"

namespace fairgate {

struct Shedding {
  Seconds target{0};      // the queue wait that counts as late: finite and >= 0; 0: no shedding
  Seconds interval{1.0};  // how long the queue must stand before shedding: finite and > 0
  bool on() const { return target.count() > 0; }
  friend bool operator==(const Shedding&, const Shedding&) = default;
};

// Returns OK when `shedding` is valid, else InvalidArgument naming the field (prefixed with
// `field`, e.g. "shedding").
FAIRGATE_EXPORT Status ValidateShedding(const Shedding& shedding, std::string_view field);

// Whether `status` is a refusal by shedding (ResourceExhausted, with RetryAfter): an HTTP server
// answers it with 503 and Retry-After where a refusal for want of a token is a 429.
FAIRGATE_EXPORT bool WasShed(const Status& status);

}  // namespace fairgate

#endif  // FAIRGATE_SHEDDING_H_

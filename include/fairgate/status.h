// fairgate/status.h: how fairgate reports errors.
//
// Errors are values. Every fallible call returns `absl::Status` or `absl::StatusOr<T>`; no
// exception crosses fairgate's API, and an exception thrown by user code is caught at the edge and
// becomes a status. The codes fairgate uses, and what each means:
//
//   InvalidArgument     bad input: an empty type name, `priority < 1`, `max_concurrency < 1`,
//                       a negative or non-finite cost or time, `alpha` outside (0, 1], an empty
//                       job id. The message names the offending field and value.
//   NotFound            an unknown job type, or a job handle that names no live job.
//   AlreadyExists       a job type registered a second time with a different configuration.
//   FailedPrecondition  an operation that does not fit the job's state (cancelling a running job
//                       in the core, completing a pending one).
//   ResourceExhausted   a bounded queue is full (`max_pending_total`, `max_pending_per_key`);
//                       nothing already queued was dropped. Retry later, as after an HTTP 429.
//                       Also a store whose disk or file is full (fairgate/store.h).
//   Unavailable         the scheduler is shutting down or draining; or a store's I/O failed or
//                       its file stayed locked by another process.
//   DataLoss            a store's file is corrupt.
//
// Thread safety: statuses are plain values.
#ifndef FAIRGATE_STATUS_H_
#define FAIRGATE_STATUS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace fairgate {

using Status = absl::Status;
template <typename T>
using StatusOr = absl::StatusOr<T>;

}  // namespace fairgate

#endif  // FAIRGATE_STATUS_H_

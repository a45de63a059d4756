// fairgate/job_options.h: what one call may say about its own job, beyond its type, id and key.
//
// Passed as the last argument of RunSync, Acquire and Submit (fairgate/scheduler.h); a default
// JobOptions changes nothing.
//
// Thread safety: a plain value type.
#ifndef FAIRGATE_JOB_OPTIONS_H_
#define FAIRGATE_JOB_OPTIONS_H_

#include <optional>

namespace fairgate {

struct JobOptions {
  // The job's cost in seconds of slot time, when the caller knows it better than the scheduler
  // (a clone of a repository whose size it has just read, say). It is charged to the key at
  // admission instead of the learned or default estimate of (type, id), and it is the job's
  // shortest-first cost; the estimate of (type, id) still learns from the job's run time, and
  // reconciliation (RuleOptions::reconcile) still corrects the charge by it. Finite and >= 0:
  // else the call is refused with InvalidArgument. Unset: the estimate is charged.
  std::optional<double> cost;
  // Submit of a coalescing type (JobTypeConfig::coalesce): also join a running job of its id, as
  // RunSync does, and be told the status of that run. For work that any run already under way
  // does (make a mirror that does not exist yet), not for work that must start after the call
  // (fetch what was pushed since). Ignored by RunSync (which always may) and Acquire (never).
  bool join_running = false;
  // Submit with workers (fairgate/worker.h): a job whose worker is removed while it runs is
  // submitted again, with its function and callback, as a new job (at the back of its key's
  // queue, charged again), until it ends otherwise or the scheduler stops accepting; the
  // callback is told only then. Without it the callback gets the loss (WorkerLost). Ignored by
  // RunSync and Acquire, whose callers decide.
  bool requeue_on_worker_loss = false;
  // Rate limits (fairgate/rate_limit.h): when a bucket the job is under (the global one, its
  // type's, its key's) has no token at its arrival, refuse it at once with ResourceExhausted
  // instead of queueing it to wait for one; RetryAfter reads from that status how long until the
  // latest of those tokens is due (an HTTP server's 429 and Retry-After). A call refused so is
  // counted as rejected. When the buckets have a token, the job is queued as any other and may
  // still wait, if jobs ahead of it take that token first. On a shared store the buckets are the
  // fleet's: a replica whose lease of one is on its way queues the job until that lease comes,
  // and refuses it then if it brought none (FleetOptions::token_lease). A request that joins a job
  // of its id (coalescing) takes no token and is never refused so. Also for every call of a type
  // that sets JobTypeConfig::refuse_without_token.
  bool refuse_without_token = false;

  friend bool operator==(const JobOptions&, const JobOptions&) = default;
};

}  // namespace fairgate

#endif  // FAIRGATE_JOB_OPTIONS_H_

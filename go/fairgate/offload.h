/* offload.h: a Go function that a job of the C library runs, run by a goroutine of its own while
 * the job waits for it in C (offload.c).
 *
 * Why: the C library runs a job's function on a fiber of its pool, and a thread of the pool runs
 * many fibers. Go code run inside the callback itself would hold the thread for as long as it
 * runs (the fibers beside it wait), and a fairgate call it made that suspended the fiber would
 * let another fiber enter Go on the same thread, which the Go runtime does not survive (c.h,
 * "Fibers"). So the job function only has a goroutine started (by the hand-off's, handoff.h),
 * which calls no fairgate function that waits, and the job waits for it here, as a fiber:
 * fairgate_context_wait on a cancellation's context (fairgate_cancel_context) that the goroutine
 * fires when the function has returned.
 *
 * A job function of this package is fairgate_go_run_job(ctx, kind, user, job, error): it makes
 * the run's call, registers a cancel callback on the job's context ctx, hands the call's start to
 * Go (handoff.h: Go then makes the Go function's context, calls fairgate_go_call_started and
 * starts the goroutine), waits, and stops the callback. The goroutine ends with
 * fairgate_go_call_finish(call, code, message), exactly once. The call is freed by whichever of
 * the two comes last, so neither touches it after its own call. While the callback is registered
 * a cancellation of the job's context cancels the Go function's: fairgateGoRunCancelled(call),
 * once its context is made (fairgate_go_call_started says whether it came before). */
#ifndef FAIRGATE_GO_OFFLOAD_H_
#define FAIRGATE_GO_OFFLOAD_H_

#include "fairgate/c.h"
#include "handoff.h"

/* Runs a Go function for the job whose context is ctx, as the header comment says, and returns
 * its code, its message into *error (the job function's, which the C library frees). `kind` is
 * the start's (FAIRGATE_GO_START_*), `user` and `job` what Go's start is handed with ctx and the
 * call (handoff.h). */
fairgate_code fairgate_go_run_job(const fairgate_context* ctx, fairgate_go_item_kind kind,
                                  void* user, const void* job, char** error);

/* Called by Go's start (handoff.h) once the Go function's context is made and
 * fairgateGoRunCancelled finds it: 1, or 0 if the job's context was cancelled before (then the
 * start cancels the Go context). */
int fairgate_go_call_started(fairgate_go_call* call);

/* The goroutine's end: the function's code, and its message (malloc'd, NULL for none), which the
 * waiting job returns as its own. Wakes the job. */
void fairgate_go_call_finish(fairgate_go_call* call, fairgate_code code, char* message);

#endif /* FAIRGATE_GO_OFFLOAD_H_ */

/* offload.h: a Go function that a job of the C library runs, run by a goroutine of its own while
 * the job waits for it in C (offload.c).
 *
 * Why: the C library runs a job's function on a fiber of its pool, and a thread of the pool runs
 * many fibers. Go code run inside the callback itself would hold the thread for as long as it
 * runs (the fibers beside it wait), and a fairgate call it made that suspended the fiber would
 * let another fiber enter Go on the same thread, which the Go runtime does not survive (c.h,
 * "Fibers"). So the callback only starts a goroutine, which calls no fairgate function that
 * waits, and the job waits for it here, as a fiber: fairgate_context_wait on a cancellation's
 * context (fairgate_cancel_context) that the goroutine fires when the function has returned.
 *
 * The job's callback: call = fairgate_go_call_new(error), hand `call` to a Go function that starts
 * the goroutine, then return fairgate_go_call_wait(call, error). The goroutine ends with
 * fairgate_go_call_finish(call, code, message), exactly once. The call is freed by whichever of
 * the two comes last, so neither touches it after its own call. */
#ifndef FAIRGATE_GO_OFFLOAD_H_
#define FAIRGATE_GO_OFFLOAD_H_

#include "fairgate/c.h"

typedef struct fairgate_go_call fairgate_go_call;

/* A call for one run; NULL when memory ran out (then *error says so, if it could be copied). */
fairgate_go_call* fairgate_go_call_new(char** error);

/* The goroutine's end: the function's code, and its message (malloc'd, NULL for none), which the
 * waiting job returns as its own. Wakes the job. */
void fairgate_go_call_finish(fairgate_go_call* call, fairgate_code code, char* message);

/* Waits (suspending the job's fiber, not its thread) until the goroutine finished, and returns
 * its code, its message into *error (the job function's, which the C library frees). */
fairgate_code fairgate_go_call_wait(fairgate_go_call* call, char** error);

#endif /* FAIRGATE_GO_OFFLOAD_H_ */

/* offload.c: a Go function run by a goroutine while the job waits for it in C (offload.h). */
#include "offload.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Cancels the Go function's context of `call` (offload.go); never blocks. */
extern void fairgateGoRunCancelled(fairgate_go_call* call);

enum {
  kUnstarted = 0,      /* the Go function's context not made yet */
  kStarted = 1,        /* made: a cancellation goes to fairgateGoRunCancelled */
  kCancelledEarly = 2, /* the job's context was cancelled before it was made */
};

struct fairgate_go_call {
  fairgate_go_item start;    /* handed to Go (handoff.h) */
  fairgate_cancel* finished; /* fired by fairgate_go_call_finish */
  int32_t holders;           /* the job and the goroutine: the last to let go frees the call */
  int32_t state;             /* kUnstarted, kStarted or kCancelledEarly */
  fairgate_code code;        /* set before `finished` is fired, read after the wait */
  char* message;
};

static void fairgate_go_call_release(fairgate_go_call* call) {
  if (__atomic_sub_fetch(&call->holders, 1, __ATOMIC_ACQ_REL) == 0) {
    fairgate_cancel_free(call->finished);
    free(call);
  }
}

/* The job's cancel callback: the call is held by the job until the callback is stopped. */
static void fairgate_go_call_cancelled(void* user) {
  fairgate_go_call* call = (fairgate_go_call*)user;
  int32_t unstarted = kUnstarted;
  if (__atomic_compare_exchange_n(&call->state, &unstarted, kCancelledEarly, 0, __ATOMIC_ACQ_REL,
                                  __ATOMIC_ACQUIRE)) {
    return;
  }
  fairgateGoRunCancelled(call);
}

int fairgate_go_call_started(fairgate_go_call* call) {
  int32_t unstarted = kUnstarted;
  return __atomic_compare_exchange_n(&call->state, &unstarted, kStarted, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE);
}

void fairgate_go_call_finish(fairgate_go_call* call, fairgate_code code, char* message) {
  call->code = code;
  call->message = message;
  /* The context's lock orders these writes before the waiter's reads. The job may return as soon
   * as this fires, but the call stays until this side lets go too. */
  fairgate_cancel_fire(call->finished);
  fairgate_go_call_release(call);
}

fairgate_code fairgate_go_run_job(const fairgate_context* ctx, fairgate_go_item_kind kind,
                                  void* user, const void* job, char** error) {
  static const char kOutOfMemory[] = "out of memory starting the Go function";
  fairgate_go_call* call = (fairgate_go_call*)calloc(1, sizeof *call);
  if (call != NULL) call->finished = fairgate_cancel_new();
  if (call == NULL || call->finished == NULL) {
    free(call);
    *error = (char*)malloc(sizeof kOutOfMemory);
    if (*error != NULL) memcpy(*error, kOutOfMemory, sizeof kOutOfMemory);
    return FAIRGATE_RESOURCE_EXHAUSTED;
  }
  call->holders = 2;
  /* Registered and stopped here, in C, outside any Go call: either may suspend the job's fiber
   * (the context's mutex). */
  fairgate_cancel_callback* callback =
      fairgate_context_on_cancel(ctx, fairgate_go_call_cancelled, call);
  call->start.kind = kind;
  call->start.user = user;
  call->start.ctx = (fairgate_context*)ctx;
  call->start.job = (void*)job;
  call->start.call = call;
  fairgate_go_handoff_put(&call->start);
  fairgate_context_wait(fairgate_cancel_context(call->finished), -1);
  fairgate_cancel_callback_stop(callback);
  fairgate_code code = call->code;
  if (code == FAIRGATE_OK) {
    free(call->message);
  } else {
    *error = call->message;
  }
  fairgate_go_call_release(call);
  return code;
}

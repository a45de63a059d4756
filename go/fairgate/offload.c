/* offload.c: a Go function run by a goroutine while the job waits for it in C (offload.h). */
#include "offload.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct fairgate_go_call {
  fairgate_cancel* finished; /* fired by fairgate_go_call_finish */
  int32_t holders;           /* the job and the goroutine: the last to let go frees the call */
  fairgate_code code;        /* set before `finished` is fired, read after the wait */
  char* message;
};

static void fairgate_go_call_release(fairgate_go_call* call) {
  if (__atomic_sub_fetch(&call->holders, 1, __ATOMIC_ACQ_REL) == 0) {
    fairgate_cancel_free(call->finished);
    free(call);
  }
}

fairgate_go_call* fairgate_go_call_new(char** error) {
  static const char kOutOfMemory[] = "out of memory starting the Go function";
  fairgate_go_call* call = (fairgate_go_call*)calloc(1, sizeof *call);
  if (call == NULL) {
    *error = (char*)malloc(sizeof kOutOfMemory);
    if (*error != NULL) memcpy(*error, kOutOfMemory, sizeof kOutOfMemory);
    return NULL;
  }
  call->finished = fairgate_cancel_new();
  call->holders = 2;
  return call;
}

void fairgate_go_call_finish(fairgate_go_call* call, fairgate_code code, char* message) {
  call->code = code;
  call->message = message;
  /* The context's lock orders these writes before the waiter's reads. The job may return as soon
   * as this fires, but the call stays until this side lets go too. */
  fairgate_cancel_fire(call->finished);
  fairgate_go_call_release(call);
}

fairgate_code fairgate_go_call_wait(fairgate_go_call* call, char** error) {
  fairgate_code code;
  fairgate_context_wait(fairgate_cancel_context(call->finished), -1);
  code = call->code;
  if (code == FAIRGATE_OK) {
    free(call->message);
  } else {
    *error = call->message;
  }
  fairgate_go_call_release(call);
  return code;
}

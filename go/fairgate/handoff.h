/* handoff.h: how the C library's threads hand work to Go without calling into Go (handoff.c,
 * handoff.go).
 *
 * Why: a call into Go from a thread Go did not make (a cgo callback from a thread of the C
 * library's pool) binds one of the Go runtime's threads to it for the call and unbinds it after,
 * with the signal state of both (Go 1.19: needm and dropm, five system calls): about a quarter of
 * the CPU of a job of the C path, which made two such calls (its start and its end). Instead,
 * such a thread puts an item on one queue and wakes one goroutine, which waits for items in C
 * (fairgate_go_handoff_take) and handles them in Go, as many at a time as have come.
 *
 * The goroutine never blocks on anything but the queue: what it does for an item (start a
 * function's goroutine, tell a waiting call its end) does not wait, and a user's callback it
 * would run that may wait (Submit's done) runs in a goroutine of its own. */
#ifndef FAIRGATE_GO_HANDOFF_H_
#define FAIRGATE_GO_HANDOFF_H_

#include "fairgate/c.h"

typedef struct fairgate_go_call fairgate_go_call;

typedef enum {
  FAIRGATE_GO_START_SUBMITTED = 0, /* start a Submit's or RunSync's function (submit.go) */
  FAIRGATE_GO_START_DURABLE = 1,   /* start a durable handler (durable.go) */
  FAIRGATE_GO_START_PERIODIC = 2,  /* start a periodic job's function (periodic.go) */
  FAIRGATE_GO_SUBMIT_DONE = 3,     /* a Submit's or RunSync's end (submit.go) */
} fairgate_go_item_kind;

/* One thing handed to Go. A start's item is part of its run's call (offload.c) and is not freed
 * by Go; a done's item is malloc'd (fairgate_go_submit_done) and freed, with its message, by Go
 * once handled. */
typedef struct fairgate_go_item fairgate_go_item;
struct fairgate_go_item {
  fairgate_go_item* next; /* the queue's: the item put after this one */
  int kind;               /* a fairgate_go_item_kind */
  void* user;             /* the cgo.Handle the C library was given with the job */
  /* A start's: the job's context and job (valid until the call is finished) and the call. */
  fairgate_context* ctx;
  void* job;
  fairgate_go_call* call;
  /* A done's: the job's code and its message (malloc'd, NULL for none). */
  fairgate_code code;
  char* message;
};

/* Puts `item` at the end of the queue and wakes the goroutine if it waits. Never blocks for
 * longer than another put or take holds the queue; never calls into Go. */
void fairgate_go_handoff_put(fairgate_go_item* item);

/* Waits until the queue holds at least one item and takes all it holds: the first, in the order
 * they were put (each item's `next` the one after it, NULL after the last). */
fairgate_go_item* fairgate_go_handoff_take(void);

/* The C interface's done callback of this package's Submits and RunSyncs: hands the job's end to
 * Go (a copy of message). Out of memory for the item, it calls Go's handler directly instead. */
void fairgate_go_submit_done(void* user, fairgate_code code, const char* message);

#endif /* FAIRGATE_GO_HANDOFF_H_ */

package fairgate

/*
#include <stdint.h>
#include "fairgate/c.h"

extern fairgate_code fairgateGoSubmitRun(void* user, fairgate_context* ctx, char** error);
extern void fairgateGoSubmitDone(void* user, fairgate_code code, char* message);

// Submit with this package's body and callback, `user` a cgo.Handle of the submission.
static fairgate_code fairgate_go_submit(fairgate_scheduler* s, const fairgate_job* job,
                                        uintptr_t user, char** error) {
  return fairgate_submit(s, job, (fairgate_job_fn)fairgateGoSubmitRun,
                         (fairgate_done_fn)fairgateGoSubmitDone, (void*)user, error);
}
*/
import "C"

import (
	"context"
	"fmt"
	"runtime/cgo"
	"sync"
)

// jobInfo is what WorkerOf and FencingTokenOf read from the context of a job's function: its
// Permit, or what the C library said of a job it ran (ranJob).
type jobInfo interface {
	Worker() string
	FencingToken() uint64
}

// ranJob is what a job run by the C library (submitInC) read from its context.
type ranJob struct {
	worker string
	token  uint64
}

func (r ranJob) Worker() string       { return r.worker }
func (r ranJob) FencingToken() uint64 { return r.token }

// submitted is a Submit that the C library runs: its function, its callback, and what its
// function returned when it ran (so that done gets that very error, not a copy of its text).
type submitted struct {
	ctx  context.Context // the scheduler's: Close cancels it
	fn   func(ctx context.Context) error
	done func(error)

	mu  sync.Mutex // the run and the callback are on C threads Go does not see synchronise
	ran bool
	err error
}

// run calls the function, a panic turned into an error, and keeps what it returned.
func (j *submitted) run(ctx context.Context) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &Error{Code: Internal, Message: fmt.Sprintf("the job's function panicked: %v", r)}
		}
		j.mu.Lock()
		j.ran, j.err = true, err
		j.mu.Unlock()
	}()
	return j.fn(ctx)
}

// result is the error done gets for the C library's code and message: the function's own
// error when it ran and the job ended with it, else an *Error.
func (j *submitted) result(code Code, message *C.char) error {
	j.mu.Lock()
	ran, err := j.ran, j.err
	j.mu.Unlock()
	if ran && goCode(err) == code {
		return err
	}
	if code == OK {
		return nil
	}
	return errorFromC(code, message)
}

// runsInC says whether Submit hands job to the C library's Submit rather than waiting for an
// admission in Go: when its type coalesces (so that it can join a job of its id) or it asks for
// what only a Submit does (WithJoinRunning, WithRequeueOnWorkerLoss).
func (s *Scheduler) runsInC(job Job) bool {
	if job.flags&(C.FAIRGATE_JOB_JOIN_RUNNING|C.FAIRGATE_JOB_REQUEUE_ON_WORKER_LOSS) != 0 {
		return true
	}
	s.typesMu.RLock()
	defer s.typesMu.RUnlock()
	return s.coalescing[job.Type]
}

// submitInC queues the job with the C library's Submit: fn runs on the library's pool thread.
func (s *Scheduler) submitInC(job Job, fn func(ctx context.Context) error, done func(error)) error {
	h := cgo.NewHandle(&submitted{ctx: s.ctx, fn: fn, done: done})
	c, free := job.cJob()
	defer free()
	err := s.use(func(sc *C.fairgate_scheduler) error {
		var message *C.char
		return errorOf(C.fairgate_go_submit(sc, &c, C.uintptr_t(h), &message), message)
	})
	if err != nil {
		h.Delete() // no callback comes for a refused call
	}
	return err
}

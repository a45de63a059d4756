package fairgate

/*
#include <stdint.h>
#include "fairgate/c.h"
#include "offload.h"

// The C interface's job function of this package's Submits and RunSyncs: runs the Go function in
// a goroutine (startSubmitted) and waits for it (offload.h).
static fairgate_code fairgate_go_run(void* user, const fairgate_context* ctx, char** error) {
  return fairgate_go_run_job(ctx, FAIRGATE_GO_START_SUBMITTED, user, NULL, error);
}

// RunSync with nobody waiting (fairgate_run_async), with this package's body and callback, `user`
// a cgo.Handle of the call.
static fairgate_code fairgate_go_run_async(fairgate_scheduler* s, const fairgate_job* job,
                                           uintptr_t user, const fairgate_cancel* cancel,
                                           char** error) {
  return fairgate_run_async(s, job, fairgate_go_run, fairgate_go_submit_done, (void*)user, cancel,
                            error);
}

// Submit with this package's body and callback, `user` a cgo.Handle of the submission.
static fairgate_code fairgate_go_submit(fairgate_scheduler* s, const fairgate_job* job,
                                        uintptr_t user, char** error) {
  return fairgate_submit(s, job, fairgate_go_run, fairgate_go_submit_done, (void*)user, error);
}
*/
import "C"

import (
	"context"
	"runtime/cgo"
	"sync"
)

// jobInfo is what WorkerOf and FencingTokenOf read from the context of a job's function: its
// Permit, or what the C library said of a job it ran (ranJob).
type jobInfo interface {
	Worker() string
	FencingToken() uint64
}

// ranJob is what a job the C library ran (starting) read from its context.
type ranJob struct {
	worker string
	token  uint64
}

func (r ranJob) Worker() string       { return r.worker }
func (r ranJob) FencingToken() uint64 { return r.token }

// submitted is a Submit or a RunSync that the C library runs: its function, its callback, and
// what its function returned when it ran (so that done or RunSync's caller gets that very error,
// not a copy of its text).
type submitted struct {
	ctx  context.Context // the function's: the scheduler's for a Submit, the caller's for a RunSync
	fn   func(ctx context.Context) error
	done func(error)

	mu  sync.Mutex // the run and the callbacks are on C threads Go does not see synchronise
	ran bool
	err error
}

// run calls the function, a panic turned into an error, and keeps what it returned.
func (j *submitted) run(ctx context.Context) error {
	err := recovering("the job's function", func() error { return j.fn(ctx) })
	j.mu.Lock()
	j.ran, j.err = true, err
	j.mu.Unlock()
	return err
}

// hasRun says whether the function ran.
func (j *submitted) hasRun() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.ran
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
	return s.coalesces(job.Type)
}

// coalesces says whether typ was registered with a TypeConfig.Coalesce other than CoalesceOff.
func (s *Scheduler) coalesces(typ string) bool {
	s.typesMu.RLock()
	defer s.typesMu.RUnlock()
	return s.coalescing[typ]
}

// runSyncInC runs the job with the C library's RunSync with nobody waiting (fairgate_run_async),
// which may join a job of its id, and waits for its end parked, as Acquire does: fn, if it runs,
// runs in a goroutine of its own (offload.h); ctx's end fires the call's cancellation, and the
// call is then told, at once unless fn is running.
func (s *Scheduler) runSyncInC(ctx context.Context, job Job, fn func(ctx context.Context) error) error {
	if err := job.checkCost(); err != nil {
		return err
	}
	told := make(chan error, 1)
	j := &submitted{ctx: ctx, fn: fn, done: func(err error) { told <- err }}
	h := cgo.NewHandle(j) // deleted by submittedDone
	c, free := job.cJob()
	defer free()
	cancel := C.fairgate_cancel_new()
	defer C.fairgate_cancel_free(cancel)
	err := s.use(func(sc *C.fairgate_scheduler) error {
		var message *C.char
		return errorOf(C.fairgate_go_run_async(sc, &c, C.uintptr_t(h), cancel, &message), message)
	})
	if err != nil {
		h.Delete() // no callback comes for a refused call
		return err
	}
	select {
	case err = <-told:
	case <-ctx.Done():
		C.fairgate_cancel_fire(cancel)
		err = <-told
	}
	if CodeOf(err) == Canceled && ctx.Err() != nil && !j.hasRun() {
		return ctx.Err()
	}
	return err
}

// submitInC queues the job with the C library's Submit: fn runs in a goroutine while the job
// waits for it on the library's pool (offload.h).
func (s *Scheduler) submitInC(job Job, fn func(ctx context.Context) error, done func(error)) error {
	if err := job.checkCost(); err != nil {
		return err
	}
	j := &submitted{ctx: s.ctx, fn: fn}
	if done != nil {
		// Told by the goroutine that handles what the C library hands to Go (handoff.h), which
		// must not wait for a user's callback.
		j.done = func(err error) { go done(err) }
	}
	h := cgo.NewHandle(j)
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

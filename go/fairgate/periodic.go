package fairgate

/*
#include <stdint.h>
#include <stdlib.h>
#include "fairgate/c.h"

#include "offload.h"

extern void fairgateGoPeriodicDone(void* user, fairgate_code code, char* message);

// The C interface's job function of this package's periodic jobs: runs the Go function in a
// goroutine (startPeriodic) and waits for it (offload.h).
static fairgate_code fairgate_go_periodic_run(void* user, const fairgate_context* ctx,
                                              char** error) {
  return fairgate_go_run_job(ctx, FAIRGATE_GO_START_PERIODIC, user, NULL, error);
}

// SubmitEvery with this package's callbacks, `user` a cgo.Handle of the periodicJob.
static fairgate_code fairgate_go_submit_every(fairgate_scheduler* s, const fairgate_job* job,
                                              double interval,
                                              const fairgate_periodic_options* options,
                                              uintptr_t user, fairgate_periodic** periodic,
                                              char** error) {
  return fairgate_submit_every(s, job, interval, options, fairgate_go_periodic_run,
                               (fairgate_done_fn)fairgateGoPeriodicDone, (void*)user, periodic,
                               error);
}
*/
import "C"

import (
	"context"
	"runtime/cgo"
	"sync"
	"time"
)

// PeriodicOptions configure SubmitEvery (fairgate/periodic.h). Zero fields take fairgate's
// defaults.
type PeriodicOptions struct {
	// Jitter spreads the waits: each is the interval times 1 + u, u uniform in [-Jitter,
	// +Jitter]. Below 1. 0: 0.1; negative: none.
	Jitter float64
	// FirstRunAtOnce queues the first run at once instead of after a random part of an interval.
	FirstRunAtOnce bool
	// OnRun, when not nil, is called after each run with its error (nil: it succeeded), or with
	// why a run was refused at the door (a full queue, say); the next run is scheduled as usual.
	// It is called in a goroutine, one call at a time, in the order of the runs, so it may wait
	// (for another job, say) without holding a thread of the C library; the next run does not
	// wait for it. Close returns once every run has been reported, so OnRun must not call Close
	// or Drain.
	OnRun func(err error)
}

// A Periodic is a job that runs again and again (SubmitEvery) until Stop.
type Periodic struct {
	mu   sync.Mutex
	c    *C.fairgate_periodic // nil once the scheduler is closed
	runs uint64               // the count when c was freed
}

// periodicJob is what the C callbacks' `user` leads to.
type periodicJob struct {
	fn    func(ctx context.Context) error
	onRun func(error)
	ctx   context.Context // the scheduler's (Close cancels it), each run's context's parent
	// reporting counts the goroutines calling OnRun, for Close to wait for (the scheduler's).
	reporting *sync.WaitGroup
	// The runs' errors not yet passed to onRun, oldest first, and whether a goroutine is passing
	// them on (report): at most one at a time, so that the calls come in order.
	mu       sync.Mutex
	unread   []error
	reporter bool
}

// ended passes the error of a run that has just ended on to onRun: in a goroutine, so that the C
// library's thread that reports it is not held by onRun, after the runs reported before it.
func (j *periodicJob) ended(err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.unread = append(j.unread, err)
	if !j.reporter {
		j.reporter = true
		j.reporting.Add(1)
		go j.report()
	}
}

// report calls onRun with each error ended queues, in order, until none is left.
func (j *periodicJob) report() {
	defer j.reporting.Done()
	for {
		j.mu.Lock()
		if len(j.unread) == 0 {
			j.reporter = false
			j.mu.Unlock()
			return
		}
		err := j.unread[0]
		j.unread[0] = nil
		j.unread = j.unread[1:]
		j.mu.Unlock()
		j.onRun(err)
	}
}

// SubmitEvery runs fn as the background job again and again, each run interval after the
// previous one ended, never two at once, in the job's fair place each time. fn runs in a
// goroutine while the run's job waits for it on the C library's pool without holding a thread of
// it, with the run's context (WorkerOf, FencingTokenOf), which Close and the removal of the
// run's worker cancel; a panic or runtime.Goexit in it fails that run with code
// Internal. A periodic job takes no cost hint (Job.WithCost is refused with InvalidArgument).
// The schedule stops at Stop or Close.
func (s *Scheduler) SubmitEvery(job Job, interval time.Duration, fn func(ctx context.Context) error,
	options PeriodicOptions) (*Periodic, error) {
	if fn == nil {
		return nil, &Error{Code: InvalidArgument, Message: "the job's function is nil"}
	}
	var c C.fairgate_periodic_options
	C.fairgate_periodic_options_init_version(&c, C.FAIRGATE_PERIODIC_OPTIONS_VERSION)
	if options.Jitter < 0 {
		c.jitter = 0
	} else if options.Jitter != 0 {
		c.jitter = C.double(options.Jitter)
	}
	if options.FirstRunAtOnce {
		c.first_run_at_once = 1
	}
	h := cgo.NewHandle(&periodicJob{fn: fn, onRun: options.OnRun, ctx: s.ctx,
		reporting: &s.reporting})
	cjob, free := job.cJob()
	defer free()
	p := &Periodic{}
	err := s.use(func(sc *C.fairgate_scheduler) error {
		var message *C.char
		return errorOf(C.fairgate_go_submit_every(sc, &cjob, C.double(interval.Seconds()), &c,
			C.uintptr_t(h), &p.c, &message), message)
	})
	if err != nil {
		h.Delete() // no callback comes for a refused call
		return nil, err
	}
	s.handlesMu.Lock()
	s.handles = append(s.handles, h)
	s.periodics = append(s.periodics, p)
	s.handlesMu.Unlock()
	return p, nil
}

// Stop queues no further run; a run under way still ends (and is reported to OnRun). Calling it
// again does nothing.
func (p *Periodic) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	C.fairgate_periodic_stop(p.c)
}

// Runs returns how many runs have ended so far (each is passed to OnRun, perhaps a moment later).
func (p *Periodic) Runs() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.c == nil {
		return p.runs
	}
	return uint64(C.fairgate_periodic_runs(p.c))
}

// free lets the C handle go once the scheduler is closed, keeping its count of runs.
func (p *Periodic) free() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.runs = uint64(C.fairgate_periodic_runs(p.c))
	C.fairgate_periodic_free(p.c)
	p.c = nil
}

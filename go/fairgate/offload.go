package fairgate

// #include "offload.h"
import "C"

import (
	"context"
	"fmt"
	"sync"
)

// running holds, by its call, the CancelFunc of the context of each Go function under way that
// a job of the C library runs (starting), for fairgateGoRunCancelled.
var running = struct {
	sync.Mutex
	cancels map[*C.fairgate_go_call]context.CancelFunc
}{cancels: map[*C.fairgate_go_call]context.CancelFunc{}}

// starting runs fn, the Go function of a job the C library runs, in a goroutine of its own, and
// passes its error to call, on which the job waits as a fiber (offload.h): so a Go function never
// runs on, nor holds, a thread of the C library's pool. fn's context is base, carrying what the
// job's context jobCtx says of its worker and lease (WorkerOf, FencingTokenOf), and cancelled
// when jobCtx is (its worker removed, the scheduler closed, a RunSync's context ended) or fn has
// returned. `what` names the function in the error of a run that panicked or ended with
// runtime.Goexit (ending). Called by the job's start function: it starts the goroutine and
// returns.
func starting(jobCtx *C.fairgate_context, call *C.fairgate_go_call, base context.Context,
	what string, fn func(ctx context.Context) error) {
	worker := C.fairgate_context_worker(jobCtx)
	info := ranJob{worker: C.GoString(worker),
		token: uint64(C.fairgate_context_fencing_token(jobCtx))}
	C.fairgate_free(worker)
	ctx, cancel := context.WithCancel(context.WithValue(base, jobKey{}, info))
	running.Lock()
	running.cancels[call] = cancel
	running.Unlock()
	if C.fairgate_go_call_started(call) == 0 {
		cancel() // the job's context was cancelled before this one was made
	}
	go ending(what, func() error { return fn(ctx) }, func(err error) {
		running.Lock()
		delete(running.cancels, call)
		running.Unlock()
		cancel()
		var message *C.char
		code := C.fairgate_code(C.FAIRGATE_OK)
		if err != nil {
			code = codeFor(err, &message)
		}
		C.fairgate_go_call_finish(call, code, message)
	})
}

// fairgateGoRunCancelled is called (by the cancel callback fairgate_go_run_job registers on a
// job's context, offload.c) when the context of a job whose Go function was started has been
// cancelled: it cancels the function's context if the function is still under way. It runs on
// the thread that cancelled the job's context, never blocks and calls no fairgate function.
//
//export fairgateGoRunCancelled
func fairgateGoRunCancelled(call *C.fairgate_go_call) {
	running.Lock()
	cancel := running.cancels[call]
	running.Unlock()
	if cancel != nil {
		cancel()
	}
}

// ending calls fn, then report with its error; if fn panics, or ends its goroutine with
// runtime.Goexit instead of returning, with an error of code Internal that names `what` and says
// which (after a Goexit the goroutine still ends): a job's end is reported however its function
// ended.
func ending(what string, fn func() error, report func(error)) {
	returned := false
	var err error
	defer func() {
		if r := recover(); r != nil {
			err = &Error{Code: Internal, Message: fmt.Sprintf("%s panicked: %v", what, r)}
		} else if !returned {
			err = &Error{Code: Internal, Message: fmt.Sprintf("%s called runtime.Goexit", what)}
		}
		report(err)
	}()
	err = fn()
	returned = true
}

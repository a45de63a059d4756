package fairgate

/*
#include "fairgate/c.h"
#include "offload.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"runtime/cgo"
	"sync/atomic"
	"time"
	"unsafe"
)

// An admission as the C callback reports it: a permit, or why there is none.
type admission struct {
	permit *C.fairgate_permit
	err    *Error
}

// fairgateGoPermit is the C interface's permit callback for every Acquire of this package: `user`
// is the cgo.Handle of the waiting call's channel, which has room for this one report. It runs on
// whichever thread decided (the C interface's header comment), never blocks, and calls no
// fairgate function.
//
//export fairgateGoPermit
func fairgateGoPermit(user unsafe.Pointer, permit *C.fairgate_permit, code C.fairgate_code,
	message *C.char) {
	h := cgo.Handle(uintptr(user))
	ch := h.Value().(chan admission)
	h.Delete()
	a := admission{permit: permit}
	if permit == nil {
		a.err = errorFromC(Code(code), message)
	}
	ch <- a
}

// fairgateGoDurableStart starts the Go handler of a durable job, for the C interface's durable
// handler of every type this package registers (fairgate_go_durable, durable.go): `user` is the
// cgo.Handle of the type's durableType, kept until the scheduler is closed. The handler runs in a
// goroutine with its own copy of the job (finishing), its error the attempt's status.
//
//export fairgateGoDurableStart
func fairgateGoDurableStart(user unsafe.Pointer, job *C.fairgate_durable_job,
	call *C.fairgate_go_call) {
	d := cgo.Handle(uintptr(user)).Value().(*durableType)
	copied := DurableJob{
		Sequence:   uint64(job.sequence),
		Type:       C.GoString(job._type),
		ID:         C.GoString(job.id),
		Key:        C.GoString(job.fairness_key),
		Payload:    C.GoBytes(job.payload, C.int(job.payload_size)),
		Attempt:    int(job.attempt),
		LeaseToken: uint64(job.lease_token),
	}
	finishing(call, "the durable handler", func() error { return d.run(copied) })
}

// fairgateGoPeriodicStart starts the Go function of a run of a periodic job, for the C
// interface's job function of every periodic job of this package (fairgate_go_periodic_run,
// periodic.go): `user` is the cgo.Handle of its periodicJob, kept until the scheduler is closed.
// The function runs in a goroutine (finishing); its error becomes the run's status.
//
//export fairgateGoPeriodicStart
func fairgateGoPeriodicStart(user unsafe.Pointer, call *C.fairgate_go_call) {
	j := cgo.Handle(uintptr(user)).Value().(*periodicJob)
	finishing(call, "the periodic job", j.run)
}

// fairgateGoPeriodicDone is the C interface's report of each run of a periodic job of this
// package, passed on to its OnRun.
//
//export fairgateGoPeriodicDone
func fairgateGoPeriodicDone(user unsafe.Pointer, code C.fairgate_code, message *C.char) {
	j := cgo.Handle(uintptr(user)).Value().(*periodicJob)
	if j.onRun == nil {
		return
	}
	var err error
	if code != C.FAIRGATE_OK {
		err = errorFromC(Code(code), message)
	}
	j.onRun(err)
}

// recovering calls fn, a panic in it turned into an error with code Internal that names `what`
// and the panic's value: a user's function run for the C library must neither end the process
// (as a panic in a goroutine does) nor unwind into C.
func recovering(what string, fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &Error{Code: Internal, Message: fmt.Sprintf("%s panicked: %v", what, r)}
		}
	}()
	return fn()
}

// codeFor is the C code of a Go function's error, its text into *message (a C string the C
// interface frees): an *Error's own code, Canceled for one that is or wraps context.Canceled
// (ctx.Err() once Close cancelled it: cut short), else Unknown.
func codeFor(err error, message **C.char) C.fairgate_code {
	*message = C.CString(err.Error())
	return C.fairgate_code(goCode(err))
}

// goCode is the code of a Go function's error as codeFor reports it.
func goCode(err error) Code {
	if code := CodeOf(err); code != Unknown {
		return code
	}
	if errors.Is(err, context.Canceled) {
		return Canceled
	}
	return Unknown
}

// fairgateGoEvent is the C interface's event callback of a scheduler with Options.OnEvent:
// `user` is the cgo.Handle of its hooks, kept until it is closed. It runs on the C library's
// delivery thread, one event at a time.
//
//export fairgateGoEvent
func fairgateGoEvent(user unsafe.Pointer, event *C.fairgate_event) {
	h := cgo.Handle(uintptr(user)).Value().(*hooks)
	e := Event{
		Kind:            EventKind(event.kind),
		Time:            float64(event.time),
		Type:            C.GoString(event._type),
		ID:              C.GoString(event.id),
		Key:             C.GoString(event.fairness_key),
		Tier:            int(event.tier),
		EffectiveTier:   int(event.effective_tier),
		Charge:          float64(event.charge),
		AccumulatedCost: float64(event.accumulated_cost),
		Wait:            seconds(float64(event.wait)),
		RunTime:         seconds(float64(event.run_time)),
		Worker:          C.GoString(event.worker),
	}
	if event.code != C.FAIRGATE_OK {
		e.Err = errorFromC(Code(event.code), event.message)
	}
	h.onEvent(e)
}

// fairgateGoEvidence is the C interface's evidence callback of a scheduler with
// Options.OnEvidence, on the delivery thread.
//
//export fairgateGoEvidence
func fairgateGoEvidence(user unsafe.Pointer, line *C.char) {
	cgo.Handle(uintptr(user)).Value().(*hooks).onEvidence(C.GoString(line))
}

// fairgateGoWarn is the C interface's warning callback of a scheduler with Options.Warn.
//
//export fairgateGoWarn
func fairgateGoWarn(user unsafe.Pointer, warning *C.char) {
	cgo.Handle(uintptr(user)).Value().(*hooks).warn(C.GoString(warning))
}

// fairgateGoKeyGroup is the C interface's rule of keys' groups of a scheduler with
// Options.KeyGroup: the group as a C string the C interface frees, NULL for none.
//
//export fairgateGoKeyGroup
func fairgateGoKeyGroup(user unsafe.Pointer, key *C.char) *C.char {
	group := cgo.Handle(uintptr(user)).Value().(*hooks).keyGroup(C.GoString(key))
	if group == "" {
		return nil
	}
	return C.CString(group)
}

// seconds as a Duration.
func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// fairgateGoReading is the C interface's reading function of AdaptiveCapacity.StalledSeconds and
// PressureSignal.Read: `user` is the cgo.Handle of the Go function, kept until the scheduler is
// closed. On the C library's timer thread.
//
//export fairgateGoReading
func fairgateGoReading(user unsafe.Pointer, value *C.double) C.fairgate_code {
	v, err := cgo.Handle(uintptr(user)).Value().(reading)()
	if err != nil {
		return C.FAIRGATE_UNAVAILABLE
	}
	*value = C.double(v)
	return C.FAIRGATE_OK
}

// fairgateGoSubmitStart starts the Go function of a Submit or RunSync this package hands to the
// C library (submitInC, runSyncInC), for the C job function fairgate_go_run (submit.go): `user`
// is the cgo.Handle of the call (deleted by fairgateGoSubmitDone, or by runSyncInC). The function
// runs in a goroutine (finishing) with the call's context (submitted.ctx) carrying what the job's
// context says of its worker and lease, and cancelled when the job's context is (its worker
// removed, the scheduler closed, a RunSync's ctx ended): `state` is the run's
// (fairgate_go_run_state), 2 if that came before.
//
//export fairgateGoSubmitStart
func fairgateGoSubmitStart(user unsafe.Pointer, ctx *C.fairgate_context, state *C.int32_t,
	call *C.fairgate_go_call) {
	j := cgo.Handle(uintptr(user)).Value().(*submitted)
	worker := C.fairgate_context_worker(ctx)
	info := ranJob{worker: C.GoString(worker), token: uint64(C.fairgate_context_fencing_token(ctx))}
	C.fairgate_free(worker)
	runCtx, cancel := context.WithCancel(context.WithValue(j.ctx, jobKey{}, info))
	j.mu.Lock()
	j.cancel = cancel
	j.mu.Unlock()
	if !atomic.CompareAndSwapInt32((*int32)(unsafe.Pointer(state)), 0, 1) {
		cancel() // the job's context was cancelled before this run's was made
	}
	finishing(call, "the job's function", func() error {
		defer func() {
			j.mu.Lock()
			j.cancel = nil
			j.mu.Unlock()
			cancel()
		}()
		return j.run(runCtx)
	})
}

// fairgateGoContextCancelled is called (by fairgate_go_run's cancel callback, submit.go) when the
// context of a job whose Go function runs was cancelled: `user` is the cgo.Handle of the call,
// whose function's context it cancels. It runs on the thread that cancelled the job's context,
// never blocks and calls no fairgate function.
//
//export fairgateGoContextCancelled
func fairgateGoContextCancelled(user unsafe.Pointer) {
	j := cgo.Handle(uintptr(user)).Value().(*submitted)
	j.mu.Lock()
	cancel := j.cancel
	j.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// fairgateGoCancel is the cancel callback runPermitted and Permit.Lost register on a permit's
// job context: `user` is the cgo.Handle of the context.CancelFunc it calls. It runs on the thread
// that cancelled the job's context, never blocks and calls no fairgate function.
//
//export fairgateGoCancel
func fairgateGoCancel(user unsafe.Pointer) {
	cgo.Handle(uintptr(user)).Value().(context.CancelFunc)()
}

// fairgateGoSubmitDone is the C interface's done callback of such a Submit, called exactly once:
// it passes the job's end on to done and deletes the submission's handle.
//
//export fairgateGoSubmitDone
func fairgateGoSubmitDone(user unsafe.Pointer, code C.fairgate_code, message *C.char) {
	h := cgo.Handle(uintptr(user))
	j := h.Value().(*submitted)
	h.Delete()
	if j.done != nil {
		j.done(j.result(Code(code), message))
	}
}

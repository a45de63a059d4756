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

// startDurable starts the Go handler of a durable job, handed over by the C interface's durable
// handler of every type this package registers (fairgate_go_durable, durable.go; handoff.go):
// `user` is the cgo.Handle of the type's durableType, kept until the scheduler is closed, and job
// the fairgate_durable_job. The handler runs in a goroutine (starting) with its own copy of the
// job and the attempt's context; its error is the attempt's status.
func startDurable(user unsafe.Pointer, ctx *C.fairgate_context, job unsafe.Pointer,
	call *C.fairgate_go_call) {
	d := cgo.Handle(uintptr(user)).Value().(*durableType)
	c := (*C.fairgate_durable_job)(job)
	copied := DurableJob{
		Sequence:   uint64(c.sequence),
		Type:       C.GoString(c._type),
		ID:         C.GoString(c.id),
		Key:        C.GoString(c.fairness_key),
		Payload:    C.GoBytes(c.payload, C.int(c.payload_size)),
		Attempt:    int(c.attempt),
		LeaseToken: uint64(c.lease_token),
	}
	starting(ctx, call, d.ctx, "the durable handler", func(ctx context.Context) error {
		return d.handler(ctx, copied)
	})
}

// startPeriodic starts the Go function of a run of a periodic job, handed over by the C
// interface's job function of every periodic job of this package (fairgate_go_periodic_run,
// periodic.go; handoff.go): `user` is the cgo.Handle of its periodicJob, kept until the scheduler
// is closed. The function runs in a goroutine (starting) with the run's context; its error
// becomes the run's status.
func startPeriodic(user unsafe.Pointer, ctx *C.fairgate_context, call *C.fairgate_go_call) {
	j := cgo.Handle(uintptr(user)).Value().(*periodicJob)
	starting(ctx, call, j.ctx, "the periodic job", j.fn)
}

// fairgateGoPeriodicDone is the C interface's report of each run of a periodic job of this
// package, passed on to its OnRun in a goroutine (periodicJob.ended). Called on the C library's
// thread that ended the run, one run at a time: a direct call, not a hand-off (handoff.h), so
// that every report is queued in Go once the C scheduler is shut down, for Close to wait for.
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
	j.ended(err)
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

// startSubmitted starts the Go function of a Submit or RunSync this package hands to the C
// library (submitInC, runSyncInC), handed over by the C job function fairgate_go_run (submit.go;
// handoff.go): `user` is the cgo.Handle of the call (deleted by submittedDone, or by runSyncInC).
// The function runs in a goroutine (starting) with the job's context made from the call's
// (submitted.ctx).
func startSubmitted(user unsafe.Pointer, ctx *C.fairgate_context, call *C.fairgate_go_call) {
	j := cgo.Handle(uintptr(user)).Value().(*submitted)
	starting(ctx, call, j.ctx, "the job's function", j.run)
}

// fairgateGoCancel is the cancel callback runPermitted and Permit.Lost register on a permit's
// job context: `user` is the cgo.Handle of the context.CancelFunc it calls. It runs on the thread
// that cancelled the job's context, never blocks and calls no fairgate function.
//
//export fairgateGoCancel
func fairgateGoCancel(user unsafe.Pointer) {
	cgo.Handle(uintptr(user)).Value().(context.CancelFunc)()
}

// submittedDone passes the end of a Submit or RunSync this package hands to the C library on to
// its done, and deletes the call's handle: called exactly once a call, with what the C
// interface's done callback reported (fairgate_go_submit_done, handoff.go).
func submittedDone(user unsafe.Pointer, code C.fairgate_code, message *C.char) {
	h := cgo.Handle(uintptr(user))
	j := h.Value().(*submitted)
	h.Delete()
	if j.done != nil {
		j.done(j.result(Code(code), message))
	}
}

// fairgateGoSubmitDone is submittedDone called from C, by fairgate_go_submit_done when it could
// not make the item that hands the end to Go (out of memory): on the C library's thread.
//
//export fairgateGoSubmitDone
func fairgateGoSubmitDone(user unsafe.Pointer, code C.fairgate_code, message *C.char) {
	submittedDone(user, code, message)
}

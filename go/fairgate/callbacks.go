package fairgate

// #include "fairgate/c.h"
import "C"

import (
	"runtime/cgo"
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

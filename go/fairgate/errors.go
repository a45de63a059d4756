package fairgate

// #include "fairgate/c.h"
import "C"

import (
	"errors"
	"fmt"
	"time"
)

// A Code says what kind of error a call returned: the codes of fairgate's C++ Status (absl's).
type Code int

// The codes fairgate returns.
const (
	OK                 Code = 0
	Canceled           Code = 1
	Unknown            Code = 2
	InvalidArgument    Code = 3
	DeadlineExceeded   Code = 4
	NotFound           Code = 5
	AlreadyExists      Code = 6
	PermissionDenied   Code = 7
	ResourceExhausted  Code = 8
	FailedPrecondition Code = 9
	Aborted            Code = 10
	OutOfRange         Code = 11
	Unimplemented      Code = 12
	Internal           Code = 13
	Unavailable        Code = 14
	DataLoss           Code = 15
	Unauthenticated    Code = 16
)

var codeNames = [...]string{"OK", "Canceled", "Unknown", "InvalidArgument", "DeadlineExceeded",
	"NotFound", "AlreadyExists", "PermissionDenied", "ResourceExhausted", "FailedPrecondition",
	"Aborted", "OutOfRange", "Unimplemented", "Internal", "Unavailable", "DataLoss",
	"Unauthenticated"}

func (c Code) String() string {
	if c >= 0 && int(c) < len(codeNames) {
		return codeNames[c]
	}
	return fmt.Sprintf("Code(%d)", int(c))
}

// An Error is a call's failure as fairgate reported it: its code and a message naming what was
// wrong. A call refused for want of a rate limit's token or by shedding, and a job shed from the
// queue, also say when to try again.
type Error struct {
	Code    Code
	Message string
	// RetryAfter is how long after the refusal the call may succeed; 0 when the error says
	// nothing of it.
	RetryAfter time.Duration
	// Shed is whether shedding refused the call or took the job from the queue (its type's queue
	// stood over its target and the job's key had consumed the most).
	Shed bool
}

func (e *Error) Error() string { return fmt.Sprintf("fairgate: %v: %s", e.Code, e.Message) }

// CodeOf returns the Code of err: OK for nil, the code of an *Error in err's chain, else Unknown.
func CodeOf(err error) Code {
	if err == nil {
		return OK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Unknown
}

// RetryAfter returns how long to wait before trying again when err is, or wraps, a refusal that
// says so (for want of a rate limit's token, or by shedding), and whether it does.
func RetryAfter(err error) (time.Duration, bool) {
	var e *Error
	if errors.As(err, &e) && e.RetryAfter > 0 {
		return e.RetryAfter, true
	}
	return 0, false
}

// WasShed reports whether err is, or wraps, a refusal by shedding.
func WasShed(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Shed
}

// errorOf turns a C call's code and message into an error (nil for OK), freeing the message.
func errorOf(code C.fairgate_code, message *C.char) error {
	defer C.fairgate_free(message)
	if code == C.FAIRGATE_OK {
		return nil
	}
	return errorFromC(Code(code), message)
}

// errorFromC makes the Error of a C code and message (which it leaves to the caller), with what
// the message's tail says of a retry (fairgate_retry_after, fairgate_was_shed).
func errorFromC(code Code, message *C.char) *Error {
	e := &Error{Code: code, Message: C.GoString(message)}
	var seconds C.double
	if C.fairgate_retry_after(message, &seconds) == 1 {
		e.RetryAfter = time.Duration(float64(seconds) * float64(time.Second))
		e.Shed = C.fairgate_was_shed(message) == 1
	}
	return e
}

package fairgate

// #include "fairgate/c.h"
import "C"

import (
	"errors"
	"fmt"
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
// wrong.
type Error struct {
	Code    Code
	Message string
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

// errorOf turns a C call's code and message into an error (nil for OK), freeing the message.
func errorOf(code C.fairgate_code, message *C.char) error {
	defer C.fairgate_free(message)
	if code == C.FAIRGATE_OK {
		return nil
	}
	return &Error{Code: Code(code), Message: C.GoString(message)}
}

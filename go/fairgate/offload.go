package fairgate

// #include "offload.h"
import "C"

import "fmt"

// finishing runs fn, the Go function of a job the C library runs, in a goroutine of its own, and
// passes its error to call, on which the job waits as a fiber (offload.h): so a Go function never
// runs on, nor holds, a thread of the C library's pool. `what` names the function in the error
// of a run that panicked or ended with runtime.Goexit (ending). Called inside the job's callback:
// it starts the goroutine and returns.
func finishing(call *C.fairgate_go_call, what string, fn func() error) {
	go ending(what, fn, func(err error) {
		var message *C.char
		code := C.fairgate_code(C.FAIRGATE_OK)
		if err != nil {
			code = codeFor(err, &message)
		}
		C.fairgate_go_call_finish(call, code, message)
	})
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

package fairgate

// #include "offload.h"
import "C"

import "fmt"

// finishing runs fn, the Go function of a job the C library runs, in a goroutine of its own, and
// passes its error to call, on which the job waits as a fiber (offload.h): so a Go function never
// runs on, nor holds, a thread of the C library's pool. `what` names the function in the error
// of a run that ended with runtime.Goexit instead of returning (a panic is fn's to recover).
// Called inside the job's callback: it starts the goroutine and returns.
func finishing(call *C.fairgate_go_call, what string, fn func() error) {
	go func() {
		returned := false
		var err error
		defer func() {
			if !returned {
				err = &Error{Code: Internal, Message: fmt.Sprintf("%s called runtime.Goexit", what)}
			}
			var message *C.char
			code := C.fairgate_code(C.FAIRGATE_OK)
			if err != nil {
				code = codeFor(err, &message)
			}
			C.fairgate_go_call_finish(call, code, message)
		}()
		err = fn()
		returned = true
	}()
}

package fairgate

/*
#include <stdlib.h>
#include "handoff.h"
*/
import "C"

import (
	"sync"
	"unsafe"
)

// handoffStarted makes startHandoff start the goroutine once a process.
var handoffStarted sync.Once

// startHandoff starts, once, the goroutine that handles what the C library's threads hand to Go
// (handoff.h): New calls it before a scheduler can run a job.
func startHandoff() {
	handoffStarted.Do(func() { go handOff() })
}

// handOff handles the items the C library's threads put on the queue, in the order they were put,
// as many at a time as have come, and waits in C for more: it runs as long as the process does.
// Nothing it calls waits (handoff.h).
func handOff() {
	for {
		item := C.fairgate_go_handoff_take()
		for item != nil {
			next := item.next // a start's item is its call's, which may be freed once handled
			switch item.kind {
			case C.FAIRGATE_GO_START_SUBMITTED:
				startSubmitted(item.user, item.ctx, item.call)
			case C.FAIRGATE_GO_START_DURABLE:
				startDurable(item.user, item.ctx, item.job, item.call)
			case C.FAIRGATE_GO_START_PERIODIC:
				startPeriodic(item.user, item.ctx, item.call)
			case C.FAIRGATE_GO_SUBMIT_DONE:
				submittedDone(item.user, item.code, item.message)
				C.free(unsafe.Pointer(item.message))
				C.free(unsafe.Pointer(item))
			}
			item = next
		}
	}
}

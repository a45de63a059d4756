package fairgate

/*
#include <stdint.h>
#include <stdlib.h>
#include "fairgate/c.h"

#include "offload.h"

// The C interface's durable handler of this package's types: runs the Go handler in a goroutine
// (startDurable) and waits for it (offload.h).
static fairgate_code fairgate_go_durable(void* user, const fairgate_durable_job* job,
                                         const fairgate_context* ctx, char** error) {
  return fairgate_go_run_job(ctx, FAIRGATE_GO_START_DURABLE, user, job, error);
}

// RegisterDurable with this package's handler, `user` a cgo.Handle of the Go handler.
static fairgate_code fairgate_go_register_durable(fairgate_scheduler* s, const char* type,
                                                  uintptr_t user,
                                                  const fairgate_retry_policy* retry,
                                                  char** error) {
  return fairgate_register_durable(s, type, fairgate_go_durable, (void*)user, retry, error);
}
*/
import "C"

import (
	"context"
	"fmt"
	"runtime/cgo"
	"time"
	"unsafe"
)

// A DurableJob is what a durable handler is given: a job stored before SubmitDurable returned,
// run at least once (fairgate/durable.h), so a handler should be idempotent.
type DurableJob struct {
	Sequence      uint64 // the store's number for the job
	Type, ID, Key string
	Payload       []byte // the handler's own copy
	Attempt       int    // 1 for the first; counts every attempt begun, those cut short too
	// LeaseToken is, with a shared store, the fencing token of this replica's lease on the job,
	// greater than any earlier claim's: storage written by the handler should refuse a lower
	// token than one it has seen. 0 with a store that is not shared.
	LeaseToken uint64
}

// A DurableHandler runs one attempt of a durable job: nil removes the job, an error retries it
// (by the type's RetryPolicy) until it is dead. ctx is the attempt's: WorkerOf and FencingTokenOf
// read its worker and fleet-wide fencing token from it, and it ends when the scheduler closes or
// when the worker the attempt was admitted onto is removed. After Close, an error with code
// Canceled, or one that is or wraps context.Canceled (ctx.Err()), leaves the job stored as it
// was, to run again after the next Recover; an attempt whose worker was removed fails with code
// Unavailable (the worker's loss), retried as any other.
type DurableHandler func(ctx context.Context, job DurableJob) error

// RetryPolicy says how a failed durable job is retried: attempt n+1 waits
// min(InitialBackoff * Multiplier^(n-1), MaxBackoff) after attempt n failed. Zero fields take
// fairgate's defaults.
type RetryPolicy struct {
	MaxAttempts    int           // attempts begun at most, whatever ended them; 0: 5
	InitialBackoff time.Duration // 0: 1 s; negative: none, a failed job is queued again at once
	MaxBackoff     time.Duration // 0: 300 s
	Multiplier     float64       // 0: 2
}

// RegisterDurable registers the handler of the registered type typ's durable jobs, and how their
// failures are retried. The handler runs in a goroutine while the attempt's job waits for it on
// the C library's pool without holding a thread of it; a panic in it fails the attempt with code
// Internal, the panic's value in the error kept with the job (a runtime.Goexit too).
func (s *Scheduler) RegisterDurable(typ string, handler DurableHandler, retry RetryPolicy) error {
	if handler == nil {
		return &Error{Code: InvalidArgument, Message: "the handler is nil"}
	}
	var c C.fairgate_retry_policy
	C.fairgate_retry_policy_init_version(&c, C.FAIRGATE_RETRY_POLICY_VERSION)
	if retry.MaxAttempts < 0 || int64(retry.MaxAttempts) > 1<<32-1 {
		return &Error{Code: InvalidArgument, Message: fmt.Sprintf(
			"RetryPolicy.MaxAttempts must be 1 to 4294967295 (0: 5), got %d", retry.MaxAttempts)}
	}
	if retry.MaxAttempts != 0 {
		c.max_attempts = C.uint32_t(retry.MaxAttempts)
	}
	if retry.InitialBackoff < 0 {
		c.initial_backoff_seconds = 0
	} else if retry.InitialBackoff != 0 {
		c.initial_backoff_seconds = C.double(retry.InitialBackoff.Seconds())
	}
	if retry.MaxBackoff != 0 {
		c.max_backoff_seconds = C.double(retry.MaxBackoff.Seconds())
	}
	if retry.Multiplier != 0 {
		c.multiplier = C.double(retry.Multiplier)
	}
	d := &durableType{handler: handler, ctx: s.ctx}
	h := cgo.NewHandle(d)
	ctype := C.CString(typ)
	defer C.free(unsafe.Pointer(ctype))
	err := s.use(func(sc *C.fairgate_scheduler) error {
		var message *C.char
		return errorOf(C.fairgate_go_register_durable(sc, ctype, C.uintptr_t(h), &c, &message),
			message)
	})
	if err != nil {
		h.Delete()
		return err
	}
	s.handlesMu.Lock()
	s.handles = append(s.handles, h)
	s.handlesMu.Unlock()
	return nil
}

// durableType is what the C handler's `user` leads to.
type durableType struct {
	handler DurableHandler
	ctx     context.Context // the scheduler's (Close cancels it), each attempt's context's parent
}

// A RecoveryReport says what Recover found.
type RecoveryReport struct {
	Queued         int // queued now, in stored order
	Deferred       int // waiting out a retry's backoff, queued when it ends
	WithoutHandler int // of types without a handler here: left stored, not run
	Dead           int // dead jobs in the store
}

// Recover queues every stored job that is neither done nor dead, in stored order. Call it once,
// after the types and their durable handlers are registered; SubmitDurable is refused before.
func (s *Scheduler) Recover() (RecoveryReport, error) {
	var report C.fairgate_recovery_report
	err := s.use(func(sc *C.fairgate_scheduler) error {
		var message *C.char
		return errorOf(C.fairgate_recover(sc, &report, &message), message)
	})
	if err != nil {
		return RecoveryReport{}, err
	}
	return RecoveryReport{Queued: int(report.queued), Deferred: int(report.deferred),
		WithoutHandler: int(report.without_handler), Dead: int(report.dead)}, nil
}

// SubmitDurable stores the job with its payload, queues it, and returns its number in the store
// once it is stored (committed: it survives a crash from then on). A durable job takes no cost
// hint (Job.WithCost is refused with InvalidArgument): its cost is learned. With a shared store
// the number is 0 in one case: the connection to the database broke as the job was stored with
// others, and a replica had run and removed it by the time the store learned it was stored.
func (s *Scheduler) SubmitDurable(job Job, payload []byte) (uint64, error) {
	c, free := job.cJob()
	defer free()
	var sequence C.uint64_t
	err := s.use(func(sc *C.fairgate_scheduler) error {
		var message *C.char
		return errorOf(C.fairgate_submit_durable(sc, &c, cBytes(payload), C.size_t(len(payload)),
			&sequence, &message), message)
	})
	if err != nil {
		return 0, err
	}
	return uint64(sequence), nil
}

// A DurableSubmission is one job of SubmitDurableBatch.
type DurableSubmission struct {
	Job     Job
	Payload []byte
}

// SubmitDurableBatch stores the jobs in one commit, all or none, queues them in the order given,
// and returns their numbers in that order (0 as SubmitDurable's may be).
func (s *Scheduler) SubmitDurableBatch(jobs []DurableSubmission) ([]uint64, error) {
	// In C memory: a Go pointer may not be kept in memory passed to C, and each job holds two.
	size := C.size_t(unsafe.Sizeof(C.fairgate_durable_submission{}))
	array := (*C.fairgate_durable_submission)(C.calloc(C.size_t(len(jobs)+1), size))
	defer C.free(unsafe.Pointer(array))
	batch := unsafe.Slice(array, len(jobs))
	for i, j := range jobs {
		c, free := j.Job.cJob()
		defer free()
		batch[i].job = c
		if len(j.Payload) > 0 {
			batch[i].payload = C.CBytes(j.Payload)
			defer C.free(batch[i].payload)
		}
		batch[i].payload_size = C.size_t(len(j.Payload))
	}
	sequences := make([]C.uint64_t, len(jobs)+1) // never empty: its first element is passed
	err := s.use(func(sc *C.fairgate_scheduler) error {
		var message *C.char
		return errorOf(C.fairgate_submit_durable_batch(sc, array, C.size_t(len(jobs)),
			&sequences[0], &message), message)
	})
	if err != nil {
		return nil, err
	}
	out := make([]uint64, len(jobs))
	for i := range out {
		out[i] = uint64(sequences[i])
	}
	return out, nil
}

// A StoredJob is a durable job as the store holds it (DeadJobs).
type StoredJob struct {
	Sequence      uint64
	Type, ID, Key string
	Payload       []byte
	SubmittedAt   time.Time
	Attempts      int    // attempts begun
	LastError     string // the last failed attempt's error (its first 64 KiB)
}

// DeadJobs returns a page of the dead jobs (those that ran out of attempts): at most limit (>= 1)
// whose Sequence is above after (0 from the first), in stored order. The next page is after the
// last one's Sequence; an empty page means there are no more yet.
func (s *Scheduler) DeadJobs(after uint64, limit int) ([]StoredJob, error) {
	if limit < 0 {
		return nil, &Error{Code: InvalidArgument,
			Message: fmt.Sprintf("DeadJobs: a page's limit must be at least 1, got %d", limit)}
	}
	var jobs *C.fairgate_stored_job
	var count C.size_t
	err := s.use(func(sc *C.fairgate_scheduler) error {
		var message *C.char
		return errorOf(C.fairgate_dead_jobs(sc, C.uint64_t(after), C.size_t(limit), &jobs, &count,
			&message), message)
	})
	if err != nil {
		return nil, err
	}
	defer C.fairgate_stored_jobs_free(jobs, count)
	out := make([]StoredJob, 0, int(count))
	for _, c := range unsafe.Slice(jobs, int(count)) {
		seconds := float64(c.submitted_at)
		out = append(out, StoredJob{
			Sequence:    uint64(c.sequence),
			Type:        C.GoString(c._type),
			ID:          C.GoString(c.id),
			Key:         C.GoString(c.fairness_key),
			Payload:     C.GoBytes(unsafe.Pointer(c.payload), C.int(c.payload_size)),
			SubmittedAt: time.Unix(0, int64(seconds*1e9)),
			Attempts:    int(c.attempts),
			LastError:   C.GoString(c.last_error),
		})
	}
	return out, nil
}

// RetryDeadJob gives the dead job numbered sequence its attempts again: it is queued and runs
// from attempt 1. NotFound when no dead job has that number.
func (s *Scheduler) RetryDeadJob(sequence uint64) error {
	return s.use(func(sc *C.fairgate_scheduler) error {
		var message *C.char
		return errorOf(C.fairgate_retry_dead_job(sc, C.uint64_t(sequence), &message), message)
	})
}

// RemoveDeadJob deletes the dead job numbered sequence. NotFound when no dead job has that
// number.
func (s *Scheduler) RemoveDeadJob(sequence uint64) error {
	return s.use(func(sc *C.fairgate_scheduler) error {
		var message *C.char
		return errorOf(C.fairgate_remove_dead_job(sc, C.uint64_t(sequence), &message), message)
	})
}

// FlushState writes the learned costs to the store now, as the scheduler does every
// StateFlushInterval and when it closes.
func (s *Scheduler) FlushState() error {
	return s.use(func(sc *C.fairgate_scheduler) error {
		var message *C.char
		return errorOf(C.fairgate_flush_state(sc, &message), message)
	})
}

// cBytes is b's first byte for a call that reads it before returning (nil when empty).
func cBytes(b []byte) unsafe.Pointer {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Pointer(&b[0])
}

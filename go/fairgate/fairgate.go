// Package fairgate admits work fairly: it decides when each job may run, by tier, then by how much
// each client (fairness key) has already consumed, then by arrival, within per-tier and per-type
// caps, never running two conflicting jobs on one resource at once, and learning what each job
// costs.
//
// It calls fairgate's C library (fairgate/c.h, libfairgate_c.so.0) through cgo. No goroutine
// waits inside C: Acquire asks the library and returns to Go, and the wait is a select on the
// admission and the context, so a thousand waiting callers are a thousand parked goroutines,
// not a thousand OS threads.
//
//	s, err := fairgate.New(fairgate.Options{MaxConcurrency: 8})
//	if err != nil { ... }
//	defer s.Close()
//	err = s.RegisterType("clone", fairgate.TypeConfig{Priority: 8, MaxConcurrency: 4})
//	err = s.RunSync(ctx, fairgate.Job{Type: "clone", ID: "linux.git", Key: clientAddr},
//		func(ctx context.Context) error { return serveClone(ctx) })
//
// Durable jobs are data (a job and its payload bytes) stored before SubmitDurable returns and
// run at least once by their type's handler, after a crash too, in the same fair order. They
// need a Store: a SQLite file for one process, PostgreSQL for replicas.
//
//	store, err := fairgate.OpenSQLite("/var/lib/mirror/jobs.db", fairgate.SQLiteOptions{})
//	s, err := fairgate.New(fairgate.Options{Store: store})
//	store.Close() // s keeps it open
//	err = s.RegisterType("repack", fairgate.TypeConfig{ConflictGroup: "repository"})
//	err = s.RegisterDurable("repack", repack, fairgate.RetryPolicy{})
//	report, err := s.Recover() // queues what an earlier process left
//	sequence, err := s.SubmitDurable(fairgate.Job{Type: "repack", ID: "linux.git", Key: "cron"}, nil)
package fairgate

/*
#cgo LDFLAGS: -lfairgate_c
#include <stdint.h>
#include <stdlib.h>
#include "fairgate/c.h"

extern void fairgateGoPermit(void* user, fairgate_permit* permit, fairgate_code code,
                             char* message);
extern void fairgateGoCancel(void* user);

// Acquire with this package's callback, `user` a cgo.Handle.
static fairgate_code fairgate_go_acquire(fairgate_scheduler* s, const fairgate_job* job,
                                         uintptr_t user, fairgate_pending** pending,
                                         char** error) {
  return fairgate_acquire(s, job, (fairgate_permit_callback)fairgateGoPermit, (void*)user,
                          pending, error);
}

// A cancel callback on a permit's job context, `user` a cgo.Handle of a context.CancelFunc.
static fairgate_cancel_callback* fairgate_go_permit_on_cancel(const fairgate_permit* permit,
                                                              uintptr_t user) {
  return fairgate_context_on_cancel(fairgate_permit_context(permit),
                                    (fairgate_cancel_fn)fairgateGoCancel, (void*)user);
}
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"log"
	"runtime"
	"runtime/cgo"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// Options configure a Scheduler. The zero value is fairgate's default rule.
type Options struct {
	// MaxConcurrency is the global cap: at most this many jobs run at once (in slots). 0: 8.
	MaxConcurrency int
	// Seed selects the original rule (no reconciliation, no lending) instead of the default one.
	Seed bool
	// LatencyCapacityMin, when above 0, lets the cap follow the jobs' run times between it and
	// MaxConcurrency (fairgate/latency_capacity.h).
	LatencyCapacityMin int
	// WorkerThreads is the C library's pool for its own background jobs. 0: MaxConcurrency.
	WorkerThreads int
	// Store keeps durable jobs, learned costs and keys' costs across restarts (nil: nothing is
	// kept, and the durable calls fail with FailedPrecondition). The Scheduler keeps it open.
	Store *Store
	// StateFlushInterval is how often learned costs are written to the store. 0: 5 s.
	StateFlushInterval time.Duration
	// Fleet configures replicas sharing a PostgreSQL store.
	Fleet FleetOptions

	// Reconcile corrects a key's charge by what its job really cost, at completion
	// (fairgate/rule_options.h): on in the default rule, off with Seed.
	Reconcile Switch
	// Lending lets a tier's idle slots go to another tier's jobs, keeping a quarter of the cap
	// back: on in the default rule, off with Seed.
	Lending Switch
	// Aging raises waiting jobs' tiers (nil: none).
	Aging *Aging
	// ShortestFirst orders each key's jobs by estimated cost, every type; ShortestFirstAging
	// (>= 0) is its aging term.
	ShortestFirst      bool
	ShortestFirstAging float64
	// DefaultKeyLimits are the limits of keys without their own (SetKeyLimits).
	DefaultKeyLimits KeyLimits
	// DefaultGroupLimits are the limits of groups without their own (SetGroupLimits).
	DefaultGroupLimits GroupLimits
	// OnEvent, when set, is told of every decision, one at a time in order, on the C library's
	// delivery thread (fairgate/observer.h): it must be quick, and must not call Close or Drain.
	OnEvent func(Event)
	// Warn, when set, gets the scheduler's warnings (one sentence each) instead of stderr.
	Warn func(warning string)
	// KeyGroup, when set, names the group of a key the scheduler has not seen ("" for none), so
	// that groups of keys (tenants) follow a rule of yours. It is called with the scheduler's lock
	// held: it must be quick and must not call the scheduler.
	KeyGroup func(key string) string
	// OnEvidence, when set, gets every admission's reasons as a line of JSON (fairgate/evidence.h),
	// as OnEvent gets events; EvidencePath, when not "", appends them to that file instead.
	OnEvidence   func(line string)
	EvidencePath string
	// AdaptiveCapacity lets the cap follow pressure (nil: off).
	AdaptiveCapacity *AdaptiveCapacity
	// The rest are fairgate's defaults when 0 (fairgate/options.h, fairgate/rule_options.h).
	LendingKeptBack               float64       // the share of the cap kept from borrowers: 0.25
	LatencyCapacityInterval       time.Duration // 1 s
	LatencyCapacityRemeasureEvery int           // 60 intervals
	SoleWorkerReserveAfter        time.Duration // 30 s; below 0: never
	SweepBatch                    int           // 1,024 keys or estimates a sweep
	FiberStackBytes               int           // 256 KiB
	SweepInterval                 time.Duration // 1 s
	ObserverQueueLimit            int           // 65,536 events
}

// GroupLimits bound a group of keys' running jobs (fairgate/group_limits.h).
type GroupLimits struct {
	MaxRunning int // at most this many of its jobs run at once; 0: no limit
	MinRunning int // while fewer run, its jobs go first within their tier
}

// FleetOptions configure replicas sharing a store (OpenPostgres; fairgate/options.h,
// FleetOptions). Zero fields take fairgate's defaults.
type FleetOptions struct {
	// LeaseTTL is how long a claim of durable jobs lasts unrenewed: a dead replica's jobs go to
	// the others about this long after its last renewal. 0: 10 s.
	LeaseTTL time.Duration
	// ClaimInterval is how often a replica looks for jobs when nothing woke it. 0: 1 s.
	ClaimInterval time.Duration
	// MaxClaimed is how many durable jobs a replica holds at most. 0: as many as it can start
	// soon.
	MaxClaimed int
	// ConflictGroups are the types' conflict groups whose limit holds across the fleet.
	ConflictGroups []string
	// TypeCaps caps a type's jobs running at once in the whole fleet (type -> cap, each >= 1).
	TypeCaps map[string]int
	// TokenLease is how many seconds of a fleet-wide rate limit's tokens a replica takes at once.
	// 0: 0.1 s.
	TokenLease time.Duration
}

// A Scheduler decides when jobs run. Its methods may be called from any goroutine.
type Scheduler struct {
	// live guards c: every call into the C scheduler holds it shared, and Close holds it alone to
	// free c and set it to nil, after which every method fails with Unavailable (use).
	live   sync.RWMutex
	c      *C.fairgate_scheduler
	ctx    context.Context // the context of Submit's jobs and durable handlers, cancelled by Close
	cancel context.CancelFunc
	// hasWorkers is set once a worker was added: permits' job contexts may be cancelled then.
	hasWorkers atomic.Bool
	close      sync.Once
	// handles are the durable types' (RegisterDurable) and the periodic jobs' (SubmitEvery),
	// deleted once Close freed c; periodics are the latter, whose C handles Close frees then.
	handlesMu sync.Mutex
	handles   []cgo.Handle
	periodics []*Periodic
	// reporting counts the goroutines calling the periodic jobs' OnRun, which Close waits for.
	reporting sync.WaitGroup
	// coalescing are the registered types whose TypeConfig.Coalesce is not CoalesceOff.
	typesMu    sync.RWMutex
	coalescing map[string]bool
}

// errClosed is what a method called after Close returns.
var errClosed = &Error{Code: Unavailable, Message: "fairgate: the scheduler is closed"}

// use calls f with the C scheduler while Close cannot free it; errClosed once Close has.
func (s *Scheduler) use(f func(c *C.fairgate_scheduler) error) error {
	s.live.RLock()
	defer s.live.RUnlock()
	if s.c == nil {
		return errClosed
	}
	return f(s.c)
}

// New starts a scheduler.
func New(options Options) (*Scheduler, error) {
	startHandoff()
	var c C.fairgate_options
	C.fairgate_options_init_version(&c, C.FAIRGATE_OPTIONS_VERSION)
	if options.MaxConcurrency != 0 {
		c.max_concurrency = C.int(options.MaxConcurrency)
	}
	if options.Seed {
		c.seed_mode = 1
	}
	c.latency_capacity_min = C.int(options.LatencyCapacityMin)
	c.worker_threads = C.int(options.WorkerThreads)
	if options.StateFlushInterval != 0 {
		c.state_flush_seconds = C.double(options.StateFlushInterval.Seconds())
	}
	fleet := options.Fleet
	if fleet.LeaseTTL != 0 {
		c.lease_ttl_seconds = C.double(fleet.LeaseTTL.Seconds())
	}
	if fleet.ClaimInterval != 0 {
		c.claim_interval_seconds = C.double(fleet.ClaimInterval.Seconds())
	}
	c.max_claimed = C.int(fleet.MaxClaimed)
	var mem cMemory
	defer mem.free()
	c.fleet_conflict_groups, c.fleet_conflict_group_count = mem.strings(fleet.ConflictGroups)
	if len(fleet.TypeCaps) > 0 {
		types := make([]string, 0, len(fleet.TypeCaps))
		for typ := range fleet.TypeCaps {
			types = append(types, typ)
		}
		c.fleet_capped_types, c.fleet_type_cap_count = mem.strings(types)
		caps := unsafe.Slice((*C.int)(C.malloc(C.size_t(len(types))*C.size_t(unsafe.Sizeof(C.int(0))))),
			len(types))
		mem = append(mem, unsafe.Pointer(&caps[0]))
		for i, typ := range types {
			caps[i] = C.int(fleet.TypeCaps[typ])
		}
		c.fleet_type_caps = &caps[0]
	}
	handles, err := setRest(&c, options, &mem)
	if err != nil {
		deleteHandles(handles)
		return nil, err
	}
	var code C.fairgate_code
	var message *C.char
	var scheduler *C.fairgate_scheduler
	create := func() { scheduler = C.fairgate_scheduler_create(&c, &code, &message) }
	if options.Store != nil {
		// Under the store's lock: its Close cannot free it while the scheduler takes its own hold.
		options.Store.mu.Lock()
		c.store = options.Store.c
		if c.store == nil {
			options.Store.mu.Unlock()
			return nil, &Error{Code: InvalidArgument, Message: "Options.Store is closed"}
		}
		create()
		options.Store.mu.Unlock()
	} else {
		create()
	}
	if scheduler == nil {
		deleteHandles(handles)
		return nil, errorOf(code, message)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Scheduler{c: scheduler, ctx: ctx, cancel: cancel, handles: handles}, nil
}

// Close shuts the scheduler down: waiting calls return an error with code Canceled, the contexts
// of Submit's running jobs are cancelled, and Close returns once every job has returned, every
// Permit has been released and every periodic job's runs have been passed to its OnRun. Calls
// made while it waits, or after, fail with code Unavailable (ErrClosed); Snapshot then returns
// nil and Metrics "". Calling Close again does nothing.
func (s *Scheduler) Close() error {
	var err error
	s.close.Do(func() {
		// The waiting are refused first (a shutdown that waits no time: the running jobs still
		// hold their permits), so that a running job's slot, freed as its context is cancelled
		// next, admits none of them; then Close waits for the running.
		var message *C.char
		C.fairgate_scheduler_shutdown(s.c, 0, &message)
		C.fairgate_free(message)
		s.cancel()
		message = nil
		err = errorOf(C.fairgate_scheduler_shutdown(s.c, -1, &message), message)
		s.reporting.Wait() // the last runs' reports, queued by now
		s.live.Lock()
		C.fairgate_scheduler_destroy(s.c)
		s.c = nil
		s.live.Unlock()
		s.handlesMu.Lock()
		deleteHandles(s.handles)
		for _, p := range s.periodics {
			p.free()
		}
		s.handles, s.periodics = nil, nil
		s.handlesMu.Unlock()
	})
	return err
}

func deleteHandles(handles []cgo.Handle) {
	for _, h := range handles {
		h.Delete()
	}
}

// Drain refuses new calls but runs everything queued first (resuming what is paused), then
// closes the scheduler as Close does. It waits at most timeout for the queue to empty (0 or
// less: as long as that takes); after it, what is still queued is refused with code Canceled and
// Drain returns an error with code DeadlineExceeded (or Close's error).
func (s *Scheduler) Drain(timeout time.Duration) error {
	seconds := -1.0
	if timeout > 0 {
		seconds = timeout.Seconds()
	}
	err := s.use(func(sc *C.fairgate_scheduler) error {
		var message *C.char
		return errorOf(C.fairgate_scheduler_drain(sc, C.double(seconds), &message), message)
	})
	if closed := s.Close(); err == nil {
		err = closed
	}
	return err
}

// Coalesce says what a request for an id that already has a job does (TypeConfig.Coalesce): a
// RunSync, a Submit or a SubmitDurable (Acquire never joins).
type Coalesce int

// The coalescing modes.
const (
	CoalesceOff       Coalesce = 0 // every request is a job of its own
	CoalesceJoin      Coalesce = 1 // it joins that job
	CoalesceSupersede Coalesce = 2 // it joins it, and its function replaces the one to run
)

// TypeConfig configures a job type (fairgate/job_type.h). Zero fields take fairgate's defaults.
type TypeConfig struct {
	Priority           int     // the tier, and its cap in slots; 0: 1
	MaxConcurrency     int     // jobs of the type at once; 0: no cap of its own
	Slots              int     // slots one job takes; 0: 1
	DefaultCost        float64 // the charge before a cost is learned, in seconds; 0: 1
	ConflictGroup      string  // same id and group: at most ConflictLimit run at once
	ConflictLimit      int     // 0: 1
	ShortestFirst      bool
	MaxQueueWait       time.Duration // 0: no limit
	Coalesce           Coalesce
	Tags               []string
	RatePerSecond      float64 // 0: no rate limit
	RateBurst          float64 // 0: 1
	RefuseWithoutToken bool
	ShedTarget         time.Duration // shedding (fairgate/shedding.h); 0: none
	ShedInterval       time.Duration // 0: 1 s
}

// RegisterType registers a job type; again with the same config it does nothing, with another it
// fails with AlreadyExists.
func (s *Scheduler) RegisterType(name string, config TypeConfig) error {
	var c C.fairgate_type_config
	C.fairgate_type_config_init_version(&c, C.FAIRGATE_TYPE_CONFIG_VERSION)
	if config.Priority != 0 {
		c.priority = C.int(config.Priority)
	}
	c.max_concurrency = C.int(config.MaxConcurrency)
	if config.Slots != 0 {
		c.slots = C.int(config.Slots)
	}
	if config.DefaultCost != 0 {
		c.default_cost = C.double(config.DefaultCost)
	}
	var mem cMemory
	defer mem.free()
	c.conflict_group = mem.string(config.ConflictGroup)
	if config.ConflictLimit != 0 {
		c.conflict_limit = C.int(config.ConflictLimit)
	}
	if config.ShortestFirst {
		c.shortest_first = 1
	}
	c.max_queue_wait_seconds = C.double(config.MaxQueueWait.Seconds())
	c.coalesce = C.fairgate_coalesce(config.Coalesce)
	c.tags, c.tag_count = mem.strings(config.Tags)
	c.rate_per_second = C.double(config.RatePerSecond)
	if config.RateBurst != 0 {
		c.rate_burst = C.double(config.RateBurst)
	}
	if config.RefuseWithoutToken {
		c.refuse_without_token = 1
	}
	c.shed_target_seconds = C.double(config.ShedTarget.Seconds())
	if config.ShedInterval != 0 {
		c.shed_interval_seconds = C.double(config.ShedInterval.Seconds())
	}
	err := s.use(func(sc *C.fairgate_scheduler) error {
		var message *C.char
		return errorOf(C.fairgate_register_type(sc, mem.string(name), &c, &message), message)
	})
	if err == nil && config.Coalesce != CoalesceOff {
		s.typesMu.Lock()
		if s.coalescing == nil {
			s.coalescing = map[string]bool{}
		}
		s.coalescing[name] = true
		s.typesMu.Unlock()
	}
	return err
}

// cMemory is C memory a call allocates for its arguments, freed together when it returns.
type cMemory []unsafe.Pointer

// string returns s as a C string.
func (m *cMemory) string(s string) *C.char {
	p := C.CString(s)
	*m = append(*m, unsafe.Pointer(p))
	return p
}

// strings returns a C array of ss as C strings and its length (nil for none).
func (m *cMemory) strings(ss []string) (**C.char, C.size_t) {
	if len(ss) == 0 {
		return nil, 0
	}
	array := (**C.char)(C.malloc(C.size_t(len(ss)) * C.size_t(unsafe.Sizeof((*C.char)(nil)))))
	*m = append(*m, unsafe.Pointer(array))
	slice := unsafe.Slice(array, len(ss))
	for i, s := range ss {
		slice[i] = m.string(s)
	}
	return array, C.size_t(len(ss))
}

func (m *cMemory) free() {
	for _, p := range *m {
		C.free(p)
	}
}

// A Job names a piece of work: its type, what it is about (its id: a repository, say; costs are
// learned per type and id) and who asked (its fairness key: a client's address, a tenant).
type Job struct {
	Type, ID, Key string
	cost          float64
	hasCost       bool
	flags         C.uint32_t // FAIRGATE_JOB_*
}

// WithCost returns the job with a cost hint: what it is charged instead of the learned estimate
// (which still learns from its run). A cost that is negative, NaN or infinite is refused
// (InvalidArgument) by the call given the job.
func (j Job) WithCost(cost float64) Job {
	j.cost, j.hasCost = cost, true
	return j
}

// WithJoinRunning returns the job that, given to Submit, also joins a running job of its id of a
// coalescing type, as RunSync does (fairgate/job_options.h, join_running).
func (j Job) WithJoinRunning() Job {
	j.flags |= C.FAIRGATE_JOB_JOIN_RUNNING
	return j
}

// WithRequeueOnWorkerLoss returns the job that, given to Submit, is submitted again when the
// worker it runs on is removed (fairgate/job_options.h, requeue_on_worker_loss): done is told only
// of the run that ends otherwise.
func (j Job) WithRequeueOnWorkerLoss() Job {
	j.flags |= C.FAIRGATE_JOB_REQUEUE_ON_WORKER_LOSS
	return j
}

// WithRefuseWithoutToken returns the job refused at once (ResourceExhausted, with RetryAfter)
// when a rate limit it is under has no token at its arrival, instead of waiting for one
// (fairgate/job_options.h, refuse_without_token): an HTTP server's 429. On a shared store the
// buckets are the fleet's, and a replica whose lease of one is on its way holds the job until the
// lease comes: a call still waiting then is told the same refusal if it brought no token.
func (j Job) WithRefuseWithoutToken() Job {
	j.flags |= C.FAIRGATE_JOB_REFUSE_WITHOUT_TOKEN
	return j
}

// checkCost refuses a cost hint below 0, which the C interface would read as none.
func (j Job) checkCost() error {
	if j.hasCost && j.cost < 0 {
		return &Error{Code: InvalidArgument,
			Message: fmt.Sprintf("explicit cost must be finite and >= 0, got %v", j.cost)}
	}
	return nil
}

// cJob is the job as the C interface takes it, and frees its strings.
func (j Job) cJob() (C.fairgate_job, func()) {
	var c C.fairgate_job
	c._type = C.CString(j.Type)
	c.id = C.CString(j.ID)
	c.fairness_key = C.CString(j.Key)
	c.cost = -1
	if j.hasCost {
		c.cost = C.double(j.cost)
	}
	c.flags = j.flags
	return c, func() {
		C.free(unsafe.Pointer(c._type))
		C.free(unsafe.Pointer(c.id))
		C.free(unsafe.Pointer(c.fairness_key))
	}
}

// A Permit is an admitted job's slot, held until Release.
type Permit struct {
	job Job
	mu  sync.Mutex
	c   *C.fairgate_permit // nil once released
	// lostCh is Lost's channel, made at its first call, with the callback that closes it when
	// the permit's job context is cancelled (stopped by Release) and that callback's handle.
	lostCh     chan struct{}
	lostWatch  *C.fairgate_cancel_callback
	lostHandle cgo.Handle
}

// Release ends the permit's job with err (nil: it succeeded) and frees its slot. The time from
// the admission to the release is the cost the job's (type, id) estimate learns. Calling it again,
// or after ReleaseUnused, does nothing.
func (p *Permit) Release(err error) {
	p.end(err, true)
}

// ReleaseUnused gives the permit's job back without having done any of its work, for a holder
// whose reason to run it went away as it was admitted: its slot is freed as Release frees it, but
// its estimate learns nothing (a Release after no work would teach it a cost near zero) and its
// key is charged back what the admission charged it; err (nil: Canceled) is what the metrics and
// events see. Calling it again, or after Release, does nothing.
func (p *Permit) ReleaseUnused(err error) {
	if err == nil {
		err = &Error{Code: Canceled, Message: "the permit was given back unused"}
	}
	p.end(err, false)
}

func (p *Permit) end(err error, used bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.c == nil {
		return
	}
	code, message := CodeOf(err), ""
	if err != nil {
		message = err.Error()
	}
	cmessage := C.CString(message)
	defer C.free(unsafe.Pointer(cmessage))
	if p.lostWatch != nil {
		C.fairgate_cancel_callback_stop(p.lostWatch) // after it, the callback never reads the handle
		p.lostHandle.Delete()
		p.lostWatch = nil
	}
	if used {
		C.fairgate_permit_release(p.c, C.fairgate_code(code), cmessage)
	} else {
		C.fairgate_permit_release_unused(p.c, C.fairgate_code(code), cmessage)
	}
	p.c = nil
	runtime.SetFinalizer(p, nil)
}

// Lost returns a channel that is closed if the permit's job is lost: the worker it was admitted
// onto (AddWorker, Worker) is removed while the permit is held. The job has ended then; stop its
// work, and call Release, which completes nothing. Without workers, or once released, it is never
// closed.
func (p *Permit) Lost() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lostCh != nil {
		return p.lostCh
	}
	p.lostCh = make(chan struct{})
	if p.c != nil {
		var once sync.Once
		ch := p.lostCh
		p.lostHandle = cgo.NewHandle(context.CancelFunc(func() { once.Do(func() { close(ch) }) }))
		p.lostWatch = C.fairgate_go_permit_on_cancel(p.c, C.uintptr_t(p.lostHandle))
	}
	return p.lostCh
}

// Worker is, with workers (AddWorker), the worker the job was admitted onto: do the work there.
// "" without workers, or once released.
func (p *Permit) Worker() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.c == nil {
		return ""
	}
	worker := C.fairgate_permit_worker(p.c)
	defer C.fairgate_free(worker)
	return C.GoString(worker)
}

// FencingToken is the token of the fleet-wide lease the job holds (FleetOptions.ConflictGroups,
// TypeCaps): greater than every earlier holder's of the same resource, for storage that can
// refuse a stale writer. 0 when it holds none, or once released.
func (p *Permit) FencingToken() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.c == nil {
		return 0
	}
	return uint64(C.fairgate_permit_fencing_token(p.c))
}

// jobKey is the key of the jobInfo in the context a job's function is given.
type jobKey struct{}

// WorkerOf is, inside a function run by RunSync, Submit or SubmitEvery or a durable handler, the
// worker its job was admitted onto (Permit.Worker); "" for another context.
func WorkerOf(ctx context.Context) string {
	if j, ok := ctx.Value(jobKey{}).(jobInfo); ok {
		return j.Worker()
	}
	return ""
}

// FencingTokenOf is, inside a function run by RunSync, Submit or SubmitEvery or a durable
// handler, its job's fencing token (Permit.FencingToken); 0 for another context.
func FencingTokenOf(ctx context.Context) uint64 {
	if j, ok := ctx.Value(jobKey{}).(jobInfo); ok {
		return j.FencingToken()
	}
	return 0
}

// newPermit wraps an admitted C permit; a permit dropped without Release is released by its
// finalizer, which logs the leak.
func newPermit(job Job, c *C.fairgate_permit) *Permit {
	p := &Permit{job: job, c: c}
	runtime.SetFinalizer(p, func(p *Permit) {
		log.Printf("fairgate: a permit of job %q %q (key %q) was never released; its finalizer "+
			"releases it now", p.job.Type, p.job.ID, p.job.Key)
		p.Release(&Error{Code: Internal, Message: "permit leaked: released by its finalizer"})
	})
	return p
}

// waiter is an Acquire on its way: the C side has it, and the report comes on ch.
type waiter struct {
	ch      chan admission
	pending *C.fairgate_pending
}

// start asks the C interface for the job; a refusal is returned at once.
func (s *Scheduler) start(job Job) (*waiter, error) {
	if err := job.checkCost(); err != nil {
		return nil, err
	}
	w := &waiter{ch: make(chan admission, 1)}
	h := cgo.NewHandle(w.ch)
	c, free := job.cJob()
	defer free()
	err := s.use(func(sc *C.fairgate_scheduler) error {
		var message *C.char
		return errorOf(C.fairgate_go_acquire(sc, &c, C.uintptr_t(h), &w.pending, &message), message)
	})
	if err != nil {
		h.Delete() // no callback comes for a refused call
		return nil, err
	}
	return w, nil
}

// wait waits for the admission or for ctx, whichever comes first.
func (s *Scheduler) wait(ctx context.Context, job Job, w *waiter) (*Permit, error) {
	defer C.fairgate_pending_free(w.pending)
	select {
	case a := <-w.ch:
		return admitted(job, a)
	case <-ctx.Done():
		C.fairgate_pending_cancel(w.pending)
		// The one report still comes: Canceled, or a permit granted just before the cancel, given
		// back unused (its estimate learns nothing, its key's charge is given back).
		if a := <-w.ch; a.permit != nil {
			cmessage := C.CString("the caller's context ended as it was admitted")
			C.fairgate_permit_release_unused(a.permit, C.FAIRGATE_CANCELLED, cmessage)
			C.free(unsafe.Pointer(cmessage))
		}
		return nil, ctx.Err()
	}
}

func admitted(job Job, a admission) (*Permit, error) {
	if a.permit == nil {
		return nil, a.err
	}
	return newPermit(job, a.permit), nil
}

// Acquire waits until the job is admitted and returns its permit; the caller runs the job and
// then calls Permit.Release. It returns ctx.Err() if ctx ends first (the job leaves the queue,
// uncharged), an *Error with code Canceled if the scheduler closes first, DeadlineExceeded at
// the type's MaxQueueWait, or the refusal (NotFound for an unknown type, ResourceExhausted for a
// full queue, ...).
func (s *Scheduler) Acquire(ctx context.Context, job Job) (*Permit, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	w, err := s.start(job)
	if err != nil {
		return nil, err
	}
	return s.wait(ctx, job, w)
}

// TryAcquire admits the job at once or not at all: its permit, or an *Error with code
// ResourceExhausted when it would have to wait (it is not queued, nothing is charged, and nothing
// admits it later), or the refusal Acquire would return; FailedPrecondition for a type that takes
// fleet-wide leases (FleetOptions.ConflictGroups and TypeCaps: use Acquire). For a caller with
// something better to do than wait: a server that answers "busy, retry" rather than queue a
// request, say.
func (s *Scheduler) TryAcquire(job Job) (*Permit, error) {
	if err := job.checkCost(); err != nil {
		return nil, err
	}
	c, free := job.cJob()
	defer free()
	var permit *C.fairgate_permit
	err := s.use(func(sc *C.fairgate_scheduler) error {
		var message *C.char
		return errorOf(C.fairgate_try_acquire(sc, &c, &permit, &message), message)
	})
	if err != nil {
		return nil, err
	}
	return newPermit(job, permit), nil
}

// RunSync waits until the job is admitted, runs fn and returns its error, or returns why it did
// not run (as Acquire). fn runs on the calling goroutine: a panic in it goes on to the caller
// (and runtime.Goexit ends the caller's goroutine), after the job is ended with code Internal.
//
// Of a coalescing type (TypeConfig.Coalesce) it joins a pending or running job of its id, as
// fairgate/scheduler.h says ("Coalescing"): the C library queues it with nobody waiting
// (fairgate_run_async) while the caller waits parked, as in Acquire, and fn, if this call runs
// the job, runs in a goroutine of its own (ctx's end still ends the wait); a call that joined
// another's job returns that job's error (an *Error with its code and text) without running fn,
// and the removal of the worker fn runs on (RemoveWorker) cancels fn's context: the call then
// returns the loss (Unavailable).
func (s *Scheduler) RunSync(ctx context.Context, job Job, fn func(ctx context.Context) error) error {
	if fn == nil {
		return &Error{Code: InvalidArgument, Message: "the job's function is nil"}
	}
	if s.coalesces(job.Type) {
		return s.runSyncInC(ctx, job, fn)
	}
	p, err := s.Acquire(ctx, job)
	if err != nil {
		return err
	}
	return s.runAndRelease(ctx, p, fn)
}

// runAndRelease runs fn under p (runPermitted) and releases p with its error. If fn panics or
// calls runtime.Goexit, p is released all the same, with code Internal, and the panic or exit goes
// on: the slot is not held until the garbage collector finds the permit.
func (s *Scheduler) runAndRelease(ctx context.Context, p *Permit, fn func(ctx context.Context) error) error {
	returned := false
	defer func() {
		if !returned {
			p.Release(&Error{Code: Internal,
				Message: "the job's function did not return (it panicked or called runtime.Goexit)"})
		}
	}()
	err := s.runPermitted(ctx, p, fn)
	returned = true
	p.Release(err)
	return err
}

// runPermitted runs fn under the permit p with ctx, which carries p (WorkerOf, FencingTokenOf)
// and is cancelled too when p's job context is (Permit.JobContext in fairgate/permit.h: its
// worker removed); it returns fn's error, or the loss (Unavailable) if the worker was removed, as
// the C library's RunSync does.
func (s *Scheduler) runPermitted(ctx context.Context, p *Permit, fn func(ctx context.Context) error) error {
	ctx = context.WithValue(ctx, jobKey{}, p)
	if !s.hasWorkers.Load() {
		return fn(ctx) // without workers nothing cancels a permit's job context
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	h := cgo.NewHandle(cancel)
	defer h.Delete() // after the callback's stop (defers run last first): it never reads h then
	p.mu.Lock()
	callback := C.fairgate_go_permit_on_cancel(p.c, C.uintptr_t(h))
	p.mu.Unlock()
	defer C.fairgate_cancel_callback_stop(callback)
	err := fn(runCtx)
	if lost := p.lost(); lost != nil {
		return lost
	}
	return err
}

// lost is the loss of the permit's job (its worker removed while it ran), or nil.
func (p *Permit) lost() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.c == nil {
		return nil
	}
	var message *C.char
	return errorOf(C.fairgate_context_err(C.fairgate_permit_context(p.c), &message), message)
}

// Submit queues the job and returns at once: fn runs on a goroutine of its own once the job is
// admitted, with a context that Close cancels, and done (may be nil) is called with its error,
// or with why it did not run (a panic or runtime.Goexit in fn fails the job with code Internal).
// A refusal is returned, and then done is never called.
//
// A job of a coalescing type (TypeConfig.Coalesce), or one WithJoinRunning or
// WithRequeueOnWorkerLoss, is queued by the C library's Submit instead, so that it joins a job
// of its id as fairgate/scheduler.h says ("Coalescing"): its fn then runs in a goroutine while
// the job waits on the C library's pool without holding a thread of it (a panic or
// runtime.Goexit fails it with code Internal), with a context that Close cancels, and
// the removal of the worker it runs on (RemoveWorker; WithRequeueOnWorkerLoss, the job's next run
// starts when this one returns), and a call that joined another's job gets that job's error (an
// *Error with its code and text) and never runs its own fn.
func (s *Scheduler) Submit(job Job, fn func(ctx context.Context) error, done func(error)) error {
	if fn == nil {
		return &Error{Code: InvalidArgument, Message: "the job's function is nil"}
	}
	if s.runsInC(job) {
		return s.submitInC(job, fn, done)
	}
	w, err := s.start(job)
	if err != nil {
		return err
	}
	go func() {
		report := func(err error) {
			if done != nil {
				done(err)
			}
		}
		p, err := s.wait(context.Background(), job, w)
		if err != nil {
			report(err)
			return
		}
		ending("the job's function", func() error {
			return s.runAndRelease(s.ctx, p, func(ctx context.Context) error {
				return recovering("the job's function", func() error { return fn(ctx) })
			})
		}, report)
	}()
	return nil
}

// Charge charges key for work done outside any job, in seconds of slot time.
func (s *Scheduler) Charge(key string, cost float64) error {
	return s.withName(key, func(sc *C.fairgate_scheduler, name *C.char,
		message **C.char) C.fairgate_code {
		return C.fairgate_charge(sc, name, C.double(cost), message)
	})
}

// AccumulatedCost is what key has been charged (decayed as fairgate keeps it), if it is tracked.
func (s *Scheduler) AccumulatedCost(key string) (float64, bool) {
	ckey := C.CString(key)
	defer C.free(unsafe.Pointer(ckey))
	return s.tracked(func(sc *C.fairgate_scheduler, cost *C.double) C.int {
		return C.fairgate_accumulated_cost(sc, ckey, cost)
	})
}

// GroupAccumulatedCost is what group's keys have been charged (divided by its weight), if it is
// tracked.
func (s *Scheduler) GroupAccumulatedCost(group string) (float64, bool) {
	cgroup := C.CString(group)
	defer C.free(unsafe.Pointer(cgroup))
	return s.tracked(func(sc *C.fairgate_scheduler, cost *C.double) C.int {
		return C.fairgate_group_accumulated_cost(sc, cgroup, cost)
	})
}

// Estimate is the learned cost of the jobs of type typ about id, in seconds of slot time, if it
// is tracked.
func (s *Scheduler) Estimate(typ, id string) (float64, bool) {
	var mem cMemory
	defer mem.free()
	ctype, cid := mem.string(typ), mem.string(id)
	return s.tracked(func(sc *C.fairgate_scheduler, seconds *C.double) C.int {
		return C.fairgate_estimate(sc, ctype, cid, seconds)
	})
}

// tracked asks query, which answers 1 and fills *value when what it asks about is tracked (0 once
// the scheduler is closed).
func (s *Scheduler) tracked(query func(sc *C.fairgate_scheduler, value *C.double) C.int) (float64,
	bool) {
	var value C.double
	found := false
	s.use(func(sc *C.fairgate_scheduler) error {
		found = query(sc, &value) == 1
		return nil
	})
	return float64(value), found
}

// SetKeyWeight gives key a weight (> 0): its share is in proportion.
func (s *Scheduler) SetKeyWeight(key string, weight float64) error {
	return s.withName(key, func(sc *C.fairgate_scheduler, name *C.char,
		message **C.char) C.fairgate_code {
		return C.fairgate_set_key_weight(sc, name, C.double(weight), message)
	})
}

// withName calls f with the C scheduler (as use), name as a C string and an error message to
// fill, and returns its error.
func (s *Scheduler) withName(name string,
	f func(sc *C.fairgate_scheduler, name *C.char, message **C.char) C.fairgate_code) error {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	return s.use(func(sc *C.fairgate_scheduler) error {
		var message *C.char
		return errorOf(f(sc, cname, &message), message)
	})
}

// KeyLimits bound a key's running jobs (fairgate/key_limits.h). Zero fields are no limit.
type KeyLimits struct {
	MaxRunning    int     // at most this many of its jobs run at once; 0: no limit
	MinRunning    int     // while fewer run, its jobs go first within their tier
	RatePerSecond float64 // how often its jobs may start; 0: no limit
	RateBurst     float64 // 0: 1
	RatePerWeight bool    // the rate multiplied by the key's weight
}

func keyLimitsOf(limits KeyLimits) C.fairgate_key_limits {
	c := C.fairgate_key_limits{max_running: C.int(limits.MaxRunning),
		min_running: C.int(limits.MinRunning), rate_per_second: C.double(limits.RatePerSecond),
		rate_burst: C.double(limits.RateBurst)}
	if limits.RatePerWeight {
		c.rate_per_weight = 1
	}
	return c
}

// SetKeyLimits sets key's limits, kept for the scheduler's life.
func (s *Scheduler) SetKeyLimits(key string, limits KeyLimits) error {
	c := keyLimitsOf(limits)
	return s.withName(key, func(sc *C.fairgate_scheduler, name *C.char,
		message **C.char) C.fairgate_code {
		return C.fairgate_set_key_limits(sc, name, &c, message)
	})
}

// SetKeyGroup puts key in a group of keys, a tenant ("" takes it out): the order then puts the
// least-charged group first and, within it, the least-charged key, so a client that spreads its
// work over many keys gets one group's share.
func (s *Scheduler) SetKeyGroup(key, group string) error {
	cgroup := C.CString(group)
	defer C.free(unsafe.Pointer(cgroup))
	return s.withName(key, func(sc *C.fairgate_scheduler, name *C.char,
		message **C.char) C.fairgate_code {
		return C.fairgate_set_key_group(sc, name, cgroup, message)
	})
}

// SetGroupWeight gives a group a weight (> 0), as SetKeyWeight does a key.
func (s *Scheduler) SetGroupWeight(group string, weight float64) error {
	return s.withName(group, func(sc *C.fairgate_scheduler, name *C.char,
		message **C.char) C.fairgate_code {
		return C.fairgate_set_group_weight(sc, name, C.double(weight), message)
	})
}

// SetGroupLimits bounds the running jobs of all a group's keys together (0: no limit) and puts
// them first within their tier while fewer than minRunning run.
func (s *Scheduler) SetGroupLimits(group string, maxRunning, minRunning int) error {
	return s.withName(group, func(sc *C.fairgate_scheduler, name *C.char,
		message **C.char) C.fairgate_code {
		return C.fairgate_set_group_limits(sc, name, C.int(maxRunning), C.int(minRunning), message)
	})
}

// PauseType stops admitting jobs of a type (they keep their places and do not age) until
// ResumeType.
func (s *Scheduler) PauseType(typ string) error {
	return s.withName(typ, func(sc *C.fairgate_scheduler, name *C.char,
		message **C.char) C.fairgate_code {
		return C.fairgate_pause_type(sc, name, message)
	})
}

// ResumeType admits a paused type's jobs again.
func (s *Scheduler) ResumeType(typ string) error {
	return s.withName(typ, func(sc *C.fairgate_scheduler, name *C.char,
		message **C.char) C.fairgate_code {
		return C.fairgate_resume_type(sc, name, message)
	})
}

// PauseKey stops admitting a key's jobs until ResumeKey.
func (s *Scheduler) PauseKey(key string) error {
	return s.withName(key, func(sc *C.fairgate_scheduler, name *C.char,
		message **C.char) C.fairgate_code {
		return C.fairgate_pause_key(sc, name, message)
	})
}

// ResumeKey admits a paused key's jobs again.
func (s *Scheduler) ResumeKey(key string) error {
	return s.withName(key, func(sc *C.fairgate_scheduler, name *C.char,
		message **C.char) C.fairgate_code {
		return C.fairgate_resume_key(sc, name, message)
	})
}

// AddWorker declares a worker (fairgate/worker.h) with its slots and the types and tags it serves.
func (s *Scheduler) AddWorker(name string, slots int, types, tags []string) error {
	return s.setWorker(name, slots, types, tags, false)
}

// UpdateWorker changes a worker's slots and the types and tags it serves; its running jobs go
// on. NotFound for an unknown worker.
func (s *Scheduler) UpdateWorker(name string, slots int, types, tags []string) error {
	return s.setWorker(name, slots, types, tags, true)
}

// setWorker is AddWorker, or with update UpdateWorker.
func (s *Scheduler) setWorker(name string, slots int, types, tags []string, update bool) error {
	var mem cMemory
	defer mem.free()
	cname := mem.string(name)
	ctypes, ntypes := mem.strings(types)
	ctags, ntags := mem.strings(tags)
	return s.use(func(sc *C.fairgate_scheduler) error {
		var message *C.char
		if update {
			return errorOf(C.fairgate_update_worker(sc, cname, C.int(slots), ctypes, ntypes, ctags,
				ntags, &message), message)
		}
		s.hasWorkers.Store(true) // before the worker can admit a job
		return errorOf(C.fairgate_add_worker(sc, cname, C.int(slots), ctypes, ntypes, ctags, ntags,
			&message), message)
	})
}

// RemoveWorker removes a worker; the jobs running on it are lost (fairgate/scheduler.h,
// RemoveWorker): the context RunSync or Submit gave a job's function is cancelled, and its end
// reports the loss (Unavailable). An Acquire's holder learns of it from Permit.Lost; its Release
// then completes nothing.
func (s *Scheduler) RemoveWorker(name string) error {
	return s.withName(name, func(sc *C.fairgate_scheduler, cname *C.char,
		message **C.char) C.fairgate_code {
		return C.fairgate_remove_worker(sc, cname, message)
	})
}

// Snapshot returns what the scheduler is doing now, as JSON (fairgate/snapshot.h); nil after
// Close.
func (s *Scheduler) Snapshot() []byte {
	var snapshot []byte
	s.use(func(sc *C.fairgate_scheduler) error {
		text := C.fairgate_snapshot_json(sc)
		defer C.fairgate_free(text)
		snapshot = []byte(C.GoString(text))
		return nil
	})
	return snapshot
}

// SnapshotHeaviest is Snapshot with the n keys of the highest accumulated cost listed in it
// (O(keys)); nil after Close.
func (s *Scheduler) SnapshotHeaviest(n int) []byte {
	if n < 0 {
		n = 0
	}
	var snapshot []byte
	s.use(func(sc *C.fairgate_scheduler) error {
		text := C.fairgate_snapshot_json_heaviest(sc, C.size_t(n))
		defer C.fairgate_free(text)
		snapshot = []byte(C.GoString(text))
		return nil
	})
	return snapshot
}

// MaxWaitToCeiling says, with Options.Aging, how long a pending job of typ takes at most to
// reach the aging ceiling (0 when it cannot rise); an error with code NotFound for an unknown
// type.
func (s *Scheduler) MaxWaitToCeiling(typ string) (time.Duration, error) {
	var wait C.double
	err := s.withName(typ, func(sc *C.fairgate_scheduler, name *C.char,
		message **C.char) C.fairgate_code {
		return C.fairgate_max_wait_to_ceiling(sc, name, &wait, message)
	})
	return seconds(float64(wait)), err
}

// Metrics returns the scheduler's metrics in Prometheus' text format; "" after Close.
func (s *Scheduler) Metrics() string {
	var metrics string
	s.use(func(sc *C.fairgate_scheduler) error {
		text := C.fairgate_metrics_text(sc)
		defer C.fairgate_free(text)
		metrics = C.GoString(text)
		return nil
	})
	return metrics
}

// ErrClosed reports whether err says the scheduler was closing (code Canceled or Unavailable).
func ErrClosed(err error) bool {
	var e *Error
	return errors.As(err, &e) && (e.Code == Canceled || e.Code == Unavailable)
}

package fairgate

/*
#include <stdint.h>
#include <stdlib.h>
#include "fairgate/c.h"

extern void fairgateGoEvent(void* user, fairgate_event* event);
extern fairgate_code fairgateGoReading(void* user, double* value);
extern void fairgateGoWarn(void* user, char* warning);
extern char* fairgateGoKeyGroup(void* user, char* fairness_key);
extern void fairgateGoEvidence(void* user, char* line);

// The options' callbacks as this package's, each with `user` (a cgo.Handle of its hooks) when
// asked for.
static void fairgate_go_hooks(fairgate_options* o, uintptr_t user, int events, int warn,
                              int groups, int evidence) {
  if (evidence) {
    o->on_evidence = (fairgate_evidence_fn)fairgateGoEvidence;
    o->on_evidence_user = (void*)user;
  }
  if (events) {
    o->on_event = (fairgate_event_fn)fairgateGoEvent;
    o->on_event_user = (void*)user;
  }
  if (warn) {
    o->warn = (fairgate_warn_fn)fairgateGoWarn;
    o->warn_user = (void*)user;
  }
  if (groups) {
    o->key_group = (fairgate_key_group_fn)fairgateGoKeyGroup;
    o->key_group_user = (void*)user;
  }
}

// A reading (AdaptiveCapacity.StalledSeconds, PressureSignal.Read) as this package's function
// with `user`, a cgo.Handle.
static void fairgate_go_reader(fairgate_reading_fn* fn, void** user, uintptr_t handle) {
  *fn = (fairgate_reading_fn)fairgateGoReading;
  *user = (void*)handle;
}
*/
import "C"

import (
	"fmt"
	"math"
	"runtime/cgo"
	"time"
	"unsafe"
)

// A Switch is an option that is on or off, or left to the preset (Options.Seed chooses it).
type Switch int

const (
	Preset Switch = iota // the preset's: the default rule's, or the original rule's with Seed
	Off
	On
)

// Aging raises a pending job's tier with its wait (fairgate/rule_options.h, AgingConfig): after
// Grace, and then after each Interval, one registered tier up, to the highest tier whose
// priority is at most Ceiling.
type Aging struct {
	Grace    time.Duration
	Interval time.Duration // > 0
	Ceiling  int           // a priority, >= 1
}

// AdaptiveCapacity lets the global cap follow CPU pressure, and other signals, between Min and
// MaxConcurrency (fairgate/adaptive_capacity.h). Its fields are taken as they are (a zero is
// refused where the C++ refuses it): start from NewAdaptiveCapacity.
type AdaptiveCapacity struct {
	Min      int
	Interval time.Duration
	High     float64 // pressure above which the cap shrinks
	Low      float64 // pressure below which, with work waiting, it grows
	Decrease float64 // the factor of a shrink
	// StalledSeconds, when set, is read instead of the kernel's CPU pressure: the cumulative
	// seconds some task stalled, a counter. Called on the C library's timer thread: quick.
	StalledSeconds func() (float64, error)
	Signals        []PressureSignal
}

// NewAdaptiveCapacity returns adaptive capacity down to min with fairgate's other defaults.
func NewAdaptiveCapacity(min int) AdaptiveCapacity {
	return AdaptiveCapacity{Min: min, Interval: time.Second, High: 0.2, Low: 0.05, Decrease: 0.75}
}

// PressureSource is what a PressureSignal reads.
type PressureSource int

const (
	MemorySome PressureSource = iota
	MemoryFull
	IOSome
	IOFull
	MemoryUse // the cgroup's memory in use over its limit: a level, not a share of time
)

// A PressureSignal is followed by adaptive capacity besides CPU pressure.
type PressureSignal struct {
	Source    PressureSource
	High, Low float64
	// Read, when set, is read instead of the kernel: for the stall sources cumulative seconds
	// stalled, for MemoryUse the share of the limit in use. On the timer thread: quick.
	Read func() (float64, error)
}

// EventKind says what an Event is.
type EventKind int

const (
	EventAdmit EventKind = iota
	EventComplete
	EventCancel
	EventReject
	EventPromote // aged one tier up
	EventEvict   // a key forgotten by the TTL sweep: only Key is set
	EventExpire  // its type's max queue wait passed while it was pending
	EventShed
)

var eventKindNames = [...]string{"admit", "complete", "cancel", "reject", "promote", "evict",
	"expire", "shed"}

func (k EventKind) String() string {
	if k >= 0 && int(k) < len(eventKindNames) {
		return eventKindNames[k]
	}
	return "unknown"
}

// An Event is one decision of the scheduler (fairgate/observer.h, JobEvent).
type Event struct {
	Kind          EventKind
	Time          float64 // the scheduler's clock, seconds
	Type, ID, Key string
	Tier          int // its type's priority
	EffectiveTier int // the tier it orders in (above Tier once it aged)
	Charge        float64
	// AccumulatedCost is the key's after the event.
	AccumulatedCost float64
	Wait            time.Duration // since it was enqueued (admit, cancel, expire, shed, promote)
	RunTime         time.Duration // complete: how long it ran
	// Err is nil, or (complete) the job's error, (cancel, expire, reject, shed) why.
	Err    error
	Worker string // with workers: the one it runs on
}

// hooks are a scheduler's Go callbacks (Options.OnEvent, Warn, KeyGroup, OnEvidence), reached
// from C through one cgo.Handle.
type hooks struct {
	onEvent    func(Event)
	warn       func(string)
	keyGroup   func(key string) string
	onEvidence func(line string)
}

// presetSwitch sets *to, a field of fairgate_options, to s as -1, 0 or 1.
func presetSwitch(s Switch, field string, to *C.int) error {
	switch s {
	case Preset:
		*to = -1
	case Off:
		*to = 0
	case On:
		*to = 1
	default:
		return &Error{Code: InvalidArgument,
			Message: fmt.Sprintf("Options.%s must be Preset, Off or On, got %d", field, int(s))}
	}
	return nil
}

// reading is a Go reading function as the C interface calls it (fairgateGoReading).
type reading func() (float64, error)

// setReader sets *fn and *user to call read (nothing for nil), its handle kept in handles.
func setReader(read func() (float64, error), fn *C.fairgate_reading_fn, user *unsafe.Pointer,
	handles *[]cgo.Handle) {
	if read == nil {
		return
	}
	h := cgo.NewHandle(reading(read))
	*handles = append(*handles, h)
	C.fairgate_go_reader(fn, user, C.uintptr_t(h))
}

// setAdaptive fills c's adaptive capacity from a (its signals in C memory from mem).
func setAdaptive(c *C.fairgate_options, a *AdaptiveCapacity, mem *cMemory,
	handles *[]cgo.Handle) {
	if a == nil {
		return
	}
	c.adaptive_capacity_min = C.int(a.Min)
	c.adaptive_capacity_interval_seconds = C.double(a.Interval.Seconds())
	c.adaptive_capacity_high = C.double(a.High)
	c.adaptive_capacity_low = C.double(a.Low)
	c.adaptive_capacity_decrease = C.double(a.Decrease)
	setReader(a.StalledSeconds, &c.adaptive_stalled_seconds, &c.adaptive_stalled_seconds_user,
		handles)
	if len(a.Signals) == 0 {
		return
	}
	array := (*C.fairgate_pressure_signal)(C.calloc(C.size_t(len(a.Signals)),
		C.size_t(unsafe.Sizeof(C.fairgate_pressure_signal{}))))
	*mem = append(*mem, unsafe.Pointer(array))
	for i, signal := range a.Signals {
		to := &unsafe.Slice(array, len(a.Signals))[i]
		to.source = C.fairgate_pressure_source(signal.Source)
		to.high = C.double(signal.High)
		to.low = C.double(signal.Low)
		setReader(signal.Read, &to.read, &to.read_user, handles)
	}
	c.adaptive_signals = array
	c.adaptive_signal_count = C.size_t(len(a.Signals))
}

// orDefault is v as C's, or def when v is 0.
func orDefault[T ~int | ~int64 | ~float64, C ~int32 | ~uint64 | ~float64](v T, def C) C {
	if v == 0 {
		return def
	}
	return C(v)
}

// setRest fills the fields of c beyond the basic ones from options (arrays in C memory from
// mem), and the callbacks, whose handles (to delete once the scheduler is gone) it returns.
func setRest(c *C.fairgate_options, options Options, mem *cMemory) ([]cgo.Handle, error) {
	var handles []cgo.Handle
	if err := presetSwitch(options.Reconcile, "Reconcile", &c.reconcile); err != nil {
		return nil, err
	}
	if err := presetSwitch(options.Lending, "Lending", &c.lending); err != nil {
		return nil, err
	}
	for _, size := range []struct {
		field string
		v     int
	}{{"SweepBatch", options.SweepBatch}, {"FiberStackBytes", options.FiberStackBytes},
		{"ObserverQueueLimit", options.ObserverQueueLimit}} {
		if size.v < 0 { // a size in C: refused rather than wrapped around
			return nil, &Error{Code: InvalidArgument,
				Message: fmt.Sprintf("Options.%s must be >= 0, got %d", size.field, size.v)}
		}
	}
	c.lending_kept_back = orDefault(options.LendingKeptBack, c.lending_kept_back)
	c.latency_capacity_interval_seconds = orDefault(options.LatencyCapacityInterval.Seconds(),
		c.latency_capacity_interval_seconds)
	c.latency_capacity_remeasure_every = orDefault(options.LatencyCapacityRemeasureEvery,
		c.latency_capacity_remeasure_every)
	switch {
	case options.SoleWorkerReserveAfter < 0:
		c.sole_worker_reserve_after_seconds = C.double(math.Inf(1))
	case options.SoleWorkerReserveAfter > 0:
		c.sole_worker_reserve_after_seconds = C.double(options.SoleWorkerReserveAfter.Seconds())
	}
	c.sweep_batch = orDefault(options.SweepBatch, c.sweep_batch)
	c.fiber_stack_bytes = orDefault(options.FiberStackBytes, c.fiber_stack_bytes)
	c.sweep_interval_seconds = orDefault(options.SweepInterval.Seconds(), c.sweep_interval_seconds)
	c.observer_queue_limit = orDefault(options.ObserverQueueLimit, c.observer_queue_limit)
	c.token_lease_seconds = orDefault(options.Fleet.TokenLease.Seconds(), c.token_lease_seconds)
	setAdaptive(c, options.AdaptiveCapacity, mem, &handles)
	if a := options.Aging; a != nil {
		c.aging = 1
		c.aging_grace_seconds = C.double(a.Grace.Seconds())
		c.aging_interval_seconds = C.double(a.Interval.Seconds())
		c.aging_ceiling = C.int(a.Ceiling)
	}
	if options.ShortestFirst {
		c.shortest_first = 1
	}
	c.shortest_first_aging = C.double(options.ShortestFirstAging)
	c.default_key_limits = keyLimitsOf(options.DefaultKeyLimits)
	c.default_group_max_running = C.int(options.DefaultGroupLimits.MaxRunning)
	c.default_group_min_running = C.int(options.DefaultGroupLimits.MinRunning)
	if options.EvidencePath != "" {
		c.evidence_path = mem.string(options.EvidencePath)
	}
	if options.OnEvent == nil && options.Warn == nil && options.KeyGroup == nil &&
		options.OnEvidence == nil {
		return handles, nil
	}
	h := cgo.NewHandle(&hooks{onEvent: options.OnEvent, warn: options.Warn,
		keyGroup: options.KeyGroup, onEvidence: options.OnEvidence})
	flag := func(set bool) C.int {
		if set {
			return 1
		}
		return 0
	}
	C.fairgate_go_hooks(c, C.uintptr_t(h), flag(options.OnEvent != nil), flag(options.Warn != nil),
		flag(options.KeyGroup != nil), flag(options.OnEvidence != nil))
	return append(handles, h), nil
}

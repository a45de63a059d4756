package fairgate

/*
#include <stdint.h>
#include <stdlib.h>
#include "fairgate/c.h"

extern void fairgateGoEvent(void* user, fairgate_event* event);
extern void fairgateGoWarn(void* user, char* warning);
extern char* fairgateGoKeyGroup(void* user, char* fairness_key);

// The options' callbacks as this package's, each with `user` (a cgo.Handle of its hooks) when
// asked for.
static void fairgate_go_hooks(fairgate_options* o, uintptr_t user, int events, int warn,
                              int groups) {
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
*/
import "C"

import (
	"fmt"
	"runtime/cgo"
	"time"
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

// hooks are a scheduler's Go callbacks (Options.OnEvent, Warn, KeyGroup), reached from C through
// one cgo.Handle.
type hooks struct {
	onEvent  func(Event)
	warn     func(string)
	keyGroup func(key string) string
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

// setRest fills the fields of c beyond the basic ones from options, and the callbacks, whose
// handle (to delete once the scheduler is gone; 0 when there are none) it returns.
func setRest(c *C.fairgate_options, options Options) (cgo.Handle, error) {
	if err := presetSwitch(options.Reconcile, "Reconcile", &c.reconcile); err != nil {
		return 0, err
	}
	if err := presetSwitch(options.Lending, "Lending", &c.lending); err != nil {
		return 0, err
	}
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
	if options.OnEvent == nil && options.Warn == nil && options.KeyGroup == nil {
		return 0, nil
	}
	h := cgo.NewHandle(&hooks{onEvent: options.OnEvent, warn: options.Warn,
		keyGroup: options.KeyGroup})
	flag := func(set bool) C.int {
		if set {
			return 1
		}
		return 0
	}
	C.fairgate_go_hooks(c, C.uintptr_t(h), flag(options.OnEvent != nil), flag(options.Warn != nil),
		flag(options.KeyGroup != nil))
	return h, nil
}

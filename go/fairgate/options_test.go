package fairgate

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// quietly silences a scheduler's warnings in a test that does not read them.
func quietly(options Options) Options {
	if options.Warn == nil {
		options.Warn = func(string) {}
	}
	return options
}

// The key's cost after one job of DefaultCost 5 that ran for almost no time: the estimate
// unless reconciled.
func costAfterOneJob(t *testing.T, options Options) float64 {
	t.Helper()
	s := newScheduler(t, quietly(options))
	register(t, s, "fetch", TypeConfig{DefaultCost: 5})
	job := Job{Type: "fetch", ID: "git.git", Key: "client"}
	if err := s.RunSync(context.Background(), job, func(context.Context) error { return nil }); err != nil {
		t.Fatalf("RunSync: %v", err)
	}
	cost, ok := s.AccumulatedCost("client")
	if !ok {
		t.Fatal("the key is not tracked")
	}
	return cost
}

func TestSeedModeChargesTheEstimateUnlessAskedToReconcile(t *testing.T) {
	for _, c := range []struct {
		options    Options
		reconciled bool
	}{
		{Options{Seed: true}, false},
		{Options{Seed: true, Reconcile: On}, true},
		{Options{}, true},
		{Options{Reconcile: Off}, false},
	} {
		cost := costAfterOneJob(t, c.options)
		if reconciled := cost < 5; reconciled != c.reconciled || cost > 5 {
			t.Errorf("Seed %v, Reconcile %v: cost %v, want reconciled %v", c.options.Seed,
				c.options.Reconcile, cost, c.reconciled)
		}
	}
}

func TestLendingFollowsThePresetOrTheSwitch(t *testing.T) {
	for _, c := range []struct {
		options Options
		running int
	}{
		{Options{}, 3}, // 4 slots, a quarter kept back from borrowers
		{Options{Lending: Off}, 1},
		{Options{Seed: true}, 1},
		{Options{Seed: true, Lending: On}, 3},
	} {
		c.options.MaxConcurrency = 4
		s := newScheduler(t, quietly(c.options))
		register(t, s, "bulk", TypeConfig{Priority: 1})
		var wg sync.WaitGroup
		permits := make(chan *Permit, 4)
		for i := 0; i < 4; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				p, err := s.Acquire(context.Background(), Job{Type: "bulk", ID: "r", Key: string(rune('a' + i))})
				if err == nil {
					permits <- p
				}
			}(i)
		}
		eventually(t, "every job admitted or queued", func() bool {
			st := state(t, s)
			return st.Running+st.Pending == 4
		})
		if got := state(t, s).Running; got != c.running {
			t.Errorf("Seed %v, Lending %v: %d running at once, want %d", c.options.Seed,
				c.options.Lending, got, c.running)
		}
		for i := 0; i < 4; i++ {
			(<-permits).Release(nil)
		}
		wg.Wait()
	}
}

// eventLog keeps the events an Options.OnEvent is given (on the C library's delivery thread).
type eventLog struct {
	mu     sync.Mutex
	events []Event
}

func (l *eventLog) record(e Event) {
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
}

// all is a copy of the events so far.
func (l *eventLog) all() []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Event(nil), l.events...)
}

func TestOnEventReportsEachDecisionInOrder(t *testing.T) {
	var log eventLog
	s := newScheduler(t, quietly(Options{MaxConcurrency: 1, OnEvent: log.record}))
	register(t, s, "push", TypeConfig{DefaultCost: 2})
	p, err := s.Acquire(context.Background(), Job{Type: "push", ID: "a.git", Key: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	waited := make(chan error, 1)
	go func() {
		_, err := s.Acquire(ctx, Job{Type: "push", ID: "b.git", Key: "bob"})
		waited <- err
	}()
	eventually(t, "bob queued", func() bool { return state(t, s).Pending == 1 })
	cancel()
	if err := <-waited; err == nil {
		t.Fatal("a cancelled Acquire returned a permit")
	}
	p.Release(&Error{Code: Aborted, Message: "the push was refused"})
	eventually(t, "three events", func() bool { return len(log.all()) >= 3 })
	events := log.all()
	if len(events) != 3 {
		t.Fatalf("%d events, want 3: %+v", len(events), events)
	}
	if e := events[0]; e.Kind != EventAdmit || e.Key != "alice" || e.Type != "push" ||
		e.ID != "a.git" || e.Charge != 2 || e.Err != nil {
		t.Errorf("first event %+v, want alice's admission charged 2", e)
	}
	if e := events[1]; e.Kind != EventCancel || e.Key != "bob" || CodeOf(e.Err) != Canceled {
		t.Errorf("second event %+v, want bob's cancellation", e)
	}
	if e := events[2]; e.Kind != EventComplete || CodeOf(e.Err) != Aborted ||
		!strings.Contains(e.Err.Error(), "the push was refused") || e.Kind.String() != "complete" {
		t.Errorf("third event %+v, want alice's completion with her error", e)
	}
}

func TestWarningsGoToWarn(t *testing.T) {
	var warnings []string
	s := newScheduler(t, Options{Lending: Off, Warn: func(w string) { warnings = append(warnings, w) }})
	register(t, s, "clone", TypeConfig{Priority: 1})
	if len(warnings) != 1 || !strings.Contains(warnings[0], "clone") {
		t.Errorf("warnings %q, want one about clone", warnings)
	}
}

func TestKeyGroupAndDefaultLimits(t *testing.T) {
	var calls sync.Map
	s := newScheduler(t, quietly(Options{
		KeyGroup: func(key string) string {
			calls.Store(key, true)
			if strings.HasPrefix(key, "z") {
				return ""
			}
			return "tenant-" + key[:1]
		},
		DefaultGroupLimits: GroupLimits{MaxRunning: 1},
		DefaultKeyLimits:   KeyLimits{MaxRunning: 1},
	}))
	register(t, s, "fetch", TypeConfig{Priority: 8})
	acquire := func(id, key string) *Permit {
		t.Helper()
		p, err := s.Acquire(context.Background(), Job{Type: "fetch", ID: id, Key: key})
		if err != nil {
			t.Fatalf("Acquire(%s): %v", key, err)
		}
		return p
	}
	a1 := acquire("1", "a1")
	queued := make(chan *Permit, 2)
	go func() { queued <- acquire("2", "a2") }() // tenant-a runs its one already
	eventually(t, "a2 queued behind its group", func() bool { return state(t, s).Pending == 1 })
	b1 := acquire("3", "b1")
	z1 := acquire("4", "z1")
	go func() { queued <- acquire("5", "z1") }() // z1 runs its one already
	eventually(t, "z1's second queued", func() bool { return state(t, s).Pending == 2 })
	z2 := acquire("6", "z2")
	if err := s.Charge("a1", 3); err != nil {
		t.Fatal(err)
	}
	if cost, ok := s.GroupAccumulatedCost("tenant-a"); !ok || cost < 3 {
		t.Errorf("tenant-a's cost %v (tracked %v), want at least 3", cost, ok)
	}
	if _, ok := s.GroupAccumulatedCost("tenant-z"); ok {
		t.Error("a key the rule gave no group is in tenant-z")
	}
	for _, key := range []string{"a1", "a2", "b1", "z1", "z2"} {
		if _, ok := calls.Load(key); !ok {
			t.Errorf("KeyGroup was not asked for %s", key)
		}
	}
	a1.Release(nil)
	z1.Release(nil)
	(<-queued).Release(nil)
	(<-queued).Release(nil)
	b1.Release(nil)
	z2.Release(nil)
}

func TestAgingBoundAndHeaviestKeys(t *testing.T) {
	s := newScheduler(t, quietly(Options{Aging: &Aging{Grace: 2 * time.Second,
		Interval: 3 * time.Second, Ceiling: 4}}))
	register(t, s, "gc", TypeConfig{Priority: 1})
	register(t, s, "fetch", TypeConfig{Priority: 4})
	if wait, err := s.MaxWaitToCeiling("gc"); err != nil || wait != 5*time.Second {
		t.Errorf("MaxWaitToCeiling(gc) = %v, %v; want 5s (grace and one step)", wait, err)
	}
	if wait, err := s.MaxWaitToCeiling("fetch"); err != nil || wait != 0 {
		t.Errorf("MaxWaitToCeiling(fetch) = %v, %v; want 0", wait, err)
	}
	if _, err := s.MaxWaitToCeiling("repack"); CodeOf(err) != NotFound {
		t.Errorf("MaxWaitToCeiling(repack): %v, want NotFound", err)
	}
	for key, cost := range map[string]float64{"heavy": 5, "middle": 3, "light": 1} {
		if err := s.Charge(key, cost); err != nil {
			t.Fatal(err)
		}
	}
	snapshot := string(s.SnapshotHeaviest(2))
	if !strings.Contains(snapshot, `"key":"heavy"`) || !strings.Contains(snapshot, `"key":"middle"`) ||
		strings.Contains(snapshot, "light") {
		t.Errorf("SnapshotHeaviest(2) = %s, want heavy and middle only", snapshot)
	}
	if plain := string(s.Snapshot()); !strings.Contains(plain, `"heaviest_keys":[]`) {
		t.Errorf("Snapshot() lists keys: %s", plain)
	}
}

func TestBadRuleOptionsAreNamed(t *testing.T) {
	for name, options := range map[string]Options{
		"aging":                {Aging: &Aging{Ceiling: 2}},
		"shortest_first_aging": {ShortestFirstAging: -1},
		"default_key_limits":   {DefaultKeyLimits: KeyLimits{MinRunning: -1}},
		"default_group_limits": {DefaultGroupLimits: GroupLimits{MinRunning: -1}},
		"fiber_stack_bytes":    {FiberStackBytes: 1024},
		"FiberStackBytes":      {FiberStackBytes: -1},
		"SweepBatch":           {SweepBatch: -1},
		"kept_back":            {LendingKeptBack: 1.5},
		"remeasure_every":      {LatencyCapacityMin: 1, LatencyCapacityRemeasureEvery: 1},
		"decrease":             {AdaptiveCapacity: &AdaptiveCapacity{Min: 1, Interval: time.Second, High: 0.2, Decrease: 2}},
		"Reconcile":            {Reconcile: Switch(7)},
		"Lending":              {Lending: Switch(-1)},
	} {
		_, err := New(quietly(options))
		var e *Error
		if !errors.As(err, &e) || e.Code != InvalidArgument || !strings.Contains(e.Message, name) {
			t.Errorf("%s: %v, want InvalidArgument naming it", name, err)
		}
	}
}

func TestAdaptiveCapacityFollowsReadingsFromGo(t *testing.T) {
	var mu sync.Mutex
	cpuReads, memoryReads := 0, 0
	capacity := NewAdaptiveCapacity(2)
	capacity.Interval = 10 * time.Millisecond
	capacity.StalledSeconds = func() (float64, error) {
		mu.Lock()
		cpuReads++
		mu.Unlock()
		return 0, nil // CPU never stalls
	}
	capacity.Signals = []PressureSignal{{Source: MemoryUse, High: 0.5, Low: 0.1,
		Read: func() (float64, error) {
			mu.Lock()
			memoryReads++
			mu.Unlock()
			return 0.9, nil // memory in use stays above its high
		}}}
	s := newScheduler(t, quietly(Options{MaxConcurrency: 8, AdaptiveCapacity: &capacity}))
	var snap struct {
		Capacity int `json:"capacity"`
	}
	eventually(t, "the cap down to its min", func() bool {
		if err := json.Unmarshal(s.Snapshot(), &snap); err != nil {
			t.Fatal(err)
		}
		return snap.Capacity == 2
	})
	mu.Lock()
	defer mu.Unlock()
	if cpuReads < 4 || memoryReads < 4 { // 8 -> 6 -> 4 -> 3 -> 2
		t.Errorf("%d CPU and %d memory readings for four shrinks", cpuReads, memoryReads)
	}
}

func TestEvidenceGoesToOnEvidenceOrAFile(t *testing.T) {
	lines := make(chan string, 4)
	s := newScheduler(t, quietly(Options{OnEvidence: func(line string) { lines <- line }}))
	register(t, s, "fetch", TypeConfig{Priority: 4})
	run := func(s *Scheduler, key string) {
		t.Helper()
		job := Job{Type: "fetch", ID: "git.git", Key: key}
		if err := s.RunSync(context.Background(), job, func(context.Context) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	run(s, "alice")
	var record struct {
		Key            string `json:"key"`
		EstimateSource string `json:"estimate_source"`
	}
	if err := json.Unmarshal([]byte(<-lines), &record); err != nil || record.Key != "alice" ||
		record.EstimateSource != "default" {
		t.Errorf("evidence %+v (%v), want alice's admission at the default estimate", record, err)
	}

	path := t.TempDir() + "/evidence.jsonl"
	f, err := New(quietly(Options{EvidencePath: path}))
	if err != nil {
		t.Fatal(err)
	}
	register(t, f, "fetch", TypeConfig{Priority: 4})
	run(f, "bob")
	f.Close() // every record written before it returns
	data, err := os.ReadFile(path)
	if err != nil || !strings.Contains(string(data), `"key":"bob"`) {
		t.Errorf("the evidence file holds %q (%v), want bob's admission", data, err)
	}
	if _, err := New(quietly(Options{OnEvidence: func(string) {}, EvidencePath: path})); CodeOf(err) != InvalidArgument {
		t.Errorf("both evidence sinks: %v, want InvalidArgument", err)
	}
}

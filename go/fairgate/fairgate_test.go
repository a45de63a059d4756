package fairgate

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Waits are for the condition checked, bounded by this, never for a time.
const bound = 20 * time.Second

func eventually(t *testing.T, what string, condition func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !condition() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, bound)
		}
		time.Sleep(time.Millisecond)
	}
}

func newScheduler(t *testing.T, options Options) *Scheduler {
	t.Helper()
	s, err := New(options)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func register(t *testing.T, s *Scheduler, name string, config TypeConfig) {
	t.Helper()
	if err := s.RegisterType(name, config); err != nil {
		t.Fatalf("RegisterType(%q): %v", name, err)
	}
}

type snapshot struct {
	Running int `json:"running"`
	Pending int `json:"pending"`
}

func state(t *testing.T, s *Scheduler) snapshot {
	t.Helper()
	var snap snapshot
	if err := json.Unmarshal(s.Snapshot(), &snap); err != nil {
		t.Fatalf("the snapshot is not JSON: %v", err)
	}
	return snap
}

func TestErrorsAreValuesNamingWhatWasWrong(t *testing.T) {
	if _, err := New(Options{MaxConcurrency: -1}); CodeOf(err) != InvalidArgument ||
		!strings.Contains(err.Error(), "max_concurrency") {
		t.Errorf("New with a negative cap: %v", err)
	}
	s := newScheduler(t, Options{MaxConcurrency: 2})
	err := s.RegisterType("clone", TypeConfig{Slots: 3, Priority: 2})
	var e *Error
	if !errors.As(err, &e) || e.Code != InvalidArgument || !strings.Contains(e.Message, "slots") {
		t.Errorf("a type wider than the cap: %v", err)
	}
	if err := s.RegisterType("shed", TypeConfig{ShedTarget: time.Second, ShedInterval: -time.Second}); CodeOf(err) != InvalidArgument ||
		!strings.Contains(err.Error(), "shedding.interval") {
		t.Errorf("a negative shedding interval: %v", err)
	}
	register(t, s, "shed", TypeConfig{ShedTarget: 2 * time.Second})
	register(t, s, "clone", TypeConfig{Priority: 2})
	if err := s.RegisterType("clone", TypeConfig{Priority: 1}); CodeOf(err) != AlreadyExists {
		t.Errorf("a second config of a type: %v", err)
	}
	if _, err := s.Acquire(context.Background(), Job{Type: "nope", ID: "x"}); CodeOf(err) != NotFound {
		t.Errorf("an unknown type: %v", err)
	}
	if err := s.SetKeyWeight("k", 0); CodeOf(err) != InvalidArgument {
		t.Errorf("a zero weight: %v", err)
	}
	for _, cost := range []float64{-1, math.Inf(-1), math.NaN(), math.Inf(1)} {
		job := Job{Type: "clone", ID: "x", Key: "k"}.WithCost(cost)
		if _, err := s.Acquire(context.Background(), job); CodeOf(err) != InvalidArgument ||
			!strings.Contains(err.Error(), "cost must be finite and >= 0") {
			t.Errorf("Acquire with a cost of %v: %v", cost, err)
		}
		err := s.Submit(job, func(context.Context) error { return nil }, nil)
		if CodeOf(err) != InvalidArgument {
			t.Errorf("Submit with a cost of %v: %v", cost, err)
		}
	}
	if CodeOf(nil) != OK || CodeOf(errors.New("other")) != Unknown {
		t.Error("CodeOf of nil and of a foreign error")
	}
}

// cachew's concurrency behaviour: many callers at once never run more than the cap allows, and
// every one of them runs.
// A refusal says when to try again: a call of a type whose one token is used, a call while the
// type's queue stands over its shedding target (shed at once), and a waiting call taken from that
// queue when the slot frees (shed from the queue).
func TestARefusalSaysWhenToRetryAndWhetherItWasShed(t *testing.T) {
	s := newScheduler(t, Options{MaxConcurrency: 1})
	register(t, s, "fetch", TypeConfig{RatePerSecond: 0.001, RateBurst: 1, RefuseWithoutToken: true})
	register(t, s, "build", TypeConfig{ShedTarget: time.Millisecond, ShedInterval: time.Millisecond})
	ctx := context.Background()
	held, err := s.Acquire(ctx, Job{Type: "fetch", ID: "linux", Key: "alice"})
	if err != nil {
		t.Fatalf("the first fetch: %v", err)
	}
	err = s.RunSync(ctx, Job{Type: "fetch", ID: "git", Key: "alice"},
		func(context.Context) error { return nil })
	if after, ok := RetryAfter(err); CodeOf(err) != ResourceExhausted || !ok || after <= 0 ||
		after > 1000*time.Second || WasShed(err) {
		t.Errorf("a fetch without a token: %v (retry after %v, %v)", err, after, ok)
	}
	if _, ok := RetryAfter(errors.New("other")); ok || WasShed(nil) {
		t.Errorf("an error not fairgate's says when to retry")
	}
	// The slot held: two builds wait until the queue stands (the second may come when it already
	// does: it is shed at once then).
	waiting := make(chan error, 2)
	for _, id := range []string{"a", "b"} {
		go func(id string) {
			waiting <- s.RunSync(ctx, Job{Type: "build", ID: id, Key: "alice"},
				func(context.Context) error { return nil })
		}(id)
	}
	eventually(t, "the builds' queue stands", func() bool {
		return strings.Contains(string(s.Snapshot()), `"standing":true`)
	})
	err = s.RunSync(ctx, Job{Type: "build", ID: "c", Key: "alice"},
		func(context.Context) error { return nil })
	if after, ok := RetryAfter(err); !WasShed(err) || !ok || after != time.Millisecond {
		t.Errorf("a build while the queue stands: %v (retry after %v)", err, after)
	}
	held.Release(nil)
	first, second := <-waiting, <-waiting
	if (first == nil) == (second == nil) || !(WasShed(first) || WasShed(second)) {
		t.Errorf("of the two waiting builds one runs and one is shed: %v, %v", first, second)
	}
}

func TestRunSyncNeverRunsMoreThanTheCap(t *testing.T) {
	s := newScheduler(t, Options{MaxConcurrency: 4})
	register(t, s, "clone", TypeConfig{Priority: 4, MaxConcurrency: 3})
	var running, most, ran int64
	var wg sync.WaitGroup
	for i := 0; i < 200; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			err := s.RunSync(context.Background(),
				Job{Type: "clone", ID: "repo" + strconv.Itoa(i%7), Key: "c" + strconv.Itoa(i%5)},
				func(context.Context) error {
					now := atomic.AddInt64(&running, 1)
					for {
						m := atomic.LoadInt64(&most)
						if now <= m || atomic.CompareAndSwapInt64(&most, m, now) {
							break
						}
					}
					runtime.Gosched()
					atomic.AddInt64(&running, -1)
					atomic.AddInt64(&ran, 1)
					return nil
				})
			if err != nil {
				t.Errorf("RunSync: %v", err)
			}
		}(i)
	}
	wg.Wait()
	if most > 3 {
		t.Errorf("%d ran at once; the type's cap is 3", most)
	}
	if ran != 200 {
		t.Errorf("%d of 200 ran", ran)
	}
}

// cachew's conflict behaviour: jobs of one conflict group on the same id never run together;
// on different ids they may.
func TestConflictingJobsOnOneRepositoryNeverRunTogether(t *testing.T) {
	s := newScheduler(t, Options{MaxConcurrency: 4})
	register(t, s, "fetch", TypeConfig{Priority: 4, ConflictGroup: "repo"})
	register(t, s, "repack", TypeConfig{Priority: 4, ConflictGroup: "repo"})
	var inRepo [2]int64
	var overlaps int64
	var wg sync.WaitGroup
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			repo := i % 2
			kind := []string{"fetch", "repack"}[i%3%2]
			err := s.RunSync(context.Background(), Job{Type: kind, ID: "r" + strconv.Itoa(repo), Key: "k"},
				func(context.Context) error {
					if atomic.AddInt64(&inRepo[repo], 1) > 1 {
						atomic.AddInt64(&overlaps, 1)
					}
					runtime.Gosched()
					atomic.AddInt64(&inRepo[repo], -1)
					return nil
				})
			if err != nil {
				t.Errorf("RunSync: %v", err)
			}
		}(i)
	}
	wg.Wait()
	if overlaps != 0 {
		t.Errorf("%d times two jobs of one repository ran together", overlaps)
	}
}

// cachew's fairness behaviour: a client that has consumed more waits behind one that has not,
// whatever the order they asked in.
func TestTheLighterClientGoesFirst(t *testing.T) {
	s := newScheduler(t, Options{MaxConcurrency: 1})
	register(t, s, "clone", TypeConfig{})
	held, err := s.Acquire(context.Background(), Job{Type: "clone", ID: "a", Key: "first"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Charge("heavy", 100); err != nil {
		t.Fatal(err)
	}
	if cost, ok := s.AccumulatedCost("heavy"); !ok || cost != 100 {
		t.Errorf("heavy's cost: %v %v", cost, ok)
	}
	order := make(chan string, 2)
	go func() {
		s.RunSync(context.Background(), Job{Type: "clone", ID: "b", Key: "heavy"},
			func(context.Context) error { order <- "heavy"; return nil })
	}()
	eventually(t, "heavy queued", func() bool { return state(t, s).Pending == 1 })
	go func() {
		s.RunSync(context.Background(), Job{Type: "clone", ID: "c", Key: "light"},
			func(context.Context) error { order <- "light"; return nil })
	}()
	eventually(t, "light queued", func() bool { return state(t, s).Pending == 2 })
	held.Release(nil)
	if first, second := <-order, <-order; first != "light" || second != "heavy" {
		t.Errorf("ran %s then %s; the lighter client first", first, second)
	}
}

// cachew's cost learning: a job's observed run time becomes what the next of its (type, id) is
// charged, so a long job's client falls behind a short one's.
func TestCostsAreLearnedFromRunTimes(t *testing.T) {
	s := newScheduler(t, Options{MaxConcurrency: 1})
	register(t, s, "clone", TypeConfig{DefaultCost: 0.001})
	// A linux.git clone that holds its slot a while: its client is charged what it took.
	p, err := s.Acquire(context.Background(), Job{Type: "clone", ID: "linux.git", Key: "a"})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // the job's own run time, not a wait for an event
	p.Release(nil)
	cost, _ := s.AccumulatedCost("a")
	if cost < 0.04 {
		t.Errorf("a's cost after a 50 ms run: %v", cost)
	}
	// The next linux.git clone is charged the learned cost at admission, before it runs: the
	// default moved toward what a's took by alpha (0.3).
	p, err = s.Acquire(context.Background(), Job{Type: "clone", ID: "linux.git", Key: "b"})
	if err != nil {
		t.Fatal(err)
	}
	charged, _ := s.AccumulatedCost("b")
	p.Release(nil)
	if want := 0.3*cost + 0.7*0.001; charged < want*0.999999 || charged > want*1.000001 {
		t.Errorf("b was charged %v at admission; want 0.3 x %v + 0.7 x 0.001 = %v", charged, cost,
			want)
	}
}

func TestACancelledContextLeavesTheQueueAndReleaseIsIdempotent(t *testing.T) {
	s := newScheduler(t, Options{MaxConcurrency: 1})
	register(t, s, "clone", TypeConfig{})
	held, err := s.Acquire(context.Background(), Job{Type: "clone", ID: "a", Key: "k"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	result := make(chan error, 1)
	go func() {
		_, err := s.Acquire(ctx, Job{Type: "clone", ID: "b", Key: "k"})
		result <- err
	}()
	eventually(t, "queued", func() bool { return state(t, s).Pending == 1 })
	cancel()
	if err := <-result; !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled Acquire: %v", err)
	}
	if snap := state(t, s); snap.Pending != 0 || snap.Running != 1 {
		t.Errorf("after the cancel: %+v", snap)
	}
	held.Release(nil)
	held.Release(errors.New("twice")) // nothing
	if snap := state(t, s); snap.Running != 0 {
		t.Errorf("after the release: %+v", snap)
	}
}

func TestSubmitRunsOnAGoroutineAndCloseCancelsTheWaiting(t *testing.T) {
	s, err := New(Options{MaxConcurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	register(t, s, "build", TypeConfig{})
	done := make(chan error, 3)
	boom := errors.New("boom")
	if err := s.Submit(Job{Type: "build", ID: "a", Key: "k"},
		func(context.Context) error { return boom }, func(err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, boom) {
		t.Errorf("the job's own error: %v", err)
	}
	// One runs until Close cancels its context; one waits behind it and is told Canceled.
	started := make(chan struct{})
	s.Submit(Job{Type: "build", ID: "b", Key: "k"}, func(ctx context.Context) error {
		close(started)
		<-ctx.Done()
		return ctx.Err()
	}, func(err error) { done <- err })
	<-started
	s.Submit(Job{Type: "build", ID: "c", Key: "k"}, func(context.Context) error { return nil },
		func(err error) { done <- err })
	eventually(t, "c queued", func() bool { return state(t, s).Pending == 1 })
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	results := []error{<-done, <-done}
	var cancelled, closed int
	for _, err := range results {
		if errors.Is(err, context.Canceled) {
			cancelled++
		} else if ErrClosed(err) {
			closed++
		}
	}
	if cancelled != 1 || closed != 1 {
		t.Errorf("the running job and the waiting one: %v", results)
	}
}

// threads counts this process's OS threads.
func threads(t *testing.T) int {
	t.Helper()
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(line, "Threads:") {
			n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "Threads:")))
			return n
		}
	}
	t.Fatal("no Threads line in /proc/self/status")
	return 0
}

// A thousand goroutines waiting in Acquire, or in RunSync of a coalescing type (which the C
// library queues: fairgate_run_async), park in Go: they add a handful of OS threads at most.
func TestAThousandWaitingGoroutinesUseAHandfulOfThreads(t *testing.T) {
	for _, coalescing := range []bool{false, true} {
		t.Run(map[bool]string{false: "Acquire", true: "RunSyncOfACoalescingType"}[coalescing],
			func(t *testing.T) {
				s := newScheduler(t, Options{MaxConcurrency: 1, WorkerThreads: 1})
				register(t, s, "clone", TypeConfig{})
				register(t, s, "mirror", TypeConfig{Coalesce: CoalesceJoin})
				held, err := s.Acquire(context.Background(), Job{Type: "clone", ID: "x", Key: "holder"})
				if err != nil {
					t.Fatal(err)
				}
				before := threads(t)
				var wg sync.WaitGroup
				var ran atomic.Int64
				for i := 0; i < 1000; i++ {
					wg.Add(1)
					go func(i int) {
						defer wg.Done()
						key := "client" + strconv.Itoa(i)
						if coalescing {
							if err := s.RunSync(context.Background(),
								Job{Type: "mirror", ID: strconv.Itoa(i), Key: key},
								func(context.Context) error { ran.Add(1); return nil }); err != nil {
								t.Errorf("RunSync: %v", err)
							}
							return
						}
						p, err := s.Acquire(context.Background(), Job{Type: "clone", ID: "x", Key: key})
						if err != nil {
							t.Errorf("Acquire: %v", err)
							return
						}
						ran.Add(1)
						p.Release(nil)
					}(i)
				}
				eventually(t, "1,000 waiting", func() bool { return state(t, s).Pending == 1000 })
				during := threads(t)
				t.Logf("OS threads: %d before, %d with 1,000 goroutines waiting", before, during)
				// Go starts a thread for a cgo call it finds blocked, so the 1,000 calls that
				// queue add a few under load (up to 11 seen with -race beside busy loops); one
				// thread a waiter, what this guards against, would add about 1,000.
				if during-before > 50 {
					t.Errorf("1,000 waiting goroutines took %d more OS threads", during-before)
				}
				held.Release(nil)
				wg.Wait()
				if ran.Load() != 1000 {
					t.Errorf("%d of 1,000 ran", ran.Load())
				}
			})
	}
}

// A permit dropped without Release is released by its finalizer.
func TestALeakedPermitIsReleasedByItsFinalizer(t *testing.T) {
	s := newScheduler(t, Options{MaxConcurrency: 1})
	register(t, s, "clone", TypeConfig{})
	func() {
		if _, err := s.Acquire(context.Background(), Job{Type: "clone", ID: "x", Key: "k"}); err != nil {
			t.Fatal(err)
		}
	}()
	eventually(t, "the leaked permit released", func() bool {
		runtime.GC()
		return state(t, s).Running == 0
	})
}

// Tenants, pauses and limits reach the core: a farm of keys in one group shares one group's
// place, a paused type admits nothing until resumed, and bad values are refused.
func TestGroupsPausesAndLimits(t *testing.T) {
	s := newScheduler(t, Options{MaxConcurrency: 1})
	register(t, s, "clone", TypeConfig{})
	for _, key := range []string{"farm1", "farm2"} {
		if err := s.SetKeyGroup(key, "farm"); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SetGroupWeight("farm", 0); CodeOf(err) != InvalidArgument {
		t.Errorf("a zero group weight: %v", err)
	}
	if err := s.SetGroupLimits("farm", 1, 2); CodeOf(err) != InvalidArgument {
		t.Errorf("min_running above max_running: %v", err)
	}
	if err := s.SetKeyLimits("dev", KeyLimits{MaxRunning: 1}); err != nil {
		t.Fatal(err)
	}
	// farm1 has run once: the farm's next key, farm2, queues behind the developer although
	// farm2 itself has consumed nothing.
	if err := s.RunSync(context.Background(), Job{Type: "clone", ID: "x", Key: "farm1"}.WithCost(10),
		func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := s.PauseType("clone"); err != nil {
		t.Fatal(err)
	}
	order := make(chan string, 2)
	for _, key := range []string{"farm2", "dev"} {
		key := key
		go s.RunSync(context.Background(), Job{Type: "clone", ID: "x", Key: key},
			func(context.Context) error { order <- key; return nil })
		eventually(t, key+" queued", func() bool { return state(t, s).Pending >= 1 })
	}
	eventually(t, "both queued", func() bool { return state(t, s).Pending == 2 })
	if err := s.ResumeType("clone"); err != nil {
		t.Fatal(err)
	}
	if first, second := <-order, <-order; first != "dev" || second != "farm2" {
		t.Errorf("ran %s then %s; the developer first (the farm has consumed 10)", first, second)
	}
	if err := s.PauseKey("dev"); err != nil {
		t.Error(err)
	}
	if err := s.ResumeKey("dev"); err != nil {
		t.Error(err)
	}
}

// After Close every method fails with Unavailable (ErrClosed), or returns nothing, instead of
// touching the freed C scheduler; and calls racing Close each succeed or fail that way.
func TestMethodsAfterCloseFailWithUnavailable(t *testing.T) {
	s, err := New(Options{MaxConcurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	register(t, s, "clone", TypeConfig{})
	job := Job{Type: "clone", ID: "linux", Key: "alice"}
	noop := func(context.Context) error { return nil }
	// Callers racing Close: each call succeeds, or says the scheduler is closing.
	var callers sync.WaitGroup
	stop := make(chan struct{})
	var unexpected atomic.Value
	for i := 0; i < 4; i++ {
		callers.Add(1)
		go func() {
			defer callers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				for _, err := range []error{s.RunSync(context.Background(), job, noop),
					s.Charge("alice", 1), s.PauseKey("bob")} {
					if err != nil && !ErrClosed(err) {
						unexpected.Store(err)
					}
				}
				s.Snapshot()
				s.AccumulatedCost("alice")
			}
		}()
	}
	eventually(t, "a job run beside the callers", func() bool {
		cost, _ := s.AccumulatedCost("alice")
		return cost > 0
	})
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	close(stop)
	callers.Wait()
	if err, _ := unexpected.Load().(error); err != nil {
		t.Errorf("a call racing Close: %v", err)
	}

	calls := map[string]error{
		"RegisterType":   s.RegisterType("fetch", TypeConfig{}),
		"RunSync":        s.RunSync(context.Background(), job, noop),
		"Submit":         s.Submit(job, noop, func(error) { t.Error("done called for a refusal") }),
		"Charge":         s.Charge("alice", 1),
		"SetKeyWeight":   s.SetKeyWeight("alice", 2),
		"SetKeyLimits":   s.SetKeyLimits("alice", KeyLimits{MaxRunning: 1}),
		"SetKeyGroup":    s.SetKeyGroup("alice", "acme"),
		"SetGroupWeight": s.SetGroupWeight("acme", 2),
		"SetGroupLimits": s.SetGroupLimits("acme", 2, 0),
		"PauseType":      s.PauseType("clone"),
		"ResumeType":     s.ResumeType("clone"),
		"PauseKey":       s.PauseKey("alice"),
		"ResumeKey":      s.ResumeKey("alice"),
		"AddWorker":      s.AddWorker("w", 1, nil, nil),
		"RemoveWorker":   s.RemoveWorker("w"),
	}
	_, err = s.Acquire(context.Background(), job)
	calls["Acquire"] = err
	for name, err := range calls {
		if CodeOf(err) != Unavailable || !ErrClosed(err) ||
			!strings.Contains(err.Error(), "the scheduler is closed") {
			t.Errorf("%s after Close: %v", name, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close again: %v", err)
	}
	if cost, found := s.AccumulatedCost("alice"); found || cost != 0 {
		t.Errorf("AccumulatedCost after Close: %v, %v", cost, found)
	}
	if snap := s.Snapshot(); snap != nil {
		t.Errorf("Snapshot after Close: %s", snap)
	}
	if metrics := s.Metrics(); metrics != "" {
		t.Errorf("Metrics after Close: %q", metrics)
	}
}

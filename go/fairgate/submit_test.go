package fairgate

import (
	"context"
	"errors"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// A job of a coalescing type, submitted from Go, joins as fairgate/scheduler.h says: a plain
// Submit joins a pending job of its id but not a running one; one WithJoinRunning joins the
// running one; a call that joined never runs its function and is told the job's end.
func TestSubmitOfACoalescingTypeJoins(t *testing.T) {
	s := newScheduler(t, quietly(Options{}))
	register(t, s, "mirror", TypeConfig{Priority: 4, MaxConcurrency: 1, Coalesce: CoalesceJoin})
	var mu sync.Mutex
	runs := map[string]int{}
	release := make(chan struct{})
	started := make(chan struct{})
	failed := errors.New("the fetch failed")
	done := map[string]chan error{}
	submit := func(name string, job Job, fn func(context.Context) error) {
		t.Helper()
		done[name] = make(chan error, 1)
		ch := done[name]
		if err := s.Submit(job, func(ctx context.Context) error {
			mu.Lock()
			runs[name]++
			mu.Unlock()
			return fn(ctx)
		}, func(err error) { ch <- err }); err != nil {
			t.Fatalf("Submit %s: %v", name, err)
		}
	}
	job := Job{Type: "mirror", ID: "linux.git", Key: "alice"}
	submit("first", job, func(context.Context) error {
		close(started)
		<-release
		return nil
	})
	<-started
	submit("queued", job, func(context.Context) error { return failed }) // a job of its own
	submit("joins queued", job, func(context.Context) error { return nil })
	submit("joins running", job.WithJoinRunning(), func(context.Context) error { return nil })
	if p := state(t, s).Pending; p != 1 {
		t.Errorf("%d jobs pending, want 1 (the queued one, joined once)", p)
	}
	close(release)
	results := map[string]error{}
	for name, ch := range done {
		results[name] = <-ch
	}
	mu.Lock()
	defer mu.Unlock()
	if runs["first"] != 1 || runs["queued"] != 1 || runs["joins queued"] != 0 || runs["joins running"] != 0 {
		t.Errorf("runs %v: want first and queued once each, the joiners never", runs)
	}
	if results["first"] != nil || results["joins running"] != nil {
		t.Errorf("the first run and its joiner: %v, %v; want both nil", results["first"], results["joins running"])
	}
	if !errors.Is(results["queued"], failed) {
		t.Errorf("the queued job's own error: %v, want the very error its function returned", results["queued"])
	}
	if err := results["joins queued"]; err == nil || !strings.Contains(err.Error(), "the fetch failed") {
		t.Errorf("the queued job's joiner: %v, want its error", err)
	}
}

// A Submit's done on the C path may wait for another job of that path: it is called on neither
// the C library's pool nor the goroutine that hands that job's start to Go (handoff.h), which the
// other job needs. Here the pool has one thread.
func TestASubmitsDoneMayWaitForAnotherJobOfTheCPath(t *testing.T) {
	s := newScheduler(t, quietly(Options{WorkerThreads: 1}))
	register(t, s, "mirror", TypeConfig{Priority: 4, Coalesce: CoalesceJoin})
	second := make(chan error, 1)
	if err := s.Submit(Job{Type: "mirror", ID: "a", Key: "k"},
		func(context.Context) error { return nil },
		func(error) {
			second <- s.RunSync(context.Background(), Job{Type: "mirror", ID: "b", Key: "k"},
				func(context.Context) error { return nil })
		}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-second:
		if err != nil {
			t.Errorf("the RunSync done made: %v", err)
		}
	case <-time.After(bound):
		t.Fatalf("the RunSync done made did not end within %v", bound)
	}
}

// WithRequeueOnWorkerLoss: the run whose worker is removed is run again on another worker, and
// done is told once, of that run; a function run by the C library sees its worker too, and its
// context ends when that worker is removed.
func TestSubmitWithRequeueOnWorkerLossRunsAgain(t *testing.T) {
	s := newScheduler(t, quietly(Options{}))
	register(t, s, "build", TypeConfig{Priority: 4})
	for _, w := range []string{"w1", "w2"} {
		if err := s.AddWorker(w, 1, []string{"build"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var workers []string
	first := make(chan string, 1)
	cancelled := make(chan bool, 1)
	done := make(chan error, 2)
	if err := s.Submit(Job{Type: "build", ID: "a", Key: "k"}.WithRequeueOnWorkerLoss(),
		func(ctx context.Context) error {
			mu.Lock()
			workers = append(workers, WorkerOf(ctx))
			n := len(workers)
			mu.Unlock()
			if n == 1 {
				first <- WorkerOf(ctx)
				cancelled <- endsWithin10s(ctx)
				return errors.New("the worker went away")
			}
			return nil
		}, func(err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveWorker(<-first); err != nil {
		t.Fatal(err)
	}
	if !<-cancelled {
		t.Errorf("the first run's context did not end within 10 s of its worker's removal")
	}
	if err := <-done; err != nil {
		t.Errorf("done: %v, want the second run's nil", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(workers) != 2 || workers[0] == workers[1] || workers[1] == "" {
		t.Errorf("runs on %q, want two runs on the two workers", workers)
	}
	select {
	case err := <-done:
		t.Errorf("done called twice (%v)", err)
	default:
	}
}

// A RunSync of a coalescing type, whose function the C library runs on the caller's thread: its
// context ends when its worker is removed, and the call returns the loss (Unavailable).
func TestRunSyncInCEndsWhenItsWorkerIsRemoved(t *testing.T) {
	s := newScheduler(t, quietly(Options{}))
	register(t, s, "mirror", TypeConfig{Priority: 4, Coalesce: CoalesceJoin})
	if err := s.AddWorker("w", 1, []string{"mirror"}, nil); err != nil {
		t.Fatal(err)
	}
	runs := newRunsOnAWorker(1)
	result := make(chan error, 1)
	go func() {
		result <- s.RunSync(context.Background(), Job{Type: "mirror", ID: "linux.git", Key: "k"},
			runs.fn)
	}()
	runs.removeOnceStarted(t, s, "w", 1)
	if err := <-result; CodeOf(err) != Unavailable {
		t.Errorf("RunSync: %v, want the worker's loss (Unavailable)", err)
	}
}

// RunSync and Submit of a type that does not coalesce run their function under a permit: its
// context ends when the permit's worker is removed, and the job's end is the loss (Unavailable).
func TestPermittedFunctionsEndWhenTheirWorkerIsRemoved(t *testing.T) {
	s := newScheduler(t, quietly(Options{}))
	register(t, s, "build", TypeConfig{Priority: 4})
	if err := s.AddWorker("w", 2, []string{"build"}, nil); err != nil {
		t.Fatal(err)
	}
	runs := newRunsOnAWorker(2)
	ran := make(chan error, 1)
	go func() { ran <- s.RunSync(context.Background(), Job{Type: "build", ID: "a", Key: "k"}, runs.fn) }()
	done := make(chan error, 1)
	if err := s.Submit(Job{Type: "build", ID: "b", Key: "k"}, runs.fn, func(err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	runs.removeOnceStarted(t, s, "w", 2)
	if err := <-ran; CodeOf(err) != Unavailable {
		t.Errorf("RunSync: %v, want the worker's loss (Unavailable)", err)
	}
	if err := <-done; CodeOf(err) != Unavailable {
		t.Errorf("Submit's done: %v, want the worker's loss (Unavailable)", err)
	}
}

// A durable handler and a periodic job's run are given their job's context, as a Submit's
// function is: WorkerOf names the worker they were admitted onto, and the context ends when that
// worker is removed (not only at Close), and the attempt or run fails with the worker's loss.
func TestDurableHandlersAndPeriodicRunsEndWhenTheirWorkerIsRemoved(t *testing.T) {
	store := openSQLite(t, filepath.Join(t.TempDir(), "jobs.db"))
	s := newScheduler(t, quietly(Options{Store: store}))
	store.Close()
	register(t, s, "repack", TypeConfig{})
	register(t, s, "gc", TypeConfig{})
	runs := newRunsOnAWorker(2)
	if err := s.RegisterDurable("repack", func(ctx context.Context, _ DurableJob) error {
		return runs.fn(ctx)
	}, RetryPolicy{MaxAttempts: 1}); err != nil {
		t.Fatalf("RegisterDurable: %v", err)
	}
	if _, err := s.Recover(); err != nil {
		t.Fatalf("Recover: %v", err)
	}
	if err := s.AddWorker("w", 2, []string{"repack", "gc"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SubmitDurable(Job{Type: "repack", ID: "linux", Key: "alice"}, nil); err != nil {
		t.Fatalf("SubmitDurable: %v", err)
	}
	periodic := make(chan error, 1)
	if _, err := s.SubmitEvery(Job{Type: "gc", ID: "linux", Key: "cron"}, time.Hour, runs.fn,
		PeriodicOptions{FirstRunAtOnce: true, OnRun: func(err error) { periodic <- err }}); err != nil {
		t.Fatalf("SubmitEvery: %v", err)
	}
	runs.removeOnceStarted(t, s, "w", 2)
	if err := <-periodic; CodeOf(err) != Unavailable {
		t.Errorf("the periodic run: %v, want the worker's loss (Unavailable)", err)
	}
	var dead []StoredJob
	eventually(t, "the durable job's only attempt fails", func() bool {
		var err error
		dead, err = s.DeadJobs(0, 10)
		return err == nil && len(dead) == 1
	})
	if !strings.Contains(dead[0].LastError, "UNAVAILABLE: worker 'w' was removed") {
		t.Errorf("the dead job's error: %q, want the worker's loss", dead[0].LastError)
	}
}

// An Acquire's holder learns of its worker's removal from Permit.Lost; a permit without a worker,
// or released, is never lost.
func TestAPermitIsLostWhenItsWorkerIsRemoved(t *testing.T) {
	s := newScheduler(t, quietly(Options{}))
	register(t, s, "render", TypeConfig{Priority: 4})
	plain, err := s.Acquire(context.Background(), Job{Type: "render", ID: "a", Key: "k"})
	if err != nil {
		t.Fatal(err)
	}
	plainLost := plain.Lost()
	plain.Release(nil)
	if err := s.AddWorker("gpu-1", 1, []string{"render"}, nil); err != nil {
		t.Fatal(err)
	}
	p, err := s.Acquire(context.Background(), Job{Type: "render", ID: "b", Key: "k"})
	if err != nil {
		t.Fatal(err)
	}
	lost := p.Lost()
	if p.Lost() != lost {
		t.Errorf("Lost returned another channel the second time")
	}
	select {
	case <-lost:
		t.Fatal("lost before its worker was removed")
	default:
	}
	if err := s.RemoveWorker("gpu-1"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lost:
	case <-time.After(10 * time.Second):
		t.Fatal("Lost not closed within 10 s of its worker's removal")
	}
	p.Release(nil)
	select {
	case <-plainLost:
		t.Error("a permit without a worker was lost")
	default:
	}
}

// runsOnAWorker is the job function of the worker-removal tests: each run reports the worker it
// was admitted onto, waits for its context to end (at most 10 s) and returns nil, so that the
// status its job ends with is the loss the scheduler reports, not the function's.
type runsOnAWorker struct {
	started   chan string
	cancelled chan bool
}

func newRunsOnAWorker(n int) *runsOnAWorker {
	return &runsOnAWorker{started: make(chan string, n), cancelled: make(chan bool, n)}
}

func (r *runsOnAWorker) fn(ctx context.Context) error {
	r.started <- WorkerOf(ctx)
	r.cancelled <- endsWithin10s(ctx)
	return nil
}

// removeOnceStarted waits for n runs to start on `worker`, removes it, and checks that each run's
// context ended within 10 s of that.
func (r *runsOnAWorker) removeOnceStarted(t *testing.T, s *Scheduler, worker string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		if w := <-r.started; w != worker {
			t.Errorf("a function ran on %q, want %s", w, worker)
		}
	}
	if err := s.RemoveWorker(worker); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if !<-r.cancelled {
			t.Errorf("a function's context did not end within 10 s of its worker's removal")
		}
	}
}

// endsWithin10s waits until ctx ends, at most 10 s, and says whether it did.
func endsWithin10s(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return true
	case <-time.After(10 * time.Second):
		return false
	}
}

// A panic or runtime.Goexit (as t.FailNow calls) in a submitted function fails its job with code
// Internal, saying which, whether the C library runs it (a coalescing type) or a permit of Go's
// does, and the job's slot is free again.
func TestAPanicOrGoexitInASubmittedFunctionFailsItsJob(t *testing.T) {
	s := newScheduler(t, quietly(Options{MaxConcurrency: 1}))
	register(t, s, "mirror", TypeConfig{Priority: 4, Coalesce: CoalesceSupersede})
	register(t, s, "build", TypeConfig{Priority: 4})
	for _, typ := range []string{"mirror", "build"} {
		for _, c := range []struct {
			end  func()
			want string
		}{
			{func() { panic("no network") }, "the job's function panicked: no network"},
			{runtime.Goexit, "the job's function called runtime.Goexit"},
		} {
			done := make(chan error, 1)
			if err := s.Submit(Job{Type: typ, ID: "x", Key: "k"}, func(context.Context) error {
				c.end()
				return nil
			}, func(err error) { done <- err }); err != nil {
				t.Fatal(err)
			}
			if err := receive(t, done); CodeOf(err) != Internal || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: done: %v, want Internal saying %q", typ, err, c.want)
			}
			if err := s.RunSync(context.Background(), Job{Type: "build", ID: "next", Key: "k"},
				func(context.Context) error { return nil }); err != nil {
				t.Errorf("%s: the next job: %v", typ, err)
			}
		}
	}
}

// A RunSync whose function panics ends its job (the slot is free at once, not when the garbage
// collector finds the permit) and the panic goes on to the caller.
func TestARunSyncWhoseFunctionPanicsEndsItsJob(t *testing.T) {
	s := newScheduler(t, quietly(Options{MaxConcurrency: 1}))
	register(t, s, "build", TypeConfig{Priority: 4})
	func() {
		defer func() {
			if r := recover(); r != "a bug" {
				t.Errorf("recovered %v, want the function's panic", r)
			}
		}()
		_ = s.RunSync(context.Background(), Job{Type: "build", ID: "x", Key: "k"},
			func(context.Context) error { panic("a bug") })
	}()
	if got := state(t, s).Running; got != 0 {
		t.Errorf("%d jobs running after the panic, want 0", got)
	}
}

// A RunSync of a coalescing type joins a running job of its id: it returns that job's end and
// never runs its function; the caller whose function ran gets its very error.
func TestRunSyncOfACoalescingTypeJoins(t *testing.T) {
	s := newScheduler(t, quietly(Options{}))
	register(t, s, "mirror", TypeConfig{Priority: 4, Coalesce: CoalesceJoin})
	failed := errors.New("the fetch failed")
	started, release := make(chan struct{}), make(chan struct{})
	job := Job{Type: "mirror", ID: "linux.git", Key: "alice"}
	first := make(chan error, 1)
	go func() {
		first <- s.RunSync(context.Background(), job, func(ctx context.Context) error {
			close(started)
			<-release
			return failed
		})
	}()
	<-started
	joined := make(chan error, 1)
	joinerRan := false
	go func() {
		joined <- s.RunSync(context.Background(), Job{Type: "mirror", ID: "linux.git", Key: "bob"},
			func(context.Context) error { joinerRan = true; return nil })
	}()
	eventually(t, "bob's call joined", func() bool {
		return strings.Contains(s.Metrics(), `fairgate_jobs_joined_total{tier="4",type="mirror"} 1`)
	})
	close(release)
	if err := <-first; !errors.Is(err, failed) {
		t.Errorf("the first call: %v, want its function's very error", err)
	}
	if err := <-joined; err == nil || !strings.Contains(err.Error(), "the fetch failed") || joinerRan {
		t.Errorf("the joiner: %v (its function ran: %v), want the job's error and no run", err, joinerRan)
	}
}

// A RunSync of a coalescing type waiting in C ends with its context, as any RunSync does.
func TestRunSyncOfACoalescingTypeEndsWithItsContext(t *testing.T) {
	s := newScheduler(t, quietly(Options{}))
	register(t, s, "mirror", TypeConfig{Priority: 4, MaxConcurrency: 1, Coalesce: CoalesceJoin})
	p, err := s.Acquire(context.Background(), Job{Type: "mirror", ID: "a", Key: "k"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release(nil)
	ctx, cancel := context.WithCancel(context.Background())
	returned := make(chan error, 1)
	ran := false
	go func() {
		returned <- s.RunSync(ctx, Job{Type: "mirror", ID: "b", Key: "k"},
			func(context.Context) error { ran = true; return nil })
	}()
	eventually(t, "the call queued", func() bool { return state(t, s).Pending == 1 })
	cancel()
	if err := <-returned; !errors.Is(err, context.Canceled) || ran {
		t.Errorf("RunSync: %v (ran %v), want context.Canceled without a run", err, ran)
	}
	if err := s.RunSync(context.Background(), Job{Type: "mirror", ID: "c", Key: "k"}, nil); CodeOf(err) != InvalidArgument {
		t.Errorf("RunSync with a nil function: %v, want InvalidArgument", err)
	}
}

// Close ends a coalescing type's jobs as it ends others: the running one's context is cancelled
// (done gets what its function returned), the queued one is told the scheduler closed.
func TestCloseEndsACoalescingTypesJobs(t *testing.T) {
	s, err := New(quietly(Options{MaxConcurrency: 1}))
	if err != nil {
		t.Fatal(err)
	}
	register(t, s, "mirror", TypeConfig{Coalesce: CoalesceJoin})
	started := make(chan struct{})
	done := make(chan error, 2)
	if err := s.Submit(Job{Type: "mirror", ID: "a", Key: "k"}, func(ctx context.Context) error {
		close(started)
		<-ctx.Done()
		return ctx.Err()
	}, func(err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	<-started
	if err := s.Submit(Job{Type: "mirror", ID: "b", Key: "k"}, func(context.Context) error { return nil },
		func(err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	var cancelled, closed int
	for i := 0; i < 2; i++ {
		err := <-done
		if errors.Is(err, context.Canceled) {
			cancelled++
		} else if ErrClosed(err) {
			closed++
		}
	}
	if cancelled != 1 || closed != 1 {
		t.Errorf("%d cancelled and %d told it closed, want one each", cancelled, closed)
	}
}

// A negative cost hint is refused on the C library's paths too (C reads a cost below 0 as none).
func TestANegativeCostIsRefusedOnEveryPath(t *testing.T) {
	s := newScheduler(t, quietly(Options{}))
	register(t, s, "mirror", TypeConfig{Priority: 4, Coalesce: CoalesceJoin})
	register(t, s, "build", TypeConfig{Priority: 4})
	for _, typ := range []string{"mirror", "build"} {
		job := Job{Type: typ, ID: "a", Key: "k"}.WithCost(-1)
		if err := s.RunSync(context.Background(), job, func(context.Context) error { return nil }); CodeOf(err) != InvalidArgument {
			t.Errorf("RunSync of %s with cost -1: %v, want InvalidArgument", typ, err)
		}
		if err := s.Submit(job, func(context.Context) error { return nil }, nil); CodeOf(err) != InvalidArgument {
			t.Errorf("Submit of %s with cost -1: %v, want InvalidArgument", typ, err)
		}
	}
}

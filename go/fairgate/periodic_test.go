package fairgate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestSubmitEveryRunsUntilStoppedEachRunReported(t *testing.T) {
	s := newScheduler(t, Options{})
	register(t, s, "gc", TypeConfig{})
	job := Job{Type: "gc", ID: "linux", Key: "cron"}
	var ran, reported atomic.Int64
	var mu sync.Mutex
	var errs []error
	fn := func(ctx context.Context) error {
		if ran.Add(1) == 2 {
			return errors.New("the repository is locked")
		}
		return nil
	}
	onRun := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
		reported.Add(1)
	}
	for what, call := range map[string]func() error{
		"a zero interval": func() error {
			_, err := s.SubmitEvery(job, 0, fn, PeriodicOptions{})
			return err
		},
		"a nil function": func() error {
			_, err := s.SubmitEvery(job, time.Second, nil, PeriodicOptions{})
			return err
		},
		"a cost hint": func() error {
			_, err := s.SubmitEvery(job.WithCost(1), time.Second, fn, PeriodicOptions{})
			return err
		},
		"a jitter of 1": func() error {
			_, err := s.SubmitEvery(job, time.Second, fn, PeriodicOptions{Jitter: 1})
			return err
		},
	} {
		if err := call(); CodeOf(err) != InvalidArgument {
			t.Errorf("%s: %v, want InvalidArgument", what, err)
		}
	}
	if _, err := s.SubmitEvery(Job{Type: "unknown", ID: "x", Key: "k"}, time.Second, fn,
		PeriodicOptions{}); CodeOf(err) != NotFound {
		t.Errorf("an unknown type: %v", err)
	}

	p, err := s.SubmitEvery(job, 10*time.Millisecond, fn,
		PeriodicOptions{Jitter: -1, FirstRunAtOnce: true, OnRun: onRun})
	if err != nil {
		t.Fatalf("SubmitEvery: %v", err)
	}
	eventually(t, "three runs reported", func() bool { return reported.Load() >= 3 })
	if p.Runs() < 3 {
		t.Errorf("Runs() = %d after three reports", p.Runs())
	}
	p.Stop()
	p.Stop()
	s.Close()
	mu.Lock()
	defer mu.Unlock()
	if int64(len(errs)) != ran.Load() {
		t.Errorf("%d runs, %d reported", ran.Load(), len(errs))
	}
	if errs[0] != nil || errs[1] == nil || !strings.Contains(errs[1].Error(), "locked") {
		t.Errorf("the first runs were reported as %v", errs[:2])
	}
	if got := p.Runs(); got != uint64(ran.Load()) {
		t.Errorf("Runs() after Close = %d, want %d", got, ran.Load())
	}
}

// OnRun runs in a goroutine, not on the C library's thread that ended the run: one that waits for
// another job the library runs (a coalescing type's RunSync) does not hold the thread that job
// needs, here the only one; nor does the next run wait for it. Its reports still come one at a
// time, in the order of the runs, and Close returns once every one has been made.
func TestOnRunMayWaitForAnotherJobOfTheCPathAndComesInOrder(t *testing.T) {
	s := newScheduler(t, quietly(Options{WorkerThreads: 1}))
	register(t, s, "mirror", TypeConfig{Priority: 4, Coalesce: CoalesceJoin})
	register(t, s, "gc", TypeConfig{})
	var ran atomic.Int64
	var mu sync.Mutex
	var reported []int64 // the run each report was of, from its error's text
	inside, most := 0, 0 // OnRun calls under way, and the most ever at once
	waited := make(chan error, 1)
	onRun := func(err error) {
		mu.Lock()
		inside++
		if inside > most {
			most = inside
		}
		n := len(reported)
		mu.Unlock()
		if n == 0 {
			waited <- s.RunSync(context.Background(), Job{Type: "mirror", ID: "b", Key: "k"},
				func(context.Context) error { return nil })
			// The next runs end meanwhile, their reports waiting for this one.
			for deadline := time.Now().Add(bound); ran.Load() < 5 && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond)
			}
		}
		var run int64
		var e *Error
		if errors.As(err, &e) {
			fmt.Sscanf(e.Message, "run %d", &run)
		}
		mu.Lock()
		inside--
		reported = append(reported, run)
		mu.Unlock()
	}
	p, err := s.SubmitEvery(Job{Type: "gc", ID: "linux", Key: "cron"}, time.Millisecond,
		func(context.Context) error { return fmt.Errorf("run %d", ran.Add(1)) },
		PeriodicOptions{Jitter: -1, FirstRunAtOnce: true, OnRun: onRun})
	if err != nil {
		t.Fatal(err)
	}
	if err := receive(t, waited); err != nil {
		t.Errorf("the RunSync OnRun made: %v", err)
	}
	eventually(t, "five runs", func() bool { return ran.Load() >= 5 })
	p.Stop()
	s.Close()
	mu.Lock()
	defer mu.Unlock()
	if int64(len(reported)) != ran.Load() {
		t.Fatalf("%d runs, %d reported once Close returned", ran.Load(), len(reported))
	}
	for i, run := range reported {
		if run != int64(i+1) {
			t.Fatalf("the reports came for runs %v, not in order", reported)
		}
	}
	if most != 1 {
		t.Errorf("%d OnRun calls at once", most)
	}
}

func TestDrainRunsWhatIsQueuedThenCloses(t *testing.T) {
	s := newScheduler(t, Options{MaxConcurrency: 1})
	register(t, s, "build", TypeConfig{})
	if err := s.PauseType("build"); err != nil {
		t.Fatal(err)
	}
	var ran atomic.Int64
	var done sync.WaitGroup
	for _, id := range []string{"a", "b", "c"} {
		done.Add(1)
		if err := s.Submit(Job{Type: "build", ID: id, Key: "alice"},
			func(context.Context) error { ran.Add(1); return nil },
			func(err error) {
				if err != nil {
					t.Errorf("a drained job: %v", err)
				}
				done.Done()
			}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Drain(0); err != nil {
		t.Fatalf("Drain: %v", err)
	}
	done.Wait() // every callback has been called once Drain (and so Close) returned
	if ran.Load() != 3 {
		t.Errorf("%d of 3 paused jobs ran before Drain returned", ran.Load())
	}
	if err := s.Submit(Job{Type: "build", ID: "d", Key: "alice"},
		func(context.Context) error { return nil }, nil); !ErrClosed(err) {
		t.Errorf("Submit after Drain: %v", err)
	}
}

func TestADrainThatRunsOutOfTimeCancelsWhatIsLeft(t *testing.T) {
	s := newScheduler(t, Options{MaxConcurrency: 1})
	register(t, s, "build", TypeConfig{})
	held, err := s.Acquire(context.Background(), Job{Type: "build", ID: "a", Key: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	left := make(chan error, 1)
	if err := s.Submit(Job{Type: "build", ID: "b", Key: "alice"},
		func(context.Context) error { return nil }, func(err error) { left <- err }); err != nil {
		t.Fatal(err)
	}
	drained := make(chan error, 1)
	go func() { drained <- s.Drain(50 * time.Millisecond) }()
	if err := receive(t, left); CodeOf(err) != Canceled {
		t.Errorf("the job left queued: %v, want Canceled", err)
	}
	held.Release(nil)
	if err := receive(t, drained); CodeOf(err) != DeadlineExceeded {
		t.Errorf("Drain: %v, want DeadlineExceeded", err)
	}
}

func TestEstimatesGroupCostsAndWorkersChanged(t *testing.T) {
	s := newScheduler(t, Options{})
	register(t, s, "build", TypeConfig{})
	if _, found := s.Estimate("build", "linux"); found {
		t.Error("an estimate before any run")
	}
	if err := s.RunSync(context.Background(), Job{Type: "build", ID: "linux", Key: "alice"},
		func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if seconds, found := s.Estimate("build", "linux"); !found || seconds < 0 {
		t.Errorf("Estimate after a run: %v, %v", seconds, found)
	}
	if _, found := s.GroupAccumulatedCost("acme"); found {
		t.Error("a group's cost before it had any")
	}
	if err := s.SetKeyGroup("bob", "acme"); err != nil {
		t.Fatal(err)
	}
	if err := s.Charge("bob", 2.5); err != nil {
		t.Fatal(err)
	}
	if cost, found := s.GroupAccumulatedCost("acme"); !found || cost <= 0 {
		t.Errorf("GroupAccumulatedCost after a charge: %v, %v", cost, found)
	}
	if err := s.AddWorker("w1", 1, []string{"build"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateWorker("w1", 2, []string{"build"}, nil); err != nil {
		t.Errorf("UpdateWorker: %v", err)
	}
	if err := s.UpdateWorker("w2", 2, nil, nil); CodeOf(err) != NotFound {
		t.Errorf("UpdateWorker of an unknown worker: %v", err)
	}
}

// receive waits for what ch brings, at most bound.
func receive(t *testing.T, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(bound):
		t.Fatalf("nothing came within %v", bound)
		return nil
	}
}

package fairgate

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// A Go function that the C library runs (a coalescing type's Submit, a periodic run, a durable
// handler) runs in a goroutine while its job waits on the library's pool without holding the
// pool's thread: with one pool thread, a job submitted while such a function waits runs
// meanwhile.
func TestGoFunctionsTheCLibraryRunsDoNotHoldItsPoolsThread(t *testing.T) {
	var a attempts
	s := durableScheduler(t, openSQLite(t, filepath.Join(t.TempDir(), "jobs.db")),
		quietly(Options{WorkerThreads: 1}), &a)
	register(t, s, "mirror", TypeConfig{Coalesce: CoalesceJoin})
	register(t, s, "gc", TypeConfig{})
	register(t, s, "sweep", TypeConfig{})

	// start makes the function under test, fn, run; fn waits (at most 10 s) for a job submitted
	// once it started.
	check := func(what string, start func(fn func(context.Context) error)) {
		t.Helper()
		started, second, result := make(chan struct{}), make(chan struct{}), make(chan error, 1)
		var once sync.Once
		start(func(context.Context) error {
			once.Do(func() {
				close(started)
				select {
				case <-second:
					result <- nil
				case <-time.After(10 * time.Second):
					result <- errors.New("the job submitted while it waited did not run")
				}
			})
			return nil
		})
		select {
		case <-started:
		case <-time.After(bound):
			t.Fatalf("%s: the function did not start within %v", what, bound)
		}
		if err := s.Submit(Job{Type: "mirror", ID: what, Key: "b"}, func(context.Context) error {
			close(second)
			return nil
		}, nil); err != nil {
			t.Fatalf("%s: the second Submit: %v", what, err)
		}
		if err := receive(t, result); err != nil {
			t.Errorf("%s: %v", what, err)
		}
	}

	check("Submit", func(fn func(context.Context) error) {
		if err := s.Submit(Job{Type: "mirror", ID: "first", Key: "a"}, fn, nil); err != nil {
			t.Fatalf("Submit: %v", err)
		}
	})
	check("SubmitEvery", func(fn func(context.Context) error) {
		p, err := s.SubmitEvery(Job{Type: "sweep", ID: "all", Key: "a"}, time.Hour, fn,
			PeriodicOptions{FirstRunAtOnce: true})
		if err != nil {
			t.Fatalf("SubmitEvery: %v", err)
		}
		t.Cleanup(p.Stop)
	})
	check("a durable handler", func(fn func(context.Context) error) {
		if err := s.RegisterDurable("gc", func(ctx context.Context, _ DurableJob) error {
			return fn(ctx)
		}, RetryPolicy{}); err != nil {
			t.Fatalf("RegisterDurable: %v", err)
		}
		if _, err := s.Recover(); err != nil {
			t.Fatalf("Recover: %v", err)
		}
		if _, err := s.SubmitDurable(Job{Type: "gc", ID: "linux", Key: "a"}, nil); err != nil {
			t.Fatalf("SubmitDurable: %v", err)
		}
	})
}

package fairgate

import (
	"context"
	"errors"
	"testing"
)

func TestRefuseWithoutTokenIsRefusedAtOnce(t *testing.T) {
	s := newScheduler(t, quietly(Options{}))
	register(t, s, "api", TypeConfig{Priority: 8, RatePerSecond: 0.001})
	job := Job{Type: "api", ID: "list", Key: "alice"}
	if err := s.RunSync(context.Background(), job, func(context.Context) error { return nil }); err != nil {
		t.Fatal(err) // took the one token
	}
	_, err := s.Acquire(context.Background(), job.WithRefuseWithoutToken())
	var e *Error
	if !errors.As(err, &e) || e.Code != ResourceExhausted || e.RetryAfter.Seconds() < 900 {
		t.Fatalf("Acquire without a token: %v, want ResourceExhausted with a retry-after", err)
	}
	if _, err := s.SubmitDurable(job.WithRefuseWithoutToken(), nil); CodeOf(err) != InvalidArgument {
		t.Errorf("SubmitDurable with a job's option: %v, want InvalidArgument", err)
	}
	// Without it, the same call waits for the next token: queued, not refused.
	ctx, cancel := context.WithCancel(context.Background())
	waited := make(chan error, 1)
	go func() {
		_, err := s.Acquire(ctx, job)
		waited <- err
	}()
	eventually(t, "the call queued", func() bool { return state(t, s).Pending == 1 })
	cancel()
	if err := <-waited; !errors.Is(err, context.Canceled) {
		t.Errorf("the queued call: %v, want Canceled once its context was", err)
	}
}

func TestAJobKnowsItsWorker(t *testing.T) {
	s := newScheduler(t, quietly(Options{}))
	register(t, s, "build", TypeConfig{Priority: 4})
	if err := s.AddWorker("w1", 1, []string{"build"}, nil); err != nil {
		t.Fatal(err)
	}
	job := Job{Type: "build", ID: "a", Key: "k"}
	var worker string
	var token uint64 = 99
	if err := s.RunSync(context.Background(), job, func(ctx context.Context) error {
		worker, token = WorkerOf(ctx), FencingTokenOf(ctx)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if worker != "w1" || token != 0 {
		t.Errorf("RunSync's function saw worker %q, token %d; want w1 and 0 (no fleet lease)", worker, token)
	}
	done := make(chan string, 1)
	if err := s.Submit(job, func(ctx context.Context) error {
		done <- WorkerOf(ctx)
		return nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	if got := <-done; got != "w1" {
		t.Errorf("Submit's function saw worker %q, want w1", got)
	}
	p, err := s.Acquire(context.Background(), job)
	if err != nil {
		t.Fatal(err)
	}
	if p.Worker() != "w1" || p.FencingToken() != 0 {
		t.Errorf("the permit's worker %q, token %d; want w1 and 0", p.Worker(), p.FencingToken())
	}
	p.Release(nil)
	if p.Worker() != "" {
		t.Errorf("a released permit names worker %q", p.Worker())
	}
	if WorkerOf(context.Background()) != "" || FencingTokenOf(context.Background()) != 0 {
		t.Error("a context of no job names a worker or a token")
	}
}

// TryAcquire admits at once or not at all: a job that would wait is refused with
// ResourceExhausted, not queued and not charged (its scheduler reports it cancelled while
// pending, charge 0, never admitted), and the slot, once free, is taken at once.
// A permit given back unused teaches its estimate nothing and gives its key's charge back, where
// a Release would have taught the estimate the permit's short hold.
func TestReleaseUnusedTeachesNothingAndGivesBackTheCharge(t *testing.T) {
	var log eventLog
	s := newScheduler(t, quietly(Options{MaxConcurrency: 1, OnEvent: log.record}))
	register(t, s, "clone", TypeConfig{DefaultCost: 30})
	job := Job{Type: "clone", ID: "linux", Key: "alice"}
	first, err := s.TryAcquire(job)
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	first.Release(nil) // held for far less than 30 s: the estimate falls
	estimate, _ := s.Estimate("clone", "linux")
	cost, _ := s.AccumulatedCost("alice")
	if estimate >= 30 {
		t.Fatalf("the estimate after a short run: %v, want below the default 30", estimate)
	}
	second, err := s.Acquire(context.Background(), job)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if charged, _ := s.AccumulatedCost("alice"); charged <= cost {
		t.Errorf("the key's cost while the second permit is held: %v, want above %v", charged, cost)
	}
	second.ReleaseUnused(nil)
	second.ReleaseUnused(nil) // does nothing
	second.Release(nil)       // does nothing
	if got, _ := s.Estimate("clone", "linux"); got != estimate {
		t.Errorf("the estimate after ReleaseUnused: %v, want %v unchanged", got, estimate)
	}
	if got, _ := s.AccumulatedCost("alice"); got != cost {
		t.Errorf("the key's cost after ReleaseUnused: %v, want %v, as before the admission", got, cost)
	}
	var completions []Event
	eventually(t, "the two completions", func() bool {
		completions = completions[:0]
		for _, e := range log.all() {
			if e.Kind == EventComplete {
				completions = append(completions, e)
			}
		}
		return len(completions) == 2
	})
	if e := completions[1]; CodeOf(e.Err) != Canceled || e.Charge != 0 || e.AccumulatedCost != cost {
		t.Errorf("the unused permit's completion: %+v, want Canceled, charge 0, the key's cost %v", e, cost)
	}
	next, err := s.TryAcquire(Job{Type: "clone", ID: "git", Key: "bob"})
	if err != nil {
		t.Fatalf("TryAcquire after ReleaseUnused: %v, want the freed slot", err)
	}
	next.Release(nil)
}

func TestTryAcquireAdmitsAtOnceOrNotAtAll(t *testing.T) {
	var log eventLog
	s := newScheduler(t, quietly(Options{MaxConcurrency: 1, OnEvent: log.record}))
	register(t, s, "clone", TypeConfig{})
	if _, err := s.TryAcquire(Job{Type: "unknown", ID: "a", Key: "alice"}); CodeOf(err) != NotFound {
		t.Errorf("TryAcquire of an unknown type: %v, want NotFound", err)
	}
	held, err := s.TryAcquire(Job{Type: "clone", ID: "a", Key: "alice"})
	if err != nil {
		t.Fatalf("TryAcquire with a free slot: %v", err)
	}
	if _, err := s.TryAcquire(Job{Type: "clone", ID: "b", Key: "bob"}); CodeOf(err) != ResourceExhausted {
		t.Errorf("TryAcquire with the only slot held: %v, want ResourceExhausted", err)
	}
	if snap := state(t, s); snap.Pending != 0 || snap.Running != 1 {
		t.Errorf("after the refusal: %+v, want nothing pending and one running", snap)
	}
	var cancelled Event
	eventually(t, "the refused job's cancel event", func() bool {
		for _, e := range log.all() {
			if e.ID == "b" {
				cancelled = e
				return true
			}
		}
		return false
	})
	if cancelled.Kind != EventCancel || cancelled.Charge != 0 {
		t.Errorf("the refused job's first event: %+v, want a cancel charging nothing", cancelled)
	}
	held.Release(nil)
	again, err := s.TryAcquire(Job{Type: "clone", ID: "b", Key: "bob"})
	if err != nil {
		t.Fatalf("TryAcquire once the slot is free: %v", err)
	}
	again.Release(nil)
	s.Close()
	if _, err := s.TryAcquire(Job{Type: "clone", ID: "c", Key: "bob"}); !ErrClosed(err) {
		t.Errorf("TryAcquire after Close: %v", err)
	}
}

package fairgate

// The behaviours cachew's scheduler tests check (github.com/block/cachew,
// internal/scheduler/scheduler_test.go), each in fairgate's terms: cachew's priority levels are
// fairgate's tiers (a type's Priority, which is also its tier's cap in slots), its conflict
// groups are fairgate's. Where cachew waits a while to see that a job has not started, these ask
// the scheduler what is pending instead: a job still pending has not been admitted, so it cannot
// have started. cachew's deduplication of a second Submit or RunSync of a (type, id) into the
// first is fairgate's coalescing: its cases are the TestCachew...Dedup tests at the end.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
)

// heldJob is a submitted job that runs until its test completes it.
type heldJob struct {
	started chan struct{}
	finish  chan error
	done    chan error
}

func submitHeld(t *testing.T, s *Scheduler, typ, id, key string) *heldJob {
	t.Helper()
	j := &heldJob{started: make(chan struct{}), finish: make(chan error, 1), done: make(chan error, 1)}
	err := s.Submit(Job{Type: typ, ID: id, Key: key}, func(ctx context.Context) error {
		close(j.started)
		select {
		case err := <-j.finish:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}, func(err error) { j.done <- err })
	if err != nil {
		t.Fatalf("Submit(%s %s): %v", typ, id, err)
	}
	return j
}

func (j *heldJob) waitStarted(t *testing.T) {
	t.Helper()
	eventually(t, "the job started", func() bool {
		select {
		case <-j.started:
			return true
		default:
			return false
		}
	})
}

func (j *heldJob) startedYet() bool {
	select {
	case <-j.started:
		return true
	default:
		return false
	}
}

// complete ends the job and waits for its done callback.
func (j *heldJob) complete(t *testing.T) {
	t.Helper()
	j.finish <- nil
	if err := <-j.done; err != nil {
		t.Errorf("the job ended with %v", err)
	}
}

// pending waits until the scheduler has exactly n jobs pending (the submissions in flight
// queued), then checks that none of `waiting` started.
func pending(t *testing.T, s *Scheduler, n int, waiting ...*heldJob) {
	t.Helper()
	eventually(t, "the jobs queued", func() bool { return state(t, s).Pending == n })
	for _, j := range waiting {
		if j.startedYet() {
			t.Error("a job that should wait started")
		}
	}
}

func TestCachewBasicSubmit(t *testing.T) {
	s := newScheduler(t, Options{MaxConcurrency: 50})
	register(t, s, "work", TypeConfig{Priority: 8, MaxConcurrency: 1})
	j := submitHeld(t, s, "work", "j1", "")
	j.waitStarted(t)
	j.complete(t)
}

func TestCachewRunSyncRunsAndReturnsTheError(t *testing.T) {
	s := newScheduler(t, Options{MaxConcurrency: 50})
	register(t, s, "work", TypeConfig{Priority: 8, MaxConcurrency: 1})
	called := false
	if err := s.RunSync(context.Background(), Job{Type: "work", ID: "j1", Key: "client"},
		func(context.Context) error { called = true; return nil }); err != nil || !called {
		t.Errorf("RunSync: %v, called %v", err, called)
	}
	boom := errors.New("boom")
	if err := s.RunSync(context.Background(), Job{Type: "work", ID: "j1", Key: "client"},
		func(context.Context) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("RunSync's error: %v", err)
	}
}

// A higher tier goes first among jobs blocked by one conflict, whatever their arrival.
func TestCachewPriorityOrdering(t *testing.T) {
	s := newScheduler(t, Options{MaxConcurrency: 50})
	register(t, s, "fgSetup", TypeConfig{Priority: 8, MaxConcurrency: 1, ConflictGroup: "git"})
	register(t, s, "fg", TypeConfig{Priority: 8, MaxConcurrency: 1, ConflictGroup: "git"})
	register(t, s, "bg", TypeConfig{Priority: 2, MaxConcurrency: 1, ConflictGroup: "git"})
	blocker := submitHeld(t, s, "fgSetup", "repo1", "")
	blocker.waitStarted(t)
	bg := submitHeld(t, s, "bg", "repo1", "")
	pending(t, s, 1, bg)
	fg := submitHeld(t, s, "fg", "repo1", "")
	pending(t, s, 2, bg, fg)
	blocker.complete(t)
	fg.waitStarted(t)
	pending(t, s, 1, bg)
	fg.complete(t)
	bg.waitStarted(t)
	bg.complete(t)
}

// clientBGoesFirst holds the only slot, queues clientA's job and then clientB's, frees the slot,
// and checks that B's runs first (clientA has consumed more), then A's.
func clientBGoesFirst(t *testing.T, s *Scheduler) {
	t.Helper()
	blocker := submitHeld(t, s, "work", "blocker", "")
	blocker.waitStarted(t)
	a := submitHeld(t, s, "work", "a1", "clientA")
	pending(t, s, 1, a)
	b := submitHeld(t, s, "work", "b1", "clientB")
	pending(t, s, 2, a, b)
	blocker.complete(t)
	b.waitStarted(t)
	pending(t, s, 1, a)
	b.complete(t)
	a.waitStarted(t)
	a.complete(t)
}

// A client that has consumed more waits behind one that has not, though it asked first.
func TestCachewFairness(t *testing.T) {
	s := newScheduler(t, Options{MaxConcurrency: 1})
	register(t, s, "work", TypeConfig{Priority: 1, MaxConcurrency: 1})
	if err := s.RunSync(context.Background(), Job{Type: "work", ID: "warmup", Key: "clientA"},
		func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	clientBGoesFirst(t, s)
}

// Many cheap jobs still cost their client: with a cost of 5 s each (cachew's admission cost
// floor; here each job's cost hint), the client that ran five goes after a newcomer.
func TestCachewAdmissionCostPreventsDoS(t *testing.T) {
	s := newScheduler(t, Options{MaxConcurrency: 1})
	register(t, s, "work", TypeConfig{Priority: 1, MaxConcurrency: 1})
	for i := 0; i < 5; i++ {
		if err := s.RunSync(context.Background(),
			Job{Type: "work", ID: "cheap", Key: "clientA"}.WithCost(5),
			func(context.Context) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	clientBGoesFirst(t, s)
}

func TestCachewConflictGroups(t *testing.T) {
	s := newScheduler(t, Options{MaxConcurrency: 50})
	register(t, s, "clone", TypeConfig{Priority: 8, MaxConcurrency: 1, ConflictGroup: "git"})
	register(t, s, "repack", TypeConfig{Priority: 2, MaxConcurrency: 1, ConflictGroup: "git"})
	register(t, s, "snapshot", TypeConfig{Priority: 2, MaxConcurrency: 1})
	// One repository: the repack waits for the clone.
	clone := submitHeld(t, s, "clone", "repo1", "")
	clone.waitStarted(t)
	repack := submitHeld(t, s, "repack", "repo1", "")
	pending(t, s, 1, repack)
	// Another repository's, and a type of no group on the same one, do not wait.
	snapshot := submitHeld(t, s, "snapshot", "repo1", "")
	snapshot.waitStarted(t)
	clone.complete(t)
	repack.waitStarted(t)
	repack.complete(t)
	snapshot.complete(t)
	clone = submitHeld(t, s, "clone", "repo1", "")
	clone.waitStarted(t)
	other := submitHeld(t, s, "repack", "repo2", "")
	other.waitStarted(t)
	clone.complete(t)
	other.complete(t)
}

// The caps of a type, of a tier and of the whole scheduler each hold the third job back until
// one of the first two ends.
func TestCachewConcurrencyLimits(t *testing.T) {
	for _, c := range []struct {
		name    string
		options Options
		config  TypeConfig
	}{
		{"type", Options{MaxConcurrency: 50}, TypeConfig{Priority: 8, MaxConcurrency: 2}},
		// Seed: without lending, which would lend the idle slots of the scheduler to the tier.
		{"tier", Options{MaxConcurrency: 4, Seed: true}, TypeConfig{Priority: 2}},
		{"total", Options{MaxConcurrency: 2}, TypeConfig{Priority: 8}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newScheduler(t, c.options)
			register(t, s, "work", c.config)
			j1 := submitHeld(t, s, "work", "a", "")
			j2 := submitHeld(t, s, "work", "b", "")
			j3 := submitHeld(t, s, "work", "c", "")
			j1.waitStarted(t)
			j2.waitStarted(t)
			pending(t, s, 1, j3)
			j1.complete(t)
			j3.waitStarted(t)
			j2.complete(t)
			j3.complete(t)
		})
	}
}

// A full background tier does not hold foreground work back: each tier has its own slots.
func TestCachewBackgroundDoesNotStarveForeground(t *testing.T) {
	s := newScheduler(t, Options{MaxConcurrency: 10})
	register(t, s, "bg", TypeConfig{Priority: 2, MaxConcurrency: 2})
	register(t, s, "fg", TypeConfig{Priority: 8, MaxConcurrency: 1})
	bg := []*heldJob{submitHeld(t, s, "bg", "bg0", ""), submitHeld(t, s, "bg", "bg1", "")}
	for _, j := range bg {
		j.waitStarted(t)
	}
	fg := submitHeld(t, s, "fg", "fg1", "")
	fg.waitStarted(t)
	fg.complete(t)
	for _, j := range bg {
		j.complete(t)
	}
}

// cachew's deduplication is fairgate's coalescing (TypeConfig.Coalesce, fairgate/scheduler.h):
// the cases of cachew's tests, in fairgate's terms. Where cachew sleeps to let a call arrive,
// these wait for the scheduler to count the call as joined. One difference: a plain Submit does
// not join a running job in fairgate (it may ask for work that must start after the call), so
// cachew's Submit-onto-a-running-job cases use WithJoinRunning. And cachew's last case (a running
// job cancelled only when its last waiter leaves) is not fairgate's contract: the function runs
// with its own caller's context, and a joiner that leaves returns at once while the run goes on.

// joinedBy waits until n calls of typ (of tier `tier`) have joined a job.
func joinedBy(t *testing.T, s *Scheduler, typ string, tier, n int) {
	t.Helper()
	sample := fmt.Sprintf(`fairgate_jobs_joined_total{tier="%d",type="%s"} %d`, tier, typ, n)
	eventually(t, sample, func() bool { return strings.Contains(s.Metrics(), sample) })
}

// dedupScheduler is a scheduler of one slot whose type "work" coalesces.
func dedupScheduler(t *testing.T) *Scheduler {
	s := newScheduler(t, quietly(Options{MaxConcurrency: 1}))
	register(t, s, "work", TypeConfig{Priority: 1, MaxConcurrency: 1, Coalesce: CoalesceJoin})
	return s
}

// counted returns a job function that counts its runs in *runs.
func counted(runs *atomic.Int32) func(context.Context) error {
	return func(context.Context) error {
		runs.Add(1)
		return nil
	}
}

func TestCachewSubmitDedup(t *testing.T) {
	s := dedupScheduler(t)
	j := submitHeld(t, s, "work", "j1", "")
	j.waitStarted(t)
	var runs atomic.Int32
	done := make(chan error, 1)
	if err := s.Submit(Job{Type: "work", ID: "j1"}.WithJoinRunning(), counted(&runs),
		func(err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	joinedBy(t, s, "work", 1, 1)
	j.complete(t)
	if err := <-done; err != nil || runs.Load() != 0 {
		t.Errorf("the second Submit: %v, its function ran %d times; want nil and none", err, runs.Load())
	}
}

func TestCachewRunSyncDedup(t *testing.T) {
	s := dedupScheduler(t)
	blocker := submitHeld(t, s, "work", "blocker", "")
	blocker.waitStarted(t)
	var runs atomic.Int32
	errs := make(chan error, 2)
	for i := 0; i < 2; i++ {
		go func(i int) {
			errs <- s.RunSync(context.Background(),
				Job{Type: "work", ID: "shared", Key: fmt.Sprintf("client%d", i)}, counted(&runs))
		}(i)
	}
	joinedBy(t, s, "work", 1, 1)
	blocker.complete(t)
	for i := 0; i < 2; i++ {
		if err := <-errs; err != nil {
			t.Errorf("RunSync: %v", err)
		}
	}
	if runs.Load() != 1 {
		t.Errorf("the shared job ran %d times, want once", runs.Load())
	}
}

func TestCachewRunSyncDedupCancellation(t *testing.T) {
	s := dedupScheduler(t)
	blocker := submitHeld(t, s, "work", "blocker", "")
	blocker.waitStarted(t)
	var runs atomic.Int32
	ctxA, cancelA := context.WithCancel(context.Background())
	errA, errB := make(chan error, 1), make(chan error, 1)
	go func() {
		errA <- s.RunSync(ctxA, Job{Type: "work", ID: "shared", Key: "clientA"}, counted(&runs))
	}()
	eventually(t, "A queued", func() bool { return state(t, s).Pending == 1 })
	go func() {
		errB <- s.RunSync(context.Background(), Job{Type: "work", ID: "shared", Key: "clientB"},
			counted(&runs))
	}()
	joinedBy(t, s, "work", 1, 1)
	cancelA()
	if err := <-errA; !errors.Is(err, context.Canceled) {
		t.Errorf("A: %v, want context.Canceled", err)
	}
	blocker.complete(t)
	if err := <-errB; err != nil || runs.Load() != 1 {
		t.Errorf("B: %v, the job ran %d times; want nil and once", err, runs.Load())
	}
}

func TestCachewSubmitThenRunSyncDedup(t *testing.T) {
	s := dedupScheduler(t)
	j := submitHeld(t, s, "work", "j1", "")
	j.waitStarted(t)
	var runs atomic.Int32
	errs := make(chan error, 1)
	go func() {
		errs <- s.RunSync(context.Background(), Job{Type: "work", ID: "j1", Key: "client"}, counted(&runs))
	}()
	joinedBy(t, s, "work", 1, 1)
	j.complete(t)
	if err := <-errs; err != nil || runs.Load() != 0 {
		t.Errorf("RunSync onto the running Submit: %v, ran %d times; want nil and none", err, runs.Load())
	}
}

func TestCachewRunSyncThenSubmitDedup(t *testing.T) {
	s := dedupScheduler(t)
	started, release := make(chan struct{}), make(chan struct{})
	errs := make(chan error, 1)
	go func() {
		errs <- s.RunSync(context.Background(), Job{Type: "work", ID: "j1", Key: "client"},
			func(context.Context) error {
				close(started)
				<-release
				return nil
			})
	}()
	<-started
	var runs atomic.Int32
	done := make(chan error, 1)
	if err := s.Submit(Job{Type: "work", ID: "j1"}.WithJoinRunning(), counted(&runs),
		func(err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	joinedBy(t, s, "work", 1, 1)
	close(release)
	if err := <-errs; err != nil {
		t.Errorf("RunSync: %v", err)
	}
	if err := <-done; err != nil || runs.Load() != 0 {
		t.Errorf("the Submit onto the running RunSync: %v, ran %d times; want nil and none", err, runs.Load())
	}
}

package fairgate

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// attempts records what a durable handler was given, with its context's fencing token, and fails
// while fail is set.
type attempts struct {
	mu     sync.Mutex
	seen   []DurableJob
	tokens []uint64
	fail   bool
}

func (a *attempts) handle(ctx context.Context, job DurableJob) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seen = append(a.seen, job)
	a.tokens = append(a.tokens, FencingTokenOf(ctx))
	if a.fail {
		return errors.New("the mirror is gone")
	}
	return nil
}

func (a *attempts) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.seen)
}

func (a *attempts) at(i int) DurableJob {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.seen[i]
}

func (a *attempts) tokenAt(i int) uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.tokens[i]
}

func (a *attempts) setFail(fail bool) {
	a.mu.Lock()
	a.fail = fail
	a.mu.Unlock()
}

func openSQLite(t *testing.T, path string) *Store {
	t.Helper()
	store, err := OpenSQLite(path, SQLiteOptions{})
	if err != nil {
		t.Fatalf("OpenSQLite: %v", err)
	}
	return store
}

// durableScheduler is a scheduler on store with the type "repack", run by a (two attempts at
// most, no backoff), whose Store handle is closed at once (the scheduler keeps the store).
func durableScheduler(t *testing.T, store *Store, options Options, a *attempts) *Scheduler {
	t.Helper()
	options.Store = store
	options.MaxConcurrency = 2
	s := newScheduler(t, options)
	store.Close()
	register(t, s, "repack", TypeConfig{ConflictGroup: "repository"})
	if err := s.RegisterDurable("repack", a.handle, RetryPolicy{MaxAttempts: 2,
		InitialBackoff: -1}); err != nil {
		t.Fatalf("RegisterDurable: %v", err)
	}
	return s
}

func TestDurableCallsAreRefusedWithoutAStore(t *testing.T) {
	s := newScheduler(t, Options{})
	register(t, s, "repack", TypeConfig{})
	var a attempts
	for what, err := range map[string]error{
		"RegisterDurable": s.RegisterDurable("repack", a.handle, RetryPolicy{}),
		"Recover":         func() error { _, err := s.Recover(); return err }(),
		"SubmitDurable": func() error {
			_, err := s.SubmitDurable(Job{Type: "repack", ID: "linux", Key: "alice"}, nil)
			return err
		}(),
		"DeadJobs":   func() error { _, err := s.DeadJobs(0, 10); return err }(),
		"FlushState": s.FlushState(),
	} {
		if CodeOf(err) != FailedPrecondition {
			t.Errorf("%s without a store: %v, want FailedPrecondition", what, err)
		}
	}
	if err := s.RegisterDurable("repack", nil, RetryPolicy{}); CodeOf(err) != InvalidArgument {
		t.Errorf("a nil handler: %v", err)
	}
	if _, err := OpenSQLite(t.TempDir(), SQLiteOptions{}); CodeOf(err) != FailedPrecondition {
		t.Errorf("OpenSQLite of a directory: %v, want FailedPrecondition", err)
	}
	if _, err := OpenPostgres("no such = = thing", PostgresOptions{}); CodeOf(err) != InvalidArgument {
		t.Errorf("OpenPostgres of a malformed string: %v, want InvalidArgument", err)
	}
	closed := openSQLite(t, filepath.Join(t.TempDir(), "jobs.db"))
	closed.Close()
	closed.Close() // again: nothing
	if _, err := New(Options{Store: closed}); CodeOf(err) != InvalidArgument {
		t.Errorf("New with a closed store: %v, want InvalidArgument", err)
	}
	if _, err := New(Options{Fleet: FleetOptions{TypeCaps: map[string]int{"repack": 1}}}); CodeOf(err) != InvalidArgument ||
		!strings.Contains(err.Error(), "shared store") {
		t.Errorf("a fleet's type caps without a shared store: %v", err)
	}
}

// checkDurableJobs runs jobs through s: stored and run with their payloads, refused before
// Recover and with a cost hint, retried until dead, listed a page at a time, retried and removed.
func checkDurableJobs(t *testing.T, s *Scheduler, a *attempts, shared bool) {
	job := Job{Type: "repack", ID: "linux", Key: "alice"}
	if _, err := s.SubmitDurable(job, []byte("x")); CodeOf(err) != FailedPrecondition {
		t.Errorf("SubmitDurable before Recover: %v", err)
	}
	report, err := s.Recover()
	if err != nil || report != (RecoveryReport{}) {
		t.Fatalf("Recover of an empty store: %+v, %v", report, err)
	}
	if _, err := s.SubmitDurable(job.WithCost(1), nil); CodeOf(err) != InvalidArgument {
		t.Errorf("a durable job with a cost hint: %v", err)
	}
	payload := []byte{'p', 0, 'k', 0xff}
	sequence, err := s.SubmitDurable(job, payload)
	if err != nil {
		t.Fatalf("SubmitDurable: %v", err)
	}
	eventually(t, "the job runs", func() bool { return a.count() == 1 })
	got := a.at(0)
	if got.Sequence != sequence || got.ID != "linux" || got.Key != "alice" || got.Type != "repack" ||
		got.Attempt != 1 || !bytes.Equal(got.Payload, payload) || (got.LeaseToken > 0) != shared {
		t.Errorf("the handler was given %+v (sequence %d)", got, sequence)
	}
	// Its type's conflict group is fleet-wide with a shared store: its context holds the group's
	// fencing token (FencingTokenOf), as a Submit's function's does.
	if token := a.tokenAt(0); (token > 0) != shared {
		t.Errorf("the handler's context has fencing token %d (shared store: %v)", token, shared)
	}
	// TryAcquire cannot promise at once what the fleet's store grants after the admission.
	if shared {
		_, err := s.TryAcquire(Job{Type: "repack", ID: "mesa", Key: "carol"})
		if CodeOf(err) != FailedPrecondition || !strings.Contains(err.Error(), "fleet-wide leases") {
			t.Errorf("TryAcquire of a type with fleet-wide leases: %v, want FailedPrecondition", err)
		}
	}

	numbers, err := s.SubmitDurableBatch([]DurableSubmission{
		{Job: Job{Type: "repack", ID: "git", Key: "bob"}, Payload: []byte("one")},
		{Job: Job{Type: "repack", ID: "go", Key: "carol"}},
	})
	if err != nil || len(numbers) != 2 || numbers[0] <= sequence || numbers[1] <= numbers[0] {
		t.Fatalf("SubmitDurableBatch: %v, %v", numbers, err)
	}
	if numbers, err := s.SubmitDurableBatch(nil); err != nil || len(numbers) != 0 {
		t.Errorf("an empty batch: %v, %v", numbers, err)
	}
	eventually(t, "the batch runs", func() bool { return a.count() == 3 })

	a.setFail(true)
	broken, err := s.SubmitDurable(Job{Type: "repack", ID: "broken", Key: "alice"}, []byte("b"))
	if err != nil {
		t.Fatalf("SubmitDurable: %v", err)
	}
	doomed, err := s.SubmitDurable(Job{Type: "repack", ID: "doomed", Key: "alice"}, []byte("d"))
	if err != nil {
		t.Fatalf("SubmitDurable: %v", err)
	}
	var dead []StoredJob
	eventually(t, "both die", func() bool {
		dead, err = s.DeadJobs(0, 100)
		return err == nil && len(dead) == 2
	})
	if d := dead[0]; d.Sequence != broken || d.ID != "broken" || d.Key != "alice" ||
		d.Attempts != 2 || string(d.Payload) != "b" || !strings.Contains(d.LastError, "the mirror is gone") ||
		d.SubmittedAt.Year() < 2020 {
		t.Errorf("the first dead job: %+v", d)
	}
	if page, err := s.DeadJobs(broken, 1); err != nil || len(page) != 1 || page[0].Sequence != doomed {
		t.Errorf("the page after %d: %+v, %v", broken, page, err)
	}
	if page, err := s.DeadJobs(doomed, 1); err != nil || len(page) != 0 {
		t.Errorf("the page after the last: %+v, %v", page, err)
	}
	if _, err := s.DeadJobs(0, 0); CodeOf(err) != InvalidArgument {
		t.Errorf("a page of 0: %v", err)
	}

	a.setFail(false)
	runs := a.count()
	if err := s.RetryDeadJob(broken); err != nil {
		t.Fatalf("RetryDeadJob: %v", err)
	}
	eventually(t, "the retried job runs", func() bool { return a.count() == runs+1 })
	if got := a.at(runs); got.Sequence != broken || got.Attempt != 1 {
		t.Errorf("the retried job ran as %+v", got)
	}
	if err := s.RemoveDeadJob(doomed); err != nil {
		t.Errorf("RemoveDeadJob: %v", err)
	}
	if err := s.RemoveDeadJob(doomed); CodeOf(err) != NotFound {
		t.Errorf("RemoveDeadJob again: %v", err)
	}
	if err := s.RetryDeadJob(sequence); CodeOf(err) != NotFound {
		t.Errorf("RetryDeadJob of a job that succeeded: %v", err)
	}
	if err := s.FlushState(); err != nil {
		t.Errorf("FlushState: %v", err)
	}
}

func TestDurableJobsOnSQLiteRunAndSurviveARestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "jobs.db")
	var a attempts
	s := durableScheduler(t, openSQLite(t, path), Options{}, &a)
	checkDurableJobs(t, s, &a, false)

	// A handler running when the scheduler closes: its attempt is cut short, the job stays
	// stored and the next scheduler runs it with its next attempt.
	started := make(chan struct{})
	register(t, s, "gc", TypeConfig{})
	if err := s.RegisterDurable("gc", func(ctx context.Context, job DurableJob) error {
		close(started)
		<-ctx.Done()
		return ctx.Err()
	}, RetryPolicy{}); err != nil {
		t.Fatalf("RegisterDurable: %v", err)
	}
	sequence, err := s.SubmitDurable(Job{Type: "gc", ID: "linux", Key: "alice"}, []byte("gc"))
	if err != nil {
		t.Fatalf("SubmitDurable: %v", err)
	}
	<-started
	s.Close()

	var again attempts
	s = durableScheduler(t, openSQLite(t, path), Options{}, &again)
	register(t, s, "gc", TypeConfig{})
	if err := s.RegisterDurable("gc", again.handle, RetryPolicy{}); err != nil {
		t.Fatalf("RegisterDurable: %v", err)
	}
	if report, err := s.Recover(); err != nil || report.Queued != 1 {
		t.Fatalf("Recover: %+v, %v", report, err)
	}
	eventually(t, "the cut-short job runs again", func() bool { return again.count() == 1 })
	if got := again.at(0); got.Sequence != sequence || got.Attempt != 2 || string(got.Payload) != "gc" {
		t.Errorf("the recovered job ran as %+v", got)
	}
}

func TestADurableHandlerThatPanicsFailsItsAttempt(t *testing.T) {
	var a attempts
	s := durableScheduler(t, openSQLite(t, filepath.Join(t.TempDir(), "jobs.db")), Options{}, &a)
	register(t, s, "gc", TypeConfig{})
	if err := s.RegisterDurable("gc", func(context.Context, DurableJob) error {
		panic("a bug")
	}, RetryPolicy{MaxAttempts: 1}); err != nil {
		t.Fatalf("RegisterDurable: %v", err)
	}
	if _, err := s.Recover(); err != nil {
		t.Fatalf("Recover: %v", err)
	}
	if _, err := s.SubmitDurable(Job{Type: "gc", ID: "linux", Key: "alice"}, nil); err != nil {
		t.Fatalf("SubmitDurable: %v", err)
	}
	var dead []StoredJob
	eventually(t, "the job dies", func() bool {
		var err error
		dead, err = s.DeadJobs(0, 10)
		return err == nil && len(dead) == 1
	})
	if !strings.Contains(dead[0].LastError, "the durable handler panicked: a bug") {
		t.Errorf("the dead job's error: %q", dead[0].LastError)
	}
}

// TestDurableJobsOnPostgreSQL runs the same calls on a throwaway PostgreSQL server
// (scripts/pg_temp.sh), as a replica with the fleet's options.
func TestDurableJobsOnPostgreSQL(t *testing.T) {
	if matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl"); len(matches) == 0 {
		t.Skip("PostgreSQL is not installed (scripts/setup.sh installs it)")
	}
	parent := ""
	if info, err := os.Stat("/dev/shm"); err == nil && info.IsDir() {
		parent = "/dev/shm"
	}
	dir, err := os.MkdirTemp(parent, "fairgate-go-pg-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil { // the server's user must reach its socket
		t.Fatal(err)
	}
	script, err := filepath.Abs("../../scripts/pg_temp.sh")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(script, "start", dir).Output()
	if err != nil {
		t.Fatalf("pg_temp.sh start: %v", err)
	}
	defer exec.Command(script, "stop", dir).Run()
	conninfo := strings.TrimSpace(string(out))

	if _, err := OpenPostgres(conninfo, PostgresOptions{Connections: -1}); CodeOf(err) != InvalidArgument {
		t.Errorf("OpenPostgres with -1 connections: %v", err)
	}
	store, err := OpenPostgres(conninfo, PostgresOptions{Replica: "replica-from-go", Connections: 2})
	if err != nil {
		t.Fatalf("OpenPostgres: %v", err)
	}
	var a attempts
	s := durableScheduler(t, store, Options{Fleet: FleetOptions{
		ClaimInterval:  200 * time.Millisecond,
		MaxClaimed:     2,
		ConflictGroups: []string{"repository"},
		TypeCaps:       map[string]int{"repack": 1},
	}}, &a)
	checkDurableJobs(t, s, &a, true)
	s.Close()
}

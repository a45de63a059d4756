package fairgate

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"
)

// RunSync of a job that does nothing, from 1,000 goroutines at once: what the cgo crossing and
// the scheduler cost a Go caller per call (cachew's own scheduler's workload: issue 53).
//
//	go test -run '^$' -bench RunSync -benchtime 200000x
func BenchmarkRunSyncNoopFrom1000Goroutines(b *testing.B) { runSyncFrom1000(b, CoalesceOff) }

// The same of a coalescing type's jobs (each goroutine's of an id of its own, so that few join),
// which the C library queues with nobody waiting (fairgate_run_async) and runs (each function in
// a goroutine that a callback from its pool starts, offload.h).
func BenchmarkRunSyncNoopFrom1000GoroutinesInC(b *testing.B) { runSyncFrom1000(b, CoalesceJoin) }

func runSyncFrom1000(b *testing.B, coalesce Coalesce) {
	s, err := New(Options{MaxConcurrency: 8})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.RegisterType("clone", TypeConfig{Priority: 8, Coalesce: coalesce}); err != nil {
		b.Fatal(err)
	}
	const callers = 1000
	calls := make(chan int, b.N)
	for i := 0; i < b.N; i++ {
		calls <- i
	}
	close(calls)
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for g := 0; g < callers; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			job := Job{Type: "clone", ID: "repo" + strconv.Itoa(g%50), Key: "c" + strconv.Itoa(g%100)}
			if coalesce != CoalesceOff {
				job.ID = "repo" + strconv.Itoa(g)
			}
			for range calls {
				if err := s.RunSync(context.Background(), job,
					func(context.Context) error { return nil }); err != nil {
					b.Error(err)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
}

// Submit bursts: b.N jobs queued at once, each doing nothing.
func BenchmarkSubmitBurst(b *testing.B) { submitBurst(b, CoalesceOff) }

// A burst of a coalescing type's jobs (each of an id of its own, so none joins), which the C
// library's Submit queues and runs (each function in a goroutine that a callback from its pool
// starts, offload.h).
func BenchmarkSubmitBurstInC(b *testing.B) { submitBurst(b, CoalesceJoin) }

func submitBurst(b *testing.B, coalesce Coalesce) {
	s, err := New(Options{MaxConcurrency: 8})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.RegisterType("build", TypeConfig{Priority: 8, Coalesce: coalesce}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	wg.Add(b.N)
	for i := 0; i < b.N; i++ {
		if err := s.Submit(Job{Type: "build", ID: strconv.Itoa(i), Key: strconv.Itoa(i % 16)},
			func(context.Context) error { return nil }, func(error) { wg.Done() }); err != nil {
			b.Fatal(err)
		}
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "jobs/s")
}

// Durable no-op jobs stored on a SQLite file at synchronous=NORMAL from 8 goroutines, each run
// by a Go handler (in a goroutine that a callback from the C library's pool starts) and removed:
// what a Go caller gets end to end, beside durable_bench's BM_DurableThroughCompletion (C++, the
// same work).
//
//	go test -run '^$' -bench DurableThroughCompletion -benchtime 20000x
func BenchmarkDurableThroughCompletion8Submitters(b *testing.B) {
	store, err := OpenSQLite(b.TempDir()+"/jobs.db", SQLiteOptions{SyncNormal: true})
	if err != nil {
		b.Fatal(err)
	}
	s, err := New(Options{MaxConcurrency: 8, Store: store})
	store.Close()
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.RegisterType("build", TypeConfig{Priority: 8}); err != nil {
		b.Fatal(err)
	}
	var ran sync.WaitGroup
	ran.Add(b.N)
	if err := s.RegisterDurable("build", func(context.Context, DurableJob) error {
		ran.Done()
		return nil
	}, RetryPolicy{}); err != nil {
		b.Fatal(err)
	}
	if _, err := s.Recover(); err != nil {
		b.Fatal(err)
	}
	const submitters = 8
	jobs := make(chan int, b.N)
	for i := 0; i < b.N; i++ {
		jobs <- i
	}
	close(jobs)
	payload := make([]byte, 64)
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for g := 0; g < submitters; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				job := Job{Type: "build", ID: strconv.Itoa(i % 64), Key: strconv.Itoa(i % 16)}
				if _, err := s.SubmitDurable(job, payload); err != nil {
					b.Error(err)
					ran.Done() // it will not run
				}
			}
		}()
	}
	wg.Wait()
	ran.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "jobs/s")
}

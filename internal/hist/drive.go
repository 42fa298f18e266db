package hist

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Drive is the outcome of a closed-loop run (RunClosedLoop): operations,
// the writes among them, read and write latencies, and the run's length.
type Drive struct {
	Ops, Writes int64
	Read, Write Histogram
	Secs        float64
}

// RunClosedLoop runs clients closed-loop for dur or until ctx ends. Client
// c calls the op newClient(c) returns back to back until the time is up or
// op fails (the run ends early once every client has failed); op reports whether it was a write (its latency is recorded
// apart from reads'); done, if not nil, runs when the client stops. spawn
// starts each client's goroutine (nil: a plain go statement; the CLI's
// demo passes one that turns a panic into its exit code). It returns the
// clients' merged figures and the first error, or ctx's if it ended the
// run.
func RunClosedLoop(ctx context.Context, clients int, dur time.Duration, spawn func(func()),
	newClient func(c int) (op func() (write bool, err error), done func())) (Drive, error) {
	if spawn == nil {
		spawn = func(fn func()) { go fn() }
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		all      Drive
		stop     atomic.Bool
		firstErr error
	)
	start := time.Now()
	for c := range clients {
		op, done := newClient(c)
		wg.Add(1)
		spawn(func() {
			defer wg.Done()
			if done != nil {
				defer done()
			}
			var r Drive
			var err error
			for err == nil && !stop.Load() {
				t0 := time.Now()
				var w bool
				w, err = op()
				if w {
					r.Write.Record(time.Since(t0))
					r.Writes++
				} else {
					r.Read.Record(time.Since(t0))
				}
				r.Ops++
			}
			mu.Lock()
			all.Ops += r.Ops
			all.Writes += r.Writes
			all.Read.Merge(&r.Read)
			all.Write.Merge(&r.Write)
			if err != nil && firstErr == nil {
				firstErr = err
			}
			mu.Unlock()
		})
	}
	finished := make(chan struct{}) // every client stopped (all failed)
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-time.After(dur):
	case <-ctx.Done():
	case <-finished:
	}
	stop.Store(true)
	<-finished
	all.Secs = max(time.Since(start).Seconds(), 1e-9)
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return all, firstErr
}

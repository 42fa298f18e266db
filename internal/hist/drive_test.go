package hist

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// TestRunClosedLoop: every client runs until the time is up, writes are
// counted and timed apart from reads, done runs once per client, the first
// error ends its client and is returned, and a cancelled context ends the
// run with its error.
func TestRunClosedLoop(t *testing.T) {
	var dones atomic.Int32
	d, err := RunClosedLoop(context.Background(), 3, 20*time.Millisecond, nil, func(c int) (func() (bool, error), func()) {
		n := 0
		return func() (bool, error) { n++; return n%4 == 0, nil }, func() { dones.Add(1) }
	})
	if err != nil {
		t.Fatal(err)
	}
	if d.Ops < 12 || d.Writes == 0 || d.Writes > d.Ops/4+3 || dones.Load() != 3 || d.Secs < 0.02 {
		t.Fatalf("ops %d writes %d dones %d secs %v", d.Ops, d.Writes, dones.Load(), d.Secs)
	}
	if d.Read.Count()+d.Write.Count() != uint64(d.Ops) || d.Write.Count() != uint64(d.Writes) {
		t.Fatalf("histograms hold %d reads and %d writes of %d ops", d.Read.Count(), d.Write.Count(), d.Ops)
	}

	boom := errors.New("boom")
	start := time.Now()
	_, err = RunClosedLoop(context.Background(), 2, time.Hour, nil, func(c int) (func() (bool, error), func()) {
		return func() (bool, error) { return false, boom }, nil
	})
	if !errors.Is(err, boom) || time.Since(start) > time.Minute {
		t.Fatalf("failing clients: %v after %v", err, time.Since(start))
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err = RunClosedLoop(ctx, 2, time.Hour, nil, func(c int) (func() (bool, error), func()) {
		return func() (bool, error) { return false, nil }, nil
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("cancelled run: %v", err)
	}
}

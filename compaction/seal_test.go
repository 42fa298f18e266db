package compaction

import (
	"context"
	"testing"
	"time"
)

func TestLimiter(t *testing.T) {
	var nilL *Limiter
	if err := nilL.Wait(context.Background(), 1<<30); err != nil {
		t.Fatal(err)
	}
	l := NewLimiter(1 << 20) // burst 1 MiB
	ctx, cancel := context.WithCancel(context.Background())
	if err := l.Wait(ctx, 1<<20); err != nil {
		t.Fatal(err)
	}
	cancel()
	// The bucket is empty: a large wait must notice the cancelled context
	// rather than sleep for seconds.
	start := time.Now()
	if err := l.Wait(ctx, 8<<20); err == nil {
		t.Fatal("wait on a cancelled context succeeded")
	}
	if time.Since(start) > 5*time.Second {
		t.Fatal("cancelled wait slept")
	}
}

func TestTracker(t *testing.T) {
	var tr Tracker
	j := tr.Start("seal", "posts", 7, 100)
	j.Add(40)
	j.SetPhase("write blocks")
	p := tr.Running()
	if len(p) != 1 || p[0].Done != 40 || p[0].Phase != "write blocks" || p[0].Range != 7 {
		t.Fatalf("running %+v", p)
	}
	j.Finish()
	if len(tr.Running()) != 0 || tr.Finished() != 1 {
		t.Fatalf("after finish: %+v, %d", tr.Running(), tr.Finished())
	}
}

package compaction

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestSortKeys(t *testing.T) {
	for _, n := range []int{0, 1, 2, 100, 5000} {
		for _, bits := range []uint{4, 20, 48, 64} {
			rng := rand.New(rand.NewPCG(uint64(n), uint64(bits)))
			keys := make([]uint64, n)
			idx := make([]uint32, n)
			for i := range keys {
				keys[i] = rng.Uint64() >> (64 - bits)
				idx[i] = uint32(i)
			}
			orig := slices.Clone(keys)
			SortKeys(keys, idx)
			if !slices.IsSorted(keys) {
				t.Fatalf("n=%d bits=%d: not sorted", n, bits)
			}
			for i := range keys {
				if orig[idx[i]] != keys[i] {
					t.Fatalf("n=%d bits=%d: idx does not follow keys", n, bits)
				}
				if i > 0 && keys[i] == keys[i-1] && idx[i] < idx[i-1] {
					t.Fatalf("n=%d bits=%d: not stable", n, bits)
				}
			}
		}
	}
}

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

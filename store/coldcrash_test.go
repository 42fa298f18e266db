package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestCrashDuringAging crashes the store (dropping unsynced writes) while
// seals and merges run beside concurrent SyncAlways writers: every
// acknowledged batch must survive, whole, whatever step the jobs were at.
func TestCrashDuringAging(t *testing.T) {
	rounds := 10
	if testing.Short() {
		rounds = 3
	}
	const writers = 6
	rng := rand.New(rand.NewPCG(11, 3))
	fs := vfs.NewCrashableMem()
	opts := testOptions(fs)
	opts.ColdBlockSize = 64
	db := openPairStore(t, "a", opts, 8)
	var err error
	// Background rows in many ranges so seals have blocks to write.
	b := db.NewBatch()
	for i := uint64(0); i < 4000; i++ {
		must(t, b.Set("posts", 1<<12+i*3, i%7+1, 0))
	}
	must(t, b.Commit())
	b.Close()
	acked := make([]int64, writers)

	for round := 0; round < rounds; round++ {
		var stop atomic.Bool
		var wg sync.WaitGroup
		// Writers hit ranges that are being sealed and merged: writer w
		// uses an id of range w.
		ackedNow := startPairWriters(db, acked, func(w int) uint64 { return uint64(w)<<8 | uint64(w) }, &stop, &wg)
		wg.Add(1)
		jobRNG := rand.New(rand.NewPCG(uint64(round), 17)) // not shared with this goroutine
		go func() {
			defer wg.Done()
			ctx := context.Background()
			rng := jobRNG
			for !stop.Load() {
				rid := uint64(rng.IntN(writers + 40))
				if db.SealRange(ctx, "posts", rid) != nil || db.Compact(ctx) != nil {
					return
				}
				if rng.IntN(4) == 0 && db.Checkpoint() != nil {
					return
				}
			}
		}()
		time.Sleep(time.Duration(5+rng.IntN(40)) * time.Millisecond)
		for w := range writers {
			acked[w] = ackedNow[w].Load()
		}
		crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(100), RNG: rng})
		// Batches acknowledged between the loads above and the clone may be
		// in it too (the in-memory fsync is instant): the clone holds at
		// most what is acknowledged now, plus one in flight per writer
		// (as in TestCrashConcurrent).
		upper := make([]int64, writers)
		for w := range writers {
			upper[w] = ackedNow[w].Load()
		}
		stop.Store(true)
		db.Close()
		wg.Wait()

		fs = crashed
		opts.FS = fs
		db, err = Open("a", opts)
		must(t, err)
		must(t, db.Check())
		where := fmt.Sprintf("round %d", round)
		c, _ := db.Counter("posts")
		for w := range writers {
			id := uint64(w)<<8 | uint64(w)
			x, err := c.GetColumn(id, "reposts")
			must(t, err)
			y, err := c.GetColumn(id+pairOffset, "comments")
			must(t, err)
			if x != y || int64(x) < acked[w] || int64(x) > upper[w]+1 {
				t.Fatalf("%s: writer %d: %d/%d, acknowledged %d (%d by the crash)", where, w, x, y, acked[w], upper[w])
			}
			acked[w] = int64(x)
		}
		for i := uint64(0); i < 4000; i += 97 {
			if v, _ := c.GetColumn(1<<12+i*3, "reposts"); v != i%7+1 {
				t.Fatalf("%s: background row %d = %d, want %d", where, i, v, i%7+1)
			}
		}
		must(t, db.Verify(context.Background()))
	}
	must(t, db.Close())
}

// TestSealFailureKeepsRangeHot injects a write error into sealing (as a full
// disk would): the job fails, the range stays hot and readable with every
// write made during the attempt, and a retry succeeds.
func TestSealFailureKeepsRangeHot(t *testing.T) {
	fs := vfs.NewMem()
	opts := testOptions(fs)
	opts.ColdBlockSize = 64
	var fail atomic.Int32
	opts.testHookBlockWrite = func() error {
		if fail.Add(-1) == 0 {
			return errors.New("injected: no space left on device")
		}
		return nil
	}
	db := openTest(t, fs, "f", opts)
	c := newPosts(t, db, 12)
	for i := uint64(0); i < 500; i++ {
		must(t, c.Set(i*5, i+1, 2, 3))
	}
	ctx := context.Background()
	for _, n := range []int32{1, 3} { // fail on the first, then the third block
		fail.Store(n)
		if err := db.SealRange(ctx, "posts", 0); err == nil {
			t.Fatalf("seal with failure at block %d succeeded", n)
		}
		if rs := c.cs.lookupRange(0); rs.tier() != "hot" {
			t.Fatalf("range after failed seal is %s", rs.tier())
		}
		_, err := c.Incr(5, "likes", 10)
		must(t, err)
	}
	must(t, db.Check())
	fail.Store(0)
	must(t, db.SealRange(ctx, "posts", 0))
	if rs := c.cs.lookupRange(0); rs.tier() != "cold" {
		t.Fatalf("range after retried seal is %s", rs.tier())
	}
	for i := uint64(0); i < 500; i++ {
		want := []uint64{i + 1, 2, 3}
		if i == 1 {
			want[2] += 20
		}
		if got := get(t, c, i*5); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("row %d = %v, want %v", i*5, got, want)
		}
	}
	must(t, db.Verify(ctx))
}

package store

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tallydb/tally/cold"
	"github.com/tallydb/tally/internal/testutil"
)

// TestSealPreservesEveryRow: after sealing, the cold reader returns exactly
// what the hot table held, for every id of the range, present or absent.
func TestSealPreservesEveryRow(t *testing.T) {
	fs := vfs.NewMem()
	opts := testOptions(fs)
	opts.ColdBlockSize = 512
	db := openTest(t, fs, "s", opts)
	c := newPosts(t, db, 12) // 4096 ids per range
	rng := rand.New(rand.NewPCG(5, 5))
	const rid = 3
	for i := 0; i < 2500; i++ {
		id := uint64(rid)<<12 | uint64(rng.IntN(4096))
		vals := []uint64{uint64(rng.IntN(3)), uint64(rng.IntN(70000)), rng.Uint64() >> uint(rng.IntN(64))}
		if rng.IntN(10) == 0 {
			must(t, c.Delete(id))
			continue
		}
		must(t, c.Set(id, vals...))
	}
	ids := make([]uint64, 4096)
	for k := range ids {
		ids[k] = uint64(rid)<<12 | uint64(k)
	}
	before, err := c.MultiGet(ids, nil)
	must(t, err)
	before = slices.Clone(before)
	must(t, db.SealRange(context.Background(), "posts", rid))
	if tier := c.cs.lookupRange(ids[0]).tier(); tier != "cold" {
		t.Fatalf("tier %s", tier)
	}
	after, err := c.MultiGet(ids, nil)
	must(t, err)
	for k := range ids {
		if !slices.Equal(before[k*3:k*3+3], after[k*3:k*3+3]) {
			t.Fatalf("id %d: hot %v, cold %v", ids[k], before[k*3:k*3+3], after[k*3:k*3+3])
		}
		got := get(t, c, ids[k]) // the single-row path too
		if !slices.Equal(got, before[k*3:k*3+3]) {
			t.Fatalf("Get id %d: %v, want %v", ids[k], got, before[k*3:k*3+3])
		}
	}
	must(t, db.Verify(context.Background()))
}

// TestColdCorruption damages a cold range on disk in each way the issue
// names and checks reads and Verify return named errors, never a wrong
// count.
func TestColdCorruption(t *testing.T) {
	for _, damage := range []string{"flip", "truncate", "missing", "swap"} {
		t.Run(damage, func(t *testing.T) {
			fs := vfs.NewMem()
			opts := testOptions(fs)
			opts.ColdBlockSize = 64
			opts.BlockCacheSize = 1 // nothing stays cached
			db := openTest(t, fs, "x", opts)
			c := newPosts(t, db, 12)
			for i := uint64(0); i < 300; i++ {
				must(t, c.Set(i*3, i+1, 1, 1))
			}
			must(t, db.SealRange(context.Background(), "posts", 0))
			rs := c.cs.lookupRange(0)
			ids := rs.cold.v.blockIDs
			if len(ids) < 3 {
				t.Fatalf("only %d blocks", len(ids))
			}
			key := appendColdBlockKey(nil, c.cs.id, 0, ids[1])
			v, closer, err := db.pdb().Get(key)
			must(t, err)
			blk := slices.Clone(v)
			closer.Close()
			switch damage {
			case "flip":
				blk[len(blk)/2] ^= 0x10
				must(t, db.pdb().Set(key, blk, pebble.Sync))
			case "truncate":
				must(t, db.pdb().Set(key, blk[:len(blk)/2], pebble.Sync))
			case "missing":
				must(t, db.pdb().Delete(key, pebble.Sync))
			case "swap": // block 2's bytes under block 1's id
				v2, closer2, err := db.pdb().Get(appendColdBlockKey(nil, c.cs.id, 0, ids[2]))
				must(t, err)
				must(t, db.pdb().Set(key, slices.Clone(v2), pebble.Sync))
				closer2.Close()
			}
			db.blockCache.Evict(rs.cold.id)
			// Find an id stored in block 1 and read it.
			var victim uint64
			for id := uint64(0); id < 900; id += 3 {
				if b, _, ok := rs.cold.Desc().Locate(id); ok && b == 1 {
					victim = id
					break
				}
			}
			_, err = c.Get(victim, nil)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Get of a damaged block: %v", err)
			}
			if damage == "missing" && !errors.Is(err, cold.ErrMissingBlock) {
				t.Fatalf("missing block not named: %v", err)
			}
			if _, err := c.MultiGet([]uint64{0, victim}, nil); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("MultiGet of a damaged block: %v", err)
			}
			if _, err := c.Incr(victim, "likes", 1); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Incr over a damaged block: %v", err)
			}
			err = db.Verify(context.Background())
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "posts range 0") {
				t.Fatalf("Verify: %v", err)
			}
		})
	}
}

// TestColdRangeValueDamage: a damaged cold range value fails Open with
// ErrCorrupt and changes nothing on disk.
func TestColdRangeValueDamage(t *testing.T) {
	fs := vfs.NewMem()
	db, err := Open("v", testOptions(fs))
	must(t, err)
	c := newPosts(t, db, 12)
	must(t, c.Set(7, 1, 2, 3))
	must(t, db.SealRange(context.Background(), "posts", 0))
	key := appendColdRangeKey(nil, c.cs.id, 0)
	v, closer, err := db.pdb().Get(key)
	must(t, err)
	bad := slices.Clone(v)
	closer.Close()
	bad[3] ^= 1
	must(t, db.pdb().Set(key, bad, pebble.Sync))
	must(t, db.Close())
	if _, err := Open("v", testOptions(fs)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("open with a damaged range value: %v", err)
	}
	// The failed Open wrote nothing: a second one fails the same way.
	if _, err := Open("v", testOptions(fs)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("second open: %v", err)
	}
}

func FuzzDecodeColdRange(f *testing.F) {
	f.Add(appendColdRange(nil, &coldRangeValue{seq: 9, blockBytes: 100, nextBlockID: 3, blockIDs: []uint32{0, 2}, desc: []byte("desc")}))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := decodeColdRange(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error not marked corrupt: %v", err)
			}
			return
		}
		if re := appendColdRange(nil, v); string(re) != string(b) {
			t.Fatalf("accepted value does not re-encode")
		}
	})
}

// TestKillDuringAging runs a child that writes under SyncAlways while it
// seals and merges ranges, SIGKILLs it, and checks every acknowledged write
// survived and the store verifies.
func TestKillDuringAging(t *testing.T) {
	if dir := os.Getenv("TALLY_KILL_AGING_DIR"); dir != "" {
		killAgingChild(dir)
		return
	}
	if testing.Short() {
		t.Skip("spawns child processes")
	}
	dir := t.TempDir()
	const writers = 3
	acked := make([]int64, writers)
	for round := 0; round < 3; round++ {
		lines, jobs := 0, 0
		started := time.Now()
		res := testutil.RunChild(t, "TestKillDuringAging", []string{"TALLY_KILL_AGING_DIR=" + dir}, func(line string) bool {
			f := strings.Fields(line)
			switch {
			case len(f) == 3 && f[0] == "ack":
				w, _ := strconv.Atoi(f[1])
				n, _ := strconv.ParseInt(f[2], 10, 64)
				acked[w] = max(acked[w], n)
				lines++
			case len(f) == 1 && f[0] == "job":
				jobs++
			}
			// Kill once several seals/merges ran, in the middle of more
			// (or after a deadline, so a slow child cannot hang the test).
			return jobs >= 5+round && lines > 200 || time.Since(started) > 20*time.Second
		})
		killed := res.Killed
		t.Logf("round %d: %d acks, %d jobs before the kill", round, lines, jobs)
		if !killed {
			t.Fatalf("round %d: child exited by itself", round)
		}
		db, err := Open(dir, &Options{DisableBackground: true})
		must(t, err)
		must(t, db.Check())
		must(t, db.Verify(context.Background()))
		c, _ := db.Counter("posts")
		for w := range writers {
			id := uint64(w)<<10 | 5
			x, err := c.GetColumn(id, "reposts")
			must(t, err)
			y, err := c.GetColumn(id+pairOffset, "comments")
			must(t, err)
			if x != y || int64(x) < acked[w] || int64(x) > acked[w]+1 {
				t.Fatalf("round %d writer %d: %d/%d, acknowledged %d", round, w, x, y, acked[w])
			}
			acked[w] = int64(x)
		}
		for i := uint64(0); i < 3000; i += 37 {
			if v, _ := c.GetColumn(1<<16+i*11, "reposts"); v != i%9+1 {
				t.Fatalf("round %d: background row %d = %d", round, i, v)
			}
		}
		db.Close()
	}
}

func killAgingChild(dir string) {
	db, err := Open(dir, &Options{ColdBlockSize: 64, CompactionBytesPerSec: 256 << 10, CheckpointLogBytes: 8 << 10})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child open:", err)
		os.Exit(2)
	}
	if _, err := db.Counter("posts"); err != nil {
		db.CreateCounter("posts", CounterOptions{RangeBits: 10})
		db.AddColumn("posts", "reposts", ColumnOptions{})
		db.AddColumn("posts", "comments", ColumnOptions{})
		b := db.NewBatch()
		for i := uint64(0); i < 3000; i++ {
			b.Set("posts", 1<<16+i*11, i%9+1, 0)
		}
		if err := b.Commit(); err != nil {
			fmt.Fprintln(os.Stderr, "child load:", err)
			os.Exit(2)
		}
	}
	c, _ := db.Counter("posts")
	var mu sync.Mutex
	stdout := bufio.NewWriter(os.Stdout)
	say := func(format string, args ...any) {
		mu.Lock()
		fmt.Fprintf(stdout, format, args...)
		stdout.Flush()
		mu.Unlock()
	}
	for w := range 3 {
		go func() {
			id := uint64(w)<<10 | 5
			for {
				if err := incrPair(db, id); err != nil {
					fmt.Fprintln(os.Stderr, "child incr:", err)
					os.Exit(3)
				}
				v, _ := c.GetColumn(id, "reposts")
				say("ack %d %d\n", w, v)
			}
		}()
	}
	rng := rand.New(rand.NewPCG(uint64(os.Getpid()), 1))
	for {
		// Ranges with data: the writers' (0-2) and the background rows' (64-96).
		rid := uint64(rng.IntN(3))
		if rng.IntN(2) == 0 {
			rid = 64 + uint64(rng.IntN(33))
		}
		if err := db.SealRange(context.Background(), "posts", rid); err != nil {
			fmt.Fprintln(os.Stderr, "child seal:", err)
			os.Exit(4)
		}
		if err := db.Compact(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "child compact:", err)
			os.Exit(4)
		}
		say("job\n")
	}
}

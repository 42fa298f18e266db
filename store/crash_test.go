package store

import (
	"bufio"
	"fmt"
	"github.com/tallydb/tally/internal/testutil"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// pairBatch increments ids w and w+pairOffset together; recovery must find
// them equal (no half-applied batch).
const pairOffset = 1 << 20

func incrPair(db *DB, w uint64) error {
	b := db.NewBatch()
	defer b.Close()
	if err := b.Incr("posts", w, "reposts", 1); err != nil {
		return err
	}
	if err := b.Incr("posts", w+pairOffset, "comments", 1); err != nil {
		return err
	}
	return b.Commit()
}

// openPairStore opens a store on opts.FS with counter "posts" (reposts,
// comments) for pair batches. The caller closes it (tests reopen it).
func openPairStore(t *testing.T, dir string, opts *Options, rangeBits uint8) *DB {
	t.Helper()
	db, err := Open(dir, opts)
	must(t, err)
	must(t, db.CreateCounter("posts", CounterOptions{RangeBits: rangeBits}))
	must(t, db.AddColumn("posts", "reposts", ColumnOptions{}))
	must(t, db.AddColumn("posts", "comments", ColumnOptions{}))
	return db
}

// startPairWriters starts one goroutine per writer w committing pair
// batches on id(w) until stop, counting acknowledgements from acked[w] on.
func startPairWriters(db *DB, acked []int64, id func(w int) uint64, stop *atomic.Bool, wg *sync.WaitGroup) []atomic.Int64 {
	ackedNow := make([]atomic.Int64, len(acked))
	for w := range acked {
		ackedNow[w].Store(acked[w])
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				if err := incrPair(db, id(w)); err != nil {
					return // the DB is being closed under us
				}
				ackedNow[w].Add(1)
			}
		}()
	}
	return ackedNow
}

func checkPairs(t *testing.T, db *DB, acked []int64, where string) {
	t.Helper()
	checkPairsWithin(t, db, acked, acked, where)
}

// checkPairsWithin checks every pair is whole and writer w's count is at
// least acked[w] (nothing acknowledged lost) and at most upper[w]+1 (one
// batch in flight).
func checkPairsWithin(t *testing.T, db *DB, acked, upper []int64, where string) {
	t.Helper()
	c, err := db.Counter("posts")
	must(t, err)
	for w, a := range acked {
		x, err := c.GetColumn(uint64(w), "reposts")
		must(t, err)
		y, err := c.GetColumn(uint64(w)+pairOffset, "comments")
		must(t, err)
		if x != y {
			t.Fatalf("%s: writer %d: half-applied batch: %d vs %d", where, w, x, y)
		}
		// At most one batch per writer was in flight at the crash.
		if int64(x) < a || int64(x) > upper[w]+1 {
			t.Fatalf("%s: writer %d: count %d, acknowledged %d (%d by the crash)", where, w, x, a, upper[w])
		}
	}
}

// TestCrashConcurrent crashes a store at random points while several writers
// commit under SyncAlways and checkpoints run, on a filesystem that drops
// unsynced writes. Every acknowledged batch must survive, whole.
// TALLY_CRASH_ROUNDS=N runs N rounds instead of 12 and TALLY_CRASH_SEED=S
// draws other crash points: a long loop (thousands of rounds over several
// seeds) is how the WAL-check false positives in logcheck_test.go were found.
func TestCrashConcurrent(t *testing.T) {
	rounds := 12
	if testing.Short() {
		rounds = 4
	}
	rounds = testutil.EnvInt(t, "TALLY_CRASH_ROUNDS", rounds)
	const writers = 8
	seed, _ := testutil.EnvSeed(t, "TALLY_CRASH_SEED", 7)
	rng := rand.New(rand.NewPCG(seed, 7))
	fs := vfs.NewCrashableMem()
	opts := testOptions(fs)
	opts.CheckpointChunkRows = 5
	db := openPairStore(t, "c", opts, 16)
	var err error
	acked := make([]int64, writers)

	for round := 0; round < rounds; round++ {
		var stop atomic.Bool
		var wg sync.WaitGroup
		ackedNow := startPairWriters(db, acked, func(w int) uint64 { return uint64(w) }, &stop, &wg)
		wg.Add(1)
		go func() { // checkpoints race with the crash too
			defer wg.Done()
			for !stop.Load() {
				if db.Checkpoint() != nil {
					return
				}
				time.Sleep(time.Millisecond)
			}
		}()
		time.Sleep(time.Duration(5+rng.IntN(30)) * time.Millisecond)
		// Everything acknowledged before the clone must be in it.
		for w := range writers {
			acked[w] = ackedNow[w].Load()
		}
		crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(100), RNG: rng})
		// Batches acknowledged between the loads above and the clone may be
		// in it too (the in-memory fsync is instant): the clone holds at
		// most what is acknowledged now, plus one in flight per writer.
		upper := make([]int64, writers)
		for w := range writers {
			upper[w] = ackedNow[w].Load()
		}
		stop.Store(true)
		db.Close()
		wg.Wait()

		fs = crashed
		opts.FS = fs
		db, err = Open("c", opts)
		must(t, err)
		checkPairsWithin(t, db, acked, upper, fmt.Sprintf("round %d", round))
		c, _ := db.Counter("posts")
		for w := range writers {
			v, _ := c.GetColumn(uint64(w), "reposts")
			acked[w] = int64(v)
		}
	}
	must(t, db.Close())
}

// TestKillChild runs a child process that commits batches under SyncAlways
// and prints each acknowledgement, SIGKILLs it mid-write, reopens the store
// and checks every acknowledged batch is there, whole. Repeated on the same
// directory so recovery of a recovered store is exercised too.
func TestKillChild(t *testing.T) {
	if dir := os.Getenv("TALLY_KILL_CHILD_DIR"); dir != "" {
		killChild(dir)
		return
	}
	if testing.Short() {
		t.Skip("spawns child processes")
	}
	dir := t.TempDir()
	const writers = 4
	acked := make([]int64, writers)
	for round := 0; round < 3; round++ {
		lines := 0
		testutil.RunChild(t, "TestKillChild", []string{"TALLY_KILL_CHILD_DIR=" + dir}, func(line string) bool {
			f := strings.Fields(line)
			if len(f) != 3 || f[0] != "ack" {
				return false
			}
			w, _ := strconv.Atoi(f[1])
			n, _ := strconv.ParseInt(f[2], 10, 64)
			acked[w] = max(acked[w], n)
			// Kill mid-write, then keep reading: every line the child
			// printed before it died is an acknowledgement.
			lines++
			return lines == 400+round*300
		})
		if lines < 400 {
			t.Fatalf("child stopped early after %d acks", lines)
		}
		db, err := Open(dir, &Options{DisableBackground: true})
		must(t, err)
		checkPairs(t, db, acked, fmt.Sprintf("kill round %d", round))
		c, _ := db.Counter("posts")
		for w := range writers {
			v, _ := c.GetColumn(uint64(w), "reposts")
			acked[w] = int64(v)
		}
		// Leave the log un-checkpointed for the next round's recovery.
		db.stopBackground()
		db.closed.Store(true)
		db.pdb().Close()
		db.lock.Close()
	}
}

// killChild is the child side of TestKillChild: it never returns normally.
func killChild(dir string) {
	db, err := Open(dir, &Options{CheckpointLogBytes: 4 << 10})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child open:", err)
		os.Exit(2)
	}
	if _, err := db.Counter("posts"); err != nil {
		db.CreateCounter("posts", CounterOptions{RangeBits: 16})
		db.AddColumn("posts", "reposts", ColumnOptions{})
		db.AddColumn("posts", "comments", ColumnOptions{})
	}
	c, _ := db.Counter("posts")
	var mu sync.Mutex
	stdout := bufio.NewWriter(os.Stdout)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				if err := incrPair(db, uint64(w)); err != nil {
					fmt.Fprintln(os.Stderr, "child incr:", err)
					os.Exit(3)
				}
				v, _ := c.GetColumn(uint64(w), "reposts")
				mu.Lock()
				fmt.Fprintf(stdout, "ack %d %d\n", w, v)
				stdout.Flush()
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

package store

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tallydb/tally/internal/testutil"
)

// countPayload is the payload of a "count" job: row id and chunks.
func countPayload(id uint64, chunks int64) []byte {
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, id), uint64(chunks))
}

// countHandler runs "count" jobs: chunk i adds 1 to posts[id].likes and
// puts plain key id<<16|i, so a chunk applied twice (or never) shows.
// before, if set, runs before each chunk's commit (fault injection).
func countHandler(db *DB, f *Family, before func(run *JobRun, chunk int64) error) JobHandler {
	return func(ctx context.Context, run *JobRun) error {
		id := binary.BigEndian.Uint64(run.Payload())
		n := int64(binary.BigEndian.Uint64(run.Payload()[8:]))
		next := int64(0)
		if c := run.Cursor(); c != nil {
			next = int64(binary.BigEndian.Uint64(c))
		}
		for i := next; i < n || i == 0 && n == 0; i++ {
			if err := ctx.Err(); err != nil {
				return err
			}
			if before != nil {
				if err := before(run, i); err != nil {
					return err
				}
			}
			b := db.NewBatch()
			if n > 0 {
				if err := b.Incr("posts", id, "likes", 1); err != nil {
					return err
				}
				if err := f.Put(b, famKey(f, id<<16|uint64(i)), []byte{1}); err != nil {
					return err
				}
			}
			err := run.Commit(ctx, b, JobProgress{
				Cursor: binary.BigEndian.AppendUint64(nil, uint64(i+1)),
				Done:   min(i+1, n), Total: n, Finished: i+1 >= n,
			})
			b.Close()
			if err != nil {
				return err
			}
		}
		return nil
	}
}

// checkCount checks job row id ran its n chunks exactly once.
func checkCount(t testing.TB, db *DB, f *Family, id uint64, n int64) {
	t.Helper()
	c, err := db.Counter("posts")
	must(t, err)
	v, err := c.GetColumn(id, "likes")
	must(t, err)
	if int64(v) != n {
		t.Fatalf("job of row %d: count %d, want %d chunks", id, v, n)
	}
	for i := int64(0); i < n; i++ {
		if _, ok := famGet(t, f, famKey(f, id<<16|uint64(i))); !ok {
			t.Fatalf("job of row %d: chunk %d missing", id, i)
		}
	}
}

func queueStore(t testing.TB, fs vfs.FS, mod func(*Options)) (*DB, *Family) {
	t.Helper()
	o := testOptions(fs)
	o.Families = []FamilySpec{testPlain}
	if mod != nil {
		mod(o)
	}
	db, err := Open("d", o)
	must(t, err)
	t.Cleanup(func() {
		if err := db.Check(); err != nil && !errors.Is(err, ErrClosed) {
			t.Error(err)
		}
		db.Close()
	})
	if _, err := db.Counter("posts"); err != nil {
		newPosts(t, db, 16)
	}
	return db, family(t, db, "plain")
}

func TestQueueRunsChunks(t *testing.T) {
	db, f := queueStore(t, vfs.NewMem(), nil)
	var seen []JobProgress
	must(t, db.RegisterJobHandler("count", countHandler(db, f, func(run *JobRun, i int64) error {
		seen = append(seen, JobProgress{Done: run.Done(), Total: run.Total()})
		if jobs := db.Jobs(); len(jobs) != 1 || jobs[0].Kind != "count" || jobs[0].Done != run.Done() {
			return fmt.Errorf("Jobs() = %+v while running chunk %d", jobs, i)
		}
		return nil
	})))
	// Enqueue atomically with a counter op.
	b := db.NewBatch()
	must(t, b.Incr("posts", 1, "reposts", 1))
	must(t, b.Enqueue("count", nil, countPayload(7, 5), 5))
	must(t, b.Commit())
	ids := b.JobIDs()
	b.Close()
	if len(ids) != 1 {
		t.Fatalf("JobIDs = %v", ids)
	}
	q := db.QueuedJobs()
	if len(q) != 1 || q[0].Kind != "count" || q[0].Total != 5 || q[0].Running {
		t.Fatalf("queued = %+v", q)
	}
	must(t, db.WaitJob(context.Background(), ids[0]))
	checkCount(t, db, f, 7, 5)
	if len(db.QueuedJobs()) != 0 || len(seen) != 5 || seen[3].Done != 3 || seen[3].Total != 5 {
		t.Fatalf("after run: queued %v, progress %+v", db.QueuedJobs(), seen)
	}
	must(t, db.Check())
	// An empty job (no chunks) finishes too.
	b = db.NewBatch()
	must(t, b.Enqueue("count", nil, countPayload(8, 0), 0))
	must(t, b.Commit())
	b.Close()
	must(t, db.RunJobs(context.Background(), nil))
	if len(db.QueuedJobs()) != 0 {
		t.Fatal("empty job left")
	}
}

// Jobs of one key: a pending one is replaced by a newer one (the last
// wins); a running one finishes before the next starts.
func TestQueueCoalesce(t *testing.T) {
	db, f := queueStore(t, vfs.NewMem(), nil)
	enqueue := func(key string, id uint64, n int64) {
		b := db.NewBatch()
		must(t, b.Enqueue("count", []byte(key), countPayload(id, n), n))
		must(t, b.Commit())
		b.Close()
	}
	enqueue("pair", 1, 3)
	enqueue("pair", 2, 3) // replaces the first: it never started
	enqueue("other", 3, 2)
	if q := db.QueuedJobs(); len(q) != 2 {
		t.Fatalf("queued = %+v", q)
	}
	// Two enqueues of one key in one batch: the last wins.
	b := db.NewBatch()
	must(t, b.Enqueue("count", []byte("twice"), countPayload(9, 1), 1))
	must(t, b.Enqueue("count", []byte("twice"), countPayload(10, 1), 1))
	must(t, b.Commit())
	b.Close()
	must(t, db.Check())

	// While a job of "pair" runs, a new one waits and an older pending one
	// would be replaced.
	var order []uint64
	started := make(chan struct{})
	release := make(chan struct{})
	must(t, db.RegisterJobHandler("count", countHandler(db, f, func(run *JobRun, i int64) error {
		id := binary.BigEndian.Uint64(run.Payload())
		if i == 0 {
			order = append(order, id)
		}
		if id == 2 && i == 0 {
			close(started)
			<-release
		}
		return nil
	})))
	done := make(chan error, 1)
	go func() { done <- db.RunJobs(context.Background(), nil) }()
	<-started
	enqueue("pair", 4, 1)
	if run, _ := db.LeaseJob(); run != nil && binary.BigEndian.Uint64(run.Payload()) == 4 {
		t.Fatal("a job of a running key was leased")
	} else if run != nil {
		run.Release(nil)
	}
	must(t, db.Check())
	close(release)
	must(t, <-done)
	for _, id := range []uint64{2, 3, 4, 10} {
		checkCount(t, db, f, id, map[uint64]int64{2: 3, 3: 2, 4: 1, 10: 1}[id])
	}
	checkCount(t, db, f, 1, 0)
	checkCount(t, db, f, 9, 0)
	if i2, i4 := indexOf(order, 2), indexOf(order, 4); i2 < 0 || i4 < i2 {
		t.Fatalf("run order %v: the newer job of the key ran first", order)
	}
}

func indexOf(s []uint64, x uint64) int {
	for i, v := range s {
		if v == x {
			return i
		}
	}
	return -1
}

// A failed chunk is retried from the last committed chunk, never twice.
func TestQueueRetry(t *testing.T) {
	db, f := queueStore(t, vfs.NewMem(), nil)
	fail := true
	must(t, db.RegisterJobHandler("count", countHandler(db, f, func(run *JobRun, i int64) error {
		if i == 2 && fail {
			fail = false
			return errors.New("injected")
		}
		return nil
	})))
	b := db.NewBatch()
	must(t, b.Enqueue("count", nil, countPayload(5, 4), 4))
	must(t, b.Commit())
	b.Close()
	err := db.RunJobs(context.Background(), nil)
	if err == nil || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("first run: %v", err)
	}
	q := db.QueuedJobs()
	if len(q) != 1 || q[0].Done != 2 || q[0].Attempts != 1 || !strings.Contains(q[0].LastErr, "injected") {
		t.Fatalf("after a failure: %+v", q)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	must(t, db.RunJobs(ctx, nil)) // waits out the backoff
	checkCount(t, db, f, 5, 4)
}

func TestQueueBadInput(t *testing.T) {
	db, f := queueStore(t, vfs.NewMem(), nil)
	for _, tc := range []struct {
		name string
		add  func(b *Batch) error
		want error
	}{
		{"kind", func(b *Batch) error { return b.Enqueue("no spaces", nil, nil, 0) }, ErrInvalidName},
		{"key", func(b *Batch) error { return b.Enqueue("k", make([]byte, MaxJobKeyLen+1), nil, 0) }, ErrValueTooLarge},
		{"payload", func(b *Batch) error { return b.Enqueue("k", nil, make([]byte, MaxJobPayloadLen+1), 0) }, ErrValueTooLarge},
		{"total", func(b *Batch) error { return b.Enqueue("k", nil, nil, -1) }, ErrValueRange},
		{"source", func(b *Batch) error { return b.Once("", 1) }, ErrInvalidName},
		{"seq", func(b *Batch) error { return b.Once("s", 0) }, ErrValueRange},
	} {
		b := db.NewBatch()
		must(t, f.Put(b, famKey(f, 1), []byte("x")))
		if err := tc.add(b); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
		if err := b.Commit(); !errors.Is(err, tc.want) {
			t.Errorf("%s: commit %v", tc.name, err)
		}
		b.Close()
	}
	if _, ok := famGet(t, f, famKey(f, 1)); ok || len(db.QueuedJobs()) != 0 {
		t.Fatal("a refused batch committed something")
	}
	// No handler: RunJobs says which kinds.
	b := db.NewBatch()
	must(t, b.Enqueue("orphan", nil, nil, 0))
	must(t, b.Commit())
	b.Close()
	if err := db.RunJobs(context.Background(), nil); !errors.Is(err, ErrNoJobHandler) || !strings.Contains(err.Error(), `"orphan"`) {
		t.Fatalf("RunJobs without a handler: %v", err)
	}
	// A released run cannot commit.
	run, err := db.LeaseJob("orphan")
	must(t, err)
	run.Release(nil)
	b = db.NewBatch()
	if err := run.Commit(context.Background(), b, JobProgress{Finished: true}); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("commit after release: %v", err)
	}
	b.Close()
	if len(db.QueuedJobs()) != 1 {
		t.Fatal("a lost lease finished the job")
	}
}

// Jobs survive reopen and run in the background worker.
func TestQueueBackgroundWorker(t *testing.T) {
	fs := vfs.NewMem()
	db, f := queueStore(t, fs, nil)
	b := db.NewBatch()
	must(t, b.Enqueue("count", nil, countPayload(3, 6), 6))
	must(t, b.Commit())
	id := b.JobIDs()[0]
	b.Close()
	must(t, db.Close())

	db, f = queueStore(t, fs, func(o *Options) { o.DisableBackground = false; o.JobWorkers = 2 })
	if q := db.QueuedJobs(); len(q) != 1 || q[0].ID != id {
		t.Fatalf("after reopen: %+v", q)
	}
	must(t, db.RegisterJobHandler("count", countHandler(db, f, nil)))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for len(db.QueuedJobs()) > 0 && ctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
	checkCount(t, db, f, 3, 6)
}

// TestCrashJobsExactlyOnce crashes the store at random points while
// workers run chunked jobs and writers commit mixed batches (a counter op
// and a family write that must agree), on a filesystem that drops unsynced
// writes. After each reopen every job finishes with each chunk applied
// exactly once, and no batch is half applied.
func TestCrashJobsExactlyOnce(t *testing.T) {
	rounds := 8
	if testing.Short() {
		rounds = 3
	}
	rng := rand.New(rand.NewPCG(3, 9))
	fs := vfs.NewCrashableMem()
	var db *DB
	var f *Family
	reopen := func() {
		o := testOptions(fs)
		o.Families = []FamilySpec{testPlain}
		o.DisableBackground = false
		o.CheckpointInterval = 5 * time.Millisecond
		o.CompactionInterval = -1
		o.JobWorkers = 2
		var err error
		db, err = Open("d", o)
		must(t, err)
		if _, err := db.Counter("posts"); err != nil {
			newPosts(t, db, 16)
		}
		f = family(t, db, "plain")
		must(t, db.RegisterJobHandler("count", countHandler(db, f, nil)))
	}
	reopen()
	jobs := map[uint64]int64{} // row -> chunks, for every acknowledged enqueue
	var nextRow uint64 = 100
	mixed := uint64(0) // acknowledged mixed batches (writer id 1)
	for round := 0; round < rounds; round++ {
		var stop atomic.Bool
		var wg sync.WaitGroup
		var acked atomic.Uint64
		acked.Store(mixed)
		var mu sync.Mutex
		ackedJobs := map[uint64]int64{}
		wg.Add(2)
		erng := rand.New(rand.NewPCG(uint64(round), 5)) // the enqueuer's own
		go func() {                                     // enqueuer
			defer wg.Done()
			for !stop.Load() {
				mu.Lock()
				row := nextRow
				nextRow++
				mu.Unlock()
				n := int64(1 + erng.IntN(20))
				b := db.NewBatch()
				b.Enqueue("count", nil, countPayload(row, n), n)
				err := b.Commit()
				b.Close()
				if err != nil {
					return
				}
				mu.Lock()
				ackedJobs[row] = n
				mu.Unlock()
				time.Sleep(time.Millisecond)
			}
		}()
		go func() { // mixed batches: counter row 1 and family key 1 agree
			defer wg.Done()
			for !stop.Load() {
				n := acked.Load() + 1
				b := db.NewBatch()
				b.Set("posts", 1, 0, n, 0)
				f.Put(b, famKey(f, 1), binary.BigEndian.AppendUint64(nil, n))
				err := b.Commit()
				b.Close()
				if err != nil {
					return
				}
				acked.Store(n)
			}
		}()
		time.Sleep(time.Duration(5+rng.IntN(40)) * time.Millisecond)
		mu.Lock()
		for row, n := range ackedJobs {
			jobs[row] = n
		}
		mu.Unlock()
		mixed = acked.Load()
		crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(100), RNG: rng})
		stop.Store(true)
		db.Close()
		wg.Wait()
		fs = crashed
		reopen()

		// The mixed pair agrees and holds at least every acknowledged batch.
		c, err := db.Counter("posts")
		must(t, err)
		row, err := c.Get(1, nil)
		must(t, err)
		v, ok := famGet(t, f, famKey(f, 1))
		if got := uint64(0); ok {
			got = binary.BigEndian.Uint64(v)
			if got != row[1] {
				t.Fatalf("round %d: half-applied mixed batch: family %d, counter %d", round, got, row[1])
			}
		}
		if row[1] < mixed || row[1] > mixed+1 {
			t.Fatalf("round %d: mixed batches %d, acknowledged %d", round, row[1], mixed)
		}
		mixed = row[1]
		// Every acknowledged job finishes, each chunk once.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		must(t, db.RunJobs(ctx, nil))
		cancel()
		for row, n := range jobs {
			checkCount(t, db, f, row, n)
		}
		must(t, db.Check())
	}
	must(t, db.Close())
}

func TestIncrOnce(t *testing.T) {
	fs := vfs.NewMem()
	db := openTest(t, fs, "d", nil)
	posts := newPosts(t, db, 16)
	incr := func(seq uint64) (uint64, bool) {
		v, applied, err := posts.IncrOnce(9, "likes", 2, "kafka-0", seq)
		must(t, err)
		return v, applied
	}
	if v, ok := incr(1); v != 2 || !ok {
		t.Fatalf("first = %d %v", v, ok)
	}
	if v, ok := incr(1); v != 2 || ok {
		t.Fatalf("redelivery = %d %v", v, ok)
	}
	if v, ok := incr(5); v != 4 || !ok {
		t.Fatalf("later = %d %v", v, ok)
	}
	if v, ok := incr(3); v != 4 || ok {
		t.Fatalf("older = %d %v", v, ok)
	}
	must(t, db.Checkpoint())
	if v, ok := incr(6); v != 6 || !ok {
		t.Fatalf("after checkpoint = %d %v", v, ok)
	}
	must(t, db.Close())
	db = openTest(t, fs, "d", nil)
	posts, _ = db.Counter("posts")
	if seq, ok := db.SourceSeq("kafka-0"); seq != 6 || !ok {
		t.Fatalf("source after reopen = %d %v", seq, ok)
	}
	if v, ok := incr(6); v != 6 || ok {
		t.Fatalf("redelivery after reopen = %d %v", v, ok)
	}
	// A duplicate batch commits none of its family writes or jobs either.
	b := db.NewBatch()
	must(t, b.Incr("posts", 9, "likes", 1))
	must(t, b.Enqueue("x", nil, nil, 0))
	must(t, b.Once("kafka-0", 6))
	must(t, b.Commit())
	if !b.Duplicate() || len(db.QueuedJobs()) != 0 {
		t.Fatalf("duplicate batch: dup %v, jobs %v", b.Duplicate(), db.QueuedJobs())
	}
	b.Close()
	must(t, db.ForgetSource("kafka-0"))
	if v, ok := incr(1); v != 8 || !ok {
		t.Fatalf("after forget = %d %v", v, ok)
	}
	if _, _, err := posts.IncrOnce(9, "likes", 1, strings.Repeat("s", MaxSourceLen+1), 1); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("long source: %v", err)
	}
	must(t, db.Verify(context.Background()))
}

// FuzzDecodeJobRecord: the decoder returns an error, never panics, and
// what it accepts re-encodes to a record it decodes the same.
func FuzzDecodeJobRecord(f *testing.F) {
	f.Add(appendJobRecord(nil, &jobRecord{kind: "fanout", key: []byte("k"), payload: []byte{1}, cursor: []byte{2}, done: 4, total: 9, created: 1}))
	f.Add(appendSourceMark(nil, 42))
	f.Fuzz(func(t *testing.T, b []byte) {
		if r, err := decodeJobRecord(1, b); err == nil {
			again, err := decodeJobRecord(1, appendJobRecord(nil, r))
			if err != nil || again.kind != r.kind || string(again.payload) != string(r.payload) || again.done != r.done {
				t.Fatalf("job record does not round-trip: %v", err)
			}
		}
		if seq, err := decodeSourceMark(b); err == nil {
			if again, _ := decodeSourceMark(appendSourceMark(nil, seq)); again != seq {
				t.Fatal("source mark does not round-trip")
			}
		}
		decodeFamilyRecord(b)
	})
}

// TestKillChildJobs runs a child process that commits mixed batches (a
// counter op and a family write that must agree) and enqueues chunked jobs
// that its workers run, printing each acknowledgement; the parent SIGKILLs
// it mid-stream, reopens, and checks that no batch is half applied, nothing
// acknowledged is lost, and every acknowledged job finishes with each
// chunk applied exactly once. Repeated on one directory.
func TestKillChildJobs(t *testing.T) {
	if dir := os.Getenv("TALLY_KILL_JOBS_DIR"); dir != "" {
		killChildJobs(dir)
		return
	}
	if testing.Short() {
		t.Skip("spawns child processes")
	}
	dir := t.TempDir()
	jobs := map[uint64]int64{}
	var mixed uint64
	for round := 0; round < 3; round++ {
		lines := 0
		env := []string{"TALLY_KILL_JOBS_DIR=" + dir, fmt.Sprintf("TALLY_KILL_JOBS_ROW=%d", 1000*(round+1))}
		testutil.RunChild(t, "TestKillChildJobs", env, func(line string) bool {
			f := strings.Fields(line)
			switch {
			case len(f) == 3 && f[0] == "mixed":
				n, _ := strconv.ParseUint(f[2], 10, 64)
				mixed = max(mixed, n)
			case len(f) == 3 && f[0] == "job":
				row, _ := strconv.ParseUint(f[1], 10, 64)
				n, _ := strconv.ParseInt(f[2], 10, 64)
				jobs[row] = n
			default:
				return false
			}
			lines++
			return lines == 300+round*200
		})
		if lines < 300 {
			t.Fatalf("child stopped early after %d acks", lines)
		}
		t.Logf("round %d: %d mixed batches, %d jobs acknowledged", round, mixed, len(jobs))
		db, err := Open(dir, &Options{DisableBackground: true, Families: []FamilySpec{testPlain}})
		must(t, err)
		f := family(t, db, "plain")
		c, err := db.Counter("posts")
		must(t, err)
		row, err := c.Get(1, nil)
		must(t, err)
		v, ok := famGet(t, f, famKey(f, 1))
		if !ok || binary.BigEndian.Uint64(v) != row[1] {
			t.Fatalf("round %d: half-applied mixed batch: family %x, counter %d", round, v, row[1])
		}
		if row[1] < mixed || row[1] > mixed+1 {
			t.Fatalf("round %d: %d mixed batches, %d acknowledged", round, row[1], mixed)
		}
		mixed = row[1]
		must(t, db.RegisterJobHandler("count", countHandler(db, f, nil)))
		must(t, db.RunJobs(context.Background(), nil))
		for r, n := range jobs {
			checkCount(t, db, f, r, n)
		}
		must(t, db.Check())
		must(t, db.Close())
	}
}

// killChildJobs is the child side of TestKillChildJobs; it never returns.
func killChildJobs(dir string) {
	db, err := Open(dir, &Options{Families: []FamilySpec{testPlain}, JobWorkers: 2, CheckpointLogBytes: 64 << 10})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child open:", err)
		os.Exit(2)
	}
	if _, err := db.Counter("posts"); err != nil {
		db.CreateCounter("posts", CounterOptions{RangeBits: 16})
		for _, col := range []string{"reposts", "comments", "likes"} {
			db.AddColumn("posts", col, ColumnOptions{})
		}
	}
	f, _ := db.Family("plain")
	db.RegisterJobHandler("count", countHandler(db, f, nil))
	c, _ := db.Counter("posts")
	row, _ := strconv.ParseUint(os.Getenv("TALLY_KILL_JOBS_ROW"), 10, 64)
	var mu sync.Mutex
	stdout := bufio.NewWriter(os.Stdout)
	say := func(format string, args ...any) {
		mu.Lock()
		fmt.Fprintf(stdout, format, args...)
		stdout.Flush()
		mu.Unlock()
	}
	go func() {
		for n := int64(1); ; n++ {
			b := db.NewBatch()
			b.Enqueue("count", nil, countPayload(row, 1+n%30), 1+n%30)
			if err := b.Commit(); err != nil {
				fmt.Fprintln(os.Stderr, "child enqueue:", err)
				os.Exit(3)
			}
			b.Close()
			say("job %d %d\n", row, 1+n%30)
			row++
			time.Sleep(time.Millisecond)
		}
	}()
	for {
		cur, _ := c.Get(1, nil)
		n := cur[1] + 1
		b := db.NewBatch()
		b.Set("posts", 1, 0, n, 0)
		f.Put(b, famKey(f, 1), binary.BigEndian.AppendUint64(nil, n))
		if err := b.Commit(); err != nil {
			fmt.Fprintln(os.Stderr, "child mixed:", err)
			os.Exit(3)
		}
		b.Close()
		say("mixed 1 %d\n", n)
	}
}

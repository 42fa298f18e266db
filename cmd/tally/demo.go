package main

import (
	"errors"
	"flag"
	"fmt"
	"math/bits"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tallydb/tally/bench/workload"
	"github.com/tallydb/tally/store"
)

var cmdDemo = &command{
	name:     "demo",
	synopsis: "run a small end-to-end counter demo on a temporary store",
	help: `Usage: tally demo [-d DIR] [--items N] [--users N] [--duration D]
                  [--clients N] [--seed S] [--durability MODE]

Runs a microblog's counters end to end: creates "posts" (reposts, comments,
likes; ids time-ordered, aged by time) and "users" (posts, followers;
keep-hot), loads generated rows through batches, runs a mixed read/write
workload (feed pages of 10 ids, ~5% writes per id read, skewed to recent
posts), checkpoints, closes, reopens to show recovery, checks a sample of
rows survived, and prints a short report.

The store lives in a temporary directory removed afterwards, or in DIR
(which must be new or empty) and is kept.

Flags:
  -d DIR             keep the store in DIR
  --items N          posts to generate, ~55% never counted (default 300000)
  --users N          users to generate (default items/10)
  --duration D       length of the mixed workload (default 2s)
  --clients N        concurrent clients of the mixed workload (default 4)
  --seed S           workload seed (default 1)
  --durability MODE  sync, interval or nosync (default interval, like Redis
                     "appendfsync everysec")

Example:
  go run ./cmd/tally demo --items 1000000 --duration 5s
`,
}

func init() { cmdDemo.run = runDemo }

// demoSpan is the time over which the demo's posts were created, and
// demoMaxAge the age policy of the posts counter.
const (
	demoSpan   = 7 * 24 * time.Hour
	demoMaxAge = 3 * 24 * time.Hour
)

// demo holds one run's settings and results; each phase is a method so
// later issues can add phases (bulk load with progress, aging to cold).
type demo struct {
	e          *env
	dir        string
	durability store.Durability
	items      uint64
	users      uint64
	duration   time.Duration
	clients    int
	seed       uint64

	posts, people *workload.Workload
	postCols      []string
	db            *store.DB
}

func runDemo(e *env, args []string) error {
	fs := e.flags(cmdDemo)
	d := &demo{e: e}
	fs.Uint64Var(&d.items, "items", 300_000, "")
	fs.Uint64Var(&d.users, "users", 0, "")
	fs.DurationVar(&d.duration, "duration", 2*time.Second, "")
	fs.IntVar(&d.clients, "clients", 4, "")
	fs.Uint64Var(&d.seed, "seed", 1, "")
	pos, err := parse(fs, args, true)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("takes no arguments, got %q", pos)
	}
	durSet := false
	fs.Visit(func(f *flag.Flag) { durSet = durSet || f.Name == "durability" })
	if !durSet && !e.durabilitySet {
		e.durability = "interval"
	}
	if d.durability, err = store.ParseDurability(e.durability); err != nil {
		return usagef("bad --durability %q: want sync, interval or nosync", e.durability)
	}
	if d.items == 0 {
		return usagef("--items must be at least 1")
	}
	if d.users == 0 {
		d.users = max(d.items/10, 1)
	}
	if d.duration < 0 || d.clients < 1 {
		return usagef("--duration must be ≥ 0 and --clients ≥ 1")
	}
	// Newest post now, so that age policies see the data as a live system
	// would; the seed still fixes every count.
	// The posts span demoSpan rather than the workload's half year: a small
	// data set spread over 180 days would leave a few hundred rows per range,
	// a density no real deployment has, and per-range overhead would swamp
	// the bytes-per-row figure.
	end := time.Now().UTC().Truncate(time.Hour)
	if d.posts, err = workload.New(workload.Config{Seed: d.seed, Items: d.items, Columns: 3, End: end, Span: demoSpan, MaxCount: 1 << 31}); err != nil {
		return err
	}
	if d.people, err = workload.New(workload.Config{Seed: d.seed + 1, Items: d.users, Columns: 2, End: end, MaxCount: 1 << 31}); err != nil {
		return err
	}
	d.postCols = []string{"reposts", "comments", "likes"}

	d.dir = e.dir
	if d.dir == "" {
		if d.dir, err = os.MkdirTemp("", "tally-demo-"); err != nil {
			return err
		}
		defer os.RemoveAll(d.dir)
		d.printf("dir        %s (removed afterwards)\n", d.dir)
	} else {
		d.printf("dir        %s\n", d.dir)
	}
	d.printf("durability %v\n", d.durability)
	return d.run()
}

func (d *demo) printf(format string, args ...any) { fmt.Fprintf(d.e.stdout, format, args...) }

func (d *demo) open() (err error) {
	d.db, err = store.Open(d.dir, &store.Options{Durability: d.durability})
	return err
}

func (d *demo) run() error {
	if err := d.open(); err != nil {
		return err
	}
	err := d.phases()
	if d.db != nil {
		err = closeDB(d.db, err)
	}
	return err
}

func (d *demo) phases() error {
	if err := d.schema(); err != nil {
		return err
	}
	if err := d.load(); err != nil {
		return err
	}
	if err := d.mixed(); err != nil {
		return err
	}
	return d.restart()
}

// schema creates the microblog's two counters.
func (d *demo) schema() error {
	layout := d.posts.Config().Layout
	age := store.AgePolicy{Kind: store.AgeByTime, MaxAge: demoMaxAge, IDEpochMs: layout.EpochMs, IDTimeShift: uint8(layout.TimeShift)}
	// 48 range bits: with 22 sequence bits a range spans ~18.6 hours of posts.
	if err := d.db.CreateCounter("posts", store.CounterOptions{RangeBits: 48, Age: age}); err != nil {
		return err
	}
	for _, c := range d.postCols {
		if err := d.db.AddColumn("posts", c, store.ColumnOptions{HintBits: 16, MaxBits: 32}); err != nil {
			return err
		}
	}
	if err := d.db.CreateCounter("users", store.CounterOptions{Age: store.AgePolicy{Kind: store.KeepHot}}); err != nil {
		return err
	}
	for _, c := range []string{"posts", "followers"} {
		if err := d.db.AddColumn("users", c, store.ColumnOptions{HintBits: 16, MaxBits: 32}); err != nil {
			return err
		}
	}
	return nil
}

// load writes every non-zero generated row through batches.
func (d *demo) load() error {
	const batchRows = 4096
	b := d.db.NewBatch()
	defer b.Close()
	loadOne := func(counter string, w *workload.Workload, id func(i uint64, wid uint64) uint64) (rows int, err error) {
		var i uint64
		w.Items(func(wid uint64, vals []uint64) bool {
			defer func() { i++ }()
			if workload.IsZero(vals) {
				return true
			}
			rows++
			if err = b.Set(counter, id(i, wid), vals...); err != nil {
				return false
			}
			if b.Len() >= batchRows {
				err = b.Commit()
				b.Reset()
			}
			return err == nil
		})
		if err == nil && b.Len() > 0 {
			err = b.Commit()
			b.Reset()
		}
		return rows, err
	}
	start := time.Now()
	rows, err := loadOne("posts", d.posts, func(_, wid uint64) uint64 { return wid })
	if err != nil {
		return err
	}
	el := time.Since(start)
	d.printf("load posts %d items, %d non-zero rows in %v (%.0f rows/s)\n", d.items, rows, el.Round(time.Millisecond), float64(rows)/el.Seconds())
	start = time.Now()
	// User ids are small and dense, not time-ordered: user i is id i+1.
	rows, err = loadOne("users", d.people, func(i, _ uint64) uint64 { return i + 1 })
	if err != nil {
		return err
	}
	el = time.Since(start)
	d.printf("load users %d items, %d non-zero rows in %v (%.0f rows/s)\n", d.users, rows, el.Round(time.Millisecond), float64(rows)/el.Seconds())
	return nil
}

// mixed runs the workload's read/write mix on posts from several clients.
func (d *demo) mixed() error {
	posts, err := d.db.Counter("posts")
	if err != nil {
		return err
	}
	var (
		reads, batches, writes atomic.Int64
		wg                     sync.WaitGroup
		mu                     sync.Mutex
		firstErr               error
		stopped                atomic.Bool
		all                    latencies
	)
	for c := 0; c < d.clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			ops := d.posts.Ops(c)
			var (
				op       workload.Op
				dst      []uint64
				lat      latencies
				r, b, wr int64
				err      error
			)
			for err == nil && !stopped.Load() {
				ops.Next(&op)
				t0 := time.Now()
				if op.Kind == workload.OpRead {
					dst, err = posts.MultiGet(op.IDs, dst)
					lat.record(time.Since(t0))
					r += int64(len(op.IDs))
					b++
				} else {
					_, err = posts.Incr(op.ID, d.postCols[op.Col], op.Delta)
					wr++
				}
			}
			reads.Add(r)
			batches.Add(b)
			writes.Add(wr)
			mu.Lock()
			all.merge(&lat)
			if err != nil && firstErr == nil {
				firstErr = err
			}
			mu.Unlock()
		}(c)
	}
	start := time.Now()
	time.Sleep(d.duration)
	stopped.Store(true)
	wg.Wait()
	el := time.Since(start).Seconds()
	if firstErr != nil {
		return fmt.Errorf("mixed workload: %w", firstErr)
	}
	d.printf("mixed      %d clients for %v: %.0f ids read/s (%.0f feed pages/s, p99 %v), %.0f writes/s\n",
		d.clients, d.duration, float64(reads.Load())/el, float64(batches.Load())/el,
		all.quantile(0.99), float64(writes.Load())/el)
	return nil
}

// restart checkpoints, closes and reopens the store, and checks that a
// sample of rows reads the same before and after.
func (d *demo) restart() error {
	sample := d.sampleIDs(1000)
	posts, err := d.db.Counter("posts")
	if err != nil {
		return err
	}
	before, err := posts.MultiGet(sample, nil)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := d.db.Checkpoint(); err != nil {
		return err
	}
	d.printf("checkpoint %v\n", time.Since(start).Round(time.Millisecond))
	err = d.db.Close()
	d.db = nil
	if err != nil {
		return err
	}
	if err := d.open(); err != nil {
		return err
	}
	r := d.db.Stats().Recovery
	d.printf("reopen     %v: %d checkpoint chunks, %d rows loaded, %d log records replayed\n",
		r.Duration.Round(time.Microsecond), r.ChunksLoaded, r.RowsLoaded, r.RecordsReplayed)
	if posts, err = d.db.Counter("posts"); err != nil {
		return err
	}
	after, err := posts.MultiGet(sample, nil)
	if err != nil {
		return err
	}
	if !slices.Equal(before, after) {
		return errors.New("demo: rows read after reopen differ from before")
	}
	d.printf("verified   %d sampled posts read the same after reopen\n", len(sample))
	s := d.db.Stats()
	var rows int
	var mem int64
	for _, c := range s.Counters {
		rows += c.Rows()
		mem += c.MemBytes
		d.printf("counter    %s: %d rows, %.2f bytes/row in memory\n", c.Name, c.Rows(), c.BytesPerRow())
	}
	d.printf("store      %d rows, %.2f bytes/row in memory, %d bytes on disk (%.2f/row)\n",
		rows, bytesPerRow(mem, rows), s.DiskBytes, bytesPerRow(int64(s.DiskBytes), rows))
	return nil
}

// sampleIDs draws n post ids the way the workload's reads do.
func (d *demo) sampleIDs(n int) []uint64 {
	ops := d.posts.Ops(d.clients + 1)
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = d.posts.ID(ops.Index())
	}
	return ids
}

// latencies is a small log-linear histogram (8 buckets per power of two,
// so a quantile is within 12.5%): enough for a demo's p99.
type latencies struct {
	counts [64 * 8]uint64
	n      uint64
}

func (l *latencies) record(d time.Duration) {
	v := uint64(max(d, 0))
	i := int(v)
	if v >= 8 {
		e := bits.Len64(v) - 4 // v>>e is in [8, 16)
		i = (e+1)*8 + int(v>>uint(e)) - 8
	}
	l.counts[i]++
	l.n++
}

func (l *latencies) merge(o *latencies) {
	for i, c := range o.counts {
		l.counts[i] += c
	}
	l.n += o.n
}

// quantile returns the upper bound of the bucket holding quantile q.
func (l *latencies) quantile(q float64) time.Duration {
	if l.n == 0 {
		return 0
	}
	rank := uint64(q * float64(l.n))
	var seen uint64
	for i, c := range l.counts {
		seen += c
		if seen > rank {
			if i < 8 {
				return time.Duration(i + 1)
			}
			e := i/8 - 1
			return time.Duration(uint64(8+i%8+1) << uint(e))
		}
	}
	return 0
}

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	cmdtab "github.com/tallydb/tally/internal/commands"
	"math/rand/v2"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	tallydb "github.com/tallydb/tally"
	"github.com/tallydb/tally/bench/workload"
	"github.com/tallydb/tally/internal/hist"
	"github.com/tallydb/tally/internal/quote"
	"github.com/tallydb/tally/store"
	"github.com/tallydb/tally/timeline"
)

var cmdDemo = &command{
	name:     "demo",
	local:    true,
	synopsis: "run a microblog's counters and timelines end to end on a temporary store",
	help: `Usage: tally demo [-d DIR] [--items N] [--users N] [--duration D]
                  [--clients N] [--seed S] [--durability MODE]

Runs a microblog's counters end to end and prints a report:
  1. creates "posts" (reposts, comments, likes; snowflake ids, aged after
     72h) and "accounts" (posts, followers; keep-hot);
  2. bulk-loads a generated data set (a week of posts, ~55% never counted,
     power-law counts) with a progress bar: posts older than 72h go straight
     into cold blocks, recent ones into memory;
  3. runs the mixed workload for --duration from --clients goroutines: feed
     pages of 10 ids skewed to recent posts, ~5% writes per id read, and
     records read and write latency;
  4. moves the store's clock 48h on and ages the ranges now due into the
     cold tier (compaction, with progress), merging the cold writes;
  5. reads random posts of the whole week (mostly cold) for --duration/4;
  6. likes of a video business on the same store: bulk-loads a month of
     historical likes (popular videos get most of them), runs likes,
     unlikes and dislikes with page reads (20 states and counts) from
     every client for --duration, reads the top 10 (all time and today)
     and a likers page, and checks every invariant (counts equal set
     sizes, boards and user lists agree);
  7. closes the store while clients are still writing and reopens it to
     show recovery, then checks that sampled posts read the same and that
     every write acknowledged during the close survived, and that the
     sampled like counts read the same and the likes invariants hold;
  8. unread counts, on a store of their own (temporary): one-to-one counts
     of every user, users following 200 accounts each (bulk-loaded follows;
     feed snapshots written by the follow graph's observer), a red dot and
     notices; measures Get, feed unread, resets and dots with --clients,
     the snapshots' bytes per followee, and checks one feed stays exact
     through posts, an unpublish, an unfollow, a re-follow and a restart;
  9. replication: a group of --cluster-replicas "tally serve --cluster"
     processes (tally cluster local start, in DIR/cluster) written to by
     --clients Redis Cluster clients (go-redis ClusterClient); the leader
     is killed with SIGKILL under the writes and started again; reports
     writes/s, p50/p99 and the failover time, and checks every replica
     holds every acknowledged write; then a sharded cluster of
     --cluster-shards shards × 3 replicas (tally cluster local start
     --shards, in DIR/shards): the schema sent to one node reaches every
     shard, increments spread over the shards by slot, users on different
     shards follow each other and post, and every home holds its
     followees' posts;
 10. timelines, on a store of their own: a power-law follow graph of
     --tl-users users bulk-loaded, 20% of them active, two posts per user
     fanned out, one post of the author everyone follows, home pages from
     --clients goroutines, users returning after the active window (their
     first read rebuilds the inbox), bytes per follow and inbox entry.
The demo exits 1 if a check fails.

The store lives in a temporary directory removed afterwards, or in DIR
(which must be new or empty) and is kept.

Flags:
  -d DIR             keep the store in DIR
  --items N          posts to generate, ~55% never counted (default 3000000)
  --users N          users to generate (default items/10)
  --duration D       length of the mixed workload (default 10s)
  --clients N        concurrent clients (default 4)
  --seed S           workload seed (default 1)
  --tl-users N       users of the timeline part (default items/60; 0 skips it)
  --cluster-replicas N  replicas of the replication part (default 3; 0
                     skips it)
  --cluster-shards N    shards of the sharded part (default 2; 0 skips it)
  --durability MODE  sync, interval or nosync (default interval, like Redis
                     "appendfsync everysec")

Example:
  go run ./cmd/tally demo --items 5000000 --duration 20s
`,
}

func init() { cmdDemo.run = runDemo }

// The posts span demoSpan and age after demoMaxAge; before the aging phase
// the demo's clock moves demoAdvance forward, so that ranges age on cue
// instead of after days.
const (
	demoSpan    = 7 * 24 * time.Hour
	demoMaxAge  = 3 * 24 * time.Hour
	demoAdvance = 2 * 24 * time.Hour
)

// demo holds one run's settings and results; each phase is a method.
type demo struct {
	e          *env
	dir        string
	durability store.Durability
	items      uint64
	users      uint64
	duration   time.Duration
	clients    int
	seed       uint64
	tlUsers    int
	// clusterReplicas is the size of the replication part's group (0
	// skips it; demo_cluster.go).
	clusterReplicas int
	// clusterShards is the sharded part's number of shards (0 skips it;
	// demo_shards.go).
	clusterShards int

	posts, people *workload.Workload
	postCols      []string
	db            *store.DB // all.Store()
	all           *tallydb.DB
	ctx           context.Context
	now           atomic.Int64 // the store's clock, Unix ns

	// Results for the report.
	mixed, cold drive
	recovery    store.RecoveryStats
	closeWrites int
	// reportLines are added to the report by the parts of other packages
	// (demoUnread).
	reportLines []string
	likes       *likesDemo // demo_likes.go
}

func runDemo(e *env, args []string) error {
	fs := e.flags(cmdDemo)
	d := &demo{e: e}
	fs.Uint64Var(&d.items, "items", 3_000_000, "")
	fs.Uint64Var(&d.users, "users", 0, "")
	fs.DurationVar(&d.duration, "duration", 10*time.Second, "")
	fs.IntVar(&d.clients, "clients", 4, "")
	fs.Uint64Var(&d.seed, "seed", 1, "")
	tlUsers := fs.Int("tl-users", -1, "")
	fs.IntVar(&d.clusterReplicas, "cluster-replicas", 3, "")
	fs.IntVar(&d.clusterShards, "cluster-shards", 2, "")
	pos, err := parse(fs, args, true)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("takes no arguments, got %s", quote.Input(strings.Join(pos, " ")))
	}
	durSet := false
	fs.Visit(func(f *flag.Flag) { durSet = durSet || f.Name == "durability" })
	if !durSet && !e.durabilitySet {
		e.durability = "interval"
	}
	if d.durability, err = store.ParseDurability(e.durability); err != nil {
		return usagef("bad --durability %s: want sync, interval or nosync", quote.Input(e.durability))
	}
	if d.items == 0 {
		return usagef("--items must be at least 1")
	}
	if d.users == 0 {
		d.users = max(d.items/10, 1)
	}
	switch {
	case *tlUsers < -1 || *tlUsers == 1:
		return usagef("--tl-users must be 0 (skip) or at least 2")
	case *tlUsers == -1:
		d.tlUsers = int(max(d.items/60, 50))
	default:
		d.tlUsers = *tlUsers
	}
	if d.clusterReplicas < 0 || d.clusterReplicas == 2 || d.clusterReplicas > 9 {
		return usagef("--cluster-replicas must be 0 (skip), 1 or 3..9")
	}
	if d.clusterShards < 0 || d.clusterShards == 1 || d.clusterShards > 4 {
		return usagef("--cluster-shards must be 0 (skip) or 2..4")
	}
	if d.duration < 0 || d.clients < 1 {
		return usagef("--duration must be ≥ 0 and --clients ≥ 1")
	}
	// The newest post is "now", so the data looks like a live system's;
	// the seed still fixes every count. The posts span a week rather than
	// the workload's half year: a small data set spread over 180 days would
	// leave a few hundred rows per range, a density no real deployment has.
	end := time.Now().UTC().Truncate(time.Hour)
	d.now.Store(end.UnixNano())
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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	d.ctx = ctx
	return d.run()
}

func (d *demo) printf(format string, args ...any) { fmt.Fprintf(d.e.stdout, format, args...) }

// open opens the demo's database through tally.Open, like every host.
func (d *demo) open() (err error) {
	d.all, err = tallydb.Open(d.dir, &tallydb.Options{
		Store: &store.Options{
			Durability: d.durability,
			Now:        func() time.Time { return time.Unix(0, d.now.Load()) },
			// Aging happens when the demo says so, not on a timer.
			CompactionInterval: -1,
		},
		Timeline: &timeline.Options{ExpireInterval: -1},
		Likes:    d.likesOptions(),
	})
	if err != nil {
		return err
	}
	d.db = d.all.Store()
	return nil
}

func (d *demo) run() error {
	start := time.Now()
	if err := d.open(); err != nil {
		return err
	}
	err := d.phases()
	if d.all != nil {
		err = closeTally(d.all, err)
	}
	if err == nil {
		d.printf("wall time  %v\n", time.Since(start).Round(100*time.Millisecond))
	}
	return err
}

func (d *demo) phases() error {
	unreadPart := func() error { return demoUnread(d) }
	likesPart := func() error { return demoLikes(d) }
	likesVerify := func() error { return demoLikesVerify(d) }
	clusterPart := func() error {
		if err := demoCluster(d); err != nil {
			return err
		}
		return demoShards(d)
	}
	for _, phase := range []func() error{d.schema, d.load, d.runMixed, d.age, d.runCold, likesPart, d.restart, likesVerify, unreadPart, clusterPart} {
		if err := phase(); err != nil {
			return err
		}
		if err := d.ctx.Err(); err != nil {
			return err
		}
	}
	d.report()
	return demoTimeline(d)
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
	if err := d.db.CreateCounter("accounts", store.CounterOptions{Age: store.AgePolicy{Kind: store.KeepHot}}); err != nil {
		return err
	}
	for _, c := range []string{"posts", "followers"} {
		if err := d.db.AddColumn("accounts", c, store.ColumnOptions{HintBits: 16, MaxBits: 32}); err != nil {
			return err
		}
	}
	return nil
}

// load generates both data sets and bulk-loads them through DB.Load.
func (d *demo) load() error {
	if err := d.loadOne("posts", d.posts, func(_, wid uint64) uint64 { return wid }); err != nil {
		return err
	}
	// User ids are small and dense, not time-ordered: user i is id i+1.
	return d.loadOne("accounts", d.people, func(i, _ uint64) uint64 { return i + 1 })
}

func (d *demo) loadOne(name string, w *workload.Workload, id func(i, wid uint64) uint64) error {
	start := time.Now()
	n := w.Columns()
	in := store.LoadRows{IDs: make([]uint64, 0, w.Len()/2), Vals: make([]uint64, 0, int(w.Len()/2)*n)}
	var i uint64
	w.Items(func(wid uint64, vals []uint64) bool {
		if !workload.IsZero(vals) {
			in.IDs = append(in.IDs, id(i, wid))
			in.Vals = append(in.Vals, vals...)
		}
		i++
		return true
	})
	gen := time.Since(start)
	bar := newProgress(d.e.stdout, "load "+name, "rows", int64(len(in.IDs)))
	start = time.Now()
	st, err := d.db.Load(d.ctx, name, in, func(done int) { bar.update(int64(done)) })
	bar.finish()
	if err != nil {
		return err
	}
	el := time.Since(start)
	d.printf("load %-5s %d items, %d non-zero rows (generated in %v) loaded in %v (%.2fM rows/s): %d rows into %d cold ranges, %d into %d hot ranges\n",
		name, w.Len(), st.Rows, gen.Round(time.Millisecond), el.Round(time.Millisecond), float64(st.Rows)/el.Seconds()/1e6,
		st.ColdRows, st.ColdRanges, st.HotRows, st.HotRanges)
	return nil
}

// drive is the outcome of running clients for a while.
type drive struct {
	ids, pages, writes int64
	read, write        hist.Histogram
	secs               float64
}

func (r *drive) line() string {
	s := fmt.Sprintf("%.0f ids read/s (%.0f pages/s, p50 %v, p99 %v)", float64(r.ids)/r.secs, float64(r.pages)/r.secs,
		r.read.Quantile(0.5), r.read.Quantile(0.99))
	if r.writes > 0 {
		s += fmt.Sprintf(", %.0f writes/s (p50 %v, p99 %v)", float64(r.writes)/r.secs, r.write.Quantile(0.5), r.write.Quantile(0.99))
	}
	return s
}

// driveClients runs d.clients goroutines for dur; next(c) gives client c
// its operation source.
func (d *demo) driveClients(dur time.Duration, next func(c int) func(*workload.Op)) (drive, error) {
	posts, err := d.db.Counter("posts")
	if err != nil {
		return drive{}, err
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		stopped  atomic.Bool
		all      drive
	)
	for c := 0; c < d.clients; c++ {
		wg.Add(1)
		d.e.goSafe(func() {
			defer wg.Done()
			gen := next(c)
			var (
				op  workload.Op
				dst []uint64
				r   drive
				err error
			)
			for err == nil && !stopped.Load() {
				gen(&op)
				t0 := time.Now()
				if op.Kind == workload.OpRead {
					dst, err = posts.MultiGet(op.IDs, dst)
					r.read.Record(time.Since(t0))
					r.ids += int64(len(op.IDs))
					r.pages++
				} else {
					_, err = posts.Incr(op.ID, d.postCols[op.Col], op.Delta)
					r.write.Record(time.Since(t0))
					r.writes++
				}
			}
			mu.Lock()
			all.ids += r.ids
			all.pages += r.pages
			all.writes += r.writes
			all.read.Merge(&r.read)
			all.write.Merge(&r.write)
			if err != nil && firstErr == nil {
				firstErr = err
			}
			mu.Unlock()
		})
	}
	start := time.Now()
	select {
	case <-time.After(dur):
	case <-d.ctx.Done():
	}
	stopped.Store(true)
	wg.Wait()
	all.secs = max(time.Since(start).Seconds(), 1e-9)
	return all, firstErr
}

// runMixed runs the workload's read/write mix on posts.
func (d *demo) runMixed() (err error) {
	d.mixed, err = d.driveClients(d.duration, func(c int) func(*workload.Op) { return d.posts.Ops(c).Next })
	if err != nil {
		return fmt.Errorf("mixed workload: %w", err)
	}
	d.printf("mixed      %d clients for %v: %s\n", d.clients, d.duration, d.mixed.line())
	return nil
}

// age moves the clock on and runs the aging and delta merges now due.
func (d *demo) age() error {
	d.now.Add(int64(demoAdvance))
	before := d.db.Stats()
	start := time.Now()
	if err := compactWithProgress(d.ctx, d.e, d.db, d.e.stdout); err != nil {
		return err
	}
	el := time.Since(start)
	after := d.db.Stats()
	b, a := cmdtab.SumTiers(before), cmdtab.SumTiers(after)
	d.printf("age        clock +%dh, %d jobs in %v: ranges hot %d -> %d, cold %d -> %d; rows hot %d -> %d, cold %d -> %d; %d cold delta rows merged\n",
		int(demoAdvance.Hours()), after.JobsFinished-before.JobsFinished, el.Round(time.Millisecond),
		b.HotRanges, a.HotRanges, b.ColdRanges, a.ColdRanges, b.HotRows, a.HotRows, b.ColdRows, a.ColdRows, b.DeltaRows-a.DeltaRows)
	return nil
}

// runCold reads pages of posts drawn uniformly from the whole week, most of
// them cold now ("grave digging").
func (d *demo) runCold() (err error) {
	hits0 := d.db.Stats().BlockCache
	d.cold, err = d.driveClients(d.duration/4, func(c int) func(*workload.Op) {
		rng := rand.New(rand.NewPCG(d.seed, uint64(c)))
		ids := make([]uint64, d.posts.Config().BatchSize)
		return func(op *workload.Op) {
			for i := range ids {
				ids[i] = d.posts.ID(rng.Uint64N(d.posts.Len()))
			}
			op.Kind, op.IDs = workload.OpRead, ids
		}
	})
	if err != nil {
		return fmt.Errorf("cold reads: %w", err)
	}
	bc := d.db.Stats().BlockCache
	hits, misses := bc.Hits-hits0.Hits, bc.Misses-hits0.Misses
	d.printf("cold reads %d clients for %v, ids uniform over the week: %s; block cache hit rate %.1f%%\n",
		d.clients, d.duration/4, d.cold.line(), 100*float64(hits)/max(float64(hits+misses), 1))
	return nil
}

// restart closes the store while clients are still writing (so writes land
// after Close's checkpoint and the log is not empty), reopens it, and checks
// that a sample of posts reads the same and every acknowledged write of
// the close survived.
func (d *demo) restart() error {
	posts, err := d.db.Counter("posts")
	if err != nil {
		return err
	}
	sample := d.sampleIDs(2000)
	before, err := posts.MultiGet(sample, nil)
	if err != nil {
		return err
	}
	users, err := d.db.Counter("accounts")
	if err != nil {
		return err
	}
	uids := make([]uint64, min(d.users, 10_000))
	for i := range uids {
		uids[i] = uint64(i) + 1
	}
	base, err := users.MultiGet(uids, nil)
	if err != nil {
		return err
	}
	// Writers increment users.posts (an author posting) until the store
	// refuses with ErrClosed; writer c owns the users i with i%clients == c.
	acked := make([]uint64, len(uids))
	var wg sync.WaitGroup
	errs := make([]error, d.clients)
	var started atomic.Int64
	for c := 0; c < d.clients; c++ {
		wg.Add(1)
		d.e.goSafe(func() {
			defer wg.Done()
			for i := c; i < len(uids); {
				if _, err := users.Incr(uids[i], "posts", 1); err != nil {
					if !errors.Is(err, store.ErrClosed) {
						errs[c] = err
					}
					return
				}
				acked[i]++
				started.Add(1)
				if i += d.clients; i >= len(uids) {
					i = c
				}
			}
		})
	}
	writing := make(chan struct{})
	d.e.goSafe(func() { wg.Wait(); close(writing) })
	// Let the writers get going, so the close happens under load.
	for started.Load() < 1000 {
		select {
		case <-writing:
		case <-time.After(time.Millisecond):
			continue
		}
		break
	}
	start := time.Now()
	err = d.all.Close()
	closeTime := time.Since(start)
	d.db, d.all = nil, nil
	<-writing
	if err != nil {
		return err
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("writes during close: %w", err)
	}
	var total uint64
	for _, n := range acked {
		total += n
	}
	d.closeWrites = int(total)
	d.printf("close      in %v while %d clients wrote (%d writes acknowledged)\n", closeTime.Round(time.Millisecond), d.clients, total)

	if err := d.open(); err != nil {
		return err
	}
	d.recovery = d.db.Stats().Recovery
	r := d.recovery
	d.printf("reopen     in %v: %d checkpoint chunks, %d rows loaded, %d log records replayed\n",
		r.Duration.Round(time.Microsecond), r.ChunksLoaded, r.RowsLoaded, r.RecordsReplayed)
	if posts, err = d.db.Counter("posts"); err != nil {
		return err
	}
	after, err := posts.MultiGet(sample, nil)
	if err != nil {
		return err
	}
	if !slices.Equal(before, after) {
		return errors.New("demo: posts read after reopen differ from before")
	}
	if users, err = d.db.Counter("accounts"); err != nil {
		return err
	}
	now, err := users.MultiGet(uids, nil)
	if err != nil {
		return err
	}
	for i := range uids {
		if got, want := now[2*i], base[2*i]+acked[i]; got != want {
			return fmt.Errorf("demo: user %d has %d posts after reopen, want %d (%d acknowledged during close)", uids[i], got, want, acked[i])
		}
	}
	d.printf("verified   %d sampled posts (hot and cold) read the same, and all %d writes acknowledged during close survived\n", len(sample), total)
	start = time.Now()
	if err := d.db.Verify(d.ctx); err != nil {
		return fmt.Errorf("demo: verify after reopen: %w", err)
	}
	d.printf("verify     ok in %v (every cold block, checkpoint chunk and log record)\n", time.Since(start).Round(time.Millisecond))
	return nil
}

// sampleIDs draws n post ids, half the way the workload's reads do (mostly
// recent, hot), half uniformly over the week (mostly cold).
func (d *demo) sampleIDs(n int) []uint64 {
	ops := d.posts.Ops(d.clients + 1)
	rng := rand.New(rand.NewPCG(d.seed, 1<<32))
	ids := make([]uint64, n)
	for i := range ids {
		if i%2 == 0 {
			ids[i] = d.posts.ID(ops.Index())
		} else {
			ids[i] = d.posts.ID(rng.Uint64N(d.posts.Len()))
		}
	}
	return ids
}

// report prints the summary.
func (d *demo) report() {
	s := d.db.Stats()
	t := cmdtab.SumTiers(s)
	hotMem, coldPayload := cmdtab.TierBytes(s)
	d.printf("\nreport\n")
	for _, c := range s.Counters {
		name := c.Name
		if c.Owner != "" { // a package's counter, as stats names it
			name = c.Owner + "." + name
		}
		d.printf("  %-10s %d rows: %d hot, %d cold (+%d delta); %d hot ranges, %d cold\n",
			name, c.Rows(), c.HotRows, c.ColdRows, c.DeltaRows, c.HotRanges, c.ColdRanges)
	}
	d.printf("  %-10s %.2f bytes/row in memory (hot tables, the store's accounting), %.2f bytes/row of cold payload (encoded blocks and descriptors; Pebble's files are not split by tier)\n",
		"bytes/row", cmdtab.BytesPerRow(hotMem, t.HotRows), cmdtab.BytesPerRow(coldPayload, t.ColdRows))
	d.printf("  %-10s %d clients: %.0f ids read/s, %.0f writes/s; read p99 %v, write p99 %v\n",
		"mixed", d.clients, float64(d.mixed.ids)/d.mixed.secs, float64(d.mixed.writes)/d.mixed.secs,
		d.mixed.read.Quantile(0.99), d.mixed.write.Quantile(0.99))
	d.printf("  %-10s %.0f ids read/s, p99 %v\n", "cold reads", float64(d.cold.ids)/d.cold.secs, d.cold.read.Quantile(0.99))
	d.printf("  %-10s %v (%d rows from the checkpoint, %d log records replayed)\n",
		"recovery", d.recovery.Duration.Round(time.Microsecond), d.recovery.RowsLoaded, d.recovery.RecordsReplayed)
	if d.likes != nil {
		d.likes.report(d)
	}
	for _, l := range d.reportLines {
		d.printf("  %s\n", l)
	}
}

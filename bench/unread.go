package bench

// The unread peer comparison (issue 9): tally's package unread in this
// process against a redis-server used as the published unread designs use
// it, side by side in one run on one data set.
//
// Redis layout:
//
//   - one-to-one counts: a hash per user, "u:USER", a field per kind;
//     HINCRBY to count, HGETALL to read every kind;
//   - feed unread: a string counter per author, "p:AUTHOR" (INCR on
//     publish), and a snapshot hash per user, "s:USER", followee → base
//     (HSET of every followee on reset); a read is HGETALL of the snapshot,
//     then one MGET of the followees' counters, summed by the client (two
//     round trips, the second depending on the first); a reset is HKEYS,
//     MGET, HSET;
//   - red dots: a global tag per channel "d:CHANNEL" and a tag per user
//     "d:CHANNEL:USER"; "has" is one MGET of both. The feed users have a
//     tag in both systems (tally records one on a user's first read, a
//     write), and the channel was marked since.
//
// The server runs with hash-max-listpack-entries 512 (the memory guide's
// setting, as the counter comparison does), so a 200-followee snapshot is
// a listpack, Redis's most compact hash encoding; no AOF, an RDB snapshot
// taken for the disk figure.
//
// tally: a store in a temporary directory under interval durability (fsync
// every second, as appendfsync everysec), the timeline and unread on it.
// The one-to-one counts are bulk-loaded (DB.Load of counter
// unread.KindsCounter), the authors' post counts too (DB.Load of the users
// counter's posts column, before any follow), and the follows go through
// Timeline.LoadFollows, which writes unread's snapshots through its
// observer exactly as single follows do.
//
// Clients are closed-loop goroutines of this process; Redis's server
// shares the machine's cores with them, tally runs in them. Memory: tally's
// own accounting (snapshot cache and gen counter) and its Go heap growth
// against Redis's used_memory growth; disk: Pebble's files of the family
// unread_feed (Family.DiskUsage after a full compaction) against the
// growth of the RDB file the snapshot hashes caused.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/tallydb/tally"
	"github.com/tallydb/tally/bench/workload"
	"github.com/tallydb/tally/internal/hist"
	"github.com/tallydb/tally/internal/procmem"
	"github.com/tallydb/tally/store"
	"github.com/tallydb/tally/timeline"
	"github.com/tallydb/tally/unread"
)

// UnreadConfig configures RunUnread. Zero fields take the defaults.
type UnreadConfig struct {
	// Dir holds both systems' data (a temporary directory if empty).
	Dir string
	// CountUsers is the number of user ids of the one-to-one counts (45%
	// have counts). The default is 1,000,000.
	CountUsers int
	// FeedUsers users each follow Follows accounts among Authors. The
	// defaults are 20,000, 200 and 100,000.
	FeedUsers, Follows, Authors int
	// Duration is the length of each measured phase. The default is 5s.
	Duration time.Duration
	// Clients is the number of concurrent clients of the throughput
	// phases. The default is 4.
	Clients int
	// Seed fixes the data. The default is 1.
	Seed uint64
	// Log receives progress lines (nil: none).
	Log io.Writer
}

// QuickUnreadConfig is a small run for smoke tests.
func QuickUnreadConfig() UnreadConfig {
	return UnreadConfig{CountUsers: 50_000, FeedUsers: 500, Follows: 200, Authors: 20_000, Duration: 500 * time.Millisecond, Clients: 2}
}

func (c *UnreadConfig) defaults() {
	if c.CountUsers == 0 {
		c.CountUsers = 1_000_000
	}
	if c.FeedUsers == 0 {
		c.FeedUsers = 20_000
	}
	if c.Follows == 0 {
		c.Follows = 200
	}
	if c.Authors == 0 {
		c.Authors = 100_000
	}
	if c.Duration == 0 {
		c.Duration = 5 * time.Second
	}
	if c.Clients == 0 {
		c.Clients = 4
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
}

// UnreadRow is one line of the comparison: a figure for tally and Redis
// (NaN: not measured; a memory growth may be negative).
type UnreadRow struct {
	What         string
	Unit         string
	Tally, Redis float64
	// Better says which way is better: "higher" or "lower".
	Better string
}

// unreadKinds are the one-to-one kinds of the comparison.
var unreadKinds = []string{"mention", "comment", "like"}

// RunUnread runs the comparison. Redis's figures are NaN (with a log line)
// when redis-server is not installed.
func RunUnread(ctx context.Context, cfg UnreadConfig) ([]UnreadRow, error) {
	cfg.defaults()
	logf := func(format string, args ...any) {
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, format+"\n", args...)
		}
	}
	dir := cfg.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "tally-unread-bench-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	fg, err := workload.NewFeedGraph(workload.FeedConfig{Seed: cfg.Seed, Users: cfg.FeedUsers, Authors: cfg.Authors, Follows: cfg.Follows})
	if err != nil {
		return nil, err
	}
	counts := workload.MustNew(workload.Config{Seed: cfg.Seed, Items: uint64(cfg.CountUsers), Columns: len(unreadKinds)})

	ts := &tallyUnread{cfg: cfg, fg: fg}
	if err := ts.open(ctx, filepath.Join(dir, "tally"), counts, logf); err != nil {
		return nil, fmt.Errorf("tally: %w", err)
	}
	defer ts.close()
	var rs *redisUnread
	if skip := RedisSkip(); skip != "" {
		logf("redis %s", skip)
	} else {
		rs = &redisUnread{cfg: cfg, fg: fg}
		if err := rs.open(filepath.Join(dir, "redis"), counts, logf); err != nil {
			return nil, fmt.Errorf("redis: %w", err)
		}
		defer rs.close()
	}

	// Footprint first: the snapshot cache is still empty, so warming it
	// measures what it holds.
	tm, err := ts.footprint(ctx)
	if err != nil {
		return nil, err
	}
	// Both systems hold the same data: their feeds must agree.
	if rs != nil {
		if err := crossCheck(ts, rs); err != nil {
			return nil, err
		}
	}
	var rows []UnreadRow
	add := func(what, unit, better string, t, r float64) {
		rows = append(rows, UnreadRow{What: what, Unit: unit, Tally: t, Redis: r, Better: better})
	}
	// Each phase: tally, then Redis, with the same operation source.
	type phase struct {
		name    string
		clients int
		tally   func(c int) func(*rand.Rand) (bool, error) // op returns whether it was the "write" kind
		redis   func(c int) (func(*rand.Rand) (bool, error), func())
	}
	run := func(p phase) (t, r driveResult, err error) {
		logf("phase %s: tally", p.name)
		t, err = drivePhase(ctx, p.clients, cfg.Duration, func(c int) (func(*rand.Rand) (bool, error), func()) { return p.tally(c), func() {} })
		if err != nil || rs == nil {
			return t, driveResult{secs: -1}, err
		}
		logf("phase %s: redis", p.name)
		r, err = drivePhase(ctx, p.clients, cfg.Duration, p.redis)
		return t, r, err
	}

	// One-to-one Get, one client: the per-core rate.
	t, r, err := run(phase{name: "counts get, 1 client", clients: 1,
		tally: func(int) func(*rand.Rand) (bool, error) { return ts.countsGet },
		redis: rs.client(rs.countsGet)})
	if err != nil {
		return nil, err
	}
	add("one-to-one Get, 1 client", "gets/s", "higher", t.rate(), r.rate())
	add("one-to-one Get p99, 1 client", "µs", "lower", t.p(0.99), r.p(0.99))

	t, r, err = run(phase{name: "counts mixed", clients: cfg.Clients,
		tally: func(int) func(*rand.Rand) (bool, error) { return ts.countsMixed },
		redis: rs.client(rs.countsMixed)})
	if err != nil {
		return nil, err
	}
	add(fmt.Sprintf("one-to-one 90%% Get / 10%% Incr, %d clients", cfg.Clients), "ops/s", "higher", t.rate(), r.rate())
	add("  Get p99", "µs", "lower", t.p(0.99), r.p(0.99))
	add("  Incr p99", "µs", "lower", t.wp(0.99), r.wp(0.99))

	t, r, err = run(phase{name: "feed get", clients: cfg.Clients,
		tally: func(int) func(*rand.Rand) (bool, error) { return ts.feedGet },
		redis: rs.client(rs.feedGet)})
	if err != nil {
		return nil, err
	}
	add(fmt.Sprintf("feed unread Get (%d followees), %d clients", cfg.Follows, cfg.Clients), "gets/s", "higher", t.rate(), r.rate())
	add("  p50", "µs", "lower", t.p(0.5), r.p(0.5))
	add("  p99", "µs", "lower", t.p(0.99), r.p(0.99))
	add("  p9999", "µs", "lower", t.p(0.9999), r.p(0.9999))

	t, r, err = run(phase{name: "feed reset", clients: cfg.Clients,
		tally: func(int) func(*rand.Rand) (bool, error) { return ts.feedReset },
		redis: rs.client(rs.feedReset)})
	if err != nil {
		return nil, err
	}
	add(fmt.Sprintf("feed reset (after one post by a followee), %d clients", cfg.Clients), "resets/s", "higher", t.rate(), r.rate())

	t, r, err = run(phase{name: "dots", clients: cfg.Clients,
		tally: func(int) func(*rand.Rand) (bool, error) { return ts.dotHas },
		redis: rs.client(rs.dotHas)})
	if err != nil {
		return nil, err
	}
	add(fmt.Sprintf("red dot Has, %d clients", cfg.Clients), "ops/s", "higher", t.rate(), r.rate())

	rm := noFootprint()
	if rs != nil {
		rm = rs.foot
	}
	follows := float64(cfg.FeedUsers * cfg.Follows)
	per := func(v int64, n float64) float64 {
		if v == notMeasured {
			return math.NaN()
		}
		return float64(v) / n
	}
	users := float64(ts.countRows)
	add("one-to-one counts memory per user with counts: own (tally: hot table accounting; Redis: used_memory)", "B", "lower", per(tm.countsOwn, users), per(rm.countsOwn, users))
	add("  heap growth (tally: Go heap; Redis: used_memory)", "B", "lower", per(tm.countsHeap, users), per(rm.countsHeap, users))
	add("  RSS growth", "B", "lower", per(tm.countsRSS, users), per(rm.countsRSS, users))
	add("feed snapshot memory per followee, all cached: own (tally: cache and gen accounting)", "B", "lower", per(tm.snapOwn, follows), per(rm.snapOwn, follows))
	add("  heap growth (tally: Go heap warming the cache, plus gen accounting)", "B", "lower", per(tm.snapHeap, follows), per(rm.snapHeap, follows))
	add("  RSS growth", "B", "lower", per(tm.snapRSS, follows), per(rm.snapRSS, follows))
	add("feed snapshot disk per followee (tally: unread_feed files; Redis: RDB growth)", "B", "lower", per(tm.snapDisk, follows), per(rm.snapDisk, follows))
	return rows, nil
}

// crossCheck compares tally's and Redis's feed unread of some users.
func crossCheck(ts *tallyUnread, rs *redisUnread) error {
	c, err := rs.rt.conn()
	if err != nil {
		return err
	}
	defer c.Close()
	rc := &redisUnreadConn{r: rs, c: c}
	step := max(ts.cfg.FeedUsers/50, 1)
	for u := uint64(1); u <= uint64(ts.cfg.FeedUsers); u += uint64(step) {
		tv, err := ts.x.Feed(u)
		if err != nil {
			return err
		}
		rv, err := rc.feed(u)
		if err != nil {
			return err
		}
		if tv != rv {
			return fmt.Errorf("bench: user %d: tally's feed unread is %d, Redis's %d", u, tv, rv)
		}
	}
	return nil
}

// UnreadTable renders rows as a markdown table with tally's ratio to Redis.
func UnreadTable(rows []UnreadRow) string {
	var b strings.Builder
	b.WriteString("| measure | unit | tally | redis | tally ÷ redis |\n|---|---|--:|--:|--:|\n")
	for _, r := range rows {
		f := func(v float64) string {
			switch {
			case math.IsNaN(v):
				return "—"
			case math.Abs(v) >= 100:
				return strconv.FormatFloat(v, 'f', 0, 64)
			default:
				return strconv.FormatFloat(v, 'f', 2, 64)
			}
		}
		ratio := "—"
		if r.Tally > 0 && r.Redis > 0 {
			ratio = fmt.Sprintf("%.2f (%s is better)", r.Tally/r.Redis, r.Better)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", r.What, r.Unit, f(r.Tally), f(r.Redis), ratio)
	}
	return b.String()
}

// driveResult is what one phase measured.
type driveResult struct {
	ops, writes int64
	read, write hist.Histogram
	secs        float64 // < 0: not run
}

func (d driveResult) rate() float64 {
	if d.secs <= 0 {
		return math.NaN()
	}
	return float64(d.ops) / d.secs
}

func (d driveResult) p(q float64) float64 {
	if d.secs <= 0 {
		return math.NaN()
	}
	return float64(d.read.Quantile(q).Nanoseconds()) / 1e3
}

func (d driveResult) wp(q float64) float64 {
	if d.secs <= 0 {
		return math.NaN()
	}
	return float64(d.write.Quantile(q).Nanoseconds()) / 1e3
}

// drivePhase runs clients closed-loop for dur (hist.RunClosedLoop), each
// with its own random source.
func drivePhase(ctx context.Context, clients int, dur time.Duration, newClient func(c int) (func(*rand.Rand) (bool, error), func())) (driveResult, error) {
	d, err := hist.RunClosedLoop(ctx, clients, dur, nil, func(c int) (func() (bool, error), func()) {
		op, done := newClient(c)
		rng := rand.New(rand.NewPCG(uint64(c), 77))
		return func() (bool, error) { return op(rng) }, done
	})
	return driveResult{ops: d.Ops, writes: d.Writes, read: d.Read, write: d.Write, secs: d.Secs}, err
}

// unreadFootprint is what one system's data costs (-1: not measured), in
// memory three ways as the counter comparison (Memory): own accounting,
// heap (live allocations) and RSS growth. For Redis own and heap are both
// used_memory growth.
type unreadFootprint struct {
	countsOwn, countsHeap, countsRSS int64
	snapOwn, snapHeap, snapRSS       int64
	snapDisk                         int64
}

// notMeasured marks a footprint figure that was not taken.
const notMeasured = math.MinInt64

func noFootprint() unreadFootprint {
	n := int64(notMeasured)
	return unreadFootprint{n, n, n, n, n, n, n}
}

// tallyUnread is the tally side.
type tallyUnread struct {
	cfg       UnreadConfig
	fg        *workload.FeedGraph
	db        *store.DB
	all       *tally.DB
	tl        *timeline.Timeline
	x         *unread.Unread
	countRows int
	// countsHeap and countsRSS are the process's growth loading the
	// one-to-one counts (the input rows freed first).
	countsHeap, countsRSS int64
}

func (t *tallyUnread) open(ctx context.Context, dir string, counts *workload.Workload, logf func(string, ...any)) error {
	// tally.Open wires unread on the timeline, first, on the empty
	// graph: a complete store.
	all, err := tally.Open(dir, &tally.Options{
		Store:    &store.Options{Durability: store.SyncInterval, CompactionInterval: -1},
		Timeline: &timeline.Options{ExpireInterval: -1},
		Unread:   &unread.Options{SnapshotCacheBytes: 1 << 30},
	})
	if err != nil {
		return err
	}
	t.all, t.db, t.tl, t.x = all, all.Store(), all.Timeline(), all.Unread()
	for _, k := range unreadKinds {
		if err := t.x.AddKind(k, store.ColumnOptions{}); err != nil {
			return err
		}
	}
	start := time.Now()
	// The process's growth from before the input rows are generated to
	// after they are dropped: what the loaded counts keep.
	m0 := procmem.Measure()
	var in store.LoadRows
	var i uint64
	counts.Items(func(_ uint64, vals []uint64) bool {
		i++
		if !workload.IsZero(vals) {
			in.IDs = append(in.IDs, i)
			in.Vals = append(in.Vals, vals...)
		}
		return true
	})
	t.countRows = len(in.IDs)
	if _, err := t.db.Load(ctx, unread.KindsCounter, in, nil); err != nil {
		return err
	}
	in = store.LoadRows{}
	grown := procmem.Measure().Sub(m0)
	t.countsHeap, t.countsRSS = grown.Heap, grown.RSS
	// Post counts, then the follows (whose bases are those counts).
	users, err := t.db.Counter(timeline.UsersCounter)
	if err != nil {
		return err
	}
	cols := users.Columns()
	in = store.LoadRows{}
	for a := uint64(1); a <= uint64(t.cfg.Authors); a++ {
		if p := t.fg.Posts(a); p > 0 {
			row := make([]uint64, len(cols))
			for j, c := range cols {
				if c == timeline.ColPosts {
					row[j] = p
				}
			}
			in.IDs = append(in.IDs, a)
			in.Vals = append(in.Vals, row...)
		}
	}
	if _, err := t.db.Load(ctx, timeline.UsersCounter, in, nil); err != nil {
		return err
	}
	edges := make([]timeline.Edge, 0, t.cfg.FeedUsers*t.cfg.Follows)
	var fs []uint64
	for u := uint64(1); u <= uint64(t.cfg.FeedUsers); u++ {
		fs = t.fg.Followees(u, fs)
		for _, f := range fs {
			edges = append(edges, timeline.Edge{Follower: u, Followee: f})
		}
	}
	if _, err := t.tl.LoadFollows(ctx, edges, nil); err != nil {
		return err
	}
	// A post by a tenth of the authors, so feeds are not all zero.
	b := t.db.NewBatch()
	defer b.Close()
	for a := uint64(1); a <= uint64(t.cfg.Authors); a += 10 {
		if err := b.Incr(timeline.UsersCounter, a, timeline.ColPosts, 1); err != nil {
			return err
		}
	}
	if err := b.Commit(); err != nil {
		return err
	}
	// The feed users have read the channel (a first read would record
	// their tag, a write); then it gets a new mark.
	if _, err := t.x.Mark("news"); err != nil {
		return err
	}
	for u := uint64(1); u <= uint64(t.cfg.FeedUsers); u++ {
		if err := t.x.Clear(u, "news"); err != nil {
			return err
		}
	}
	if _, err := t.x.Mark("news"); err != nil {
		return err
	}
	logf("tally: loaded %d count rows, %d follows in %v", t.countRows, len(edges), time.Since(start).Round(time.Millisecond))
	return nil
}

func (t *tallyUnread) close() {
	t.all.Close()
}

func (t *tallyUnread) countsGet(rng *rand.Rand) (bool, error) {
	var buf [3]uint64
	_, err := t.x.Get(rng.Uint64N(uint64(t.cfg.CountUsers))+1, buf[:0])
	return false, err
}

func (t *tallyUnread) countsMixed(rng *rand.Rand) (bool, error) {
	u := rng.Uint64N(uint64(t.cfg.CountUsers)) + 1
	if rng.IntN(10) == 0 {
		_, err := t.x.Incr(u, unreadKinds[rng.IntN(len(unreadKinds))], 1)
		return true, err
	}
	var buf [3]uint64
	_, err := t.x.Get(u, buf[:0])
	return false, err
}

func (t *tallyUnread) feedGet(rng *rand.Rand) (bool, error) {
	_, err := t.x.Feed(rng.Uint64N(uint64(t.cfg.FeedUsers)) + 1)
	return false, err
}

func (t *tallyUnread) feedReset(rng *rand.Rand) (bool, error) {
	u := rng.Uint64N(uint64(t.cfg.FeedUsers)) + 1
	fs := t.fg.Followees(u, nil)
	b := t.db.NewBatch()
	err := b.Incr(timeline.UsersCounter, fs[rng.IntN(len(fs))], timeline.ColPosts, 1)
	if err == nil {
		err = b.Commit()
	}
	b.Close()
	if err != nil {
		return true, err
	}
	return true, t.x.FeedReset(u)
}

func (t *tallyUnread) dotHas(rng *rand.Rand) (bool, error) {
	_, err := t.x.Has(rng.Uint64N(uint64(t.cfg.FeedUsers))+1, "news")
	return false, err
}

// footprint measures what tally's unread data costs.
func (t *tallyUnread) footprint(ctx context.Context) (unreadFootprint, error) {
	f := noFootprint()
	if err := t.db.Checkpoint(); err != nil {
		return f, err
	}
	if err := t.db.CompactDisk(ctx); err != nil {
		return f, err
	}
	fam, err := t.db.Family("unread_feed")
	if err != nil {
		return f, err
	}
	disk, err := fam.DiskUsage()
	if err != nil {
		return f, err
	}
	f.snapDisk = int64(disk)
	var genMem int64
	for _, c := range t.db.Stats().Counters {
		switch c.Name {
		case unread.KindsCounter:
			f.countsOwn = c.MemBytes
		case unread.FeedCounter:
			genMem = c.MemBytes
		}
	}
	f.countsHeap, f.countsRSS = t.countsHeap, t.countsRSS
	m0 := procmem.Measure()
	for u := uint64(1); u <= uint64(t.cfg.FeedUsers); u++ {
		if _, err := t.x.Feed(u); err != nil {
			return f, err
		}
	}
	grown := procmem.Measure().Sub(m0)
	f.snapHeap = grown.Heap + genMem
	f.snapRSS = grown.RSS + genMem
	var cacheBytes int64
	for _, s := range t.x.Stats() {
		if s.Key == "snapshot_cache_bytes" {
			cacheBytes, _ = strconv.ParseInt(s.Value, 10, 64)
		}
	}
	f.snapOwn = cacheBytes + genMem
	return f, nil
}

// redisUnread is the Redis side.
type redisUnread struct {
	cfg  UnreadConfig
	fg   *workload.FeedGraph
	rt   *redisTarget
	foot unreadFootprint
}

func (r *redisUnread) open(dir string, counts *workload.Workload, logf func(string, ...any)) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	r.rt = &redisTarget{dir: dir}
	if err := r.rt.start(); err != nil {
		return err
	}
	c, err := r.rt.conn()
	if err != nil {
		return err
	}
	defer c.Close()
	start := time.Now()
	r.foot = noFootprint()
	mem := func() (used, rss int64) {
		used, _ = infoInt(c, "memory", "used_memory")
		rss, _ = infoInt(c, "memory", "used_memory_rss")
		return used, rss
	}
	m0, r0 := mem()
	var key []byte
	n := 0
	var i uint64
	var werr error
	counts.Items(func(_ uint64, vals []uint64) bool {
		i++
		if workload.IsZero(vals) {
			return true
		}
		args := 2
		for _, v := range vals {
			if v != 0 {
				args += 2
			}
		}
		c.begin(args)
		c.argString("HSET")
		key = strconv.AppendUint(append(key[:0], "u:"...), i, 10)
		c.arg(key)
		for k, v := range vals {
			if v != 0 {
				c.argString(unreadKinds[k])
				c.argInt(int64(v))
			}
		}
		if n++; n%1000 == 0 {
			if werr = c.flush(); werr == nil {
				werr = c.drain()
			}
		}
		return werr == nil
	})
	if werr != nil {
		return werr
	}
	if err := flushDrain(c); err != nil {
		return err
	}
	m1, r1 := mem()
	r.foot.countsOwn, r.foot.countsHeap, r.foot.countsRSS = m1-m0, m1-m0, r1-r0
	for a := uint64(1); a <= uint64(r.cfg.Authors); a++ {
		if p := r.fg.Posts(a); p > 0 {
			c.begin(3)
			c.argString("SET")
			c.arg(strconv.AppendUint(append(key[:0], "p:"...), a, 10))
			c.argInt(int64(p))
		}
		if a%1000 == 0 {
			if err := flushDrain(c); err != nil {
				return err
			}
		}
	}
	if err := flushDrain(c); err != nil {
		return err
	}
	rdb0, err := r.rdbBytes(c)
	if err != nil {
		return err
	}
	m2, r2 := mem()
	var fs []uint64
	for u := uint64(1); u <= uint64(r.cfg.FeedUsers); u++ {
		fs = r.fg.Followees(u, fs)
		c.begin(2 + 2*len(fs))
		c.argString("HSET")
		c.arg(strconv.AppendUint(append(key[:0], "s:"...), u, 10))
		for _, f := range fs {
			c.argInt(int64(f))
			c.argInt(int64(r.fg.Posts(f)))
		}
		if u%100 == 0 {
			if err := flushDrain(c); err != nil {
				return err
			}
		}
	}
	if err := flushDrain(c); err != nil {
		return err
	}
	m3, r3 := mem()
	r.foot.snapOwn, r.foot.snapHeap, r.foot.snapRSS = m3-m2, m3-m2, r3-r2
	rdb1, err := r.rdbBytes(c)
	if err != nil {
		return err
	}
	r.foot.snapDisk = rdb1 - rdb0
	for a := uint64(1); a <= uint64(r.cfg.Authors); a += 10 {
		c.begin(2)
		c.argString("INCR")
		c.arg(strconv.AppendUint(append(key[:0], "p:"...), a, 10))
		if a%10000 == 1 {
			if err := flushDrain(c); err != nil {
				return err
			}
		}
	}
	c.cmd("SET", "d:news", "1")
	for u := uint64(1); u <= uint64(r.cfg.FeedUsers); u++ {
		c.cmd("SET", "d:news:"+strconv.FormatUint(u, 10), "1")
	}
	c.cmd("SET", "d:news", "2")
	if err := flushDrain(c); err != nil {
		return err
	}
	logf("redis: loaded in %v", time.Since(start).Round(time.Millisecond))
	return nil
}

func flushDrain(c *respConn) error {
	if err := c.flush(); err != nil {
		return err
	}
	return c.drain()
}

// rdbBytes saves an RDB snapshot and returns its size.
func (r *redisUnread) rdbBytes(c *respConn) (int64, error) {
	if _, err := c.do("SAVE"); err != nil {
		return 0, err
	}
	fi, err := os.Stat(filepath.Join(r.rt.dir, "dump.rdb"))
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

func (r *redisUnread) close() { r.rt.kill() }

// client adapts an operation on a connection to drivePhase's client. r may
// be nil (Redis not installed): the phase is then skipped by run.
func (r *redisUnread) client(op func(c *redisUnreadConn, rng *rand.Rand) (bool, error)) func(int) (func(*rand.Rand) (bool, error), func()) {
	return func(int) (func(*rand.Rand) (bool, error), func()) {
		c, err := r.rt.conn()
		if err != nil {
			return func(*rand.Rand) (bool, error) { return false, err }, func() {}
		}
		rc := &redisUnreadConn{r: r, c: c}
		return func(rng *rand.Rand) (bool, error) { return op(rc, rng) }, func() { c.Close() }
	}
}

// redisUnreadConn is one client's connection and buffers.
type redisUnreadConn struct {
	r    *redisUnread
	c    *respConn
	key  []byte
	vals []uint64
	fs   []uint64
	sum  uint64
}

func (rc *redisUnreadConn) userKey(prefix string, u uint64) []byte {
	rc.key = strconv.AppendUint(append(rc.key[:0], prefix...), u, 10)
	return rc.key
}

func (r *redisUnread) countsGet(rc *redisUnreadConn, rng *rand.Rand) (bool, error) {
	c := rc.c
	c.begin(2)
	c.argString("HGETALL")
	c.arg(rc.userKey("u:", rng.Uint64N(uint64(r.cfg.CountUsers))+1))
	if err := c.flush(); err != nil {
		return false, err
	}
	var err error
	rc.vals, err = readStrings(c, rc.vals[:0])
	return false, err
}

func (r *redisUnread) countsMixed(rc *redisUnreadConn, rng *rand.Rand) (bool, error) {
	u := rng.Uint64N(uint64(r.cfg.CountUsers)) + 1
	if rng.IntN(10) != 0 {
		c := rc.c
		c.begin(2)
		c.argString("HGETALL")
		c.arg(rc.userKey("u:", u))
		if err := c.flush(); err != nil {
			return false, err
		}
		var err error
		rc.vals, err = readStrings(c, rc.vals[:0])
		return false, err
	}
	c := rc.c
	c.begin(4)
	c.argString("HINCRBY")
	c.arg(rc.userKey("u:", u))
	c.argString(unreadKinds[rng.IntN(len(unreadKinds))])
	c.argInt(1)
	if err := c.flush(); err != nil {
		return true, err
	}
	return true, c.readOK()
}

// feedGet is HGETALL of the snapshot, then MGET of its followees' counters.
func (r *redisUnread) feedGet(rc *redisUnreadConn, rng *rand.Rand) (bool, error) {
	n, err := rc.feed(rng.Uint64N(uint64(r.cfg.FeedUsers)) + 1)
	rc.sum += n // the client's answer, kept so the work is not dead code
	return false, err
}

// feed returns user u's feed unread as the published design computes it.
func (rc *redisUnreadConn) feed(u uint64) (uint64, error) {
	c := rc.c
	c.begin(2)
	c.argString("HGETALL")
	c.arg(rc.userKey("s:", u))
	if err := c.flush(); err != nil {
		return 0, err
	}
	var err error
	if rc.vals, err = c.readInts(rc.vals[:0]); err != nil {
		return 0, err
	}
	pairs := rc.vals
	if len(pairs) == 0 {
		return 0, errors.New("redis: empty snapshot")
	}
	c.begin(1 + len(pairs)/2)
	c.argString("MGET")
	for i := 0; i < len(pairs); i += 2 {
		c.arg(rc.userKey("p:", pairs[i]))
	}
	if err := c.flush(); err != nil {
		return 0, err
	}
	posts, err := c.readInts(rc.fs[:0])
	rc.fs = posts
	if err != nil {
		return 0, err
	}
	var n uint64
	for i, p := range posts {
		if b := pairs[2*i+1]; p > b {
			n += p - b
		}
	}
	return n, nil
}

// feedReset is one post (INCR) by a followee, then HKEYS, MGET, HSET.
func (r *redisUnread) feedReset(rc *redisUnreadConn, rng *rand.Rand) (bool, error) {
	c := rc.c
	u := rng.Uint64N(uint64(r.cfg.FeedUsers)) + 1
	fs := r.fg.Followees(u, rc.fs[:0])
	rc.fs = fs
	c.begin(2)
	c.argString("INCR")
	c.arg(rc.userKey("p:", fs[rng.IntN(len(fs))]))
	if err := c.flush(); err != nil {
		return true, err
	}
	if err := c.readOK(); err != nil {
		return true, err
	}
	c.begin(2)
	c.argString("HKEYS")
	c.arg(rc.userKey("s:", u))
	if err := c.flush(); err != nil {
		return true, err
	}
	keys, err := c.readInts(rc.vals[:0])
	rc.vals = keys
	if err != nil {
		return true, err
	}
	c.begin(1 + len(keys))
	c.argString("MGET")
	for _, f := range keys {
		c.arg(rc.userKey("p:", f))
	}
	if err := c.flush(); err != nil {
		return true, err
	}
	posts, err := c.readInts(nil)
	if err != nil {
		return true, err
	}
	c.begin(2 + 2*len(keys))
	c.argString("HSET")
	c.arg(rc.userKey("s:", u))
	for i, f := range keys {
		c.argInt(int64(f))
		c.argInt(int64(posts[i]))
	}
	if err := c.flush(); err != nil {
		return true, err
	}
	return true, c.readOK()
}

// dotHas is one MGET of the channel's tag and the user's.
func (r *redisUnread) dotHas(rc *redisUnreadConn, rng *rand.Rand) (bool, error) {
	c := rc.c
	c.begin(3)
	c.argString("MGET")
	c.argString("d:news")
	rc.key = strconv.AppendUint(append(rc.key[:0], "d:news:"...), rng.Uint64N(uint64(r.cfg.FeedUsers))+1, 10)
	c.arg(rc.key)
	if err := c.flush(); err != nil {
		return false, err
	}
	var err error
	rc.vals, err = c.readInts(rc.vals[:0])
	return false, err
}

// readStrings reads an array reply of bulk strings (HGETALL of field
// names and numbers), keeping the numbers.
func readStrings(c *respConn, dst []uint64) ([]uint64, error) {
	c.pending--
	kind, n, _, err := c.reply()
	if err != nil {
		return dst, err
	}
	if kind != '*' {
		return dst, errRESPProtocol
	}
	for k := int64(0); k < n; k++ {
		_, m, s, err := c.reply()
		if err != nil {
			return dst, err
		}
		if k%2 == 1 {
			v, err := bulkUint(m, s)
			if err != nil {
				return dst, err
			}
			dst = append(dst, v)
		}
	}
	return dst, nil
}

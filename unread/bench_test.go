package unread

// Benchmarks (issue 9). Sizes come from the environment so `go test
// -bench=. ./unread/` stays quick; the lead's figures use the full sizes:
//
//	TALLY_UNREAD_BENCH_USERS=1000000      ids of the one-to-one counts (45% with counts)
//	TALLY_UNREAD_BENCH_FEED_USERS=2000    users of the feed benchmarks
//	TALLY_UNREAD_BENCH_FOLLOWS=200        followees per feed user
//	TALLY_UNREAD_BENCH_AUTHORS=100000     authors followed (Zipf popularity)
//
// Data: bench/workload (power-law counts; FeedGraph for who follows whom,
// from internal/socialgraph, and the authors' post counts). Ids are drawn uniformly over every user,
// zero ones included. Stores are on the real disk under interval
// durability (fsync every second, Redis's appendfsync everysec).
//
// The feed benchmarks build the state a live store would hold without
// going through 200 × users timeline follows: the users counter gets its
// post counts by DB.Load, and each user's snapshot is written as the
// observer would write it (follow operations with the followee's count),
// then Pebble is compacted so the operands are folded. Feed reads it
// through the real timeline's PostCounts.

import (
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/tallydb/tally/bench/workload"
	"github.com/tallydb/tally/internal/hist"
	"github.com/tallydb/tally/internal/procmem"
	"github.com/tallydb/tally/internal/testutil"
	"github.com/tallydb/tally/store"
	"github.com/tallydb/tally/timeline"
)

// benchStores are the stores the benchmarks of this process built, closed
// and removed by TestMain.
var benchStores struct {
	sync.Mutex
	closers []func()
}

func TestMain(m *testing.M) {
	code := m.Run()
	benchStores.Lock()
	for _, c := range benchStores.closers {
		c()
	}
	benchStores.Unlock()
	os.Exit(code)
}

// benchStore opens a new store with the timeline and unread on it.
func benchStore(b *testing.B, cacheBytes int64) (*store.DB, *timeline.Timeline, *Unread) {
	b.Helper()
	dir, err := os.MkdirTemp("", "tally-unread-bench-")
	if err != nil {
		b.Fatal(err)
	}
	db, err := store.Open(dir, &store.Options{
		Durability: store.SyncInterval, CompactionInterval: -1,
		Families: append(Families(), timeline.Families()...),
	})
	if err != nil {
		b.Fatal(err)
	}
	tl, err := timeline.New(db, &timeline.Options{ExpireInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	x, err := New(db, &Options{Graph: tl, SnapshotCacheBytes: cacheBytes})
	if err != nil {
		b.Fatal(err)
	}
	benchStores.Lock()
	benchStores.closers = append(benchStores.closers, func() {
		tl.Close()
		db.Close()
		os.RemoveAll(dir)
	})
	benchStores.Unlock()
	return db, tl, x
}

// countsBench is a store whose users have one-to-one counts of 3 kinds.
type countsBench struct {
	x     *Unread
	users uint64
}

var countsOnce struct {
	sync.Once
	cb *countsBench
}

func setupCounts(b *testing.B) *countsBench {
	countsOnce.Do(func() {
		users := uint64(testutil.EnvInt(b, "TALLY_UNREAD_BENCH_USERS", 1_000_000))
		db, _, x := benchStore(b, 0)
		for _, k := range []string{"mention", "comment", "like"} {
			if err := x.AddKind(k, store.ColumnOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		w := workload.MustNew(workload.Config{Seed: 9, Items: users, Columns: 3})
		var in store.LoadRows
		var i uint64
		w.Items(func(_ uint64, vals []uint64) bool {
			i++
			if !workload.IsZero(vals) {
				in.IDs = append(in.IDs, i)
				in.Vals = append(in.Vals, vals...)
			}
			return true
		})
		if _, err := db.Load(b.Context(), KindsCounter, in, nil); err != nil {
			b.Fatal(err)
		}
		countsOnce.cb = &countsBench{x: x, users: users}
	})
	return countsOnce.cb
}

// BenchmarkCountsGet reads every kind of a user drawn uniformly over all
// ids (55% of them have no counts): ids/s per core with -cpu 1.
func BenchmarkCountsGet(b *testing.B) {
	cb := setupCounts(b)
	b.ReportAllocs()
	b.ResetTimer()
	var seed sync.Mutex
	n := uint64(0)
	b.RunParallel(func(pb *testing.PB) {
		seed.Lock()
		n++
		rng := rand.New(rand.NewPCG(n, 1))
		seed.Unlock()
		buf := make([]uint64, 0, 3)
		for pb.Next() {
			var err error
			if buf, err = cb.x.Get(rng.Uint64N(cb.users)+1, buf); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ids/s")
}

// BenchmarkCountsMixed runs 90% Gets and 10% Incrs of a random kind (users
// uniform) and reports each's latency.
func BenchmarkCountsMixed(b *testing.B) {
	cb := setupCounts(b)
	kinds := cb.x.Kinds()
	var (
		mu         sync.Mutex
		gets, incs hist.Histogram
		seq        uint64
	)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		mu.Lock()
		seq++
		rng := rand.New(rand.NewPCG(seq, 2))
		mu.Unlock()
		var g, w hist.Histogram
		buf := make([]uint64, 0, 3)
		for pb.Next() {
			u := rng.Uint64N(cb.users) + 1
			t0 := time.Now()
			var err error
			if rng.IntN(10) == 0 {
				_, err = cb.x.Incr(u, kinds[rng.IntN(len(kinds))], 1)
				w.Record(time.Since(t0))
			} else {
				buf, err = cb.x.Get(u, buf)
				g.Record(time.Since(t0))
			}
			if err != nil {
				b.Error(err)
				return
			}
		}
		mu.Lock()
		gets.Merge(&g)
		incs.Merge(&w)
		mu.Unlock()
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	b.ReportMetric(float64(gets.Quantile(0.99).Nanoseconds()), "get-p99-ns")
	b.ReportMetric(float64(incs.Quantile(0.99).Nanoseconds()), "incr-p99-ns")
}

// feedBench is a store whose users follow FeedGraph's authors.
type feedBench struct {
	db    *store.DB
	tl    *timeline.Timeline
	x     *Unread
	g     *workload.FeedGraph
	users int
}

var feedOnce struct {
	sync.Once
	fb *feedBench
}

func followGraph(b *testing.B) *workload.FeedGraph {
	g, err := workload.NewFeedGraph(workload.FeedConfig{
		Seed:    1,
		Users:   testutil.EnvInt(b, "TALLY_UNREAD_BENCH_FEED_USERS", 2000),
		Follows: testutil.EnvInt(b, "TALLY_UNREAD_BENCH_FOLLOWS", 200),
		Authors: testutil.EnvInt(b, "TALLY_UNREAD_BENCH_AUTHORS", 100_000),
	})
	if err != nil {
		b.Fatal(err)
	}
	return g
}

// loadFeed writes g's post counts into the users counter and every user's
// snapshot as the observer would, then publishes one more post by a tenth
// of the authors (so feeds are not all zero) and compacts.
func loadFeed(b *testing.B, db *store.DB, x *Unread, g *workload.FeedGraph) {
	loadPosts(b, db, g)
	loadSnapshots(b, db, x, g)
	publishSome(b, db, g)
	if err := db.CompactDisk(b.Context()); err != nil {
		b.Fatal(err)
	}
}

// loadPosts sets the users counter's post counts to g's.
func loadPosts(b *testing.B, db *store.DB, g *workload.FeedGraph) {
	users, err := db.Counter(timeline.UsersCounter)
	if err != nil {
		b.Fatal(err)
	}
	cols := users.Columns()
	postsCol := -1
	for i, c := range cols {
		if c == timeline.ColPosts {
			postsCol = i
		}
	}
	var in store.LoadRows
	for a := uint64(1); a <= uint64(g.Config().Authors); a++ {
		if p := g.Posts(a); p > 0 {
			in.IDs = append(in.IDs, a)
			row := make([]uint64, len(cols))
			row[postsCol] = p
			in.Vals = append(in.Vals, row...)
		}
	}
	if _, err := db.Load(b.Context(), timeline.UsersCounter, in, nil); err != nil {
		b.Fatal(err)
	}
}

// loadSnapshots writes each user's snapshot as the observer would (one
// operand of follow operations), and its gen.
func loadSnapshots(b *testing.B, db *store.DB, x *Unread, g *workload.FeedGraph) {
	batch := db.NewBatch()
	defer batch.Close()
	var fs []uint64
	var ops []*feedOp
	for u := 1; u <= g.Config().Users; u++ {
		fs = g.Followees(uint64(u), fs)
		ops = ops[:0]
		for _, f := range fs {
			ops = append(ops, &feedOp{typ: opFollow, initIfNew: true, f: f, base: g.Posts(f)})
		}
		if err := x.feedFam.Merge(batch, feedKey(nil, uint64(u)), snapMerge.Frame(nil, appendOps(nil, ops...))); err != nil {
			b.Fatal(err)
		}
		if err := batch.Incr(FeedCounter, uint64(u), genColumn, int64(len(ops))); err != nil {
			b.Fatal(err)
		}
		if u%500 == 0 || u == g.Config().Users {
			if err := batch.Commit(); err != nil {
				b.Fatal(err)
			}
			batch.Reset()
		}
	}
}

// publishSome adds a post by a tenth of the authors.
func publishSome(b *testing.B, db *store.DB, g *workload.FeedGraph) {
	batch := db.NewBatch()
	defer batch.Close()
	rng := rand.New(rand.NewPCG(7, 7))
	for a := 1; a <= g.Config().Authors; a++ {
		if rng.IntN(10) == 0 {
			if err := batch.Incr(timeline.UsersCounter, uint64(a), timeline.ColPosts, 1); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := batch.Commit(); err != nil {
		b.Fatal(err)
	}
}

func setupFeed(b *testing.B) *feedBench {
	feedOnce.Do(func() {
		g := followGraph(b)
		db, tl, x := benchStore(b, 0)
		start := time.Now()
		loadFeed(b, db, x, g)
		b.Logf("feed store: %d users following %d of %d authors, built in %v", g.Config().Users, g.Config().Follows, g.Config().Authors, time.Since(start).Round(time.Millisecond))
		feedOnce.fb = &feedBench{db: db, tl: tl, x: x, g: g, users: g.Config().Users}
	})
	return feedOnce.fb
}

// BenchmarkFeed reads the feed unread of users drawn uniformly (each
// following TALLY_UNREAD_BENCH_FOLLOWS authors): gets/s (with -cpu 2, on
// two cores) and p50/p99/p9999. "cached": every snapshot in the cache;
// "uncached": no cache, every read decodes the snapshot from Pebble (its
// block cache warm).
func BenchmarkFeed(b *testing.B) {
	fb := setupFeed(b)
	for _, v := range []struct {
		name  string
		cache int64
	}{{"cached", 1 << 30}, {"uncached", -1}} {
		b.Run(v.name, func(b *testing.B) {
			fb.x.cache = newSnapCache(v.cache)
			defer func() { fb.x.cache = newSnapCache(DefaultSnapshotCacheBytes) }()
			for u := 1; u <= fb.users; u++ { // warm the caches
				if _, err := fb.x.Feed(uint64(u)); err != nil {
					b.Fatal(err)
				}
			}
			var (
				mu  sync.Mutex
				all hist.Histogram
				seq uint64
			)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				mu.Lock()
				seq++
				rng := rand.New(rand.NewPCG(seq, 3))
				mu.Unlock()
				var h hist.Histogram
				for pb.Next() {
					u := rng.Uint64N(uint64(fb.users)) + 1
					t0 := time.Now()
					if _, err := fb.x.Feed(u); err != nil {
						b.Error(err)
						return
					}
					h.Record(time.Since(t0))
				}
				mu.Lock()
				all.Merge(&h)
				mu.Unlock()
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "gets/s")
			b.ReportMetric(float64(all.Quantile(0.5).Nanoseconds())/1e3, "p50-µs")
			b.ReportMetric(float64(all.Quantile(0.99).Nanoseconds())/1e3, "p99-µs")
			b.ReportMetric(float64(all.Quantile(0.9999).Nanoseconds())/1e3, "p9999-µs")
		})
	}
}

// BenchmarkFeedReset resets the feed of users drawn uniformly, each after
// one post by one of its followees (so every reset has a base to change
// and writes: an idle reset writes nothing). resets/s include that
// publish's counter increment.
func BenchmarkFeedReset(b *testing.B) {
	fb := setupFeed(b)
	var (
		mu  sync.Mutex
		seq uint64
	)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		mu.Lock()
		seq++
		rng := rand.New(rand.NewPCG(seq, 4))
		mu.Unlock()
		var fs []uint64
		for pb.Next() {
			u := rng.Uint64N(uint64(fb.users)) + 1
			fs = fb.g.Followees(u, fs)
			batch := fb.db.NewBatch()
			err := batch.Incr(timeline.UsersCounter, fs[rng.IntN(len(fs))], timeline.ColPosts, 1)
			if err == nil {
				err = batch.Commit()
			}
			batch.Close()
			if err == nil {
				err = fb.x.FeedReset(u)
			}
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "resets/s")
}

// BenchmarkFeedFootprint builds a feed store of its own (once per
// process) and reports what the snapshots cost: on disk, the growth of
// Pebble's data files (after a checkpoint and a full compaction) from
// writing the snapshots and their gens, the post counts having been loaded
// and measured before, per followee and per user, as written by follows
// ("followed") and after every user's first reset ("reset", which
// run-length encodes the operation tags); in memory the gen counter (store
// accounting) per user and, with every snapshot cached, the cache's
// accounting and the process's heap and RSS growth per user.
func BenchmarkFeedFootprint(b *testing.B) {
	footprintOnce.Do(func() { footprintOnce.m = measureFootprint(b) })
	for range b.N {
	}
	for _, m := range footprintOnce.m {
		b.ReportMetric(m.v, m.unit)
	}
}

var footprintOnce struct {
	sync.Once
	m []metric
}

type metric struct {
	v    float64
	unit string
}

func measureFootprint(b *testing.B) []metric {
	g := followGraph(b)
	db, _, x := benchStore(b, 1<<30)
	loadPosts(b, db, g)
	settle := func() uint64 {
		if err := db.Checkpoint(); err != nil {
			b.Fatal(err)
		}
		if err := db.CompactDisk(b.Context()); err != nil {
			b.Fatal(err)
		}
		return db.Stats().TableBytes
	}
	before := settle()
	loadSnapshots(b, db, x, g)
	followed := settle()
	publishSome(b, db, g)
	for u := 1; u <= g.Config().Users; u++ {
		if err := x.FeedReset(uint64(u)); err != nil {
			b.Fatal(err)
		}
	}
	reset := settle()
	var genMem int64
	for _, c := range db.Stats().Counters {
		if c.Name == FeedCounter {
			genMem = c.MemBytes
		}
	}
	x.cache.clear()
	m0 := procmem.Measure()
	for u := 1; u <= g.Config().Users; u++ {
		if _, err := x.Feed(uint64(u)); err != nil {
			b.Fatal(err)
		}
	}
	grown := procmem.Measure().Sub(m0)
	cs := x.cache.stats()
	follows := float64(g.Config().Users * g.Config().Follows)
	users := float64(g.Config().Users)
	b.Logf("%d users × %d followees: table bytes %d, %d followed, %d reset", g.Config().Users, g.Config().Follows, before, followed, reset)
	return []metric{
		{float64(followed-before) / follows, "disk-B/followee-followed"},
		{float64(reset-before) / follows, "disk-B/followee-reset"},
		{float64(reset-before) / users, "disk-B/user-reset"},
		{float64(genMem) / users, "gen-mem-B/user"},
		{float64(cs.bytes) / users, "cache-B/user"},
		{float64(grown.Heap) / users, "cache-heap-B/user"},
		{float64(grown.RSS) / users, "cache-rss-B/user"},
	}
}

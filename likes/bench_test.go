package likes

// Benchmarks. Sizes come from the environment so `go test -bench .
// ./likes/` stays quick; full-size figures for bench/RESULTS.md use
// larger values:
//
//	TALLY_LIKES_BENCH_LIKES=200000   likes bulk-loaded before a benchmark
//	TALLY_LIKES_BENCH_ITEMS=100000   items (popularity Zipf 1.1)
//	TALLY_LIKES_BENCH_USERS=100000   users
//	TALLY_LIKES_BENCH_ORDCACHE=N     Options.OrdinalCacheBytes (default: its default)
//	TALLY_LIKES_BENCH_NODAYS=1       no daily boards (Options.BoardDays -1): a bound
//	TALLY_LIKES_BENCH_CPUPROFILE=F   BenchmarkLike writes a CPU profile of its
//	                                 timed part alone (no template load) to F.durability
//
// Data: bench/workload's likes workload (the same the Redis peer
// comparison in bench/ runs): items by Zipf popularity, users uniform,
// snowflake item ids, 80% likes, 10% unlikes, 7% dislikes, 3% undislikes.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tallydb/tally/bench/workload"
	"github.com/tallydb/tally/internal/hist"
	"github.com/tallydb/tally/internal/procmem"
	"github.com/tallydb/tally/internal/testutil"
	"github.com/tallydb/tally/store"
)

const benchBiz = "video"

// benchEnd is the workload's end for the whole process: item ids depend on
// it, and every benchmark reads the template loaded by the first.
var benchEnd = time.Now()

func benchWorkload(b *testing.B) *workload.Likes {
	w, err := workload.NewLikes(workload.LikesConfig{
		Seed:  1,
		Items: uint64(testutil.EnvInt(b, "TALLY_LIKES_BENCH_ITEMS", 100_000)),
		Users: uint64(testutil.EnvInt(b, "TALLY_LIKES_BENCH_USERS", 100_000)),
		End:   benchEnd,
	})
	if err != nil {
		b.Fatal(err)
	}
	return w
}

func benchLikes(b testing.TB) int { return testutil.EnvInt(b, "TALLY_LIKES_BENCH_LIKES", 200_000) }

var (
	templMu sync.Mutex
	templ   = map[string]string{} // loaded template store dirs by config
)

// benchStore returns a store preloaded with the workload's history, opened
// with durability d: a copy of a template loaded once per process.
func benchStore(b *testing.B, d store.Durability, opts *Options) (*store.DB, *Likes, *workload.Likes) {
	b.Helper()
	w := benchWorkload(b)
	n := benchLikes(b)
	key := fmt.Sprint(w.Config().Items, w.Config().Users, n, opts != nil && opts.RoaringThreshold != 0)
	templMu.Lock()
	src := templ[key]
	if src == "" {
		dir, err := os.MkdirTemp("", "likes-bench-")
		if err != nil {
			templMu.Unlock()
			b.Fatal(err)
		}
		db, l := openBenchStore(b, dir, store.NoSync, opts)
		if _, err := l.Load(context.Background(), benchBiz, history(w, n), nil); err != nil {
			b.Fatal(err)
		}
		// Compacted, so that a benchmark does not pay the load's
		// compactions (its CPU a like would count them, by chance).
		if err := db.CompactDisk(context.Background()); err != nil {
			b.Fatal(err)
		}
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
		templ[key], src = dir, dir
	}
	templMu.Unlock()
	dir := filepath.Join(b.TempDir(), "s")
	if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
		b.Fatal(err)
	}
	db, l := openBenchStore(b, dir, d, opts)
	b.Cleanup(func() { db.Close() })
	return db, l, w
}

func openBenchStore(b *testing.B, dir string, d store.Durability, opts *Options) (*store.DB, *Likes) {
	db, err := store.Open(dir, &store.Options{Durability: d, Families: Families()})
	if err != nil {
		b.Fatal(err)
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	o.CreateBusinesses = true // benchmarks like in businesses they never declared
	if o.OrdinalCacheBytes == 0 {
		o.OrdinalCacheBytes = int64(testutil.EnvInt(b, "TALLY_LIKES_BENCH_ORDCACHE", 0))
	}
	if o.BoardDays == 0 && testutil.EnvInt(b, "TALLY_LIKES_BENCH_NODAYS", 0) != 0 {
		o.BoardDays = -1
	}
	l, err := New(db, &o)
	if err != nil {
		db.Close()
		b.Fatal(err)
	}
	return db, l
}

func history(w *workload.Likes, n int) []LoadLike {
	likes := make([]LoadLike, 0, n)
	w.History(n, func(item, user uint64, ms int64) {
		likes = append(likes, LoadLike{Item: item, User: user, Ms: ms})
	})
	return likes
}

// BenchmarkLike measures transitions per second under each durability:
// 16 goroutines on the workload's op mix (popular items draw most of the
// traffic, so stripes contend and commit in groups).
func BenchmarkLike(b *testing.B) {
	for _, d := range []store.Durability{store.SyncAlways, store.SyncInterval, store.NoSync} {
		b.Run(d.String(), func(b *testing.B) {
			_, l, w := benchStore(b, d, nil)
			var client atomic.Int64
			b.ReportAllocs()
			b.SetParallelism(8)
			g0 := l.Stats()
			stopProfile := benchCPUProfile(b, d)
			b.ResetTimer()
			start, cpu0 := time.Now(), processCPU()
			b.RunParallel(func(pb *testing.PB) {
				s := w.Stream(int(client.Add(1)))
				for pb.Next() {
					op := s.Next()
					var err error
					switch op.Kind {
					case workload.Like:
						_, err = l.Like(benchBiz, op.Item, op.User, 0)
					case workload.Unlike:
						_, err = l.Unlike(benchBiz, op.Item, op.User)
					case workload.Dislike:
						_, err = l.Dislike(benchBiz, op.Item, op.User)
					case workload.Undislike:
						_, err = l.Undislike(benchBiz, op.Item, op.User)
					}
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "likes/s")
			b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/like")
			stopProfile()
			reportGroups(b, l)
			// board_moves/like: each move wrote up to two likes-hist
			// operands before issue 18's in-memory histograms (hist.go).
			reportGets(b, g0, l.Stats())
			if h, m := l.ords.cache.hitCount(), l.ords.cache.missCount(); h+m > 0 {
				b.ReportMetric(100*float64(h)/float64(h+m), "ord-hit-%")
				b.ReportMetric(float64(h+m)/float64(b.N), "ord-lookups/like")
			}
		})
	}
}

// benchCPUProfile starts a CPU profile of the timed part if
// TALLY_LIKES_BENCH_CPUPROFILE names a file (the durability is appended to
// its name); the returned function stops it.
func benchCPUProfile(b *testing.B, d store.Durability) func() {
	name := os.Getenv("TALLY_LIKES_BENCH_CPUPROFILE")
	if name == "" {
		return func() {}
	}
	f, err := os.Create(name + "." + d.String())
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Error(err)
		}
	}
}

// reportGets reports the Pebble Gets of states, item records and day
// scores a transition made between two Stats.
func reportGets(b *testing.B, before, after []Stat) {
	val := func(st []Stat, key string) float64 {
		for _, s := range st {
			if s.Key == key {
				v, _ := strconv.ParseFloat(s.Value, 64)
				return v
			}
		}
		return 0
	}
	for _, k := range []string{"state_gets", "item_gets", "dayscore_gets", "board_moves"} {
		b.ReportMetric((val(after, k)-val(before, k))/float64(b.N), k+"/like")
	}
}

func reportGroups(b *testing.B, l *Likes) {
	g, o := l.stats.groups.Load(), l.stats.ops.Load()
	if g > 0 {
		b.ReportMetric(float64(o)/float64(g), "likes/commit")
	}
}

// BenchmarkLikeHotItem is the contention case: 16 goroutines like one item
// (distinct users) under SyncAlways. group=1 commits one transition at a
// time per stripe, which is what a stripe mutex held across read and
// commit does; group=256 is the default combining.
func BenchmarkLikeHotItem(b *testing.B) {
	for _, g := range []int{1, DefaultMaxGroup} {
		b.Run(fmt.Sprint("group=", g), func(b *testing.B) {
			_, l, w := benchStore(b, store.SyncAlways, &Options{MaxGroup: g})
			item := w.Item(0)
			var user atomic.Uint64
			user.Store(1 << 50)
			b.SetParallelism(8)
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := l.Like(benchBiz, item, user.Add(1), 0); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "likes/s")
			reportGroups(b, l)
		})
	}
}

// BenchmarkStates measures the page read: States of 20 items drawn by
// popularity (a feed page) for a random user, by one iterator with seeks
// (iter, what States does) and by point Gets (get). It reports the p99 of
// single calls and, from 4 goroutines per core, pages per second.
func BenchmarkStates(b *testing.B) {
	_, l, w := benchStore(b, store.NoSync, nil)
	for _, mode := range []string{"iter", "get"} {
		byGet := mode == "get"
		b.Run(mode, func(b *testing.B) {
			s := w.Stream(7)
			items := make([]uint64, 20)
			dst := make([]State, 0, 20)
			var h hist.Histogram
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				for i := range items {
					items[i] = w.Item(s.Rank())
				}
				user := w.User(s.UserIndex())
				t0 := time.Now()
				var err error
				dst, err = l.states(benchBiz, user, items, dst, byGet)
				h.Record(time.Since(t0))
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(h.Quantile(0.99).Nanoseconds())/1e3, "p99-µs")
		})
		b.Run(mode+"-parallel", func(b *testing.B) {
			var client atomic.Int64
			b.SetParallelism(4)
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				s := w.Stream(100 + int(client.Add(1)))
				items := make([]uint64, 20)
				dst := make([]State, 0, 20)
				for pb.Next() {
					for i := range items {
						items[i] = w.Item(s.Rank())
					}
					var err error
					if dst, err = l.states(benchBiz, w.User(s.UserIndex()), items, dst, byGet); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "pages/s")
		})
	}
}

// BenchmarkTop100 measures reading the all-time top 100.
func BenchmarkTop100(b *testing.B) {
	_, l, _ := benchStore(b, store.NoSync, nil)
	var h hist.Histogram
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		top, err := l.Top(benchBiz, 100)
		h.Record(time.Since(t0))
		if err != nil || len(top) == 0 {
			b.Fatal(len(top), err)
		}
	}
	b.ReportMetric(float64(h.Quantile(0.99).Nanoseconds())/1e3, "p99-µs")
}

// BenchmarkLikersPage measures a page of 100 likers of the most popular
// item (a roaring set: ordinals mapped back to users) and of an item of
// rank 2000 (a list set, a few dozen likers at the default sizes).
func BenchmarkLikersPage(b *testing.B) {
	_, l, w := benchStore(b, store.NoSync, nil)
	for _, c := range []struct {
		name string
		rank uint64
	}{{"popular", 0}, {"rank2000", 2000}} {
		b.Run(c.name, func(b *testing.B) {
			item := w.Item(c.rank)
			roaring, _ := l.isRoaring(benchBiz, item)
			var h hist.Histogram
			b.ReportAllocs()
			b.ResetTimer()
			n := 0
			for range b.N {
				t0 := time.Now()
				pg, err := l.Likers(benchBiz, item, "", 100)
				h.Record(time.Since(t0))
				if err != nil {
					b.Fatal(err)
				}
				n = len(pg.IDs)
			}
			b.ReportMetric(float64(h.Quantile(0.99).Nanoseconds())/1e3, "p99-µs")
			b.ReportMetric(float64(n), "ids/page")
			if roaring {
				b.ReportMetric(1, "roaring")
			}
		})
	}
}

// BenchmarkRank measures Rank of the top item (no score above it) and of
// an item with one like (every distinct score is above it): the two ends
// of its cost.
func BenchmarkRank(b *testing.B) {
	_, l, w := benchStore(b, store.NoSync, nil)
	top, err := l.Top(benchBiz, 1)
	if err != nil || len(top) == 0 {
		b.Fatal(err)
	}
	low := uint64(0)
	for r := w.Config().Items - 1; r > 0; r-- {
		if c, _ := l.Counts(benchBiz, []uint64{w.Item(r)}, nil); len(c) == 1 && c[0].Likes == 1 {
			low = w.Item(r)
			break
		}
	}
	for _, c := range []struct {
		name string
		item uint64
	}{{"top", top[0].Item}, {"one-like", low}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			var rank int
			for range b.N {
				e, ok, err := l.Rank(benchBiz, c.item)
				if err != nil || !ok {
					b.Fatal(ok, err)
				}
				rank = e.Rank
			}
			b.ReportMetric(float64(rank), "rank")
		})
	}
}

// BenchmarkBytesPerLike loads the workload's history into a fresh store and
// reports bytes per like on disk (Pebble's data files after a flush and a
// full compaction) and in memory: the process's heap and RSS growth since
// before Open, next to the store's own accounting (counter tables and
// Pebble's caches and memtables). adaptive uses the default roaring
// threshold; lists keeps every set as one key per member (the threshold at
// its maximum), the other way measured.
func BenchmarkBytesPerLike(b *testing.B) {
	for _, c := range []struct {
		name string
		thr  int
	}{{"adaptive", 0}, {"lists", MaxRoaringThreshold}} {
		b.Run(c.name, func(b *testing.B) {
			w := benchWorkload(b)
			likes := history(w, benchLikes(b))
			for range b.N {
				dir := b.TempDir()
				base := procmem.Measure()
				db, l := openBenchStore(b, dir, store.NoSync, &Options{RoaringThreshold: c.thr})
				st, err := l.Load(context.Background(), benchBiz, likes, nil)
				if err != nil {
					b.Fatal(err)
				}
				grown := procmem.Measure().Sub(base)
				stats := db.Stats()
				own := stats.PebbleMemBytes
				for _, cs := range stats.Counters {
					own += cs.MemBytes
				}
				if err := db.CompactDisk(context.Background()); err != nil {
					b.Fatal(err)
				}
				disk := db.Stats().TableBytes
				n := float64(st.Added)
				b.ReportMetric(float64(disk)/n, "disk-B/like")
				b.ReportMetric(float64(grown.Heap)/n, "heap-B/like")
				b.ReportMetric(float64(grown.RSS)/n, "rss-B/like")
				b.ReportMetric(float64(own)/n, "store-B/like")
				b.ReportMetric(float64(st.Converted), "roaring-sets")
				l.ords.mu.Lock()
				b.ReportMetric(float64(l.ords.next), "ordinals")
				l.ords.mu.Unlock()
				db.Close()
			}
		})
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	for _, dir := range templ {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

// BenchmarkNew measures New on a store holding the workload's history
// (TALLY_LIKES_BENCH_LIKES likes): the scans that fill the key filter and
// count the board histograms; hist-ms is the histograms' scan alone.
func BenchmarkNew(b *testing.B) {
	db, _, w := benchStore(b, store.NoSync, nil)
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
	templMu.Lock()
	src := templ[fmt.Sprint(w.Config().Items, w.Config().Users, benchLikes(b), false)]
	templMu.Unlock()
	var histTime time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		db, err := store.Open(src, &store.Options{Families: Families(), DisableBackground: true, JobWorkers: -1})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		l, err := New(db, nil)
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if _, err := l.buildHistograms(); err != nil {
			b.Fatal(err)
		}
		histTime += time.Since(start)
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(histTime.Milliseconds())/float64(b.N), "hist-ms")
}

package timeline_test

// Benchmarks of the timeline system (see bench/ for the Redis comparison).
// A world is a generated graph (internal/socialgraph: power-law followers,
// one author followed by every user, 20% of users active) loaded into a
// store on disk, with posts published and fanned out (internal/tlworld);
// worlds are built once per size and shared by the benchmarks of a run.
// Sizes:
//
//	TALLY_TL_BENCH_USERS=1000000   users (default 20000)
//	TALLY_TL_BENCH_FOLLOWEES=20    mean followees per user (default 20)
//	TALLY_TL_BENCH_POSTS=3         posts per user (default 3)
//
// The run is TALLY_TL_BENCH_USERS=1000000.

import (
	"context"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tallydb/tally/internal/hist"
	"github.com/tallydb/tally/internal/procmem"
	"github.com/tallydb/tally/internal/socialgraph"
	"github.com/tallydb/tally/internal/testutil"
	"github.com/tallydb/tally/internal/tlworld"
	"github.com/tallydb/tally/store"
	"github.com/tallydb/tally/timeline"
)

// world is a built store shared by benchmarks.
type world struct {
	dir   string
	db    *store.DB
	tl    *timeline.Timeline
	w     *tlworld.World
	clock *testutil.Clock
	mem   procmem.Mem // growth while building
	build time.Duration
	// Measured right after the build, compacted: inbox entries of the
	// active users and the families' disk usage.
	entries int
	disk    timeline.DiskUsage
}

var worlds struct {
	sync.Mutex
	m map[string]*world
}

func TestMain(m *testing.M) {
	code := m.Run()
	worlds.Lock()
	for _, w := range worlds.m {
		w.tl.Close()
		w.db.Close()
		os.RemoveAll(w.dir)
	}
	worlds.Unlock()
	os.Exit(code)
}

// benchReaders is the number of inactive users following 500 authors each
// that every world holds (BenchmarkRebuild reads them).
const benchReaders = 200

// getWorld returns the world of the configured size, building it on
// first use; every benchmark of a run shares it.
func getWorld(b *testing.B) *world {
	users := testutil.EnvInt(b, "TALLY_TL_BENCH_USERS", 20_000)
	key := strconv.Itoa(users)
	worlds.Lock()
	defer worlds.Unlock()
	if w := worlds.m[key]; w != nil {
		return w
	}
	dir, err := os.MkdirTemp("", "tally-tl-bench-")
	if err != nil {
		b.Fatal(err)
	}
	base := procmem.Measure()
	start := time.Now()
	db, err := store.Open(dir, &store.Options{Durability: store.SyncInterval, JobWorkers: -1, CacheSize: 256 << 20, JobBytesPerSec: -1})
	if err != nil {
		b.Fatal(err)
	}
	clk := testutil.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	tl, err := timeline.New(db, &timeline.Options{Config: timeline.Config{PullThreshold: 1 << 40}, Now: clk.Now, ExpireInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	g := socialgraph.New(socialgraph.Config{
		Users: users, MeanFollowees: testutil.EnvInt(b, "TALLY_TL_BENCH_FOLLOWEES", 20),
		BigAuthor: 1, BigFollowers: users - 1, ActiveFraction: 0.2, Seed: 1,
	})
	w, err := tlworld.Build(context.Background(), db, tl, g, tlworld.Options{
		PostsPerUser: testutil.EnvInt(b, "TALLY_TL_BENCH_POSTS", 3), Readers: benchReaders, FollowsPerReader: 500, Seed: 2, Publishers: 4,
	})
	if err != nil {
		b.Fatal(err)
	}
	// Settle the store, as hours of background compaction would: until
	// compactions merge them, an inbox read merges every delivery operand
	// still in the memtable and level 0.
	if err := db.CompactDisk(context.Background()); err != nil {
		b.Fatal(err)
	}
	wd := &world{dir: dir, db: db, tl: tl, w: w, clock: clk, build: time.Since(start)}
	wd.mem = procmem.Measure().Sub(base)
	// Bytes now, while every active user's inbox is live (BenchmarkRebuild
	// expires them).
	for _, u := range append(slices.Clone(g.Active), 1) {
		n, err := tl.InboxLen(u)
		if err != nil {
			b.Fatal(err)
		}
		wd.entries += n
	}
	if wd.disk, err = tl.DiskUsage(); err != nil {
		b.Fatal(err)
	}
	if worlds.m == nil {
		worlds.m = map[string]*world{}
	}
	worlds.m[key] = wd
	b.Logf("world %s: %d users, %d follows, %d posts, %d active, built in %v", key, users, w.Edges, w.Posts, len(g.Active), wd.build.Round(time.Millisecond))
	return wd
}

// BenchmarkHome reads first pages of 20 of active users, uniformly drawn,
// from 8 goroutines (2 per CPU on the 2 cores; 4 per GOMAXPROCS),
// and reports pages/s with the p50 and p99 latency of one page.
func BenchmarkHome(b *testing.B) {
	benchHomePages(b, getWorld(b), true)
}

// benchHomePages reads first pages of 20 of uniformly drawn active users
// from 8 goroutines and reports pages/s, p50 and p99; nonEmpty fails on
// an empty home (a muted reader's may be).
func benchHomePages(b *testing.B, wd *world, nonEmpty bool) {
	active := wd.w.Graph.Active
	var mu sync.Mutex
	var all hist.Histogram
	var seed uint64
	b.SetParallelism(4)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		mu.Lock()
		seed++
		r := rand.New(rand.NewPCG(seed, 7))
		mu.Unlock()
		var h hist.Histogram
		for pb.Next() {
			u := active[r.IntN(len(active))]
			t0 := time.Now()
			p, err := wd.tl.Home(u, "", 20)
			h.Record(time.Since(t0))
			if err != nil {
				b.Error(err)
				return
			}
			if nonEmpty && len(p.Entries) == 0 {
				b.Errorf("empty home of active user %d", u)
				return
			}
		}
		mu.Lock()
		all.Merge(&h)
		mu.Unlock()
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pages/s")
	b.ReportMetric(float64(all.Quantile(0.5).Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(all.Quantile(0.99).Nanoseconds()), "p99-ns")
}

// BenchmarkHomeMuted is BenchmarkHome with 1% of the active readers'
// follow pairs muted (issue 21's benchmark: the cost of the mute filter
// per page is the difference from BenchmarkHome in the same run). The
// mutes are lifted afterwards: the world is shared.
func BenchmarkHomeMuted(b *testing.B) {
	wd := getWorld(b)
	active := wd.w.Graph.Active
	r := rand.New(rand.NewPCG(3, 9))
	type pair struct{ user, author uint64 }
	var muted []pair
	for _, u := range active {
		err := wd.tl.Followees(u, func(a uint64) bool {
			if r.IntN(100) == 0 {
				muted = append(muted, pair{u, a})
			}
			return true
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	for _, p := range muted {
		if _, err := wd.tl.Mute(p.user, p.author); err != nil {
			b.Fatal(err)
		}
	}
	b.Cleanup(func() {
		for _, p := range muted {
			if _, err := wd.tl.Unmute(p.user, p.author); err != nil {
				b.Error(err)
			}
		}
	})
	benchHomePages(b, wd, false)
	b.ReportMetric(float64(len(muted)), "muted-pairs")
}

// BenchmarkHomeFilterByGet is BenchmarkHome plus what the rejected way of
// unpublishing would add to each page: checking every entry against the
// post index (one Get each) instead of the in-memory removed set. The
// difference between the two is that design's cost (package doc,
// "Unpublish").
func BenchmarkHomeFilterByGet(b *testing.B) {
	wd := getWorld(b)
	active := wd.w.Graph.Active
	var seed atomic.Uint64
	b.SetParallelism(4)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		r := rand.New(rand.NewPCG(seed.Add(1), 7))
		for pb.Next() {
			p, err := wd.tl.Home(active[r.IntN(len(active))], "", 20)
			if err != nil {
				b.Error(err)
				return
			}
			for _, e := range p.Entries {
				if _, ok, err := wd.tl.Owner(e.Post); err != nil || !ok {
					b.Errorf("post %d: %v %v", e.Post, ok, err)
					return
				}
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pages/s")
}

// BenchmarkFanout publishes posts of the author every user follows and
// waits for each fan-out to reach every active follower's inbox; it
// reports inbox deliveries per second and the time one post takes to
// reach them all. Posts follow each other back to back, so the figure is
// the sustained rate, flushes and compactions of the delivery operands
// included (the first posts of a run go faster: the memtable absorbs
// them).
func BenchmarkFanout(b *testing.B) {
	wd := getWorld(b)
	deliveries := 0
	var h hist.Histogram
	b.ResetTimer()
	for range b.N {
		post := wd.w.NextPost
		wd.w.NextPost++
		t0 := time.Now()
		r, err := wd.tl.Publish(1, post)
		if err != nil {
			b.Fatal(err)
		}
		if err := wd.db.WaitJob(context.Background(), r.Job); err != nil {
			b.Fatal(err)
		}
		h.Record(time.Since(t0))
		info, _, err := wd.tl.Post(post)
		if err != nil {
			b.Fatal(err)
		}
		deliveries += int(info.Delivered)
	}
	b.ReportMetric(float64(deliveries)/b.Elapsed().Seconds(), "deliveries/s")
	b.ReportMetric(float64(deliveries)/float64(b.N), "deliveries/post")
	b.ReportMetric(h.Quantile(0.5).Seconds(), "s/post-p50")
}

// BenchmarkRebuild reads the first page of users who follow 500 authors
// and come back after the active window: the read rebuilds their inbox by
// pull (a k-way merge of 500 outboxes) before answering. It reports the
// p50 and p99 of that first read. Between rounds the clock moves past
// the window and the expiry job drops the rebuilt inboxes (untimed).
func BenchmarkRebuild(b *testing.B) {
	wd := getWorld(b)
	var h hist.Histogram
	next := 0
	b.ResetTimer()
	for range b.N {
		if next == len(wd.w.Readers) {
			b.StopTimer()
			wd.clock.Advance(timeline.DefaultActiveWindow + time.Hour)
			if _, err := wd.tl.Expire(context.Background()); err != nil {
				b.Fatal(err)
			}
			next = 0
			b.StartTimer()
		}
		u := wd.w.Readers[next]
		next++
		t0 := time.Now()
		p, err := wd.tl.Home(u, "", 20)
		h.Record(time.Since(t0))
		if err != nil || len(p.Entries) != 20 {
			b.Fatalf("home of returning user %d: %d entries, %v", u, len(p.Entries), err)
		}
	}
	b.ReportMetric(float64(h.Quantile(0.5).Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(h.Quantile(0.99).Nanoseconds()), "p99-ns")
}

// BenchmarkFollow follows and unfollows random pairs of the world, one
// change per op (each a commit under SyncInterval).
func BenchmarkFollow(b *testing.B) {
	wd := getWorld(b)
	users := wd.w.Graph.Users
	r := rand.New(rand.NewPCG(3, 4))
	b.ResetTimer()
	for i := range b.N {
		u, a := uint64(1+r.IntN(users)), uint64(1+r.IntN(users))
		if u == a {
			continue
		}
		var err error
		if i%2 == 0 {
			_, err = wd.tl.Follow(u, a)
		} else {
			_, err = wd.tl.Unfollow(u, a)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "changes/s")
}

// BenchmarkBytes reports, for the world as built, bytes on disk per inbox
// entry and per follow edge (Pebble's files of the inbox family, and of the
// follower bitmaps plus followee lists, after a full compaction), and the
// memory the build grew by per inbox entry (Go heap and RSS; inboxes live
// in Pebble, so memory is its block cache and memtables, capped, not a
// cost per entry). It reports what getWorld measured.
func BenchmarkBytes(b *testing.B) {
	wd := getWorld(b)
	b.ReportMetric(float64(wd.disk.Inboxes)/float64(wd.entries), "disk-B/entry")
	b.ReportMetric(float64(wd.disk.Followers+wd.disk.Followees)/float64(wd.w.Edges), "disk-B/edge")
	b.ReportMetric(float64(wd.mem.Heap)/float64(wd.entries), "heap-B/entry")
	b.ReportMetric(float64(wd.mem.RSS)/float64(wd.entries), "rss-B/entry")
	b.ReportMetric(float64(wd.entries), "entries")
	for range b.N {
	}
}

package main

// The demo's timeline part (package timeline): a generated follow graph
// bulk-loaded, active users' inboxes, posts fanned out, one author every
// user follows, home pages read by concurrent clients, users returning
// after the active window (their first read rebuilds the inbox by pull),
// and the figures of the benchmarks at the demo's scale. It runs
// on a store of its own (a counter named "users" means something else in
// the counters part), next to the demo's.

import (
	"context"
	"fmt"
	tallydb "github.com/tallydb/tally"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tallydb/tally/internal/hist"
	"github.com/tallydb/tally/internal/socialgraph"
	"github.com/tallydb/tally/internal/tlworld"
	"github.com/tallydb/tally/store"
	"github.com/tallydb/tally/timeline"
)

// demoTimeline runs the timeline part and prints its report.
func demoTimeline(d *demo) error {
	users := d.tlUsers
	if users == 0 {
		return nil
	}
	dir := d.dir + "-timeline"
	if d.e.dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "tally-demo-timeline-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	}
	d.printf("\ntimeline   store %s, %d users (20%% active, power-law followers, user 1 followed by everyone)\n", dir, users)
	now := time.Now().UTC()
	var clock atomic.Int64
	clock.Store(now.UnixNano())
	all, err := tallydb.Open(dir, &tallydb.Options{
		Store: &store.Options{Durability: d.durability, JobWorkers: -1, CacheSize: 128 << 20},
		Timeline: &timeline.Options{
			Config: timeline.Config{PullThreshold: 1 << 40}, ExpireInterval: -1,
			Now: func() time.Time { return time.Unix(0, clock.Load()) },
		},
	})
	if err != nil {
		return err
	}
	return closeTally(all, runDemoTimeline(d, all.Store(), all.Timeline(), users, &clock))
}

func runDemoTimeline(d *demo, db *store.DB, tl *timeline.Timeline, users int, clock *atomic.Int64) error {
	ctx := d.ctx
	g := socialgraph.New(socialgraph.Config{Users: users, MeanFollowees: 20, BigAuthor: 1, BigFollowers: users - 1,
		ActiveFraction: 0.2, Seed: d.seed})
	readers := min(200, max(users/100, 5))
	start := time.Now()
	var bar *progressBar
	stage := ""
	w, err := tlworld.Build(ctx, db, tl, g, tlworld.Options{
		PostsPerUser: 2, Readers: readers, FollowsPerReader: min(500, users/2), Seed: d.seed, Publishers: d.clients,
		Progress: func(s string, done, total int) {
			if s != stage {
				if bar != nil {
					bar.finish()
				}
				stage, bar = s, newProgress(d.e.stdout, s, "", int64(total))
			}
			bar.update(int64(done))
		},
	})
	if bar != nil {
		bar.finish()
	}
	if err != nil {
		return err
	}
	built := time.Since(start)
	st := tl.Stats()
	deliveries := statValue(st, "deliveries")
	d.printf("timeline   built in %v: %d follows, %d active users, %d posts, %s inbox deliveries\n",
		built.Round(time.Millisecond), w.Edges, len(g.Active), w.Posts, deliveries)

	// One post of the author everyone follows, to every active inbox.
	post := w.NextPost
	w.NextPost++
	t0 := time.Now()
	r, err := tl.Publish(1, post)
	if err != nil {
		return err
	}
	if err := db.WaitJob(ctx, r.Job); err != nil {
		return err
	}
	bigTime := time.Since(t0)
	info, _, err := tl.Post(post)
	if err != nil {
		return err
	}
	d.printf("fan-out    user 1's post reached %d active inboxes in %v (%.0f deliveries/s)\n",
		info.Delivered, bigTime.Round(time.Microsecond), float64(info.Delivered)/bigTime.Seconds())

	// Settle the store (a full compaction, as hours of background
	// compaction would), then bytes on disk while every active user's
	// inbox is live. Until compactions merge them, an inbox read merges
	// every delivery operand still in the memtable and level 0.
	if err := db.CompactDisk(ctx); err != nil {
		return err
	}
	du, err := tl.DiskUsage()
	if err != nil {
		return err
	}
	entries := 0
	for _, u := range g.Active {
		k, err := tl.InboxLen(u)
		if err != nil {
			return err
		}
		entries += k
	}
	// Home pages of active users from d.clients goroutines.
	dur := max(d.duration/3, 200*time.Millisecond)
	var mu sync.Mutex
	var pages hist.Histogram
	var n atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, d.clients)
	pctx, cancel := context.WithTimeout(ctx, dur)
	defer cancel()
	start = time.Now()
	for c := range d.clients {
		wg.Add(1)
		d.e.goSafe(func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(d.seed, uint64(c)))
			var h hist.Histogram
			for pctx.Err() == nil {
				u := g.Active[rng.IntN(len(g.Active))]
				t0 := time.Now()
				if _, err := tl.Home(u, "", 20); err != nil {
					errs[c] = err
					return
				}
				h.Record(time.Since(t0))
				n.Add(1)
			}
			mu.Lock()
			pages.Merge(&h)
			mu.Unlock()
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	secs := time.Since(start).Seconds()
	d.printf("pages      %d clients: %.0f home pages of 20/s, p50 %v, p99 %v\n",
		d.clients, float64(n.Load())/secs, pages.Quantile(0.5), pages.Quantile(0.99))

	// Returning users: the first read after the active window rebuilds the
	// inbox by pull from the outboxes of the accounts they follow.
	var rebuild hist.Histogram
	clock.Add(int64(timeline.DefaultActiveWindow + 24*time.Hour))
	expired, err := tl.Expire(ctx)
	if err != nil {
		return err
	}
	for _, u := range append(w.Readers, g.Active[:min(len(g.Active), 200)]...) {
		t0 := time.Now()
		p, err := tl.Home(u, "", 20)
		if err != nil {
			return err
		}
		rebuild.Record(time.Since(t0))
		if len(p.Entries) == 0 {
			return fmt.Errorf("demo: returning user %d has an empty home", u)
		}
	}
	d.printf("return     clock +%v: %d inactive inboxes expired; %d returning users' first reads (rebuild by pull, %d readers of %d authors) p50 %v, p99 %v\n",
		timeline.DefaultActiveWindow+24*time.Hour, expired, rebuild.Count(), readers, min(500, users/2),
		rebuild.Quantile(0.5), rebuild.Quantile(0.99))

	if err := tl.Check(); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	d.printf("\ntimeline report\n")
	d.printf("  %-10s %d users, %d follows, %d posts; Check ok\n", "graph", users+readers, w.Edges, w.Posts)
	d.printf("  %-10s %.2f bytes/edge on disk (follower bitmaps and followee lists), %.2f bytes/entry of inboxes on disk (%d entries)\n",
		"bytes", float64(du.Followers+du.Followees)/float64(max(w.Edges, 1)), float64(du.Inboxes)/float64(max(entries, 1)), entries)
	d.printf("  %-10s %.0f deliveries/s for one post to %d inboxes (%v)\n", "fan-out", float64(info.Delivered)/bigTime.Seconds(), info.Delivered, bigTime.Round(time.Millisecond))
	d.printf("  %-10s %.0f pages/s at %d clients, p99 %v\n", "home", float64(n.Load())/secs, d.clients, pages.Quantile(0.99))
	d.printf("  %-10s first read after the window p99 %v\n", "rebuild", rebuild.Quantile(0.99))
	return nil
}

func statValue(st []timeline.Stat, key string) string {
	for _, s := range st {
		if s.Key == key {
			return s.Value
		}
	}
	return "?"
}

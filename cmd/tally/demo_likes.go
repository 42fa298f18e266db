package main

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tallydb/tally/bench/workload"
	"github.com/tallydb/tally/internal/hist"
	"github.com/tallydb/tally/likes"
	"github.com/tallydb/tally/store"
)

// The demo's likes part: a video business on the same store as the
// counters. It bulk-loads a month of historical likes (popular videos get
// most of them, so some like sets become roaring bitmaps), then runs like
// traffic (likes, unlikes, dislikes from every client) together with page
// reads ("did I like these 20 videos", their counts), reads the all-time
// and today's top 10 and likers pages, checks every invariant, and after
// the demo's restart checks that the counts read the same and the
// invariants still hold.

// likesDemo holds the likes part's figures and its sample across the
// restart.
type likesDemo struct {
	w        *workload.Likes
	sample   []uint64
	before   []likes.Counts
	loaded   likes.LoadStats
	loadSecs float64
	writes   int64
	pages    int64
	secs     float64
	write    hist.Histogram
	read     hist.Histogram
	top      time.Duration
	likers   time.Duration
}

const demoBiz = "video"

func demoLikes(d *demo) error {
	ld := &likesDemo{}
	d.likes = ld
	l := d.all.Likes()
	var err error
	n := int(min(d.items/10, 300_000))
	items := max(d.items/10, 100)
	if ld.w, err = workload.NewLikes(workload.LikesConfig{Seed: d.seed, Items: items, Users: max(d.users, 100),
		End: time.Unix(0, d.now.Load()), Span: 30 * 24 * time.Hour}); err != nil {
		return err
	}

	// 1. Historical likes, bulk-loaded.
	hist := make([]likes.LoadLike, 0, n)
	ld.w.History(n, func(item, user uint64, ms int64) {
		hist = append(hist, likes.LoadLike{Item: item, User: user, Ms: ms})
	})
	bar := newProgress(d.e.stdout, "load likes", "likes", int64(n))
	start := time.Now()
	ld.loaded, err = l.Load(d.ctx, demoBiz, hist, func(done int) { bar.update(int64(done)) })
	bar.finish()
	if err != nil {
		return err
	}
	ld.loadSecs = time.Since(start).Seconds()
	d.printf("likes load %d historical likes of %d videos by %d users in %.2fs (%.0f likes/s): %d added, %d repeats; %d sets became roaring bitmaps\n",
		n, items, ld.w.Config().Users, ld.loadSecs, float64(n)/max(ld.loadSecs, 1e-9), ld.loaded.Added, ld.loaded.Unchanged, ld.loaded.Converted)

	// 2. Traffic: every client likes and reads pages.
	if err := ld.traffic(d, l); err != nil {
		return err
	}
	d.printf("likes      %d clients for %v: %.0f likes/s (p50 %v, p99 %v), %.0f pages of 20 states + counts/s (p50 %v, p99 %v)\n",
		d.clients, d.duration, float64(ld.writes)/ld.secs, ld.write.Quantile(0.5), ld.write.Quantile(0.99),
		float64(ld.pages)/ld.secs, ld.read.Quantile(0.5), ld.read.Quantile(0.99))

	// 3. Boards and likers.
	t0 := time.Now()
	top, err := l.Top(demoBiz, 10)
	ld.top = time.Since(t0)
	if err != nil {
		return err
	}
	today, err := l.TopDay(demoBiz, time.Unix(0, d.now.Load()), 10)
	if err != nil {
		return err
	}
	if len(top) > 0 {
		t0 = time.Now()
		if _, err := l.Likers(demoBiz, top[0].Item, "", 100); err != nil {
			return err
		}
		ld.likers = time.Since(t0)
		d.printf("top        all time: %s (read in %v); today: %s\n", entries(top[:min(3, len(top))]), ld.top.Round(time.Microsecond), entries(today[:min(3, len(today))]))
	}

	// 4. Invariants, and a sample for after the restart.
	start = time.Now()
	if err := l.Check(); err != nil {
		return fmt.Errorf("demo: likes: %w", err)
	}
	d.printf("likes ok   every count equals its set's size, boards and user lists agree (Check in %v)\n", time.Since(start).Round(time.Millisecond))
	ld.sample = make([]uint64, 0, 500)
	for r := range uint64(500) {
		ld.sample = append(ld.sample, ld.w.Item(r))
	}
	ld.before, err = l.Counts(demoBiz, ld.sample, nil)
	return err
}

// likesOptions puts likes on the demo's clock (which the aging phase
// moves on).
func (d *demo) likesOptions() *likes.Options {
	layout := d.posts.Config().Layout
	return &likes.Options{
		Now: func() time.Time { return time.Unix(0, d.now.Load()) },
		// Video ids are snowflakes like post ids: their counts age the
		// same way.
		Business: likes.BusinessOptions{RangeBits: 48, Age: store.AgePolicy{Kind: store.AgeByTime, MaxAge: demoMaxAge,
			IDEpochMs: layout.EpochMs, IDTimeShift: uint8(layout.TimeShift)}},
	}
}

func entries(es []likes.Entry) string {
	s := ""
	for i, e := range es {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("#%d %d (%d likes)", e.Rank, e.Item, e.Likes)
	}
	if s == "" {
		return "(empty)"
	}
	return s
}

func (ld *likesDemo) traffic(d *demo, l *likes.Likes) error {
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		stopped  atomic.Bool
	)
	start := time.Now()
	for c := 0; c < d.clients; c++ {
		wg.Add(1)
		d.e.goSafe(func() {
			defer wg.Done()
			s := ld.w.Stream(c)
			var w, r hist.Histogram
			var writes, pages int64
			items := make([]uint64, 20)
			states := make([]likes.State, 0, 20)
			counts := make([]likes.Counts, 0, 20)
			var err error
			for n := 0; err == nil && !stopped.Load(); n++ {
				if n%4 == 3 { // one like per three page reads
					op := s.Next()
					t0 := time.Now()
					switch op.Kind {
					case workload.Like:
						_, err = l.Like(demoBiz, op.Item, op.User, 0)
					case workload.Unlike:
						_, err = l.Unlike(demoBiz, op.Item, op.User)
					case workload.Dislike:
						_, err = l.Dislike(demoBiz, op.Item, op.User)
					case workload.Undislike:
						_, err = l.Undislike(demoBiz, op.Item, op.User)
					}
					w.Record(time.Since(t0))
					writes++
					continue
				}
				for i := range items {
					items[i] = ld.w.Item(s.Rank())
				}
				t0 := time.Now()
				if states, err = l.States(demoBiz, ld.w.User(s.UserIndex()), items, states); err == nil {
					counts, err = l.Counts(demoBiz, items, counts)
				}
				r.Record(time.Since(t0))
				pages++
			}
			mu.Lock()
			ld.write.Merge(&w)
			ld.read.Merge(&r)
			ld.writes += writes
			ld.pages += pages
			if err != nil && firstErr == nil {
				firstErr = err
			}
			mu.Unlock()
		})
	}
	select {
	case <-time.After(d.duration):
	case <-d.ctx.Done():
	}
	stopped.Store(true)
	wg.Wait()
	ld.secs = max(time.Since(start).Seconds(), 1e-9)
	return firstErr
}

// demoLikesVerify runs after the demo's restart: the sampled counts read
// the same and every invariant holds.
func demoLikesVerify(d *demo) error {
	ld := d.likes
	l := d.all.Likes()
	after, err := l.Counts(demoBiz, ld.sample, nil)
	if err != nil {
		return err
	}
	if !slices.Equal(after, ld.before) {
		return errors.New("demo: like counts read after reopen differ from before")
	}
	if err := l.Check(); err != nil {
		return fmt.Errorf("demo: likes after reopen: %w", err)
	}
	d.printf("likes      after reopen: %d sampled counts read the same, Check ok\n", len(ld.sample))
	return nil
}

// likesReport adds the likes part's figures to the report.
func (ld *likesDemo) report(d *demo) {
	d.printf("  %-10s load %.0f likes/s; traffic %.0f likes/s (p99 %v), %.0f pages/s of 20 states + counts (p99 %v); top 10 in %v, 100 likers in %v\n",
		"likes", float64(ld.loaded.Input)/max(ld.loadSecs, 1e-9), float64(ld.writes)/ld.secs, ld.write.Quantile(0.99),
		float64(ld.pages)/ld.secs, ld.read.Quantile(0.99), ld.top.Round(time.Microsecond), ld.likers.Round(time.Microsecond))
}

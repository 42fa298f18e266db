package main

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"time"

	tallydb "github.com/tallydb/tally"
	"github.com/tallydb/tally/bench/workload"
	"github.com/tallydb/tally/internal/hist"
	"github.com/tallydb/tally/store"
	"github.com/tallydb/tally/timeline"
	"github.com/tallydb/tally/unread"
)

// The demo's unread part (issue 9), on a store of its own (a temporary
// directory, removed afterwards), so its counters and follow graph do not
// mix with the counter demo's: one-to-one counts of every demo user, users
// following 200 accounts each (loaded through Timeline.LoadFollows, which
// writes unread's snapshots through its observer), red dots and notices.
// It measures reads and resets with the demo's clients, shows that feeds
// stay exact through an unfollow, a re-follow, an unpublish, an eviction
// and a restart, and adds its figures to the report.

// unreadDemo holds the part's state and results.
type unreadDemo struct {
	d   *demo
	dir string
	all *tallydb.DB // opened through tally.Open: unread observes the graph
	db  *store.DB
	tl  *timeline.Timeline
	x   *unread.Unread
	fg  *workload.FeedGraph

	countUsers, feedUsers, follows, authors int

	counts, mixed, feed, resets, dots drive
	diskPerFollowee, cachePerFollowee float64
	checks                            int
}

// demoUnread runs the unread part.
func demoUnread(d *demo) (err error) {
	u := &unreadDemo{d: d, countUsers: int(d.users), follows: 200}
	u.feedUsers = min(max(int(d.users)/300, 100), 1000)
	u.authors = max(int(d.users), 1000)
	if u.dir, err = os.MkdirTemp("", "tally-demo-unread-"); err != nil {
		return err
	}
	defer os.RemoveAll(u.dir)
	if err := u.open(); err != nil {
		return err
	}
	defer func() {
		if u.db != nil {
			err = errors.Join(err, u.close())
		}
	}()
	for _, step := range []func() error{u.load, u.measure, u.exactness} {
		if err := step(); err != nil {
			return fmt.Errorf("unread demo: %w", err)
		}
		if err := d.ctx.Err(); err != nil {
			return err
		}
	}
	d.reportLines = append(d.reportLines,
		fmt.Sprintf("%-10s one-to-one Get %.0f ids/s (1 client); %d clients 90/10 Get/Incr: %.0f ops/s, Get p99 %v, Incr p99 %v",
			"unread", u.counts.rate(), d.clients, u.mixed.rate(), short(u.mixed.read.Quantile(0.99)), short(u.mixed.write.Quantile(0.99))),
		fmt.Sprintf("%-10s feed unread (%d followees) %.0f gets/s with %d clients, p50 %v, p99 %v, p9999 %v; %.0f resets/s",
			"", u.follows, u.feed.rate(), d.clients, short(u.feed.read.Quantile(0.5)), short(u.feed.read.Quantile(0.99)), short(u.feed.read.Quantile(0.9999)), u.resets.rate()),
		fmt.Sprintf("%-10s red dot Has %.0f ops/s; snapshots %.2f B/followee on disk, %.2f B/followee cached; %d exactness checks passed",
			"", u.dots.rate(), u.diskPerFollowee, u.cachePerFollowee, u.checks))
	return nil
}

func (u *unreadDemo) open() error {
	all, err := tallydb.Open(u.dir, &tallydb.Options{
		Store:    &store.Options{Durability: u.d.durability, CompactionInterval: -1},
		Timeline: &timeline.Options{ExpireInterval: -1},
	})
	if err != nil {
		return err
	}
	u.all, u.db, u.tl, u.x = all, all.Store(), all.Timeline(), all.Unread()
	return nil
}

func (u *unreadDemo) close() error {
	err := u.all.Close()
	u.db = nil
	return err
}

// load fills the store: counts, post counts, follows, a dot, notices.
func (u *unreadDemo) load() error {
	d := u.d
	start := time.Now()
	for _, k := range []string{"mention", "comment", "like"} {
		if err := u.x.AddKind(k, store.ColumnOptions{}); err != nil {
			return err
		}
	}
	counts := workload.MustNew(workload.Config{Seed: d.seed + 2, Items: uint64(u.countUsers), Columns: 3})
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
	if _, err := u.db.Load(d.ctx, unread.KindsCounter, in, nil); err != nil {
		return err
	}
	var err error
	if u.fg, err = workload.NewFeedGraph(workload.FeedConfig{Seed: d.seed, Users: u.feedUsers, Authors: u.authors, Follows: u.follows}); err != nil {
		return err
	}
	users, err := u.db.Counter(timeline.UsersCounter)
	if err != nil {
		return err
	}
	cols := users.Columns()
	in = store.LoadRows{}
	for a := uint64(1); a <= uint64(u.authors); a++ {
		if p := u.fg.Posts(a); p > 0 {
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
	if _, err := u.db.Load(d.ctx, timeline.UsersCounter, in, nil); err != nil {
		return err
	}
	edges := make([]timeline.Edge, 0, u.feedUsers*u.follows)
	var fs []uint64
	for user := uint64(1); user <= uint64(u.feedUsers); user++ {
		fs = u.fg.Followees(user, fs)
		for _, f := range fs {
			edges = append(edges, timeline.Edge{Follower: user, Followee: f})
		}
	}
	bar := newProgress(d.e.stdout, "load follows", "edges", int64(len(edges)))
	fstart := time.Now()
	st, err := u.tl.LoadFollows(d.ctx, edges, func(done int) { bar.update(int64(done)) })
	bar.finish()
	if err != nil {
		return err
	}
	fel := time.Since(fstart)
	// New posts by a tenth of the authors, so feeds have something unread.
	b := u.db.NewBatch()
	defer b.Close()
	for a := uint64(1); a <= uint64(u.authors); a += 10 {
		if err := b.Incr(timeline.UsersCounter, a, timeline.ColPosts, 1); err != nil {
			return err
		}
	}
	if err := b.Commit(); err != nil {
		return err
	}
	// The feed users have read the channel (a first read records the
	// user's tag, a write), and it was marked since.
	if _, err := u.x.Mark("activity"); err != nil {
		return err
	}
	for user := uint64(1); user <= uint64(u.feedUsers); user++ {
		if err := u.x.Clear(user, "activity"); err != nil {
			return err
		}
	}
	if _, err := u.x.Mark("activity"); err != nil {
		return err
	}
	for id := uint64(1); id <= 20; id++ {
		if _, err := u.x.Post("system", id); err != nil {
			return err
		}
	}
	d.printf("unread     own store: %d users' one-to-one counts (%d non-zero), %d users following %d of %d accounts: %d follows loaded in %v (%.0f/s, snapshots written by the observer), in %v in all\n",
		u.countUsers, len(in.IDs), u.feedUsers, u.follows, u.authors, st.Added, fel.Round(time.Millisecond),
		float64(st.Added)/max(fel.Seconds(), 1e-9), time.Since(start).Round(time.Millisecond))
	return nil
}

// rate is operations per second of a drive (0 if it did not run).
func (r *drive) rate() float64 {
	if r.secs <= 0 {
		return 0
	}
	return float64(r.pages) / r.secs
}

// run drives clients goroutines calling op for dur (hist.RunClosedLoop);
// op reports whether it was a write (recorded apart). An interrupt ends
// the phase early without an error: the demo checks its context itself.
func (u *unreadDemo) run(clients int, dur time.Duration, op func(rng *rand.Rand) (bool, error)) (drive, error) {
	r, err := hist.RunClosedLoop(u.d.ctx, clients, dur, u.d.e.goSafe, func(c int) (func() (bool, error), func()) {
		rng := rand.New(rand.NewPCG(u.d.seed, uint64(c)+100))
		return func() (bool, error) { return op(rng) }, nil
	})
	if err != nil && err == u.d.ctx.Err() {
		err = nil
	}
	return drive{pages: r.Ops, writes: r.Writes, read: r.Read, write: r.Write, secs: r.Secs}, err
}

// measure runs the read and reset phases.
func (u *unreadDemo) measure() error {
	d := u.d
	dur := max(d.duration/5, 10*time.Millisecond)
	kinds := u.x.Kinds()
	var err error
	if u.counts, err = u.run(1, dur, func(rng *rand.Rand) (bool, error) {
		var buf [3]uint64
		_, err := u.x.Get(rng.Uint64N(uint64(u.countUsers))+1, buf[:0])
		return false, err
	}); err != nil {
		return err
	}
	if u.mixed, err = u.run(d.clients, dur, func(rng *rand.Rand) (bool, error) {
		user := rng.Uint64N(uint64(u.countUsers)) + 1
		if rng.IntN(10) == 0 {
			_, err := u.x.Incr(user, kinds[rng.IntN(len(kinds))], 1)
			return true, err
		}
		var buf [3]uint64
		_, err := u.x.Get(user, buf[:0])
		return false, err
	}); err != nil {
		return err
	}
	d.printf("unread     one-to-one Get: %.0f ids/s on 1 client (p99 %v); 90%% Get / 10%% Incr on %d clients: %.0f ops/s, Get p99 %v, Incr p99 %v\n",
		u.counts.rate(), short(u.counts.read.Quantile(0.99)), d.clients, u.mixed.rate(), short(u.mixed.read.Quantile(0.99)), short(u.mixed.write.Quantile(0.99)))

	// Snapshot footprint, with an empty cache warmed by one read of each.
	if err := u.db.Checkpoint(); err != nil {
		return err
	}
	if err := u.db.CompactDisk(d.ctx); err != nil {
		return err
	}
	fam, err := u.db.Family("unread_feed")
	if err != nil {
		return err
	}
	disk, err := fam.DiskUsage()
	if err != nil {
		return err
	}
	for user := uint64(1); user <= uint64(u.feedUsers); user++ {
		if _, err := u.x.Feed(user); err != nil {
			return err
		}
	}
	follows := float64(u.feedUsers * u.follows)
	u.diskPerFollowee = float64(disk) / follows
	for _, s := range u.x.Stats() {
		if s.Key == "snapshot_cache_bytes" {
			v, _ := strconv.ParseFloat(s.Value, 64)
			u.cachePerFollowee = v / follows
		}
	}
	if u.feed, err = u.run(d.clients, dur, func(rng *rand.Rand) (bool, error) {
		_, err := u.x.Feed(rng.Uint64N(uint64(u.feedUsers)) + 1)
		return false, err
	}); err != nil {
		return err
	}
	d.printf("unread     feed unread Get (%d followees): %.0f gets/s on %d clients, p50 %v, p99 %v, p9999 %v; snapshots %.2f B/followee on disk, %.2f B/followee cached\n",
		u.follows, u.feed.rate(), d.clients, short(u.feed.read.Quantile(0.5)), short(u.feed.read.Quantile(0.99)), short(u.feed.read.Quantile(0.9999)),
		u.diskPerFollowee, u.cachePerFollowee)
	if u.resets, err = u.run(d.clients, dur, func(rng *rand.Rand) (bool, error) {
		user := rng.Uint64N(uint64(u.feedUsers)) + 1
		fs := u.fg.Followees(user, nil)
		b := u.db.NewBatch()
		err := b.Incr(timeline.UsersCounter, fs[rng.IntN(len(fs))], timeline.ColPosts, 1)
		if err == nil {
			err = b.Commit()
		}
		b.Close()
		if err == nil {
			err = u.x.FeedReset(user)
		}
		return true, err
	}); err != nil {
		return err
	}
	if u.dots, err = u.run(d.clients, dur, func(rng *rand.Rand) (bool, error) {
		_, err := u.x.Has(rng.Uint64N(uint64(u.feedUsers))+1, "activity")
		return false, err
	}); err != nil {
		return err
	}
	d.printf("unread     feed reset (after one new post by a followee): %.0f resets/s on %d clients; red dot Has: %.0f ops/s\n",
		u.resets.rate(), d.clients, u.dots.rate())
	return nil
}

// exactness shows feeds staying exact through an unfollow, a re-follow,
// an unpublish, an eviction (a reread from disk) and a restart.
func (u *unreadDemo) exactness() error {
	const user = 1
	feed := func() (uint64, error) { return u.x.Feed(user) }
	fs := u.fg.Followees(user, nil)
	f := fs[0]
	check := func(what string, got, want uint64) error {
		if got != want {
			return fmt.Errorf("%s: feed unread of user %d is %d, want %d", what, user, got, want)
		}
		u.checks++
		return nil
	}
	if err := u.x.FeedReset(user); err != nil {
		return err
	}
	n, err := feed()
	if err != nil {
		return err
	}
	if err := check("after a reset", n, 0); err != nil {
		return err
	}
	post := uint64(1 << 40)
	publish := func() error {
		post++
		_, err := u.tl.Publish(f, post)
		return err
	}
	for range 3 {
		if err := publish(); err != nil {
			return err
		}
	}
	if n, err = feed(); err != nil {
		return err
	}
	if err := check("after 3 posts", n, 3); err != nil {
		return err
	}
	if _, _, err := u.tl.Unpublish(f, post); err != nil {
		return err
	}
	if n, err = feed(); err != nil {
		return err
	}
	if err := check("after an unpublish", n, 2); err != nil {
		return err
	}
	if _, err := u.tl.Unfollow(user, f); err != nil {
		return err
	}
	if n, err = feed(); err != nil {
		return err
	}
	if err := check("after an unfollow", n, 0); err != nil {
		return err
	}
	if err := publish(); err != nil {
		return err
	}
	if _, err := u.tl.Follow(user, f); err != nil {
		return err
	}
	if err := publish(); err != nil {
		return err
	}
	if n, err = feed(); err != nil {
		return err
	}
	if err := check("after a re-follow and a post", n, 1); err != nil {
		return err
	}
	// Restart: the reopened store (cold cache) answers the same.
	if err := u.close(); err != nil {
		return err
	}
	if err := u.open(); err != nil {
		return err
	}
	if n, err = feed(); err != nil {
		return err
	}
	if err := check("after a restart", n, 1); err != nil {
		return err
	}
	if err := u.x.Check(); err != nil {
		return err
	}
	u.d.printf("unread     exact: %d checks of one user's feed through a reset, posts, an unpublish, an unfollow, a re-follow and a restart; unread's Check passed\n", u.checks)
	return nil
}

// short rounds a latency to three significant figures or so.
func short(d time.Duration) time.Duration {
	switch {
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	case d >= time.Microsecond:
		return d.Round(10 * time.Nanosecond)
	}
	return d
}

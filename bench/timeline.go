package bench

// The timeline comparison (issue 8): tally's timeline package against Redis
// used as Mastodon's FeedManager uses it, on one generated graph, in one
// run, on one machine.
//
// The graph (internal/socialgraph): Users users with power-law follower
// counts (MeanFollowees each on average), user 1 followed by BigFollowers
// users, ActiveFraction of the users active. Both systems get the same
// follows, the same posts in the same order, and deliver each post to the
// same inboxes (the author's active followers), so their homes hold the
// same entries.
//
//   - tally: package timeline in-process (the store under SyncInterval,
//     1s, like Redis's appendfsync everysec): LoadFollows, MarkActiveMany,
//     a compaction (a settled graph), then Publish from Clients goroutines,
//     each running its post's fan-out job (a durable job per post, with its
//     records), then Home pages; a second compaction settles the store
//     before the reads (an inbox read merges the delivery operands still
//     in the memtable and level 0).
//   - redis-mastodon: a redis-server of its own (AOF, appendfsync
//     everysec) used as app/lib/feed_manager.rb does: one sorted set
//     "feed:home:UID" per home, member and score the post id; a delivery is
//     ZADD then ZREMRANGEBYRANK key 0 -(800+1) (Mastodon's trim to
//     MAX_ITEMS), pipelined per post (the driver plays Mastodon's Sidekiq
//     workers, on the run's client connections); a page is ZREVRANGEBYSCORE
//     key +inf -inf LIMIT 0 20. Mastodon keeps the follow graph in
//     PostgreSQL; for a bytes-per-edge figure the graph is also stored as
//     one set of follower ids per account (SADD), which is what a Redis
//     deployment of the graph would hold.
//
// Figures: pages/s of 20-entry first pages of active users from Clients
// clients with p50/p99; deliveries/s over the posts phase (every post's
// fan-out); the time one post of user 1 takes to reach every active inbox;
// for tally, the p50/p99 of a returning user's first read (rebuild by pull
// from the outboxes of 500 followees); bytes per inbox entry (tally: disk
// of the inbox family, and the process's heap and RSS growth over the
// whole build, which are Pebble's caches and not a per-entry cost;
// Redis: used_memory growth over the deliveries, and its RSS) and per
// follow edge.

import (
	"context"
	"fmt"
	tallydb "github.com/tallydb/tally"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tallydb/tally/internal/hist"
	"github.com/tallydb/tally/internal/procmem"
	"github.com/tallydb/tally/internal/socialgraph"
	"github.com/tallydb/tally/internal/tlworld"
	"github.com/tallydb/tally/store"
	"github.com/tallydb/tally/timeline"
)

// TimelineConfig configures RunTimeline.
type TimelineConfig struct {
	Users          int     // users of the graph
	MeanFollowees  int     // mean followees per user
	BigFollowers   int     // followers of user 1 (at most Users-1)
	ActiveFraction float64 // active users (read their home)
	PostsPerUser   int     // posts per user in the posts phase
	Readers        int     // returning users following 500 accounts (tally's rebuild figure)
	// RebuildRounds is how many times the readers return (each round
	// moves the clock past the active window and expires their inboxes,
	// untimed): Readers × RebuildRounds rebuilds make the p99 (at least
	// 1 round).
	RebuildRounds int
	Clients       int // page-reading clients
	Duration      time.Duration
	Seed          uint64
	Dir           string // parent of the targets' directories ("" = temp)
	Redis         bool   // run the Redis peer (skipped if redis-server is missing)
	// PostsProfile, if set, profiles tally's posts phase: PREFIX.cpu,
	// PREFIX.allocs (a heap profile; compare with PREFIX.allocs-base,
	// taken when the phase starts, by pprof -diff_base), PREFIX.block
	// and PREFIX.mutex.
	PostsProfile string
	// JobPerPost also runs tally as before issue 18 item 5 (target
	// "tally-job-per-post": every fan-out a durable job, InlineFanout -1),
	// before the tally target, for a before/after in one run.
	JobPerPost bool
	// RepostFraction adds, after the posts phase, reposts of random posts
	// by random users, this fraction of the posts phase's posts (issue
	// 21: 0.1); each is fanned out like a post in both targets.
	RepostFraction float64
	// MutedFraction mutes this fraction of the follow edges (issue 21:
	// 0.01). tally filters them on read; Redis as Mastodon skips them at
	// delivery (FeedManager's filter at push time), so its pages carry no
	// filter. tally's pages are measured before and after the mutes
	// ("page, no mutes"): the difference is the mute filter's cost.
	MutedFraction float64
	// PagesProfile, if set, profiles tally's pages phase (with reposts
	// and mutes) into PREFIX.cpu and the rest (see PostsProfile).
	PagesProfile string
	// RebuildProfile, if set, profiles tally's returning users (the
	// rebuilds, expiries included) into PREFIX.cpu and the rest.
	RebuildProfile string
	Log            func(format string, args ...any)
}

// repostPlan is the reposts both targets publish after the posts phase:
// user reposts post as id, in this order.
type plannedRepost struct{ user, post, id uint64 }

func repostPlan(cfg TimelineConfig, g *socialgraph.Graph, first, n, nextID uint64) []plannedRepost {
	k := int(cfg.RepostFraction * float64(n))
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x2e))
	out := make([]plannedRepost, k)
	for i := range out {
		out[i] = plannedRepost{user: 1 + rng.Uint64N(uint64(g.Users)), post: first + rng.Uint64N(n), id: nextID + uint64(i)}
	}
	return out
}

// mutedPairs picks MutedFraction of the edges (user, followee).
func mutedPairs(cfg TimelineConfig, g *socialgraph.Graph) [][2]uint64 {
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x2c))
	var out [][2]uint64
	g.Edges(func(u, f uint64) {
		if rng.Float64() < cfg.MutedFraction {
			out = append(out, [2]uint64{u, f})
		}
	})
	return out
}

// QuickTimeline is the smoke-test size: seconds per target.
func QuickTimeline() TimelineConfig {
	return TimelineConfig{Users: 20_000, MeanFollowees: 20, BigFollowers: 19_999, ActiveFraction: 0.2, PostsPerUser: 3,
		Readers: 100, RebuildRounds: 3, Clients: 8, Duration: 2 * time.Second, Seed: 1, Redis: true, RepostFraction: 0.1, MutedFraction: 0.01}
}

// FullTimeline is the size: 1M users, user 1 followed by 10^6.
func FullTimeline() TimelineConfig {
	return TimelineConfig{Users: 1_000_000, MeanFollowees: 20, BigFollowers: 999_999, ActiveFraction: 0.2, PostsPerUser: 3,
		Readers: 200, RebuildRounds: 5, Clients: 8, Duration: 20 * time.Second, Seed: 1, Redis: true, RepostFraction: 0.1, MutedFraction: 0.01}
}

// TimelineResult is one target's figures.
type TimelineResult struct {
	Target       string
	Err          string
	Entries      int64 // inbox entries after the posts phase
	Edges        int64
	Deliveries   int64 // of the posts phase
	PostsTime    time.Duration
	BigDelivered int64
	BigTime      time.Duration
	Pages        int64
	PagesTime    time.Duration
	Page         hist.Histogram
	Rebuild      hist.Histogram // tally only
	Reposts      int64          // reposts published after the posts phase
	Muted        int64          // muted pairs
	// PagesNoMute and PageNoMute: tally's pages before the mutes (with
	// the reposts), for the mute filter's cost.
	PagesNoMute     int64
	PagesNoMuteTime time.Duration
	PageNoMute      hist.Histogram
	DiskEntry       float64 // bytes per inbox entry on disk (tally) or used_memory growth (Redis)
	HeapEntry       float64
	RSSEntry        float64
	EdgeBytes       float64
}

// RunTimeline runs tally and, if asked and installed, Redis.
func RunTimeline(cfg TimelineConfig) []TimelineResult {
	if cfg.Log == nil {
		cfg.Log = func(string, ...any) {}
	}
	g := socialgraph.New(socialgraph.Config{Users: cfg.Users, MeanFollowees: cfg.MeanFollowees, BigAuthor: 1,
		BigFollowers: cfg.BigFollowers, ActiveFraction: cfg.ActiveFraction, Seed: cfg.Seed})
	var out []TimelineResult
	if cfg.JobPerPost {
		before := cfg
		if cfg.PostsProfile != "" {
			before.PostsProfile = cfg.PostsProfile + "-job-per-post"
		}
		out = append(out, runTallyTimeline(before, g, -1))
	}
	out = append(out, runTallyTimeline(cfg, g, 0))
	if cfg.Redis {
		if skip := RedisSkip(); skip != "" {
			out = append(out, TimelineResult{Target: "redis-mastodon", Err: skip})
		} else {
			out = append(out, runRedisTimeline(cfg, g))
		}
	}
	return out
}

func targetDir(cfg TimelineConfig, name string) (string, error) {
	return os.MkdirTemp(cfg.Dir, "tally-tlbench-"+name+"-")
}

// runTallyTimeline runs tally with timeline.Options.InlineFanout inline
// (-1: the target "tally-job-per-post").
func runTallyTimeline(cfg TimelineConfig, g *socialgraph.Graph, inline int) (r TimelineResult) {
	r.Target = "tally"
	if inline < 0 {
		r.Target = "tally-job-per-post"
	}
	fail := func(err error) TimelineResult { r.Err = err.Error(); return r }
	dir, err := targetDir(cfg, "tally")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(dir)
	base := procmem.Measure()
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	// Through tally.Open with the timeline only: the figures are the
	// timeline's, as Redis's friend feed has no unread counts to keep.
	all, err := tallydb.Open(dir, &tallydb.Options{
		Store: &store.Options{Durability: store.SyncInterval, JobWorkers: -1, CacheSize: 256 << 20, JobBytesPerSec: -1},
		Timeline: &timeline.Options{Config: timeline.Config{PullThreshold: 1 << 40}, ExpireInterval: -1, InlineFanout: inline,
			Now: func() time.Time { return time.Unix(0, now.Load()) }},
		Packages: []string{"timeline"},
	})
	if err != nil {
		return fail(err)
	}
	defer all.Close()
	db, tl := all.Store(), all.Timeline()
	ctx := context.Background()
	var postsStart time.Time
	stopProfile := func() error { return nil }
	last := ""
	w, err := tlworld.Build(ctx, db, tl, g, tlworld.Options{
		PostsPerUser: cfg.PostsPerUser, Readers: cfg.Readers, FollowsPerReader: 500, Seed: cfg.Seed, Publishers: cfg.Clients,
		Progress: func(stage string, done, total int) {
			if stage != last {
				last = stage
				cfg.Log("%s: %s", r.Target, stage)
				if stage == "posts" {
					if cfg.PostsProfile != "" {
						var perr error
						if stopProfile, perr = startProfile(cfg.PostsProfile); perr != nil {
							cfg.Log("%s: profile: %v", r.Target, perr)
						}
					}
					postsStart = time.Now()
				}
			}
		},
	})
	r.PostsTime = time.Since(postsStart)
	if perr := stopProfile(); perr != nil {
		cfg.Log("%s: profile: %v", r.Target, perr)
	}
	if err != nil {
		return fail(err)
	}
	r.Edges = int64(w.Edges)
	for _, s := range tl.Stats() {
		if s.Key == "deliveries" {
			r.Deliveries, _ = strconv.ParseInt(s.Value, 10, 64)
		}
	}
	cfg.Log(r.Target + ": compacting")
	if err := db.CompactDisk(ctx); err != nil {
		return fail(err)
	}
	grown := procmem.Measure().Sub(base)
	for _, u := range g.Active {
		n, err := tl.InboxLen(u)
		if err != nil {
			return fail(err)
		}
		r.Entries += int64(n)
	}
	du, err := tl.DiskUsage()
	if err != nil {
		return fail(err)
	}
	r.DiskEntry = float64(du.Inboxes) / float64(max(r.Entries, 1))
	r.HeapEntry = float64(grown.Heap) / float64(max(r.Entries, 1))
	r.RSSEntry = float64(grown.RSS) / float64(max(r.Entries, 1))
	r.EdgeBytes = float64(du.Followers+du.Followees) / float64(max(r.Edges, 1))

	cfg.Log(r.Target + ": big author")
	t0 := time.Now()
	res, err := tl.Publish(1, w.NextPost)
	if err != nil {
		return fail(err)
	}
	if res.Job != 0 {
		if err := db.WaitJob(ctx, res.Job); err != nil {
			return fail(err)
		}
	}
	r.BigTime = time.Since(t0)
	info, _, err := tl.Post(w.NextPost)
	if err != nil {
		return fail(err)
	}
	r.BigDelivered = int64(info.Delivered)

	if cfg.RepostFraction > 0 {
		cfg.Log(r.Target + ": reposts")
		nPosts := uint64(cfg.Users * cfg.PostsPerUser)
		for _, rp := range repostPlan(cfg, g, tlworld.FirstPost, nPosts, w.NextPost+1) {
			author, ok, err := tl.Owner(rp.post)
			if err != nil {
				return fail(err)
			}
			if !ok {
				continue
			}
			res, _, err := tl.Repost(rp.user, author, rp.post, rp.id)
			if err != nil {
				return fail(err)
			}
			if res.Job != 0 {
				if err := db.WaitJob(ctx, res.Job); err != nil {
					return fail(err)
				}
			}
			r.Reposts++
		}
		if err := db.CompactDisk(ctx); err != nil {
			return fail(err)
		}
	}
	homePage := func() (func(u uint64) error, func(), error) {
		return func(u uint64) error {
			p, err := tl.Home(u, "", 20)
			if err == nil && len(p.Entries) == 0 && r.Muted == 0 {
				err = fmt.Errorf("empty home of active user %d", u)
			}
			return err
		}, func() {}, nil
	}
	if cfg.MutedFraction > 0 {
		cfg.Log(r.Target + ": pages before the mutes")
		r.PagesNoMute, r.PagesNoMuteTime, err = drivePages(cfg, g, homePage, &r.PageNoMute)
		if err != nil {
			return fail(err)
		}
		cfg.Log(r.Target + ": mutes")
		for _, pr := range mutedPairs(cfg, g) {
			if _, err := tl.Mute(pr[0], pr[1]); err != nil {
				return fail(err)
			}
			r.Muted++
		}
	}

	cfg.Log(r.Target + ": pages")
	stopPages := func() error { return nil }
	if cfg.PagesProfile != "" {
		var perr error
		if stopPages, perr = startProfile(cfg.PagesProfile); perr != nil {
			cfg.Log("%s: profile: %v", r.Target, perr)
			stopPages = func() error { return nil }
		}
	}
	r.Pages, r.PagesTime, err = drivePages(cfg, g, homePage, &r.Page)
	if perr := stopPages(); perr != nil {
		cfg.Log("%s: profile: %v", r.Target, perr)
	}
	if err != nil {
		return fail(err)
	}

	cfg.Log(r.Target + ": returning users")
	stopRebuild := func() error { return nil }
	if cfg.RebuildProfile != "" {
		var perr error
		if stopRebuild, perr = startProfile(cfg.RebuildProfile); perr != nil {
			cfg.Log("%s: profile: %v", r.Target, perr)
			stopRebuild = func() error { return nil }
		}
	}
	for range max(cfg.RebuildRounds, 1) {
		now.Add(int64(timeline.DefaultActiveWindow + time.Hour))
		if _, err := tl.Expire(ctx); err != nil {
			return fail(err)
		}
		for _, u := range w.Readers {
			t0 := time.Now()
			p, err := tl.Home(u, "", 20)
			if err == nil && len(p.Entries) != 20 {
				err = fmt.Errorf("returning user %d: %d entries, want 20", u, len(p.Entries))
			}
			if err != nil {
				return fail(err)
			}
			r.Rebuild.Record(time.Since(t0))
		}
	}
	if perr := stopRebuild(); perr != nil {
		cfg.Log("%s: profile: %v", r.Target, perr)
	}
	return r
}

// drivePages reads first pages of random active users from cfg.Clients
// clients for cfg.Duration. open returns one client's page function.
func drivePages(cfg TimelineConfig, g *socialgraph.Graph, open func() (func(uint64) error, func(), error), h *hist.Histogram) (int64, time.Duration, error) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var n atomic.Int64
	errs := make([]error, cfg.Clients)
	deadline := time.Now().Add(cfg.Duration)
	start := time.Now()
	for c := range cfg.Clients {
		page, closeFn, err := open()
		if err != nil {
			return 0, 0, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer closeFn()
			rng := rand.New(rand.NewPCG(cfg.Seed, uint64(c)))
			var local hist.Histogram
			for i := 0; ; i++ {
				if i%64 == 0 && time.Now().After(deadline) {
					break
				}
				u := g.Active[rng.IntN(len(g.Active))]
				t0 := time.Now()
				if err := page(u); err != nil {
					errs[c] = err
					return
				}
				local.Record(time.Since(t0))
				n.Add(1)
			}
			mu.Lock()
			h.Merge(&local)
			mu.Unlock()
		}()
	}
	wg.Wait()
	el := time.Since(start)
	for _, err := range errs {
		if err != nil {
			return 0, 0, err
		}
	}
	return n.Load(), el, nil
}

// redisMaxItems is Mastodon's FeedManager::MAX_ITEMS.
const redisMaxItems = 800

func runRedisTimeline(cfg TimelineConfig, g *socialgraph.Graph) (r TimelineResult) {
	r.Target = "redis-mastodon"
	fail := func(err error) TimelineResult { r.Err = err.Error(); return r }
	dir, err := targetDir(cfg, "redis")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(dir)
	t := &redisTarget{dir: dir, aof: true}
	if err := t.start(); err != nil {
		return fail(err)
	}
	defer t.Close()
	c, err := t.conn()
	if err != nil {
		return fail(err)
	}
	defer c.Close()
	mem0, err := infoInt(c, "memory", "used_memory")
	if err != nil {
		return fail(err)
	}

	// The graph: followers per author, in memory for the fan-out driver
	// (Mastodon reads them from PostgreSQL), and as Redis sets.
	cfg.Log("redis: follows")
	active := make([]bool, g.Users+1)
	for _, u := range g.Active {
		active[u] = true
	}
	followers := make([][]uint32, g.Users+1)
	var keyBuf []byte
	var pending int
	flushEvery := func(n int) error {
		pending += n
		if pending < 4096 {
			return nil
		}
		pending = 0
		if err := c.flush(); err != nil {
			return err
		}
		return c.drain()
	}
	g.Edges(func(u, f uint64) {
		followers[f] = append(followers[f], uint32(u))
		r.Edges++
		if err != nil {
			return
		}
		keyBuf = strconv.AppendUint(append(keyBuf[:0], "followers:"...), f, 10)
		c.begin(3)
		c.argString("SADD")
		c.arg(keyBuf)
		c.argInt(int64(u))
		err = flushEvery(1)
	})
	if err == nil {
		err = c.flush()
	}
	if err == nil {
		err = c.drain()
	}
	if err != nil {
		return fail(err)
	}
	mem1, err := infoInt(c, "memory", "used_memory")
	if err != nil {
		return fail(err)
	}
	r.EdgeBytes = float64(mem1-mem0) / float64(max(r.Edges, 1))

	// The posts phase: the same posts, in the same order, as tlworld.Build.
	cfg.Log("redis: posts")
	conns := make([]*respConn, cfg.Clients)
	for i := range conns {
		if conns[i], err = t.conn(); err != nil {
			return fail(err)
		}
		defer conns[i].Close()
	}
	// push pipelines, on one connection, ZADD and Mastodon's trim for each
	// active follower in to, flushing every 512 deliveries.
	push := func(cc *respConn, post uint64, to []uint32, key []byte) ([]byte, int64, error) {
		var n int64
		for _, f := range to {
			if !active[f] {
				continue
			}
			key = strconv.AppendUint(append(key[:0], "feed:home:"...), uint64(f), 10)
			cc.begin(4)
			cc.argString("ZADD")
			cc.arg(key)
			cc.argInt(int64(post))
			cc.argInt(int64(post))
			cc.begin(4)
			cc.argString("ZREMRANGEBYRANK")
			cc.arg(key)
			cc.argInt(0)
			cc.argInt(-(redisMaxItems + 1))
			if n++; cc.pending >= 1024 {
				if err := cc.flush(); err != nil {
					return key, n, err
				}
				if err := cc.drain(); err != nil {
					return key, n, err
				}
			}
		}
		return key, n, nil
	}
	finish := func(cc *respConn) error {
		if cc.pending == 0 {
			return nil
		}
		if err := cc.flush(); err != nil {
			return err
		}
		return cc.drain()
	}
	// deliver runs jobs (post, followers) on every connection at once:
	// job i on connection i mod Clients, as Sidekiq workers take posts.
	type job struct {
		post uint64
		to   []uint32
	}
	deliver := func(jobs []job) (int64, error) {
		var wg sync.WaitGroup
		errs := make([]error, len(conns))
		var n atomic.Int64
		for i, cc := range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var key []byte
				var cnt int64
				for j := i; j < len(jobs); j += len(conns) {
					var k int64
					var err error
					if key, k, err = push(cc, jobs[j].post, jobs[j].to, key); err != nil {
						errs[i] = err
						return
					}
					cnt += k
				}
				errs[i] = finish(cc)
				n.Add(cnt)
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return 0, err
			}
		}
		return n.Load(), nil
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x9057)) // tlworld.Build's order
	order := make([]uint64, g.Users)
	for i := range order {
		order[i] = uint64(i + 1)
	}
	post := uint64(tlworld.FirstPost)
	start := time.Now()
	var jobs []job
	for range cfg.PostsPerUser {
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, a := range order {
			jobs = append(jobs, job{post, followers[a]})
			post++
			if len(jobs) == 4096 {
				n, err := deliver(jobs)
				if err != nil {
					return fail(err)
				}
				r.Deliveries += n
				jobs = jobs[:0]
			}
		}
	}
	n, err := deliver(jobs)
	if err != nil {
		return fail(err)
	}
	r.Deliveries += n
	r.PostsTime = time.Since(start)
	bigPost := post
	// Reposts (Mastodon's reblogs): each delivered to the reposter's
	// active followers like a post, minus those muting the reposter
	// (FeedManager filters mutes at push time), with Mastodon's reblog
	// bookkeeping left out (a ZADD NX per delivery into
	// feed:home:UID:reblogs; it would only add to Redis's cost).
	if cfg.RepostFraction > 0 || cfg.MutedFraction > 0 {
		muted := map[[2]uint64]bool{}
		for _, pr := range mutedPairs(cfg, g) {
			muted[pr] = true
		}
		r.Muted = int64(len(muted))
		jobs = jobs[:0]
		for _, rp := range repostPlan(cfg, g, tlworld.FirstPost, uint64(cfg.Users*cfg.PostsPerUser), post+1) {
			var to []uint32
			for _, f := range followers[rp.user] {
				if !muted[[2]uint64{uint64(f), rp.user}] {
					to = append(to, f)
				}
			}
			jobs = append(jobs, job{rp.id, to})
			r.Reposts++
		}
		if _, err := deliver(jobs); err != nil {
			return fail(err)
		}
	}
	mem2, err := infoInt(c, "memory", "used_memory")
	if err != nil {
		return fail(err)
	}
	for _, u := range g.Active {
		key := "feed:home:" + strconv.FormatUint(u, 10)
		v, err := c.do("ZCARD", key)
		if err != nil {
			return fail(err)
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		r.Entries += n
	}
	r.DiskEntry = float64(mem2-mem1) / float64(max(r.Entries, 1))
	rss, err := infoInt(c, "memory", "used_memory_rss")
	if err == nil {
		r.RSSEntry = float64(rss) / float64(max(r.Entries, 1))
	}

	cfg.Log("redis: big author")
	// One post to every active follower of user 1, the followers split
	// over the connections (Mastodon batches a fan-out into jobs too).
	big := followers[1]
	per := (len(big) + len(conns) - 1) / len(conns)
	var bigJobs []job
	for i := range conns {
		bigJobs = append(bigJobs, job{bigPost, big[min(i*per, len(big)):min((i+1)*per, len(big))]})
	}
	t0 := time.Now()
	r.BigDelivered, err = deliver(bigJobs)
	if err != nil {
		return fail(err)
	}
	r.BigTime = time.Since(t0)

	cfg.Log("redis: pages")
	r.Pages, r.PagesTime, err = drivePages(cfg, g, func() (func(uint64) error, func(), error) {
		cc, err := t.conn()
		if err != nil {
			return nil, nil, err
		}
		var key []byte
		var ids []uint64
		return func(u uint64) error {
			key = strconv.AppendUint(append(key[:0], "feed:home:"...), u, 10)
			cc.begin(8)
			cc.argString("ZREVRANGEBYSCORE")
			cc.arg(key)
			cc.argString("+inf")
			cc.argString("-inf")
			cc.argString("LIMIT")
			cc.argInt(0)
			cc.argInt(20)
			cc.argString("WITHSCORES")
			if err := cc.flush(); err != nil {
				return err
			}
			var err error
			ids, err = cc.readInts(ids[:0])
			if err == nil && len(ids) == 0 {
				err = fmt.Errorf("empty home of active user %d", u)
			}
			return err
		}, func() { cc.Close() }, nil
	}, &r.Page)
	if err != nil {
		return fail(err)
	}
	return r
}

// TimelineTable renders results as a markdown table.
func TimelineTable(cfg TimelineConfig, rs []TimelineResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Graph: %d users, %d mean followees (power law), user 1 followed by %d, %.0f%% active; %d posts per user; %d clients.\n\n",
		cfg.Users, cfg.MeanFollowees, cfg.BigFollowers, 100*cfg.ActiveFraction, cfg.PostsPerUser, cfg.Clients)
	fmt.Fprintf(&b, "Rebuild on return: %d readers following 500 accounts, %d rounds (%d rebuilds).\n\n", cfg.Readers, max(cfg.RebuildRounds, 1), cfg.Readers*max(cfg.RebuildRounds, 1))
	b.WriteString("| target | pages/s | page p50 | page p99 | deliveries/s (posts phase) | user 1's post to every active inbox | rebuild on return p50 / p99 (500 followees) | bytes/inbox entry | bytes/follow edge |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	var tallyPages, tallyDeliv float64
	for _, r := range rs {
		if r.Err != "" {
			fmt.Fprintf(&b, "| %s | %s | | | | | | | |\n", r.Target, r.Err)
			continue
		}
		pages := float64(r.Pages) / r.PagesTime.Seconds()
		deliv := float64(r.Deliveries) / r.PostsTime.Seconds()
		rebuild := "n/a (Mastodon regenerates from PostgreSQL in a background job)"
		entry := fmt.Sprintf("%.1f memory (used_memory), %.1f RSS", r.DiskEntry, r.RSSEntry)
		if strings.HasPrefix(r.Target, "tally") {
			if r.Target == "tally" {
				tallyPages, tallyDeliv = pages, deliv
			}
			rebuild = fmtDur(r.Rebuild.Quantile(0.5)) + " / " + fmtDur(r.Rebuild.Quantile(0.99))
			entry = fmt.Sprintf("%.2f disk; memory: heap %.1f, RSS %.1f (Pebble's caches, capped)", r.DiskEntry, r.HeapEntry, r.RSSEntry)
		}
		ratio := ""
		if !strings.HasPrefix(r.Target, "tally") && tallyPages > 0 {
			ratio = fmt.Sprintf(" (tally %.1f×)", tallyPages/pages)
		}
		dratio := ""
		if !strings.HasPrefix(r.Target, "tally") && tallyDeliv > 0 {
			dratio = fmt.Sprintf(" (tally %.1f×)", tallyDeliv/deliv)
		}
		fmt.Fprintf(&b, "| %s | %.0f%s | %s | %s | %.0f%s | %d in %s | %s | %s | %.2f |\n",
			r.Target, pages, ratio, fmtDur(r.Page.Quantile(0.5)), fmtDur(r.Page.Quantile(0.99)), deliv, dratio,
			r.BigDelivered, fmtDur(r.BigTime), rebuild, entry, r.EdgeBytes)
	}
	for _, r := range rs {
		if r.Err != "" || r.Target != "tally" {
			continue
		}
		fmt.Fprintf(&b, "\ntally: %d reposts (%.0f%% of the posts phase's posts), %d muted pairs (%.1f%% of the edges).", r.Reposts,
			100*float64(r.Reposts)/float64(max(cfg.Users*cfg.PostsPerUser, 1)), r.Muted, 100*float64(r.Muted)/float64(max(r.Edges, 1)))
		if r.PagesNoMute > 0 {
			before := float64(r.PagesNoMute) / r.PagesNoMuteTime.Seconds()
			after := float64(r.Pages) / r.PagesTime.Seconds()
			fmt.Fprintf(&b, " Pages before the mutes: %.0f/s, p50 %s, p99 %s; with them %.0f/s, p50 %s, p99 %s: %s.",
				before, fmtDur(r.PageNoMute.Quantile(0.5)), fmtDur(r.PageNoMute.Quantile(0.99)), after, fmtDur(r.Page.Quantile(0.5)), fmtDur(r.Page.Quantile(0.99)),
				muteCost(r.Page.Quantile(0.5)-r.PageNoMute.Quantile(0.5), before, after))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// muteCost renders the mute filter's cost from the p50 difference of the
// pages with and without mutes and their rates. The two page runs are
// seconds apart on a shared machine, so a filter cheaper than the noise
// can read as faster: that is said as such, never printed as a negative
// cost.
func muteCost(p50Diff time.Duration, before, after float64) string {
	if p50Diff > 0 && after < before {
		return fmt.Sprintf("the mute filter costs %s per page at p50 (%.0f%% of throughput)", fmtDur(p50Diff), 100*(before-after)/before)
	}
	sign := "+"
	if p50Diff < 0 {
		sign, p50Diff = "-", -p50Diff
	}
	return fmt.Sprintf("no mute filter cost above the runs' noise (p50 %s%s, pages/s %+.0f%%)", sign, fmtDur(p50Diff), 100*(after-before)/before)
}

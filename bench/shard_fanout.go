package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// The fan-out phase of the sharding benchmarks (issue 23: "time for a
// 10^7-follower post to reach every active inbox"), on a tally cluster of
// FanoutShards shards × FanoutReplicas replicas and on a Redis Cluster of the
// same shape.
//
// One author (user 1) gets FanoutFollowers followers (users 2..F+1, spread
// over every shard by their ids' slots); a FanoutActive share of them,
// drawn uniformly by a seeded hash of the id, is active. Then the author
// posts once. From the post on, FanoutSample uniformly drawn active homes
// are read together every 10 ms until each shows the post: the time each
// is first seen is the post's reach (the last of them approximates "every
// active inbox"; reading all of them that often would load the servers
// more than the fan-out). Afterwards a sweep reads every active home and
// checks that each holds the post exactly once.
//
//   - tally: TL.FOLLOW u 1 in write-only ClusterClient pipelines (each
//     node's part of a pipeline is one Raft proposal), TL.ACTIVE u for the
//     active ones, then TL.POST 1 P, which returns at the commit; the
//     cluster does the rest (one message per other shard, each shard
//     pushes to its own active followers, or, for an author past the pull
//     threshold, its followers' reads pull the post). Modes: "pull" is
//     the default configuration; "push" raises TL.CONFIG PULLTHRESHOLD
//     past F first.
//   - Redis: the fan-out service of a Redis shop (Twitter's timelines in
//     Redis, Mastodon's FeedManager): the follower ids in one set
//     (SADD followers:{1}), an active user's home as a list that exists
//     only while the user is active (home:U, created with one older
//     entry), and the post delivered by the client: SSCAN the follower set
//     and LPUSHX the post to each follower's home (a no-op for inactive
//     ones), then LTRIM the homes that took it to the inbox cap (800).
//
// CPU is every server process's user+system time from the post to the
// last polled home; RSS is every server process's resident memory after
// the set-up.

// fanoutRow is one system's fan-out run.
type fanoutRow struct {
	System       string
	Mode         string // tally: "pull" (the default config) or "push"
	Load         string // load average before the post
	Follows      time.Duration
	Activations  time.Duration
	Resent       int64          // set-up pipelines sent again after an error
	ResendErrs   map[string]int // their errors, by kind
	RSS          int64          // bytes, every server process, after set-up
	Posted       time.Duration  // TL.POST's reply (tally); the client fan-out's end (Redis)
	Sampled      int            // active homes polled from the post on
	SampleP50    time.Duration  // when the polled homes first showed the post
	SampleP99    time.Duration
	SampleMax    time.Duration
	SampleCPU    time.Duration // every server process, from the post to the last polled home
	Every        time.Duration // the sweeps that checked every active home, after the sample
	Sweeps       int
	Holding      int // active homes holding the post exactly once
	Wrong        []string
	Active       int
	Unfinished   bool // the sweep gave up (FanoutTimeout)
	ClientPushes int64
}

// FanoutPhase is the fan-out phase's outcome.
type FanoutPhase struct {
	Shards    int
	Followers int
	Active    int
	Rows      []fanoutRow
}

// fanoutAuthor is the author of the fan-out phase; its followers are
// 2..F+1.
const fanoutAuthor = 1

// fanoutPost is the post's id.
const fanoutPost = 1_000_000_007

// fanoutInboxCap is the Redis side's LTRIM bound (tally's default inbox
// cap, TL.CONFIG INBOXCAP).
const fanoutInboxCap = 800

// isActive draws a user's activity uniformly from a seeded hash of its id
// (share in 0..1).
func isActive(u int, share float64) bool {
	x := uint64(u)*0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019
	x ^= x >> 31
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 29
	return float64(x%1_000_000) < share*1_000_000
}

func runShardFanout(ctx context.Context, cfg *ShardConfig, rep *ShardReport, sub subdirFunc, logf func(string, ...any)) error {
	ph := &FanoutPhase{Shards: cfg.FanoutShards, Followers: cfg.FanoutFollowers}
	for u := 2; u < cfg.FanoutFollowers+2; u++ {
		if isActive(u, cfg.FanoutActive) {
			ph.Active++
		}
	}
	rep.Fanout = ph
	type run struct{ sys, mode string }
	var runs []run
	for _, sys := range cfg.Systems {
		if sys == "redis" {
			runs = append(runs, run{sys, ""})
			continue
		}
		for _, m := range cfg.FanoutModes {
			runs = append(runs, run{sys, m})
		}
	}
	for _, r := range runs {
		sys := r.sys
		dir, err := sub("fanout-" + sys + r.mode)
		if err != nil {
			return err
		}
		var cl shardCluster
		if sys == "tally" {
			cl, err = startTallyShards(ctx, cfg.TallyBin, dir, cfg.FanoutDurability, cfg.FanoutShards, cfg.FanoutReplicas, 0)
		} else {
			cl, err = startRedisShardsN(ctx, dir, redisFsync(cfg.FanoutDurability), cfg.FanoutShards, cfg.FanoutReplicas)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", sys, err)
		}
		row, err := fanoutOnce(ctx, cfg, cl, sys, r.mode, logf)
		cl.Stop()
		ph.Rows = append(ph.Rows, row)
		if err != nil {
			return fmt.Errorf("%s: %w", sys, err)
		}
	}
	return nil
}

// fanoutOnce sets up the followers on cl, posts once and measures.
func fanoutOnce(ctx context.Context, cfg *ShardConfig, cl shardCluster, sys, mode string, logf func(string, ...any)) (fanoutRow, error) {
	row := fanoutRow{System: sys, Mode: mode}
	const conns = 16
	cc := newClusterClient(cl.Addrs(), conns)
	defer cc.Close()
	if mode == "push" {
		// An author stays pushed below the pull threshold (default
		// 1,000,000 followers): raise it past F on every shard before
		// the follows (a shard marks an author pulled when a follow
		// takes it past the threshold, for good).
		if err := setPullThreshold(ctx, cc, uint64(cfg.FanoutFollowers)+1); err != nil {
			return row, err
		}
	}
	F, share := cfg.FanoutFollowers, cfg.FanoutActive
	var active []int
	for u := 2; u < F+2; u++ {
		if isActive(u, share) {
			active = append(active, u)
		}
	}
	row.Active = len(active)

	// Set-up: the follow edges, then the active users.
	t0 := time.Now()
	follow := func(p redis.Pipeliner, lo, hi int) {
		if lo%1_000_000 < hi-lo {
			logf("fanout %s %s: follows from %d sent at %v", sys, mode, lo, time.Since(t0).Round(time.Second))
		}
		if sys == "tally" {
			for u := lo; u < hi; u++ {
				p.Do(ctx, "TL.FOLLOW", u, fanoutAuthor)
			}
			return
		}
		members := make([]any, 0, hi-lo)
		for u := lo; u < hi; u++ {
			members = append(members, u)
		}
		p.SAdd(ctx, "followers:{"+strconv.Itoa(fanoutAuthor)+"}", members...)
	}
	var emu sync.Mutex
	row.ResendErrs = map[string]int{}
	noteErr := func(err error) {
		kind := err.Error()
		if i := strings.IndexAny(kind, "0123456789"); i > 0 {
			kind = kind[:i] // a kind, not each address or number
		}
		emu.Lock()
		row.ResendErrs[kind]++
		emu.Unlock()
	}
	resent, err := chunked(ctx, cc, conns, 2, F+2, 1000, follow, noteErr)
	row.Resent += resent
	if err != nil {
		return row, fmt.Errorf("follows: %w", err)
	}
	if sys == "tally" {
		// The follows reach the author's shard through the cross-shard
		// streams; the set-up ends when its count says so.
		if err := waitUntil(ctx, 30*time.Minute, func() (bool, error) {
			n, err := tlFollowers(ctx, cc, fanoutAuthor)
			return n == int64(F), err
		}); err != nil {
			return row, fmt.Errorf("waiting for the author's follower count: %w", err)
		}
	}
	row.Follows = time.Since(t0)
	logf("fanout %s: %d follows in %v (%d pipelines sent again)", sys, F, row.Follows.Round(time.Millisecond), row.Resent)
	t0 = time.Now()
	activate := func(p redis.Pipeliner, lo, hi int) {
		for _, u := range active[lo:hi] {
			if sys == "tally" {
				p.Do(ctx, "TL.ACTIVE", u)
			} else {
				p.LPush(ctx, "home:"+strconv.Itoa(u), 1) // an older entry: the home is cached
			}
		}
	}
	resent, err = chunked(ctx, cc, conns, 0, len(active), 1000, activate, noteErr)
	row.Resent += resent
	if err != nil {
		return row, fmt.Errorf("activations: %w", err)
	}
	row.Activations = time.Since(t0)
	logf("fanout %s: %d active in %v", sys, len(active), row.Activations.Round(time.Millisecond))
	for _, pid := range cl.Pids() {
		row.RSS += procRSS(pid)
	}

	// The post, with a sample of the active homes polled meanwhile.
	rng := rand.New(rand.NewPCG(7, 11))
	sample := slices.Clone(active)
	rng.Shuffle(len(sample), func(i, j int) { sample[i], sample[j] = sample[j], sample[i] })
	sample = sample[:min(cfg.FanoutSample, len(sample))]
	row.Load = loadAvg()
	pids := cl.Pids()
	c0 := sumCPU(pids)
	t0 = time.Now()
	type sampled struct {
		seen []time.Duration
		err  error
	}
	done := make(chan sampled, 1)
	go func() {
		seen, err := pollSample(ctx, cc, sys, sample, t0, cfg.FanoutTimeout)
		done <- sampled{seen, err}
	}()
	if sys == "tally" {
		if err := cc.Do(ctx, "TL.POST", fanoutAuthor, fanoutPost).Err(); err != nil {
			return row, fmt.Errorf("TL.POST: %w", err)
		}
	} else {
		n, err := redisFanout(ctx, cc, conns)
		row.ClientPushes = n
		if err != nil {
			return row, fmt.Errorf("fan-out: %w", err)
		}
	}
	row.Posted = time.Since(t0)
	res := <-done
	if res.err != nil {
		return row, fmt.Errorf("sampled homes: %w", res.err)
	}
	row.Sampled = len(res.seen)
	if n := len(res.seen); n > 0 {
		row.SampleP50, row.SampleP99, row.SampleMax = res.seen[n/2], res.seen[n*99/100], res.seen[n-1]
	}
	row.SampleCPU = sumCPU(pids) - c0
	t1 := time.Now()
	// Sweep every active home until each holds the post.
	left := active
	deadline := t0.Add(cfg.FanoutTimeout)
	for len(left) > 0 {
		row.Sweeps++
		var next []int
		var mu sync.Mutex
		var wrong []string
		err := sweep(ctx, cc, conns, sys, left, func(u int, ok bool, bad string) {
			mu.Lock()
			defer mu.Unlock()
			switch {
			case bad != "":
				wrong = append(wrong, bad)
			case !ok:
				next = append(next, u)
			}
		})
		if err != nil {
			return row, fmt.Errorf("sweep: %w", err)
		}
		row.Wrong = append(row.Wrong, wrong...)
		row.Holding += len(left) - len(next) - len(wrong)
		left = next
		if time.Now().After(deadline) {
			row.Unfinished = true
			break
		}
	}
	row.Every = time.Since(t1)
	logf("fanout %s %s: posted in %v, sampled homes p50 %v max %v, sweeps %v (%d), %d holding, %d wrong",
		sys, mode, row.Posted.Round(time.Millisecond), row.SampleP50.Round(time.Millisecond), row.SampleMax.Round(time.Millisecond),
		row.Every.Round(time.Millisecond), row.Sweeps, row.Holding, len(row.Wrong))
	return row, nil
}

// setPullThreshold sets TL.CONFIG PULLTHRESHOLD through one node and
// waits until every shard's leader reports it (the configuration reaches
// the other shards through the cross-shard streams).
func setPullThreshold(ctx context.Context, cc *redis.ClusterClient, n uint64) error {
	if err := cc.Do(ctx, "TL.CONFIG", "PULLTHRESHOLD", n).Err(); err != nil {
		return fmt.Errorf("TL.CONFIG PULLTHRESHOLD: %w", err)
	}
	want := strconv.FormatUint(n, 10)
	return waitUntil(ctx, time.Minute, func() (bool, error) {
		all := true
		err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			v, err := c.Do(ctx, "TL.CONFIG").Slice()
			if err != nil {
				return err
			}
			for i := 0; i+1 < len(v); i += 2 {
				if fmt.Sprint(v[i]) == "PULLTHRESHOLD" && fmt.Sprint(v[i+1]) != want {
					all = false
				}
			}
			return nil
		})
		return all, err
	})
}

// chunked runs fill over [lo, hi) in pipelines of batch, on conns
// goroutines. fill must queue idempotent commands: a pipeline with a
// failed command (a TRYAGAIN or CLUSTERDOWN during an election that
// go-redis's own retries did not outlast, a lost connection) is sent
// again whole, up to 30 times with a growing pause. It returns the
// pipelines sent again and the first error that outlasted the retries;
// sample, when not nil, receives each error that caused a resend.
func chunked(ctx context.Context, cc *redis.ClusterClient, conns, lo, hi, batch int, fill func(p redis.Pipeliner, lo, hi int), sample ...func(error)) (int64, error) {
	var next atomic.Int64
	next.Store(int64(lo))
	var resent atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := cc.Pipeline()
			for ctx.Err() == nil {
				a := int(next.Add(int64(batch))) - batch
				if a >= hi {
					return
				}
				for try := 0; ; try++ {
					fill(p, a, min(a+batch, hi))
					cmds, _ := p.Exec(ctx)
					var failed error
					for _, c := range cmds {
						if err := c.Err(); err != nil && !errors.Is(err, redis.Nil) {
							failed = err
							break
						}
					}
					if failed == nil {
						break
					}
					if try == 30 || ctx.Err() != nil {
						once.Do(func() { first = failed })
						return
					}
					resent.Add(1)
					for _, f := range sample {
						f(failed)
					}
					time.Sleep(time.Duration(try+1) * 100 * time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return resent.Load(), fmt.Errorf("%w: a pipeline failed 31 times: %v", errShardBench, first)
	}
	return resent.Load(), ctx.Err()
}

// tlFollowers returns TL.USER u's follower count.
func tlFollowers(ctx context.Context, cc *redis.ClusterClient, u int) (int64, error) {
	v, err := cc.Do(ctx, "TL.USER", u).Slice()
	if err != nil {
		return 0, err
	}
	for i := 0; i+1 < len(v); i += 2 {
		if v[i] == "followers" {
			n, _ := v[i+1].(int64)
			return n, nil
		}
	}
	return 0, fmt.Errorf("%w: TL.USER %d: no followers field in %v", errShardBench, u, v)
}

// pollSample reads the homes of us together (one pipeline per round,
// every 10 ms) until each has shown the post once, and returns, sorted,
// how long after t0 each was first seen holding it.
func pollSample(ctx context.Context, cc *redis.ClusterClient, sys string, us []int, t0 time.Time, limit time.Duration) ([]time.Duration, error) {
	left := us
	var seen []time.Duration
	for len(left) > 0 {
		if time.Since(t0) > limit {
			return seen, fmt.Errorf("%w: %d of %d sampled homes without the post after %v", errShardBench, len(left), len(us), limit)
		}
		p := cc.Pipeline()
		cmds := make([]*redis.Cmd, len(left))
		for i, u := range left {
			cmds[i] = homeCmd(ctx, p, sys, u)
		}
		if _, err := p.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return seen, err
		}
		at := time.Since(t0)
		var next []int
		for i, c := range cmds {
			ok, bad := homeReply(sys, left[i], c)
			if bad != "" {
				return seen, fmt.Errorf("%w: %s", errShardBench, bad)
			}
			if ok {
				seen = append(seen, at)
			} else {
				next = append(next, left[i])
			}
		}
		left = next
		select {
		case <-ctx.Done():
			return seen, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	slices.Sort(seen)
	return seen, nil
}

// homeCmd queues the read of u's home.
func homeCmd(ctx context.Context, p redis.Pipeliner, sys string, u int) *redis.Cmd {
	if sys == "tally" {
		return p.Do(ctx, "TL.HOME", u, "LIMIT", 10)
	}
	return p.Do(ctx, "LRANGE", "home:"+strconv.Itoa(u), 0, 9)
}

// homeReply reads homeCmd's reply: whether it holds the post, and a
// description if it holds it more than once (or is malformed).
func homeReply(sys string, u int, cmd *redis.Cmd) (bool, string) {
	v, err := cmd.Slice()
	if err != nil {
		return false, fmt.Sprintf("%d: %v", u, err)
	}
	var ids []string
	if sys == "tally" {
		// [next cursor, [[post, author] ...]]
		if len(v) != 2 {
			return false, fmt.Sprintf("%d: reply %v", u, v)
		}
		items, _ := v[1].([]any)
		for _, it := range items {
			rec, _ := it.([]any)
			if len(rec) == 0 {
				return false, fmt.Sprintf("%d: entry %v", u, it)
			}
			ids = append(ids, fmt.Sprint(rec[0]))
		}
	} else {
		for _, it := range v {
			ids = append(ids, fmt.Sprint(it))
		}
	}
	n := 0
	for _, id := range ids {
		if id == strconv.Itoa(fanoutPost) {
			n++
		}
	}
	if n > 1 {
		return false, fmt.Sprintf("%d: the post %d times (%v)", u, n, ids)
	}
	return n == 1, ""
}

// sweep reads every home of us in pipelines and reports each.
func sweep(ctx context.Context, cc *redis.ClusterClient, conns int, sys string, us []int, report func(u int, ok bool, bad string)) error {
	var mu sync.Mutex
	var firstErr error
	_, err := chunked(ctx, cc, conns, 0, len(us), 500, func(p redis.Pipeliner, lo, hi int) {
		cmds := make([]*redis.Cmd, 0, hi-lo)
		for _, u := range us[lo:hi] {
			cmds = append(cmds, homeCmd(ctx, p, sys, u))
		}
		if _, err := p.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			mu.Lock()
			if firstErr == nil {
				firstErr = err
			}
			mu.Unlock()
			return
		}
		for i, c := range cmds {
			ok, bad := homeReply(sys, us[lo+i], c)
			report(us[lo+i], ok, bad)
		}
	})
	if err != nil {
		return err
	}
	return firstErr
}

// redisFanout delivers the post the Redis way: SSCAN the author's
// follower set (one goroutine, 10,000 ids a call) and, on conns
// goroutines, LPUSHX it to each follower's home in pipelines of 1,000,
// then LTRIM each home that took it. It returns the LPUSHX commands sent.
func redisFanout(ctx context.Context, cc *redis.ClusterClient, conns int) (int64, error) {
	chunks := make(chan []string, conns)
	var pushes atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
	}
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := cc.Pipeline()
			for ids := range chunks {
				for lo := 0; lo < len(ids); lo += 1000 {
					part := ids[lo:min(lo+1000, len(ids))]
					cmds := make([]*redis.IntCmd, len(part))
					for i, u := range part {
						cmds[i] = p.LPushX(ctx, "home:"+u, fanoutPost)
					}
					if _, err := p.Exec(ctx); err != nil {
						fail(err)
						continue
					}
					pushes.Add(int64(len(part)))
					trims := 0
					for i, c := range cmds {
						if c.Val() > 0 {
							p.LTrim(ctx, "home:"+part[i], 0, fanoutInboxCap-1)
							trims++
						}
					}
					if trims > 0 {
						if _, err := p.Exec(ctx); err != nil {
							fail(err)
						}
					}
				}
			}
		}()
	}
	var cursor uint64
	key := "followers:{" + strconv.Itoa(fanoutAuthor) + "}"
	for {
		ids, next, err := cc.SScan(ctx, key, cursor, "", 10_000).Result()
		if err != nil {
			fail(err)
			break
		}
		if len(ids) > 0 {
			chunks <- ids
		}
		cursor = next
		if cursor == 0 {
			break
		}
	}
	close(chunks)
	wg.Wait()
	return pushes.Load(), firstErr
}

// markdown renders the fan-out phase.
func (ph *FanoutPhase) markdown(b *strings.Builder, c ShardConfig) {
	fmt.Fprintf(b, "Fan-out: %d shards × %d replicas, durability %s (Redis: appendfsync %s); one author with %d followers over every shard, "+
		"%d of them (%.0f%%, uniform) active; one post. tally: TL.FOLLOW / TL.ACTIVE set-up in write-only pipelines of 1,000 on 16 connections, "+
		"then TL.POST; Redis: SADD of the follower set, an active user's home list created by LPUSH, then the client's SSCAN + LPUSHX + LTRIM fan-out on 16 connections. "+
		"From the post on, %d uniformly drawn active homes are read together every 10 ms until each shows the post: their p50 / p99 / max is the post's reach, "+
		"and deliveries/s is the active homes over that max. Afterwards a sweep reads every active home (pipelines of 500, repeated for the ones still without it) "+
		"and counts those holding the post exactly once.\n\n",
		ph.Shards, c.FanoutReplicas, c.FanoutDurability, redisFsync(c.FanoutDurability), ph.Followers, ph.Active, 100*c.FanoutActive, c.FanoutSample)
	b.WriteString("tally's modes: **pull** is the default configuration, where an author past TL.CONFIG PULLTHRESHOLD (1,000,000 followers) is pulled by its followers' home reads instead of pushed to their inboxes (a post then reaches every home at its commit plus one cross-shard message); **push** raises the threshold past the follower count, so the post is written into every active inbox.\n\n")
	b.WriteString("| system | follows set up (rate) | activations | server RSS after set-up | load before the post | post returned | polled homes showing it: p50 / p99 / max | deliveries/s | server CPU, post to last polled home | sweep of every active home | homes holding the post once |\n")
	b.WriteString("| --- | --- | ---: | ---: | --- | ---: | --- | ---: | ---: | --- | --- |\n")
	for _, r := range ph.Rows {
		name := r.System
		if r.Mode != "" {
			name += ", " + r.Mode
		}
		holding := fmt.Sprintf("%d of %d", r.Holding, r.Active)
		if len(r.Wrong) > 0 {
			holding += fmt.Sprintf(", %d WRONG (e.g. %s)", len(r.Wrong), r.Wrong[0])
		}
		if r.Unfinished {
			holding += " (**sweep gave up**)"
		}
		posted := fmtDur(r.Posted)
		if r.System == "redis" {
			posted += fmt.Sprintf(" (client fan-out, %d LPUSHX)", r.ClientPushes)
		}
		follows := fmt.Sprintf("%s (%.0f/s)", fmtDur(r.Follows), float64(ph.Followers)/r.Follows.Seconds())
		if r.Resent > 0 {
			var kinds []string
			for k, n := range r.ResendErrs {
				kinds = append(kinds, fmt.Sprintf("%d× %q", n, k))
			}
			slices.Sort(kinds)
			follows += fmt.Sprintf(", %d pipelines sent again (%s)", r.Resent, strings.Join(kinds, "; "))
		}
		rate := "—"
		if r.SampleMax > 0 {
			rate = fmt.Sprintf("%.0f", float64(r.Active)/r.SampleMax.Seconds())
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s / %s / %s (%d) | %s | %.1f s | %s, %d sweeps | %s |\n",
			name, follows, fmtDur(r.Activations), fmtMiB(float64(r.RSS)),
			r.Load, posted, fmtDur(r.SampleP50), fmtDur(r.SampleP99), fmtDur(r.SampleMax), r.Sampled, rate, r.SampleCPU.Seconds(),
			fmtDur(r.Every), r.Sweeps, holding)
	}
	b.WriteString("\n")
}

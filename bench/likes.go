package bench

// The likes comparison (issue 10): tally's likes package against Redis as
// the published like service uses it, on one likes workload
// (workload.Likes), side by side in one run.
//
// Redis holds, per item, a set of likers and one of dislikers (SADD/SREM),
// a hash of the two counts (HINCRBY), per user a sorted set of liked items
// by time capped at LikesRedisCap (ZADD, ZREMRANGEBYRANK), and a board per
// business and one per UTC day (ZINCRBY). A transition is one Lua script
// (EVALSHA): it reads the previous state (SISMEMBER) and changes the rest
// only if the state changes, so it is idempotent and atomic like tally's. A
// page of states is one pipelined round trip of two SISMEMBER per item; a
// top 100 is ZREVRANGE WITHSCORES; a likers page is SSCAN COUNT 100.
// Durability pairs as in the counter comparison: appendfsync always with
// SyncAlways, everysec with SyncInterval, no AOF with NoSync. The
// tally-serve targets (likes_serve.go) put tally behind a "tally serve"
// process, reached with the LIKE.* commands over RESP as Redis is.
//
// RunLikes loads the workload's history (timed), runs transitions from
// Clients goroutines for Duration, then pages of 20 states for Duration,
// then top-100 and likers-page reads from one goroutine for Duration/4
// each. Memory (as in the counter comparison: heap and RSS growth, and each
// system's own accounting) and disk are measured after the load, per like
// it stored.

import (
	"context"
	"errors"
	"fmt"
	tallydb "github.com/tallydb/tally"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tallydb/tally/bench/workload"
	"github.com/tallydb/tally/internal/hist"
	"github.com/tallydb/tally/internal/procmem"
	"github.com/tallydb/tally/likes"
	"github.com/tallydb/tally/store"
)

// LikesRedisCap is the length a Redis user list is capped at.
const LikesRedisCap = 1000

// LikesBusiness is the business every target stores.
const LikesBusiness = "video"

// HistLike is one historical like to load.
type HistLike struct {
	Item, User uint64
	Ms         int64
}

// LikesTarget is one system of the likes comparison.
type LikesTarget interface {
	// Load applies likes (as likes, idempotently) and returns once they
	// are readable and as durable as the target's mode makes writes, with
	// the number of likes stored (repeated pairs count once).
	Load(h []HistLike) (int, error)
	// NewClient returns a client for one goroutine.
	NewClient() (LikesClient, error)
	// Memory returns the memory the target uses for its data.
	Memory() (Memory, error)
	// DiskBytes returns the bytes of the target's data on disk.
	DiskBytes() (int64, error)
	Close() error
}

// LikesClient issues one goroutine's operations.
type LikesClient interface {
	// Apply runs one transition at time ms.
	Apply(op workload.LikeOp, ms int64) error
	// States reads user's state on each item (one page).
	States(user uint64, items []uint64) error
	// Top reads the all-time top n.
	Top(n int) error
	// Likers reads the first page of n likers of item.
	Likers(item uint64, n int) error
	Close() error
}

// LikesSpec names a target and how to open it.
type LikesSpec struct {
	Name       string
	Durability Durability
	Mode       string
	Tally      bool
	// Served marks tally reached over RESP through "tally serve" (the
	// tally-serve targets).
	Served bool
	Skip   string
	Open   func(dir string) (LikesTarget, error)
}

// Label is "name (mode)".
func (s LikesSpec) Label() string { return s.Name + " (" + s.Mode + ")" }

// LikesSpecs returns tally's likes in each durability and Redis in each
// matching persistence mode (skipped when redis-server is not installed).
func LikesSpecs() []LikesSpec {
	var specs []LikesSpec
	for _, m := range []struct {
		d    store.Durability
		dur  Durability
		mode string
	}{{store.SyncAlways, DurAlways, "SyncAlways"}, {store.SyncInterval, DurInterval, "SyncInterval 1s"}, {store.NoSync, DurNone, "NoSync"}} {
		specs = append(specs, LikesSpec{Name: "tally", Durability: m.dur, Mode: m.mode, Tally: true,
			Open: func(dir string) (LikesTarget, error) { return openTallyLikes(dir, m.d) }})
	}
	skip := RedisSkip()
	for _, m := range []struct {
		dur   Durability
		mode  string
		aof   bool
		fsync string
	}{{DurAlways, "AOF always", true, "always"}, {DurInterval, "AOF everysec", true, "everysec"}, {DurNone, "no AOF", false, ""}} {
		specs = append(specs, LikesSpec{Name: "redis", Durability: m.dur, Mode: m.mode, Skip: skip,
			Open: func(dir string) (LikesTarget, error) { return openRedisLikes(dir, m.aof, m.fsync) }})
	}
	return specs
}

// LikesRunConfig is one run of the likes comparison.
type LikesRunConfig struct {
	Workload *workload.Likes
	// History is the number of historical likes loaded first.
	History int
	// Clients is the number of closed-loop client goroutines.
	Clients int
	// Duration is the time of each of the transition and page phases (the
	// top and likers phases take a quarter each).
	Duration time.Duration
	// Dir is the parent of the targets' directories (default: the system
	// temp dir).
	Dir string
	// Log, if set, gets progress lines.
	Log io.Writer
	// TransitionsProfile, if set, profiles the transition phase of every
	// tally target (in this process; Redis is another
	// process): startProfile's files, and an execution trace
	// (PREFIX-NAME-MODE.trace; `go tool trace -pprof=sync` or `=sched`
	// read it), PREFIX-NAME-MODE being the prefix of each target.
	TransitionsProfile string
}

// LikesResult is one target's figures.
type LikesResult struct {
	Spec        LikesSpec
	Err         error
	History     int
	Stored      int // distinct likes stored by the load: bytes per like divide by it
	Load        time.Duration
	Transitions uint64
	Pages       uint64
	WriteSecs   float64
	PageSecs    float64
	Write       hist.Histogram
	Page        hist.Histogram
	Top100      hist.Histogram
	Likers      hist.Histogram
	Mem         Memory
	Disk        int64
}

func (c *LikesRunConfig) logf(format string, args ...any) {
	if c.Log != nil {
		fmt.Fprintf(c.Log, format+"\n", args...)
	}
}

// RunLikes runs the likes comparison against one target.
func RunLikes(cfg LikesRunConfig, spec LikesSpec) LikesResult {
	res := LikesResult{Spec: spec, History: cfg.History}
	if spec.Skip != "" {
		return res
	}
	dir, err := os.MkdirTemp(cfg.Dir, "likesbench-")
	if err != nil {
		res.Err = err
		return res
	}
	defer os.RemoveAll(dir)
	t, err := spec.Open(dir)
	if err != nil {
		res.Err = err
		return res
	}
	defer t.Close()
	res.Err = runLikes(&cfg, t, &res)
	return res
}

func runLikes(cfg *LikesRunConfig, t LikesTarget, res *LikesResult) error {
	w := cfg.Workload
	var h []HistLike
	w.History(cfg.History, func(item, user uint64, ms int64) { h = append(h, HistLike{item, user, ms}) })
	cfg.logf("%s: loading %d likes", res.Spec.Label(), len(h))
	start := time.Now()
	stored, err := t.Load(h)
	if err != nil {
		return fmt.Errorf("load: %w", err)
	}
	res.Load, res.Stored = time.Since(start), stored
	h = nil
	// Memory and disk of the loaded likes, before the traffic adds more.
	if res.Mem, err = t.Memory(); err != nil {
		return err
	}
	if res.Disk, err = t.DiskBytes(); err != nil {
		return err
	}
	clients := make([]LikesClient, cfg.Clients)
	for i := range clients {
		c, err := t.NewClient()
		if err != nil {
			return err
		}
		defer c.Close()
		clients[i] = c
	}
	now := func() int64 { return time.Now().UnixMilli() }
	cfg.logf("%s: transitions for %v", res.Spec.Label(), cfg.Duration)
	var stop func() error
	if p := cfg.TransitionsProfile; p != "" && res.Spec.Tally && !res.Spec.Served {
		if stop, err = startTracedProfile(p + "-" + res.Spec.Name + "-" + strings.ReplaceAll(res.Spec.Mode, " ", "")); err != nil {
			return fmt.Errorf("profile: %w", err)
		}
	}
	n, secs, err := drive(clients, cfg.Duration, &res.Write, func(c LikesClient, s *workload.LikeStream) error {
		return c.Apply(s.Next(), now())
	}, w)
	if stop != nil {
		err = errors.Join(err, stop())
	}
	if err != nil {
		return fmt.Errorf("transitions: %w", err)
	}
	res.Transitions, res.WriteSecs = n, secs
	cfg.logf("%s: pages of 20 states for %v", res.Spec.Label(), cfg.Duration)
	n, secs, err = drive(clients, cfg.Duration, &res.Page, func(c LikesClient, s *workload.LikeStream) error {
		var items [20]uint64
		for i := range items {
			items[i] = w.Item(s.Rank())
		}
		return c.States(w.User(s.UserIndex()), items[:])
	}, w)
	if err != nil {
		return fmt.Errorf("states: %w", err)
	}
	res.Pages, res.PageSecs = n, secs
	if _, _, err = drive(clients[:1], cfg.Duration/4, &res.Top100, func(c LikesClient, _ *workload.LikeStream) error { return c.Top(100) }, w); err != nil {
		return fmt.Errorf("top: %w", err)
	}
	popular := w.Item(0)
	if _, _, err = drive(clients[:1], cfg.Duration/4, &res.Likers, func(c LikesClient, _ *workload.LikeStream) error {
		return c.Likers(popular, 100)
	}, w); err != nil {
		return fmt.Errorf("likers: %w", err)
	}
	return nil
}

// drive runs op on every client for d, closed-loop, and returns the
// operations done and the seconds taken; latencies go to h.
func drive(clients []LikesClient, d time.Duration, h *hist.Histogram, op func(LikesClient, *workload.LikeStream) error, w *workload.Likes) (uint64, float64, error) {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		stop  atomic.Bool
		total uint64
		first error
	)
	start := time.Now()
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := w.Stream(1000 + i)
			var own hist.Histogram
			var n uint64
			var err error
			for err == nil && !stop.Load() {
				t0 := time.Now()
				err = op(c, s)
				own.Record(time.Since(t0))
				n++
			}
			mu.Lock()
			h.Merge(&own)
			total += n
			if err != nil && first == nil {
				first = err
			}
			mu.Unlock()
		}()
	}
	time.Sleep(d)
	stop.Store(true)
	wg.Wait()
	return total, max(time.Since(start).Seconds(), 1e-9), first
}

// --- tally ---

// tallyLikes is package likes on a store of its own, with the default
// options but durability.
type tallyLikes struct {
	all  *tallydb.DB
	db   *store.DB
	l    *likes.Likes
	base procmem.Mem
}

// openTallyLikes opens the database through tally.Open with likes only:
// the figures are likes', not those of packages the benchmark never uses.
func openTallyLikes(dir string, d store.Durability) (*tallyLikes, error) {
	t := &tallyLikes{base: procmem.Measure()}
	all, err := tallydb.Open(dir, &tallydb.Options{Store: &store.Options{Durability: d}, Packages: []string{"likes"}})
	if err != nil {
		return nil, err
	}
	t.all, t.db, t.l = all, all.Store(), all.Likes()
	if err := t.l.AddBusiness(LikesBusiness, likes.BusinessOptions{}); err != nil {
		all.Close()
		return nil, err
	}
	return t, nil
}

// likesCacheBytes sums likes' stats named *_cache_bytes: the memory its
// caches (the user ordinal cache) hold beside the store's.
func likesCacheBytes(l *likes.Likes) (int64, error) {
	var n int64
	for _, s := range l.Stats() {
		if strings.HasSuffix(s.Key, "_cache_bytes") {
			v, err := strconv.ParseInt(s.Value, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("likes stat %s: %w", s.Key, err)
			}
			n += v
		}
	}
	return n, nil
}

// Load is likes.Load: big batches, counts loaded without the log.
func (t *tallyLikes) Load(h []HistLike) (int, error) {
	in := make([]likes.LoadLike, len(h))
	for i, x := range h {
		in[i] = likes.LoadLike{Item: x.Item, User: x.User, Ms: x.Ms}
	}
	st, err := t.l.Load(context.Background(), LikesBusiness, in, nil)
	return st.Added, err
}

type tallyLikesClient struct {
	l      *likes.Likes
	states []likes.State
}

func (t *tallyLikes) NewClient() (LikesClient, error) { return &tallyLikesClient{l: t.l}, nil }

func (c *tallyLikesClient) Apply(op workload.LikeOp, _ int64) error {
	var err error
	switch op.Kind {
	case workload.Like:
		_, err = c.l.Like(LikesBusiness, op.Item, op.User, 0)
	case workload.Unlike:
		_, err = c.l.Unlike(LikesBusiness, op.Item, op.User)
	case workload.Dislike:
		_, err = c.l.Dislike(LikesBusiness, op.Item, op.User)
	case workload.Undislike:
		_, err = c.l.Undislike(LikesBusiness, op.Item, op.User)
	}
	return err
}

func (c *tallyLikesClient) States(user uint64, items []uint64) (err error) {
	c.states, err = c.l.States(LikesBusiness, user, items, c.states)
	return err
}

func (c *tallyLikesClient) Top(n int) error {
	_, err := c.l.Top(LikesBusiness, n)
	return err
}

func (c *tallyLikesClient) Likers(item uint64, n int) error {
	_, err := c.l.Likers(LikesBusiness, item, "", n)
	return err
}

func (c *tallyLikesClient) Close() error { return nil }

// Memory: Own is the store's accounting (counter tables, Pebble's block
// cache, memtables and file cache) and likes' own caches (every stat named
// *_cache_bytes, such as the user ordinal cache); Heap and RSS the
// process's growth since before Open.
func (t *tallyLikes) Memory() (Memory, error) {
	st := t.db.Stats()
	m := Memory{Own: st.BlockCache.Bytes + st.PebbleMemBytes}
	for _, c := range st.Counters {
		m.Own += c.MemBytes
	}
	caches, err := likesCacheBytes(t.l)
	if err != nil {
		return Memory{}, err
	}
	m.Own += caches
	grown := procmem.Measure().Sub(t.base)
	m.Heap, m.RSS = grown.Heap, grown.RSS
	if procmem.Cgo {
		m.Heap += st.PebbleManualBytes
	}
	return m, nil
}

// DiskBytes is Pebble's data files after a flush and a full compaction
// (the settled size, as an RDB or a rewritten AOF is for Redis).
func (t *tallyLikes) DiskBytes() (int64, error) {
	if err := t.db.CompactDisk(context.Background()); err != nil {
		return 0, err
	}
	return int64(t.db.Stats().TableBytes), nil
}

func (t *tallyLikes) Close() error { return t.all.Close() }

// --- redis ---

// likeScripts are the Lua transitions. KEYS: likers set, dislikers set,
// counts hash, user list, board, day board. ARGV: user, item, time ms,
// list cap. Each returns 1 if the state changed.
var likeScripts = map[workload.LikeKind]string{
	workload.Like: `
if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 1 then return 0 end
if redis.call('SREM', KEYS[2], ARGV[1]) == 1 then redis.call('HINCRBY', KEYS[3], 'd', -1) end
redis.call('SADD', KEYS[1], ARGV[1])
redis.call('HINCRBY', KEYS[3], 'l', 1)
redis.call('ZADD', KEYS[4], ARGV[3], ARGV[2])
redis.call('ZREMRANGEBYRANK', KEYS[4], 0, -tonumber(ARGV[4]) - 1)
redis.call('ZINCRBY', KEYS[5], 1, ARGV[2])
redis.call('ZINCRBY', KEYS[6], 1, ARGV[2])
return 1`,
	workload.Unlike: `
if redis.call('SREM', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('HINCRBY', KEYS[3], 'l', -1)
redis.call('ZREM', KEYS[4], ARGV[2])
redis.call('ZINCRBY', KEYS[5], -1, ARGV[2])
redis.call('ZINCRBY', KEYS[6], -1, ARGV[2])
return 1`,
	workload.Dislike: `
if redis.call('SADD', KEYS[2], ARGV[1]) == 0 then return 0 end
redis.call('HINCRBY', KEYS[3], 'd', 1)
if redis.call('SREM', KEYS[1], ARGV[1]) == 1 then
  redis.call('HINCRBY', KEYS[3], 'l', -1)
  redis.call('ZREM', KEYS[4], ARGV[2])
  redis.call('ZINCRBY', KEYS[5], -1, ARGV[2])
  redis.call('ZINCRBY', KEYS[6], -1, ARGV[2])
end
return 1`,
	workload.Undislike: `
if redis.call('SREM', KEYS[2], ARGV[1]) == 0 then return 0 end
redis.call('HINCRBY', KEYS[3], 'd', -1)
return 1`,
}

type redisLikes struct {
	t   *redisTarget
	sha map[workload.LikeKind]string
}

func openRedisLikes(dir string, aof bool, fsync string) (*redisLikes, error) {
	t := &redisTarget{dir: dir, aof: aof, fsync: fsync}
	if err := t.start(); err != nil {
		return nil, err
	}
	r := &redisLikes{t: t, sha: map[workload.LikeKind]string{}}
	c, err := t.conn()
	if err != nil {
		t.Close()
		return nil, err
	}
	defer c.Close()
	if t.baseBytes, err = infoInt(c, "memory", "used_memory"); err == nil {
		t.baseRSS, err = infoInt(c, "memory", "used_memory_rss")
	}
	for kind, src := range likeScripts {
		if err != nil {
			break
		}
		r.sha[kind], err = c.do("SCRIPT", "LOAD", src)
	}
	if err != nil {
		t.Close()
		return nil, err
	}
	return r, nil
}

type redisLikesClient struct {
	r   *redisLikes
	c   *respConn
	buf []byte
}

func (r *redisLikes) NewClient() (LikesClient, error) {
	c, err := r.t.conn()
	if err != nil {
		return nil, err
	}
	return &redisLikesClient{r: r, c: c}, nil
}

// appendOp queues one transition's EVALSHA.
func (c *redisLikesClient) appendOp(kind workload.LikeKind, item, user uint64, ms int64) {
	rc := c.c
	rc.begin(3 + 6 + 4)
	rc.argString("EVALSHA")
	rc.argString(c.r.sha[kind])
	rc.argString("6")
	it := strconv.FormatUint(item, 10)
	u := strconv.FormatUint(user, 10)
	rc.argString("s:" + it)
	rc.argString("d:" + it)
	rc.argString("c:" + it)
	rc.argString("u:" + u)
	rc.argString("b")
	rc.argString("b:" + strconv.FormatInt(ms/86_400_000, 10))
	rc.argString(u)
	rc.argString(it)
	rc.argInt(ms)
	rc.argInt(LikesRedisCap)
}

func (c *redisLikesClient) Apply(op workload.LikeOp, ms int64) error {
	c.appendOp(op.Kind, op.Item, op.User, ms)
	if err := c.c.flush(); err != nil {
		return err
	}
	return c.c.readOK()
}

// States sends two SISMEMBER per item in one pipeline.
func (c *redisLikesClient) States(user uint64, items []uint64) error {
	u := strconv.FormatUint(user, 10)
	for _, item := range items {
		it := strconv.FormatUint(item, 10)
		c.c.cmd("SISMEMBER", "s:"+it, u)
		c.c.cmd("SISMEMBER", "d:"+it, u)
	}
	if err := c.c.flush(); err != nil {
		return err
	}
	return c.c.drain()
}

func (c *redisLikesClient) Top(n int) error {
	c.c.cmd("ZREVRANGE", "b", "0", strconv.Itoa(n-1), "WITHSCORES")
	if err := c.c.flush(); err != nil {
		return err
	}
	return c.c.readOK()
}

func (c *redisLikesClient) Likers(item uint64, n int) error {
	c.c.cmd("SSCAN", "s:"+strconv.FormatUint(item, 10), "0", "COUNT", strconv.Itoa(n))
	if err := c.c.flush(); err != nil {
		return err
	}
	c.c.pending--
	// Reply: [cursor, [members...]].
	kind, n2, _, err := c.c.reply()
	if err != nil || kind != '*' || n2 != 2 {
		return errors.Join(err, errRESPProtocol)
	}
	if _, _, _, err := c.c.reply(); err != nil {
		return err
	}
	_, m, _, err := c.c.reply()
	for ; err == nil && m > 0; m-- {
		_, _, _, err = c.c.reply()
	}
	return err
}

func (c *redisLikesClient) Close() error { return c.c.Close() }

// Load pipelines the like script, 1,000 commands a round trip; with AOF
// it then rewrites the AOF, as the counter comparison does.
func (r *redisLikes) Load(h []HistLike) (int, error) {
	cl, err := r.NewClient()
	if err != nil {
		return 0, err
	}
	c := cl.(*redisLikesClient)
	defer c.Close()
	stored := 0
	var one []uint64
	for i, x := range h {
		c.appendOp(workload.Like, x.Item, x.User, x.Ms)
		if c.c.pending >= 1000 || i == len(h)-1 {
			if err := c.c.flush(); err != nil {
				return 0, err
			}
			for c.c.pending > 0 {
				if one, err = c.c.readInts(one[:0]); err != nil {
					return 0, err
				}
				stored += int(one[0])
			}
		}
	}
	if r.t.aof {
		return stored, r.t.rewriteAOF(c.c)
	}
	return stored, nil
}

func (r *redisLikes) Memory() (Memory, error) { return r.t.Memory() }

func (r *redisLikes) DiskBytes() (int64, error) {
	if r.t.aof {
		c, err := r.t.conn()
		if err != nil {
			return 0, err
		}
		err = r.t.rewriteAOF(c)
		c.Close()
		if err != nil {
			return 0, err
		}
	}
	return r.t.DiskBytes()
}

func (r *redisLikes) Close() error { return r.t.Close() }

// LikesTable renders likes results as one markdown table. Peers carry
// tally's ratio "(×r)", r = tally ÷ peer, against tally of the same
// durability: above 1 is better for throughput, below 1 for bytes and
// latencies. Memory and disk are measured right after the load (disk
// settled: a full compaction, an AOF rewrite or an RDB save) and divided by
// the distinct likes it stored. The ratios are against the in-process tally
// target; when tally-serve rows (Spec.Served) are present a second table
// follows with them and the peers, the peers' ratios against tally-serve.
func LikesTable(results []LikesResult) string {
	return withServedTable(results, func(r LikesResult) (bool, bool, bool) {
		return r.Spec.Tally, r.Spec.Served, r.Spec.Skip != ""
	}, likesTable)
}

func likesTable(results []LikesResult, base func(LikesResult) bool) string {
	tally := map[Durability]*LikesResult{}
	for i := range results {
		if r := &results[i]; base(*r) && r.Err == nil && r.Spec.Skip == "" {
			tally[r.Spec.Durability] = r
		}
	}
	var b strings.Builder
	b.WriteString("| target | mode | load likes/s | likes/s | like p99 | pages/s (20 states) | page p99 | top-100 p50 | top-100 p99 | likers page p99 | heap B/like | rss B/like | own B/like | disk B/like |\n")
	b.WriteString("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for i := range results {
		r := &results[i]
		fmt.Fprintf(&b, "| %s | %s | ", r.Spec.Name, r.Spec.Mode)
		switch {
		case r.Spec.Skip != "":
			fmt.Fprintf(&b, "%s |%s\n", r.Spec.Skip, strings.Repeat(" |", 11))
			continue
		case r.Err != nil:
			fmt.Fprintf(&b, "error: %s |%s\n", strings.ReplaceAll(r.Err.Error(), "|", "/"), strings.Repeat(" |", 11))
			continue
		}
		var t *LikesResult
		if !r.Spec.Tally {
			t = tally[r.Spec.Durability]
		}
		ratio := func(s string, tv, pv float64) string {
			if t == nil || pv <= 0 || tv < 0 {
				return s
			}
			return fmt.Sprintf("%s (×%s)", s, fmtRatio(tv/pv))
		}
		per := func(x *LikesResult, n int64) float64 { return float64(n) / float64(max(x.Stored, 1)) }
		rate := func(x *LikesResult, n uint64, secs float64) float64 { return float64(n) / secs }
		loadRate := func(x *LikesResult) float64 { return float64(x.History) / max(x.Load.Seconds(), 1e-9) }
		cols := []string{
			ratio(fmtRate(loadRate(r)), safe(t, loadRate), loadRate(r)),
			ratio(fmtRate(rate(r, r.Transitions, r.WriteSecs)), safe(t, func(x *LikesResult) float64 { return rate(x, x.Transitions, x.WriteSecs) }), rate(r, r.Transitions, r.WriteSecs)),
			ratio(fmtDur(r.Write.Quantile(0.99)), durF(t, func(x *LikesResult) time.Duration { return x.Write.Quantile(0.99) }), r.Write.Quantile(0.99).Seconds()),
			ratio(fmtRate(rate(r, r.Pages, r.PageSecs)), safe(t, func(x *LikesResult) float64 { return rate(x, x.Pages, x.PageSecs) }), rate(r, r.Pages, r.PageSecs)),
			ratio(fmtDur(r.Page.Quantile(0.99)), durF(t, func(x *LikesResult) time.Duration { return x.Page.Quantile(0.99) }), r.Page.Quantile(0.99).Seconds()),
			ratio(fmtDur(r.Top100.Quantile(0.5)), durF(t, func(x *LikesResult) time.Duration { return x.Top100.Quantile(0.5) }), r.Top100.Quantile(0.5).Seconds()),
			ratio(fmtDur(r.Top100.Quantile(0.99)), durF(t, func(x *LikesResult) time.Duration { return x.Top100.Quantile(0.99) }), r.Top100.Quantile(0.99).Seconds()),
			ratio(fmtDur(r.Likers.Quantile(0.99)), durF(t, func(x *LikesResult) time.Duration { return x.Likers.Quantile(0.99) }), r.Likers.Quantile(0.99).Seconds()),
			ratio(fmtBytes(per(r, r.Mem.Heap)), safe(t, func(x *LikesResult) float64 { return per(x, x.Mem.Heap) }), per(r, r.Mem.Heap)),
			ratio(fmtBytes(per(r, r.Mem.RSS)), safe(t, func(x *LikesResult) float64 { return per(x, x.Mem.RSS) }), per(r, r.Mem.RSS)),
			fmtBytes(per(r, r.Mem.Own)),
			ratio(fmtBytes(per(r, r.Disk)), safe(t, func(x *LikesResult) float64 { return per(x, x.Disk) }), per(r, r.Disk)),
		}
		b.WriteString(strings.Join(cols, " | "))
		b.WriteString(" |\n")
	}
	return b.String()
}

func safe(t *LikesResult, f func(*LikesResult) float64) float64 {
	if t == nil {
		return -1
	}
	return f(t)
}

func durF(t *LikesResult, f func(*LikesResult) time.Duration) float64 {
	if t == nil {
		return -1
	}
	return f(t).Seconds()
}

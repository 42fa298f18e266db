package timeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/RoaringBitmap/roaring/v2/roaring64"

	"github.com/tallydb/tally/store"
)

// UsersCounter is the name of the counter holding followers, followees and
// posts per user id (columns "followers", "followees", "posts"), plus the
// timeline's own per-user columns "ord" (the user's dense ordinal, 0 while
// none is allocated) and "read" (Unix seconds of the last home read while
// the user's inbox is live, 0 otherwise). A profile page reads all of them
// in one Counter.Get.
const UsersCounter = "users"

// Columns of UsersCounter, in order.
const (
	ColFollowers = "followers"
	ColFollowees = "followees"
	ColPosts     = "posts"
	ColOrd       = "ord"
	ColRead      = "read"
)

// Column indexes in a row of UsersCounter.
const (
	colFollowers = iota
	colFollowees
	colPosts
	colOrd
	colRead
	numCols
)

var userColumns = [numCols]struct {
	name string
	opts store.ColumnOptions
}{
	{ColFollowers, store.ColumnOptions{HintBits: 16, MaxBits: 32}},
	{ColFollowees, store.ColumnOptions{HintBits: 16, MaxBits: 32}},
	{ColPosts, store.ColumnOptions{HintBits: 16, MaxBits: 32}},
	{ColOrd, store.ColumnOptions{HintBits: 32, MaxBits: 32}},
	{ColRead, store.ColumnOptions{HintBits: 32, MaxBits: 32}},
}

// usersRangeBits is the range width of UsersCounter: user ids below 2^48
// share one hot range, and snowflake-style ids (milliseconds << 22) change
// range every ~18 hours of id time, so ranges hold many rows each (a hot
// range costs ~20 KB fixed, docs/ARCHITECTURE.md).
const usersRangeBits = 48

// Limits of ids, pages and the graph.
const (
	// MaxID is the largest user or post id. Ids are 1..MaxID (0 is
	// "none"); MaxID is the largest value a store.TopList entry carries.
	MaxID = store.MaxTopValue
	// DefaultLimit is the page size when a limit of 0 is given.
	DefaultLimit = 20
	// MaxLimit is the largest page.
	MaxLimit = 1000
	// MaxFollowees is the most accounts one user may follow (Twitter's and
	// Mastodon's limits are in the thousands; this bounds the followee
	// list, one value read on every home page, to a few hundred KB).
	MaxFollowees = 100_000
	// MaxInboxCap is the largest InboxCap: a rebuild merges InboxCap+1
	// entries in one operand, which must fit tl_inbox's value limit.
	MaxInboxCap = 100_000
	// maxOrd is the largest user ordinal.
	maxOrd = 1<<32 - 1
)

// Errors of package timeline. Test for them with errors.Is; returned errors
// usually wrap one with detail. Store errors (store.ErrClosed, ...) pass
// through unchanged.
var (
	// ErrBadID is returned for a user or post id of 0 or above MaxID.
	ErrBadID = errors.New("timeline: bad id")
	// ErrSelfFollow is returned when a user would follow themselves.
	ErrSelfFollow = errors.New("timeline: a user cannot follow themselves")
	// ErrBadCursor is returned for a cursor tally did not issue for this
	// page: not decodable, damaged (checksum), of another version, of
	// another kind of page, or issued for another user.
	ErrBadCursor = errors.New("timeline: bad cursor")
	// ErrBadLimit is returned for a negative page limit or one above
	// MaxLimit.
	ErrBadLimit = errors.New("timeline: bad page limit")
	// ErrPostTaken is returned when publishing or unpublishing a post id
	// that another author published, now or before an unpublish (post ids
	// are unique across authors, for ever).
	ErrPostTaken = errors.New("timeline: post id belongs to another author")
	// ErrTooManyFollowees is returned when a follow would exceed
	// MaxFollowees.
	ErrTooManyFollowees = errors.New("timeline: too many followees")
	// ErrInvalidOption is returned for options or a configuration outside
	// their allowed range.
	ErrInvalidOption = errors.New("timeline: invalid option")
	// ErrFull is returned when every user ordinal (2^32, less one per
	// 2^16 for the chunk sentinels) is taken.
	ErrFull = errors.New("timeline: no user ordinal left")
	// ErrClosed is returned by operations on a closed Timeline.
	ErrClosed = errors.New("timeline: closed")
)

// Config is the timeline configuration persisted with the store (family
// tl_config) and shown by tally stats. In Options and SetConfig a zero
// field means "keep the persisted value (or the default)".
type Config struct {
	// InboxCap is the number of entries an inbox keeps (newer ones push
	// older ones below its floor, where reads pull from the outboxes). The
	// default is 800, Mastodon's MAX_ITEMS and Twitter's home cap; at
	// most MaxInboxCap.
	InboxCap int
	// ActiveWindow is how long after their last home read a user's inbox
	// is kept and pushed to; after it the expiry job drops the inbox and
	// the next read rebuilds it by pull. A whole number of seconds, at
	// least one minute. The default is 7 days (Mastodon's USER_ACTIVE_DAYS).
	ActiveWindow time.Duration
	// PullThreshold is the follower count at which an author stops being
	// pushed: their posts are merged into readers' pages at read time. An
	// author who crosses it stays pulled (see the package doc). The
	// default is 1,000,000.
	PullThreshold uint64
	// ChunkSize is the number of inboxes one fan-out chunk writes (one
	// batch, one job progress record), and the users one expiry chunk
	// visits. The default is 1000; at most 1,000,000.
	ChunkSize int
}

// Defaults of Config.
const (
	DefaultInboxCap      = 800
	DefaultActiveWindow  = 7 * 24 * time.Hour
	DefaultPullThreshold = 1_000_000
	DefaultChunkSize     = 1000
	maxChunkSize         = 1_000_000
	maxActiveWindow      = 100 * 365 * 24 * time.Hour
)

// withDefaults fills zero fields from base.
func (c Config) withDefaults(base Config) Config {
	if c.InboxCap == 0 {
		c.InboxCap = base.InboxCap
	}
	if c.ActiveWindow == 0 {
		c.ActiveWindow = base.ActiveWindow
	}
	if c.PullThreshold == 0 {
		c.PullThreshold = base.PullThreshold
	}
	if c.ChunkSize == 0 {
		c.ChunkSize = base.ChunkSize
	}
	return c
}

// DefaultConfig returns the default configuration.
func DefaultConfig() Config {
	return Config{InboxCap: DefaultInboxCap, ActiveWindow: DefaultActiveWindow,
		PullThreshold: DefaultPullThreshold, ChunkSize: DefaultChunkSize}
}

// Validate reports every problem with c in one error wrapping
// ErrInvalidOption. Zero fields stand for "keep" and are valid.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidOption}, args...)...))
	}
	if c.InboxCap < 0 || c.InboxCap > MaxInboxCap {
		bad("inbox cap %d (want 1..%d)", c.InboxCap, MaxInboxCap)
	}
	if c.ActiveWindow != 0 && (c.ActiveWindow < time.Minute || c.ActiveWindow > maxActiveWindow || c.ActiveWindow%time.Second != 0) {
		bad("active window %v (want whole seconds from 1m to 100 years)", c.ActiveWindow)
	}
	if c.ChunkSize < 0 || c.ChunkSize > maxChunkSize {
		bad("chunk size %d (want 1..%d)", c.ChunkSize, maxChunkSize)
	}
	return errors.Join(errs...)
}

// Options configure a Timeline. A nil *Options means defaults.
type Options struct {
	// Config overrides the persisted configuration: its non-zero fields
	// are validated and persisted by New. The default changes nothing.
	Config Config
	// Now returns the current time, for activity and expiry. The default
	// is time.Now.
	Now func() time.Time
	// ExpireInterval is how often New's background goroutine enqueues the
	// expiry job (coalesced: one at a time). Negative disables it (Expire
	// still works). The default is 1 hour.
	ExpireInterval time.Duration
	// InlineFanout is the most inboxes a publish delivers to in its own
	// batch, with no fan-out job (see the package doc, "Small fan-outs"):
	// a post whose author has at most InlineFanout followers in the push
	// set is in their inboxes when Publish returns. Negative disables it
	// (every fan-out is a job, as before issue 18). At most
	// MaxInlineFanout. The default is DefaultInlineFanout.
	InlineFanout int
	// SharedFanout is the most followers an author may have for the
	// fan-outs of their posts that are not delivered inline to share one
	// job (see "Small fan-outs"); an author with more gets a fan-out job
	// per post. Negative disables sharing. At most MaxSharedFanout. The
	// default is DefaultSharedFanout.
	SharedFanout int
	// FolloweeCache is the most followee-list ids page reads keep in
	// memory (8 bytes each), so a page does not read the reader's
	// followee list from the store (see fcache.go). Negative disables
	// the cache. The default is DefaultFolloweeCache.
	FolloweeCache int
	// FollowerCache is the most follower ordinals (4 bytes each) kept in
	// memory for the authors with at most 2048 followers, so a small
	// fan-out does not read its author's follower chunks from the store
	// (see follower_cache.go). Negative disables the cache. The default
	// is DefaultFollowerCache.
	FollowerCache int
	// Remote reaches the users whose data lives on other shards of a
	// sharded cluster (remote.go); nil (the default) is one shard: every
	// user is local and nothing is ever sent.
	Remote Remote
}

// Defaults and limits of Options.InlineFanout.
const (
	DefaultInlineFanout = 64
	MaxInlineFanout     = 4096
)

// lockStripes is the number of stripes of the per-user and per-author
// locks.
const lockStripes = 1024

// Timeline is the timeline system on one store: the follow graph, outboxes,
// inboxes, fan-out, expiry and pages. It is safe for concurrent use.
//
// Lock order: shared.run (a shared fan-out job's whole run) before
// graphMu (read side for every mutation, write side for bulk loads) before
// userMu stripes before authorMu stripes before postMu stripes before
// pushGate before shared.gate before allocMu, pulledMu, push.mu,
// removed.mu, pending.mu and shared.mu (leaves, never held across another
// lock's acquisition). A path that holds several stripes of one array
// takes them in ascending stripe order (stripesOf). Readers of pages take
// none of them unless they must rebuild an inbox or record activity.
type Timeline struct {
	db    *store.DB
	users *store.Counter
	fam   families
	now   func() time.Time

	cfg atomic.Pointer[Config]

	obsMu     sync.RWMutex
	observers []FollowObserver
	named     []string // names of the observers added by AddNamedObserver
	required  []string // observer names the store requires (observers.go)

	graphMu  sync.RWMutex
	userMu   [lockStripes]sync.Mutex
	authorMu [lockStripes]sync.RWMutex
	// postMu serializes the publishers and unpublishers of a post id
	// (whichever author they name), so a post's ownership check commits
	// with the write it allows.
	postMu [lockStripes]sync.Mutex
	// postHigh[s] is at least every post id of stripe s ever published
	// (now, or before an unpublish), guarded by postMu[s] (and reloaded by
	// loadState). A publish of a post above it needs no read of tl_posts
	// to know the id is free: a publish of the same id committed earlier
	// would have raised it under the same lock. Post ids are time-ordered,
	// so nearly every publish is above it (the read cost 5 µs of a
	// publish's 40 µs of CPU, bench/RESULTS.md "issue 18 item 5").
	postHigh [lockStripes]uint64

	allocMu sync.Mutex
	nextOrd uint32 // guarded by allocMu

	pulledMu sync.Mutex               // serializes changes of pulled
	pulled   atomic.Pointer[[]uint64] // sorted ids of pulled authors

	// push mirrors tl_active: the push set (users whose inbox fan-outs
	// write). Fan-outs intersect it with an author's followers in memory;
	// writers update it after the commit that changes tl_active (see
	// activate for why that order is safe).
	push struct {
		sync.RWMutex
		bm *roaring.Bitmap
	}
	// pushGate orders inline deliveries against activations: a publish
	// that delivers in its own batch holds it shared from its read of the
	// push set to its commit, and activate adds users to the push set
	// under it exclusively, so an activation reads its followees'
	// outboxes either after the post committed or after the publish saw
	// the user in the push set (see deliverInline).
	pushGate sync.RWMutex
	// inlineMax is Options.InlineFanout (0: disabled).
	inlineMax int
	// sharedMax is Options.SharedFanout (0: disabled).
	sharedMax uint64
	// shared is the shared fan-out job's state (shared.go): gate orders
	// the publishers relying on a queued job before its start; job is
	// that job, queued and not started, 0 if none.
	shared struct {
		gate sync.RWMutex
		// run serializes the shared jobs' runs.
		run sync.Mutex
		mu  sync.Mutex
		job store.JobID
		// low is at most the post id of every marker no job has taken
		// yet (runShared seeks to it instead of scanning the deleted
		// markers of the jobs before).
		low uint64
	}
	// removed mirrors tl_removed: the ids of unpublished posts. Readers
	// drop inbox entries of these posts (see the package doc, "Removal").
	removed struct {
		sync.RWMutex
		bm *roaring64.Bitmap
	}
	// pending mirrors tl_pending: users with follows whose backfill has
	// not reached their inbox, and the followees concerned; readers pull
	// those followees' outboxes.
	pending struct {
		sync.RWMutex
		m map[uint32]map[uint64]struct{}
	}
	// pairs mirrors tl_mute and tl_hide (mute.go); setPairs holds it
	// exclusively across its commit, pages read it shared.
	pairs struct {
		sync.RWMutex
		s pairSets
	}
	// reposts mirrors tl_reposts (repost.go), for de-duplication on read.
	reposts repostIndex
	// remote is Options.Remote: nil on one shard (remote.go).
	remote Remote
	// fcache keeps followee lists for page reads (fcache.go).
	fcache followeeCache
	// folCache keeps small authors' follower ordinals for fan-outs
	// (follower_cache.go).
	folCache followerCache
	// lastGenID is the last post id newPostID generated.
	lastGenID atomic.Uint64
	stats     struct {
		rebuilds, rebuildNanos, deliveries, pages, expired atomic.Int64
		pulls, inboxEntries                                atomic.Int64
	}

	// testHook, if set, runs after each fan-out chunk commits (tests cut a
	// fan-out there). Set only while no job runs.
	testHook func()
	// testSharedCommit, if set, runs before a shared job's chunk commits
	// (tests line two jobs up there).
	testSharedCommit func()
	// testReload, if set, runs before a reopen's reload of the mirrors;
	// an error fails the reload in its place, the mirrors left as they
	// were (tests fail a reload with it). Set before the store fails,
	// never changed after.
	testReload func() error
	// testFcacheMiss, if set, runs when a page's followee-list read missed
	// the cache and read the store, before it inserts the list (tests
	// commit a follow there).
	testFcacheMiss func()
	// testFolCacheMiss, if set, runs when a fan-out's follower read
	// missed the follower cache, between its read and its insert (tests).
	testFolCacheMiss func()

	closed   atomic.Bool
	stop     chan struct{}
	bg       sync.WaitGroup
	closeErr error

	unregisterReopen func() // the store.ReopenHook (reopen.go)
}

// FollowObserver is told of every follow-graph change inside the batch that
// makes it, so state that must agree with the graph (unread's feed
// snapshots) commits atomically with it. It sees the visible pairs only
// (VisibleFollowees): a mute or hide of a followed pair is an unfollow for
// it, an unmute or unhide a follow.
type FollowObserver interface {
	// Followed: user now follows followee (a new edge, or a re-follow),
	// whose post count is posts as of this batch's commit.
	Followed(b *store.Batch, user, followee, posts uint64) error
	// Unfollowed: user no longer follows followee.
	Unfollowed(b *store.Batch, user, followee uint64) error
}

// AddObserver registers o; call it before any write (unread.New does).
// Observers are called in registration order; an observer's error aborts
// the change (nothing is committed) and is returned to the caller.
func (t *Timeline) AddObserver(o FollowObserver) {
	t.obsMu.Lock()
	t.observers = append(t.observers, o)
	t.obsMu.Unlock()
}

// observersNow returns the observers to call for a follow-graph change;
// while a required observer is missing, the first of them refuses every
// change (observers.go).
func (t *Timeline) observersNow() []FollowObserver {
	t.obsMu.RLock()
	defer t.obsMu.RUnlock()
	if missing := t.missingObserversLocked(); missing != nil {
		return append([]FollowObserver{refusingObserver{missing}}, t.observers...)
	}
	return t.observers
}

// New opens the timeline system on an open store: it creates UsersCounter
// and its columns if missing (idempotent), registers the package's families
// (unless the caller declared them in store.Options.Families) and job
// handlers, loads the persisted configuration (persisting opts.Config's
// non-zero fields) and the in-memory indexes (pulled authors, pending
// backfills, fan-outs in flight), and starts the expiry ticker. Close stops
// it; closing the store is the caller's business.
func New(db *store.DB, opts *Options) (*Timeline, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if err := o.Config.Validate(); err != nil {
		return nil, err
	}
	if o.InlineFanout > MaxInlineFanout {
		return nil, fmt.Errorf("%w: inline fan-out %d (want at most %d)", ErrInvalidOption, o.InlineFanout, MaxInlineFanout)
	}
	if o.InlineFanout == 0 {
		o.InlineFanout = DefaultInlineFanout
	}
	if o.SharedFanout > MaxSharedFanout {
		return nil, fmt.Errorf("%w: shared fan-out %d (want at most %d)", ErrInvalidOption, o.SharedFanout, MaxSharedFanout)
	}
	if o.SharedFanout == 0 {
		o.SharedFanout = DefaultSharedFanout
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.ExpireInterval == 0 {
		o.ExpireInterval = time.Hour
	}
	t := &Timeline{db: db, now: o.Now, stop: make(chan struct{}), inlineMax: max(o.InlineFanout, 0),
		sharedMax: uint64(max(o.SharedFanout, 0)), remote: o.Remote}
	t.removed.bm = roaring64.New()
	t.push.bm = roaring.New()
	if o.FolloweeCache == 0 {
		o.FolloweeCache = DefaultFolloweeCache
	}
	t.fcache.init(o.FolloweeCache)
	if o.FollowerCache == 0 {
		o.FollowerCache = DefaultFollowerCache
	}
	t.folCache.init(o.FollowerCache)
	t.pending.m = map[uint32]map[uint64]struct{}{}
	if err := t.registerFamilies(); err != nil {
		return nil, err
	}
	if err := t.ensureCounter(); err != nil {
		return nil, err
	}
	if err := t.loadConfig(o.Config); err != nil {
		return nil, err
	}
	if err := t.loadRequired(); err != nil {
		return nil, err
	}
	if err := t.loadState(); err != nil {
		return nil, err
	}
	for kind, h := range map[string]store.JobHandler{
		jobFanout: t.runFanout,
		jobPair:   t.runPair,
		jobExpire: t.runExpire,
		jobShared: t.runShared,
	} {
		if err := db.RegisterJobHandler(kind, h); err != nil {
			return nil, err
		}
	}
	t.followReopen()
	if o.ExpireInterval > 0 {
		t.bg.Add(1)
		go t.expireTicker(o.ExpireInterval)
	}
	return t, nil
}

// Exists reports whether db holds a follow graph: the UsersCounter with
// the timeline's columns. Tools that only read use it so that reading a
// store without timelines creates nothing.
func Exists(db *store.DB) bool {
	c, err := db.Counter(UsersCounter)
	if err != nil {
		return false
	}
	cols := c.Columns()
	want := []string{ColFollowers, ColFollowees, ColPosts, ColOrd, ColRead}
	return len(cols) >= len(want) && slices.Equal(cols[:len(want)], want)
}

// OwnsCounter reports whether a counter of this name is the timeline's
// (UsersCounter): hosts must not create or write it as their own.
func OwnsCounter(name string) bool { return name == UsersCounter }

// PackageName returns "timeline" (store.Package).
func (t *Timeline) PackageName() string { return "timeline" }

// Close stops the expiry ticker. Jobs already queued stay queued (they are
// durable) and run when a Timeline is next opened on the store. Close does
// not close the store.
func (t *Timeline) Close() error {
	if t.closed.Swap(true) {
		return nil
	}
	close(t.stop)
	t.bg.Wait()
	t.unregisterReopen()
	return nil
}

// DB returns the store the timeline lives in.
func (t *Timeline) DB() *store.DB { return t.db }

func (t *Timeline) ensureCounter() error {
	if _, err := t.db.Counter(UsersCounter); errors.Is(err, store.ErrCounterNotFound) {
		err := t.db.CreateCounter(UsersCounter, store.CounterOptions{RangeBits: usersRangeBits, Age: store.AgePolicy{Kind: store.KeepHot}, Owner: "timeline"})
		if err != nil && !errors.Is(err, store.ErrExists) {
			return err
		}
	} else if err != nil {
		return err
	}
	c, err := t.db.Counter(UsersCounter)
	if err != nil {
		return err
	}
	if err := t.db.Adopt(c, "timeline"); err != nil {
		return err
	}
	have := c.Columns()
	for i, col := range userColumns {
		if i < len(have) {
			if have[i] != col.name {
				return fmt.Errorf("%w: counter %q has column %q where timeline expects %q", ErrInvalidOption, UsersCounter, have[i], col.name)
			}
			continue
		}
		if err := t.db.AddColumn(UsersCounter, col.name, col.opts); err != nil && !errors.Is(err, store.ErrExists) {
			return err
		}
	}
	t.users = c
	return nil
}

// Config returns the configuration in force.
func (t *Timeline) Config() Config { return *t.cfg.Load() }

// SetConfig validates c, persists its non-zero fields and puts them in
// force. Lowering InboxCap trims inboxes as they are next written; raising
// it lets them grow from then on (entries below the old floor are read by
// pull). A new PullThreshold applies to authors as they gain followers;
// authors already pulled stay pulled.
func (t *Timeline) SetConfig(c Config) (Config, error) {
	if err := t.live(); err != nil {
		return Config{}, err
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	t.graphMu.Lock()
	defer t.graphMu.Unlock()
	next := c.withDefaults(*t.cfg.Load())
	if err := t.storeConfig(next); err != nil {
		return Config{}, err
	}
	t.cfg.Store(&next)
	return next, nil
}

func (t *Timeline) live() error {
	if t.closed.Load() {
		return ErrClosed
	}
	return nil
}

// Stat is one key/value pair of Stats (store's, shared by every package
// above it).
type Stat = store.Stat

// Stats returns the configuration and the timeline's state as key/value
// pairs, for tally stats (printed as "timeline.KEY VALUE").
func (t *Timeline) Stats() []Stat {
	c := t.Config()
	var out []Stat
	add := func(k string, v any) { out = append(out, Stat{Key: k, Value: fmt.Sprint(v)}) }
	add("inbox_cap", c.InboxCap)
	add("active_window", c.ActiveWindow)
	add("pull_threshold", c.PullThreshold)
	add("chunk_size", c.ChunkSize)
	t.allocMu.Lock()
	n := t.nextOrd
	t.allocMu.Unlock()
	add("users", usersBelow(n))
	add("pulled_authors", len(*t.pulled.Load()))
	t.pending.RLock()
	np := 0
	for _, m := range t.pending.m {
		np += len(m)
	}
	t.pending.RUnlock()
	add("pending_backfills", np)
	t.removed.RLock()
	add("removed_posts", t.removed.bm.GetCardinality())
	t.removed.RUnlock()
	jobs := 0
	for _, j := range t.db.QueuedJobs() {
		if j.Kind == jobFanout || j.Kind == jobPair || j.Kind == jobExpire {
			jobs++
		}
	}
	add("jobs_queued", jobs)
	add("deliveries", t.stats.deliveries.Load())
	add("rebuilds", t.stats.rebuilds.Load())
	if r := t.stats.rebuilds.Load(); r > 0 {
		add("rebuild_mean", time.Duration(t.stats.rebuildNanos.Load()/r))
	}
	add("expired", t.stats.expired.Load())
	add("pages", t.stats.pages.Load())
	// Pages that read posts from outboxes (pulled authors, or below the
	// inbox's floor), and the inbox entries the pages found: over pages,
	// the mean inbox a reader has.
	add("pulls", t.stats.pulls.Load())
	add("inbox_entries_read", t.stats.inboxEntries.Load())
	return out
}

// usersBelow returns how many ordinals below next are real (not chunk
// sentinels).
func usersBelow(next uint32) uint64 {
	if next == 0 {
		return 0
	}
	n := uint64(next) - 1 // ordinals 1..next-1
	return n - uint64(next-1)>>16
}

// expireTicker enqueues the expiry job every interval until Close.
func (t *Timeline) expireTicker(every time.Duration) {
	defer t.bg.Done()
	tk := time.NewTicker(every)
	defer tk.Stop()
	for {
		select {
		case <-t.stop:
			return
		case <-tk.C:
			if _, err := t.EnqueueExpire(); err != nil && !errors.Is(err, store.ErrClosed) {
				// The store reports background errors of jobs; an enqueue
				// that fails is retried at the next tick.
				continue
			}
		}
	}
}

// stripe returns the lock stripe of id.
func stripe(id uint64) int {
	id ^= id >> 33
	id *= 0xff51afd7ed558ccd
	id ^= id >> 33
	return int(id % lockStripes)
}

// stripesOf returns the lock stripes of ids, ascending, each once: the
// order in which every path that holds several stripes of one lock array
// takes them, so no two such paths deadlock.
func stripesOf(ids []uint64) []int {
	idx := make([]int, 0, len(ids))
	for _, id := range ids {
		idx = append(idx, stripe(id))
	}
	sort.Ints(idx)
	return slices.Compact(idx)
}

// lockUsers locks the user stripes of ids in ascending order and returns
// the unlock function.
func (t *Timeline) lockUsers(ids []uint64) func() {
	held := stripesOf(ids)
	for _, s := range held {
		t.userMu[s].Lock()
	}
	return func() {
		for i := len(held) - 1; i >= 0; i-- {
			t.userMu[held[i]].Unlock()
		}
	}
}

// rlockAuthors read-locks the author stripes of ids in ascending order
// and returns the unlock function.
func (t *Timeline) rlockAuthors(ids []uint64) func() {
	held := stripesOf(ids)
	for _, s := range held {
		t.authorMu[s].RLock()
	}
	return func() {
		for i := len(held) - 1; i >= 0; i-- {
			t.authorMu[held[i]].RUnlock()
		}
	}
}

// lockPosts locks the post stripes of ids in ascending order and returns
// the unlock function.
func (t *Timeline) lockPosts(ids []uint64) func() {
	held := stripesOf(ids)
	for _, s := range held {
		t.postMu[s].Lock()
	}
	return func() {
		for i := len(held) - 1; i >= 0; i-- {
			t.postMu[held[i]].Unlock()
		}
	}
}

// waitCtx is a context for work Close should not cut short.
var waitCtx = context.Background()

// DiskUsage is the estimated bytes of Pebble's files per family group
// (store.Family.DiskUsage: flush or compact first for settled figures).
type DiskUsage struct {
	Inboxes   uint64 // tl_inbox
	Followers uint64 // tl_followers: follower bitmaps
	Followees uint64 // tl_followees: followee lists
	Outboxes  uint64 // tl_outbox and tl_posts
	Other     uint64 // ordinals, push set, pending and removed marks, config
}

// DiskUsage estimates the disk bytes of the timeline's families.
func (t *Timeline) DiskUsage() (DiskUsage, error) {
	var d DiskUsage
	for _, x := range []struct {
		f   *store.Family
		dst *uint64
	}{
		{t.fam.inbox, &d.Inboxes}, {t.fam.followers, &d.Followers}, {t.fam.followees, &d.Followees},
		{t.fam.outbox, &d.Outboxes}, {t.fam.posts, &d.Outboxes},
		{t.fam.ords, &d.Other}, {t.fam.active, &d.Other}, {t.fam.pending, &d.Other},
		{t.fam.removed, &d.Other}, {t.fam.pulled, &d.Other}, {t.fam.config, &d.Other},
	} {
		n, err := x.f.DiskUsage()
		if err != nil {
			return DiskUsage{}, err
		}
		*x.dst += n
	}
	return d, nil
}

// InboxLen returns the number of entries user's stored inbox holds (0 if
// it has none), for tools and benchmarks.
func (t *Timeline) InboxLen(user uint64) (int, error) {
	if err := CheckID("user", user); err != nil {
		return 0, err
	}
	ord, err := t.ordOf(user)
	if err != nil || ord == 0 {
		return 0, err
	}
	v, ok, err := t.fam.inbox.Get(inboxKey(nil, ord), nil)
	if err != nil || !ok {
		return 0, err
	}
	l, err := store.DecodeTopList(v)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range l.Entries {
		if e.Key != 0 {
			n++
		}
	}
	return n, nil
}

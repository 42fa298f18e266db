package unread

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/tallydb/tally/internal/checksum"
	"github.com/tallydb/tally/store"
)

// Errors returned by unread. Test for them with errors.Is; the returned
// error usually wraps one of these (and, where the store refused, the
// store's error too) with detail.
var (
	// ErrUnknownKind is returned for a kind nobody added (AddKind).
	ErrUnknownKind = errors.New("unread: unknown kind")
	// ErrUnknownChannel is returned by Clear and Read for a channel that
	// was never marked nor posted to (Has and Unread read it as nothing
	// unread, like a missing Redis key).
	ErrUnknownChannel = errors.New("unread: unknown channel")
	// ErrInvalidChannel is returned for a malformed channel name (the
	// rules of counter names: 1-64 bytes of [A-Za-z0-9_-], not starting
	// with '-').
	ErrInvalidChannel = errors.New("unread: invalid channel name")
	// ErrInvalidNotice is returned for notice id 0 (ids start at 1).
	ErrInvalidNotice = errors.New("unread: invalid notice id")
	// ErrTooManyChannels is returned when a new channel would exceed
	// MaxChannels.
	ErrTooManyChannels = errors.New("unread: too many channels")
	// ErrTooManyNotices is returned when a channel would hold more than
	// MaxNotices notices.
	ErrTooManyNotices = errors.New("unread: too many notices in the channel")
	// ErrNoGraph is returned by the feed calls of an Unread opened without
	// Options.Graph.
	ErrNoGraph = errors.New("unread: no follow graph (Options.Graph)")
	// ErrInvalidOption is returned by New for an option outside its
	// allowed set.
	ErrInvalidOption = errors.New("unread: invalid option")
)

// Limits.
const (
	// MaxChannels is the most channels a store can have.
	MaxChannels = 1 << 16
	// MaxNotices is the most notices one channel keeps (8 bytes of memory
	// each).
	MaxNotices = 1 << 20
)

// Names of the counters unread creates. Counter names share the store's
// one namespace with the host's counters.
const (
	// KindsCounter holds the one-to-one counts: a row per user id, a
	// column per kind.
	KindsCounter = "unread_kinds"
	// FeedCounter holds, per user id, the number of feed snapshot
	// operations committed (column "gen"): the snapshot cache's
	// validity tag.
	FeedCounter = "unread_feed"
	genColumn   = "gen"
)

// Options configure an Unread. A nil *Options means all defaults.
type Options struct {
	// Graph is the follow graph of the feed model, normally the
	// *timeline.Timeline of the same store. New registers an observer on
	// it. The default is nil: the feed calls return ErrNoGraph.
	Graph FollowGraph
	// SnapshotCacheBytes bounds the memory of decoded feed snapshots kept
	// for reads. Negative disables the cache (every read decodes the
	// snapshot from Pebble). The default is 64 MiB.
	SnapshotCacheBytes int64
	// RangeBits is the range bits of the counters unread creates (its
	// first New on a store), as store.CounterOptions.RangeBits; user ids
	// below 2^RangeBits share one hot table. The default is 32.
	RangeBits uint8
}

// DefaultSnapshotCacheBytes is Options.SnapshotCacheBytes' default.
const DefaultSnapshotCacheBytes = 64 << 20

// Unread is the unread-count view of one open store: one-to-one counts,
// broadcast red dots and system notices, and feed unread. It is safe for
// concurrent use. It holds no goroutines and needs no Close: it lives as
// long as its store.
type Unread struct {
	db    *store.DB
	graph FollowGraph

	kinds *store.Counter
	feed  *store.Counter

	meta, feedFam, chanFam, noticeFam, tagFam *store.Family

	// complete says every user's snapshot membership is the follow graph
	// (the graph was empty when unread first saw it): a user without a
	// snapshot follows nobody. Set once by New.
	complete bool
	// configured says the feed mode was decided (by this or an earlier
	// New with a graph).
	configured bool

	cache *snapCache

	// resetLocks serialize the resets (and first reads) of one user, so at
	// most one reset of a user is between its read and its commit.
	resetLocks [256]sync.Mutex
	// tagLocks serialize the writes of one (user, channel) tag.
	tagLocks [256]sync.Mutex

	chans struct {
		mu     sync.Mutex                          // serializes channel creation
		byName atomic.Pointer[map[string]*channel] // copy on write
		byID   []*channel                          // under mu; index id-1
		locked []*channel                          // under mu: those a reopen's Before locked
	}

	// scratch holds per-call buffers of Feed.
	scratch sync.Pool

	// testHook, if set, runs inside reset between its read and its commit
	// (tests force interleavings with it).
	testHook func(user uint64)
	// testReload, if set, runs before a reopen's reload of the channels;
	// an error fails the reload in its place (tests fail a reload with
	// it). Set before the store fails, never changed after.
	testReload func() error
}

// Families returns the families unread uses, for store.Options.Families.
// Declaring them there is recommended (the feed family has a custom merge
// operator, which Pebble can then use from the moment the store opens);
// New registers any the host did not declare.
func Families() []store.FamilySpec {
	return []store.FamilySpec{
		{Name: "unread_meta", Prefix: prefixMeta, MinKeyLen: 1, MaxKeyLen: 64, MaxValueLen: 64, CheckValue: checkConfigValue},
		{Name: "unread_feed", Prefix: prefixFeed, MinKeyLen: 8, MaxKeyLen: 8, MaxValueLen: store.MaxFamilyValueLen, Merge: snapMerge},
		{Name: "unread_chan", Prefix: prefixChannel, MinKeyLen: 4, MaxKeyLen: 4, MaxValueLen: 128, CheckValue: checkChannelValue},
		{Name: "unread_notice", Prefix: prefixNotice, MinKeyLen: 12, MaxKeyLen: 12, MaxValueLen: 1, CheckValue: checkNoticeValue},
		{Name: "unread_tag", Prefix: prefixTag, MinKeyLen: 13, MaxKeyLen: 13, MaxValueLen: 32, CheckValue: checkTagValue},
	}
}

// Family prefixes (0x30-0x3F are unread's); the layouts are in the package
// doc.
const (
	prefixMeta    byte = 0x30
	prefixFeed    byte = 0x31
	prefixChannel byte = 0x32
	prefixNotice  byte = 0x33
	prefixTag     byte = 0x34
)

// configKey is the meta key of the persisted configuration.
const configKey = "config"

// New opens unread on an open store: it registers unread's families if the
// host did not declare them, creates its counters if missing (idempotent),
// loads the channels and the persisted configuration, and registers the
// feed observer on opts.Graph. Open one Unread per store in a process (it
// serializes each user's feed resets) and use it for the store's life.
func New(db *store.DB, opts *Options) (*Unread, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.SnapshotCacheBytes == 0 {
		o.SnapshotCacheBytes = DefaultSnapshotCacheBytes
	}
	if o.RangeBits == 0 {
		o.RangeBits = 32
	}
	if err := (store.CounterOptions{RangeBits: o.RangeBits}).Validate(); err != nil {
		return nil, fmt.Errorf("%w: RangeBits %d: %v", ErrInvalidOption, o.RangeBits, err)
	}
	x := &Unread{db: db, graph: o.Graph, cache: newSnapCache(o.SnapshotCacheBytes)}
	fams := []**store.Family{&x.meta, &x.feedFam, &x.chanFam, &x.noticeFam, &x.tagFam}
	for i, spec := range Families() {
		f, err := db.Family(spec.Name)
		if errors.Is(err, store.ErrFamilyNotFound) {
			f, err = db.RegisterFamily(spec)
		}
		if err != nil {
			return nil, fmt.Errorf("unread: family %s: %w", spec.Name, err)
		}
		if got := f.Spec(); got.Prefix != spec.Prefix || got.Merge != spec.Merge {
			return nil, fmt.Errorf("unread: family %s declared at %#02x with another layout: %w", spec.Name, got.Prefix, store.ErrFamilyConflict)
		}
		*fams[i] = f
	}
	var err error
	if x.kinds, err = ensureCounter(db, KindsCounter, o.RangeBits); err != nil {
		return nil, err
	}
	if x.feed, err = ensureCounter(db, FeedCounter, o.RangeBits); err != nil {
		return nil, err
	}
	if len(x.feed.Columns()) == 0 {
		err := db.AddColumn(FeedCounter, genColumn, store.ColumnOptions{HintBits: 16, MaxBits: 64})
		if err != nil && !errors.Is(err, store.ErrExists) {
			return nil, fmt.Errorf("unread: counter %s: %w", FeedCounter, err)
		}
	}
	if cols := x.feed.Columns(); len(cols) != 1 || cols[0] != genColumn {
		return nil, fmt.Errorf("unread: counter %s has columns %v, want [%s]: %w", FeedCounter, cols, genColumn, store.ErrFamilyConflict)
	}
	if err := x.loadChannels(); err != nil {
		return nil, err
	}
	x.followReopen()
	if err := x.loadConfig(); err != nil {
		return nil, err
	}
	if x.graph != nil {
		if err := x.graph.AddNamedObserver("unread", observer{x}); err != nil {
			return nil, fmt.Errorf("unread: attach to the follow graph: %w", err)
		}
	}
	return x, nil
}

// Exists reports whether db holds unread data (its counters). Tools that
// only read use it so that reading a store without unread creates
// nothing.
func Exists(db *store.DB) bool {
	_, err := db.Counter(KindsCounter)
	return err == nil
}

// OwnsCounter reports whether a counter of this name is unread's
// (KindsCounter, FeedCounter): hosts must not create or write it as their
// own.
func OwnsCounter(name string) bool { return name == KindsCounter || name == FeedCounter }

// PackageName returns "unread" (store.Package).
func (x *Unread) PackageName() string { return "unread" }

// Close does nothing: unread has no background work (store.Package).
func (x *Unread) Close() error { return nil }

func ensureCounter(db *store.DB, name string, rangeBits uint8) (*store.Counter, error) {
	c, err := db.Counter(name)
	if errors.Is(err, store.ErrCounterNotFound) {
		err = db.CreateCounter(name, store.CounterOptions{RangeBits: rangeBits, Age: store.AgePolicy{Kind: store.KeepHot}, Owner: "unread"})
		if err != nil && !errors.Is(err, store.ErrExists) {
			return nil, fmt.Errorf("unread: counter %s: %w", name, err)
		}
		c, err = db.Counter(name)
	}
	if err == nil {
		err = db.Adopt(c, "unread")
	}
	if err != nil {
		return nil, fmt.Errorf("unread: counter %s: %w", name, err)
	}
	return c, nil
}

// DB returns the store.
func (x *Unread) DB() *store.DB { return x.db }

// Config flags.
const (
	configFeedComplete = 1 << 0 // the graph was empty when unread first saw it
)

// appendConfig encodes the persisted configuration (meta key "config").
//
//	field     width   meaning
//	--------  ------  --------------------------------------------------------
//	version   1       1
//	flags     1       bit 0: feed snapshots are complete from their first
//	                  operation (the follow graph was empty when unread
//	                  first opened on it)
//	crc       4       CRC-32C, big-endian, of the bytes before it
func appendConfig(dst []byte, flags byte) []byte {
	start := len(dst)
	dst = append(dst, 1, flags)
	return checksum.AppendTrailer(dst, start)
}

func decodeConfig(v []byte) (byte, error) {
	if len(v) != 6 {
		return 0, fmt.Errorf("config record of %d bytes, want 6", len(v))
	}
	body, err := checksum.CutRecord(v, 1)
	if err != nil {
		return 0, fmt.Errorf("config record: %w", err)
	}
	if body[0]&^configFeedComplete != 0 {
		return 0, fmt.Errorf("config record flags %#x", body[0])
	}
	return v[1], nil
}

func checkConfigValue(key, v []byte) error {
	if string(key[1:]) != configKey {
		return fmt.Errorf("unknown meta key %q", key[1:])
	}
	_, err := decodeConfig(v)
	return err
}

func metaKey(name string) []byte { return append([]byte{prefixMeta}, name...) }

// loadConfig reads the persisted configuration, or decides and persists it
// the first time unread sees a follow graph.
func (x *Unread) loadConfig() error {
	v, ok, err := x.meta.Get(metaKey(configKey), nil)
	if err != nil {
		return fmt.Errorf("unread: config: %w", err)
	}
	if ok {
		flags, err := decodeConfig(v)
		if err != nil {
			return fmt.Errorf("%w: unread config: %v", store.ErrCorrupt, err)
		}
		x.configured = true
		x.complete = flags&configFeedComplete != 0
		return nil
	}
	if x.graph == nil {
		return nil // decided by the first New with a graph
	}
	empty, err := graphEmpty(x.db)
	if err != nil {
		return err
	}
	flags := byte(0)
	if empty {
		flags |= configFeedComplete
	}
	b := x.db.NewBatch()
	defer b.Close()
	if err := x.meta.Put(b, metaKey(configKey), appendConfig(nil, flags)); err != nil {
		return err
	}
	if err := b.Commit(); err != nil {
		return fmt.Errorf("unread: config: %w", err)
	}
	x.configured, x.complete = true, empty
	return nil
}

// graphEmpty reports whether the follow graph's users counter holds no row
// at all (no follows, no posts): then every follow from now on goes through
// unread's observer.
func graphEmpty(db *store.DB) (bool, error) {
	if _, err := db.Counter(UsersCounter); errors.Is(err, store.ErrCounterNotFound) {
		return true, nil
	} else if err != nil {
		return false, err
	}
	for _, c := range db.Stats().Counters {
		if c.Name == UsersCounter {
			return c.Rows() == 0, nil
		}
	}
	return true, nil
}

// Stat is one key/value pair of Stats (store's, shared by every package
// above it).
type Stat = store.Stat

// Stats returns key/value pairs describing unread, for "tally stats"
// (printed as unread.KEY VALUE).
func (x *Unread) Stats() []Stat {
	var out []Stat
	add := func(k string, v any) { out = append(out, Stat{Key: k, Value: fmt.Sprint(v)}) }
	add("kinds", len(x.kinds.Columns()))
	chans := x.channelList()
	notices := 0
	for _, ch := range chans {
		notices += ch.noticeCount()
	}
	add("channels", len(chans))
	add("notices", notices)
	switch {
	case !x.configured:
		add("feed", "none") // never opened on a follow graph
	case x.complete:
		add("feed", "complete")
	default:
		add("feed", "lazy")
	}
	cs := x.cache.stats()
	add("snapshot_cache_limit_bytes", cs.limit)
	add("snapshot_cache_bytes", cs.bytes)
	add("snapshot_cache_entries", cs.entries)
	add("snapshot_cache_hits", cs.hits)
	add("snapshot_cache_misses", cs.misses)
	return out
}

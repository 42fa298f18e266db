package likes

import (
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tallydb/tally/internal/quote"
	"github.com/tallydb/tally/store"
)

// Limits.
const (
	// MaxBusinessLen is the longest business name: its counter is named
	// "likes_" + name, and counter names are at most 64 bytes.
	MaxBusinessLen = 58
	// MaxPage is the most ids a Likers or UserLikes page returns.
	MaxPage = 1000
	// MaxTop is the largest N of Top.
	MaxTop = 1000
	// MaxStates is the most items of one States or Counts call.
	MaxStates = 1000
	// MaxBoardDays is the most daily boards kept.
	MaxBoardDays = 3660
	// MinRoaringThreshold and MaxRoaringThreshold bound
	// Options.RoaringThreshold.
	MinRoaringThreshold = 16
	MaxRoaringThreshold = 1 << 20
	// maxBusinesses bounds the number of businesses (each is a counter).
	maxBusinesses = 4096
)

// Defaults.
const (
	DefaultBoardDays        = 7
	DefaultRoaringThreshold = 4096
	DefaultStripes          = 1024
	DefaultMaxGroup         = 256
)

// ReceivedCounter is the counter holding each owner's likes received
// (column ReceivedColumn), keyed by owner id.
const (
	ReceivedCounter = "likes_received"
	ReceivedColumn  = "received"
)

// Columns of a business's counter.
const (
	LikesColumn    = "likes"
	DislikesColumn = "dislikes"
)

// CounterName returns the name of the counter holding a business's counts.
func CounterName(business string) string { return "likes_" + business }

// BusinessOptions shape the counter of a new business (its counts, keyed by
// item id). They apply when a business is created; its counter keeps them.
type BusinessOptions struct {
	// RangeBits is the counter's range width (see store.CounterOptions).
	// The default is 48: about 18.6 hours of snowflake ids per range.
	RangeBits uint8
	// Age is the counter's age policy. The default is KeepNewest with 64
	// hot ranges (about 50 days of snowflake ids with the default range
	// bits); AgeByTime suits snowflake item ids.
	Age store.AgePolicy
}

func (o BusinessOptions) counterOptions() store.CounterOptions {
	c := store.CounterOptions{RangeBits: o.RangeBits, Age: o.Age, Owner: "likes"}
	if c.RangeBits == 0 {
		c.RangeBits = 48
	}
	if o.Age == (store.AgePolicy{}) {
		c.Age = store.AgePolicy{Kind: store.KeepNewest, HotRanges: 64}
	}
	return c
}

// Options configure a Likes. A nil *Options means all defaults.
//
// BoardDays and RoaringThreshold are persisted: a zero field keeps the
// persisted value (or the default on a new store), a non-zero one replaces
// it. The others apply to this process only.
type Options struct {
	// BoardDays is the number of UTC days whose daily boards are kept,
	// today included (older ones are deleted by a background job). A
	// negative value turns daily boards off. The default is 7.
	BoardDays int
	// RoaringThreshold is the size at which an item's like (or dislike)
	// set changes from one key per member to roaring bitmaps of user
	// ordinals, MinRoaringThreshold..MaxRoaringThreshold. The default is
	// 4096 (see the package doc for the measurement behind it).
	RoaringThreshold int
	// Business shapes the counters of businesses created implicitly: by
	// a Load, or by their first like with CreateBusinesses. The default is
	// BusinessOptions{}.
	Business BusinessOptions
	// CreateBusinesses lets the first like, dislike or SetOwner of an
	// undeclared business create it, for hosts whose business names come
	// from their own code, never from users. The default is false: such a
	// write fails with ErrUnknownBusiness and changes nothing, as a write
	// to an undeclared unread kind or channel does; businesses are
	// declared with AddBusiness (or by a Load).
	CreateBusinesses bool
	// ReceivedRangeBits is the range width of the likes_received counter
	// (keyed by owner id, kept hot), used when it is created. The default
	// is 48.
	ReceivedRangeBits uint8
	// Stripes is the number of lock stripes transitions are serialized by
	// (a power of two). The default is 1024.
	Stripes int
	// MaxGroup is the most transitions of one stripe committed in one
	// batch. The default is 256.
	MaxGroup int
	// Now is the clock of like times and daily boards. The default is
	// time.Now.
	Now func() time.Time
	// OrdinalCacheBytes bounds the cache of user ordinals (ordcache.go),
	// which spares a transition on a roaring set the Pebble Get of the
	// user's ordinal; negative turns it off. The default is
	// DefaultOrdinalCacheBytes (1 MiB, 87k users).
	OrdinalCacheBytes int64
	// CursorSecret, when set, keys the page cursors (Likers, UserLikes)
	// instead of the random secret a store makes once and keeps: every
	// replica of a replicated store must accept the cursors any other
	// replica signed, so a cluster sets it from its shared secret (each
	// replica's own random secret made a cursor fail with ErrBadCursor
	// after a failover). It is not stored.
	CursorSecret []byte
}

func (o *Options) withDefaults() (Options, error) {
	var c Options
	if o != nil {
		c = *o
	}
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidOption}, args...)...))
	}
	if c.BoardDays > MaxBoardDays {
		bad("board days %d (want at most %d, or negative for none)", c.BoardDays, MaxBoardDays)
	}
	if c.RoaringThreshold != 0 && (c.RoaringThreshold < MinRoaringThreshold || c.RoaringThreshold > MaxRoaringThreshold) {
		bad("roaring threshold %d (want %d..%d)", c.RoaringThreshold, MinRoaringThreshold, MaxRoaringThreshold)
	}
	if c.Stripes == 0 {
		c.Stripes = DefaultStripes
	}
	if c.Stripes < 1 || c.Stripes > 1<<20 || c.Stripes&(c.Stripes-1) != 0 {
		bad("stripes %d (want a power of two up to 2^20)", c.Stripes)
	}
	switch {
	case c.OrdinalCacheBytes == 0:
		c.OrdinalCacheBytes = DefaultOrdinalCacheBytes
	case c.OrdinalCacheBytes > 1<<40:
		bad("ordinal cache bytes %d (want at most 2^40, or negative for none)", c.OrdinalCacheBytes)
	}
	if c.MaxGroup == 0 {
		c.MaxGroup = DefaultMaxGroup
	}
	if c.MaxGroup < 1 || c.MaxGroup > 1<<16 {
		bad("max group %d (want 1..65536)", c.MaxGroup)
	}
	if c.ReceivedRangeBits == 0 {
		c.ReceivedRangeBits = 48
	}
	if err := (store.CounterOptions{RangeBits: c.ReceivedRangeBits}).Validate(); err != nil {
		errs = append(errs, fmt.Errorf("%w: received range bits: %v", ErrInvalidOption, err))
	}
	if err := c.Business.counterOptions().Validate(); err != nil {
		errs = append(errs, fmt.Errorf("%w: business counter: %v", ErrInvalidOption, err))
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c, errors.Join(errs...)
}

// Likes is the package's view of one store: like sets, counts, user lists
// and leaderboards. It is safe for concurrent use.
//
// Lock order: loadMu before a stripe (held as leader) before ords.mu and
// biz.mu; store locks (DB.commit) last.
type Likes struct {
	db   *store.DB
	opts Options
	fam  families
	cfg  config

	secret []byte
	// received is the likes_received counter, created by the first
	// transition that names an owner (nil until then: every total is 0).
	received atomic.Pointer[store.Counter]

	biz struct {
		mu     sync.Mutex                           // serializes creation
		byName atomic.Pointer[map[string]*business] // copy on write
		gen    uint64                               // store generation byName was loaded in; under mu
	}

	stripes []stripe
	// loadMu is held shared by every group commit and exclusively by Load
	// and Check, so a bulk load or a check sees no transition half done.
	loadMu sync.RWMutex
	ords   ordAlloc
	// pruneDay is the last day a prune job was enqueued for.
	pruneDay atomic.Uint32
	// interrupted holds the ids of the businesses whose bulk load a crash
	// interrupted, found by a New on a read-only store, which cannot
	// finish them (a writable New does). Their item counts lag their sets
	// until then. Set by New only.
	interrupted map[uint32]bool
	// filter holds every key of the state, ordinal, item and day score
	// families, so transitions skip the Gets of absent ones (keyfilter.go);
	// nil on a read-only store. Set by New only.
	filter *keyFilter
	// hists are the board histograms (hist.go): built by New, rebuilt
	// after a reopen, changed by the batches that move board keys.
	hists atomic.Pointer[histograms]
	// testReload, if set, runs before a reopen's reload; an error fails
	// the reload in its place (tests fail a reload with it). Set before
	// the store fails, never changed after.
	testReload func() error

	stats struct {
		groups, ops, maxGroup, waits atomic.Int64
		conversions, boardMoves      atomic.Int64
		// Pebble point Gets of states, item records (transitions and
		// reads) and day scores (transitions) that neither the key
		// filter nor the stripe cache answered.
		stateGets, itemGets, dayGets atomic.Int64
	}
}

type families struct {
	meta, state, item, set, bitmap, user, board, dayScore, hist, ord, ordRev *store.Family
}

// business is one business: its id in keys and its counter.
type business struct {
	id      uint32
	name    string
	counter string
	c       *store.Counter
}

// New opens the package's view on an open store: it registers the families
// not declared in the store's Options.Families, loads or creates the
// persisted options, the cursor secret and the likes_received counter,
// registers the board prune job, and finishes (recounts) any bulk load a
// crash interrupted. On a store that already holds likes and with
// unchanged options it writes nothing. On a read-only store an interrupted
// load cannot be finished: New opens all the same and reports it
// (InterruptedLoads, Stats, Check). Everything hangs off the returned
// value.
func New(db *store.DB, opts *Options) (*Likes, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	l := &Likes{db: db, opts: o}
	if err := l.openFamilies(); err != nil {
		return nil, err
	}
	changed, err := l.loadConfig(opts)
	if err != nil {
		return nil, err
	}
	if err := l.loadSecret(); err != nil {
		return nil, err
	}
	// ensureReceived makes the counter in two durable steps (create, then
	// add its column); one cut between them (a crash, a failed sync)
	// leaves it without columns, and no like has counted in it yet: the
	// next like that names an owner adds the column (ensureReceived), and
	// until then every owner has received 0.
	if c, err := db.Counter(ReceivedCounter); err == nil && len(c.Columns()) > 0 {
		if err := checkReceived(c); err != nil {
			return nil, err
		}
		if err := db.Adopt(c, "likes"); err != nil {
			return nil, err
		}
		l.received.Store(c)
	}
	l.biz.gen = db.Generation()
	if err := l.loadBusinesses(); err != nil {
		return nil, err
	}
	// The histograms before anything that may move board keys (the
	// prune job, once registered).
	if err := l.rebuildHistograms(); err != nil {
		return nil, err
	}
	db.OnReopen(store.ReopenHook{Before: l.loadMu.Lock, After: l.reloadAfterReopen, Release: l.loadMu.Unlock})
	if err := l.ords.init(l); err != nil {
		return nil, err
	}
	l.stripes = make([]stripe, o.Stripes)
	if err := db.RegisterJobHandler(pruneJobKind, l.runPrune); err != nil {
		return nil, err
	}
	if db.ReadOnly() {
		if l.interrupted, err = l.interruptedLoadIDs(); err != nil {
			return nil, err
		}
	} else {
		if err := l.finishInterruptedLoads(); err != nil {
			return nil, err
		}
		l.ords.cache = newOrdCache(o.OrdinalCacheBytes)
		if l.filter, err = l.buildFilter(); err != nil { // warms the cache too
			return nil, err
		}
	}
	if changed {
		// Fewer days kept (or none): delete the boards that left the
		// window now. Otherwise the first write of a day queues the prune.
		if err := l.schedulePrune(); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// Exists reports whether db holds likes: a business or the received
// totals (each is a counter named "likes_..."). Tools that only read use it
// so that reading a store without likes creates nothing.
func Exists(db *store.DB) bool {
	for _, c := range db.Counters() {
		if strings.HasPrefix(c.Name, "likes_") {
			return true
		}
	}
	return false
}

// OwnsCounter reports whether a counter of this name is in likes'
// namespace (every name starting "likes_": the businesses' counters and
// ReceivedCounter): hosts must not create or write it as their own.
func OwnsCounter(name string) bool { return strings.HasPrefix(name, "likes_") }

// PackageName returns "likes" (store.Package).
func (l *Likes) PackageName() string { return "likes" }

// Close does nothing: the board prune runs as a queued job of the store
// (store.Package).
func (l *Likes) Close() error { return nil }

// DB returns the store l works on.
func (l *Likes) DB() *store.DB { return l.db }

func (l *Likes) openFamilies() error {
	byName := map[string]**store.Family{
		"likes-meta": &l.fam.meta, "likes-state": &l.fam.state, "likes-item": &l.fam.item,
		"likes-set": &l.fam.set, "likes-bitmap": &l.fam.bitmap, "likes-user": &l.fam.user,
		"likes-board": &l.fam.board, "likes-dayscore": &l.fam.dayScore, "likes-hist": &l.fam.hist,
		"likes-ord": &l.fam.ord, "likes-ordrev": &l.fam.ordRev,
	}
	for _, spec := range Families() {
		f, err := l.db.Family(spec.Name)
		if errors.Is(err, store.ErrFamilyNotFound) {
			f, err = l.db.RegisterFamily(spec)
		}
		if err != nil {
			return fmt.Errorf("likes: family %s: %w", spec.Name, err)
		}
		if f.Prefix() != spec.Prefix {
			return fmt.Errorf("%w: likes family %s declared at prefix %#02x, want %#02x", store.ErrFamilyConflict, spec.Name, f.Prefix(), spec.Prefix)
		}
		*byName[spec.Name] = f
	}
	return nil
}

// loadConfig reads the persisted options, applies the given ones and
// persists the result if it differs; changed reports an existing config
// whose options changed. A writable open of a store of likes format 1
// deletes its likes-hist keys (histograms live in memory since issue 18,
// hist.go) in the batch that moves the config to format 2: a crash before
// it leaves format 1, and the next open does it again. A read-only open
// leaves them: nothing reads them.
func (l *Likes) loadConfig(given *Options) (changed bool, err error) {
	key := appendMetaKey(nil, metaConfig)
	v, ok, err := l.fam.meta.Get(key, nil)
	if err != nil {
		return false, err
	}
	cfg := config{boardDays: DefaultBoardDays, roaringThreshold: DefaultRoaringThreshold, format: formatHistMem}
	if ok {
		if cfg, err = decodeConfig(v); err != nil {
			return false, fmt.Errorf("%w: likes config: %v", store.ErrCorrupt, err)
		}
	}
	want := cfg
	if given != nil {
		switch {
		case given.BoardDays < 0:
			want.boardDays = 0
		case given.BoardDays > 0:
			want.boardDays = given.BoardDays
		}
		if given.RoaringThreshold > 0 {
			want.roaringThreshold = given.RoaringThreshold
		}
	}
	changed = ok && (want.boardDays != cfg.boardDays || want.roaringThreshold != cfg.roaringThreshold)
	// NB: a read-only open of a format 1 store ignores its likes-hist
	// keys (and writes nothing unless given other options, which fails as
	// it always did).
	upgrade := ok && cfg.format == formatHistKeys && !l.db.ReadOnly()
	want.format = formatHistMem
	if !ok || changed || upgrade {
		b := l.db.NewBatch()
		defer b.Close()
		if ok && cfg.format == formatHistKeys {
			lo, hi := legacyHistRange()
			if err := l.fam.hist.DeleteRange(b, lo, hi); err != nil {
				return false, err
			}
		}
		if err := l.fam.meta.Put(b, key, appendConfig(nil, want)); err != nil {
			return false, err
		}
		if err := b.Commit(); err != nil {
			return false, err
		}
	}
	l.cfg = want
	return changed, nil
}

// putMeta writes one meta record in its own batch.
func (l *Likes) putMeta(key, value []byte) error {
	b := l.db.NewBatch()
	defer b.Close()
	if err := l.fam.meta.Put(b, key, value); err != nil {
		return err
	}
	return b.Commit()
}

func (l *Likes) loadSecret() error {
	if len(l.opts.CursorSecret) > 0 {
		h := sha256.New()
		h.Write([]byte("tally likes cursors\x00"))
		h.Write(l.opts.CursorSecret)
		l.secret = h.Sum(nil)[:secretLen]
		return nil
	}
	key := appendMetaKey(nil, metaSecret)
	v, ok, err := l.fam.meta.Get(key, nil)
	if err != nil {
		return err
	}
	if ok {
		if l.secret, err = decodeSecret(v); err != nil {
			return fmt.Errorf("%w: likes cursor secret: %v", store.ErrCorrupt, err)
		}
		return nil
	}
	s := make([]byte, secretLen)
	if _, err := rand.Read(s); err != nil {
		return err
	}
	if l.db.ReadOnly() {
		// A read-only open (tally verify, a backup's check) of a store
		// that has none, such as a cluster replica's (CursorSecret):
		// cursors it signs live as long as the open.
		l.secret = s
		return nil
	}
	if err := l.putMeta(key, appendSecret(nil, s)); err != nil {
		return err
	}
	l.secret = s
	return nil
}

// ensureReceived creates the likes_received counter if it does not exist.
func (l *Likes) ensureReceived() error {
	if l.received.Load() != nil {
		return nil
	}
	l.biz.mu.Lock()
	defer l.biz.mu.Unlock()
	if l.received.Load() != nil {
		return nil
	}
	c, err := l.db.Counter(ReceivedCounter)
	if errors.Is(err, store.ErrCounterNotFound) {
		err = l.db.CreateCounter(ReceivedCounter, store.CounterOptions{RangeBits: l.opts.ReceivedRangeBits, Owner: "likes"})
		if err == nil || errors.Is(err, store.ErrExists) {
			c, err = l.db.Counter(ReceivedCounter)
		}
	}
	if err != nil {
		return err
	}
	if len(c.Columns()) == 0 {
		if err := l.db.AddColumn(ReceivedCounter, ReceivedColumn, store.ColumnOptions{HintBits: 16, MaxBits: 64}); err != nil && !errors.Is(err, store.ErrExists) {
			return err
		}
	}
	if err := checkReceived(c); err != nil {
		return err
	}
	if err := l.db.Adopt(c, "likes"); err != nil {
		return err
	}
	l.received.Store(c)
	return nil
}

func checkReceived(c *store.Counter) error {
	if cols := c.Columns(); len(cols) != 1 || cols[0] != ReceivedColumn {
		return fmt.Errorf("%w: counter %s has columns %v, want [%s]", ErrBusinessConflict, ReceivedCounter, cols, ReceivedColumn)
	}
	return nil
}

func (l *Likes) loadBusinesses() error {
	m := map[string]*business{}
	p := appendMetaKey(nil, metaBizPre)
	it, err := l.fam.meta.NewIter(&store.IterOptions{Prefix: p})
	if err != nil {
		return err
	}
	ids := map[uint32]string{}
	for it.Next() {
		name := string(it.Key()[len(p):])
		r, err := decodeBiz(it.Value())
		if err != nil || validBusiness(name) != nil {
			it.Close()
			return fmt.Errorf("%w: likes business record %s: %v", store.ErrCorrupt, quote.Input(name), err)
		}
		if other, dup := ids[r.id]; dup {
			it.Close()
			return fmt.Errorf("%w: likes businesses %s and %s share id %d", store.ErrCorrupt, other, name, r.id)
		}
		ids[r.id] = name
		b, err := l.openBusiness(name, r.id)
		if err != nil {
			it.Close()
			return err
		}
		m[name] = b
	}
	if err := it.Close(); err != nil {
		return err
	}
	l.biz.byName.Store(&m)
	return nil
}

// openBusiness returns the handle of a business whose counter exists.
func (l *Likes) openBusiness(name string, id uint32) (*business, error) {
	cn := CounterName(name)
	c, err := l.db.Counter(cn)
	if err != nil {
		return nil, fmt.Errorf("likes: business %s: %w", name, err)
	}
	if cols := c.Columns(); len(cols) != 2 || cols[0] != LikesColumn || cols[1] != DislikesColumn {
		return nil, fmt.Errorf("%w: counter %s has columns %v, want [%s %s]", ErrBusinessConflict, cn, cols, LikesColumn, DislikesColumn)
	}
	if err := l.db.Adopt(c, "likes"); err != nil {
		return nil, fmt.Errorf("likes: business %s: %w", name, err)
	}
	return &business{id: id, name: name, counter: cn, c: c}, nil
}

// validBusiness reports why name cannot name a business.
func validBusiness(name string) error {
	if len(name) > MaxBusinessLen {
		return fmt.Errorf("%w: %s is %d bytes, limit %d", ErrInvalidBusiness, quote.Input(name), len(name), MaxBusinessLen)
	}
	if err := store.ValidateName(name); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidBusiness, err)
	}
	return nil
}

// lookup returns the business named name, nil if it does not exist; an
// invalid name is an error.
func (l *Likes) lookup(name string) (*business, error) {
	if b := (*l.biz.byName.Load())[name]; b != nil {
		return b, nil
	}
	if err := validBusiness(name); err != nil {
		return nil, err
	}
	return nil, nil
}

// unknownBusiness is ErrUnknownBusiness naming the business and the
// businesses there are.
func (l *Likes) unknownBusiness(name string) error {
	known := strings.Join(l.Businesses(), ", ")
	if known == "" {
		known = "none yet"
	}
	return fmt.Errorf("%w %s (businesses: %s)", ErrUnknownBusiness, quote.Input(name), known)
}

// Businesses returns the names of the businesses, sorted.
func (l *Likes) Businesses() []string {
	m := *l.biz.byName.Load()
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// AddBusiness declares a business, with its counter shaped by opts.
// Declaring an existing business is a no-op. A Load declares the
// businesses it names (with Options.Business); so does a first like with
// Options.CreateBusinesses.
func (l *Likes) AddBusiness(name string, opts BusinessOptions) error {
	_, err := l.ensureBusiness(name, opts)
	return err
}

// ensureBusiness returns the business named name, creating it if needed.
func (l *Likes) ensureBusiness(name string, opts BusinessOptions) (*business, error) {
	if b, err := l.lookup(name); b != nil || err != nil {
		return b, err
	}
	if err := opts.counterOptions().Validate(); err != nil {
		return nil, fmt.Errorf("%w: business %s: %v", ErrInvalidOption, name, err)
	}
	l.biz.mu.Lock()
	defer l.biz.mu.Unlock()
	gen, err := l.syncBusinessesLocked()
	if err != nil {
		return nil, err
	}
	cur := *l.biz.byName.Load()
	if b := cur[name]; b != nil {
		return b, nil
	}
	if len(cur) >= maxBusinesses {
		return nil, fmt.Errorf("%w: %d businesses exist (limit %d)", ErrBusinessConflict, len(cur), maxBusinesses)
	}
	var id uint32 = 1
	for _, b := range cur {
		id = max(id, b.id+1)
	}
	// The counter first (its schema is synced), then the record: a crash
	// between them leaves a counter the next creation adopts.
	cn := CounterName(name)
	if _, err := l.db.Counter(cn); errors.Is(err, store.ErrCounterNotFound) {
		if err := l.db.CreateCounter(cn, opts.counterOptions()); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, err
	}
	c, err := l.db.Counter(cn)
	if err != nil {
		return nil, err
	}
	if err := l.db.Adopt(c, "likes"); err != nil {
		return nil, err
	}
	for i, col := range []string{LikesColumn, DislikesColumn} {
		cols := c.Columns()
		switch {
		case len(cols) > i && cols[i] == col:
		case len(cols) == i:
			if err := l.db.AddColumn(cn, col, store.ColumnOptions{HintBits: 16, MaxBits: 32}); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("%w: counter %s exists with columns %v", ErrBusinessConflict, cn, cols)
		}
	}
	if len(c.Columns()) != 2 {
		return nil, fmt.Errorf("%w: counter %s exists with columns %v", ErrBusinessConflict, cn, c.Columns())
	}
	rec := bizRec{id: id, created: l.opts.Now().UnixMilli()}
	if dup, err := l.putMetaIn(gen, appendMetaKey(nil, metaBizPre+name), appendBiz(nil, rec)); err != nil {
		return nil, err
	} else if dup {
		// A re-applied entry whose record commit is in the store would
		// have found the business loaded: this commit took the number of
		// another of the entry's commits (a command that commits
		// differently on a re-apply, store apply.go). Memory follows the
		// store, not the skipped write.
		if err := l.loadBusinesses(); err != nil {
			return nil, err
		}
		if b := (*l.biz.byName.Load())[name]; b != nil {
			return b, nil
		}
		return nil, fmt.Errorf("%w: business %s: its record's commit was skipped as a duplicate of a re-applied entry", store.ErrValueRange, quote.Input(name))
	}
	b := &business{id: id, name: name, counter: cn, c: c}
	next := make(map[string]*business, len(cur)+1)
	for k, v := range cur {
		next[k] = v
	}
	next[name] = b
	l.biz.byName.Store(&next)
	return b, nil
}

// BoardDays returns the number of daily boards kept (0: none).
func (l *Likes) BoardDays() int { return l.cfg.boardDays }

// RoaringThreshold returns the set size at which sets become roaring.
func (l *Likes) RoaringThreshold() int { return l.cfg.roaringThreshold }

// Stat is one key/value pair of Stats (store's, shared by every package
// above it).
type Stat = store.Stat

// Stats returns figures for tools (tally stats prints them as likes.KEY
// VALUE): the persisted options, the businesses, the ordinals allocated,
// and since New the transitions, commit groups (a group is one batch of
// one stripe's queued transitions), the largest group, how many
// transitions waited for a stripe's leader (contention) and the sets
// converted to roaring, the Pebble point Gets of states, item records and
// day scores that neither the key filter nor a cache answered, and the size of the cache of user ordinals and its
// hits and misses since New.
func (l *Likes) Stats() []Stat {
	i := func(v int64) string { return strconv.FormatInt(v, 10) }
	l.ords.mu.Lock()
	next := l.ords.next
	l.ords.mu.Unlock()
	return []Stat{
		{Key: "board_days", Value: i(int64(l.cfg.boardDays))},
		{Key: "roaring_threshold", Value: i(int64(l.cfg.roaringThreshold))},
		{Key: "businesses", Value: i(int64(len(*l.biz.byName.Load())))},
		{Key: "ordinals", Value: i(int64(next))},
		{Key: "stripes", Value: i(int64(len(l.stripes)))},
		{Key: "transitions", Value: i(l.stats.ops.Load())},
		{Key: "groups", Value: i(l.stats.groups.Load())},
		{Key: "max_group", Value: i(l.stats.maxGroup.Load())},
		{Key: "waited", Value: i(l.stats.waits.Load())},
		{Key: "conversions", Value: i(l.stats.conversions.Load())},
		{Key: "board_moves", Value: i(l.stats.boardMoves.Load())},
		{Key: "state_gets", Value: i(l.stats.stateGets.Load())},
		{Key: "item_gets", Value: i(l.stats.itemGets.Load())},
		{Key: "dayscore_gets", Value: i(l.stats.dayGets.Load())},
		{Key: "interrupted_loads", Value: i(int64(len(l.interrupted)))},
		{Key: "ordinal_cache_bytes", Value: i(l.ords.cache.bytes())},
		{Key: "ordinal_cache_hits", Value: i(l.ords.cache.hitCount())},
		{Key: "ordinal_cache_misses", Value: i(l.ords.cache.missCount())},
	}
}

// today returns the current UTC day number (days since 1970-01-01).
func (l *Likes) today() uint32 { return dayOf(l.opts.Now().UnixMilli()) }

func dayOf(ms int64) uint32 {
	if ms < 0 {
		return 0
	}
	return uint32(ms / 86_400_000)
}

// firstKeptDay returns the oldest day whose board is kept, given today;
// ok is false when daily boards are off.
func (l *Likes) firstKeptDay(today uint32) (uint32, bool) {
	d := l.cfg.boardDays
	if d == 0 {
		return 0, false
	}
	if int64(today) < int64(d-1) {
		return 0, true
	}
	return today - uint32(d-1), true
}

package unread

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tallydb/tally/internal/testutil"
	"github.com/tallydb/tally/store"
	"github.com/tallydb/tally/timeline"
)

// env is a store on a crash-simulating in-memory filesystem with the fake
// follow graph and unread on it. Its lifecycle is testutil.Store's: the
// cleanup runs both Checks and closes.
type env struct {
	t   testing.TB
	st  *testutil.Store
	dir string
	// before runs on the graph before unread opens, at the first open only
	// (follows that predate unread).
	before func(g testGraph)
	uopts  Options // without Graph
	real   bool    // the follow graph is the real timeline, not the stand-in
	posts  *postLog
	db     *store.DB
	g      testGraph
	x      *Unread
}

// graphKinds names the two follow graphs tests run against.
var graphKinds = []struct {
	name string
	real bool
}{{"fake", false}, {"timeline", true}}

func storeOptions(fs vfs.FS) *store.Options {
	fams := append(Families(), fakeEdges)
	return &store.Options{
		FS: fs, DisableBackground: true, CacheSize: 4 << 20, MemTableSize: 2 << 20,
		Families: append(fams, timeline.Families()...),
	}
}

// newEnv opens a new store with the stand-in graph; before (if not nil)
// runs on the graph before unread is opened (follows that predate unread).
func newEnv(t testing.TB, uopts *Options, before func(g testGraph)) *env {
	return newEnvOn(t, false, uopts, before)
}

// newEnvOn is newEnv on the real timeline when real is set.
func newEnvOn(t testing.TB, real bool, uopts *Options, before func(g testGraph)) *env {
	t.Helper()
	e := &env{t: t, dir: "db", real: real, posts: &postLog{byAuthor: map[uint64][]uint64{}}, before: before}
	if uopts != nil {
		e.uopts = *uopts
	}
	e.st = testutil.OpenStore(t, vfs.NewCrashableMem(), testutil.Hooks{Open: e.open, Check: e.check, Close: e.close})
	return e
}

func (e *env) open(fs vfs.FS) {
	e.t.Helper()
	db, err := store.Open(e.dir, storeOptions(fs))
	if err != nil {
		e.t.Fatalf("open: %v", err)
	}
	e.db = db
	if e.real {
		tl, err := timeline.New(db, &timeline.Options{ExpireInterval: -1})
		if err != nil {
			e.t.Fatal(err)
		}
		e.g = &tlGraph{Timeline: tl, log: e.posts}
	} else if e.g, err = newFakeGraph(db); err != nil {
		e.t.Fatal(err)
	}
	if e.before != nil {
		e.before(e.g)
		e.before = nil
	}
	o := e.uopts
	o.Graph = e.g
	if e.x, err = New(db, &o); err != nil {
		e.t.Fatalf("unread.New: %v", err)
	}
}

// check runs unread's, the graph's and the store's checks.
func (e *env) check() error {
	return errors.Join(checkStore(e.x), e.g.check())
}

// close closes the graph and the store; a store the test closed itself
// is closed, as wanted.
func (e *env) close() error {
	err := errors.Join(e.g.close(), e.db.Close())
	if errors.Is(err, store.ErrClosed) {
		return nil
	}
	return err
}

// reopen checks, closes the store cleanly and opens it again.
func (e *env) reopen() { e.st.Reopen() }

// crash drops everything not synced (keepPercent of the unsynced data
// survives) and opens the store on what is left.
func (e *env) crash(keepPercent int, rng *rand.Rand) { e.st.Crash(keepPercent, rng) }

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func mustV[T any](t testing.TB) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// rawPebble closes the store, runs fn on its Pebble instance opened
// directly (to damage or repair bytes underneath unread) and reopens it.
func (e *env) rawPebble(fn func(p *pebble.DB)) {
	e.t.Helper()
	e.st.Close()
	m := *pebble.DefaultMerger
	m.Name = "tally.merge.v1" // store's Merger name; nothing merges here
	p, err := pebble.Open(e.dir+"/db", &pebble.Options{FS: e.st.FS(), Merger: &m, DisableAutomaticCompactions: true})
	must(e.t, err)
	fn(p)
	must(e.t, p.Close())
	e.st.Open()
}

// rawGet returns key's stored value as Pebble holds it.
func rawGet(e *env, key []byte) []byte {
	e.t.Helper()
	var out []byte
	e.rawPebble(func(p *pebble.DB) {
		v, c, err := p.Get(key)
		must(e.t, err)
		out = append(out, v...)
		c.Close()
	})
	return out
}

// rawSet sets key to v underneath the store.
func rawSet(e *env, key, v []byte) {
	e.t.Helper()
	e.rawPebble(func(p *pebble.DB) { must(e.t, p.Set(key, v, pebble.Sync)) })
}

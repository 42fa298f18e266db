package likes

import (
	"cmp"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/tallydb/tally/internal/testutil"
	"github.com/tallydb/tally/store"
)

// clock is a settable clock for like times and day boards.
type clock struct{ ms atomic.Int64 }

func newClock(t time.Time) *clock {
	c := &clock{}
	c.ms.Store(t.UnixMilli())
	return c
}

func (c *clock) Now() time.Time          { return time.UnixMilli(c.ms.Load()) }
func (c *clock) Advance(d time.Duration) { c.ms.Add(d.Milliseconds()) }

var epoch = time.Date(2025, 3, 10, 12, 0, 0, 0, time.UTC)

// env is a store and a Likes on it. Its lifecycle is testutil.Store's:
// the cleanup runs Check and closes.
type env struct {
	t     *testing.T
	dir   string
	st    *testutil.Store
	clock *clock
	db    *store.DB
	l     *Likes
	opts  Options
	// syncAlways opens the store with SyncAlways (crash tests).
	syncAlways bool
	// jobWorkers is the store's Options.JobWorkers (default -1: jobs run
	// only when a test runs them).
	jobWorkers int
}

func newEnv(t *testing.T, opts *Options) *env {
	t.Helper()
	e := &env{t: t, dir: t.TempDir(), clock: newClock(epoch)}
	if opts != nil {
		e.opts = *opts
	}
	e.opts.Now = e.clock.Now
	// Most tests like in businesses they never declared: that is
	// TestUndeclaredBusiness's subject, not theirs.
	e.opts.CreateBusinesses = true
	e.start(vfs.Default)
	return e
}

// start opens e on fs, with Check and Close at the test's cleanup.
func (e *env) start(fs vfs.FS) {
	e.st = testutil.OpenStore(e.t, fs, testutil.Hooks{Open: e.open, Check: func() error { return e.l.Check() }, Close: e.close})
}

func (e *env) storeOptions(fs vfs.FS) *store.Options {
	d := store.NoSync
	if e.syncAlways {
		d = store.SyncAlways
	}
	return &store.Options{Durability: d, FS: fs, Families: Families(), Now: e.clock.Now, DisableBackground: true, JobWorkers: cmp.Or(e.jobWorkers, -1)}
}

func (e *env) open(fs vfs.FS) {
	e.t.Helper()
	db, err := store.Open(e.dir, e.storeOptions(fs))
	if err != nil {
		e.t.Fatal(err)
	}
	l, err := New(db, &e.opts)
	if err != nil {
		db.Close()
		e.t.Fatal(err)
	}
	e.db, e.l = db, l
}

func (e *env) close() error {
	err := e.db.Close()
	e.db, e.l = nil, nil
	return err
}

// reopen checks, closes and opens the store again.
func (e *env) reopen() { e.st.Reopen() }

func (e *env) check() {
	e.t.Helper()
	if err := e.l.Check(); err != nil {
		e.t.Fatal(err)
	}
}

// mustOK fails t with err, if any.
func mustOK(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func must[T any](t testing.TB) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// isRoaring reports whether item's sets are roaring bitmaps.
func (l *Likes) isRoaring(business string, item uint64) (bool, error) {
	b, err := l.lookup(business)
	if err != nil || b == nil {
		return false, err
	}
	var kb, vb []byte
	rec, err := l.readItem(b.id, item, &kb, &vb)
	return rec.roaring, err
}

// openFailing opens likes with opts on an in-memory store of durability d
// whose WAL syncs fail (ENOSPC) while the returned toggle is on, and which
// heals itself in place (ReopenOnFailure); the store closes with the test.
func openFailing(t *testing.T, d store.Durability, opts *Options) (*store.DB, *errorfs.Toggle, *Likes) {
	t.Helper()
	fault := testutil.FullWAL(false)
	so := &store.Options{FS: errorfs.Wrap(vfs.NewMem(), fault), Families: Families(), DisableBackground: true,
		JobWorkers: -1, ReopenOnFailure: true, Durability: d}
	db, err := store.Open("l", so)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	l, err := New(db, opts)
	if err != nil {
		t.Fatal(err)
	}
	return db, fault, l
}

package timeline

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tallydb/tally/internal/testutil"
	"github.com/tallydb/tally/store"
)

// clock is a settable time source for tests.
type clock = testutil.Clock

func newClock() *clock { return testutil.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) }

// env is a store and timeline on an in-memory filesystem, with background
// work off (tests run jobs with run) and a settable clock. Its lifecycle
// (open, reopen, crash, Check and close at cleanup) is testutil.Store's.
type env struct {
	t     testing.TB
	st    *testutil.Store
	dir   string
	clock *clock
	db    *store.DB
	tl    *Timeline
	cfg   Config
	// sync opens the store with SyncAlways, so a crash keeps every
	// acknowledged operation.
	sync bool
	// inline and shared are Options.InlineFanout and SharedFanout.
	// newEnv sets -1 for both (every fan-out a job of its own: the tests
	// written before issue 18 tell that story); tests of small fan-outs
	// set them.
	inline, shared int
	// remote is Options.Remote (nil: one shard).
	remote Remote
}

func storeOptions(fs vfs.FS) *store.Options {
	return &store.Options{FS: fs, DisableBackground: true, JobWorkers: -1, CacheSize: 8 << 20, MemTableSize: 4 << 20,
		JobBytesPerSec: -1, Durability: store.NoSync}
}

// newEnv opens a fresh environment; at cleanup it runs Check and closes.
func newEnv(t testing.TB, cfg Config) *env {
	t.Helper()
	e := &env{t: t, dir: "db", clock: newClock(), cfg: cfg, inline: -1, shared: -1}
	e.st = testutil.OpenStore(t, vfs.NewMem(), e.hooks())
	return e
}

func (e *env) hooks() testutil.Hooks {
	return testutil.Hooks{Open: e.openOn, Check: func() error { return e.tl.Check() }, Close: e.closeHandles}
}

func (e *env) openOn(fs vfs.FS) {
	e.t.Helper()
	o := storeOptions(fs)
	if e.sync {
		o.Durability = store.SyncAlways
	}
	db, err := store.Open(e.dir, o)
	if err != nil {
		e.t.Fatalf("open: %v", err)
	}
	tl, err := New(db, &Options{Config: e.cfg, Now: e.clock.Now, ExpireInterval: -1, InlineFanout: e.inline, SharedFanout: e.shared, Remote: e.remote})
	if err != nil {
		e.t.Fatalf("timeline: %v", err)
	}
	e.db, e.tl = db, tl
}

func (e *env) closeHandles() error {
	err := errors.Join(e.tl.Close(), e.db.Close())
	e.db, e.tl = nil, nil
	return err
}

// open opens the store closed by close.
func (e *env) open() { e.st.Open() }

// close closes without Check: the cleanup then does nothing.
func (e *env) close() { e.st.Close() }

// reopen checks, closes and opens the store again.
func (e *env) reopen() { e.st.Reopen() }

// crash drops everything not synced and reopens on what is left.
func (e *env) crash(rng *rand.Rand) { e.st.Crash(rng.IntN(100), rng) }

// run runs every queued job.
func (e *env) run() {
	e.t.Helper()
	if err := e.db.RunJobs(context.Background(), nil); err != nil {
		e.t.Fatalf("run jobs: %v", err)
	}
}

func (e *env) check() {
	e.t.Helper()
	if err := e.tl.Check(); err != nil {
		e.t.Fatal(err)
	}
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed)) }

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// homeAll reads user's whole home with pages of limit, checking that
// pages join without duplicates and end with NoMore.
func homeAll(t testing.TB, tl *Timeline, user uint64, limit int) []Entry {
	t.Helper()
	return homeAllWith(t, tl, user, limit, HomeOptions{})
}

// homeAllWith reads user's whole home with opts, page by page.
func homeAllWith(t testing.TB, tl *Timeline, user uint64, limit int, opts HomeOptions) []Entry {
	t.Helper()
	var all []Entry
	cursor := ""
	for i := 0; ; i++ {
		p, err := tl.HomeWith(user, cursor, limit, opts)
		if err != nil {
			t.Fatalf("home %d page %d: %v", user, i, err)
		}
		for _, e := range p.Entries {
			if n := len(all); n > 0 && all[n-1].Post <= e.Post {
				t.Fatalf("home %d page %d: %d after %d", user, i, e.Post, all[n-1].Post)
			}
			all = append(all, e)
		}
		if p.NoMore {
			if p.Cursor != "" {
				t.Fatalf("home %d: NoMore with a cursor", user)
			}
			return all
		}
		if len(p.Entries) != limit && limit > 0 {
			t.Fatalf("home %d page %d: %d entries of %d without NoMore", user, i, len(p.Entries), limit)
		}
		cursor = p.Cursor
		if i > 1_000_000 {
			t.Fatal("home never ends")
		}
	}
}

// dumpUser describes what the store holds for user, for failure messages.
func dumpUser(tl *Timeline, user uint64) string {
	var b strings.Builder
	info, err := tl.User(user)
	fmt.Fprintf(&b, "user %d: %+v %v\n", user, info, err)
	list, _, _ := tl.followeesOf(info.Ordinal, nil, nil)
	fmt.Fprintf(&b, "  followees %v pulled %v pending %v\n", list, *tl.pulled.Load(), tl.pendingOf(info.Ordinal, nil))
	v, ok, err := tl.fam.inbox.Get(inboxKey(nil, info.Ordinal), nil)
	if ok {
		l, err := store.DecodeTopList(v)
		fmt.Fprintf(&b, "  inbox %+v %v\n", l, err)
	} else {
		fmt.Fprintf(&b, "  no inbox %v\n", err)
	}
	return b.String()
}

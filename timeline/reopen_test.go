package timeline

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/tallydb/tally/internal/testutil"
	"github.com/tallydb/tally/store"
)

// TestOrdinalsAfterReopen: a follow that gives two new users ordinals
// fails at the WAL sync, yet its write is on disk; the store heals itself
// in place. The next new user must not get one of those ordinals again
// (before the timeline followed reopens it did: Check found two users on
// one ordinal), and the recovered follow is in force.
func TestOrdinalsAfterReopen(t *testing.T) {
	mem := vfs.NewMem()
	fault := testutil.FullWAL(false)
	so := storeOptions(errorfs.Wrap(mem, fault))
	so.Durability = store.SyncAlways
	so.ReopenOnFailure = true
	db, err := store.Open("db", so)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tl, err := New(db, &Options{ExpireInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Close()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err = tl.Follow(1, 2)
	must(err)
	fault.On()
	if _, err := tl.Follow(3, 4); !errors.Is(err, store.ErrFailed) {
		t.Fatalf("follow with a failing WAL sync: %v", err)
	}
	fault.Off()
	testutil.UntilHealed(t, "follow", store.ErrFailed, db.Generation, func() error {
		_, err := tl.Follow(5, 6)
		return err
	})
	must(tl.Check())
	ords := map[uint64]bool{}
	for _, u := range []uint64{1, 2, 3, 4, 5, 6} {
		var buf [numCols]uint64
		r, err := tl.row(u, buf[:0])
		must(err)
		if o := r[colOrd]; o != 0 {
			if ords[o] {
				t.Fatalf("user %d shares ordinal %d", u, o)
			}
			ords[o] = true
		}
	}
	must(tl.Close())
	must(db.Close())
	db2, err := store.Open("db", storeOptions(mem))
	must(err)
	defer db2.Close()
	tl2, err := New(db2, &Options{ExpireInterval: -1})
	must(err)
	defer tl2.Close()
	must(tl2.Check())
}

// healing is a timeline on a store opened with ReopenOnFailure, whose WAL
// syncs fail while fault is on, with a settable clock.
type healing struct {
	t     *testing.T
	db    *store.DB
	tl    *Timeline
	fault *errorfs.Toggle
	clock *clock
	ord   uint32 // user 1's ordinal (failedFollow)
}

func newHealing(t *testing.T) *healing {
	return newHealingWith(t, Options{ExpireInterval: -1})
}

// newHealingWith is newHealing with the timeline's options o (its clock
// replaced by the settable one).
func newHealingWith(t *testing.T, o Options) *healing {
	fault := testutil.FullWAL(false)
	so := storeOptions(errorfs.Wrap(vfs.NewMem(), fault))
	so.Durability = store.SyncAlways
	so.ReopenOnFailure = true
	db, err := store.Open("db", so)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	h := &healing{t: t, db: db, fault: fault, clock: newClock()}
	o.Now = h.clock.Now
	h.tl, err = New(db, &o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.tl.Close() })
	return h
}

func (h *healing) must(err error) {
	h.t.Helper()
	if err != nil {
		h.t.Fatal(err)
	}
}

// holdAfter registers a ReopenHook after the timeline's, so its After runs
// before the timeline's (reverse order), while the store already takes
// writes: it closes inAfter and waits for release.
func (h *healing) holdAfter() (inAfter <-chan struct{}, release chan<- struct{}) {
	in, rel := make(chan struct{}), make(chan struct{})
	h.t.Cleanup(h.db.OnReopen(store.ReopenHook{After: func(bool) error {
		close(in)
		<-rel
		return nil
	}}))
	return in, rel
}

// failedFollow makes user 1 follow 2 and 3 in a command that fails at the
// WAL sync; its write is on disk (pending marks and pair jobs included)
// for the reopen to find. Users 1, 2 and 3 got ordinals, and 1 a live
// inbox, before: the command writes nothing before its batch. The fault is
// off again when it returns.
func (h *healing) failedFollow() {
	h.t.Helper()
	tl := h.tl
	_, err := tl.Follow(2, 3)
	h.must(err)
	_, err = tl.Follow(1, 4)
	h.must(err)
	_, err = tl.Home(1, "", 10)
	h.must(err)
	h.ord, err = tl.ordOf(1)
	h.must(err)
	var buf [numCols]uint64
	r, err := tl.row(1, buf[:0])
	h.must(err)
	if r[colRead] == 0 {
		h.t.Fatal("user 1 has no live inbox")
	}
	h.fault.On()
	if _, err := tl.FollowMany(1, 2, 3); !errors.Is(err, store.ErrFailed) {
		h.t.Fatalf("follow with a failing WAL sync: %v", err)
	}
	h.fault.Off()
	if got := tl.pendingOf(h.ord, nil); len(got) != 0 {
		h.t.Fatalf("pending marks %v in memory after a failed follow", got)
	}
}

// TestCheckDuringReopen: a follow that adds pending backfill marks fails
// at the WAL sync, yet its write is on disk; the store heals in place and
// takes writes again before the timeline's ReopenHook.After has reloaded
// the pending-mark index (another package's After runs first, here one
// that waits). A Check in that window found the marks stored but not in
// memory (TestDBModel, seed 1795912122692790848, under load). Check now
// takes graphMu's read side, which the reopen holds from Before to the end
// of the reload: it waits for the reload and passes.
func TestCheckDuringReopen(t *testing.T) {
	h := newHealing(t)
	tl := h.tl
	inAfter, release := h.holdAfter()
	h.failedFollow()
	<-inAfter
	if err := h.db.Checkpoint(); err != nil {
		t.Fatalf("the store does not take writes in the hooks' After: %v", err)
	}
	res := make(chan error, 1)
	go func() { res <- tl.Check() }()
	select {
	case err := <-res:
		close(release)
		t.Fatalf("Check ran while the reopen had not reloaded the timeline: %v", err)
	case <-testutil.BlockedIn(res, "timeline.(*Timeline).Check", "sync.(*RWMutex).RLock"):
	}
	close(release)
	h.must(<-res)
	if got := tl.pendingOf(h.ord, nil); len(got) != 2 {
		t.Fatalf("pending marks %v in memory after the reopen found the follow durable", got)
	}
	for _, f := range []uint64{2, 3} {
		ok, err := tl.IsFollowing(1, f)
		h.must(err)
		if !ok {
			t.Fatalf("the failed follow of %d was not found durable", f)
		}
	}
	h.must(tl.Check())
}

// TestExpiryDuringReopen: the expiry job, run by a caller (WaitJob, as
// Expire does) after the store healed but before the timeline's After
// reloaded the pending-mark index, expired a user whose failed-but-durable
// follow had stored pending marks: it dropped the marks its stale index
// listed (none) with the read mark, and the reload then found marks of a
// user without a read mark, for good. Expiry now clears users under
// graphMu's read side, as the pair job does, and reads its config there
// first (startRun): it waits for the reload.
func TestExpiryDuringReopen(t *testing.T) {
	h := newHealing(t)
	tl := h.tl
	h.clock.Advance(time.Hour)
	inAfter, release := h.holdAfter()
	job, err := tl.EnqueueExpire() // older than the follow's pair jobs: runs alone
	h.must(err)
	h.failedFollow()
	<-inAfter
	h.clock.Advance(2 * tl.Config().ActiveWindow)
	res := make(chan error, 1)
	go func() { res <- h.db.WaitJob(context.Background(), job) }()
	select {
	case err := <-res:
		close(release)
		h.must(err)
		t.Fatalf("the expiry ran while the reopen had not reloaded the timeline; then Check: %v", tl.Check())
	case <-testutil.BlockedIn(res, "timeline.(*Timeline).runExpire", "sync.(*RWMutex).RLock"):
	}
	close(release)
	h.must(<-res)
	if got := tl.pendingOf(h.ord, nil); len(got) != 0 {
		t.Fatalf("pending marks %v in memory after the expiry", got)
	}
	h.must(tl.Check())
}

// TestReloadErrorFailsStore: the store heals in place but the timeline
// cannot reload its mirrors (an injected read error). The error reaches
// the store: it refuses writes (ErrFailed wrapping the timeline's error)
// while the mirrors are those of before the reopen, which lack the
// pending marks of a failed-but-durable follow; the next reopen reloads
// them, and Check passes. Before, the reload's error was dropped and the
// store took writes decided from the stale mirrors.
func TestReloadErrorFailsStore(t *testing.T) {
	h := newHealing(t)
	tl := h.tl
	errReload := errors.New("injected: a timeline family read failed")
	tl.testReload = testutil.FailFirstReload(h.fault, errReload)
	h.failedFollow()
	testutil.UntilRefused(t, h.db.Writable, errReload)
	if got := tl.pendingOf(h.ord, nil); len(got) != 0 {
		t.Fatalf("pending marks %v: the failed reload changed the mirrors", got)
	}
	if _, err := tl.Follow(7, 8); !errors.Is(err, store.ErrFailed) || !errors.Is(err, errReload) {
		t.Fatalf("follow on the stale mirrors: %v (want ErrFailed wrapping %v)", err, errReload)
	}
	if ok, err := tl.IsFollowing(1, 4); err != nil || !ok {
		t.Fatalf("read on the failed store: %v %v", ok, err)
	}
	h.fault.Off()
	testutil.UntilHealed(t, "follow", store.ErrFailed, h.db.Generation, func() error {
		_, err := tl.Follow(5, 6)
		return err
	})
	if g := h.db.Generation(); g != 2 {
		t.Fatalf("generation %d, want 2 (a reopen whose reload failed, then one that reloaded)", g)
	}
	if got := tl.pendingOf(h.ord, nil); len(got) != 2 {
		t.Fatalf("pending marks %v after the second reopen reloaded the mirrors", got)
	}
	h.must(tl.Check())
}

// TestFanoutDuringReopen: a fan-out job (one of its own, or the shared
// one) run by a caller (WaitJob) after the store healed but before the
// timeline's After reloaded its mirrors read the config, the pulled
// authors and the push set (or the shared job's first marker) of before
// the reopen, and committed what it decided from them with a batch of the
// new generation. A run now reads them, and makes its batch, under
// graphMu's read side at its start: it waits for the reload, then
// delivers, and Check passes.
func TestFanoutDuringReopen(t *testing.T) {
	for _, c := range []struct {
		name   string
		shared int
		start  string // where the run must wait
	}{
		{"own", -1, "timeline.(*Timeline).planFanout"},
		{"shared", DefaultSharedFanout, "timeline.(*Timeline).startShared"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHealingWith(t, Options{ExpireInterval: -1, InlineFanout: -1, SharedFanout: c.shared})
			tl := h.tl
			_, err := tl.Follow(1, 4)
			h.must(err)
			_, err = tl.Home(1, "", 10)
			h.must(err)
			res, err := tl.Publish(4, 100)
			h.must(err)
			if res.Job == 0 {
				t.Fatal("the publish enqueued no fan-out job")
			}
			inAfter, release := h.holdAfter()
			h.failedFollow()
			<-inAfter
			done := make(chan error, 1)
			go func() { done <- h.db.WaitJob(context.Background(), res.Job) }()
			select {
			case err := <-done:
				close(release)
				h.must(err)
				t.Fatalf("the fan-out ran while the reopen had not reloaded the timeline; then Check: %v", tl.Check())
			case g := <-testutil.BlockedIn(done, "timeline.(*Timeline).run", "sync.(*RWMutex).RLock"):
				if !strings.Contains(g, c.start) {
					close(release)
					t.Fatalf("the fan-out read the mirrors before waiting for the reload; it waits in:\n%s", g)
				}
			}
			close(release)
			h.must(<-done)
			page, err := tl.Home(1, "", 10)
			h.must(err)
			if !slices.ContainsFunc(page.Entries, func(e Entry) bool { return e.Post == 100 }) {
				t.Fatalf("post 100 not delivered to user 1: %+v", page.Entries)
			}
			h.must(tl.Check())
		})
	}
}

// TestExpiryConfigDuringReopen: a SetConfig that lowers the active window
// fails at the WAL sync, yet its write is on disk. The expiry job, run by
// a caller after the store healed but before the timeline's After
// reloaded the config, judged read marks by the window of before the
// reopen and kept a user the durable config expires. It now reads the
// config, and makes its batch, under graphMu's read side (startRun).
func TestExpiryConfigDuringReopen(t *testing.T) {
	h := newHealing(t)
	tl := h.tl
	_, err := tl.Follow(1, 4)
	h.must(err)
	_, err = tl.Home(1, "", 10)
	h.must(err)
	h.clock.Advance(48 * time.Hour) // within the default window, past a day
	inAfter, release := h.holdAfter()
	h.fault.On()
	if _, err := tl.SetConfig(Config{ActiveWindow: 24 * time.Hour}); !errors.Is(err, store.ErrFailed) {
		t.Fatalf("SetConfig with a failing WAL sync: %v", err)
	}
	h.fault.Off()
	<-inAfter
	job, err := tl.EnqueueExpire()
	h.must(err)
	done := make(chan error, 1)
	go func() { done <- h.db.WaitJob(context.Background(), job) }()
	select {
	case err := <-done:
		close(release)
		h.must(err)
	case <-testutil.BlockedIn(done, "timeline.(*Timeline).runExpire", "sync.(*RWMutex).RLock"):
		close(release)
		h.must(<-done)
	}
	tl.graphMu.RLock() // the reload is over
	tl.graphMu.RUnlock()
	if w := tl.Config().ActiveWindow; w != 24*time.Hour {
		t.Fatalf("active window %v after the reopen found the SetConfig durable", w)
	}
	var buf [numCols]uint64
	r, err := tl.row(1, buf[:0])
	h.must(err)
	if r[colRead] != 0 {
		t.Fatal("user 1, inactive for two days, was kept by an expiry that read the week-long window of before the reopen")
	}
	h.must(tl.Check())
}

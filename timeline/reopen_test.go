package timeline

import (
	"errors"
	"runtime"
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

// TestCheckDuringReopen: a follow that adds pending backfill marks fails
// at the WAL sync, yet its write is on disk; the store heals in place and
// takes writes again before the timeline's ReopenHook.After has reloaded
// the pending-mark index (another package's After runs first, here one
// that waits). A Check in that window found the marks stored but not in
// memory (TestDBModel, seed 1795912122692790848, under load). Check now
// takes graphMu's read side, which the reopen holds from Before to the end
// of the reload: it waits for the reload and passes.
func TestCheckDuringReopen(t *testing.T) {
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
	// Registered after the timeline's hook, so its After runs before the
	// timeline's (reverse order) while the store already takes writes.
	inAfter, release := make(chan struct{}), make(chan struct{})
	defer db.OnReopen(store.ReopenHook{After: func(bool) {
		close(inAfter)
		<-release
	}})()
	// Users 1, 2 and 3 get ordinals, and 1 a live inbox, so the follow
	// below writes pending marks and nothing before its batch.
	_, err = tl.Follow(2, 3)
	must(err)
	_, err = tl.Follow(1, 4)
	must(err)
	_, err = tl.Home(1, "", 10)
	must(err)
	ord, err := tl.ordOf(1)
	must(err)
	var buf [numCols]uint64
	r, err := tl.row(1, buf[:0])
	must(err)
	if r[colRead] == 0 {
		t.Fatal("user 1 has no live inbox")
	}
	fault.On()
	if _, err := tl.FollowMany(1, 2, 3); !errors.Is(err, store.ErrFailed) {
		t.Fatalf("follow with a failing WAL sync: %v", err)
	}
	if got := tl.pendingOf(ord, nil); len(got) != 0 {
		t.Fatalf("pending marks %v in memory after a failed follow", got)
	}
	fault.Off()
	<-inAfter
	if err := db.Checkpoint(); err != nil {
		t.Fatalf("the store does not take writes in the hooks' After: %v", err)
	}
	res := make(chan error, 1)
	go func() { res <- tl.Check() }()
	select {
	case err := <-res:
		release <- struct{}{}
		t.Fatalf("Check ran while the reopen had not reloaded the timeline: %v", err)
	case <-blockedIn(res, "timeline.(*Timeline).Check", "sync.(*RWMutex).RLock"):
	}
	close(release)
	must(<-res)
	if got := tl.pendingOf(ord, nil); len(got) != 2 {
		t.Fatalf("pending marks %v in memory after the reopen found the follow durable", got)
	}
	for _, f := range []uint64{2, 3} {
		ok, err := tl.IsFollowing(1, f)
		must(err)
		if !ok {
			t.Fatalf("the failed follow of %d was not found durable", f)
		}
	}
	must(tl.Check())
}

// blockedIn returns a channel closed once some goroutine's stack holds
// every frame of frames (a goroutine parked in a lock, say), or never if
// done receives first (it is not consumed: the caller reads it).
func blockedIn(done <-chan error, frames ...string) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		buf := make([]byte, 1<<20)
		for len(done) == 0 {
			n := runtime.Stack(buf, true)
			for _, g := range strings.Split(string(buf[:n]), "\n\n") {
				all := true
				for _, f := range frames {
					all = all && strings.Contains(g, f)
				}
				if all {
					close(ch)
					return
				}
			}
			time.Sleep(time.Millisecond)
		}
	}()
	return ch
}

package unread

import (
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/tallydb/tally/internal/testutil"
	"github.com/tallydb/tally/store"
)

// TestChannelsAfterReopen: a channel whose declaration fails at the WAL
// sync is on disk after the store heals itself in place; the next channel
// must get the next id (before unread followed reopens, it took the same
// one and overwrote the first channel's record), and the first channel's
// tag is the durable one.
func TestChannelsAfterReopen(t *testing.T) {
	mem := vfs.NewMem()
	fault := testutil.FullWAL(false)
	db, x := openHealing(t, errorfs.Wrap(mem, fault))
	defer db.Close()
	fault.On()
	if _, err := x.Mark("a"); !errors.Is(err, store.ErrFailed) {
		t.Fatalf("Mark with a failing WAL sync: %v", err)
	}
	fault.Off()
	testutil.UntilHealed(t, "Mark", store.ErrFailed, db.Generation, func() error {
		_, err := x.Mark("b")
		return err
	})
	checkChannelIDs(t, x, 3)
	must(t, x.Check())
	must(t, db.Close())
	db2, err := store.Open("u", storeOptions(mem))
	must(t, err)
	defer db2.Close()
	x2, err := New(db2, nil)
	must(t, err)
	if n := len(x2.Channels()); n != 3 {
		t.Fatalf("%d channels after a restart, want 3", n)
	}
	must(t, x2.Check())
}

// TestCacheGeneration: a cached snapshot is used only in the store
// generation it was read in.
func TestCacheGeneration(t *testing.T) {
	c := newSnapCache(1 << 20)
	c.put(&cacheEntry{user: 7, gen: 3, sgen: 0, size: 100})
	if c.get(7, 3, 0) == nil {
		t.Fatal("entry of the current generation not found")
	}
	if c.get(7, 3, 1) != nil {
		t.Fatal("entry of an older store generation used after a reopen")
	}
	c.put(&cacheEntry{user: 7, gen: 2, sgen: 1, size: 100})
	if c.get(7, 2, 1) == nil {
		t.Fatal("a newer generation's entry with a lower count did not replace the old one")
	}
	c.put(&cacheEntry{user: 7, gen: 9, sgen: 0, size: 100})
	if c.get(7, 2, 1) == nil {
		t.Fatal("a straggler of an older generation replaced the current entry")
	}
}

// TestReloadErrorFailsStore: the store heals in place but unread cannot
// reload its channels (an injected read error). The error reaches the
// store: it refuses writes (ErrFailed wrapping unread's error) while the
// channels are those of before the reopen, which lack one whose failed
// declaration is on disk; the next reopen reloads them, and Check passes.
// Before, the reload's error was dropped and a declaration took the id of
// the durable channel.
func TestReloadErrorFailsStore(t *testing.T) {
	fault := testutil.FullWAL(false)
	db, x := openHealing(t, errorfs.Wrap(vfs.NewMem(), fault))
	defer db.Close()
	errReload := errors.New("injected: an unread family read failed")
	x.testReload = testutil.FailFirstReload(fault, errReload)
	fault.On()
	if _, err := x.Mark("a"); !errors.Is(err, store.ErrFailed) {
		t.Fatalf("Mark with a failing WAL sync: %v", err)
	}
	fault.Off()
	testutil.UntilRefused(t, db.Writable, errReload)
	if n := len(x.Channels()); n != 1 {
		t.Fatalf("%d channels: the failed reload changed them", n)
	}
	if _, err := x.Mark("c"); !errors.Is(err, store.ErrFailed) || !errors.Is(err, errReload) {
		t.Fatalf("Mark on the stale channels: %v (want ErrFailed wrapping %v)", err, errReload)
	}
	fault.Off()
	testutil.UntilHealed(t, "Mark", store.ErrFailed, db.Generation, func() error {
		_, err := x.Mark("b")
		return err
	})
	if g := db.Generation(); g != 2 {
		t.Fatalf("generation %d, want 2 (a reopen whose reload failed, then one that reloaded)", g)
	}
	checkChannelIDs(t, x, 3)
	must(t, x.Check())
}

// checkChannelIDs fails t unless x holds n channels with distinct ids.
func checkChannelIDs(t *testing.T, x *Unread, n int) {
	t.Helper()
	ids := map[uint32]string{}
	for _, ch := range x.chans.byID {
		if other, ok := ids[ch.id]; ok {
			t.Fatalf("channels %s and %s share id %d", other, ch.name, ch.id)
		}
		ids[ch.id] = ch.name
	}
	if len(ids) != n {
		t.Fatalf("channels after the reopen: %v (want %d)", ids, n)
	}
}

// openHealing opens unread on a store on fs that heals itself in place
// (ReopenOnFailure), with one channel ("zero") marked. The caller closes
// the store.
func openHealing(t *testing.T, fs vfs.FS) (*store.DB, *Unread) {
	t.Helper()
	so := storeOptions(fs)
	so.ReopenOnFailure = true
	db, err := store.Open("u", so)
	must(t, err)
	x, err := New(db, nil)
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	if _, err := x.Mark("zero"); err != nil {
		db.Close()
		t.Fatal(err)
	}
	return db, x
}

package timeline

import (
	"errors"
	"testing"

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

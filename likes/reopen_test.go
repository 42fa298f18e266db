package likes

import (
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/tallydb/tally/internal/testutil"
	"github.com/tallydb/tally/store"
)

// TestBusinessIDAfterReopen: a business whose record write fails at the
// WAL sync may be on disk after the store heals itself in place; the next
// business must not take its id (before the fix it did, and the next Open
// refused the store: "businesses a and b share id 1").
func TestBusinessIDAfterReopen(t *testing.T) {
	mem := vfs.NewMem()
	fault := testutil.FullWAL(false)
	so := &store.Options{FS: errorfs.Wrap(mem, fault), Families: Families(), DisableBackground: true,
		JobWorkers: -1, ReopenOnFailure: true}
	db, err := store.Open("l", so)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	l, err := New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Business a's counter exists (a creation adopts it), so the record is
	// the only write AddBusiness makes.
	cn := CounterName("a")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(db.CreateCounter(cn, l.opts.Business.counterOptions()))
	for _, col := range []string{LikesColumn, DislikesColumn} {
		must(db.AddColumn(cn, col, store.ColumnOptions{HintBits: 16, MaxBits: 32}))
	}
	fault.On()
	if err := l.AddBusiness("a", BusinessOptions{}); !errors.Is(err, store.ErrFailed) {
		t.Fatalf("AddBusiness with a failing WAL sync: %v", err)
	}
	fault.Off()
	testutil.UntilHealed(t, "AddBusiness", store.ErrFailed, db.Generation, func() error {
		return l.AddBusiness("b", BusinessOptions{})
	})
	m := *l.biz.byName.Load()
	a, b := m["a"], m["b"]
	if a == nil || b == nil || a.id == b.id {
		t.Fatalf("businesses after the reopen: a %+v, b %+v", a, b)
	}
	must(l.Check())
	must(db.Close())
	db2, err := store.Open("l", &store.Options{FS: mem, Families: Families(), DisableBackground: true, JobWorkers: -1})
	must(err)
	defer db2.Close()
	l2, err := New(db2, nil)
	must(err)
	must(l2.Check())
}

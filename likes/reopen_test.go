package likes

import (
	"context"
	"errors"
	"strings"
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
	mustOK(t, db.CreateCounter(cn, l.opts.Business.counterOptions()))
	for _, col := range []string{LikesColumn, DislikesColumn} {
		mustOK(t, db.AddColumn(cn, col, store.ColumnOptions{HintBits: 16, MaxBits: 32}))
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
	mustOK(t, l.Check())
	mustOK(t, db.Close())
	db2, err := store.Open("l", &store.Options{FS: mem, Families: Families(), DisableBackground: true, JobWorkers: -1})
	mustOK(t, err)
	defer db2.Close()
	l2, err := New(db2, nil)
	mustOK(t, err)
	mustOK(t, l2.Check())
}

// TestHistogramAfterReopen: a like whose WAL writes and sync fail was
// applied to memory (its board keys visible, its histogram move applied
// under the commit lock) and is gone after the store heals in place; the
// histograms are rebuilt from the board keys then, so Check and Rank agree
// with the store (without the rebuild the lost like stays counted).
func TestHistogramAfterReopen(t *testing.T) {
	mem := vfs.NewMem()
	fault := testutil.FullWAL(true)
	so := &store.Options{FS: errorfs.Wrap(mem, fault), Families: Families(), DisableBackground: true,
		JobWorkers: -1, ReopenOnFailure: true, Durability: store.SyncAlways}
	db, err := store.Open("l", so)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	l, err := New(db, &Options{CreateBusinesses: true})
	if err != nil {
		t.Fatal(err)
	}
	for u := range uint64(3) {
		_, err := l.Like("v", 1, 100+u, 0)
		mustOK(t, err)
	}
	fault.On()
	for u := range uint64(5) {
		if _, err := l.Like("v", 2, 200+u, 0); err != nil {
			if !errors.Is(err, store.ErrFailed) {
				t.Fatalf("a like with a failing WAL: %v", err)
			}
			break
		}
	}
	fault.Off()
	testutil.UntilHealed(t, "Like", store.ErrFailed, db.Generation, func() error {
		_, err := l.Like("v", 3, 300, 0)
		return err
	})
	mustOK(t, l.Check())
	c, err := l.Counts("v", []uint64{1, 2, 3}, nil)
	mustOK(t, err)
	for _, item := range []uint64{1, 2, 3} {
		above := 0
		for _, o := range c {
			if o.Likes > c[item-1].Likes {
				above++
			}
		}
		e, ok, err := l.Rank("v", item)
		mustOK(t, err)
		if ok != (c[item-1].Likes > 0) || ok && e.Rank != 1+above {
			t.Errorf("item %d (%d likes): rank %d %v, want %d", item, c[item-1].Likes, e.Rank, ok, 1+above)
		}
	}
}

// TestReloadErrorFailsStore: the store heals in place but likes cannot
// reload (an injected read error). The error reaches the store: it
// refuses writes (ErrFailed wrapping likes' error) while likes holds the
// businesses of before the reopen; the next reopen reloads them, the
// business whose failed creation is on disk keeps its id, and Check
// passes. Before, the reload's error was dropped and the store took
// writes.
func TestReloadErrorFailsStore(t *testing.T) {
	db, fault, l := openFailing(t, store.SyncAlways, nil)
	// As in TestBusinessIDAfterReopen: the record is AddBusiness's only
	// write.
	cn := CounterName("a")
	mustOK(t, db.CreateCounter(cn, l.opts.Business.counterOptions()))
	for _, col := range []string{LikesColumn, DislikesColumn} {
		mustOK(t, db.AddColumn(cn, col, store.ColumnOptions{HintBits: 16, MaxBits: 32}))
	}
	errReload := errors.New("injected: a likes family read failed")
	l.testReload = testutil.FailFirstReload(fault, errReload)
	fault.On()
	if err := l.AddBusiness("a", BusinessOptions{}); !errors.Is(err, store.ErrFailed) {
		t.Fatalf("AddBusiness with a failing WAL sync: %v", err)
	}
	fault.Off()
	testutil.UntilRefused(t, db.Writable, errReload)
	if err := l.AddBusiness("c", BusinessOptions{}); !errors.Is(err, store.ErrFailed) || !errors.Is(err, errReload) {
		t.Fatalf("AddBusiness after the failed reload: %v (want ErrFailed wrapping %v)", err, errReload)
	}
	fault.Off()
	testutil.UntilHealed(t, "AddBusiness", store.ErrFailed, db.Generation, func() error {
		return l.AddBusiness("b", BusinessOptions{})
	})
	if g := db.Generation(); g != 2 {
		t.Fatalf("generation %d, want 2 (a reopen whose reload failed, then one that reloaded)", g)
	}
	m := *l.biz.byName.Load()
	a, b := m["a"], m["b"]
	if a == nil || b == nil || a.id == b.id {
		t.Fatalf("businesses after the reopens: a %+v, b %+v", a, b)
	}
	mustOK(t, l.Check())
}

// TestPruneDuringReopen: the prune job, run by a caller (WaitJob) after
// the store healed but before likes' ReopenHook.After reloaded the
// businesses, listed the businesses of before the reopen (here without
// "a", whose failed creation is on disk) and went on to prune by that
// list. It now lists them under loadMu's read side (pruneIDs): it waits
// for the reload.
func TestPruneDuringReopen(t *testing.T) {
	db, fault, l := openFailing(t, store.SyncAlways, nil)
	mustOK(t, l.AddBusiness("x", BusinessOptions{}))
	// As in TestBusinessIDAfterReopen: a's record is AddBusiness's only
	// write.
	cn := CounterName("a")
	mustOK(t, db.CreateCounter(cn, l.opts.Business.counterOptions()))
	for _, col := range []string{LikesColumn, DislikesColumn} {
		mustOK(t, db.AddColumn(cn, col, store.ColumnOptions{HintBits: 16, MaxBits: 32}))
	}
	b := db.NewBatch()
	defer b.Close()
	mustOK(t, l.enqueuePrune(b, l.today()))
	mustOK(t, b.Commit())
	job := b.JobIDs()[0]
	// After likes' hook: its After runs first, with the store taking
	// writes and likes not reloaded yet.
	inAfter, release := make(chan struct{}), make(chan struct{})
	defer db.OnReopen(store.ReopenHook{After: func(bool) error {
		close(inAfter)
		<-release
		return nil
	}})()
	fault.On()
	if err := l.AddBusiness("a", BusinessOptions{}); !errors.Is(err, store.ErrFailed) {
		t.Fatalf("AddBusiness with a failing WAL sync: %v", err)
	}
	fault.Off()
	<-inAfter
	done := make(chan error, 1)
	go func() { done <- db.WaitJob(context.Background(), job) }()
	select {
	case err := <-done:
		close(release)
		mustOK(t, err)
		t.Fatal("the prune ran while the reopen had not reloaded the businesses")
	case g := <-testutil.BlockedIn(done, "likes.(*Likes).runPrune", "sync.(*RWMutex).RLock"):
		if !strings.Contains(g, "likes.(*Likes).pruneIDs") {
			close(release)
			t.Fatalf("the prune listed the businesses before waiting for the reload; it waits in:\n%s", g)
		}
	}
	close(release)
	mustOK(t, <-done)
	if m := *l.biz.byName.Load(); m["a"] == nil || m["x"] == nil {
		t.Fatalf("businesses after the reopen: %v", m)
	}
	mustOK(t, l.Check())
}

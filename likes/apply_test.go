package likes

import (
	"slices"
	"testing"
	"time"
)

// In a replicated store every like runs inside store.DB.ApplyEntry, and a
// restarted replica applies the entry at its store's AppliedIndex again:
// each commit of it that is in the store already is skipped as a
// duplicate (Batch.Duplicate), and must change nothing in memory either.
// One entry may carry a client's pipeline, so a re-applied entry's first
// commands see what its later commands left: the re-apply of a like may
// decide different writes (and memory) than its first apply did.

// applyTwice applies entry 1 (fn) on e, reopens the store as a restart
// would, and applies entry 1 again, as the restarted replica does.
func applyTwice(t *testing.T, e *env, fn func() error) {
	t.Helper()
	if err := e.db.ApplyEntry(1, fn); err != nil {
		t.Fatal(err)
	}
	e.reopen()
	if err := e.db.ApplyEntry(1, fn); err != nil {
		t.Fatal(err)
	}
}

// TestReappliedEntryKeepsCaches: an entry that likes and unlikes one item
// re-applies its like as a like to make (the store holds no like), whose
// commit is a duplicate. The stripe's cache took the item's day score of
// that skipped like (1 where the store holds none), and the next like of
// the item wrote 2 from it: the day board ranked the item above its
// likes, on this replica only.
func TestReappliedEntryKeepsCaches(t *testing.T) {
	e := newEnv(t, nil)
	if err := e.l.AddBusiness("v", BusinessOptions{}); err != nil {
		t.Fatal(err)
	}
	applyTwice(t, e, func() error {
		if _, err := e.l.Like("v", 1, 7, 0); err != nil {
			return err
		}
		_, err := e.l.Unlike("v", 1, 7)
		return err
	})
	e.check()
	if err := e.db.ApplyEntry(2, func() error {
		_, err := e.l.Like("v", 1, 8, 0)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	e.check()
	top := must[[]Entry](t)(e.l.TopDay("v", e.clock.Now(), 10))
	if len(top) != 1 || top[0].Item != 1 || top[0].Likes != 1 {
		t.Fatalf("day board %+v, want item 1 with 1 like", top)
	}
}

// TestReappliedEntryKeepsOrdinals: an entry that likes and unlikes an
// item while it is a list set, then converts the set to roaring by two
// more likes, re-applies its first like on the roaring set: the like
// needs an ordinal for its user, which the allocator handed out, and the
// duplicate commit never wrote. Counted as committed, it left a gap, so
// the next user got another ordinal on this replica than on one that
// never restarted, and listed likers in another order.
func TestReappliedEntryKeepsOrdinals(t *testing.T) {
	opts := &Options{RoaringThreshold: MinRoaringThreshold}
	var es [2]*env
	for i := range es {
		e := newEnv(t, opts)
		es[i] = e
		if err := e.l.AddBusiness("v", BusinessOptions{}); err != nil {
			t.Fatal(err)
		}
		for u := range uint64(MinRoaringThreshold - 2) {
			must[Result](t)(e.l.Like("v", 1, 100+u, 0))
		}
		entry := func() error {
			if _, err := e.l.Like("v", 1, 7, 0); err != nil {
				return err
			}
			if _, err := e.l.Unlike("v", 1, 7); err != nil {
				return err
			}
			for _, u := range []uint64{200, 201} {
				if _, err := e.l.Like("v", 1, u, 0); err != nil {
					return err
				}
			}
			return nil
		}
		if i == 0 {
			applyTwice(t, e, entry) // the replica that restarted
		} else if err := e.db.ApplyEntry(1, entry); err != nil {
			t.Fatal(err)
		}
		if !must[bool](t)(e.l.isRoaring("v", 1)) {
			t.Fatal("item 1 is not roaring")
		}
		e.check()
		// The next entry likes item 1 by two users new to ordinals.
		if err := e.db.ApplyEntry(2, func() error {
			for _, u := range []uint64{50, 60} {
				if _, err := e.l.Like("v", 1, u, 0); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		e.check()
	}
	var pages [2][]uint64
	for i, e := range es {
		for _, u := range []uint64{50, 60} {
			var kb, vb []byte
			ord, ok, err := e.l.lookupOrdinal(u, &kb, &vb)
			if err != nil || !ok {
				t.Fatalf("replica %d: ordinal of %d: %v %v", i, u, ok, err)
			}
			pages[i] = append(pages[i], uint64(ord))
		}
		p := must[Page](t)(e.l.Likers("v", 1, "", MaxPage))
		pages[i] = append(pages[i], p.IDs...)
	}
	if !slices.Equal(pages[0], pages[1]) {
		t.Fatalf("ordinals of 50, 60 then likers differ between replicas:\nrestarted %v\nother     %v", pages[0], pages[1])
	}
}

// TestReappliedEntryCommitsNoPrune: the day's board prune rides in the
// batch of the day's first group; a duplicate commit queued none, so it
// must not count as the day's prune either (the next group queues it).
func TestReappliedEntryCommitsNoPrune(t *testing.T) {
	e := newEnv(t, nil)
	if err := e.l.AddBusiness("v", BusinessOptions{}); err != nil {
		t.Fatal(err)
	}
	// First apply: the unlike changes nothing, the like commits. The
	// re-apply, a day later: the unlike commits (a duplicate), the like
	// changes nothing.
	entry := func() error {
		if _, err := e.l.Unlike("v", 1, 7); err != nil {
			return err
		}
		_, err := e.l.Like("v", 1, 7, 0)
		return err
	}
	if err := e.db.ApplyEntry(1, entry); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(25 * time.Hour)
	e.reopen()
	if err := e.db.ApplyEntry(1, entry); err != nil {
		t.Fatal(err)
	}
	if got := e.l.pruneDay.Load(); got != 0 {
		t.Fatalf("prune day %d after a duplicate commit, want 0 (no prune queued)", got)
	}
}

// TestReappliedBusinessRecord: a business declared in a re-applied entry
// is declared in memory and in the store alike (its record commit is
// node-local, never skipped as a duplicate). (The entry's first apply
// stands for a crash after its first commit, a like: the re-apply's like
// changes nothing and commits nothing, so the record's commit takes the
// like's number. Server.Apply declares commands to the store, so there
// the record's commit keeps its own number.)
func TestReappliedBusinessRecord(t *testing.T) {
	e := newEnv(t, nil)
	if err := e.l.AddBusiness("v", BusinessOptions{}); err != nil {
		t.Fatal(err)
	}
	like := func() error {
		_, err := e.l.Like("v", 1, 7, 0)
		return err
	}
	if err := e.db.ApplyEntry(1, like); err != nil {
		t.Fatal(err)
	}
	e.reopen()
	err := e.db.ApplyEntry(1, func() error {
		if err := like(); err != nil {
			return err
		}
		return e.l.AddBusiness("x", BusinessOptions{})
	})
	// The record is a node-local commit (putMetaIn, TestReappliedBusinessEntry):
	// never skipped as a duplicate, so memory and store both declare x.
	if err != nil {
		t.Fatalf("AddBusiness in the re-applied entry: %v", err)
	}
	e.check()
	if got := e.l.Businesses(); !slices.Equal(got, []string{"v", "x"}) {
		t.Fatalf("businesses %v, want [v x]", got)
	}
}

package store

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

var errCut = errors.New("cut short")

// applyThree is entry index's apply: three commits, each adding index to
// one row (ids 1, 2, 3), stopping with errCut after cut commits (cut < 3).
func applyThree(db *DB, c *Counter, index uint64, cut int) error {
	return db.ApplyEntry(index, func() error {
		for i := range 3 {
			if i == cut {
				return errCut
			}
			if _, err := c.Incr(uint64(i+1), "reposts", int64(index)); err != nil {
				return err
			}
		}
		return nil
	})
}

func wantRows(t *testing.T, c *Counter, want uint64, where string) {
	t.Helper()
	for id := uint64(1); id <= 3; id++ {
		got, err := c.GetColumn(id, "reposts")
		must(t, err)
		if got != want {
			t.Fatalf("%s: row %d = %d, want %d", where, id, got, want)
		}
	}
}

// TestApplyEntryCrashMidEntry crashes a store in the middle of a
// three-commit entry, on a filesystem that keeps a random part of the
// unsynced writes, then re-applies from AppliedIndex as a replica does: the
// state must be every entry applied exactly once.
func TestApplyEntryCrashMidEntry(t *testing.T) {
	rng := rand.New(rand.NewPCG(22, 1))
	for round := range 24 {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			fs := vfs.NewCrashableMem()
			db, err := Open("a", testOptions(fs))
			must(t, err)
			c := newPosts(t, db, 16)
			// Entries 1..3 applied whole; entry 4 cut after 0-2 commits.
			for i := uint64(1); i <= 3; i++ {
				must(t, applyThree(db, c, i, 3))
			}
			if rng.IntN(2) == 0 {
				must(t, db.SyncWAL())
			}
			cut := rng.IntN(3)
			if err := applyThree(db, c, 4, cut); !errors.Is(err, errCut) {
				t.Fatalf("entry 4: %v", err)
			}
			if rng.IntN(2) == 0 {
				must(t, db.SyncWAL())
			}
			crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(101), RNG: rng})
			crashStop(t, db)

			db2 := openTest(t, crashed, "a", testOptions(crashed))
			c2, err := db2.Counter("posts")
			must(t, err)
			applied := db2.AppliedIndex()
			if applied > 4 {
				t.Fatalf("AppliedIndex %d after 4 entries", applied)
			}
			// Re-apply from AppliedIndex (it may be partly applied), or from
			// 1 when nothing is marked.
			for i := max(applied, 1); i <= 4; i++ {
				must(t, applyThree(db2, c2, i, 3))
			}
			wantRows(t, c2, 1+2+3+4, "after re-apply")
			if got := db2.AppliedIndex(); got != 4 {
				t.Fatalf("AppliedIndex %d, want 4", got)
			}
		})
	}
}

// TestApplyEntryReapplyIsNoop applies entries twice on an open store: the
// second apply commits nothing, and counter results of skipped commits read
// 0 instead of failing.
func TestApplyEntryReapplyIsNoop(t *testing.T) {
	fs := vfs.NewMem()
	db := openTest(t, fs, "a", nil)
	c := newPosts(t, db, 16)
	must(t, applyThree(db, c, 1, 3))
	if err := applyThree(db, c, 2, 1); !errors.Is(err, errCut) { // cut after one commit
		t.Fatalf("entry 2: %v", err)
	}
	if err := applyThree(db, c, 2, 3); err == nil { // same index again: refused
		t.Fatal("ApplyEntry accepted an index that is not above the last")
	} else if !errors.Is(err, ErrValueRange) {
		t.Fatalf("repeat index: %v", err)
	}
	if got := db.AppliedIndex(); got != 2 {
		t.Fatalf("AppliedIndex %d, want 2", got)
	}
	// A reopened store re-applies entry 2: the first commit is skipped.
	must(t, db.Close())
	db = openTest(t, fs, "a", nil)
	c, err := db.Counter("posts")
	must(t, err)
	var results []uint64
	must(t, db.ApplyEntry(2, func() error {
		for id := uint64(1); id <= 3; id++ {
			v, err := c.Incr(id, "reposts", 2)
			if err != nil {
				return err
			}
			results = append(results, v)
		}
		return nil
	}))
	if want := []uint64{0, 3, 3}; fmt.Sprint(results) != fmt.Sprint(want) {
		t.Fatalf("results %v, want %v (0 for the skipped commit)", results, want)
	}
	wantRows(t, c, 3, "after re-apply")
}

// TestSetAppliedIndex records entries that commit nothing: AppliedIndex
// follows, a lower index changes nothing, and a later ApplyEntry of a
// recorded index commits nothing.
func TestSetAppliedIndex(t *testing.T) {
	fs := vfs.NewMem()
	db := openTest(t, fs, "a", nil)
	c := newPosts(t, db, 16)
	must(t, db.SetAppliedIndex(5))
	must(t, db.SetAppliedIndex(3))
	if got := db.AppliedIndex(); got != 5 {
		t.Fatalf("AppliedIndex %d, want 5", got)
	}
	if err := db.SetAppliedIndex(0); !errors.Is(err, ErrValueRange) {
		t.Fatalf("SetAppliedIndex(0): %v", err)
	}
	must(t, db.Close())
	db = openTest(t, fs, "a", nil)
	c, err := db.Counter("posts")
	must(t, err)
	if got := db.AppliedIndex(); got != 5 {
		t.Fatalf("AppliedIndex after reopen %d, want 5", got)
	}
	must(t, applyThree(db, c, 5, 3)) // recorded complete: skipped
	wantRows(t, c, 0, "entry 5 recorded as applied")
	must(t, applyThree(db, c, 6, 3))
	wantRows(t, c, 6, "entry 6")
}

// TestApplyEntryLeavesOtherCommitsAlone checks that commits outside
// ApplyEntry carry no mark and are never skipped.
func TestApplyEntryLeavesOtherCommitsAlone(t *testing.T) {
	db := openTest(t, vfs.NewMem(), "a", nil)
	c := newPosts(t, db, 16)
	must(t, applyThree(db, c, 7, 3))
	for range 3 {
		_, err := c.Incr(1, "reposts", 1)
		must(t, err)
	}
	got, err := c.GetColumn(1, "reposts")
	must(t, err)
	if got != 10 {
		t.Fatalf("row 1 = %d, want 10", got)
	}
	if got := db.AppliedIndex(); got != 7 {
		t.Fatalf("AppliedIndex %d, want 7", got)
	}
}

// TestApplyEntryLocalCommit: a node-local commit (Batch.SetLocal, what a
// read path writes) made while an entry applies is neither marked nor
// numbered: after the entry's own first commit only, a reopen and re-apply
// still applies the entry's second commit, and the local write stays.
func TestApplyEntryLocalCommit(t *testing.T) {
	fs := vfs.NewMem()
	db := openTest(t, fs, "a", nil)
	c := newPosts(t, db, 16)
	local := func(v int64) {
		b := db.NewBatch()
		defer b.Close()
		b.SetLocal()
		must(t, b.Incr("posts", 9, "reposts", v))
		must(t, b.Commit())
		if b.Duplicate() {
			t.Fatal("a local commit was skipped as a duplicate")
		}
	}
	// Entry 1: a local commit, then the entry's first commit, then a cut.
	err := db.ApplyEntry(1, func() error {
		local(5)
		if _, err := c.Incr(1, "reposts", 1); err != nil {
			return err
		}
		local(5)
		return errCut
	})
	if !errors.Is(err, errCut) {
		t.Fatalf("entry 1: %v", err)
	}
	if seq, _ := db.SourceSeq(ApplySource); seq != 1<<16|1 {
		t.Fatalf("apply mark %#x, want %#x: local commits were numbered", seq, uint64(1<<16|1))
	}
	must(t, db.Close())
	db = openTest(t, fs, "a", nil)
	c, err = db.Counter("posts")
	must(t, err)
	must(t, db.ApplyEntry(1, func() error {
		for id := uint64(1); id <= 2; id++ {
			if _, err := c.Incr(id, "reposts", 1); err != nil {
				return err
			}
		}
		return nil
	}))
	for id, want := range map[uint64]uint64{1: 1, 2: 1, 9: 10} {
		got, err := c.GetColumn(id, "reposts")
		must(t, err)
		if got != want {
			t.Fatalf("row %d = %d, want %d", id, got, want)
		}
	}
}

// applyRun applies entries first..last as one run (Batch.MarkEntries): the
// effects of each entry (applyThree's: index added to rows 1, 2 and 3) in
// one batch, committed once.
func applyRun(db *DB, first, last uint64) error {
	b := db.NewBatch()
	defer b.Close()
	if err := b.MarkEntries(first, last); err != nil {
		return err
	}
	for i := first; i <= last; i++ {
		for id := uint64(1); id <= 3; id++ {
			if err := b.Incr("posts", id, "reposts", int64(i)); err != nil {
				return err
			}
		}
	}
	return b.Commit()
}

// applyGrouped applies entries from..to in random groups: a run of one to
// four entries (applyRun) or a single entry (applyThree).
func applyGrouped(t *testing.T, rng *rand.Rand, db *DB, c *Counter, from, to uint64) {
	t.Helper()
	for i := from; i <= to; {
		if rng.IntN(3) == 0 {
			must(t, applyThree(db, c, i, 3))
			i++
			continue
		}
		last := min(to, i+uint64(rng.IntN(4)))
		must(t, applyRun(db, i, last))
		i = last + 1
	}
}

// TestMarkEntriesCrash applies entries in runs and one by one, crashes the
// store on a filesystem that keeps a random part of the unsynced writes
// (sometimes in the middle of an entry), and re-applies from AppliedIndex
// as a replica does, in a different grouping: every entry must be applied
// exactly once, and a run starting at AppliedIndex (maybe partly applied)
// is refused without a change.
func TestMarkEntriesCrash(t *testing.T) {
	rng := rand.New(rand.NewPCG(22, 2))
	const entries = 12
	for round := range 24 {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			fs := vfs.NewCrashableMem()
			db, err := Open("a", testOptions(fs))
			must(t, err)
			c := newPosts(t, db, 16)
			applyGrouped(t, rng, db, c, 1, entries-1)
			if rng.IntN(2) == 0 {
				must(t, db.SyncWAL())
			}
			if rng.IntN(2) == 0 {
				must(t, applyRun(db, entries, entries))
			} else if err := applyThree(db, c, entries, rng.IntN(3)); !errors.Is(err, errCut) {
				t.Fatalf("entry %d: %v", entries, err)
			}
			crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(101), RNG: rng})
			crashStop(t, db)

			db2 := openTest(t, crashed, "a", testOptions(crashed))
			c2, err := db2.Counter("posts")
			must(t, err)
			applied := db2.AppliedIndex()
			if applied > entries {
				t.Fatalf("AppliedIndex %d after %d entries", applied, entries)
			}
			from := uint64(1)
			if applied > 0 {
				before, err := c2.GetColumn(1, "reposts")
				must(t, err)
				if err := applyRun(db2, applied, entries); !errors.Is(err, ErrValueRange) {
					t.Fatalf("a run from AppliedIndex %d: %v, want ErrValueRange", applied, err)
				}
				after, err := c2.GetColumn(1, "reposts")
				must(t, err)
				if after != before {
					t.Fatalf("a refused run changed row 1: %d -> %d", before, after)
				}
				must(t, applyThree(db2, c2, applied, 3))
				from = applied + 1
			}
			applyGrouped(t, rng, db2, c2, from, entries)
			wantRows(t, c2, entries*(entries+1)/2, "after re-apply")
			if got := db2.AppliedIndex(); got != entries {
				t.Fatalf("AppliedIndex %d, want %d", got, entries)
			}
		})
	}
}

// TestMarkEntriesRefused checks what a run may not do, and that a refused
// or invalid run changes nothing.
func TestMarkEntriesRefused(t *testing.T) {
	db := openTest(t, vfs.NewMem(), "a", nil)
	c := newPosts(t, db, 16)
	for _, r := range [][2]uint64{{0, 1}, {3, 2}, {1, MaxApplyIndex + 1}} {
		if err := applyRun(db, r[0], r[1]); !errors.Is(err, ErrValueRange) {
			t.Fatalf("run %d..%d: %v, want ErrValueRange", r[0], r[1], err)
		}
	}
	wantRows(t, c, 0, "after invalid runs")
	// Inside ApplyEntry a run is refused.
	err := db.ApplyEntry(1, func() error { return applyRun(db, 2, 3) })
	if !errors.Is(err, ErrValueRange) {
		t.Fatalf("run inside ApplyEntry: %v", err)
	}
	wantRows(t, c, 0, "after a run inside ApplyEntry")
	// Not above the last index given to ApplyEntry (1, which committed
	// nothing): refused.
	if err := applyRun(db, 1, 2); !errors.Is(err, ErrValueRange) {
		t.Fatalf("run 1..2 after ApplyEntry(1): %v", err)
	}
	must(t, applyRun(db, 2, 4))
	wantRows(t, c, 2+3+4, "run 2..4")
	if got := db.AppliedIndex(); got != 4 {
		t.Fatalf("AppliedIndex %d, want 4", got)
	}
	if seq, _ := db.SourceSeq(ApplySource); seq != 4<<16|applyCompleteN {
		t.Fatalf("apply mark %#x, want entry 4 complete", seq)
	}
	// An entry of the run is not above the last index given: refused, as
	// is a run overlapping it. (After a reopen it would apply and commit
	// nothing: TestMarkEntriesCrash.)
	if err := applyThree(db, c, 4, 3); !errors.Is(err, ErrValueRange) {
		t.Fatalf("ApplyEntry(4) after run 2..4: %v", err)
	}
	if err := applyRun(db, 4, 5); !errors.Is(err, ErrValueRange) {
		t.Fatalf("run 4..5 after run 2..4: %v", err)
	}
	wantRows(t, c, 2+3+4, "after re-applying entry 4")
	// A run that commits nothing else still records its entries.
	b := db.NewBatch()
	must(t, b.MarkEntries(5, 6))
	must(t, b.Commit())
	b.Close()
	if got := db.AppliedIndex(); got != 6 {
		t.Fatalf("AppliedIndex %d after an empty run 5..6, want 6", got)
	}
	// A node-local batch cannot apply entries.
	b = db.NewBatch()
	b.SetLocal()
	if err := b.MarkEntries(7, 7); !errors.Is(err, ErrValueRange) {
		t.Fatalf("MarkEntries on a local batch: %v", err)
	}
	b.Close()
}

// TestEmptyRecordIsNotAnEntrysCommit: an empty log record (what a
// checkpoint writes after a seal or merge, from a background goroutine)
// committed while an entry applies is not one of the entry's commits. Were
// it numbered, it would take the entry's first mark, and a re-apply after a
// crash before the entry's own first commit would skip that commit as
// already applied.
func TestEmptyRecordIsNotAnEntrysCommit(t *testing.T) {
	fs := vfs.NewMem()
	db := openTest(t, fs, "a", nil)
	c := newPosts(t, db, 16)
	err := db.ApplyEntry(1, func() error {
		db.commit.Lock()
		err := db.commitEmptyRecordLocked()
		db.commit.Unlock()
		if err != nil {
			return err
		}
		return errCut // the entry's own commit never happens
	})
	if !errors.Is(err, errCut) {
		t.Fatalf("entry 1: %v", err)
	}
	if seq, _ := db.SourceSeq(ApplySource); seq != 0 {
		t.Fatalf("apply mark %#x after an empty record alone, want none", seq)
	}
	must(t, db.Close())
	db = openTest(t, fs, "a", nil)
	c, err = db.Counter("posts")
	must(t, err)
	must(t, db.ApplyEntry(1, func() error {
		_, err := c.Incr(1, "reposts", 1)
		return err
	}))
	if got, err := c.GetColumn(1, "reposts"); err != nil || got != 1 {
		t.Fatalf("row 1 = %d, %v after re-applying entry 1, want 1", got, err)
	}
}

// TestApplyCommandNumbering: an entry of several commands whose re-apply,
// seeing the state its later commands left, commits in other commands
// than its first apply did. Numbered one after another (without
// ApplyCommand), its commits shifted: a command that committed nothing
// the second time made the next command's commit a duplicate (a lost
// write), one that committed only the second time made the next
// command's commit apply twice. Declared with ApplyCommand, each command
// is numbered as it was.
func TestApplyCommandNumbering(t *testing.T) {
	fs := vfs.NewMem()
	db := openTest(t, fs, "a", nil)
	c := newPosts(t, db, 16)
	get := func(id uint64) uint64 {
		v, err := c.GetColumn(id, "reposts")
		must(t, err)
		return v
	}
	// The commands: "once" adds 1 to row 2 while it is 0, "clear" deletes
	// row 9 if it has a value, "set" adds 1 to row 9, "add" adds 10 to
	// row 1. A command that changes nothing commits nothing.
	run := func(cmds ...string) func() error {
		return func() error {
			for k, cmd := range cmds {
				must(t, db.ApplyCommand(uint64(k+1)))
				var err error
				switch cmd {
				case "once":
					if get(2) == 0 {
						_, err = c.Incr(2, "reposts", 1)
					}
				case "clear":
					if get(9) != 0 {
						err = c.Delete(9)
					}
				case "set":
					_, err = c.Incr(9, "reposts", 1)
				case "add":
					_, err = c.Incr(1, "reposts", 10)
				}
				if err != nil {
					return err
				}
			}
			return nil
		}
	}
	// Entry 1: "clear" commits only on the re-apply; "add" must not apply
	// twice.
	entry1 := run("clear", "set", "add")
	must(t, db.ApplyEntry(1, entry1))
	// Entry 2: a crash after its first commit ("once"); on the re-apply
	// "once" commits nothing, and "add" must not be taken for its commit.
	must(t, db.ApplyEntry(2, run("once")))
	entry2 := run("once", "add")
	dir := "a"
	reopen := func() {
		must(t, db.Close())
		db = openTest(t, fs, dir, nil)
		var err error
		c, err = db.Counter("posts")
		must(t, err)
	}
	reopen()
	must(t, db.ApplyEntry(2, entry2))
	if got := get(1); got != 20 {
		t.Fatalf("row 1 = %d after entry 2's re-apply, want 20 (its add was skipped)", got)
	}
	reopen()
	must(t, db.ApplyEntry(2, entry2)) // complete now: commits nothing
	if got := get(1); got != 20 {
		t.Fatalf("row 1 = %d after entry 2's second re-apply, want 20", got)
	}
	// Entry 1 re-applied after a restart, on a second store.
	fs, dir = vfs.NewMem(), "b"
	db = openTest(t, fs, dir, nil)
	c = newPosts(t, db, 16)
	must(t, db.ApplyEntry(1, entry1))
	reopen()
	must(t, db.ApplyEntry(1, entry1))
	if got, nine := get(1), get(9); got != 10 || nine != 1 {
		t.Fatalf("rows 1, 9 = %d, %d after entry 1's re-apply, want 10, 1 (its add applied twice)", got, nine)
	}
	// Commands may not go down; outside ApplyEntry ApplyCommand does
	// nothing.
	must(t, db.ApplyCommand(7))
	err := db.ApplyEntry(2, func() error {
		must(t, db.ApplyCommand(2))
		return db.ApplyCommand(1)
	})
	if !errors.Is(err, ErrValueRange) {
		t.Fatalf("command 1 after 2: %v", err)
	}
}

package likes

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestReappliedBusinessEntry: a replicated entry may carry a client's
// pipeline, LIKE.BUSINESS then a LIKE in the new business. A crash keeps
// the entry's first commit (the business record) and loses the like's
// (store/apply.go rule 3 allows it); the restarted replica applies the
// entry again. Rule 2: the re-apply must make the same numbered commits
// in the same order. The record was written only when the business was
// missing, so on the re-apply the declaration made no commit, the like
// took the record's number, was skipped as a duplicate, and was lost.
func TestReappliedBusinessEntry(t *testing.T) {
	e := &env{t: t, dir: "db", clock: newClock(epoch)}
	e.opts.Now = e.clock.Now // CreateBusinesses off, as in a cluster
	fs := vfs.NewCrashableMem()
	e.start(fs)
	entry := func(crashPoint bool) func() error {
		return func() error {
			if err := e.l.AddBusiness("video", BusinessOptions{}); err != nil {
				return err
			}
			if crashPoint {
				// The declaration reaches the disk; the like stays in
				// the WAL's unsynced tail.
				if err := e.db.SyncWAL(); err != nil {
					return err
				}
			}
			_, err := e.l.Like("video", 7, 3, 0)
			return err
		}
	}
	if err := e.db.ApplyEntry(1, entry(true)); err != nil {
		t.Fatal(err)
	}
	e.st.RestartOn(fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0}))
	if bs := e.l.Businesses(); len(bs) != 1 {
		t.Fatalf("businesses after the crash = %v, want video (the declaration survives)", bs)
	}
	c := must[[]Counts](t)(e.l.Counts("video", []uint64{7}, nil))
	if c[0].Likes != 0 {
		t.Fatalf("likes of 7 after the crash = %d, want 0 (the crash lost the like)", c[0].Likes)
	}
	if err := e.db.ApplyEntry(1, entry(false)); err != nil { // the re-apply
		t.Fatal(err)
	}
	e.check()
	c = must[[]Counts](t)(e.l.Counts("video", []uint64{7}, nil))
	if c[0].Likes != 1 {
		t.Fatalf("likes of 7 after the re-apply = %d, want 1", c[0].Likes)
	}
	if got := e.db.AppliedIndex(); got != 1 {
		t.Fatalf("AppliedIndex %d after the re-apply, want 1", got)
	}
}

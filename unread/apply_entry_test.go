package unread

import (
	"math/rand/v2"
	"testing"
)

// TestReappliedPostEntry: a replicated entry may carry a client's
// pipeline of two notices. A crash keeps the entry's first commit (notice
// 5) and loses the second (store/apply.go rule 3 allows it); the
// restarted replica applies the entry again. Rule 2: the re-apply must
// make the same numbered commits in the same order. Post made no commit
// for a notice the channel held, so on the re-apply notice 5 made none,
// notice 6 took its number, was skipped as a duplicate, and was lost.
func TestReappliedPostEntry(t *testing.T) {
	e := newEnv(t, nil, nil)
	entry := func(crashPoint bool) func() error {
		return func() error {
			if _, err := e.x.Post("news", 5); err != nil {
				return err
			}
			if crashPoint {
				// Notice 5 reaches the disk; 6 stays in the WAL's
				// unsynced tail.
				if err := e.db.SyncWAL(); err != nil {
					return err
				}
			}
			_, err := e.x.Post("news", 6)
			return err
		}
	}
	if err := e.db.ApplyEntry(1, entry(true)); err != nil {
		t.Fatal(err)
	}
	e.crash(0, rand.New(rand.NewPCG(1, 2)))
	has := func(id uint64) bool {
		ch, err := e.x.lookupChannel("news")
		if err != nil {
			t.Fatal(err)
		}
		return ch != nil && ch.hasNotice(id)
	}
	if !has(5) || has(6) {
		t.Fatalf("after the crash: notice 5 %v, 6 %v; want only 5", has(5), has(6))
	}
	if err := e.db.ApplyEntry(1, entry(false)); err != nil { // the re-apply
		t.Fatal(err)
	}
	if !has(5) || !has(6) {
		t.Fatalf("after the re-apply: notice 5 %v, 6 %v; want both", has(5), has(6))
	}
	if err := e.check(); err != nil {
		t.Fatal(err)
	}
}

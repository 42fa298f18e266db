package unread

import "testing"

// In a replicated store every write runs inside store.DB.ApplyEntry, and
// a restarted replica applies the entry at its store's AppliedIndex
// again: each commit of it that is in the store already is skipped as a
// duplicate (Batch.Duplicate), and must change nothing in memory either:
// the channels' tags, notices and the channels themselves are mirrors of
// the store.

// TestReappliedMarkKeepsTag: a restarted replica re-applies its last
// entry, a Mark: the commit is a duplicate, but the tag in memory went
// one up, above the stored one and every other replica's, so users who
// cleared the channel since showed its dot on this replica only.
func TestReappliedMarkKeepsTag(t *testing.T) {
	e := newEnv(t, nil, nil)
	mark := func() error {
		_, err := e.x.Mark("c")
		return err
	}
	must(t, e.db.ApplyEntry(1, mark))
	e.reopen()
	must(t, e.db.ApplyEntry(1, mark))
	must(t, e.check())
	must(t, e.db.ApplyEntry(2, func() error { return e.x.Clear(7, "c") }))
	if mustV[bool](t)(e.x.Has(7, "c")) {
		t.Fatal("user 7 cleared the channel and still has its dot")
	}
}

// TestReappliedPostKeepsNotices: a duplicate commit of a Post or of a
// channel's declaration adds neither the notice nor the channel to
// memory. (The entry's first apply stands for a crash after its first
// commit: the re-apply's Post of notice 4 finds it and commits nothing,
// so the next commits are numbered one lower and skipped.)
func TestReappliedPostKeepsNotices(t *testing.T) {
	e := newEnv(t, nil, nil)
	post := func(id uint64) error {
		_, err := e.x.Post("c", id)
		return err
	}
	must(t, e.db.ApplyEntry(1, func() error { return post(4) }))
	e.reopen()
	must(t, e.db.ApplyEntry(1, func() error {
		if err := post(4); err != nil {
			return err
		}
		if err := post(5); err != nil {
			return err
		}
		_, err := e.x.Mark("d")
		return err
	}))
	must(t, e.check())
}

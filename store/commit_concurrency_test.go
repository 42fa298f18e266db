package store

import (
	"encoding/binary"
	"errors"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestConcurrentCommitsSharedRows commits from many goroutines at once on a
// few shared rows, with family writes in the same batches and batches that
// fail on their own (ErrValueRange) among them. Every acknowledged
// increment must be counted once, no refused one at all, in memory, in each
// batch's results and after a crash and reopen (the log replays the
// records). It was written for a group commit that combined concurrent
// batches into one Pebble batch (issue 18; measured no faster than Pebble's
// own fsync sharing, so not kept) and guards any such change of the commit
// path.
func TestConcurrentCommitsSharedRows(t *testing.T) {
	fs := vfs.NewCrashableMem()
	o := testOptions(fs)
	o.Families = []FamilySpec{testPlain, testSum}
	db := openTest(t, fs, "d", o)
	c := newPosts(t, db, 32)
	sums := family(t, db, "sums")
	plain := family(t, db, "plain")

	const writers, per, rows = 8, 400, 4
	var wg sync.WaitGroup
	var mu sync.Mutex
	refused := 0
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			key := make([]byte, 9)
			for i := 0; i < per; i++ {
				b := db.NewBatch()
				id := uint64(i % rows)
				b.Incr("posts", id, "likes", 1)
				b.Incr("posts", id+1, "likes", 1) // two rows per batch, overlapping others
				key[0] = testSum.Prefix
				binary.BigEndian.PutUint64(key[1:], id)
				sums.Merge(b, key, AddOperand(nil, 1))
				key[0] = testPlain.Prefix
				binary.BigEndian.PutUint64(key[1:], uint64(w))
				plain.Put(b, key, key[1:])
				if i%7 == 3 {
					b.IncrCapped("posts", id, "reposts", 300, 100) // past its cap: the batch fails alone
				}
				err := b.Commit()
				switch {
				case i%7 == 3 && !errors.Is(err, ErrValueRange):
					t.Errorf("over-max batch: %v", err)
				case i%7 == 3:
					mu.Lock()
					refused++
					mu.Unlock()
				case err != nil:
					t.Errorf("commit: %v", err)
				case b.Result(0) == 0 || b.Result(1) == 0:
					t.Errorf("results %d %d", b.Result(0), b.Result(1))
				}
				b.Close()
			}
		}(w)
	}
	wg.Wait()
	check := func(db *DB, c *Counter) {
		t.Helper()
		want := make([]uint64, rows+1)
		okPer := 0
		for i := 0; i < per; i++ {
			if i%7 != 3 {
				want[i%rows]++
				want[i%rows+1]++
				okPer++
			}
		}
		for id := range want {
			v, err := c.GetColumn(uint64(id), "likes")
			must(t, err)
			if v != uint64(writers)*want[id] {
				t.Errorf("row %d: likes %d, want %d", id, v, uint64(writers)*want[id])
			}
			if v, _ := c.GetColumn(uint64(id), "reposts"); v != 0 {
				t.Errorf("row %d: reposts %d, a refused batch was applied", id, v)
			}
		}
		var total uint64
		key := []byte{testSum.Prefix, 0, 0, 0, 0, 0, 0, 0, 0}
		for id := 0; id < rows; id++ {
			binary.BigEndian.PutUint64(key[1:], uint64(id))
			v, ok, err := family(t, db, "sums").Get(key, nil)
			must(t, err)
			if ok {
				n, err := DecodeAdd(v)
				must(t, err)
				total += uint64(n)
			}
		}
		if total != uint64(writers*okPer) {
			t.Errorf("family sums %d, want %d", total, writers*okPer)
		}
	}
	if refused != writers*((per+3)/7) {
		t.Errorf("refused %d", refused)
	}
	check(db, c)
	must(t, db.Check())

	crashed := cloneFS(t, fs, "d")
	o2 := testOptions(crashed)
	o2.Families = o.Families
	db2 := openTest(t, crashed, "d", o2)
	c2, err := db2.Counter("posts")
	must(t, err)
	check(db2, c2)
}

package likes

import (
	"encoding/binary"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/tallydb/tally/internal/testutil"
	"github.com/tallydb/tally/store"
)

// TestKeyFilter: no key added is ever reported absent, from concurrent
// adders and across growth (four times the first segment's capacity), and
// absent keys pass about 1% of the time.
func TestKeyFilter(t *testing.T) {
	f := newKeyFilter(0)
	const writers, perWriter = 4, filterMinKeys
	key := func(w, i int) []byte {
		return binary.BigEndian.AppendUint64([]byte{prefixState, byte(w)}, uint64(i))
	}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				f.add(key(w, i))
				if i%97 == 0 && !f.mayContain(key(w, i)) {
					t.Errorf("key %d/%d absent right after its add", w, i)
					return
				}
			}
		}()
	}
	wg.Wait()
	for w := range writers {
		for i := range perWriter {
			if !f.mayContain(key(w, i)) {
				t.Fatalf("key %d/%d added but absent", w, i)
			}
		}
	}
	segs := *f.segs.Load()
	if len(segs) < 2 {
		t.Fatalf("%d keys in %d segment(s): the filter did not grow", writers*perWriter, len(segs))
	}
	const probes = 100_000
	fp := 0
	for i := range probes {
		if f.mayContain(key(255, i)) {
			fp++
		}
	}
	// Each segment passes ~1% of absent keys when full.
	if limit := probes * len(segs) * 2 / 100; fp > limit {
		t.Errorf("%d of %d absent keys pass (%d segments; want at most %d)", fp, probes, len(segs), limit)
	}
	t.Logf("%d segments, %.2f%% false positives", len(segs), 100*float64(fp)/probes)
	if b, n := f.stats(); n != writers*perWriter || b == 0 {
		t.Errorf("stats: %d bytes, %d keys", b, n)
	}
	var nilFilter *keyFilter
	if !nilFilter.mayContain([]byte("x")) {
		t.Error("a nil filter must let every key through")
	}
}

// TestKeyFilterAcrossReopen: a new Likes on a store builds its filter from
// the store, so states, ordinals, item records and day scores written
// before are found (a repeated like is no change, an unlike is one).
func TestKeyFilterAcrossReopen(t *testing.T) {
	e := newEnv(t, &Options{RoaringThreshold: 16})
	l := e.l
	for u := uint64(1); u <= 20; u++ {
		must[Result](t)(l.Like("v", 1, u, 77)) // item 1 converts to roaring: ordinals
	}
	must[Result](t)(l.Dislike("v", 2, 9))
	if ok, err := l.isRoaring("v", 1); err != nil || !ok {
		t.Fatalf("item 1 roaring: %v %v", ok, err)
	}
	e.reopen()
	l = e.l
	if _, keys := l.filter.stats(); keys == 0 {
		t.Fatal("the filter of a reopened store is empty")
	}
	for u := uint64(1); u <= 20; u++ {
		if r := must[Result](t)(l.Like("v", 1, u, 77)); r.Changed || r.Likes != 20 {
			t.Fatalf("like again after reopen, user %d: %+v", u, r)
		}
	}
	if r := must[Result](t)(l.Undislike("v", 2, 9)); !r.Changed || r.Dislikes != 0 {
		t.Fatalf("undislike after reopen: %+v", r)
	}
	if r := must[Result](t)(l.Unlike("v", 1, 3)); !r.Changed || r.Likes != 19 {
		t.Fatalf("unlike after reopen: %+v", r)
	}
	e.check()
}

// TestCheckFindsKeyMissingFromFilter: Check reports a key the filter does
// not hold (here: a filter replaced by an empty one).
func TestCheckFindsKeyMissingFromFilter(t *testing.T) {
	e := newEnv(t, nil)
	must[Result](t)(e.l.Like("v", 1, 2, 0))
	full := e.l.filter
	e.l.filter = newKeyFilter(0)
	err := e.l.Check()
	e.l.filter = full
	if err == nil || !strings.Contains(err.Error(), "not in the key filter") {
		t.Fatalf("Check with an empty filter: %v", err)
	}
}

// TestKeyFilterFailedCommitDurable: a like whose commit fails at the WAL
// sync may be durable after the store heals itself in place; its keys were
// added to the filter before the commit, so the next like of the pair finds
// the state and counts nothing twice (Check: counts equal sets).
func TestKeyFilterFailedCommitDurable(t *testing.T) {
	_, fault, l := openFailing(t, store.SyncAlways, &Options{CreateBusinesses: true})
	must[Result](t)(l.Like("v", 1, 1, 0)) // the business exists before the fault
	fault.On()
	if _, err := l.Like("v", 1, 2, 0); !errors.Is(err, store.ErrFailed) {
		t.Fatalf("like with a failing WAL sync: %v", err)
	}
	fault.Off()
	var r Result
	testutil.UntilHealed(t, "like", store.ErrFailed, nil, func() (err error) {
		r, err = l.Like("v", 1, 2, 0)
		return err
	})
	if r.Likes != 2 {
		t.Fatalf("like after heal: %+v (want 2 likes whether or not the failed one was durable)", r)
	}
	if err := l.Check(); err != nil {
		t.Fatal(err)
	}
}

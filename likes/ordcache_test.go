package likes

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tallydb/tally/internal/testutil"
	"github.com/tallydb/tally/store"
)

func TestOrdCacheSets(t *testing.T) {
	if c := newOrdCache(-1); c != nil {
		t.Fatalf("a negative size made a cache")
	}
	var none *ordCache // off: every call is a miss and a no-op
	none.put(1, 2)
	if _, ok := none.get(1); ok || none.bytes() != 0 {
		t.Fatal("a nil cache hit")
	}
	c := newOrdCache(ordCacheShards * ordCacheWays * ordCacheEntryBytes) // one set a shard
	if c == nil || c.bytes() != ordCacheShards*ordCacheWays*ordCacheEntryBytes {
		t.Fatalf("one set a shard: %v", c)
	}
	// Three users of one shard share its one set: the oldest leaves.
	var same []uint64
	s0, _ := c.slot(1)
	for u := uint64(1); len(same) < 3; u++ {
		if s, _ := c.slot(u); s == s0 {
			same = append(same, u)
		}
	}
	for i, u := range same {
		c.put(u, uint32(10+i))
		c.put(u, uint32(10+i)) // again: no second way
	}
	if _, ok := c.get(same[0]); ok {
		t.Fatal("the oldest of three users in a 2-way set is still cached")
	}
	for i, u := range same[1:] {
		if o, ok := c.get(u); !ok || o != uint32(11+i) {
			t.Fatalf("user %d: %d %v, want %d", u, o, ok, 11+i)
		}
	}
	c.put(7, 0) // ordinal 0 is a value, not "empty"
	if s, _ := c.slot(7); s == s0 {
		t.Skip("user 7 shares the shard")
	}
	if o, ok := c.get(7); !ok || o != 0 {
		t.Fatalf("ordinal 0: %d %v", o, ok)
	}
	c.clear()
	if _, ok := c.get(7); ok {
		t.Fatal("hit after clear")
	}
	if c.hitCount() == 0 || c.missCount() == 0 {
		t.Fatalf("hits %d misses %d", c.hitCount(), c.missCount())
	}
}

// roaringLikes makes item 1 roaring and liked by users 1..n, then has
// each unlike and like it again (the second round finds the ordinals).
func roaringLikes(t *testing.T, l *Likes, n uint64) {
	t.Helper()
	for u := uint64(1); u <= n; u++ {
		if _, err := l.Like("video", 1, u, 0); err != nil {
			t.Fatal(err)
		}
	}
	for u := uint64(1); u <= n; u++ {
		if _, err := l.Unlike("video", 1, u); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Like("video", 1, u, 0); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOrdinalCache: transitions on a roaring item find their users'
// ordinals in the cache, and Check catches an entry the store disagrees
// with.
func TestOrdinalCache(t *testing.T) {
	e := newEnv(t, &Options{RoaringThreshold: MinRoaringThreshold})
	roaringLikes(t, e.l, 3*MinRoaringThreshold)
	if h := e.l.ords.cache.hitCount(); h < 2*MinRoaringThreshold {
		t.Fatalf("%d cache hits, want at least %d", h, 2*MinRoaringThreshold)
	}
	e.check()
	ord, ok := e.l.ords.cache.get(5)
	if !ok {
		t.Fatal("user 5 is not cached")
	}
	e.l.ords.cache.clear()
	e.l.ords.cache.put(5, ord+1)
	if err := e.l.Check(); err == nil || !strings.Contains(err.Error(), "ordinal cache") {
		t.Fatalf("Check with a wrong cached ordinal: %v", err)
	}
	e.l.ords.cache.clear()
	// New warms the cache from likes-ord: every liker of item 1 hits.
	e.reopen()
	for u := uint64(1); u <= 3*MinRoaringThreshold; u++ {
		if _, err := e.l.Unlike("video", 1, u); err != nil {
			t.Fatal(err)
		}
	}
	if h, m := e.l.ords.cache.hitCount(), e.l.ords.cache.missCount(); h != 3*MinRoaringThreshold || m != 0 {
		t.Fatalf("after a reopen: %d hits, %d misses; want %d, 0", h, m, 3*MinRoaringThreshold)
	}
	// Off: the same transitions, no cache.
	e2 := newEnv(t, &Options{RoaringThreshold: MinRoaringThreshold, OrdinalCacheBytes: -1})
	roaringLikes(t, e2.l, 2*MinRoaringThreshold)
	if e2.l.ords.cache != nil {
		t.Fatal("OrdinalCacheBytes -1 made a cache")
	}
	if _, err := New(e2.db, &Options{OrdinalCacheBytes: 1 << 41}); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("a 2 TiB cache: %v", err)
	}
}

// TestOrdinalCacheAfterReopen: a store reopen may take away an ordinal
// that was visible (its fsync failed), so it empties the cache: the entry
// planted before the failure, which the store never held, would fail
// Check otherwise.
func TestOrdinalCacheAfterReopen(t *testing.T) {
	db, fault, l := openFailing(t, store.SyncAlways, &Options{RoaringThreshold: MinRoaringThreshold, CreateBusinesses: true})
	roaringLikes(t, l, 2*MinRoaringThreshold)
	l.ords.cache.put(1_000_000, 999) // never in the store
	fault.On()
	if _, err := l.Like("video", 1, 500, 0); !errors.Is(err, store.ErrFailed) {
		t.Fatalf("a like with a failing WAL sync: %v", err)
	}
	fault.Off()
	testutil.UntilHealed(t, "a like", store.ErrFailed, db.Generation, func() error {
		_, err := l.Like("video", 1, 501, 0)
		return err
	})
	if err := l.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestOrdinalCacheAfterLoad: a bulk load leaves its users' ordinals in the
// cache, so the transitions after it find them without a Get.
func TestOrdinalCacheAfterLoad(t *testing.T) {
	e := newEnv(t, &Options{RoaringThreshold: MinRoaringThreshold})
	var likes []LoadLike
	for u := uint64(1); u <= 3*MinRoaringThreshold; u++ {
		likes = append(likes, LoadLike{Item: 1, User: u}, LoadLike{Item: 2, User: u})
	}
	st, err := e.l.Load(context.Background(), "video", likes, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.Converted != 2 {
		t.Fatalf("load converted %d sets, want 2", st.Converted)
	}
	e.check()
	h0, m0 := e.l.ords.cache.hitCount(), e.l.ords.cache.missCount()
	for u := uint64(1); u <= 3*MinRoaringThreshold; u++ {
		if _, err := e.l.Dislike("video", 1, u); err != nil {
			t.Fatal(err)
		}
	}
	if h, m := e.l.ords.cache.hitCount()-h0, e.l.ords.cache.missCount()-m0; h != 3*MinRoaringThreshold || m != 0 {
		t.Fatalf("after the load: %d hits, %d misses; want %d, 0", h, m, 3*MinRoaringThreshold)
	}
}

package cold

import (
	"math/rand/v2"
	"sync"
	"testing"
)

func fakeBlock(size int) *Block { return &Block{ncols: 1, n: size, data: make([]byte, size)} }

func TestCacheBound(t *testing.T) {
	const max = 64 << 10
	c := NewCache(max)
	for i := range uint32(1000) {
		c.put(uint64(i%3), i, fakeBlock(100+int(i%7)*50))
		if st := c.Stats(); st.Bytes > max {
			t.Fatalf("cache holds %d bytes > %d", st.Bytes, max)
		}
	}
	st := c.Stats()
	if st.Evictions == 0 || st.Entries == 0 {
		t.Fatalf("stats %+v: want evictions and entries", st)
	}
	// A block larger than a shard's share is not cached.
	c.put(9, 9, fakeBlock(max))
	if c.get(9, 9) != nil {
		t.Fatal("oversized block cached")
	}
}

func TestCacheHitMissAndClock(t *testing.T) {
	c := NewCache(cacheShards * 4 * (100 + 256)) // four 100-byte blocks per shard
	if c.get(1, 1) != nil {
		t.Fatal("hit on empty cache")
	}
	b := fakeBlock(100)
	c.put(1, 1, b)
	if c.get(1, 1) != b {
		t.Fatal("miss after put")
	}
	st := c.Stats()
	if st.Hits != 1 || st.Misses != 1 {
		t.Fatalf("stats %+v", st)
	}
	// Keep (1,1) referenced while filling its shard: CLOCK keeps it.
	s := c.shard(cacheKey{1, 1})
	for i := uint32(2); i < 2000; i++ {
		if c.shard(cacheKey{1, i}) != s {
			continue
		}
		c.put(1, i, fakeBlock(100))
		if c.get(1, 1) == nil {
			t.Fatalf("referenced block evicted at %d", i)
		}
	}
	c.Evict(1)
	if st := c.Stats(); st.Entries != 0 || st.Bytes != 0 {
		t.Fatalf("after Evict: %+v", st)
	}
	var nilCache *Cache
	nilCache.put(1, 1, b)
	if nilCache.get(1, 1) != nil || nilCache.Stats() != (CacheStats{}) {
		t.Fatal("nil cache cached")
	}
}

// TestCacheConcurrent reads one range from many goroutines through a cache
// much smaller than the data (run with -race).
func TestCacheConcurrent(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	rows := genRows(r, 20000, 2, 24, distPowerLaw)
	cache := NewCache(32 << 10)
	rd, _ := open(t, rows, 2, BuildOptions{TargetBlockSize: 1024}, cache)
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 1))
			var dst []uint64
			keys := make([]uint64, 10)
			found := make([]bool, 10)
			for range 300 {
				row := rows[r.IntN(len(rows))]
				var ok bool
				var err error
				dst, ok, err = rd.Get(row.Key, dst)
				if err != nil || !ok || dst[0] != row.Vals[0] || dst[1] != row.Vals[1] {
					errs <- "Get mismatch"
					return
				}
				for i := range keys {
					keys[i] = rows[r.IntN(len(rows))].Key
				}
				out, err := rd.MultiGet(keys, dst, found)
				if err != nil {
					errs <- err.Error()
					return
				}
				dst = out
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	st := cache.Stats()
	if st.Bytes > 32<<10 || st.Hits == 0 || st.Misses == 0 || st.Evictions == 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestGetAllocs(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	rows := genRows(r, 5000, 2, 20, distPowerLaw)
	rd, _ := open(t, rows, 2, BuildOptions{}, NewCache(1<<24))
	dst := make([]uint64, 0, 20)
	found := make([]bool, 10)
	keys := make([]uint64, 10)
	for i := range keys {
		keys[i] = rows[i*400].Key
	}
	rd.MultiGet(keys, dst, found) // warm
	if n := testing.AllocsPerRun(100, func() {
		dst, _ = rd.MultiGet(keys, dst, found)
		dst, _, _ = rd.Get(keys[3], dst)
		dst, _, _ = rd.Get(keys[3]+1, dst)
	}); n != 0 {
		t.Fatalf("cached Get/MultiGet allocate %v times", n)
	}
}

package cold

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestPresenceModes checks rank, contains and the cursor against a sorted
// key list for key sets that take each form: chunked (arrays and bitmaps)
// and, when chunks are thin (snowflake ids in wide ranges), the sorted key
// array; and that the chunked form keeps no append slack.
func TestPresenceModes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		name   string
		gap    func() uint64
		sparse bool
	}{
		{"dense", func() uint64 { return 1 + rng.Uint64N(3) }, false},
		{"arrays", func() uint64 { return 1 + rng.Uint64N(200) }, false},
		{"one per chunk", func() uint64 { return 1<<16 + rng.Uint64N(1<<20) }, true},
		{"snowflake", func() uint64 { return (300 + rng.Uint64N(900)) << 22 }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var keys []uint64
			var b presenceBuilder
			k := rng.Uint64N(1 << 20)
			for range 20000 {
				keys = append(keys, k)
				b.add(k)
				k += tc.gap()
			}
			p := b.finish()
			if got := p.keys != nil; got != tc.sparse {
				t.Fatalf("sorted key array %v, want %v", got, tc.sparse)
			}
			if p.len() != uint64(len(keys)) {
				t.Fatalf("len %d, want %d", p.len(), len(keys))
			}
			// Exact copies, up to the allocator's size class (< 1/8 above).
			slack := func(l, c int) bool { return c > l+l/8+16 }
			if slack(len(p.hi), cap(p.hi)) || slack(len(p.lows), cap(p.lows)) || slack(len(p.ch), cap(p.ch)) || slack(len(p.keys), cap(p.keys)) {
				t.Fatalf("slack: hi %d/%d lows %d/%d ch %d/%d keys %d/%d", len(p.hi), cap(p.hi),
					len(p.lows), cap(p.lows), len(p.ch), cap(p.ch), len(p.keys), cap(p.keys))
			}
			if per := float64(p.memBytes()) / float64(len(keys)); per > 8.5 {
				t.Errorf("%.1f B per key", per)
			}
			for i, key := range keys {
				if r, ok := p.rank(key); !ok || r != uint64(i) || !p.contains(key) {
					t.Fatalf("key %d: rank %d %v, contains %v", key, r, ok, p.contains(key))
				}
				probe := key + 1
				_, want := slices.BinarySearch(keys, probe)
				if _, ok := p.rank(probe); ok != want || p.contains(probe) != want {
					t.Fatalf("probe %d: present %v, want %v", probe, ok, want)
				}
			}
			for _, r := range []uint64{0, 1, uint64(len(keys)) / 2, uint64(len(keys)) - 1} {
				cur := p.seek(r)
				for i := r; i < uint64(len(keys)); i++ {
					got, ok := cur.next()
					if !ok || got != keys[i] {
						t.Fatalf("cursor from %d: key %d = %d %v, want %d", r, i, got, ok, keys[i])
					}
				}
				if _, ok := cur.next(); ok {
					t.Fatalf("cursor from %d: past the end", r)
				}
			}
		})
	}
}

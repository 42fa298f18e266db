package timeline

import (
	"math/bits"
	"slices"
	"testing"
)

// TestRepostIndexFilter: through adds and removes that grow and rebuild
// the filter, mayHave is never false for an original with reposts,
// newerVisible agrees with a plain scan of the reposts, and the filter
// rejects most posts never reposted (a post whose reposts were all
// taken back passes until the next rebuild).
func TestRepostIndexFilter(t *testing.T) {
	rng := newRand(21)
	x := &repostIndex{}
	x.set(map[uint64][]repostRef{})
	truth := map[uint64][]repostRef{}
	followees := []uint64{2, 4, 6, 8}
	for step := range 60_000 {
		o := 1 + rng.Uint64N(20_000)
		if step > 30_000 && rng.IntN(3) > 0 && len(truth[o]) > 0 { // shrink
			r := truth[o][rng.IntN(len(truth[o]))]
			x.remove(o, r.id)
			truth[o] = slices.DeleteFunc(truth[o], func(q repostRef) bool { return q.id == r.id })
			if len(truth[o]) == 0 {
				delete(truth, o)
			}
		} else {
			r := repostRef{id: o + 1 + rng.Uint64N(1000), by: 1 + rng.Uint64N(10)}
			x.add(o, r)
			if !slices.ContainsFunc(truth[o], func(q repostRef) bool { return q.id == r.id }) {
				truth[o] = append(truth[o], r)
			} else {
				i := slices.IndexFunc(truth[o], func(q repostRef) bool { return q.id == r.id })
				truth[o][i] = r
			}
		}
		if step%1000 != 0 {
			continue
		}
		falsePos := 0
		for q := uint64(1); q <= 20_000; q++ {
			rs := truth[q]
			if len(rs) > 0 && !x.mayHave(q) {
				t.Fatalf("step %d: original %d has %d reposts, the filter says none", step, q, len(rs))
			}
			if x.mayHave(20_000 + q) { // never reposted
				falsePos++
			}
			above := q + rng.Uint64N(1000)
			want := slices.ContainsFunc(rs, func(r repostRef) bool { return r.id > above && slices.Contains(followees, r.by) })
			if got := x.newerVisible(q, above, followees); got != want {
				t.Fatalf("step %d: newerVisible(%d, %d) = %v, want %v", step, q, above, got, want)
			}
		}
		if len(x.m) != len(truth) {
			t.Fatalf("step %d: index holds %d originals, want %d", step, len(x.m), len(truth))
		}
		if falsePos*8 > 20_000 {
			t.Fatalf("step %d: the filter passes %d of 20000 posts never reposted (bits %d, set %d, originals %d, stale %d)", step, falsePos, 64*len(x.filter), popcount(x.filter), len(x.m), x.stale)
		}
	}
}

func popcount(ws []uint64) int {
	n := 0
	for _, w := range ws {
		n += bits.OnesCount64(w)
	}
	return n
}

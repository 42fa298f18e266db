package likes

import (
	"math/rand/v2"
	"testing"
)

// TestHistogramLayout: the last bucket (of the largest score) is in the
// last group, and groups are bucketSub buckets.
func TestHistogramLayout(t *testing.T) {
	last := int(bucketOf(^uint64(0)))
	if last/bucketSub != histGroups-1 {
		t.Fatalf("bucket %d of the largest score is in group %d, want the last, %d", last, last/bucketSub, histGroups-1)
	}
}

// TestHistogramModel checks boardHist and histograms against a plain
// count per bucket through random moves: above, count, the emptied board
// dropped, and dropDays.
func TestHistogramModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 18))
	hs := newHistograms()
	model := map[boardID]map[uint16]int64{}
	score := func() uint64 {
		if rng.IntN(2) == 0 {
			return uint64(rng.IntN(300))
		}
		return rng.Uint64() >> rng.IntN(64)
	}
	for step := range 20000 {
		id := boardID{uint32(1 + rng.IntN(2)), uint32(rng.IntN(3))}
		b := bucketOf(score())
		m := model[id]
		if m == nil {
			m = map[uint16]int64{}
			model[id] = m
		}
		var moves []histMove
		if rng.IntN(3) > 0 || m[b] == 0 {
			moves = append(moves, histMove{id: id, to: b, hasTo: true})
			m[b]++
		} else {
			moves = append(moves, histMove{id: id, from: b, hasFrom: true})
			m[b]--
		}
		hs.applyMoves(moves)
		if step%1000 == 999 {
			hs.dropDays(1, 1)
			delete(model, boardID{1, 0})
		}
		q := bucketOf(score())
		for id, m := range model {
			var want, items int64
			for b, n := range m {
				if b > q {
					want += n
				}
				items += n
			}
			got, err := hs.above(id, q)
			if err != nil || got != want {
				t.Fatalf("step %d: board %v: %d above bucket %d, want %d (%v)", step, id, got, q, want, err)
			}
			h := hs.boards[id]
			if items == 0 && h != nil {
				t.Fatalf("step %d: board %v is empty but kept", step, id)
			}
			if h != nil && (h.items != items || h.count(q) != m[q]) {
				t.Fatalf("step %d: board %v: %d items, bucket %d holds %d; want %d, %d", step, id, h.items, q, h.count(q), items, m[q])
			}
		}
	}
}

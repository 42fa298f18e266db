package socialgraph

import (
	"slices"
	"testing"
)

func TestGraph(t *testing.T) {
	c := Config{Users: 5000, MeanFollowees: 20, BigAuthor: 1, BigFollowers: 3000, ActiveFraction: 0.2, Seed: 7}
	g := New(c)
	type edge struct{ u, f uint64 }
	seen := map[edge]bool{}
	followers := map[uint64]int{}
	n := g.Edges(func(u, f uint64) {
		if u == f || u == 0 || f == 0 || u > 5000 || f > 5000 {
			t.Fatalf("bad edge %d -> %d", u, f)
		}
		if seen[edge{u, f}] {
			t.Fatalf("edge %d -> %d twice", u, f)
		}
		seen[edge{u, f}] = true
		followers[f]++
	})
	if n != len(seen) {
		t.Fatalf("%d edges reported, %d seen", n, len(seen))
	}
	if mean := float64(n-3000) / 5000; mean < 15 || mean > 25 {
		t.Fatalf("mean followees %.1f, want about 20", mean)
	}
	if followers[1] != 3000 {
		t.Fatalf("big author has %d followers, want 3000", followers[1])
	}
	// Power law: the most followed account (after the big author) has far
	// more followers than the median one.
	var counts []int
	for a, k := range followers {
		if a != 1 {
			counts = append(counts, k)
		}
	}
	slices.Sort(counts)
	if top, med := counts[len(counts)-1], counts[len(counts)/2]; top < 50*max(med, 1) {
		t.Fatalf("follower counts not skewed: top %d, median %d", top, med)
	}
	if a := len(g.Active); a < 800 || a > 1200 {
		t.Fatalf("%d active users of 5000 at 20%%", a)
	}
	// The same seed gives the same graph.
	var again []edge
	New(c).Edges(func(u, f uint64) { again = append(again, edge{u, f}) })
	if len(again) != n {
		t.Fatalf("second generation: %d edges, first %d", len(again), n)
	}
	for _, e := range again {
		if !seen[e] {
			t.Fatalf("second generation has %v", e)
		}
	}
	if fs := g.Following(6000, 500, 1); len(fs) != 500 || slices.Contains(fs, 6000) {
		t.Fatalf("Following: %d ids", len(fs))
	}
}

package workload

import (
	"slices"
	"testing"
)

func TestFollowGraph(t *testing.T) {
	g, err := NewFollowGraph(FollowConfig{Seed: 3, Users: 100, Authors: 5000, Follows: 200})
	if err != nil {
		t.Fatal(err)
	}
	counts := map[uint64]int{}
	for u := uint64(1); u <= 100; u++ {
		fs := g.Followees(u, nil)
		if len(fs) != 200 || !slices.IsSorted(fs) || len(slices.Compact(slices.Clone(fs))) != 200 {
			t.Fatalf("user %d: %d followees, sorted %v", u, len(fs), slices.IsSorted(fs))
		}
		if slices.Contains(fs, u) {
			t.Fatalf("user %d follows itself", u)
		}
		if again := g.Followees(u, nil); !slices.Equal(again, fs) {
			t.Fatal("followees not deterministic")
		}
		for _, f := range fs {
			if f < 1 || f > 5000 {
				t.Fatalf("author %d out of range", f)
			}
			counts[f]++
		}
	}
	// Skewed: the most followed author is followed by most users, and many
	// authors by none.
	most := 0
	for _, c := range counts {
		most = max(most, c)
	}
	if most < 50 || len(counts) > 4900 {
		t.Fatalf("popularity not skewed: most %d, %d authors followed", most, len(counts))
	}
	var zero, big int
	for a := uint64(1); a <= 5000; a++ {
		switch p := g.Posts(a); {
		case p == 0:
			zero++
		case p > 100:
			big++
		}
	}
	if zero < 500 || big < 10 {
		t.Fatalf("post counts: %d zero, %d above 100", zero, big)
	}
	if _, err := NewFollowGraph(FollowConfig{Authors: 10, Follows: 6}); err == nil {
		t.Fatal("6 follows among 10 authors accepted")
	}
}

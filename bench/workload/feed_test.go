package workload

import (
	"slices"
	"testing"
)

func TestFeedGraph(t *testing.T) {
	g, err := NewFeedGraph(FeedConfig{Seed: 3, Users: 50, Authors: 5000, Follows: 200})
	if err != nil {
		t.Fatal(err)
	}
	for u := uint64(1); u <= 50; u++ {
		fs := g.Followees(u, nil)
		if len(fs) != 200 || !slices.IsSorted(fs) || len(slices.Compact(slices.Clone(fs))) != 200 || slices.Contains(fs, u) {
			t.Fatalf("user %d: followees %v", u, fs)
		}
		if fs[0] < 1 || fs[199] > 5000 {
			t.Fatalf("user %d: followee out of range", u)
		}
		if !slices.Equal(g.Followees(u, nil), fs) {
			t.Fatal("not deterministic")
		}
	}
	var zero, some int
	for a := uint64(1); a <= 5000; a++ {
		if g.Posts(a) == 0 {
			zero++
		} else {
			some++
		}
	}
	if zero < 1000 || some < 1000 {
		t.Fatalf("post counts: %d zero, %d not", zero, some)
	}
	if _, err := NewFeedGraph(FeedConfig{Users: 1, Authors: 10, Follows: 10}); err == nil {
		t.Fatal("10 follows among 10 accounts accepted")
	}
}

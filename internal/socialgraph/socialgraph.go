// Package socialgraph generates follow graphs shaped like a microblog's, for
// the timeline benchmarks (package timeline's testing.B, bench's peer
// comparison) and tally demo: users 1..Users, follower counts following a
// power law (each follow picks its followee with a Zipf law over a random
// ranking of the users), optionally one author followed by a given number
// of users, and a fraction of users active. The same Config and seed give
// the same graph.
package socialgraph

import (
	"math/rand/v2"
	"slices"
)

// Config describes a graph.
type Config struct {
	// Users is the number of users, ids 1..Users.
	Users int
	// MeanFollowees is the mean number of accounts a user follows; each
	// user's count is drawn uniformly from 0..2*MeanFollowees.
	MeanFollowees int
	// Skew is the Zipf exponent of followee popularity (> 1; 1.1 gives a
	// few accounts with a large share of all follows). The default is 1.1.
	Skew float64
	// BigAuthor, if not zero, is a user every one of the first
	// BigFollowers other users follows (on top of their drawn followees).
	BigAuthor    uint64
	BigFollowers int
	// ActiveFraction is the share of users who read their home (20% in
	// the benchmark).
	ActiveFraction float64
	// Seed seeds the generator.
	Seed uint64
}

// Graph is a generated graph.
type Graph struct {
	Config
	// Active holds the active users, ascending.
	Active []uint64
	rank   []uint64 // popularity rank -> user id
}

// New prepares the graph of c (the ranking and the active users); Edges
// streams its follows.
func New(c Config) *Graph {
	if c.Skew <= 1 {
		c.Skew = 1.1
	}
	r := rand.New(rand.NewPCG(c.Seed, 0x50c1a1))
	g := &Graph{Config: c, rank: make([]uint64, c.Users)}
	for i := range g.rank {
		g.rank[i] = uint64(i + 1)
	}
	r.Shuffle(len(g.rank), func(i, j int) { g.rank[i], g.rank[j] = g.rank[j], g.rank[i] })
	for u := 1; u <= c.Users; u++ {
		if r.Float64() < c.ActiveFraction {
			g.Active = append(g.Active, uint64(u))
		}
	}
	return g
}

// Edges calls fn for every follow of the graph (follower, followee), each
// once, never a self-follow. It returns the number of edges.
func (g *Graph) Edges(fn func(follower, followee uint64)) int {
	r := rand.New(rand.NewPCG(g.Seed, 0xed9e5))
	n := 0
	if g.Users < 2 {
		return 0
	}
	z := rand.NewZipf(r, g.Skew, 1, uint64(g.Users-1))
	var picked []uint64
	for u := uint64(1); u <= uint64(g.Users); u++ {
		k := 0
		if g.MeanFollowees > 0 {
			k = r.IntN(2*g.MeanFollowees + 1)
		}
		k = min(k, g.Users-1)
		picked = picked[:0]
		for tries := 0; len(picked) < k && tries < 4*k+16; tries++ {
			f := g.rank[z.Uint64()]
			if f == u || f == g.BigAuthor && g.BigAuthor != 0 || slices.Contains(picked, f) {
				continue
			}
			picked = append(picked, f)
		}
		if g.BigAuthor != 0 && u != g.BigAuthor && int(u) <= g.BigFollowers+1 {
			picked = append(picked, g.BigAuthor)
		}
		for _, f := range picked {
			fn(u, f)
			n++
		}
	}
	return n
}

// Following returns count distinct users (not u) for u to follow, for a
// user who follows many (the rebuild benchmark's reader of 500 authors).
func (g *Graph) Following(u uint64, count int, seed uint64) []uint64 {
	r := rand.New(rand.NewPCG(seed, u))
	seen := map[uint64]bool{u: true}
	var out []uint64
	for len(out) < count && len(seen) < g.Users {
		f := uint64(1 + r.IntN(g.Users))
		if !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	return out
}

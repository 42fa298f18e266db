package workload

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// Defaults of FollowConfig.
const (
	DefaultFollowUsers   = 10_000
	DefaultFollowAuthors = 100_000
	DefaultFollows       = 200
	// DefaultFollowSkew is the Zipf exponent of an author's popularity by
	// rank: a few authors are followed by most users.
	DefaultFollowSkew = 1.1
	// DefaultPostAlpha is the power law of an author's post count:
	// P(posts ≥ k) ≈ k^-alpha.
	DefaultPostAlpha = 0.8
)

// FollowConfig describes a follow graph for the unread and timeline
// benchmarks and demos: Users users (ids 1..Users), each following Follows
// distinct authors among ids 1..Authors (so users are authors too), picked
// with Zipf popularity over a seeded permutation of the authors (popular
// accounts are not simply the lowest ids), and a power-law post count per
// author. The zero value of a field means its default.
type FollowConfig struct {
	Seed    uint64
	Users   int
	Authors int
	Follows int
	Skew    float64
	// PostAlpha is the exponent of the post counts' power law; counts are
	// capped at MaxPosts (default 1,000,000).
	PostAlpha float64
	MaxPosts  uint64
}

// FollowGraph is a generated follow graph. It is immutable and safe for
// concurrent use.
type FollowGraph struct {
	cfg   FollowConfig
	perm  []uint32 // popularity rank → author id - 1
	posts []uint32 // author id - 1 → initial post count
}

// NewFollowGraph generates the graph's authors; followee lists are drawn
// per user on demand (Followees), from the seed.
func NewFollowGraph(cfg FollowConfig) (*FollowGraph, error) {
	if cfg.Users == 0 {
		cfg.Users = DefaultFollowUsers
	}
	if cfg.Authors == 0 {
		cfg.Authors = DefaultFollowAuthors
	}
	if cfg.Follows == 0 {
		cfg.Follows = DefaultFollows
	}
	if cfg.Skew == 0 {
		cfg.Skew = DefaultFollowSkew
	}
	if cfg.PostAlpha == 0 {
		cfg.PostAlpha = DefaultPostAlpha
	}
	if cfg.MaxPosts == 0 {
		cfg.MaxPosts = 1_000_000
	}
	switch {
	case cfg.Users < 0 || cfg.Authors < 2 || cfg.Authors > math.MaxUint32:
		return nil, fmt.Errorf("workload: follow graph of %d users and %d authors", cfg.Users, cfg.Authors)
	case cfg.Follows < 0 || cfg.Follows > cfg.Authors/2:
		return nil, fmt.Errorf("workload: %d follows per user among %d authors (at most half)", cfg.Follows, cfg.Authors)
	case cfg.Skew <= 1:
		return nil, fmt.Errorf("workload: follow skew %g (want > 1)", cfg.Skew)
	case cfg.PostAlpha <= 0:
		return nil, fmt.Errorf("workload: post alpha %g (want > 0)", cfg.PostAlpha)
	}
	g := &FollowGraph{cfg: cfg, perm: make([]uint32, cfg.Authors), posts: make([]uint32, cfg.Authors)}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0xf0110))
	for i := range g.perm {
		g.perm[i] = uint32(i)
	}
	rng.Shuffle(len(g.perm), func(i, j int) { g.perm[i], g.perm[j] = g.perm[j], g.perm[i] })
	for i := range g.posts {
		p := math.Pow(1-rng.Float64(), -1/cfg.PostAlpha) - 1
		g.posts[i] = uint32(min(p, float64(cfg.MaxPosts)))
	}
	return g, nil
}

// Config returns the graph's configuration with defaults filled in.
func (g *FollowGraph) Config() FollowConfig { return g.cfg }

// Users returns the number of users; user i (0-based) has id i+1.
func (g *FollowGraph) Users() int { return g.cfg.Users }

// Authors returns the number of authors (ids 1..Authors).
func (g *FollowGraph) Authors() int { return g.cfg.Authors }

// Posts returns author's initial post count.
func (g *FollowGraph) Posts(author uint64) uint64 { return uint64(g.posts[author-1]) }

// Followees appends user's followees (Follows distinct author ids, never
// user itself), ascending, to dst[:0].
func (g *FollowGraph) Followees(user uint64, dst []uint64) []uint64 {
	rng := rand.New(rand.NewPCG(g.cfg.Seed^0x5eed, user))
	z := rand.NewZipf(rng, g.cfg.Skew, 1, uint64(g.cfg.Authors-1))
	dst = dst[:0]
	for len(dst) < g.cfg.Follows {
		f := uint64(g.perm[z.Uint64()]) + 1
		if f == user {
			continue
		}
		i, found := slices.BinarySearch(dst, f)
		if !found {
			dst = slices.Insert(dst, i, f)
		}
	}
	return dst
}

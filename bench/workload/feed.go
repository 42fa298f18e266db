package workload

import (
	"fmt"
	"slices"

	"github.com/tallydb/tally/internal/socialgraph"
)

// FeedConfig describes the data of the feed-unread benchmarks and demo:
// Users users (ids 1..Users) each following exactly Follows distinct
// accounts among ids 1..Authors (internal/socialgraph's Following), and
// every account's post count drawn like a counter of this package (power
// law, most accounts with no posts).
type FeedConfig struct {
	Seed    uint64
	Users   int
	Authors int
	Follows int
}

// FeedGraph is a generated feed data set; it is immutable and safe for
// concurrent use.
type FeedGraph struct {
	cfg   FeedConfig
	graph *socialgraph.Graph
	posts *Workload
}

// NewFeedGraph checks cfg and prepares the data set.
func NewFeedGraph(cfg FeedConfig) (*FeedGraph, error) {
	if cfg.Users < 1 || cfg.Authors < 2 || cfg.Follows < 0 || cfg.Follows >= cfg.Authors {
		return nil, fmt.Errorf("workload: feed graph of %d users following %d of %d accounts", cfg.Users, cfg.Follows, cfg.Authors)
	}
	posts, err := New(Config{Seed: cfg.Seed, Items: uint64(cfg.Authors), Columns: 1, MaxCount: 1 << 20})
	if err != nil {
		return nil, err
	}
	return &FeedGraph{cfg: cfg, graph: socialgraph.New(socialgraph.Config{Users: cfg.Authors, Seed: cfg.Seed}), posts: posts}, nil
}

// Config returns the configuration.
func (g *FeedGraph) Config() FeedConfig { return g.cfg }

// Followees returns user's followees, ascending, in dst[:0].
func (g *FeedGraph) Followees(user uint64, dst []uint64) []uint64 {
	dst = append(dst[:0], g.graph.Following(user, g.cfg.Follows, g.cfg.Seed)...)
	slices.Sort(dst)
	return dst
}

// Posts returns account a's post count (a in 1..Authors).
func (g *FeedGraph) Posts(a uint64) uint64 {
	var buf [1]uint64
	return g.posts.Values(a-1, buf[:0])[0]
}

// Package tlworld builds timeline "worlds" for the benchmarks (package
// timeline's testing.B, bench's Redis comparison) and tally demo, through
// timeline's public API only: a generated follow graph bulk-loaded, the
// active users' inboxes built, and posts published with their fan-outs run,
// so that active users' inboxes hold a realistic number of entries.
package tlworld

import (
	"context"
	"math/rand/v2"

	"github.com/tallydb/tally/internal/socialgraph"
	"github.com/tallydb/tally/store"
	"github.com/tallydb/tally/timeline"
)

// FirstPost is the first post id a world uses; ids grow from it, so they
// are time-ordered like snowflakes.
const FirstPost = 1 << 40

// Options tune Build.
type Options struct {
	// PostsPerUser is how many posts each user publishes, in a random
	// order of users, round after round.
	PostsPerUser int
	// Readers adds users Graph.Users+1 .. Graph.Users+Readers who each
	// follow FollowsPerReader random users and are not active (the
	// rebuild-on-return benchmark reads them).
	Readers, FollowsPerReader int
	// Progress, if set, is told each stage's progress.
	Progress func(stage string, done, total int)
	// Seed seeds the order of posts.
	Seed uint64
}

// World is what Build made.
type World struct {
	Graph     *socialgraph.Graph
	Edges     int    // follows loaded
	Posts     int    // posts published
	NextPost  uint64 // the next free post id
	Readers   []uint64
	Published [][2]uint64 // (author, post) of every post, in order
}

// Edges returns the follows of g, plus those of the readers, as a slice
// for LoadFollows.
func Edges(g *socialgraph.Graph, o Options) ([]timeline.Edge, []uint64) {
	var edges []timeline.Edge
	g.Edges(func(u, f uint64) { edges = append(edges, timeline.Edge{Follower: u, Followee: f}) })
	var readers []uint64
	for i := range o.Readers {
		r := uint64(g.Users + 1 + i)
		readers = append(readers, r)
		for _, f := range g.Following(r, o.FollowsPerReader, g.Seed) {
			edges = append(edges, timeline.Edge{Follower: r, Followee: f})
		}
	}
	return edges, readers
}

// publishBatch is how many posts Build publishes between two runs of the
// job queue: the store's queue scans every queued job for each one it
// leases, so draining n jobs costs O(n²) (see the timeline package doc,
// "Caveats").
const publishBatch = 32

// Build loads g into tl, activates g's active users and publishes the
// posts, running the fan-outs as it goes. The store should have no job
// workers racing it (JobWorkers < 0) for a deterministic result, but works
// either way.
func Build(ctx context.Context, db *store.DB, tl *timeline.Timeline, g *socialgraph.Graph, o Options) (*World, error) {
	w := &World{Graph: g, NextPost: FirstPost}
	edges, readers := Edges(g, o)
	w.Readers = readers
	progress := func(stage string, done, total int) {
		if o.Progress != nil {
			o.Progress(stage, done, total)
		}
	}
	st, err := tl.LoadFollows(ctx, edges, func(done int) { progress("follows", done, len(edges)) })
	if err != nil {
		return nil, err
	}
	w.Edges = st.Added
	edges = nil
	for i := 0; i < len(g.Active); i += 4096 {
		if _, err := tl.MarkActiveMany(ctx, g.Active[i:min(i+4096, len(g.Active))]); err != nil {
			return nil, err
		}
		progress("active", min(i+4096, len(g.Active)), len(g.Active))
	}
	r := rand.New(rand.NewPCG(o.Seed, 0x9057))
	order := make([]uint64, g.Users)
	for i := range order {
		order[i] = uint64(i + 1)
	}
	total := g.Users * o.PostsPerUser
	for round := range o.PostsPerUser {
		r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for i, a := range order {
			if _, err := tl.Publish(a, w.NextPost); err != nil {
				return nil, err
			}
			w.Published = append(w.Published, [2]uint64{a, w.NextPost})
			w.NextPost++
			w.Posts++
			if (i+1)%publishBatch == 0 || i == len(order)-1 {
				if err := db.RunJobs(ctx, nil); err != nil {
					return nil, err
				}
				progress("posts", round*g.Users+i+1, total)
			}
		}
	}
	return w, nil
}

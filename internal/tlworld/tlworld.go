// Package tlworld builds timeline "worlds" for the benchmarks (package
// timeline's testing.B, bench's Redis comparison) and tally demo, through
// timeline's public API only: a generated follow graph bulk-loaded, the
// active users' inboxes built, and posts published with their fan-outs run,
// so that active users' inboxes hold a realistic number of entries.
package tlworld

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"

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
	// Publishers is how many goroutines publish (each running its posts'
	// fan-outs). The default is 1.
	Publishers int
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

// Build loads g into tl, activates g's active users, compacts the store
// (a settled graph) and publishes the posts, running the fan-outs as it
// goes. The store should have no job
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
	// Settle the bulk-loaded graph, as a deployment's compactions would
	// long before its next posts: until then every read of a follower
	// chunk merges one roaring operand per load batch.
	progress("compact", 0, 1)
	if err := db.CompactDisk(ctx); err != nil {
		return nil, err
	}
	progress("compact", 1, 1)
	r := rand.New(rand.NewPCG(o.Seed, 0x9057))
	order := make([]uint64, g.Users)
	for i := range order {
		order[i] = uint64(i + 1)
	}
	for range o.PostsPerUser {
		r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, a := range order {
			w.Published = append(w.Published, [2]uint64{a, w.NextPost})
			w.NextPost++
		}
	}
	w.Posts = len(w.Published)
	// Publishers take the posts in order; each runs its post's fan-out
	// (WaitJob runs it in the caller when no worker has it), so fan-outs
	// run on several goroutines and the queue stays short.
	publishers := max(o.Publishers, 1)
	progress("posts", 0, w.Posts)
	var next, done atomic.Int64
	errs := make([]error, publishers)
	var wg sync.WaitGroup
	for p := range publishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := next.Add(1) - 1
				if i >= int64(len(w.Published)) {
					return
				}
				ap := w.Published[i]
				res, err := tl.Publish(ap[0], ap[1])
				if err == nil && res.Job != 0 {
					err = db.WaitJob(ctx, res.Job)
				}
				if err != nil {
					errs[p] = err
					return
				}
				if n := done.Add(1); n%1024 == 0 && p == 0 {
					progress("posts", int(n), w.Posts)
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	progress("posts", w.Posts, w.Posts)
	return w, nil
}

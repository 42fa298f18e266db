package unread

import (
	"sync"
	"sync/atomic"

	"github.com/tallydb/tally/timeline"
)

// testGraph is a follow graph the tests can drive: the stand-in
// (fakeGraph) or the real timeline (tlGraph).
type testGraph interface {
	FollowGraph
	Follow(user, f uint64) (bool, error)
	Unfollow(user, f uint64) (bool, error)
	// Publish adds a post by author and returns author's new count.
	Publish(author uint64) (uint64, error)
	// Unpublish removes one post of author (false if none) and returns the
	// new count.
	Unpublish(author uint64) (bool, uint64, error)
	posts(author uint64) uint64
	check() error
	close() error
}

func (g *fakeGraph) check() error { return nil }
func (g *fakeGraph) close() error { return nil }

// postLog remembers the post ids each author published through a tlGraph,
// across reopens of the store (every publish is synced before it returns).
type postLog struct {
	next     atomic.Uint64
	mu       sync.Mutex
	byAuthor map[uint64][]uint64
}

// tlGraph drives the real timeline with generated post ids.
type tlGraph struct {
	*timeline.Timeline
	log *postLog
}

func (g *tlGraph) Publish(author uint64) (uint64, error) {
	id := g.log.next.Add(1)
	if _, err := g.Timeline.Publish(author, id); err != nil {
		return 0, err
	}
	g.log.mu.Lock()
	g.log.byAuthor[author] = append(g.log.byAuthor[author], id)
	g.log.mu.Unlock()
	u, err := g.User(author)
	return u.Posts, err
}

func (g *tlGraph) Unpublish(author uint64) (bool, uint64, error) {
	g.log.mu.Lock()
	ids := g.log.byAuthor[author]
	if len(ids) == 0 {
		g.log.mu.Unlock()
		u, err := g.User(author)
		return false, u.Posts, err
	}
	id := ids[len(ids)-1]
	g.log.byAuthor[author] = ids[:len(ids)-1]
	g.log.mu.Unlock()
	ok, _, err := g.Timeline.Unpublish(author, id)
	if err != nil {
		return false, 0, err
	}
	u, err := g.User(author)
	return ok, u.Posts, err
}

func (g *tlGraph) posts(author uint64) uint64 {
	u, err := g.User(author)
	if err != nil {
		panic(err)
	}
	return u.Posts
}

func (g *tlGraph) check() error { return g.Timeline.Check() }
func (g *tlGraph) close() error { return g.Timeline.Close() }

package unread

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/tallydb/tally/store"
)

// fakeGraph is a faithful stand-in for timeline's follow graph, as the
// contract describes it: post and follow counts in counter "users"
// (columns followers, followees, posts), edges in a family of their own,
// and every change of one author (publish, unpublish, a follow or unfollow
// of them) serialized by a lock stripe of that author held from reading the
// post count to the commit, with the observers called inside the batch.
type fakeGraph struct {
	db    *store.DB
	users *store.Counter
	edges *store.Family
	locks [64]sync.Mutex
	obs   []FollowObserver
	// bypass, if set, makes follows and unfollows skip the observers (a
	// host that changed the graph without unread attached).
	bypass bool
}

// fakeEdges is the test graph's family: prefix 0x3F (unread's range, used
// by no production family), key user u64 | followee u64, empty value.
var fakeEdges = store.FamilySpec{Name: "unread_test_edges", Prefix: 0x3F, MinKeyLen: 16, MaxKeyLen: 16, MaxValueLen: 1}

var errSelfFollow = errors.New("fake graph: following oneself")

func newFakeGraph(db *store.DB) (*fakeGraph, error) {
	g := &fakeGraph{db: db}
	if _, err := db.Counter(UsersCounter); errors.Is(err, store.ErrCounterNotFound) {
		if err := db.CreateCounter(UsersCounter, store.CounterOptions{Age: store.AgePolicy{Kind: store.KeepHot}}); err != nil {
			return nil, err
		}
		for _, c := range []string{"followers", "followees", "posts"} {
			if err := db.AddColumn(UsersCounter, c, store.ColumnOptions{HintBits: 16, MaxBits: 32}); err != nil {
				return nil, err
			}
		}
	}
	var err error
	if g.users, err = db.Counter(UsersCounter); err != nil {
		return nil, err
	}
	g.edges, err = db.Family(fakeEdges.Name)
	if errors.Is(err, store.ErrFamilyNotFound) {
		g.edges, err = db.RegisterFamily(fakeEdges)
	}
	return g, err
}

func edgeKey(user, followee uint64) []byte {
	k := binary.BigEndian.AppendUint64([]byte{fakeEdges.Prefix}, user)
	return binary.BigEndian.AppendUint64(k, followee)
}

func (g *fakeGraph) lock(author uint64) *sync.Mutex {
	return &g.locks[(author*0x9E3779B97F4A7C15)>>58]
}

func (g *fakeGraph) AddNamedObserver(_ string, o FollowObserver) error {
	g.obs = append(g.obs, o)
	return nil
}

// Follow makes user follow f; false if already.
func (g *fakeGraph) Follow(user, f uint64) (bool, error) {
	if user == f {
		return false, errSelfFollow
	}
	mu := g.lock(f)
	mu.Lock()
	defer mu.Unlock()
	if _, ok, err := g.edges.Get(edgeKey(user, f), nil); err != nil || ok {
		return false, err
	}
	posts, err := g.users.GetColumn(f, "posts")
	if err != nil {
		return false, err
	}
	b := g.db.NewBatch()
	defer b.Close()
	if err := g.edges.Put(b, edgeKey(user, f), nil); err != nil {
		return false, err
	}
	if err := errors.Join(b.Incr(UsersCounter, user, "followees", 1), b.Incr(UsersCounter, f, "followers", 1)); err != nil {
		return false, err
	}
	if !g.bypass {
		for _, o := range g.obs {
			if err := o.Followed(b, user, f, posts); err != nil {
				return false, err
			}
		}
	}
	return true, b.Commit()
}

// Unfollow removes the edge; false if there was none.
func (g *fakeGraph) Unfollow(user, f uint64) (bool, error) {
	mu := g.lock(f)
	mu.Lock()
	defer mu.Unlock()
	if _, ok, err := g.edges.Get(edgeKey(user, f), nil); err != nil || !ok {
		return false, err
	}
	b := g.db.NewBatch()
	defer b.Close()
	if err := g.edges.Delete(b, edgeKey(user, f)); err != nil {
		return false, err
	}
	if err := errors.Join(b.Incr(UsersCounter, user, "followees", -1), b.Incr(UsersCounter, f, "followers", -1)); err != nil {
		return false, err
	}
	if !g.bypass {
		for _, o := range g.obs {
			if err := o.Unfollowed(b, user, f); err != nil {
				return false, err
			}
		}
	}
	return true, b.Commit()
}

// Publish adds one post to author's count and returns the new count.
func (g *fakeGraph) Publish(author uint64) (uint64, error) {
	mu := g.lock(author)
	mu.Lock()
	defer mu.Unlock()
	return g.users.Incr(author, "posts", 1)
}

// Unpublish removes one post and returns the new count; false if the
// author has none.
func (g *fakeGraph) Unpublish(author uint64) (bool, uint64, error) {
	mu := g.lock(author)
	mu.Lock()
	defer mu.Unlock()
	n, err := g.users.GetColumn(author, "posts")
	if err != nil || n == 0 {
		return false, n, err
	}
	n, err = g.users.Incr(author, "posts", -1)
	return err == nil, n, err
}

func (g *fakeGraph) VisibleFollowees(user uint64, fn func(uint64) bool) error {
	p := binary.BigEndian.AppendUint64([]byte{fakeEdges.Prefix}, user)
	it, err := g.edges.NewIter(&store.IterOptions{Prefix: p})
	if err != nil {
		return err
	}
	for it.Next() {
		if !fn(binary.BigEndian.Uint64(it.Key()[9:])) {
			break
		}
	}
	return errors.Join(it.Err(), it.Close())
}

// posts returns author's post count.
func (g *fakeGraph) posts(author uint64) uint64 {
	n, err := g.users.GetColumn(author, "posts")
	if err != nil {
		panic(fmt.Sprintf("posts of %d: %v", author, err))
	}
	return n
}

// PostCounts reads column "posts" (the third) of the authors' rows, as
// timeline.PostCounts reads its own: into dst's capacity, compacted.
func (g *fakeGraph) PostCounts(authors, dst []uint64) ([]uint64, error) {
	const col = 2
	rows, err := g.users.MultiGet(authors, dst)
	if err != nil {
		return rows[:0], err
	}
	n := g.users.NumColumns()
	for i := range authors {
		rows[i] = rows[i*n+col]
	}
	return rows[:len(authors)], nil
}

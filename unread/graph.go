package unread

import (
	"errors"
	"fmt"
	"sync"

	"github.com/tallydb/tally/store"
	"github.com/tallydb/tally/timeline"
)

// FollowObserver is timeline's: unread's observer is told of every
// follow-graph change inside the batch that makes it.
type FollowObserver = timeline.FollowObserver

// FollowGraph is what the feed model needs from the follow graph: a
// *timeline.Timeline satisfies it (tests drive it with a stand-in as well).
// Post counts are not read through it: unread reads column "posts" of
// counter UsersCounter itself (see postCounts).
type FollowGraph interface {
	// Followees calls fn for each account user follows, in id order, from a
	// consistent view; fn returning false stops. unread calls it inside
	// db.View, so it must not wait for a commit.
	Followees(user uint64, fn func(followee uint64) bool) error
	// AddObserver registers o, before any write.
	AddObserver(o FollowObserver)
}

var _ FollowGraph = (*timeline.Timeline)(nil)

// UsersCounter is the follow graph's counter of per-user post and follow
// counts; PostsColumn its column of post counts (the contract between
// timeline and unread). New reads the counter once, the first time it sees
// a graph, to tell whether follows already exist (see "Users whose follows
// predate unread" in the package doc).
const (
	UsersCounter = timeline.UsersCounter
	PostsColumn  = timeline.ColPosts
)

// postReader reads post counts from UsersCounter: one MultiGet of the
// authors' rows, into a pooled buffer.
//
// Why not timeline.PostCounts, which the contract names: it reads into a
// new buffer per call (8 KB for 200 authors of its 5-column rows), and that
// garbage alone cut Feed from ~58k to ~16k gets/s on one core and raised
// its p9999 from under 1 ms to ~30 ms (BenchmarkFeed, busy machine). The
// counter and its column are part of the same contract.
type postReader struct {
	users *store.Counter
	col   int       // index of PostsColumn (columns are only ever added)
	rows  sync.Pool // *[]uint64
}

func newPostReader(db *store.DB) (*postReader, error) {
	c, err := db.Counter(UsersCounter)
	if errors.Is(err, store.ErrCounterNotFound) {
		return nil, fmt.Errorf("unread: the follow graph has no counter %s: %w", UsersCounter, err)
	}
	if err != nil {
		return nil, err
	}
	r := &postReader{users: c, col: -1}
	for i, name := range c.Columns() {
		if name == PostsColumn {
			r.col = i
		}
	}
	if r.col < 0 {
		return nil, fmt.Errorf("unread: counter %s has no column %s: %w", UsersCounter, PostsColumn, store.ErrColumnNotFound)
	}
	r.rows.New = func() any { return new([]uint64) }
	return r, nil
}

// postCounts returns the post counts of authors, appended to dst[:0].
func (r *postReader) postCounts(authors, dst []uint64) ([]uint64, error) {
	dst = dst[:0]
	if len(authors) == 0 {
		return dst, nil
	}
	bp := r.rows.Get().(*[]uint64)
	rows, err := r.users.MultiGet(authors, (*bp)[:0])
	if cap(rows) <= 1<<20 {
		*bp = rows
	}
	defer r.rows.Put(bp)
	if err != nil {
		return dst, fmt.Errorf("unread: post counts: %w", err)
	}
	n := len(rows) / len(authors)
	if n <= r.col || n*len(authors) != len(rows) {
		return dst, fmt.Errorf("unread: post counts: %d values for %d authors", len(rows), len(authors))
	}
	for i := range authors {
		dst = append(dst, rows[i*n+r.col])
	}
	return dst, nil
}

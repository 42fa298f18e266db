package unread

import (
	"github.com/tallydb/tally/timeline"
)

// FollowObserver is timeline's: unread's observer is told of every
// follow-graph change inside the batch that makes it.
type FollowObserver = timeline.FollowObserver

// FollowGraph is what the feed model needs from the follow graph: a
// *timeline.Timeline satisfies it (tests drive it with a stand-in as well).
type FollowGraph interface {
	// VisibleFollowees calls fn for each account user follows and sees
	// (timeline's mutes and hides take a pair out, as an unfollow does for
	// the observer), in id order, from a consistent view; fn returning
	// false stops. unread calls it inside db.View, so it must not wait
	// for a commit.
	VisibleFollowees(user uint64, fn func(followee uint64) bool) error
	// PostCounts returns the post counts of authors in dst[:0], read from
	// the store's counters (so db.View covers them). It is on the feed's
	// hot path: with a dst reused across calls it must not allocate (it
	// may use dst's whole capacity as scratch).
	PostCounts(authors, dst []uint64) ([]uint64, error)
	// AddNamedObserver registers o under name, before any write, and
	// records the name so that a graph opened later without it refuses
	// changes (timeline.ErrObserverMissing).
	AddNamedObserver(name string, o FollowObserver) error
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

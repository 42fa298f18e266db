package unread

import "github.com/tallydb/tally/store"

// FollowObserver is told of every follow-graph change inside the batch that
// makes it (see timeline.FollowObserver, whose method set it has).
type FollowObserver interface {
	// Followed: user now follows followee (a new edge, or a re-follow),
	// whose post count is posts as of this batch's commit.
	Followed(b *store.Batch, user, followee, posts uint64) error
	// Unfollowed: user no longer follows followee.
	Unfollowed(b *store.Batch, user, followee uint64) error
}

// FollowGraph is what the feed model needs from the follow graph: a
// *timeline.Timeline satisfies it. unread reads nothing else of timeline.
type FollowGraph interface {
	// Followees calls fn for each account user follows, in id order, from a
	// consistent view; fn returning false stops. unread calls it inside
	// db.View (so it must not itself wait for a commit).
	Followees(user uint64, fn func(followee uint64) bool) error
	// PostCounts returns the post counts of authors, appended to dst[:0].
	PostCounts(authors []uint64, dst []uint64) ([]uint64, error)
	// AddObserver registers o, before any write.
	AddObserver(o FollowObserver)
}

// UsersCounter is the counter of the follow graph that holds each user's
// post count ("posts") and follow counts (timeline.UsersCounter). New reads
// it once, the first time it sees a graph, to tell whether follows already
// exist (see "Users whose follows predate unread" in the package doc).
const UsersCounter = "users"

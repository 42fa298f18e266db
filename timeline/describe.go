package timeline

import (
	"encoding/binary"
	"fmt"
)

// DescribeJob says what a queued job of the timeline does, in the user's
// words (store.JobDescriber): "fan-out of post 2001 by user 21" (or its
// removal from homes once unpublished), "backfill of 21's posts into 1's
// home" after a follow (or their removal after an unfollow), "expiry of
// inactive inboxes", "shared fan-out of small posts (12 waiting)". It reads the post's author and the pair's current
// state; ok is false for a kind that is not the timeline's.
func (t *Timeline) DescribeJob(kind string, key []byte) (string, bool) {
	switch {
	case kind == jobFanout && len(key) == 9 && key[0] == 'p':
		post := binary.BigEndian.Uint64(key[1:])
		info, ok, err := t.Post(post)
		switch {
		case err != nil:
			return fmt.Sprintf("fan-out of post %d (%v)", post, err), true
		case !ok:
			return fmt.Sprintf("removal of unpublished post %d from homes", post), true
		}
		return fmt.Sprintf("fan-out of post %d by user %d", post, info.Author), true
	case kind == jobPair && len(key) == 17 && key[0] == 'f':
		user, followee := binary.BigEndian.Uint64(key[1:]), binary.BigEndian.Uint64(key[9:])
		following, err := t.IsFollowing(user, followee)
		switch {
		case err != nil:
			return fmt.Sprintf("home of user %d after a follow change of %d (%v)", user, followee, err), true
		case following:
			return fmt.Sprintf("backfill of user %d's posts into user %d's home (follow)", followee, user), true
		}
		return fmt.Sprintf("removal of user %d's posts from user %d's home (unfollow)", followee, user), true
	case kind == jobExpire:
		return "expiry of inactive inboxes", true
	case kind == jobShared:
		ps, err := t.sharedPosts()
		if err != nil {
			return fmt.Sprintf("shared fan-out of small posts (%v)", err), true
		}
		return fmt.Sprintf("shared fan-out of small posts (%d waiting)", len(ps)), true
	}
	return "", false
}

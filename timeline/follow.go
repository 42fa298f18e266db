package timeline

// Follow and unfollow: one command, any number of followees, all or
// nothing.
//
// A command is validated whole before anything is written, and the checks
// that depend on stored state are made under the locks that keep that
// state still until the command's one batch commits:
//
//  1. The arguments (ids, self-follows) are checked and the followees
//     sorted, each once: a followee named twice is one follow.
//  2. Under graphMu shared, the user's stripe of userMu (so no other
//     follow, unfollow or rebuild of the user interleaves) and the
//     followees' stripes of authorMu shared, in ascending stripe order
//     (so no publish changes a post count an observer is given), the
//     followee list is read and the followee limit checked against the
//     follows the command adds. A refused command has written nothing,
//     not even ordinals.
//  3. Only then are missing ordinals allocated (their own commit: an
//     ordinal without edges is invisible, and ensureOrds is idempotent),
//     and every edge, count, observer write, pending mark and pair job of
//     the command goes into one batch, committed while the locks are held.
//
// Issue 16 item 4 was the earlier shape: one Follow per followee, each
// with its own check and batch, so a command that crossed the limit on
// its second followee kept its first.

import (
	"fmt"
	"slices"
)

// followArgs validates the ids of a follow or unfollow command and returns
// its followees sorted, each once.
func followArgs(user uint64, followees []uint64) ([]uint64, error) {
	if err := CheckID("user", user); err != nil {
		return nil, err
	}
	for _, f := range followees {
		if err := (Edge{Follower: user, Followee: f}).Check(); err != nil {
			return nil, err
		}
	}
	fs := slices.Clone(followees)
	slices.Sort(fs)
	return slices.Compact(fs), nil
}

// Follow makes user follow followee. It reports whether anything changed:
// following an account already followed is a no-op that returns false.
// See FollowMany.
func (t *Timeline) Follow(user, followee uint64) (bool, error) {
	n, err := t.FollowMany(user, followee)
	return n > 0, err
}

// FollowMany makes user follow every account of followees, as one change:
// either every new follow is made, in one batch, or none is. It returns
// the number of new follows (accounts followed already, and repeats in
// followees, count nothing). The followees' recent posts, including ones
// from before the follow, show in user's home at once: until the backfill
// jobs have merged them into the inbox, reads pull them from the
// followees' outboxes.
//
// Errors, each refusing the whole command: ErrBadID, ErrSelfFollow (user
// among followees), ErrTooManyFollowees (the new follows would take user
// past MaxFollowees; the limit is checked under the user's lock, so
// concurrent follows never pass it), ErrFull.
func (t *Timeline) FollowMany(user uint64, followees ...uint64) (int, error) {
	fs, err := followArgs(user, followees)
	if err != nil || len(fs) == 0 {
		return 0, err
	}
	if err := t.live(); err != nil {
		return 0, err
	}
	if err := t.checkLocal("user", user); err != nil {
		return 0, err
	}
	t.graphMu.RLock()
	defer t.graphMu.RUnlock()
	added, followers, err := t.followLocked(user, fs)
	if err != nil {
		return 0, err
	}
	for i, a := range added {
		if err := t.maybePull(a, followers[i]); err != nil {
			return len(added), err
		}
	}
	return len(added), nil
}

// followLocked makes user follow the sorted, unique followees fs it does
// not follow yet, in one batch, and returns them with their follower
// counts after the commit. The caller holds graphMu shared.
func (t *Timeline) followLocked(user uint64, fs []uint64) (added, followers []uint64, err error) {
	unlock := t.lockUsers([]uint64{user})
	defer unlock()
	runlock := t.rlockAuthors(fs)
	defer runlock()
	var ub [numCols]uint64
	ur, err := t.row(user, ub[:0])
	if err != nil {
		return nil, nil, err
	}
	list, _, err := t.followeesOf(uint32(ur[colOrd]), nil, nil)
	if err != nil {
		return nil, nil, err
	}
	for _, f := range fs {
		if _, found := slices.BinarySearch(list, f); !found {
			added = append(added, f)
		}
	}
	if len(added) == 0 {
		return nil, nil, nil
	}
	if len(list)+len(added) > MaxFollowees {
		return nil, nil, fmt.Errorf("%w: user %d follows %d accounts; %d more would pass the limit of %d; nothing followed",
			ErrTooManyFollowees, user, len(list), len(added), MaxFollowees)
	}

	// Nothing refuses the command from here on.
	ids := append([]uint64{user}, added...)
	if err := t.ensureOrds(ids...); err != nil {
		return nil, nil, err
	}
	rows, err := t.users.MultiGet(ids, nil)
	if err != nil {
		return nil, nil, err
	}
	nc := t.users.NumColumns()
	ur = rows[:nc]
	uOrd := uint32(ur[colOrd])
	chunk := chunkOf(uOrd)
	live := ur[colRead] != 0
	b := t.db.NewBatch()
	defer b.Close()
	if err := t.fam.followees.Put(b, followeesKey(nil, uOrd), appendFollowees(nil, mergeIDs(list, added))); err != nil {
		return nil, nil, err
	}
	if err := b.Incr(UsersCounter, user, ColFollowees, int64(len(added))); err != nil {
		return nil, nil, err
	}
	observers := t.observersNow()
	resIdx := make([]int, len(added))
	var pend []uint64
	for i, f := range added {
		ar := rows[(i+1)*nc : (i+2)*nc]
		if err := t.fam.followers.Merge(b, followersKey(nil, uint32(ar[colOrd]), chunk), followersOperand([]uint32{uOrd}, nil, chunk)); err != nil {
			return nil, nil, err
		}
		resIdx[i] = b.Len()
		if err := b.Incr(UsersCounter, f, ColFollowers, 1); err != nil {
			return nil, nil, err
		}
		if t.IsVisible(user, f) { // a muted or hidden pair is no follow to observers (mute.go)
			for _, o := range observers {
				if err := o.Followed(b, user, f, ar[colPosts]); err != nil {
					return nil, nil, err
				}
			}
		}
		if live && !t.isPulled(f) {
			if err := t.fam.pending.Put(b, pendingKey(nil, uOrd, f), nil); err != nil {
				return nil, nil, err
			}
			if err := b.Enqueue(jobPair, pairKey(user, f), appendPayload(nil, opAdd, user, f), 1); err != nil {
				return nil, nil, err
			}
			pend = append(pend, f)
		}
		if err := t.sendFollower(b, f, user, true); err != nil {
			return nil, nil, err
		}
	}
	var newPend []uint64
	for _, f := range pend {
		if t.pendingAddNew(uOrd, f) { // before the commit: readers pull f from now on
			newPend = append(newPend, f)
		}
	}
	aOrds := make([]uint32, len(added))
	for i := range added {
		aOrds[i] = uint32(rows[(i+1)*nc+colOrd])
	}
	releaseFol := t.folCache.holdMany(aOrds)
	t.fcache.hold(uOrd)
	err = b.Commit()
	t.fcache.release(uOrd)
	releaseFol()
	// A duplicate (a re-apply of this entry) changed nothing in the store:
	// nor may it change the index (see InstallCopy).
	if err != nil || b.Duplicate() {
		for _, f := range newPend {
			t.pendingRemove(uOrd, f)
		}
		if err != nil {
			return nil, nil, err
		}
	}
	followers = make([]uint64, len(added))
	for i, ri := range resIdx {
		followers[i] = b.Result(ri)
	}
	return added, followers, nil
}

// mergeIDs returns the sorted union of two sorted, disjoint id lists.
func mergeIDs(a, b []uint64) []uint64 {
	out := make([]uint64, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		if a[i] < b[j] {
			out = append(out, a[i])
			i++
		} else {
			out = append(out, b[j])
			j++
		}
	}
	out = append(out, a[i:]...)
	return append(out, b[j:]...)
}

// Unfollow makes user stop following followee. It reports whether anything
// changed: unfollowing an account not followed is a no-op that returns
// false. See UnfollowMany.
func (t *Timeline) Unfollow(user, followee uint64) (bool, error) {
	n, err := t.UnfollowMany(user, followee)
	return n > 0, err
}

// UnfollowMany makes user stop following every account of followees, in
// one batch, and returns the number of follows removed (accounts not
// followed, and repeats, count nothing). The followees' posts leave user's
// home at once (reads filter them); cleanup jobs then remove them from the
// inbox. Errors, each refusing the whole command: ErrBadID, ErrSelfFollow.
func (t *Timeline) UnfollowMany(user uint64, followees ...uint64) (int, error) {
	fs, err := followArgs(user, followees)
	if err != nil || len(fs) == 0 {
		return 0, err
	}
	if err := t.live(); err != nil {
		return 0, err
	}
	if err := t.checkLocal("user", user); err != nil {
		return 0, err
	}
	t.graphMu.RLock()
	defer t.graphMu.RUnlock()
	unlock := t.lockUsers([]uint64{user})
	defer unlock()
	runlock := t.rlockAuthors(fs)
	defer runlock()
	var ub [numCols]uint64
	ur, err := t.row(user, ub[:0])
	if err != nil {
		return 0, err
	}
	uOrd := uint32(ur[colOrd])
	list, _, err := t.followeesOf(uOrd, nil, nil)
	if err != nil {
		return 0, err
	}
	var removed []uint64
	kept := list[:0:0]
	for _, f := range list {
		if _, found := slices.BinarySearch(fs, f); found {
			removed = append(removed, f)
		} else {
			kept = append(kept, f)
		}
	}
	if len(removed) == 0 {
		return 0, nil
	}
	rows, err := t.users.MultiGet(removed, nil)
	if err != nil {
		return 0, err
	}
	nc := t.users.NumColumns()
	b := t.db.NewBatch()
	defer b.Close()
	if len(kept) == 0 {
		err = t.fam.followees.Delete(b, followeesKey(nil, uOrd))
	} else {
		err = t.fam.followees.Put(b, followeesKey(nil, uOrd), appendFollowees(nil, kept))
	}
	if err != nil {
		return 0, err
	}
	if err := b.Incr(UsersCounter, user, ColFollowees, -int64(len(removed))); err != nil {
		return 0, err
	}
	chunk := chunkOf(uOrd)
	observers := t.observersNow()
	var hadPending []uint64
	for i, f := range removed {
		aOrd := uint32(rows[i*nc+colOrd])
		if err := t.fam.followers.Merge(b, followersKey(nil, aOrd, chunk), followersOperand(nil, []uint32{uOrd}, chunk)); err != nil {
			return 0, err
		}
		if err := b.Incr(UsersCounter, f, ColFollowers, -1); err != nil {
			return 0, err
		}
		if t.IsVisible(user, f) {
			for _, o := range observers {
				if err := o.Unfollowed(b, user, f); err != nil {
					return 0, err
				}
			}
		}
		if t.pendingHas(uOrd, f) {
			if err := t.fam.pending.Delete(b, pendingKey(nil, uOrd, f)); err != nil {
				return 0, err
			}
			hadPending = append(hadPending, f)
		}
		if ur[colRead] != 0 && !t.isPulled(f) {
			if err := b.Enqueue(jobPair, pairKey(user, f), appendPayload(nil, opRemove, user, f), 1); err != nil {
				return 0, err
			}
		}
		if err := t.sendFollower(b, f, user, false); err != nil {
			return 0, err
		}
	}
	aOrds := make([]uint32, len(removed))
	for i := range removed {
		aOrds[i] = uint32(rows[i*nc+colOrd])
	}
	releaseFol := t.folCache.holdMany(aOrds)
	t.fcache.hold(uOrd)
	err = b.Commit()
	t.fcache.release(uOrd)
	releaseFol()
	if err != nil {
		return 0, err
	}
	if !b.Duplicate() { // a re-apply changed nothing in the store (FollowMany)
		for _, f := range hadPending {
			t.pendingRemove(uOrd, f)
		}
	}
	return len(removed), nil
}

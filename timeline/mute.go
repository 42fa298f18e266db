package timeline

// Mute and hide per pair (issue 21).
//
// A mute (user → author) says "do not show me author's posts"; a hide
// (author → follower) says "do not show my posts to follower". Neither
// touches the follow graph: a muting user still follows the author and
// still counts in the author's followers. A followee is visible to a
// reader when neither a mute by the reader nor a hide by the followee
// stands; home pages read only visible followees (page filters the
// followee list it reads first, so the inbox entries and outbox pulls of
// an invisible followee are skipped alike).
//
// NB: inboxes stay visibility-agnostic. Fan-out (inline, shared, per-post
// jobs), backfill and rebuild deliver as if no mute or hide stood, and
// the one filter is on read. So a mute or hide takes effect at the next
// page, and an unmute or unhide shows the author's recent posts again at
// once, with nothing to backfill; the cost is inbox slots held by
// entries nobody reads (a page that runs below the inbox's floor pulls
// the rest from outboxes, as it does after any trim).
//
// Follow observers (unread's feed) see visible pairs only: setPairs
// reports a followed pair turning invisible as Unfollowed and turning
// visible as Followed, in its own batch (observeVisibilityLocked), and
// follows and unfollows of invisible pairs are not reported.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/tallydb/tally/store"
)

// ErrSelfMute is returned for a mute or hide of a user by themselves.
var ErrSelfMute = errors.New("timeline: a user cannot mute or hide themselves")

// muteKey is the key of a pair of tl_mute (owner user, muted author) or
// of tl_hide (owner author, hidden follower): prefix, owner u64, other
// u64, big-endian, so an owner's pairs iterate in id order.
func muteKey(dst []byte, pfx byte, owner, other uint64) []byte {
	dst = binary.BigEndian.AppendUint64(append(dst, pfx), owner)
	return binary.BigEndian.AppendUint64(dst, other)
}

// pairSets mirrors tl_mute and tl_hide in memory, for page reads.
type pairSets struct {
	// muted: user → authors the user mutes (tl_mute).
	muted map[uint64]map[uint64]struct{}
	// hidden: author → followers the author hides from (tl_hide).
	hidden map[uint64]map[uint64]struct{}
	// hiders: follower → authors hiding from them (tl_hide, inverted).
	hiders map[uint64]map[uint64]struct{}
}

func newPairSets() pairSets {
	return pairSets{muted: map[uint64]map[uint64]struct{}{}, hidden: map[uint64]map[uint64]struct{}{}, hiders: map[uint64]map[uint64]struct{}{}}
}

func addPair(m map[uint64]map[uint64]struct{}, a, b uint64) {
	if m[a] == nil {
		m[a] = map[uint64]struct{}{}
	}
	m[a][b] = struct{}{}
}

func delPair(m map[uint64]map[uint64]struct{}, a, b uint64) {
	delete(m[a], b)
	if len(m[a]) == 0 {
		delete(m, a)
	}
}

func hasPair(m map[uint64]map[uint64]struct{}, a, b uint64) bool {
	_, ok := m[a][b]
	return ok
}

// loadPairs reads tl_mute and tl_hide.
func (t *Timeline) loadPairs() (pairSets, error) {
	ps := newPairSets()
	if t.fam.mute == nil || t.fam.hide == nil {
		return ps, nil // a read-only store from before tl_mute: no pairs
	}
	err := t.scan(t.fam.mute, nil, func(k, _ []byte) bool {
		addPair(ps.muted, binary.BigEndian.Uint64(k[1:]), binary.BigEndian.Uint64(k[9:]))
		return true
	})
	if err != nil {
		return ps, err
	}
	err = t.scan(t.fam.hide, nil, func(k, _ []byte) bool {
		a, f := binary.BigEndian.Uint64(k[1:]), binary.BigEndian.Uint64(k[9:])
		addPair(ps.hidden, a, f)
		addPair(ps.hiders, f, a)
		return true
	})
	return ps, err
}

// pairArgs validates a mute or hide command and returns others sorted,
// each once.
func pairArgs(owner uint64, ownerWhat, otherWhat string, others []uint64) ([]uint64, error) {
	if err := CheckID(ownerWhat, owner); err != nil {
		return nil, err
	}
	for _, o := range others {
		if err := CheckID(otherWhat, o); err != nil {
			return nil, err
		}
		if o == owner {
			return nil, fmt.Errorf("%w: %s %d", ErrSelfMute, ownerWhat, owner)
		}
	}
	os := slices.Clone(others)
	slices.Sort(os)
	return slices.Compact(os), nil
}

// Mute makes user's home stop showing the posts of every account of
// authors, in one batch, and returns the number of mutes added (authors
// already muted, and repeats, count nothing). user keeps following them
// and keeps counting in their followers; an author need not be followed
// (the mute applies if user follows later). It takes effect at the next
// page. Errors, each refusing the whole command before anything is
// written: ErrBadID, ErrSelfMute.
func (t *Timeline) Mute(user uint64, authors ...uint64) (int, error) {
	return t.setLocalPairs(true, true, user, authors)
}

// Unmute undoes Mute for every account of authors and returns the number
// of mutes removed. Their recent posts show again at the next page, as
// after a follow. Errors as Mute's.
func (t *Timeline) Unmute(user uint64, authors ...uint64) (int, error) {
	return t.setLocalPairs(true, false, user, authors)
}

// Hide stops author's posts from showing in the homes of every account of
// followers, in one batch, and returns the number of hides added. The
// follow graph is unchanged. Errors as Mute's.
func (t *Timeline) Hide(author uint64, followers ...uint64) (int, error) {
	return t.setLocalPairs(false, true, author, followers)
}

// Unhide undoes Hide for every account of followers and returns the
// number of hides removed. Errors as Mute's.
func (t *Timeline) Unhide(author uint64, followers ...uint64) (int, error) {
	return t.setLocalPairs(false, false, author, followers)
}

// setLocalPairs is setPairs for a command of a local owner (the muting
// user, the hiding author): a hide from a follower on another shard is
// also sent there (TL.XHIDE), where that follower's pages read it.
func (t *Timeline) setLocalPairs(mute, add bool, owner uint64, others []uint64) (int, error) {
	if err := t.checkLocal("user", owner); err != nil {
		return 0, err
	}
	return t.setPairs(mute, add, owner, others, !mute)
}

// setPairs writes the pairs; with send, a hide's change for a follower on
// another shard is sent there in the same batch.
func (t *Timeline) setPairs(mute, add bool, owner uint64, others []uint64, send bool) (int, error) {
	ownerWhat, otherWhat, f, pfx := "user", "author", t.fam.mute, byte(pfxMute)
	if !mute {
		ownerWhat, otherWhat, f, pfx = "author", "follower", t.fam.hide, pfxHide
	}
	os, err := pairArgs(owner, ownerWhat, otherWhat, others)
	if err != nil || len(os) == 0 {
		return 0, err
	}
	if err := t.live(); err != nil {
		return 0, err
	}
	if f == nil {
		return 0, fmt.Errorf("%w: a store from before tl_mute", store.ErrReadOnly)
	}
	// The pairs' followers and authors are locked as a follow locks them
	// (users, then authors, then pairs), so no follow or unfollow of a
	// pair interleaves with its visibility change and the observers see
	// each change once.
	followers, authors := []uint64{owner}, os
	if !mute {
		followers, authors = os, []uint64{owner}
	}
	t.graphMu.RLock()
	defer t.graphMu.RUnlock()
	unlock := t.lockUsers(followers)
	defer unlock()
	runlock := t.rlockAuthors(authors)
	defer runlock()
	t.pairs.Lock()
	defer t.pairs.Unlock()
	m := t.pairs.s.muted
	if !mute {
		m = t.pairs.s.hidden
	}
	var changed []uint64
	for _, o := range os {
		if hasPair(m, owner, o) != add {
			changed = append(changed, o)
		}
	}
	if len(changed) == 0 {
		return 0, nil
	}
	b := t.db.NewBatch()
	defer b.Close()
	var key []byte
	for _, o := range changed {
		key = muteKey(key[:0], pfx, owner, o)
		if add {
			err = f.Put(b, key, nil)
		} else {
			err = f.Delete(b, key)
		}
		if err != nil {
			return 0, err
		}
		u, a := owner, o
		if !mute {
			u, a = o, owner
		}
		if err := t.observeVisibilityLocked(b, u, a, mute, add); err != nil {
			return 0, err
		}
		if send {
			if err := t.sendHide(b, owner, o, add); err != nil {
				return 0, err
			}
		}
	}
	if err := b.Commit(); err != nil {
		return 0, err
	}
	if b.Duplicate() {
		// A re-apply of a replicated entry: the store holds these pairs
		// as the entry left them, and this commit changed nothing; nor
		// may the in-memory pairs (TestReappliedMuteKeepsPairs).
		return len(changed), nil
	}
	for _, o := range changed {
		switch {
		case mute && add:
			addPair(t.pairs.s.muted, owner, o)
		case mute:
			delPair(t.pairs.s.muted, owner, o)
		case add:
			addPair(t.pairs.s.hidden, owner, o)
			addPair(t.pairs.s.hiders, o, owner)
		default:
			delPair(t.pairs.s.hidden, owner, o)
			delPair(t.pairs.s.hiders, o, owner)
		}
	}
	return len(changed), nil
}

// observeVisibilityLocked tells the follow observers, in b, of a change
// of the pair (u, a) that setPairs is about to make (a mute if mute, else
// a hide; added if add): if u follows a and the pair's visibility flips,
// it is an unfollow (now invisible) or a follow (visible again, with a's
// post count now) for them, so unread's feed counts only visible pairs.
// t.pairs is held, and so are u's user stripe and a's author stripe.
func (t *Timeline) observeVisibilityLocked(b *store.Batch, u, a uint64, mute, add bool) error {
	otherStands := hasPair(t.pairs.s.hidden, a, u) // the hide, for a mute
	if !mute {
		otherStands = hasPair(t.pairs.s.muted, u, a)
	}
	if otherStands {
		return nil // invisible before and after
	}
	var buf [numCols]uint64
	ur, err := t.row(u, buf[:0])
	if err != nil {
		return err
	}
	if ur[colOrd] == 0 {
		return nil
	}
	list, _, err := t.followeesOf(uint32(ur[colOrd]), nil, nil)
	if err != nil {
		return err
	}
	if _, follows := slices.BinarySearch(list, a); !follows {
		return nil
	}
	for _, o := range t.observersNow() {
		if add {
			err = o.Unfollowed(b, u, a)
		} else {
			var ab [numCols]uint64
			ar, rerr := t.row(a, ab[:0])
			if rerr != nil {
				return rerr
			}
			err = o.Followed(b, u, a, ar[colPosts])
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// IsVisible reports whether author's posts may show in user's home as far
// as mutes and hides go: neither user mutes author nor author hides from
// user. It says nothing of the follow.
func (t *Timeline) IsVisible(user, author uint64) bool {
	t.pairs.RLock()
	defer t.pairs.RUnlock()
	return !hasPair(t.pairs.s.muted, user, author) && !hasPair(t.pairs.s.hidden, author, user)
}

// invisibleTo appends to dst (reused) the accounts whose posts user does
// not see, sorted: those user mutes and those hiding from user. A page
// takes this snapshot once, under one read lock, and filters its
// followees and its reposts' originals by it (most readers have none).
func (t *Timeline) invisibleTo(user uint64, dst []uint64) []uint64 {
	dst = dst[:0]
	t.pairs.RLock()
	for a := range t.pairs.s.muted[user] {
		dst = append(dst, a)
	}
	for a := range t.pairs.s.hiders[user] {
		dst = append(dst, a)
	}
	t.pairs.RUnlock()
	if len(dst) > 1 {
		slices.Sort(dst)
		dst = slices.Compact(dst)
	}
	return dst
}

// withoutIDs removes from sorted (reused) the ids of drop (sorted).
func withoutIDs(sorted, drop []uint64) []uint64 {
	if len(drop) == 0 {
		return sorted
	}
	out := sorted[:0]
	for _, id := range sorted {
		if !contains(drop, id) {
			out = append(out, id)
		}
	}
	return out
}

// MutedPage returns a page of the accounts user mutes, in id order,
// starting after cursor ("" for the first page). Errors: ErrBadID,
// ErrBadCursor, ErrBadLimit.
func (t *Timeline) MutedPage(user uint64, cursor string, limit int) (IDPage, error) {
	return t.pairPage(t.fam.mute, pfxMute, cursorMuted, "user", user, cursor, limit)
}

// HiddenPage returns a page of the accounts author hides from, in id
// order, starting after cursor ("" for the first page). Errors as
// MutedPage's.
func (t *Timeline) HiddenPage(author uint64, cursor string, limit int) (IDPage, error) {
	return t.pairPage(t.fam.hide, pfxHide, cursorHidden, "author", author, cursor, limit)
}

func (t *Timeline) pairPage(f *store.Family, pfx, kind byte, what string, owner uint64, cursor string, limit int) (IDPage, error) {
	limit, after, started, err := pageStart(what, owner, kind, cursor, limit)
	if err != nil {
		return IDPage{}, err
	}
	if err := t.live(); err != nil {
		return IDPage{}, err
	}
	if f == nil {
		return IDPage{NoMore: true}, nil // a read-only store from before tl_mute
	}
	o := &store.IterOptions{Prefix: binary.BigEndian.AppendUint64([]byte{pfx}, owner)}
	if started {
		if after == MaxID {
			return IDPage{NoMore: true}, nil
		}
		o.Lower = muteKey(nil, pfx, owner, after+1)
	}
	it, err := f.NewIter(o)
	if err != nil {
		return IDPage{}, err
	}
	var p IDPage
	more := false
	for it.Next() {
		if len(p.IDs) == limit {
			more = true
			break
		}
		p.IDs = append(p.IDs, binary.BigEndian.Uint64(it.Key()[9:]))
	}
	if err := closeIter(it); err != nil {
		return IDPage{}, err
	}
	if more {
		p.Cursor = encodeCursor(kind, owner, p.IDs[len(p.IDs)-1])
	} else {
		p.NoMore = true
	}
	return p, nil
}

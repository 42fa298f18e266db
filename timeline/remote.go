package timeline

// Timelines across shards (issue 23): follower-side copies.
//
// In a sharded cluster a user's whole timeline data (followee list,
// inbox, outbox, follower set, mutes, unread) lives on the shard owning
// the user's slot. A shard T keeps, for every author a of another shard
// with at least one follower on T, a copy of what T's readers need: a's
// follower set on T (who on T follows a, as the ordinary tl_followers
// bitmap), a's outbox (tl_outbox and tl_posts entries with their types
// and references, tl_removed marks) and a's post count (the "posts"
// column, kept equal to a's real count). So a post of a is one small
// message to each shard with followers of a, and T fans it out with its
// ordinary machinery (inline, shared or per-post fan-out to its push set,
// pulled authors, mutes and hides); backfill, rebuild on return, home
// pages and feed unread stay reads of T's own store. Issue 23 asked for
// "one delivery job per target shard; the target intersects the chunk
// with its active users": this is that, with the chunk (a's followers on
// T) held on T instead of sent with every post.
//
// a's own shard A keeps a's full follower set (counts, FollowersPage,
// remote followers get ordinals on A but never join A's push set, so A's
// fan-outs skip them) and, in tl_xshard, the number of a's followers on
// each other shard: the shards a's posts go to.
//
// Messages (commands of the table, run on the target shard through the
// normal replicated command path; every argument decimal):
//
//	TL.XFOLLOWER author follower shard 1|0      to a's shard: follower (on shard) now follows a (1) or no longer (0)
//	TL.XBACKFILL author posts [post type ref refauthor]...
//	                                            to a follower's shard when it gains a's first follower: a's newest
//	                                            InboxCap+1 outbox entries, newest first, and a's post count
//	TL.XPUBLISH author type ref refauthor post [post ...]
//	                                            to every shard with followers of a: a published the posts
//	TL.XUNPUBLISH author post [post ...]        to every shard with followers of a: a unpublished the posts
//	TL.XHIDE author follower 1|0                to follower's shard: a hides (1) or unhides (0) from follower
//	TL.XSUBSCRIBE author post shard             to a's shard: shard holds reposts of a's post (see below)
//	TL.XGONE author post                        to such a shard: a's post is not published (any more)
//
// type is an EntryType's number (0 post, 1 repost, 2 comment, 3 reply).
// A message is sent with Remote.Send in the batch of the write that
// causes it, so the message and its cause commit together (see Remote).
// Every handler decides what it changes only from its arguments and the
// shard's state (never from the slot map; only the shard a reply goes to
// is the map's, as for client commands), so every replica of the target
// applies it alike, and under the streams' exactly-once, in-order delivery per
// (source, target) pair:
//
//   - the stream from T to A carries T's follows and unfollows of a in
//     the order T committed them, so A's set and counts follow T's edges;
//   - the stream from A to T carries XBACKFILL (when T becomes
//     interested, on A's order), then a's publishes and unpublishes: a
//     post is in the backfill or in a later message, never both, never
//     neither. A backfill replaces T's copy whole (a copy left behind when
//     T lost its last follower of a is stale: A sent nothing meanwhile).

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/tallydb/tally/store"
)

// Remote is how the timeline reaches users on other shards (nil: one
// shard). Its answers must be the same on every replica of a shard for
// the users it holds (the slot map's assignment of populated slots does
// not change under the shard's replicas' feet).
//
// Send differs from the interface first sketched for issue 23
// (Send(shard, argv)): it takes the batch of the write that causes the
// message. A replicated entry's commits are numbered and a re-applied
// entry skips those already in the store (store apply.go), deciding from
// the state before the entry; a message queued in a commit of its own,
// after the effect's, would be lost when a crash fell between the two
// (the re-apply finds the effect done and sends nothing). In one batch,
// the message and its cause commit together or not at all.
type Remote interface {
	// Local reports whether user's data lives on this shard.
	Local(user uint64) bool
	// ShardOf returns the shard holding user's data.
	ShardOf(user uint64) uint32
	// Send queues argv (a command, run on shard through the normal
	// command path) for shard in b, durably with b's commit. It is only
	// ever called from a replicated write, never from background jobs or
	// reads; an error aborts the write (nothing is committed).
	Send(b *store.Batch, shard uint32, argv [][]byte) error
}

// Commands of the cross-shard messages (internal: sent by shards to each
// other, never by clients; see the file comment for their arguments).
const (
	CmdXFollower  = "TL.XFOLLOWER"
	CmdXBackfill  = "TL.XBACKFILL"
	CmdXPublish   = "TL.XPUBLISH"
	CmdXUnpublish = "TL.XUNPUBLISH"
	CmdXHide      = "TL.XHIDE"
	CmdXSubscribe = "TL.XSUBSCRIBE"
	CmdXGone      = "TL.XGONE"
)

var (
	// ErrNotLocal is returned for a write about a user whose data lives
	// on another shard (Remote.Local is false).
	ErrNotLocal = errors.New("timeline: user lives on another shard")
	// ErrBadMessage is returned for a cross-shard message whose
	// arguments are not acceptable (an entry's type or reference, the
	// order of a backfill's entries, a shard of 0).
	ErrBadMessage = errors.New("timeline: bad cross-shard message")
	// ErrSharded is returned for operations a sharded timeline does not
	// support (LoadFollows).
	ErrSharded = errors.New("timeline: not supported on a sharded timeline")
	// ErrUnsharded is returned for a cross-shard message on a timeline
	// without Options.Remote (one shard has no other to hear from).
	ErrUnsharded = errors.New("timeline: cross-shard message on an unsharded timeline")
)

// sharded refuses a cross-shard message on a timeline of one shard.
func (t *Timeline) sharded() error {
	if t.remote == nil {
		return ErrUnsharded
	}
	return nil
}

// checkLocal refuses a write about id when id lives on another shard.
func (t *Timeline) checkLocal(what string, id uint64) error {
	if t.remote == nil || t.remote.Local(id) {
		return nil
	}
	return fmt.Errorf("%w: %s %d is on shard %d", ErrNotLocal, what, id, t.remote.ShardOf(id))
}

// Kinds of tl_xshard keys: pfxXShard | kind | id u64 | shard u32.
const (
	xsFollowers = 'f' // author | shard -> count of author's followers on shard
	xsReposts   = 's' // post | shard -> author of post: shard holds reposts of it
)

func xshardKey(dst []byte, kind byte, id uint64, shard uint32) []byte {
	dst = binary.BigEndian.AppendUint64(append(dst, pfxXShard, kind), id)
	return binary.BigEndian.AppendUint32(dst, shard)
}

func xfolKey(dst []byte, author uint64, shard uint32) []byte {
	return xshardKey(dst, xsFollowers, author, shard)
}

func xsubKey(dst []byte, post uint64, shard uint32) []byte {
	return xshardKey(dst, xsReposts, post, shard)
}

func argvOf(cmd string, nums ...uint64) [][]byte {
	argv := make([][]byte, 0, 1+len(nums))
	argv = append(argv, []byte(cmd))
	for _, n := range nums {
		argv = append(argv, strconv.AppendUint(nil, n, 10))
	}
	return argv
}

func flag(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// sendFollower sends, in b, a follow (add) or unfollow of author by the
// local user follower to author's shard, if it is another.
func (t *Timeline) sendFollower(b *store.Batch, author, follower uint64, add bool) error {
	if t.remote == nil || t.remote.Local(author) {
		return nil
	}
	return t.remote.Send(b, t.remote.ShardOf(author),
		argvOf(CmdXFollower, author, follower, uint64(t.remote.ShardOf(follower)), flag(add)))
}

// sendHide sends, in b, a hide (add) or unhide of author from follower to
// follower's shard, if it is another.
func (t *Timeline) sendHide(b *store.Batch, author, follower uint64, add bool) error {
	if t.remote == nil || t.remote.Local(follower) {
		return nil
	}
	return t.remote.Send(b, t.remote.ShardOf(follower), argvOf(CmdXHide, author, follower, flag(add)))
}

// sendPublish sends, in b, the publish of author's posts to every shard
// with followers of author.
func (t *Timeline) sendPublish(b *store.Batch, author uint64, meta entryMeta, posts []uint64) error {
	if t.remote == nil {
		return nil
	}
	shards, err := t.interestedShards(author)
	if err != nil || len(shards) == 0 {
		return err
	}
	argv := argvOf(CmdXPublish, append([]uint64{author, uint64(meta.kind), meta.ref, meta.refAuthor}, posts...)...)
	for _, s := range shards {
		if err := t.remote.Send(b, s, argv); err != nil {
			return err
		}
	}
	return nil
}

// sendUnpublish sends, in b, the removal of author's posts to every shard
// with followers of author.
func (t *Timeline) sendUnpublish(b *store.Batch, author uint64, posts []uint64) error {
	if t.remote == nil {
		return nil
	}
	shards, err := t.interestedShards(author)
	if err != nil || len(shards) == 0 {
		return err
	}
	argv := argvOf(CmdXUnpublish, append([]uint64{author}, posts...)...)
	for _, s := range shards {
		if err := t.remote.Send(b, s, argv); err != nil {
			return err
		}
	}
	return nil
}

// interestedShards returns the shards with followers of author, from
// tl_xshard (on author's own shard), ascending.
func (t *Timeline) interestedShards(author uint64) ([]uint32, error) {
	var out []uint32
	err := t.scan(t.fam.xshard, xfolKey(nil, author, 0)[:10], func(k, _ []byte) bool {
		out = append(out, binary.BigEndian.Uint32(k[10:14]))
		return true
	})
	return out, err
}

// RemoteFollowers returns, for a local author, how many of their followers
// live on each other shard (the shards their posts are sent to).
func (t *Timeline) RemoteFollowers(author uint64) (map[uint32]uint64, error) {
	if err := CheckID("author", author); err != nil {
		return nil, err
	}
	out := map[uint32]uint64{}
	err := t.scan(t.fam.xshard, xfolKey(nil, author, 0)[:10], func(k, v []byte) bool {
		out[binary.BigEndian.Uint32(k[10:14])] = binary.BigEndian.Uint64(v)
		return true
	})
	return out, err
}

// RemoteFollower applies TL.XFOLLOWER on author's shard: follower, whose
// data lives on shard, now follows author (add) or no longer does. It
// changes author's full follower set and count and the count of author's
// followers on shard; when shard gains its first follower of author, it
// sends shard a TL.XBACKFILL with author's newest InboxCap+1 posts and
// post count, in the same batch. It reports true: the message is applied
// as a change without looking the edge up (see the comment inside), so it
// must come from the cross-shard stream, which sends each change of an
// edge once. The follower's own data (followee list, unread) is on their
// shard and is not touched.
func (t *Timeline) RemoteFollower(author, follower uint64, shard uint32, add bool) (bool, error) {
	if err := (Edge{Follower: follower, Followee: author}).Check(); err != nil {
		return false, err
	}
	if shard == 0 {
		return false, fmt.Errorf("%w: shard 0", ErrBadMessage)
	}
	if err := t.live(); err != nil {
		return false, err
	}
	if err := t.sharded(); err != nil {
		return false, err
	}
	t.graphMu.RLock()
	defer t.graphMu.RUnlock()
	am := &t.authorMu[stripe(author)]
	am.Lock()
	defer am.Unlock()
	if err := t.ensureOrds(author, follower); err != nil {
		return false, err
	}
	rows, err := t.users.MultiGet([]uint64{author, follower}, nil)
	if err != nil {
		return false, err
	}
	nc := t.users.NumColumns()
	aOrd, uOrd := uint32(rows[colOrd]), uint32(rows[nc+colOrd])
	chunk := chunkOf(uOrd)
	// The edge is not looked up in the set: the message says it changed.
	// follower's shard sends XFOLLOWER only when its own followee list
	// (the edge's authority) gained or lost author, and the stream
	// delivers each message once and in order (package xshard), so the
	// set and the count change together. Reading the chunk here cost a
	// merge of every operand the chunk had gathered since the last flush
	// (one per follow of author), which made a big author's follows
	// quadratic: 1,000 follows took 4-18 s once the author had a few
	// thousand followers (bench/RESULTS.md, issue 23's 10^7-follower
	// post). Check still holds count = set size.
	var cnt uint64
	xk := xfolKey(nil, author, shard)
	if v, ok, err := t.fam.xshard.Get(xk, nil); err != nil {
		return false, err
	} else if ok {
		cnt = binary.BigEndian.Uint64(v)
	}
	b := t.db.NewBatch()
	defer b.Close()
	var op []byte
	delta := int64(1)
	if add {
		op = followersOperand([]uint32{uOrd}, nil, chunk)
		cnt++
	} else {
		op = followersOperand(nil, []uint32{uOrd}, chunk)
		delta = -1
		if cnt > 0 {
			cnt--
		}
	}
	if err := t.fam.followers.Merge(b, followersKey(nil, aOrd, chunk), op); err != nil {
		return false, err
	}
	ri := b.Len()
	if err := b.Incr(UsersCounter, author, ColFollowers, delta); err != nil {
		return false, err
	}
	if cnt == 0 {
		err = t.fam.xshard.Delete(b, xk)
	} else {
		err = t.fam.xshard.Put(b, xk, binary.BigEndian.AppendUint64(nil, cnt))
	}
	if err != nil {
		return false, err
	}
	if add && cnt == 1 {
		argv := argvOf(CmdXBackfill, author, rows[colPosts])
		n := t.Config().InboxCap + 1
		var reposts []store.TopEntry
		if err := t.postEntries(author, func(e store.TopEntry) bool {
			for _, x := range [4]uint64{e.Key, uint64(e.Kind), e.Ref, e.RefValue} {
				argv = append(argv, strconv.AppendUint(nil, x, 10))
			}
			if EntryType(e.Kind) == TypeRepost {
				reposts = append(reposts, e)
			}
			n--
			return n > 0
		}); err != nil {
			return false, err
		}
		for _, e := range reposts {
			if err := t.subscribe(b, e.RefValue, e.Ref, shard); err != nil {
				return false, err
			}
		}
		if err := t.remote.Send(b, shard, argv); err != nil {
			return false, err
		}
	}
	t.folCache.hold(aOrd)
	err = b.Commit()
	t.folCache.release(aOrd)
	if err != nil {
		return false, err
	}
	if add {
		if err := t.maybePull(author, b.Result(ri)); err != nil {
			return true, err
		}
	}
	return true, nil
}

// checkCopyEntry validates one entry of a copy message of author's posts.
func checkCopyEntry(author uint64, e Entry) error {
	if err := CheckID("post", e.Post); err != nil {
		return err
	}
	if e.Author != author {
		return fmt.Errorf("%w: post %d is by %d, not %d", ErrBadMessage, e.Post, e.Author, author)
	}
	return checkCopyMeta(e.Type, e.Ref, e.RefAuthor, e.Post)
}

// checkCopyMeta validates the type and reference of a copied post.
func checkCopyMeta(typ EntryType, ref, refAuthor, post uint64) error {
	if typ >= numTypes {
		return fmt.Errorf("%w: entry type %d", ErrBadMessage, typ)
	}
	if typ == TypePost {
		if ref != 0 || refAuthor != 0 {
			return fmt.Errorf("%w: a post carries no reference", ErrBadMessage)
		}
		return nil
	}
	if err := CheckID("referenced post", ref); err != nil {
		return err
	}
	if err := CheckID("referenced author", refAuthor); err != nil {
		return err
	}
	if typ == TypeRepost && post != 0 && post <= ref {
		return fmt.Errorf("%w: repost %d is not above its original %d", ErrBadMessage, post, ref)
	}
	return nil
}

// CheckBackfill validates a TL.XBACKFILL's arguments: author and every
// entry's ids, types and references, entries newest first, each post
// once, at most MaxInboxCap+1 of them, and a post count of at least their
// number.
func CheckBackfill(author, posts uint64, entries []Entry) error {
	if err := CheckID("author", author); err != nil {
		return err
	}
	if len(entries) > MaxInboxCap+1 {
		return fmt.Errorf("%w: %d entries (at most %d)", ErrBadMessage, len(entries), MaxInboxCap+1)
	}
	if posts < uint64(len(entries)) {
		return fmt.Errorf("%w: post count %d below the %d entries", ErrBadMessage, posts, len(entries))
	}
	for i, e := range entries {
		if err := checkCopyEntry(author, e); err != nil {
			return err
		}
		if i > 0 && e.Post >= entries[i-1].Post {
			return fmt.Errorf("%w: entries not newest first (%d after %d)", ErrBadMessage, e.Post, entries[i-1].Post)
		}
	}
	return nil
}

// CheckCopyPublish validates a TL.XPUBLISH's arguments.
func CheckCopyPublish(author uint64, typ EntryType, ref, refAuthor uint64, posts []uint64) error {
	if err := checkPostArgs(author, posts); err != nil {
		return err
	}
	if len(posts) == 0 {
		return fmt.Errorf("%w: no post", ErrBadMessage)
	}
	for _, p := range posts {
		if err := checkCopyMeta(typ, ref, refAuthor, p); err != nil {
			return err
		}
	}
	return nil
}

// InstallCopy applies TL.XBACKFILL on a shard that has just gained a
// follower of author, a user of another shard: it replaces this shard's
// copy of author's outbox by entries (author's newest posts, newest
// first) and sets author's post count here to posts (author's real
// count), in one batch. Posts of the old copy that entries lack leave it
// as unpublished posts do (readers drop them at once). Every local
// follower of author whose inbox is live gets the follow's backfill (a
// pending mark, so reads pull author until the backfill job has merged
// the copy into the inbox), and the follow observers are told of each
// visible local follower anew with the installed count (unread's feed
// counts author's posts from the install on: the copy is when this
// shard's view of author begins).
//
// It runs under the graph lock's write side (no publish, follow,
// activation or job commit interleaves): a backfill happens once per
// shard and author each time the shard gains its first follower of the
// author.
func (t *Timeline) InstallCopy(author, posts uint64, entries []Entry) error {
	if err := CheckBackfill(author, posts, entries); err != nil {
		return err
	}
	if err := t.live(); err != nil {
		return err
	}
	if err := t.sharded(); err != nil {
		return err
	}
	t.graphMu.Lock()
	defer t.graphMu.Unlock()
	if err := t.ensureOrds(author); err != nil {
		return err
	}
	old := map[uint64]store.TopEntry{}
	if err := t.postEntries(author, func(e store.TopEntry) bool {
		old[e.Key] = e
		return true
	}); err != nil {
		return err
	}
	var buf [numCols]uint64
	ar, err := t.row(author, buf[:0])
	if err != nil {
		return err
	}
	aOrd := uint32(ar[colOrd])
	pulled := t.isPulled(author)
	fanout := ar[colFollowers] > 0 && !pulled
	b := t.db.NewBatch()
	defer b.Close()
	var av [8]byte
	binary.BigEndian.PutUint64(av[:], author)

	// The new entries: the copy's outbox, post records and reposts.
	keep := make(map[uint64]bool, len(entries))
	var added []Entry
	var again []uint64
	for _, e := range entries {
		keep[e.Post] = true
		if _, ok := old[e.Post]; ok {
			continue
		}
		owner, _, err := t.owner(e.Post)
		if err != nil {
			return err
		}
		if owner != 0 && owner != author {
			continue // an id collision across shards (see the file comment)
		}
		if owner == author {
			again = append(again, e.Post)
			if err := t.fam.removed.Delete(b, removedKey(nil, e.Post)); err != nil {
				return err
			}
		}
		m := entryMeta{kind: e.Type, ref: e.Ref, refAuthor: e.RefAuthor}
		if err := t.fam.outbox.Put(b, outboxKey(nil, author, e.Post), appendEntryMeta(nil, m)); err != nil {
			return err
		}
		if m.kind == TypeRepost {
			if err := t.fam.reposts.Put(b, repostKey(nil, m.ref, e.Post), av[:]); err != nil {
				return err
			}
		}
		// Delivered by the followers' backfills below, not by a fan-out.
		if err := t.fam.posts.Put(b, postKey(nil, e.Post), appendPost(nil, postRecord{author: author, fanned: true})); err != nil {
			return err
		}
		added = append(added, e)
	}
	// The old copy's posts the new one lacks: unpublished while this
	// shard followed nobody of author's (or older than the window).
	// In post order, so every replica writes the same batch (and queues
	// the removal jobs in the same order).
	var dropped []uint64
	for p := range old {
		if !keep[p] {
			dropped = append(dropped, p)
		}
	}
	slices.Sort(dropped)
	droppedReposts := map[uint64]uint64{}
	for _, p := range dropped {
		e := old[p]
		if EntryType(e.Kind) == TypeRepost {
			droppedReposts[p] = e.Ref
			if err := t.fam.reposts.Delete(b, repostKey(nil, e.Ref, p)); err != nil {
				return err
			}
		}
		if err := t.fam.outbox.Delete(b, outboxKey(nil, author, p)); err != nil {
			return err
		}
		if err := t.fam.posts.Delete(b, postKey(nil, p)); err != nil {
			return err
		}
		if err := t.fam.removed.Put(b, removedKey(nil, p), av[:]); err != nil {
			return err
		}
		if err := t.fam.fanq.Delete(b, fanqKey(nil, p)); err != nil {
			return err
		}
		if fanout {
			if err := b.Enqueue(jobFanout, fanoutKey(p), appendPayload(nil, opRemove, author, p), 0); err != nil {
				return err
			}
		}
	}
	// NB: set even when unchanged, so the batch is never empty: an empty
	// batch commits nothing and takes no apply number, and a re-applied
	// install that finds its copy in place (a crash kept its commit, not
	// the entry's later ones) would shift the next message's commit onto
	// a surviving mark (store/apply.go rule 2;
	// TestReappliedInstallThenFollower).
	if err := b.SetColumn(UsersCounter, author, ColPosts, posts); err != nil {
		return err
	}

	// The local followers: a backfill for each live inbox, and the
	// observers told of the follow anew.
	var fords []uint32
	if aOrd != 0 {
		if err := t.followerChunks(aOrd, 0, func(bm *roaring.Bitmap) (bool, error) {
			it := bm.Iterator()
			for it.HasNext() {
				if o := it.Next(); o&0xffff != 0 {
					fords = append(fords, o)
				}
			}
			return true, nil
		}); err != nil {
			return err
		}
	}
	fids := make([]uint64, 0, len(fords))
	for _, o := range fords {
		id, ok, err := t.idOf(o, nil)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: follower ordinal %d of %d has no user", store.ErrCorrupt, o, author)
		}
		fids = append(fids, id)
	}
	var frows []uint64
	if len(fids) > 0 {
		if frows, err = t.users.MultiGet(fids, nil); err != nil {
			return err
		}
	}
	nc := t.users.NumColumns()
	observers := t.observersNow()
	var pend []uint32
	for i, u := range fids {
		ur := frows[i*nc : (i+1)*nc]
		if ur[colRead] != 0 && !pulled {
			if err := t.fam.pending.Put(b, pendingKey(nil, fords[i], author), nil); err != nil {
				return err
			}
			if err := b.Enqueue(jobPair, pairKey(u, author), appendPayload(nil, opAdd, u, author), 1); err != nil {
				return err
			}
			pend = append(pend, fords[i])
		}
		if t.IsVisible(u, author) {
			for _, o := range observers {
				if err := o.Followed(b, u, author, posts); err != nil {
					return err
				}
			}
		}
	}
	var newPend []uint32
	for _, o := range pend {
		if t.pendingAddNew(o, author) { // before the commit: readers pull author from now on
			newPend = append(newPend, o)
		}
	}
	t.removed.Lock()
	for _, p := range dropped {
		t.removed.bm.Add(p)
	}
	t.removed.Unlock()
	// NB: a duplicate is a re-apply of this entry (a restarted replica
	// re-applies the one at its store's AppliedIndex) and changed nothing
	// in the store, so the mirrors must not change either. Unlike a
	// follow's, an install's decisions do not see that it was applied: it
	// gives every live follower a pending mark again, and the backfill
	// jobs may have dropped the stored ones since
	// (TestReappliedInstallKeepsPendingMarks).
	if err := b.Commit(); err != nil || b.Duplicate() {
		t.removed.Lock()
		for _, p := range dropped {
			t.removed.bm.Remove(p)
		}
		t.removed.Unlock()
		for _, o := range newPend {
			t.pendingRemove(o, author)
		}
		return err
	}
	t.removed.Lock()
	for _, p := range again {
		t.removed.bm.Remove(p)
	}
	t.removed.Unlock()
	t.reposts.Lock()
	for p, o := range droppedReposts {
		t.reposts.remove(o, p)
	}
	for _, e := range added {
		if e.Type == TypeRepost {
			t.reposts.add(e.Ref, repostRef{id: e.Post, by: author})
		}
	}
	t.reposts.Unlock()
	for _, e := range added {
		if s := stripe(e.Post); e.Post > t.postHigh[s] {
			t.postHigh[s] = e.Post
		}
	}
	return nil
}

// PublishCopy applies TL.XPUBLISH on a shard with followers of author, a
// user of another shard: the posts (of type typ, referencing ref by
// refAuthor, as published on author's shard) join this shard's copy of
// author's outbox and count, and are fanned out to the local followers
// exactly as a local author's. A post of the copy already is a duplicate,
// as is an id another author holds here (post ids are unique across
// shards by the clients' contract; a collision leaves the post out of
// this shard's copy). It returns the number of posts added.
func (t *Timeline) PublishCopy(author uint64, typ EntryType, ref, refAuthor uint64, posts ...uint64) (int, error) {
	if err := CheckCopyPublish(author, typ, ref, refAuthor, posts); err != nil {
		return 0, err
	}
	if err := t.sharded(); err != nil {
		return 0, err
	}
	meta := entryMeta{kind: typ, ref: ref, refAuthor: refAuthor}
	res, err := t.publish(author, PublishOptions{}, &meta, posts)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, r := range res {
		if !r.Duplicate {
			n++
		}
	}
	return n, nil
}

// UnpublishCopy applies TL.XUNPUBLISH on a shard with followers of author,
// a user of another shard: the posts leave this shard's copy (and its
// homes, at once) and author's count here drops by one for each, also for
// a post older than the copy's window, which the real count counted. It
// returns the number of posts the copy held.
func (t *Timeline) UnpublishCopy(author uint64, posts ...uint64) (int, error) {
	if err := checkPostArgs(author, posts); err != nil {
		return 0, err
	}
	if len(posts) == 0 {
		return 0, fmt.Errorf("%w: no post", ErrBadMessage)
	}
	if err := t.sharded(); err != nil {
		return 0, err
	}
	res, err := t.unpublish(author, posts, true)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, r := range res {
		if r.Removed {
			n++
		}
	}
	return n, nil
}

// RemoteHide applies TL.XHIDE on follower's shard: author, a user of
// another shard, hides (add) or unhides their posts from follower, whose
// pages read the pair here. It reports whether anything changed.
func (t *Timeline) RemoteHide(author, follower uint64, add bool) (bool, error) {
	if err := t.sharded(); err != nil {
		return false, err
	}
	n, err := t.setPairs(false, add, author, []uint64{follower}, false)
	return n > 0, err
}

// Reposts of another shard's posts (TL.XSUBSCRIBE, TL.XGONE).
//
// A home hides a repost whose original is unpublished (the removed-post
// set). A shard holding a repost (the reposter's shard A, and every shard
// with a copy of the reposter's outbox) must therefore learn of the
// original's removal even when it follows nobody of the original
// author's. A, which knows both the repost and the shards it sends it to,
// subscribes each of them (itself included) to the original on the
// original's shard B: a subscription is a tl_xshard entry there (post |
// shard), and B's unpublish of the post sends TL.XGONE to every
// subscriber (and drops the entries). A subscription that reaches B after
// the post is gone (or names a post B never had) is answered with
// TL.XGONE at once. TL.XGONE marks the post removed on its shard (a shard
// with a live copy of the author's had it removed by TL.XUNPUBLISH, sent
// before it on the same stream; a stale copy drops it), so its reposts
// leave every home at once. The streams may deliver the repost and the TL.XGONE in either
// order: the mark hides the repost whenever it arrives.

// subscribe makes target hear of the removal of orig (by origAuthor), of
// which this shard holds or sends a repost: locally if orig is this
// shard's, else by TL.XSUBSCRIBE to orig's shard, in b. Nothing when
// target is orig's own shard (its removed set has it).
func (t *Timeline) subscribe(b *store.Batch, origAuthor, orig uint64, target uint32) error {
	if t.remote == nil || target == t.remote.ShardOf(origAuthor) {
		return nil
	}
	if t.remote.Local(origAuthor) {
		_, err := t.subscribeHere(b, origAuthor, orig, target)
		return err
	}
	return t.remote.Send(b, t.remote.ShardOf(origAuthor), argvOf(CmdXSubscribe, origAuthor, orig, uint64(target)))
}

// subscribeHere records, in b, that target holds reposts of author's
// post, or sends target TL.XGONE when the post is not published (now,
// or ever). It reports whether it recorded the subscription.
func (t *Timeline) subscribeHere(b *store.Batch, author, post uint64, target uint32) (bool, error) {
	owner, published, err := t.owner(post)
	if err != nil {
		return false, err
	}
	if published && owner == author {
		return true, t.fam.xshard.Put(b, xsubKey(nil, post, target), binary.BigEndian.AppendUint64(nil, author))
	}
	return false, t.remote.Send(b, target, argvOf(CmdXGone, author, post))
}

// subscribeRepost subscribes, in b, the shards that hold author's new
// reposts of orig (this one and every shard with followers of author).
func (t *Timeline) subscribeRepost(b *store.Batch, author uint64, meta entryMeta) error {
	if t.remote == nil || meta.kind != TypeRepost {
		return nil
	}
	shards, err := t.interestedShards(author)
	if err != nil {
		return err
	}
	for _, s := range append(shards, t.remote.ShardOf(author)) {
		if err := t.subscribe(b, meta.refAuthor, meta.ref, s); err != nil {
			return err
		}
	}
	return nil
}

// sendGone sends, in b, TL.XGONE for each of author's posts to every
// shard subscribed to it, and drops the subscriptions.
func (t *Timeline) sendGone(b *store.Batch, author uint64, posts []uint64) error {
	if t.remote == nil {
		return nil
	}
	for _, p := range posts {
		var shards []uint32
		if err := t.scan(t.fam.xshard, xsubKey(nil, p, 0)[:10], func(k, _ []byte) bool {
			shards = append(shards, binary.BigEndian.Uint32(k[10:14]))
			return true
		}); err != nil {
			return err
		}
		for _, s := range shards {
			if err := t.remote.Send(b, s, argvOf(CmdXGone, author, p)); err != nil {
				return err
			}
			if err := t.fam.xshard.Delete(b, xsubKey(nil, p, s)); err != nil {
				return err
			}
		}
	}
	return nil
}

// RemoteSubscribe applies TL.XSUBSCRIBE on author's shard: shard holds
// reposts of author's post. It records the subscription (the post's
// unpublish will send shard TL.XGONE) and reports true, or, when the
// post is not published, sends TL.XGONE at once and reports false.
func (t *Timeline) RemoteSubscribe(author, post uint64, shard uint32) (bool, error) {
	if err := checkPostArgs(author, []uint64{post}); err != nil {
		return false, err
	}
	if shard == 0 {
		return false, fmt.Errorf("%w: shard 0", ErrBadMessage)
	}
	if err := t.live(); err != nil {
		return false, err
	}
	if err := t.sharded(); err != nil {
		return false, err
	}
	t.graphMu.RLock()
	defer t.graphMu.RUnlock()
	am := &t.authorMu[stripe(author)]
	am.Lock()
	defer am.Unlock()
	unlock := t.lockPosts([]uint64{post})
	defer unlock()
	b := t.db.NewBatch()
	defer b.Close()
	ok, err := t.subscribeHere(b, author, post, shard)
	if err != nil {
		return false, err
	}
	return ok, b.Commit()
}

// OriginalGone applies TL.XGONE on a shard holding reposts of author's
// post, a post of another shard that is not (or no longer) published: it
// marks the post removed here, so its reposts leave every home at once.
// A stale copy of author's that still publishes the post (this shard had
// no follower of author's when it was unpublished) drops it, as
// TL.XUNPUBLISH would have. It reports whether anything changed: nothing
// when the post is marked already or another author holds the id here.
func (t *Timeline) OriginalGone(author, post uint64) (bool, error) {
	if err := checkPostArgs(author, []uint64{post}); err != nil {
		return false, err
	}
	if err := t.live(); err != nil {
		return false, err
	}
	if err := t.sharded(); err != nil {
		return false, err
	}
	if owner, published, err := t.Owner(post); err != nil {
		return false, err
	} else if published && owner == author {
		// A stale copy (this shard had no follower of author when the
		// post was unpublished, so no TL.XUNPUBLISH came): the post
		// leaves it as it would have.
		res, err := t.unpublish(author, []uint64{post}, true)
		return err == nil && res[0].Removed, err
	}
	t.graphMu.RLock()
	defer t.graphMu.RUnlock()
	am := &t.authorMu[stripe(author)]
	am.Lock()
	defer am.Unlock()
	unlock := t.lockPosts([]uint64{post})
	defer unlock()
	owner, published, err := t.owner(post)
	if err != nil || published || owner != 0 {
		return false, err
	}
	b := t.db.NewBatch()
	defer b.Close()
	if err := t.fam.removed.Put(b, removedKey(nil, post), binary.BigEndian.AppendUint64(nil, author)); err != nil {
		return false, err
	}
	t.removed.Lock()
	t.removed.bm.Add(post)
	t.removed.Unlock()
	if err := b.Commit(); err != nil || b.Duplicate() {
		// A duplicate changed nothing in the store, nor may it change
		// the removed set (as unpublish's).
		t.removed.Lock()
		t.removed.bm.Remove(post)
		t.removed.Unlock()
		return false, err
	}
	if s := stripe(post); post > t.postHigh[s] {
		t.postHigh[s] = post
	}
	return true, nil
}

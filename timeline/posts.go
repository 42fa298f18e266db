package timeline

// Posts: publish, unpublish and the fan-out job.

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/tallydb/tally/store"
)

// PublishResult tells what Publish did.
type PublishResult struct {
	// Duplicate is true when the author had published the post already:
	// nothing changed (a retried publish neither double counts nor double
	// delivers).
	Duplicate bool
	// Job is the fan-out job delivering the post, 0 when there is none
	// (a duplicate, an author without followers, a pulled author, whose
	// posts readers merge at read time, or a small fan-out, delivered in
	// the publish's own batch: see Options.InlineFanout).
	Job store.JobID
}

// Publish appends post to author's outbox and increments author's post
// count in one atomic batch, which also delivers the post to the inboxes
// of author's active followers if there are at most Options.InlineFanout
// of them, or else enqueues the post's fan-out job (unless author is
// pulled). Post ids
// are unique across authors, time-ordered (snowflake layout) and ordered
// newest first in every timeline. Errors: ErrBadID, ErrPostTaken (another
// author published the id, now or before unpublishing it). See
// PublishMany.
func (t *Timeline) Publish(author, post uint64) (PublishResult, error) {
	res, err := t.PublishMany(author, post)
	if err != nil {
		return PublishResult{}, err
	}
	return res[0], nil
}

// PublishMany publishes posts of author as one change: every post id is
// checked, and the new ones are published (outbox entries, post records,
// the post count, and their fan-out: its deliveries, markers for the
// shared fan-out job, or one fan-out job each; see the package doc,
// "Small fan-outs") in one batch, or none is. It
// returns one result per post, in order; a post author published already,
// or named twice, is a Duplicate. Errors, each refusing the whole command:
// ErrBadID, ErrPostTaken (another author has one of the ids).
//
// The ownership checks commit with the publish: they are made under the
// author's lock and the locks of the posts' stripes (ascending), which
// every publisher and unpublisher of those ids takes, whoever the author
// (issue 16 item 5: checking under the author's lock alone let two
// authors take one id, and checking per post let a command refused on its
// second post keep its first).
func (t *Timeline) PublishMany(author uint64, posts ...uint64) ([]PublishResult, error) {
	return t.PublishWith(author, PublishOptions{}, posts...)
}

// PublishWith is PublishMany for posts of a type other than TypePost: a
// repost (see Repost), a comment or a reply, each carrying its reference
// (opts.Ref, which must be published, and its author) into every inbox
// and page. A post published before is a Duplicate whatever type it was
// published with. Errors: those of PublishMany; ErrBadRef (see
// PublishOptions, Repost); ErrInvalidOption for an unknown type.
func (t *Timeline) PublishWith(author uint64, opts PublishOptions, posts ...uint64) ([]PublishResult, error) {
	if err := t.checkLocal("author", author); err != nil {
		return nil, err
	}
	return t.publish(author, opts, nil, posts)
}

// publish is PublishWith. With copyMeta non-nil, the posts are a copy of
// a remote author's posts (TL.XPUBLISH, remote.go): they carry copyMeta
// as given (the reference was checked on the author's shard), a post id
// another author holds here is skipped (Duplicate) rather than refusing
// the message, and nothing is sent on; else a local author's posts are
// sent to every shard with followers of the author, in the publish's
// batch.
func (t *Timeline) publish(author uint64, opts PublishOptions, copyMeta *entryMeta, posts []uint64) ([]PublishResult, error) {
	if err := checkPostArgs(author, posts); err != nil {
		return nil, err
	}
	if err := t.live(); err != nil {
		return nil, err
	}
	t.graphMu.RLock()
	defer t.graphMu.RUnlock()
	am := &t.authorMu[stripe(author)]
	am.Lock()
	defer am.Unlock()
	unlock := t.lockPosts(posts)
	defer unlock()
	var meta entryMeta
	if copyMeta != nil {
		meta = *copyMeta
	} else {
		m, err := t.checkRef(opts, posts)
		if err != nil {
			return nil, err
		}
		meta = m
	}
	res := make([]PublishResult, len(posts))
	type pub struct {
		post  uint64
		again bool // published before, then unpublished
		i     int  // index in posts and res
	}
	var fresh []pub
	repeat := repeats(posts)
	for i, p := range posts {
		if repeat(i) {
			res[i].Duplicate = true
			continue
		}
		if p > t.postHigh[stripe(p)] { // never published (see postHigh)
			fresh = append(fresh, pub{post: p, i: i})
			continue
		}
		owner, published, err := t.owner(p)
		if err != nil {
			return nil, err
		}
		if owner != 0 && owner != author {
			if copyMeta != nil {
				res[i].Duplicate = true // an id collision across shards (remote.go)
				continue
			}
			return nil, fmt.Errorf("%w: post %d is author %d's; nothing published", ErrPostTaken, p, owner)
		}
		if published {
			res[i].Duplicate = true
			continue
		}
		fresh = append(fresh, pub{post: p, again: owner != 0, i: i})
	}
	if len(fresh) == 0 {
		return res, nil
	}
	var buf [numCols]uint64
	r, err := t.row(author, buf[:0])
	if err != nil {
		return nil, err
	}
	fanout := r[colFollowers] > 0 && !t.isPulled(author)
	b := t.db.NewBatch()
	defer b.Close()
	ps := make([]uint64, len(fresh))
	for i, f := range fresh {
		ps[i] = f.post
	}
	// A small fan-out is written into this batch (deliverInline), under
	// pushGate until the commit.
	inline := false
	var delivered uint64
	if fanout && t.inlineMax > 0 && len(fresh) <= t.Config().InboxCap && r[colFollowers] <= inlineFollowers*uint64(t.inlineMax) {
		t.pushGate.RLock()
		defer t.pushGate.RUnlock()
		if inline, delivered, err = t.deliverInline(b, author, uint32(r[colOrd]), meta, ps); err != nil {
			return nil, err
		}
		fanout = !inline
	}
	// A fan-out to the followers of an author with few of them rides on
	// the shared job (shared.go), under shared.gate until the commit.
	shared := false
	var sharedJob store.JobID
	if fanout && r[colFollowers] <= t.sharedMax {
		t.shared.gate.RLock()
		defer t.shared.gate.RUnlock()
		if sharedJob, err = t.shareFanout(b, author, ps); err != nil {
			return nil, err
		}
		shared, fanout = true, false
	}
	for _, f := range fresh {
		if err := t.fam.outbox.Put(b, outboxKey(nil, author, f.post), appendEntryMeta(nil, meta)); err != nil {
			return nil, err
		}
		if meta.kind == TypeRepost {
			var by [8]byte
			binary.BigEndian.PutUint64(by[:], author)
			if err := t.fam.reposts.Put(b, repostKey(nil, meta.ref, f.post), by[:]); err != nil {
				return nil, err
			}
		}
		rec := postRecord{author: author, fanned: !fanout && !shared}
		if inline {
			rec.delivered = delivered
		}
		if err := t.fam.posts.Put(b, postKey(nil, f.post), appendPost(nil, rec)); err != nil {
			return nil, err
		}
		if f.again {
			if err := t.fam.removed.Delete(b, removedKey(nil, f.post)); err != nil {
				return nil, err
			}
		}
		if fanout {
			if err := b.Enqueue(jobFanout, fanoutKey(f.post), appendPayload(nil, opAdd, author, f.post), 0); err != nil {
				return nil, err
			}
		}
	}
	if err := b.Incr(UsersCounter, author, ColPosts, int64(len(fresh))); err != nil {
		return nil, err
	}
	if copyMeta == nil {
		if err := t.sendPublish(b, author, meta, ps); err != nil {
			return nil, err
		}
		if err := t.subscribeRepost(b, author, meta); err != nil {
			return nil, err
		}
	}
	if err := b.Commit(); err != nil {
		return nil, err
	}
	if b.Duplicate() {
		// A re-apply of an entry whose later commands removed these posts
		// (a pipeline is one entry): the store holds that state, so no
		// mirror changes and there is no job (TestReappliedPipelineEntry).
		return res, nil
	}
	if meta.kind == TypeRepost {
		t.reposts.Lock()
		for _, f := range fresh {
			t.reposts.add(meta.ref, repostRef{id: f.post, by: author})
		}
		t.reposts.Unlock()
	}
	for _, f := range fresh {
		if s := stripe(f.post); f.post > t.postHigh[s] {
			t.postHigh[s] = f.post
		}
	}
	if inline {
		t.stats.deliveries.Add(int64(delivered) * int64(len(fresh)))
	}
	if slices.ContainsFunc(fresh, func(f pub) bool { return f.again }) {
		t.removed.Lock()
		for _, f := range fresh {
			if f.again {
				t.removed.bm.Remove(f.post)
			}
		}
		t.removed.Unlock()
	}
	if ids := b.JobIDs(); fanout && len(ids) == len(fresh) {
		for k, f := range fresh {
			res[f.i].Job = ids[k]
		}
	}
	if shared {
		if sharedJob == 0 {
			sharedJob = b.JobIDs()[0]
			t.sharedEnqueued(sharedJob)
		}
		for _, f := range fresh {
			res[f.i].Job = sharedJob
		}
	}
	return res, nil
}

// inlineFollowers bounds the authors whose followers a publish reads to
// decide on an inline delivery: at most inlineFollowers × InlineFanout
// followers (an author with more is unlikely to have few of them in the
// push set, and reading their chunks is the job's work).
const inlineFollowers = 32

// deliverInline adds to b, the batch publishing posts of author (whose
// ordinal is aOrd), one inbox operand with the posts for every follower
// of author in the push set, if there are at most InlineFanout of them,
// and reports whether it did and to how many inboxes. The caller holds
// the author's stripe (so the followers cannot change until the commit:
// a follow takes it shared), and pushGate shared from before this call
// until after the commit.
//
// Ordering against the push set, the one input not under the author's
// lock: a user joins it in activate, which commits the membership, then
// adds the user to the in-memory set under pushGate, then reads the
// outboxes of the user's followees. A publish that read the set without
// the user held pushGate from that read to its commit, so the activation
// added the user after the commit, and its outbox read sees the post. A
// user who leaves the set (expiry) while the publish delivers gets an
// inbox that expiry's second phase, or the next activation, drops, as
// with a fan-out job. Crash: the delivery commits with the post or not at
// all, so no post that returned is ever half delivered, and there is no
// job to resume.
func (t *Timeline) deliverInline(b *store.Batch, author uint64, aOrd uint32, meta entryMeta, posts []uint64) (bool, uint64, error) {
	var buf [64]uint32
	targets, err := t.pushFollowers(aOrd, buf[:0])
	if err != nil || len(targets) > t.inlineMax {
		return false, 0, err
	}
	entries := make([]store.TopEntry, len(posts))
	for i, p := range posts {
		entries[i] = meta.entry(p, author)
	}
	operand := deliveryOperand(t.Config().InboxCap, entries)
	var key [5]byte
	for _, o := range targets {
		if err := t.fam.inbox.Merge(b, inboxKey(key[:0], o), operand); err != nil {
			return false, 0, err
		}
	}
	return true, uint64(len(targets)), nil
}

// repeats returns a function reporting whether ids[i] occurs earlier in
// ids (a scan for a few ids, a set for many: a command may name 64K).
func repeats(ids []uint64) func(i int) bool {
	if len(ids) <= 16 {
		return func(i int) bool { return slices.Contains(ids[:i], ids[i]) }
	}
	first := make(map[uint64]int, len(ids))
	for i := len(ids) - 1; i >= 0; i-- {
		first[ids[i]] = i
	}
	return func(i int) bool { return first[ids[i]] != i }
}

// checkPostArgs validates the ids of a publish or unpublish command.
func checkPostArgs(author uint64, posts []uint64) error {
	if err := CheckID("author", author); err != nil {
		return err
	}
	return CheckID("post", posts...)
}

// Owner returns who published post (now, or before unpublishing it: post
// ids are never reused by another author), 0 if nobody, and whether it is
// published now.
func (t *Timeline) Owner(post uint64) (author uint64, published bool, err error) {
	if err := CheckID("post", post); err != nil {
		return 0, false, err
	}
	return t.owner(post)
}

// owner returns who published post (now, or before unpublishing it), 0 if
// nobody, and whether it is published now.
func (t *Timeline) owner(post uint64) (uint64, bool, error) {
	v, ok, err := t.fam.posts.Get(postKey(nil, post), nil)
	if err != nil {
		return 0, false, err
	}
	if ok {
		rec, err := decodePost(v)
		if err != nil {
			return 0, false, fmt.Errorf("%w: post %d: %v", store.ErrCorrupt, post, err)
		}
		return rec.author, true, nil
	}
	if !t.isRemoved(post) { // the in-memory mirror of tl_removed
		return 0, false, nil
	}
	var buf [8]byte
	v, ok, err = t.fam.removed.Get(removedKey(nil, post), buf[:0])
	if err != nil || !ok {
		return 0, false, err
	}
	return binary.BigEndian.Uint64(v), false, nil
}

// Unpublish removes post from author's outbox, decrements author's post
// count and records the post as removed, in one atomic batch, which also
// enqueues the removal of the post from the inboxes it was delivered to.
// The post leaves every home at once: reads drop inbox entries of removed
// posts (see the package doc, "Removal"); the removal job then frees their
// inbox slots. It reports whether anything changed (unpublishing a post
// that is not published is a no-op that returns false) and the removal
// job, 0 if none. Errors: ErrBadID, ErrPostTaken (the post is another
// author's). See UnpublishMany.
func (t *Timeline) Unpublish(author, post uint64) (bool, store.JobID, error) {
	res, err := t.UnpublishMany(author, post)
	if err != nil {
		return false, 0, err
	}
	return res[0].Removed, res[0].Job, nil
}

// UnpublishResult tells what UnpublishMany did to one post.
type UnpublishResult struct {
	// Removed is false when the post was not published (or named twice):
	// nothing changed for it.
	Removed bool
	// Job is the job removing the post from inboxes, 0 if none.
	Job store.JobID
}

// UnpublishMany unpublishes posts of author as one change, in one batch,
// under the same locks as PublishMany: either every published one is
// removed or, when the command is refused, none. It returns one result
// per post, in order. Errors, each refusing the whole command: ErrBadID,
// ErrPostTaken (another author has one of the ids).
func (t *Timeline) UnpublishMany(author uint64, posts ...uint64) ([]UnpublishResult, error) {
	if err := t.checkLocal("author", author); err != nil {
		return nil, err
	}
	return t.unpublish(author, posts, false)
}

// unpublish is UnpublishMany. With copy set, the posts are a remote
// author's (TL.XUNPUBLISH, remote.go): a post id another author holds
// here is skipped, a post the copy does not hold (older than the copy's
// window) still decrements the author's count, which is the author's real
// count, and nothing is sent on; else the removal of a local author's
// posts is sent to every shard with followers of the author.
func (t *Timeline) unpublish(author uint64, posts []uint64, copy bool) ([]UnpublishResult, error) {
	if err := checkPostArgs(author, posts); err != nil {
		return nil, err
	}
	if err := t.live(); err != nil {
		return nil, err
	}
	t.graphMu.RLock()
	defer t.graphMu.RUnlock()
	am := &t.authorMu[stripe(author)]
	am.Lock()
	defer am.Unlock()
	unlock := t.lockPosts(posts)
	defer unlock()
	res := make([]UnpublishResult, len(posts))
	var gone []int // indexes in posts of the posts to remove
	beyond := 0    // posts of a copy that it does not hold (copy only)
	repeat := repeats(posts)
	for i, p := range posts {
		if repeat(i) {
			continue
		}
		owner, published, err := t.owner(p)
		if err != nil {
			return nil, err
		}
		if owner != 0 && owner != author {
			if copy {
				continue // an id collision across shards (remote.go)
			}
			return nil, fmt.Errorf("%w: post %d is author %d's; nothing unpublished", ErrPostTaken, p, owner)
		}
		if published {
			gone = append(gone, i)
		} else if copy {
			beyond++
		}
	}
	if len(gone) == 0 && beyond == 0 {
		return res, nil
	}
	var buf [numCols]uint64
	r, err := t.row(author, buf[:0])
	if err != nil {
		return nil, err
	}
	// A pulled author's entries are never read from inboxes (readers pull
	// them), so there is no space worth freeing.
	fanout := r[colFollowers] > 0 && !t.isPulled(author)
	b := t.db.NewBatch()
	defer b.Close()
	var v [8]byte
	binary.BigEndian.PutUint64(v[:], author)
	reposted := map[uint64]uint64{} // repost -> original, of the reposts removed
	for _, i := range gone {
		p := posts[i]
		m, _, err := t.outboxMeta(author, p)
		if err != nil {
			return nil, err
		}
		if m.kind == TypeRepost {
			reposted[p] = m.ref
			if err := t.fam.reposts.Delete(b, repostKey(nil, m.ref, p)); err != nil {
				return nil, err
			}
		}
		if err := t.fam.outbox.Delete(b, outboxKey(nil, author, p)); err != nil {
			return nil, err
		}
		if err := t.fam.posts.Delete(b, postKey(nil, p)); err != nil {
			return nil, err
		}
		if err := t.fam.removed.Put(b, removedKey(nil, p), v[:]); err != nil {
			return nil, err
		}
		// A post waiting for the shared job leaves its queue: the job
		// rechecks its markers under the author's lock.
		if err := t.fam.fanq.Delete(b, fanqKey(nil, p)); err != nil {
			return nil, err
		}
		if fanout {
			if err := b.Enqueue(jobFanout, fanoutKey(p), appendPayload(nil, opRemove, author, p), 0); err != nil {
				return nil, err
			}
		}
	}
	dec := int64(len(gone))
	if room := int64(r[colPosts]) - dec; beyond > 0 && room > 0 {
		// The author's real count counts them; never below the copy's
		// own posts (r[colPosts] counts the gone ones).
		dec += min(int64(beyond), room)
	}
	if dec != 0 {
		if err := b.Incr(UsersCounter, author, ColPosts, -dec); err != nil {
			return nil, err
		}
	}
	if !copy && len(gone) > 0 {
		ids := make([]uint64, len(gone))
		for k, i := range gone {
			ids[k] = posts[i]
		}
		if err := t.sendUnpublish(b, author, ids); err != nil {
			return nil, err
		}
		if err := t.sendGone(b, author, ids); err != nil {
			return nil, err
		}
	}
	if b.Empty() {
		return res, nil
	}
	// Readers drop the posts from the moment the commit may be visible.
	t.removed.Lock()
	for _, i := range gone {
		t.removed.bm.Add(posts[i])
	}
	t.removed.Unlock()
	if err := b.Commit(); err != nil || b.Duplicate() {
		// A duplicate is a re-apply that changed nothing in the store
		// (TestReappliedPipelineEntry): nor may it change the mirror.
		t.removed.Lock()
		for _, i := range gone {
			t.removed.bm.Remove(posts[i])
		}
		t.removed.Unlock()
		if err != nil {
			return nil, err
		}
		return res, nil
	}
	if len(reposted) > 0 {
		t.reposts.Lock()
		for p, o := range reposted {
			t.reposts.remove(o, p)
		}
		t.reposts.Unlock()
	}
	ids := b.JobIDs()
	for k, i := range gone {
		res[i].Removed = true
		if fanout && len(ids) == len(gone) {
			res[i].Job = ids[k]
		}
	}
	return res, nil
}

// PostInfo describes a published post.
type PostInfo struct {
	Author uint64
	// FannedOut is true once the post's fan-out finished (or was not
	// needed); Delivered is then the number of inboxes it wrote.
	FannedOut bool
	Delivered uint64
}

// Post returns what the store holds of post; ok is false if it is not
// published.
func (t *Timeline) Post(post uint64) (PostInfo, bool, error) {
	if err := CheckID("post", post); err != nil {
		return PostInfo{}, false, err
	}
	v, ok, err := t.fam.posts.Get(postKey(nil, post), nil)
	if err != nil || !ok {
		return PostInfo{}, false, err
	}
	rec, err := decodePost(v)
	if err != nil {
		return PostInfo{}, false, fmt.Errorf("%w: post %d: %v", store.ErrCorrupt, post, err)
	}
	return PostInfo{Author: rec.author, FannedOut: rec.fanned, Delivered: rec.delivered}, true, nil
}

// Posts calls fn for author's posts, newest first, below before (0: from
// the newest), until fn returns false.
func (t *Timeline) Posts(author, before uint64, fn func(post uint64) bool) error {
	if err := CheckID("author", author); err != nil {
		return err
	}
	it, err := t.fam.outbox.NewIter(&store.IterOptions{Prefix: outboxKey(nil, author, 0)[:9]})
	if err != nil {
		return err
	}
	ok := true
	if before > 1 {
		ok = it.SeekGE(outboxKey(nil, author, before-1))
	} else if before == 1 {
		ok = false
	} else {
		ok = it.Next()
	}
	for ; ok; ok = it.Next() {
		if !fn(postOfOutboxKey(it.Key())) {
			break
		}
	}
	return closeIter(it)
}

// postEntries calls fn for author's posts as inbox entries (with their
// types and references), newest first, until fn returns false.
func (t *Timeline) postEntries(author uint64, fn func(store.TopEntry) bool) error {
	it, err := t.fam.outbox.NewIter(&store.IterOptions{Prefix: outboxKey(nil, author, 0)[:9]})
	if err != nil {
		return err
	}
	for ok := it.Next(); ok; ok = it.Next() {
		p := postOfOutboxKey(it.Key())
		m, err := decodeEntryMeta(it.Value())
		if err != nil {
			it.Close()
			return fmt.Errorf("%w: post %d of %d: %v", store.ErrCorrupt, p, author, err)
		}
		if !fn(m.entry(p, author)) {
			break
		}
	}
	return closeIter(it)
}

// PostsPage returns a page of author's own posts (their outbox), newest
// first, starting after cursor ("" for the first page), with the cursor
// rules of Home and the follow lists: opaque, issued for this author's
// posts only (ErrBadCursor otherwise). A post published or unpublished
// behind the cursor does not shift later pages.
func (t *Timeline) PostsPage(author uint64, cursor string, limit int) (IDPage, error) {
	limit, after, started, err := pageStart("author", author, cursorPosts, cursor, limit)
	if err != nil {
		return IDPage{}, err
	}
	before := uint64(0) // from the newest
	if started {
		if after <= 1 {
			return IDPage{NoMore: true}, nil
		}
		before = after
	}
	var p IDPage
	more := false
	err = t.Posts(author, before, func(post uint64) bool {
		if t.isRemoved(post) {
			return true
		}
		if len(p.IDs) == limit {
			more = true
			return false
		}
		p.IDs = append(p.IDs, post)
		return true
	})
	if err != nil {
		return IDPage{}, err
	}
	if more {
		p.Cursor = encodeCursor(cursorPosts, author, p.IDs[len(p.IDs)-1])
	} else {
		p.NoMore = true
	}
	return p, nil
}

func (t *Timeline) isRemoved(post uint64) bool {
	t.removed.RLock()
	defer t.removed.RUnlock()
	return t.removed.bm.Contains(post)
}

// inboxOperand returns the tl_inbox operand that adds (or, with removed,
// tombstones) entries under capacity, plus the sentinel entry (key 0),
// which keeps an inbox from ever merging to nothing (see the package doc,
// "Sentinels").
func inboxOperand(capacity int, entries []store.TopEntry) []byte {
	es := make([]store.TopEntry, 0, len(entries)+1)
	es = append(es, entries...)
	es = append(es, store.TopEntry{})
	op, err := store.TopListOperand(nil, capacity, es)
	if err != nil {
		// Capacity comes from a validated Config and values are user ids
		// ≤ MaxID: TopListOperand has nothing to refuse.
		panic(fmt.Sprintf("timeline: inbox operand: %v", err))
	}
	return op
}

// deliveryOperand returns the tl_inbox operand of a fan-out's delivery of
// entries under capacity. When it only adds entries it carries no
// sentinel: an operand of added entries merges, in any grouping, to a
// value that holds an entry or a floor, so it never merges to nothing
// (see "Sentinels" in the package doc), and a one-post delivery is 19
// bytes instead of 26-29. One that tombstones an entry (a removed post's
// delivery), or adds none, is inboxOperand's, sentinel and all.
func deliveryOperand(capacity int, entries []store.TopEntry) []byte {
	if len(entries) == 0 || slices.ContainsFunc(entries, func(e store.TopEntry) bool { return e.Removed }) {
		return inboxOperand(capacity, entries)
	}
	op, err := store.TopListOperand(nil, capacity, entries)
	if err != nil {
		// As in inboxOperand: nothing to refuse.
		panic(fmt.Sprintf("timeline: delivery operand: %v", err))
	}
	return op
}

// chunkTargets is the part of a fan-out in one 2^16-ordinal chunk: the
// followers of the author that are in the push set.
type chunkTargets struct {
	chunk uint16
	bm    *roaring.Bitmap
}

// fanoutTargets returns, chunk by chunk from ordinal from on, the author's
// followers that are in the push set, and how many there are.
func (t *Timeline) fanoutTargets(aOrd uint32, from uint64) ([]chunkTargets, uint64, error) {
	var out []chunkTargets
	var n uint64
	err := t.followerChunks(aOrd, from, func(fol *roaring.Bitmap) (bool, error) {
		c := chunkOf(fol.Minimum()) // the sentinel, the chunk's first ordinal
		t.push.RLock()
		fol.And(t.push.bm)
		t.push.RUnlock()
		if lo := uint64(c) << 16; from > lo {
			fol.RemoveRange(lo, from)
		}
		if !fol.IsEmpty() {
			out = append(out, chunkTargets{c, fol})
			n += fol.GetCardinality()
		}
		return true, nil
	})
	return out, n, err
}

// runFanout is the handler of jobFanout: it delivers a post to (or removes
// it from) the inbox of every follower of its author in the push set,
// ChunkSize inboxes per batch, each batch committed with the job's progress
// so a killed fan-out resumes where it stopped and never writes a chunk
// twice (a chunk written twice would show once anyway: an inbox entry is
// keyed by post id).
//
// What it decides from the mirrors (the config, the pulled authors, the
// push set) it reads under graphMu's read side, with its batch made there
// (planFanout). A store reopen replaces the mirrors in its ReopenHook.After,
// after the store takes writes again, under graphMu's write side: a run
// in between (a caller's RunJobs or WaitJob) read the mirrors of before
// the reopen and committed with a batch of the new generation, delivering
// to the push set of before the reopen (TestFanoutDuringReopen). Later
// reads of the mirrors (stop, finishFanout's removed set) need no lock: a
// reopen after the plan fails the run's next commit (the batch's
// generation), and the job runs again.
func (t *Timeline) runFanout(ctx context.Context, run *store.JobRun) error {
	op, author, post, err := decodePayload(run.Payload())
	if err != nil {
		return fmt.Errorf("%w: fan-out job %d: %v", store.ErrCorrupt, run.ID(), err)
	}
	cur, err := decodeJobCursor(run.Cursor())
	if err != nil {
		return fmt.Errorf("%w: fan-out job %d: %v", store.ErrCorrupt, run.ID(), err)
	}
	stop := func() bool {
		return run.Superseded() || op == opAdd && t.isPulled(author)
	}
	cfg, b, targets, remaining, err := t.planFanout(author, cur.next, stop)
	if err != nil {
		return err
	}
	defer b.Close()
	done := run.Done()
	chunkSize := uint64(cfg.ChunkSize)
	total := done + int64((remaining+chunkSize-1)/chunkSize)
	total = max(total, done+1)
	entry := store.TopEntry{Key: post, Value: author, Removed: op == opRemove}
	if op == opAdd && len(targets) > 0 {
		// The entry's type and reference travel with it: read them from
		// the outbox (an unpublished post's entry is filtered on read).
		m, _, err := t.outboxMeta(author, post)
		if err != nil {
			return err
		}
		entry = m.entry(post, author)
	}
	operand := deliveryOperand(cfg.InboxCap, []store.TopEntry{entry})
	var key [5]byte
	n := uint64(0)
	for _, ct := range targets {
		it := ct.bm.Iterator()
		for it.HasNext() {
			ord := it.Next()
			if err := t.fam.inbox.Merge(b, inboxKey(key[:0], ord), operand); err != nil {
				return err
			}
			n++
			cur.next = uint64(ord) + 1
			remaining--
			if n == chunkSize && remaining > 0 {
				cur.count += n
				done++
				if err := run.Commit(ctx, b, store.JobProgress{Cursor: appendJobCursor(nil, cur), Done: done, Total: total}); err != nil {
					return err
				}
				t.stats.deliveries.Add(int64(n))
				n = 0
				if t.testHook != nil {
					t.testHook()
				}
				if stop() {
					return t.finishFanout(ctx, run, b, op, author, post, cur, done, total)
				}
				if err := ctx.Err(); err != nil {
					return err
				}
			}
		}
	}
	cur.count += n
	t.stats.deliveries.Add(int64(n))
	return t.finishFanout(ctx, run, b, op, author, post, cur, done, total)
}

// planFanout reads, under graphMu's read side, the config and the
// followers of author from ordinal from on that a fan-out delivers to
// (none once stop says so), and makes the batch the run commits in, of
// the generation those mirrors belong to (see runFanout).
func (t *Timeline) planFanout(author, from uint64, stop func() bool) (Config, *store.Batch, []chunkTargets, uint64, error) {
	graph := t.graphLock()
	defer graph()
	cfg := t.Config()
	aOrd, err := t.ordOf(author)
	if err != nil {
		return cfg, nil, nil, 0, err
	}
	b := t.db.NewBatch()
	if aOrd == 0 || stop() {
		return cfg, b, nil, 0, nil
	}
	targets, remaining, err := t.fanoutTargets(aOrd, from)
	if err != nil {
		b.Close()
		return cfg, nil, nil, 0, err
	}
	return cfg, b, targets, remaining, nil
}

// finishFanout commits the fan-out's last chunk (already in b) with the
// post's delivery count, under the author's lock, so the post record it
// rewrites cannot interleave with an unpublish or publish of the post.
func (t *Timeline) finishFanout(ctx context.Context, run *store.JobRun, b *store.Batch, op byte, author, post uint64, cur jobCursor, done, total int64) error {
	am := &t.authorMu[stripe(author)]
	am.Lock()
	defer am.Unlock()
	// Under the author's lock the post is published unless it is in the
	// removed set: an unpublish (which holds the lock through its commit)
	// adds it there, and a fan-out of the post runs only after the job of
	// the publish that preceded it (one coalescing key per post).
	if op == opAdd && !t.isRemoved(post) {
		rec := postRecord{author: author, delivered: cur.count, fanned: true}
		if err := t.fam.posts.Put(b, postKey(nil, post), appendPost(nil, rec)); err != nil {
			return err
		}
	}
	done++
	return run.Commit(ctx, b, store.JobProgress{Cursor: appendJobCursor(nil, cur), Done: done, Total: max(total, done), Finished: true})
}

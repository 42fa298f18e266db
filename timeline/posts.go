package timeline

// Posts: publish, unpublish and the fan-out job.

import (
	"context"
	"encoding/binary"
	"fmt"

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
	// (a duplicate, an author without followers, or a pulled author, whose
	// posts readers merge at read time).
	Job store.JobID
}

// Publish appends post to author's outbox and increments author's post
// count in one atomic batch, which also enqueues the post's fan-out to the
// inboxes of author's active followers (unless author is pulled). Post ids
// are unique across authors, time-ordered (snowflake layout) and ordered
// newest first in every timeline. Errors: ErrBadID, ErrPostTaken (another
// author published the id, now or before unpublishing it).
func (t *Timeline) Publish(author, post uint64) (PublishResult, error) {
	if err := checkID("author", author); err != nil {
		return PublishResult{}, err
	}
	if err := checkID("post", post); err != nil {
		return PublishResult{}, err
	}
	if err := t.live(); err != nil {
		return PublishResult{}, err
	}
	t.graphMu.RLock()
	defer t.graphMu.RUnlock()
	am := &t.authorMu[stripe(author)]
	am.Lock()
	defer am.Unlock()
	owner, published, err := t.owner(post)
	if err != nil {
		return PublishResult{}, err
	}
	if owner != 0 && owner != author {
		return PublishResult{}, fmt.Errorf("%w: post %d is author %d's", ErrPostTaken, post, owner)
	}
	if published {
		return PublishResult{Duplicate: true}, nil
	}
	var buf [numCols]uint64
	r, err := t.row(author, buf[:0])
	if err != nil {
		return PublishResult{}, err
	}
	fanout := r[colFollowers] > 0 && !t.isPulled(author)
	b := t.db.NewBatch()
	defer b.Close()
	if err := t.fam.outbox.Put(b, outboxKey(nil, author, post), nil); err != nil {
		return PublishResult{}, err
	}
	if err := t.fam.posts.Put(b, postKey(nil, post), appendPost(nil, postRecord{author: author, fanned: !fanout})); err != nil {
		return PublishResult{}, err
	}
	if owner != 0 { // published again after an unpublish
		if err := t.fam.removed.Delete(b, removedKey(nil, post)); err != nil {
			return PublishResult{}, err
		}
	}
	if err := b.Incr(UsersCounter, author, ColPosts, 1); err != nil {
		return PublishResult{}, err
	}
	if fanout {
		if err := b.Enqueue(jobFanout, fanoutKey(post), appendPayload(nil, opAdd, author, post), 0); err != nil {
			return PublishResult{}, err
		}
	}
	if err := b.Commit(); err != nil {
		return PublishResult{}, err
	}
	if owner != 0 {
		t.removed.Lock()
		t.removed.bm.Remove(post)
		t.removed.Unlock()
	}
	var res PublishResult
	if ids := b.JobIDs(); len(ids) > 0 {
		res.Job = ids[0]
	}
	return res, nil
}

// Owner returns who published post (now, or before unpublishing it: post
// ids are never reused by another author), 0 if nobody, and whether it is
// published now.
func (t *Timeline) Owner(post uint64) (author uint64, published bool, err error) {
	if err := checkID("post", post); err != nil {
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
// author's).
func (t *Timeline) Unpublish(author, post uint64) (bool, store.JobID, error) {
	if err := checkID("author", author); err != nil {
		return false, 0, err
	}
	if err := checkID("post", post); err != nil {
		return false, 0, err
	}
	if err := t.live(); err != nil {
		return false, 0, err
	}
	t.graphMu.RLock()
	defer t.graphMu.RUnlock()
	am := &t.authorMu[stripe(author)]
	am.Lock()
	defer am.Unlock()
	owner, published, err := t.owner(post)
	if err != nil {
		return false, 0, err
	}
	if owner != 0 && owner != author {
		return false, 0, fmt.Errorf("%w: post %d is author %d's", ErrPostTaken, post, owner)
	}
	if !published {
		return false, 0, nil
	}
	var buf [numCols]uint64
	r, err := t.row(author, buf[:0])
	if err != nil {
		return false, 0, err
	}
	// A pulled author's entries are never read from inboxes (readers pull
	// them), so there is no space worth freeing.
	fanout := r[colFollowers] > 0 && !t.isPulled(author)
	b := t.db.NewBatch()
	defer b.Close()
	if err := t.fam.outbox.Delete(b, outboxKey(nil, author, post)); err != nil {
		return false, 0, err
	}
	if err := t.fam.posts.Delete(b, postKey(nil, post)); err != nil {
		return false, 0, err
	}
	var v [8]byte
	binary.BigEndian.PutUint64(v[:], author)
	if err := t.fam.removed.Put(b, removedKey(nil, post), v[:]); err != nil {
		return false, 0, err
	}
	if err := b.Incr(UsersCounter, author, ColPosts, -1); err != nil {
		return false, 0, err
	}
	if fanout {
		if err := b.Enqueue(jobFanout, fanoutKey(post), appendPayload(nil, opRemove, author, post), 0); err != nil {
			return false, 0, err
		}
	}
	// Readers drop the post from the moment the commit may be visible.
	t.removed.Lock()
	t.removed.bm.Add(post)
	t.removed.Unlock()
	if err := b.Commit(); err != nil {
		t.removed.Lock()
		t.removed.bm.Remove(post)
		t.removed.Unlock()
		return false, 0, err
	}
	var job store.JobID
	if ids := b.JobIDs(); len(ids) > 0 {
		job = ids[0]
	}
	return true, job, nil
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
	if err := checkID("post", post); err != nil {
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
	if err := checkID("author", author); err != nil {
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
func (t *Timeline) runFanout(ctx context.Context, run *store.JobRun) error {
	op, author, post, err := decodePayload(run.Payload())
	if err != nil {
		return fmt.Errorf("%w: fan-out job %d: %v", store.ErrCorrupt, run.ID(), err)
	}
	cur, err := decodeJobCursor(run.Cursor())
	if err != nil {
		return fmt.Errorf("%w: fan-out job %d: %v", store.ErrCorrupt, run.ID(), err)
	}
	cfg := t.Config()
	aOrd, err := t.ordOf(author)
	if err != nil {
		return err
	}
	b := t.db.NewBatch()
	defer b.Close()
	stop := func() bool {
		return run.Superseded() || op == opAdd && t.isPulled(author)
	}
	var targets []chunkTargets
	var remaining uint64
	if aOrd != 0 && !stop() {
		if targets, remaining, err = t.fanoutTargets(aOrd, cur.next); err != nil {
			return err
		}
	}
	done := run.Done()
	chunkSize := uint64(cfg.ChunkSize)
	total := done + int64((remaining+chunkSize-1)/chunkSize)
	total = max(total, done+1)
	entry := store.TopEntry{Key: post, Value: author, Removed: op == opRemove}
	operand := inboxOperand(cfg.InboxCap, []store.TopEntry{entry})
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

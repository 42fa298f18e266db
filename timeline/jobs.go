package timeline

// Background jobs other than the fan-out: a follow's backfill, an
// unfollow's cleanup, and the expiry of inactive inboxes.

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/tallydb/tally/store"
)

// runPair is the handler of jobPair. A backfill (after a follow) merges
// the followee's newest InboxCap+1 posts into the user's inbox (an operand
// that carries its own floor, so it is exact whatever the inbox's floor:
// see the package doc, "Floors") and drops the pair's pending mark; a
// cleanup (after an unfollow) tombstones the followee's entries to free
// their slots. Both run in one chunk under the user's lock and check the
// pair's state when they commit, so whatever order a follow's and an
// unfollow's jobs run in, and whichever of them coalescing kept, the inbox
// ends in the state of the last change (and reads, which filter by the
// graph, show that state from the moment the change commits).
//
// The whole run holds graphMu's read side (a store reopen reloads the
// pending marks and the config under its write side, after the store takes
// writes again), its batch made under it.
func (t *Timeline) runPair(ctx context.Context, run *store.JobRun) error {
	op, user, followee, err := decodePayload(run.Payload())
	if err != nil {
		return fmt.Errorf("%w: pair job %d: %v", store.ErrCorrupt, run.ID(), err)
	}
	graph := t.graphLock()
	defer graph()
	cfg := t.Config()
	b := t.db.NewBatch()
	defer b.Close()
	finish := func() error {
		return run.Commit(ctx, b, store.JobProgress{Done: 1, Total: 1, Finished: true})
	}
	ord, err := t.ordOf(user)
	if err != nil {
		return err
	}
	if ord == 0 || run.Superseded() {
		return finish()
	}
	var entries []store.TopEntry
	if op == opAdd {
		if err := t.postEntries(followee, func(e store.TopEntry) bool {
			entries = append(entries, e)
			return len(entries) <= cfg.InboxCap
		}); err != nil {
			return err
		}
	}
	unlock := t.lockUsers([]uint64{user})
	defer unlock()
	var buf [numCols]uint64
	r, err := t.row(user, buf[:0])
	if err != nil {
		return err
	}
	following, err := t.IsFollowing(user, followee)
	if err != nil {
		return err
	}
	superseded := run.Superseded()
	merge := !superseded && r[colRead] != 0 && following == (op == opAdd)
	if merge && op == opRemove {
		v, ok, err := t.fam.inbox.Get(inboxKey(nil, ord), nil)
		if err != nil {
			return err
		}
		if ok {
			tl, err := store.DecodeTopList(v)
			if err != nil {
				return fmt.Errorf("inbox of user %d: %w", user, err)
			}
			for _, e := range tl.Entries {
				if e.Key != 0 && e.Value == followee {
					entries = append(entries, store.TopEntry{Key: e.Key, Value: e.Value, Removed: true})
				}
			}
		}
	}
	if merge && len(entries) > 0 {
		if err := t.fam.inbox.Merge(b, inboxKey(nil, ord), inboxOperand(cfg.InboxCap, entries)); err != nil {
			return err
		}
	}
	dropPending := !superseded && op == opAdd && t.pendingHas(ord, followee)
	if dropPending {
		if err := t.fam.pending.Delete(b, pendingKey(nil, ord, followee)); err != nil {
			return err
		}
	}
	if err := finish(); err != nil {
		return err
	}
	if dropPending {
		t.pendingRemove(ord, followee)
	}
	return nil
}

// startRun returns the config and a new batch for a job run, read and
// made under graphMu's read side: a store reopen reloads the config in its
// ReopenHook.After, after the store takes writes again, and a run started
// in between read the config of before the reopen with a batch of the new
// generation. Made here, the batch's generation is the config's, and a
// reopen after it fails the run's next commit.
func (t *Timeline) startRun() (Config, *store.Batch) {
	graph := t.graphLock()
	defer graph()
	return t.Config(), t.db.NewBatch()
}

// graphLock takes the graph lock's read side (bulk loads take the write
// side) and returns its release.
func (t *Timeline) graphLock() func() {
	t.graphMu.RLock()
	return t.graphMu.RUnlock
}

// EnqueueExpire enqueues the expiry job (coalesced with a pending one) and
// returns its id. Background workers, or DB.RunJobs, run it.
//
// The enqueue is node-local (store apply.go, SetLocal): expiry works on
// this node's activity (read marks, the push set, inboxes and pending
// marks, all node-local), the ticker enqueues it from its own goroutine
// whenever it fires, and TL.EXPIRE, a replicated command, enqueues it in
// the apply. Numbered as the applying entry's commit, the ticker's enqueue
// took a number of whatever entry was applying, and a re-apply of
// TL.EXPIRE's entry skipped the enqueue as a duplicate and found no job
// id. Enqueued again on a re-apply, it coalesces with the queued job or
// runs once more, which changes nothing a read returns.
func (t *Timeline) EnqueueExpire() (store.JobID, error) {
	if err := t.live(); err != nil {
		return 0, err
	}
	b := t.db.NewBatch()
	defer b.Close()
	b.SetLocal()
	if err := b.Enqueue(jobExpire, []byte("expire"), nil, 0); err != nil {
		return 0, err
	}
	if err := b.Commit(); err != nil {
		return 0, err
	}
	return b.JobIDs()[0], nil
}

// Expire runs the expiry job now and waits for it: users whose last home
// read is older than the active window leave the push set and lose their
// inbox (their next read rebuilds it). It returns the number of users
// expired by this run.
func (t *Timeline) Expire(ctx context.Context) (int64, error) {
	before := t.stats.expired.Load()
	id, err := t.EnqueueExpire()
	if err != nil {
		return 0, err
	}
	if err := t.db.WaitJob(ctx, id); err != nil {
		return 0, err
	}
	return t.stats.expired.Load() - before, nil
}

// runExpire is the handler of jobExpire, in two phases, each paced in
// chunks of ChunkSize users with its progress committed with each chunk:
//
//  0. for every user in the push set whose read mark is older than the
//     active window (or zero: a rebuild that never finished), remove the
//     user from the push set, zero the mark and drop pending backfill
//     marks, in one batch;
//  1. for every inbox whose user's read mark is zero, drop the inbox.
//
// Phase 1 after phase 0 is what keeps readers safe: a reader trusts an
// inbox only while the mark is non-zero and unchanged across its read, and
// the mark is zero before the inbox goes. Both phases recheck each user
// under the user's lock, which a rebuild holds from start to publication.
// Phase 1 also drops inboxes left by a fan-out that raced an expiry.
func (t *Timeline) runExpire(ctx context.Context, run *store.JobRun) error {
	cur, err := decodeJobCursor(run.Cursor())
	if err != nil {
		return fmt.Errorf("%w: expiry job %d: %v", store.ErrCorrupt, run.ID(), err)
	}
	x := &expiry{t: t, ctx: ctx, run: run, cur: cur, now: t.nowSec(), done: run.Done()}
	x.cfg, x.b = t.startRun()
	defer x.b.Close()
	for x.cur.phase == 0 {
		if err := x.expireChunk(); err != nil {
			return err
		}
		if x.cur.phase != 0 {
			break
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	for {
		fin, err := x.dropInboxChunk()
		if err != nil || fin {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// expiry is one run of the expiry job: its cursor, the batch each chunk
// commits with its progress, and the clock reading it judges marks by.
type expiry struct {
	t   *Timeline
	ctx context.Context
	run *store.JobRun
	cur jobCursor
	cfg Config
	now uint64 // seconds, read once per run
	// done counts the chunks committed, the job's progress.
	done   int64
	b      *store.Batch
	idBuf  []byte
	rowBuf [numCols]uint64
}

// expired reports whether a read mark is past the active window; zero is
// a rebuild that never finished, expired too.
func (x *expiry) expired(read uint64) bool {
	window := uint64(x.cfg.ActiveWindow.Seconds())
	return read == 0 || x.now > read && x.now-read > window
}

// commit commits the staged chunk with the cursor as progress.
func (x *expiry) commit(fin bool) error {
	x.done++
	return x.run.Commit(x.ctx, x.b, store.JobProgress{Cursor: appendJobCursor(nil, x.cur), Done: x.done, Total: x.done + 1, Finished: fin})
}

// read returns the read mark of user id.
func (x *expiry) read(id uint64) (uint64, error) {
	r, err := x.t.row(id, x.rowBuf[:0])
	if err != nil {
		return 0, err
	}
	return r[colRead], nil
}

// candidates returns the users of ords, and their ordinals, whose read
// mark pick selects, read without their locks (the caller rechecks them
// under the locks). An ordinal with no user is corruption; where names
// the ordinal's place in the error (a format with one %d).
func (x *expiry) candidates(ords []uint32, where string, pick func(read uint64) bool) ([]uint64, []uint32, error) {
	var ids []uint64
	var candOrds []uint32
	for _, o := range ords {
		id, ok, err := x.t.idOf(o, x.idBuf)
		if err != nil {
			return nil, nil, err
		}
		if !ok {
			return nil, nil, fmt.Errorf("%w: %s has no user", store.ErrCorrupt, fmt.Sprintf(where, o))
		}
		read, err := x.read(id)
		if err != nil {
			return nil, nil, err
		}
		if pick(read) {
			ids = append(ids, id)
			candOrds = append(candOrds, o)
		}
	}
	return ids, candOrds, nil
}

// expireChunk is one chunk of phase 0: the next ChunkSize members of the
// push set, those expired cleared and committed with the cursor (which
// moves to phase 1 after the last chunk).
func (x *expiry) expireChunk() error {
	t := x.t
	ords, next, err := t.activeMembers(x.cur.next, x.cfg.ChunkSize)
	if err != nil {
		return err
	}
	cands, candOrds, err := x.candidates(ords, "ordinal %d in the push set", x.expired)
	if err != nil {
		return err
	}
	x.cur.next = next
	if len(cands) == 0 {
		if next > maxOrd {
			x.cur.phase, x.cur.next = 1, 0
		}
		return nil
	}
	cleared, err := x.clearUsers(cands, candOrds, next)
	if err != nil {
		return err
	}
	t.stats.expired.Add(int64(len(cleared)))
	return nil
}

// clearUsers, under the users' locks, rechecks each candidate and, for
// those still expired, zeroes the read mark, drops pending backfill marks
// and removes the user from the push set, and commits that with the
// cursor. It returns the ordinals cleared.
//
// It holds graphMu's read side, as the pair job does: the marks it drops
// are those of the in-memory index, which a store reopen replaces in its
// ReopenHook.After, after the store takes writes again. A run in between
// (a caller's RunJobs or WaitJob) dropped the index's marks of before the
// reopen and left the ones a failed-but-durable follow stored, on a user
// without a read mark (TestExpiryDuringReopen).
func (x *expiry) clearUsers(cands []uint64, candOrds []uint32, next uint64) ([]uint32, error) {
	t, b := x.t, x.b
	graph := t.graphLock()
	defer graph()
	unlock := t.lockUsers(cands)
	defer unlock()
	var cleared []uint32
	byChunk := map[uint16][]uint32{}
	for i, id := range cands {
		read, err := x.read(id)
		if err != nil {
			return nil, err
		}
		if !x.expired(read) {
			continue
		}
		o := candOrds[i]
		byChunk[chunkOf(o)] = append(byChunk[chunkOf(o)], o)
		if read != 0 {
			if err := b.SetColumn(UsersCounter, id, ColRead, 0); err != nil {
				return nil, err
			}
			x.cur.count++
		}
		for _, a := range t.pendingOf(o, nil) {
			if err := t.fam.pending.Delete(b, pendingKey(nil, o, a)); err != nil {
				return nil, err
			}
		}
		cleared = append(cleared, o)
	}
	for c, os := range byChunk {
		if err := t.fam.active.Merge(b, activeKey(nil, c), followersOperand(nil, os, c)); err != nil {
			return nil, err
		}
	}
	if next > maxOrd {
		x.cur.phase, x.cur.next = 1, 0
	}
	if err := x.commit(false); err != nil {
		return nil, err
	}
	// NB: before the users' locks go: a rebuild waiting for one adds its
	// user back after this, and a follow made after that rebuild adds a
	// pending mark that a later pendingClear would drop from memory only.
	t.pushRemove(cleared)
	for _, o := range cleared {
		t.pendingClear(o)
	}
	return cleared, nil
}

// dropInboxChunk is one chunk of phase 1: the next ChunkSize inbox owners,
// the inboxes of those with a zero read mark dropped. It reports whether
// that was the last chunk.
func (x *expiry) dropInboxChunk() (fin bool, err error) {
	ords, next, err := x.t.inboxOwners(x.cur.next, x.cfg.ChunkSize)
	if err != nil {
		return false, err
	}
	cands, candOrds, err := x.candidates(ords, "inbox of ordinal %d", func(read uint64) bool { return read == 0 })
	if err != nil {
		return false, err
	}
	x.cur.next = next
	fin = next > maxOrd
	return fin, x.dropInboxes(cands, candOrds, fin)
}

// dropInboxes, under the users' locks, drops the inbox of each candidate
// whose read mark is still zero, and commits with the cursor if anything
// was dropped or this is the last chunk.
func (x *expiry) dropInboxes(cands []uint64, candOrds []uint32, fin bool) error {
	if len(cands) > 0 {
		unlock := x.t.lockUsers(cands)
		defer unlock()
		for i, id := range cands {
			read, err := x.read(id)
			if err != nil {
				return err
			}
			if read == 0 {
				if err := x.t.fam.inbox.Delete(x.b, inboxKey(nil, candOrds[i])); err != nil {
					return err
				}
			}
		}
	}
	if !x.b.Empty() || fin {
		return x.commit(fin)
	}
	return nil
}

// activeMembers returns up to n ordinals of the push set from ordinal from
// on, and where the next call starts (above maxOrd: the end).
func (t *Timeline) activeMembers(from uint64, n int) ([]uint32, uint64, error) {
	if from > maxOrd {
		return nil, from, nil
	}
	it, err := t.fam.active.NewIter(&store.IterOptions{Lower: activeKey(nil, chunkOf(uint32(from)))})
	if err != nil {
		return nil, 0, err
	}
	var out []uint32
	for it.Next() {
		bm, _, err := store.DecodeRoaring(it.Value())
		if err != nil {
			it.Close()
			return nil, 0, err
		}
		c := binary.BigEndian.Uint16(it.Key()[1:])
		bi := bm.Iterator()
		bi.AdvanceIfNeeded(uint32(max(from, uint64(sentinel(c))+1)))
		for bi.HasNext() {
			o := bi.Next()
			if o == sentinel(c) {
				continue
			}
			out = append(out, o)
			if len(out) == n {
				return out, uint64(o) + 1, closeIter(it)
			}
		}
	}
	return out, maxOrd + 1, closeIter(it)
}

// inboxOwners returns up to n ordinals that have an inbox, from ordinal
// from on, and where the next call starts (above maxOrd: the end).
func (t *Timeline) inboxOwners(from uint64, n int) ([]uint32, uint64, error) {
	if from > maxOrd {
		return nil, from, nil
	}
	it, err := t.fam.inbox.NewIter(&store.IterOptions{Lower: inboxKey(nil, uint32(from))})
	if err != nil {
		return nil, 0, err
	}
	var out []uint32
	for it.Next() {
		o := binary.BigEndian.Uint32(it.Key()[1:])
		out = append(out, o)
		if len(out) == n {
			return out, uint64(o) + 1, closeIter(it)
		}
	}
	return out, maxOrd + 1, closeIter(it)
}

// activeSet returns the push set (for Check and tests).
func (t *Timeline) activeSet() (*roaring.Bitmap, error) {
	all := roaring.New()
	var derr error
	err := t.scan(t.fam.active, nil, func(k, v []byte) bool {
		bm, _, err := store.DecodeRoaring(v)
		if err != nil {
			derr = err
			return false
		}
		bm.Remove(sentinel(binary.BigEndian.Uint16(k[1:])))
		all.Or(bm)
		return true
	})
	if derr != nil {
		return nil, derr
	}
	return all, err
}

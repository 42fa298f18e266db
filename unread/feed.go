package unread

// Feed unread: the new posts of the accounts a user follows.
//
//	unread(u) = Σ over u's current followees f of max(0, posts(f) − base(u, f))
//
// where base(u, f) is f's post count at u's last reset or at the moment u
// followed f, whichever is later. The snapshot {f → base} is one value per
// user in family unread_feed, changed only by merge operands (snapshot.go
// says why and how they stay exact under concurrency); a read decodes it
// (or finds it in the snapshot cache, cache.go) and reads every followee's
// post count in one batched read of the users counter.

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sync"

	"github.com/tallydb/tally/store"
)

func feedKey(dst []byte, user uint64) []byte {
	return binary.BigEndian.AppendUint64(append(dst, prefixFeed), user)
}

// feedScratch holds the buffers of one Feed call.
type feedScratch struct {
	gen   []uint64
	ids   []uint64
	bases []uint64
	posts []uint64
	val   []byte
	key   []byte
}

func (x *Unread) getScratch() *feedScratch {
	if sc, ok := x.scratch.Get().(*feedScratch); ok {
		return sc
	}
	return &feedScratch{gen: make([]uint64, 0, 1), key: make([]byte, 0, 9),
		ids: make([]uint64, 0, 256), bases: make([]uint64, 0, 256), posts: make([]uint64, 0, 256)}
}

func (x *Unread) putScratch(sc *feedScratch) {
	if cap(sc.posts) > 1<<16 {
		sc.posts, sc.ids, sc.bases = nil, nil, nil
	}
	if cap(sc.val) > 1<<16 {
		sc.val = nil
	}
	x.scratch.Put(sc)
}

// gen returns user's snapshot operation count from the feed counter.
func (x *Unread) gen(user uint64, sc *feedScratch) (uint64, error) {
	v, err := x.feed.Get(user, sc.gen[:0])
	sc.gen = v
	if err != nil {
		return 0, err
	}
	return v[0], nil
}

// loadSnapshot reads and decodes user's snapshot from Pebble.
func (x *Unread) loadSnapshot(user uint64, sc *feedScratch) (*snapshot, bool, error) {
	sc.key = feedKey(sc.key[:0], user)
	v, ok, err := x.feedFam.Get(sc.key, sc.val[:0])
	sc.val = v
	if err != nil || !ok {
		return nil, false, err
	}
	s, err := decodeStored(v)
	if err != nil {
		return nil, false, fmt.Errorf("%w: unread feed snapshot of user %d: %v", store.ErrCorrupt, user, err)
	}
	return s, true, nil
}

// view is a user's snapshot as a read needs it.
type view struct {
	found bool        // the user has a snapshot value
	init  bool        // its membership is the follow graph's
	e     *cacheEntry // live followees and bases (nil: none)
}

// snapshotView returns user's snapshot: from the cache if its gen is
// current, else from Pebble (then cached, once initialized).
func (x *Unread) snapshotView(user uint64, sc *feedScratch) (view, error) {
	sgen := x.db.Generation() // before the reads: see cacheEntry.sgen
	gen, err := x.gen(user, sc)
	if err != nil {
		return view{}, err
	}
	if gen == 0 {
		// No operation ever committed: no snapshot. In a complete store
		// the user follows nobody.
		return view{init: x.complete}, nil
	}
	if e := x.cache.get(user, gen, sgen); e != nil {
		return view{found: true, init: true, e: e}, nil
	}
	sc.key = feedKey(sc.key[:0], user)
	v, ok, err := x.feedFam.Get(sc.key, sc.val[:0])
	sc.val = v
	if err != nil {
		return view{}, err
	}
	if !ok {
		// The family's half of a batch is visible before its counter half,
		// so a counted operation's value is always there.
		return view{}, fmt.Errorf("%w: unread: user %d counts %d feed operations but has no snapshot", store.ErrCorrupt, user, gen)
	}
	e, init, err := decodeView(v, user, gen)
	if err != nil {
		return view{}, fmt.Errorf("%w: unread feed snapshot of user %d: %v", store.ErrCorrupt, user, err)
	}
	if init {
		e.sgen = sgen
		x.cache.put(e)
	}
	return view{found: true, init: init, e: e}, nil
}

// Feed returns user's feed unread count: the posts of the accounts user
// follows published since user's last FeedReset or since user followed
// them, whichever is later (unpublished ones no longer count). A user whose
// snapshot is not initialized yet (their follows predate unread; see the
// package doc) is initialized first, at the current post counts.
func (x *Unread) Feed(user uint64) (uint64, error) {
	if x.graph == nil {
		return 0, ErrNoGraph
	}
	sc := x.getScratch()
	defer x.putScratch(sc)
	for attempt := 0; attempt < 4; attempt++ {
		v, err := x.snapshotView(user, sc)
		if err != nil {
			return 0, err
		}
		if !v.init {
			st, err := x.reset(user, true)
			if err != nil {
				return 0, err
			}
			if st == resetNothing {
				return 0, nil // follows nobody: nothing to snapshot
			}
			continue
		}
		if v.e == nil || v.e.live == 0 {
			return 0, nil
		}
		return x.sum(v.e, sc)
	}
	return 0, fmt.Errorf("unread: feed of user %d: snapshot still not initialized after 4 attempts", user)
}

// sum reads the post counts of e's followees and adds what is above each
// base.
func (x *Unread) sum(e *cacheEntry, sc *feedScratch) (uint64, error) {
	sc.ids, sc.bases = e.followees(sc.ids, sc.bases)
	posts, err := x.graph.PostCounts(sc.ids, sc.posts)
	sc.posts = posts
	if err != nil {
		return 0, err
	}
	if len(posts) != len(sc.ids) {
		return 0, fmt.Errorf("unread: post counts: %d counts for %d authors", len(posts), len(sc.ids))
	}
	var n uint64
	for i, p := range posts {
		if b := sc.bases[i]; p > b {
			n += p - b
		}
	}
	return n, nil
}

// FeedReset marks everything in user's feed read: every followee's base
// becomes its current post count. It writes one merge operand (nothing if
// no base would change).
func (x *Unread) FeedReset(user uint64) error {
	if x.graph == nil {
		return ErrNoGraph
	}
	_, err := x.reset(user, false)
	return err
}

// Outcomes of reset.
type resetStatus int

const (
	resetNothing     resetStatus = iota // nothing to write (no followees, or no base changes)
	resetWrote                          // a reset operation committed
	resetInitialized                    // initOnly, and the snapshot was already initialized
)

func (x *Unread) resetLock(user uint64) *sync.Mutex {
	return &x.resetLocks[(user*0x9E3779B97F4A7C15)>>56]
}

// reset reads user's snapshot, followees and post counts at one moment
// (db.View: no batch commits meanwhile) and commits a reset operation
// carrying g0, the snapshot's operation count at that moment. With
// initOnly it does nothing to an initialized snapshot (the first read of a
// user whose snapshot is not initialized).
//
// NB: the commit happens after View returns; follows and unfollows that
// commit in between are not lost, because the operation only changes
// entries no operation after g0 changed (snapshot.go).
func (x *Unread) reset(user uint64, initOnly bool) (resetStatus, error) {
	mu := x.resetLock(user)
	mu.Lock()
	defer mu.Unlock()
	// The operation is decided on what the View below reads: it must not
	// commit after a store reopen discarded part of that (reopen.go).
	sgen := x.db.Generation()
	sc := x.getScratch()
	defer x.putScratch(sc)
	var op feedOp
	status := resetNothing
	err := x.db.View(func() error {
		v, err := x.snapshotView(user, sc)
		if err != nil {
			return err
		}
		var ids, old []uint64
		switch {
		case v.init && initOnly:
			status = resetInitialized
			return nil
		case v.init:
			if v.e == nil || v.e.live == 0 {
				return nil
			}
			ids, old = v.e.followees(nil, nil)
		default:
			if err := x.graph.VisibleFollowees(user, func(f uint64) bool {
				ids = append(ids, f)
				return true
			}); err != nil {
				return fmt.Errorf("unread: followees of user %d: %w", user, err)
			}
			if !slices.IsSorted(ids) {
				slices.Sort(ids)
			}
			ids = slices.Compact(ids)
			if len(ids) == 0 && !v.found {
				return nil
			}
		}
		bases, err := x.graph.PostCounts(ids, nil)
		if err != nil {
			return err
		}
		if len(bases) != len(ids) {
			return fmt.Errorf("unread: post counts: %d counts for %d authors", len(bases), len(ids))
		}
		if v.init && slices.Equal(bases, old) {
			return nil
		}
		op = feedOp{typ: opReset, fill: initOnly, ids: ids, bases: bases}
		if v.e != nil {
			op.g0 = v.e.n
		}
		status = resetWrote
		return nil
	})
	if err != nil || status != resetWrote {
		return status, err
	}
	if x.testHook != nil {
		x.testHook(user)
	}
	b := x.db.NewBatch()
	defer b.Close()
	b.SetGeneration(sgen)
	if initOnly {
		// A first read initializing a snapshot is not a replicated
		// command: it commits on the replica that serves the read
		// (store apply.go, SetLocal). FeedReset is.
		b.SetLocal()
	}
	if err := x.writeOp(b, user, &op); err != nil {
		return resetNothing, err
	}
	if err := b.Commit(); err != nil {
		return resetNothing, err
	}
	return resetWrote, nil
}

// writeOp adds op on user's snapshot to b, with the gen increment that
// invalidates cached copies when b commits.
func (x *Unread) writeOp(b *store.Batch, user uint64, op *feedOp) error {
	var kb [9]byte
	val := snapMerge.Frame(nil, appendOps(nil, op))
	if err := x.feedFam.Merge(b, feedKey(kb[:0], user), val); err != nil {
		return err
	}
	return b.Incr(FeedCounter, user, genColumn, 1)
}

// observer is unread's FollowObserver: it writes follow and unfollow
// operations into the follow graph's own batch, so each snapshot changes
// atomically with the edge.
type observer struct{ x *Unread }

func (o observer) Followed(b *store.Batch, user, followee, posts uint64) error {
	return o.x.writeOp(b, user, &feedOp{typ: opFollow, initIfNew: o.x.complete, f: followee, base: posts})
}

func (o observer) Unfollowed(b *store.Batch, user, followee uint64) error {
	return o.x.writeOp(b, user, &feedOp{typ: opUnfollow, initIfNew: o.x.complete, f: followee})
}

// FeedSnapshot describes a user's stored snapshot (for tools and tests).
type FeedSnapshot struct {
	Initialized bool
	Ops         uint64   // operations applied since the first
	Followees   []uint64 // ascending
	Bases       []uint64 // base of each followee
}

// Snapshot returns user's feed snapshot as stored (not through the cache),
// and whether there is one.
func (x *Unread) Snapshot(user uint64) (FeedSnapshot, bool, error) {
	sc := x.getScratch()
	defer x.putScratch(sc)
	s, ok, err := x.loadSnapshot(user, sc)
	if err != nil || !ok {
		return FeedSnapshot{}, false, err
	}
	fs := FeedSnapshot{Initialized: s.init, Ops: s.n}
	for _, e := range s.entries {
		if !e.dead {
			fs.Followees = append(fs.Followees, e.id)
			fs.Bases = append(fs.Bases, e.base)
		}
	}
	return fs, true, nil
}

package likes

// Transitions: like, unlike, dislike, undislike, and owner changes.
//
// What must stay true: an item's counts equal the sizes of its like and
// dislike sets, its board keys agree with its counts (and the in-memory
// histograms with the board keys, hist.go),
// and every user's state agrees with the sets and the user list, through
// concurrent writers and crashes.
//
// Atomicity comes from the store: everything one transition changes (the
// state, the set member, the user-list entry, the counter row, the board
// keys and day scores, the owner's received total) is one store batch, so
// it commits whole or not at all; the batch's histogram moves are applied
// to memory as it commits (store.Batch.OnApply, under the store's commit
// lock), or not at all.
//
// Exactness under concurrency needs more: a transition reads before it
// writes (the previous state, to be idempotent; the previous count, to
// delete the old board key). Two transitions of one item must therefore
// not interleave between their reads and their commit. Every transition
// of an item goes through the item's stripe, hash(business, item) of
// Options.Stripes, and a stripe runs one commit at a time. The simplest
// form, a mutex per stripe held across read and commit, serializes a
// popular item's likes at one fsync each under SyncAlways. So a stripe combines
// instead: a transition queues itself on its stripe; if no commit of the
// stripe is running it becomes the leader, takes the whole queue (up to
// Options.MaxGroup), applies the transitions in order against an overlay
// (each one sees the ones before it), commits the net effect as one batch,
// answers every waiter, and hands leadership to the first transition that
// queued meanwhile. A hot item's likes then share fsyncs, as concurrent
// commits of different stripes already do in Pebble's group commit.
// BenchmarkLikeHotItem (16 goroutines, one item, SyncAlways, a busy 2-core
// machine): 1.2k likes/s with groups of one (the mutex), 6.3k likes/s
// combined (8.5 likes a commit).
//
// Keys shared between items (an owner's received total) are only ever
// changed blindly (counter Incr), so they need no stripe; nor do the
// in-memory histograms, changed by additions under the store's commit
// lock. Everything read before a write is per item
// (counts, day scores, board keys, the item record, a list set converted
// to roaring) or per (item, user) (state, user-list entry): owned by the
// item's stripe. Roaring chunks are changed blindly too (MergeRoaring
// operands), but only by the item's stripe, whose state reads make the
// operands exact.
// Ordinals are per user and shared: ordAlloc serializes their allocation.

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/tallydb/tally/store"
)

// Result is the outcome of a transition.
type Result struct {
	Item uint64
	// State is the user's state on the item after the call.
	State State
	// Changed is false when the call changed nothing: a repeated like, an
	// unlike of an item the user does not like.
	Changed bool
	// Likes and Dislikes are the item's counts after the call.
	Likes, Dislikes uint64
}

type opKind uint8

const (
	opLike opKind = iota + 1
	opUnlike
	opDislike
	opUndislike
	opSetOwner
)

// request is one queued transition.
type request struct {
	kind              opKind
	biz               *business
	item, user, owner uint64
	ms                int64 // like time of a bulk-loaded like; 0: the group's now
	// prior is the state before the load, read ahead by a bulk load in
	// key order (hasPrior), so the group does not read it.
	prior    stateRec
	hasPrior bool
	res      Result
	err      error
	wake     chan bool // true: lead the next group; false: done
	// group is the leader's copy of the transitions it runs, kept with
	// the pooled request so a group takes no allocation.
	group []*request
}

var requestPool = sync.Pool{New: func() any { return &request{wake: make(chan bool, 1)} }}

// stripe serializes the transitions of the items that hash to it.
type stripe struct {
	mu    sync.Mutex
	busy  bool       // a leader is running a group
	queue []*request // guarded by mu
	// cache holds the item record and latest day score of items of this
	// stripe, read by the leader only. Every write to those keys goes
	// through the stripe's leader (or a Load, which holds off leaders
	// and clears the caches), so an entry is always what the store holds:
	// a popular item's likes then read neither from Pebble.
	cache [stripeCache]cacheEntry
	_     [24]byte // keep neighbouring stripes' mutexes apart
}

// stripeCache is the number of items a stripe caches, direct-mapped.
const stripeCache = 32

type cacheEntry struct {
	valid    bool
	biz      uint32
	item     uint64
	rec      itemRec
	hasDay   bool
	day      uint32
	dayScore int64
}

// entry returns the cache slot of (biz, item). The slot comes from the
// high bits of itemHash, which the stripe's index (its low bits) leaves
// independent. NB: a slot of item%stripeCache, as it was, put almost every
// item of a stripe in one slot: snowflake ids end in a sequence that is
// mostly 0.
func (s *stripe) entry(biz uint32, item uint64) *cacheEntry {
	return &s.cache[(itemHash(biz, item)>>40)%stripeCache]
}

// cached returns the cache entry of (biz, item), or nil.
func (s *stripe) cached(biz uint32, item uint64) *cacheEntry {
	e := s.entry(biz, item)
	if e.valid && e.biz == biz && e.item == item {
		return e
	}
	return nil
}

// clearCaches empties every stripe's cache (Load, which writes around
// them, calls it holding loadMu).
func (l *Likes) clearCaches() {
	for i := range l.stripes {
		clear(l.stripes[i].cache[:])
	}
}

type chunkID struct {
	kind  byte
	chunk uint32
}

// itemHash mixes (biz, item): its low bits pick the stripe, its high
// bits the stripe's cache slot.
func itemHash(biz uint32, item uint64) uint64 {
	h := item*0x9E3779B97F4A7C15 ^ uint64(biz)*0xC2B2AE3D27D4EB4F
	h ^= h >> 29
	h *= 0xBF58476D1CE4E5B9
	h ^= h >> 32
	return h
}

func (l *Likes) stripeOf(biz uint32, item uint64) *stripe {
	return &l.stripes[itemHash(biz, item)&uint64(len(l.stripes)-1)]
}

// Like records that user likes item of business (replacing a dislike),
// crediting owner (0: none named) with the like. The business must have
// been declared (AddBusiness, or a Load that named it; ErrUnknownBusiness
// otherwise) unless Options.CreateBusinesses is set. A repeated like
// changes nothing and reports
// Changed=false. The item's owner is set by the first like that names one;
// naming another owner later fails with ErrOwnerMismatch (see SetOwner).
func (l *Likes) Like(business string, item, user, owner uint64) (Result, error) {
	return l.transition(opLike, business, item, user, owner)
}

// Unlike removes user's like of item. Unliking an item the user does not
// like changes nothing (Changed=false).
func (l *Likes) Unlike(business string, item, user uint64) (Result, error) {
	return l.transition(opUnlike, business, item, user, 0)
}

// Dislike records that user dislikes item (replacing a like).
func (l *Likes) Dislike(business string, item, user uint64) (Result, error) {
	return l.transition(opDislike, business, item, user, 0)
}

// Undislike removes user's dislike of item.
func (l *Likes) Undislike(business string, item, user uint64) (Result, error) {
	return l.transition(opUndislike, business, item, user, 0)
}

// SetOwner makes owner (0: nobody) the owner of item: the item's likes move
// from the previous owner's received total to owner's, atomically. The
// returned Result has the item's counts; Changed reports whether the owner
// changed.
func (l *Likes) SetOwner(business string, item, owner uint64) (Result, error) {
	return l.transition(opSetOwner, business, item, 0, owner)
}

func (l *Likes) transition(kind opKind, bizName string, item, user, owner uint64) (Result, error) {
	var b *business
	var err error
	switch {
	case (kind == opLike || kind == opDislike || kind == opSetOwner) && l.opts.CreateBusinesses:
		b, err = l.ensureBusiness(bizName, l.opts.Business)
	default:
		b, err = l.lookup(bizName)
	}
	if err != nil {
		return Result{}, err
	}
	if b == nil && (kind == opLike || kind == opDislike || kind == opSetOwner) {
		return Result{}, l.unknownBusiness(bizName)
	}
	if b == nil {
		// Nothing to undo in a business that does not exist.
		return Result{Item: item}, nil
	}
	if owner != 0 {
		if err := l.ensureReceived(); err != nil {
			return Result{}, err
		}
	}
	r := requestPool.Get().(*request)
	r.kind, r.biz, r.item, r.user, r.owner, r.ms = kind, b, item, user, owner, 0
	r.res, r.err = Result{}, nil
	l.submit(r)
	res, err := r.res, r.err
	r.biz = nil
	requestPool.Put(r)
	return res, err
}

// submit queues r on its stripe and returns once r is committed (or
// failed), leading groups while it is the stripe's leader.
func (l *Likes) submit(r *request) {
	s := l.stripeOf(r.biz.id, r.item)
	s.mu.Lock()
	s.queue = append(s.queue, r)
	if s.busy {
		s.mu.Unlock()
		l.stats.waits.Add(1)
		if lead := <-r.wake; !lead {
			return
		}
	} else {
		s.busy = true
		s.mu.Unlock()
	}
	// r leads. r is at the head of the queue (the first to arrive at an
	// idle stripe, or handed the lead as the head), so its group is the
	// first MaxGroup queued transitions.
	s.mu.Lock()
	n := min(len(s.queue), l.opts.MaxGroup)
	group := append(r.group[:0], s.queue[:n]...)
	rest := copy(s.queue, s.queue[n:])
	clear(s.queue[rest:])
	s.queue = s.queue[:rest]
	s.mu.Unlock()

	l.runGroup(s, group)

	s.mu.Lock()
	var next *request
	if len(s.queue) > 0 {
		next = s.queue[0]
	} else {
		s.busy = false
	}
	s.mu.Unlock()
	for _, g := range group[1:] {
		g.wake <- false
	}
	if next != nil {
		next.wake <- true
	}
	clear(group) // the others go back to the pool now
	r.group = group[:0]
}

// group is the overlay of one commit group: every item and (item, user)
// its transitions touch, read once and updated in order.
type group struct {
	l      *Likes
	s      *stripe
	b      *store.Batch // while committing
	gen    uint64       // store generation the group reads in
	nowMs  int64
	today  uint32
	keep   uint32 // first kept day
	days   bool   // daily boards on
	items  []*itemAcc
	byItem map[itemKey]*itemAcc
	buf    []byte
	val    []byte
	dayBuf []uint32
	moves  []membership // emitItem's, reused
	edits  []chunkEdit  // roaringMoves', reused
	// roaringMoves' operand sets, reused
	addBM, rmBM *roaring.Bitmap
	// ordinals handed out to this group that were not in the store yet:
	// written with the group's batch.
	fresh   []uint64
	freshOK map[uint64]bool
	// bulk is set for a group of a bulk load (load.go): counts come from
	// and go to it instead of the counter.
	bulk *bulkLoad
	// bulkOrds: the load's group allocated ordinals (ordAlloc.allocate),
	// which its batch writes.
	bulkOrds bool
	// hmoves are the board moves of the batch, applied to the in-memory
	// histograms by onApply (bound to this group once: a pooled group
	// registers it without allocating) when the batch commits (hist.go).
	hmoves  []histMove
	onApply func()
	// accumulators of earlier groups, for reuse (pooled groups)
	freeItems  []*itemAcc
	freeStates []*stateAcc
}

// applyHist applies the group's board moves to the histograms: the
// OnApply of its batch, under the store's commit lock.
func (g *group) applyHist() { g.l.hist().applyMoves(g.hmoves) }

type itemKey struct {
	biz  uint32
	item uint64
}

// itemAcc is one item in a group.
type itemAcc struct {
	b    *business
	item uint64
	err  error // reading the item failed: its transitions fail

	rec0, rec       itemRec
	likes0, likes   uint64
	dislikes0, disl uint64
	dayDelta        map[uint32]int64 // kept days only
	// the newest day whose score the group wrote, for the stripe's cache
	lastDay      uint32
	lastDayScore int64
	hasLastDay   bool
	states       []*stateAcc
	byUser       map[uint64]*stateAcc
}

// stateAcc is one (item, user) in a group.
type stateAcc struct {
	user  uint64
	s0, s stateRec
}

var groupPool = sync.Pool{New: func() any {
	g := &group{byItem: map[itemKey]*itemAcc{}, buf: make([]byte, 0, 64), val: make([]byte, 0, 32)}
	g.onApply = g.applyHist
	return g
}}

func (l *Likes) newGroup(s *stripe) *group {
	now := l.opts.Now().UnixMilli()
	g := groupPool.Get().(*group)
	g.l, g.s, g.nowMs, g.today = l, s, now, dayOf(now)
	g.keep, g.days = l.firstKeptDay(g.today)
	g.gen = l.db.Generation() // before any read: see commit
	return g
}

// free returns g and its accumulators for reuse.
func (g *group) free() {
	for _, it := range g.items {
		clear(it.byUser)
		clear(it.dayDelta)
		for _, st := range it.states {
			g.freeStates = append(g.freeStates, st)
		}
		*it = itemAcc{byUser: it.byUser, dayDelta: it.dayDelta, states: it.states[:0]}
		g.freeItems = append(g.freeItems, it)
	}
	clear(g.byItem)
	clear(g.freshOK)
	*g = group{byItem: g.byItem, buf: g.buf[:0], val: g.val[:0], items: g.items[:0], freshOK: g.freshOK,
		freeItems: g.freeItems, freeStates: g.freeStates, dayBuf: g.dayBuf[:0], moves: g.moves[:0], edits: g.edits[:0],
		addBM: g.addBM, rmBM: g.rmBM, hmoves: g.hmoves[:0], onApply: g.onApply}
	groupPool.Put(g)
}

// runGroup applies and commits one group of transitions.
func (l *Likes) runGroup(s *stripe, reqs []*request) {
	l.loadMu.RLock()
	defer l.loadMu.RUnlock()
	l.stats.groups.Add(1)
	l.stats.ops.Add(int64(len(reqs)))
	for {
		m := l.stats.maxGroup.Load()
		if int64(len(reqs)) <= m || l.stats.maxGroup.CompareAndSwap(m, int64(len(reqs))) {
			break
		}
	}
	g := l.newGroup(s)
	defer g.free()
	for _, r := range reqs {
		g.apply(r)
	}
	if err := g.commit(); err != nil {
		for _, r := range reqs {
			if r.err == nil {
				r.res, r.err = Result{Item: r.item}, err
			}
		}
	}
}

// item returns the group's accumulator of an item, reading its record and
// counts on first use.
func (g *group) item(b *business, item uint64) *itemAcc {
	k := itemKey{b.id, item}
	if it := g.byItem[k]; it != nil {
		return it
	}
	var it *itemAcc
	if n := len(g.freeItems); n > 0 {
		it, g.freeItems = g.freeItems[n-1], g.freeItems[:n-1]
		it.b, it.item = b, item
	} else {
		it = &itemAcc{b: b, item: item}
	}
	g.byItem[k] = it
	g.items = append(g.items, it)
	var rec itemRec
	if e := g.s.cached(b.id, item); e != nil && g.bulk == nil {
		rec = e.rec
	} else {
		var err error
		if rec, err = g.l.readItem(b.id, item, &g.buf, &g.val); err != nil {
			it.err = err
			return it
		}
	}
	it.rec0, it.rec = rec, rec
	if g.bulk != nil {
		if c, ok := g.bulk.counts[item]; ok {
			it.likes0, it.likes = c.Likes, c.Likes
			it.dislikes0, it.disl = c.Dislikes, c.Dislikes
			return it
		}
	}
	var vals [2]uint64
	got, err := b.c.Get(item, vals[:0])
	if err != nil {
		it.err = err
		return it
	}
	it.likes0, it.likes = got[0], got[0]
	it.dislikes0, it.disl = got[1], got[1]
	return it
}

// readItem returns an item's record (the zero record if it has none).
func (l *Likes) readItem(biz uint32, item uint64, kbuf, vbuf *[]byte) (itemRec, error) {
	*kbuf = appendItemKey((*kbuf)[:0], biz, item)
	if !l.filter.mayContain(*kbuf) {
		return itemRec{}, nil
	}
	l.stats.itemGets.Add(1)
	v, ok, err := l.fam.item.Get(*kbuf, (*vbuf)[:0])
	*vbuf = v
	if err != nil || !ok {
		return itemRec{}, err
	}
	rec, err := decodeItem(v)
	if err != nil {
		return itemRec{}, fmt.Errorf("%w: %v", store.ErrCorrupt, err)
	}
	return rec, nil
}

// find returns the accumulator of user, or nil.
func (it *itemAcc) find(user uint64) *stateAcc {
	if it.byUser != nil {
		return it.byUser[user]
	}
	for _, st := range it.states {
		if st.user == user {
			return st
		}
	}
	return nil
}

// state returns the group's accumulator of (item, user), reading the
// state on first use.
func (g *group) state(it *itemAcc, r *request) (*stateAcc, error) {
	user := r.user
	if st := it.find(user); st != nil {
		return st, nil
	}
	s := r.prior
	if !r.hasPrior {
		var err error
		if s, err = g.l.readState(it.b.id, user, it.item, &g.buf, &g.val); err != nil {
			return nil, err
		}
	}
	var st *stateAcc
	if n := len(g.freeStates); n > 0 {
		st, g.freeStates = g.freeStates[n-1], g.freeStates[:n-1]
		*st = stateAcc{user: user, s0: s, s: s}
	} else {
		st = &stateAcc{user: user, s0: s, s: s}
	}
	it.states = append(it.states, st)
	// A map only once the item has many users in the group (a scan is
	// cheaper below that).
	switch {
	case it.byUser != nil:
		it.byUser[user] = st
	case len(it.states) > 8:
		it.byUser = make(map[uint64]*stateAcc, 2*len(it.states))
		for _, x := range it.states {
			it.byUser[x.user] = x
		}
	}
	return st, nil
}

func (l *Likes) readState(biz uint32, user, item uint64, kbuf, vbuf *[]byte) (stateRec, error) {
	*kbuf = appendStateKey((*kbuf)[:0], biz, user, item)
	if !l.filter.mayContain(*kbuf) {
		return stateRec{}, nil
	}
	l.stats.stateGets.Add(1)
	v, ok, err := l.fam.state.Get(*kbuf, (*vbuf)[:0])
	*vbuf = v
	if err != nil || !ok {
		return stateRec{}, err
	}
	s, err := decodeState(v)
	if err != nil {
		return stateRec{}, fmt.Errorf("%w: %v", store.ErrCorrupt, err)
	}
	return s, nil
}

// apply runs one transition against the overlay and sets r's result (or
// error: then it changed nothing).
func (g *group) apply(r *request) {
	it := g.item(r.biz, r.item)
	if it.err != nil {
		r.err = it.err
		return
	}
	counts := func(s State, changed bool) Result {
		return Result{Item: r.item, State: s, Changed: changed, Likes: it.likes, Dislikes: it.disl}
	}
	switch r.kind {
	case opSetOwner:
		changed := it.rec.owner != r.owner
		it.rec.owner = r.owner
		r.res = counts(None, changed)
		return
	case opLike:
		if r.owner != 0 && it.rec.owner != 0 && it.rec.owner != r.owner {
			r.err = fmt.Errorf("%w: item %d of %s is owned by %d, not %d", ErrOwnerMismatch, r.item, r.biz.name, it.rec.owner, r.owner)
			return
		}
	}
	st, err := g.state(it, r)
	if err != nil {
		r.err = err
		return
	}
	old, nw := st.s, st.s
	now := g.nowMs
	if r.ms != 0 {
		now = r.ms
	}
	switch r.kind {
	case opLike:
		if old.state != Liked {
			nw = stateRec{state: Liked, ms: now}
		}
	case opUnlike:
		if old.state == Liked {
			nw = stateRec{}
		}
	case opDislike:
		if old.state != Disliked {
			nw = stateRec{state: Disliked, ms: now}
		}
	case opUndislike:
		if old.state == Disliked {
			nw = stateRec{}
		}
	}
	changed := nw != old
	if changed {
		switch old.state {
		case Liked:
			if it.likes == 0 {
				r.err = fmt.Errorf("%w: likes: item %d of %s likes count 0 below its set", store.ErrCorrupt, r.item, r.biz.name)
				return
			}
			it.likes--
			g.addDay(it, old.ms, -1)
		case Disliked:
			if it.disl == 0 {
				r.err = fmt.Errorf("%w: likes: item %d of %s dislikes count 0 below its set", store.ErrCorrupt, r.item, r.biz.name)
				return
			}
			it.disl--
		}
		switch nw.state {
		case Liked:
			it.likes++
			g.addDay(it, nw.ms, +1)
		case Disliked:
			it.disl++
		}
		st.s = nw
	}
	if r.kind == opLike && r.owner != 0 && it.rec.owner == 0 {
		it.rec.owner = r.owner
	}
	r.res = counts(st.s.state, changed)
}

// addDay adds delta to the day board of the like made at ms, if that day
// is kept.
func (g *group) addDay(it *itemAcc, ms int64, delta int64) {
	d := dayOf(ms)
	if !g.days || d < g.keep {
		return
	}
	if it.dayDelta == nil {
		it.dayDelta = map[uint32]int64{}
	}
	it.dayDelta[d] += delta
}

// commit writes the group's net effect as one batch.
func (g *group) commit() (err error) {
	dup := false
	defer func() {
		if g.bulkOrds && (err != nil || dup) {
			g.l.ords.noteGap() // a load's ordinals its batch did not write
			g.bulk.unwritten = true
		}
	}()
	b := g.l.db.NewBatch()
	defer b.Close()
	// The group read records, counts and caches in generation g.gen: after
	// a store reopen (a failure healed) they may hold writes it discarded.
	b.SetGeneration(g.gen)
	g.b = b
	for _, it := range g.items {
		if it.err != nil {
			continue
		}
		if err := g.emitItem(b, it); err != nil {
			g.release(false)
			return err
		}
	}
	if b.Empty() {
		g.release(true)
		return nil
	}
	// NB: the prune is decided from memory (pruneDay: when this node last
	// enqueued one, New included), so replicas of one store may enqueue it
	// with different entries' batches, or not at all. That is safe: the
	// job is node-local work (its progress commits are never an entry's,
	// store apply.go), riding in the batch changes neither the batch's
	// other writes nor its place among the entry's commits, and what the
	// job deletes, the day boards before the first kept day of this
	// group's day, is what no read returns (keptDay refuses those days by
	// the same clock, which only moves forward along the log), no write
	// adds to (addDay) and Check does not look at. A replica that has not
	// pruned yet only holds more dead boards.
	if len(g.hmoves) > 0 {
		b.OnApply(g.onApply)
	}
	prune := g.days && g.bulk == nil && g.today > g.l.pruneDay.Load()
	if prune {
		if err := g.l.enqueuePrune(b, g.today); err != nil {
			g.release(false)
			return err
		}
	}
	err = b.Commit()
	if dup = err == nil && b.Duplicate(); dup {
		// A re-apply of a replicated entry (store apply.go): the store
		// holds this commit's effects, or what the entry's later commands
		// made of them (one entry may be a pipeline), and this commit
		// changed nothing. Nor may memory change: the group's ordinals
		// go back to the allocator, which hands them out again exactly
		// as a replica that never restarted does; its items leave the
		// cache (the group computed them from a state the entry moved
		// past); no prune was queued (TestReappliedEntryKeepsCaches,
		// TestReappliedEntryKeepsOrdinals, TestReappliedEntryCommitsNoPrune).
		if len(g.fresh) > 0 {
			g.l.ords.unuse(g.fresh)
			g.fresh = nil
		}
		g.updateCache(false)
		return nil
	}
	g.release(err == nil)
	if g.bulk == nil {
		g.updateCache(err == nil)
	}
	if err != nil {
		return err
	}
	if prune {
		g.l.notePrune(g.today)
	}
	return nil
}

// updateCache records what the group committed in its stripe's cache, or
// forgets the items it touched if the commit failed.
func (g *group) updateCache(committed bool) {
	for _, it := range g.items {
		e := g.s.entry(it.b.id, it.item)
		if !committed || it.err != nil {
			if e.valid && e.biz == it.b.id && e.item == it.item {
				*e = cacheEntry{}
			}
			continue
		}
		prev := *e
		*e = cacheEntry{valid: true, biz: it.b.id, item: it.item, rec: it.rec}
		switch {
		case it.hasLastDay:
			e.hasDay, e.day, e.dayScore = true, it.lastDay, it.lastDayScore
		case prev.valid && prev.biz == it.b.id && prev.item == it.item && prev.hasDay:
			e.hasDay, e.day, e.dayScore = true, prev.day, prev.dayScore
		}
	}
}

// release settles the ordinals the group took.
func (g *group) release(committed bool) {
	if len(g.fresh) > 0 {
		g.l.ords.done(g.fresh, committed)
		g.fresh = nil
	}
}

// membership is one user's move between an item's sets.
type membership struct {
	user     uint64
	from, to State
}

// emitItem adds one item's net changes to b.
func (g *group) emitItem(b *store.Batch, it *itemAcc) error {
	l := g.l
	f := &l.fam
	biz := it.b.id
	moves := g.moves[:0]
	defer func() { g.moves = moves[:0] }()
	for _, st := range it.states {
		if st.s == st.s0 {
			continue
		}
		key := appendStateKey(g.buf[:0], biz, st.user, it.item)
		var err error
		if st.s.state == None {
			err = f.state.Delete(b, key)
		} else {
			l.filter.add(key) // before the commit: see keyfilter.go
			err = f.state.Put(b, key, appendState(g.val[:0], st.s))
		}
		if err != nil {
			return err
		}
		if st.s0.state == Liked {
			if err := f.user.Delete(b, appendUserKey(g.buf[:0], biz, st.user, st.s0.ms, it.item)); err != nil {
				return err
			}
		}
		if st.s.state == Liked {
			if err := f.user.Put(b, appendUserKey(g.buf[:0], biz, st.user, st.s.ms, it.item), nil); err != nil {
				return err
			}
		}
		if st.s.state != st.s0.state {
			moves = append(moves, membership{st.user, st.s0.state, st.s.state})
		}
	}
	thr := uint64(l.cfg.roaringThreshold)
	convert := !it.rec.roaring && (it.likes >= thr || it.disl >= thr)
	switch {
	case convert:
		it.rec.roaring = true
		if err := g.convert(b, it, moves); err != nil {
			return err
		}
	case it.rec.roaring:
		if err := g.roaringMoves(b, it, moves); err != nil {
			return err
		}
	default:
		for _, m := range moves {
			if m.from != None {
				if err := f.set.Delete(b, appendSetKey(g.buf[:0], biz, it.item, kindOf(m.from), m.user)); err != nil {
					return err
				}
			}
			if m.to != None {
				if err := f.set.Put(b, appendSetKey(g.buf[:0], biz, it.item, kindOf(m.to), m.user), nil); err != nil {
					return err
				}
			}
		}
	}
	if g.bulk != nil {
		g.bulk.counts[it.item] = Counts{Likes: it.likes, Dislikes: it.disl}
		if it.likes != it.likes0 || it.disl != it.dislikes0 {
			g.bulk.changed[it.item] = true
		}
	} else if it.likes != it.likes0 || it.disl != it.dislikes0 {
		if err := b.Set(it.b.counter, it.item, it.likes, it.disl); err != nil {
			return err
		}
	}
	if err := l.moveReceived(b, it.rec0.owner, it.rec.owner, it.likes0, it.likes); err != nil {
		return err
	}
	if it.likes != it.likes0 {
		if err := l.moveScore(b, biz, dayAll, it.item, it.likes0, it.likes, &g.buf, &g.hmoves); err != nil {
			return err
		}
	}
	g.dayBuf = sortedDays(g.dayBuf[:0], it.dayDelta)
	for _, d := range g.dayBuf {
		delta := it.dayDelta[d]
		if delta == 0 {
			continue
		}
		key := appendDayScoreKey(g.buf[:0], biz, d, it.item)
		var old int64
		if e := g.s.cached(biz, it.item); e != nil && e.hasDay && e.day == d && g.bulk == nil {
			old = e.dayScore
		} else if l.filter.mayContain(key) {
			l.stats.dayGets.Add(1)
			var err error
			if old, err = l.readAdd(f.dayScore, key, &g.val); err != nil {
				return err
			}
		}
		nw := old + delta
		it.lastDay, it.lastDayScore, it.hasLastDay = d, nw, true
		if nw < 0 {
			return fmt.Errorf("%w: likes: day %d score of item %d would be %d", store.ErrCorrupt, d, it.item, nw)
		}
		var err error
		if nw == 0 {
			err = f.dayScore.Delete(b, key)
		} else {
			l.filter.add(key)
			err = f.dayScore.Put(b, key, store.AddOperand(g.val[:0], nw))
		}
		if err != nil {
			return err
		}
		if err := l.moveScore(b, biz, d, it.item, uint64(old), uint64(nw), &g.buf, &g.hmoves); err != nil {
			return err
		}
	}
	if it.rec != it.rec0 {
		key := appendItemKey(g.buf[:0], biz, it.item)
		if it.rec == (itemRec{}) {
			return f.item.Delete(b, key)
		}
		l.filter.add(key)
		return f.item.Put(b, key, appendItem(g.val[:0], it.rec))
	}
	return nil
}

func kindOf(s State) byte {
	if s == Liked {
		return kindLike
	}
	return kindDislike
}

// sortedDays appends the days of m to ds in order.
func sortedDays(ds []uint32, m map[uint32]int64) []uint32 {
	for d := range m {
		ds = append(ds, d)
	}
	slices.Sort(ds)
	return ds
}

// readAdd returns the sum of a MergeAdd key (0 if absent).
func (l *Likes) readAdd(f *store.Family, key []byte, vbuf *[]byte) (int64, error) {
	v, ok, err := f.Get(key, (*vbuf)[:0])
	*vbuf = v
	if err != nil || !ok {
		return 0, err
	}
	return store.DecodeAdd(v)
}

// moveScore moves item from score old to score nw on board day of biz: the
// board key, if the bucket changes (see bucketOf), and the move is added
// to moves for the in-memory histogram (hist.go), which the group's batch
// applies when it commits. Score 0 is on no board.
func (l *Likes) moveScore(b *store.Batch, biz, day uint32, item, old, nw uint64, buf *[]byte, moves *[]histMove) error {
	ob, nb := bucketOf(old), bucketOf(nw)
	if old == nw || old > 0 && nw > 0 && ob == nb {
		return nil // still in its bucket: the key stays
	}
	l.stats.boardMoves.Add(1)
	f := &l.fam
	m := histMove{id: boardID{biz, day}, from: ob, to: nb}
	if old > 0 {
		if err := f.board.Delete(b, appendBoardKey((*buf)[:0], biz, day, ob, item)); err != nil {
			return err
		}
		m.hasFrom = true
	}
	if nw > 0 {
		if err := f.board.Put(b, appendBoardKey((*buf)[:0], biz, day, nb, item), nil); err != nil {
			return err
		}
		m.hasTo = true
	}
	*moves = append(*moves, m)
	return nil
}

// moveReceived credits the item's likes to its owner: from likes0 under
// owner0 before the batch to likes under owner after it.
func (l *Likes) moveReceived(b *store.Batch, owner0, owner, likes0, likes uint64) error {
	if owner0 == owner {
		if owner == 0 || likes == likes0 {
			return nil
		}
		return b.Incr(ReceivedCounter, owner, ReceivedColumn, int64(likes)-int64(likes0))
	}
	if owner0 != 0 && likes0 > 0 {
		if err := b.Incr(ReceivedCounter, owner0, ReceivedColumn, -int64(likes0)); err != nil {
			return err
		}
	}
	if owner != 0 && likes > 0 {
		return b.Incr(ReceivedCounter, owner, ReceivedColumn, int64(likes))
	}
	return nil
}

// chunkEdit is one ordinal added to or removed from one chunk of an item.
type chunkEdit struct {
	id  chunkID
	ord uint32
	add bool
}

func compareChunkIDs(a, b chunkID) int {
	if a.kind != b.kind {
		return int(a.kind) - int(b.kind)
	}
	return cmp.Compare(a.chunk, b.chunk)
}

// roaringMoves applies membership moves to an item already in roaring
// form: one MergeRoaring operand per touched chunk, adding and removing the
// group's ordinals, written blind. The state read before tells whether the
// user is in the set, so the chunk need not be read: it was read and
// rewritten whole until issue 18, which cost a Get and ~1 KiB written a
// like on a popular item's chunk (162 of the 341 bytes a like wrote in
// BenchmarkLike, 2M likes loaded; see chunkBits for the merges' cost on
// reads).
func (g *group) roaringMoves(b *store.Batch, it *itemAcc, moves []membership) error {
	edits := g.edits[:0]
	defer func() { g.edits = edits[:0] }()
	for _, m := range moves {
		ord, err := g.ordinal(m.user)
		if err != nil {
			return err
		}
		// A user moves between states once per group (moves are net), so
		// an ordinal is added to or removed from a chunk at most once.
		if m.from != None {
			edits = append(edits, chunkEdit{chunkID{kindOf(m.from), chunkOf(ord)}, ord, false})
		}
		if m.to != None {
			edits = append(edits, chunkEdit{chunkID{kindOf(m.to), chunkOf(ord)}, ord, true})
		}
	}
	// By chunk, in key order; within a chunk the order does not matter
	// (an ordinal is in at most one edit of a chunk).
	slices.SortFunc(edits, func(a, b chunkEdit) int { return compareChunkIDs(a.id, b.id) })
	for i := 0; i < len(edits); {
		id := edits[i].id
		j := i
		for j < len(edits) && edits[j].id == id {
			j++
		}
		if g.addBM == nil {
			g.addBM, g.rmBM = roaring.New(), roaring.New()
		}
		g.addBM.Clear()
		g.rmBM.Clear()
		for _, e := range edits[i:j] {
			if e.add {
				g.addBM.Add(e.ord)
			} else {
				g.rmBM.Add(e.ord)
			}
		}
		// Without removals, no remove set: RoaringOperand takes the
		// removals less the additions (a new bitmap) even when empty,
		// and most groups of a popular item only add.
		rm := g.rmBM
		if rm.IsEmpty() {
			rm = nil
		}
		v, err := store.RoaringOperand(g.val[:0], g.addBM, rm)
		g.val = v
		if err != nil {
			return err
		}
		key := appendBitmapKey(g.buf[:0], it.b.id, it.item, id.kind, id.chunk)
		if err := g.l.fam.bitmap.Merge(b, key, v); err != nil {
			return err
		}
		i = j
	}
	return nil
}

// putChunk writes a chunk whole, or deletes it when it holds no user. (No
// run containers: decoding validates them, which costs more than they save
// in chunks of 4,096 ordinals.)
func (l *Likes) putChunk(b *store.Batch, key []byte, bm *roaring.Bitmap, vbuf *[]byte) error {
	if bm.IsEmpty() {
		return l.fam.bitmap.Delete(b, key)
	}
	v, err := store.RoaringOperand((*vbuf)[:0], bm, nil)
	*vbuf = v
	if err != nil {
		return err
	}
	return l.fam.bitmap.Put(b, key, v)
}

// convert turns an item's list sets into roaring chunks: the members on
// disk with the group's moves applied, each user mapped to its ordinal.
func (g *group) convert(b *store.Batch, it *itemAcc, moves []membership) error {
	l := g.l
	members := map[uint64]byte{} // user -> kind
	p := appendSetPrefix(nil, it.b.id, it.item, 0)
	iter, err := l.fam.set.NewIter(&store.IterOptions{Prefix: p})
	if err != nil {
		return err
	}
	for iter.Next() {
		k := iter.Key()
		members[setKeyUser(k)] = k[13]
	}
	if err := iter.Close(); err != nil {
		return err
	}
	for _, m := range moves {
		if m.to == None {
			delete(members, m.user)
		} else {
			members[m.user] = kindOf(m.to)
		}
	}
	users := make([]uint64, 0, len(members))
	for u := range members {
		users = append(users, u)
	}
	slices.Sort(users)
	type ck struct {
		kind  byte
		chunk uint32
	}
	chunks := map[ck]*roaring.Bitmap{}
	for _, u := range users {
		ord, err := g.ordinal(u)
		if err != nil {
			return err
		}
		k := ck{members[u], chunkOf(ord)}
		if chunks[k] == nil {
			chunks[k] = roaring.New()
		}
		chunks[k].Add(ord)
	}
	if err := l.fam.set.DeleteRange(b, p, keyEnd(p)); err != nil {
		return err
	}
	keys := make([]ck, 0, len(chunks))
	for k := range chunks {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b ck) int {
		if a.kind != b.kind {
			return int(a.kind) - int(b.kind)
		}
		return cmp.Compare(a.chunk, b.chunk)
	})
	for _, k := range keys {
		if err := l.putChunk(b, appendBitmapKey(g.buf[:0], it.b.id, it.item, k.kind, k.chunk), chunks[k], &g.val); err != nil {
			return err
		}
	}
	l.stats.conversions.Add(1)
	return nil
}

// ordinal returns user's ordinal for this group, allocating one (written
// with the group's batch) if the user has none yet.
func (g *group) ordinal(user uint64) (uint32, error) {
	if g.bulk != nil {
		// A load read the ordinal of each of its users ahead (load.go;
		// ordinal+1, 0 for none) and holds off transitions. Members of
		// converted sets it did not load are looked up as usual.
		if o1, ok := g.bulk.ords[user]; ok {
			if o1 == 0 {
				ord, err := g.l.ords.allocate()
				if err != nil {
					return 0, err
				}
				o1 = ord + 1
				g.bulk.ords[user] = o1
				g.bulkOrds = true
				if err := g.l.putOrdinal(g.b, user, ord, &g.buf, &g.val); err != nil {
					return 0, err
				}
			}
			return o1 - 1, nil
		}
	}
	ord, fresh, err := g.l.ords.get(g.l, user, &g.buf, &g.val)
	if err != nil {
		return 0, err
	}
	if fresh {
		if g.freshOK == nil {
			g.freshOK = map[uint64]bool{}
		}
		if !g.freshOK[user] {
			g.freshOK[user] = true
			g.fresh = append(g.fresh, user)
			if err := g.l.putOrdinal(g.b, user, ord, &g.buf, &g.val); err != nil {
				return 0, err
			}
		} else {
			g.l.ords.doneOne(user) // one reference per group
		}
	}
	return ord, nil
}

// ordAlloc hands out dense user ordinals. An ordinal is durable once a
// batch writing its two mapping keys commits; until then it is pending,
// shared by every group that asks for the user, so a user never gets two.
type ordAlloc struct {
	mu      sync.Mutex
	next    uint32
	pending map[uint64]*pendingOrd
	// gaps is set (under mu) once an ordinal was handed out that no
	// batch wrote (its commit failed; a failed commit may still turn out
	// durable, so the ordinal is never handed out again): until then the
	// ordinals in the store are exactly 0..next-1, which Check verifies.
	gaps bool
	// first is next at New: a store may hold gaps from before it.
	first uint32
	// settled counts the pending ordinals that left pending because their
	// batch committed (under mu). get reads it before its unlocked lookup:
	// unchanged under mu, no ordinal became durable and left pending in
	// between, so the lookup's miss still holds and a second Get (of a key
	// that is usually absent, the costliest Get there is: every level is
	// searched) is not needed.
	settled atomic.Uint64
	// cache holds ordinals known to be in the store (ordcache.go); nil
	// when off and on a read-only store. Set by New only.
	cache *ordCache
}

type pendingOrd struct {
	ord  uint32
	refs int
}

func (a *ordAlloc) init(l *Likes) error {
	it, err := l.fam.ordRev.NewIter(&store.IterOptions{Reverse: true})
	if err != nil {
		return err
	}
	if it.Next() {
		a.next = u32at(it.Key(), 1) + 1
	}
	a.first = a.next
	if err := it.Close(); err != nil {
		return err
	}
	a.pending = map[uint64]*pendingOrd{}
	return nil
}

var errOrdinals = errors.New("likes: user ordinals exhausted (2^32 users in roaring sets)")

// get returns user's ordinal; fresh means it is pending (the caller writes
// the mapping in its batch and calls done). kbuf and vbuf are scratch
// buffers (a group's: arrays on the stack escaped to the heap through the
// store's Get, an allocation a lookup).
func (a *ordAlloc) get(l *Likes, user uint64, kbuf, vbuf *[]byte) (uint32, bool, error) {
	if ord, ok := a.cache.get(user); ok {
		return ord, false, nil
	}
	settled := a.settled.Load()
	if ord, ok, err := l.lookupOrdinal(user, kbuf, vbuf); err != nil || ok {
		if ok {
			a.cache.put(user, ord)
		}
		return ord, false, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if p := a.pending[user]; p != nil {
		p.refs++
		return p.ord, true, nil
	}
	// Again under the lock if a group that committed an ordinal removed
	// it from pending since the lookup (it does so after the commit is
	// visible): it may have been this user's.
	if a.settled.Load() != settled {
		if ord, ok, err := l.lookupOrdinal(user, kbuf, vbuf); err != nil || ok {
			if ok {
				a.cache.put(user, ord)
			}
			return ord, false, err
		}
	}
	if a.next >= math.MaxUint32-1 {
		return 0, false, errOrdinals
	}
	p := &pendingOrd{ord: a.next, refs: 1}
	a.next++
	a.pending[user] = p
	return p.ord, true, nil
}

// allocate returns a new ordinal that no pending allocation shares: for a
// bulk load, which knows the user has none and writes the mapping itself.
func (a *ordAlloc) allocate() (uint32, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.next >= math.MaxUint32-1 {
		return 0, errOrdinals
	}
	a.next++
	return a.next - 1, nil
}

// done drops one reference to each pending ordinal; a committed one is in
// the store now and leaves pending.
func (a *ordAlloc) done(users []uint64, committed bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, u := range users {
		p := a.pending[u]
		if p == nil {
			continue
		}
		p.refs--
		if committed {
			a.cache.put(u, p.ord) // in the store now
			delete(a.pending, u)
			a.settled.Add(1)
		} else if p.refs <= 0 {
			delete(a.pending, u)
			a.gaps = true
		}
	}
}

// unuse drops one reference to each pending ordinal of users, whose
// batch was skipped as a duplicate (it wrote nothing): an ordinal no one
// holds any more is handed back if it is the newest one, so the next user
// gets it, as on a replica that never applied the skipped batch. In the
// apply of a replicated store (serial) it always is: the group's fresh
// ordinals are the newest, and users lists them in allocation order.
// Outside it (concurrent groups, where duplicates do not happen: likes
// sets no Once mark) one that is not stays a gap, as after a failed commit.
func (a *ordAlloc) unuse(users []uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, u := range slices.Backward(users) {
		p := a.pending[u]
		if p == nil {
			continue
		}
		if p.refs--; p.refs > 0 {
			continue
		}
		delete(a.pending, u)
		if p.ord == a.next-1 {
			a.next--
		} else {
			a.gaps = true
		}
	}
}

// noteGap records that an ordinal handed out will never be written.
func (a *ordAlloc) noteGap() {
	a.mu.Lock()
	a.gaps = true
	a.mu.Unlock()
}

// doneOne drops one reference to user's pending ordinal, which stays
// pending for its other holders.
func (a *ordAlloc) doneOne(user uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if p := a.pending[user]; p != nil {
		if p.refs--; p.refs <= 0 {
			delete(a.pending, user)
		}
	}
}

func (l *Likes) lookupOrdinal(user uint64, kbuf, vbuf *[]byte) (uint32, bool, error) {
	*kbuf = appendOrdKey((*kbuf)[:0], user)
	if !l.filter.mayContain(*kbuf) {
		return 0, false, nil
	}
	v, ok, err := l.fam.ord.Get(*kbuf, (*vbuf)[:0])
	*vbuf = v
	if err != nil || !ok {
		return 0, false, err
	}
	ord, err := decodeOrd(v)
	if err != nil {
		return 0, false, fmt.Errorf("%w: %v", store.ErrCorrupt, err)
	}
	return ord, true, nil
}

// putOrdinal writes user's ordinal mapping to b; kbuf and vbuf are scratch
// (the batch copies what it is given).
func (l *Likes) putOrdinal(b *store.Batch, user uint64, ord uint32, kbuf, vbuf *[]byte) error {
	k := appendOrdKey((*kbuf)[:0], user)
	*kbuf = k
	l.filter.add(k) // before the commit: see keyfilter.go
	v := appendOrd((*vbuf)[:0], ord)
	*vbuf = v
	if err := l.fam.ord.Put(b, k, v); err != nil {
		return err
	}
	k = appendOrdRevKey(k[:0], ord)
	*kbuf = k
	v = appendOrdUser(v[:0], user)
	*vbuf = v
	return l.fam.ordRev.Put(b, k, v)
}

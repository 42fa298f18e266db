package timeline

// Home pages, inbox rebuilds and activity.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/tallydb/tally/store"
)

// Entry is one entry of a home page: a post and its author, its type and,
// for a repost, comment or reply, the post it refers to. For a repost,
// Post and Author are the repost and the reposter (the "reposted by"
// context) and Ref and RefAuthor the original post and its author; for a
// comment or reply they are the parent post and its author; for a post
// both are 0.
type Entry struct {
	Post, Author   uint64
	Type           EntryType
	Ref, RefAuthor uint64
}

// HomeOptions are the options of HomeWith.
type HomeOptions struct {
	// Types are the entry types the page shows; the zero value shows
	// every type. De-duplication of reposts considers the shown types
	// only: with Types of TypePost alone an original shows at its own
	// position whoever reposted it.
	Types Types
}

// Page is a page of a home timeline, newest first.
type Page struct {
	Entries []Entry
	// Cursor continues after the last entry; empty when NoMore.
	Cursor string
	// NoMore is true when the timeline ends with this page (the "NoMore"
	// marker of the published feed APIs): no post older than the last
	// entry is visible to the reader.
	NoMore bool
}

// endOfIDs is the exclusive upper bound of every post id.
const endOfIDs = MaxID + 1

// scratch is the reusable memory of one page read.
type scratch struct {
	followees []uint64
	invisible []uint64
	pullSet   []uint64
	fbuf      []byte
	ibuf      []byte
	col       collector
	filter    pageFilter
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// Home returns a page of user's home timeline: the posts of the accounts
// user follows, newest first by post id, limit entries (0: DefaultLimit),
// starting after cursor ("" for the newest). The page is read from the
// user's inbox; below the inbox's floor, and for pulled authors and
// follows whose backfill has not run yet, it is merged from the authors'
// outboxes, down to the end of history (Page.NoMore). Posts published
// after the cursor was issued never shift later pages: a cursor is a
// position in post-id order.
//
// A read records the user's activity (at most once per min(1h, window/8)).
// The first read of a user whose inbox is not live (new, or expired after
// the active window) rebuilds it by pull and publishes it atomically before
// answering. An unknown user gets an empty page with NoMore, and nothing is
// written. Errors: ErrBadID, ErrBadCursor, ErrBadLimit.
func (t *Timeline) Home(user uint64, cursor string, limit int) (Page, error) {
	return t.HomeWith(user, cursor, limit, HomeOptions{})
}

// HomeWith is Home with options: the entry types to show. A cursor of one
// HomeWith call continues with any options (it is a position in post-id
// order). Errors: those of Home, and ErrInvalidOption for a type set with
// an unknown type.
func (t *Timeline) HomeWith(user uint64, cursor string, limit int, opts HomeOptions) (Page, error) {
	if opts.Types&^AllTypes != 0 {
		return Page{}, fmt.Errorf("%w: entry types %#x", ErrInvalidOption, uint8(opts.Types))
	}
	limit, before, started, err := pageStart("user", user, cursorHome, cursor, limit)
	if err != nil {
		return Page{}, err
	}
	if !started {
		before = endOfIDs
	}
	if err := t.live(); err != nil {
		return Page{}, err
	}
	t.stats.pages.Add(1)
	var buf [numCols]uint64
	r, err := t.row(user, buf[:0])
	if err != nil {
		return Page{}, err
	}
	ord := uint32(r[colOrd])
	if ord == 0 {
		return Page{NoMore: true}, nil
	}
	for attempt := 0; ; attempt++ {
		if r[colRead] == 0 {
			if _, err := t.activate([]uint64{user}, false); err != nil {
				return Page{}, err
			}
		} else if t.stale(r[colRead]) {
			if err := t.touch(user); err != nil {
				return Page{}, err
			}
		}
		p, ok, err := t.page(user, ord, before, limit, opts.Types)
		if err != nil || ok {
			return p, err
		}
		// The inbox changed state under the read (an expiry or rebuild
		// between reading its state and its value): read again.
		if r, err = t.row(user, buf[:0]); err != nil {
			return Page{}, err
		}
		if attempt > 100 {
			return Page{}, fmt.Errorf("timeline: home of user %d: inbox kept changing state", user)
		}
	}
}

// page builds a page from the live inbox of user (ordinal ord). ok is
// false if the inbox was not live, or changed state during the read.
func (t *Timeline) page(user uint64, ord uint32, before uint64, limit int, types Types) (Page, bool, error) {
	s := scratchPool.Get().(*scratch)
	defer scratchPool.Put(s)
	// followees may be the cache's list: read-only.
	followees, fdst, fbuf, err := t.cachedFolloweesOf(ord, s.followees, s.fbuf)
	s.followees, s.fbuf = fdst, fbuf
	if err != nil {
		return Page{}, false, err
	}
	// Mutes and hides filter on read (mute.go): an invisible followee's
	// inbox entries and outbox are skipped like an unfollowed one's, and
	// so is a repost of an invisible author's post.
	if s.invisible = t.invisibleTo(user, s.invisible); len(s.invisible) > 0 {
		s.followees = withoutIDs(append(s.followees[:0], followees...), s.invisible)
		followees = s.followees
	}
	s.pullSet = t.pullSetOf(ord, followees, s.pullSet[:0])

	// Read the inbox between two reads of the user's read mark (a
	// sequence lock): the inbox is trusted only if the mark was non-zero
	// and unchanged across the read (expiry zeroes the mark before it
	// drops an inbox; a rebuild publishes the inbox before the mark).
	var buf [numCols]uint64
	r1, err := t.row(user, buf[:0])
	if err != nil {
		return Page{}, false, err
	}
	read := r1[colRead]
	var key [5]byte
	v, have, err := t.fam.inbox.Get(inboxKey(key[:0], ord), s.ibuf)
	s.ibuf = v
	if err != nil {
		return Page{}, false, err
	}
	r2, err := t.row(user, buf[:0])
	if err != nil {
		return Page{}, false, err
	}
	if read == 0 || r2[colRead] != read {
		return Page{}, false, nil
	}
	var floor uint64
	col := &s.col
	col.reset(limit+1, true)
	// Types, reposts' originals and de-duplication filter every entry,
	// from the inbox or pulled (repost.go), under the read locks of the
	// removed set and the reposts index.
	t.removed.RLock()
	defer t.removed.RUnlock()
	t.reposts.RLock()
	defer t.reposts.RUnlock()
	f := &s.filter
	*f = pageFilter{types: types, followees: followees, invisible: s.invisible, reposts: &t.reposts}
	if !t.removed.bm.IsEmpty() {
		f.removed = t.removed.bm
	}
	if have {
		// Decode only as far as the page needs: entries come newest first,
		// and the loop stops once nothing further down can enter.
		r, err := store.ReadTopList(v)
		if err != nil {
			return Page{}, false, fmt.Errorf("inbox of user %d: %w", user, err)
		}
		floor = r.Floor()
		t.stats.inboxEntries.Add(int64(r.Len()))
		removed := f.removed
		for e, ok := r.Next(); ok; e, ok = r.Next() {
			if e.Key == 0 || e.Key >= before {
				continue // the sentinel, or above the cursor
			}
			if col.full() && e.Key <= col.min() {
				break // sorted: nothing further down can enter
			}
			if !contains(followees, e.Value) || contains(s.pullSet, e.Value) {
				continue // unfollowed, or read by pull below
			}
			if removed != nil && removed.Contains(e.Key) {
				continue // unpublished
			}
			if (e.Kind != 0 || f.types != 0 || len(f.reposts.m) > 0) && !f.shows(e) {
				continue // another type, or shown elsewhere (repost.go)
			}
			col.push(e)
		}
		if err := r.Err(); err != nil {
			return Page{}, false, fmt.Errorf("inbox of user %d: %w", user, err)
		}
	}
	var it *store.Iter
	defer func() {
		if it != nil {
			it.Close()
		}
	}()
	pull := func(author, upper uint64) error {
		if it == nil {
			if it, err = t.fam.outbox.NewIter(nil); err != nil {
				return err
			}
		}
		return pullAuthor(it, author, upper, col, f)
	}
	for _, a := range s.pullSet {
		if err := pull(a, before); err != nil {
			return Page{}, false, err
		}
	}
	// Below the floor the inbox knows nothing: merge the other followees'
	// outboxes there, unless the page is already full of newer entries.
	if floor > 0 && (!col.full() || col.min() < floor) {
		upper := min(before, floor)
		for _, a := range followees {
			if contains(s.pullSet, a) {
				continue
			}
			if err := pull(a, upper); err != nil {
				return Page{}, false, err
			}
		}
	}
	if it != nil {
		t.stats.pulls.Add(1) // the page read some posts from outboxes
		err := closeIter(it)
		it = nil
		if err != nil {
			return Page{}, false, err
		}
	}
	entries := col.sortInPlace()
	p := Page{Entries: make([]Entry, 0, min(len(entries), limit))}
	for i, e := range entries {
		if i == limit {
			break
		}
		p.Entries = append(p.Entries, Entry{Post: e.Key, Author: e.Value, Type: EntryType(e.Kind), Ref: e.Ref, RefAuthor: e.RefValue})
	}
	if len(entries) > limit {
		p.Cursor = encodeCursor(cursorHome, user, p.Entries[limit-1].Post)
	} else {
		p.NoMore = true
	}
	return p, true, nil
}

// pullSetOf returns the followees whose posts a reader with ordinal ord
// pulls from outboxes rather than reading from the inbox: pulled authors
// and follows whose backfill is pending. Sorted.
func (t *Timeline) pullSetOf(ord uint32, followees, dst []uint64) []uint64 {
	pulled := *t.pulled.Load()
	if len(pulled) <= len(followees) {
		for _, a := range pulled {
			if contains(followees, a) {
				dst = append(dst, a)
			}
		}
	} else {
		for _, a := range followees {
			if contains(pulled, a) {
				dst = append(dst, a)
			}
		}
	}
	n := len(dst)
	dst = t.pendingOf(ord, dst)
	for i := n; i < len(dst); i++ {
		if !contains(followees, dst[i]) || contains(dst[:n], dst[i]) {
			dst[i] = 0
		}
	}
	dst = slices.DeleteFunc(dst, func(a uint64) bool { return a == 0 })
	slices.Sort(dst)
	return dst
}

func contains(sorted []uint64, v uint64) bool {
	_, ok := slices.BinarySearch(sorted, v)
	return ok
}

// pullAuthor adds author's posts below upper (≥ 1) to col, newest first,
// while they can enter it, each with its type and reference, and only
// those f shows if f is not nil. it is a forward iterator over tl_outbox.
func pullAuthor(it *store.Iter, author, upper uint64, col *collector, f *pageFilter) error {
	var k [17]byte
	ok := it.SeekGE(outboxKey(k[:0], author, upper-1))
	for ; ok; ok = it.Next() {
		key := it.Key()
		if binary.BigEndian.Uint64(key[1:9]) != author {
			break
		}
		p := postOfOutboxKey(key)
		if col.full() && p <= col.min() {
			break
		}
		m, err := decodeEntryMeta(it.Value())
		if err != nil {
			return fmt.Errorf("%w: post %d of %d: %v", store.ErrCorrupt, p, author, err)
		}
		e := m.entry(p, author)
		if f != nil && (e.Kind != 0 || f.types != 0 || len(f.reposts.m) > 0) && !f.shows(e) {
			continue
		}
		col.push(e)
	}
	return it.Err()
}

// stale reports whether a read mark is old enough to be renewed.
func (t *Timeline) stale(read uint64) bool {
	return t.nowSec()-read >= uint64(readGranularity(t.Config())/time.Second)
}

// readGranularity is how often a reader's activity is written: a home read
// writes the read mark only when it is older than this.
func readGranularity(c Config) time.Duration {
	return min(c.ActiveWindow/8, time.Hour)
}

func (t *Timeline) nowSec() uint64 {
	s := t.now().Unix()
	if s < 1 {
		return 1
	}
	if s > math.MaxUint32 {
		return math.MaxUint32
	}
	return uint64(s)
}

// touch renews a live user's read mark.
func (t *Timeline) touch(user uint64) error {
	unlock := t.lockUsers([]uint64{user})
	defer unlock()
	var buf [numCols]uint64
	r, err := t.row(user, buf[:0])
	if err != nil {
		return err
	}
	if r[colRead] == 0 || !t.stale(r[colRead]) {
		return nil // expired meanwhile (the caller rebuilds), or renewed
	}
	b := t.db.NewBatch()
	defer b.Close()
	b.SetLocal() // a read's write: node-local, as activate's (TestTouchIsNodeLocal)
	if err := b.SetColumn(UsersCounter, user, ColRead, t.nowSec()); err != nil {
		return err
	}
	return b.Commit()
}

// MarkActive records that user read their home now, as a read of their
// home would: a user whose inbox is not live gets it rebuilt by pull (it
// reports whether it was); a live one has their read mark renewed.
func (t *Timeline) MarkActive(user uint64) (rebuilt bool, err error) {
	n, err := t.MarkActiveMany(context.Background(), []uint64{user})
	return n > 0, err
}

// markBatch is the number of users MarkActiveMany activates per batch.
const markBatch = 512

// MarkActiveMany is MarkActive for many users, in batches of 512 (one
// commit each for the push set, the inboxes and the read marks), for
// imports, benchmarks and demos. It returns how many inboxes it rebuilt.
// Every id is checked before anything is written (ErrBadID).
func (t *Timeline) MarkActiveMany(ctx context.Context, users []uint64) (int, error) {
	if err := CheckID("user", users...); err != nil {
		return 0, err
	}
	if err := t.live(); err != nil {
		return 0, err
	}
	us := slices.Clone(users)
	slices.Sort(us)
	us = slices.Compact(us)
	rebuilt := 0
	for len(us) > 0 {
		if err := ctx.Err(); err != nil {
			return rebuilt, err
		}
		n := min(len(us), markBatch)
		k, err := t.activate(us[:n], true)
		rebuilt += k
		if err != nil {
			return rebuilt, err
		}
		us = us[n:]
	}
	return rebuilt, nil
}

// activate rebuilds by pull the inboxes of users whose inbox is not live,
// and makes them live; with renew, it also renews the read marks of those
// that are live. It returns how many inboxes it rebuilt (0 when another
// reader did it first).
//
// The steps, under the users' locks (which expiry also takes):
//
//  1. add the users to the push set and drop whatever inbox is left, in
//     one batch: from now on every fan-out that starts delivers to them;
//  2. for each, merge the newest InboxCap+1 posts of the followees that
//     are not pulled from their outboxes (posts published before step 1's
//     commit are in them; later ones are pushed);
//  3. merge each result into its inbox (an operand carrying its own floor)
//     and set the read marks, in one batch: readers trust an inbox only
//     from this commit on, so none sees it half-built.
//
// A post unpublished between steps 2 and 3 may be merged after its
// removal passed the inbox: readers drop removed posts, so it never shows.
func (t *Timeline) activate(users []uint64, renew bool) (int, error) {
	t.graphMu.RLock()
	defer t.graphMu.RUnlock()
	if err := t.ensureOrds(users...); err != nil {
		return 0, err
	}
	unlock := t.lockUsers(users)
	defer unlock()
	start := time.Now()
	cfg := t.Config()
	now := t.nowSec()
	b := t.db.NewBatch()
	defer b.Close()
	// Activity and inboxes are derived state that reads change (a user's
	// return rebuilds their inbox): on a replica they are its own, and
	// pages are the same either way (store apply.go, SetLocal).
	b.SetLocal()
	var cold []uint64
	var coldOrds []uint32
	byChunk := map[uint16][]uint32{}
	var buf [numCols]uint64
	for _, u := range users {
		r, err := t.row(u, buf[:0])
		if err != nil {
			return 0, err
		}
		if r[colRead] != 0 {
			if renew {
				if err := b.SetColumn(UsersCounter, u, ColRead, now); err != nil {
					return 0, err
				}
			}
			continue
		}
		ord := uint32(r[colOrd])
		cold = append(cold, u)
		coldOrds = append(coldOrds, ord)
		byChunk[chunkOf(ord)] = append(byChunk[chunkOf(ord)], ord)
		if err := t.fam.inbox.Delete(b, inboxKey(nil, ord)); err != nil {
			return 0, err
		}
	}
	for c, os := range byChunk {
		if err := t.fam.active.Merge(b, activeKey(nil, c), followersOperand(os, nil, c)); err != nil {
			return 0, err
		}
	}
	if len(cold) == 0 {
		if b.Empty() {
			return 0, nil
		}
		return 0, b.Commit()
	}
	if err := b.Commit(); err != nil {
		return 0, err
	}
	// In memory after the commit, and before the outboxes are read: a
	// fan-out that reads the push set without these users read it before
	// this point, so its post is in the outboxes read below.
	// NB: under pushGate, so a publish delivering in its own batch either
	// saw these users in the push set or committed before the outboxes
	// are read below (deliverInline).
	t.pushGate.Lock()
	t.pushAdd(coldOrds)
	t.pushGate.Unlock()
	b.Reset()
	// NB: Reset forgets SetLocal. Numbered as the applying entry's commit,
	// this batch would be skipped as a duplicate while an entry re-applies
	// (TestActivateIsNodeLocal).
	b.SetLocal()
	var pend [][]uint64
	for i, u := range cold {
		ord := coldOrds[i]
		entries, err := t.pullNewest(ord, cfg.InboxCap+1)
		if err != nil {
			return 0, err
		}
		if err := t.fam.inbox.Merge(b, inboxKey(nil, ord), inboxOperand(cfg.InboxCap, entries)); err != nil {
			return 0, err
		}
		if err := b.SetColumn(UsersCounter, u, ColRead, now); err != nil {
			return 0, err
		}
		p := t.pendingOf(ord, nil)
		for _, a := range p {
			if err := t.fam.pending.Delete(b, pendingKey(nil, ord, a)); err != nil {
				return 0, err
			}
		}
		pend = append(pend, p)
	}
	if err := b.Commit(); err != nil {
		return 0, err
	}
	for i, p := range pend {
		if len(p) > 0 {
			t.pendingClear(coldOrds[i])
		}
	}
	t.stats.rebuilds.Add(int64(len(cold)))
	t.stats.rebuildNanos.Add(int64(time.Since(start)))
	return len(cold), nil
}

// pullNewest returns the newest n posts of the followees of ord that are
// not pulled, newest first (a k-way merge over their outboxes: one seek
// per followee, reading each while its posts can still enter the top n).
// Past pullSplit followees the seeks run on two goroutines, each with its
// own iterator and collector, whose results are merged: a rebuild's
// latency halves on an idle 2-core machine (BenchmarkRebuild).
func (t *Timeline) pullNewest(ord uint32, n int) ([]store.TopEntry, error) {
	followees, _, err := t.followeesOf(ord, nil, nil)
	if err != nil {
		return nil, err
	}
	pulled := *t.pulled.Load()
	if len(pulled) > 0 {
		followees = slices.DeleteFunc(followees, func(a uint64) bool { return contains(pulled, a) })
	}
	if len(followees) == 0 {
		return nil, nil
	}
	parts := 1
	if len(followees) > pullSplit && runtime.GOMAXPROCS(0) > 1 {
		parts = 2
	}
	cols := make([]collector, parts)
	errs := make([]error, parts)
	var wg sync.WaitGroup
	per := (len(followees) + parts - 1) / parts
	for i := range parts {
		cols[i].reset(n, false)
		part := followees[min(i*per, len(followees)):min((i+1)*per, len(followees))]
		pull := func() {
			it, err := t.fam.outbox.NewIter(nil)
			if err != nil {
				errs[i] = err
				return
			}
			for _, a := range part {
				if err := pullAuthor(it, a, endOfIDs, &cols[i], nil); err != nil {
					it.Close()
					errs[i] = err
					return
				}
			}
			errs[i] = closeIter(it)
		}
		if i == parts-1 {
			pull()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			pull()
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for i := 1; i < parts; i++ {
		for _, e := range cols[i].h {
			cols[0].push(e)
		}
	}
	return cols[0].sorted(), nil
}

// pullSplit is the followee count above which a rebuild pulls on two
// goroutines.
const pullSplit = 64

// collector keeps the k newest entries offered to it: a min-heap on post
// id. With dedup, an entry whose post is already held is dropped (pages;
// rebuilds read each post once).
type collector struct {
	k     int
	dedup bool
	h     []store.TopEntry
	seen  map[uint64]struct{} // held keys, for dedup of a large collector
}

// dedupScan is the largest collector that finds repeats by a scan.
const dedupScan = 64

func (c *collector) reset(k int, dedup bool) {
	c.k, c.dedup, c.h = k, dedup, c.h[:0]
	if dedup && k > dedupScan {
		if c.seen == nil {
			c.seen = map[uint64]struct{}{}
		}
		clear(c.seen)
	}
}

func (c *collector) full() bool  { return len(c.h) >= c.k }
func (c *collector) min() uint64 { return c.h[0].Key }

func (c *collector) push(e store.TopEntry) {
	key := e.Key
	if c.full() && key <= c.h[0].Key {
		return
	}
	large := c.dedup && c.k > dedupScan
	switch {
	case large:
		if _, ok := c.seen[key]; ok {
			return
		}
		c.seen[key] = struct{}{}
	case c.dedup:
		for _, e := range c.h {
			if e.Key == key {
				return
			}
		}
	}
	if !c.full() {
		c.h = append(c.h, e)
		c.up(len(c.h) - 1)
		return
	}
	if large {
		delete(c.seen, c.h[0].Key)
	}
	c.h[0] = e
	c.down(0)
}

func (c *collector) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if c.h[p].Key <= c.h[i].Key {
			return
		}
		c.h[p], c.h[i] = c.h[i], c.h[p]
		i = p
	}
}

func (c *collector) down(i int) {
	n := len(c.h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && c.h[r].Key < c.h[l].Key {
			m = r
		}
		if c.h[i].Key <= c.h[m].Key {
			return
		}
		c.h[i], c.h[m] = c.h[m], c.h[i]
		i = m
	}
}

// sorted returns the held entries newest first (a new slice).
func (c *collector) sorted() []store.TopEntry {
	out := slices.Clone(c.h)
	sortNewestFirst(out)
	return out
}

// sortInPlace returns the held entries newest first, sorting the heap's
// own slice: the collector must be reset before its next use.
func (c *collector) sortInPlace() []store.TopEntry {
	sortNewestFirst(c.h)
	return c.h
}

func sortNewestFirst(es []store.TopEntry) {
	slices.SortFunc(es, func(a, b store.TopEntry) int {
		switch {
		case a.Key > b.Key:
			return -1
		case a.Key < b.Key:
			return 1
		}
		return 0
	})
}

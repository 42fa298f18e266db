package unread

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

var errCheck = errors.New("unread: check failed")

func errCache(format string, args ...any) error {
	return fmt.Errorf("%w: snapshot cache: %s", errCheck, fmt.Sprintf(format, args...))
}

// Check verifies unread's invariants against what the store holds: the
// channels and notices in memory are the persisted ones; every feed
// snapshot decodes (and, in a complete store, is initialized); every cached
// snapshot whose gen is current equals the stored one; the cache's
// accounting is consistent; every tag decodes. Tests call it after every
// step; it reads every key of unread's families, so tools should call it
// only on a quiet store.
func (x *Unread) Check() error {
	var errs []error
	fail := func(format string, args ...any) {
		if len(errs) < 20 {
			errs = append(errs, fmt.Errorf("%w: %s", errCheck, fmt.Sprintf(format, args...)))
		}
	}
	if err := x.cache.check(); err != nil {
		errs = append(errs, err)
	}
	if err := x.checkChannels(fail); err != nil {
		errs = append(errs, err)
	}
	if err := x.checkFeed(fail); err != nil {
		errs = append(errs, err)
	}
	chans := len(x.channelList())
	it, err := x.tagFam.NewIter(nil)
	if err != nil {
		return err
	}
	for it.Next() {
		if _, err := decodeTag(it.Value()); err != nil {
			fail("tag %x: %v", it.Key(), err)
		}
		if cid := binary.BigEndian.Uint32(it.Key()[9:]); cid == 0 || int(cid) > chans {
			fail("tag %x names unknown channel %d", it.Key(), cid)
		}
	}
	errs = append(errs, it.Err(), it.Close())
	return errors.Join(errs...)
}

func (x *Unread) checkChannels(fail func(string, ...any)) error {
	chans := x.channelList()
	byName := *x.chans.byName.Load()
	if len(byName) != len(chans) {
		fail("%d channels by name, %d by id", len(byName), len(chans))
	}
	it, err := x.chanFam.NewIter(nil)
	if err != nil {
		return err
	}
	n := 0
	for it.Next() {
		id := binary.BigEndian.Uint32(it.Key()[1:])
		name, tag, err := decodeChannel(it.Value())
		switch {
		case err != nil:
			fail("channel %d: %v", id, err)
		case int(id) > len(chans):
			fail("stored channel %d %q not in memory", id, name)
		case chans[id-1].name != name || chans[id-1].tag.Load() != tag || byName[name] != chans[id-1]:
			fail("channel %d: stored %q tag %d, memory %q tag %d", id, name, tag, chans[id-1].name, chans[id-1].tag.Load())
		}
		n++
	}
	if err := errors.Join(it.Err(), it.Close()); err != nil {
		return err
	}
	if n != len(chans) {
		fail("%d channels stored, %d in memory", n, len(chans))
	}
	stored := make([][]uint64, len(chans))
	it, err = x.noticeFam.NewIter(nil)
	if err != nil {
		return err
	}
	for it.Next() {
		k := it.Key()
		cid := binary.BigEndian.Uint32(k[1:])
		if cid == 0 || int(cid) > len(chans) {
			fail("notice %x of unknown channel", k)
			continue
		}
		stored[cid-1] = append(stored[cid-1], binary.BigEndian.Uint64(k[5:]))
	}
	if err := errors.Join(it.Err(), it.Close()); err != nil {
		return err
	}
	for i, ch := range chans {
		ch.nmu.RLock()
		mem := slices.Clone(ch.notices)
		ch.nmu.RUnlock()
		if !slices.Equal(mem, stored[i]) {
			fail("channel %q: %d notices in memory, %d stored (or they differ)", ch.name, len(mem), len(stored[i]))
		}
	}
	return nil
}

func (x *Unread) checkFeed(fail func(string, ...any)) error {
	it, err := x.feedFam.NewIter(nil)
	if err != nil {
		return err
	}
	stored := map[uint64]*snapshot{}
	for it.Next() {
		user := binary.BigEndian.Uint64(it.Key()[1:])
		s, err := decodeStored(it.Value())
		if err != nil {
			fail("feed snapshot of user %d: %v", user, err)
			continue
		}
		if x.graph != nil && x.complete && !s.init {
			fail("feed snapshot of user %d not initialized in a complete store", user)
		}
		gen, err := x.feed.GetColumn(user, genColumn)
		if err != nil {
			return err
		}
		if gen != s.n {
			fail("user %d: gen %d, snapshot has applied %d operations", user, gen, s.n)
		}
		if x.graph != nil && s.init {
			if err := x.checkAgainstGraph(user, s, fail); err != nil {
				return err
			}
		}
		stored[user] = s
	}
	if err := errors.Join(it.Err(), it.Close()); err != nil {
		return err
	}
	return x.cache.each(func(e *cacheEntry) error {
		s := stored[e.user]
		gen, err := x.feed.GetColumn(e.user, genColumn)
		if err != nil {
			return err
		}
		if gen != e.gen || e.sgen != x.db.Generation() {
			return nil // stale, never used
		}
		if s == nil {
			fail("cached snapshot of user %d (gen %d) is not stored", e.user, e.gen)
			return nil
		}
		want := newCacheEntry(e.user, gen, s)
		gi, gb := e.followees(nil, nil)
		wi, wb := want.followees(nil, nil)
		if e.n != want.n || e.live != want.live || !slices.Equal(gi, wi) || !slices.Equal(gb, wb) || !s.init {
			fail("cached snapshot of user %d differs from the stored one", e.user)
		}
		return nil
	})
}

// checkAgainstGraph checks that an initialized snapshot's live followees
// are exactly the user's followees in the follow graph: a follow-graph
// change the observer missed shows here.
func (x *Unread) checkAgainstGraph(user uint64, s *snapshot, fail func(string, ...any)) error {
	var live, graph []uint64
	for _, e := range s.entries {
		if !e.dead {
			live = append(live, e.id)
		}
	}
	if err := x.graph.VisibleFollowees(user, func(f uint64) bool {
		graph = append(graph, f)
		return true
	}); err != nil {
		return err
	}
	if !slices.Equal(live, graph) {
		fail("feed snapshot of user %d follows %v, the follow graph %v", user, head(live), head(graph))
	}
	return nil
}

// head returns at most the first 8 ids, for messages.
func head(ids []uint64) []uint64 { return ids[:min(len(ids), 8)] }

// checkStore is what tests run after every step: unread's Check and the
// store's.
func checkStore(x *Unread) error {
	return errors.Join(x.Check(), x.db.Check())
}

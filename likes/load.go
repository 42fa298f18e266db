package likes

// Bulk load of historical likes.
//
// Load writes what a stream of Like calls would, without the counter log:
// the likes are sorted by item and cut into groups of whole batches; each
// batch holds, for its likes, the states, user-list entries, set members
// (list keys, roaring chunk operands, conversions), ordinals, the
// all-time and day board keys (and their histogram moves) and day scores, item records and
// the owners' received totals, computed by the same overlay as live
// transitions (write.go) against the load's running counts. The item
// counts themselves go in at the end with one store.DB.Load (hot ranges
// loaded in memory and checkpointed, new aged ranges built straight into
// cold blocks), followed by a WAL sync.
//
// Crash safety: before its first batch a load writes an intent (meta
// "load/" + business id) and deletes it after the counts are durable. Every
// batch is consistent on its own (a like's state, set member, list entry,
// board keys and owner credit are in one batch) except for the item counts,
// which lag until the end. A New that finds an intent recounts every item
// the business's sets hold and loads the counts that differ, then deletes
// the intent: counts equal set sizes again, and running the same load
// again finishes it (a like already there is a no-op).

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/tallydb/tally/store"
)

// LoadLike is one historical like of a bulk load.
type LoadLike struct {
	Item, User uint64
	// Ms is the like's time in Unix milliseconds; 0 means now. It orders
	// the user's likes and picks the day board.
	Ms int64
}

// LoadStats reports what a Load did.
type LoadStats struct {
	Input     int // likes given
	Added     int // new likes (the user had no state on the item)
	Replaced  int // likes that replaced a dislike
	Unchanged int // already liked, or repeated in the input
	Items     int // items whose counts changed
	Converted int // sets converted to roaring bitmaps
}

// loadGroupLikes is the most likes of one load batch (tests lower it).
var loadGroupLikes = 16384

// bulkLoad is a load's running state: the counts of the items it touched
// and the ordinals of its users (ordinal+1; 0 for a user without one).
type bulkLoad struct {
	counts  map[uint64]Counts
	changed map[uint64]bool // items whose counts differ from before the load
	ords    map[uint64]uint32
	// unwritten: a batch allocated ordinals it did not write (its commit
	// failed or was a re-applied entry's duplicate), so ords may name
	// ordinals the store does not hold.
	unwritten bool
}

// Load bulk-loads likes of business (created if needed): each like is
// applied like a call of Like without owner, at its own time, but written
// in large batches and with the counts loaded at the end without the
// counter log. Repeated (item, user) pairs keep the first like. Load
// validates every like first: a time before 1970 or more than a day ahead
// fails with ErrBadTime naming its index, and nothing is written. Load
// holds off every transition while it runs (it is meant for imports).
// progress, if not nil, is called with the likes done so far.
func (l *Likes) Load(ctx context.Context, business string, likes []LoadLike, progress func(done int)) (LoadStats, error) {
	st := LoadStats{Input: len(likes)}
	if err := validBusiness(business); err != nil {
		return st, err
	}
	nowMs := l.opts.Now().UnixMilli()
	for i, lk := range likes {
		if lk.Ms < 0 || lk.Ms > nowMs+86_400_000 || lk.Ms > maxTimeMs {
			return st, fmt.Errorf("%w: like %d (item %d, user %d) at %d ms", ErrBadTime, i, lk.Item, lk.User, lk.Ms)
		}
	}
	b, err := l.ensureBusiness(business, l.opts.Business)
	if err != nil {
		return st, err
	}
	if len(likes) == 0 {
		return st, nil
	}
	// Sort by item, keeping input order within an item (the first like of
	// a pair wins), without touching the caller's slice.
	order := make([]int32, len(likes))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortStableFunc(order, func(a, c int32) int {
		x, y := likes[a].Item, likes[c].Item
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	})

	l.loadMu.Lock()
	defer l.loadMu.Unlock()
	// The load writes item records and day scores around the stripes'
	// caches.
	l.clearCaches()
	intent := appendLoadIntentKey(nil, b.id)
	if err := l.putMeta(intent, appendLoadIntent(nil, nowMs)); err != nil {
		return st, err
	}
	prior, dup, ords, err := l.readAhead(b, likes)
	if err != nil {
		return st, err
	}
	bulk := &bulkLoad{counts: map[uint64]Counts{}, changed: map[uint64]bool{}, ords: ords}
	scratchStripe := &stripe{}
	conv0 := l.stats.conversions.Load()
	req := make([]request, 0, loadGroupLikes)
	for start := 0; start < len(order); {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		end := min(start+loadGroupLikes, len(order))
		g := l.newGroup(scratchStripe)
		g.nowMs = nowMs
		g.bulk = bulk
		req = req[:0]
		for _, i := range order[start:end] {
			if dup[i] {
				st.Unchanged++
				continue
			}
			lk := likes[i]
			ms := lk.Ms
			if ms == 0 {
				ms = nowMs
			}
			req = append(req, request{kind: opLike, biz: b, item: lk.Item, user: lk.User, ms: ms, prior: prior[i], hasPrior: true})
		}
		for i := range req {
			r := &req[i]
			var before State
			known := false
			if it := g.byItem[itemKey{b.id, r.item}]; it != nil && it.find(r.user) != nil {
				before, known = it.find(r.user).s.state, true
			}
			g.apply(r)
			if r.err != nil {
				return st, r.err
			}
			if !known {
				before = g.byItem[itemKey{b.id, r.item}].find(r.user).s0.state
			}
			switch {
			case !r.res.Changed:
				st.Unchanged++
			case before == Disliked:
				st.Replaced++
			default:
				st.Added++
			}
		}
		if err := g.commit(); err != nil {
			return st, err
		}
		start = end
		if progress != nil {
			progress(start)
		}
	}
	st.Converted = int(l.stats.conversions.Load() - conv0)
	for item := range bulk.counts {
		if !bulk.changed[item] {
			delete(bulk.counts, item)
		}
	}
	if err := l.loadCounts(ctx, b, bulk.counts); err != nil {
		return st, err
	}
	st.Items = len(bulk.counts)
	if err := l.db.SyncWAL(); err != nil {
		return st, err
	}
	if !bulk.unwritten {
		// Every ordinal the load read or wrote is in the store: the
		// transitions that follow find them in the cache (ordcache.go).
		for u, o1 := range bulk.ords {
			if o1 != 0 {
				l.ords.cache.put(u, o1-1)
			}
		}
	}
	if err := l.deleteMeta(intent); err != nil {
		return st, err
	}
	return st, nil
}

// readAhead returns the state of each like's (user, item) before the load
// and the ordinals of its users that have one, read in key order (one
// iterator each, seeking forward) rather than by a random point Get per
// like: the difference between a load bound by index and data block
// lookups and one bound by writing. It also marks every like whose pair
// came earlier in the input (dup): only a pair's first like counts, and
// it must be applied once, whichever batch it falls in.
func (l *Likes) readAhead(b *business, likes []LoadLike) (prior []stateRec, dup []bool, ords map[uint64]uint32, err error) {
	order := make([]int32, len(likes))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(x, y int32) int {
		a, c := likes[x], likes[y]
		switch {
		case a.User != c.User:
			if a.User < c.User {
				return -1
			}
			return 1
		case a.Item < c.Item:
			return -1
		case a.Item > c.Item:
			return 1
		}
		return 0
	})
	prior = make([]stateRec, len(likes))
	dup = make([]bool, len(likes))
	for n := 1; n < len(order); n++ {
		a, c := likes[order[n-1]], likes[order[n]]
		if a.User == c.User && a.Item == c.Item {
			// The sort is not stable: keep the pair's first like.
			if order[n-1] < order[n] {
				dup[order[n]] = true
				order[n] = order[n-1]
			} else {
				dup[order[n-1]] = true
			}
		}
	}
	it, err := l.fam.state.NewIter(&store.IterOptions{Prefix: appendBizPrefix(nil, prefixState, b.id)})
	if err != nil {
		return nil, nil, nil, err
	}
	var key []byte
	valid := false
	for _, i := range order {
		key = appendStateKey(key[:0], b.id, likes[i].User, likes[i].Item)
		if !valid || bytes.Compare(it.Key(), key) < 0 {
			valid = it.SeekGE(key)
		}
		if valid {
			if bytes.Equal(it.Key(), key) {
				s, err := decodeState(it.Value())
				if err != nil {
					it.Close()
					return nil, nil, nil, fmt.Errorf("%w: %v", store.ErrCorrupt, err)
				}
				prior[i] = s
			}
		}
	}
	if err := it.Close(); err != nil {
		return nil, nil, nil, err
	}
	ords = map[uint64]uint32{}
	oit, err := l.fam.ord.NewIter(nil)
	if err != nil {
		return nil, nil, nil, err
	}
	last := uint64(0)
	valid = false
	for n, i := range order {
		u := likes[i].User
		if n > 0 && u == last {
			continue
		}
		last = u
		key = appendOrdKey(key[:0], u)
		if !valid || bytes.Compare(oit.Key(), key) < 0 {
			valid = oit.SeekGE(key)
		}
		ords[u] = 0 // none: the map holds ordinal+1
		if valid {
			if bytes.Equal(oit.Key(), key) {
				ord, err := decodeOrd(oit.Value())
				if err != nil {
					oit.Close()
					return nil, nil, nil, fmt.Errorf("%w: %v", store.ErrCorrupt, err)
				}
				ords[u] = ord + 1
			}
		}
	}
	return prior, dup, ords, oit.Close()
}

// loadCounts loads the given counts into b's counter without the log.
func (l *Likes) loadCounts(ctx context.Context, b *business, counts map[uint64]Counts) error {
	if len(counts) == 0 {
		return nil
	}
	rows := store.LoadRows{IDs: make([]uint64, 0, len(counts)), Vals: make([]uint64, 0, 2*len(counts))}
	for item, c := range counts {
		rows.IDs = append(rows.IDs, item)
		rows.Vals = append(rows.Vals, c.Likes, c.Dislikes)
	}
	_, err := l.db.Load(ctx, b.counter, rows, nil)
	return err
}

func (l *Likes) deleteMeta(key []byte) error {
	b := l.db.NewBatch()
	defer b.Close()
	if err := l.fam.meta.Delete(b, key); err != nil {
		return err
	}
	return b.Commit()
}

// interruptedLoadIDs returns the ids of the businesses with a load intent:
// those whose bulk load a crash interrupted (see the file comment).
func (l *Likes) interruptedLoadIDs() (map[uint32]bool, error) {
	p := appendMetaKey(nil, metaLoadPre)
	it, err := l.fam.meta.NewIter(&store.IterOptions{Prefix: p})
	if err != nil {
		return nil, err
	}
	ids := map[uint32]bool{}
	for it.Next() {
		if _, err := decodeLoadIntent(it.Value()); err != nil {
			it.Close()
			return nil, fmt.Errorf("%w: likes load intent: %v", store.ErrCorrupt, err)
		}
		ids[u32at(it.Key(), len(p))] = true
	}
	if err := it.Close(); err != nil {
		return nil, err
	}
	return ids, nil
}

// InterruptedLoads returns, sorted, the businesses whose bulk load a crash
// interrupted and that this Likes could not finish because its store is
// read-only. Their item counts may lag their sets (Counts and boards of
// counts are then low) until a writable New finishes the load (any
// command that opens the store for writing, or running the load again).
// A Likes on a writable store always returns none: New finished them.
func (l *Likes) InterruptedLoads() []string {
	var names []string
	for _, b := range *l.biz.byName.Load() {
		if l.interrupted[b.id] {
			names = append(names, b.name)
		}
	}
	slices.Sort(names)
	return names
}

// finishInterruptedLoads recounts the businesses whose load a crash
// interrupted (see the file comment).
func (l *Likes) finishInterruptedLoads() error {
	found, err := l.interruptedLoadIDs()
	if err != nil {
		return err
	}
	ids := slices.Sorted(maps.Keys(found))
	for _, id := range ids {
		var b *business
		for _, x := range *l.biz.byName.Load() {
			if x.id == id {
				b = x
			}
		}
		if b != nil {
			if err := l.recount(context.Background(), b); err != nil {
				return fmt.Errorf("likes: finish the interrupted load of %s: %w", b.name, err)
			}
			if err := l.db.SyncWAL(); err != nil {
				return err
			}
		}
		if err := l.deleteMeta(appendLoadIntentKey(nil, id)); err != nil {
			return err
		}
	}
	return nil
}

// recount sets the counts of every item in b's sets to its set sizes,
// loading the rows that differ.
func (l *Likes) recount(ctx context.Context, b *business) error {
	sizes, err := l.setSizes(nil, b.id)
	if err != nil {
		return err
	}
	fix := map[uint64]Counts{}
	var vals [2]uint64
	for item, c := range sizes {
		got, err := b.c.Get(item, vals[:0])
		if err != nil {
			return err
		}
		if got[0] != c.Likes || got[1] != c.Dislikes {
			fix[item] = c
		}
	}
	return l.loadCounts(ctx, b, fix)
}

// setSizes returns the sizes of the like and dislike sets of every item of
// business biz that has a member, read from snap (nil: the live store).
func (l *Likes) setSizes(snap *store.Snapshot, biz uint32) (map[uint64]Counts, error) {
	sizes := map[uint64]Counts{}
	add := func(item uint64, kind byte, n uint64) {
		c := sizes[item]
		if kind == kindLike {
			c.Likes += n
		} else {
			c.Dislikes += n
		}
		sizes[item] = c
	}
	it, err := l.iter(snap, l.fam.set, &store.IterOptions{Prefix: appendBizPrefix(nil, prefixSet, biz)})
	if err != nil {
		return nil, err
	}
	for it.Next() {
		k := it.Key()
		add(u64at(k, 5), k[13], 1)
	}
	if err := it.Close(); err != nil {
		return nil, err
	}
	it, err = l.iter(snap, l.fam.bitmap, &store.IterOptions{Prefix: appendBizPrefix(nil, prefixBitmap, biz)})
	if err != nil {
		return nil, err
	}
	for it.Next() {
		k := it.Key()
		v := it.Value()
		if v == nil {
			continue
		}
		bm, _, err := store.DecodeRoaring(v)
		if err != nil {
			it.Close()
			return nil, fmt.Errorf("%w: %v", store.ErrCorrupt, err)
		}
		add(u64at(k, 5), k[13], bm.GetCardinality())
	}
	if err := it.Close(); err != nil {
		return nil, err
	}
	return sizes, nil
}

// iter opens an iterator on snap, or on the live store when snap is nil.
func (l *Likes) iter(snap *store.Snapshot, f *store.Family, o *store.IterOptions) (*store.Iter, error) {
	if snap != nil {
		return snap.NewIter(f, o)
	}
	return f.NewIter(o)
}

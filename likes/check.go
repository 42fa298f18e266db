package likes

import (
	"errors"
	"fmt"

	"github.com/tallydb/tally/store"
)

// Check verifies every invariant of the package's data against each other:
// for every business, each state is in the matching set and nothing else
// is; the like list holds exactly the liked items with their times; the
// counts equal the set sizes; an item's sets are either list keys or
// roaring chunks, as its record says; the all-time board matches the
// counts and the kept day boards and day scores match the like times; the
// in-memory histogram of every board equals its board keys' count by
// bucket; every owner's received total equals the likes of
// the items it owns; and the ordinal maps are each other's inverse. It
// waits for the transitions in flight, holds off new ones while it runs,
// and reads everything: for tests and for tools on a quiet store.
func (l *Likes) Check() error {
	l.loadMu.Lock()
	defer l.loadMu.Unlock()
	snap, err := l.db.NewSnapshot()
	if err != nil {
		return err
	}
	defer snap.Close()
	ords, err := l.checkOrdinals(snap)
	if err != nil {
		return err
	}
	if err := l.checkFilter(snap); err != nil {
		return err
	}
	if err := l.checkCaches(snap); err != nil {
		return err
	}
	if err := l.checkBusinessRecords(snap); err != nil {
		return err
	}
	if err := l.checkHistograms(snap); err != nil {
		return err
	}
	received := map[uint64]uint64{}
	var errs []error
	for _, name := range l.Businesses() {
		b := (*l.biz.byName.Load())[name]
		if err := l.checkBusiness(snap, b, ords, received); err != nil {
			errs = append(errs, fmt.Errorf("business %s: %w", name, err))
		}
	}
	for owner, want := range received {
		got, err := l.Received(owner)
		if err != nil {
			return err
		}
		if got != want {
			errs = append(errs, fmt.Errorf("owner %d: received %d, items owned have %d likes", owner, got, want))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("likes: check: %w", err)
	}
	return nil
}

// checkOrdinals checks the two ordinal maps and returns user → ordinal.
func (l *Likes) checkOrdinals(snap *store.Snapshot) (map[uint64]uint32, error) {
	fwd := map[uint64]uint32{}
	it, err := snap.NewIter(l.fam.ord, nil)
	if err != nil {
		return nil, err
	}
	for it.Next() {
		ord, err := decodeOrd(it.Value())
		if err != nil {
			it.Close()
			return nil, err
		}
		fwd[u64at(it.Key(), 1)] = ord
	}
	if err := it.Close(); err != nil {
		return nil, err
	}
	n := 0
	it, err = snap.NewIter(l.fam.ordRev, nil)
	if err != nil {
		return nil, err
	}
	l.ords.mu.Lock()
	next, first, gaps := l.ords.next, l.ords.first, l.ords.gaps
	l.ords.mu.Unlock()
	since := uint32(0) // ordinals from first on
	for it.Next() {
		ord := u32at(it.Key(), 1)
		user, err := decodeOrdUser(it.Value())
		if err != nil {
			it.Close()
			return nil, err
		}
		if o, ok := fwd[user]; !ok || o != ord {
			it.Close()
			return nil, fmt.Errorf("likes: check: ordinal %d maps to user %d, which maps to %d (%v)", ord, user, o, ok)
		}
		if ord >= next {
			it.Close()
			return nil, fmt.Errorf("likes: check: ordinal %d not below the next one %d", ord, next)
		}
		if ord >= first {
			since++
		}
		n++
	}
	if err := it.Close(); err != nil {
		return nil, err
	}
	// Every ordinal handed out since New was written, unless a commit
	// failed: the allocator counted none that its batch skipped (a
	// duplicate of a re-applied entry, TestReappliedEntryKeepsOrdinals),
	// so replicas number users alike. (Check holds loadMu: no group holds
	// a pending ordinal.)
	if !gaps && since != next-first {
		return nil, fmt.Errorf("likes: check: %d ordinals handed out since New (%d to %d), %d in the store", next-first, first, next-1, since)
	}
	if n != len(fwd) {
		return nil, fmt.Errorf("likes: check: %d users have ordinals, %d ordinals have users", len(fwd), n)
	}
	err = l.ords.cache.each(func(user uint64, ord uint32) error {
		if o, ok := fwd[user]; !ok || o != ord {
			return fmt.Errorf("likes: check: the ordinal cache maps user %d to %d, the store to %d (%v)", user, ord, o, ok)
		}
		return nil
	})
	return fwd, err
}

type pair struct {
	item, user uint64
}

func (l *Likes) checkBusiness(snap *store.Snapshot, b *business, ords map[uint64]uint32, received map[uint64]uint64) error {
	biz := b.id
	var errs []error
	bad := func(format string, args ...any) bool {
		if len(errs) < 20 {
			errs = append(errs, fmt.Errorf(format, args...))
		}
		return false
	}
	// States: the source of truth.
	states := map[pair]stateRec{}
	it, err := snap.NewIter(l.fam.state, &store.IterOptions{Prefix: appendBizPrefix(nil, prefixState, biz)})
	if err != nil {
		return err
	}
	for it.Next() {
		k := it.Key()
		s, err := decodeState(it.Value())
		if err != nil {
			it.Close()
			return err
		}
		states[pair{stateKeyItem(k), u64at(k, 5)}] = s
	}
	if err := it.Close(); err != nil {
		return err
	}
	// Item records.
	recs := map[uint64]itemRec{}
	it, err = snap.NewIter(l.fam.item, &store.IterOptions{Prefix: appendBizPrefix(nil, prefixItem, biz)})
	if err != nil {
		return err
	}
	for it.Next() {
		r, err := decodeItem(it.Value())
		if err != nil {
			it.Close()
			return err
		}
		if r == (itemRec{}) {
			bad("item %d has an empty record", u64at(it.Key(), 5))
		}
		recs[u64at(it.Key(), 5)] = r
	}
	if err := it.Close(); err != nil {
		return err
	}
	// Sets: list keys and roaring chunks, as members.
	members := map[pair]byte{}
	it, err = snap.NewIter(l.fam.set, &store.IterOptions{Prefix: appendBizPrefix(nil, prefixSet, biz)})
	if err != nil {
		return err
	}
	for it.Next() {
		k := it.Key()
		item, kind, user := u64at(k, 5), k[13], setKeyUser(k)
		if recs[item].roaring {
			bad("item %d is roaring but has list key for user %d", item, user)
		}
		if kind != kindLike && kind != kindDislike {
			bad("item %d: set kind %d", item, kind)
		}
		members[pair{item, user}] = kind
	}
	if err := it.Close(); err != nil {
		return err
	}
	users := map[uint32]uint64{}
	for u, o := range ords {
		users[o] = u
	}
	it, err = snap.NewIter(l.fam.bitmap, &store.IterOptions{Prefix: appendBizPrefix(nil, prefixBitmap, biz)})
	if err != nil {
		return err
	}
	for it.Next() {
		k := it.Key()
		item, kind := u64at(k, 5), k[13]
		v := it.Value()
		if v == nil {
			continue
		}
		bm, _, err := store.DecodeRoaring(v)
		if err != nil {
			it.Close()
			return err
		}
		if err := chunkMembersOK(bm, bitmapKeyChunk(k)); err != nil {
			bad("item %d chunk %d: %v", item, bitmapKeyChunk(k), err)
		}
		if !recs[item].roaring {
			bad("item %d has roaring chunks but is a list", item)
		}
		bm.Iterate(func(ord uint32) bool {
			u, ok := users[ord]
			if !ok {
				return bad("item %d: ordinal %d has no user", item, ord)
			}
			if _, dup := members[pair{item, u}]; dup {
				return bad("item %d: user %d in two sets", item, u)
			}
			members[pair{item, u}] = kind
			return true
		})
	}
	if err := it.Close(); err != nil {
		return err
	}
	// States and members agree.
	want := map[uint64]Counts{}
	for p, s := range states {
		c := want[p.item]
		if s.state == Liked {
			c.Likes++
		} else {
			c.Dislikes++
		}
		want[p.item] = c
		if members[p] != kindOf(s.state) {
			bad("item %d user %d: state %s, set kind %d", p.item, p.user, s.state, members[p])
		}
	}
	for p, k := range members {
		if _, ok := states[p]; !ok {
			bad("item %d user %d: in set %d without a state", p.item, p.user, k)
		}
	}
	// User lists: exactly the likes, at their times.
	listed := 0
	it, err = snap.NewIter(l.fam.user, &store.IterOptions{Prefix: appendBizPrefix(nil, prefixUser, biz)})
	if err != nil {
		return err
	}
	for it.Next() {
		k := it.Key()
		user := u64at(k, 5)
		ms, item := userKeyTimeItem(k)
		if s := states[pair{item, user}]; s.state != Liked || s.ms != ms {
			bad("user %d lists item %d at %d; its state is %s at %d", user, item, ms, s.state, s.ms)
		}
		listed++
	}
	if err := it.Close(); err != nil {
		return err
	}
	liked := 0
	for _, s := range states {
		if s.state == Liked {
			liked++
		}
	}
	if listed != liked {
		bad("user lists hold %d likes, states %d", listed, liked)
	}
	// Counts (not while an interrupted load, which a read-only store
	// cannot finish, leaves them lagging the sets: see InterruptedLoads).
	var vals [2]uint64
	for item, c := range want {
		if l.interrupted[biz] {
			break
		}
		got, err := b.c.Get(item, vals[:0])
		if err != nil {
			return err
		}
		if got[0] != c.Likes || got[1] != c.Dislikes {
			bad("item %d: counts %d/%d, sets hold %d/%d", item, got[0], got[1], c.Likes, c.Dislikes)
		}
	}
	// (Whether a set above the roaring threshold was converted is policy,
	// not an invariant: a lowered threshold converts sets as they change.)
	for item, r := range recs {
		if r.owner != 0 {
			received[r.owner] += want[item].Likes
		}
	}
	// Boards.
	scores := map[uint32]map[uint64]uint64{dayAll: {}}
	for item, c := range want {
		if c.Likes > 0 {
			scores[dayAll][item] = c.Likes
		}
	}
	first, days := l.firstKeptDay(l.today())
	if days {
		for p, s := range states {
			if d := dayOf(s.ms); s.state == Liked && d >= first {
				if scores[d] == nil {
					scores[d] = map[uint64]uint64{}
				}
				scores[d][p.item]++
			}
		}
	}
	if err := l.checkBoards(snap, biz, first, days, scores, bad); err != nil {
		return err
	}
	return errors.Join(errs...)
}

// checkBoards compares the boards and day scores of days ≥ first (and the
// all-time board) with scores. (The histograms: checkHistograms.)
func (l *Likes) checkBoards(snap *store.Snapshot, biz, first uint32, days bool, scores map[uint32]map[uint64]uint64, bad func(string, ...any) bool) error {
	lo := func(p byte) []byte {
		if !days {
			return appendDayPrefix(nil, p, biz, dayAll)
		}
		return appendDayPrefix(nil, p, biz, first)
	}
	hi := func(p byte) []byte { return keyEnd(appendBizPrefix(nil, p, biz)) }
	seen := map[uint32]int{}
	it, err := snap.NewIter(l.fam.board, &store.IterOptions{Lower: lo(prefixBoard), Upper: hi(prefixBoard)})
	if err != nil {
		return err
	}
	for it.Next() {
		k := it.Key()
		day := u32at(k, 5)
		bucket, item := boardKeyBucketItem(k)
		if s := scores[day][item]; s == 0 || bucketOf(s) != bucket {
			bad("board %s: item %d in bucket %d, its score is %d", dayName(day), item, bucket, s)
		}
		seen[day]++
	}
	if err := it.Close(); err != nil {
		return err
	}
	for day, m := range scores {
		if seen[day] != len(m) {
			bad("board %s: %d keys, %d items scored", dayName(day), seen[day], len(m))
		}
	}
	it, err = snap.NewIter(l.fam.dayScore, &store.IterOptions{Lower: lo(prefixDayScore), Upper: hi(prefixDayScore)})
	if err != nil {
		return err
	}
	n := map[uint32]int{}
	for it.Next() {
		k := it.Key()
		v := it.Value()
		if v == nil {
			continue
		}
		s, err := store.DecodeAdd(v)
		if err != nil {
			it.Close()
			return err
		}
		day, item := u32at(k, 5), u64at(k, 9)
		if uint64(s) != scores[day][item] || s <= 0 {
			bad("day score %s item %d: %d, want %d", dayName(day), item, s, scores[day][item])
		}
		n[day]++
	}
	if err := it.Close(); err != nil {
		return err
	}
	for day, m := range scores {
		if day != dayAll && n[day] != len(m) {
			bad("day scores %s: %d keys, %d items", dayName(day), n[day], len(m))
		}
	}
	return nil
}

func dayName(d uint32) string {
	if d == dayAll {
		return "all-time"
	}
	return fmt.Sprintf("day %d", d)
}

// checkCaches checks that every stripe's cached item record and day score
// is what the store holds: a group's cache takes only what its batch
// wrote (not a duplicate's, TestReappliedEntryKeepsCaches). A day score
// of a day no longer kept is not compared: the prune job deletes those,
// and no write reads them.
func (l *Likes) checkCaches(snap *store.Snapshot) error {
	keep, days := l.firstKeptDay(l.today())
	var kb, vb []byte
	for i := range l.stripes {
		for _, e := range l.stripes[i].cache {
			if !e.valid {
				continue
			}
			kb = appendItemKey(kb[:0], e.biz, e.item)
			var rec itemRec
			v, ok, err := snap.Get(l.fam.item, kb, vb[:0])
			if err != nil {
				return err
			}
			if ok {
				if rec, err = decodeItem(v); err != nil {
					return fmt.Errorf("%w: %v", store.ErrCorrupt, err)
				}
			}
			if rec != e.rec {
				return fmt.Errorf("likes: check: stripe %d caches item %d of business %d as %+v, the store holds %+v", i, e.item, e.biz, e.rec, rec)
			}
			if !e.hasDay || !days || e.day < keep {
				continue
			}
			kb = appendDayScoreKey(kb[:0], e.biz, e.day, e.item)
			var score int64
			if v, ok, err = snap.Get(l.fam.dayScore, kb, vb[:0]); err != nil {
				return err
			} else if ok {
				if score, err = store.DecodeAdd(v); err != nil {
					return err
				}
			}
			if score != e.dayScore {
				return fmt.Errorf("likes: check: stripe %d caches item %d of business %d with day %d score %d, the store holds %d", i, e.item, e.biz, e.day, e.dayScore, score)
			}
		}
	}
	return nil
}

// checkBusinessRecords checks that the businesses in memory are the
// stored records (a record's commit skipped as a duplicate declares none:
// TestReappliedBusinessRecord).
func (l *Likes) checkBusinessRecords(snap *store.Snapshot) error {
	mem := *l.biz.byName.Load()
	p := appendMetaKey(nil, metaBizPre)
	it, err := snap.NewIter(l.fam.meta, &store.IterOptions{Prefix: p})
	if err != nil {
		return err
	}
	n := 0
	for it.Next() {
		name := string(it.Key()[len(p):])
		r, err := decodeBiz(it.Value())
		if err != nil {
			it.Close()
			return fmt.Errorf("%w: likes business record %s: %v", store.ErrCorrupt, name, err)
		}
		if b := mem[name]; b == nil || b.id != r.id {
			it.Close()
			return fmt.Errorf("likes: check: business %s (id %d) stored, not in memory (or with another id)", name, r.id)
		}
		n++
	}
	if err := it.Close(); err != nil {
		return err
	}
	if n != len(mem) {
		return fmt.Errorf("likes: check: %d businesses in memory, %d stored", len(mem), n)
	}
	return nil
}

// checkHistograms compares the in-memory histograms (hist.go) with the
// board keys of every board, kept or not yet pruned: each bucket's count,
// and each board's group sums and total with its buckets. Check holds
// loadMu, so no writer of board keys runs.
func (l *Likes) checkHistograms(snap *store.Snapshot) error {
	hs := l.hist()
	if hs.err != nil {
		return fmt.Errorf("likes: check: board histograms: %w", hs.err)
	}
	want := map[boardID]map[uint16]int64{}
	it, err := snap.NewIter(l.fam.board, nil)
	if err != nil {
		return err
	}
	for it.Next() {
		k := it.Key()
		id := boardID{u32at(k, 1), u32at(k, 5)}
		bucket, _ := boardKeyBucketItem(k)
		if want[id] == nil {
			want[id] = map[uint16]int64{}
		}
		want[id][bucket]++
	}
	if err := it.Close(); err != nil {
		return err
	}
	var errs []error
	bad := func(format string, args ...any) {
		if len(errs) < 20 {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	for id, h := range hs.boards {
		var items int64
		for g := range histGroups {
			var sum int64
			for i := range bucketSub {
				b := uint16(g*bucketSub + i)
				n := h.count(b)
				if n != want[id][b] {
					bad("histogram of business %d board %s: bucket %d holds %d items, the board %d", id.biz, dayName(id.day), b, n, want[id][b])
				}
				sum += n
			}
			if sum != h.groups[g] {
				bad("histogram of business %d board %s: group %d sums to %d, its buckets to %d", id.biz, dayName(id.day), g, h.groups[g], sum)
			}
			items += sum
		}
		if items != h.items || items <= 0 {
			bad("histogram of business %d board %s: %d items, its buckets hold %d", id.biz, dayName(id.day), h.items, items)
		}
	}
	for id, m := range want {
		if hs.boards[id] != nil {
			continue
		}
		for b, n := range m {
			bad("histogram of business %d board %s: none, the board holds %d items in bucket %d", id.biz, dayName(id.day), n, b)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("likes: check: %w", err)
	}
	return nil
}

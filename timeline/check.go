package timeline

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/RoaringBitmap/roaring/v2/roaring64"

	"github.com/tallydb/tally/store"
)

// Check verifies the package's invariants against everything it stored,
// and then the store's own (DB.Check). It reads every key of every
// timeline family: for tests after each step of a simulation, and for
// tools on a quiet store (no writes in flight; queued jobs may be pending).
//
//   - every ordinal maps to a user whose row names it back, and no
//     ordinal is a chunk sentinel;
//   - followee lists are sorted, at most MaxFollowees long, their lengths
//     are the users' followees counts, and follower bitmaps hold exactly
//     the reverse edges, with the chunk's sentinel, their sizes being the
//     followers counts;
//   - every outbox entry has its post record naming the same author and
//     the reverse, and post counts equal outbox sizes;
//   - a user with a read mark is in the push set; push-set chunks hold
//     their sentinel and only ordinals of users;
//   - inboxes belong to users and hold entries of valid ids, the sentinel
//     (key 0) only with value 0;
//   - pending backfill marks equal their in-memory index, name a followed
//     account and a user with a read mark; pulled authors equal theirs;
//     removed posts equal theirs, and none is published.
func (t *Timeline) Check() error {
	err := t.check()
	if err != nil {
		return fmt.Errorf("timeline: check: %w", err)
	}
	return t.db.Check()
}

func (t *Timeline) check() error {
	if err := t.checkRequired(); err != nil {
		return err
	}
	v, ok, err := t.fam.config.Get(configKey, nil)
	if err != nil {
		return err
	}
	if !ok {
		return errors.New("no config")
	}
	if c, err := decodeConfig(v); err != nil || c != t.Config() {
		return fmt.Errorf("config %+v (%v), in force %+v", c, err, t.Config())
	}

	// Ordinals.
	idOf := map[uint32]uint64{}
	var firstErr error
	fail := func(format string, args ...any) bool {
		if firstErr == nil {
			firstErr = fmt.Errorf(format, args...)
		}
		return false
	}
	var row [numCols]uint64
	rowOf := func(id uint64) []uint64 {
		r, err := t.row(id, row[:0])
		if err != nil && firstErr == nil {
			firstErr = err
		}
		return r
	}
	var maxSeen uint32
	if err := t.scan(t.fam.ords, nil, func(k, v []byte) bool {
		o := binary.BigEndian.Uint32(k[1:])
		id := binary.BigEndian.Uint64(v)
		if o&0xffff == 0 {
			return fail("ordinal %d is a chunk sentinel", o)
		}
		if r := rowOf(id); uint32(r[colOrd]) != o {
			return fail("ordinal %d maps to user %d, whose row names ordinal %d", o, id, r[colOrd])
		}
		idOf[o] = id
		maxSeen = max(maxSeen, o)
		return true
	}); err != nil {
		return err
	}
	if firstErr != nil {
		return firstErr
	}
	t.allocMu.Lock()
	next := t.nextOrd
	t.allocMu.Unlock()
	if maxSeen >= next {
		return fmt.Errorf("ordinal %d allocated at or above the next free one %d", maxSeen, next)
	}

	// Followees and followers.
	want := map[uint32]*roaring.Bitmap{} // author ordinal -> follower ordinals
	followees := map[uint32][]uint64{}
	if err := t.scan(t.fam.followees, nil, func(k, v []byte) bool {
		o := binary.BigEndian.Uint32(k[1:])
		id, ok := idOf[o]
		if !ok {
			return fail("followee list of unknown ordinal %d", o)
		}
		list, err := decodeFollowees(v, nil)
		if err != nil {
			return fail("followees of %d: %v", id, err)
		}
		if len(list) == 0 {
			return fail("empty followee list of %d kept", id)
		}
		if len(list) > MaxFollowees {
			return fail("user %d follows %d accounts, past MaxFollowees", id, len(list))
		}
		followees[o] = list
		for _, f := range list {
			if f == id {
				return fail("user %d follows themselves", id)
			}
			fo := uint32(rowOf(f)[colOrd])
			if fo == 0 {
				return fail("user %d follows %d, who has no ordinal", id, f)
			}
			if want[fo] == nil {
				want[fo] = roaring.New()
			}
			want[fo].Add(o)
		}
		return true
	}); err != nil {
		return err
	}
	if firstErr != nil {
		return firstErr
	}
	got := map[uint32]*roaring.Bitmap{}
	if err := t.scan(t.fam.followers, nil, func(k, v []byte) bool {
		a := binary.BigEndian.Uint32(k[1:])
		c := binary.BigEndian.Uint16(k[5:])
		bm, _, err := store.DecodeRoaring(v)
		if err != nil {
			return fail("followers of ordinal %d chunk %d: %v", a, c, err)
		}
		if !bm.Contains(sentinel(c)) {
			return fail("followers of ordinal %d chunk %d lack the sentinel", a, c)
		}
		bm.Remove(sentinel(c))
		if !bm.IsEmpty() && (chunkOf(bm.Minimum()) != c || chunkOf(bm.Maximum()) != c) {
			return fail("followers of ordinal %d chunk %d hold ordinals of another chunk", a, c)
		}
		if got[a] == nil {
			got[a] = roaring.New()
		}
		got[a].Or(bm)
		return true
	}); err != nil {
		return err
	}
	if firstErr != nil {
		return firstErr
	}
	for o, id := range idOf {
		r := rowOf(id)
		w, g := want[o], got[o]
		if w == nil {
			w = roaring.New()
		}
		if g == nil {
			g = roaring.New()
		}
		if !w.Equals(g) {
			return fmt.Errorf("followers of %d: bitmaps hold %d, followee lists say %d (%v vs %v)", id, g.GetCardinality(), w.GetCardinality(), g.ToArray(), w.ToArray())
		}
		if r[colFollowers] != w.GetCardinality() {
			return fmt.Errorf("user %d: followers count %d, set holds %d", id, r[colFollowers], w.GetCardinality())
		}
		if r[colFollowees] != uint64(len(followees[o])) {
			return fmt.Errorf("user %d: followees count %d, list holds %d", id, r[colFollowees], len(followees[o]))
		}
	}
	for a := range got {
		if _, ok := idOf[a]; !ok {
			return fmt.Errorf("followers of unknown ordinal %d", a)
		}
	}

	// Posts and outboxes.
	postsOf := map[uint64]uint64{}
	outboxOf := map[uint64]uint64{} // post -> author
	if err := t.scan(t.fam.outbox, nil, func(k, _ []byte) bool {
		a, p := binary.BigEndian.Uint64(k[1:]), postOfOutboxKey(k)
		if checkID("", a) != nil || checkID("", p) != nil {
			return fail("outbox key %x out of range", k)
		}
		if prev, dup := outboxOf[p]; dup {
			return fail("post %d in the outboxes of %d and %d", p, prev, a)
		}
		outboxOf[p] = a
		postsOf[a]++
		return true
	}); err != nil {
		return err
	}
	if firstErr != nil {
		return firstErr
	}
	nposts := 0
	if err := t.scan(t.fam.posts, nil, func(k, v []byte) bool {
		p := binary.BigEndian.Uint64(k[1:])
		rec, err := decodePost(v)
		if err != nil {
			return fail("post %d: %v", p, err)
		}
		if outboxOf[p] != rec.author {
			return fail("post %d: record names author %d, outbox %d", p, rec.author, outboxOf[p])
		}
		nposts++
		return true
	}); err != nil {
		return err
	}
	if firstErr != nil {
		return firstErr
	}
	if nposts != len(outboxOf) {
		return fmt.Errorf("%d post records for %d outbox entries", nposts, len(outboxOf))
	}
	for a, n := range postsOf {
		if r := rowOf(a); r[colPosts] != n {
			return fmt.Errorf("user %d: posts count %d, outbox holds %d", a, r[colPosts], n)
		}
	}
	for _, id := range idOf {
		if r := rowOf(id); r[colPosts] != postsOf[id] {
			return fmt.Errorf("user %d: posts count %d, outbox holds %d", id, r[colPosts], postsOf[id])
		}
	}

	// Push set and read marks.
	active := roaring.New()
	if err := t.scan(t.fam.active, nil, func(k, v []byte) bool {
		c := binary.BigEndian.Uint16(k[1:])
		bm, _, err := store.DecodeRoaring(v)
		if err != nil {
			return fail("push set chunk %d: %v", c, err)
		}
		if !bm.Contains(sentinel(c)) {
			return fail("push set chunk %d lacks the sentinel", c)
		}
		bm.Remove(sentinel(c))
		it := bm.Iterator()
		for it.HasNext() {
			o := it.Next()
			if _, ok := idOf[o]; !ok || chunkOf(o) != c {
				return fail("push set chunk %d holds ordinal %d", c, o)
			}
		}
		active.Or(bm)
		return true
	}); err != nil {
		return err
	}
	if firstErr != nil {
		return firstErr
	}
	t.push.RLock()
	same := active.Equals(t.push.bm)
	t.push.RUnlock()
	if !same {
		return errors.New("push set differs from its in-memory copy")
	}
	for o, id := range idOf {
		if r := rowOf(id); r[colRead] != 0 && !active.Contains(o) {
			return fmt.Errorf("user %d has a read mark but is not in the push set", id)
		}
	}

	// Inboxes.
	if err := t.scan(t.fam.inbox, nil, func(k, v []byte) bool {
		o := binary.BigEndian.Uint32(k[1:])
		if _, ok := idOf[o]; !ok {
			return fail("inbox of unknown ordinal %d", o)
		}
		tl, err := store.DecodeTopList(v)
		if err != nil {
			return fail("inbox of ordinal %d: %v", o, err)
		}
		for _, e := range tl.Entries {
			if e.Key == 0 && e.Value != 0 || e.Key != 0 && (e.Key > MaxID || e.Value == 0 || e.Value > MaxID) {
				return fail("inbox of ordinal %d: entry %+v", o, e)
			}
		}
		return true
	}); err != nil {
		return err
	}
	if firstErr != nil {
		return firstErr
	}

	// Pending marks, pulled authors, fan-outs in flight.
	pend := map[uint32]map[uint64]struct{}{}
	if err := t.scan(t.fam.pending, nil, func(k, _ []byte) bool {
		o, a := binary.BigEndian.Uint32(k[1:]), binary.BigEndian.Uint64(k[5:])
		id, ok := idOf[o]
		if !ok {
			return fail("pending mark of unknown ordinal %d", o)
		}
		if !contains(followees[o], a) {
			return fail("pending mark of %d for %d, not followed", id, a)
		}
		if rowOf(id)[colRead] == 0 {
			return fail("pending mark of %d, who has no read mark", id)
		}
		if pend[o] == nil {
			pend[o] = map[uint64]struct{}{}
		}
		pend[o][a] = struct{}{}
		return true
	}); err != nil {
		return err
	}
	if firstErr != nil {
		return firstErr
	}
	t.pending.RLock()
	same = maps.EqualFunc(pend, t.pending.m, func(a, b map[uint64]struct{}) bool { return maps.Equal(a, b) })
	t.pending.RUnlock()
	if !same {
		return errors.New("pending marks differ from their in-memory index")
	}
	var pulled []uint64
	if err := t.scan(t.fam.pulled, nil, func(k, _ []byte) bool {
		pulled = append(pulled, binary.BigEndian.Uint64(k[1:]))
		return true
	}); err != nil {
		return err
	}
	if !slices.Equal(pulled, *t.pulled.Load()) && !(len(pulled) == 0 && len(*t.pulled.Load()) == 0) {
		return fmt.Errorf("pulled authors %v, in memory %v", pulled, *t.pulled.Load())
	}
	removed := roaring64.New()
	if err := t.scan(t.fam.removed, nil, func(k, v []byte) bool {
		p := binary.BigEndian.Uint64(k[1:])
		if _, ok := outboxOf[p]; ok {
			return fail("post %d is both published and removed", p)
		}
		removed.Add(p)
		return true
	}); err != nil {
		return err
	}
	if firstErr != nil {
		return firstErr
	}
	t.removed.RLock()
	same = removed.Equals(t.removed.bm)
	t.removed.RUnlock()
	if !same {
		return errors.New("removed posts differ from their in-memory set")
	}
	return nil
}

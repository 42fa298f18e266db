package likes

import (
	"fmt"
	"slices"
	"sync"

	"github.com/tallydb/tally/store"
)

// Counts are an item's like and dislike counts.
type Counts struct {
	Likes, Dislikes uint64
}

// Counts returns the counts of items of business (zeros for items nobody
// liked or disliked, and for a business that does not exist yet), in
// dst[:0] (grown if needed). At most MaxStates items.
func (l *Likes) Counts(business string, items []uint64, dst []Counts) ([]Counts, error) {
	dst = dst[:0]
	if len(items) > MaxStates {
		return dst, fmt.Errorf("%w: %d items (limit %d)", ErrLimit, len(items), MaxStates)
	}
	b, err := l.lookup(business)
	if err != nil {
		return dst, err
	}
	dst = slices.Grow(dst, len(items))[:len(items)]
	if b == nil {
		clear(dst)
		return dst, nil
	}
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	vals, err := b.c.MultiGet(items, sc.vals[:0])
	sc.vals = vals
	if err != nil {
		return dst[:0], err
	}
	for i := range items {
		dst[i] = Counts{Likes: vals[2*i], Dislikes: vals[2*i+1]}
	}
	return dst, nil
}

// Received returns the likes received by owner: the likes of every item of
// every business whose owner it is.
func (l *Likes) Received(owner uint64) (uint64, error) {
	c := l.received.Load()
	if c == nil {
		return 0, nil
	}
	return c.GetColumn(owner, ReceivedColumn)
}

// Owner returns the owner of item (0: none named).
func (l *Likes) Owner(business string, item uint64) (uint64, error) {
	b, err := l.lookup(business)
	if err != nil || b == nil {
		return 0, err
	}
	var kb, vb []byte
	rec, err := l.readItem(b.id, item, &kb, &vb)
	return rec.owner, err
}

// scratch is per-call memory of the read paths, pooled so a page of states
// does not allocate.
type scratch struct {
	key, val, pre, up []byte
	vals              []uint64
	order             []int
}

var scratchPool = sync.Pool{New: func() any {
	return &scratch{key: make([]byte, 0, 32), val: make([]byte, 0, 16), pre: make([]byte, 0, 16), up: make([]byte, 0, 16)}
}}

// States returns user's state on each of items of business (the page's
// "did I like these"), in dst[:0] (grown if needed). At most MaxStates
// items; None for a business that does not exist yet.
//
// The states of one user are adjacent keys (business | user | item), so a
// page is answered by one iterator bounded to the user's keys and one seek
// per item in item order: measured faster than a point Get per item for
// pages of 20 (BenchmarkStates: iter vs get; see the package doc).
func (l *Likes) States(business string, user uint64, items []uint64, dst []State) ([]State, error) {
	return l.states(business, user, items, dst, false)
}

func (l *Likes) states(business string, user uint64, items []uint64, dst []State, byGet bool) ([]State, error) {
	dst = dst[:0]
	if len(items) > MaxStates {
		return dst, fmt.Errorf("%w: %d items (limit %d)", ErrLimit, len(items), MaxStates)
	}
	b, err := l.lookup(business)
	if err != nil {
		return dst, err
	}
	dst = slices.Grow(dst, len(items))[:len(items)]
	clear(dst)
	if b == nil || len(items) == 0 {
		return dst, nil
	}
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	if byGet || len(items) == 1 {
		for i, item := range items {
			s, err := l.readState(b.id, user, item, &sc.key, &sc.val)
			if err != nil {
				return dst[:0], err
			}
			dst[i] = s.state
		}
		return dst, nil
	}
	// Seek in item order.
	sc.order = sc.order[:0]
	for i := range items {
		sc.order = append(sc.order, i)
	}
	slices.SortFunc(sc.order, func(a, b int) int {
		switch x, y := items[a], items[b]; {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	})
	sc.pre = appendStateUserPrefix(sc.pre[:0], b.id, user)
	sc.key = appendStateKey(sc.key[:0], b.id, user, items[sc.order[0]])
	it, err := l.fam.state.NewIter(&store.IterOptions{Prefix: sc.pre, Lower: sc.key})
	if err != nil {
		return dst[:0], err
	}
	valid := it.Next()
	for _, i := range sc.order {
		if !valid {
			break
		}
		item := items[i]
		k := it.Key()
		if cur := stateKeyItem(k); cur < item {
			sc.key = appendStateKey(sc.key[:0], b.id, user, item)
			if valid = it.SeekGE(sc.key); !valid {
				break
			}
			k = it.Key()
		}
		if stateKeyItem(k) == item {
			v := it.Value()
			if v == nil {
				break
			}
			s, err := decodeState(v)
			if err != nil {
				it.Close()
				return dst[:0], fmt.Errorf("%w: %v", store.ErrCorrupt, err)
			}
			dst[i] = s.state
		}
	}
	if err := it.Close(); err != nil {
		return dst[:0], err
	}
	return dst, nil
}

// State returns user's state on one item.
func (l *Likes) State(business string, user, item uint64) (State, error) {
	var one [1]State
	s, err := l.States(business, user, []uint64{item}, one[:0])
	if err != nil {
		return None, err
	}
	return s[0], nil
}

// Page is one page of a list: ids in list order, and the cursor of the
// next page ("" when this page ends the list).
type Page struct {
	IDs []uint64
	// Times are the like times (Unix milliseconds) of a UserLikes page,
	// one per id; nil for likers.
	Times []int64
	Next  string
}

// Likers returns a page of at most limit (1..MaxPage) users who like item
// of business, after cursor ("" for the first page). Small sets list in
// user id order, roaring sets (RoaringThreshold members and more) in
// ordinal order (the order users first joined a roaring set); a cursor of
// a set that was converted in between is ErrStaleCursor.
func (l *Likes) Likers(business string, item uint64, cursor string, limit int) (Page, error) {
	return l.members(business, item, kindLike, limit, cursor)
}

// Dislikers is Likers for the users who dislike item.
func (l *Likes) Dislikers(business string, item uint64, cursor string, limit int) (Page, error) {
	return l.members(business, item, kindDislike, limit, cursor)
}

func (l *Likes) members(bizName string, item uint64, kind byte, limit int, cur string) (Page, error) {
	if limit < 1 || limit > MaxPage {
		return Page{}, fmt.Errorf("%w: page of %d (want 1..%d)", ErrLimit, limit, MaxPage)
	}
	b, err := l.lookup(bizName)
	if err != nil {
		return Page{}, err
	}
	var c cursor
	if cur != "" {
		if c, err = decodeCursor(l.secret, cur); err != nil {
			return Page{}, err
		}
		if c.kind == curUserLikes || c.setKind != kind || b == nil || c.biz != b.id || c.subject != item {
			return Page{}, fmt.Errorf("%w: issued for another list", ErrBadCursor)
		}
	}
	if b == nil {
		return Page{}, nil
	}
	snap, err := l.db.NewSnapshot()
	if err != nil {
		return Page{}, err
	}
	defer snap.Close()
	v, ok, err := snap.Get(l.fam.item, appendItemKey(nil, b.id, item), nil)
	if err != nil {
		return Page{}, err
	}
	var rec itemRec
	if ok {
		if rec, err = decodeItem(v); err != nil {
			return Page{}, fmt.Errorf("%w: %v", store.ErrCorrupt, err)
		}
	}
	if rec.roaring {
		if cur != "" && c.kind != curLikersRoaring {
			return Page{}, ErrStaleCursor
		}
		return l.roaringPage(snap, b, item, kind, limit, cur != "", uint32(c.a))
	}
	if cur != "" && c.kind != curLikersList {
		return Page{}, fmt.Errorf("%w: a roaring cursor for a list set", ErrBadCursor)
	}
	p := appendSetPrefix(nil, b.id, item, kind)
	o := &store.IterOptions{Prefix: p}
	if cur != "" {
		if c.a == ^uint64(0) {
			return Page{}, nil
		}
		o.Lower = appendSetKey(nil, b.id, item, kind, c.a+1)
	}
	it, err := snap.NewIter(l.fam.set, o)
	if err != nil {
		return Page{}, err
	}
	var pg Page
	more := false
	for it.Next() {
		if len(pg.IDs) == limit {
			more = true
			break
		}
		pg.IDs = append(pg.IDs, setKeyUser(it.Key()))
	}
	if err := it.Close(); err != nil {
		return Page{}, err
	}
	if more {
		pg.Next = string(appendCursor(nil, l.secret, cursor{kind: curLikersList, setKind: kind, biz: b.id, subject: item, a: pg.IDs[len(pg.IDs)-1]}))
	}
	return pg, nil
}

// roaringPage lists the members of a roaring set after ordinal after (if
// hasAfter) and maps them to users.
func (l *Likes) roaringPage(snap *store.Snapshot, b *business, item uint64, kind byte, limit int, hasAfter bool, after uint32) (Page, error) {
	o := &store.IterOptions{Prefix: appendBitmapPrefix(nil, b.id, item, kind)}
	if hasAfter {
		if after == ^uint32(0) {
			return Page{}, nil
		}
		o.Lower = appendBitmapKey(nil, b.id, item, kind, chunkOf(after))
	}
	it, err := snap.NewIter(l.fam.bitmap, o)
	if err != nil {
		return Page{}, err
	}
	ords := make([]uint32, 0, limit+1)
	for len(ords) <= limit && it.Next() {
		v := it.Value()
		if v == nil {
			continue
		}
		bm, _, err := store.DecodeRoaring(v)
		if err != nil {
			it.Close()
			return Page{}, fmt.Errorf("%w: %v", store.ErrCorrupt, err)
		}
		if err := chunkMembersOK(bm, bitmapKeyChunk(it.Key())); err != nil {
			it.Close()
			return Page{}, fmt.Errorf("%w: %v", store.ErrCorrupt, err)
		}
		m := bm.Iterator()
		if hasAfter {
			m.AdvanceIfNeeded(after + 1)
		}
		for len(ords) <= limit && m.HasNext() {
			x := m.Next()
			if hasAfter && x <= after {
				continue
			}
			ords = append(ords, x)
		}
	}
	if err := it.Close(); err != nil {
		return Page{}, err
	}
	var pg Page
	more := len(ords) > limit
	if more {
		ords = ords[:limit]
	}
	pg.IDs = make([]uint64, len(ords))
	if len(ords) > 0 {
		// Ordinals ascend, so one iterator walks the reverse map forward.
		rit, err := snap.NewIter(l.fam.ordRev, &store.IterOptions{Lower: appendOrdRevKey(nil, ords[0])})
		if err != nil {
			return Page{}, err
		}
		for i, ord := range ords {
			key := appendOrdRevKey(nil, ord)
			if !rit.SeekGE(key) || string(rit.Key()) != string(key) {
				rit.Close()
				return Page{}, fmt.Errorf("%w: likes: ordinal %d of a set has no user", store.ErrCorrupt, ord)
			}
			u, err := decodeOrdUser(rit.Value())
			if err != nil {
				rit.Close()
				return Page{}, fmt.Errorf("%w: %v", store.ErrCorrupt, err)
			}
			pg.IDs[i] = u
		}
		if err := rit.Close(); err != nil {
			return Page{}, err
		}
	}
	if more {
		pg.Next = string(appendCursor(nil, l.secret, cursor{kind: curLikersRoaring, setKind: kind, biz: b.id, subject: item, a: uint64(ords[len(ords)-1])}))
	}
	return pg, nil
}

// UserLikes returns a page of at most limit (1..MaxPage) items user likes
// in business, newest like first, after cursor ("" for the first page).
func (l *Likes) UserLikes(business string, user uint64, cur string, limit int) (Page, error) {
	if limit < 1 || limit > MaxPage {
		return Page{}, fmt.Errorf("%w: page of %d (want 1..%d)", ErrLimit, limit, MaxPage)
	}
	b, err := l.lookup(business)
	if err != nil {
		return Page{}, err
	}
	var c cursor
	if cur != "" {
		if c, err = decodeCursor(l.secret, cur); err != nil {
			return Page{}, err
		}
		if c.kind != curUserLikes || b == nil || c.biz != b.id || c.subject != user {
			return Page{}, fmt.Errorf("%w: issued for another list", ErrBadCursor)
		}
	}
	if b == nil {
		return Page{}, nil
	}
	o := &store.IterOptions{Prefix: appendUserPrefix(nil, b.id, user), Reverse: true}
	if cur != "" {
		o.Upper = appendUserKey(nil, b.id, user, int64(c.a), c.b)
	}
	it, err := l.fam.user.NewIter(o)
	if err != nil {
		return Page{}, err
	}
	var pg Page
	more := false
	for it.Next() {
		if len(pg.IDs) == limit {
			more = true
			break
		}
		ms, item := userKeyTimeItem(it.Key())
		pg.IDs = append(pg.IDs, item)
		pg.Times = append(pg.Times, ms)
	}
	if err := it.Close(); err != nil {
		return Page{}, err
	}
	if more {
		n := len(pg.IDs) - 1
		pg.Next = string(appendCursor(nil, l.secret, cursor{kind: curUserLikes, biz: b.id, subject: user, a: uint64(pg.Times[n]), b: pg.IDs[n]}))
	}
	return pg, nil
}

package timeline

// The follow graph: user ordinals, followee lists, follower bitmaps, counts
// and the pulled (celebrity) authors.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/RoaringBitmap/roaring/v2/roaring64"

	"github.com/tallydb/tally/store"
)

// CheckID returns an error wrapping ErrBadID for the first of ids outside
// 1..MaxID, naming it as what ("user", "post", ...), and nil if there is
// none. It is the one statement of the id rule: every call of the package
// checks its ids with it before anything is written, and a host that
// parses ids (the CLI, the server) calls it to refuse them up front with
// the same rule and error.
func CheckID(what string, ids ...uint64) error {
	for _, id := range ids {
		if id == 0 || id > MaxID {
			if what == "" { // the caller does not know which: just the id
				return fmt.Errorf("%w: %d (want 1..%d)", ErrBadID, id, uint64(MaxID))
			}
			return fmt.Errorf("%w: %s id %d (want 1..%d)", ErrBadID, what, id, uint64(MaxID))
		}
	}
	return nil
}

// loadConfig reads the persisted configuration, applies override's
// non-zero fields, and persists the result if it changed.
func (t *Timeline) loadConfig(override Config) error {
	v, ok, err := t.fam.config.Get(configKey, nil)
	if err != nil {
		return err
	}
	base := DefaultConfig()
	if ok {
		if base, err = decodeConfig(v); err != nil {
			return fmt.Errorf("%w: timeline config: %v", store.ErrCorrupt, err)
		}
	}
	c := override.withDefaults(base)
	if !ok || c != base {
		if err := t.storeConfig(c); err != nil {
			return err
		}
	}
	t.cfg.Store(&c)
	return nil
}

func (t *Timeline) storeConfig(c Config) error {
	b := t.db.NewBatch()
	defer b.Close()
	if err := t.fam.config.Put(b, configKey, appendConfig(nil, c)); err != nil {
		return err
	}
	return b.Commit()
}

// loadState rebuilds the in-memory mirrors from the store: the next free
// ordinal, the pulled authors, the pending backfills, the removed posts and
// the push set. It reads everything first and then publishes each mirror
// under its own lock, so New and a reopen (reloadState) share it and page
// readers see either the old mirrors or the new ones.
func (t *Timeline) loadState() error {
	next := uint32(1)
	it, err := t.fam.ords.NewIter(&store.IterOptions{Reverse: true})
	if err != nil {
		return err
	}
	if it.Next() {
		next = binary.BigEndian.Uint32(it.Key()[1:]) + 1
	}
	if err := closeIter(it); err != nil {
		return err
	}
	pulled := []uint64{}
	if err := t.scan(t.fam.pulled, nil, func(k, _ []byte) bool {
		pulled = append(pulled, binary.BigEndian.Uint64(k[1:]))
		return true
	}); err != nil {
		return err
	}
	pending := map[uint32]map[uint64]struct{}{}
	if err := t.scan(t.fam.pending, nil, func(k, _ []byte) bool {
		ord, author := binary.BigEndian.Uint32(k[1:]), binary.BigEndian.Uint64(k[5:])
		if pending[ord] == nil {
			pending[ord] = map[uint64]struct{}{}
		}
		pending[ord][author] = struct{}{}
		return true
	}); err != nil {
		return err
	}
	removed := roaring64.New()
	if err := t.scan(t.fam.removed, nil, func(k, _ []byte) bool {
		removed.Add(binary.BigEndian.Uint64(k[1:]))
		return true
	}); err != nil {
		return err
	}
	push, err := t.activeSet()
	if err != nil {
		return err
	}
	pairs, err := t.loadPairs()
	if err != nil {
		return err
	}
	reposts, err := t.loadReposts()
	if err != nil {
		return err
	}
	high := uint64(0)
	if !removed.IsEmpty() {
		high = removed.Maximum()
	}
	it, err = t.fam.posts.NewIter(&store.IterOptions{Reverse: true})
	if err != nil {
		return err
	}
	if it.Next() {
		high = max(high, binary.BigEndian.Uint64(it.Key()[1:]))
	}
	if err := closeIter(it); err != nil {
		return err
	}
	// NB: New runs before any publish and a reopen holds graphMu's write
	// side, so no publisher holds a post stripe here.
	for s := range t.postHigh {
		t.postHigh[s] = high
	}
	t.shared.mu.Lock()
	t.shared.job = 0 // the jobs in the queue run every marker there is
	t.shared.low = 0
	t.shared.mu.Unlock()
	t.allocMu.Lock()
	t.nextOrd = next
	t.allocMu.Unlock()
	t.pulledMu.Lock()
	t.pulled.Store(&pulled)
	t.pulledMu.Unlock()
	t.pending.Lock()
	t.pending.m = pending
	t.pending.Unlock()
	t.removed.Lock()
	t.removed.bm = removed
	t.removed.Unlock()
	t.push.Lock()
	t.push.bm = push
	t.push.Unlock()
	t.pairs.Lock()
	t.pairs.s = pairs
	t.pairs.Unlock()
	t.reposts.Lock()
	t.reposts.set(reposts)
	t.reposts.Unlock()
	t.fcache.clear()
	t.folCache.clear()
	return nil
}

// closeIter closes it and returns the first of its iteration and close
// errors.
func closeIter(it *store.Iter) error {
	err := it.Err()
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	return err
}

// scan calls fn for every key of f under prefix (the whole family if nil),
// in key order, until fn returns false.
func (t *Timeline) scan(f *store.Family, prefix []byte, fn func(k, v []byte) bool) error {
	var o *store.IterOptions
	if prefix != nil {
		o = &store.IterOptions{Prefix: prefix}
	}
	it, err := f.NewIter(o)
	if err != nil {
		return err
	}
	for it.Next() {
		if !fn(it.Key(), it.Value()) {
			break
		}
	}
	return closeIter(it)
}

// row reads a user's row of UsersCounter into dst.
func (t *Timeline) row(id uint64, dst []uint64) ([]uint64, error) {
	return t.users.Get(id, dst)
}

// ordOf returns id's ordinal, 0 if it has none.
func (t *Timeline) ordOf(id uint64) (uint32, error) {
	var buf [numCols]uint64
	r, err := t.row(id, buf[:0])
	if err != nil {
		return 0, err
	}
	return uint32(r[colOrd]), nil
}

// idOf returns the user id of ord.
func (t *Timeline) idOf(ord uint32, buf []byte) (uint64, bool, error) {
	var k [5]byte
	v, ok, err := t.fam.ords.Get(ordKey(k[:0], ord), buf)
	if err != nil || !ok {
		return 0, false, err
	}
	return binary.BigEndian.Uint64(v), true, nil
}

// ensureOrds gives every id of ids that has none an ordinal, in one batch.
// Ordinals are dense from 1, skipping multiples of 2^16 (the chunk
// sentinels). The caller holds graphMu (either side).
func (t *Timeline) ensureOrds(ids ...uint64) error {
	var buf [numCols]uint64
	var missing []uint64
	for _, id := range ids {
		r, err := t.row(id, buf[:0])
		if err != nil {
			return err
		}
		if r[colOrd] == 0 {
			missing = append(missing, id)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	t.allocMu.Lock()
	defer t.allocMu.Unlock()
	b := t.db.NewBatch()
	defer b.Close()
	// Ordinals are this node's own numbering, allocated by reads too (a
	// user's first page): on a replica they differ from the leader's, and
	// the allocation is no part of a replicated entry (store apply.go).
	b.SetLocal()
	next := t.nextOrd
	seen := make(map[uint64]bool, len(missing))
	var k [5]byte
	var v [8]byte
	for _, id := range missing {
		if seen[id] {
			continue
		}
		seen[id] = true
		r, err := t.row(id, buf[:0]) // again, under allocMu
		if err != nil {
			return err
		}
		if r[colOrd] != 0 {
			continue
		}
		if next&0xffff == 0 {
			next++
		}
		if next == 0 || uint64(next) > maxOrd {
			return ErrFull
		}
		if err := b.SetColumn(UsersCounter, id, ColOrd, uint64(next)); err != nil {
			return err
		}
		binary.BigEndian.PutUint64(v[:], id)
		if err := t.fam.ords.Put(b, ordKey(k[:0], next), v[:]); err != nil {
			return err
		}
		next++
	}
	if b.Empty() {
		return nil
	}
	if err := b.Commit(); err != nil {
		return err
	}
	t.nextOrd = next
	return nil
}

// followeesOf reads the followee list of the user with ordinal ord.
func (t *Timeline) followeesOf(ord uint32, dst []uint64, buf []byte) ([]uint64, []byte, error) {
	if ord == 0 {
		return dst[:0], buf, nil
	}
	var k [5]byte
	v, ok, err := t.fam.followees.Get(followeesKey(k[:0], ord), buf)
	if err != nil || !ok {
		return dst[:0], v, err
	}
	dst, err = decodeFollowees(v, dst)
	if err != nil {
		return dst[:0], v, fmt.Errorf("%w: followees of ordinal %d: %v", store.ErrCorrupt, ord, err)
	}
	return dst, v, nil
}

// followersOperand returns a tl_followers (or tl_active) operand adding
// add and removing remove (0: none) in the chunk both belong to; it always
// adds the chunk's sentinel.
func followersOperand(add, remove []uint32, chunk uint16) []byte {
	a := roaring.New()
	a.Add(sentinel(chunk))
	a.AddMany(add)
	var r *roaring.Bitmap
	if len(remove) > 0 {
		r = roaring.New()
		r.AddMany(remove)
	}
	op, err := store.RoaringOperand(nil, a, r)
	if err != nil {
		// RoaringOperand fails only when a bitmap cannot serialize, which a
		// fresh in-memory bitmap always can.
		panic(fmt.Sprintf("timeline: roaring operand: %v", err))
	}
	return op
}

// pairKey is the coalescing key of a pair's jobs.
func pairKey(user, followee uint64) []byte {
	k := make([]byte, 0, 17)
	k = append(k, 'f')
	k = binary.BigEndian.AppendUint64(k, user)
	return binary.BigEndian.AppendUint64(k, followee)
}

// IsFollowing reports whether user follows followee.
func (t *Timeline) IsFollowing(user, followee uint64) (bool, error) {
	if err := CheckID("user", user); err != nil {
		return false, err
	}
	if err := CheckID("followee", followee); err != nil {
		return false, err
	}
	ord, err := t.ordOf(user)
	if err != nil {
		return false, err
	}
	list, _, err := t.followeesOf(ord, nil, nil)
	if err != nil {
		return false, err
	}
	_, found := slices.BinarySearch(list, followee)
	return found, nil
}

// VisibleFollowees calls fn for each account user follows whose posts user
// sees (neither muted by user nor hiding from user), in id order; fn
// returning false stops. It is the set FollowObserver's calls describe.
//
// NB: the pairs are read from memory, not from the caller's view of the
// store; setPairs holds them exclusively from before its commit to after
// it updates them, so a caller inside db.View never reads pairs older
// than its view (it may read newer ones, whose observer operations
// committed before anything the caller then writes).
func (t *Timeline) VisibleFollowees(user uint64, fn func(followee uint64) bool) error {
	return t.Followees(user, func(f uint64) bool {
		if !t.IsVisible(user, f) {
			return true
		}
		return fn(f)
	})
}

// Followees calls fn for each account user follows, in id order, from a
// consistent view; fn returning false stops.
func (t *Timeline) Followees(user uint64, fn func(followee uint64) bool) error {
	if err := CheckID("user", user); err != nil {
		return err
	}
	ord, err := t.ordOf(user)
	if err != nil {
		return err
	}
	list, _, err := t.followeesOf(ord, nil, nil)
	if err != nil {
		return err
	}
	for _, f := range list {
		if !fn(f) {
			break
		}
	}
	return nil
}

// PostCounts returns the post counts of authors (one batched read of the
// users counter), in dst[:0]. It reads every column of the authors' rows
// into dst and keeps the "posts" one, so it does not allocate when dst has
// room for NumColumns values per author (a reused buffer soon does).
func (t *Timeline) PostCounts(authors []uint64, dst []uint64) ([]uint64, error) {
	if len(authors) == 0 {
		return dst[:0], nil
	}
	rows, err := t.users.MultiGet(authors, dst)
	if err != nil {
		return rows[:0], err
	}
	n := t.users.NumColumns()
	for i := range authors {
		rows[i] = rows[i*n+colPosts] // i*n+colPosts >= i: read before written
	}
	return rows[:len(authors)], nil
}

// UserInfo is what a profile page shows of a user.
type UserInfo struct {
	ID                   uint64
	Followers, Followees uint64
	Posts                uint64
	Active               bool   // the user's inbox is live (pushed to)
	LastRead             uint64 // Unix seconds of the last recorded home read, 0 if not active
	Pulled               bool   // the user's posts are pulled at read time, not pushed
	Ordinal              uint32 // the user's dense ordinal, 0 if none
}

// User returns user's counts in one read of UsersCounter. An unknown user
// reads as zeros.
func (t *Timeline) User(user uint64) (UserInfo, error) {
	if err := CheckID("user", user); err != nil {
		return UserInfo{}, err
	}
	var buf [numCols]uint64
	r, err := t.row(user, buf[:0])
	if err != nil {
		return UserInfo{}, err
	}
	return UserInfo{ID: user, Followers: r[colFollowers], Followees: r[colFollowees], Posts: r[colPosts],
		Active: r[colRead] != 0, LastRead: r[colRead], Pulled: t.isPulled(user), Ordinal: uint32(r[colOrd])}, nil
}

// IDPage is a page of a follower or followee list.
type IDPage struct {
	IDs    []uint64
	Cursor string // continues after the last id; empty when NoMore
	NoMore bool   // the list ends with this page
}

// CheckLimit returns an error wrapping ErrBadLimit for a page limit that
// the page reads (Home, FollowersPage, FolloweesPage, PostsPage) refuse:
// below 0 or above MaxLimit (0 means DefaultLimit). It is the one
// statement of the rule, for a host that parses a limit and refuses it
// before anything is opened.
func CheckLimit(limit int64) error {
	if limit < 0 || limit > MaxLimit {
		return fmt.Errorf("%w: %d (want 0..%d; 0 means %d)", ErrBadLimit, limit, MaxLimit, DefaultLimit)
	}
	return nil
}

// checkLimit validates a page limit; 0 means DefaultLimit.
func checkLimit(limit int) (int, error) {
	if err := CheckLimit(int64(limit)); err != nil {
		return 0, err
	}
	if limit == 0 {
		limit = DefaultLimit
	}
	return limit, nil
}

// pageStart validates the arguments of a page read of the list kind owned
// by id (named what in errors): the limit (0 means DefaultLimit) and the
// position the cursor holds (started is false for the first page).
func pageStart(what string, id uint64, kind byte, cursor string, limit int) (n int, pos uint64, started bool, err error) {
	if err := CheckID(what, id); err != nil {
		return 0, 0, false, err
	}
	if n, err = checkLimit(limit); err != nil {
		return 0, 0, false, err
	}
	pos, started, err = decodeCursor(cursor, kind, id)
	return n, pos, started, err
}

// FolloweesPage returns a page of the accounts user follows, in id order,
// starting after cursor ("" for the first page).
func (t *Timeline) FolloweesPage(user uint64, cursor string, limit int) (IDPage, error) {
	limit, after, started, err := pageStart("user", user, cursorFollowees, cursor, limit)
	if err != nil {
		return IDPage{}, err
	}
	ord, err := t.ordOf(user)
	if err != nil {
		return IDPage{}, err
	}
	list, _, err := t.followeesOf(ord, nil, nil)
	if err != nil {
		return IDPage{}, err
	}
	i := 0
	if started {
		i, _ = slices.BinarySearch(list, after+1)
	}
	var p IDPage
	for ; i < len(list) && len(p.IDs) < limit; i++ {
		p.IDs = append(p.IDs, list[i])
	}
	if i >= len(list) {
		p.NoMore = true
	} else {
		p.Cursor = encodeCursor(cursorFollowees, user, p.IDs[len(p.IDs)-1])
	}
	return p, nil
}

// FollowersPage returns a page of author's followers, in ordinal order (the
// order users first appeared in the graph), starting after cursor ("" for
// the first page). A follower added or removed behind the cursor does not
// shift later pages.
func (t *Timeline) FollowersPage(author uint64, cursor string, limit int) (IDPage, error) {
	limit, after, started, err := pageStart("author", author, cursorFollowers, cursor, limit)
	if err != nil {
		return IDPage{}, err
	}
	aOrd, err := t.ordOf(author)
	if err != nil {
		return IDPage{}, err
	}
	var p IDPage
	if aOrd == 0 {
		p.NoMore = true
		return p, nil
	}
	var from uint64 // the first ordinal to list
	if started {
		from = after + 1
	}
	var more bool
	var last uint32
	var idBuf [8]byte
	err = t.followerChunks(aOrd, from, func(bm *roaring.Bitmap) (bool, error) {
		it := bm.Iterator()
		if from <= maxOrd {
			it.AdvanceIfNeeded(uint32(from))
		}
		for it.HasNext() {
			o := it.Next()
			if uint64(o) < from || o&0xffff == 0 {
				continue
			}
			if len(p.IDs) == limit {
				more = true
				return false, nil
			}
			id, ok, err := t.idOf(o, idBuf[:0])
			if err != nil {
				return false, err
			}
			if !ok {
				return false, fmt.Errorf("%w: follower ordinal %d of %d has no user", store.ErrCorrupt, o, author)
			}
			p.IDs = append(p.IDs, id)
			last = o
		}
		return true, nil
	})
	if err != nil {
		return IDPage{}, err
	}
	if more {
		p.Cursor = encodeCursor(cursorFollowers, author, uint64(last))
	} else {
		p.NoMore = true
	}
	return p, nil
}

// followerChunks calls fn with the follower bitmap of each chunk of the
// author with ordinal aOrd, from the chunk holding ordinal from on, in
// order, until fn returns false.
func (t *Timeline) followerChunks(aOrd uint32, from uint64, fn func(*roaring.Bitmap) (bool, error)) error {
	if from > maxOrd {
		return nil
	}
	it, err := t.fam.followers.NewIter(&store.IterOptions{
		Prefix: binary.BigEndian.AppendUint32([]byte{pfxFollowers}, aOrd),
		Lower:  followersKey(nil, aOrd, chunkOf(uint32(from))),
	})
	if err != nil {
		return err
	}
	for it.Next() {
		bm, err := it.Roaring() // decoded once, by the read's check
		if err != nil {
			it.Close()
			return err
		}
		ok, err := fn(bm)
		if err != nil || !ok {
			it.Close()
			return err
		}
	}
	return closeIter(it)
}

// isPulled reports whether author is pulled at read time.
func (t *Timeline) isPulled(author uint64) bool {
	_, ok := slices.BinarySearch(*t.pulled.Load(), author)
	return ok
}

// maybePull marks author pulled once their follower count reaches the
// threshold. Pulled is sticky: an author who falls below stays pulled
// (their posts were not pushed while pulled, so pushing again would need a
// backfill of every follower; reading a few pulled authors is cheap).
func (t *Timeline) maybePull(author, followers uint64) error {
	if followers < t.Config().PullThreshold || t.isPulled(author) {
		return nil
	}
	return t.markPulled(author)
}

// markPulled persists author as pulled and publishes the new set.
func (t *Timeline) markPulled(author uint64) error {
	t.pulledMu.Lock()
	defer t.pulledMu.Unlock()
	cur := *t.pulled.Load()
	i, found := slices.BinarySearch(cur, author)
	if found {
		return nil
	}
	b := t.db.NewBatch()
	defer b.Close()
	// Pulled is derived from the follower count, idempotent and sticky:
	// not part of a replicated entry's numbered commits (store apply.go).
	b.SetLocal()
	if err := t.fam.pulled.Put(b, pulledKey(nil, author), nil); err != nil {
		return err
	}
	if err := b.Commit(); err != nil {
		return err
	}
	next := slices.Insert(slices.Clone(cur), i, author)
	t.pulled.Store(&next)
	return nil
}

// PulledAuthors returns the ids of the authors pulled at read time.
func (t *Timeline) PulledAuthors() []uint64 { return slices.Clone(*t.pulled.Load()) }

// push set index (mirror of tl_active).

func (t *Timeline) pushAdd(ords []uint32) {
	t.push.Lock()
	t.push.bm.AddMany(ords)
	t.push.Unlock()
}

func (t *Timeline) pushRemove(ords []uint32) {
	t.push.Lock()
	for _, o := range ords {
		t.push.bm.Remove(o)
	}
	t.push.Unlock()
}

// pending index (mirror of tl_pending).

func (t *Timeline) pendingAdd(ord uint32, author uint64) {
	t.pending.Lock()
	t.pendingAddLocked(ord, author)
	t.pending.Unlock()
}

// pendingAddNew adds a pending mark to the index and reports whether it
// was not there: the caller removes only such marks when its commit fails
// or is a duplicate.
func (t *Timeline) pendingAddNew(ord uint32, author uint64) bool {
	t.pending.Lock()
	defer t.pending.Unlock()
	_, had := t.pending.m[ord][author]
	t.pendingAddLocked(ord, author)
	return !had
}

func (t *Timeline) pendingAddLocked(ord uint32, author uint64) {
	m := t.pending.m[ord]
	if m == nil {
		m = map[uint64]struct{}{}
		t.pending.m[ord] = m
	}
	m[author] = struct{}{}
}

func (t *Timeline) pendingRemove(ord uint32, author uint64) {
	t.pending.Lock()
	if m := t.pending.m[ord]; m != nil {
		delete(m, author)
		if len(m) == 0 {
			delete(t.pending.m, ord)
		}
	}
	t.pending.Unlock()
}

func (t *Timeline) pendingClear(ord uint32) {
	t.pending.Lock()
	delete(t.pending.m, ord)
	t.pending.Unlock()
}

func (t *Timeline) pendingHas(ord uint32, author uint64) bool {
	t.pending.RLock()
	defer t.pending.RUnlock()
	_, ok := t.pending.m[ord][author]
	return ok
}

// pendingOf appends the followees of ord whose backfill is pending to dst.
func (t *Timeline) pendingOf(ord uint32, dst []uint64) []uint64 {
	t.pending.RLock()
	for a := range t.pending.m[ord] {
		dst = append(dst, a)
	}
	t.pending.RUnlock()
	return dst
}

// fanoutPost returns the post of a fan-out job's key.
func fanoutPost(kind string, key []byte) (uint64, bool) {
	if kind != jobFanout || len(key) != 9 || key[0] != 'p' {
		return 0, false
	}
	return binary.BigEndian.Uint64(key[1:]), true
}

func fanoutKey(post uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{'p'}, post)
}

var errStop = errors.New("stop")

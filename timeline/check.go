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
//     removed posts equal theirs, and none is published;
//   - a post whose fan-out has not finished waits for a fan-out job of its
//     own or for the shared job (a marker in tl_fanq, with a shared job
//     queued), and every marker names a published post of its author.
//
// Check holds graphMu's read side while it compares the mirrors with the
// store. A store reopen (reopen.go) holds the write side from its Before
// until After has reloaded the mirrors, and the store takes writes (and
// so looks healed) before the timeline's After runs, other packages'
// Afters first: a check in that window compared the stored state with
// mirrors the reload was about to replace (TestCheckDuringReopen). Now it
// waits for the reload, and no reopen starts while it runs. The store's
// own check runs after the lock is released.
func (t *Timeline) Check() error {
	t.graphMu.RLock()
	err := t.check()
	t.graphMu.RUnlock()
	if err != nil {
		return fmt.Errorf("timeline: check: %w", err)
	}
	return t.db.Check()
}

// check runs the phases below in order; each reads what the earlier ones
// gathered (a phase that needs the ordinals runs after checkOrdinals) and
// returns the first violation it finds.
func (t *Timeline) check() error {
	c := &checker{t: t, idOf: map[uint32]uint64{}}
	for _, phase := range []func() error{
		c.checkConfig,
		c.checkOrdinals,
		c.checkFollowGraph,
		c.checkPosts,
		c.checkPushSet,
		c.checkInboxes,
		c.checkPending,
		c.checkPulled,
		c.checkRemoved,
		c.checkFanouts,
		c.checkPairs,
		c.checkXShard,
	} {
		if err := phase(); err != nil {
			return err
		}
	}
	return nil
}

// checker holds what Check's phases learn for the later ones.
type checker struct {
	t *Timeline

	idOf      map[uint32]uint64   // ordinal -> user (checkOrdinals)
	followees map[uint32][]uint64 // ordinal -> followee list (checkFollowGraph)
	outboxOf  map[uint64]uint64   // post -> author (checkPosts)
	unfanned  map[uint64]bool     // posts whose fan-out has not finished (checkPosts)

	// err is the first violation a scan callback found; the callback
	// returns failf's false to stop the scan.
	err error
	buf [numCols]uint64
}

// failf records a violation, if it is the first, and returns false, so a
// scan callback can end with return c.failf(...).
func (c *checker) failf(format string, args ...any) bool {
	if c.err == nil {
		c.err = fmt.Errorf(format, args...)
	}
	return false
}

// row returns id's row in a buffer the next call reuses; an error reading
// it is recorded as the violation and reads as an empty row.
func (c *checker) row(id uint64) []uint64 {
	r, err := c.t.row(id, c.buf[:0])
	if err != nil {
		if c.err == nil {
			c.err = err
		}
		c.buf = [numCols]uint64{}
		return c.buf[:]
	}
	return r
}

// scan runs fn over every key of f and returns the scan's error or the
// first violation fn recorded.
func (c *checker) scan(f *store.Family, fn func(k, v []byte) bool) error {
	if err := c.t.scan(f, nil, fn); err != nil {
		return err
	}
	return c.err
}

// checkConfig checks the required observers and that the stored config is
// the one in force.
func (c *checker) checkConfig() error {
	t := c.t
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
	if cfg, err := decodeConfig(v); err != nil || cfg != t.Config() {
		return fmt.Errorf("config %+v (%v), in force %+v", cfg, err, t.Config())
	}
	return nil
}

// checkOrdinals checks that every ordinal maps to a user whose row names
// it back, that none is a chunk sentinel or at or past the next free one,
// and gathers idOf.
func (c *checker) checkOrdinals() error {
	var maxSeen uint32
	if err := c.scan(c.t.fam.ords, func(k, v []byte) bool {
		o := binary.BigEndian.Uint32(k[1:])
		id := binary.BigEndian.Uint64(v)
		if o&0xffff == 0 {
			return c.failf("ordinal %d is a chunk sentinel", o)
		}
		if r := c.row(id); uint32(r[colOrd]) != o {
			return c.failf("ordinal %d maps to user %d, whose row names ordinal %d", o, id, r[colOrd])
		}
		c.idOf[o] = id
		maxSeen = max(maxSeen, o)
		return true
	}); err != nil {
		return err
	}
	c.t.allocMu.Lock()
	next := c.t.nextOrd
	c.t.allocMu.Unlock()
	if maxSeen >= next {
		return fmt.Errorf("ordinal %d allocated at or above the next free one %d", maxSeen, next)
	}
	return nil
}

// checkFollowGraph checks the follow graph both ways: followee lists
// (sorted by their codec, non-empty, at most MaxFollowees, no self-follow,
// every followee a user), follower bitmaps (sentinel, one chunk each,
// exactly the reverse of the lists), and both counts of every user. It
// gathers followees.
func (c *checker) checkFollowGraph() error {
	want, err := c.followeeLists()
	if err != nil {
		return err
	}
	got, err := c.followerSets()
	if err != nil {
		return err
	}
	for o, id := range c.idOf {
		r := c.row(id)
		w, g := want[o], got[o]
		if w == nil {
			w = roaring.New()
		}
		if g == nil {
			g = roaring.New()
		}
		if !w.Equals(g) {
			if err := c.remoteFollowers(id, w, g); err != nil {
				return err
			}
		}
		if r[colFollowers] != g.GetCardinality() {
			return fmt.Errorf("user %d: followers count %d, set holds %d", id, r[colFollowers], g.GetCardinality())
		}
		if r[colFollowees] != uint64(len(c.followees[o])) {
			return fmt.Errorf("user %d: followees count %d, list holds %d", id, r[colFollowees], len(c.followees[o]))
		}
	}
	for a := range got {
		if _, ok := c.idOf[a]; !ok {
			return fmt.Errorf("followers of unknown ordinal %d", a)
		}
	}
	return c.err
}

// followeeLists checks every followee list, gathers followees, and returns
// the follower sets the lists imply: author ordinal -> follower ordinals.
func (c *checker) followeeLists() (map[uint32]*roaring.Bitmap, error) {
	want := map[uint32]*roaring.Bitmap{}
	c.followees = map[uint32][]uint64{}
	err := c.scan(c.t.fam.followees, func(k, v []byte) bool {
		o := binary.BigEndian.Uint32(k[1:])
		id, ok := c.idOf[o]
		if !ok {
			return c.failf("followee list of unknown ordinal %d", o)
		}
		list, err := decodeFollowees(v, nil)
		if err != nil {
			return c.failf("followees of %d: %v", id, err)
		}
		if len(list) == 0 {
			return c.failf("empty followee list of %d kept", id)
		}
		if len(list) > MaxFollowees {
			return c.failf("user %d follows %d accounts, past MaxFollowees", id, len(list))
		}
		c.followees[o] = list
		for _, f := range list {
			if f == id {
				return c.failf("user %d follows themselves", id)
			}
			fo := uint32(c.row(f)[colOrd])
			if fo == 0 {
				return c.failf("user %d follows %d, who has no ordinal", id, f)
			}
			if want[fo] == nil {
				want[fo] = roaring.New()
			}
			want[fo].Add(o)
		}
		return true
	})
	return want, err
}

// followerSets checks every follower bitmap chunk and returns their union
// per author ordinal, sentinels removed.
func (c *checker) followerSets() (map[uint32]*roaring.Bitmap, error) {
	got := map[uint32]*roaring.Bitmap{}
	err := c.scan(c.t.fam.followers, func(k, v []byte) bool {
		a := binary.BigEndian.Uint32(k[1:])
		ch := binary.BigEndian.Uint16(k[5:])
		bm, _, err := store.DecodeRoaring(v)
		if err != nil {
			return c.failf("followers of ordinal %d chunk %d: %v", a, ch, err)
		}
		if !bm.Contains(sentinel(ch)) {
			return c.failf("followers of ordinal %d chunk %d lack the sentinel", a, ch)
		}
		bm.Remove(sentinel(ch))
		if !bm.IsEmpty() && (chunkOf(bm.Minimum()) != ch || chunkOf(bm.Maximum()) != ch) {
			return c.failf("followers of ordinal %d chunk %d hold ordinals of another chunk", a, ch)
		}
		if got[a] == nil {
			got[a] = roaring.New()
		}
		got[a].Or(bm)
		return true
	})
	return got, err
}

// checkPosts checks that every outbox entry has its post record naming the
// same author and the reverse, and that post counts equal outbox sizes. It
// gathers outboxOf.
func (c *checker) checkPosts() error {
	postsOf := map[uint64]uint64{}
	c.outboxOf = map[uint64]uint64{}
	c.unfanned = map[uint64]bool{}
	reposts := map[[2]uint64]uint64{} // (original, repost) -> reposter, from the outboxes
	if err := c.scan(c.t.fam.outbox, func(k, v []byte) bool {
		a, p := binary.BigEndian.Uint64(k[1:]), postOfOutboxKey(k)
		if CheckID("", a) != nil || CheckID("", p) != nil {
			return c.failf("outbox key %x out of range", k)
		}
		m, err := decodeEntryMeta(v)
		if err != nil {
			return c.failf("post %d of %d: %v", p, a, err)
		}
		if m.kind == TypeRepost {
			reposts[[2]uint64{m.ref, p}] = a
		}
		if prev, dup := c.outboxOf[p]; dup {
			return c.failf("post %d in the outboxes of %d and %d", p, prev, a)
		}
		c.outboxOf[p] = a
		postsOf[a]++
		return true
	}); err != nil {
		return err
	}
	nposts := 0
	if err := c.scan(c.t.fam.posts, func(k, v []byte) bool {
		p := binary.BigEndian.Uint64(k[1:])
		rec, err := decodePost(v)
		if err != nil {
			return c.failf("post %d: %v", p, err)
		}
		if c.outboxOf[p] != rec.author {
			return c.failf("post %d: record names author %d, outbox %d", p, rec.author, c.outboxOf[p])
		}
		if !rec.fanned {
			c.unfanned[p] = true
		}
		nposts++
		return true
	}); err != nil {
		return err
	}
	if nposts != len(c.outboxOf) {
		return fmt.Errorf("%d post records for %d outbox entries", nposts, len(c.outboxOf))
	}
	if err := c.checkReposts(reposts); err != nil {
		return err
	}
	for a, n := range postsOf {
		if r := c.row(a); r[colPosts] != n && !(c.copied(a) && r[colPosts] > n) {
			return fmt.Errorf("user %d: posts count %d, outbox holds %d", a, r[colPosts], n)
		}
	}
	for _, id := range c.idOf {
		if r := c.row(id); r[colPosts] != postsOf[id] && !(c.copied(id) && r[colPosts] > postsOf[id]) {
			return fmt.Errorf("user %d: posts count %d, outbox holds %d", id, r[colPosts], postsOf[id])
		}
	}
	return c.err
}

// checkReposts checks that tl_reposts and its in-memory index hold
// exactly the reposts in the outboxes.
func (c *checker) checkReposts(want map[[2]uint64]uint64) error {
	got := map[[2]uint64]uint64{}
	if c.t.fam.reposts != nil {
		if err := c.scan(c.t.fam.reposts, func(k, v []byte) bool {
			got[[2]uint64{binary.BigEndian.Uint64(k[1:]), binary.BigEndian.Uint64(k[9:])}] = binary.BigEndian.Uint64(v)
			return true
		}); err != nil {
			return err
		}
	}
	if !maps.Equal(got, want) {
		return fmt.Errorf("tl_reposts holds %v, the outboxes' reposts are %v", got, want)
	}
	c.t.reposts.RLock()
	defer c.t.reposts.RUnlock()
	mem := map[[2]uint64]uint64{}
	for o, rs := range c.t.reposts.m {
		for _, r := range rs {
			mem[[2]uint64{o, r.id}] = r.by
		}
	}
	if !maps.Equal(mem, want) {
		return fmt.Errorf("in-memory reposts %v, the outboxes' reposts are %v", mem, want)
	}
	return nil
}

// checkPushSet checks the push set's chunks (sentinel, only ordinals of
// users, each in its own chunk), that it equals its in-memory copy, and
// that every user with a read mark is in it.
func (c *checker) checkPushSet() error {
	active := roaring.New()
	if err := c.scan(c.t.fam.active, func(k, v []byte) bool {
		ch := binary.BigEndian.Uint16(k[1:])
		bm, _, err := store.DecodeRoaring(v)
		if err != nil {
			return c.failf("push set chunk %d: %v", ch, err)
		}
		if !bm.Contains(sentinel(ch)) {
			return c.failf("push set chunk %d lacks the sentinel", ch)
		}
		bm.Remove(sentinel(ch))
		it := bm.Iterator()
		for it.HasNext() {
			o := it.Next()
			if _, ok := c.idOf[o]; !ok || chunkOf(o) != ch {
				return c.failf("push set chunk %d holds ordinal %d", ch, o)
			}
		}
		active.Or(bm)
		return true
	}); err != nil {
		return err
	}
	c.t.push.RLock()
	same := active.Equals(c.t.push.bm)
	c.t.push.RUnlock()
	if !same {
		return errors.New("push set differs from its in-memory copy")
	}
	for o, id := range c.idOf {
		if r := c.row(id); r[colRead] != 0 && !active.Contains(o) {
			return fmt.Errorf("user %d has a read mark but is not in the push set", id)
		}
	}
	return c.err
}

// checkInboxes checks that inboxes belong to users and hold entries of
// valid ids, the sentinel (key 0) only with value 0.
func (c *checker) checkInboxes() error {
	return c.scan(c.t.fam.inbox, func(k, v []byte) bool {
		o := binary.BigEndian.Uint32(k[1:])
		if _, ok := c.idOf[o]; !ok {
			return c.failf("inbox of unknown ordinal %d", o)
		}
		tl, err := store.DecodeTopList(v)
		if err != nil {
			return c.failf("inbox of ordinal %d: %v", o, err)
		}
		for _, e := range tl.Entries {
			if e.Key == 0 && (e.Value != 0 || e.Kind != 0) || e.Key != 0 && (e.Key > MaxID || e.Value == 0 || e.Value > MaxID) || !checkEntry(e) {
				return c.failf("inbox of ordinal %d: entry %+v", o, e)
			}
		}
		return true
	})
}

// checkPending checks that pending backfill marks name a followed account
// and a user with a read mark, and equal their in-memory index.
func (c *checker) checkPending() error {
	pend := map[uint32]map[uint64]struct{}{}
	if err := c.scan(c.t.fam.pending, func(k, _ []byte) bool {
		o, a := binary.BigEndian.Uint32(k[1:]), binary.BigEndian.Uint64(k[5:])
		id, ok := c.idOf[o]
		if !ok {
			return c.failf("pending mark of unknown ordinal %d", o)
		}
		if !contains(c.followees[o], a) {
			return c.failf("pending mark of %d for %d, not followed", id, a)
		}
		if c.row(id)[colRead] == 0 {
			return c.failf("pending mark of %d, who has no read mark", id)
		}
		if pend[o] == nil {
			pend[o] = map[uint64]struct{}{}
		}
		pend[o][a] = struct{}{}
		return true
	}); err != nil {
		return err
	}
	c.t.pending.RLock()
	defer c.t.pending.RUnlock()
	if maps.EqualFunc(pend, c.t.pending.m, func(a, b map[uint64]struct{}) bool { return maps.Equal(a, b) }) {
		return nil
	}
	// Name the lowest ordinal that differs, for whoever chases the drift.
	ords := slices.Collect(maps.Keys(pend))
	for o := range c.t.pending.m {
		if _, ok := pend[o]; !ok {
			ords = append(ords, o)
		}
	}
	slices.Sort(ords)
	for _, o := range ords {
		if !maps.Equal(pend[o], c.t.pending.m[o]) {
			stored, mem := slices.Sorted(maps.Keys(pend[o])), slices.Sorted(maps.Keys(c.t.pending.m[o]))
			return fmt.Errorf("pending marks differ from their in-memory index: user %d (ordinal %d): stored %v, in memory %v",
				c.idOf[o], o, stored, mem)
		}
	}
	return errors.New("pending marks differ from their in-memory index")
}

// checkPulled checks that the pulled authors equal their in-memory list.
func (c *checker) checkPulled() error {
	var pulled []uint64
	if err := c.scan(c.t.fam.pulled, func(k, _ []byte) bool {
		pulled = append(pulled, binary.BigEndian.Uint64(k[1:]))
		return true
	}); err != nil {
		return err
	}
	mem := *c.t.pulled.Load()
	if !slices.Equal(pulled, mem) && !(len(pulled) == 0 && len(mem) == 0) {
		return fmt.Errorf("pulled authors %v, in memory %v", pulled, mem)
	}
	return nil
}

// checkRemoved checks that no removed post is published and that the
// removed posts equal their in-memory set.
func (c *checker) checkRemoved() error {
	removed := roaring64.New()
	if err := c.scan(c.t.fam.removed, func(k, v []byte) bool {
		p := binary.BigEndian.Uint64(k[1:])
		if _, ok := c.outboxOf[p]; ok {
			return c.failf("post %d is both published and removed", p)
		}
		removed.Add(p)
		return true
	}); err != nil {
		return err
	}
	c.t.removed.RLock()
	same := removed.Equals(c.t.removed.bm)
	mem := c.t.removed.bm.Clone()
	c.t.removed.RUnlock()
	if !same {
		return fmt.Errorf("removed posts differ from their in-memory set: stored only %v, in memory only %v",
			roaring64.AndNot(removed, mem).ToArray(), roaring64.AndNot(mem, removed).ToArray())
	}
	return nil
}

// checkFanouts checks that every post whose fan-out has not finished waits
// for a job: its own fan-out job, or a marker in tl_fanq with a shared job
// queued; and that every marker names a published post of its author.
func (c *checker) checkFanouts() error {
	own := map[uint64]bool{}
	sharedJobs := 0
	for _, j := range c.t.db.QueuedJobs() {
		if p, ok := fanoutPost(j.Kind, j.Key); ok {
			own[p] = true
		}
		if j.Kind == jobShared {
			sharedJobs++
		}
	}
	markers, err := c.checkMarkers()
	if err != nil {
		return err
	}
	if markers > 0 && sharedJobs == 0 {
		return fmt.Errorf("%d posts wait for the shared fan-out job, and none is queued", markers)
	}
	for p := range c.unfanned {
		if !own[p] {
			return fmt.Errorf("post %d: fan-out not finished, and no job of its own nor the shared job has it", p)
		}
	}
	return nil
}

// checkMarkers checks that every marker of tl_fanq names a published post
// of its author whose fan-out has not finished, takes those posts out of
// c.unfanned, and returns how many markers there are.
func (c *checker) checkMarkers() (int, error) {
	if c.t.fam.fanq == nil { // a read-only store from before tl_fanq
		return 0, nil
	}
	markers := 0
	err := c.scan(c.t.fam.fanq, func(k, v []byte) bool {
		p, a := binary.BigEndian.Uint64(k[1:]), binary.BigEndian.Uint64(v)
		if c.outboxOf[p] != a {
			return c.failf("shared fan-out of post %d by %d, which the outboxes give to %d", p, a, c.outboxOf[p])
		}
		if !c.unfanned[p] {
			return c.failf("shared fan-out of post %d, whose fan-out finished", p)
		}
		delete(c.unfanned, p)
		markers++
		return true
	})
	return markers, err
}

// checkPairs verifies that the in-memory mutes and hides mirror tl_mute
// and tl_hide, and that no pair is a user's with themselves.
func (c *checker) checkPairs() error {
	disk, err := c.t.loadPairs()
	if err != nil {
		return err
	}
	c.t.pairs.RLock()
	mem := c.t.pairs.s
	same := func(a, b map[uint64]map[uint64]struct{}) bool {
		if len(a) != len(b) {
			return false
		}
		for k, s := range a {
			if len(s) != len(b[k]) {
				return false
			}
			for o := range s {
				if _, ok := b[k][o]; !ok {
					return false
				}
			}
		}
		return true
	}
	ok := same(disk.muted, mem.muted) && same(disk.hidden, mem.hidden) && same(disk.hiders, mem.hiders)
	c.t.pairs.RUnlock()
	if !ok {
		return errors.New("mutes or hides in memory differ from tl_mute/tl_hide")
	}
	for _, m := range []map[uint64]map[uint64]struct{}{disk.muted, disk.hidden} {
		for owner, s := range m {
			if _, self := s[owner]; self {
				return fmt.Errorf("user %d mutes or hides themselves", owner)
			}
		}
	}
	return nil
}

// copied reports whether author's outbox here is a copy of another
// shard's (remote.go): its post count is the author's real count, which
// may exceed the copy's window of posts.
func (c *checker) copied(author uint64) bool {
	return c.t.remote != nil && !c.t.remote.Local(author)
}

// remoteFollowers checks a follower set g that differs from the set w the
// local followee lists imply: on a sharded timeline, a local author's set
// holds w and followers of other shards (whose followee lists are there).
func (c *checker) remoteFollowers(author uint64, w, g *roaring.Bitmap) error {
	bad := fmt.Errorf("followers of %d: bitmaps hold %d, followee lists say %d (%v vs %v)", author, g.GetCardinality(), w.GetCardinality(), g.ToArray(), w.ToArray())
	r := c.t.remote
	if r == nil || !r.Local(author) || roaring.AndNot(w, g).GetCardinality() != 0 {
		return bad
	}
	it := roaring.AndNot(g, w).Iterator()
	for it.HasNext() {
		id := c.idOf[it.Next()]
		if r.Local(id) {
			return fmt.Errorf("followers of %d: %d is local and does not list them; %w", author, id, bad)
		}
	}
	return nil
}

// checkXShard checks tl_xshard: on a sharded timeline, a local author's
// count of followers per other shard equals the followers of that shard
// in the author's set, and the shards holding reposts of a post are
// recorded for a published post of a local author only.
func (c *checker) checkXShard() error {
	if c.t.fam.xshard == nil {
		return nil // a store from before tl_xshard, opened read-only
	}
	got := map[uint64]map[uint32]uint64{}
	subs := 0
	if err := c.scan(c.t.fam.xshard, func(k, v []byte) bool {
		id, s := binary.BigEndian.Uint64(k[2:10]), binary.BigEndian.Uint32(k[10:14])
		n := binary.BigEndian.Uint64(v)
		switch k[1] {
		case xsFollowers:
			if n == 0 {
				return c.failf("author %d: zero followers on shard %d kept", id, s)
			}
			if got[id] == nil {
				got[id] = map[uint32]uint64{}
			}
			got[id][s] = n
		case xsReposts:
			subs++
			if a, ok := c.outboxOf[id]; !ok || a != n {
				return c.failf("shard %d holds reposts of post %d of %d, which is not published here", s, id, n)
			}
			if c.t.remote != nil && !c.t.remote.Local(n) {
				return c.failf("shard %d holds reposts of post %d of %d, who is not local", s, id, n)
			}
		default:
			return c.failf("tl_xshard key %x of unknown kind", k)
		}
		return true
	}); err != nil {
		return err
	}
	r := c.t.remote
	if r == nil {
		if len(got) > 0 || subs > 0 {
			return fmt.Errorf("%d authors with followers on other shards, %d shards with reposts, on an unsharded timeline", len(got), subs)
		}
		return nil
	}
	sets, err := c.followerSets()
	if err != nil {
		return err
	}
	for o, id := range c.idOf {
		if !r.Local(id) {
			if len(got[id]) > 0 {
				return fmt.Errorf("author %d of shard %d has followers counted per shard here", id, r.ShardOf(id))
			}
			continue
		}
		want := map[uint32]uint64{}
		if g := sets[o]; g != nil {
			it := g.Iterator()
			for it.HasNext() {
				if f := c.idOf[it.Next()]; !r.Local(f) {
					want[r.ShardOf(f)]++
				}
			}
		}
		if !maps.Equal(want, got[id]) {
			return fmt.Errorf("author %d: followers per other shard %v, tl_xshard says %v", id, want, got[id])
		}
	}
	return nil
}

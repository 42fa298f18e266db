package timeline_test

// TestShardedSimulation: issue 23's timelines and feed unread across
// shards (remote.go), in process. Three shards are three stores, each
// with its Timeline (Options.Remote) and Unread; a fake Remote writes each
// message into the sending store's outbox family in the batch of its
// cause (as package xshard does) and the seeded loop delivers them per
// (source, target) pair, in order, at random steps, interleaved with
// random follows, unfollows, posts, reposts, unpublishes, mutes, hides,
// home and feed reads, job runs and reopens of a shard's store. A
// single-shard Timeline and Unread (nil Remote) take the same client
// operations as the model. At quiescence (every message delivered, every
// job run): each user's whole home equals the model's; followee lists
// (on the follower's shard) and follower sets (on the author's shard)
// equal the model's; counts equal set sizes and the model's; every
// shard's post count of each followee it holds a copy of equals the
// author's real count; feed unread equals the sum over the feed snapshot
// of the visible followees' real counts above their bases; after a reset
// of every feed and a round of posts and unpublishes, feed unread equals
// the model's exactly; Check passes on every shard.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tallydb/tally/store"
	"github.com/tallydb/tally/timeline"
	"github.com/tallydb/tally/unread"
)

const (
	xNumShards = 3
	xOutPrefix = 0xf0 // the test's outbox family
)

func xShardOf(user uint64) uint32 { return uint32(user%xNumShards) + 1 }

// xShard is one shard: a store with its timeline and unread.
type xShard struct {
	id     uint32
	fs     vfs.FS
	db     *store.DB
	tl     *timeline.Timeline
	un     *unread.Unread
	out    *store.Family
	seq    map[uint32]uint64 // last sequence number per target
	remote *xRemote
}

// xRemote is a shard's timeline.Remote.
type xRemote struct{ sh *xShard }

func (r *xRemote) Local(user uint64) bool     { return xShardOf(user) == r.sh.id }
func (r *xRemote) ShardOf(user uint64) uint32 { return xShardOf(user) }
func (r *xRemote) Send(b *store.Batch, shard uint32, argv [][]byte) error {
	if shard == r.sh.id || shard == 0 || shard > xNumShards {
		return fmt.Errorf("send to shard %d from %d", shard, r.sh.id)
	}
	r.sh.seq[shard]++
	key := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint32([]byte{xOutPrefix}, shard), r.sh.seq[shard])
	var v []byte
	for _, a := range argv {
		v = binary.AppendUvarint(v, uint64(len(a)))
		v = append(v, a...)
	}
	return r.sh.out.Put(b, key, v)
}

func decodeArgv(v []byte) ([][]byte, error) {
	var argv [][]byte
	for len(v) > 0 {
		n, k := binary.Uvarint(v)
		if k <= 0 || uint64(len(v)-k) < n {
			return nil, errors.New("bad message")
		}
		argv = append(argv, v[k:k+int(n)])
		v = v[k+int(n):]
	}
	return argv, nil
}

func xStoreOptions(fs vfs.FS) *store.Options {
	return &store.Options{FS: fs, DisableBackground: true, JobWorkers: -1, CacheSize: 8 << 20, MemTableSize: 4 << 20,
		JobBytesPerSec: -1, Durability: store.NoSync}
}

// openTL opens a timeline and unread on db (remote nil: the model).
func openTL(t testing.TB, db *store.DB, remote timeline.Remote, now func() time.Time) (*timeline.Timeline, *unread.Unread) {
	t.Helper()
	tl, err := timeline.New(db, &timeline.Options{Now: now, ExpireInterval: -1, Remote: remote, InlineFanout: 2, SharedFanout: 4})
	if err != nil {
		t.Fatal(err)
	}
	un, err := unread.New(db, &unread.Options{Graph: tl})
	if err != nil {
		t.Fatal(err)
	}
	return tl, un
}

func (s *xShard) open(t testing.TB, now func() time.Time) {
	t.Helper()
	db, err := store.Open("db", xStoreOptions(s.fs))
	if err != nil {
		t.Fatal(err)
	}
	s.db = db
	f, err := db.Family("test_xout")
	if errors.Is(err, store.ErrFamilyNotFound) {
		f, err = db.RegisterFamily(store.FamilySpec{Name: "test_xout", Prefix: xOutPrefix, MinKeyLen: 12, MaxKeyLen: 12, MaxValueLen: 4 << 20})
	}
	if err != nil {
		t.Fatal(err)
	}
	s.out = f
	s.seq = map[uint32]uint64{}
	it, err := f.NewIter(&store.IterOptions{Prefix: []byte{xOutPrefix}})
	if err != nil {
		t.Fatal(err)
	}
	for it.Next() {
		k := it.Key()
		s.seq[binary.BigEndian.Uint32(k[1:5])] = binary.BigEndian.Uint64(k[5:13])
	}
	must(t, it.Close())
	s.remote = &xRemote{sh: s}
	s.tl, s.un = openTL(t, db, s.remote, now)
}

func (s *xShard) close(t testing.TB) {
	t.Helper()
	must(t, errors.Join(s.un.Close(), s.tl.Close(), s.db.Close()))
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// xWorld is the shards and the model.
type xWorld struct {
	t      testing.TB
	rng    *rand.Rand
	now    time.Time
	shards [xNumShards + 1]*xShard // 1-based
	model  struct {
		db *store.DB
		tl *timeline.Timeline
		un *unread.Unread
	}
	delivered int
}

func (w *xWorld) clock() time.Time { return w.now }

func (w *xWorld) shard(user uint64) *xShard { return w.shards[xShardOf(user)] }

// pending returns the lowest queued message from src to dst.
func (w *xWorld) pending(src, dst uint32) (key []byte, argv [][]byte) {
	s := w.shards[src]
	it, err := s.out.NewIter(&store.IterOptions{Prefix: binary.BigEndian.AppendUint32([]byte{xOutPrefix}, dst)})
	must(w.t, err)
	defer it.Close()
	if !it.Next() {
		return nil, nil
	}
	argv, err = decodeArgv(it.Value())
	must(w.t, err)
	return slices.Clone(it.Key()), argv
}

// deliver applies the lowest queued message from src to dst on dst and
// drops it from src; false if none is queued.
func (w *xWorld) deliver(src, dst uint32) bool {
	key, argv := w.pending(src, dst)
	if key == nil {
		return false
	}
	if err := w.dispatch(w.shards[dst], argv); err != nil {
		w.t.Fatalf("message %q from %d to %d: %v", argv, src, dst, err)
	}
	s := w.shards[src]
	b := s.db.NewBatch()
	defer b.Close()
	must(w.t, s.out.Delete(b, key))
	must(w.t, b.Commit())
	w.delivered++
	return true
}

func (w *xWorld) dispatch(s *xShard, argv [][]byte) error {
	nums := make([]uint64, len(argv)-1)
	for i, a := range argv[1:] {
		n, err := strconv.ParseUint(string(a), 10, 64)
		if err != nil {
			return err
		}
		nums[i] = n
	}
	switch string(argv[0]) {
	case timeline.CmdXFollower:
		_, err := s.tl.RemoteFollower(nums[0], nums[1], uint32(nums[2]), nums[3] == 1)
		return err
	case timeline.CmdXBackfill:
		var es []timeline.Entry
		for i := 2; i+3 < len(nums); i += 4 {
			es = append(es, timeline.Entry{Post: nums[i], Author: nums[0], Type: timeline.EntryType(nums[i+1]), Ref: nums[i+2], RefAuthor: nums[i+3]})
		}
		return s.tl.InstallCopy(nums[0], nums[1], es)
	case timeline.CmdXPublish:
		_, err := s.tl.PublishCopy(nums[0], timeline.EntryType(nums[1]), nums[2], nums[3], nums[4:]...)
		return err
	case timeline.CmdXUnpublish:
		_, err := s.tl.UnpublishCopy(nums[0], nums[1:]...)
		return err
	case timeline.CmdXHide:
		_, err := s.tl.RemoteHide(nums[0], nums[1], nums[2] == 1)
		return err
	case timeline.CmdXSubscribe:
		_, err := s.tl.RemoteSubscribe(nums[0], nums[1], uint32(nums[2]))
		return err
	case timeline.CmdXGone:
		_, err := s.tl.OriginalGone(nums[0], nums[1])
		return err
	}
	return fmt.Errorf("unknown message %s", argv[0])
}

func (w *xWorld) runJobs(s *xShard) {
	must(w.t, s.db.RunJobs(context.Background(), nil))
}

// quiesce delivers every message and runs every job until none is left.
func (w *xWorld) quiesce() {
	for round := 0; ; round++ {
		if round > 1000 {
			w.t.Fatal("no quiescence")
		}
		busy := false
		for src := uint32(1); src <= xNumShards; src++ {
			for dst := uint32(1); dst <= xNumShards; dst++ {
				for src != dst && w.deliver(src, dst) {
					busy = true
				}
			}
		}
		for _, s := range w.shards[1:] {
			if len(s.db.QueuedJobs()) > 0 {
				busy = true
				w.runJobs(s)
			}
		}
		if len(w.model.db.QueuedJobs()) > 0 {
			w.runJobs2(w.model.db)
		}
		if !busy {
			return
		}
	}
}

func (w *xWorld) runJobs2(db *store.DB) { must(w.t, db.RunJobs(context.Background(), nil)) }

// both runs a client operation on the user's shard and on the model; an
// error of either fails the test unless both refuse alike.
func (w *xWorld) both(user uint64, op func(tl *timeline.Timeline) error) {
	w.t.Helper()
	e1 := op(w.shard(user).tl)
	e2 := op(w.model.tl)
	if (e1 == nil) != (e2 == nil) {
		w.t.Fatalf("shard: %v, model: %v", e1, e2)
	}
}

func homeAll(t testing.TB, tl *timeline.Timeline, user uint64) []timeline.Entry {
	t.Helper()
	var all []timeline.Entry
	cursor := ""
	for range 10000 {
		p, err := tl.Home(user, cursor, 7)
		must(t, err)
		all = append(all, p.Entries...)
		if p.NoMore {
			return all
		}
		cursor = p.Cursor
	}
	t.Fatal("home never ends")
	return nil
}

func followers(t testing.TB, tl *timeline.Timeline, author uint64) []uint64 {
	t.Helper()
	var all []uint64
	cursor := ""
	for range 10000 {
		p, err := tl.FollowersPage(author, cursor, 100)
		must(t, err)
		all = append(all, p.IDs...)
		if p.NoMore {
			slices.Sort(all)
			return all
		}
		cursor = p.Cursor
	}
	t.Fatal("followers never end")
	return nil
}

func followees(t testing.TB, tl *timeline.Timeline, user uint64) []uint64 {
	t.Helper()
	var all []uint64
	must(t, tl.Followees(user, func(f uint64) bool { all = append(all, f); return true }))
	return all
}

func TestShardedSimulation(t *testing.T) {
	seeds := []uint64{1, 2}
	if s := os.Getenv("TALLY_TL_XSHARD_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		must(t, err)
		seeds = []uint64{n}
	}
	steps := 500
	if s := os.Getenv("TALLY_TL_XSHARD_STEPS"); s != "" {
		n, err := strconv.Atoi(s)
		must(t, err)
		steps = n
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { runSharded(t, seed, steps) })
	}
}

func runSharded(t *testing.T, seed uint64, steps int) {
	w := &xWorld{t: t, rng: rand.New(rand.NewPCG(seed, seed)), now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	for i := uint32(1); i <= xNumShards; i++ {
		w.shards[i] = &xShard{id: i, fs: vfs.NewMem()}
		w.shards[i].open(t, w.clock)
	}
	mdb, err := store.Open("db", xStoreOptions(vfs.NewMem()))
	must(t, err)
	w.model.db = mdb
	w.model.tl, w.model.un = openTL(t, mdb, nil, w.clock)
	defer func() {
		for _, s := range w.shards[1:] {
			s.close(t)
		}
		must(t, errors.Join(w.model.un.Close(), w.model.tl.Close(), mdb.Close()))
	}()

	const users = 18
	rng := w.rng
	user := func() uint64 { return 1 + rng.Uint64N(users) }
	other := func(u uint64) uint64 {
		for {
			if a := user(); a != u {
				return a
			}
		}
	}
	nextPost := uint64(1000)
	type postInfo struct {
		author   uint64
		original bool
	}
	live := map[uint64]postInfo{} // published posts
	livePosts := func() []uint64 {
		ps := make([]uint64, 0, len(live))
		for p := range live {
			ps = append(ps, p)
		}
		slices.Sort(ps)
		return ps
	}
	post := func() {
		a := user()
		nextPost++
		p := nextPost
		w.both(a, func(tl *timeline.Timeline) error { _, err := tl.Publish(a, p); return err })
		live[p] = postInfo{author: a, original: true}
	}
	unpost := func() {
		ps := livePosts()
		if len(ps) == 0 {
			return
		}
		p := ps[rng.IntN(len(ps))]
		a := live[p].author
		w.both(a, func(tl *timeline.Timeline) error { _, _, err := tl.Unpublish(a, p); return err })
		delete(live, p)
	}
	for step := 0; step < steps; step++ {
		w.now = w.now.Add(time.Second)
		switch r := rng.IntN(100); {
		case r < 20:
			u, a := user(), 0
			a = int(other(u))
			w.both(u, func(tl *timeline.Timeline) error { _, err := tl.Follow(u, uint64(a)); return err })
		case r < 26:
			u := user()
			a := other(u)
			w.both(u, func(tl *timeline.Timeline) error { _, err := tl.Unfollow(u, a); return err })
		case r < 40:
			post()
		case r < 45:
			ps := livePosts()
			if len(ps) == 0 {
				continue
			}
			o := ps[rng.IntN(len(ps))]
			if !live[o].original {
				continue
			}
			u := other(live[o].author)
			nextPost++
			rp := nextPost
			oa := live[o].author
			w.both(u, func(tl *timeline.Timeline) error { _, _, err := tl.Repost(u, oa, o, rp); return err })
			live[rp] = postInfo{author: u}
		case r < 50:
			unpost()
		case r < 53:
			u := user()
			a := other(u)
			add := rng.IntN(3) > 0
			w.both(u, func(tl *timeline.Timeline) error {
				var err error
				if add {
					_, err = tl.Mute(u, a)
				} else {
					_, err = tl.Unmute(u, a)
				}
				return err
			})
		case r < 56:
			a := user()
			f := other(a)
			add := rng.IntN(3) > 0
			w.both(a, func(tl *timeline.Timeline) error {
				var err error
				if add {
					_, err = tl.Hide(a, f)
				} else {
					_, err = tl.Unhide(a, f)
				}
				return err
			})
		case r < 64:
			u := user()
			_, err := w.shard(u).tl.Home(u, "", 10)
			must(t, err)
			_, err = w.model.tl.Home(u, "", 10)
			must(t, err)
		case r < 68:
			u := user()
			_, err := w.shard(u).un.Feed(u)
			must(t, err)
			_, err = w.model.un.Feed(u)
			must(t, err)
		case r < 90:
			for range 1 + rng.IntN(3) {
				src, dst := uint32(1+rng.IntN(xNumShards)), uint32(1+rng.IntN(xNumShards))
				if src != dst {
					w.deliver(src, dst)
				}
			}
		case r < 96:
			w.runJobs(w.shards[1+rng.IntN(xNumShards)])
			w.runJobs2(w.model.db)
		default:
			s := w.shards[1+rng.IntN(xNumShards)]
			s.close(t)
			s.open(t, w.clock)
		}
	}
	w.quiesce()
	w.compare(false)

	// Feed unread against the model, counts only: reset every feed, then
	// posts and unpublishes across the shards.
	for u := uint64(1); u <= users; u++ {
		must(t, w.shard(u).un.FeedReset(u))
		must(t, w.model.un.FeedReset(u))
	}
	for range 60 {
		if rng.IntN(4) == 0 {
			unpost()
		} else {
			post()
		}
		if rng.IntN(3) == 0 {
			w.deliver(uint32(1+rng.IntN(xNumShards)), uint32(1+rng.IntN(xNumShards)))
		}
	}
	w.quiesce()
	w.compare(true)
	t.Logf("seed %d: %d messages delivered, %d posts live", seed, w.delivered, len(live))
}

// compare checks the quiescent world against the model.
func (w *xWorld) compare(feedExact bool) {
	t := w.t
	t.Helper()
	m := w.model.tl
	for u := uint64(1); u <= 18; u++ {
		s := w.shard(u)
		if got, want := homeAll(t, s.tl, u), homeAll(t, m, u); !slices.Equal(got, want) {
			t.Fatalf("home of %d (shard %d):\n got  %v\n want %v", u, s.id, got, want)
		}
		if got, want := followees(t, s.tl, u), followees(t, m, u); !slices.Equal(got, want) {
			t.Fatalf("followees of %d: %v, model %v", u, got, want)
		}
		if got, want := followers(t, s.tl, u), followers(t, m, u); !slices.Equal(got, want) {
			t.Fatalf("followers of %d: %v, model %v", u, got, want)
		}
		gi, err := s.tl.User(u)
		must(t, err)
		wi, err := m.User(u)
		must(t, err)
		if gi.Followers != wi.Followers || gi.Followees != wi.Followees || gi.Posts != wi.Posts {
			t.Fatalf("user %d: %+v, model %+v", u, gi, wi)
		}
		if gi.Followers != uint64(len(followers(t, s.tl, u))) {
			t.Fatalf("user %d: followers count %d", u, gi.Followers)
		}
		// The copies' counts are the real counts.
		fs := followees(t, s.tl, u)
		got, err := s.tl.PostCounts(fs, nil)
		must(t, err)
		want, err := m.PostCounts(fs, nil)
		must(t, err)
		if !slices.Equal(got, want) {
			t.Fatalf("post counts of %d's followees %v on shard %d: %v, real %v", u, fs, s.id, got, want)
		}
		// Feed unread: the snapshot's followees are the visible ones,
		// and the count is their real counts above their bases.
		var vis []uint64
		must(t, m.VisibleFollowees(u, func(f uint64) bool { vis = append(vis, f); return true }))
		n, err := s.un.Feed(u)
		must(t, err)
		snap, ok, err := s.un.Snapshot(u)
		must(t, err)
		if ok && len(vis) > 0 {
			if !slices.Equal(snap.Followees, vis) {
				t.Fatalf("feed snapshot of %d: followees %v, visible %v", u, snap.Followees, vis)
			}
			real, err := m.PostCounts(vis, nil)
			must(t, err)
			var sum uint64
			for i, b := range snap.Bases {
				if real[i] > b {
					sum += real[i] - b
				}
			}
			if n != sum {
				t.Fatalf("feed unread of %d: %d, pull model over the snapshot %d", u, n, sum)
			}
		}
		if feedExact {
			mn, err := w.model.un.Feed(u)
			must(t, err)
			if n != mn {
				t.Fatalf("feed unread of %d: %d, model %d", u, n, mn)
			}
		}
	}
	for _, s := range w.shards[1:] {
		// Every backfill ran: the inboxes hold the copies' posts, not
		// reads by pull.
		for _, st := range s.tl.Stats() {
			if st.Key == "pending_backfills" && st.Value != "0" {
				t.Fatalf("shard %d: %s pending backfills at quiescence", s.id, st.Value)
			}
		}
		if err := s.tl.Check(); err != nil {
			t.Fatalf("shard %d: %v", s.id, err)
		}
	}
	must(t, m.Check())
}

// TestShardedRefusals: a write about a user of another shard, a bad
// cross-shard message and a bulk load are refused with their named
// errors, and change nothing.
func TestShardedRefusals(t *testing.T) {
	s := &xShard{id: 1, fs: vfs.NewMem()}
	now := func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }
	s.open(t, now)
	defer s.close(t)
	tl := s.tl
	// 3 and 6 are shard 1's, 4 shard 2's.
	for _, err := range []error{
		func() error { _, err := tl.Follow(4, 3); return err }(),
		func() error { _, err := tl.Publish(4, 100); return err }(),
		func() error { _, _, err := tl.Unpublish(4, 100); return err }(),
		func() error { _, err := tl.Mute(4, 3); return err }(),
		func() error { _, err := tl.Hide(4, 3); return err }(),
	} {
		if !errors.Is(err, timeline.ErrNotLocal) {
			t.Errorf("write for another shard's user: %v, want ErrNotLocal", err)
		}
	}
	if _, err := tl.LoadFollows(context.Background(), []timeline.Edge{{Follower: 3, Followee: 6}}, nil); !errors.Is(err, timeline.ErrSharded) {
		t.Errorf("LoadFollows: %v, want ErrSharded", err)
	}
	bad := []error{
		func() error { _, err := tl.RemoteFollower(3, 4, 0, true); return err }(),
		func() error { _, err := tl.RemoteFollower(3, 3, 2, true); return err }(),
		tl.InstallCopy(4, 2, []timeline.Entry{{Post: 10, Author: 4}, {Post: 20, Author: 4}}),     // not newest first
		tl.InstallCopy(4, 1, []timeline.Entry{{Post: 20, Author: 4}, {Post: 10, Author: 4}}),     // count below entries
		tl.InstallCopy(4, 1, []timeline.Entry{{Post: 20, Author: 5}}),                            // another author
		tl.InstallCopy(4, 1, []timeline.Entry{{Post: 20, Author: 4, Type: timeline.TypeRepost}}), // no reference
		func() error { _, err := tl.PublishCopy(4, 9, 0, 0, 20); return err }(),
		func() error { _, err := tl.PublishCopy(4, timeline.TypeRepost, 30, 5, 20); return err }(), // not above its original
		func() error { _, err := tl.PublishCopy(4, timeline.TypePost, 0, 0); return err }(),
		func() error { _, err := tl.UnpublishCopy(4); return err }(),
	}
	for i, err := range bad {
		if !errors.Is(err, timeline.ErrBadMessage) && !errors.Is(err, timeline.ErrBadID) && !errors.Is(err, timeline.ErrSelfFollow) {
			t.Errorf("bad message %d: %v", i, err)
		}
	}
	if err := tl.InstallCopy(4, 1, []timeline.Entry{{Post: 0, Author: 4}}); !errors.Is(err, timeline.ErrBadID) {
		t.Errorf("post 0: %v", err)
	}
	if info, err := tl.User(4); err != nil || info.Posts != 0 || info.Followers != 0 {
		t.Errorf("after refusals: %+v %v", info, err)
	}
	if rf, err := tl.RemoteFollowers(3); err != nil || len(rf) != 0 {
		t.Errorf("remote followers after refusals: %v %v", rf, err)
	}
	if err := tl.Check(); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkShardedPost measures what sharding adds to a post, per op,
// on settled stores (compacted after the follows, as the package's other
// benchmarks):
//
//   - publish/remote: the author (shard 1) has 40 followers, all on
//     shards 2 and 3, none live on shard 1: the publish reads tl_xfol and
//     queues two messages in its batch (nothing is delivered while timed);
//   - publish/none: the same author without followers;
//   - copy: shard 2 applies TL.XPUBLISH for the author of shard 1, who
//     has 20 live followers on shard 2 (PublishCopy: the publish into the
//     copy and its fan-out's enqueue; the jobs are not run);
//   - local: the same publish by a local author with 20 live followers.
func BenchmarkShardedPost(b *testing.B) {
	now := func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }
	const author = 3 // shard 1
	for _, bc := range []string{"publish/remote", "publish/none", "copy", "local"} {
		b.Run(bc, func(b *testing.B) {
			w := &xWorld{t: b}
			for i := uint32(1); i <= xNumShards; i++ {
				w.shards[i] = &xShard{id: i, fs: vfs.NewMem()}
				w.shards[i].open(b, now)
			}
			defer func() {
				for _, s := range w.shards[1:] {
					s.close(b)
				}
			}()
			// follow makes n users of shard sh follow a, live, and
			// delivers every message.
			follow := func(sh uint32, a uint64, n int) {
				for u := uint64(4); n > 0; u++ {
					if xShardOf(u) != sh || u == a {
						continue
					}
					n--
					_, err := w.shards[sh].tl.Follow(u, a)
					must(b, err)
					_, err = w.shards[sh].tl.Home(u, "", 1)
					must(b, err)
				}
				for src := uint32(1); src <= xNumShards; src++ {
					for dst := uint32(1); dst <= xNumShards; dst++ {
						for src != dst && w.deliver(src, dst) {
						}
					}
				}
			}
			switch bc {
			case "publish/remote":
				follow(2, author, 20)
				follow(3, author, 20)
			case "copy":
				follow(2, author, 20)
			case "local":
				follow(3, 5, 20) // 5 is shard 3's
			}
			for _, s := range w.shards[1:] {
				must(b, s.db.RunJobs(context.Background(), nil))
				must(b, s.db.CompactDisk(context.Background()))
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				p := uint64(1000 + i)
				var err error
				switch bc {
				case "publish/remote", "publish/none":
					_, err = w.shards[1].tl.Publish(author, p)
				case "copy":
					_, err = w.shards[2].tl.PublishCopy(author, timeline.TypePost, 0, 0, p)
				case "local":
					_, err = w.shards[3].tl.Publish(5, p)
				}
				must(b, err)
			}
			b.StopTimer()
			if sent := w.shards[1].seq[2] + w.shards[1].seq[3]; bc == "publish/remote" && sent < uint64(2*b.N) {
				b.Fatalf("%d messages for %d posts", sent, b.N)
			}
		})
	}
}

package timeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/tallydb/tally/store"
)

func postsOf(es []Entry) []uint64 {
	out := make([]uint64, len(es))
	for i, e := range es {
		out[i] = e.Post
	}
	return out
}

func follow(t testing.TB, tl *Timeline, u uint64, as ...uint64) {
	t.Helper()
	for _, a := range as {
		if _, err := tl.Follow(u, a); err != nil {
			t.Fatalf("follow %d %d: %v", u, a, err)
		}
	}
}

func publish(t testing.TB, tl *Timeline, a uint64, ps ...uint64) {
	t.Helper()
	for _, p := range ps {
		if _, err := tl.Publish(a, p); err != nil {
			t.Fatalf("publish %d %d: %v", a, p, err)
		}
	}
}

func wantHome(t testing.TB, tl *Timeline, u uint64, want ...uint64) {
	t.Helper()
	for _, limit := range []int{1, 3, 1000} {
		if got := postsOf(homeAll(t, tl, u, limit)); !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Fatalf("home %d (limit %d) = %v, want %v", u, limit, got, want)
		}
	}
}

func inbox(t testing.TB, tl *Timeline, u uint64) *store.TopList {
	t.Helper()
	ord, err := tl.ordOf(u)
	must(t, err)
	v, ok, err := tl.fam.inbox.Get(inboxKey(nil, ord), nil)
	must(t, err)
	if !ok {
		return nil
	}
	l, err := store.DecodeTopList(v)
	must(t, err)
	l.Entries = slices.DeleteFunc(l.Entries, func(e store.TopEntry) bool { return e.Key == 0 })
	return l
}

func inboxPosts(t testing.TB, tl *Timeline, u uint64) []uint64 {
	l := inbox(t, tl, u)
	if l == nil {
		return nil
	}
	var out []uint64
	for _, e := range l.Entries {
		out = append(out, e.Key)
	}
	return out
}

// Behaviour 1: the follow graph, its counts, idempotence and paging.
func TestFollowGraph(t *testing.T) {
	e := newEnv(t, Config{})
	tl := e.tl
	for _, a := range []uint64{5, 3, 9} {
		ch, err := tl.Follow(1, a)
		must(t, err)
		if !ch {
			t.Fatalf("follow 1 %d: no change", a)
		}
	}
	if ch, err := tl.Follow(1, 3); err != nil || ch {
		t.Fatalf("second follow: changed %v, %v", ch, err)
	}
	follow(t, tl, 2, 3)
	if _, err := tl.Follow(4, 4); !errors.Is(err, ErrSelfFollow) {
		t.Fatalf("self follow: %v", err)
	}
	for _, c := range []struct {
		u                         uint64
		followers, followees, psn uint64
	}{{1, 0, 3, 0}, {3, 2, 0, 0}, {5, 1, 0, 0}, {2, 0, 1, 0}, {77, 0, 0, 0}} {
		info, err := tl.User(c.u)
		must(t, err)
		if info.Followers != c.followers || info.Followees != c.followees || info.Posts != c.psn {
			t.Fatalf("user %d: %+v", c.u, info)
		}
	}
	if ok, err := tl.IsFollowing(1, 9); err != nil || !ok {
		t.Fatalf("1 follows 9: %v %v", ok, err)
	}
	if ok, err := tl.IsFollowing(9, 1); err != nil || ok {
		t.Fatalf("9 follows 1: %v %v", ok, err)
	}
	var got []uint64
	must(t, tl.Followees(1, func(f uint64) bool { got = append(got, f); return true }))
	if !slices.Equal(got, []uint64{3, 5, 9}) {
		t.Fatalf("followees %v", got)
	}
	p, err := tl.FolloweesPage(1, "", 2)
	must(t, err)
	if !slices.Equal(p.IDs, []uint64{3, 5}) || p.NoMore {
		t.Fatalf("page 1 %+v", p)
	}
	p, err = tl.FolloweesPage(1, p.Cursor, 2)
	must(t, err)
	if !slices.Equal(p.IDs, []uint64{9}) || !p.NoMore || p.Cursor != "" {
		t.Fatalf("page 2 %+v", p)
	}
	ch, err := tl.Unfollow(1, 5)
	must(t, err)
	if !ch {
		t.Fatal("unfollow: no change")
	}
	if ch, err := tl.Unfollow(1, 5); err != nil || ch {
		t.Fatalf("second unfollow: %v %v", ch, err)
	}
	if info, _ := tl.User(5); info.Followers != 0 {
		t.Fatalf("5 after unfollow: %+v", info)
	}
	e.check()
	e.reopen()
	if info, _ := e.tl.User(1); info.Followees != 2 {
		t.Fatalf("1 after reopen: %+v", info)
	}
}

// An author with followers in several 2^16-ordinal chunks: counts, paging
// across chunks, and the chunked bitmaps Check verifies.
func TestFollowersAcrossChunks(t *testing.T) {
	e := newEnv(t, Config{})
	const n = 70_000
	edges := make([]Edge, 0, n)
	for u := uint64(2); u < n+2; u++ {
		edges = append(edges, Edge{Follower: u, Followee: 1})
	}
	st, err := e.tl.LoadFollows(t.Context(), edges, nil)
	must(t, err)
	if st.Added != n || st.Users != n+1 {
		t.Fatalf("load %+v", st)
	}
	if info, _ := e.tl.User(1); info.Followers != n {
		t.Fatalf("author %+v", info)
	}
	seen := map[uint64]bool{}
	cursor := ""
	pages := 0
	for {
		p, err := e.tl.FollowersPage(1, cursor, MaxLimit)
		must(t, err)
		for _, id := range p.IDs {
			if seen[id] {
				t.Fatalf("follower %d twice", id)
			}
			seen[id] = true
		}
		pages++
		if p.NoMore {
			break
		}
		cursor = p.Cursor
	}
	if len(seen) != n || pages != n/MaxLimit {
		t.Fatalf("%d followers in %d pages", len(seen), pages)
	}
	// Loading again adds nothing.
	st, err = e.tl.LoadFollows(t.Context(), edges[:10], nil)
	must(t, err)
	if st.Added != 0 || st.Existing != 10 {
		t.Fatalf("reload %+v", st)
	}
	_, err = e.tl.Unfollow(n+1, 1)
	must(t, err)
	if info, _ := e.tl.User(1); info.Followers != n-1 {
		t.Fatalf("author %+v", info)
	}
	e.check()
}

// Bulk load refuses the whole input for one bad edge.
func TestLoadFollowsBadEdge(t *testing.T) {
	e := newEnv(t, Config{})
	_, err := e.tl.LoadFollows(t.Context(), []Edge{{1, 2}, {3, 3}, {4, 5}}, nil)
	if !errors.Is(err, ErrSelfFollow) {
		t.Fatalf("self edge: %v", err)
	}
	_, err = e.tl.LoadFollows(t.Context(), []Edge{{1, 2}, {0, 3}}, nil)
	if !errors.Is(err, ErrBadID) {
		t.Fatalf("zero id: %v", err)
	}
	if info, _ := e.tl.User(2); info.Followers != 0 {
		t.Fatalf("something loaded: %+v", info)
	}
	e.check()
}

// Behaviour 2: publish is atomic and idempotent; unpublish removes a post
// from outbox, count and every home.
func TestPublishUnpublish(t *testing.T) {
	e := newEnv(t, Config{})
	tl := e.tl
	follow(t, tl, 1, 2)
	follow(t, tl, 3, 2)
	wantHome(t, tl, 1) // 1 is active from here on; 3 is not
	r, err := tl.Publish(2, 100)
	must(t, err)
	if r.Duplicate || r.Job == 0 {
		t.Fatalf("publish %+v", r)
	}
	r, err = tl.Publish(2, 100)
	must(t, err)
	if !r.Duplicate || r.Job != 0 {
		t.Fatalf("republish %+v", r)
	}
	if _, err := tl.Publish(9, 100); !errors.Is(err, ErrPostTaken) {
		t.Fatalf("another author's id: %v", err)
	}
	if info, _ := tl.User(2); info.Posts != 1 {
		t.Fatalf("posts %+v", info)
	}
	e.run()
	if got := inboxPosts(t, tl, 1); !slices.Equal(got, []uint64{100}) {
		t.Fatalf("inbox of active follower %v", got)
	}
	if got := inbox(t, tl, 3); got != nil {
		t.Fatalf("inactive follower has an inbox %+v", got)
	}
	info, ok, err := tl.Post(100)
	must(t, err)
	if !ok || info.Author != 2 || !info.FannedOut || info.Delivered != 1 {
		t.Fatalf("post %+v", info)
	}
	wantHome(t, tl, 1, 100)
	wantHome(t, tl, 3, 100) // by pull
	publish(t, tl, 2, 101)
	e.run()
	ch, job, err := tl.Unpublish(2, 100)
	must(t, err)
	if !ch || job == 0 {
		t.Fatalf("unpublish %v %v", ch, job)
	}
	// Gone at once, before the removal job ran.
	wantHome(t, tl, 1, 101)
	wantHome(t, tl, 3, 101)
	if info, _ := tl.User(2); info.Posts != 1 {
		t.Fatalf("posts after unpublish %+v", info)
	}
	if _, err := tl.Publish(9, 100); !errors.Is(err, ErrPostTaken) {
		t.Fatalf("an unpublished id of another author: %v", err)
	}
	if _, _, err := tl.Unpublish(9, 101); !errors.Is(err, ErrPostTaken) {
		t.Fatalf("unpublish of another's post: %v", err)
	}
	ch, _, err = tl.Unpublish(2, 100)
	must(t, err)
	if ch {
		t.Fatal("second unpublish changed something")
	}
	e.run()
	// The job freed the slot.
	if got := inboxPosts(t, tl, 1); !slices.Equal(got, []uint64{101, 100}) && !slices.Equal(got, []uint64{101}) {
		t.Fatalf("inbox after removal %v", got)
	}
	// The author may publish the id again.
	publish(t, tl, 2, 100)
	e.run()
	wantHome(t, tl, 1, 101, 100)
	e.check()
	e.reopen()
	wantHome(t, e.tl, 1, 101, 100)
}

// Behaviour 3: push to the active, pull for the rest, and big authors are
// merged at read time, never pushed.
func TestPushPullAndPulledAuthors(t *testing.T) {
	e := newEnv(t, Config{PullThreshold: 3})
	tl := e.tl
	follow(t, tl, 1, 10)
	follow(t, tl, 2, 10)
	wantHome(t, tl, 1)
	publish(t, tl, 10, 1)
	e.run()
	if got := inboxPosts(t, tl, 1); !slices.Equal(got, []uint64{1}) {
		t.Fatalf("pushed inbox %v", got)
	}
	if inbox(t, tl, 2) != nil {
		t.Fatal("inactive user was pushed to")
	}
	// The third follower makes 10 pulled.
	follow(t, tl, 3, 10)
	if info, _ := tl.User(10); !info.Pulled {
		t.Fatalf("author not pulled at the threshold: %+v", info)
	}
	r, err := tl.Publish(10, 2)
	must(t, err)
	if r.Job != 0 {
		t.Fatal("a pulled author's post was fanned out")
	}
	e.run()
	if got := inboxPosts(t, tl, 1); !slices.Equal(got, []uint64{1}) {
		t.Fatalf("pulled post pushed: %v", got)
	}
	wantHome(t, tl, 1, 2, 1)
	wantHome(t, tl, 2, 2, 1)
	wantHome(t, tl, 3, 2, 1)
	// Pulled is sticky.
	_, err = tl.Unfollow(3, 10)
	must(t, err)
	if info, _ := tl.User(10); !info.Pulled {
		t.Fatal("pulled flag dropped")
	}
	e.reopen()
	if info, _ := e.tl.User(10); !info.Pulled {
		t.Fatal("pulled flag lost across reopen")
	}
	wantHome(t, e.tl, 1, 2, 1)
}

// Behaviour 4: capped inboxes, expiry of inactive users, rebuild on return.
func TestInboxCapExpiryReturn(t *testing.T) {
	e := newEnv(t, Config{InboxCap: 4, ActiveWindow: 7 * 24 * time.Hour})
	tl := e.tl
	follow(t, tl, 1, 2, 3)
	wantHome(t, tl, 1)
	for p := uint64(1); p <= 10; p++ {
		publish(t, tl, 2+p%2, p)
	}
	e.run()
	l := inbox(t, tl, 1)
	if len(l.Entries) != 4 || l.Floor != 7 {
		t.Fatalf("capped inbox %+v", l)
	}
	wantHome(t, tl, 1, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1) // below the floor by pull
	// Reads within the window keep the user active.
	e.clock.Advance(6 * 24 * time.Hour)
	wantHome(t, tl, 1, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1)
	e.clock.Advance(6 * 24 * time.Hour)
	n, err := tl.Expire(t.Context())
	must(t, err)
	if n != 0 {
		t.Fatalf("expired an active user: %d", n)
	}
	e.clock.Advance(2 * 24 * time.Hour)
	n, err = tl.Expire(t.Context())
	must(t, err)
	if n != 1 {
		t.Fatalf("expired %d users, want 1", n)
	}
	if inbox(t, tl, 1) != nil {
		t.Fatal("expired inbox kept")
	}
	if info, _ := tl.User(1); info.Active {
		t.Fatalf("expired user active: %+v", info)
	}
	// Posts while away are not pushed.
	publish(t, tl, 2, 11)
	e.run()
	if inbox(t, tl, 1) != nil {
		t.Fatal("inactive user pushed to")
	}
	// The return rebuilds the inbox by pull, in full.
	before := tl.stats.rebuilds.Load()
	wantHome(t, tl, 1, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1)
	if tl.stats.rebuilds.Load() != before+1 {
		t.Fatal("no rebuild on return")
	}
	if got := inboxPosts(t, tl, 1); !slices.Equal(got, []uint64{11, 10, 9, 8}) {
		t.Fatalf("rebuilt inbox %v", got)
	}
	e.check()
}

// Behaviour 5: follow shows older posts at once, unfollow hides them, and
// a follow and an unfollow of one pair end in the last one's state
// whatever order their jobs run in.
func TestFollowBackfillUnfollowRefollow(t *testing.T) {
	e := newEnv(t, Config{})
	tl := e.tl
	follow(t, tl, 1, 2)
	publish(t, tl, 3, 5, 6) // before the follow
	wantHome(t, tl, 1)
	follow(t, tl, 1, 3)
	wantHome(t, tl, 1, 6, 5) // before the backfill ran: pulled
	e.run()
	if got := inboxPosts(t, tl, 1); !slices.Equal(got, []uint64{6, 5}) {
		t.Fatalf("backfilled inbox %v", got)
	}
	wantHome(t, tl, 1, 6, 5)
	_, err := tl.Unfollow(1, 3)
	must(t, err)
	wantHome(t, tl, 1) // before the cleanup ran: filtered
	e.run()
	if got := inboxPosts(t, tl, 1); len(got) != 0 {
		t.Fatalf("cleaned inbox %v", got)
	}
	follow(t, tl, 1, 3)
	wantHome(t, tl, 1, 6, 5)
	e.run()
	wantHome(t, tl, 1, 6, 5)

	// Close together, jobs not run: the last change wins.
	for round, ops := range [][]bool{{false, true}, {false, true, false}, {false, true, false, true}} {
		for _, f := range ops {
			var err error
			if f {
				_, err = tl.Follow(1, 3)
			} else {
				_, err = tl.Unfollow(1, 3)
			}
			must(t, err)
		}
		last := ops[len(ops)-1]
		want := []uint64{}
		if last {
			want = []uint64{6, 5}
		}
		wantHome(t, tl, 1, want...)
		e.run()
		wantHome(t, tl, 1, want...)
		if got := inboxPosts(t, tl, 1); !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Fatalf("round %d: inbox %v, want %v", round, got, want)
		}
		e.check()
	}
}

// The jobs of a pair, run in any order (a worker may pick the cleanup
// before a backfill enqueued earlier for another reason), end in the
// graph's state: run the unfollow's cleanup while the follow's backfill
// is running is impossible (one key runs at a time), so run them one by
// one by hand in both orders.
func TestPairJobsAnyOrder(t *testing.T) {
	for _, order := range []string{"follow-last", "unfollow-last"} {
		t.Run(order, func(t *testing.T) {
			e := newEnv(t, Config{})
			tl := e.tl
			publish(t, tl, 3, 5)
			follow(t, tl, 1, 2)
			wantHome(t, tl, 1)
			follow(t, tl, 1, 3)
			run1, err := e.db.LeaseJob(jobPair) // the backfill, leased: it runs now
			must(t, err)
			_, err = tl.Unfollow(1, 3)
			must(t, err)
			if order == "follow-last" {
				follow(t, tl, 1, 3)
			}
			must(t, tl.runPair(t.Context(), run1))
			run1.Release(nil)
			e.run()
			if order == "follow-last" {
				wantHome(t, tl, 1, 5)
			} else {
				wantHome(t, tl, 1)
				if got := inboxPosts(t, tl, 1); len(got) != 0 {
					t.Fatalf("inbox %v", got)
				}
			}
		})
	}
}

// Behaviour 6: cursors never skip or repeat when posts arrive, pages
// continue below the floor by pull, and the end is told.
func TestHomeCursors(t *testing.T) {
	e := newEnv(t, Config{InboxCap: 3})
	tl := e.tl
	follow(t, tl, 1, 2, 3)
	wantHome(t, tl, 1)
	for p := uint64(10); p < 30; p++ {
		publish(t, tl, 2+p%2, p)
	}
	e.run()
	p1, err := tl.Home(1, "", 5)
	must(t, err)
	if !slices.Equal(postsOf(p1.Entries), []uint64{29, 28, 27, 26, 25}) || p1.NoMore {
		t.Fatalf("page 1 %+v", p1)
	}
	// New posts above and below the cursor, and a removal below it.
	publish(t, tl, 2, 40, 24)
	_, _, err = tl.Unpublish(3, 23)
	must(t, err)
	e.run()
	p2, err := tl.Home(1, p1.Cursor, 5)
	must(t, err)
	if !slices.Equal(postsOf(p2.Entries), []uint64{24, 22, 21, 20, 19}) {
		t.Fatalf("page 2 %v", p2.Entries)
	}
	rest := p2
	var tail []uint64
	for !rest.NoMore {
		rest, err = tl.Home(1, rest.Cursor, 5)
		must(t, err)
		tail = append(tail, postsOf(rest.Entries)...)
	}
	if !slices.Equal(tail, []uint64{18, 17, 16, 15, 14, 13, 12, 11, 10}) {
		t.Fatalf("tail %v", tail)
	}
	// A page that ends exactly at the end says so with the next one empty
	// or at once, never a cursor to nothing.
	p, err := tl.Home(1, "", 21)
	must(t, err)
	if len(p.Entries) != 20 || !p.NoMore {
		t.Fatalf("whole home in one page: %d entries, NoMore %v", len(p.Entries), p.NoMore)
	}
}

func TestHomeBadInput(t *testing.T) {
	e := newEnv(t, Config{})
	tl := e.tl
	follow(t, tl, 1, 2)
	follow(t, tl, 3, 2)
	publish(t, tl, 2, 1, 2, 3)
	p, err := tl.Home(1, "", 1)
	must(t, err)
	for name, c := range map[string]struct {
		user   uint64
		cursor string
		limit  int
		want   error
	}{
		"zero user":        {0, "", 1, ErrBadID},
		"huge user":        {MaxID + 1, "", 1, ErrBadID},
		"garbage":          {1, "not a cursor", 1, ErrBadCursor},
		"other user's":     {3, p.Cursor, 1, ErrBadCursor},
		"damaged":          {1, p.Cursor[:len(p.Cursor)-2] + "AA", 1, ErrBadCursor},
		"negative limit":   {1, "", -1, ErrBadLimit},
		"too large limit":  {1, "", MaxLimit + 1, ErrBadLimit},
		"long garbage":     {1, string(make([]byte, 10000)), 1, ErrBadCursor},
		"followers cursor": {1, encodeCursor(cursorFollowers, 1, 5), 1, ErrBadCursor},
	} {
		if _, err := tl.Home(c.user, c.cursor, c.limit); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
	if _, err := tl.FollowersPage(2, p.Cursor, 1); !errors.Is(err, ErrBadCursor) {
		t.Errorf("home cursor for followers: %v", err)
	}
	// An unknown user reads an empty page and nothing is written.
	before := e.db.Stats().LastSeq
	p, err = tl.Home(12345, "", 10)
	must(t, err)
	if len(p.Entries) != 0 || !p.NoMore {
		t.Fatalf("unknown user %+v", p)
	}
	if e.db.Stats().LastSeq != before {
		t.Fatal("reading an unknown user's home wrote something")
	}
}

// Behaviour 7: the configuration persists and shows in Stats.
func TestConfigPersisted(t *testing.T) {
	e := newEnv(t, Config{InboxCap: 50, PullThreshold: 7})
	if c := e.tl.Config(); c.InboxCap != 50 || c.PullThreshold != 7 || c.ActiveWindow != DefaultActiveWindow || c.ChunkSize != DefaultChunkSize {
		t.Fatalf("config %+v", c)
	}
	c, err := e.tl.SetConfig(Config{ActiveWindow: 48 * time.Hour, ChunkSize: 9})
	must(t, err)
	if c.InboxCap != 50 || c.ActiveWindow != 48*time.Hour || c.ChunkSize != 9 {
		t.Fatalf("after set %+v", c)
	}
	e.cfg = Config{} // reopen without overrides: the persisted values hold
	e.reopen()
	if got := e.tl.Config(); got != c {
		t.Fatalf("after reopen %+v, want %+v", got, c)
	}
	stats := map[string]string{}
	for _, s := range e.tl.Stats() {
		stats[s.Key] = s.Value
	}
	if stats["inbox_cap"] != "50" || stats["active_window"] != "48h0m0s" || stats["pull_threshold"] != "7" || stats["chunk_size"] != "9" {
		t.Fatalf("stats %v", stats)
	}
	for _, bad := range []Config{{InboxCap: -1}, {InboxCap: MaxInboxCap + 1}, {ActiveWindow: time.Second}, {ActiveWindow: 90*time.Second + 1}, {ChunkSize: -5}} {
		if _, err := e.tl.SetConfig(bad); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("config %+v: %v", bad, err)
		}
	}
	if got := e.tl.Config(); got != c {
		t.Fatalf("refused config changed something: %+v", got)
	}
}

// recorder is a FollowObserver that records its calls and keeps, in its
// own counter "obs" written in the follow's batch, the number of edges it
// was told of per user (as unread keeps its snapshots).
type recorder struct {
	calls []string
	fail  error
}

func (r *recorder) Followed(b *store.Batch, u, f, posts uint64) error {
	r.calls = append(r.calls, fmt.Sprintf("+%d>%d@%d", u, f, posts))
	if err := b.Incr("obs", u, "edges", 1); err != nil {
		return err
	}
	return r.fail
}

func (r *recorder) Unfollowed(b *store.Batch, u, f uint64) error {
	r.calls = append(r.calls, fmt.Sprintf("-%d>%d", u, f))
	if err := b.Incr("obs", u, "edges", -1); err != nil {
		return err
	}
	return r.fail
}

func TestObservers(t *testing.T) {
	e := newEnv(t, Config{})
	tl := e.tl
	must(t, e.db.CreateCounter("obs", store.CounterOptions{}))
	must(t, e.db.AddColumn("obs", "edges", store.ColumnOptions{}))
	obs, err := e.db.Counter("obs")
	must(t, err)
	r := &recorder{}
	tl.AddObserver(r)
	publish(t, tl, 2, 1, 2)
	follow(t, tl, 1, 2)
	follow(t, tl, 1, 2) // no change: no call
	_, err = tl.Unfollow(1, 2)
	must(t, err)
	_, err = tl.Unfollow(1, 2)
	must(t, err)
	_, err = tl.LoadFollows(t.Context(), []Edge{{3, 2}, {1, 2}, {3, 2}}, nil)
	must(t, err)
	if want := []string{"+1>2@2", "-1>2", "+1>2@2", "+3>2@2"}; !slices.Equal(r.calls, want) {
		t.Fatalf("calls %v, want %v", r.calls, want)
	}
	// The observer's writes committed with the follows they describe.
	for u, want := range map[uint64]uint64{1: 1, 3: 1, 5: 0} {
		if got, _ := obs.GetColumn(u, "edges"); got != want {
			t.Fatalf("observer's count of %d: %d, want %d", u, got, want)
		}
	}
	// An observer's error aborts the change, its own writes included.
	r.fail = errors.New("no")
	if _, err := tl.Follow(5, 2); !errors.Is(err, r.fail) {
		t.Fatalf("follow with a failing observer: %v", err)
	}
	if ok, _ := tl.IsFollowing(5, 2); ok {
		t.Fatal("follow committed despite the observer's error")
	}
	if got, _ := obs.GetColumn(5, "edges"); got != 0 {
		t.Fatalf("a refused follow's observer write committed: %d", got)
	}
	if n, _ := tl.PostCounts([]uint64{2, 9}, nil); !slices.Equal(n, []uint64{2, 0}) {
		t.Fatalf("post counts %v", n)
	}
	// A reused buffer: the same answer, no allocation.
	buf, _ := tl.PostCounts([]uint64{9, 2, 9}, nil)
	if !slices.Equal(buf, []uint64{0, 2, 0}) {
		t.Fatalf("post counts %v", buf)
	}
	if a := testing.AllocsPerRun(100, func() { buf, _ = tl.PostCounts([]uint64{2, 9, 2}, buf) }); a != 0 {
		t.Fatalf("PostCounts with a reused buffer: %v allocations", a)
	}
	if !slices.Equal(buf, []uint64{2, 0, 2}) {
		t.Fatalf("post counts %v", buf)
	}
}

// A fan-out cut by a crash resumes at its first unfinished chunk and
// delivers every post exactly once (the kill -9 version is crash_test.go).
func TestFanoutResumesAfterCrash(t *testing.T) {
	e := newModelEnv(t, Config{}, -1, -1)
	_, err := e.tl.SetConfig(Config{ChunkSize: 7})
	must(t, err)
	const n = 200
	edges := make([]Edge, 0, n)
	for u := uint64(2); u < n+2; u++ {
		edges = append(edges, Edge{u, 1})
	}
	_, err = e.tl.LoadFollows(t.Context(), edges, nil)
	must(t, err)
	for u := uint64(2); u < n+2; u++ {
		_, err := e.tl.MarkActive(u)
		must(t, err)
	}
	publish(t, e.tl, 1, 99)
	run, err := e.db.LeaseJob(jobFanout)
	must(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	chunks := 0
	e.tl.testHook = func() {
		if chunks++; chunks == 5 {
			cancel()
		}
	}
	err = e.tl.runFanout(ctx, run)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("fan-out: %v", err)
	}
	e.tl.testHook = nil
	if got := e.db.QueuedJobs()[0].Done; got != 5 {
		t.Fatalf("chunks done before the crash: %d", got)
	}
	e.crash(newRand(1))
	e.run()
	info, _, err := e.tl.Post(99)
	must(t, err)
	if info.Delivered != n || e.tl.stats.deliveries.Load() != n-5*7 {
		t.Fatalf("delivered %d (this run %d), want %d", info.Delivered, e.tl.stats.deliveries.Load(), n)
	}
	for u := uint64(2); u < n+2; u++ {
		if got := inboxPosts(t, e.tl, u); !slices.Equal(got, []uint64{99}) {
			t.Fatalf("inbox of %d: %v", u, got)
		}
	}
	e.check()
}

// The collector keeps the k newest distinct keys, by scan or by map.
func TestCollector(t *testing.T) {
	rng := newRand(5)
	for _, k := range []int{1, 5, dedupScan, dedupScan + 1, 500} {
		var c collector
		c.reset(k, true)
		want := map[uint64]bool{}
		for range 5000 {
			key := 1 + rng.Uint64N(3000)
			c.push(store.TopEntry{Key: key, Value: key * 2})
			want[key] = true
		}
		var all []uint64
		for key := range want {
			all = append(all, key)
		}
		slices.Sort(all)
		slices.Reverse(all)
		got := c.sorted()
		if len(got) != min(k, len(all)) {
			t.Fatalf("k %d: %d held", k, len(got))
		}
		for i, e := range got {
			if e.Key != all[i] || e.Value != e.Key*2 {
				t.Fatalf("k %d: entry %d = %+v, want key %d", k, i, e, all[i])
			}
		}
	}
}

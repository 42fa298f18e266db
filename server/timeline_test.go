package server

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	tallydb "github.com/tallydb/tally"
	"github.com/tallydb/tally/store"
	"github.com/tallydb/tally/timeline"
)

// newTimelineServer serves a fresh database with the one command table
// (the TL.* commands among it) and no job workers: a fan-out runs when a
// test runs the jobs, or when TL.POST WAIT waits for it. Check of every
// package runs at cleanup.
func newTimelineServer(t *testing.T) (*redis.Client, *timeline.Timeline) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "db")
	db, err := tallydb.Open(dir, &tallydb.Options{
		Store:    &store.Options{Durability: store.NoSync, DisableBackground: true, JobWorkers: -1},
		Timeline: &timeline.Options{ExpireInterval: -1},
	})
	if err != nil {
		t.Fatal(err)
	}
	ts := startServerWith(t, db.Store(), dir, nil, DBCommands(db))
	t.Cleanup(func() { // runs before the server's cleanup closes the store (LIFO)
		if err := db.Check(); err != nil {
			t.Errorf("Check: %v", err)
		}
		for _, p := range db.Packages() {
			p.Close()
		}
	})
	return ts.client(t, &redis.Options{PoolSize: 2}), db.Timeline()
}

func TestTimelineCommands(t *testing.T) {
	c, tl := newTimelineServer(t)
	ctx := context.Background()
	do := func(args ...any) any {
		t.Helper()
		v, err := c.Do(ctx, args...).Result()
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return v
	}
	if n := do("TL.FOLLOW", 1, 20, 21, 22); n != int64(3) {
		t.Fatalf("follow: %v", n)
	}
	if n := do("TL.FOLLOW", 1, 20); n != int64(0) {
		t.Fatalf("second follow: %v", n)
	}
	do("TL.FOLLOW", 2, 20)
	if v := do("TL.ISFOLLOWING", 1, 21); v != int64(1) {
		t.Fatalf("isfollowing: %v", v)
	}
	if v := do("TL.ISFOLLOWING", 21, 1); v != int64(0) {
		t.Fatalf("isfollowing reversed: %v", v)
	}
	if v := do("TL.MISFOLLOWING", 1, 21, 23, 20); !equalAny(v, []any{int64(1), int64(0), int64(1)}) {
		t.Fatalf("misfollowing: %v", v)
	}
	if n := do("TL.ACTIVE", 1); n != int64(1) {
		t.Fatalf("active: %v", n)
	}
	if v := do("TL.POST", 20, 100, 101, "WAIT"); !equalAny(v, []any{[]any{"post", int64(100), "status", "delivered", "deliveries", int64(1)},
		[]any{"post", int64(101), "status", "delivered", "deliveries", int64(1)}}) {
		t.Fatalf("post wait: %v", v)
	}
	// 21 has one follower: the fan-out is in the post's own commit (no
	// job), so the post is "published", already in the inbox.
	if v := do("TL.POST", 21, 102); !equalAny(v, []any{[]any{"post", int64(102), "status", "published"}}) {
		t.Fatalf("post: %v", v)
	}
	if v := do("TL.POST", 20, 101); !equalAny(v, []any{[]any{"post", int64(101), "status", "duplicate"}}) {
		t.Fatalf("republish: %v", v)
	}
	if v := do("TL.POST", 23, 103); !equalAny(v, []any{[]any{"post", int64(103), "status", "published"}}) {
		t.Fatalf("post without followers: %v", v)
	}
	must(t, tl.DB().RunJobs(ctx, nil))
	// Pages of 2 through the cursor.
	v := do("TL.HOME", 1, "LIMIT", 2).([]any)
	if len(v) != 2 || v[0] == nil || !equalAny(v[1], []any{[]any{int64(102), int64(21)}, []any{int64(101), int64(20)}}) {
		t.Fatalf("home page 1: %v", v)
	}
	v = do("TL.HOME", 1, "limit", 2, "cursor", v[0]).([]any)
	if len(v) != 2 || v[0] != nil || !equalAny(v[1], []any{[]any{int64(100), int64(20)}}) {
		t.Fatalf("home page 2: %v", v)
	}
	if v := do("TL.HOME", 12345).([]any); v[0] != nil || len(v[1].([]any)) != 0 {
		t.Fatalf("unknown user's home: %v", v)
	}
	if v := do("TL.USER", 20); !equalAny(v, []any{"followers", int64(2), "followees", int64(0), "posts", int64(2)}) {
		t.Fatalf("user: %v", v)
	}
	if v := do("TL.MUSER", 20, 1); !equalAny(v, []any{[]any{"followers", int64(2), "followees", int64(0), "posts", int64(2)},
		[]any{"followers", int64(0), "followees", int64(3), "posts", int64(0)}}) {
		t.Fatalf("muser: %v", v)
	}
	if v := do("TL.FOLLOWERS", 20); !equalAny(v, []any{nil, []any{int64(1), int64(2)}}) {
		t.Fatalf("followers: %v", v)
	}
	v = do("TL.FOLLOWEES", 1, "LIMIT", 2).([]any)
	if v[0] == nil || !equalAny(v[1], []any{int64(20), int64(21)}) {
		t.Fatalf("followees: %v", v)
	}
	if v := do("TL.FOLLOWEES", 1, "LIMIT", 2, "CURSOR", v[0]); !equalAny(v, []any{nil, []any{int64(22)}}) {
		t.Fatalf("followees page 2: %v", v)
	}
	// A user's own posts, newest first, by cursor.
	v = do("TL.POSTS", 20, "LIMIT", 1).([]any)
	if v[0] == nil || !equalAny(v[1], []any{int64(101)}) {
		t.Fatalf("posts: %v", v)
	}
	if v := do("TL.POSTS", 20, "LIMIT", 1, "CURSOR", v[0]); !equalAny(v, []any{nil, []any{int64(100)}}) {
		t.Fatalf("posts page 2: %v", v)
	}
	if v := do("TL.UNPOST", 20, 100, 999); !equalAny(v, []any{"removed", "absent"}) {
		t.Fatalf("unpost: %v", v)
	}
	if n := do("TL.UNFOLLOW", 1, 21, 50); n != int64(1) {
		t.Fatalf("unfollow: %v", n)
	}
	if v := do("TL.HOME", 1); !equalAny(v, []any{nil, []any{[]any{int64(101), int64(20)}}}) {
		t.Fatalf("home after unpost and unfollow: %v", v)
	}
	// RESP's default, said; a small fan-out goes in the post's commit.
	if v := do("TL.POST", 20, 105, "ASYNC"); !equalAny(v, []any{[]any{"post", int64(105), "status", "published"}}) {
		t.Fatalf("post async: %v", v)
	}
	if err := c.Do(ctx, "TL.FOLLOWERS", 20, "LIMIT", 0).Err(); err == nil || !strings.Contains(err.Error(), "timeline: bad page limit: 0") {
		t.Fatalf("followers limit 0: %v", err) // as likes: a page holds 1..1000
	}
	if v := do("TL.CONFIG", "INBOXCAP", 50, "ACTIVEWINDOW", "48h"); !equalAny(v, []any{"inbox_cap", int64(50), "active_window", "48h0m0s", "pull_threshold", int64(1000000), "chunk_size", int64(1000)}) {
		t.Fatalf("config: %v", v)
	}
	if n := do("TL.EXPIRE"); n != int64(0) {
		t.Fatalf("expire: %v", n)
	}
	// COMMAND DOCS knows the group (redis-cli's hints).
	docs, err := c.Do(ctx, "COMMAND", "DOCS", "TL.HOME").Result()
	if err != nil || !strings.Contains(toString(docs), "home timeline") {
		t.Fatalf("command docs: %v %v", docs, err)
	}
}

func TestTimelineCommandsBadInput(t *testing.T) {
	c, tl := newTimelineServer(t)
	ctx := context.Background()
	must(t, c.Do(ctx, "TL.FOLLOW", 1, 2).Err())
	must(t, c.Do(ctx, "TL.POST", 2, 10, 11).Err())
	must(t, c.Do(ctx, "TL.POST", 3, 12).Err())
	v, err := c.Do(ctx, "TL.HOME", 1, "LIMIT", 1).Result()
	must(t, err)
	cursor := v.([]any)[0]
	state := func() string {
		var b strings.Builder
		for _, u := range []uint64{1, 2, 3, 4} {
			info, err := tl.User(u)
			must(t, err)
			b.WriteString(toString([]any{info.Followers, info.Followees, info.Posts}))
		}
		p, err := tl.Home(1, "", 100)
		must(t, err)
		b.WriteString(toString(p.Entries))
		return b.String()
	}
	before := state()
	for _, tc := range []struct {
		args []any
		want string
	}{
		{[]any{"TL.FOLLOW", 1, 1}, "ERR timeline: a user cannot follow themselves"},
		{[]any{"TL.FOLLOW", 4, 5, 4}, "ERR timeline: a user cannot follow themselves"},
		{[]any{"TL.FOLLOW", 1, "x"}, `ERR bad followee "x"`},
		{[]any{"TL.UNFOLLOW", 1, 1}, "ERR timeline: a user cannot follow themselves"},
		{[]any{"TL.FOLLOW", 0, 2}, "ERR timeline: bad id"},
		{[]any{"TL.FOLLOW", 1}, "ERR wrong number of arguments"},
		{[]any{"TL.POST", 2, 13, 12}, "ERR timeline: post id belongs to another author"},
		{[]any{"TL.POST", 2, "WAIT"}, `ERR bad post "WAIT"`},
		{[]any{"TL.POST", 2, 13, "WAIT", "ASYNC"}, "ERR wait and async exclude each other"},
		{[]any{"TL.POST", 2, 13, "WAIT", "WAIT"}, "ERR WAIT given twice"},
		{[]any{"TL.POST", 2, 0}, "ERR timeline: bad id: post id 0"},
		{[]any{"TL.UNPOST", 2, 12}, "ERR timeline: post id belongs to another author"},
		{[]any{"TL.HOME", 1, "LIMIT", -1}, "ERR timeline: bad page limit"},
		{[]any{"TL.HOME", 1, "LIMIT", 1001}, "ERR timeline: bad page limit"},
		{[]any{"TL.HOME", 1, "LIMIT", "x"}, `ERR bad limit "x"`},
		{[]any{"TL.HOME", 1, "CURSOR", "nope"}, "ERR timeline: bad cursor"},
		{[]any{"TL.HOME", 3, "CURSOR", cursor}, "ERR timeline: bad cursor"},
		{[]any{"TL.HOME", 1, "LIMIT"}, "ERR LIMIT needs a value"},
		{[]any{"TL.HOME", 1, "SIDEWAYS", 2}, `ERR unknown option "SIDEWAYS"`},
		{[]any{"TL.HOME", "x"}, `ERR bad uid "x"`},
		{[]any{"TL.FOLLOWERS", 2, "CURSOR", cursor}, "ERR timeline: bad cursor"},
		{[]any{"TL.CONFIG", "INBOXCAP", 0}, "ERR timeline: invalid option"},
		{[]any{"TL.CONFIG", "ACTIVEWINDOW", "1s"}, "ERR timeline: invalid option"},
		{[]any{"TL.CONFIG", "INBOXCAP", 2000000}, "ERR timeline: invalid option"},
		{[]any{"TL.CONFIG", "PULLTHRESHOLD", 0}, "ERR timeline: invalid option"},
		{[]any{"TL.CONFIG", "CHUNKSIZE", -1}, "ERR timeline: invalid option"},
		{[]any{"TL.CONFIG", "ACTIVEWINDOW", "soon"}, `ERR bad active-window "soon"`},
		{[]any{"TL.CONFIG", "BOGUS", 1}, `ERR unknown option "BOGUS"`},
		{[]any{"TL.EXPIRE", 1}, "ERR wrong number of arguments"},
		{[]any{"TL.ACTIVE", 0}, "ERR timeline: bad id"},
		{[]any{"TL.USER", 0}, "ERR timeline: bad id"},
		{[]any{"TL.USER", 1, 2}, "ERR wrong number of arguments"},
		{[]any{"TL.MUSER", 1, 0}, "ERR timeline: bad id"},
		{[]any{"TL.ISFOLLOWING", 1}, "ERR wrong number of arguments"},
		{[]any{"TL.ISFOLLOWING", 1, 2, 3}, "ERR wrong number of arguments"},
		{[]any{"TL.MISFOLLOWING", 1, 0}, "ERR timeline: bad id"},
	} {
		err := c.Do(ctx, tc.args...).Err()
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
	if got := state(); got != before {
		t.Fatalf("bad input changed the state:\n%s\nwas\n%s", got, before)
	}
}

func equalAny(a, b any) bool { return toString(a) == toString(b) }

func toString(v any) string {
	var b strings.Builder
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case []any:
			b.WriteByte('[')
			for i, e := range x {
				if i > 0 {
					b.WriteByte(' ')
				}
				walk(e)
			}
			b.WriteByte(']')
		case nil:
			b.WriteString("<nil>")
		default:
			b.WriteString(strings.TrimSpace(strings.ReplaceAll(fmtAny(x), "\n", " ")))
		}
	}
	walk(v)
	return b.String()
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

package timeline

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/tallydb/tally/store"
)

func posts(es []Entry) []uint64 {
	out := make([]uint64, len(es))
	for i, e := range es {
		out[i] = e.Post
	}
	return out
}

func TestSmoke(t *testing.T) {
	e := newEnv(t, Config{})
	tl := e.tl
	for _, a := range []uint64{2, 3} {
		ch, err := tl.Follow(1, a)
		must(t, err)
		if !ch {
			t.Fatal("follow reported no change")
		}
	}
	if ch, err := tl.Follow(1, 2); err != nil || ch {
		t.Fatalf("second follow: %v %v", ch, err)
	}
	must(t, func() error { _, err := tl.Publish(2, 10); return err }())
	must(t, func() error { _, err := tl.Publish(3, 11); return err }())
	got := homeAll(t, tl, 1, 1)
	if !slices.Equal(posts(got), []uint64{11, 10}) {
		t.Fatalf("home %v", got)
	}
	// Now 1 is active: later posts are pushed.
	r, err := tl.Publish(2, 12)
	must(t, err)
	if r.Job == 0 {
		t.Fatal("no fan-out job for an author with an active follower")
	}
	e.run()
	e.check()
	info, ok, err := tl.Post(12)
	must(t, err)
	if !ok || !info.FannedOut || info.Delivered != 1 {
		t.Fatalf("post 12: %+v %v", info, ok)
	}
	got = homeAll(t, tl, 1, 2)
	if !slices.Equal(posts(got), []uint64{12, 11, 10}) {
		t.Fatalf("home %v", got)
	}
	u, err := tl.User(2)
	must(t, err)
	if u.Followers != 1 || u.Posts != 2 {
		t.Fatalf("user 2: %+v", u)
	}
	_, err = tl.Unfollow(1, 2)
	must(t, err)
	if got := homeAll(t, tl, 1, 5); !slices.Equal(posts(got), []uint64{11}) {
		t.Fatalf("home after unfollow %v", got)
	}
	e.run()
	e.check()
	_, err = tl.Follow(1, 2)
	must(t, err)
	if got := homeAll(t, tl, 1, 5); !slices.Equal(posts(got), []uint64{12, 11, 10}) {
		t.Fatalf("home after re-follow %v", got)
	}
	e.run()
	e.check()
	if got := homeAll(t, tl, 1, 5); !slices.Equal(posts(got), []uint64{12, 11, 10}) {
		t.Fatalf("home after backfill %v", got)
	}
	ch, _, err := tl.Unpublish(2, 12)
	must(t, err)
	if !ch {
		t.Fatal("unpublish: no change")
	}
	if got := homeAll(t, tl, 1, 5); !slices.Equal(posts(got), []uint64{11, 10}) {
		t.Fatalf("home after unpublish %v", got)
	}
	e.run()
	e.check()
	e.clock.Advance(8 * 24 * time.Hour)
	n, err := tl.Expire(t.Context())
	must(t, err)
	if n != 1 {
		t.Fatalf("expired %d", n)
	}
	e.check()
	if got := homeAll(t, tl, 1, 5); !slices.Equal(posts(got), []uint64{11, 10}) {
		t.Fatalf("home after return %v", got)
	}
	e.reopen()
	e.check()
	if _, err := e.tl.Follow(1, 1); !errors.Is(err, ErrSelfFollow) {
		t.Fatalf("self follow: %v", err)
	}
	if _, err := e.tl.Home(1, "garbage", 5); !errors.Is(err, ErrBadCursor) {
		t.Fatalf("bad cursor: %v", err)
	}
	_ = store.ErrClosed
}

package likes

import (
	"errors"
	"slices"
	"testing"
	"time"
)

func TestLikeBasics(t *testing.T) {
	e := newEnv(t, nil)
	l := e.l
	res := must[Result](t)
	if r := res(l.Like("video", 10, 1, 100)); !r.Changed || r.Likes != 1 || r.Dislikes != 0 || r.State != Liked {
		t.Fatalf("like: %+v", r)
	}
	if r := res(l.Like("video", 10, 1, 100)); r.Changed || r.Likes != 1 {
		t.Fatalf("repeated like: %+v", r)
	}
	if r := res(l.Dislike("video", 10, 1)); !r.Changed || r.Likes != 0 || r.Dislikes != 1 || r.State != Disliked {
		t.Fatalf("dislike replaces like: %+v", r)
	}
	if r := res(l.Like("video", 10, 2, 0)); r.Likes != 1 || r.Dislikes != 1 {
		t.Fatalf("second user: %+v", r)
	}
	if got, _ := l.Received(100); got != 1 {
		t.Fatalf("received %d, want 1", got)
	}
	if _, err := l.Like("video", 10, 3, 200); !errors.Is(err, ErrOwnerMismatch) {
		t.Fatalf("other owner: %v", err)
	}
	sts := must[[]State](t)(l.States("video", 1, []uint64{10, 11, 10}, nil))
	if !slices.Equal(sts, []State{Disliked, None, Disliked}) {
		t.Fatalf("states %v", sts)
	}
	e.check()
	if r := res(l.Undislike("video", 10, 1)); !r.Changed || r.Dislikes != 0 {
		t.Fatalf("undislike %+v", r)
	}
	if r := res(l.Unlike("video", 10, 1)); r.Changed {
		t.Fatalf("unlike of nothing %+v", r)
	}
	e.check()
	top := must[[]Entry](t)(l.Top("video", 10))
	if len(top) != 1 || top[0] != (Entry{Rank: 1, Item: 10, Likes: 1}) {
		t.Fatalf("top %v", top)
	}
	e.reopen()
	top = must[[]Entry](t)(e.l.Top("video", 10))
	if len(top) != 1 || top[0] != (Entry{Rank: 1, Item: 10, Likes: 1}) {
		t.Fatalf("top after reopen %v", top)
	}
	if d, err := e.l.TopDay("video", e.clock.Now(), 10); err != nil || len(d) != 1 {
		t.Fatalf("day top %v %v", d, err)
	}
	e.clock.Advance(30 * 24 * time.Hour)
	if _, err := e.l.TopDay("video", epoch, 10); !errors.Is(err, ErrDayNotKept) {
		t.Fatalf("old day: %v", err)
	}
}

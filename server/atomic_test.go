package server

// Issue 16 items 4 and 5 over RESP: a refused TL.POST or TL.FOLLOW changes
// nothing, also when another client races it.

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/tallydb/tally/timeline"
)

// TestAtomicTLPostRace is the race: client A sends TL.POST 1 X Y
// while client B sends TL.POST 2 Y, in both orders, many times. Whoever
// loses is refused whole: if A is refused, X is not published; outboxes
// and post counts agree with the replies.
func TestAtomicTLPostRace(t *testing.T) {
	c, tl := newTimelineServer(t)
	ctx := context.Background()
	const rounds = 500
	var aWon, bWon int
	for i := range rounds {
		x, y := uint64(10_000+2*i), uint64(10_001+2*i)
		var errA, errB error
		var wg sync.WaitGroup
		start := make(chan struct{})
		wg.Add(2)
		post := func(err *error, args ...any) {
			defer wg.Done()
			<-start
			*err = c.Do(ctx, args...).Err()
		}
		if i%2 == 0 {
			go post(&errA, "TL.POST", 1, x, y)
			go post(&errB, "TL.POST", 2, y)
		} else {
			go post(&errB, "TL.POST", 2, y)
			go post(&errA, "TL.POST", 1, x, y)
		}
		close(start)
		wg.Wait()
		yOwner, _, err := tl.Owner(y)
		if err != nil {
			t.Fatal(err)
		}
		xOwner, xPublished, err := tl.Owner(x)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case errA == nil && errB != nil:
			aWon++
			if yOwner != 1 || xOwner != 1 || !xPublished || !strings.Contains(errB.Error(), "belongs to another author") {
				t.Fatalf("round %d: A won, but y is %d's, x is %d's (published %v); B: %v", i, yOwner, xOwner, xPublished, errB)
			}
		case errB == nil && errA != nil:
			bWon++
			if yOwner != 2 || xOwner != 0 || xPublished || !strings.Contains(errA.Error(), "belongs to another author") {
				t.Fatalf("round %d: A refused (%v), but x is %d's (published %v), y is %d's", i, errA, xOwner, xPublished, yOwner)
			}
		default:
			t.Fatalf("round %d: A: %v, B: %v (y is %d's)", i, errA, errB, yOwner)
		}
	}
	for _, w := range []struct {
		author uint64
		posts  int
	}{{1, 2 * aWon}, {2, bWon}} {
		v, err := c.Do(ctx, "TL.USER", w.author).Slice()
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		if err := tl.Posts(w.author, 0, func(uint64) bool { n++; return true }); err != nil {
			t.Fatal(err)
		}
		if v[5] != int64(w.posts) || n != w.posts {
			t.Fatalf("author %d: posts %v, outbox %d, want %d", w.author, v[5], n, w.posts)
		}
	}
	t.Logf("A won %d, B won %d of %d", aWon, bWon, rounds)
}

// TestAtomicTLFollowLimit is the limit case over RESP: with
// MaxFollowees-1 followees, TL.FOLLOW 1 200001 200002 is refused and
// neither is followed; then two clients race for the last slots and the
// limit holds, each refused command having changed nothing.
func TestAtomicTLFollowLimit(t *testing.T) {
	c, tl := newTimelineServer(t)
	ctx := context.Background()
	edges := make([]timeline.Edge, timeline.MaxFollowees-1)
	for i := range edges {
		edges[i] = timeline.Edge{Follower: 1, Followee: 1_000_000 + uint64(i)}
	}
	if _, err := tl.LoadFollows(ctx, edges, nil); err != nil {
		t.Fatal(err)
	}
	notFollowing := func(ids ...any) {
		t.Helper()
		for _, f := range ids {
			if n, err := c.Do(ctx, "TL.ISFOLLOWING", 1, f).Int(); err != nil || n != 0 {
				t.Fatalf("TL.ISFOLLOWING 1 %d = %d, %v after a refused follow", f, n, err)
			}
		}
	}
	err := c.Do(ctx, "TL.FOLLOW", 1, 200001, 200002).Err()
	if err == nil || !strings.Contains(err.Error(), "too many followees") {
		t.Fatalf("TL.FOLLOW at the limit: %v", err)
	}
	notFollowing(200001, 200002)
	followees := func() int64 {
		t.Helper()
		v, err := c.Do(ctx, "TL.USER", 1).Slice()
		if err != nil {
			t.Fatal(err)
		}
		return v[3].(int64)
	}
	if n := followees(); n != timeline.MaxFollowees-1 {
		t.Fatalf("followees %d", n)
	}

	// Make room for 3, then race two 2-followee follows: one fits.
	if err := c.Do(ctx, "TL.UNFOLLOW", 1, 1_000_000, 1_000_001).Err(); err != nil {
		t.Fatal(err)
	}
	c2 := redis.NewClient(&redis.Options{Addr: c.Options().Addr, PoolSize: 1})
	defer c2.Close()
	for round := range 20 {
		a := []any{"TL.FOLLOW", 1, 300000 + 4*round, 300001 + 4*round}
		b := []any{"TL.FOLLOW", 1, 300002 + 4*round, 300003 + 4*round}
		var errA, errB error
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); errA = c.Do(ctx, a...).Err() }()
		go func() { defer wg.Done(); errB = c2.Do(ctx, b...).Err() }()
		wg.Wait()
		if (errA == nil) == (errB == nil) {
			t.Fatalf("round %d: A %v, B %v: want exactly one refused", round, errA, errB)
		}
		won, lost := a, b
		if errA != nil {
			won, lost = b, a
		}
		notFollowing(lost[2], lost[3])
		if n := followees(); n != timeline.MaxFollowees-1 {
			t.Fatalf("round %d: followees %d, want %d", round, n, timeline.MaxFollowees-1)
		}
		if err := c.Do(ctx, "TL.UNFOLLOW", 1, won[2], won[3]).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAtomicTLUnpostRace: client A sends TL.UNPOST 1 X Y (X is A's, Y
// nobody's yet) while B sends TL.POST 2 Y. If A is refused, X is still
// published.
func TestAtomicTLUnpostRace(t *testing.T) {
	c, tl := newTimelineServer(t)
	ctx := context.Background()
	const rounds = 300
	refused := 0
	for i := range rounds {
		x, y := uint64(10_000+2*i), uint64(10_001+2*i)
		if err := c.Do(ctx, "TL.POST", 1, x).Err(); err != nil {
			t.Fatal(err)
		}
		var errA, errB error
		var wg sync.WaitGroup
		start := make(chan struct{})
		wg.Add(2)
		go func() { defer wg.Done(); <-start; errA = c.Do(ctx, "TL.UNPOST", 1, x, y).Err() }()
		go func() { defer wg.Done(); <-start; errB = c.Do(ctx, "TL.POST", 2, y).Err() }()
		close(start)
		wg.Wait()
		if errB != nil {
			t.Fatalf("round %d: B: %v", i, errB)
		}
		_, xPublished, err := tl.Owner(x)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case errA == nil && xPublished:
			t.Fatalf("round %d: TL.UNPOST acknowledged, x still published", i)
		case errA != nil && !strings.Contains(errA.Error(), "belongs to another author"):
			t.Fatalf("round %d: A: %v", i, errA)
		case errA != nil && !xPublished:
			t.Fatalf("round %d: A refused (%v), yet x was unpublished", i, errA)
		case errA != nil:
			refused++
			if err := c.Do(ctx, "TL.UNPOST", 1, x).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Logf("A refused %d of %d", refused, rounds)
}

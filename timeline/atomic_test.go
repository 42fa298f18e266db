package timeline

// Issue 16 items 4 and 5: a refused command changes nothing, and the checks
// that refuse it are atomic with its writes. Every test here runs both
// sides of a race many times and asserts all or nothing.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
)

// loadFollowees makes user follow n accounts from first on, in one
// LoadFollows.
func loadFollowees(t testing.TB, tl *Timeline, user, first uint64, n int) {
	t.Helper()
	edges := make([]Edge, n)
	for i := range edges {
		edges[i] = Edge{Follower: user, Followee: first + uint64(i)}
	}
	st, err := tl.LoadFollows(context.Background(), edges, nil)
	if err != nil {
		t.Fatalf("load %d followees of %d: %v", n, user, err)
	}
	if st.Added != n {
		t.Fatalf("load %d followees of %d: added %d", n, user, st.Added)
	}
}

// followees returns user's followee count, checking that it agrees with
// the list.
func followeeCount(t testing.TB, tl *Timeline, user uint64) int {
	t.Helper()
	info, err := tl.User(user)
	must(t, err)
	n := 0
	must(t, tl.Followees(user, func(uint64) bool { n++; return true }))
	if uint64(n) != info.Followees {
		t.Fatalf("user %d: %d followees listed, count %d", user, n, info.Followees)
	}
	return n
}

func wantNotFollowing(t testing.TB, tl *Timeline, user uint64, followees ...uint64) {
	t.Helper()
	for _, f := range followees {
		yes, err := tl.IsFollowing(user, f)
		must(t, err)
		if yes {
			t.Fatalf("user %d follows %d after a refused command", user, f)
		}
		info, err := tl.User(f)
		must(t, err)
		if info.Followers != 0 {
			t.Fatalf("%d has %d followers after a refused command", f, info.Followers)
		}
	}
}

// far is where the followees of the limit tests start: ids no other part
// of the tests uses.
const far = 1_000_000

// TestFolloweeLimit is issue 16 item 4: with MaxFollowees-1 followees
// loaded, a follow or a load that adds two more is refused whole (the
// earlier Follow loop kept the first; the earlier load looked at the
// stored list only for loads above MaxFollowees/2 and let this one pass),
// a refused command allocates no ordinal either, and two commands racing
// for the last slots never pass the limit.
func TestFolloweeLimit(t *testing.T) {
	e := newEnv(t, Config{})
	tl := e.tl
	loadFollowees(t, tl, 1, far, MaxFollowees-1)
	refused := func(what string, err error, ids ...uint64) {
		t.Helper()
		if !errors.Is(err, ErrTooManyFollowees) {
			t.Fatalf("%s at the limit: %v, want ErrTooManyFollowees", what, err)
		}
		wantNotFollowing(t, tl, 1, ids...)
		for _, id := range ids {
			if info, err := tl.User(id); err != nil || info.Ordinal != 0 {
				t.Fatalf("%s: refused, yet %d got ordinal %d (%v)", what, id, info.Ordinal, err)
			}
		}
	}
	_, err := tl.FollowMany(1, 200001, 200002)
	refused("FollowMany", err, 200001, 200002)
	for _, edges := range [][]Edge{
		{{1, 200001}, {1, 200002}},
		{{2, 5}, {1, 200001}, {3, 6}, {1, 200002}},
	} {
		_, err := tl.LoadFollows(context.Background(), edges, nil)
		refused(fmt.Sprint("LoadFollows ", edges), err, 200001, 200002)
		wantNotFollowing(t, tl, 2, 5)
		wantNotFollowing(t, tl, 3, 6)
	}
	if n := followeeCount(t, tl, 1); n != MaxFollowees-1 {
		t.Fatalf("user 1 follows %d, want %d", n, MaxFollowees-1)
	}

	// Only new follows count: an account followed already, or named twice,
	// takes no slot.
	if n, err := tl.FollowMany(1, 200001, far, 200001); n != 1 || err != nil {
		t.Fatalf("FollowMany to the limit: %d, %v", n, err)
	}
	if n, err := tl.FollowMany(1, far, far+1); n != 0 || err != nil {
		t.Fatalf("FollowMany of followees at the limit: %d, %v", n, err)
	}
	_, err = tl.FollowMany(1, 200002)
	refused("FollowMany past the limit", err, 200002)
	st, err := tl.LoadFollows(context.Background(), []Edge{{1, far}, {1, 200001}, {1, 200001}}, nil)
	if err != nil || st.Added != 0 || st.Existing != 3 {
		t.Fatalf("load of followees at the limit: %+v %v", st, err)
	}

	// Room for 3; two 2-followee commands race for it, FollowMany against
	// FollowMany or LoadFollows: exactly one fits, the other changes
	// nothing.
	if n, err := tl.UnfollowMany(1, far, far+1, far+2, far+2); n != 3 || err != nil {
		t.Fatalf("UnfollowMany: %d, %v", n, err)
	}
	const rounds = 20
	for round := range rounds {
		base := uint64(300_000 + 4*round)
		a, b := []uint64{base, base + 1}, []uint64{base + 2, base + 3}
		var errA, errB error
		var wg sync.WaitGroup
		start := make(chan struct{})
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			if round%2 == 0 {
				_, errA = tl.FollowMany(1, a...)
			} else {
				_, errA = tl.LoadFollows(context.Background(), []Edge{{1, a[0]}, {1, a[1]}}, nil)
			}
		}()
		go func() {
			defer wg.Done()
			<-start
			_, errB = tl.FollowMany(1, b...)
		}()
		close(start)
		wg.Wait()
		won, lost, errLost := a, b, errB
		if errA != nil {
			won, lost, errLost = b, a, errA
			if errB != nil {
				t.Fatalf("round %d: both refused: %v / %v", round, errA, errB)
			}
		}
		refused(fmt.Sprintf("round %d", round), errLost, lost...)
		if n := followeeCount(t, tl, 1); n != MaxFollowees-1 {
			t.Fatalf("round %d: user 1 follows %d, want %d", round, n, MaxFollowees-1)
		}
		if n, err := tl.UnfollowMany(1, won...); n != 2 || err != nil {
			t.Fatalf("round %d: unfollow: %d, %v", round, n, err)
		}
	}
}

// TestFollowManyArgs: a bad id or a self-follow anywhere in the command
// refuses all of it.
func TestFollowManyArgs(t *testing.T) {
	e := newEnv(t, Config{})
	for _, c := range []struct {
		ids  []uint64
		want error
	}{
		{[]uint64{2, 0}, ErrBadID},
		{[]uint64{2, MaxID + 1}, ErrBadID},
		{[]uint64{2, 3, 1}, ErrSelfFollow},
	} {
		if _, err := e.tl.FollowMany(1, c.ids...); !errors.Is(err, c.want) {
			t.Fatalf("FollowMany(1, %v): %v, want %v", c.ids, err, c.want)
		}
		wantNotFollowing(t, e.tl, 1, 2, 3)
		if _, err := e.tl.UnfollowMany(1, c.ids...); !errors.Is(err, c.want) {
			t.Fatalf("UnfollowMany(1, %v): %v, want %v", c.ids, err, c.want)
		}
	}
	if n, err := e.tl.FollowMany(1); n != 0 || err != nil {
		t.Fatalf("FollowMany of nobody: %d, %v", n, err)
	}
}

// TestPublishOwnerRace publishes one post id by two authors at once, many
// times: exactly one of them gets it, and the other is refused with
// nothing written (the ownership check and the publish are one step).
func TestPublishOwnerRace(t *testing.T) {
	e := newEnv(t, Config{})
	const rounds = 300
	var wins [3]int
	for i := range rounds {
		post := uint64(1000 + i)
		var errs [3]error
		var wg sync.WaitGroup
		start := make(chan struct{})
		for _, a := range []uint64{1, 2} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, errs[a] = e.tl.Publish(a, post)
			}()
		}
		close(start)
		wg.Wait()
		owner, published, err := e.tl.Owner(post)
		must(t, err)
		if !published || owner == 0 {
			t.Fatalf("round %d: post %d not published (%v, %v)", i, post, errs[1], errs[2])
		}
		loser := 3 - owner
		if errs[owner] != nil || !errors.Is(errs[loser], ErrPostTaken) {
			t.Fatalf("round %d: post %d is %d's, errors %v / %v", i, post, owner, errs[1], errs[2])
		}
		wins[owner]++
	}
	for a := uint64(1); a <= 2; a++ {
		info, err := e.tl.User(a)
		must(t, err)
		n := 0
		must(t, e.tl.Posts(a, 0, func(uint64) bool { n++; return true }))
		if info.Posts != uint64(wins[a]) || n != wins[a] {
			t.Fatalf("author %d won %d posts; count %d, outbox %d", a, wins[a], info.Posts, n)
		}
	}
	t.Logf("wins: author 1 %d, author 2 %d", wins[1], wins[2])
}

// TestPublishManyRace is issue 16 item 5, the exact race: A
// publishes X and Y while B publishes Y, in both orders, many times. A
// command is all or nothing: if A is refused, X is not published; post
// counts and outboxes agree with what was acknowledged.
func TestPublishManyRace(t *testing.T) {
	e := newEnv(t, Config{})
	tl := e.tl
	if n, err := tl.FollowMany(3, 1, 2); n != 2 || err != nil { // fan-out jobs too
		t.Fatalf("follow: %d, %v", n, err)
	}
	if _, err := tl.MarkActiveMany(context.Background(), []uint64{3}); err != nil {
		t.Fatal(err)
	}
	const rounds = 500
	var posts [3]int
	for i := range rounds {
		x, y := uint64(10_000+2*i), uint64(10_001+2*i)
		var errA, errB error
		var resA, resB []PublishResult
		var wg sync.WaitGroup
		start := make(chan struct{})
		wg.Add(2)
		goA := func() { defer wg.Done(); <-start; resA, errA = tl.PublishMany(1, x, y) }
		goB := func() { defer wg.Done(); <-start; resB, errB = tl.PublishMany(2, y) }
		if i%2 == 0 {
			go goA()
			go goB()
		} else {
			go goB()
			go goA()
		}
		close(start)
		wg.Wait()
		xOwner, xPub, err := tl.Owner(x)
		must(t, err)
		yOwner, yPub, err := tl.Owner(y)
		must(t, err)
		switch {
		case errA == nil && errors.Is(errB, ErrPostTaken):
			if len(resA) != 2 || xOwner != 1 || !xPub || yOwner != 1 || !yPub || resB != nil {
				t.Fatalf("round %d: A won (%+v) but x is %d's (%v), y %d's (%v)", i, resA, xOwner, xPub, yOwner, yPub)
			}
			posts[1] += 2
		case errB == nil && errors.Is(errA, ErrPostTaken):
			if len(resB) != 1 || xOwner != 0 || xPub || yOwner != 2 || !yPub || resA != nil {
				t.Fatalf("round %d: A refused (%v) but x is %d's (published %v), y %d's", i, errA, xOwner, xPub, yOwner)
			}
			posts[2]++
		default:
			t.Fatalf("round %d: A %v, B %v", i, errA, errB)
		}
	}
	e.run()
	for a := uint64(1); a <= 2; a++ {
		info, err := tl.User(a)
		must(t, err)
		if info.Posts != uint64(posts[a]) {
			t.Fatalf("author %d: %d posts counted, %d acknowledged", a, info.Posts, posts[a])
		}
	}
	if got := len(homeAll(t, tl, 3, 100)); got != posts[1]+posts[2] {
		t.Fatalf("home of 3 has %d posts, %d acknowledged", got, posts[1]+posts[2])
	}
	t.Logf("A won %d, B won %d", posts[1]/2, posts[2])
}

// TestUnpublishManyRace: A unpublishes X (its own) and Y (nobody's yet)
// while B publishes Y. If A is refused, X stays published; if not, X is
// gone and Y is B's.
func TestUnpublishManyRace(t *testing.T) {
	e := newEnv(t, Config{})
	tl := e.tl
	const rounds = 300
	refusedN := 0
	for i := range rounds {
		x, y := uint64(10_000+2*i), uint64(10_001+2*i)
		if _, err := tl.Publish(1, x); err != nil {
			t.Fatal(err)
		}
		var errA, errB error
		var resA []UnpublishResult
		var wg sync.WaitGroup
		start := make(chan struct{})
		wg.Add(2)
		go func() { defer wg.Done(); <-start; resA, errA = tl.UnpublishMany(1, x, y) }()
		go func() { defer wg.Done(); <-start; _, errB = tl.PublishMany(2, y) }()
		close(start)
		wg.Wait()
		if errB != nil {
			t.Fatalf("round %d: B: %v", i, errB)
		}
		_, xPub, err := tl.Owner(x)
		must(t, err)
		switch {
		case errA == nil:
			if xPub || len(resA) != 2 || !resA[0].Removed || resA[1].Removed {
				t.Fatalf("round %d: A unpublished %+v, x published %v", i, resA, xPub)
			}
		case errors.Is(errA, ErrPostTaken):
			refusedN++
			if !xPub {
				t.Fatalf("round %d: A refused (%v), yet x was unpublished", i, errA)
			}
			if _, _, err := tl.Unpublish(1, x); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("round %d: A: %v", i, errA)
		}
	}
	t.Logf("A refused %d of %d", refusedN, rounds)
}

// TestPublishManyDuplicates: a post named twice is published once and
// reported as a duplicate the second time; a bad id refuses the command.
func TestPublishManyDuplicates(t *testing.T) {
	e := newEnv(t, Config{})
	res, err := e.tl.PublishMany(1, 5, 6, 5)
	if err != nil || len(res) != 3 || res[0].Duplicate || res[1].Duplicate || !res[2].Duplicate {
		t.Fatalf("PublishMany(1, 5, 6, 5): %+v %v", res, err)
	}
	if _, err := e.tl.PublishMany(1, 7, 0); !errors.Is(err, ErrBadID) {
		t.Fatalf("PublishMany with id 0: %v", err)
	}
	if _, pub, _ := e.tl.Owner(7); pub {
		t.Fatal("post 7 published by a refused command")
	}
	many := make([]uint64, 100) // past the scan, into the set
	for i := range many {
		many[i] = uint64(100 + i%50)
	}
	res, err = e.tl.PublishMany(1, many...)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Duplicate != (i >= 50) {
			t.Fatalf("post %d (index %d): duplicate %v", many[i], i, r.Duplicate)
		}
	}
	if info, _ := e.tl.User(1); info.Posts != 52 {
		t.Fatalf("posts %d, want 52", info.Posts)
	}
	un, err := e.tl.UnpublishMany(1, 5, 5, 8)
	if err != nil || !un[0].Removed || un[1].Removed || un[2].Removed {
		t.Fatalf("UnpublishMany(1, 5, 5, 8): %+v %v", un, err)
	}
}

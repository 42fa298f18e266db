package timeline

import (
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tallydb/tally/internal/testutil"
)

// TestInlineDeliveryCrash publishes small fan-outs (delivered in the
// publish's batch) and a big one (a job) on a store without fsync, and
// crashes it at random points, keeping a random part of what was not
// synced: every post the store kept is in every active follower's inbox
// exactly once, with the delivery count exact, and a post it lost is in
// no inbox (the delivery commits with the post or not at all). With
// SyncAlways (the last rounds) every post that returned is kept.
func TestInlineDeliveryCrash(t *testing.T) {
	e := &env{t: t, dir: "db", clock: newClock(), cfg: Config{InboxCap: 200}}
	e.st = testutil.OpenStore(t, vfs.NewCrashableMem(), e.hooks())
	rng := newRand(uint64(testutil.EnvInt(t, "TALLY_TL_INLINE_SEED", 18)))
	// Author 1: 30 followers, 10 of them active (inline). Author 2: 100
	// active followers (above the default InlineFanout: a job).
	var edges []Edge
	var active1, active2 []uint64
	for u := uint64(10); u < 40; u++ {
		edges = append(edges, Edge{u, 1})
		if u%3 == 0 {
			active1 = append(active1, u)
		}
	}
	for u := uint64(100); u < 200; u++ {
		edges = append(edges, Edge{u, 2})
		active2 = append(active2, u)
	}
	_, err := e.tl.LoadFollows(t.Context(), edges, nil)
	must(t, err)
	_, err = e.tl.MarkActiveMany(t.Context(), append(slices.Clone(active1), active2...))
	must(t, err)
	e.st.Reopen() // the graph is synced
	post := uint64(1000)
	var returned []uint64 // posts of author 1 whose Publish returned
	lost := 0
	for round := range 12 {
		e.sync = round >= 9
		if round == 9 {
			e.st.Reopen()
		}
		for range 1 + rng.IntN(8) {
			post++
			ps := []uint64{post}
			if rng.IntN(3) == 0 {
				post++
				ps = append(ps, post)
			}
			res, err := e.tl.PublishMany(1, ps...)
			must(t, err)
			for _, r := range res {
				if r.Job != 0 {
					t.Fatalf("round %d: inline fan-out got job %d", round, r.Job)
				}
			}
			returned = append(returned, ps...)
		}
		post++
		res, err := e.tl.Publish(2, post)
		must(t, err)
		if res.Job == 0 {
			t.Fatalf("round %d: a fan-out to %d inboxes ran inline", round, len(active2))
		}
		e.crash(rng) // Check runs on the reopened store
		e.run()
		for _, p := range returned {
			_, published, err := e.tl.Owner(p)
			must(t, err)
			if e.sync && !published {
				t.Fatalf("round %d: post %d returned under SyncAlways and was lost", round, p)
			}
			info, _, err := e.tl.Post(p)
			must(t, err)
			if published && (!info.FannedOut || info.Delivered != uint64(len(active1))) {
				t.Fatalf("round %d: post %d: %+v, want %d deliveries", round, p, info, len(active1))
			}
			for _, u := range active1 {
				n := 0
				for _, q := range inboxPosts(t, e.tl, u) {
					if q == p {
						n++
					}
				}
				if published && n != 1 || !published && n != 0 {
					t.Fatalf("round %d: post %d (published %v) is %d times in the inbox of %d", round, p, published, n, u)
				}
			}
		}
		returned = slices.DeleteFunc(returned, func(p uint64) bool {
			_, published, err := e.tl.Owner(p)
			must(t, err)
			if !published {
				lost++ // lost to the crash: never retried
			}
			return !published
		})
	}
	t.Logf("%d posts kept, %d lost to crashes", len(returned), lost)
	if lost == 0 {
		t.Fatal("no crash lost a post: the test did not cut a delivery")
	}
	if info, _ := e.tl.User(1); info.Posts != uint64(len(returned)) {
		t.Fatalf("author 1: %d posts, want %d", info.Posts, len(returned))
	}
}

// TestInlineRacesActivation publishes inline fan-outs while the author's
// followers expire and come back (activate: push set, then outboxes, then
// the inbox) on another goroutine. After each return, the user's inbox
// must hold every post whose Publish returned before the check: a publish
// that read the push set before the activation added the user must have
// committed before the activation read the outboxes (pushGate). Without
// the gate, 2 of 10 runs of 2,000 publishes failed; the default is 5,000
// (TALLY_TL_INLINE_RACE_POSTS).
func TestInlineRacesActivation(t *testing.T) {
	e := newEnv(t, Config{InboxCap: 5000, ActiveWindow: time.Hour})
	e.inline = 0
	e.reopen()
	const followers = 4
	for u := uint64(2); u < 2+followers; u++ {
		follow(t, e.tl, u, 1)
		_, err := e.tl.MarkActive(u)
		must(t, err)
	}
	posts := testutil.EnvInt(t, "TALLY_TL_INLINE_RACE_POSTS", 5000)
	const first = 1000
	var last atomic.Uint64 // the newest post whose Publish returned
	done := make(chan error, 1)
	go func() {
		for p := uint64(first); p < first+uint64(posts); p++ {
			if _, err := e.tl.Publish(1, p); err != nil {
				done <- err
				return
			}
			last.Store(p)
		}
		done <- nil
	}()
	rounds := 0
	for {
		select {
		case err := <-done:
			must(t, err)
			e.run()
			t.Logf("%d activations raced %d publishes", rounds*followers, posts)
			return
		default:
		}
		rounds++
		e.clock.Advance(2 * time.Hour)
		_, err := e.tl.Expire(t.Context())
		must(t, err)
		for u := uint64(2); u < 2+followers; u++ {
			_, err := e.tl.MarkActive(u)
			must(t, err)
			l := last.Load()
			got := inboxPosts(t, e.tl, u)
			for p := uint64(first); p <= l && l != 0; p++ {
				if !slices.Contains(got, p) {
					t.Fatalf("round %d: post %d returned before the check and is not in the inbox of %d (posts up to %d)", rounds, p, u, l)
				}
			}
		}
	}
}

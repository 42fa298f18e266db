package unread

import (
	"errors"
	"slices"
	"testing"

	"github.com/tallydb/tally/store"
)

func (e *env) feed(user uint64) uint64 {
	e.t.Helper()
	n, err := e.x.Feed(user)
	if err != nil {
		e.t.Fatalf("feed %d: %v", user, err)
	}
	return n
}

func (e *env) follow(user uint64, fs ...uint64) {
	e.t.Helper()
	for _, f := range fs {
		if _, err := e.g.Follow(user, f); err != nil {
			e.t.Fatalf("follow %d %d: %v", user, f, err)
		}
	}
}

func (e *env) unfollow(user uint64, fs ...uint64) {
	e.t.Helper()
	for _, f := range fs {
		if _, err := e.g.Unfollow(user, f); err != nil {
			e.t.Fatalf("unfollow %d %d: %v", user, f, err)
		}
	}
}

func (e *env) publish(author uint64, n int) {
	e.t.Helper()
	for range n {
		_, err := e.g.Publish(author)
		must(e.t, err)
	}
}

func (e *env) unpublish(author uint64, n int) {
	e.t.Helper()
	for range n {
		if _, _, err := e.g.Unpublish(author); err != nil {
			e.t.Fatal(err)
		}
	}
}

func (e *env) reset(user uint64) {
	e.t.Helper()
	must(e.t, e.x.FeedReset(user))
}

func (e *env) wantFeed(user, want uint64) {
	e.t.Helper()
	if got := e.feed(user); got != want {
		e.t.Fatalf("feed of %d = %d, want %d", user, got, want)
	}
}

// TestFeedSemantics walks the definition: a follow adds no old posts, an
// unfollow removes that author at once, a re-follow starts from the count
// at re-follow, an unpublish counts down (never below the base), a reset
// zeroes, an evicted or reopened snapshot answers the same.
func TestFeedSemantics(t *testing.T) {
	for _, gk := range graphKinds {
		t.Run(gk.name, func(t *testing.T) { testFeedSemantics(t, newEnvOn(t, gk.real, nil, nil)) })
	}
}

func testFeedSemantics(t *testing.T, e *env) {
	e.wantFeed(1, 0) // no snapshot, follows nobody
	e.publish(10, 3)
	e.follow(1, 10, 11)
	e.wantFeed(1, 0) // old posts do not count
	e.publish(10, 2)
	e.publish(11, 1)
	e.wantFeed(1, 3)
	e.unfollow(1, 11)
	e.wantFeed(1, 2) // 11's post gone at once
	e.publish(11, 4)
	e.wantFeed(1, 2)
	e.follow(1, 11) // re-follow: from the count now
	e.wantFeed(1, 2)
	e.publish(11, 1)
	e.wantFeed(1, 3)
	e.unpublish(10, 1)
	e.wantFeed(1, 2)
	e.unpublish(10, 4) // below the base: 0 for 10, not negative
	e.wantFeed(1, 1)
	e.reset(1)
	e.wantFeed(1, 0)
	e.publish(10, 1) // 10 has 1 post again, its base is 0 after the reset
	e.wantFeed(1, 1)
	e.x.cache.clear()
	e.wantFeed(1, 1)
	e.reopen()
	e.wantFeed(1, 1)
	e.follow(1, 12)
	e.publish(12, 5)
	e.wantFeed(1, 6)
	e.crash(0, nil)
	e.wantFeed(1, 6)
	// The stored snapshot is exactly the followees and their bases.
	fs, ok, err := e.x.Snapshot(1)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if !fs.Initialized || !slices.Equal(fs.Followees, []uint64{10, 11, 12}) || !slices.Equal(fs.Bases, []uint64{0, 6, 0}) {
		t.Fatalf("snapshot %+v", fs)
	}
}

// TestFeedTinyCache reads through a cache too small to hold anything, and
// through a disabled one: every read decodes the stored snapshot, and
// answers the same.
func TestFeedTinyCache(t *testing.T) {
	for _, size := range []int64{1, -1} {
		e := newEnv(t, &Options{SnapshotCacheBytes: size}, nil)
		for f := uint64(2); f < 50; f++ {
			e.follow(1, f)
			e.publish(f, int(f%3))
		}
		e.wantFeed(1, 48)
		e.reset(1)
		e.wantFeed(1, 0)
		e.publish(7, 1)
		e.wantFeed(1, 1)
		if st := e.x.cache.stats(); st.entries != 0 || st.hits != 0 {
			t.Fatalf("size %d: cache %+v", size, st)
		}
	}
}

// TestFeedNoGraph: an Unread opened without a graph refuses feed calls.
func TestFeedNoGraph(t *testing.T) {
	e := newEnv(t, nil, nil)
	x, err := New(e.db, nil)
	must(t, err)
	if _, err := x.Feed(1); !errors.Is(err, ErrNoGraph) {
		t.Fatalf("Feed: %v", err)
	}
	if err := x.FeedReset(1); !errors.Is(err, ErrNoGraph) {
		t.Fatalf("FeedReset: %v", err)
	}
}

// TestFeedPredating opens unread on a graph whose follows predate it: the
// store is "lazy", a user's first read snapshots the counts of followees
// unread never saw (0 unread for them) and keeps the bases of follows it
// did see.
func TestFeedPredating(t *testing.T) {
	for _, gk := range graphKinds {
		t.Run(gk.name, func(t *testing.T) { testFeedPredating(t, gk.real) })
	}
}

func testFeedPredating(t *testing.T, real bool) {
	e := newEnvOn(t, real, nil, func(g testGraph) {
		for _, f := range []uint64{10, 11, 12} {
			if _, err := g.Follow(1, f); err != nil {
				t.Fatal(err)
			}
			if _, err := g.Publish(f); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := g.Follow(2, 10); err != nil {
			t.Fatal(err)
		}
	})
	if e.x.complete {
		t.Fatal("unread opened on a graph with follows calls itself complete")
	}
	e.follow(1, 13) // seen by unread, before the first read
	e.publish(13, 2)
	e.unfollow(1, 12) // seen: a dead entry until the first read
	e.wantFeed(1, 2)  // 10 and 11 snapshotted now; 13 counts from its follow
	e.publish(10, 1)
	e.wantFeed(1, 3)
	fs, _, err := e.x.Snapshot(1)
	must(t, err)
	if !fs.Initialized || !slices.Equal(fs.Followees, []uint64{10, 11, 13}) {
		t.Fatalf("snapshot %+v", fs)
	}
	// A user following nobody gets 0 and costs nothing.
	e.wantFeed(3, 0)
	if _, ok, _ := e.x.Snapshot(3); ok {
		t.Fatal("a snapshot was written for a user following nobody")
	}
	// A reset of a user never read initializes too.
	e.publish(10, 1)
	e.reset(2)
	e.wantFeed(2, 0)
	e.reopen()
	if e.x.complete {
		t.Fatal("the lazy mode did not survive a reopen")
	}
	e.wantFeed(1, 4)
}

// TestFeedResetRaces forces, between a reset's read and its commit, each
// follow-graph change that can happen there, and checks that the change
// wins over the reset for its followee and the reset applies to the rest.
func TestFeedResetRaces(t *testing.T) {
	type step struct {
		name  string
		setup func(e *env)       // before the reset
		race  func(e *env)       // between its read and its commit
		want  uint64             // feed of user 1 afterwards
		check func(*env, uint64) // optional
	}
	steps := []step{{
		name:  "publish",
		setup: func(e *env) { e.follow(1, 10, 11); e.publish(10, 2) },
		race:  func(e *env) { e.publish(10, 1) }, // after the reset's read: unread
		want:  1,
	}, {
		name:  "follow",
		setup: func(e *env) { e.follow(1, 10); e.publish(10, 2); e.publish(11, 3) },
		race:  func(e *env) { e.follow(1, 11); e.publish(11, 1) },
		want:  1,
	}, {
		name:  "unfollow",
		setup: func(e *env) { e.follow(1, 10, 11); e.publish(10, 2); e.publish(11, 3) },
		race:  func(e *env) { e.unfollow(1, 11) }, // the reset must not bring 11 back
		want:  0,
		check: func(e *env, _ uint64) {
			if fs, _, _ := e.x.Snapshot(1); !slices.Equal(fs.Followees, []uint64{10}) {
				e.t.Fatalf("followees %v", fs.Followees)
			}
		},
	}, {
		name:  "re-follow",
		setup: func(e *env) { e.follow(1, 10, 11); e.publish(11, 3) },
		// 11 re-followed after the reset read its count: base = count at
		// the re-follow (4), not at the read (3).
		race: func(e *env) { e.unfollow(1, 11); e.publish(11, 1); e.follow(1, 11); e.publish(11, 2) },
		want: 2,
	}, {
		name:  "unpublish",
		setup: func(e *env) { e.follow(1, 10); e.publish(10, 5) },
		race:  func(e *env) { e.unpublish(10, 2); e.publish(10, 1) },
		want:  0, // base 5 from the read; 4 posts now
	}}
	for _, gk := range graphKinds {
		for _, lazy := range []bool{false, true} {
			for _, s := range steps {
				name := gk.name + "/" + s.name
				var before func(testGraph)
				if lazy {
					name += "/lazy"
					before = func(g testGraph) { _, err := g.Publish(99); must(t, err) } // the graph is not empty
				}
				t.Run(name, func(t *testing.T) {
					e := newEnvOn(t, gk.real, nil, before)
					if e.x.complete == lazy {
						t.Fatalf("complete = %v", e.x.complete)
					}
					s.setup(e)
					fired := false
					e.x.testHook = func(uint64) {
						if !fired {
							fired = true
							s.race(e)
						}
					}
					e.reset(1)
					e.x.testHook = nil
					if !fired {
						t.Fatal("the reset wrote nothing")
					}
					e.wantFeed(1, s.want)
					if s.check != nil {
						s.check(e, 1)
					}
					e.x.cache.clear()
					e.wantFeed(1, s.want)
				})
			}
		}
	}
}

// TestFeedInitRaces forces follow-graph changes between the initializing
// read of a user whose follows predate unread and its commit.
func TestFeedInitRaces(t *testing.T) {
	before := func(g testGraph) {
		for _, f := range []uint64{10, 11} {
			if _, err := g.Follow(1, f); err != nil {
				t.Fatal(err)
			}
		}
	}
	type race struct {
		name string
		race func(e *env)
		want uint64
		fol  []uint64
	}
	for _, gk := range graphKinds {
		for _, tc := range []race{
			{"unfollow", func(e *env) { e.unfollow(1, 11) }, 0, []uint64{10}},
			{"follow", func(e *env) { e.follow(1, 12); e.publish(12, 2) }, 2, []uint64{10, 11, 12}},
			{"re-follow", func(e *env) { e.unfollow(1, 10); e.publish(10, 1); e.follow(1, 10); e.publish(10, 1) }, 1, []uint64{10, 11}},
			{"publish", func(e *env) { e.publish(11, 3) }, 3, []uint64{10, 11}},
		} {
			t.Run(gk.name+"/"+tc.name, func(t *testing.T) {
				e := newEnvOn(t, gk.real, nil, before)
				fired := false
				e.x.testHook = func(uint64) {
					if !fired {
						fired = true
						tc.race(e)
					}
				}
				e.wantFeed(1, tc.want)
				e.x.testHook = nil
				if !fired {
					t.Fatal("no initializing write")
				}
				if fs, _, _ := e.x.Snapshot(1); !fs.Initialized || !slices.Equal(fs.Followees, tc.fol) {
					t.Fatalf("snapshot %+v", fs)
				}
			})
		}
	}
}

// TestFeedResetNoChange: a reset that changes no base writes nothing.
func TestFeedResetNoChange(t *testing.T) {
	e := newEnv(t, nil, nil)
	e.follow(1, 10)
	e.publish(10, 1)
	e.reset(1)
	fs, _, _ := e.x.Snapshot(1)
	e.reset(1)
	again, _, _ := e.x.Snapshot(1)
	if fs.Ops != again.Ops {
		t.Fatalf("an idle reset wrote: ops %d -> %d", fs.Ops, again.Ops)
	}
	e.reset(2) // nobody: nothing
	if _, ok, _ := e.x.Snapshot(2); ok {
		t.Fatal("a reset of a user following nobody wrote a snapshot")
	}
}

// TestFeedCorruptSnapshot: a damaged stored snapshot is ErrCorrupt, never
// zero.
func TestFeedCorruptSnapshot(t *testing.T) {
	e := newEnv(t, nil, nil)
	e.follow(1, 10)
	e.publish(10, 1)
	e.wantFeed(1, 1)
	// The store refuses to write a damaged value, so damage it underneath.
	good := rawGet(e, feedKey(nil, 1))
	bad := append([]byte(nil), good...)
	bad[len(bad)-1] ^= 0xFF
	rawSet(e, feedKey(nil, 1), bad)
	if _, err := e.x.Feed(1); !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("feed of a damaged snapshot: %v", err)
	}
	if err := e.x.Check(); err == nil {
		t.Fatal("Check passed a damaged snapshot")
	}
	rawSet(e, feedKey(nil, 1), good)
	e.wantFeed(1, 1)
}

package unread

import (
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tallydb/tally/internal/testutil"
	"github.com/tallydb/tally/store"
)

// TestSimulation runs readers, resets, follows, unfollows (with mutes and
// hides on the real timeline), publishes and unpublishes at once (with one-to-one counts, dots and notices beside
// them), in rounds. Between rounds, with everything quiet, it runs Check
// and compares every user's snapshot and feed with what the round allows:
//
//   - membership is exactly the follow graph's visible edges;
//   - a base no operation of the round could touch is what it was;
//   - a base the round touched (a reset of the user, or a follow of the
//     pair that was not one already) is a count the followee had during the
//     round: between its lowest and highest;
//   - Feed (through the cache and after an eviction) is Σ max(0, posts −
//     base) over those bases;
//   - counts that only went up are exact, dot tags count the marks.
//
// During a round no call may fail. The deterministic interleavings of a
// reset with each graph change are in TestFeedResetRaces; this test looks
// for what they miss. TALLY_UNREAD_SIM_ROUNDS (default 12) and
// TALLY_UNREAD_SIM_SEED control it.
func TestSimulation(t *testing.T) {
	rounds := testutil.EnvInt(t, "TALLY_UNREAD_SIM_ROUNDS", 12)
	if testing.Short() {
		rounds = min(rounds, 4)
	}
	seed, _ := testutil.EnvSeed(t, "TALLY_UNREAD_SIM_SEED", rand.Uint64()>>1)
	t.Logf("seed %d (TALLY_UNREAD_SIM_SEED to repeat)", seed)
	for _, gk := range graphKinds {
		t.Run(gk.name, func(t *testing.T) { simulate(t, gk.real, seed, rounds) })
	}
}

func simulate(t *testing.T, real bool, seed uint64, rounds int) {
	rng := rand.New(rand.NewPCG(seed, 1))
	e := newEnvOn(t, real, &Options{SnapshotCacheBytes: 64 * 600}, nil)
	must(t, e.x.AddKind("up", store.ColumnOptions{HintBits: 8}))
	must(t, e.x.AddKind("both", store.ColumnOptions{}))
	const users, authors = 24, 32
	bases := map[[2]uint64]uint64{} // stored bases after the last round
	ups := map[uint64]uint64{}      // model of kind "up": only increments
	marks := uint64(0)
	for round := range rounds {
		var (
			wg       sync.WaitGroup
			lo, hi   [authors + 1]atomic.Uint64
			touchedU [users + 1]atomic.Bool // reset
			touchedP sync.Map               // [2]uint64 → true: follow/unfollow
			upCount  [users + 1]atomic.Uint64
			marked   atomic.Uint64
			errs     = make(chan error, 64)
			failed   = func(err error) {
				select {
				case errs <- err:
				default:
				}
			}
		)
		for a := uint64(1); a <= authors; a++ {
			p := e.g.posts(a)
			lo[a].Store(p)
			hi[a].Store(p)
		}
		note := func(a, p uint64) {
			for v := lo[a].Load(); p < v && !lo[a].CompareAndSwap(v, p); v = lo[a].Load() {
			}
			for v := hi[a].Load(); p > v && !hi[a].CompareAndSwap(v, p); v = hi[a].Load() {
			}
		}
		worker := func(w int, body func(r *rand.Rand) error) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(seed, uint64(round*100+w)))
				for range 150 {
					if err := body(r); err != nil {
						failed(err)
						return
					}
				}
			}()
		}
		// Publishers.
		for w := range 2 {
			worker(w, func(r *rand.Rand) error {
				// Every value a count takes is some call's result: each
				// publisher owns half the authors.
				a := 2*r.Uint64N(authors/2) + 1 + uint64(w)
				var p uint64
				var err error
				if r.IntN(4) == 0 {
					_, p, err = e.g.Unpublish(a)
				} else {
					p, err = e.g.Publish(a)
				}
				note(a, p)
				return err
			})
		}
		// Follows and unfollows.
		for w := 2; w < 4; w++ {
			worker(w, func(r *rand.Rand) error {
				u, f := r.Uint64N(users)+1, r.Uint64N(authors)+1
				if u == f {
					return nil
				}
				touchedP.Store([2]uint64{u, f}, true)
				var err error
				if tg, ok := e.g.(*tlGraph); ok && r.IntN(4) == 0 {
					// Mutes and hides change the visible pairs unread
					// mirrors, racing the follows (issue 21).
					switch r.IntN(4) {
					case 0:
						_, err = tg.Mute(u, f)
					case 1:
						_, err = tg.Unmute(u, f)
					case 2:
						_, err = tg.Hide(f, u)
					default:
						_, err = tg.Unhide(f, u)
					}
					return err
				}
				if r.IntN(3) == 0 {
					_, err = e.g.Unfollow(u, f)
				} else {
					_, err = e.g.Follow(u, f)
				}
				return err
			})
		}
		// Resets.
		worker(4, func(r *rand.Rand) error {
			u := r.Uint64N(users) + 1
			touchedU[u].Store(true)
			return e.x.FeedReset(u)
		})
		// Readers.
		for w := 5; w < 8; w++ {
			worker(w, func(r *rand.Rand) error {
				_, err := e.x.Feed(r.Uint64N(users) + 1)
				return err
			})
		}
		// One-to-one counts, dots and notices.
		worker(8, func(r *rand.Rand) error {
			u := r.Uint64N(users) + 1
			if _, err := e.x.Incr(u, "up", 1); err != nil {
				return err
			}
			upCount[u].Add(1)
			if _, err := e.x.Incr(u, "both", 1); err != nil {
				return err
			}
			_, err := e.x.Get(u, nil)
			return err
		})
		worker(9, func(r *rand.Rand) error {
			u := r.Uint64N(users) + 1
			if err := e.x.Reset(u, "both"); err != nil {
				return err
			}
			if _, err := e.x.Mark("news"); err != nil {
				return err
			}
			marked.Add(1)
			if _, err := e.x.Post("sys", r.Uint64N(1000)+1); err != nil {
				return err
			}
			if err := e.x.Clear(u, "news"); err != nil {
				return err
			}
			if _, err := e.x.Has(r.Uint64N(users)+1, "news"); err != nil {
				return err
			}
			if err := e.x.Read(u, "sys"); err != nil {
				return err
			}
			_, err := e.x.Unread(r.Uint64N(users)+1, "sys")
			return err
		})
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("round %d: %v", round, err)
		}
		if err := e.check(); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}

		// The quiet state against what the round allows.
		next := map[[2]uint64]uint64{}
		for u := uint64(1); u <= users; u++ {
			var edges []uint64
			must(t, e.g.VisibleFollowees(u, func(f uint64) bool { edges = append(edges, f); return true }))
			fs, ok, err := e.x.Snapshot(u)
			must(t, err)
			if !ok && len(edges) > 0 {
				t.Fatalf("round %d: user %d follows %v, no snapshot", round, u, edges)
			}
			if !slices.Equal(fs.Followees, edges) {
				t.Fatalf("round %d: user %d snapshot followees %v, graph %v", round, u, fs.Followees, edges)
			}
			var want uint64
			for i, f := range fs.Followees {
				b := fs.Bases[i]
				k := [2]uint64{u, f}
				_, pairTouched := touchedP.Load(k)
				old, had := bases[k]
				switch {
				case pairTouched && had && b == old && !touchedU[u].Load():
					// A follow of a pair already followed changes nothing.
				case touchedU[u].Load() || pairTouched || !had:
					if b < lo[f].Load() || b > hi[f].Load() {
						t.Fatalf("round %d: base(%d, %d) = %d, outside the round's counts [%d, %d] (reset %v, pair %v, had %v old %d, snapshot %+v)", round, u, f, b, lo[f].Load(), hi[f].Load(), touchedU[u].Load(), pairTouched, had, old, fs)
					}
				case b != old:
					t.Fatalf("round %d: untouched base(%d, %d) changed %d -> %d", round, u, f, old, b)
				}
				next[k] = b
				if p := e.g.posts(f); p > b {
					want += p - b
				}
			}
			for pass := range 2 {
				got, err := e.x.Feed(u)
				must(t, err)
				if got != want {
					t.Fatalf("round %d pass %d: feed %d = %d, snapshot says %d", round, pass, u, got, want)
				}
				e.x.cache.clear()
			}
			ups[u] += upCount[u].Load()
			got, err := e.x.Get(u, nil)
			must(t, err)
			if got[0] != ups[u] || got[1] > ups[u] {
				t.Fatalf("round %d: counts of %d = %v, %d increments of up", round, u, got, ups[u])
			}
		}
		bases = next
		marks += marked.Load()
		if chs := e.x.Channels(); chs[0].Name != "news" || chs[0].Tag != marks {
			t.Fatalf("round %d: channels %+v, %d marks", round, chs, marks)
		}
		if round%4 == 3 {
			if rng.IntN(2) == 0 {
				e.reopen()
			} else {
				e.crash(0, nil)
			}
		}
	}
}

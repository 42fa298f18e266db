package timeline

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tallydb/tally/internal/testutil"
	"github.com/tallydb/tally/store"
)

// TestSimulation runs readers, writers and background jobs (fan-out,
// backfill, cleanup, expiry on a moving clock, rebuilds on return) at once,
// in rounds. During a round:
//
//   - writers follow, unfollow, publish and unpublish (each owns its users,
//     so the model sees each user's changes in order);
//   - readers page through homes: every page is ordered, without repeats,
//     and shows only posts its author published; the homes of "static"
//     readers, whose followees and their posts do not change, must equal
//     the model on every read, while their inboxes expire, rebuild and
//     their followees turn pulled around them (a reader never sees a
//     half-built or half-dropped inbox);
//   - a churner moves the clock, enqueues expiry, marks users active and
//     checkpoints; two store workers run the jobs.
//
// After each round everything stops, the queue drains, Check runs, every
// home is compared with the model, and the store may be reopened or
// crashed. Each run picks Options.InlineFanout: the default (every
// fan-out here delivered in its publish's batch, racing the activations
// of the churner and the readers), -1 (none), or 2 (some); and
// Options.SharedFanout: the default (every other fan-out on the shared
// job, which the store's workers run while publishers rely on it), -1 (a
// job each) or 3 (some). TALLY_TL_SIM_ROUNDS (default 8) and TALLY_TL_SIM_SEED scale
// and repeat it.
func TestSimulation(t *testing.T) {
	rounds := testutil.EnvInt(t, "TALLY_TL_SIM_ROUNDS", 8)
	if testing.Short() {
		rounds = 4
	}
	seed, _ := testutil.EnvSeed(t, "TALLY_TL_SIM_SEED", uint64(time.Now().UnixNano()))
	t.Logf("seed %d (TALLY_TL_SIM_SEED repeats the choices, not the interleaving)", seed)
	rng := rand.New(rand.NewPCG(seed, seed))

	fs := vfs.NewCrashableMem()
	clk := newClock()
	cfg := Config{InboxCap: 4, ActiveWindow: 24 * time.Hour, PullThreshold: 6, ChunkSize: 2}
	// Small fan-outs (issue 18): delivered in the publish (the default
	// threshold covers every author here), on the shared job, on a job
	// each, or some of each.
	inline := []int{0, -1, 2}[rng.IntN(3)]
	shared := []int{0, -1, 3}[rng.IntN(3)]
	t.Logf("inline fan-out %d, shared fan-out %d", inline, shared)
	open := func() (*store.DB, *Timeline) {
		o := storeOptions(fs)
		o.JobWorkers = 2
		o.Durability = store.SyncAlways
		db, err := store.Open("db", o)
		must(t, err)
		tl, err := New(db, &Options{Config: cfg, Now: clk.Now, ExpireInterval: -1, InlineFanout: inline, SharedFanout: shared})
		must(t, err)
		return db, tl
	}
	db, tl := open()
	defer func() {
		tl.Close()
		db.Close()
	}()

	const (
		dynamic   = 20 // users 1..20 follow, unfollow, publish, unpublish
		staticR   = 30 // users 21..30 read; their followees are static authors
		staticA   = 40 // users 31..40 publish before the rounds only
		perWriter = dynamic / 2
	)
	var mu sync.Mutex // guards m and ever
	m := newModel()
	ever := map[uint64]uint64{} // every post ever published -> author
	var nextPost atomic.Uint64
	nextPost.Store(1000)

	// The static part: readers 21..30 follow three static authors each,
	// who published before the rounds.
	for u := uint64(dynamic + 1); u <= staticR; u++ {
		for k := 0; k < 3; k++ {
			a := uint64(staticR + 1 + rng.IntN(staticA-staticR))
			if _, err := tl.Follow(u, a); err != nil {
				t.Fatal(err)
			}
			m.follow(u, a)
		}
	}
	for a := uint64(staticR + 1); a <= staticA; a++ {
		for k := 0; k < 4; k++ {
			p := nextPost.Add(1 + rng.Uint64N(3))
			if _, err := tl.Publish(a, p); err != nil {
				t.Fatal(err)
			}
			m.author[p] = a
			ever[p] = a
		}
	}
	staticHome := map[uint64][]Entry{}
	for u := uint64(dynamic + 1); u <= staticR; u++ {
		staticHome[u] = m.home(u, endOfIDs)
	}

	for round := range rounds {
		ctx, cancel := context.WithTimeout(context.Background(), 40*time.Millisecond)
		var wg sync.WaitGroup
		errc := make(chan error, 16)
		fail := func(err error) {
			select {
			case errc <- err:
			default:
			}
			cancel()
		}
		seeds := [6]uint64{}
		for i := range seeds {
			seeds[i] = rng.Uint64()
		}
		for w := range 2 {
			wg.Add(1)
			go func(w int) { // writer: owns users w*10+1 .. w*10+10
				defer wg.Done()
				r := rand.New(rand.NewPCG(seeds[w], 1))
				own := func() uint64 { return uint64(w*perWriter + 1 + r.IntN(perWriter)) }
				for ctx.Err() == nil {
					switch op := r.IntN(10); {
					case op < 4: // one command of 1 to 3 followees (several author stripes)
						u := own()
						var as []uint64
						for range 1 + r.IntN(3) {
							a := uint64(1 + r.IntN(staticA))
							if a > dynamic && a <= staticR || u == a {
								continue // static readers publish nothing
							}
							as = append(as, a)
						}
						if len(as) == 0 {
							continue
						}
						if _, err := tl.FollowMany(u, as...); err != nil {
							fail(fmt.Errorf("follow %d %v: %w", u, as, err))
							return
						}
						mu.Lock()
						for _, a := range as {
							m.follow(u, a)
						}
						mu.Unlock()
					case op < 6:
						u, a := own(), uint64(1+r.IntN(staticA))
						if u == a {
							continue
						}
						if _, err := tl.Unfollow(u, a); err != nil {
							fail(fmt.Errorf("unfollow %d %d: %w", u, a, err))
							return
						}
						mu.Lock()
						m.unfollow(u, a)
						mu.Unlock()
					case op < 9: // one post, or two in one command
						a, p := own(), nextPost.Add(1+r.Uint64N(3))
						ps := []uint64{p}
						if r.IntN(4) == 0 {
							ps = append(ps, nextPost.Add(1))
						}
						mu.Lock() // record first: a reader may see them at once
						for _, p := range ps {
							ever[p] = a
						}
						mu.Unlock()
						if _, err := tl.PublishMany(a, ps...); err != nil {
							fail(fmt.Errorf("publish %d %v: %w", a, ps, err))
							return
						}
						mu.Lock()
						for _, p := range ps {
							m.author[p] = a
						}
						mu.Unlock()
					default:
						a := own()
						mu.Lock()
						var mine []uint64
						for p, x := range m.author {
							if x == a {
								mine = append(mine, p)
							}
						}
						mu.Unlock()
						if len(mine) == 0 {
							continue
						}
						slices.Sort(mine)
						p := mine[r.IntN(len(mine))]
						if _, _, err := tl.Unpublish(a, p); err != nil {
							fail(fmt.Errorf("unpublish %d %d: %w", a, p, err))
							return
						}
						mu.Lock()
						delete(m.author, p)
						m.removed[p] = a
						mu.Unlock()
					}
				}
			}(w)
		}
		for rd := range 2 {
			wg.Add(1)
			go func(rd int) { // reader
				defer wg.Done()
				r := rand.New(rand.NewPCG(seeds[2+rd], 2))
				for ctx.Err() == nil {
					u := uint64(1 + r.IntN(staticR))
					limit := 1 + r.IntN(4)
					var all []Entry
					cursor := ""
					for {
						p, err := tl.Home(u, cursor, limit)
						if err != nil {
							fail(fmt.Errorf("home %d: %w", u, err))
							return
						}
						for _, e := range p.Entries {
							if n := len(all); n > 0 && all[n-1].Post <= e.Post {
								fail(fmt.Errorf("home %d: %d after %d", u, e.Post, all[n-1].Post))
								return
							}
							all = append(all, e)
							mu.Lock()
							a, ok := ever[e.Post]
							mu.Unlock()
							if !ok || a != e.Author {
								fail(fmt.Errorf("home %d shows %v, never published so", u, e))
								return
							}
						}
						if p.NoMore {
							break
						}
						cursor = p.Cursor
					}
					if want, ok := staticHome[u]; ok && !slices.Equal(all, want) {
						fail(fmt.Errorf("static home %d = %v, want %v\n%s", u, all, want, dumpUser(tl, u)))
						return
					}
				}
			}(rd)
		}
		wg.Add(1)
		go func() { // churner: time, expiry, activity, checkpoints
			defer wg.Done()
			r := rand.New(rand.NewPCG(seeds[4], 3))
			for ctx.Err() == nil {
				switch op := r.IntN(10); {
				case op < 3:
					clk.Advance(time.Duration(r.IntN(20)) * time.Hour)
				case op < 6:
					if _, err := tl.EnqueueExpire(); err != nil {
						fail(fmt.Errorf("expire: %w", err))
						return
					}
				case op < 9:
					if _, err := tl.MarkActive(uint64(1 + r.IntN(staticR))); err != nil {
						fail(fmt.Errorf("mark active: %w", err))
						return
					}
				default:
					if err := db.Checkpoint(); err != nil {
						fail(fmt.Errorf("checkpoint: %w", err))
						return
					}
				}
				time.Sleep(time.Duration(r.IntN(300)) * time.Microsecond)
			}
		}()
		wg.Wait()
		cancel()
		select {
		case err := <-errc:
			t.Fatalf("round %d: %v", round, err)
		default:
		}
		if err := db.RunJobs(context.Background(), nil); err != nil {
			t.Fatalf("round %d: run jobs: %v", round, err)
		}
		if err := tl.Check(); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		for u := uint64(1); u <= staticA; u++ {
			got := homeAll(t, tl, u, 1+rng.IntN(10))
			if want := m.home(u, endOfIDs); !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
				t.Fatalf("round %d: home %d = %v, want %v\n%s", round, u, got, want, dumpUser(tl, u))
			}
		}
		switch rng.IntN(4) {
		case 0:
			tl.Close()
			must(t, db.Close())
			db, tl = open()
		case 1:
			clone := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(100), RNG: rng})
			tl.Close()
			db.Close()
			fs = clone
			db, tl = open()
		}
	}
}

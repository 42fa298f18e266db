package likes

import (
	"context"
	"fmt"
	"github.com/tallydb/tally/internal/testutil"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestSimulation runs writers, readers, a bulk loader and the clock (day
// boards roll over, prune jobs run in the background) at once. Writers
// share a few hot items, so their transitions queue on the same stripes
// and commit in groups; each writer owns its users, so the last state each
// writer gave a (user, item) is the truth afterwards. Readers check, inside
// db.View, that every item's counts equal its like and dislike sets' sizes
// (listed through Likers and Dislikers pages) unless a bulk load overlaps
// the view (a load's counts lag its sets until it returns), that the
// histogram's count of items above each item's score (what Rank and Above
// add to) is the count of items scoring more, on the all-time board (no
// load overlapping) and today's (checkRanks), and outside it that reads
// never fail. After every round: Check, a comparison of every state and
// count with the writers' record, and sometimes a reopen.
// TALLY_LIKES_SIM_ROUNDS (default 6) scales it.
func TestSimulation(t *testing.T) {
	rounds := testutil.EnvInt(t, "TALLY_LIKES_SIM_ROUNDS", 6)
	if testing.Short() {
		rounds = 2
	}
	e := newEnv(t, &Options{BoardDays: 2, RoaringThreshold: 24, Stripes: 16})
	e.jobWorkers = 1
	e.reopen()
	const (
		writers = 8
		users   = 40 // per writer
		items   = 12
		biz     = "video"
	)
	type wstate struct {
		mu    sync.Mutex
		state map[pair]State
	}
	ws := make([]*wstate, writers)
	for i := range ws {
		ws[i] = &wstate{state: map[pair]State{}}
	}
	loaded := map[pair]bool{}
	// loadGen is odd while a Load runs: its items' counts lag their sets
	// until it returns (load.go), so a View that overlaps one is not
	// checked.
	var loadGen atomic.Uint64
	var loadUser atomic.Uint64
	loadUser.Store(1 << 40)
	for round := range rounds {
		var stop atomic.Bool
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		fail := func(err error) {
			select {
			case errs <- err:
			default:
			}
			stop.Store(true)
		}
		l := e.l
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(round), uint64(w)))
				for n := 0; !stop.Load(); n++ {
					item := uint64(rng.IntN(items))
					user := uint64(w*1000 + rng.IntN(users))
					var res Result
					var err error
					switch rng.IntN(5) {
					case 0, 1:
						res, err = l.Like(biz, item, user, 7)
					case 2:
						res, err = l.Unlike(biz, item, user)
					case 3:
						res, err = l.Dislike(biz, item, user)
					case 4:
						res, err = l.Undislike(biz, item, user)
					}
					if err != nil {
						fail(fmt.Errorf("writer %d: %w", w, err))
						return
					}
					ws[w].mu.Lock()
					ws[w].state[pair{item, user}] = res.State
					ws[w].mu.Unlock()
				}
			}()
		}
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				all := make([]uint64, items)
				for i := range all {
					all[i] = uint64(i)
				}
				for !stop.Load() {
					gen := loadGen.Load()
					err := e.db.View(func() error {
						if gen%2 == 1 {
							return nil
						}
						counts, err := l.Counts(biz, all, nil)
						if err != nil {
							return err
						}
						for i, item := range all {
							for _, kind := range []byte{kindLike, kindDislike} {
								n, err := countMembers(l, biz, item, kind)
								if err != nil {
									return err
								}
								want := counts[i].Likes
								if kind == kindDislike {
									want = counts[i].Dislikes
								}
								if uint64(n) != want && loadGen.Load() == gen {
									return fmt.Errorf("item %d: count %d, set of kind %d holds %d", item, want, kind, n)
								}
							}
						}
						return checkRanks(l, biz, all, gen%2 == 0 && loadGen.Load() == gen, func() bool { return loadGen.Load() == gen })
					})
					if err != nil {
						fail(fmt.Errorf("view: %w", err))
						return
					}
					if _, err := l.Top(biz, 10); err != nil {
						fail(err)
						return
					}
					if _, err := l.TopDay(biz, e.clock.Now(), 10); err != nil {
						fail(err)
						return
					}
					if _, _, err := l.Rank(biz, 1); err != nil {
						fail(err)
						return
					}
					if _, err := l.States(biz, 3, all, nil); err != nil {
						fail(err)
						return
					}
					time.Sleep(time.Millisecond) // let writers through the views
				}
			}()
		}
		wg.Add(1)
		go func() { // a loader and the clock
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(round), 99))
			for !stop.Load() {
				var likes []LoadLike
				for range 1 + rng.IntN(50) {
					likes = append(likes, LoadLike{Item: uint64(rng.IntN(items)), User: loadUser.Add(1)})
				}
				loadGen.Add(1)
				_, err := l.Load(context.Background(), biz, likes, nil)
				loadGen.Add(1)
				if err != nil {
					fail(fmt.Errorf("load: %w", err))
					return
				}
				for _, lk := range likes {
					loaded[pair{lk.Item, lk.User}] = true
				}
				e.clock.Advance(time.Duration(rng.IntN(6)) * time.Hour)
				time.Sleep(50 * time.Millisecond)
			}
		}()
		time.Sleep(300 * time.Millisecond)
		stop.Store(true)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("round %d: %v", round, err)
		}
		e.check()
		// Every state is the last one its writer saw.
		for w, s := range ws {
			for p, want := range s.state {
				got, err := e.l.State(biz, p.user, p.item)
				if err != nil || got != want {
					t.Fatalf("round %d: writer %d item %d user %d: %s (%v), want %s", round, w, p.item, p.user, got, err, want)
				}
			}
		}
		for p := range loaded {
			if got, err := e.l.State(biz, p.user, p.item); err != nil || got != Liked {
				t.Fatalf("round %d: loaded like item %d user %d: %s (%v)", round, p.item, p.user, got, err)
			}
		}
		t.Logf("round %d: %v", round, e.l.Stats())
		if round%2 == 1 {
			e.reopen()
		}
	}
}

// countMembers counts a set through its pages.
func countMembers(l *Likes, biz string, item uint64, kind byte) (int, error) {
	n, cur := 0, ""
	for {
		pg, err := l.members(biz, item, kind, 100, cur)
		if err != nil {
			return 0, err
		}
		n += len(pg.IDs)
		if pg.Next == "" {
			return n, nil
		}
		cur = pg.Next
	}
}

// checkRanks runs inside db.View while writers race it: for every item of
// all, the items above its score by countAbove (the in-memory histogram
// plus its bucket) equal the items of all scoring more, on today's board
// and, when allTime, the all-time board (a bulk load's counts lag its board
// keys until it returns: the caller passes allTime false while one runs,
// and still reports whether it stayed so). A histogram move applied
// outside the batch's commit would show as a count off by one.
func checkRanks(l *Likes, bizName string, all []uint64, allTime bool, still func() bool) error {
	b, err := l.lookup(bizName)
	if err != nil || b == nil {
		return err
	}
	days := []uint32{l.today()}
	if allTime {
		days = append(days, dayAll)
	}
	for _, day := range days {
		scores, err := l.scores(b, day, all)
		if err != nil {
			return err
		}
		for i, s := range scores {
			if s == 0 {
				continue
			}
			var want int64
			for _, o := range scores {
				if o > s {
					want++
				}
			}
			got, err := l.countAbove(b, day, s)
			if err != nil {
				return err
			}
			if got != want && (day != dayAll || still()) {
				return fmt.Errorf("board %s: item %d (score %d): %d items above by the histogram, %d by the scores", dayName(day), all[i], s, got, want)
			}
		}
	}
	return nil
}

package likes

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tallydb/tally/internal/testutil"
)

// The model: every (business, item, user) state and every item's owner, in
// maps; everything the package answers is derived from them.

type mkey struct {
	biz        string
	item, user uint64
}

type bizItem struct {
	biz  string
	item uint64
}

type model struct {
	st    map[mkey]stateRec
	owner map[bizItem]uint64
}

func newModel() *model {
	return &model{st: map[mkey]stateRec{}, owner: map[bizItem]uint64{}}
}

// apply runs a transition on the model and returns its expected result.
func (m *model) apply(kind opKind, biz string, item, user, owner uint64, ms int64) (Result, error) {
	bi := bizItem{biz, item}
	if kind == opSetOwner {
		changed := m.owner[bi] != owner
		m.owner[bi] = owner
		if owner == 0 {
			delete(m.owner, bi)
		}
		c := m.counts(biz, item)
		return Result{Item: item, Changed: changed, Likes: c.Likes, Dislikes: c.Dislikes}, nil
	}
	if kind == opLike && owner != 0 && m.owner[bi] != 0 && m.owner[bi] != owner {
		return Result{}, ErrOwnerMismatch
	}
	k := mkey{biz, item, user}
	old := m.st[k]
	nw := old
	switch kind {
	case opLike:
		if old.state != Liked {
			nw = stateRec{Liked, ms}
		}
	case opUnlike:
		if old.state == Liked {
			nw = stateRec{}
		}
	case opDislike:
		if old.state != Disliked {
			nw = stateRec{Disliked, ms}
		}
	case opUndislike:
		if old.state == Disliked {
			nw = stateRec{}
		}
	}
	if nw.state == None {
		delete(m.st, k)
	} else {
		m.st[k] = nw
	}
	if kind == opLike && owner != 0 {
		m.owner[bi] = owner
	}
	c := m.counts(biz, item)
	return Result{Item: item, State: nw.state, Changed: nw != old, Likes: c.Likes, Dislikes: c.Dislikes}, nil
}

func (m *model) counts(biz string, item uint64) Counts {
	var c Counts
	for k, s := range m.st {
		if k.biz == biz && k.item == item {
			if s.state == Liked {
				c.Likes++
			} else {
				c.Dislikes++
			}
		}
	}
	return c
}

func (m *model) members(biz string, item uint64, s State) []uint64 {
	var out []uint64
	for k, v := range m.st {
		if k.biz == biz && k.item == item && v.state == s {
			out = append(out, k.user)
		}
	}
	slices.Sort(out)
	return out
}

type timedItem struct {
	ms   int64
	item uint64
}

func (m *model) userLikes(biz string, user uint64) []timedItem {
	var out []timedItem
	for k, v := range m.st {
		if k.biz == biz && k.user == user && v.state == Liked {
			out = append(out, timedItem{v.ms, k.item})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].ms != out[j].ms {
			return out[i].ms > out[j].ms
		}
		return out[i].item > out[j].item
	})
	return out
}

// board returns the whole board of biz (day dayAll: all time), ranked.
func (m *model) board(biz string, day uint32) []Entry {
	score := map[uint64]uint64{}
	for k, v := range m.st {
		if k.biz == biz && v.state == Liked && (day == dayAll || dayOf(v.ms) == day) {
			score[k.item]++
		}
	}
	var out []Entry
	for item, s := range score {
		out = append(out, Entry{Item: item, Likes: s})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Likes != out[j].Likes {
			return out[i].Likes > out[j].Likes
		}
		return out[i].Item < out[j].Item
	})
	for i := range out {
		out[i].Rank = i + 1
		if i > 0 && out[i].Likes == out[i-1].Likes {
			out[i].Rank = out[i-1].Rank
		}
	}
	return out
}

func (m *model) received(owner uint64) uint64 {
	var n uint64
	for bi, o := range m.owner {
		if o == owner {
			n += m.counts(bi.biz, bi.item).Likes
		}
	}
	return n
}

// load applies a bulk load to the model: Like without owner, at each
// like's time, first like of a pair wins.
func (m *model) load(biz string, likes []LoadLike, nowMs int64) {
	for _, lk := range likes {
		ms := lk.Ms
		if ms == 0 {
			ms = nowMs
		}
		m.apply(opLike, biz, lk.Item, lk.User, 0, ms)
	}
}

// modelRun is one randomized run against the model.
type modelRun struct {
	t     *testing.T
	rng   *rand.Rand
	m     *model
	e     *env
	bizs  []string
	items uint64
	users uint64
	step  int
}

// TestModel drives random transitions, owner changes, bulk loads (some
// crashed part-way and run again), clock moves, prunes, checkpoints,
// reopens and crashes (a crash keeps exactly what was synced: every
// acknowledged write, under SyncAlways) against the model, and compares
// every read: counts, states, likers and dislikers (all pages), user lists
// (all pages), top-N with ranks all-time and per kept day, single ranks and
// received totals; Check runs every few steps. TALLY_LIKES_MODEL_STEPS
// (default 400) and TALLY_LIKES_MODEL_SEEDS (default 2) scale it;
// TALLY_LIKES_SEED repeats one seed.
func TestModel(t *testing.T) {
	steps := testutil.EnvInt(t, "TALLY_LIKES_MODEL_STEPS", 400)
	seeds := testutil.EnvInt(t, "TALLY_LIKES_MODEL_SEEDS", 2)
	if testing.Short() {
		steps = 150
		seeds = 1
	}
	base, repeat := testutil.EnvSeed(t, "TALLY_LIKES_SEED", uint64(time.Now().UnixNano()))
	if repeat {
		seeds = 1
	}
	for i := range seeds {
		seed := base + uint64(i)
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			t.Logf("TALLY_LIKES_SEED=%d", seed)
			runModel(t, seed, steps)
		})
	}
}

func runModel(t *testing.T, seed uint64, steps int) {
	mem := vfs.NewCrashableMem()
	e := &env{t: t, dir: "likes", clock: newClock(epoch)}
	// A cache of 128 users: evictions on every seed.
	e.opts = Options{BoardDays: 3, RoaringThreshold: MinRoaringThreshold, Stripes: 8, Now: e.clock.Now, CreateBusinesses: true,
		OrdinalCacheBytes: ordCacheShards * ordCacheWays * ordCacheEntryBytes}
	e.syncAlways = true
	e.start(mem)
	r := &modelRun{t: t, rng: rand.New(rand.NewPCG(seed, seed^0x5eed)), m: newModel(), e: e,
		bizs: []string{"video", "post"}, items: 24, users: 60}
	for r.step = 0; r.step < steps; r.step++ {
		r.once()
		if r.step%40 == 39 {
			r.compareAll()
			e.check()
		}
	}
	r.compareAll()
	e.check()
	roaring := 0
	for _, biz := range r.bizs {
		for i := range r.items {
			if ok, _ := e.l.isRoaring(biz, i); ok {
				roaring++
			}
		}
	}
	if roaring == 0 && steps >= 400 {
		t.Errorf("no set reached the roaring threshold: the run tests list sets only")
	}
	t.Logf("%d roaring items at the end; stats since the last open: %v", roaring, e.l.Stats())
}

func (r *modelRun) item() uint64 {
	// Skewed: low items are popular, so some sets pass the threshold.
	if r.rng.IntN(3) == 0 {
		return uint64(r.rng.IntN(3))
	}
	return r.rng.Uint64N(r.items)
}

func (r *modelRun) biz() string { return r.bizs[r.rng.IntN(len(r.bizs))] }

func (r *modelRun) owner(biz string, item uint64) uint64 {
	switch r.rng.IntN(6) {
	case 0:
		return 0
	case 1:
		return 1000 + r.rng.Uint64N(5) // maybe a mismatch
	}
	return 1000 + (item*7+uint64(len(biz)))%5
}

func (r *modelRun) fatalf(format string, args ...any) {
	r.t.Helper()
	r.t.Fatalf("step %d: "+format, append([]any{r.step}, args...)...)
}

func (r *modelRun) once() {
	e, l := r.e, r.e.l
	switch p := r.rng.IntN(100); {
	case p < 60:
		kinds := []opKind{opLike, opLike, opLike, opUnlike, opDislike, opUndislike}
		kind := kinds[r.rng.IntN(len(kinds))]
		if r.rng.IntN(50) == 0 {
			kind = opSetOwner
		}
		biz, item, user := r.biz(), r.item(), r.rng.Uint64N(r.users)
		var owner uint64
		if kind == opLike || kind == opSetOwner {
			owner = r.owner(biz, item)
		}
		want, wantErr := r.m.apply(kind, biz, item, user, owner, e.clock.Now().UnixMilli())
		var got Result
		var err error
		switch kind {
		case opLike:
			got, err = l.Like(biz, item, user, owner)
		case opUnlike:
			got, err = l.Unlike(biz, item, user)
		case opDislike:
			got, err = l.Dislike(biz, item, user)
		case opUndislike:
			got, err = l.Undislike(biz, item, user)
		case opSetOwner:
			got, err = l.SetOwner(biz, item, owner)
		}
		if wantErr != nil {
			if !errors.Is(err, wantErr) {
				r.fatalf("op %d %s/%d/%d: err %v, want %v", kind, biz, item, user, err, wantErr)
			}
			return
		}
		if err != nil {
			r.fatalf("op %d %s/%d/%d: %v", kind, biz, item, user, err)
		}
		if kind != opSetOwner && got != want || kind == opSetOwner && (got.Likes != want.Likes || got.Changed != want.Changed) {
			r.fatalf("op %d %s/%d/%d owner %d: got %+v, want %+v", kind, biz, item, user, owner, got, want)
		}
	case p < 63:
		biz, likes := r.randomLoad()
		if _, err := l.Load(context.Background(), biz, likes, nil); err != nil {
			r.fatalf("load: %v", err)
		}
		r.m.load(biz, likes, e.clock.Now().UnixMilli())
	case p < 64:
		r.crashDuringLoad()
	case p < 70:
		e.clock.Advance(time.Duration(r.rng.Int64N(int64(30 * time.Hour))))
	case p < 72:
		if err := e.db.RunJobs(context.Background(), nil); err != nil {
			r.fatalf("run jobs: %v", err)
		}
	case p < 74:
		if err := e.db.Checkpoint(); err != nil {
			r.fatalf("checkpoint: %v", err)
		}
	case p < 76:
		e.reopen()
	case p < 78:
		r.crash()
	default:
		r.compareSome()
	}
}

func (r *modelRun) randomLoad() (string, []LoadLike) {
	biz := r.biz()
	n := 1 + r.rng.IntN(120)
	now := r.e.clock.Now().UnixMilli()
	likes := make([]LoadLike, n)
	for i := range likes {
		likes[i] = LoadLike{Item: r.item(), User: r.rng.Uint64N(r.users)}
		if r.rng.IntN(4) > 0 {
			likes[i].Ms = now - r.rng.Int64N(5*86_400_000)
		}
	}
	return biz, likes
}

// crash reopens the store from a crash image: only synced data.
func (r *modelRun) crash() {
	e := r.e
	e.st.Crash(r.rng.IntN(100), r.rng)
}

// crashDuringLoad crashes while a load runs, reopens (which recounts), and
// runs the same load again, which must finish it.
func (r *modelRun) crashDuringLoad() {
	e := r.e
	biz, likes := r.randomLoad()
	likes = append(likes, likes...) // longer, with repeats
	done := make(chan error, 1)
	go func() {
		_, err := e.l.Load(context.Background(), biz, likes, nil)
		done <- err
	}()
	time.Sleep(time.Duration(r.rng.IntN(400)) * time.Microsecond)
	crashed := e.st.FS().(*vfs.MemFS).CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: r.rng.IntN(100), RNG: r.rng})
	if err := <-done; err != nil {
		r.fatalf("load before the crash: %v", err)
	}
	e.st.RestartOn(crashed)
	e.check() // recounted on open
	if _, err := e.l.Load(context.Background(), biz, likes, nil); err != nil {
		r.fatalf("load again: %v", err)
	}
	r.m.load(biz, likes, e.clock.Now().UnixMilli())
}

func (r *modelRun) compareSome() {
	biz := r.biz()
	switch r.rng.IntN(6) {
	case 0:
		r.compareCounts(biz)
	case 1:
		r.compareStates(biz, r.rng.Uint64N(r.users))
	case 2:
		r.compareMembers(biz, r.item())
	case 3:
		r.compareUser(biz, r.rng.Uint64N(r.users))
	case 4:
		r.compareBoards(biz)
	case 5:
		r.compareReceived()
	}
}

func (r *modelRun) compareAll() {
	for _, biz := range r.bizs {
		r.compareCounts(biz)
		for u := range r.users {
			r.compareStates(biz, u)
			r.compareUser(biz, u)
		}
		for i := range r.items {
			r.compareMembers(biz, i)
		}
		r.compareBoards(biz)
	}
	r.compareReceived()
}

func (r *modelRun) allItems() []uint64 {
	items := make([]uint64, r.items+2)
	for i := range items {
		items[i] = uint64(i)
	}
	r.rng.Shuffle(len(items), func(i, j int) { items[i], items[j] = items[j], items[i] })
	return items
}

func (r *modelRun) compareCounts(biz string) {
	items := r.allItems()
	got, err := r.e.l.Counts(biz, items, nil)
	if err != nil {
		r.fatalf("counts: %v", err)
	}
	for i, item := range items {
		if want := r.m.counts(biz, item); got[i] != want {
			r.fatalf("counts %s/%d: %+v, want %+v", biz, item, got[i], want)
		}
	}
}

func (r *modelRun) compareStates(biz string, user uint64) {
	items := r.allItems()[:1+r.rng.IntN(int(r.items))]
	for _, byGet := range []bool{false, true} {
		got, err := r.e.l.states(biz, user, items, nil, byGet)
		if err != nil {
			r.fatalf("states: %v", err)
		}
		for i, item := range items {
			if want := r.m.st[mkey{biz, item, user}].state; got[i] != want {
				r.fatalf("state %s/%d/%d (byGet %v): %s, want %s", biz, item, user, byGet, got[i], want)
			}
		}
	}
}

// compareMembers pages through likers and dislikers with random page sizes.
func (r *modelRun) compareMembers(biz string, item uint64) {
	for _, s := range []State{Liked, Disliked} {
		var got []uint64
		cur := ""
		pages := 0
		for {
			limit := 1 + r.rng.IntN(7)
			var pg Page
			var err error
			if s == Liked {
				pg, err = r.e.l.Likers(biz, item, cur, limit)
			} else {
				pg, err = r.e.l.Dislikers(biz, item, cur, limit)
			}
			if err != nil {
				r.fatalf("members %s/%d: %v", biz, item, err)
			}
			if len(pg.IDs) > limit || pg.Next != "" && len(pg.IDs) != limit {
				r.fatalf("members %s/%d: page of %d for limit %d, next %q", biz, item, len(pg.IDs), limit, pg.Next)
			}
			got = append(got, pg.IDs...)
			if pages++; pg.Next == "" {
				break
			}
			cur = pg.Next
		}
		want := r.m.members(biz, item, s)
		sorted := slices.Clone(got)
		slices.Sort(sorted)
		if !slices.Equal(sorted, want) {
			r.fatalf("%s of %s/%d: %v, want %v", s, biz, item, got, want)
		}
		c := r.m.counts(biz, item)
		roaring := c.Likes >= MinRoaringThreshold || c.Dislikes >= MinRoaringThreshold
		if !roaring && !slices.Equal(got, want) {
			// List sets page in user order (a set converted earlier may
			// be roaring now although smaller).
			if own, _ := r.e.l.isRoaring(biz, item); !own {
				r.fatalf("%s of %s/%d not in user order: %v", s, biz, item, got)
			}
		}
	}
}

func (r *modelRun) compareUser(biz string, user uint64) {
	var got []timedItem
	cur := ""
	for {
		limit := 1 + r.rng.IntN(9)
		pg, err := r.e.l.UserLikes(biz, user, cur, limit)
		if err != nil {
			r.fatalf("user likes %s/%d: %v", biz, user, err)
		}
		for i := range pg.IDs {
			got = append(got, timedItem{pg.Times[i], pg.IDs[i]})
		}
		if pg.Next == "" {
			break
		}
		cur = pg.Next
	}
	if want := r.m.userLikes(biz, user); !slices.Equal(got, want) {
		r.fatalf("user likes %s/%d: %v, want %v", biz, user, got, want)
	}
}

func (r *modelRun) compareBoards(biz string) {
	l := r.e.l
	n := 1 + r.rng.IntN(30)
	check := func(what string, got []Entry, err error, want []Entry) {
		if err != nil {
			r.fatalf("%s: %v", what, err)
		}
		if len(want) > n {
			want = want[:n]
		}
		if !slices.Equal(got, want) {
			r.fatalf("%s top %d: %v, want %v", what, n, got, want)
		}
	}
	all := r.m.board(biz, dayAll)
	got, err := l.Top(biz, n)
	check(biz+" all-time", got, err, all)
	for i := range r.items {
		e, ok, err := l.Rank(biz, i)
		if err != nil {
			r.fatalf("rank: %v", err)
		}
		want := Entry{Item: i}
		wantOK := false
		for _, w := range all {
			if w.Item == i {
				want, wantOK = w, true
			}
		}
		if ok != wantOK || ok && e != want {
			r.fatalf("rank %s/%d: %+v %v, want %+v %v", biz, i, e, ok, want, wantOK)
		}
	}
	today := dayOf(r.e.clock.Now().UnixMilli())
	for d := today - 2; d <= today; d++ {
		day := time.UnixMilli(int64(d) * 86_400_000).Add(time.Hour)
		want := r.m.board(biz, d)
		got, err := l.TopDay(biz, day, n)
		check(fmt.Sprintf("%s day %d", biz, d), got, err, want)
		for _, w := range want {
			e, ok, err := l.RankDay(biz, day, w.Item)
			if err != nil || !ok || e != w {
				r.fatalf("rank day %d %s/%d: %+v %v %v, want %+v", d, biz, w.Item, e, ok, err, w)
			}
		}
	}
	old := time.UnixMilli(int64(today-3) * 86_400_000)
	if _, err := l.TopDay(biz, old, n); !errors.Is(err, ErrDayNotKept) {
		r.fatalf("top of a day not kept: %v", err)
	}
}

func (r *modelRun) compareReceived() {
	for o := uint64(1000); o < 1005; o++ {
		got, err := r.e.l.Received(o)
		if err != nil {
			r.fatalf("received: %v", err)
		}
		if want := r.m.received(o); got != want {
			r.fatalf("received %d: %d, want %d", o, got, want)
		}
	}
}

package unread

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/tallydb/tally/internal/testutil"
	"github.com/tallydb/tally/store"
)

// model is the plain truth the model test compares unread with.
type model struct {
	kinds  []string
	counts map[uint64][]uint64 // per user, per kind

	chanTag  map[string]uint64
	notices  map[string][]uint64 // sorted
	dotTag   map[[2]string]uint64
	lastRead map[[2]string]uint64

	posts   map[uint64]uint64
	follows map[uint64]map[uint64]bool
	base    map[[2]uint64]uint64
	unknown map[[2]uint64]bool // lazy store: a predating follow with no base yet
	muted   map[[2]uint64]bool // (user, author): timeline's mutes
	hidden  map[[2]uint64]bool // (author, follower): timeline's hides
}

// visible reports whether u follows f and sees f's posts: the pairs feed
// unread counts (a mute or hide is an unfollow for it, its end a follow).
func (m *model) visible(u, f uint64) bool {
	return m.follows[u][f] && !m.muted[[2]uint64{u, f}] && !m.hidden[[2]uint64{f, u}]
}

func newModel() *model {
	return &model{
		counts: map[uint64][]uint64{}, chanTag: map[string]uint64{}, notices: map[string][]uint64{},
		dotTag: map[[2]string]uint64{}, lastRead: map[[2]string]uint64{},
		posts: map[uint64]uint64{}, follows: map[uint64]map[uint64]bool{},
		base: map[[2]uint64]uint64{}, unknown: map[[2]uint64]bool{},
		muted: map[[2]uint64]bool{}, hidden: map[[2]uint64]bool{},
	}
}

func ukey(u uint64, ch string) [2]string { return [2]string{strconv.FormatUint(u, 10), ch} }

func (m *model) row(u uint64) []uint64 {
	r := m.counts[u]
	for len(r) < len(m.kinds) {
		r = append(r, 0)
	}
	m.counts[u] = r
	return r
}

// snapshotUnknown gives the bases unread never saw their current counts:
// what a user's first read (or reset) does.
func (m *model) snapshotUnknown(u uint64) {
	for f := range m.follows[u] {
		if m.unknown[[2]uint64{u, f}] && m.visible(u, f) {
			delete(m.unknown, [2]uint64{u, f})
			m.base[[2]uint64{u, f}] = m.posts[f]
		}
	}
}

func (m *model) feed(u uint64) uint64 {
	m.snapshotUnknown(u)
	var n uint64
	for f := range m.follows[u] {
		if !m.visible(u, f) {
			continue
		}
		if p, b := m.posts[f], m.base[[2]uint64{u, f}]; p > b {
			n += p - b
		}
	}
	return n
}

func (m *model) above(ch string, id uint64) uint64 {
	ids := m.notices[ch]
	i, found := slices.BinarySearch(ids, id)
	if found {
		i++
	}
	return uint64(len(ids) - i)
}

// TestModel runs random sequences of every operation of the three models
// against the plain model: incr, reset, get, add kind; mark, clear, has;
// post, read, unread; follow, unfollow, publish, unpublish, feed, feed
// reset; evictions from a small (or no) snapshot cache; checkpoints,
// reopens and crashes. Every read is compared, and Check runs after every
// step. Stores are "complete" (unread saw every follow) or "lazy" (follows
// predate it). TALLY_UNREAD_MODEL_SEEDS and TALLY_UNREAD_MODEL_STEPS
// (defaults 4 and 400) make it longer; TALLY_UNREAD_MODEL_SEED repeats one
// seed.
func TestModel(t *testing.T) {
	seeds := testutil.EnvInt(t, "TALLY_UNREAD_MODEL_SEEDS", 4)
	steps := testutil.EnvInt(t, "TALLY_UNREAD_MODEL_STEPS", 400)
	if testing.Short() {
		steps /= 4
	}
	first, repeat := testutil.EnvSeed(t, "TALLY_UNREAD_MODEL_SEED", 1)
	if repeat {
		seeds = 1
	}
	caches := []int64{0, 64 * 200, -1}
	for _, gk := range graphKinds {
		for i := range uint64(seeds) {
			seed := first + i
			for _, lazy := range []bool{false, true} {
				cache := caches[int(seed)%len(caches)]
				t.Run(fmt.Sprintf("%s/seed=%d/lazy=%v/cache=%d", gk.name, seed, lazy, cache), func(t *testing.T) {
					runModel(t, gk.real, seed, steps, lazy, cache)
				})
			}
		}
	}
}

func runModel(t *testing.T, real bool, seed uint64, steps int, lazy bool, cacheBytes int64) {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	m := newModel()
	const users, authors = 8, 12
	channels := []string{"a", "b", "c"}
	var before func(g testGraph)
	if lazy {
		before = func(g testGraph) {
			for range 15 {
				u, f := rng.Uint64N(users)+1, rng.Uint64N(authors)+1
				if u == f {
					continue
				}
				if ok, err := g.Follow(u, f); err != nil {
					t.Fatal(err)
				} else if ok {
					if m.follows[u] == nil {
						m.follows[u] = map[uint64]bool{}
					}
					m.follows[u][f] = true
					m.unknown[[2]uint64{u, f}] = true
				}
				if _, err := g.Publish(f); err != nil {
					t.Fatal(err)
				}
				m.posts[f]++
			}
		}
	}
	e := newEnvOn(t, real, &Options{SnapshotCacheBytes: cacheBytes}, before)
	if e.x.complete == lazy {
		t.Fatalf("complete = %v", e.x.complete)
	}
	var log []string
	defer func() {
		if t.Failed() {
			n := max(0, len(log)-30)
			t.Logf("last steps (seed %d):\n%s", seed, fmt.Sprint(log[n:]))
		}
	}()
	for step := range steps {
		u := rng.Uint64N(users) + 1
		f := rng.Uint64N(authors) + 1
		ch := channels[rng.IntN(len(channels))]
		var what string
		switch r := rng.IntN(100); {
		case r < 3 && len(m.kinds) < 4:
			k := fmt.Sprintf("k%d", len(m.kinds))
			what = "add kind " + k
			must(t, e.x.AddKind(k, store.ColumnOptions{HintBits: 8}))
			m.kinds = append(m.kinds, k)
		case r < 12:
			if len(m.kinds) == 0 {
				continue
			}
			ki := rng.IntN(len(m.kinds))
			n := rng.Int64N(9) - 3
			what = fmt.Sprintf("incr %d %s %d", u, m.kinds[ki], n)
			got, err := e.x.Incr(u, m.kinds[ki], n)
			must(t, err)
			row := m.row(u)
			row[ki] = uint64(max(0, int64(row[ki])+n))
			if got != row[ki] {
				t.Fatalf("step %d %s: %d, model %d", step, what, got, row[ki])
			}
			if _, err := e.x.Incr(u, "nokind", 1); !errors.Is(err, ErrUnknownKind) {
				t.Fatalf("unknown kind: %v", err)
			}
		case r < 16:
			var ks []string
			for _, k := range m.kinds {
				if rng.IntN(2) == 0 {
					ks = append(ks, k)
				}
			}
			what = fmt.Sprintf("reset %d %v", u, ks)
			must(t, e.x.Reset(u, ks...))
			row := m.row(u)
			for i, k := range m.kinds {
				if len(ks) == 0 || slices.Contains(ks, k) {
					row[i] = 0
				}
			}
		case r < 22:
			what = fmt.Sprintf("get %d", u)
			got, err := e.x.Get(u, nil)
			must(t, err)
			if want := m.row(u); !slices.Equal(got, want) {
				t.Fatalf("step %d %s: %v, model %v", step, what, got, want)
			}
		case r < 26:
			what = "mark " + ch
			tag, err := e.x.Mark(ch)
			must(t, err)
			m.chanTag[ch]++
			if tag != m.chanTag[ch] {
				t.Fatalf("step %d %s: tag %d, model %d", step, what, tag, m.chanTag[ch])
			}
		case r < 30:
			what = fmt.Sprintf("clear %d %s", u, ch)
			err := e.x.Clear(u, ch)
			if _, ok := m.chanTag[ch]; !ok && m.notices[ch] == nil {
				if !errors.Is(err, ErrUnknownChannel) {
					t.Fatalf("step %d %s: %v", step, what, err)
				}
				continue
			}
			must(t, err)
			m.dotTag[ukey(u, ch)] = m.chanTag[ch]
		case r < 36:
			what = fmt.Sprintf("has %d %s", u, ch)
			got, err := e.x.Has(u, ch)
			must(t, err)
			// No tag: older than every mark. An undeclared channel has
			// tag 0: no dot. Has never records anything.
			tag := m.dotTag[ukey(u, ch)]
			if want := tag < m.chanTag[ch]; got != want {
				t.Fatalf("step %d %s: %v, model %v", step, what, got, want)
			}
		case r < 40:
			id := rng.Uint64N(40) + 1
			what = fmt.Sprintf("post %s %d", ch, id)
			posted, err := e.x.Post(ch, id)
			must(t, err)
			if _, ok := m.chanTag[ch]; !ok {
				m.chanTag[ch] = 0
			}
			i, found := slices.BinarySearch(m.notices[ch], id)
			if posted == found {
				t.Fatalf("step %d %s: posted %v, model had it %v", step, what, posted, found)
			}
			if !found {
				m.notices[ch] = slices.Insert(m.notices[ch], i, id)
			}
		case r < 43:
			what = fmt.Sprintf("read %d %s", u, ch)
			err := e.x.Read(u, ch)
			if _, ok := m.chanTag[ch]; !ok {
				if !errors.Is(err, ErrUnknownChannel) {
					t.Fatalf("step %d %s: %v", step, what, err)
				}
				continue
			}
			must(t, err)
			m.lastRead[ukey(u, ch)] = lastOr0(m.notices[ch])
		case r < 48:
			what = fmt.Sprintf("unread %d %s", u, ch)
			got, err := e.x.Unread(u, ch)
			must(t, err)
			// Never read (or an undeclared channel): new, 0 unread.
			// Unread never records anything.
			lr, ok := m.lastRead[ukey(u, ch)]
			if !ok {
				lr = lastOr0(m.notices[ch])
			}
			if want := m.above(ch, lr); got != want {
				t.Fatalf("step %d %s: %d, model %d", step, what, got, want)
			}
		case r < 61 && rng.IntN(4) == 0: // mute, unmute, hide or unhide (the real timeline)
			tg, ok := e.g.(*tlGraph)
			if !ok || u == f {
				continue
			}
			kind := rng.IntN(4)
			what = fmt.Sprintf("pair op %d %d %d", kind, u, f)
			// u mutes or unmutes f; f hides or unhides from u.
			wasVisible := m.visible(u, f)
			var n int
			var err error
			switch kind {
			case 0:
				n, err = tg.Mute(u, f)
				m.muted[[2]uint64{u, f}] = true
			case 1:
				n, err = tg.Unmute(u, f)
				delete(m.muted, [2]uint64{u, f})
			case 2:
				n, err = tg.Hide(f, u)
				m.hidden[[2]uint64{f, u}] = true
			default:
				n, err = tg.Unhide(f, u)
				delete(m.hidden, [2]uint64{f, u})
			}
			must(t, err)
			_ = n
			switch now := m.visible(u, f); {
			case wasVisible && !now:
				delete(m.base, [2]uint64{u, f})
				delete(m.unknown, [2]uint64{u, f})
			case !wasVisible && now:
				m.base[[2]uint64{u, f}] = m.posts[f]
				delete(m.unknown, [2]uint64{u, f})
			}
		case r < 56:
			if u == f {
				continue
			}
			what = fmt.Sprintf("follow %d %d", u, f)
			ok, err := e.g.Follow(u, f)
			must(t, err)
			if ok == m.follows[u][f] {
				t.Fatalf("step %d %s: new edge %v, model following %v", step, what, ok, m.follows[u][f])
			}
			if ok {
				if m.follows[u] == nil {
					m.follows[u] = map[uint64]bool{}
				}
				m.follows[u][f] = true
				delete(m.unknown, [2]uint64{u, f})
				if m.visible(u, f) {
					m.base[[2]uint64{u, f}] = m.posts[f]
				}
			}
		case r < 61:
			if u == f {
				continue
			}
			what = fmt.Sprintf("unfollow %d %d", u, f)
			ok, err := e.g.Unfollow(u, f)
			must(t, err)
			if ok != m.follows[u][f] {
				t.Fatalf("step %d %s: removed %v, model following %v", step, what, ok, m.follows[u][f])
			}
			delete(m.follows[u], f)
			delete(m.base, [2]uint64{u, f})
			delete(m.unknown, [2]uint64{u, f})
		case r < 70:
			what = fmt.Sprintf("publish %d", f)
			_, err := e.g.Publish(f)
			must(t, err)
			m.posts[f]++
		case r < 74:
			what = fmt.Sprintf("unpublish %d", f)
			ok, _, err := e.g.Unpublish(f)
			must(t, err)
			if ok != (m.posts[f] > 0) {
				t.Fatalf("step %d %s: %v with %d posts", step, what, ok, m.posts[f])
			}
			if ok {
				m.posts[f]--
			}
		case r < 86:
			what = fmt.Sprintf("feed %d", u)
			got, err := e.x.Feed(u)
			must(t, err)
			if want := m.feed(u); got != want {
				t.Fatalf("step %d %s: %d, model %d", step, what, got, want)
			}
		case r < 91:
			what = fmt.Sprintf("feed reset %d", u)
			must(t, e.x.FeedReset(u))
			m.snapshotUnknown(u)
			for f := range m.follows[u] {
				if m.visible(u, f) {
					m.base[[2]uint64{u, f}] = m.posts[f]
				}
			}
		case r < 94:
			what = "evict"
			e.x.cache.clear()
		case r < 96:
			what = "checkpoint"
			must(t, e.db.Checkpoint())
		case r < 98:
			what = "reopen"
			e.reopen()
		default:
			what = "crash"
			e.crash(rng.IntN(100), rand.New(rand.NewPCG(seed, uint64(step))))
		}
		log = append(log, what)
		if err := e.check(); err != nil {
			t.Fatalf("step %d %s: %v", step, what, err)
		}
	}
	// Every user's feed and counts at the end.
	for u := uint64(1); u <= users; u++ {
		got, err := e.x.Feed(u)
		must(t, err)
		if want := m.feed(u); got != want {
			t.Fatalf("final feed %d: %d, model %d", u, got, want)
		}
	}
}

func lastOr0(s []uint64) uint64 {
	if len(s) == 0 {
		return 0
	}
	return s[len(s)-1]
}

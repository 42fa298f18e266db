package tally_test

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/tallydb/tally/internal/testutil"
	"github.com/tallydb/tally/likes"
	"github.com/tallydb/tally/timeline"
)

// TestDBModel is issue 17's model test at the tally.DB level: one seeded
// loop drives random operations of every package through the public
// handle only (these files are package tally_test, so nothing unexported
// is reachable) and compares every read with one model, plain maps for
// all of them (model_test.go; the operations are in model_ops_test.go,
// the loop and the lifecycle in model_run_test.go):
//
//   - the host's counters (db.Store() and tally.UserCounter): create
//     (some with narrow ranges that age), add column, incr (saturating at
//     0, refused past the column's maximum), set, set column, idempotent
//     incr (IncrOnce), delete, bulk load, get and multi-get, and the
//     namespace rule (package counters refused, UserCounters lists the
//     host's only);
//   - timeline: follow and unfollow (one and many, self-follows refused),
//     LoadFollows, publish and unpublish (one and many, other authors' ids
//     refused), home pages continued by cursors at later steps (after
//     reopens and crashes too), followers, followees, a user's posts and
//     counts, activity, expiry, configuration changes;
//   - unread: one-to-one kinds (incr, reset, get, a kind added live),
//     red dots (mark, clear, has), notices (post, read, unread), forgotten
//     tags, undeclared channels, and feed unread, which is the docs' exact
//     formula over the model's follow graph and post counts;
//   - likes: like, unlike, dislike, undislike with owners (mismatches
//     refused), viral bursts that turn sets roaring, owner moves, bulk
//     loads, undeclared businesses refused, counts (one business's aging
//     into cold blocks), states, likers, dislikers, user lists, top and
//     rank all time and per kept day, received totals;
//   - the lifecycle: checkpoint, compact and seal, Verify, clean close and
//     reopen, read-only opens (every read must answer as the model, and
//     write nothing), a failed WAL sync healed in place (ReopenOnFailure,
//     as tally serve runs), crashes on Pebble's crashable memory filesystem
//     (testutil.Store) between steps, while jobs run, while a multi-id
//     command commits and while a bulk load runs.
//
// The store runs with SyncAlways, which acknowledges a write only once its
// WAL is fsynced, so a crash must keep every acknowledged operation: the
// model is never rolled back. A write that was not acknowledged (a crash
// during it, a failed sync) is looked up after the restart and must be
// there whole or not at all. Background work is off (JobWorkers -1): jobs
// run only when the loop runs them (RunJobs, WaitJob on a publish's
// fan-out job or on a random queued one), which keeps fan-out asynchronous
// with respect to the reads in between. Homes are compared as the timeline
// docs say they are exact: every followed post, except that a post whose
// fan-out has not finished (PostInfo.FannedOut false) may be missing from
// a page; after RunJobs every home must equal the model exactly. Feed
// unread is exact at every step (the observer writes in timeline's batch).
//
// db.Check (the store's and every package's Check) runs after every step:
// on the model's few dozen users and items it reads everything in about a
// millisecond, so checking less often would buy little and lose the step
// that broke an invariant.
//
// A seed repeats the operations exactly, except the moment of a crash
// taken while another goroutine writes, which the scheduler decides.
// The three bugs it found have their own tests, which failed before the
// fixes (readonly_intent_test.go, unread_mark_test.go,
// likes_received_test.go).
//
// The default (TALLY_DB_MODEL_STEPS=1000, one seed) takes about three
// seconds on two idle cores, a second of it waiting for two heals.
// Heavier runs are opt-in: TALLY_DB_MODEL_STEPS=20000 TALLY_DB_MODEL_SEEDS=10.
// TALLY_DB_MODEL_SEED=S repeats a seed (each run logs its own and every
// failure names it with the step and the last operations), and
// TALLY_DB_MODEL_TRACE=1 logs every operation.
func TestDBModel(t *testing.T) {
	steps := testutil.EnvInt(t, "TALLY_DB_MODEL_STEPS", 1000)
	seeds := testutil.EnvInt(t, "TALLY_DB_MODEL_SEEDS", 1)
	if testing.Short() {
		steps = min(steps, 400)
	}
	first, repeat := testutil.EnvSeed(t, "TALLY_DB_MODEL_SEED", uint64(time.Now().UnixNano()))
	if repeat {
		seeds = 1
	}
	for i := range seeds {
		seed := first + uint64(i)
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			t.Logf("seed %d (TALLY_DB_MODEL_SEED=%d repeats it)", seed, seed)
			newDBRun(t, seed).run(steps)
		})
	}
}

// The model: plain maps, one set for the whole database.

type ucKey struct {
	user uint64
	ch   string
}

type likeKey struct {
	biz        string
	item, user uint64
}

type bizItem struct {
	biz  string
	item uint64
}

type likeRec struct {
	state likes.State
	ms    int64
}

type counterModel struct {
	aging bool // created as agingCounter
	cols  []string
	max   []uint64
	rows  map[uint64][]uint64
}

type dbModel struct {
	// The host's counters, in creation order, and IncrOnce's sources.
	counterNames []string
	counters     map[string]*counterModel
	sources      map[string]uint64

	// timeline
	follows map[uint64]map[uint64]bool // user -> followees
	author  map[uint64]uint64          // published post -> author
	owned   map[uint64]uint64          // every post ever published -> its author (ids are never reused)
	posts   map[uint64]uint64          // author -> published posts

	// unread
	kinds    []string
	counts   map[uint64][]uint64 // user -> per kind
	chanTag  map[string]uint64   // declared channels -> marks
	notices  map[string][]uint64 // sorted
	dotTag   map[ucKey]uint64
	lastRead map[ucKey]uint64
	base     map[[2]uint64]uint64 // (user, followee) -> followee's post count at the later of follow and reset

	// likes
	likes map[likeKey]likeRec
	owner map[bizItem]uint64
}

func newDBModel() *dbModel {
	return &dbModel{
		counters: map[string]*counterModel{}, sources: map[string]uint64{},
		follows: map[uint64]map[uint64]bool{}, author: map[uint64]uint64{}, owned: map[uint64]uint64{}, posts: map[uint64]uint64{},
		counts: map[uint64][]uint64{}, chanTag: map[string]uint64{}, notices: map[string][]uint64{},
		dotTag: map[ucKey]uint64{}, lastRead: map[ucKey]uint64{}, base: map[[2]uint64]uint64{},
		likes: map[likeKey]likeRec{}, owner: map[bizItem]uint64{},
	}
}

func (m *dbModel) follow(u, f uint64) bool {
	if m.follows[u][f] {
		return false
	}
	if m.follows[u] == nil {
		m.follows[u] = map[uint64]bool{}
	}
	m.follows[u][f] = true
	m.base[[2]uint64{u, f}] = m.posts[f]
	return true
}

func (m *dbModel) unfollow(u, f uint64) bool {
	if !m.follows[u][f] {
		return false
	}
	delete(m.follows[u], f)
	delete(m.base, [2]uint64{u, f})
	return true
}

func (m *dbModel) publish(a, p uint64) {
	m.author[p], m.owned[p] = a, a
	m.posts[a]++
}

func (m *dbModel) unpublish(p uint64) {
	a := m.author[p]
	delete(m.author, p)
	m.posts[a]--
}

// home is u's home below before, newest first: every published post of
// every followee.
func (m *dbModel) home(u, before uint64) []timeline.Entry {
	var out []timeline.Entry
	for p, a := range m.author {
		if p < before && m.follows[u][a] {
			out = append(out, timeline.Entry{Post: p, Author: a})
		}
	}
	slices.SortFunc(out, func(x, y timeline.Entry) int { return cmp.Compare(y.Post, x.Post) })
	return out
}

func (m *dbModel) followers(a uint64) []uint64 {
	var out []uint64
	for u, fs := range m.follows {
		if fs[a] {
			out = append(out, u)
		}
	}
	slices.Sort(out)
	return out
}

func (m *dbModel) followees(u uint64) []uint64 {
	return slices.Sorted(maps.Keys(m.follows[u]))
}

func (m *dbModel) postsOf(a uint64) []uint64 {
	var out []uint64
	for p, x := range m.author {
		if x == a {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(x, y uint64) int { return cmp.Compare(y, x) })
	return out
}

// feed is unread's documented formula: Σ over u's followees f of
// max(0, posts(f) − base(u, f)).
func (m *dbModel) feed(u uint64) uint64 {
	var n uint64
	for f := range m.follows[u] {
		if p, b := m.posts[f], m.base[[2]uint64{u, f}]; p > b {
			n += p - b
		}
	}
	return n
}

func (m *dbModel) feedReset(u uint64) {
	for f := range m.follows[u] {
		m.base[[2]uint64{u, f}] = m.posts[f]
	}
}

func (m *dbModel) kindRow(u uint64) []uint64 {
	r := m.counts[u]
	for len(r) < len(m.kinds) {
		r = append(r, 0)
	}
	m.counts[u] = r
	return r
}

// unreadNotices: a user who never read the channel is new and has 0.
func (m *dbModel) unreadNotices(u uint64, ch string) uint64 {
	lr, ok := m.lastRead[ucKey{u, ch}]
	if !ok {
		return 0
	}
	ids := m.notices[ch]
	i, found := slices.BinarySearch(ids, lr)
	if found {
		i++
	}
	return uint64(len(ids) - i)
}

func (m *dbModel) likeCounts(biz string, item uint64) likes.Counts {
	var c likes.Counts
	for k, s := range m.likes {
		if k.biz == biz && k.item == item {
			if s.state == likes.Liked {
				c.Likes++
			} else {
				c.Dislikes++
			}
		}
	}
	return c
}

func (m *dbModel) members(biz string, item uint64, s likes.State) []uint64 {
	var out []uint64
	for k, v := range m.likes {
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

func (m *dbModel) userLikes(biz string, user uint64) []timedItem {
	var out []timedItem
	for k, v := range m.likes {
		if k.biz == biz && k.user == user && v.state == likes.Liked {
			out = append(out, timedItem{v.ms, k.item})
		}
	}
	slices.SortFunc(out, func(x, y timedItem) int {
		return cmp.Or(cmp.Compare(y.ms, x.ms), cmp.Compare(y.item, x.item))
	})
	return out
}

const dayMs = 86_400_000

// board is biz's whole board, ranked: all time (day < 0) or the likes made
// on one UTC day and still standing.
func (m *dbModel) board(biz string, day int64) []likes.Entry {
	score := map[uint64]uint64{}
	for k, v := range m.likes {
		if k.biz == biz && v.state == likes.Liked && (day < 0 || v.ms/dayMs == day) {
			score[k.item]++
		}
	}
	var out []likes.Entry
	for item, s := range score {
		out = append(out, likes.Entry{Item: item, Likes: s})
	}
	slices.SortFunc(out, func(x, y likes.Entry) int {
		return cmp.Or(cmp.Compare(y.Likes, x.Likes), cmp.Compare(x.Item, y.Item))
	})
	for i := range out {
		out[i].Rank = i + 1
		if i > 0 && out[i].Likes == out[i-1].Likes {
			out[i].Rank = out[i-1].Rank
		}
	}
	return out
}

func (m *dbModel) received(owner uint64) uint64 {
	var n uint64
	for bi, o := range m.owner {
		if o == owner {
			n += m.likeCounts(bi.biz, bi.item).Likes
		}
	}
	return n
}

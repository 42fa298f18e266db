package tally_test

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/tallydb/tally"
	"github.com/tallydb/tally/likes"
	"github.com/tallydb/tally/store"
	"github.com/tallydb/tally/timeline"
	"github.com/tallydb/tally/unread"
)

// The host's counters.

func (r *dbRun) counterCreate() {
	name := fmt.Sprintf("c%d", r.rng.IntN(3))
	c := r.m.counters[name]
	if c != nil && r.rng.IntN(3) > 0 && len(c.cols) < 4 {
		col := fmt.Sprintf("k%d", len(c.cols))
		o := store.ColumnOptions{HintBits: []uint8{8, 16, 32}[r.rng.IntN(3)], MaxBits: []uint8{32, 64}[r.rng.IntN(2)]}
		r.what = fmt.Sprintf("add column %s.%s %+v", name, col, o)
		r.must(r.db.Store().AddColumn(name, col, o))
		c.cols = append(c.cols, col)
		c.max = append(c.max, 1<<o.MaxBits-1)
		return
	}
	var o store.CounterOptions
	if r.rng.IntN(2) == 0 {
		o = agingCounter // rows of older ranges go cold on compact and seal
	}
	r.what = fmt.Sprintf("create counter %s %+v", name, o)
	err := r.db.Store().CreateCounter(name, o)
	if c != nil {
		r.wantErr(err, store.ErrExists)
		return
	}
	r.must(err)
	r.m.counterNames = append(r.m.counterNames, name)
	r.m.counters[name] = &counterModel{rows: map[uint64][]uint64{}, aging: o.RangeBits != 0}
}

// agingCounter is the shape of the counters whose rows leave memory:
// narrow ranges of which only the newest stays hot.
var agingCounter = store.CounterOptions{RangeBits: 8, Age: store.AgePolicy{Kind: store.KeepNewest, HotRanges: 1}}

// compact ages every range its policy says is old (the host's aging
// counters and the "video" business's counts) and merges cold deltas.
func (r *dbRun) compact() {
	r.must(r.db.Store().Compact(r.t.Context()))
}

// seal ages one range of an aging counter of the host's now, whatever its
// policy says (the newest range included).
func (r *dbRun) seal() {
	var names []string
	for _, n := range r.m.counterNames {
		if c := r.m.counters[n]; c.aging && len(c.rows) > 0 {
			names = append(names, n)
		}
	}
	name, ok := pick(r.rng, names)
	if !ok {
		return
	}
	id, _ := pick(r.rng, slices.Sorted(maps.Keys(r.m.counters[name].rows)))
	r.what = fmt.Sprintf("seal %s range of %d", name, id)
	r.must(r.db.Store().SealRange(r.t.Context(), name, id>>agingCounter.RangeBits))
}

// someCounter returns a counter of the model with columns and its handle,
// through tally.UserCounter as the tools reach it.
func (r *dbRun) someCounter() (string, *counterModel, *store.Counter) {
	var names []string
	for _, n := range r.m.counterNames {
		if len(r.m.counters[n].cols) > 0 {
			names = append(names, n)
		}
	}
	name, ok := pick(r.rng, names)
	if !ok {
		return "", nil, nil
	}
	c, err := tally.UserCounter(r.db.Store(), name)
	r.must(err)
	return name, r.m.counters[name], c
}

func (c *counterModel) row(id uint64) []uint64 {
	row := c.rows[id]
	for len(row) < len(c.cols) {
		row = append(row, 0)
	}
	return row
}

func (c *counterModel) put(id uint64, row []uint64) {
	if !slices.ContainsFunc(row, func(v uint64) bool { return v != 0 }) {
		delete(c.rows, id)
		return
	}
	c.rows[id] = row
}

// counterID spreads ids over a few ranges, so rows live in several hot
// tables (and 64-bit ids widen the counter's ranges).
func (r *dbRun) counterID() uint64 {
	switch r.rng.IntN(4) {
	case 0:
		return 1 + r.rng.Uint64N(8)
	case 1:
		return 1<<32 + r.rng.Uint64N(8)
	default:
		return 1 + r.rng.Uint64N(40)
	}
}

func (r *dbRun) counterIncr() {
	name, c, h := r.someCounter()
	if h == nil {
		return
	}
	id, ci := r.counterID(), r.rng.IntN(len(c.cols))
	delta := r.rng.Int64N(600) - 200
	if r.rng.IntN(20) == 0 {
		delta = int64(min(c.max[ci], math.MaxInt64)) // past a 32-bit maximum unless the row is 0
	}
	r.what = fmt.Sprintf("incr %s %d %s %d", name, id, c.cols[ci], delta)
	got, err := h.Incr(id, c.cols[ci], delta)
	row := c.row(id)
	v := row[ci]
	switch {
	case delta < 0:
		v -= min(v, uint64(-delta))
	case uint64(delta) > c.max[ci]-v:
		r.wantErr(err, store.ErrValueRange)
		return
	default:
		v += uint64(delta)
	}
	r.must(err)
	row[ci] = v
	c.put(id, row)
	if got != v {
		r.fatalf("incr returned %d, model %d", got, v)
	}
}

func (r *dbRun) counterSet() {
	name, c, h := r.someCounter()
	if h == nil {
		return
	}
	id := r.counterID()
	value := func() uint64 {
		if r.rng.IntN(3) == 0 {
			return 0
		}
		return r.rng.Uint64N(100_000)
	}
	if r.rng.IntN(2) == 0 {
		ci := r.rng.IntN(len(c.cols))
		v := value()
		r.what = fmt.Sprintf("set column %s %d %s %d", name, id, c.cols[ci], v)
		r.must(h.SetColumn(id, c.cols[ci], v))
		row := c.row(id)
		row[ci] = v
		c.put(id, row)
		return
	}
	vs := make([]uint64, len(c.cols))
	for i := range vs {
		vs[i] = value()
	}
	r.what = fmt.Sprintf("set %s %d %v", name, id, vs)
	if r.rng.IntN(10) == 0 {
		r.wantErr(h.Set(id, append(vs, 1)...), store.ErrColumnCount)
		return
	}
	r.must(h.Set(id, vs...))
	c.put(id, vs)
}

func (r *dbRun) counterIncrOnce() {
	name, c, h := r.someCounter()
	if h == nil {
		return
	}
	id, ci := r.counterID(), r.rng.IntN(len(c.cols))
	src := fmt.Sprintf("src%d", r.rng.IntN(2))
	seq := r.m.sources[src] + 1
	if r.rng.IntN(3) == 0 { // a redelivery
		seq = 1 + r.rng.Uint64N(seq)
	}
	delta := 1 + r.rng.Int64N(9)
	r.what = fmt.Sprintf("incr once %s %d %s %d from %s seq %d", name, id, c.cols[ci], delta, src, seq)
	got, applied, err := h.IncrOnce(id, c.cols[ci], delta, src, seq)
	row := c.row(id)
	want := seq > r.m.sources[src]
	if want && uint64(delta) > c.max[ci]-row[ci] { // refused: neither applied nor recorded
		r.wantErr(err, store.ErrValueRange)
		return
	}
	r.must(err)
	if want {
		row[ci] += uint64(delta)
		r.m.sources[src] = seq
		c.put(id, row)
	}
	if applied != want || got != row[ci] {
		r.fatalf("incr once: %d applied %v, model %d applied %v", got, applied, row[ci], want)
	}
}

func (r *dbRun) counterDelete() {
	name, c, h := r.someCounter()
	if h == nil {
		return
	}
	id := r.counterID()
	if len(c.rows) > 0 && r.rng.IntN(2) == 0 {
		id, _ = pick(r.rng, slices.Sorted(maps.Keys(c.rows)))
	}
	r.what = fmt.Sprintf("delete %s %d", name, id)
	r.must(h.Delete(id))
	delete(c.rows, id)
}

// counterLoad bulk-loads rows (store.DB.Load): each replaces its id's row
// like Set, the last row of an id wins, all zeros delete.
func (r *dbRun) counterLoad() {
	name, c, _ := r.someCounter()
	if c == nil {
		return
	}
	in := store.LoadRows{}
	for range 1 + r.rng.IntN(12) {
		in.IDs = append(in.IDs, r.counterID())
		for range c.cols {
			v := uint64(0)
			if r.rng.IntN(3) > 0 {
				v = r.rng.Uint64N(5000)
			}
			in.Vals = append(in.Vals, v)
		}
	}
	r.what = fmt.Sprintf("load %s %v %v", name, in.IDs, in.Vals)
	_, err := r.db.Store().Load(r.t.Context(), name, in, nil)
	r.must(err)
	n := len(c.cols)
	for i, id := range in.IDs {
		c.put(id, slices.Clone(in.Vals[i*n:(i+1)*n]))
	}
}

func (r *dbRun) counterGet() {
	name, c, h := r.someCounter()
	if h == nil {
		return
	}
	ids := []uint64{r.counterID(), r.counterID()}
	ids = append(ids, slices.Sorted(maps.Keys(c.rows))...)
	r.what = fmt.Sprintf("get %s %v", name, ids)
	if got := h.Columns(); !slices.Equal(got, c.cols) {
		r.fatalf("columns %v, model %v", got, c.cols)
	}
	for _, id := range ids {
		got, err := h.Get(id, nil)
		r.must(err)
		if want := c.row(id); !slices.Equal(got, want) {
			r.fatalf("%s row %d = %v, model %v", name, id, got, want)
		}
	}
	vs, err := h.MultiGet(ids, nil)
	r.must(err)
	for i, id := range ids {
		if got, want := vs[i*len(c.cols):(i+1)*len(c.cols)], c.row(id); !slices.Equal(got, want) {
			r.fatalf("multiget %s row %d = %v, model %v", name, id, got, want)
		}
	}
}

// counterNames: the host sees its own counters only, and the packages'
// are refused by name.
func (r *dbRun) counterNames() {
	var got []string
	for _, ci := range tally.UserCounters(r.db.Store()) {
		got = append(got, ci.Name)
	}
	if !slices.Equal(got, r.m.counterNames) {
		r.fatalf("user counters %v, model %v", got, r.m.counterNames)
	}
	for _, name := range []string{timeline.UsersCounter, unread.KindsCounter, unread.FeedCounter, likes.CounterName("video"), likes.ReceivedCounter, "likes_nobiz"} {
		if _, err := tally.UserCounter(r.db.Store(), name); !errors.Is(err, store.ErrReserved) {
			r.fatalf("user counter %q: %v, want ErrReserved", name, err)
		}
	}
}

// Timeline.

func (r *dbRun) follow() {
	tl, u := r.db.Timeline(), r.user()
	fs := make([]uint64, 1+r.rng.IntN(3))
	for i := range fs {
		fs[i] = r.user()
	}
	self := slices.Contains(fs, u)
	if len(fs) == 1 && r.rng.IntN(2) == 0 {
		r.what = fmt.Sprintf("follow %d %d", u, fs[0])
		ch, err := tl.Follow(u, fs[0])
		if self {
			r.wantErr(err, timeline.ErrSelfFollow)
			return
		}
		r.must(err)
		if want := r.m.follow(u, fs[0]); ch != want {
			r.fatalf("changed %v, model %v", ch, want)
		}
		return
	}
	r.what = fmt.Sprintf("follow many %d %v", u, fs)
	n, err := tl.FollowMany(u, fs...)
	if self { // refused whole
		r.wantErr(err, timeline.ErrSelfFollow)
		return
	}
	r.must(err)
	want := 0
	for _, f := range fs {
		if r.m.follow(u, f) {
			want++
		}
	}
	if n != want {
		r.fatalf("%d new follows, model %d", n, want)
	}
}

func (r *dbRun) unfollow() {
	tl, u := r.db.Timeline(), r.user()
	fs := []uint64{r.user()}
	if fe := r.m.followees(u); len(fe) > 0 && r.rng.IntN(3) > 0 {
		fs[0], _ = pick(r.rng, fe)
	}
	if r.rng.IntN(3) == 0 {
		fs = append(fs, r.user())
	}
	self := slices.Contains(fs, u)
	r.what = fmt.Sprintf("unfollow %d %v", u, fs)
	var n int
	var err error
	if len(fs) == 1 {
		var ch bool
		ch, err = tl.Unfollow(u, fs[0])
		if ch {
			n = 1
		}
	} else {
		n, err = tl.UnfollowMany(u, fs...)
	}
	if self {
		r.wantErr(err, timeline.ErrSelfFollow)
		return
	}
	r.must(err)
	want := 0
	for _, f := range fs {
		if r.m.unfollow(u, f) {
			want++
		}
	}
	if n != want {
		r.fatalf("%d follows removed, model %d", n, want)
	}
}

// loadFollows bulk-loads a few edges (LoadFollows): unread's observer
// sees each new one, so feed bases start at the load.
func (r *dbRun) loadFollows() {
	edges := make([]timeline.Edge, 1+r.rng.IntN(8))
	self := false
	for i := range edges {
		edges[i] = timeline.Edge{Follower: r.user(), Followee: r.user()}
		self = self || edges[i].Follower == edges[i].Followee
	}
	r.what = fmt.Sprintf("load follows %v", edges)
	st, err := r.db.Timeline().LoadFollows(r.t.Context(), edges, nil)
	if self { // refused whole
		r.wantErr(err, timeline.ErrSelfFollow)
		return
	}
	r.must(err)
	added := 0
	for _, e := range edges {
		if r.m.follow(e.Follower, e.Followee) {
			added++
		}
	}
	if st.Added != added || st.Edges != len(edges) {
		r.fatalf("load stats %+v, model added %d", st, added)
	}
}

// postID returns a new post id, a backdated unused one, or one published
// before (by anyone: a retry, or another author's id).
func (r *dbRun) postID() uint64 {
	switch k := r.rng.IntN(20); {
	case k < 2 && len(r.m.owned) > 0:
		p, _ := pick(r.rng, slices.Sorted(maps.Keys(r.m.owned)))
		return p
	case k < 4:
		return 1 + r.rng.Uint64N(r.nextPost)
	}
	r.nextPost += 1 + r.rng.Uint64N(3)
	return r.nextPost
}

func (r *dbRun) publish() {
	tl, a := r.db.Timeline(), r.user()
	ps := []uint64{r.postID()}
	if r.rng.IntN(4) == 0 {
		ps = append(ps, r.postID(), r.postID())
	}
	r.what = fmt.Sprintf("publish %d %v", a, ps)
	taken := false
	for _, p := range ps {
		if o, ok := r.m.owned[p]; ok && o != a {
			taken = true
		}
	}
	res, err := tl.PublishMany(a, ps...)
	if taken { // refused whole
		r.wantErr(err, timeline.ErrPostTaken)
		return
	}
	r.must(err)
	seen := map[uint64]bool{}
	for i, p := range ps {
		dup := seen[p] || r.m.author[p] == a
		seen[p] = true
		if res[i].Duplicate != dup {
			r.fatalf("post %d: duplicate %v, model %v", p, res[i].Duplicate, dup)
		}
		if !dup {
			r.m.publish(a, p)
		}
		// Sometimes wait for the fan-out, as a caller that wants its
		// followers' inboxes written before it answers does.
		if res[i].Job != 0 && r.rng.IntN(3) == 0 {
			r.must(r.db.Store().WaitJob(r.t.Context(), res[i].Job))
		}
	}
}

func (r *dbRun) unpublish() {
	tl := r.db.Timeline()
	var a, p uint64
	if ps := slices.Sorted(maps.Keys(r.m.owned)); len(ps) > 0 && r.rng.IntN(5) > 0 {
		p, _ = pick(r.rng, ps)
		a = r.m.owned[p]
		if r.rng.IntN(8) == 0 {
			a = r.user()
		}
	} else {
		a, p = r.user(), 1+r.rng.Uint64N(r.nextPost+1)
	}
	ps := []uint64{p}
	if r.rng.IntN(4) == 0 {
		if mine := r.m.postsOf(a); len(mine) > 0 {
			q, _ := pick(r.rng, mine)
			ps = append(ps, q)
		}
	}
	r.what = fmt.Sprintf("unpublish %d %v", a, ps)
	taken := false
	for _, p := range ps {
		if o, ok := r.m.owned[p]; ok && o != a {
			taken = true
		}
	}
	res, err := tl.UnpublishMany(a, ps...)
	if taken {
		r.wantErr(err, timeline.ErrPostTaken)
		return
	}
	r.must(err)
	for i, p := range ps {
		want := r.m.author[p] == a
		if want {
			r.m.unpublish(p)
		}
		if res[i].Removed != want {
			r.fatalf("post %d: removed %v, model %v", p, res[i].Removed, want)
		}
	}
}

// inFlight reports whether post's fan-out has not finished: the one
// reason the timeline docs give for a followed post to be missing from a
// page read from an inbox.
func (r *dbRun) inFlight(post uint64) bool {
	info, ok, err := r.db.Timeline().Post(post)
	r.must(err)
	return ok && !info.FannedOut
}

// comparePage checks a page of u's home read below before against the
// model, allowing only posts whose fan-out is in flight to be missing.
func (r *dbRun) comparePage(u, before uint64, p timeline.Page, limit int) {
	r.t.Helper()
	want := r.m.home(u, before)
	got := p.Entries
	gi := 0
	for wi := 0; wi < len(want) && gi < len(got); wi++ {
		if want[wi] == got[gi] {
			gi++
			continue
		}
		r.seen["followed post missing while its fan-out is in flight"]++
		if !r.inFlight(want[wi].Post) {
			r.fatalf("home %d below %d (limit %d): got %v, model %v: missing %v", u, before, limit, got, want, want[wi])
		}
	}
	if gi != len(got) {
		r.fatalf("home %d below %d (limit %d): got %v, model %v: %v is not in the model", u, before, limit, got, want, got[gi])
	}
	if !p.NoMore {
		if len(got) != limit || p.Cursor == "" {
			r.fatalf("home %d: page of %d (limit %d) without NoMore, cursor %q", u, len(got), limit, p.Cursor)
		}
		return
	}
	if p.Cursor != "" {
		r.fatalf("home %d: NoMore with a cursor", u)
	}
	last := before
	if len(got) > 0 {
		last = got[len(got)-1].Post
	}
	for _, w := range want {
		if w.Post < last && !r.inFlight(w.Post) {
			r.fatalf("home %d ended at %d (NoMore), model has %v", u, last, w)
		}
	}
}

const endOfIDs = ^uint64(0)

func (r *dbRun) home() {
	u, limit := r.user(), 1+r.rng.IntN(5)
	r.what = fmt.Sprintf("home %d limit %d", u, limit)
	p, err := r.db.Timeline().Home(u, "", limit)
	r.must(err)
	r.comparePage(u, endOfIDs, p, limit)
	if !p.NoMore {
		r.cursors[u] = homeCursor{p.Cursor, p.Entries[len(p.Entries)-1].Post, limit}
	}
}

// homeContinued continues a page read at an earlier step, after whatever
// happened since (reopens and crashes included): the entries below the
// cursor, none skipped.
func (r *dbRun) homeContinued() {
	u, ok := pick(r.rng, slices.Sorted(maps.Keys(r.cursors)))
	if !ok {
		return
	}
	c := r.cursors[u]
	delete(r.cursors, u)
	r.what = fmt.Sprintf("home %d after %d limit %d", u, c.after, c.limit)
	p, err := r.db.Timeline().Home(u, c.cursor, c.limit)
	r.must(err)
	r.comparePage(u, c.after, p, c.limit)
	if !p.NoMore {
		r.cursors[u] = homeCursor{p.Cursor, p.Entries[len(p.Entries)-1].Post, c.limit}
	}
}

// exactHome reads u's whole home in pages: with no job queued it must be
// the model's, exactly.
func (r *dbRun) exactHome(u uint64) {
	r.t.Helper()
	limit := 1 + r.rng.IntN(4)
	var got []timeline.Entry
	cursor := ""
	for {
		p, err := r.db.Timeline().Home(u, cursor, limit)
		r.must(err)
		got = append(got, p.Entries...)
		if p.NoMore {
			break
		}
		if len(p.Entries) != limit || p.Cursor == "" {
			r.fatalf("home %d: page of %d (limit %d) without NoMore", u, len(p.Entries), limit)
		}
		cursor = p.Cursor
	}
	if want := r.m.home(u, endOfIDs); !slices.Equal(got, want) {
		r.fatalf("home %d (limit %d, no job queued) = %v, model %v", u, limit, got, want)
	}
}

// idPages reads a whole id list by pages of random sizes.
func (r *dbRun) idPages(what string, page func(cursor string, limit int) (timeline.IDPage, error)) []uint64 {
	var all []uint64
	cursor := ""
	for {
		limit := 1 + r.rng.IntN(4)
		p, err := page(cursor, limit)
		r.must(err)
		if len(p.IDs) > limit || !p.NoMore && len(p.IDs) != limit {
			r.fatalf("%s: page of %d for limit %d, NoMore %v", what, len(p.IDs), limit, p.NoMore)
		}
		all = append(all, p.IDs...)
		if p.NoMore {
			return all
		}
		cursor = p.Cursor
	}
}

func (r *dbRun) graphLists() {
	tl, u := r.db.Timeline(), r.user()
	r.what = fmt.Sprintf("graph lists of %d", u)
	r.compareUserGraph(tl, u)
}

func (r *dbRun) compareUserGraph(tl *timeline.Timeline, u uint64) {
	r.t.Helper()
	info, err := tl.User(u)
	r.must(err)
	followers, followees, posts := r.m.followers(u), r.m.followees(u), r.m.postsOf(u)
	if info.Posts != uint64(len(posts)) || info.Followers != uint64(len(followers)) || info.Followees != uint64(len(followees)) {
		r.fatalf("user %d %+v, model posts %v followers %v followees %v", u, info, posts, followers, followees)
	}
	// Followers page in ordinal order: compare as sets.
	got := r.idPages("followers", func(c string, n int) (timeline.IDPage, error) { return tl.FollowersPage(u, c, n) })
	if slices.Sort(got); !slices.Equal(got, followers) && len(got)+len(followers) > 0 {
		r.fatalf("followers of %d: %v, model %v", u, got, followers)
	}
	got = r.idPages("followees", func(c string, n int) (timeline.IDPage, error) { return tl.FolloweesPage(u, c, n) })
	if !slices.Equal(got, followees) && len(got)+len(followees) > 0 {
		r.fatalf("followees of %d: %v, model %v", u, got, followees)
	}
	got = r.idPages("posts", func(c string, n int) (timeline.IDPage, error) { return tl.PostsPage(u, c, n) })
	if !slices.Equal(got, posts) && len(got)+len(posts) > 0 {
		r.fatalf("posts of %d: %v, model %v", u, got, posts)
	}
	for f := uint64(1); f <= modelUsers; f++ {
		if f == u {
			continue
		}
		ok, err := tl.IsFollowing(u, f)
		r.must(err)
		if ok != r.m.follows[u][f] {
			r.fatalf("is %d following %d: %v, model %v", u, f, ok, r.m.follows[u][f])
		}
	}
}

func (r *dbRun) markActive() {
	if r.rng.IntN(3) == 0 {
		us := []uint64{r.user(), r.user(), r.user()}
		r.what = fmt.Sprintf("mark active %v", us)
		_, err := r.db.Timeline().MarkActiveMany(r.t.Context(), us)
		r.must(err)
		return
	}
	u := r.user()
	r.what = fmt.Sprintf("mark active %d", u)
	_, err := r.db.Timeline().MarkActive(u)
	r.must(err)
}

func (r *dbRun) expire() {
	_, err := r.db.Timeline().Expire(r.t.Context())
	r.must(err)
}

// Unread.

func (r *dbRun) kindIncr() {
	x, u := r.db.Unread(), r.user()
	ki := r.rng.IntN(len(r.m.kinds))
	n := r.rng.Int64N(12) - 4
	if r.rng.IntN(40) == 0 {
		n = 1 << 32 // past a kind's default maximum of 2^32-1
	}
	r.what = fmt.Sprintf("unread incr %d %s %d", u, r.m.kinds[ki], n)
	got, err := x.Incr(u, r.m.kinds[ki], n)
	row := r.m.kindRow(u)
	if n > 0 && uint64(n) > 1<<32-1-row[ki] {
		r.wantErr(err, store.ErrValueRange)
		return
	}
	r.must(err)
	row[ki] = uint64(max(0, int64(row[ki])+n))
	if got != row[ki] {
		r.fatalf("count %d, model %d", got, row[ki])
	}
	if r.rng.IntN(10) == 0 {
		_, err := x.Incr(u, "nokind", 1)
		r.wantErr(err, unread.ErrUnknownKind)
	}
}

func (r *dbRun) kindReset() {
	x, u := r.db.Unread(), r.user()
	if len(r.m.kinds) < 4 && r.rng.IntN(6) == 0 {
		k := fmt.Sprintf("kind%d", len(r.m.kinds))
		r.what = "add kind " + k
		r.must(x.AddKind(k, store.ColumnOptions{}))
		r.m.kinds = append(r.m.kinds, k)
		return
	}
	var ks []string
	for _, k := range r.m.kinds {
		if r.rng.IntN(2) == 0 {
			ks = append(ks, k)
		}
	}
	r.what = fmt.Sprintf("unread reset %d %v", u, ks)
	r.must(x.Reset(u, ks...))
	row := r.m.kindRow(u)
	for i, k := range r.m.kinds {
		if len(ks) == 0 || slices.Contains(ks, k) {
			row[i] = 0
		}
	}
}

func (r *dbRun) kindGet() {
	x := r.db.Unread()
	if got := x.Kinds(); !slices.Equal(got, r.m.kinds) {
		r.fatalf("kinds %v, model %v", got, r.m.kinds)
	}
	users := []uint64{r.user(), r.user(), r.user()}
	r.what = fmt.Sprintf("unread get %v", users)
	got, err := x.GetMany(users, nil)
	r.must(err)
	k := len(r.m.kinds)
	for i, u := range users {
		if want := r.m.kindRow(u); !slices.Equal(got[i*k:(i+1)*k], want) {
			r.fatalf("counts of %d: %v, model %v", u, got[i*k:(i+1)*k], want)
		}
		one, err := x.Get(u, nil)
		r.must(err)
		if want := r.m.kindRow(u); !slices.Equal(one, want) {
			r.fatalf("get %d: %v, model %v", u, one, want)
		}
	}
}

// channel returns a channel, now and then one nobody declares.
func (r *dbRun) channel() string {
	if r.rng.IntN(10) == 0 {
		return "ghost"
	}
	c, _ := pick(r.rng, modelChannels)
	return c
}

func (r *dbRun) dot() {
	x, u, ch := r.db.Unread(), r.user(), r.channel()
	_, declared := r.m.chanTag[ch]
	switch r.rng.IntN(4) {
	case 0:
		if ch == "ghost" {
			return // writing declares a channel; keep one undeclared
		}
		r.what = "mark " + ch
		tag, err := x.Mark(ch)
		r.must(err)
		r.m.chanTag[ch]++
		if tag != r.m.chanTag[ch] {
			r.fatalf("tag %d, model %d", tag, r.m.chanTag[ch])
		}
	case 1:
		r.what = fmt.Sprintf("clear %d %s", u, ch)
		err := x.Clear(u, ch)
		if !declared {
			r.wantErr(err, unread.ErrUnknownChannel)
			return
		}
		r.must(err)
		r.m.dotTag[ucKey{u, ch}] = r.m.chanTag[ch]
	default:
		r.what = fmt.Sprintf("has %d %s", u, ch)
		got, err := x.Has(u, ch)
		r.must(err)
		// A user who never cleared has a tag older than every mark; an
		// undeclared channel has no dot.
		if want := r.m.dotTag[ucKey{u, ch}] < r.m.chanTag[ch]; got != want {
			r.fatalf("has %v, model %v", got, want)
		}
	}
}

func (r *dbRun) notice() {
	x, u, ch := r.db.Unread(), r.user(), r.channel()
	_, declared := r.m.chanTag[ch]
	switch r.rng.IntN(6) {
	case 0, 1:
		if ch == "ghost" {
			return
		}
		id := 1 + r.rng.Uint64N(60)
		r.what = fmt.Sprintf("post notice %s %d", ch, id)
		posted, err := x.Post(ch, id)
		r.must(err)
		if !declared {
			r.m.chanTag[ch] = 0
		}
		i, found := slices.BinarySearch(r.m.notices[ch], id)
		if posted == found {
			r.fatalf("posted %v, model had it %v", posted, found)
		}
		if !found {
			r.m.notices[ch] = slices.Insert(r.m.notices[ch], i, id)
		}
	case 2:
		r.what = fmt.Sprintf("read %d %s", u, ch)
		err := x.Read(u, ch)
		if !declared {
			r.wantErr(err, unread.ErrUnknownChannel)
			return
		}
		r.must(err)
		var last uint64
		if ns := r.m.notices[ch]; len(ns) > 0 {
			last = ns[len(ns)-1]
		}
		r.m.lastRead[ucKey{u, ch}] = last
	case 3:
		if r.rng.IntN(4) > 0 {
			return
		}
		users := []uint64{u}
		if r.rng.IntN(2) == 0 {
			users = append(users, r.user())
		}
		r.what = fmt.Sprintf("forget tags %v", users)
		r.must(x.ForgetTags(users...))
		for _, v := range users {
			for _, c := range append(slices.Clone(modelChannels), "ghost") {
				delete(r.m.dotTag, ucKey{v, c})
				delete(r.m.lastRead, ucKey{v, c})
			}
		}
	default:
		r.what = fmt.Sprintf("unread %d %s", u, ch)
		got, err := x.Unread(u, ch)
		r.must(err)
		if want := r.m.unreadNotices(u, ch); got != want {
			r.fatalf("unread %d, model %d", got, want)
		}
	}
}

func (r *dbRun) feed() {
	u := r.user()
	r.what = fmt.Sprintf("feed %d", u)
	got, err := r.db.Unread().Feed(u)
	r.must(err)
	if want := r.m.feed(u); got != want {
		r.fatalf("feed %d, model %d (followees %v, posts %v)", got, want, r.m.followees(u), r.m.posts)
	}
}

func (r *dbRun) feedReset() {
	u := r.user()
	r.what = fmt.Sprintf("feed reset %d", u)
	r.must(r.db.Unread().FeedReset(u))
	r.m.feedReset(u)
}

// Likes.

// likeItem returns a post id as the item (popular ones more often, so some
// sets pass the roaring threshold), now and then an id nobody published.
func (r *dbRun) likeItem() uint64 {
	ps := slices.Sorted(maps.Keys(r.m.owned))
	if len(ps) == 0 || r.rng.IntN(8) == 0 {
		return 1 + r.rng.Uint64N(r.nextPost+1)
	}
	if r.rng.IntN(3) == 0 {
		return ps[r.rng.IntN(min(3, len(ps)))]
	}
	p, _ := pick(r.rng, ps)
	return p
}

// likeUser draws from more users than the graph has, so popular items'
// sets pass likes.MinRoaringThreshold.
func (r *dbRun) likeUser() uint64 { return 1 + r.rng.Uint64N(3*modelUsers) }

// likeOwner is mostly the post's author, sometimes nobody, sometimes
// someone else (a mismatch once the item has an owner).
func (r *dbRun) likeOwner(item uint64) uint64 {
	switch r.rng.IntN(8) {
	case 0:
		return 0
	case 1:
		return r.user()
	}
	if a, ok := r.m.owned[item]; ok {
		return a
	}
	return 1 + item%modelUsers
}

// likeBurst: a post goes viral, liked (or disliked) by many users at
// once, so its sets pass likes.MinRoaringThreshold and convert.
func (r *dbRun) likeBurst() {
	biz, _ := pick(r.rng, modelBizs)
	item, n := r.likeItem(), 8+r.rng.IntN(16)
	if ps := slices.Sorted(maps.Keys(r.m.owned)); len(ps) > 0 {
		item = ps[r.rng.IntN(min(2, len(ps)))]
	}
	r.what = fmt.Sprintf("like burst %s %d by %d users", biz, item, n)
	for range n {
		r.transition(biz, item, r.likeUser(), []int{0, 0, 0, 4}[r.rng.IntN(4)])
	}
}

func (r *dbRun) likeTransition() {
	biz, _ := pick(r.rng, modelBizs)
	r.transition(biz, r.likeItem(), r.likeUser(), r.rng.IntN(6))
}

// transition runs one of like (op 0-2), unlike (3), dislike (4) and
// undislike (5) and compares its result with the model's.
func (r *dbRun) transition(biz string, item, user uint64, op int) {
	l := r.db.Likes()
	k, bi := likeKey{biz, item, user}, bizItem{biz, item}
	old := r.m.likes[k]
	nw := old
	ms := r.clock.Now().UnixMilli()
	var got likes.Result
	var err error
	switch op {
	case 0, 1, 2:
		owner := r.likeOwner(item)
		r.what = fmt.Sprintf("like %s %d by %d owner %d", biz, item, user, owner)
		got, err = l.Like(biz, item, user, owner)
		if o := r.m.owner[bi]; owner != 0 && o != 0 && o != owner {
			r.wantErr(err, likes.ErrOwnerMismatch)
			return
		}
		if owner != 0 {
			r.m.owner[bi] = owner
		}
		if old.state != likes.Liked {
			nw = likeRec{likes.Liked, ms}
		}
	case 3:
		r.what = fmt.Sprintf("unlike %s %d by %d", biz, item, user)
		got, err = l.Unlike(biz, item, user)
		if old.state == likes.Liked {
			nw = likeRec{}
		}
	case 4:
		r.what = fmt.Sprintf("dislike %s %d by %d", biz, item, user)
		got, err = l.Dislike(biz, item, user)
		if old.state != likes.Disliked {
			nw = likeRec{likes.Disliked, ms}
		}
	default:
		r.what = fmt.Sprintf("undislike %s %d by %d", biz, item, user)
		got, err = l.Undislike(biz, item, user)
		if old.state == likes.Disliked {
			nw = likeRec{}
		}
	}
	r.must(err)
	if nw.state == likes.None {
		delete(r.m.likes, k)
	} else {
		r.m.likes[k] = nw
	}
	c := r.m.likeCounts(biz, item)
	want := likes.Result{Item: item, State: nw.state, Changed: nw != old, Likes: c.Likes, Dislikes: c.Dislikes}
	if got != want {
		r.fatalf("result %+v, model %+v", got, want)
	}
}

func (r *dbRun) likeSetOwner() {
	biz, _ := pick(r.rng, modelBizs)
	item := r.likeItem()
	owner := r.likeOwner(item)
	bi := bizItem{biz, item}
	r.what = fmt.Sprintf("set owner %s %d %d", biz, item, owner)
	got, err := r.db.Likes().SetOwner(biz, item, owner)
	r.must(err)
	changed := r.m.owner[bi] != owner
	if owner == 0 {
		delete(r.m.owner, bi)
	} else {
		r.m.owner[bi] = owner
	}
	c := r.m.likeCounts(biz, item)
	if got.Changed != changed || got.Likes != c.Likes || got.Dislikes != c.Dislikes {
		r.fatalf("result %+v, model changed %v counts %+v", got, changed, c)
	}
	if o, err := r.db.Likes().Owner(biz, item); err != nil || o != owner {
		r.fatalf("owner %d %v, model %d", o, err, owner)
	}
}

// likesLoad bulk-loads historical likes (likes.Load): each is a Like
// without owner at its own time, and a repeated pair keeps the first.
func (r *dbRun) likesLoad() {
	biz, _ := pick(r.rng, modelBizs)
	now := r.clock.Now().UnixMilli()
	in := make([]likes.LoadLike, 1+r.rng.IntN(30))
	for i := range in {
		in[i] = likes.LoadLike{Item: r.likeItem(), User: r.likeUser()}
		if r.rng.IntN(4) > 0 {
			in[i].Ms = now - r.rng.Int64N((modelBoards+1)*dayMs)
		}
	}
	r.what = fmt.Sprintf("likes load %s %v", biz, in)
	st, err := r.db.Likes().Load(r.t.Context(), biz, in, nil)
	r.must(err)
	changed := 0
	for _, lk := range in {
		k := likeKey{biz, lk.Item, lk.User}
		if r.m.likes[k].state == likes.Liked {
			continue
		}
		changed++
		r.m.likes[k] = likeRec{likes.Liked, cmp.Or(lk.Ms, now)}
	}
	if st.Added+st.Replaced != changed || st.Input != len(in) {
		r.fatalf("load stats %+v, model changed %d", st, changed)
	}
}

// likeUndeclared: a business given by a typo is refused and created by
// nothing, and reads of it answer nothing.
func (r *dbRun) likeUndeclared() {
	l := r.db.Likes()
	r.what = "like in an undeclared business"
	_, err := l.Like("vidoe", 1000, 1, 2)
	r.wantErr(err, likes.ErrUnknownBusiness)
	_, err = l.Dislike("vidoe", 1000, 1)
	r.wantErr(err, likes.ErrUnknownBusiness)
	c, err := l.Counts("vidoe", []uint64{1000}, nil)
	r.must(err)
	if c[0] != (likes.Counts{}) {
		r.fatalf("counts of an undeclared business: %+v", c)
	}
	if got := l.Businesses(); !slices.Equal(got, slices.Sorted(slices.Values(modelBizs))) {
		r.fatalf("businesses %v, model %v", got, modelBizs)
	}
}

// likeItems are the items the model knows of in biz, plus two nobody
// touched, in a random order.
func (r *dbRun) likeItems(biz string) []uint64 {
	set := map[uint64]bool{r.likeItem(): true, r.nextPost + 7: true}
	for k := range r.m.likes {
		if k.biz == biz {
			set[k.item] = true
		}
	}
	items := slices.Sorted(maps.Keys(set))
	r.rng.Shuffle(len(items), func(i, j int) { items[i], items[j] = items[j], items[i] })
	return items[:min(len(items), likes.MaxStates)]
}

func (r *dbRun) likeReads() {
	biz, _ := pick(r.rng, modelBizs)
	switch r.rng.IntN(6) {
	case 0:
		r.what = "like counts " + biz
		r.compareLikeCounts(biz)
	case 1:
		u := r.likeUser()
		r.what = fmt.Sprintf("like states %s %d", biz, u)
		r.compareStates(biz, u)
	case 2:
		item := r.likeItem()
		r.what = fmt.Sprintf("likers %s %d", biz, item)
		r.compareMembers(biz, item)
	case 3:
		u := r.likeUser()
		r.what = fmt.Sprintf("user likes %s %d", biz, u)
		r.compareUserLikes(biz, u)
	case 4:
		r.what = "like boards " + biz
		r.compareBoards(biz)
	default:
		r.what = "received"
		r.compareReceived()
	}
}

func (r *dbRun) compareLikeCounts(biz string) {
	items := r.likeItems(biz)
	got, err := r.db.Likes().Counts(biz, items, nil)
	r.must(err)
	for i, item := range items {
		if want := r.m.likeCounts(biz, item); got[i] != want {
			r.fatalf("counts %s %d: %+v, model %+v", biz, item, got[i], want)
		}
	}
}

func (r *dbRun) compareStates(biz string, u uint64) {
	items := r.likeItems(biz)
	got, err := r.db.Likes().States(biz, u, items, nil)
	r.must(err)
	for i, item := range items {
		if want := r.m.likes[likeKey{biz, item, u}].state; got[i] != want {
			r.fatalf("state of %d on %s %d: %s, model %s", u, biz, item, got[i], want)
		}
	}
}

func (r *dbRun) compareMembers(biz string, item uint64) {
	l := r.db.Likes()
	for _, s := range []likes.State{likes.Liked, likes.Disliked} {
		var got []uint64
		cursor := ""
		for {
			limit := 1 + r.rng.IntN(7)
			var p likes.Page
			var err error
			if s == likes.Liked {
				p, err = l.Likers(biz, item, cursor, limit)
			} else {
				p, err = l.Dislikers(biz, item, cursor, limit)
			}
			r.must(err)
			if len(p.IDs) > limit || p.Next != "" && len(p.IDs) != limit {
				r.fatalf("%s of %s %d: page of %d for limit %d, next %q", s, biz, item, len(p.IDs), limit, p.Next)
			}
			got = append(got, p.IDs...)
			if p.Next == "" {
				break
			}
			cursor = p.Next
		}
		// Roaring sets list in ordinal order: compare as sets.
		slices.Sort(got)
		if want := r.m.members(biz, item, s); !slices.Equal(got, want) {
			r.fatalf("%s of %s %d: %v, model %v", s, biz, item, got, want)
		}
	}
}

func (r *dbRun) compareUserLikes(biz string, u uint64) {
	var got []timedItem
	cursor := ""
	for {
		p, err := r.db.Likes().UserLikes(biz, u, cursor, 1+r.rng.IntN(6))
		r.must(err)
		for i := range p.IDs {
			got = append(got, timedItem{p.Times[i], p.IDs[i]})
		}
		if p.Next == "" {
			break
		}
		cursor = p.Next
	}
	if want := r.m.userLikes(biz, u); !slices.Equal(got, want) {
		r.fatalf("likes of %d in %s: %v, model %v", u, biz, got, want)
	}
}

func (r *dbRun) compareBoards(biz string) {
	l := r.db.Likes()
	n := 1 + r.rng.IntN(12)
	top := func(what string, got []likes.Entry, err error, want []likes.Entry) {
		r.t.Helper()
		r.must(err)
		if !slices.Equal(got, want[:min(n, len(want))]) {
			r.fatalf("%s top %d: %v, model %v", what, n, got, want)
		}
	}
	all := r.m.board(biz, -1)
	got, err := l.Top(biz, n)
	top("all time", got, err, all)
	items := r.likeItems(biz)
	for _, item := range items[:min(6, len(items))] {
		e, ok, err := l.Rank(biz, item)
		r.must(err)
		i := slices.IndexFunc(all, func(e likes.Entry) bool { return e.Item == item })
		if ok != (i >= 0) || ok && e != all[i] {
			r.fatalf("rank of %s %d: %+v %v, model index %d of %v", biz, item, e, ok, i, all)
		}
	}
	now := r.clock.Now()
	today := now.UnixMilli() / dayMs
	for d := today - modelBoards + 1; d <= today; d++ {
		day := time.UnixMilli(d*dayMs + 3_600_000).UTC()
		want := r.m.board(biz, d)
		got, err := l.TopDay(biz, day, n)
		top(fmt.Sprintf("day %d", d), got, err, want)
		for _, w := range want[:min(3, len(want))] {
			e, ok, err := l.RankDay(biz, day, w.Item)
			if err != nil || !ok || e != w {
				r.fatalf("rank on day %d of %s %d: %+v %v %v, model %+v", d, biz, w.Item, e, ok, err, w)
			}
		}
	}
	old := time.UnixMilli((today - modelBoards) * dayMs).UTC()
	if _, err := l.TopDay(biz, old, n); !errors.Is(err, likes.ErrDayNotKept) {
		r.fatalf("top of a day not kept: %v", err)
	}
}

func (r *dbRun) compareReceived() {
	for o := uint64(1); o <= modelUsers+1; o++ {
		got, err := r.db.Likes().Received(o)
		r.must(err)
		if want := r.m.received(o); got != want {
			r.fatalf("received by %d: %d, model %d", o, got, want)
		}
	}
}

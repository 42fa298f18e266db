package likes

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tallydb/tally/store"
)

// fingerprint hashes every key and value of the package's families and the
// counts of items 0..63 of every business: what "nothing changed" compares.
func fingerprint(t *testing.T, l *Likes) string {
	t.Helper()
	h := sha256.New()
	for _, f := range []*store.Family{l.fam.meta, l.fam.state, l.fam.item, l.fam.set, l.fam.bitmap, l.fam.user,
		l.fam.board, l.fam.dayScore, l.fam.hist, l.fam.ord, l.fam.ordRev} {
		it, err := f.NewIter(nil)
		if err != nil {
			t.Fatal(err)
		}
		for it.Next() {
			h.Write(it.Key())
			h.Write(it.Value())
		}
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
	}
	items := make([]uint64, 64)
	for i := range items {
		items[i] = uint64(i)
	}
	for _, biz := range l.Businesses() {
		c, err := l.Counts(biz, items, nil)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprint(h, biz, c)
	}
	fmt.Fprint(h, l.Businesses(), len(l.db.Counters()))
	return fmt.Sprintf("%x", h.Sum(nil))
}

func TestBadInput(t *testing.T) {
	e := newEnv(t, &Options{RoaringThreshold: MinRoaringThreshold})
	l := e.l
	for u := range uint64(20) {
		must[Result](t)(l.Like("video", 1, u, 9))
	}
	must[Result](t)(l.Dislike("video", 2, 3))
	list := must[Page](t)(l.Likers("video", 1, "", 2))
	users := must[Page](t)(l.UserLikes("video", 3, "", 1))
	must[Result](t)(l.Like("video", 3, 3, 0))
	users = must[Page](t)(l.UserLikes("video", 3, "", 1))
	if list.Next == "" || users.Next == "" {
		t.Fatal("want next cursors")
	}
	before := fingerprint(t, l)
	long := strings.Repeat("b", MaxBusinessLen+1)
	flip := []byte(list.Next)
	flip[10] ^= 1
	if flip[10] == list.Next[10] || !strings.ContainsRune("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", rune(flip[10])) {
		flip[10] = 'A' + (list.Next[10]+1)%26
	}
	cases := []struct {
		name string
		do   func() error
		want error
	}{
		{"like empty business", func() error { _, err := l.Like("", 1, 1, 0); return err }, ErrInvalidBusiness},
		{"like long business", func() error { _, err := l.Like(long, 1, 1, 0); return err }, ErrInvalidBusiness},
		{"like business with space", func() error { _, err := l.Like("a b", 1, 1, 0); return err }, ErrInvalidBusiness},
		{"dislike business with dash", func() error { _, err := l.Dislike("-x", 1, 1); return err }, ErrInvalidBusiness},
		{"unlike bad business", func() error { _, err := l.Unlike("é", 1, 1); return err }, ErrInvalidBusiness},
		{"undislike bad business", func() error { _, err := l.Undislike("a.b", 1, 1); return err }, ErrInvalidBusiness},
		{"set owner bad business", func() error { _, err := l.SetOwner("a/b", 1, 1); return err }, ErrInvalidBusiness},
		{"add business bad name", func() error { return l.AddBusiness("", BusinessOptions{}) }, ErrInvalidBusiness},
		{"add business bad range bits", func() error { return l.AddBusiness("x", BusinessOptions{RangeBits: 60}) }, ErrInvalidOption},
		{"owner mismatch", func() error { _, err := l.Like("video", 1, 99, 8); return err }, ErrOwnerMismatch},
		{"counts bad business", func() error { _, err := l.Counts("a b", []uint64{1}, nil); return err }, ErrInvalidBusiness},
		{"counts too many", func() error { _, err := l.Counts("video", make([]uint64, MaxStates+1), nil); return err }, ErrLimit},
		{"states bad business", func() error { _, err := l.States("", 1, []uint64{1}, nil); return err }, ErrInvalidBusiness},
		{"states too many", func() error { _, err := l.States("video", 1, make([]uint64, MaxStates+1), nil); return err }, ErrLimit},
		{"likers limit 0", func() error { _, err := l.Likers("video", 1, "", 0); return err }, ErrLimit},
		{"likers limit big", func() error { _, err := l.Likers("video", 1, "", MaxPage+1); return err }, ErrLimit},
		{"likers bad business", func() error { _, err := l.Likers("", 1, "", 1); return err }, ErrInvalidBusiness},
		{"likers garbage cursor", func() error { _, err := l.Likers("video", 1, "garbage", 2); return err }, ErrBadCursor},
		{"likers flipped cursor", func() error { _, err := l.Likers("video", 1, string(flip), 2); return err }, ErrBadCursor},
		{"likers truncated cursor", func() error { _, err := l.Likers("video", 1, list.Next[:20], 2); return err }, ErrBadCursor},
		{"likers cursor of another item", func() error { _, err := l.Likers("video", 2, list.Next, 2); return err }, ErrBadCursor},
		{"dislikers with a likers cursor", func() error { _, err := l.Dislikers("video", 1, list.Next, 2); return err }, ErrBadCursor},
		{"likers with a user cursor", func() error { _, err := l.Likers("video", 1, users.Next, 2); return err }, ErrBadCursor},
		{"likers cursor in another business", func() error { _, err := l.Likers("post", 1, list.Next, 2); return err }, ErrBadCursor},
		{"user likes with a likers cursor", func() error { _, err := l.UserLikes("video", 3, list.Next, 2); return err }, ErrBadCursor},
		{"user likes of another user", func() error { _, err := l.UserLikes("video", 4, users.Next, 2); return err }, ErrBadCursor},
		{"user likes limit", func() error { _, err := l.UserLikes("video", 3, "", -1); return err }, ErrLimit},
		{"top 0", func() error { _, err := l.Top("video", 0); return err }, ErrLimit},
		{"top too many", func() error { _, err := l.Top("video", MaxTop+1); return err }, ErrLimit},
		{"top bad business", func() error { _, err := l.Top("a b", 1); return err }, ErrInvalidBusiness},
		{"top day not kept", func() error { _, err := l.TopDay("video", epoch.AddDate(0, 0, -30), 1); return err }, ErrDayNotKept},
		{"top day before 1970", func() error { _, err := l.TopDay("video", time.Unix(-86400*3, 0), 1); return err }, ErrDayNotKept},
		{"rank bad business", func() error { _, _, err := l.Rank("", 1); return err }, ErrInvalidBusiness},
		{"rank day not kept", func() error { _, _, err := l.RankDay("video", epoch.AddDate(-1, 0, 0), 1); return err }, ErrDayNotKept},
		{"load bad business", func() error {
			_, err := l.Load(context.Background(), "a b", []LoadLike{{Item: 1, User: 1}}, nil)
			return err
		}, ErrInvalidBusiness},
		{"load time before 1970", func() error {
			_, err := l.Load(context.Background(), "fresh", []LoadLike{{Item: 1, User: 1}, {Item: 1, User: 2, Ms: -5}}, nil)
			return err
		}, ErrBadTime},
		{"load time in the future", func() error {
			_, err := l.Load(context.Background(), "video", []LoadLike{{Item: 1, User: 100, Ms: epoch.Add(49 * time.Hour).UnixMilli()}}, nil)
			return err
		}, ErrBadTime},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := c.do(); !errors.Is(err, c.want) {
				t.Fatalf("error %v, want %v", err, c.want)
			}
			if after := fingerprint(t, l); after != before {
				t.Fatal("the store changed")
			}
		})
	}
	if _, err := New(e.db, &Options{Stripes: 3}); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("3 stripes: %v", err)
	}
	if _, err := New(e.db, &Options{RoaringThreshold: 2}); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("threshold 2: %v", err)
	}
	if _, err := New(e.db, &Options{BoardDays: MaxBoardDays + 1}); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("board days: %v", err)
	}
	if after := fingerprint(t, l); after != before {
		t.Fatal("the store changed")
	}
}

func TestCursorOfAnotherStore(t *testing.T) {
	a := newEnv(t, nil)
	b := newEnv(t, nil)
	for u := range uint64(5) {
		must[Result](t)(a.l.Like("video", 1, u, 0))
		must[Result](t)(b.l.Like("video", 1, u, 0))
	}
	pg := must[Page](t)(a.l.Likers("video", 1, "", 2))
	if _, err := b.l.Likers("video", 1, pg.Next, 2); !errors.Is(err, ErrBadCursor) {
		t.Fatalf("a cursor of another store: %v", err)
	}
	a.reopen() // the secret is persisted: a cursor outlives a restart
	if _, err := a.l.Likers("video", 1, pg.Next, 2); err != nil {
		t.Fatal(err)
	}
}

func TestUnknownBusinessReads(t *testing.T) {
	e := newEnv(t, nil)
	l := e.l
	if c := must[[]Counts](t)(l.Counts("nope", []uint64{1, 2}, nil)); !slices.Equal(c, []Counts{{}, {}}) {
		t.Fatal(c)
	}
	if s := must[[]State](t)(l.States("nope", 1, []uint64{1, 2}, nil)); !slices.Equal(s, []State{None, None}) {
		t.Fatal(s)
	}
	if p := must[Page](t)(l.Likers("nope", 1, "", 10)); len(p.IDs) != 0 || p.Next != "" {
		t.Fatal(p)
	}
	if p := must[Page](t)(l.UserLikes("nope", 1, "", 10)); len(p.IDs) != 0 {
		t.Fatal(p)
	}
	if top := must[[]Entry](t)(l.Top("nope", 10)); len(top) != 0 {
		t.Fatal(top)
	}
	if r := must[Result](t)(l.Unlike("nope", 1, 1)); r.Changed {
		t.Fatal(r)
	}
	if len(l.Businesses()) != 0 {
		t.Fatalf("reads created %v", l.Businesses())
	}
}

func TestPagesAndStaleCursor(t *testing.T) {
	e := newEnv(t, &Options{RoaringThreshold: 20})
	l := e.l
	users := []uint64{50, 10, 40, 30, 20}
	for i, u := range users {
		e.clock.Advance(time.Second)
		must[Result](t)(l.Like("video", 7, u, 0))
		must[Result](t)(l.Like("video", uint64(100+i), 10, 0))
	}
	var got []uint64
	cur := ""
	for {
		pg := must[Page](t)(l.Likers("video", 7, cur, 2))
		got = append(got, pg.IDs...)
		if pg.Next == "" {
			break
		}
		cur = pg.Next
	}
	if !slices.Equal(got, []uint64{10, 20, 30, 40, 50}) {
		t.Fatalf("list likers %v", got)
	}
	// User 10 liked 100, then 7 and 101 in the same millisecond (ties go
	// by item, descending), then 102, 103, 104: newest first.
	up := must[Page](t)(l.UserLikes("video", 10, "", 3))
	if !slices.Equal(up.IDs, []uint64{104, 103, 102}) || up.Times[0] < up.Times[2] {
		t.Fatalf("user likes %v %v", up.IDs, up.Times)
	}
	up2 := must[Page](t)(l.UserLikes("video", 10, up.Next, 3))
	if !slices.Equal(up2.IDs, []uint64{101, 7, 100}) || up2.Next != "" {
		t.Fatalf("user likes page 2 %v %q", up2.IDs, up2.Next)
	}
	first := must[Page](t)(l.Likers("video", 7, "", 2))
	for u := uint64(1000); u < 1020; u++ {
		must[Result](t)(l.Like("video", 7, u, 0))
	}
	if ok, _ := l.isRoaring("video", 7); !ok {
		t.Fatal("set not converted")
	}
	if _, err := l.Likers("video", 7, first.Next, 2); !errors.Is(err, ErrStaleCursor) {
		t.Fatalf("cursor across a conversion: %v", err)
	}
	got = got[:0]
	cur = ""
	for {
		pg := must[Page](t)(l.Likers("video", 7, cur, 3))
		got = append(got, pg.IDs...)
		if pg.Next == "" {
			break
		}
		cur = pg.Next
	}
	if len(got) != 25 {
		t.Fatalf("roaring likers %d: %v", len(got), got)
	}
	// Roaring sets page in ordinal order: users in the order they joined.
	if !slices.Equal(got[:5], []uint64{10, 20, 30, 40, 50}) || got[5] != 1000 {
		t.Fatalf("roaring order %v", got)
	}
}

func TestOwners(t *testing.T) {
	e := newEnv(t, nil)
	l := e.l
	must[Result](t)(l.Like("video", 1, 10, 0))
	must[Result](t)(l.Like("video", 1, 11, 0))
	if n := must[uint64](t)(l.Received(5)); n != 0 {
		t.Fatal(n)
	}
	// Naming the owner later credits the likes already there.
	must[Result](t)(l.Like("video", 1, 12, 5))
	if n := must[uint64](t)(l.Received(5)); n != 3 {
		t.Fatalf("received %d, want 3", n)
	}
	must[Result](t)(l.Like("post", 9, 10, 5))
	if n := must[uint64](t)(l.Received(5)); n != 4 {
		t.Fatalf("received over businesses %d, want 4", n)
	}
	if r := must[Result](t)(l.SetOwner("video", 1, 6)); !r.Changed || r.Likes != 3 {
		t.Fatal(r)
	}
	if a, b := must[uint64](t)(l.Received(5)), must[uint64](t)(l.Received(6)); a != 1 || b != 3 {
		t.Fatalf("after the move: %d %d", a, b)
	}
	if o := must[uint64](t)(l.Owner("video", 1)); o != 6 {
		t.Fatal(o)
	}
	must[Result](t)(l.Unlike("video", 1, 10))
	must[Result](t)(l.Dislike("video", 1, 11))
	if b := must[uint64](t)(l.Received(6)); b != 1 {
		t.Fatalf("after unlike and dislike: %d", b)
	}
	if r := must[Result](t)(l.SetOwner("video", 1, 0)); !r.Changed {
		t.Fatal(r)
	}
	if b := must[uint64](t)(l.Received(6)); b != 0 {
		t.Fatal(b)
	}
}

func TestRanksWithTies(t *testing.T) {
	e := newEnv(t, nil)
	l := e.l
	likes := map[uint64]int{1: 3, 2: 5, 3: 3, 4: 1, 5: 5, 6: 3}
	for item, n := range likes {
		for u := range n {
			must[Result](t)(l.Like("video", item, uint64(u), 0))
		}
	}
	want := []Entry{{1, 2, 5}, {1, 5, 5}, {3, 1, 3}, {3, 3, 3}, {3, 6, 3}, {6, 4, 1}}
	if top := must[[]Entry](t)(l.Top("video", 10)); !slices.Equal(top, want) {
		t.Fatalf("top %v", top)
	}
	for _, w := range want {
		e, ok, err := l.Rank("video", w.Item)
		if err != nil || !ok || e != w {
			t.Fatalf("rank of %d: %v %v %v", w.Item, e, ok, err)
		}
	}
	if _, ok, _ := l.Rank("video", 99); ok {
		t.Fatal("an item without likes is ranked")
	}
	// Unlikes: item 2 drops from 5 to 1, the next in line moves up.
	for u := range 4 {
		must[Result](t)(l.Unlike("video", 2, uint64(u)))
	}
	want = []Entry{{1, 5, 5}, {2, 1, 3}, {2, 3, 3}, {2, 6, 3}, {5, 2, 1}, {5, 4, 1}}
	if top := must[[]Entry](t)(l.Top("video", 10)); !slices.Equal(top, want) {
		t.Fatalf("top after unlikes %v", top)
	}
	if top := must[[]Entry](t)(l.Top("video", 2)); !slices.Equal(top, want[:2]) {
		t.Fatalf("top 2 %v", top)
	}
}

func TestDayBoardsAndPrune(t *testing.T) {
	e := newEnv(t, &Options{BoardDays: 2})
	l := e.l
	day0 := e.clock.Now()
	must[Result](t)(l.Like("video", 1, 1, 0))
	must[Result](t)(l.Like("video", 2, 1, 0))
	e.clock.Advance(24 * time.Hour)
	day1 := e.clock.Now()
	must[Result](t)(l.Like("video", 2, 2, 0))
	must[Result](t)(l.Like("video", 2, 3, 0))
	if top := must[[]Entry](t)(l.TopDay("video", day0, 10)); !slices.Equal(top, []Entry{{1, 1, 1}, {1, 2, 1}}) {
		t.Fatalf("day 0 %v", top)
	}
	if top := must[[]Entry](t)(l.TopDay("video", day1, 10)); !slices.Equal(top, []Entry{{1, 2, 2}}) {
		t.Fatalf("day 1 %v", top)
	}
	// An unlike takes the like off the day it was made.
	must[Result](t)(l.Unlike("video", 1, 1))
	if top := must[[]Entry](t)(l.TopDay("video", day0, 10)); !slices.Equal(top, []Entry{{1, 2, 1}}) {
		t.Fatalf("day 0 after unlike %v", top)
	}
	e.clock.Advance(24 * time.Hour) // day 0 leaves the window
	must[Result](t)(l.Like("video", 3, 1, 0))
	if _, err := l.TopDay("video", day0, 10); !errors.Is(err, ErrDayNotKept) {
		t.Fatal(err)
	}
	if err := e.db.RunJobs(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	d0 := dayOf(day0.UnixMilli())
	for _, f := range []*store.Family{l.fam.board, l.fam.dayScore, l.fam.hist} {
		it, _ := f.NewIter(&store.IterOptions{Prefix: appendDayPrefix(nil, f.Prefix(), 1, d0)})
		if it.Next() {
			t.Fatalf("%s still holds day %d", f.Name(), d0)
		}
		it.Close()
	}
	if top := must[[]Entry](t)(l.TopDay("video", day1, 10)); !slices.Equal(top, []Entry{{1, 2, 2}}) {
		t.Fatalf("day 1 after the prune %v", top)
	}
	// Unliking a like of a pruned day touches no day board.
	must[Result](t)(l.Unlike("video", 2, 1))
	e.check()
}

func TestOptionsPersisted(t *testing.T) {
	e := newEnv(t, &Options{BoardDays: 3, RoaringThreshold: 100})
	must[Result](t)(e.l.Like("video", 1, 1, 0))
	e.opts = Options{Now: e.clock.Now, CreateBusinesses: true}
	e.reopen()
	if e.l.BoardDays() != 3 || e.l.RoaringThreshold() != 100 {
		t.Fatalf("after reopen: %d %d", e.l.BoardDays(), e.l.RoaringThreshold())
	}
	e.opts.BoardDays = -1
	e.reopen()
	if e.l.BoardDays() != 0 {
		t.Fatal(e.l.BoardDays())
	}
	if _, err := e.l.TopDay("video", e.clock.Now(), 5); !errors.Is(err, ErrDayNotKept) {
		t.Fatal(err)
	}
	if err := e.db.RunJobs(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	it, _ := e.l.fam.dayScore.NewIter(nil)
	if it.Next() {
		t.Fatal("day scores remain with day boards off")
	}
	it.Close()
	if top := must[[]Entry](t)(e.l.Top("video", 5)); len(top) != 1 {
		t.Fatal(top)
	}
}

func TestLoad(t *testing.T) {
	e := newEnv(t, &Options{RoaringThreshold: 32})
	l := e.l
	must[Result](t)(l.Like("video", 1, 1, 7))
	must[Result](t)(l.Dislike("video", 1, 2))
	var likes []LoadLike
	for u := range uint64(50) {
		likes = append(likes, LoadLike{Item: 1, User: u, Ms: epoch.Add(-time.Duration(u) * time.Hour).UnixMilli()})
	}
	likes = append(likes, LoadLike{Item: 1, User: 3}, LoadLike{Item: 2, User: 3})
	var progress []int
	st := must[LoadStats](t)(l.Load(context.Background(), "video", likes, func(n int) { progress = append(progress, n) }))
	want := LoadStats{Input: 52, Added: 49, Replaced: 1, Unchanged: 2, Items: 2, Converted: 1}
	if st != want {
		t.Fatalf("stats %+v, want %+v", st, want)
	}
	if len(progress) == 0 || progress[len(progress)-1] != 52 {
		t.Fatalf("progress %v", progress)
	}
	c := must[[]Counts](t)(l.Counts("video", []uint64{1, 2}, nil))
	if c[0] != (Counts{50, 0}) || c[1] != (Counts{1, 0}) {
		t.Fatal(c)
	}
	if n := must[uint64](t)(l.Received(7)); n != 50 {
		t.Fatalf("received %d", n)
	}
	// The time of user 1's like is the live one, not the load's.
	e.check()
	again := must[LoadStats](t)(l.Load(context.Background(), "video", likes, nil))
	if again.Added != 0 || again.Unchanged != 52 {
		t.Fatalf("load again %+v", again)
	}
	e.reopen()
	e.check()

	// Small batches: a pair repeated across batch boundaries still counts
	// once, with its first time.
	defer func(n int) { loadGroupLikes = n }(loadGroupLikes)
	loadGroupLikes = 3
	likes = likes[:0]
	for i := range 40 {
		likes = append(likes, LoadLike{Item: 10 + uint64(i%4), User: uint64(i % 9), Ms: epoch.UnixMilli() - int64(i)})
	}
	st = must[LoadStats](t)(e.l.Load(context.Background(), "video", likes, nil))
	if st.Added != 36 || st.Unchanged != 4 {
		t.Fatalf("small batches %+v", st)
	}
	c = must[[]Counts](t)(e.l.Counts("video", []uint64{10, 11, 12, 13}, nil))
	if c[0].Likes+c[1].Likes+c[2].Likes+c[3].Likes != 36 {
		t.Fatal(c)
	}
	// User 0: item 1 from the first load, then items 10-13 at i = 0, 9,
	// 18, 27; i = 36 repeats (10, 0) 36 ms earlier and is ignored.
	pg := must[Page](t)(e.l.UserLikes("video", 0, "", 10))
	if !slices.Equal(pg.IDs, []uint64{10, 1, 11, 12, 13}) || pg.Times[0] != epoch.UnixMilli() {
		t.Fatalf("user 0: %v %v", pg.IDs, pg.Times)
	}
	e.check()
}

// TestWideBuckets checks boards whose scores lie in buckets wider than 1
// (128 and above), where Top sorts a bucket by exact scores and Rank reads
// its bucket: random likes and unlikes against the model, all-time and
// today.
func TestWideBuckets(t *testing.T) {
	e := newEnv(t, &Options{RoaringThreshold: MaxRoaringThreshold})
	m := newModel()
	rng := rand.New(rand.NewPCG(3, 4))
	now := e.clock.Now().UnixMilli()
	var likes []LoadLike
	for item := range uint64(8) {
		for u := range 120 + rng.IntN(200) {
			likes = append(likes, LoadLike{Item: item, User: uint64(u)})
		}
	}
	must[LoadStats](t)(e.l.Load(context.Background(), "video", likes, nil))
	m.load("video", likes, now)
	check := func(step int) {
		t.Helper()
		for _, day := range []uint32{dayAll, dayOf(now)} {
			want := m.board("video", day)
			for _, n := range []int{1, 3, 5, 8, 20} {
				var got []Entry
				var err error
				if day == dayAll {
					got, err = e.l.Top("video", n)
				} else {
					got, err = e.l.TopDay("video", e.clock.Now(), n)
				}
				w := want[:min(n, len(want))]
				if err != nil || !slices.Equal(got, w) {
					t.Fatalf("step %d day %d top %d: %v %v, want %v", step, day, n, got, err, w)
				}
			}
			for _, w := range want {
				var got Entry
				var ok bool
				var err error
				if day == dayAll {
					got, ok, err = e.l.Rank("video", w.Item)
				} else {
					got, ok, err = e.l.RankDay("video", e.clock.Now(), w.Item)
				}
				if err != nil || !ok || got != w {
					t.Fatalf("step %d day %d rank of %d: %v %v %v, want %v", step, day, w.Item, got, ok, err, w)
				}
			}
		}
	}
	check(0)
	for step := 1; step <= 300; step++ {
		item, user := rng.Uint64N(8), rng.Uint64N(400)
		if rng.IntN(2) == 0 {
			must[Result](t)(e.l.Unlike("video", item, user))
			m.apply(opUnlike, "video", item, user, 0, now)
		} else {
			must[Result](t)(e.l.Like("video", item, user, 0))
			m.apply(opLike, "video", item, user, 0, now)
		}
		if step%20 == 0 {
			check(step)
		}
	}
	e.check()
}

// TestCursorSecretShared: two stores given the same CursorSecret (the
// replicas of a cluster) accept each other's cursors and page on alike;
// stores with their own random secrets refuse each other's, as before.
func TestCursorSecretShared(t *testing.T) {
	fill := func(e *env) {
		for u := range uint64(10) {
			must[Result](t)(e.l.Like("video", 1, u+1, 9))
		}
	}
	shared := []byte("the cluster's shared secret")
	a, b := newEnv(t, &Options{CursorSecret: shared}), newEnv(t, &Options{CursorSecret: shared})
	fill(a)
	fill(b)
	first := must[Page](t)(a.l.Likers("video", 1, "", 3))
	if first.Next == "" {
		t.Fatal("want a next cursor")
	}
	onA := must[Page](t)(a.l.Likers("video", 1, first.Next, 3))
	onB, err := b.l.Likers("video", 1, first.Next, 3)
	if err != nil {
		t.Fatalf("a cursor of a replica with the same secret: %v", err)
	}
	if fmt.Sprint(onA.IDs) != fmt.Sprint(onB.IDs) || onA.Next != onB.Next {
		t.Fatalf("pages differ: %v %q against %v %q", onA.IDs, onA.Next, onB.IDs, onB.Next)
	}
	c, d := newEnv(t, nil), newEnv(t, nil)
	fill(c)
	fill(d)
	cur := must[Page](t)(c.l.Likers("video", 1, "", 3)).Next
	if _, err := d.l.Likers("video", 1, cur, 3); !errors.Is(err, ErrBadCursor) {
		t.Fatalf("another store's own secret: %v, want ErrBadCursor", err)
	}
}

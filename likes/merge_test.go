package likes

import (
	"encoding/base64"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestMergeTopTies(t *testing.T) {
	parts := [][]Entry{
		{{Rank: 1, Item: 9, Likes: 50}, {Rank: 2, Item: 3, Likes: 40}, {Rank: 2, Item: 4, Likes: 40}},
		{{Rank: 1, Item: 2, Likes: 40}, {Rank: 2, Item: 7, Likes: 10}},
		nil,
		{{Rank: 1, Item: 1, Likes: 60}, {Rank: 2, Item: 5, Likes: 10}},
	}
	got := MergeTop(parts, 6)
	want := []Entry{
		{1, 1, 60}, {2, 9, 50}, {3, 2, 40}, {3, 3, 40}, {3, 4, 40}, {6, 5, 10},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("MergeTop = %v, want %v", got, want)
	}
	if got := MergeTop(parts, 100); len(got) != 7 || got[6] != (Entry{6, 7, 10}) {
		t.Fatalf("MergeTop(all) = %v", got)
	}
	if got := MergeTop(nil, 3); len(got) != 0 {
		t.Fatalf("MergeTop(nil) = %v", got)
	}
}

// pageAll pages a gathered user likes list of shards (each the full
// newest-first list of one shard, times and items) limit at a time, as a
// gather does, and returns the ids in order and the number of pages.
func pageAll(t *testing.T, lists []ShardLikes, ids []uint32, limit int) ([]uint64, int) {
	t.Helper()
	cur := GatherCursor{Business: "b", User: 7}
	for _, id := range ids {
		cur.Shards = append(cur.Shards, ShardPos{Shard: id})
	}
	var out []uint64
	for pages := 1; ; pages++ {
		parts := make([]ShardLikes, len(lists))
		for i, l := range lists {
			s := cur.Shards[i]
			if s.Done {
				continue
			}
			start := 0
			if s.After != nil {
				start = slices.IndexFunc(l.Page.IDs, func(id uint64) bool { return id == s.After.Item }) + 1
				if start == 0 {
					t.Fatalf("position %v not in shard %d's list", *s.After, s.Shard)
				}
			}
			end := min(start+limit, len(l.Page.IDs))
			parts[i] = ShardLikes{Page: Page{IDs: l.Page.IDs[start:end], Times: l.Page.Times[start:end]}, More: end < len(l.Page.IDs)}
		}
		pg, err := MergeUserLikes(cur, parts, limit)
		if err != nil {
			t.Fatal(err)
		}
		if len(pg.IDs) > limit || len(pg.IDs) == 0 && pages > 1 {
			t.Fatalf("page %d of %d ids (limit %d)", pages, len(pg.IDs), limit)
		}
		out = append(out, pg.IDs...)
		if pg.Next == "" {
			return out, pages
		}
		if cur, err = DecodeGatherCursor(pg.Next); err != nil {
			t.Fatal(err)
		}
		if err := cur.Check("b", 7, ids); err != nil {
			t.Fatal(err)
		}
	}
}

func TestMergeUserLikesPages(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 50 {
		n := 1 + r.IntN(4)
		type ent struct {
			ms   int64
			item uint64
		}
		var all []ent
		lists := make([]ShardLikes, n)
		for item := uint64(1); item <= uint64(r.IntN(60)); item++ {
			e := ent{ms: int64(r.IntN(20)), item: item} // many equal times
			all = append(all, e)
			s := int(item) % n
			lists[s].Page.IDs = append(lists[s].Page.IDs, e.item)
			lists[s].Page.Times = append(lists[s].Page.Times, e.ms)
		}
		newestFirst := func(a, b ent) int {
			if a.ms != b.ms {
				return int(b.ms - a.ms)
			}
			return int(b.item) - int(a.item)
		}
		slices.SortFunc(all, newestFirst)
		for i := range lists {
			var es []ent
			for j, id := range lists[i].Page.IDs {
				es = append(es, ent{lists[i].Page.Times[j], id})
			}
			slices.SortFunc(es, newestFirst)
			for j, e := range es {
				lists[i].Page.IDs[j], lists[i].Page.Times[j] = e.item, e.ms
			}
		}
		want := make([]uint64, len(all))
		for i, e := range all {
			want[i] = e.item
		}
		ids := make([]uint32, n)
		for i := range ids {
			ids[i] = uint32(2*i + 1)
		}
		limit := 1 + r.IntN(7)
		got, pages := pageAll(t, lists, ids, limit)
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: paged %v, want %v", round, got, want)
		}
		if wantPages := max(1, (len(want)+limit-1)/limit); pages != wantPages {
			t.Fatalf("round %d: %d pages for %d ids by %d, want %d", round, pages, len(want), limit, wantPages)
		}
	}
}

func TestGatherCursor(t *testing.T) {
	c := GatherCursor{Business: "videos", User: 1 << 40, Shards: []ShardPos{
		{Shard: 1}, {Shard: 2, Done: true}, {Shard: 5, After: &Position{Ms: epoch.UnixMilli(), Item: 77}},
	}}
	s := c.Encode()
	got, err := DecodeGatherCursor(s)
	if err != nil {
		t.Fatal(err)
	}
	if got.Business != c.Business || got.User != c.User || len(got.Shards) != 3 ||
		got.Shards[0] != c.Shards[0] || got.Shards[1] != c.Shards[1] || *got.Shards[2].After != *c.Shards[2].After {
		t.Fatalf("round trip: %+v, want %+v", got, c)
	}
	if err := got.Check("videos", 1<<40, []uint32{1, 2, 5}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		biz   string
		user  uint64
		ids   []uint32
		wants error
	}{
		{"other business", "posts", 1 << 40, []uint32{1, 2, 5}, ErrBadCursor},
		{"other user", "videos", 1, []uint32{1, 2, 5}, ErrBadCursor},
		{"fewer shards", "videos", 1 << 40, []uint32{1, 2}, ErrCursorShards},
		{"more shards", "videos", 1 << 40, []uint32{1, 2, 5, 6}, ErrCursorShards},
		{"other shard", "videos", 1 << 40, []uint32{1, 2, 4}, ErrCursorShards},
	} {
		if err := got.Check(tc.biz, tc.user, tc.ids); !errors.Is(err, tc.wants) {
			t.Errorf("%s: Check = %v, want %v", tc.name, err, tc.wants)
		}
	}
	// Every one-character change, truncation and foreign cursor is refused.
	alphabet := "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	for i := range s {
		for _, ch := range []byte{alphabet[(indexOf(alphabet, s[i])+1)%64], '+', '='} {
			b := []byte(s)
			b[i] = ch
			if _, err := DecodeGatherCursor(string(b)); !errors.Is(err, ErrBadCursor) {
				t.Fatalf("cursor with char %d changed to %q: %v", i, ch, err)
			}
		}
	}
	for _, bad := range []string{"", "x", s[:len(s)-1], s[:10], s + "A", "AQEBAAAAAQAAAAAAAATSAAAAAAAAAE0AAAAAAAAAAH9Mh55bYlqtX_nHrw"} {
		if _, err := DecodeGatherCursor(bad); !errors.Is(err, ErrBadCursor) {
			t.Errorf("DecodeGatherCursor(%q) = %v, want ErrBadCursor", bad, err)
		}
	}
	// A body with a valid checksum but bad fields.
	for _, body := range [][]byte{
		{gatherCursorVersion + 1, 1, 'b', 7, 1, 1, 0},
		{gatherCursorVersion, 0, 7, 1, 1, 0},                                                               // empty business
		{gatherCursorVersion, 1, 'b', 7, 0},                                                                // no shards
		{gatherCursorVersion, 1, 'b', 7, 1, 1, 3},                                                          // bad state
		{gatherCursorVersion, 1, 'b', 7, 2, 2, 0, 1, 0},                                                    // out of order
		{gatherCursorVersion, 1, 'b', 7, 1, 0, 0},                                                          // shard 0
		{gatherCursorVersion, 1, 'b', 7, 1, 1, 0, 9},                                                       // trailing
		{gatherCursorVersion, 1, 'b', 7, 1, 1, 1, 1},                                                       // cut position
		{gatherCursorVersion, 5, 'b', 7, 1, 1, 0},                                                          // business past the end
		{gatherCursorVersion, 1, 'b', 7, 1, 1, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 1}, // time out of range
	} {
		b := append([]byte(nil), body...)
		b = append(b, 0, 0, 0, 0)
		sum := crcOf(body)
		b[len(b)-4], b[len(b)-3], b[len(b)-2], b[len(b)-1] = byte(sum>>24), byte(sum>>16), byte(sum>>8), byte(sum)
		if _, err := DecodeGatherCursor(b64(b)); !errors.Is(err, ErrBadCursor) {
			t.Errorf("body %v: %v, want ErrBadCursor", body, err)
		}
	}
}

// TestShardParts spreads random likes of items over three Likes (item %
// 3) and checks the merged parts against one Likes holding everything:
// top (all-time and the day), ranks, every user's likes paged to the end,
// and received totals.
func TestShardParts(t *testing.T) {
	const biz = "videos"
	ref := newEnv(t, nil)
	var shards []*env
	for range 3 {
		shards = append(shards, newEnv(t, nil))
	}
	envs := append([]*env{ref}, shards...)
	r := rand.New(rand.NewPCG(3, 4))
	const items, users = 120, 300
	owner := func(item uint64) uint64 { return item%5 + 1 }
	for op := range 6000 {
		item := uint64(r.IntN(items))
		if op%3 == 0 {
			item = uint64(r.IntN(4)) // hot items, past the exact buckets
		}
		user := uint64(r.IntN(users))
		if r.IntN(3) == 0 {
			for _, e := range envs {
				e.clock.Advance(time.Millisecond)
			}
		}
		sh := shards[item%3]
		k := r.IntN(10)
		for _, l := range []*Likes{ref.l, sh.l} {
			var err error
			switch {
			case k < 7:
				_, err = l.Like(biz, item, user, owner(item))
			case k < 8:
				_, err = l.Unlike(biz, item, user)
			default:
				_, err = l.Dislike(biz, item, user)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	day := ref.clock.Now()
	for _, n := range []int{1, 3, 10, 50, 1000} {
		for _, d := range []bool{false, true} {
			var want []Entry
			var parts [][]Entry
			var err error
			if d {
				want, err = ref.l.TopDay(biz, day, n)
			} else {
				want, err = ref.l.Top(biz, n)
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range shards {
				var p []Entry
				if d {
					p, err = s.l.TopDay(biz, day, n)
				} else {
					p, err = s.l.Top(biz, n)
				}
				if err != nil {
					t.Fatal(err)
				}
				parts = append(parts, p)
			}
			if got := MergeTop(parts, n); !slices.Equal(got, want) {
				t.Fatalf("top %d (day %v): merged %v, want %v", n, d, got, want)
			}
		}
	}
	for item := uint64(0); item < items+2; item++ {
		for _, d := range []bool{false, true} {
			var want Entry
			var ok bool
			var err error
			if d {
				want, ok, err = ref.l.RankDay(biz, day, item)
			} else {
				want, ok, err = ref.l.Rank(biz, item)
			}
			if err != nil {
				t.Fatal(err)
			}
			var score uint64
			for _, s := range shards {
				var sc []uint64
				if d {
					sc, err = s.l.ScoresDay(biz, day, []uint64{item}, nil)
				} else {
					sc, err = s.l.Scores(biz, []uint64{item}, nil)
				}
				if err != nil {
					t.Fatal(err)
				}
				score += sc[0]
			}
			if !ok {
				if score != 0 {
					t.Fatalf("item %d: unranked, but scores %d", item, score)
				}
				continue
			}
			rank := 1
			for _, s := range shards {
				var above []uint64
				if d {
					above, err = s.l.AboveDay(biz, day, []uint64{score}, nil)
				} else {
					above, err = s.l.Above(biz, []uint64{score}, nil)
				}
				if err != nil {
					t.Fatal(err)
				}
				rank += int(above[0])
			}
			if got := (Entry{Rank: rank, Item: item, Likes: score}); got != want {
				t.Fatalf("item %d (day %v): gathered %v, want %v", item, d, got, want)
			}
		}
	}
	ids := []uint32{1, 2, 3}
	for user := uint64(0); user < users; user += 7 {
		var want []uint64
		cur := ""
		for {
			pg, err := ref.l.UserLikes(biz, user, cur, 4)
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, pg.IDs...)
			if cur = pg.Next; cur == "" {
				break
			}
		}
		gc := GatherCursor{Business: biz, User: user}
		for _, id := range ids {
			gc.Shards = append(gc.Shards, ShardPos{Shard: id})
		}
		var got []uint64
		for {
			parts := make([]ShardLikes, len(shards))
			for i, s := range shards {
				if gc.Shards[i].Done {
					continue
				}
				pg, more, err := s.l.UserLikesBefore(biz, user, gc.Shards[i].After, 4)
				if err != nil {
					t.Fatal(err)
				}
				parts[i] = ShardLikes{Page: pg, More: more}
			}
			pg, err := MergeUserLikes(gc, parts, 4)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, pg.IDs...)
			if pg.Next == "" {
				break
			}
			if gc, err = DecodeGatherCursor(pg.Next); err != nil {
				t.Fatal(err)
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("user %d: gathered likes %v, want %v", user, got, want)
		}
	}
	for o := uint64(0); o <= 6; o++ {
		want, err := ref.l.Received(o)
		if err != nil {
			t.Fatal(err)
		}
		var got uint64
		for _, s := range shards {
			n, err := s.l.Received(o)
			if err != nil {
				t.Fatal(err)
			}
			got += n
		}
		if got != want {
			t.Fatalf("owner %d: received %d, want %d", o, got, want)
		}
	}
	// Bad input to the parts.
	if _, err := shards[0].l.Above(biz, make([]uint64, MaxStates+1), nil); !errors.Is(err, ErrLimit) {
		t.Fatalf("Above of too many: %v", err)
	}
	if _, _, err := shards[0].l.UserLikesBefore(biz, 1, nil, 0); !errors.Is(err, ErrLimit) {
		t.Fatalf("UserLikesBefore limit 0: %v", err)
	}
	if _, _, err := shards[0].l.UserLikesBefore(biz, 1, &Position{Ms: -1}, 5); !errors.Is(err, ErrBadCursor) {
		t.Fatalf("UserLikesBefore before time 0: %v", err)
	}
	if _, err := shards[0].l.AboveDay(biz, day.AddDate(0, 0, -30), []uint64{1}, nil); !errors.Is(err, ErrDayNotKept) {
		t.Fatalf("AboveDay of an old day: %v", err)
	}
	if got, err := shards[0].l.Above("nosuch", []uint64{0, 5}, nil); err != nil || !slices.Equal(got, []uint64{0, 0}) {
		t.Fatalf("Above of an unknown business: %v, %v", got, err)
	}
}

func indexOf(s string, c byte) int {
	for i := range len(s) {
		if s[i] == c {
			return i
		}
	}
	return 0
}

func crcOf(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

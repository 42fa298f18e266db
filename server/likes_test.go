package server

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tallydb/tally"
	"github.com/tallydb/tally/likes"
	"github.com/tallydb/tally/store"
)

// newLikesServer is a server with every command of "tally serve" over a
// fresh database.
func newLikesServer(t *testing.T) (*testServer, *likes.Likes) {
	t.Helper()
	ts, db := newDBServer(t)
	return ts, db.Likes()
}

func TestLikeCommands(t *testing.T) {
	ts, _ := newLikesServer(t)
	rc := ts.client(t, nil)
	do := func(args ...any) any {
		t.Helper()
		v, err := rc.Do(ctx, args...).Result()
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return v
	}
	eq := func(got, want any) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("got %#v, want %#v", got, want)
		}
	}
	eq(do("LIKE.BUSINESS", "LIST"), []any{})
	if err := rc.Do(ctx, "LIKE.LIKE", "video", 1, 10, 7).Err(); err == nil || !strings.Contains(err.Error(), "unknown business") {
		t.Fatalf("LIKE.LIKE of an undeclared business: %v", err)
	}
	eq(do("LIKE.BUSINESS", "ADD", "video"), "OK")
	eq(do("LIKE.BUSINESS", "ADD", "video"), "OK")
	eq(do("LIKE.BUSINESS", "LIST"), []any{"video"})
	// The counter's shape, as "tally business add" takes it.
	eq(do("LIKE.BUSINESS", "ADD", "clips", "HOTRANGES", 2), "OK")
	eq(do("LIKE.BUSINESS", "ADD", "shorts", "RANGEBITS", 40, "AGE", "720h", "EPOCHMS", 0, "TIMESHIFT", 20), "OK")
	for _, c := range []struct {
		args []any
		want string
	}{
		{[]any{"LIKE.BUSINESS", "ADD", "x", "KEEPHOT"}, `ERR unknown option "KEEPHOT"`},
		{[]any{"LIKE.BUSINESS", "ADD", "x", "RANGEBITS", 60}, "ERR tally: invalid option: range bits 60"},
		{[]any{"LIKE.BUSINESS", "ADD", "x", "HOTRANGES", 2, "AGE", "1h"}, "ERR HOTRANGES and AGE are mutually exclusive"},
		{[]any{"LIKE.BUSINESS", "ADD", "bad biz"}, "ERR likes: invalid business name"},
		{[]any{"LIKE.BUSINESS", "LIST", "x"}, "ERR wrong number of arguments"},
	} {
		if err := rc.Do(ctx, c.args...).Err(); err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
	eq(do("LIKE.BUSINESS", "LIST"), []any{"clips", "shorts", "video"})
	if got := fmt.Sprint(tally.UserCounters(ts.db)); strings.Contains(got, "likes_") {
		t.Errorf("business counters among the user's: %s", got)
	}
	for _, ci := range ts.db.Counters() {
		if ci.Name == "likes_clips" && (ci.Age.Kind != store.KeepNewest || ci.Age.HotRanges != 2 || ci.RangeBits != 48) ||
			ci.Name == "likes_shorts" && (ci.Age.Kind != store.AgeByTime || ci.RangeBits != 40 || ci.Age.IDTimeShift != 20) {
			t.Errorf("business counter %s: %+v", ci.Name, ci)
		}
	}
	eq(do("LIKE.LIKE", "video", 1, 10, 7), []any{"likes", int64(1), "dislikes", int64(0), "changed", int64(1)})
	eq(do("LIKE.LIKE", "video", 1, 10), []any{"likes", int64(1), "dislikes", int64(0), "changed", int64(0)})
	eq(do("like.like", "video", 1, 11), []any{"likes", int64(2), "dislikes", int64(0), "changed", int64(1)})
	eq(do("LIKE.DISLIKE", "video", 1, 11), []any{"likes", int64(1), "dislikes", int64(1), "changed", int64(1)})
	eq(do("LIKE.UNDISLIKE", "video", 1, 11), []any{"likes", int64(1), "dislikes", int64(0), "changed", int64(1)})
	eq(do("LIKE.UNLIKE", "video", 1, 12), []any{"likes", int64(1), "dislikes", int64(0), "changed", int64(0)})
	eq(do("LIKE.LIKE", "video", 2, 10), []any{"likes", int64(1), "dislikes", int64(0), "changed", int64(1)})
	eq(do("LIKE.COUNTS", "video", 1, 2, 3), []any{[]any{"likes", int64(1), "dislikes", int64(0)}, []any{"likes", int64(1), "dislikes", int64(0)}, []any{"likes", int64(0), "dislikes", int64(0)}})
	eq(do("LIKE.STATES", "video", 10, 1, 3), []any{"like", "none"})
	eq(do("LIKE.RECEIVED", 7), int64(1))
	eq(do("LIKE.SETOWNER", "video", 1, 8), []any{"likes", int64(1), "dislikes", int64(0), "changed", int64(1)})
	eq(do("LIKE.RECEIVED", 8), int64(1))
	eq(do("LIKE.TOP", "video"), []any{[]any{"rank", int64(1), "item", int64(1), "likes", int64(1)}, []any{"rank", int64(1), "item", int64(2), "likes", int64(1)}})
	eq(do("LIKE.TOP", "video", 1, "DAY", time.Now().UTC().Format(time.DateOnly)), []any{[]any{"rank", int64(1), "item", int64(1), "likes", int64(1)}})
	eq(do("LIKE.RANK", "video", 2), []any{"rank", int64(1), "likes", int64(1)})
	if _, err := rc.Do(ctx, "LIKE.RANK", "video", 3).Result(); err != redis.Nil {
		t.Fatalf("rank of an unliked item: %v", err)
	}
	eq(do("LIKE.USERLIKES", "video", 10), []any{nil, []any{int64(2), int64(1)}})
	// Pages through LIKERS.
	for u := 20; u < 25; u++ {
		do("LIKE.LIKE", "video", 1, u)
	}
	var ids []any
	var cursor any
	for pages := 0; ; pages++ {
		args := []any{"LIKE.LIKERS", "video", 1, "LIMIT", 2}
		if cursor != nil {
			args = append(args, "CURSOR", cursor)
		}
		v := do(args...).([]any)
		ids = append(ids, v[1].([]any)...)
		if cursor = v[0]; cursor == nil || pages > 5 {
			break
		}
	}
	eq(ids, []any{int64(10), int64(20), int64(21), int64(22), int64(23), int64(24)})
	eq(do("LIKE.LIKERS", "video", 1, "DISLIKES"), []any{nil, []any{}})
	// Ids above 2^63-1 come back as bulk strings.
	eq(do("LIKE.LIKE", "video", "18446744073709551615", 1), []any{"likes", int64(1), "dislikes", int64(0), "changed", int64(1)})
	eq(do("LIKE.USERLIKES", "video", 1), []any{nil, []any{"18446744073709551615"}})
}

func TestLikeCommandsBadInput(t *testing.T) {
	ts, l := newLikesServer(t)
	rc := ts.client(t, nil)
	if err := rc.Do(ctx, "LIKE.BUSINESS", "ADD", "video").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Do(ctx, "LIKE.LIKE", "video", 1, 1, 5).Result(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []any
		want string
	}{
		{[]any{"LIKE.LIKE", "video", 1}, "wrong number of arguments"},
		{[]any{"LIKE.LIKE", "video", 1, 2, 3, 4}, "wrong number of arguments"},
		{[]any{"LIKE.LIKE", "video", "x", 2}, `bad item "x": want an unsigned decimal`},
		{[]any{"LIKE.LIKE", "video", 1, "-2"}, `bad user "-2": want an unsigned decimal`},
		{[]any{"LIKE.LIKE", "video", 1, 2, "o"}, `bad owner "o"`},
		{[]any{"LIKE.LIKE", "bad biz", 1, 2}, "likes: invalid business name"},
		{[]any{"LIKE.LIKE", "video", 1, 2, 6}, "likes: item has another owner"},
		{[]any{"LIKE.UNLIKE", "video", 1}, "wrong number of arguments"},
		{[]any{"LIKE.COUNTS", "video"}, "wrong number of arguments"},
		{[]any{"LIKE.COUNTS", "video", "1x"}, `bad item "1x"`},
		{[]any{"LIKE.STATES", "video", 1}, "wrong number of arguments"},
		{[]any{"LIKE.LIKERS", "video", 1, "LIMIT"}, "LIMIT needs a value"},
		{[]any{"LIKE.LIKERS", "video", 1, "LIMIT", "a"}, `bad limit "a"`},
		{[]any{"LIKE.LIKERS", "video", 1, "LIMIT", 0}, "likes: limit out of range"},
		{[]any{"LIKE.LIKERS", "video", 1, "CURSOR", "zzz"}, "likes: bad cursor"},
		{[]any{"LIKE.LIKERS", "video", 1, "BOGUS"}, `unknown option "BOGUS"`},
		{[]any{"LIKE.USERLIKES", "video", 1, "DISLIKES"}, `unknown option "DISLIKES"`},
		{[]any{"LIKE.TOP", "video", 0}, "likes: limit out of range"},
		{[]any{"LIKE.TOP", "video", "ten"}, `bad n "ten"`},
		{[]any{"LIKE.TOP", "video", "DAY", "yesterday"}, `bad day "yesterday"`},
		{[]any{"LIKE.TOP", "video", "DAY", "2001-01-01"}, "likes: day board not kept"},
		{[]any{"LIKE.RANK", "video", 1, "DAY"}, "DAY needs a value"},
		{[]any{"LIKE.RECEIVED", "x"}, `bad owner "x"`},
	} {
		_, err := rc.Do(ctx, c.args...).Result()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error with %q", c.args, err, c.want)
		}
	}
	// Nothing changed.
	if c, _ := l.Counts("video", []uint64{1}, nil); c[0] != (likes.Counts{Likes: 1}) {
		t.Fatal(c)
	}
	if len(l.Businesses()) != 1 {
		t.Fatal(l.Businesses())
	}
}

func TestLikeCommandDocs(t *testing.T) {
	ts, _ := newLikesServer(t)
	rc := ts.client(t, nil)
	v, err := rc.Do(ctx, "COMMAND", "DOCS", "LIKE.LIKERS").Result()
	if err != nil || !strings.Contains(strings.ToLower(fmtAny(v)), "cursor") {
		t.Fatalf("COMMAND DOCS LIKE.LIKERS = %v, %v", v, err)
	}
}

func fmtAny(v any) string {
	switch x := v.(type) {
	case []any:
		var b strings.Builder
		for _, e := range x {
			b.WriteString(fmtAny(e) + " ")
		}
		return b.String()
	case map[any]any:
		var b strings.Builder
		for k, e := range x {
			b.WriteString(fmtAny(k) + " " + fmtAny(e) + " ")
		}
		return b.String()
	case string:
		return x
	}
	return ""
}

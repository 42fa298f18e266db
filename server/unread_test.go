package server

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/tallydb/tally/store"
	"github.com/tallydb/tally/timeline"
	"github.com/tallydb/tally/unread"
)

// newUnreadServer is a server with every command "tally serve" registers
// on a fresh database; the timeline and unread are its packages.
func newUnreadServer(t *testing.T) (*testServer, *timeline.Timeline, *unread.Unread) {
	t.Helper()
	ts, db := newDBServer(t)
	return ts, db.Timeline(), db.Unread()
}

func TestUnreadCommands(t *testing.T) {
	ts, tl, _ := newUnreadServer(t)
	rc := ts.client(t, nil)
	do := func(args ...any) any {
		t.Helper()
		v, err := rc.Do(ctx, args...).Result()
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return v
	}
	for _, tc := range []struct {
		args []any
		want any
	}{
		{[]any{"UNREAD.KIND", "ADD", "mention"}, "OK"},
		{[]any{"unread.kind", "add", "comment", "HINT", "8", "MAX", "64"}, "OK"},
		{[]any{"UNREAD.KIND", "LIST"}, []any{"mention", "comment"}},
		{[]any{"UNREAD.INCR", "42", "mention", "3"}, int64(3)},
		{[]any{"UNREAD.INCR", "42", "mention"}, int64(4)},
		{[]any{"UNREAD.INCR", "42", "mention", "-10"}, int64(0)},
		{[]any{"UNREAD.INCR", "42", "comment", "300"}, int64(300)},
		{[]any{"UNREAD.GET", "42"}, []any{"mention", int64(0), "comment", int64(300)}},
		{[]any{"UNREAD.MGET", "42", "7"}, []any{[]any{"mention", int64(0), "comment", int64(300)}, []any{"mention", int64(0), "comment", int64(0)}}},
		{[]any{"UNREAD.RESET", "42", "comment"}, "OK"},
		{[]any{"UNREAD.GET", "42"}, []any{"mention", int64(0), "comment", int64(0)}},
		{[]any{"UNREAD.INCR", "42", "mention", "2"}, int64(2)},
		{[]any{"UNREAD.RESET", "42"}, "OK"},
		{[]any{"UNREAD.GET", "42"}, []any{"mention", int64(0), "comment", int64(0)}},
		{[]any{"DOT.HAS", "42", "activity"}, int64(0)}, // undeclared: no dot
		{[]any{"NOTICE.UNREAD", "42", "nochan"}, int64(0)},
		{[]any{"DOT.MARK", "activity"}, int64(1)},
		{[]any{"DOT.HAS", "42", "activity"}, int64(1)}, // never cleared: the first mark shows
		{[]any{"DOT.CLEAR", "42", "activity"}, "OK"},
		{[]any{"UNREAD.FORGET", "42"}, "OK"},
		{[]any{"DOT.HAS", "42", "activity"}, int64(1)}, // forgotten: as one who never cleared
		{[]any{"DOT.CLEAR", "42", "activity"}, "OK"},
		{[]any{"DOT.MARK", "activity"}, int64(2)},
		{[]any{"DOT.HAS", "42", "activity"}, int64(1)},
		{[]any{"DOT.CLEAR", "42", "activity"}, "OK"},
		{[]any{"DOT.HAS", "42", "activity"}, int64(0)},
		{[]any{"NOTICE.POST", "system", "10"}, int64(1)},
		{[]any{"NOTICE.POST", "system", "10"}, int64(0)},
		{[]any{"NOTICE.UNREAD", "42", "system"}, int64(0)},
		{[]any{"NOTICE.POST", "system", "20"}, int64(1)},
		{[]any{"NOTICE.UNREAD", "42", "system"}, int64(0)}, // never read: new
		{[]any{"NOTICE.READ", "42", "system"}, "OK"},
		{[]any{"NOTICE.POST", "system", "30"}, int64(1)},
		{[]any{"NOTICE.UNREAD", "42", "system"}, int64(1)},
		{[]any{"NOTICE.READ", "42", "system"}, "OK"},
		{[]any{"NOTICE.UNREAD", "42", "system"}, int64(0)},
		{[]any{"UNREAD.FEED", "42"}, int64(0)},
	} {
		if got := do(tc.args...); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%v = %#v, want %#v", tc.args, got, tc.want)
		}
	}
	// Feed: follows and posts through the timeline.
	for _, f := range []uint64{100, 101} {
		if _, err := tl.Follow(42, f); err != nil {
			t.Fatal(err)
		}
	}
	for p := uint64(1); p <= 3; p++ {
		if _, err := tl.Publish(100+p%2, 5000+p); err != nil {
			t.Fatal(err)
		}
	}
	if got := do("UNREAD.FEED", "42"); got != int64(3) {
		t.Fatalf("UNREAD.FEED = %v, want 3", got)
	}
	if got := do("UNREAD.MFEED", "42", "7", "42"); !reflect.DeepEqual(got, []any{int64(3), int64(0), int64(3)}) {
		t.Fatalf("UNREAD.MFEED = %v, want [3 0 3]", got)
	}
	if got := do("UNREAD.FEEDRESET", "42"); got != "OK" {
		t.Fatalf("UNREAD.FEEDRESET = %v", got)
	}
	if got := do("UNREAD.FEED", "42"); got != int64(0) {
		t.Fatalf("UNREAD.FEED after reset = %v", got)
	}
	// COMMAND DOCS knows the group.
	docs, err := rc.Do(ctx, "COMMAND", "DOCS", "UNREAD.FEED").Result()
	if err != nil || !strings.Contains(fmt.Sprint(docs), "feed unread") {
		t.Fatalf("COMMAND DOCS UNREAD.FEED: %v %v", docs, err)
	}
}

func TestUnreadBadInput(t *testing.T) {
	ts, _, x := newUnreadServer(t)
	rc := ts.client(t, nil)
	if err := x.AddKind("mention", store.ColumnOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Do(ctx, "DOT.MARK", "activity").Result(); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Do(ctx, "UNREAD.INCR", "1", "mention", "5").Result(); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Do(ctx, "DOT.CLEAR", "1", "activity").Result(); err != nil {
		t.Fatal(err)
	}
	state := func() string {
		vals, _ := x.GetMany([]uint64{1, 2}, nil)
		has, _ := x.Has(1, "activity") // false while user 1's tag is kept
		return fmt.Sprintf("%v|%v|%+v|%v", x.Kinds(), vals, x.Channels(), has)
	}
	before := state()
	for _, tc := range []struct {
		args []any
		err  string
	}{
		{[]any{"UNREAD.KIND", "ADD", "mention"}, "already exists"},
		{[]any{"UNREAD.KIND", "ADD", "a.b"}, "invalid name"},
		{[]any{"UNREAD.KIND", "ADD", "x", "HINT", "12"}, "invalid option"},
		{[]any{"UNREAD.KIND", "ADD", "x", "HINT"}, "HINT needs a value"},
		{[]any{"UNREAD.KIND", "ADD", "x", "WIDE", "3"}, `unknown option "WIDE"`},
		{[]any{"UNREAD.KIND", "ADD", "x", "MAX", "-1"}, `bad max "-1"`},
		{[]any{"UNREAD.KIND", "ADD", "x", "MAX", "320"}, "invalid option: max 320"}, // not 64 (uint8)
		{[]any{"UNREAD.KIND", "ADD", "x", "HINT", "0"}, "invalid option: hint 0"},
		{[]any{"UNREAD.INCR", "1", "like"}, "unread: unknown kind"},
		{[]any{"UNREAD.FORGET", "1", "x"}, `bad uid "x"`}, // user 1 not forgotten either
		{[]any{"UNREAD.INCR", "x", "mention"}, `bad uid "x"`},
		{[]any{"UNREAD.INCR", "-1", "mention"}, `bad uid "-1"`},
		{[]any{"UNREAD.INCR", "1", "mention", "1.5"}, `bad n "1.5"`},
		{[]any{"UNREAD.INCR", "1", "mention", "1", "2"}, "wrong number of arguments"},
		{[]any{"UNREAD.INCR", "1", "mention", "4294967296"}, "value out of range"},
		{[]any{"UNREAD.INCR", "1"}, "wrong number of arguments"},
		{[]any{"UNREAD.RESET", "1", "mention", "nope"}, "unread: unknown kind"},
		{[]any{"UNREAD.RESET", "y"}, `bad uid "y"`},
		{[]any{"UNREAD.GET", "1", "2"}, "wrong number of arguments"},
		{[]any{"UNREAD.MGET", "1", "z"}, `bad uid "z"`},
		{[]any{"UNREAD.MGET"}, "wrong number of arguments"},
		{[]any{"UNREAD.FEED", "18446744073709551616"}, `bad uid "18446744073709551616"`},
		{[]any{"UNREAD.FEED", "1", "2"}, "wrong number of arguments"},
		{[]any{"UNREAD.MFEED", "1", "x"}, `bad uid "x"`},
		{[]any{"UNREAD.FEEDRESET"}, "wrong number of arguments"},
		{[]any{"UNREAD.FEEDRESET", "1", "2"}, "wrong number of arguments"},
		{[]any{"DOT.MARK", "a b"}, "invalid channel name"},
		{[]any{"DOT.CLEAR", "1", "nochan"}, "unread: unknown channel"},
		{[]any{"DOT.HAS", "1", "a.b"}, "invalid channel name"},
		{[]any{"DOT.HAS", "q", "activity"}, `bad uid "q"`},
		{[]any{"NOTICE.POST", "system", "0"}, "invalid notice id"},
		{[]any{"NOTICE.POST", "system", "-1"}, `bad id "-1"`},
		{[]any{"NOTICE.POST", "bad.name", "1"}, "invalid channel name"},
		{[]any{"NOTICE.POST", "new", "0"}, "invalid notice id"}, // checked before "new" is declared
		{[]any{"NOTICE.READ", "1", "nochan"}, "unread: unknown channel"},
		{[]any{"NOTICE.UNREAD", "1", "a.b"}, "invalid channel name"},
	} {
		_, err := rc.Do(ctx, tc.args...).Result()
		if err == nil || err == redis.Nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%v: %v, want an error with %q", tc.args, err, tc.err)
		}
	}
	if after := state(); after != before {
		t.Errorf("bad input changed unread:\nbefore %s\nafter  %s", before, after)
	}
	// The connection is still usable.
	if v, err := rc.Do(ctx, "UNREAD.GET", "1").Result(); err != nil || !reflect.DeepEqual(v, []any{"mention", int64(5)}) {
		t.Fatalf("after bad input: %v %v", v, err)
	}
}

// TestUnreadReadsNeverWrite: DOT.HAS, NOTICE.UNREAD, UNREAD.GET/MGET and
// UNREAD.KIND LIST write nothing, whether the channel is declared or not,
// and COMMAND says they are read-only.
func TestUnreadReadsNeverWrite(t *testing.T) {
	ts, _, x := newUnreadServer(t)
	rc := ts.client(t, nil)
	for _, args := range [][]any{
		{"UNREAD.KIND", "ADD", "mention"}, {"DOT.MARK", "activity"}, {"NOTICE.POST", "system", "1"},
	} {
		if err := rc.Do(ctx, args...).Err(); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
	}
	before := x.DB().Stats().LastSeq
	for _, tc := range []struct {
		args []any
		want any
	}{
		{[]any{"DOT.HAS", "1", "activity"}, int64(1)},
		{[]any{"DOT.HAS", "1", "nochan"}, int64(0)},
		{[]any{"NOTICE.UNREAD", "1", "system"}, int64(0)},
		{[]any{"NOTICE.UNREAD", "1", "nochan"}, int64(0)},
		{[]any{"UNREAD.GET", "1"}, []any{"mention", int64(0)}},
		{[]any{"UNREAD.MGET", "1", "2"}, []any{[]any{"mention", int64(0)}, []any{"mention", int64(0)}}},
		{[]any{"UNREAD.KIND", "LIST"}, []any{"mention"}},
	} {
		got, err := rc.Do(ctx, tc.args...).Result()
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%v = %#v, %v; want %#v", tc.args, got, err, tc.want)
		}
	}
	if after := x.DB().Stats().LastSeq; after != before {
		t.Errorf("reads wrote: last_seq %d -> %d", before, after)
	}
	if got := fmt.Sprint(x.Channels()); strings.Contains(got, "nochan") {
		t.Errorf("a read declared a channel: %s", got)
	}
	for _, name := range []string{"DOT.HAS", "NOTICE.UNREAD", "UNREAD.GET", "UNREAD.MGET", "UNREAD.FEED", "UNREAD.MFEED"} {
		info, err := rc.Do(ctx, "COMMAND", "INFO", name).Result()
		var flags any
		if all, ok := info.([]any); ok && len(all) == 1 {
			if cmd, ok := all[0].([]any); ok && len(cmd) > 2 {
				flags = cmd[2]
			}
		}
		if err != nil || !reflect.DeepEqual(flags, []any{"readonly", "fast"}) && !reflect.DeepEqual(flags, []any{"readonly"}) {
			t.Errorf("COMMAND INFO %s: %v %v; want readonly", name, info, err)
		}
	}
}

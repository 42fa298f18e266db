package server

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	tallydb "github.com/tallydb/tally"
)

var ctx = context.Background()

// row reads a row through the store, for checks that do not trust the
// server's own reads.
func (ts *testServer) row(t *testing.T, counter string, id uint64) []uint64 {
	t.Helper()
	c, err := ts.db.Counter(counter)
	if err != nil {
		t.Fatal(err)
	}
	vals, err := c.Get(id, nil)
	if err != nil {
		t.Fatal(err)
	}
	return vals
}

func TestCounterCommands(t *testing.T) {
	ts := newTestServer(t, nil)
	rc := ts.client(t, nil)

	// HINCRBY, HGET, HMGET, HGETALL.
	if v, err := rc.HIncrBy(ctx, "posts:7", "likes", 5).Result(); err != nil || v != 5 {
		t.Fatalf("HINCRBY = %d, %v; want 5", v, err)
	}
	if v, err := rc.HIncrBy(ctx, "posts:7", "likes", -2).Result(); err != nil || v != 3 {
		t.Fatalf("HINCRBY -2 = %d, %v; want 3", v, err)
	}
	// Saturation at zero: tally counts never go negative.
	if v, err := rc.HIncrBy(ctx, "posts:7", "reposts", -4).Result(); err != nil || v != 0 {
		t.Fatalf("HINCRBY below 0 = %d, %v; want 0", v, err)
	}
	if v, err := rc.HGet(ctx, "posts:7", "likes").Result(); err != nil || v != "3" {
		t.Fatalf("HGET = %q, %v", v, err)
	}
	if v, err := rc.HGet(ctx, "posts:8", "likes").Result(); err != nil || v != "0" {
		t.Fatalf("HGET of a row never written = %q, %v; want 0", v, err)
	}
	if _, err := rc.HGet(ctx, "posts:7", "nosuch").Result(); err != redis.Nil {
		t.Fatalf("HGET of an unknown column: %v, want nil", err)
	}
	if v, err := rc.HMGet(ctx, "posts:7", "likes", "nosuch", "reposts").Result(); err != nil ||
		!reflect.DeepEqual(v, []any{"3", nil, "0"}) {
		t.Fatalf("HMGET = %#v, %v", v, err)
	}
	if v, err := rc.HGetAll(ctx, "posts:7").Result(); err != nil ||
		!reflect.DeepEqual(v, map[string]string{"reposts": "0", "comments": "0", "likes": "3"}) {
		t.Fatalf("HGETALL = %v, %v", v, err)
	}
	if v, err := rc.HGetAll(ctx, "posts:1000").Result(); err != nil || len(v) != 3 || v["likes"] != "0" {
		t.Fatalf("HGETALL of a row never written = %v, %v; want every column at 0", v, err)
	}

	// HSET of some columns keeps the others, and replies the fields it
	// added: columns that read 0 and now hold a value (issue 20).
	if v, err := rc.HSet(ctx, "posts:7", "comments", 11).Result(); err != nil || v != 1 {
		t.Fatalf("HSET = %d, %v; want 1 (comments read 0)", v, err)
	}
	if v, err := rc.HSet(ctx, "posts:7", "comments", 12, "comments", 11, "reposts", 0).Result(); err != nil || v != 0 {
		t.Fatalf("HSET of a held column = %d, %v; want 0", v, err)
	}
	if got := ts.row(t, "posts", 7); !reflect.DeepEqual(got, []uint64{0, 11, 3}) {
		t.Fatalf("after partial HSET the row is %v, want [0 11 3]", got)
	}
	if err := rc.HSet(ctx, "posts:7", "reposts", 1, "comments", 2, "likes", 3).Err(); err != nil {
		t.Fatal(err)
	}
	if got := ts.row(t, "posts", 7); !reflect.DeepEqual(got, []uint64{1, 2, 3}) {
		t.Fatalf("after full HSET the row is %v", got)
	}
	if err := rc.HMSet(ctx, "posts:9", "likes", 4).Err(); err != nil {
		t.Fatal(err)
	}
	if got := ts.row(t, "posts", 9); !reflect.DeepEqual(got, []uint64{0, 0, 4}) {
		t.Fatalf("after HMSET the row is %v", got)
	}

	// EXISTS and DEL count rows with a non-zero value.
	if n, err := rc.Exists(ctx, "posts:7", "posts:9", "posts:10").Result(); err != nil || n != 2 {
		t.Fatalf("EXISTS = %d, %v", n, err)
	}
	if n, err := rc.Del(ctx, "posts:7", "posts:7", "posts:10").Result(); err != nil || n != 1 {
		t.Fatalf("DEL = %d, %v; want 1", n, err)
	}
	if got := ts.row(t, "posts", 7); !reflect.DeepEqual(got, []uint64{0, 0, 0}) {
		t.Fatalf("after DEL the row is %v", got)
	}
	if n, err := rc.Unlink(ctx, "posts:9").Result(); err != nil || n != 1 {
		t.Fatalf("UNLINK = %d, %v", n, err)
	}

	// String commands address the first column.
	if v, err := rc.Incr(ctx, "key:1").Result(); err != nil || v != 1 {
		t.Fatalf("INCR = %d, %v", v, err)
	}
	if v, err := rc.IncrBy(ctx, "key:1", 10).Result(); err != nil || v != 11 {
		t.Fatalf("INCRBY = %d, %v", v, err)
	}
	if v, err := rc.Decr(ctx, "key:1").Result(); err != nil || v != 10 {
		t.Fatalf("DECR = %d, %v", v, err)
	}
	if v, err := rc.DecrBy(ctx, "key:1", 25).Result(); err != nil || v != 0 {
		t.Fatalf("DECRBY past 0 = %d, %v; want 0 (saturates)", v, err)
	}
	if v, err := rc.DecrBy(ctx, "key:1", -6).Result(); err != nil || v != 6 {
		t.Fatalf("DECRBY -6 = %d, %v", v, err)
	}
	if v, err := rc.Get(ctx, "key:1").Result(); err != nil || v != "6" {
		t.Fatalf("GET = %q, %v", v, err)
	}
	if v, err := rc.HIncrBy(ctx, "posts:3", "reposts", 2).Result(); err != nil || v != 2 {
		t.Fatal(v, err)
	}
	if v, err := rc.Get(ctx, "posts:3").Result(); err != nil || v != "2" {
		t.Fatalf("GET of posts (first column reposts) = %q, %v", v, err)
	}
	if v, err := rc.MGet(ctx, "key:1", "key:2", "posts:3", "nosuch:1", "garbage").Result(); err != nil ||
		!reflect.DeepEqual(v, []any{"6", "0", "2", nil, nil}) {
		t.Fatalf("MGET = %#v, %v", v, err)
	}
	if v, err := rc.MGet(ctx, "key:1", "key:2", "key:1").Result(); err != nil ||
		!reflect.DeepEqual(v, []any{"6", "0", "6"}) {
		t.Fatalf("MGET of one counter = %#v, %v", v, err)
	}
	// redis-benchmark pads its random ids with zeros.
	if v, err := rc.Incr(ctx, "key:000000000001").Result(); err != nil || v != 7 {
		t.Fatalf("INCR of a zero-padded id = %d, %v", v, err)
	}
}

func TestTallyMget(t *testing.T) {
	ts := newTestServer(t, nil)
	rc := ts.client(t, nil)
	for id := uint64(1); id <= 5; id++ {
		if err := rc.HSet(ctx, fmt.Sprintf("posts:%d", id), "reposts", id, "comments", 10*id, "likes", 100*id).Err(); err != nil {
			t.Fatal(err)
		}
	}
	v, err := rc.Do(ctx, "TALLY.MGET", "posts", 3, 99, 1, 5).Result()
	if err != nil {
		t.Fatal(err)
	}
	want := []any{
		[]any{int64(3), int64(30), int64(300)},
		[]any{int64(0), int64(0), int64(0)},
		[]any{int64(1), int64(10), int64(100)},
		[]any{int64(5), int64(50), int64(500)},
	}
	if !reflect.DeepEqual(v, want) {
		t.Fatalf("TALLY.MGET = %#v\nwant %#v", v, want)
	}
	// Lower case works too; ids from another range are fine.
	if v, err := rc.Do(ctx, "tally.mget", "posts", uint64(1)<<40).Result(); err != nil ||
		!reflect.DeepEqual(v, []any{[]any{int64(0), int64(0), int64(0)}}) {
		t.Fatalf("tally.mget = %#v, %v", v, err)
	}
}

func TestWideColumn(t *testing.T) {
	ts := newTestServer(t, nil)
	rc := ts.client(t, nil)
	const top = 1<<63 - 1
	if err := rc.HSet(ctx, "big:1", "n", top-1).Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := rc.Incr(ctx, "big:1").Result(); err != nil || v != top {
		t.Fatalf("INCR to 2^63-1 = %d, %v", v, err)
	}
	// One more would not fit a RESP integer: refused, nothing changes.
	if err := rc.Incr(ctx, "big:1").Err(); err == nil || err.Error() != msgOverflow {
		t.Fatalf("INCR past 2^63-1: %v, want %q", err, msgOverflow)
	}
	if err := rc.HSet(ctx, "big:1", "n", "9223372036854775808").Err(); err == nil ||
		!strings.Contains(err.Error(), "out of range") {
		t.Fatalf("HSET 2^63: %v", err)
	}
	if got := ts.row(t, "big", 1); got[0] != top {
		t.Fatalf("row after refused writes: %v", got)
	}
	if v, err := rc.DecrBy(ctx, "big:1", top).Result(); err != nil || v != 0 {
		t.Fatalf("DECRBY = %d, %v", v, err)
	}
}

// TestWideColumnPipelined: pipelined increments of a 64-bit column are
// batched like any others (no width penalty), and the replies are those of
// running them one by one: the ones that would pass 2^63-1 are refused and
// change nothing, whatever else shares their batch.
func TestWideColumnPipelined(t *testing.T) {
	ts := newTestServer(t, nil)
	rc := ts.client(t, nil)
	const top = 1<<63 - 1
	if err := rc.HSet(ctx, "big:2", "n", top-2).Err(); err != nil {
		t.Fatal(err)
	}
	cmds, _ := rc.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.HIncrBy(ctx, "big:2", "n", 1)
		p.HIncrBy(ctx, "posts:2", "likes", 1)
		p.HIncrBy(ctx, "big:2", "n", 1)
		p.HIncrBy(ctx, "big:2", "n", 1) // past 2^63-1
		p.HIncrBy(ctx, "big:3", "n", 5)
		p.HIncrBy(ctx, "big:2", "n", -2)
		return nil
	})
	var got []string
	for _, c := range cmds {
		v, err := c.(*redis.IntCmd).Result()
		if err != nil {
			got = append(got, err.Error())
		} else {
			got = append(got, strconv.FormatInt(v, 10))
		}
	}
	want := []string{strconv.FormatInt(top-1, 10), "1", strconv.FormatInt(top, 10), msgOverflow, "5", strconv.FormatInt(top-2, 10)}
	if !slices.Equal(got, want) {
		t.Fatalf("replies %q, want %q", got, want)
	}
	if got := ts.row(t, "big", 2); got[0] != top-2 {
		t.Fatalf("big:2 = %v", got)
	}
}

// TestHsetPipelined: a pipeline of HSETs (folded into one store batch)
// replies exactly what the same commands reply one at a time, mixed with
// increments of the same row and repeated columns.
func TestHsetPipelined(t *testing.T) {
	ts := newTestServer(t, nil)
	rc := ts.client(t, nil)
	run := func(key string, p redis.Cmdable) []redis.Cmder {
		return []redis.Cmder{
			p.HSet(ctx, key, "comments", 4),
			p.HSet(ctx, key, "comments", 5, "likes", 0, "comments", 0),
			p.HIncrBy(ctx, key, "likes", 2),
			p.HSet(ctx, key, "likes", 0, "reposts", 7, "likes", 9),
			p.HSet(ctx, key, "comments", 1, "reposts", 7),
			p.HSet(ctx, key, "nope", 1),
			p.HMSet(ctx, key, "comments", 0),
			p.HSet(ctx, key, "comments", 3),
		}
	}
	text := func(cmds []redis.Cmder) []string {
		var out []string
		for _, c := range cmds {
			switch c := c.(type) {
			case *redis.IntCmd:
				v, err := c.Result()
				out = append(out, fmt.Sprint(v, err))
			case *redis.BoolCmd:
				v, err := c.Result()
				out = append(out, fmt.Sprint(v, err))
			}
		}
		return out
	}
	one := text(run("posts:21", rc))
	// Redis's counts: a field is added when it read 0 (absent) before the
	// command and holds a value after it.
	want := []string{"1 <nil>", "0 <nil>", "2 <nil>", "1 <nil>", "1 <nil>", "", "true <nil>", "1 <nil>"}
	for i := range want {
		if i == 5 {
			if !strings.Contains(one[i], "ERR no such column") {
				t.Fatalf("reply %d = %q, want a no-such-column error", i, one[i])
			}
			continue
		}
		if one[i] != want[i] {
			t.Fatalf("replies %q, want %q", one, want)
		}
	}
	var piped []redis.Cmder
	if _, err := rc.Pipelined(ctx, func(p redis.Pipeliner) error { piped = run("posts:22", p); return nil }); err == nil {
		t.Fatal("the pipeline's bad column did not fail it")
	}
	if got := text(piped); !slices.Equal(got, one) {
		t.Fatalf("pipelined replies %q, one at a time %q", got, one)
	}
	if a, b := ts.row(t, "posts", 21), ts.row(t, "posts", 22); !slices.Equal(a, b) || !slices.Equal(a, []uint64{7, 3, 9}) {
		t.Fatalf("rows %v and %v, want both [7 3 9]", a, b)
	}
}

// TestSchemaCommands: TALLY.COUNTER and TALLY.COLUMN, entries of the one
// command table (internal/commands) that "tally serve" registers.
func TestSchemaCommands(t *testing.T) {
	ts, db := newDBServer(t)
	mustSchema(t, db.Store())
	rc := ts.client(t, nil)
	for _, cmd := range [][]any{
		{"TALLY.COUNTER", "ADD", "views", "RANGEBITS", 40, "AGE", "4320h", "EPOCHMS", 0, "TIMESHIFT", 20},
		{"tally.counter", "add", "accounts"},
		{"TALLY.COUNTER", "ADD", "feeds", "HOTRANGES", 3},
		{"TALLY.COUNTER", "ADD", "hot", "KEEPHOT", "RANGEBITS", 16},
		{"TALLY.COLUMN", "ADD", "views", "n", "HINT", 8, "MAX", 64},
		{"TALLY.COLUMN", "ADD", "accounts", "followers"},
	} {
		if v, err := rc.Do(ctx, cmd...).Result(); err != nil || v != "OK" {
			t.Fatalf("%v = %v, %v", cmd, v, err)
		}
	}
	v, err := rc.Do(ctx, "TALLY.COUNTER", "LIST").StringSlice()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"posts range_bits=32 policy=keep-hot columns=reposts:16/32,comments:16/32,likes:16/32",
		"key range_bits=32 policy=keep-hot columns=value:16/32",
		"big range_bits=32 policy=keep-hot columns=n:16/64",
		"views range_bits=40 policy=age:4320h0m0s:0:20 columns=n:8/64",
		"accounts range_bits=32 policy=keep-hot columns=followers:16/32",
		"feeds range_bits=32 policy=hot-ranges:3 columns=",
		"hot range_bits=16 policy=keep-hot columns=",
	}
	if !reflect.DeepEqual(v, want) {
		t.Fatalf("TALLY.COUNTER LIST =\n%s\nwant\n%s", strings.Join(v, "\n"), strings.Join(want, "\n"))
	}
	// A counter created through the server is usable at once.
	if n, err := rc.HIncrBy(ctx, "accounts:42", "followers", 3).Result(); err != nil || n != 3 {
		t.Fatalf("HINCRBY on a new counter = %d, %v", n, err)
	}
	// So is a column added to a counter the server has already used.
	if err := rc.Do(ctx, "TALLY.COLUMN", "ADD", "accounts", "posts").Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := rc.HGetAll(ctx, "accounts:42").Result(); err != nil ||
		!reflect.DeepEqual(v, map[string]string{"followers": "3", "posts": "0"}) {
		t.Fatalf("HGETALL after a new column = %v, %v", v, err)
	}
	if n, err := rc.HIncrBy(ctx, "accounts:42", "posts", 1).Result(); err != nil || n != 1 {
		t.Fatalf("HINCRBY of the new column = %d, %v", n, err)
	}
	if err := rc.HSet(ctx, "accounts:42", "posts", 9).Err(); err != nil {
		t.Fatal(err)
	}
	if got := ts.row(t, "accounts", 42); !reflect.DeepEqual(got, []uint64{3, 9}) {
		t.Fatalf("row = %v", got)
	}

	// Schema errors: nothing is created.
	for _, tc := range []struct {
		cmd  []any
		want string
	}{
		{[]any{"TALLY.COUNTER", "ADD", "accounts"}, "already exists"},
		{[]any{"TALLY.COUNTER", "ADD", "bad:name"}, "invalid name"},
		{[]any{"TALLY.COUNTER", "ADD", "x", "RANGEBITS", 99}, "invalid"},
		{[]any{"TALLY.COUNTER", "ADD", "x", "RANGEBITS", 0}, "invalid option: range bits 0 (want 8..48)"},
		{[]any{"TALLY.COUNTER", "ADD", "x", "RANGEBITS"}, "needs a value"},
		{[]any{"TALLY.COUNTER", "ADD", "x", "AGE", "soon"}, `bad age "soon"`},
		{[]any{"TALLY.COUNTER", "ADD", "x", "AGE", "1h", "HOTRANGES", 2}, "mutually exclusive"},
		{[]any{"TALLY.COUNTER", "ADD", "x", "EPOCHMS", 5}, "go with AGE"},
		{[]any{"TALLY.COUNTER", "ADD", "x", "FAST"}, `unknown option "FAST"`},
		{[]any{"TALLY.COUNTER", "DROP", "x"}, "unknown subcommand 'DROP'. Try TALLY.COUNTER HELP."},
		{[]any{"TALLY.COLUMN", "ADD", "nosuch", "c"}, "counter not found"},
		{[]any{"TALLY.COLUMN", "ADD", "accounts", "followers"}, "already exists"},
		{[]any{"TALLY.COLUMN", "ADD", "accounts", "c", "HINT", 12}, "invalid"},
		{[]any{"TALLY.COLUMN", "ADD", "accounts", "c", "MAX", "x"}, `bad max "x"`},
		{[]any{"TALLY.COLUMN", "ADD", "accounts", "c", "WIDTH", 8}, `unknown option "WIDTH"`},
		{[]any{"TALLY.COLUMN", "ADD", "accounts"}, "wrong number of arguments for 'tally.column|add' command"},
	} {
		err := rc.Do(ctx, tc.cmd...).Err()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error with %q", tc.cmd, err, tc.want)
		}
	}
	if got := len(tallydb.UserCounters(ts.db)); got != 7 {
		t.Errorf("%d counters after the refused commands, want 7", got)
	}
	help, err := rc.Do(ctx, "TALLY.COUNTER", "HELP").StringSlice()
	if err != nil || len(help) < 5 || !strings.Contains(strings.Join(help, "\n"), "ADD name") {
		t.Errorf("TALLY.COUNTER HELP = %q, %v", help, err)
	}
}

// TALLY.HINCRBYONCE is HINCRBY applied once per (source, seq): the RESP
// form of "tally incr ... --source S --seq N".
func TestHincrbyOnce(t *testing.T) {
	ts := newTestServer(t, nil)
	rc := ts.client(t, nil)
	do := func(args ...any) (any, error) { return rc.Do(ctx, args...).Result() }
	for _, c := range []struct {
		args []any
		want string
	}{
		{[]any{"TALLY.HINCRBYONCE", "posts:1", "likes", 5, "queue", 10}, "[5 1]"},
		{[]any{"TALLY.HINCRBYONCE", "posts:1", "likes", 5, "queue", 10}, "[5 0]"}, // redelivered
		{[]any{"TALLY.HINCRBYONCE", "posts:1", "likes", 5, "queue", 9}, "[5 0]"},  // older
		{[]any{"TALLY.HINCRBYONCE", "posts:1", "likes", 2, "queue", 11}, "[7 1]"},
		{[]any{"TALLY.HINCRBYONCE", "posts:1", "likes", 1, "other", 1}, "[8 1]"},
	} {
		v, err := do(c.args...)
		if err != nil || fmt.Sprint(v) != c.want {
			t.Fatalf("%v = %v, %v; want %s", c.args, v, err, c.want)
		}
	}
	for _, c := range []struct {
		args []any
		err  string
	}{
		{[]any{"TALLY.HINCRBYONCE", "posts:1", "likes", 1, "queue", "x"}, msgNotInteger},
		{[]any{"TALLY.HINCRBYONCE", "posts:1", "nope", 1, "queue", 12}, "no such column"},
		{[]any{"TALLY.HINCRBYONCE", "nosuch:1", "likes", 1, "queue", 12}, "no such counter"},
		{[]any{"TALLY.HINCRBYONCE", "posts:1", "likes", 1, "", 12}, "source name"},
		{[]any{"TALLY.HINCRBYONCE", "posts:1", "likes", 1 << 40, "queue", 12}, msgOverflow},
	} {
		if _, err := do(c.args...); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%v: %v, want an error with %q", c.args, err, c.err)
		}
	}
	if got := ts.row(t, "posts", 1); got[2] != 8 {
		t.Fatalf("posts:1 = %v: refused calls changed it", got)
	}
	// A 64-bit column is capped at 2^63-1 as HINCRBY's is; the refused
	// call records nothing, so its sequence number stays usable.
	const top = 1<<63 - 1
	if err := rc.HSet(ctx, "big:5", "n", top).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := do("TALLY.HINCRBYONCE", "big:5", "n", 1, "wide", 20); err == nil || err.Error() != msgOverflow {
		t.Fatalf("past 2^63-1: %v, want %q", err, msgOverflow)
	}
	if v, err := do("TALLY.HINCRBYONCE", "big:5", "n", -1, "wide", 20); err != nil || fmt.Sprint(v) != fmt.Sprint([]any{int64(top - 1), int64(1)}) {
		t.Fatalf("seq 20 after its refusal: %v, %v", v, err)
	}
}

// TestCounterTableCommands: TALLY.INCR, TALLY.SET, TALLY.GET and
// TALLY.DELETE, the RESP forms of "tally incr", "set", "get" and "delete"
// (the same arguments, the same checks), beside Redis's HINCRBY and DEL.
func TestCounterTableCommands(t *testing.T) {
	ts, db := newDBServer(t)
	mustSchema(t, db.Store())
	rc := ts.client(t, nil)
	do := func(args ...any) any {
		t.Helper()
		v, err := rc.Do(ctx, args...).Result()
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return v
	}
	for _, c := range []struct {
		args []any
		want any
	}{
		{[]any{"TALLY.INCR", "posts", 7, "likes"}, int64(1)},
		{[]any{"TALLY.INCR", "posts", 7, "likes", 4}, int64(5)},
		{[]any{"TALLY.INCR", "posts", "7.likes", -2}, int64(3)},
		{[]any{"TALLY.INCR", "posts", "7.reposts"}, int64(1)},
		{[]any{"TALLY.INCR", "posts", 7, "reposts", -10}, int64(0)},
		{[]any{"TALLY.INCR", "posts", 7, "likes", 1, "SOURCE", "kafka-7", "SEQ", 42}, []any{int64(4), int64(1)}},
		{[]any{"TALLY.INCR", "posts", 7, "likes", 1, "seq", 42, "source", "kafka-7"}, []any{int64(4), int64(0)}},
		{[]any{"TALLY.INCR", "big", 1, "n", "9223372036854775807"}, int64(9223372036854775807)},
		{[]any{"TALLY.INCR", "big", 1, "n"}, "9223372036854775808"}, // above RESP's integers: a bulk string
		{[]any{"TALLY.SET", "posts", 9, 1, 2, 3}, "OK"},
		{[]any{"TALLY.GET", "posts", 9, "9.likes", 10, "7.comments"},
			[]any{[]any{int64(1), int64(2), int64(3)}, int64(3), []any{int64(0), int64(0), int64(0)}, int64(0)}},
		{[]any{"TALLY.DELETE", "posts", 9, 7, 999}, "OK"},
		{[]any{"TALLY.GET", "posts", 9, 7}, []any{[]any{int64(0), int64(0), int64(0)}, []any{int64(0), int64(0), int64(0)}}},
		{[]any{"TALLY.GET", "big", "1.n"}, []any{"9223372036854775808"}},
	} {
		if got := do(c.args...); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%v = %#v, want %#v", c.args, got, c.want)
		}
	}
	// The same rows through Redis's commands.
	if v, err := rc.HGetAll(ctx, "posts:9").Result(); err != nil || v["likes"] != "0" {
		t.Errorf("HGETALL posts:9 after TALLY.DELETE = %v, %v", v, err)
	}

	before := db.Store().Stats().LastSeq
	for _, c := range []struct {
		args []any
		want string
	}{
		{[]any{"TALLY.INCR", "posts", 7}, "ERR missing COLUMN"},
		{[]any{"TALLY.INCR", "posts", "x", "likes"}, `ERR bad id "x"`},
		{[]any{"TALLY.INCR", "posts", "7.", 1}, "ERR bad ID.COLUMN"},
		{[]any{"TALLY.INCR", "posts", 7, "likes", "many"}, `ERR bad delta "many"`},
		{[]any{"TALLY.INCR", "posts", "7.likes", 1, 2}, "ERR too many arguments"},
		{[]any{"TALLY.INCR", "posts", 7, "likes", 1, "SOURCE", "q"}, "ERR SOURCE and SEQ go together"},
		{[]any{"TALLY.INCR", "posts", 7, "likes", 1, "SOURCE", "", "SEQ", 1}, "ERR SOURCE needs a non-empty name"},
		{[]any{"TALLY.INCR", "posts", 7, "views"}, "ERR tally: column not found"},
		{[]any{"TALLY.INCR", "posts", 7, "x y"}, `ERR tally: invalid name: column name "x y"`},
		{[]any{"TALLY.INCR", "nosuch", 7, "likes"}, "ERR tally: counter not found"},
		{[]any{"TALLY.INCR", "posts", 7, "reposts", 4294967296}, "ERR tally: value out of range"},
		{[]any{"TALLY.SET", "posts", 9, 1}, "ERR tally: wrong number of values: set posts: got 1 values, the counter has 3 columns"},
		{[]any{"TALLY.SET", "posts", 9, 1, -2, 3}, `ERR bad value "-2"`},
		{[]any{"TALLY.GET", "posts"}, "ERR wrong number of arguments for 'tally.get' command"},
		{[]any{"TALLY.GET", "posts", "5.nope"}, "ERR tally: column not found"},
		{[]any{"TALLY.DELETE", "posts", 5, "x"}, `ERR bad id "x"`},
		{[]any{"TALLY.DELETE", "a.b", 5}, `ERR tally: invalid name: counter name "a.b"`},
	} {
		err := rc.Do(ctx, c.args...).Err()
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
	if after := db.Store().Stats().LastSeq; after != before {
		t.Errorf("refused commands wrote: last_seq %d -> %d", before, after)
	}

	// COMMAND DOCS shows the table's arguments, with the CLI's options as
	// tokens.
	docs, err := rc.Do(ctx, "COMMAND", "DOCS", "tally.incr", "tally.counter").Slice()
	if err != nil || len(docs) != 4 {
		t.Fatalf("COMMAND DOCS = %#v, %v", docs, err)
	}
	if args := fmt.Sprint(docMap(docs[1])["arguments"]); !strings.Contains(args, "token SOURCE") || !strings.Contains(args, "token SEQ") {
		t.Errorf("COMMAND DOCS tally.incr arguments: %s", args)
	}
	subs := docMap(docMap(docs[3])["subcommands"])
	for _, name := range []string{"tally.counter|add", "tally.counter|list"} {
		if _, ok := subs[name]; !ok {
			t.Errorf("COMMAND DOCS tally.counter lacks %s: %#v", name, subs)
		}
	}
	if args := fmt.Sprint(docMap(subs["tally.counter|add"])["arguments"]); !strings.Contains(args, "token IDEPOCHMS") ||
		!strings.Contains(args, "token IDTIMESHIFT") || !strings.Contains(args, "token KEEPHOT") {
		t.Errorf("COMMAND DOCS tally.counter|add arguments: %s", args)
	}
	// The old tokens are aliases.
	if err := rc.Do(ctx, "TALLY.COUNTER", "ADD", "aliased", "AGE", "1h", "EPOCHMS", "0", "TIMESHIFT", "20").Err(); err != nil {
		t.Errorf("EPOCHMS/TIMESHIFT: %v", err)
	}
	if err := rc.Do(ctx, "TALLY.COUNTER", "ADD", "aliased2", "AGE", "1h", "IDEPOCHMS", "0", "EPOCHMS", "0").Err(); err == nil ||
		!strings.Contains(err.Error(), "given twice") {
		t.Errorf("a name and its alias: %v", err)
	}
}

package store

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

func TestLoad(t *testing.T) {
	fs := vfs.NewMem()
	opts := testOptions(fs)
	opts.ColdBlockSize = 256
	db, err := Open("l", opts)
	must(t, err)
	// Keep the newest 2 ranges hot; older ones load straight into blocks.
	must(t, db.CreateCounter("posts", CounterOptions{RangeBits: 10, Age: AgePolicy{Kind: KeepNewest, HotRanges: 2}}))
	must(t, db.AddColumn("posts", "likes", ColumnOptions{}))
	must(t, db.AddColumn("posts", "comments", ColumnOptions{HintBits: 8}))
	c, _ := db.Counter("posts")
	// Range 0 exists and is cold before the load: its rows go through the log.
	must(t, c.Set(5, 1, 1))
	must(t, db.SealRange(context.Background(), "posts", 0))

	rng := rand.New(rand.NewPCG(1, 2))
	want := map[uint64][]uint64{5: {1, 1}}
	var in LoadRows
	for i := 0; i < 20000; i++ {
		id := uint64(rng.IntN(8 << 10)) // ranges 0..7
		v := []uint64{uint64(rng.IntN(3)), uint64(rng.IntN(300))}
		in.IDs = append(in.IDs, id)
		in.Vals = append(in.Vals, v...)
		want[id] = v // the last row of an id wins
	}
	var calls int
	st, err := db.Load(context.Background(), "posts", in, func(int) { calls++ })
	must(t, err)
	if st.ColdRanges != 5 || st.HotRanges != 2 || st.LoggedRows == 0 || calls == 0 {
		t.Fatalf("load stats %+v, %d progress calls", st, calls)
	}
	check := func(where string) {
		c, _ := db.Counter("posts")
		for id, w := range want {
			if got := get(t, c, id); !slices.Equal(got, w) {
				t.Fatalf("%s: id %d = %v, want %v", where, id, got, w)
			}
		}
	}
	check("after load")
	must(t, db.Verify(context.Background()))
	must(t, db.Close())
	db, err = Open("l", opts)
	must(t, err)
	defer db.Close()
	check("after reopen")

	// Bad input is refused and changes nothing.
	if _, err := db.Load(context.Background(), "posts", LoadRows{IDs: []uint64{1}, Vals: []uint64{1}}, nil); !errors.Is(err, ErrColumnCount) {
		t.Fatalf("short row: %v", err)
	}
	if _, err := db.Load(context.Background(), "posts", LoadRows{IDs: []uint64{1}, Vals: []uint64{1 << 40, 0}}, nil); !errors.Is(err, ErrValueRange) {
		t.Fatalf("value above max: %v", err)
	}
	if _, err := db.Load(context.Background(), "nope", LoadRows{}, nil); !errors.Is(err, ErrCounterNotFound) {
		t.Fatalf("unknown counter: %v", err)
	}
	check("after bad loads")
}

func TestLoadDurableOnCrash(t *testing.T) {
	fs := vfs.NewCrashableMem()
	opts := testOptions(fs)
	db, err := Open("l", opts)
	must(t, err)
	must(t, db.CreateCounter("u", CounterOptions{RangeBits: 12, Age: AgePolicy{Kind: AgeByTime, MaxAge: time.Hour, IDTimeShift: 0}}))
	must(t, db.AddColumn("u", "n", ColumnOptions{}))
	must(t, db.Checkpoint())
	// Ids are milliseconds since 1970 with no shift: small ids are ancient
	// (cold), ids near now are hot.
	now := uint64(time.Now().UnixMilli())
	in := LoadRows{IDs: []uint64{3, 4096 + 9, now, now + 1}, Vals: []uint64{7, 8, 9, 10}}
	st, err := db.Load(context.Background(), "u", in, nil)
	must(t, err)
	if st.ColdRanges != 2 || st.HotRows != 2 {
		t.Fatalf("stats %+v", st)
	}
	crashed := fs.CrashClone(vfs.CrashCloneCfg{})
	db.Close()
	opts.FS = crashed
	db, err = Open("l", opts)
	must(t, err)
	defer db.Close()
	c, _ := db.Counter("u")
	for i, id := range in.IDs {
		if v, _ := c.GetColumn(id, "n"); v != in.Vals[i] {
			t.Fatalf("id %d = %d after crash, want %d", id, v, in.Vals[i])
		}
	}
}

// TestMergeThenReopen: a merge writes no log record, yet the checkpoint
// after it must not bring the merged delta back.
func TestMergeThenReopen(t *testing.T) {
	fs := vfs.NewMem()
	db, err := Open("m", testOptions(fs))
	must(t, err)
	c := newPosts(t, db, 8)
	must(t, c.Set(3, 1, 2, 3))
	must(t, db.SealRange(context.Background(), "posts", 0))
	_, err = c.Incr(3, "likes", 1)
	must(t, err)
	must(t, db.Checkpoint())
	must(t, db.Compact(context.Background()))
	must(t, db.Close())
	db, err = Open("m", testOptions(fs))
	must(t, err)
	defer db.Close()
	st := db.Stats().Counters[0]
	if st.DeltaRows != 0 || st.ColdRows != 1 {
		t.Fatalf("after merge and reopen: %d delta rows, %d cold rows", st.DeltaRows, st.ColdRows)
	}
	c, _ = db.Counter("posts")
	if got := get(t, c, 3); !slices.Equal(got, []uint64{1, 2, 4}) {
		t.Fatalf("row = %v", got)
	}
}

// TestLoadZeroRowReplaces is issue 12's reproduction: an all-zero row left
// the old value, and a repeated id whose last line was all zeros kept an
// earlier value, unlike Set. Loading is "last row wins, including zeros" on
// every path: hot ranges, new ranges built straight into blocks, and ranges
// already cold whose rows go through the log. Checked before and after a
// crash (Load returns once everything is durable).
func TestLoadZeroRowReplaces(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewCrashableMem()
	opts := testOptions(fs)
	db, err := Open("z", opts)
	must(t, err)
	// Ranges of 256 ids; the newest range stays hot, older ones age.
	must(t, db.CreateCounter("p", CounterOptions{RangeBits: 8, Age: AgePolicy{Kind: KeepNewest, HotRanges: 1}}))
	must(t, db.AddColumn("p", "a", ColumnOptions{}))
	must(t, db.AddColumn("p", "b", ColumnOptions{}))
	c, _ := db.Counter("p")
	const (
		cold = 0 << 8 // range 0: cold before the load (logged path)
		blk  = 1 << 8 // range 1: new and old, built straight into blocks
		zero = 2 << 8 // range 2: new and old, only all-zero rows
		hot  = 9 << 8 // range 9: the newest, hot
	)
	for _, id := range []uint64{cold + 1, cold + 2, cold + 3, hot + 1, hot + 2, hot + 3} {
		must(t, c.Set(id, 7, 7))
	}
	must(t, db.SealRange(ctx, "p", 0))

	type row struct{ id, a, b uint64 }
	in := []row{
		{cold + 1, 0, 0},                   // replaces a cold row with zeros
		{cold + 2, 5, 5}, {cold + 2, 0, 0}, // last line zeros wins over an earlier line
		{cold + 4, 0, 0}, // deleting an absent row is fine
		{blk + 1, 1, 1}, {blk + 1, 0, 0},
		{blk + 2, 2, 2},
		{blk + 3, 0, 0},
		{zero + 1, 0, 0}, {zero + 2, 0, 0},
		{hot + 1, 0, 0},
		{hot + 2, 4, 4}, {hot + 2, 0, 0},
		{hot + 3, 0, 0}, {hot + 3, 6, 0}, // the last line wins the other way too
	}
	want := map[uint64][]uint64{cold + 1: {0, 0}, cold + 2: {0, 0}, cold + 3: {7, 7}, cold + 4: {0, 0},
		blk + 1: {0, 0}, blk + 2: {2, 2}, blk + 3: {0, 0}, zero + 1: {0, 0}, zero + 2: {0, 0},
		hot + 1: {0, 0}, hot + 2: {0, 0}, hot + 3: {6, 0}}
	var lr LoadRows
	for _, r := range in {
		lr.IDs = append(lr.IDs, r.id)
		lr.Vals = append(lr.Vals, r.a, r.b)
	}
	st, err := db.Load(ctx, "p", lr, nil)
	must(t, err)
	if st.Rows != 11 || st.ZeroRows != 9 || st.LoggedRows != 3 || st.ColdRows != 5 || st.HotRows != 3 || st.ColdRanges != 1 {
		t.Fatalf("stats %+v", st)
	}
	if rs := c.cs.ranges.Load().m[2]; rs != nil {
		t.Fatalf("a range of only all-zero rows was created: %s", rs.shape())
	}
	check := func(db *DB, where string) {
		t.Helper()
		must(t, db.Check())
		c, err := db.Counter("p")
		must(t, err)
		for id, w := range want {
			if got := get(t, c, id); !slices.Equal(got, w) {
				t.Fatalf("%s: id %d = %v, want %v", where, id, got, w)
			}
		}
	}
	check(db, "after load")
	must(t, db.Verify(ctx))
	crashed := fs.CrashClone(vfs.CrashCloneCfg{})
	must(t, db.Close())
	opts.FS = crashed
	db, err = Open("z", opts)
	must(t, err)
	defer db.Close()
	check(db, "after crash")
	must(t, db.Compact(ctx)) // merges the zeros into range 0's blocks
	check(db, "after compact")
}

// TestLoadColdFallbackKeepsZeroRows: when a writer creates a range while
// Load writes its blocks, Load goes through the log instead, and its
// all-zero rows must still delete (they were left out of the blocks).
func TestLoadColdFallbackKeepsZeroRows(t *testing.T) {
	fs := vfs.NewMem()
	opts := testOptions(fs)
	db := openTest(t, fs, "f", opts)
	must(t, db.CreateCounter("p", CounterOptions{RangeBits: 8, Age: AgePolicy{Kind: KeepNewest, HotRanges: 1}}))
	must(t, db.AddColumn("p", "a", ColumnOptions{}))
	c, _ := db.Counter("p")
	must(t, c.Set(9<<8, 1)) // range 9 is the newest; range 1 will be built cold
	var once bool
	db.opts.testHookBlockWrite = func() error {
		if !once {
			once = true
			must(t, c.Set(1<<8|5, 77)) // creates range 1 under the load
		}
		return nil
	}
	st, err := db.Load(context.Background(), "p", LoadRows{IDs: []uint64{1<<8 | 5, 1<<8 | 6}, Vals: []uint64{0, 3}}, nil)
	must(t, err)
	if !once || st.LoggedRows != 2 {
		t.Fatalf("fallback not taken: hook ran %v, stats %+v", once, st)
	}
	if got := get(t, c, 1<<8|5); got[0] != 0 {
		t.Fatalf("all-zero row lost in the fallback: %v", got)
	}
	if got := get(t, c, 1<<8|6); got[0] != 3 {
		t.Fatalf("row lost in the fallback: %v", got)
	}
	must(t, db.Check())
}

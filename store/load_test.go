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
	if _, err := db.Load(context.Background(), "posts", LoadRows{IDs: []uint64{1}, Vals: []uint64{1}}, nil); !errors.Is(err, ErrValueRange) {
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

package store

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

func TestCounterOps(t *testing.T) {
	fs := vfs.NewMem()
	db := openTest(t, fs, "d", nil)
	c := newPosts(t, db, 16)

	if got := get(t, c, 7); !slices.Equal(got, []uint64{0, 0, 0}) {
		t.Fatalf("absent row = %v", got)
	}
	v, err := c.Incr(7, "comments", 5)
	must(t, err)
	if v != 5 {
		t.Fatalf("incr = %d", v)
	}
	must(t, c.Set(1<<40|9, 111, 222, 333))
	if v, err = c.Incr(7, "comments", -9); err != nil || v != 0 {
		t.Fatalf("saturating decrement = %d, %v", v, err)
	}
	if _, err = c.Incr(7, "likes", math.MinInt64); err != nil {
		t.Fatal(err)
	}
	if got := get(t, c, 1<<40|9); !slices.Equal(got, []uint64{111, 222, 333}) {
		t.Fatalf("set row = %v", got)
	}
	if g, err := c.GetColumn(1<<40|9, "likes"); err != nil || g != 333 {
		t.Fatalf("GetColumn = %d, %v", g, err)
	}
	// Overflowing the hint width is exact.
	_, err = c.Incr(3, "likes", 1<<40)
	must(t, err)
	if g, _ := c.GetColumn(3, "likes"); g != 1<<40 {
		t.Fatalf("wide likes = %d", g)
	}
	ids := []uint64{3, 7, 1<<40 | 9, 12345}
	rows, err := c.MultiGet(ids, nil)
	must(t, err)
	want := []uint64{0, 0, 1 << 40, 0, 0, 0, 111, 222, 333, 0, 0, 0}
	if !slices.Equal(rows, want) {
		t.Fatalf("MultiGet = %v, want %v", rows, want)
	}
	must(t, c.Delete(1<<40|9))
	if got := get(t, c, 1<<40|9); !slices.Equal(got, []uint64{0, 0, 0}) {
		t.Fatalf("deleted row = %v", got)
	}

	// A batch is atomic: a failing op fails the whole batch.
	b := db.NewBatch()
	defer b.Close()
	must(t, b.Incr("posts", 100, "reposts", 1))
	must(t, b.Incr("posts", 100, "reposts", 1))
	must(t, b.Incr("posts", 101, "comments", math.MaxUint32+1)) // exceeds max 32 bits
	if err := b.Commit(); !errors.Is(err, ErrValueRange) {
		t.Fatalf("commit of overflowing batch: %v", err)
	}
	if got := get(t, c, 100); !slices.Equal(got, []uint64{0, 0, 0}) {
		t.Fatalf("failed batch left %v", got)
	}
	b.Reset()
	must(t, b.Incr("posts", 100, "reposts", 1))
	must(t, b.Incr("posts", 100, "reposts", 1))
	must(t, b.Set("posts", 102, 1, 2, 3))
	must(t, b.Commit())
	if b.Result(1) != 2 || get(t, c, 100)[0] != 2 {
		t.Fatalf("batch results %d, row %v", b.Result(1), get(t, c, 100))
	}
}

func TestBadInput(t *testing.T) {
	fs := vfs.NewMem()
	db := openTest(t, fs, "d", nil)
	c := newPosts(t, db, 16)
	_, err := c.Incr(1, "reposts", 10)
	must(t, err)
	before := db.Stats().LastSeq

	b := db.NewBatch()
	defer b.Close()
	cases := []struct {
		name string
		err  error
		want error
	}{
		{"create dup counter", db.CreateCounter("posts", CounterOptions{}), ErrExists},
		{"create bad name", db.CreateCounter("a.b", CounterOptions{}), ErrInvalidName},
		{"create empty name", db.CreateCounter("", CounterOptions{}), ErrInvalidName},
		{"range bits low", db.CreateCounter("x", CounterOptions{RangeBits: 4}), ErrInvalidOption},
		{"range bits high", db.CreateCounter("x", CounterOptions{RangeBits: 60}), ErrInvalidOption},
		{"hot ranges 0", db.CreateCounter("x", CounterOptions{Age: AgePolicy{Kind: KeepNewest}}), ErrInvalidOption},
		{"age 0", db.CreateCounter("x", CounterOptions{Age: AgePolicy{Kind: AgeByTime}}), ErrInvalidOption},
		{"age kind", db.CreateCounter("x", CounterOptions{Age: AgePolicy{Kind: 9}}), ErrInvalidOption},
		{"dup column", db.AddColumn("posts", "likes", ColumnOptions{}), ErrExists},
		{"column unknown counter", db.AddColumn("nope", "c", ColumnOptions{}), ErrCounterNotFound},
		{"bad hint", db.AddColumn("posts", "c", ColumnOptions{HintBits: 12}), ErrInvalidOption},
		{"bad max", db.AddColumn("posts", "c", ColumnOptions{MaxBits: 16}), ErrInvalidOption},
		{"hint above max", db.AddColumn("posts", "c", ColumnOptions{HintBits: 32, MaxBits: 32}), nil},
		{"unknown counter handle", func() error { _, err := db.Counter("nope"); return err }(), ErrCounterNotFound},
		{"unknown column incr", func() error { _, err := c.Incr(1, "nope", 1); return err }(), ErrColumnNotFound},
		{"unknown column get", func() error { _, err := c.GetColumn(1, "nope"); return err }(), ErrColumnNotFound},
		{"set arity", c.Set(1, 1, 2), ErrColumnCount},
		{"batch set arity", b.Set("posts", 1, 1), ErrColumnCount},
		{"set above max", c.Set(1, math.MaxUint32+1, 0, 0, 0), ErrValueRange},
		{"incr above max", func() error { _, err := c.Incr(1, "reposts", math.MaxUint32); return err }(), ErrValueRange},
		{"batch unknown counter", b.Incr("nope", 1, "x", 1), ErrCounterNotFound},
		{"batch commit after error", b.Commit(), ErrColumnCount}, // the first error
	}
	for _, tc := range cases {
		if tc.want == nil {
			if tc.err != nil {
				t.Errorf("%s: unexpected %v", tc.name, tc.err)
			}
			continue
		}
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, tc.err, tc.want)
		}
	}
	if got := get(t, c, 1); got[0] != 10 {
		t.Fatalf("bad input changed the row: %v", got)
	}
	if after := db.Stats().LastSeq; after != before {
		t.Fatalf("bad input wrote log records: seq %d -> %d", before, after)
	}
}

func TestOptionsValidate(t *testing.T) {
	_, err := Open("d", &Options{FS: vfs.NewMem(), Durability: 7, SyncInterval: -1, CacheSize: -1})
	if !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("got %v", err)
	}
	for _, s := range []string{"durability 7", "SyncInterval", "CacheSize"} {
		if !containsStr(err.Error(), s) {
			t.Errorf("error %q does not report %q", err, s)
		}
	}
	if _, err := ParseDurability("bogus"); !errors.Is(err, ErrInvalidOption) {
		t.Fatal(err)
	}
}

func containsStr(s, sub string) bool {
	return len(sub) == 0 || len(s) >= len(sub) && (s[:len(sub)] == sub || containsStr(s[1:], sub))
}

func TestReopenAndCheckpoint(t *testing.T) {
	fs := vfs.NewMem()
	db, err := Open("d", testOptions(fs))
	must(t, err)
	c := newPosts(t, db, 12)
	for i := uint64(0); i < 5000; i++ {
		_, err := c.Incr(i*7919, "reposts", int64(i%5))
		must(t, err)
	}
	must(t, db.Checkpoint())
	for i := uint64(0); i < 100; i++ {
		_, err := c.Incr(i*7919, "comments", 3)
		must(t, err)
	}
	must(t, db.AddColumn("posts", "views", ColumnOptions{HintBits: 32, MaxBits: 64}))
	_, err = c.Incr(7919, "views", 1<<33)
	must(t, err)
	st := db.Stats()
	if st.LogRecords != 101 {
		t.Fatalf("log records since checkpoint = %d", st.LogRecords)
	}
	must(t, db.Close())

	db2 := openTest(t, fs, "d", nil)
	c2, err := db2.Counter("posts")
	must(t, err)
	if n := c2.NumColumns(); n != 4 {
		t.Fatalf("columns after reopen: %d", n)
	}
	for i := uint64(0); i < 5000; i++ {
		want := []uint64{i % 5, 0, 0, 0}
		if i < 100 {
			want[1] = 3
		}
		if i == 1 {
			want[3] = 1 << 33
		}
		if got := get(t, c2, i*7919); !slices.Equal(got, want) {
			t.Fatalf("row %d = %v, want %v", i*7919, got, want)
		}
	}
}

func TestDirectoryErrors(t *testing.T) {
	fs := vfs.NewMem()
	db := openTest(t, fs, "d", nil)
	if _, err := Open("d", testOptions(fs)); !errors.Is(err, ErrLocked) {
		t.Fatalf("second open: %v", err)
	}
	must(t, db.Close())
	if _, err := db.Counter("x"); !errors.Is(err, ErrCounterNotFound) {
		t.Fatal(err)
	}

	must(t, fs.MkdirAll("other", 0o755))
	f, err := fs.Create("other/notes.txt", vfs.WriteCategoryUnspecified)
	must(t, err)
	f.Close()
	if _, err := Open("other", testOptions(fs)); !errors.Is(err, ErrNotStore) {
		t.Fatalf("open of foreign dir: %v", err)
	}
	f, err = fs.Create("d/TALLY", vfs.WriteCategoryUnspecified)
	must(t, err)
	f.Write([]byte("tally store format 99\n"))
	f.Close()
	if _, err := Open("d", testOptions(fs)); !errors.Is(err, ErrIncompatible) {
		t.Fatalf("open of future format: %v", err)
	}
}

func TestClosed(t *testing.T) {
	fs := vfs.NewMem()
	db := openTest(t, fs, "d", nil)
	c := newPosts(t, db, 16)
	must(t, db.Close())
	if _, err := c.Incr(1, "likes", 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("incr after close: %v", err)
	}
	if _, err := c.Get(1, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("get after close: %v", err)
	}
	if err := db.CreateCounter("x", CounterOptions{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("create after close: %v", err)
	}
	must(t, db.Close())
}

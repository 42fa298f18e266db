package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tallydb/tally/internal/limits"
)

// reopen closes db and opens the store again with the same options; the test
// fails if it does not open.
func reopen(t *testing.T, db *DB, dir string, o *Options) *DB {
	t.Helper()
	must(t, db.Close())
	return openTest(t, o.FS, dir, o)
}

// TestAgeBelowMillisecond is issue 12's reproduction: "counter add --age"
// below a millisecond was accepted, stored as 0 ms and refused by the
// decoder, so every later Open failed. Every age that is not a positive
// whole number of milliseconds is refused before it is written; every
// accepted age reads back exactly.
func TestAgeBelowMillisecond(t *testing.T) {
	fs := vfs.NewMem()
	o := testOptions(fs)
	db := openTest(t, fs, "a", o)
	age := func(d time.Duration) CounterOptions {
		return CounterOptions{RangeBits: 40, Age: AgePolicy{Kind: AgeByTime, MaxAge: d, IDEpochMs: 1288834974657, IDTimeShift: 22}}
	}
	for _, d := range []time.Duration{500 * time.Microsecond, time.Nanosecond, 1500 * time.Microsecond, 0, -time.Millisecond, math.MinInt64} {
		err := db.CreateCounter("posts", age(d))
		if !errors.Is(err, ErrInvalidOption) {
			t.Fatalf("age %v: got %v, want ErrInvalidOption", d, err)
		}
		if err := age(d).Validate(); !errors.Is(err, ErrInvalidOption) {
			t.Fatalf("Validate age %v: %v", d, err)
		}
		if n := len(db.Counters()); n != 0 {
			t.Fatalf("refused age %v left %d counters", d, n)
		}
	}
	db = reopen(t, db, "a", o)
	if n := len(db.Counters()); n != 0 {
		t.Fatalf("refused ages left %d counters on disk", n)
	}
	huge := time.Duration(math.MaxInt64).Truncate(time.Millisecond)
	for i, d := range []time.Duration{time.Millisecond, 4320 * time.Hour, huge} {
		must(t, db.CreateCounter(fmt.Sprint("c", i), age(d)))
	}
	db = reopen(t, db, "a", o)
	for i, d := range []time.Duration{time.Millisecond, 4320 * time.Hour, huge} {
		c, err := db.Counter(fmt.Sprint("c", i))
		must(t, err)
		if got := c.Info().Age.MaxAge; got != d {
			t.Errorf("age %v read back as %v", d, got)
		}
	}
}

// TestSixteenthColumnWithColdDelta is issue 12's reproduction: adding the
// 16th column to a counter whose cold range has a delta failed after the
// schema was durable, and every later Open failed ("hot: bad layout: 17
// columns"); a counter with 16 columns could never seal. Now the 16th column
// is taken by every tier, survives reopen, merges and seals, and a 17th is
// refused with ErrTooManyColumns before anything is written.
func TestSixteenthColumnWithColdDelta(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	o := testOptions(fs)
	o.ColdBlockSize = 128
	db := openTest(t, fs, "c", o)
	must(t, db.CreateCounter("wide", CounterOptions{RangeBits: 10}))
	for i := 0; i < MaxColumns-1; i++ {
		must(t, db.AddColumn("wide", fmt.Sprint("c", i), ColumnOptions{HintBits: 8}))
	}
	c, err := db.Counter("wide")
	must(t, err)
	row := func(id uint64, n int) []uint64 {
		v := make([]uint64, n)
		for i := range v {
			v[i] = id + uint64(i)
		}
		return v
	}
	for id := uint64(1); id < 200; id++ {
		must(t, c.Set(id, row(id, MaxColumns-1)...))
	}
	must(t, db.SealRange(ctx, "wide", 0))
	must(t, c.Set(7, row(1000, MaxColumns-1)...)) // creates the cold range's delta
	if rs := c.cs.lookupRange(7); rs.cold == nil || rs.delta == nil {
		t.Fatalf("range 0 is %s, want cold with a delta", rs.shape())
	}
	// Range 1 stays hot: the new column must reach both tiers.
	must(t, c.Set(1<<10|5, row(5, MaxColumns-1)...))

	must(t, db.AddColumn("wide", "c15", ColumnOptions{HintBits: 32, MaxBits: 64}))
	must(t, db.Check())
	_, err = c.Incr(7, "c15", 1<<40)
	must(t, err)
	_, err = c.Incr(1<<10|5, "c15", 3)
	must(t, err)

	check := func(db *DB, where string) {
		t.Helper()
		must(t, db.Check())
		c, err := db.Counter("wide")
		must(t, err)
		for id := uint64(1); id < 200; id++ {
			want := append(row(id, MaxColumns-1), 0)
			if id == 7 {
				want = append(row(1000, MaxColumns-1), 1<<40)
			}
			if got := get(t, c, id); !slices.Equal(got, want) {
				t.Fatalf("%s: id %d = %v, want %v", where, id, got, want)
			}
		}
		if got := get(t, c, 1<<10|5); !slices.Equal(got, append(row(5, MaxColumns-1), 3)) {
			t.Fatalf("%s: hot row = %v", where, got)
		}
	}
	check(db, "after add")
	db = reopen(t, db, "c", o)
	check(db, "after reopen")
	must(t, db.Compact(ctx)) // merges the 17-column delta into 16-column blocks
	check(db, "after merge")
	must(t, db.SealRange(ctx, "wide", 1)) // a 16-column counter seals
	check(db, "after sealing the hot range")
	must(t, db.Checkpoint())
	db = reopen(t, db, "c", o)
	check(db, "after second reopen")

	// The 17th column is refused and changes nothing, on disk either.
	before := db.Counters()
	err = db.AddColumn("wide", "c16", ColumnOptions{})
	if !errors.Is(err, ErrTooManyColumns) {
		t.Fatalf("17th column: %v", err)
	}
	if !slices.EqualFunc(before, db.Counters(), counterInfoEqual) {
		t.Fatalf("refused column changed the schema")
	}
	db = reopen(t, db, "c", o)
	if !slices.EqualFunc(before, db.Counters(), counterInfoEqual) {
		t.Fatalf("refused column changed the schema on disk")
	}
	check(db, "after refused column")
}

func counterInfoEqual(a, b CounterInfo) bool {
	return a.ID == b.ID && a.Name == b.Name && a.RangeBits == b.RangeBits && a.Age == b.Age && slices.Equal(a.Columns, b.Columns)
}

// TestSchemaErrorsNameTheCause checks each refused schema input names its
// rule, and that a long input is echoed truncated, never in full.
func TestSchemaErrorsNameTheCause(t *testing.T) {
	db := openTest(t, vfs.NewMem(), "n", nil)
	must(t, db.CreateCounter("posts", CounterOptions{}))
	long := strings.Repeat("n", 10<<10)
	cases := []struct {
		err      error
		want     error
		contains []string
	}{
		{db.CreateCounter(strings.Repeat("a", limits.MaxNameLen+1), CounterOptions{}), ErrInvalidName, []string{"is 65 bytes, limit 64"}},
		{db.CreateCounter(long, CounterOptions{}), ErrInvalidName, []string{"is 10240 bytes, limit 64", "…"}},
		{db.AddColumn("posts", long, ColumnOptions{}), ErrInvalidName, []string{"column name", "is 10240 bytes, limit 64"}},
		{db.CreateCounter("", CounterOptions{}), ErrInvalidName, []string{"empty counter name"}},
		{db.CreateCounter("-x", CounterOptions{}), ErrInvalidName, []string{"starts with '-'"}},
		{db.CreateCounter("a.b", CounterOptions{}), ErrInvalidName, []string{`'.' at byte 1`}},
		{db.CreateCounter("é", CounterOptions{}), ErrInvalidName, []string{`'é' at byte 0`}},
		{db.AddColumn(long, "c", ColumnOptions{}), ErrCounterNotFound, []string{"is 10240 bytes, limit 64"}},
		{func() error { _, err := db.Counter(long); return err }(), ErrInvalidName, []string{"is 10240 bytes"}},
		{func() error { _, err := db.Counter("a.b"); return err }(), ErrCounterNotFound, []string{"'.'"}},
		{func() error { _, err := db.Counter("nope"); return err }(), ErrCounterNotFound, []string{`"nope"`}},
		{db.CreateCounter("x", CounterOptions{RangeBits: 49, Age: AgePolicy{Kind: AgeByTime, IDTimeShift: 41, IDEpochMs: -1}}),
			ErrInvalidOption, []string{"range bits 49 (want 8..48)", "age 0s (want > 0)", "id time shift 41 (want 0..40)", "id epoch -1 ms"}},
	}
	for i, tc := range cases {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("case %d: got %v, want %v", i, tc.err, tc.want)
			continue
		}
		for _, s := range tc.contains {
			if !strings.Contains(tc.err.Error(), s) {
				t.Errorf("case %d: %q does not say %q", i, tc.err, s)
			}
		}
		if len(tc.err.Error()) > 1000 {
			t.Errorf("case %d: error echoes %d bytes", i, len(tc.err.Error()))
		}
	}
	if n := len(db.Counters()); n != 1 {
		t.Fatalf("refused input created counters: %d", n)
	}
}

// TestKindFieldsNotStored: fields an age policy does not use are dropped, so
// Counters shows what was stored and reopen shows the same.
func TestKindFieldsNotStored(t *testing.T) {
	fs := vfs.NewMem()
	o := testOptions(fs)
	db := openTest(t, fs, "k", o)
	must(t, db.CreateCounter("hot", CounterOptions{Age: AgePolicy{Kind: KeepHot, HotRanges: 3, MaxAge: time.Microsecond, IDEpochMs: -5}}))
	must(t, db.CreateCounter("newest", CounterOptions{Age: AgePolicy{Kind: KeepNewest, HotRanges: 3, MaxAge: time.Microsecond}}))
	before := db.Counters()
	if before[0].Age != (AgePolicy{Kind: KeepHot}) || before[1].Age != (AgePolicy{Kind: KeepNewest, HotRanges: 3}) {
		t.Fatalf("policies stored as %+v, %+v", before[0].Age, before[1].Age)
	}
	db = reopen(t, db, "k", o)
	if !slices.EqualFunc(before, db.Counters(), counterInfoEqual) {
		t.Fatalf("schema changed across reopen: %+v vs %+v", before, db.Counters())
	}
}

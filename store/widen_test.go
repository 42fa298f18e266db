package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// idScheme generates the i-th id of one of the id schemes a counter sees.
type idScheme struct {
	name string
	id   func(i uint64) uint64
	// limit is the bytes per hot row (two 2-byte columns, default options)
	// the store's accounting must stay under.
	limit float64
}

// snowflakeID is Twitter's layout: ms since the epoch << 22, then worker and
// sequence bits; one post every 400 ms (the "tally load" example).
func snowflakeID(i uint64) uint64 {
	const t0 = 1_700_000_000_000 - 1288834974657
	return (t0+400*i)<<22 | (i%32)<<12 | i%4096
}

// randomID is a bijection of i onto 64 bits (distinct ids that look
// random).
func randomID(i uint64) uint64 {
	x := i*0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019
	x ^= x >> 31
	x *= 0xBF58476D1CE4E5B9
	return x ^ x>>29
}

var idSchemes = []idScheme{
	{"dense", func(i uint64) uint64 { return i + 1 }, 12},
	{"snowflake", snowflakeID, 12},
	// NB: one range of 64-bit keys stores 7 key bytes per row (11-byte
	// rows; 12.97 B/row at the average load, 12.7 measured at 1M rows):
	// the ~12 B aim is missed by 6% for random ids. Reaching it needs
	// fewer stored key bits (quotienting) or segments that scale with the
	// table; see bench/RESULTS.md.
	{"random", randomID, 13},
}

// widenRows is the row count of TestBytesPerRowByIDScheme: 1M by default
// (about a second per scheme here), TALLY_WIDEN_ROWS to change it.
func widenRows(t *testing.T) int {
	if s := os.Getenv("TALLY_WIDEN_ROWS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			t.Fatalf("TALLY_WIDEN_ROWS=%q", s)
		}
		return n
	}
	return 1_000_000
}

// newPair creates counter "posts" with the default options and two 16-bit
// columns, the layout of the example.
func newPair(t testing.TB, db *DB) *Counter {
	t.Helper()
	must(t, db.CreateCounter("posts", CounterOptions{}))
	must(t, db.AddColumn("posts", "likes", ColumnOptions{}))
	must(t, db.AddColumn("posts", "reposts", ColumnOptions{}))
	c, err := db.Counter("posts")
	must(t, err)
	return c
}

func counterStats(t testing.TB, db *DB, name string) CounterStats {
	t.Helper()
	for _, c := range db.Stats().Counters {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no stats for counter %s", name)
	return CounterStats{}
}

// TestBytesPerRowByIDScheme loads each id scheme with default options and
// checks the store's own accounting (deterministic, so this is not a
// timing): the ranges must have sized themselves.
func TestBytesPerRowByIDScheme(t *testing.T) {
	n := widenRows(t)
	for _, sc := range idSchemes {
		t.Run(sc.name, func(t *testing.T) {
			fs := vfs.NewMem()
			db := openTest(t, fs, "db", nil)
			c := newPair(t, db)
			in := LoadRows{IDs: make([]uint64, n), Vals: make([]uint64, 2*n)}
			for i := range n {
				in.IDs[i] = sc.id(uint64(i))
				in.Vals[2*i], in.Vals[2*i+1] = 1+uint64(i)%50, uint64(i)%7
			}
			_, err := db.Load(context.Background(), "posts", in, nil)
			must(t, err)
			st := counterStats(t, db, "posts")
			bpr := float64(st.MemBytes) / float64(st.HotRows)
			t.Logf("%s: %d rows, %d ranges of %d bits, %.2f B/row (accounting), warning %q",
				sc.name, st.HotRows, st.HotRanges, st.RangeBits, bpr, st.Warning)
			if st.HotRows != n {
				t.Fatalf("%d hot rows, want %d", st.HotRows, n)
			}
			if bpr > sc.limit {
				t.Errorf("%.2f B/row, limit %.1f (%d ranges of %d bits)", bpr, sc.limit, st.HotRanges, st.RangeBits)
			}
			if st.Warning != "" {
				t.Errorf("warning %q", st.Warning)
			}
			for _, i := range []uint64{0, uint64(n) / 2, uint64(n) - 1} {
				if got := get(t, c, sc.id(i)); got[0] != 1+i%50 || got[1] != i%7 {
					t.Errorf("id %d: %v", sc.id(i), got)
				}
			}
		})
	}
}

// TestWidenOnCommit writes snowflake and random ids one commit at a time:
// the commit path widens a KeepHot counter once it holds many thin ranges,
// and the width and every row survive a crash before the next checkpoint
// (chunks cut at the old width are rebased) and a reopen.
func TestWidenOnCommit(t *testing.T) {
	for _, sc := range idSchemes[1:] {
		t.Run(sc.name, func(t *testing.T) {
			fs := vfs.NewCrashableMem()
			db := openTest(t, fs, "db", nil)
			c := newPair(t, db)
			const early, total = 20, 3000
			for i := range uint64(total) {
				if i == early {
					must(t, db.Checkpoint()) // chunks at 32 bits
				}
				must(t, c.Set(sc.id(i), i+1, i%3))
			}
			st := counterStats(t, db, "posts")
			if st.RangeBits < 48 || st.HotRanges > 1 {
				t.Fatalf("after %d commits: %d ranges of %d bits, want widened", total, st.HotRanges, st.RangeBits)
			}
			crash := fs.CrashClone(vfs.CrashCloneCfg{})
			crashStop(t, db)
			db2 := openTest(t, crash, "db", nil)
			if r := db2.Stats().Recovery; r.ChunksLoaded == 0 {
				t.Fatalf("no checkpoint chunk rebased: %+v", r)
			}
			c2, err := db2.Counter("posts")
			must(t, err)
			for i := range uint64(total) {
				if got := get(t, c2, sc.id(i)); got[0] != i+1 || got[1] != i%3 {
					t.Fatalf("after crash: id %d = %v", sc.id(i), got)
				}
			}
			if st2 := counterStats(t, db2, "posts"); st2.RangeBits != st.RangeBits {
				t.Fatalf("after crash: %d bits, was %d", st2.RangeBits, st.RangeBits)
			}
			must(t, db2.Verify(context.Background()))
			must(t, db2.Close())
			db3 := openTest(t, crash, "db", nil)
			if st3 := counterStats(t, db3, "posts"); st3.RangeBits != st.RangeBits || st3.HotRows != total {
				t.Fatalf("after reopen: %d rows in %d bits, want %d in %d", st3.HotRows, st3.RangeBits, total, st.RangeBits)
			}
		})
	}
}

// TestExplicitRangeBitsStayFixed: --range-bits is an override; a counter
// created with it never widens, and its stats warn once thin ranges cost
// more than twice the target.
func TestExplicitRangeBitsStayFixed(t *testing.T) {
	db := openTest(t, vfs.NewMem(), "db", nil)
	must(t, db.CreateCounter("posts", CounterOptions{RangeBits: 32}))
	must(t, db.AddColumn("posts", "likes", ColumnOptions{}))
	c, err := db.Counter("posts")
	must(t, err)
	if c.Info().AutoRangeBits {
		t.Fatal("explicit RangeBits has AutoRangeBits")
	}
	const n = 300
	for i := range uint64(n) {
		must(t, c.Set(snowflakeID(i*10), 1)) // one row every 4 s: a range each
	}
	st := counterStats(t, db, "posts")
	if st.RangeBits != 32 || st.HotRanges < n/2 {
		t.Fatalf("%d ranges of %d bits, want fixed 32", st.HotRanges, st.RangeBits)
	}
	if st.Warning == "" {
		t.Fatalf("no warning at %.0f B/row", st.BytesPerHotRow())
	}
	t.Log(st.Warning)
}

func TestChooseBits(t *testing.T) {
	for _, tc := range []struct {
		cur    uint
		rows   int
		span   uint64
		ranges map[uint]int
		want   uint
	}{
		{32, 100, 100, map[uint]int{32: 1}, 32},
		// The 200,000 snowflake ids over 22 hours.
		{32, 200_000, 22 * 3600 * 1000 << 22, map[uint]int{32: 78125, 40: 300, 48: 2}, 48},
		// 160 snowflake ids over 64 s fit one 40-bit range, but a range
		// of their density needs 48 bits.
		{32, 160, 64 * 1000 << 22, map[uint]int{32: 64, 40: 1}, 48},
		{32, 64, 0, map[uint]int{32: 64, 40: 64, 48: 64, 56: 64, 64: 1}, 64},
		{36, 10, 1 << 38, map[uint]int{36: 5, 40: 1}, 56},
		{32, 10 * widenRowsPerRange, 10 << 32, map[uint]int{32: 10}, 32},
	} {
		got := chooseBits(tc.cur, tc.rows, tc.span, func(b uint) int { return tc.ranges[b] })
		if got != tc.want {
			t.Errorf("chooseBits(%d, %d, %v) = %d, want %d", tc.cur, tc.rows, tc.ranges, got, tc.want)
		}
	}
}

func TestRangeBitsEncoding(t *testing.T) {
	for _, bits := range []uint{8, 40, 64} {
		b := appendRangeBits([]byte("x"), bits)
		got, err := decodeRangeBits(b[1:])
		if err != nil || got != bits {
			t.Fatalf("round trip %d: %d, %v", bits, got, err)
		}
	}
	b := appendRangeBits(nil, 48)
	b[1] ^= 1
	if _, err := decodeRangeBits(b); err == nil {
		t.Fatal("damaged value decoded")
	}
}

// TestMemoryBudget: one knob sizes Pebble's memtable and block cache and the
// decoded cold block cache; explicit sizes win; a budget too small or
// negative is refused with ErrInvalidOption and creates nothing.
func TestMemoryBudget(t *testing.T) {
	fs := vfs.NewMem()
	db := openTest(t, fs, "db", &Options{FS: fs, DisableBackground: true})
	if got, want := db.Stats().Memory, (MemoryStats{64 << 20, 8 << 20, 16 << 20, 32 << 20}); got != want {
		t.Fatalf("default: %+v, want %+v", got, want)
	}
	must(t, db.Close())
	db = openTest(t, fs, "db", &Options{FS: fs, DisableBackground: true, MemoryBudget: 32 << 20, CacheSize: 100 << 20})
	if got, want := db.Stats().Memory, (MemoryStats{32 << 20, 4 << 20, 100 << 20, 16 << 20}); got != want {
		t.Fatalf("32 MiB with CacheSize: %+v, want %+v", got, want)
	}
	must(t, db.Close())
	for _, b := range []int64{-1, 1 << 20, MinMemoryBudget - 1} {
		if _, err := Open("new", &Options{FS: fs, MemoryBudget: b}); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("MemoryBudget %d: %v, want ErrInvalidOption", b, err)
		}
	}
	if ok, _ := vfs.Clone(fs, fs, "new", "x"); ok {
		t.Fatal("a refused Open created the store")
	}
}

// TestWidenWhileReading widens a counter while readers run Get and MultiGet
// on it: a reader sees, for every id it checks, either the row or (before
// the commit that wrote it) zeros, never another id's row; run under -race
// it also checks that readers take the width from their snapshot only.
func TestWidenWhileReading(t *testing.T) {
	db := openTest(t, vfs.NewMem(), "db", nil)
	c := newPair(t, db)
	const n = 2000
	var written atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids := make([]uint64, 10)
			var dst []uint64
			for k := uint64(r); ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				done := uint64(written.Load())
				for j := range ids {
					ids[j] = randomID((k*7 + uint64(j)*13) % n)
				}
				var err error
				if dst, err = c.MultiGet(ids, dst); err != nil {
					errs <- err
					return
				}
				for j, id := range ids {
					i := (k*7 + uint64(j)*13) % n
					if got := dst[2*j]; got != 0 && got != i+1 || i < done && got != i+1 {
						errs <- fmt.Errorf("id %d (row %d, %d written): %v", id, i, done, dst[2*j:2*j+2])
						return
					}
				}
			}
		}()
	}
	for i := range uint64(n) {
		must(t, c.Set(randomID(i), i+1, 1))
		written.Store(int64(i + 1))
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if st := counterStats(t, db, "posts"); st.RangeBits != 64 || st.HotRows != n {
		t.Fatalf("%d rows in %d-bit ranges, want %d in 64", st.HotRows, st.RangeBits, n)
	}
}

package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tallydb/tally/internal/testutil"
)

type scanRow struct {
	id   uint64
	vals []uint64
}

// scanAll scans c from 0 to the end in pages of random sizes (1..maxPage),
// checking the cursor contract on the way, and returns every row visited.
func scanAll(t testing.TB, c *Counter, rng *rand.Rand, maxPage int) []scanRow {
	t.Helper()
	var rows []scanRow
	from := uint64(0)
	for calls := 0; ; calls++ {
		limit := 1 + rng.IntN(maxPage)
		n := 0
		next, err := c.Scan(context.Background(), from, limit, func(id uint64, vals []uint64) bool {
			if id < from {
				t.Fatalf("scan from %d visited %d", from, id)
			}
			if len(rows) > 0 && id <= rows[len(rows)-1].id {
				t.Fatalf("scan visited %d after %d", id, rows[len(rows)-1].id)
			}
			rows = append(rows, scanRow{id, slices.Clone(vals)})
			n++
			return true
		})
		must(t, err)
		if n > limit {
			t.Fatalf("page of limit %d visited %d rows", limit, n)
		}
		if next == 0 {
			return rows
		}
		if n < limit {
			t.Fatalf("page from %d visited %d < limit %d rows and did not end the scan (next %d)", from, n, limit, next)
		}
		if next <= rows[len(rows)-1].id {
			t.Fatalf("next %d is not after the last row %d", next, rows[len(rows)-1].id)
		}
		from = next
		if calls > 1<<20 {
			t.Fatal("scan does not end")
		}
	}
}

// checkScan compares a full scan of counter name with the model.
func checkScan(t *testing.T, where string, db *DB, m *model, name string, rng *rand.Rand) {
	t.Helper()
	c, err := db.Counter(name)
	must(t, err)
	got := scanAll(t, c, rng, []int{1, 3, 17, 200, 5000}[rng.IntN(5)])
	var want []uint64
	for id, v := range m.rows[name] {
		if !allZero(v) {
			want = append(want, id)
		}
	}
	slices.Sort(want)
	if len(got) != len(want) {
		t.Fatalf("%s: %s: scan visited %d rows, model has %d", where, name, len(got), len(want))
	}
	for i, r := range got {
		if r.id != want[i] {
			t.Fatalf("%s: %s: scan row %d is id %d, model %d", where, name, i, r.id, want[i])
		}
		if w := m.get(name, r.id); !slices.Equal(r.vals, w) {
			t.Fatalf("%s: %s: id %d scanned %v, model %v", where, name, r.id, r.vals, w)
		}
	}
}

// TestScanModel writes random rows (dense clusters, snowflake-like ids over
// many ranges, random 64-bit ids, the extremes) with Incr, Set and Delete,
// seals ranges, merges deltas, checkpoints and reopens, and compares full
// scans in random page sizes with a model. One counter has narrow fixed
// ranges (many of them), one the default widening ranges.
func TestScanModel(t *testing.T) {
	seeds := testutil.EnvInt(t, "TALLY_SCAN_SEEDS", 3)
	steps := testutil.EnvInt(t, "TALLY_SCAN_STEPS", 1500)
	if testing.Short() {
		steps /= 3
	}
	base, _ := testutil.EnvSeed(t, "TALLY_SCAN_SEED", 1)
	for s := range uint64(seeds) {
		t.Run(fmt.Sprint("seed", base+s), func(t *testing.T) { runScanModel(t, base+s, steps) })
	}
}

func runScanModel(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, 20))
	fs := vfs.NewMem()
	opts := testOptions(fs)
	opts.ColdBlockSize = 48 // many blocks per cold range
	opts.CheckpointChunkRows = 7
	db := openTest(t, fs, "scan", opts)
	ctx := context.Background()
	m := &model{cols: map[string][]Column{}, rows: map[string]map[uint64][]uint64{}}
	counters := []string{"narrow", "auto"}
	for i, name := range counters {
		o := CounterOptions{RangeBits: 12}
		if i == 1 {
			o = CounterOptions{}
		}
		must(t, db.CreateCounter(name, o))
		m.rows[name] = map[uint64][]uint64{}
		for _, col := range []Column{{Name: "a", HintBits: 8, MaxBits: 32}, {Name: "b", HintBits: 16, MaxBits: 64}} {
			must(t, db.AddColumn(name, col.Name, ColumnOptions{HintBits: col.HintBits, MaxBits: col.MaxBits}))
			m.cols[name] = append(m.cols[name], col)
		}
	}
	snowflake := func() uint64 {
		ms := uint64(1_700_000_000_000 + rng.IntN(5_000_000))
		return ms<<22 | uint64(rng.IntN(4))<<12 | uint64(rng.IntN(64))
	}
	var used []uint64
	randID := func() uint64 {
		if len(used) > 0 && rng.IntN(3) == 0 {
			return used[rng.IntN(len(used))]
		}
		var id uint64
		switch p := rng.IntN(20); {
		case p < 8:
			id = uint64(rng.IntN(6))<<12 | uint64(rng.IntN(400))
		case p < 16:
			id = snowflake()
		case p < 18:
			id = rng.Uint64()
		case p < 19:
			id = math.MaxUint64 - uint64(rng.IntN(3))
		default:
			id = uint64(rng.IntN(3))
		}
		used = append(used, id)
		return id
	}
	verify := func(where string) {
		t.Helper()
		must(t, db.Check())
		for _, name := range counters {
			checkScan(t, where, db, m, name, rng)
		}
	}
	for step := range steps {
		name := counters[rng.IntN(len(counters))]
		c, err := db.Counter(name)
		must(t, err)
		cols := m.cols[name]
		id := randID()
		switch p := rng.IntN(100); {
		case p < 45:
			col := rng.IntN(len(cols))
			d := int64(rng.IntN(40)) - 8
			if _, err := c.Incr(id, cols[col].Name, d); err != nil {
				t.Fatalf("step %d: incr: %v", step, err)
			}
			v := slices.Clone(m.get(name, id))
			v[col] = uint64(max(0, int64(v[col])+d))
			m.put(name, id, v)
		case p < 70:
			v := make([]uint64, len(cols))
			for i := range v {
				if rng.IntN(3) > 0 {
					v[i] = uint64(rng.IntN(1 << 18))
				}
			}
			must(t, c.Set(id, v...))
			m.put(name, id, v)
		case p < 85:
			must(t, c.Delete(id))
			m.put(name, id, make([]uint64, len(cols)))
		case p < 92:
			// Seal one of the counter's ranges.
			set := c.state().ranges.Load()
			rids := set.sortedIDs()
			if len(rids) > 0 {
				must(t, db.SealRange(ctx, name, rids[rng.IntN(len(rids))]))
			}
		case p < 95:
			must(t, db.Compact(ctx))
		case p < 97:
			must(t, db.Checkpoint())
		case p < 98:
			must(t, db.Close())
			db = openTest(t, fs, "scan", opts)
		default:
			verify(fmt.Sprintf("step %d", step))
		}
	}
	verify("end")
	tiers := map[string]int{}
	for _, name := range counters {
		c, err := db.Counter(name)
		must(t, err)
		for _, rs := range c.state().ranges.Load().m {
			tiers[rs.tier()]++
		}
	}
	t.Logf("ranges by tier at the end: %v", tiers)
}

// TestScanEdges: an empty counter, from past the last id, limit 1, fn
// stopping, ids 0 and 2^64-1, a page that ends on the last row, a cold
// range read through its delta, a cancelled context and a closed store.
func TestScanEdges(t *testing.T) {
	fs := vfs.NewMem()
	db := openTest(t, fs, "edges", testOptions(fs))
	ctx := context.Background()
	c := newPosts(t, db, 16)
	collect := func(from uint64, limit int) ([]uint64, uint64) {
		t.Helper()
		var ids []uint64
		next, err := c.Scan(ctx, from, limit, func(id uint64, vals []uint64) bool {
			if len(vals) != 3 || allZero(vals) {
				t.Fatalf("id %d: values %v", id, vals)
			}
			ids = append(ids, id)
			return true
		})
		must(t, err)
		return ids, next
	}

	if ids, next := collect(0, 10); len(ids) != 0 || next != 0 {
		t.Fatalf("empty counter: %v, next %d", ids, next)
	}
	const top = math.MaxUint64
	for _, id := range []uint64{0, 5, 1 << 16, top - 1, top} {
		must(t, c.Set(id, 1, 2, 3))
	}
	// A row set and deleted, and one set to zeros, are not visited.
	must(t, c.Set(7, 1, 1, 1))
	must(t, c.Delete(7))
	must(t, c.Set(1<<40, 0, 0, 0))

	if ids, next := collect(0, 0); !slices.Equal(ids, []uint64{0, 5, 1 << 16, top - 1, top}) || next != 0 {
		t.Fatalf("no limit: %v, next %d", ids, next)
	}
	// Limit 1: one row a page, the cursor is the id after it.
	var all []uint64
	for from, pages := uint64(0), 0; ; pages++ {
		ids, next := collect(from, 1)
		all = append(all, ids...)
		if next == 0 {
			if pages != 4 || len(ids) != 1 || ids[0] != top {
				t.Fatalf("limit 1: ended after %d pages with %v", pages, ids)
			}
			break
		}
		if len(ids) != 1 || next != ids[0]+1 {
			t.Fatalf("limit 1 from %d: %v, next %d", from, ids, next)
		}
		from = next
	}
	if !slices.Equal(all, []uint64{0, 5, 1 << 16, top - 1, top}) {
		t.Fatalf("limit 1 pages: %v", all)
	}
	// A page ending on the row before the last: next is the last id.
	if ids, next := collect(6, 2); !slices.Equal(ids, []uint64{1 << 16, top - 1}) || next != top {
		t.Fatalf("from 6 limit 2: %v, next %d", ids, next)
	}
	// From the last id, and from past every row of a range.
	if ids, next := collect(top, 5); !slices.Equal(ids, []uint64{top}) || next != 0 {
		t.Fatalf("from 2^64-1: %v, next %d", ids, next)
	}
	if ids, next := collect(1<<16+1, 5); !slices.Equal(ids, []uint64{top - 1, top}) || next != 0 {
		t.Fatalf("from 1<<16+1: %v, next %d", ids, next)
	}
	must(t, c.Delete(top))
	must(t, c.Delete(top-1))
	if ids, next := collect(1<<16+1, 5); len(ids) != 0 || next != 0 {
		t.Fatalf("past the last id: %v, next %d", ids, next)
	}
	// fn returning false stops after that row.
	next, err := c.Scan(ctx, 0, 10, func(id uint64, _ []uint64) bool { return id < 5 })
	if err != nil || next != 6 {
		t.Fatalf("stop at 5: next %d, %v", next, err)
	}

	// Cold: the range of 0 and 5 sealed; 5 deleted and 9 added in the
	// delta, 0 updated.
	must(t, db.SealRange(ctx, "posts", 0))
	must(t, c.Delete(5))
	must(t, c.Set(9, 4, 0, 0))
	must(t, c.Set(0, 8, 8, 8))
	var rows []scanRow
	if _, err := c.Scan(ctx, 0, 0, func(id uint64, v []uint64) bool {
		rows = append(rows, scanRow{id, slices.Clone(v)})
		return true
	}); err != nil {
		t.Fatal(err)
	}
	want := []scanRow{{0, []uint64{8, 8, 8}}, {9, []uint64{4, 0, 0}}, {1 << 16, []uint64{1, 2, 3}}}
	if !slices.EqualFunc(rows, want, func(a, b scanRow) bool { return a.id == b.id && slices.Equal(a.vals, b.vals) }) {
		t.Fatalf("cold with delta: %v, want %v", rows, want)
	}

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if next, err := c.Scan(cctx, 3, 10, func(uint64, []uint64) bool { return true }); !errors.Is(err, context.Canceled) || next != 3 {
		t.Fatalf("cancelled: next %d, %v", next, err)
	}
	must(t, db.Close())
	if _, err := c.Scan(ctx, 0, 10, func(uint64, []uint64) bool { return true }); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed: %v", err)
	}
}

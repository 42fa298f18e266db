package store_test

// Store benchmarks (issues 2 and 3). Sizes come from environment variables
// so `go test -bench=. ./store/` stays quick; the figures in
// bench/RESULTS.md use the full sizes:
//
//	TALLY_BENCH_ROWS=20000000   stored rows of the hot-table benchmarks
//	TALLY_BENCH_LOG=2000000     log records for BenchmarkOpen
//	TALLY_HEAP_PROFILE=FILE     BenchmarkMultiGet10 writes the heap profile
//	                            after its load (inuse_space, for issue 19)
//
// Data: the bench/workload generator (55% of items never counted,
// power-law counts, tail above 65,535 under 1 in 100,000), 2 columns with
// 16-bit hints. Ids are time-ordered and spread over one range of
// 2^rangeBits ids so "a 20M-row table" is one hot table.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tallydb/tally/bench/workload"
	"github.com/tallydb/tally/internal/procmem"
	"github.com/tallydb/tally/internal/testutil"
	"github.com/tallydb/tally/store"
)

// dataset is a generated counter data set over one range.
type dataset struct {
	ids     []uint64 // every item, zero ones included, increasing
	present []uint64 // the items with a non-zero row
	load    store.LoadRows
}

var (
	dataMu    sync.Mutex
	dataCache = map[string]*dataset{}
)

// genData returns ~rows stored rows (and ~rows/0.45 items) in range 1 of
// 2^rangeBits ids.
func genData(rows int, rangeBits uint) *dataset {
	key := fmt.Sprint(rows, rangeBits)
	dataMu.Lock()
	defer dataMu.Unlock()
	if d := dataCache[key]; d != nil {
		return d
	}
	items := uint64(float64(rows) / 0.45)
	w := workload.MustNew(workload.Config{Seed: 1, Items: items, Columns: 2})
	d := &dataset{ids: make([]uint64, 0, items)}
	base := uint64(1) << rangeBits
	stride := (uint64(1) << rangeBits) / items
	vals := make([]uint64, 2)
	for i := uint64(0); i < items; i++ {
		// Time-ordered: item i's id grows with i, with jitter inside its slot.
		id := base + i*stride + uint64(rand.N(max(stride, 1)))
		d.ids = append(d.ids, id)
		vals = w.Values(i, vals[:0])
		if !workload.IsZero(vals) {
			d.present = append(d.present, id)
			d.load.IDs = append(d.load.IDs, id)
			d.load.Vals = append(d.load.Vals, vals...)
		}
	}
	dataCache[key] = d
	return d
}

type benchDB struct {
	db *store.DB
	c  *store.Counter
	d  *dataset
	// base is the process's memory before Open (the data set already
	// generated), for growth figures.
	base procmem.Mem
}

// memPerRow is memory per row two ways: the store's accounting (what
// Stats counts) and the process's measured growth since Open (Go heap;
// RSS). They differ because the accounting counts only the tables' own
// arrays and maps: the heap adds allocator size-class rounding, the
// decoded block cache and Pebble's Go-side structures, and RSS adds
// Pebble's memtable and block cache (allocated outside the Go heap when cgo
// is on), the runtime's own memory and pages the allocator keeps. Much of
// the difference is fixed, so it shrinks per row as rows grow: a heap
// profile at 1M hot rows showed the tables (≈ the accounting) and ~6 MB of
// Pebble's WAL writer buffers (record.LogWriter blocks), so heap-B/row was
// ~18 against ~8.3 accounted.
type memPerRow struct{ store, heap, rss float64 }

func (bd *benchDB) memPerRow(storeBytes int64, rows int) memPerRow {
	d := procmem.Measure().Sub(bd.base)
	n := float64(rows)
	return memPerRow{float64(storeBytes) / n, float64(d.Heap) / n, float64(d.RSS) / n}
}

// report adds the figures to b; call it after the timed loop (ResetTimer
// drops metrics reported before it).
func (m memPerRow) report(b *testing.B) {
	b.ReportMetric(m.store, "store-B/row")
	b.ReportMetric(m.heap, "heap-B/row")
	b.ReportMetric(m.rss, "rss-B/row")
}

func openBench(b *testing.B, dir string, o *store.Options, rows int, rangeBits uint, age store.AgePolicy) *benchDB {
	b.Helper()
	if o == nil {
		o = &store.Options{}
	}
	o.CompactionInterval = -1
	d := genData(rows, rangeBits)
	// NB: the cleanup is registered before the baseline. A benchmark
	// function runs several times (b.N = 1 first); testing runs each run's
	// cleanups but its cleanup slice keeps the last closure, and with it
	// the previous run's closed store, reachable until a new cleanup takes
	// the slot. Registered later, the previous store would be in this
	// run's baseline and freed during its load.
	var db *store.DB
	b.Cleanup(func() {
		if db != nil {
			db.Close()
		}
	})
	base := procmem.Measure()
	db, err := store.Open(dir, o)
	if err != nil {
		b.Fatal(err)
	}
	if err := db.CreateCounter("posts", store.CounterOptions{RangeBits: uint8(rangeBits), Age: age}); err != nil {
		b.Fatal(err)
	}
	for _, col := range []string{"likes", "comments"} {
		if err := db.AddColumn("posts", col, store.ColumnOptions{HintBits: 16, MaxBits: 32}); err != nil {
			b.Fatal(err)
		}
	}
	c, _ := db.Counter("posts")
	if _, err := db.Load(context.Background(), "posts", d.load, nil); err != nil {
		b.Fatal(err)
	}
	return &benchDB{db: db, c: c, d: d, base: base}
}

// BenchmarkMultiGet10 reads feed pages of 10 random items (55% of them
// never counted) from one hot table of TALLY_BENCH_ROWS rows. Run with
// -cpu 1,2 for scaling. Reports ids/s and memory per stored row three
// ways: the table's own accounting (store-B/row, Stats' MemBytes of the
// hot range), the Go heap's growth since Open (heap-B/row) and the
// process's RSS growth (rss-B/row); see reportMem for why they differ.
func BenchmarkMultiGet10(b *testing.B) {
	rows := testutil.EnvInt(b, "TALLY_BENCH_ROWS", 1_000_000)
	bd := openBench(b, b.TempDir(), nil, rows, 32, store.AgePolicy{})
	st := bd.db.Stats().Counters[0]
	mem := bd.memPerRow(st.MemBytes, st.HotRows)
	writeHeapProfile(b)
	pages := pickPages(bd.d.ids, 1<<17)
	b.ReportAllocs()
	b.ResetTimer()
	var client atomic.Uint64
	b.RunParallel(func(pb *testing.PB) {
		off := int(client.Add(1)) * 7919 * 10
		dst := make([]uint64, 20)
		for pb.Next() {
			off = (off + 10) % len(pages)
			if _, err := bd.c.MultiGet(pages[off:off+10], dst); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N*10)/b.Elapsed().Seconds(), "ids/s")
	mem.report(b)
}

// writeHeapProfile writes the Go heap profile (inuse_space after a
// collection) to $TALLY_HEAP_PROFILE if set: the allocation sites behind
// heap-B/row, for the per-site table of bench/RESULTS.md (issue 19). The
// data set the benchmark generated is in it too (genData, workload).
func writeHeapProfile(b *testing.B) {
	path := os.Getenv("TALLY_HEAP_PROFILE")
	if path == "" {
		return
	}
	runtime.GC()
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		b.Fatal(err)
	}
}

// pickPages returns n pages of 10 ids drawn uniformly from ids, laid out
// one after another: a benchmark reads them sequentially, as a server reads
// the ids of a request, so the benchmark adds no cache miss of its own.
func pickPages(ids []uint64, n int) []uint64 {
	rng := rand.New(rand.NewPCG(9, 9))
	out := make([]uint64, n*10)
	for i := range out {
		out[i] = ids[rng.IntN(len(ids))]
	}
	return out
}

// BenchmarkIncr measures increments per second under each durability mode
// with 1, 8 and 64 concurrent writers, on the real filesystem.
func BenchmarkIncr(b *testing.B) {
	for _, d := range []store.Durability{store.SyncAlways, store.SyncInterval, store.NoSync} {
		for _, writers := range []int{1, 8, 64} {
			b.Run(fmt.Sprintf("%s/writers=%d", d, writers), func(b *testing.B) {
				bd := openBench(b, b.TempDir(), &store.Options{Durability: d}, 100_000, 32, store.AgePolicy{})
				ids := bd.d.ids
				runWriters(b, writers, func(rng *rand.Rand, _ *[]byte) error {
					_, err := bd.c.Incr(ids[rng.IntN(len(ids))], "likes", 1)
					return err
				})
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "incr/s")
			})
		}
	}
}

// runWriters runs b.N calls of op spread over writers goroutines, each with
// its own random source and scratch buffer, after resetting the timer.
func runWriters(b *testing.B, writers int, op func(rng *rand.Rand, buf *[]byte) error) {
	b.ReportAllocs()
	b.ResetTimer()
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 5))
			var buf []byte
			for next.Add(1) <= int64(b.N) {
				if err := op(rng, &buf); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// BenchmarkOpen measures recovery: Open of a store holding TALLY_BENCH_ROWS
// checkpointed rows plus TALLY_BENCH_LOG log records to replay.
func BenchmarkOpen(b *testing.B) {
	rows := testutil.EnvInt(b, "TALLY_BENCH_ROWS", 1_000_000)
	logN := testutil.EnvInt(b, "TALLY_BENCH_LOG", rows/10)
	dir := b.TempDir()
	bd := openBench(b, dir, &store.Options{Durability: store.NoSync, CheckpointLogBytes: -1, CheckpointInterval: -1}, rows, 32, store.AgePolicy{})
	ids := bd.d.ids
	batch := bd.db.NewBatch()
	for i := 0; i < logN; i++ {
		if err := batch.Incr("posts", ids[(i*7919)%len(ids)], "likes", 1); err != nil {
			b.Fatal(err)
		}
		if batch.Len() == 1 || i == logN-1 { // one record per write, like a live store
			if err := batch.Commit(); err != nil {
				b.Fatal(err)
			}
			batch.Reset()
		}
	}
	batch.Close()
	if err := bd.db.SyncWAL(); err != nil {
		b.Fatal(err)
	}
	// Copy the store aside before Close checkpoints it, so every iteration
	// replays the log.
	snap := b.TempDir()
	if err := copyDir(dir, snap); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	var rec store.RecoveryStats
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		work := b.TempDir()
		if err := copyDir(snap, work); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		db, err := store.Open(work, &store.Options{DisableBackground: true})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		rec = db.Stats().Recovery
		db.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(rec.RowsLoaded), "rows")
	b.ReportMetric(float64(rec.RecordsReplayed), "records")
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/open")
}

func copyDir(src, dst string) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range entries {
		s, d := src+"/"+e.Name(), dst+"/"+e.Name()
		if e.IsDir() {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return err
			}
			if err := copyDir(s, d); err != nil {
				return err
			}
			continue
		}
		if e.Name() == "TALLY.LOCK" || e.Name() == "LOCK" {
			continue
		}
		data, err := os.ReadFile(s)
		if err != nil {
			return err
		}
		if err := os.WriteFile(d, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// coldBench is a store whose one range of TALLY_BENCH_ROWS rows was sealed
// into cold blocks, then checkpointed (dropping the hot table's chunks) and
// compacted, so Pebble's files hold only live data and the disk figures
// count them.
func coldBench(b *testing.B, cacheBytes int64) *benchDB {
	rows := testutil.EnvInt(b, "TALLY_BENCH_ROWS", 1_000_000)
	bd := openBench(b, b.TempDir(), &store.Options{BlockCacheSize: cacheBytes}, rows, 32, store.AgePolicy{})
	ctx := context.Background()
	if err := bd.db.SealRange(ctx, "posts", 1); err != nil {
		b.Fatal(err)
	}
	if err := bd.db.Checkpoint(); err != nil {
		b.Fatal(err)
	}
	if err := bd.db.CompactDisk(ctx); err != nil {
		b.Fatal(err)
	}
	if st := bd.db.Stats().Counters[0]; st.ColdRows != len(bd.d.present) {
		b.Fatalf("cold rows %d, want %d", st.ColdRows, len(bd.d.present))
	}
	return bd
}

// BenchmarkColdMultiGet10 reads 10 ids from a sealed range: "cached" with a
// cache holding every block (target ≤ 5 µs per call), "absent" with ids the
// range does not hold, drawn uniformly over the range (target ≤ 200 ns per
// id), "uncached" with a cache far smaller than the data (reports p50/p99
// per call). Every mode reports bytes per cold row on disk two ways:
// disk-B/row is the bytes of Pebble's data files once checkpointed and
// compacted, when the range is all the store holds (Stats.TableBytes),
// payload-B/row tally's encoded blocks and descriptor (what it hands
// Pebble, which adds keys and index blocks and compresses again); and memory per cold row three ways (store-B/row: the
// descriptors Stats counts; heap-B/row, rss-B/row: the process's growth
// since Open), measured after the seal, before any read fills the block
// cache.
func BenchmarkColdMultiGet10(b *testing.B) {
	for _, mode := range []string{"cached", "absent", "uncached"} {
		b.Run(mode, func(b *testing.B) {
			cache := int64(1 << 30)
			if mode == "uncached" {
				cache = 1 << 20
			}
			bd := coldBench(b, cache)
			st := bd.db.Stats().Counters[0]
			mem := bd.memPerRow(st.MemBytes, st.ColdRows)
			pool := bd.d.present
			if mode == "absent" {
				pool = absentIDs(bd.d, 1<<16)
			}
			pages := pickPages(pool, 1<<16)
			dst := make([]uint64, 20)
			if mode == "cached" { // warm every block
				for i := 0; i < len(pool); i += 10 {
					bd.c.MultiGet(pool[i:min(i+10, len(pool))], dst)
				}
			}
			lat := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				off := (i * 10) % len(pages)
				batch := pages[off : off+10]
				t0 := time.Now()
				if _, err := bd.c.MultiGet(batch, dst); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
			b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
			b.ReportMetric(b.Elapsed().Seconds()*1e9/float64(b.N*10), "ns/id")
			// The store holds only this cold range now (checkpointed and
			// compacted): Pebble's data files are its disk bytes.
			b.ReportMetric(float64(bd.db.Stats().TableBytes)/float64(st.ColdRows), "disk-B/row")
			b.ReportMetric(st.PayloadBytesPerColdRow(), "payload-B/row")
			mem.report(b)
		})
	}
}

// absentIDs returns n ids that hold no row, drawn uniformly over the items
// of the range (never a leading, cache-resident slice of it).
func absentIDs(d *dataset, n int) []uint64 {
	present := make(map[uint64]struct{}, len(d.present))
	for _, id := range d.present {
		present[id] = struct{}{}
	}
	var absent []uint64
	for _, id := range d.ids {
		if _, ok := present[id]; !ok {
			absent = append(absent, id)
		}
	}
	rng := rand.New(rand.NewPCG(4, 4))
	out := make([]uint64, n)
	for i := range out {
		out[i] = absent[rng.IntN(len(absent))]
	}
	return out
}

// BenchmarkSeal measures sealing throughput: a hot range of
// TALLY_BENCH_ROWS rows aged into cold blocks (target ≥ 5M rows/s).
func BenchmarkSeal(b *testing.B) {
	rows := testutil.EnvInt(b, "TALLY_BENCH_ROWS", 1_000_000)
	var total time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		dir, err := os.MkdirTemp("", "tally-seal-")
		if err != nil {
			b.Fatal(err)
		}
		bd := openBench(b, dir, &store.Options{CompactionBytesPerSec: -1}, rows, 32, store.AgePolicy{})
		b.StartTimer()
		t0 := time.Now()
		if err := bd.db.SealRange(context.Background(), "posts", 1); err != nil {
			b.Fatal(err)
		}
		total += time.Since(t0)
		b.StopTimer()
		bd.db.Close()
		os.RemoveAll(dir) // one store at a time on disk
		b.StartTimer()
	}
	b.ReportMetric(float64(len(genData(rows, 32).present))*float64(b.N)/total.Seconds(), "rows/s")
}

// BenchmarkMultiGetWhileSealing compares the p99 of hot MultiGet calls on
// one range while another range of the same size is being sealed (paced by
// the default CompactionBytesPerSec) against the p99 while idle.
func BenchmarkMultiGetWhileSealing(b *testing.B) {
	rows := testutil.EnvInt(b, "TALLY_BENCH_ROWS", 1_000_000)
	bd := openBench(b, b.TempDir(), nil, rows, 32, store.AgePolicy{})
	// A second range to seal: the same rows shifted one range up.
	d := bd.d
	shifted := store.LoadRows{Vals: d.load.Vals}
	for _, id := range d.load.IDs {
		shifted.IDs = append(shifted.IDs, id+1<<32)
	}
	if _, err := bd.db.Load(context.Background(), "posts", shifted, nil); err != nil {
		b.Fatal(err)
	}
	measure := func(dur time.Duration) []time.Duration {
		rng := rand.New(rand.NewPCG(3, 3))
		batch, dst := make([]uint64, 10), make([]uint64, 20)
		var lat []time.Duration
		for end := time.Now().Add(dur); time.Now().Before(end); {
			for j := range batch {
				batch[j] = d.ids[rng.IntN(len(d.ids))]
			}
			t0 := time.Now()
			bd.c.MultiGet(batch, dst)
			lat = append(lat, time.Since(t0))
		}
		slices.Sort(lat)
		return lat
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		idle := measure(500 * time.Millisecond)
		done := make(chan error)
		go func() { done <- bd.db.SealRange(context.Background(), "posts", 2) }()
		var busy []time.Duration
		for {
			busy = append(busy, measure(20*time.Millisecond)...)
			select {
			case err := <-done:
				if err != nil {
					b.Fatal(err)
				}
				slices.Sort(busy)
				p99 := func(l []time.Duration) float64 { return float64(l[len(l)*99/100].Nanoseconds()) }
				b.ReportMetric(p99(idle), "idle-p99-ns")
				b.ReportMetric(p99(busy), "sealing-p99-ns")
				b.ReportMetric(p99(busy)/p99(idle), "p99-ratio")
				goto next
			default:
			}
		}
	next:
	}
}

// BenchmarkApplyEntry is a replica's apply of one-command entries (an
// increment of a uniform random row each, NoSync) inside ApplyEntry:
// "plain" numbers commits across the entry, "commands" declares the
// command first (DB.ApplyCommand, as server.Apply does), which adds the
// raft.cmd record to every numbered commit.
func BenchmarkApplyEntry(b *testing.B) {
	for _, declare := range []bool{false, true} {
		name := "plain"
		if declare {
			name = "commands"
		}
		b.Run(name, func(b *testing.B) {
			bd := openBench(b, b.TempDir(), &store.Options{Durability: store.NoSync}, 100_000, 32, store.AgePolicy{})
			ids := bd.d.ids
			rng := rand.New(rand.NewPCG(1, 9))
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				err := bd.db.ApplyEntry(uint64(i)+1, func() error {
					if declare {
						if err := bd.db.ApplyCommand(1); err != nil {
							return err
						}
					}
					_, err := bd.c.Incr(ids[rng.IntN(len(ids))], "likes", 1)
					return err
				})
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

package store_test

import (
	"context"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/tallydb/tally/bench/workload"
	"github.com/tallydb/tally/internal/procmem"
	"github.com/tallydb/tally/store"
)

// BenchmarkBigColdMemory loads TALLY_BENCH_BIG rows (e.g. 200000000) in
// 4M-row ranges of 2^32 ids, the newest 20% hot and the rest cold (a
// KeepNewest policy), then reports the process's resident memory and bytes
// per row overall, in memory and on disk: memory as the process's RSS
// growth, the Go heap's growth and the store's own accounting (see
// memPerRow in bench_test.go for why they differ); disk as Pebble's data
// files (table-B/row: sstables of hot checkpoint chunks and cold blocks,
// after a flush) and every file (disk-B/row, with the WAL), and the cold
// tier's encoded payload (cold-payload-B/row). Pebble's file bytes are not
// split by tier. Opt-in: skipped unless
// TALLY_BENCH_BIG is set; 200M rows take several minutes and ~10 GiB of
// transient memory for the generated input.
func BenchmarkBigColdMemory(b *testing.B) {
	total, _ := strconv.Atoi(os.Getenv("TALLY_BENCH_BIG"))
	if total <= 0 {
		b.Skip("set TALLY_BENCH_BIG=200000000 to run")
	}
	const perRange = 4_000_000
	ranges := max(total/perRange, 5)
	hotRanges := ranges / 5
	dir := b.TempDir()
	db, err := store.Open(dir, &store.Options{Durability: store.NoSync, CompactionInterval: -1, CheckpointLogBytes: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	if err := db.CreateCounter("posts", store.CounterOptions{RangeBits: 32,
		Age: store.AgePolicy{Kind: store.KeepNewest, HotRanges: hotRanges}}); err != nil {
		b.Fatal(err)
	}
	for _, col := range []string{"likes", "comments"} {
		if err := db.AddColumn("posts", col, store.ColumnOptions{HintBits: 16, MaxBits: 32}); err != nil {
			b.Fatal(err)
		}
	}
	w := workload.MustNew(workload.Config{Seed: 2, Items: 1 << 40, Columns: 2})
	item := uint64(0)
	gen := func(rid uint64) store.LoadRows {
		var in store.LoadRows
		in.IDs = make([]uint64, 0, perRange)
		in.Vals = make([]uint64, 0, 2*perRange)
		rng := rand.New(rand.NewPCG(rid, 1))
		vals := make([]uint64, 2)
		stride := uint64(1<<32) / (perRange * 9 / 4) // ~55% of items stay zero
		for key := uint64(0); len(in.IDs) < perRange && key < 1<<32-stride; key += stride {
			vals = w.Values(item, vals[:0])
			item++
			if workload.IsZero(vals) {
				continue
			}
			in.IDs = append(in.IDs, rid<<32|key+uint64(rng.IntN(int(stride))))
			in.Vals = append(in.Vals, vals...)
		}
		return in
	}
	base := procmem.Measure()
	b.ResetTimer()
	start := time.Now()
	// Newest first, so the policy ranks the old ranges as old when they
	// arrive and Load builds them straight into cold blocks. The hot ranges
	// go in one Load so they are checkpointed once.
	var hotIn store.LoadRows
	for r := ranges; r > ranges-hotRanges; r-- {
		in := gen(uint64(r))
		hotIn.IDs = append(hotIn.IDs, in.IDs...)
		hotIn.Vals = append(hotIn.Vals, in.Vals...)
	}
	if _, err := db.Load(context.Background(), "posts", hotIn, nil); err != nil {
		b.Fatal(err)
	}
	hotIn = store.LoadRows{}
	for r := ranges - hotRanges; r > 0; r-- {
		if _, err := db.Load(context.Background(), "posts", gen(uint64(r)), nil); err != nil {
			b.Fatal(err)
		}
	}
	loadTime := time.Since(start)
	b.StopTimer()
	if err := db.Flush(); err != nil { // disk figures count Pebble's files
		b.Fatal(err)
	}
	grown := procmem.Measure().Sub(base)
	st := db.Stats()
	c := st.Counters[0]
	rows := float64(c.Rows())
	b.ReportMetric(rows, "rows")
	b.ReportMetric(float64(c.ColdRows)/rows, "cold-fraction")
	b.ReportMetric(float64(procmem.RSS())/(1<<20), "rss-MiB")
	b.ReportMetric(float64(grown.RSS)/rows, "rss-B/row")
	b.ReportMetric(float64(c.MemBytes)/rows, "store-mem-B/row")
	b.ReportMetric(float64(grown.Heap)/rows, "heap-B/row")
	b.ReportMetric(c.BytesPerHotRow(), "hot-B/row")
	b.ReportMetric(c.PayloadBytesPerColdRow(), "cold-payload-B/row")
	b.ReportMetric(float64(st.TableBytes)/rows, "table-B/row")
	b.ReportMetric(float64(st.DiskBytes)/rows, "disk-B/row")
	b.ReportMetric(rows/loadTime.Seconds(), "load-rows/s")
}

package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/tallydb/tally/internal/testutil"
	"github.com/tallydb/tally/store"
)

// BenchmarkScan pages through one range of TALLY_BENCH_ROWS stored rows
// (the data of BenchmarkMultiGet10) with Counter.Scan, hot and sealed cold
// (block cache holding every block), in pages of 10 rows (Redis SCAN's
// default COUNT) and 1,000 rows from cursors drawn uniformly over the
// range, and the whole range in one call from 0. An op is one page. Reports rows/s and
// µs per page, by wall time and by the CPU time of the benchmark's thread
// (on a shared machine the second is the figure to quote): a page costs a pass over the range's hash tables and a walk
// of its cold keys up to the cursor (scan.go, "Cost"), so small pages of a
// large range are slow.
func BenchmarkScan(b *testing.B) {
	rows := testutil.EnvInt(b, "TALLY_BENCH_ROWS", 1_000_000)
	for _, tier := range []string{"hot", "cold"} {
		b.Run(tier, func(b *testing.B) { benchScan(b, tier, rows) })
	}
}

func benchScan(b *testing.B, tier string, rows int) {
	var bd *benchDB
	if tier == "hot" {
		bd = openBench(b, b.TempDir(), nil, rows, 32, store.AgePolicy{})
	} else {
		bd = coldBench(b, 1<<30)
	}
	for _, page := range []int{10, 1000, 0} {
		name := fmt.Sprint("page=", page)
		if page == 0 {
			name = "page=all"
		}
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			rng := rand.New(rand.NewPCG(20, uint64(page)))
			starts := make([]uint64, 4096)
			for i := range starts {
				starts[i] = bd.d.present[rng.IntN(len(bd.d.present))]
			}
			visited := 0
			fn := func(uint64, []uint64) bool { visited++; return true }
			b.ReportAllocs()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			b.ResetTimer()
			cpu0 := threadCPU()
			for i := 0; i < b.N; i++ {
				from := uint64(0)
				if page > 0 {
					from = starts[i%len(starts)]
				}
				if _, err := bd.c.Scan(ctx, from, page, fn); err != nil {
					b.Fatal(err)
				}
			}
			cpu := threadCPU() - cpu0
			b.StopTimer()
			if page == 0 && visited != b.N*len(bd.d.present) {
				b.Fatalf("visited %d rows in %d full scans of %d", visited, b.N, len(bd.d.present))
			}
			b.ReportMetric(float64(visited)/b.Elapsed().Seconds(), "rows/s")
			b.ReportMetric(b.Elapsed().Seconds()*1e6/float64(b.N), "µs/page")
			b.ReportMetric(float64(visited)/cpu.Seconds(), "rows/cpu-s")
			b.ReportMetric(cpu.Seconds()*1e6/float64(b.N), "cpu-µs/page")
		})
	}
}

// threadCPU returns the CPU time of the calling OS thread (the caller locks
// its goroutine to it), which other processes on a shared machine do not
// inflate as they inflate wall time.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
